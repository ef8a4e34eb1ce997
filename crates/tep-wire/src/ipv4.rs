//! IPv4 headers (RFC 791), options accepted on parse but never emitted.

use core::fmt;
use core::net::Ipv4Addr;

use tep_csum::Sum;

use crate::{get_u16, set_u16, Error, IpProtocol, Result};

/// Field offsets in the header, public for the dataplane's fast paths,
/// which read and write them in place where a view would cost a check.
pub mod field {
    use core::ops::Range;
    pub const VER_IHL: usize = 0;
    pub const DSCP_ECN: usize = 1;
    pub const LENGTH: Range<usize> = 2..4;
    pub const IDENT: Range<usize> = 4..6;
    pub const FLG_OFF: Range<usize> = 6..8;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: Range<usize> = 10..12;
    pub const SRC_ADDR: Range<usize> = 12..16;
    pub const DST_ADDR: Range<usize> = 16..20;
}

/// Length of a header without options.
pub const HEADER_LEN: usize = 20;

const FLAG_RESERVED: u16 = 0x8000;
const FLAG_DF: u16 = 0x4000;
const FLAG_MF: u16 = 0x2000;
const OFFSET_MASK: u16 = 0x1fff;

packet_view! {
    /// A read/write view of an IPv4 packet.
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Checks, in order: the fixed header fits (`Truncated`), version 4
    /// (`BadVersion`), IHL ≥ 5 (`BadLength`), the options fit (`Truncated`),
    /// total length ≥ IHL (`BadLength`), total length fits (`Truncated`).
    /// Bytes past the total length (link padding) are allowed.
    pub fn check_len(&self) -> Result<()> {
        self.check_len_with_tail(0)
    }

    /// [`check_len`](Packet::check_len) of a packet whose last `tail` bytes
    /// are not in the buffer (a segment whose payload is elsewhere, sent
    /// gathered): the header must be here, the total length may reach
    /// into the tail.
    pub fn check_len_with_tail(&self, tail: usize) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.version() != 4 {
            return Err(Error::BadVersion);
        }
        let hl = self.header_len();
        if hl < HEADER_LEN {
            return Err(Error::BadLength);
        }
        if len < hl {
            return Err(Error::Truncated);
        }
        let total = self.total_len() as usize;
        if total < hl {
            return Err(Error::BadLength);
        }
        if len + tail < total {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Version nibble.
    #[inline]
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }

    /// Header length in bytes (IHL × 4).
    #[inline]
    pub fn header_len(&self) -> usize {
        (self.buffer.as_ref()[field::VER_IHL] & 0x0f) as usize * 4
    }

    /// Differentiated services code point (RFC 2474).
    #[inline]
    pub fn dscp(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] >> 2
    }

    /// ECN bits (RFC 3168).
    #[inline]
    pub fn ecn(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] & 0x03
    }

    /// Total length: header plus payload.
    #[inline]
    pub fn total_len(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::LENGTH.start)
    }

    /// Identification.
    #[inline]
    pub fn ident(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::IDENT.start)
    }

    /// The reserved flag bit (RFC 791 says zero; receivers ignore it).
    #[inline]
    pub fn reserved_flag(&self) -> bool {
        get_u16(self.buffer.as_ref(), field::FLG_OFF.start) & FLAG_RESERVED != 0
    }

    /// Don't fragment.
    #[inline]
    pub fn dont_frag(&self) -> bool {
        get_u16(self.buffer.as_ref(), field::FLG_OFF.start) & FLAG_DF != 0
    }

    /// More fragments.
    #[inline]
    pub fn more_frags(&self) -> bool {
        get_u16(self.buffer.as_ref(), field::FLG_OFF.start) & FLAG_MF != 0
    }

    /// Fragment offset in bytes (the field counts 8-byte units).
    #[inline]
    pub fn frag_offset(&self) -> u16 {
        (get_u16(self.buffer.as_ref(), field::FLG_OFF.start) & OFFSET_MASK) << 3
    }

    /// Whether this is a fragment (MF set or a non-zero offset).
    #[inline]
    pub fn is_fragment(&self) -> bool {
        get_u16(self.buffer.as_ref(), field::FLG_OFF.start) & (FLAG_MF | OFFSET_MASK) != 0
    }

    /// Time to live.
    #[inline]
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }

    /// Payload protocol.
    #[inline]
    pub fn protocol(&self) -> IpProtocol {
        self.buffer.as_ref()[field::PROTOCOL].into()
    }

    /// Header checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::CHECKSUM.start)
    }

    /// Source address.
    #[inline]
    pub fn src_addr(&self) -> Ipv4Addr {
        let b = &self.buffer.as_ref()[field::SRC_ADDR];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }

    /// Destination address.
    #[inline]
    pub fn dst_addr(&self) -> Ipv4Addr {
        let b = &self.buffer.as_ref()[field::DST_ADDR];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }

    /// The raw options (bytes 20 to the header length).
    #[inline]
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.header_len()]
    }

    /// Whether the header (with options) sums to all ones.
    #[inline]
    pub fn verify_checksum(&self) -> bool {
        Sum::of(&self.buffer.as_ref()[..self.header_len()]).verifies()
    }

    /// The payload, bounded by the total length (not by the buffer).
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..self.total_len() as usize]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the version nibble.
    #[inline]
    pub fn set_version(&mut self, v: u8) {
        let b = &mut self.buffer.as_mut()[field::VER_IHL];
        *b = (*b & 0x0f) | (v << 4);
    }

    /// Sets the IHL from a byte length (a multiple of 4, ≤ 60).
    #[inline]
    pub fn set_header_len(&mut self, len: usize) {
        let b = &mut self.buffer.as_mut()[field::VER_IHL];
        *b = (*b & 0xf0) | ((len / 4) as u8 & 0x0f);
    }

    /// Sets the DSCP.
    #[inline]
    pub fn set_dscp(&mut self, v: u8) {
        let b = &mut self.buffer.as_mut()[field::DSCP_ECN];
        *b = (*b & 0x03) | (v << 2);
    }

    /// Sets the ECN bits.
    #[inline]
    pub fn set_ecn(&mut self, v: u8) {
        let b = &mut self.buffer.as_mut()[field::DSCP_ECN];
        *b = (*b & 0xfc) | (v & 0x03);
    }

    /// Sets the total length.
    #[inline]
    pub fn set_total_len(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::LENGTH.start, v);
    }

    /// Sets the identification.
    #[inline]
    pub fn set_ident(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::IDENT.start, v);
    }

    fn set_flag_bits(&mut self, mask: u16, on: bool) {
        let b = self.buffer.as_mut();
        let v = get_u16(b, field::FLG_OFF.start);
        set_u16(
            b,
            field::FLG_OFF.start,
            if on { v | mask } else { v & !mask },
        );
    }

    /// Sets DF.
    #[inline]
    pub fn set_dont_frag(&mut self, on: bool) {
        self.set_flag_bits(FLAG_DF, on);
    }

    /// Sets MF.
    #[inline]
    pub fn set_more_frags(&mut self, on: bool) {
        self.set_flag_bits(FLAG_MF, on);
    }

    /// Sets the fragment offset from bytes (a multiple of 8).
    #[inline]
    pub fn set_frag_offset(&mut self, bytes: u16) {
        let b = self.buffer.as_mut();
        let v = get_u16(b, field::FLG_OFF.start) & !OFFSET_MASK;
        set_u16(b, field::FLG_OFF.start, v | (bytes >> 3));
    }

    /// Sets the TTL.
    #[inline]
    pub fn set_ttl(&mut self, v: u8) {
        self.buffer.as_mut()[field::TTL] = v;
    }

    /// Sets the protocol.
    #[inline]
    pub fn set_protocol(&mut self, p: IpProtocol) {
        self.buffer.as_mut()[field::PROTOCOL] = p.into();
    }

    /// Sets the checksum field.
    #[inline]
    pub fn set_checksum(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::CHECKSUM.start, v);
    }

    /// Sets the source address.
    #[inline]
    pub fn set_src_addr(&mut self, a: Ipv4Addr) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&a.octets());
    }

    /// Sets the destination address.
    #[inline]
    pub fn set_dst_addr(&mut self, a: Ipv4Addr) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&a.octets());
    }

    /// Computes and writes the header checksum (over the options too).
    #[inline]
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let hl = self.header_len();
        let c = Sum::of(&self.buffer.as_ref()[..hl]).checksum();
        self.set_checksum(c);
    }

    /// The raw options, writable.
    #[inline]
    pub fn options_mut(&mut self) -> &mut [u8] {
        let hl = self.header_len();
        &mut self.buffer.as_mut()[HEADER_LEN..hl]
    }

    /// The payload, writable, bounded by the total length.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (hl, total) = (self.header_len(), self.total_len() as usize);
        &mut self.buffer.as_mut()[hl..total]
    }
}

