//! The tunnel table: transmit lookups (inner prefix, inner MAC) and receive
//! lookups (local port → kind, then remote address + VNI/TEID/key), built
//! once from the config. Lookups allocate nothing.

use crate::config::{ChecksumMode, TunnelConfig};
use crate::drop::DropReason;
use crate::geometry::mix;
use crate::kind::TunnelKind;
use core::hash::{BuildHasherDefault, Hasher};
use core::net::IpAddr;
use std::collections::HashMap;

/// A multiply-rotate hasher for the small fixed-size keys of the receive
/// table: std's SipHash defends against hash flooding at ~20 ns a key,
/// which the per-packet path cannot afford, and the keys here come from the
/// operator's config, not the attacker (a packet only chooses which
/// existing key it asks for).
#[derive(Default, Clone, Copy, Debug)]
pub(crate) struct FastHasher(u64);

impl Hasher for FastHasher {
    fn finish(&self) -> u64 {
        // A product's low bits depend only on the low bits of what was
        // multiplied, and hashbrown picks the bucket by the low bits: keys
        // that differ only above them (IPv4 addresses, whose last octets
        // are the high bytes of the word) all met in one bucket. The high
        // bits are the well-mixed ones: fold them down.
        self.0 ^ (self.0 >> 32)
    }
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(w));
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.write_u64(u64::from(i));
    }
    fn write_u16(&mut self, i: u16) {
        self.write_u64(u64::from(i));
    }
    fn write_u32(&mut self, i: u32) {
        self.write_u64(u64::from(i));
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = mix(self.0, i);
    }
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }
}

pub(crate) type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHasher>>;

/// What identifies a tunnel on receive besides port and peer: the VNI, the
/// TEID, the GRE key (or its absence), nothing (GUE, FOU).
pub(crate) fn receive_id(t: &TunnelConfig) -> u64 {
    match t.kind {
        TunnelKind::Vxlan | TunnelKind::Geneve => u64::from(t.vni),
        TunnelKind::Gtpu => u64::from(t.local_teid),
        TunnelKind::GreInUdp | TunnelKind::FouGre | TunnelKind::GueGre => gre_id(t.key),
        TunnelKind::Gue | TunnelKind::FouIpip | TunnelKind::FouSit => 0,
    }
}

/// The receive id of a GRE header's key: keyless is distinct from key 0.
pub(crate) const fn gre_id(key: Option<u32>) -> u64 {
    match key {
        Some(k) => k as u64,
        None => 1 << 32,
    }
}

/// An inner prefix routed into a tunnel (`A`: the address as an integer).
#[derive(Clone, Copy, Debug)]
struct Route<A> {
    net: A,
    mask: A,
    tunnel: u32,
}

impl Route<u128> {
    /// The route of the first `len` bits of `addr`, a `width`-bit address
    /// in the low bits.
    fn of(addr: u128, len: u8, width: u32, tunnel: u32) -> Route<u128> {
        let all = u128::MAX >> (128 - width);
        let mask = all.checked_shl(width - u32::from(len)).unwrap_or(0) & all;
        Route {
            net: addr & mask,
            mask,
            tunnel,
        }
    }
}

/// What the per-packet nodes ask of a tunnel, kept beside the configs in
/// eight bytes (a config is a few hundred, and thousands of networks' do
/// not stay in the caches).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hot {
    /// Its kind.
    pub kind: TunnelKind,
    /// Its outer checksum mode.
    pub checksum: ChecksumMode,
    /// An N3 tunnel (`TunnelConfig::sessions`).
    pub sessions: bool,
    /// A network (`TunnelConfig::network`).
    pub network: bool,
    /// `zero_checksum_rx`.
    pub zero_checksum_rx: bool,
}

impl Hot {
    fn of(t: &TunnelConfig) -> Hot {
        Hot {
            kind: t.kind,
            checksum: t.checksum,
            sessions: t.sessions,
            network: t.is_network(),
            zero_checksum_rx: t.zero_checksum_rx,
        }
    }
}

