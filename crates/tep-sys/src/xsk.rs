//! AF_XDP sockets over memory the caller owns.
//!
//! In gateway mode tep's buffer pool *is* the UMEM: the kernel writes frames
//! straight into tep's buffers (tep keeps its 256 bytes of headroom in front
//! by handing the kernel frame addresses that far into each chunk), and a
//! frame received on one interface leaves through the other by its
//! descriptor alone, without a copy. The ring crates (`xdp`, `xdpilone`,
//! `xsk-rs` over C libxdp) own their UMEM and its allocator, so they do not
//! fit; the socket and its four rings are written here, after the kernel's
//! Documentation/networking/af_xdp.rst and libxdp's xsk.h.
//!
//! - [`Umem`]: the caller's region (page-aligned, chunks of 2048 or 4096
//!   bytes, aligned mode, no kernel headroom).
//! - [`XskSocket::new`] registers it on a first socket with its fill and
//!   completion rings; [`XskSocket::shared`] binds another interface or
//!   queue to the same UMEM (XDP_SHARED_UMEM) with its own fill and
//!   completion rings, as the kernel requires across devices and queues.
//! - The ring operations ([`XskSocket::fill`], [`XskSocket::recv`],
//!   [`XskSocket::send`], [`XskSocket::complete`]) move batches between
//!   slices and the rings without allocating and without syscalls; the
//!   syscalls are [`XskSocket::kick`] and [`XskSocket::wake_rx`], needed
//!   only when the kernel asks for them (need_wakeup).
//!
//! Each ring is single-producer, single-consumer, shared with the kernel:
//! the producer writes entries, then publishes its index with a release
//! store; the consumer reads the other side's index with an acquire load
//! before reading entries, and publishes how far it read with a release
//! store before the producer may reuse those entries (libxdp does the same;
//! the kernel's side is the pairing documented in its xsk_queue.h).
//!
//! The same pairs hand the chunks over, not only the entries: an entry
//! names a chunk, so what one side did to a chunk before publishing its
//! entry happens before what the other side does after reading it. Fill
//! (our release, the kernel's acquire): our last reads and writes of the
//! chunk come before the kernel writes a frame into it. Receive (the
//! kernel's release, our acquire): the frame is written before we read it.
//! Transmit: our frame is written before the kernel reads it. Completion:
//! the kernel has read it before we write the chunk again.

use std::io;
use std::mem;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::sys::{context, cvt, owned, retry};

/// A frame descriptor of the receive and transmit rings (`struct
/// xdp_desc`): where in the UMEM the frame (or a part of it) starts, its
/// length, and options ([`Desc::CONTD`] for multi-buffer).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Desc {
    /// Offset of the frame's first byte in the UMEM.
    pub addr: u64,
    /// Frame length in bytes.
    pub len: u32,
    /// `xdp_desc.options`.
    pub options: u32,
}

impl Desc {
    /// XDP_PKT_CONTD in `options`: the frame goes on in the next
    /// descriptor (multi-buffer, a socket bound with
    /// [`XskOptions::multi_buffer`]); the last part has it clear.
    pub const CONTD: u32 = libc::XDP_PKT_CONTD;

    /// Whether the frame goes on in the next descriptor.
    pub fn continued(&self) -> bool {
        self.options & Self::CONTD != 0
    }
}

/// A memory region handed to the kernel as packet buffers: `len` bytes at
/// `addr`, cut into chunks of `chunk_size`. A copyable description; the
/// memory stays the caller's.
#[derive(Clone, Copy, Debug)]
pub struct Umem {
    addr: NonNull<u8>,
    len: usize,
    chunk_size: u32,
}

// SAFETY: Umem is an address and two sizes, never dereferenced here; what
// may be done with the memory, from any thread, is governed by the
// contract of Umem::register.
unsafe impl Send for Umem {}
// SAFETY: as above.
unsafe impl Sync for Umem {}

