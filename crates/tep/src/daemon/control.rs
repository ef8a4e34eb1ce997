//! The control socket: `tep show`, `tep reload` and `tep trace` talk to the
//! daemon over a Unix stream socket (mode 0600: root's only, like the
//! devices it controls; with a `control_group`, 0660 and that group's
//! too). Each client's credentials are checked as well (SO_PEERCRED).
//!
//! Protocol: the client writes one line (`show tunnels json`, `reload`,
//! `trace 100 5000`, `fdb show dev blue`; at most 4 KiB, within 5 s), the daemon answers
//! `ok\n` or `error\n`, then the body (text, JSON, or pcapng bytes for a
//! trace), and closes.

use super::clients::{self, refusals, Refusal, CONTROL as CLIENTS};
use super::liveness;
use super::overlay;
use super::state::{IoInfo, KernelCounters, State};
use super::stats::{IoEvent, Totals, WorkerSnapshot};
use super::trace::Tracer;
use serde::Serialize;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};
use tep_config::{ChecksumMode, Config};
use tep_dataplane::{render_report, NodeStats};

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
    access: Access,
}

/// Who may use the socket. The file's mode already keeps others out;
/// this holds even if the mode or the directory is looser than meant.
#[derive(Clone, Copy, Debug)]
struct Access {
    /// The socket file's owner (root, or whoever started tep).
    owner: u32,
    /// `control_group`'s id.
    group: Option<u32>,
}

impl Access {
    fn allows(self, peer: &tep_sys::unix::Peer) -> bool {
        peer.uid == 0 || peer.uid == self.owner || self.group.is_some_and(|g| peer.in_group(g))
    }
}

/// A request line, at most: the longest valid one is a few dozen bytes.
const MAX_LINE: usize = 4096;

/// `trace COUNT`, at most.
pub const MAX_TRACE_COUNT: usize = 10_000;

/// `trace … TIMEOUT_MS`, at most: a trace holds a client thread.
pub const MAX_TRACE_TIMEOUT_MS: u64 = 60_000;

/// Binds `path` (the config's `field`, named in errors), mode 0600, or
/// 0660 root:`group` with a `control_group` (`field` + `_group`).
pub fn listen(field: &str, path: &str, group: Option<&str>) -> Result<ControlListener, String> {
    let gid = group
        .map(|name| match tep_sys::privilege::group(name) {
            Ok(Some(gid)) => Ok((gid, name)),
            Ok(None) => Err(format!("{field}_group: no group \"{name}\"")),
            Err(e) => Err(format!("{field}_group: cannot look up \"{name}\": {e}")),
        })
        .transpose()?;
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
    // Born 0600: opened to the group only once it is the group's.
    if let Some((gid, name)) = gid {
        use std::os::unix::fs::PermissionsExt;
        std::os::unix::fs::chown(p, None, Some(gid))
            .and_then(|()| std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o660)))
            .map_err(|e| format!("{field}_group: cannot give {path} to group \"{name}\": {e}"))?;
    }
    let owner = std::os::unix::fs::MetadataExt::uid(
        &std::fs::metadata(p).map_err(|e| format!("{field}: {path}: {e}"))?,
    );
    clients::wake_periodically(&listener)
        .map_err(|e| format!("{field}: cannot listen on {path}: {e}"))?;
    Ok(ControlListener {
        listener,
        path: p.to_path_buf(),
        access: Access {
            owner,
            group: gid.map(|(gid, _)| gid),
        },
    })
}

impl ControlListener {
    /// Answers requests on a thread of its own, each client on one of its
    /// own (a few at a time): a stalled client or a running trace holds
    /// up neither `tep reload` nor other commands.
    pub fn serve(self, state: Arc<State>) -> Result<ControlServer, String> {
        let (listener, access) = (self.listener, self.access);
        let shared = state.shared.clone();
        // The accepting thread serves no client itself: it beats once per
        // accept or ACCEPT_WAKE, whatever its clients do.
        liveness::spawn(&shared.liveness, "control", PATIENCE, move |beat| {
            clients::accept_loop(
                beat,
                &CLIENTS,
                "tep-control-c",
                || listener.accept().map(|(s, _)| s),
                move |s| answer(s, access, &state),
            )
        })
        .map_err(|e| format!("cannot start the control thread: {e}"))?;
        Ok(ControlServer { path: self.path })
    }
}

