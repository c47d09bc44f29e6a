//! The SES value tables: request opcodes, return codes, atomic (AMO) opcodes and datatypes, and
//! response opcodes.

wire_enum! {
    /// SES request opcodes, 6 bits (SUET cites spec Table 3-17).
    pub enum SesOpcode {
        NoOp = 0x00 => "NO_OP",
        Write = 0x01 => "WRITE",
        Read = 0x02 => "READ",
        Atomic = 0x03 => "ATOMIC",
        FetchingAtomic = 0x04 => "FETCHING_ATOMIC",
        Send = 0x05 => "SEND",
        RendezvousSend = 0x06 => "RENDEZVOUS_SEND",
        DatagramSend = 0x07 => "DATAGRAM_SEND",
        DeferrableSend = 0x08 => "DEFERRABLE_SEND",
        TaggedSend = 0x09 => "TAGGED_SEND",
        RendezvousTsend = 0x0A => "RENDEZVOUS_TSEND",
        DeferrableTsend = 0x0B => "DEFERRABLE_TSEND",
        DeferrableRtr = 0x0C => "DEFERRABLE_RTR",
        TsendAtomic = 0x0D => "TSEND_ATOMIC",
        TsendFetchAtomic = 0x0E => "TSEND_FETCH_ATOMIC",
        MsgError = 0x0F => "MSG_ERROR",
    }
}

wire_enum! {
    /// SES return codes, 6 bits.
    pub enum ReturnCode {
        Null = 0x00 => "NULL",
        Ok = 0x01 => "OK",
        BadGeneration = 0x02 => "BAD_GENERATION",
        Disabled = 0x03 => "DISABLED",
        DisabledGen = 0x04 => "DISABLED_GEN",
        NoMatch = 0x05 => "NO_MATCH",
        UnsupportedOp = 0x06 => "UNSUPPORTED_OP",
        UnsupportedSize = 0x07 => "UNSUPPORTED_SIZE",
        AtInvalid = 0x08 => "AT_INVALID",
        AtPerm = 0x09 => "AT_PERM",
        AtAtsError = 0x0A => "AT_ATS_ERROR",
        AtNoTrans = 0x0B => "AT_NO_TRANS",
        AtOutOfRange = 0x0C => "AT_OUT_OF_RANGE",
        HostPoisoned = 0x0D => "HOST_POISONED",
        HostUnsuccessCmpl = 0x0E => "HOST_UNSUCCESS_CMPL",
        AmoUnsupportedOp = 0x0F => "AMO_UNSUPPORTED_OP",
        AmoUnsupportedDt = 0x10 => "AMO_UNSUPPORTED_DT",
        AmoUnsupportedSize = 0x11 => "AMO_UNSUPPORTED_SIZE",
        AmoUnaligned = 0x12 => "AMO_UNALIGNED",
        AmoFpNan = 0x13 => "AMO_FP_NAN",
        AmoFpUnderflow = 0x14 => "AMO_FP_UNDERFLOW",
        AmoFpOverflow = 0x15 => "AMO_FP_OVERFLOW",
        AmoFpInexact = 0x16 => "AMO_FP_INEXACT",
        PermViolation = 0x17 => "PERM_VIOLATION",
        OpViolation = 0x18 => "OP_VIOLATION",
        BadIndex = 0x19 => "BAD_INDEX",
        BadPid = 0x1A => "BAD_PID",
        BadJobId = 0x1B => "BAD_JOB_ID",
        BadMkey = 0x1C => "BAD_MKEY",
        BadAddr = 0x1D => "BAD_ADDR",
        Cancelled = 0x1E => "CANCELLED",
        Undeliverable = 0x1F => "UNDELIVERABLE",
        Uncor = 0x20 => "UNCOR",
        UncorTrnsnt = 0x21 => "UNCOR_TRNSNT",
        TooLong = 0x22 => "TOO_LONG",
        InitiatorError = 0x23 => "INITIATOR_ERROR",
        Dropped = 0x24 => "DROPPED",
    }
}

wire_enum! {
    /// Atomic operation (AMO) opcodes.
    pub enum AmoOpcode {
        Min = 0x00 => "MIN",
        Max = 0x01 => "MAX",
        Sum = 0x02 => "SUM",
        Diff = 0x03 => "DIFF",
        Prod = 0x04 => "PROD",
        Lor = 0x05 => "LOR",
        Land = 0x06 => "LAND",
        Bor = 0x07 => "BOR",
        Band = 0x08 => "BAND",
        Lxor = 0x09 => "LXOR",
        Bxor = 0x0A => "BXOR",
        Read = 0x0B => "READ",
        Write = 0x0C => "WRITE",
        Cswap = 0x0D => "CSWAP",
        CswapNe = 0x0E => "CSWAP_NE",
        CswapLe = 0x0F => "CSWAP_LE",
        CswapLt = 0x10 => "CSWAP_LT",
        CswapGe = 0x11 => "CSWAP_GE",
        CswapGt = 0x12 => "CSWAP_GT",
        Mswap = 0x13 => "MSWAP",
        Inval = 0x14 => "INVAL",
    }
}

impl AmoOpcode {
    /// True for the compare-and-swap family (0x0D-0x12), which carries the CAS extension header.
    pub fn is_compare_swap(self) -> bool {
        (0x0D..=0x12).contains(&u8::from(self))
    }
}

wire_enum! {
    /// Atomic operand datatypes.
    pub enum AmoDatatype {
        Int8 = 0x00 => "INT8",
        Uint8 = 0x01 => "UINT8",
        Int16 = 0x02 => "INT16",
        Uint16 = 0x03 => "UINT16",
        Int32 = 0x04 => "INT32",
        Uint32 = 0x05 => "UINT32",
        Int64 = 0x06 => "INT64",
        Uint64 = 0x07 => "UINT64",
        Int128 = 0x08 => "INT128",
        Uint128 = 0x09 => "UINT128",
        Float = 0x0A => "FLOAT",
        Double = 0x0B => "DOUBLE",
        FloatComplex = 0x0C => "FLOAT_COMPLEX",
        DoubleComplex = 0x0D => "DOUBLE_COMPLEX",
        LongDouble = 0x0E => "LONG_DOUBLE",
        LongDoubleComplex = 0x0F => "LONG_DOUBLE_COMPLEX",
        Bf16 = 0x10 => "BF16",
        Fp16 = 0x11 => "FP16",
    }
}

wire_enum! {
    /// Response opcodes.
    pub enum ResponseOpcode {
        DefaultResponse = 0 => "DEFAULT_RESPONSE",
        Response = 1 => "RESPONSE",
        ResponseWData = 2 => "RESPONSE_W_DATA",
        NoResponse = 3 => "NO_RESPONSE",
    }
}
