//! Ethernet II frames (IEEE 802.3 §3.2.6 type interpretation) with up to two
//! 802.1Q / 802.1ad VLAN tags (IEEE 802.1Q §9.6).

use core::fmt;
use core::ops::Range;

use crate::{get_u16, set_u16, Error, Result};

/// Field offsets in the header, public for the dataplane's fast paths,
/// which read and write them in place where a view would cost a check.
pub mod field {
    use core::ops::Range;
    pub const DESTINATION: Range<usize> = 0..6;
    pub const SOURCE: Range<usize> = 6..12;
    /// The outer EtherType, or the TPID of the first tag.
    pub const ETHERTYPE: Range<usize> = 12..14;
}

/// Length of an untagged Ethernet II header.
pub const HEADER_LEN: usize = 14;
/// Length of one VLAN tag (TPID + TCI).
pub const TAG_LEN: usize = 4;
/// How many stacked tags the view parses (802.1ad S-tag + C-tag).
pub const MAX_TAGS: usize = 2;

/// A 48-bit MAC address.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EthernetAddress(pub [u8; 6]);

impl EthernetAddress {
    /// ff:ff:ff:ff:ff:ff
    pub const BROADCAST: EthernetAddress = EthernetAddress([0xff; 6]);

    /// The address in `data[..6]`. Panics if `data` is shorter.
    pub fn from_bytes(data: &[u8]) -> EthernetAddress {
        let mut a = [0; 6];
        a.copy_from_slice(&data[..6]);
        EthernetAddress(a)
    }

    /// The six bytes.
    pub const fn as_bytes(&self) -> &[u8; 6] {
        &self.0
    }

    /// The I/G bit (first bit on the wire) is set.
    pub const fn is_multicast(&self) -> bool {
        self.0[0] & 0x01 != 0
    }

    /// All ones.
    pub fn is_broadcast(&self) -> bool {
        *self == Self::BROADCAST
    }

    /// Neither multicast nor broadcast.
    pub const fn is_unicast(&self) -> bool {
        !self.is_multicast()
    }
}

impl fmt::Display for EthernetAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = &self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

/// Whether an EtherType is a tag protocol identifier this view steps over.
#[inline]
fn is_tpid(v: u16) -> bool {
    v == 0x8100 || v == 0x88a8
}

/// One VLAN tag: its TPID and the tag control information.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct VlanTag {
    /// `EtherType::Vlan` (C-tag, 0x8100) or `EtherType::QinQ` (S-tag, 0x88a8).
    pub tpid: EtherType,
    /// The 16-bit TCI: PCP (3 bits), DEI (1 bit), VID (12 bits).
    pub tci: u16,
}

impl VlanTag {
    /// A C-tag (0x8100) with the given fields; the VID is masked to 12 bits.
    pub const fn new(pcp: u8, dei: bool, vid: u16) -> VlanTag {
        VlanTag {
            tpid: EtherType::Vlan,
            tci: ((pcp as u16 & 0x7) << 13) | ((dei as u16) << 12) | (vid & 0x0fff),
        }
    }

    /// Priority code point (802.1p class).
    pub const fn pcp(&self) -> u8 {
        (self.tci >> 13) as u8
    }

    /// Drop eligible indicator.
    pub const fn dei(&self) -> bool {
        self.tci & 0x1000 != 0
    }

    /// VLAN identifier.
    pub const fn vid(&self) -> u16 {
        self.tci & 0x0fff
    }
}

impl fmt::Display for VlanTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.tpid == EtherType::QinQ {
            "s-vlan"
        } else {
            "vlan"
        };
        write!(f, "{kind} {} pcp {}", self.vid(), self.pcp())?;
        if self.dei() {
            f.write_str(" dei")?;
        }
        Ok(())
    }
}

