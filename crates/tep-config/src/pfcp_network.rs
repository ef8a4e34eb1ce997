//! `[[pfcp.network]]`: the data networks (DNNs) a UPF reaches on N6, each
//! its own N6 device and UE pools; a PDR's or FAR's Network Instance
//! (TS 29.244 §8.2.4) names one. Without any, `[pfcp] ue_prefixes` is the
//! one unnamed data network, on `[host] tun` (or `[gateway] inner`), which
//! every Network Instance selects.

use crate::host::device_name;
use core::net::{IpAddr, Ipv4Addr};
use serde::Deserialize;
use tep_dataplane::config::{ConfigError, IpPrefix};

/// Data networks at most (a session's network is a 16-bit index; the
/// workers poll a device per network).
pub const MAX_DATA_NETWORKS: usize = 64;

/// The longest name: a DNN is at most 100 octets encoded (TS 23.003
/// §9.1), 99 as dotted text.
pub const MAX_NETWORK_NAME: usize = 99;

/// A data network.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataNetwork {
    /// Its name as Network Instances give it (lowercase, dotted labels);
    /// None: the one unnamed network, which every name selects.
    pub name: Option<String>,
    /// Host mode: its TUN (None: `[host] tun`).
    pub tun: Option<String>,
    /// Gateway mode: the 802.1Q VLAN its frames carry on `[gateway]
    /// inner` (None: untagged).
    pub vlan: Option<u16>,
    /// Its UE pools, routed into its TUN.
    pub ue_prefixes: Vec<IpPrefix>,
    /// Gateway mode, a tagged network: tep's own address on the VLAN and
    /// the DN's router there (`address`, `gateway`), resolved by ARP.
    pub next_hop: Option<DnRouter>,
}

/// A tagged data network's router, reached from tep's own address on the
/// VLAN (IPv4: tep answers and asks by ARP there).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DnRouter {
    /// tep's N6 address on the VLAN.
    pub address: Ipv4Addr,
    /// Its prefix length.
    pub prefix_len: u8,
    /// The DN's router: every uplink packet of the network goes to it.
    pub gateway: Ipv4Addr,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDataNetwork {
    name: Option<String>,
    tun: Option<String>,
    vlan: Option<i64>,
    ue_prefixes: Option<Vec<String>>,
    address: Option<String>,
    gateway: Option<String>,
}

fn err(field: String, message: String) -> ConfigError {
    ConfigError {
        field: format!("pfcp.{field}"),
        message,
    }
}

/// A DNN as an operator writes it: labels of letters, digits and '-'
/// joined by dots (TS 23.003 §9.1), compared without case.
fn network_name(at: &str, s: &str) -> Result<String, ConfigError> {
    let ok = !s.is_empty()
        && s.len() <= MAX_NETWORK_NAME
        && s.split('.').all(|l| {
            (1..=63).contains(&l.len()) && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        });
    if !ok {
        return Err(err(
            format!("{at}.name"),
            format!("\"{s}\" is not a DNN (labels of letters, digits and '-' joined by dots, at most {MAX_NETWORK_NAME} characters)"),
        ));
    }
    Ok(s.to_ascii_lowercase())
}

/// UE pools: at least one, none overlapping another of the same network
/// (a UE address in two pools of one network would be ambiguous to the
/// SMF, not to tep; refused as a typo). Across networks they may repeat.
pub(super) fn ue_prefixes(
    field: &str,
    v: Option<Vec<String>>,
) -> Result<Vec<IpPrefix>, ConfigError> {
    let list: Vec<IpPrefix> = v
        .unwrap_or_default()
        .iter()
        .map(|s| s.parse::<IpPrefix>().map_err(|m| err(field.to_string(), m)))
        .collect::<Result<_, _>>()?;
    if list.is_empty() {
        return Err(err(
            field.to_string(),
            "missing: the UE address pools (downlink packets to them are looked up in the sessions)".to_string(),
        ));
    }
    for (i, p) in list.iter().enumerate() {
        if let Some(q) = list[..i]
            .iter()
            .find(|q| q.contains(p.addr) || p.contains(q.addr))
        {
            return Err(err(
                field.to_string(),
                format!("{}/{} overlaps {}/{}", p.addr, p.len, q.addr, q.len),
            ));
        }
    }
    Ok(list)
}

