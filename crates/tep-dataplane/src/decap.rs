//! The receive nodes: validate the outer IP and UDP headers, demultiplex by
//! UDP port, parse and validate the tunnel header, find the tunnel, verify
//! (or trust) the outer checksum, complete remote checksum offload, and hand
//! the inner packet on marked checksum-verified when it is.

use crate::buffer::{ChecksumState, PacketId, PacketMeta, Pool, NO_TUNNEL};
use crate::dn_arp::{DnHop, DnWorker};
use crate::drop::DropReason;
use crate::geometry::{
    complete_partial_in, decrement_ttl, ethernet_ip_offset, holds_pseudo_sum, ip_end,
    ip_header_end, locate_ip, pseudo_header, transport_checksum_offset, transport_pseudo,
    PROTO_UDP,
};
use crate::gtpu_reply::{GtpuResponder, Notice, Replies, ReplyPath};
use crate::icmp_error::{IcmpError, IcmpErrors};
use crate::io::{InnerChecksums, OuterLayers};
use crate::kind::TunnelKind;
use crate::nexthop::{self, NextHops};
use crate::node::{each, sweep, NodeStats};
use crate::session::n9::REENCAP;
use crate::session::uplink::{match_session, Receiver};
use crate::session::SessionTable;
use crate::tunnel::{gre_id, ReceiveCache, TunnelTable};
use crate::vector::PacketVector;
use core::net::IpAddr;
use tep_csum::Sum;
use tep_wire::ethernet::EtherType;
use tep_wire::gtpu::MessageType;
use tep_wire::gue::GueRepr;
use tep_wire::ip::IpProtocol;
use tep_wire::{ipv4, ipv6, udp};

/// Node `ethernet-input` (whole frames): the outer Ethernet header, up to
/// two VLAN tags, must carry IPv4 or IPv6; it is stripped, so that
/// `ip-input` finds the IP header at the data start.
pub fn ethernet_input(stats: &mut NodeStats, pool: &mut Pool, v: &mut PacketVector) {
    each(stats, pool, v, |pool, id| {
        let data = pool.data(id);
        let l3 = match ethernet_ip_offset(data) {
            Some(l3) => l3,
            None if data.len() < tep_wire::ethernet::HEADER_LEN => {
                return Err(DropReason::Truncated)
            }
            None => return Err(DropReason::NotIp),
        };
        if !pool.trim_front(id, l3) {
            return Err(DropReason::Truncated);
        }
        Ok(())
    });
}

/// Node `ip-rewrite` (whole frames): an inner IP packet of an L3 tunnel
/// leaves on the inner interface as a router forwards it: its TTL / hop
/// limit decremented, behind the Ethernet header to the next hop for its
/// destination. A destination without a known next hop goes to
/// `unresolved` (for the kernel) and is noted for the I/O layer. A packet
/// whose TTL runs out is dropped (`ttl_expired`) and its ICMP Time
/// Exceeded goes to `errors`' vector, to be encapsulated back. Frames of
/// L2 tunnels pass as they are: they are bridged, not routed. A UPF
/// session's uplink of a data network with a router of its own
/// (`routers`) goes to that router, never to the kernel: dropped
/// `no_route` while its MAC is not known ([`crate::dn_arp`]).
#[allow(clippy::too_many_arguments)]
pub(crate) fn ip_rewrite(
    stats: &mut NodeStats,
    pool: &mut Pool,
    v: &mut PacketVector,
    table: &TunnelTable,
    next_hops: &mut NextHops,
    unresolved: &mut PacketVector,
    errors: (&mut IcmpErrors, &mut PacketVector, u64),
    mut routers: Option<&mut DnWorker>,
) {
    let (icmp, back, now_ns) = errors;
    let mut keep = PacketVector::new();
    let mut last = None;
    for &id in v.as_slice() {
        let m = *pool.meta(id);
        let hot = table.hot(m.tunnel);
        if hot.kind.carries_ethernet() {
            keep.put(pool, id);
            continue;
        }
        let own = match routers.as_deref_mut().filter(|_| hot.sessions) {
            Some(r) => r.hop(m.network, now_ns),
            None => DnHop::NotRouted,
        };
        let data = pool.data_mut(id);
        let dst = nexthop::ip_dst(data);
        let found = match own {
            DnHop::Via(h) => Some(h),
            DnHop::NotRouted => next_hops.lookup_run(&mut last, dst),
            DnHop::Unknown => {
                pool.meta_mut(id).drop = Some(DropReason::NoRoute);
                keep.put(pool, id);
                continue;
            }
        };
        let Some(h) = found else {
            // The kernel forwards it (and decrements its TTL) itself.
            // At most as many as the vector held.
            unresolved.put(pool, id);
            continue;
        };
        if let Err(r) = decrement_ttl(data) {
            // Time Exceeded back to the sender, through the tunnel the
            // packet came from.
            if let Some(e) = icmp.answer(pool, id, 0, IcmpError::TimeExceeded, now_ns) {
                // At most one per packet of the vector.
                back.put(pool, e);
            }
            pool.meta_mut(id).drop = Some(r);
            keep.put(pool, id);
            continue;
        }
        if !nexthop::prepend(pool, id, &h) {
            pool.meta_mut(id).drop = Some(DropReason::TooBig);
        }
        keep.put(pool, id);
    }
    *v = keep;
    sweep(stats, pool, v);
}

