//! perftest 4.5's out-of-band exchange as `softrdma perf --perftest` parses a peer's messages: the
//! 16-byte version, the 2-byte MTU, the 108-byte handshake (`struct pingpong_dest`) and the five
//! report fields, cut from the input in that order. Nothing may panic; a handshake that parses
//! re-emits to itself.

use softrdma::perftest::messages::{DEST_LEN, Dest, Report, VERSION_LEN, parse_mtu, parse_version};

pub fn run(data: &[u8]) {
    let _ = parse_version(&data[..data.len().min(VERSION_LEN)]);
    if let [a, b, ..] = data {
        let _ = parse_mtu(&[*a, *b]);
    }
    for m in [data, &data[..data.len().min(DEST_LEN)]] {
        if let Some(d) = Dest::from_wire(m) {
            assert_eq!(Dest::from_wire(&d.to_wire()), Some(d));
        }
    }
    // Report fields of 8 bytes (4 for `iters` from peers older than 5.33), cut in turn.
    let mut rest = data;
    let fields: [Vec<u8>; 5] = std::array::from_fn(|i| {
        let n = if i == 1 && rest.first().is_some_and(|b| b & 1 == 1) { 4 } else { 8 };
        let (f, r) = rest.split_at(rest.len().min(n));
        rest = r;
        f.to_vec()
    });
    let r = Report::from_fields(&fields);
    if fields.iter().all(|f| f.len() == 8) {
        // Compared as bytes: a NaN is not equal to itself.
        assert_eq!(Report::from_fields(&r.fields(6.06)).fields(6.06), fields);
    }
}
