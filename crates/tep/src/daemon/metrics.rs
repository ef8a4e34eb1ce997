//! Prometheus metrics at `http://<metrics address>/metrics`, in the
//! OpenMetrics text format of prometheus-client.
//!
//! The registry is built from the workers' latest snapshots at each scrape
//! (scrapes are rare, and this keeps the workers free of shared atomics).
//! The listener is a small blocking HTTP/1.1 responder: one GET route does
//! not justify an HTTP stack, and what an HTTP crate would add for an
//! untrusted client (a cap on the head, a deadline, a bound on
//! connections) is a few lines here ([`super::clients`]), shared with the
//! control socket, where a crate would bring its own threads and buffers
//! to audit against the same bounds.

use super::clients::{self, refusals, Refusal, METRICS as CLIENTS};
use super::evpn::NetView;
use super::liveness;
use super::state::{KernelCounters, PfcpStatus, State};
use super::stats::Totals;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tep_config::Config;
use tep_dataplane::overlay::Overlay;

type Labels = Vec<(String, String)>;

fn family(registry: &mut Registry, name: &str, help: &str) -> Family<Labels, Counter> {
    let f = Family::<Labels, Counter>::default();
    registry.register(name, help, f.clone());
    f
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Adds `v` to `f`'s counter with these labels.
fn add(f: &Family<Labels, Counter>, pairs: &[(&str, &str)], v: u64) {
    f.get_or_create(&labels(pairs)).inc_by(v);
}

fn gauge(registry: &mut Registry, name: &str, help: &str, v: usize) {
    let g = Gauge::<i64>::default();
    g.set(v as i64);
    registry.register(name, help, g);
}

/// The metrics text for `config`, the counts since start `t` and the
/// number of workers.
pub fn render(
    config: &Config,
    t: &Totals,
    kernel: &dyn KernelCounters,
    worker_count: usize,
    pfcp: Option<&PfcpStatus>,
    overlay: Option<&Overlay>,
    evpn: &[NetView],
) -> String {
    let mut r = Registry::with_prefix("tep");
    if let Some(o) = overlay {
        overlay_metrics(&mut r, o);
    }
    if !evpn.is_empty() {
        evpn_metrics(&mut r, evpn);
    }
    tunnel_metrics(&mut r, config, t);
    io_metrics(&mut r, t, kernel);
    pipeline_metrics(&mut r, t);
    gauge(&mut r, "workers", "Worker threads", worker_count);
    if let Some(p) = pfcp {
        pfcp_metrics(&mut r, p);
    }
    for (listener, counts) in refusals() {
        let f = family(
            &mut r,
            &format!("{listener}_requests_refused"),
            &format!("Clients of the {listener} listener refused, by reason"),
        );
        for (reason, n) in counts {
            add(&f, &[("reason", reason)], n);
        }
    }
    let mut out = String::new();
    let _ = encode(&mut out, &r);
    out
}

/// Each tunnel's traffic and drops.
fn tunnel_metrics(r: &mut Registry, config: &Config, t: &Totals) {
    let tx_p = family(r, "tunnel_tx_packets", "Outer datagrams sent, by tunnel");
    let tx_b = family(r, "tunnel_tx_bytes", "UDP payload bytes sent, by tunnel");
    let rx_p = family(r, "tunnel_rx_packets", "Inner packets delivered, by tunnel");
    let rx_b = family(r, "tunnel_rx_bytes", "Inner bytes delivered, by tunnel");
    let drops = family(
        r,
        "tunnel_drops",
        "Packets of a tunnel the pipeline dropped once the tunnel was known, by tunnel and reason",
    );
    for (i, c) in config.tunnels.iter().enumerate() {
        let s = t.tunnels.get(i).copied().unwrap_or_default();
        let l = [("tunnel", c.name.as_str()), ("kind", c.kind.name())];
        add(&tx_p, &l, s.tx_packets);
        add(&tx_b, &l, s.tx_bytes);
        add(&rx_p, &l, s.rx_packets);
        add(&rx_b, &l, s.rx_bytes);
        for (reason, n) in s.drops_by_reason() {
            add(&drops, &[l[0], l[1], ("reason", reason.name())], n);
        }
    }
}

/// The kernel's counters of the run mode and the I/O layer's.
fn io_metrics(r: &mut Registry, t: &Totals, kernel: &dyn KernelCounters) {
    let (name, label) = kernel.metric();
    let kernel_family = family(r, name, kernel.about());
    for (counter, v) in kernel.read() {
        add(&kernel_family, &[(label, &counter)], v);
    }
    let io_drops = family(r, "io_drops", "Packets dropped by the I/O layer, by reason");
    let io_events = family(
        r,
        "io_events",
        "I/O layer events (reads, writes, trains, rings)",
    );
    for (name, v) in t.io.named() {
        match name.strip_prefix("drop_") {
            Some(reason) => add(&io_drops, &[("reason", reason)], v),
            None => add(&io_events, &[("event", &name)], v),
        }
    }
}

/// The pipeline's drops, edges and nodes.
fn pipeline_metrics(r: &mut Registry, t: &Totals) {
    let drops = family(
        r,
        "drops",
        "Packets dropped by the pipeline, by node and reason",
    );
    for (node, reason, c) in t.drops() {
        add(&drops, &[("node", node), ("reason", reason.name())], c);
    }
    let edges = family(r, "pipeline_packets", "Packets at the pipeline's edges");
    for (edge, v) in t.edges() {
        add(&edges, &[("edge", edge)], v);
    }
    let node_packets = family(r, "node_packets", "Packets through each node");
    let node_clocks = family(r, "node_clocks", "TSC clocks spent in each node");
    for n in t.nodes.iter().filter(|n| n.calls > 0) {
        add(&node_packets, &[("node", n.name)], n.packets);
        add(&node_clocks, &[("node", n.name)], n.ticks);
    }
}

/// Each network's tables and events, and the remote VTEPs known.
fn overlay_metrics(r: &mut Registry, o: &Overlay) {
    let gauges = |r: &mut Registry, name: &str, help: &str| {
        let f = Family::<Labels, Gauge>::default();
        r.register(name, help, f.clone());
        f
    };
    let entries = gauges(r, "overlay_fdb_entries", "FDB entries, by network");
    let neighbours = gauges(
        r,
        "overlay_neighbours",
        "ARP/ND suppression entries, by network",
    );
    let events = family(
        r,
        "overlay_events",
        "Overlay events by network: MACs learned, aged, moved, refused; frames flooded and their copies; ARP/ND answered; neighbours learned",
    );
    let all = o.stats();
    for (net, s) in o.networks().iter().zip(&all) {
        let l = [("network", net.name.as_str())];
        entries.get_or_create(&labels(&l)).set(s.entries as i64);
        neighbours
            .get_or_create(&labels(&l))
            .set(s.neighbours as i64);
        for (event, n) in super::overlay::events(s) {
            add(&events, &[l[0], ("event", event)], n);
        }
    }
    let vteps = o.vteps().len() as usize;
    gauge(
        r,
        "overlay_vteps",
        "Remote VTEPs known (learned or named)",
        vteps,
    );
}

/// The EVPN networks: what was taken from the kernel and refused.
fn evpn_metrics(r: &mut Registry, views: &[NetView]) {
    let events = family(
        r,
        "evpn_events",
        "EVPN by network: VTEPs and MACs taken from the kernel's FDB (BGP), moved, removed; entries ignored by reason; local MACs written for zebra and withdrawn; resyncs",
    );
    let vteps = Family::<Labels, Gauge>::default();
    r.register(
        "evpn_vteps",
        "Remote VTEPs taken from BGP (type-3 routes), by network",
        vteps.clone(),
    );
    let exported = Family::<Labels, Gauge>::default();
    r.register(
        "evpn_exported_macs",
        "Local MACs on the bridge for zebra to advertise, by network",
        exported.clone(),
    );
    for v in views {
        let l = [("network", v.name.as_str())];
        vteps.get_or_create(&labels(&l)).set(v.vteps.len() as i64);
        exported.get_or_create(&labels(&l)).set(v.exported as i64);
        for (event, n) in v.counters.rows() {
            add(&events, &[l[0], ("event", event)], n);
        }
    }
}

/// The UPF's N4 side.
fn pfcp_metrics(r: &mut Registry, p: &PfcpStatus) {
    let events = family(
        r,
        "pfcp_events",
        "PFCP (N4): messages handled, rejected by cause, discarded by reason, reports sent",
    );
    for &(name, v) in &p.counters {
        add(&events, &[("event", name)], v);
    }
    let sessions = "PFCP sessions established";
    gauge(r, "pfcp_sessions", sessions, p.sessions);
    let associations = p.associations.len();
    gauge(r, "pfcp_associations", "SMFs associated", associations);
    let peers = "GTP-U peers of the sessions, supervised by Echo Requests";
    gauge(r, "pfcp_gtpu_peers", peers, p.gtpu_peers);
    let failed = "GTP-U peers whose path failed (no Echo Response)";
    gauge(r, "pfcp_gtpu_paths_failed", failed, p.gtpu_paths_failed);
    let gbr = "GBR QERs of the sessions (recorded, not enforced: admission is the SMF's)";
    gauge(r, "pfcp_gbr_qers", gbr, p.gbr.qers as usize);
    let up = "Uplink GBRs of the sessions' QERs, summed, kbit/s";
    gauge(r, "pfcp_gbr_uplink_kbps", up, p.gbr.uplink_kbps as usize);
    let down = "Downlink GBRs of the sessions' QERs, summed, kbit/s";
    gauge(
        r,
        "pfcp_gbr_downlink_kbps",
        down,
        p.gbr.downlink_kbps as usize,
    );
}

/// Binds the metrics address (the config's `field`, named in errors),
/// before the daemon drops its privileges (a port below 1024 needs them).
pub fn listen(field: &str, addr: SocketAddr) -> Result<TcpListener, String> {
    TcpListener::bind(addr).map_err(|e| format!("{field}: cannot listen on {addr}: {e}"))
}

/// The request line and headers, at most. A scraper's are a few hundred
/// bytes.
const MAX_REQUEST: usize = 8192;

/// How long the accepting thread may go without a beat: it serves no
/// client itself, so a slow scrape never holds it.
const PATIENCE: Duration = Duration::from_secs(5);

/// Answers scrapes on `listener` on a thread of its own.
pub fn serve_on(listener: TcpListener, state: Arc<State>) -> Result<(), String> {
    let addr = listener
        .local_addr()
        .map_err(|e| format!("metrics listener: {e}"))?;
    clients::wake_periodically(&listener).map_err(|e| format!("metrics listener: {e}"))?;
    let shared = state.shared.clone();
    liveness::spawn(&shared.liveness, "metrics", PATIENCE, move |beat| {
        clients::accept_loop(
            beat,
            &CLIENTS,
            "tep-metrics-c",
            || listener.accept().map(|(s, _)| s),
            move |s| respond(s, &state),
        )
    })
    .map_err(|e| format!("cannot start the metrics thread: {e}"))?;
    tracing::info!(%addr, "metrics at http://{addr}/metrics");
    Ok(())
}

/// An HTTP answer other than the metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    BadRequest,
    NotFound,
    MethodNotAllowed,
    HeadersTooLarge,
}

