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
use crate::kind::TunnelKind;
use crate::node::{each, NodeStats};
use crate::tunnel::{mix, TunnelTable};
use crate::vector::PacketVector;
use core::net::IpAddr;
use tep_csum::Sum;
use tep_wire::ethernet::EtherType;
use tep_wire::gue::{GueFields, GueRepr, RemoteChecksum};
use tep_wire::ip::IpProtocol;
use tep_wire::vxlan::{VxlanRco, VxlanRepr};

/// What the inner side hands the encap path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InnerLink {
    /// IP packets (TUN).
    Ip,
    /// Ethernet frames (TAP).
    Ethernet,
}

/// What classification learns about an inner IP packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpInfo {
    /// Offset of the transport header (0 for a fragment or no transport).
    pub l4: usize,
    /// Its protocol (0 for a fragment: its checksum covers other pieces).
    pub proto: u8,
    /// Where the IP packet ends (its total length).
    pub end: usize,
    /// The inner flow hash.
    pub hash: u32,
    /// DSCP and ECN (the TOS / traffic class byte).
    pub tos: u8,
    /// TTL / hop limit.
    pub ttl: u8,
    /// IPv4 DF.
    pub df: bool,
}

fn finish(h: u64) -> u32 {
    let h = h ^ (h >> 29);
    (h ^ (h >> 32)) as u32
}

/// The transport ports as one word (source high), for the protocols that
/// have them at the start of their header; 0 otherwise.
fn ports_word(data: &[u8], l4: usize, proto: u8) -> u64 {
    match data.get(l4..l4 + 4) {
        Some(&[a, b, c, d]) if matches!(proto, 6 | 17 | 132 | 136) => {
            u64::from(u32::from_be_bytes([a, b, c, d]))
        }
        _ => 0,
    }
}

/// Parses the IP packet at `at` enough to tunnel it: lengths, the
/// transport header, the flow hash (addresses, protocol, ports; fragments
/// without ports so that all pieces hash alike).
pub fn parse_ip(data: &[u8], at: usize) -> Result<IpInfo, DropReason> {
    parse_ip_with_tail(data, at, 0)
}

/// [`parse_ip`] of a packet whose last `tail` bytes are not in `data` (a
/// segment whose payload is its [`crate::buffer::Tail`]): the headers must
/// be in `data`, the lengths may reach into the tail.
pub fn parse_ip_with_tail(data: &[u8], at: usize, tail: usize) -> Result<IpInfo, DropReason> {
    ip_info::<true>(data, at, tail)
}

/// [`parse_ip_with_tail`] without the flow hash (`hash` is 0): what decap
/// and re-routing need, offsets and lengths, at a third of the cost.
pub fn locate_ip(data: &[u8], at: usize, tail: usize) -> Result<IpInfo, DropReason> {
    ip_info::<false>(data, at, tail)
}

