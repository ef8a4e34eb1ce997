//! The buffer pool and per-packet metadata.
//!
//! One arena is allocated when the pool is made; packets are indices into
//! it, so the per-packet path never allocates. Every buffer starts its data
//! [`HEADROOM`] bytes in: encapsulation writes the outer headers into that
//! room (`prepend`) and decapsulation just moves the start (`trim_front`),
//! so neither copies the payload.

use crate::drop::DropReason;
use crate::io::Outer;
use core::ptr::NonNull;
use std::alloc::{self, Layout};
use tep_csum::Sum;

/// Room before the data for outer headers. The deepest stack tep builds —
/// Ethernet with a VLAN tag (18), IPv6 (40), UDP (8), and a tunnel header
/// (GTP-U with extensions, GUE with options, Geneve with options) — fits
/// with margin; Geneve options beyond it are refused at configuration.
pub const HEADROOM: usize = 256;

/// Data room for a 64 KiB super-packet (TSO/GRO) plus its outer headers.
pub const SUPER_PACKET_ROOM: usize = 65535 + 256;

/// A packet: an index into its pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PacketId(u32);

impl PacketId {
    /// The index in the pool.
    pub const fn index(self) -> usize {
        self.0 as usize
    }

    pub(crate) const fn from_index(i: u32) -> PacketId {
        PacketId(i)
    }
}

/// What is known about a packet's checksums.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ChecksumState {
    /// Nothing known: whoever needs a checksum verifies or computes it.
    #[default]
    None,
    /// The checksum at `offset` is to be completed over `start..end`, and
    /// holds the pseudo-header sum (virtio-net NEEDS_CSUM, Linux
    /// CHECKSUM_PARTIAL). Offsets are from the data start; on the decap
    /// path before `decap-output` strips the outer headers, from the inner
    /// packet's start (`meta.inner`): where they will be.
    Partial {
        /// Where the checksummed region starts.
        start: u16,
        /// Where the checksum field is.
        offset: u16,
    },
    /// Verified (by us or by the I/O layer): the host stack need not check.
    Verified,
    /// A UDP checksum of zero: none was sent.
    Zero,
}

/// How a super-packet is to be segmented.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GsoKind {
    /// TCP over IPv4.
    Tcp4,
    /// TCP over IPv6.
    Tcp6,
    /// UDP (a train of equal datagrams).
    Udp,
}

/// Segmentation metadata of a super-packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gso {
    /// What to segment.
    pub kind: GsoKind,
    /// Payload bytes per segment (MSS for TCP).
    pub segment_size: u16,
}

/// No tunnel assigned yet.
pub const NO_TUNNEL: u32 = u32::MAX;

/// Per-packet metadata, reset on allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketMeta {
    /// Offset of the L2 header from the data start (when there is one).
    pub l2: u16,
    /// Offset of the L3 header.
    pub l3: u16,
    /// Offset of the L4 header.
    pub l4: u16,
    /// Checksum knowledge.
    pub csum: ChecksumState,
    /// Segmentation, for super-packets.
    pub gso: Option<Gso>,
    /// Hash of the inner flow (source-port entropy, flow label, GRO).
    pub flow_hash: u32,
    /// The tunnel this packet belongs to, or [`NO_TUNNEL`].
    pub tunnel: u32,
    /// Set by the node that drops the packet.
    pub drop: Option<DropReason>,
    /// Offset of the inner packet's IP header (encap: before and after the
    /// outer headers are added; decap: once the tunnel header is parsed).
    /// Equal to `inner` when the inner packet has no IP header (e.g. ARP).
    pub inner_l3: u16,
    /// Offset of the inner transport header (0 when there is none).
    pub inner_l4: u16,
    /// IP protocol of the inner transport header at `inner_l4` (0 when
    /// there is none: not IP, a non-first fragment, an unknown header).
    pub inner_proto: u8,
    /// Offset where the tunnel payload (the inner packet or frame) starts.
    pub inner: u16,
    /// Decap: remote checksum offload found in the tunnel header, as
    /// absolute offsets (start of the checksummed region, checksum field).
    pub remote_csum: Option<(u16, u16)>,
    /// More of this packet in another buffer, gathered rather than copied
    /// (see [`Tail`]); freed with the packet.
    pub tail: Option<Tail>,
    /// Offset of the outer UDP payload (the tunnel header): after the outer
    /// IP and UDP headers (`l4 + 8`) where they are in the buffer, once
    /// `udp-input` or `ip-udp-encap` placed them; 0 where a socket writes
    /// and reads them.
    pub udp_payload: u16,
    /// A socket writes and reads the outer IP and UDP headers: the buffer
    /// holds the UDP payload, the fields are only in [`Pool::outer`]
    /// ([`OuterLayers::UdpPayload`](crate::io::OuterLayers)).
    pub by_socket: bool,
    /// An uplink packet of a UPF session: its data network (the N6
    /// device it leaves by; 0 otherwise).
    pub network: u8,
}

impl PacketMeta {
    /// Whether the outer IP and UDP headers are in the buffer (tep writes
    /// and parses them) rather than only in [`Pool::outer`].
    pub const fn outer_in_buffer(&self) -> bool {
        !self.by_socket
    }
}

/// The rest of a packet that lives in another buffer, gathered rather than
/// copied: bytes `start..start + len` of `buf`'s data, cut into
/// `stride`-byte pieces (0: one piece) of which the first `skip` bytes are
/// not the packet's. Receive: the payloads of the datagrams of a UDP GRO
/// train that `gro::merge_train` merged into one super-packet
/// (each datagram a piece, its headers skipped). Transmit: a segment's
/// payload inside the super-packet `gso::segment_gathered` cut it
/// from.
///
/// A tail holds a reference on `buf` (see [`Pool::set_tail`]): the buffer
/// goes back to the pool once it is freed and no tail refers to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tail {
    /// The buffer holding the bytes.
    pub buf: PacketId,
    /// Where they start in its data.
    pub start: u32,
    /// How many.
    pub len: u32,
    /// Bytes from one piece to the next; 0 for one piece.
    pub stride: u16,
    /// Leading bytes of each piece that are not the packet's.
    pub skip: u16,
}

impl PacketMeta {
    pub(crate) const FRESH: PacketMeta = PacketMeta {
        l2: 0,
        l3: 0,
        l4: 0,
        csum: ChecksumState::None,
        gso: None,
        flow_hash: 0,
        tunnel: NO_TUNNEL,
        drop: None,
        inner_l3: 0,
        inner_l4: 0,
        inner_proto: 0,
        inner: 0,
        remote_csum: None,
        tail: None,
        udp_payload: 0,
        by_socket: false,
        network: 0,
    };
}

