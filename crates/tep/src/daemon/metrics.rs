//! Prometheus metrics at `http://<metrics address>/metrics`, in the
//! OpenMetrics text format of prometheus-client.
//!
//! The registry is built from the workers' latest snapshots at each scrape
//! (scrapes are rare, and this keeps the workers free of shared atomics).
//! The listener is a small blocking HTTP/1.1 responder on its own thread:
//! one GET route does not justify an HTTP stack.

use super::liveness;
use super::state::{KernelCounters, PfcpStatus, State};
use super::stats::Totals;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;
use tep_dataplane::config::Config;

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

/// The metrics text for `config`, the counts since start `t` and the
/// number of workers.
pub fn render(
    config: &Config,
    t: &Totals,
    kernel: &dyn KernelCounters,
    worker_count: usize,
    pfcp: Option<&PfcpStatus>,
) -> String {
    let mut r = Registry::with_prefix("tep");
    let tx_p = family(
        &mut r,
        "tunnel_tx_packets",
        "Outer datagrams sent, by tunnel",
    );
    let tx_b = family(
        &mut r,
        "tunnel_tx_bytes",
        "UDP payload bytes sent, by tunnel",
    );
    let rx_p = family(
        &mut r,
        "tunnel_rx_packets",
        "Inner packets delivered, by tunnel",
    );
    let rx_b = family(
        &mut r,
        "tunnel_rx_bytes",
        "Inner bytes delivered, by tunnel",
    );
    for (i, c) in config.tunnels.iter().enumerate() {
        let s = t.tunnels.get(i).copied().unwrap_or_default();
        let l = labels(&[("tunnel", &c.name), ("kind", c.kind.name())]);
        tx_p.get_or_create(&l).inc_by(s.tx_packets);
        tx_b.get_or_create(&l).inc_by(s.tx_bytes);
        rx_p.get_or_create(&l).inc_by(s.rx_packets);
        rx_b.get_or_create(&l).inc_by(s.rx_bytes);
    }
    let drops = family(
        &mut r,
        "drops",
        "Packets dropped by the pipeline, by node and reason",
    );
    for (node, reason, c) in t.drops() {
        drops
            .get_or_create(&labels(&[("node", node), ("reason", reason.name())]))
            .inc_by(c);
    }
    let tunnel_drops = family(
        &mut r,
        "tunnel_drops",
        "Packets of a tunnel the pipeline dropped once the tunnel was known, by tunnel and reason",
    );
    for (i, c) in config.tunnels.iter().enumerate() {
        let s = t.tunnels.get(i).copied().unwrap_or_default();
        for (reason, n) in s.drops_by_reason() {
            tunnel_drops
                .get_or_create(&labels(&[
                    ("tunnel", &c.name),
                    ("kind", c.kind.name()),
                    ("reason", reason.name()),
                ]))
                .inc_by(n);
        }
    }
    let (name, label) = kernel.metric();
    let kernel_family = family(&mut r, name, kernel.about());
    for (counter, v) in kernel.read() {
        kernel_family
            .get_or_create(&labels(&[(label, &counter)]))
            .inc_by(v);
    }
    let host_drops = family(
        &mut r,
        "io_drops",
        "Packets dropped by the I/O layer, by reason",
    );
    let host_events = family(
        &mut r,
        "io_events",
        "I/O layer events (reads, writes, trains, rings)",
    );
    for (name, v) in t.io.named() {
        match name.strip_prefix("drop_") {
            Some(reason) => {
                host_drops
                    .get_or_create(&labels(&[("reason", reason)]))
                    .inc_by(v);
            }
            None => {
                host_events
                    .get_or_create(&labels(&[("event", &name)]))
                    .inc_by(v);
            }
        }
    }
    let edges = family(
        &mut r,
        "pipeline_packets",
        "Packets at the pipeline's edges",
    );
    for (edge, v) in t.edges() {
        edges.get_or_create(&labels(&[("edge", edge)])).inc_by(v);
    }
    let node_packets = family(&mut r, "node_packets", "Packets through each node");
    let node_clocks = family(&mut r, "node_clocks", "TSC clocks spent in each node");
    for n in t.nodes.iter().filter(|n| n.calls > 0) {
        let l = labels(&[("node", n.name)]);
        node_packets.get_or_create(&l).inc_by(n.packets);
        node_clocks.get_or_create(&l).inc_by(n.ticks);
    }
    let workers = Gauge::<i64>::default();
    workers.set(worker_count as i64);
    r.register("workers", "Worker threads", workers);
    if let Some(p) = pfcp {
        let events = family(
            &mut r,
            "pfcp_events",
            "PFCP (N4): messages handled, rejected by cause, discarded by reason, reports sent",
        );
        for &(name, v) in &p.counters {
            events.get_or_create(&labels(&[("event", name)])).inc_by(v);
        }
        let sessions = Gauge::<i64>::default();
        sessions.set(p.sessions as i64);
        r.register("pfcp_sessions", "PFCP sessions established", sessions);
        let associations = Gauge::<i64>::default();
        associations.set(p.associations.len() as i64);
        r.register("pfcp_associations", "SMFs associated", associations);
    }
    let mut out = String::new();
    let _ = encode(&mut out, &r);
    out
}

