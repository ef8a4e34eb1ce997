//! A worker's AF_XDP sockets as the pipeline's edges: frames the kernel
//! wrote into the pool come out of a receive ring as a vector; a vector
//! leaves by descriptors on a transmit ring, its buffers the kernel's
//! until the completion ring hands them back. A buffer goes on a ring
//! through `Pool::to_kernel` and comes off one through
//! `Pool::from_kernel`: in between the pool forms no slice of it, so the
//! kernel's writes alias nothing the worker holds. Batches both ways, no
//! allocation, no copy; the only syscalls are the wake-ups the rings ask
//! for (need_wakeup).
//!
//! Frames longer than a chunk (multi-buffer, see [`super::frames`]) come
//! as a chain of descriptors, whose later parts are copied behind the
//! first in its buffer; one longer than a chunk leaves as a chain over
//! its buffer's chunks. A frame in one descriptor takes one more branch
//! on the way in than before.

use super::frames::CHUNK;
use crate::daemon::stats::{IoCounters, IoEvent, TunnelTraffic};
use crate::daemon::trace::{Point, Tracer};
use tep_dataplane::{
    finish_offloaded, ChecksumState, DropReason, PacketId, PacketVector, Pool, VECTOR_SIZE,
};
use tep_sys::raw::RawIp;
use tep_sys::{Desc, XskSocket};

/// One interface's socket of a worker, and what it has out.
#[derive(Debug)]
pub struct Side {
    /// The socket (its UMEM is the worker's pool).
    pub socket: XskSocket,
    /// Buffers on the fill ring (the kernel's until they come back full).
    pub on_fill: usize,
    /// Buffers on the transmit ring, not completed yet.
    pub in_flight: usize,
    rx: (IoEvent, Point),
    tx: (IoEvent, Point),
    // Ring entries in and out, kept here so that no call clears a
    // vector's worth of them on the stack: a vector of frames, each of up
    // to MAX_PARTS descriptors.
    descs: Box<[Desc]>,
    addrs: Box<[u64; VECTOR_SIZE]>,
    /// The frame being received in parts, if any.
    chain: Chain,
    /// Per buffer (by index): the descriptors of a chain sent from it not
    /// completed yet; 0 for a buffer not sent as a chain. The buffer goes
    /// back to the pool with its last part's completion.
    parts: Box<[u8]>,
    /// Buffers with a chain out (nonzero in `parts`): while none, a
    /// completion frees its buffer as before, without looking.
    chains_out: usize,
}

/// The most descriptors a frame takes: a buffer's chunks (17 for 64 KiB,
/// see [`super::frames::Layout`]).
const MAX_PARTS: usize = 17;

/// A frame arriving in parts (XDP_PKT_CONTD).
#[derive(Debug, Default)]
struct Chain {
    /// A first part came and its last has not.
    open: bool,
    /// The buffer the parts are gathered in; None while the rest of a
    /// frame too long for it is dropped.
    head: Option<PacketId>,
}

/// Kicks one flush makes at most: a copy-mode kick sends 32 frames, two
/// full vectors need 16.
const MAX_KICKS: usize = 16;

impl Side {
    /// The underlay's socket.
    pub fn underlay(socket: XskSocket) -> Side {
        Side::new(
            socket,
            (IoEvent::UnderlayRx, Point::UnderlayRx),
            (IoEvent::UnderlayTx, Point::UnderlayTx),
        )
    }

    /// The inner interface's socket.
    pub fn inner(socket: XskSocket) -> Side {
        Side::new(
            socket,
            (IoEvent::InnerRx, Point::InnerRx),
            (IoEvent::InnerTx, Point::InnerTx),
        )
    }

    fn new(socket: XskSocket, rx: (IoEvent, Point), tx: (IoEvent, Point)) -> Side {
        // At least one chunk per buffer: an entry for each.
        let buffers = socket.umem().chunks() as usize;
        Side {
            socket,
            on_fill: 0,
            in_flight: 0,
            rx,
            tx,
            descs: vec![Desc::default(); VECTOR_SIZE * MAX_PARTS].into_boxed_slice(),
            addrs: Box::new([0; VECTOR_SIZE]),
            chain: Chain::default(),
            parts: vec![0; buffers].into_boxed_slice(),
            chains_out: 0,
        }
    }

