//! Segmentation offload in software: super-packets (TSO from a TUN, or
//! what [`crate::gro`] built) cut into wire-sized segments, and UDP GSO
//! trains (`UDP_SEGMENT`) built from, and split back into, datagrams.
//!
//! # Conventions (shared with [`crate::gro`])
//! - A packet is an IPv4 or IPv6 packet at the data start, or, from an L2
//!   side ([`InnerLink::Ethernet`]: a TAP, an L2 tunnel), an Ethernet frame
//!   carrying one: destination and source MAC, up to two VLAN tags
//!   (0x8100 / 0x88a8), EtherType 0x0800 or 0x86DD agreeing with the IP
//!   version, then the IP packet, as [`ethernet_ip_offset`](crate::geometry::ethernet_ip_offset) finds it. Every
//!   packet these functions output has `meta.l2 = 0`, `meta.l3` = where the
//!   IP header starts (0, or 14 / 18 / 22 in a frame) and `meta.l4` = where
//!   the transport header starts, IPv4 options and IPv6 extension headers
//!   included; every offset is from the data start (the frame start).
//! - The Ethernet header of a frame is copied to each segment unchanged;
//!   GRO merges only frames whose Ethernet headers are equal.
//! - UDP GSO trains ([`build_udp_train`](crate::udp_train::build_udp_train), [`split_udp_train`](crate::udp_train::split_udp_train)) are outer
//!   datagrams: always IP at the data start.
//! - A super-packet has `meta.gso = Some(..)`, IP and UDP length fields for
//!   its whole length (IPv6: payload length ≤ 65535, no jumbograms), a valid
//!   IPv4 header checksum, and its transport checksum in the partial form
//!   (virtio-net NEEDS_CSUM, Linux CHECKSUM_PARTIAL): the field holds the
//!   folded pseudo-header sum over the full transport length and
//!   `meta.csum = Partial { start: l4, offset: l4 + 16 (TCP) / l4 + 6 (UDP) }`
//!   (from the frame start in a frame, as a TAP's virtio-net header has
//!   them).
//!   [`segment`] ignores that field and computes every segment's checksum
//!   from the addresses, so a super-packet whose field is already complete
//!   segments just as well.
//! - A UDP GSO train ([`build_udp_train`](crate::udp_train::build_udp_train)) is different: its IP and UDP
//!   length fields describe the first datagram only, as in the template the
//!   kernel's `UDP_SEGMENT` send builds, and its length is the buffer's.
//!
//! # Cost
//! No allocation per packet: output buffers come from [`Pool::alloc`]. Each
//! segment is one copy of its bytes and one checksum pass over its
//! transport bytes (while they are in cache): [`Pool::copy_between`]
//! moves the payload straight from buffer to buffer, and GRO grows the
//! head in place ([`Pool::set_len`]).

use tep_csum::Sum;
use tep_wire::tcp::TcpFlags;
use tep_wire::{ipv4, ipv6, tcp, udp, IpProtocol};

use crate::buffer::{ChecksumState, GsoKind, PacketId, PacketMeta, Pool, Tail};
use crate::drop::DropReason;
use crate::geometry::{
    complete_partial_in, ethertype_agrees, ip_start, locate_ip, pseudo_header, set_ip_len,
    InnerLink, IpInfo, PROTO_TCP, PROTO_UDP,
};
use crate::vector::{PacketVector, VECTOR_SIZE};

/// Bytes of an Ethernet header without VLAN tags.
const ETHERNET_HEADER_LEN: usize = 14;

/// [`ip_start`] of a packet that must carry IP.
fn require_ip(data: &[u8], link: InnerLink) -> Result<usize, DropReason> {
    match ip_start(data, link) {
        Some(l3) => Ok(l3),
        None if data.len() < ETHERNET_HEADER_LEN => Err(DropReason::Truncated),
        None => Err(DropReason::NotIp),
    }
}

