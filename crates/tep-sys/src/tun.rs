//! TUN/TAP devices (Linux `drivers/net/tun.c`, `Documentation/networking/tuntap.rst`).
//!
//! Packets carry the 10-byte `struct virtio_net_hdr` in front when the device
//! has IFF_VNET_HDR: that header is how checksum offload (NEEDS_CSUM with
//! csum_start/csum_offset) and segmentation offload (gso_type/gso_size) cross
//! the boundary, so the host stack and tep can hand each other 64 KiB
//! super-packets with unfinished checksums instead of MTU-sized packets.

use std::fmt;
use std::io::{self, IoSlice};
use std::mem;
use std::net::IpAddr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

use crate::sys::{config_socket, context, cvt, cvt_size, ifreq, ifreq_name, ioctl_ifreq, owned};

/// What the device carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceKind {
    /// IFF_TUN: layer 3, packets start with the IPv4/IPv6 header.
    Tun,
    /// IFF_TAP: layer 2, frames start with the Ethernet header.
    Tap,
}

impl fmt::Display for DeviceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DeviceKind::Tun => "tun",
            DeviceKind::Tap => "tap",
        })
    }
}

/// Offloads of the TUN device (TUNSETOFFLOAD flags): what the kernel may hand
/// us unfinished (partial checksums, TCP/UDP super-packets) and accept from us.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Offloads {
    /// TUN_F_CSUM: partial checksums (virtio NEEDS_CSUM). Everything else needs it.
    pub csum: bool,
    /// TUN_F_TSO4: TCP/IPv4 super-packets.
    pub tso4: bool,
    /// TUN_F_TSO6: TCP/IPv6 super-packets.
    pub tso6: bool,
    /// TUN_F_TSO_ECN: TSO packets with CWR set (needs tso4 or tso6).
    pub tso_ecn: bool,
    /// TUN_F_USO4: UDP/IPv4 super-packets (Linux 6.2+; the kernel takes USO4 only with USO6).
    pub uso4: bool,
    /// TUN_F_USO6: UDP/IPv6 super-packets.
    pub uso6: bool,
    /// TUN_F_UDP_TUNNEL_GSO (Linux 6.17+, needs TSO or USO and the
    /// 24-byte tunnel header, [`TunOptions::vnet_hdr_tunnel`]):
    /// super-packets already inside a UDP tunnel, which the kernel
    /// segments (or a device it forwards them to does), the outer UDP
    /// checksum left 0.
    pub udp_tunnel: bool,
    /// TUN_F_UDP_TUNNEL_GSO_CSUM: the same with the outer UDP checksum
    /// filled per segment.
    pub udp_tunnel_csum: bool,
}

/// TUNSETOFFLOAD flag values (include/uapi/linux/if_tun.h).
const TUN_F_CSUM: libc::c_uint = 0x01;
const TUN_F_TSO4: libc::c_uint = 0x02;
const TUN_F_TSO6: libc::c_uint = 0x04;
const TUN_F_TSO_ECN: libc::c_uint = 0x08;
const TUN_F_USO4: libc::c_uint = 0x20;
const TUN_F_USO6: libc::c_uint = 0x40;
const TUN_F_UDP_TUNNEL_GSO: libc::c_uint = 0x80;
const TUN_F_UDP_TUNNEL_GSO_CSUM: libc::c_uint = 0x100;

impl Offloads {
    /// Everything tep can handle.
    pub fn all() -> Offloads {
        Offloads {
            csum: true,
            tso4: true,
            tso6: true,
            tso_ecn: true,
            uso4: true,
            uso6: true,
            udp_tunnel: false,
            udp_tunnel_csum: false,
        }
    }

    /// Nothing: complete checksums, MTU-sized packets.
    pub fn none() -> Offloads {
        Offloads::default()
    }

