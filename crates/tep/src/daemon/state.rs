//! What the main thread shares with the control thread and the metrics
//! listener: the config and I/O in effect, the workers' wake-ups and
//! counters (which the workers publish into [`Shared`]), and the way to ask
//! for a reload. It has a module of its own so
//! that those readers depend on it and not on the daemon that fills it.

use super::stats::{Carried, Totals, WorkerSnapshot};
use super::trace::Tracer;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Condvar;
use std::sync::{mpsc, Arc, Mutex};
use tep_config::Config;
use tep_dataplane::overlay::Overlay;
use tep_sys::EventFd;

/// What `tep show tunnels` reports about the I/O in effect.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct IoInfo {
    /// Per device: name, kind, MTU, offloads in effect.
    pub devices: Vec<DeviceInfo>,
    /// Per local endpoint: address, GSO/GRO in effect, zero checksums.
    pub sockets: Vec<SocketInfo>,
    /// Worker threads.
    pub workers: usize,
    /// `host.busy_poll_us` / `gateway.busy_poll_us`: how long workers
    /// poll before they sleep.
    pub busy_poll_us: u32,
    /// `adaptive_poll_us`: workers poll while packets come closer
    /// together than this.
    pub adaptive_poll_us: u32,
    /// Host mode: the uplink TAP tunnel traffic leaves through, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uplink: Option<String>,
    /// Gateway mode's interfaces and rings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gateway: Option<GatewayInfo>,
}

/// What gateway mode runs on.
#[derive(Clone, Debug, serde::Serialize)]
pub struct GatewayInfo {
    /// The two interfaces.
    pub interfaces: Vec<InterfaceInfo>,
    /// Descriptors per ring of each AF_XDP socket.
    pub rings: RingInfo,
    /// Whether the sockets are zero-copy (else the kernel copies each
    /// frame into the UMEM and out of it).
    pub zero_copy: bool,
    /// The largest outer IP packet tep sends (the underlay's MTU).
    pub path_mtu: u32,
}

/// One of gateway mode's interfaces.
#[derive(Clone, Debug, serde::Serialize)]
pub struct InterfaceInfo {
    /// "inner" or "underlay".
    pub role: &'static str,
    /// Its name.
    pub name: String,
    /// Its index.
    pub ifindex: u32,
    /// Its MAC address.
    pub mac: String,
    /// Its MTU.
    pub mtu: u32,
    /// Where the XDP program runs: native, generic.
    pub xdp_mode: String,
}

/// AF_XDP ring sizes.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct RingInfo {
    /// Receive ring.
    pub rx: u32,
    /// Transmit ring.
    pub tx: u32,
    /// Fill ring.
    pub fill: u32,
    /// Completion ring.
    pub completion: u32,
}

/// A TUN/TAP device in use.
#[derive(Clone, Debug, serde::Serialize)]
pub struct DeviceInfo {
    /// Interface name.
    pub name: String,
    /// "tun" or "tap".
    pub kind: String,
    /// MTU set.
    pub mtu: u32,
    /// Offloads the kernel took ("csum tso4 …" or "none").
    pub offloads: String,
}

/// A local UDP endpoint in use.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SocketInfo {
    /// Bound address.
    pub local: SocketAddr,
    /// UDP_SEGMENT in use.
    pub gso: bool,
    /// UDP_GRO in use.
    pub gro: bool,
    /// Sends zero checksums (SO_NO_CHECK / UDP_NO_CHECK6_TX).
    pub zero_checksum_tx: bool,
    /// Accepts zero checksums over IPv6 (UDP_NO_CHECK6_RX).
    pub zero_checksum_rx: bool,
    /// The source ports tunnel traffic leaves from (`host.source_sockets`
    /// of them; first worker's). Empty: the socket's own port.
    pub source_ports: Vec<u16>,
}

/// What the kernel counts about tep's traffic before tep sees it (host
/// mode: its UDP drops; gateway mode: the XDP steering program's
/// counters), read when `tep show` or a scrape asks.
pub trait KernelCounters: Send + Sync + std::fmt::Debug {
    /// What they are, a heading for `show counters`.
    fn about(&self) -> &'static str;
    /// The metric family (after `tep_`); each counter is a label value.
    fn metric(&self) -> (&'static str, &'static str);
    /// The counters, named.
    fn read(&self) -> Vec<(String, u64)>;
}

/// Host mode's: the kernel's UDP drops in the daemon's namespace
/// (`/proc/net/snmp`), before the sockets hand datagrams to tep.
#[derive(Debug)]
pub struct UdpDrops;

