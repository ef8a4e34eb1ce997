//! VXLAN (RFC 7348) with the extensions Linux implements: remote checksum
//! offload (draft-herbert-vxlan-rco, `VXLAN_HF_RCO`), group based policy
//! (draft-smith-vxlan-group-policy, `VXLAN_HF_GBP`) and VXLAN-GPE
//! (draft-ietf-nvo3-vxlan-gpe).
//!
//! The extensions reuse the same reserved bits, so the header alone does not
//! say which one applies: GBP's policy ID and GPE's next protocol are both
//! byte 3, GBP's G bit is a reserved bit in GPE. Like a Linux VXLAN device
//! (`VXLAN_F_GBP`, `VXLAN_F_GPE`, `VXLAN_F_REMCSUM_RX`), the receiver decides
//! by configuration: `Packet` gives raw accessors for every bit and
//! `VxlanRepr::parse` takes an [`Extensions`] saying how to read them.
//!
//! Bits left over after that interpretation make `parse` fail, as Linux's
//! `vxlan_rcv` drops packets with unparsed flags. RFC 7348 says to ignore
//! reserved bits, but ignoring RCO is exactly what breaks inner checksums
//! (VPP), so an unknown bit is `Unsupported` rather than silently dropped on
//! the floor.

use core::fmt;

pub use crate::gue::RemoteChecksum;
use crate::{get_u16, get_u32, set_u32, Error, Result};

/// Field offsets in the header, public for the dataplane's fast paths,
/// which read and write them in place where a view would cost a check.
pub mod field {
    use core::ops::Range;

    pub const FLAGS: usize = 0;
    pub const FLAGS2: usize = 1;
    pub const GBP_POLICY: Range<usize> = 2..4;
    pub const GPE_NEXT: usize = 3;
    pub const VNI: Range<usize> = 4..7;
    pub const RESERVED2: usize = 7;
}

/// The VXLAN header is always 8 bytes.
pub const HEADER_LEN: usize = 8;

/// I: VNI valid (byte 0). RFC 7348 §5: must be 1.
pub const FLAG_I: u8 = 0x08;
/// G: group policy ID present (byte 0, GBP).
pub const FLAG_G: u8 = 0x80;
/// GPE version bits (byte 0).
pub const GPE_VER_MASK: u8 = 0x30;
/// P: next protocol present (byte 0, GPE).
pub const FLAG_P: u8 = 0x04;
/// B: BUM traffic (byte 0, GPE draft; not implemented).
pub const FLAG_B: u8 = 0x02;
/// O: OAM packet (byte 0, GPE).
pub const FLAG_O: u8 = 0x01;
/// RCO: remote checksum offload (byte 1; `VXLAN_HF_RCO` = bit 21 of the
/// first word).
pub const FLAG_RCO: u8 = 0x20;
/// D: don't learn (byte 1, GBP).
pub const GBP_FLAG_D: u8 = 0x40;
/// A: policy applied (byte 1, GBP).
pub const GBP_FLAG_A: u8 = 0x08;
/// Byte 7 with RCO: the checksum is UDP's (offset start+6), else TCP's
/// (offset start+16) (`VXLAN_RCO_UDP`).
pub const RCO_UDP: u8 = 0x80;
/// Byte 7 with RCO: start / 2 (`VXLAN_RCO_MASK`, `VXLAN_RCO_SHIFT`).
pub const RCO_START_MASK: u8 = 0x7f;
/// The largest RCO start Linux can encode (`VXLAN_MAX_REMCSUM_START`).
pub const RCO_MAX_START: u16 = 254;

/// How to read the bits that VXLAN extensions share.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Variant {
    /// RFC 7348 only.
    #[default]
    Plain,
    /// Group based policy (G, D, A, policy ID).
    Gbp,
    /// VXLAN-GPE (version, P, O, next protocol); usually UDP port 4790.
    Gpe,
}

