//! The README's main command and the benchmark script, run as a newcomer
//! would (with the tep under test instead of a fresh build), so that they
//! stay true. Root only (CI is root); skipped loudly otherwise.

use std::process::Command;
use tep_testing::netns::{root_or_skip, tep};

/// Runs `examples/SCRIPT ARGS` with TEP set; (exit code, stdout + stderr).
fn run(script: &str, args: &[&str]) -> (Option<i32>, String) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/");
    let out = Command::new("timeout")
        .args(["-k", "5", "300", &format!("{path}{script}")])
        .args(args)
        .env("TEP", tep())
        .output()
        .expect("bash");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code(), text)
}

/// The network namespaces whose names start with `prefix`.
fn namespaces(prefix: &str) -> Vec<String> {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(prefix))
        .map(str::to_owned)
        .collect()
}

/// No namespace of the script is left behind: none with `prefix` that was
/// not there before (a run killed elsewhere on a shared machine may have
/// left its own, with another process id in the name).
fn none_left(prefix: &str, before: &[String]) -> bool {
    let left: Vec<String> = namespaces(prefix)
        .into_iter()
        .filter(|n| !before.contains(n))
        .collect();
    if !left.is_empty() {
        eprintln!("left behind: {left:?}");
    }
    left.is_empty()
}

#[test]
fn demo_passes_traffic_through_each_kind_and_cleans_up() {
    if !root_or_skip("demo_passes_traffic_through_each_kind_and_cleans_up") {
        return;
    }
    let before = namespaces("tepdemo");
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
        // Every packet accounted for: the tunnel's tx and rx agree, or the
        // row says where the difference went.
        assert!(
            row.contains("balanced") || row.contains("before its daemon listened"),
            "{row}"
        );
    }
    assert!(!text.contains("UNEXPLAINED"), "{text}");
    assert!(none_left("tepdemo", &before), "namespaces left behind");
}

#[test]
fn bench_tunnel_measures_the_kernel_and_tep_side_by_side() {
    if !root_or_skip("bench_tunnel_measures_the_kernel_and_tep_side_by_side") {
        return;
    }
    let before = namespaces("tepbench");
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
    assert!(none_left("tepbench", &before), "namespaces left behind");
}

#[test]
fn bench_gateway_measures_tep_and_the_kernel_side_by_side() {
    if !root_or_skip("bench_gateway_measures_tep_and_the_kernel_side_by_side") {
        return;
    }
    // The script's flood and pipeline figures come from the tep-bench
    // beside tep, which cargo builds with the workspace, not with `-p tep`.
    let bench = std::path::Path::new(tep()).with_file_name("tep-bench");
    if !bench.is_file() {
        tep_testing::skip(format_args!(
            "bench_gateway_measures_tep_and_the_kernel_side_by_side: no {} (cargo build -p tep-bench)",
            bench.display()
        ));
        return;
    }
    let before = namespaces("tepgw");
    let (code, text) = run(
        "bench-gateway.sh",
        &["--quick", "--json", "--variants", "tep,kernel"],
    );
    assert_eq!(code, Some(0), "{text}");
    let json = text
        .lines()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("no JSON:\n{text}"));
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    // Every size, direction and mode measured, with the pipeline's figure.
    let rate = v["rate"].as_array().unwrap();
    assert_eq!(rate.len(), 8, "{json}");
    for r in rate {
        assert!(r["mpps_per_core"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["pipeline_ns"].as_f64().unwrap() > 0.0, "{r}");
    }
    let tcp = v["tcp"].as_array().unwrap();
    for variant in ["tep", "kernel"] {
        let row = tcp
            .iter()
            .find(|r| r["variant"] == variant)
            .unwrap_or_else(|| panic!("no {variant}: {json}"));
        for c in ["1fwd", "1rev", "4fwd", "4rev"] {
            assert!(row[c].as_f64().unwrap() > 0.0, "{variant} {c}: {row}");
        }
    }
    assert!(none_left("tepgw", &before), "namespaces left behind");
}

