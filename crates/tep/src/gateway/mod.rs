//! Gateway mode: `tep run` between two interfaces over AF_XDP, writing
//! whole frames, the kernel keeping ARP, ND and routing.
//!
//! ```text
//!  hosts ── inner ──[ tep_inner XDP ─ AF_XDP ]─┐        ┌─[ AF_XDP ─ tep_underlay XDP ]── underlay ── peers
//!                                              └ worker ┘
//!                     everything else ─────────► kernel ◄──────── everything else (ARP, ND, the host's own)
//! ```
//!
//! The main thread sets it up and takes it down: the XDP programs
//! ([`steer`]) on both interfaces, one AF_XDP socket per interface and
//! queue over one UMEM per queue (the worker's pool), the next-hop
//! resolver ([`next_hops`]), the workers ([`worker`], over the rings of
//! [`rings`]), and the control socket and metrics of [`crate::daemon`].
//! With `gateway.user` it becomes that user once everything that needs
//! root is open and before any thread starts
//! ([`crate::daemon::privilege`]).
//! SIGTERM stops the workers and detaches the programs; a crash leaves
//! nothing attached either (the programs hang on bpf_links that die with
//! the process).

pub mod next_hops;
pub mod rings;
pub mod steer;
pub mod worker;

use crate::daemon::state::{GatewayInfo, InterfaceInfo, IoInfo, RingInfo, Shared, State};
use crate::daemon::{control, liveness, metrics, n4, privilege};
use next_hops::{Published, Resolver};
use rings::Side;
use std::net::IpAddr;
use std::os::fd::AsFd;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tep_config::{Config, ConfigError, GatewayConfig, RunMode, XdpMode};
use tep_dataplane::session::control::Sessions;
use tep_dataplane::session::WorkerLink;
use tep_dataplane::RouterOptions;
use tep_dataplane::{Pool, HEADROOM};
use tep_sys::raw::RawIp;
use tep_sys::{EventFd, Mode, Role, Signal, Signals, Steering, Umem, XskOptions, XskSocket};
use worker::{WorkerIo, WorkerSetup};

/// One of the two interfaces, as the kernel has it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interface {
    /// Its index.
    pub index: u32,
    /// Its name.
    pub name: String,
    /// Its MAC (the source of the frames tep writes out of it).
    pub mac: [u8; 6],
    /// Its MTU.
    pub mtu: u32,
}

/// Bytes per buffer: one AF_XDP chunk (a page), the first 256 the
/// headroom encapsulation writes into.
const CHUNK: usize = 4096;

/// How long a socket keeps retrying a queue the kernel has not let go of
/// yet (after a restart: about 20 ms on veth).
const BIND_RETRY: Duration = Duration::from_millis(500);

/// A config `tep run` starts in gateway mode, and gateway mode's own
/// rules.
pub fn check_gateway(config: &Config) -> Result<&GatewayConfig, ConfigError> {
    match (config.run_mode()?, &config.gateway) {
        (RunMode::Gateway, Some(g)) => Ok(g),
        _ => Err(ConfigError {
            field: "host".to_string(),
            message: "this config runs host mode, not gateway mode".to_string(),
        }),
    }
}

/// Buffers per queue: both fill rings full, as many frames in flight on
/// both transmit rings, the pipeline's reserve.
fn buffers(ring: u32) -> usize {
    4 * ring as usize + 2 * worker::RESERVE
}

fn interface(field: &str, name: &str) -> Result<Interface, String> {
    let link = tep_sys::netlink::link_by_name(name)
        .map_err(|e| format!("{field}: interface \"{name}\": {e}"))?;
    let mac = link.mac.ok_or_else(|| {
        format!("{field}: \"{name}\" has no Ethernet address: gateway mode writes Ethernet frames")
    })?;
    if !link.up {
        tracing::warn!(interface = name, "{field} is not up and running");
    }
    Ok(Interface {
        index: link.index,
        name: link.name,
        mac,
        mtu: link.mtu,
    })
}