/// What the receiving tunnel accepts; the header cannot say (module docs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Extensions {
    /// How to read G / byte 1 / bytes 2-3.
    pub variant: Variant,
    /// Accept the RCO bit and read byte 7 as its start/offset.
    pub rco: bool,
}

impl Extensions {
    /// RFC 7348 only.
    pub const PLAIN: Extensions = Extensions {
        variant: Variant::Plain,
        rco: false,
    };
    /// Plain VXLAN with RCO receive enabled (Linux `remcsumrx`).
    pub const RCO: Extensions = Extensions {
        variant: Variant::Plain,
        rco: true,
    };
    /// GBP.
    pub const GBP: Extensions = Extensions {
        variant: Variant::Gbp,
        rco: false,
    };
    /// GPE.
    pub const GPE: Extensions = Extensions {
        variant: Variant::Gpe,
        rco: false,
    };
}

/// Remote checksum offload as VXLAN encodes it: start is even and at most
/// 254, and the offset is implied by the transport (draft-herbert-vxlan-rco).
/// Both count from the VXLAN payload (the inner Ethernet header).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VxlanRco {
    start: u16,
    udp: bool,
}

impl VxlanRco {
    /// `None` if `start` is odd or above 254: VXLAN cannot encode it.
    pub const fn new(start: u16, udp: bool) -> Option<VxlanRco> {
        if start & 1 != 0 || start > RCO_MAX_START {
            return None;
        }
        Some(VxlanRco { start, udp })
    }

    fn from_byte(b: u8) -> VxlanRco {
        VxlanRco {
            start: u16::from(b & RCO_START_MASK) << 1,
            udp: b & RCO_UDP != 0,
        }
    }

    fn to_byte(self) -> u8 {
        (if self.udp { RCO_UDP } else { 0 }) | (self.start >> 1) as u8
    }

    /// Where the checksummed transport header starts.
    pub const fn start(self) -> u16 {
        self.start
    }

    /// Whether the checksum is UDP's (else TCP's).
    pub const fn udp(self) -> bool {
        self.udp
    }

    /// Where the checksum field is: start + 6 (UDP) or start + 16 (TCP).
    pub const fn offset(self) -> u16 {
        self.start + if self.udp { 6 } else { 16 }
    }

    /// As the encoding-independent start/offset pair.
    pub const fn remote_checksum(self) -> RemoteChecksum {
        RemoteChecksum {
            start: self.start,
            offset: self.offset(),
        }
    }
}

/// The group based policy fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VxlanGbp {
    /// Group policy ID.
    pub policy_id: u16,
    /// D: the egress VTEP must not learn the inner source address.
    pub dont_learn: bool,
    /// A: policy has already been applied.
    pub policy_applied: bool,
}

/// The VXLAN-GPE next protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GpeProtocol {
    /// 1
    Ipv4,
    /// 2
    Ipv6,
    /// 3
    Ethernet,
    /// 4, network service header.
    Nsh,
    /// Any other value.
    Unknown(u8),
}

impl From<u8> for GpeProtocol {
    fn from(v: u8) -> Self {
        match v {
            1 => GpeProtocol::Ipv4,
            2 => GpeProtocol::Ipv6,
            3 => GpeProtocol::Ethernet,
            4 => GpeProtocol::Nsh,
            other => GpeProtocol::Unknown(other),
        }
    }
}

impl From<GpeProtocol> for u8 {
    fn from(p: GpeProtocol) -> u8 {
        match p {
            GpeProtocol::Ipv4 => 1,
            GpeProtocol::Ipv6 => 2,
            GpeProtocol::Ethernet => 3,
            GpeProtocol::Nsh => 4,
            GpeProtocol::Unknown(v) => v,
        }
    }
}

/// The VXLAN-GPE fields (version is always 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VxlanGpe {
    /// What the payload is.
    pub next_protocol: GpeProtocol,
    /// O: an OAM packet.
    pub oam: bool,
}

