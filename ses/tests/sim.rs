//! SES over the PDS through nicsim, 200 seeds per line (issue 8, acceptance 1): loss 0/1/10/30 %,
//! reorder, duplication, corruption. Per run: untagged sends over RUD and ROD (some arriving before
//! their receive is posted), tagged sends, RMA writes over RUD and over RUDI (IDEMPOTENT_SAFE key),
//! then reads of both regions. Checked: one completion per operation, all OK, received and read
//! bytes equal to what was sent, ordered sends received in order, nothing more in the 50 ms after.
//! A second run per seed uses DGRAM endpoints (UUD): whatever is received is whole and was sent.
//! `SES_SEED=N` replays one seed.

mod common;

use std::time::Duration;

use common::{Ses, Sim, addr, pattern};
use nicsim::LinkConfig;
use ses::key::IDEMPOTENT_SAFE;
use ses::{Access, CompletionKind, Config, EpType, JobScope, Opts, RecvSpec, Status};

const SEEDS: u64 = 200;

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn cfg(rank: u32, max_retries: u32) -> Config {
    let pds = pds::Config { max_retries, ..pds::Config::default() };
    Config { pds, initiator: rank, max_payload: 1400, ..Config::default() }
}

fn rdm(seed: u64, link: LinkConfig) -> Result<(), String> {
    let mut rng = Rng(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) | 1);
    let mut sim = Ses::pair(seed, [cfg(0, 16), cfg(1, 16)], link);
    let dst = addr(sim.ends.eps[1].config(), 1);
    let (k1, k2) = (0x100, 0x200 | IDEMPOTENT_SAFE);
    for k in [k1, k2] {
        sim.ends.eps[1].regions.register(k, vec![0; 16_384], Access::ALL, JobScope::Any).unwrap();
    }
    // Messages: 8 untagged (even ones ordered) and 4 tagged; half of the receives posted late.
    let mut msgs = Vec::new();
    for i in 0..12u64 {
        let data = pattern(seed * 100 + i, rng.below(8000) as usize);
        let tag = (i >= 8).then_some(0x7700 + i);
        if i % 2 == 0 {
            sim.ends.eps[1].post_recv(
                RecvSpec { tag: tag.map(|t| (t, 0)), src: None, ..RecvSpec::any() },
                8000,
                1000 + i,
            );
        }
        sim.ends.eps[0]
            .send(
                dst,
                &data,
                tag,
                Opts { header_data: Some(i), ordered: i < 8 && i % 2 == 0, context: i, ..Opts::default() },
            )
            .map_err(|e| e.to_string())?;
        msgs.push((tag, data));
    }
    let w1 = pattern(seed + 1, 1 + rng.below(9000) as usize);
    let w2 = pattern(seed + 2, 1 + rng.below(9000) as usize);
    let (o1, o2) = (rng.below(7000), rng.below(7000));
    sim.ends.eps[0]
        .write(dst, k1, o1, &w1, Opts { header_data: None, ordered: false, context: 20, ..Opts::default() })
        .map_err(|e| e.to_string())?;
    sim.ends.eps[0]
        .write(dst, k2, o2, &w2, Opts { header_data: None, ordered: false, context: 21, ..Opts::default() })
        .map_err(|e| e.to_string())?;
    let limit = Duration::from_secs(60);
    if !sim.run_until(limit, |s| s.ends.done[0].len() >= 14) {
        return Err(format!("sends and writes not complete by {limit:?}: {}", s_done(&sim)));
    }
    for i in (1..12u64).step_by(2) {
        let tag = msgs[i as usize].0;
        sim.ends.eps[1].post_recv(
            RecvSpec { tag: tag.map(|t| (t, 0)), src: None, ..RecvSpec::any() },
            8000,
            1000 + i,
        );
    }
    sim.ends.eps[0]
        .read(
            dst,
            k1,
            o1,
            w1.len(),
            Opts { header_data: None, ordered: false, context: 30, ..Opts::default() },
        )
        .map_err(|e| e.to_string())?;
    sim.ends.eps[0]
        .read(
            dst,
            k2,
            o2,
            w2.len(),
            Opts { header_data: None, ordered: false, context: 31, ..Opts::default() },
        )
        .map_err(|e| e.to_string())?;
    if !sim.run_until(limit, |s| s.ends.done[0].len() >= 16 && s.ends.done[1].len() >= 12) {
        return Err(format!("reads or receives not complete: {}", s_done(&sim)));
    }
    let before = (sim.ends.done[0].len(), sim.ends.done[1].len());
    let end = sim.now() + Duration::from_millis(50);
    sim.run_until(end, |_| false);
    if (sim.ends.done[0].len(), sim.ends.done[1].len()) != before || before != (16, 12) {
        return Err(format!(
            "completions {before:?} then {:?}",
            (sim.ends.done[0].len(), sim.ends.done[1].len())
        ));
    }
    for c in &sim.ends.done[0] {
        if c.status != Status::Ok {
            return Err(format!("initiator context {}: {:?}", c.context, c.status));
        }
    }
    let mut ctxs: Vec<u64> = sim.ends.done[0].iter().map(|c| c.context).collect();
    ctxs.sort();
    if ctxs != [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 20, 21, 30, 31] {
        return Err(format!("initiator contexts {ctxs:?}"));
    }
    // Untagged receives take messages in arrival order, so identify each by its header data (the
    // message index): every message exactly once, intact, with its tag.
    let mut seen = [0u32; 12];
    let mut rod_order = Vec::new();
    for r in &sim.ends.done[1] {
        let Some(i) = r.header_data.filter(|&i| i < 12) else {
            return Err(format!("receive {} without its index", r.context));
        };
        let (tag, data) = &msgs[i as usize];
        if r.status != Status::Ok || &r.data != data || r.tag != *tag {
            return Err(format!("message {i}: {:?}, {} bytes (want {})", r.status, r.data.len(), data.len()));
        }
        seen[i as usize] += 1;
        if i < 8 && i % 2 == 0 {
            rod_order.push(i);
        }
    }
    if seen != [1; 12] {
        return Err(format!("deliveries per message: {seen:?}"));
    }
    // Sends 0, 2, 4, 6 went in order on the ROD PDC: they complete their receives in that order.
    if rod_order != [0, 2, 4, 6] {
        return Err(format!("ordered messages received as {rod_order:?}"));
    }
    for (ctx, want) in [(30, &w1), (31, &w2)] {
        let r = sim.ends.completion(0, ctx).unwrap();
        if r.kind != CompletionKind::Read || &r.data != want {
            return Err(format!("read {ctx} returned other bytes"));
        }
    }
    let region = |k| sim.ends.eps[1].regions.get(k).unwrap().data.bytes();
    if region(k1)[o1 as usize..o1 as usize + w1.len()] != w1[..]
        || region(k2)[o2 as usize..o2 as usize + w2.len()] != w2[..]
    {
        return Err("target memory differs from the writes".into());
    }
    Ok(())
}