/// How long the accepting thread may go without a beat (it beats every
/// [`clients::ACCEPT_WAKE`] at least) before the watchdog counts it stuck.
const PATIENCE: Duration = Duration::from_secs(5);

/// Refused peers are logged at most this often (the count says the rest).
const PEER_LOG_EVERY: Duration = Duration::from_secs(10);

fn refuse_peer(peer: &tep_sys::unix::Peer) {
    static LAST: Mutex<Option<Instant>> = Mutex::new(None);
    CLIENTS.refuse(Refusal::Peer);
    let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
    if last.is_none_or(|t| t.elapsed() >= PEER_LOG_EVERY) {
        *last = Some(Instant::now());
        tracing::warn!(
            pid = peer.pid,
            uid = peer.uid,
            gid = peer.gid,
            "control socket: refused a client that is neither root, the socket's owner nor in its control_group (counted in control_requests_refused{{reason=\"peer\"}}; logged once per {}s)",
            PEER_LOG_EVERY.as_secs()
        );
    }
}

fn answer(mut stream: UnixStream, access: Access, state: &State) {
    match tep_sys::unix::peer(&stream) {
        Ok(peer) if access.allows(&peer) => {}
        Ok(peer) => {
            refuse_peer(&peer);
            // Said without reading a byte of the request.
            let deadline = Instant::now() + clients::DEADLINE;
            let said = format!(
                "permission denied: uid {} is not root and not in the socket's control_group",
                peer.uid
            );
            let _ = clients::write_by(&mut stream, &[b"error\n", said.as_bytes()], deadline);
            return;
        }
        Err(e) => return tracing::debug!("control client: credentials: {e}"),
    }
    let deadline = Instant::now() + clients::DEADLINE;
    let result = match clients::read_request(&mut stream, MAX_LINE, deadline, line_end) {
        Ok(line) => match std::str::from_utf8(&line) {
            Ok(line) => {
                let words: Vec<&str> = line.split_whitespace().collect();
                handle(&words, state)
            }
            Err(_) => Err(refused(
                Refusal::BadRequest,
                "the request is not UTF-8".into(),
            )),
        },
        Err(e) => match e.refusal() {
            Some(r @ Refusal::TooLong) => Err(refused(
                r,
                format!("request line longer than {MAX_LINE} bytes"),
            )),
            Some(r) => return CLIENTS.refuse(r),
            None => return,
        },
    };
    let deadline = Instant::now() + clients::DEADLINE;
    let sent = match &result {
        Ok(body) => clients::write_by(&mut stream, &[b"ok\n", body], deadline),
        Err(e) => clients::write_by(&mut stream, &[b"error\n", e.as_bytes()], deadline),
    };
    clients::count_write(&CLIENTS, sent);
}

fn line_end(buf: &[u8], from: usize) -> Option<usize> {
    buf[from..]
        .iter()
        .position(|&b| b == b'\n')
        .map(|i| from + i)
}

/// Counts `r` and returns `message`, the client's answer.
fn refused(r: Refusal, message: String) -> String {
    CLIENTS.refuse(r);
    message
}

