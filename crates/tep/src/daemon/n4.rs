//! The N4 thread of a UPF (`[pfcp]`): tep-pfcp's node on the PFCP socket,
//! its session changes compiled and published to the workers' session
//! tables ([`super::upf::UpfPlane`]), the workers' Downlink Data
//! Report requests turned into Session Report Requests, and usage scans
//! for the URRs' triggers ([`super::urr`]).
//!
//! One thread, off the packet path: it sleeps in epoll on the socket, its
//! wake-up (workers holding a first packet for an idle UE, a reload asking
//! for a replay, stop) and the node's next timer. After each round of
//! messages the changes go to every worker at once and the workers are
//! woken, so that a session is in their tables before the SMF reads the
//! response that set it up.

use super::path::{EchoSockets, PathCounter, PathEvent, Paths, Timers};
use super::state::{PfcpStatus, State};
use super::upf::UpfPlane;
use super::urr::UsageScan;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};
use tep_config::{Config, NodeId, PfcpConfig};
use tep_dataplane::session::control::Sessions;
use tep_pfcp::node::{self, Counter, Node};
use tep_sys::{Epoll, EventFd};

/// Datagrams read per wake-up before the changes are published (a burst
/// of establishments becomes one publication to the workers).
const ROUND: usize = 256;
/// The largest PFCP message taken (a UDP datagram's most).
const MAX_MESSAGE: usize = 65_535;
/// Failed GTP-U paths `tep show pfcp` lists by address at most (the rest
/// counted).
const LISTED_FAILED_PATHS: usize = 64;

/// What the main thread asks of the N4 thread.
enum Ask {
    /// Publish every session again to workers started afresh; answer once
    /// queued.
    Replay(mpsc::Sender<()>),
}

/// The running N4 thread.
pub struct N4 {
    thread: Option<JoinHandle<std::io::Result<()>>>,
    wake: Arc<EventFd>,
    asks: mpsc::Sender<Ask>,
    stop: Arc<AtomicBool>,
}

/// The N3 tunnels of `config` (their addresses and indexes), in `[pfcp].n3`
/// order.
pub fn n3_tunnels(config: &Config) -> Vec<(IpAddr, u32)> {
    config
        .tunnels
        .iter()
        .enumerate()
        .filter(|(_, t)| t.sessions)
        .map(|(i, t)| (t.local, i as u32))
        .collect()
}

/// A UPF's sessions name N3 tunnels by position and were set up under its
/// `[pfcp]`: a reload may change `[[tunnel]]`s around them only where
/// that moves nothing.
pub fn check_kept(old: &Config, new: &Config) -> Result<(), String> {
    if old.pfcp != new.pfcp {
        return Err(
            "pfcp: the [pfcp] section changed; the N4 socket, N3 addresses and session tables change only with a restart"
                .to_string(),
        );
    }
    let users = |c: &Config| c.tunnels.iter().filter(|t| !t.sessions).count();
    if old.pfcp.is_some() && users(old) != users(new) {
        return Err(format!(
            "tunnel: a UPF's sessions name its N3 tunnels by position, after the {} [[tunnel]]s; adding or removing one needs a restart",
            users(old)
        ));
    }
    Ok(())
}

/// A Node ID of the config as PFCP writes it.
fn pfcp_node_id(id: &NodeId) -> tep_pfcp::types::NodeId {
    match id {
        NodeId::Ip(IpAddr::V4(a)) => tep_pfcp::types::NodeId::V4(*a),
        NodeId::Ip(IpAddr::V6(a)) => tep_pfcp::types::NodeId::V6(*a),
        // Validated as a domain name by the config.
        NodeId::Fqdn(s) => tep_pfcp::types::NodeId::fqdn(s).unwrap_or_default(),
    }
}

/// The key of the SEID and TEID permutations: 8 bytes from the kernel's
/// random pool, drawn once per start.
fn id_key() -> Result<u64, String> {
    use std::io::Read;
    let mut b = [0u8; 8];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .map_err(|e| format!("pfcp: cannot draw the SEID/TEID key from /dev/urandom: {e}"))?;
    Ok(u64::from_ne_bytes(b))
}