/// Node `ip-input` (where tep parses the outer headers): the outer IP
/// header must be whole, carry UDP, not be a fragment, and (IPv4) have a
/// good header checksum. Trims link padding; the addresses, TOS and TTL go
/// to `meta.outer`.
pub fn ip_input(stats: &mut NodeStats, pool: &mut Pool, v: &mut PacketVector) {
    each(stats, pool, v, ip_input_one);
}

fn ip_input_one(pool: &mut Pool, id: PacketId) -> Result<(), DropReason> {
    let data = pool.data(id);
    let ip = locate_ip(data, 0, 0)?;
    if !ip.v6 && !Sum::of(&data[..ip.l4]).verifies() {
        return Err(DropReason::BadIpChecksum);
    }
    if ip.fragment {
        return Err(DropReason::Fragment);
    }
    if ip.proto != PROTO_UDP {
        return Err(DropReason::NotUdp);
    }
    let (src, dst) = if ip.v6 {
        let (s, d) = (ipv6::field::SRC_ADDR, ipv6::field::DST_ADDR);
        (
            IpAddr::from(bytes::<16>(&data[s])),
            IpAddr::from(bytes::<16>(&data[d])),
        )
    } else {
        let (s, d) = (ipv4::field::SRC_ADDR, ipv4::field::DST_ADDR);
        (
            IpAddr::from(bytes::<4>(&data[s])),
            IpAddr::from(bytes::<4>(&data[d])),
        )
    };
    pool.truncate(id, ip.end);
    let m = pool.meta_mut(id);
    m.l2 = 0;
    m.l3 = 0;
    m.l4 = ip.l4 as u16;
    let o = pool.outer_mut(id);
    o.src = src;
    o.dst = dst;
    o.tos = ip.tos;
    o.ttl = ip.ttl;
    Ok(())
}

/// A field of `N` bytes as an array (the caller sliced exactly `N`).
#[inline(always)]
fn bytes<const N: usize>(field: &[u8]) -> [u8; N] {
    let mut a = [0; N];
    a.copy_from_slice(field);
    a
}

/// Node `udp-input`: the destination port picks the kind. Where tep parses
/// the outer headers, the UDP length must fit, and the ports go to
/// `meta.outer`. Packets leave sorted into one vector per kind (VPP's next
/// nodes), in [`TunnelKind::ALL`] order.
pub fn udp_input(
    stats: &mut NodeStats,
    pool: &mut Pool,
    v: &mut PacketVector,
    table: &TunnelTable,
    by_kind: &mut [PacketVector; TunnelKind::COUNT],
    layers: OuterLayers,
) {
    for &id in v.as_slice() {
        let kind = match layers {
            OuterLayers::IpUdp | OuterLayers::EthernetIpUdp => udp_input_one(pool, id),
            OuterLayers::UdpPayload => Ok(pool.outer(id).dst_port),
        }
        .and_then(|port| table.kind_on_port(port).ok_or(DropReason::UnknownPort));
        match kind {
            Ok(kind) => {
                // Same size as the input vector: it cannot be full.
                by_kind[kind.index()].put(pool, id);
            }
            Err(r) => pool.meta_mut(id).drop = Some(r),
        }
    }
    sweep(stats, pool, v);
    v.clear();
}

/// The UDP header of a datagram whose IP header `ip-input` checked: its
/// length is cut to, its ports recorded; returns the destination port.
fn udp_input_one(pool: &mut Pool, id: PacketId) -> Result<u16, DropReason> {
    let l4 = usize::from(pool.meta(id).l4);
    let data = pool.data(id);
    let h = data
        .get(l4..l4 + udp::HEADER_LEN)
        .ok_or(DropReason::Truncated)?;
    let u = udp::Packet::new_unchecked(h);
    let (len, sport, dport) = (usize::from(u.len()), u.src_port(), u.dst_port());
    if len < udp::HEADER_LEN || l4 + len > data.len() {
        return Err(DropReason::BadLength);
    }
    pool.truncate(id, l4 + len);
    pool.meta_mut(id).udp_payload = (l4 + udp::HEADER_LEN) as u16;
    let o = pool.outer_mut(id);
    o.src_port = sport;
    o.dst_port = dport;
    Ok(dport)
}

/// Whether a datagram's outer UDP checksum is right (or vouched for by the
/// I/O layer). Zero counts as right over IPv4 only: over IPv6 it needs a
/// tunnel that allows it, and a packet we would answer has none.
fn outer_checksum_good(data: &[u8], m: &PacketMeta) -> bool {
    if m.csum == ChecksumState::Verified {
        return true;
    }
    if !m.outer_in_buffer() {
        // Nothing to verify it with: only the I/O layer could have.
        return false;
    }
    let l4 = usize::from(m.l4);
    if data[l4 + udp::CHECKSUM_OFFSET..][..2] == [0, 0] {
        return data[0] >> 4 == 4;
    }
    pseudo_header(data, PROTO_UDP, data.len() - l4)
        .add(Sum::of(&data[l4..]))
        .verifies()
}

