//! ARP/ND suppression: a neighbour table per network (IP → MAC), filled
//! from what the frames of the local side announce and from the control
//! plane, and the answers tep gives in the table's name (as Linux's
//! `neigh_suppress` on a VXLAN bridge port).
//!
//! The frames read here come from strangers: [`classify`] and [`answer`]
//! are total over any bytes (truncated, padded, garbage) and hand on only
//! what RFC 826 and RFC 4861 §7.1 call valid, with unicast MACs, so a
//! forged announcement cannot point an address at a broadcast MAC.

use super::fdb::Origin;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use tep_wire::ethernet::{self, EtherType, EthernetAddress, EthernetRepr, VlanTag};
use tep_wire::ipv6::{self, Ipv6Repr};
use tep_wire::{icmpv6, IpProtocol};

/// Ages are kept modulo 2^24 seconds, as the FDB's.
const AGE_MASK: u32 = 0x00ff_ffff;

/// One neighbour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Neigh {
    /// Its MAC.
    pub mac: [u8; 6],
    /// Who made it (`Learned` entries age as the FDB's do).
    pub origin: Origin,
    /// When it was last announced or set (the overlay's seconds).
    pub seen_s: u32,
}

/// What an ARP or ND frame is, for suppression.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NeighMessage {
    /// An ARP request or a Neighbor Solicitation for `target` (not a
    /// duplicate address probe: those are never answered).
    Request {
        /// The address asked for.
        target: IpAddr,
    },
    /// An address announced with its MAC: an ARP reply, a gratuitous ARP,
    /// a Neighbor Advertisement (target link-layer address option, or
    /// the frame's source MAC).
    Announce {
        /// The address.
        ip: IpAddr,
        /// Its MAC.
        mac: [u8; 6],
    },
    /// Neither (or malformed).
    Other,
}

/// The neighbour tables of every network, bounded per network.
///
/// One map behind a mutex: ARP and ND frames are rare next to data (a
/// host asks once per neighbour per few minutes), so the lock is taken
/// per ARP/ND frame only, never per data packet; a stranger who floods
/// ARP contends for it but cannot grow a network past its `limit`.
#[derive(Debug, Default)]
pub struct Neighbours {
    tables: Mutex<Tables>,
}

#[derive(Debug, Default)]
struct Tables {
    map: HashMap<(u16, IpAddr), Neigh>,
    // Entries per network (absent: none), for the limit without a scan.
    count: HashMap<u16, u32>,
}

/// One entry of `network` fewer in `count`.
fn uncount(count: &mut HashMap<u16, u32>, network: u16) {
    if let Some(c) = count.get_mut(&network) {
        *c -= 1;
        if *c == 0 {
            count.remove(&network);
        }
    }
}

/// The table of a network is full.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NeighFull;

impl Neighbours {
    /// Empty tables.
    pub fn new() -> Neighbours {
        Neighbours::default()
    }

    fn tables(&self) -> MutexGuard<'_, Tables> {
        // A panic elsewhere under the lock leaves the map consistent (each
        // change is one insert or remove), so a poisoned lock is usable.
        self.tables.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `ip`'s entry in `network`.
    pub fn get(&self, network: u16, ip: IpAddr) -> Option<Neigh> {
        self.tables().map.get(&(network, ip)).copied()
    }

    /// Sets `ip`'s entry in `network`; the old one. A learned entry never
    /// replaces a static or external one (then `Ok` with the entry kept,
    /// unchanged). Refused when the network holds `limit` entries.
    pub fn set(
        &self,
        network: u16,
        ip: IpAddr,
        n: Neigh,
        limit: u32,
    ) -> Result<Option<Neigh>, NeighFull> {
        let mut guard = self.tables();
        let t = &mut *guard;
        if let Some(old) = t.map.get_mut(&(network, ip)) {
            if n.origin == Origin::Learned && old.origin != Origin::Learned {
                return Ok(Some(*old));
            }
            return Ok(Some(core::mem::replace(old, n)));
        }
        let count = t.count.entry(network).or_insert(0);
        if *count >= limit {
            if *count == 0 {
                t.count.remove(&network);
            }
            return Err(NeighFull);
        }
        *count += 1;
        t.map.insert((network, ip), n);
        Ok(None)
    }

    /// Removes `ip`'s entry in `network`; what it was.
    pub fn remove(&self, network: u16, ip: IpAddr) -> Option<Neigh> {
        let mut t = self.tables();
        let old = t.map.remove(&(network, ip))?;
        uncount(&mut t.count, network);
        Some(old)
    }

    /// The number of entries of `network`.
    pub fn count(&self, network: u16) -> u32 {
        self.tables().count.get(&network).copied().unwrap_or(0)
    }

    /// Every entry (of `network`, or all), sorted by network and address.
    pub fn entries(&self, network: Option<u16>) -> Vec<(u16, IpAddr, Neigh)> {
        let mut out: Vec<_> = self
            .tables()
            .map
            .iter()
            .filter(|((n, _), _)| network.is_none_or(|only| only == *n))
            .map(|(&(n, ip), &e)| (n, ip, e))
            .collect();
        out.sort_unstable_by_key(|&(n, ip, _)| (n, ip));
        out
    }

    /// Removes learned entries older than their network's ageing time;
    /// how many.
    pub fn sweep(&self, now_s: u32, ageing_s: impl Fn(u16) -> u32) -> usize {
        let mut guard = self.tables();
        let t = &mut *guard;
        let before = t.map.len();
        let count = &mut t.count;
        t.map.retain(|&(n, _), e| {
            let old = e.origin == Origin::Learned
                && now_s.wrapping_sub(e.seen_s) & AGE_MASK >= ageing_s(n);
            if old {
                uncount(count, n);
            }
            !old
        });
        before - t.map.len()
    }

