//! `tep.toml` typed into the model. The raw TOML shape keeps everything
//! optional, enums and addresses as strings and integers wide, so that every
//! message about a value is ours and names the field; only what the TOML
//! reader itself refuses goes through [`toml_error`](crate::toml_error).

use crate::evpn::RawEvpn;
use crate::file::{check_networks, Config};
use crate::gateway::RawGateway;
use crate::host::RawHost;
use crate::network::{RawFdbEntry, RawNeighbour, RawOverlay, RawRoute};
use crate::pfcp::RawPfcp;
use crate::toml_error::toml_error;
use crate::value::{in_range, one_of, parse_ip, parse_mac, Int, IntOrName};
use core::net::IpAddr;
use serde::Deserialize;
use tep_dataplane::config::{
    bad_name_message, check_together, network_error, network_key_not_used, not_a_network_kind,
    not_for_networks, not_used, tunnel_error, uses_key, uses_vni, valid_name, ChecksumMode,
    ConfigError, Control, DataplaneConfig, DontFragment, Dscp, GueRcoEncoding, IpPrefix,
    NetworkSettings, Ttl, TunnelConfig, MAX_AGEING_S, MAX_MACS, MAX_VNI,
};
use tep_dataplane::TunnelKind;

/// The default UDP source-port range (RFC 6335 dynamic ports).
const DEFAULT_SOURCE_PORTS: (u16, u16) = (49152, 65535);

impl Config {
    /// Parses and validates `tep.toml` text. An empty text is a valid
    /// config with no tunnels.
    ///
    /// The first problem found is returned, naming its field
    /// (`tunnel[1] "gtp-a".vni`); TOML syntax errors name the line.
    pub fn parse(text: &str) -> Result<Config, ConfigError> {
        config(text)
    }

    /// Reads and parses a config file. An I/O error names the path.
    pub fn load(path: &std::path::Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            field: path.display().to_string(),
            message: format!("cannot read the config: {e}"),
        })?;
        Config::parse(&text)
    }
}

/// [`Config::parse`]. Each tunnel and network is checked as soon as it
/// is typed, so that the error returned is the first of its list.
pub(super) fn config(text: &str) -> Result<Config, ConfigError> {
    let raw: RawFile = toml::from_str(text).map_err(|e| toml_error(text, &e))?;
    let dataplane = raw.dataplane.unwrap_or_default().validate()?;
    let mut tunnels = Vec::with_capacity(raw.tunnel.len() + raw.network.len());
    for (index, t) in raw.tunnel.into_iter().enumerate() {
        let t = t.validate(index)?;
        t.check(index)?;
        tunnels.push(t);
    }
    let host_given = raw.host.is_some();
    let host = raw.host.unwrap_or_default().validate()?;
    let gateway = raw.gateway.map(RawGateway::validate).transpose()?;
    let pfcp = raw
        .pfcp
        .map(|p| p.validate(gateway.is_some() && !host_given))
        .transpose()?;
    if let Some(p) = &pfcp {
        tunnels.extend(p.n3_tunnels());
    }
    // After the N3 tunnels: the indices of [[tunnel]] and N3 tunnels do
    // not move when networks come and go.
    for (index, n) in raw.network.into_iter().enumerate() {
        let n = n.validate_network(index)?;
        n.check(index)?;
        tunnels.push(n);
    }
    let config = Config {
        dataplane,
        tunnels,
        host,
        host_given,
        gateway,
        pfcp,
        overlay: raw.overlay.unwrap_or_default().validate()?,
        evpn: raw.evpn.unwrap_or_default().validate()?,
    };
    check_together(&config.tunnels)?;
    check_networks(&config)?;
    Ok(config)
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    dataplane: Option<RawDataplane>,
    host: Option<RawHost>,
    gateway: Option<RawGateway>,
    pfcp: Option<RawPfcp>,
    overlay: Option<RawOverlay>,
    evpn: Option<RawEvpn>,
    #[serde(default)]
    tunnel: Vec<RawTunnel>,
    #[serde(default)]
    network: Vec<RawTunnel>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDataplane {
    error_indication_rate: Option<Int>,
    restart_counter: Option<Int>,
}

/// A `[[tunnel]]` or a `[[network]]`: one shape, so that the keys about
/// the wire are typed by one function for both; each refuses the other's
/// own keys with a word on what to use.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTunnel {
    name: Option<String>,
    kind: Option<String>,
    local: Option<String>,
    remote: Option<String>,
    local_port: Option<Int>,
    remote_port: Option<Int>,
    source_ports: Option<Vec<Int>>,
    vni: Option<Int>,
    teid: Option<Int>,
    local_teid: Option<Int>,
    qfi: Option<Int>,
    key: Option<Int>,
    checksum: Option<String>,
    zero_checksum_tx: Option<bool>,
    zero_checksum_rx: Option<bool>,
    remote_checksum_rx: Option<bool>,
    gue_rco: Option<String>,
    gue_variant: Option<Int>,
    inner_prefixes: Option<Vec<String>>,
    inner_macs: Option<Vec<String>>,
    ttl: Option<IntOrName>,
    dscp: Option<IntOrName>,
    df: Option<String>,
    // [[network]] only.
    pub(super) flood: Option<Vec<String>>,
    pub(super) learning: Option<bool>,
    pub(super) ageing: Option<Int>,
    pub(super) max_macs: Option<Int>,
    pub(super) neigh_suppress: Option<bool>,
    pub(super) device: Option<String>,
    pub(super) vlan: Option<Int>,
    pub(super) control: Option<String>,
    pub(super) evpn_device: Option<String>,
    pub(super) fdb: Option<Vec<RawFdbEntry>>,
    pub(super) neighbours: Option<Vec<RawNeighbour>>,
    pub(super) routes: Option<Vec<RawRoute>>,
}

/// Which list a raw table is from, for its errors and words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Section {
    Tunnel,
    Network,
}

