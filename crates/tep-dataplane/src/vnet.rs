//! The virtio-net header that a TUN/TAP opened with `IFF_VNET_HDR` puts
//! before every packet, translated to and from [`PacketMeta`].
//!
//! This is how checksum and segmentation offloads cross the TUN: the
//! kernel hands over TCP super-packets (TSO) with their checksum left
//! partial, and takes back coalesced super-packets (GRO) the same way.
//! The layout is Linux's `struct virtio_net_hdr` (10 bytes, no
//! `num_buffers`), in the host's byte order — little-endian on every
//! machine tep runs on (a big-endian host would set `TUNSETVNETLE`).
//!
//! Pure translation: the I/O is in tep-sys.

use crate::buffer::{ChecksumState, Gso, GsoKind, PacketMeta};
use crate::drop::DropReason;
use crate::geometry::{transport_checksum_offset, transport_pseudo};

/// Bytes of the header.
pub const VNET_HDR_LEN: usize = 10;

/// `VIRTIO_NET_HDR_F_NEEDS_CSUM`: the checksum at `csum_start +
/// csum_offset` holds the pseudo-header sum; the rest is to be summed.
pub const F_NEEDS_CSUM: u8 = 1;
/// `VIRTIO_NET_HDR_F_DATA_VALID`: the checksums were verified.
pub const F_DATA_VALID: u8 = 2;

/// `VIRTIO_NET_HDR_GSO_NONE`.
pub const GSO_NONE: u8 = 0;
/// `VIRTIO_NET_HDR_GSO_TCPV4`.
pub const GSO_TCPV4: u8 = 1;
/// `VIRTIO_NET_HDR_GSO_UDP`: UFO (IP fragmentation), long deprecated.
pub const GSO_UDP: u8 = 3;
/// `VIRTIO_NET_HDR_GSO_TCPV6`.
pub const GSO_TCPV6: u8 = 4;
/// `VIRTIO_NET_HDR_GSO_UDP_L4`: UDP segmentation (USO).
pub const GSO_UDP_L4: u8 = 5;
/// `VIRTIO_NET_HDR_GSO_ECN`: the TCP super-packet carries CWR (the flag
/// itself says so; segmentation keeps it on the first segment only).
pub const GSO_ECN: u8 = 0x80;

/// Bytes of `struct virtio_net_hdr_v1_hash_tunnel` (Linux 6.17+): the v1
/// header (12), the hash fields (8), two offsets (4).
pub const VNET_HDR_TUNNEL_LEN: usize = 24;
/// `VIRTIO_NET_HDR_GSO_UDP_TUNNEL_IPV4`: the super-packet is inside a UDP
/// tunnel over IPv4 (or'ed with the inner type).
pub const GSO_UDP_TUNNEL_IPV4: u8 = 0x20;
/// `VIRTIO_NET_HDR_GSO_UDP_TUNNEL_IPV6`.
pub const GSO_UDP_TUNNEL_IPV6: u8 = 0x40;
/// `VIRTIO_NET_HDR_F_UDP_TUNNEL_CSUM`: fill the outer UDP checksum of each
/// segment (else it stays 0).
pub const F_UDP_TUNNEL_CSUM: u8 = 8;

/// `struct virtio_net_hdr_v1_hash_tunnel` for a TCP super-packet tep
/// encapsulated whole ([tunnel GSO](crate::pipeline::PipelineOptions::tunnel_gso)),
/// as a whole Ethernet frame: the device (a TAP with
/// `TUN_F_UDP_TUNNEL_GSO`) segments the inner TCP, copies the outer
/// headers up to the inner IP header to each segment, fixes the outer IP
/// and UDP lengths and, with [`F_UDP_TUNNEL_CSUM`], the outer checksum.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TunnelGsoHeader {
    /// The v1 fields (the inner TCP's checksum and segmentation).
    pub base: VnetHeader,
    /// Where the outer UDP header is.
    pub outer_th_offset: u16,
    /// Where the inner IP header is.
    pub inner_nh_offset: u16,
}

