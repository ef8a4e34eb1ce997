//! The overlay's nodes in a worker's pipeline, and the worker's view of
//! the [`Overlay`]:
//! - encap `neigh-suppress`: ARP requests and Neighbor Solicitations for
//!   known addresses answered back to the local side; announcements
//!   learned;
//! - encap `fdb-lookup`: the remote VTEP of each frame of an L2 network
//!   (its destination MAC in the FDB; broadcast, multicast and unknown
//!   unicast to the flood list), the local source MAC learned; the VTEP
//!   of each packet of an L3 network (its routes);
//! - encap `flood`: the copies of a flooded frame, one per further VTEP
//!   of the flood list, each derived from the finished first copy by
//!   rewriting its destination address (the checksums updated by the
//!   difference, RFC 1624), so that N copies cost N header writes and one
//!   sum;
//! - decap `fdb-learn`: the source MAC of each decapsulated frame learned
//!   behind the VTEP it came from (with learning off, a frame from a VTEP
//!   the network does not name is `wrong_peer`); ARP/ND announcements
//!   from the overlay learned for suppression.

use super::fdb::{Dst, FdbKey, Learned};
use super::neigh::{self, Neigh, NeighMessage};
use super::{NetTopology, NetworkCounters, Overlay, Topology, FLOOD, NOT_A_NETWORK};
use crate::buffer::{ChecksumState, PacketId, Pool};
use crate::config::ChecksumMode;
use crate::drop::DropReason;
use crate::node::NodeStats;
use crate::session::flat::{AddrKey, FlatMap};
use crate::tunnel::TunnelTable;
use crate::vector::{PacketVector, VECTOR_SIZE};
use core::cell::Cell;
use core::net::IpAddr;
use std::sync::Arc;
use tep_csum::Sum;
use tep_wire::ipv4::field as ip4;
use tep_wire::ipv6::field as ip6;
use tep_wire::udp;

/// Addresses a worker remembers the VTEP id of (or that none is known),
/// at least (the bound is the overlay's `max_vteps` where that is more):
/// past it the cache starts over, so that a stranger sending from many
/// spoofed sources costs lookups in the registry, not memory.
const VTEP_CACHE: usize = 4096;
/// An address with no VTEP id (learning off, or the VTEP bound reached).
const UNKNOWN: u32 = u32::MAX;
/// [`UNKNOWN`] in the cache, whose `u32::MAX` marks a free entry (ids
/// stay below `max_vteps`, at most 2^20).
const CACHED_UNKNOWN: u32 = u32::MAX - 1;

/// A worker's view of the overlay.
#[derive(Debug)]
pub(crate) struct OverlayWorker {
    pub overlay: Arc<Overlay>,
    pub topology: Arc<Topology>,
    /// The VTEP id of each address heard from: a flat map rather than
    /// std's, so that `fdb-learn` can fetch a run's entry before it reads
    /// it (across thousands of VTEPs each is a miss, two with hashbrown).
    vteps: FlatMap<AddrKey>,
    /// Whether a network suppresses ARP/ND (the node runs only then).
    suppress: bool,
    /// The local source MACs learned this second (FDB key, second), by
    /// key hash: a host's few local MACs send most frames, and each would
    /// otherwise read the FDB again. A MAC that moved back to this side
    /// within the second is learned local again the next.
    local_seen: Box<[Cell<(u64, u32)>]>,
    /// Whether the last `fdb-lookup` marked a frame for flooding: the
    /// `flood` node, a walk over the vector, runs only then.
    pub flooding: bool,
    /// `fdb-learn`'s cut of the vector (per run: tunnel, source key, the
    /// address it came from), kept rather than built per vector: clearing
    /// its 10 KiB each time cost about 4 clocks a packet (`fdb-learn` 25
    /// → 21 at 64 bytes, bursts of 8). None only while the node runs.
    learn_runs: Option<Box<Runs<(u32, u64, AddrKey)>>>,
    /// `fdb-lookup`'s cut (per run: tunnel, destination and source keys),
    /// kept likewise.
    lookup_runs: Option<Box<Runs<(u32, u64, u64)>>>,
}

