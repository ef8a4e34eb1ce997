//! Segmentation offload in software: super-packets (TSO from a TUN, or
//! what [`crate::gro`] built) cut into wire-sized segments, and UDP GSO
//! trains (`UDP_SEGMENT`) built from, and split back into, datagrams.
//!
//! # Conventions (shared with [`crate::gro`])
//! - A packet is an IPv4 or IPv6 packet at the data start. Every packet
//!   these functions output has `meta.l3 = 0` and `meta.l4` = the IP header
//!   length, IPv4 options and IPv6 extension headers included.
//! - A super-packet has `meta.gso = Some(..)`, IP and UDP length fields for
//!   its whole length (IPv6: payload length ≤ 65535, no jumbograms), a valid
//!   IPv4 header checksum, and its transport checksum in the partial form
//!   (virtio-net NEEDS_CSUM, Linux CHECKSUM_PARTIAL): the field holds the
//!   folded pseudo-header sum over the full transport length and
//!   `meta.csum = Partial { start: l4, offset: l4 + 16 (TCP) / l4 + 6 (UDP) }`.
//!   [`segment`] ignores that field and computes every segment's checksum
//!   from the addresses, so a super-packet whose field is already complete
//!   segments just as well.
//! - A UDP GSO train ([`build_udp_train`]) is different: its IP and UDP
//!   length fields describe the first datagram only, as in the template the
//!   kernel's `UDP_SEGMENT` send builds, and its length is the buffer's.
//!
//! # Cost
//! No allocation per packet: output buffers come from [`Pool::alloc`]. Each
//! segment is one copy of its bytes and one checksum pass over its
//! transport bytes (while they are in cache). The pool can neither grow a
//! buffer at its end nor lend two buffers at once, so [`write_packet`]
//! builds each output in a per-thread scratch buffer and stores it with
//! [`Pool::fill`]: one more memcpy per byte, which goes away when the pool
//! offers an append and a two-buffer borrow.

use core::cell::RefCell;

use tep_csum::{pseudo_header_v4, pseudo_header_v6, Sum};
use tep_wire::tcp::TcpFlags;
use tep_wire::{ipv4, ipv6, tcp, udp, IpProtocol};

use crate::buffer::{ChecksumState, Gso, GsoKind, PacketId, Pool, SUPER_PACKET_ROOM};
use crate::drop::DropReason;
use crate::vector::{PacketVector, VECTOR_SIZE};

/// Most datagrams in one UDP GSO train. Linux's `UDP_MAX_SEGMENTS`
/// (include/linux/udp.h) was `1 << 6` from `UDP_SEGMENT`'s introduction
/// (bec1f6f69736, "udp: generate gso with UDP_SEGMENT", 4.18) and became
/// `1 << 7` in 1382e3b6a350 ("net: change maximum number of UDP segments to
/// 128", 2024, backported to stable); `udp_send_skb` refuses more with
/// EINVAL. 64 is what every kernel with `UDP_SEGMENT` accepts.
pub const UDP_MAX_SEGMENTS: usize = 64;

/// Offset of the TCP checksum in the TCP header.
pub(crate) const TCP_CSUM: usize = tcp::CHECKSUM_OFFSET;
/// Offset of the UDP checksum in the UDP header.
pub(crate) const UDP_CSUM: usize = udp::CHECKSUM_OFFSET;
/// The largest IPv4 total length; also the GRO limit on a whole packet.
pub(crate) const MAX_IP_LEN: usize = 65535;

const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;

thread_local! {
    static SCRATCH: RefCell<Box<[u8]>> =
        RefCell::new(vec![0; SUPER_PACKET_ROOM].into_boxed_slice());
}

/// Stores `len` bytes made by `build` (which may read the pool) as the
/// whole content of `dst`. The caller has checked `len` against the data
/// room. The bytes are built in a per-thread scratch buffer, allocated once
/// (see the module's "Cost").
pub(crate) fn write_packet(
    pool: &mut Pool,
    dst: PacketId,
    len: usize,
    build: impl FnOnce(&Pool, &mut [u8]),
) {
    SCRATCH.with(|cell| {
        let mut scratch = cell.borrow_mut();
        if scratch.len() < len {
            // Only for pools with a data room above SUPER_PACKET_ROOM.
            *scratch = vec![0; len].into_boxed_slice();
        }
        let buf = &mut scratch[..len];
        build(pool, buf);
        let stored = pool.fill(dst, buf);
        debug_assert!(stored, "callers check the data room");
    });
}