    /// The TUNSETOFFLOAD argument, keeping only what the kernel can take
    /// together: nothing without csum, tso_ecn only with TSO.
    pub fn to_flags(self) -> libc::c_uint {
        if !self.csum {
            return 0;
        }
        let mut flags = TUN_F_CSUM;
        if self.tso4 {
            flags |= TUN_F_TSO4;
        }
        if self.tso6 {
            flags |= TUN_F_TSO6;
        }
        if self.tso_ecn && (self.tso4 || self.tso6) {
            flags |= TUN_F_TSO_ECN;
        }
        if self.uso4 {
            flags |= TUN_F_USO4;
        }
        if self.uso6 {
            flags |= TUN_F_USO6;
        }
        if self.udp_tunnel && (self.tso4 || self.tso6 || self.uso4 || self.uso6) {
            flags |= TUN_F_UDP_TUNNEL_GSO;
            if self.udp_tunnel_csum {
                flags |= TUN_F_UDP_TUNNEL_GSO_CSUM;
            }
        }
        flags
    }

    /// The offloads a TUNSETOFFLOAD argument stands for.
    pub fn from_flags(flags: libc::c_uint) -> Offloads {
        Offloads {
            csum: flags & TUN_F_CSUM != 0,
            tso4: flags & TUN_F_TSO4 != 0,
            tso6: flags & TUN_F_TSO6 != 0,
            tso_ecn: flags & TUN_F_TSO_ECN != 0,
            uso4: flags & TUN_F_USO4 != 0,
            uso6: flags & TUN_F_USO6 != 0,
            udp_tunnel: flags & TUN_F_UDP_TUNNEL_GSO != 0,
            udp_tunnel_csum: flags & TUN_F_UDP_TUNNEL_GSO_CSUM != 0,
        }
    }
}

impl fmt::Display for Offloads {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = [
            (self.csum, "csum"),
            (self.tso4, "tso4"),
            (self.tso6, "tso6"),
            (self.tso_ecn, "tso_ecn"),
            (self.uso4, "uso4"),
            (self.uso6, "uso6"),
            (self.udp_tunnel, "udp_tunnel"),
            (self.udp_tunnel_csum, "udp_tunnel_csum"),
        ];
        let mut first = true;
        for (_, name) in names.iter().filter(|(on, _)| *on) {
            if !first {
                f.write_str(" ")?;
            }
            f.write_str(name)?;
            first = false;
        }
        if first {
            f.write_str("none")?;
        }
        Ok(())
    }
}

/// How to open a device.
#[derive(Clone, Debug)]
pub struct TunOptions {
    /// Interface name, or a pattern like "tep%d" the kernel fills in.
    pub name: String,
    pub kind: DeviceKind,
    /// Number of queues (file descriptors); more than 1 means IFF_MULTI_QUEUE.
    pub queues: usize,
    /// IFF_VNET_HDR: every packet has the 10-byte virtio_net_hdr in front.
    pub vnet_hdr: bool,
    /// With `vnet_hdr`: the 24-byte `virtio_net_hdr_v1_hash_tunnel`
    /// instead (Linux 6.17+), which carries the offsets of a UDP tunnel's
    /// inner headers, for [`Offloads::udp_tunnel`].
    pub vnet_hdr_tunnel: bool,
    /// Offloads wanted (only with vnet_hdr); [`Tun::offloads`] says what was taken.
    pub offloads: Offloads,
}

/// An open TUN/TAP device. A non-persistent device disappears when the last
/// descriptor of its queues closes.
#[derive(Debug)]
pub struct Tun {
    name: String,
    kind: DeviceKind,
    ifindex: u32,
    queues: Vec<TunQueue>,
    queue_count: usize,
    offloads: Offloads,
}

const DEV_NET_TUN: &std::ffi::CStr = c"/dev/net/tun";

