//! The transmit nodes: classify the inner packet, find its tunnel, settle
//! its own checksum, add the tunnel header, the outer UDP and IP headers,
//! and fill the outer checksum by the tunnel's mode.
//!
//! Each node is one function over a vector. Per-packet state between nodes
//! lives in [`PacketMeta`](crate::buffer::PacketMeta): `inner_l3`,
//! `inner_l4`, `inner_proto` describe the inner packet and move with it as
//! headers are prepended; `tunnel` is set by the lookup.

use crate::buffer::{ChecksumState, PacketId, Pool};
use crate::config::{ChecksumMode, DontFragment, Dscp, GueRcoEncoding, Ttl, TunnelConfig};
use crate::drop::DropReason;
use crate::geometry::{
    complete_partial, decrement_ttl, ethernet_ip_offset, ip_end, ip_header_end, locate_ip,
    mac_hash, parse_ip, pseudo_header, transport_pseudo_len, InnerLink, PROTO_UDP,
};
use crate::icmp_error::{IcmpError, IcmpErrors};
use crate::io::{Outer, OuterLayers};
use crate::kind::TunnelKind;
use crate::nexthop::{self, NextHops};
use crate::node::{each, NodeStats};
use crate::overlay::nodes::OverlayWorker;
use crate::session::{downlink, SessionTable};
use crate::tunnel::TunnelTable;
use crate::vector::PacketVector;
use core::net::IpAddr;
use tep_csum::Sum;
use tep_wire::ethernet::EtherType;
use tep_wire::gue::{GueFields, GueRepr, RemoteChecksum};
use tep_wire::ip::IpProtocol;
use tep_wire::ipv4::{self, field as ip4};
use tep_wire::ipv6::{self, field as ip6};
use tep_wire::udp::{self, field as udpf};
use tep_wire::vxlan::{VxlanRco, VxlanRepr};

/// Node `encap-classify`: parses the inner packet, records its offsets and
/// flow hash, and trims link padding after an IP packet.
pub fn classify(stats: &mut NodeStats, pool: &mut Pool, v: &mut PacketVector, link: InnerLink) {
    each(stats, pool, v, |pool, id| classify_one(pool, id, link));
}

fn classify_one(pool: &mut Pool, id: PacketId, link: InnerLink) -> Result<(), DropReason> {
    let data = pool.data(id);
    // A segment's payload left in its super-packet (exactly its IP length).
    let tail = pool.total_len(id) - data.len();
    match link {
        InnerLink::Ip => {
            let info = parse_ip(data, 0, tail)?;
            if tail == 0 && !pool.truncate(id, info.end) {
                return Err(DropReason::BadLength);
            }
            let (l4, proto) = info.transport();
            let m = pool.meta_mut(id);
            m.l2 = 0;
            m.l3 = 0;
            m.inner = 0;
            m.inner_l3 = 0;
            m.inner_l4 = l4 as u16;
            m.inner_proto = proto;
            m.flow_hash = info.hash;
        }
        InnerLink::Ethernet => {
            if data.len() < 14 {
                return Err(DropReason::Truncated);
            }
            let (l3, l4, proto, hash) = match ethernet_ip_offset(data) {
                Some(l3) => {
                    let info = parse_ip(data, l3, tail)?;
                    if info.end > data.len() + tail {
                        return Err(DropReason::BadLength);
                    }
                    let (l4, proto) = info.transport();
                    (l3, l4, proto, info.hash)
                }
                None => (0, 0, 0, mac_hash(data)),
            };
            let m = pool.meta_mut(id);
            m.l2 = 0;
            m.l3 = l3 as u16;
            m.inner = 0;
            m.inner_l3 = l3 as u16;
            m.inner_l4 = l4 as u16;
            m.inner_proto = proto;
            m.flow_hash = hash;
        }
    }
    Ok(())
}

/// The last hit of the transmit lookup, kept for one vector (VPP keeps a
/// per-vector cache like this in front of its FIB).
#[derive(Clone, Copy, Debug, Default)]
struct LastHit {
    key: Option<(u8, u128)>,
    tunnel: u32,
}

/// Node `tunnel-lookup`: the tunnel for each inner packet: by destination
/// MAC for Ethernet frames (L2 tunnels), else by destination prefix.
/// Frames that no L2 tunnel takes but carry IP lose their Ethernet header
/// and are routed as IP.
pub fn lookup(
    stats: &mut NodeStats,
    pool: &mut Pool,
    v: &mut PacketVector,
    table: &TunnelTable,
    link: InnerLink,
) {
    let mut last = LastHit::default();
    each(stats, pool, v, |pool, id| {
        // A network's packets come from its own device: the I/O named
        // the network, and fdb-lookup finds the VTEP.
        let preset = pool.meta(id).tunnel;
        if table.is_network(preset) {
            return Ok(());
        }
        let t = lookup_one(pool, id, table, link, &mut last)?;
        pool.meta_mut(id).tunnel = t;
        Ok(())
    });
}