/// The transport pseudo-header sum without the length, which is added per
/// segment (`.add_u16(len)`: for IPv6 the upper 16 bits of the 32-bit length
/// are zero). `data` starts with a checked IP header.
pub(crate) fn pseudo_base(data: &[u8], v6: bool, protocol: u8) -> Sum {
    if v6 {
        let (mut src, mut dst) = ([0u8; 16], [0u8; 16]);
        src.copy_from_slice(&data[8..24]);
        dst.copy_from_slice(&data[24..40]);
        pseudo_header_v6(&src, &dst, protocol, 0)
    } else {
        let (mut src, mut dst) = ([0u8; 4], [0u8; 4]);
        src.copy_from_slice(&data[12..16]);
        dst.copy_from_slice(&data[16..20]);
        pseudo_header_v4(src, dst, protocol, 0)
    }
}

/// Writes the IP length of a packet of `len` bytes in `buf` (its header
/// checked): IPv4 total length, identification if given, and the header
/// checksum; IPv6 payload length.
pub(crate) fn set_ip_len(buf: &mut [u8], v6: bool, len: usize, ident: Option<u16>) {
    if v6 {
        ipv6::Packet::new_unchecked(buf).set_payload_len((len - ipv6::HEADER_LEN) as u16);
    } else {
        let mut p = ipv4::Packet::new_unchecked(buf);
        p.set_total_len(len as u16);
        if let Some(id) = ident {
            p.set_ident(id);
        }
        p.fill_checksum();
    }
}

/// An IP header as far as segmentation cares.
#[derive(Clone, Copy, Debug)]
struct Ip {
    v6: bool,
    /// Transport offset: header length with options / extension headers.
    l4: usize,
    /// End of the IP packet by its length field (≤ the buffer's length).
    end: usize,
    protocol: IpProtocol,
    fragment: bool,
}

fn parse_ip(data: &[u8]) -> Result<Ip, DropReason> {
    match data.first().map(|b| b >> 4) {
        None => Err(DropReason::Truncated),
        Some(4) => {
            let p = ipv4::Packet::new_checked(data)?;
            Ok(Ip {
                v6: false,
                l4: p.header_len(),
                end: p.total_len() as usize,
                protocol: p.protocol(),
                fragment: p.is_fragment(),
            })
        }
        Some(6) => {
            let p = ipv6::Packet::new_checked(data)?;
            let upper = p.upper_layer()?;
            Ok(Ip {
                v6: true,
                l4: ipv6::HEADER_LEN + upper.offset,
                end: ipv6::HEADER_LEN + p.payload_len() as usize,
                protocol: upper.protocol,
                fragment: upper.fragment.is_some(),
            })
        }
        Some(_) => Err(DropReason::NotIp),
    }
}

/// Whether an IPv6 routing header still has segments left. The
/// pseudo-header then names the final destination, which sits in the
/// routing header (RFC 8200 §8.1); tep does not dig it out and refuses to
/// compute such checksums.
fn routing_pending(data: &[u8], ip: &Ip) -> bool {
    if !ip.v6 {
        return false;
    }
    let mut next = data[6];
    let mut at = ipv6::HEADER_LEN;
    while at < ip.l4 {
        // Lengths were checked by `upper_layer`; `get` keeps this total.
        let Some(h) = data.get(at..at + 4) else {
            return true;
        };
        if next == u8::from(IpProtocol::Ipv6Route) && h[3] != 0 {
            return true;
        }
        at += match IpProtocol::from(next) {
            IpProtocol::Ah => (h[1] as usize + 2) * 4,
            IpProtocol::Ipv6Frag => 8,
            _ => (h[1] as usize + 1) * 8,
        };
        next = h[0];
    }
    false
}

/// Where the headers of a packet to cut end.
#[derive(Clone, Copy, Debug)]
struct Layout {
    v6: bool,
    tcp: bool,
    l4: usize,
    /// Transport header length (TCP with options, or UDP's 8).
    th: usize,
}

impl Layout {
    fn csum_at(&self) -> usize {
        self.l4 + if self.tcp { TCP_CSUM } else { UDP_CSUM }
    }

