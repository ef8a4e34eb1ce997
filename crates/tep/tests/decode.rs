//! `tep decode` end to end: the binary on real and scapy-built captures.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo_file(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel)
}

fn tep(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tep"))
        .args(args)
        .output()
        .expect("run tep")
}

/// Runs `tep decode --json` and returns one JSON object per frame.
fn decode_json(file: &Path, extra: &[&str]) -> Vec<Value> {
    let mut args = vec!["decode", file.to_str().unwrap(), "--json"];
    args.extend_from_slice(extra);
    let out = tep(&args);
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is one JSON object"))
        .collect()
}

fn layer<'a>(frame: &'a Value, name: &str) -> Option<&'a Value> {
    frame["layers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["layer"] == name)
}

fn layers<'a>(frame: &'a Value, name: &str) -> Vec<&'a Value> {
    frame["layers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["layer"] == name)
        .collect()
}

fn names(frame: &Value) -> Vec<String> {
    frame["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["layer"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn kernel_rco_capture_shows_rco_fields_and_completes_inner_checksums() {
    let frames = decode_json(
        &repo_file("crates/tep-wire/tests/vectors/kernel-vxlan-rco.pcap"),
        &[],
    );
    assert_eq!(frames.len(), 50);
    let mut completed = 0;
    for f in &frames {
        let vx = layer(f, "vxlan").expect("every frame is VXLAN");
        assert_eq!(vx["vni"], 42, "VNI is a JSON number");
        let Some(tcp) = layer(f, "tcp") else {
            assert!(vx.get("rco").is_none(), "RCO only on TCP frames here: {f}");
            continue;
        };
        // Linux: start = inner Ethernet 14 + IPv4 20; TCP checksum at start + 16.
        assert_eq!(vx["rco"]["start"], 34);
        assert_eq!(vx["rco"]["offset"], 50);
        assert_eq!(vx["rco"]["transport"], "tcp");
        let c = &tcp["checksum"];
        assert_eq!(c["status"], "rco");
        if f["caplen"] == f["len"] {
            assert_eq!(c["completed_status"], "valid", "{f}");
            assert!(c["completed"].is_u64());
            completed += 1;
        } else {
            assert!(
                c["completed"].is_null(),
                "snapped frames cannot be completed: {f}"
            );
        }
    }
    assert!(
        completed >= 10,
        "only {completed} complete RCO frames checked"
    );
}

#[test]
fn kernel_csum_capture_outer_checksums_are_partial_or_lco_never_invalid() {
    let frames = decode_json(
        &repo_file("crates/tep-wire/tests/vectors/kernel-vxlan-csum.pcap"),
        &[],
    );
    assert_eq!(frames.len(), 50);
    let mut lco = 0;
    for f in &frames {
        assert!(f.get("error").is_none(), "{f}");
        let vx = layer(f, "vxlan").unwrap();
        assert!(vx.get("rco").is_none());
        let status = layers(f, "udp")[0]["checksum"]["status"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(
            ["partial", "lco", "unverifiable", "valid"].contains(&status.as_str()),
            "outer UDP checksum {status}: {f}"
        );
        if status == "lco" {
            // The sender used local checksum offload: the inner TCP checksum is
            // still partial in a capture taken on the sending host.
            assert_eq!(layer(f, "tcp").unwrap()["checksum"]["status"], "partial");
            lco += 1;
        }
    }
    assert!(
        lco > 0,
        "the kernel's LCO should be visible in this capture"
    );
}

#[test]
fn scapy_cases_nested_tunnels_errors_and_port_overrides() {
    let file = repo_file("crates/tep/tests/data/decode_cases.pcap");
    let frames = decode_json(&file, &["--port", "5555=fou-ipip"]);
    assert_eq!(frames.len(), 8);

    // 1: VXLAN inside GTP-U.
    assert_eq!(
        names(&frames[0]),
        ["ethernet", "ipv4", "udp", "gtpu", "ipv4", "udp", "vxlan", "ethernet", "ipv4", "icmpv4"]
    );
    assert_eq!(layer(&frames[0], "gtpu").unwrap()["teid"], 0x0102_0304);
    assert_eq!(layer(&frames[0], "vxlan").unwrap()["vni"], 5000);

    // 2: FOU needs the override.
    assert_eq!(
        names(&frames[1]),
        ["ethernet", "ipv4", "udp", "fou", "ipv4", "icmpv4"]
    );

    // 3: GUE with Linux RCO; the inner UDP checksum completes and verifies.
    let gue = layer(&frames[2], "gue").unwrap();
    assert_eq!(gue["encoding"], "linux");
    assert_eq!(gue["rco"]["start"], 20);
    assert_eq!(gue["rco"]["offset"], 26);
    let inner_udp = &layers(&frames[2], "udp")[1]["checksum"];
    assert_eq!(inner_udp["status"], "rco");
    assert_eq!(inner_udp["completed_status"], "valid");

    // 4: IPv6 outer, zero UDP checksum noted.
    assert_eq!(layers(&frames[3], "udp")[0]["checksum"]["status"], "zero");
    assert_eq!(layer(&frames[3], "vxlan").unwrap()["vni"], 77);

    // 5: the inner IPv4 claims more than the tunnel carries: an error for
    // this frame only, after the layers that did parse.
    assert_eq!(frames[4]["error"]["layer"], "ipv4");
    assert_eq!(frames[4]["error"]["reason"], "truncated");
    assert_eq!(layer(&frames[4], "vxlan").unwrap()["vni"], 9);

    // 6: GTP-U extension of length 0.
    assert_eq!(frames[5]["error"]["layer"], "gtpu");
    assert_eq!(frames[5]["error"]["reason"], "bad_length");

    // 7: Geneve critical option, inner IPv6.
    let g = layer(&frames[6], "geneve").unwrap();
    assert_eq!(g["vni"], 0xABCDE);
    assert_eq!(g["critical"], true);
    assert_eq!(g["options"][0]["class"], 0x0102);
    assert_eq!(g["options"][0]["critical"], true);
    assert_eq!(
        layer(&frames[6], "icmpv6").unwrap()["checksum"]["status"],
        "valid"
    );

    // 8: GRE-in-UDP key, inner TCP checksum verified.
    assert_eq!(layer(&frames[7], "gre").unwrap()["key"], 0xBEEF);
    assert_eq!(
        layer(&frames[7], "tcp").unwrap()["checksum"]["status"],
        "valid"
    );

    // Every frame after an error still decodes: 7 and 8 are complete.
    assert!(frames[6].get("error").is_none() && frames[7].get("error").is_none());
}

#[test]
fn without_the_override_fou_is_plain_udp_data() {
    let frames = decode_json(&repo_file("crates/tep/tests/data/decode_cases.pcap"), &[]);
    assert_eq!(names(&frames[1]), ["ethernet", "ipv4", "udp", "data"]);
}

#[test]
fn gtpu_vectors_numbers_are_json_numbers() {
    let frames = decode_json(&repo_file("crates/tep-wire/tests/vectors/gtpu.pcap"), &[]);
    let psc = frames
        .iter()
        .filter_map(|f| layer(f, "gtpu"))
        .flat_map(|g| g["extensions"].as_array().cloned().unwrap_or_default())
        .find(|e| e.get("pdu_session_container").is_some())
        .expect("a PDU session container");
    assert!(psc["pdu_session_container"]["qfi"].is_u64());
    assert!(psc["type"].is_u64());
    let echo = frames
        .iter()
        .filter_map(|f| layer(f, "gtpu"))
        .find(|g| g["message"] == "echo-response")
        .unwrap();
    assert_eq!(echo["recovery"], 0);
    assert!(echo["sequence"].is_u64());
}

#[test]
fn text_output_is_one_line_per_frame() {
    let file = repo_file("crates/tep-wire/tests/vectors/kernel-vxlan-rco.pcap");
    let out = tep(&["decode", file.to_str().unwrap()]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), 50);
    let rco_line = text.lines().find(|l| l.contains("RCO")).unwrap();
    assert!(
        rco_line.contains("rco={offset:50,start:34,transport:tcp}"),
        "{rco_line}"
    );
    assert!(rco_line.contains("/rco->0x"), "{rco_line}");
}

#[test]
fn not_a_capture_exits_2_with_a_clear_error() {
    let out = tep(&["decode", repo_file("Cargo.toml").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not a pcap or pcapng file"), "{err}");
    let out = tep(&["decode", "/nonexistent/x.pcap"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn bad_port_override_names_the_problem() {
    let file = repo_file("crates/tep/tests/data/decode_cases.pcap");
    let out = tep(&["decode", file.to_str().unwrap(), "--port", "5555=ipip"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown tunnel kind 'ipip'"));
}

#[test]
fn pcapng_is_read_too() {
    // tshark rewrites a capture as pcapng; skip loudly without it.
    let Ok(which) = Command::new("tshark").arg("--version").output() else {
        tep_testing::skip(format_args!(
            "pcapng_is_read_too: tshark not installed (CI installs it)"
        ));
        return;
    };
    assert!(which.status.success());
    let src = repo_file("crates/tep/tests/data/decode_cases.pcap");
    let dst = std::env::temp_dir().join(format!("tep-decode-{}.pcapng", std::process::id()));
    let st = Command::new("tshark")
        .args([
            "-r",
            src.to_str().unwrap(),
            "-F",
            "pcapng",
            "-w",
            dst.to_str().unwrap(),
        ])
        .env("HOME", std::env::temp_dir())
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let ng = decode_json(&dst, &["--port", "5555=fou-ipip"]);
    let classic = decode_json(&src, &["--port", "5555=fou-ipip"]);
    std::fs::remove_file(&dst).ok();
    assert_eq!(ng.len(), classic.len());
    for (a, b) in ng.iter().zip(&classic) {
        assert_eq!(a["layers"], b["layers"]);
    }
}
