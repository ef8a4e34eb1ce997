//! `[overlay]` and the entries of a `[[network]]` (`fdb`, `neighbours`,
//! `routes`). A `[[network]]` itself is typed with `[[tunnel]]`'s keys in
//! `parse`; the rules that need the rest of the file (`[host]`'s devices,
//! `[gateway]`'s untagged network, `[overlay]`'s bounds) are `file`'s.

use crate::value::{in_range, mac_syntax, parse_ip, Int};
use serde::Deserialize;
use tep_dataplane::config::{ConfigError, IpPrefix, NetworkSettings};
use tep_wire::ethernet::EthernetAddress;

/// The largest `[overlay] fdb_entries` (the table is allocated whole).
pub const MAX_FDB_ENTRIES: usize = 1 << 26;
/// The largest `[overlay] max_vteps` (the registry is allocated whole).
pub const MAX_VTEPS: u32 = 1 << 20;

/// `[overlay]`: the bounds of the tables the networks share.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OverlayConfig {
    /// FDB entries at most, every network together (`fdb_entries`; default
    /// the L2 networks' `max_macs` summed plus their static entries, at
    /// least 1024).
    pub fdb_entries: Option<usize>,
    /// Remote VTEPs at most (`max_vteps`, default 4096): learning from
    /// spoofed underlay sources stops there.
    pub max_vteps: u32,
}

impl Default for OverlayConfig {
    fn default() -> Self {
        OverlayConfig {
            fdb_entries: None,
            max_vteps: 4096,
        }
    }
}

/// `{ mac = "…", dst = "…" }`: a static FDB entry.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFdbEntry {
    mac: Option<String>,
    dst: Option<String>,
}

/// `{ ip = "…", mac = "…" }`: a static neighbour.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawNeighbour {
    ip: Option<String>,
    mac: Option<String>,
}

/// `{ prefix = "…", dst = "…" }`: a route to a VTEP.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRoute {
    prefix: Option<String>,
    dst: Option<String>,
}

/// `[overlay]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawOverlay {
    fdb_entries: Option<Int>,
    max_vteps: Option<Int>,
}

impl RawOverlay {
    pub(super) fn validate(self) -> Result<OverlayConfig, ConfigError> {
        let err = |field: &str, message: String| ConfigError {
            field: format!("overlay.{field}"),
            message,
        };
        let d = OverlayConfig::default();
        Ok(OverlayConfig {
            fdb_entries: match self.fdb_entries {
                Some(v) => Some(
                    in_range(v, 1, MAX_FDB_ENTRIES as u32).map_err(|m| err("fdb_entries", m))?
                        as usize,
                ),
                None => d.fdb_entries,
            },
            max_vteps: match self.max_vteps {
                Some(v) => in_range(v, 1, MAX_VTEPS).map_err(|m| err("max_vteps", m))?,
                None => d.max_vteps,
            },
        })
    }
}

/// A network's static entries typed: fdb, neighbours, routes.
pub(super) fn entries(
    (fdb, neighbours, routes): (&[RawFdbEntry], &[RawNeighbour], &[RawRoute]),
    n: &mut NetworkSettings,
    at: &impl Fn(&str, String) -> ConfigError,
) -> Result<(), ConfigError> {
    let ip = |s: &str, field: &str| parse_ip(s).map_err(|m| at(field, m));
    let mac = |s: &str, field: &str| -> Result<EthernetAddress, ConfigError> {
        mac_syntax(s.trim()).map_err(|m| at(field, m))
    };
    for (k, e) in fdb.iter().enumerate() {
        let f = |key: &str| format!("fdb[{k}].{key}");
        let m = required(&e.mac, &f("mac"), "the MAC of the entry", at)?;
        let d = required(&e.dst, &f("dst"), "the VTEP the MAC is behind", at)?;
        n.fdb.push((mac(m, &f("mac"))?, ip(d, &f("dst"))?));
    }
    for (k, e) in neighbours.iter().enumerate() {
        let f = |key: &str| format!("neighbours[{k}].{key}");
        let i = required(&e.ip, &f("ip"), "the neighbour's IP address", at)?;
        let m = required(&e.mac, &f("mac"), "the neighbour's MAC", at)?;
        n.neighbours.push((ip(i, &f("ip"))?, mac(m, &f("mac"))?));
    }
    for (k, e) in routes.iter().enumerate() {
        let f = |key: &str| format!("routes[{k}].{key}");
        let p = required(&e.prefix, &f("prefix"), "the inner prefix routed", at)?;
        let d = required(&e.dst, &f("dst"), "the VTEP the prefix is behind", at)?;
        let p: IpPrefix = p.trim().parse().map_err(|m| at(&f("prefix"), m))?;
        n.routes.push((p, ip(d, &f("dst"))?));
    }
    Ok(())
}