    fn protocol(&self) -> u8 {
        if self.tcp {
            PROTO_TCP
        } else {
            PROTO_UDP
        }
    }
}

/// Checks a super-packet of `kind`: one whole IP packet (no padding: a
/// buffer longer than its IP length is a train, not a super-packet), not a
/// fragment, the transport `kind` names, a UDP length for the whole
/// datagram.
fn super_layout(data: &[u8], kind: GsoKind) -> Result<Layout, DropReason> {
    let ip = parse_ip(data)?;
    if ip.fragment {
        return Err(DropReason::Fragment);
    }
    if ip.end != data.len() {
        return Err(DropReason::BadLength);
    }
    let tcp = match (kind, ip.v6, ip.protocol) {
        (GsoKind::Tcp4, false, IpProtocol::Tcp) | (GsoKind::Tcp6, true, IpProtocol::Tcp) => true,
        (GsoKind::Udp, _, IpProtocol::Udp) => false,
        _ => return Err(DropReason::Malformed),
    };
    let transport = &data[ip.l4..];
    let th = if tcp {
        tcp::Packet::new_checked(transport)?.header_len()
    } else {
        udp_header(transport)?
    };
    if routing_pending(data, &ip) {
        return Err(DropReason::Unsupported);
    }
    Ok(Layout {
        v6: ip.v6,
        tcp,
        l4: ip.l4,
        th,
    })
}

/// Checks a UDP header whose length field covers exactly `transport`.
fn udp_header(transport: &[u8]) -> Result<usize, DropReason> {
    let u = udp::Packet::new_checked(transport)?;
    if u.len() as usize != transport.len() {
        return Err(DropReason::BadLength);
    }
    Ok(udp::HEADER_LEN)
}

/// Checks one whole UDP datagram (IP length = buffer length), or, with
/// `train`, the first datagram of a train (the buffer goes on). Returns the
/// layout and the IP packet's end.
fn udp_layout(data: &[u8], train: bool) -> Result<(Layout, usize), DropReason> {
    let ip = parse_ip(data)?;
    if ip.fragment {
        return Err(DropReason::Fragment);
    }
    if ip.protocol != IpProtocol::Udp {
        return Err(DropReason::Malformed);
    }
    if !train && ip.end != data.len() {
        return Err(DropReason::BadLength);
    }
    udp_header(&data[ip.l4..ip.end])?;
    let lay = Layout {
        v6: ip.v6,
        tcp: false,
        l4: ip.l4,
        th: udp::HEADER_LEN,
    };
    Ok((lay, ip.end))
}

/// Splits super-packet `id` into segments of `meta.gso.segment_size`
/// payload bytes, each a new buffer pushed to `out`; returns how many and
/// frees `id`.
///
/// Every segment has its own IP length (IPv4: identification + i and the
/// header checksum; IPv6: payload length), TCP sequence number (CWR only on
/// the first segment, FIN and PSH only on the last, as Linux's
/// `tcp_gso_segment`) or UDP length, and a complete transport checksum:
/// `meta.csum = None`, `meta.gso = None`, `flow_hash` and `tunnel` copied.
///
/// A packet without `meta.gso`, or whose payload fits one segment, is
/// pushed as it is, normalised: a partial checksum is completed (over
/// `start` to the IP end; 0 is sent as 0xffff, as Linux's
/// `skb_checksum_help`), `gso` cleared, `l3`/`l4` set. Without `meta.gso`
/// any IP packet passes (fragments too); with it the checksum is computed
/// afresh as for a segment.
///
/// Errors, with `id` untouched and nothing allocated: `TooBig` when `out`
/// has no room for every segment, `NoBuffer` when the pool has too few
/// buffers, `Fragment`, `Unsupported` (an IPv6 routing header with segments
/// left), and `Truncated` / `BadLength` / `BadVersion` / `Malformed` /
/// `NotIp` for malformed packets (`BadLength` also for a buffer longer than
/// its IP length: a train goes to [`split_udp_train`]).
pub fn segment(pool: &mut Pool, id: PacketId, out: &mut PacketVector) -> Result<usize, DropReason> {
    let Some(gso) = pool.meta(id).gso else {
        return normalise(pool, id, out);
    };
    if gso.segment_size == 0 {
        return Err(DropReason::Malformed);
    }
    let data = pool.data(id);
    let lay = super_layout(data, gso.kind)?;
    let payload = data.len() - lay.l4 - lay.th;
    let seg = gso.segment_size as usize;
    if payload > seg {
        return emit(pool, id, out, lay, seg, false);
    }
    if out.is_full() {
        return Err(DropReason::TooBig);
    }
    let data = pool.data_mut(id);
    let len = data.len();
    set_ip_len(data, lay.v6, len, None);
    fill_transport_checksum(data, &lay, len);
    finish_meta(pool, id, &lay, ChecksumState::None);
    push(pool, out, id);
    Ok(1)
}

