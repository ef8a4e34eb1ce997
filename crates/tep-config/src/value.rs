//! Values of the TOML, typed: integers kept wide so that a range error
//! says the range, words from a list, MAC and IP addresses. Every section
//! types its keys with these.

use core::fmt;
use core::net::IpAddr;
use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use tep_dataplane::config::check_mac;
use tep_wire::ethernet::EthernetAddress;

/// Any TOML integer, kept wide so that range errors say the range.
#[derive(Clone, Copy, Debug)]
pub(super) struct Int(pub(super) i128);

impl<'de> Deserialize<'de> for Int {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Int, D::Error> {
        d.deserialize_any(IntOrNameVisitor { name_ok: false })
            .map(|v| match v {
                IntOrName::Int(i) => i,
                // Unreachable: names are refused by the visitor.
                IntOrName::Name(_) => Int(-1),
            })
    }
}

/// An integer or a word (`ttl = 64` / `ttl = "inherit"`).
#[derive(Clone, Debug)]
pub(super) enum IntOrName {
    Int(Int),
    Name(String),
}

impl<'de> Deserialize<'de> for IntOrName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<IntOrName, D::Error> {
        d.deserialize_any(IntOrNameVisitor { name_ok: true })
    }
}

struct IntOrNameVisitor {
    name_ok: bool,
}

impl<'de> Visitor<'de> for IntOrNameVisitor {
    type Value = IntOrName;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.name_ok {
            f.write_str("an integer or \"inherit\"")
        } else {
            f.write_str("an integer")
        }
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<IntOrName, E> {
        Ok(IntOrName::Int(Int(v.into())))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<IntOrName, E> {
        Ok(IntOrName::Int(Int(v.into())))
    }

    fn visit_i128<E: de::Error>(self, v: i128) -> Result<IntOrName, E> {
        Ok(IntOrName::Int(Int(v)))
    }

    fn visit_u128<E: de::Error>(self, v: u128) -> Result<IntOrName, E> {
        Ok(IntOrName::Int(Int(i128::try_from(v).unwrap_or(i128::MAX))))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<IntOrName, E> {
        if self.name_ok {
            Ok(IntOrName::Name(v.to_string()))
        } else {
            Err(E::invalid_type(de::Unexpected::Str(v), &self))
        }
    }
}

/// `v` if it is within `lo..=hi`.
pub(super) fn in_range(v: Int, lo: u32, hi: u32) -> Result<u32, String> {
    match u32::try_from(v.0) {
        Ok(x) if (lo..=hi).contains(&x) => Ok(x),
        _ => Err(format!("{} is out of range ({lo}..={hi})", v.0)),
    }
}

/// A word from a fixed list, or a message listing the list.
pub(super) fn one_of<T: Copy>(s: &str, words: &[(&str, T)]) -> Result<T, String> {
    words
        .iter()
        .find(|(w, _)| w.eq_ignore_ascii_case(s))
        .map(|(_, v)| *v)
        .ok_or_else(|| {
            let names: Vec<String> = words.iter().map(|(w, _)| format!("\"{w}\"")).collect();
            format!("\"{s}\" is not one of {}", names.join(", "))
        })
}

/// `aa:bb:cc:dd:ee:ff` or `aa-bb-cc-dd-ee-ff`, as a usable unicast
/// destination.
pub(super) fn parse_mac(s: &str) -> Result<EthernetAddress, String> {
    let m = mac_syntax(s)?;
    check_mac(m)?;
    Ok(m)
}

/// `aa:bb:cc:dd:ee:ff` or `aa-bb-cc-dd-ee-ff`, any address (what it may
/// be is the model's rule where it is used).
pub(super) fn mac_syntax(s: &str) -> Result<EthernetAddress, String> {
    let bad = || {
        format!("\"{s}\" is not a MAC address (six hex octets, like 02:00:00:00:00:01 or 02-00-00-00-00-01)")
    };
    let sep = if s.contains('-') { '-' } else { ':' };
    let mut octets = [0u8; 6];
    let mut parts = s.split(sep);
    for o in octets.iter_mut() {
        let p = parts.next().ok_or_else(bad)?;
        if p.is_empty() || p.len() > 2 || !p.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad());
        }
        *o = u8::from_str_radix(p, 16).map_err(|_| bad())?;
    }
    if parts.next().is_some() {
        return Err(bad());
    }
    Ok(EthernetAddress(octets))
}

/// An IP address, or a message naming what was given.
pub(super) fn parse_ip(s: &str) -> Result<IpAddr, String> {
    s.trim()
        .parse()
        .map_err(|_| format!("\"{s}\" is not an IP address (like 192.0.2.1 or 2001:db8::1)"))
}