    /// Tops the fill ring up to `target` buffers from `pool`, leaving
    /// `reserve` free for the pipeline (replies, ICMP errors).
    pub fn refill(&mut self, pool: &mut Pool, target: usize, reserve: usize, io: &mut IoCounters) {
        let addrs = &mut self.addrs;
        while self.on_fill < target {
            let want = (target - self.on_fill)
                .min(VECTOR_SIZE)
                .min(pool.available().saturating_sub(reserve));
            if want == 0 {
                break;
            }
            let mut n = 0;
            while n < want {
                let Some(id) = pool.alloc() else { break };
                // Frames land after the headroom: the kernel keeps its
                // XDP_PACKET_HEADROOM (256) in front, which is tep's.
                addrs[n] = pool.to_kernel(id);
                n += 1;
            }
            let put = self.socket.fill(&addrs[..n]);
            // Never published: the kernel did not see them.
            give_back(pool, addrs[put..n].iter().copied());
            self.on_fill += put;
            if put < n {
                break;
            }
        }
        if self.socket.fill_needs_wakeup() {
            io.count(IoEvent::XskWakeups, 1);
            let _ = self.socket.wake_rx();
        }
    }

    /// Takes up to a vector of received frames into `v`.
    pub fn receive(
        &mut self,
        pool: &mut Pool,
        v: &mut PacketVector,
        io: &mut IoCounters,
        tracer: &Tracer,
    ) -> usize {
        let room = VECTOR_SIZE - v.len();
        let n = self.socket.recv(&mut self.descs[..room]);
        self.on_fill = self.on_fill.saturating_sub(n);
        let trace = tracer.active();
        // Descriptors that are not a frame's last part.
        let mut continued = 0;
        for i in 0..n {
            let d = self.descs[i];
            // The kernel hands back only addresses tep filled.
            let Some(id) = pool.from_kernel(d.addr) else {
                continue;
            };
            // One branch for a frame in one descriptor.
            let id = if d.continued() || self.chain.open {
                continued += usize::from(d.continued());
                match self.gather(pool, id, &d, io) {
                    Some(id) => id,
                    None => continue,
                }
            } else if pool.received_at(id, d.addr, d.len as usize) {
                id
            } else {
                pool.free(id);
                continue;
            };
            if trace {
                tracer.record(self.rx.1, pool.data(id));
            }
            // `room` is what `v` has left, and frames are no more than
            // descriptors.
            v.put(pool, id);
        }
        io.count(self.rx.0, (n - continued) as u64);
        n
    }

    /// A part of a chained frame in buffer `id` (descriptor `d`): the first
    /// keeps its buffer, the others are copied behind it and freed.
    /// Returns the frame once its last part is in; a frame longer than
    /// its buffer is dropped whole (`frame_too_long`).
    fn gather(
        &mut self,
        pool: &mut Pool,
        id: PacketId,
        d: &Desc,
        io: &mut IoCounters,
    ) -> Option<PacketId> {
        let len = d.len as usize;
        if !self.chain.open {
            self.chain.open = true;
            self.chain.head = pool.received_at(id, d.addr, len).then_some(id);
            if self.chain.head.is_none() {
                pool.free(id);
                io.drop(DropReason::FrameTooLong, 1);
            }
        } else {
            if let Some(head) = self.chain.head {
                let at = pool.data(head).len();
                if pool.received_at(id, d.addr, len) && pool.set_len(head, at + len) {
                    pool.copy_between(id, 0..len, head, at);
                } else {
                    pool.free(head);
                    self.chain.head = None;
                    io.drop(DropReason::FrameTooLong, 1);
                }
            }
            pool.free(id);
        }
        if d.continued() {
            return None;
        }
        self.chain.open = false;
        let head = self.chain.head.take()?;
        io.count(IoEvent::XskRxChained, 1);
        Some(head)
    }