impl TunnelGsoHeader {
    /// The header of the frame `data` (outer Ethernet at 0) that `meta`
    /// describes, with the outer checksum filled per segment or not;
    /// `None` unless it is a TCP super-packet with its inner checksum
    /// partial (what tunnel GSO hands the sink).
    pub fn for_frame(
        data: &[u8],
        meta: &PacketMeta,
        outer_checksum: bool,
    ) -> Option<TunnelGsoHeader> {
        let gso = meta.gso?;
        let inner = match gso.kind {
            GsoKind::Tcp4 => GSO_TCPV4,
            GsoKind::Tcp6 => GSO_TCPV6,
            GsoKind::Udp => return None,
        };
        let ChecksumState::Partial { start, offset } = meta.csum else {
            return None;
        };
        let outer_v6 = data.get(usize::from(meta.l3))? >> 4 == 6;
        let tunnel = if outer_v6 {
            GSO_UDP_TUNNEL_IPV6
        } else {
            GSO_UDP_TUNNEL_IPV4
        };
        let doff = usize::from(data.get(usize::from(start) + 12)? >> 4) * 4;
        let mut flags = F_NEEDS_CSUM;
        if outer_checksum {
            flags |= F_UDP_TUNNEL_CSUM;
        }
        Some(TunnelGsoHeader {
            base: VnetHeader {
                flags,
                gso_type: tunnel | inner,
                hdr_len: start + doff as u16,
                gso_size: gso.segment_size,
                csum_start: start,
                csum_offset: offset - start,
            },
            outer_th_offset: meta.l4,
            inner_nh_offset: meta.inner_l3,
        })
    }

    /// Writes the header (the hash fields 0).
    pub fn emit(&self, b: &mut [u8; VNET_HDR_TUNNEL_LEN]) {
        b.fill(0);
        let mut v1 = [0u8; VNET_HDR_LEN];
        self.base.emit(&mut v1);
        b[..VNET_HDR_LEN].copy_from_slice(&v1);
        b[20..22].copy_from_slice(&self.outer_th_offset.to_le_bytes());
        b[22..24].copy_from_slice(&self.inner_nh_offset.to_le_bytes());
    }
}

/// `struct virtio_net_hdr`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VnetHeader {
    /// `F_NEEDS_CSUM`, `F_DATA_VALID`.
    pub flags: u8,
    /// `GSO_*`, possibly with `GSO_ECN`.
    pub gso_type: u8,
    /// Bytes of headers (up to the end of the transport header).
    pub hdr_len: u16,
    /// Payload bytes per segment.
    pub gso_size: u16,
    /// Where checksumming starts.
    pub csum_start: u16,
    /// Where the checksum is, from `csum_start`.
    pub csum_offset: u16,
}

impl VnetHeader {
    /// Reads the header.
    pub fn parse(b: &[u8; VNET_HDR_LEN]) -> VnetHeader {
        let u = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        VnetHeader {
            flags: b[0],
            gso_type: b[1],
            hdr_len: u(2),
            gso_size: u(4),
            csum_start: u(6),
            csum_offset: u(8),
        }
    }

    /// Writes the header.
    pub fn emit(&self, b: &mut [u8; VNET_HDR_LEN]) {
        b[0] = self.flags;
        b[1] = self.gso_type;
        b[2..4].copy_from_slice(&self.hdr_len.to_le_bytes());
        b[4..6].copy_from_slice(&self.gso_size.to_le_bytes());
        b[6..8].copy_from_slice(&self.csum_start.to_le_bytes());
        b[8..10].copy_from_slice(&self.csum_offset.to_le_bytes());
    }

    /// The checksum state and segmentation of a `len`-byte packet read
    /// from a TUN/TAP with this header.
    ///
    /// Errors: `Unsupported` for UFO (the kernel never offers it to a TUN
    /// that did not ask), `Malformed` for a checksum region or segment size
    /// that does not fit the packet.
    pub fn to_meta(&self, len: usize) -> Result<(ChecksumState, Option<Gso>), DropReason> {
        let csum = if self.flags & F_NEEDS_CSUM != 0 {
            let start = usize::from(self.csum_start);
            let offset = start + usize::from(self.csum_offset);
            if offset + 2 > len || start > len {
                return Err(DropReason::Malformed);
            }
            ChecksumState::Partial {
                start: self.csum_start,
                offset: offset as u16,
            }
        } else if self.flags & F_DATA_VALID != 0 {
            ChecksumState::Verified
        } else {
            ChecksumState::None
        };
        let kind = match self.gso_type & !GSO_ECN {
            GSO_NONE => return Ok((csum, None)),
            GSO_TCPV4 => GsoKind::Tcp4,
            GSO_TCPV6 => GsoKind::Tcp6,
            GSO_UDP_L4 => GsoKind::Udp,
            _ => return Err(DropReason::Unsupported),
        };
        if self.gso_size == 0 {
            return Err(DropReason::Malformed);
        }
        Ok((
            csum,
            Some(Gso {
                kind,
                segment_size: self.gso_size,
            }),
        ))
    }

