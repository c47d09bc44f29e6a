//! librdmacm's ABI.

pub(crate) mod addrinfo;