/// Marks a packet that became a reply inside a kind node.
const ANSWERED: u32 = u32::MAX - 1;

/// What a kind node learned from a tunnel header.
struct Parsed {
    /// Offset of the tunnel payload.
    inner: usize,
    /// Receive id (VNI, TEID, key).
    id: u64,
    /// RCO (start, offset) relative to the payload.
    rco: Option<(u16, u16)>,
    /// Whether the payload is an Ethernet frame.
    ethernet: bool,
}

/// Node `<kind>-decap`: parses and validates the tunnel header, finds the
/// tunnel, records the payload offset and any RCO. GTP-U Echo Requests are
/// answered; G-PDUs to unknown TEIDs draw a rate-limited Error Indication.
/// Returns how many packets of sessions it left marked for encapsulation
/// again ([`crate::session::n9`]).
#[allow(clippy::too_many_arguments)]
pub(crate) fn tunnel_decap(
    stats: &mut NodeStats,
    pool: &mut Pool,
    v: &mut PacketVector,
    table: &TunnelTable,
    kind: TunnelKind,
    gtpu: &mut GtpuResponder,
    replies: &mut Replies<'_>,
    now_ns: u64,
    sessions: Option<&SessionTable>,
) -> usize {
    let mut cache = ReceiveCache::default();
    if let Some(s) = sessions.filter(|_| kind == TunnelKind::Gtpu) {
        crate::session::uplink::prefetch(s, pool, v);
    }
    let ids = v.as_slice();
    let mut reencap = 0;
    let mut ahead = RxAhead::new(table, kind);
    if let Some(a) = &mut ahead {
        for &id in ids.iter().take(RX_AHEAD) {
            a.fetch(pool, table, id);
        }
    }
    for (i, &id) in ids.iter().enumerate() {
        if let (Some(a), Some(&next)) = (&mut ahead, ids.get(i + RX_AHEAD)) {
            a.fetch(pool, table, next);
        }
        let at = Lookup {
            table,
            cache: &mut cache,
            sessions,
        };
        match tunnel_decap_one(pool, id, at, kind, gtpu, replies, now_ns) {
            Ok(true) => {}
            // Kept for encapsulation again, off the common arm.
            Ok(false) if pool.meta(id).tunnel == REENCAP => reencap += 1,
            Ok(false) => pool.meta_mut(id).tunnel = ANSWERED,
            Err(r) => pool.meta_mut(id).drop = Some(r),
        }
    }
    if let Some(s) = sessions {
        s.wake_on_crossing();
    }
    // Answered requests left the vector as replies: take them out
    // without counting or freeing them.
    v.retain(|id| pool.meta(id).tunnel != ANSWERED, |_| {});
    // The mark was only for the retain: a reply belongs to no tunnel (the
    // I/O layer sends it from the endpoint its source names).
    for &id in replies.out.as_slice() {
        if pool.meta(id).tunnel == ANSWERED {
            pool.meta_mut(id).tunnel = NO_TUNNEL;
        }
    }
    sweep(stats, pool, v);
    reencap
}

/// How many datagrams ahead `vxlan-decap` and `geneve-decap` fetch their
/// receive lookup's line (runs of one (port, VNI) fetch it once).
const RX_AHEAD: usize = 16;

/// The receive lookups' fetches ahead, where the table is large enough
/// to miss (thousands of networks) and the kind's id lies at a fixed
/// place: the VNI of VXLAN and Geneve, bytes 4..7 of their header.
struct RxAhead {
    last: Option<(u16, u64)>,
}

impl RxAhead {
    fn new(table: &TunnelTable, kind: TunnelKind) -> Option<RxAhead> {
        let vni = matches!(kind, TunnelKind::Vxlan | TunnelKind::Geneve);
        (vni && table.receive_is_large()).then_some(RxAhead { last: None })
    }

    #[inline]
    fn fetch(&mut self, pool: &Pool, table: &TunnelTable, id: PacketId) {
        let at = usize::from(pool.meta(id).udp_payload) + 4;
        let Some(&[a, b, c]) = pool.data(id).get(at..at + 3) else {
            return;
        };
        let key = (
            pool.outer(id).dst_port,
            u64::from_be_bytes([0, 0, 0, 0, 0, a, b, c]),
        );
        if self.last != Some(key) {
            table.prefetch_receive(key.0, key.1);
            self.last = Some(key);
        }
    }
}