/// Slots of [`OverlayWorker::local_seen`] (a power of two; 256 KiB a
/// worker): four per key for a host with a local MAC in each of 4,096
/// networks, where one per key left about two keys in three sharing a
/// slot with another, each evicting the other (one in five at four per
/// key; measured: encapsulation at 64 bytes, bursts of 8, +1 % against
/// 4,096 slots).
const LOCAL_SEEN: usize = 16384;

impl OverlayWorker {
    pub fn new(overlay: Arc<Overlay>) -> OverlayWorker {
        let topology = overlay.topology();
        let suppress = overlay.networks().iter().any(|n| n.neigh_suppress);
        OverlayWorker {
            overlay,
            topology,
            vteps: FlatMap::default(),
            suppress,
            local_seen: (0..LOCAL_SEEN).map(|_| Cell::new((0, 0))).collect(),
            flooding: false,
            learn_runs: Some(Runs::boxed()),
            lookup_runs: Some(Runs::boxed()),
        }
    }

    /// Takes the control plane's latest topology, if it moved (between
    /// vectors: one atomic load when it did not).
    #[inline]
    pub fn refresh(&mut self) {
        if self.overlay.generation() != self.topology.generation {
            self.topology = self.overlay.topology();
            // A verb may have given an id to an address cached as having
            // none (a VTEP heard from before `peer add` named it): with
            // learning off nothing else looks it up again.
            self.vteps.retain(|_, v| v != CACHED_UNKNOWN);
        }
    }

    /// Whether `neigh-suppress` has work.
    pub fn suppresses(&self) -> bool {
        self.suppress
    }

    /// The slot of local source `key` in `local_seen`.
    #[inline]
    fn local_slot(&self, key: u64) -> &Cell<(u64, u32)> {
        let slot = key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - LOCAL_SEEN.trailing_zeros());
        &self.local_seen[slot as usize]
    }

    /// Whether local source `key` was learned this second.
    #[inline]
    fn local_fresh(&self, key: u64, now_s: u32) -> bool {
        self.local_slot(key).get() == (key, now_s)
    }

    fn net(&self, n: u16) -> Option<&NetTopology> {
        self.topology.networks.get(usize::from(n))
    }

    /// The VTEP a packet of tunnel `tunnel` leaves for: the one its lookup
    /// chose, or for a flooded frame the first of the flood list. None
    /// for a packet of no network.
    #[inline]
    pub fn dst(&self, pool: &Pool, id: PacketId, tunnel: u32) -> Option<IpAddr> {
        let n = self.overlay.network_of(tunnel);
        if n == NOT_A_NETWORK {
            return None;
        }
        let v = match pool.vtep(id) {
            FLOOD => *self.net(n)?.flood.first()?,
            v => v,
        };
        self.overlay.vteps().addr(v)
    }

    /// The VTEP id of `addr`: from the worker's cache, else the registry
    /// (given out if `create`).
    fn vtep_of(&mut self, addr: IpAddr, create: bool) -> u32 {
        match self.vteps.get(AddrKey(addr)) {
            Some(CACHED_UNKNOWN) if !create => return UNKNOWN,
            Some(CACHED_UNKNOWN) | None => {}
            Some(v) => return v,
        }
        let found = if create {
            self.overlay.vtep_id(addr)
        } else {
            self.overlay.find_vtep(addr)
        };
        let v = found.unwrap_or(UNKNOWN);
        if self.vteps.len() >= VTEP_CACHE.max(self.overlay.vteps().capacity()) {
            self.vteps.clear();
        }
        let cached = if v == UNKNOWN { CACHED_UNKNOWN } else { v };
        self.vteps.insert(AddrKey(addr), cached);
        v
    }
}

/// Counts what learning did on a network's counters.
fn count(c: &NetworkCounters, outcome: Learned) {
    let counter = match outcome {
        Learned::Fresh | Learned::Refreshed => return,
        Learned::Added => &c.learned,
        Learned::Moved(_) => &c.moved,
        Learned::Pinned => &c.move_refused,
        Learned::Limit | Learned::Full => &c.learn_refused,
    };
    NetworkCounters::add(counter, 1);
}

fn mac_at(data: &[u8], at: usize) -> Option<[u8; 6]> {
    data.get(at..at + 6)?.try_into().ok()
}

fn is_unicast(mac: [u8; 6]) -> bool {
    mac[0] & 1 == 0 && mac != [0; 6]
}

