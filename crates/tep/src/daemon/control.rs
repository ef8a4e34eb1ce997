//! The control socket: `tep show`, `tep reload` and `tep trace` talk to the
//! daemon over a Unix stream socket (mode 0600: root's only, like the
//! devices it controls).
//!
//! Protocol: the client writes one line (`show tunnels json`, `reload`,
//! `trace 100 5000`), the daemon answers `ok\n` or `error\n`, then the
//! body (text, JSON, or pcapng bytes for a trace), and closes.

use super::liveness::{self, Beat};
use super::state::{IoInfo, KernelCounters, State};
use super::stats::{IoEvent, Totals, WorkerSnapshot};
use serde::Serialize;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};
use tep_dataplane::config::{ChecksumMode, Config};
use tep_dataplane::node::{render_report, NodeStats};

/// The listening socket; its file is removed on [`ControlServer::remove`].
#[derive(Debug)]
pub struct ControlServer {
    path: PathBuf,
}

impl ControlServer {
    /// Removes the socket file (at exit). A daemon that dropped to a user
    /// who may not write the socket's directory leaves it: the next start
    /// finds nothing answering there and replaces it.
    pub fn remove(&self) {
        match std::fs::remove_file(&self.path) {
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => tracing::info!(
                path = %self.path.display(),
                "control socket left in place ({e}: tep runs as a user that cannot write its directory); the next start replaces it"
            ),
            _ => {}
        }
    }
}

/// A bound control socket whose requests nobody answers yet: bound while
/// the daemon may still create files anywhere, served after it has
/// dropped its privileges.
pub struct ControlListener {
    listener: std::os::unix::net::UnixListener,
    path: PathBuf,
}

/// Binds `path` (the config's `field`, named in errors), mode 0600.
pub fn listen(field: &str, path: &str) -> Result<ControlListener, String> {
    let p = Path::new(path);
    if UnixStream::connect(p).is_ok() {
        return Err(format!(
            "{field}: another tep answers on {path}; stop it or choose another path"
        ));
    }
    let _ = std::fs::remove_file(p);
    if let Some(dir) = p.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let listener = tep_sys::unix::bind_private(p)
        .map_err(|e| format!("{field}: cannot listen on {path}: {e}"))?;
    Ok(ControlListener {
        listener,
        path: p.to_path_buf(),
    })
}

impl ControlListener {
    /// Answers requests on a thread of its own.
    pub fn serve(self, state: Arc<State>) -> Result<ControlServer, String> {
        let listener = self.listener;
        listener
            .set_nonblocking(true)
            .map_err(|e| format!("control socket: {e}"))?;
        let shared = state.shared.clone();
        liveness::spawn(&shared.liveness, "control", PATIENCE, move |beat| {
            liveness::accept_loop(
                beat,
                &listener,
                |l| l.accept().map(|(s, _)| s),
                |stream| {
                    let _ = stream.set_read_timeout(Some(CLIENT_TIMEOUT));
                    let _ = stream.set_write_timeout(Some(CLIENT_TIMEOUT));
                    if let Err(e) = answer(stream, &state, beat) {
                        tracing::debug!("control client: {e}");
                    }
                },
            )
        })
        .map_err(|e| format!("cannot start the control thread: {e}"))?;
        Ok(ControlServer { path: self.path })
    }
}

/// How long a client may take to send its request, or to read the
/// answer, each.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the control thread may go without a beat while it serves one
/// client (reading and writing at [`CLIENT_TIMEOUT`] each) before the
/// watchdog counts it stuck; traces and reloads beat while they wait.
const PATIENCE: Duration = Duration::from_secs(15);

fn answer(stream: UnixStream, state: &State, beat: &Beat) -> std::io::Result<()> {
    let mut line = String::new();
    BufReader::new(&stream).read_line(&mut line)?;
    let words: Vec<&str> = line.split_whitespace().collect();
    let result = handle(&words, state, beat);
    let mut out = stream;
    match result {
        Ok(body) => {
            out.write_all(b"ok\n")?;
            out.write_all(&body)?;
        }
        Err(e) => {
            out.write_all(b"error\n")?;
            out.write_all(e.as_bytes())?;
        }
    }
    out.flush()
}