impl Section {
    pub(super) fn error(
        self,
        index: usize,
        name: Option<&str>,
        field: &str,
        message: String,
    ) -> ConfigError {
        match self {
            Section::Tunnel => tunnel_error(index, name, field, message),
            Section::Network => network_error(index, name, field, message),
        }
    }

    fn noun(self) -> &'static str {
        match self {
            Section::Tunnel => "tunnel",
            Section::Network => "network",
        }
    }
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
            ("control", self.control.is_some()),
            ("evpn_device", self.evpn_device.is_some()),
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
        n.control = self.control(at)?;
        for (k, a) in self.flood.iter().flatten().enumerate() {
            n.flood
                .push(parse_ip(a).map_err(|m| at(&format!("flood[{k}]"), m))?);
        }
        let raw = (
            self.fdb.as_deref().unwrap_or_default(),
            self.neighbours.as_deref().unwrap_or_default(),
            self.routes.as_deref().unwrap_or_default(),
        );
        crate::network::entries(raw, &mut n, at)?;
        Ok(n)
    }
}

impl RawTunnel {
    /// `control` and `evpn_device`.
    fn control(&self, at: &impl Fn(&str, String) -> ConfigError) -> Result<Control, ConfigError> {
        let evpn = match self.control.as_deref() {
            None => false,
            Some(v) => {
                one_of(v, &[("static", false), ("evpn", true)]).map_err(|m| at("control", m))?
            }
        };
        match (evpn, &self.evpn_device) {
            (true, device) => Ok(Control::Evpn {
                device: device.clone(),
            }),
            (false, None) => Ok(Control::Static),
            (false, Some(_)) => Err(at(
                "evpn_device",
                "names the kernel VXLAN device of an EVPN network: set control = \"evpn\" too"
                    .to_string(),
            )),
        }
    }
}

impl RawDataplane {
    fn validate(self) -> Result<DataplaneConfig, ConfigError> {
        let err = |field: &str, message: String| ConfigError {
            field: format!("dataplane.{field}"),
            message,
        };
        let d = DataplaneConfig::default();
        Ok(DataplaneConfig {
            error_indication_rate: match self.error_indication_rate {
                Some(v) => in_range(v, 0, u32::MAX).map_err(|m| err("error_indication_rate", m))?,
                None => d.error_indication_rate,
            },
            restart_counter: match self.restart_counter {
                Some(v) => in_range(v, 0, 255).map_err(|m| err("restart_counter", m))? as u8,
                None => d.restart_counter,
            },
        })
    }
}

impl RawTunnel {
    /// Types a `[[tunnel]]`: every field, and the kind-specific ones on
    /// their kind; the rules on typed values are [`TunnelConfig::check`].
    fn validate(self, index: usize) -> Result<TunnelConfig, ConfigError> {
        let mut t = self.typed(Section::Tunnel, index)?;
        let name = t.name.clone();
        let at = |field: &str, message: String| tunnel_error(index, Some(&name), field, message);
        self.routes(&mut t, &at)?;
        Ok(t)
    }

    /// What a `[[tunnel]]` and a `[[network]]` share: the name, the kind,
    /// the addresses and every key about the wire, with the same meaning
    /// and defaults; the other list's own keys refused.
    pub(super) fn typed(
        &self,
        section: Section,
        index: usize,
    ) -> Result<TunnelConfig, ConfigError> {
        let noun = section.noun();
        let name = self.name(section, index)?;
        let at = |field: &str, message: String| section.error(index, Some(name), field, message);
        self.refuse_other_keys(section, &at)?;
        let missing = |field: &str, what: &str| at(field, format!("missing: {what}"));
        let kind = self.kind(noun, &at)?;
        let addr = |field: &str, v: &Option<String>, what: &str| -> Result<IpAddr, ConfigError> {
            match v {
                None => Err(missing(field, what)),
                Some(s) => parse_ip(s).map_err(|m| at(field, m)),
            }
        };
        let mut t = match section {
            Section::Tunnel => {
                let what = "every tunnel needs a local and a remote IP address";
                let local = addr("local", &self.local, what)?;
                let remote = addr("remote", &self.remote, what)?;
                TunnelConfig::new(name, kind, local, remote)
            }
            Section::Network => {
                if let Some(m) = not_a_network_kind(kind) {
                    return Err(at("kind", m));
                }
                let what = "every network needs a local IP address (its VTEP's)";
                let local = addr("local", &self.local, what)?;
                TunnelConfig::network(name, kind, local, NetworkSettings::default())
            }
        };
        self.ports(&mut t, &at)?;
        self.ids(&mut t, noun, &at)?;
        self.checksums(&mut t, &at)?;
        self.outer(&mut t, &at)?;
        Ok(t)
    }

    /// The name, required and valid (the label of every later error).
    fn name(&self, section: Section, index: usize) -> Result<&str, ConfigError> {
        match &self.name {
            None => Err(section.error(
                index,
                None,
                "name",
                format!(
                    "missing: every {} needs a name unique among tunnels and networks (1 to 32 characters from A-Z a-z 0-9 _ . -)",
                    section.noun()
                ),
            )),
            Some(n) if !valid_name(n) => Err(section.error(index, None, "name", bad_name_message(n))),
            Some(n) => Ok(n),
        }
    }

    /// The kind, required.
    fn kind(
        &self,
        noun: &str,
        at: &impl Fn(&str, String) -> ConfigError,
    ) -> Result<TunnelKind, ConfigError> {
        let Some(k) = &self.kind else {
            let kind_names: Vec<&str> = TunnelKind::ALL.iter().map(|k| k.name()).collect();
            return Err(at(
                "kind",
                format!(
                    "missing: every {noun} needs a kind (one of: {})",
                    kind_names.join(", ")
                ),
            ));
        };
        k.parse().map_err(|e: String| at("kind", e))
    }