/// How many runs ahead the nodes fetch what a run reads (its FDB
/// buckets, its VTEP's cache entry): enough to cover a miss to memory, few
/// enough that the fetches in flight fit the core's line-fill buffers (a
/// whole vector's would not). Measured at a million MACs: 8 against 4,
/// bursts of 1 encapsulate about 8 % faster, bursts of 8 the same.
const AHEAD: usize = 8;
/// How many runs ahead `fdb-lookup` fetches: further than `fdb-learn`.
/// Its fetch reads the source's slot in `local_seen` (to skip the line of
/// a source learned this second), a miss across thousands of networks
/// that stalls the fetch loop itself; started further ahead more of those
/// overlap. Measured at a million MACs against 8 (alternating, 15-21
/// rounds each): 12 encapsulates bursts of 1 3-5 % faster, 16 another
/// 1 %, 24 another 1.5 %, 32 no more; bursts of 8 +0.3-2 %. `fdb-learn`
/// at 6 or 16 instead of 8: no change.
const LOOKUP_AHEAD: usize = 24;

/// A vector cut into runs of frames that get one answer: a burst of one
/// flow's frames (same tunnel, same addresses) is asked about once, and
/// its other frames cost a comparison. A frame that must be read on its
/// own (an L3 network's) is a run of one in `fdb-lookup`; `fdb-learn`
/// reads a suppressing network's frames one by one within their run.
#[derive(Debug)]
struct Runs<K> {
    /// Each run's key.
    keys: [K; VECTOR_SIZE],
    /// Where each run starts; `starts[n]` is the vector's length.
    starts: [u16; VECTOR_SIZE + 1],
    /// Each run's FDB home bucket (of the key it looks up or learns), as
    /// its fetch found it: the lookup does not hash the key again.
    homes: [usize; VECTOR_SIZE],
    n: usize,
}

impl<K: Copy + PartialEq + Default> Runs<K> {
    /// An empty cut, on the heap (a worker keeps one per node: its arrays
    /// are not cleared per vector).
    fn boxed() -> Box<Runs<K>> {
        Box::new(Runs {
            keys: [K::default(); VECTOR_SIZE],
            starts: [0; VECTOR_SIZE + 1],
            homes: [0; VECTOR_SIZE],
            n: 0,
        })
    }

    /// Cuts `v` by `key(id)`: a key, and whether the frame stands alone.
    /// `fields(id)` are what a frame's key is made of, read raw (None
    /// where they cannot be, e.g. a frame too short): a frame whose
    /// fields equal the one before's joins that frame's run without its
    /// key being made. Making a key (the network, two MACs packed with
    /// their bytes swapped) for every frame cost about half of each node
    /// at bursts of 8; a comparison of the raw fields is a few
    /// instructions.
    #[inline]
    fn cut<F: PartialEq>(
        &mut self,
        v: &PacketVector,
        mut fields: impl FnMut(PacketId) -> Option<F>,
        mut key: impl FnMut(PacketId) -> (K, bool),
    ) {
        self.n = 0;
        let mut open = false;
        let mut last = None;
        for (i, &id) in v.as_slice().iter().enumerate() {
            let f = fields(id);
            if open && f.is_some() && f == last {
                continue;
            }
            let (k, alone) = key(id);
            if !open || self.keys[self.n - 1] != k {
                self.keys[self.n] = k;
                self.starts[self.n] = i as u16;
                self.n += 1;
            }
            open = !alone;
            last = f;
        }
        self.starts[self.n] = v.len() as u16;
    }

    /// Run `r`'s frames (indices into the vector).
    #[inline]
    fn frames(&self, r: usize) -> core::ops::Range<usize> {
        usize::from(self.starts[r])..usize::from(self.starts[r + 1])
    }
}

/// Marks each frame of `ids` dropped for `reason`.
fn refuse(pool: &mut Pool, ids: &[PacketId], reason: DropReason) {
    for &id in ids {
        pool.meta_mut(id).drop = Some(reason);
    }
}

/// What the previous frame of the vector found: a burst of one flow's
/// frames (a TCP window) asks the same twice, and the answer cannot have
/// changed in between but by a control verb, which a frame may miss.
#[derive(Default)]
struct LastHit {
    dst: Option<(u64, Option<Dst>)>,
    src: u64,
    // Frames flooded in a row of one network, counted once (an atomic add
    // per broadcast cost as much as its copy).
    flooded: Option<(u16, u64)>,
}

