//! The UET Transport Security Sublayer (`../shared/spec/uet-wire.md` §4), sans-IO: AES-256-GCM
//! sealing with a 16-byte ICV ([`aead`], through `aws-lc-rs`, chosen by measurement), the SP 800-108
//! counter-mode KDF with AES-CMAC-256 ([`kdf`]), and secure domains ([`domain`]): two keys by AN,
//! the three key modes, the never-repeating TSC, implicit rekeying, epoch rejection, replay window
//! and the authentication-failure latch. A transport core (ARCHITECTURE.md): it depends on `wire`
//! alone; the engine's `UetNode` seals and opens frames with it.

pub mod aead;
pub mod domain;
pub mod kdf;

pub use domain::{Config, KeyMode, SecureDomain, Stats, TssError};
