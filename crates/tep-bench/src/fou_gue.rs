//! Seeds 001 and 004: GRE, IPIP and SIT carried in FOU and in GUE — the
//! Linux GUE merge (001, netperf TCP_STREAM and TCP_RR, UDP checksum
//! enabled and disabled) and the RFC series before it (004, TCP_RR against
//! no tunnel) — rerun through tep between two hosts.
//!
//! The seeds ran the kernel's own FOU/GUE on 2014 10 G NICs with 200
//! connections; this machine has neither the NICs nor the fou, ipip, gre or
//! sit modules. So the figures to compare are shapes and ratios: what the
//! checksum costs each side per Gbit/s, and what a UDP encapsulation costs
//! per transaction against no tunnel.

use super::hostpair::{Carrier, Case, Measured, Path};
use super::report::{cell, ratio, Bars, SeedReport, Target};

/// One encapsulation of the seeds, and the tep kind that builds it.
struct Encap {
    proto: &'static str,
    over: &'static str,
    kind: &'static str,
    inner_v6: bool,
}

const ENCAPS: [Encap; 6] = [
    Encap {
        proto: "GRE",
        over: "FOU",
        kind: "fou-gre",
        inner_v6: false,
    },
    Encap {
        proto: "GRE",
        over: "GUE",
        kind: "gue-gre",
        inner_v6: false,
    },
    Encap {
        proto: "IPIP",
        over: "FOU",
        kind: "fou-ipip",
        inner_v6: false,
    },
    Encap {
        proto: "IPIP",
        over: "GUE",
        kind: "gue",
        inner_v6: false,
    },
    Encap {
        proto: "SIT",
        over: "FOU",
        kind: "fou-sit",
        inner_v6: true,
    },
    Encap {
        proto: "SIT",
        over: "GUE",
        kind: "gue",
        inner_v6: true,
    },
];

/// Seed 001's TCP_STREAM figures: (tx CPU %, rx CPU %, Mbit/s), checksum
/// enabled then disabled, in [`ENCAPS`]'s order.
const SEED001_STREAM: [[(f64, f64, f64); 2]; 6] = [
    [(14.04, 13.17, 9211.0), (13.14, 23.18, 9277.0)],
    [(14.99, 13.79, 9185.0), (13.66, 23.57, 9184.0)],
    [(15.28, 13.92, 9342.0), (15.08, 24.64, 9226.0)],
    [(13.99, 13.34, 9210.0), (15.90, 24.77, 9197.0)],
    [(14.47, 14.58, 9106.0), (15.70, 27.93, 9097.0)],
    [(15.09, 14.84, 9080.0), (15.04, 27.54, 9073.0)],
];

/// Seed 001's TCP_RR with checksum enabled: (CPU %, p90, p95, p99 µs,
/// transactions/s).
const SEED001_RR: [(f64, f64, f64, f64, f64); 6] = [
    (94.2, 155.0, 249.0, 460.0, 1.17018e6),
    (93.9, 158.0, 253.0, 472.0, 1.15045e6),
    (94.23, 149.0, 237.0, 429.0, 1.19553e6),
    (93.75, 152.0, 243.0, 442.0, 1.17027e6),
    (96.9, 170.0, 281.0, 581.0, 1.03372e6),
    (97.16, 172.0, 286.0, 576.0, 1.00469e6),
];

/// Seed 004's TCP_RR rows: (name, tep kind or "" for no tunnel or None
/// where neither tep nor this kernel has it, CPU %, p90, p95, p99,
/// transactions/s, transactions/s per CPU %).
#[allow(clippy::type_complexity)]
const SEED004: [(&str, Option<&str>, f64, f64, f64, f64, f64, f64); 5] = [
    (
        "native (no tunnel)",
        Some(""),
        68.78,
        113.0,
        155.0,
        223.0,
        1.66547e6,
        24214.0,
    ),
    ("IPIP", None, 51.17, 171.0, 248.0, 365.0, 1.10803e6, 21653.0),
    (
        "IPIP in GUE",
        Some("gue"),
        75.20,
        145.0,
        197.0,
        273.0,
        1.315e6,
        17486.0,
    ),
    ("GRE", None, 71.22, 138.0, 180.0, 244.0, 1.30465e6, 18318.0),
    (
        "GRE-GUE",
        Some("gue-gre"),
        75.96,
        145.0,
        196.0,
        271.0,
        1.31427e6,
        17302.0,
    ),
];

