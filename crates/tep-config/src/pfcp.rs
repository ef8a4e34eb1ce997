//! The `[pfcp]` section of `tep.toml`: tep as a 5G user plane (UPF) whose
//! GTP-U sessions an SMF sets up over PFCP (N4, TS 29.244), rather than
//! `[[tunnel]]` tables.
//!
//! Each N3 address becomes a GTP-U tunnel of the config whose peers and
//! TEIDs come from sessions (`TunnelConfig::sessions`): its socket, its
//! counters in `tep show tunnels`, its routes. The UE prefixes are that
//! tunnel's inner prefixes: routed into the TUN (N6) in host mode, so that
//! downlink packets to UEs reach tep.

use crate::host::ranged;
use crate::pfcp_network::{data_networks, DataNetwork, RawDataNetwork};
use core::net::{IpAddr, Ipv4Addr, SocketAddr};
use serde::Deserialize;
use tep_dataplane::config::{ChecksumMode, ConfigError, IpPrefix, TunnelConfig};

/// PFCP's UDP port (TS 29.244 §4.2.1).
pub const PFCP_PORT: u16 = 8805;

/// `[pfcp]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PfcpConfig {
    /// Where the SMF's requests arrive (port 8805 by default).
    pub listen: SocketAddr,
    /// The UPF's Node ID: an FQDN, or an address (default: `listen`'s, or
    /// the first N3 address when `listen` is a wildcard).
    pub node_id: NodeId,
    /// The N3 addresses, handed out in F-TEIDs when the SMF asks the UPF
    /// to choose (CHOOSE flag).
    pub n3: Vec<IpAddr>,
    /// The UEs' address pools of every data network, each once:
    /// downlink packets to them are looked up in the sessions.
    pub ue_prefixes: Vec<IpPrefix>,
    /// The data networks (`[[pfcp.network]]`; at least one: without any,
    /// the unnamed one of `ue_prefixes`). A session's network is an index
    /// of this list; the first is where a session that names none goes.
    pub networks: Vec<DataNetwork>,
    /// Sessions at most (slots of the per-worker tables).
    pub max_sessions: u32,
    /// Downlink packets held per session while its FAR buffers: the
    /// ceiling. A session's BAR (its Suggested Buffering Packets Count)
    /// may lower it for that session, never raise it.
    pub buffer_packets: u32,
    /// Downlink packets held per worker in all.
    pub buffer_limit: u32,
    /// The outer UDP checksum on N3 (`zero` only with `zero_checksum_tx`
    /// over IPv6).
    pub checksum: ChecksumMode,
    /// Over IPv6: send checksum 0.
    pub zero_checksum_tx: bool,
    /// Over IPv6: accept checksum 0.
    pub zero_checksum_rx: bool,
    /// The SMFs heard on N4; `None`: any host that reaches `listen`.
    pub peers: Option<Vec<PfcpPeer>>,
    /// Sessions at most of one SMF (association).
    pub max_sessions_per_association: u32,
    /// Heartbeat Requests to each SMF this often (milliseconds; 0: never).
    pub heartbeat_interval_ms: u32,
    /// T1: milliseconds before tep resends a request of its own.
    pub t1_ms: u32,
    /// N1: how many times it resends.
    pub n1: u8,
    /// Milliseconds an association stays once its SMF stops answering
    /// Heartbeats (T1 × N1), before it is released with its sessions.
    pub association_grace_ms: u32,
    /// Uplink G-PDUs only from their session's gNB (the peer of its
    /// downlink FAR), dropped as `gnb_source_mismatch` otherwise. Default
    /// false: packets of a handover's target gNB that arrive before the
    /// SMF moves the FAR are lost too.
    pub n3_source_check: bool,
    /// GTP-U Echo Requests to each N3 peer of the sessions this often
    /// (milliseconds; 0: never), path supervision (TS 29.281 §7.2.1).
    pub echo_interval_ms: u32,
    /// T3-RESPONSE: milliseconds an Echo Request waits for its response.
    pub t3_response_ms: u32,
    /// N3-REQUESTS: Echo Requests a peer leaves unanswered before its
    /// path is failed (reported to the SMFs in a Node Report).
    pub n3_requests: u8,
}

