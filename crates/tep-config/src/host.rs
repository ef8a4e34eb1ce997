//! The `[host]` section of `tep.toml`: what `tep run` needs beyond the
//! tunnels — the TUN/TAP devices and their addresses, MTU, queues,
//! offloads, and where the control socket and metrics listen.
//!
//! Pure data like the rest of the config: the daemon acts on it.

use core::net::SocketAddr;
use serde::Deserialize;
use tep_dataplane::config::{ConfigError, IpPrefix};

/// `[host]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostConfig {
    /// The TUN device for L3 tunnels (GUE, FOU, GRE-in-UDP, GTP-U).
    pub tun: String,
    /// The TAP device for L2 tunnels (VXLAN, Geneve).
    pub tap: String,
    /// Addresses given to the TUN.
    pub tun_addresses: Vec<IpPrefix>,
    /// Addresses given to the TAP.
    pub tap_addresses: Vec<IpPrefix>,
    /// The TUN/TAP MTU; `None`: the underlay MTU minus the largest
    /// encapsulation overhead of the tunnels on the device.
    pub mtu: Option<u32>,
    /// The MTU of the underlay path; None: the MTU of the interface that
    /// holds each tunnel's local address, asked at start.
    pub underlay_mtu: Option<u32>,
    /// Queues: one worker thread, one TUN/TAP queue and one socket per
    /// local address for each.
    pub queues: usize,
    /// The CPU of each worker, in order (fewer than `queues`: the rest
    /// float).
    pub cpus: Vec<usize>,
    /// Checksum and segmentation offloads on the TUN/TAP (virtio-net
    /// header) and the UDP sockets (UDP_SEGMENT, UDP_GRO).
    pub offloads: bool,
    /// Sockets per endpoint and worker that send tunnel traffic, each bound
    /// to its own port from the endpoint's first tunnel's `source_ports`:
    /// a flow leaves from the one its hash picks, so flows spread over that
    /// many outer source ports (underlay ECMP, the peer's RSS and
    /// SO_REUSEPORT queues). 0: tunnel traffic leaves from the receiving
    /// socket, whose port is the tunnel's.
    pub source_sockets: usize,
    /// Each UDP socket's receive and send buffer, bytes (SO_RCVBUFFORCE /
    /// SO_SNDBUFFORCE, past net.core.rmem_max as root). Overflows are
    /// counted (`udp_receive_buffer_full`).
    pub receive_buffer: usize,
    pub send_buffer: usize,
    /// Microseconds a worker keeps polling its devices and sockets after
    /// its last packet before it sleeps. 0: it sleeps at once, and every
    /// packet after a pause costs a wake-up. Polling trades a CPU for
    /// latency, as VPP's and the kernel's busy polling do.
    pub busy_poll_us: u32,
    /// Adaptive polling: while packets come less than this many
    /// microseconds apart, a worker keeps polling for that long after the
    /// last one instead of sleeping (the next packet is likely to come
    /// sooner than a sleep and a wake-up take); once they come further
    /// apart it sleeps at once, so an idle worker uses no CPU. 0: off.
    pub adaptive_poll_us: u32,
    /// Prometheus metrics listen address; `None`: off.
    pub metrics: Option<SocketAddr>,
    /// The control socket (`tep show`, `tep reload`, `tep trace`).
    pub control: String,
    /// The group whose members may use the control socket besides root
    /// (the socket becomes 0660 root:group); `None`: root's only (0600).
    pub control_group: Option<String>,
    /// Whether tunnel traffic leaves through an uplink TAP (see
    /// [`Uplink`]) or the UDP sockets.
    pub uplink: Uplink,
    /// The CPUs that carry what the uplink hands the kernel (RPS on its
    /// queues): the forwarding, and on the same machine the receiver's
    /// whole stack, which a write into a TAP otherwise runs on the
    /// writing worker's CPU. Empty: the kernel's default (no RPS).
    pub uplink_cpus: Vec<usize>,
    /// Kernel routes through the TUN for every L3 tunnel's
    /// `inner_prefixes` (as wg-quick does for AllowedIPs), kept in step
    /// with reloads and removed at exit; false: the administrator routes.
    pub routes: bool,
    /// The user the daemon becomes once its devices, sockets, routes and
    /// listeners are set up; `None`: it stays who started it.
    pub user: Option<String>,
    /// Its group; `None`: the user's primary group.
    pub group: Option<String>,
    /// What the daemon keeps after becoming `user`.
    pub capabilities: Capabilities,
}

