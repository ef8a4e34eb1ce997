//! UDP headers (RFC 768) and their checksums over IPv4 and IPv6
//! (RFC 8200 §8.1; zero checksums per RFC 6935/6936).

use core::fmt;
use core::net::{Ipv4Addr, Ipv6Addr};

use tep_csum::Sum;

use crate::{get_u16, set_u16, Error, Result};

/// Field offsets in the header, public for the dataplane's fast paths,
/// which read and write them in place where a view would cost a check.
pub mod field {
    use core::ops::Range;
    pub const SRC_PORT: Range<usize> = 0..2;
    pub const DST_PORT: Range<usize> = 2..4;
    pub const LENGTH: Range<usize> = 4..6;
    pub const CHECKSUM: Range<usize> = 6..8;
}

/// Length of the UDP header.
pub const HEADER_LEN: usize = 8;

/// Offset of the checksum field (what checksum offload's `csum_offset` is).
pub const CHECKSUM_OFFSET: usize = field::CHECKSUM.start;

const PROTO_UDP: u8 = 17;

/// The outcome of checking a UDP checksum. A zero field means "no checksum":
/// always legal over IPv4, legal over IPv6 only where the tunnel allows it
/// (RFC 6936 §5), which is the caller's policy, so it is reported apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChecksumStatus {
    /// The field is 0: the sender did not compute a checksum.
    Zero,
    /// The checksum verifies.
    Valid,
    /// The checksum does not verify.
    Invalid,
}

impl ChecksumStatus {
    /// Whether an IPv4 receiver accepts the datagram (zero or valid).
    pub const fn acceptable_v4(self) -> bool {
        !matches!(self, ChecksumStatus::Invalid)
    }
}

packet_view! {
    /// A read/write view of a UDP datagram.
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Checks the header fits (`Truncated`), the length field is at least 8
    /// (`BadLength`) and fits the buffer (`Truncated`). A buffer longer than
    /// the length field (IP padding) is allowed.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let field_len = self.len() as usize;
        if field_len < HEADER_LEN {
            return Err(Error::BadLength);
        }
        if field_len > len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Source port.
    #[inline]
    pub fn src_port(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::SRC_PORT.start)
    }

    /// Destination port.
    #[inline]
    pub fn dst_port(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::DST_PORT.start)
    }

    /// Length field: header plus payload.
    #[inline]
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::LENGTH.start)
    }

    /// Checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::CHECKSUM.start)
    }

    /// Whether the checksum field is 0 ("none").
    #[inline]
    pub fn checksum_zero(&self) -> bool {
        self.checksum() == 0
    }

    /// Always 8.
    #[inline]
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// The payload, bounded by the length field.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.len() as usize]
    }

    fn datagram(&self) -> &[u8] {
        &self.buffer.as_ref()[..self.len() as usize]
    }

    fn status(&self, pseudo: Sum) -> ChecksumStatus {
        if self.checksum_zero() {
            ChecksumStatus::Zero
        } else if pseudo.add(Sum::of(self.datagram())).verifies() {
            ChecksumStatus::Valid
        } else {
            ChecksumStatus::Invalid
        }
    }

    /// Checks the checksum with the IPv4 pseudo-header.
    #[inline]
    pub fn verify_checksum_v4(&self, src: &Ipv4Addr, dst: &Ipv4Addr) -> ChecksumStatus {
        self.status(tep_csum::pseudo_header_v4(
            src.octets(),
            dst.octets(),
            PROTO_UDP,
            self.len(),
        ))
    }

    /// Checks the checksum with the IPv6 pseudo-header.
    #[inline]
    pub fn verify_checksum_v6(&self, src: &Ipv6Addr, dst: &Ipv6Addr) -> ChecksumStatus {
        self.status(tep_csum::pseudo_header_v6(
            &src.octets(),
            &dst.octets(),
            PROTO_UDP,
            self.len() as u32,
        ))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the source port.
    #[inline]
    pub fn set_src_port(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::SRC_PORT.start, v);
    }

    /// Sets the destination port.
    #[inline]
    pub fn set_dst_port(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::DST_PORT.start, v);
    }

    /// Sets the length field.
    #[inline]
    pub fn set_len(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::LENGTH.start, v);
    }

    /// Sets the checksum field.
    #[inline]
    pub fn set_checksum(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::CHECKSUM.start, v);
    }

    fn fill(&mut self, pseudo: Sum) {
        self.set_checksum(0);
        let c = pseudo.add(Sum::of(self.datagram())).udp_checksum();
        self.set_checksum(c);
    }

    /// Computes and writes the checksum over the IPv4 pseudo-header and the
    /// datagram (as long as its length field); a computed 0 is sent as 0xffff.
    #[inline]
    pub fn fill_checksum_v4(&mut self, src: &Ipv4Addr, dst: &Ipv4Addr) {
        let p = tep_csum::pseudo_header_v4(src.octets(), dst.octets(), PROTO_UDP, self.len());
        self.fill(p);
    }

    /// As [`Packet::fill_checksum_v4`] with the IPv6 pseudo-header.
    #[inline]
    pub fn fill_checksum_v6(&mut self, src: &Ipv6Addr, dst: &Ipv6Addr) {
        let p =
            tep_csum::pseudo_header_v6(&src.octets(), &dst.octets(), PROTO_UDP, self.len() as u32);
        self.fill(p);
    }

    /// The payload, writable, bounded by the length field.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = self.len() as usize;
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }
}