packet_view! {
    /// A read/write view of an Ethernet II frame.
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Checks that the base header and every tag it announces (up to
    /// [`MAX_TAGS`]) fit the buffer.
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        let mut need = HEADER_LEN;
        for _ in 0..MAX_TAGS {
            if b.len() < need {
                return Err(Error::Truncated);
            }
            if !is_tpid(get_u16(b, need - 2)) {
                return Ok(());
            }
            need += TAG_LEN;
        }
        if b.len() < need {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Destination MAC.
    #[inline]
    pub fn dst_addr(&self) -> EthernetAddress {
        EthernetAddress::from_bytes(&self.buffer.as_ref()[field::DESTINATION])
    }

    /// Source MAC.
    #[inline]
    pub fn src_addr(&self) -> EthernetAddress {
        EthernetAddress::from_bytes(&self.buffer.as_ref()[field::SOURCE])
    }

    /// The EtherType at bytes 12–13: the TPID of the first tag when tagged.
    #[inline]
    pub fn outer_ethertype(&self) -> EtherType {
        get_u16(self.buffer.as_ref(), field::ETHERTYPE.start).into()
    }

    /// Number of VLAN tags (0..=[`MAX_TAGS`]).
    #[inline]
    pub fn tag_count(&self) -> usize {
        let b = self.buffer.as_ref();
        let mut n = 0;
        while n < MAX_TAGS && is_tpid(get_u16(b, field::ETHERTYPE.start + n * TAG_LEN)) {
            n += 1;
        }
        n
    }

    /// Tag `i` (0 = outermost), if present.
    #[inline]
    pub fn vlan_tag(&self, i: usize) -> Option<VlanTag> {
        if i >= self.tag_count() {
            return None;
        }
        let b = self.buffer.as_ref();
        let at = field::ETHERTYPE.start + i * TAG_LEN;
        Some(VlanTag {
            tpid: get_u16(b, at).into(),
            tci: get_u16(b, at + 2),
        })
    }

    /// The EtherType of the payload, after the tags. A third tag is not
    /// stepped over: it shows here as `Vlan`/`QinQ`.
    #[inline]
    pub fn ethertype(&self) -> EtherType {
        get_u16(self.buffer.as_ref(), self.ethertype_range().start).into()
    }

    fn ethertype_range(&self) -> Range<usize> {
        let at = field::ETHERTYPE.start + self.tag_count() * TAG_LEN;
        at..at + 2
    }

    /// 14, 18 or 22.
    #[inline]
    pub fn header_len(&self) -> usize {
        HEADER_LEN + self.tag_count() * TAG_LEN
    }

    /// The bytes after the header (and any padding up to the buffer end).
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the destination MAC.
    #[inline]
    pub fn set_dst_addr(&mut self, a: EthernetAddress) {
        self.buffer.as_mut()[field::DESTINATION].copy_from_slice(&a.0);
    }

    /// Sets the source MAC.
    #[inline]
    pub fn set_src_addr(&mut self, a: EthernetAddress) {
        self.buffer.as_mut()[field::SOURCE].copy_from_slice(&a.0);
    }

    /// Sets bytes 12–13 (the first TPID when tagging).
    #[inline]
    pub fn set_outer_ethertype(&mut self, t: EtherType) {
        set_u16(self.buffer.as_mut(), field::ETHERTYPE.start, t.into());
    }

    /// Writes tag `i` at its place (bytes 12 + 4i). The caller writes the
    /// tags outermost first, then [`Packet::set_ethertype`].
    #[inline]
    pub fn set_vlan_tag(&mut self, i: usize, tag: VlanTag) {
        let at = field::ETHERTYPE.start + i * TAG_LEN;
        let b = self.buffer.as_mut();
        set_u16(b, at, tag.tpid.into());
        set_u16(b, at + 2, tag.tci);
    }

    /// Sets the payload EtherType, after the tags already in the buffer.
    #[inline]
    pub fn set_ethertype(&mut self, t: EtherType) {
        let at = self.ethertype_range().start;
        set_u16(self.buffer.as_mut(), at, t.into());
    }

    /// The bytes after the header, writable.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let at = self.header_len();
        &mut self.buffer.as_mut()[at..]
    }
}

/// The fields of an Ethernet II header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EthernetRepr {
    /// Source MAC.
    pub src_addr: EthernetAddress,
    /// Destination MAC.
    pub dst_addr: EthernetAddress,
    /// Outermost tag (the only one when singly tagged).
    pub outer_tag: Option<VlanTag>,
    /// Second tag (QinQ); only meaningful with `outer_tag`.
    pub inner_tag: Option<VlanTag>,
    /// The payload EtherType (never a TPID).
    pub ethertype: EtherType,
}

impl EthernetRepr {
    /// Parses a checked frame. More than [`MAX_TAGS`] tags is `Unsupported`.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<EthernetRepr> {
        packet.check_len()?;
        let ethertype = packet.ethertype();
        if matches!(ethertype, EtherType::Vlan | EtherType::QinQ) {
            return Err(Error::Unsupported);
        }
        Ok(EthernetRepr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            outer_tag: packet.vlan_tag(0),
            inner_tag: packet.vlan_tag(1),
            ethertype,
        })
    }

    /// Bytes [`EthernetRepr::emit`] writes: 14, 18 or 22.
    pub fn header_len(&self) -> usize {
        HEADER_LEN
            + TAG_LEN * (self.outer_tag.is_some() as usize + self.inner_tag.is_some() as usize)
    }

    /// Same as [`EthernetRepr::header_len`].
    pub fn buffer_len(&self) -> usize {
        self.header_len()
    }

    /// Writes the header. Tags go outermost first; an `inner_tag` without
    /// an `outer_tag` is written as the only tag.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_dst_addr(self.dst_addr);
        packet.set_src_addr(self.src_addr);
        let b = packet.buffer.as_mut();
        let mut at = field::ETHERTYPE.start;
        for tag in [self.outer_tag, self.inner_tag].into_iter().flatten() {
            set_u16(b, at, tag.tpid.into());
            set_u16(b, at + 2, tag.tci);
            at += TAG_LEN;
        }
        set_u16(b, at, self.ethertype.into());
    }
}

