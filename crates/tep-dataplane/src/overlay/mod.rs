//! Multipoint overlays: networks (`[[network]]`), each a bridge domain
//! (VXLAN, Geneve) or a routing domain (the L3 kinds) with any number of
//! remote VTEPs, as Linux's VXLAN device with its FDB, VPP's bridge
//! domains and Open vSwitch's NORMAL learning switch make them.
//!
//! One [`Overlay`] serves every worker and the control plane:
//! - the [`fdb`] (MAC → remote VTEP or local side), shared without a lock
//!   on the read path: the data path learns into it directly, so a MAC
//!   one worker learned is known to all at once, and a million MACs cost
//!   one table, not one per worker;
//! - the remote VTEPs ([`Vteps`]): an address per id, written once when
//!   the id is given out and read without a lock;
//! - what changes only by configuration or control-plane verbs (flood
//!   lists, routes, the VTEPs a network knows): an immutable
//!   [`Topology`] replaced as a whole, which a worker picks up between
//!   vectors when the generation moved (one atomic load per vector);
//! - the [`neigh`]bour tables of ARP/ND suppression;
//! - per network, its counters.
//!
//! The pipeline's nodes that use it are the overlay's own
//! (`crate::overlay::nodes`); the daemon's control verbs call the methods
//! here.

pub mod fdb;
pub mod neigh;
pub(crate) mod nodes;
pub mod reload;
pub mod vlan;

use crate::config::{IpPrefix, TunnelConfig};
use crate::tunnel::FastMap;
use core::fmt;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use core::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use fdb::{Dst, Entry, Fdb, FdbKey, Origin};
use neigh::{Neigh, Neighbours};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

pub use crate::config::MAX_NETWORKS;
/// The peer of a packet to be flooded to its network's flood list
/// (`Pool::peer`).
pub const FLOOD: u32 = u32::MAX;
/// No peer.
pub const NO_PEER: u32 = u32::MAX - 1;

/// A refused control-plane request, naming what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OverlayError {
    /// No network has this name.
    UnknownNetwork(String),
    /// The verb is for L2 networks, this one is L3 (or the reverse).
    WrongLayer {
        network: String,
        wants: &'static str,
    },
    /// An address of the wrong family for the network's underlay or
    /// inner side.
    WrongFamily { what: String, network: String },
    /// The entry exists and the verb does not replace it.
    Exists(String),
    /// No such entry.
    NotFound(String),
    /// A bound was reached.
    Full(String),
    /// Anything else wrong with a value.
    Invalid(String),
}

impl fmt::Display for OverlayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OverlayError::UnknownNetwork(n) => {
                write!(f, "network \"{n}\": no network of that name")
            }
            OverlayError::WrongLayer { network, wants } => {
                write!(f, "network \"{network}\": {wants}")
            }
            OverlayError::WrongFamily { what, network } => {
                write!(f, "{what}: not of network \"{network}\"'s address family")
            }
            OverlayError::Exists(m)
            | OverlayError::NotFound(m)
            | OverlayError::Full(m)
            | OverlayError::Invalid(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for OverlayError {}

/// A network's counters, written by the workers (relaxed) and read by
/// `tep show`, Prometheus.
#[derive(Debug, Default)]
pub struct NetworkCounters {
    /// MACs learned (new entries).
    pub learned: AtomicU64,
    /// Learned MACs aged out.
    pub aged: AtomicU64,
    /// Learned MACs that moved (remote ↔ remote, remote ↔ local).
    pub moved: AtomicU64,
    /// MACs not learned: the network's `max_macs` was reached, or the
    /// table had no room.
    pub learn_refused: AtomicU64,
    /// Moves refused: a static or external entry says otherwise.
    pub move_refused: AtomicU64,
    /// Frames flooded (broadcast, multicast, unknown unicast).
    pub flooded: AtomicU64,
    /// Copies sent for flooded frames (one per remote VTEP).
    pub flood_copies: AtomicU64,
    /// ARP requests and Neighbor Solicitations answered by tep.
    pub suppressed: AtomicU64,
    /// Neighbours learned from ARP/ND.
    pub neigh_learned: AtomicU64,
}

/// A snapshot of a network's counters, with its table sizes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct NetworkStats {
    pub entries: u64,
    pub learned: u64,
    pub aged: u64,
    pub moved: u64,
    pub learn_refused: u64,
    pub move_refused: u64,
    pub flooded: u64,
    pub flood_copies: u64,
    pub suppressed: u64,
    pub neigh_learned: u64,
    pub neighbours: u64,
}