    /// A `[[network]]` key in a `[[tunnel]]`, or a point-to-point key in
    /// a `[[network]]`.
    fn refuse_other_keys(
        &self,
        section: Section,
        at: &impl Fn(&str, String) -> ConfigError,
    ) -> Result<(), ConfigError> {
        match section {
            Section::Tunnel => {
                let given = self.network_keys_given();
                if let Some(key) = given.first() {
                    return Err(at(
                        key,
                        "not a [[tunnel]] key: a tunnel has one remote; flood, fdb, routes, neighbours and the learning settings are a multipoint [[network]]'s".to_string(),
                    ));
                }
            }
            Section::Network => {
                for (key, given) in [
                    ("remote", self.remote.is_some()),
                    ("inner_macs", self.inner_macs.is_some()),
                    ("inner_prefixes", self.inner_prefixes.is_some()),
                    ("teid", self.teid.is_some()),
                    ("local_teid", self.local_teid.is_some()),
                    ("qfi", self.qfi.is_some()),
                ] {
                    if let Some(m) = not_for_networks(key).filter(|_| given) {
                        return Err(at(key, m));
                    }
                }
            }
        }
        Ok(())
    }

    /// The UDP ports: local, remote, and the source-port range.
    fn ports(
        &self,
        t: &mut TunnelConfig,
        at: &impl Fn(&str, String) -> ConfigError,
    ) -> Result<(), ConfigError> {
        let port = |field: &str, v: Option<Int>, default: u16| -> Result<u16, ConfigError> {
            match v {
                None => Ok(default),
                Some(v) => Ok(in_range(v, 1, 65535).map_err(|m| at(field, m))? as u16),
            }
        };
        t.local_port = port("local_port", self.local_port, t.local_port)?;
        t.remote_port = port("remote_port", self.remote_port, t.remote_port)?;
        if let Some(sp) = &self.source_ports {
            let shape = || {
                at(
                    "source_ports",
                    format!(
                        "give two ports [low, high] with 1 <= low <= high, like [{}, {}]",
                        DEFAULT_SOURCE_PORTS.0, DEFAULT_SOURCE_PORTS.1
                    ),
                )
            };
            let [lo, hi] = sp[..] else {
                return Err(shape());
            };
            let lo = in_range(lo, 1, 65535).map_err(|m| at("source_ports[0]", m))? as u16;
            let hi = in_range(hi, 1, 65535).map_err(|m| at("source_ports[1]", m))? as u16;
            if lo > hi {
                return Err(at(
                    "source_ports",
                    format!("[{lo}, {hi}]: the low port is above the high one; did you mean [{hi}, {lo}]?"),
                ));
            }
            t.source_ports = (lo, hi);
        }

        Ok(())
    }

    /// What tells the tunnel apart and what it sends: VNI, TEIDs, QFI, GRE key, each on its kind only.
    fn ids(
        &self,
        t: &mut TunnelConfig,
        noun: &str,
        at: &impl Fn(&str, String) -> ConfigError,
    ) -> Result<(), ConfigError> {
        let missing = |field: &str, what: &str| at(field, format!("missing: {what}"));
        let kind = t.kind;
        match (uses_vni(kind), self.vni) {
            (true, Some(v)) => t.vni = in_range(v, 0, MAX_VNI).map_err(|m| at("vni", m))?,
            (true, None) => {
                return Err(missing(
                    "vni",
                    &format!("a {kind} {noun} needs a vni (0..={MAX_VNI})"),
                ))
            }
            (false, Some(_)) => {
                return Err(at(
                    "vni",
                    not_used(kind, "only vxlan and geneve have a VNI"),
                ))
            }
            (false, None) => {}
        }
        let gtp_only = "only gtpu has TEIDs and QFIs";
        if kind == TunnelKind::Gtpu {
            let teid = self.teid.ok_or_else(|| {
                missing(
                    "teid",
                    "a gtpu tunnel needs the teid it sends (the peer's TEID, 0..=4294967295)",
                )
            })?;
            t.teid = in_range(teid, 0, u32::MAX).map_err(|m| at("teid", m))?;
            t.local_teid = match self.local_teid {
                Some(v) => in_range(v, 0, u32::MAX).map_err(|m| at("local_teid", m))?,
                None => t.teid,
            };
            if let Some(q) = self.qfi {
                t.qfi = Some(in_range(q, 0, 63).map_err(|m| at("qfi", m))? as u8);
            }
        } else {
            for (field, v) in [
                ("teid", &self.teid),
                ("local_teid", &self.local_teid),
                ("qfi", &self.qfi),
            ] {
                if v.is_some() {
                    return Err(at(field, not_used(kind, gtp_only)));
                }
            }
        }
        if let Some(k) = self.key {
            if !uses_key(kind) {
                return Err(at(
                    "key",
                    not_used(kind, "only gre, fou-gre and gue-gre have a GRE key"),
                ));
            }
            t.key = Some(in_range(k, 0, u32::MAX).map_err(|m| at("key", m))?);
        }
        Ok(())
    }

    /// The checksum mode and opt-ins, and GUE's options.
    fn checksums(
        &self,
        t: &mut TunnelConfig,
        at: &impl Fn(&str, String) -> ConfigError,
    ) -> Result<(), ConfigError> {
        let kind = t.kind;
        if let Some(c) = &self.checksum {
            let words: Vec<(&str, ChecksumMode)> =
                ChecksumMode::ALL.iter().map(|m| (m.name(), *m)).collect();
            t.checksum = one_of(c, &words).map_err(|m| at("checksum", m))?;
        }
        t.zero_checksum_tx = self.zero_checksum_tx.unwrap_or(false);
        t.zero_checksum_rx = self.zero_checksum_rx.unwrap_or(false);
        t.remote_checksum_rx = self.remote_checksum_rx.unwrap_or(false);
        if let Some(g) = &self.gue_rco {
            if kind != TunnelKind::Gue {
                return Err(at(
                    "gue_rco",
                    not_used(kind, "it chooses GUE's remote checksum offload encoding"),
                ));
            }
            t.gue_rco = one_of(
                g,
                &[
                    ("linux", GueRcoEncoding::Linux),
                    ("ietf", GueRcoEncoding::Ietf),
                ],
            )
            .map_err(|m| at("gue_rco", m))?;
        }
        if let Some(v) = self.gue_variant {
            if kind != TunnelKind::Gue {
                return Err(at(
                    "gue_variant",
                    not_used(kind, "it chooses the GUE variant sent"),
                ));
            }
            t.gue_variant = in_range(v, 0, 1).map_err(|m| at("gue_variant", m))? as u8;
        }
        Ok(())
    }

