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

pub mod frames;
pub mod next_hops;
pub mod rings;
pub mod steer;
pub mod worker;

use crate::daemon::liveness::Beat;
use crate::daemon::run::{Mode, Section, WorkerCommon};
use crate::daemon::state::{
    GatewayInfo, InterfaceInfo, IoInfo, KernelCounters, RingInfo, Shared, State,
};
use frames::{Layout, CHUNK};
use next_hops::Resolver;
use rings::Side;
use std::net::IpAddr;
use std::os::fd::AsFd;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tep_config::{Config, ConfigError, GatewayConfig, RunMode, XdpMode};
use tep_dataplane::{Pool, RouterOptions, HEADROOM};
use tep_sys::raw::RawIp;
use tep_sys::{Role, Steering, Umem, XskOptions, XskSocket};
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

/// Gateway mode's rule for networks: the inner interface is an Ethernet
/// trunk port whose VLANs are networks, so a network bridges Ethernet
/// (VXLAN, Geneve); an L3 network there would need tep to route between
/// the port and the network, which it does not.
fn check_networks(config: &Config) -> Result<(), ConfigError> {
    let networks = config.tunnels.iter().filter(|t| t.is_network());
    match networks
        .enumerate()
        .find(|(_, t)| !t.kind.carries_ethernet())
    {
        Some((index, t)) => Err(tep_dataplane::config::network_error(
            index,
            Some(&t.name),
            "kind",
            format!(
                "gateway mode carries L2 networks (vxlan, geneve) on the inner interface's VLANs, not {}",
                t.kind
            ),
        )),
        None => Ok(()),
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

fn xdp_mode(m: XdpMode) -> tep_sys::Mode {
    match m {
        XdpMode::Native => tep_sys::Mode::Native,
        XdpMode::Generic => tep_sys::Mode::Generic,
        XdpMode::Auto => tep_sys::Mode::Auto,
    }
}

fn ring_options(ring: u32, multi_buffer: bool) -> XskOptions {
    XskOptions {
        rx: ring,
        tx: ring,
        fill: 2 * ring,
        completion: ring,
        multi_buffer,
        ..XskOptions::default()
    }
}

/// The buffers for the larger MTU of the two interfaces.
fn layout(underlay: &Interface, inner: &Interface) -> Layout {
    Layout::for_mtu(underlay.mtu.max(inner.mtu))
}

/// An error of attaching or binding on interface `i` (`field`) that needs
/// multi-buffer: said so, with what to do.
fn refused(
    field: &str,
    i: &Interface,
    multi_buffer: bool,
    what: &str,
    e: std::io::Error,
) -> String {
    use std::io::ErrorKind::{PermissionDenied, ResourceBusy};
    if multi_buffer && !matches!(e.kind(), PermissionDenied | ResourceBusy) {
        frames::no_multi_buffer(field, &i.name, i.mtu, what, &e.to_string())
    } else {
        format!("{field}: {what} on {}: {e}", i.name)
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
    layout: Layout,
) -> Result<WorkerIo, String> {
    let mut pool = Pool::new(buffers(g.ring_size), layout.buffer - HEADROOM);
    let (addr, len) = pool.region();
    // SAFETY: the region is the pool's arena, page-aligned, alive as long
    // as the pool; WorkerIo declares the sockets before the pool, so they
    // close (and the kernel lets go of the memory) before it is freed.
    // The kernel writes only into buffers the worker put on a fill ring,
    // which the pool counts as in use until they come back.
    let umem = unsafe { Umem::register(addr, len, CHUNK as u32) }
        .map_err(|e| format!("AF_XDP UMEM: {e}"))?;
    let opts = ring_options(g.ring_size, layout.multi_buffer);
    let what = format!("binding an AF_XDP socket to queue {queue}");
    let u = bind(|| XskSocket::new(&umem, underlay.index, queue, &opts))
        .map_err(|e| refused("gateway.underlay", underlay, opts.multi_buffer, &what, e))?;
    let i = bind(|| XskSocket::shared(&u, inner.index, queue, &opts))
        .map_err(|e| refused("gateway.inner", inner, opts.multi_buffer, &what, e))?;
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

/// Gateway mode's I/O, as opened while root: the interfaces and the
/// steering programs attached to them.
#[derive(Debug)]
pub struct Opened {
    underlay: Interface,
    inner: Interface,
    steering: Steering,
    modes: [tep_sys::AttachMode; 2],
}

/// Gateway mode's I/O, serving: the interfaces, the steering programs and
/// the next-hop resolver.
#[derive(Debug)]
pub struct Gateway {
    underlay: Interface,
    inner: Interface,
    steering: Arc<Mutex<Steering>>,
    resolver: Resolver,
    /// A UPF's data networks' own routers (fixed: a reload keeps
    /// `[pfcp]`).
    dn_routers: Option<Arc<tep_dataplane::dn_arp::DnRouters>>,
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

fn io_info(g: &GatewayConfig, opened: &Opened, zero_copy: bool) -> IoInfo {
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
    let o = ring_options(g.ring_size, false);
    IoInfo {
        workers: g.queues,
        busy_poll_us: g.busy_poll_us,
        adaptive_poll_us: g.adaptive_poll_us,
        uplink: None,
        gateway: Some(GatewayInfo {
            interfaces: vec![
                iface("underlay", &opened.underlay, opened.modes[0]),
                iface("inner", &opened.inner, opened.modes[1]),
            ],
            rings: RingInfo {
                rx: o.rx,
                tx: o.tx,
                fill: o.fill,
                completion: o.completion,
            },
            zero_copy,
            path_mtu: opened.underlay.mtu,
        }),
        ..IoInfo::default()
    }
}

/// Loads the steering programs, points them at `config`'s tunnels and
/// attaches them to both interfaces.
fn attach(
    g: &GatewayConfig,
    config: &Config,
    underlay: &Interface,
    inner: &Interface,
) -> Result<(Steering, [tep_sys::AttachMode; 2]), String> {
    let mut steering =
        Steering::load().map_err(|e| {
            if e.kind() == std::io::ErrorKind::PermissionDenied {
                format!("XDP: not allowed to load the steering programs ({e}); gateway mode starts as root (eBPF and XDP need CAP_BPF, CAP_PERFMON and CAP_NET_ADMIN, AF_XDP sockets CAP_NET_RAW)")
            } else {
                // A kernel without XDP multi-buffer refuses the xdp.frags
                // flag and bpf_xdp_load_bytes.
                format!("XDP: cannot load the steering programs: {e} (they are multi-buffer XDP programs: Linux 5.18 or later)")
            }
        })?;
    steer::configure(&mut steering, None, config, inner.mac)?;
    let mode = xdp_mode(g.xdp_mode);
    let multi_buffer = layout(underlay, inner).multi_buffer;
    let mut modes = [tep_sys::AttachMode::Native; 2];
    for (k, (role, i, field)) in [
        (Role::Underlay, underlay, "gateway.underlay"),
        (Role::Inner, inner, "gateway.inner"),
    ]
    .into_iter()
    .enumerate()
    {
        modes[k] = steering.attach(role, i.index, mode).map_err(|e| {
            let what = format!("attaching XDP ({})", role.program_name());
            refused(field, i, multi_buffer, &what, e)
        })?;
        tracing::info!(
            interface = i.name.as_str(),
            asked = g.xdp_mode.name(),
            mode = %modes[k],
            "XDP program attached"
        );
    }
    Ok((steering, modes))
}

impl Mode for Gateway {
    type Opened = Opened;
    type Io = WorkerIo;
    type Setup = WorkerSetup;
    type Staged = ();

    fn check(config: &Config) -> Result<Section<'_>, ConfigError> {
        let g = check_gateway(config)?;
        check_networks(config)?;
        Ok(Section {
            name: "gateway",
            control: &g.control,
            control_group: g.control_group.as_deref(),
            metrics: g.metrics,
            queues: g.queues,
            user: g.user.as_deref(),
            group: g.group.as_deref(),
            capabilities: g.capabilities,
        })
    }

    fn open(config: &Config) -> Result<(Opened, Vec<WorkerIo>), String> {
        let g = check_gateway(config).map_err(|e| e.to_string())?;
        let underlay = interface("gateway.underlay", &g.underlay)?;
        let inner = interface("gateway.inner", &g.inner)?;
        let (mut steering, modes) = attach(g, config, &underlay, &inner)?;
        let layout = layout(&underlay, &inner);
        if layout.multi_buffer {
            tracing::info!(
                mtu = underlay.mtu.max(inner.mtu),
                buffer = layout.buffer,
                pool_mib = (buffers(g.ring_size) * layout.buffer) >> 20,
                "frames longer than a {CHUNK}-byte chunk: AF_XDP multi-buffer, buffers of {} pages per queue",
                layout.pages()
            );
        }
        let mut ios = Vec::new();
        for q in 0..g.queues as u32 {
            ios.push(open_queue(g, q, &underlay, &inner, &mut steering, layout)?);
        }
        let opened = Opened {
            underlay,
            inner,
            steering,
            modes,
        };
        Ok((opened, ios))
    }

    fn serve(
        opened: Opened,
        config: &Config,
        ios: &[WorkerIo],
        shared: &Arc<Shared>,
    ) -> Result<(Gateway, IoInfo, Box<dyn KernelCounters>), String> {
        let g = check_gateway(config).map_err(|e| e.to_string())?;
        let zero_copy = ios.iter().all(|w| w.underlay.socket.zero_copy());
        let info = io_info(g, &opened, zero_copy);
        let capacity = next_hops::Capacity {
            routes: g.route_cache,
            hops: g.next_hops,
        };
        let resolver = Resolver::start(
            vec![opened.underlay.clone(), opened.inner.clone()],
            &remotes_of(config),
            capacity,
            &shared.liveness,
        )?;
        tracing::info!(
            inner = g.inner.as_str(),
            underlay = g.underlay.as_str(),
            zero_copy,
            "gateway ready"
        );
        let dn_routers = steer::dn_routers(config, opened.inner.mac);
        let gw = Gateway {
            dn_routers,
            underlay: opened.underlay,
            inner: opened.inner,
            steering: Arc::new(Mutex::new(opened.steering)),
            resolver,
        };
        let kernel = Box::new(steer::SteeringCounters {
            steering: gw.steering.clone(),
            next_hops: gw.resolver.published.clone(),
            dn_routers: gw.dn_routers.clone(),
        });
        Ok((gw, info, kernel))
    }

    fn setup(&self, io: WorkerIo, common: WorkerCommon) -> WorkerSetup {
        let g = common.config.gateway.as_ref();
        WorkerSetup {
            io,
            cpu: g.and_then(|g| g.cpus.get(common.index).copied()),
            fill_target: g.map_or(0, |g| g.ring_size as usize),
            router: router(&self.inner, &self.underlay),
            next_hops: self.resolver.published.clone(),
            dn_routers: self.dn_routers.clone(),
            common,
        }
    }

    fn work(setup: WorkerSetup, beat: &Beat) -> std::io::Result<WorkerIo> {
        worker::run(setup, beat)
    }

    fn stage(&mut self, old: &Config, new: &Config) -> Result<(), String> {
        if new.gateway != old.gateway {
            return Err(
                "gateway: the [gateway] section changed; interfaces, queues and rings change only with a restart"
                    .to_string(),
            );
        }
        Ok(())
    }

    /// Moves the steering maps to the new tunnels; the workers come back
    /// either way: with the new tunnels, or (the maps refused) the old.
    fn switch(
        &mut self,
        (): (),
        (old, new): (Arc<Config>, Arc<Config>),
        ios: Vec<WorkerIo>,
        _: &State,
    ) -> (Arc<Config>, Vec<WorkerIo>, Result<(), String>) {
        let steered = steer::configure(
            &mut self.steering.lock().unwrap_or_else(|e| e.into_inner()),
            Some(&old),
            &new,
            self.inner.mac,
        );
        let (config, result) = match steered {
            Ok(()) => (new, Ok(())),
            Err(e) => (old, Err(e)),
        };
        self.resolver.published.pin(&remotes_of(&config));
        (config, ios, result)
    }

    /// The programs come off both interfaces, leaving them as they were.
    fn stop(self) {
        drop(self.resolver);
        let mut steering = self.steering.lock().unwrap_or_else(|e| e.into_inner());
        for role in [Role::Underlay, Role::Inner] {
            if let Err(e) = steering.detach(role) {
                tracing::warn!(?role, "detach: {e}");
            }
        }
    }
}

/// `tep run -c FILE` with a `[gateway]` section.
pub fn run(path: &Path) -> Result<(), String> {
    crate::daemon::run::run::<Gateway>(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_l3_network_is_refused_naming_it() {
        let text = |kind: &str, id: &str| {
            format!(
                "[gateway]\ninner = \"a\"\nunderlay = \"b\"\n[[network]]\nname = \"blue\"\nkind = \"vxlan\"\nvni = 1\nvlan = 10\nlocal = \"192.0.2.1\"\n[[network]]\nname = \"pods\"\nkind = \"{kind}\"\n{id}\nvlan = 20\nlocal = \"192.0.2.1\"\n"
            )
        };
        let ok = Config::parse(&text("geneve", "vni = 2")).unwrap();
        assert!(check_networks(&ok).is_ok());
        let l3 = Config::parse(&text("gue", "")).unwrap();
        let e = check_networks(&l3).unwrap_err();
        assert_eq!(e.field, "network[1] \"pods\".kind");
        assert!(e.message.contains("not gue"), "{e}");
    }
}
