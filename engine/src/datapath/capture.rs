//! A datapath decorator that writes every frame the engine sends and receives to a pcap file as the
//! frames pass: `Context::open(Capture::create(UdpPort::bind(..)?, "run.pcap", SNAPLEN)?)`.
//!
//! The file is the nanosecond pcap that [`nicsim::write_pcap`] writes (LINKTYPE_ETHERNET, snap
//! length 65535, little-endian), one record per frame with the datapath's clock as its timestamp.
//! A shorter snap length keeps only the first bytes of each frame (the headers: 128 bytes hold
//! Ethernet, IPv4, UDP, the BTH and any RETH, AETH or atomic header) with its length on the wire,
//! as `tcpdump -s` does, for captures of runs too long to keep every payload.
//! Memory stays bounded however long the run: records collect in one buffer of
//! [`CAPTURE_BUFFER`] bytes that goes to the file whenever the next record would not fit, so the
//! file grows while the run goes on, and whatever is still buffered goes out when the capture is
//! dropped (also when a run ends in an error) or on [`CaptureLog::flush`].

use super::wrap::{delegate_datapath, delegate_datapath_tail};
use super::{Datapath, TxError};
use frame::Frame;
use std::io::{self, Write};
use std::net::IpAddr;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use wire::ib::Mtu;

/// Bytes of records a capture holds before it writes them to its file.
pub const CAPTURE_BUFFER: usize = 1 << 20;

/// The largest pcap snap length, and the default: every frame whole (frames longer than the snap
/// length are cut, their original length kept).
pub const SNAPLEN: u16 = 65_535;

/// The 24-byte pcap file header: nanosecond magic, version 2.4, no time zone or accuracy, the
/// snap length, LINKTYPE_ETHERNET; little-endian (with [`SNAPLEN`], what `pcap_file` writes for
/// [`nicsim::write_pcap`]).
fn file_header(snaplen: u16) -> [u8; 24] {
    let mut h = [0u8; 24];
    h[0..4].copy_from_slice(&0xA1B2_3C4Du32.to_le_bytes());
    h[4..6].copy_from_slice(&2u16.to_le_bytes());
    h[6..8].copy_from_slice(&4u16.to_le_bytes());
    h[16..20].copy_from_slice(&u32::from(snaplen).to_le_bytes());
    h[20..24].copy_from_slice(&1u32.to_le_bytes());
    h
}

/// Where a capture's records go: a bounded buffer in front of a writer (the file).
struct Sink {
    out: Box<dyn Write + Send>,
    buf: Vec<u8>,
    snaplen: usize,
    frames: u64,
    /// The first write error; the capture stops writing after it.
    error: Option<io::Error>,
}

impl Sink {
    fn new(mut out: Box<dyn Write + Send>, snaplen: u16) -> io::Result<Sink> {
        out.write_all(&file_header(snaplen))?;
        let buf = Vec::with_capacity(CAPTURE_BUFFER);
        Ok(Sink { out, buf, snaplen: usize::from(snaplen), frames: 0, error: None })
    }

    /// Writes the buffered records out (not flushing the writer).
    fn drain(&mut self) {
        if self.error.is_none() && !self.buf.is_empty() {
            if let Err(e) = self.out.write_all(&self.buf) {
                self.error = Some(e);
            }
        }
        self.buf.clear();
    }

    /// Appends one record; its start in the buffer, so that [`Sink::unrecord`] can take it back
    /// (`None` once writing has failed).
    fn record(&mut self, time: Duration, bytes: &[u8]) -> Option<usize> {
        if self.error.is_some() {
            return None;
        }
        let incl = bytes.len().min(self.snaplen);
        if self.buf.len() + 16 + incl > CAPTURE_BUFFER {
            self.drain();
        }
        let at = self.buf.len();
        for word in [time.as_secs() as u32, time.subsec_nanos(), incl as u32, bytes.len() as u32] {
            self.buf.extend_from_slice(&word.to_le_bytes());
        }
        self.buf.extend_from_slice(&bytes[..incl]);
        self.frames += 1;
        Some(at)
    }

    /// Takes back the record [`Sink::record`] just appended at `at` (still buffered: the buffer
    /// is only written out before a record is appended).
    fn unrecord(&mut self, at: Option<usize>) {
        if let Some(at) = at {
            if at <= self.buf.len() && self.error.is_none() {
                self.buf.truncate(at);
                self.frames -= 1;
            }
        }
    }

    fn flush(&mut self) -> io::Result<u64> {
        self.drain();
        if self.error.is_none() {
            if let Err(e) = self.out.flush() {
                self.error = Some(e);
            }
        }
        match &self.error {
            None => Ok(self.frames),
            Some(e) => Err(io::Error::new(e.kind(), e.to_string())),
        }
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        // Best effort: a run that ends in an error still leaves a complete file.
        let _ = self.flush();
    }
}