/// The no-split path of [`segment`] for a packet without `meta.gso`.
fn normalise(pool: &mut Pool, id: PacketId, out: &mut PacketVector) -> Result<usize, DropReason> {
    let ip = parse_ip(pool.data(id))?;
    if out.is_full() {
        return Err(DropReason::TooBig);
    }
    let mut csum = pool.meta(id).csum;
    if let ChecksumState::Partial { start, offset } = csum {
        let (start, offset) = (start as usize, offset as usize);
        if start > offset || offset + 2 > ip.end {
            return Err(DropReason::Malformed);
        }
        // The field holds the pseudo-header sum: summing it in completes it.
        let data = pool.data_mut(id);
        let c = Sum::of(&data[start..ip.end]).udp_checksum();
        data[offset..offset + 2].copy_from_slice(&c.to_be_bytes());
        csum = ChecksumState::None;
    }
    let meta = pool.meta_mut(id);
    meta.l3 = 0;
    meta.l4 = ip.l4 as u16;
    meta.csum = csum;
    push(pool, out, id);
    Ok(1)
}

/// Zeroes and fills the transport checksum of a `len`-byte packet.
fn fill_transport_checksum(buf: &mut [u8], lay: &Layout, len: usize) {
    let at = lay.csum_at();
    buf[at..at + 2].fill(0);
    let sum = pseudo_base(buf, lay.v6, lay.protocol())
        .add_u16((len - lay.l4) as u16)
        .add(Sum::of(&buf[lay.l4..len]));
    let c = if lay.tcp {
        sum.checksum()
    } else {
        sum.udp_checksum()
    };
    buf[at..at + 2].copy_from_slice(&c.to_be_bytes());
}

fn finish_meta(pool: &mut Pool, id: PacketId, lay: &Layout, csum: ChecksumState) {
    let meta = pool.meta_mut(id);
    meta.l3 = 0;
    meta.l4 = lay.l4 as u16;
    meta.csum = csum;
    meta.gso = None;
}

/// Pushes a packet the caller checked room for.
fn push(pool: &mut Pool, out: &mut PacketVector, id: PacketId) {
    if out.push(id).is_err() {
        // Unreachable: every caller checks the room first.
        debug_assert!(false, "no room in the output vector");
        pool.free(id);
    }
}