fn parse_tunnel(data: &[u8], at: usize, kind: TunnelKind) -> Result<Parsed, DropReason> {
    let h = &data[at..];
    Ok(match kind {
        TunnelKind::Vxlan => {
            let p = tep_wire::vxlan::Packet::new_checked(h)?;
            let r = tep_wire::vxlan::VxlanRepr::parse(&p, tep_wire::vxlan::Extensions::RCO)
                .map_err(|e| match e {
                    // The only length VXLAN checks is where RCO points.
                    tep_wire::Error::BadLength => DropReason::BadRemoteChecksum,
                    e => e.into(),
                })?;
            Parsed {
                inner: at + tep_wire::vxlan::HEADER_LEN,
                id: u64::from(r.vni),
                rco: r.rco.map(|c| (c.start(), c.offset())),
                ethernet: true,
            }
        }
        TunnelKind::Geneve => {
            let p = tep_wire::geneve::Packet::new_checked(h)?;
            let r = tep_wire::geneve::GeneveRepr::parse(&p)?;
            // tep understands no Geneve option: a critical one is a drop
            // (RFC 8926 §3.5.1), others are skipped.
            if r.options().any(|o| o.map_or(true, |o| o.critical())) {
                return Err(DropReason::UnknownCriticalOption);
            }
            if r.oam {
                return Err(DropReason::GeneveControl);
            }
            if r.protocol != EtherType::TransparentEthernet {
                return Err(DropReason::Unsupported);
            }
            Parsed {
                inner: at + r.header_len(),
                id: u64::from(r.vni),
                rco: None,
                ethernet: true,
            }
        }
        TunnelKind::GreInUdp | TunnelKind::FouGre => parse_gre(data, at)?,
        TunnelKind::GueGre => {
            let p = tep_wire::gue::Packet::new_checked(h)?;
            match GueRepr::parse(&p)? {
                GueRepr::Control { .. } => return Err(DropReason::GueControl),
                // Remote checksum offload would point past the GRE header
                // at a start tep does not take for this kind.
                r @ GueRepr::Data {
                    proto: IpProtocol::Gre,
                    ..
                } if r.rco().is_none() => parse_gre(data, at + r.header_len())?,
                _ => return Err(DropReason::Unsupported),
            }
        }
        TunnelKind::Gue => {
            let p = tep_wire::gue::Packet::new_checked(h)?;
            let r = GueRepr::parse(&p)?;
            match r {
                GueRepr::Control { .. } => return Err(DropReason::GueControl),
                GueRepr::Data { proto, .. } => {
                    if !matches!(proto, IpProtocol::Ipv4 | IpProtocol::Ipv6) {
                        return Err(DropReason::Unsupported);
                    }
                }
                GueRepr::Direct { .. } => {}
            }
            Parsed {
                inner: at + r.header_len(),
                id: 0,
                rco: r.rco().map(|c| (c.start, c.offset)),
                ethernet: false,
            }
        }
        TunnelKind::FouIpip | TunnelKind::FouSit => {
            let want = if kind == TunnelKind::FouIpip { 4 } else { 6 };
            if h.first().map(|b| b >> 4) != Some(want) {
                return Err(DropReason::Malformed);
            }
            Parsed {
                inner: at,
                id: 0,
                rco: None,
                ethernet: false,
            }
        }
        TunnelKind::Gtpu => unreachable!("GTP-U has its own path"),
    })
}

/// A GRE header at `at`: its payload must be IPv4 or IPv6, its checksum
/// (where it has one) right.
fn parse_gre(data: &[u8], at: usize) -> Result<Parsed, DropReason> {
    let p = tep_wire::gre::Packet::new_checked(&data[at..])?;
    let r = tep_wire::gre::GreRepr::parse(&p)?;
    if r.checksum && !p.verify_checksum() {
        return Err(DropReason::BadChecksum);
    }
    if !matches!(r.protocol, EtherType::Ipv4 | EtherType::Ipv6) {
        return Err(DropReason::Unsupported);
    }
    Ok(Parsed {
        inner: at + r.header_len(),
        id: gre_id(r.key),
        rco: None,
        ethernet: false,
    })
}

/// The receive table and the vector's last hit in front of it, and the
/// UPF's sessions where there are.
struct Lookup<'a> {
    table: &'a TunnelTable,
    cache: &'a mut ReceiveCache,
    sessions: Option<&'a SessionTable>,
}