/// A tunnel as the receive lookup asks for it, beside the configs.
#[derive(Clone, Copy, Debug)]
struct Receiver {
    tunnel: u32,
    remote: IpAddr,
    local: IpAddr,
    // A network takes every remote (fdb-learn checks the VTEP where
    // learning is off).
    any_remote: bool,
}

impl Receiver {
    #[inline]
    fn takes(&self, remote: IpAddr, local: IpAddr) -> bool {
        (self.any_remote || self.remote == remote) && self.local == local
    }
}

/// The receive lookup's table: (local port, id) → the tunnels with that
/// id, by open addressing over slots of 16 bytes, four to a line: a
/// lookup reads one line, which `vxlan-decap` fetches packets ahead when
/// thousands of networks make it a miss (hashbrown reads two, one after
/// the other, and offers no way to fetch either early). A slot holds all
/// a network on an IPv4 address needs checked (that address: it takes
/// every remote), so that the usual lookup across thousands reads no
/// more; other keys name their list of receivers (point-to-point
/// tunnels: a few, in cache). At 4,096 networks the table is 128 KiB,
/// which stays in L2 beside the FDB's traffic, where slots of a line
/// each (512 KiB) did not.
#[derive(Debug, Default)]
struct RxTable {
    slots: Box<[RxSlot]>,
    /// The receivers of each key whose slot does not say them itself.
    lists: Vec<Vec<Receiver>>,
}

#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(16))]
struct RxSlot {
    /// [`RxTable::key`], with [`RxTable::V4_LOCAL`] where `check` is an
    /// address; 0: free.
    key: u64,
    /// The tunnel, where `check` is an address.
    tunnel: u32,
    /// The IPv4 address the one receiver takes datagrams to, from any
    /// remote ([`RxTable::V4_LOCAL`]); else the index into `lists`.
    check: u32,
}

impl RxTable {
    /// In a slot's key: `check` is the local IPv4 address of one
    /// receiver that takes every remote (a network). Keys leave the bit
    /// clear: ports take bits 40..56.
    const V4_LOCAL: u64 = 1 << 56;

    /// Port and id in one word, never 0 (ids take at most 33 bits).
    #[inline]
    fn key(port: u16, id: u64) -> u64 {
        1 << 63 | u64::from(port) << 40 | (id & ((1 << 40) - 1))
    }

    fn new(entries: FastMap<(u16, u64), (Receiver, Vec<Receiver>)>) -> RxTable {
        let len = (entries.len() * 2).next_power_of_two().max(16);
        let mut t = RxTable {
            slots: vec![RxSlot::default(); len].into_boxed_slice(),
            lists: Vec::new(),
        };
        for ((port, id), (first, more)) in entries {
            let key = Self::key(port, id);
            let mut i = t.home(key);
            while t.slots[i].key != 0 {
                i = (i + 1) & (len - 1);
            }
            t.slots[i] = match (first.local, first.any_remote && more.is_empty()) {
                (IpAddr::V4(a), true) => RxSlot {
                    key: key | Self::V4_LOCAL,
                    tunnel: first.tunnel,
                    check: u32::from(a),
                },
                _ => {
                    t.lists.push([first].into_iter().chain(more).collect());
                    RxSlot {
                        key,
                        tunnel: first.tunnel,
                        check: (t.lists.len() - 1) as u32,
                    }
                }
            };
        }
        t
    }

    #[inline]
    fn home(&self, key: u64) -> usize {
        // An empty table has no slot: `find` checks, `prefetch` finds none.
        (mix(0x7278_5f74_6162_6c65, key) >> 32) as usize & self.slots.len().wrapping_sub(1)
    }

    /// The tunnel of `(port, id)` that takes datagrams from `remote` to
    /// `local`: None where no tunnel has the id, Some(None) where none
    /// of those that have it takes them.
    #[inline]
    fn find(&self, port: u16, id: u64, remote: IpAddr, local: IpAddr) -> Option<Option<u32>> {
        let want = Self::key(port, id) | Self::V4_LOCAL;
        let mask = self.slots.len().checked_sub(1)?;
        let mut i = self.home(want & !Self::V4_LOCAL);
        loop {
            let s = &self.slots[i];
            if s.key | Self::V4_LOCAL == want {
                return Some(if s.key & Self::V4_LOCAL != 0 {
                    let to_it = matches!(local, IpAddr::V4(a) if u32::from(a) == s.check);
                    to_it.then_some(s.tunnel)
                } else {
                    self.lists[s.check as usize]
                        .iter()
                        .find(|r| r.takes(remote, local))
                        .map(|r| r.tunnel)
                });
            }
            if s.key == 0 {
                return None;
            }
            i = (i + 1) & mask;
        }
    }