/// Where a packet's data lies in its buffer's chunk. While the kernel has
/// the buffer, `start` has [`KERNEL_BIT`] set: every slice of the chunk is
/// formed from its extent, and [`Pool::span`]'s bounds check, made anyway,
/// then refuses it (no offset that far is in a chunk); no ownership check
/// costs a load per access. So `start` stays at 2^31 or more while the
/// kernel has the buffer: the operations that set a fresh extent (`fill`,
/// `received_at`) check the owner themselves; `trim_front` only moves
/// `start` up, `prepend` moves it down only once the span it returns
/// passed the check, and `set_len` and `truncate` leave it.
#[derive(Clone, Copy, Debug)]
struct Extent {
    start: u32,
    len: u32,
}

/// Set in the extent's `start` of a buffer the kernel has.
const KERNEL_BIT: u32 = 1 << 31;

/// The pool's memory: one zeroed allocation, page-aligned, so that it can
/// be registered with the kernel as an AF_XDP UMEM (gateway mode), whose
/// frames must start on their chunk size. It is a page longer than asked
/// and starts at its first page boundary: a zeroed allocation of the plain
/// kind is mapped lazily (only buffers in use are touched), where asking
/// the allocator for page alignment would zero every byte up front.
///
/// Memory the kernel shares, so held as raw memory and never as a
/// `Box<[u8]>`, `&[u8]` or `&mut [u8]` of the whole: once the arena is a
/// UMEM, the kernel writes received frames into the chunks on a fill ring
/// while the worker reads and writes the others, and a reference to the
/// whole (which a `Box` is to the compiler, asserted afresh each time the
/// pool moves) would claim bytes the kernel is writing, which is undefined
/// behaviour whether or not the worker looks at them. Instead every access
/// goes through [`Pool::span`], which forms a pointer into one buffer's
/// chunk after checking that the chunk is not the kernel's; the slices made
/// from it cover that chunk only, and live only as long as a borrow of the
/// pool, during which the chunk cannot be handed to the kernel (that takes
/// `&mut Pool`). Who may touch a chunk, and when, is [`Owner`].
#[derive(Debug)]
struct Arena {
    /// The first page boundary in the allocation: chunk 0.
    base: NonNull<u8>,
    len: usize,
    /// The allocation as made, to give it back.
    alloc: NonNull<u8>,
    layout: Layout,
}

/// The alignment of the arena: a page.
const ARENA_ALIGN: usize = 4096;

impl Arena {
    fn zeroed(len: usize) -> Arena {
        // Alignment 1: the allocator's calloc path, whose large blocks are
        // fresh (lazily zeroed) pages.
        let layout = Layout::from_size_align(len + ARENA_ALIGN, 1).expect("arena size");
        // SAFETY: the layout's size is not zero (ARENA_ALIGN at least).
        let alloc = unsafe { alloc::alloc_zeroed(layout) };
        let Some(alloc) = NonNull::new(alloc) else {
            alloc::handle_alloc_error(layout)
        };
        let start = alloc.as_ptr().align_offset(ARENA_ALIGN);
        assert!(start < ARENA_ALIGN, "arena alignment");
        // SAFETY: start < ARENA_ALIGN, so base..base + len lies inside the
        // allocation of len + ARENA_ALIGN bytes.
        let base = unsafe { alloc.add(start) };
        Arena {
            base,
            len,
            alloc,
            layout,
        }
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        // SAFETY: the allocation made in `zeroed` with this layout, freed
        // once. Whoever registered it with the kernel closed the sockets
        // first (the contract of `Pool::region`).
        unsafe { alloc::dealloc(self.alloc.as_ptr(), self.layout) };
    }
}

// SAFETY: the arena owns its allocation as a Box<[u8]> would, and nothing
// else in the process points into it (the kernel's accesses are bounded by
// `Owner`, whichever thread the pool is on); moving it moves that ownership.
unsafe impl Send for Arena {}
// SAFETY: through `&Pool` the arena is only read (`Pool::data`,
// `tail_parts`), never written, so sharing it between threads is sharing
// a `&[u8]`.
unsafe impl Sync for Arena {}

/// Who may touch a buffer's bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owner {
    /// Free, in the pool.
    Pool,
    /// Allocated: the worker's, the only one to read and write it (through
    /// slices of this buffer alone).
    Worker,
    /// On an AF_XDP ring ([`Pool::to_kernel`]): the kernel's, which writes
    /// a received frame into it (fill ring) or reads the frame to send
    /// (transmit ring), until [`Pool::from_kernel`] takes it back off the
    /// receive or completion ring. No slice of it may exist meanwhile.
    Kernel,
}

/// [`Pool::span`]'s refusal, out of the way of the accesses it guards.
#[cold]
#[inline(never)]
fn not_in_chunk(id: PacketId, at: usize, len: usize) -> ! {
    panic!("{id:?}: bytes {at}..+{len} are not in its chunk, or the kernel's")
}

/// A fixed set of equal buffers.
#[derive(Debug)]
pub struct Pool {
    arena: Arena,
    buf_size: usize,
    extents: Box<[Extent]>,
    meta: Box<[PacketMeta]>,
    // Apart from `meta`, which every node reads: only the outer nodes and
    // the I/O layer touch these (a vector's `meta` then stays in L1).
    outer: Box<[Outer]>,
    // Where a packet of a tunnel with many peers goes: the UPF session of
    // a packet of an N3 tunnel (`TunnelConfig::sessions`), the remote VTEP
    // of a packet of a network (`TunnelConfig::network`); meaningless for
    // others. Set by the lookups, read by the encap nodes.
    session: Box<[u32]>,
    free: Vec<u32>,
    // Who may touch each buffer; also catches double frees in O(1)
    // (`free.contains` made every free O(pool)).
    owner: Box<[Owner]>,
    // Tails referring to each buffer, and whether its owner freed it
    // while some did (it returns to the pool with the last reference).
    refs: Box<[u32]>,
    released: Box<[bool]>,
    // Packets dropped because a vector was full (a bug: see
    // `PacketVector::put`), until the pipeline counts them on a node.
    vector_full: u64,
}

impl Pool {
    /// `count` buffers, each with [`HEADROOM`] plus `data_room` bytes.
    /// Allocates everything now.
    pub fn new(count: usize, data_room: usize) -> Pool {
        let count = count.min(u32::MAX as usize);
        let buf_size = HEADROOM + data_room;
        // Offsets in a chunk stay below the kernel's bit.
        assert!(
            buf_size < KERNEL_BIT as usize,
            "buffers of {buf_size} bytes"
        );
        Pool {
            arena: Arena::zeroed(count * buf_size),
            buf_size,
            extents: vec![
                Extent {
                    start: HEADROOM as u32,
                    len: 0
                };
                count
            ]
            .into_boxed_slice(),
            meta: vec![PacketMeta::FRESH; count].into_boxed_slice(),
            outer: vec![Outer::NONE; count].into_boxed_slice(),
            session: vec![0; count].into_boxed_slice(),
            // Reversed so that the lowest indices are handed out first.
            free: (0..count as u32).rev().collect(),
            owner: vec![Owner::Pool; count].into_boxed_slice(),
            refs: vec![0; count].into_boxed_slice(),
            released: vec![false; count].into_boxed_slice(),
            vector_full: 0,
        }
    }