const CHECKSUMS: [(&str, &str); 2] = [("full", "enabled"), ("zero", "disabled")];

fn label(e: &Encap) -> String {
    format!("{}/{}", e.proto, e.over)
}

fn case_id(e: &Encap, checksum: &str) -> String {
    format!(
        "tep {}{} {checksum}",
        e.kind,
        if e.inner_v6 { " (IPv6 inside)" } else { "" }
    )
}

fn path(e: &Encap, checksum: &'static str) -> Path {
    let p = Path::new(Carrier::Tep {
        kind: e.kind,
        checksum,
    });
    if e.inner_v6 {
        p.v6_inner()
    } else {
        p
    }
}

/// The encapsulations a run covers: GRE only when quick.
fn encaps(quick: bool) -> &'static [Encap] {
    if quick {
        &ENCAPS[..2]
    } else {
        &ENCAPS
    }
}

/// No tunnel, for seed 004's baseline and seed 002's.
pub fn plain_id() -> &'static str {
    "no tunnel"
}

/// Seed 001's cases: a stream per encapsulation and checksum, request /
/// response with the checksum enabled.
pub fn cases_001(quick: bool) -> Vec<Case> {
    let mut out = Vec::new();
    for e in encaps(quick) {
        for (checksum, _) in CHECKSUMS {
            out.push(Case {
                id: case_id(e, checksum),
                path: path(e, checksum),
                stream: true,
                rr: checksum == "full",
            });
        }
    }
    out
}

/// Seed 004's cases: request/response with no tunnel and through the GUE
/// encapsulations tep has.
pub fn cases_004(_quick: bool) -> Vec<Case> {
    let mut out = vec![Case {
        id: plain_id().into(),
        path: Path::new(Carrier::Plain),
        stream: false,
        rr: true,
    }];
    for (_, kind, ..) in SEED004 {
        if let Some(k) = kind.filter(|k| !k.is_empty()) {
            let e = ENCAPS.iter().find(|e| e.kind == k && !e.inner_v6).unwrap();
            out.push(Case {
                id: case_id(e, "full"),
                path: path(e, "full"),
                stream: false,
                rr: true,
            });
        }
    }
    out
}

fn find<'m>(m: &'m [Measured], id: &str) -> Option<&'m Measured> {
    m.iter().find(|x| x.id == id)
}