fn lookup_one(
    pool: &mut Pool,
    id: PacketId,
    table: &TunnelTable,
    link: InnerLink,
    last: &mut LastHit,
) -> Result<u32, DropReason> {
    let m = *pool.meta(id);
    let data = pool.data(id);
    if link == InnerLink::Ethernet {
        // An Ethernet frame.
        let mut dst = [0u8; 6];
        dst.copy_from_slice(&data[..6]);
        if let Some(t) = table.route_mac(dst) {
            return Ok(t);
        }
        if m.inner_l3 == 0 {
            return Err(DropReason::NoRoute);
        }
        // Route the IP packet inside.
        let l3 = usize::from(m.inner_l3);
        let tail = pool.total_len(id) - data.len();
        let info = locate_ip(data, l3, tail)?;
        pool.trim_front(id, l3);
        if tail == 0 {
            pool.truncate(id, info.end - l3);
        }
        let (l4, _) = info.transport();
        let mm = pool.meta_mut(id);
        mm.l3 = 0;
        mm.inner_l3 = 0;
        mm.inner_l4 = if l4 == 0 { 0 } else { (l4 - l3) as u16 };
        if let ChecksumState::Partial { start, offset } = mm.csum {
            let l3 = l3 as u16;
            if start < l3 {
                return Err(DropReason::Malformed);
            }
            mm.csum = ChecksumState::Partial {
                start: start - l3,
                offset: offset - l3,
            };
        }
    }
    let data = pool.data(id);
    let (family, key) = match data[0] >> 4 {
        4 => {
            let mut a = [0u8; 4];
            a.copy_from_slice(&data[ip4::DST_ADDR]);
            (4u8, u128::from(u32::from_be_bytes(a)))
        }
        _ => {
            let mut a = [0u8; 16];
            a.copy_from_slice(&data[ip6::DST_ADDR]);
            (6u8, u128::from_be_bytes(a))
        }
    };
    if last.key == Some((family, key)) {
        return Ok(last.tunnel);
    }
    let t = if family == 4 {
        table.route_v4(key as u32)
    } else {
        table.route_v6(key)
    }
    .ok_or(DropReason::NoRoute)?;
    // FOU without a header says the inner family by its port alone.
    let kind = table.get(t).kind;
    if (kind == TunnelKind::FouIpip && family != 4) || (kind == TunnelKind::FouSit && family != 6) {
        return Err(DropReason::NoRoute);
    }
    *last = LastHit {
        key: Some((family, key)),
        tunnel: t,
    };
    Ok(t)
}

/// Whether a tunnel sends RCO for an inner checksum at (start, offset) from
/// the tunnel payload start: only in `remote` mode, only where the kind's
/// header can say it.
fn rco_encodable(kind: TunnelKind, start: u16, offset: u16) -> bool {
    match kind {
        TunnelKind::Vxlan => {
            let udp = offset.wrapping_sub(start) == 6;
            let tcp = offset.wrapping_sub(start) == 16;
            (udp || tcp) && VxlanRco::new(start, udp).is_some()
        }
        TunnelKind::Gue => offset >= start && offset & 1 == 0,
        _ => false,
    }
}

/// Node `inner-checksum`: a partial inner checksum (from a TUN with
/// checksum offload) is finished in software, except where the tunnel sends
/// it to the peer with remote checksum offload.
pub fn inner_checksum(
    stats: &mut NodeStats,
    pool: &mut Pool,
    v: &mut PacketVector,
    table: &TunnelTable,
) {
    each(stats, pool, v, |pool, id| {
        let m = pool.meta(id);
        let ChecksumState::Partial { start, offset } = m.csum else {
            return Ok(());
        };
        // A super-packet encapsulated whole keeps its inner checksum
        // partial: whoever segments it completes each segment's.
        if m.gso.is_some() {
            return Ok(());
        }
        let t = table.get(m.tunnel);
        let (s, o) = (usize::from(start), usize::from(offset));
        // The field is not inside the IP (or Ethernet) header: completing
        // it there, here or by the peer (RCO), would overwrite the header
        // (a virtio-net header with csum_start and csum_offset pointing
        // into it); the peer refuses RCO there.
        let carries_ip = !(t.kind.carries_ethernet() && m.inner_l3 == m.inner);
        let headers_end = match (carries_ip, m.inner_l4) {
            // A frame without IP: not over its Ethernet header either.
            (false, _) => usize::from(m.inner) + 14,
            (true, 0) => ip_header_end(pool.data(id), usize::from(m.inner_l3)),
            (true, l4) => usize::from(l4),
        };
        if o < headers_end {
            return Err(DropReason::Malformed);
        }
        // The checksum covers the transport segment: to the IP packet's
        // end, not over any Ethernet padding after it (what the receiver
        // sums, and what remote checksum offload completes to); a frame
        // without IP, to its end. A field outside that region can be
        // completed by nobody, here or by the peer (RCO).
        let data = pool.data(id);
        let end = if carries_ip && m.tail.is_none() {
            ip_end(data, usize::from(m.inner_l3))
        } else {
            data.len()
        };
        if o + 2 > end || s > o || o & 1 != (s & 1) {
            return Err(DropReason::Malformed);
        }
        if t.checksum == ChecksumMode::Remote && rco_encodable(t.kind, start, offset) {
            return Ok(());
        }
        // A gathered segment's payload is its tail (and it has no padding).
        let sum = if m.tail.is_some() {
            pool.sum_from(id, s)
        } else {
            Sum::of(&data[s..end])
        };
        complete_partial(pool.data_mut(id), s, o, sum);
        pool.meta_mut(id).csum = ChecksumState::None;
        Ok(())
    });
}

/// Moves the inner offsets after `n` bytes were prepended.
fn shift(pool: &mut Pool, id: PacketId, n: usize) {
    let m = pool.meta_mut(id);
    let n = n as u16;
    m.inner += n;
    m.inner_l3 += n;
    if m.inner_l4 != 0 {
        m.inner_l4 += n;
    }
    if let ChecksumState::Partial { start, offset } = m.csum {
        m.csum = ChecksumState::Partial {
            start: start + n,
            offset: offset + n,
        };
    }
}

