//! Atomic memory operations on a target region (`../shared/spec/uet-wire.md` §3, AMO opcodes and
//! datatypes; `../shared/spec/uet-libfabric.md` "Data operations").
//!
//! Supported datatypes: the integers INT8..UINT128, FP16, BF16, FLOAT, DOUBLE, FLOAT_COMPLEX and
//! DOUBLE_COMPLEX (real part first). LONG_DOUBLE and LONG_DOUBLE_COMPLEX (x87 extended precision,
//! no portable layout) are answered AMO_UNSUPPORTED_DT. Supported opcodes: SUM, DIFF
//! (`target - operand`), PROD and WRITE on every supported type; MIN and MAX on the real types;
//! LOR, LAND, LXOR (result 0 or 1) and BOR, BAND, BXOR on integers only; READ on fetching atomics
//! only; the compare-and-swap family (CSWAP, CSWAP_NE/LE/LT/GE/GT, with libfabric's meaning: the
//! swap value is stored when `compare OP target` holds, e.g. CSWAP_LT stores when
//! `compare < target`) on fetching atomics only, and on complex types CSWAP and CSWAP_NE only.
//! MSWAP and INVAL are answered AMO_UNSUPPORTED_OP: the CAS extension is defined for opcodes
//! 0x0D-0x12 only, so MSWAP's mask has no place on the wire. Integer arithmetic wraps; FP16 and
//! BF16 are computed exactly in double precision and rounded once to the nearest (`half`).
//!
//! Byte order: elements in memory and operands in the payload are little-endian (payload bytes are
//! copies of the initiator's buffer). The CAS extension's `compare` and `swap` fields hold the
//! operand as a 128-bit big-endian number ([`to_cas_field`], [`from_cas_field`]).

use wire::uet::ses::{AmoDatatype, AmoOpcode, ReturnCode};

/// Bytes of one element of `dt` (long double as x86-64 stores it, 16 bytes); `None` for values
/// outside the table.
pub fn element_size(dt: AmoDatatype) -> Option<usize> {
    use AmoDatatype::*;
    Some(match dt {
        Int8 | Uint8 => 1,
        Int16 | Uint16 | Bf16 | Fp16 => 2,
        Int32 | Uint32 | Float => 4,
        Int64 | Uint64 | Double | FloatComplex => 8,
        Int128 | Uint128 | DoubleComplex | LongDouble => 16,
        LongDoubleComplex => 32,
        _ => return None,
    })
}

/// True for the datatypes this implementation computes on.
pub fn datatype_supported(dt: AmoDatatype) -> bool {
    class(dt).is_some()
}

/// True when `op` on `dt` is supported; `fetching` says whether the request is a FETCHING_ATOMIC.
pub fn supported(op: AmoOpcode, dt: AmoDatatype, fetching: bool) -> bool {
    check(op, dt, fetching).is_ok()
}

/// Every (opcode, datatype) pair the implementation supports for non-fetching (`false`) or
/// fetching (`true`) atomics, for capability reporting and test matrices.
pub fn supported_pairs(fetching: bool) -> Vec<(AmoOpcode, AmoDatatype)> {
    let mut v = Vec::new();
    for op in 0..=0x14u8 {
        for dt in 0..=0x11u8 {
            let (op, dt) = (AmoOpcode::from(op), AmoDatatype::from(dt));
            if supported(op, dt, fetching) {
                v.push((op, dt));
            }
        }
    }
    v
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Signed,
    Unsigned,
    F16,
    Bf16,
    F32,
    F64,
    C32,
    C64,
}

fn class(dt: AmoDatatype) -> Option<Class> {
    use AmoDatatype::*;
    Some(match dt {
        Int8 | Int16 | Int32 | Int64 | Int128 => Class::Signed,
        Uint8 | Uint16 | Uint32 | Uint64 | Uint128 => Class::Unsigned,
        Fp16 => Class::F16,
        Bf16 => Class::Bf16,
        Float => Class::F32,
        Double => Class::F64,
        FloatComplex => Class::C32,
        DoubleComplex => Class::C64,
        _ => return None,
    })
}

/// The return code for `op` on `dt`, before any memory is looked at.
pub fn check(op: AmoOpcode, dt: AmoDatatype, fetching: bool) -> Result<(), ReturnCode> {
    use AmoOpcode::*;
    let c = class(dt).ok_or(ReturnCode::AmoUnsupportedDt)?;
    let int = matches!(c, Class::Signed | Class::Unsigned);
    let complex = matches!(c, Class::C32 | Class::C64);
    let ok = match op {
        Sum | Diff | Prod | Write => true,
        Min | Max => !complex,
        Lor | Land | Lxor | Bor | Band | Bxor => int,
        Read => fetching,
        Cswap | CswapNe => fetching,
        CswapLe | CswapLt | CswapGe | CswapGt => fetching && !complex,
        _ => false,
    };
    if ok { Ok(()) } else { Err(ReturnCode::AmoUnsupportedOp) }
}

