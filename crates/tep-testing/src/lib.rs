//! What tep's tests share across crates: how a test that cannot run says
//! so, and the network-namespace labs ([`netns`]) that the tests and
//! `tep-bench` build, and FRR as a BGP EVPN peer ([`frr`]).
//!
//! A test that needs root or a tool it does not find must not look
//! passed. Under CI (`CI=true`, which `.ci/run` sets and CI systems set)
//! it fails, naming what is missing: CI installs everything, so a skip
//! there is a broken setup. Elsewhere it returns early and prints a
//! `SKIPPED` line straight to the process's standard error, past libtest's
//! output capture (which only takes the `print!` macros), so the line shows
//! in `cargo test`'s output even though the test passes; and the line goes
//! to `target/skipped-tests.txt` too, for a look after the run.

pub mod frr;
pub mod netns;
pub mod ovs;

use std::fmt::Display;
use std::io::Write;

/// Whether the tests run in CI: `CI` is set to `true` or `1`.
pub fn in_ci() -> bool {
    matches!(std::env::var("CI").as_deref(), Ok("true" | "1"))
}

/// Says that a test cannot run and why: a panic under CI, a visible line
/// otherwise. The caller returns after it.
#[track_caller]
pub fn skip(what: impl Display) {
    let line = format!("SKIPPED {what}");
    if in_ci() {
        panic!("{line} (CI=true: every test must run here; .ci/run installs what they need)");
    }
    let _ = writeln!(std::io::stderr(), "{line}");
    if let Some(path) = record_path() {
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = writeln!(f, "{line}");
        }
    }
}

/// `target/skipped-tests.txt` of the workspace the test binary was built in
/// (the binary lives in `target/<profile>/deps/`).
fn record_path() -> Option<std::path::PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let target = exe
        .ancestors()
        .find(|p| p.file_name().is_some_and(|n| n == "target"))?;
    Some(target.join("skipped-tests.txt"))
}

/// Whether this process runs as root (user id 0).
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

/// Whether `tool` is on the PATH.
pub fn have(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
}

/// Whether test `test` can run: as root with every one of `tools` on the
/// PATH; says loudly why not (and fails under `CI=true`, see [`skip`]).
pub fn root_with(test: &str, tools: &[&str]) -> bool {
    if !is_root() {
        skip(format_args!("{test}: needs root (CI runs it as root)"));
        return false;
    }
    if let Some(tool) = tools.iter().find(|t| !have(t)) {
        skip(format_args!(
            "{test}: `{tool}` is not installed (.ci/run installs it)"
        ));
        return false;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_are_found_on_the_path() {
        assert!(have("sh"));
        assert!(!have("no-such-tool-anywhere"));
    }

    #[test]
    fn the_record_is_under_target() {
        let p = record_path().unwrap();
        assert!(p.ends_with("target/skipped-tests.txt"), "{}", p.display());
    }
}