/// Room for the longest tunnel header tep emits (GTP-U with a PDU Session
/// Container: 16 bytes; GUE with Linux RCO: 12).
const MAX_TUNNEL_HEADER: usize = 32;

/// A tunnel's header emitted once at set-up (payload length 0, IPv4 inner,
/// no RCO): per packet it is copied and only the fields that depend on the
/// packet are patched, as VPP's rewrite strings do. Building a GTP-U repr
/// with its extension chain per packet cost ~3× more.
#[derive(Clone, Copy, Debug)]
pub struct HeaderTemplate {
    bytes: [u8; MAX_TUNNEL_HEADER],
    len: u8,
}

/// Starts fetching tunnel `t`'s template (a hint).
#[inline]
pub(crate) fn prefetch_template(templates: &[HeaderTemplate], t: u32) {
    if let Some(tpl) = templates.get(t as usize) {
        crate::session::flat::prefetch(tpl);
    }
}

impl HeaderTemplate {
    /// The template of a tunnel.
    pub fn new(t: &TunnelConfig) -> HeaderTemplate {
        let mut bytes = [0u8; MAX_TUNNEL_HEADER];
        let len = emit_header(t, &mut bytes, 0, false, None);
        HeaderTemplate {
            bytes,
            len: len as u8,
        }
    }

    /// The header's length.
    pub fn len(&self) -> usize {
        usize::from(self.len)
    }
}

/// The bytes tep adds in front of an inner packet of tunnel `t`: outer IP,
/// UDP, the tunnel header, and for L2 kinds the inner Ethernet header
/// (which the device MTU does not count).
pub fn overhead(t: &TunnelConfig) -> u32 {
    let ip = if t.local.is_ipv4() { 20 } else { 40 };
    let mut header = HeaderTemplate::new(t).len() as u32;
    // The template is built without RCO; GUE's adds 8 bytes (either
    // encoding), VXLAN's fits its header.
    if t.kind == TunnelKind::Gue && t.checksum == ChecksumMode::Remote {
        header += match t.gue_rco {
            GueRcoEncoding::Linux | GueRcoEncoding::Ietf => 8,
        };
    }
    let ethernet = if t.kind.carries_ethernet() { 14 } else { 0 };
    ip + 8 + header + ethernet
}

/// Writes the tunnel header of `t` into `buf` for a payload of
/// `payload_len` bytes; returns its length.
fn emit_header(
    t: &TunnelConfig,
    buf: &mut [u8; MAX_TUNNEL_HEADER],
    payload_len: usize,
    inner_v6: bool,
    rco: Option<(u16, u16)>,
) -> usize {
    let kind = t.kind;
    match kind {
        TunnelKind::Vxlan => {
            let repr = VxlanRepr {
                vni: t.vni,
                rco: rco.and_then(|(s, o)| VxlanRco::new(s, o - s == 6)),
                gbp: None,
                gpe: None,
            };
            repr.emit(&mut tep_wire::vxlan::Packet::new_unchecked(&mut buf[..8]));
            8
        }
        TunnelKind::Geneve => {
            let repr = tep_wire::geneve::GeneveRepr {
                vni: t.vni,
                protocol: EtherType::TransparentEthernet,
                oam: false,
                critical: false,
                options: &[],
            };
            let n = repr.buffer_len();
            repr.emit(&mut tep_wire::geneve::Packet::new_unchecked(&mut buf[..n]));
            n
        }
        TunnelKind::Gtpu => {
            let mut repr = tep_wire::gtpu::GtpuRepr::gpdu(t.teid);
            if let Some(qfi) = t.qfi {
                // Capacity 4, one used: cannot fail.
                let _ = repr
                    .extensions
                    .push(tep_wire::gtpu::Extension::PduSessionContainer(
                        tep_wire::gtpu::PduSessionContainer::ul(qfi),
                    ));
            }
            let n = repr.buffer_len();
            repr.emit(&mut buf[..n], payload_len);
            n
        }
        TunnelKind::GreInUdp | TunnelKind::FouGre => emit_gre(t, buf, inner_v6),
        TunnelKind::GueGre => {
            // Linux's layout (gue_build_header, then gre_build_header): a
            // GUE data header with protocol 47 and no options, the GRE
            // header after it.
            let gue = GueRepr::Data {
                proto: IpProtocol::Gre,
                fields: GueFields::None,
            };
            let n = gue.buffer_len();
            gue.emit(&mut tep_wire::gue::Packet::new_unchecked(&mut buf[..n]));
            n + emit_gre(t, &mut buf[n..], inner_v6)
        }
        // Variant 1: the inner IP packet follows UDP directly.
        TunnelKind::Gue if t.gue_variant == 1 => 0,
        TunnelKind::Gue => {
            let proto = if inner_v6 {
                IpProtocol::Ipv6
            } else {
                IpProtocol::Ipv4
            };
            let rco = rco.map(|(start, offset)| RemoteChecksum { start, offset });
            let fields = match (rco, t.gue_rco) {
                (None, _) => GueFields::None,
                (Some(r), GueRcoEncoding::Linux) => GueFields::Linux { rco: Some(r) },
                (Some(r), GueRcoEncoding::Ietf) => GueFields::Ietf {
                    group_id: None,
                    rco: Some(r),
                },
            };
            let repr = GueRepr::Data { proto, fields };
            let n = repr.buffer_len();
            repr.emit(&mut tep_wire::gue::Packet::new_unchecked(&mut buf[..n]));
            n
        }
        TunnelKind::FouIpip | TunnelKind::FouSit => 0,
    }
}

