//! Two SES endpoints joined by a nicsim cable; frames are the UET packet plus the CRC32C trailer,
//! checked on receipt (corrupt frames are dropped as a receiver would).

#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use nicsim::{Ends, LinkConfig, Network, Pair, PortId};
use ses::{Addr, Completion, Config, Endpoint};
use wire::uet::layout::{CRC_LEN, crc32c};

/// The two endpoints on their cable (side 0 on `ports[0]`, side 1 on `ports[1]`).
pub type Sim = Pair<Ses>;

/// Both SES endpoints of a [`Sim`] and their completions.
pub struct Ses {
    pub eps: [Endpoint<u8>; 2],
    pub done: [Vec<Completion<u8>>; 2],
    pub bad_crc: u64,
    buf: Vec<u8>,
}

/// The SES address of side `s` with its configuration's PIDonFEP and resource index.
pub fn addr(cfg: &Config, s: u8) -> Addr<u8> {
    Addr { fep: s, pid_on_fep: cfg.pid_on_fep, resource_index: cfg.resource_index }
}

impl Ses {
    /// Endpoints with `cfgs` on a cable seeded with `seed`, both directions `link`.
    pub fn pair(seed: u64, cfgs: [Config; 2], link: LinkConfig) -> Sim {
        let ses = Ses {
            eps: [Endpoint::new(cfgs[0], seed * 2), Endpoint::new(cfgs[1], seed * 2 + 1)],
            done: [Vec::new(), Vec::new()],
            bad_crc: 0,
            buf: vec![0; 9000],
        };
        Pair::new(seed, link, link, ses)
    }

    /// The completion of side `s` with `context`, if it came.
    pub fn completion(&self, s: usize, context: u64) -> Option<&Completion<u8>> {
        self.done[s].iter().find(|c| c.context == context)
    }
}

impl Ends for Ses {
    fn pass(&mut self, net: &mut Network, ports: [PortId; 2]) -> bool {
        let now = net.now();
        let mut moved = false;
        for (s, &port) in ports.iter().enumerate() {
            let ep = &mut self.eps[s];
            if ep.poll_timeout().is_some_and(|t| t <= now) {
                ep.handle_timeout(now);
            }
            while let Some(t) = ep.poll_transmit(now, &mut self.buf) {
                moved = true;
                let crc = crc32c(&self.buf[..t.len]);
                self.buf[t.len..t.len + CRC_LEN].copy_from_slice(&crc.to_be_bytes());
                let mut f = net.alloc();
                f.buffer_mut()[..t.len + CRC_LEN].copy_from_slice(&self.buf[..t.len + CRC_LEN]);
                f.set_len(t.len + CRC_LEN);
                net.transmit(port, f).unwrap();
            }
            while let Some(f) = net.receive(port) {
                moved = true;
                let data = f.as_slice();
                let (pkt, trailer) = data.split_at(data.len().saturating_sub(CRC_LEN));
                if trailer.len() == CRC_LEN && crc32c(pkt) == u32::from_be_bytes(trailer.try_into().unwrap())
                {
                    self.eps[s].handle_packet(now, 1 - s as u8, pkt).expect("CRC-checked packets parse");
                } else {
                    self.bad_crc += 1;
                }
                net.recycle(f);
            }
            while let Some(c) = self.eps[s].poll_completion() {
                moved = true;
                self.done[s].push(c);
            }
        }
        moved
    }

    fn timeout(&self) -> Option<Duration> {
        self.eps.iter().filter_map(Endpoint::poll_timeout).min()
    }
}

/// `len` bytes of a pattern seeded by `seed`.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| (seed.wrapping_mul(0x9E37_79B9).wrapping_add(i as u64 * 131) >> 3) as u8).collect()
}