fn xdp_mode(m: XdpMode) -> Mode {
    match m {
        XdpMode::Native => Mode::Native,
        XdpMode::Generic => Mode::Generic,
        XdpMode::Auto => Mode::Auto,
    }
}

fn ring_options(ring: u32) -> XskOptions {
    XskOptions {
        rx: ring,
        tx: ring,
        fill: 2 * ring,
        completion: ring,
        ..XskOptions::default()
    }
}

/// A socket on `queue` of `ifindex`, retrying while the kernel still
/// holds the queue for a socket that just closed.
fn bind(mut open: impl FnMut() -> std::io::Result<XskSocket>) -> std::io::Result<XskSocket> {
    let until = Instant::now() + BIND_RETRY;
    loop {
        match open() {
            Err(e) if e.kind() == std::io::ErrorKind::ResourceBusy && Instant::now() < until => {
                std::thread::sleep(Duration::from_millis(5));
            }
            r => return r,
        }
    }
}

/// Queue `queue`'s pool and its sockets on both interfaces, registered
/// with the steering programs.
fn open_queue(
    g: &GatewayConfig,
    queue: u32,
    underlay: &Interface,
    inner: &Interface,
    steering: &mut Steering,
) -> Result<WorkerIo, String> {
    let mut pool = Pool::new(buffers(g.ring_size), CHUNK - HEADROOM);
    let (addr, len) = pool.region();
    // SAFETY: the region is the pool's arena, page-aligned, alive as long
    // as the pool; WorkerIo declares the sockets before the pool, so they
    // close (and the kernel lets go of the memory) before it is freed.
    // The kernel writes only into buffers the worker put on a fill ring,
    // which the pool counts as in use until they come back.
    let umem = unsafe { Umem::register(addr, len, CHUNK as u32) }
        .map_err(|e| format!("AF_XDP UMEM: {e}"))?;
    let opts = ring_options(g.ring_size);
    let u = bind(|| XskSocket::new(&umem, underlay.index, queue, &opts)).map_err(|e| {
        format!(
            "gateway.underlay: AF_XDP socket on {} queue {queue}: {e}",
            underlay.name
        )
    })?;
    let i = bind(|| XskSocket::shared(&u, inner.index, queue, &opts)).map_err(|e| {
        format!(
            "gateway.inner: AF_XDP socket on {} queue {queue}: {e}",
            inner.name
        )
    })?;
    steering
        .register_socket(Role::Underlay, queue, u.as_fd())
        .map_err(|e| format!("XDP maps: socket of queue {queue}: {e}"))?;
    steering
        .register_socket(Role::Inner, queue, i.as_fd())
        .map_err(|e| format!("XDP maps: socket of queue {queue}: {e}"))?;
    let raw = RawIp::new().map_err(|e| format!("queue {queue}: {e}"))?;
    Ok(WorkerIo {
        underlay: Side::underlay(u),
        inner: Side::inner(i),
        raw,
        pool,
    })
}

/// The addresses ICMP errors come from: the inner interface's first
/// (global, for IPv6) of each family.
fn router(inner: &Interface, underlay: &Interface) -> RouterOptions {
    let addrs = tep_sys::iface::addresses(&inner.name).unwrap_or_default();
    let v4 = addrs.iter().find_map(|a| match a {
        IpAddr::V4(a) => Some(*a),
        _ => None,
    });
    let v6 = addrs
        .iter()
        .filter_map(|a| match a {
            IpAddr::V6(a) => Some(*a),
            _ => None,
        })
        .min_by_key(|a| a.is_unicast_link_local());
    RouterOptions {
        path_mtu: underlay.mtu,
        v4,
        v6,
        ..RouterOptions::default()
    }
}

struct Running {
    config: Arc<Config>,
    handles: Vec<JoinHandle<std::io::Result<WorkerIo>>>,
    wakes: Vec<Arc<EventFd>>,
    /// A UPF's: each worker's link to the session tables (kept across
    /// reloads: the sessions outlive the workers).
    links: Vec<WorkerLink>,
}