/// Ok(true): forward; Ok(false): answered in place (moved to replies),
/// or marked [`REENCAP`] for encapsulation again.
fn tunnel_decap_one(
    pool: &mut Pool,
    id: PacketId,
    lookup: Lookup<'_>,
    kind: TunnelKind,
    gtpu: &mut GtpuResponder,
    replies: &mut Replies<'_>,
    now_ns: u64,
) -> Result<bool, DropReason> {
    let Lookup {
        table,
        cache,
        sessions,
    } = lookup;
    let (o, at) = (*pool.outer(id), usize::from(pool.meta(id).udp_payload));
    let (src, dst, sport, dport) = (o.src, o.dst, o.src_port, o.dst_port);
    let data = pool.data(id);
    let parsed = if kind == TunnelKind::Gtpu {
        let p = tep_wire::gtpu::Packet::new_unchecked(&data[at..]);
        let hl = p.checked_header_len()?;
        let path = ReplyPath {
            local: (dst, dport),
            peer: (src, sport),
            headers: pool.meta(id).outer_in_buffer(),
        };
        // Anything we answer must be what the peer sent: a reply to a
        // damaged datagram (an Error Indication for a TEID flipped in
        // transit) would tear down a live session (TS 29.281 §7.3.1).
        let gpdu = p.msg_type() == MessageType::GPdu;
        let unknown_extension = p.first_unknown_required_extension().is_some();
        let teid = p.teid();
        // Looked up once: a G-PDU to a known tunnel or session is the
        // common case.
        let rx = match cache.receive(table, kind, dport, src, dst, u64::from(teid)) {
            Ok(t) => Ok(Receiver::Tunnel(t)),
            Err(DropReason::UnknownTeid) if gpdu => match sessions {
                Some(s) => match_session(s, table, &data[at..], hl, teid, (src, dst), now_ns),
                None => Err(DropReason::UnknownTeid),
            },
            Err(r) => Err(r),
        };
        let replies_possible = !gpdu || unknown_extension || rx.is_err();
        if replies_possible && !outer_checksum_good(data, pool.meta(id)) {
            return Err(DropReason::BadChecksum);
        }
        match p.msg_type() {
            MessageType::GPdu => {}
            MessageType::EchoRequest => {
                gtpu.answer_echo(pool, id, at, path, replies)?;
                return Ok(false);
            }
            // A UPF's path supervision: up to its control plane, which
            // reports Error Indications to the SMF.
            MessageType::ErrorIndication | MessageType::EchoResponse if sessions.is_some() => {
                gtpu.signal(&p, src);
                return Err(DropReason::GtpuSignalling);
            }
            _ => return Err(DropReason::GtpuSignalling),
        }
        if unknown_extension {
            let notice = Notice::UnsupportedExtension;
            gtpu.notify(pool, replies, notice, path, now_ns);
            return Err(DropReason::UnknownRequiredExtension);
        }
        match rx {
            Ok(Receiver::Tunnel(t)) => {
                let m = pool.meta_mut(id);
                m.tunnel = t;
                m.inner = (at + hl) as u16;
                m.remote_csum = None;
                return finish_inner(pool, id, false).map(|_| true);
            }
            Ok(Receiver::Session {
                slot,
                n3,
                network,
                counter,
            }) => {
                let m = pool.meta_mut(id);
                m.tunnel = n3;
                m.network = network;
                m.inner = (at + hl) as u16;
                m.remote_csum = None;
                pool.set_session(id, slot);
                finish_inner(pool, id, false)?;
                // Usage: the inner packet, as it matched its PDR.
                if let Some(s) = sessions {
                    let len = pool.total_len(id) - (at + hl);
                    s.count_uplink(slot, len);
                    s.count_rule(counter, len);
                }
                return Ok(true);
            }
            Ok(Receiver::Reencap { word, n3, counter }) => {
                let at = (at + hl, n3, word, counter);
                return crate::session::n9::received(pool, id, at, sessions);
            }
            Err(DropReason::UnknownTeid) => {
                let notice = Notice::UnknownTeid(teid);
                gtpu.notify(pool, replies, notice, path, now_ns);
                return Err(DropReason::UnknownTeid);
            }
            Err(r) => return Err(r),
        }
    } else {
        parse_tunnel(data, at, kind)?
    };
    let t = cache.receive(table, kind, dport, src, dst, parsed.id)?;
    if parsed.rco.is_some() && !table.get(t).remote_checksum_rx {
        return Err(DropReason::RemoteChecksumOff);
    }
    let m = pool.meta_mut(id);
    m.tunnel = t;
    m.inner = parsed.inner as u16;
    m.remote_csum = parsed
        .rco
        .map(|(s, o)| (s + parsed.inner as u16, o + parsed.inner as u16));
    finish_inner(pool, id, parsed.ethernet).map(|_| true)
}

/// Locates the inner packet's IP and transport headers; an inner IP packet
/// must be whole (bytes after it are cut later, by decap-output).
pub(crate) fn finish_inner(
    pool: &mut Pool,
    id: PacketId,
    ethernet: bool,
) -> Result<(), DropReason> {
    let inner = usize::from(pool.meta(id).inner);
    let data = pool.data(id);
    let l3 = if ethernet {
        if data.len() < inner + 14 {
            return Err(DropReason::Truncated);
        }
        ethernet_ip_offset(&data[inner..]).map(|o| inner + o)
    } else {
        Some(inner)
    };
    // Bytes after the inner IP packet stay until the outer checksum is
    // verified (they are covered by it); decap-output cuts them.
    let (l3, l4, proto) = match l3 {
        Some(l3) => {
            let info = locate_ip(data, l3, 0)?;
            if info.end > data.len() {
                return Err(DropReason::BadLength);
            }
            let (l4, proto) = info.transport();
            (l3, l4, proto)
        }
        None => (inner, 0, 0),
    };
    let m = pool.meta_mut(id);
    m.inner_l3 = l3 as u16;
    m.inner_l4 = l4 as u16;
    m.inner_proto = proto;
    Ok(())
}