impl LastHit {
    fn flooded(&mut self, o: &Overlay, n: u16, frames: u64) {
        match &mut self.flooded {
            Some((m, c)) if *m == n => *c += frames,
            other => {
                Self::count(o, other.replace((n, frames)));
            }
        }
    }

    fn count(o: &Overlay, flooded: Option<(u16, u64)>) {
        if let Some((n, c)) = flooded {
            NetworkCounters::add(&o.networks()[usize::from(n)].counters.flooded, c);
        }
    }
}

/// Node `fdb-lookup`; returns whether it marked a frame for flooding.
/// `fetch_tunnel(t)` starts fetching what the nodes after read of network
/// tunnel `t` (its tunnel header template: one of thousands).
// Not inlined: called once a vector, and a symbol of its own lets a
// profiler count its instructions apart from the pipeline's.
#[inline(never)]
pub(crate) fn lookup(
    stats: &mut NodeStats,
    pool: &mut Pool,
    v: &mut PacketVector,
    ow: &mut OverlayWorker,
    now_s: u32,
    fetch_tunnel: impl Fn(u32),
) -> bool {
    let mut runs = ow.lookup_runs.take().unwrap_or_else(Runs::boxed);
    let flooding = lookup_runs(stats, pool, v, ow, &mut runs, now_s, fetch_tunnel);
    ow.lookup_runs = Some(runs);
    flooding
}

/// `fdb-lookup` with `runs`, its cut.
fn lookup_runs(
    stats: &mut NodeStats,
    pool: &mut Pool,
    v: &mut PacketVector,
    ow: &OverlayWorker,
    runs: &mut Runs<(u32, u64, u64)>,
    now_s: u32,
    fetch_tunnel: impl Fn(u32),
) -> bool {
    let mut flooding = false;
    let o = &*ow.overlay;
    // Per run: tunnel, destination and source keys (0 where a frame has
    // none or is no L2 network's).
    let fields = |id| {
        let macs: &[u8; 12] = pool.data(id).first_chunk()?;
        let (d, s) = macs.split_at(8);
        let d = u64::from_ne_bytes(d.try_into().ok()?);
        let s = u32::from_ne_bytes(s.try_into().ok()?);
        Some((u64::from(pool.meta(id).tunnel) << 32 | u64::from(s), d))
    };
    runs.cut(v, fields, |id| {
        let tunnel = pool.meta(id).tunnel;
        let net = o.net_ref(tunnel);
        if net.index == NOT_A_NETWORK || !net.l2 {
            return ((tunnel, 0, 0), net.index != NOT_A_NETWORK);
        }
        let data = pool.data(id);
        let key = |at: usize| mac_at(data, at).map_or(0, |m| FdbKey::new(net.index, m).0);
        ((tunnel, key(0), key(6)), false)
    });
    // A source learned this second is not read: fetching it anyway took a
    // line-fill buffer from the lookups that need one.
    // Returns the destination's home bucket (0 for no destination).
    let fetch = |(_, d, s): (u32, u64, u64)| {
        let s = if ow.local_fresh(s, now_s) { 0 } else { s };
        if s != 0 {
            o.fdb().prefetch(FdbKey(s));
        }
        if d == 0 {
            return 0;
        }
        let home = o.fdb().home_of(FdbKey(d));
        o.fdb().prefetch_home(home);
        home
    };
    let (mut last, mut refused) = (LastHit::default(), false);
    let ids = v.as_slice();
    // One call site for `fetch`, so that it is inlined.
    let mut fetched = 0;
    for r in 0..runs.n {
        while fetched < runs.n.min(r + LOOKUP_AHEAD + 1) {
            runs.homes[fetched] = fetch(runs.keys[fetched]);
            fetched += 1;
        }
        let frames = &ids[runs.frames(r)];
        let (_, d, s) = runs.keys[r];
        match lookup_one(
            pool,
            frames[0],
            ow,
            (FdbKey(d), runs.homes[r], FdbKey(s)),
            &mut last,
            now_s,
        ) {
            Err(reason) => {
                refuse(pool, frames, reason);
                refused = true;
            }
            Ok(None) => {}
            Ok(Some((n, vtep))) => {
                fetch_tunnel(runs.keys[r].0);
                if vtep == FLOOD {
                    flooding = true;
                    last.flooded(o, n, frames.len() as u64);
                } else {
                    o.vteps().prefetch(vtep);
                }
                for &id in frames {
                    pool.set_vtep(id, vtep);
                }
            }
        }
    }
    LastHit::count(o, last.flooded);
    if refused {
        crate::node::sweep(stats, pool, v);
    }
    flooding
}

