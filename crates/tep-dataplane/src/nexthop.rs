//! Next hops, where tep writes whole frames (gateway mode): per next hop,
//! the Ethernet header to write in front, and a bounded route cache from
//! destination addresses (a tunnel's remote, an inner destination it
//! forwards to) to their next hops. The I/O layer fills the table from
//! the kernel's routes and neighbours and keeps it current from their
//! notifications; the nodes that write frames read it. A destination the
//! table does not know yet is noted for the I/O layer to resolve, and its
//! packets go to the kernel meanwhile ([`Output::Kernel`]), which resolves
//! the neighbour itself and delivers them.
//!
//! [`Output::Kernel`]: crate::pipeline::Output::Kernel

use crate::buffer::{ChecksumState, PacketId, Pool};
use crate::geometry::mix;
use crate::vector::PacketVector;
use core::net::IpAddr;
use tep_wire::{ethernet, ipv4, ipv6};

/// The Ethernet header in front of a frame tep sends on an interface: the
/// next hop's MAC, the interface's own, and an 802.1Q tag where the
/// interface is a trunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkHeader {
    /// Destination MAC: the next hop's.
    pub dst: [u8; 6],
    /// Source MAC: the sending interface's.
    pub src: [u8; 6],
    /// An 802.1Q VLAN id to tag with.
    pub vlan: Option<u16>,
}

impl LinkHeader {
    /// Bytes it takes in front of the IP packet.
    pub const fn len(&self) -> usize {
        match self.vlan {
            Some(_) => ethernet::HEADER_LEN + ethernet::TAG_LEN,
            None => ethernet::HEADER_LEN,
        }
    }

    /// Always false: a header has at least its MACs.
    pub const fn is_empty(&self) -> bool {
        false
    }

    /// Writes the header into `buf` (exactly [`len`](LinkHeader::len)
    /// bytes) for an IPv4 or IPv6 packet.
    pub fn write(&self, buf: &mut [u8], v6: bool) {
        let ethertype: u16 = if v6 { 0x86dd } else { 0x0800 };
        buf[ethernet::field::DESTINATION].copy_from_slice(&self.dst);
        buf[ethernet::field::SOURCE].copy_from_slice(&self.src);
        let at = ethernet::field::ETHERTYPE.start;
        match self.vlan {
            Some(vid) => {
                buf[at..at + 2].copy_from_slice(&0x8100u16.to_be_bytes());
                buf[at + 2..at + 4].copy_from_slice(&(vid & 0x0fff).to_be_bytes());
                buf[at + 4..at + 6].copy_from_slice(&ethertype.to_be_bytes());
            }
            None => buf[at..at + 2].copy_from_slice(&ethertype.to_be_bytes()),
        }
    }
}

/// Writes `h` in front of packet `id` (an IP packet at its data start) and
/// moves every offset of its metadata along. False when the headroom is
/// spent (it holds the deepest stack tep builds: not in practice).
pub(crate) fn prepend(pool: &mut Pool, id: PacketId, h: &LinkHeader) -> bool {
    let v6 = pool.data(id).first().is_some_and(|b| b >> 4 == 6);
    let Some(b) = pool.prepend(id, h.len()) else {
        return false;
    };
    h.write(b, v6);
    let n = h.len() as u16;
    let m = pool.meta_mut(id);
    let moved = |o: u16| if o == 0 { 0 } else { o + n };
    m.l3 += n;
    m.l4 = moved(m.l4);
    m.udp_payload = moved(m.udp_payload);
    m.inner += n;
    m.inner_l3 += n;
    m.inner_l4 = moved(m.inner_l4);
    if let ChecksumState::Partial { start, offset } = m.csum {
        m.csum = ChecksumState::Partial {
            start: start + n,
            offset: offset + n,
        };
    }
    true
}

/// Destinations noted unknown between two drains, at most: a burst to many
/// new destinations is resolved over a few rounds rather than allocating.
const WANTED: usize = 64;

/// Destinations a route cache holds by default (`[gateway] route_cache`).
pub const DEFAULT_ROUTES: usize = 65536;
/// Next hops a table holds by default (`[gateway] next_hops`): the
/// kernel's own neighbour table stops at 1024 (`gc_thresh3`) by default.
pub const DEFAULT_HOPS: usize = 1024;

/// A next hop: its slot in the table and which occupant of the slot it is
/// (a slot is reused when the table is full; routes to its previous
/// occupant then miss instead of reaching the new one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HopId {
    /// Index in the table, below its capacity.
    pub slot: u32,
    /// The occupant's generation.
    pub generation: u32,
}

