//! The program's own memory as UET memory: `fi_mr_reg` on the program's buffer, or a receive
//! placed straight into it (`fi_recv`).

use frame::UserBuf;

/// A [`UserBuf`] the provider exposes to `ses` (a region peers reach, or a posted receive's
/// buffer), under the contract `frame::usermem` states. A wrapper rather than an impl on
/// `UserBuf`, so that neither `frame` nor the RoCE core, which keep `UserBuf`s, depend on `ses`.
#[derive(Debug)]
pub struct UserMem(pub UserBuf);

impl ses::Memory for UserMem {
    fn bytes(&self) -> &[u8] {
        self.0.as_slice()
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        self.0.as_mut_slice()
    }
}