impl Tun {
    /// Creates the device (or attaches to an existing persistent one of that
    /// name): IFF_NO_PI, IFF_VNET_HDR when `opts.vnet_hdr`, IFF_MULTI_QUEUE
    /// when `queues > 1` (one open of /dev/net/tun and one TUNSETIFF per
    /// queue). Descriptors are non-blocking and close-on-exec.
    ///
    /// With vnet_hdr the header size is set to 10 (TUNSETVNETHDRSZ) and the
    /// wanted offloads are tried with TUNSETOFFLOAD; when the kernel refuses
    /// (EINVAL) the attempt is repeated without USO, then with csum only,
    /// then with none. Without vnet_hdr the offloads are 0.
    pub fn open(opts: &TunOptions) -> io::Result<Tun> {
        if opts.queues == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "tun: queues must be at least 1",
            ));
        }
        ifreq(&opts.name)?; // a bad name fails before any device exists
        let mut flags = libc::IFF_NO_PI
            | match opts.kind {
                DeviceKind::Tun => libc::IFF_TUN,
                DeviceKind::Tap => libc::IFF_TAP,
            };
        if opts.vnet_hdr {
            flags |= libc::IFF_VNET_HDR;
        }
        if opts.queues > 1 {
            flags |= libc::IFF_MULTI_QUEUE;
        }

        let mut name = opts.name.clone();
        let mut queues = Vec::with_capacity(opts.queues);
        for _ in 0..opts.queues {
            // SAFETY: the path is a NUL-terminated C string constant.
            let fd = owned(unsafe {
                libc::open(
                    DEV_NET_TUN.as_ptr(),
                    libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
                )
            })
            .map_err(|e| context(e, "open /dev/net/tun"))?;
            let mut ifr = ifreq(&name)?;
            ifr.ifr_ifru.ifru_flags = flags as libc::c_short;
            ioctl_ifreq(&fd, libc::TUNSETIFF, &mut ifr)
                .map_err(|e| context(e, format_args!("TUNSETIFF {name}")))?;
            // The kernel writes back the name it chose (a pattern is filled in);
            // later queues attach to that exact device.
            name = ifreq_name(&ifr);
            queues.push(TunQueue {
                fd,
                vnet_hdr: opts.vnet_hdr,
                hdr_len: if opts.vnet_hdr_tunnel {
                    TunQueue::VNET_HDR_TUNNEL_LEN
                } else {
                    TunQueue::VNET_HDR_LEN
                },
            });
        }

        let first = &queues[0];
        let offloads = if opts.vnet_hdr {
            let size = first.hdr_len as libc::c_int;
            // SAFETY: TUNSETVNETHDRSZ reads one c_int through the pointer.
            cvt(unsafe {
                libc::ioctl(
                    first.fd.as_raw_fd(),
                    libc::TUNSETVNETHDRSZ,
                    &size as *const libc::c_int,
                )
            })
            .map_err(|e| context(e, format_args!("TUNSETVNETHDRSZ {name}")))?;
            set_offloads(first, &name, opts.offloads.to_flags())?
        } else {
            set_offload_flags(first, 0)
                .map_err(|e| context(e, format_args!("TUNSETOFFLOAD {name} 0")))?;
            Offloads::none()
        };

        let sock = config_socket(libc::AF_INET)?;
        let mut ifr = ifreq(&name)?;
        ioctl_ifreq(&sock, libc::SIOCGIFINDEX, &mut ifr)
            .map_err(|e| context(e, format_args!("SIOCGIFINDEX {name}")))?;
        // SAFETY: SIOCGIFINDEX filled the ifindex member of the union.
        let ifindex = unsafe { ifr.ifr_ifru.ifru_ifindex } as u32;

        Ok(Tun {
            name,
            kind: opts.kind,
            ifindex,
            queue_count: queues.len(),
            queues,
            offloads,
        })
    }

    /// The kernel's name for the device.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn kind(&self) -> DeviceKind {
        self.kind
    }

    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// The offloads in effect.
    pub fn offloads(&self) -> Offloads {
        self.offloads
    }

    /// The number of queues opened (also after [`Tun::take_queues`]).
    pub fn queues(&self) -> usize {
        self.queue_count
    }

    /// Hands the queues to the workers; later calls return an empty Vec.
    pub fn take_queues(&mut self) -> Vec<TunQueue> {
        mem::take(&mut self.queues)
    }

    fn ifreq(&self) -> io::Result<libc::ifreq> {
        ifreq(&self.name)
    }

    /// SIOCSIFMTU.
    pub fn set_mtu(&self, mtu: u32) -> io::Result<()> {
        let sock = config_socket(libc::AF_INET)?;
        let mut ifr = self.ifreq()?;
        ifr.ifr_ifru.ifru_mtu = libc::c_int::try_from(mtu)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, format!("mtu {mtu}")))?;
        ioctl_ifreq(&sock, libc::SIOCSIFMTU, &mut ifr)
            .map_err(|e| context(e, format_args!("SIOCSIFMTU {} {mtu}", self.name)))
    }

    /// SIOCGIFMTU.
    pub fn mtu(&self) -> io::Result<u32> {
        crate::iface::mtu(&self.name)
    }

    /// Adds an address. IPv4: SIOCSIFADDR + SIOCSIFNETMASK, which replaces
    /// the interface's primary IPv4 address. IPv6: SIOCSIFADDR with
    /// `struct in6_ifreq` on an AF_INET6 socket. An address that is already
    /// there (EEXIST) is not an error.
    pub fn add_address(&self, addr: IpAddr, prefix_len: u8) -> io::Result<()> {
        let what = || format!("{} address {addr}/{prefix_len}", self.name);
        let ok_if_exists = |r: io::Result<()>| match r {
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => Ok(()),
            r => r,
        };
        match addr {
            IpAddr::V4(v4) => {
                if prefix_len > 32 {
                    return Err(io::Error::new(io::ErrorKind::InvalidInput, what()));
                }
                // rtnetlink, not SIOCSIFADDR: the ioctl sets an IPv4
                // interface's one primary address, so a second address
                // in host.tun_addresses replaced the first.
                crate::netlink::address_add(self.ifindex, IpAddr::V4(v4), prefix_len)
                    .map_err(|e| context(e, what()))
            }
            IpAddr::V6(v6) => {
                if prefix_len > 128 {
                    return Err(io::Error::new(io::ErrorKind::InvalidInput, what()));
                }
                let sock = config_socket(libc::AF_INET6)?;
                let req = libc::in6_ifreq {
                    ifr6_addr: libc::in6_addr {
                        s6_addr: v6.octets(),
                    },
                    ifr6_prefixlen: u32::from(prefix_len),
                    ifr6_ifindex: self.ifindex as libc::c_int,
                };
                // SAFETY: SIOCSIFADDR on an AF_INET6 socket reads a
                // `struct in6_ifreq`, which `req` is.
                let r = cvt(unsafe {
                    libc::ioctl(
                        sock.as_raw_fd(),
                        libc::SIOCSIFADDR,
                        &req as *const libc::in6_ifreq,
                    )
                });
                ok_if_exists(r.map(drop))
                    .map_err(|e| context(e, format_args!("SIOCSIFADDR {}", what())))
            }
        }
    }

    /// SIOCGIFFLAGS, then SIOCSIFFLAGS with IFF_UP added.
    pub fn set_up(&self) -> io::Result<()> {
        set_link_up(&self.name)
    }

    /// The largest GSO packet the kernel hands this device (netlink
    /// `IFLA_GSO_MAX_SIZE`, as `ip link set dev D gso_max_size N`): TCP
    /// sizes its TSO super-packets to it.
    pub fn set_gso_max_size(&self, size: u32) -> io::Result<()> {
        rtnl_set_link_u32(self.ifindex, libc::IFLA_GSO_MAX_SIZE, size)
            .map_err(|e| context(e, format_args!("gso_max_size {} {size}", self.name)))
    }

    /// SIOCSIFTXQLEN.
    pub fn set_txqueuelen(&self, len: u32) -> io::Result<()> {
        let sock = config_socket(libc::AF_INET)?;
        let mut ifr = self.ifreq()?;
        // ifr_qlen is the int member of the union, shared with ifr_ifindex.
        ifr.ifr_ifru.ifru_ifindex = libc::c_int::try_from(len).map_err(|_| {
            io::Error::new(io::ErrorKind::InvalidInput, format!("txqueuelen {len}"))
        })?;
        ioctl_ifreq(&sock, libc::SIOCSIFTXQLEN, &mut ifr)
            .map_err(|e| context(e, format_args!("SIOCSIFTXQLEN {} {len}", self.name)))
    }
}