impl Umem {
    /// Describes the region `addr..addr + len` as a UMEM of `chunk_size`
    /// chunks (2048 or 4096). `addr` and `len` must be page-aligned.
    ///
    /// # Safety
    /// The region is valid for reads and writes, and stays allocated (and
    /// at this address) as long as any socket using it is open: the kernel
    /// pins its pages and writes received frames into it, concurrently with
    /// the caller's threads. Writes by the kernel land only in chunks the
    /// caller put on a fill ring, and it reads the frames put on a transmit
    /// ring; a chunk is the kernel's from the fill or send that hands it
    /// over to the recv or complete that hands it back (the rings order
    /// the handovers: see the module's documentation).
    ///
    /// So that the kernel's writes alias nothing, while the region is
    /// registered no Rust reference (`&`, `&mut`, a `Box`) may cover a
    /// chunk the kernel owns: the caller holds the region as raw memory
    /// (not as a `Box<[u8]>` or a slice of the whole, which claims every
    /// byte of it), forms slices only of chunks it owns, and drops them
    /// before it hands the chunk over.
    pub unsafe fn register(addr: *mut u8, len: usize, chunk_size: u32) -> io::Result<Umem> {
        let invalid = |what: String| io::Error::new(io::ErrorKind::InvalidInput, what);
        let page = page_size();
        let Some(addr) = NonNull::new(addr) else {
            return Err(invalid("UMEM: null address".into()));
        };
        // The page size is a power of two.
        if (addr.as_ptr() as usize | len) & (page - 1) != 0 || len == 0 {
            return Err(invalid(format!(
                "UMEM at {addr:p}, {len} bytes: address and length must be multiples of the \
                 page size ({page})"
            )));
        }
        if chunk_size != 2048 && chunk_size != 4096 {
            return Err(invalid(format!(
                "UMEM chunk size {chunk_size}: 2048 or 4096"
            )));
        }
        Ok(Umem {
            addr,
            len,
            chunk_size,
        })
    }

    /// The region's start.
    pub fn addr(&self) -> *mut u8 {
        self.addr.as_ptr()
    }

    /// The region's length.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the region is empty (never: register refuses it).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The chunk size.
    pub fn chunk_size(&self) -> u32 {
        self.chunk_size
    }

    /// How many chunks the region holds.
    pub fn chunks(&self) -> u64 {
        (self.len / self.chunk_size as usize) as u64
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no memory effects.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}

/// Copy or zero-copy: the kernel's choice unless forced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CopyMode {
    /// Zero-copy where the driver has it, copy otherwise.
    #[default]
    Auto,
    /// XDP_COPY.
    Copy,
    /// XDP_ZEROCOPY: binding fails where the driver cannot.
    ZeroCopy,
}

/// Ring sizes and binding options of a socket. Ring sizes are powers of
/// two; a ring of size 0 is not created (a receive-only socket needs no
/// transmit ring).
#[derive(Clone, Copy, Debug)]
pub struct XskOptions {
    /// Receive ring entries.
    pub rx: u32,
    /// Transmit ring entries.
    pub tx: u32,
    /// Fill ring entries.
    pub fill: u32,
    /// Completion ring entries.
    pub completion: u32,
    /// Copy or zero-copy.
    pub copy: CopyMode,
    /// Multi-buffer (XDP_USE_SG): a frame longer than a chunk arrives, and
    /// may leave, as a chain of descriptors ([`Desc::CONTD`]); without it
    /// the kernel drops such a frame (`rx_dropped`). Copy mode has it from
    /// Linux 6.6, zero-copy where the driver does; elsewhere binding fails.
    pub multi_buffer: bool,
}

impl Default for XskOptions {
    fn default() -> Self {
        XskOptions {
            rx: 2048,
            tx: 2048,
            fill: 4096,
            completion: 2048,
            copy: CopyMode::Auto,
            multi_buffer: false,
        }
    }
}

/// The socket's drop and error counters (XDP_STATISTICS).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XskStats {
    /// Frames dropped for reasons other than the two below.
    pub rx_dropped: u64,
    /// Invalid descriptors on the fill ring.
    pub rx_invalid_descs: u64,
    /// Invalid descriptors on the transmit ring.
    pub tx_invalid_descs: u64,
    /// Frames dropped because the receive ring was full.
    pub rx_ring_full: u64,
    /// Frames dropped because the fill ring was empty.
    pub rx_fill_ring_empty_descs: u64,
    /// Times the kernel found the transmit ring empty when kicked.
    pub tx_ring_empty_descs: u64,
}

