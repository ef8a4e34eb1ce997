//! Seed 000's experiment: 1492-byte packets at a steady rate into a tep
//! gateway that sends them on as GTP-U over IPv6, UDP checksum zero,
//! computed in software (`full`), left to the device (`offload`) or
//! local checksum offload (`lco`); loss and latency per case, beside the
//! VPP figures the seed published.
//!
//! The sender paces probes ([`super::probe`]) out of a UDP socket (bound
//! to an interface with `--tx`); the sink takes GTP-U datagrams on port
//! 2152 with the kernel's receive time stamps (SO_TIMESTAMPNS) and finds
//! the probe behind the GTP-U and inner IP/UDP headers. By default
//! ([`run_in_namespaces`]) the whole setup is built here: a generator
//! namespace, tep's, and the sink's, joined by veths.

use super::probe::{read_probe, write_probe, Pacer, Report, Tally, PROBE_LEN};
use super::report::Target;
use serde::Serialize;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tep_sys::{Epoll, Event, Transmit, UdpOptions, UdpSocket};
use tep_testing::netns::{cmd, Daemon, Namespaces};

/// The seed's packet: 1492 bytes of IP.
pub const PACKET_LEN: usize = 1492;
/// The seed's two rates.
pub const RATES: [f64; 2] = [100.0, 275_000.0];
/// GTP-U's port.
const GTPU_PORT: u16 = 2152;

/// CLOCK_REALTIME now, in ns: the clock of the kernel's receive stamps.
fn realtime_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// What a sender did.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Sent {
    pub packets: u64,
    pub seconds: f64,
    pub achieved_pps: f64,
    /// Sends the socket refused for a full buffer, and retried.
    pub blocked: u64,
}

/// Sends probes of `packet_len` bytes of IP to `dst` at `pps` for
/// `seconds`, out of `device` if given.
pub fn send(
    dst: SocketAddr,
    device: Option<&str>,
    packet_len: usize,
    pps: f64,
    seconds: f64,
) -> io::Result<Sent> {
    let ip_header = if dst.is_ipv4() { 20 } else { 40 };
    let payload = packet_len.saturating_sub(ip_header + 8).max(PROBE_LEN);
    let any: IpAddr = if dst.is_ipv4() {
        Ipv4Addr::UNSPECIFIED.into()
    } else {
        Ipv6Addr::UNSPECIFIED.into()
    };
    let mut socket = UdpSocket::bind(
        SocketAddr::new(any, 0),
        &UdpOptions {
            gro: false,
            gso: false,
            device: device.map(str::to_owned),
            ..UdpOptions::default()
        },
    )?;
    let mut buf = vec![0u8; payload];
    let start = Instant::now();
    let pacer = Pacer::new(0, pps);
    let end_ns = (seconds * 1e9) as u64;
    let mut sent = Sent::default();
    for seq in 0.. {
        let due = pacer.due(seq);
        if due >= end_ns {
            break;
        }
        loop {
            let now = start.elapsed().as_nanos() as u64;
            if now >= due {
                break;
            }
            // Sleep through long gaps (100 pps), spin through short ones:
            // a sleep's wake-up is late by tens of µs.
            if due - now > 300_000 {
                std::thread::sleep(Duration::from_nanos(due - now - 200_000));
            } else {
                std::hint::spin_loop();
            }
        }
        write_probe(&mut buf, seq, realtime_ns());
        let msg = [Transmit {
            dest: dst,
            data: &buf,
            segment_size: None,
        }];
        loop {
            match socket.send_batch(&msg) {
                Ok(_) => break,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    sent.blocked += 1;
                    std::hint::spin_loop();
                }
                Err(e) => return Err(e),
            }
        }
        sent.packets += 1;
    }
    sent.seconds = start.elapsed().as_secs_f64();
    sent.achieved_pps = sent.packets as f64 / sent.seconds.max(1e-9);
    Ok(sent)
}

