//! Atomics through nicsim (issue 9, acceptance 1): every AMO opcode and datatype pair the
//! implementation supports (`ses::amo::supported_pairs`), non-fetching batched (4 elements per
//! request), fetching (one element) and compare-and-swap, at loss 0, 1 and 10 %, several seeds.
//! Each result (target memory and fetched old value) is checked against a reference computed here
//! on Rust's native types, independently of `ses::amo`. A retransmitted atomic applied twice shows
//! up as a mismatch. Error paths (unsupported datatype or opcode, unaligned, wrong key or JobID)
//! leave the target untouched. `SES_SEED=N` replays one seed.

mod common;

use std::time::Duration;

use common::{Ses, addr};
use nicsim::LinkConfig;
use ses::amo::{element_size, supported_pairs};
use ses::{Access, CompletionKind, Config, JobScope, Opts, ReturnCode, Status};
use wire::uet::ses::{AmoDatatype, AmoOpcode};

const KEY: u64 = 0x4242;
const SLOT: usize = 64;
const BATCH: usize = 4;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// `size` bytes of an element value: floats get small exact values (no NaN), integers any bits.
    fn element(&mut self, dt: AmoDatatype) -> Vec<u8> {
        let r = self.next();
        match dt {
            AmoDatatype::Float => small(r).to_le_bytes().to_vec(),
            AmoDatatype::Double => f64::from(small(r)).to_le_bytes().to_vec(),
            AmoDatatype::Fp16 => half::f16::from_f32(small(r)).to_le_bytes().to_vec(),
            AmoDatatype::Bf16 => half::bf16::from_f32(small(r)).to_le_bytes().to_vec(),
            AmoDatatype::FloatComplex => {
                [small(r), small(r >> 8)].iter().flat_map(|v| v.to_le_bytes()).collect()
            }
            AmoDatatype::DoubleComplex => {
                [small(r), small(r >> 8)].iter().flat_map(|&v| f64::from(v).to_le_bytes()).collect()
            }
            _ => {
                // Small values half the time so comparisons and logic ops see zeros and equality.
                let v = if r & 1 == 0 {
                    u128::from(r >> 60)
                } else {
                    u128::from(r) << 64 | u128::from(self.next())
                };
                v.to_le_bytes()[..element_size(dt).unwrap()].to_vec()
            }
        }
    }
}

/// A small value exact in every float format (quarters from -8 to 7.75; never NaN).
fn small(r: u64) -> f32 {
    (r % 64) as f32 / 4.0 - 8.0
}

/// Whether the compare-and-swap `op` writes the new value, the compare operand being `c` and the
/// target holding `a` (libfabric's meaning of CSWAP, CSWAP_NE, _LE, _LT, _GE, _GT); `None` for any
/// other opcode.
fn cas_swaps<T: PartialOrd>(op: AmoOpcode, c: T, a: T) -> Option<bool> {
    Some(match op {
        AmoOpcode::Cswap => c == a,
        AmoOpcode::CswapNe => c != a,
        AmoOpcode::CswapLe => c <= a,
        AmoOpcode::CswapLt => c < a,
        AmoOpcode::CswapGe => c >= a,
        AmoOpcode::CswapGt => c > a,
        _ => return None,
    })
}

/// The reference: `op(target, operand)` (or the compare-and-swap outcome) on native types.
macro_rules! reference_int {
    ($t:ty, $op:expr, $a:expr, $b:expr, $cmp:expr) => {{
        let a = <$t>::from_le_bytes($a.try_into().unwrap());
        let b = <$t>::from_le_bytes($b.try_into().unwrap());
        let c = <$t>::from_le_bytes($cmp.try_into().unwrap());
        let r: $t = match cas_swaps($op, c, a) {
            Some(swap) => {
                if swap {
                    b
                } else {
                    a
                }
            }
            None => match $op {
                AmoOpcode::Min => a.min(b),
                AmoOpcode::Max => a.max(b),
                AmoOpcode::Sum => a.wrapping_add(b),
                AmoOpcode::Diff => a.wrapping_sub(b),
                AmoOpcode::Prod => a.wrapping_mul(b),
                AmoOpcode::Lor => ((a != 0) || (b != 0)) as $t,
                AmoOpcode::Land => ((a != 0) && (b != 0)) as $t,
                AmoOpcode::Lxor => ((a != 0) ^ (b != 0)) as $t,
                AmoOpcode::Bor => a | b,
                AmoOpcode::Band => a & b,
                AmoOpcode::Bxor => a ^ b,
                AmoOpcode::Read => a,
                AmoOpcode::Write => b,
                other => panic!("no reference for {other:?}"),
            },
        };
        r.to_le_bytes().to_vec()
    }};
}

