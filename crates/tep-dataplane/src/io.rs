//! The boundary between the pipeline and an I/O mode (pcap, host mode's
//! TUN/TAP and sockets, the coming gateway mode), after quinn-proto's
//! `Transmit` and `RecvMeta`: what the buffers at each edge hold, which
//! layers the I/O writes itself, and the outer header fields that travel
//! as metadata when they are not in the buffer.

use core::net::{IpAddr, Ipv4Addr};
use tep_wire::ipv4::{self, Ipv4Repr};
use tep_wire::ipv6::{self, Ipv6Repr};
use tep_wire::udp::{self, UdpRepr};
use tep_wire::IpProtocol;

/// What the buffers at the pipeline's outer edge hold: which outer layers
/// tep writes and parses itself, and which the I/O layer does. Either way
/// their fields travel in [`PacketMeta::outer`](crate::buffer::PacketMeta).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OuterLayers {
    /// Outer IP and UDP headers, written by `ip-udp-encap` and
    /// `udp-checksum`, parsed by `ip-input` and `udp-input` (`tep pcap`,
    /// the benchmarks).
    IpUdp,
    /// The UDP payload (the tunnel header on): a kernel UDP socket writes
    /// and parses the IP and UDP headers (host mode). The encap path
    /// leaves the outer UDP checksum to the socket (the kernel computes
    /// it, offloaded to the device where it can) instead of computing one
    /// that is thrown away: `zero` is the socket's option, `remote` still
    /// leaves the inner checksum to the receiver. On receive, the socket
    /// has verified the outer checksum, and the I/O layer records what it
    /// reported with
    /// [`PacketMeta::received_by_socket`](crate::buffer::PacketMeta::received_by_socket).
    UdpPayload,
    /// Whole Ethernet frames (gateway mode, AF_XDP): tep writes the outer
    /// Ethernet header too (the next hop's MAC from
    /// [`NextHops`](crate::nexthop::NextHops), which the I/O layer keeps
    /// from the kernel's tables) and strips it on receive; as a router it
    /// decrements the TTL of the IP packets it forwards and writes their
    /// Ethernet header on the inner side too. A packet whose next hop is
    /// not known yet goes to [`Output::Kernel`](crate::pipeline::Output).
    EthernetIpUdp,
}

impl OuterLayers {
    /// Whether tep writes and parses the outer IP and UDP headers.
    pub const fn ip_in_buffer(self) -> bool {
        !matches!(self, OuterLayers::UdpPayload)
    }
}

/// What the decap sink does with an inner packet's transport checksum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InnerChecksums {
    /// It takes the packet as decapsulation leaves it: a checksum nobody
    /// verified stays unverified (`tep pcap`, the benchmarks).
    AsFound,
    /// A device with a virtio-net header (host mode with offloads), which
    /// takes the checksum's state: `decap-output` settles each inner
    /// TCP/UDP checksum as verified (`DATA_VALID`), still partial
    /// (`NEEDS_CSUM`: as a same-host Linux sender leaves it, or as remote
    /// checksum offload over an outer checksum the I/O layer verified
    /// leaves it, reading no payload), or left to the host.
    Stated,
    /// A device without the header (host mode without offloads): a
    /// partial checksum is completed.
    Completed,
}

/// The outer IP and UDP header fields of a tunnel datagram, carried as
/// metadata whether or not the headers are in the buffer (quinn's
/// `RecvMeta` and `Transmit`). Decap: the I/O layer fills them from what
/// its socket reports ([`OuterLayers::UdpPayload`]), or `ip-input` and
/// `udp-input` from the headers ([`OuterLayers::IpUdp`]), and the decap
/// nodes read them here either way. Encap: where a socket writes the
/// headers, `ip-udp-encap` fills them for the I/O layer to send with;
/// where tep writes them, the headers it wrote are the fields, and they
/// are not copied here (writing the metadata's second cache line cost
/// about seven clocks a packet).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outer {
    /// Source address: the peer's on receive, the tunnel's local one on
    /// transmit.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// UDP source port.
    pub src_port: u16,
    /// UDP destination port.
    pub dst_port: u16,
    /// TOS / traffic class: DSCP and ECN.
    pub tos: u8,
    /// TTL / hop limit; 0 where a socket did not report it.
    pub ttl: u8,
}

impl Outer {
    /// No datagram yet.
    pub const NONE: Outer = Outer {
        src: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        dst: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        src_port: 0,
        dst_port: 0,
        tos: 0,
        ttl: 0,
    };

    /// The bytes of the headers [`emit`](Outer::emit) writes: IPv4 + UDP
    /// (28) or IPv6 + UDP (48).
    pub const fn header_len(&self) -> usize {
        match self.src {
            IpAddr::V4(_) => ipv4::HEADER_LEN + udp::HEADER_LEN,
            IpAddr::V6(_) => ipv6::HEADER_LEN + udp::HEADER_LEN,
        }
    }

    /// Writes the outer IP and UDP headers these fields describe, for a UDP
    /// payload of `payload_len` bytes, into the front of `buf`; returns
    /// their length, or `None` when the families differ or `buf` is too
    /// short. IPv4 goes with DF and its header checksum; a TTL of 0 (not
    /// reported) as 64. The UDP checksum field is left 0: the caller fills
    /// it if it has the payload's sum. For the few packets tep writes
    /// whole outside the encap path (GTP-U replies) and for the trace of
    /// datagrams whose headers a socket writes.
    pub fn emit(&self, payload_len: usize, buf: &mut [u8]) -> Option<usize> {
        let n = self.header_len();
        let udp_len = udp::HEADER_LEN + payload_len;
        // The IPv4 total length and the UDP length are 16 bits.
        let max_udp = match self.src {
            IpAddr::V4(_) => usize::from(u16::MAX) - ipv4::HEADER_LEN,
            IpAddr::V6(_) => usize::from(u16::MAX),
        };
        if buf.len() < n || udp_len > max_udp {
            return None;
        }
        let ttl = if self.ttl == 0 { 64 } else { self.ttl };
        let ip_len = match (self.src, self.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                let repr = Ipv4Repr {
                    src_addr: s,
                    dst_addr: d,
                    protocol: IpProtocol::Udp,
                    payload_len: udp_len,
                    ttl,
                    dscp: self.tos >> 2,
                    ecn: self.tos & 3,
                    ident: 0,
                    dont_frag: true,
                    more_frags: false,
                    frag_offset: 0,
                };
                repr.emit(&mut ipv4::Packet::new_unchecked(&mut buf[..]));
                ipv4::HEADER_LEN
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                let repr = Ipv6Repr {
                    src_addr: s,
                    dst_addr: d,
                    next_header: IpProtocol::Udp,
                    payload_len: udp_len,
                    hop_limit: ttl,
                    traffic_class: self.tos,
                    flow_label: 0,
                };
                repr.emit(&mut ipv6::Packet::new_unchecked(&mut buf[..]));
                ipv6::HEADER_LEN
            }
            _ => return None,
        };
        let repr = UdpRepr {
            src_port: self.src_port,
            dst_port: self.dst_port,
            payload_len,
            checksum: 0,
        };
        repr.emit(&mut udp::Packet::new_unchecked(&mut buf[ip_len..n]));
        Some(n)
    }
}
