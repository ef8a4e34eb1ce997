//! Ethernet II frames with an optional 802.1Q tag.
//!
//! TODO(helper A): the Packet view and Repr. Keep `EtherType` as it is.

use core::fmt;

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
