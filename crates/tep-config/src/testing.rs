//! What the config's tests share: texts to parse and values to compare.

use crate::Config;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use tep_dataplane::config::{ConfigError, IpPrefix};
use tep_wire::ethernet::EthernetAddress;

pub(super) const EXAMPLE: &str = include_str!("../../../examples/tep.toml");

pub(super) fn err(text: &str) -> ConfigError {
    match Config::parse(text) {
        Ok(c) => panic!("expected an error, parsed {c:#?}"),
        Err(e) => e,
    }
}

pub(super) fn ok(text: &str) -> Config {
    Config::parse(text).unwrap_or_else(|e| panic!("{e}\n--- in ---\n{text}"))
}

/// One `[[tunnel]]` named `name` of `kind` over IPv4 with `extra` lines.
pub(super) fn tunnel(name: &str, kind: &str, extra: &str) -> String {
    let id = match kind {
        "vxlan" | "geneve" => "vni = 1\n",
        "gtpu" => "teid = 1\n",
        _ => "",
    };
    format!(
        "[[tunnel]]\nname = \"{name}\"\nkind = \"{kind}\"\nlocal = \"192.0.2.1\"\nremote = \"192.0.2.2\"\n{id}{extra}\n"
    )
}

pub(super) fn v4(a: [u8; 4]) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(a))
}

pub(super) fn v6(s: &str) -> IpAddr {
    IpAddr::V6(s.parse::<Ipv6Addr>().unwrap())
}

pub(super) fn mac(b: [u8; 6]) -> EthernetAddress {
    EthernetAddress(b)
}

pub(super) fn prefix(s: &str) -> IpPrefix {
    s.parse().unwrap()
}

pub(super) const OVERLAY_EXAMPLE: &str = include_str!("../../../examples/overlay.toml");

/// One `[[network]]` named `name` of `kind` on 192.0.2.1 with `extra`
/// lines.
pub(super) fn network(name: &str, kind: &str, extra: &str) -> String {
    let id = match kind {
        "vxlan" | "geneve" => "vni = 1\n",
        _ => "",
    };
    format!(
        "[[network]]\nname = \"{name}\"\nkind = \"{kind}\"\nlocal = \"192.0.2.1\"\n{id}{extra}\n"
    )
}
