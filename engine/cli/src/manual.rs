//! The user manual, one page per subject: the same Markdown files the repository shows
//! (`engine/cli/docs/`), rendered here. The README at the root is the front page.

pub mod perf {
    #![doc = include_str!("../docs/perf.md")]
}

pub mod perf_remote {
    #![doc = include_str!("../docs/perf-remote.md")]
}

pub mod uet {
    #![doc = include_str!("../docs/uet.md")]
}

pub mod run {
    #![doc = include_str!("../docs/run.md")]
}

pub mod interop {
    #![doc = include_str!("../docs/interop.md")]
}

pub mod tools {
    #![doc = include_str!("../docs/tools.md")]
}

pub mod security {
    #![doc = include_str!("../docs/security.md")]
}