/// The probe inside a GTP-U datagram: behind the G-PDU's header and the
/// inner IP and UDP headers.
fn probe_in(data: &[u8]) -> Option<(u64, u64)> {
    let p = tep_wire::gtpu::Packet::new_checked(data).ok()?;
    let inner = &data[p.checked_header_len().ok()?..];
    let ip_len = match inner.first()? >> 4 {
        4 => usize::from(inner[0] & 0x0f) * 4,
        6 => 40,
        _ => return None,
    };
    read_probe(inner.get(ip_len + 8..)?)
}

/// Receives GTP-U datagrams carrying probes on `bind` (through `device`
/// if given) until `stop` is set and nothing has come for `quiet`.
pub fn sink(
    bind: SocketAddr,
    device: Option<&str>,
    expected: u64,
    stop: &AtomicBool,
    quiet: Duration,
) -> io::Result<Tally> {
    let mut socket = UdpSocket::bind(
        bind,
        &UdpOptions {
            gro: false,
            gso: false,
            rx_timestamps: true,
            zero_checksum_rx: true,
            device: device.map(str::to_owned),
            ..UdpOptions::default()
        },
    )?;
    let epoll = Epoll::new()?;
    use std::os::fd::AsRawFd;
    epoll.add(socket.as_raw_fd(), 0, true, false)?;
    let mut events: Vec<Event> = Vec::with_capacity(4);
    let mut tally = Tally::with_capacity(expected);
    let mut storage = vec![[0u8; 2048]; 64];
    let mut meta = vec![tep_sys::RecvMeta::default(); 64];
    let mut last = Instant::now();
    loop {
        epoll.wait(&mut events, 10)?;
        loop {
            let mut bufs: Vec<io::IoSliceMut<'_>> =
                storage.iter_mut().map(|b| io::IoSliceMut::new(b)).collect();
            let n = match socket.recv_batch(&mut bufs, &mut meta) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
                Err(e) => return Err(e),
            };
            drop(bufs);
            if n == 0 {
                break;
            }
            last = Instant::now();
            let now = realtime_ns();
            for (m, b) in meta.iter().zip(&storage).take(n) {
                let stamp = if m.stamp_ns > 0 { m.stamp_ns } else { now };
                match probe_in(&b[..m.len.min(b.len())]) {
                    Some((seq, sent)) => tally.record(seq, sent, stamp),
                    None => tally.foreign += 1,
                }
            }
        }
        if stop.load(Ordering::Acquire) && last.elapsed() >= quiet {
            return Ok(tally);
        }
    }
}

/// A checksum mode of the experiment and the seed's figures for it, where
/// the seed measured it (VPP, its section 3.2/3.3 tables).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct SeedFigure {
    pub loss_pct: f64,
    pub avg_ns: u64,
    pub min_ns: u64,
    pub max_ns: u64,
}

/// The seed's table: (mode, rate) → figures.
pub fn seed_figure(mode: &str, pps: f64) -> Option<SeedFigure> {
    let f = |loss_pct, avg_ns, min_ns, max_ns| {
        Some(SeedFigure {
            loss_pct,
            avg_ns,
            min_ns,
            max_ns,
        })
    };
    match (mode, pps as u64) {
        ("zero", 100) => f(0.0, 15_336, 14_535, 124_397),
        ("full", 100) => f(0.0, 15_477, 14_592, 123_337),
        ("offload", 100) => f(0.0, 15_349, 14_537, 63_742),
        ("zero", 275_000) => f(0.0, 120_005, 62_650, 1_300_217),
        ("full", 275_000) => f(3.676, 8_167_461, 52_467, 9_341_807),
        ("offload", 275_000) => f(0.0, 134_126, 74_090, 2_443_992),
        _ => None,
    }
}

/// One case of the experiment.
#[derive(Clone, Debug, Serialize)]
pub struct Case {
    pub mode: String,
    pub offered_pps: f64,
    pub sent: Sent,
    pub report: Report,
    /// The sender reached less than 95 % of the offered rate: the case
    /// says what this machine's generator could do, not what tep can.
    pub generator_short: bool,
    pub seed: Option<SeedFigure>,
}