struct Gateway {
    underlay: Interface,
    inner: Interface,
    steering: Arc<Mutex<Steering>>,
    next_hops: Arc<Published>,
    shared: Arc<Shared>,
}

impl Gateway {
    fn start(
        &self,
        config: Arc<Config>,
        ios: Vec<WorkerIo>,
        links: Vec<WorkerLink>,
    ) -> Result<Running, String> {
        let g = config.gateway.as_ref().ok_or("no [gateway] section")?;
        self.shared.stop.store(false, Ordering::Release);
        self.shared
            .snapshots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        let router = router(&self.inner, &self.underlay);
        let mut handles = Vec::new();
        let mut wakes = Vec::new();
        for (index, io) in ios.into_iter().enumerate() {
            let wake = Arc::new(EventFd::new().map_err(|e| format!("eventfd: {e}"))?);
            let setup = WorkerSetup {
                index,
                config: config.clone(),
                io,
                cpu: g.cpus.get(index).copied(),
                fill_target: g.ring_size as usize,
                router,
                next_hops: self.next_hops.clone(),
                wake: wake.clone(),
                shared: self.shared.clone(),
                sessions: match (&config.pfcp, links.get(index)) {
                    (Some(p), Some(l)) => Some((l.clone(), p.buffer_packets, p.buffer_limit)),
                    _ => None,
                },
            };
            let h = liveness::spawn(
                &self.shared.liveness,
                &format!("worker-{index}"),
                Duration::ZERO,
                move |beat| worker::run(setup, beat),
            )
            .map_err(|e| format!("cannot start a worker: {e}"))?;
            handles.push(h);
            wakes.push(wake);
        }
        Ok(Running {
            config,
            handles,
            wakes,
            links,
        })
    }

    /// Stops the workers and takes their sockets and pools back.
    fn stop(&self, r: Running) -> Vec<WorkerIo> {
        self.shared.stop.store(true, Ordering::Release);
        for w in &r.wakes {
            let _ = w.notify();
        }
        let mut ios = Vec::new();
        for h in r.handles {
            match h.join() {
                Ok(Ok(io)) => ios.push(io),
                Ok(Err(e)) => tracing::error!("worker stopped on an error: {e}"),
                Err(_) => tracing::error!("worker panicked"),
            }
        }
        ios
    }

    /// Re-reads the config; with the same `[gateway]` section, moves the
    /// steering maps to the new tunnels and restarts the workers on the
    /// same sockets. On any error the running workers are left alone.
    fn reload(
        &self,
        path: &Path,
        running: &mut Running,
        state: &State,
        n4: Option<&n4::N4>,
    ) -> Result<(), String> {
        let new = Config::load(path).map_err(|e| e.to_string())?;
        let g = check_gateway(&new).map_err(|e| e.to_string())?;
        let old = running.config.clone();
        n4::check_kept(&old, &new)?;
        if Some(g) != old.gateway.as_ref() {
            return Err(
                "gateway: the [gateway] section changed; interfaces, queues and rings change only with a restart"
                    .to_string(),
            );
        }
        let new = Arc::new(new);
        let stopped = std::mem::replace(
            running,
            Running {
                config: old.clone(),
                handles: Vec::new(),
                wakes: Vec::new(),
                links: running.links.clone(),
            },
        );
        let stopped_links = stopped.links.clone();
        let ios = self.stop(stopped);
        self.shared.carry_over(&old);
        let steered = steer::configure(
            &mut self.steering.lock().unwrap_or_else(|e| e.into_inner()),
            Some(&old),
            &new,
            self.inner.mac,
        );
        // Workers come back either way: with the new tunnels, or (the
        // maps refused) with the old ones.
        let (config, result) = match steered {
            Ok(()) => (new, Ok(())),
            Err(e) => (old, Err(e)),
        };
        self.next_hops.pin(&remotes_of(&config));
        // The new workers' session tables start empty: every session is
        // queued for them before they run.
        if let Some(n) = n4 {
            n.replay();
        }
        let links = stopped_links.clone();
        *running = self.start(config.clone(), ios, links)?;
        *state.wakes.lock().unwrap_or_else(|e| e.into_inner()) = running.wakes.clone();
        *state.config.lock().unwrap_or_else(|e| e.into_inner()) = config;
        result
    }
}

