//! The rules on typed values, per tunnel and between tunnels: the same for
//! a parsed config and one built in code (tests, benches, a control plane),
//! so they are written against the model, not the TOML.

use super::model::{
    ChecksumMode, ConfigError, Dscp, GueRcoEncoding, Ttl, TunnelConfig, MAX_NETWORKS,
};
use super::network_check::{check_network_pair, network_error, network_label};
use super::value::{bad_name_message, check_mac, check_prefix, family, not_used, valid_name};
use crate::kind::TunnelKind;

/// The largest VXLAN / Geneve VNI (24 bits).
pub const MAX_VNI: u32 = 0x00FF_FFFF;

/// Every rule on a list of tunnels, in order: each tunnel's own
/// ([`TunnelConfig::check`]), then those between tunnels; the first broken
/// is the error.
pub fn check_tunnels(tunnels: &[TunnelConfig]) -> Result<(), ConfigError> {
    for (t, place) in tunnels.iter().zip(places(tunnels)) {
        t.check(place.index())?;
    }
    check_together(tunnels)
}

/// Where a tunnel's errors point: a `[[tunnel]]` (or N3 tunnel) by its
/// index in the list, a `[[network]]` by its position among the networks
/// (so that a network's errors match the file, wherever the list puts it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    Tunnel(usize),
    Network(usize),
}

impl Place {
    fn index(self) -> usize {
        match self {
            Place::Tunnel(i) | Place::Network(i) => i,
        }
    }

    fn of(t: &TunnelConfig, index: usize) -> Place {
        if t.is_network() {
            Place::Network(index)
        } else {
            Place::Tunnel(index)
        }
    }

    fn label(self, name: &str) -> String {
        match self {
            Place::Tunnel(i) => tunnel_label(i, name),
            Place::Network(i) => network_label(i, name),
        }
    }

    /// The error about `field` (labelled by the name when there is one).
    fn error(self, name: Option<&str>, field: &str, message: String) -> ConfigError {
        match self {
            Place::Tunnel(i) => tunnel_error(i, name, field, message),
            Place::Network(i) => network_error(i, name, field, message),
        }
    }
}

/// Each tunnel's place: networks counted among themselves.
fn places(ts: &[TunnelConfig]) -> Vec<Place> {
    let mut networks = 0;
    ts.iter()
        .enumerate()
        .map(|(i, t)| {
            if t.is_network() {
                networks += 1;
                Place::Network(networks - 1)
            } else {
                Place::Tunnel(i)
            }
        })
        .collect()
}

/// The rules between tunnels: unique names, one kind per port, every
/// packet received belongs to one tunnel, every inner destination routes
/// to one tunnel; between networks, their own devices and VLANs.
pub fn check_together(ts: &[TunnelConfig]) -> Result<(), ConfigError> {
    let places = places(ts);
    // Before the pairs: their count is what this bounds.
    if let Some(j) = places
        .iter()
        .position(|p| *p == Place::Network(MAX_NETWORKS))
    {
        return Err(places[j].error(
            Some(&ts[j].name),
            "name",
            format!("more than {MAX_NETWORKS} networks (a network's index is 16 bits)"),
        ));
    }
    for (j, b) in ts.iter().enumerate() {
        let at = |field: &str, message: String| places[j].error(Some(&b.name), field, message);
        for (i, a) in ts[..j].iter().enumerate() {
            check_pair((places[i], a), (places[j], b), &at)?;
        }
        check_lists(b, &at)?;
    }
    Ok(())
}

/// Tunnel `b` against the earlier tunnel `a`.
fn check_pair(
    (i, a): (Place, &TunnelConfig),
    (j, b): (Place, &TunnelConfig),
    at: &impl Fn(&str, String) -> ConfigError,
) -> Result<(), ConfigError> {
    let earlier = i.label(&a.name);
    if a.name == b.name {
        return Err(j.error(
            None,
            "name",
            format!(
                "\"{}\" is already the name of {earlier}; names must be unique among tunnels and networks",
                b.name
            ),
        ));
    }
    if a.local_port == b.local_port && a.kind != b.kind {
        return Err(at(
                "local_port",
                format!(
                    "port {} already receives {} for {earlier}; a UDP port carries one tunnel kind, so this {} {} needs another local_port",
                    b.local_port, a.kind, b.kind, if b.is_network() { "network" } else { "tunnel" }
                ),
            ));
    }
    if a.is_network() || b.is_network() {
        check_network_receive(a, b, &earlier, at)?;
        return check_network_pair(a, b, &earlier, at);
    }
    if a.local_port == b.local_port
        && a.local == b.local
        && a.remote == b.remote
        && receive_id(a) == receive_id(b)
    {
        let (field, what) = receive_id_text(b);
        let fix = match receive_id(b) {
            ReceiveId::None => "give one a different local_port, local or remote",
            _ => "give one a different identifier, local_port, local or remote",
        };
        return Err(at(
                field,
                format!(
                    "received packets could not be told apart from {earlier}'s: same local {} port {}, remote {}{what}; {fix}",
                    b.local, b.local_port, b.remote
                ),
            ));
    }
    check_inner_pair(a, b, &earlier, at)
}