/// Complex numbers as (re, im) pairs of `$t`, computed with `$t` arithmetic.
macro_rules! reference_complex {
    ($t:ty, $op:expr, $a:expr, $b:expr, $cmp:expr) => {{
        let n = std::mem::size_of::<$t>();
        let pair = |x: &[u8]| -> ($t, $t) {
            (<$t>::from_le_bytes(x[..n].try_into().unwrap()), <$t>::from_le_bytes(x[n..].try_into().unwrap()))
        };
        let (a, b, c) = (pair($a), pair($b), pair($cmp));
        let r: ($t, $t) = match $op {
            AmoOpcode::Sum => (a.0 + b.0, a.1 + b.1),
            AmoOpcode::Diff => (a.0 - b.0, a.1 - b.1),
            AmoOpcode::Prod => (a.0 * b.0 - a.1 * b.1, a.0 * b.1 + a.1 * b.0),
            AmoOpcode::Read => a,
            AmoOpcode::Write => b,
            AmoOpcode::Cswap | AmoOpcode::CswapNe => {
                if cas_swaps($op, c, a) == Some(true) {
                    b
                } else {
                    a
                }
            }
            other => panic!("no reference for {other:?}"),
        };
        r.0.to_le_bytes().into_iter().chain(r.1.to_le_bytes()).collect::<Vec<u8>>()
    }};
}

macro_rules! reference_float {
    ($t:ty, $op:expr, $a:expr, $b:expr, $cmp:expr) => {{
        let a = <$t>::from_le_bytes($a.try_into().unwrap());
        let b = <$t>::from_le_bytes($b.try_into().unwrap());
        let c = <$t>::from_le_bytes($cmp.try_into().unwrap());
        let r: $t = match cas_swaps($op, c, a) {
            Some(swap) => {
                if swap {
                    b
                } else {
                    a
                }
            }
            None => match $op {
                AmoOpcode::Min => a.min(b),
                AmoOpcode::Max => a.max(b),
                AmoOpcode::Sum => a + b,
                AmoOpcode::Diff => a - b,
                AmoOpcode::Prod => a * b,
                AmoOpcode::Read => a,
                AmoOpcode::Write => b,
                other => panic!("no reference for {other:?}"),
            },
        };
        r.to_le_bytes().to_vec()
    }};
}

/// The new value of one element. For CAS, `operand` is the swap value and `compare` the compare.
fn reference(op: AmoOpcode, dt: AmoDatatype, target: &[u8], operand: &[u8], compare: &[u8]) -> Vec<u8> {
    use AmoDatatype::*;
    match dt {
        Int8 => reference_int!(i8, op, target, operand, compare),
        Uint8 => reference_int!(u8, op, target, operand, compare),
        Int16 => reference_int!(i16, op, target, operand, compare),
        Uint16 => reference_int!(u16, op, target, operand, compare),
        Int32 => reference_int!(i32, op, target, operand, compare),
        Uint32 => reference_int!(u32, op, target, operand, compare),
        Int64 => reference_int!(i64, op, target, operand, compare),
        Uint64 => reference_int!(u64, op, target, operand, compare),
        Int128 => reference_int!(i128, op, target, operand, compare),
        Uint128 => reference_int!(u128, op, target, operand, compare),
        Float => reference_float!(f32, op, target, operand, compare),
        Double => reference_float!(f64, op, target, operand, compare),
        Fp16 => reference_float!(half::f16, op, target, operand, compare),
        Bf16 => reference_float!(half::bf16, op, target, operand, compare),
        FloatComplex => reference_complex!(f32, op, target, operand, compare),
        DoubleComplex => reference_complex!(f64, op, target, operand, compare),
        other => panic!("no reference for {other:?}"),
    }
}

fn cfg(rank: u32) -> Config {
    let pds = pds::Config { max_retries: 16, ..pds::Config::default() };
    Config { pds, initiator: rank, max_payload: 1400, ..Config::default() }
}

#[derive(Debug)]
enum Kind {
    Atomic,
    Fetch,
    Compare,
}

struct Case {
    op: AmoOpcode,
    dt: AmoDatatype,
    kind: Kind,
    slot: usize,
    operands: Vec<u8>,
    compare: Vec<u8>,
    expect_mem: Vec<u8>,
    expect_old: Vec<u8>,
}