/// Addresses of the namespaces' links.
const GEN_ADDR: &str = "10.70.0.2/24";
const GW_INNER_ADDR: &str = "10.70.0.1/24";
const GW_INNER_IP: &str = "10.70.0.1";
const INNER_PREFIX: &str = "10.71.0.0/24";
const INNER_DST: Ipv4Addr = Ipv4Addr::new(10, 71, 0, 2);
const GW_UNDERLAY: &str = "2001:db8:70::1";
const SINK_UNDERLAY: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0x70, 0, 0, 0, 0, 2);

fn build(setup: &Namespaces) -> Result<(), String> {
    let (g, w, s) = (setup.ns("g"), setup.ns("w"), setup.ns("s"));
    cmd(&[
        "ip", "link", "add", "g0", "netns", &g, "type", "veth", "peer", "name", "wi", "netns", &w,
    ])?;
    cmd(&[
        "ip", "link", "add", "wu", "netns", &w, "type", "veth", "peer", "name", "s0", "netns", &s,
    ])?;
    let sink = format!("{SINK_UNDERLAY}/64");
    let gw = format!("{GW_UNDERLAY}/64");
    for args in [
        vec!["ip", "-n", &g, "addr", "add", GEN_ADDR, "dev", "g0"],
        vec!["ip", "-n", &w, "addr", "add", GW_INNER_ADDR, "dev", "wi"],
        vec!["ip", "-n", &w, "addr", "add", &gw, "dev", "wu", "nodad"],
        vec!["ip", "-n", &s, "addr", "add", &sink, "dev", "s0", "nodad"],
        // GTP-U/IPv6 of a 1492-byte packet is about 1,560 bytes: the
        // underlay's MTU allows it, as the seed's did.
        vec!["ip", "-n", &w, "link", "set", "wu", "mtu", "1600"],
        vec!["ip", "-n", &s, "link", "set", "s0", "mtu", "1600"],
        vec!["ip", "-n", &g, "link", "set", "g0", "up"],
        vec!["ip", "-n", &w, "link", "set", "wi", "up"],
        vec!["ip", "-n", &w, "link", "set", "wu", "up"],
        vec!["ip", "-n", &s, "link", "set", "s0", "up"],
        vec![
            "ip",
            "-n",
            &g,
            "route",
            "add",
            INNER_PREFIX,
            "via",
            GW_INNER_IP,
        ],
        // A NIC fills the checksums it is asked to; a veth leaves them
        // partial in the frames tep's XDP program sees.
        vec![
            "ip", "netns", "exec", &g, "ethtool", "-K", "g0", "tx", "off",
        ],
    ] {
        cmd(&args)?;
    }
    Ok(())
}

/// The gateway's config for checksum `mode`, worker on `cpu`.
fn gateway_config(setup: &Namespaces, mode: &str, cpu: usize) -> String {
    format!(
        "[gateway]\ninner = \"wi\"\nunderlay = \"wu\"\ncpus = [{cpu}]\ncontrol = \"{}\"\n\n\
         [[tunnel]]\nname = \"n3\"\nkind = \"gtpu\"\nlocal = \"{GW_UNDERLAY}\"\nremote = \"{SINK_UNDERLAY}\"\n\
         teid = 100\nlocal_teid = 100\nchecksum = \"{mode}\"\nzero_checksum_tx = true\nzero_checksum_rx = true\n\
         inner_prefixes = [\"{INNER_PREFIX}\"]\n",
        setup.socket(&format!("gw-{mode}"))
    )
}

fn start_gateway(setup: &Namespaces, tep: &Path, mode: &str, cpu: usize) -> Result<Daemon, String> {
    let gw = setup.start_tep(
        tep,
        "w",
        &format!("gw-{mode}"),
        &gateway_config(setup, mode, cpu),
        None,
    )?;
    // The kernel resolves the neighbours on both sides.
    let _ = setup.run("g", &["ping", "-c", "1", "-W", "1", GW_INNER_IP]);
    let _ = setup.run(
        "w",
        &["ping", "-c", "1", "-W", "1", &SINK_UNDERLAY.to_string()],
    );
    Ok(gw)
}