    /// Puts `v`'s frames on the transmit ring (their buffers come back
    /// through [`complete`](Side::complete)); `v` is left empty. They
    /// leave at the next [`flush`](Side::flush), or before it when the ring
    /// fills: a ring still full after the kernel took what it could drops
    /// the rest (`tx_ring_full`).
    pub fn transmit(
        &mut self,
        pool: &mut Pool,
        v: &mut PacketVector,
        io: &mut IoCounters,
        tracer: &Tracer,
    ) {
        let trace = tracer.active();
        let mut n = 0;
        for &id in v.as_slice() {
            finish_checksum(pool, id, io);
            if trace {
                tracer.record(self.tx.1, pool.data(id));
            }
            // The length first: once the kernel's, the buffer is not
            // the worker's to look at.
            let len = pool.data(id).len();
            let addr = pool.to_kernel(id);
            if addr as usize % CHUNK + len <= CHUNK {
                self.descs[n] = Desc {
                    len: len as u32,
                    addr,
                    options: 0,
                };
                n += 1;
            } else {
                n = self.split(id, addr, len, n, io);
            }
        }
        let frames = v.len();
        let mut sent = self.socket.send(&self.descs[..n]);
        if sent < n {
            self.flush(io);
            self.complete(pool);
            sent += self.socket.send(&self.descs[sent..n]);
        }
        let unsent = self.take_back(pool, sent..n);
        io.drop(DropReason::TxRingFull, unsent as u64);
        io.count(self.tx.0, (frames - unsent) as u64);
        self.in_flight += sent;
        v.clear();
    }

    /// Puts a frame longer than its chunk (`len` bytes at UMEM `addr`, in
    /// buffer `id`) as a chain of descriptors from `descs[n]` on, a
    /// descriptor per chunk (the kernel's rule in aligned mode); returns
    /// where the next frame's go. A buffer has at most [`MAX_PARTS`]
    /// chunks.
    fn split(
        &mut self,
        id: PacketId,
        addr: u64,
        len: usize,
        mut n: usize,
        io: &mut IoCounters,
    ) -> usize {
        let (mut at, end) = (addr as usize, addr as usize + len);
        let first = n;
        while at < end {
            let stop = ((at / CHUNK + 1) * CHUNK).min(end);
            self.descs[n] = Desc {
                addr: at as u64,
                len: (stop - at) as u32,
                options: if stop < end { Desc::CONTD } else { 0 },
            };
            n += 1;
            at = stop;
        }
        self.parts[id.index()] = (n - first) as u8;
        self.chains_out += 1;
        io.count(IoEvent::XskTxChained, 1);
        n
    }

    /// Takes back the buffers of `descs[range]`, which never went on the
    /// ring (the kernel did not see them); returns the frames they held.
    fn take_back(&mut self, pool: &mut Pool, range: std::ops::Range<usize>) -> usize {
        let mut frames = 0;
        for d in &self.descs[range] {
            frames += usize::from(!d.continued());
            // A chain's later parts are in its first one's buffer, taken
            // back with it.
            let Some(id) = pool.from_kernel(d.addr) else {
                continue;
            };
            if self.parts[id.index()] != 0 {
                self.parts[id.index()] = 0;
                self.chains_out -= 1;
            }
            pool.free(id);
        }
        frames
    }

    /// Makes the kernel send what is on the transmit ring, if it asks to
    /// be woken: one kick per batch it takes, until the ring is empty (a
    /// copy-mode kick sends a bounded batch) or [`MAX_KICKS`].
    pub fn flush(&mut self, io: &mut IoCounters) {
        for _ in 0..MAX_KICKS {
            if self.socket.tx_pending() == 0 || !self.socket.tx_needs_wakeup() {
                return;
            }
            io.count(IoEvent::XskWakeups, 1);
            // EAGAIN / EBUSY: the kernel is still sending; the frames stay
            // on the ring for the next kick.
            let _ = self.socket.kick();
        }
    }

