//! Host mode: `tep run`, the daemon between a TUN/TAP and UDP sockets.
//!
//! The main thread owns the devices and the workers: it starts them, waits
//! for signals (SIGTERM/SIGINT stop, SIGHUP reloads) and for reload
//! requests from the control socket, and restarts the workers with a new
//! config when a reload validates. Workers ([`worker`]) own their queues,
//! sockets, pool and pipeline; the control thread ([`control`]) and the
//! metrics listener ([`metrics`]) read the counters workers publish and
//! what the main thread shares with them ([`state`]): the daemon parts
//! both run modes share, in [`crate::daemon`].

mod device_io;
pub mod endpoints;
mod links;
mod routes;
mod udp_io;
pub mod uplink;
pub mod worker;

use crate::daemon::{control, liveness, metrics, n4, privilege, state};

use endpoints::Endpoints;
use state::{DeviceInfo, IoInfo, Shared, SocketInfo, State};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;
use tep_config::{ChecksumMode, Config, ConfigError, HostConfig, RunMode, TunnelConfig};
use tep_dataplane::overhead;
use tep_dataplane::session::control::Sessions;
use tep_dataplane::session::WorkerLink;
use tep_sys::{
    DeviceKind, EventFd, Offloads, Signal, Signals, Tun, TunOptions, UdpOptions, UdpSocket,
};
use worker::{WorkerIo, WorkerSetup};

/// The MTU of the path a tunnel's datagrams leave on: `host.underlay_mtu`
/// when set, else the MTU of the interface holding the tunnel's local
/// address; 1500 when no interface holds it (an address not configured
/// yet).
pub fn underlay_mtu(config: &Config, t: &TunnelConfig) -> u32 {
    if let Some(m) = config.host.underlay_mtu {
        return m;
    }
    match tep_sys::iface::holding(t.local) {
        Ok(Some((_, mtu))) => mtu,
        _ => DEFAULT_UNDERLAY_MTU,
    }
}

/// Ethernet's.
const DEFAULT_UNDERLAY_MTU: u32 = 1500;

/// The MTU of the device carrying `ethernet` (L2) or L3 tunnels: what
/// leaves every tunnel on it in one underlay packet.
pub fn device_mtu(config: &Config, ethernet: bool) -> u32 {
    if let Some(m) = config.host.mtu {
        return m;
    }
    config
        .tunnels
        .iter()
        .filter(|t| t.kind.carries_ethernet() == ethernet)
        .map(|t| underlay_mtu(config, t).saturating_sub(overhead(t)))
        .min()
        .unwrap_or(config.host.underlay_mtu.unwrap_or(DEFAULT_UNDERLAY_MTU))
        .max(576)
}

/// The largest TSO super-packet to let the host hand the device carrying
/// `ethernet` (L2) or L3 tunnels: one whose tunnelled segments fit one UDP
/// GSO send (65507 payload bytes, at most 64 datagrams). Bigger ones leave
/// as two sends and arrive as two GRO trains, which the peer writes to its
/// device as two super-packets: more writes, and more work for the host
/// stack, per byte. Each datagram carries at most the tunnel header and
/// inner Ethernet header plus an MTU-sized inner packet; TCP fills a
/// super-packet with whole MSS-sized segments, and an MSS is at most the
/// MTU less 80 (IPv6 and TCP with timestamps, with margin).
pub fn gso_max_size(config: &Config, ethernet: bool) -> u32 {
    let mtu = device_mtu(config, ethernet);
    let per_datagram = config
        .tunnels
        .iter()
        .filter(|t| t.kind.carries_ethernet() == ethernet)
        .map(|t| overhead(t) - if t.local.is_ipv4() { 28 } else { 48 })
        .max()
        .unwrap_or(0)
        + mtu;
    let segments = (65507 / per_datagram.max(1)).min(64);
    (segments * mtu.saturating_sub(80)).max(mtu)
}

/// A config `tep run` starts in host mode: it has `[host]` and no
/// `[gateway]`.
fn check_mode(config: &Config) -> Result<(), ConfigError> {
    match config.run_mode()? {
        RunMode::Host => Ok(()),
        RunMode::Gateway => Err(ConfigError {
            field: "gateway".to_string(),
            message: "this config runs gateway mode, not host mode".to_string(),
        }),
    }
}

