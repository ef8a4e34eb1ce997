//! The rules on a multipoint network (`[[network]]`): its own
//! [`NetworkSettings`], what it must not carry of a point-to-point tunnel,
//! and what two networks must not share. Written against the model, like
//! [`check`](super::check), so that a network built in code meets them
//! too.

use super::model::{ConfigError, Control, NetworkSettings, TunnelConfig};
use super::value::{check_prefix, family, not_used, unicast_mac, valid_name};
use crate::kind::TunnelKind;
use core::net::{IpAddr, Ipv4Addr};
use tep_wire::ethernet::EthernetAddress;

/// The longest `ageing`: entries are stamped with 24-bit seconds, and an
/// age must stay well inside the stamp's wrap (2^24 s).
pub const MAX_AGEING_S: u32 = 8_000_000;
/// The most learned MACs one network may be given.
pub const MAX_MACS: u32 = 16_777_216;
/// The longest Linux interface name (IFNAMSIZ less its NUL).
pub const MAX_IFNAME: usize = 15;

/// `network[0] "blue"`, or `network[0]` without a (usable) name; the
/// index is the position among the networks.
pub fn network_label(index: usize, name: &str) -> String {
    if valid_name(name) {
        format!("network[{index}] \"{name}\"")
    } else {
        format!("network[{index}]")
    }
}

/// The error about `field` of network `index` (labelled by its name when
/// it has one).
pub fn network_error(
    index: usize,
    name: Option<&str>,
    field: &str,
    message: String,
) -> ConfigError {
    let label = match name {
        Some(n) => network_label(index, n),
        None => format!("network[{index}]"),
    };
    ConfigError {
        field: format!("{label}.{field}"),
        message,
    }
}

/// The host-mode device of network `name` when it names none:
/// `tep-<name>`, cut to an interface name's 15 bytes (names are ASCII).
pub fn default_device(name: &str) -> String {
    let mut d = format!("tep-{name}");
    d.truncate(MAX_IFNAME);
    d
}

/// The kernel VXLAN device of an EVPN network of `vni` when it names
/// none: `tepvx<VNI>` (at most 13 bytes: a VNI has 8 digits).
pub fn default_evpn_device(vni: u32) -> String {
    format!("tepvx{vni}")
}

/// A Linux interface name: 1..=15 bytes, not `.` or `..`, no `/`, `:`,
/// whitespace or control characters.
pub fn valid_ifname(name: &str) -> bool {
    (1..=MAX_IFNAME).contains(&name.len())
        && name != "."
        && name != ".."
        && !name
            .chars()
            .any(|c| c == '/' || c == ':' || c.is_whitespace() || c.is_control())
}

/// Why a `[[tunnel]]` key is refused on a network, and what to use
/// instead; None for the keys a network takes.
pub fn not_for_networks(field: &str) -> Option<String> {
    let why = match field {
        "remote" => "a network has many remote VTEPs: list them in flood (broadcast and unknown destinations), fdb (a MAC behind a VTEP) or routes (a prefix behind a VTEP)",
        "inner_macs" => "a network's MACs are its fdb entries ({ mac, dst }) and those it learns",
        "inner_prefixes" => "a network's prefixes are its routes ({ prefix, dst })",
        "teid" | "local_teid" | "qfi" => {
            "a network carries no GTP-U: a UPF's sessions are [pfcp]'s"
        }
        _ => return None,
    };
    Some(format!("not a [[network]] key: {why}"))
}

/// Why `kind` cannot be a network's (GTP-U); None when it can.
pub fn not_a_network_kind(kind: TunnelKind) -> Option<String> {
    if kind != TunnelKind::Gtpu {
        return None;
    }
    let kinds: Vec<&str> = TunnelKind::ALL
        .iter()
        .filter(|k| **k != TunnelKind::Gtpu)
        .map(|k| k.name())
        .collect();
    Some(format!(
        "gtpu is not a network kind: a UPF's sessions are [pfcp]'s; use one of {}",
        kinds.join(", ")
    ))
}