/// `[[pfcp.network]]`, or the unnamed network of `[pfcp] ue_prefixes`.
/// `gateway`: the file runs gateway mode, where a network is told apart
/// on the inner interface by its VLAN, not by a TUN.
pub(super) fn data_networks(
    raw: Option<Vec<RawDataNetwork>>,
    ue_prefixes_key: Option<Vec<String>>,
    gateway: bool,
) -> Result<Vec<DataNetwork>, ConfigError> {
    let Some(raw) = raw else {
        return Ok(vec![DataNetwork {
            name: None,
            tun: None,
            vlan: None,
            ue_prefixes: ue_prefixes("ue_prefixes", ue_prefixes_key)?,
            next_hop: None,
        }]);
    };
    if ue_prefixes_key.is_some() {
        return Err(err(
            "ue_prefixes".to_string(),
            "with [[pfcp.network]] each network gives its own ue_prefixes".to_string(),
        ));
    }
    if raw.is_empty() {
        return Err(err(
            "network".to_string(),
            "empty: at least one data network".to_string(),
        ));
    }
    if raw.len() > MAX_DATA_NETWORKS {
        return Err(err(
            "network".to_string(),
            format!("{} data networks: at most {MAX_DATA_NETWORKS}", raw.len()),
        ));
    }
    let mut out: Vec<DataNetwork> = Vec::with_capacity(raw.len());
    for (i, n) in raw.into_iter().enumerate() {
        let at = format!("network[{i}]");
        let name = match n.name {
            Some(s) => network_name(&at, &s)?,
            None => {
                return Err(err(
                    format!("{at}.name"),
                    "missing: the DNN that Network Instances name".to_string(),
                ))
            }
        };
        if let Some(o) = out
            .iter()
            .find(|o| o.name.as_deref() == Some(name.as_str()))
        {
            return Err(err(
                format!("{at}.name"),
                format!(
                    "\"{name}\" is named twice (also network \"{}\")",
                    o.name.as_deref().unwrap_or_default()
                ),
            ));
        }
        let (tun, vlan) = if gateway {
            (None, gateway_vlan(&at, &out, n.tun.is_some(), n.vlan)?)
        } else {
            (host_tun(&at, &out, n.tun, n.vlan.is_some())?, None)
        };
        let next_hop = dn_router(&at, gateway, vlan, n.address, n.gateway)?;
        out.push(DataNetwork {
            name: Some(name),
            tun,
            vlan,
            ue_prefixes: ue_prefixes(&format!("{at}.ue_prefixes"), n.ue_prefixes)?,
            next_hop,
        });
    }
    Ok(out)
}

/// Host mode: the network's TUN, no other network's (at most one leaves
/// it out for `[host] tun`); a VLAN has no meaning there.
fn host_tun(
    at: &str,
    out: &[DataNetwork],
    tun: Option<String>,
    vlan: bool,
) -> Result<Option<String>, ConfigError> {
    if vlan {
        return Err(err(
            format!("{at}.vlan"),
            "gateway mode's (the 802.1Q VLAN on [gateway] inner); in host mode a data network has its own tun".to_string(),
        ));
    }
    let tun = tun
        .map(|t| device_name("pfcp", &format!("{at}.tun"), Some(t), ""))
        .transpose()?;
    if let Some(o) = out.iter().find(|o| o.tun == tun) {
        let device = tun
            .as_deref()
            .map_or("[host] tun".to_string(), |t| format!("\"{t}\""));
        return Err(err(
            format!("{at}.tun"),
            format!("{device} is network \"{}\"'s TUN already: each data network needs its own (leave tun out on one network to use [host] tun)", o.name.as_deref().unwrap_or_default()),
        ));
    }
    Ok(tun)
}

