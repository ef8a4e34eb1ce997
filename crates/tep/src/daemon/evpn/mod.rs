//! tep as a VTEP of a BGP EVPN fabric run by FRR (issue 27, docs/evpn.md).
//! zebra knows VNIs, local MACs and remote state only through kernel
//! devices; so for each `control = "evpn"` network tep keeps a bridge and a
//! VXLAN device zebra reads ([`devices`]), follows the device's FDB into
//! the overlay (what BGP learned, [`sync`]) and writes the network's local
//! MACs onto the bridge (what zebra advertises); with ARP/ND suppression,
//! MAC+IP bindings both ways between the neighbour table and the bridge's
//! ARP/ND entries ([`neigh`]). One thread does it all: notifications in,
//! batched; local MACs and bindings out when the learning counters say
//! they changed (at most every [`EXPORT_GAP`]), and every [`FULL_EVERY`]
//! regardless.

pub mod counters;
mod devices;
mod neigh;
mod show;
pub mod sync;

pub use show::show;

use super::liveness::{self, Beat, Liveness};
use super::state::State;
use counters::{Event, NetCounters};
use devices::NetDevices;
use neigh::NetNeigh;
use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use sync::NetSync;
use tep_config::Config;
use tep_dataplane::config::Control;
use tep_dataplane::overlay::Overlay;
use tep_sys::netlink::{
    self, BridgeNeigh, BridgeNeighEvent, BridgeNeighWatch, FdbEntry, FdbEvent, FdbWatch,
};
use tep_sys::poll::Epoll;

/// The longest wait for a notification.
const TICK: Duration = Duration::from_millis(50);
/// Local MACs go out at most this often: each time walks the FDB (a
/// million-entry table in some 10 ms), so a storm of learning costs the
/// thread at most a few walks a second.
const EXPORT_GAP: Duration = Duration::from_millis(200);
/// Local MACs are compared with the bridge this often even when no
/// counter moved (an operator's `tep fdb del` of a local MAC).
const FULL_EVERY: Duration = Duration::from_secs(10);

/// What `tep show evpn` and the metrics read of one network.
#[derive(Clone, Debug)]
pub struct NetView {
    /// The network's name.
    pub name: String,
    /// Its VNI.
    pub vni: u32,
    /// The kernel VXLAN device zebra reads.
    pub vxlan: String,
    /// Its bridge.
    pub bridge: String,
    /// tep's port on the bridge, holding its local MACs.
    pub port: String,
    /// Remote VTEPs taken from the kernel (type-3 routes).
    pub vteps: Vec<IpAddr>,
    /// Local MACs on the bridge for zebra.
    pub exported: usize,
    /// Local MAC+IP bindings on the bridge for zebra.
    pub exported_neighbours: usize,
    /// What was done and refused.
    pub counters: Arc<NetCounters>,
}

/// The EVPN networks' devices, made before tep drops its privileges.
#[derive(Debug)]
pub struct Devices(Vec<(usize, NetDevices)>);

/// Opens the devices of `config`'s EVPN networks; None when it has none.
pub fn open(config: &Config) -> Result<Option<Devices>, String> {
    let mut all = Vec::new();
    for (i, t) in config.tunnels.iter().enumerate() {
        if t.network
            .as_deref()
            .is_some_and(|n| matches!(n.control, Control::Evpn { .. }))
        {
            all.push((i, devices::open(&config.evpn, t)?));
        }
    }
    Ok((!all.is_empty()).then_some(Devices(all)))
}

/// A reload cannot change the EVPN networks or `[evpn]`: their kernel
/// devices are made once.
pub fn check_kept(old: &Config, new: &Config) -> Result<(), String> {
    let evpn = |c: &Config| -> Vec<(String, u32, IpAddr, u16, Control)> {
        c.tunnels
            .iter()
            .filter_map(|t| {
                let n = t.network.as_deref()?;
                matches!(n.control, Control::Evpn { .. }).then(|| {
                    (
                        t.name.clone(),
                        t.vni,
                        t.local,
                        t.remote_port,
                        n.control.clone(),
                    )
                })
            })
            .collect()
    };
    if evpn(old) != evpn(new) || old.evpn != new.evpn {
        return Err("the EVPN networks and [evpn] change only with a restart (their kernel devices are made at start)".to_string());
    }
    Ok(())
}