/// One case: the sink in its namespace, the sender in the generator's,
/// each on its CPU; the report.
fn run_case(
    setup: &Namespaces,
    mode: &str,
    pps: f64,
    seconds: f64,
    cpus: (usize, usize),
) -> Result<Case, String> {
    let expected = (pps * seconds) as u64 + 1;
    let stop = AtomicBool::new(false);
    let (g, s) = (setup.ns("g"), setup.ns("s"));
    let (tally, sent) = std::thread::scope(|scope| {
        let sink_thread = scope.spawn(|| -> Result<Tally, String> {
            tep_sys::netns::enter(&s).map_err(|e| e.to_string())?;
            let _ = tep_sys::thread::pin_current_thread(cpus.1);
            sink(
                SocketAddr::new(SINK_UNDERLAY.into(), GTPU_PORT),
                None,
                expected,
                &stop,
                Duration::from_millis(300),
            )
            .map_err(|e| format!("sink: {e}"))
        });
        // The sink binds before the first probe leaves.
        std::thread::sleep(Duration::from_millis(100));
        let sent = scope
            .spawn(|| -> Result<Sent, String> {
                tep_sys::netns::enter(&g).map_err(|e| e.to_string())?;
                let _ = tep_sys::thread::pin_current_thread(cpus.0);
                send(
                    SocketAddr::new(INNER_DST.into(), 9),
                    None,
                    PACKET_LEN,
                    pps,
                    seconds,
                )
                .map_err(|e| format!("sender: {e}"))
            })
            .join()
            .map_err(|_| "sender panicked".to_string())
            .and_then(|r| r);
        stop.store(true, Ordering::Release);
        let tally = sink_thread
            .join()
            .map_err(|_| "sink panicked".to_string())
            .and_then(|r| r);
        (tally, sent)
    });
    let (tally, sent) = (tally?, sent?);
    Ok(Case {
        mode: mode.to_string(),
        offered_pps: pps,
        report: tally.report(sent.packets),
        generator_short: sent.achieved_pps < 0.95 * pps,
        sent,
        seed: seed_figure(mode, pps),
    })
}

/// What to run per checksum mode: the seed's rates, then a sweep.
#[derive(Clone, Debug)]
pub struct Plan {
    pub rates: Vec<f64>,
    /// Ascending; a mode's sweep stops at the first rate the generator
    /// falls short of, or that loses more than [`SWEEP_STOP_LOSS_PCT`].
    pub sweep: Vec<f64>,
    pub seconds: f64,
    /// Rounds of the seed's rates, the modes interleaved in each.
    pub repeat: usize,
}

/// Loss past which a sweep goes no higher: the loss-free rate is below.
pub const SWEEP_STOP_LOSS_PCT: f64 = 10.0;

/// The sweep's offered rates: 1-2-5 steps from 1,000 packets per second
/// up to `max`, and `max` itself.
pub fn sweep_rates(max: f64) -> Vec<f64> {
    let mut out = Vec::new();
    let mut decade = 1_000.0;
    'outer: loop {
        for step in [1.0, 2.0, 5.0] {
            let r = decade * step;
            if r >= max {
                break 'outer;
            }
            out.push(r);
        }
        decade *= 10.0;
    }
    out.push(max);
    out
}

/// The results of a run: the seed's rates and the sweep.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Runs {
    pub cases: Vec<Case>,
    pub sweep: Vec<Case>,
}

/// Each mode's loss-free rate: the highest offered rate of its sweep that
/// lost nothing with the generator keeping up (None: not even the lowest).
pub fn loss_free(sweep: &[Case], modes: &[&str]) -> Vec<(String, Option<f64>)> {
    modes
        .iter()
        .map(|&m| {
            let best = sweep
                .iter()
                .filter(|c| c.mode == m && !c.generator_short && c.report.lost == 0)
                .map(|c| c.offered_pps)
                .fold(None, |a: Option<f64>, r| Some(a.map_or(r, |a| a.max(r))));
            (m.to_string(), best)
        })
        .collect()
}

