//! Batched UDP sockets in the style of quinn-udp: recvmmsg/sendmmsg, UDP GSO
//! (UDP_SEGMENT, Linux 4.18) and UDP GRO (UDP_GRO, Linux 5.0), so one
//! syscall moves up to [`MAX_BATCH`] messages and one message can be a train
//! of equal-sized datagrams.
//!
//! The mmsghdr/iovec/sockaddr/cmsg arrays live in the socket and are reused
//! by every call: the per-packet path does not allocate.

use std::fmt;
use std::io::{self, IoSlice, IoSliceMut};
use std::mem;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::ptr;

use crate::sys::{context, cvt, owned, retry, setsockopt_int};

/// Most messages one [`UdpSocket::recv_batch`] or [`UdpSocket::send_batch`] moves.
pub const MAX_BATCH: usize = 64;

/// Segments per GSO message tep uses (the kernel's UDP_MAX_SEGMENTS is 64 or
/// 128 depending on the version).
const GSO_MAX_SEGMENTS: usize = 64;

/// Socket options applied by [`UdpSocket::bind`].
#[derive(Clone, Debug)]
pub struct UdpOptions {
    /// SO_REUSEPORT: several sockets (queues) on one address.
    pub reuse_port: bool,
    /// SO_RCVBUF (SO_RCVBUFFORCE first, which works as root); 0 leaves the default.
    pub recv_buffer: usize,
    /// SO_SNDBUF (SO_SNDBUFFORCE first); 0 leaves the default.
    pub send_buffer: usize,
    /// Want UDP_GRO (receive trains of datagrams).
    pub gro: bool,
    /// Want UDP_SEGMENT (send trains of datagrams).
    pub gso: bool,
    /// Send without UDP checksum: SO_NO_CHECK (IPv4), UDP_NO_CHECK6_TX (IPv6, RFC 6935).
    /// The kernel refuses GSO on such a socket, so it turns GSO off.
    pub zero_checksum_tx: bool,
    /// IPv6: accept datagrams with a zero checksum (UDP_NO_CHECK6_RX). IPv4 always does.
    pub zero_checksum_rx: bool,
    /// IPv4 Don't-Fragment: Some(true) sets it on every datagram
    /// (IP_PMTUDISC_DO), Some(false) never (IP_PMTUDISC_DONT); None leaves
    /// the kernel's default (IP_PMTUDISC_WANT: set). Ignored over IPv6.
    pub dont_fragment: Option<bool>,
    /// SO_TIMESTAMPNS: each received message carries the kernel's receive
    /// time ([`RecvMeta::stamp_ns`]), for latency measurements.
    pub rx_timestamps: bool,
    /// SO_BINDTODEVICE: send and receive through this interface only.
    pub device: Option<String>,
}

impl Default for UdpOptions {
    fn default() -> UdpOptions {
        UdpOptions {
            reuse_port: false,
            recv_buffer: 16 << 20,
            send_buffer: 4 << 20,
            gro: true,
            gso: true,
            zero_checksum_tx: false,
            zero_checksum_rx: false,
            dont_fragment: None,
            rx_timestamps: false,
            device: None,
        }
    }
}

/// What the socket can do, as probed at bind time (GSO can be turned off
/// later when the kernel fails a GSO send).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UdpCapabilities {
    pub gso: bool,
    pub gro: bool,
    /// Most datagrams in one GSO message: 64 with GSO, else 1.
    pub max_segments: usize,
}

/// One received message.
#[derive(Clone, Copy, Debug)]
pub struct RecvMeta {
    /// Bytes in the buffer (all segments of a GRO train).
    pub len: usize,
    pub source: SocketAddr,
    /// Some(n): UDP GRO coalesced datagrams of n bytes (the last may be
    /// shorter) into this buffer. None: a single datagram.
    pub segment_size: Option<u16>,
    /// The outer IPv4 TOS / IPv6 traffic class (DSCP and ECN), as
    /// IP_RECVTOS / IPV6_RECVTCLASS report it; 0 when not reported. GRO
    /// only merges datagrams whose TOS is the same.
    pub tos: u8,
    /// The outer TTL / hop limit (IP_RECVTTL / IPV6_RECVHOPLIMIT); 0 when
    /// not reported.
    pub ttl: u8,
    /// When the kernel received it, CLOCK_REALTIME in ns (with
    /// [`UdpOptions::rx_timestamps`]); 0 when not reported.
    pub stamp_ns: u64,
}