    /// The inner destinations: prefixes for L3 kinds, MACs for L2 kinds.
    fn routes(
        &self,
        t: &mut TunnelConfig,
        at: &impl Fn(&str, String) -> ConfigError,
    ) -> Result<(), ConfigError> {
        let kind = t.kind;
        if let Some(ps) = &self.inner_prefixes {
            if kind.carries_ethernet() {
                return Err(at(
                    "inner_prefixes",
                    format!(
                        "not used by kind {kind}: it carries Ethernet frames, routed by inner_macs"
                    ),
                ));
            }
            for (k, p) in ps.iter().enumerate() {
                let p: IpPrefix = p
                    .trim()
                    .parse()
                    .map_err(|m| at(&format!("inner_prefixes[{k}]"), m))?;
                t.inner_prefixes.push(p);
            }
        }
        if let Some(ms) = &self.inner_macs {
            if !kind.carries_ethernet() {
                return Err(at(
                    "inner_macs",
                    format!(
                        "not used by kind {kind}: it carries IP packets, routed by inner_prefixes"
                    ),
                ));
            }
            for (k, m) in ms.iter().enumerate() {
                let m = parse_mac(m.trim()).map_err(|e| at(&format!("inner_macs[{k}]"), e))?;
                t.inner_macs.push(m);
            }
        }
        Ok(())
    }