impl KernelCounters for UdpDrops {
    fn about(&self) -> &'static str {
        "kernel (this namespace, before tep: the socket verifies the outer checksum)"
    }

    fn metric(&self) -> (&'static str, &'static str) {
        ("kernel_udp_drops", "reason")
    }

    fn read(&self) -> Vec<(String, u64)> {
        tep_sys::snmp::udp_drops()
            .named()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect()
    }
}

/// Where the control thread finds what it reports.
#[derive(Debug)]
pub struct State {
    /// The config in effect.
    pub config: Mutex<Arc<Config>>,
    /// The I/O in effect.
    pub io: Mutex<IoInfo>,
    /// The workers' wake-ups.
    pub wakes: Mutex<Vec<Arc<EventFd>>>,
    /// Counters and trace.
    pub shared: Arc<Shared>,
    /// Reload requests to the main thread, each with where to answer.
    pub reload: Mutex<mpsc::Sender<mpsc::Sender<Result<(), String>>>>,
    /// Wakes the main thread for a reload request.
    pub main_wake: EventFd,
    /// The kernel's counters of the run mode.
    pub kernel: Box<dyn KernelCounters>,
    /// The networks' shared tables, when the config has `[[network]]`s
    /// (replaced at each reload, with what the old one learned).
    pub overlay: Mutex<Option<Arc<Overlay>>>,
    /// The EVPN networks as their thread shows them (set once it runs).
    pub evpn: std::sync::OnceLock<Arc<Mutex<Vec<super::evpn::NetView>>>>,
}

/// State shared by the workers and the control thread.
#[derive(Debug, Default)]
pub struct Shared {
    /// Set to stop the workers (SIGTERM, reload).
    pub stop: AtomicBool,
    /// Generation of counters asked for; workers publish when theirs is older.
    pub refresh: AtomicU64,
    /// One snapshot per worker.
    pub snapshots: Mutex<Vec<WorkerSnapshot>>,
    /// Signalled on every publish.
    pub published: Condvar,
    /// Packet capture for `tep trace`.
    pub tracer: Tracer,
    /// What the workers of earlier configs counted.
    pub carried: Mutex<Carried>,
    /// The serving threads alive and moving, for the systemd watchdog.
    pub liveness: super::liveness::Liveness,
    /// The UPF's N4 side, when `[pfcp]` runs.
    pub upf: UpfShared,
}

/// What the workers and the N4 thread of a UPF share.
#[derive(Debug, Default)]
pub struct UpfShared {
    /// Session slots whose first downlink packet a worker held since the
    /// N4 thread last looked: each gets a Downlink Data Report.
    pub reports: Mutex<Vec<u32>>,
    /// Error Indications and Echo Responses from the UPF's peers that
    /// the workers saw since the N4 thread last looked (at most
    /// [`MAX_SIGNALS`]), and how many found no room.
    pub signals: Mutex<(Vec<tep_dataplane::PeerSignal>, u64)>,
    /// Wakes the N4 thread.
    pub wake: Mutex<Option<Arc<EventFd>>>,
    /// What `tep show pfcp` and the metrics report.
    pub status: Mutex<Option<PfcpStatus>>,
}

impl UpfShared {
    /// A worker's Downlink Data Report requests (`reports`, emptied) to
    /// the N4 thread, woken for them; nothing when there are none.
    pub fn report(&self, reports: &mut Vec<u32>) {
        if reports.is_empty() {
            return;
        }
        self.reports
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .append(reports);
        self.wake_n4();
    }

    /// A worker's peer signalling (`signals`, emptied; `dropped`: what its
    /// queue had no room for) to the N4 thread, woken for it.
    pub fn signal(&self, signals: &mut Vec<tep_dataplane::PeerSignal>, dropped: u64) {
        if signals.is_empty() && dropped == 0 {
            return;
        }
        {
            let mut held = self.signals.lock().unwrap_or_else(|e| e.into_inner());
            let room = MAX_SIGNALS.saturating_sub(held.0.len()).min(signals.len());
            held.1 += dropped + (signals.len() - room) as u64;
            held.0.extend(signals.drain(..).take(room));
        }
        signals.clear();
        self.wake_n4();
    }

    fn wake_n4(&self) {
        if let Some(w) = &*self.wake.lock().unwrap_or_else(|e| e.into_inner()) {
            let _ = w.notify();
        }
    }
}

