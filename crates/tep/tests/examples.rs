//! The README's main command and the benchmark script, run as a newcomer
//! would (with the tep under test instead of a fresh build), so that they
//! stay true. Root only (CI is root); skipped loudly otherwise.

mod netns;

use netns::{root_or_skip, TEP};
use std::process::Command;

/// Runs `examples/SCRIPT ARGS` with TEP set; (exit code, stdout + stderr).
fn run(script: &str, args: &[&str]) -> (Option<i32>, String) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/");
    let out = Command::new("timeout")
        .args(["-k", "5", "300", &format!("{path}{script}")])
        .args(args)
        .env("TEP", TEP)
        .output()
        .expect("bash");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code(), text)
}

/// No namespace of the scripts is left behind.
fn none_left(prefix: &str) -> bool {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    !String::from_utf8_lossy(&out.stdout).contains(prefix)
}

#[test]
fn demo_passes_traffic_through_each_kind_and_cleans_up() {
    if !root_or_skip("demo_passes_traffic_through_each_kind_and_cleans_up") {
        return;
    }
    let (code, text) = run("demo.sh", &["--quick", "--kinds", "gue,vxlan,gtpu"]);
    assert_eq!(code, Some(0), "{text}");
    for kind in ["gue", "vxlan", "gtpu"] {
        let row = text
            .lines()
            .find(|l| l.starts_with(kind) && l.contains(" ipv4 ") && l.contains("full"))
            .unwrap_or_else(|| panic!("no {kind} row:\n{text}"));
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells[3], "ok", "{row}");
        let gbps: f64 = cells[4].parse().unwrap_or(0.0);
        assert!(gbps > 0.0, "{row}");
    }
    assert!(none_left("tepdemo"), "namespaces left behind");
}

#[test]
fn bench_tunnel_measures_the_kernel_and_tep_side_by_side() {
    if !root_or_skip("bench_tunnel_measures_the_kernel_and_tep_side_by_side") {
        return;
    }
    let (code, text) = run(
        "bench-tunnel.sh",
        &[
            "--quick",
            "--paths",
            "kernel-vxlan,tep-gue-full",
            "--rr-tool",
            "python",
        ],
    );
    assert_eq!(code, Some(0), "{text}");
    let ratio = text
        .lines()
        .skip_while(|l| !l.starts_with("tep / kernel-vxlan"))
        .find(|l| l.starts_with("tep-gue-full"))
        .unwrap_or_else(|| panic!("no ratio row:\n{text}"));
    let cells: Vec<f64> = ratio
        .split_whitespace()
        .skip(1)
        .map(|c| c.parse().unwrap())
        .collect();
    assert_eq!(cells.len(), 4, "{ratio}");
    assert!(cells.iter().all(|&r| r > 0.0), "{ratio}");
    assert!(none_left("tepbench"), "namespaces left behind");
}