    /// The outer TTL, DSCP and DF.
    fn outer(
        &self,
        t: &mut TunnelConfig,
        at: &impl Fn(&str, String) -> ConfigError,
    ) -> Result<(), ConfigError> {
        match &self.ttl {
            None => {}
            Some(IntOrName::Int(v)) => {
                t.ttl = Ttl::Fixed(
                    in_range(*v, 1, 255).map_err(|m| at("ttl", format!("{m}, or \"inherit\"")))?
                        as u8,
                )
            }
            Some(IntOrName::Name(s)) => {
                t.ttl = one_of(s, &[("inherit", Ttl::Inherit)]).map_err(|_| {
                    at(
                        "ttl",
                        format!("\"{s}\" is not a TTL: give 1..=255 or \"inherit\""),
                    )
                })?
            }
        }
        match &self.dscp {
            None => {}
            Some(IntOrName::Int(v)) => {
                t.dscp = Dscp::Fixed(
                    in_range(*v, 0, 63).map_err(|m| at("dscp", format!("{m}, or \"inherit\"")))?
                        as u8,
                )
            }
            Some(IntOrName::Name(s)) => {
                t.dscp = one_of(s, &[("inherit", Dscp::Inherit)]).map_err(|_| {
                    at(
                        "dscp",
                        format!("\"{s}\" is not a DSCP: give 0..=63 or \"inherit\""),
                    )
                })?
            }
        }
        if let Some(d) = &self.df {
            t.df = one_of(
                d,
                &[
                    ("set", DontFragment::Set),
                    ("unset", DontFragment::Unset),
                    ("inherit", DontFragment::Inherit),
                ],
            )
            .map_err(|m| at("df", m))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{err, mac, ok, prefix, tunnel, v4, v6, EXAMPLE};

    // --- The whole file -----------------------------------------------

    #[test]
    fn empty_is_valid() {
        assert_eq!(ok(""), Config::default());
        assert_eq!(ok("# nothing\n\n"), Config::default());
        assert_eq!(ok("[dataplane]\n"), Config::default());
    }

    #[test]
    fn dataplane_fields() {
        let c = ok("[dataplane]\nerror_indication_rate = 100\nrestart_counter = 255\n");
        assert_eq!(
            c.dataplane,
            DataplaneConfig {
                error_indication_rate: 100,
                restart_counter: 255
            }
        );
        assert_eq!(DataplaneConfig::default().error_indication_rate, 10);
        let e = err("[dataplane]\nrestart_counter = 256\n");
        assert_eq!(
            e.to_string(),
            "dataplane.restart_counter: 256 is out of range (0..=255)"
        );
        let e = err("[dataplane]\nerror_indication_rate = -1\n");
        assert_eq!(e.field, "dataplane.error_indication_rate");
        let e = err("[dataplane]\nrate = 5\n");
        assert_eq!(e.field, "dataplane.rate");
        assert!(e.message.starts_with("unknown field `rate`"), "{e}");
        assert!(e.message.ends_with("(line 2)"), "{e}");
    }

    // --- Per tunnel: required fields, defaults, every kind -------------

    #[test]
    fn missing_required_fields() {
        let e = err("[[tunnel]]\nkind = \"vxlan\"\n");
        assert_eq!(e.field, "tunnel[0].name");
        assert!(e.message.starts_with("missing"), "{e}");
        let e = err("[[tunnel]]\nname = \"a\"\n");
        assert_eq!(
            e.to_string(),
            "tunnel[0] \"a\".kind: missing: every tunnel needs a kind (one of: vxlan, geneve, gtpu, gre, gue, fou-ipip, fou-sit, fou-gre, gue-gre)"
        );
        let e = err("[[tunnel]]\nname = \"a\"\nkind = \"gue\"\nremote = \"192.0.2.2\"\n");
        assert_eq!(e.field, "tunnel[0] \"a\".local");
        let e = err("[[tunnel]]\nname = \"a\"\nkind = \"gue\"\nlocal = \"192.0.2.2\"\n");
        assert_eq!(e.field, "tunnel[0] \"a\".remote");
        let e = err(&tunnel("a", "gue", "").replace("kind = \"gue\"", "kind = \"vxlan\""));
        assert_eq!(
            e.to_string(),
            "tunnel[0] \"a\".vni: missing: a vxlan tunnel needs a vni (0..=16777215)"
        );
        let e = err(&tunnel("a", "gue", "").replace("kind = \"gue\"", "kind = \"gtpu\""));
        assert_eq!(e.field, "tunnel[0] \"a\".teid");
        assert!(e.message.starts_with("missing"), "{e}");
    }

    #[test]
    fn bad_kind() {
        let e = err(&tunnel("a", "mpls", ""));
        assert_eq!(
            e.to_string(),
            "tunnel[0] \"a\".kind: unknown tunnel kind 'mpls' (one of: vxlan, geneve, gtpu, gre, gue, fou-ipip, fou-sit, fou-gre, gue-gre)"
        );
        // RFC 8086's name and any case are accepted.
        assert_eq!(
            ok(&tunnel("a", "gre-in-udp", "")).tunnels[0].kind,
            TunnelKind::GreInUdp
        );
        assert_eq!(
            ok(&tunnel("a", "FOU-SIT", "")).tunnels[0].kind,
            TunnelKind::FouSit
        );
    }

    #[test]
    fn names() {
        for bad in ["", "a b", "tun/1", "é", &"x".repeat(33)] {
            let e = err(&tunnel(bad, "gue", ""));
            assert_eq!(e.field, "tunnel[0].name", "{bad:?}: {e}");
        }
        let e = err(&tunnel("a b", "gue", ""));
        assert_eq!(
            e.to_string(),
            "tunnel[0].name: \"a b\" is not a valid name; use 1 to 32 characters from A-Z a-z 0-9 _ . -"
        );
        let long = "x".repeat(32);
        assert_eq!(ok(&tunnel(&long, "gue", "")).tunnels[0].name, long);
        assert_eq!(ok(&tunnel("A-z_0.9", "gue", "")).tunnels[0].name, "A-z_0.9");
    }

    #[test]
    fn defaults() {
        for kind in TunnelKind::ALL {
            let c = ok(&tunnel("t", kind.name(), ""));
            let t = &c.tunnels[0];
            let mut want = TunnelConfig::new("t", kind, v4([192, 0, 2, 1]), v4([192, 0, 2, 2]));
            if uses_vni(kind) {
                want.vni = 1;
            }
            if kind == TunnelKind::Gtpu {
                want.teid = 1;
                want.local_teid = 1;
            }
            assert_eq!(*t, want, "{kind}");
            assert_eq!(t.local_port, kind.default_port());
            assert_eq!(t.remote_port, kind.default_port());
            assert_eq!(t.source_ports, (49152, 65535));
            assert_eq!(t.checksum, ChecksumMode::Full);
            assert_eq!(t.gue_rco, GueRcoEncoding::Linux);
            assert_eq!(t.ttl, Ttl::Fixed(64));
            assert_eq!(t.dscp, Dscp::Inherit);
            assert_eq!(t.df, DontFragment::Unset);
            assert!(!t.zero_checksum_tx && !t.zero_checksum_rx && !t.remote_checksum_rx);
        }
    }

    #[test]
    fn vxlan_and_geneve() {
        let c = ok(&format!(
            "{}{}",
            tunnel(
                "vx",
                "vxlan",
                "local_port = 4790\nremote_port = 8472\nsource_ports = [1000, 2000]\nchecksum = \"remote\"\nremote_checksum_rx = true\ninner_macs = [\"02:00:00:00:00:01\", \"02-0A-0b-00-00-02\"]\nttl = \"inherit\"\ndscp = 46\ndf = \"set\""
            )
            .replace("vni = 1", "vni = 0xFFFFFF"),
            tunnel("gn", "geneve", "checksum = \"offload\"").replace("vni = 1", "vni = 0"),
        ));
        let vx = &c.tunnels[0];
        assert_eq!(vx.kind, TunnelKind::Vxlan);
        assert_eq!(vx.vni, 0xFF_FFFF);
        assert_eq!((vx.local_port, vx.remote_port), (4790, 8472));
        assert_eq!(vx.source_ports, (1000, 2000));
        assert_eq!(vx.checksum, ChecksumMode::Remote);
        assert!(vx.remote_checksum_rx);
        assert_eq!(
            vx.inner_macs,
            [mac([2, 0, 0, 0, 0, 1]), mac([2, 0x0a, 0x0b, 0, 0, 2])]
        );
        assert_eq!(vx.ttl, Ttl::Inherit);
        assert_eq!(vx.dscp, Dscp::Fixed(46));
        assert_eq!(vx.df, DontFragment::Set);
        let gn = &c.tunnels[1];
        assert_eq!((gn.kind, gn.vni), (TunnelKind::Geneve, 0));
        assert_eq!(gn.checksum, ChecksumMode::Offload);
        assert!(gn.inner_macs.is_empty());
    }

    #[test]
    fn gtpu() {
        let text = "[[tunnel]]\nname = \"g\"\nkind = \"gtpu\"\nlocal = \"2001:db8::1\"\nremote = \"2001:db8::2\"\nteid = 0x1234\nlocal_teid = 0xFFFFFFFF\nqfi = 63\ninner_prefixes = [\"10.1.0.0/16\", \"2001:db8:1::/48\"]\nchecksum = \"lco\"\n";
        let t = &ok(text).tunnels[0];
        assert_eq!(t.local, v6("2001:db8::1"));
        assert_eq!(t.remote, v6("2001:db8::2"));
        assert_eq!((t.teid, t.local_teid, t.qfi), (0x1234, u32::MAX, Some(63)));
        assert_eq!(
            t.inner_prefixes,
            [prefix("10.1.0.0/16"), prefix("2001:db8:1::/48")]
        );
        assert_eq!(t.checksum, ChecksumMode::Lco);
        assert_eq!(t.local_port, 2152);
        let e = err(&text.replace("qfi = 63", "qfi = 64"));
        assert_eq!(
            e.to_string(),
            "tunnel[0] \"g\".qfi: 64 is out of range (0..=63)"
        );
        let e = err(&text.replace("teid = 0x1234", "teid = 0x100000000"));
        assert_eq!(
            e.to_string(),
            "tunnel[0] \"g\".teid: 4294967296 is out of range (0..=4294967295)"
        );
        let e = err(&text.replace("local_teid = 0xFFFFFFFF", "local_teid = -1"));
        assert_eq!(e.field, "tunnel[0] \"g\".local_teid");
    }

    #[test]
    fn gre_gue_fou() {
        let c = ok(&[
            tunnel(
                "gre",
                "gre",
                "key = 0xFFFFFFFF\ninner_prefixes = [\"10.1.0.0/16\"]",
            ),
            tunnel("fg", "fou-gre", "key = 0\nlocal_port = 5556"),
            tunnel(
                "gue",
                "gue",
                "gue_rco = \"ietf\"\nchecksum = \"remote\"\nremote_checksum_rx = true",
            ),
            tunnel("ipip", "fou-ipip", "checksum = \"zero\"\nlocal_port = 5557"),
            tunnel("sit", "fou-sit", "inner_prefixes = [\"2001:db8:5::/48\"]"),
        ]
        .concat());
        let t = &c.tunnels;
        assert_eq!(
            (t[0].kind, t[0].key),
            (TunnelKind::GreInUdp, Some(u32::MAX))
        );
        assert_eq!(
            (t[1].kind, t[1].key, t[1].local_port),
            (TunnelKind::FouGre, Some(0), 5556)
        );
        assert_eq!(t[1].remote_port, 5555);
        assert_eq!(
            (t[2].kind, t[2].gue_rco),
            (TunnelKind::Gue, GueRcoEncoding::Ietf)
        );
        assert_eq!(t[2].checksum, ChecksumMode::Remote);
        assert_eq!(
            (t[3].kind, t[3].checksum),
            (TunnelKind::FouIpip, ChecksumMode::Zero)
        );
        assert_eq!(t[4].kind, TunnelKind::FouSit);
        let gue = ok(&tunnel("gue", "gue", "gue_rco = \"linux\""));
        assert_eq!(gue.tunnels[0].gue_rco, GueRcoEncoding::Linux);
        let e = err(&tunnel("gue", "gue", "gue_rco = \"rfc\""));
        assert_eq!(
            e.to_string(),
            "tunnel[0] \"gue\".gue_rco: \"rfc\" is not one of \"linux\", \"ietf\""
        );
    }

    #[test]
    fn example_file() {
        let c = ok(EXAMPLE);
        assert_eq!(c.dataplane, DataplaneConfig::default());
        let names: Vec<_> = c.tunnels.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "vx-rco",
                "gnv-default",
                "gtp-a",
                "gue-ietf",
                "fou-zero",
                "gre-k7"
            ]
        );

        let local4 = v4([192, 0, 2, 1]);
        let mut vx = TunnelConfig::new("vx-rco", TunnelKind::Vxlan, local4, v4([192, 0, 2, 2]));
        vx.vni = 42;
        vx.checksum = ChecksumMode::Remote;
        vx.remote_checksum_rx = true;
        vx.inner_macs = vec![mac([2, 0, 0, 0, 0, 1]), mac([2, 0, 0, 0, 0, 2])];
        assert_eq!(c.tunnels[0], vx);

        let mut gn = TunnelConfig::new(
            "gnv-default",
            TunnelKind::Geneve,
            local4,
            v4([192, 0, 2, 3]),
        );
        gn.vni = 7;
        gn.ttl = Ttl::Inherit;
        gn.dscp = Dscp::Fixed(10);
        gn.df = DontFragment::Inherit;
        assert_eq!(c.tunnels[1], gn);

        let mut gtp = TunnelConfig::new(
            "gtp-a",
            TunnelKind::Gtpu,
            v6("2001:db8::1"),
            v6("2001:db8::2"),
        );
        gtp.teid = 0x1234;
        gtp.local_teid = 0x5678;
        gtp.qfi = Some(9);
        gtp.inner_prefixes = vec![prefix("10.1.0.0/16"), prefix("2001:db8:1::/48")];
        assert_eq!(c.tunnels[2], gtp);

        let mut gue = TunnelConfig::new("gue-ietf", TunnelKind::Gue, local4, v4([192, 0, 2, 4]));
        gue.checksum = ChecksumMode::Remote;
        gue.remote_checksum_rx = true;
        gue.gue_rco = GueRcoEncoding::Ietf;
        gue.inner_prefixes = vec![prefix("10.2.0.0/16")];
        assert_eq!(c.tunnels[3], gue);

        let mut fou = TunnelConfig::new(
            "fou-zero",
            TunnelKind::FouIpip,
            v6("2001:db8::1"),
            v6("2001:db8::3"),
        );
        fou.checksum = ChecksumMode::Zero;
        fou.zero_checksum_tx = true;
        fou.zero_checksum_rx = true;
        fou.inner_prefixes = vec![prefix("10.3.0.0/16"), prefix("10.4.0.1/32")];
        assert_eq!(c.tunnels[4], fou);

        let mut gre = TunnelConfig::new("gre-k7", TunnelKind::GreInUdp, local4, v4([192, 0, 2, 5]));
        gre.key = Some(7);
        gre.checksum = ChecksumMode::Lco;
        gre.df = DontFragment::Set;
        gre.inner_prefixes = vec![prefix("10.5.0.0/16")];
        assert_eq!(c.tunnels[5], gre);

        assert_eq!(c.validate(), Ok(()));
    }