fn handle(words: &[&str], state: &State, beat: &Beat) -> Result<Vec<u8>, String> {
    match words {
        ["show", what, rest @ ..] => {
            let json = rest.contains(&"json");
            let config = state.config.lock().unwrap_or_else(|e| e.into_inner()).clone();
            let (totals, workers) = fresh_totals(state, &config);
            let text = match *what {
                "tunnels" => show_tunnels(&config, state, &totals, json),
                "counters" => show_counters(&totals, state.kernel.as_ref(), json),
                "runtime" => show_runtime(&totals, &workers, json),
                "pfcp" => show_pfcp(state, json)?,
                other => {
                    return Err(format!(
                        "unknown: show {other} (tunnels, counters, runtime, pfcp)"
                    ))
                }
            };
            Ok(text.into_bytes())
        }
        ["reload"] => {
            let (tx, rx) = mpsc::channel();
            state
                .reload
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .send(tx)
                .map_err(|_| "the daemon is stopping".to_string())?;
            let _ = state.main_wake.notify();
            let until = Instant::now() + Duration::from_secs(30);
            let answered = loop {
                beat.beat();
                match rx.recv_timeout(liveness::WAKE) {
                    Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() < until => {}
                    r => break r.map_err(|_| "no answer from the daemon".to_string()),
                }
            };
            answered??;
            Ok(b"reloaded\n".to_vec())
        }
        ["trace", count, timeout_ms] => {
            let count: usize = count.parse().map_err(|_| format!("bad count {count}"))?;
            let timeout: u64 = timeout_ms
                .parse()
                .map_err(|_| format!("bad timeout {timeout_ms}"))?;
            let tracer = &state.shared.tracer;
            tracer.start(count);
            let until = Instant::now() + Duration::from_millis(timeout);
            while !tracer.done() && Instant::now() < until {
                beat.beat();
                std::thread::sleep(Duration::from_millis(5));
            }
            Ok(tracer.finish())
        }
        _ => Err(format!(
            "unknown request {:?} (show tunnels|counters|runtime|pfcp [json], reload, trace COUNT TIMEOUT_MS)",
            words.join(" ")
        )),
    }
}

/// `show pfcp`: the N4 side of a UPF (its socket, associations, sessions
/// and every counter of the PFCP node).
fn show_pfcp(state: &State, json: bool) -> Result<String, String> {
    let status = state
        .shared
        .upf
        .status
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
        .ok_or_else(|| "no [pfcp] in the config: tep is not a UPF".to_string())?;
    if json {
        let counters: serde_json::Map<String, serde_json::Value> = status
            .counters
            .iter()
            .map(|(k, v)| (k.to_string(), (*v).into()))
            .collect();
        return Ok(serde_json::json!({
            "listen": status.listen,
            "sessions": status.sessions,
            "associations": status.associations,
            "counters": counters,
        })
        .to_string()
            + "\n");
    }
    let mut out = match status.listen {
        Some(a) => format!("listen        {a}\n"),
        None => String::new(),
    };
    out += &format!("sessions      {}\n", status.sessions);
    out += &format!(
        "associations  {}\n",
        if status.associations.is_empty() {
            "none".to_string()
        } else {
            status.associations.join(", ")
        }
    );
    out += "counters:\n";
    for (k, v) in status.counters.iter().filter(|(_, v)| *v > 0) {
        out += &format!("  {k:<24} {v:>14}\n");
    }
    Ok(out)
}

/// Asks every worker to publish, waits (briefly) until they have, and sums.
fn fresh_totals(state: &State, config: &Config) -> (Totals, Vec<WorkerSnapshot>) {
    let shared = &state.shared;
    let target = shared.refresh.fetch_add(1, Ordering::AcqRel) + 1;
    let wakes = state
        .wakes
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    for w in &wakes {
        let _ = w.notify();
    }
    let until = Instant::now() + Duration::from_millis(500);
    let mut snaps = shared.snapshots.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let ready = snaps.len() >= wakes.len() && snaps.iter().all(|s| s.generation >= target);
        let left = until.saturating_duration_since(Instant::now());
        if ready || left.is_zero() {
            break;
        }
        snaps = shared
            .published
            .wait_timeout(snaps, left)
            .map(|(g, _)| g)
            .unwrap_or_else(|e| e.into_inner().0);
    }
    (shared.totals(&snaps, config), snaps.clone())
}