    /// Buffers not in use.
    pub fn available(&self) -> usize {
        self.free.len()
    }

    /// All buffers.
    pub fn capacity(&self) -> usize {
        self.meta.len()
    }

    /// Bytes a packet can hold after its headroom.
    pub fn data_room(&self) -> usize {
        self.buf_size - HEADROOM
    }

    /// Takes a buffer: empty, data at [`HEADROOM`], fresh metadata.
    pub fn alloc(&mut self) -> Option<PacketId> {
        let i = self.free.pop()?;
        self.extents[i as usize] = Extent {
            start: HEADROOM as u32,
            len: 0,
        };
        self.meta[i as usize] = PacketMeta::FRESH;
        self.owner[i as usize] = Owner::Worker;
        Some(PacketId(i))
    }

    /// Frees a packet no vector had room for, counting it.
    pub(crate) fn drop_vector_full(&mut self, id: PacketId) {
        self.vector_full += 1;
        self.free(id);
    }

    /// The packets dropped for a full vector since the last call.
    pub(crate) fn take_vector_full(&mut self) -> u64 {
        core::mem::take(&mut self.vector_full)
    }

    /// Returns a buffer to the pool and drops its [`Tail`]'s reference.
    /// A buffer that tails still refer to returns when the last of them
    /// is freed.
    pub fn free(&mut self, id: PacketId) {
        let i = id.index();
        assert!(
            self.owner[i] == Owner::Worker && !self.released[i],
            "double free of {id:?} (or free of one the kernel has)"
        );
        if let Some(t) = self.meta[i].tail.take() {
            self.unref(t.buf);
        }
        if self.refs[i] > 0 {
            self.released[i] = true;
        } else {
            self.owner[i] = Owner::Pool;
            self.free.push(id.0);
        }
    }

    fn unref(&mut self, buf: PacketId) {
        let i = buf.index();
        self.refs[i] -= 1;
        if self.refs[i] == 0 && self.released[i] {
            self.released[i] = false;
            self.owner[i] = Owner::Pool;
            self.free.push(buf.0);
        }
    }

    /// Gives packet `id` the tail `t` (replacing any it had), which keeps
    /// `t.buf` alive: its owner may free it at once. False (and nothing
    /// changed) if `t` is not inside `t.buf`'s data.
    pub fn set_tail(&mut self, id: PacketId, t: Tail) -> bool {
        let end = t.start as usize + t.len as usize;
        if self.owner[t.buf.index()] != Owner::Worker || t.buf == id || end > self.data(t.buf).len()
        {
            return false;
        }
        self.refs[t.buf.index()] += 1;
        if let Some(old) = self.meta[id.index()].tail.replace(t) {
            self.unref(old.buf);
        }
        true
    }

    /// The pieces of a packet's [`Tail`], in order (none without one): what
    /// a gathered write sends after [`data`](Pool::data).
    pub fn tail_parts(&self, id: PacketId) -> impl Iterator<Item = &[u8]> {
        let (rest, stride, skip) = match self.meta[id.index()].tail {
            Some(t) => {
                let start = t.start as usize;
                let rest = &self.data(t.buf)[start..start + t.len as usize];
                let stride = match t.stride {
                    0 => rest.len().max(1),
                    s => usize::from(s),
                };
                (rest, stride, usize::from(t.skip))
            }
            None => (&[][..], 1, 0),
        };
        rest.chunks(stride).map(move |d| &d[skip.min(d.len())..])
    }

    /// The Internet checksum sum of the packet's bytes from `start` of its
    /// data to its end, its tail included.
    pub fn sum_from(&self, id: PacketId, start: usize) -> tep_csum::Sum {
        let data = self.data(id);
        let here = &data[start.min(data.len())..];
        let mut sum = tep_csum::Sum::of(here);
        // Per packet on the encap path: most have no tail.
        if self.meta[id.index()].tail.is_none() {
            return sum;
        }
        let mut at = here.len();
        for part in self.tail_parts(id) {
            sum = sum.add(tep_csum::Sum::of_at(part, at));
            at += part.len();
        }
        sum
    }

    /// The packet's length with its tail (what [`tail_parts`] yields, from
    /// the tail's fields alone: this is asked per packet).
    ///
    /// [`tail_parts`]: Pool::tail_parts
    pub fn total_len(&self, id: PacketId) -> usize {
        // The extent's length: the same as `data(id).len()` without
        // slicing the arena for it.
        let here = self.extents[id.index()].len as usize;
        let Some(t) = self.meta[id.index()].tail else {
            return here;
        };
        let (len, skip) = (t.len as usize, usize::from(t.skip));
        if len == 0 {
            return here;
        }
        let stride = match t.stride {
            0 => len,
            s => usize::from(s),
        };
        let pieces = len.div_ceil(stride);
        let last = len - (pieces - 1) * stride;
        here + len - (pieces - 1) * skip.min(stride) - skip.min(last)
    }

    /// Copies the packet's tail after its data and drops the tail, for a
    /// consumer that cannot gather. False (and nothing changed) if it does
    /// not fit the data room.
    pub fn linearize(&mut self, id: PacketId) -> bool {
        let Some(t) = self.meta[id.index()].tail else {
            return true;
        };
        let len = self.data(id).len();
        if !self.set_len(id, self.total_len(id)) {
            return false;
        }
        let mut at = len;
        let (start, end) = (t.start as usize, t.start as usize + t.len as usize);
        let stride = match t.stride {
            0 => t.len as usize,
            s => usize::from(s),
        }
        .max(1);
        let mut from = start;
        while from < end {
            let piece_end = (from + stride).min(end);
            let piece = (from + usize::from(t.skip)).min(piece_end);
            self.copy_between(t.buf, piece..piece_end, id, at);
            at += piece_end - piece;
            from = piece_end;
        }
        self.meta[id.index()].tail = None;
        self.unref(t.buf);
        true
    }

    fn base(&self, id: PacketId) -> usize {
        id.index() * self.buf_size
    }

