//! `tep-bench seeds`: the seeds' experiments in the namespaces the command builds, seed 000 at
//! low rates (no timing assertions: CI machines are too noisy for them).
//! Root only (CI is root); skipped loudly otherwise.

use serde_json::Value;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tep_testing::netns::{root_or_skip, tep_beside_or_skip};

/// The binary under test.
const TEP_BENCH: &str = env!("CARGO_BIN_EXE_tep-bench");

/// Whether the namespaces can be built and the tep that tep-bench starts
/// in them is there (cargo builds it beside tep-bench when it builds the
/// workspace; `cargo test -p tep-bench` alone does not); says why not.
fn lab_or_skip(test: &str) -> bool {
    if !root_or_skip(test) {
        return false;
    }
    tep_beside_or_skip(test, std::path::Path::new(TEP_BENCH))
}

/// Runs tep-bench with `args`, killed after `limit`; its output and the number
/// of network namespaces its process id tagged that are still there after
/// it ended (the tests run side by side: only its own count).
fn run_seeds(args: &[&str], limit: Duration) -> (std::process::Output, usize) {
    let mut child = Command::new(TEP_BENCH)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run tep-bench");
    let pid = child.id();
    let out_pipe = child.stdout.take().unwrap();
    let err_pipe = child.stderr.take().unwrap();
    let read = |mut p: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = p.read_to_end(&mut v);
            v
        })
    };
    let (out_t, err_t) = (read(Box::new(out_pipe)), read(Box::new(err_pipe)));
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            break child.wait().unwrap();
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let output = std::process::Output {
        status,
        stdout: out_t.join().unwrap(),
        stderr: err_t.join().unwrap(),
    };
    let list = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let tags = [format!("tepseed{pid}"), format!("tepseedh{pid}")];
    let left = String::from_utf8_lossy(&list.stdout)
        .lines()
        .filter(|l| tags.iter().any(|t| l.starts_with(t.as_str())))
        .count();
    (output, left)
}