/// The GRE header of tunnel `t` into `buf`; its length.
fn emit_gre(t: &TunnelConfig, buf: &mut [u8], inner_v6: bool) -> usize {
    let repr = tep_wire::gre::GreRepr {
        protocol: if inner_v6 {
            EtherType::Ipv6
        } else {
            EtherType::Ipv4
        },
        checksum: false,
        key: t.key,
        sequence: None,
    };
    let n = repr.buffer_len();
    repr.emit(&mut tep_wire::gre::Packet::new_unchecked(&mut buf[..n]));
    n
}

/// Node `<kind>-encap`: writes the tunnel header in front of each inner
/// packet of a vector of one kind.
pub fn tunnel_encap(
    stats: &mut NodeStats,
    pool: &mut Pool,
    v: &mut PacketVector,
    table: &TunnelTable,
    templates: &[HeaderTemplate],
    sessions: Option<&SessionTable>,
) {
    each(stats, pool, v, |pool, id| {
        tunnel_encap_one(pool, id, table, templates, sessions)
    });
}

fn tunnel_encap_one(
    pool: &mut Pool,
    id: PacketId,
    table: &TunnelTable,
    templates: &[HeaderTemplate],
    sessions: Option<&SessionTable>,
) -> Result<(), DropReason> {
    let m = *pool.meta(id);
    let hot = table.hot(m.tunnel);
    if hot.sessions {
        // An N3 tunnel: the header is the session's (peer TEID, QFI).
        let sessions = sessions.ok_or(DropReason::NoSession)?;
        let (_, teid, container) = sessions.downlink_header(pool.session(id));
        let payload_len = pool.total_len(id);
        let n = downlink::header_len(container.0);
        if payload_len + n - tep_wire::gtpu::HEADER_LEN > usize::from(u16::MAX) {
            return Err(DropReason::TooBig);
        }
        let h = pool.prepend(id, n).ok_or(DropReason::TooBig)?;
        downlink::write_gtpu(h, teid, container, payload_len);
        shift(pool, id, n);
        return Ok(());
    }
    let tpl = &templates[m.tunnel as usize];
    // With its tail: a segment whose payload stays in the super-packet.
    let payload_len = pool.total_len(id);
    let inner_v6 = !hot.kind.carries_ethernet() && pool.data(id)[0] >> 4 == 6;
    let n = tpl.len();
    if hot.kind == TunnelKind::Gtpu
        && payload_len + n - tep_wire::gtpu::HEADER_LEN > usize::from(u16::MAX)
    {
        return Err(DropReason::TooBig);
    }
    // A partial inner checksum here is remote checksum offload (the
    // inner-checksum node kept it partial only where the header can carry
    // it), or a super-packet encapsulated whole (tunnel GSO), whose
    // segmenter completes it.
    let rco = match m.csum {
        ChecksumState::Partial { start, offset } if m.gso.is_none() => Some((start, offset)),
        _ => None,
    };
    if let Some((start, offset)) = rco {
        // Remote checksum offload: a header of its own.
        let mut buf = [0u8; MAX_TUNNEL_HEADER];
        let t = table.get(m.tunnel);
        let n = emit_header(t, &mut buf, payload_len, inner_v6, Some((start, offset)));
        let h = pool.prepend(id, n).ok_or(DropReason::TooBig)?;
        h.copy_from_slice(&buf[..n]);
        shift(pool, id, n);
        return Ok(());
    }
    let h = pool.prepend(id, n).ok_or(DropReason::TooBig)?;
    // The common lengths as constant copies: no call to memcpy per packet.
    match n {
        8 => h.copy_from_slice(&tpl.bytes[..8]),
        16 => h.copy_from_slice(&tpl.bytes[..16]),
        _ => h.copy_from_slice(&tpl.bytes[..n]),
    }
    match hot.kind {
        TunnelKind::Gtpu => {
            let len = (n - tep_wire::gtpu::HEADER_LEN + payload_len) as u16;
            h[tep_wire::gtpu::field::LENGTH].copy_from_slice(&len.to_be_bytes());
        }
        TunnelKind::GreInUdp | TunnelKind::FouGre if inner_v6 => {
            let ty = u16::from(EtherType::Ipv6);
            h[tep_wire::gre::field::PROTOCOL].copy_from_slice(&ty.to_be_bytes());
        }
        TunnelKind::GueGre if inner_v6 => {
            let ty = u16::from(EtherType::Ipv6);
            h[tep_wire::gue::HEADER_LEN..][tep_wire::gre::field::PROTOCOL]
                .copy_from_slice(&ty.to_be_bytes());
        }
        TunnelKind::Gue if inner_v6 && n > 1 => {
            h[tep_wire::gue::field::PROTO_CTYPE] = IpProtocol::Ipv6.into()
        }
        _ => {}
    }
    shift(pool, id, n);
    Ok(())
}

/// Per-tunnel transmit state kept by the pipeline.
#[derive(Clone, Copy, Debug)]
pub struct TxState {
    /// The next outer IPv4 identification.
    pub ip_id: u16,
    /// The outer IP + UDP headers with what never changes filled in.
    outer: OuterTemplate,
}

impl TxState {
    pub fn new(t: &TunnelConfig) -> TxState {
        TxState {
            ip_id: 0,
            outer: OuterTemplate::new(t),
        }
    }

    /// The pseudo-header sum of one of the tunnel's outer datagrams of
    /// `udp_len` bytes, from the sum kept with the template (plus the
    /// words of the destination a network's template lacks).
    fn outer_pseudo(&self, udp_len: usize, dst_words: u32) -> Sum {
        Sum::from_words(u64::from(self.outer.fixed_sum) + u64::from(dst_words) + udp_len as u64)
    }
}