/// One mapped ring: the indices shared with the kernel, the entries, and a
/// cached copy of both indices so that most operations touch only one
/// shared cache line.
#[derive(Debug)]
struct Ring<T> {
    producer: NonNull<AtomicU32>,
    consumer: NonNull<AtomicU32>,
    flags: NonNull<AtomicU32>,
    entries: NonNull<T>,
    mask: u32,
    size: u32,
    /// Our side's index (the other side only reads it).
    local: u32,
    /// The other side's index as last read.
    cached: u32,
    map: NonNull<libc::c_void>,
    map_len: usize,
}

impl<T: Copy> Ring<T> {
    /// Maps ring `size` of socket `fd` at page offset `pgoff`, laid out as
    /// `off` says.
    fn map(
        fd: RawFd,
        off: &libc::xdp_ring_offset,
        size: u32,
        pgoff: u64,
        producer_side: bool,
    ) -> io::Result<Ring<T>> {
        let map_len = off.desc as usize + size as usize * mem::size_of::<T>();
        // SAFETY: a shared mapping of the kernel's ring for this socket at
        // the offset the kernel defines for it; no existing memory is
        // affected.
        let map = unsafe {
            libc::mmap(
                ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                pgoff as libc::off_t,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(context(
                io::Error::last_os_error(),
                "mmap of an AF_XDP ring",
            ));
        }
        let base = map.cast::<u8>();
        // SAFETY: the kernel's offsets lie inside the mapping (desc is the
        // last part, and map_len covers it); the mapping is not null.
        let at = |o: u64| unsafe { NonNull::new_unchecked(base.add(o as usize)) };
        let mut ring = Ring {
            producer: at(off.producer).cast(),
            consumer: at(off.consumer).cast(),
            flags: at(off.flags).cast(),
            entries: at(off.desc).cast(),
            mask: size - 1,
            size,
            local: 0,
            cached: 0,
            // SAFETY: mmap did not fail, so `map` is not null.
            map: unsafe { NonNull::new_unchecked(map) },
            map_len,
        };
        // Start from the kernel's indices (zero on a new ring).
        if producer_side {
            ring.local = ring.producer().load(Ordering::Relaxed);
            // The producer may fill the whole ring: the consumer index plus
            // the size is how far it may go.
            ring.cached = ring.consumer().load(Ordering::Acquire);
        } else {
            ring.local = ring.consumer().load(Ordering::Relaxed);
            ring.cached = ring.producer().load(Ordering::Acquire);
        }
        Ok(ring)
    }

    fn producer(&self) -> &AtomicU32 {
        // SAFETY: points into the mapping, which lives as long as self; the
        // kernel aligns the index to 4 (it is a u32 in its ring struct).
        unsafe { self.producer.as_ref() }
    }

    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as producer().
        unsafe { self.consumer.as_ref() }
    }

    fn needs_wakeup(&self) -> bool {
        // SAFETY: as producer().
        let flags = unsafe { self.flags.as_ref() };
        flags.load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }

    /// Entries the producer may write now (at least `want` if there is
    /// room for them).
    fn room(&mut self, want: usize) -> usize {
        let mut free = self.size - self.local.wrapping_sub(self.cached);
        if (free as usize) < want {
            // As in produce.
            self.cached = self.consumer().load(Ordering::Acquire);
            free = self.size - self.local.wrapping_sub(self.cached);
        }
        free as usize
    }

    /// Producer: writes as many of `items` as there is room for, publishes
    /// them, and returns how many. On the fill and transmit rings this
    /// hands the chunks the entries name to the kernel.
    fn produce(&mut self, items: &[T]) -> usize {
        let mut free = self.size - self.local.wrapping_sub(self.cached);
        if (free as usize) < items.len() {
            // Acquire: the kernel has finished reading the entries it
            // consumed before we overwrite them.
            self.cached = self.consumer().load(Ordering::Acquire);
            free = self.size - self.local.wrapping_sub(self.cached);
        }
        let n = items.len().min(free as usize);
        for (i, item) in items[..n].iter().enumerate() {
            let slot = (self.local.wrapping_add(i as u32) & self.mask) as usize;
            // SAFETY: slot < size, inside the mapped entries; the entry is
            // ours (between the kernel's consumer index and ours + free).
            unsafe { self.entries.as_ptr().add(slot).write_volatile(*item) };
        }
        if n > 0 {
            self.local = self.local.wrapping_add(n as u32);
            // Release: the entries written above, and whatever we wrote to
            // or read from the chunks they name, happen before the kernel
            // sees the index that hands them over (its acquire load).
            self.producer().store(self.local, Ordering::Release);
        }
        n
    }

