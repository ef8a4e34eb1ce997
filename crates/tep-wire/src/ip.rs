//! IP protocol numbers (IANA "Assigned Internet Protocol Numbers"), shared by
//! IPv4, IPv6 next-header fields, GUE and FOU.

use core::fmt;

/// An IP protocol / IPv6 next-header number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IpProtocol {
    /// IPv6 hop-by-hop options (0).
    HopByHop,
    /// ICMP for IPv4 (1).
    Icmp,
    /// IPv4 encapsulated (4): IPIP.
    Ipv4,
    /// TCP (6).
    Tcp,
    /// UDP (17).
    Udp,
    /// IPv6 encapsulated (41): "SIT".
    Ipv6,
    /// IPv6 routing header (43).
    Ipv6Route,
    /// IPv6 fragment header (44).
    Ipv6Frag,
    /// GRE (47).
    Gre,
    /// ESP (50).
    Esp,
    /// AH (51).
    Ah,
    /// ICMPv6 (58).
    Icmpv6,
    /// IPv6 no next header (59).
    Ipv6NoNxt,
    /// IPv6 destination options (60).
    Ipv6Opts,
    /// Mobility header (135).
    Mobility,
    /// Host identity protocol (139).
    Hip,
    /// Shim6 (140).
    Shim6,
    /// Any other number.
    Unknown(u8),
}

impl From<u8> for IpProtocol {
    fn from(v: u8) -> Self {
        match v {
            0 => IpProtocol::HopByHop,
            1 => IpProtocol::Icmp,
            4 => IpProtocol::Ipv4,
            6 => IpProtocol::Tcp,
            17 => IpProtocol::Udp,
            41 => IpProtocol::Ipv6,
            43 => IpProtocol::Ipv6Route,
            44 => IpProtocol::Ipv6Frag,
            47 => IpProtocol::Gre,
            50 => IpProtocol::Esp,
            51 => IpProtocol::Ah,
            58 => IpProtocol::Icmpv6,
            59 => IpProtocol::Ipv6NoNxt,
            60 => IpProtocol::Ipv6Opts,
            135 => IpProtocol::Mobility,
            139 => IpProtocol::Hip,
            140 => IpProtocol::Shim6,
            other => IpProtocol::Unknown(other),
        }
    }
}

impl From<IpProtocol> for u8 {
    fn from(p: IpProtocol) -> u8 {
        match p {
            IpProtocol::HopByHop => 0,
            IpProtocol::Icmp => 1,
            IpProtocol::Ipv4 => 4,
            IpProtocol::Tcp => 6,
            IpProtocol::Udp => 17,
            IpProtocol::Ipv6 => 41,
            IpProtocol::Ipv6Route => 43,
            IpProtocol::Ipv6Frag => 44,
            IpProtocol::Gre => 47,
            IpProtocol::Esp => 50,
            IpProtocol::Ah => 51,
            IpProtocol::Icmpv6 => 58,
            IpProtocol::Ipv6NoNxt => 59,
            IpProtocol::Ipv6Opts => 60,
            IpProtocol::Mobility => 135,
            IpProtocol::Hip => 139,
            IpProtocol::Shim6 => 140,
            IpProtocol::Unknown(v) => v,
        }
    }
}

impl fmt::Display for IpProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IpProtocol::Icmp => f.write_str("icmp"),
            IpProtocol::Ipv4 => f.write_str("ipip"),
            IpProtocol::Tcp => f.write_str("tcp"),
            IpProtocol::Udp => f.write_str("udp"),
            IpProtocol::Ipv6 => f.write_str("ipv6"),
            IpProtocol::Gre => f.write_str("gre"),
            IpProtocol::Icmpv6 => f.write_str("icmpv6"),
            other => write!(f, "proto-{}", u8::from(*other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_number_round_trips() {
        for v in 0..=255u8 {
            assert_eq!(u8::from(IpProtocol::from(v)), v);
        }
    }
}