/// The tunnels' remote addresses, resolved before any packet asks; an N3
/// tunnel's peers come with sessions (and are asked for by their first
/// packet).
fn remotes_of(config: &Config) -> Vec<IpAddr> {
    config
        .tunnels
        .iter()
        .map(|t| t.remote)
        .filter(|a| !a.is_unspecified())
        .collect()
}

fn io_info(
    g: &GatewayConfig,
    gw: &Gateway,
    modes: [tep_sys::AttachMode; 2],
    zero_copy: bool,
) -> IoInfo {
    let mac = |m: [u8; 6]| {
        m.iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(":")
    };
    let iface = |role, i: &Interface, mode: tep_sys::AttachMode| InterfaceInfo {
        role,
        name: i.name.clone(),
        ifindex: i.index,
        mac: mac(i.mac),
        mtu: i.mtu,
        xdp_mode: mode.to_string(),
    };
    let o = ring_options(g.ring_size);
    IoInfo {
        workers: g.queues,
        busy_poll_us: g.busy_poll_us,
        adaptive_poll_us: g.adaptive_poll_us,
        uplink: None,
        gateway: Some(GatewayInfo {
            interfaces: vec![
                iface("underlay", &gw.underlay, modes[0]),
                iface("inner", &gw.inner, modes[1]),
            ],
            rings: RingInfo {
                rx: o.rx,
                tx: o.tx,
                fill: o.fill,
                completion: o.completion,
            },
            zero_copy,
            path_mtu: gw.underlay.mtu,
        }),
        ..IoInfo::default()
    }
}