/// What the route cache says of a destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// Its frames go to this next hop.
    Via(HopId),
    /// Not out of tep's interfaces (or no route): the kernel carries it.
    Kernel,
}

#[derive(Clone, Copy, Debug, Default)]
struct Hop {
    generation: u32,
    header: Option<LinkHeader>,
}

/// A route cache way: `hop` is [`EMPTY`], [`KERNEL`] or a slot.
#[derive(Clone, Copy, Debug)]
struct Way {
    dst: IpAddr,
    hop: u32,
    generation: u32,
}

const EMPTY: u32 = u32::MAX;
const KERNEL: u32 = u32::MAX - 1;
/// Ways per bucket: a destination lives in one of four places.
const WAYS: usize = 4;

/// Destination → next hop, a fixed set-associative table: one hash, at
/// most [`WAYS`] comparisons and no allocation a lookup. A full bucket
/// evicts by clock (a way used since the hand last passed is spared once),
/// so a scan of new destinations pushes out the idle ones, not the busy.
/// The hash is keyed per table: a sender cannot aim its addresses at the
/// bucket of a destination it wants to push out.
#[derive(Debug)]
struct RouteCache {
    ways: Box<[Way]>,
    // Per bucket: bits 0-3 a way used since the hand passed, 4-5 the hand.
    clock: Box<[u8]>,
    mask: usize,
    key: u64,
    evictions: u64,
}

impl RouteCache {
    /// Room for `capacity` destinations (rounded up to a power of two, at
    /// least one bucket).
    fn new(capacity: usize) -> RouteCache {
        let buckets = capacity.div_ceil(WAYS).max(1).next_power_of_two();
        let empty = Way {
            dst: IpAddr::from([0u8; 4]),
            hop: EMPTY,
            generation: 0,
        };
        RouteCache {
            ways: vec![empty; buckets * WAYS].into_boxed_slice(),
            clock: vec![0; buckets].into_boxed_slice(),
            mask: buckets - 1,
            key: random_key(),
            evictions: 0,
        }
    }

    #[inline]
    fn bucket(&self, dst: IpAddr) -> usize {
        let h = match dst {
            IpAddr::V4(a) => mix(self.key, u64::from(u32::from(a))),
            IpAddr::V6(a) => {
                let a = u128::from(a);
                mix(mix(self.key ^ 6, a as u64), (a >> 64) as u64)
            }
        };
        // The multiply leaves its best bits high.
        (h >> 32) as usize & self.mask
    }

    #[inline]
    fn find(&self, b: usize, dst: IpAddr) -> Option<usize> {
        (b * WAYS..b * WAYS + WAYS).find(|&i| self.ways[i].hop != EMPTY && self.ways[i].dst == dst)
    }

    /// The way of `dst`, marked used.
    #[inline]
    fn get(&mut self, dst: IpAddr) -> Option<Way> {
        let b = self.bucket(dst);
        let i = self.find(b, dst)?;
        let used = 1 << (i % WAYS);
        // Written only when it changes: a busy destination's lookups
        // leave the line clean.
        if self.clock[b] & used == 0 {
            self.clock[b] |= used;
        }
        Some(self.ways[i])
    }

    fn insert(&mut self, dst: IpAddr, hop: u32, generation: u32) {
        let b = self.bucket(dst);
        let i = match self.find(b, dst) {
            Some(i) => i,
            None => match (b * WAYS..b * WAYS + WAYS).find(|&i| self.ways[i].hop == EMPTY) {
                Some(i) => i,
                None => {
                    self.evictions += 1;
                    b * WAYS + self.sweep(b)
                }
            },
        };
        self.ways[i] = Way {
            dst,
            hop,
            generation,
        };
        // New: not yet used, so a scan's one-packet destinations go first.
        self.clock[b] &= !(1 << (i % WAYS));
    }

    /// Moves bucket `b`'s hand to the first way not used since it last
    /// passed, sparing (and clearing) the used ones; returns that way.
    fn sweep(&mut self, b: usize) -> usize {
        let c = self.clock[b];
        let (mut used, mut hand) = (c & 0x0f, usize::from(c >> 4));
        while used & (1 << hand) != 0 {
            used &= !(1 << hand);
            hand = (hand + 1) % WAYS;
        }
        self.clock[b] = used | (((hand as u8 + 1) % WAYS as u8) << 4);
        hand
    }