/// Node `udp-checksum-verify`: the outer checksum of each datagram: zero is
/// accepted where the tunnel allows it, a checksum the I/O layer verified
/// is trusted, any other is verified in software. The sum found on the way
/// completes remote checksum offload and verifies the inner transport
/// checksum without reading the payload again; the inner packet leaves
/// marked `Verified` when its checksum is known good.
///
/// `inner_partial`: the sink takes an inner packet whose checksum is still
/// to be computed (host mode: `NEEDS_CSUM` to the device, which the host
/// trusts on local delivery and completes when it forwards). Remote
/// checksum offload over an outer checksum the I/O layer verified then
/// leaves the inner checksum partial, as the sender did, instead of
/// summing the payload to complete it: the verified outer checksum
/// already vouches for every byte.
pub fn udp_checksum_verify(
    stats: &mut NodeStats,
    pool: &mut Pool,
    v: &mut PacketVector,
    table: &TunnelTable,
    inner_partial: bool,
) {
    each(stats, pool, v, |pool, id| {
        verify_one(pool, id, table, inner_partial)
    });
}

/// Where the inner packet ends: its IP length, or the buffer's end for a
/// frame that carries no IP.
fn inner_end(data: &[u8], m: &PacketMeta, ethernet: bool) -> usize {
    if ethernet && m.inner_l3 == m.inner {
        return data.len();
    }
    ip_end(data, usize::from(m.inner_l3))
}

fn verify_one(
    pool: &mut Pool,
    id: PacketId,
    table: &TunnelTable,
    inner_partial: bool,
) -> Result<(), DropReason> {
    let m = *pool.meta(id);
    let t = table.hot(m.tunnel);
    let ethernet = t.kind.carries_ethernet();
    let l4 = usize::from(m.l4);
    let v6 = pool.outer(id).src.is_ipv6();
    let data = pool.data_mut(id);
    // Where a socket took the headers, it accepted a zero checksum only
    // where the tunnel allows one: it cannot be told from a verified one.
    let in_buffer = m.outer_in_buffer();
    let zero = in_buffer && data[l4 + udp::CHECKSUM_OFFSET..][..2] == [0, 0];
    // The sum of the datagram's bytes, when we read them.
    let mut datagram: Option<Sum> = None;
    if zero {
        // RFC 768: optional over IPv4. RFC 6935/6936: over IPv6 only on a
        // tunnel configured for it.
        if v6 && !t.zero_checksum_rx {
            return Err(DropReason::ZeroChecksum);
        }
        // RCO needs the outer checksum to protect the inner one.
        if m.remote_csum.is_some() {
            return Err(DropReason::BadRemoteChecksum);
        }
    } else if m.csum != ChecksumState::Verified {
        if !in_buffer {
            // Nothing to verify it with: only the I/O layer could have.
            return Err(DropReason::BadChecksum);
        }
        let pseudo = pseudo_header(data, PROTO_UDP, data.len() - l4);
        let s = Sum::of(&data[l4..]);
        if !pseudo.add(s).verifies() {
            return Err(DropReason::BadChecksum);
        }
        datagram = Some(s);
    }
    let outer_good = !zero;
    let mut inner_ok = false;
    if let Some((start, offset)) = m.remote_csum {
        let (start, offset) = (usize::from(start), usize::from(offset));
        if offset + 2 > data.len() || start > data.len() || offset < start {
            return Err(DropReason::BadRemoteChecksum);
        }
        let end = inner_end(data, &m, ethernet);
        if offset + 2 > end || start > end {
            return Err(DropReason::BadRemoteChecksum);
        }
        let (il3, il4) = (usize::from(m.inner_l3), usize::from(m.inner_l4));
        // The field written must lie past the headers decap parsed and the
        // sink relies on: a checksum completed into the inner Ethernet or
        // IP header (its length, say) would deliver a packet that is not
        // the one checked.
        let headers_end = match (il4, ethernet && il3 == usize::from(m.inner)) {
            (0, true) => usize::from(m.inner) + 14,
            (0, false) => ip_header_end(data, il3),
            _ => il4,
        };
        if offset < headers_end {
            return Err(DropReason::BadRemoteChecksum);
        }
        if inner_partial
            && datagram.is_none()
            && outer_good
            && start == il4
            && transport_checksum_offset(m.inner_proto) == Some(offset - il4)
            && holds_pseudo_sum(&data[..end], il3, il4, m.inner_proto)
        {
            // From the inner frame's start, as the GRO nodes and a
            // merged train's head have it.
            let inner = usize::from(m.inner);
            pool.meta_mut(id).csum = ChecksumState::Partial {
                start: (start - inner) as u16,
                offset: (offset - inner) as u16,
            };
            return Ok(());
        }
        let from_start = match datagram {
            Some(s) => s
                .sub(Sum::of(&data[l4..start]))
                .sub(Sum::of_at(&data[end..], end - l4))
                .at(start - l4),
            None => Sum::of(&data[start..end]),
        };
        let done = tep_csum::remote_checksum_complete(data, offset, from_start)
            .ok_or(DropReason::BadRemoteChecksum)?;
        // RFC 768: a UDP checksum that computes to 0 is sent as all ones
        // (0 means "none", and is illegal over IPv6).
        if done.new == 0 && offset - start == 6 && m.inner_proto == 17 {
            data[offset..offset + 2].copy_from_slice(&[0xff, 0xff]);
        }
        // The sender's outer checksum covered the bytes from which the inner
        // one is now derived: it is right by construction.
        inner_ok = start == usize::from(m.inner_l4) && outer_good;
    } else if let Some(s) = datagram {
        let il4 = usize::from(m.inner_l4);
        let end = inner_end(data, &m, ethernet);
        if let Some(ip) =
            transport_pseudo(&data[..end], usize::from(m.inner_l3), il4, m.inner_proto)
        {
            let segment = s
                .sub(Sum::of(&data[l4..il4]))
                .sub(Sum::of_at(&data[end..], end - l4))
                .at(il4 - l4);
            inner_ok = ip.add(segment).verifies();
        }
    }
    pool.meta_mut(id).csum = if inner_ok {
        ChecksumState::Verified
    } else {
        ChecksumState::None
    };
    Ok(())
}

