//! The tunnel kinds tep speaks.

use crate::geometry::InnerLink;
use core::fmt;
use core::str::FromStr;

/// What follows a UDP header on a tunnel port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TunnelKind {
    /// VXLAN (RFC 7348).
    Vxlan,
    /// Geneve (RFC 8926).
    Geneve,
    /// GTP-U (3GPP TS 29.281).
    Gtpu,
    /// GRE-in-UDP (RFC 8086).
    GreInUdp,
    /// GUE (draft-ietf-intarea-gue), variants 0 and 1.
    Gue,
    /// FOU carrying IPv4 (IPIP).
    FouIpip,
    /// FOU carrying IPv6 ("SIT").
    FouSit,
    /// FOU carrying GRE.
    FouGre,
    /// GUE carrying GRE: a GUE data header with protocol 47, then a GRE
    /// header, then the inner IP packet — what Linux sends for a GRE
    /// tunnel with `encap gue`.
    GueGre,
}

impl TunnelKind {
    /// How many kinds there are (per-kind arrays).
    pub const COUNT: usize = 9;

    /// Every kind, in the order the docs list them.
    pub const ALL: [TunnelKind; Self::COUNT] = [
        TunnelKind::Vxlan,
        TunnelKind::Geneve,
        TunnelKind::Gtpu,
        TunnelKind::GreInUdp,
        TunnelKind::Gue,
        TunnelKind::FouIpip,
        TunnelKind::FouSit,
        TunnelKind::FouGre,
        TunnelKind::GueGre,
    ];

    /// The kind's place in [`TunnelKind::ALL`] (per-kind arrays).
    pub const fn index(self) -> usize {
        self as usize
    }

    /// The IANA / customary UDP destination port. FOU has none (Linux
    /// makes the user pick one); tep uses 5555 as the iproute2 examples do.
    pub const fn default_port(self) -> u16 {
        match self {
            TunnelKind::Vxlan => 4789,
            TunnelKind::Geneve => 6081,
            TunnelKind::Gtpu => 2152,
            TunnelKind::GreInUdp => 4754,
            TunnelKind::Gue | TunnelKind::GueGre => 6080,
            TunnelKind::FouIpip | TunnelKind::FouSit | TunnelKind::FouGre => 5555,
        }
    }

    /// Whether the tunnel carries Ethernet frames (looked up by destination
    /// MAC) rather than IP packets (looked up by destination prefix).
    pub const fn carries_ethernet(self) -> bool {
        matches!(self, TunnelKind::Vxlan | TunnelKind::Geneve)
    }

    /// What the tunnel carries: Ethernet frames or IP packets.
    pub const fn link(self) -> InnerLink {
        if self.carries_ethernet() {
            InnerLink::Ethernet
        } else {
            InnerLink::Ip
        }
    }

    /// The name used on the command line and in the config.
    pub const fn name(self) -> &'static str {
        match self {
            TunnelKind::Vxlan => "vxlan",
            TunnelKind::Geneve => "geneve",
            TunnelKind::Gtpu => "gtpu",
            TunnelKind::GreInUdp => "gre",
            TunnelKind::Gue => "gue",
            TunnelKind::FouIpip => "fou-ipip",
            TunnelKind::FouSit => "fou-sit",
            TunnelKind::FouGre => "fou-gre",
            TunnelKind::GueGre => "gue-gre",
        }
    }
}

impl fmt::Display for TunnelKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for TunnelKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        // `gre-in-udp` is accepted too: it is what RFC 8086 calls it.
        let s = if s.eq_ignore_ascii_case("gre-in-udp") {
            "gre"
        } else {
            s
        };
        let s = s.to_ascii_lowercase();
        TunnelKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = TunnelKind::ALL.iter().map(|k| k.name()).collect();
                format!("unknown tunnel kind '{s}' (one of: {})", names.join(", "))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_is_the_place_in_all_and_names_parse_back() {
        for (i, k) in TunnelKind::ALL.iter().enumerate() {
            assert_eq!(k.index(), i);
            assert_eq!(k.name().parse::<TunnelKind>(), Ok(*k));
        }
    }
}