/// Peer signalling held for the N4 thread at most: a worker hands over at
/// most [`tep_dataplane::SIGNALS`] per round, and a stranger's flood of
/// Error Indications must not grow this while the N4 thread is busy.
pub const MAX_SIGNALS: usize = 1024;

/// The N4 side as the N4 thread last published it.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct PfcpStatus {
    /// The PFCP socket's address.
    pub listen: Option<SocketAddr>,
    /// PFCP sessions established.
    pub sessions: usize,
    /// The SMFs associated: Node ID (address).
    pub associations: Vec<String>,
    /// The node's counters, by name (tep-pfcp's `Counter`), then path
    /// supervision's (`PathCounter`).
    pub counters: Vec<(&'static str, u64)>,
    /// GTP-U peers of the sessions, supervised by Echo Requests.
    pub gtpu_peers: usize,
    /// Of them, the ones whose path failed.
    pub gtpu_paths_failed: usize,
    /// Their addresses (the first 64).
    pub failed_paths: Vec<String>,
    /// The guaranteed bit rates of the sessions' QERs.
    pub gbr: GbrTotals,
}

/// The GBRs (TS 29.244 §8.2.9) of the sessions' QERs, summed: what the
/// SMF admitted onto this UPF. Recorded and shown, not enforced: a
/// guarantee is admission control, the SMF's and the RAN's; the UPF
/// enforces a GBR flow's MBR.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct GbrTotals {
    /// QERs with a GBR.
    pub qers: u64,
    /// Their uplink GBRs, kbit/s.
    pub uplink_kbps: u64,
    /// Their downlink GBRs, kbit/s.
    pub downlink_kbps: u64,
}

impl GbrTotals {
    /// Those of a session's `qers`.
    pub fn of(qers: &[tep_pfcp::node::Qer]) -> GbrTotals {
        qers.iter()
            .filter_map(|q| q.gbr)
            .fold(GbrTotals::default(), |t, g| GbrTotals {
                qers: t.qers + 1,
                uplink_kbps: t.uplink_kbps.saturating_add(g.ul),
                downlink_kbps: t.downlink_kbps.saturating_add(g.dl),
            })
    }

    /// `self` with `add` in place of `sub` (a session's, changed).
    pub fn replace(self, sub: GbrTotals, add: GbrTotals) -> GbrTotals {
        GbrTotals {
            qers: (self.qers - sub.qers.min(self.qers)) + add.qers,
            uplink_kbps: self
                .uplink_kbps
                .saturating_sub(sub.uplink_kbps)
                .saturating_add(add.uplink_kbps),
            downlink_kbps: self
                .downlink_kbps
                .saturating_sub(sub.downlink_kbps)
                .saturating_add(add.downlink_kbps),
        }
    }
}

impl Shared {
    /// The daemon's counts since it started: `snapshots` (the running
    /// workers') on top of what the workers before the last reload counted.
    pub fn totals(&self, snapshots: &[WorkerSnapshot], config: &Config) -> Totals {
        let names: Vec<&str> = config.tunnels.iter().map(|t| t.name.as_str()).collect();
        let carried = self.carried.lock().unwrap_or_else(|e| e.into_inner());
        Totals::since_start(snapshots, &carried, &names)
    }

    /// Folds the stopped workers' last snapshots into [`Shared::carried`]
    /// (they counted under `config`). Called between a reload's stop and
    /// start, while no worker publishes.
    pub fn carry_over(&self, config: &Config) {
        let snaps = self
            .snapshots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let totals = self.totals(&snaps, config);
        *self.carried.lock().unwrap_or_else(|e| e.into_inner()) = Carried {
            totals,
            tunnels: config.tunnels.iter().map(|t| t.name.clone()).collect(),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tep_dataplane::PeerSignal;

    #[test]
    fn peer_signalling_held_for_the_n4_thread_is_bounded_and_counted() {
        let u = UpfShared::default();
        let from = "192.0.2.9".parse().unwrap();
        let one = PeerSignal::EchoResponse { from, sequence: 1 };
        let mut batch = vec![one; 1000];
        u.signal(&mut batch, 3);
        assert!(batch.is_empty(), "taken");
        let mut batch = vec![one; 100];
        u.signal(&mut batch, 0);
        let held = u.signals.lock().unwrap();
        assert_eq!(held.0.len(), MAX_SIGNALS);
        assert_eq!(held.1, 3 + 1100 - MAX_SIGNALS as u64);
    }
}
