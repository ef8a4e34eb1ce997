//! GRE (RFC 2784 with the key and sequence number of RFC 2890), as carried
//! directly over IP (protocol 47) or in UDP (RFC 8086, port 4754).
//!
//! Only the RFC 2784 header is parsed. The RFC 1701 routing bit (R) makes
//! the header variable-length with source route entries: `GreRepr::parse`
//! reports it as `Unsupported`. The other RFC 1701 bits (strict source route,
//! recursion control, flags) must be zero per RFC 2784 §2.5.1 ("a receiver
//! MUST discard a packet where any of bits 1-5 are non-zero, unless that
//! receiver implements RFC 1701"), so they are `Malformed`. Linux
//! (`gre_parse_header`) is more lenient and only rejects R and the version;
//! being strict here keeps a reserved bit from silently changing meaning.

use core::fmt;

use tep_csum::Sum;

use crate::ethernet::EtherType;
use crate::{get_u16, get_u32, set_u16, set_u32, Error, Result};

/// Field offsets in the header, public for the dataplane's fast paths,
/// which read and write them in place where a view would cost a check.
pub mod field {
    use core::ops::Range;

    pub const FLAGS: Range<usize> = 0..2;
    pub const PROTOCOL: Range<usize> = 2..4;
    /// Optional fields (checksum+reserved1, key, sequence) start here, in
    /// that order, 4 bytes each.
    pub const OPTIONS: usize = 4;
}

/// The minimum header: flags/version and protocol type.
pub const HEADER_LEN: usize = 4;
/// The longest header this module parses: base + checksum + key + sequence.
pub const MAX_HEADER_LEN: usize = 16;

/// C: checksum and reserved1 present (RFC 2784 §2.5).
pub const FLAG_C: u16 = 0x8000;
/// R: RFC 1701 routing present (not parsed).
pub const FLAG_R: u16 = 0x4000;
/// K: key present (RFC 2890 §2.1).
pub const FLAG_K: u16 = 0x2000;
/// S: sequence number present (RFC 2890 §2.1).
pub const FLAG_S: u16 = 0x1000;
/// RFC 1701 strict source route, recursion control and flags: reserved0.
pub const RESERVED0_MASK: u16 = 0x0ff8;
/// Version (bits 13-15); 0 for GRE, 1 is PPTP's enhanced GRE.
pub const VERSION_MASK: u16 = 0x0007;