impl Default for RecvMeta {
    fn default() -> RecvMeta {
        RecvMeta {
            len: 0,
            source: SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)),
            segment_size: None,
            tos: 0,
            ttl: 0,
            stamp_ns: 0,
        }
    }
}

/// One message to send.
#[derive(Clone, Copy, Debug)]
pub struct Transmit<'a> {
    pub dest: SocketAddr,
    pub data: &'a [u8],
    /// Some(n): GSO, the kernel cuts `data` into datagrams of n bytes (the
    /// last may be shorter).
    pub segment_size: Option<u16>,
}

/// Most buffers one [`UdpSocket::send_gathered`] call sends from: a
/// vector's worth of datagrams (256) four times over.
pub const MAX_PARTS: usize = 1024;

/// One message to send, its bytes in several buffers.
#[derive(Clone, Copy, Debug)]
pub struct Gathered<'a> {
    pub dest: SocketAddr,
    /// Concatenated by the kernel.
    pub parts: &'a [IoSlice<'a>],
    /// As in [`Transmit`]: GSO segment size.
    pub segment_size: Option<u16>,
    /// The outer IPv4 TOS / IPv6 traffic class (DSCP and ECN) for every
    /// datagram of the message (IP_TOS / IPV6_TCLASS cmsg); None: the
    /// socket's (0).
    pub tos: Option<u8>,
    /// The outer TTL / hop limit (IP_TTL / IPV6_HOPLIMIT cmsg); None: the
    /// system default.
    pub ttl: Option<u8>,
}

/// Control message room per message, in u64 words (cmsghdr alignment).
/// Receive: UDP_GRO, TOS and TTL (at most CMSG_SPACE(4) = 24 bytes each)
/// and a time stamp (CMSG_SPACE(16) = 32); send: UDP_SEGMENT, TOS and
/// TTL. 104 of the 128.
const CMSG_WORDS: usize = 16;

/// The arrays the batch syscalls point into, allocated once per socket.
struct Scratch {
    hdrs: [libc::mmsghdr; MAX_BATCH],
    /// Receive: one per message. Send: the parts of all messages.
    iovs: [libc::iovec; MAX_PARTS],
    names: [libc::sockaddr_storage; MAX_BATCH],
    /// u64 words: cmsghdr alignment.
    cmsgs: [[u64; CMSG_WORDS]; MAX_BATCH],
}

/// A non-blocking UDP socket with batched receive and send.
pub struct UdpSocket {
    fd: OwnedFd,
    local: SocketAddr,
    caps: UdpCapabilities,
    scratch: Box<Scratch>,
}

// SAFETY: the raw pointers in `scratch` are written at the start of every
// `&mut self` batch call and only used by the kernel during that call; no
// pointer is ever dereferenced across calls or threads. The rest is an fd and
// plain values.
unsafe impl Send for UdpSocket {}
// SAFETY: `&self` methods read only the fd, the address and the capabilities;
// `scratch` is touched only through `&mut self`.
unsafe impl Sync for UdpSocket {}

impl fmt::Debug for UdpSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UdpSocket")
            .field("fd", &self.fd.as_raw_fd())
            .field("local", &self.local)
            .field("caps", &self.caps)
            .finish()
    }
}