/// A network accepts packets from every remote, so it clashes with any
/// tunnel or network on its local address and port with its identifier.
fn check_network_receive(
    a: &TunnelConfig,
    b: &TunnelConfig,
    earlier: &str,
    at: &impl Fn(&str, String) -> ConfigError,
) -> Result<(), ConfigError> {
    if a.local_port != b.local_port || a.local != b.local || receive_id(a) != receive_id(b) {
        return Ok(());
    }
    let (field, what) = match receive_id_text(b) {
        ("remote", w) => ("local_port", w),
        other => other,
    };
    let fix = match receive_id(b) {
        ReceiveId::None => "give one a different local_port or local",
        _ => "give one a different identifier, local_port or local",
    };
    Err(at(
        field,
        format!(
            "received packets could not be told apart from {earlier}'s: same local {} port {}{what}, and a network accepts every remote; {fix}",
            b.local, b.local_port
        ),
    ))
}

/// The field and words naming what tells `t`'s packets apart.
fn receive_id_text(t: &TunnelConfig) -> (&'static str, String) {
    match receive_id(t) {
        ReceiveId::Vni(v) => ("vni", format!(" and vni {v}")),
        ReceiveId::Teid(t) => ("local_teid", format!(" and local_teid {t:#x}")),
        ReceiveId::Key(Some(k)) => ("key", format!(" and key {k}")),
        ReceiveId::Key(None) => ("key", " and no key".to_string()),
        ReceiveId::None => ("remote", String::new()),
    }
}

/// Point-to-point tunnels: each inner prefix and MAC routes to one, and
/// one default (no inner_macs) per L2 kind.
fn check_inner_pair(
    a: &TunnelConfig,
    b: &TunnelConfig,
    earlier: &str,
    at: &impl Fn(&str, String) -> ConfigError,
) -> Result<(), ConfigError> {
    if !a.kind.carries_ethernet() && !b.kind.carries_ethernet() {
        for (k, p) in b.inner_prefixes.iter().enumerate() {
            if a.inner_prefixes.contains(p) {
                return Err(at(
                        &format!("inner_prefixes[{k}]"),
                        format!("{p} is already routed into {earlier}; a prefix may route to one tunnel only"),
                    ));
            }
        }
    }
    if a.kind.carries_ethernet() && b.kind.carries_ethernet() {
        for (k, m) in b.inner_macs.iter().enumerate() {
            if a.inner_macs.contains(m) {
                return Err(at(
                    &format!("inner_macs[{k}]"),
                    format!("{m} is already sent into {earlier}; a MAC may go to one tunnel only"),
                ));
            }
        }
        if a.kind == b.kind && a.inner_macs.is_empty() && b.inner_macs.is_empty() {
            return Err(at(
                    "inner_macs",
                    format!(
                        "{earlier} is already the default {} tunnel (empty inner_macs); only one per kind may be, so list this tunnel's MACs",
                        b.kind
                    ),
                ));
        }
    }
    Ok(())
}

/// No prefix or MAC listed twice in one tunnel.
fn check_lists(
    b: &TunnelConfig,
    at: &impl Fn(&str, String) -> ConfigError,
) -> Result<(), ConfigError> {
    for (k, p) in b.inner_prefixes.iter().enumerate() {
        if b.inner_prefixes[..k].contains(p) {
            return Err(at(
                &format!("inner_prefixes[{k}]"),
                format!("{p} is listed twice"),
            ));
        }
    }
    for (k, m) in b.inner_macs.iter().enumerate() {
        if b.inner_macs[..k].contains(m) {
            return Err(at(
                &format!("inner_macs[{k}]"),
                format!("{m} is listed twice"),
            ));
        }
    }
    Ok(())
}

/// What the receive path tells tunnels on the same port and addresses
/// apart by.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ReceiveId {
    Vni(u32),
    Teid(u32),
    Key(Option<u32>),
    None,
}