    fn remove(&mut self, dst: IpAddr) {
        let b = self.bucket(dst);
        if let Some(i) = self.find(b, dst) {
            self.ways[i].hop = EMPTY;
        }
    }

    fn clear(&mut self) {
        self.ways.iter_mut().for_each(|w| w.hop = EMPTY);
        self.clock.fill(0);
    }
}

/// A per-process random key (from the standard library's randomly keyed
/// hasher: no dependency for it).
fn random_key() -> u64 {
    use core::hash::BuildHasher;
    std::collections::hash_map::RandomState::new().hash_one(0x7e9u64)
}

/// The next-hop table (see the module doc): the next hops, each with the
/// Ethernet header to it, and a bounded route cache from destinations to
/// them. A next hop's new MAC is one entry to change, however many
/// destinations go through it.
#[derive(Debug)]
pub struct NextHops {
    hops: Box<[Hop]>,
    routes: RouteCache,
    wanted: Vec<IpAddr>,
}

impl Default for NextHops {
    /// A small table: what a pipeline needs for its tunnels' remotes (the
    /// gateway sizes its own with [`NextHops::new`]).
    fn default() -> Self {
        NextHops::new(256, 16)
    }
}

impl NextHops {
    /// Room for `routes` destinations and `hops` next hops.
    pub fn new(routes: usize, hops: usize) -> NextHops {
        NextHops {
            hops: vec![Hop::default(); hops.max(1)].into_boxed_slice(),
            routes: RouteCache::new(routes),
            wanted: Vec::with_capacity(WANTED),
        }
    }

    /// Next hops it has room for: [`HopId::slot`]s below this.
    pub fn hop_capacity(&self) -> usize {
        self.hops.len()
    }

    /// Sets the header to next hop `id` (`None`: not resolved yet, its
    /// destinations' packets go to the kernel). A slot beyond the table is
    /// ignored: the resolver sizes its table like the workers'.
    pub fn set_hop(&mut self, id: HopId, header: Option<LinkHeader>) {
        if let Some(h) = self.hops.get_mut(id.slot as usize) {
            *h = Hop {
                generation: id.generation,
                header,
            };
        }
    }

    /// Routes `dst`, evicting an idle destination where its bucket is full.
    pub fn route(&mut self, dst: IpAddr, route: Route) {
        match route {
            Route::Via(h) => self.routes.insert(dst, h.slot, h.generation),
            Route::Kernel => self.routes.insert(dst, KERNEL, 0),
        }
    }

    /// Forgets every route (the routing table changed); next hops stay.
    pub fn flush_routes(&mut self) {
        self.routes.clear();
    }

    /// Destinations evicted from the route cache to make room, so far.
    pub fn evictions(&self) -> u64 {
        self.routes.evictions
    }

    /// Routes `dst` through a next hop with header `header` (`None`:
    /// forgets `dst`): a next hop of the same header is shared, else a
    /// free slot is taken. For tables without a resolver (host mode's
    /// tunnel remotes, tests); false when no slot is free.
    pub fn set(&mut self, dst: IpAddr, header: Option<LinkHeader>) -> bool {
        let Some(h) = header else {
            self.routes.remove(dst);
            return true;
        };
        let slot = match self.hops.iter().position(|x| x.header == Some(h)) {
            Some(s) => s,
            None => match self.hops.iter().position(|x| x.header.is_none()) {
                Some(s) => s,
                None => return false,
            },
        };
        let id = HopId {
            slot: slot as u32,
            generation: self.hops[slot].generation,
        };
        self.set_hop(id, Some(h));
        self.route(dst, Route::Via(id));
        true
    }

    /// How to reach `dst`, if known and resolved (marks it used).
    #[inline]
    pub fn get(&mut self, dst: IpAddr) -> Option<&LinkHeader> {
        let w = self.routes.get(dst)?;
        let hop = self.hops.get(w.hop as usize)?;
        if hop.generation != w.generation {
            return None;
        }
        hop.header.as_ref()
    }

    /// The header to `dst`'s next hop; `None` sends its packet to the
    /// kernel, and a destination the cache does not know (or whose next hop
    /// was replaced) is noted for the I/O layer to resolve. A known one is
    /// not: its next hop's resolution, or the kernel's route, is already
    /// what the I/O layer follows.
    #[inline]
    pub(crate) fn lookup(&mut self, dst: IpAddr) -> Option<LinkHeader> {
        let Some(w) = self.routes.get(dst) else {
            self.want(dst);
            return None;
        };
        if w.hop == KERNEL {
            return None;
        }
        match self.hops.get(w.hop as usize) {
            Some(h) if h.generation == w.generation => h.header,
            _ => {
                self.want(dst);
                None
            }
        }
    }

