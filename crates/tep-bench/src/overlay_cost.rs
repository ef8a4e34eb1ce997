//! Seed 002: "On the cost of tunnel endpoint processing in overlay virtual
//! networks" (IBM Research, 2014). Its clock cycles per layer of a VXLAN
//! receive come from `tep-bench pipeline` (the same table, not a copy);
//! its two end-to-end figures are rerun the paper's way: bandwidth per CPU
//! (Gbit/s divided by the receiver's CPU utilisation) and TCP_RR latency
//! (RTT/2), without a tunnel, through tep's VXLAN and through the kernel's.

use super::hostpair::{Carrier, Case, Measured, Path, Rr, Stream};
use super::pipeline;
use super::report::{cell, ratio, Bars, SeedReport};
use super::{fou_gue, vxlan_rco};

/// The paper's software VXLAN endpoint against no tunnel.
const SEED_BW_DROP_PCT: f64 = 31.8;
const SEED_LATENCY_INCREASE_PCT: f64 = 32.5;
/// Its accelerated endpoint, as a share of no tunnel's performance.
const SEED_ACCEL_BW_PCT: f64 = 97.1;
const SEED_ACCEL_LATENCY_PCT: f64 = 94.4;

fn plain() -> Case {
    Case {
        id: fou_gue::plain_id().into(),
        path: Path::new(Carrier::Plain),
        stream: true,
        rr: true,
    }
}

fn tep() -> Case {
    vxlan_rco::tep_vxlan("full", false, true, true)
}

fn kernel() -> Case {
    vxlan_rco::kernel_vxlan("udpcsum", false, true, true)
}

pub fn cases(_quick: bool) -> Vec<Case> {
    vec![plain(), tep(), kernel()]
}

/// The clock cycles per layer of tep's VXLAN receive, beside the paper's.
pub fn layers(quick: bool) -> Option<pipeline::LayerTable> {
    let opts = pipeline::Options {
        kinds: vec![tep_dataplane::TunnelKind::Vxlan],
        families: vec![pipeline::Family::Ipv4],
        modes: vec![tep_dataplane::config::ChecksumMode::Full],
        sizes: vec![pipeline::Size::Ip(1492)],
        checks: false,
        ..if quick {
            pipeline::Options::quick()
        } else {
            pipeline::Options::default()
        }
    };
    pipeline::run(&opts, |_| {}).tables.into_iter().next()
}

/// Bandwidth per CPU: Gbit/s per unit of the receiver's CPU.
fn bw_per_cpu(s: &Stream) -> Option<f64> {
    ratio(s.gbit_per_s, s.cpu_b_pct / 100.0)
}

/// Half the mean round trip, µs.
fn half_rtt(r: &Rr) -> f64 {
    r.mean_us / 2.0
}