    /// A pointer to bytes `at..at + len` of buffer `id`'s chunk: the one
    /// place the worker's pointers into the arena are made (see
    /// [`Arena`]). `at` comes from the buffer's extent, so a buffer the
    /// kernel has is refused by the bounds check (see [`Extent`]). The
    /// checks replace the slice bounds checks indexing a `[u8]` arena made
    /// (and the first is the callers', who indexed `extents` with `id`).
    ///
    /// # Panics
    /// If the bytes are not in the chunk, or the buffer is the kernel's.
    #[inline]
    fn span(&self, id: PacketId, at: usize, len: usize) -> *mut u8 {
        // Not a debug check: a slice of a chunk the kernel may be writing
        // would be undefined behaviour, reachable from safe code.
        if id.index() >= self.extents.len() || at + len > self.buf_size {
            not_in_chunk(id, at, len);
        }
        // SAFETY: id.index() < count, so the chunk, base..base + buf_size,
        // lies inside the arena's count × buf_size bytes, and at..at + len
        // inside the chunk.
        unsafe { self.arena.base.as_ptr().add(self.base(id) + at) }
    }

    /// Refuses to set a fresh extent on a buffer the kernel has.
    fn assert_not_kernels(&self, id: PacketId) {
        assert!(
            self.owner[id.index()] != Owner::Kernel,
            "{id:?} is on an AF_XDP ring: the kernel's"
        );
    }

    /// Bytes `at..at + len` of buffer `id`'s chunk.
    #[inline]
    fn bytes(&self, id: PacketId, at: usize, len: usize) -> &[u8] {
        let p = self.span(id, at, len);
        // SAFETY: inside the arena, in one chunk (span checked), which the
        // kernel does not own: the callers take `at` from the extent, whose
        // mark puts a kernel's buffer past the bounds. Nothing writes those bytes while the slice
        // lives: the worker writes only through `&mut self`, which this
        // borrow of the pool excludes, and the kernel only into chunks
        // handed to it by `to_kernel`, which takes `&mut self` too.
        unsafe { core::slice::from_raw_parts(p, len) }
    }

    /// Bytes `at..at + len` of buffer `id`'s chunk, writable.
    #[inline]
    fn bytes_mut(&mut self, id: PacketId, at: usize, len: usize) -> &mut [u8] {
        let p = self.span(id, at, len);
        // SAFETY: as in `bytes`; and no other slice of the arena lives
        // while this one does, as it borrows the pool exclusively.
        unsafe { core::slice::from_raw_parts_mut(p, len) }
    }

    /// The packet's bytes.
    #[inline]
    pub fn data(&self, id: PacketId) -> &[u8] {
        let e = self.extents[id.index()];
        self.bytes(id, e.start as usize, e.len as usize)
    }

    /// The packet's bytes, writable.
    #[inline]
    pub fn data_mut(&mut self, id: PacketId) -> &mut [u8] {
        let e = self.extents[id.index()];
        self.bytes_mut(id, e.start as usize, e.len as usize)
    }

    /// Replaces the packet's bytes with `bytes` (at the headroom). False if
    /// they do not fit.
    pub fn fill(&mut self, id: PacketId, bytes: &[u8]) -> bool {
        if bytes.len() > self.data_room() {
            return false;
        }
        self.assert_not_kernels(id);
        self.extents[id.index()] = Extent {
            start: HEADROOM as u32,
            len: bytes.len() as u32,
        };
        self.data_mut(id).copy_from_slice(bytes);
        true
    }

    /// Grows the packet by `n` bytes at the front (into the headroom) and
    /// returns them, for the caller to write headers into. `None` if the
    /// headroom left is smaller.
    pub fn prepend(&mut self, id: PacketId, n: usize) -> Option<&mut [u8]> {
        let e = self.extents[id.index()];
        let start = (e.start as usize).checked_sub(n)?;
        // Before the extent moves: a buffer the kernel has keeps its
        // marked start (see `Extent`).
        let p = self.span(id, start, n);
        self.extents[id.index()] = Extent {
            start: start as u32,
            len: e.len + n as u32,
        };
        // SAFETY: as in `bytes_mut`: `n` bytes in a chunk the kernel does
        // not own (span), borrowed with the pool exclusively.
        Some(unsafe { core::slice::from_raw_parts_mut(p, n) })
    }

    /// Drops `n` bytes from the front (decapsulation). False if shorter.
    pub fn trim_front(&mut self, id: PacketId, n: usize) -> bool {
        let e = &mut self.extents[id.index()];
        if (e.len as usize) < n {
            return false;
        }
        e.start += n as u32;
        e.len -= n as u32;
        true
    }

    /// Cuts the packet to `len` bytes (e.g. to an IP total length). False if
    /// it is shorter.
    pub fn truncate(&mut self, id: PacketId, len: usize) -> bool {
        let e = &mut self.extents[id.index()];
        if (e.len as usize) < len {
            return false;
        }
        e.len = len as u32;
        true
    }

    /// Sets the packet's length to `len` bytes from its data start (growing
    /// it exposes whatever the buffer held: the caller writes them). False
    /// past the data room.
    pub fn set_len(&mut self, id: PacketId, len: usize) -> bool {
        let e = &mut self.extents[id.index()];
        if e.start as usize + len > self.buf_size {
            return false;
        }
        e.len = len as u32;
        true
    }

    /// Copies bytes `range` of `src`'s data to `dst`'s data at `at`, both
    /// within the packets' current lengths: how segmentation and
    /// coalescing move payload between buffers with one copy.
    ///
    /// # Panics
    /// If a range is outside its packet.
    pub fn copy_between(
        &mut self,
        src: PacketId,
        range: core::ops::Range<usize>,
        dst: PacketId,
        at: usize,
    ) {
        let (from, to, len) = self.copy_ends(src, range, dst, at);
        // SAFETY: both spans are `len` bytes inside chunks the kernel does
        // not own (copy_ends); they overlap only within one buffer, which
        // `copy` allows. No slice of the arena lives: `&mut self`.
        unsafe { core::ptr::copy(from, to, len) };
    }

    /// [`copy_between`](Pool::copy_between) that also returns the sum of
    /// the bytes copied (laid at an even offset), in the same pass: how
    /// segmentation fills each segment's checksum without reading its
    /// payload twice.
    ///
    /// # Panics
    /// If a range is outside its packet, or `src` and `dst` are the same.
    pub fn copy_between_summed(
        &mut self,
        src: PacketId,
        range: core::ops::Range<usize>,
        dst: PacketId,
        at: usize,
    ) -> Sum {
        assert_ne!(src, dst, "a summed copy is between two buffers");
        let (from, to, len) = self.copy_ends(src, range, dst, at);
        // SAFETY: as in copy_between; and the spans lie in distinct
        // buffers' chunks, which do not overlap, so the shared and the
        // exclusive slice cover different bytes.
        let (from, to) = unsafe {
            (
                core::slice::from_raw_parts(from, len),
                core::slice::from_raw_parts_mut(to, len),
            )
        };
        Sum::copy_of(to, from)
    }