    /// [`lookup`](NextHops::lookup) for the packets of one vector: a run
    /// of packets to one destination (a flow's burst) asks once.
    #[inline]
    pub(crate) fn lookup_run(
        &mut self,
        last: &mut Option<(IpAddr, Option<LinkHeader>)>,
        dst: IpAddr,
    ) -> Option<LinkHeader> {
        match *last {
            Some((d, h)) if d == dst => h,
            _ => {
                let h = self.lookup(dst);
                *last = Some((dst, h));
                h
            }
        }
    }

    /// Notes that a packet went to `dst` while it was unknown. No
    /// allocation: past [`WANTED`] distinct ones, later ones wait for the
    /// next round.
    fn want(&mut self, dst: IpAddr) {
        if self.wanted.len() < WANTED && !self.wanted.contains(&dst) {
            self.wanted.push(dst);
        }
    }

    /// Moves the destinations noted unknown since the last call to `out`,
    /// for the I/O layer to resolve.
    pub fn take_wanted(&mut self, out: &mut Vec<IpAddr>) {
        out.append(&mut self.wanted);
    }
}

/// Puts each packet of `v` (a bare IP packet: an outer reply, an ICMP
/// error) behind the Ethernet header to the next hop of its destination;
/// those without a known next hop go to `unresolved`, their destination
/// noted.
pub(crate) fn frame(
    pool: &mut Pool,
    v: &mut PacketVector,
    next_hops: &mut NextHops,
    unresolved: &mut PacketVector,
) {
    let mut keep = PacketVector::new();
    for &id in v.as_slice() {
        let dst = ip_dst(pool.data(id));
        match next_hops.lookup(dst) {
            Some(h) if prepend(pool, id, &h) => {
                keep.put(pool, id);
            }
            _ => {
                // At most as many as the vector held.
                unresolved.put(pool, id);
            }
        }
    }
    *v = keep;
}