/// The fields of an IPv4 header. Options are skipped on parse and never
/// emitted; the reserved flag is ignored (RFC 1122 §3.2.1.3 liberal receive).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Repr {
    /// Source address.
    pub src_addr: Ipv4Addr,
    /// Destination address.
    pub dst_addr: Ipv4Addr,
    /// Payload protocol.
    pub protocol: IpProtocol,
    /// Payload length (total length minus header length).
    pub payload_len: usize,
    /// Time to live.
    pub ttl: u8,
    /// DSCP (6 bits).
    pub dscp: u8,
    /// ECN (2 bits).
    pub ecn: u8,
    /// Identification.
    pub ident: u16,
    /// Don't fragment.
    pub dont_frag: bool,
    /// More fragments.
    pub more_frags: bool,
    /// Fragment offset in bytes (a multiple of 8).
    pub frag_offset: u16,
}

impl Ipv4Repr {
    /// Parses a checked packet. The checksum is not verified here: call
    /// [`Packet::verify_checksum`] (a receiver with offload may skip it).
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Ipv4Repr> {
        packet.check_len()?;
        Ok(Ipv4Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            protocol: packet.protocol(),
            payload_len: packet.total_len() as usize - packet.header_len(),
            ttl: packet.ttl(),
            dscp: packet.dscp(),
            ecn: packet.ecn(),
            ident: packet.ident(),
            dont_frag: packet.dont_frag(),
            more_frags: packet.more_frags(),
            frag_offset: packet.frag_offset(),
        })
    }

    /// Bytes [`Ipv4Repr::emit`] writes: always 20.
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Same as [`Ipv4Repr::header_len`].
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes a 20-byte header with its checksum. Panics if the total length
    /// would exceed 65535 (a caller bug).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        let total = u16::try_from(HEADER_LEN + self.payload_len).expect("IPv4 total length");
        let b = packet.buffer.as_mut();
        b[field::VER_IHL] = 0x45;
        b[field::DSCP_ECN] = (self.dscp << 2) | (self.ecn & 0x03);
        set_u16(b, field::LENGTH.start, total);
        set_u16(b, field::IDENT.start, self.ident);
        let flags =
            if self.dont_frag { FLAG_DF } else { 0 } | if self.more_frags { FLAG_MF } else { 0 };
        set_u16(
            b,
            field::FLG_OFF.start,
            flags | ((self.frag_offset >> 3) & OFFSET_MASK),
        );
        b[field::TTL] = self.ttl;
        b[field::PROTOCOL] = self.protocol.into();
        b[field::SRC_ADDR].copy_from_slice(&self.src_addr.octets());
        b[field::DST_ADDR].copy_from_slice(&self.dst_addr.octets());
        set_u16(b, field::CHECKSUM.start, 0);
        let c = Sum::of(&b[..HEADER_LEN]).checksum();
        set_u16(b, field::CHECKSUM.start, c);
    }

    /// The transport pseudo-header sum (RFC 768, RFC 9293 §3.1) for `length`
    /// bytes of `protocol` between these addresses.
    pub fn pseudo_header(&self, protocol: IpProtocol, length: u16) -> Sum {
        tep_csum::pseudo_header_v4(
            self.src_addr.octets(),
            self.dst_addr.octets(),
            protocol.into(),
            length,
        )
    }
}