    // --- Per tunnel: values --------------------------------------------

    #[test]
    fn addresses() {
        let e = err(&tunnel("a", "gue", "").replace("192.0.2.2", "192.0.2.256"));
        assert_eq!(
            e.to_string(),
            "tunnel[0] \"a\".remote: \"192.0.2.256\" is not an IP address (like 192.0.2.1 or 2001:db8::1)"
        );
        let e = err(&tunnel("a", "gue", "").replace("192.0.2.1", "host.example"));
        assert_eq!(e.field, "tunnel[0] \"a\".local");
        let e = err(&tunnel("a", "gue", "").replace("192.0.2.2", "2001:db8::2"));
        assert_eq!(
            e.to_string(),
            "tunnel[0] \"a\".remote: 2001:db8::2 is IPv6 but local 192.0.2.1 is IPv4; both ends of the outer path must be the same family"
        );
    }

    #[test]
    fn ports() {
        let e = err(&tunnel("a", "gue", "local_port = 0"));
        assert_eq!(
            e.to_string(),
            "tunnel[0] \"a\".local_port: 0 is out of range (1..=65535)"
        );
        let e = err(&tunnel("a", "gue", "remote_port = 65536"));
        assert_eq!(e.field, "tunnel[0] \"a\".remote_port");
        let e = err(&tunnel("a", "gue", "source_ports = [2000, 1000]"));
        assert_eq!(
            e.to_string(),
            "tunnel[0] \"a\".source_ports: [2000, 1000]: the low port is above the high one; did you mean [1000, 2000]?"
        );
        let e = err(&tunnel("a", "gue", "source_ports = [0, 1000]"));
        assert_eq!(e.field, "tunnel[0] \"a\".source_ports[0]");
        let e = err(&tunnel("a", "gue", "source_ports = [1000]"));
        assert_eq!(
            e.to_string(),
            "tunnel[0] \"a\".source_ports: give two ports [low, high] with 1 <= low <= high, like [49152, 65535]"
        );
        let e = err(&tunnel("a", "gue", "source_ports = [1, 2, 3]"));
        assert_eq!(e.field, "tunnel[0] \"a\".source_ports");
        assert_eq!(
            ok(&tunnel("a", "gue", "source_ports = [7, 7]")).tunnels[0].source_ports,
            (7, 7)
        );
    }