    /// Returns the buffers the kernel has sent to the pool: a chain's
    /// with its last part.
    pub fn complete(&mut self, pool: &mut Pool) {
        loop {
            let n = self.socket.complete(&mut self.addrs[..]);
            if self.chains_out == 0 {
                give_back(pool, self.addrs[..n].iter().copied());
            } else {
                self.complete_parts(pool, n);
            }
            self.in_flight = self.in_flight.saturating_sub(n);
            if n < VECTOR_SIZE {
                break;
            }
        }
    }

    /// [`complete`](Side::complete) of `addrs[..n]` while chains are out:
    /// a part that is not its chain's last leaves the buffer the kernel's.
    fn complete_parts(&mut self, pool: &mut Pool, n: usize) {
        let size = pool.buffer_size() as u64;
        for &a in &self.addrs[..n] {
            let Some(parts) = self.parts.get_mut((a / size) as usize) else {
                continue;
            };
            match *parts {
                0 => {}
                1 => {
                    *parts = 0;
                    self.chains_out -= 1;
                }
                _ => {
                    *parts -= 1;
                    continue;
                }
            }
            give_back(pool, std::iter::once(a));
        }
    }
}

/// Takes back from the kernel and frees the buffers at UMEM addresses
/// `addrs`: sent frames off the completion ring, or buffers handed to the
/// kernel but never put on a ring.
fn give_back(pool: &mut Pool, addrs: impl Iterator<Item = u64>) {
    for a in addrs {
        if let Some(id) = pool.from_kernel(a) {
            pool.free(id);
        }
    }
}

/// An `offload` tunnel's outer checksum is left partial for a device; an
/// AF_XDP socket passes no checksum request (and veth would not honour
/// one), so it is finished here, and counted.
fn finish_checksum(pool: &mut Pool, id: tep_dataplane::PacketId, io: &mut IoCounters) {
    let state = pool.meta(id).csum;
    if let ChecksumState::Partial { .. } = state {
        if finish_offloaded(pool.data_mut(id), state).is_ok() {
            io.count(IoEvent::ChecksumInSoftware, 1);
        }
        pool.meta_mut(id).csum = ChecksumState::Verified;
    }
}

/// Hands `v`'s IP packets to the kernel's stack (their next hop has no
/// MAC yet: the kernel resolves it and delivers them); frees them.
pub fn to_kernel(
    raw: &RawIp,
    pool: &mut Pool,
    v: &mut PacketVector,
    io: &mut IoCounters,
    tracer: &Tracer,
) {
    for &id in v.as_slice() {
        finish_checksum(pool, id, io);
        let data = pool.data(id);
        if tracer.active() {
            tracer.record(Point::Kernel, data);
        }
        match raw.send(data) {
            Ok(()) => io.count(IoEvent::KernelTx, 1),
            Err(e) => {
                tracing::debug!("kernel path: {e}");
                io.drop(DropReason::SendFailed, 1);
            }
        }
        pool.free(id);
    }
    v.clear();
}

/// Which way a vector of a tunnel's packets goes, for its counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Way {
    /// Outer datagrams into the tunnel (UDP payload bytes counted).
    Sent,
    /// Inner packets out of it (frame bytes counted).
    Delivered,
}

/// Counts `v`'s packets on their tunnels.
pub fn tally(way: Way, pool: &Pool, v: &PacketVector, tunnels: &mut [TunnelTraffic]) {
    for &id in v.as_slice() {
        let m = pool.meta(id);
        let Some(t) = tunnels.get_mut(m.tunnel as usize) else {
            continue;
        };
        let len = pool.data(id).len() as u64;
        match way {
            Way::Sent => {
                t.tx_packets += 1;
                t.tx_bytes += len.saturating_sub(u64::from(m.udp_payload));
            }
            Way::Delivered => {
                t.rx_packets += 1;
                t.rx_bytes += len;
            }
        }
    }
}
