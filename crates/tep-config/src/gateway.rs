//! The `[gateway]` section of `tep.toml`: `tep run` between two network
//! interfaces over AF_XDP, tep writing whole frames, the kernel keeping
//! ARP, ND and routing. The sibling of `[host]`; a file has one of the two.
//!
//! Pure data like the rest of the config: the daemon acts on it.

use crate::host::{
    control_group, device_name, listen_address, ranged, run_as, socket_path, workers, Capabilities,
    DEFAULT_ADAPTIVE_POLL_US,
};
use core::net::SocketAddr;
use serde::Deserialize;
use tep_dataplane::config::ConfigError;
use tep_dataplane::{DEFAULT_HOPS, DEFAULT_ROUTES};

/// How the XDP program is attached to an interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XdpMode {
    /// In the driver (`XDP_FLAGS_DRV_MODE`): before the kernel allocates
    /// anything for the frame.
    Native,
    /// In the kernel's generic path (`XDP_FLAGS_SKB_MODE`): any driver,
    /// after the frame became an skb.
    Generic,
    /// Native where the driver has it, else generic (logged).
    Auto,
}

impl XdpMode {
    /// The name in the config and in `tep show`.
    pub const fn name(self) -> &'static str {
        match self {
            XdpMode::Native => "native",
            XdpMode::Generic => "generic",
            XdpMode::Auto => "auto",
        }
    }
}

/// `[gateway]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GatewayConfig {
    /// Where inner packets arrive and decapsulated ones leave (the N6 /
    /// server / VM side).
    pub inner: String,
    /// Where tunnel packets arrive and leave.
    pub underlay: String,
    /// Queues: one worker thread and one AF_XDP socket per interface for
    /// each (queue `i` of both interfaces).
    pub queues: usize,
    /// The CPU of each worker, in order (fewer than `queues`: the rest
    /// float).
    pub cpus: Vec<usize>,
    /// How the XDP programs attach.
    pub xdp_mode: XdpMode,
    /// Descriptors in each AF_XDP ring (a power of two).
    pub ring_size: u32,
    /// Microseconds a worker keeps polling after its last packet before it
    /// sleeps (see `host.busy_poll_us`).
    pub busy_poll_us: u32,
    /// Polling while packets come closer together than this (see
    /// `host.adaptive_poll_us`).
    pub adaptive_poll_us: u32,
    /// Prometheus metrics listen address; `None`: off.
    pub metrics: Option<SocketAddr>,
    /// The control socket (`tep show`, `tep reload`, `tep trace`).
    pub control: String,
    /// Members may use the control socket (see `host.control_group`).
    pub control_group: Option<String>,
    /// Destinations each worker remembers the next hop of (a bounded
    /// cache: a scan of new destinations evicts idle ones).
    pub route_cache: usize,
    /// Next hops (gateways, on-link neighbours) tep writes frames to, at
    /// most; past it the idlest is replaced.
    pub next_hops: usize,
    /// The user the daemon becomes once the programs are attached and the
    /// sockets and listeners open; `None`: it stays who started it.
    pub user: Option<String>,
    /// Its group; `None`: the user's primary group.
    pub group: Option<String>,
    /// What the daemon keeps after becoming `user`: CAP_NET_ADMIN lets the
    /// next-hop resolver ask the kernel to resolve and keep probing next
    /// hops (RTM_NEWNEIGH).
    pub capabilities: Capabilities,
}

/// The default ring size: a few vectors in flight each way.
const DEFAULT_RING_SIZE: u32 = 2048;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawGateway {
    inner: Option<String>,
    underlay: Option<String>,
    queues: Option<i64>,
    cpus: Option<Vec<i64>>,
    xdp_mode: Option<String>,
    ring_size: Option<i64>,
    busy_poll_us: Option<i64>,
    adaptive_poll_us: Option<i64>,
    metrics: Option<String>,
    control: Option<String>,
    control_group: Option<String>,
    route_cache: Option<i64>,
    next_hops: Option<i64>,
    user: Option<String>,
    group: Option<String>,
    capabilities: Option<String>,
}

const SECTION: &str = "gateway";

fn err(field: &str, message: String) -> ConfigError {
    ConfigError {
        field: format!("{SECTION}.{field}"),
        message,
    }
}