impl UdpSocket {
    /// socket(SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC), IPV6_V6ONLY for
    /// IPv6, the options, bind. Probes UDP_GRO by enabling it and UDP_SEGMENT
    /// by setting it to 0; GSO is off with `zero_checksum_tx`.
    pub fn bind(addr: SocketAddr, opts: &UdpOptions) -> io::Result<UdpSocket> {
        let v6 = addr.is_ipv6();
        let family = if v6 { libc::AF_INET6 } else { libc::AF_INET };
        // SAFETY: plain socket(2) call, no pointers.
        let fd = owned(unsafe {
            libc::socket(
                family,
                libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            )
        })
        .map_err(|e| context(e, format_args!("udp socket for {addr}")))?;
        let raw = fd.as_raw_fd();
        let set = |level, name, value, what: &str| {
            setsockopt_int(raw, level, name, value)
                .map_err(|e| context(e, format_args!("{what} on udp {addr}")))
        };

        if v6 {
            set(libc::IPPROTO_IPV6, libc::IPV6_V6ONLY, 1, "IPV6_V6ONLY")?;
        }
        if opts.rx_timestamps {
            set(libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1, "SO_TIMESTAMPNS")?;
        }
        if let Some(dev) = &opts.device {
            // SAFETY: the name's bytes, valid for the call; the kernel
            // copies at most IFNAMSIZ of them.
            cvt(unsafe {
                libc::setsockopt(
                    raw,
                    libc::SOL_SOCKET,
                    libc::SO_BINDTODEVICE,
                    dev.as_ptr().cast(),
                    dev.len() as libc::socklen_t,
                )
            })
            .map_err(|e| context(e, format_args!("SO_BINDTODEVICE {dev} on udp {addr}")))?;
        }
        if opts.reuse_port {
            set(libc::SOL_SOCKET, libc::SO_REUSEPORT, 1, "SO_REUSEPORT")?;
        }
        if opts.recv_buffer > 0 {
            set_buffer(raw, libc::SO_RCVBUFFORCE, libc::SO_RCVBUF, opts.recv_buffer).map_err(
                |e| {
                    context(
                        e,
                        format_args!("SO_RCVBUF {} on udp {addr}", opts.recv_buffer),
                    )
                },
            )?;
        }
        if opts.send_buffer > 0 {
            set_buffer(raw, libc::SO_SNDBUFFORCE, libc::SO_SNDBUF, opts.send_buffer).map_err(
                |e| {
                    context(
                        e,
                        format_args!("SO_SNDBUF {} on udp {addr}", opts.send_buffer),
                    )
                },
            )?;
        }
        if opts.zero_checksum_tx {
            if v6 {
                set(libc::SOL_UDP, libc::UDP_NO_CHECK6_TX, 1, "UDP_NO_CHECK6_TX")?;
            } else {
                set(libc::SOL_SOCKET, libc::SO_NO_CHECK, 1, "SO_NO_CHECK")?;
            }
        }
        if let (Some(df), false) = (opts.dont_fragment, v6) {
            let mode = if df {
                libc::IP_PMTUDISC_DO
            } else {
                libc::IP_PMTUDISC_DONT
            };
            set(
                libc::IPPROTO_IP,
                libc::IP_MTU_DISCOVER,
                mode,
                "IP_MTU_DISCOVER",
            )?;
        }
        if opts.zero_checksum_rx && v6 {
            set(libc::SOL_UDP, libc::UDP_NO_CHECK6_RX, 1, "UDP_NO_CHECK6_RX")?;
        }
        // The outer TOS and TTL of each datagram: the decap path applies
        // RFC 6040 to the inner ECN field from the outer one.
        if v6 {
            set(
                libc::IPPROTO_IPV6,
                libc::IPV6_RECVTCLASS,
                1,
                "IPV6_RECVTCLASS",
            )?;
            set(
                libc::IPPROTO_IPV6,
                libc::IPV6_RECVHOPLIMIT,
                1,
                "IPV6_RECVHOPLIMIT",
            )?;
        } else {
            set(libc::IPPROTO_IP, libc::IP_RECVTOS, 1, "IP_RECVTOS")?;
            set(libc::IPPROTO_IP, libc::IP_RECVTTL, 1, "IP_RECVTTL")?;
        }
        let gro = opts.gro && setsockopt_int(raw, libc::SOL_UDP, libc::UDP_GRO, 1).is_ok();
        let gso = opts.gso
            && !opts.zero_checksum_tx
            && setsockopt_int(raw, libc::SOL_UDP, libc::UDP_SEGMENT, 0).is_ok();

        // SAFETY: sockaddr_storage is plain data; all zeroes is valid.
        let mut storage: libc::sockaddr_storage = unsafe { mem::zeroed() };
        let len = write_sockaddr(&addr, &mut storage);
        // SAFETY: `storage` holds a sockaddr of `len` bytes for this family.
        cvt(unsafe { libc::bind(raw, (&storage as *const libc::sockaddr_storage).cast(), len) })
            .map_err(|e| context(e, format_args!("bind udp {addr}")))?;
        let mut len = mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        // SAFETY: getsockname writes at most `len` bytes into `storage`.
        cvt(unsafe {
            libc::getsockname(
                raw,
                (&mut storage as *mut libc::sockaddr_storage).cast(),
                &mut len,
            )
        })
        .map_err(|e| context(e, format_args!("getsockname udp {addr}")))?;
        let local = read_sockaddr(&storage).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("udp {addr}: odd local address"),
            )
        })?;

        // SAFETY: all fields of Scratch are plain data (integers, arrays and
        // raw pointers); all zeroes (null pointers) is valid.
        let scratch: Box<Scratch> = Box::new(unsafe { mem::zeroed() });
        let max_segments = if gso { GSO_MAX_SEGMENTS } else { 1 };
        Ok(UdpSocket {
            fd,
            local,
            caps: UdpCapabilities {
                gso,
                gro,
                max_segments,
            },
            scratch,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    pub fn capabilities(&self) -> UdpCapabilities {
        self.caps
    }

    /// Sets on the bound socket the options of `opts` a reload may change
    /// (the rest are fixed at bind): the checksum policy and IPv4
    /// Don't-Fragment, `None` giving back the kernel's default
    /// (IP_PMTUDISC_WANT). Another socket cannot take over the port to
    /// carry new options: without SO_REUSEPORT on both, the bind fails.
    /// GSO goes off with zero checksums (the kernel refuses UDP_SEGMENT
    /// then) and is probed again without them.
    pub fn set_policy(&mut self, opts: &UdpOptions) -> io::Result<()> {
        let raw = self.fd.as_raw_fd();
        let addr = self.local;
        let v6 = addr.is_ipv6();
        let set = |level, name, value, what: &str| {
            setsockopt_int(raw, level, name, value)
                .map_err(|e| context(e, format_args!("{what} on udp {addr}")))
        };
        let zero_tx = libc::c_int::from(opts.zero_checksum_tx);
        if v6 {
            set(
                libc::SOL_UDP,
                libc::UDP_NO_CHECK6_TX,
                zero_tx,
                "UDP_NO_CHECK6_TX",
            )?;
            let zero_rx = libc::c_int::from(opts.zero_checksum_rx);
            set(
                libc::SOL_UDP,
                libc::UDP_NO_CHECK6_RX,
                zero_rx,
                "UDP_NO_CHECK6_RX",
            )?;
        } else {
            set(libc::SOL_SOCKET, libc::SO_NO_CHECK, zero_tx, "SO_NO_CHECK")?;
            let mode = match opts.dont_fragment {
                Some(true) => libc::IP_PMTUDISC_DO,
                Some(false) => libc::IP_PMTUDISC_DONT,
                None => libc::IP_PMTUDISC_WANT,
            };
            set(
                libc::IPPROTO_IP,
                libc::IP_MTU_DISCOVER,
                mode,
                "IP_MTU_DISCOVER",
            )?;
        }
        let gso = opts.gso
            && !opts.zero_checksum_tx
            && setsockopt_int(raw, libc::SOL_UDP, libc::UDP_SEGMENT, 0).is_ok();
        self.caps.gso = gso;
        self.caps.max_segments = if gso { GSO_MAX_SEGMENTS } else { 1 };
        Ok(())
    }

    /// recvmmsg(MSG_DONTWAIT) into `bufs`: one datagram or GRO train per
    /// buffer, up to min(bufs.len(), meta.len(), MAX_BATCH). Returns how many
    /// were filled; WouldBlock when none. A datagram longer than its buffer
    /// (MSG_TRUNC) is reported with `len` = the bytes received.
    pub fn recv_batch(
        &mut self,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> io::Result<usize> {
        let n = bufs.len().min(meta.len()).min(MAX_BATCH);
        if n == 0 {
            return Ok(0);
        }
        let s = &mut *self.scratch;
        for (i, buf) in bufs.iter_mut().take(n).enumerate() {
            s.iovs[i] = libc::iovec {
                iov_base: buf.as_mut_ptr().cast(),
                iov_len: buf.len(),
            };
            let h = &mut s.hdrs[i];
            h.msg_len = 0;
            h.msg_hdr.msg_name = (&mut s.names[i] as *mut libc::sockaddr_storage).cast();
            h.msg_hdr.msg_namelen = mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            h.msg_hdr.msg_iov = &mut s.iovs[i];
            h.msg_hdr.msg_iovlen = 1;
            h.msg_hdr.msg_control = s.cmsgs[i].as_mut_ptr().cast();
            h.msg_hdr.msg_controllen = mem::size_of_val(&s.cmsgs[i]);
            h.msg_hdr.msg_flags = 0;
        }
        let fd = self.fd.as_raw_fd();
        let got = retry(|| {
            // SAFETY: the first `n` mmsghdrs point at live iovecs (which point
            // at the caller's exclusively borrowed buffers), sockaddr_storage
            // and cmsg buffers of the sizes given, all in `s` or `bufs`, which
            // outlive the call.
            cvt(unsafe {
                libc::recvmmsg(
                    fd,
                    s.hdrs.as_mut_ptr(),
                    n as libc::c_uint,
                    libc::MSG_DONTWAIT,
                    ptr::null_mut(),
                )
            })
        })? as usize;
        for (i, m) in meta.iter_mut().take(got).enumerate() {
            let h = &s.hdrs[i];
            m.len = h.msg_len as usize;
            m.source = read_sockaddr(&s.names[i])
                .unwrap_or(SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)));
            let c = received_cmsgs(&h.msg_hdr);
            m.segment_size = c.segment_size.filter(|&seg| (seg as usize) < m.len);
            m.tos = c.tos;
            m.ttl = c.ttl;
            m.stamp_ns = c.stamp_ns;
        }
        Ok(got)
    }

    /// sendmmsg of up to MAX_BATCH messages; `segment_size` adds a
    /// UDP_SEGMENT cmsg. Returns how many were sent (possibly fewer than
    /// given). A GSO message failing with EIO (the device cannot segment) or
    /// EINVAL turns GSO off for good and returns ErrorKind::Other
    /// "udp gso disabled: ..." so the caller can resend it split.
    /// A destination of the other address family is InvalidInput.
    pub fn send_batch(&mut self, msgs: &[Transmit<'_>]) -> io::Result<usize> {
        let Some(first) = msgs.first() else {
            return Ok(0);
        };
        let n = msgs.len().min(MAX_BATCH);
        let slices: [IoSlice<'_>; MAX_BATCH] =
            core::array::from_fn(|i| IoSlice::new(msgs.get(i).map_or(&[][..], |m| m.data)));
        let gathered: [Gathered<'_>; MAX_BATCH] = core::array::from_fn(|i| Gathered {
            dest: msgs.get(i).map_or(first.dest, |m| m.dest),
            parts: if i < n { &slices[i..i + 1] } else { &[] },
            segment_size: msgs.get(i).and_then(|m| m.segment_size),
            tos: None,
            ttl: None,
        });
        self.send_gathered(&gathered[..n])
    }

    /// [`send_batch`](UdpSocket::send_batch) of messages whose bytes lie in
    /// several buffers: the kernel concatenates each message's `parts`. A
    /// GSO train can so go out straight from the buffers of its datagrams
    /// (each part one datagram's payload) without being copied together
    /// first. At most [`MAX_PARTS`] parts per call: messages past that wait
    /// for the next call (the count returned says how many went).
    pub fn send_gathered(&mut self, msgs: &[Gathered<'_>]) -> io::Result<usize> {
        let mut n = msgs.len().min(MAX_BATCH);
        let v6 = self.local.is_ipv6();
        if let Some(bad) = msgs[..n].iter().position(|m| m.dest.is_ipv6() != v6) {
            if bad == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("udp {}: cannot send to {}", self.local, msgs[0].dest),
                ));
            }
            n = bad;
        }
        let mut parts = 0;
        for (i, m) in msgs[..n].iter().enumerate() {
            if parts + m.parts.len() > MAX_PARTS {
                n = i;
                break;
            }
            parts += m.parts.len();
        }
        if n == 0 {
            if msgs.first().is_some_and(|m| m.parts.len() > MAX_PARTS) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "a message of {} parts: at most {MAX_PARTS}",
                        msgs[0].parts.len()
                    ),
                ));
            }
            return Ok(0);
        }
        let s = &mut *self.scratch;
        let mut at = 0;
        for (i, m) in msgs[..n].iter().enumerate() {
            let first = at;
            for p in m.parts {
                s.iovs[at] = libc::iovec {
                    iov_base: p.as_ptr() as *mut libc::c_void,
                    iov_len: p.len(),
                };
                at += 1;
            }
            let namelen = write_sockaddr(&m.dest, &mut s.names[i]);
            let h = &mut s.hdrs[i];
            h.msg_len = 0;
            h.msg_hdr.msg_name = (&mut s.names[i] as *mut libc::sockaddr_storage).cast();
            h.msg_hdr.msg_namelen = namelen;
            h.msg_hdr.msg_iov = &mut s.iovs[first];
            h.msg_hdr.msg_iovlen = at - first;
            h.msg_hdr.msg_flags = 0;
            let c = SendCmsgs {
                segment_size: m.segment_size,
                tos: m.tos,
                ttl: m.ttl,
            };
            write_send_cmsgs(&mut h.msg_hdr, &mut s.cmsgs[i], c, v6);
        }
        let fd = self.fd.as_raw_fd();
        let r = retry(|| {
            // SAFETY: the first `n` mmsghdrs point at live iovecs (which point
            // at the caller's buffers, only read), sockaddrs of the lengths
            // given and cmsg buffers, all outliving the call.
            cvt(unsafe {
                libc::sendmmsg(
                    fd,
                    s.hdrs.as_mut_ptr(),
                    n as libc::c_uint,
                    libc::MSG_DONTWAIT,
                )
            })
        });
        match r {
            Ok(sent) => Ok(sent as usize),
            Err(e)
                if msgs[0].segment_size.is_some()
                    && matches!(e.raw_os_error(), Some(libc::EIO) | Some(libc::EINVAL)) =>
            {
                self.caps.gso = false;
                self.caps.max_segments = 1;
                Err(io::Error::other(format!("udp gso disabled: {e}")))
            }
            Err(e) => Err(e),
        }
    }
}