    /// The header for writing `data` (described by `meta`) to a TUN/TAP,
    /// after fixing the transport checksum field where the header needs it.
    ///
    /// - A super-packet (`meta.gso`) goes as TSO/USO with `NEEDS_CSUM`: the
    ///   kernel segments it, or delivers it whole to a local socket.
    /// - A partial checksum stays partial (`NEEDS_CSUM`).
    /// - A TCP/UDP packet whose checksum tep verified is also sent as
    ///   `NEEDS_CSUM`, with the pseudo-header sum written into its checksum
    ///   field: the TUN ignores `DATA_VALID` on write (`tun_get_user` maps
    ///   only `NEEDS_CSUM`, to `CHECKSUM_PARTIAL`), and the stack does not
    ///   verify a `CHECKSUM_PARTIAL` packet — so the inner checksum is
    ///   checked once, by tep, not again by the host. Should the packet be
    ///   forwarded instead, the device completes the checksum from the
    ///   same sum, which is right because the data was verified.
    /// - Anything else goes with no flags: the stack verifies it.
    pub fn for_packet(data: &mut [u8], meta: &PacketMeta) -> VnetHeader {
        let l3 = usize::from(meta.l3);
        let l4 = usize::from(meta.l4);
        let field = transport_checksum_offset(meta.inner_proto).unwrap_or(0);
        let partial = |start: usize, offset: usize| VnetHeader {
            flags: F_NEEDS_CSUM,
            csum_start: start as u16,
            csum_offset: (offset - start) as u16,
            ..VnetHeader::default()
        };
        if let Some(gso) = meta.gso {
            let (gso_type, header) = match gso.kind {
                GsoKind::Tcp4 | GsoKind::Tcp6 => {
                    let doff = data.get(l4 + 12).map_or(20, |b| usize::from(b >> 4) * 4);
                    let t = if gso.kind == GsoKind::Tcp4 {
                        GSO_TCPV4
                    } else {
                        GSO_TCPV6
                    };
                    (t, doff)
                }
                GsoKind::Udp => (GSO_UDP_L4, 8),
            };
            let offset = match meta.csum {
                ChecksumState::Partial { offset, .. } => usize::from(offset),
                _ => {
                    let off = l4 + if gso_type == GSO_UDP_L4 { 6 } else { 16 };
                    write_pseudo(data, l3, l4, meta.inner_proto, off);
                    off
                }
            };
            return VnetHeader {
                gso_type,
                hdr_len: (l4 + header) as u16,
                gso_size: gso.segment_size,
                ..partial(l4, offset)
            };
        }
        match meta.csum {
            ChecksumState::Partial { start, offset } => {
                partial(usize::from(start), usize::from(offset))
            }
            ChecksumState::Verified if field != 0 && l4 != 0 && l4 + field + 2 <= data.len() => {
                // A zero UDP checksum (none sent, IPv4) stays none.
                if field == 6 && data[l4 + 6..l4 + 8] == [0, 0] {
                    return VnetHeader::default();
                }
                if write_pseudo(data, l3, l4, meta.inner_proto, l4 + field) {
                    partial(l4, l4 + field)
                } else {
                    VnetHeader::default()
                }
            }
            _ => VnetHeader::default(),
        }
    }
}