/// A tunnel's outer IPv4/IPv6 and UDP headers, built once: addresses,
/// version, protocol, destination port. Per packet, `ip-udp-encap` copies
/// it and writes the rest: lengths, TOS / traffic class, flow label, IPv4
/// identification, DF, TTL, source port. The pseudo-header words that
/// never change are summed here too, so that per packet the IPv4 header
/// checksum adds five words instead of summing twenty bytes, and the outer
/// UDP checksum adds the length instead of summing the addresses.
///
/// It also keeps the tunnel's per-packet settings in the form the node
/// uses them, so that the node reads one small struct per packet rather
/// than the tunnel's configuration.
#[derive(Clone, Copy, Debug)]
struct OuterTemplate {
    bytes: [u8; IPV6_UDP],
    /// 28 (IPv4 + UDP) or 48 (IPv6 + UDP).
    len: usize,
    /// The pseudo-header sum of a datagram of length 0 (addresses,
    /// protocol): per packet, the outer UDP checksum adds the length, and
    /// the IPv4 header checksum adds its five words that vary.
    fixed_sum: u32,
    /// The fixed TTL, or None to copy the inner one.
    ttl: Option<u8>,
    /// The fixed DSCP, or None to copy the inner one.
    dscp: Option<u8>,
    df: DontFragment,
    /// The source-port range: its first port and its size.
    port_lo: u16,
    port_span: u64,
    /// Whether the inner packet may be an Ethernet frame.
    ethernet: bool,
    /// The fields of [`PacketMeta::outer`](crate::buffer::PacketMeta) that
    /// never change: addresses and destination port.
    outer: Outer,
}

/// Outer IPv4 + UDP and IPv6 + UDP header lengths.
const IPV4_UDP: usize = ipv4::HEADER_LEN + udp::HEADER_LEN;
const IPV6_UDP: usize = ipv6::HEADER_LEN + udp::HEADER_LEN;

impl OuterTemplate {
    fn new(t: &TunnelConfig) -> OuterTemplate {
        let mut bytes = [0u8; IPV6_UDP];
        let (len, fixed_sum) = match (t.local, t.remote) {
            (IpAddr::V4(src), IpAddr::V4(dst)) => {
                bytes[ip4::VER_IHL] = 0x45;
                bytes[ip4::PROTOCOL] = PROTO_UDP;
                bytes[ip4::SRC_ADDR].copy_from_slice(&src.octets());
                bytes[ip4::DST_ADDR].copy_from_slice(&dst.octets());
                // Addresses and protocol: a pseudo-header of length 0.
                let fixed = tep_csum::pseudo_header_v4(src.octets(), dst.octets(), PROTO_UDP, 0);
                (IPV4_UDP, u32::from(fixed.value()))
            }
            (src, dst) => {
                let v6 = |a: IpAddr| match a {
                    IpAddr::V6(a) => a.octets(),
                    // The config forbids mixed families.
                    IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
                };
                bytes[ip6::VER_TC_FLOW.start] = 0x60;
                bytes[ip6::NXT_HDR] = PROTO_UDP;
                bytes[ip6::SRC_ADDR].copy_from_slice(&v6(src));
                bytes[ip6::DST_ADDR].copy_from_slice(&v6(dst));
                let fixed = tep_csum::pseudo_header_v6(&v6(src), &v6(dst), PROTO_UDP, 0);
                (IPV6_UDP, u32::from(fixed.value()))
            }
        };
        let u = &mut bytes[len - udp::HEADER_LEN..len];
        u[udpf::DST_PORT].copy_from_slice(&t.remote_port.to_be_bytes());
        let (lo, hi) = t.source_ports;
        OuterTemplate {
            bytes,
            len,
            fixed_sum,
            ttl: match t.ttl {
                Ttl::Inherit => None,
                Ttl::Fixed(v) => Some(v),
            },
            dscp: match t.dscp {
                Dscp::Inherit => None,
                Dscp::Fixed(d) => Some(d),
            },
            df: t.df,
            port_lo: lo,
            // The config keeps lo <= hi.
            port_span: u64::from(hi.saturating_sub(lo)) + 1,
            ethernet: t.kind.carries_ethernet(),
            outer: Outer {
                src: t.local,
                dst: t.remote,
                dst_port: t.remote_port,
                ..Outer::NONE
            },
        }
    }
}

/// Reads TOS, TTL and DF of the inner IP packet (or defaults when the
/// inner is not IP).
fn inner_ip_fields(data: &[u8], inner_l3: usize, has_ip: bool) -> (u8, u8, bool) {
    if !has_ip {
        return (0, 64, false);
    }
    let ip = &data[inner_l3..];
    match ip[0] >> 4 {
        4 => (
            ip[ip4::DSCP_ECN],
            ip[ip4::TTL],
            ip[ip4::FLG_OFF.start] & 0x40 != 0,
        ),
        _ => {
            let tc = ((ip[0] & 0x0f) << 4) | (ip[1] >> 4);
            (tc, ip[ip6::HOP_LIMIT], false)
        }
    }
}

/// Which [`TxState`] a packet's outer headers come from: its tunnel's, or
/// for a packet of an N3 tunnel its session's peer's (kept after the
/// tunnels' in the same slice: index `tunnels + peer`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct TxSelect<'a> {
    pub table: &'a TunnelTable,
    pub sessions: Option<&'a SessionTable>,
    /// A network's template has no destination: the packet's VTEP is
    /// written into it per packet.
    pub overlay: Option<&'a OverlayWorker>,
    /// Per tunnel, the [`TxState`] its packets use: its own, or for a
    /// network the first network's with the same outer settings (one
    /// template for thousands of networks stays in the cache).
    pub tx_of: &'a [u32],
}

