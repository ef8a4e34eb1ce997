//! A worker's UDP side: datagrams and GRO trains received straight into
//! the pool, and the pipeline's outer packets sent gathered, runs of one
//! flow as GSO trains. The socket writes and reads the outer IP and UDP
//! headers ([`OuterLayers::UdpPayload`]); their fields travel in
//! `meta.outer` both ways, as quinn's `RecvMeta` and `Transmit` carry them.
//!
//! [`OuterLayers::UdpPayload`]: tep_dataplane::OuterLayers

use crate::daemon::stats::{IoCounters, IoEvent, TunnelTraffic};
use crate::daemon::trace::{Point, Tracer};
use std::io::{self, IoSlice, IoSliceMut};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;
use tep_dataplane::{
    train_end, DropReason, Gso, GsoKind, Outer, PacketId, PacketMeta, PacketVector, Pool,
    TunnelTable, NO_TUNNEL, VECTOR_SIZE,
};
use tep_sys::{Gathered, RecvMeta, UdpSocket, MAX_BATCH};

/// Per-tunnel facts the sinks need, resolved once.
#[derive(Debug)]
pub(super) struct TunnelFacts {
    /// Per tunnel: its endpoint's index.
    pub endpoint: Vec<usize>,
    /// Per tunnel: it carries Ethernet (its packets go to the TAP).
    pub ethernet: Vec<bool>,
    /// The local endpoints, in socket order.
    pub endpoints: Vec<SocketAddr>,
    /// The tunnels, for finding GSO runs.
    pub table: TunnelTable,
    /// The MTU of the TUN and of the TAP: a longer TCP packet out of a
    /// tunnel is a super-packet to segment (see `device_io::write_inner`).
    pub device_mtu: [u32; 2],
    /// Per tunnel: for a network, its device's queue among the worker's
    /// (`WorkerIo::networks`).
    pub network_queue: Vec<Option<usize>>,
    /// Per tunnel: a network's device MTU.
    pub network_mtu: Vec<u32>,
    /// A UPF's data networks' devices, by network: where a session's
    /// uplink packets leave.
    pub data_devices: Vec<super::data_networks::Device>,
    /// The data network on the host TUN (`data_networks::NONE`: none).
    pub host_network: u8,
}

impl TunnelFacts {
    /// The socket to send an outer packet from: its tunnel's endpoint, or
    /// for a reply without a tunnel (an Error Indication) the endpoint
    /// whose address and port are the packet's source.
    fn endpoint_of(&self, m: &PacketMeta, outer: &Outer) -> Option<usize> {
        if m.tunnel != NO_TUNNEL {
            return self.endpoint.get(m.tunnel as usize).copied();
        }
        let src = SocketAddr::new(outer.src, outer.src_port);
        self.endpoints.iter().position(|&e| e == src)
    }
}

/// The worker's counters besides the pipeline's.
#[derive(Debug)]
pub(super) struct Tallies {
    pub tunnels: Vec<TunnelTraffic>,
    pub io: IoCounters,
    /// Send runs of datagrams as GSO trains (off when a socket refused).
    pub trains: bool,
}