/// One rtnetlink RTM_NEWLINK request setting the u32 attribute `attr` of
/// interface `ifindex`, and its acknowledgement.
fn rtnl_set_link_u32(ifindex: u32, attr: u16, value: u32) -> io::Result<()> {
    let mut req = crate::rtnl::Request::new(libc::RTM_NEWLINK, ifindex);
    req.attr_u32(attr, value);
    crate::rtnl::transact(req.finish(), |_, _| {})
}

/// Brings the interface `name` up (shared with [`crate::netns`] for `lo`).
pub(crate) fn set_link_up(name: &str) -> io::Result<()> {
    let sock = config_socket(libc::AF_INET)?;
    let mut ifr = ifreq(name)?;
    ioctl_ifreq(&sock, libc::SIOCGIFFLAGS, &mut ifr)
        .map_err(|e| context(e, format_args!("SIOCGIFFLAGS {name}")))?;
    // SAFETY: SIOCGIFFLAGS filled the flags member of the union.
    let flags = unsafe { ifr.ifr_ifru.ifru_flags };
    ifr.ifr_ifru.ifru_flags = flags | libc::IFF_UP as libc::c_short;
    ioctl_ifreq(&sock, libc::SIOCSIFFLAGS, &mut ifr)
        .map_err(|e| context(e, format_args!("SIOCSIFFLAGS {name} up")))
}

