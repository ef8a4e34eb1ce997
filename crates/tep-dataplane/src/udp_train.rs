//! UDP GSO trains (`UDP_SEGMENT` / `UDP_GRO`): built from datagrams for
//! one send, split back into datagrams, and, on receive, cut up where they
//! lie so that decapsulation can merge them (`gro::merge_train`).
//! The conventions are segmentation's (`gso`): IP at the data start where tep
//! parses the outer headers.

use crate::buffer::{ChecksumState, Gso, GsoKind, PacketId, PacketMeta, Pool};
use crate::drop::DropReason;
use crate::geometry::{ip_tos_ttl, locate_ip, set_ip_len, MAX_IP_LEN};
use crate::gso::{emit, out_meta, routing_pending, udp_layout, Layout, Pieces};
use crate::tunnel::TunnelTable;
use crate::vector::{PacketVector, VECTOR_SIZE};
use tep_wire::{ipv4, ipv6, udp};

/// Most datagrams in one UDP GSO train. Linux's `UDP_MAX_SEGMENTS`
/// (include/linux/udp.h) was `1 << 6` from `UDP_SEGMENT`'s introduction
/// (bec1f6f69736, "udp: generate gso with UDP_SEGMENT", 4.18) and became
/// `1 << 7` in 1382e3b6a350 ("net: change maximum number of UDP segments to
/// 128", 2024, backported to stable); `udp_send_skb` refuses more with
/// EINVAL. 64 is what every kernel with `UDP_SEGMENT` accepts.
pub const UDP_MAX_SEGMENTS: usize = 64;

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
pub(crate) fn build_udp_train(pool: &mut Pool, ids: &[PacketId]) -> Result<PacketId, DropReason> {
    let Some((&first, rest)) = ids.split_first() else {
        return Err(DropReason::Malformed);
    };
    if ids.len() > UDP_MAX_SEGMENTS {
        return Err(DropReason::TooBig);
    }
    if !pool.meta(first).outer_in_buffer() {
        return build_bare(pool, first, rest);
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
    pool.set_len(train, total);
    pool.copy_between(first, 0..end, train, 0);
    let mut at = end;
    for &id in rest {
        let n = pool.data(id).len() - hdr;
        pool.copy_between(id, hdr..hdr + n, train, at);
        at += n;
    }
    let meta = PacketMeta {
        gso: Some(Gso {
            kind: GsoKind::Udp,
            segment_size: seg as u16,
        }),
        ..out_meta(*pool.meta(first), &lay, csum)
    };
    pool.copy_meta(first, train, meta);
    for &id in ids {
        pool.free(id);
    }
    Ok(train)
}

/// [`build_udp_train`] of datagrams without outer headers (a socket writes
/// them: [`OuterLayers::UdpPayload`](crate::io::OuterLayers)): their
/// payloads one after the other, which must share their outer fields and
/// `meta.csum`, sized as there.
fn build_bare(pool: &mut Pool, first: PacketId, rest: &[PacketId]) -> Result<PacketId, DropReason> {
    let (seg, m, outer) = (
        pool.data(first).len(),
        *pool.meta(first),
        *pool.outer(first),
    );
    if seg == 0 || m.tail.is_some() {
        return Err(DropReason::Malformed);
    }
    let mut total = seg;
    for (k, &id) in rest.iter().enumerate() {
        let n = pool.meta(id);
        let len = pool.data(id).len();
        let last = k + 1 == rest.len();
        let qualifies = id != first
            && !rest[..k].contains(&id)
            && n.tail.is_none()
            && !n.outer_in_buffer()
            && (*pool.outer(id), n.csum) == (outer, m.csum)
            && len >= 1
            && (len == seg || (last && len < seg));
        if !qualifies {
            return Err(DropReason::Malformed);
        }
        total += len;
    }
    let limit = if outer.dst.is_ipv4() {
        MAX_IP_LEN - ipv4::HEADER_LEN - udp::HEADER_LEN
    } else {
        MAX_IP_LEN - udp::HEADER_LEN
    };
    if total > pool.data_room() || total > limit {
        return Err(DropReason::TooBig);
    }
    let train = pool.alloc().ok_or(DropReason::NoBuffer)?;
    pool.set_len(train, total);
    let mut at = 0;
    for &id in core::iter::once(&first).chain(rest) {
        let n = pool.data(id).len();
        pool.copy_between(id, 0..n, train, at);
        at += n;
    }
    let meta = PacketMeta {
        gso: Some(Gso {
            kind: GsoKind::Udp,
            segment_size: seg as u16,
        }),
        ..m
    };
    pool.copy_meta(first, train, meta);
    pool.free(first);
    for &id in rest {
        pool.free(id);
    }
    Ok(train)
}

/// Splits a UDP GSO train (as `build_udp_train` makes, or as a socket
/// hands one to the kernel) into whole datagrams pushed to `out`; returns
/// how many and frees `id`.
///
/// Each datagram has the template's headers with its own lengths (IPv4:
/// identification = template's + i, header checksum), and a UDP checksum
/// of 0 if the template's is 0 (`meta.csum = Zero`), else the complete
/// correct one (`meta.csum = None`). This is what the kernel's
/// `__udp_gso_segment` does for a socket, and what a pcap writer needs.
/// A train marked `Verified` (received with `UDP_GRO`: the kernel checked
/// every datagram) is cut without reading the payload for checksums: each
/// datagram keeps the template's checksum field and is marked `Verified`.
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
    let seg = segment_of(pool, id)?;
    if !pool.meta(id).outer_in_buffer() {
        return split_bare(pool, id, out, seg);
    }
    let data = pool.data(id);
    let (lay, end) = udp_layout(data, true)?;
    if end - lay.l4 - udp::HEADER_LEN != seg {
        return Err(DropReason::BadLength);
    }
    let zero = udp::Packet::new_unchecked(&data[lay.l4..]).checksum_zero();
    if !zero && lay.v6 {
        let ip = locate_ip(data, 0, 0)?;
        if routing_pending(data, &ip) {
            return Err(DropReason::Unsupported);
        }
    }
    let checksums = if zero {
        Pieces::Zero
    } else if pool.meta(id).csum == ChecksumState::Verified {
        Pieces::Trusted
    } else {
        Pieces::Compute
    };
    emit(pool, id, out, lay, seg, checksums, false)
}