/// What the checksum mode means where tep sends: on a socket the kernel
/// writes the outer UDP header; in gateway mode tep writes every byte;
/// through host mode's uplink tep writes the frame, and the kernel's
/// segmenter the checksum of each segment of a super-packet.
fn mode_in_effect(m: ChecksumMode, io: &IoInfo) -> &'static str {
    if io.uplink.is_some() {
        return match m {
            ChecksumMode::Zero => "zero (tep writes none; super-packets leave whole through the uplink)",
            ChecksumMode::Full => "full (tep, SIMD; a super-packet's segments by the kernel's segmenter)",
            ChecksumMode::Lco => "lco (tep, from the inner checksum; a super-packet's segments by the kernel's segmenter)",
            ChecksumMode::Offload => "offload (the kernel, asked through the uplink's virtio-net header)",
            ChecksumMode::Remote => "remote (inner left to the peer; outer by the kernel)",
        };
    }
    if io.gateway.is_some() {
        return match m {
            ChecksumMode::Zero => "zero (tep writes none)",
            ChecksumMode::Full => "full (tep, SIMD)",
            ChecksumMode::Lco => "lco (tep, from the inner checksum)",
            ChecksumMode::Offload => {
                "offload: computed by tep (AF_XDP passes no checksum request), counted as checksum_in_software"
            }
            ChecksumMode::Remote => "remote (inner left to the peer; outer by tep)",
        };
    }
    match m {
        ChecksumMode::Zero => "zero (socket sends none; no UDP GSO without checksums)",
        ChecksumMode::Full | ChecksumMode::Lco | ChecksumMode::Offload => {
            "kernel (socket; device offload where it can)"
        }
        ChecksumMode::Remote => "remote (inner left to the peer; outer by the kernel)",
    }
}

#[derive(Serialize)]
struct TunnelRow<'a> {
    name: &'a str,
    kind: &'a str,
    local: String,
    remote: String,
    id: String,
    checksum: &'a str,
    checksum_in_effect: &'a str,
    remote_checksum_rx: bool,
    tx_packets: u64,
    tx_bytes: u64,
    rx_packets: u64,
    rx_bytes: u64,
    /// Reason → packets, for the drops once the tunnel was known.
    drops: std::collections::BTreeMap<&'static str, u64>,
}

fn tunnel_id(t: &tep_dataplane::config::TunnelConfig) -> String {
    use tep_dataplane::TunnelKind as K;
    match t.kind {
        K::Vxlan | K::Geneve => format!("vni {}", t.vni),
        K::Gtpu => format!("teid {:#x}/{:#x}", t.teid, t.local_teid),
        _ => t
            .key
            .map_or_else(|| "-".to_string(), |k| format!("key {k}")),
    }
}