/// Cuts the payload after `lay`'s headers in `id` into pieces of `seg`
/// bytes (the last shorter), each a new packet with the headers of `id`
/// fixed up, pushed to `out`; frees `id`. `keep_zero` writes no checksum
/// (a train whose template says "none").
fn emit(
    pool: &mut Pool,
    id: PacketId,
    out: &mut PacketVector,
    lay: Layout,
    seg: usize,
    keep_zero: bool,
) -> Result<usize, DropReason> {
    let hdr = lay.l4 + lay.th;
    let payload = pool.data(id).len() - hdr;
    let n = payload.div_ceil(seg).max(1);
    if n > VECTOR_SIZE - out.len() {
        return Err(DropReason::TooBig);
    }
    if n > pool.available() {
        return Err(DropReason::NoBuffer);
    }
    let mut ids = [None; VECTOR_SIZE];
    for slot in &mut ids[..n] {
        *slot = pool.alloc();
    }
    if ids[..n].iter().any(Option::is_none) {
        // Unreachable after the check above; kept total.
        ids[..n].iter().flatten().for_each(|&s| pool.free(s));
        return Err(DropReason::NoBuffer);
    }

    let meta = *pool.meta(id);
    let data = pool.data(id);
    let ident = if lay.v6 {
        0
    } else {
        ipv4::Packet::new_unchecked(data).ident()
    };
    let (seq, flags) = if lay.tcp {
        let t = tcp::Packet::new_unchecked(&data[lay.l4..]);
        (t.seq_number(), t.flags())
    } else {
        (0, TcpFlags::empty())
    };
    let csum = if keep_zero {
        ChecksumState::Zero
    } else {
        ChecksumState::None
    };

    for (i, s) in ids[..n].iter().flatten().copied().enumerate() {
        let off = i * seg;
        let chunk = seg.min(payload - off);
        let len = hdr + chunk;
        write_packet(pool, s, len, |pool, buf| {
            let src = pool.data(id);
            buf[..hdr].copy_from_slice(&src[..hdr]);
            buf[hdr..].copy_from_slice(&src[hdr + off..hdr + off + chunk]);
            set_ip_len(buf, lay.v6, len, Some(ident.wrapping_add(i as u16)));
            let transport = &mut buf[lay.l4..];
            if lay.tcp {
                let mut t = tcp::Packet::new_unchecked(transport);
                t.set_seq_number(seq.wrapping_add(off as u32));
                let mut f = flags;
                if i > 0 {
                    f.remove(TcpFlags::CWR);
                }
                if i + 1 < n {
                    f.remove(TcpFlags::FIN | TcpFlags::PSH);
                }
                t.set_flags(f);
            } else {
                udp::Packet::new_unchecked(transport).set_len((len - lay.l4) as u16);
            }
            if !keep_zero {
                fill_transport_checksum(buf, &lay, len);
            }
        });
        let m = pool.meta_mut(s);
        m.flow_hash = meta.flow_hash;
        m.tunnel = meta.tunnel;
        finish_meta(pool, s, &lay, csum);
        push(pool, out, s);
    }
    pool.free(id);
    Ok(n)
}

/// Whether two IP headers of length `l4` differ only in what differs
/// between the datagrams of one train: IPv4 total length, identification
/// and header checksum; IPv6 payload length.
fn same_ip_template(a: &[u8], b: &[u8], l4: usize, v6: bool) -> bool {
    if v6 {
        a[..4] == b[..4] && a[6..l4] == b[6..l4]
    } else {
        a[..2] == b[..2] && a[6..10] == b[6..10] && a[12..l4] == b[12..l4]
    }
}