fn ip_info<const HASH: bool>(data: &[u8], at: usize, tail: usize) -> Result<IpInfo, DropReason> {
    let p = data.get(at..).ok_or(DropReason::Truncated)?;
    let first = *p.first().ok_or(DropReason::Truncated)?;
    match first >> 4 {
        4 => {
            tep_wire::ipv4::Packet::new_unchecked(p).check_len_with_tail(tail)?;
            // Checked above: the fixed header is here; reading it as one
            // array spares a bounds check per field.
            let h: &[u8; 20] = p.first_chunk().ok_or(DropReason::Truncated)?;
            let ihl = usize::from(h[0] & 0x0f) * 4;
            let total = usize::from(u16::from_be_bytes([h[2], h[3]]));
            let flags_frag = u16::from_be_bytes([h[6], h[7]]);
            // More fragments, or an offset: a piece of a fragmented packet.
            let frag = flags_frag & 0x3fff != 0;
            let proto = if frag { 0 } else { h[9] };
            let l4 = at + ihl;
            let hash = if HASH {
                let addrs =
                    u64::from_be_bytes([h[12], h[13], h[14], h[15], h[16], h[17], h[18], h[19]]);
                let x = mix(0, addrs);
                finish(mix(
                    x,
                    (u64::from(h[9]) << 32) | ports_word(data, l4, proto),
                ))
            } else {
                0
            };
            Ok(IpInfo {
                l4: if frag { 0 } else { l4 },
                proto,
                end: at + total,
                hash,
                tos: h[1],
                ttl: h[8],
                df: flags_frag & 0x4000 != 0,
            })
        }
        6 => {
            let pkt = tep_wire::ipv6::Packet::new_unchecked(p);
            pkt.check_len_with_tail(tail)?;
            let upper = pkt.upper_layer()?;
            let frag = upper.fragment.is_some();
            let proto = if frag { 0 } else { u8::from(upper.protocol) };
            let l4 = at + tep_wire::ipv6::HEADER_LEN + upper.offset;
            let hash = if HASH {
                let mut h = 0;
                for w in p[8..40].chunks_exact(8) {
                    h = mix(h, u64::from_be_bytes(w.try_into().unwrap_or_default()));
                }
                // Label (20 bits), protocol and ports fill one word.
                let rest = (u64::from(pkt.flow_label()) << 40)
                    | (u64::from(u8::from(upper.protocol)) << 32)
                    | ports_word(data, l4, proto);
                finish(mix(h, rest))
            } else {
                0
            };
            Ok(IpInfo {
                l4: if frag { 0 } else { l4 },
                proto,
                end: at + tep_wire::ipv6::HEADER_LEN + usize::from(pkt.payload_len()),
                hash,
                tos: pkt.traffic_class(),
                ttl: pkt.hop_limit(),
                df: true,
            })
        }
        _ => Err(DropReason::NotIp),
    }
}