fn run(seed: u64, link: LinkConfig) -> Result<usize, String> {
    let mut rng = Rng(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) | 1);
    let mut sim = Ses::pair(seed, [cfg(0), cfg(1)], link);
    let dst = addr(sim.ends.eps[1].config(), 1);
    let mut cases = Vec::new();
    let pairs = supported_pairs(false).into_iter().map(|p| (p, Kind::Atomic));
    let fetching = supported_pairs(true).into_iter().map(|(op, dt)| {
        let k = if op.is_compare_swap() { Kind::Compare } else { Kind::Fetch };
        ((op, dt), k)
    });
    let mut mem = Vec::new();
    for (i, ((op, dt), kind)) in pairs.chain(fetching).enumerate() {
        let n = if matches!(kind, Kind::Atomic) { BATCH } else { 1 };
        let mut before = Vec::new();
        let mut operands = Vec::new();
        let mut expect_mem = Vec::new();
        let compare = rng.element(dt);
        for _ in 0..n {
            let t = rng.element(dt);
            // For compares, make equality likely half the time.
            let t = if matches!(kind, Kind::Compare) && rng.next() & 1 == 0 { compare.clone() } else { t };
            let o = rng.element(dt);
            expect_mem.extend(reference(op, dt, &t, &o, &compare));
            before.extend(&t);
            operands.extend(&o);
        }
        mem.extend(&before);
        mem.resize((i + 1) * SLOT, 0);
        cases.push(Case { op, dt, kind, slot: i, operands, compare, expect_mem, expect_old: before });
    }
    sim.ends.eps[1].regions.register(KEY, mem, Access::ALL, JobScope::Any).unwrap();
    // Issue in waves of 32 (the PDC's send queue is finite).
    for wave in cases.chunks(32) {
        let first = wave[0].slot as u64;
        for c in wave {
            let off = (c.slot * SLOT) as u64;
            let opts = Opts { context: c.slot as u64, ..Opts::default() };
            let r = match c.kind {
                Kind::Atomic => sim.ends.eps[0].atomic(dst, KEY, off, c.op, c.dt, &c.operands, opts),
                Kind::Fetch => sim.ends.eps[0].fetch_atomic(dst, KEY, off, c.op, c.dt, &c.operands, opts),
                Kind::Compare => {
                    sim.ends.eps[0].compare_atomic(dst, KEY, off, c.op, c.dt, &c.compare, &c.operands, opts)
                }
            };
            r.map_err(|e| format!("{:?} {:?} {:?}: {e}", c.kind, c.op, c.dt))?;
        }
        let want = first + wave.len() as u64;
        let limit = sim.now() + Duration::from_secs(20);
        let done = sim.run_until(limit, |s| (first..want).all(|ctx| s.ends.completion(0, ctx).is_some()));
        if !done {
            return Err(format!("wave from {first} did not complete"));
        }
    }
    let region = sim.ends.eps[1].regions.get(KEY).unwrap().data.bytes().to_vec();
    for c in &cases {
        let at = c.slot * SLOT;
        let got = &region[at..at + c.expect_mem.len()];
        let comp = sim.ends.completion(0, c.slot as u64).unwrap();
        let what = format!("{:?} {:?} {:?}", c.kind, c.op, c.dt);
        if comp.status != Status::Ok {
            return Err(format!("{what}: {:?}", comp.status));
        }
        if got != &c.expect_mem[..] {
            return Err(format!("{what}: memory {got:02x?}, reference {:02x?}", c.expect_mem));
        }
        let fetched = !matches!(c.kind, Kind::Atomic);
        let want_kind = if fetched { CompletionKind::FetchAtomic } else { CompletionKind::Atomic };
        if comp.kind != want_kind || (fetched && comp.data != c.expect_old) {
            return Err(format!(
                "{what}: completion {:?} data {:02x?}, old {:02x?}",
                comp.kind, comp.data, c.expect_old
            ));
        }
    }
    if sim.ends.done[0].len() != cases.len() {
        return Err(format!("{} completions for {} atomics", sim.ends.done[0].len(), cases.len()));
    }
    Ok(cases.len())
}

fn matrix(name: &str, first: u64, loss: f64) {
    let seeds: Vec<u64> = match std::env::var("SES_SEED") {
        Ok(s) => vec![s.parse().unwrap()],
        Err(_) => (first..first + 6).collect(),
    };
    let link = LinkConfig { latency: Duration::from_micros(2), loss, ..LinkConfig::default() };
    let mut failures = Vec::new();
    let mut ops = 0;
    for &seed in &seeds {
        match run(seed, link) {
            Ok(n) => ops += n,
            Err(e) => failures.push(format!("seed {seed}: {e}")),
        }
    }
    println!("{name}: {} seeds, {ops} atomics checked, {} failures", seeds.len(), failures.len());
    assert!(failures.is_empty(), "{name}:\n{}", failures.join("\n"));
}