/// Node `decap-output`: strips the outer headers, applies RFC 6040
/// decapsulation to the inner ECN field, and settles the inner checksum for
/// the sink ([`settle_inner_checksum`]).
pub fn decap_output(
    stats: &mut NodeStats,
    pool: &mut Pool,
    v: &mut PacketVector,
    table: &TunnelTable,
    sink: InnerChecksums,
) {
    each(stats, pool, v, |pool, id| output_one(pool, id, table, sink));
}

fn output_one(
    pool: &mut Pool,
    id: PacketId,
    table: &TunnelTable,
    sink: InnerChecksums,
) -> Result<(), DropReason> {
    let m = *pool.meta(id);
    let ethernet = table.kind(m.tunnel).carries_ethernet();
    let has_ip = !ethernet || m.inner_l3 != m.inner;
    let outer_ecn = pool.outer(id).tos & 3;
    let data = pool.data_mut(id);
    if has_ip && outer_ecn != 0 {
        ecn_decap(&mut data[usize::from(m.inner_l3)..], outer_ecn)?;
    }
    if !ethernet {
        // Trailing bytes after the inner packet (inside the GTP-U length
        // or the UDP datagram) are not part of it.
        let end = inner_end(data, &m, ethernet);
        pool.truncate(id, end);
    }
    let inner = m.inner;
    pool.trim_front(id, usize::from(inner));
    let m = pool.meta_mut(id);
    m.l2 = 0;
    m.l3 = m.inner_l3 - inner;
    m.l4 = if m.inner_l4 == 0 {
        0
    } else {
        m.inner_l4 - inner
    };
    m.inner = 0;
    m.inner_l3 = m.l3;
    m.inner_l4 = m.l4;
    m.remote_csum = None;
    m.udp_payload = 0;
    if sink != InnerChecksums::AsFound {
        let mut m = *m;
        settle_inner_checksum(pool.data_mut(id), &mut m, sink);
        pool.meta_mut(id).csum = m.csum;
    }
    Ok(())
}

/// The inner TCP/UDP checksum of a decapsulated packet (offsets from its
/// start) that nobody verified, settled for a sink that takes checksum
/// state or one that needs it complete.
///
/// A Linux sender on this host, a kernel tunnel in another namespace over
/// veth, leaves the inner checksum partial: the field holds the
/// pseudo-header sum (`CHECKSUM_PARTIAL`), veth never completes it, and
/// the UDP socket hands the payload over as it is. The kernel's own tunnel
/// would pass such a packet on still partial, so for a sink that takes it
/// ([`InnerChecksums::Stated`]) it stays partial (`NEEDS_CSUM`): trusted on
/// local delivery, completed if the host forwards it; a sink that does not
/// ([`InnerChecksums::Completed`]) gets it completed. A checksum that
/// verifies is marked `Verified` (the host does not sum it again); anything
/// else stays `None` and the host verifies, drops and counts it. A
/// corrupted packet whose checksum field happens to equal its pseudo-header
/// sum passes: one in 65536, what the checksum itself lets through anyway.
/// Super-packets (GRO) keep their state: they are partial by construction.
pub(crate) fn settle_inner_checksum(data: &mut [u8], m: &mut PacketMeta, sink: InnerChecksums) {
    let (l3, l4) = (usize::from(m.l3), usize::from(m.l4));
    let Some(field) = transport_checksum_offset(m.inner_proto) else {
        return;
    };
    if m.gso.is_some() || m.csum != ChecksumState::None || l4 <= l3 {
        return;
    }
    // Where the IP header says, not at any Ethernet padding.
    let end = ip_end(data, l3);
    let at = l4 + field;
    if at + 2 > end {
        return;
    }
    let segment = &data[..end];
    // None for a UDP checksum of zero (none sent, IPv4).
    let Some(pseudo) = transport_pseudo(segment, l3, l4, m.inner_proto) else {
        return;
    };
    // The field is looked at before the bytes are summed: a partial
    // checksum for a sink that takes it costs no pass over the payload (a
    // 64 KiB super-packet from a kernel sender over veth would cost ~3,000
    // clocks). A complete checksum that happens to equal the pseudo-header
    // sum is marked partial too: completing it writes the same value.
    let partial = holds_pseudo_sum(segment, l3, l4, m.inner_proto);
    if partial && sink == InnerChecksums::Stated {
        m.csum = ChecksumState::Partial {
            start: l4 as u16,
            offset: at as u16,
        };
    } else if pseudo.add(Sum::of(&segment[l4..])).verifies() {
        m.csum = ChecksumState::Verified;
    } else if partial {
        // In bounds: checked above.
        let _ = complete_partial_in(data, l4, at, end);
    }
}