/// Why `field` does not fit a network of `kind` (the L2-only keys on an
/// L3 kind and the reverse); None when it does.
pub fn network_key_not_used(kind: TunnelKind, field: &str) -> Option<String> {
    let l2 = kind.carries_ethernet();
    let why = match field {
        "fdb" if !l2 => "an L3 network forwards IP packets by routes; fdb holds MACs of L2 (vxlan, geneve) networks",
        "neighbours" | "neigh_suppress" if !l2 => {
            "ARP/ND suppression is for L2 (vxlan, geneve) networks"
        }
        "ageing" | "max_macs" if !l2 => {
            "an L3 network learns no MACs (learning there only says whether packets from VTEPs it does not name are taken)"
        }
        "routes" if l2 => {
            "an L2 network forwards frames by MAC: give static entries in fdb"
        }
        "control" | "evpn_device" if kind != TunnelKind::Vxlan => {
            "EVPN goes through the kernel VXLAN device FRR's zebra reads: control = \"evpn\" is for vxlan networks"
        }
        _ => return None,
    };
    Some(not_used(kind, why))
}

/// A remote VTEP's address, seen from `local`.
fn check_vtep(local: IpAddr, a: IpAddr) -> Result<(), String> {
    if a.is_ipv4() != local.is_ipv4() {
        return Err(format!(
            "{a} is {} but local {local} is {}; a network's VTEPs are in local's family",
            family(a),
            family(local)
        ));
    }
    if a.is_unspecified() {
        return Err(format!(
            "{a} is the unspecified address; give a remote VTEP's unicast address"
        ));
    }
    if !unicast_ip(a) {
        return Err(format!(
            "{a} is not a unicast address; flooding copies to each remote VTEP by unicast (head-end replication)"
        ));
    }
    if a == local {
        return Err(format!(
            "{a} is local, this host's own address; list remote VTEPs only"
        ));
    }
    Ok(())
}

/// Not multicast, not the IPv4 broadcast, not unspecified.
fn unicast_ip(a: IpAddr) -> bool {
    !a.is_unspecified() && !a.is_multicast() && a != IpAddr::V4(Ipv4Addr::BROADCAST)
}

impl TunnelConfig {
    /// What a network must not be: GTP-U, an N3 tunnel, or one with the
    /// point-to-point fields set.
    pub(super) fn check_network_shape(
        &self,
        at: &impl Fn(&str, String) -> ConfigError,
    ) -> Result<(), ConfigError> {
        if let Some(m) = not_a_network_kind(self.kind) {
            return Err(at("kind", m));
        }
        if self.sessions {
            return Err(at(
                "sessions",
                "a network is not an N3 tunnel: its peers are its own, not sessions'".to_string(),
            ));
        }
        let set = [
            ("remote", !self.remote.is_unspecified()),
            ("inner_macs", !self.inner_macs.is_empty()),
            ("inner_prefixes", !self.inner_prefixes.is_empty()),
            ("teid", self.teid != 0),
            ("local_teid", self.local_teid != 0),
            ("qfi", self.qfi.is_some()),
        ];
        for (field, given) in set {
            if given {
                return Err(at(field, not_for_networks(field).unwrap_or_default()));
            }
        }
        Ok(())
    }

    /// The network's own settings.
    pub(super) fn check_network(
        &self,
        n: &NetworkSettings,
        at: &impl Fn(&str, String) -> ConfigError,
    ) -> Result<(), ConfigError> {
        for (field, given) in [
            ("fdb", !n.fdb.is_empty()),
            ("neighbours", !n.neighbours.is_empty()),
            ("neigh_suppress", n.neigh_suppress),
            ("routes", !n.routes.is_empty()),
        ] {
            if let Some(m) = network_key_not_used(self.kind, field).filter(|_| given) {
                return Err(at(field, m));
            }
        }
        check_limits(n, at)?;
        self.check_control(n, at)?;
        self.check_flood(n, at)?;
        self.check_fdb(n, at)?;
        check_neighbours(n, at)?;
        self.check_network_routes(n, at)
    }