/// The experiment in namespaces of this machine: for each checksum mode,
/// a tep gateway (one worker, pinned), the seed's rates and the sweep.
pub fn run_in_namespaces(tep: &Path, modes: &[&str], plan: &Plan) -> Result<Runs, String> {
    let setup = Namespaces::new(&format!("tepseed{}", std::process::id()), &["g", "w", "s"])?;
    build(&setup)?;
    // The worker on the last CPU, the sender and the sink on the others
    // (with two CPUs the sink shares the sender's).
    let n = tep_sys::thread::online_cpus().max(1);
    let worker = n - 1;
    let sender = 0;
    let sink_cpu = if n > 2 { 1 } else { 0 };
    let cpus = (sender, sink_cpu);
    let mut runs = Runs::default();
    for _ in 0..plan.repeat.max(1) {
        for &mode in modes {
            let _gw = start_gateway(&setup, tep, mode, worker)?;
            for &pps in &plan.rates {
                runs.cases
                    .push(run_case(&setup, mode, pps, plan.seconds, cpus)?);
            }
        }
    }
    for &mode in modes {
        if plan.sweep.is_empty() {
            break;
        }
        let _gw = start_gateway(&setup, tep, mode, worker)?;
        for &pps in &plan.sweep {
            let c = run_case(&setup, mode, pps, plan.seconds, cpus)?;
            let stop = c.generator_short || c.report.loss_pct > SWEEP_STOP_LOSS_PCT;
            runs.sweep.push(c);
            if stop {
                break;
            }
        }
    }
    Ok(runs)
}

/// The table: per case, tep here beside the seed's VPP figure.
pub fn table(cases: &[Case]) -> String {
    let mut out = String::new();
    out += "seed 000: 1492-byte IPv4 packets into a tep gateway, GTP-U/IPv6 out (one worker, pinned)\n";
    out += &format!(
        "{:<8} {:>9} {:>9} {:>9} {:>7} {:>10} {:>10} {:>10} {:>10} {:>10} | {:>7} {:>11}\n",
        "mode",
        "offered",
        "achieved",
        "received",
        "loss%",
        "min µs",
        "avg µs",
        "p50 µs",
        "p99 µs",
        "max µs",
        "VPP loss%",
        "VPP avg µs"
    );
    for c in cases {
        let r = &c.report;
        let us = |ns: u64| format!("{:.1}", ns as f64 / 1000.0);
        let (seed_loss, seed_avg) = match c.seed {
            Some(s) => (format!("{:.3}", s.loss_pct), us(s.avg_ns)),
            None => ("-".to_string(), "-".to_string()),
        };
        out += &format!(
            "{:<8} {:>9.0} {:>9.0} {:>9} {:>7.3} {:>10} {:>10} {:>10} {:>10} {:>10} | {:>7} {:>11}{}\n",
            c.mode,
            c.offered_pps,
            c.sent.achieved_pps,
            r.received,
            r.loss_pct,
            us(r.min_ns),
            us(r.avg_ns),
            us(r.p50_ns),
            us(r.p99_ns),
            us(r.max_ns),
            seed_loss,
            seed_avg,
            if c.generator_short {
                "  (generator short of the offered rate)"
            } else {
                ""
            }
        );
    }
    out += "latency: probe send time (CLOCK_REALTIME) to the sink's kernel receive stamp (SO_TIMESTAMPNS), one machine's clock; loss by sequence number\n";
    out
}