/// Builds a UDP GSO train for one `UDP_SEGMENT` send from the complete
/// datagrams `ids` (outer tunnel traffic), and frees them.
///
/// The datagrams must share everything the socket fixes: IP version,
/// addresses, ports, TOS / traffic class and flow label, TTL / hop limit,
/// IPv4 flags and options (IPv6 extension headers), whether the UDP
/// checksum is zero, and `meta.csum` (all equal: None, Verified, Zero, or
/// Partial at the same offsets). Every UDP payload but the last has the
/// first one's length (≥ 1); the last is not longer and not empty. IPv4
/// identifications after the first are not kept: [`split_udp_train`]
/// numbers the datagrams first + i, as the kernel's segmentation does.
/// Checksums are not verified: the kernel computes them for a
/// `UDP_SEGMENT` send, and the split writes correct ones.
///
/// The train is the first datagram as it is followed by the other UDP
/// payloads, so its IP and UDP lengths describe the first datagram (the
/// template). `meta.gso = Some(Gso { kind: Udp, segment_size: first
/// payload length })`; `csum`, `flow_hash` and `tunnel` come from the first
/// datagram.
///
/// A zero-checksum train cannot go out as one send: Linux's `udp_send_skb`
/// refuses GSO on a socket with `SO_NO_CHECK` / `UDP_NO_CHECK6_TX` (EINVAL),
/// so the host layer splits it. Sizes follow `udp_send_skb` and
/// `__ip_append_data`: at most [`UDP_MAX_SEGMENTS`] datagrams, the IPv4
/// packet the kernel builds ≤ 65535 bytes (IPv6: its payload ≤ 65535).
///
/// Errors, with the inputs untouched: `Malformed` (empty list, a duplicate,
/// datagrams that do not qualify), `TooBig` (too many datagrams, or more
/// than the data room or the IP limit), `NoBuffer`, and the parse errors of
/// a datagram that is not whole UDP.
pub fn build_udp_train(pool: &mut Pool, ids: &[PacketId]) -> Result<PacketId, DropReason> {
    let Some((&first, rest)) = ids.split_first() else {
        return Err(DropReason::Malformed);
    };
    if ids.len() > UDP_MAX_SEGMENTS {
        return Err(DropReason::TooBig);
    }
    let head = pool.data(first);
    let (lay, end) = udp_layout(head, false)?;
    let hdr = lay.l4 + udp::HEADER_LEN;
    let seg = end - hdr;
    if seg == 0 {
        return Err(DropReason::Malformed);
    }
    let csum = pool.meta(first).csum;
    let zero = udp::Packet::new_unchecked(&head[lay.l4..]).checksum_zero();
    let mut total = end;
    for (k, &id) in rest.iter().enumerate() {
        if ids[..=k].contains(&id) {
            return Err(DropReason::Malformed);
        }
        let data = pool.data(id);
        let (l, e) = udp_layout(data, false)?;
        let p = e - hdr.min(e);
        let last = k + 1 == rest.len();
        let qualifies = l.v6 == lay.v6
            && l.l4 == lay.l4
            && same_ip_template(head, data, lay.l4, lay.v6)
            && head[lay.l4..lay.l4 + 4] == data[lay.l4..lay.l4 + 4]
            && udp::Packet::new_unchecked(&data[lay.l4..]).checksum_zero() == zero
            && pool.meta(id).csum == csum
            && p >= 1
            && (p == seg || (last && p < seg));
        if !qualifies {
            return Err(DropReason::Malformed);
        }
        total += p;
    }
    let ip_len = if lay.v6 {
        total - ipv6::HEADER_LEN
    } else {
        total
    };
    if total > pool.data_room() || ip_len > MAX_IP_LEN {
        return Err(DropReason::TooBig);
    }
    let train = pool.alloc().ok_or(DropReason::NoBuffer)?;
    write_packet(pool, train, total, |pool, buf| {
        buf[..end].copy_from_slice(pool.data(first));
        let mut at = end;
        for &id in rest {
            let p = &pool.data(id)[hdr..];
            buf[at..at + p.len()].copy_from_slice(p);
            at += p.len();
        }
    });
    let first_meta = *pool.meta(first);
    let m = pool.meta_mut(train);
    m.l3 = 0;
    m.l4 = lay.l4 as u16;
    m.csum = csum;
    m.gso = Some(Gso {
        kind: GsoKind::Udp,
        segment_size: seg as u16,
    });
    m.flow_hash = first_meta.flow_hash;
    m.tunnel = first_meta.tunnel;
    for &id in ids {
        pool.free(id);
    }
    Ok(train)
}

/// Splits a UDP GSO train (as [`build_udp_train`] makes, or as a socket
/// hands one to the kernel) into whole datagrams pushed to `out`; returns
/// how many and frees `id`.
///
/// Each datagram has the template's headers with its own lengths (IPv4:
/// identification = template's + i, header checksum), and a UDP checksum
/// of 0 if the template's is 0 (`meta.csum = Zero`), else the complete
/// correct one (`meta.csum = None`). This is what the kernel's
/// `__udp_gso_segment` does for a socket, and what a pcap writer needs.
///
/// Errors, with `id` untouched: `Malformed` (no `Gso { kind: Udp }` or a
/// zero segment size), `BadLength` (the template's UDP payload is not one
/// segment), `TooBig` (no room in `out`), `NoBuffer`, `Unsupported` (an
/// IPv6 routing header with segments left and a checksum to compute), and
/// the parse errors.
pub fn split_udp_train(
    pool: &mut Pool,
    id: PacketId,
    out: &mut PacketVector,
) -> Result<usize, DropReason> {
    let seg = match pool.meta(id).gso {
        Some(Gso {
            kind: GsoKind::Udp,
            segment_size,
        }) if segment_size > 0 => segment_size as usize,
        _ => return Err(DropReason::Malformed),
    };
    let data = pool.data(id);
    let (lay, end) = udp_layout(data, true)?;
    if end - lay.l4 - udp::HEADER_LEN != seg {
        return Err(DropReason::BadLength);
    }
    let zero = udp::Packet::new_unchecked(&data[lay.l4..]).checksum_zero();
    if !zero && lay.v6 {
        let ip = parse_ip(data)?;
        if routing_pending(data, &ip) {
            return Err(DropReason::Unsupported);
        }
    }
    emit(pool, id, out, lay, seg, zero)
}