impl RawGateway {
    pub(super) fn validate(self) -> Result<GatewayConfig, ConfigError> {
        let required = |field: &str, v: Option<String>| match v {
            Some(name) => device_name(SECTION, field, Some(name), ""),
            None => Err(err(field, "missing: the interface's name".to_string())),
        };
        let inner = required("inner", self.inner)?;
        let underlay = required("underlay", self.underlay)?;
        if inner == underlay {
            return Err(err(
                "underlay",
                format!("\"{underlay}\" is also `inner`: the two sides need their own interfaces"),
            ));
        }
        let (queues, cpus) = workers(SECTION, self.queues, self.cpus)?;
        let xdp_mode = match self.xdp_mode.as_deref() {
            None | Some("auto") => XdpMode::Auto,
            Some("native") => XdpMode::Native,
            Some("generic") => XdpMode::Generic,
            Some(other) => {
                return Err(err(
                    "xdp_mode",
                    format!("\"{other}\" is not one of \"native\", \"generic\", \"auto\""),
                ))
            }
        };
        let ring_size = match self.ring_size {
            Some(v) => {
                let v = ranged(SECTION, "ring_size", v, 64, 16384)? as u32;
                if !v.is_power_of_two() {
                    return Err(err(
                        "ring_size",
                        format!("{v} is not a power of two (AF_XDP rings are)"),
                    ));
                }
                v
            }
            None => DEFAULT_RING_SIZE,
        };
        let busy_poll_us = match self.busy_poll_us {
            Some(v) => ranged(SECTION, "busy_poll_us", v, 0, 1_000_000)? as u32,
            None => 0,
        };
        let adaptive_poll_us = match self.adaptive_poll_us {
            Some(v) => ranged(SECTION, "adaptive_poll_us", v, 0, 1_000_000)? as u32,
            None => DEFAULT_ADAPTIVE_POLL_US,
        };
        let (user, group, capabilities) =
            run_as(SECTION, self.user, self.group, self.capabilities)?;
        Ok(GatewayConfig {
            inner,
            underlay,
            queues,
            cpus,
            xdp_mode,
            ring_size,
            busy_poll_us,
            adaptive_poll_us,
            metrics: listen_address(SECTION, self.metrics)?,
            control: socket_path(SECTION, self.control)?,
            control_group: control_group(SECTION, self.control_group)?,
            route_cache: match self.route_cache {
                Some(v) => ranged(SECTION, "route_cache", v, 64, 1 << 24)? as usize,
                None => DEFAULT_ROUTES,
            },
            next_hops: match self.next_hops {
                Some(v) => ranged(SECTION, "next_hops", v, 4, 1 << 16)? as usize,
                None => DEFAULT_HOPS,
            },
            user,
            group,
            capabilities,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Config, RunMode, DEFAULT_CONTROL};

    fn gateway_error(body: &str) -> String {
        Config::parse(&format!("[gateway]\n{body}\n"))
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn defaults_and_every_field() {
        let c = Config::parse("[gateway]\ninner = \"eth1\"\nunderlay = \"eth2\"\n").unwrap();
        let g = c.gateway.clone().unwrap();
        assert_eq!(
            g,
            GatewayConfig {
                inner: "eth1".into(),
                underlay: "eth2".into(),
                queues: 1,
                cpus: vec![],
                xdp_mode: XdpMode::Auto,
                ring_size: 2048,
                busy_poll_us: 0,
                adaptive_poll_us: DEFAULT_ADAPTIVE_POLL_US,
                metrics: None,
                control: DEFAULT_CONTROL.into(),
                control_group: None,
                route_cache: 65536,
                next_hops: 1024,
                user: None,
                group: None,
                capabilities: Capabilities::NetAdmin,
            }
        );
        assert_eq!(c.run_mode(), Ok(RunMode::Gateway));
        let c = Config::parse(
            "[gateway]\ninner = \"n6\"\nunderlay = \"n3\"\nqueues = 2\ncpus = [1]\n\
             xdp_mode = \"generic\"\nring_size = 512\nbusy_poll_us = 50\nadaptive_poll_us = 0\n\
             metrics = \"127.0.0.1:9464\"\ncontrol = \"/run/tep-gw.sock\"\ncontrol_group = \"tep\"\n\
             route_cache = 4096\nnext_hops = 64\n\
             user = \"tep\"\ngroup = \"tep\"\ncapabilities = \"none\"\n",
        )
        .unwrap();
        let g = c.gateway.unwrap();
        assert_eq!(
            (g.queues, g.cpus, g.xdp_mode),
            (2, vec![1], XdpMode::Generic)
        );
        assert_eq!(
            (g.ring_size, g.busy_poll_us, g.adaptive_poll_us),
            (512, 50, 0)
        );
        assert_eq!(g.metrics, Some("127.0.0.1:9464".parse().unwrap()));
        assert_eq!(g.control, "/run/tep-gw.sock");
        assert_eq!(g.control_group.as_deref(), Some("tep"));
        assert_eq!((g.route_cache, g.next_hops), (4096, 64));
        assert_eq!(
            (g.user.as_deref(), g.group.as_deref(), g.capabilities),
            (Some("tep"), Some("tep"), Capabilities::None)
        );
    }

    #[test]
    fn errors_name_the_field() {
        assert_eq!(
            gateway_error("underlay = \"eth2\""),
            "gateway.inner: missing: the interface's name"
        );
        assert_eq!(
            gateway_error("inner = \"eth1\"\nunderlay = \"eth1\""),
            "gateway.underlay: \"eth1\" is also `inner`: the two sides need their own interfaces"
        );
        assert!(gateway_error("inner = \"a/b\"\nunderlay = \"c\"").starts_with("gateway.inner: "));
        assert_eq!(
            gateway_error("inner = \"a\"\nunderlay = \"b\"\nxdp_mode = \"fast\""),
            "gateway.xdp_mode: \"fast\" is not one of \"native\", \"generic\", \"auto\""
        );
        assert_eq!(
            gateway_error("inner = \"a\"\nunderlay = \"b\"\nring_size = 1000"),
            "gateway.ring_size: 1000 is not a power of two (AF_XDP rings are)"
        );
        assert_eq!(
            gateway_error("inner = \"a\"\nunderlay = \"b\"\nqueues = 1\ncpus = [0, 1]"),
            "gateway.cpus: 2 CPUs for 1 queue(s): one CPU per worker at most"
        );
        for (field, bad) in [("route_cache", 63), ("next_hops", 70000)] {
            assert!(
                gateway_error(&format!("inner = \"a\"\nunderlay = \"b\"\n{field} = {bad}"))
                    .starts_with(&format!("gateway.{field}: {bad} ")),
                "{field}"
            );
        }
        assert!(gateway_error("inner = \"a\"\nunderlay = \"b\"\nmtu = 1500")
            .contains("unknown field `mtu`"));
        assert!(gateway_error("inner = 3\nunderlay = \"b\"").starts_with("gateway.inner: "));
        assert_eq!(
            gateway_error("inner = \"a\"\nunderlay = \"b\"\ncontrol_group = \"\""),
            "gateway.control_group: \"\" is not a user or group name"
        );
        assert_eq!(
            gateway_error("inner = \"a\"\nunderlay = \"b\"\ngroup = \"tep\""),
            "gateway.group: set, but gateway.user is not"
        );
        assert_eq!(
            gateway_error("inner = \"a\"\nunderlay = \"b\"\nuser = \"a b\""),
            "gateway.user: \"a b\" is not a user or group name"
        );
        assert_eq!(
            gateway_error(
                "inner = \"a\"\nunderlay = \"b\"\nuser = \"tep\"\ncapabilities = \"all\""
            ),
            "gateway.capabilities: \"all\" is not \"net_admin\" or \"none\""
        );
    }

    #[test]
    fn tep_run_needs_one_section_of_the_two() {
        let both = Config::parse("[host]\n[gateway]\ninner = \"a\"\nunderlay = \"b\"\n").unwrap();
        assert_eq!(
            both.run_mode().unwrap_err().to_string(),
            "gateway: a config runs host mode ([host]) or gateway mode ([gateway]), not both"
        );
        let neither = Config::parse("").unwrap();
        assert_eq!(
            neither.run_mode().unwrap_err().to_string(),
            "host: `tep run` needs a [host] section (TUN/TAP and sockets) or a [gateway] section (two interfaces over AF_XDP)"
        );
        assert_eq!(
            Config::parse("[host]\n").unwrap().run_mode(),
            Ok(RunMode::Host)
        );
    }
}
