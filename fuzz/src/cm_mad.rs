//! CM MADs: arbitrary bytes to `CmMessage::parse`; what parses is emitted again (with the parsed
//! transaction ID) and must parse to the same message under the header this codec writes. The
//! same bytes also go to `CmaHdr::parse` (the rdma_cm IP header of REQ private data), whose result
//! must survive emit and parse as well.

use wire::ib::cm::CmMessage;
use wire::ib::cma::{CMA_HDR_LEN, CmaHdr};
use wire::ib::mad::{MAD_LEN, METHOD_SEND, MadHeader};

pub fn run(data: &[u8]) {
    if let Ok((hdr, msg)) = CmMessage::parse(data) {
        assert_eq!(hdr.attr_id, msg.attr_id());
        assert_eq!(msg.private_data().len(), msg.private_capacity());
        let mut out = [0u8; MAD_LEN];
        assert_eq!(msg.emit(hdr.tid, &mut out), Ok(MAD_LEN));
        let (hdr2, msg2) = CmMessage::parse(&out).expect("an emitted CM MAD parses");
        assert_eq!(msg2, msg);
        assert_eq!(MadHeader { method: METHOD_SEND, status: 0, class_specific: 0, attr_mod: 0, ..hdr }, hdr2);
        // Byte-exact where the input had no reserved bits set: emitting the re-parsed message
        // gives the same bytes again.
        let mut again = [0u8; MAD_LEN];
        assert_eq!(msg2.emit(hdr2.tid, &mut again), Ok(MAD_LEN));
        assert_eq!(again, out);
    }
    if let Ok(h) = CmaHdr::parse(data) {
        let mut out = [0u8; CMA_HDR_LEN];
        assert_eq!(h.emit(&mut out), Ok(CMA_HDR_LEN));
        assert_eq!(CmaHdr::parse(&out), Ok(h));
    }
}
