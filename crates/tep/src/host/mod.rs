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

mod data_networks;
mod device_io;
pub mod endpoints;
mod links;
mod routes;
mod udp_io;
pub mod uplink;
pub mod worker;

use crate::daemon::liveness::Beat;
use crate::daemon::run::{Mode, Section, WorkerCommon};
use crate::daemon::state::{self, DeviceInfo, IoInfo, KernelCounters, Shared, SocketInfo, State};

use endpoints::Endpoints;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use tep_config::{ChecksumMode, Config, ConfigError, HostConfig, RunMode, TunnelConfig};
use tep_dataplane::{overhead, LinkHeader};
use tep_sys::{DeviceKind, Offloads, Tun, TunOptions, TunQueue, UdpOptions, UdpSocket};
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
        .filter(|t| t.kind.carries_ethernet() == ethernet && !t.is_network())
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
    data_networks::check(config)?;
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

/// Whether a tunnel (not a network: each has its own device) needs the
/// TAP (`ethernet`) or the TUN.
fn needs(config: &Config, ethernet: bool) -> bool {
    config
        .tunnels
        .iter()
        .any(|t| t.kind.carries_ethernet() == ethernet && !t.is_network())
}

/// The device of a network: its `device`, or `tep-<name>` cut to the 15
/// bytes of an interface name.
pub fn network_device(t: &TunnelConfig) -> String {
    match t.network.as_ref().and_then(|n| n.device.clone()) {
        Some(d) => d,
        None => {
            let mut name = format!("tep-{}", t.name);
            while name.len() > 15 {
                name.pop();
            }
            name
        }
    }
}

/// The MTU of a network's device: what leaves in one underlay packet.
pub fn network_mtu(config: &Config, t: &TunnelConfig) -> u32 {
    config
        .host
        .mtu
        .unwrap_or_else(|| underlay_mtu(config, t).saturating_sub(overhead(t)))
        .max(576)
}