    /// Removes every entry of `network`; how many.
    pub fn flush(&self, network: u16) -> usize {
        let mut t = self.tables();
        let before = t.map.len();
        t.map.retain(|&(n, _), _| n != network);
        t.count.remove(&network);
        before - t.map.len()
    }
}

/// ARP over Ethernet for IPv4 (RFC 826): the only kind answered.
mod arp {
    /// Hardware type 1, protocol 0x0800, lengths 6 and 4.
    pub const ETHER_IPV4: [u8; 6] = [0, 1, 0x08, 0x00, 6, 4];
    pub const OPER: usize = 6;
    pub const SHA: usize = 8;
    pub const SPA: usize = 14;
    pub const THA: usize = 18;
    pub const TPA: usize = 24;
    pub const LEN: usize = 28;
    pub const REQUEST: u16 = 1;
    pub const REPLY: u16 = 2;
}

/// Neighbor Discovery (RFC 4861 §4.3, §4.4, §4.6.1).
mod nd {
    pub const SOLICIT: u8 = 135;
    pub const ADVERT: u8 = 136;
    /// The flags byte of an advertisement: Router, Solicited, Override.
    pub const FLAGS: usize = 4;
    pub const SOLICITED: u8 = 0x40;
    pub const OVERRIDE: u8 = 0x20;
    pub const TARGET: usize = 8;
    /// Header and target; the options follow.
    pub const LEN: usize = 24;
    pub const OPT_SOURCE_LL: u8 = 1;
    pub const OPT_TARGET_LL: u8 = 2;
    /// An advertisement with its target link-layer address option.
    pub const ADVERT_LEN: usize = LEN + 8;
    /// RFC 4861 §7.1: hop limit 255 proves the sender is on the link.
    pub const HOP_LIMIT: u8 = 255;
}

/// A request with what its answer needs.
#[derive(Clone, Copy, Debug)]
struct Request {
    /// The request's 802.1Q tag, repeated in the answer.
    tag: Option<VlanTag>,
    /// The requester's MAC (ARP sender, ND source link-layer option or
    /// else the frame's source): the answer's destination.
    mac: [u8; 6],
    /// The requester's address.
    from: IpAddr,
    /// The address asked for.
    target: IpAddr,
}

/// A frame's message, with the request's details.
enum Parsed {
    Request(Request),
    Announce { ip: IpAddr, mac: [u8; 6] },
}

/// What the Ethernet frame `frame` is for suppression (never panics).
pub fn classify(frame: &[u8]) -> NeighMessage {
    match parse(frame) {
        Some(Parsed::Request(r)) => NeighMessage::Request { target: r.target },
        Some(Parsed::Announce { ip, mac }) => NeighMessage::Announce { ip, mac },
        None => NeighMessage::Other,
    }
}

/// Who sent the valid ARP or ND frame `frame` (a request's sender, or
/// what an announcement announces): its address and MAC (never panics).
pub fn sender(frame: &[u8]) -> Option<(IpAddr, [u8; 6])> {
    match parse(frame)? {
        Parsed::Request(r) => Some((r.from, r.mac)),
        Parsed::Announce { ip, mac } => Some((ip, mac)),
    }
}

fn parse(frame: &[u8]) -> Option<Parsed> {
    let eth = ethernet::Packet::new_checked(frame).ok()?;
    let tag = match eth.tag_count() {
        0 => None,
        1 if eth.outer_ethertype() == EtherType::Vlan => eth.vlan_tag(0),
        _ => return None,
    };
    match eth.ethertype() {
        EtherType::Arp => parse_arp(eth.payload(), tag),
        EtherType::Ipv6 => parse_nd(eth.payload(), eth.src_addr().0, tag),
        _ => None,
    }
}

fn mac_at(b: &[u8], at: usize) -> Option<[u8; 6]> {
    b.get(at..at + 6)?.try_into().ok()
}

fn is_unicast(mac: [u8; 6]) -> bool {
    EthernetAddress(mac).is_unicast() && mac != [0; 6]
}

/// An address a neighbour may own (not what only names a group or nobody).
fn is_neighbour(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(a) => !(a.is_unspecified() || a.is_multicast() || a.is_broadcast()),
        IpAddr::V6(a) => !(a.is_unspecified() || a.is_multicast()),
    }
}

fn parse_arp(p: &[u8], tag: Option<VlanTag>) -> Option<Parsed> {
    // Ethernet padding after the 28 bytes is ignored.
    let p = p.get(..arp::LEN)?;
    if p[..arp::OPER] != arp::ETHER_IPV4 {
        return None;
    }
    let op = u16::from_be_bytes([p[arp::OPER], p[arp::OPER + 1]]);
    let mac = mac_at(p, arp::SHA)?;
    let from = IpAddr::V4(ipv4_at(p, arp::SPA)?);
    let target = IpAddr::V4(ipv4_at(p, arp::TPA)?);
    // A probe (RFC 5227, sender 0.0.0.0) fails here: its sender owns
    // nothing yet, and answering it would break duplicate detection.
    if !is_unicast(mac) || !is_neighbour(from) {
        return None;
    }
    match op {
        // A request for what no neighbour can own (a group, the
        // broadcast address) is nobody's to answer.
        arp::REQUEST if from != target && !is_neighbour(target) => None,
        arp::REQUEST if from != target => Some(Parsed::Request(Request {
            tag,
            mac,
            from,
            target,
        })),
        // A gratuitous ARP (request or reply) or a reply: the sender's.
        arp::REQUEST | arp::REPLY => Some(Parsed::Announce { ip: from, mac }),
        _ => None,
    }
}