fn set_offload_flags(queue: &TunQueue, flags: libc::c_uint) -> io::Result<()> {
    // SAFETY: TUNSETOFFLOAD takes its argument by value (an unsigned long),
    // no memory is accessed.
    cvt(unsafe {
        libc::ioctl(
            queue.fd.as_raw_fd(),
            libc::TUNSETOFFLOAD,
            flags as libc::c_ulong,
        )
    })
    .map(drop)
}

/// TUNSETOFFLOAD with `wanted`, falling back on EINVAL to fewer offloads.
fn set_offloads(queue: &TunQueue, name: &str, wanted: libc::c_uint) -> io::Result<Offloads> {
    negotiate_offloads(wanted, |flags| set_offload_flags(queue, flags))
        .map(Offloads::from_flags)
        .map_err(|(e, flags)| context(e, format_args!("TUNSETOFFLOAD {name} {flags:#x}")))
}

/// The fallback of [`set_offloads`], apart from the ioctl so that it can
/// be tried against kernels this machine does not run: `wanted`, then
/// without USO (before Linux 6.2), then checksum only, then nothing. Only
/// EINVAL (flags the kernel does not know) moves on; any other error is
/// returned at once. Gives the flags taken, or the last error and the
/// flags it came from.
fn negotiate_offloads(
    wanted: libc::c_uint,
    mut set: impl FnMut(libc::c_uint) -> io::Result<()>,
) -> Result<libc::c_uint, (io::Error, libc::c_uint)> {
    let tunnel = TUN_F_UDP_TUNNEL_GSO | TUN_F_UDP_TUNNEL_GSO_CSUM;
    let attempts = [
        wanted,
        wanted & !(TUN_F_UDP_TUNNEL_GSO_CSUM),
        wanted & !tunnel,
        wanted & !(TUN_F_USO4 | TUN_F_USO6 | tunnel),
        wanted & TUN_F_CSUM,
        0,
    ];
    let mut last = None;
    for (i, &flags) in attempts.iter().enumerate() {
        if i > 0 && attempts[i - 1] == flags {
            continue;
        }
        match set(flags) {
            Ok(()) => return Ok(flags),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => last = Some((e, flags)),
            Err(e) => return Err((e, flags)),
        }
    }
    Err(last.unwrap_or_else(|| (io::Error::from_raw_os_error(libc::EINVAL), 0)))
}

/// One queue of a device: a descriptor of /dev/net/tun attached to it.
#[derive(Debug)]
pub struct TunQueue {
    fd: OwnedFd,
    vnet_hdr: bool,
    hdr_len: usize,
}

impl TunQueue {
    /// `struct virtio_net_hdr` without num_buffers.
    pub const VNET_HDR_LEN: usize = 10;

    /// `struct virtio_net_hdr_v1_hash_tunnel`: the v1 header (12), the
    /// hash fields (8), the outer transport and inner network header
    /// offsets (2 + 2).
    pub const VNET_HDR_TUNNEL_LEN: usize = 24;