impl fmt::Display for Ipv4Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ipv4 {} > {} proto {} len {} ttl {} id 0x{:04x}",
            self.src_addr, self.dst_addr, self.protocol, self.payload_len, self.ttl, self.ident
        )?;
        if self.dscp != 0 || self.ecn != 0 {
            write!(f, " dscp {} ecn {}", self.dscp, self.ecn)?;
        }
        if self.dont_frag {
            f.write_str(" DF")?;
        }
        if self.more_frags {
            f.write_str(" MF")?;
        }
        if self.frag_offset != 0 {
            write!(f, " off {}", self.frag_offset)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    use crate::test_vectors::hex;

    /// First packet of kernel-vxlan-csum.pcap (Linux VXLAN), from the outer
    /// Ethernet header, cut after 110 of 140 bytes.
    const KERNEL_VXLAN: &str = "ae8df6a408e5027ea0b0bef708004500007e5c9e00004011083f0ac800010ac80002e3c912b5006a160e0800000000002a00333300000016e6cfd361dcee86dd600000000024000100000000000000000000000000000000ff0200000000000000000000000000163a0005020000";

    #[test]
    fn kernel_vxlan_outer_header() {
        let bytes = hex(KERNEL_VXLAN);
        let ip = &bytes[14..];
        // The capture is cut: the full total length (126) does not fit.
        assert_eq!(Packet::new_checked(ip).err(), Some(Error::Truncated));
        let p = Packet::new_unchecked(ip);
        assert_eq!(p.total_len(), 0x7e);
        assert_eq!(p.checksum(), 0x083f);
        assert!(p.verify_checksum());
        assert_eq!(p.protocol(), IpProtocol::Udp);
        assert_eq!(p.src_addr(), Ipv4Addr::new(10, 200, 0, 1));
        assert_eq!(p.dst_addr(), Ipv4Addr::new(10, 200, 0, 2));
        assert_eq!((p.ident(), p.ttl(), p.dont_frag()), (0x5c9e, 64, false));
        // Padded out to its total length, it parses and re-emits exactly.
        let mut full = ip.to_vec();
        full.resize(0x7e, 0);
        let p = Packet::new_checked(&full[..]).unwrap();
        let r = Ipv4Repr::parse(&p).unwrap();
        assert_eq!(r.payload_len, 0x7e - 20);
        let mut out = [0u8; 20];
        r.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out[..], ip[..20]);
    }

    #[test]
    fn options_vector() {
        // tshark: ip.hdr_len 24, ip.dsfield.dscp 46, ip.checksum 0x3b7e good.
        let bytes = hex(include_str!("../tests/vectors/base_eth_ipv4opt_tcpopt.hex"));
        let ip = &bytes[14..];
        let p = Packet::new_checked(ip).unwrap();
        assert_eq!(p.version(), 4);
        assert_eq!(p.header_len(), 24);
        assert_eq!(p.options(), &[1, 1, 1, 0]);
        assert_eq!((p.dscp(), p.ecn()), (46, 1));
        assert_eq!(p.total_len() as usize, ip.len());
        assert_eq!(p.ident(), 0x1234);
        assert!(p.dont_frag() && !p.more_frags() && !p.reserved_flag() && !p.is_fragment());
        assert_eq!(p.frag_offset(), 0);
        assert_eq!(p.ttl(), 61);
        assert_eq!(p.protocol(), IpProtocol::Tcp);
        assert_eq!(p.checksum(), 0x3b7e);
        assert!(p.verify_checksum());
        assert_eq!(p.src_addr(), Ipv4Addr::new(192, 0, 2, 1));
        assert_eq!(p.dst_addr(), Ipv4Addr::new(198, 51, 100, 2));
        assert_eq!(p.payload().len(), ip.len() - 24);
        let r = Ipv4Repr::parse(&p).unwrap();
        assert_eq!(
            r.to_string(),
            "ipv4 192.0.2.1 > 198.51.100.2 proto tcp len 61 ttl 61 id 0x1234 dscp 46 ecn 1 DF"
        );
        // fill_checksum over the options reproduces the field.
        let mut copy = ip.to_vec();
        let mut q = Packet::new_unchecked(&mut copy[..]);
        q.set_checksum(0xffff);
        q.fill_checksum();
        assert_eq!(q.checksum(), 0x3b7e);
        // Flip a bit: the checksum no longer verifies.
        copy[8] ^= 1;
        assert!(!Packet::new_unchecked(&copy[..]).verify_checksum());
    }

    #[test]
    fn udp_vector_emit_and_padding() {
        let bytes = hex(include_str!("../tests/vectors/base_ipv4_udp_csum.hex"));
        let p = Packet::new_checked(&bytes[..]).unwrap();
        let r = Ipv4Repr::parse(&p).unwrap();
        assert_eq!(r.protocol, IpProtocol::Udp);
        assert_eq!(r.ident, 7);
        let mut out = [0u8; 20];
        r.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out[..], bytes[..20]);
        // Link padding past the total length is not payload.
        let mut padded = bytes.clone();
        padded.extend_from_slice(&[0; 6]);
        let q = Packet::new_checked(&padded[..]).unwrap();
        assert_eq!(q.payload(), p.payload());
    }

    #[test]
    fn errors() {
        let bytes = hex(include_str!("../tests/vectors/base_ipv4_udp_csum.hex"));
        for n in 0..bytes.len() {
            assert_eq!(
                Packet::new_checked(&bytes[..n]).err(),
                Some(Error::Truncated),
                "{n}"
            );
        }
        let mut b = bytes.clone();
        b[0] = 0x65;
        assert_eq!(Packet::new_checked(&b[..]).err(), Some(Error::BadVersion));
        b[0] = 0x44;
        assert_eq!(Packet::new_checked(&b[..]).err(), Some(Error::BadLength));
        b[0] = 0x45;
        b[2..4].copy_from_slice(&19u16.to_be_bytes());
        assert_eq!(Packet::new_checked(&b[..]).err(), Some(Error::BadLength));
        b[0] = 0x4f; // 60-byte header in a 46-byte buffer
        assert_eq!(Packet::new_checked(&b[..]).err(), Some(Error::Truncated));
    }

    #[test]
    fn setters() {
        let mut b = [0u8; 28];
        let mut p = Packet::new_unchecked(&mut b[..]);
        p.set_version(4);
        p.set_header_len(24);
        p.set_dscp(10);
        p.set_ecn(3);
        p.set_total_len(28);
        p.set_ident(9);
        p.set_dont_frag(true);
        p.set_more_frags(true);
        p.set_frag_offset(1480);
        p.set_ttl(3);
        p.set_protocol(IpProtocol::Gre);
        p.set_src_addr(Ipv4Addr::new(1, 2, 3, 4));
        p.set_dst_addr(Ipv4Addr::new(5, 6, 7, 8));
        p.options_mut().copy_from_slice(&[1, 1, 1, 1]);
        p.payload_mut().copy_from_slice(&[9; 4]);
        p.fill_checksum();
        p.set_dont_frag(false);
        p.fill_checksum();
        let p = Packet::new_checked(&b[..]).unwrap();
        assert!(p.verify_checksum());
        assert_eq!((p.dscp(), p.ecn(), p.ident(), p.ttl()), (10, 3, 9, 3));
        assert!(!p.dont_frag() && p.more_frags() && p.is_fragment());
        assert_eq!(p.frag_offset(), 1480);
        assert_eq!(p.protocol(), IpProtocol::Gre);
        assert_eq!(p.payload(), &[9; 4]);
    }

    fn repr() -> impl Strategy<Value = Ipv4Repr> {
        (
            any::<[u8; 4]>(),
            any::<[u8; 4]>(),
            any::<u8>(),
            0usize..=65515,
            any::<u8>(),
            0u8..64,
            0u8..4,
            any::<u16>(),
            any::<(bool, bool)>(),
            0u16..8192,
        )
            .prop_map(|(s, d, proto, len, ttl, dscp, ecn, ident, (df, mf), off)| {
                Ipv4Repr {
                    src_addr: s.into(),
                    dst_addr: d.into(),
                    protocol: proto.into(),
                    payload_len: len,
                    ttl,
                    dscp,
                    ecn,
                    ident,
                    dont_frag: df,
                    more_frags: mf,
                    frag_offset: off << 3,
                }
            })
    }

    proptest! {
        #[test]
        fn round_trip(r in repr()) {
            let mut buf = vec![0u8; HEADER_LEN + r.payload_len];
            r.emit(&mut Packet::new_unchecked(&mut buf[..]));
            let p = Packet::new_checked(&buf[..]).unwrap();
            prop_assert!(p.verify_checksum());
            prop_assert_eq!(Ipv4Repr::parse(&p).unwrap(), r);
            prop_assert_eq!(
                r.pseudo_header(IpProtocol::Udp, 8),
                tep_csum::pseudo_header_v4(r.src_addr.octets(), r.dst_addr.octets(), 17, 8)
            );
        }

        /// Any version-4 header whose lengths fit the buffer (options
        /// and every other byte arbitrary) is accepted, its lengths read
        /// as the header says, and its fields survive emit and parse with
        /// a checksum that verifies.
        #[test]
        fn arbitrary_headers_parse_consistently(
            mut b in proptest::collection::vec(any::<u8>(), 20..80),
            ihl in 5u8..=15,
        ) {
            let ihl = ihl.min((b.len() / 4) as u8);
            b[0] = 0x40 | ihl;
            let total = b.len() as u16;
            b[2..4].copy_from_slice(&total.to_be_bytes());
            let p = Packet::new_checked(&b[..]).unwrap();
            let hl = usize::from(ihl) * 4;
            prop_assert_eq!(p.header_len(), hl);
            prop_assert_eq!(p.options().len(), hl - HEADER_LEN);
            prop_assert_eq!(p.payload().len(), b.len() - hl);
            let r = Ipv4Repr::parse(&p).unwrap();
            prop_assert_eq!(r.payload_len, b.len() - hl);
            let mut out = vec![0u8; HEADER_LEN + r.payload_len];
            r.emit(&mut Packet::new_unchecked(&mut out[..]));
            let q = Packet::new_checked(&out[..]).unwrap();
            prop_assert!(q.verify_checksum());
            prop_assert_eq!(Ipv4Repr::parse(&q).unwrap(), r);
        }

        /// Bytes that are not a header are refused, never a panic.
        #[test]
        fn short_or_inconsistent_bytes_are_refused(b in proptest::collection::vec(any::<u8>(), 0..20)) {
            prop_assert!(Packet::new_checked(&b[..]).is_err());
        }
    }

    #[test]
    fn a_header_checks_with_its_tail() {
        // The 20-byte header of a 1500-byte packet whose payload is elsewhere.
        let mut h = [0u8; 20];
        h[0] = 0x45;
        h[2..4].copy_from_slice(&1500u16.to_be_bytes());
        let p = Packet::new_unchecked(&h[..]);
        assert_eq!(p.check_len(), Err(Error::Truncated));
        assert_eq!(p.check_len_with_tail(1479), Err(Error::Truncated));
        assert_eq!(p.check_len_with_tail(1480), Ok(()));
    }
}