fn receive_id(t: &TunnelConfig) -> ReceiveId {
    match t.kind {
        TunnelKind::Vxlan | TunnelKind::Geneve => ReceiveId::Vni(t.vni),
        TunnelKind::Gtpu => ReceiveId::Teid(t.local_teid),
        TunnelKind::GreInUdp | TunnelKind::FouGre | TunnelKind::GueGre => ReceiveId::Key(t.key),
        TunnelKind::Gue | TunnelKind::FouIpip | TunnelKind::FouSit => ReceiveId::None,
    }
}

/// Whether the kind carries a VNI (VXLAN, Geneve).
pub fn uses_vni(kind: TunnelKind) -> bool {
    matches!(kind, TunnelKind::Vxlan | TunnelKind::Geneve)
}

/// Whether the kind may carry a GRE key.
pub fn uses_key(kind: TunnelKind) -> bool {
    matches!(
        kind,
        TunnelKind::GreInUdp | TunnelKind::FouGre | TunnelKind::GueGre
    )
}

fn uses_remote_checksum(kind: TunnelKind) -> bool {
    matches!(kind, TunnelKind::Vxlan | TunnelKind::Gue)
}

/// `tunnel[1] "gtp-a"`, or `tunnel[1]` without a (usable) name.
pub fn tunnel_label(index: usize, name: &str) -> String {
    if valid_name(name) {
        format!("tunnel[{index}] \"{name}\"")
    } else {
        format!("tunnel[{index}]")
    }
}

/// The error about `field` of tunnel `index` (labelled by its name when
/// it has one), as every per-tunnel message names it.
pub fn tunnel_error(index: usize, name: Option<&str>, field: &str, message: String) -> ConfigError {
    let label = match name {
        Some(n) => tunnel_label(index, n),
        None => format!("tunnel[{index}]"),
    };
    ConfigError {
        field: format!("{label}.{field}"),
        message,
    }
}

impl TunnelConfig {
    /// The per-tunnel rules on the typed values; `index` is the tunnel's
    /// position (a network's: among the networks), for the error's field.
    pub fn check(&self, index: usize) -> Result<(), ConfigError> {
        let place = Place::of(self, index);
        if !valid_name(&self.name) {
            return Err(place.error(None, "name", bad_name_message(&self.name)));
        }
        let at = |field: &str, message: String| place.error(Some(&self.name), field, message);
        if self.is_network() {
            self.check_network_shape(&at)?;
        }
        self.check_addresses(&at)?;
        self.check_ids(&at)?;
        self.check_checksums(&at)?;
        self.check_routes(&at)?;
        self.check_outer(&at)?;
        if let Some(n) = &self.network {
            self.check_network(n, &at)?;
        }
        Ok(())
    }

    /// The outer path: one address family, usable ports.
    fn check_addresses(
        &self,
        at: &impl Fn(&str, String) -> ConfigError,
    ) -> Result<(), ConfigError> {
        if self.local.is_ipv4() != self.remote.is_ipv4() {
            return Err(at(
                "remote",
                format!(
                    "{} is {} but local {} is {}; both ends of the outer path must be the same family",
                    self.remote,
                    family(self.remote),
                    self.local,
                    family(self.local)
                ),
            ));
        }
        for (field, port) in [
            ("local_port", self.local_port),
            ("remote_port", self.remote_port),
        ] {
            if port == 0 {
                return Err(at(field, "0 is not a usable port (1..=65535)".to_string()));
            }
        }
        let (lo, hi) = self.source_ports;
        if lo == 0 || lo > hi {
            return Err(at(
                "source_ports",
                format!("[{lo}, {hi}] is not a range: give [low, high] with 1 <= low <= high, like [49152, 65535]"),
            ));
        }
        Ok(())
    }

    /// What tells the tunnel apart on receive, and what it sends: VNI, TEIDs, QFI, GRE key, each on its kind only.
    fn check_ids(&self, at: &impl Fn(&str, String) -> ConfigError) -> Result<(), ConfigError> {
        let kind = self.kind;
        if uses_vni(kind) {
            if self.vni > MAX_VNI {
                return Err(at(
                    "vni",
                    format!("{} is out of range (0..={MAX_VNI})", self.vni),
                ));
            }
        } else if self.vni != 0 {
            return Err(at(
                "vni",
                not_used(kind, "only vxlan and geneve have a VNI"),
            ));
        }
        if kind != TunnelKind::Gtpu {
            let gtp_only = "only gtpu has TEIDs and QFIs";
            if self.teid != 0 {
                return Err(at("teid", not_used(kind, gtp_only)));
            }
            if self.local_teid != 0 {
                return Err(at("local_teid", not_used(kind, gtp_only)));
            }
            if self.qfi.is_some() {
                return Err(at("qfi", not_used(kind, gtp_only)));
            }
        }
        if let Some(q) = self.qfi {
            if q > 63 {
                return Err(at("qfi", format!("{q} is out of range (0..=63)")));
            }
        }
        if self.key.is_some() && !uses_key(kind) {
            return Err(at(
                "key",
                not_used(kind, "only gre, fou-gre and gue-gre have a GRE key"),
            ));
        }
        Ok(())
    }