#[inline(always)]
fn lookup_one(
    pool: &mut Pool,
    id: PacketId,
    ow: &OverlayWorker,
    // The destination, its FDB home bucket, the source.
    (dst, home, src): (FdbKey, usize, FdbKey),
    last: &mut LastHit,
    now_s: u32,
) -> Result<Option<(u16, u32)>, DropReason> {
    let o = &*ow.overlay;
    let net = o.net_ref(pool.meta(id).tunnel);
    let n = net.index;
    if n == NOT_A_NETWORK {
        return Ok(None);
    }
    let counters = || &o.networks()[usize::from(n)].counters;
    let vtep = if net.l2 {
        if dst.0 == 0 || src.0 == 0 {
            return Err(DropReason::Truncated);
        }
        if net.learning && is_unicast(src.mac()) && last.src != src.0 {
            let seen = ow.local_slot(src.0);
            if seen.get() != (src.0, now_s) {
                let learned = o.fdb().learn(src, Dst::Local, now_s, net.max_macs);
                count(counters(), learned);
                seen.set((src.0, now_s));
            }
            last.src = src.0;
        }
        let known = match last.dst {
            Some((k, d)) if k == dst.0 => d,
            _ => {
                let d = if dst.mac()[0] & 1 == 0 {
                    o.fdb().lookup_from(dst, home).map(|e| e.dst)
                } else {
                    None
                };
                last.dst = Some((dst.0, d));
                d
            }
        };
        match known {
            Some(Dst::Remote(v)) => v,
            // The local side bridged it already (a bridge floods frames it
            // does not know to every port, this one too).
            Some(Dst::Local) => return Err(DropReason::LocalMac),
            None => FLOOD,
        }
    } else {
        let m = pool.meta(id);
        let ip = pool.data(id).get(usize::from(m.inner_l3)..).unwrap_or(&[]);
        let topo = ow.net(n).ok_or(DropReason::NoRoute)?;
        topo.route(inner_dst(ip).ok_or(DropReason::NotIp)?)
            .ok_or(DropReason::NoRoute)?
    };
    if vtep == FLOOD && ow.net(n).is_none_or(|t| t.flood.is_empty()) {
        return Err(DropReason::NoRoute);
    }
    Ok(Some((n, vtep)))
}

/// The destination address of an IP packet.
fn inner_dst(ip: &[u8]) -> Option<IpAddr> {
    match ip.first()? >> 4 {
        4 => {
            let a: [u8; 4] = ip.get(ip4::DST_ADDR)?.try_into().ok()?;
            Some(IpAddr::from(a))
        }
        6 => {
            let a: [u8; 16] = ip.get(ip6::DST_ADDR)?.try_into().ok()?;
            Some(IpAddr::from(a))
        }
        _ => None,
    }
}

/// Whether a frame may be ARP or ICMPv6 (what `neigh::classify` reads),
/// from its EtherType alone.
fn maybe_neigh(data: &[u8]) -> bool {
    matches!(
        data.get(12..14),
        Some([0x08, 0x06] | [0x86, 0xdd] | [0x81, 0x00])
    )
}

/// Node `neigh-suppress`: an ARP request or Neighbor Solicitation from
/// the local side of a suppressing network for an address in its table is
/// answered (the request's buffer becomes the answer, to `answers`); an
/// announcement is learned. Returns how many were answered.
pub(crate) fn suppress(
    pool: &mut Pool,
    v: &mut PacketVector,
    ow: &OverlayWorker,
    answers: &mut PacketVector,
    now_s: u32,
) -> u64 {
    let o = &*ow.overlay;
    let mut answered = 0;
    let mut keep = PacketVector::new();
    for &id in v.as_slice() {
        let net = o.net_ref(pool.meta(id).tunnel);
        let (n, suppressing) = (net.index, net.suppress);
        if suppressing && maybe_neigh(pool.data(id)) && pool.linearize(id) {
            if let Some(reply) = snoop(pool, id, o, n, now_s) {
                answer_in_place(pool, id, reply);
                NetworkCounters::add(&o.networks()[usize::from(n)].counters.suppressed, 1);
                answered += 1;
                answers.put(pool, id);
                continue;
            }
        }
        keep.put(pool, id);
    }
    *v = keep;
    answered
}