/// The node's settings from `[pfcp]`.
fn node_config(p: &PfcpConfig, id_key: u64) -> node::Config {
    let node_id = pfcp_node_id(&p.node_id);
    let v4 = p.n3.iter().find_map(|a| match a {
        IpAddr::V4(a) => Some(*a),
        IpAddr::V6(_) => None,
    });
    let v6 = p.n3.iter().find_map(|a| match a {
        IpAddr::V6(a) => Some(*a),
        IpAddr::V4(_) => None,
    });
    let mut c = node::Config::new(node_id, node::ntp_seconds(SystemTime::now()), v4, v6);
    // The SMF sends session messages where the UP F-SEID says: the
    // listening address, unless it listens on every address.
    c.n4 = Some(p.listen.ip()).filter(|a| !a.is_unspecified());
    c.max_sessions = p.max_sessions as usize;
    c.max_sessions_per_association = p.max_sessions_per_association as usize;
    c.peers = p.peers.as_ref().map(|peers| {
        peers
            .iter()
            .map(|e| node::Peer {
                addr: e.prefix.addr,
                prefix_len: e.prefix.len,
                node_id: e.node_id.as_ref().map(pfcp_node_id),
            })
            .collect()
    });
    c.id_key = id_key;
    // The usage scans of `super::urr` watch the URRs' triggers.
    c.usage_scans = true;
    c.traffic_idle = super::urr::TRAFFIC_IDLE;
    c.heartbeat_interval =
        Some(Duration::from_millis(p.heartbeat_interval_ms.into())).filter(|d| !d.is_zero());
    c.t1 = Duration::from_millis(p.t1_ms.into());
    c.n1 = p.n1;
    c.association_grace = Duration::from_millis(p.association_grace_ms.into());
    c
}

/// Binds `[pfcp].listen` (before privileges are dropped).
pub fn bind(p: &PfcpConfig) -> Result<UdpSocket, String> {
    let s = UdpSocket::bind(p.listen).map_err(|e| match e.kind() {
        std::io::ErrorKind::AddrNotAvailable => format!(
            "pfcp.listen: {} is not an address of this host (cannot bind UDP {})",
            p.listen.ip(),
            p.listen
        ),
        std::io::ErrorKind::AddrInUse => format!(
            "pfcp.listen: UDP {} is in use by another socket (another UPF?)",
            p.listen
        ),
        _ => format!("pfcp.listen: cannot bind UDP {}: {e}", p.listen),
    })?;
    s.set_nonblocking(true)
        .map_err(|e| format!("pfcp.listen: {e}"))?;
    Ok(s)
}

impl N4 {
    /// Starts the N4 thread on `socket` over `sessions` (whose links the
    /// workers hold).
    pub fn start(
        config: &Config,
        socket: UdpSocket,
        mut sessions: Sessions,
        state: Arc<State>,
    ) -> Result<N4, String> {
        let p = config
            .pfcp
            .as_ref()
            .ok_or_else(|| "pfcp: missing".to_string())?;
        sessions.check_gnb_source(p.n3_source_check);
        let node = Node::new(node_config(p, id_key()?));
        if p.peers.is_none() {
            tracing::warn!(
                listen = %p.listen,
                "pfcp.peers is not set: any host that reaches the N4 address may associate and set up sessions"
            );
        }
        let mut plane =
            UpfPlane::new(sessions, n3_tunnels(config)).with_networks(super::dnn::Networks::of(p));
        let timers = Timers {
            interval: Duration::from_millis(p.echo_interval_ms.into()),
            t3: Duration::from_millis(p.t3_response_ms.into()),
            n3: p.n3_requests,
        };
        plane.paths = Paths::new(timers, p.n3.clone());
        let echo = match p.echo_interval_ms {
            0 => EchoSockets::bind(&[])?,
            _ => EchoSockets::bind(&p.n3)?,
        };
        let wake = Arc::new(EventFd::new().map_err(|e| format!("eventfd: {e}"))?);
        *state
            .shared
            .upf
            .wake
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(wake.clone());
        // A volume threshold or quota reached wakes the thread from the
        // worker that counted the crossing packet (once per crossing).
        let w = wake.clone();
        plane.wake_on_volume(Box::new(move || {
            let _ = w.notify();
        }));
        let (asks, asked) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let listen = socket.local_addr().ok();
        let mut run = Loop {
            socket,
            echo,
            node,
            plane,
            scan: UsageScan::new(Instant::now()),
            state,
            wake: wake.clone(),
            asked,
            stop: stop.clone(),
            listen,
        };
        let shared = run.state.shared.clone();
        let thread = super::liveness::spawn(&shared.liveness, "n4", Duration::ZERO, move |beat| {
            run.run(beat)
        })
        .map_err(|e| format!("cannot start the N4 thread: {e}"))?;
        tracing::info!(listen = ?listen, "PFCP (N4) listening");
        Ok(N4 {
            thread: Some(thread),
            wake,
            asks,
            stop,
        })
    }