/// One `recvmmsg` into fresh buffers: each datagram (or GRO train) lands
/// at its buffer's start, and what the socket reports of its headers goes
/// to `meta.outer`. The kernel verified the UDP checksum (or accepted a
/// zero one where the socket allows it). Returns whether the batch came
/// back full.
pub(super) fn read_socket(
    sock: &mut UdpSocket,
    local: SocketAddr,
    pool: &mut Pool,
    input: &mut PacketVector,
    reserve: usize,
    io: &mut IoCounters,
    tracer: &Tracer,
) -> bool {
    let want = MAX_BATCH.min(pool.available().saturating_sub(reserve));
    let Some(first) = (want > 0).then(|| pool.alloc()).flatten() else {
        return false;
    };
    let mut ids = [first; MAX_BATCH];
    let mut n = 1;
    while n < want {
        match pool.alloc() {
            Some(id) => ids[n] = id,
            None => break,
        }
        n += 1;
    }
    let mut metas = [RecvMeta::default(); MAX_BATCH];
    let got = {
        let rooms: [&mut [u8]; MAX_BATCH] = pool.rooms_mut(&ids[..n], 0);
        let mut iov = rooms.map(IoSliceMut::new);
        sock.recv_batch(&mut iov[..n], &mut metas[..n])
    };
    io.count(IoEvent::UdpSyscalls, 1);
    let got = match got {
        Ok(g) => g,
        Err(e) => {
            if e.kind() != io::ErrorKind::WouldBlock {
                tracing::warn!("udp receive on {local}: {e}");
            }
            0
        }
    };
    for (k, &id) in ids[..n].iter().enumerate() {
        if k >= got {
            pool.free(id);
            continue;
        }
        let r = metas[k];
        pool.set_len(id, r.len);
        let outer = Outer {
            src: r.source.ip(),
            dst: local.ip(),
            src_port: r.source.port(),
            dst_port: local.port(),
            tos: r.tos,
            ttl: r.ttl,
        };
        pool.received_by_socket(id, outer);
        io.count(IoEvent::UdpRx, 1);
        if let Some(seg) = r.segment_size {
            pool.meta_mut(id).gso = Some(Gso {
                kind: GsoKind::Udp,
                segment_size: seg,
            });
            io.count(IoEvent::UdpRxTrains, 1);
        }
        if tracer.active() {
            let first = r.segment_size.map_or(r.len, usize::from).min(r.len);
            trace_datagram(
                tracer,
                Point::UdpRx,
                &outer,
                first,
                &[IoSlice::new(pool.data(id))],
            );
        }
        input.put(pool, id);
    }
    got == n
}

/// Records a datagram whose headers the socket writes or read: headers
/// rebuilt from `outer` (sized for `first` payload bytes: a train shows as
/// one super-datagram), then the payload's `parts`.
fn trace_datagram(
    tracer: &Tracer,
    point: Point,
    outer: &Outer,
    first: usize,
    parts: &[IoSlice<'_>],
) {
    let mut hdr = [0u8; 48];
    let Some(n) = outer.emit(first, &mut hdr) else {
        return;
    };
    let mut whole = [IoSlice::new(&[]); 4];
    whole[0] = IoSlice::new(&hdr[..n]);
    let k = parts.len().min(whole.len() - 1);
    whole[1..=k].copy_from_slice(&parts[..k]);
    tracer.record_parts(point, &whole[..=k]);
}

/// Datagrams in an outer packet or train of `len` bytes after `hdr`.
pub(super) fn datagrams(len: usize, hdr: usize, gso: Option<Gso>) -> u64 {
    match gso {
        Some(g) if g.segment_size > 0 => len
            .saturating_sub(hdr)
            .div_ceil(usize::from(g.segment_size))
            .max(1) as u64,
        _ => 1,
    }
}

/// The sockets outer packets leave from.
pub(super) struct Senders<'a> {
    /// Per endpoint: the receiving socket (replies, and all traffic when
    /// there are no sending sockets).
    pub sockets: &'a mut [UdpSocket],
    /// Per endpoint: the sending sockets, one source port each.
    pub senders: &'a mut [Vec<UdpSocket>],
}

impl Senders<'_> {
    /// Which socket sends an outer packet: (endpoint, 0) for the receiving
    /// one, (endpoint, 1 + k) for sending socket k. A tunnel's flow keeps
    /// one sending socket: the pipeline's source port, which the flow hash
    /// chose, picks it.
    fn slot_of(
        &self,
        routes: &TunnelFacts,
        m: &PacketMeta,
        outer: &Outer,
    ) -> Option<(usize, usize)> {
        let e = routes.endpoint_of(m, outer)?;
        let n = self.senders.get(e).map_or(0, Vec::len);
        if m.tunnel == NO_TUNNEL || n == 0 {
            return Some((e, 0));
        }
        Some((e, 1 + usize::from(outer.src_port) % n))
    }

    /// The local port of the socket at `slot`.
    fn port_of(&self, (e, k): (usize, usize)) -> u16 {
        match k {
            0 => self.sockets[e].local_addr().port(),
            k => self.senders[e][k - 1].local_addr().port(),
        }
    }

    fn socket(&mut self, (e, k): (usize, usize)) -> &mut UdpSocket {
        match k {
            0 => &mut self.sockets[e],
            k => &mut self.senders[e][k - 1],
        }
    }
}

