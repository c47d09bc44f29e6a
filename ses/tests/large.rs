//! Rendezvous (HPC) and deferrable (AI Full) sends (issue 9, acceptance 1): the paths one by one on
//! a clean link, then a matrix at loss 0, 1 and 10 % with receives posted before or after the
//! message arrives, checked byte for byte. `SES_SEED=N` replays one seed of the matrix.

mod common;

use std::time::Duration;

use common::{Ses, Sim, addr, pattern};
use nicsim::LinkConfig;
use ses::key::INTERNAL;
use ses::{CompletionKind, Config, Opts, Profile, RecvSpec, ReturnCode, Status};

const LIMIT: Duration = Duration::from_secs(20);

fn cfg(profile: Profile, rank: u32) -> Config {
    let pds = pds::Config { max_retries: 16, ..pds::Config::default() };
    Config {
        pds,
        profile,
        initiator: rank,
        max_payload: 1000,
        max_eager: 600,
        msg_rendezvous_size: 8000,
        tag_rendezvous_size: 4000,
        ..Config::default()
    }
}

fn sim(a: Profile, b: Profile, link: LinkConfig, seed: u64) -> Sim {
    Ses::pair(seed, [cfg(a, 1), cfg(b, 2)], link)
}

fn o(context: u64) -> Opts {
    Opts { context, header_data: Some(context * 3), ..Opts::default() }
}

fn wait(sim: &mut Sim, side: usize, context: u64) -> ses::Completion<u8> {
    assert!(
        sim.run_until(LIMIT, |s| s.ends.completion(side, context).is_some()),
        "no completion {context}/{side}"
    );
    sim.ends.completion(side, context).unwrap().clone()
}

/// Packets side 0 sent, by the PDS count.
fn bytes_sent(sim: &mut Sim) -> u64 {
    sim.ends.eps[0].pds().stats().tx_packets
}

#[test]
fn rendezvous_reads_the_rest_for_receives_posted_before_and_after() {
    let mut sim = sim(Profile::Hpc, Profile::Hpc, LinkConfig::default(), 1);
    let dst = addr(sim.ends.eps[1].config(), 1);
    let (m1, m2, m3) = (pattern(1, 50_000), pattern(2, 20_000), pattern(3, 9_000));
    sim.ends.eps[1].post_recv(RecvSpec::any(), 60_000, 100);
    sim.ends.eps[0].send(dst, &m1, None, o(1)).unwrap();
    let r = wait(&mut sim, 1, 100);
    assert_eq!((r.status, &r.data, r.header_data), (Status::Ok, &m1, Some(3)));
    assert_eq!(wait(&mut sim, 0, 1).status, Status::Ok);
    assert!(sim.ends.eps[0].regions.get(INTERNAL | 1).is_none(), "the internal key is dropped");
    // Unexpected: only the eager part waits at the target.
    sim.ends.eps[0].send(dst, &m2, Some(0x77), o(2)).unwrap();
    sim.run_until(Duration::from_millis(50), |_| false);
    assert_eq!(sim.ends.eps[1].unexpected_count(), 1);
    assert!(sim.ends.completion(0, 2).is_none(), "the send completes only once the target has read it");
    sim.ends.eps[1].post_recv(RecvSpec::tagged(0x70, 0xF), 30_000, 101);
    let r = wait(&mut sim, 1, 101);
    assert_eq!((r.status, &r.data, r.tag), (Status::Ok, &m2, Some(0x77)));
    assert_eq!(wait(&mut sim, 0, 2).status, Status::Ok);
    // Truncated: the target reads only what fits; the sender learns TOO_LONG.
    sim.ends.eps[1].post_recv(RecvSpec::any(), 5_000, 102);
    sim.ends.eps[0].send(dst, &m3, None, o(3)).unwrap();
    let r = wait(&mut sim, 1, 102);
    assert_eq!((r.status, &r.data[..], r.len), (Status::Truncated, &m3[..5_000], 5_000));
    assert_eq!(wait(&mut sim, 0, 3).status, Status::Remote(ReturnCode::TooLong));
    // Smaller than the eager part: no read at all.
    sim.ends.eps[1].post_recv(RecvSpec::any(), 100, 103);
    sim.ends.eps[0].send(dst, &m3, None, o(4)).unwrap();
    assert_eq!(wait(&mut sim, 1, 103).data, &m3[..100]);
    assert_eq!(wait(&mut sim, 0, 4).status, Status::Remote(ReturnCode::TooLong));
    // Below the threshold: a plain send.
    sim.ends.eps[1].post_recv(RecvSpec::any(), 100, 104);
    sim.ends.eps[0].send(dst, &m3[..7999], None, o(5)).unwrap();
    assert_eq!(wait(&mut sim, 1, 104).status, Status::Truncated);
    assert_eq!(sim.ends.done[1].iter().filter(|c| c.kind == CompletionKind::Recv).count(), 5);
}