packet_view! {
    /// A read/write view of a VXLAN header followed by its payload.
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// `Truncated` if shorter than the 8-byte header.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// The first 32-bit word (all flags, as Linux's `vx_flags`).
    #[inline]
    pub fn flags_word(&self) -> u32 {
        get_u32(self.buffer.as_ref(), 0)
    }

    /// Byte 0.
    #[inline]
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }

    /// Byte 1 (RCO bit, GBP D/A).
    #[inline]
    pub fn flags2(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS2]
    }

    /// I bit.
    #[inline]
    pub fn vni_valid(&self) -> bool {
        self.flags() & FLAG_I != 0
    }

    /// The 24-bit VNI (bytes 4-6).
    #[inline]
    pub fn vni(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::VNI.start) >> 8
    }

    /// Byte 7: reserved, or the RCO start/UDP bit when RCO is set.
    #[inline]
    pub fn reserved2(&self) -> u8 {
        self.buffer.as_ref()[field::RESERVED2]
    }

    /// Raw RCO: `Some` if the RCO bit is set, decoded from byte 7.
    #[inline]
    pub fn rco(&self) -> Option<VxlanRco> {
        (self.flags2() & FLAG_RCO != 0).then(|| VxlanRco::from_byte(self.reserved2()))
    }

    /// Raw GBP reading: `Some` if G is set.
    #[inline]
    pub fn gbp(&self) -> Option<VxlanGbp> {
        (self.flags() & FLAG_G != 0).then(|| VxlanGbp {
            policy_id: get_u16(self.buffer.as_ref(), field::GBP_POLICY.start),
            dont_learn: self.flags2() & GBP_FLAG_D != 0,
            policy_applied: self.flags2() & GBP_FLAG_A != 0,
        })
    }

    /// GPE version bits (0 is the only version).
    #[inline]
    pub fn gpe_version(&self) -> u8 {
        (self.flags() & GPE_VER_MASK) >> 4
    }

    /// Raw GPE next protocol: `Some` if P is set.
    #[inline]
    pub fn gpe_next_protocol(&self) -> Option<GpeProtocol> {
        (self.flags() & FLAG_P != 0)
            .then(|| GpeProtocol::from(self.buffer.as_ref()[field::GPE_NEXT]))
    }

    /// GPE O bit.
    #[inline]
    pub fn gpe_oam(&self) -> bool {
        self.flags() & FLAG_O != 0
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// The bytes after the header (the inner frame).
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the first 32-bit word.
    #[inline]
    pub fn set_flags_word(&mut self, value: u32) {
        set_u32(self.buffer.as_mut(), 0, value)
    }

    /// Sets the VNI, keeping byte 7.
    #[inline]
    pub fn set_vni(&mut self, vni: u32) {
        let b = self.buffer.as_mut();
        b[field::VNI].copy_from_slice(&vni.to_be_bytes()[1..]);
    }

    /// Sets byte 7.
    #[inline]
    pub fn set_reserved2(&mut self, value: u8) {
        self.buffer.as_mut()[field::RESERVED2] = value
    }

    /// The bytes after the header, mutable.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[HEADER_LEN..]
    }
}

/// The meaning of a VXLAN header. At most one of `gbp` and `gpe` is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VxlanRepr {
    /// 24-bit VXLAN network identifier.
    pub vni: u32,
    /// Remote checksum offload.
    pub rco: Option<VxlanRco>,
    /// Group based policy (only with `Variant::Gbp`, and only if G is set).
    pub gbp: Option<VxlanGbp>,
    /// GPE fields (always `Some` with `Variant::Gpe`).
    pub gpe: Option<VxlanGpe>,
}