    /// Starts fetching the line `(port, id)` lands in (a hint).
    #[inline]
    fn prefetch(&self, port: u16, id: u64) {
        if let Some(s) = self.slots.get(self.home(Self::key(port, id))) {
            crate::session::flat::prefetch(s);
        }
    }

    /// The table's bytes.
    fn bytes(&self) -> usize {
        core::mem::size_of_val(&*self.slots)
    }
}

/// The tunnels and their lookup structures.
#[derive(Debug)]
pub struct TunnelTable {
    tunnels: Vec<TunnelConfig>,
    // What every packet asks of its tunnel, apart from the configs (a few
    // hundred bytes each, thousands with networks): eight bytes a tunnel.
    hot: Vec<Hot>,
    // Longest prefix first; a linear scan behind the last-hit cache is
    // enough for the tens of prefixes a tunnel endpoint routes.
    routes4: Vec<Route<u32>>,
    routes6: Vec<Route<u128>>,
    macs: FastMap<[u8; 6], u32>,
    default_l2: Option<u32>,
    ports: FastMap<u16, TunnelKind>,
    // (local port, id) → the tunnels with that id (the first inline: the
    // usual case asks no more), to tell a wrong peer from an unknown id.
    receive: RxTable,
    // See allows_tunnel_gso.
    tunnel_gso: bool,
}

impl TunnelTable {
    /// Builds the table from validated tunnels
    /// ([`check_tunnels`](crate::config::check_tunnels)).
    pub fn new(tunnels: &[TunnelConfig]) -> TunnelTable {
        let mut t = TunnelTable {
            tunnels: tunnels.to_vec(),
            hot: tunnels.iter().map(Hot::of).collect(),
            routes4: Vec::new(),
            routes6: Vec::new(),
            macs: FastMap::default(),
            default_l2: None,
            ports: FastMap::default(),
            receive: RxTable::default(),
            tunnel_gso: !tunnels.is_empty()
                && tunnels
                    .iter()
                    .all(|t| t.kind != TunnelKind::Gtpu && t.checksum != ChecksumMode::Remote),
        };
        let mut receive: FastMap<(u16, u64), (Receiver, Vec<Receiver>)> = FastMap::default();
        for (i, tun) in tunnels.iter().enumerate() {
            let i = i as u32;
            for p in &tun.inner_prefixes {
                match p.addr {
                    IpAddr::V4(a) => {
                        let r = Route::of(u32::from(a).into(), p.len, 32, i);
                        t.routes4.push(Route {
                            net: r.net as u32,
                            mask: r.mask as u32,
                            tunnel: i,
                        });
                    }
                    IpAddr::V6(a) => t.routes6.push(Route::of(a.into(), p.len, 128, i)),
                }
            }
            // A network finds its VTEPs in the overlay's tables.
            if tun.kind.carries_ethernet() && !tun.is_network() {
                if tun.inner_macs.is_empty() {
                    t.default_l2.get_or_insert(i);
                }
                for m in &tun.inner_macs {
                    t.macs.entry(m.0).or_insert(i);
                }
            }
            t.ports.entry(tun.local_port).or_insert(tun.kind);
            // An N3 tunnel's TEIDs are its sessions' (crate::session).
            if !tun.sessions {
                let r = Receiver {
                    tunnel: i,
                    remote: tun.remote,
                    local: tun.local,
                    any_remote: tun.is_network(),
                };
                match receive.entry((tun.local_port, receive_id(tun))) {
                    std::collections::hash_map::Entry::Occupied(mut e) => e.get_mut().1.push(r),
                    std::collections::hash_map::Entry::Vacant(e) => {
                        e.insert((r, Vec::new()));
                    }
                }
            }
        }
        t.receive = RxTable::new(receive);
        t.routes4
            .sort_by_key(|r| core::cmp::Reverse(r.mask.count_ones()));
        t.routes6
            .sort_by_key(|r| core::cmp::Reverse(r.mask.count_ones()));
        t
    }