/// [`split_udp_train`] of a train without outer headers (a socket took
/// them: [`OuterLayers::UdpPayload`](crate::io::OuterLayers)): each
/// datagram is copied into a buffer of its own with the train's metadata,
/// its checksum state included (the socket verified every datagram).
fn split_bare(
    pool: &mut Pool,
    id: PacketId,
    out: &mut PacketVector,
    seg: usize,
) -> Result<usize, DropReason> {
    let len = pool.data(id).len();
    let n = len.div_ceil(seg).max(1);
    if n > VECTOR_SIZE - out.len() {
        return Err(DropReason::TooBig);
    }
    if n > pool.available() {
        return Err(DropReason::NoBuffer);
    }
    let meta = PacketMeta {
        gso: None,
        tail: None,
        ..*pool.meta(id)
    };
    for k in 0..n {
        let (start, end) = (k * seg, ((k + 1) * seg).min(len));
        // Available: checked above.
        let Some(d) = pool.alloc() else { break };
        pool.set_len(d, end - start);
        pool.copy_between(id, start..end, d, 0);
        pool.copy_meta(id, d, meta);
        // Room: checked above.
        out.put(pool, d);
    }
    pool.free(id);
    Ok(n)
}

/// The datagram size of UDP train `id`: `Malformed` for anything else.
fn segment_of(pool: &Pool, id: PacketId) -> Result<usize, DropReason> {
    match pool.meta(id).gso {
        Some(Gso {
            kind: GsoKind::Udp,
            segment_size,
        }) if segment_size > 0 => Ok(usize::from(segment_size)),
        _ => Err(DropReason::Malformed),
    }
}