impl NetworkCounters {
    fn snapshot(&self) -> NetworkStats {
        let l = |c: &AtomicU64| c.load(Ordering::Relaxed);
        NetworkStats {
            entries: 0,
            learned: l(&self.learned),
            aged: l(&self.aged),
            moved: l(&self.moved),
            learn_refused: l(&self.learn_refused),
            move_refused: l(&self.move_refused),
            flooded: l(&self.flooded),
            flood_copies: l(&self.flood_copies),
            suppressed: l(&self.suppressed),
            neigh_learned: l(&self.neigh_learned),
            neighbours: 0,
        }
    }

    /// Adds `n` to `c` (relaxed: counters, not synchronisation).
    #[inline]
    pub fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }
}

/// One remote VTEP slot: its address, written once before its id is
/// handed out (the `state` store releases it), never changed after.
#[derive(Debug, Default)]
struct VtepSlot {
    // 0: free; 4 or 6: the family of the address in `hi`/`lo`.
    state: AtomicU8,
    hi: AtomicU64,
    lo: AtomicU64,
}

/// The remote VTEPs: an id per address, read without a lock; given out
/// under the overlay's writer lock, at most `max` of them (an underlay
/// stranger who spoofs sources cannot grow it past that).
#[derive(Debug)]
pub struct Vteps {
    slots: Box<[VtepSlot]>,
    used: AtomicU32,
}

impl Vteps {
    fn new(max: u32) -> Vteps {
        Vteps {
            slots: (0..max).map(|_| VtepSlot::default()).collect(),
            used: AtomicU32::new(0),
        }
    }

    /// The address of VTEP `id` (lock-free).
    #[inline]
    pub fn addr(&self, id: u32) -> Option<IpAddr> {
        let s = self.slots.get(id as usize)?;
        match s.state.load(Ordering::Acquire) {
            4 => Some(IpAddr::V4(Ipv4Addr::from(
                s.lo.load(Ordering::Relaxed) as u32
            ))),
            6 => {
                let hi = u128::from(s.hi.load(Ordering::Relaxed));
                let lo = u128::from(s.lo.load(Ordering::Relaxed));
                Some(IpAddr::V6(Ipv6Addr::from(hi << 64 | lo)))
            }
            _ => None,
        }
    }

    /// Starts fetching VTEP `id`'s slot (a hint): `fdb-lookup` knows a
    /// frame's VTEP long before `ip-udp-encap` writes its address, and
    /// across thousands of VTEPs the slot is a miss.
    #[inline]
    pub fn prefetch(&self, id: u32) {
        if let Some(s) = self.slots.get(id as usize) {
            crate::session::flat::prefetch(s);
        }
    }

    /// Ids it can give out (`max_vteps`).
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Ids given out so far.
    pub fn len(&self) -> u32 {
        self.used.load(Ordering::Acquire)
    }

    /// Whether none was given out.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Gives out the next id for `addr` (the caller holds the registry).
    fn push(&self, addr: IpAddr) -> Option<u32> {
        let id = self.used.load(Ordering::Relaxed);
        let s = self.slots.get(id as usize)?;
        let state = match addr {
            IpAddr::V4(a) => {
                s.lo.store(u64::from(u32::from(a)), Ordering::Relaxed);
                4
            }
            IpAddr::V6(a) => {
                let v = u128::from(a);
                s.hi.store((v >> 64) as u64, Ordering::Relaxed);
                s.lo.store(v as u64, Ordering::Relaxed);
                6
            }
        };
        s.state.store(state, Ordering::Release);
        self.used.store(id + 1, Ordering::Release);
        Some(id)
    }
}

/// A network's part of the [`Topology`].
#[derive(Clone, Debug, Default)]
pub struct NetTopology {
    /// Its flood list: the VTEPs a broadcast, multicast or unknown unicast
    /// frame is copied to, in the order they were added.
    pub flood: Vec<u32>,
    /// Its routes (L3), longest prefix first: prefix → VTEP.
    pub routes: Vec<(IpPrefix, u32)>,
    /// The VTEPs the network names (flood list, static FDB entries,
    /// routes), sorted: with learning off, the only ones it receives from.
    pub known: Vec<u32>,
}