/// Host-mode rules on top of the config's own: a UDP socket has one
/// checksum policy, so the tunnels sharing a local address and port must
/// agree on sending zero checksums.
pub fn check_host(config: &Config) -> Result<(), ConfigError> {
    uplink::check(config)?;
    let e = Endpoints::of(config);
    for (i, t) in config.tunnels.iter().enumerate() {
        let zero = t.checksum == ChecksumMode::Zero;
        if zero != e.zero_tx[e.of_tunnel[i]] {
            return Err(ConfigError {
                field: format!("tunnel[{i}] \"{}\".checksum", t.name),
                message: format!(
                    "the tunnels on {} share one socket: all of them send zero checksums or none (give this one its own local_port)",
                    e.addrs[e.of_tunnel[i]]
                ),
            });
        }
    }
    Ok(())
}

fn needs(config: &Config, ethernet: bool) -> bool {
    config
        .tunnels
        .iter()
        .any(|t| t.kind.carries_ethernet() == ethernet)
}

fn open_device(host: &HostConfig, config: &Config, ethernet: bool) -> Result<Tun, String> {
    let (name, kind, addrs) = if ethernet {
        (&host.tap, DeviceKind::Tap, &host.tap_addresses)
    } else {
        (&host.tun, DeviceKind::Tun, &host.tun_addresses)
    };
    let offloads = if host.offloads {
        Offloads::all()
    } else {
        Offloads::none()
    };
    let dev = Tun::open(&TunOptions {
        name: name.clone(),
        kind,
        queues: host.queues,
        vnet_hdr: host.offloads,
        vnet_hdr_tunnel: false,
        offloads,
    })
    .map_err(|e| {
        let field = if ethernet { "tap" } else { "tun" };
        if e.kind() == std::io::ErrorKind::ResourceBusy {
            format!("host.{field}: {name} is in use by another process (another tep with this config?); stop it or name another device")
        } else if e.kind() == std::io::ErrorKind::PermissionDenied {
            format!("host.{field}: not allowed to create {name} ({e}); a TUN/TAP device needs root or CAP_NET_ADMIN: run tep as root")
        } else {
            format!("host.{field}: cannot open {name}: {e}")
        }
    })?;
    let mtu = device_mtu(config, ethernet);
    dev.set_mtu(mtu)
        .map_err(|e| format!("host.mtu: cannot set {mtu} on {name}: {e}"))?;
    if config.host.mtu.is_none() {
        for t in config
            .tunnels
            .iter()
            .filter(|t| t.kind.carries_ethernet() == ethernet)
        {
            tracing::info!(
                device = %name,
                tunnel = %t.name,
                underlay_mtu = underlay_mtu(config, t),
                overhead = overhead(t),
                "device MTU {mtu}: the smallest underlay MTU less overhead"
            );
        }
    }
    for a in addrs {
        dev.add_address(a.addr, a.len)
            .map_err(|e| format!("host: cannot add {a} to {name}: {e}"))?;
    }
    let gso_max = gso_max_size(config, ethernet);
    if host.offloads {
        // A kernel that refuses it only costs throughput.
        if let Err(e) = dev.set_gso_max_size(gso_max) {
            tracing::warn!(device = name.as_str(), "cannot limit super-packets: {e}");
        }
    }
    dev.set_up()
        .map_err(|e| format!("host: cannot bring {name} up: {e}"))?;
    tracing::info!(
        device = name.as_str(),
        %kind,
        mtu,
        gso_max_size = gso_max,
        offloads = %dev.offloads(),
        "device ready"
    );
    Ok(dev)
}

fn socket_options(host: &HostConfig, e: &Endpoints, i: usize) -> UdpOptions {
    UdpOptions {
        reuse_port: host.queues > 1,
        gro: host.offloads,
        gso: host.offloads,
        zero_checksum_tx: e.zero_tx[i],
        zero_checksum_rx: e.zero_rx[i],
        dont_fragment: e.dont_fragment[i],
        recv_buffer: host.receive_buffer,
        send_buffer: host.send_buffer,
        ..UdpOptions::default()
    }
}

