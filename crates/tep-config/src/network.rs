//! `[[network]]` and `[overlay]`: multipoint networks typed into the
//! model (their wire keys through the same function as `[[tunnel]]`'s),
//! and the rules that need the rest of the file (`[host]`'s devices,
//! `[gateway]`'s untagged network, `[overlay]`'s bounds).

use crate::file::{Config, OverlayConfig};
use crate::parse::{in_range, mac_syntax, parse_ip, Int, RawTunnel, Section};
use core::net::IpAddr;
use serde::Deserialize;
use std::collections::HashSet;
use tep_dataplane::config::{
    default_device, network_error, network_key_not_used, ConfigError, IpPrefix, NetworkSettings,
    TunnelConfig, MAX_AGEING_S, MAX_MACS,
};
use tep_wire::ethernet::EthernetAddress;

/// The largest `[overlay] fdb_entries` (the table is allocated whole).
pub const MAX_FDB_ENTRIES: usize = 1 << 26;
/// The largest `[overlay] max_vteps` (the registry is allocated whole).
pub const MAX_VTEPS: u32 = 1 << 20;

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

impl RawTunnel {
    /// Types a `[[network]]`: the keys it shares with `[[tunnel]]`, then
    /// its own; the rules on typed values are [`TunnelConfig::check`].
    pub(super) fn validate_network(self, index: usize) -> Result<TunnelConfig, ConfigError> {
        let mut t = self.typed(Section::Network, index)?;
        let name = t.name.clone();
        let at = |field: &str, message: String| network_error(index, Some(&name), field, message);
        for key in self.network_keys_given() {
            if let Some(m) = network_key_not_used(t.kind, key) {
                return Err(at(key, m));
            }
        }
        t.network = Some(Box::new(self.settings(&at)?));
        Ok(t)
    }

    /// The `[[network]]` keys given (refused in a `[[tunnel]]`).
    pub(super) fn network_keys_given(&self) -> Vec<&'static str> {
        [
            ("flood", self.flood.is_some()),
            ("learning", self.learning.is_some()),
            ("ageing", self.ageing.is_some()),
            ("max_macs", self.max_macs.is_some()),
            ("neigh_suppress", self.neigh_suppress.is_some()),
            ("device", self.device.is_some()),
            ("vlan", self.vlan.is_some()),
            ("fdb", self.fdb.is_some()),
            ("neighbours", self.neighbours.is_some()),
            ("routes", self.routes.is_some()),
        ]
        .into_iter()
        .filter_map(|(k, given)| given.then_some(k))
        .collect()
    }

    fn settings(
        &self,
        at: &impl Fn(&str, String) -> ConfigError,
    ) -> Result<NetworkSettings, ConfigError> {
        let d = NetworkSettings::default();
        let mut n = NetworkSettings {
            learning: self.learning.unwrap_or(d.learning),
            neigh_suppress: self.neigh_suppress.unwrap_or(d.neigh_suppress),
            device: self.device.clone(),
            ..d
        };
        if let Some(v) = self.ageing {
            n.ageing_s =
                in_range(v, 1, MAX_AGEING_S).map_err(|m| at("ageing", format!("{m}; seconds")))?;
        }
        if let Some(v) = self.max_macs {
            n.max_macs = in_range(v, 1, MAX_MACS).map_err(|m| at("max_macs", m))?;
        }
        if let Some(v) = self.vlan {
            n.vlan = Some(in_range(v, 1, 4094).map_err(|m| at("vlan", m))? as u16);
        }
        for (k, a) in self.flood.iter().flatten().enumerate() {
            n.flood
                .push(parse_ip(a).map_err(|m| at(&format!("flood[{k}]"), m))?);
        }
        self.entries(&mut n, at)?;
        Ok(n)
    }

    /// The static entries: fdb, neighbours, routes.
    fn entries(
        &self,
        n: &mut NetworkSettings,
        at: &impl Fn(&str, String) -> ConfigError,
    ) -> Result<(), ConfigError> {
        let ip = |s: &str, field: &str| parse_ip(s).map_err(|m| at(field, m));
        let mac = |s: &str, field: &str| -> Result<EthernetAddress, ConfigError> {
            mac_syntax(s.trim()).map_err(|m| at(field, m))
        };
        for (k, e) in self.fdb.iter().flatten().enumerate() {
            let f = |key: &str| format!("fdb[{k}].{key}");
            let m = required(&e.mac, &f("mac"), "the MAC of the entry", at)?;
            let d = required(&e.dst, &f("dst"), "the VTEP the MAC is behind", at)?;
            n.fdb.push((mac(m, &f("mac"))?, ip(d, &f("dst"))?));
        }
        for (k, e) in self.neighbours.iter().flatten().enumerate() {
            let f = |key: &str| format!("neighbours[{k}].{key}");
            let i = required(&e.ip, &f("ip"), "the neighbour's IP address", at)?;
            let m = required(&e.mac, &f("mac"), "the neighbour's MAC", at)?;
            n.neighbours.push((ip(i, &f("ip"))?, mac(m, &f("mac"))?));
        }
        for (k, e) in self.routes.iter().flatten().enumerate() {
            let f = |key: &str| format!("routes[{k}].{key}");
            let p = required(&e.prefix, &f("prefix"), "the inner prefix routed", at)?;
            let d = required(&e.dst, &f("dst"), "the VTEP the prefix is behind", at)?;
            let p: IpPrefix = p.trim().parse().map_err(|m| at(&f("prefix"), m))?;
            n.routes.push((p, ip(d, &f("dst"))?));
        }
        Ok(())
    }
}

