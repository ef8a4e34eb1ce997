//! The whole `tep.toml`, checked: the tunnel model the dataplane is built
//! from, and the sections of the daemon around it.

use crate::evpn::{check_evpn, EvpnConfig};
use crate::gateway::GatewayConfig;
use crate::host::HostConfig;
use crate::network::OverlayConfig;
use crate::pfcp::PfcpConfig;
use core::net::IpAddr;
use std::collections::HashSet;
use tep_dataplane::config::{
    check_tunnels, default_device, network_error, ConfigError, Control, DataplaneConfig,
    TunnelConfig,
};

/// The whole configuration.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Config {
    /// `[dataplane]`.
    pub dataplane: DataplaneConfig,
    /// `[[tunnel]]` in file order, then `[pfcp]`'s N3 tunnels, then
    /// `[[network]]` in file order (the tunnel index is the position; a
    /// network's errors count it among the networks).
    pub tunnels: Vec<TunnelConfig>,
    /// `[host]`: devices, queues and listeners of `tep run` in host mode
    /// (its defaults when the file has no `[host]`).
    pub host: HostConfig,
    /// Whether the file has a `[host]` section.
    pub host_given: bool,
    /// `[gateway]`: the interfaces of `tep run` in gateway mode.
    pub gateway: Option<GatewayConfig>,
    /// `[pfcp]`: tep as a UPF; its N3 tunnels are in `tunnels` too, after
    /// the `[[tunnel]]` ones.
    pub pfcp: Option<PfcpConfig>,
    /// `[overlay]`: the bounds of the tables every `[[network]]` shares
    /// (the networks themselves are in `tunnels`, after the N3 tunnels).
    pub overlay: OverlayConfig,
    /// `[evpn]`: the kernel devices of the `control = "evpn"` networks.
    pub evpn: EvpnConfig,
}

impl Config {
    /// The FDB's size: `[overlay] fdb_entries`, or what the networks'
    /// limits and static entries need.
    pub fn fdb_entries(&self) -> usize {
        self.overlay.fdb_entries.unwrap_or_else(|| {
            let need: usize = self
                .tunnels
                .iter()
                .filter(|t| t.kind.carries_ethernet())
                .filter_map(|t| t.network.as_deref())
                .map(|n| {
                    // An EVPN network's remote MACs come from BGP beside
                    // what it learns: room for as many again.
                    let evpn = matches!(n.control, Control::Evpn { .. });
                    n.max_macs as usize * (1 + usize::from(evpn)) + n.fdb.len()
                })
                .sum();
            need.max(1024)
        })
    }
}

/// The I/O mode `tep run` starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunMode {
    /// Between a TUN/TAP and kernel UDP sockets (`[host]`).
    Host,
    /// Between two network interfaces over AF_XDP (`[gateway]`).
    Gateway,
}

impl Config {
    /// The mode `tep run` starts: the one section of `[host]` and
    /// `[gateway]` the file has. Other commands (`tep pcap`) read the
    /// tunnels alone and need neither.
    pub fn run_mode(&self) -> Result<RunMode, ConfigError> {
        match (self.host_given, self.gateway.is_some()) {
            (true, false) => Ok(RunMode::Host),
            (false, true) => Ok(RunMode::Gateway),
            (true, true) => Err(ConfigError {
                field: "gateway".to_string(),
                message: "a config runs host mode ([host]) or gateway mode ([gateway]), not both"
                    .to_string(),
            }),
            (false, false) => Err(ConfigError {
                field: "host".to_string(),
                message: "`tep run` needs a [host] section (TUN/TAP and sockets) or a [gateway] section (two interfaces over AF_XDP)".to_string(),
            }),
        }
    }

    /// Checks every rule [`parse`](Config::parse) enforces that the typed
    /// values can still break: for configs built in code (tests, benches,
    /// a control plane) before the dataplane is built from them.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check_tunnels(&self.tunnels)?;
        check_networks(self)
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
    check_overlay(c, &networks)?;
    crate::pfcp_network::check_overlay_vlans(c)?;
    check_evpn(c)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{ok, prefix, v4, EXAMPLE};
    use tep_dataplane::config::IpPrefix;

    #[test]
    fn load() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let c = Config::load(&dir.join("../../examples/tep.toml")).unwrap();
        assert_eq!(c, ok(EXAMPLE));
        let missing = dir.join("no-such-tep.toml");
        let e = Config::load(&missing).unwrap_err();
        assert_eq!(e.field, missing.display().to_string());
        assert!(e.message.starts_with("cannot read the config: "), "{e}");
    }

    #[test]
    fn ip_prefix_from_str() {
        assert_eq!(
            prefix("10.1.0.0/16"),
            IpPrefix {
                addr: v4([10, 1, 0, 0]),
                len: 16
            }
        );
        assert_eq!(prefix("2001:db8:1::/48").to_string(), "2001:db8:1::/48");
        assert_eq!(prefix("192.0.2.7").len, 32);
        assert_eq!(prefix("::1").len, 128);
        assert_eq!(prefix("10.0.0.0/008").len, 8);
        assert_eq!(
            "2001:db8::1/32".parse::<IpPrefix>(),
            Err("2001:db8::1/32 has host bits set; did you mean 2001:db8::/32?".to_string())
        );
        assert_eq!(
            "::/129".parse::<IpPrefix>(),
            Err("\"::/129\": the prefix length 129 is too long for IPv6 (0..=128)".to_string())
        );
        assert_eq!(
            "10.0.0.0/x".parse::<IpPrefix>(),
            Err(
                "\"10.0.0.0/x\": the prefix length \"x\" is not a number (0..=32 for IPv4)"
                    .to_string()
            )
        );
        for bad in [
            "",
            "/8",
            "10.0.0.0/",
            "10.0.0.0/+8",
            "10.0.0.0/1000",
            "10.0.0.0/8/8",
            "fe80::1%eth0/64",
        ] {
            assert!(bad.parse::<IpPrefix>().is_err(), "{bad:?}");
        }
        let p = prefix("10.1.0.0/16");
        assert!(p.contains(v4([10, 1, 255, 1])) && !p.contains(v4([10, 2, 0, 0])));
    }
}