impl TxSelect<'_> {
    /// The remote VTEP of a packet of a network (None for others).
    #[inline]
    pub fn vtep(&self, pool: &Pool, id: PacketId) -> Option<IpAddr> {
        let t = pool.meta(id).tunnel;
        self.overlay?.dst(pool, id, t)
    }

    #[inline]
    fn index(&self, pool: &Pool, id: PacketId) -> usize {
        let t = pool.meta(id).tunnel;
        match self.sessions {
            Some(s) if self.table.hot(t).sessions => {
                let (peer, _, _) = s.downlink_header(pool.session(id));
                self.table.tunnels().len().saturating_add(peer as usize)
            }
            _ => self
                .tx_of
                .get(t as usize)
                .map_or(t as usize, |&x| x as usize),
        }
    }
}

/// Per tunnel, the [`TxState`] its packets use (see [`TxSelect::tx_of`]):
/// networks whose outer headers differ only by destination share one.
pub(crate) fn shared_tx(tunnels: &[TunnelConfig]) -> Vec<u32> {
    let key = |t: &TunnelConfig| {
        (
            t.local,
            t.remote_port,
            t.source_ports,
            t.ttl,
            t.dscp,
            t.df,
            t.kind.carries_ethernet(),
        )
    };
    let mut first = std::collections::HashMap::new();
    tunnels
        .iter()
        .enumerate()
        .map(|(i, t)| match t.is_network() {
            true => *first.entry(key(t)).or_insert(i as u32),
            false => i as u32,
        })
        .collect()
}

/// Node `ip-udp-encap`: writes the outer UDP header and the outer IPv4 or
/// IPv6 header: source port from the flow hash inside the tunnel's range,
/// TTL and DSCP per tunnel, ECN copied (RFC 6040 normal mode), DF per
/// tunnel, IPv4 header checksum, IPv6 flow label from the flow hash.
pub(crate) fn ip_udp_encap(
    stats: &mut NodeStats,
    pool: &mut Pool,
    v: &mut PacketVector,
    state: &mut [TxState],
    select: TxSelect<'_>,
    layers: OuterLayers,
) {
    each(stats, pool, v, |pool, id| {
        ip_udp_encap_one(pool, id, state, select, layers)
    });
}

fn ip_udp_encap_one(
    pool: &mut Pool,
    id: PacketId,
    state: &mut [TxState],
    select: TxSelect<'_>,
    layers: OuterLayers,
) -> Result<(), DropReason> {
    let tx = select.index(pool, id);
    let m = pool.meta(id);
    let (inner, inner_l3, flow_hash) = (m.inner, m.inner_l3, m.flow_hash);
    let vtep = select.vtep(pool, id);
    let st = state.get_mut(tx).ok_or(DropReason::NoRoute)?;
    let TxState {
        ip_id,
        outer: template,
    } = st;
    let payload_len = pool.total_len(id);
    let udp_len = payload_len + udp::HEADER_LEN;
    let has_ip = inner_l3 != inner || !template.ethernet;
    let (tos, ttl, df) = inner_ip_fields(pool.data(id), usize::from(inner_l3), has_ip);
    let ttl = template.ttl.unwrap_or(ttl);
    let dscp = template.dscp.unwrap_or(tos >> 2);
    let tos = (dscp << 2) | (tos & 0x03);
    let sport = template.port_lo + ((u64::from(flow_hash) * template.port_span) >> 32) as u16;
    let hdr = template.len;
    let ip_payload_max = if hdr == IPV4_UDP {
        usize::from(u16::MAX) - ipv4::HEADER_LEN
    } else {
        usize::from(u16::MAX)
    };
    if udp_len > ip_payload_max {
        return Err(DropReason::TooBig);
    }
    if layers == OuterLayers::UdpPayload {
        // The socket writes the headers from these fields.
        *pool.outer_mut(id) = Outer {
            src_port: sport,
            tos,
            ttl,
            dst: vtep.unwrap_or(template.outer.dst),
            ..template.outer
        };
        let m = pool.meta_mut(id);
        m.udp_payload = 0;
        m.by_socket = true;
        m.l2 = 0;
        m.l3 = 0;
        m.l4 = 0;
        return Ok(());
    }
    let h = pool.prepend(id, hdr).ok_or(DropReason::TooBig)?;
    // Constant-length copies: no call to memcpy per packet.
    if let Ok(h) = <&mut [u8; IPV4_UDP]>::try_from(&mut *h) {
        *h = *template.bytes.first_chunk().unwrap_or(&[0; IPV4_UDP]);
        let ident = *ip_id;
        *ip_id = ident.wrapping_add(1);
        let df = match template.df {
            DontFragment::Set => true,
            DontFragment::Unset => false,
            DontFragment::Inherit => df,
        };
        let flags: u16 = if df { 0x4000 } else { 0 };
        let total = (udp_len + ipv4::HEADER_LEN) as u16;
        h[ip4::DSCP_ECN] = tos;
        h[ip4::LENGTH].copy_from_slice(&total.to_be_bytes());
        h[ip4::IDENT].copy_from_slice(&ident.to_be_bytes());
        h[ip4::FLG_OFF].copy_from_slice(&flags.to_be_bytes());
        h[ip4::TTL] = ttl;
        // The template's words (addresses, protocol) plus the five that
        // vary: version/IHL/TOS, length, identification, flags, TTL.
        if let Some(IpAddr::V4(a)) = vtep {
            h[ip4::DST_ADDR].copy_from_slice(&a.octets());
        }
        let sum = template.fixed_sum
            + address_words(vtep)
            + (0x4500 | u32::from(tos))
            + u32::from(total)
            + u32::from(ident)
            + u32::from(flags)
            + (u32::from(ttl) << 8);
        let c = Sum::from_words(u64::from(sum)).checksum();
        h[ip4::CHECKSUM].copy_from_slice(&c.to_be_bytes());
        let u = &mut h[ipv4::HEADER_LEN..];
        u[udpf::SRC_PORT].copy_from_slice(&sport.to_be_bytes());
        u[udpf::LENGTH].copy_from_slice(&(udp_len as u16).to_be_bytes());
    } else if let Ok(h) = <&mut [u8; IPV6_UDP]>::try_from(h) {
        *h = template.bytes;
        // RFC 6438: the flow label carries the inner flow's entropy;
        // zero means "no label", so it is avoided.
        let label = match flow_hash & 0xf_ffff {
            0 => 1,
            l => l,
        };
        let w = (6u32 << 28) | (u32::from(tos) << 20) | label;
        h[ip6::VER_TC_FLOW].copy_from_slice(&w.to_be_bytes());
        h[ip6::LENGTH].copy_from_slice(&(udp_len as u16).to_be_bytes());
        h[ip6::HOP_LIMIT] = ttl;
        if let Some(IpAddr::V6(a)) = vtep {
            h[ip6::DST_ADDR].copy_from_slice(&a.octets());
        }
        let u = &mut h[ipv6::HEADER_LEN..];
        u[udpf::SRC_PORT].copy_from_slice(&sport.to_be_bytes());
        u[udpf::LENGTH].copy_from_slice(&(udp_len as u16).to_be_bytes());
    }
    shift(pool, id, hdr);
    // The headers carry the outer fields: `Pool::outer` is left alone.
    let m = pool.meta_mut(id);
    m.udp_payload = hdr as u16;
    m.l2 = 0;
    m.l3 = 0;
    m.l4 = (hdr - udp::HEADER_LEN) as u16;
    Ok(())
}