/// Sends a vector of outer packets from their sockets
/// ([`Senders::slot_of`]): the UDP payload goes, the kernel writes the
/// headers from `meta.outer`. Consecutive datagrams of one flow (the
/// segments of a super-packet) leave as one GSO message gathered straight
/// from their buffers: one syscall, no copy into a train. Frees every
/// buffer.
pub(super) fn send_outer(
    pool: &mut Pool,
    out: &mut PacketVector,
    to: &mut Senders<'_>,
    routes: &TunnelFacts,
    tallies: &mut Tallies,
    tracer: &Tracer,
) {
    {
        let ids = out.as_slice();
        let mut slots = [None; VECTOR_SIZE];
        for (slot, &id) in slots.iter_mut().zip(ids) {
            *slot = to.slot_of(routes, pool.meta(id), pool.outer(id));
            // The kernel writes the sending socket's port, not the
            // pipeline's: what the trace shows.
            if let Some(port) = slot.map(|s| to.port_of(s)) {
                pool.outer_mut(id).src_port = port;
            }
        }
        let pool: &Pool = pool;
        let slots = &mut slots[..ids.len()];
        // One socket at a time, in the order they first appear; a packet
        // with no socket (cannot happen with a valid config) stays None.
        while let Some(slot) = slots.iter().flatten().next().copied() {
            let mut mine = [ids[0]; VECTOR_SIZE];
            let mut n = 0;
            for (s, &id) in slots.iter_mut().zip(ids) {
                if *s == Some(slot) {
                    mine[n] = id;
                    n += 1;
                    *s = None;
                }
            }
            send_from(to.socket(slot), pool, &mine[..n], routes, tallies, tracer);
        }
    }
    for &id in out.as_slice() {
        pool.free(id);
    }
}

/// [`send_outer`]'s part for one socket: `mine`, in order.
fn send_from(
    sock: &mut UdpSocket,
    pool: &Pool,
    mine: &[PacketId],
    routes: &TunnelFacts,
    tallies: &mut Tallies,
    tracer: &Tracer,
) {
    let placeholder = SocketAddr::new(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), 0);
    // Each datagram's UDP payload: its buffer's part, then its
    // tail (a segment's payload, left in the super-packet).
    let mut slices = [IoSlice::new(&[]); 2 * VECTOR_SIZE];
    let mut first_part = [0usize; VECTOR_SIZE + 1];
    let mut nslices = 0;
    for (k, &id) in mine.iter().enumerate() {
        first_part[k] = nslices;
        let d = pool.data(id);
        let payload = &d[usize::from(pool.meta(id).udp_payload)..];
        for part in core::iter::once(payload).chain(pool.tail_parts(id)) {
            if let Some(slot) = slices.get_mut(nslices) {
                *slot = IoSlice::new(part);
                nslices += 1;
            }
        }
    }
    first_part[mine.len()] = nslices;
    // One syscall's worth of messages at a time: a fill of 64 entries per
    // call, not of a vector's 256 (which cost more than the ACKs it sent).
    let mut msgs = [Gathered {
        dest: placeholder,
        parts: &[],
        segment_size: None,
        tos: None,
        ttl: None,
    }; MAX_BATCH];
    let mut counts = [0u64; MAX_BATCH];
    let mut k = 0;
    let mut i = 0;
    while i < mine.len() {
        let j = if tallies.trains {
            train_end(pool, mine, i, &routes.table)
        } else {
            i + 1
        };
        let (m, o) = (*pool.meta(mine[i]), *pool.outer(mine[i]));
        let payload = pool.total_len(mine[i]) - usize::from(m.udp_payload);
        for (k, &id) in mine[i..j].iter().enumerate() {
            let len = pool.total_len(id) - usize::from(pool.meta(id).udp_payload);
            if tracer.active() {
                let parts = &slices[first_part[i + k]..first_part[i + k + 1]];
                trace_datagram(tracer, Point::UdpTx, pool.outer(id), len, parts);
            }
            if let Some(t) = tallies.tunnels.get_mut(m.tunnel as usize) {
                t.tx_packets += 1;
                t.tx_bytes += len as u64;
            }
        }
        tallies.io.count(IoEvent::UdpTx, 1);
        if j - i > 1 {
            tallies.io.count(IoEvent::UdpTxTrains, 1);
        }
        // The DSCP, ECN and TTL the pipeline chose (one per train:
        // train_end), for the kernel to write; a TTL of 0 (inherited
        // from an inner 0) would fail the whole batch (EINVAL).
        msgs[k] = Gathered {
            dest: SocketAddr::new(o.dst, o.dst_port),
            parts: &slices[first_part[i]..first_part[j]],
            segment_size: (j - i > 1).then_some(payload as u16),
            tos: Some(o.tos),
            ttl: (o.ttl > 0).then_some(o.ttl),
        };
        counts[k] = (j - i) as u64;
        k += 1;
        i = j;
        if k == MAX_BATCH || i == mine.len() {
            send_all(
                sock,
                &msgs[..k],
                &counts[..k],
                &mut tallies.io,
                &mut tallies.trains,
            );
            k = 0;
        }
    }
}

