//! The rules on single values, shared by the checks of tunnels
//! ([`check`](super::check)) and of networks
//! ([`network_check`](super::network_check)).

use super::model::IpPrefix;
use crate::kind::TunnelKind;
use core::net::IpAddr;
use tep_wire::ethernet::EthernetAddress;

/// The longest tunnel name (it ends up in counter names and log lines).
pub(super) const MAX_NAME_LEN: usize = 32;

/// 1 to 32 characters from A-Z a-z 0-9 _ . - (names end up in counter
/// names and log lines).
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// `IPv4` or `IPv6`.
pub(super) fn family(a: IpAddr) -> &'static str {
    if a.is_ipv4() {
        "IPv4"
    } else {
        "IPv6"
    }
}

/// An inner destination MAC a tunnel may route: unicast, not all zeros.
pub fn check_mac(m: EthernetAddress) -> Result<(), String> {
    unicast_mac(
        m,
        "inner_macs lists unicast destinations, and multicast/broadcast frames go to every tunnel of the kind",
        "to make this the default tunnel of its kind, leave inner_macs empty",
    )
}

/// `m` is unicast and not all zeros; else why not, with the hint that
/// fits where it was given.
pub(super) fn unicast_mac(
    m: EthernetAddress,
    multicast_hint: &str,
    zero_hint: &str,
) -> Result<(), String> {
    if m.is_multicast() {
        return Err(format!(
            "{m} is a multicast address (low bit of the first octet set); {multicast_hint}"
        ));
    }
    if m.0 == [0; 6] {
        return Err(format!("{m} is not a usable address; {zero_hint}"));
    }
    Ok(())
}

/// An inner prefix `kind` can carry: a usable length, host bits zero, the
/// family fou-ipip / fou-sit carry.
pub(super) fn check_prefix(kind: TunnelKind, p: &IpPrefix) -> Result<(), String> {
    if p.len > p.max_len() {
        return Err(format!(
            "{p}: the prefix length {} is too long for {} (0..={})",
            p.len,
            family(p.addr),
            p.max_len()
        ));
    }
    let only = match kind {
        TunnelKind::FouIpip => Some(false),
        TunnelKind::FouSit => Some(true),
        _ => None,
    };
    if only.is_some_and(|v6| v6 != p.addr.is_ipv6()) {
        return Err(format!(
            "{p} is {} but {kind} carries only {} (fou-ipip: IPv4, fou-sit: IPv6; gue carries both)",
            family(p.addr),
            if p.addr.is_ipv6() { "IPv4" } else { "IPv6" }
        ));
    }
    if p.network() != p.addr {
        let fixed = IpPrefix {
            addr: p.network(),
            len: p.len,
        };
        return Err(format!("{p} has host bits set; did you mean {fixed}?"));
    }
    Ok(())
}

/// The message for a field the tunnel's kind does not use.
pub fn not_used(kind: TunnelKind, why: &str) -> String {
    format!("not used by kind {kind} ({why}); remove it")
}

/// Why `name` is not a valid tunnel name.
pub fn bad_name_message(name: &str) -> String {
    if name.is_empty() {
        "the name is empty; use 1 to 32 characters from A-Z a-z 0-9 _ . -".to_string()
    } else if name.len() > MAX_NAME_LEN {
        format!(
            "\"{name}\" is {} characters long; use at most {MAX_NAME_LEN}",
            name.len()
        )
    } else {
        format!("\"{name}\" is not a valid name; use 1 to 32 characters from A-Z a-z 0-9 _ . -")
    }
}