fn show_tunnels(config: &Config, state: &State, totals: &Totals, json: bool) -> String {
    let io = state.io.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let rows: Vec<TunnelRow<'_>> = config
        .tunnels
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let s = totals.tunnels.get(i).copied().unwrap_or_default();
            TunnelRow {
                name: &t.name,
                kind: t.kind.name(),
                local: format!("{}", std::net::SocketAddr::new(t.local, t.local_port)),
                remote: format!("{}", std::net::SocketAddr::new(t.remote, t.remote_port)),
                id: tunnel_id(t),
                checksum: t.checksum.name(),
                checksum_in_effect: mode_in_effect(t.checksum, &io),
                remote_checksum_rx: t.remote_checksum_rx,
                tx_packets: s.tx_packets,
                tx_bytes: s.tx_bytes,
                rx_packets: s.rx_packets,
                rx_bytes: s.rx_bytes,
                drops: s.drops_by_reason().map(|(r, n)| (r.name(), n)).collect(),
            }
        })
        .collect();
    if json {
        return serde_json::json!({ "tunnels": rows, "io": io }).to_string() + "\n";
    }
    let mut out = String::new();
    out += &format!(
        "{:<12} {:<10} {:<24} {:<24} {:<18} {:<8} {:>10} {:>12} {:>10} {:>12} {:>8}\n",
        "NAME",
        "KIND",
        "LOCAL",
        "REMOTE",
        "ID",
        "CHECKSUM",
        "TX-PKTS",
        "TX-BYTES",
        "RX-PKTS",
        "RX-BYTES",
        "DROPS"
    );
    for r in &rows {
        out += &format!(
            "{:<12} {:<10} {:<24} {:<24} {:<18} {:<8} {:>10} {:>12} {:>10} {:>12} {:>8}\n",
            r.name,
            r.kind,
            r.local,
            r.remote,
            r.id,
            r.checksum,
            r.tx_packets,
            r.tx_bytes,
            r.rx_packets,
            r.rx_bytes,
            r.drops.values().sum::<u64>()
        );
        for (reason, n) in &r.drops {
            out += &format!("  drop {reason:<30} {n:>10}\n");
        }
    }
    out += "\nchecksum in effect:\n";
    for r in &rows {
        out += &format!(
            "  {:<12} {}{}\n",
            r.name,
            r.checksum_in_effect,
            if r.remote_checksum_rx {
                "; accepts RCO"
            } else {
                ""
            }
        );
    }
    out += &format!("\nworkers: {}", io.workers);
    if io.busy_poll_us > 0 {
        out += &format!(", busy polling {} µs", io.busy_poll_us);
    }
    out += &match io.adaptive_poll_us {
        0 => ", sleeping when idle\n".to_string(),
        us => format!(", polling while packets come within {us} µs\n"),
    };
    if let Some(g) = &io.gateway {
        for i in &g.interfaces {
            out += &format!(
                "interface {} ({}): index {}, mac {}, mtu {}, xdp {}\n",
                i.name, i.role, i.ifindex, i.mac, i.mtu, i.xdp_mode
            );
        }
        out += &format!(
            "AF_XDP: {} copy, rings rx {} tx {} fill {} completion {}; path MTU {}\n",
            if g.zero_copy { "zero" } else { "kernel" },
            g.rings.rx,
            g.rings.tx,
            g.rings.fill,
            g.rings.completion,
            g.path_mtu
        );
    }
    for d in &io.devices {
        out += &format!(
            "device {} ({}): mtu {}, offloads {}\n",
            d.name, d.kind, d.mtu, d.offloads
        );
    }
    for s in &io.sockets {
        out += &format!(
            "socket {}: gso {}, gro {}, zero checksum tx {}, rx {}\n",
            s.local,
            on(s.gso),
            on(s.gro),
            on(s.zero_checksum_tx),
            on(s.zero_checksum_rx)
        );
        out += &match s.source_ports.as_slice() {
            [] => format!("  sends from {}\n", s.local.port()),
            ports => format!(
                "  sends from {} source ports: {}\n",
                ports.len(),
                ports
                    .iter()
                    .map(u16::to_string)
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
        };
    }
    out
}

fn on(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}

