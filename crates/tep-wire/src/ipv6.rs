//! IPv6 fixed headers (RFC 8200 §3) and the walk over extension headers
//! (RFC 8200 §4) to the upper-layer protocol.

use core::fmt;
use core::net::Ipv6Addr;

use tep_csum::Sum;

use crate::{get_u16, get_u32, set_u16, set_u32, Error, IpProtocol, Result};

/// Field offsets in the header, public for the dataplane's fast paths,
/// which read and write them in place where a view would cost a check.
pub mod field {
    use core::ops::Range;
    pub const VER_TC_FLOW: Range<usize> = 0..4;
    pub const LENGTH: Range<usize> = 4..6;
    pub const NXT_HDR: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC_ADDR: Range<usize> = 8..24;
    pub const DST_ADDR: Range<usize> = 24..40;
}

/// Length of the fixed header.
pub const HEADER_LEN: usize = 40;

/// Most extension headers [`walk_extensions`] steps over before giving up.
pub const MAX_EXT_HEADERS: usize = 16;

packet_view! {
    /// A read/write view of an IPv6 packet.
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Checks the fixed header fits (`Truncated`), the version is 6
    /// (`BadVersion`), and the payload length fits (`Truncated`). Jumbograms
    /// (payload length 0 with a jumbo option, RFC 2675) are not recognised:
    /// they show an empty payload.
    pub fn check_len(&self) -> Result<()> {
        self.check_len_with_tail(0)
    }

    /// [`check_len`](Packet::check_len) of a packet whose last `tail` bytes
    /// are not in the buffer (a segment whose payload is elsewhere, sent
    /// gathered): the fixed header must be here, the payload length may
    /// reach into the tail.
    pub fn check_len_with_tail(&self, tail: usize) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.version() != 6 {
            return Err(Error::BadVersion);
        }
        if len + tail < HEADER_LEN + self.payload_len() as usize {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Version nibble.
    #[inline]
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[0] >> 4
    }

    /// Traffic class (DSCP << 2 | ECN).
    #[inline]
    pub fn traffic_class(&self) -> u8 {
        (get_u16(self.buffer.as_ref(), 0) >> 4) as u8
    }

    /// Flow label (20 bits).
    #[inline]
    pub fn flow_label(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::VER_TC_FLOW.start) & 0x000f_ffff
    }

    /// Payload length (extension headers included).
    #[inline]
    pub fn payload_len(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::LENGTH.start)
    }

    /// The first next-header value.
    #[inline]
    pub fn next_header(&self) -> IpProtocol {
        self.buffer.as_ref()[field::NXT_HDR].into()
    }

    /// Hop limit.
    #[inline]
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }

    /// Source address.
    #[inline]
    pub fn src_addr(&self) -> Ipv6Addr {
        let mut a = [0; 16];
        a.copy_from_slice(&self.buffer.as_ref()[field::SRC_ADDR]);
        a.into()
    }

    /// Destination address.
    #[inline]
    pub fn dst_addr(&self) -> Ipv6Addr {
        let mut a = [0; 16];
        a.copy_from_slice(&self.buffer.as_ref()[field::DST_ADDR]);
        a.into()
    }

    /// Always 40: extension headers are part of the payload.
    #[inline]
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// The payload (extension headers and upper layer), bounded by the
    /// payload length.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..HEADER_LEN + self.payload_len() as usize]
    }

    /// Walks the extension headers of the payload to the upper layer,
    /// within the bytes the buffer holds (all of them once checked; the
    /// headers of one checked with a tail).
    #[inline]
    pub fn upper_layer(&self) -> Result<UpperLayer> {
        let b = self.buffer.as_ref();
        let end = (HEADER_LEN + self.payload_len() as usize).min(b.len());
        walk_extensions(self.next_header(), &b[HEADER_LEN.min(end)..end])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the version nibble.
    #[inline]
    pub fn set_version(&mut self, v: u8) {
        let b = &mut self.buffer.as_mut()[0];
        *b = (*b & 0x0f) | (v << 4);
    }

    /// Sets the traffic class.
    #[inline]
    pub fn set_traffic_class(&mut self, tc: u8) {
        let b = self.buffer.as_mut();
        let v = get_u16(b, 0) & 0xf00f;
        set_u16(b, 0, v | ((tc as u16) << 4));
    }

    /// Sets the flow label (low 20 bits).
    #[inline]
    pub fn set_flow_label(&mut self, label: u32) {
        let b = self.buffer.as_mut();
        let v = get_u32(b, 0) & 0xfff0_0000;
        set_u32(b, 0, v | (label & 0x000f_ffff));
    }

    /// Sets the payload length.
    #[inline]
    pub fn set_payload_len(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::LENGTH.start, v);
    }

    /// Sets the first next-header value.
    #[inline]
    pub fn set_next_header(&mut self, p: IpProtocol) {
        self.buffer.as_mut()[field::NXT_HDR] = p.into();
    }

    /// Sets the hop limit.
    #[inline]
    pub fn set_hop_limit(&mut self, v: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = v;
    }

    /// Sets the source address.
    #[inline]
    pub fn set_src_addr(&mut self, a: Ipv6Addr) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&a.octets());
    }

    /// Sets the destination address.
    #[inline]
    pub fn set_dst_addr(&mut self, a: Ipv6Addr) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&a.octets());
    }

    /// The payload, writable, bounded by the payload length.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = HEADER_LEN + self.payload_len() as usize;
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }
}