/// The segment size and outer header length of UDP GRO train `id` (as
/// [`split_udp_train`] takes one: outer headers of the first datagram, if
/// tep parses them, then the datagrams), and its layout (`None` without
/// headers).
fn train_shape(pool: &Pool, id: PacketId) -> Result<(usize, usize, Option<Layout>), DropReason> {
    let seg = segment_of(pool, id)?;
    if !pool.meta(id).outer_in_buffer() {
        return Ok((seg, 0, None));
    }
    let (lay, end) = udp_layout(pool.data(id), true)?;
    let hdr = lay.l4 + udp::HEADER_LEN;
    if end != hdr + seg {
        return Err(DropReason::BadLength);
    }
    Ok((seg, hdr, Some(lay)))
}

/// Copies the datagram of UDP GRO train `train` that starts `at` bytes
/// into its payload into a buffer of its own, behind a copy of the
/// train's outer headers (if it has them) sized for it, and returns it
/// with the segment size. The train is left as it is: this is how
/// `gro::merge_train` gets a packet to run through
/// decapsulation while the rest of the train waits in place.
pub(crate) fn detach_at(
    pool: &mut Pool,
    train: PacketId,
    at: usize,
) -> Result<(PacketId, usize), DropReason> {
    let (seg, _, _) = train_shape(pool, train)?;
    Ok((copy_from_train(pool, train, at, seg)?, seg))
}

/// A new train: the outer headers of train `id`, sized for its datagrams
/// from payload offset `from` on, and up to `len` bytes of them, copied,
/// with `id`'s metadata. `id` keeps its bytes.
fn copy_from_train(
    pool: &mut Pool,
    id: PacketId,
    from: usize,
    len: usize,
) -> Result<PacketId, DropReason> {
    let (seg, hdr, lay) = train_shape(pool, id)?;
    let end = pool.data(id).len();
    if hdr + from >= end {
        return Err(DropReason::BadLength);
    }
    let n = len.min(end - hdr - from);
    let out = pool.alloc().ok_or(DropReason::NoBuffer)?;
    pool.set_len(out, hdr + n);
    pool.copy_between(id, 0..hdr, out, 0);
    pool.copy_between(id, hdr + from..hdr + from + n, out, hdr);
    let meta = PacketMeta {
        tail: None,
        ..*pool.meta(id)
    };
    pool.copy_meta(id, out, meta);
    retitle_train(pool, out, lay.as_ref(), hdr, seg);
    Ok(out)
}

/// Makes UDP GRO train `train` start at the datagram `at` bytes into its
/// payload: its outer headers, if it has them, move up over the end of the
/// datagram before it (which the caller has done with: [`detach_at`]
/// copied it) and are sized for the new first datagram. No payload moves.
/// `TooBig` when the headers are longer than a datagram (then
/// [`train_from`] copies).
pub(crate) fn advance_train(pool: &mut Pool, train: PacketId, at: usize) -> Result<(), DropReason> {
    let (seg, hdr, lay) = train_shape(pool, train)?;
    if at == 0 {
        return Ok(());
    }
    if hdr > seg {
        return Err(DropReason::TooBig);
    }
    if hdr + at >= pool.data(train).len() {
        return Err(DropReason::BadLength);
    }
    pool.data_mut(train).copy_within(0..hdr, at);
    pool.trim_front(train, at);
    retitle_train(pool, train, lay.as_ref(), hdr, seg);
    Ok(())
}

/// Writes the outer lengths of UDP train `id` (headers `lay` of `hdr`
/// bytes, if any, then datagrams of `seg` bytes) for its first datagram,
/// and marks it a train only if it holds more than one.
fn retitle_train(pool: &mut Pool, id: PacketId, lay: Option<&Layout>, hdr: usize, seg: usize) {
    let payload = pool.data(id).len() - hdr;
    let first = payload.min(seg);
    if let Some(lay) = lay {
        let data = pool.data_mut(id);
        set_ip_len(data, lay.v6, hdr + first, None);
        let u = &mut data[lay.l4..];
        u[udp::field::LENGTH].copy_from_slice(&((first + udp::HEADER_LEN) as u16).to_be_bytes());
    }
    pool.meta_mut(id).gso = (payload > seg).then_some(Gso {
        kind: GsoKind::Udp,
        segment_size: seg as u16,
    });
}

/// A new train of the datagrams of train `id` from payload offset `from`
/// on, with `id`'s outer headers and metadata, copied; `id` keeps its
/// bytes. For when [`advance_train`] cannot move the headers.
pub(crate) fn train_from(
    pool: &mut Pool,
    id: PacketId,
    from: usize,
) -> Result<PacketId, DropReason> {
    copy_from_train(pool, id, from, usize::MAX)
}