/// A handle on a [`Capture`]'s file that stays valid after the datapath moves into a context.
#[derive(Clone)]
pub struct CaptureLog(Arc<Mutex<Sink>>);

impl std::fmt::Debug for CaptureLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaptureLog").field("frames", &self.frames()).finish()
    }
}

impl CaptureLog {
    /// The sink, whatever a panicking holder left (each record leaves it consistent).
    fn sink(&self) -> MutexGuard<'_, Sink> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Frames recorded so far (some may still be buffered).
    pub fn frames(&self) -> u64 {
        self.sink().frames
    }

    /// Writes every buffered record to the file and flushes it: the file is then a complete pcap
    /// of every frame so far. Returns the number of frames, or the first write error.
    pub fn flush(&self) -> io::Result<u64> {
        self.sink().flush()
    }
}

/// Writes every frame the engine sends and receives, as the engine built it or the datapath
/// delivered it, to a pcap file while they pass (see the module documentation).
pub struct Capture<D> {
    inner: D,
    log: CaptureLog,
}

impl<D: std::fmt::Debug> std::fmt::Debug for Capture<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Capture").field("inner", &self.inner).field("log", &self.log).finish()
    }
}

impl<D: Datapath> Capture<D> {
    /// Wraps `inner`, writing the capture to `out` with at most `snaplen` bytes of each frame
    /// ([`SNAPLEN`]: all of it); the pcap file header goes out now.
    pub fn new(inner: D, out: impl Write + Send + 'static, snaplen: u16) -> io::Result<Capture<D>> {
        if snaplen == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "a snap length of 0 keeps nothing"));
        }
        let sink = Sink::new(Box::new(out), snaplen)?;
        Ok(Capture { inner, log: CaptureLog(Arc::new(Mutex::new(sink))) })
    }

    /// Wraps `inner`, writing the capture to a new file at `path` (replacing any), at most
    /// `snaplen` bytes of each frame.
    pub fn create(inner: D, path: &Path, snaplen: u16) -> io::Result<Capture<D>> {
        Capture::new(inner, std::fs::File::create(path)?, snaplen)
    }

    /// The handle on the file.
    pub fn log(&self) -> CaptureLog {
        self.log.clone()
    }

    fn record(&self, frame: &Frame) -> Option<usize> {
        let time = self.inner.now();
        self.log.sink().record(time, frame.as_slice())
    }
}