    /// EVPN: a VXLAN network, its kernel device's name an interface's.
    fn check_control(
        &self,
        n: &NetworkSettings,
        at: &impl Fn(&str, String) -> ConfigError,
    ) -> Result<(), ConfigError> {
        let Control::Evpn { device } = &n.control else {
            return Ok(());
        };
        if let Some(m) = network_key_not_used(self.kind, "control") {
            return Err(at("control", m));
        }
        match device.as_deref() {
            Some(d) if !valid_ifname(d) => Err(at(
                "evpn_device",
                format!(
                    "\"{d}\" is not an interface name (1 to {MAX_IFNAME} bytes, no '/', ':' or spaces)"
                ),
            )),
            _ => Ok(()),
        }
    }

    fn check_flood(
        &self,
        n: &NetworkSettings,
        at: &impl Fn(&str, String) -> ConfigError,
    ) -> Result<(), ConfigError> {
        for (k, &a) in n.flood.iter().enumerate() {
            let field = format!("flood[{k}]");
            check_vtep(self.local, a).map_err(|m| at(&field, m))?;
            if n.flood[..k].contains(&a) {
                return Err(at(&field, format!("{a} is listed twice")));
            }
        }
        Ok(())
    }

    fn check_fdb(
        &self,
        n: &NetworkSettings,
        at: &impl Fn(&str, String) -> ConfigError,
    ) -> Result<(), ConfigError> {
        for (k, &(mac, dst)) in n.fdb.iter().enumerate() {
            unicast_mac(
                mac,
                "fdb lists unicast MACs; broadcast, multicast and unknown frames go to the flood list",
                "fdb lists unicast MACs; the VTEPs that get broadcast and unknown frames go in flood",
            )
            .map_err(|m| at(&format!("fdb[{k}].mac"), m))?;
            if n.fdb[..k].iter().any(|(m, _)| *m == mac) {
                return Err(at(
                    &format!("fdb[{k}].mac"),
                    format!("{mac} is listed twice; a MAC is behind one VTEP"),
                ));
            }
            check_vtep(self.local, dst).map_err(|m| at(&format!("fdb[{k}].dst"), m))?;
        }
        Ok(())
    }

    fn check_network_routes(
        &self,
        n: &NetworkSettings,
        at: &impl Fn(&str, String) -> ConfigError,
    ) -> Result<(), ConfigError> {
        for (k, (prefix, dst)) in n.routes.iter().enumerate() {
            let field = format!("routes[{k}].prefix");
            check_prefix(self.kind, prefix).map_err(|m| at(&field, m))?;
            if n.routes[..k].iter().any(|(p, _)| p == prefix) {
                return Err(at(
                    &field,
                    format!("{prefix} is listed twice; a prefix routes to one VTEP"),
                ));
            }
            check_vtep(self.local, *dst).map_err(|m| at(&format!("routes[{k}].dst"), m))?;
        }
        Ok(())
    }
}

/// Ageing, the MAC limit, the device's name and the VLAN.
fn check_limits(
    n: &NetworkSettings,
    at: &impl Fn(&str, String) -> ConfigError,
) -> Result<(), ConfigError> {
    if !(1..=MAX_AGEING_S).contains(&n.ageing_s) {
        return Err(at(
            "ageing",
            format!(
                "{} is out of range (1..={MAX_AGEING_S} seconds)",
                n.ageing_s
            ),
        ));
    }
    if !(1..=MAX_MACS).contains(&n.max_macs) {
        return Err(at(
            "max_macs",
            format!("{} is out of range (1..={MAX_MACS})", n.max_macs),
        ));
    }
    if let Some(d) = n.device.as_deref().filter(|d| !valid_ifname(d)) {
        return Err(at(
            "device",
            format!(
                "\"{d}\" is not an interface name (1 to {MAX_IFNAME} bytes, no '/', ':' or spaces)"
            ),
        ));
    }
    if let Some(v) = n.vlan.filter(|v| !(1..=4094).contains(v)) {
        return Err(at("vlan", format!("{v} is out of range (1..=4094)")));
    }
    Ok(())
}

