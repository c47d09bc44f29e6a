//! What a UET perf run is: the operation, delivery mode, sizes and congestion control, the SES
//! configuration both sides build from it, and its JSON form for the two-process runs.

use std::time::Duration;

use nicsim::LinkConfig;
use serde_json::{Value, json};
use ses::key::{IDEMPOTENT_SAFE, OPTIMIZED};
use ses::{DeliveryMode, EpType, HeaderForms};

use super::tss::{NONCE_LEN, tss_domain};
use crate::perf::remote::RemoteError;
use engine::datapath::Datapath;
use engine::uet::TRIMMED_DSCP;
use engine::uet::{TrafficClass, UetNode};

/// UET operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UetOp {
    /// SEND.
    Send,
    /// TAGGED_SEND.
    Tsend,
    /// WRITE.
    Write,
    /// READ.
    Read,
    /// FETCHING_ATOMIC SUM on a UINT64 (fetch-and-add).
    FetchAdd,
    /// FETCHING_ATOMIC CSWAP on a UINT64 with the compare-and-swap extension.
    CmpSwap,
}

impl UetPerfConfig {
    /// How a process running this test is described in `softrdma stat`, e.g. "perf uet rud
    /// write server".
    pub(super) fn stat_name(&self, side: &str) -> String {
        format!("perf uet {:?} {:?} {side}", self.transport, self.op).to_lowercase()
    }
}

impl UetOp {
    pub(super) fn is_atomic(self) -> bool {
        matches!(self, UetOp::FetchAdd | UetOp::CmpSwap)
    }

    pub(super) fn uses_region(self) -> bool {
        !matches!(self, UetOp::Send | UetOp::Tsend)
    }
}

/// What to run.
#[derive(Debug, Clone, Copy)]
pub struct UetPerfConfig {
    /// Operation.
    pub op: UetOp,
    /// Delivery mode.
    pub transport: DeliveryMode,
    /// Bandwidth or latency.
    pub lat: bool,
    /// Message size.
    pub size: usize,
    /// Messages.
    pub iters: u64,
    /// Operations in flight (bandwidth mode).
    pub depth: usize,
    /// Payload bytes per packet.
    pub max_payload: usize,
    /// The simulated link, both directions (in-process runs).
    pub link: LinkConfig,
    /// Seed of the network and the endpoints.
    pub seed: u64,
    /// PDS retry limit.
    pub max_retries: u32,
    /// Seal every packet with TSS.
    pub tss: bool,
    /// Congestion control of the PDCs.
    pub cc: UetCc,
    /// The line rate congestion control assumes, bits per second.
    pub cc_bps: u64,
    /// The unloaded round-trip time congestion control assumes.
    pub cc_rtt: Duration,
    /// The DSCPs of both sides' packets (data, PDS control).
    pub tclass: TrafficClass,
    /// The SES request headers both sides send (ses/README.md, "SES header forms").
    pub forms: HeaderForms,
}

/// Congestion control of a UET perf run (`pds::cc` NSCC, `pds::credit` RCCC).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UetCc {
    /// The PDS window alone.
    #[default]
    None,
    /// Sender windows from delay and ECN; senders mark ECT(0).
    Nscc,
    /// Receiver-granted credit.
    Rccc,
}

