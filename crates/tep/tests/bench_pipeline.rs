//! `tep bench pipeline --quick --json`: the shape of the results (no
//! timing assertions: CI machines are too noisy for them).

use serde_json::Value;
use std::process::Command;

const KINDS: [&str; 9] = [
    "vxlan", "geneve", "gtpu", "gre", "gue", "fou-ipip", "fou-sit", "fou-gre", "gue-gre",
];

#[test]
fn quick_json_has_every_kind_positive_ratios_and_both_checks() {
    let out = Command::new(env!("CARGO_BIN_EXE_tep"))
        .args(["bench", "pipeline", "--quick", "--json", "--samples", "3"])
        .output()
        .expect("run tep");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(v["vector_size"], 256);
    assert_eq!(v["samples"], 3);
    let rows = v["rows"].as_array().unwrap();
    for kind in KINDS {
        for dir in ["encap", "decap"] {
            for family in ["ipv4", "ipv6"] {
                assert!(
                    rows.iter().any(|r| r["kind"] == kind
                        && r["direction"] == dir
                        && r["family"] == family),
                    "no {dir} row for {kind} over {family}"
                );
            }
        }
    }
    for r in rows {
        for field in [
            "ns_per_packet",
            "mpps",
            "read_only_ns_per_packet",
            "ratio",
            "bytes_per_packet",
        ] {
            let x = r[field].as_f64().unwrap_or(-1.0);
            assert!(x > 0.0 && x.is_finite(), "{field} in {r}");
        }
        assert_eq!(r["packets_per_call"], 256);
        assert!(["zero", "full"].contains(&r["mode"].as_str().unwrap()));
        let nodes = r["nodes"].as_array().unwrap();
        assert!(!nodes.is_empty(), "{r}");
        let first = if r["direction"] == "encap" {
            "encap-classify"
        } else {
            "ip-input"
        };
        assert!(nodes.iter().any(|n| n["node"] == first), "{r}");
    }
    assert!(
        v["skipped"].as_array().unwrap().is_empty(),
        "{}",
        v["skipped"]
    );
    let checks = v["checks"].as_array().unwrap();
    let names: Vec<&str> = checks.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["full_vs_zero", "full_vs_read_only"]);
    for c in checks {
        assert!(c["pass"].is_boolean());
        assert!(c["value"].as_f64().unwrap() > 0.0);
        assert!(c["limit"].as_f64().unwrap() > 1.0);
    }
    // The joint requirement is derived from the two checks' own figures.
    let j = &v["joint"];
    let (full, zero) = (
        checks[0]["numerator_ns"].as_f64().unwrap(),
        checks[0]["denominator_ns"].as_f64().unwrap(),
    );
    let c = j["checksum_ns"].as_f64().unwrap();
    assert!((c - (full - zero)).abs() < 1e-9, "{j}");
    assert!((j["limit"].as_f64().unwrap() - 6.0 / 13.0).abs() < 1e-12);
    assert_eq!(
        j["read_only_ns"].as_f64().unwrap(),
        checks[1]["denominator_ns"].as_f64().unwrap()
    );
    let tables = v["tables"].as_array().unwrap();
    assert_eq!(tables.len(), 2);
    let vx: Vec<&str> = tables[0]["lines"]
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
        assert!(vx.contains(&node), "{node} in {vx:?}");
    }
    assert_eq!(tables[0]["seed_total"], 1832);
}