/// `host.capabilities` and `gateway.capabilities`: what the daemon keeps
/// after dropping to `host.user` / `gateway.user`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Capabilities {
    /// `"net_admin"`: CAP_NET_ADMIN. Host mode: for reloads (routes
    /// through the TUN, sockets' buffers past the system's limits) and for
    /// following the underlay's MTU. Gateway mode: for the next-hop
    /// resolver's requests that the kernel resolve and keep probing next
    /// hops.
    #[default]
    NetAdmin,
    /// `"none"`: nothing. Host mode: a reload that changes routes is
    /// refused, new sockets get buffers within net.core.rmem_max/wmem_max.
    /// Gateway mode: next hops are learnt when the kernel resolves them
    /// for a packet tep hands it.
    None,
}

impl Capabilities {
    /// Its name in the config.
    pub fn name(self) -> &'static str {
        match self {
            Capabilities::NetAdmin => "net_admin",
            Capabilities::None => "none",
        }
    }
}

/// `host.uplink`: a TAP tep creates to send tunnel traffic through the
/// kernel's forwarding path as whole frames, a TCP super-packet
/// encapsulated once and segmented by the kernel (UDP-tunnel GSO, Linux
/// 6.17+), in place of the UDP sockets (which still receive). It serves
/// tunnels without GTP-U or remote checksum offload, with offloads on,
/// and for IPv4 underlays reverse-path filtering off.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Uplink {
    /// `"auto"`: where all of that holds, a TAP named by the kernel
    /// (`tepup0`, …); else the sockets, and the log says why.
    #[default]
    Auto,
    /// `"off"`: the sockets send.
    Off,
    /// A name: this TAP, and an error when it cannot serve.
    Device(String),
}

/// The default control socket path.
pub const DEFAULT_CONTROL: &str = "/run/tep/tep.sock";

/// The default UDP receive buffer: 16 MiB. With 4 MiB, 4 TCP streams
/// through two daemons on a 2-vCPU machine overflowed it (559-2,769
/// retransmits per 8 s in four runs); with 16 MiB none did.
pub const DEFAULT_RECEIVE_BUFFER: usize = 16 << 20;
/// The default UDP send buffer: 4 MiB.
pub const DEFAULT_SEND_BUFFER: usize = 4 << 20;

/// The default `adaptive_poll_us`, for host and gateway mode: a few
/// times what a sleep and a wake-up cost on a virtual machine (about
/// 8 µs per hop measured here), and one request/response round trip
/// through two teps (about 50 µs), so that a conversation keeps its
/// workers awake and a pause longer than that lets them sleep.
pub const DEFAULT_ADAPTIVE_POLL_US: u32 = 100;

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            tun: "tep0".to_string(),
            tap: "tep1".to_string(),
            tun_addresses: Vec::new(),
            tap_addresses: Vec::new(),
            mtu: None,
            underlay_mtu: None,
            queues: 1,
            cpus: Vec::new(),
            offloads: true,
            source_sockets: 8,
            receive_buffer: DEFAULT_RECEIVE_BUFFER,
            send_buffer: DEFAULT_SEND_BUFFER,
            busy_poll_us: 0,
            adaptive_poll_us: DEFAULT_ADAPTIVE_POLL_US,
            metrics: None,
            control: DEFAULT_CONTROL.to_string(),
            control_group: None,
            uplink: Uplink::Auto,
            uplink_cpus: Vec::new(),
            routes: true,
            user: None,
            group: None,
            capabilities: Capabilities::NetAdmin,
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHost {
    tun: Option<String>,
    tap: Option<String>,
    tun_addresses: Option<Vec<String>>,
    tap_addresses: Option<Vec<String>>,
    mtu: Option<i64>,
    underlay_mtu: Option<i64>,
    queues: Option<i64>,
    cpus: Option<Vec<i64>>,
    offloads: Option<bool>,
    source_sockets: Option<i64>,
    receive_buffer: Option<i64>,
    send_buffer: Option<i64>,
    busy_poll_us: Option<i64>,
    adaptive_poll_us: Option<i64>,
    metrics: Option<String>,
    control: Option<String>,
    control_group: Option<String>,
    uplink: Option<String>,
    uplink_cpus: Option<Vec<i64>>,
    routes: Option<bool>,
    user: Option<String>,
    group: Option<String>,
    capabilities: Option<String>,
}

const SECTION: &str = "host";

fn err(field: &str, message: String) -> ConfigError {
    section_err(SECTION, field, message)
}

/// An error about `field` of `[section]`.
fn section_err(section: &str, field: &str, message: String) -> ConfigError {
    ConfigError {
        field: format!("{section}.{field}"),
        message,
    }
}

