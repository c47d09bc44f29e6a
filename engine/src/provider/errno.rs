//! libfabric error numbers (`fi_errno.h`: the POSIX values below 256, provider-specific ones from
//! `FI_ERRNO_OFFSET` = 256) and the mapping of SES return codes onto them
//! (`../shared/spec/uet-libfabric.md` "Completion and errors": FI_EIO where no better one exists).

use ses::{ReturnCode, Status};

/// An error number, as libfabric spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum FiErrno {
    EPERM,
    ENOENT,
    EIO,
    EAGAIN,
    EACCES,
    EFAULT,
    EBUSY,
    EINVAL,
    ENOMSG,
    ENODATA,
    EMSGSIZE,
    EOPNOTSUPP,
    EADDRNOTAVAIL,
    EHOSTUNREACH,
    ETIMEDOUT,
    ECANCELED,
    EKEYREJECTED,
    EAVAIL,
    ETRUNC,
    ENOKEY,
}

impl FiErrno {
    /// The number (positive; the C API returns it negated).
    pub const fn code(self) -> i32 {
        use FiErrno::*;
        match self {
            EPERM => 1,
            ENOENT => 2,
            EIO => 5,
            EAGAIN => 11,
            EACCES => 13,
            EFAULT => 14,
            EBUSY => 16,
            EINVAL => 22,
            ENOMSG => 42,
            ENODATA => 61,
            EMSGSIZE => 90,
            EOPNOTSUPP => 95,
            EADDRNOTAVAIL => 99,
            ETIMEDOUT => 110,
            EHOSTUNREACH => 113,
            ECANCELED => 125,
            EKEYREJECTED => 129,
            EAVAIL => 259,
            ETRUNC => 265,
            ENOKEY => 266,
        }
    }
}

impl std::fmt::Display for FiErrno {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FI_{self:?}")
    }
}

/// A refused call: the errno and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FiError {
    /// The errno.
    pub errno: FiErrno,
    /// Why, for people.
    pub what: String,
}

impl FiError {
    /// An error.
    pub fn new(errno: FiErrno, what: impl Into<String>) -> FiError {
        FiError { errno, what: what.into() }
    }
}

impl std::fmt::Display for FiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.errno, self.what)
    }
}

impl std::error::Error for FiError {}

/// The errno of a SES return code.
pub fn errno_of(rc: ReturnCode) -> FiErrno {
    use ReturnCode::*;
    match rc {
        BadJobId | PermViolation | AtPerm => FiErrno::EACCES,
        BadMkey => FiErrno::EKEYREJECTED,
        BadAddr | AtOutOfRange => FiErrno::EFAULT,
        TooLong => FiErrno::ETRUNC,
        NoMatch => FiErrno::ENOMSG,
        UnsupportedOp | AmoUnsupportedOp | AmoUnsupportedDt | AmoUnsupportedSize => FiErrno::EOPNOTSUPP,
        AmoUnaligned => FiErrno::EINVAL,
        BadPid | BadIndex => FiErrno::EADDRNOTAVAIL,
        Cancelled => FiErrno::ECANCELED,
        Undeliverable => FiErrno::EHOSTUNREACH,
        _ => FiErrno::EIO,
    }
}

/// The errno and provider errno (the SES return code, 0 when the failure is not the target's
/// answer) of a failed completion.
pub fn errno_of_status(s: Status) -> (FiErrno, u8) {
    match s {
        Status::Ok => (FiErrno::EIO, 0),
        Status::Remote(rc) => (errno_of(rc), u8::from(rc)),
        Status::Truncated => (FiErrno::ETRUNC, u8::from(ReturnCode::TooLong)),
        Status::Failed(_) => (FiErrno::EIO, 0),
        Status::Timeout => (FiErrno::ETIMEDOUT, 0),
        Status::Cancelled => (FiErrno::ECANCELED, u8::from(ReturnCode::Cancelled)),
    }
}