impl AsRawFd for UdpSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl AsFd for UdpSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// The forcing option first (root may exceed net.core.*mem_max), else the
/// plain one (clamped by the kernel).
fn set_buffer(fd: RawFd, force: libc::c_int, plain: libc::c_int, size: usize) -> io::Result<()> {
    let size = libc::c_int::try_from(size).unwrap_or(libc::c_int::MAX);
    if setsockopt_int(fd, libc::SOL_SOCKET, force, size).is_ok() {
        return Ok(());
    }
    setsockopt_int(fd, libc::SOL_SOCKET, plain, size)
}

/// What the control messages of a received message say.
#[derive(Default)]
struct RecvCmsgs {
    segment_size: Option<u16>,
    tos: u8,
    ttl: u8,
    stamp_ns: u64,
}

/// Reads UDP_GRO (an int), IP_TOS (a byte) / IPV6_TCLASS (an int) and
/// IP_TTL / IPV6_HOPLIMIT (ints) from a received message.
fn received_cmsgs(hdr: &libc::msghdr) -> RecvCmsgs {
    let mut r = RecvCmsgs::default();
    // SAFETY: after recvmmsg, msg_control/msg_controllen describe the control
    // messages the kernel wrote into this message's cmsg buffer; the CMSG
    // macros stay within msg_controllen, and each read below is of the
    // size the kernel writes for that level and type.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(hdr);
        while !cmsg.is_null() {
            let data = libc::CMSG_DATA(cmsg);
            let int = || ptr::read_unaligned(data.cast::<libc::c_int>());
            match ((*cmsg).cmsg_level, (*cmsg).cmsg_type) {
                (libc::SOL_UDP, libc::UDP_GRO) => r.segment_size = u16::try_from(int()).ok(),
                (libc::IPPROTO_IP, libc::IP_TOS) => r.tos = *data,
                (libc::IPPROTO_IP, libc::IP_TTL) => r.ttl = int() as u8,
                (libc::IPPROTO_IPV6, libc::IPV6_TCLASS) => r.tos = int() as u8,
                (libc::IPPROTO_IPV6, libc::IPV6_HOPLIMIT) => r.ttl = int() as u8,
                (libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS) => {
                    let t = ptr::read_unaligned(data.cast::<libc::timespec>());
                    r.stamp_ns = (t.tv_sec as u64) * 1_000_000_000 + t.tv_nsec as u64;
                }
                _ => {}
            }
            cmsg = libc::CMSG_NXTHDR(hdr, cmsg);
        }
    }
    r
}