/// Static neighbours: a unicast IP, once, with a unicast MAC.
fn check_neighbours(
    n: &NetworkSettings,
    at: &impl Fn(&str, String) -> ConfigError,
) -> Result<(), ConfigError> {
    for (k, &(ip, mac)) in n.neighbours.iter().enumerate() {
        if !unicast_ip(ip) {
            return Err(at(
                &format!("neighbours[{k}].ip"),
                format!("{ip} is not a unicast address; a neighbour entry answers for one host"),
            ));
        }
        if n.neighbours[..k].iter().any(|(i, _)| *i == ip) {
            return Err(at(
                &format!("neighbours[{k}].ip"),
                format!("{ip} is listed twice; an address has one MAC"),
            ));
        }
        neighbour_mac(mac).map_err(|m| at(&format!("neighbours[{k}].mac"), m))?;
    }
    Ok(())
}

fn neighbour_mac(mac: EthernetAddress) -> Result<(), String> {
    unicast_mac(
        mac,
        "a neighbour's MAC is a host's, unicast",
        "a neighbour's MAC is a host's, unicast",
    )
}

/// Network `b` against the earlier tunnel or network `a` (labelled
/// `earlier`): explicit devices and VLANs are each one network's.
pub(super) fn check_network_pair(
    a: &TunnelConfig,
    b: &TunnelConfig,
    earlier: &str,
    at: &impl Fn(&str, String) -> ConfigError,
) -> Result<(), ConfigError> {
    let (Some(na), Some(nb)) = (a.network.as_deref(), b.network.as_deref()) else {
        return Ok(());
    };
    if let Some(d) = nb
        .device
        .as_deref()
        .filter(|d| na.device.as_deref() == Some(*d))
    {
        return Err(at(
            "device",
            format!("\"{d}\" is already the device of {earlier}; each network needs its own"),
        ));
    }
    if let Some(v) = nb.vlan.filter(|v| na.vlan == Some(*v)) {
        return Err(at(
            "vlan",
            format!("VLAN {v} already carries {earlier}; each network needs its own vlan"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::check::{check_together, check_tunnels};
    use core::net::Ipv6Addr;

    const LOCAL: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
    const VTEP2: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2));
    const MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);

    fn net(name: &str, kind: TunnelKind, f: impl FnOnce(&mut NetworkSettings)) -> TunnelConfig {
        let mut n = NetworkSettings::default();
        f(&mut n);
        let mut t = TunnelConfig::network(name, kind, LOCAL, n);
        if kind.carries_ethernet() {
            t.vni = 1;
        }
        t
    }

    fn p2p(name: &str, kind: TunnelKind) -> TunnelConfig {
        let mut t = TunnelConfig::new(name, kind, LOCAL, VTEP2);
        if kind.carries_ethernet() {
            t.vni = 1;
        }
        t
    }

    /// The error of `ts`, as `field: message`.
    fn error(ts: &[TunnelConfig]) -> String {
        check_tunnels(ts).unwrap_err().to_string()
    }

    #[test]
    fn labels_count_networks_among_themselves() {
        let ts = [
            p2p("a", TunnelKind::Gue),
            net("x", TunnelKind::Vxlan, |_| {}),
            net("y", TunnelKind::GreInUdp, |n| n.ageing_s = 0),
        ];
        assert_eq!(
            error(&ts),
            "network[1] \"y\".ageing: 0 is out of range (1..=8000000 seconds)"
        );
        assert_eq!(network_label(3, "a b"), "network[3]");
        assert_eq!(check_tunnels(&ts[..2]), Ok(()));
    }

    #[test]
    fn point_to_point_fields_refused() {
        let mut t = net("n", TunnelKind::Vxlan, |_| {});
        t.remote = VTEP2;
        assert!(error(&[t]).starts_with(
            "network[0] \"n\".remote: not a [[network]] key: a network has many remote VTEPs"
        ));
        let mut t = net("n", TunnelKind::Vxlan, |_| {});
        t.inner_macs = vec![MAC];
        assert!(error(&[t]).starts_with("network[0] \"n\".inner_macs: not a [[network]] key"));
        let mut t = net("n", TunnelKind::Gue, |_| {});
        t.local_teid = 9;
        assert!(error(&[t]).starts_with("network[0] \"n\".local_teid: not a [[network]] key"));
        let t = net("n", TunnelKind::Gtpu, |_| {});
        assert!(error(&[t]).starts_with("network[0] \"n\".kind: gtpu is not a network kind"));
        let mut t = net("n", TunnelKind::Gue, |_| {});
        t.sessions = true;
        assert!(error(&[t]).starts_with("network[0] \"n\".sessions: "));
    }

    #[test]
    fn limits_device_vlan() {
        let e = error(&[net("n", TunnelKind::Vxlan, |n| n.max_macs = MAX_MACS + 1)]);
        assert_eq!(
            e,
            "network[0] \"n\".max_macs: 16777217 is out of range (1..=16777216)"
        );
        let e = error(&[net("n", TunnelKind::Vxlan, |n| {
            n.device = Some("a:b".into())
        })]);
        assert_eq!(e, "network[0] \"n\".device: \"a:b\" is not an interface name (1 to 15 bytes, no '/', ':' or spaces)");
        let e = error(&[net("n", TunnelKind::Vxlan, |n| n.vlan = Some(4095))]);
        assert_eq!(e, "network[0] \"n\".vlan: 4095 is out of range (1..=4094)");
        assert!(valid_ifname("blue0") && valid_ifname(&"x".repeat(15)));
        assert!(!valid_ifname(&"x".repeat(16)) && !valid_ifname("a\tb") && !valid_ifname("."));
        assert_eq!(default_device("blue"), "tep-blue");
        assert_eq!(default_device("a-very-long-network"), "tep-a-very-long");
    }

    #[test]
    fn layer_specific_settings() {
        let e = error(&[net("n", TunnelKind::Gue, |n| n.neigh_suppress = true)]);
        assert_eq!(e, "network[0] \"n\".neigh_suppress: not used by kind gue (ARP/ND suppression is for L2 (vxlan, geneve) networks); remove it");
        let e = error(&[net("n", TunnelKind::Gue, |n| n.fdb = vec![(MAC, VTEP2)])]);
        assert!(
            e.starts_with("network[0] \"n\".fdb: not used by kind gue"),
            "{e}"
        );
        let e = error(&[net("n", TunnelKind::Geneve, |n| {
            n.routes = vec![("10.0.0.0/8".parse().unwrap(), VTEP2)]
        })]);
        assert!(
            e.starts_with("network[0] \"n\".routes: not used by kind geneve"),
            "{e}"
        );
    }

    #[test]
    fn vteps_and_entries() {
        let v6 = IpAddr::V6(Ipv6Addr::LOCALHOST);
        let e = error(&[net("n", TunnelKind::Vxlan, |n| n.flood = vec![VTEP2, v6])]);
        assert!(
            e.starts_with("network[0] \"n\".flood[1]: ::1 is IPv6 but local 192.0.2.1 is IPv4"),
            "{e}"
        );
        let e = error(&[net("n", TunnelKind::Vxlan, |n| {
            n.fdb = vec![(MAC, VTEP2), (MAC, VTEP2)]
        })]);
        assert!(
            e.starts_with("network[0] \"n\".fdb[1].mac: 02:00:00:00:00:01 is listed twice"),
            "{e}"
        );
        let e = error(&[net("n", TunnelKind::Vxlan, |n| n.fdb = vec![(MAC, LOCAL)])]);
        assert!(
            e.starts_with("network[0] \"n\".fdb[0].dst: 192.0.2.1 is local"),
            "{e}"
        );
        let ip = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
        let e = error(&[net("n", TunnelKind::Vxlan, |n| {
            n.neighbours = vec![(ip, EthernetAddress([0; 6]))]
        })]);
        assert!(
            e.starts_with(
                "network[0] \"n\".neighbours[0].mac: 00:00:00:00:00:00 is not a usable address"
            ),
            "{e}"
        );
        let e = error(&[net("n", TunnelKind::Vxlan, |n| {
            n.neighbours = vec![(Ipv4Addr::UNSPECIFIED.into(), MAC)]
        })]);
        assert!(
            e.starts_with("network[0] \"n\".neighbours[0].ip: 0.0.0.0 is not a unicast address"),
            "{e}"
        );
        // A prefix built in code with host bits is caught too.
        let bad = crate::config::IpPrefix { addr: ip, len: 8 };
        let e = error(&[net("n", TunnelKind::Gue, |n| n.routes = vec![(bad, VTEP2)])]);
        assert_eq!(e, "network[0] \"n\".routes[0].prefix: 10.0.0.1/8 has host bits set; did you mean 10.0.0.0/8?");
    }

    #[test]
    fn between_networks_and_tunnels() {
        // Same VNI as a point-to-point tunnel, whatever its remote.
        let e = error(&[
            p2p("t", TunnelKind::Vxlan),
            net("n", TunnelKind::Vxlan, |_| {}),
        ]);
        assert!(e.starts_with("network[0] \"n\".vni: received packets could not be told apart from tunnel[0] \"t\"'s"), "{e}");
        // The network first: the tunnel is the one named.
        let e = error(&[
            net("n", TunnelKind::Vxlan, |_| {}),
            p2p("t", TunnelKind::Vxlan),
        ]);
        assert!(e.starts_with("tunnel[1] \"t\".vni: received packets could not be told apart from network[0] \"n\"'s"), "{e}");
        let e = error(&[
            net("a", TunnelKind::FouIpip, |_| {}),
            net("b", TunnelKind::FouIpip, |_| {}),
        ]);
        assert!(e.starts_with("network[1] \"b\".local_port: "), "{e}");
        let e = error(&[
            net("a", TunnelKind::Vxlan, |n| n.device = Some("d".into())),
            net("b", TunnelKind::Geneve, |n| n.device = Some("d".into())),
        ]);
        assert_eq!(e, "network[1] \"b\".device: \"d\" is already the device of network[0] \"a\"; each network needs its own");
        let e = error(&[
            net("a", TunnelKind::Vxlan, |n| n.vlan = Some(9)),
            net("b", TunnelKind::Geneve, |n| n.vlan = Some(9)),
        ]);
        assert_eq!(e, "network[1] \"b\".vlan: VLAN 9 already carries network[0] \"a\"; each network needs its own vlan");
        let e = error(&[
            p2p("a", TunnelKind::Gue),
            net("a", TunnelKind::GreInUdp, |_| {}),
        ]);
        assert!(
            e.starts_with("network[0].name: \"a\" is already the name of tunnel[0] \"a\""),
            "{e}"
        );
        // A network's index is 16 bits.
        let many: Vec<_> = (0..=crate::config::MAX_NETWORKS)
            .map(|i| net(&format!("n{i}"), TunnelKind::Gue, |_| {}))
            .collect();
        assert_eq!(
            check_together(&many).unwrap_err().to_string(),
            "network[65535] \"n65535\".name: more than 65535 networks (a network's index is 16 bits)"
        );
        // Networks stay out of the default-L2-tunnel rule: a default VXLAN
        // tunnel and a VXLAN network of another VNI live together.
        let mut other = net("n", TunnelKind::Vxlan, |_| {});
        other.vni = 2;
        assert_eq!(check_tunnels(&[p2p("t", TunnelKind::Vxlan), other]), Ok(()));
    }
}
