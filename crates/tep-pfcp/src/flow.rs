//! The Flow Description of an SDF Filter (TS 29.244 §8.2.5): the subset
//! of Diameter's IPFilterRule (RFC 6733 §4.3) that TS 29.244 §5.2.1A.2A
//! and TS 29.212 §5.4.2 use:
//!
//! ```text
//! permit out <protocol> from <address> [ports] to <address> [ports]
//! ```
//!
//! `protocol` is `ip` (any) or a number 0–255; an address is `any`,
//! `assigned` (the UE's: the session's UE IP Address) or an IPv4 or IPv6
//! address with an optional prefix length; ports are a comma-separated
//! list of ports and ranges `a-b`. The rule is written for the downlink
//! (`from` is the data network's side, `to` the UE's): an uplink PDR's
//! filter matches with source and destination swapped (§5.2.1A.2A), which
//! is for the user plane to do, not this parser.
//!
//! Anything else (`deny`, `in`, negated addresses `!`, options such as
//! `frag` or `tcpflags`, two address families in one rule, more than
//! [`MAX_PORT_RANGES`] port ranges a side) is refused whole with a
//! [`FlowError`]: a filter tep does not understand is never applied in
//! part.

use core::fmt;
use core::net::IpAddr;

/// Most port ranges one side of a rule lists: each range is checked per
/// packet, and SMFs send one or two (a service's port or range).
pub const MAX_PORT_RANGES: usize = 4;

/// Longest Flow Description tep reads (the IE's own length is 16 bits;
/// a rule in the subset is well under this).
pub const MAX_LEN: usize = 512;

/// A parsed Flow Description (`permit out` implied).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FlowDescription {
    /// The IP protocol number; None for `ip` (any).
    pub protocol: Option<u8>,
    /// The data network's side (`from`).
    pub from: Endpoint,
    /// The UE's side (`to`).
    pub to: Endpoint,
}

/// One side of a rule: its address and ports.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Endpoint {
    /// The address.
    pub addr: Address,
    /// Its ports (inclusive ranges); empty: any.
    pub ports: Vec<(u16, u16)>,
}

/// An address in a rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Address {
    /// `any`.
    Any,
    /// `assigned`: the UE's address.
    Assigned,
    /// An address and prefix length (32 or 128 when not written).
    Prefix(IpAddr, u8),
}

/// Why a Flow Description is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowError(pub &'static str);

impl fmt::Display for FlowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "flow description: {}", self.0)
    }
}

impl FlowDescription {
    /// Parses `text` (ASCII, as the IE carries it).
    pub fn parse(text: &[u8]) -> Result<FlowDescription, FlowError> {
        if text.len() > MAX_LEN {
            return Err(FlowError("too long"));
        }
        let text = core::str::from_utf8(text).map_err(|_| FlowError("not ASCII"))?;
        let mut w = text.split_ascii_whitespace().peekable();
        expect(w.next(), "permit", "only permit rules")?;
        expect(w.next(), "out", "only the direction out")?;
        let protocol = protocol(w.next().ok_or(FlowError("no protocol"))?)?;
        expect(w.next(), "from", "no from")?;
        let from = endpoint(&mut w, Some("to"))?;
        expect(w.next(), "to", "no to")?;
        let to = endpoint(&mut w, None)?;
        if w.next().is_some() {
            return Err(FlowError("options are not supported"));
        }
        let family = |a: Address| match a {
            Address::Prefix(ip, _) => Some(ip.is_ipv6()),
            _ => None,
        };
        if let (Some(a), Some(b)) = (family(from.addr), family(to.addr)) {
            if a != b {
                return Err(FlowError("two address families"));
            }
        }
        Ok(FlowDescription { protocol, from, to })
    }

    /// The IP family the rule is limited to: Some(true) for IPv6, None
    /// when it names no address.
    pub fn v6(&self) -> Option<bool> {
        [self.from.addr, self.to.addr].iter().find_map(|a| match a {
            Address::Prefix(ip, _) => Some(ip.is_ipv6()),
            _ => None,
        })
    }
}

/// The rule as text in the subset's canonical form (what [`parse`] reads
/// back to the same value).
///
/// [`parse`]: FlowDescription::parse
impl fmt::Display for FlowDescription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("permit out ")?;
        match self.protocol {
            Some(p) => write!(f, "{p}")?,
            None => f.write_str("ip")?,
        }
        write!(f, " from {} to {}", self.from, self.to)
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.addr {
            Address::Any => f.write_str("any")?,
            Address::Assigned => f.write_str("assigned")?,
            Address::Prefix(ip, len) => write!(f, "{ip}/{len}")?,
        }
        for (i, &(a, b)) in self.ports.iter().enumerate() {
            f.write_str(if i == 0 { " " } else { "," })?;
            if a == b {
                write!(f, "{a}")?;
            } else {
                write!(f, "{a}-{b}")?;
            }
        }
        Ok(())
    }
}

fn expect(word: Option<&str>, want: &str, err: &'static str) -> Result<(), FlowError> {
    match word {
        Some(w) if w == want => Ok(()),
        _ => Err(FlowError(err)),
    }
}

fn protocol(word: &str) -> Result<Option<u8>, FlowError> {
    if word == "ip" {
        return Ok(None);
    }
    number::<u8>(word)
        .map(Some)
        .ok_or(FlowError("protocol neither ip nor 0-255"))
}

/// A decimal number without sign or leading `+` (which `parse` takes).
fn number<T: core::str::FromStr>(word: &str) -> Option<T> {
    if word.is_empty() || word.len() > 5 || !word.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    word.parse().ok()
}