impl fmt::Display for EthernetRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "eth {} > {}", self.src_addr, self.dst_addr)?;
        for tag in [self.outer_tag, self.inner_tag].into_iter().flatten() {
            write!(f, " {tag}")?;
        }
        write!(f, " type {}", self.ethertype)
    }
}

/// An EtherType (also the GRE protocol type and the Geneve protocol type).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EtherType {
    /// 0x0800
    Ipv4,
    /// 0x0806
    Arp,
    /// 0x86dd
    Ipv6,
    /// 0x8100, an 802.1Q tag follows.
    Vlan,
    /// 0x88a8, an 802.1ad service tag follows.
    QinQ,
    /// 0x6558, transparent Ethernet bridging (GRE/Geneve carrying Ethernet).
    TransparentEthernet,
    /// 0x8847, MPLS unicast.
    Mpls,
    /// Any other value.
    Unknown(u16),
}

impl From<u16> for EtherType {
    fn from(v: u16) -> Self {
        match v {
            0x0800 => EtherType::Ipv4,
            0x0806 => EtherType::Arp,
            0x86dd => EtherType::Ipv6,
            0x8100 => EtherType::Vlan,
            0x88a8 => EtherType::QinQ,
            0x6558 => EtherType::TransparentEthernet,
            0x8847 => EtherType::Mpls,
            other => EtherType::Unknown(other),
        }
    }
}

impl From<EtherType> for u16 {
    fn from(t: EtherType) -> u16 {
        match t {
            EtherType::Ipv4 => 0x0800,
            EtherType::Arp => 0x0806,
            EtherType::Ipv6 => 0x86dd,
            EtherType::Vlan => 0x8100,
            EtherType::QinQ => 0x88a8,
            EtherType::TransparentEthernet => 0x6558,
            EtherType::Mpls => 0x8847,
            EtherType::Unknown(v) => v,
        }
    }
}