/// What a fragment header (RFC 8200 §4.5) says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FragmentInfo {
    /// Offset of this fragment's data in bytes (a multiple of 8).
    pub offset: u16,
    /// M flag: more fragments follow.
    pub more_frags: bool,
    /// Identification.
    pub ident: u32,
}

impl FragmentInfo {
    /// The first fragment (or an atomic fragment) holds the upper-layer
    /// header; later ones hold only data.
    pub const fn is_first(&self) -> bool {
        self.offset == 0
    }

    /// An atomic fragment (offset 0, no M): a whole packet, to be
    /// processed as one (RFC 8200 §4.5, RFC 6946).
    pub const fn is_atomic(&self) -> bool {
        self.offset == 0 && !self.more_frags
    }
}

/// Where the upper layer starts, as [`walk_extensions`] found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UpperLayer {
    /// The first next-header value that is not an extension header this walk
    /// steps over (TCP, UDP, ICMPv6, ESP, No Next Header, anything unknown).
    pub protocol: IpProtocol,
    /// Offset of the upper layer from the start of the IPv6 payload.
    pub offset: usize,
    /// The fragment header, if one was crossed. When its offset is not zero,
    /// the bytes at `offset` are fragment data, not an upper-layer header.
    pub fragment: Option<FragmentInfo>,
}