fn handle(words: &[&str], state: &State) -> Result<Vec<u8>, String> {
    match words {
        ["show", "networks", rest @ ..] => {
            let json = match rest {
                [] => false,
                ["json"] => true,
                _ => {
                    let e = format!("show networks: unexpected {:?} (show networks [json])", rest[0]);
                    return Err(refused(Refusal::BadRequest, e));
                }
            };
            let o = overlay::current(state)?;
            let config = state.config.lock().unwrap_or_else(|e| e.into_inner()).clone();
            Ok(overlay::show_networks(&o, &config, json).into_bytes())
        }
        [table, ..] if overlay::TABLES.contains(table) => {
            let req = overlay::parse(words).map_err(|e| refused(Refusal::BadRequest, e))?;
            overlay::apply(&req, &*overlay::current(state)?).map(String::into_bytes)
        }
        ["show", what, rest @ ..] => {
            let json = rest.contains(&"json");
            let config = state.config.lock().unwrap_or_else(|e| e.into_inner()).clone();
            let (totals, workers) = fresh_totals(state, &config);
            let text = match *what {
                "tunnels" => show_tunnels(&config, state, &totals, json),
                "counters" => show_counters(&totals, state.kernel.as_ref(), json),
                "runtime" => show_runtime(&totals, &workers, json),
                "pfcp" => show_pfcp(state, json)?,
                "evpn" => match state.evpn.get() {
                    Some(v) => super::evpn::show(&v.lock().unwrap_or_else(|e| e.into_inner()), json),
                    None => return Err("no EVPN network (control = \"evpn\") in this config".to_string()),
                },
                other => {
                    return Err(refused(
                        Refusal::BadRequest,
                        format!("unknown: show {other} (tunnels, counters, runtime, pfcp, networks, evpn)"),
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
            rx.recv_timeout(Duration::from_secs(30))
                .map_err(|_| "no answer from the daemon".to_string())??;
            Ok(b"reloaded\n".to_vec())
        }
        ["trace", count, timeout_ms] => {
            let (count, timeout) =
                trace_args(count, timeout_ms).map_err(|e| refused(Refusal::BadRequest, e))?;
            trace(&state.shared.tracer, count, timeout)
        }
        _ => Err(refused(
            Refusal::BadRequest,
            format!(
                "unknown request {:?} (show tunnels|counters|runtime|pfcp|networks [json], reload, trace COUNT TIMEOUT_MS, fdb|peer|neigh|route show|add|replace|del …)",
                words.join(" ")
            ),
        )),
    }
}

/// `trace COUNT TIMEOUT_MS`'s arguments, within their caps: over them the
/// request is refused saying so, rather than clamped, as a capture
/// silently cut short would look like a quiet link. (The byte cap, which
/// no count foresees, is counted as `trace_cut` and logged.)
fn trace_args(count: &str, timeout_ms: &str) -> Result<(usize, Duration), String> {
    let count: usize = count
        .parse()
        .map_err(|_| format!("trace: bad count {count:?}"))?;
    let timeout: u64 = timeout_ms
        .parse()
        .map_err(|_| format!("trace: bad timeout {timeout_ms:?}"))?;
    if !(1..=MAX_TRACE_COUNT).contains(&count) {
        return Err(format!(
            "trace: count {count} is out of range (1..={MAX_TRACE_COUNT}): the capture is held in the daemon's memory"
        ));
    }
    if timeout > MAX_TRACE_TIMEOUT_MS {
        return Err(format!(
            "trace: timeout {timeout} ms is over the cap of {MAX_TRACE_TIMEOUT_MS} ms"
        ));
    }
    Ok((count, Duration::from_millis(timeout)))
}

/// Captures `count` packets or for `timeout`, whichever comes first; one
/// trace at a time (a second would take the first one's packets).
fn trace(tracer: &Tracer, count: usize, timeout: Duration) -> Result<Vec<u8>, String> {
    static RUNNING: AtomicBool = AtomicBool::new(false);
    if RUNNING.swap(true, Ordering::AcqRel) {
        return Err(refused(
            Refusal::TraceRunning,
            "trace: another trace is running; try again when it ends".into(),
        ));
    }
    tracer.start(count);
    let until = Instant::now() + timeout;
    while !tracer.done() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(5));
    }
    let capture = tracer.finish();
    let cut = tracer.cut();
    RUNNING.store(false, Ordering::Release);
    if cut {
        CLIENTS.refuse(Refusal::TraceCut);
    }
    Ok(capture)
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
            "gtpu_peers": status.gtpu_peers,
            "gtpu_paths_failed": status.gtpu_paths_failed,
            "failed_paths": status.failed_paths,
            "gbr": status.gbr,
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
    out += &format!("gtpu peers    {}", status.gtpu_peers);
    if status.gtpu_paths_failed > 0 {
        out += &format!(
            " ({} failed: {}{})",
            status.gtpu_paths_failed,
            status.failed_paths.join(", "),
            if status.failed_paths.len() < status.gtpu_paths_failed {
                ", …"
            } else {
                ""
            }
        );
    }
    out += "\n";
    let g = status.gbr;
    out += &format!(
        "gbr           {} QERs, {} kbit/s up, {} kbit/s down (recorded; admission is the SMF's)\n",
        g.qers, g.uplink_kbps, g.downlink_kbps
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

fn tunnel_id(t: &tep_config::TunnelConfig) -> String {
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
    let rows = tunnel_rows(config, totals, &io);
    if json {
        return serde_json::json!({ "tunnels": rows, "io": io }).to_string() + "\n";
    }
    tunnel_table(&rows) + &io_text(&io)
}

fn tunnel_rows<'a>(config: &'a Config, totals: &Totals, io: &IoInfo) -> Vec<TunnelRow<'a>> {
    config
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
                checksum_in_effect: mode_in_effect(t.checksum, io),
                remote_checksum_rx: t.remote_checksum_rx,
                tx_packets: s.tx_packets,
                tx_bytes: s.tx_bytes,
                rx_packets: s.rx_packets,
                rx_bytes: s.rx_bytes,
                drops: s.drops_by_reason().map(|(r, n)| (r.name(), n)).collect(),
            }
        })
        .collect()
}