impl<D: Datapath> Datapath for Capture<D> {
    delegate_datapath!(inner);
    fn transmit(&mut self, frame: Frame) -> Result<(), TxError> {
        let at = self.record(&frame);
        let sent = self.inner.transmit(frame);
        if sent.is_err() {
            // Not sent (handed back, or failed): not in the capture either; a frame handed back
            // is recorded when the engine offers it again.
            self.log.sink().unrecord(at);
        }
        sent
    }
    fn receive(&mut self) -> Option<Frame> {
        let f = self.inner.receive()?;
        self.record(&f);
        Some(f)
    }
    delegate_datapath_tail!(inner);
    fn counters(&self) -> Vec<(&'static str, u64)> {
        self.inner.counters()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datapath::sim::SimNet;
    use crate::datapath::wrap::{Faulty, TxFaults};
    use nicsim::{LinkConfig, TapRecord};

    /// A writer the test can read back, counting the writes that reach it.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<(Vec<u8>, usize)>>);

    impl Write for Shared {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            let mut s = self.0.lock().unwrap();
            s.0.extend_from_slice(b);
            s.1 += 1;
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn frame_bytes(i: u32, len: usize) -> Vec<u8> {
        (0..len).map(|k| (k as u32 ^ i) as u8).collect()
    }

    #[test]
    fn records_both_ways_before_the_faults_in_nicsims_pcap_format() {
        let (net, a, mut b) = SimNet::pair(1, LinkConfig::default(), LinkConfig::default());
        let faults = TxFaults { loss: 0.2, duplicate: 0.1, corrupt: 0.1, reorder: 0.1 };
        let out = Shared::default();
        let mut tx = Capture::new(Faulty::new(a, faults, 7), out.clone(), SNAPLEN).unwrap();
        let log = tx.log();
        let mut sent = Vec::new();
        for i in 0..1000u32 {
            let mut f = tx.alloc();
            let bytes = frame_bytes(i, 64 + (i as usize % 700));
            f.buffer_mut()[..bytes.len()].copy_from_slice(&bytes);
            f.set_len(bytes.len());
            let time = tx.now();
            tx.transmit(f).unwrap();
            sent.push(TapRecord { time, port: 0, bytes });
        }
        net.advance_to(Duration::from_millis(1));
        let mut got = 0;
        while b.receive().is_some() {
            got += 1;
        }
        assert_eq!(log.frames(), 1000, "the capture sees what the engine sent, before the faults");
        // ~20% lost, ~10% duplicated: about 900 arrive; one held frame may still wait.
        assert!((800..1000).contains(&got), "{got}");
        assert_eq!(log.flush().unwrap(), 1000);
        let mut want = Vec::new();
        nicsim::write_pcap(&mut want, &sent).unwrap();
        assert!(out.0.lock().unwrap().0 == want, "the same bytes as nicsim::write_pcap");
    }

    #[test]
    fn memory_stays_bounded_and_the_file_is_complete_after_drop() {
        let (_net, a, _b) = SimNet::pair(1, LinkConfig::default(), LinkConfig::default());
        let out = Shared::default();
        let mut tx = Capture::new(a, out.clone(), SNAPLEN).unwrap();
        let frames = 3 * CAPTURE_BUFFER / 4000 + 7;
        for i in 0..frames as u32 {
            let mut f = tx.alloc();
            f.buffer_mut()[..4000].copy_from_slice(&frame_bytes(i, 4000));
            f.set_len(4000);
            tx.transmit(f).unwrap();
            assert!(tx.log.sink().buf.len() <= CAPTURE_BUFFER);
        }
        // The file header, then whole buffers went to the writer during the run, each in one write.
        let (written, writes) = {
            let o = out.0.lock().unwrap();
            (o.0.len(), o.1)
        };
        assert!(written > 2 * CAPTURE_BUFFER && writes == 4, "{written} bytes in {writes} writes");
        drop(tx);
        let bytes = out.0.lock().unwrap().0.clone();
        assert_eq!(bytes.len(), 24 + frames * (16 + 4000));
        assert_eq!(bytes[..24], file_header(SNAPLEN));
        let mut n = 0;
        for (_, _, p) in records(&bytes) {
            assert_eq!(p, frame_bytes(n, 4000));
            n += 1;
        }
        assert_eq!(n as usize, frames);
    }

    /// A datapath that refuses every frame.
    #[derive(Debug)]
    struct Refusing {
        inner: crate::datapath::sim::SimPort,
    }

    impl Datapath for Refusing {
        delegate_datapath!(inner);
        fn transmit(&mut self, frame: Frame) -> Result<(), TxError> {
            Err(TxError::Full(frame))
        }
        fn receive(&mut self) -> Option<Frame> {
            self.inner.receive()
        }
        delegate_datapath_tail!(inner);
    }

    #[test]
    fn a_refused_frame_is_not_in_the_capture() {
        let (_net, a, _b) = SimNet::pair(1, LinkConfig::default(), LinkConfig::default());
        let out = Shared::default();
        let mut tx = Capture::new(Refusing { inner: a }, out.clone(), SNAPLEN).unwrap();
        let mut f = tx.alloc();
        f.set_len(60);
        assert!(tx.transmit(f).is_err());
        assert_eq!(tx.log().flush().unwrap(), 0);
        assert_eq!(out.0.lock().unwrap().0.len(), 24);
    }

    #[test]
    fn a_short_snap_length_keeps_each_frames_head_and_its_length_on_the_wire() {
        let (_net, a, _b) = SimNet::pair(1, LinkConfig::default(), LinkConfig::default());
        let out = Shared::default();
        let mut tx = Capture::new(a, out.clone(), 128).unwrap();
        for (i, len) in [(0u32, 60usize), (1, 128), (2, 129), (3, 4000)] {
            let mut f = tx.alloc();
            f.buffer_mut()[..len].copy_from_slice(&frame_bytes(i, len));
            f.set_len(len);
            tx.transmit(f).unwrap();
        }
        assert_eq!(tx.log().flush().unwrap(), 4);
        let bytes = out.0.lock().unwrap().0.clone();
        let frames = records(&bytes);
        assert_eq!(bytes[16..20], 128u32.to_le_bytes(), "the header states the snap length");
        for ((incl, orig, data), (i, len)) in
            frames.iter().zip([(0u32, 60usize), (1, 128), (2, 129), (3, 4000)])
        {
            assert_eq!((*incl, *orig), (len.min(128), len));
            assert_eq!(*data, frame_bytes(i, len)[..len.min(128)]);
        }
        assert_eq!(bytes.len(), 24 + 4 * 16 + 60 + 3 * 128);
        assert!(Capture::new(tx, Shared::default(), 0).is_err(), "a snap length of 0 is refused");
    }

    /// Each record of a pcap this module wrote: its captured length, length on the wire and bytes.
    fn records(b: &[u8]) -> Vec<(usize, usize, Vec<u8>)> {
        let mut at = 24;
        let mut out = Vec::new();
        while at + 16 <= b.len() {
            let word = |k: usize| u32::from_le_bytes(b[at + k..at + k + 4].try_into().unwrap()) as usize;
            let (incl, orig) = (word(8), word(12));
            out.push((incl, orig, b[at + 16..at + 16 + incl].to_vec()));
            at += 16 + incl;
        }
        out
    }
}