impl NetTopology {
    /// The VTEP routing `dst` (longest prefix).
    #[inline]
    pub fn route(&self, dst: IpAddr) -> Option<u32> {
        self.routes
            .iter()
            .find(|(p, _)| p.contains(dst))
            .map(|&(_, v)| v)
    }

    /// Whether the network names VTEP `id`.
    #[inline]
    pub fn knows(&self, id: u32) -> bool {
        self.known.binary_search(&id).is_ok()
    }

    fn sort(&mut self, fdb_dsts: impl Iterator<Item = u32>) {
        self.routes.sort_by_key(|(p, _)| core::cmp::Reverse(p.len));
        let mut known: Vec<u32> = self.flood.to_vec();
        known.extend(self.routes.iter().map(|&(_, v)| v));
        known.extend(fdb_dsts);
        known.sort_unstable();
        known.dedup();
        self.known = known;
    }
}

/// What changes only by configuration or control verbs, replaced whole.
#[derive(Clone, Debug, Default)]
pub struct Topology {
    /// Bumped at each replacement.
    pub generation: u64,
    /// Per network index.
    pub networks: Vec<NetTopology>,
}

/// A network as the overlay keeps it.
#[derive(Debug)]
pub struct Network {
    /// Its name.
    pub name: String,
    /// Its tunnel's index in the tunnel table (the workers' `meta.tunnel`).
    pub tunnel: u32,
    /// Whether it bridges Ethernet (VXLAN, Geneve) or routes IP.
    pub l2: bool,
    /// The family of its underlay (its local address).
    pub underlay_v4: bool,
    /// Learning on.
    pub learning: bool,
    /// Seconds a learned entry lives unseen.
    pub ageing_s: u32,
    /// Learned entries at most.
    pub max_macs: u32,
    /// ARP/ND suppression on.
    pub neigh_suppress: bool,
    /// Its counters.
    pub counters: NetworkCounters,
}

/// The control plane's side: the VTEP registry and the topology being
/// edited, under one lock (writers only; readers never take it).
#[derive(Debug, Default)]
struct Registry {
    by_addr: FastMap<IpAddr, u32>,
    topology: Topology,
    // Static FDB destinations per network, for `known` (refcounts).
    fdb_dsts: Vec<FastMap<u32, u32>>,
}

/// The overlay of a daemon: every network's tables, shared by the
/// workers and the control plane.
#[derive(Debug)]
pub struct Overlay {
    networks: Vec<Network>,
    by_name: FastMap<String, u16>,
    // Tunnel index → its network and what each packet asks of it, apart
    // from the `Network`s (a hundred bytes each, thousands of them, and
    // asked per packet): eight bytes a tunnel.
    of_tunnel: Vec<NetRef>,
    fdb: Fdb,
    neigh: Neighbours,
    vteps: Vteps,
    registry: Mutex<Registry>,
    published: Mutex<Arc<Topology>>,
    generation: AtomicU64,
    epoch: Instant,
}

/// Not a network.
pub const NOT_A_NETWORK: u16 = u16::MAX;

/// A tunnel's network as the per-packet nodes ask for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NetRef {
    /// The network's index ([`NOT_A_NETWORK`] for a tunnel that is none).
    pub index: u16,
    /// It bridges Ethernet.
    pub l2: bool,
    /// Learning on.
    pub learning: bool,
    /// ARP/ND suppression on.
    pub suppress: bool,
    /// Learned MACs at most.
    pub max_macs: u32,
}

impl NetRef {
    /// A tunnel that is no network.
    pub const NONE: NetRef = NetRef {
        index: NOT_A_NETWORK,
        l2: false,
        learning: false,
        suppress: false,
        max_macs: 0,
    };
}