/// `show tunnels`' table: each tunnel's traffic and drops, and its
/// checksums in effect.
fn tunnel_table(rows: &[TunnelRow<'_>]) -> String {
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
    for r in rows {
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
    for r in rows {
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
    out
}

/// `show tunnels`' I/O: workers, interfaces, devices, sockets.
fn io_text(io: &IoInfo) -> String {
    let mut out = format!("\nworkers: {}", io.workers);
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
            "clients_refused": refusals()
                .into_iter()
                .map(|(listener, counts)| {
                    let counts: serde_json::Map<String, serde_json::Value> =
                        counts.into_iter().map(|(k, v)| (k.to_string(), v.into())).collect();
                    (listener.to_string(), counts.into())
                })
                .collect::<serde_json::Map<_, _>>(),
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
    out += "clients refused (listener, reason):\n";
    for (listener, counts) in refusals() {
        for (reason, c) in counts {
            out += &format!("  {listener:<24} {reason:<28} {c:>10}\n");
        }
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
            .map(|(i, w)| {
                serde_json::json!({
                    "worker": i,
                    "nodes": nodes_json(&w.nodes),
                    "io": w.io,
                    "longest_gap_ns": w.longest_gap_ns,
                })
            })
            .collect();
        return serde_json::json!({
            "nodes": nodes_json(&t.nodes),
            "workers": per_worker,
            "io": t.io,
        })
        .to_string()
            + "\n";
    }
    let mut out = workers_loop(workers);
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

/// Gateway mode: each worker's share and loop, one line each (host mode
/// counts no rounds: nothing).
fn workers_loop(workers: &[WorkerSnapshot]) -> String {
    let mut out = String::new();
    for (i, w) in workers.iter().enumerate() {
        let io = &w.io;
        let rounds = io.get(IoEvent::Rounds);
        if rounds == 0 {
            continue;
        }
        let rx = io.get(IoEvent::UnderlayRx) + io.get(IoEvent::InnerRx);
        let tx = io.get(IoEvent::UnderlayTx) + io.get(IoEvent::InnerTx) + io.get(IoEvent::KernelTx);
        let vectors = io.get(IoEvent::Vectors);
        out += &format!(
            "worker {i}: {rx} frames in, {tx} out, {vectors} vectors ({:.1} frames each); \
             {rounds} rounds, {:.1} % busy, {:.3} s at work, {} sleeps; \
             {} stalls > 1 ms, longest gap {:.1} µs since the last show\n",
            rx as f64 / vectors.max(1) as f64,
            io.get(IoEvent::BusyRounds) as f64 * 100.0 / rounds as f64,
            io.get(IoEvent::BusyNs) as f64 / 1e9,
            io.get(IoEvent::Sleeps),
            io.get(IoEvent::LoopStalls),
            w.longest_gap_ns as f64 / 1e3,
        );
    }
    if !out.is_empty() {
        out += "\n";
    }
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
    // A daemon that refuses a peer answers and closes without reading: the
    // write then fails (EPIPE) with the answer already waiting to be read.
    let written = s.write_all(format!("{line}\n").as_bytes());
    let mut all = Vec::new();
    match s.read_to_end(&mut all) {
        // The daemon answers a request it refuses without reading it
        // whole (an over-long line, a peer it does not let in), and a
        // close with unread bytes resets: the answer came before.
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset && !all.is_empty() => {}
        r => {
            r.map_err(|e| e.to_string())?;
        }
    }
    if all.is_empty() {
        written.map_err(|e| e.to_string())?;
    }
    if let Some(body) = all.strip_prefix(b"ok\n") {
        Ok(body.to_vec())
    } else if let Some(msg) = all.strip_prefix(b"error\n") {
        Err(String::from_utf8_lossy(msg).into_owned())
    } else {
        Err("the daemon closed the connection without an answer".to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_gateway_worker_gets_its_line() {
        let worker = |rx: u64, gap_ns: u64| {
            let mut w = WorkerSnapshot {
                io: crate::daemon::stats::IoCounters::new(crate::daemon::stats::IoMode::Gateway),
                longest_gap_ns: gap_ns,
                ..WorkerSnapshot::default()
            };
            w.io.count(IoEvent::UnderlayRx, rx);
            w.io.count(IoEvent::InnerTx, rx);
            w.io.count(IoEvent::Vectors, 4);
            w.io.count(IoEvent::Rounds, 10);
            w.io.count(IoEvent::BusyRounds, 4);
            w.io.count(IoEvent::LoopStalls, 2);
            w
        };
        let text = workers_loop(&[worker(100, 1_500_000), worker(40, 0)]);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("worker 0: 100 frames in, 100 out, 4 vectors (25.0 frames each); 10 rounds, 40.0 % busy"), "{text}");
        assert!(
            lines[0].ends_with("2 stalls > 1 ms, longest gap 1500.0 µs since the last show"),
            "{text}"
        );
        assert!(lines[1].starts_with("worker 1: 40 frames in"), "{text}");
        // Host mode's workers count no rounds.
        assert!(workers_loop(&[WorkerSnapshot::default()]).is_empty());
    }

    #[test]
    fn trace_arguments_over_their_caps_are_refused_saying_so() {
        assert_eq!(trace_args("100", "5000"), Ok((100, Duration::from_secs(5))));
        assert_eq!(
            trace_args("10000", "60000"),
            Ok((MAX_TRACE_COUNT, Duration::from_millis(MAX_TRACE_TIMEOUT_MS)))
        );
        for (count, timeout, want) in [
            ("10001", "1", "count 10001 is out of range (1..=10000)"),
            ("0", "1", "count 0 is out of range"),
            ("-1", "1", "bad count \"-1\""),
            ("1", "60001", "timeout 60001 ms is over the cap of 60000 ms"),
            ("1", "x", "bad timeout \"x\""),
        ] {
            let e = trace_args(count, timeout).unwrap_err();
            assert!(e.contains(want), "{e}");
        }
    }

    #[test]
    fn root_the_owner_and_the_group_are_let_in() {
        let peer = |uid, gid, groups: &[u32]| tep_sys::unix::Peer {
            pid: 1,
            uid,
            gid,
            groups: groups.to_vec(),
        };
        let a = Access {
            owner: 0,
            group: Some(100),
        };
        assert!(a.allows(&peer(0, 0, &[])));
        assert!(a.allows(&peer(1000, 100, &[])));
        assert!(a.allows(&peer(1000, 1000, &[27, 100])));
        assert!(!a.allows(&peer(1000, 1000, &[27])));
        let owned = Access {
            owner: 998,
            group: None,
        };
        assert!(owned.allows(&peer(998, 998, &[])));
        assert!(!owned.allows(&peer(1000, 100, &[100])));
    }
}
