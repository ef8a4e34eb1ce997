//! `tep-bench evpn --quick` end to end: the namespaces, the daemon, the
//! kernel FDB writes and the frames through tep. It asserts that every
//! change and every MAC of the start was forwarded by, never how fast (CI
//! machines are too noisy for a time bound). Root only (CI is root);
//! skipped loudly otherwise.

use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tep_testing::netns::tep_beside_or_skip;

/// The binary under test.
const TEP_BENCH: &str = env!("CARGO_BIN_EXE_tep-bench");

/// Whether the lab can be built and the tep it starts is there; says why
/// not.
fn lab_or_skip(test: &str) -> bool {
    if !tep_testing::root_with(test, &["ip", "bridge"]) {
        return false;
    }
    tep_beside_or_skip(test, std::path::Path::new(TEP_BENCH))
}

#[test]
fn a_quick_run_forwards_by_every_change_and_every_mac() {
    if !lab_or_skip("a_quick_run_forwards_by_every_change_and_every_mac") {
        return;
    }
    let mut child = Command::new(TEP_BENCH)
        .args(["evpn", "--quick", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run tep-bench");
    let pid = child.id();
    let until = Instant::now() + Duration::from_secs(180);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > until {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "tep-bench evpn failed: {stderr}");
    let r: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stderr}"));
    let (plan, start, changes) = (&r["plan"], &r["start"], &r["changes"]);
    assert_eq!(changes["timeouts"], 0, "{r}");
    assert_eq!(changes["early"], 0, "{r}");
    assert_eq!(changes["all"]["n"], plan["changes"], "{r}");
    let half = plan["changes"].as_u64().unwrap() / 2;
    assert_eq!(changes["new"]["n"], half, "{r}");
    assert_eq!(changes["moved"]["n"], half, "{r}");
    assert_eq!(start["forwarded_macs"], plan["macs"], "{r}");
    assert!(
        start["forwarded_ms"].as_f64().is_some_and(|t| t > 0.0),
        "{r}"
    );
    assert!(start["shown_ms"].as_f64().is_some(), "{r}");
    assert!(changes["frames_sent"].as_u64().unwrap() > 0, "{r}");
    let list = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let tag = format!("tepevpn{pid}");
    let left = String::from_utf8_lossy(&list.stdout)
        .lines()
        .filter(|l| l.starts_with(&tag))
        .count();
    assert_eq!(left, 0, "namespaces left behind");
}