impl Overlay {
    /// The overlay of the networks among `tunnels` (validated), with room
    /// for `fdb_capacity` FDB entries and `max_vteps` remote VTEPs; the
    /// config's static entries, flood lists and routes in place.
    pub fn new(
        tunnels: &[TunnelConfig],
        fdb_capacity: usize,
        max_vteps: u32,
    ) -> Result<Overlay, OverlayError> {
        let mut networks = Vec::new();
        let mut of_tunnel = vec![NetRef::NONE; tunnels.len()];
        let mut by_name = FastMap::default();
        for (i, t) in tunnels.iter().enumerate() {
            let Some(n) = &t.network else { continue };
            if networks.len() >= MAX_NETWORKS {
                return Err(OverlayError::Full(format!(
                    "more than {MAX_NETWORKS} networks"
                )));
            }
            of_tunnel[i] = NetRef {
                index: networks.len() as u16,
                l2: t.kind.carries_ethernet(),
                learning: n.learning,
                suppress: n.neigh_suppress,
                max_macs: n.max_macs,
            };
            by_name.insert(t.name.clone(), networks.len() as u16);
            networks.push(Network {
                name: t.name.clone(),
                tunnel: i as u32,
                l2: t.kind.carries_ethernet(),
                underlay_v4: t.local.is_ipv4(),
                learning: n.learning,
                ageing_s: n.ageing_s,
                max_macs: n.max_macs,
                neigh_suppress: n.neigh_suppress,
                counters: NetworkCounters::default(),
            });
        }
        let count = networks.len();
        let overlay = Overlay {
            fdb: Fdb::new(fdb_capacity, count),
            neigh: Neighbours::new(),
            vteps: Vteps::new(max_vteps),
            registry: Mutex::new(Registry {
                by_addr: FastMap::default(),
                topology: Topology {
                    generation: 0,
                    networks: vec![NetTopology::default(); count],
                },
                fdb_dsts: vec![FastMap::default(); count],
            }),
            published: Mutex::new(Arc::new(Topology::default())),
            generation: AtomicU64::new(0),
            networks,
            by_name,
            of_tunnel,
            epoch: Instant::now(),
        };
        for t in tunnels {
            let Some(n) = &t.network else { continue };
            for &addr in &n.flood {
                overlay.peer_add(&t.name, addr)?;
            }
            for &(mac, dst) in &n.fdb {
                overlay.fdb_add(&t.name, mac.0, dst, true)?;
            }
            for &(prefix, dst) in &n.routes {
                overlay.route_add(&t.name, prefix, dst, true)?;
            }
            for &(ip, mac) in &n.neighbours {
                overlay.neigh_add(&t.name, ip, mac.0, true)?;
            }
        }
        overlay.publish(&mut overlay.registry());
        Ok(overlay)
    }

    /// The overlay's clock: whole seconds since it started (what entries
    /// are stamped with).
    pub fn now_s(&self) -> u32 {
        self.epoch.elapsed().as_secs() as u32
    }

    /// The networks, by index.
    pub fn networks(&self) -> &[Network] {
        &self.networks
    }

    /// The network index of tunnel `tunnel` ([`NOT_A_NETWORK`] if it is
    /// not one).
    #[inline]
    pub fn network_of(&self, tunnel: u32) -> u16 {
        self.net_ref(tunnel).index
    }

    /// Tunnel `tunnel`'s network, as the per-packet nodes ask for it.
    #[inline]
    pub fn net_ref(&self, tunnel: u32) -> NetRef {
        self.of_tunnel
            .get(tunnel as usize)
            .copied()
            .unwrap_or(NetRef::NONE)
    }

    /// The FDB.
    pub fn fdb(&self) -> &Fdb {
        &self.fdb
    }

    /// The neighbour tables.
    pub fn neighbours(&self) -> &Neighbours {
        &self.neigh
    }

    /// The remote VTEPs.
    pub fn vteps(&self) -> &Vteps {
        &self.vteps
    }