/// Binds `host.source_sockets` sending sockets per endpoint for worker
/// `worker` (of `host.queues`), on ports of the endpoint's source port
/// range: spread evenly over the range between workers and sockets, each
/// moving on to the next port while one is taken. Best effort: an endpoint
/// whose range has no free port left sends from its receiving socket.
fn bind_senders(host: &HostConfig, e: &Endpoints, worker: usize) -> Vec<Vec<UdpSocket>> {
    let n = host.source_sockets;
    let mut all = Vec::new();
    for (i, &a) in e.addrs.iter().enumerate() {
        let (lo, hi) = e.source_ports[i];
        let span = usize::from(hi - lo) + 1;
        let opts = UdpOptions {
            reuse_port: false,
            gro: false,
            recv_buffer: 0,
            ..socket_options(host, e, i)
        };
        let mut v = Vec::with_capacity(n);
        let mut tries = 0;
        for k in 0..n.min(span) {
            let mut at = (worker * n + k) * span / (host.queues * n).max(1);
            while tries < span {
                let port = lo + (at % span) as u16;
                tries += 1;
                at += 1;
                if port == a.port() {
                    continue;
                }
                match UdpSocket::bind(SocketAddr::new(a.ip(), port), &opts) {
                    Ok(s) => {
                        v.push(s);
                        break;
                    }
                    Err(err) if err.kind() == std::io::ErrorKind::AddrInUse => continue,
                    Err(err) => {
                        tracing::warn!(local = %a, port, "cannot bind a sending socket: {err}");
                        tries = span;
                    }
                }
            }
        }
        if v.len() < n {
            tracing::warn!(local = %a, bound = v.len(), wanted = n, "fewer sending sockets than asked");
        }
        all.push(v);
    }
    all
}

/// Binds one socket per endpoint for each of `queues` workers.
/// Why endpoint `i` could not be bound, said about the first tunnel on it
/// and the field to change: an address the host does not have, a port
/// another program holds, or the kernel's own words.
fn bind_error(config: &Config, e: &Endpoints, i: usize, err: &std::io::Error) -> String {
    let a = e.addrs[i];
    let Some((t, tunnel)) = config
        .tunnels
        .iter()
        .enumerate()
        .find(|&(t, _)| e.of_tunnel[t] == i)
    else {
        return format!("cannot bind UDP {a}: {err}");
    };
    let at = format!("tunnel[{t}] \"{}\"", tunnel.name);
    match err.kind() {
        std::io::ErrorKind::AddrNotAvailable => format!(
            "{at}.local: {} is not an address of this host (cannot bind UDP {a})",
            a.ip()
        ),
        std::io::ErrorKind::AddrInUse => format!(
            "{at}.local_port: UDP {a} is in use by another socket (another tep, or a kernel tunnel on that port?)"
        ),
        std::io::ErrorKind::PermissionDenied => {
            format!("{at}.local_port: not allowed to bind UDP {a} ({err}); run tep as root or with CAP_NET_BIND_SERVICE")
        }
        _ => format!("{at}.local: cannot bind UDP {a}: {err}"),
    }
}

fn bind_sockets(
    config: &Config,
    host: &HostConfig,
    e: &Endpoints,
) -> Result<Vec<Vec<UdpSocket>>, String> {
    let mut per_worker = Vec::new();
    for _ in 0..host.queues {
        let mut v = Vec::new();
        for (i, &a) in e.addrs.iter().enumerate() {
            let s = UdpSocket::bind(a, &socket_options(host, e, i))
                .map_err(|err| bind_error(config, e, i, &err))?;
            v.push(s);
        }
        per_worker.push(v);
    }
    Ok(per_worker)
}

struct Running {
    config: Arc<Config>,
    endpoints: Endpoints,
    handles: Vec<JoinHandle<std::io::Result<WorkerIo>>>,
    wakes: Vec<Arc<EventFd>>,
    /// A UPF's: each worker's link to the session tables (kept across
    /// reloads: the sessions outlive the workers).
    links: Vec<WorkerLink>,
}

fn start_workers(
    config: Arc<Config>,
    endpoints: Endpoints,
    ios: Vec<WorkerIo>,
    shared: &Arc<Shared>,
    links: Vec<WorkerLink>,
) -> Result<Running, String> {
    shared.stop.store(false, Ordering::Release);
    shared
        .snapshots
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clear();
    let mut handles = Vec::new();
    let mut wakes = Vec::new();
    for (index, io) in ios.into_iter().enumerate() {
        let wake = Arc::new(EventFd::new().map_err(|e| format!("eventfd: {e}"))?);
        let setup = WorkerSetup {
            index,
            config: config.clone(),
            io,
            endpoints: endpoints.clone(),
            cpu: config.host.cpus.get(index).copied(),
            offloads: config.host.offloads,
            wake: wake.clone(),
            shared: shared.clone(),
            sessions: match (&config.pfcp, links.get(index)) {
                (Some(p), Some(l)) => Some((l.clone(), p.buffer_packets, p.buffer_limit)),
                _ => None,
            },
        };
        let h = liveness::spawn(
            &shared.liveness,
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
        endpoints,
        handles,
        wakes,
        links,
    })
}