fn ipv4_at(b: &[u8], at: usize) -> Option<Ipv4Addr> {
    let o: [u8; 4] = b.get(at..at + 4)?.try_into().ok()?;
    Some(Ipv4Addr::from(o))
}

fn ipv6_at(b: &[u8], at: usize) -> Option<Ipv6Addr> {
    let o: [u8; 16] = b.get(at..at + 16)?.try_into().ok()?;
    Some(Ipv6Addr::from(o))
}

/// A solicitation or advertisement validated as RFC 4861 §7.1 asks
/// (hop limit 255, code 0, checksum, length, options of nonzero length,
/// target not multicast, S clear to a multicast destination), without
/// extension headers.
fn parse_nd(p: &[u8], src_mac: [u8; 6], tag: Option<VlanTag>) -> Option<Parsed> {
    let ip = ipv6::Packet::new_checked(p).ok()?;
    if ip.next_header() != IpProtocol::Icmpv6 || ip.hop_limit() != nd::HOP_LIMIT {
        return None;
    }
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    let msg = ip.payload();
    let icmp = icmpv6::Packet::new_checked(msg).ok()?;
    let kind = icmp.msg_type();
    if !matches!(kind, nd::SOLICIT | nd::ADVERT) || icmp.code() != 0 || msg.len() < nd::LEN {
        return None;
    }
    if !icmp.verify_checksum(&src, &dst) {
        return None;
    }
    let target = ipv6_at(msg, nd::TARGET)?;
    if target.is_multicast() {
        return None;
    }
    let opt = if kind == nd::SOLICIT {
        nd::OPT_SOURCE_LL
    } else {
        nd::OPT_TARGET_LL
    };
    let mac = link_layer_option(&msg[nd::LEN..], opt)?.unwrap_or(src_mac);
    if !is_unicast(mac) {
        return None;
    }
    if kind == nd::SOLICIT {
        // A duplicate address probe (source ::) is never answered: the
        // prober would give up an address no one else holds.
        if src.is_unspecified() {
            return None;
        }
        let (from, target) = (IpAddr::V6(src), IpAddr::V6(target));
        return Some(Parsed::Request(Request {
            tag,
            mac,
            from,
            target,
        }));
    }
    if dst.is_multicast() && msg[nd::FLAGS] & nd::SOLICITED != 0 {
        return None;
    }
    let ip = IpAddr::V6(target);
    is_neighbour(ip).then_some(Parsed::Announce { ip, mac })
}

/// The MAC of the first link-layer address option of type `kind` in
/// `opts`, if any; None when an option is malformed (length 0, or past
/// the end: RFC 4861 §7.1 drops the whole message then).
fn link_layer_option(mut opts: &[u8], kind: u8) -> Option<Option<[u8; 6]>> {
    let mut found = None;
    // Each turn consumes at least 8 bytes, so the loop is bounded.
    while let [t, units, ..] = *opts {
        let len = usize::from(units) * 8;
        if len == 0 || len > opts.len() {
            return None;
        }
        if t == kind && found.is_none() {
            found = mac_at(&opts[..len], 2);
        }
        opts = &opts[len..];
    }
    // A lone trailing byte is no option.
    opts.is_empty().then_some(found)
}

/// The answer to the request `request` (an ARP request or Neighbor
/// Solicitation that [`classify`] called a `Request`) for an address whose
/// MAC is `mac`, written into `out` as a whole Ethernet frame: an ARP reply
/// or a solicited Neighbor Advertisement (S and O set, target link-layer
/// address option, ICMPv6 checksum), to the requester. Its length, or None
/// when `out` is too short, `request` is not a request or `mac` is not a
/// unicast MAC.
pub fn answer(request: &[u8], mac: [u8; 6], out: &mut [u8]) -> Option<usize> {
    let Some(Parsed::Request(r)) = parse(request) else {
        return None;
    };
    if !is_unicast(mac) {
        return None;
    }
    match (r.from, r.target) {
        (IpAddr::V4(from), IpAddr::V4(target)) => arp_reply(&r, from, target, mac, out),
        (IpAddr::V6(from), IpAddr::V6(target)) => advertisement(&r, from, target, mac, out),
        _ => None,
    }
}

/// Writes the Ethernet header of an answer to `r` from `mac`; its length.
/// `out` holds the whole answer (checked by the caller).
fn ethernet_header(r: &Request, mac: [u8; 6], ethertype: EtherType, out: &mut [u8]) -> usize {
    let repr = EthernetRepr {
        src_addr: EthernetAddress(mac),
        dst_addr: EthernetAddress(r.mac),
        outer_tag: r.tag,
        inner_tag: None,
        ethertype,
    };
    repr.emit(&mut ethernet::Packet::new_unchecked(&mut *out));
    repr.header_len()
}

fn answer_len(r: &Request, payload: usize) -> usize {
    ethernet::HEADER_LEN + r.tag.map_or(0, |_| ethernet::TAG_LEN) + payload
}

fn arp_reply(
    r: &Request,
    from: Ipv4Addr,
    target: Ipv4Addr,
    mac: [u8; 6],
    out: &mut [u8],
) -> Option<usize> {
    let own = (mac, target);
    write_arp(r, arp::REPLY, own, r.mac, from, out)
}