    /// Where a copy reads, where it writes, and how many bytes, checked.
    fn copy_ends(
        &self,
        src: PacketId,
        range: core::ops::Range<usize>,
        dst: PacketId,
        at: usize,
    ) -> (*const u8, *mut u8, usize) {
        let se = self.extents[src.index()];
        let de = self.extents[dst.index()];
        assert!(range.start <= range.end && range.end <= se.len as usize);
        assert!(at + range.len() <= de.len as usize);
        let len = range.len();
        let from = self.span(src, se.start as usize + range.start, len);
        let to = self.span(dst, de.start as usize + at, len);
        (from, to, len)
    }

    /// The rooms of the distinct buffers `ids`, each from `at` bytes past
    /// its data start to the end of the buffer, in `ids` order; the other
    /// `N - ids.len()` entries are empty. This is how a batch receive
    /// (`recvmmsg`) lands straight in the pool: the caller then sets each
    /// length with [`set_len`](Pool::set_len).
    ///
    /// # Panics
    /// If an id repeats, or there are more than `N`.
    pub fn rooms_mut<const N: usize>(&mut self, ids: &[PacketId], at: usize) -> [&mut [u8]; N] {
        assert!(ids.len() <= N, "{} rooms asked of {N}", ids.len());
        // Each room lies in its own buffer's chunk: distinct ids, disjoint
        // rooms.
        let mut sorted = [0u32; N];
        for (s, id) in sorted.iter_mut().zip(ids) {
            *s = id.0;
        }
        let sorted = &mut sorted[..ids.len()];
        sorted.sort_unstable();
        assert!(
            sorted.windows(2).all(|w| w[0] != w[1]),
            "buffer given twice"
        );
        let mut out: [&mut [u8]; N] = core::array::from_fn(|_| <&mut [u8]>::default());
        for (room, &id) in out.iter_mut().zip(ids) {
            let start = (self.extents[id.index()].start as usize + at).min(self.buf_size);
            let len = self.buf_size - start;
            let p = self.span(id, start, len);
            // SAFETY: inside one chunk (span), and either empty (a buffer
            // the kernel has: its marked start is clamped to the chunk's
            // end) or in a chunk the kernel does not own; the rooms are in
            // distinct chunks (checked above), so these exclusive slices
            // are disjoint, and they borrow the pool exclusively, so no
            // other slice of the arena lives.
            *room = unsafe { core::slice::from_raw_parts_mut(p, len) };
        }
        out
    }

    /// The arena's address and length, to register it with the kernel as
    /// an AF_XDP UMEM: buffer `i` is the chunk at `i ×`
    /// [`buffer_size`](Pool::buffer_size), page-aligned. The pointer is
    /// the allocation's own, not taken from a reference to the arena (none
    /// is ever made: see [`Arena`]).
    ///
    /// The pool keeps the memory for its life. Whoever registers it
    /// closes the sockets (so that the kernel lets go of the memory)
    /// before the pool is dropped, and hands the kernel chunks only
    /// through [`to_kernel`](Pool::to_kernel) and takes them back through
    /// [`from_kernel`](Pool::from_kernel): then the kernel writes only
    /// chunks that no slice covers and that the pool refuses to slice.
    /// `&mut self`: what it returns is leave to write.
    pub fn region(&mut self) -> (*mut u8, usize) {
        (self.arena.base.as_ptr(), self.arena.len)
    }

    /// Bytes from one buffer to the next in the arena (headroom included).
    pub fn buffer_size(&self) -> usize {
        self.buf_size
    }

    /// Where buffer `id` starts in the arena: the UMEM address of its
    /// chunk.
    pub fn chunk_addr(&self, id: PacketId) -> u64 {
        self.base(id) as u64
    }

    /// Where packet `id`'s data starts in the arena: the UMEM address of a
    /// frame to send.
    pub fn data_addr(&self, id: PacketId) -> u64 {
        (self.base(id) + (self.extents[id.index()].start & !KERNEL_BIT) as usize) as u64
    }

    /// Hands buffer `id` to the kernel, and returns the UMEM address of its
    /// data ([`data_addr`](Pool::data_addr)) to put on an AF_XDP ring: the
    /// fill ring (a fresh buffer: the kernel writes a frame there, after
    /// the headroom, which is then the kernel's XDP headroom) or the
    /// transmit ring (the kernel reads the frame). From now on the buffer
    /// is the kernel's: the pool forms no slice of it (the accessors
    /// panic) and refuses to free it, until
    /// [`from_kernel`](Pool::from_kernel).
    ///
    /// The handover itself is the ring's: the caller publishes the address
    /// after this call with the ring's release store of its producer
    /// index, so every access the worker made to the chunk happens before
    /// the kernel's (which loads that index with acquire).
    ///
    /// # Panics
    /// If the buffer is not the worker's (free, freed, or the kernel's
    /// already).
    pub fn to_kernel(&mut self, id: PacketId) -> u64 {
        let i = id.index();
        assert!(
            self.owner[i] == Owner::Worker && !self.released[i],
            "{id:?} handed to the kernel, but not the worker's"
        );
        let addr = self.data_addr(id);
        self.owner[i] = Owner::Kernel;
        self.extents[i].start |= KERNEL_BIT;
        addr
    }

    /// Takes back the buffer holding UMEM address `addr`, which the kernel
    /// handed back on a receive or completion ring: the worker's again.
    /// None (nothing changed) if the address is outside the arena or its
    /// buffer is not the kernel's: a kernel never does that, and taking a
    /// buffer the worker holds would free it twice.
    ///
    /// The caller read `addr` off the ring after the ring's acquire load
    /// of the kernel's producer index, which the kernel stored with release
    /// after writing the frame (receive) or reading it (completion): the
    /// kernel is done with the chunk before the worker touches it.
    pub fn from_kernel(&mut self, addr: u64) -> Option<PacketId> {
        let i = usize::try_from(addr).ok()? / self.buf_size;
        let owner = self.owner.get_mut(i)?;
        if *owner != Owner::Kernel {
            return None;
        }
        *owner = Owner::Worker;
        self.extents[i].start &= !KERNEL_BIT;
        Some(PacketId(i as u32))
    }

    /// Records that the kernel wrote a `len`-byte frame at arena address
    /// `addr` into buffer `id` (an AF_XDP receive): the packet's data is
    /// that frame, its metadata fresh. False (nothing changed) if the frame
    /// is not inside the buffer.
    pub fn received_at(&mut self, id: PacketId, addr: u64, len: usize) -> bool {
        self.assert_not_kernels(id);
        let base = self.base(id) as u64;
        let Some(start) = addr.checked_sub(base).map(|s| s as usize) else {
            return false;
        };
        if start + len > self.buf_size {
            return false;
        }
        self.extents[id.index()] = Extent {
            start: start as u32,
            len: len as u32,
        };
        self.meta[id.index()] = PacketMeta::FRESH;
        true
    }