/// The sum of an address's 16-bit words (0 for none): what a network's
/// template, built without a destination, lacks of the pseudo-header and
/// of the IPv4 header checksum.
#[inline]
fn address_words(a: Option<IpAddr>) -> u32 {
    match a {
        None => 0,
        Some(IpAddr::V4(a)) => {
            let o = a.octets();
            u32::from(u16::from_be_bytes([o[0], o[1]]))
                + u32::from(u16::from_be_bytes([o[2], o[3]]))
        }
        Some(IpAddr::V6(a)) => a.segments().iter().map(|&w| u32::from(w)).sum(),
    }
}

/// What `ip-forward` needs besides the packets: the path MTU and the
/// outer bytes each tunnel adds, where ICMP errors come from and go.
pub(crate) struct Forwarding<'a> {
    pub path_mtu: u32,
    pub added: &'a [u32],
    pub icmp: &'a mut IcmpErrors,
    /// The errors, back out the inner side.
    pub bounced: &'a mut PacketVector,
    pub now_ns: u64,
}

/// Node `ip-forward` (whole frames): a packet is forwarded into its tunnel
/// as a router does. An inner IP packet of an L3 tunnel has its TTL / hop
/// limit decremented (`ttl_expired` when it runs out, with ICMP Time
/// Exceeded to its sender); frames into L2 tunnels are bridged and keep
/// theirs. A packet that would leave larger than the path MTU is dropped
/// (`too_big`) with ICMP Fragmentation Needed / Packet Too Big to its
/// sender, naming the MTU that fits, when it may not be fragmented (IPv6,
/// or IPv4 with DF; tep does not fragment, and an IPv4 packet without DF
/// is dropped without an error).
pub(crate) fn ip_forward(
    stats: &mut NodeStats,
    pool: &mut Pool,
    v: &mut PacketVector,
    table: &TunnelTable,
    f: &mut Forwarding<'_>,
) {
    each(stats, pool, v, |pool, id| {
        let m = *pool.meta(id);
        let l2 = table.kind(m.tunnel).carries_ethernet();
        let l3 = usize::from(m.inner_l3);
        let added = f.added.get(m.tunnel as usize).copied().unwrap_or(0);
        let data = pool.data(id);
        let carried = if l2 { data.len() } else { data.len() - l3 };
        let ip = ethernet_ip(data, l3);
        let error = if !l2 && ip.is_some_and(|ip| ttl_of(ip) <= 1) {
            Some((Some(IcmpError::TimeExceeded), DropReason::TtlExpired))
        } else if f.path_mtu != 0 && carried as u32 + added > f.path_mtu {
            // The inner IP packet that fits: the path MTU less what the
            // tunnel adds and, bridged, the inner link header.
            let fits = f
                .path_mtu
                .saturating_sub(added + if l2 { l3 as u32 } else { 0 });
            let may_fragment = ip.is_some_and(|ip| ip[0] >> 4 == 4 && ip[6] & 0x40 == 0);
            let icmp = (ip.is_some() && !may_fragment).then_some(IcmpError::TooBig(fits));
            Some((icmp, DropReason::TooBig))
        } else {
            None
        };
        if let Some((icmp, reason)) = error {
            if let Some(e) = icmp.and_then(|i| f.icmp.answer(pool, id, l3, i, f.now_ns)) {
                // At most one per packet of the vector.
                f.bounced.put(pool, e);
            }
            return Err(reason);
        }
        if l2 {
            return Ok(());
        }
        decrement_ttl(&mut pool.data_mut(id)[l3..])
    });
}