impl VxlanRepr {
    /// Parses a checked packet as a receiver configured with `ext`.
    ///
    /// - I clear: `Malformed` (RFC 7348 §5; Linux drops it).
    /// - A flag bit `ext` does not give a meaning to: `Unsupported`.
    /// - Byte 7 non-zero without RCO, or GBP/GPE reserved bytes non-zero:
    ///   `Malformed`.
    /// - GPE version != 0: `BadVersion`; GPE without P: `Malformed` (Linux
    ///   `vxlan_parse_gpe_proto` drops it).
    /// - RCO whose checksum field lies past the payload: `BadLength`.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        packet: &Packet<&T>,
        ext: Extensions,
    ) -> Result<VxlanRepr> {
        packet.check_len()?;
        let b = packet.buffer.as_ref();
        if !packet.vni_valid() {
            return Err(Error::Malformed);
        }
        // Bits not yet given a meaning; cleared as each extension claims them.
        let mut flags = packet.flags() & !FLAG_I;
        let mut flags2 = packet.flags2();
        let mut rest = [b[2], b[3]];

        let rco = if ext.rco && flags2 & FLAG_RCO != 0 {
            flags2 &= !FLAG_RCO;
            let rco = VxlanRco::from_byte(packet.reserved2());
            if usize::from(rco.offset()) + 2 > packet.payload().len() {
                return Err(Error::BadLength);
            }
            Some(rco)
        } else {
            if packet.reserved2() != 0 && flags2 & FLAG_RCO == 0 {
                return Err(Error::Malformed);
            }
            None
        };

        let mut gbp = None;
        let mut gpe = None;
        match ext.variant {
            Variant::Plain => {}
            Variant::Gbp => {
                if flags & FLAG_G != 0 {
                    gbp = packet.gbp();
                    flags &= !FLAG_G;
                    flags2 &= !(GBP_FLAG_D | GBP_FLAG_A);
                    rest = [0, 0];
                }
            }
            Variant::Gpe => {
                if packet.gpe_version() != 0 {
                    return Err(Error::BadVersion);
                }
                let next_protocol = packet.gpe_next_protocol().ok_or(Error::Malformed)?;
                gpe = Some(VxlanGpe {
                    next_protocol,
                    oam: packet.gpe_oam(),
                });
                flags &= !(FLAG_P | FLAG_O);
                rest[1] = 0;
            }
        }
        if flags != 0 || flags2 != 0 {
            return Err(Error::Unsupported);
        }
        if rest != [0, 0] {
            return Err(Error::Malformed);
        }
        Ok(VxlanRepr {
            vni: packet.vni(),
            rco,
            gbp,
            gpe,
        })
    }

    /// The extensions a receiver needs to parse what this repr emits.
    pub fn extensions(&self) -> Extensions {
        Extensions {
            variant: if self.gpe.is_some() {
                Variant::Gpe
            } else if self.gbp.is_some() {
                Variant::Gbp
            } else {
                Variant::Plain
            },
            rco: self.rco.is_some(),
        }
    }

    /// Always 8.
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Always 8.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the 8-byte header. `vni` is truncated to 24 bits.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, packet: &mut Packet<&mut T>) {
        debug_assert!(self.gbp.is_none() || self.gpe.is_none());
        let mut w = [FLAG_I, 0, 0, 0];
        if let Some(g) = self.gbp {
            w[0] |= FLAG_G;
            if g.dont_learn {
                w[1] |= GBP_FLAG_D;
            }
            if g.policy_applied {
                w[1] |= GBP_FLAG_A;
            }
            w[2..4].copy_from_slice(&g.policy_id.to_be_bytes());
        }
        if let Some(g) = self.gpe {
            w[0] |= FLAG_P;
            if g.oam {
                w[0] |= FLAG_O;
            }
            w[3] = g.next_protocol.into();
        }
        let mut reserved2 = 0;
        if let Some(rco) = self.rco {
            w[1] |= FLAG_RCO;
            reserved2 = rco.to_byte();
        }
        packet.set_flags_word(u32::from_be_bytes(w));
        packet.set_vni(self.vni & 0x00ff_ffff);
        packet.set_reserved2(reserved2);
    }
}