/// An entry of `[pfcp].peers`: hosts in `prefix` may associate, giving
/// `node_id` when set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PfcpPeer {
    pub prefix: IpPrefix,
    pub node_id: Option<NodeId>,
}

/// A PFCP Node ID.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeId {
    /// An address.
    Ip(IpAddr),
    /// A fully qualified domain name.
    Fqdn(String),
}

impl PfcpConfig {
    /// The N3 tunnels: one GTP-U tunnel per N3 address, its peers and
    /// TEIDs from sessions.
    pub fn n3_tunnels(&self) -> Vec<TunnelConfig> {
        self.n3
            .iter()
            .enumerate()
            .map(|(i, &local)| {
                let mut t = TunnelConfig::n3(i, local);
                t.checksum = self.checksum;
                t.zero_checksum_tx = self.zero_checksum_tx;
                t.zero_checksum_rx = self.zero_checksum_rx;
                // A prefix routes into one tunnel: the first N3 tunnel
                // takes the UE pools, and the session found there says
                // which N3 address its packets leave from.
                if i == 0 {
                    t.inner_prefixes = self.ue_prefixes.clone();
                }
                t
            })
            .collect()
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPfcp {
    listen: Option<String>,
    node_id: Option<String>,
    n3: Option<Vec<String>>,
    ue_prefixes: Option<Vec<String>>,
    network: Option<Vec<RawDataNetwork>>,
    max_sessions: Option<i64>,
    buffer_packets: Option<i64>,
    buffer_limit: Option<i64>,
    checksum: Option<String>,
    zero_checksum_tx: Option<bool>,
    zero_checksum_rx: Option<bool>,
    peers: Option<Vec<toml::Value>>,
    max_sessions_per_association: Option<i64>,
    heartbeat_interval_ms: Option<i64>,
    t1_ms: Option<i64>,
    n1: Option<i64>,
    association_grace_ms: Option<i64>,
    n3_source_check: Option<bool>,
    echo_interval_ms: Option<i64>,
    t3_response_ms: Option<i64>,
    n3_requests: Option<i64>,
}

const SECTION: &str = "pfcp";

/// A Node ID as written: an address, else a domain name.
fn node_id(field: &str, s: &str) -> Result<NodeId, ConfigError> {
    if let Ok(a) = s.parse::<IpAddr>() {
        return Ok(NodeId::Ip(a));
    }
    let ok = !s.is_empty()
        && s.len() <= 255
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        });
    if !ok {
        return Err(err(
            field,
            format!("\"{s}\" is neither an IP address nor a domain name"),
        ));
    }
    Ok(NodeId::Fqdn(s.to_string()))
}

/// `peers`: each entry an address or prefix (`"192.0.2.10"`,
/// `"2001:db8::/64"`), or a table `{ address = "...", node_id = "..." }`
/// that also fixes the Node ID those hosts must give. A Node ID alone is
/// refused: it is only what a message claims, the source address is what
/// tep can check.
fn peers(list: &[toml::Value]) -> Result<Vec<PfcpPeer>, ConfigError> {
    if list.is_empty() {
        return Err(err(
            "peers",
            "empty: no SMF could associate (leave peers out to hear any host)".to_string(),
        ));
    }
    let prefix = |field: &str, s: &str| {
        s.parse::<IpPrefix>().map_err(|m| {
            let hint = if s.parse::<IpAddr>().is_err() && node_id(field, s).is_ok() {
                format!("\"{s}\" is not an address or prefix; a Node ID is only what a message claims, so give the address it comes from too: {{ address = \"192.0.2.10\", node_id = \"{s}\" }}")
            } else {
                m
            };
            err(field, hint)
        })
    };
    list.iter()
        .enumerate()
        .map(|(i, v)| {
            let at = format!("peers[{i}]");
            match v {
                toml::Value::String(s) => Ok(PfcpPeer {
                    prefix: prefix(&at, s)?,
                    node_id: None,
                }),
                toml::Value::Table(t) => {
                    if let Some(k) = t.keys().find(|k| *k != "address" && *k != "node_id") {
                        return Err(err(
                            &format!("{at}.{k}"),
                            "unknown field (expected `address`, `node_id`)".to_string(),
                        ));
                    }
                    let text = |k: &str| match t.get(k) {
                        None => Ok(None),
                        Some(toml::Value::String(s)) => Ok(Some(s.as_str())),
                        Some(_) => Err(err(&format!("{at}.{k}"), "must be a string".to_string())),
                    };
                    let address = text("address")?.ok_or_else(|| {
                        err(
                            &format!("{at}.address"),
                            "missing: the address or prefix the SMF sends from".to_string(),
                        )
                    })?;
                    Ok(PfcpPeer {
                        prefix: prefix(&format!("{at}.address"), address)?,
                        node_id: text("node_id")?
                            .map(|n| node_id(&format!("{at}.node_id"), n))
                            .transpose()?,
                    })
                }
                _ => Err(err(
                    &at,
                    "must be an address or prefix (\"192.0.2.10\", \"2001:db8::/64\") or a table { address = \"192.0.2.10\", node_id = \"smf.example\" }".to_string(),
                )),
            }
        })
        .collect()
}