/// `tep run -c FILE` with a `[gateway]` section: runs until SIGTERM or
/// SIGINT, then detaches everything. Errors are for the user: they name
/// the field or the call that failed.
pub fn run(path: &Path) -> Result<(), String> {
    // Blocked before any thread starts, so that every thread inherits the
    // mask and the signals arrive only through the signalfd.
    let signals = Signals::new(&[Signal::Terminate, Signal::Interrupt, Signal::Hangup])
        .map_err(|e| format!("signalfd: {e}"))?;
    let config = Config::load(path).map_err(|e| e.to_string())?;
    let g = check_gateway(&config).map_err(|e| e.to_string())?.clone();
    let run_as = privilege::of_gateway(&g)?;
    let underlay = interface("gateway.underlay", &g.underlay)?;
    let inner = interface("gateway.inner", &g.inner)?;
    let mut steering =
        Steering::load().map_err(|e| {
            if e.kind() == std::io::ErrorKind::PermissionDenied {
                format!("XDP: not allowed to load the steering programs ({e}); gateway mode starts as root (eBPF and XDP need CAP_BPF, CAP_PERFMON and CAP_NET_ADMIN, AF_XDP sockets CAP_NET_RAW)")
            } else {
                format!("XDP: cannot load the steering programs: {e}")
            }
        })?;
    steer::configure(&mut steering, None, &config, inner.mac)?;
    let mode = xdp_mode(g.xdp_mode);
    let mut modes = [tep_sys::AttachMode::Native; 2];
    for (k, (role, i, field)) in [
        (Role::Underlay, &underlay, "gateway.underlay"),
        (Role::Inner, &inner, "gateway.inner"),
    ]
    .into_iter()
    .enumerate()
    {
        modes[k] = steering
            .attach(role, i.index, mode)
            .map_err(|e| format!("{field}: cannot attach XDP to {}: {e}", i.name))?;
        tracing::info!(
            interface = i.name.as_str(),
            asked = g.xdp_mode.name(),
            mode = %modes[k],
            "XDP program attached"
        );
    }
    let mut ios = Vec::new();
    for q in 0..g.queues as u32 {
        ios.push(open_queue(&g, q, &underlay, &inner, &mut steering)?);
    }
    let zero_copy = ios.iter().all(|w| w.underlay.socket.zero_copy());
    let control = control::listen("gateway.control", &g.control, g.control_group.as_deref())?;
    let metrics = g
        .metrics
        .map(|addr| metrics::listen("gateway.metrics", addr))
        .transpose()?;
    let pfcp = config
        .pfcp
        .as_ref()
        .map(|p| n4::bind(p).map(|socket| (p.max_sessions, socket)))
        .transpose()?;
    // Everything that needs root is set up; the threads started from here
    // on inherit what the main thread keeps (credentials are per thread).
    if let Some(r) = &run_as {
        r.apply()?;
        r.check_readable(path);
    }
    let shared = Arc::new(Shared::default());
    let remotes = remotes_of(&config);
    let capacity = next_hops::Capacity {
        routes: g.route_cache,
        hops: g.next_hops,
    };
    let resolver = Resolver::start(
        vec![underlay.clone(), inner.clone()],
        &remotes,
        capacity,
        &shared.liveness,
    )?;
    let gw = Gateway {
        underlay,
        inner,
        steering: Arc::new(Mutex::new(steering)),
        next_hops: resolver.published.clone(),
        shared: shared.clone(),
    };
    let config = Arc::new(config);
    let (reload_tx, reload_rx) = mpsc::channel();
    let state = Arc::new(State {
        config: Mutex::new(config.clone()),
        io: Mutex::new(io_info(&g, &gw, modes, zero_copy)),
        wakes: Mutex::new(Vec::new()),
        shared: shared.clone(),
        reload: Mutex::new(reload_tx),
        main_wake: EventFd::new().map_err(|e| format!("eventfd: {e}"))?,
        kernel: Box::new(steer::SteeringCounters {
            steering: gw.steering.clone(),
            next_hops: gw.next_hops.clone(),
        }),
    });
    // A UPF: the session tables' control plane, its links to the workers,
    // and the PFCP socket.
    let (sessions, links) = match pfcp {
        Some((max_sessions, socket)) => {
            let n3_v6 = config.tunnels.iter().map(|t| t.local.is_ipv6()).collect();
            let (s, l) = Sessions::new(max_sessions, g.queues, n3_v6);
            (Some((s, socket)), l)
        }
        None => (None, Vec::new()),
    };
    let mut running = gw.start(config.clone(), ios, links)?;
    *state.wakes.lock().unwrap_or_else(|e| e.into_inner()) = running.wakes.clone();
    let n4 = match sessions {
        Some((sessions, socket)) => Some(n4::N4::start(&config, socket, sessions, state.clone())?),
        None => None,
    };
    let control = control.serve(state.clone())?;
    if let Some(listener) = metrics {
        metrics::serve_on(listener, state.clone())?;
    }
    tracing::info!(
        tunnels = config.tunnels.len(),
        workers = g.queues,
        inner = g.inner.as_str(),
        underlay = g.underlay.as_str(),
        zero_copy,
        control = g.control.as_str(),
        "tep running (gateway)"
    );
    crate::daemon::until_stopped(path, &signals, &state, &reload_rx, || {
        gw.reload(path, &mut running, &state, n4.as_ref())
            .map_err(|e| privilege::explain(run_as.as_ref(), e))
    })?;
    if let Some(n) = n4 {
        n.stop();
    }
    // The workers' sockets close, then the programs come off both
    // interfaces (Steering's drop), leaving them as they were.
    drop(gw.stop(running));
    drop(resolver);
    control.remove();
    let mut steering = gw.steering.lock().unwrap_or_else(|e| e.into_inner());
    for role in [Role::Underlay, Role::Inner] {
        if let Err(e) = steering.detach(role) {
            tracing::warn!(?role, "detach: {e}");
        }
    }
    tracing::info!("stopped");
    Ok(())
}
