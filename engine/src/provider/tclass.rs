//! libfabric traffic classes (`fi_domain_attr.tclass`, `fi_tx_attr.tclass`) as the DSCP of UET
//! packets (`../shared/spec/uet-libfabric.md`, "Configuration": `UET_PROVIDER_DEF_DATA_TC` is the
//! default data traffic class as a DSCP, a domain's `tclass` overrides it).
//!
//! | `tclass` | DSCP of the data packets | why |
//! |---|---|---|
//! | `FI_TC_UNSPEC` (0) | `UET_PROVIDER_DEF_DATA_TC` (default 0) | the mapping's default data class |
//! | `FI_TC_DSCP \| n` (0x100 + n, n < 64) | n | libfabric's explicit DSCP |
//! | `FI_TC_BEST_EFFORT` (0x200) | 0 (CS0) | RFC 4594 "standard" |
//! | `FI_TC_LOW_LATENCY` (0x201) | 18 (AF21) | RFC 4594 "low-latency data" |
//! | `FI_TC_DEDICATED_ACCESS` (0x202) | 34 (AF41) | RFC 4594's highest assured-forwarding class, for traffic given its own share of the link |
//! | `FI_TC_BULK_DATA` (0x203) | 10 (AF11) | RFC 4594 "high-throughput data" |
//! | `FI_TC_SCAVENGER` (0x204) | 8 (CS1) | RFC 4594 "low-priority data" |
//! | `FI_TC_NETWORK_CTRL` (0x205) | 48 (CS6) | RFC 4594 "network control" |
//!
//! Anything else (another label, a DSCP of 64 or more, DSCP 0x21, which marks frames a switch
//! trimmed: [`crate::uet::TRIMMED_DSCP`]) is refused with FI_EINVAL. The PDS's own packets (ACK,
//! NACK, CP) go in the same class as the data of their endpoint: a class's acknowledgements share
//! its queues in the switches ([`crate::uet::TrafficClass`] can split them, as `softrdma perf
//! --ack-tclass` does).

use super::errno::{FiErrno, FiError};

/// `FI_TC_UNSPEC`.
pub const FI_TC_UNSPEC: u32 = 0;
/// `FI_TC_DSCP`: the low 6 bits are the DSCP.
pub const FI_TC_DSCP: u32 = 0x100;
/// `FI_TC_LABEL`, the first of the labels (`FI_TC_BEST_EFFORT`).
pub const FI_TC_LABEL: u32 = 0x200;
/// `FI_TC_BEST_EFFORT`.
pub const FI_TC_BEST_EFFORT: u32 = 0x200;
/// `FI_TC_LOW_LATENCY`.
pub const FI_TC_LOW_LATENCY: u32 = 0x201;
/// `FI_TC_DEDICATED_ACCESS`.
pub const FI_TC_DEDICATED_ACCESS: u32 = 0x202;
/// `FI_TC_BULK_DATA`.
pub const FI_TC_BULK_DATA: u32 = 0x203;
/// `FI_TC_SCAVENGER`.
pub const FI_TC_SCAVENGER: u32 = 0x204;
/// `FI_TC_NETWORK_CTRL`.
pub const FI_TC_NETWORK_CTRL: u32 = 0x205;

/// The DSCP a `tclass` asks for (see the module's table); `default` is the domain's data class
/// for `FI_TC_UNSPEC`.
pub fn to_dscp(tclass: u32, default: u8) -> Result<u8, FiError> {
    let dscp = match tclass {
        FI_TC_UNSPEC => default,
        t if t & !0x3F == FI_TC_DSCP => (t & 0x3F) as u8,
        FI_TC_BEST_EFFORT => 0,
        FI_TC_LOW_LATENCY => 18,
        FI_TC_DEDICATED_ACCESS => 34,
        FI_TC_BULK_DATA => 10,
        FI_TC_SCAVENGER => 8,
        FI_TC_NETWORK_CTRL => 48,
        t => {
            return Err(FiError::new(
                FiErrno::EINVAL,
                format!("traffic class {t:#x} is not one softrdma maps"),
            ));
        }
    };
    if dscp == crate::uet::TRIMMED_DSCP || dscp > 63 {
        return Err(FiError::new(FiErrno::EINVAL, format!("DSCP {dscp:#x} marks trimmed UET frames")));
    }
    Ok(dscp)
}

/// The `tclass` that names a DSCP (what `fi_getinfo` reports for a domain's data class).
pub const fn of_dscp(dscp: u8) -> u32 {
    FI_TC_DSCP | (dscp as u32 & 0x3F)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_label_and_explicit_dscps_map_and_the_rest_is_refused() {
        let table = [
            (FI_TC_BEST_EFFORT, 0),
            (FI_TC_LOW_LATENCY, 18),
            (FI_TC_DEDICATED_ACCESS, 34),
            (FI_TC_BULK_DATA, 10),
            (FI_TC_SCAVENGER, 8),
            (FI_TC_NETWORK_CTRL, 48),
            (FI_TC_UNSPEC, 26),
            (FI_TC_DSCP | 46, 46),
            (of_dscp(63), 63),
        ];
        for (tc, dscp) in table {
            assert_eq!(to_dscp(tc, 26).unwrap(), dscp, "{tc:#x}");
        }
        for bad in [FI_TC_LABEL + 6, 0x21 | FI_TC_DSCP, 5, 0x140, u32::MAX] {
            assert_eq!(to_dscp(bad, 0).unwrap_err().errno, FiErrno::EINVAL, "{bad:#x}");
        }
        assert_eq!(to_dscp(FI_TC_UNSPEC, 0x21).unwrap_err().errno, FiErrno::EINVAL);
    }
}