/// The EVPN thread; stopped and joined (its devices removed) when dropped.
#[derive(Debug)]
pub struct Evpn {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<Result<(), String>>>,
    /// What the thread shows.
    pub views: Arc<Mutex<Vec<NetView>>>,
    devices: Option<Devices>,
}

impl Evpn {
    /// Starts following the kernel for `devices`' networks, over the
    /// overlay `state` holds (a reload's new one included).
    pub fn start(
        devices: Devices,
        config: &Config,
        state: Arc<State>,
        watch: &Liveness,
    ) -> Result<Evpn, String> {
        let overlay = state
            .overlay
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .ok_or("evpn: no overlay")?;
        let mut nets = Vec::new();
        let mut neighs = Vec::new();
        let mut views = Vec::new();
        for (i, d) in &devices.0 {
            let t = &config.tunnels[*i];
            let index = overlay.index(&t.name).map_err(|e| format!("evpn: {e}"))?;
            let n = NetSync::new(&t.name, index, t.vni, t.local, t.remote_port, d.vxlan.1);
            views.push(NetView {
                name: t.name.clone(),
                vni: t.vni,
                vxlan: d.vxlan.0.clone(),
                bridge: d.bridge.0.clone(),
                port: d.port.name().to_string(),
                vteps: Vec::new(),
                exported: 0,
                exported_neighbours: 0,
                counters: n.counters.clone(),
            });
            neighs.push(NetNeigh::new(
                &t.name,
                index,
                d.bridge.1,
                n.counters.clone(),
            ));
            nets.push((n, d.port.ifindex()));
        }
        let views = Arc::new(Mutex::new(views));
        let (stop, stopped) = mpsc::channel::<()>();
        let shown = views.clone();
        let thread = liveness::spawn(watch, "evpn", 20 * TICK, move |beat| {
            Follower::new(nets, neighs, shown)?.run(&state, &stopped, beat)
        })
        .map_err(|e| format!("cannot start the EVPN thread: {e}"))?;
        Ok(Evpn {
            stop: Some(stop),
            thread: Some(thread),
            views,
            devices: Some(devices),
        })
    }
}

impl Drop for Evpn {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            match t.join() {
                Ok(Err(e)) => tracing::warn!("evpn: {e}"),
                Err(_) => tracing::warn!("evpn: the thread panicked"),
                Ok(Ok(())) => {}
            }
        }
        drop(self.devices.take());
    }
}

/// The thread's state.
struct Follower {
    watch: FdbWatch,
    /// The bridges' ARP/ND entries (MAC+IP bindings).
    neigh_watch: BridgeNeighWatch,
    /// Both watches, to wait on.
    epoll: Epoll,
    /// Each network with its port's ifindex.
    nets: Vec<(NetSync, u32)>,
    /// Each network's bindings, in the order of `nets`.
    neighs: Vec<NetNeigh>,
    views: Arc<Mutex<Vec<NetView>>>,
    /// Each network's learning counters when its local MACs last went out.
    stamps: Vec<u64>,
    last_full: Instant,
    /// When local MACs last went out, and whether they must again.
    last_export: Instant,
    pending: bool,
    dump: Vec<FdbEntry>,
    events: Vec<FdbEvent>,
    neigh_dump: Vec<BridgeNeigh>,
    neigh_events: Vec<BridgeNeighEvent>,
    ready: Vec<tep_sys::poll::Event>,
}