fn err(field: &str, message: String) -> ConfigError {
    ConfigError {
        field: format!("{SECTION}.{field}"),
        message,
    }
}

impl RawPfcp {
    /// `gateway`: the file runs gateway mode (its data networks are VLANs).
    pub(super) fn validate(self, gateway: bool) -> Result<PfcpConfig, ConfigError> {
        let listen = listen(self.listen)?;
        let n3 = n3_addresses(self.n3)?;
        let networks = data_networks(self.network, self.ue_prefixes, gateway)?;
        let mut ue_prefixes: Vec<IpPrefix> = Vec::new();
        for p in networks.iter().flat_map(|n| &n.ue_prefixes) {
            if !ue_prefixes.contains(p) {
                ue_prefixes.push(*p);
            }
        }
        let node_id = match self.node_id {
            Some(s) => node_id("node_id", &s)?,
            None if !listen.ip().is_unspecified() => NodeId::Ip(listen.ip()),
            None => NodeId::Ip(n3[0]),
        };
        let max_sessions = match self.max_sessions {
            Some(v) => ranged(SECTION, "max_sessions", v, 1, 16 << 20)? as u32,
            None => 1 << 20,
        };
        let buffer_packets = match self.buffer_packets {
            Some(v) => ranged(SECTION, "buffer_packets", v, 0, 1024)? as u32,
            None => 16,
        };
        let buffer_limit = match self.buffer_limit {
            Some(v) => ranged(SECTION, "buffer_limit", v, 0, 1 << 20)? as u32,
            None => 4096,
        };
        let zero_checksum_tx = self.zero_checksum_tx.unwrap_or(false);
        let checksum = checksum(self.checksum.as_deref(), zero_checksum_tx, &n3)?;
        let ms = |field: &str, v: Option<i64>, lo: i64, hi: i64, default: u32| match v {
            Some(v) => ranged(SECTION, field, v, lo, hi).map(|v| v as u32),
            None => Ok(default),
        };
        let max_sessions_per_association = ms(
            "max_sessions_per_association",
            self.max_sessions_per_association,
            1,
            16 << 20,
            max_sessions,
        )?;
        let heartbeat_interval_ms = ms(
            "heartbeat_interval_ms",
            self.heartbeat_interval_ms,
            0,
            3_600_000,
            10_000,
        )?;
        let t1_ms = ms("t1_ms", self.t1_ms, 10, 60_000, 3_000)?;
        let n1 = ms("n1", self.n1, 0, 10, 3)? as u8;
        let association_grace_ms = ms(
            "association_grace_ms",
            self.association_grace_ms,
            0,
            86_400_000,
            60_000,
        )?;
        let echo_interval_ms = ms(
            "echo_interval_ms",
            self.echo_interval_ms,
            0,
            3_600_000,
            60_000,
        )?;
        let t3_response_ms = ms("t3_response_ms", self.t3_response_ms, 10, 60_000, 3_000)?;
        let n3_requests = ms("n3_requests", self.n3_requests, 1, 10, 3)? as u8;
        Ok(PfcpConfig {
            echo_interval_ms,
            t3_response_ms,
            n3_requests,
            peers: self.peers.as_deref().map(peers).transpose()?,
            max_sessions_per_association,
            heartbeat_interval_ms,
            t1_ms,
            n1,
            association_grace_ms,
            listen,
            node_id,
            n3,
            ue_prefixes,
            networks,
            max_sessions,
            buffer_packets,
            buffer_limit,
            checksum,
            zero_checksum_tx,
            zero_checksum_rx: self.zero_checksum_rx.unwrap_or(false),
            n3_source_check: self.n3_source_check.unwrap_or(false),
        })
    }
}