pub fn report(m: &[Measured], layers: Option<&pipeline::LayerTable>, how: &str) -> SeedReport {
    let mut text = String::from(
        "\nseed 002: the cost of tunnel endpoint processing (VXLAN receive)\n\
         seed: Linux 3.12 on an i7-950 receiver, 10 G FPGA NIC, netperf TCP_STREAM and TCP_RR (2014)\n",
    );
    match layers {
        Some(t) => text += &pipeline::render_layer_table(t),
        None => {
            text += "\nclock cycles per layer: not measured (the pipeline dropped the packets)\n"
        }
    }
    text += &format!(
        "\nend to end, {how}; BW/CPU = Gbit/s / receiver CPU utilisation, latency = mean RTT/2\n"
    );
    text += &format!(
        "{:<22} {:>8} {:>6} {:>8} {:>9} {:>9} {:>8} {:>9}\n",
        "", "Gbit/s", "b %", "BW/CPU", "vs none", "RTT/2 µs", "vs none", "lat perf"
    );
    let get = |c: &Case| m.iter().find(|x| x.id == c.id);
    let base = get(&plain());
    let base_bw = base.and_then(|b| b.stream.as_ref()).and_then(bw_per_cpu);
    let base_lat = base.and_then(|b| b.rr.as_ref()).map(half_rtt);
    let mut rows = Vec::new();
    let mut passed = true;
    let mut bw_bars = vec![(
        "seed: software TEP".to_string(),
        vec![
            Some(100.0 - SEED_BW_DROP_PCT),
            Some(100.0 / (1.0 + SEED_LATENCY_INCREASE_PCT / 100.0)),
        ],
    )];
    bw_bars.push((
        "seed: accelerated".to_string(),
        vec![Some(SEED_ACCEL_BW_PCT), Some(SEED_ACCEL_LATENCY_PCT)],
    ));
    for (name, c) in [
        ("no tunnel (veth)", plain()),
        ("tep VXLAN (full)", tep()),
        ("kernel VXLAN (udpcsum)", kernel()),
    ] {
        let got = get(&c);
        let s = got.and_then(|g| g.stream.as_ref());
        let r = got.and_then(|g| g.rr.as_ref());
        passed &= s.is_some_and(|s| s.gbit_per_s > 0.0) && r.is_some();
        let bw = s.and_then(bw_per_cpu);
        let lat = r.map(half_rtt);
        let bw_share = bw.zip(base_bw).and_then(|(a, b)| ratio(a, b));
        let lat_ratio = lat.zip(base_lat).and_then(|(a, b)| ratio(a, b));
        text += &format!(
            "{:<22} {:>8} {:>6} {:>8} {:>9} {:>9} {:>8} {:>9}{}\n",
            name,
            cell(s.map(|s| s.gbit_per_s), 2),
            cell(s.map(|s| s.cpu_b_pct), 1),
            cell(bw, 2),
            bw_share.map_or("-".into(), |x| format!("{:+.1}%", 100.0 * (x - 1.0))),
            cell(lat, 1),
            lat_ratio.map_or("-".into(), |x| format!("{:+.1}%", 100.0 * (x - 1.0))),
            lat_ratio.map_or("-".into(), |x| format!("{:.1}%", 100.0 / x)),
            got.and_then(|g| g.error.as_ref())
                .map(|e| format!("  ({e})"))
                .unwrap_or_default()
        );
        if c.id != plain().id {
            bw_bars.push((
                format!("{name} here"),
                vec![bw_share.map(|x| 100.0 * x), lat_ratio.map(|x| 100.0 / x)],
            ));
        }
        rows.push(serde_json::json!({
            "path": name, "stream": s, "rr": r,
            "bw_per_cpu_gbit": bw, "bw_per_cpu_vs_none": bw_share,
            "half_rtt_us": lat, "latency_vs_none": lat_ratio,
            "error": got.and_then(|g| g.error.clone()),
        }));
    }
    text += &format!(
        "seed: software VXLAN -{SEED_BW_DROP_PCT}% BW/CPU, +{SEED_LATENCY_INCREASE_PCT}% latency; \
         its accelerated endpoint {SEED_ACCEL_BW_PCT}% of the BW performance, {SEED_ACCEL_LATENCY_PCT}% of \
         the latency performance (lat perf = no tunnel's latency / this one's)\n"
    );
    SeedReport {
        seed: "002",
        text,
        json: serde_json::json!({
            "layers": layers,
            "end_to_end": rows,
            "seed": {
                "bw_drop_pct": SEED_BW_DROP_PCT, "latency_increase_pct": SEED_LATENCY_INCREASE_PCT,
                "accelerated_bw_pct": SEED_ACCEL_BW_PCT, "accelerated_latency_pct": SEED_ACCEL_LATENCY_PCT,
            },
        }),
        targets: Vec::new(),
        charts: vec![Bars {
            file: "seed002-performance.png".into(),
            title: "Seed 002: VXLAN endpoint performance, % of no tunnel".into(),
            y_label: "% of no tunnel's performance".into(),
            note: format!(
                "BW/CPU: iperf3 Gbit/s per receiver CPU; latency: no tunnel's mean RTT/2 over this one's; {how}"
            ),
            series: vec!["bandwidth per CPU".into(), "latency performance".into()],
            groups: bw_bars,
        }],
        passed,
    }
}