/// Offset of the IP header inside an Ethernet frame (after up to two VLAN
/// tags), or `None` when the frame does not carry IP.
pub fn ethernet_ip_offset(frame: &[u8]) -> Option<usize> {
    let mut at = 12;
    for _ in 0..3 {
        let ty = u16::from_be_bytes([*frame.get(at)?, *frame.get(at + 1)?]);
        match ty {
            0x8100 | 0x88a8 => at += 4,
            0x0800 | 0x86dd => return Some(at + 2),
            _ => return None,
        }
    }
    None
}

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
            let info = parse_ip_with_tail(data, 0, tail)?;
            if tail == 0 && !pool.truncate(id, info.end) {
                return Err(DropReason::BadLength);
            }
            let m = pool.meta_mut(id);
            m.l2 = 0;
            m.l3 = 0;
            m.inner = 0;
            m.inner_l3 = 0;
            m.inner_l4 = info.l4 as u16;
            m.inner_proto = info.proto;
            m.flow_hash = info.hash;
        }
        InnerLink::Ethernet => {
            if data.len() < 14 {
                return Err(DropReason::Truncated);
            }
            let (l3, l4, proto, hash) = match ethernet_ip_offset(data) {
                Some(l3) => {
                    let info = parse_ip_with_tail(data, l3, tail)?;
                    if info.end > data.len() + tail {
                        return Err(DropReason::BadLength);
                    }
                    (l3, info.l4, info.proto, info.hash)
                }
                None => {
                    let mut h = 0;
                    for w in data[..12].chunks_exact(6) {
                        let mut b = [0u8; 8];
                        b[..6].copy_from_slice(w);
                        h = mix(h, u64::from_be_bytes(b));
                    }
                    (0, 0, 0, finish(h))
                }
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
        let mm = pool.meta_mut(id);
        mm.l3 = 0;
        mm.inner_l3 = 0;
        mm.inner_l4 = if info.l4 == 0 {
            0
        } else {
            (info.l4 - l3) as u16
        };
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
        4 => (
            4u8,
            u128::from(u32::from_be_bytes([data[16], data[17], data[18], data[19]])),
        ),
        _ => {
            let mut a = [0u8; 16];
            a.copy_from_slice(&data[24..40]);
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
        let (tunnel, proto) = (m.tunnel, m.inner_proto);
        let t = table.get(tunnel);
        if t.checksum == ChecksumMode::Remote && rco_encodable(t.kind, start, offset) {
            return Ok(());
        }
        let (s, o) = (usize::from(start), usize::from(offset));
        if o + 2 > pool.data(id).len() || s > o || o & 1 != (s & 1) {
            return Err(DropReason::Malformed);
        }
        // A gathered segment's payload is its tail.
        let sum = pool.sum_from(id, s);
        let data = pool.data_mut(id);
        // RFC 768: UDP sends a computed 0 as all ones.
        let c = if o - s == 6 && proto == 17 {
            sum.udp_checksum()
        } else {
            sum.checksum()
        };
        data[o..o + 2].copy_from_slice(&c.to_be_bytes());
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

    /// Whether the kind has no header (FOU IPIP/SIT).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
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
        TunnelKind::GreInUdp | TunnelKind::FouGre => {
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

/// Node `<kind>-encap`: writes the tunnel header in front of each inner
/// packet of a vector of one kind.
pub fn tunnel_encap(
    stats: &mut NodeStats,
    pool: &mut Pool,
    v: &mut PacketVector,
    table: &TunnelTable,
    templates: &[HeaderTemplate],
) {
    each(stats, pool, v, |pool, id| {
        tunnel_encap_one(pool, id, table, templates)
    });
}

fn tunnel_encap_one(
    pool: &mut Pool,
    id: PacketId,
    table: &TunnelTable,
    templates: &[HeaderTemplate],
) -> Result<(), DropReason> {
    let m = *pool.meta(id);
    let t = table.get(m.tunnel);
    let tpl = &templates[m.tunnel as usize];
    // With its tail: a segment whose payload stays in the super-packet.
    let payload_len = pool.total_len(id);
    let inner_v6 = !t.kind.carries_ethernet() && pool.data(id)[0] >> 4 == 6;
    let n = tpl.len();
    if t.kind == TunnelKind::Gtpu
        && payload_len + n - tep_wire::gtpu::HEADER_LEN > usize::from(u16::MAX)
    {
        return Err(DropReason::TooBig);
    }
    if let ChecksumState::Partial { start, offset } = m.csum {
        // Remote checksum offload (the inner-checksum node kept it partial
        // only where the header can carry it): a header of its own.
        let mut buf = [0u8; MAX_TUNNEL_HEADER];
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
    match t.kind {
        TunnelKind::Gtpu => {
            let len = (n - tep_wire::gtpu::HEADER_LEN + payload_len) as u16;
            h[2..4].copy_from_slice(&len.to_be_bytes());
        }
        TunnelKind::GreInUdp | TunnelKind::FouGre if inner_v6 => {
            h[2..4].copy_from_slice(&0x86ddu16.to_be_bytes());
        }
        TunnelKind::Gue if inner_v6 && n > 1 => h[1] = 41,
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
    /// `udp_len` bytes, from the sum kept with the template.
    fn outer_pseudo(&self, udp_len: usize) -> Sum {
        Sum::from_words(u64::from(self.outer.fixed_sum) + udp_len as u64)
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
    bytes: [u8; 48],
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
}

impl OuterTemplate {
    fn new(t: &TunnelConfig) -> OuterTemplate {
        let mut bytes = [0u8; 48];
        let (len, fixed_sum) = match (t.local, t.remote) {
            (IpAddr::V4(src), IpAddr::V4(dst)) => {
                bytes[0] = 0x45;
                bytes[9] = 17;
                bytes[12..16].copy_from_slice(&src.octets());
                bytes[16..20].copy_from_slice(&dst.octets());
                // Addresses and protocol: a pseudo-header of length 0.
                let fixed = tep_csum::pseudo_header_v4(src.octets(), dst.octets(), 17, 0);
                (28, u32::from(fixed.value()))
            }
            (src, dst) => {
                let v6 = |a: IpAddr| match a {
                    IpAddr::V6(a) => a.octets(),
                    // The config forbids mixed families.
                    IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
                };
                bytes[0] = 0x60;
                bytes[6] = 17;
                bytes[8..24].copy_from_slice(&v6(src));
                bytes[24..40].copy_from_slice(&v6(dst));
                let fixed = tep_csum::pseudo_header_v6(&v6(src), &v6(dst), 17, 0);
                (48, u32::from(fixed.value()))
            }
        };
        bytes[len - 6..len - 4].copy_from_slice(&t.remote_port.to_be_bytes());
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
        }
    }
}

/// Reads TOS, TTL and DF of the inner IP packet (or defaults when the
/// inner is not IP).
fn inner_ip_fields(data: &[u8], inner_l3: usize, has_ip: bool) -> (u8, u8, bool) {
    if !has_ip {
        return (0, 64, false);
    }
    match data[inner_l3] >> 4 {
        4 => (
            data[inner_l3 + 1],
            data[inner_l3 + 8],
            data[inner_l3 + 6] & 0x40 != 0,
        ),
        _ => {
            let tc = ((data[inner_l3] & 0x0f) << 4) | (data[inner_l3 + 1] >> 4);
            (tc, data[inner_l3 + 7], false)
        }
    }
}

/// Node `ip-udp-encap`: writes the outer UDP header and the outer IPv4 or
/// IPv6 header: source port from the flow hash inside the tunnel's range,
/// TTL and DSCP per tunnel, ECN copied (RFC 6040 normal mode), DF per
/// tunnel, IPv4 header checksum, IPv6 flow label from the flow hash.
pub fn ip_udp_encap(
    stats: &mut NodeStats,
    pool: &mut Pool,
    v: &mut PacketVector,
    state: &mut [TxState],
) {
    each(stats, pool, v, |pool, id| ip_udp_encap_one(pool, id, state));
}

fn ip_udp_encap_one(
    pool: &mut Pool,
    id: PacketId,
    state: &mut [TxState],
) -> Result<(), DropReason> {
    let m = pool.meta(id);
    let (tunnel, inner, inner_l3, flow_hash) = (m.tunnel, m.inner, m.inner_l3, m.flow_hash);
    let st = state.get_mut(tunnel as usize).ok_or(DropReason::NoRoute)?;
    let TxState {
        ip_id,
        outer: template,
    } = st;
    let udp_len = pool.total_len(id) + 8;
    let has_ip = inner_l3 != inner || !template.ethernet;
    let (tos, ttl, df) = inner_ip_fields(pool.data(id), usize::from(inner_l3), has_ip);
    let ttl = template.ttl.unwrap_or(ttl);
    let dscp = template.dscp.unwrap_or(tos >> 2);
    let tos = (dscp << 2) | (tos & 0x03);
    let sport = template.port_lo + ((u64::from(flow_hash) * template.port_span) >> 32) as u16;
    let hdr = template.len;
    if udp_len > usize::from(u16::MAX) || (hdr == 28 && udp_len + 20 > usize::from(u16::MAX)) {
        return Err(DropReason::TooBig);
    }
    let h = pool.prepend(id, hdr).ok_or(DropReason::TooBig)?;
    // Constant-length copies: no call to memcpy per packet.
    if let Ok(h) = <&mut [u8; 28]>::try_from(&mut *h) {
        *h = *template.bytes.first_chunk().unwrap_or(&[0; 28]);
        let ident = *ip_id;
        *ip_id = ident.wrapping_add(1);
        let df = match template.df {
            DontFragment::Set => true,
            DontFragment::Unset => false,
            DontFragment::Inherit => df,
        };
        let flags: u16 = if df { 0x4000 } else { 0 };
        let total = (udp_len + 20) as u16;
        h[1] = tos;
        h[2..4].copy_from_slice(&total.to_be_bytes());
        h[4..6].copy_from_slice(&ident.to_be_bytes());
        h[6..8].copy_from_slice(&flags.to_be_bytes());
        h[8] = ttl;
        // The template's words (addresses, protocol) plus the five that
        // vary: version/IHL/TOS, length, identification, flags, TTL.
        let sum = template.fixed_sum
            + (0x4500 | u32::from(tos))
            + u32::from(total)
            + u32::from(ident)
            + u32::from(flags)
            + (u32::from(ttl) << 8);
        let c = Sum::from_words(u64::from(sum)).checksum();
        h[10..12].copy_from_slice(&c.to_be_bytes());
        h[20..22].copy_from_slice(&sport.to_be_bytes());
        h[24..26].copy_from_slice(&(udp_len as u16).to_be_bytes());
    } else if let Ok(h) = <&mut [u8; 48]>::try_from(h) {
        *h = template.bytes;
        // RFC 6438: the flow label carries the inner flow's entropy;
        // zero means "no label", so it is avoided.
        let label = match flow_hash & 0xf_ffff {
            0 => 1,
            l => l,
        };
        let w = (6u32 << 28) | (u32::from(tos) << 20) | label;
        h[0..4].copy_from_slice(&w.to_be_bytes());
        h[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
        h[7] = ttl;
        h[40..42].copy_from_slice(&sport.to_be_bytes());
        h[44..46].copy_from_slice(&(udp_len as u16).to_be_bytes());
    }
    shift(pool, id, hdr);
    let m = pool.meta_mut(id);
    m.l2 = 0;
    m.l3 = 0;
    m.l4 = (hdr - 8) as u16;
    Ok(())
}

/// The pseudo-header sum of the outer UDP datagram (IP header at 0, UDP
/// at `l4`, to the end of `data`).
pub(crate) fn outer_pseudo(data: &[u8], l4: usize) -> Sum {
    let len = data.len() - l4;
    if data[0] >> 4 == 4 {
        let mut s = [0u8; 4];
        let mut d = [0u8; 4];
        s.copy_from_slice(&data[12..16]);
        d.copy_from_slice(&data[16..20]);
        tep_csum::pseudo_header_v4(s, d, 17, len as u16)
    } else {
        let mut s = [0u8; 16];
        let mut d = [0u8; 16];
        s.copy_from_slice(&data[8..24]);
        d.copy_from_slice(&data[24..40]);
        tep_csum::pseudo_header_v6(&s, &d, 17, len as u32)
    }
}

/// The pseudo-header sum of the inner transport header for local checksum
/// offload, or `None` when the inner packet has no checksum that covers it
/// (not TCP/UDP/ICMP, a fragment, or a UDP checksum of zero).
pub fn inner_pseudo(data: &[u8], l3: usize, l4: usize, proto: u8) -> Option<Sum> {
    if l4 == 0 {
        return None;
    }
    let len = data.len() - l4;
    match proto {
        6 | 58 => {}
        17 => {
            if data.get(l4 + 6..l4 + 8)? == [0, 0] {
                return None;
            }
        }
        // ICMPv4 sums no pseudo-header.
        1 => return Some(Sum::from_value(0)),
        _ => return None,
    }
    if data[l3] >> 4 == 4 {
        let mut s = [0u8; 4];
        let mut d = [0u8; 4];
        s.copy_from_slice(&data[l3 + 12..l3 + 16]);
        d.copy_from_slice(&data[l3 + 16..l3 + 20]);
        Some(tep_csum::pseudo_header_v4(s, d, proto, len as u16))
    } else {
        let mut s = [0u8; 16];
        let mut d = [0u8; 16];
        s.copy_from_slice(&data[l3 + 8..l3 + 24]);
        d.copy_from_slice(&data[l3 + 24..l3 + 40]);
        Some(tep_csum::pseudo_header_v6(&s, &d, proto, len as u32))
    }
}

/// Whether the inner TCP/UDP checksum field holds just its pseudo-header
/// sum: the partial form (CHECKSUM_PARTIAL) a Linux sender on this host
/// leaves, which veth never completes. `data` ends where the transport
/// segment ends. 0 and 0xffff are the same one's-complement sum. A
/// corrupted packet whose field happens to hold that value passes: one in
/// 65536, what the checksum itself lets through.
pub fn holds_pseudo_sum(data: &[u8], l3: usize, l4: usize, proto: u8) -> bool {
    let Some(field) = transport_checksum_offset(proto) else {
        return false;
    };
    let ip_len = match data.get(l3).map(|b| b >> 4) {
        Some(4) => 20,
        Some(6) => 40,
        _ => return false,
    };
    let Some(f) = data.get(l4 + field..l4 + field + 2) else {
        return false;
    };
    if l4 < l3 + ip_len {
        return false;
    }
    let Some(p) = inner_pseudo(data, l3, l4, proto) else {
        return false;
    };
    let (v, p) = (u16::from_be_bytes([f[0], f[1]]), p.value());
    v == p || (v, p) == (0, 0xffff) || (v, p) == (0xffff, 0)
}

/// Where the checksum field of a TCP (6) or UDP (17) header is, from the
/// header's start; None for other protocols.
pub fn transport_checksum_offset(proto: u8) -> Option<usize> {
    match proto {
        6 => Some(tep_wire::tcp::CHECKSUM_OFFSET),
        17 => Some(tep_wire::udp::CHECKSUM_OFFSET),
        _ => None,
    }
}

/// Node `udp-checksum`: the outer UDP checksum by the tunnel's mode.
pub fn udp_checksum(pool: &mut Pool, v: &mut PacketVector, table: &TunnelTable, tx: &[TxState]) {
    for &id in v.as_slice() {
        let m = *pool.meta(id);
        let mode = table.get(m.tunnel).checksum;
        let l4 = usize::from(m.l4);
        let data = pool.data_mut(id);
        if mode == ChecksumMode::Zero {
            data[l4 + 6..l4 + 8].copy_from_slice(&[0, 0]);
            pool.meta_mut(id).csum = ChecksumState::Zero;
            continue;
        }
        // ip-udp-encap wrote the outer headers from this tunnel's template.
        let pseudo = match tx.get(m.tunnel as usize) {
            Some(st) => st.outer_pseudo(data.len() - l4),
            None => outer_pseudo(data, l4),
        };
        let (value, state) = match mode {
            ChecksumMode::Zero => (0, ChecksumState::Zero),
            ChecksumMode::Offload => (
                pseudo.value(),
                ChecksumState::Partial {
                    start: l4 as u16,
                    offset: (l4 + 6) as u16,
                },
            ),
            ChecksumMode::Lco => {
                let il4 = usize::from(m.inner_l4);
                let inner_complete = !matches!(m.csum, ChecksumState::Partial { .. });
                match inner_pseudo(data, usize::from(m.inner_l3), il4, m.inner_proto) {
                    Some(ip) if inner_complete => (
                        tep_csum::local_checksum_offload(pseudo, &data[l4..il4], ip),
                        ChecksumState::None,
                    ),
                    _ => (
                        pseudo.add(Sum::of(&data[l4..])).udp_checksum(),
                        ChecksumState::None,
                    ),
                }
            }
            ChecksumMode::Full | ChecksumMode::Remote => (
                pseudo.add(Sum::of(&data[l4..])).udp_checksum(),
                ChecksumState::None,
            ),
        };
        data[l4 + 6..l4 + 8].copy_from_slice(&value.to_be_bytes());
        pool.meta_mut(id).csum = state;
    }
}