    /// Whether every tunnel's super-packets can be encapsulated whole and
    /// segmented by a UDP-tunnel GSO device: the device copies the outer
    /// headers to each segment and fixes only the IP and UDP lengths, so
    /// the tunnel header must carry no length of its own (GTP-U does) and
    /// no remote checksum offload (its start and offset are per packet).
    pub fn allows_tunnel_gso(&self) -> bool {
        self.tunnel_gso
    }

    /// The tunnels, indexed by tunnel number.
    pub fn tunnels(&self) -> &[TunnelConfig] {
        &self.tunnels
    }

    /// One tunnel.
    #[inline]
    pub fn get(&self, index: u32) -> &TunnelConfig {
        &self.tunnels[index as usize]
    }

    /// What every packet asks of tunnel `index` (see [`Hot`]).
    #[inline]
    pub fn hot(&self, index: u32) -> Hot {
        self.hot[index as usize]
    }

    /// Tunnel `index`'s kind.
    #[inline]
    pub fn kind(&self, index: u32) -> TunnelKind {
        self.hot(index).kind
    }

    /// Tunnel `index`'s outer checksum mode.
    #[inline]
    pub fn checksum(&self, index: u32) -> ChecksumMode {
        self.hot(index).checksum
    }

    /// Whether tunnel `index` is a network (false for no tunnel).
    #[inline]
    pub fn is_network(&self, index: u32) -> bool {
        self.hot.get(index as usize).is_some_and(|h| h.network)
    }

    /// The tunnel routing an inner IPv4 destination (longest prefix).
    pub fn route_v4(&self, dst: u32) -> Option<u32> {
        self.routes4
            .iter()
            .find(|r| dst & r.mask == r.net)
            .map(|r| r.tunnel)
    }

    /// The tunnel routing an inner IPv6 destination (longest prefix).
    pub fn route_v6(&self, dst: u128) -> Option<u32> {
        self.routes6
            .iter()
            .find(|r| dst & r.mask == r.net)
            .map(|r| r.tunnel)
    }

    /// The L2 tunnel for an inner destination MAC: its own tunnel, else the
    /// default one (broadcast and multicast go to the default too).
    pub fn route_mac(&self, dst: [u8; 6]) -> Option<u32> {
        self.macs.get(&dst).copied().or(self.default_l2)
    }

    /// The kind received on a local UDP port.
    #[inline]
    pub fn kind_on_port(&self, port: u16) -> Option<TunnelKind> {
        self.ports.get(&port).copied()
    }

    /// Whether receive lookups are worth fetching ahead: more tunnels
    /// than the caches keep close (thousands of networks).
    #[inline]
    pub fn receive_is_large(&self) -> bool {
        self.receive.bytes() > 16 << 10
    }

    /// Starts fetching what [`receive`](Self::receive) of `(port, id)`
    /// reads first (a hint).
    #[inline]
    pub fn prefetch_receive(&self, port: u16, id: u64) {
        self.receive.prefetch(port, id);
    }

    /// The tunnel a datagram belongs to, from its local port, its outer
    /// source (the peer) and destination (our address), and the tunnel id;
    /// the reason to drop it otherwise.
    #[inline]
    pub fn receive(
        &self,
        kind: TunnelKind,
        port: u16,
        remote: IpAddr,
        local: IpAddr,
        id: u64,
    ) -> Result<u32, DropReason> {
        match self.receive.find(port, id, remote, local) {
            Some(found) => found.ok_or(DropReason::WrongPeer),
            None => Err(match kind {
                TunnelKind::Vxlan | TunnelKind::Geneve => DropReason::UnknownVni,
                TunnelKind::Gtpu => DropReason::UnknownTeid,
                TunnelKind::GreInUdp | TunnelKind::FouGre | TunnelKind::GueGre => {
                    DropReason::UnknownKey
                }
                // No id: a peer on the port with no tunnel to it.
                TunnelKind::Gue | TunnelKind::FouIpip | TunnelKind::FouSit => DropReason::WrongPeer,
            }),
        }
    }
}

