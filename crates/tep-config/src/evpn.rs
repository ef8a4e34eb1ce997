//! `[evpn]`: how tep meets FRR for the networks with `control = "evpn"`
//! (docs/evpn.md). zebra reads a VNI only from a kernel VXLAN device on a
//! bridge; tep keeps one per EVPN network, on a UDP port of its own.

use crate::file::Config;
use crate::host::Capabilities;
use crate::value::{in_range, Int};
use serde::Deserialize;
use tep_dataplane::config::{ConfigError, Control};
use tep_dataplane::TunnelKind;

/// The kernel devices' default port: not 4789, which tep's own sockets
/// take (the kernel binds the wildcard address of a VXLAN device's port).
pub const DEFAULT_KERNEL_PORT: u16 = 4790;

/// `[evpn]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EvpnConfig {
    /// The UDP port of the kernel VXLAN devices (`port`): no traffic goes
    /// through them, but the kernel binds it.
    pub port: u16,
    /// tep creates the bridge, the VXLAN device and the local-MAC port of
    /// each EVPN network, and removes them when it stops (`create`,
    /// default true); false: the operator made the VXLAN device
    /// (`evpn_device`) and its bridge, tep adds only its port.
    pub create: bool,
}

impl Default for EvpnConfig {
    fn default() -> Self {
        EvpnConfig {
            port: DEFAULT_KERNEL_PORT,
            create: true,
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawEvpn {
    port: Option<Int>,
    create: Option<bool>,
}

impl RawEvpn {
    pub(super) fn validate(self) -> Result<EvpnConfig, ConfigError> {
        let d = EvpnConfig::default();
        Ok(EvpnConfig {
            port: match self.port {
                Some(v) => in_range(v, 1, 65535).map_err(|message| ConfigError {
                    field: "evpn.port".to_string(),
                    message,
                })? as u16,
                None => d.port,
            },
            create: self.create.unwrap_or(d.create),
        })
    }
}

/// The kernel's port is no VXLAN tunnel's or network's own (its socket
/// would take the wildcard address of tep's port), and gateway mode keeps
/// the capability the FDB writes need.
pub(super) fn check_evpn(c: &Config) -> Result<(), ConfigError> {
    let evpn = c.tunnels.iter().any(|t| {
        t.network
            .as_deref()
            .is_some_and(|n| matches!(n.control, Control::Evpn { .. }))
    });
    if !evpn {
        return Ok(());
    }
    let port = c.evpn.port;
    if let Some(t) = c
        .tunnels
        .iter()
        .find(|t| t.kind == TunnelKind::Vxlan && t.local_port == port)
    {
        return Err(ConfigError {
            field: "evpn.port".to_string(),
            message: format!(
                "{port} is \"{}\"'s port; the kernel's VXLAN device binds its port on every address, so give the kernel devices another (default {DEFAULT_KERNEL_PORT})",
                t.name
            ),
        });
    }
    let (section, user, capabilities) = match &c.gateway {
        Some(g) => ("gateway", &g.user, g.capabilities),
        None => ("host", &c.host.user, c.host.capabilities),
    };
    if user.is_some() && capabilities == Capabilities::None {
        return Err(ConfigError {
            field: format!("{section}.capabilities"),
            message: "\"none\" leaves tep unable to write the bridge FDB its EVPN networks' local MACs go to; keep \"net_admin\"".to_string(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{err, network, ok};

    fn evpn_network(extra: &str) -> String {
        network("blue", "vxlan", &format!("control = \"evpn\"\n{extra}"))
    }

    #[test]
    fn defaults_and_keys() {
        let c = ok(&format!("[host]\n{}", evpn_network("")));
        let n = c.tunnels[0].network.as_deref().unwrap();
        assert_eq!(n.control, Control::Evpn { device: None });
        assert_eq!(c.evpn, EvpnConfig::default());
        // Room for as many remote MACs from BGP as it may learn.
        assert_eq!(c.fdb_entries(), 2 * n.max_macs as usize);
        let c = ok(&format!(
            "[host]\n[evpn]\nport = 4999\ncreate = false\n{}",
            evpn_network("evpn_device = \"vx100\"\n")
        ));
        assert_eq!(
            c.evpn,
            EvpnConfig {
                port: 4999,
                create: false
            }
        );
        let n = c.tunnels[0].network.as_deref().unwrap();
        assert_eq!(
            n.control,
            Control::Evpn {
                device: Some("vx100".to_string())
            }
        );
        let c = ok(&format!(
            "[host]\n{}",
            network("blue", "vxlan", "control = \"static\"\n")
        ));
        assert_eq!(
            c.tunnels[0].network.as_deref().unwrap().control,
            Control::Static
        );
    }

    #[test]
    fn refusals_name_the_field() {
        let cases = [
            (
                network("blue", "vxlan", "control = \"bgp\"\n"),
                "network[0] \"blue\".control",
                "\"bgp\" is not one of",
            ),
            (
                network("blue", "geneve", "control = \"evpn\"\n"),
                "network[0] \"blue\".control",
                "EVPN goes through the kernel VXLAN device",
            ),
            (
                network("blue", "vxlan", "evpn_device = \"vx1\"\n"),
                "network[0] \"blue\".evpn_device",
                "names the kernel VXLAN device",
            ),
            (
                evpn_network("evpn_device = \"a/b\"\n"),
                "network[0] \"blue\".evpn_device",
                "\"a/b\" is not an interface name",
            ),
            (
                format!("[evpn]\nport = 4789\n{}", evpn_network("")),
                "evpn.port",
                "4789 is \"blue\"'s port",
            ),
            (
                format!("[evpn]\nport = 0\n{}", evpn_network("")),
                "evpn.port",
                "0 is out of range",
            ),
            (
                format!("[evpn]\nports = 1\n{}", evpn_network("")),
                "evpn.ports",
                "unknown field `ports`",
            ),
            (
                format!(
                    "[host]\nuser = \"nobody\"\ncapabilities = \"none\"\n{}",
                    evpn_network("")
                ),
                "host.capabilities",
                "\"none\" leaves tep unable",
            ),
        ];
        for (text, field, message) in cases {
            let e = err(&format!("[host]\n{text}").replacen("[host]\n[host]\n", "[host]\n", 1));
            assert_eq!(e.field, field, "{text}: {e}");
            assert!(e.message.contains(message), "{text}: {e}");
        }
    }

    #[test]
    fn no_evpn_network_no_port_rule() {
        // [evpn] alone changes nothing for static networks on 4790.
        let c = ok(&format!(
            "[host]\n[evpn]\nport = 4789\n{}",
            network("blue", "vxlan", "")
        ));
        assert_eq!(c.evpn.port, 4789);
    }
}