fn s_done(sim: &Sim) -> String {
    format!("{} / {} completions, t = {:?}", sim.ends.done[0].len(), sim.ends.done[1].len(), sim.now())
}

fn dgram(seed: u64, link: LinkConfig) -> Result<(), String> {
    let mut c = [cfg(0, 5), cfg(1, 5)];
    c[0].ep_type = EpType::Dgram;
    c[1].ep_type = EpType::Dgram;
    let mut sim = Ses::pair(seed, c, link);
    let dst = addr(sim.ends.eps[1].config(), 1);
    let sent: Vec<Vec<u8>> = (0..20).map(|i| pattern(seed * 7 + i, (i as usize * 67) % 1400)).collect();
    for i in 0..40 {
        sim.ends.eps[1].post_recv(RecvSpec::any(), 1400, 100 + i);
    }
    for (i, d) in sent.iter().enumerate() {
        sim.ends.eps[0]
            .send(
                dst,
                d,
                None,
                Opts { header_data: None, ordered: false, context: i as u64, ..Opts::default() },
            )
            .map_err(|e| e.to_string())?;
    }
    sim.run_until(sim.now() + Duration::from_millis(20), |_| false);
    if sim.ends.done[0].len() != 20 || sim.ends.done[0].iter().any(|c| c.status != Status::Ok) {
        return Err("datagram sends did not all complete".into());
    }
    for r in &sim.ends.done[1] {
        if r.status != Status::Ok || !sent.contains(&r.data) {
            return Err(format!(
                "datagram receive {} is not one that was sent ({} bytes)",
                r.context,
                r.data.len()
            ));
        }
    }
    if link.loss == 0.0 && link.corrupt == 0.0 && sim.ends.done[1].len() < 20 {
        return Err("lossless link lost a datagram".into());
    }
    Ok(())
}

fn matrix(name: &str, first: u64, link: LinkConfig) {
    let seeds: Vec<u64> = match std::env::var("SES_SEED") {
        Ok(s) => vec![s.parse().unwrap()],
        Err(_) => (first..first + SEEDS).collect(),
    };
    let mut failures = Vec::new();
    for &seed in &seeds {
        if let Err(e) = rdm(seed, link) {
            failures.push(format!("seed {seed} RDM: {e}"));
        }
        if let Err(e) = dgram(seed, link) {
            failures.push(format!("seed {seed} DGRAM: {e}"));
        }
    }
    println!("{name}: {} seeds, {} failures", seeds.len(), failures.len());
    assert!(failures.is_empty(), "{name}:\n{}", failures.join("\n"));
}

/// Line `name` of nicsim's impairment matrix on a 2 us cable; line `i`'s seeds start at `1000 i`.
fn line(name: &str) {
    let base = LinkConfig { latency: Duration::from_micros(2), ..LinkConfig::default() };
    let lines = nicsim::impairments(base);
    let i = lines.iter().position(|l| l.0 == name).expect("a line of the matrix");
    matrix(name, 1000 * i as u64, lines[i].1);
}

#[test]
fn clean() {
    line("clean");
}

#[test]
fn loss_1_percent() {
    line("loss 1%");
}

#[test]
fn loss_10_percent() {
    line("loss 10%");
}

#[test]
fn loss_30_percent() {
    line("loss 30%");
}

#[test]
fn reorder() {
    line("reorder 20%");
}

#[test]
fn duplication() {
    line("duplicate 20%");
}

#[test]
fn corruption() {
    line("corrupt 10%");
}