/// Linux interface names: 1..=15 bytes, no '/', no whitespace, not "." or "..".
pub(super) fn device_name(
    section: &str,
    field: &str,
    v: Option<String>,
    default: &str,
) -> Result<String, ConfigError> {
    let Some(name) = v else {
        return Ok(default.to_string());
    };
    let ok = (1..=15).contains(&name.len())
        && name != "."
        && name != ".."
        && !name.contains('/')
        && !name.contains(':')
        && !name.chars().any(char::is_whitespace);
    if ok {
        Ok(name)
    } else {
        Err(section_err(
            section,
            field,
            format!(
                "\"{name}\" is not an interface name (1 to 15 characters, no '/', ':' or spaces)"
            ),
        ))
    }
}

/// Interface addresses keep their host bits (`10.0.0.1/24`).
fn addresses(field: &str, v: Option<Vec<String>>) -> Result<Vec<IpPrefix>, ConfigError> {
    v.unwrap_or_default()
        .iter()
        .map(|s| IpPrefix::parse_address(s).map_err(|m| err(field, m)))
        .collect()
}

pub(super) fn ranged(
    section: &str,
    field: &str,
    v: i64,
    lo: i64,
    hi: i64,
) -> Result<i64, ConfigError> {
    if (lo..=hi).contains(&v) {
        Ok(v)
    } else {
        Err(section_err(
            section,
            field,
            format!("{v} is out of range ({lo}..={hi})"),
        ))
    }
}

/// `queues` (1 by default) and `cpus`: at most one CPU per worker.
pub(super) fn workers(
    section: &str,
    queues: Option<i64>,
    cpus: Option<Vec<i64>>,
) -> Result<(usize, Vec<usize>), ConfigError> {
    let queues = match queues {
        Some(v) => ranged(section, "queues", v, 1, 64)? as usize,
        None => 1,
    };
    let cpus = cpus
        .unwrap_or_default()
        .into_iter()
        .map(|c| ranged(section, "cpus", c, 0, 4095).map(|c| c as usize))
        .collect::<Result<Vec<_>, _>>()?;
    if cpus.len() > queues {
        return Err(section_err(
            section,
            "cpus",
            format!(
                "{} CPUs for {queues} queue(s): one CPU per worker at most",
                cpus.len()
            ),
        ));
    }
    Ok((queues, cpus))
}

/// `metrics`: a listen address, or none.
pub(super) fn listen_address(
    section: &str,
    v: Option<String>,
) -> Result<Option<SocketAddr>, ConfigError> {
    v.map(|s| {
        s.parse::<SocketAddr>().map_err(|_| {
            section_err(
                section,
                "metrics",
                format!(
                    "\"{s}\" is not a listen address like \"127.0.0.1:9464\" or \"[::1]:9464\""
                ),
            )
        })
    })
    .transpose()
}

/// A user or group name as the password database spells them: not
/// empty, no ':' (its field separator), no whitespace or NUL. Whether it
/// exists is asked at start, where the database is.
fn account_name(
    section: &str,
    field: &str,
    v: Option<String>,
) -> Result<Option<String>, ConfigError> {
    match v {
        Some(n)
            if n.is_empty()
                || n.len() > 256
                || n.contains(':')
                || n.contains('\0')
                || n.chars().any(char::is_whitespace) =>
        {
            Err(section_err(
                section,
                field,
                format!("{n:?} is not a user or group name"),
            ))
        }
        v => Ok(v),
    }
}

/// `user`, `group` and `capabilities` of `[section]` (host or gateway):
/// whom the daemon becomes once set up, and what it keeps.
pub(super) fn run_as(
    section: &str,
    user: Option<String>,
    group: Option<String>,
    capabilities: Option<String>,
) -> Result<(Option<String>, Option<String>, Capabilities), ConfigError> {
    let user = account_name(section, "user", user)?;
    let group = account_name(section, "group", group)?;
    let unset = |field: &str, why: &str| {
        section_err(
            section,
            field,
            format!("set, but {section}.user is not{why}"),
        )
    };
    if group.is_some() && user.is_none() {
        return Err(unset("group", ""));
    }
    let kept = match capabilities.as_deref() {
        None | Some("net_admin") => Capabilities::NetAdmin,
        Some("none") => Capabilities::None,
        Some(other) => {
            return Err(section_err(
                section,
                "capabilities",
                format!("\"{other}\" is not \"net_admin\" or \"none\""),
            ))
        }
    };
    if capabilities.is_some() && user.is_none() {
        return Err(unset(
            "capabilities",
            " (capabilities are dropped with the user)",
        ));
    }
    Ok((user, group, kept))
}