/// Learns what frame `id` of network `n` announces; for a request whose
/// address is known, the answer (its bytes and length).
fn snoop(pool: &Pool, id: PacketId, o: &Overlay, n: u16, now_s: u32) -> Option<([u8; 128], usize)> {
    let data = pool.data(id);
    match neigh::classify(data) {
        NeighMessage::Announce { ip, mac } => {
            learn_neigh(o, n, ip, mac, now_s);
            None
        }
        NeighMessage::Request { target } => {
            let known = o.neighbours().get(n, target)?;
            let mut out = [0u8; 128];
            let len = neigh::answer(data, known.mac, &mut out)?;
            Some((out, len))
        }
        NeighMessage::Other => None,
    }
}

fn learn_neigh(o: &Overlay, n: u16, ip: IpAddr, mac: [u8; 6], now_s: u32) {
    let net = &o.networks()[usize::from(n)];
    if !is_unicast(mac) || ip.is_unspecified() || ip.is_multicast() {
        return;
    }
    let was = o.neighbours().get(n, ip);
    if was.is_some_and(|w| w.mac == mac && w.seen_s == now_s) {
        return;
    }
    let entry = Neigh {
        mac,
        origin: super::fdb::Origin::Learned,
        seen_s: now_s,
    };
    if let Ok(None) = o.neighbours().set(n, ip, entry, net.max_macs) {
        NetworkCounters::add(&net.counters.neigh_learned, 1);
    }
}

/// Makes packet `id` the answer `reply`: a whole frame to the local side.
fn answer_in_place(pool: &mut Pool, id: PacketId, (bytes, len): ([u8; 128], usize)) {
    if pool.set_len(id, len) {
        pool.data_mut(id)[..len].copy_from_slice(&bytes[..len]);
    }
    let m = pool.meta_mut(id);
    m.csum = ChecksumState::None;
    m.gso = None;
    m.l2 = 0;
    m.inner = 0;
    // Framed already (gateway mode frames only bare IP packets again).
    m.inner_l3 = 14;
}

/// The FDB key of the MAC at `at` of a frame of network `net` (0 where
/// the frame is too short, or `net` is no L2 network).
#[inline]
fn mac_key(net: super::NetRef, data: &[u8], at: usize) -> u64 {
    if net.index == NOT_A_NETWORK || !net.l2 {
        return 0;
    }
    mac_at(data, at).map_or(0, |m| FdbKey::new(net.index, m).0)
}