    /// GUE's options and the checksum modes each kind and family allows.
    fn check_checksums(
        &self,
        at: &impl Fn(&str, String) -> ConfigError,
    ) -> Result<(), ConfigError> {
        let kind = self.kind;
        if self.gue_rco != GueRcoEncoding::Linux && kind != TunnelKind::Gue {
            return Err(at(
                "gue_rco",
                not_used(kind, "it chooses GUE's remote checksum offload encoding"),
            ));
        }
        if self.gue_variant != 0 && kind != TunnelKind::Gue {
            return Err(at(
                "gue_variant",
                not_used(kind, "it chooses the GUE variant sent"),
            ));
        }
        if self.gue_variant > 1 {
            return Err(at(
                "gue_variant",
                format!("{} is not a GUE variant (0 or 1)", self.gue_variant),
            ));
        }
        if self.gue_variant == 1 && self.checksum == ChecksumMode::Remote {
            return Err(at(
                "checksum",
                "\"remote\" needs a GUE header to carry the checksum's start and offset; variant 1 has none (use gue_variant = 0)".to_string(),
            ));
        }
        if self.checksum == ChecksumMode::Remote && !uses_remote_checksum(kind) {
            return Err(at(
                "checksum",
                format!("\"remote\" (remote checksum offload) exists only for vxlan and gue, not {kind}; use \"full\", \"lco\" or \"offload\""),
            ));
        }
        if self.remote_checksum_rx && !uses_remote_checksum(kind) {
            return Err(at(
                "remote_checksum_rx",
                format!("remote checksum offload exists only for vxlan and gue, not {kind}; remove it or set it to false"),
            ));
        }
        if self.checksum == ChecksumMode::Zero && self.local.is_ipv6() && !self.zero_checksum_tx {
            return Err(at(
                "checksum",
                "\"zero\" over IPv6 needs zero_checksum_tx = true: RFC 6935 and RFC 6936 allow a zero UDP checksum over IPv6 only for tunnels that opt in explicitly (and the peer must accept it, e.g. Linux udp6zerocsumrx); set zero_checksum_tx = true, or use \"full\", \"lco\" or \"offload\"".to_string(),
            ));
        }
        Ok(())
    }

    /// The inner destinations routed into the tunnel.
    fn check_routes(&self, at: &impl Fn(&str, String) -> ConfigError) -> Result<(), ConfigError> {
        let kind = self.kind;
        if kind.carries_ethernet() {
            if !self.inner_prefixes.is_empty() {
                return Err(at(
                    "inner_prefixes",
                    format!(
                        "not used by kind {kind}: it carries Ethernet frames, routed by inner_macs"
                    ),
                ));
            }
        } else if !self.inner_macs.is_empty() {
            return Err(at(
                "inner_macs",
                format!("not used by kind {kind}: it carries IP packets, routed by inner_prefixes"),
            ));
        }
        for (k, p) in self.inner_prefixes.iter().enumerate() {
            check_prefix(kind, p).map_err(|e| at(&format!("inner_prefixes[{k}]"), e))?;
        }
        for (k, m) in self.inner_macs.iter().enumerate() {
            check_mac(*m).map_err(|e| at(&format!("inner_macs[{k}]"), e))?;
        }
        Ok(())
    }

    /// The outer TTL and DSCP.
    fn check_outer(&self, at: &impl Fn(&str, String) -> ConfigError) -> Result<(), ConfigError> {
        if self.ttl == Ttl::Fixed(0) {
            return Err(at(
                "ttl",
                "0 is out of range (1..=255, or \"inherit\")".to_string(),
            ));
        }
        if let Dscp::Fixed(d) = self.dscp {
            if d > 63 {
                return Err(at(
                    "dscp",
                    format!("{d} is out of range (0..=63, or \"inherit\")"),
                ));
            }
        }
        Ok(())
    }
}