impl UetPerfConfig {
    /// Why the combination cannot run, if it cannot.
    pub fn check(&self) -> Result<(), &'static str> {
        match (self.transport, self.op) {
            (DeliveryMode::Rudi, UetOp::Send | UetOp::Tsend) => {
                Err("RUDI carries idempotent RMA: write or read")
            }
            (DeliveryMode::Uud, UetOp::Write | UetOp::Read) => Err("UUD carries datagram sends: send"),
            (DeliveryMode::Uud, UetOp::Tsend) => Err("UUD carries untagged datagram sends: send"),
            (DeliveryMode::Rudi | DeliveryMode::Uud, UetOp::FetchAdd | UetOp::CmpSwap) => {
                Err("atomics are not idempotent: rud or rod")
            }
            (_, UetOp::FetchAdd | UetOp::CmpSwap) if self.size != 8 => Err("atomics move 8 bytes (UINT64)"),
            (DeliveryMode::Rudi | DeliveryMode::Uud, _) if self.cc != UetCc::None => {
                Err("congestion control runs on PDCs: rud or rod")
            }
            (DeliveryMode::Uud, _) if self.size > self.max_payload => {
                Err("a UUD datagram must fit one packet")
            }
            _ if self.size > 1 << 30 => Err("messages are at most 1 GiB"),
            _ if [self.tclass.data, self.tclass.control].iter().any(|&d| d > 63 || d == TRIMMED_DSCP) => {
                Err("a traffic class is a DSCP of 0 to 63, not 33 (0x21 marks trimmed frames)")
            }
            _ if self.max_payload == 0 || self.max_payload > MAX_PAYLOAD => {
                Err("payload per packet is 1 to 7936 bytes (a datapath frame with its headers)")
            }
            _ => Ok(()),
        }
    }

    /// Puts a node of this run in the run's secure domain (`--tss`, its key derived with the
    /// run's `nonce`), has it mark ECT(0) when NSCC runs and send in the run's traffic classes.
    pub(super) fn secure_and_mark<D: Datapath>(
        &self,
        node: &mut UetNode<D>,
        nonce: &[u8; NONCE_LEN],
    ) -> Result<(), &'static str> {
        if self.tss {
            node.enable_tss(tss_domain(self.seed, nonce));
        }
        node.set_ecn(self.cc == UetCc::Nscc);
        node.set_traffic_class(self.tclass)
    }

    /// Operations kept in flight: one in latency mode; `depth`, but, as the RC runs do, no more
    /// messages than the PDS window carries plus two (see [`crate::perf::window_slots`]).
    pub fn depth(&self) -> usize {
        if self.lat {
            return 1;
        }
        let window = self.ses_config().pds.window as usize;
        crate::perf::window_slots(window, self.depth.max(1), self.size, self.max_payload)
    }

    pub(super) fn key(&self) -> u64 {
        if self.transport == DeliveryMode::Rudi { KEY | IDEMPOTENT_SAFE } else { KEY }
    }

    pub(super) fn receives(&self) -> bool {
        matches!(self.op, UetOp::Send | UetOp::Tsend)
    }

    pub(super) fn ses_config(&self) -> ses::Config {
        let mut pds = pds::Config { max_retries: self.max_retries, ..pds::Config::default() };
        let mtu = (self.max_payload + 128) as u64;
        match self.cc {
            UetCc::None => {}
            UetCc::Nscc => {
                let mss = mtu as usize;
                pds.cc = Some(pds::cc::NsccConfig { link_bps: self.cc_bps, base_rtt: self.cc_rtt, mss });
                // NSCC needs an RTT sample per packet: ACK each (see pds::cc).
                pds.ack_every = 1;
            }
            UetCc::Rccc => {
                let mut rc = pds::credit::RcccConfig::new(self.cc_bps, self.cc_rtt, mtu);
                if self.tss {
                    // The TSS header of a domain without SSI, and the ICV.
                    rc.overhead += (12 + wire::uet::tss::ICV_LEN) as u64;
                }
                pds.rccc = Some(rc);
            }
        }
        let ep_type = if self.transport == DeliveryMode::Uud { EpType::Dgram } else { EpType::Rdm };
        ses::Config {
            pds,
            ep_type,
            max_payload: self.max_payload,
            initiator: 1,
            forms: self.forms,
            ..ses::Config::default()
        }
    }

    pub(super) fn to_json(self) -> Value {
        json!({
            "op": format!("{:?}", self.op),
            "transport": format!("{:?}", self.transport),
            "lat": self.lat,
            "size": self.size,
            "iters": self.iters,
            "depth": self.depth,
            "max_payload": self.max_payload,
            "seed": self.seed,
            "max_retries": self.max_retries,
            "tss": self.tss,
            "cc": format!("{:?}", self.cc),
            "cc_bps": self.cc_bps,
            "cc_rtt_ns": self.cc_rtt.as_nanos() as u64,
            "tclass": self.tclass.data,
            "ack_tclass": self.tclass.control,
            "ses_headers": format!("{:?}", self.forms),
        })
    }

    /// The client's hello line (`{"uet": test}`), checked ([`UetPerfConfig::from_json`]).
    pub fn from_line(line: &[u8]) -> Result<UetPerfConfig, RemoteError> {
        let v: Value = serde_json::from_slice(line)
            .map_err(|e| RemoteError(format!("the client's hello: line is not JSON: {e}")))?;
        UetPerfConfig::from_json(&v["uet"])
    }

    /// A test as `UetPerfConfig::to_json` writes it, every field checked: an error names it.
    pub fn from_json(v: &Value) -> Result<UetPerfConfig, RemoteError> {
        let n = |k: &str| v[k].as_u64().ok_or_else(|| RemoteError(format!("the client's test lacks {k}")));
        // Within `lo..=hi`, as the CLI's own options are.
        let r = |k: &str, lo: u64, hi: u64| match n(k)? {
            x if (lo..=hi).contains(&x) => Ok(x),
            x => Err(RemoteError(format!("the client's test: {k} {x} is out of range {lo}..={hi}"))),
        };
        let op = match v["op"].as_str() {
            Some("Send") => UetOp::Send,
            Some("Tsend") => UetOp::Tsend,
            Some("Write") => UetOp::Write,
            Some("Read") => UetOp::Read,
            Some("FetchAdd") => UetOp::FetchAdd,
            Some("CmpSwap") => UetOp::CmpSwap,
            _ => return Err(RemoteError("the client asked for an unknown operation".into())),
        };
        let transport = match v["transport"].as_str() {
            Some("Rud") => DeliveryMode::Rud,
            Some("Rod") => DeliveryMode::Rod,
            Some("Rudi") => DeliveryMode::Rudi,
            Some("Uud") => DeliveryMode::Uud,
            _ => return Err(RemoteError("the client asked for an unknown transport".into())),
        };
        let cfg = UetPerfConfig {
            op,
            transport,
            lat: v["lat"].as_bool().unwrap_or(false),
            size: r("size", 1, 1 << 30)? as usize,
            iters: r("iters", 1, 1 << 32)?,
            depth: r("depth", 1, 1 << 16)? as usize,
            max_payload: r("max_payload", 1, MAX_PAYLOAD as u64)? as usize,
            link: LinkConfig::default(),
            seed: n("seed")?,
            max_retries: r("max_retries", 0, u64::from(u32::MAX))? as u32,
            tss: v["tss"].as_bool().unwrap_or(false),
            cc: match v["cc"].as_str() {
                None | Some("None") => UetCc::None,
                Some("Nscc") => UetCc::Nscc,
                Some("Rccc") => UetCc::Rccc,
                Some(_) => {
                    return Err(RemoteError("the client asked for an unknown congestion control".into()));
                }
            },
            cc_bps: if v["cc_bps"].is_null() { 100_000_000_000 } else { r("cc_bps", 1, 1 << 50)? },
            cc_rtt: Duration::from_nanos(if v["cc_rtt_ns"].is_null() {
                20_000
            } else {
                r("cc_rtt_ns", 1, 10_000_000_000)?
            }),
            tclass: TrafficClass {
                data: if v["tclass"].is_null() { 0 } else { r("tclass", 0, 63)? as u8 },
                control: if v["ack_tclass"].is_null() { 0 } else { r("ack_tclass", 0, 63)? as u8 },
            },
            forms: match v["ses_headers"].as_str() {
                None | Some("Compact") => HeaderForms::Compact,
                Some("Standard") => HeaderForms::Standard,
                Some(_) => return Err(RemoteError("the client asked for unknown SES header forms".into())),
            },
        };
        cfg.check().map_err(|e| RemoteError(e.into()))?;
        Ok(cfg)
    }
}