    /// Has every session published again (for workers started afresh),
    /// returning once the changes are queued to them.
    pub fn replay(&self) {
        let (tx, rx) = mpsc::channel();
        if self.asks.send(Ask::Replay(tx)).is_ok() {
            let _ = self.wake.notify();
            let _ = rx.recv_timeout(Duration::from_secs(10));
        }
    }

    /// Stops the thread.
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Release);
        let _ = self.wake.notify();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct Loop {
    socket: UdpSocket,
    /// Path supervision's GTP-U sockets (`super::path`).
    echo: EchoSockets,
    node: Node,
    plane: UpfPlane,
    scan: UsageScan,
    state: Arc<State>,
    wake: Arc<EventFd>,
    asked: mpsc::Receiver<Ask>,
    stop: Arc<AtomicBool>,
    listen: Option<SocketAddr>,
}

const TOKEN_SOCKET: u64 = 0;
const TOKEN_WAKE: u64 = 1;
/// Echo socket i is `TOKEN_ECHO + i`.
const TOKEN_ECHO: u64 = 2;

impl Loop {
    fn run(&mut self, beat: &super::liveness::Beat) -> std::io::Result<()> {
        let epoll = Epoll::new()?;
        epoll.add(self.socket.as_raw_fd(), TOKEN_SOCKET, true, false)?;
        epoll.add(self.wake.as_raw_fd(), TOKEN_WAKE, true, false)?;
        for (i, s) in self.echo.sockets().enumerate() {
            epoll.add(s.as_raw_fd(), TOKEN_ECHO + i as u64, true, false)?;
        }
        let mut echoes = Vec::new();
        let mut signals = Vec::new();
        let mut events = Vec::with_capacity(4);
        let mut buf = vec![0u8; MAX_MESSAGE];
        let mut reports = Vec::new();
        let (mut crossed_slots, mut crossed) = (Vec::new(), Vec::new());
        self.publish_status();
        while !self.stop.load(Ordering::Acquire) {
            beat.beat();
            let due = [
                self.node.poll_timeout(),
                self.plane.paths.next_timeout(),
                self.scan.deadline(&self.node),
            ];
            // Rounded up: a wait cut to the millisecond below would wake
            // early and spin until the deadline.
            let timeout = match due.into_iter().flatten().min() {
                Some(t) => t
                    .saturating_duration_since(Instant::now())
                    .as_micros()
                    .div_ceil(1000)
                    .min(1000) as i32,
                None => 1000,
            };
            epoll.wait(&mut events, timeout)?;
            let _ = self.wake.drain();
            let now = Instant::now();
            // Requests first, then the reports: a Downlink Data Report for
            // a session the same round modified is judged on its new FAR.
            for _ in 0..ROUND {
                match self.socket.recv_from(&mut buf) {
                    Ok((n, from)) => self.node.handle(now, from, &buf[..n], &mut self.plane),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    // An ICMP error from an SMF gone away, say: next one.
                    Err(e) => {
                        tracing::debug!("pfcp recv: {e}");
                        break;
                    }
                }
            }
            std::mem::swap(
                &mut reports,
                &mut *self
                    .state
                    .shared
                    .upf
                    .reports
                    .lock()
                    .unwrap_or_else(|e| e.into_inner()),
            );
            for slot in reports.drain(..) {
                if let Some((seid, pdr)) = self.plane.report_of(slot) {
                    self.node.downlink_data(now, seid, pdr);
                }
            }
            if self.node.poll_timeout().is_some_and(|t| t <= now) {
                self.node.handle_timeout(now, &mut self.plane);
            }
            self.supervise_paths(now, &mut echoes, &mut signals);
            // Before the changes are published: a session whose quota ran
            // out stops in this round.
            self.plane.volume_crossed(&mut crossed_slots, &mut crossed);
            for (seid, spent) in crossed.drain(..) {
                self.node.usage_crossed(now, seid, &spent, &mut self.plane);
            }
            self.scan.run(now, &mut self.node, &mut self.plane);
            while let Ok(ask) = self.asked.try_recv() {
                match ask {
                    Ask::Replay(done) => {
                        self.plane.replay();
                        let _ = done.send(());
                    }
                }
            }
            if self.plane.publish() {
                for w in self
                    .state
                    .wakes
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .iter()
                {
                    let _ = w.notify();
                }
            }
            while let Some(e) = self.node.poll_event() {
                match e {
                    node::Event::AssociationExpired {
                        node_id,
                        addr,
                        sessions,
                    } => tracing::warn!(
                        node_id = %node_id_text(&node_id),
                        %addr,
                        sessions,
                        "PFCP association released: its SMF stopped answering Heartbeats"
                    ),
                }
            }
            while let Some(t) = self.node.poll_transmit() {
                if let Err(e) = self.socket.send_to(&t.payload, t.destination) {
                    tracing::warn!(to = %t.destination, "pfcp send: {e}");
                }
            }
            self.publish_status();
        }
        Ok(())
    }