impl Follower {
    fn new(
        nets: Vec<(NetSync, u32)>,
        neighs: Vec<NetNeigh>,
        views: Arc<Mutex<Vec<NetView>>>,
    ) -> Result<Follower, String> {
        // Subscribed before the first dump: no change falls between.
        let watch =
            FdbWatch::new().map_err(|e| format!("evpn: following the kernel's FDB: {e}"))?;
        let neigh_watch = BridgeNeighWatch::new()
            .map_err(|e| format!("evpn: following the kernel's neighbours: {e}"))?;
        let epoll = Epoll::new()
            .and_then(|p| {
                p.add(watch.fd(), 0, true, false)?;
                p.add(neigh_watch.fd(), 1, true, false)?;
                Ok(p)
            })
            .map_err(|e| format!("evpn: {e}"))?;
        Ok(Follower {
            watch,
            neigh_watch,
            epoll,
            neighs,
            stamps: vec![u64::MAX; nets.len()],
            nets,
            views,
            last_full: Instant::now(),
            last_export: Instant::now() - EXPORT_GAP,
            pending: true,
            dump: Vec::new(),
            events: Vec::new(),
            neigh_dump: Vec::new(),
            neigh_events: Vec::new(),
            ready: Vec::with_capacity(2),
        })
    }

    fn run(
        &mut self,
        state: &State,
        stopped: &mpsc::Receiver<()>,
        beat: &Beat,
    ) -> Result<(), String> {
        let mut overlay: Option<Arc<Overlay>> = None;
        loop {
            beat.beat();
            if !matches!(stopped.try_recv(), Err(mpsc::TryRecvError::Empty)) {
                self.withdraw_neighbours();
                return Ok(());
            }
            let now = state
                .overlay
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            let Some(o) = now else {
                std::thread::sleep(TICK);
                continue;
            };
            // At start and after a reload: the whole kernel FDB again.
            let fresh = !overlay.as_ref().is_some_and(|was| Arc::ptr_eq(was, &o));
            if fresh {
                // A reload may have put networks before these ones.
                for (n, _) in &mut self.nets {
                    n.index = o.index(&n.name).unwrap_or(n.index);
                }
                self.resync(&o)?;
                overlay = Some(o.clone());
            }
            let changed = self.follow(&o)?;
            self.follow_neighbours(&o)?;
            self.export(&o, changed || fresh);
            self.show();
            let tick = i32::try_from(TICK.as_millis()).unwrap_or(i32::MAX);
            if let Err(e) = self.epoll.wait(&mut self.ready, tick) {
                return Err(format!("evpn: waiting for the kernel: {e}"));
            }
        }
    }

    /// Dumps the kernel's FDB into every network.
    fn resync(&mut self, o: &Overlay) -> Result<(), String> {
        self.dump.clear();
        self.watch
            .dump(&mut self.dump)
            .map_err(|e| format!("evpn: dumping the kernel's FDB: {e}"))?;
        for (n, _) in &mut self.nets {
            n.resync(o, &self.dump);
        }
        self.resync_neighbours(o)
    }

    /// Dumps the kernel's ARP/ND entries into every network.
    fn resync_neighbours(&mut self, o: &Overlay) -> Result<(), String> {
        self.neigh_dump.clear();
        self.neigh_watch
            .dump(&mut self.neigh_dump)
            .map_err(|e| format!("evpn: dumping the kernel's neighbours: {e}"))?;
        for n in &mut self.neighs {
            n.resync(o, &self.neigh_dump);
        }
        Ok(())
    }

    /// Takes the ARP/ND notifications that arrived (zebra's remote
    /// bindings on the bridges).
    fn follow_neighbours(&mut self, o: &Overlay) -> Result<(), String> {
        self.neigh_events.clear();
        match self.neigh_watch.poll(&mut self.neigh_events) {
            Ok(()) => {}
            Err(e) if FdbWatch::is_overrun(&e) => {
                for (n, _) in &self.nets {
                    n.counters.count(Event::Resync);
                }
                return self.resync_neighbours(o);
            }
            Err(e) => return Err(format!("evpn: reading the kernel's neighbours: {e}")),
        }
        for ev in &self.neigh_events {
            for n in &mut self.neighs {
                if n.apply(o, ev) {
                    break;
                }
            }
        }
        Ok(())
    }

