//! Every syscall of tep's host mode.
//!
//! tep's dataplane (`tep-dataplane`) is pure: packets in, packets out, no
//! libc, no I/O. This crate is the other half, in the model of quinn-udp: a
//! small I/O layer without protocol logic, so the unsafe code and the kernel
//! interfaces sit in one reviewable place.
//!
//! - [`tun`]: TUN/TAP devices with the virtio-net header, checksum and
//!   segmentation offloads, multi-queue, and interface configuration (MTU,
//!   addresses, up) through ioctls.
//! - [`udp`]: non-blocking UDP sockets with batched receive and send
//!   (recvmmsg/sendmmsg) and UDP GRO/GSO.
//! - [`poll`]: epoll and eventfd.
//! - [`signal`]: signals as a descriptor (signalfd).
//! - [`privilege`]: dropping root for a user that keeps CAP_NET_ADMIN
//!   or nothing.
//! - [`iface`]: the interface holding an address, and its MTU.
//! - [`raw`]: whole IP packets handed to the kernel's stack.
//! - [`netlink`]: the kernel's routes, interfaces and neighbour table
//!   over rtnetlink (route get, link info, a neighbour table kept current
//!   from notifications), for gateway mode; the bridge and VXLAN devices
//!   and bridge forwarding entries of an EVPN VTEP.
//! - [`snmp`]: the kernel's UDP drop counters (/proc/net/snmp{,6}).
//! - [`sysctl`]: kernel parameters under /proc/sys (the uplink's forwarding switches).
//! - [`thread`]: CPU pinning.
//! - [`unix`]: the control socket, private from its creation.
//! - [`netns`]: private network namespaces for tests.
//! - [`xdp`]: gateway mode's XDP steering program (aya), attached to the
//!   inner and underlay interfaces, and its maps.
//! - [`xsk`]: AF_XDP sockets over memory the caller owns (tep's buffer
//!   pool is the UMEM).
//!
//! Linux only. The per-packet calls ([`TunQueue::read_packet`],
//! [`UdpSocket::recv_batch`], ...) do not allocate and make one syscall.
#![cfg(target_os = "linux")]

pub mod iface;
pub mod memory;
pub mod netlink;
pub mod netns;
pub mod notify;
pub mod poll;
pub mod privilege;
pub mod raw;
mod rtnl;
pub mod signal;
pub mod snmp;
mod sys;
pub mod sysctl;
pub mod thread;
pub mod tun;
pub mod udp;
pub mod unix;
pub mod xdp;
pub mod xsk;

pub use poll::{Epoll, Event, EventFd};
pub use signal::{Signal, Signals};
pub use tun::{DeviceKind, Offloads, Tun, TunOptions, TunQueue};
pub use udp::{
    Gathered, RecvMeta, Transmit, UdpCapabilities, UdpOptions, UdpSocket, MAX_BATCH, MAX_PARTS,
};
pub use xdp::{AttachMode, Mode, Role, Steering, SteeringStats};
pub use xsk::{CopyMode, Desc, Umem, XskOptions, XskSocket, XskStats};