/// Walks the extension headers at the start of `payload` (an IPv6 payload
/// whose first next header is `first`): hop-by-hop (only first, RFC 8200
/// §4.1), routing, destination options, fragment and AH (RFC 4302 §2.2,
/// length in 4-byte units). Stops at any other protocol, at a non-first
/// fragment, or with `Truncated` when a header does not fit, `Malformed` for
/// a misplaced hop-by-hop header, `Unsupported` after [`MAX_EXT_HEADERS`].
pub fn walk_extensions(first: IpProtocol, payload: &[u8]) -> Result<UpperLayer> {
    let mut next = first;
    let mut at = 0usize;
    let mut fragment = None;
    for i in 0..=MAX_EXT_HEADERS {
        let len = match next {
            IpProtocol::HopByHop if i > 0 => return Err(Error::Malformed),
            IpProtocol::HopByHop | IpProtocol::Ipv6Route | IpProtocol::Ipv6Opts => {
                let hdr = payload.get(at..at + 2).ok_or(Error::Truncated)?;
                (hdr[1] as usize + 1) * 8
            }
            IpProtocol::Ah => {
                let hdr = payload.get(at..at + 2).ok_or(Error::Truncated)?;
                (hdr[1] as usize + 2) * 4
            }
            IpProtocol::Ipv6Frag => 8,
            _ => {
                return Ok(UpperLayer {
                    protocol: next,
                    offset: at,
                    fragment,
                })
            }
        };
        if i == MAX_EXT_HEADERS {
            break;
        }
        let hdr = payload.get(at..at + len).ok_or(Error::Truncated)?;
        let this = next;
        next = hdr[0].into();
        at += len;
        if this == IpProtocol::Ipv6Frag {
            let f = FragmentInfo {
                offset: get_u16(hdr, 2) & 0xfff8,
                more_frags: hdr[3] & 1 != 0,
                ident: get_u32(hdr, 4),
            };
            // Of two fragment headers (RFC 8200 allows one; Linux acts on
            // each), one that makes this a piece counts over an atomic one.
            if fragment.is_none_or(|g: FragmentInfo| g.is_atomic()) {
                fragment = Some(f);
            }
            if !f.is_first() {
                return Ok(UpperLayer {
                    protocol: next,
                    offset: at,
                    fragment,
                });
            }
        }
    }
    Err(Error::Unsupported)
}

/// The fields of an IPv6 fixed header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6Repr {
    /// Source address.
    pub src_addr: Ipv6Addr,
    /// Destination address.
    pub dst_addr: Ipv6Addr,
    /// First next-header value.
    pub next_header: IpProtocol,
    /// Payload length (extension headers included).
    pub payload_len: usize,
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class.
    pub traffic_class: u8,
    /// Flow label (20 bits).
    pub flow_label: u32,
}

impl Ipv6Repr {
    /// Parses a checked packet's fixed header (extension headers are left to
    /// [`Packet::upper_layer`]).
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Ipv6Repr> {
        packet.check_len()?;
        Ok(Ipv6Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            next_header: packet.next_header(),
            payload_len: packet.payload_len() as usize,
            hop_limit: packet.hop_limit(),
            traffic_class: packet.traffic_class(),
            flow_label: packet.flow_label(),
        })
    }

    /// Bytes [`Ipv6Repr::emit`] writes: 40.
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Same as [`Ipv6Repr::header_len`].
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the fixed header. Panics if the payload length exceeds 65535.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        let len = u16::try_from(self.payload_len).expect("IPv6 payload length");
        let b = packet.buffer.as_mut();
        let first = (6 << 28) | ((self.traffic_class as u32) << 20) | (self.flow_label & 0xfffff);
        set_u32(b, 0, first);
        set_u16(b, field::LENGTH.start, len);
        b[field::NXT_HDR] = self.next_header.into();
        b[field::HOP_LIMIT] = self.hop_limit;
        b[field::SRC_ADDR].copy_from_slice(&self.src_addr.octets());
        b[field::DST_ADDR].copy_from_slice(&self.dst_addr.octets());
    }

    /// The upper-layer pseudo-header sum (RFC 8200 §8.1) for `length` bytes
    /// of `next_header` between these addresses.
    pub fn pseudo_header(&self, next_header: IpProtocol, length: u32) -> Sum {
        tep_csum::pseudo_header_v6(
            &self.src_addr.octets(),
            &self.dst_addr.octets(),
            next_header.into(),
            length,
        )
    }
}