impl fmt::Display for EtherType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0x{:04x}", u16::from(*self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    use crate::test_vectors::hex;

    /// First packet of kernel-vxlan-csum.pcap (Linux VXLAN), outer header.
    const KERNEL_VXLAN: &str = "ae8df6a408e5027ea0b0bef708004500007e5c9e00004011083f0ac800010ac80002e3c912b5006a160e0800000000002a00333300000016e6cfd361dcee86dd600000000024000100000000000000000000000000000000ff0200000000000000000000000000163a0005020000";

    #[test]
    fn kernel_vxlan_outer_and_inner() {
        let bytes = hex(KERNEL_VXLAN);
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.dst_addr().to_string(), "ae:8d:f6:a4:08:e5");
        assert_eq!(p.src_addr().to_string(), "02:7e:a0:b0:be:f7");
        assert_eq!(p.ethertype(), EtherType::Ipv4);
        assert_eq!(p.tag_count(), 0);
        assert_eq!(p.header_len(), 14);
        assert_eq!(p.vlan_tag(0), None);
        // Inner frame after IPv4 (20) + UDP (8) + VXLAN (8).
        let inner = Packet::new_checked(&p.payload()[36..]).unwrap();
        let r = EthernetRepr::parse(&inner).unwrap();
        assert_eq!(r.dst_addr.to_string(), "33:33:00:00:00:16");
        assert!(r.dst_addr.is_multicast());
        assert_eq!(r.ethertype, EtherType::Ipv6);
        assert_eq!(
            r.to_string(),
            "eth e6:cf:d3:61:dc:ee > 33:33:00:00:00:16 type 0x86dd"
        );
    }

    #[test]
    fn vlan_vector() {
        // scapy: Dot1Q(prio=5, id=1, vlan=100); tshark shows vlan.priority 5,
        // vlan.dei 1, vlan.id 100, vlan.etype 0x86dd.
        let bytes = hex(include_str!(
            "../tests/vectors/base_eth_vlan_ipv6_hbh_frag_udp.hex"
        ));
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.outer_ethertype(), EtherType::Vlan);
        assert_eq!(p.tag_count(), 1);
        assert_eq!(p.header_len(), 18);
        let tag = p.vlan_tag(0).unwrap();
        assert_eq!((tag.pcp(), tag.dei(), tag.vid()), (5, true, 100));
        assert_eq!(tag, VlanTag::new(5, true, 100));
        assert_eq!(p.ethertype(), EtherType::Ipv6);
        assert_eq!(p.payload()[0] >> 4, 6);
        let r = EthernetRepr::parse(&p).unwrap();
        assert_eq!(r.outer_tag, Some(tag));
        assert_eq!(r.inner_tag, None);
        assert_eq!(r.src_addr, EthernetAddress([2, 0, 0, 0, 0, 1]));
        let mut out = [0u8; 18];
        r.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out[..], bytes[..18]);
        assert_eq!(
            r.to_string(),
            "eth 02:00:00:00:00:01 > 02:00:00:00:00:02 vlan 100 pcp 5 dei type 0x86dd"
        );
    }

    #[test]
    fn untagged_vector_emit() {
        let bytes = hex(include_str!("../tests/vectors/base_eth_ipv4opt_tcpopt.hex"));
        let p = Packet::new_checked(&bytes[..]).unwrap();
        let r = EthernetRepr::parse(&p).unwrap();
        assert_eq!(r.ethertype, EtherType::Ipv4);
        assert_eq!(r.header_len(), 14);
        let mut out = [0u8; 14];
        r.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out[..], bytes[..14]);
    }

    #[test]
    fn qinq_and_triple_tag() {
        let mut b = [0u8; 26];
        b[12..14].copy_from_slice(&[0x88, 0xa8]);
        b[14..16].copy_from_slice(&[0x00, 0x0a]);
        b[16..18].copy_from_slice(&[0x81, 0x00]);
        b[18..20].copy_from_slice(&[0x20, 0x14]);
        b[20..22].copy_from_slice(&[0x08, 0x00]);
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.header_len(), 22);
        let r = EthernetRepr::parse(&p).unwrap();
        assert_eq!(r.outer_tag.unwrap().tpid, EtherType::QinQ);
        assert_eq!(r.outer_tag.unwrap().vid(), 10);
        assert_eq!(r.inner_tag.unwrap().vid(), 20);
        assert_eq!(r.inner_tag.unwrap().pcp(), 1);
        assert_eq!(r.ethertype, EtherType::Ipv4);
        assert_eq!(Packet::new_checked(&b[..21]).err(), Some(Error::Truncated));
        // A third tag is not stepped over.
        b[20..22].copy_from_slice(&[0x81, 0x00]);
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.ethertype(), EtherType::Vlan);
        assert_eq!(EthernetRepr::parse(&p), Err(Error::Unsupported));
    }

    #[test]
    fn truncation_is_an_error() {
        for name in [
            include_str!("../tests/vectors/base_eth_vlan_ipv6_hbh_frag_udp.hex"),
            include_str!("../tests/vectors/base_eth_ipv4opt_tcpopt.hex"),
        ] {
            let bytes = hex(name);
            let hl = Packet::new_checked(&bytes[..]).unwrap().header_len();
            for n in 0..hl {
                assert_eq!(
                    Packet::new_checked(&bytes[..n]).err(),
                    Some(Error::Truncated)
                );
            }
        }
    }

    fn tag() -> impl Strategy<Value = VlanTag> {
        (any::<bool>(), any::<u16>()).prop_map(|(s, tci)| VlanTag {
            tpid: if s { EtherType::QinQ } else { EtherType::Vlan },
            tci,
        })
    }

    proptest! {
        #[test]
        fn round_trip(
            src in any::<[u8; 6]>(),
            dst in any::<[u8; 6]>(),
            tags in proptest::option::of((tag(), proptest::option::of(tag()))),
            et in any::<u16>().prop_filter("not a tpid", |v| !is_tpid(*v)),
        ) {
            let (outer_tag, inner_tag) = match tags {
                Some((o, i)) => (Some(o), i),
                None => (None, None),
            };
            let r = EthernetRepr {
                src_addr: EthernetAddress(src),
                dst_addr: EthernetAddress(dst),
                outer_tag,
                inner_tag,
                ethertype: et.into(),
            };
            let mut buf = [0u8; 22];
            r.emit(&mut Packet::new_unchecked(&mut buf[..r.buffer_len()]));
            let p = Packet::new_checked(&buf[..r.buffer_len()]).unwrap();
            prop_assert_eq!(p.header_len(), r.header_len());
            prop_assert_eq!(EthernetRepr::parse(&p).unwrap(), r);
        }

        #[test]
        fn arbitrary_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..40)) {
            if let Ok(p) = Packet::new_checked(&b[..]) {
                let _ = (p.dst_addr(), p.src_addr(), p.outer_ethertype(), p.ethertype());
                let _ = (p.vlan_tag(0), p.vlan_tag(1), p.vlan_tag(2), p.payload().len());
                let _ = EthernetRepr::parse(&p);
            }
        }
    }
}