    /// Path supervision's round: Echo Responses on the echo sockets and
    /// the peers' signalling from the workers, Echo Requests due, and
    /// what failed, recovered or drew an Error Indication told to the
    /// SMFs. `echoes` and `signals` are scratch.
    fn supervise_paths(
        &mut self,
        now: Instant,
        echoes: &mut Vec<super::path::Echo>,
        signals: &mut Vec<tep_dataplane::PeerSignal>,
    ) {
        let paths = &mut self.plane.paths;
        for i in 0..self.echo.sockets().count() {
            self.echo.receive(i, paths);
        }
        let dropped = {
            let mut held = self
                .state
                .shared
                .upf
                .signals
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            std::mem::swap(signals, &mut held.0);
            std::mem::take(&mut held.1)
        };
        paths.count(PathCounter::SignalsDropped, dropped);
        for s in signals.drain(..) {
            match s {
                tep_dataplane::PeerSignal::EchoResponse { from, sequence } => {
                    paths.answered(from, sequence)
                }
                tep_dataplane::PeerSignal::ErrorIndication { from, peer, teid } => {
                    if let Some(seid) = paths.error_indication(now, from, peer, teid) {
                        self.node.error_indication(now, seid, peer, teid);
                    }
                }
            }
        }
        paths.poll(now, echoes);
        for e in echoes.drain(..) {
            self.echo.send(&e);
        }
        let (mut failed, mut recovered) = (Vec::new(), Vec::new());
        for e in paths.events() {
            match e {
                PathEvent::Failed(a) => failed.push(a),
                PathEvent::Recovered(a) => recovered.push(a),
            }
        }
        for a in &failed {
            tracing::warn!(peer = %a, "GTP-U path failed: no Echo Response (Node Report to the SMFs)");
        }
        for a in &recovered {
            tracing::info!(peer = %a, "GTP-U path recovered (Node Report to the SMFs)");
        }
        self.node.path_report(now, &failed, false);
        self.node.path_report(now, &recovered, true);
    }

    fn publish_status(&self) {
        let paths = &self.plane.paths;
        let mut failed: Vec<IpAddr> = paths
            .peers()
            .filter(|&(_, _, failed, _)| failed)
            .map(|(a, _, _, _)| a)
            .collect();
        failed.sort_unstable();
        let status = PfcpStatus {
            gtpu_peers: paths.peers().count(),
            gtpu_paths_failed: failed.len(),
            failed_paths: failed
                .iter()
                .take(LISTED_FAILED_PATHS)
                .map(|a| a.to_string())
                .collect(),
            listen: self.listen,
            sessions: self.node.session_count(),
            gbr: self.plane.gbr(),
            associations: self
                .node
                .associations()
                .map(|(id, addr)| format!("{} ({addr})", node_id_text(id)))
                .collect(),
            counters: Counter::ALL
                .iter()
                .map(|&c| (c.name(), self.node.counter(c)))
                .chain(
                    PathCounter::ALL
                        .iter()
                        .map(|&c| (c.name(), paths.counter(c))),
                )
                .chain([("usage_lines_refused", self.plane.usage_lines_refused())])
                .collect(),
        };
        *self
            .state
            .shared
            .upf
            .status
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(status);
    }
}

/// A Node ID as a person reads it.
fn node_id_text(id: &tep_pfcp::types::NodeId) -> String {
    use tep_pfcp::types::NodeId as Id;
    match id {
        Id::V4(a) => a.to_string(),
        Id::V6(a) => a.to_string(),
        Id::Fqdn(labels) => {
            let mut out = String::new();
            let mut rest = labels.as_slice();
            while let [n, tail @ ..] = rest {
                let n = usize::from(*n).min(tail.len());
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(&String::from_utf8_lossy(&tail[..n]));
                rest = &tail[n..];
            }
            out
        }
    }
}