/// Seed 001's report from the run's measurements.
pub fn report_001(m: &[Measured], quick: bool, how: &str) -> SeedReport {
    let mut text = format!(
        "\nseed 001: GRE, IPIP and SIT in FOU and GUE, UDP checksum enabled and disabled\n\
         seed: Linux 3.18 fou/gue, netperf TCP_STREAM and TCP_RR with 200 connections, 10 G NICs (2014)\n\
         here: tep, {how}\n\n"
    );
    text += &format!(
        "{:<9} {:<9} | {:>6} {:>6} {:>6} | {:>8} {:>6} {:>6} {:>9} {:>9} {:>7}\n",
        "encap",
        "checksum",
        "Mbit/s",
        "tx %",
        "rx %",
        "Gbit/s",
        "a %",
        "b %",
        "a %/Gbit",
        "b %/Gbit",
        "retr"
    );
    text += &format!(
        "{:<19} | {:^20} | {:^60}\n",
        "", "seed 001", "tep here (a sends, b receives; % of one CPU)"
    );
    let mut rows = Vec::new();
    let mut targets = Vec::new();
    let mut passed = true;
    let mut cpu_bars = Vec::new();
    for (i, e) in encaps(quick).iter().enumerate() {
        let mut per_gbit = Vec::new();
        for (j, (checksum, word)) in CHECKSUMS.iter().enumerate() {
            let seed = SEED001_STREAM[i][j];
            let got = find(m, &case_id(e, checksum));
            let s = got.and_then(|g| g.stream.clone());
            passed &= s.as_ref().is_some_and(|s| s.gbit_per_s > 0.0);
            let (pa, pb) = s.as_ref().map(|s| s.cpu_per_gbit()).unzip();
            per_gbit.push((pa, pb));
            text += &format!(
                "{:<9} {:<9} | {:>6.0} {:>6.2} {:>6.2} | {:>8} {:>6} {:>6} {:>9} {:>9} {:>7}{}\n",
                label(e),
                word,
                seed.2,
                seed.0,
                seed.1,
                cell(s.as_ref().map(|s| s.gbit_per_s), 2),
                cell(s.as_ref().map(|s| s.cpu_a_pct), 1),
                cell(s.as_ref().map(|s| s.cpu_b_pct), 1),
                cell(pa, 1),
                cell(pb, 1),
                cell(s.as_ref().map(|s| s.retransmits), 0),
                got.and_then(|g| g.error.as_ref())
                    .map(|e| format!("  ({e})"))
                    .unwrap_or_default()
            );
            rows.push(serde_json::json!({
                "encap": label(e), "tep_kind": e.kind, "inner": if e.inner_v6 { "ipv6" } else { "ipv4" },
                "checksum": word,
                "seed": {"tx_cpu_pct": seed.0, "rx_cpu_pct": seed.1, "mbit_per_s": seed.2},
                "tep": s,
                "tep_cpu_pct_per_gbit": {"a": pa, "b": pb},
                "error": got.and_then(|g| g.error.clone()),
            }));
        }
        // Enabled against disabled, per Gbit/s, each side.
        let seed_on = SEED001_STREAM[i][0];
        let seed_off = SEED001_STREAM[i][1];
        let seed_tx = (seed_on.0 / seed_on.2) / (seed_off.0 / seed_off.2);
        let seed_rx = (seed_on.1 / seed_on.2) / (seed_off.1 / seed_off.2);
        // The noise: how far either case moved between rounds.
        let noise = [case_id(e, "full"), case_id(e, "zero")]
            .iter()
            .filter_map(|id| find(m, id).and_then(|g| g.stream_spread))
            .fold(1.0f64, |n, (a, b)| n.max(a).max(b));
        let tx = per_gbit[0]
            .0
            .zip(per_gbit[1].0)
            .and_then(|(on, off)| ratio(on, off));
        let rx = per_gbit[0]
            .1
            .zip(per_gbit[1].1)
            .and_then(|(on, off)| ratio(on, off));
        targets.push(Target {
            name: format!(
                "{}: checksum enabled costs <= 1.1x the CPU per Gbit/s of disabled, each side",
                label(e)
            ),
            pass: tx.is_some_and(|r| r <= 1.1) && rx.is_some_and(|r| r <= 1.1),
            detail: format!(
                "sender {}x, receiver {}x (seed: sender {seed_tx:.2}x, receiver {seed_rx:.2}x); a case moved up to {noise:.2}x between rounds here",
                cell(tx, 2),
                cell(rx, 2)
            ),
        });
        cpu_bars.push((
            label(e),
            vec![per_gbit[0].0, per_gbit[1].0, per_gbit[0].1, per_gbit[1].1],
        ));
    }
    text +=
        "\nTCP request/response, checksum enabled (64-byte request and response, one at a time)\n";
    text += &format!(
        "{:<9} | {:>6} {:>5} {:>5} {:>5} {:>9} | {:>6} {:>6} {:>7} {:>7} {:>7} {:>9}\n",
        "encap",
        "CPU %",
        "p90",
        "p95",
        "p99",
        "tps",
        "a %",
        "b %",
        "p90 µs",
        "p95 µs",
        "p99 µs",
        "tps"
    );
    let mut rr_rows = Vec::new();
    for (i, e) in encaps(quick).iter().enumerate() {
        let seed = SEED001_RR[i];
        let r = find(m, &case_id(e, "full")).and_then(|g| g.rr.clone());
        passed &= r.as_ref().is_some_and(|r| r.transactions_per_s > 0.0);
        text += &format!(
            "{:<9} | {:>6.2} {:>5.0} {:>5.0} {:>5.0} {:>9.0} | {:>6} {:>6} {:>7} {:>7} {:>7} {:>9}\n",
            label(e),
            seed.0,
            seed.1,
            seed.2,
            seed.3,
            seed.4,
            cell(r.as_ref().map(|r| r.cpu_a_pct), 1),
            cell(r.as_ref().map(|r| r.cpu_b_pct), 1),
            cell(r.as_ref().map(|r| r.p90_us), 1),
            cell(r.as_ref().map(|r| r.p95_us), 1),
            cell(r.as_ref().map(|r| r.p99_us), 1),
            cell(r.as_ref().map(|r| r.transactions_per_s), 0),
        );
        rr_rows.push(serde_json::json!({
            "encap": label(e), "tep_kind": e.kind,
            "seed": {"cpu_pct": seed.0, "p90_us": seed.1, "p95_us": seed.2, "p99_us": seed.3, "tps": seed.4},
            "tep": r,
        }));
    }
    text += "seed: 200 connections in parallel (tps summed, CPU of the whole host); here one \
             connection, so compare latencies and how they move between encapsulations\n";
    let charts = vec![Bars {
        file: "seed001-cpu-per-gbit.png".into(),
        title: "Seed 001: CPU per Gbit/s through tep, UDP checksum enabled vs disabled".into(),
        y_label: "% of one CPU per Gbit/s".into(),
        note: format!("iperf3 TCP, {how}; sender = side a, receiver = side b"),
        series: vec![
            "sender, checksum enabled".into(),
            "sender, disabled".into(),
            "receiver, enabled".into(),
            "receiver, disabled".into(),
        ],
        groups: cpu_bars,
    }];
    SeedReport {
        seed: "001",
        text,
        json: serde_json::json!({"stream": rows, "rr": rr_rows}),
        targets,
        charts,
        passed,
    }
}

