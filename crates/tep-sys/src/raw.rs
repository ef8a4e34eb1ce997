//! Whole IP packets handed to the kernel's own stack: gateway mode's slow
//! path, for a packet whose next hop tep has no MAC for yet. A raw socket
//! with the header included (`IPPROTO_RAW`) makes the kernel route the
//! packet by its destination, resolve the neighbour (ARP, ND) and send it
//! as it would its own; the resolution then reaches tep as a neighbour
//! notification and the next packets go out through tep.

use crate::sys::{context, cvt_size, owned};
use crate::udp::write_sockaddr;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsRawFd, OwnedFd};

/// One raw socket per family.
#[derive(Debug)]
pub struct RawIp {
    v4: OwnedFd,
    v6: OwnedFd,
}

fn raw_socket(family: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2) call, no pointers. IPPROTO_RAW implies that
    // the packets carry their own IP header (IP_HDRINCL, IPV6_HDRINCL).
    owned(unsafe {
        libc::socket(
            family,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            libc::IPPROTO_RAW,
        )
    })
    .map_err(|e| context(e, "raw IP socket (needs CAP_NET_RAW)"))
}

impl RawIp {
    /// The two sockets, in the calling thread's network namespace.
    pub fn new() -> io::Result<RawIp> {
        Ok(RawIp {
            v4: raw_socket(libc::AF_INET)?,
            v6: raw_socket(libc::AF_INET6)?,
        })
    }

    /// Sends `packet`, a whole IPv4 or IPv6 packet, to where its header
    /// says. One syscall: this is the slow path.
    pub fn send(&self, packet: &[u8]) -> io::Result<()> {
        let (fd, dst) = match packet.first().map(|b| b >> 4) {
            Some(4) if packet.len() >= 20 => {
                let d: [u8; 4] = [packet[16], packet[17], packet[18], packet[19]];
                (&self.v4, IpAddr::V4(Ipv4Addr::from(d)))
            }
            Some(6) if packet.len() >= 40 => {
                let mut d = [0u8; 16];
                d.copy_from_slice(&packet[24..40]);
                (&self.v6, IpAddr::V6(Ipv6Addr::from(d)))
            }
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "not an IPv4 or IPv6 packet",
                ))
            }
        };
        // SAFETY: sockaddr_storage is plain old data; all zeroes is valid.
        let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let len = write_sockaddr(&SocketAddr::new(dst, 0), &mut storage);
        // SAFETY: `packet` and `storage` are live for the call and their
        // exact lengths are passed.
        let sent = cvt_size(unsafe {
            libc::sendto(
                fd.as_raw_fd(),
                packet.as_ptr().cast(),
                packet.len(),
                libc::MSG_DONTWAIT,
                (&storage as *const libc::sockaddr_storage).cast(),
                len,
            )
        })?;
        if sent == packet.len() {
            Ok(())
        } else {
            Err(io::Error::new(io::ErrorKind::WriteZero, "short raw send"))
        }
    }
}