fn show_counters(t: &Totals, kernel: &dyn KernelCounters, json: bool) -> String {
    let edges = t.edges();
    let drops = t.drops();
    if json {
        let pipeline: serde_json::Map<String, serde_json::Value> = edges
            .iter()
            .map(|(k, v)| (k.to_string(), (*v).into()))
            .collect();
        let io: serde_json::Map<String, serde_json::Value> =
            t.io.named()
                .iter()
                .map(|(k, v)| (k.to_string(), (*v).into()))
                .collect();
        let drops: Vec<_> = drops
            .iter()
            .map(|(n, r, c)| serde_json::json!({"node": n, "reason": r.name(), "packets": c}))
            .collect();
        let kernel: serde_json::Map<String, serde_json::Value> = kernel
            .read()
            .iter()
            .map(|(k, v)| (k.to_string(), (*v).into()))
            .collect();
        return serde_json::json!({
            "pipeline": pipeline,
            "io": io,
            "kernel": kernel,
            "drops": drops,
            "drops_total": t.drops_by_reason().iter().map(|(_, c)| c).sum::<u64>() + t.io.drops(),
        })
        .to_string()
            + "\n";
    }
    let mut out = String::from("pipeline:\n");
    for (k, v) in edges {
        out += &format!("  {k:<24} {v:>14}\n");
    }
    out += "io:\n";
    for (k, v) in t.io.named() {
        out += &format!("  {k:<24} {v:>14}\n");
    }
    out += &format!("{}:\n", kernel.about());
    for (k, v) in kernel.read() {
        out += &format!("  {k:<24} {v:>14}\n");
    }
    out += "drops (node, reason):\n";
    if drops.is_empty() {
        out += "  none\n";
    }
    for (n, r, c) in drops {
        out += &format!("  {n:<24} {:<28} {c:>10}\n", r.name());
    }
    out
}

fn show_runtime(t: &Totals, workers: &[WorkerSnapshot], json: bool) -> String {
    if json {
        let nodes_json = |nodes: &[NodeStats]| -> Vec<serde_json::Value> {
            nodes
                .iter()
                .filter(|n| n.calls > 0)
                .map(|n| {
                    serde_json::json!({
                        "name": n.name, "calls": n.calls, "vectors": n.vectors,
                        "packets": n.packets, "clocks": n.ticks,
                        "clocks_per_packet": n.ticks_per_packet(),
                        "vectors_per_call": n.packets_per_call(),
                        "drops": n.drops_total(),
                    })
                })
                .collect()
        };
        let per_worker: Vec<_> = workers
            .iter()
            .enumerate()
            .map(|(i, w)| serde_json::json!({ "worker": i, "nodes": nodes_json(&w.nodes) }))
            .collect();
        return serde_json::json!({
            "nodes": nodes_json(&t.nodes),
            "workers": per_worker,
            "io": t.io,
        })
        .to_string()
            + "\n";
    }
    let mut out = String::new();
    // Per worker as VPP prints per thread, when there is more than one;
    // these count since the last (re)load.
    if workers.len() > 1 {
        for (i, w) in workers.iter().enumerate() {
            out += &format!("Worker {i} (tep-worker-{i}), since the last (re)load:\n");
            out += &render_report(&w.nodes, "clocks");
            out += "\n";
        }
        out += "All workers, since start:\n";
    }
    out += &render_report(&t.nodes, "clocks");
    out += &format!(
        "\nsuper-packets: {} read from the device (TSO/USO, segmented by tep), {} written (GRO)\n\
         UDP: {} GSO trains of {} messages sent, {} GRO trains of {} buffers received, {} batch syscalls\n",
        t.io.get(IoEvent::DeviceRxSuper),
        t.io.get(IoEvent::DeviceTxSuper),
        t.io.get(IoEvent::UdpTxTrains),
        t.io.get(IoEvent::UdpTx),
        t.io.get(IoEvent::UdpRxTrains),
        t.io.get(IoEvent::UdpRx),
        t.io.get(IoEvent::UdpSyscalls)
    );
    out
}

/// Sends one request and returns the body, or the daemon's error.
pub fn request(path: &Path, line: &str, timeout: Duration) -> Result<Vec<u8>, String> {
    let mut s = UnixStream::connect(path).map_err(|e| {
        format!(
            "cannot reach tep at {}: {e} (is `tep run` running? is this the socket of its host.control?)",
            path.display()
        )
    })?;
    let _ = s.set_read_timeout(Some(timeout));
    s.write_all(format!("{line}\n").as_bytes())
        .map_err(|e| e.to_string())?;
    let mut all = Vec::new();
    s.read_to_end(&mut all).map_err(|e| e.to_string())?;
    if let Some(body) = all.strip_prefix(b"ok\n") {
        Ok(body.to_vec())
    } else if let Some(msg) = all.strip_prefix(b"error\n") {
        Err(String::from_utf8_lossy(msg).into_owned())
    } else {
        Err("the daemon closed the connection without an answer".to_string())
    }
}
