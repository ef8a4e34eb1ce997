//! `tep bench seeds`: seed 000 in the namespaces the command builds, at
//! low rates (no timing assertions: CI machines are too noisy for them).
//! Root only (CI is root); skipped loudly otherwise.

mod netns;

use netns::{root_or_skip, TEP};
use serde_json::Value;
use std::process::Command;

/// Every case of a short run passes traffic through the gateway, with the
/// figures seed 000 reports, the generator's achieved rate, and the
/// seed's own figures where it measured the case; the sweep runs per mode
/// and is drawn; nothing is left behind.
#[test]
fn seed_000_runs_every_mode_through_a_tep_gateway_and_cleans_up() {
    if !root_or_skip("seed_000_runs_every_mode_through_a_tep_gateway_and_cleans_up") {
        return;
    }
    let ours = |out: &[u8]| {
        String::from_utf8_lossy(out)
            .lines()
            .filter(|l| l.starts_with("tepseed"))
            .count()
    };
    let before = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let plots = std::env::temp_dir().join(format!("tep-seed-plots-{}", std::process::id()));
    let out = Command::new("timeout")
        .args(["-k", "5", "180", TEP, "bench", "seeds", "000", "--json"])
        .args([
            "--seconds",
            "0.5",
            "--rates",
            "100,2000",
            "--sweep-to",
            "3000",
            "--repeat",
            "2",
        ])
        .arg("--plot")
        .arg(&plots)
        .output()
        .expect("run tep");
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
    let after = Command::new("ip").args(["netns", "list"]).output().unwrap();
    assert_eq!(
        ours(&after.stdout),
        ours(&before.stdout),
        "namespaces left behind"
    );
}

/// A seed that is not reproduced yet is refused, naming it.
#[test]
fn an_unreproduced_seed_is_refused() {
    let out = Command::new(TEP)
        .args(["bench", "seeds", "003"])
        .output()
        .expect("run tep");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("seed 003 is not reproduced yet"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