/// Gateway mode: the network's VLAN on the inner interface (1..=4094),
/// no other network's; at most one network is untagged. No TUN there.
fn gateway_vlan(
    at: &str,
    out: &[DataNetwork],
    tun: bool,
    vlan: Option<i64>,
) -> Result<Option<u16>, ConfigError> {
    if tun {
        return Err(err(
            format!("{at}.tun"),
            "host mode's; in gateway mode a data network is told apart on [gateway] inner by its vlan".to_string(),
        ));
    }
    let name = |o: &DataNetwork| o.name.clone().unwrap_or_default();
    let Some(v) = vlan else {
        return match out.iter().find(|o| o.vlan.is_none()) {
            Some(o) => Err(err(
                format!("{at}.vlan"),
                format!("missing: network \"{}\" is already the untagged one on [gateway] inner; give this one a vlan (1..=4094)", name(o)),
            )),
            None => Ok(None),
        };
    };
    let vid = u16::try_from(v)
        .ok()
        .filter(|v| (1..=4094).contains(v))
        .ok_or_else(|| {
            err(
                format!("{at}.vlan"),
                format!("{v} is out of range (1..=4094)"),
            )
        })?;
    if let Some(o) = out.iter().find(|o| o.vlan == Some(vid)) {
        return Err(err(
            format!("{at}.vlan"),
            format!(
                "VLAN {vid} already carries network \"{}\"; each data network needs its own vlan",
                name(o)
            ),
        ));
    }
    Ok(Some(vid))
}

/// `address` and `gateway` of a tagged network in gateway mode (both or
/// neither): the kernel has no device for the VLAN, so tep itself is
/// the network's host there.
fn dn_router(
    at: &str,
    gateway_mode: bool,
    vlan: Option<u16>,
    address: Option<String>,
    gateway: Option<String>,
) -> Result<Option<DnRouter>, ConfigError> {
    let field = if address.is_some() {
        "address"
    } else if gateway.is_some() {
        "gateway"
    } else {
        return Ok(None);
    };
    let refuse = |field: &str, m: String| Err(err(format!("{at}.{field}"), m));
    if !gateway_mode {
        return refuse(field, "gateway mode's (tep's address and the router on a data network's VLAN); in host mode the kernel routes the network's TUN".to_string());
    }
    if vlan.is_none() {
        return refuse(field, "only on a tagged network (vlan): the untagged one is the inner interface's own, whose addresses and routes are the kernel's".to_string());
    }
    let (Some(a), Some(g)) = (address, gateway) else {
        let missing = if field == "address" {
            "gateway"
        } else {
            "address"
        };
        return refuse(missing, format!("missing: with {field}, a tagged network gives both address (tep's, like \"10.60.0.1/24\") and gateway (the network's router)"));
    };
    let prefix = IpPrefix::parse_address(&a).map_err(|m| err(format!("{at}.address"), m))?;
    let IpAddr::V4(address) = prefix.addr else {
        return refuse("address", format!("\"{a}\": IPv4 only (tep answers ARP, not Neighbor Discovery, on a data network's VLAN)"));
    };
    let gw: IpAddr = g.parse().map_err(|_| {
        err(
            format!("{at}.gateway"),
            format!("\"{g}\" is not an IP address"),
        )
    })?;
    let IpAddr::V4(gw4) = gw else {
        return refuse("gateway", format!("\"{g}\": IPv4 only, as address"));
    };
    if gw4 == address {
        return refuse("gateway", format!("{g} is tep's own address"));
    }
    let host = u32::MAX.checked_shr(u32::from(prefix.len)).unwrap_or(0);
    let bits = u32::from(gw4) & host;
    // The subnet's own address and its broadcast are no router's (a /31
    // has neither, RFC 3021).
    let edge = prefix.len < 31 && (bits == 0 || bits == host);
    if !prefix.contains(gw) || edge {
        return refuse(
            "gateway",
            format!("{g} is not a host of {a} (the router must be on tep's subnet of the VLAN)"),
        );
    }
    Ok(Some(DnRouter {
        address,
        prefix_len: prefix.len,
        gateway: gw4,
    }))
}

