//! `tep-bench pipeline --json`: the rows are the cases asked for (the
//! filter flags select them), each row's figures agree with each other and
//! with the work done (no timing limits: CI machines are too noisy for
//! them; a checksum's work against none is a factor, not a limit).

use serde_json::Value;
use std::collections::BTreeSet;
use std::process::Command;

const KINDS: [&str; 9] = [
    "vxlan", "geneve", "gtpu", "gre", "gue", "fou-ipip", "fou-sit", "fou-gre", "gue-gre",
];

/// `tep-bench pipeline --json ARGS`: the JSON, or the exit code and
/// standard error.
fn bench(args: &[&str]) -> Result<Value, (Option<i32>, String)> {
    let out = Command::new(env!("CARGO_BIN_EXE_tep-bench"))
        .args(["pipeline", "--json"])
        .args(args)
        .output()
        .expect("run tep-bench");
    if !out.status.success() {
        return Err((
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ));
    }
    Ok(serde_json::from_slice(&out.stdout).expect("one JSON object"))
}

/// The rows' cases: (direction, kind, family, mode, size label).
fn cases(v: &Value) -> Vec<(String, String, String, String, String)> {
    v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap().to_string();
            (
                s("direction"),
                s("kind"),
                s("family"),
                s("mode"),
                s("size_label"),
            )
        })
        .collect()
}

/// Every combination of the lists, each once, and nothing else.
fn assert_rows_are(v: &Value, kinds: &[&str], families: &[&str], modes: &[&str], sizes: &[&str]) {
    let got = cases(v);
    let unique: BTreeSet<_> = got.iter().cloned().collect();
    assert_eq!(unique.len(), got.len(), "a case measured twice: {got:?}");
    let mut want = BTreeSet::new();
    for d in ["encap", "decap"] {
        for k in kinds {
            for f in families {
                for m in modes {
                    for s in sizes {
                        want.insert((
                            d.to_string(),
                            k.to_string(),
                            f.to_string(),
                            m.to_string(),
                            s.to_string(),
                        ));
                    }
                }
            }
        }
    }
    assert_eq!(unique, want);
}