/// The control messages of one message to send.
#[derive(Clone, Copy)]
struct SendCmsgs {
    segment_size: Option<u16>,
    tos: Option<u8>,
    ttl: Option<u8>,
}

/// Points `hdr` at `buf` filled with the control messages `c` asks for
/// (none: no control buffer at all).
fn write_send_cmsgs(hdr: &mut libc::msghdr, buf: &mut [u64; CMSG_WORDS], c: SendCmsgs, v6: bool) {
    let (tos_level, tos_type, ttl_type) = if v6 {
        (libc::IPPROTO_IPV6, libc::IPV6_TCLASS, libc::IPV6_HOPLIMIT)
    } else {
        (libc::IPPROTO_IP, libc::IP_TOS, libc::IP_TTL)
    };
    let ints = [
        c.tos.map(|t| (tos_level, tos_type, libc::c_int::from(t))),
        c.ttl.map(|t| (tos_level, ttl_type, libc::c_int::from(t))),
    ];
    if c.segment_size.is_none() && ints.iter().all(Option::is_none) {
        hdr.msg_control = ptr::null_mut();
        hdr.msg_controllen = 0;
        return;
    }
    let base: *mut u8 = buf.as_mut_ptr().cast();
    let mut used = 0;
    // Written at offsets of our own, not with CMSG_NXTHDR: that one reads
    // the length field of the next header, which holds whatever a previous
    // call left in the buffer.
    // SAFETY: at most three messages are written, each CMSG_SPACE(2) or
    // CMSG_SPACE(4) = 24 bytes (a multiple of 8, so every header stays
    // u64-aligned), 72 of the 96 bytes of `buf`.
    unsafe {
        if let Some(seg) = c.segment_size {
            let cmsg = base.add(used).cast::<libc::cmsghdr>();
            (*cmsg).cmsg_level = libc::SOL_UDP;
            (*cmsg).cmsg_type = libc::UDP_SEGMENT;
            (*cmsg).cmsg_len = libc::CMSG_LEN(2) as usize;
            ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<u16>(), seg);
            used += libc::CMSG_SPACE(2) as usize;
        }
        for (level, ty, value) in ints.into_iter().flatten() {
            let cmsg = base.add(used).cast::<libc::cmsghdr>();
            (*cmsg).cmsg_level = level;
            (*cmsg).cmsg_type = ty;
            (*cmsg).cmsg_len = libc::CMSG_LEN(4) as usize;
            ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>(), value);
            used += libc::CMSG_SPACE(4) as usize;
        }
    }
    hdr.msg_control = base.cast();
    hdr.msg_controllen = used;
}

/// Writes `addr` as sockaddr_in/sockaddr_in6 into `storage`; returns its length.
pub(crate) fn write_sockaddr(
    addr: &SocketAddr,
    storage: &mut libc::sockaddr_storage,
) -> libc::socklen_t {
    match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
            unsafe { ptr::write((storage as *mut libc::sockaddr_storage).cast(), sin) };
            mem::size_of::<libc::sockaddr_in>() as libc::socklen_t
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo().to_be(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in6.
            unsafe { ptr::write((storage as *mut libc::sockaddr_storage).cast(), sin6) };
            mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t
        }
    }
}

/// The socket address in `storage`, by its family.
fn read_sockaddr(storage: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match libc::c_int::from(storage.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in, and
            // sockaddr_storage is larger than and aligned for it.
            let sin =
                unsafe { &*(storage as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes()),
                u16::from_be(sin.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says the storage holds a sockaddr_in6, and
            // sockaddr_storage is larger than and aligned for it.
            let sin6 = unsafe {
                &*(storage as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>()
            };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(sin6.sin6_addr.s6_addr),
                u16::from_be(sin6.sin6_port),
                u32::from_be(sin6.sin6_flowinfo),
                sin6.sin6_scope_id,
            )))
        }
        _ => None,
    }
}