/// Seed 004's report: request/response against no tunnel.
pub fn report_004(m: &[Measured], how: &str) -> SeedReport {
    let mut text = format!(
        "\nseed 004: TCP request/response, no tunnel against UDP encapsulations\n\
         seed: Linux RFC patches (2014), netperf TCP_RR with 200 connections, 32 CPUs, bnx2x\n\
         here: tep, {how}; tps/CPU% = transactions per second per percent of the host's CPU (both sides)\n\n"
    );
    text += &format!(
        "{:<19} | {:>6} {:>5} {:>5} {:>5} {:>9} {:>7} | {:>6} {:>7} {:>7} {:>7} {:>8} {:>8} {:>6}\n",
        "", "CPU %", "p90", "p95", "p99", "tps", "tps/CPU", "CPU %", "p90 µs", "p95 µs", "p99 µs",
        "tps", "tps/CPU", "vs no"
    );
    let mut rows = Vec::new();
    let mut passed = true;
    let base = find(m, plain_id()).and_then(|g| g.rr.clone());
    let per_cpu =
        |r: &super::hostpair::Rr| ratio(r.transactions_per_s, (r.cpu_a_pct + r.cpu_b_pct) / 2.0);
    let base_per_cpu = base.as_ref().and_then(per_cpu);
    let mut bars = Vec::new();
    for (name, kind, cpu, p90, p95, p99, tps, tps_cpu) in SEED004 {
        let r = match kind {
            Some("") => base.clone(),
            Some(k) => {
                let e = ENCAPS.iter().find(|e| e.kind == k && !e.inner_v6).unwrap();
                find(m, &case_id(e, "full")).and_then(|g| g.rr.clone())
            }
            None => None,
        };
        if kind.is_some() {
            passed &= r.as_ref().is_some_and(|r| r.transactions_per_s > 0.0);
        }
        let pc = r.as_ref().and_then(per_cpu);
        let vs = pc.zip(base_per_cpu).and_then(|(a, b)| ratio(a, b));
        let seed_vs = tps_cpu / SEED004[0].7;
        text += &format!(
            "{:<19} | {:>6.2} {:>5.0} {:>5.0} {:>5.0} {:>9.0} {:>7.0} | {:>6} {:>7} {:>7} {:>7} {:>8} {:>8} {:>6}{}\n",
            name,
            cpu,
            p90,
            p95,
            p99,
            tps,
            tps_cpu,
            cell(r.as_ref().map(|r| (r.cpu_a_pct + r.cpu_b_pct) / 2.0), 1),
            cell(r.as_ref().map(|r| r.p90_us), 1),
            cell(r.as_ref().map(|r| r.p95_us), 1),
            cell(r.as_ref().map(|r| r.p99_us), 1),
            cell(r.as_ref().map(|r| r.transactions_per_s), 0),
            cell(pc, 0),
            cell(vs, 2),
            if kind.is_none() {
                "  (no UDP: not a tep kind; no ipip/ip_gre module here)".to_string()
            } else {
                String::new()
            }
        );
        bars.push((name.to_string(), vec![Some(seed_vs), vs]));
        rows.push(serde_json::json!({
            "name": name, "tep_kind": kind,
            "seed": {"cpu_pct": cpu, "p90_us": p90, "p95_us": p95, "p99_us": p99, "tps": tps, "tps_per_cpu_pct": tps_cpu},
            "tep": r, "tep_tps_per_cpu_pct": pc, "tep_vs_no_tunnel": vs, "seed_vs_native": seed_vs,
        }));
    }
    text += "vs no = tps/CPU against no tunnel's; the seed's:";
    for (name, _, _, _, _, _, _, tps_cpu) in &SEED004[1..] {
        text += &format!(" {name} {:.2};", tps_cpu / SEED004[0].7);
    }
    text.pop();
    text += "\n";
    SeedReport {
        seed: "004",
        text,
        json: serde_json::json!({"rr": rows}),
        targets: Vec::new(),
        charts: vec![Bars {
            file: "seed004-rr-per-cpu.png".into(),
            title: "Seed 004: TCP_RR transactions per CPU, relative to no tunnel".into(),
            y_label: "tps per CPU %, no tunnel = 1".into(),
            note: format!("TCP request/response, 64 bytes, {how}"),
            series: vec!["seed (Linux, 2014)".into(), "tep here".into()],
            groups: bars,
        }],
        passed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_encapsulation_has_its_seed_figures_and_cases() {
        let c = cases_001(false);
        assert_eq!(c.len(), 12);
        assert_eq!(c.iter().filter(|c| c.rr).count(), 6);
        assert_eq!(cases_001(true).len(), 4);
        // SIT is IPv6 inside IPv4: tep's fou-sit, and gue with IPv6 inside.
        let sit: Vec<_> = c.iter().filter(|c| c.path.inner_v6).collect();
        assert_eq!(sit.len(), 4);
        // Seed 001's 14.04 % / 9211 Mbit/s against 13.14 % / 9277: the
        // receiver paid 1.75x per Mbit/s without the checksum.
        let (on, off) = (SEED001_STREAM[0][0], SEED001_STREAM[0][1]);
        assert!(((off.1 / off.2) / (on.1 / on.2) - 1.75).abs() < 0.01);
        let ids: Vec<String> = cases_004(false).iter().map(|c| c.id.clone()).collect();
        assert_eq!(ids, ["no tunnel", "tep gue full", "tep gue-gre full"]);
    }

    #[test]
    fn a_missing_measurement_fails_the_report_and_its_target() {
        let r = report_001(&[], true, "nothing");
        assert!(!r.passed);
        assert_eq!(r.targets.len(), 2);
        assert!(r.targets.iter().all(|t| !t.pass));
    }
}