fn f(r: &Value, field: &str) -> f64 {
    let x = r[field].as_f64().unwrap_or(f64::NAN);
    assert!(x.is_finite(), "{field} in {r}");
    x
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// The clocks per packet of `node` in row `r` (0 when it did not run).
fn node_clocks(r: &Value, node: &str) -> f64 {
    r["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["node"] == node)
        .map(|n| n["clocks_per_packet"].as_f64().unwrap())
        .sum()
}

#[test]
fn quick_rows_checks_and_tables_agree_with_the_work() {
    let v = bench(&["--quick", "--samples", "3"]).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(v["samples"], 3, "--samples");
    // --quick: every kind and family, zero and full, 1492 bytes.
    assert_rows_are(&v, &KINDS, &["ipv4", "ipv6"], &["zero", "full"], &["1492"]);
    assert!(
        v["skipped"].as_array().unwrap().is_empty(),
        "{}",
        v["skipped"]
    );
    let rows = v["rows"].as_array().unwrap();
    for r in rows {
        let ns = f(r, "ns_per_packet");
        assert!(ns > 0.0 && f(r, "clocks_per_packet") > 0.0, "{r}");
        assert!(close(f(r, "mpps") * ns, 1000.0), "mpps is 1000 / ns: {r}");
        assert!(
            close(f(r, "ratio"), ns / f(r, "read_only_ns_per_packet")),
            "ratio is ns / read-only ns: {r}"
        );
        // Every packet of the vector came out: no segmentation, no drop.
        assert_eq!(f(r, "outputs_per_call"), f(r, "packets_per_call"), "{r}");
        let nodes = r["nodes"].as_array().unwrap();
        let sum: f64 = nodes.iter().map(|n| f(n, "clocks_per_packet")).sum();
        assert!(
            (sum - f(r, "node_clocks_per_packet")).abs() < 1e-6 * sum.max(1.0),
            "node clocks add up: {r}"
        );
        let first = if r["direction"] == "encap" {
            "encap-classify"
        } else {
            "ip-input"
        };
        assert_eq!(nodes[0]["node"], first, "{r}");
    }
    // Bytes per packet: the inner packet (and its Ethernet header on L2
    // kinds) encapsulated; the outer one, IP and UDP headers and more,
    // decapsulated; the same in both modes.
    let row = |d: &str, k: &str, fam: &str, m: &str| {
        rows.iter()
            .find(|r| r["direction"] == d && r["kind"] == k && r["family"] == fam && r["mode"] == m)
            .unwrap()
    };
    for k in KINDS {
        let l2 = if matches!(k, "vxlan" | "geneve") {
            14.0
        } else {
            0.0
        };
        for (fam, ip_udp) in [("ipv4", 28.0), ("ipv6", 48.0)] {
            let enc = f(row("encap", k, fam, "full"), "bytes_per_packet");
            let dec = f(row("decap", k, fam, "full"), "bytes_per_packet");
            assert_eq!(enc, 1492.0 + l2, "{k} {fam}");
            assert!(dec >= enc + ip_udp, "{k} {fam}: {dec} after {enc}");
            for d in ["encap", "decap"] {
                assert_eq!(
                    f(row(d, k, fam, "zero"), "bytes_per_packet"),
                    f(row(d, k, fam, "full"), "bytes_per_packet"),
                    "{d} {k} {fam}"
                );
            }
        }
    }
    // The checksum nodes work in full and (next to) not in zero: summed
    // over every kind and family, full costs them several times zero.
    for (dir, node) in [("encap", "udp-checksum"), ("decap", "udp-checksum-verify")] {
        let total = |mode: &str| -> f64 {
            rows.iter()
                .filter(|r| r["direction"] == dir && r["mode"] == mode)
                .map(|r| node_clocks(r, node))
                .sum()
        };
        let (full, zero) = (total("full"), total("zero"));
        assert!(full > 3.0 * zero, "{node}: full {full} clocks, zero {zero}");
    }

    let checks = v["checks"].as_array().unwrap();
    let names: Vec<&str> = checks.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["full_vs_zero", "full_vs_read_only"]);
    for c in checks {
        let value = f(c, "value");
        assert!(
            close(value, f(c, "numerator_ns") / f(c, "denominator_ns")),
            "{c}"
        );
        assert_eq!(c["pass"].as_bool(), Some(value <= f(c, "limit")), "{c}");
    }
    // Both checks time the same full path.
    assert_eq!(checks[0]["numerator_ns"], checks[1]["numerator_ns"]);
    // The joint requirement is derived from the two checks' own figures.
    let j = &v["joint"];
    let (full, zero) = (
        f(&checks[0], "numerator_ns"),
        f(&checks[0], "denominator_ns"),
    );
    let c = f(j, "checksum_ns");
    assert!(close(c, full - zero), "{j}");
    assert_eq!(j["read_only_ns"], checks[1]["denominator_ns"]);
    assert!(close(f(j, "value"), c / f(j, "read_only_ns")), "{j}");

    // The VXLAN receive table is the row's own nodes, shares of its total.
    let tables = v["tables"].as_array().unwrap();
    assert_eq!(tables.len(), 2);
    let vx = row("decap", "vxlan", "ipv4", "full");
    let total = f(&tables[0], "total_clocks");
    let mut share = 0.0;
    for l in tables[0]["lines"].as_array().unwrap() {
        share += f(l, "share");
        if l["node"] != "-" {
            let node = l["node"].as_str().unwrap();
            assert_eq!(f(l, "clocks_per_packet"), node_clocks(vx, node), "{node}");
        }
        assert!(
            close(f(l, "share"), f(l, "clocks_per_packet") / total),
            "{l}"
        );
    }
    assert!((share - 1.0).abs() < 1e-9, "shares add to {share}");
    let nodes: Vec<&str> = tables[0]["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["node"].as_str().unwrap())
        .collect();
    for node in [
        "ip-input",
        "udp-input",
        "vxlan-decap",
        "udp-checksum-verify",
        "decap-output",
    ] {
        assert!(nodes.contains(&node), "{node} in {nodes:?}");
    }
}

/// Each filter flag alone narrows its own dimension of the quick run and
/// leaves the others; together they give exactly their product. The
/// tables are measured whatever the filters say, but their rows are not
/// reported when not asked for.
#[test]
fn filter_flags_select_exactly_the_rows_asked_for() {
    let all_families = ["ipv4", "ipv6"];
    let quick_modes = ["zero", "full"];
    let run = |extra: &[&str]| {
        let mut args = vec!["--quick", "--samples", "1"];
        args.extend_from_slice(extra);
        bench(&args).unwrap_or_else(|e| panic!("{extra:?}: {e:?}"))
    };
    let v = run(&["--kinds", "gtpu,fou-sit"]);
    assert_rows_are(
        &v,
        &["gtpu", "fou-sit"],
        &all_families,
        &quick_modes,
        &["1492"],
    );
    let v = run(&["--families", "ipv4"]);
    assert_rows_are(&v, &KINDS, &["ipv4"], &quick_modes, &["1492"]);
    let v = run(&["--modes", "lco"]);
    assert_rows_are(&v, &KINDS, &all_families, &["lco"], &["1492"]);
    let v = run(&["--sizes", "64"]);
    assert_rows_are(&v, &KINDS, &all_families, &quick_modes, &["64"]);
    // remote exists for VXLAN and GUE only.
    let v = run(&["--kinds", "gue,gre", "--modes", "remote,zero"]);
    let mut c = cases(&v);
    c.retain(|r| r.3 == "remote");
    assert!(c.iter().all(|r| r.1 == "gue") && c.len() == 4, "{c:?}");

    let v = run(&[
        "--kinds",
        "gue,fou-sit",
        "--families",
        "ipv6",
        "--modes",
        "full",
        "--sizes",
        "576,64k",
    ]);
    assert_rows_are(
        &v,
        &["gue", "fou-sit"],
        &["ipv6"],
        &["full"],
        &["576", "64K-tso"],
    );
    assert_eq!(
        v["tables"].as_array().unwrap().len(),
        2,
        "tables all the same"
    );
    // A 64 KiB TSO super-packet leaves as segments and comes back merged.
    for r in v["rows"].as_array().unwrap() {
        let (n, out) = (f(r, "packets_per_call"), f(r, "outputs_per_call"));
        match (r["size_label"].as_str(), r["direction"].as_str()) {
            (Some("64K-tso"), Some("encap")) => assert!(out >= 40.0 * n, "{r}"),
            (Some("64K-tso"), _) => assert!(out < n, "{r}"),
            _ => assert_eq!(out, n, "{r}"),
        }
    }
}

/// A value a flag does not know: exit 1 and the flag named, no run.
#[test]
fn a_bad_filter_value_names_its_flag() {
    for (flag, value, words) in [
        ("--kinds", "vxlan,nope", "unknown tunnel kind 'nope'"),
        ("--families", "ipv5", "unknown family 'ipv5'"),
        ("--modes", "fast", "unknown checksum mode 'fast'"),
        ("--sizes", "10", "unknown size '10'"),
    ] {
        let (code, err) = bench(&["--quick", flag, value]).unwrap_err();
        assert_eq!(code, Some(1), "{err}");
        assert!(
            err.contains(&format!("tep-bench pipeline: {flag}: {words}")),
            "{err}"
        );
    }
}

/// `--overlay --sizes 64,1492`: every size asked for, each in bursts of
/// 1 and 8 and in both directions, and its flooding rows; 64k refused.
#[test]
fn overlay_runs_every_size_asked_for() {
    let small = [
        "--overlay",
        "--macs",
        "64",
        "--vteps",
        "4",
        "--networks",
        "2",
        "--samples",
        "1",
        "--sizes",
    ];
    let v = bench(&[&small[..], &["64,1492"]].concat()).unwrap_or_else(|e| panic!("{e:?}"));
    let scale: BTreeSet<(String, u64, u64)> = v["scale"]
        .as_array()
        .expect("scale rows")
        .iter()
        .map(|r| {
            let size = r["size"].as_u64().expect("size");
            let burst = r["burst"].as_u64().expect("burst");
            (
                r["direction"].as_str().expect("direction").into(),
                size,
                burst,
            )
        })
        .collect();
    let mut want = BTreeSet::new();
    for d in ["encap", "decap"] {
        for size in [64, 1492] {
            for burst in [1, 8] {
                want.insert((d.to_string(), size, burst));
            }
        }
    }
    assert_eq!(scale, want);
    assert_eq!(v["scale"].as_array().map(Vec::len), Some(want.len()));
    let flood: Vec<(u64, u64)> = v["flooding"]
        .as_array()
        .expect("flooding rows")
        .iter()
        .map(|r| {
            (
                r["size"].as_u64().expect("size"),
                r["peers"].as_u64().expect("peers"),
            )
        })
        .collect();
    let want: Vec<(u64, u64)> = [64, 1492]
        .iter()
        .flat_map(|&s| [1, 10, 100].map(|p| (s, p)))
        .collect();
    assert_eq!(flood, want);
    let (code, err) = bench(&[&small[..], &["64,64k"]].concat()).unwrap_err();
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("--sizes takes IP lengths"), "{err}");
}