/// Whether an IPv6 routing header still has segments left. The
/// pseudo-header then names the final destination, which sits in the
/// routing header (RFC 8200 §8.1); tep does not dig it out and refuses to
/// compute such checksums.
pub(crate) fn routing_pending(data: &[u8], ip: &IpInfo) -> bool {
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
pub(crate) struct Layout {
    pub v6: bool,
    pub tcp: bool,
    /// Where the IP header starts (after the Ethernet header in a frame).
    pub l3: usize,
    /// Where the transport header starts, from the data start.
    pub l4: usize,
    /// Transport header length (TCP with options, or UDP's 8).
    pub th: usize,
}

impl Layout {
    pub fn csum_at(&self) -> usize {
        self.l4
            + if self.tcp {
                tcp::CHECKSUM_OFFSET
            } else {
                udp::CHECKSUM_OFFSET
            }
    }

    fn protocol(&self) -> u8 {
        if self.tcp {
            PROTO_TCP
        } else {
            PROTO_UDP
        }
    }
}

/// Checks a super-packet of `kind` whose IP header starts at `l3`: one
/// whole IP packet (no padding: a buffer longer than its IP length is a
/// train, not a super-packet), not a fragment, the transport `kind` names,
/// a UDP length for the whole datagram.
fn super_layout(data: &[u8], l3: usize, kind: GsoKind) -> Result<Layout, DropReason> {
    let frame = data;
    let data = &frame[l3..];
    let ip = locate_ip(data, 0, 0)?;
    if !ethertype_agrees(frame, l3, ip.v6) {
        return Err(DropReason::BadVersion);
    }
    if ip.fragment {
        return Err(DropReason::Fragment);
    }
    if ip.end != data.len() {
        return Err(DropReason::BadLength);
    }
    let tcp = match (kind, ip.v6, ip.proto) {
        (GsoKind::Tcp4, false, PROTO_TCP) | (GsoKind::Tcp6, true, PROTO_TCP) => true,
        (GsoKind::Udp, _, PROTO_UDP) => false,
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
        l3,
        l4: l3 + ip.l4,
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
pub(crate) fn udp_layout(data: &[u8], train: bool) -> Result<(Layout, usize), DropReason> {
    let ip = locate_ip(data, 0, 0)?;
    if ip.fragment {
        return Err(DropReason::Fragment);
    }
    if ip.proto != PROTO_UDP {
        return Err(DropReason::Malformed);
    }
    if !train && ip.end != data.len() {
        return Err(DropReason::BadLength);
    }
    udp_header(&data[ip.l4..ip.end])?;
    let lay = Layout {
        v6: ip.v6,
        tcp: false,
        l3: 0,
        l4: ip.l4,
        th: udp::HEADER_LEN,
    };
    Ok((lay, ip.end))
}

/// Splits super-packet `id` into segments of `meta.gso.segment_size`
/// payload bytes, each a new buffer pushed to `out`; returns how many and
/// frees `id`. `link` says what the packet is: an IP packet, or an Ethernet
/// frame carrying one (see the module doc); every segment of a frame is a
/// frame with the same Ethernet header.
///
/// Every segment has its own IP length (IPv4: identification + i and the
/// header checksum; IPv6: payload length), TCP sequence number (CWR only on
/// the first segment, FIN and PSH only on the last, as Linux's
/// `tcp_gso_segment`) or UDP length, and a complete transport checksum:
/// `meta.csum = None`, `meta.gso = None`, `l2 = 0`, `l3` (0, or the
/// Ethernet header's length), `l4`; the rest of the metadata (flow hash,
/// tunnel, inner offsets) is the input's.
///
/// A packet without `meta.gso`, or whose payload fits one segment, is
/// pushed as it is, normalised: a partial checksum is completed (over
/// `start` to the IP end, by [`complete_partial_in`]), `csum = None`, `gso` cleared, `l2`/`l3`/`l4`
/// set. Without `meta.gso` any IP packet passes (fragments too), and so
/// does a frame that carries no IP (`l3 = l4 = 0`; a partial checksum is
/// completed to the frame's end); with it the checksum is computed afresh
/// as for a segment.
///
/// Errors, with `id` untouched and nothing allocated: `TooBig` when `out`
/// has no room for every segment, `NoBuffer` when the pool has too few
/// buffers, `Fragment`, `Unsupported` (an IPv6 routing header with segments
/// left), and `Truncated` / `BadLength` / `BadVersion` (also an EtherType
/// that is not the IP version's) / `Malformed` / `NotIp` (also a frame
/// super-packet without IP) for malformed packets (`BadLength` also for a
/// buffer longer than its IP length: a train goes to [`split_udp_train`](crate::udp_train::split_udp_train)).
pub fn segment(
    pool: &mut Pool,
    id: PacketId,
    out: &mut PacketVector,
    link: InnerLink,
) -> Result<usize, DropReason> {
    segment_into(pool, id, out, link, false)
}

/// [`segment`] without copying the payload: each segment holds its
/// headers and, as its [`Tail`], its piece of the super-packet, which
/// stays where it is until the last segment is freed. For a consumer that
/// writes gathered (host mode's socket). The transport checksum of a
/// segment is left partial (`meta.csum = Partial` at the transport header,
/// the pseudo-header sum in the field, as Linux leaves a GSO segment
/// CHECKSUM_PARTIAL): the encap path completes it, from the piece in place,
/// unless the tunnel leaves it to the receiver (remote checksum offload).
pub fn segment_gathered(
    pool: &mut Pool,
    id: PacketId,
    out: &mut PacketVector,
    link: InnerLink,
) -> Result<usize, DropReason> {
    segment_into(pool, id, out, link, true)
}

fn segment_into(
    pool: &mut Pool,
    id: PacketId,
    out: &mut PacketVector,
    link: InnerLink,
    gathered: bool,
) -> Result<usize, DropReason> {
    let Some(gso) = pool.meta(id).gso else {
        return normalise(pool, id, out, link);
    };
    if gso.segment_size == 0 {
        return Err(DropReason::Malformed);
    }
    let data = pool.data(id);
    let l3 = require_ip(data, link)?;
    let lay = super_layout(data, l3, gso.kind)?;
    let payload = data.len() - lay.l4 - lay.th;
    let seg = gso.segment_size as usize;
    if payload > seg {
        return emit(pool, id, out, lay, seg, Pieces::Compute, gathered);
    }
    if out.is_full() {
        return Err(DropReason::TooBig);
    }
    let data = pool.data_mut(id);
    let len = data.len();
    set_ip_len(&mut data[lay.l3..], lay.v6, len - lay.l3, None);
    fill_transport_checksum(data, &lay, len);
    finish_meta(pool, id, &lay, ChecksumState::None);
    push(pool, out, id);
    Ok(1)
}

/// The no-split path of [`segment`] for a packet without `meta.gso`.
fn normalise(
    pool: &mut Pool,
    id: PacketId,
    out: &mut PacketVector,
    link: InnerLink,
) -> Result<usize, DropReason> {
    let data = pool.data(id);
    // Where a partial checksum's region ends, and the offsets to record.
    let (end, l3, l4) = match ip_start(data, link) {
        Some(l3) => {
            let ip = locate_ip(&data[l3..], 0, 0)?;
            if !ethertype_agrees(data, l3, ip.v6) {
                return Err(DropReason::BadVersion);
            }
            (l3 + ip.end, l3, l3 + ip.l4)
        }
        None if data.len() >= ETHERNET_HEADER_LEN => (data.len(), 0, 0),
        None => return Err(DropReason::Truncated),
    };
    if out.is_full() {
        return Err(DropReason::TooBig);
    }
    let mut csum = pool.meta(id).csum;
    if let ChecksumState::Partial { start, offset } = csum {
        complete_partial_in(pool.data_mut(id), start.into(), offset.into(), end)?;
        csum = ChecksumState::None;
    }
    let meta = pool.meta_mut(id);
    meta.l2 = 0;
    meta.l3 = l3 as u16;
    meta.l4 = l4 as u16;
    meta.csum = csum;
    push(pool, out, id);
    Ok(1)
}

/// Zeroes and fills the transport checksum of a `len`-byte packet.
fn fill_transport_checksum(buf: &mut [u8], lay: &Layout, len: usize) {
    let at = lay.csum_at();
    buf[at..at + 2].fill(0);
    let transport = Sum::of(&buf[lay.l4..len]);
    set_transport_checksum(buf, lay, len, transport);
}

/// Fills the transport checksum of a `len`-byte packet whose transport
/// bytes, with the checksum field zero, sum to `transport`.
fn set_transport_checksum(buf: &mut [u8], lay: &Layout, len: usize, transport: Sum) {
    let at = lay.csum_at();
    let sum = pseudo_header(&buf[lay.l3..], lay.protocol(), len - lay.l4).add(transport);
    let c = if lay.tcp {
        sum.checksum()
    } else {
        sum.udp_checksum()
    };
    buf[at..at + 2].copy_from_slice(&c.to_be_bytes());
}

fn finish_meta(pool: &mut Pool, id: PacketId, lay: &Layout, csum: ChecksumState) {
    let meta = pool.meta_mut(id);
    *meta = out_meta(*meta, lay, csum);
}

/// The metadata of an output made from a packet with metadata `base`:
/// everything else (flow hash, tunnel, inner offsets: the same for every
/// segment, whose headers have the same layout) is kept.
pub(crate) fn out_meta(base: PacketMeta, lay: &Layout, csum: ChecksumState) -> PacketMeta {
    PacketMeta {
        l2: 0,
        l3: lay.l3 as u16,
        l4: lay.l4 as u16,
        csum,
        gso: None,
        drop: None,
        tail: None,
        ..base
    }
}

/// Pushes a packet the caller checked room for.
fn push(pool: &mut Pool, out: &mut PacketVector, id: PacketId) {
    if out.push(id).is_err() {
        // Unreachable: every caller checks the room first.
        debug_assert!(false, "no room in the output vector");
        pool.free(id);
    }
}

/// What the pieces [`emit`] cuts get as transport checksum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pieces {
    /// Each its own, computed.
    Compute,
    /// None (a UDP train whose template's checksum is 0).
    Zero,
    /// The template's field, unchanged, and `meta.csum = Verified`: a
    /// train the kernel received with `UDP_GRO` after verifying every
    /// datagram. Its checksum field means nothing (the socket does not
    /// give the sender's); nobody reads it again.
    Trusted,
}

/// Cuts the payload after `lay`'s headers in `id` into pieces of `seg`
/// bytes (the last shorter), each a new packet with the headers of `id`
/// fixed up, pushed to `out`; frees `id`. `checksums` says what each
/// piece's transport checksum becomes. `gathered`: each piece's payload
/// stays in `id` as the piece's [`Tail`] instead of being copied.
pub(crate) fn emit(
    pool: &mut Pool,
    id: PacketId,
    out: &mut PacketVector,
    lay: Layout,
    seg: usize,
    checksums: Pieces,
    gathered: bool,
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
        ipv4::Packet::new_unchecked(&data[lay.l3..]).ident()
    };
    let (seq, flags) = if lay.tcp {
        let t = tcp::Packet::new_unchecked(&data[lay.l4..]);
        (t.seq_number(), t.flags())
    } else {
        (0, TcpFlags::empty())
    };
    let csum = match checksums {
        Pieces::Compute => ChecksumState::None,
        Pieces::Zero => ChecksumState::Zero,
        Pieces::Trusted => ChecksumState::Verified,
    };

    for (i, s) in ids[..n].iter().flatten().copied().enumerate() {
        let off = i * seg;
        let chunk = seg.min(payload - off);
        let len = hdr + chunk;
        {
            pool.set_len(s, if gathered { hdr } else { len });
            pool.copy_between(id, 0..hdr, s, 0);
            let body = hdr + off..hdr + off + chunk;
            // The payload's sum, when the segment's checksum needs it: taken
            // in the same pass as the copy.
            let payload_sum = match (gathered, checksums) {
                (true, _) => None,
                (false, Pieces::Compute) => Some(pool.copy_between_summed(id, body, s, hdr)),
                (false, _) => {
                    pool.copy_between(id, body, s, hdr);
                    None
                }
            };
            let buf = pool.data_mut(s);
            let ident = Some(ident.wrapping_add(i as u16));
            set_ip_len(&mut buf[lay.l3..], lay.v6, len - lay.l3, ident);
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
            if checksums == Pieces::Compute {
                if gathered {
                    let at = lay.csum_at();
                    let partial =
                        pseudo_header(&buf[lay.l3..], lay.protocol(), len - lay.l4).value();
                    buf[at..at + 2].copy_from_slice(&partial.to_be_bytes());
                } else if let Some(payload) = payload_sum {
                    // The payload starts at an even offset of the segment
                    // (transport headers are 4-byte multiples).
                    let at = lay.csum_at();
                    buf[at..at + 2].fill(0);
                    let headers = Sum::of(&buf[lay.l4..hdr]);
                    set_transport_checksum(buf, &lay, len, headers.add(payload));
                }
            }
        }
        let csum = if gathered && checksums == Pieces::Compute {
            ChecksumState::Partial {
                start: lay.l4 as u16,
                offset: lay.csum_at() as u16,
            }
        } else {
            csum
        };
        *pool.meta_mut(s) = out_meta(meta, &lay, csum);
        if gathered {
            let tail = Tail {
                buf: id,
                start: (hdr + off) as u32,
                len: chunk as u32,
                stride: 0,
                skip: 0,
            };
            let kept = pool.set_tail(s, tail);
            debug_assert!(kept, "a piece of id by construction");
        }
        push(pool, out, s);
    }
    pool.free(id);
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffer::Gso;
    use crate::gro::Gro;
    use crate::testpkt::{
        self, eth_strategy, ip_strategy, load_all, metas, out_bytes, sizes, tcp_strategy, Csum,
        Eth, Ip, Tcp, ACK, CWR, ECE, FIN, PSH,
    };
    use crate::udp_train::{build_udp_train, split_udp_train};
    use proptest::prelude::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    const ROOM: usize = crate::buffer::SUPER_PACKET_ROOM;

    fn tcp_ok(seg: &[u8]) -> bool {
        if seg[0] >> 4 == 4 {
            let ip = ipv4::Packet::new_checked(seg).unwrap();
            assert!(ip.verify_checksum());
            tcp::Packet::new_checked(ip.payload())
                .unwrap()
                .verify_checksum_v4(&ip.src_addr(), &ip.dst_addr())
        } else {
            let ip = ipv6::Packet::new_checked(seg).unwrap();
            let off = ip.upper_layer().unwrap().offset;
            tcp::Packet::new_checked(&ip.payload()[off..])
                .unwrap()
                .verify_checksum_v6(&ip.src_addr(), &ip.dst_addr())
        }
    }

    /// A TCP super-packet of `payload` bytes in the partial convention.
    fn tcp_super(ip: &Ip, t: &Tcp, payload: usize, mss: u16) -> (Vec<u8>, PacketMeta) {
        let b = testpkt::tcp(ip, t, &testpkt::payload(0, payload, 7), Csum::Partial);
        let kind = if ip.v6 { GsoKind::Tcp6 } else { GsoKind::Tcp4 };
        let m = testpkt::super_meta(&b, kind, mss);
        (b, m)
    }

    /// Gathered segments are the copied ones, byte for byte once
    /// linearized; the super-packet stays until the last segment goes.
    #[test]
    fn gathered_segments_are_the_copied_ones() {
        let t = Tcp {
            flags: ACK | PSH,
            options: vec![1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2],
            ..Tcp::new()
        };
        for ip in [Ip::v4(), Ip::v6()] {
            for (link, eth) in [
                (InnerLink::Ip, None),
                (InnerLink::Ethernet, Some(Eth::tagged(5))),
            ] {
                for payload in [1448 * 45, 1448 * 3 + 1, 1000] {
                    let (b, m) = tcp_super(&ip, &t, payload, 1448);
                    let (b, m) = match &eth {
                        Some(e) => (e.wrap(&b), e.meta(m)),
                        None => (b, m),
                    };
                    let mut pool = Pool::new(128, ROOM);
                    let mut got = Vec::new();
                    for gathered in [false, true] {
                        let id = testpkt::load(&mut pool, &b, m);
                        let mut out = PacketVector::new();
                        let n = if gathered {
                            segment_gathered(&mut pool, id, &mut out, link)
                        } else {
                            segment(&mut pool, id, &mut out, link)
                        }
                        .unwrap();
                        assert_eq!(n, out.len());
                        let mut segs = Vec::new();
                        for &s in out.as_slice() {
                            let tail = pool.meta(s).tail.is_some();
                            assert_eq!(tail, gathered && payload > 1448);
                            assert!(pool.linearize(s));
                            if let ChecksumState::Partial { start, offset } = pool.meta(s).csum {
                                // What the encap path's inner-checksum node does.
                                let (st, o) = (usize::from(start), usize::from(offset));
                                let c = Sum::of(&pool.data(s)[st..]).checksum();
                                pool.data_mut(s)[o..o + 2].copy_from_slice(&c.to_be_bytes());
                                pool.meta_mut(s).csum = ChecksumState::None;
                            }
                            segs.push((pool.data(s).to_vec(), *pool.meta(s)));
                            pool.free(s);
                        }
                        got.push(segs);
                        assert_eq!(pool.available(), pool.capacity());
                    }
                    assert_eq!(got[0], got[1], "v6 {} {link:?} {payload}", ip.v6);
                }
            }
        }
    }

    #[test]
    fn tcp4_super_packet_segments_like_linux() {
        let mut pool = Pool::new(8, ROOM);
        let mut t = Tcp::new();
        t.flags = ACK | CWR | ECE | PSH | FIN;
        let (b, m) = tcp_super(&Ip::v4(), &t, 2500, 1000);
        let id = testpkt::load(&mut pool, &b, m);
        let mut out = PacketVector::new();
        assert_eq!(segment(&mut pool, id, &mut out, InnerLink::Ip), Ok(3));
        assert_eq!(pool.available(), 5, "the super-packet is freed");
        let segs = out_bytes(&pool, &out);
        let want = testpkt::tcp_train(&Ip::v4(), &t, &[1000, 1000, 500], 7);
        assert_eq!(segs, want);
        let flags: Vec<_> = segs
            .iter()
            .map(|s| tcp::Packet::new_unchecked(&s[20..]).flags().bits())
            .collect();
        assert_eq!(
            flags,
            [ACK | CWR | ECE, ACK | ECE, ACK | ECE | PSH | FIN],
            "CWR first, FIN/PSH last"
        );
        for (k, (s, &id)) in segs.iter().zip(out.as_slice()).enumerate() {
            assert!(tcp_ok(s));
            let ip = ipv4::Packet::new_checked(&s[..]).unwrap();
            assert_eq!(ip.ident(), 0x1234 + k as u16);
            let meta = pool.meta(id);
            assert_eq!((meta.l3, meta.l4), (0, 20));
            assert_eq!((meta.csum, meta.gso), (ChecksumState::None, None));
            assert_eq!(
                (meta.flow_hash, meta.tunnel, meta.inner_l4),
                (0xabcd, 3, 99)
            );
        }
    }

    #[test]
    fn tcp6_with_extension_headers_and_ident_wrap() {
        let mut pool = Pool::new(8, ROOM);
        let mut ip = Ip::v6();
        ip.ext = vec![0, 0, 1, 4, 0, 0, 0, 0, 0, 0, 1, 4, 0, 0, 0, 0];
        let (b, m) = tcp_super(&ip, &Tcp::new(), 3000, 1400);
        assert_eq!(m.l4, 56);
        let id = testpkt::load(&mut pool, &b, m);
        let mut out = PacketVector::new();
        assert_eq!(segment(&mut pool, id, &mut out, InnerLink::Ip), Ok(3));
        let want = testpkt::tcp_train(&ip, &Tcp::new(), &[1400, 1400, 200], 7);
        assert_eq!(out_bytes(&pool, &out), want);
        assert!(out_bytes(&pool, &out).iter().all(|s| tcp_ok(s)));
        assert!(out.as_slice().iter().all(|&s| pool.meta(s).l4 == 56));

        let mut ip = Ip::v4();
        ip.ident = 0xffff;
        let (b, m) = tcp_super(&ip, &Tcp::new(), 30, 10);
        let id = testpkt::load(&mut pool, &b, m);
        out.clear();
        assert_eq!(segment(&mut pool, id, &mut out, InnerLink::Ip), Ok(3));
        let ids: Vec<_> = out_bytes(&pool, &out)
            .iter()
            .map(|s| ipv4::Packet::new_unchecked(&s[..]).ident())
            .collect();
        assert_eq!(ids, [0xffff, 0, 1]);
    }

    #[test]
    fn ipv4_options_are_copied_to_every_segment() {
        let mut pool = Pool::new(8, ROOM);
        let mut ip = Ip::v4();
        ip.ext = vec![0x94, 4, 0, 0]; // router alert
        let (b, m) = tcp_super(&ip, &Tcp::new(), 100, 60);
        let id = testpkt::load(&mut pool, &b, m);
        let mut out = PacketVector::new();
        assert_eq!(segment(&mut pool, id, &mut out, InnerLink::Ip), Ok(2));
        assert_eq!(
            out_bytes(&pool, &out),
            testpkt::tcp_train(&ip, &Tcp::new(), &[60, 40], 7)
        );
    }

    #[test]
    fn udp_super_packet_segments_into_datagrams() {
        for ip in [Ip::v4(), Ip::v6()] {
            let mut pool = Pool::new(8, ROOM);
            let b = testpkt::udp(
                &ip,
                4789,
                4789,
                &testpkt::payload(0, 1000, 1),
                Csum::Partial,
            );
            let id = testpkt::load(&mut pool, &b, testpkt::super_meta(&b, GsoKind::Udp, 400));
            let mut out = PacketVector::new();
            assert_eq!(segment(&mut pool, id, &mut out, InnerLink::Ip), Ok(3));
            let want = testpkt::udp_train(&ip, 4789, 4789, &[400, 400, 200], Csum::Full, 1);
            assert_eq!(out_bytes(&pool, &out), want);
        }
    }

    #[test]
    fn packets_that_need_no_split_are_normalised_in_place() {
        let mut pool = Pool::new(4, ROOM);
        let mut out = PacketVector::new();
        // A super-packet whose payload fits one segment.
        let (b, m) = tcp_super(&Ip::v4(), &Tcp::new(), 500, 1000);
        let id = testpkt::load(&mut pool, &b, m);
        assert_eq!(segment(&mut pool, id, &mut out, InnerLink::Ip), Ok(1));
        assert_eq!(out.as_slice(), [id]);
        let full = testpkt::tcp(
            &Ip::v4(),
            &Tcp::new(),
            &testpkt::payload(0, 500, 7),
            Csum::Full,
        );
        assert_eq!(pool.data(id), &full[..]);
        assert_eq!(*pool.meta(id), testpkt::meta_of(&full, ChecksumState::None));

        // No gso, partial checksum: completed.
        let b = testpkt::udp(&Ip::v6(), 1, 2, b"hello", Csum::Partial);
        let m = testpkt::meta_of(
            &b,
            ChecksumState::Partial {
                start: 40,
                offset: 46,
            },
        );
        let id = testpkt::load(&mut pool, &b, m);
        assert_eq!(segment(&mut pool, id, &mut out, InnerLink::Ip), Ok(1));
        let full = testpkt::udp(&Ip::v6(), 1, 2, b"hello", Csum::Full);
        assert_eq!(pool.data(id), &full[..]);
        assert_eq!(pool.meta(id).csum, ChecksumState::None);

        // No gso, nothing to do: untouched, even a fragment.
        let mut ip = Ip::v4();
        ip.df = false;
        let mut b = testpkt::udp(&ip, 1, 2, b"frag", Csum::Zero);
        b[6] = 0x20; // MF
        let m = testpkt::meta_of(&b, ChecksumState::Zero);
        let id = testpkt::load(&mut pool, &b, m);
        assert_eq!(segment(&mut pool, id, &mut out, InnerLink::Ip), Ok(1));
        assert_eq!(pool.data(id), &b[..]);
        assert_eq!(*pool.meta(id), m);
        assert_eq!(out.len(), 3);
    }

    fn assert_refused(
        pool: &mut Pool,
        bytes: &[u8],
        meta: PacketMeta,
        out: &mut PacketVector,
        want: DropReason,
    ) {
        let id = testpkt::load(pool, bytes, meta);
        let (avail, len) = (pool.available(), out.len());
        assert_eq!(segment(pool, id, out, InnerLink::Ip), Err(want));
        assert_eq!((pool.available(), out.len()), (avail, len));
        assert_eq!(pool.data(id), bytes, "input untouched");
        assert_eq!(*pool.meta(id), meta);
        pool.free(id);
    }

    #[test]
    fn segment_errors_leave_everything_untouched() {
        let mut pool = Pool::new(4, ROOM);
        let mut out = PacketVector::new();
        let (b, m) = tcp_super(&Ip::v4(), &Tcp::new(), 5000, 1000);
        assert_refused(&mut pool, &b, m, &mut out, DropReason::NoBuffer);

        let mut big = Pool::new(VECTOR_SIZE + 8, ROOM);
        for _ in 0..VECTOR_SIZE - 2 {
            out.push(big.alloc().unwrap()).unwrap();
        }
        assert_refused(&mut big, &b, m, &mut out, DropReason::TooBig);
        out.clear();

        let wrong_kind = PacketMeta {
            gso: Some(Gso {
                kind: GsoKind::Tcp6,
                segment_size: 1000,
            }),
            ..m
        };
        assert_refused(&mut pool, &b, wrong_kind, &mut out, DropReason::Malformed);
        let zero = PacketMeta {
            gso: Some(Gso {
                kind: GsoKind::Tcp4,
                segment_size: 0,
            }),
            ..m
        };
        assert_refused(&mut pool, &b, zero, &mut out, DropReason::Malformed);
        assert_refused(
            &mut pool,
            &b[..b.len() - 1],
            m,
            &mut out,
            DropReason::Truncated,
        );
        let mut padded = b.clone();
        padded.push(0);
        assert_refused(&mut pool, &padded, m, &mut out, DropReason::BadLength);
        let mut frag = b.clone();
        frag[6] |= 0x20;
        assert_refused(&mut pool, &frag, m, &mut out, DropReason::Fragment);
        let mut not_ip = b.clone();
        not_ip[0] = 0x55;
        assert_refused(&mut pool, &not_ip, m, &mut out, DropReason::NotIp);
        let mut bad_doff = b.clone();
        bad_doff[32] = 0x40;
        assert_refused(&mut pool, &bad_doff, m, &mut out, DropReason::BadLength);

        // An IPv6 fragment header of a first fragment (M set); a routing
        // header with segments left.
        let mut ip = Ip::v6();
        ip.ext = vec![0; 8];
        let (mut b6, m6) = tcp_super(&ip, &Tcp::new(), 3000, 1000);
        b6[6] = 44;
        b6[40 + 3] = 1;
        assert_refused(&mut pool, &b6, m6, &mut out, DropReason::Fragment);
        // An atomic fragment (no offset, no M) is a whole packet.
        b6[40 + 3] = 0;
        let id = testpkt::load(&mut pool, &b6, m6);
        assert_eq!(segment(&mut pool, id, &mut out, InnerLink::Ip), Ok(3));
        out.as_slice().iter().for_each(|&s| pool.free(s));
        out.clear();
        b6[6] = 43;
        b6[40 + 1] = 0;
        b6[40 + 3] = 1;
        assert_refused(&mut pool, &b6, m6, &mut out, DropReason::Unsupported);
        b6[40 + 3] = 0;
        let id = testpkt::load(&mut pool, &b6, m6);
        assert_eq!(
            segment(&mut pool, id, &mut out, InnerLink::Ip),
            Ok(3),
            "no segments left"
        );
    }

    // ---- Ethernet frames ----

    /// Segments IP super-packet `b` (metadata `m`) bare and framed by
    /// `eth`: every framed segment must be the header followed by the bare
    /// segment, with the bare segment's metadata moved by the header.
    /// Returns how many segments.
    fn assert_frame_segments_like_the_packet(eth: &Eth, b: &[u8], m: PacketMeta) -> usize {
        let mut pool = Pool::new(2 * 64 + 2, ROOM);
        let id = testpkt::load(&mut pool, b, m);
        let mut bare = PacketVector::new();
        let n = segment(&mut pool, id, &mut bare, InnerLink::Ip).unwrap();
        let id = testpkt::load(&mut pool, &eth.wrap(b), eth.meta(m));
        let mut framed = PacketVector::new();
        assert_eq!(
            segment(&mut pool, id, &mut framed, InnerLink::Ethernet),
            Ok(n)
        );
        let hl = eth.hlen();
        for (&p, &f) in bare.as_slice().iter().zip(framed.as_slice()) {
            assert_eq!(pool.data(f), &eth.wrap(pool.data(p))[..], "byte for byte");
            let meta = *pool.meta(f);
            assert_eq!(meta, eth.meta(*pool.meta(p)));
            assert_eq!((meta.l2, meta.l3), (0, hl as u16));
            assert_eq!(usize::from(meta.l4), hl + usize::from(m.l4));
        }
        for &o in bare.as_slice().iter().chain(framed.as_slice()) {
            pool.free(o);
        }
        assert_eq!(pool.available(), pool.capacity());
        n
    }

    #[test]
    fn tcp_super_frames_segment_like_the_bare_packet() {
        let mss = 1448;
        for eth in [Eth::new(), Eth::tagged(100)] {
            for ip in [Ip::v4(), Ip::v6()] {
                let mut t = Tcp::new();
                t.flags |= PSH | CWR;
                // 64 KiB: 45 full segments.
                let (b, m) = tcp_super(&ip, &t, 45 * mss, mss as u16);
                assert!(b.len() > 65000);
                let n = assert_frame_segments_like_the_packet(&eth, &b, m);
                assert_eq!(n, 45);
            }
        }
        // The segments are valid TCP (checked on the bare ones, which the
        // framed ones contain).
        let (b, m) = tcp_super(&Ip::v6(), &Tcp::new(), 3000, 1000);
        let eth = Eth::tagged(7);
        let mut pool = Pool::new(4, ROOM);
        let id = testpkt::load(&mut pool, &eth.wrap(&b), eth.meta(m));
        let mut out = PacketVector::new();
        assert_eq!(segment(&mut pool, id, &mut out, InnerLink::Ethernet), Ok(3));
        for s in out_bytes(&pool, &out) {
            assert_eq!(&s[..18], &eth.header(0x86dd)[..]);
            assert!(tcp_ok(&s[18..]));
        }
    }

    #[test]
    fn udp_super_frames_segment_like_the_bare_packet() {
        for eth in [Eth::new(), Eth::tagged(0x2005)] {
            for ip in [Ip::v4(), Ip::v6()] {
                let b = testpkt::udp(
                    &ip,
                    5000,
                    5001,
                    &testpkt::payload(0, 60000, 4),
                    Csum::Partial,
                );
                let m = testpkt::super_meta(&b, GsoKind::Udp, 1400);
                let n = assert_frame_segments_like_the_packet(&eth, &b, m);
                assert_eq!(n, 43);
            }
        }
    }

    #[test]
    fn frame_refusals_and_frames_without_ip() {
        let mut pool = Pool::new(4, ROOM);
        let mut out = PacketVector::new();
        let eth = Eth::new();
        let (b, m) = tcp_super(&Ip::v4(), &Tcp::new(), 5000, 1000);
        let (f, fm) = (eth.wrap(&b), eth.meta(m));
        let refused = |pool: &mut Pool, bytes: &[u8], meta: PacketMeta, want: DropReason| {
            let id = testpkt::load(pool, bytes, meta);
            let avail = pool.available();
            let mut out = PacketVector::new();
            assert_eq!(segment(pool, id, &mut out, InnerLink::Ethernet), Err(want));
            assert_eq!(pool.available(), avail);
            assert_eq!(pool.data(id), bytes, "input untouched");
            assert_eq!(*pool.meta(id), meta);
            assert!(out.is_empty());
            pool.free(id);
        };
        let arp = eth.arp();
        refused(&mut pool, &arp, fm, DropReason::NotIp);
        refused(&mut pool, &f[..13], fm, DropReason::Truncated);
        let mut wrong_type = f.clone();
        wrong_type[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
        refused(&mut pool, &wrong_type, fm, DropReason::BadVersion);
        let mut padded = f.clone();
        padded.extend_from_slice(&[0; 4]);
        refused(&mut pool, &padded, fm, DropReason::BadLength);
        // The bare packet read as a frame: its "EtherType" is the source
        // address; a frame read as a packet: a MAC is no IP version.
        refused(&mut pool, &b, m, DropReason::NotIp);
        let id = testpkt::load(&mut pool, &f, fm);
        assert_eq!(
            segment(&mut pool, id, &mut out, InnerLink::Ip),
            Err(DropReason::NotIp)
        );
        pool.free(id);

        // Without gso: a frame without IP passes untouched, offsets 0.
        let am = PacketMeta {
            l3: 0,
            l4: 0,
            ..testpkt::meta_of(&arp, ChecksumState::None)
        };
        let id = testpkt::load(&mut pool, &arp, am);
        assert_eq!(segment(&mut pool, id, &mut out, InnerLink::Ethernet), Ok(1));
        assert_eq!((pool.data(id), *pool.meta(id)), (&arp[..], am));
        // An IP frame with a partial checksum: completed in place.
        let p = testpkt::udp(&Ip::v6(), 1, 2, b"hello", Csum::Partial);
        let pm = testpkt::meta_of(
            &p,
            ChecksumState::Partial {
                start: 40,
                offset: 46,
            },
        );
        let id = testpkt::load(&mut pool, &eth.wrap(&p), eth.meta(pm));
        assert_eq!(segment(&mut pool, id, &mut out, InnerLink::Ethernet), Ok(1));
        let full = testpkt::udp(&Ip::v6(), 1, 2, b"hello", Csum::Full);
        assert_eq!(pool.data(id), &eth.wrap(&full)[..]);
        let got = *pool.meta(id);
        assert_eq!((got.l3, got.l4, got.csum), (14, 54, ChecksumState::None));
        assert_eq!(out.len(), 2);
    }

    // ---- properties ----

    /// Segments every packet of `v` into a new vector.
    fn segment_all(pool: &mut Pool, v: &PacketVector) -> PacketVector {
        let mut out = PacketVector::new();
        for &id in v.as_slice() {
            segment(pool, id, &mut out, InnerLink::Ip).unwrap();
        }
        out
    }

    fn segment_ip(
        pool: &mut Pool,
        id: PacketId,
        out: &mut PacketVector,
    ) -> Result<usize, DropReason> {
        segment(pool, id, out, InnerLink::Ip)
    }

    fn segment_eth(
        pool: &mut Pool,
        id: PacketId,
        out: &mut PacketVector,
    ) -> Result<usize, DropReason> {
        segment(pool, id, out, InnerLink::Ethernet)
    }

    proptest! {
        // Seven dimensions a case (family, addresses, TCP fields, sizes,
        // flags): more cases than proptest's default; still about a second.
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// segment(coalesce(x)) == x for trains of valid TCP segments.
        #[test]
        fn tcp_train_coalesces_then_segments_back(
            ip in ip_strategy(),
            t in tcp_strategy(),
            n in 1usize..=45,
            mss in 1usize..=1460,
            last in 1usize..=1460,
            psh in any::<bool>(),
            fin in any::<bool>(),
        ) {
            let mut t = t;
            t.flags |= if psh { PSH } else { 0 } | if fin && psh { FIN } else { 0 };
            let x = testpkt::tcp_train(&ip, &t, &sizes(n, mss, last), 5);
            let mut pool = Pool::new(2 * n + 4, ROOM);
            let mut v = load_all(&mut pool, &x, ChecksumState::None);
            let want_meta = metas(&pool, &v);
            let merged = Gro::new().coalesce(&mut pool, &mut v, testpkt::ip_link);
            prop_assert_eq!(merged + v.len(), n);
            let total: usize = x.iter().map(|p| p.len() - ip.hlen() - 20 - t.options.len()).sum::<usize>()
                + ip.hlen() + 20 + t.options.len();
            if total <= 65535 {
                prop_assert_eq!(v.len(), 1, "one super-packet");
            }
            let segs = segment_all(&mut pool, &v);
            prop_assert_eq!(out_bytes(&pool, &segs), x);
            prop_assert_eq!(metas(&pool, &segs), want_meta);
            prop_assert_eq!(pool.available(), pool.capacity() - n);
        }

        /// Same for UDP datagrams of one size, the last shorter or equal.
        #[test]
        fn udp_train_coalesces_then_segments_back(
            ip in ip_strategy(),
            ports in any::<(u16, u16)>(),
            n in 1usize..=70,
            size in 1usize..=1400,
            last in 1usize..=1400,
        ) {
            let x = testpkt::udp_train(&ip, ports.0, ports.1, &sizes(n, size, last), Csum::Full, 9);
            let mut pool = Pool::new(2 * n + 4, ROOM);
            let mut v = load_all(&mut pool, &x, ChecksumState::None);
            let want_meta = metas(&pool, &v);
            let merged = Gro::new().coalesce(&mut pool, &mut v, testpkt::ip_link);
            prop_assert_eq!(merged + v.len(), n);
            if n * size <= 65000 && n <= 64 {
                prop_assert_eq!(v.len(), 1);
            }
            let segs = segment_all(&mut pool, &v);
            prop_assert_eq!(out_bytes(&pool, &segs), x);
            prop_assert_eq!(metas(&pool, &segs), want_meta);
        }

        /// coalesce(segment(x)) == x for super-packets (TCP and UDP).
        #[test]
        fn super_packet_segments_then_coalesces_back(
            ip in ip_strategy(),
            t in tcp_strategy(),
            udp in any::<bool>(),
            mss in 1usize..=1460,
            segs in 2usize..=64,
            short in 0usize..1460,
            fin_psh in 0u16..4,
        ) {
            let mss = if udp { mss.min(1000) } else { mss };
            let hdr = ip.hlen() + if udp { 8 } else { 20 + t.options.len() };
            let payload = (mss * (segs - 1) + mss - short % mss).min(65535 - hdr);
            prop_assume!(payload > mss);
            let mut t = t;
            t.flags |= [0, PSH, FIN, PSH | FIN][fin_psh as usize];
            let (b, m) = if udp {
                let b = testpkt::udp(&ip, t.sport, t.dport, &testpkt::payload(0, payload, 2), Csum::Partial);
                let m = testpkt::super_meta(&b, GsoKind::Udp, mss as u16);
                (b, m)
            } else {
                tcp_super(&ip, &t, payload, mss as u16)
            };
            let mut pool = Pool::new(80, ROOM);
            let id = testpkt::load(&mut pool, &b, m);
            let mut v = PacketVector::new();
            let n = segment(&mut pool, id, &mut v, InnerLink::Ip).unwrap();
            prop_assert_eq!(n, payload.div_ceil(mss));
            for s in out_bytes(&pool, &v) {
                if !udp {
                    prop_assert!(tcp_ok(&s));
                }
            }
            prop_assert_eq!(Gro::new().coalesce(&mut pool, &mut v, testpkt::ip_link), n - 1);
            prop_assert_eq!(v.len(), 1);
            prop_assert_eq!(pool.data(v.as_slice()[0]), &b[..]);
            prop_assert_eq!(*pool.meta(v.as_slice()[0]), m);
            prop_assert_eq!(pool.available(), 79);
        }

        /// Arbitrary bytes with arbitrary metadata: never a panic; an error
        /// leaves the input and the pool as they were.
        #[test]
        fn arbitrary_input_never_panics(
            bytes in prop::collection::vec(any::<u8>(), 0..300),
            version in prop::sample::select(vec![None, Some(0x45u8), Some(0x46), Some(0x60)]),
            kind in prop::sample::select(vec![None, Some(GsoKind::Tcp4), Some(GsoKind::Tcp6), Some(GsoKind::Udp)]),
            size in any::<u16>(),
            csum in prop::sample::select(vec![
                ChecksumState::None,
                ChecksumState::Verified,
                ChecksumState::Zero,
                ChecksumState::Partial { start: 20, offset: 36 },
                ChecksumState::Partial { start: 400, offset: 2 },
            ]),
            framed in prop::sample::select(vec![None, Some(0x0800u16), Some(0x86dd), Some(0x8100)]),
        ) {
            let mut bytes = bytes;
            if let (Some(v), Some(b)) = (version, bytes.first_mut()) {
                *b = v;
            }
            if let Some(ty) = framed {
                let mut f = Eth::new().header(ty);
                f.extend_from_slice(&bytes);
                bytes = f;
            }
            let mut pool = Pool::new(VECTOR_SIZE + 2, 2048);
            let meta = PacketMeta {
                gso: kind.map(|kind| Gso { kind, segment_size: size }),
                csum,
                ..testpkt::meta_of(&[0x45], ChecksumState::None)
            };
            for f in [segment_ip, segment_eth, split_udp_train] {
                let id = testpkt::load(&mut pool, &bytes, meta);
                let mut out = PacketVector::new();
                let avail = pool.available();
                match f(&mut pool, id, &mut out) {
                    Err(_) => {
                        prop_assert_eq!(pool.data(id), &bytes[..]);
                        prop_assert_eq!(*pool.meta(id), meta);
                        prop_assert_eq!(pool.available(), avail);
                        prop_assert!(out.is_empty());
                        pool.free(id);
                    }
                    Ok(n) => {
                        prop_assert_eq!(out.len(), n);
                        for &o in out.as_slice() {
                            pool.free(o);
                        }
                    }
                }
                prop_assert_eq!(pool.available(), pool.capacity());
            }
            let id = testpkt::load(&mut pool, &bytes, meta);
            if let Ok(t) = build_udp_train(&mut pool, &[id]) {
                pool.free(t);
            } else {
                pool.free(id);
            }
            let mut v = PacketVector::new();
            v.push(testpkt::load(&mut pool, &bytes, meta)).unwrap();
            v.push(testpkt::load(&mut pool, &bytes, meta)).unwrap();
            Gro::new().coalesce(&mut pool, &mut v, testpkt::ip_link);
            Gro::new().coalesce(&mut pool, &mut v, testpkt::eth_link);
        }

        /// Valid super-packets and trains with a byte changed or cut short:
        /// never a panic; cut short is an error.
        #[test]
        fn damaged_super_packets_never_panic(
            ip in ip_strategy(),
            udp in any::<bool>(),
            at in any::<prop::sample::Index>(),
            val in any::<u8>(),
            cut in any::<prop::sample::Index>(),
            framed in any::<bool>(),
        ) {
            let (b, m) = if udp {
                let b = testpkt::udp(&ip, 1, 2, &[3; 900], Csum::Partial);
                let m = testpkt::super_meta(&b, GsoKind::Udp, 100);
                (b, m)
            } else {
                tcp_super(&ip, &Tcp::new(), 900, 100)
            };
            type Segment = fn(&mut Pool, PacketId, &mut PacketVector) -> Result<usize, DropReason>;
            let (b, m, seg) = if framed {
                let eth = Eth::tagged(5);
                (eth.wrap(&b), eth.meta(m), segment_eth as Segment)
            } else {
                (b, m, segment_ip as Segment)
            };
            let mut pool = Pool::new(40, ROOM);
            let mut changed = b.clone();
            changed[at.index(b.len())] = val;
            let cut = cut.index(b.len());
            for (bytes, must_fail) in [(&changed[..], false), (&b[..cut], true)] {
                for (k, f) in [seg, split_udp_train].into_iter().enumerate() {
                    let id = testpkt::load(&mut pool, bytes, m);
                    let mut out = PacketVector::new();
                    let r = f(&mut pool, id, &mut out);
                    if must_fail && k == 0 {
                        prop_assert!(r.is_err());
                    }
                    match r {
                        Ok(_) => out.as_slice().iter().for_each(|&o| pool.free(o)),
                        Err(_) => pool.free(id),
                    }
                    prop_assert_eq!(pool.available(), 40);
                }
            }
        }
    }

    /// An IPv6 extension header of a proptest case: its type (hop-by-hop
    /// 0, routing 43, fragment 44, destination options 60), length in
    /// 8-byte units beyond the first (the fragment header's is 0), and the
    /// routing header's segments left or the fragment header's offset
    /// field (M in its low bit).
    #[derive(Clone, Copy, Debug)]
    struct Ext {
        kind: u8,
        units: u8,
        field: u16,
    }

    impl Ext {
        /// Its bytes, the next-header byte left for the chain.
        fn bytes(&self) -> Vec<u8> {
            let units = if self.kind == 44 { 0 } else { self.units };
            let len = (usize::from(units) + 1) * 8;
            let mut h = vec![0u8; len];
            h[1] = units;
            match self.kind {
                43 => {
                    h[2] = 4; // segment routing
                    h[3] = self.field as u8;
                }
                44 => {
                    h[2..4].copy_from_slice(&(self.field & 0xfff9).to_be_bytes());
                    h[4..8].copy_from_slice(&0x5eed_f00du32.to_be_bytes());
                }
                // Options: one PadN filling the header.
                _ => {
                    h[2] = 1;
                    h[3] = (len - 4) as u8;
                }
            }
            h
        }
    }

    fn ext_strategy() -> impl Strategy<Value = Ext> {
        (
            prop::sample::select(vec![0u8, 43, 44, 60]),
            0u8..=2,
            prop_oneof![Just(0u16), Just(1), any::<u16>()],
        )
            .prop_map(|(kind, units, field)| Ext { kind, units, field })
    }

    /// Rewrites the next-header chain of IPv6 packet `p`, built by
    /// [`Ip::header`] with `exts` as its (all destination options) `ext`:
    /// each header gets its own type, the last names `upper`.
    fn chain(p: &mut [u8], exts: &[Ext], upper: u8) {
        let mut at = 6;
        let mut next_at = 40;
        for e in exts {
            p[at] = e.kind;
            at = next_at;
            next_at += e.bytes().len();
        }
        p[at] = upper;
    }

    /// Why segmentation must refuse a super-packet with these headers, if
    /// it must: a hop-by-hop header not first (RFC 8200 §4.1), a piece of
    /// a fragmented packet, a routing header with segments left (its final
    /// destination, which the checksum covers, is in the header).
    fn refusal(exts: &[Ext]) -> Option<DropReason> {
        let (mut fragment, mut routing_left) = (false, false);
        for (i, e) in exts.iter().enumerate() {
            match e.kind {
                0 if i > 0 => return Some(DropReason::Malformed),
                // A later fragment: what follows is data, the walk ends.
                44 if e.field & 0xfff8 != 0 => {
                    fragment = true;
                    break;
                }
                // A first fragment (M): the walk goes on.
                44 if e.field & 1 != 0 => fragment = true,
                43 if e.field as u8 != 0 => routing_left = true,
                _ => {}
            }
        }
        if fragment {
            Some(DropReason::Fragment)
        } else {
            routing_left.then_some(DropReason::Unsupported)
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// IPv6 super-packets (TCP and UDP) with a chain of extension
        /// headers: hop-by-hop, routing, fragment and destination options,
        /// in any order. Those segmentation may cut come out as the
        /// segments a sender would send, every one carrying the same
        /// extension headers, parsing to the same upper layer, with its own
        /// payload length and a verifying checksum, their payloads the
        /// original's in order; the others are refused under their reason
        /// with the input untouched.
        #[test]
        fn ipv6_extension_headers_are_copied_to_every_segment(
            ip in ip_strategy(),
            exts in prop::collection::vec(ext_strategy(), 0..=4),
            t in tcp_strategy(),
            udp in any::<bool>(),
            mss in 1usize..=1400,
            segs in 1usize..=64,
            short in any::<prop::sample::Index>(),
        ) {
            let mut ip6 = Ip::v6();
            ip6.src = ip.src;
            ip6.dst = ip.dst;
            ip6.tos = ip.tos;
            ip6.ttl = ip.ttl;
            ip6.ext = exts.iter().flat_map(Ext::bytes).collect();
            let ip = ip6;
            let upper = if udp { 17 } else { 6 };
            let th = if udp { 8 } else { 20 + t.options.len() };
            // Up to 64 segments, the last one short, within IPv6's 65535.
            let payload = (mss * segs - short.index(mss)).min(65535 - ip.ext.len() - th);
            let (mut b, m) = if udp {
                let b = testpkt::udp(&ip, t.sport, t.dport, &testpkt::payload(0, payload, 2), Csum::Partial);
                let m = testpkt::super_meta(&b, GsoKind::Udp, mss as u16);
                (b, m)
            } else {
                tcp_super(&ip, &t, payload, mss as u16)
            };
            prop_assert_eq!(usize::from(m.l4), 40 + ip.ext.len());
            chain(&mut b, &exts, upper);
            let mut pool = Pool::new(VECTOR_SIZE + 1, ROOM);
            let id = testpkt::load(&mut pool, &b, m);
            let mut out = PacketVector::new();
            let r = segment(&mut pool, id, &mut out, InnerLink::Ip);
            if let Some(why) = refusal(&exts) {
                prop_assert_eq!(r, Err(why));
                prop_assert_eq!(pool.data(id), &b[..]);
                prop_assert_eq!(pool.available(), pool.capacity() - 1);
                return Ok(());
            }
            let n = payload.div_ceil(mss);
            prop_assert_eq!(r, Ok(n));
            let mut want = if udp {
                testpkt::udp_train(&ip, t.sport, t.dport, &sizes(n, mss, payload - (n - 1) * mss), Csum::Full, 2)
            } else {
                testpkt::tcp_train(&ip, &t, &sizes(n, mss, payload - (n - 1) * mss), 7)
            };
            want.iter_mut().for_each(|w| chain(w, &exts, upper));
            let segs = out_bytes(&pool, &out);
            prop_assert_eq!(&segs, &want);
            // Checked again without the builder: what a receiver reads.
            let mut joined = Vec::new();
            for (s, &sid) in segs.iter().zip(out.as_slice()) {
                let p = ipv6::Packet::new_checked(&s[..]).unwrap();
                prop_assert_eq!(usize::from(p.payload_len()) + 40, s.len());
                let u = p.upper_layer().unwrap();
                prop_assert_eq!(u8::from(u.protocol), upper);
                prop_assert_eq!(u.offset, ip.ext.len());
                prop_assert_eq!(&s[40..40 + ip.ext.len()], &b[40..40 + ip.ext.len()]);
                prop_assert_eq!(usize::from(pool.meta(sid).l4), 40 + u.offset);
                let transport = &p.payload()[u.offset..];
                if udp {
                    let d = udp::Packet::new_checked(transport).unwrap();
                    prop_assert_eq!(usize::from(d.len()), transport.len());
                    prop_assert_eq!(
                        d.verify_checksum_v6(&p.src_addr(), &p.dst_addr()),
                        udp::ChecksumStatus::Valid
                    );
                } else {
                    prop_assert!(tcp_ok(s));
                }
                joined.extend_from_slice(&transport[th..]);
            }
            prop_assert_eq!(&joined[..], &b[b.len() - payload..]);
            out.as_slice().iter().for_each(|&s| pool.free(s));
            prop_assert_eq!(pool.available(), pool.capacity());
        }
    }

    /// Metadata of a frame without IP, as decapsulation leaves it.
    fn arp_meta(arp: &[u8]) -> PacketMeta {
        PacketMeta {
            l3: 0,
            l4: 0,
            ..testpkt::meta_of(arp, ChecksumState::None)
        }
    }

    proptest! {
        // Frames add the Ethernet header's dimensions to the packets'.
        #![proptest_config(ProptestConfig::with_cases(192))]

        /// coalesce(segment(x)) == x for super-frames (TCP and UDP, with or
        /// without a VLAN tag); ARP frames between the segments pass
        /// untouched and do not stop the merge.
        #[test]
        fn super_frame_segments_then_coalesces_back_around_arp(
            ip in ip_strategy(),
            t in tcp_strategy(),
            eth in eth_strategy(),
            udp in any::<bool>(),
            mss in 1usize..=1460,
            segs in 2usize..=64,
            short in 0usize..1460,
            arp_every in 1usize..8,
        ) {
            let mss = if udp { mss.min(1000) } else { mss };
            let hdr = ip.hlen() + if udp { 8 } else { 20 + t.options.len() };
            let payload = (mss * (segs - 1) + mss - short % mss).min(65535 - hdr);
            prop_assume!(payload > mss);
            let (b, m) = if udp {
                let b = testpkt::udp(&ip, t.sport, t.dport, &testpkt::payload(0, payload, 2), Csum::Partial);
                let m = testpkt::super_meta(&b, GsoKind::Udp, mss as u16);
                (b, m)
            } else {
                tcp_super(&ip, &t, payload, mss as u16)
            };
            let (f, fm) = (eth.wrap(&b), eth.meta(m));
            let mut pool = Pool::new(140, ROOM);
            let id = testpkt::load(&mut pool, &f, fm);
            let mut segv = PacketVector::new();
            let n = segment(&mut pool, id, &mut segv, InnerLink::Ethernet).unwrap();
            prop_assert_eq!(n, payload.div_ceil(mss));
            let arp = eth.arp();
            let am = arp_meta(&arp);
            let mut v = PacketVector::new();
            let mut arps = 0;
            for (k, &s) in segv.as_slice().iter().enumerate() {
                v.push(s).unwrap();
                if k % arp_every == 0 {
                    v.push(testpkt::load(&mut pool, &arp, am)).unwrap();
                    arps += 1;
                }
            }
            prop_assert_eq!(Gro::new().coalesce(&mut pool, &mut v, testpkt::eth_link), n - 1);
            prop_assert_eq!(v.len(), 1 + arps);
            prop_assert_eq!(pool.data(v.as_slice()[0]), &f[..]);
            prop_assert_eq!(*pool.meta(v.as_slice()[0]), fm);
            for &a in &v.as_slice()[1..] {
                prop_assert_eq!(pool.data(a), &arp[..]);
                prop_assert_eq!(*pool.meta(a), am);
            }
            for &o in v.as_slice() {
                pool.free(o);
            }
            prop_assert_eq!(pool.available(), pool.capacity());
        }

        /// segment(coalesce(x)) == x for trains of frames (TCP segments or
        /// UDP datagrams), with an ARP frame somewhere among them.
        #[test]
        fn frame_train_coalesces_then_segments_back_around_arp(
            ip in ip_strategy(),
            t in tcp_strategy(),
            eth in eth_strategy(),
            udp in any::<bool>(),
            n in 1usize..=45,
            mss in 1usize..=1400,
            last in 1usize..=1400,
            arp_at in any::<prop::sample::Index>(),
        ) {
            let x = if udp {
                testpkt::udp_train(&ip, t.sport, t.dport, &sizes(n, mss, last), Csum::Full, 9)
            } else {
                testpkt::tcp_train(&ip, &t, &sizes(n, mss, last), 5)
            };
            let frames: Vec<_> = x.iter().map(|p| eth.wrap(p)).collect();
            let want_meta: Vec<_> = x
                .iter()
                .map(|p| eth.meta(testpkt::meta_of(p, ChecksumState::None)))
                .collect();
            let arp = eth.arp();
            let am = arp_meta(&arp);
            let arp_pos = arp_at.index(n + 1);
            let mut pool = Pool::new(2 * n + 4, ROOM);
            let mut v = PacketVector::new();
            for (k, (f, &m)) in frames.iter().zip(&want_meta).enumerate() {
                if k == arp_pos {
                    v.push(testpkt::load(&mut pool, &arp, am)).unwrap();
                }
                v.push(testpkt::load(&mut pool, f, m)).unwrap();
            }
            if arp_pos == n {
                v.push(testpkt::load(&mut pool, &arp, am)).unwrap();
            }
            let merged = Gro::new().coalesce(&mut pool, &mut v, testpkt::eth_link);
            prop_assert_eq!(merged + v.len(), n + 1);
            let total: usize = frames.iter().map(|f| f.len()).sum();
            if !udp && total - (n - 1) * (eth.hlen() + ip.hlen() + 20 + t.options.len()) <= 65535 + eth.hlen() {
                prop_assert_eq!(v.len(), 2, "one super-frame and the ARP frame");
            }
            let mut out = PacketVector::new();
            for &id in v.as_slice() {
                segment(&mut pool, id, &mut out, InnerLink::Ethernet).unwrap();
            }
            let (mut got, mut got_meta, mut got_arp) = (Vec::new(), Vec::new(), Vec::new());
            for &id in out.as_slice() {
                if pool.data(id) == &arp[..] {
                    got_arp.push(*pool.meta(id));
                } else {
                    got.push(pool.data(id).to_vec());
                    got_meta.push(*pool.meta(id));
                }
                pool.free(id);
            }
            prop_assert_eq!(got, frames);
            prop_assert_eq!(got_meta, want_meta);
            prop_assert_eq!(got_arp, vec![am]);
            prop_assert_eq!(pool.available(), pool.capacity());
        }
    }

    #[test]
    fn address_helpers_agree_with_tep_wire() {
        // The oracle and tep-wire agree on what a valid segment is.
        let p = testpkt::tcp(&Ip::v4(), &Tcp::new(), b"abc", Csum::Full);
        let ip = ipv4::Packet::new_checked(&p[..]).unwrap();
        assert_eq!(ip.src_addr(), Ipv4Addr::new(10, 201, 0, 1));
        assert!(tcp_ok(&p));
        let p = testpkt::tcp(&Ip::v6(), &Tcp::new(), b"abc", Csum::Full);
        let ip = ipv6::Packet::new_checked(&p[..]).unwrap();
        assert_eq!(ip.dst_addr(), "fd00::2".parse::<Ipv6Addr>().unwrap());
        assert!(tcp_ok(&p));
    }
}