    /// Reads one packet. With vnet_hdr: readv([hdr, buf]) and the returned
    /// length excludes the header. Without: `hdr` is zero-filled and the
    /// packet goes to `buf`. WouldBlock when the queue is empty.
    ///
    /// A packet longer than `buf` is cut to `buf.len()` and the rest is lost
    /// (Linux 6.x reports only the bytes copied), so `buf` must hold the
    /// largest packet: the MTU (plus 14 for a TAP), or 65535 (+14) with
    /// TSO/USO offloads. A kernel that reports more than it copied gives
    /// InvalidData.
    pub fn read_packet(&self, hdr: &mut [u8; 10], buf: &mut [u8]) -> io::Result<usize> {
        let n = if self.vnet_hdr {
            // The tunnel header's fields past the first ten (offsets of
            // GSO packets tep does not take from a device) are dropped.
            let mut rest = [0u8; Self::VNET_HDR_TUNNEL_LEN - Self::VNET_HDR_LEN];
            let extra = self.hdr_len - Self::VNET_HDR_LEN;
            let iov = [
                libc::iovec {
                    iov_base: hdr.as_mut_ptr().cast(),
                    iov_len: hdr.len(),
                },
                libc::iovec {
                    iov_base: rest.as_mut_ptr().cast(),
                    iov_len: extra,
                },
                libc::iovec {
                    iov_base: buf.as_mut_ptr().cast(),
                    iov_len: buf.len(),
                },
            ];
            // SAFETY: the iovecs describe live, exclusively borrowed buffers
            // of the given lengths.
            let n = cvt_size(unsafe { libc::readv(self.fd.as_raw_fd(), iov.as_ptr(), 3) })?;
            if n < self.hdr_len {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("tun read of {n} bytes: shorter than the vnet header"),
                ));
            }
            n - self.hdr_len
        } else {
            hdr.fill(0);
            // SAFETY: `buf` is live and exclusively borrowed for buf.len() bytes.
            cvt_size(unsafe {
                libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len())
            })?
        };
        if n > buf.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "tun packet of {n} bytes truncated to a {}-byte buffer",
                    buf.len()
                ),
            ));
        }
        Ok(n)
    }

    /// Writes one packet: writev([hdr, buf]) with vnet_hdr, else writev([buf])
    /// (`hdr` is ignored). Returns the bytes of `buf` written.
    pub fn write_packet(&self, hdr: &[u8; 10], buf: &[u8]) -> io::Result<usize> {
        self.write_gathered(hdr, &[IoSlice::new(buf)])
    }

    /// Most pieces [`write_gathered`](TunQueue::write_gathered) takes.
    pub const MAX_PARTS: usize = 128;

    /// Writes one packet whose bytes are `parts`, in order, with one
    /// writev (after `hdr` with vnet_hdr): a super-packet gathered from
    /// the buffers its payload arrived in. Returns the packet bytes written.
    /// EINVAL for more than [`MAX_PARTS`](TunQueue::MAX_PARTS) parts.
    pub fn write_gathered(&self, hdr: &[u8; 10], parts: &[IoSlice<'_>]) -> io::Result<usize> {
        if self.hdr_len != Self::VNET_HDR_LEN && self.vnet_hdr {
            let mut full = [0u8; Self::VNET_HDR_TUNNEL_LEN];
            full[..Self::VNET_HDR_LEN].copy_from_slice(hdr);
            return self.write_with_header(&full, parts);
        }
        self.write_with_header(hdr, parts)
    }

    /// [`write_gathered`](TunQueue::write_gathered) with the whole vnet
    /// header as the device takes it: 10 bytes, or
    /// [`VNET_HDR_TUNNEL_LEN`](TunQueue::VNET_HDR_TUNNEL_LEN) for a device
    /// opened with [`TunOptions::vnet_hdr_tunnel`] (a header of another
    /// length is EINVAL).
    pub fn write_with_header(&self, hdr: &[u8], parts: &[IoSlice<'_>]) -> io::Result<usize> {
        if parts.len() > Self::MAX_PARTS || (self.vnet_hdr && hdr.len() != self.hdr_len) {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        let mut iov = [libc::iovec {
            iov_base: core::ptr::null_mut(),
            iov_len: 0,
        }; Self::MAX_PARTS + 1];
        let mut n = 0;
        if self.vnet_hdr {
            iov[0] = libc::iovec {
                iov_base: hdr.as_ptr() as *mut libc::c_void,
                iov_len: hdr.len(),
            };
            n = 1;
        }
        for p in parts {
            iov[n] = libc::iovec {
                iov_base: p.as_ptr() as *mut libc::c_void,
                iov_len: p.len(),
            };
            n += 1;
        }
        // SAFETY: the first `n` iovecs describe live buffers (`hdr` and
        // `parts`) of the given lengths; writev only reads them.
        let w = cvt_size(unsafe { libc::writev(self.fd.as_raw_fd(), iov.as_ptr(), n as i32) })?;
        Ok(if self.vnet_hdr {
            w.saturating_sub(self.hdr_len)
        } else {
            w
        })
    }

    pub fn has_vnet_hdr(&self) -> bool {
        self.vnet_hdr
    }
}

impl AsRawFd for TunQueue {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl AsFd for TunQueue {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `negotiate_offloads` tries against a kernel that takes only
    /// flags within `known`, and what it ends with.
    fn against(
        wanted: libc::c_uint,
        known: libc::c_uint,
    ) -> (Vec<libc::c_uint>, Option<libc::c_uint>) {
        let mut tried = Vec::new();
        let got = negotiate_offloads(wanted, |flags| {
            tried.push(flags);
            if flags & !known == 0 {
                Ok(())
            } else {
                Err(io::Error::from_raw_os_error(libc::EINVAL))
            }
        });
        (tried, got.ok())
    }

    #[test]
    fn a_kernel_with_every_offload_takes_them_at_once() {
        let all = Offloads::all().to_flags();
        assert_eq!(against(all, all), (vec![all], Some(all)));
    }

    #[test]
    fn a_kernel_without_uso_gets_tso_and_csum() {
        let all = Offloads::all().to_flags();
        let pre_6_2 = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_TSO_ECN;
        let (tried, got) = against(all, pre_6_2);
        assert_eq!(tried, vec![all, pre_6_2]);
        let taken = Offloads::from_flags(got.unwrap());
        assert!(taken.csum && taken.tso4 && taken.tso6 && taken.tso_ecn);
        assert!(!taken.uso4 && !taken.uso6);
        assert_eq!(taken.to_string(), "csum tso4 tso6 tso_ecn");
    }

    #[test]
    fn a_kernel_with_csum_only_and_one_with_nothing() {
        let all = Offloads::all().to_flags();
        let (tried, got) = against(all, TUN_F_CSUM);
        assert_eq!(tried.len(), 3);
        assert_eq!(got, Some(TUN_F_CSUM));
        let (tried, got) = against(all, 0);
        assert_eq!(tried.last(), Some(&0));
        assert_eq!(got, Some(0));
    }

    #[test]
    fn an_attempt_already_made_is_not_repeated() {
        // Wanting no USO: the "without USO" step is the first one again.
        let tso = TUN_F_CSUM | TUN_F_TSO4;
        assert_eq!(
            against(tso, TUN_F_CSUM),
            (vec![tso, TUN_F_CSUM], Some(TUN_F_CSUM))
        );
    }

    #[test]
    fn other_errors_stop_the_fallback() {
        let all = Offloads::all().to_flags();
        let mut tried = 0;
        let got = negotiate_offloads(all, |_| {
            tried += 1;
            Err(io::Error::from_raw_os_error(libc::EBADFD))
        });
        let (e, flags) = got.unwrap_err();
        assert_eq!((tried, flags), (1, all));
        assert_eq!(e.raw_os_error(), Some(libc::EBADFD));
        // A kernel that refuses even 0 reports the last EINVAL, for 0.
        let (e, flags) =
            negotiate_offloads(all, |_| Err(io::Error::from_raw_os_error(libc::EINVAL)))
                .unwrap_err();
        assert_eq!((e.raw_os_error(), flags), (Some(libc::EINVAL), 0));
    }
}