    /// The current topology and its generation.
    pub fn topology(&self) -> Arc<Topology> {
        self.published
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The generation of the current topology (one atomic load: workers
    /// compare it with theirs between vectors).
    #[inline]
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    fn registry(&self) -> MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn publish(&self, r: &mut Registry) {
        r.topology.generation += 1;
        for (n, t) in r.topology.networks.iter_mut().enumerate() {
            let dsts = r.fdb_dsts[n].keys().copied();
            t.sort(dsts);
        }
        let next = Arc::new(r.topology.clone());
        *self.published.lock().unwrap_or_else(|e| e.into_inner()) = next;
        self.generation
            .store(r.topology.generation, Ordering::Release);
    }

    /// The id of VTEP `addr`, given out now if it has none (data-path
    /// learning from a VTEP seen first; the control verbs). None when
    /// `max_vteps` are given out.
    pub fn vtep_id(&self, addr: IpAddr) -> Option<u32> {
        let mut r = self.registry();
        Self::vtep_in(&self.vteps, &mut r, addr)
    }

    /// The id of VTEP `addr` if it has one (nothing given out).
    pub fn find_vtep(&self, addr: IpAddr) -> Option<u32> {
        self.registry().by_addr.get(&addr).copied()
    }

    fn vtep_in(vteps: &Vteps, r: &mut Registry, addr: IpAddr) -> Option<u32> {
        if let Some(&id) = r.by_addr.get(&addr) {
            return Some(id);
        }
        let id = vteps.push(addr)?;
        r.by_addr.insert(addr, id);
        Some(id)
    }

    /// The index of network `name`.
    pub fn index(&self, name: &str) -> Result<u16, OverlayError> {
        self.by_name
            .get(name)
            .copied()
            .ok_or_else(|| OverlayError::UnknownNetwork(name.to_string()))
    }

    fn network(&self, name: &str) -> Result<(u16, &Network), OverlayError> {
        let i = self.index(name)?;
        Ok((i, &self.networks[usize::from(i)]))
    }

    /// Network `name`, refused (`wants` says why) unless it is L2 (`l2`)
    /// or L3.
    fn network_of_layer(
        &self,
        name: &str,
        l2: bool,
        wants: &'static str,
    ) -> Result<(u16, &Network), OverlayError> {
        let (n, net) = self.network(name)?;
        if net.l2 != l2 {
            return Err(OverlayError::WrongLayer {
                network: name.to_string(),
                wants,
            });
        }
        Ok((n, net))
    }

    fn check_vtep(&self, net: &Network, addr: IpAddr) -> Result<(), OverlayError> {
        if addr.is_ipv4() != net.underlay_v4 {
            return Err(OverlayError::WrongFamily {
                what: format!("VTEP {addr}"),
                network: net.name.clone(),
            });
        }
        if addr.is_unspecified() || addr.is_multicast() {
            return Err(OverlayError::Invalid(format!(
                "{addr} is not a VTEP's unicast address"
            )));
        }
        Ok(())
    }

    fn vtep_for(&self, r: &mut Registry, addr: IpAddr) -> Result<u32, OverlayError> {
        Self::vtep_in(&self.vteps, r, addr).ok_or_else(|| {
            OverlayError::Full(format!(
                "no room for VTEP {addr}: {} remote VTEPs already",
                self.vteps.len()
            ))
        })
    }

    /// Adds `addr` to network `name`'s flood list (`tep peer add`).
    pub fn peer_add(&self, name: &str, addr: IpAddr) -> Result<(), OverlayError> {
        let (n, net) = self.network(name)?;
        self.check_vtep(net, addr)?;
        let mut r = self.registry();
        let id = self.vtep_for(&mut r, addr)?;
        let flood = &mut r.topology.networks[usize::from(n)].flood;
        if flood.contains(&id) {
            return Err(OverlayError::Exists(format!(
                "network \"{name}\": {addr} is already in the flood list"
            )));
        }
        flood.push(id);
        self.publish(&mut r);
        Ok(())
    }

    /// Removes `addr` from network `name`'s flood list (`tep peer del`).
    pub fn peer_del(&self, name: &str, addr: IpAddr) -> Result<(), OverlayError> {
        let (n, _) = self.network(name)?;
        let mut r = self.registry();
        let id = r.by_addr.get(&addr).copied();
        let flood = &mut r.topology.networks[usize::from(n)].flood;
        let Some(at) = id.and_then(|id| flood.iter().position(|&v| v == id)) else {
            return Err(OverlayError::NotFound(format!(
                "network \"{name}\": {addr} is not in the flood list"
            )));
        };
        flood.remove(at);
        self.publish(&mut r);
        Ok(())
    }

    /// Network `name`'s flood list.
    pub fn peers(&self, name: &str) -> Result<Vec<IpAddr>, OverlayError> {
        let (n, _) = self.network(name)?;
        let t = self.topology();
        Ok(t.networks
            .get(usize::from(n))
            .map(|t| t.flood.iter().filter_map(|&v| self.vteps.addr(v)).collect())
            .unwrap_or_default())
    }

    /// A static FDB entry: `mac` behind `dst` in network `name` (`tep fdb
    /// add`, or `replace` to overwrite what is there).
    pub fn fdb_add(
        &self,
        name: &str,
        mac: [u8; 6],
        dst: IpAddr,
        replace: bool,
    ) -> Result<(), OverlayError> {
        self.fdb_set(name, mac, dst, Origin::Static, replace)
    }

    /// An FDB entry of `origin` (Static: `tep fdb add`; External: a
    /// control plane such as EVPN).
    pub fn fdb_set(
        &self,
        name: &str,
        mac: [u8; 6],
        dst: IpAddr,
        origin: Origin,
        replace: bool,
    ) -> Result<(), OverlayError> {
        let (n, net) = self.network_of_layer(
            name,
            true,
            "an L3 network has routes, not MACs (tep route add)",
        )?;
        check_unicast_mac(mac)?;
        self.check_vtep(net, dst)?;
        let key = FdbKey::new(n, mac);
        let mut r = self.registry();
        if let Some(old) = self.fdb.lookup(key) {
            if !replace {
                return Err(OverlayError::Exists(format!(
                    "network \"{name}\": {} is already in the FDB ({}); use replace",
                    fmt_mac(mac),
                    self.describe(old)
                )));
            }
        }
        let id = self.vtep_for(&mut r, dst)?;
        let entry = Entry {
            dst: Dst::Remote(id),
            origin,
            seen_s: self.now_s(),
        };
        let old = self.fdb.insert(key, entry).map_err(|()| {
            OverlayError::Full(format!(
                "network \"{name}\": no room in the FDB for {}",
                fmt_mac(mac)
            ))
        })?;
        self.forget_dst(&mut r, n, old);
        *r.fdb_dsts[usize::from(n)].entry(id).or_insert(0) += 1;
        self.publish(&mut r);
        Ok(())
    }

    /// Drops the refcount a replaced or removed entry held on its VTEP.
    fn forget_dst(&self, r: &mut Registry, n: u16, old: Option<Entry>) {
        if let Some(Entry {
            dst: Dst::Remote(v),
            origin: Origin::Static | Origin::External,
            ..
        }) = old
        {
            let dsts = &mut r.fdb_dsts[usize::from(n)];
            if let Some(c) = dsts.get_mut(&v) {
                *c -= 1;
                if *c == 0 {
                    dsts.remove(&v);
                }
            }
        }
    }

    /// Removes `mac` from network `name`'s FDB (`tep fdb del`), whatever
    /// made it.
    pub fn fdb_del(&self, name: &str, mac: [u8; 6]) -> Result<(), OverlayError> {
        let (n, _) = self.network(name)?;
        let mut r = self.registry();
        let Some(old) = self.fdb.remove(FdbKey::new(n, mac)) else {
            return Err(OverlayError::NotFound(format!(
                "network \"{name}\": {} is not in the FDB",
                fmt_mac(mac)
            )));
        };
        self.forget_dst(&mut r, n, Some(old));
        self.publish(&mut r);
        Ok(())
    }

    /// Every FDB entry (of network `name`, or all), sorted by network and
    /// MAC.
    pub fn fdb_rows(&self, name: Option<&str>) -> Result<Vec<FdbRow>, OverlayError> {
        let only = name.map(|n| self.index(n)).transpose()?;
        let mut rows = Vec::new();
        let now = self.now_s();
        self.fdb.for_each(only, |k, e| {
            let Some(net) = self.networks.get(usize::from(k.network())) else {
                return;
            };
            rows.push(FdbRow {
                network: net.name.clone(),
                mac: k.mac(),
                dst: match e.dst {
                    Dst::Remote(v) => self.vteps.addr(v),
                    Dst::Local => None,
                },
                origin: e.origin,
                age_s: now.wrapping_sub(e.seen_s) & 0x00ff_ffff,
            });
        });
        rows.sort_by(|a, b| (&a.network, a.mac).cmp(&(&b.network, b.mac)));
        Ok(rows)
    }

    /// A route (L3 networks): `prefix` behind `dst` (`tep route add`).
    pub fn route_add(
        &self,
        name: &str,
        prefix: IpPrefix,
        dst: IpAddr,
        replace: bool,
    ) -> Result<(), OverlayError> {
        let (n, net) = self.network_of_layer(
            name,
            false,
            "an L2 network has MACs, not routes (tep fdb add)",
        )?;
        self.check_vtep(net, dst)?;
        let mut r = self.registry();
        let id = self.vtep_for(&mut r, dst)?;
        let routes = &mut r.topology.networks[usize::from(n)].routes;
        match routes.iter_mut().find(|(p, _)| *p == prefix) {
            Some(_) if !replace => {
                return Err(OverlayError::Exists(format!(
                    "network \"{name}\": a route to {prefix} exists; use replace"
                )))
            }
            Some(slot) => slot.1 = id,
            None => routes.push((prefix, id)),
        }
        self.publish(&mut r);
        Ok(())
    }

    /// Removes the route to `prefix` (`tep route del`).
    pub fn route_del(&self, name: &str, prefix: IpPrefix) -> Result<(), OverlayError> {
        let (n, _) = self.network(name)?;
        let mut r = self.registry();
        let routes = &mut r.topology.networks[usize::from(n)].routes;
        let Some(at) = routes.iter().position(|(p, _)| *p == prefix) else {
            return Err(OverlayError::NotFound(format!(
                "network \"{name}\": no route to {prefix}"
            )));
        };
        routes.remove(at);
        self.publish(&mut r);
        Ok(())
    }

    /// Every route (of network `name`, or all): network, prefix, VTEP.
    pub fn routes(
        &self,
        name: Option<&str>,
    ) -> Result<Vec<(String, IpPrefix, IpAddr)>, OverlayError> {
        let only = name.map(|n| self.index(n)).transpose()?;
        let t = self.topology();
        let mut out = Vec::new();
        for (i, nt) in t.networks.iter().enumerate() {
            if only.is_some_and(|o| usize::from(o) != i) {
                continue;
            }
            for &(p, v) in &nt.routes {
                if let Some(a) = self.vteps.addr(v) {
                    out.push((self.networks[i].name.clone(), p, a));
                }
            }
        }
        Ok(out)
    }

    /// A static neighbour: `ip` has `mac` in network `name` (`tep neigh
    /// add`).
    pub fn neigh_add(
        &self,
        name: &str,
        ip: IpAddr,
        mac: [u8; 6],
        replace: bool,
    ) -> Result<(), OverlayError> {
        self.neigh_put(name, ip, mac, Origin::Static, replace)
    }

    /// A control plane's neighbour (EVPN's remote MAC+IP): `ip` has `mac`
    /// in network `name`, replacing a learned or external entry but never
    /// a static one (`Exists`). Not aged; removed by its control plane
    /// ([`Overlay::neigh_del_external`]).
    pub fn neigh_set_external(
        &self,
        name: &str,
        ip: IpAddr,
        mac: [u8; 6],
    ) -> Result<(), OverlayError> {
        self.neigh_put(name, ip, mac, Origin::External, true)
    }

    /// Sets `ip`'s neighbour entry; an existing one only with `replace`,
    /// and a static one only by another static one.
    fn neigh_put(
        &self,
        name: &str,
        ip: IpAddr,
        mac: [u8; 6],
        origin: Origin,
        replace: bool,
    ) -> Result<(), OverlayError> {
        let (n, net) =
            self.network_of_layer(name, true, "ARP/ND suppression is for L2 networks")?;
        check_unicast_mac(mac)?;
        if ip.is_unspecified() || ip.is_multicast() {
            return Err(OverlayError::Invalid(format!(
                "{ip} is not a neighbour's unicast address"
            )));
        }
        let was = self.neigh.get(n, ip);
        if was.is_some_and(|e| !replace || (e.origin == Origin::Static && origin != e.origin)) {
            return Err(OverlayError::Exists(format!(
                "network \"{name}\": neighbour {ip} exists; use replace"
            )));
        }
        let entry = Neigh {
            mac,
            origin,
            seen_s: self.now_s(),
        };
        self.neigh.set(n, ip, entry, net.max_macs).map_err(|_| {
            OverlayError::Full(format!(
                "network \"{name}\": {} neighbours already (max_macs)",
                net.max_macs
            ))
        })?;
        Ok(())
    }

    /// Removes neighbour `ip` of network `name` if a control plane set it;
    /// whether it did.
    pub fn neigh_del_external(&self, name: &str, ip: IpAddr) -> Result<bool, OverlayError> {
        let (n, _) = self.network(name)?;
        let external = self
            .neigh
            .get(n, ip)
            .is_some_and(|e| e.origin == Origin::External);
        Ok(external && self.neigh.remove(n, ip).is_some())
    }

    /// Removes neighbour `ip` (`tep neigh del`).
    pub fn neigh_del(&self, name: &str, ip: IpAddr) -> Result<(), OverlayError> {
        let (n, _) = self.network(name)?;
        self.neigh
            .remove(n, ip)
            .map(|_| ())
            .ok_or_else(|| OverlayError::NotFound(format!("network \"{name}\": no neighbour {ip}")))
    }

    /// Every neighbour (of network `name`, or all): network, address,
    /// entry.
    pub fn neigh_rows(
        &self,
        name: Option<&str>,
    ) -> Result<Vec<(String, IpAddr, Neigh)>, OverlayError> {
        let only = name.map(|n| self.index(n)).transpose()?;
        Ok(self
            .neigh
            .entries(only)
            .into_iter()
            .filter_map(|(n, ip, e)| {
                self.networks
                    .get(usize::from(n))
                    .map(|net| (net.name.clone(), ip, e))
            })
            .collect())
    }

    /// Every network's counters and table sizes, by index: one walk of
    /// the FDB for all of them (a scrape of thousands of networks must
    /// not walk it once per network).
    pub fn stats(&self) -> Vec<NetworkStats> {
        let mut all: Vec<NetworkStats> = self
            .networks
            .iter()
            .enumerate()
            .map(|(i, net)| NetworkStats {
                neighbours: u64::from(self.neigh.count(i as u16)),
                ..net.counters.snapshot()
            })
            .collect();
        self.fdb.for_each(None, |k, _| {
            if let Some(s) = all.get_mut(usize::from(k.network())) {
                s.entries += 1;
            }
        });
        all
    }

    /// Ages out learned FDB entries and neighbours (call about once a
    /// second).
    pub fn sweep(&self) {
        let now = self.now_s();
        let ageing = |n: u16| {
            self.networks
                .get(usize::from(n))
                .map_or(300, |net| net.ageing_s)
        };
        self.fdb.sweep(now, ageing, |k, _| {
            if let Some(net) = self.networks.get(usize::from(k.network())) {
                NetworkCounters::add(&net.counters.aged, 1);
            }
        });
        self.neigh.sweep(now, ageing);
    }

    fn describe(&self, e: Entry) -> String {
        let at = match e.dst {
            Dst::Remote(v) => self
                .vteps
                .addr(v)
                .map_or_else(|| "a VTEP".to_string(), |a| format!("behind {a}")),
            Dst::Local => "local".to_string(),
        };
        let how = match e.origin {
            Origin::Static => "static",
            Origin::Learned => "learned",
            Origin::External => "external",
        };
        format!("{how}, {at}")
    }
}

/// One row of `tep fdb show`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FdbRow {
    /// The network's name.
    pub network: String,
    /// The MAC.
    pub mac: [u8; 6],
    /// The remote VTEP, or None for the local side.
    pub dst: Option<IpAddr>,
    /// Who made the entry.
    pub origin: Origin,
    /// Seconds since it was last seen (learned) or set.
    pub age_s: u32,
}

/// `aa:bb:cc:dd:ee:ff`.
pub fn fmt_mac(m: [u8; 6]) -> String {
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        m[0], m[1], m[2], m[3], m[4], m[5]
    )
}

fn check_unicast_mac(mac: [u8; 6]) -> Result<(), OverlayError> {
    if mac[0] & 1 != 0 || mac == [0; 6] {
        return Err(OverlayError::Invalid(format!(
            "{} is not a unicast MAC",
            fmt_mac(mac)
        )));
    }
    Ok(())
}
#[cfg(test)]
mod tests;