/// Binds the metrics address (the config's `field`, named in errors),
/// before the daemon drops its privileges (a port below 1024 needs them).
pub fn listen(field: &str, addr: SocketAddr) -> Result<TcpListener, String> {
    TcpListener::bind(addr).map_err(|e| format!("{field}: cannot listen on {addr}: {e}"))
}

/// Answers scrapes on `listener` on a thread of its own.
pub fn serve_on(listener: TcpListener, state: Arc<State>) -> Result<(), String> {
    let addr = listener
        .local_addr()
        .map_err(|e| format!("metrics listener: {e}"))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| format!("metrics listener: {e}"))?;
    let shared = state.shared.clone();
    // Patience: one scrape takes SCRAPE_LIMIT at most.
    liveness::spawn(&shared.liveness, "metrics", 2 * SCRAPE_LIMIT, move |beat| {
        liveness::accept_loop(
            beat,
            &listener,
            |l| l.accept().map(|(s, _)| s),
            |stream| {
                if let Err(e) = respond(stream, &state) {
                    tracing::debug!("metrics client: {e}");
                }
            },
        )
    })
    .map_err(|e| format!("cannot start the metrics thread: {e}"))?;
    tracing::info!(%addr, "metrics at http://{addr}/metrics");
    Ok(())
}

/// The longest one scrape may hold the metrics thread, reading the
/// request and writing the answer: a client trickling bytes (each read
/// within a per-read timeout) would otherwise keep it, and the watchdog
/// would then restart tep for a metrics client.
const SCRAPE_LIMIT: Duration = Duration::from_secs(5);

/// A client's stream whose reads and writes all end by `until`.
struct Until<'a> {
    stream: &'a TcpStream,
    until: std::time::Instant,
}

impl Until<'_> {
    fn left(&self) -> std::io::Result<Duration> {
        let left = self
            .until
            .saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
        Ok(left)
    }
}

impl std::io::Read for Until<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.stream.set_read_timeout(Some(self.left()?))?;
        (&mut &*self.stream).read(buf)
    }
}

impl Write for Until<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.stream.set_write_timeout(Some(self.left()?))?;
        (&mut &*self.stream).write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn respond(stream: TcpStream, state: &State) -> std::io::Result<()> {
    let until = std::time::Instant::now() + SCRAPE_LIMIT;
    let mut reader = BufReader::new(Until {
        stream: &stream,
        until,
    });
    let mut request = String::new();
    reader.read_line(&mut request)?;
    // Headers are read and ignored.
    let mut line = String::new();
    while reader.read_line(&mut line)? > 2 {
        line.clear();
    }
    let path = request.split_whitespace().nth(1).unwrap_or("");
    let mut out = Until {
        stream: &stream,
        until,
    };
    if !request.starts_with("GET ") || (path != "/metrics" && path != "/") {
        return out.write_all(
            b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        );
    }
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
    let body = render(
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
    );
    write!(
        out,
        "HTTP/1.1 200 OK\r\nContent-Type: application/openmetrics-text; version=1.0.0; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::stats::{TunnelTraffic, WorkerSnapshot};
    use tep_dataplane::drop::DropReason;
    use tep_dataplane::node::NodeStats;

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
            }),
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
        ] {
            assert!(text.contains(want), "missing {want} in:\n{text}");
        }
    }
}
