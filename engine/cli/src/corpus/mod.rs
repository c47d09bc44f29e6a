//! The frame corpora of `softrdma gen`: deterministic, well-formed frames for checking dissectors
//! (Wireshark) and as round-trip vectors.

mod frame;
mod roce;
mod uet;

pub use frame::Generated;
pub use roce::{roce_corpus, roce_opcodes};
pub use uet::uet_corpus;