    /// Takes the notifications that arrived; true when there were any.
    fn follow(&mut self, o: &Overlay) -> Result<bool, String> {
        self.events.clear();
        match self.watch.poll(&mut self.events) {
            Ok(()) => {}
            // The socket overflowed: notifications were lost.
            Err(e) if FdbWatch::is_overrun(&e) => {
                for (n, _) in &self.nets {
                    n.counters.count(Event::Resync);
                }
                self.resync(o)?;
                return Ok(true);
            }
            Err(e) => return Err(format!("evpn: reading the kernel's notifications: {e}")),
        }
        for ev in &self.events {
            for (n, _) in &mut self.nets {
                if n.apply(o, ev) {
                    break;
                }
            }
        }
        Ok(!self.events.is_empty())
    }

    /// Writes each network's local MACs to its bridge port when their
    /// learning counters moved or `anyway` (at most every [`EXPORT_GAP`]:
    /// each time is one walk of the FDB), and every [`FULL_EVERY`].
    fn export(&mut self, o: &Overlay, anyway: bool) {
        for ((n, _), stamp) in self.nets.iter().zip(&mut self.stamps) {
            let now = learning_stamp(o, n.index);
            self.pending |= now != *stamp;
            *stamp = now;
        }
        self.pending |= anyway;
        let full = self.last_full.elapsed() >= FULL_EVERY;
        let due = self.pending && self.last_export.elapsed() >= EXPORT_GAP;
        if !(full || due) {
            return;
        }
        self.pending = false;
        self.last_export = Instant::now();
        if full {
            self.last_full = self.last_export;
        }
        let indices: Vec<u16> = self.nets.iter().map(|(n, _)| n.index).collect();
        let local = sync::local_macs(o, &indices);
        let nets = self.nets.iter_mut().zip(&mut self.neighs);
        for (((n, port), neigh), local) in nets.zip(&local) {
            let port = *port;
            n.export(local, |mac, add| {
                if add {
                    netlink::bridge_fdb_add(port, mac)
                } else {
                    netlink::bridge_fdb_del(port, mac).map(|_| ())
                }
            });
            // After the MACs: zebra advertises a binding of a local MAC.
            let wanted = neigh.wanted(o, local);
            export_neighbours(neigh, &wanted);
        }
    }

    /// Takes tep's bindings off the bridges as it stops: an operator's
    /// bridge outlives tep, and zebra would advertise them again when the
    /// next tep writes their MACs, though the hosts may have gone.
    fn withdraw_neighbours(&mut self) {
        for n in &mut self.neighs {
            export_neighbours(n, &Default::default());
        }
    }

    fn show(&self) {
        let mut views = self.views.lock().unwrap_or_else(|e| e.into_inner());
        for ((n, _), v) in self.nets.iter().zip(views.iter_mut()) {
            v.vteps = n.flood().iter().copied().collect();
            v.exported = n.exported().len();
        }
        for (n, v) in self.neighs.iter().zip(views.iter_mut()) {
            v.exported_neighbours = n.exported().len();
        }
    }
}

/// Brings `n`'s bridge to the bindings `wanted`.
fn export_neighbours(n: &mut NetNeigh, wanted: &std::collections::BTreeMap<IpAddr, [u8; 6]>) {
    let bridge = n.bridge;
    n.export(wanted, |ip, mac| match mac {
        Some(mac) => netlink::bridge_neigh_set(bridge, ip, mac),
        None => netlink::bridge_neigh_del(bridge, ip).map(|_| ()),
    });
}

/// A number that changes whenever network `index` learns, moves or ages a
/// MAC, or learns, ages or loses a neighbour (a neighbour's new MAC waits
/// for [`FULL_EVERY`]).
fn learning_stamp(o: &Overlay, index: u16) -> u64 {
    o.networks().get(usize::from(index)).map_or(0, |n| {
        let c = &n.counters;
        c.learned
            .load(Ordering::Relaxed)
            .wrapping_add(c.moved.load(Ordering::Relaxed))
            .wrapping_add(c.aged.load(Ordering::Relaxed))
            .wrapping_add(c.neigh_learned.load(Ordering::Relaxed))
            .wrapping_add(u64::from(o.neighbours().count(index)) << 32)
    })
}