/// The fields of a UDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Payload length (the length field minus 8).
    pub payload_len: usize,
    /// The checksum field as read, or as emit writes it: 0 for none, the
    /// pseudo-header sum for checksum offload, or a full checksum the caller
    /// computed (else fill it after emit with `fill_checksum_v4/v6`).
    pub checksum: u16,
}

impl UdpRepr {
    /// Parses a checked datagram. Port 0 is not rejected (it is only
    /// reserved as a destination); the checksum is not verified here.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<UdpRepr> {
        packet.check_len()?;
        Ok(UdpRepr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            payload_len: packet.len() as usize - HEADER_LEN,
            checksum: packet.checksum(),
        })
    }

    /// Bytes [`UdpRepr::emit`] writes: 8.
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Same as [`UdpRepr::header_len`].
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header with `self.checksum` as is. Panics if the length
    /// would exceed 65535.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        let len = u16::try_from(HEADER_LEN + self.payload_len).expect("UDP length");
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_len(len);
        packet.set_checksum(self.checksum);
    }
}

impl fmt::Display for UdpRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "udp {} > {} len {} csum 0x{:04x}",
            self.src_port, self.dst_port, self.payload_len, self.checksum
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    use crate::test_vectors::hex;

    /// First packet of kernel-vxlan-csum.pcap (140 bytes): Linux VXLAN with
    /// the outer UDP checksum on (udpcsum).
    const KERNEL_VXLAN_FULL: &str = "ae8df6a408e5027ea0b0bef708004500007e5c9e00004011083f0ac800010ac80002e3c912b5006a160e0800000000002a00333300000016e6cfd361dcee86dd600000000024000100000000000000000000000000000000ff0200000000000000000000000000163a000502000001008f00923a0000000104000000ff0200000000000000000001ff61dcee";

    const V4_SRC: Ipv4Addr = Ipv4Addr::new(10, 200, 0, 1);
    const V4_DST: Ipv4Addr = Ipv4Addr::new(10, 200, 0, 2);

    #[test]
    fn kernel_vxlan_outer_udp() {
        let bytes = hex(KERNEL_VXLAN_FULL);
        let p = Packet::new_checked(&bytes[34..]).unwrap();
        assert_eq!((p.src_port(), p.dst_port(), p.len()), (0xe3c9, 4789, 0x6a));
        assert_eq!(p.checksum(), 0x160e);
        // Captured on the sending veth before checksum offload ran
        // (CHECKSUM_PARTIAL): the field holds the pseudo-header sum only.
        assert_eq!(
            p.verify_checksum_v4(&V4_SRC, &V4_DST),
            ChecksumStatus::Invalid
        );
        let pseudo = tep_csum::pseudo_header_v4(V4_SRC.octets(), V4_DST.octets(), 17, p.len());
        assert_eq!(p.checksum(), pseudo.value());
        // Completing it as the NIC would makes it verify.
        let mut done = bytes[34..].to_vec();
        let mut q = Packet::new_unchecked(&mut done[..]);
        q.fill_checksum_v4(&V4_SRC, &V4_DST);
        assert_eq!(
            q.verify_checksum_v4(&V4_SRC, &V4_DST),
            ChecksumStatus::Valid
        );
        assert_eq!(p.payload().len(), 0x6a - 8);
        // The cut copy is truncated.
        assert_eq!(
            Packet::new_checked(&bytes[34..110]).err(),
            Some(Error::Truncated)
        );
    }

    #[test]
    fn ipv4_valid_checksum_vector() {
        let bytes = hex(include_str!("../tests/vectors/base_ipv4_udp_csum.hex"));
        let udp = &bytes[20..];
        let p = Packet::new_checked(udp).unwrap();
        assert_eq!((p.src_port(), p.dst_port()), (12345, 6081));
        assert_eq!(p.len() as usize, udp.len());
        assert_eq!(p.checksum(), 0x656e);
        assert!(!p.checksum_zero());
        assert_eq!(p.payload(), b"geneve-ish payload");
        assert_eq!(
            p.verify_checksum_v4(&V4_SRC, &V4_DST),
            ChecksumStatus::Valid
        );
        let other = Ipv4Addr::new(10, 200, 0, 3);
        assert_eq!(
            p.verify_checksum_v4(&V4_SRC, &other),
            ChecksumStatus::Invalid
        );
        assert!(!ChecksumStatus::Invalid.acceptable_v4());
        let r = UdpRepr::parse(&p).unwrap();
        assert_eq!(r.to_string(), "udp 12345 > 6081 len 18 csum 0x656e");
        // emit with the parsed checksum reproduces the header; emit with 0
        // then fill reproduces it too.
        let mut out = udp.to_vec();
        r.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, udp);
        let mut out = udp.to_vec();
        let mut q = Packet::new_unchecked(&mut out[..]);
        UdpRepr { checksum: 0, ..r }.emit(&mut q);
        assert!(q.checksum_zero());
        assert_eq!(q.verify_checksum_v4(&V4_SRC, &V4_DST), ChecksumStatus::Zero);
        q.fill_checksum_v4(&V4_SRC, &V4_DST);
        assert_eq!(out, udp);
        for n in 0..udp.len() {
            assert_eq!(Packet::new_checked(&udp[..n]).err(), Some(Error::Truncated));
        }
    }

    #[test]
    fn ipv6_zero_checksum_vector() {
        let bytes = hex(include_str!("../tests/vectors/base_ipv6_udp_zero.hex"));
        let (src, dst): (Ipv6Addr, Ipv6Addr) =
            ("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap());
        let udp = &bytes[40..];
        let p = Packet::new_checked(udp).unwrap();
        assert_eq!((p.src_port(), p.dst_port()), (33333, 4789));
        assert!(p.checksum_zero());
        assert_eq!(p.verify_checksum_v6(&src, &dst), ChecksumStatus::Zero);
        let r = UdpRepr::parse(&p).unwrap();
        let mut out = [0u8; 8];
        r.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out[..], udp[..8]);
        let mut filled = udp.to_vec();
        let mut q = Packet::new_unchecked(&mut filled[..]);
        q.fill_checksum_v6(&src, &dst);
        assert_eq!(q.verify_checksum_v6(&src, &dst), ChecksumStatus::Valid);
        assert_eq!(q.verify_checksum_v6(&dst, &dst), ChecksumStatus::Invalid);
    }

    #[test]
    fn ipv6_vector_behind_extension_headers() {
        let bytes = hex(include_str!(
            "../tests/vectors/base_eth_vlan_ipv6_hbh_frag_udp.hex"
        ));
        let (src, dst): (Ipv6Addr, Ipv6Addr) = (
            "2001:db8::1".parse().unwrap(),
            "2001:db8::2".parse().unwrap(),
        );
        let p = Packet::new_checked(&bytes[18 + 40 + 16..]).unwrap();
        assert_eq!((p.src_port(), p.dst_port(), p.len()), (5555, 4789, 24));
        assert_eq!(p.checksum(), 0x4caa);
        assert_eq!(p.verify_checksum_v6(&src, &dst), ChecksumStatus::Valid);
    }

    #[test]
    fn length_errors_and_padding() {
        let mut b = [0u8; 12];
        b[5] = 7;
        assert_eq!(Packet::new_checked(&b[..]).err(), Some(Error::BadLength));
        b[5] = 13;
        assert_eq!(Packet::new_checked(&b[..]).err(), Some(Error::Truncated));
        b[5] = 10;
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.payload().len(), 2);
    }

    #[test]
    fn computed_zero_is_sent_as_ffff() {
        // Find a payload word whose checksum computes to 0.
        let src = Ipv4Addr::new(192, 0, 2, 1);
        let mut b = [0u8; 10];
        let mut p = Packet::new_unchecked(&mut b[..]);
        UdpRepr {
            src_port: 1,
            dst_port: 2,
            payload_len: 2,
            checksum: 0,
        }
        .emit(&mut p);
        p.fill_checksum_v4(&src, &src);
        let c = p.checksum();
        // Moving the checksum value into the payload makes the sum all ones.
        p.set_checksum(0);
        p.payload_mut().copy_from_slice(&c.to_be_bytes());
        p.fill_checksum_v4(&src, &src);
        assert_eq!(p.checksum(), 0xffff);
        assert_eq!(p.verify_checksum_v4(&src, &src), ChecksumStatus::Valid);
    }

    proptest! {
        #[test]
        fn round_trip(sp in any::<u16>(), dp in any::<u16>(), len in 0usize..=65527, c in any::<u16>()) {
            let r = UdpRepr { src_port: sp, dst_port: dp, payload_len: len, checksum: c };
            let mut buf = vec![0u8; HEADER_LEN + len];
            r.emit(&mut Packet::new_unchecked(&mut buf[..]));
            let p = Packet::new_checked(&buf[..]).unwrap();
            prop_assert_eq!(UdpRepr::parse(&p).unwrap(), r);
        }

        #[test]
        fn fill_then_verify(payload in proptest::collection::vec(any::<u8>(), 0..300),
                            s in any::<[u8; 16]>(), d in any::<[u8; 16]>()) {
            let mut buf = vec![0u8; HEADER_LEN + payload.len()];
            buf[HEADER_LEN..].copy_from_slice(&payload);
            let mut p = Packet::new_unchecked(&mut buf[..]);
            UdpRepr { src_port: 9, dst_port: 10, payload_len: payload.len(), checksum: 0 }.emit(&mut p);
            let (s4, d4) = (Ipv4Addr::new(s[0], s[1], s[2], s[3]), Ipv4Addr::new(d[0], d[1], d[2], d[3]));
            p.fill_checksum_v4(&s4, &d4);
            prop_assert_eq!(p.verify_checksum_v4(&s4, &d4), ChecksumStatus::Valid);
            let (s6, d6) = (Ipv6Addr::from(s), Ipv6Addr::from(d));
            p.fill_checksum_v6(&s6, &d6);
            prop_assert_eq!(p.verify_checksum_v6(&s6, &d6), ChecksumStatus::Valid);
        }

        /// Any datagram whose length field matches the buffer (the rest
        /// arbitrary) parses to that length, and its header re-emitted
        /// with the checksum filled verifies under either pseudo-header
        /// family and parses back to the same ports.
        #[test]
        fn arbitrary_datagrams_parse_consistently(
            mut b in proptest::collection::vec(any::<u8>(), 8..64),
            src in any::<[u8; 4]>(),
            dst in any::<[u8; 4]>(),
        ) {
            let len = b.len() as u16;
            b[4..6].copy_from_slice(&len.to_be_bytes());
            let p = Packet::new_checked(&b[..]).unwrap();
            let r = UdpRepr::parse(&p).unwrap();
            prop_assert_eq!(r.payload_len, b.len() - HEADER_LEN);
            let (src, dst) = (Ipv4Addr::from(src), Ipv4Addr::from(dst));
            let mut out = b.clone();
            let mut q = Packet::new_unchecked(&mut out[..]);
            UdpRepr { checksum: 0, ..r }.emit(&mut q);
            q.fill_checksum_v4(&src, &dst);
            let q = Packet::new_checked(&out[..]).unwrap();
            prop_assert_eq!(q.verify_checksum_v4(&src, &dst), ChecksumStatus::Valid);
            let back = UdpRepr::parse(&q).unwrap();
            prop_assert_eq!((back.src_port, back.dst_port, back.payload_len), (r.src_port, r.dst_port, r.payload_len));
            // A length field past the buffer is refused.
            b[4..6].copy_from_slice(&(len + 1).to_be_bytes());
            prop_assert!(Packet::new_checked(&b[..]).is_err());
        }
    }
}