/// Where the UDP GSO train that can start at `ids[i]` ends (exclusive):
/// the datagrams after it of the same tunnel, flow and outer TOS and TTL,
/// each the size of the first but the last (which may be shorter), at
/// most [`UDP_MAX_SEGMENTS`], within the 16-bit IP length the kernel
/// builds the train as (IPv4 total length, IPv6 payload length). A
/// zero-checksum tunnel, or a packet of no tunnel (a reply), makes no train
/// (`i + 1`): Linux refuses UDP GSO without checksums.
///
/// Node `udp-train` copies each run into one buffer; host mode sends a run
/// straight from its buffers (one message of several parts).
pub fn train_end(pool: &Pool, ids: &[PacketId], i: usize, table: &TunnelTable) -> usize {
    let first = ids[i];
    let m = *pool.meta(first);
    let mut j = i + 1;
    if (m.tunnel as usize) >= table.tunnels().len()
        || table.get(m.tunnel).checksum == crate::config::ChecksumMode::Zero
    {
        return j;
    }
    // A network's packets of one flow may go to several VTEPs (a flooded
    // frame's copies): one train, one destination.
    let multipoint = table.is_network(m.tunnel);
    let size = pool.total_len(first);
    let headers = usize::from(m.udp_payload);
    let (tos, ttl, v4) = outer_class(pool, first);
    // The 16-bit length the kernel builds the train's IP packet with:
    // IPv4's total length (the header is 20 bytes: tep writes no options),
    // IPv6's payload length.
    let limit = if v4 {
        usize::from(u16::MAX) - ipv4::HEADER_LEN - udp::HEADER_LEN
    } else {
        usize::from(u16::MAX) - udp::HEADER_LEN
    };
    let mut total = size - headers;
    // One train, one outer header: the same DSCP, ECN and TTL throughout.
    while j < ids.len() && j - i < UDP_MAX_SEGMENTS {
        let n = pool.meta(ids[j]);
        let len = pool.total_len(ids[j]);
        if n.tunnel != m.tunnel
            || n.flow_hash != m.flow_hash
            || (multipoint && pool.vtep(ids[j]) != pool.vtep(first))
            || outer_class(pool, ids[j]) != (tos, ttl, v4)
            || len > size
            || len < headers
            || total + len - headers > limit
        {
            break;
        }
        total += len - headers;
        j += 1;
        if len < size {
            break;
        }
    }
    j
}

/// The outer TOS, TTL and family (IPv4) of an encapsulated packet: from
/// its headers where tep wrote them, else from `meta.outer`.
fn outer_class(pool: &Pool, id: PacketId) -> (u8, u8, bool) {
    let m = pool.meta(id);
    if m.outer_in_buffer() {
        let (tos, ttl) = ip_tos_ttl(pool.data(id));
        (tos, ttl, pool.data(id)[0] >> 4 == 4)
    } else {
        let o = pool.outer(id);
        (o.tos, o.ttl, o.dst.is_ipv4())
    }
}