/// Opens each network's device (a TAP for an L2 network, a TUN for an L3
/// one) with `host.queues` queues: (its tunnel index, the device).
fn open_networks(config: &Config) -> Result<Vec<(u32, Tun)>, String> {
    let host = &config.host;
    let mut out = Vec::new();
    for (i, t) in config
        .tunnels
        .iter()
        .enumerate()
        .filter(|(_, t)| t.is_network())
    {
        let name = network_device(t);
        let ethernet = t.kind.carries_ethernet();
        let dev = Tun::open(&TunOptions {
            name: name.clone(),
            kind: if ethernet {
                DeviceKind::Tap
            } else {
                DeviceKind::Tun
            },
            queues: host.queues,
            vnet_hdr: host.offloads,
            vnet_hdr_tunnel: false,
            offloads: if host.offloads {
                Offloads::all()
            } else {
                Offloads::none()
            },
        })
        .map_err(|e| format!("network \"{}\".device: cannot open {name}: {e}", t.name))?;
        let mtu = network_mtu(config, t);
        dev.set_mtu(mtu).map_err(|e| {
            format!(
                "network \"{}\": cannot set MTU {mtu} on {name}: {e}",
                t.name
            )
        })?;
        dev.set_up()
            .map_err(|e| format!("network \"{}\": cannot bring {name} up: {e}", t.name))?;
        tracing::info!(network = %t.name, device = %name, mtu, "network device ready");
        out.push((i as u32, dev));
    }
    Ok(out)
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

/// Per worker, a socket for each endpoint of `e` but those `kept` (`None`:
/// a reload keeps the running one).
fn bind_sockets(
    config: &Config,
    e: &Endpoints,
    kept: impl Fn(SocketAddr) -> bool,
) -> Result<Vec<Vec<Option<UdpSocket>>>, String> {
    let mut per_worker = Vec::new();
    for _ in 0..config.host.queues {
        let mut v = Vec::new();
        for (i, &a) in e.addrs.iter().enumerate() {
            if kept(a) {
                v.push(None);
                continue;
            }
            let s = UdpSocket::bind(a, &socket_options(&config.host, e, i))
                .map_err(|err| bind_error(config, e, i, &err))?;
            v.push(Some(s));
        }
        per_worker.push(v);
    }
    Ok(per_worker)
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

/// Host mode's I/O: the devices, their routes, the uplink, the UDP
/// endpoints.
pub struct Host {
    tun: Option<Tun>,
    tap: Option<Tun>,
    /// Each network's device, with its tunnel index.
    networks: Vec<(u32, Tun)>,
    routes: Option<routes::KernelRoutes>,
    /// A UPF's data networks' own TUNs.
    data_tuns: data_networks::DataTuns,
    /// `host.uplink`'s device, held open while the workers write to its
    /// queues.
    uplink: Option<Tun>,
    endpoints: Endpoints,
    links: Option<links::LinkWatch>,
}

/// What a reload binds before the running workers stop.
pub struct Staged {
    endpoints: Endpoints,
    /// Per worker and endpoint: a new socket, or `None` where the running
    /// one is kept.
    fresh: Vec<Vec<Option<UdpSocket>>>,
    senders: Vec<Vec<Vec<UdpSocket>>>,
}

impl Host {
    fn devices(&self) -> impl Iterator<Item = &Tun> {
        self.tun
            .iter()
            .chain(self.tap.iter())
            .chain(self.networks.iter().map(|(_, d)| d))
            .chain(self.data_tuns.tuns.iter().map(|(_, d)| d))
    }

    fn io_info(&self, config: &Config, ios: &[WorkerIo]) -> IoInfo {
        let devices: Vec<&Tun> = self.devices().collect();
        let uplink = self.uplink.as_ref().map(|t| t.name().to_string());
        io_info(&devices, config, ios, &self.endpoints, uplink)
    }

    /// A reload's new tunnels each on a device tep opened at start.
    fn check_devices(&self, new: &Config) -> Result<(), String> {
        for (i, t) in new.tunnels.iter().enumerate() {
            if t.is_network() {
                let name = network_device(t);
                if !self.networks.iter().any(|(_, d)| d.name() == name) {
                    return Err(format!(
                        "network \"{}\": its device {name} was not opened at start; restart tep to add a network",
                        t.name
                    ));
                }
                continue;
            }
            let have = if t.kind.carries_ethernet() {
                self.tap.is_some()
            } else {
                self.tun.is_some()
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
        Ok(())
    }

    /// Endpoint `i` of `new`'s socket: fresh, or the running one taken
    /// from `old_sockets`, its options set again where they changed.
    fn keep_socket(
        &self,
        new: &Config,
        new_endpoints: &Endpoints,
        i: usize,
        old_sockets: &mut [Option<UdpSocket>],
    ) -> UdpSocket {
        let old = &self.endpoints;
        let j = old
            .addrs
            .iter()
            .position(|&x| x == new_endpoints.addrs[i])
            .unwrap_or(0);
        let mut s = old_sockets[j].take().unwrap_or_else(|| {
            // Unreachable: each old endpoint is kept once.
            panic!("endpoint {} kept twice", new_endpoints.addrs[i])
        });
        let changed = old.zero_tx[j] != new_endpoints.zero_tx[i]
            || old.zero_rx[j] != new_endpoints.zero_rx[i]
            || old.dont_fragment[j] != new_endpoints.dont_fragment[i];
        if changed {
            if let Err(e) = s.set_policy(&socket_options(&new.host, new_endpoints, i)) {
                tracing::warn!(local = %new_endpoints.addrs[i], "keeps its old socket options: {e}");
            }
        }
        s
    }

    /// The device MTU follows the tunnels as at start: one with more
    /// overhead lowers it (what `show tunnels` reports and the workers cut
    /// TCP to). A fixed `host.mtu` stays: [host] is unchanged.
    fn follow_mtu(&self, old: &Config, new: &Config) {
        for (dev, ethernet) in [(&self.tun, false), (&self.tap, true)] {
            let want = device_mtu(new, ethernet);
            match dev {
                Some(d) if want != device_mtu(old, ethernet) => match d.set_mtu(want) {
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
    }
}

/// The workers' descriptors: one queue of each device and of the uplink,
/// one socket per endpoint and its senders.
fn worker_ios(
    config: &Config,
    devices: [Option<&mut Tun>; 3],
    networks: &mut [(u32, Tun)],
    data_tuns: &mut [(u8, Tun)],
    sockets: Vec<Vec<UdpSocket>>,
    endpoints: &Endpoints,
    uplink_header: Option<LinkHeader>,
) -> Vec<WorkerIo> {
    let [mut tun, mut tap, mut uplink] =
        devices.map(|d| d.map(Tun::take_queues).unwrap_or_default());
    let mut network_queues: Vec<(u32, bool, Vec<TunQueue>)> = networks
        .iter_mut()
        .map(|(t, d)| (*t, d.kind() == DeviceKind::Tap, d.take_queues()))
        .collect();
    let mut data_queues: Vec<(u8, Vec<TunQueue>)> = data_tuns
        .iter_mut()
        .map(|(n, d)| (*n, d.take_queues()))
        .collect();
    sockets
        .into_iter()
        .enumerate()
        .map(|(w, s)| WorkerIo {
            tun: (!tun.is_empty()).then(|| tun.remove(0)),
            tap: (!tap.is_empty()).then(|| tap.remove(0)),
            networks: network_queues
                .iter_mut()
                .filter(|(_, _, q)| !q.is_empty())
                .map(|(t, ethernet, q)| (*t, *ethernet, q.remove(0)))
                .collect(),
            // Each with its network: the writers find a queue by it.
            data_tuns: data_queues
                .iter_mut()
                .filter(|(_, q)| !q.is_empty())
                .map(|(n, q)| (*n, q.remove(0)))
                .collect(),
            sockets: s,
            senders: bind_senders(&config.host, endpoints, w),
            uplink: uplink_header
                .filter(|_| !uplink.is_empty())
                .map(|h| (uplink.remove(0), h)),
        })
        .collect()
}

impl Mode for Host {
    type Opened = Host;
    type Io = WorkerIo;
    type Setup = WorkerSetup;
    type Staged = Staged;

    fn check(config: &Config) -> Result<Section<'_>, ConfigError> {
        check_mode(config)?;
        check_host(config)?;
        let h = &config.host;
        Ok(Section {
            name: "host",
            control: &h.control,
            control_group: h.control_group.as_deref(),
            metrics: h.metrics,
            queues: h.queues,
            user: h.user.as_deref(),
            group: h.group.as_deref(),
            capabilities: h.capabilities,
        })
    }

    fn open(config: &Config) -> Result<(Host, Vec<WorkerIo>), String> {
        let host = &config.host;
        if config.tunnels.is_empty() {
            tracing::warn!(
                "no [[tunnel]] in the config: tep runs with nothing to do until a reload adds one"
            );
        }
        let mut tun = needs(config, false)
            .then(|| open_device(host, config, false))
            .transpose()?;
        let mut tap = needs(config, true)
            .then(|| open_device(host, config, true))
            .transpose()?;
        let mut networks = open_networks(config)?;
        let routes = match (&tun, host.routes) {
            (Some(t), true) => {
                let mut r = routes::KernelRoutes::new(t.ifindex(), t.name());
                r.sync(config)?;
                Some(r)
            }
            _ => None,
        };
        // After the host TUN's routes: a UE pool that networks share stays
        // routed into the host TUN (the kernel routes each prefix once).
        let mut data_tuns = data_networks::DataTuns::open(config, host.routes)?;
        let endpoints = Endpoints::of(config);
        let sockets = bind_sockets(config, &endpoints, |_| false)?
            .into_iter()
            .map(|v| v.into_iter().flatten().collect())
            .collect();
        let (mut uplink, header) = match uplink::open_for(config)? {
            Some((t, h)) => (Some(t), Some(h)),
            None => (None, None),
        };
        let devices = [tun.as_mut(), tap.as_mut(), uplink.as_mut()];
        let ios = worker_ios(
            config,
            devices,
            &mut networks,
            &mut data_tuns.tuns,
            sockets,
            &endpoints,
            header,
        );
        let host = Host {
            tun,
            tap,
            networks,
            routes,
            data_tuns,
            uplink,
            endpoints,
            links: None,
        };
        Ok((host, ios))
    }

    fn serve(
        host: Host,
        config: &Config,
        ios: &[WorkerIo],
        _: &Arc<Shared>,
    ) -> Result<(Host, IoInfo, Box<dyn KernelCounters>), String> {
        let info = host.io_info(config, ios);
        for s in &info.sockets {
            tracing::info!(local = %s.local, gso = s.gso, gro = s.gro, zero_tx = s.zero_checksum_tx, "socket ready");
        }
        Ok((host, info, Box::new(state::UdpDrops)))
    }

    fn watch(&mut self, state: &Arc<State>) -> Result<(), String> {
        let devices = self
            .devices()
            .map(|t| (t.name().to_string(), t.kind() == DeviceKind::Tap))
            .collect();
        self.links = Some(links::watch(state.clone(), devices)?);
        Ok(())
    }

    fn setup(&self, io: WorkerIo, common: WorkerCommon) -> WorkerSetup {
        let host = &common.config.host;
        WorkerSetup {
            cpu: host.cpus.get(common.index).copied(),
            offloads: host.offloads,
            io,
            endpoints: self.endpoints.clone(),
            common,
        }
    }

    fn work(setup: WorkerSetup, beat: &Beat) -> std::io::Result<WorkerIo> {
        worker::run(setup, beat)
    }

    fn stage(&mut self, old: &Config, new: &Config) -> Result<Staged, String> {
        if new.host != old.host {
            return Err(
                "host: the [host] section changed; devices, queues and listeners change only with a restart"
                    .to_string(),
            );
        }
        self.check_devices(new)?;
        let endpoints = Endpoints::of(new);
        // Bound before anything stops, so that a port in use refuses the
        // reload instead of breaking the running config. A kept address
        // keeps its socket, its options set afresh once the workers stop.
        let fresh = bind_sockets(new, &endpoints, |a| self.endpoints.addrs.contains(&a))?;
        // Sending sockets are bound afresh (ports the running ones hold
        // are skipped); they hold no state worth keeping.
        let senders = (0..new.host.queues)
            .map(|w| bind_senders(&new.host, &endpoints, w))
            .collect();
        // Routes last among what can fail (a daemon without CAP_NET_ADMIN
        // cannot change them), and put back as they were if they do.
        if let Some(r) = &mut self.routes {
            r.sync(new).inspect_err(|_| {
                let _ = r.sync(old);
            })?;
        }
        Ok(Staged {
            endpoints,
            fresh,
            senders,
        })
    }

    fn switch(
        &mut self,
        staged: Staged,
        (old, new): (Arc<Config>, Arc<Config>),
        ios: Vec<WorkerIo>,
        state: &State,
    ) -> (Arc<Config>, Vec<WorkerIo>, Result<(), String>) {
        let mut new_ios = Vec::new();
        let e = &staged.endpoints;
        for ((mut io, fresh), senders) in ios.into_iter().zip(staged.fresh).zip(staged.senders) {
            let mut old_sockets: Vec<Option<UdpSocket>> = io.sockets.drain(..).map(Some).collect();
            io.sockets = fresh
                .into_iter()
                .enumerate()
                .map(|(i, f)| f.unwrap_or_else(|| self.keep_socket(&new, e, i, &mut old_sockets)))
                .collect();
            io.senders = senders;
            new_ios.push(io);
        }
        self.endpoints = staged.endpoints;
        self.follow_mtu(&old, &new);
        *state.io.lock().unwrap_or_else(|e| e.into_inner()) = self.io_info(&new, &new_ios);
        (new, new_ios, Ok(()))
    }

    fn stop(mut self) {
        if let Some(r) = self.routes.as_mut() {
            r.clear();
        }
        self.data_tuns.clear();
    }
}

/// `tep run -c FILE` in host mode.
pub fn run(path: &Path) -> Result<(), String> {
    crate::daemon::run::run::<Host>(path)
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