/// Stops the workers and takes their descriptors back.
fn stop_workers(r: Running, shared: &Shared) -> Vec<WorkerIo> {
    shared.stop.store(true, Ordering::Release);
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

fn io_info(
    devices: &[&Tun],
    config: &Config,
    ios: &[WorkerIo],
    e: &Endpoints,
    uplink: Option<String>,
) -> IoInfo {
    IoInfo {
        uplink: uplink.filter(|_| ios.first().is_some_and(|io| io.uplink.is_some())),
        devices: devices
            .iter()
            .map(|d| DeviceInfo {
                name: d.name().to_string(),
                kind: d.kind().to_string(),
                mtu: device_mtu(config, d.kind() == DeviceKind::Tap),
                offloads: d.offloads().to_string(),
            })
            .collect(),
        sockets: ios
            .first()
            .map(|io| {
                io.sockets
                    .iter()
                    .enumerate()
                    .map(|(i, s)| SocketInfo {
                        local: s.local_addr(),
                        gso: s.capabilities().gso,
                        gro: s.capabilities().gro,
                        zero_checksum_tx: e.zero_tx[i],
                        zero_checksum_rx: e.zero_rx[i],
                        source_ports: io
                            .senders
                            .get(i)
                            .map(|v| v.iter().map(|s| s.local_addr().port()).collect())
                            .unwrap_or_default(),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        workers: ios.len(),
        busy_poll_us: config.host.busy_poll_us,
        adaptive_poll_us: config.host.adaptive_poll_us,
        gateway: None,
    }
}

/// `tep run -c FILE`: runs until SIGTERM/SIGINT. Errors are for the user
/// (they name the field or the system call that failed).
pub fn run(path: &Path) -> Result<(), String> {
    // Blocked here, before any thread starts, so every thread inherits
    // the mask and the signals arrive only through the signalfd.
    let signals = Signals::new(&[Signal::Terminate, Signal::Interrupt, Signal::Hangup])
        .map_err(|e| format!("signalfd: {e}"))?;
    let config = Config::load(path).map_err(|e| e.to_string())?;
    check_mode(&config).map_err(|e| e.to_string())?;
    check_host(&config).map_err(|e| e.to_string())?;
    if config.tunnels.is_empty() {
        tracing::warn!(
            config = %path.display(),
            "no [[tunnel]] in the config: tep runs with nothing to do until a reload adds one"
        );
    }
    let run_as = privilege::of_host(&config.host)?;
    let config = Arc::new(config);
    let host = config.host.clone();
    let mut tun = if needs(&config, false) {
        Some(open_device(&host, &config, false)?)
    } else {
        None
    };
    let mut tap = if needs(&config, true) {
        Some(open_device(&host, &config, true)?)
    } else {
        None
    };
    let mut routes = match (&tun, host.routes) {
        (Some(t), true) => {
            let mut r = routes::Routes::new(t.ifindex(), t.name());
            r.sync(&config)?;
            Some(r)
        }
        _ => None,
    };
    let endpoints = Endpoints::of(&config);
    let sockets = bind_sockets(&config, &host, &endpoints)?;
    let mut tun_queues = tun.as_mut().map(Tun::take_queues).unwrap_or_default();
    let mut tap_queues = tap.as_mut().map(Tun::take_queues).unwrap_or_default();
    let mut uplink_dev = uplink::open_for(&config)?;
    let uplink_header = uplink_dev.as_ref().map(|(_, h)| *h);
    let mut uplink_queues = uplink_dev
        .as_mut()
        .map(|(t, _)| t.take_queues())
        .unwrap_or_default();
    let ios: Vec<WorkerIo> = sockets
        .into_iter()
        .enumerate()
        .map(|(w, s)| WorkerIo {
            tun: (!tun_queues.is_empty()).then(|| tun_queues.remove(0)),
            tap: (!tap_queues.is_empty()).then(|| tap_queues.remove(0)),
            sockets: s,
            senders: bind_senders(&host, &endpoints, w),
            uplink: uplink_header
                .filter(|_| !uplink_queues.is_empty())
                .map(|h| (uplink_queues.remove(0), h)),
        })
        .collect();
    let devices: Vec<&Tun> = tun.iter().chain(tap.iter()).collect();
    let uplink_name = uplink_dev.as_ref().map(|(t, _)| t.name().to_string());
    let info = io_info(&devices, &config, &ios, &endpoints, uplink_name);
    for s in &info.sockets {
        tracing::info!(local = %s.local, gso = s.gso, gro = s.gro, zero_tx = s.zero_checksum_tx, "socket ready");
    }
    let shared = Arc::new(Shared::default());
    let (reload_tx, reload_rx) = mpsc::channel();
    let state = Arc::new(State {
        config: Mutex::new(config.clone()),
        io: Mutex::new(info),
        wakes: Mutex::new(Vec::new()),
        shared: shared.clone(),
        reload: Mutex::new(reload_tx),
        main_wake: EventFd::new().map_err(|e| format!("eventfd: {e}"))?,
        kernel: Box::new(state::UdpDrops),
    });
    // A UPF: the session tables' control plane, its links to the workers,
    // and the PFCP socket (bound while root).
    let (sessions, links) = match &config.pfcp {
        Some(p) => {
            let n3_v6 = config.tunnels.iter().map(|t| t.local.is_ipv6()).collect();
            let (s, l) = Sessions::new(p.max_sessions, host.queues, n3_v6);
            (Some((s, n4::bind(p)?)), l)
        }
        None => (None, Vec::new()),
    };
    let control = control::listen("host.control", &host.control, host.control_group.as_deref())?;
    let metrics = host
        .metrics
        .map(|addr| metrics::listen("host.metrics", addr))
        .transpose()?;
    // Everything that needs root is set up; the threads started from here
    // on inherit what the main thread keeps (credentials are per thread).
    if let Some(r) = &run_as {
        r.apply()?;
        r.check_readable(path);
    }
    let mut running = start_workers(config.clone(), endpoints, ios, &shared, links)?;
    *state.wakes.lock().unwrap_or_else(|e| e.into_inner()) = running.wakes.clone();
    let n4 = match sessions {
        Some((sessions, socket)) => Some(n4::N4::start(&config, socket, sessions, state.clone())?),
        None => None,
    };
    let devices: Vec<(String, bool)> = tun
        .iter()
        .map(|t| (t.name().to_string(), false))
        .chain(tap.iter().map(|t| (t.name().to_string(), true)))
        .collect();
    let _links = links::watch(state.clone(), devices)?;
    let control = control.serve(state.clone())?;
    if let Some(listener) = metrics {
        metrics::serve_on(listener, state.clone())?;
    }
    tracing::info!(
        tunnels = config.tunnels.len(),
        workers = host.queues,
        control = host.control.as_str(),
        "tep running"
    );

    crate::daemon::until_stopped(path, &signals, &state, &reload_rx, || {
        reload(
            path,
            &mut running,
            &state,
            tun.as_ref(),
            tap.as_ref(),
            routes.as_mut(),
            n4.as_ref(),
        )
        .map_err(|e| privilege::explain(run_as.as_ref(), e))
    })?;
    if let Some(n) = n4 {
        n.stop();
    }
    let _ = stop_workers(running, &shared);
    if let Some(r) = routes.as_mut() {
        r.clear();
    }
    control.remove();
    tracing::info!("stopped");
    Ok(())
}

/// Re-reads the config, makes the routes follow it and restarts the
/// workers with it; on any error the running workers and routes are left
/// as they were.
fn reload(
    path: &Path,
    running: &mut Running,
    state: &State,
    tun: Option<&Tun>,
    tap: Option<&Tun>,
    routes: Option<&mut routes::Routes>,
    n4: Option<&n4::N4>,
) -> Result<(), String> {
    let shared = &state.shared;
    let new = Config::load(path).map_err(|e| e.to_string())?;
    check_mode(&new).map_err(|e| e.to_string())?;
    check_host(&new).map_err(|e| e.to_string())?;
    let old = running.config.clone();
    n4::check_kept(&old, &new)?;
    if new.host != old.host {
        return Err(
            "host: the [host] section changed; devices, queues and listeners change only with a restart"
                .to_string(),
        );
    }
    for (i, t) in new.tunnels.iter().enumerate() {
        let have = if t.kind.carries_ethernet() {
            tap.is_some()
        } else {
            tun.is_some()
        };
        if !have {
            return Err(format!(
                "tunnel[{i}] \"{}\".kind: {} needs the {}, which tep did not open at start; restart tep",
                t.name,
                t.kind,
                if t.kind.carries_ethernet() { "TAP" } else { "TUN" }
            ));
        }
    }
    let endpoints = Endpoints::of(&new);
    // New endpoints are bound before anything stops, so that a port in
    // use refuses the reload instead of breaking the running config.
    let mut fresh: Vec<Vec<Option<UdpSocket>>> = Vec::new();
    for _ in 0..new.host.queues {
        let mut v = Vec::new();
        for (i, &a) in endpoints.addrs.iter().enumerate() {
            // A kept address keeps its socket, its options set afresh once
            // the workers stop (`set_policy`).
            if running.endpoints.addrs.contains(&a) {
                v.push(None);
            } else {
                let opts = socket_options(&new.host, &endpoints, i);
                let s =
                    UdpSocket::bind(a, &opts).map_err(|e| bind_error(&new, &endpoints, i, &e))?;
                v.push(Some(s));
            }
        }
        fresh.push(v);
    }
    // Sending sockets are bound afresh (ports the running ones hold are
    // skipped); they hold no state worth keeping.
    let mut senders: Vec<Vec<Vec<UdpSocket>>> = (0..new.host.queues)
        .map(|w| bind_senders(&new.host, &endpoints, w))
        .collect();
    // Routes last among what can fail (a daemon without CAP_NET_ADMIN
    // cannot change them), and put back as they were if they do.
    if let Some(r) = routes {
        r.sync(&new).inspect_err(|_| {
            let _ = r.sync(&old);
        })?;
    }
    let new = Arc::new(new);
    let old_running = std::mem::replace(
        running,
        Running {
            config: old.clone(),
            endpoints: running.endpoints.clone(),
            handles: Vec::new(),
            wakes: Vec::new(),
            links: running.links.clone(),
        },
    );
    let old_endpoints = old_running.endpoints.clone();
    let ios = stop_workers(old_running, shared);
    shared.carry_over(&old);
    let mut new_ios = Vec::new();
    for (mut io, fresh) in ios.into_iter().zip(fresh) {
        let mut old_sockets: Vec<Option<UdpSocket>> = io.sockets.drain(..).map(Some).collect();
        let sockets = fresh
            .into_iter()
            .enumerate()
            .map(|(i, f)| match f {
                Some(s) => s,
                None => {
                    let j = old_endpoints
                        .addrs
                        .iter()
                        .position(|&x| x == endpoints.addrs[i])
                        .unwrap_or(0);
                    let mut s = old_sockets[j].take().unwrap_or_else(|| {
                        // Unreachable: each old endpoint is kept once.
                        panic!("endpoint {} kept twice", endpoints.addrs[i])
                    });
                    let changed = old_endpoints.zero_tx[j] != endpoints.zero_tx[i]
                        || old_endpoints.zero_rx[j] != endpoints.zero_rx[i]
                        || old_endpoints.dont_fragment[j] != endpoints.dont_fragment[i];
                    if changed {
                        if let Err(e) = s.set_policy(&socket_options(&new.host, &endpoints, i)) {
                            tracing::warn!(local = %endpoints.addrs[i], "keeps its old socket options: {e}");
                        }
                    }
                    s
                }
            })
            .collect();
        io.sockets = sockets;
        io.senders = std::mem::take(&mut senders[new_ios.len()]);
        new_ios.push(io);
    }
    // The device MTU follows the tunnels as at start: one with more
    // overhead lowers it (what `show tunnels` reports and the workers cut
    // TCP to). A fixed `host.mtu` stays: [host] is unchanged.
    for (dev, ethernet) in [(tun, false), (tap, true)] {
        let want = device_mtu(&new, ethernet);
        match dev {
            Some(d) if want != device_mtu(&old, ethernet) => match d.set_mtu(want) {
                Ok(()) => tracing::info!(
                    device = d.name(),
                    mtu = want,
                    "device MTU follows the tunnels"
                ),
                Err(e) => tracing::warn!(device = d.name(), "cannot set MTU {want}: {e}"),
            },
            _ => {}
        }
    }
    let devices: Vec<&Tun> = tun.iter().chain(tap.iter()).copied().collect();
    let mut io = state.io.lock().unwrap_or_else(|e| e.into_inner());
    let uplink = io.uplink.clone();
    *io = io_info(&devices, &new, &new_ios, &endpoints, uplink);
    drop(io);
    // The new workers' session tables start empty: every session is
    // queued for them before they run.
    if let Some(n) = n4 {
        n.replay();
    }
    let links = running.links.clone();
    *running = start_workers(new.clone(), endpoints, new_ios, shared, links)?;
    *state.wakes.lock().unwrap_or_else(|e| e.into_inner()) = running.wakes.clone();
    *state.config.lock().unwrap_or_else(|e| e.into_inner()) = new;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(text: &str) -> Config {
        Config::parse(text).unwrap()
    }

    #[test]
    fn mtu_is_underlay_minus_the_worst_overhead_per_device() {
        // The underlay MTU is pinned: this host's interfaces do not count.
        let c = cfg(r#"
[host]
underlay_mtu = 1500
[[tunnel]]
name = "v"
kind = "vxlan"
local = "10.0.0.1"
remote = "10.0.0.2"
vni = 1
[[tunnel]]
name = "g"
kind = "gtpu"
local = "2001:db8::1"
remote = "2001:db8::2"
teid = 1
qfi = 5
zero_checksum_rx = true
inner_prefixes = ["10.9.0.0/16"]
[[tunnel]]
name = "f"
kind = "fou-ipip"
local = "10.0.0.1"
remote = "10.0.0.2"
inner_prefixes = ["10.8.0.0/16"]
"#);
        // VXLAN over IPv4: 20 + 8 + 8 + inner Ethernet 14 = 50 (Linux's
        // vxlan default MTU is 1450 for the same reason).
        assert_eq!(device_mtu(&c, true), 1450);
        // GTP-U over IPv6 with a PDU session container: IPv6 40 + UDP 8 +
        // GTP-U 8 + its optional fields 4 + the container 4 = 64; FOU over
        // IPv4 20 + 8 = 28. The TUN carries both: the larger counts.
        assert_eq!(overhead(&c.tunnels[1]), 64);
        assert_eq!(overhead(&c.tunnels[2]), 28);
        assert_eq!(device_mtu(&c, false), 1436);
    }

    #[test]
    fn super_packets_fit_one_udp_gso_send() {
        // The underlay MTU is pinned: this host's interfaces do not count.
        let c = cfg(r#"
[host]
underlay_mtu = 1500
[[tunnel]]
name = "v"
kind = "vxlan"
local = "10.0.0.1"
remote = "10.0.0.2"
vni = 1
"#);
        // VXLAN/IPv4: datagrams of 8 + 14 + 1450 = 1472 bytes, 44 to a
        // send; 44 segments of at most 1370 bytes of payload.
        assert_eq!(gso_max_size(&c, true), 44 * 1370);
        // For the usual MSSs (IPv4/IPv6, with and without TCP options) the
        // datagrams of a super-packet that size fit one send: each is the
        // tunnel header, Ethernet, IP + TCP (40 to 80 bytes) and the MSS,
        // and at most 8 + 14 + the MTU. (A far smaller MSS just takes two
        // sends, as before.)
        for (mss, headers) in [
            (1410u32, 40u32),
            (1398, 52),
            (1390, 60),
            (1378, 72),
            (1370, 80),
        ] {
            let segments = gso_max_size(&c, true) / mss;
            let datagram = 8 + 14 + (headers + mss).min(1450);
            assert!(
                segments * datagram <= 65507,
                "mss {mss}: {segments} × {datagram}"
            );
        }
    }

    #[test]
    fn tunnels_sharing_a_socket_agree_on_zero_checksums() {
        let c = cfg(r#"
[[tunnel]]
name = "a"
kind = "gue"
local = "10.0.0.1"
remote = "10.0.0.2"
checksum = "zero"
inner_prefixes = ["10.1.0.0/16"]
[[tunnel]]
name = "b"
kind = "gue"
local = "10.0.0.1"
remote = "10.0.0.3"
inner_prefixes = ["10.2.0.0/16"]
"#);
        let e = check_host(&c).unwrap_err();
        assert_eq!(e.field, "tunnel[1] \"b\".checksum");
        assert!(e.message.contains("10.0.0.1:6080"), "{e}");
    }
}