/// Room in a datapath frame for everything but the payload: Ethernet, IPv4 and UDP, the TSS
/// header and ICV, the PDS and SES headers with an extension, the CRC, with a margin.
const FRAME_HEADROOM: usize = 256;

/// The largest payload per packet: what a datapath frame holds after its headers (and never more
/// than a request's `payload_length` describes). A bigger packet would never be taken from the
/// SES and the run would stall.
const MAX_PAYLOAD: usize = {
    let frame = frame::FRAME_CAPACITY - FRAME_HEADROOM;
    if frame < ses::MAX_PAYLOAD { frame } else { ses::MAX_PAYLOAD }
};
// The refusal in `check` names it.
const _: () = assert!(MAX_PAYLOAD == 7936);

pub(super) const TAG: u64 = 0x5EED_0000_0000_0001;
/// OPTIMIZED with an RKEY the optimized header's resource index carries: single-packet RMA and
/// atomics go in the 20-byte form (ses/README.md).
const KEY: u64 = OPTIMIZED | 0x100;

#[cfg(test)]
mod tests {
    use super::*;

    /// A payload per packet that does not fit a datapath frame with its headers is refused
    /// (such a packet would never be taken, and the run would stall).
    #[test]
    fn max_payload_must_fit_a_frame() {
        let cfg = |max_payload| UetPerfConfig {
            op: UetOp::Send,
            transport: DeliveryMode::Rud,
            lat: false,
            size: 100_000,
            iters: 1,
            depth: 1,
            max_payload,
            link: LinkConfig::default(),
            seed: 1,
            max_retries: 5,
            tss: true,
            cc: UetCc::None,
            cc_bps: 100_000_000_000,
            cc_rtt: Duration::from_micros(8),
            tclass: TrafficClass::default(),
            forms: HeaderForms::Compact,
        };
        assert_eq!(cfg(4096).check(), Ok(()));
        assert!(cfg(frame::FRAME_CAPACITY).check().is_err(), "a packet bigger than its frame");
        assert!(cfg(16383).check().is_err(), "a packet bigger than its frame");
    }
}
