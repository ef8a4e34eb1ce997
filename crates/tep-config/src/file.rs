//! The whole `tep.toml`, checked: the tunnel model the dataplane is built
//! from, and the sections of the daemon around it.

use crate::gateway::GatewayConfig;
use crate::host::HostConfig;
use crate::pfcp::PfcpConfig;
use tep_dataplane::config::{check_tunnels, ConfigError, DataplaneConfig, TunnelConfig};

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
}

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
                .map(|n| n.max_macs as usize + n.fdb.len())
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
        crate::network::check_networks(self)
    }
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