/// `control`: an absolute Unix socket path, by default [`DEFAULT_CONTROL`].
pub(super) fn socket_path(section: &str, v: Option<String>) -> Result<String, ConfigError> {
    match v {
        Some(p) if p.starts_with('/') && p.len() < 108 => Ok(p),
        Some(p) => Err(section_err(
            section,
            "control",
            format!("\"{p}\" is not an absolute socket path shorter than 108 bytes"),
        )),
        None => Ok(DEFAULT_CONTROL.to_string()),
    }
}

/// `control_group`: a group name; whether it exists is asked at start.
pub(super) fn control_group(
    section: &str,
    v: Option<String>,
) -> Result<Option<String>, ConfigError> {
    account_name(section, "control_group", v)
}

impl RawHost {
    pub(super) fn validate(self) -> Result<HostConfig, ConfigError> {
        let d = HostConfig::default();
        let tun = device_name(SECTION, "tun", self.tun, &d.tun)?;
        let tap = device_name(SECTION, "tap", self.tap, &d.tap)?;
        if tun == tap {
            return Err(err(
                "tap",
                format!("\"{tap}\" is also the TUN: the two devices need their own names"),
            ));
        }
        let underlay_mtu = match self.underlay_mtu {
            Some(v) => Some(ranged(SECTION, "underlay_mtu", v, 1280, 65535)? as u32),
            None => d.underlay_mtu,
        };
        let mtu = match self.mtu {
            Some(v) => Some(ranged(SECTION, "mtu", v, 576, 65535)? as u32),
            None => None,
        };
        let (queues, cpus) = workers(SECTION, self.queues, self.cpus)?;
        let source_sockets = match self.source_sockets {
            Some(v) => ranged(SECTION, "source_sockets", v, 0, 64)? as usize,
            None => d.source_sockets,
        };
        // 64 KiB (one super-packet) up to 1 GiB.
        let buffer = |field: &str, v: Option<i64>, default: usize| match v {
            Some(v) => ranged(SECTION, field, v, 65_536, 1 << 30).map(|v| v as usize),
            None => Ok(default),
        };
        let receive_buffer = buffer("receive_buffer", self.receive_buffer, d.receive_buffer)?;
        let send_buffer = buffer("send_buffer", self.send_buffer, d.send_buffer)?;
        let busy_poll_us = match self.busy_poll_us {
            Some(v) => ranged(SECTION, "busy_poll_us", v, 0, 1_000_000)? as u32,
            None => d.busy_poll_us,
        };
        let adaptive_poll_us = match self.adaptive_poll_us {
            Some(v) => ranged(SECTION, "adaptive_poll_us", v, 0, 1_000_000)? as u32,
            None => d.adaptive_poll_us,
        };
        let metrics = listen_address(SECTION, self.metrics)?;
        let control = socket_path(SECTION, self.control)?;
        let control_group = control_group(SECTION, self.control_group)?;
        let uplink = match self.uplink.as_deref() {
            None | Some("auto") => Uplink::Auto,
            Some("off") => Uplink::Off,
            Some(_) => {
                let name = device_name(SECTION, "uplink", self.uplink, "")?;
                if name == tun || name == tap {
                    return Err(err(
                        "uplink",
                        format!("\"{name}\" is also the TUN or TAP: the uplink needs its own name"),
                    ));
                }
                Uplink::Device(name)
            }
        };
        let uplink_cpus = self
            .uplink_cpus
            .unwrap_or_default()
            .into_iter()
            .map(|c| ranged(SECTION, "uplink_cpus", c, 0, 4095).map(|c| c as usize))
            .collect::<Result<Vec<_>, _>>()?;
        if !uplink_cpus.is_empty() && uplink == Uplink::Off {
            return Err(err(
                "uplink_cpus",
                "set, but host.uplink is \"off\"".to_string(),
            ));
        }
        let (user, group, capabilities) =
            run_as(SECTION, self.user, self.group, self.capabilities)?;
        Ok(HostConfig {
            tun,
            tap,
            tun_addresses: addresses("tun_addresses", self.tun_addresses)?,
            tap_addresses: addresses("tap_addresses", self.tap_addresses)?,
            mtu,
            underlay_mtu,
            queues,
            cpus,
            offloads: self.offloads.unwrap_or(d.offloads),
            source_sockets,
            receive_buffer,
            send_buffer,
            busy_poll_us,
            adaptive_poll_us,
            metrics,
            control,
            control_group,
            uplink,
            uplink_cpus,
            routes: self.routes.unwrap_or(d.routes),
            user,
            group,
            capabilities,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::Config;

    fn host_error(body: &str) -> String {
        Config::parse(&format!("[host]\n{body}\n"))
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn defaults_and_every_field() {
        let c = Config::parse("").unwrap();
        assert_eq!(c.host, super::HostConfig::default());
        let c = Config::parse(
            r#"[host]
tun = "t0"
tap = "t1"
tun_addresses = ["10.9.0.1/24", "fd00::1/64"]
tap_addresses = ["10.8.0.1/24"]
mtu = 1400
underlay_mtu = 9000
queues = 2
cpus = [1, 0]
offloads = false
source_sockets = 0
receive_buffer = 33554432
send_buffer = 1048576
busy_poll_us = 200
adaptive_poll_us = 40
uplink_cpus = [1]
routes = false
metrics = "127.0.0.1:9464"
control = "/tmp/x.sock"
control_group = "tep"
user = "nobody"
group = "nogroup"
capabilities = "none"
"#,
        )
        .unwrap();
        let h = c.host;
        assert_eq!((h.tun.as_str(), h.tap.as_str()), ("t0", "t1"));
        assert_eq!(h.tun_addresses[0].to_string(), "10.9.0.1/24");
        assert_eq!(h.tun_addresses[1].to_string(), "fd00::1/64");
        assert_eq!(
            (h.mtu, h.underlay_mtu, h.queues),
            (Some(1400), Some(9000), 2)
        );
        assert_eq!(h.cpus, vec![1, 0]);
        assert!(!h.offloads);
        assert_eq!(h.source_sockets, 0);
        assert_eq!((h.receive_buffer, h.send_buffer), (32 << 20, 1 << 20));
        assert_eq!((h.busy_poll_us, h.adaptive_poll_us), (200, 40));
        assert_eq!(h.uplink_cpus, vec![1]);
        assert!(!h.routes);
        assert_eq!(h.metrics, Some("127.0.0.1:9464".parse().unwrap()));
        assert_eq!(h.control, "/tmp/x.sock");
        assert_eq!(h.control_group.as_deref(), Some("tep"));
        assert_eq!(h.user.as_deref(), Some("nobody"));
        assert_eq!(h.group.as_deref(), Some("nogroup"));
        assert_eq!(h.capabilities, super::Capabilities::None);
    }

    #[test]
    fn errors_name_the_field() {
        for (body, want) in [
            (
                "tun = \"a/b\"",
                "host.tun: \"a/b\" is not an interface name",
            ),
            ("tap = \"tep0\"", "host.tap: \"tep0\" is also the TUN"),
            ("mtu = 100", "host.mtu: 100 is out of range (576..=65535)"),
            ("queues = 0", "host.queues: 0 is out of range (1..=64)"),
            (
                "busy_poll_us = -1",
                "host.busy_poll_us: -1 is out of range (0..=1000000)",
            ),
            (
                "adaptive_poll_us = 2000000",
                "host.adaptive_poll_us: 2000000 is out of range (0..=1000000)",
            ),
            (
                "uplink_cpus = [5000]",
                "host.uplink_cpus: 5000 is out of range (0..=4095)",
            ),
            (
                "uplink = \"off\"\nuplink_cpus = [0]",
                "host.uplink_cpus: set, but host.uplink is \"off\"",
            ),
            (
                "source_sockets = 65",
                "host.source_sockets: 65 is out of range (0..=64)",
            ),
            ("cpus = [0, 1]", "host.cpus: 2 CPUs for 1 queue(s)"),
            (
                "metrics = \"localhost\"",
                "host.metrics: \"localhost\" is not a listen address",
            ),
            (
                "control = \"rel.sock\"",
                "host.control: \"rel.sock\" is not an absolute",
            ),
            (
                "control_group = \"a:b\"",
                "host.control_group: \"a:b\" is not a user or group name",
            ),
            ("tun_addresses = [\"10.0.0.300/24\"]", "host.tun_addresses:"),
            ("colour = 1", "host.colour"),
            ("offloads = 1", "host.offloads"),
            ("routes = \"yes\"", "host.routes"),
            ("receive_buffer = 1000", "host.receive_buffer"),
            (
                "user = \"a b\"",
                "host.user: \"a b\" is not a user or group name",
            ),
            ("user = \"\"", "host.user: \"\" is not a user"),
            (
                "group = \"nogroup\"",
                "host.group: set, but host.user is not",
            ),
            (
                "user = \"nobody\"\ncapabilities = \"all\"",
                "host.capabilities: \"all\" is not \"net_admin\" or \"none\"",
            ),
            (
                "capabilities = \"none\"",
                "host.capabilities: set, but host.user is not",
            ),
        ] {
            let e = host_error(body);
            assert!(e.starts_with(want), "{body}: got {e}, want {want}");
        }
    }
}