#[test]
fn deferrable_sends_restart_when_a_receive_is_posted() {
    let mut sim = sim(Profile::AiFull, Profile::AiFull, LinkConfig::default(), 2);
    let dst = addr(sim.ends.eps[1].config(), 1);
    let (m1, m2) = (pattern(4, 30_000), pattern(5, 12_000));
    // Matched at once: one pass.
    sim.ends.eps[1].post_recv(RecvSpec::any(), 40_000, 100);
    let before = bytes_sent(&mut sim);
    sim.ends.eps[0].send(dst, &m1, None, o(1)).unwrap();
    assert_eq!(wait(&mut sim, 1, 100).data, m1);
    assert_eq!(wait(&mut sim, 0, 1).status, Status::Ok);
    let one_pass = bytes_sent(&mut sim) - before;
    // Deferred: the data is dropped, NO_MATCH/overflow, then RTR and a second pass.
    let before = bytes_sent(&mut sim);
    sim.ends.eps[0].send(dst, &m1, None, o(2)).unwrap();
    sim.ends.eps[0].send(dst, &m2, Some(0x55), o(3)).unwrap();
    sim.run_until(Duration::from_millis(50), |_| false);
    assert_eq!(sim.ends.eps[1].unexpected_count(), 2);
    assert!(
        sim.ends.completion(0, 2).is_none() && sim.ends.completion(0, 3).is_none(),
        "deferred sends wait"
    );
    sim.ends.eps[1].post_recv(RecvSpec::tagged(0x55, 0), 20_000, 101);
    let r = wait(&mut sim, 1, 101);
    assert_eq!((r.status, &r.data, r.tag, r.header_data), (Status::Ok, &m2, Some(0x55), Some(9)));
    assert_eq!(wait(&mut sim, 0, 3).status, Status::Ok);
    assert!(sim.ends.completion(0, 2).is_none());
    sim.ends.eps[1].post_recv(RecvSpec::any(), 40_000, 102);
    assert_eq!(wait(&mut sim, 1, 102).data, m1);
    assert_eq!(wait(&mut sim, 0, 2).status, Status::Ok);
    let deferred = bytes_sent(&mut sim) - before;
    assert!(deferred > 2 * one_pass, "each deferred message went twice ({deferred} vs {one_pass} per pass)");
    assert_eq!(sim.ends.eps[1].unexpected_count(), 0);
}

#[test]
fn an_hpc_target_takes_deferrable_sends_as_plain_sends() {
    let mut sim = sim(Profile::AiFull, Profile::Hpc, LinkConfig::default(), 3);
    let dst = addr(sim.ends.eps[1].config(), 1);
    let m = pattern(6, 20_000);
    sim.ends.eps[0].send(dst, &m, None, o(1)).unwrap();
    assert_eq!(wait(&mut sim, 0, 1).status, Status::Ok, "buffered as an unexpected message");
    sim.ends.eps[1].post_recv(RecvSpec::any(), 20_000, 100);
    assert_eq!(wait(&mut sim, 1, 100).data, m);
}

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Six large messages (tagged and not, above the thresholds) and a small one; half of the
/// receives posted before the sends, the rest after a random delay.
fn run(profile: Profile, seed: u64, loss: f64) -> Result<(), String> {
    let link = LinkConfig { latency: Duration::from_micros(2), loss, ..LinkConfig::default() };
    let mut sim = sim(profile, profile, link, seed);
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let dst = addr(sim.ends.eps[1].config(), 1);
    let mut msgs = Vec::new();
    for i in 0..7u64 {
        let len = if i == 6 { 100 } else { 8_000 + rng.below(40_000) as usize };
        let tag = (i % 2 == 1).then_some(0x1000 + i);
        msgs.push((pattern(seed * 10 + i, len), tag));
    }
    let spec = |tag: Option<u64>| tag.map_or(RecvSpec::any(), |t| RecvSpec::tagged(t, 0));
    for (i, (m, tag)) in msgs.iter().enumerate() {
        if i % 2 == 0 {
            sim.ends.eps[1].post_recv(spec(*tag), m.len(), 100 + i as u64);
        }
        // Untagged messages match receives in arrival order: sent ordered (ROD) so that is send order.
        let opts = Opts { ordered: tag.is_none(), ..o(i as u64) };
        sim.ends.eps[0].send(dst, m, *tag, opts).map_err(|e| e.to_string())?;
    }
    let delay = sim.now() + Duration::from_micros(rng.below(3000));
    sim.run_until(delay, |_| false);
    for (i, (m, tag)) in msgs.iter().enumerate() {
        if i % 2 == 1 {
            sim.ends.eps[1].post_recv(spec(*tag), m.len(), 100 + i as u64);
        }
    }
    let n = msgs.len() as u64;
    let done = sim.run_until(sim.now() + LIMIT, |s| {
        (0..n).all(|i| s.ends.completion(0, i).is_some() && s.ends.completion(1, 100 + i).is_some())
    });
    if !done {
        return Err(format!("not all done: {:?} / {:?}", sim.ends.done[0], sim.ends.done[1].len()));
    }
    for (i, (m, tag)) in msgs.iter().enumerate() {
        let s = sim.ends.completion(0, i as u64).unwrap();
        let r = sim.ends.completion(1, 100 + i as u64).unwrap();
        if s.status != Status::Ok || r.status != Status::Ok || &r.data != m || r.tag != *tag {
            return Err(format!(
                "message {i}: send {:?}, receive {:?} {} bytes",
                s.status,
                r.status,
                r.data.len()
            ));
        }
    }
    if sim.ends.done[0].len() != msgs.len() || sim.ends.done[1].len() != msgs.len() {
        return Err(format!("extra completions: {} / {}", sim.ends.done[0].len(), sim.ends.done[1].len()));
    }
    Ok(())
}