/// Node `fdb-learn`: see the module's doc.
pub(crate) fn learn(
    stats: &mut NodeStats,
    pool: &mut Pool,
    v: &mut PacketVector,
    ow: &mut OverlayWorker,
    now_s: u32,
) {
    let o = ow.overlay.clone();
    let mut runs = ow.learn_runs.take().unwrap_or_else(Runs::boxed);
    // Per run: tunnel, source key (0 where a frame has none or is no L2
    // network's), the address it came from. A suppressing network's
    // frames are cut as any, and read one by one within their run below.
    let fields = |id| {
        let m = pool.meta(id);
        let at = usize::from(m.inner) + 6;
        let mac = pool.data(id).get(at..at + 6)?;
        let mac = u64::from(u32::from_ne_bytes(mac[..4].try_into().ok()?))
            | u64::from(u16::from_ne_bytes(mac[4..].try_into().ok()?)) << 32;
        // Integers compare in a few instructions, an `IpAddr` in many.
        let (v6, from) = match pool.outer(id).src {
            IpAddr::V4(a) => (0, u128::from(u32::from_ne_bytes(a.octets()))),
            IpAddr::V6(a) => (1, u128::from_ne_bytes(a.octets())),
        };
        Some((u64::from(m.tunnel) << 1 | v6, mac, from))
    };
    runs.cut(v, fields, |id| {
        let m = pool.meta(id);
        let at = usize::from(m.inner) + 6;
        let src = mac_key(o.net_ref(m.tunnel), pool.data(id), at);
        let key = (m.tunnel, src, AddrKey(pool.outer(id).src));
        (key, false)
    });
    // Returns the source's home bucket (0 for no source).
    let fetch = |ow: &OverlayWorker, (_, src, from): (u32, u64, AddrKey)| {
        ow.vteps.prefetch(from);
        if src == 0 {
            return 0;
        }
        let home = o.fdb().home_of(FdbKey(src));
        o.fdb().prefetch_home(home);
        home
    };
    let (mut last, mut refused) = (Learning::default(), false);
    // One call site for `fetch`, so that it is inlined.
    let mut fetched = 0;
    for r in 0..runs.n {
        while fetched < runs.n.min(r + AHEAD + 1) {
            runs.homes[fetched] = fetch(ow, runs.keys[fetched]);
            fetched += 1;
        }
        let frames = &v.as_slice()[runs.frames(r)];
        let (tunnel, src, AddrKey(from)) = runs.keys[r];
        let net = o.net_ref(tunnel);
        let vtep = match last.vtep {
            Some((a, create, id)) if a == from && create == net.learning => id,
            _ => {
                let id = ow.vtep_of(from, net.learning);
                last.vtep = Some((from, net.learning, id));
                id
            }
        };
        let src = (FdbKey(src), runs.homes[r]);
        // A suppressing network's frames are each read for ARP/ND.
        let each = if net.suppress { frames } else { &frames[..1] };
        for &id in each {
            if let Err(reason) = learn_one(pool, id, ow, (&o, net), (src, vtep), &mut last, now_s) {
                refuse(pool, frames, reason);
                refused = true;
                break;
            }
        }
    }
    ow.learn_runs = Some(runs);
    if refused {
        crate::node::sweep(stats, pool, v);
    }
}

/// What the previous run of the vector was learned as: the frames of a
/// vector mostly come from a few VTEPs, in runs.
#[derive(Default)]
struct Learning {
    vtep: Option<(IpAddr, bool, u32)>,
    learned: Option<(u64, u32)>,
}

#[inline(always)]
fn learn_one(
    pool: &mut Pool,
    id: PacketId,
    ow: &mut OverlayWorker,
    // The overlay, and the network of frame `id`'s run (its tunnel's).
    (o, net): (&Overlay, super::NetRef),
    // The source, its FDB home bucket, the VTEP it came from.
    ((src, home), vtep): ((FdbKey, usize), u32),
    last: &mut Learning,
    now_s: u32,
) -> Result<(), DropReason> {
    let n = net.index;
    if n == NOT_A_NETWORK {
        return Ok(());
    }
    let counters = || &o.networks()[usize::from(n)].counters;
    // Only without learning does the network's list of VTEPs matter (it
    // lies in the topology, a miss per packet across thousands).
    let named = |v: u32| v != UNKNOWN && ow.net(n).is_some_and(|t| t.knows(v));
    if !net.learning && !named(vtep) {
        return Err(DropReason::WrongPeer);
    }
    if !net.l2 {
        return Ok(());
    }
    if src.0 == 0 {
        return Err(DropReason::Truncated);
    }
    if net.learning && vtep == UNKNOWN {
        NetworkCounters::add(&counters().learn_refused, 1);
    } else if net.learning && is_unicast(src.mac()) && last.learned != Some((src.0, vtep)) {
        let learned = o
            .fdb()
            .learn_from(src, home, Dst::Remote(vtep), now_s, net.max_macs);
        count(counters(), learned);
        last.learned = Some((src.0, vtep));
    }
    let inner = usize::from(pool.meta(id).inner);
    if net.suppress && maybe_neigh(&pool.data(id)[inner..]) {
        if let NeighMessage::Announce { ip, mac } = neigh::classify(&pool.data(id)[inner..]) {
            learn_neigh(o, n, ip, mac, now_s);
        }
    }
    Ok(())
}