/// A VLAN of the inner interface carries one network: a data network's
/// VLAN is no overlay `[[network]]`'s (and the untagged VLAN is one's).
pub(super) fn check_overlay_vlans(c: &crate::Config) -> Result<(), ConfigError> {
    let Some(p) = c.pfcp.as_ref().filter(|_| c.gateway.is_some()) else {
        return Ok(());
    };
    let overlay: Vec<(usize, &str, Option<u16>)> = c
        .tunnels
        .iter()
        .filter_map(|t| Some((t.name.as_str(), t.network.as_deref()?.vlan)))
        .enumerate()
        .map(|(i, (name, vlan))| (i, name, vlan))
        .collect();
    for (i, n) in p.networks.iter().enumerate() {
        let Some((k, o, _)) = overlay.iter().find(|o| o.2 == n.vlan) else {
            continue;
        };
        let what = n
            .vlan
            .map_or("the untagged VLAN".to_string(), |v| format!("VLAN {v}"));
        return Err(err(
            format!("network[{i}].vlan"),
            format!("{what} already carries network[{k}] \"{o}\" (an overlay network); each network needs its own vlan"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::Config;

    const BASE: &str = "[pfcp]\nn3 = [\"192.0.2.1\"]\n";

    fn parse(body: &str) -> Result<Config, String> {
        Config::parse(&format!("{BASE}{body}")).map_err(|e| e.to_string())
    }

    #[test]
    fn networks_by_name_each_on_its_tun() {
        let c = parse(
            "[[pfcp.network]]\nname = \"Internet\"\nue_prefixes = [\"10.45.0.0/16\"]\n\
             [[pfcp.network]]\nname = \"ims.mnc001.mcc001.gprs\"\ntun = \"n6i\"\nue_prefixes = [\"10.45.0.0/16\", \"10.46.0.0/16\"]\n",
        )
        .unwrap();
        let p = c.pfcp.as_ref().unwrap();
        let names: Vec<_> = p.networks.iter().map(|n| n.name.as_deref()).collect();
        assert_eq!(names, [Some("internet"), Some("ims.mnc001.mcc001.gprs")]);
        assert_eq!(p.networks[0].tun, None);
        assert_eq!(p.networks[1].tun.as_deref(), Some("n6i"));
        // The N3 tunnel routes every pool, each once.
        let pools: Vec<String> = p
            .ue_prefixes
            .iter()
            .map(|x| format!("{}/{}", x.addr, x.len))
            .collect();
        assert_eq!(pools, ["10.45.0.0/16", "10.46.0.0/16"]);
        let n3 = c.tunnels.iter().find(|t| t.sessions).unwrap();
        assert_eq!(n3.inner_prefixes, p.ue_prefixes);
    }

    #[test]
    fn the_single_network_config_is_one_unnamed_network() {
        let c = parse("ue_prefixes = [\"10.45.0.0/16\"]\n").unwrap();
        let p = c.pfcp.unwrap();
        assert_eq!(p.networks.len(), 1);
        assert_eq!(
            (p.networks[0].name.as_deref(), p.networks[0].tun.as_deref()),
            (None, None)
        );
        assert_eq!(p.networks[0].ue_prefixes, p.ue_prefixes);
    }

    #[test]
    fn errors_name_the_field() {
        let net = |name: &str, extra: &str| {
            format!(
                "[[pfcp.network]]\nname = \"{name}\"\nue_prefixes = [\"10.45.0.0/16\"]\n{extra}\n"
            )
        };
        for (body, want) in [
            (
                format!("ue_prefixes = [\"10.0.0.0/8\"]\n{}", net("internet", "")),
                "pfcp.ue_prefixes: with [[pfcp.network]]",
            ),
            (
                format!("{}{}", net("internet", ""), net("INTERNET", "tun = \"n6b\"")),
                "pfcp.network[1].name: \"internet\" is named twice",
            ),
            (
                format!("{}{}", net("internet", "tun = \"n6\""), net("ims", "tun = \"n6\"")),
                "pfcp.network[1].tun: \"n6\" is network \"internet\"'s TUN already",
            ),
            (
                format!("{}{}", net("internet", ""), net("ims", "")),
                "pfcp.network[1].tun: [host] tun is network \"internet\"'s TUN already",
            ),
            (net("a..b", ""), "pfcp.network[0].name: \"a..b\" is not a DNN"),
            (net("a_b", ""), "pfcp.network[0].name:"),
            (net("internet", "tun = \"a/b\""), "pfcp.network[0].tun:"),
            (
                "[[pfcp.network]]\nue_prefixes = [\"10.0.0.0/8\"]\n".to_string(),
                "pfcp.network[0].name: missing",
            ),
            (
                "[[pfcp.network]]\nname = \"x\"\n".to_string(),
                "pfcp.network[0].ue_prefixes: missing",
            ),
            (
                "[[pfcp.network]]\nname = \"x\"\nue_prefixes = [\"10.0.0.0/8\", \"10.45.0.0/16\"]\n"
                    .to_string(),
                "pfcp.network[0].ue_prefixes: 10.45.0.0/16 overlaps 10.0.0.0/8",
            ),
            (
                "ue_prefixes = [\"2001:db8::/48\", \"2001:db8::/64\"]\n".to_string(),
                "pfcp.ue_prefixes: 2001:db8::/64 overlaps",
            ),
            (
                "[[pfcp.network]]\nname = \"x\"\ndevice = \"eth1\"\nue_prefixes = [\"10.0.0.0/8\"]\n"
                    .to_string(),
                "line 5: unknown field `device`",
            ),
        ] {
            let e = parse(&body).unwrap_err();
            assert!(e.starts_with(want), "{body}: {e}");
        }
        let many: String = (0..=super::MAX_DATA_NETWORKS)
            .map(|i| net(&format!("n{i}"), &format!("tun = \"t{i}\"")))
            .collect();
        assert!(parse(&many)
            .unwrap_err()
            .starts_with("pfcp.network: 65 data networks"));
    }

    const GATEWAY: &str = "[gateway]\ninner = \"a\"\nunderlay = \"b\"\n";

    fn net(name: &str, extra: &str) -> String {
        format!("[[pfcp.network]]\nname = \"{name}\"\nue_prefixes = [\"10.45.0.0/16\"]\n{extra}\n")
    }

    #[test]
    fn gateway_networks_are_vlans_of_the_inner_interface() {
        let c = parse(&format!(
            "{GATEWAY}{}{}{}",
            net("internet", "vlan = 10"),
            net("ims", "vlan = 20"),
            net("default", "")
        ))
        .unwrap();
        let vlans: Vec<_> = c.pfcp.unwrap().networks.iter().map(|n| n.vlan).collect();
        assert_eq!(vlans, [Some(10), Some(20), None]);
    }

    #[test]
    fn vlan_errors_name_the_field() {
        let overlay = "[[network]]\nname = \"blue\"\nkind = \"vxlan\"\nvni = 1\nvlan = 10\nlocal = \"192.0.2.1\"\n";
        for (body, want) in [
            (
                format!("{GATEWAY}{}{}", net("a", "vlan = 10"), net("b", "vlan = 10")),
                "pfcp.network[1].vlan: VLAN 10 already carries network \"a\"",
            ),
            (
                format!("{GATEWAY}{}{}", net("a", ""), net("b", "")),
                "pfcp.network[1].vlan: missing: network \"a\" is already the untagged one",
            ),
            (
                format!("{GATEWAY}{}", net("a", "vlan = 0")),
                "pfcp.network[0].vlan: 0 is out of range (1..=4094)",
            ),
            (
                format!("{GATEWAY}{}", net("a", "vlan = 4095")),
                "pfcp.network[0].vlan: 4095 is out of range (1..=4094)",
            ),
            (
                format!("{GATEWAY}{}", net("a", "vlan = -1")),
                "pfcp.network[0].vlan: -1 is out of range",
            ),
            (
                format!("{GATEWAY}{}", net("a", "tun = \"n6\"")),
                "pfcp.network[0].tun: host mode's",
            ),
            (
                net("a", "vlan = 10"),
                "pfcp.network[0].vlan: gateway mode's",
            ),
            (
                format!("{GATEWAY}{overlay}{}{}", net("a", ""), net("b", "vlan = 10")),
                "pfcp.network[1].vlan: VLAN 10 already carries network[0] \"blue\" (an overlay network)",
            ),
        ] {
            let e = parse(&body).unwrap_err();
            assert!(e.starts_with(want), "{body}: {e}");
        }
        // The overlay's untagged network and an untagged data network.
        let untagged = overlay.replace("vlan = 10\n", "");
        let e = parse(&format!("{GATEWAY}{untagged}{}", net("a", ""))).unwrap_err();
        assert!(
            e.starts_with(
                "pfcp.network[0].vlan: the untagged VLAN already carries network[0] \"blue\""
            ),
            "{e}"
        );
    }

    fn routed(extra: &str) -> String {
        net("a", &format!("vlan = 10\n{extra}"))
    }

    #[test]
    fn a_tagged_network_has_its_own_router() {
        let c = parse(&format!(
            "{GATEWAY}{}{}",
            routed("address = \"10.60.0.1/24\"\ngateway = \"10.60.0.254\""),
            net("b", "vlan = 20")
        ))
        .unwrap();
        let p = c.pfcp.unwrap();
        let r = p.networks[0].next_hop.unwrap();
        assert_eq!(
            (r.address.to_string(), r.prefix_len, r.gateway.to_string()),
            ("10.60.0.1".to_string(), 24, "10.60.0.254".to_string())
        );
        assert_eq!(p.networks[1].next_hop, None);
    }

    #[test]
    fn router_errors_name_the_field() {
        let both = |a: &str, g: &str| routed(&format!("address = \"{a}\"\ngateway = \"{g}\""));
        for (body, want) in [
            (
                routed("address = \"10.60.0.1/24\""),
                "pfcp.network[0].gateway: missing",
            ),
            (
                routed("gateway = \"10.60.0.254\""),
                "pfcp.network[0].address: missing",
            ),
            (
                both("2001:db8::1/64", "2001:db8::2"),
                "pfcp.network[0].address: \"2001:db8::1/64\": IPv4 only",
            ),
            (
                both("10.60.0.1/24", "2001:db8::2"),
                "pfcp.network[0].gateway: \"2001:db8::2\": IPv4 only",
            ),
            (
                both("10.60.0.1/24", "x"),
                "pfcp.network[0].gateway: \"x\" is not",
            ),
            (both("10.60.0/24", "10.60.0.2"), "pfcp.network[0].address:"),
            (
                both("10.60.0.1/24", "10.60.0.1"),
                "pfcp.network[0].gateway: 10.60.0.1 is tep's own address",
            ),
            (
                both("10.60.0.1/24", "10.61.0.1"),
                "pfcp.network[0].gateway: 10.61.0.1 is not a host of 10.60.0.1/24",
            ),
            (
                both("10.60.0.1/24", "10.60.0.255"),
                "pfcp.network[0].gateway: 10.60.0.255 is not a host",
            ),
            (
                both("10.60.0.1/24", "10.60.0.0"),
                "pfcp.network[0].gateway: 10.60.0.0 is not a host",
            ),
            (
                both("10.60.0.1", "10.60.0.2"),
                "pfcp.network[0].gateway: 10.60.0.2 is not a host",
            ),
        ] {
            let e = parse(&format!("{GATEWAY}{body}")).unwrap_err();
            assert!(e.starts_with(want), "{body}: {e}");
        }
        let pair = "address = \"10.60.0.1/24\"\ngateway = \"10.60.0.254\"";
        let e = parse(&format!("{GATEWAY}{}", net("a", pair))).unwrap_err();
        assert!(
            e.starts_with("pfcp.network[0].address: only on a tagged network"),
            "{e}"
        );
        let e = parse(&net("a", pair)).unwrap_err();
        assert!(
            e.starts_with("pfcp.network[0].address: gateway mode's"),
            "{e}"
        );
        // A /31's both addresses are hosts.
        let c = parse(&format!("{GATEWAY}{}", both("10.60.0.0/31", "10.60.0.1")));
        assert!(c.is_ok(), "{c:?}");
    }
}