/// RFC 6040 §4.2 for an inner IP header and an outer ECN codepoint.
fn ecn_decap(ip: &mut [u8], outer: u8) -> Result<(), DropReason> {
    const CE: u8 = 3;
    const ECT1: u8 = 1;
    let v4 = ip[0] >> 4 == 4;
    let inner = if v4 { ip[1] & 3 } else { (ip[1] >> 4) & 3 };
    let new = match (inner, outer) {
        (0, CE) => return Err(DropReason::EcnCeNotEct),
        (0, _) => return Ok(()),
        (_, CE) => CE,
        // ECT(0) inside, ECT(1) outside: ECT(1) (the table's only other
        // change).
        (2, ECT1) => ECT1,
        (i, _) => i,
    };
    if new == inner {
        return Ok(());
    }
    if v4 {
        let word = |ip: &[u8]| u16::from_be_bytes([ip[0], ip[1]]);
        let old_word = word(ip);
        ip[ipv4::field::DSCP_ECN] = (ip[ipv4::field::DSCP_ECN] & !3) | new;
        let c = word(&ip[ipv4::field::CHECKSUM]);
        let c = tep_csum::incremental_update(c, old_word, word(ip));
        ip[ipv4::field::CHECKSUM].copy_from_slice(&c.to_be_bytes());
    } else {
        ip[1] = (ip[1] & !0x30) | (new << 4);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inner_checksums_are_verified_partial_or_left_to_the_host() {
        let mut pool = Pool::new(1, 2048);
        let id = pool.alloc().unwrap();
        let mut m = *pool.meta(id);
        // What decap-output settles for a sink that takes checksum state.
        let inner_checksum = |f: &[u8], m: &PacketMeta| {
            let (mut f, mut m) = (f.to_vec(), *m);
            settle_inner_checksum(&mut f, &mut m, InnerChecksums::Stated);
            m.csum
        };
        m.l3 = 14;
        m.l4 = 34;
        m.inner_proto = 6;
        // Ethernet, IPv4 10.9.0.2 → 10.9.0.1, TCP with 6 bytes, then 4
        // bytes of Ethernet padding.
        let mut f = vec![0u8; 14 + 20 + 20 + 6 + 4];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14..34].copy_from_slice(&[
            0x45, 0, 0, 46, 0, 1, 0x40, 0, 64, 6, 0, 0, 10, 9, 0, 2, 10, 9, 0, 1,
        ]);
        f[34..38].copy_from_slice(&[0x9c, 0x40, 0x14, 0x51]);
        f[46] = 5 << 4;
        f[54..60].copy_from_slice(b"abcdef");
        let pseudo = tep_csum::pseudo_header_v4([10, 9, 0, 2], [10, 9, 0, 1], 6, 26);
        // As a Linux sender leaves it: the pseudo-header sum.
        f[50..52].copy_from_slice(&pseudo.value().to_be_bytes());
        assert_eq!(
            inner_checksum(&f, &m),
            ChecksumState::Partial {
                start: 34,
                offset: 50
            }
        );
        f[50..52].copy_from_slice(&[0, 0]);
        let c = pseudo.add(tep_csum::Sum::of(&f[34..60])).checksum();
        f[50..52].copy_from_slice(&c.to_be_bytes());
        assert_eq!(inner_checksum(&f, &m), ChecksumState::Verified);
        // Completing the partial form gives the same checksum.
        let mut p = f.clone();
        p[50..52].copy_from_slice(&pseudo.value().to_be_bytes());
        let mut mp = m;
        settle_inner_checksum(&mut p, &mut mp, InnerChecksums::Completed);
        assert_eq!(p, f);
        // Super-packets keep their state: the device header marks them.
        let mut g = m;
        g.gso = Some(crate::buffer::Gso {
            kind: crate::buffer::GsoKind::Tcp4,
            segment_size: 1000,
        });
        assert_eq!(inner_checksum(&f, &g), ChecksumState::None);
        f[55] ^= 1;
        assert_eq!(inner_checksum(&f, &m), ChecksumState::None);
        // A UDP datagram without a checksum stays as it is.
        m.inner_proto = 17;
        f[23] = 17;
        f[40..42].copy_from_slice(&[0, 0]);
        assert_eq!(inner_checksum(&f, &m), ChecksumState::None);
        // A truncated packet is left to the host.
        m.inner_proto = 6;
        assert_eq!(inner_checksum(&f[..40], &m), ChecksumState::None);
    }
}