/// An ARP request from `mac` and `ip` for `target`'s MAC (who-has
/// `target` tell `ip`), broadcast, with an 802.1Q tag of VID `vlan`
/// where given: written into `out` as a whole Ethernet frame; its length,
/// or None when `out` is too short or `mac` is not a unicast MAC.
pub fn arp_request(
    mac: [u8; 6],
    ip: Ipv4Addr,
    target: Ipv4Addr,
    vlan: Option<u16>,
    out: &mut [u8],
) -> Option<usize> {
    if !is_unicast(mac) {
        return None;
    }
    let to = Request {
        tag: vlan.map(|vid| VlanTag::new(0, false, vid)),
        mac: EthernetAddress::BROADCAST.0,
        from: IpAddr::V4(target),
        target: IpAddr::V4(ip),
    };
    // The target's MAC is what is asked: zero, as Linux sends it.
    write_arp(&to, arp::REQUEST, (mac, ip), [0; 6], target, out)
}

/// An ARP message `op` from `own` (MAC, address) to `to` (the frame's
/// destination and tag) about `peer_mac`/`peer_ip`.
fn write_arp(
    to: &Request,
    op: u16,
    own: ([u8; 6], Ipv4Addr),
    peer_mac: [u8; 6],
    peer_ip: Ipv4Addr,
    out: &mut [u8],
) -> Option<usize> {
    let len = answer_len(to, arp::LEN);
    let out = out.get_mut(..len)?;
    let at = ethernet_header(to, own.0, EtherType::Arp, out);
    let p = &mut out[at..];
    p[..arp::OPER].copy_from_slice(&arp::ETHER_IPV4);
    p[arp::OPER..arp::SHA].copy_from_slice(&op.to_be_bytes());
    p[arp::SHA..arp::SPA].copy_from_slice(&own.0);
    p[arp::SPA..arp::THA].copy_from_slice(&own.1.octets());
    p[arp::THA..arp::TPA].copy_from_slice(&peer_mac);
    p[arp::TPA..arp::LEN].copy_from_slice(&peer_ip.octets());
    Some(len)
}