    /// Consumer: reads up to `out.len()` entries, releases them, and
    /// returns how many. On the receive and completion rings this takes
    /// back the chunks the entries name.
    fn consume(&mut self, out: &mut [T]) -> usize {
        let mut ready = self.cached.wrapping_sub(self.local);
        if (ready as usize) < out.len() {
            // Acquire: the entries the kernel published, and what it did to
            // the chunks they name (a received frame written, a sent one
            // read), happen before we read them or touch the chunks.
            self.cached = self.producer().load(Ordering::Acquire);
            ready = self.cached.wrapping_sub(self.local);
        }
        let n = out.len().min(ready as usize);
        for (i, slot_out) in out[..n].iter_mut().enumerate() {
            let slot = (self.local.wrapping_add(i as u32) & self.mask) as usize;
            // SAFETY: slot < size; the kernel published this entry (it lies
            // between our consumer index and its producer index).
            *slot_out = unsafe { self.entries.as_ptr().add(slot).read_volatile() };
        }
        if n > 0 {
            self.local = self.local.wrapping_add(n as u32);
            // Release: our reads of the entries are done before the kernel
            // may overwrite them.
            self.consumer().store(self.local, Ordering::Release);
        }
        n
    }
}

impl<T> Drop for Ring<T> {
    fn drop(&mut self) {
        // SAFETY: the mapping made in Ring::map, unmapped once; nothing
        // borrowed from it outlives self.
        unsafe { libc::munmap(self.map.as_ptr(), self.map_len) };
    }
}

/// An AF_XDP socket bound to one interface queue, with its rings.
#[derive(Debug)]
pub struct XskSocket {
    // The rings go before the descriptor (field order is drop order).
    rx: Option<Ring<Desc>>,
    tx: Option<Ring<Desc>>,
    fill: Ring<u64>,
    completion: Ring<u64>,
    fd: OwnedFd,
    umem: Umem,
    zero_copy: bool,
    ifindex: u32,
    queue: u32,
}

// SAFETY: the rings point into mappings owned by the socket; moving it to
// another thread moves the only handle to them (all ring operations take
// &mut self).
unsafe impl Send for XskSocket {}

fn setsockopt<T>(fd: RawFd, name: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: `value` is a live T and its exact size is passed.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_XDP,
            name,
            (value as *const T).cast(),
            mem::size_of::<T>() as libc::socklen_t,
        )
    })
    .map(drop)
}

fn getsockopt<T>(fd: RawFd, name: libc::c_int, value: &mut T) -> io::Result<()> {
    let mut len = mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: `value` is a live, exclusive T of `len` bytes; the kernel
    // writes at most `len`.
    cvt(unsafe { libc::getsockopt(fd, libc::SOL_XDP, name, (value as *mut T).cast(), &mut len) })
        .map(drop)
}

