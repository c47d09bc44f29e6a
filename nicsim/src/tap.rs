//! The pcap tap: every frame a port sends, recorded before the link impairs it.

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::{DataLink, Endianness, TsResolution};
use std::io::Write;
use std::time::Duration;

/// One recorded frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TapRecord {
    /// Virtual time of transmission.
    pub time: Duration,
    /// Index of the sending port.
    pub port: usize,
    /// The frame as sent.
    pub bytes: Vec<u8>,
}

/// Writes records as a nanosecond pcap file (LINKTYPE_ETHERNET) to `out`.
pub fn write_pcap<W: Write>(out: W, records: &[TapRecord]) -> Result<(), pcap_file::PcapError> {
    let header = PcapHeader {
        snaplen: 65_535,
        datalink: DataLink::ETHERNET,
        ts_resolution: TsResolution::NanoSecond,
        endianness: Endianness::Little,
        ..PcapHeader::default()
    };
    let mut w = PcapWriter::with_header(out, header)?;
    for r in records {
        w.write_packet(&PcapPacket::new(r.time, r.bytes.len() as u32, &r.bytes))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pcap_file::pcap::PcapReader;

    #[test]
    fn writes_readable_nanosecond_pcap() {
        let recs = vec![
            TapRecord { time: Duration::from_nanos(1_500), port: 0, bytes: vec![1, 2, 3] },
            TapRecord { time: Duration::from_nanos(2_000_000_007), port: 1, bytes: vec![4; 60] },
        ];
        let mut out = Vec::new();
        write_pcap(&mut out, &recs).unwrap();
        let mut r = PcapReader::new(&out[..]).unwrap();
        let p = r.next_packet().unwrap().unwrap();
        assert_eq!((p.timestamp, &p.data[..]), (Duration::from_nanos(1_500), &[1u8, 2, 3][..]));
        let p = r.next_packet().unwrap().unwrap();
        assert_eq!(p.timestamp, Duration::from_nanos(2_000_000_007));
        assert!(r.next_packet().is_none());
    }
}