packet_view! {
    /// A read/write view of a GRE header followed by its payload.
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// `Truncated` if the buffer is shorter than the header the flags imply.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN || len < self.header_len() {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// The whole first 16-bit word: flags, reserved0 and version.
    #[inline]
    pub fn flags_word(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::FLAGS.start)
    }

    /// C bit.
    #[inline]
    pub fn checksum_present(&self) -> bool {
        self.flags_word() & FLAG_C != 0
    }

    /// R bit (RFC 1701 routing).
    #[inline]
    pub fn routing_present(&self) -> bool {
        self.flags_word() & FLAG_R != 0
    }

    /// K bit.
    #[inline]
    pub fn key_present(&self) -> bool {
        self.flags_word() & FLAG_K != 0
    }

    /// S bit.
    #[inline]
    pub fn sequence_present(&self) -> bool {
        self.flags_word() & FLAG_S != 0
    }

    /// The reserved0 bits (already masked, not shifted).
    #[inline]
    pub fn reserved0(&self) -> u16 {
        self.flags_word() & RESERVED0_MASK
    }

    /// The version field.
    #[inline]
    pub fn version(&self) -> u8 {
        (self.flags_word() & VERSION_MASK) as u8
    }

    /// The protocol type of the payload.
    #[inline]
    pub fn protocol(&self) -> EtherType {
        EtherType::from(get_u16(self.buffer.as_ref(), field::PROTOCOL.start))
    }

    /// Header length implied by C, K and S: 4 to 16 bytes.
    #[inline]
    pub fn header_len(&self) -> usize {
        let f = self.flags_word();
        HEADER_LEN
            + 4 * (usize::from(f & FLAG_C != 0)
                + usize::from(f & FLAG_K != 0)
                + usize::from(f & FLAG_S != 0))
    }

    fn key_at(&self) -> usize {
        field::OPTIONS + if self.checksum_present() { 4 } else { 0 }
    }

    fn sequence_at(&self) -> usize {
        self.key_at() + if self.key_present() { 4 } else { 0 }
    }

    /// The checksum field, if C is set.
    #[inline]
    pub fn checksum(&self) -> Option<u16> {
        self.checksum_present()
            .then(|| get_u16(self.buffer.as_ref(), field::OPTIONS))
    }

    /// The reserved1 field after the checksum, if C is set.
    #[inline]
    pub fn reserved1(&self) -> Option<u16> {
        self.checksum_present()
            .then(|| get_u16(self.buffer.as_ref(), field::OPTIONS + 2))
    }

    /// The key, if K is set.
    #[inline]
    pub fn key(&self) -> Option<u32> {
        self.key_present()
            .then(|| get_u32(self.buffer.as_ref(), self.key_at()))
    }

    /// The sequence number, if S is set.
    #[inline]
    pub fn sequence(&self) -> Option<u32> {
        self.sequence_present()
            .then(|| get_u32(self.buffer.as_ref(), self.sequence_at()))
    }

    /// Whether the checksum (if present) is right. RFC 2784 §2.5: it covers
    /// the GRE header and the payload, i.e. the whole buffer. Without C,
    /// there is nothing to verify and this returns `true`.
    pub fn verify_checksum(&self) -> bool {
        !self.checksum_present() || Sum::of(self.buffer.as_ref()).verifies()
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// The bytes after the header.
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        let data = self.buffer.as_ref();
        &data[self.header_len()..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the first 16-bit word. Changing C/K/S changes `header_len`.
    #[inline]
    pub fn set_flags_word(&mut self, value: u16) {
        set_u16(self.buffer.as_mut(), field::FLAGS.start, value)
    }

    /// Sets the protocol type.
    #[inline]
    pub fn set_protocol(&mut self, value: EtherType) {
        set_u16(self.buffer.as_mut(), field::PROTOCOL.start, value.into())
    }

    /// Sets the checksum field. Panics if C is not set.
    #[inline]
    pub fn set_checksum(&mut self, value: u16) {
        assert!(self.checksum_present());
        set_u16(self.buffer.as_mut(), field::OPTIONS, value)
    }

    /// Sets the key. Panics if K is not set.
    #[inline]
    pub fn set_key(&mut self, value: u32) {
        assert!(self.key_present());
        let at = self.key_at();
        set_u32(self.buffer.as_mut(), at, value)
    }

    /// Sets the sequence number. Panics if S is not set.
    #[inline]
    pub fn set_sequence(&mut self, value: u32) {
        assert!(self.sequence_present());
        let at = self.sequence_at();
        set_u32(self.buffer.as_mut(), at, value)
    }

    /// Computes and writes the checksum over header and payload (the whole
    /// buffer, so slice it to the packet first). No-op without C.
    pub fn fill_checksum(&mut self) {
        if !self.checksum_present() {
            return;
        }
        self.set_checksum(0);
        let sum = Sum::of(self.buffer.as_ref()).checksum();
        self.set_checksum(sum)
    }

    /// The bytes after the header, mutable.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let at = self.header_len();
        &mut self.buffer.as_mut()[at..]
    }
}

/// The meaning of an RFC 2784/2890 GRE header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GreRepr {
    /// Protocol type of the payload.
    pub protocol: EtherType,
    /// Whether the checksum field is present (its value is not part of the
    /// repr: it depends on the payload, see `Packet::fill_checksum`).
    pub checksum: bool,
    /// RFC 2890 key.
    pub key: Option<u32>,
    /// RFC 2890 sequence number.
    pub sequence: Option<u32>,
}