impl Status {
    fn head(self) -> &'static [u8] {
        match self {
            Status::BadRequest => b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            Status::NotFound => b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            Status::MethodNotAllowed => b"HTTP/1.1 405 Method Not Allowed\r\nAllow: GET\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            Status::HeadersTooLarge => b"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        }
    }
}

/// Where the request's head ends (the blank line), from `from` on.
fn head_end(buf: &[u8], from: usize) -> Option<usize> {
    let rest = &buf[from..];
    let crlf = rest.windows(4).position(|w| w == b"\r\n\r\n");
    let lf = rest.windows(2).position(|w| w == b"\n\n");
    crlf.into_iter().chain(lf).min().map(|i| from + i)
}

/// Whether `head` asks for the metrics: `GET /metrics` (a query string
/// ignored) over HTTP/1.x; headers are not needed.
fn parse(head: &[u8]) -> Result<(), Status> {
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = std::str::from_utf8(line).map_err(|_| Status::BadRequest)?;
    let mut words = line.trim_end_matches('\r').split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (words.next(), words.next(), words.next(), words.next())
    else {
        return Err(Status::BadRequest);
    };
    if !version.starts_with("HTTP/1.") || !target.starts_with('/') {
        return Err(Status::BadRequest);
    }
    if method != "GET" {
        return Err(Status::MethodNotAllowed);
    }
    match target.split('?').next() {
        Some("/metrics") => Ok(()),
        _ => Err(Status::NotFound),
    }
}