    #[test]
    fn vni_range() {
        let e = err(&tunnel("gtp-a", "vxlan", "").replace("vni = 1", "vni = 16777216"));
        assert_eq!(e.field, "tunnel[0] \"gtp-a\".vni");
        assert_eq!(e.message, "16777216 is out of range (0..=16777215)");
        let e = err(&tunnel("g", "geneve", "").replace("vni = 1", "vni = -1"));
        assert_eq!(
            e.to_string(),
            "tunnel[0] \"g\".vni: -1 is out of range (0..=16777215)"
        );
        // Beyond i64 (TOML's integer range) still reads as out of range.
        let e = err(&tunnel("g", "geneve", "").replace("vni = 1", "vni = 99999999999999999999"));
        assert_eq!(
            e.to_string(),
            "tunnel[0] \"g\".vni: 99999999999999999999 is out of range (0..=16777215)"
        );
    }

    #[test]
    fn ttl_dscp_df() {
        let t = &ok(&tunnel("a", "gue", "ttl = 1\ndscp = 0\ndf = \"INHERIT\"")).tunnels[0];
        assert_eq!(
            (t.ttl, t.dscp, t.df),
            (Ttl::Fixed(1), Dscp::Fixed(0), DontFragment::Inherit)
        );
        let t = &ok(&tunnel("a", "gue", "ttl = 255\ndscp = 63\ndf = \"unset\"")).tunnels[0];
        assert_eq!(
            (t.ttl, t.dscp, t.df),
            (Ttl::Fixed(255), Dscp::Fixed(63), DontFragment::Unset)
        );
        let e = err(&tunnel("a", "gue", "ttl = 0"));
        assert_eq!(
            e.to_string(),
            "tunnel[0] \"a\".ttl: 0 is out of range (1..=255), or \"inherit\""
        );
        let e = err(&tunnel("a", "gue", "ttl = 256"));
        assert_eq!(e.field, "tunnel[0] \"a\".ttl");
        let e = err(&tunnel("a", "gue", "ttl = \"copy\""));
        assert_eq!(
            e.to_string(),
            "tunnel[0] \"a\".ttl: \"copy\" is not a TTL: give 1..=255 or \"inherit\""
        );
        let e = err(&tunnel("a", "gue", "dscp = 64"));
        assert_eq!(
            e.to_string(),
            "tunnel[0] \"a\".dscp: 64 is out of range (0..=63), or \"inherit\""
        );
        let e = err(&tunnel("a", "gue", "dscp = \"ef\""));
        assert_eq!(e.field, "tunnel[0] \"a\".dscp");
        let e = err(&tunnel("a", "gue", "df = \"yes\""));
        assert_eq!(
            e.to_string(),
            "tunnel[0] \"a\".df: \"yes\" is not one of \"set\", \"unset\", \"inherit\""
        );
    }

    #[test]
    fn checksum_modes() {
        for m in ChecksumMode::ALL {
            let text = tunnel("a", "vxlan", &format!("checksum = \"{m}\""));
            assert_eq!(ok(&text).tunnels[0].checksum, m);
        }
        let e = err(&tunnel("a", "gue", "checksum = \"none\""));
        assert_eq!(
            e.to_string(),
            "tunnel[0] \"a\".checksum: \"none\" is not one of \"zero\", \"full\", \"lco\", \"offload\", \"remote\""
        );
    }

    #[test]
    fn kind_specific_fields_on_other_kinds() {
        let cases = [
            ("gtpu", "vni = 5", "vni"),
            ("gue", "vni = 5", "vni"),
            ("vxlan", "teid = 5", "teid"),
            ("gre", "local_teid = 5", "local_teid"),
            ("geneve", "qfi = 5", "qfi"),
            ("vxlan", "key = 5", "key"),
            ("gtpu", "key = 5", "key"),
            ("gue", "key = 5", "key"),
            ("fou-ipip", "key = 5", "key"),
            ("vxlan", "gue_rco = \"linux\"", "gue_rco"),
            ("fou-gre", "gue_rco = \"ietf\"", "gue_rco"),
            (
                "vxlan",
                "inner_prefixes = [\"10.0.0.0/8\"]",
                "inner_prefixes",
            ),
            ("geneve", "inner_prefixes = []", "inner_prefixes"),
            ("gtpu", "inner_macs = [\"02:00:00:00:00:01\"]", "inner_macs"),
            ("fou-sit", "inner_macs = []", "inner_macs"),
        ];
        for (kind, line, field) in cases {
            let e = err(&tunnel("a", kind, line));
            assert_eq!(
                e.field,
                format!("tunnel[0] \"a\".{field}"),
                "{kind} {line}: {e}"
            );
            assert!(
                e.message.starts_with(&format!("not used by kind {kind}")),
                "{e}"
            );
        }
        let e = err(&tunnel("a", "gtpu", "vni = 5"));
        assert_eq!(
            e.to_string(),
            "tunnel[0] \"a\".vni: not used by kind gtpu (only vxlan and geneve have a VNI); remove it"
        );
        let e = err(&tunnel("a", "vxlan", "inner_prefixes = [\"10.0.0.0/8\"]"));
        assert_eq!(
            e.to_string(),
            "tunnel[0] \"a\".inner_prefixes: not used by kind vxlan: it carries Ethernet frames, routed by inner_macs"
        );
    }