/// Sends `msgs`, retrying what the socket did not take; counts what is
/// lost. A socket whose send queue is full is waited for briefly (the
/// back-pressure a TUN lacks), then the rest is dropped. A socket that
/// refuses GSO turns `trains` off for good.
fn send_all(
    sock: &mut UdpSocket,
    msgs: &[Gathered<'_>],
    counts: &[u64],
    io: &mut IoCounters,
    trains: &mut bool,
) {
    let mut sent = 0;
    let mut waits = 0;
    while sent < msgs.len() {
        io.count(IoEvent::UdpSyscalls, 1);
        match sock.send_gathered(&msgs[sent..]) {
            Ok(0) => {
                io.drop(DropReason::SendFailed, counts[sent..].iter().sum());
                return;
            }
            Ok(k) => sent += k,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && waits < 20 => {
                waits += 1;
                std::thread::sleep(Duration::from_micros(200));
            }
            Err(e) => {
                if msgs[sent].segment_size.is_some() && !sock.capabilities().gso {
                    tracing::warn!(
                        "{}: {e}; sending without GSO from now on",
                        sock.local_addr()
                    );
                    io.drop(DropReason::GsoRefused, counts[sent]);
                    *trains = false;
                } else {
                    if e.kind() != io::ErrorKind::WouldBlock {
                        tracing::debug!("udp send from {}: {e}", sock.local_addr());
                    }
                    io.drop(DropReason::SendFailed, counts[sent]);
                }
                sent += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datagram_counts() {
        let g = Some(Gso {
            kind: GsoKind::Udp,
            segment_size: 100,
        });
        assert_eq!(datagrams(28 + 250, 28, g), 3);
        assert_eq!(datagrams(28 + 250, 28, None), 1);
    }

    #[test]
    fn traced_datagrams_carry_the_headers_the_socket_reported() {
        let tracer = Tracer::default();
        tracer.start(1);
        let outer = Outer {
            src: "192.0.2.2".parse().unwrap(),
            dst: "192.0.2.1".parse().unwrap(),
            src_port: 40000,
            dst_port: 4789,
            tos: 0xbb,
            ttl: 9,
        };
        let payload = [7u8; 100];
        trace_datagram(
            &tracer,
            Point::UdpRx,
            &outer,
            100,
            &[IoSlice::new(&payload)],
        );
        let bytes = tracer.finish();
        let mut r = pcap_file::pcapng::PcapNgReader::new(&bytes[..]).unwrap();
        let mut seen = 0;
        while let Some(b) = r.next_block() {
            if let pcap_file::pcapng::Block::EnhancedPacket(p) = b.unwrap() {
                let ip = tep_wire::ipv4::Packet::new_checked(&p.data[..]).unwrap();
                assert!(ip.verify_checksum());
                assert_eq!(
                    (ip.src_addr(), ip.dst_addr()),
                    ("192.0.2.2".parse().unwrap(), "192.0.2.1".parse().unwrap())
                );
                assert_eq!(
                    (ip.dscp() << 2 | ip.ecn(), ip.ttl(), ip.total_len()),
                    (0xbb, 9, 128)
                );
                assert_eq!(&p.data[20..26], &[0x9c, 0x40, 0x12, 0xb5, 0, 108]);
                assert_eq!(&p.data[28..], &payload[..]);
                seen += 1;
            }
        }
        assert_eq!(seen, 1);
    }
}