impl XskSocket {
    /// A socket on `ifindex` queue `queue` that registers `umem` with the
    /// kernel and has the UMEM's first fill and completion rings.
    ///
    /// A queue whose previous socket has just closed refuses with
    /// [`io::ErrorKind::ResourceBusy`] for a few milliseconds (the kernel
    /// lets go of it from a work item; about 20 ms on a veth here): retry.
    pub fn new(umem: &Umem, ifindex: u32, queue: u32, opts: &XskOptions) -> io::Result<XskSocket> {
        let fd = socket()?;
        let reg = libc::xdp_umem_reg {
            addr: umem.addr() as u64,
            len: umem.len() as u64,
            chunk_size: umem.chunk_size(),
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        // The v1 layout (no tx_metadata_len) is what every kernel with
        // AF_XDP takes; the field is 0 anyway.
        let reg_v1 = libc::xdp_umem_reg_v1 {
            addr: reg.addr,
            len: reg.len,
            chunk_size: reg.chunk_size,
            headroom: reg.headroom,
        };
        setsockopt(fd.as_raw_fd(), libc::XDP_UMEM_REG, &reg_v1)
            .map_err(|e| context(e, "XDP_UMEM_REG"))?;
        Self::finish(fd, *umem, ifindex, queue, opts, None)
    }

    /// Another socket on `ifindex` queue `queue` using `first`'s UMEM
    /// (XDP_SHARED_UMEM), with fill and completion rings of its own: a
    /// frame received on one socket can be sent on the other by its
    /// descriptor. The interface or the queue differs from `first`'s (the
    /// kernel's rule for sockets with their own fill and completion rings);
    /// copy mode and need_wakeup are `first`'s (`opts.copy` is not used).
    pub fn shared(
        first: &XskSocket,
        ifindex: u32,
        queue: u32,
        opts: &XskOptions,
    ) -> io::Result<XskSocket> {
        if first.bound() == (ifindex, queue) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "AF_XDP: interface {ifindex} queue {queue} is the first socket's; a shared \
                     socket binds another interface or queue"
                ),
            ));
        }
        let fd = socket()?;
        Self::finish(fd, first.umem, ifindex, queue, opts, Some(first.fd.as_fd()))
    }

    fn finish(
        fd: OwnedFd,
        umem: Umem,
        ifindex: u32,
        queue: u32,
        opts: &XskOptions,
        shared: Option<BorrowedFd<'_>>,
    ) -> io::Result<XskSocket> {
        let raw = fd.as_raw_fd();
        for (name, size, what) in [
            (libc::XDP_UMEM_FILL_RING, opts.fill, "fill"),
            (
                libc::XDP_UMEM_COMPLETION_RING,
                opts.completion,
                "completion",
            ),
            (libc::XDP_RX_RING, opts.rx, "rx"),
            (libc::XDP_TX_RING, opts.tx, "tx"),
        ] {
            let needed = matches!(what, "fill" | "completion");
            if size == 0 && !needed {
                continue;
            }
            if !size.is_power_of_two() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("AF_XDP {what} ring size {size}: a power of two"),
                ));
            }
            setsockopt(raw, name, &(size as libc::c_int))
                .map_err(|e| context(e, format_args!("AF_XDP {what} ring of {size}")))?;
        }
        if opts.rx == 0 && opts.tx == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "AF_XDP socket without rx and tx rings",
            ));
        }
        // SAFETY: integers only: all zeroes is valid.
        let mut off: libc::xdp_mmap_offsets = unsafe { mem::zeroed() };
        getsockopt(raw, libc::XDP_MMAP_OFFSETS, &mut off)
            .map_err(|e| context(e, "XDP_MMAP_OFFSETS"))?;
        let fill = Ring::map(
            raw,
            &off.fr,
            opts.fill,
            libc::XDP_UMEM_PGOFF_FILL_RING,
            true,
        )?;
        let completion = Ring::map(
            raw,
            &off.cr,
            opts.completion,
            libc::XDP_UMEM_PGOFF_COMPLETION_RING,
            false,
        )?;
        let rx = match opts.rx {
            0 => None,
            n => Some(Ring::map(
                raw,
                &off.rx,
                n,
                libc::XDP_PGOFF_RX_RING as u64,
                false,
            )?),
        };
        let tx = match opts.tx {
            0 => None,
            n => Some(Ring::map(
                raw,
                &off.tx,
                n,
                libc::XDP_PGOFF_TX_RING as u64,
                true,
            )?),
        };

        // A shared socket takes copy mode, need_wakeup and multi-buffer
        // from the first (they are the UMEM's): the kernel refuses those
        // flags beside XDP_SHARED_UMEM.
        let flags = if shared.is_some() {
            libc::XDP_SHARED_UMEM
        } else {
            let sg = if opts.multi_buffer {
                libc::XDP_USE_SG
            } else {
                0
            };
            libc::XDP_USE_NEED_WAKEUP
                | sg
                | match opts.copy {
                    CopyMode::Auto => 0,
                    CopyMode::Copy => libc::XDP_COPY,
                    CopyMode::ZeroCopy => libc::XDP_ZEROCOPY,
                }
        };
        let addr = libc::sockaddr_xdp {
            sxdp_family: libc::AF_XDP as u16,
            sxdp_flags: flags,
            sxdp_ifindex: ifindex,
            sxdp_queue_id: queue,
            sxdp_shared_umem_fd: shared.map_or(0, |s| s.as_raw_fd() as u32),
        };
        // SAFETY: `addr` is a live sockaddr_xdp and its exact size is passed.
        cvt(unsafe {
            libc::bind(
                raw,
                (&addr as *const libc::sockaddr_xdp).cast(),
                mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
            )
        })
        .map_err(|e| {
            context(
                e,
                format_args!("binding an AF_XDP socket to interface {ifindex} queue {queue}"),
            )
        })?;
        let mut xo = libc::xdp_options { flags: 0 };
        getsockopt(raw, libc::XDP_OPTIONS, &mut xo).map_err(|e| context(e, "XDP_OPTIONS"))?;
        Ok(XskSocket {
            rx,
            tx,
            fill,
            completion,
            fd,
            umem,
            zero_copy: xo.flags & libc::XDP_OPTIONS_ZEROCOPY != 0,
            ifindex,
            queue,
        })
    }

    /// The UMEM the socket uses.
    pub fn umem(&self) -> &Umem {
        &self.umem
    }

    /// Whether the kernel runs this socket in zero-copy mode (XDP_OPTIONS).
    pub fn zero_copy(&self) -> bool {
        self.zero_copy
    }

    /// The interface and queue the socket is bound to.
    pub fn bound(&self) -> (u32, u32) {
        (self.ifindex, self.queue)
    }

    /// Hands chunks to the kernel for received frames: `addrs` are UMEM
    /// offsets where a frame may start (a chunk's start plus the headroom
    /// the caller keeps). Returns how many fit on the fill ring.
    pub fn fill(&mut self, addrs: &[u64]) -> usize {
        self.fill.produce(addrs)
    }

    /// Takes received frames into `out`; returns how many.
    pub fn recv(&mut self, out: &mut [Desc]) -> usize {
        self.rx.as_mut().map_or(0, |r| r.consume(out))
    }

    /// Queues frames for transmission; returns how many descriptors fit.
    /// A chain ([`Desc::CONTD`]) goes on the ring whole or not at all: the
    /// kernel would take the next frame's parts for the rest of a part
    /// left behind. They leave after [`XskSocket::kick`] when
    /// [`XskSocket::tx_needs_wakeup`] says so.
    pub fn send(&mut self, descs: &[Desc]) -> usize {
        let Some(ring) = self.tx.as_mut() else {
            return 0;
        };
        let room = ring.room(descs.len());
        let n = if room < descs.len() {
            whole_chains(descs, room)
        } else {
            descs.len()
        };
        ring.produce(&descs[..n])
    }

    /// Takes back the addresses of transmitted frames into `out`; returns
    /// how many.
    pub fn complete(&mut self, out: &mut [u64]) -> usize {
        self.completion.consume(out)
    }

    /// Whether the kernel waits for a syscall ([`XskSocket::wake_rx`])
    /// before it looks at the fill ring again.
    pub fn fill_needs_wakeup(&self) -> bool {
        self.fill.needs_wakeup()
    }

    /// Whether queued frames need [`XskSocket::kick`] to leave.
    pub fn tx_needs_wakeup(&self) -> bool {
        self.tx.as_ref().is_some_and(|r| r.needs_wakeup())
    }

    /// Descriptors on the transmit ring the kernel has not taken yet (one
    /// acquire load of its consumer index): what a kick has left to do. In
    /// copy mode a kick sends a bounded batch (32 frames on Linux), so a
    /// larger one takes several.
    pub fn tx_pending(&self) -> u32 {
        self.tx.as_ref().map_or(0, |r| {
            r.local.wrapping_sub(r.consumer().load(Ordering::Acquire))
        })
    }

    /// Makes the kernel process the transmit ring (sendto, MSG_DONTWAIT).
    /// EAGAIN and EBUSY (the kernel is busy sending) are not errors: the
    /// frames stay queued for the next kick.
    pub fn kick(&self) -> io::Result<()> {
        // SAFETY: a zero-length send with no buffer and no address is what
        // AF_XDP defines as "process the tx ring".
        let ret = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                ptr::null(),
                0,
            )
        };
        if ret >= 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EAGAIN | libc::EBUSY | libc::ENOBUFS | libc::ENETDOWN) => Ok(()),
            _ => Err(context(e, "AF_XDP tx kick")),
        }
    }

    /// Wakes the kernel's receive side after the fill ring ran empty
    /// (recvfrom, MSG_DONTWAIT); to be called when
    /// [`XskSocket::fill_needs_wakeup`].
    pub fn wake_rx(&self) -> io::Result<()> {
        retry(|| {
            // SAFETY: a zero-length receive with no buffer and no address
            // only drives the receive path.
            let ret = unsafe {
                libc::recvfrom(
                    self.fd.as_raw_fd(),
                    ptr::null_mut(),
                    0,
                    libc::MSG_DONTWAIT,
                    ptr::null_mut(),
                    ptr::null_mut(),
                )
            };
            if ret >= 0 {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EAGAIN | libc::EBUSY) => Ok(()),
                _ => Err(e),
            }
        })
        .map_err(|e| context(e, "AF_XDP rx wakeup"))
    }

    /// The socket's drop and error counters.
    pub fn statistics(&self) -> io::Result<XskStats> {
        // SAFETY: integers only: all zeroes is valid.
        let mut s: libc::xdp_statistics = unsafe { mem::zeroed() };
        getsockopt(self.fd.as_raw_fd(), libc::XDP_STATISTICS, &mut s)
            .map_err(|e| context(e, "XDP_STATISTICS"))?;
        Ok(XskStats {
            rx_dropped: s.rx_dropped,
            rx_invalid_descs: s.rx_invalid_descs,
            tx_invalid_descs: s.tx_invalid_descs,
            rx_ring_full: s.rx_ring_full,
            rx_fill_ring_empty_descs: s.rx_fill_ring_empty_descs,
            tx_ring_empty_descs: s.tx_ring_empty_descs,
        })
    }
}