/// The median of `v` (0 for none).
fn median_u64(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

/// tep's targets for seed 000: at the highest of the seed's rates, `full`
/// and `offload` lose nothing and their mean latency (the median over the
/// rounds) is at most 1.1x `zero`'s; `full`'s loss-free rate is at least
/// 0.95x `zero`'s. A target whose cases were not run is left out.
pub fn targets(runs: &Runs) -> Vec<Target> {
    let mut out = Vec::new();
    let top = runs.cases.iter().map(|c| c.offered_pps).fold(0.0, f64::max);
    let at_top = |mode: &str| -> Option<(u64, u64, usize, bool)> {
        let cs: Vec<&Case> = runs
            .cases
            .iter()
            .filter(|c| c.mode == mode && c.offered_pps == top)
            .collect();
        (!cs.is_empty()).then(|| {
            (
                median_u64(cs.iter().map(|c| c.report.avg_ns).collect()),
                cs.iter().map(|c| c.report.lost).sum(),
                cs.len(),
                cs.iter().any(|c| c.generator_short),
            )
        })
    };
    // How far zero's own mean moves between rounds: a ratio to zero's
    // mean below this spread cannot be told from the machine's noise.
    let zero_means: Vec<u64> = runs
        .cases
        .iter()
        .filter(|c| c.mode == "zero" && c.offered_pps == top)
        .map(|c| c.report.avg_ns)
        .collect();
    let noise = match (zero_means.iter().min(), zero_means.iter().max()) {
        (Some(&lo), Some(&hi)) if zero_means.len() > 1 && lo > 0 => format!(
            "; zero's own mean ranges {:.2}x between rounds",
            hi as f64 / lo as f64
        ),
        _ => String::new(),
    };
    if let Some((zero_avg, _, _, _)) = at_top("zero") {
        for mode in ["full", "offload"] {
            if let Some((avg, lost, rounds, short)) = at_top(mode) {
                let ratio = avg as f64 / zero_avg.max(1) as f64;
                out.push(Target {
                    name: format!("{mode} at {top:.0} pps: no loss, mean latency <= 1.1x zero's"),
                    pass: lost == 0 && ratio <= 1.1,
                    detail: format!(
                        "lost {lost}; mean {:.1} us against zero's {:.1} ({ratio:.2}x; medians of {rounds} round(s)){noise}{}",
                        avg as f64 / 1000.0,
                        zero_avg as f64 / 1000.0,
                        if short { "; the generator fell short of the offered rate" } else { "" }
                    ),
                });
            }
        }
    }
    let free = loss_free(&runs.sweep, &["zero", "full"]);
    if let [(_, Some(zero)), (_, Some(full))] = free.as_slice() {
        let ratio = full / zero;
        out.push(Target {
            name: "full's loss-free rate >= 0.95x zero's".to_string(),
            pass: ratio >= 0.95,
            detail: format!(
                "{full:.0} against {zero:.0} pps ({ratio:.2}x; the sweep's steps bound both)"
            ),
        });
    }
    out
}

/// The sweep: loss and latency against offered rate per mode, and each
/// mode's loss-free rate against `zero`'s.
pub fn sweep_table(runs: &Runs, modes: &[&str]) -> String {
    if runs.sweep.is_empty() {
        return String::new();
    }
    let mut out = String::from("\nseed 000 sweep: loss and latency against the offered rate\n");
    out += &format!(
        "{:<8} {:>9} {:>9} {:>8} {:>10} {:>10} {:>10}\n",
        "mode", "offered", "achieved", "loss%", "avg µs", "p50 µs", "p99 µs"
    );
    for c in &runs.sweep {
        let us = |ns: u64| format!("{:.1}", ns as f64 / 1000.0);
        out += &format!(
            "{:<8} {:>9.0} {:>9.0} {:>8.3} {:>10} {:>10} {:>10}{}\n",
            c.mode,
            c.offered_pps,
            c.sent.achieved_pps,
            c.report.loss_pct,
            us(c.report.avg_ns),
            us(c.report.p50_ns),
            us(c.report.p99_ns),
            if c.generator_short {
                "  (generator short: the sweep stops here)"
            } else {
                ""
            }
        );
    }
    let free = loss_free(&runs.sweep, modes);
    let zero = free.iter().find(|(m, _)| m == "zero").and_then(|(_, r)| *r);
    out += "loss-free rate (highest offered rate with no loss, the generator keeping up):";
    for (m, r) in &free {
        match (r, zero) {
            (Some(r), Some(z)) if m != "zero" => {
                out += &format!(" {m} {r:.0} pps ({:.2}x zero's);", r / z)
            }
            (Some(r), _) => out += &format!(" {m} {r:.0} pps;"),
            (None, _) => out += &format!(" {m} none;"),
        }
    }
    out.pop();
    out += "\n";
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::targets_text;

    #[test]
    fn the_probe_is_found_behind_gtpu_and_the_inner_headers() {
        // G-PDU header (8 bytes, no options), IPv4 (20), UDP (8), probe.
        let mut d = vec![0x30, 0xff, 0, 0, 0, 0, 0, 100];
        let mut ip = vec![0u8; 28];
        ip[0] = 0x45;
        d.extend_from_slice(&ip);
        let mut probe = [0u8; PROBE_LEN];
        write_probe(&mut probe, 7, 1234);
        d.extend_from_slice(&probe);
        let len = (d.len() - 8) as u16;
        d[2..4].copy_from_slice(&len.to_be_bytes());
        assert_eq!(probe_in(&d), Some((7, 1234)));
        assert_eq!(probe_in(&d[..20]), None);
    }

    #[test]
    fn sweep_steps_and_loss_free_rates() {
        assert_eq!(
            sweep_rates(275_000.0),
            vec![1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 2e5, 275_000.0]
        );
        assert_eq!(sweep_rates(500.0), vec![500.0]);
        let case = |mode: &str, pps: f64, lost: u64, short: bool| Case {
            mode: mode.to_string(),
            offered_pps: pps,
            sent: Sent::default(),
            report: Report {
                lost,
                ..Report::default()
            },
            generator_short: short,
            seed: None,
        };
        let sweep = [
            case("zero", 1e3, 0, false),
            case("zero", 2e3, 0, false),
            case("zero", 5e3, 0, true),
            case("full", 1e3, 0, false),
            case("full", 2e3, 3, false),
            case("lco", 1e3, 1, false),
        ];
        assert_eq!(
            loss_free(&sweep, &["zero", "full", "lco"]),
            vec![
                ("zero".to_string(), Some(2e3)),
                ("full".to_string(), Some(1e3)),
                ("lco".to_string(), None)
            ]
        );
    }

    #[test]
    fn targets_compare_medians_over_rounds_with_zero() {
        let case = |mode: &str, pps: f64, avg_ns: u64, lost: u64| Case {
            mode: mode.to_string(),
            offered_pps: pps,
            sent: Sent::default(),
            report: Report {
                avg_ns,
                lost,
                ..Report::default()
            },
            generator_short: false,
            seed: None,
        };
        let runs = Runs {
            cases: vec![
                case("zero", 100.0, 50_000, 0),
                case("zero", 1e5, 10_000, 0),
                case("zero", 1e5, 12_000, 0),
                case("zero", 1e5, 90_000, 0),
                // One outlier round: the median stays 10.5 us.
                case("full", 1e5, 10_500, 0),
                case("full", 1e5, 99_000, 0),
                case("full", 1e5, 10_400, 0),
                case("offload", 1e5, 10_000, 1),
            ],
            sweep: vec![case("zero", 1e3, 0, 0), case("full", 1e3, 0, 0)],
        };
        let t = targets(&runs);
        assert_eq!(t.len(), 3, "{t:?}");
        assert!(t[0].pass, "{t:?}");
        assert!(!t[1].pass, "offload lost one: {t:?}");
        assert!(t[2].pass, "{t:?}");
        assert!(targets_text(&t).contains("FAIL offload at 100000 pps"));
        // Zero against itself: 10 to 90 us between rounds.
        assert!(
            t[0].detail.contains("zero's own mean ranges 9.00x"),
            "{t:?}"
        );
    }

    #[test]
    fn the_seed_table_is_there_for_what_it_measured() {
        assert_eq!(seed_figure("full", 275_000.0).unwrap().avg_ns, 8_167_461);
        assert!(seed_figure("lco", 100.0).is_none());
    }
}