fn matrix(loss: f64, first: u64) {
    let seeds: Vec<u64> = match std::env::var("SES_SEED") {
        Ok(s) => vec![s.parse().unwrap()],
        Err(_) => (first..first + 20).collect(),
    };
    let mut failures = Vec::new();
    for &seed in &seeds {
        for profile in [Profile::Hpc, Profile::AiFull] {
            if let Err(e) = run(profile, seed, loss) {
                failures.push(format!("seed {seed} {profile:?}: {e}"));
            }
        }
    }
    println!("loss {loss}: {} seeds x 2 profiles, {} failures", seeds.len(), failures.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn large_sends_lossless() {
    matrix(0.0, 0);
}

#[test]
fn large_sends_loss_1_percent() {
    matrix(0.01, 100);
}

#[test]
fn large_sends_loss_10_percent() {
    matrix(0.1, 200);
}

/// A rendezvous sent under another JobID than the sender's own (an AV auth key's) still completes:
/// the target's read of the sender's buffer is authorized by that buffer's JobID.
#[test]
fn rendezvous_under_an_auth_key_jobid() {
    let mut sim = sim(Profile::Hpc, Profile::Hpc, LinkConfig::default(), 4);
    let dst = addr(sim.ends.eps[1].config(), 1);
    let job = sim.ends.eps[0].config().job_id + 40;
    sim.ends.eps[1].authorize_job(job);
    let m = pattern(8, 30_000);
    sim.ends.eps[1].post_recv(RecvSpec::any(), 30_000, 100);
    sim.ends.eps[0].send(dst, &m, None, Opts { job_id: Some(job), ..o(1) }).unwrap();
    assert_eq!(wait(&mut sim, 1, 100).data, m);
    assert_eq!(wait(&mut sim, 0, 1).status, Status::Ok);
}

/// The caller's memory for `post_recv_into`: what it holds is handed back when the endpoint lets
/// go of it.
#[derive(Debug)]
struct Caller(Vec<u8>, std::sync::mpsc::Sender<Vec<u8>>);

impl ses::Memory for Caller {
    fn bytes(&self) -> &[u8] {
        &self.0
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.0
    }
}

impl Drop for Caller {
    fn drop(&mut self) {
        let _ = self.1.send(std::mem::take(&mut self.0));
    }
}

#[test]
fn receives_into_the_callers_memory_take_eager_rendezvous_and_truncated_messages_in_place() {
    let mut sim = sim(Profile::Hpc, Profile::Hpc, LinkConfig::default(), 3);
    let dst = addr(sim.ends.eps[1].config(), 1);
    let (tx, rx) = std::sync::mpsc::channel();
    let cases = [
        ("eager", pattern(7, 3_000), 4_000, false),
        ("rendezvous, posted first", pattern(8, 50_000), 50_000, false),
        ("rendezvous, unexpected", pattern(9, 20_000), 30_000, true),
        ("rendezvous, truncated", pattern(10, 9_000), 5_000, false),
    ];
    for (i, (what, msg, room, late)) in cases.into_iter().enumerate() {
        let context = 200 + i as u64;
        let post = |sim: &mut Sim| {
            let mem = Box::new(Caller(vec![0; room], tx.clone()));
            sim.ends.eps[1].post_recv_into(RecvSpec::any(), mem, context);
        };
        if !late {
            post(&mut sim);
        }
        sim.ends.eps[0].send(dst, &msg, None, o(context)).unwrap();
        if late {
            sim.run_until(Duration::from_millis(50), |_| false);
            post(&mut sim);
        }
        let r = wait(&mut sim, 1, context);
        let n = msg.len().min(room);
        let status = if n < msg.len() { Status::Truncated } else { Status::Ok };
        assert_eq!(
            (r.status, r.len, r.data.len()),
            (status, n, 0),
            "{what}: the bytes are not in the completion"
        );
        let got = rx.try_recv().unwrap_or_else(|_| panic!("{what}: the endpoint kept the caller's memory"));
        assert!(got[..n] == msg[..n], "{what}: the caller's memory holds the message");
        wait(&mut sim, 0, context);
    }
}
