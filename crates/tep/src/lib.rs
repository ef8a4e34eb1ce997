//! The parts of the `tep` command that other crates reach: only the
//! capture reader, so that `fuzz/` can run it over arbitrary bytes (a fuzz
//! crate cannot depend on a binary). Everything else stays in the binary.

pub mod capture;