#[test]
fn every_supported_pair_lossless() {
    matrix("loss 0%", 0, 0.0);
}

#[test]
fn every_supported_pair_loss_1_percent() {
    matrix("loss 1%", 100, 0.01);
}

#[test]
fn every_supported_pair_loss_10_percent() {
    matrix("loss 10%", 200, 0.1);
}

/// Refused atomics answer the spec's return code and leave the target untouched.
#[test]
fn refusals_touch_nothing() {
    let link = LinkConfig { latency: Duration::from_micros(2), ..LinkConfig::default() };
    let mut sim = Ses::pair(7, [cfg(0), cfg(1)], link);
    let dst = addr(sim.ends.eps[1].config(), 1);
    let job = sim.ends.eps[1].config().job_id;
    let before: Vec<u8> = (0..64).collect();
    sim.ends.eps[1].regions.register(KEY, before.clone(), Access::ALL, JobScope::Any).unwrap();
    sim.ends.eps[1].regions.register(0x77, before.clone(), Access::ALL, JobScope::Job(job + 1)).unwrap();
    let ro = Access { remote_read: true, remote_write: false };
    sim.ends.eps[1].regions.register(0x78, before.clone(), ro, JobScope::Any).unwrap();
    let one = 1u64.to_le_bytes();
    let o = |context| Opts { context, ..Opts::default() };
    let e = &mut sim.ends.eps[0];
    e.atomic(dst, KEY, 0, AmoOpcode::Sum, AmoDatatype::LongDouble, &[1; 16], o(1)).unwrap();
    e.atomic(dst, KEY, 0, AmoOpcode::Bxor, AmoDatatype::Double, &one, o(2)).unwrap();
    e.atomic(dst, KEY, 4, AmoOpcode::Sum, AmoDatatype::Uint64, &one, o(3)).unwrap();
    e.atomic(dst, 0x99, 0, AmoOpcode::Sum, AmoDatatype::Uint64, &one, o(4)).unwrap();
    e.atomic(dst, 0x77, 0, AmoOpcode::Sum, AmoDatatype::Uint64, &one, o(5)).unwrap();
    e.atomic(dst, 0x78, 0, AmoOpcode::Sum, AmoDatatype::Uint64, &one, o(6)).unwrap();
    e.atomic(dst, KEY, 60, AmoOpcode::Sum, AmoDatatype::Uint64, &one, o(7)).unwrap();
    e.atomic(dst, KEY, 0, AmoOpcode::Read, AmoDatatype::Uint64, &one, o(8)).unwrap();
    e.fetch_atomic(dst, KEY, 0, AmoOpcode::Mswap, AmoDatatype::Uint64, &one, o(9)).unwrap();
    assert_eq!(
        e.atomic(dst, KEY, 0, AmoOpcode::Cswap, AmoDatatype::Uint64, &one, o(12)),
        Err(ses::Error::Unsupported)
    );
    assert_eq!(
        e.fetch_atomic(dst, KEY, 0, AmoOpcode::Sum, AmoDatatype::Uint64, &[1; 16], o(10)),
        Err(ses::Error::BadOperand)
    );
    assert_eq!(
        e.atomic(dst, KEY, 0, AmoOpcode::Sum, AmoDatatype::Uint32, &[1; 6], o(11)),
        Err(ses::Error::BadOperand)
    );
    let done = sim.run_until(Duration::from_secs(1), |s| s.ends.done[0].len() == 9);
    assert!(done, "{:?}", sim.ends.done[0]);
    let want = [
        (1, ReturnCode::AmoUnsupportedDt),
        (2, ReturnCode::AmoUnsupportedOp),
        (3, ReturnCode::AmoUnaligned),
        (4, ReturnCode::BadMkey),
        (5, ReturnCode::BadJobId),
        (6, ReturnCode::PermViolation),
        (7, ReturnCode::BadAddr),
        (8, ReturnCode::AmoUnsupportedOp),
        (9, ReturnCode::AmoUnsupportedOp),
    ];
    for (ctx, rc) in want {
        assert_eq!(sim.ends.completion(0, ctx).unwrap().status, Status::Remote(rc), "context {ctx}");
    }
    for k in [KEY, 0x77, 0x78] {
        assert_eq!(sim.ends.eps[1].regions.get(k).unwrap().data.bytes(), &before[..], "key {k:#x} touched");
    }
}