/// A required key of an entry.
fn required<'a>(
    v: &'a Option<String>,
    field: &str,
    what: &str,
    at: &impl Fn(&str, String) -> ConfigError,
) -> Result<&'a str, ConfigError> {
    v.as_deref()
        .ok_or_else(|| at(field, format!("missing: {what}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{err, mac, network, ok, prefix, tunnel, v4, OVERLAY_EXAMPLE};
    use tep_dataplane::config::TunnelConfig;
    use tep_dataplane::TunnelKind;

    /// `err(text)` is at `field` (after the label) with a message that
    /// starts with `message`.
    fn refused(text: &str, field: &str, message: &str) {
        let e = err(text);
        assert_eq!(e.field, field, "{e}");
        assert!(e.message.starts_with(message), "{e}");
    }

    const HOST: &str = "[host]\n";
    const GATEWAY: &str = "[gateway]\ninner = \"eth0\"\nunderlay = \"eth1\"\n";

    #[test]
    fn example_file() {
        let c = ok(OVERLAY_EXAMPLE);
        let local = v4([192, 0, 2, 1]);
        let (h2, h3) = (v4([192, 0, 2, 2]), v4([192, 0, 2, 3]));
        let blue = NetworkSettings {
            flood: vec![h2, h3],
            fdb: vec![(mac([2, 0, 0, 0, 2, 1]), h2)],
            neighbours: vec![(v4([10, 1, 0, 2]), mac([2, 0, 0, 0, 2, 1]))],
            neigh_suppress: true,
            device: Some("blue0".to_string()),
            ..NetworkSettings::default()
        };
        let mut blue = TunnelConfig::network("blue", TunnelKind::Vxlan, local, blue);
        blue.vni = 100;
        let red = NetworkSettings {
            flood: vec![h2, h3],
            ..NetworkSettings::default()
        };
        let mut red = TunnelConfig::network("red", TunnelKind::Vxlan, local, red);
        red.vni = 200;
        let pods = NetworkSettings {
            routes: vec![(prefix("10.244.2.0/24"), h2), (prefix("10.244.3.0/24"), h3)],
            learning: false,
            device: Some("pods0".to_string()),
            ..NetworkSettings::default()
        };
        let pods = TunnelConfig::network("pods", TunnelKind::Gue, local, pods);
        assert_eq!(c.tunnels, [blue, red, pods]);
        assert_eq!(
            c.overlay,
            OverlayConfig {
                fdb_entries: Some(65536),
                max_vteps: 64
            }
        );
        assert!(c.host_given && c.gateway.is_none());
        assert_eq!(c.validate(), Ok(()));
        assert_eq!(c.fdb_entries(), 65536);
    }

    #[test]
    fn defaults_for_every_network_kind() {
        for kind in TunnelKind::ALL
            .into_iter()
            .filter(|k| *k != TunnelKind::Gtpu)
        {
            let c = ok(&network("n", kind.name(), ""));
            let mut want =
                TunnelConfig::network("n", kind, v4([192, 0, 2, 1]), NetworkSettings::default());
            if kind.carries_ethernet() {
                want.vni = 1;
            }
            assert_eq!(c.tunnels, [want], "{kind}");
        }
        assert_eq!(ok("").overlay, OverlayConfig::default());
        // No fdb_entries: the networks' needs, at least 1024.
        let c = ok(&(network("a", "vxlan", "max_macs = 2000")
            + &network(
                "b",
                "vxlan",
                "vni = 2\nfdb = [{ mac = \"02:00:00:00:00:01\", dst = \"192.0.2.9\" }]",
            )
            .replace("vni = 1\n", "")));
        assert_eq!(c.fdb_entries(), 2000 + 16384 + 1);
    }

    #[test]
    fn networks_come_after_the_n3_tunnels() {
        let text = network("n", "gue", "")
            + &tunnel("t", "vxlan", "")
            + "[pfcp]\nn3 = [\"192.0.2.7\"]\nue_prefixes = [\"10.45.0.0/16\"]\n";
        let names: Vec<_> = ok(&text).tunnels.into_iter().map(|t| t.name).collect();
        assert_eq!(names, ["t", "n3.0", "n"]);
    }

    #[test]
    fn point_to_point_keys_are_refused_with_what_to_use() {
        for (line, key, instead) in [
            ("remote = \"192.0.2.2\"", "remote", "list them in flood"),
            ("inner_macs = []", "inner_macs", "its fdb entries"),
            (
                "inner_prefixes = [\"10.0.0.0/8\"]",
                "inner_prefixes",
                "its routes",
            ),
            ("teid = 1", "teid", "a UPF's sessions"),
            ("local_teid = 1", "local_teid", "a UPF's sessions"),
            ("qfi = 1", "qfi", "a UPF's sessions"),
        ] {
            let e = err(&network("n", "vxlan", line));
            assert_eq!(e.field, format!("network[0] \"n\".{key}"));
            assert!(e.message.starts_with("not a [[network]] key: "), "{e}");
            assert!(e.message.contains(instead), "{e}");
        }
        let e = err(&network("n", "gtpu", ""));
        assert_eq!(
            e.to_string(),
            "network[0] \"n\".kind: gtpu is not a network kind: a UPF's sessions are [pfcp]'s; use one of vxlan, geneve, gre, gue, fou-ipip, fou-sit, fou-gre, gue-gre"
        );
        refused(
            &network("n", "vxlan", "colour = \"blue\""),
            "network[0] \"n\".colour",
            "unknown field `colour`",
        );
        refused(
            &network("n", "vxlan", "").replace("vni = 1\n", ""),
            "network[0] \"n\".vni",
            "missing: a vxlan network needs a vni",
        );
        refused(
            "[[network]]\nkind = \"gue\"\n",
            "network[0].name",
            "missing",
        );
        refused(
            &network("n", "gue", "").replace("local = \"192.0.2.1\"\n", ""),
            "network[0] \"n\".local",
            "missing: every network needs a local",
        );
    }

    #[test]
    fn network_keys_in_a_tunnel_are_refused() {
        for key in [
            "flood = []",
            "learning = true",
            "device = \"x\"",
            "vlan = 2",
            "routes = []",
        ] {
            let e = err(&tunnel("t", "gue", key));
            let field = key.split(' ').next().unwrap();
            assert_eq!(e.field, format!("tunnel[0] \"t\".{field}"));
            assert!(
                e.message
                    .starts_with("not a [[tunnel]] key: a tunnel has one remote"),
                "{e}"
            );
        }
    }

    #[test]
    fn wire_keys_mean_what_they_mean_on_a_tunnel() {
        let c = ok(&network(
            "n",
            "gue",
            "local_port = 7000\nremote_port = 7001\nsource_ports = [1000, 2000]\nchecksum = \"lco\"\ngue_variant = 1\nttl = \"inherit\"\ndscp = 10\ndf = \"set\"",
        ));
        let t = &c.tunnels[0];
        assert_eq!(
            (t.local_port, t.remote_port, t.source_ports),
            (7000, 7001, (1000, 2000))
        );
        assert_eq!(t.gue_variant, 1);
        refused(
            &network("n", "gue", "ttl = 0"),
            "network[0] \"n\".ttl",
            "0 is out of range",
        );
        refused(
            &network("n", "vxlan", "gue_rco = \"ietf\""),
            "network[0] \"n\".gue_rco",
            "not used by kind vxlan",
        );
        refused(
            &network("n", "gue", "vni = 3"),
            "network[0] \"n\".vni",
            "not used by kind gue",
        );
    }

    #[test]
    fn layer_keys() {
        for (kind, line, key) in [
            ("gue", "fdb = []", "fdb"),
            ("fou-ipip", "neighbours = []", "neighbours"),
            ("gre", "neigh_suppress = false", "neigh_suppress"),
            ("gue", "ageing = 60", "ageing"),
            ("fou-ipip", "max_macs = 10", "max_macs"),
            ("vxlan", "routes = []", "routes"),
            (
                "geneve",
                "routes = [{ prefix = \"10.0.0.0/8\", dst = \"192.0.2.2\" }]",
                "routes",
            ),
        ] {
            let e = err(&network("n", kind, line));
            assert_eq!(e.field, format!("network[0] \"n\".{key}"), "{e}");
            assert!(
                e.message.starts_with(&format!("not used by kind {kind}")),
                "{e}"
            );
        }
        let e = err(&network("n", "gue", "fdb = []"));
        assert_eq!(e.message, "not used by kind gue (an L3 network forwards IP packets by routes; fdb holds MACs of L2 (vxlan, geneve) networks); remove it");
    }

    #[test]
    fn ranges() {
        for (line, field, message) in [
            (
                "ageing = 0",
                "ageing",
                "0 is out of range (1..=8000000); seconds",
            ),
            (
                "ageing = 8000001",
                "ageing",
                "8000001 is out of range (1..=8000000); seconds",
            ),
            (
                "max_macs = 0",
                "max_macs",
                "0 is out of range (1..=16777216)",
            ),
            (
                "max_macs = 16777217",
                "max_macs",
                "16777217 is out of range (1..=16777216)",
            ),
        ] {
            let e = err(&network("n", "vxlan", line));
            assert_eq!(
                e.to_string(),
                format!("network[0] \"n\".{field}: {message}")
            );
        }
        let c = ok(&network(
            "n",
            "vxlan",
            "ageing = 8000000\nmax_macs = 16777216\nlearning = false",
        ));
        let n = c.tunnels[0].network.as_deref().unwrap();
        assert_eq!(
            (n.ageing_s, n.max_macs, n.learning),
            (8_000_000, 16_777_216, false)
        );
        for v in [0, 4095] {
            let e = err(&(GATEWAY.to_string() + &network("n", "vxlan", &format!("vlan = {v}"))));
            assert_eq!(
                e.to_string(),
                format!("network[0] \"n\".vlan: {v} is out of range (1..=4094)")
            );
        }
    }

    #[test]
    fn flood() {
        let n = |list: &str| network("n", "vxlan", &format!("flood = [{list}]"));
        let e = err(&n("\"192.0.2.2\", \"192.0.2.2\""));
        assert_eq!(
            e.to_string(),
            "network[0] \"n\".flood[1]: 192.0.2.2 is listed twice"
        );
        let e = err(&n("\"192.0.2.2\", \"192.0.2.1\""));
        assert_eq!(e.to_string(), "network[0] \"n\".flood[1]: 192.0.2.1 is local, this host's own address; list remote VTEPs only");
        let e = err(&n("\"2001:db8::2\""));
        assert_eq!(e.to_string(), "network[0] \"n\".flood[0]: 2001:db8::2 is IPv6 but local 192.0.2.1 is IPv4; a network's VTEPs are in local's family");
        refused(
            &n("\"239.1.1.1\""),
            "network[0] \"n\".flood[0]",
            "239.1.1.1 is not a unicast address",
        );
        refused(
            &n("\"255.255.255.255\""),
            "network[0] \"n\".flood[0]",
            "255.255.255.255 is not a unicast address",
        );
        refused(
            &n("\"0.0.0.0\""),
            "network[0] \"n\".flood[0]",
            "0.0.0.0 is the unspecified address",
        );
        refused(
            &n("\"host-2\""),
            "network[0] \"n\".flood[0]",
            "\"host-2\" is not an IP address",
        );
    }

    #[test]
    fn fdb_entries() {
        let n = |list: &str| network("n", "vxlan", &format!("fdb = [{list}]"));
        let e = err(&n("{ mac = \"02:00:00:00:00:01\", dst = \"192.0.2.2\" }, { mac = \"02-00-00-00-00-01\", dst = \"192.0.2.3\" }"));
        assert_eq!(e.to_string(), "network[0] \"n\".fdb[1].mac: 02:00:00:00:00:01 is listed twice; a MAC is behind one VTEP");
        let e = err(&n("{ mac = \"01:00:5e:00:00:01\", dst = \"192.0.2.2\" }"));
        assert_eq!(e.to_string(), "network[0] \"n\".fdb[0].mac: 01:00:5e:00:00:01 is a multicast address (low bit of the first octet set); fdb lists unicast MACs; broadcast, multicast and unknown frames go to the flood list");
        refused(
            &n("{ mac = \"00:00:00:00:00:00\", dst = \"192.0.2.2\" }"),
            "network[0] \"n\".fdb[0].mac",
            "00:00:00:00:00:00 is not a usable address",
        );
        refused(
            &n("{ mac = \"02:00:00:00:00\", dst = \"192.0.2.2\" }"),
            "network[0] \"n\".fdb[0].mac",
            "\"02:00:00:00:00\" is not a MAC address",
        );
        refused(
            &n("{ mac = \"02:00:00:00:00:01\", dst = \"192.0.2.1\" }"),
            "network[0] \"n\".fdb[0].dst",
            "192.0.2.1 is local",
        );
        refused(
            &n("{ dst = \"192.0.2.2\" }"),
            "network[0] \"n\".fdb[0].mac",
            "missing: the MAC of the entry",
        );
        refused(
            &n("{ mac = \"02:00:00:00:00:01\" }"),
            "network[0] \"n\".fdb[0].dst",
            "missing",
        );
        // A key of another entry type is a TOML error at the list.
        refused(
            &n("{ mac = \"02:00:00:00:00:01\", via = \"192.0.2.2\" }"),
            "network[0] \"n\".fdb",
            "unknown field `via`",
        );
        // Many MACs behind one VTEP.
        let c = ok(&n("{ mac = \"02:00:00:00:00:01\", dst = \"192.0.2.2\" }, { mac = \"02:00:00:00:00:02\", dst = \"192.0.2.2\" }"));
        assert_eq!(c.tunnels[0].network.as_deref().unwrap().fdb.len(), 2);
    }

    #[test]
    fn neighbours() {
        let n = |list: &str| network("n", "vxlan", &format!("neighbours = [{list}]"));
        let e = err(&n("{ ip = \"10.1.0.2\", mac = \"02:00:00:00:00:01\" }, { ip = \"10.1.0.2\", mac = \"02:00:00:00:00:02\" }"));
        assert_eq!(
            e.to_string(),
            "network[0] \"n\".neighbours[1].ip: 10.1.0.2 is listed twice; an address has one MAC"
        );
        let e = err(&n("{ ip = \"ff02::1\", mac = \"02:00:00:00:00:01\" }"));
        assert_eq!(e.to_string(), "network[0] \"n\".neighbours[0].ip: ff02::1 is not a unicast address; a neighbour entry answers for one host");
        refused(
            &n("{ ip = \"10.1.0.2\", mac = \"ff:ff:ff:ff:ff:ff\" }"),
            "network[0] \"n\".neighbours[0].mac",
            "ff:ff:ff:ff:ff:ff is a multicast address",
        );
        refused(
            &n("{ mac = \"02:00:00:00:00:01\" }"),
            "network[0] \"n\".neighbours[0].ip",
            "missing",
        );
        // Inner addresses of either family, whatever the underlay's.
        let c = ok(&n(
            "{ ip = \"2001:db8:1::2\", mac = \"02:00:00:00:00:01\" }",
        ));
        assert_eq!(c.tunnels[0].network.as_deref().unwrap().neighbours.len(), 1);
    }

    #[test]
    fn routes() {
        let n = |kind: &str, list: &str| network("n", kind, &format!("routes = [{list}]"));
        let e = err(&n(
            "gue",
            "{ prefix = \"10.1.2.3/16\", dst = \"192.0.2.2\" }",
        ));
        assert_eq!(e.to_string(), "network[0] \"n\".routes[0].prefix: 10.1.2.3/16 has host bits set; did you mean 10.1.0.0/16?");
        let e = err(&n("gue", "{ prefix = \"10.1.0.0/16\", dst = \"192.0.2.2\" }, { prefix = \"10.1.0.0/16\", dst = \"192.0.2.3\" }"));
        assert_eq!(e.to_string(), "network[0] \"n\".routes[1].prefix: 10.1.0.0/16 is listed twice; a prefix routes to one VTEP");
        refused(
            &n("gue", "{ prefix = \"10.1.0.0/16\", dst = \"2001:db8::2\" }"),
            "network[0] \"n\".routes[0].dst",
            "2001:db8::2 is IPv6 but local 192.0.2.1 is IPv4",
        );
        refused(
            &n(
                "fou-ipip",
                "{ prefix = \"2001:db8::/32\", dst = \"192.0.2.2\" }",
            ),
            "network[0] \"n\".routes[0].prefix",
            "2001:db8::/32 is IPv6 but fou-ipip carries only IPv4",
        );
        refused(
            &n("gue", "{ dst = \"192.0.2.2\" }"),
            "network[0] \"n\".routes[0].prefix",
            "missing",
        );
    }

    #[test]
    fn names_are_unique_across_tunnels_and_networks() {
        let e =
            err(&(tunnel("a", "gue", "") + &network("b", "gre", "") + &network("a", "vxlan", "")));
        assert_eq!(e.to_string(), "network[1].name: \"a\" is already the name of tunnel[0] \"a\"; names must be unique among tunnels and networks");
        let e = err(&(network("b", "gre", "") + &network("b", "vxlan", "")));
        assert_eq!(e.field, "network[1].name");
        assert!(
            e.message.contains("already the name of network[0] \"b\""),
            "{e}"
        );
        refused(
            &network("a b", "gue", ""),
            "network[0].name",
            "\"a b\" is not a valid name",
        );
    }

    #[test]
    fn receive_ambiguity() {
        // A network accepts every remote: the same VNI as a point-to-point
        // tunnel's clashes whatever the tunnel's remote.
        let e = err(&(tunnel("t", "vxlan", "") + &network("n", "vxlan", "")));
        assert_eq!(e.to_string(), "network[0] \"n\".vni: received packets could not be told apart from tunnel[0] \"t\"'s: same local 192.0.2.1 port 4789 and vni 1, and a network accepts every remote; give one a different identifier, local_port or local");
        let e = err(&(network("a", "vxlan", "") + &network("b", "vxlan", "")));
        assert_eq!(e.field, "network[1] \"b\".vni");
        let e = err(&(network("a", "gue", "") + &network("b", "gue", "")));
        assert_eq!(e.to_string(), "network[1] \"b\".local_port: received packets could not be told apart from network[0] \"a\"'s: same local 192.0.2.1 port 6080, and a network accepts every remote; give one a different local_port or local");
        let e = err(&(network("a", "gre", "key = 5")
            + &network("b", "fou-gre", "key = 5\nlocal_port = 4754")));
        assert_eq!(e.field, "network[1] \"b\".local_port");
        assert!(e.message.contains("a UDP port carries one tunnel kind, so this fou-gre network needs another local_port"), "{e}");
        let e = err(&(network("a", "gre", "key = 5") + &network("b", "gre", "key = 5")));
        assert_eq!(e.field, "network[1] \"b\".key");
        // Told apart: another VNI, key, port or local address.
        ok(&(tunnel("t", "vxlan", "") + &network("n", "vxlan", "").replace("vni = 1", "vni = 2")));
        ok(&(network("a", "gre", "key = 5") + &network("b", "gre", "key = 6")));
        ok(&(network("a", "gue", "") + &network("b", "gue", "local_port = 6000")));
        ok(&(network("a", "gue", "") + &network("b", "gue", "").replace("192.0.2.1", "192.0.2.9")));
        // The default-L2-tunnel rule is the point-to-point tunnels' alone.
        ok(&(tunnel("t", "vxlan", "") + &network("n", "vxlan", "").replace("vni = 1", "vni = 2")));
    }

    #[test]
    fn host_devices() {
        let e = err(&(HOST.to_string()
            + &network("a", "vxlan", "device = \"x0\"")
            + &network("b", "vxlan", "vni = 2\ndevice = \"x0\"").replace("vni = 1\n", "")));
        assert_eq!(e.to_string(), "network[1] \"b\".device: \"x0\" is already the device of network[0] \"a\"; each network needs its own");
        // Default names cut to 15 bytes can meet.
        let e = err(&(network("abcdefghijklm1", "gue", "")
            + &network("abcdefghijklm2", "gue", "local_port = 7000")));
        assert_eq!(e.field, "network[1] \"abcdefghijklm2\".device");
        assert!(
            e.message
                .starts_with("\"tep-abcdefghijk\" is already the device of network[0]"),
            "{e}"
        );
        let e = err(
            &("[host]\ntap = \"t1\"\n".to_string() + &network("n", "vxlan", "device = \"t1\""))
        );
        assert_eq!(e.to_string(), "network[0] \"n\".device: \"t1\" is host.tap, the point-to-point tunnels' device; give the network its own");
        refused(
            &network("n", "gue", "device = \"tep0\""),
            "network[0] \"n\".device",
            "\"tep0\" is host.tun",
        );
        for bad in ["", "a/b", "a b", "sixteen-bytes-xx", ".."] {
            let e = err(&network("n", "gue", &format!("device = \"{bad}\"")));
            assert_eq!(e.field, "network[0] \"n\".device", "{bad:?}");
            assert!(e.message.contains("is not an interface name"), "{e}");
        }
        refused(
            &(HOST.to_string() + &network("n", "vxlan", "vlan = 5")),
            "network[0] \"n\".vlan",
            "gateway mode's",
        );
    }

    #[test]
    fn gateway_vlans() {
        let c = ok(&(GATEWAY.to_string()
            + &network("a", "vxlan", "")
            + &network("b", "vxlan", "vlan = 20").replace("vni = 1", "vni = 2")));
        assert_eq!(c.tunnels[1].network.as_deref().unwrap().vlan, Some(20));
        let e = err(&(GATEWAY.to_string()
            + &network("a", "vxlan", "")
            + &network("b", "vxlan", "").replace("vni = 1", "vni = 2")));
        assert_eq!(e.to_string(), "network[1] \"b\".vlan: missing: network[0] \"a\" is already the untagged network on the inner interface; give this one a vlan (1..=4094)");
        let e = err(&(GATEWAY.to_string()
            + &network("a", "vxlan", "vlan = 7")
            + &network("b", "gue", "vlan = 7")));
        assert_eq!(e.to_string(), "network[1] \"b\".vlan: VLAN 7 already carries network[0] \"a\"; each network needs its own vlan");
        refused(
            &(GATEWAY.to_string() + &network("a", "vxlan", "device = \"a0\"")),
            "network[0] \"a\".device",
            "host mode's",
        );
    }

    #[test]
    fn overlay_section() {
        let e = err("[overlay]\nfdb_entries = 0\n");
        assert_eq!(
            e.to_string(),
            "overlay.fdb_entries: 0 is out of range (1..=67108864)"
        );
        let e = err("[overlay]\nmax_vteps = 1048577\n");
        assert_eq!(
            e.to_string(),
            "overlay.max_vteps: 1048577 is out of range (1..=1048576)"
        );
        refused(
            "[overlay]\nvteps = 5\n",
            "overlay.vteps",
            "unknown field `vteps`",
        );
        let e = err(&("[overlay]\nmax_vteps = 1\n".to_string()
            + &network("n", "vxlan", "flood = [\"192.0.2.2\", \"192.0.2.3\"]")));
        assert_eq!(
            e.to_string(),
            "overlay.max_vteps: 1 is fewer than the 2 remote VTEPs the networks name"
        );
        let e = err(&("[overlay]\nfdb_entries = 1\n".to_string() + &network("n", "vxlan", "fdb = [{ mac = \"02:00:00:00:00:01\", dst = \"192.0.2.2\" }, { mac = \"02:00:00:00:00:02\", dst = \"192.0.2.2\" }]")));
        assert_eq!(
            e.to_string(),
            "overlay.fdb_entries: 1 is fewer than the 2 static fdb entries of the networks"
        );
        let e = err("[overlay]\nmax_vteps = \"many\"\n");
        assert_eq!(e.field, "overlay.max_vteps");
    }

    #[test]
    fn toml_errors_in_a_network_name_the_field() {
        let e = err(&network("n", "vxlan", "learning = 1"));
        assert_eq!(e.field, "network[0] \"n\".learning");
        assert!(e.message.contains("expected a boolean"), "{e}");
        let e = err("network = [5]\n");
        assert!(
            e.message
                .contains("expected a [[tunnel]] or [[network]] table"),
            "{e}"
        );
    }
}