impl GreRepr {
    /// Parses a checked packet. Does not verify the checksum (that needs the
    /// whole packet: `Packet::verify_checksum`).
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<GreRepr> {
        packet.check_len()?;
        if packet.version() != 0 {
            return Err(Error::BadVersion);
        }
        if packet.routing_present() {
            return Err(Error::Unsupported);
        }
        if packet.reserved0() != 0 {
            return Err(Error::Malformed);
        }
        Ok(GreRepr {
            protocol: packet.protocol(),
            checksum: packet.checksum_present(),
            key: packet.key(),
            sequence: packet.sequence(),
        })
    }

    /// The flags word this repr emits.
    pub fn flags_word(&self) -> u16 {
        let mut f = 0;
        if self.checksum {
            f |= FLAG_C;
        }
        if self.key.is_some() {
            f |= FLAG_K;
        }
        if self.sequence.is_some() {
            f |= FLAG_S;
        }
        f
    }

    /// Bytes `emit` writes: 4 to 16.
    pub fn header_len(&self) -> usize {
        HEADER_LEN
            + 4 * (usize::from(self.checksum)
                + usize::from(self.key.is_some())
                + usize::from(self.sequence.is_some()))
    }

    /// Same as `header_len`.
    pub fn buffer_len(&self) -> usize {
        self.header_len()
    }

    /// Writes the header with a zero checksum; call
    /// `Packet::fill_checksum` once the payload is in place.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, packet: &mut Packet<&mut T>) {
        packet.set_flags_word(self.flags_word());
        packet.set_protocol(self.protocol);
        if self.checksum {
            // Checksum and reserved1 both zero.
            set_u32(packet.buffer.as_mut(), field::OPTIONS, 0);
        }
        if let Some(key) = self.key {
            packet.set_key(key);
        }
        if let Some(seq) = self.sequence {
            packet.set_sequence(seq);
        }
    }
}