/// `KEY=` values of a unit's lines (each occurrence).
fn directives<'a>(unit: &'a str, key: &str) -> Vec<&'a str> {
    unit.lines()
        .filter_map(|l| l.strip_prefix(key)?.strip_prefix('='))
        .collect()
}

/// The per-mode units in examples/ (each with its example config) are
/// units systemd accepts (`systemd-analyze verify`, with ExecStart at the
/// tep under test) and hang together: the config the install steps put in
/// place is the one ExecStart and ExecReload name, it runs the unit's
/// mode, and its control socket (and `tep show`'s default) lies in the
/// unit's RuntimeDirectory, the only part of /run ProtectSystem=strict
/// leaves writable; every capability kept is explained in a comment; the
/// unit is `Type=notify` with a watchdog and a system call filter
/// (daemon.rs::systemd_notifications_and_the_watchdog checks the messages).
#[test]
fn the_systemd_units_verify_and_match_their_configs() {
    use tep_config::{Config, RunMode, DEFAULT_CONTROL};
    let examples = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/");
    for (name, mode) in [
        ("tep-host.service", RunMode::Host),
        ("tep-gateway.service", RunMode::Gateway),
    ] {
        let unit = std::fs::read_to_string(format!("{examples}{name}")).unwrap();
        for line in [
            "Type=notify",
            "WatchdogSec=",
            "NoNewPrivileges=yes",
            "ProtectSystem=strict",
            "SystemCallFilter=@system-service",
        ] {
            assert!(unit.contains(line), "{name}: {line}");
        }
        // `install -m 0644 examples/X.toml /etc/tep/Y.toml` in the header.
        let install = unit
            .lines()
            .find_map(|l| {
                let words: Vec<&str> = l.split_whitespace().collect();
                let at = words.iter().position(|w| w.ends_with(".toml"))?;
                Some((words[at].to_string(), words.get(at + 1)?.to_string()))
            })
            .unwrap_or_else(|| panic!("{name}: no install step for the config"));
        let example = install.0.strip_prefix("examples/").unwrap();
        let installed = install.1;
        assert!(
            unit.contains(&format!("examples/{name} /etc/systemd/system/{name}")),
            "{name}: installed under its own name"
        );
        assert_eq!(
            directives(&unit, "ExecStart"),
            [format!("/usr/local/bin/tep run -c {installed}")],
            "{name}"
        );
        assert_eq!(
            directives(&unit, "ExecReload"),
            [format!("/usr/local/bin/tep reload -c {installed}")],
            "{name}"
        );
        let runtime = format!("/run/{}/", directives(&unit, "RuntimeDirectory")[0]);
        let config = Config::load(std::path::Path::new(&format!("{examples}{example}")))
            .unwrap_or_else(|e| panic!("{example}: {e}"));
        assert_eq!(config.run_mode(), Ok(mode), "{example}");
        let control = match &config.gateway {
            Some(g) => g.control.clone(),
            None => config.host.control.clone(),
        };
        assert!(
            control.starts_with(&runtime),
            "{example}: control {control} outside {runtime}"
        );
        assert!(DEFAULT_CONTROL.starts_with(&runtime), "{DEFAULT_CONTROL}");
        let comments: String = unit.lines().filter(|l| l.starts_with('#')).collect();
        for cap in directives(&unit, "CapabilityBoundingSet")[0].split_whitespace() {
            assert!(
                comments.contains(cap),
                "{name}: {cap} kept without a word why"
            );
        }
        if !tep_testing::have("systemd-analyze") {
            tep_testing::skip(format_args!(
                "the_systemd_units_verify_and_match_their_configs: systemd-analyze is not installed (.ci/run installs systemd)"
            ));
            return;
        }
        let dir = std::env::temp_dir().join(format!("tep-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, unit.replace("/usr/local/bin/tep", tep())).unwrap();
        let out = Command::new("systemd-analyze")
            .arg("verify")
            .arg(&path)
            .output()
            .unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{name}: {err}");
        // Warnings about the unit itself name it; none may.
        assert!(!err.contains(&format!("{name}:")), "{err}");
    }
}
