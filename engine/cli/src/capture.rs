//! Reading pcap and pcapng files (the `wire` crate does no I/O, so captures live here).

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use pcap_file::Endianness;
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapReader, PcapWriter};
use pcap_file::pcapng::{Block, PcapNgReader};

/// Link-layer type of Ethernet in pcap headers and pcapng interface blocks.
pub const LINKTYPE_ETHERNET: u32 = 1;

/// One frame as a capture file stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapturedFrame {
    /// Capture timestamp since the epoch.
    pub timestamp: Duration,
    /// Link-layer type of the interface the frame was captured on.
    pub linktype: u32,
    /// Length of the frame on the wire (may exceed `data.len()` when the snap length cut it).
    pub orig_len: u32,
    /// The captured bytes.
    pub data: Vec<u8>,
}

/// Reads every frame of a pcap or pcapng file (told apart by their magic numbers).
pub fn read_file(path: &Path) -> Result<Vec<CapturedFrame>> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    read_bytes(&bytes).with_context(|| format!("{} is not a readable pcap or pcapng file", path.display()))
}

/// Reads every frame of a pcap or pcapng image held in memory.
pub fn read_bytes(bytes: &[u8]) -> Result<Vec<CapturedFrame>> {
    const PCAPNG_MAGIC: [u8; 4] = [0x0A, 0x0D, 0x0D, 0x0A];
    let mut frames = Vec::new();
    match bytes.get(..4) {
        Some(m) if m == PCAPNG_MAGIC => {
            let mut r = PcapNgReader::new(bytes)?;
            while let Some(block) = r.next_block() {
                let (iface, timestamp, orig_len, data) = match block? {
                    Block::EnhancedPacket(p) => {
                        (p.interface_id, p.timestamp, p.original_len, p.data.into_owned())
                    }
                    Block::SimplePacket(p) => (0, Duration::ZERO, p.original_len, p.data.into_owned()),
                    _ => continue,
                };
                let Some(desc) = r.interfaces().get(iface as usize) else {
                    bail!("packet block names interface {iface}, which the file does not describe");
                };
                let linktype = u32::from(desc.linktype);
                frames.push(CapturedFrame { timestamp, linktype, orig_len, data });
            }
        }
        Some(_) => {
            // pcap_file refuses a record longer on the wire than the header's snap length, which
            // is every cut frame of a `tcpdump -s` or `--snaplen` file: read with the field at
            // its largest (the records' own lengths still bound each read).
            let mut header = [0u8; 24];
            let head = bytes.len().min(24);
            header[..head].copy_from_slice(&bytes[..head]);
            if head == 24 {
                header[16..20].copy_from_slice(&[0xFF; 4]);
            }
            let mut r = PcapReader::new(std::io::Read::chain(&header[..head], &bytes[head..]))?;
            let linktype = u32::from(r.header().datalink);
            while let Some(p) = r.next_packet() {
                let p = p?;
                frames.push(CapturedFrame {
                    timestamp: p.timestamp,
                    linktype,
                    orig_len: p.orig_len,
                    data: p.data.into_owned(),
                });
            }
        }
        None => bail!("file shorter than any capture header"),
    }
    Ok(frames)
}

/// Writes Ethernet frames to a pcap file (microsecond timestamps: frame `i` at `i` ms after the epoch,
/// so that the same frames give the same file).
pub fn write_file(path: &Path, frames: &[Vec<u8>]) -> Result<()> {
    let file = std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let header = PcapHeader { snaplen: 262_144, endianness: Endianness::Little, ..PcapHeader::default() };
    let mut w = PcapWriter::with_header(std::io::BufWriter::new(file), header)?;
    for (i, f) in frames.iter().enumerate() {
        let len = u32::try_from(f.len()).context("frame longer than 4 GiB")?;
        w.write_packet(&PcapPacket::new(Duration::from_millis(i as u64), len, f))?;
    }
    use std::io::Write as _;
    w.into_writer().flush().with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_garbage() {
        assert!(read_bytes(&[]).is_err());
        assert!(read_bytes(b"not a capture file at all").is_err());
        assert!(read_bytes(&[0x0A, 0x0D, 0x0D, 0x0A, 0, 0]).is_err());
    }

    #[test]
    fn reads_pcap_written_by_pcap_file() {
        let mut out = Vec::new();
        let mut w = PcapWriter::new(&mut out).unwrap();
        w.write_packet(&PcapPacket::new(Duration::from_micros(5), 3, &[1, 2, 3])).unwrap();
        let _ = w.into_writer();
        let frames = read_bytes(&out).unwrap();
        assert_eq!(frames.len(), 1);
        assert_eq!(frames[0].data, [1, 2, 3]);
        assert_eq!(frames[0].linktype, LINKTYPE_ETHERNET);
    }

    #[test]
    fn reads_frames_cut_by_the_snap_length() {
        let header = PcapHeader { snaplen: 64, ..PcapHeader::default() };
        let mut w = PcapWriter::with_header(Vec::new(), header).unwrap();
        let cut = [7u8; 64];
        w.write_packet(&PcapPacket::new(Duration::from_micros(5), 4000, &cut)).unwrap();
        w.write_packet(&PcapPacket::new(Duration::from_micros(6), 60, &cut[..60])).unwrap();
        let frames = read_bytes(&w.into_writer()).unwrap();
        let lens: Vec<_> = frames.iter().map(|f| (f.data.len(), f.orig_len)).collect();
        assert_eq!(lens, [(64, 4000), (60, 60)]);
    }

    #[test]
    fn reads_pcapng_with_two_interfaces() {
        use pcap_file::DataLink;
        use pcap_file::pcapng::PcapNgWriter;
        use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
        use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionBlock;
        use std::borrow::Cow;

        let mut w = PcapNgWriter::new(Vec::new()).unwrap();
        w.write_pcapng_block(InterfaceDescriptionBlock::new(DataLink::ETHERNET, 65535)).unwrap();
        w.write_pcapng_block(InterfaceDescriptionBlock::new(DataLink::LINUX_SLL, 65535)).unwrap();
        for (iface, data) in [(0u32, vec![1u8, 2, 3, 4]), (1, vec![9, 9])] {
            let epb = EnhancedPacketBlock {
                interface_id: iface,
                timestamp: Duration::from_micros(7),
                original_len: 100,
                data: Cow::Owned(data),
                options: vec![],
            };
            w.write_pcapng_block(epb).unwrap();
        }
        let frames = read_bytes(&w.into_inner()).unwrap();
        assert_eq!(frames.len(), 2);
        assert_eq!((frames[0].linktype, frames[0].orig_len), (LINKTYPE_ETHERNET, 100));
        assert_eq!(frames[0].data, [1, 2, 3, 4]);
        assert_eq!(frames[1].linktype, 113);
        assert_eq!(frames[0].timestamp, Duration::from_micros(7));
    }
}