    /// Headroom left before the data.
    pub fn headroom(&self, id: PacketId) -> usize {
        self.extents[id.index()].start as usize
    }

    /// The packet's metadata.
    pub fn meta(&self, id: PacketId) -> &PacketMeta {
        &self.meta[id.index()]
    }

    /// The packet's metadata, writable.
    pub fn meta_mut(&mut self, id: PacketId) -> &mut PacketMeta {
        &mut self.meta[id.index()]
    }

    /// The outer IP and UDP fields of a tunnel datagram (see [`Outer`]):
    /// metadata beside [`Pool::meta`], kept apart because few nodes read
    /// it. Not reset on allocation: whoever makes a datagram fills it.
    pub fn outer(&self, id: PacketId) -> &Outer {
        &self.outer[id.index()]
    }

    /// The outer fields, writable.
    pub fn outer_mut(&mut self, id: PacketId) -> &mut Outer {
        &mut self.outer[id.index()]
    }

    /// The UPF session (a slot of [`crate::session::SessionTable`]) of a
    /// packet of an N3 tunnel, as the session lookups set it; meaningless
    /// for a packet of any other tunnel (not reset on allocation).
    #[inline]
    pub fn session(&self, id: PacketId) -> u32 {
        self.session[id.index()]
    }

    /// Sets the packet's session.
    #[inline]
    pub fn set_session(&mut self, id: PacketId, slot: u32) {
        self.session[id.index()] = slot;
    }

    /// The remote VTEP (an id of [`crate::overlay::Vteps`], or
    /// [`crate::overlay::FLOOD`]) of a packet of a network, as
    /// `fdb-lookup` sets it; meaningless for others.
    #[inline]
    pub fn vtep(&self, id: PacketId) -> u32 {
        self.session[id.index()]
    }

    /// Sets the packet's VTEP.
    #[inline]
    pub fn set_vtep(&mut self, id: PacketId, vtep: u32) {
        self.session[id.index()] = vtep;
    }

    /// A copy of packet `id` (without a tail: linearize it first) in a
    /// buffer of its own, at the same headroom, with its metadata, outer
    /// fields and session or VTEP; None when no buffer is free or it has
    /// a tail.
    pub fn duplicate(&mut self, id: PacketId) -> Option<PacketId> {
        let meta = *self.meta(id);
        if meta.tail.is_some() {
            return None;
        }
        let c = self.alloc()?;
        let ext = self.extents[id.index()];
        self.extents[c.index()] = ext;
        self.copy_between(id, 0..ext.len as usize, c, 0);
        self.copy_meta(id, c, meta);
        Some(c)
    }

    /// Gives `to` the metadata, outer fields and session of `from` (a
    /// buffer cut from another: a datagram of a train, a segment).
    pub(crate) fn copy_meta(&mut self, from: PacketId, to: PacketId, meta: PacketMeta) {
        self.meta[to.index()] = meta;
        self.outer[to.index()] = self.outer[from.index()];
        self.session[to.index()] = self.session[from.index()];
    }