/// The IP packet at `l3` of a frame, if it carries one.
fn ethernet_ip(data: &[u8], l3: usize) -> Option<&[u8]> {
    data.get(l3..)
        .filter(|ip| ip.len() >= ipv4::HEADER_LEN && matches!(ip[0] >> 4, 4 | 6))
}

/// The TTL / hop limit of the IP header `ip`.
fn ttl_of(ip: &[u8]) -> u8 {
    let at = if ip[0] >> 4 == 6 {
        ip6::HOP_LIMIT
    } else {
        ip4::TTL
    };
    ip.get(at).copied().unwrap_or(0)
}

/// Node `ethernet-encap` (whole frames): the outer Ethernet header to the
/// next hop of each packet's destination, from [`NextHops`]: the tunnel's
/// remote address, or a UPF session's peer (an N3 tunnel has no remote of
/// its own: the outer header names the gNB). A packet whose next hop is
/// not known yet goes to `unresolved` (for the kernel, which resolves it)
/// and the destination is noted for the I/O layer.
pub(crate) fn ethernet_encap(
    pool: &mut Pool,
    v: &mut PacketVector,
    select: TxSelect<'_>,
    next_hops: &mut NextHops,
    unresolved: &mut PacketVector,
) {
    let mut keep = PacketVector::new();
    let mut last = None;
    for &id in v.as_slice() {
        let t = select.table.get(pool.meta(id).tunnel);
        let dst = if t.sessions {
            nexthop::ip_dst(pool.data(id))
        } else {
            select.vtep(pool, id).unwrap_or(t.remote)
        };
        let Some(h) = next_hops.lookup_run(&mut last, dst) else {
            // At most as many as the vector held.
            unresolved.put(pool, id);
            continue;
        };
        // The headroom holds the deepest stack (see HEADROOM).
        nexthop::prepend(pool, id, &h);
        keep.put(pool, id);
    }
    *v = keep;
}

/// Node `udp-checksum`: the outer UDP checksum by the tunnel's mode.
pub(crate) fn udp_checksum(
    pool: &mut Pool,
    v: &mut PacketVector,
    tx: &[TxState],
    select: TxSelect<'_>,
) {
    let table = select.table;
    for &id in v.as_slice() {
        let m = *pool.meta(id);
        let mode = table.checksum(m.tunnel);
        let txi = select.index(pool, id);
        let l4 = usize::from(m.l4);
        let field = l4 + udp::CHECKSUM_OFFSET;
        // A super-packet encapsulated whole (tunnel GSO): its datagrams'
        // checksums are the segmenter's, which starts from the
        // pseudo-header sum (or leaves 0); the inner checksum stays
        // partial in `meta.csum`.
        let whole = m.gso.is_some();
        if mode == ChecksumMode::Zero {
            pool.data_mut(id)[field..][..2].copy_from_slice(&[0, 0]);
            if !whole {
                pool.meta_mut(id).csum = ChecksumState::Zero;
            }
            continue;
        }
        // The datagram goes on past the buffer where a gathered segment's
        // payload is its tail (left in the super-packet): its length and
        // its sum are the whole datagram's.
        let data = pool.data(id);
        let udp_len = match m.tail {
            None => data.len() - l4,
            Some(_) => pool.total_len(id) - l4,
        };
        // ip-udp-encap wrote the outer headers from this tunnel's template.
        let pseudo = match tx.get(txi) {
            Some(st) => st.outer_pseudo(udp_len, address_words(select.vtep(pool, id))),
            None => pseudo_header(data, PROTO_UDP, udp_len),
        };
        let (value, state) = if whole {
            (pseudo.value(), m.csum)
        } else {
            let full = |pool: &Pool| {
                let sum = match m.tail {
                    None => Sum::of(&data[l4..]),
                    Some(_) => pool.sum_from(id, l4),
                };
                pseudo.add(sum).udp_checksum()
            };
            match mode {
                ChecksumMode::Offload => (
                    pseudo.value(),
                    ChecksumState::Partial {
                        start: l4 as u16,
                        offset: field as u16,
                    },
                ),
                ChecksumMode::Lco => {
                    let il4 = usize::from(m.inner_l4);
                    let inner_complete = !matches!(m.csum, ChecksumState::Partial { .. });
                    let inner_len = (udp_len + l4).saturating_sub(il4);
                    let inner_l3 = usize::from(m.inner_l3);
                    // LCO stands for the bytes after the inner transport
                    // header only if they are its segment: a frame's
                    // Ethernet padding after the IP packet is summed.
                    let padded =
                        m.tail.is_none() && il4 != 0 && ip_end(data, inner_l3) != data.len();
                    match transport_pseudo_len(data, inner_l3, il4, m.inner_proto, inner_len) {
                        Some(ip) if inner_complete && !padded => (
                            tep_csum::local_checksum_offload(pseudo, &data[l4..il4], ip),
                            ChecksumState::None,
                        ),
                        _ => (full(pool), ChecksumState::None),
                    }
                }
                ChecksumMode::Zero | ChecksumMode::Full | ChecksumMode::Remote => {
                    (full(pool), ChecksumState::None)
                }
            }
        };
        pool.data_mut(id)[field..][..2].copy_from_slice(&value.to_be_bytes());
        pool.meta_mut(id).csum = state;
    }
}