/// The last receive lookup that found a tunnel, kept for one vector: the
/// datagrams of a vector mostly come from one peer for one tunnel, and a
/// hit skips the hash lookup and the peer scan behind it (the transmit
/// side keeps the same kind of cache in front of its routes).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ReceiveCache {
    last: Option<(u16, u64, IpAddr, IpAddr, u32)>,
}

impl ReceiveCache {
    /// [`TunnelTable::receive`] through the cache.
    #[inline]
    pub fn receive(
        &mut self,
        table: &TunnelTable,
        kind: TunnelKind,
        port: u16,
        remote: IpAddr,
        local: IpAddr,
        id: u64,
    ) -> Result<u32, DropReason> {
        if let Some((p, i, r, l, t)) = self.last {
            if p == port && i == id && r == remote && l == local {
                return Ok(t);
            }
        }
        let t = table.receive(kind, port, remote, local, id)?;
        self.last = Some((port, id, remote, local, t));
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::IpPrefix;
    use core::net::{Ipv4Addr, Ipv6Addr};

    use tep_wire::ethernet::EthernetAddress;
    fn v4(a: [u8; 4]) -> IpAddr {
        IpAddr::V4(Ipv4Addr::from(a))
    }

    fn config() -> Vec<TunnelConfig> {
        let mut a = TunnelConfig::new("a", TunnelKind::Gtpu, v4([1, 0, 0, 1]), v4([1, 0, 0, 2]));
        a.teid = 100;
        a.local_teid = 200;
        a.inner_prefixes = vec![
            IpPrefix {
                addr: v4([10, 0, 0, 0]),
                len: 8,
            },
            IpPrefix {
                addr: IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0)),
                len: 32,
            },
        ];
        let mut b = TunnelConfig::new("b", TunnelKind::Gtpu, v4([1, 0, 0, 1]), v4([1, 0, 0, 3]));
        b.teid = 101;
        b.local_teid = 201;
        b.inner_prefixes = vec![IpPrefix {
            addr: v4([10, 1, 0, 0]),
            len: 16,
        }];
        let mut c = TunnelConfig::new("c", TunnelKind::Vxlan, v4([1, 0, 0, 1]), v4([1, 0, 0, 4]));
        c.vni = 42;
        let mut d = TunnelConfig::new("d", TunnelKind::Vxlan, v4([1, 0, 0, 1]), v4([1, 0, 0, 5]));
        d.vni = 43;
        d.inner_macs = vec![EthernetAddress([2, 0, 0, 0, 0, 9])];
        vec![a, b, c, d]
    }

    #[test]
    fn longest_prefix_wins() {
        let t = TunnelTable::new(&config());
        assert_eq!(t.route_v4(u32::from(Ipv4Addr::new(10, 1, 2, 3))), Some(1));
        assert_eq!(t.route_v4(u32::from(Ipv4Addr::new(10, 2, 2, 3))), Some(0));
        assert_eq!(t.route_v4(u32::from(Ipv4Addr::new(11, 0, 0, 1))), None);
        let a6 = Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 1);
        assert_eq!(t.route_v6(u128::from(a6)), Some(0));
        assert_eq!(t.route_v6(1), None);
    }

    #[test]
    fn macs_then_the_default_l2_tunnel() {
        let t = TunnelTable::new(&config());
        assert_eq!(t.route_mac([2, 0, 0, 0, 0, 9]), Some(3));
        assert_eq!(t.route_mac([2, 0, 0, 0, 0, 8]), Some(2));
        assert_eq!(t.route_mac([0xff; 6]), Some(2));
    }

    #[test]
    fn receive_tells_unknown_ids_from_wrong_peers() {
        let t = TunnelTable::new(&config());
        let k = TunnelKind::Gtpu;
        assert_eq!(t.kind_on_port(2152), Some(k));
        assert_eq!(t.kind_on_port(4789), Some(TunnelKind::Vxlan));
        assert_eq!(t.kind_on_port(1), None);
        let us = v4([1, 0, 0, 1]);
        assert_eq!(t.receive(k, 2152, v4([1, 0, 0, 3]), us, 201), Ok(1));
        assert_eq!(
            t.receive(k, 2152, v4([1, 0, 0, 2]), us, 201),
            Err(DropReason::WrongPeer)
        );
        assert_eq!(
            t.receive(k, 2152, v4([1, 0, 0, 3]), v4([1, 0, 0, 9]), 201),
            Err(DropReason::WrongPeer),
            "to another of our addresses"
        );
        assert_eq!(
            t.receive(k, 2152, v4([1, 0, 0, 3]), us, 100),
            Err(DropReason::UnknownTeid),
            "the peer's TEID is not ours"
        );
        let v = TunnelKind::Vxlan;
        assert_eq!(t.receive(v, 4789, v4([1, 0, 0, 5]), us, 43), Ok(3));
        assert_eq!(
            t.receive(v, 4789, v4([1, 0, 0, 5]), us, 44),
            Err(DropReason::UnknownVni)
        );
    }

    /// Thousands of receive ids in the open-addressed table: each found,
    /// a second tunnel on one id told apart by its peer, an id never
    /// configured unknown.
    #[test]
    fn a_large_receive_table_finds_every_id() {
        let us = v4([1, 0, 0, 1]);
        let peer = |i: u32| IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i));
        let mut tunnels: Vec<TunnelConfig> = (0..3000)
            .map(|i| {
                let mut t = TunnelConfig::new(&format!("t{i}"), TunnelKind::Vxlan, us, peer(i));
                t.vni = i + 1;
                t
            })
            .collect();
        let mut twin = TunnelConfig::new("twin", TunnelKind::Vxlan, us, peer(99_999));
        twin.vni = 5;
        tunnels.push(twin);
        let t = TunnelTable::new(&tunnels);
        assert!(t.receive_is_large());
        let k = TunnelKind::Vxlan;
        for i in 0..3000 {
            assert_eq!(t.receive(k, 4789, peer(i), us, u64::from(i) + 1), Ok(i));
        }
        assert_eq!(t.receive(k, 4789, peer(99_999), us, 5), Ok(3000));
        assert_eq!(
            t.receive(k, 4789, peer(7), us, 5),
            Err(DropReason::WrongPeer)
        );
        assert_eq!(
            t.receive(k, 4789, peer(0), us, 3001),
            Err(DropReason::UnknownVni)
        );
        assert_eq!(
            t.receive(k, 4790, peer(0), us, 1),
            Err(DropReason::UnknownVni)
        );
        assert!(!TunnelTable::new(&config()).receive_is_large());
        TunnelTable::new(&[]).prefetch_receive(4789, 1);
    }

    /// Networks take every remote on their local address: one on an IPv4
    /// address answered from its slot, one on IPv6 and two sharing a VNI
    /// (on two addresses) from their lists, each refusing another local
    /// address; a point-to-point tunnel on a network's VNI and port is
    /// told apart by its peer.
    #[test]
    fn networks_take_any_remote_on_their_address_only() {
        use crate::config::NetworkSettings;
        let (us, other) = (v4([1, 0, 0, 1]), v4([1, 0, 0, 2]));
        let us6 = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1));
        let net = |name: &str, local: IpAddr, vni: u32| {
            let s = NetworkSettings::default();
            let mut t = TunnelConfig::network(name, TunnelKind::Vxlan, local, s);
            t.vni = vni;
            t
        };
        let mut p2p = TunnelConfig::new("p", TunnelKind::Vxlan, other, v4([9, 9, 9, 9]));
        p2p.vni = 12;
        let tunnels: Vec<TunnelConfig> = (0..2000)
            .map(|i| net(&format!("n{i}"), us, 100 + i))
            .chain([net("v6", us6, 10), net("a", us, 11), net("b", other, 11)])
            .chain([net("c", us, 12), p2p])
            .collect();
        let t = TunnelTable::new(&tunnels);
        assert!(t.receive_is_large());
        let k = TunnelKind::Vxlan;
        for i in 0..2000 {
            let from = v4([10, 0, (i >> 8) as u8, i as u8]);
            assert_eq!(t.receive(k, 4789, from, us, u64::from(100 + i)), Ok(i));
            assert_eq!(
                t.receive(k, 4789, from, other, u64::from(100 + i)),
                Err(DropReason::WrongPeer)
            );
        }
        let from = v4([10, 0, 0, 1]);
        let from6 = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2));
        assert_eq!(t.receive(k, 4789, from6, us6, 10), Ok(2000));
        assert_eq!(
            t.receive(k, 4789, from6, from6, 10),
            Err(DropReason::WrongPeer)
        );
        assert_eq!(t.receive(k, 4789, from, us, 11), Ok(2001));
        assert_eq!(t.receive(k, 4789, from, other, 11), Ok(2002));
        assert_eq!(
            t.receive(k, 4789, from, v4([1, 0, 0, 3]), 11),
            Err(DropReason::WrongPeer)
        );
        assert_eq!(t.receive(k, 4789, from, us, 12), Ok(2003));
        assert_eq!(t.receive(k, 4789, v4([9, 9, 9, 9]), other, 12), Ok(2004));
        assert_eq!(
            t.receive(k, 4789, from, other, 12),
            Err(DropReason::WrongPeer)
        );
        assert_eq!(
            t.receive(k, 4789, from, us, 99),
            Err(DropReason::UnknownVni)
        );
    }

    /// The cache answers what the table would, for every part of the key.
    #[test]
    fn the_receive_cache_answers_as_the_table() {
        let t = TunnelTable::new(&config());
        let (k, v) = (TunnelKind::Gtpu, TunnelKind::Vxlan);
        let us = v4([1, 0, 0, 1]);
        let mut cache = ReceiveCache::default();
        let asks = [
            (k, 2152, v4([1, 0, 0, 3]), us, 201),
            (k, 2152, v4([1, 0, 0, 3]), us, 201),
            (k, 2152, v4([1, 0, 0, 2]), us, 200),
            (k, 2152, v4([1, 0, 0, 3]), us, 200),
            (k, 2152, v4([1, 0, 0, 2]), us, 201),
            (k, 2152, v4([1, 0, 0, 3]), v4([1, 0, 0, 9]), 201),
            (v, 4789, v4([1, 0, 0, 5]), us, 43),
            (v, 4789, v4([1, 0, 0, 5]), us, 42),
            (v, 4789, v4([1, 0, 0, 4]), us, 42),
            (v, 4789, v4([1, 0, 0, 4]), us, 43),
            (k, 4789, v4([1, 0, 0, 4]), us, 201),
        ];
        for (kind, port, remote, local, id) in asks {
            assert_eq!(
                cache.receive(&t, kind, port, remote, local, id),
                t.receive(kind, port, remote, local, id),
                "{kind} {port} {remote} {local} {id}"
            );
        }
    }

    /// Addresses that differ in their last octets (the high bytes of
    /// the word the hasher takes) spread over the low bits too, where
    /// hashbrown finds the bucket.
    #[test]
    fn the_fast_hasher_spreads_addresses_in_its_low_bits() {
        let mut seen = std::collections::HashSet::new();
        for i in 0..4096u32 {
            let mut h = FastHasher::default();
            core::hash::Hash::hash(&IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i)), &mut h);
            seen.insert(h.finish() & 0xfff);
        }
        assert!(
            seen.len() > 2000,
            "{} distinct low-12-bit values",
            seen.len()
        );
    }

    #[test]
    fn the_fast_hasher_spreads_small_keys() {
        let mut seen = std::collections::HashSet::new();
        for port in 0..64u16 {
            for id in 0..64u64 {
                let mut h = FastHasher::default();
                core::hash::Hash::hash(&(port, id), &mut h);
                seen.insert(h.finish() >> 52);
            }
        }
        assert!(
            seen.len() > 2000,
            "{} distinct top-12-bit values",
            seen.len()
        );
    }
}