    /// Records a datagram a kernel socket received into `id`: its payload
    /// is the buffer, `outer` what the socket reports of the headers
    /// (source, local address and port, TOS, TTL), and its checksum
    /// verified (the kernel drops bad ones, and accepts none only where the
    /// socket allows it).
    pub fn received_by_socket(&mut self, id: PacketId, outer: Outer) {
        self.outer[id.index()] = outer;
        let m = &mut self.meta[id.index()];
        m.by_socket = true;
        m.udp_payload = 0;
        m.l2 = 0;
        m.l3 = 0;
        m.l4 = 0;
        m.csum = ChecksumState::Verified;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_sit_on_page_aligned_chunks_for_umem() {
        let mut p = Pool::new(8, 4096 - HEADROOM);
        let (ptr, len) = p.region();
        assert_eq!(ptr as usize % 4096, 0);
        assert_eq!((len, p.buffer_size()), (8 * 4096, 4096));
        let a = p.alloc().unwrap();
        let b = p.alloc().unwrap();
        assert_eq!(p.chunk_addr(b), 4096 * b.index() as u64);
        assert!(p.fill(a, b"frame"));
        assert_eq!(p.data_addr(a), p.chunk_addr(a) + HEADROOM as u64);
        // The kernel wrote 60 bytes 256 bytes into b's chunk.
        let at = p.to_kernel(b);
        assert_eq!(at, p.chunk_addr(b) + 256);
        assert_eq!(p.from_kernel(at + 100), Some(b), "any address in the chunk");
        assert!(p.received_at(b, at, 60));
        assert_eq!(p.data(b).len(), 60);
        assert_eq!(p.headroom(b), 256);
        assert!(!p.received_at(b, at, 4096), "past the chunk");
        assert!(!p.received_at(a, at, 60), "another buffer's chunk");
    }

    /// Runs `f`, which must panic with a message containing `expected`.
    fn panics<R>(expected: &str, f: impl FnOnce() -> R) {
        let Err(e) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) else {
            panic!("no panic, expected {expected:?}");
        };
        let msg = e
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| e.downcast_ref::<&str>().copied())
            .unwrap_or_default();
        assert!(msg.contains(expected), "panicked with {msg:?}");
    }

    #[test]
    fn a_buffer_on_a_ring_is_the_kernels_until_taken_back() {
        let mut p = Pool::new(4, 2048);
        let (a, b) = (p.alloc().unwrap(), p.alloc().unwrap());
        assert!(p.fill(a, b"sent"));
        let addr = p.to_kernel(a);
        assert_eq!(addr, p.data_addr(a));
        // No slice of it, in any accessor, and no free.
        panics("the kernel's", || p.data(a));
        panics("the kernel's", || p.data_mut(a));
        panics("the kernel's", || p.prepend(a, 4));
        panics("the kernel's", || p.copy_between(b, 0..0, a, 0));
        panics("the kernel's", || p.sum_from(a, 0));
        panics("the kernel's", || p.fill(a, b"x"));
        panics("the kernel's", || p.received_at(a, addr, 4));
        let [_, room]: [&mut [u8]; 2] = p.rooms_mut(&[b, a], 0);
        assert!(room.is_empty(), "no room in the kernel's buffer");
        assert!(!p.set_len(a, 4));
        panics("double free", || p.free(a));
        panics("not the worker's", || p.to_kernel(a));
        let tail = Tail {
            buf: a,
            start: 0,
            len: 4,
            stride: 0,
            skip: 0,
        };
        assert!(!p.set_tail(b, tail), "a tail in the kernel's buffer");
        // Only the kernel's buffers come back, once, from inside the arena.
        assert_eq!(p.from_kernel(p.data_addr(b)), None, "the worker's");
        assert_eq!(p.from_kernel(p.chunk_addr(PacketId(2))), None, "free");
        assert_eq!(p.from_kernel(4 * 2304), None, "past the arena");
        assert_eq!(p.from_kernel(u64::MAX), None);
        assert_eq!(p.from_kernel(addr), Some(a));
        assert_eq!(p.from_kernel(addr), None, "taken back already");
        assert_eq!(p.data(a), b"sent", "its extent back, untouched");
        p.free(a);
        panics("not the worker's", || p.to_kernel(a));
        assert_eq!(p.available(), 3);
    }

    /// One side of a single-producer, single-consumer ring as AF_XDP's
    /// (tep_sys::xsk): entries written, then the producer index published
    /// with release; the index loaded with acquire, then entries read.
    struct Ring {
        entries: [std::sync::atomic::AtomicU64; 8],
        producer: std::sync::atomic::AtomicU32,
        consumer: std::sync::atomic::AtomicU32,
    }

    impl Ring {
        fn new() -> Ring {
            Ring {
                entries: Default::default(),
                producer: Default::default(),
                consumer: Default::default(),
            }
        }

        fn push(&self, v: u64) -> bool {
            use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
            let p = self.producer.load(Relaxed);
            if p.wrapping_sub(self.consumer.load(Acquire)) == 8 {
                return false;
            }
            self.entries[p as usize % 8].store(v, Relaxed);
            self.producer.store(p.wrapping_add(1), Release);
            true
        }

        fn pop(&self) -> Option<u64> {
            use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
            let c = self.consumer.load(Relaxed);
            if c == self.producer.load(Acquire) {
                return None;
            }
            let v = self.entries[c as usize % 8].load(Relaxed);
            self.consumer.store(c.wrapping_add(1), Release);
            Some(v)
        }
    }

    /// The arena's address, for the thread standing for the kernel.
    struct Umem(*mut u8);
    // SAFETY: the "kernel" touches only chunks handed to it on a ring.
    unsafe impl Send for Umem {}

    /// The kernel, on its own thread, writes received frames into the
    /// chunks on the fill ring and reads the frames on the transmit ring,
    /// through the arena's raw address, while the worker reads and writes
    /// its own buffers: the pool's ownership and the rings' ordering are
    /// all that keep them apart. Run under Miri (no syscalls here), any
    /// reference to the whole arena, or a slice of a chunk the kernel has,
    /// is a data race or a borrow violation.
    #[test]
    fn a_kernel_thread_and_the_worker_share_the_arena() {
        const FRAMES: usize = 24;
        let mut pool = Pool::new(12, 2048 - HEADROOM);
        let umem = Umem(pool.region().0);
        let rings: std::sync::Arc<[Ring; 4]> =
            std::sync::Arc::new(core::array::from_fn(|_| Ring::new()));
        let [fill, rx, tx, completion] = [0, 1, 2, 3];
        let kernel = {
            let rings = rings.clone();
            std::thread::spawn(move || {
                let umem = umem;
                let (mut received, mut sent) = (0, 0);
                while received < FRAMES || sent < FRAMES {
                    if let Some(addr) = rings[fill].pop() {
                        let len = 60 + received % 64;
                        // SAFETY: a chunk on the fill ring, the kernel's;
                        // the frame fits after the headroom.
                        unsafe { umem.0.add(addr as usize).write_bytes(len as u8, len) };
                        while !rings[rx].push(addr << 16 | len as u64) {
                            std::thread::yield_now();
                        }
                        received += 1;
                    }
                    if let Some(d) = rings[tx].pop() {
                        let (addr, len) = ((d >> 16) as usize, (d & 0xffff) as usize);
                        // SAFETY: a chunk on the transmit ring, the kernel's.
                        let frame = unsafe { core::slice::from_raw_parts(umem.0.add(addr), len) };
                        assert!(frame.iter().all(|&b| b == !(len as u8)), "sent as written");
                        while !rings[completion].push(addr as u64) {
                            std::thread::yield_now();
                        }
                        sent += 1;
                    }
                    std::thread::yield_now();
                }
            })
        };
        // The worker's own buffer, written and read throughout.
        let own = pool.alloc().unwrap();
        let (mut filled, mut received, mut completed) = (0, 0, 0);
        while completed < FRAMES {
            if filled < FRAMES && pool.available() > 4 {
                let id = pool.alloc().unwrap();
                if rings[fill].push(pool.to_kernel(id)) {
                    filled += 1;
                } else {
                    let back = pool.from_kernel(pool.data_addr(id));
                    pool.free(back.unwrap());
                }
            }
            assert!(pool.fill(own, &[filled as u8; 100]));
            assert_eq!(pool.data(own), &[filled as u8; 100]);
            if let Some(d) = rings[rx].pop() {
                let (addr, len) = (d >> 16, (d & 0xffff) as usize);
                let id = pool.from_kernel(addr).expect("a chunk it was given");
                assert!(pool.received_at(id, addr, len));
                assert!(pool.data(id).iter().all(|&b| b == len as u8));
                // Sent back, rewritten in place.
                pool.data_mut(id).fill(!(len as u8));
                let len = pool.data(id).len() as u64;
                let addr = pool.to_kernel(id);
                assert!(rings[tx].push(addr << 16 | len), "tx has room");
                received += 1;
            }
            if let Some(addr) = rings[completion].pop() {
                let id = pool.from_kernel(addr).expect("a chunk it was sent");
                pool.free(id);
                completed += 1;
            }
            std::thread::yield_now();
        }
        kernel.join().unwrap();
        assert_eq!((filled, received), (FRAMES, FRAMES));
        pool.free(own);
        assert_eq!(pool.available(), pool.capacity(), "every buffer back");
    }

    #[test]
    fn alloc_until_empty_then_reuse() {
        let mut p = Pool::new(3, 2048);
        let ids: Vec<_> = (0..3).map(|_| p.alloc().unwrap()).collect();
        assert_eq!(p.alloc(), None);
        assert_eq!(p.available(), 0);
        p.free(ids[1]);
        let again = p.alloc().unwrap();
        assert_eq!(again, ids[1]);
        assert_eq!(p.data(again).len(), 0, "a reused buffer starts empty");
        assert_eq!(*p.meta(again), PacketMeta::FRESH);
    }

    #[test]
    fn summed_copies_go_either_way_in_the_arena() {
        let mut p = Pool::new(2, 2048);
        let (a, b) = (p.alloc().unwrap(), p.alloc().unwrap());
        let bytes: Vec<u8> = (0..1500u32).map(|i| (i * 7 + 3) as u8).collect();
        assert!(p.fill(a, &bytes));
        assert!(p.fill(b, &[0u8; 1500]));
        // Later buffer to earlier, and back, with offsets at both ends.
        for (src, dst) in [(a, b), (b, a)] {
            let sum = p.copy_between_summed(src, 100..1400, dst, 50);
            assert_eq!(sum, tep_csum::reference(&bytes[100..1400]));
            assert_eq!(&p.data(dst)[50..1350], &bytes[100..1400]);
            p.copy_between(src, 0..1500, dst, 0);
        }
        assert_eq!(p.data(a), &bytes[..]);
    }

    #[test]
    #[should_panic(expected = "between two buffers")]
    fn a_summed_copy_within_one_buffer_is_refused() {
        let mut p = Pool::new(1, 64);
        let a = p.alloc().unwrap();
        assert!(p.fill(a, &[1u8; 64]));
        p.copy_between_summed(a, 0..8, a, 32);
    }

    #[test]
    fn prepend_and_trim_move_the_start_without_copying_the_payload() {
        let mut p = Pool::new(2, 2048);
        let id = p.alloc().unwrap();
        assert!(p.fill(id, b"inner packet"));
        let hdr = p.prepend(id, 8).unwrap();
        hdr.copy_from_slice(b"OUTERHDR");
        assert_eq!(p.data(id), b"OUTERHDRinner packet");
        assert_eq!(p.headroom(id), HEADROOM - 8);
        assert!(p.trim_front(id, 8));
        assert_eq!(p.data(id), b"inner packet");
        assert!(p.truncate(id, 5));
        assert_eq!(p.data(id), b"inner");
        assert!(!p.trim_front(id, 6));
        assert!(!p.truncate(id, 6));
    }

    #[test]
    fn headroom_is_bounded_and_buffers_do_not_overlap() {
        let mut p = Pool::new(2, 64);
        let a = p.alloc().unwrap();
        let b = p.alloc().unwrap();
        assert!(p.fill(a, &[0xaa; 64]));
        assert!(!p.fill(a, &[0; 65]), "past the data room");
        assert!(p.fill(b, &[0xbb; 64]));
        assert!(p.prepend(b, HEADROOM).is_some());
        assert!(p.prepend(b, 1).is_none(), "headroom exhausted");
        p.data_mut(b)[..HEADROOM].fill(0xcc);
        assert!(
            p.data(a).iter().all(|&x| x == 0xaa),
            "b's headroom is not a's data"
        );
    }

    #[test]
    fn super_packets_fit() {
        let mut p = Pool::new(1, SUPER_PACKET_ROOM);
        let id = p.alloc().unwrap();
        assert!(p.fill(id, &vec![1u8; 65535]));
        assert!(p.prepend(id, 18 + 40 + 8 + 16).is_some());
    }

    #[test]
    fn rooms_of_several_buffers_at_once() {
        let mut pool = Pool::new(4, 100);
        let a = pool.alloc().unwrap();
        let b = pool.alloc().unwrap();
        let c = pool.alloc().unwrap();
        {
            let rooms: [&mut [u8]; 4] = pool.rooms_mut(&[c, a, b], 10);
            assert_eq!(rooms.map(|r| r.len()), [90, 90, 90, 0]);
        }
        {
            let [rc, ra, _, _]: [&mut [u8]; 4] = pool.rooms_mut(&[c, a], 0);
            rc[..3].copy_from_slice(b"ccc");
            ra[..2].copy_from_slice(b"aa");
        }
        assert!(pool.set_len(c, 3) && pool.set_len(a, 2));
        assert_eq!((pool.data(a), pool.data(c)), (&b"aa"[..], &b"ccc"[..]));
    }

    #[test]
    #[should_panic(expected = "buffer given twice")]
    fn rooms_refuse_a_buffer_twice() {
        let mut pool = Pool::new(2, 10);
        let a = pool.alloc().unwrap();
        let _: [&mut [u8]; 2] = pool.rooms_mut(&[a, a], 0);
    }

    #[test]
    fn a_tail_is_gathered_linearized_and_freed_with_its_packet() {
        let mut pool = Pool::new(4, 256);
        let head = pool.alloc().unwrap();
        let rest = pool.alloc().unwrap();
        assert!(pool.fill(head, b"HEAD"));
        // Three datagrams of 6 bytes (the last of 4), 2 header bytes each,
        // after 3 bytes that are not the tail's.
        assert!(pool.fill(rest, b"xyzh1abcdh2efghh3ij"));
        let tail = Tail {
            buf: rest,
            start: 3,
            len: 16,
            stride: 6,
            skip: 2,
        };
        assert!(pool.set_tail(head, tail));
        pool.free(rest);
        assert_eq!(pool.available(), 2, "kept for its tail");
        let parts: Vec<&[u8]> = pool.tail_parts(head).collect();
        assert_eq!(parts, [&b"abcd"[..], b"efgh", b"ij"]);
        assert_eq!(pool.total_len(head), 14);
        // The length from the fields is the parts' for every shape,
        // including a last piece shorter than the skip.
        for (start, len, stride, skip) in [
            (3, 16, 6, 2),
            (3, 13, 6, 2),
            (0, 19, 5, 3),
            (0, 19, 0, 4),
            (2, 0, 0, 0),
        ] {
            let t = Tail {
                buf: rest,
                start,
                len,
                stride,
                skip,
            };
            assert!(pool.set_tail(head, t));
            let sum: usize = pool.tail_parts(head).map(<[u8]>::len).sum();
            assert_eq!(pool.total_len(head), 4 + sum, "{t:?}");
        }
        assert!(pool.set_tail(head, tail));
        assert!(pool.linearize(head));
        assert_eq!(pool.data(head), b"HEADabcdefghij");
        assert_eq!(pool.meta(head).tail, None);
        assert_eq!(pool.available(), 3, "the tail's buffer went back");
        // Two tails on one buffer (segments of one super-packet): it
        // returns with the last.
        let sup = pool.alloc().unwrap();
        let other = pool.alloc().unwrap();
        assert!(pool.fill(sup, b"0123456789"));
        let piece = |start| Tail {
            buf: sup,
            start,
            len: 5,
            stride: 0,
            skip: 0,
        };
        assert!(pool.set_tail(head, piece(0)));
        assert!(pool.set_tail(other, piece(5)));
        assert!(!pool.set_tail(other, piece(6)), "past the data");
        pool.free(sup);
        assert_eq!(pool.tail_parts(other).collect::<Vec<_>>(), [b"56789"]);
        pool.free(head);
        assert_eq!(pool.available(), 2, "head back, sup kept for other");
        pool.free(other);
        assert_eq!(pool.available(), 4, "all back");
    }
}
