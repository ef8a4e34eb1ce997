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
    /// The requester's MAC and address.
    mac: [u8; 6],
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
    let len = answer_len(r, arp::LEN);
    let out = out.get_mut(..len)?;
    let at = ethernet_header(r, mac, EtherType::Arp, out);
    let p = &mut out[at..];
    p[..arp::OPER].copy_from_slice(&arp::ETHER_IPV4);
    p[arp::OPER..arp::SHA].copy_from_slice(&arp::REPLY.to_be_bytes());
    p[arp::SHA..arp::SPA].copy_from_slice(&mac);
    p[arp::SPA..arp::THA].copy_from_slice(&target.octets());
    p[arp::THA..arp::TPA].copy_from_slice(&r.mac);
    p[arp::TPA..arp::LEN].copy_from_slice(&from.octets());
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