/// Node `udp-train`: each run [`train_end`] finds becomes one train.
pub(crate) fn make_trains(pool: &mut Pool, v: &mut PacketVector, table: &TunnelTable) {
    let ids = v.as_slice();
    let mut out = PacketVector::new();
    let mut i = 0;
    while i < ids.len() {
        let j = train_end(pool, ids, i, table);
        if j - i > 1 {
            if let Ok(train) = build_udp_train(pool, &ids[i..j]) {
                out.put(pool, train);
                i = j;
                continue;
            }
        }
        for &id in &ids[i..j] {
            out.put(pool, id);
        }
        i = j;
    }
    *v = out;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testpkt::{self, ip_strategy, load_all, metas, out_bytes, sizes, Csum, Ip};
    use proptest::prelude::*;

    const ROOM: usize = crate::buffer::SUPER_PACKET_ROOM;

    /// Datagrams loaded into `pool` as the encap path leaves them.
    fn load_datagrams(pool: &mut Pool, dgrams: &[Vec<u8>]) -> Vec<PacketId> {
        dgrams
            .iter()
            .map(|d| testpkt::load(pool, d, testpkt::meta_of(d, ChecksumState::None)))
            .collect()
    }

    #[test]
    fn udp_train_round_trip_and_layout() {
        let mut pool = Pool::new(16, ROOM);
        let dgrams = testpkt::udp_train(&Ip::v4(), 5000, 4789, &[300, 300, 120], Csum::Full, 3);
        let ids = load_datagrams(&mut pool, &dgrams);
        let train = build_udp_train(&mut pool, &ids).unwrap();
        assert_eq!(pool.available(), 16 - 1);
        let t = pool.data(train);
        assert_eq!(t.len(), 20 + 8 + 720);
        assert_eq!(
            &t[..328],
            &dgrams[0][..],
            "the first datagram is the template"
        );
        assert_eq!(&t[328..628], &dgrams[1][28..]);
        let m = *pool.meta(train);
        assert_eq!(
            m.gso,
            Some(Gso {
                kind: GsoKind::Udp,
                segment_size: 300
            })
        );
        assert_eq!(
            (m.l3, m.l4, m.csum, m.tunnel),
            (0, 20, ChecksumState::None, 3)
        );
        let mut out = PacketVector::new();
        assert_eq!(split_udp_train(&mut pool, train, &mut out), Ok(3));
        assert_eq!(out_bytes(&pool, &out), dgrams);
        assert_eq!(pool.available(), 16 - 3);
    }

    /// A train the kernel verified (UDP_GRO) is cut without computing
    /// checksums: each datagram keeps the template's field and is Verified.
    #[test]
    fn trusted_udp_train_split_keeps_checksums_unread() {
        let mut pool = Pool::new(16, ROOM);
        let dgrams = testpkt::udp_train(&Ip::v6(), 4789, 4789, &[400, 400, 7], Csum::Full, 5);
        let ids = load_datagrams(&mut pool, &dgrams);
        let train = build_udp_train(&mut pool, &ids).unwrap();
        // As a socket hands it over: the template's checksum field is a
        // placeholder, not the first datagram's.
        pool.data_mut(train)[40 + 6..40 + 8].copy_from_slice(&[0xab, 0xcd]);
        pool.meta_mut(train).csum = ChecksumState::Verified;
        let mut out = PacketVector::new();
        assert_eq!(split_udp_train(&mut pool, train, &mut out), Ok(3));
        for (k, &id) in out.as_slice().iter().enumerate() {
            let d = pool.data(id);
            assert_eq!(d.len(), dgrams[k].len());
            assert_eq!(&d[48..], &dgrams[k][48..], "payload {k}");
            assert_eq!(&d[4..6], &dgrams[k][4..6], "IPv6 payload length {k}");
            assert_eq!(&d[44..46], &dgrams[k][44..46], "UDP length {k}");
            assert_eq!(&d[46..48], &[0xab, 0xcd], "checksum left as given {k}");
            assert_eq!(pool.meta(id).csum, ChecksumState::Verified);
        }
    }

    #[test]
    fn udp_train_refusals() {
        let mut pool = Pool::new(80, ROOM);
        let mk = |pool: &mut Pool, ip: &Ip, sizes: &[usize], csum: Csum| -> Vec<PacketId> {
            testpkt::udp_train(ip, 5000, 4789, sizes, csum, 0)
                .iter()
                .map(|d| {
                    let c = if csum == Csum::Zero {
                        ChecksumState::Zero
                    } else {
                        ChecksumState::None
                    };
                    testpkt::load(pool, d, testpkt::meta_of(d, c))
                })
                .collect()
        };
        let check = |pool: &mut Pool, ids: &[PacketId], want: DropReason| {
            let before: Vec<_> = ids.iter().map(|&i| pool.data(i).to_vec()).collect();
            let avail = pool.available();
            assert_eq!(build_udp_train(pool, ids), Err(want));
            assert_eq!(pool.available(), avail);
            let after: Vec<_> = ids.iter().map(|&i| pool.data(i).to_vec()).collect();
            assert_eq!(before, after);
        };
        let ids = mk(&mut pool, &Ip::v4(), &[100, 200], Csum::Full);
        check(&mut pool, &ids, DropReason::Malformed); // last longer
        let ids2 = mk(&mut pool, &Ip::v4(), &[100, 50, 100], Csum::Full);
        check(&mut pool, &ids2, DropReason::Malformed); // short in the middle
        check(&mut pool, &[ids2[0], ids2[0]], DropReason::Malformed);
        check(&mut pool, &[], DropReason::Malformed);
        let mut ttl = Ip::v4();
        ttl.ttl = 9;
        let other = mk(&mut pool, &ttl, &[100], Csum::Full);
        check(&mut pool, &[ids2[0], other[0]], DropReason::Malformed);
        let zero = mk(&mut pool, &Ip::v4(), &[100], Csum::Zero);
        check(&mut pool, &[ids2[0], zero[0]], DropReason::Malformed);
        let v6 = mk(&mut pool, &Ip::v6(), &[100], Csum::Full);
        check(&mut pool, &[ids2[0], v6[0]], DropReason::Malformed);
        for id in ids
            .iter()
            .chain(&ids2)
            .chain(&other)
            .chain(&zero)
            .chain(&v6)
        {
            pool.free(*id);
        }
        let many = mk(
            &mut pool,
            &Ip::v4(),
            &[10; UDP_MAX_SEGMENTS + 1],
            Csum::Full,
        );
        check(&mut pool, &many, DropReason::TooBig);
        assert!(build_udp_train(&mut pool, &many[..UDP_MAX_SEGMENTS]).is_ok());
        pool.free(many[UDP_MAX_SEGMENTS]);
        let big = mk(&mut pool, &Ip::v4(), &[1400; 47], Csum::Full);
        check(&mut pool, &big, DropReason::TooBig); // 20 + 8 + 65800 > 65535
        assert!(build_udp_train(&mut pool, &big[..46]).is_ok());
    }

    #[test]
    fn split_refusals() {
        let mut pool = Pool::new(4, ROOM);
        let mut out = PacketVector::new();
        let d = testpkt::udp(&Ip::v4(), 1, 2, &[7; 100], Csum::Full);
        let plain = testpkt::meta_of(&d, ChecksumState::None);
        let id = testpkt::load(&mut pool, &d, plain);
        assert_eq!(
            split_udp_train(&mut pool, id, &mut out),
            Err(DropReason::Malformed)
        );
        let m = PacketMeta {
            gso: Some(Gso {
                kind: GsoKind::Udp,
                segment_size: 60,
            }),
            ..plain
        };
        *pool.meta_mut(id) = m;
        assert_eq!(
            split_udp_train(&mut pool, id, &mut out),
            Err(DropReason::BadLength),
            "the template's payload is not one segment"
        );
        assert_eq!(pool.data(id), &d[..]);
        assert!(out.is_empty());
    }

    proptest! {
        /// split_udp_train(build_udp_train(xs)) == xs.
        #[test]
        fn udp_train_builds_then_splits_back(
            ip in ip_strategy(),
            ports in any::<(u16, u16)>(),
            n in 1usize..=UDP_MAX_SEGMENTS,
            size in 1usize..=1400,
            last in 1usize..=1400,
            zero in any::<bool>(),
        ) {
            let csum = if zero { Csum::Zero } else { Csum::Full };
            let state = if zero { ChecksumState::Zero } else { ChecksumState::None };
            let s = sizes(n, size, last);
            prop_assume!(ip.hlen() + 8 + s.iter().sum::<usize>() <= 65535);
            let xs = testpkt::udp_train(&ip, ports.0, ports.1, &s, csum, 4);
            let mut pool = Pool::new(2 * n + 2, ROOM);
            let v = load_all(&mut pool, &xs, state);
            let want_meta = metas(&pool, &v);
            let train = build_udp_train(&mut pool, v.as_slice()).unwrap();
            prop_assert_eq!(pool.available(), pool.capacity() - 1);
            let mut out = PacketVector::new();
            prop_assert_eq!(split_udp_train(&mut pool, train, &mut out), Ok(n));
            prop_assert_eq!(out_bytes(&pool, &out), xs);
            prop_assert_eq!(metas(&pool, &out), want_meta);
        }
    }
}