impl fmt::Display for GreRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "gre proto={}", self.protocol)?;
        if self.checksum {
            f.write_str(" csum")?;
        }
        if let Some(key) = self.key {
            write!(f, " key=0x{key:08x}")?;
        }
        if let Some(seq) = self.sequence {
            write!(f, " seq={seq}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    use crate::test_vectors::hex;

    // Vectors from tests/vectors/gen_tunnels.py (scapy). tshark 4.0 on
    // tunnels.pcap showed: gre_cks flags_and_version 0xb000, proto 0x0800,
    // checksum 0x43cf (status Good), key 0x01020304, sequence 42, inner ICMP
    // echo; gre_plain 0x0000 / 0x6558; gre_udp (UDP 4754, dissected as GRE
    // natively: eth:ip:udp:gre:ip:icmp) 0x2000 / 0x0800 / key 0x00abcdef.
    const CKS: &str = include_str!("../tests/vectors/tunnel_gre_cks.hex");
    const PLAIN: &str = include_str!("../tests/vectors/tunnel_gre_plain.hex");
    const UDP: &str = include_str!("../tests/vectors/tunnel_gre_udp.hex");

    fn roundtrip(bytes: &[u8], repr: &GreRepr) {
        let mut out = bytes.to_vec();
        let hl = repr.header_len();
        out[..hl].fill(0xa5);
        repr.emit(&mut Packet::new_unchecked(&mut out[..]));
        let mut p = Packet::new_unchecked(&mut out[..]);
        p.fill_checksum();
        assert_eq!(out, bytes);
    }

    #[test]
    fn checksum_key_sequence() {
        let bytes = hex(CKS);
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.flags_word(), 0xb000);
        assert!(p.checksum_present() && p.key_present() && p.sequence_present());
        assert!(!p.routing_present());
        assert_eq!(p.version(), 0);
        assert_eq!(p.protocol(), EtherType::Ipv4);
        assert_eq!(p.checksum(), Some(0x43cf));
        assert_eq!(p.reserved1(), Some(0));
        assert_eq!(p.key(), Some(0x0102_0304));
        assert_eq!(p.sequence(), Some(42));
        assert_eq!(p.header_len(), 16);
        assert_eq!(p.payload()[0], 0x45);
        assert!(p.verify_checksum());
        let repr = GreRepr::parse(&p).unwrap();
        assert_eq!(
            repr,
            GreRepr {
                protocol: EtherType::Ipv4,
                checksum: true,
                key: Some(0x0102_0304),
                sequence: Some(42)
            }
        );
        assert_eq!(
            repr.to_string(),
            "gre proto=0x0800 csum key=0x01020304 seq=42"
        );
        roundtrip(&bytes, &repr);

        let mut bad = bytes.clone();
        *bad.last_mut().unwrap() ^= 1;
        assert!(!Packet::new_checked(&bad[..]).unwrap().verify_checksum());
    }

    #[test]
    fn plain_and_udp() {
        let bytes = hex(PLAIN);
        let p = Packet::new_checked(&bytes[..]).unwrap();
        let repr = GreRepr::parse(&p).unwrap();
        assert_eq!(
            repr,
            GreRepr {
                protocol: EtherType::TransparentEthernet,
                checksum: false,
                key: None,
                sequence: None
            }
        );
        assert_eq!(p.header_len(), 4);
        assert_eq!(p.checksum(), None);
        assert!(p.verify_checksum());
        roundtrip(&bytes, &repr);

        let bytes = hex(UDP);
        let p = Packet::new_checked(&bytes[..]).unwrap();
        let repr = GreRepr::parse(&p).unwrap();
        assert_eq!(repr.key, Some(0x00ab_cdef));
        assert_eq!(repr.sequence, None);
        assert_eq!(p.header_len(), 8);
        roundtrip(&bytes, &repr);
    }

    #[test]
    fn truncation() {
        let bytes = hex(CKS);
        for len in 0..16 {
            assert_eq!(
                Packet::new_checked(&bytes[..len]).err(),
                Some(Error::Truncated)
            );
        }
        assert!(Packet::new_checked(&bytes[..16]).is_ok());
    }

    #[test]
    fn rejects_version_routing_reserved() {
        let mut b = hex(PLAIN);
        b[1] = 0x01; // version 1 (PPTP)
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(GreRepr::parse(&p), Err(Error::BadVersion));
        b[1] = 0;
        b[0] = 0x40; // R
        assert_eq!(
            GreRepr::parse(&Packet::new_checked(&b[..]).unwrap()),
            Err(Error::Unsupported)
        );
        b[0] = 0x08; // strict source route
        assert_eq!(
            GreRepr::parse(&Packet::new_checked(&b[..]).unwrap()),
            Err(Error::Malformed)
        );
        b[0] = 0;
        b[1] = 0x80; // reserved flag bits
        assert_eq!(
            GreRepr::parse(&Packet::new_checked(&b[..]).unwrap()),
            Err(Error::Malformed)
        );
    }

    fn arb_repr() -> impl Strategy<Value = GreRepr> {
        (
            any::<u16>(),
            any::<bool>(),
            any::<Option<u32>>(),
            any::<Option<u32>>(),
        )
            .prop_map(|(p, checksum, key, sequence)| GreRepr {
                protocol: EtherType::from(p),
                checksum,
                key,
                sequence,
            })
    }

    proptest! {
        #[test]
        fn prop_roundtrip(repr in arb_repr(), payload in proptest::collection::vec(any::<u8>(), 0..64)) {
            let mut buf = vec![0u8; repr.buffer_len() + payload.len()];
            buf[repr.header_len()..].copy_from_slice(&payload);
            repr.emit(&mut Packet::new_unchecked(&mut buf[..]));
            Packet::new_unchecked(&mut buf[..]).fill_checksum();
            let p = Packet::new_checked(&buf[..]).unwrap();
            prop_assert!(p.verify_checksum());
            prop_assert_eq!(p.payload(), &payload[..]);
            prop_assert_eq!(GreRepr::parse(&p).unwrap(), repr);
        }

        #[test]
        fn prop_no_panic(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            if let Ok(p) = Packet::new_checked(&bytes[..]) {
                let _ = (p.flags_word(), p.protocol(), p.checksum(), p.reserved1(), p.key(),
                         p.sequence(), p.header_len(), p.payload(), p.verify_checksum(),
                         p.version(), p.reserved0());
                let _ = GreRepr::parse(&p);
            }
        }
    }
}