/// `listen`: an address with or without a port (8805 by default).
fn listen(v: Option<String>) -> Result<SocketAddr, ConfigError> {
    Ok(match v {
        None => SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), PFCP_PORT),
        Some(s) => s
            .parse::<SocketAddr>()
            .or_else(|_| s.parse::<IpAddr>().map(|a| SocketAddr::new(a, PFCP_PORT)))
            .map_err(|_| {
                err(
                    "listen",
                    format!("\"{s}\" is not an address (\"192.0.2.1\", \"192.0.2.1:8805\", \"[2001:db8::1]:8805\")"),
                )
            })?,
    })
}

/// `n3`: one or more distinct unicast addresses.
fn n3_addresses(v: Option<Vec<String>>) -> Result<Vec<IpAddr>, ConfigError> {
    let n3: Vec<IpAddr> = match v {
        None => {
            return Err(err(
                "n3",
                "missing: the N3 address(es) tep hands out in F-TEIDs".to_string(),
            ))
        }
        Some(v) if v.is_empty() => {
            return Err(err(
                "n3",
                "empty: at least one N3 address is needed".to_string(),
            ))
        }
        Some(v) => v
            .iter()
            .map(|s| {
                s.parse::<IpAddr>()
                    .map_err(|_| err("n3", format!("\"{s}\" is not an IP address")))
            })
            .collect::<Result<_, _>>()?,
    };
    for (i, a) in n3.iter().enumerate() {
        if a.is_unspecified() || a.is_multicast() {
            return Err(err(
                "n3",
                format!("{a} cannot be an N3 address (unicast only)"),
            ));
        }
        if n3[..i].contains(a) {
            return Err(err("n3", format!("{a} is listed twice")));
        }
    }
    Ok(n3)
}

/// `checksum` and `zero_checksum_tx`: what the N3 tunnels send.
fn checksum(
    v: Option<&str>,
    zero_checksum_tx: bool,
    n3: &[IpAddr],
) -> Result<ChecksumMode, ConfigError> {
    let checksum = match v {
        None | Some("full") => ChecksumMode::Full,
        Some("zero") => ChecksumMode::Zero,
        Some("offload") => ChecksumMode::Offload,
        Some("lco") => ChecksumMode::Lco,
        Some(other) => {
            return Err(err(
                "checksum",
                format!("\"{other}\" is not one of \"full\", \"zero\", \"lco\", \"offload\" (GTP-U has no remote checksum offload)"),
            ))
        }
    };
    if checksum == ChecksumMode::Zero && !zero_checksum_tx && n3.iter().any(IpAddr::is_ipv6) {
        return Err(err(
            "checksum",
            "\"zero\" over IPv6 needs zero_checksum_tx = true (RFC 6935/6936: the peer must accept it)".to_string(),
        ));
    }
    Ok(checksum)
}

#[cfg(test)]
mod tests {
    use crate::{Config, NodeId};