/// The rules on networks that need the rest of the file: devices (host
/// mode) and VLANs (gateway mode), and `[overlay]`'s bounds.
pub(super) fn check_networks(c: &Config) -> Result<(), ConfigError> {
    let networks: Vec<&TunnelConfig> = c.tunnels.iter().filter(|t| t.is_network()).collect();
    let mut untagged: Option<usize> = None;
    for (index, t) in networks.iter().enumerate() {
        let Some(n) = t.network.as_deref() else {
            continue;
        };
        let at = |field: &str, message: String| network_error(index, Some(&t.name), field, message);
        if c.gateway.is_some() {
            if n.device.is_some() {
                return Err(at(
                    "device",
                    "host mode's (the network's TAP or TUN); in gateway mode a network is told apart on the inner interface by its vlan".to_string(),
                ));
            }
            if n.vlan.is_none() {
                if let Some(first) = untagged {
                    return Err(at(
                        "vlan",
                        format!(
                            "missing: {} is already the untagged network on the inner interface; give this one a vlan (1..=4094)",
                            label(&networks, first)
                        ),
                    ));
                }
                untagged = Some(index);
            }
        } else {
            check_host_device(c, &networks, index, &at)?;
        }
    }
    check_overlay(c, &networks)
}

fn label(networks: &[&TunnelConfig], index: usize) -> String {
    tep_dataplane::config::network_label(index, &networks[index].name)
}

/// Host mode: the network's device (its own or the default) is no other
/// network's and not `[host]`'s TUN or TAP; a VLAN has no meaning there.
fn check_host_device(
    c: &Config,
    networks: &[&TunnelConfig],
    index: usize,
    at: &impl Fn(&str, String) -> ConfigError,
) -> Result<(), ConfigError> {
    let device_of = |t: &TunnelConfig| {
        t.network
            .as_deref()
            .and_then(|n| n.device.clone())
            .unwrap_or_else(|| default_device(&t.name))
    };
    let t = networks[index];
    if c.host_given && t.network.as_deref().is_some_and(|n| n.vlan.is_some()) {
        return Err(at(
            "vlan",
            "gateway mode's (the 802.1Q VLAN on the inner interface); in host mode a network has its own device".to_string(),
        ));
    }
    let device = device_of(t);
    for (what, host) in [("tun", &c.host.tun), ("tap", &c.host.tap)] {
        if device == *host {
            return Err(at(
                "device",
                format!("\"{device}\" is host.{what}, the point-to-point tunnels' device; give the network its own"),
            ));
        }
    }
    if let Some(i) = (0..index).find(|&i| device_of(networks[i]) == device) {
        return Err(at(
            "device",
            format!(
                "\"{device}\" is already the device of {}; each network needs its own (a default is \"tep-\" and the name, cut to 15 bytes)",
                label(networks, i)
            ),
        ));
    }
    Ok(())
}

/// The static entries fit `[overlay]`'s tables.
fn check_overlay(c: &Config, networks: &[&TunnelConfig]) -> Result<(), ConfigError> {
    let settings = networks.iter().filter_map(|t| t.network.as_deref());
    let mut vteps: HashSet<IpAddr> = HashSet::new();
    let mut statics = 0usize;
    for n in settings {
        vteps.extend(n.flood.iter().copied());
        vteps.extend(n.fdb.iter().map(|e| e.1));
        vteps.extend(n.routes.iter().map(|e| e.1));
        statics += n.fdb.len();
    }
    if vteps.len() > c.overlay.max_vteps as usize {
        return Err(ConfigError {
            field: "overlay.max_vteps".to_string(),
            message: format!(
                "{} is fewer than the {} remote VTEPs the networks name",
                c.overlay.max_vteps,
                vteps.len()
            ),
        });
    }
    if let Some(cap) = c.overlay.fdb_entries.filter(|&cap| cap < statics) {
        return Err(ConfigError {
            field: "overlay.fdb_entries".to_string(),
            message: format!(
                "{cap} is fewer than the {statics} static fdb entries of the networks"
            ),
        });
    }
    Ok(())
}