/// An address and, unless the next word is `stop` (or there is none),
/// a port list.
fn endpoint<'a>(
    w: &mut core::iter::Peekable<impl Iterator<Item = &'a str>>,
    stop: Option<&str>,
) -> Result<Endpoint, FlowError> {
    let addr = address(w.next().ok_or(FlowError("no address"))?)?;
    let ports = match w.peek() {
        Some(&p) if Some(p) != stop && p.starts_with(|c: char| c.is_ascii_digit()) => {
            w.next();
            ports(p)?
        }
        _ => Vec::new(),
    };
    Ok(Endpoint { addr, ports })
}

fn address(word: &str) -> Result<Address, FlowError> {
    match word {
        "any" => return Ok(Address::Any),
        "assigned" => return Ok(Address::Assigned),
        _ if word.starts_with('!') => return Err(FlowError("negated addresses")),
        _ => {}
    }
    let (ip, len) = match word.split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (word, None),
    };
    let ip: IpAddr = ip.parse().map_err(|_| FlowError("bad address"))?;
    let max = if ip.is_ipv6() { 128 } else { 32 };
    let len = match len {
        None => max,
        Some(l) => number::<u8>(l)
            .filter(|&l| l <= max)
            .ok_or(FlowError("bad prefix length"))?,
    };
    Ok(Address::Prefix(ip, len))
}

fn ports(word: &str) -> Result<Vec<(u16, u16)>, FlowError> {
    let mut out = Vec::new();
    for item in word.split(',') {
        if out.len() == MAX_PORT_RANGES {
            return Err(FlowError("too many port ranges"));
        }
        let (a, b) = item.split_once('-').unwrap_or((item, item));
        let port = |s: &str| number::<u16>(s).ok_or(FlowError("bad port"));
        let (a, b) = (port(a)?, port(b)?);
        if a > b {
            return Err(FlowError("port range upside down"));
        }
        out.push((a, b));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> FlowDescription {
        FlowDescription::parse(s.as_bytes()).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn prefix(s: &str, len: u8) -> Address {
        Address::Prefix(s.parse().unwrap(), len)
    }

    #[test]
    fn what_smfs_send() {
        // open5gs's and free5GC's default and dedicated flows.
        let d = ok("permit out ip from any to assigned");
        assert_eq!(d.protocol, None);
        assert_eq!(d.from.addr, Address::Any);
        assert_eq!(d.to.addr, Address::Assigned);
        assert!(d.from.ports.is_empty() && d.to.ports.is_empty());
        assert_eq!(d.v6(), None);

        let d = ok("permit out 17 from 10.0.0.0/8 5000-5010 to assigned");
        assert_eq!(d.protocol, Some(17));
        assert_eq!(d.from.addr, prefix("10.0.0.0", 8));
        assert_eq!(d.from.ports, vec![(5000, 5010)]);
        assert_eq!(d.to.addr, Address::Assigned);

        let d = ok("permit out 6 from 192.0.2.10 80,443,8000-8080 to 10.45.0.2/32 1024-65535");
        assert_eq!(d.from.addr, prefix("192.0.2.10", 32));
        assert_eq!(d.from.ports, vec![(80, 80), (443, 443), (8000, 8080)]);
        assert_eq!(d.to.addr, prefix("10.45.0.2", 32));
        assert_eq!(d.to.ports, vec![(1024, 65535)]);
        assert_eq!(d.v6(), Some(false));

        let d = ok("permit out 17 from 2001:db8::/32 to assigned 5060");
        assert_eq!(d.from.addr, prefix("2001:db8::", 32));
        assert_eq!(d.to.ports, vec![(5060, 5060)]);
        assert_eq!(d.v6(), Some(true));

        let d = ok("permit out ip from 2001:db8::1 to any");
        assert_eq!(d.from.addr, prefix("2001:db8::1", 128));
        // Extra blanks, as some SMFs pad.
        ok("  permit  out ip  from any to assigned ");
    }

    #[test]
    fn what_is_outside_the_subset_is_refused() {
        for s in [
            "",
            "deny out ip from any to assigned",
            "permit in ip from any to assigned",
            "permit out tcp from any to assigned",
            "permit out 256 from any to assigned",
            "permit out -1 from any to assigned",
            "permit out +6 from any to assigned",
            "permit out ip from !10.0.0.0/8 to assigned",
            "permit out ip from 10.0.0.0/33 to assigned",
            "permit out ip from 2001:db8::/129 to assigned",
            "permit out ip from 10.0.0.0/8 to 2001:db8::1",
            "permit out ip from any to assigned frag",
            "permit out 6 from any to assigned 80 established",
            "permit out 17 from any 1,2,3,4,5 to assigned",
            "permit out 17 from any 70000 to assigned",
            "permit out 17 from any 10-5 to assigned",
            "permit out 17 from any 5- to assigned",
            "permit out ip from any",
            "permit out ip to assigned",
            "permit out ip from 10.0.0.x to assigned",
        ] {
            assert!(FlowDescription::parse(s.as_bytes()).is_err(), "{s:?}");
        }
        assert!(FlowDescription::parse(&[0xff; 8]).is_err());
        let d = ok("permit out 6 from 10.0.0.0/8 80,8000-8080 to assigned");
        assert_eq!(
            d.to_string(),
            "permit out 6 from 10.0.0.0/8 80,8000-8080 to assigned"
        );
        assert_eq!(ok(&d.to_string()), d);
        assert!(FlowDescription::parse(&[b' '; MAX_LEN + 1]).is_err());
    }
}