    #[test]
    fn prefixes() {
        let e = err(&tunnel(
            "a",
            "gue",
            "inner_prefixes = [\"10.0.0.0/8\", \"10.1.2.3/16\"]",
        ));
        assert_eq!(
            e.to_string(),
            "tunnel[0] \"a\".inner_prefixes[1]: 10.1.2.3/16 has host bits set; did you mean 10.1.0.0/16?"
        );
        let e = err(&tunnel("a", "gue", "inner_prefixes = [\"10.0.0.0/33\"]"));
        assert_eq!(
            e.to_string(),
            "tunnel[0] \"a\".inner_prefixes[0]: \"10.0.0.0/33\": the prefix length 33 is too long for IPv4 (0..=32)"
        );
        let e = err(&tunnel("a", "gue", "inner_prefixes = [\"10.0.0/8\"]"));
        assert_eq!(e.field, "tunnel[0] \"a\".inner_prefixes[0]");
        let t = &ok(&tunnel(
            "a",
            "gue",
            "inner_prefixes = [\"10.9.9.9\", \"2001:db8::5\", \"0.0.0.0/0\", \"::/0\"]",
        ))
        .tunnels[0];
        assert_eq!(
            t.inner_prefixes,
            [
                IpPrefix {
                    addr: v4([10, 9, 9, 9]),
                    len: 32
                },
                IpPrefix {
                    addr: v6("2001:db8::5"),
                    len: 128
                },
                IpPrefix {
                    addr: v4([0, 0, 0, 0]),
                    len: 0
                },
                IpPrefix {
                    addr: v6("::"),
                    len: 0
                },
            ]
        );
    }

    #[test]
    fn macs() {
        let e = err(&tunnel(
            "a",
            "vxlan",
            "inner_macs = [\"02:00:00:00:00:01\", \"01:00:5e:00:00:01\"]",
        ));
        assert_eq!(e.field, "tunnel[0] \"a\".inner_macs[1]");
        assert!(
            e.message
                .starts_with("01:00:5e:00:00:01 is a multicast address"),
            "{e}"
        );
        let e = err(&tunnel(
            "a",
            "vxlan",
            "inner_macs = [\"ff:ff:ff:ff:ff:ff\"]",
        ));
        assert_eq!(e.field, "tunnel[0] \"a\".inner_macs[0]");
        let e = err(&tunnel(
            "a",
            "vxlan",
            "inner_macs = [\"00:00:00:00:00:00\"]",
        ));
        assert_eq!(
            e.to_string(),
            "tunnel[0] \"a\".inner_macs[0]: 00:00:00:00:00:00 is not a usable address; to make this the default tunnel of its kind, leave inner_macs empty"
        );
        let e = err(&tunnel("a", "vxlan", "inner_macs = [\"02:00:00:00:00\"]"));
        assert_eq!(
            e.to_string(),
            "tunnel[0] \"a\".inner_macs[0]: \"02:00:00:00:00\" is not a MAC address (six hex octets, like 02:00:00:00:00:01 or 02-00-00-00-00-01)"
        );
        for bad in [
            "02:00:00:00:00:01:02",
            "02:00:00:00:00:0g",
            "02:00:00:00:00:001",
            "02:00-00:00:00:01",
            "020000000001",
            "",
        ] {
            let e = err(&tunnel("a", "vxlan", &format!("inner_macs = [\"{bad}\"]")));
            assert_eq!(e.field, "tunnel[0] \"a\".inner_macs[0]", "{bad}");
        }
        let t = &ok(&tunnel(
            "a",
            "vxlan",
            "inner_macs = [\"2:a:B:c:D:e\", \"AA-BB-CC-DD-EE-FE\"]",
        ))
        .tunnels[0];
        assert_eq!(
            t.inner_macs,
            [
                mac([2, 0xa, 0xb, 0xc, 0xd, 0xe]),
                mac([0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xfe])
            ]
        );
    }

    #[test]
    fn gue_variant() {
        let c = ok(&tunnel("gue", "gue", "gue_variant = 1"));
        assert_eq!(c.tunnels[0].gue_variant, 1);
        assert_eq!(ok(&tunnel("gue", "gue", "")).tunnels[0].gue_variant, 0);
        for (kind, extra, field) in [
            ("gue", "gue_variant = 2", "gue_variant"),
            ("vxlan", "gue_variant = 1", "gue_variant"),
            (
                "gue",
                "gue_variant = 1\nchecksum = \"remote\"\nremote_checksum_rx = true",
                "checksum",
            ),
        ] {
            let e = err(&tunnel("t", kind, extra));
            assert!(e.field.ends_with(field), "{kind} {extra}: {e}");
        }
    }

    #[test]
    fn first_error_in_file_order() {
        // Per-tunnel rules are checked tunnel by tunnel.
        let e = err(&[
            tunnel("a", "gue", "ttl = 0"),
            tunnel("b", "gue", "dscp = 99"),
        ]
        .concat());
        assert_eq!(e.field, "tunnel[0] \"a\".ttl");
        let e = err(&[
            tunnel("a", "gtpu", "checksum = \"remote\""),
            tunnel("b", "gue", "dscp = 99"),
        ]
        .concat());
        assert_eq!(e.field, "tunnel[0] \"a\".checksum");
    }
}