/// One element's value, widened.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Val {
    S(i128),
    U(u128),
    F(f64),
    C(f64, f64),
}

fn load(c: Class, b: &[u8]) -> Val {
    let mut raw = [0u8; 16];
    raw[..b.len()].copy_from_slice(b);
    let u = u128::from_le_bytes(raw);
    match c {
        Class::Unsigned => Val::U(u),
        Class::Signed => {
            let shift = 128 - 8 * b.len() as u32;
            Val::S(((u << shift) as i128) >> shift)
        }
        Class::F16 => Val::F(half::f16::from_le_bytes([b[0], b[1]]).to_f64()),
        Class::Bf16 => Val::F(half::bf16::from_le_bytes([b[0], b[1]]).to_f64()),
        Class::F32 => Val::F(f64::from(f32_at(b, 0))),
        Class::F64 => Val::F(f64_at(b, 0)),
        Class::C32 => Val::C(f64::from(f32_at(b, 0)), f64::from(f32_at(b, 4))),
        Class::C64 => Val::C(f64_at(b, 0), f64_at(b, 8)),
    }
}

fn f32_at(b: &[u8], at: usize) -> f32 {
    f32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn f64_at(b: &[u8], at: usize) -> f64 {
    f64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

fn store(c: Class, v: Val, b: &mut [u8]) {
    let n = b.len();
    match (c, v) {
        (Class::F16, Val::F(f)) => b.copy_from_slice(&half::f16::from_f64(f).to_le_bytes()),
        (Class::Bf16, Val::F(f)) => b.copy_from_slice(&half::bf16::from_f64(f).to_le_bytes()),
        (Class::F32, Val::F(f)) => b.copy_from_slice(&(f as f32).to_le_bytes()),
        (Class::F64, Val::F(f)) => b.copy_from_slice(&f.to_le_bytes()),
        (Class::C32, Val::C(re, im)) => {
            b[..4].copy_from_slice(&(re as f32).to_le_bytes());
            b[4..].copy_from_slice(&(im as f32).to_le_bytes());
        }
        (Class::C64, Val::C(re, im)) => {
            b[..8].copy_from_slice(&re.to_le_bytes());
            b[8..].copy_from_slice(&im.to_le_bytes());
        }
        (_, Val::S(s)) => b.copy_from_slice(&s.to_le_bytes()[..n]),
        (_, Val::U(u)) => b.copy_from_slice(&u.to_le_bytes()[..n]),
        _ => unreachable!("values are loaded and stored in their own class"),
    }
}

fn truth(v: Val) -> bool {
    match v {
        Val::S(s) => s != 0,
        Val::U(u) => u != 0,
        Val::F(f) => f != 0.0,
        Val::C(re, im) => re != 0.0 || im != 0.0,
    }
}

fn from_bool(c: Class, b: bool) -> Val {
    match c {
        Class::Signed => Val::S(i128::from(b)),
        _ => Val::U(u128::from(b)),
    }
}

/// `op(target, operand)` for the non-compare opcodes (checked supported before).
fn combine(c: Class, op: AmoOpcode, t: Val, o: Val) -> Val {
    use AmoOpcode::*;
    use Val::*;
    match (op, t, o) {
        (Min, S(a), S(b)) => S(a.min(b)),
        (Min, U(a), U(b)) => U(a.min(b)),
        (Min, F(a), F(b)) => F(a.min(b)),
        (Max, S(a), S(b)) => S(a.max(b)),
        (Max, U(a), U(b)) => U(a.max(b)),
        (Max, F(a), F(b)) => F(a.max(b)),
        (Sum, S(a), S(b)) => S(a.wrapping_add(b)),
        (Sum, U(a), U(b)) => U(a.wrapping_add(b)),
        (Sum, F(a), F(b)) => F(sum_f(c, a, b)),
        (Diff, S(a), S(b)) => S(a.wrapping_sub(b)),
        (Diff, U(a), U(b)) => U(a.wrapping_sub(b)),
        (Diff, F(a), F(b)) => F(sum_f(c, a, -b)),
        (Prod, S(a), S(b)) => S(a.wrapping_mul(b)),
        (Prod, U(a), U(b)) => U(a.wrapping_mul(b)),
        (Prod, F(a), F(b)) => F(prod_f(c, a, b)),
        (Sum, C(ar, ai), C(br, bi)) => C(sum_f(c, ar, br), sum_f(c, ai, bi)),
        (Diff, C(ar, ai), C(br, bi)) => C(sum_f(c, ar, -br), sum_f(c, ai, -bi)),
        (Prod, C(ar, ai), C(br, bi)) => C(complex_part(c, ar, br, -ai, bi), complex_part(c, ar, bi, ai, br)),
        (Lor, a, b) => from_bool(c, truth(a) || truth(b)),
        (Land, a, b) => from_bool(c, truth(a) && truth(b)),
        (Lxor, a, b) => from_bool(c, truth(a) != truth(b)),
        (Bor, S(a), S(b)) => S(a | b),
        (Bor, U(a), U(b)) => U(a | b),
        (Band, S(a), S(b)) => S(a & b),
        (Band, U(a), U(b)) => U(a & b),
        (Bxor, S(a), S(b)) => S(a ^ b),
        (Bxor, U(a), U(b)) => U(a ^ b),
        (Write, _, b) => b,
        (Read, a, _) => a,
        _ => unreachable!("opcode and datatype checked before"),
    }
}

/// Single-precision types compute in `f32` like the initiator's own arithmetic would; FP16 and
/// BF16 sums and products are exact in `f64` and rounded once when stored.
fn single(c: Class) -> bool {
    matches!(c, Class::F32 | Class::C32)
}

fn sum_f(c: Class, a: f64, b: f64) -> f64 {
    if single(c) { f64::from(a as f32 + b as f32) } else { a + b }
}

fn prod_f(c: Class, a: f64, b: f64) -> f64 {
    if single(c) { f64::from(a as f32 * b as f32) } else { a * b }
}

/// `a*b + c*d` in the type's precision (a part of a complex product).
fn complex_part(c: Class, a: f64, b: f64, cc: f64, d: f64) -> f64 {
    if single(c) { f64::from((a as f32) * (b as f32) + (cc as f32) * (d as f32)) } else { a * b + cc * d }
}

fn compare_holds(op: AmoOpcode, compare: Val, target: Val) -> bool {
    let ord = match (compare, target) {
        (Val::S(a), Val::S(b)) => a.partial_cmp(&b),
        (Val::U(a), Val::U(b)) => a.partial_cmp(&b),
        (Val::F(a), Val::F(b)) => a.partial_cmp(&b),
        // Complex numbers compare for equality only.
        (Val::C(ar, ai), Val::C(br, bi)) => (ar == br && ai == bi).then_some(std::cmp::Ordering::Equal),
        _ => None,
    };
    use std::cmp::Ordering::*;
    match (op, ord) {
        (AmoOpcode::Cswap, Some(o)) => o == Equal,
        (AmoOpcode::CswapNe, o) => o != Some(Equal),
        (AmoOpcode::CswapLe, Some(o)) => o != Greater,
        (AmoOpcode::CswapLt, Some(o)) => o == Less,
        (AmoOpcode::CswapGe, Some(o)) => o != Less,
        (AmoOpcode::CswapGt, Some(o)) => o == Greater,
        _ => false,
    }
}

/// Applies a non-compare `op` element by element: `target[i] = op(target[i], operands[i])`.
/// `target` and `operands` have the same length, a multiple of the element size; the old
/// contents go to `old` when given (fetching atomics).
pub fn apply(
    op: AmoOpcode,
    dt: AmoDatatype,
    target: &mut [u8],
    operands: &[u8],
    old: Option<&mut Vec<u8>>,
) -> Result<(), ReturnCode> {
    let c = class(dt).ok_or(ReturnCode::AmoUnsupportedDt)?;
    let size = element_size(dt).ok_or(ReturnCode::AmoUnsupportedDt)?;
    if operands.len() != target.len() || operands.is_empty() || operands.len() % size != 0 {
        return Err(ReturnCode::AmoUnsupportedSize);
    }
    if let Some(old) = old {
        old.clear();
        old.extend_from_slice(target);
    }
    for (t, o) in target.chunks_exact_mut(size).zip(operands.chunks_exact(size)) {
        let v = combine(c, op, load(c, t), load(c, o));
        store(c, v, t);
    }
    Ok(())
}

/// Applies a compare-and-swap `op` on one element; returns the old value.
pub fn compare_swap(
    op: AmoOpcode,
    dt: AmoDatatype,
    target: &mut [u8],
    compare: &[u8],
    swap: &[u8],
) -> Result<Vec<u8>, ReturnCode> {
    let c = class(dt).ok_or(ReturnCode::AmoUnsupportedDt)?;
    let size = element_size(dt).ok_or(ReturnCode::AmoUnsupportedDt)?;
    if target.len() != size || compare.len() != size || swap.len() != size {
        return Err(ReturnCode::AmoUnsupportedSize);
    }
    let old = target.to_vec();
    if compare_holds(op, load(c, compare), load(c, target)) {
        target.copy_from_slice(swap);
    }
    Ok(old)
}

/// An operand of `le.len()` bytes (little-endian, as in memory) as a CAS extension field: a
/// 128-bit big-endian number.
pub fn to_cas_field(le: &[u8]) -> [u8; 16] {
    let mut raw = [0u8; 16];
    let n = le.len().min(16);
    raw[..n].copy_from_slice(&le[..n]);
    u128::from_le_bytes(raw).to_be_bytes()
}

/// The low `size` bytes of a CAS extension field, little-endian (as in memory).
pub fn from_cas_field(field: &[u8; 16], size: usize) -> Vec<u8> {
    u128::from_be_bytes(*field).to_le_bytes()[..size.min(16)].to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn support_table() {
        use AmoDatatype::*;
        use AmoOpcode::*;
        assert_eq!(check(Sum, Double, false), Ok(()));
        assert_eq!(check(Bxor, Float, false), Err(ReturnCode::AmoUnsupportedOp));
        assert_eq!(check(Sum, LongDouble, false), Err(ReturnCode::AmoUnsupportedDt));
        assert_eq!(check(Min, FloatComplex, false), Err(ReturnCode::AmoUnsupportedOp));
        assert_eq!(check(CswapLt, DoubleComplex, true), Err(ReturnCode::AmoUnsupportedOp));
        assert_eq!(check(Cswap, Uint64, false), Err(ReturnCode::AmoUnsupportedOp));
        assert_eq!(check(Cswap, Uint64, true), Ok(()));
        assert_eq!(check(Read, Int8, false), Err(ReturnCode::AmoUnsupportedOp));
        assert_eq!(check(Mswap, Uint64, true), Err(ReturnCode::AmoUnsupportedOp));
        // Fetching: 19 opcodes on 10 integer types, 13 on 4 real float types, 7 on 2 complex.
        assert_eq!(supported_pairs(true).len(), 19 * 10 + 13 * 4 + 7 * 2);
        assert_eq!(supported_pairs(false).len(), 12 * 10 + 6 * 4 + 4 * 2);
    }

    #[test]
    fn widths_signs_and_wrapping() {
        let mut t = (-3i8).to_le_bytes();
        apply(AmoOpcode::Max, AmoDatatype::Int8, &mut t, &(-5i8).to_le_bytes(), None).unwrap();
        assert_eq!(i8::from_le_bytes(t), -3);
        let mut t = 250u8.to_le_bytes();
        apply(AmoOpcode::Sum, AmoDatatype::Uint8, &mut t, &10u8.to_le_bytes(), None).unwrap();
        assert_eq!(t[0], 4);
        let mut t = i128::MIN.to_le_bytes();
        apply(AmoOpcode::Diff, AmoDatatype::Int128, &mut t, &1i128.to_le_bytes(), None).unwrap();
        assert_eq!(i128::from_le_bytes(t), i128::MAX);
        let mut t = 1.5f32.to_le_bytes();
        let mut old = Vec::new();
        apply(AmoOpcode::Prod, AmoDatatype::Float, &mut t, &2.0f32.to_le_bytes(), Some(&mut old)).unwrap();
        assert_eq!((f32::from_le_bytes(t), f32::from_le_bytes(old[..].try_into().unwrap())), (3.0, 1.5));
        assert_eq!(
            apply(AmoOpcode::Sum, AmoDatatype::Uint32, &mut [0; 4], &[0; 3], None),
            Err(ReturnCode::AmoUnsupportedSize)
        );
    }

    #[test]
    fn compare_swap_follows_libfabric() {
        let t0 = 10u32.to_le_bytes();
        for (op, compare, stored) in [
            (AmoOpcode::Cswap, 10u32, true),
            (AmoOpcode::Cswap, 9, false),
            (AmoOpcode::CswapNe, 9, true),
            (AmoOpcode::CswapLt, 9, true),
            (AmoOpcode::CswapLt, 10, false),
            (AmoOpcode::CswapLe, 10, true),
            (AmoOpcode::CswapGt, 11, true),
            (AmoOpcode::CswapGe, 9, false),
        ] {
            let mut t = t0;
            let old =
                compare_swap(op, AmoDatatype::Uint32, &mut t, &compare.to_le_bytes(), &7u32.to_le_bytes())
                    .unwrap();
            assert_eq!(old, t0);
            assert_eq!(u32::from_le_bytes(t) == 7, stored, "{op:?} compare {compare}");
        }
        let f = to_cas_field(&0x0102u16.to_le_bytes());
        assert_eq!(&f[14..], &[1, 2]);
        assert_eq!(from_cas_field(&f, 2), 0x0102u16.to_le_bytes());
    }
}