/// Writes the pseudo-header sum of the transport segment at `l4` (its
/// length from the IP header, so Ethernet padding is not counted) into
/// the checksum field at `at`. False when the headers do not allow it.
fn write_pseudo(data: &mut [u8], l3: usize, l4: usize, proto: u8, at: usize) -> bool {
    let end = match data.get(l3).map(|b| b >> 4) {
        Some(4) if data.len() >= l3 + 20 => {
            l3 + usize::from(u16::from_be_bytes([data[l3 + 2], data[l3 + 3]]))
        }
        Some(6) if data.len() >= l3 + 40 => {
            l3 + 40 + usize::from(u16::from_be_bytes([data[l3 + 4], data[l3 + 5]]))
        }
        _ => return false,
    };
    if end > data.len() || end < at + 2 || l4 <= l3 {
        return false;
    }
    match transport_pseudo(&data[..end], l3, l4, proto) {
        Some(sum) if proto == 6 || proto == 17 => {
            data[at..at + 2].copy_from_slice(&sum.value().to_be_bytes());
            true
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testpkt::{self, payload, tcp, udp, Csum, Ip, Tcp};
    use tep_csum::Sum;

    #[test]
    fn header_bytes_round_trip_little_endian() {
        // What a TUN with TSO hands over for a 64 KiB IPv4 TCP write:
        // NEEDS_CSUM, TCPV4, hdr_len 66, gso_size 1448, start 20, offset 16.
        let bytes = [1, 1, 66, 0, 0xa8, 0x05, 20, 0, 16, 0];
        let h = VnetHeader::parse(&bytes);
        assert_eq!(
            h,
            VnetHeader {
                flags: F_NEEDS_CSUM,
                gso_type: GSO_TCPV4,
                hdr_len: 66,
                gso_size: 1448,
                csum_start: 20,
                csum_offset: 16,
            }
        );
        let mut out = [0u8; VNET_HDR_LEN];
        h.emit(&mut out);
        assert_eq!(out, bytes);
    }

    #[test]
    fn read_side_metadata() {
        let tso = VnetHeader {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV6 | GSO_ECN,
            hdr_len: 72,
            gso_size: 1428,
            csum_start: 40,
            csum_offset: 16,
        };
        assert_eq!(
            tso.to_meta(60000),
            Ok((
                ChecksumState::Partial {
                    start: 40,
                    offset: 56
                },
                Some(Gso {
                    kind: GsoKind::Tcp6,
                    segment_size: 1428
                })
            ))
        );
        let valid = VnetHeader {
            flags: F_DATA_VALID,
            ..VnetHeader::default()
        };
        assert_eq!(valid.to_meta(100), Ok((ChecksumState::Verified, None)));
        assert_eq!(
            VnetHeader::default().to_meta(100),
            Ok((ChecksumState::None, None))
        );
        // The checksum field must lie inside the packet.
        assert_eq!(tso.to_meta(57), Err(DropReason::Malformed));
        let ufo = VnetHeader {
            gso_type: GSO_UDP,
            gso_size: 1000,
            ..VnetHeader::default()
        };
        assert_eq!(ufo.to_meta(3000), Err(DropReason::Unsupported));
        let zero = VnetHeader {
            gso_type: GSO_UDP_L4,
            ..VnetHeader::default()
        };
        assert_eq!(zero.to_meta(3000), Err(DropReason::Malformed));
    }

    /// A verified TCP packet goes to the TUN as NEEDS_CSUM with the
    /// pseudo-header sum in place: completing it (what the kernel would do
    /// if it forwarded the packet) gives back the original checksum.
    #[test]
    fn verified_tcp_is_written_partial_with_the_pseudo_sum() {
        for ip in [Ip::v4(), Ip::v6()] {
            let bytes = tcp(&ip, &Tcp::new(), &payload(0, 700, 1), Csum::Full);
            let m = meta_for_ip(&bytes, ChecksumState::Verified, 6);
            let mut data = bytes.clone();
            let h = VnetHeader::for_packet(&mut data, &m);
            let l4 = usize::from(m.l4);
            assert_eq!(h.flags, F_NEEDS_CSUM);
            assert_eq!((h.csum_start, h.csum_offset), (l4 as u16, 16));
            assert_eq!(h.gso_type, GSO_NONE);
            let partial = Sum::of(&data[l4..]).checksum();
            assert_eq!(
                partial.to_be_bytes(),
                [bytes[l4 + 16], bytes[l4 + 17]],
                "completing the partial sum gives the original checksum"
            );
        }
    }

    fn meta_for_ip(bytes: &[u8], csum: ChecksumState, proto: u8) -> PacketMeta {
        let mut m = testpkt::meta_of(bytes, csum);
        m.inner_proto = proto;
        m
    }

    #[test]
    fn unverified_and_zero_udp_go_without_flags() {
        let bytes = udp(&Ip::v4(), 1, 2, &payload(0, 100, 2), Csum::Zero);
        let m = meta_for_ip(&bytes, ChecksumState::Verified, 17);
        let mut data = bytes.clone();
        assert_eq!(VnetHeader::for_packet(&mut data, &m), VnetHeader::default());
        assert_eq!(data, bytes, "a zero checksum stays zero");
        let bytes = udp(&Ip::v4(), 1, 2, &payload(0, 100, 2), Csum::Full);
        let m = meta_for_ip(&bytes, ChecksumState::None, 17);
        let mut data = bytes.clone();
        assert_eq!(VnetHeader::for_packet(&mut data, &m), VnetHeader::default());
        assert_eq!(data, bytes);
    }

    #[test]
    fn super_packet_goes_as_tso() {
        let bytes = tcp(
            &Ip::v4(),
            &Tcp::new(),
            &payload(0, 4 * 1448, 3),
            Csum::Partial,
        );
        let mut m = testpkt::super_meta(&bytes, GsoKind::Tcp4, 1448);
        m.inner_proto = 6;
        let mut data = bytes.clone();
        let h = VnetHeader::for_packet(&mut data, &m);
        assert_eq!(
            h,
            VnetHeader {
                flags: F_NEEDS_CSUM,
                gso_type: GSO_TCPV4,
                // IPv4 20 + TCP with options.
                hdr_len: 20 + u16::from(bytes[20 + 12] >> 4) * 4,
                gso_size: 1448,
                csum_start: 20,
                csum_offset: 16,
            }
        );
        assert_eq!(data, bytes, "already partial: untouched");
        // And read back, the same metadata.
        assert_eq!(h.to_meta(data.len()), Ok((m.csum, m.gso)));
    }
}