fn respond(mut stream: TcpStream, state: &State) {
    let deadline = Instant::now() + clients::DEADLINE;
    let asked = match clients::read_request(&mut stream, MAX_REQUEST, deadline, head_end) {
        Ok(head) => parse(&head),
        Err(e) => match e.refusal() {
            Some(r) => {
                CLIENTS.refuse(r);
                if r != Refusal::TooLong {
                    return;
                }
                Err(Status::HeadersTooLarge)
            }
            None => return,
        },
    };
    let result = match asked {
        Ok(()) => {
            let body = scrape(state);
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/openmetrics-text; version=1.0.0; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            clients::write_by(&mut stream, &[head.as_bytes(), body.as_bytes()], deadline)
        }
        Err(status) => {
            if status != Status::HeadersTooLarge {
                CLIENTS.refuse(Refusal::BadRequest);
            }
            clients::write_by(&mut stream, &[status.head()], deadline)
        }
    };
    clients::count_write(&CLIENTS, result);
}

/// The metrics text now.
fn scrape(state: &State) -> String {
    let config = state
        .config
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let snaps = state
        .shared
        .snapshots
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let overlay = state
        .overlay
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    render(
        &config,
        &state.shared.totals(&snaps, &config),
        state.kernel.as_ref(),
        snaps.len(),
        state
            .shared
            .upf
            .status
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref(),
        overlay.as_deref(),
        &state
            .evpn
            .get()
            .map(|v| v.lock().unwrap_or_else(|e| e.into_inner()).clone())
            .unwrap_or_default(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::stats::{TunnelTraffic, WorkerSnapshot};
    use tep_dataplane::DropReason;
    use tep_dataplane::NodeStats;

    #[test]
    fn metrics_carry_tunnel_and_reason_labels() {
        let config = Config::parse(
            r#"
[[tunnel]]
name = "gtp-a"
kind = "gtpu"
local = "10.0.0.1"
remote = "10.0.0.2"
teid = 7
inner_prefixes = ["10.9.0.0/16"]
"#,
        )
        .unwrap();
        let mut n = NodeStats::new("gtpu-decap");
        n.calls = 1;
        n.packets = 9;
        n.drops[DropReason::UnknownTeid] = 4;
        for _ in 0..3 {
            n.drop_in(DropReason::BadChecksum, 0);
        }
        let traffic = TunnelTraffic {
            tx_packets: 12,
            ..Default::default()
        };
        let mut s =
            WorkerSnapshot::new(&[n], Default::default(), &[traffic], Default::default(), 0);
        assert!(
            s.nodes[0].by_tunnel.is_empty(),
            "moved to the tunnels' rows"
        );
        s.io.drop(DropReason::SendFailed, 2);
        let text = render(
            &config,
            &Totals::of(&[s]),
            &crate::daemon::state::UdpDrops,
            1,
            Some(&PfcpStatus {
                listen: None,
                sessions: 1000,
                associations: vec!["smf.example (192.0.2.10)".to_string()],
                counters: vec![("sessions_established", 1001), ("session_not_found", 2)],
                gtpu_peers: 3,
                gtpu_paths_failed: 1,
                failed_paths: vec!["192.0.2.9".to_string()],
                gbr: crate::daemon::state::GbrTotals {
                    qers: 2,
                    uplink_kbps: 64,
                    downlink_kbps: 128,
                },
            }),
            None,
            &[],
        );
        for want in [
            "tep_tunnel_tx_packets_total{tunnel=\"gtp-a\",kind=\"gtpu\"} 12",
            "tep_drops_total{node=\"gtpu-decap\",reason=\"unknown_teid\"} 4",
            "tep_drops_total{node=\"gtpu-decap\",reason=\"bad_checksum\"} 3",
            "tep_tunnel_drops_total{tunnel=\"gtp-a\",kind=\"gtpu\",reason=\"bad_checksum\"} 3",
            "tep_io_drops_total{reason=\"send_failed\"} 2",
            "tep_node_packets_total{node=\"gtpu-decap\"} 9",
            "tep_workers 1",
            "tep_pfcp_events_total{event=\"sessions_established\"} 1001",
            "tep_pfcp_events_total{event=\"session_not_found\"} 2",
            "tep_pfcp_sessions 1000",
            "tep_pfcp_associations 1",
            "tep_pfcp_gtpu_peers 3",
            "tep_pfcp_gtpu_paths_failed 1",
            "tep_pfcp_gbr_qers 2",
            "tep_pfcp_gbr_downlink_kbps 128",
            "tep_metrics_requests_refused_total{reason=\"too_long\"} 0",
            "tep_control_requests_refused_total{reason=\"peer\"} 0",
        ] {
            assert!(text.contains(want), "missing {want} in:\n{text}");
        }
    }

    /// Needs the real FDB and neighbour tables.
    #[test]
    fn overlay_metrics_are_per_network() {
        use tep_dataplane::config::{NetworkSettings, TunnelConfig};
        use tep_dataplane::overlay::NetworkCounters;
        let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
        let blue = TunnelConfig::network(
            "blue",
            tep_dataplane::TunnelKind::Vxlan,
            ip("192.0.2.1"),
            NetworkSettings {
                flood: vec![ip("192.0.2.2"), ip("192.0.2.3")],
                ..NetworkSettings::default()
            },
        );
        let o = Overlay::new(&[blue], 64, 16).unwrap();
        o.fdb_add("blue", [2, 0, 0, 0, 0, 1], ip("192.0.2.4"), false)
            .unwrap();
        NetworkCounters::add(&o.networks()[0].counters.flood_copies, 7);
        let config = Config::default();
        let t = Totals::default();
        let text = render(
            &config,
            &t,
            &crate::daemon::state::UdpDrops,
            1,
            None,
            Some(&o),
            &[],
        );
        for want in [
            "tep_overlay_fdb_entries{network=\"blue\"} 1",
            "tep_overlay_neighbours{network=\"blue\"} 0",
            "tep_overlay_events_total{network=\"blue\",event=\"flood_copies\"} 7",
            "tep_overlay_events_total{network=\"blue\",event=\"learn_refused\"} 0",
            "tep_overlay_vteps 3",
        ] {
            assert!(text.contains(want), "missing {want} in:\n{text}");
        }
    }

    #[test]
    fn only_get_metrics_is_served() {
        for (head, want) in [
            (&b"GET /metrics HTTP/1.1\r\nHost: x\r\n"[..], Ok(())),
            (b"GET /metrics?name[]=up HTTP/1.0", Ok(())),
            (b"GET / HTTP/1.1", Err(Status::NotFound)),
            (b"GET /metricsx HTTP/1.1", Err(Status::NotFound)),
            (b"POST /metrics HTTP/1.1", Err(Status::MethodNotAllowed)),
            (b"HEAD /metrics HTTP/1.1", Err(Status::MethodNotAllowed)),
            (b"GET /metrics", Err(Status::BadRequest)),
            (b"GET /metrics HTTP/2", Err(Status::BadRequest)),
            (b"GET  /metrics HTTP/1.1", Err(Status::BadRequest)),
            (b"GET metrics HTTP/1.1", Err(Status::BadRequest)),
            (b"GET /metrics HTTP/1.1 extra", Err(Status::BadRequest)),
            (b"\xff\xfe /metrics HTTP/1.1", Err(Status::BadRequest)),
            (b"", Err(Status::BadRequest)),
        ] {
            assert_eq!(parse(head), want, "{:?}", String::from_utf8_lossy(head));
        }
    }

    #[test]
    fn the_head_ends_at_the_first_blank_line() {
        let h = b"GET /metrics HTTP/1.1\r\nA: b\r\n\r\nbody";
        assert_eq!(head_end(h, 0), Some(27));
        assert_eq!(head_end(b"GET / HTTP/1.0\n\n", 0), Some(14));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nA: b\r\n", 0), None);
        // Searching from where the last read left off still finds an end
        // split across reads.
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n\r\n", 13), Some(14));
    }
}