impl fmt::Display for Ipv6Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ipv6 {} > {} next {} len {} hlim {}",
            self.src_addr, self.dst_addr, self.next_header, self.payload_len, self.hop_limit
        )?;
        if self.traffic_class != 0 {
            write!(f, " tc 0x{:02x}", self.traffic_class)?;
        }
        if self.flow_label != 0 {
            write!(f, " flow 0x{:05x}", self.flow_label)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    use crate::test_vectors::hex;

    /// First packet of kernel-vxlan-csum.pcap, cut after 110 bytes.
    const KERNEL_VXLAN: &str = "ae8df6a408e5027ea0b0bef708004500007e5c9e00004011083f0ac800010ac80002e3c912b5006a160e0800000000002a00333300000016e6cfd361dcee86dd600000000024000100000000000000000000000000000000ff0200000000000000000000000000163a0005020000";

    /// The same packet whole (140 bytes, /work/shared/captures).
    const KERNEL_VXLAN_FULL: &str = "ae8df6a408e5027ea0b0bef708004500007e5c9e00004011083f0ac800010ac80002e3c912b5006a160e0800000000002a00333300000016e6cfd361dcee86dd600000000024000100000000000000000000000000000000ff0200000000000000000000000000163a000502000001008f00923a0000000104000000ff0200000000000000000001ff61dcee";

    #[test]
    fn kernel_vxlan_inner_mld() {
        let cut = hex(KERNEL_VXLAN);
        let ip = &cut[14 + 20 + 8 + 8 + 14..];
        // The cut leaves the fixed header but not the 36-byte payload.
        assert_eq!(Packet::new_checked(ip).err(), Some(Error::Truncated));
        let p = Packet::new_unchecked(ip);
        assert_eq!(p.version(), 6);
        assert_eq!(p.payload_len(), 36);
        assert_eq!(p.next_header(), IpProtocol::HopByHop);
        assert_eq!(p.hop_limit(), 1);
        assert_eq!(p.src_addr(), Ipv6Addr::UNSPECIFIED);
        assert_eq!(p.dst_addr(), "ff02::16".parse::<Ipv6Addr>().unwrap());
        assert_eq!(
            walk_extensions(p.next_header(), &ip[40..]),
            Err(Error::Truncated)
        );
        // Whole: hop-by-hop (router alert) then ICMPv6 (MLDv2 report).
        let full = hex(KERNEL_VXLAN_FULL);
        let p = Packet::new_checked(&full[64..]).unwrap();
        let up = p.upper_layer().unwrap();
        assert_eq!(up.protocol, IpProtocol::Icmpv6);
        assert_eq!(up.offset, 8);
        assert_eq!(up.fragment, None);
        let r = Ipv6Repr::parse(&p).unwrap();
        let mut out = [0u8; 40];
        r.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out[..], full[64..104]);
    }

    #[test]
    fn vlan_hbh_frag_vector() {
        // tshark: ipv6.tclass 0x2e, ipv6.flow 0x12345, fraghdr offset 0,
        // more 1, ident 0xdeadbeef.
        let bytes = hex(include_str!(
            "../tests/vectors/base_eth_vlan_ipv6_hbh_frag_udp.hex"
        ));
        let ip = &bytes[18..];
        let p = Packet::new_checked(ip).unwrap();
        assert_eq!(p.traffic_class(), 0x2e);
        assert_eq!(p.flow_label(), 0x12345);
        assert_eq!(p.payload_len() as usize, ip.len() - 40);
        assert_eq!(p.next_header(), IpProtocol::HopByHop);
        assert_eq!(p.hop_limit(), 63);
        assert_eq!(p.src_addr(), "2001:db8::1".parse::<Ipv6Addr>().unwrap());
        assert_eq!(p.dst_addr(), "2001:db8::2".parse::<Ipv6Addr>().unwrap());
        let up = p.upper_layer().unwrap();
        assert_eq!(up.protocol, IpProtocol::Udp);
        assert_eq!(up.offset, 16);
        assert_eq!(
            up.fragment,
            Some(FragmentInfo {
                offset: 0,
                more_frags: true,
                ident: 0xdeadbeef
            })
        );
        let r = Ipv6Repr::parse(&p).unwrap();
        let mut out = [0u8; 40];
        r.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out[..], ip[..40]);
        assert_eq!(
            r.to_string(),
            "ipv6 2001:db8::1 > 2001:db8::2 next proto-0 len 40 hlim 63 tc 0x2e flow 0x12345"
        );
        for n in 0..up.offset + 1 {
            let e = walk_extensions(p.next_header(), &p.payload()[..n]);
            if n < up.offset {
                assert_eq!(e, Err(Error::Truncated), "{n}");
            } else {
                assert!(e.is_ok());
            }
        }
        for n in 0..ip.len() {
            assert_eq!(Packet::new_checked(&ip[..n]).err(), Some(Error::Truncated));
        }
    }

    #[test]
    fn udp_zero_vector() {
        let bytes = hex(include_str!("../tests/vectors/base_ipv6_udp_zero.hex"));
        let p = Packet::new_checked(&bytes[..]).unwrap();
        let up = p.upper_layer().unwrap();
        assert_eq!(
            (up.protocol, up.offset, up.fragment),
            (IpProtocol::Udp, 0, None)
        );
        let r = Ipv6Repr::parse(&p).unwrap();
        let mut out = [0u8; 40];
        r.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out[..], bytes[..40]);
        let mut b = bytes.clone();
        b[0] = 0x45;
        assert_eq!(Packet::new_checked(&b[..]).err(), Some(Error::BadVersion));
    }

    #[test]
    fn walk_cases() {
        // Routing (len 1 = 16 bytes) -> AH (len 1 = 12 bytes) -> dst opts -> ESP.
        let mut b = [0u8; 36];
        b[0] = 51;
        b[1] = 1;
        b[16] = 60;
        b[17] = 1;
        b[28] = 50;
        let up = walk_extensions(IpProtocol::Ipv6Route, &b).unwrap();
        assert_eq!((up.protocol, up.offset), (IpProtocol::Esp, 36));
        // A non-first fragment ends the walk at its data.
        let frag = [6, 0, 0x05, 0xc8, 0, 0, 0, 1];
        let up = walk_extensions(IpProtocol::Ipv6Frag, &frag).unwrap();
        assert_eq!(up.protocol, IpProtocol::Tcp);
        assert_eq!(up.offset, 8);
        let f = up.fragment.unwrap();
        assert_eq!(
            (f.offset, f.more_frags, f.ident, f.is_first()),
            (1480, false, 1, false)
        );
        // A first fragment then an atomic one: still a piece of a
        // fragmented packet; the other way round too.
        let first = [44, 0, 0, 1, 0, 0, 0, 2];
        let atomic = [17, 0, 0, 0, 0, 0, 0, 3];
        for two in [[first, atomic], [atomic, first]] {
            let mut b = two.concat();
            b[0] = 44;
            b[8] = 17;
            let up = walk_extensions(IpProtocol::Ipv6Frag, &b).unwrap();
            assert_eq!((up.protocol, up.offset), (IpProtocol::Udp, 16));
            let f = up.fragment.unwrap();
            assert_eq!((f.more_frags, f.ident, f.is_atomic()), (true, 2, false));
        }
        // Hop-by-hop after the first header.
        let b = [0u8; 16];
        assert_eq!(
            walk_extensions(IpProtocol::Ipv6Opts, &b),
            Err(Error::Malformed)
        );
        // A loop of destination options headers is cut off.
        let b = [60u8, 0, 0, 0, 0, 0, 0, 0].repeat(40);
        assert_eq!(
            walk_extensions(IpProtocol::Ipv6Opts, &b),
            Err(Error::Unsupported)
        );
        // Exactly MAX_EXT_HEADERS headers is fine.
        let mut b = [60u8, 0, 0, 0, 0, 0, 0, 0].repeat(MAX_EXT_HEADERS);
        b[(MAX_EXT_HEADERS - 1) * 8] = 59;
        let up = walk_extensions(IpProtocol::Ipv6Opts, &b).unwrap();
        assert_eq!((up.protocol, up.offset), (IpProtocol::Ipv6NoNxt, b.len()));
        assert_eq!(
            walk_extensions(IpProtocol::Udp, &[]).unwrap().protocol,
            IpProtocol::Udp
        );
    }

    #[test]
    fn setters() {
        let mut b = [0u8; 44];
        let mut p = Packet::new_unchecked(&mut b[..]);
        p.set_version(6);
        p.set_flow_label(0xfffff);
        p.set_traffic_class(0xab);
        p.set_flow_label(0x54321);
        p.set_payload_len(4);
        p.set_next_header(IpProtocol::Udp);
        p.set_hop_limit(9);
        p.set_src_addr(Ipv6Addr::LOCALHOST);
        p.set_dst_addr(Ipv6Addr::UNSPECIFIED);
        p.payload_mut().copy_from_slice(&[1, 2, 3, 4]);
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(
            (p.version(), p.traffic_class(), p.flow_label()),
            (6, 0xab, 0x54321)
        );
        assert_eq!((p.next_header(), p.hop_limit()), (IpProtocol::Udp, 9));
        assert_eq!(p.src_addr(), Ipv6Addr::LOCALHOST);
        assert_eq!(p.payload(), &[1, 2, 3, 4]);
    }

    fn repr() -> impl Strategy<Value = Ipv6Repr> {
        (
            any::<[u8; 16]>(),
            any::<[u8; 16]>(),
            any::<u8>(),
            0usize..=65535,
            any::<u8>(),
            any::<u8>(),
            0u32..0x100000,
        )
            .prop_map(|(s, d, nh, len, hl, tc, fl)| Ipv6Repr {
                src_addr: s.into(),
                dst_addr: d.into(),
                next_header: nh.into(),
                payload_len: len,
                hop_limit: hl,
                traffic_class: tc,
                flow_label: fl,
            })
    }

    proptest! {
        #[test]
        fn round_trip(r in repr()) {
            let mut buf = vec![0u8; HEADER_LEN + r.payload_len];
            r.emit(&mut Packet::new_unchecked(&mut buf[..]));
            let p = Packet::new_checked(&buf[..]).unwrap();
            prop_assert_eq!(Ipv6Repr::parse(&p).unwrap(), r);
        }

        #[test]
        fn arbitrary_bytes_never_panic(mut b in proptest::collection::vec(any::<u8>(), 0..120)) {
            if let Some(first) = b.first_mut() {
                *first = 0x60 | (*first & 0x0f);
            }
            if b.len() >= 6 {
                let room = b.len().saturating_sub(40) as u16;
                let plen = u16::from_be_bytes([b[4], b[5]]) % (room + 1);
                b[4..6].copy_from_slice(&plen.to_be_bytes());
            }
            if let Ok(p) = Packet::new_checked(&b[..]) {
                let _ = (p.traffic_class(), p.flow_label(), p.next_header(), p.hop_limit());
                let _ = (p.src_addr(), p.dst_addr(), p.payload().len());
                let _ = p.upper_layer();
                let _ = Ipv6Repr::parse(&p);
            }
        }

        #[test]
        fn walk_never_panics(first in any::<u8>(), b in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(up) = walk_extensions(first.into(), &b) {
                prop_assert!(up.offset <= b.len());
            }
        }
    }

    #[test]
    fn headers_check_and_walk_with_their_tail() {
        // IPv6 + an 8-byte destination-options header + a TCP header, of a
        // packet with 1000 more payload bytes elsewhere.
        let mut h = [0u8; 40 + 8 + 20];
        h[0] = 0x60;
        h[4..6].copy_from_slice(&(8u16 + 20 + 1000).to_be_bytes());
        h[6] = 60;
        h[40] = 6;
        let p = Packet::new_unchecked(&h[..]);
        assert_eq!(p.check_len(), Err(Error::Truncated));
        assert_eq!(p.check_len_with_tail(999), Err(Error::Truncated));
        assert_eq!(p.check_len_with_tail(1000), Ok(()));
        let upper = p.upper_layer().unwrap();
        assert_eq!((upper.protocol, upper.offset), (IpProtocol::Tcp, 8));
    }
}