/// The destination address of the checked IP header at the start of `ip`.
pub(crate) fn ip_dst(ip: &[u8]) -> IpAddr {
    let field = |r: core::ops::Range<usize>| ip.get(r).unwrap_or_default();
    if ip[0] >> 4 == 6 {
        let a: [u8; 16] = field(ipv6::field::DST_ADDR).try_into().unwrap_or_default();
        IpAddr::from(a)
    } else {
        let a: [u8; 4] = field(ipv4::field::DST_ADDR).try_into().unwrap_or_default();
        IpAddr::from(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_with_and_without_a_tag() {
        let h = LinkHeader {
            dst: [2, 0, 0, 0, 0, 2],
            src: [2, 0, 0, 0, 0, 1],
            vlan: None,
        };
        let mut b = [0u8; 18];
        h.write(&mut b[..14], true);
        assert_eq!(&b[..14], &[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x86, 0xdd]);
        let t = LinkHeader {
            vlan: Some(100),
            ..h
        };
        assert_eq!(t.len(), 18);
        t.write(&mut b, false);
        assert_eq!(&b[12..18], &[0x81, 0x00, 0, 100, 0x08, 0x00]);
    }

    fn hop(n: u8) -> LinkHeader {
        LinkHeader {
            dst: [n; 6],
            src: [2; 6],
            vlan: None,
        }
    }

    fn wanted(n: &mut NextHops) -> Vec<IpAddr> {
        let mut out = Vec::new();
        n.take_wanted(&mut out);
        out
    }

    #[test]
    fn unknown_destinations_are_noted_once_and_bounded() {
        let mut n = NextHops::default();
        let a: IpAddr = "192.0.2.2".parse().unwrap();
        assert_eq!(n.lookup(a), None);
        assert_eq!(n.lookup(a), None);
        for i in 0..200u8 {
            n.lookup(IpAddr::from([10, 0, 0, i]));
        }
        let out = wanted(&mut n);
        assert_eq!(out.len(), WANTED);
        assert_eq!(out[0], a);
        assert!(wanted(&mut n).is_empty(), "drained");
        assert!(n.set(a, Some(hop(1))));
        assert_eq!(n.lookup(a), Some(hop(1)));
        assert!(n.set(a, None));
        assert!(n.get(a).is_none());
    }

    #[test]
    fn a_next_hop_is_shared_by_its_destinations() {
        let mut n = NextHops::new(64, 4);
        let id = HopId {
            slot: 3,
            generation: 7,
        };
        n.set_hop(id, None);
        let dsts: Vec<IpAddr> = (1..=20u8)
            .map(|i| IpAddr::from([198, 51, 100, i]))
            .collect();
        for &d in &dsts {
            n.route(d, Route::Via(id));
        }
        // Known but unresolved: to the kernel, not asked for again.
        assert_eq!(n.lookup(dsts[0]), None);
        assert!(wanted(&mut n).is_empty());
        // One change reaches every destination through it.
        n.set_hop(id, Some(hop(9)));
        assert!(dsts.iter().all(|&d| n.lookup(d) == Some(hop(9))));
        // The slot given to another next hop: its old routes miss.
        n.set_hop(
            HopId {
                slot: 3,
                generation: 8,
            },
            Some(hop(5)),
        );
        assert_eq!(n.lookup(dsts[1]), None);
        assert_eq!(wanted(&mut n), [dsts[1]]);
        // The kernel's: no header, no question.
        n.route(dsts[2], Route::Kernel);
        assert_eq!(n.lookup(dsts[2]), None);
        assert!(wanted(&mut n).is_empty());
        n.flush_routes();
        assert_eq!(n.lookup(dsts[2]), None);
        assert_eq!(wanted(&mut n), [dsts[2]]);
        // A slot past the table is ignored, not a panic.
        n.set_hop(
            HopId {
                slot: 4,
                generation: 0,
            },
            Some(hop(1)),
        );
        n.route(
            dsts[3],
            Route::Via(HopId {
                slot: 4,
                generation: 0,
            }),
        );
        assert_eq!(n.lookup(dsts[3]), None);
    }

    #[test]
    fn a_scan_is_bounded_and_evicts_the_idle_not_the_busy() {
        let mut n = NextHops::new(1024, 16);
        // Fixed, so that no bucket draws more busy destinations than it has
        // ways (four busy ones in one bucket of four take turns).
        n.routes.key = 0x5eed;
        let capacity = n.routes.ways.len();
        assert_eq!(capacity, 1024);
        assert!(n.set("192.0.2.1".parse().unwrap(), Some(hop(1))));
        let busy: Vec<IpAddr> = (0..16u16)
            .map(|i| IpAddr::from([203, 0, 113, i as u8]))
            .chain((0..16u16).map(|i| IpAddr::from([0x2001, 0xdb8, 0, 0, 0, 0, 0, i])))
            .collect();
        for &d in &busy {
            assert!(n.set(d, Some(hop(1))));
        }
        let scan = 100_000u32;
        for i in 0..scan {
            let d = if i % 2 == 0 {
                IpAddr::from(std::net::Ipv4Addr::from((10u32 << 24) + i))
            } else {
                IpAddr::from(std::net::Ipv6Addr::from(
                    0x2001_0db8_0000_0000_0000_0000_0001_0000u128 + u128::from(i),
                ))
            };
            n.route(d, Route::Kernel);
            // The busy destinations carry traffic throughout.
            if i % 16 == 0 {
                for &b in &busy {
                    assert_eq!(n.lookup(b), Some(hop(1)), "{b} evicted after {i}");
                }
            }
        }
        assert_eq!(n.routes.ways.len(), capacity, "no growth");
        let held = n.routes.ways.iter().filter(|w| w.hop != EMPTY).count();
        assert_eq!(held, capacity, "full");
        assert!(
            n.evictions() >= u64::from(scan) + busy.len() as u64 + 1 - capacity as u64,
            "{} evictions",
            n.evictions()
        );
        assert!(wanted(&mut n).is_empty());
    }

    #[test]
    fn the_clock_spares_a_used_way_once() {
        let mut c = RouteCache::new(WAYS);
        let d = |i: u8| IpAddr::from([192, 0, 2, i]);
        for i in 0..4 {
            c.insert(d(i), 1, 0);
        }
        assert!(c.get(d(0)).is_some());
        c.insert(d(4), 1, 0);
        assert!(c.find(0, d(0)).is_some(), "used: spared");
        assert!(c.find(0, d(1)).is_none(), "the first idle one went");
        assert_eq!(c.evictions, 1);
        for i in 5..9 {
            c.insert(d(i), 1, 0);
        }
        assert!(c.find(0, d(0)).is_none(), "spared once, idle since");
    }
}