/// Node `flood`: for each packet of `v` marked for flooding (finished,
/// addressed to the first VTEP of its flood list), a copy to each further
/// VTEP, into `copies`. Resumes at `at` (packet, copy) and stops when
/// `copies` is full, saving where it stopped for the next call; returns
/// whether it got through `v`, and the copies made.
pub(crate) fn flood(
    pool: &mut Pool,
    v: &PacketVector,
    ow: &OverlayWorker,
    table: &TunnelTable,
    copies: &mut PacketVector,
    at: &mut (usize, usize),
) -> (bool, u64) {
    let o = &*ow.overlay;
    let mut made = 0;
    let ids = v.as_slice();
    while let Some(&id) = ids.get(at.0) {
        if pool.vtep(id) == FLOOD {
            let tunnel = pool.meta(id).tunnel;
            let n = o.network_of(tunnel);
            let list = ow.net(n).map_or(&[][..], |t| &t.flood[..]);
            // A list of one makes no copy: nothing more to read.
            let many = list.len() > 1;
            let first = list
                .first()
                .filter(|_| many)
                .and_then(|&f| o.vteps().addr(f));
            let mode = table.checksum(tunnel);
            let whole = many && (at.1 > 1 || pool.linearize(id));
            while let (Some(&next), Some(first), true) = (list.get(at.1), first, whole) {
                if copies.len() == VECTOR_SIZE {
                    return (false, made);
                }
                at.1 += 1;
                let Some(addr) = o.vteps().addr(next) else {
                    continue;
                };
                let Some(c) = pool.duplicate(id) else { break };
                pool.set_vtep(c, next);
                readdress(pool, c, first, addr, mode);
                made += 1;
                copies.put(pool, c);
            }
            if let Some(&f) = list.first() {
                pool.set_vtep(id, f);
            }
            // The copies this frame got (a pool run dry cuts them short).
            let walked = at.1.saturating_sub(1) as u64;
            if let (Some(net), true) = (o.networks().get(usize::from(n)), walked > 0) {
                NetworkCounters::add(&net.counters.flood_copies, walked);
            }
        }
        *at = (at.0 + 1, 1);
    }
    (true, made)
}

/// The 16-bit words of an address.
fn words(a: IpAddr) -> ([u16; 8], usize) {
    let mut w = [0u16; 8];
    match a {
        IpAddr::V4(a) => {
            let o = a.octets();
            w[0] = u16::from_be_bytes([o[0], o[1]]);
            w[1] = u16::from_be_bytes([o[2], o[3]]);
            (w, 2)
        }
        IpAddr::V6(a) => (a.segments(), 8),
    }
}

/// What replacing address `old` by `new` adds to a ones' complement sum
/// (RFC 1624: `~m + m'` per word).
fn delta(old: IpAddr, new: IpAddr) -> u64 {
    let ((o, k), (n, _)) = (words(old), words(new));
    (0..k).map(|i| u64::from(!o[i]) + u64::from(n[i])).sum()
}

/// Readdresses a finished copy from `old` to `new`: its destination, and
/// the checksums over it by the difference.
fn readdress(pool: &mut Pool, id: PacketId, old: IpAddr, new: IpAddr, mode: ChecksumMode) {
    let m = *pool.meta(id);
    if m.by_socket {
        // The socket writes the headers (and the kernel the checksum).
        pool.outer_mut(id).dst = new;
        return;
    }
    let d = delta(old, new);
    let l3 = usize::from(m.l3);
    let data = pool.data_mut(id);
    let ip = &mut data[l3..];
    match new {
        IpAddr::V4(a) => {
            ip[ip4::DST_ADDR].copy_from_slice(&a.octets());
            let c = u16::from_be_bytes([ip[ip4::CHECKSUM.start], ip[ip4::CHECKSUM.start + 1]]);
            let c = !Sum::from_words(u64::from(!c) + d).value();
            ip[ip4::CHECKSUM].copy_from_slice(&c.to_be_bytes());
        }
        IpAddr::V6(a) => ip[ip6::DST_ADDR].copy_from_slice(&a.octets()),
    }
    let field = usize::from(m.l4) + udp::CHECKSUM_OFFSET;
    let at = &mut data[field..field + 2];
    let c = u16::from_be_bytes([at[0], at[1]]);
    let partial = mode == ChecksumMode::Offload || m.gso.is_some();
    let c = match mode {
        ChecksumMode::Zero => return,
        _ if partial => Sum::from_words(u64::from(c) + d).value(),
        // 0 is sent as 0xffff: the same number in ones' complement.
        _ => match !Sum::from_words(u64::from(!c) + d).value() {
            0 => 0xffff,
            c => c,
        },
    };
    at.copy_from_slice(&c.to_be_bytes());
}