fn advertisement(
    r: &Request,
    from: Ipv6Addr,
    target: Ipv6Addr,
    mac: [u8; 6],
    out: &mut [u8],
) -> Option<usize> {
    let len = answer_len(r, ipv6::HEADER_LEN + nd::ADVERT_LEN);
    let out = out.get_mut(..len)?;
    let at = ethernet_header(r, mac, EtherType::Ipv6, out);
    let (head, msg) = out[at..].split_at_mut(ipv6::HEADER_LEN);
    Ipv6Repr {
        src_addr: target,
        dst_addr: from,
        next_header: IpProtocol::Icmpv6,
        payload_len: nd::ADVERT_LEN,
        hop_limit: nd::HOP_LIMIT,
        traffic_class: 0,
        flow_label: 0,
    }
    .emit(&mut ipv6::Packet::new_unchecked(head));
    msg.fill(0);
    msg[0] = nd::ADVERT;
    msg[nd::FLAGS] = nd::SOLICITED | nd::OVERRIDE;
    msg[nd::TARGET..nd::LEN].copy_from_slice(&target.octets());
    msg[nd::LEN] = nd::OPT_TARGET_LL;
    msg[nd::LEN + 1] = 1;
    msg[nd::LEN + 2..].copy_from_slice(&mac);
    icmpv6::Packet::new_unchecked(msg).fill_checksum(&target, &from);
    Some(len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    // Frames built with scapy 2.5 (`python3 -c 'from scapy.all import *;
    // print(bytes(Ether(...)/ARP(...)).hex())'`). Hosts: A 02:00:00:00:00:01
    // (10.0.0.1, 2001:db8::1), B ..:02 (10.0.0.2, 2001:db8::2), C ..:03;
    // tep answers as M 02:aa:bb:cc:dd:ee.

    /// `ARP(op=1, hwsrc=A, psrc=10.0.0.1, pdst=10.0.0.2)`, broadcast.
    const ARP_REQUEST: &str =
        "ffffffffffff020000000001080600010800060400010200000000010a0000010000000000000a000002";
    /// The same, padded to 60 bytes with 0xee.
    const ARP_REQUEST_PADDED: &str = "ffffffffffff020000000001080600010800060400010200000000010a0000010000000000000a000002eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee";
    /// `ARP(op=2, hwsrc=B, psrc=10.0.0.2, hwdst=A, pdst=10.0.0.1)`.
    const ARP_REPLY: &str =
        "020000000001020000000002080600010800060400020200000000020a0000020200000000010a000001";
    /// Gratuitous request: `ARP(op=1, hwsrc=C, psrc=pdst=10.0.0.3)`.
    const ARP_GARP: &str =
        "ffffffffffff020000000003080600010800060400010200000000030a0000030000000000000a000003";
    /// Gratuitous reply: `ARP(op=2, hwsrc=C, psrc=pdst=10.0.0.3)`.
    const ARP_GARP_REPLY: &str =
        "ffffffffffff020000000003080600010800060400020200000000030a000003ffffffffffff0a000003";
    /// Probe: `ARP(op=1, hwsrc=C, psrc=0.0.0.0, pdst=10.0.0.4)`.
    const ARP_PROBE: &str =
        "ffffffffffff02000000000308060001080006040001020000000003000000000000000000000a000004";
    /// `Dot1Q(prio=5, vlan=100)` around ARP_REQUEST's ARP.
    const ARP_VLAN_REQUEST: &str = "ffffffffffff0200000000018100a064080600010800060400010200000000010a0000010000000000000a000002";
    /// `IPv6(src=2001:db8::1, dst=ff02::1:ff00:2, hlim=255)/
    /// ICMPv6ND_NS(tgt=2001:db8::2)/ICMPv6NDOptSrcLLAddr(lladdr=A)`.
    const NS: &str = "3333ff00000202000000000186dd6000000000203aff20010db8000000000000000000000001ff0200000000000000000001ff00000287001c270000000020010db80000000000000000000000020101020000000001";
    /// NS with hlim=64.
    const NS_HLIM64: &str = "3333ff00000202000000000186dd6000000000203a4020010db8000000000000000000000001ff0200000000000000000001ff00000287001c270000000020010db80000000000000000000000020101020000000001";
    /// NS with `ICMPv6NDOptSrcLLAddr(len=0)` (checksum correct).
    const NS_OPT_LEN0: &str = "3333ff00000202000000000186dd6000000000203aff20010db8000000000000000000000001ff0200000000000000000001ff00000287001c280000000020010db80000000000000000000000020100020000000001";
    /// NS behind `IPv6ExtHdrHopByHop()`.
    const NS_HOP_BY_HOP: &str = "3333ff00000202000000000186dd60000000002800ff20010db8000000000000000000000001ff0200000000000000000001ff0000023a0001040000000087001c270000000020010db80000000000000000000000020101020000000001";
    /// Unicast NS in `Dot1Q(vlan=7)`, no source link-layer option.
    const NS_NO_SLLA_VLAN: &str = "3333ff0000020200000000018100000786dd6000000000183aff20010db800000000000000000000000120010db80000000000000000000000028700ef7c0000000020010db8000000000000000000000002";
    /// DAD: `IPv6(src=::, dst=ff02::1:ff00:5)/ICMPv6ND_NS(tgt=2001:db8::5)`.
    const NS_DAD: &str = "3333ff00000502000000000386dd6000000000183aff00000000000000000000000000000000ff0200000000000000000001ff00000587004ce50000000020010db8000000000000000000000005";
    /// `ICMPv6ND_NA(tgt=2001:db8::2, S=1, O=1)/
    /// ICMPv6NDOptDstLLAddr(lladdr=02:00:00:00:00:22)` from B to A.
    const NA_TLLA: &str = "02000000000102000000000286dd6000000000203aff20010db800000000000000000000000220010db800000000000000000000000188008a516000000020010db80000000000000000000000020201020000000022";
    /// Unsolicited `ICMPv6ND_NA(tgt=2001:db8::2, S=0, O=1)` from B to
    /// ff02::1, no option.
    const NA_UNSOLICITED: &str = "33330000000102000000000286dd6000000000183aff20010db8000000000000000000000002ff0200000000000000000000000000018800fd322000000020010db8000000000000000000000002";
    /// NA with S=1 to ff02::1 (invalid, RFC 4861 §7.1.2).
    const NA_SOLICITED_MULTICAST: &str = "33330000000102000000000286dd6000000000183aff20010db8000000000000000000000002ff0200000000000000000000000000018800bd326000000020010db8000000000000000000000002";
    /// NA whose target link-layer address is the broadcast MAC.
    const NA_BROADCAST_TLLA: &str = "02000000000102000000000286dd6000000000203aff20010db800000000000000000000000220010db800000000000000000000000188008c736000000020010db80000000000000000000000020201ffffffffffff";

    /// `Ether(dst=A, src=M)/ARP(op=2, hwsrc=M, psrc=10.0.0.2, hwdst=A,
    /// pdst=10.0.0.1)`.
    const ARP_ANSWER: &str =
        "02000000000102aabbccddee0806000108000604000202aabbccddee0a0000020200000000010a000001";
    /// ARP_ANSWER in `Dot1Q(prio=5, vlan=100)`.
    const ARP_VLAN_ANSWER: &str = "02000000000102aabbccddee8100a0640806000108000604000202aabbccddee0a0000020200000000010a000001";
    /// `Ether(dst=A, src=M)/IPv6(src=2001:db8::2, dst=2001:db8::1,
    /// hlim=255)/ICMPv6ND_NA(tgt=2001:db8::2, R=0, S=1, O=1)/
    /// ICMPv6NDOptDstLLAddr(lladdr=M)`.
    const NA_ANSWER: &str = "02000000000102aabbccddee86dd6000000000203aff20010db800000000000000000000000220010db80000000000000000000000018800f00d6000000020010db8000000000000000000000002020102aabbccddee";
    /// NA_ANSWER in `Dot1Q(vlan=7)`.
    const NA_VLAN_ANSWER: &str = "02000000000102aabbccddee8100000786dd6000000000203aff20010db800000000000000000000000220010db80000000000000000000000018800f00d6000000020010db8000000000000000000000002020102aabbccddee";

    const ALL: [&str; 22] = [
        ARP_REQUEST,
        ARP_REQUEST_PADDED,
        ARP_REPLY,
        ARP_GARP,
        ARP_GARP_REPLY,
        ARP_PROBE,
        ARP_VLAN_REQUEST,
        NS,
        NS_HLIM64,
        NS_OPT_LEN0,
        NS_HOP_BY_HOP,
        NS_NO_SLLA_VLAN,
        NS_DAD,
        NA_TLLA,
        NA_UNSOLICITED,
        NA_SOLICITED_MULTICAST,
        NA_BROADCAST_TLLA,
        ARP_ANSWER,
        ARP_VLAN_ANSWER,
        NA_ANSWER,
        NA_VLAN_ANSWER,
        "",
    ];

    const A: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const B: [u8; 6] = [2, 0, 0, 0, 0, 2];
    const C: [u8; 6] = [2, 0, 0, 0, 0, 3];
    const M: [u8; 6] = [2, 0xaa, 0xbb, 0xcc, 0xdd, 0xee];

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn v4(s: &str) -> IpAddr {
        IpAddr::V4(s.parse().unwrap())
    }

    fn v6(s: &str) -> IpAddr {
        IpAddr::V6(s.parse().unwrap())
    }

    fn class(s: &str) -> NeighMessage {
        classify(&hex(s))
    }

    fn request(target: IpAddr) -> NeighMessage {
        NeighMessage::Request { target }
    }

    fn announce(ip: IpAddr, mac: [u8; 6]) -> NeighMessage {
        NeighMessage::Announce { ip, mac }
    }

    #[test]
    fn classifies_arp() {
        assert_eq!(class(ARP_REQUEST), request(v4("10.0.0.2")));
        assert_eq!(class(ARP_REQUEST_PADDED), request(v4("10.0.0.2")));
        assert_eq!(class(ARP_VLAN_REQUEST), request(v4("10.0.0.2")));
        assert_eq!(class(ARP_REPLY), announce(v4("10.0.0.2"), B));
        assert_eq!(class(ARP_GARP), announce(v4("10.0.0.3"), C));
        assert_eq!(class(ARP_GARP_REPLY), announce(v4("10.0.0.3"), C));
        assert_eq!(class(ARP_PROBE), NeighMessage::Other);
    }

    #[test]
    fn refuses_odd_arp() {
        let mut f = hex(ARP_REQUEST);
        f[14 + arp::OPER + 1] = 3; // RARP request
        assert_eq!(classify(&f), NeighMessage::Other);
        let mut f = hex(ARP_REQUEST);
        f[14 + 4] = 8; // hardware length 8
        assert_eq!(classify(&f), NeighMessage::Other);
        let mut f = hex(ARP_REPLY);
        f[14 + arp::SHA] = 0x03; // a group MAC announced
        assert_eq!(classify(&f), NeighMessage::Other);
        // Two tags (QinQ) are not an access port's frames.
        let mut f = hex(ARP_VLAN_REQUEST);
        f.splice(12..12, [0x88, 0xa8, 0x00, 0x05]);
        assert_eq!(classify(&f), NeighMessage::Other);
        // Asking for a group or the broadcast address (found by the
        // overlay fuzz target: its answer announced what nobody owns).
        for target in [[224, 0, 0, 1], [255, 255, 255, 255]] {
            let mut f = hex(ARP_REQUEST);
            f[14 + arp::TPA..14 + arp::TPA + 4].copy_from_slice(&target);
            assert_eq!(classify(&f), NeighMessage::Other, "{target:?}");
        }
    }

    #[test]
    fn classifies_nd() {
        assert_eq!(class(NS), request(v6("2001:db8::2")));
        assert_eq!(class(NS_NO_SLLA_VLAN), request(v6("2001:db8::2")));
        assert_eq!(class(NS_DAD), NeighMessage::Other);
        // The target link-layer option wins over the frame's source (B).
        assert_eq!(
            class(NA_TLLA),
            announce(v6("2001:db8::2"), [2, 0, 0, 0, 0, 0x22])
        );
        assert_eq!(class(NA_UNSOLICITED), announce(v6("2001:db8::2"), B));
    }

    #[test]
    fn refuses_invalid_nd() {
        for f in [
            NS_HLIM64,
            NS_OPT_LEN0,
            NS_HOP_BY_HOP,
            NA_SOLICITED_MULTICAST,
            NA_BROADCAST_TLLA,
        ] {
            assert_eq!(class(f), NeighMessage::Other, "{f}");
        }
        let mut f = hex(NS);
        f[14 + 40 + 2] ^= 1; // checksum
        assert_eq!(classify(&f), NeighMessage::Other);
        let mut f = hex(NS);
        f[14 + 40 + 1] = 1; // code
        assert_eq!(classify(&f), NeighMessage::Other);
    }

    #[test]
    fn link_layer_options() {
        let opt = |t: u8, units: u8, m: [u8; 6]| {
            let mut o = vec![t, units];
            o.extend_from_slice(&m);
            o.resize(usize::from(units).max(1) * 8, 0);
            o
        };
        assert_eq!(link_layer_option(&[], 1), Some(None));
        assert_eq!(link_layer_option(&opt(1, 1, A), 1), Some(Some(A)));
        assert_eq!(link_layer_option(&opt(1, 1, A), 2), Some(None));
        // The first of its kind counts; a longer option is read too.
        let two = [opt(14, 2, C), opt(2, 1, B), opt(2, 1, A)].concat();
        assert_eq!(link_layer_option(&two, 2), Some(Some(B)));
        assert_eq!(link_layer_option(&opt(2, 3, A), 2), Some(Some(A)));
        // Length 0, past the end, a stray byte: malformed.
        assert_eq!(link_layer_option(&opt(1, 0, A), 1), None);
        assert_eq!(link_layer_option(&opt(1, 1, A)[..7], 1), None);
        assert_eq!(
            link_layer_option(&[opt(1, 1, A), vec![0]].concat(), 1),
            None
        );
    }

    fn answered(request: &str) -> Option<Vec<u8>> {
        let mut out = [0u8; 128];
        let n = answer(&hex(request), M, &mut out)?;
        Some(out[..n].to_vec())
    }

    #[test]
    fn answers_arp_as_scapy() {
        assert_eq!(answered(ARP_REQUEST), Some(hex(ARP_ANSWER)));
        assert_eq!(answered(ARP_REQUEST_PADDED), Some(hex(ARP_ANSWER)));
        assert_eq!(answered(ARP_VLAN_REQUEST), Some(hex(ARP_VLAN_ANSWER)));
        assert_eq!(answered(ARP_ANSWER).map(|a| a.len()), None);
        // The requester learns the answer as any reply.
        let reply = hex(ARP_ANSWER);
        assert_eq!(classify(&reply), announce(v4("10.0.0.2"), M));
    }

    #[test]
    fn asks_as_scapy() {
        let (me, target) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        let mut out = [0u8; 64];
        let n = arp_request(A, me, target, None, &mut out).unwrap();
        assert_eq!(out[..n], hex(ARP_REQUEST));
        // Scapy's tagged request has priority 5; tep's none.
        let n = arp_request(A, me, target, Some(100), &mut out).unwrap();
        assert_eq!(
            out[..n],
            hex(&ARP_VLAN_REQUEST.replace("8100a064", "81000064"))
        );
        assert_eq!(classify(&out[..n]), request(v4("10.0.0.2")));
        assert_eq!(sender(&out[..n]), Some((v4("10.0.0.1"), A)));
        assert_eq!(arp_request(A, me, target, Some(100), &mut out[..45]), None);
        assert_eq!(arp_request([0xff; 6], me, target, None, &mut out), None);
    }

    #[test]
    fn the_sender_of_a_valid_frame() {
        assert_eq!(sender(&hex(ARP_REQUEST)), Some((v4("10.0.0.1"), A)));
        assert_eq!(sender(&hex(ARP_REPLY)), Some((v4("10.0.0.2"), B)));
        assert_eq!(sender(&hex(ARP_PROBE)), None);
        assert_eq!(sender(&hex(NS_HLIM64)), None);
    }

    #[test]
    fn answers_nd_as_scapy() {
        let na = answered(NS).unwrap();
        assert_eq!(na, hex(NA_ANSWER));
        assert_eq!(answered(NS_NO_SLLA_VLAN), Some(hex(NA_VLAN_ANSWER)));
        // The advertisement reads back valid, checksum included.
        assert_eq!(classify(&na), announce(v6("2001:db8::2"), M));
        let ip = ipv6::Packet::new_checked(&na[14..]).unwrap();
        let icmp = icmpv6::Packet::new_checked(ip.payload()).unwrap();
        assert!(icmp.verify_checksum(&ip.src_addr(), &ip.dst_addr()));
        assert_eq!(ip.payload()[nd::FLAGS], 0x60);
    }

    #[test]
    fn answers_only_requests() {
        for f in [
            ARP_REPLY, ARP_GARP, ARP_PROBE, NS_DAD, NS_HLIM64, NA_TLLA, NA_ANSWER,
        ] {
            assert_eq!(answered(f), None, "{f}");
        }
        let mut out = [0u8; 128];
        assert_eq!(answer(&hex(ARP_REQUEST), [0xff; 6], &mut out), None);
        assert_eq!(answer(&hex(NS), [0; 6], &mut out), None);
    }

    #[test]
    fn answer_needs_room() {
        for (req, len) in [(ARP_REQUEST, 42), (ARP_VLAN_REQUEST, 46), (NS, 86)] {
            let mut out = vec![0u8; len];
            assert_eq!(answer(&hex(req), M, &mut out), Some(len));
            for short in 0..len {
                assert_eq!(answer(&hex(req), M, &mut out[..short]), None);
            }
        }
    }

    fn no_panic(frame: &[u8]) {
        let _ = classify(frame);
        let mut out = [0u8; 128];
        if let Some(n) = answer(frame, M, &mut out) {
            // Whatever tep answers is itself a valid announcement.
            assert!(matches!(
                classify(&out[..n]),
                NeighMessage::Announce { mac: M, .. }
            ));
        }
        let _ = answer(frame, M, &mut out[..20]);
    }

    #[test]
    fn truncations_and_flips_never_panic() {
        for v in ALL {
            let f = hex(v);
            for len in 0..=f.len() {
                no_panic(&f[..len]);
            }
            for at in 0..f.len() {
                for x in [0x01, 0x80, 0xff] {
                    let mut g = f.clone();
                    g[at] ^= x;
                    no_panic(&g);
                }
            }
        }
    }

    proptest! {
        #[test]
        fn random_frames_never_panic(frame in proptest::collection::vec(any::<u8>(), 0..128)) {
            no_panic(&frame);
        }

        #[test]
        fn random_arp_and_nd_never_panic(
            head in prop::sample::select(vec![
                "ffffffffffff0200000000010806",
                "ffffffffffff02000000000186dd6000000000203aff",
                "ffffffffffff0200000000018100000a0806",
            ]),
            tail in proptest::collection::vec(any::<u8>(), 0..96),
        ) {
            let mut f = hex(head);
            f.extend_from_slice(&tail);
            no_panic(&f);
        }
    }

    fn learned(mac: [u8; 6], seen_s: u32) -> Neigh {
        Neigh {
            mac,
            origin: Origin::Learned,
            seen_s,
        }
    }

    fn fixed(mac: [u8; 6], origin: Origin) -> Neigh {
        Neigh {
            mac,
            origin,
            seen_s: 0,
        }
    }

    #[test]
    fn limit_per_network() {
        let t = Neighbours::new();
        let (a, b, c) = (v4("10.0.0.1"), v4("10.0.0.2"), v6("2001:db8::3"));
        assert_eq!(t.set(1, a, learned(A, 0), 2), Ok(None));
        assert_eq!(t.set(1, b, fixed(B, Origin::Static), 2), Ok(None));
        assert_eq!(t.set(1, c, learned(C, 0), 2), Err(NeighFull));
        assert_eq!(t.get(1, c), None);
        // Refreshing or replacing an entry takes no room.
        assert_eq!(t.set(1, a, learned(A, 5), 2), Ok(Some(learned(A, 0))));
        assert_eq!(t.set(1, a, learned(C, 6), 2), Ok(Some(learned(A, 5))));
        assert_eq!(t.count(1), 2);
        // Other networks have their own room.
        assert_eq!(t.set(2, c, learned(C, 0), 2), Ok(None));
        assert_eq!(t.remove(1, a), Some(learned(C, 6)));
        assert_eq!(t.remove(1, a), None);
        assert_eq!(t.set(1, c, learned(C, 0), 2), Ok(None));
        assert_eq!(t.set(3, c, learned(C, 0), 0), Err(NeighFull));
        assert_eq!((t.count(1), t.count(2), t.count(3)), (2, 1, 0));
    }

    #[test]
    fn learned_never_replaces_static_or_external() {
        let t = Neighbours::new();
        let (a, b) = (v4("10.0.0.1"), v6("2001:db8::2"));
        let s = fixed(A, Origin::Static);
        let e = fixed(B, Origin::External);
        t.set(7, a, s, 10).unwrap();
        t.set(7, b, e, 10).unwrap();
        assert_eq!(t.set(7, a, learned(C, 9), 10), Ok(Some(s)));
        assert_eq!(t.set(7, b, learned(C, 9), 10), Ok(Some(e)));
        assert_eq!((t.get(7, a), t.get(7, b)), (Some(s), Some(e)));
        // The control plane replaces what it likes.
        assert_eq!(t.set(7, a, e, 10), Ok(Some(s)));
        assert_eq!(t.set(7, b, s, 10), Ok(Some(e)));
        t.set(7, a, learned(C, 1), 10).unwrap();
        assert_eq!(t.set(7, a, s, 10), Ok(Some(e)));
        let c = v4("10.0.0.3");
        t.set(7, c, learned(C, 1), 10).unwrap();
        assert_eq!(t.set(7, c, s, 10), Ok(Some(learned(C, 1))));
        assert_eq!(t.count(7), 3);
    }

    #[test]
    fn sweep_ages_learned_modulo_2_24() {
        let t = Neighbours::new();
        let (a, b, c) = (v4("10.0.0.1"), v4("10.0.0.2"), v4("10.0.0.3"));
        // Stamped just before the 24-bit clock wraps; now is after it.
        t.set(1, a, learned(A, 0x00ff_fff0), 3).unwrap();
        t.set(1, b, fixed(B, Origin::Static), 3).unwrap();
        t.set(2, a, learned(A, 0xffff_fff0), 3).unwrap();
        t.set(2, c, learned(C, 0x0100_0000), 3).unwrap();
        let ageing = |n: u16| if n == 1 { 30 } else { 20 };
        // 21 s: network 2's first entry (ageing 20) goes, the rest stay.
        assert_eq!(t.sweep(0x0100_0005, ageing), 1);
        assert_eq!(t.get(2, a), None);
        assert!(t.get(1, a).is_some() && t.get(2, c).is_some());
        // 29 s old stays at 30; 30 s old goes.
        assert_eq!(t.sweep(0x0100_000d, ageing), 0);
        assert_eq!(t.sweep(0x0100_000e, ageing), 1);
        assert_eq!(t.entries(Some(1)), vec![(1, b, fixed(B, Origin::Static))]);
        // Ages are modulo 2^24: 2^24 s later reads as 0 s.
        assert_eq!(t.sweep(0x0200_0000, ageing), 0);
        // A static entry never ages; counts followed the removals.
        assert_eq!(t.sweep(0x0200_0014, ageing), 1);
        assert_eq!((t.count(1), t.count(2)), (1, 0));
        assert_eq!(t.set(1, c, learned(C, 0), 2), Ok(None));
        assert_eq!(t.set(1, a, learned(A, 0), 2), Err(NeighFull));
    }

    #[test]
    fn entries_sorted_and_flush() {
        let t = Neighbours::new();
        let ips = [
            (3, v6("2001:db8::1")),
            (1, v6("fe80::2")),
            (3, v4("10.0.0.9")),
            (1, v4("10.0.0.10")),
            (1, v4("10.0.0.2")),
            (2, v6("2001:db8::1")),
        ];
        for (n, ip) in ips {
            t.set(n, ip, learned(A, 0), 10).unwrap();
        }
        let keys = |v: Vec<(u16, IpAddr, Neigh)>| -> Vec<(u16, IpAddr)> {
            v.into_iter().map(|(n, ip, _)| (n, ip)).collect()
        };
        let mut want = ips.to_vec();
        want.sort();
        assert_eq!(keys(t.entries(None)), want);
        assert_eq!(
            keys(t.entries(Some(1))),
            vec![
                (1, v4("10.0.0.2")),
                (1, v4("10.0.0.10")),
                (1, v6("fe80::2"))
            ]
        );
        assert_eq!(t.flush(1), 3);
        assert_eq!(t.flush(1), 0);
        assert_eq!(t.count(1), 0);
        assert_eq!(keys(t.entries(None)), want[3..].to_vec());
    }
}