impl fmt::Display for VxlanRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "vxlan vni={} flags=I", self.vni)?;
        if let Some(g) = self.gbp {
            f.write_str(",G")?;
            if g.dont_learn {
                f.write_str(",D")?;
            }
            if g.policy_applied {
                f.write_str(",A")?;
            }
        }
        if let Some(g) = self.gpe {
            f.write_str(",P")?;
            if g.oam {
                f.write_str(",O")?;
            }
        }
        if self.rco.is_some() {
            f.write_str(",RCO")?;
        }
        if let Some(g) = self.gbp {
            write!(f, " gbp={}", g.policy_id)?;
        }
        if let Some(g) = self.gpe {
            write!(f, " next={}", u8::from(g.next_protocol))?;
        }
        if let Some(r) = self.rco {
            let proto = if r.udp { "udp" } else { "tcp" };
            write!(f, " rco={proto}:{}+{}", r.start, r.offset() - r.start)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    use crate::test_vectors::hex;

    // From tests/vectors/gen_tunnels.py (scapy). tshark 4.0 on tunnels.pcap:
    // plain: vxlan.flags 0x0800, vxlan.vni 42; gbp: flags 0x8848 (G, I, D, A),
    // vxlan.gbp 4660 (0x1234), vxlan.vni 11259375 (0xabcdef).
    const PLAIN: &str = include_str!("../tests/vectors/tunnel_vxlan_plain.hex");
    const GBP: &str = include_str!("../tests/vectors/tunnel_vxlan_gbp.hex");

    fn emitted(repr: &VxlanRepr) -> [u8; 8] {
        let mut out = [0xa5u8; 8];
        repr.emit(&mut Packet::new_unchecked(&mut out[..]));
        out
    }

    #[test]
    fn plain() {
        let bytes = hex(PLAIN);
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.flags_word(), 0x0800_0000);
        assert!(p.vni_valid());
        assert_eq!(p.vni(), 42);
        assert_eq!(p.reserved2(), 0);
        assert_eq!(p.rco(), None);
        assert_eq!(p.gbp(), None);
        assert_eq!(p.payload().len(), bytes.len() - 8);
        let repr = VxlanRepr::parse(&p, Extensions::PLAIN).unwrap();
        assert_eq!(
            repr,
            VxlanRepr {
                vni: 42,
                rco: None,
                gbp: None,
                gpe: None
            }
        );
        assert_eq!(repr.to_string(), "vxlan vni=42 flags=I");
        assert_eq!(emitted(&repr), bytes[..8]);
        // The same bytes read by GBP / RCO receivers.
        assert_eq!(VxlanRepr::parse(&p, Extensions::GBP), Ok(repr));
        assert_eq!(VxlanRepr::parse(&p, Extensions::RCO), Ok(repr));
        // ...but not GPE (no P bit).
        assert_eq!(VxlanRepr::parse(&p, Extensions::GPE), Err(Error::Malformed));
    }

    #[test]
    fn gbp() {
        let bytes = hex(GBP);
        let p = Packet::new_checked(&bytes[..]).unwrap();
        let g = VxlanGbp {
            policy_id: 0x1234,
            dont_learn: true,
            policy_applied: true,
        };
        assert_eq!(p.gbp(), Some(g));
        assert_eq!(p.vni(), 0xabcdef);
        let repr = VxlanRepr::parse(&p, Extensions::GBP).unwrap();
        assert_eq!(
            repr,
            VxlanRepr {
                vni: 0xabcdef,
                rco: None,
                gbp: Some(g),
                gpe: None
            }
        );
        assert_eq!(
            repr.to_string(),
            "vxlan vni=11259375 flags=I,G,D,A gbp=4660"
        );
        assert_eq!(emitted(&repr), bytes[..8]);
        // A plain receiver does not know G.
        assert_eq!(
            VxlanRepr::parse(&p, Extensions::PLAIN),
            Err(Error::Unsupported)
        );
    }

    #[test]
    fn rco_kernel_bytes() {
        // From shared/captures/kernel-vxlan-rco.pcap: VNI 42, RCO, TCP,
        // start 34 (14 Ethernet + 20 IPv4) so offset 50.
        let mut bytes = hex("0820000000002a11");
        bytes.resize(8 + 64, 0);
        let p = Packet::new_checked(&bytes[..]).unwrap();
        let rco = p.rco().unwrap();
        assert_eq!((rco.start(), rco.udp(), rco.offset()), (34, false, 50));
        assert_eq!(rco.remote_checksum(), RemoteChecksum::tcp(34));
        assert_eq!(p.vni(), 42);
        let repr = VxlanRepr::parse(&p, Extensions::RCO).unwrap();
        assert_eq!(repr.rco, VxlanRco::new(34, false));
        assert_eq!(repr.to_string(), "vxlan vni=42 flags=I,RCO rco=tcp:34+16");
        assert_eq!(emitted(&repr), bytes[..8]);
        // Receiver without RCO: unknown flag.
        assert_eq!(
            VxlanRepr::parse(&p, Extensions::PLAIN),
            Err(Error::Unsupported)
        );
        // Checksum field past the payload.
        let p = Packet::new_checked(&bytes[..8 + 51]).unwrap();
        assert_eq!(VxlanRepr::parse(&p, Extensions::RCO), Err(Error::BadLength));
        // UDP flavour: 0x80 | 21 -> start 42, offset 48.
        let udp = VxlanRco::from_byte(0x95);
        assert_eq!((udp.start(), udp.udp(), udp.offset()), (42, true, 48));
        assert_eq!(udp.to_byte(), 0x95);
        assert_eq!(VxlanRco::new(35, true), None);
        assert_eq!(VxlanRco::new(256, true), None);
    }

    #[test]
    fn gpe() {
        // GPE: ver 0, I, P, O; next protocol 4 (NSH); VNI 7.
        let bytes = hex("0d00000400000700");
        let p = Packet::new_checked(&bytes[..]).unwrap();
        let repr = VxlanRepr::parse(&p, Extensions::GPE).unwrap();
        let g = VxlanGpe {
            next_protocol: GpeProtocol::Nsh,
            oam: true,
        };
        assert_eq!(
            repr,
            VxlanRepr {
                vni: 7,
                rco: None,
                gbp: None,
                gpe: Some(g)
            }
        );
        assert_eq!(emitted(&repr), bytes[..]);
        let mut v1 = bytes.clone();
        v1[0] |= 0x10;
        let p = Packet::new_checked(&v1[..]).unwrap();
        assert_eq!(
            VxlanRepr::parse(&p, Extensions::GPE),
            Err(Error::BadVersion)
        );
    }

    #[test]
    fn rejects() {
        let mut b = hex(PLAIN);
        b[0] = 0;
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(
            VxlanRepr::parse(&p, Extensions::PLAIN),
            Err(Error::Malformed)
        );
        let mut b = hex(PLAIN);
        b[7] = 1;
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(
            VxlanRepr::parse(&p, Extensions::PLAIN),
            Err(Error::Malformed)
        );
        let mut b = hex(PLAIN);
        b[2] = 1;
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(
            VxlanRepr::parse(&p, Extensions::PLAIN),
            Err(Error::Malformed)
        );
        for len in 0..8 {
            assert_eq!(Packet::new_checked(&b[..len]).err(), Some(Error::Truncated));
        }
    }

    /// Minimal little-endian pcap reader: yields each record's bytes.
    fn pcap_records(file: &[u8]) -> impl Iterator<Item = &[u8]> {
        assert_eq!(&file[..4], &[0xd4, 0xc3, 0xb2, 0xa1], "little-endian pcap");
        let le32 = |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
        assert_eq!(le32(file, 20), 1, "linktype Ethernet");
        let mut at = 24;
        core::iter::from_fn(move || {
            if at + 16 > file.len() {
                return None;
            }
            let caplen = le32(file, at + 8) as usize;
            let rec = &file[at + 16..at + 16 + caplen];
            at += 16 + caplen;
            Some(rec)
        })
    }

    /// Walks a kernel capture to each VXLAN header; returns (packets, RCO
    /// packets, inner-TCP packets).
    fn walk(file: &[u8], rco_expected: bool) -> (usize, usize, usize) {
        let (mut n, mut n_rco, mut n_tcp) = (0, 0, 0);
        for frame in pcap_records(file) {
            assert_eq!(&frame[12..14], &[0x08, 0x00]);
            let ihl = usize::from(frame[14] & 0x0f) * 4;
            assert_eq!(ihl, 20, "outer IPv4 without options");
            assert_eq!(frame[14 + 9], 17);
            assert_eq!(u16::from_be_bytes([frame[36], frame[37]]), 4789);
            let vx = &frame[14 + ihl + 8..];
            let p = Packet::new_checked(vx).unwrap();
            let repr = VxlanRepr::parse(&p, Extensions::RCO).unwrap();
            assert_eq!(repr.vni, 42);
            let inner = p.payload();
            let inner_tcp = inner[12..14] == [0x08, 0x00] && inner[14 + 9] == 6;
            if inner_tcp && rco_expected {
                let rco = repr.rco.expect("RCO on every inner TCP packet");
                assert_eq!((rco.start(), rco.offset(), rco.udp()), (34, 50, false));
            }
            if !rco_expected {
                assert_eq!(repr.rco, None);
                assert_eq!(VxlanRepr::parse(&p, Extensions::PLAIN), Ok(repr));
            }
            n += 1;
            n_rco += usize::from(repr.rco.is_some());
            n_tcp += usize::from(inner_tcp);
        }
        (n, n_rco, n_tcp)
    }

    #[test]
    fn kernel_captures() {
        let (n, rco, tcp) = walk(
            include_bytes!("../tests/vectors/kernel-vxlan-rco.pcap"),
            true,
        );
        assert!(n > 0 && tcp > 0);
        assert!(rco >= tcp);
        let (n, rco, tcp) = walk(
            include_bytes!("../tests/vectors/kernel-vxlan-csum.pcap"),
            false,
        );
        assert!(n > 0 && tcp > 0);
        assert_eq!(rco, 0);
    }

    fn arb_repr() -> impl Strategy<Value = VxlanRepr> {
        let rco = proptest::option::of((0u16..=127, any::<bool>()))
            .prop_map(|o| o.map(|(s, udp)| VxlanRco::new(s * 2, udp).unwrap()));
        let gbp =
            (any::<u16>(), any::<bool>(), any::<bool>()).prop_map(|(policy_id, d, a)| VxlanGbp {
                policy_id,
                dont_learn: d,
                policy_applied: a,
            });
        let gpe = (any::<u8>(), any::<bool>()).prop_map(|(p, oam)| VxlanGpe {
            next_protocol: GpeProtocol::from(p),
            oam,
        });
        let ext = prop_oneof![
            Just((None, None)),
            gbp.prop_map(|g| (Some(g), None)),
            gpe.prop_map(|g| (None, Some(g))),
        ];
        (0u32..1 << 24, rco, ext).prop_map(|(vni, rco, (gbp, gpe))| VxlanRepr {
            vni,
            rco,
            gbp,
            gpe,
        })
    }

    proptest! {
        #[test]
        fn prop_roundtrip(repr in arb_repr()) {
            let mut buf = [0u8; 8 + 272];
            repr.emit(&mut Packet::new_unchecked(&mut buf[..]));
            let p = Packet::new_checked(&buf[..]).unwrap();
            prop_assert_eq!(VxlanRepr::parse(&p, repr.extensions()), Ok(repr));
        }

        #[test]
        fn prop_no_panic(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            if let Ok(p) = Packet::new_checked(&bytes[..]) {
                let _ = (p.flags_word(), p.vni(), p.rco(), p.gbp(), p.gpe_version(),
                         p.gpe_next_protocol(), p.gpe_oam(), p.payload(), p.reserved2());
                for ext in [Extensions::PLAIN, Extensions::RCO, Extensions::GBP, Extensions::GPE,
                            Extensions { variant: Variant::Gpe, rco: true }] {
                    let _ = VxlanRepr::parse(&p, ext);
                }
            }
        }
    }
}
