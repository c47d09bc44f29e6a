//! The sizes and positions the sources disagree on, each defined once (uet-wire.md, "Decisions").

/// RUDI request/response header: prologue, rsvd16, pkt_id (REF and XDP2; WS says 6).
pub const RUDI_LEN: usize = 8;
/// ACK_CCX and NACK_CCX congestion state (REF and WS; XDP2 writes 8).
pub const CCX_STATE_LEN: usize = 16;
/// CP header with its 4-byte payload word (REF and WS; XDP2 writes 12).
pub const CP_LEN: usize = 16;
/// CP control type 9 is NEGOTIATION (REF and XDP2; WS lacks it).
pub const CP_NEGOTIATION: u8 = 9;
/// CP flag 0x20 is ISROD (REF; WS counts it reserved).
pub const CP_FLAG_ISROD: u8 = 0x20;
/// Rendezvous extension header (REF and WS; XDP2 writes 8).
pub const RENDEZVOUS_EXT_LEN: usize = 24;
/// Response-with-data-small (REF and XDP2; WS parses 4).
pub const RSP_DATA_SMALL_LEN: usize = 12;
/// Medium request: 32 bytes, bytes 2-3 are `rsvd:2 | request_length:14` (REF; XDP2 writes
/// message_id there, WS mis-parses).
pub const MEDIUM_REQUEST_LEN: usize = 32;
/// Atomic extension `sem_ctl`: REF's flag bits in the low bits (XDP2 uses the MSBs).
pub const SEM_CTL_CACHEABLE: u8 = 0x01;
/// See [`SEM_CTL_CACHEABLE`].
pub const SEM_CTL_CPU_COHERENT: u8 = 0x02;
/// ACK flag 0x40 (ref-prov's EPSN) is reserved in 1.0: never sent, carried unchanged on receive.
pub const ACK_FLAG_RESERVED_EPSN: u8 = 0x40;
/// Optional CRC trailer: CRC32C (Castagnoli) over PDS header through payload, 4 bytes, sent
/// big-endian (no source gives the byte order; network order chosen).
pub const CRC_LEN: usize = 4;
/// Computes the CRC trailer value.
pub fn crc32c(data: &[u8]) -> u32 {
    static CASTAGNOLI: crc::Crc<u32> = crc::Crc::<u32>::new(&crc::CRC_32_ISCSI);
    CASTAGNOLI.checksum(data)
}