/// Every case of a short run passes traffic through the gateway, with the
/// figures seed 000 reports, the generator's achieved rate, and the
/// seed's own figures where it measured the case; the sweep runs per mode
/// and is drawn; nothing is left behind.
#[test]
fn seed_000_runs_every_mode_through_a_tep_gateway_and_cleans_up() {
    if !lab_or_skip("seed_000_runs_every_mode_through_a_tep_gateway_and_cleans_up") {
        return;
    }
    let plots = std::env::temp_dir().join(format!("tep-seed-plots-{}", std::process::id()));
    let plots_arg = plots.display().to_string();
    let (out, left) = run_seeds(
        &[
            "seeds",
            "000",
            "--json",
            "--seconds",
            "0.5",
            "--rates",
            "100,2000",
            "--sweep-to",
            "3000",
            "--repeat",
            "2",
            "--plot",
            &plots_arg,
        ],
        Duration::from_secs(180),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    let seed = &v["seeds"]["000"];
    assert_eq!(seed["packet_len"], 1492);
    assert_eq!(seed["setup"], "namespaces");
    let cases = seed["cases"].as_array().unwrap();
    // Two rounds of every mode at both rates.
    assert_eq!(cases.len(), 2 * 4 * 2, "{v}");
    assert_eq!(seed["repeat"], 2);
    for mode in ["zero", "full", "offload", "lco"] {
        for pps in [100.0, 2000.0] {
            let c = cases
                .iter()
                .find(|c| c["mode"] == mode && c["offered_pps"].as_f64() == Some(pps))
                .unwrap_or_else(|| panic!("no {mode} {pps}: {v}"));
            let (sent, r) = (&c["sent"], &c["report"]);
            let packets = sent["packets"].as_u64().unwrap();
            assert!(packets > 0, "{c}");
            assert!(sent["achieved_pps"].as_f64().unwrap() > 0.0, "{c}");
            assert_eq!(r["sent"].as_u64(), Some(packets), "{c}");
            // Through the gateway, as GTP-U over IPv6, to the sink.
            let received = r["received"].as_u64().unwrap();
            assert!(received > 0 && received <= packets, "{c}");
            assert_eq!(r["foreign"], 0, "{c}");
            let (min, avg, max) = (
                r["min_ns"].as_u64().unwrap(),
                r["avg_ns"].as_u64().unwrap(),
                r["max_ns"].as_u64().unwrap(),
            );
            assert!(0 < min && min <= avg && avg <= max, "{c}");
            // The seed measured zero, full and offload at 100 pps.
            let seed_has_it = mode != "lco" && pps == 100.0;
            assert_eq!(c["seed"].is_object(), seed_has_it, "{c}");
        }
    }
    // The sweep: 1,000, 2,000 and 3,000 pps per mode (none loses at these
    // rates unless the machine stalls: the loss-free rate is one of them),
    // and its chart.
    let sweep = seed["sweep"].as_array().unwrap();
    for mode in ["zero", "full", "offload", "lco"] {
        let rates: Vec<f64> = sweep
            .iter()
            .filter(|c| c["mode"] == mode)
            .map(|c| c["offered_pps"].as_f64().unwrap())
            .collect();
        assert!(!rates.is_empty() && rates[0] == 1000.0, "{mode}: {rates:?}");
        assert!(seed["loss_free_pps"].get(mode).is_some(), "{v}");
    }
    // The targets, judged (not asserted to pass: a CI machine's noise is
    // not tep's): full and offload against zero, and the loss-free rates.
    let targets = seed["targets"].as_array().unwrap();
    assert_eq!(targets.len(), 3, "{v}");
    for t in targets {
        assert!(t["pass"].is_boolean() && t["detail"].is_string(), "{t}");
    }
    let png = std::fs::read(plots.join("seed000-sweep.png")).expect("the sweep's chart");
    let _ = std::fs::remove_dir_all(&plots);
    assert_eq!(&png[..4], b"\x89PNG");
    assert_eq!(left, 0, "namespaces left behind");
}

/// `--quick` runs every seed's experiment: each case passes traffic, the
/// JSON has every table's figures beside the seeds', every target is
/// judged, every chart is drawn, and nothing is left behind. The run's
/// length is printed, not asserted (a noisy machine's time is not tep's).
#[test]
fn the_quick_run_covers_every_seed() {
    if !lab_or_skip("the_quick_run_covers_every_seed") {
        return;
    }
    let plots = std::env::temp_dir().join(format!("tep-seed-quick-{}", std::process::id()));
    let plots_arg = plots.display().to_string();
    let (out, left) = run_seeds(
        &["seeds", "--quick", "--json", "--plot", &plots_arg],
        Duration::from_secs(400),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    eprintln!("quick run: {:.0} s", v["seconds_total"].as_f64().unwrap());
    assert_eq!(v["quick"], true);
    let seeds = &v["seeds"];
    for s in ["000", "001", "002", "003", "004"] {
        assert_eq!(seeds[s]["passed_traffic"], true, "{s}: {v}");
        for t in seeds[s]["targets"].as_array().unwrap() {
            assert!(t["pass"].is_boolean() && t["detail"].is_string(), "{t}");
        }
    }
    let positive = |x: &Value| x.as_f64().is_some_and(|x| x > 0.0);
    // 001: GRE in FOU and GUE, checksum enabled and disabled, beside the
    // seed's CPU and throughput; request/response with enabled.
    let rows = seeds["001"]["stream"].as_array().unwrap();
    assert_eq!(rows.len(), 4, "{v}");
    for r in rows {
        assert!(positive(&r["tep"]["gbit_per_s"]), "{r}");
        assert!(positive(&r["tep"]["cpu_b_pct"]), "{r}");
        assert!(positive(&r["seed"]["mbit_per_s"]), "{r}");
        assert!(positive(&r["tep_cpu_pct_per_gbit"]["b"]), "{r}");
    }
    assert_eq!(seeds["001"]["targets"].as_array().unwrap().len(), 2);
    for r in seeds["001"]["rr"].as_array().unwrap() {
        let t = &r["tep"];
        assert!(positive(&t["transactions_per_s"]), "{r}");
        let p = |k: &str| t[k].as_f64().unwrap();
        assert!(
            p("p50_us") <= p("p90_us") && p("p90_us") <= p("p95_us") && p("p95_us") <= p("p99_us"),
            "{r}"
        );
    }
    // 002: tep's per-layer clocks beside the paper's, and the end-to-end
    // figures of no tunnel, tep and the kernel.
    let layers = &seeds["002"]["layers"];
    assert!(positive(&layers["total_clocks"]), "{layers}");
    assert!(layers["lines"]
        .as_array()
        .unwrap()
        .iter()
        .any(|l| l["node"] == "vxlan-decap"));
    let e2e = seeds["002"]["end_to_end"].as_array().unwrap();
    assert_eq!(e2e.len(), 3);
    for r in e2e {
        assert!(
            positive(&r["bw_per_cpu_gbit"]) && positive(&r["half_rtt_us"]),
            "{r}"
        );
    }
    // 003: each configuration through tep and the kernel.
    let rows = seeds["003"]["stream"].as_array().unwrap();
    assert_eq!(rows.len(), 4, "{v}");
    for r in rows {
        assert!(positive(&r["tep"]["gbit_per_s"]), "{r}");
        if r["config"] != "checksum, sockets" {
            assert!(r["kernel"]["gbit_per_s"].is_number(), "{r}");
        }
    }
    // 004: no tunnel and tep's GUE encapsulations; the UDP-less ones are
    // in the table without figures.
    for r in seeds["004"]["rr"].as_array().unwrap() {
        assert_eq!(r["tep"].is_object(), !r["tep_kind"].is_null(), "{r}");
    }
    for png in [
        "seed000-sweep.png",
        "seed001-cpu-per-gbit.png",
        "seed002-performance.png",
        "seed003-receiver-cpu.png",
        "seed004-rr-per-cpu.png",
    ] {
        let bytes = std::fs::read(plots.join(png)).unwrap_or_else(|e| panic!("{png}: {e}"));
        assert_eq!(&bytes[..4], b"\x89PNG", "{png}");
    }
    let _ = std::fs::remove_dir_all(&plots);
    assert_eq!(left, 0, "namespaces left behind");
}

/// An unknown seed is refused, naming the ones there are; --tx is for
/// seed 000 only.
#[test]
fn an_unknown_seed_or_a_misplaced_option_is_refused() {
    let out = Command::new(TEP_BENCH)
        .args(["seeds", "005"])
        .output()
        .expect("run tep-bench");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no seed 005 (seeds: 000, 001, 002, 003, 004)"),
        "{err}"
    );
    let out = Command::new(TEP_BENCH)
        .args([
            "seeds", "001", "--tx", "a", "--rx", "b", "--dst", "10.0.0.1",
        ])
        .output()
        .expect("run tep-bench");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("seed 000 only"), "{err}");
}