    fn pfcp(body: &str) -> Result<Config, String> {
        Config::parse(&format!("[pfcp]\n{body}")).map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_and_the_n3_tunnels() {
        let c = pfcp("n3 = [\"192.0.2.1\", \"2001:db8::1\"]\nue_prefixes = [\"10.45.0.0/16\"]")
            .unwrap();
        let p = c.pfcp.as_ref().unwrap();
        assert_eq!(p.listen.to_string(), "0.0.0.0:8805");
        assert_eq!(p.node_id, NodeId::Ip("192.0.2.1".parse().unwrap()));
        assert_eq!((p.max_sessions, p.buffer_packets), (1 << 20, 16));
        assert!(!p.n3_source_check);
        let n3: Vec<_> = c.tunnels.iter().filter(|t| t.sessions).collect();
        assert_eq!(n3.len(), 2);
        assert_eq!(n3[1].name, "n3.1");
        assert!(n3[1].remote.is_ipv6() && n3[1].remote.is_unspecified());
        assert_eq!(n3[0].inner_prefixes[0].to_string(), "10.45.0.0/16");
        assert_eq!(n3[0].local_port, 2152);
    }

    /// The dataplane's UPF fixture builds its N3 tunnel in code: it is
    /// what the same `[pfcp]` parses to.
    #[test]
    fn the_dataplane_upf_example_is_a_parsed_pfcp() {
        use tep_dataplane::config::ChecksumMode;
        use tep_dataplane::example::{self, INNER_PREFIX4, INNER_PREFIX6};
        for (v6, n3) in [(false, "192.0.2.1"), (true, "2001:db8::1")] {
            for mode in [ChecksumMode::Full, ChecksumMode::Zero] {
                let c = pfcp(&format!("n3 = [\"{n3}\"]\nue_prefixes = [\"{INNER_PREFIX4}\", \"{INNER_PREFIX6}\"]\nchecksum = \"{mode}\"\nzero_checksum_tx = true\nzero_checksum_rx = true")).unwrap();
                assert_eq!(c.tunnels, example::upf(v6, mode), "{n3} {mode}");
            }
        }
    }

    #[test]
    fn fields() {
        let c = pfcp("listen = \"192.0.2.1\"\nnode_id = \"upf.example.net\"\nn3 = [\"192.0.2.1\"]\nue_prefixes = [\"10.45.0.0/16\"]\nmax_sessions = 1000\nchecksum = \"zero\"\nn3_source_check = true").unwrap();
        let p = c.pfcp.unwrap();
        assert!(p.n3_source_check);
        assert_eq!(p.listen.to_string(), "192.0.2.1:8805");
        assert_eq!(p.node_id, NodeId::Fqdn("upf.example.net".into()));
        assert_eq!(p.max_sessions, 1000);
    }

    #[test]
    fn peers_and_timers() {
        let base = "n3 = [\"192.0.2.1\"]\nue_prefixes = [\"10.0.0.0/8\"]\n";
        let p = pfcp(base).unwrap().pfcp.unwrap();
        assert_eq!(p.peers, None);
        assert_eq!(
            (
                p.heartbeat_interval_ms,
                p.t1_ms,
                p.n1,
                p.association_grace_ms
            ),
            (10_000, 3_000, 3, 60_000)
        );
        assert_eq!(p.max_sessions_per_association, p.max_sessions);
        assert_eq!(
            (p.echo_interval_ms, p.t3_response_ms, p.n3_requests),
            (60_000, 3_000, 3)
        );
        let c = pfcp(&format!(
            "{base}peers = [\"192.0.2.10\", \"2001:db8::/64\", {{ address = \"198.51.100.0/24\", node_id = \"smf.example\" }}]\nheartbeat_interval_ms = 500\nt1_ms = 200\nn1 = 1\nassociation_grace_ms = 1000\nmax_sessions_per_association = 10\necho_interval_ms = 250\nt3_response_ms = 100\nn3_requests = 2"
        ))
        .unwrap();
        let p = c.pfcp.unwrap();
        assert_eq!(
            (p.echo_interval_ms, p.t3_response_ms, p.n3_requests),
            (250, 100, 2)
        );
        let peers = p.peers.unwrap();
        assert_eq!(peers[0].prefix.to_string(), "192.0.2.10/32");
        assert_eq!(peers[1].prefix.to_string(), "2001:db8::/64");
        assert_eq!(peers[2].node_id, Some(NodeId::Fqdn("smf.example".into())));
        assert_eq!(
            (
                p.heartbeat_interval_ms,
                p.t1_ms,
                p.n1,
                p.association_grace_ms
            ),
            (500, 200, 1, 1000)
        );
        assert_eq!(p.max_sessions_per_association, 10);
        for (extra, field) in [
            ("peers = []", "pfcp.peers:"),
            (
                "peers = [\"smf.example\"]",
                "pfcp.peers[0]: \"smf.example\" is not an address or prefix; a Node ID",
            ),
            (
                "peers = [\"192.0.2.1/24\"]",
                "pfcp.peers[0]: 192.0.2.1/24 has host bits set",
            ),
            ("peers = [1]", "pfcp.peers[0]:"),
            (
                "peers = [{ node_id = \"smf.example\" }]",
                "pfcp.peers[0].address: missing",
            ),
            (
                "peers = [{ address = \"192.0.2.1\", nodeid = \"x\" }]",
                "pfcp.peers[0].nodeid:",
            ),
            (
                "peers = [\"192.0.2.9\", { address = \"192.0.2.1\", node_id = \"a..b\" }]",
                "pfcp.peers[1].node_id:",
            ),
            ("t1_ms = 0", "pfcp.t1_ms:"),
            ("n1 = 11", "pfcp.n1:"),
            ("echo_interval_ms = -1", "pfcp.echo_interval_ms:"),
            ("t3_response_ms = 5", "pfcp.t3_response_ms:"),
            ("n3_requests = 0", "pfcp.n3_requests:"),
            ("association_grace_ms = -1", "pfcp.association_grace_ms:"),
            (
                "max_sessions_per_association = 0",
                "pfcp.max_sessions_per_association:",
            ),
        ] {
            let e = pfcp(&format!("{base}{extra}")).unwrap_err();
            assert!(e.starts_with(field), "{extra}: {e}");
        }
    }

    #[test]
    fn errors_name_the_field() {
        for (body, field) in [
            ("ue_prefixes = [\"10.0.0.0/8\"]", "pfcp.n3:"),
            ("n3 = []\nue_prefixes = [\"10.0.0.0/8\"]", "pfcp.n3:"),
            ("n3 = [\"x\"]\nue_prefixes = [\"10.0.0.0/8\"]", "pfcp.n3:"),
            (
                "n3 = [\"0.0.0.0\"]\nue_prefixes = [\"10.0.0.0/8\"]",
                "pfcp.n3:",
            ),
            ("n3 = [\"192.0.2.1\"]", "pfcp.ue_prefixes:"),
            (
                "n3 = [\"192.0.2.1\"]\nue_prefixes = [\"10.0.0.1/8\"]",
                "pfcp.ue_prefixes:",
            ),
            (
                "n3 = [\"192.0.2.1\"]\nue_prefixes = [\"10.0.0.0/8\"]\nlisten = \"nope\"",
                "pfcp.listen:",
            ),
            (
                "n3 = [\"192.0.2.1\"]\nue_prefixes = [\"10.0.0.0/8\"]\nnode_id = \"a..b\"",
                "pfcp.node_id:",
            ),
            (
                "n3 = [\"192.0.2.1\"]\nue_prefixes = [\"10.0.0.0/8\"]\nmax_sessions = 0",
                "pfcp.max_sessions:",
            ),
            (
                "n3 = [\"192.0.2.1\"]\nue_prefixes = [\"10.0.0.0/8\"]\nchecksum = \"remote\"",
                "pfcp.checksum:",
            ),
            (
                "n3 = [\"192.0.2.1\"]\nue_prefixes = [\"10.0.0.0/8\"]\nn3_source_check = \"yes\"",
                "pfcp.n3_source_check:",
            ),
            (
                "n3 = [\"192.0.2.1\"]\nue_prefixes = [\"10.0.0.0/8\"]\nbogus = 1",
                "pfcp.bogus: unknown field `bogus`",
            ),
        ] {
            let e = pfcp(body).unwrap_err();
            assert!(e.starts_with(field), "{body}: {e}");
        }
    }
}