impl AsRawFd for XskSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl AsFd for XskSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// The most of `descs`, up to `room`, that ends with a frame's last part.
fn whole_chains(descs: &[Desc], room: usize) -> usize {
    let mut n = room.min(descs.len());
    while n > 0 && descs[n - 1].continued() {
        n -= 1;
    }
    n
}

fn socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2) call, no pointers.
    owned(unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) })
        .map_err(|e| context(e, "socket(AF_XDP)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn umem_register_checks_alignment_and_chunk_size() {
        let page = page_size();
        let mut buf = vec![0u8; 4 * page];
        let at = buf.as_mut_ptr().align_offset(page);
        // SAFETY: nothing is registered with the kernel here; these only
        // check the arguments.
        unsafe {
            let base = buf.as_mut_ptr().add(at);
            assert!(Umem::register(base, 2 * page, 2048).is_ok());
            assert!(Umem::register(base, 2 * page, 1000).is_err());
            assert!(Umem::register(base.add(1), 2 * page, 2048).is_err());
            assert!(Umem::register(base, page + 1, 2048).is_err());
            assert!(Umem::register(ptr::null_mut(), page, 2048).is_err());
            assert_eq!(
                Umem::register(base, 2 * page, 2048).unwrap().chunks(),
                (2 * page / 2048) as u64
            );
        }
    }

    #[test]
    fn a_chain_is_sent_whole_or_not_at_all() {
        let part = |continued: bool| Desc {
            addr: 0,
            len: 1,
            options: if continued { Desc::CONTD } else { 0 },
        };
        // One frame, a chain of three, one frame.
        let descs = [
            part(false),
            part(true),
            part(true),
            part(false),
            part(false),
        ];
        assert_eq!(whole_chains(&descs, 5), 5);
        assert_eq!(whole_chains(&descs, 4), 4);
        assert_eq!(whole_chains(&descs, 3), 1);
        assert_eq!(whole_chains(&descs, 2), 1);
        assert_eq!(whole_chains(&descs, 1), 1);
        assert_eq!(whole_chains(&descs, 0), 0);
        assert_eq!(whole_chains(&descs[1..], 2), 0);
    }

    #[test]
    fn desc_is_xdp_desc() {
        assert_eq!(mem::size_of::<Desc>(), mem::size_of::<libc::xdp_desc>());
        assert_eq!(mem::align_of::<Desc>(), mem::align_of::<libc::xdp_desc>());
    }
}
