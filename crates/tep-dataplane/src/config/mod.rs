//! The tunnel configuration: what `tep.toml` says, validated.
//!
//! These are the checked types the dataplane is built from. Parsing the
//! TOML and every validation rule live in [`parse`](Config::parse); a bad
//! config is an error that names the field (`tunnel[1] "gtp-a": vni: ...`).

mod host;

use crate::kind::TunnelKind;
use core::fmt;
use core::net::IpAddr;
use core::str::FromStr;
use host::RawHost;
pub use host::{HostConfig, DEFAULT_CONTROL};
use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use std::collections::BTreeMap;
use tep_wire::ethernet::EthernetAddress;
use toml::Spanned;

/// How a tunnel fills the outer UDP checksum on transmit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ChecksumMode {
    /// Checksum 0: none sent. Over IPv6 only with `zero_checksum_tx`
    /// (RFC 6935, RFC 6936).
    Zero,
    /// Computed in software over the whole datagram (SIMD engine).
    Full,
    /// Local checksum offload: derived from the headers in between when the
    /// inner transport checksum is set or partial, without reading the
    /// payload; computed in full otherwise.
    Lco,
    /// Left partial (start/offset, pseudo-header sum in the field) for the
    /// I/O layer: virtio-net NEEDS_CSUM, a NIC.
    Offload,
    /// Remote checksum offload (GUE, VXLAN): a partial inner checksum is
    /// left for the receiver with its start/offset in the tunnel header; the
    /// outer checksum is computed.
    Remote,
}

impl ChecksumMode {
    /// Every mode.
    pub const ALL: [ChecksumMode; 5] = [
        ChecksumMode::Zero,
        ChecksumMode::Full,
        ChecksumMode::Lco,
        ChecksumMode::Offload,
        ChecksumMode::Remote,
    ];

    /// The name in the config.
    pub const fn name(self) -> &'static str {
        match self {
            ChecksumMode::Zero => "zero",
            ChecksumMode::Full => "full",
            ChecksumMode::Lco => "lco",
            ChecksumMode::Offload => "offload",
            ChecksumMode::Remote => "remote",
        }
    }
}

impl fmt::Display for ChecksumMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which encoding of GUE remote checksum offload a tunnel sends.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum GueRcoEncoding {
    /// Linux's private-flags encoding (what `fou`/`gue` in the kernel
    /// sends): P flag, private flag word, 4-byte start/offset.
    #[default]
    Linux,
    /// draft-ietf-intarea-gue-extensions: the R flag and a 4-byte field.
    Ietf,
}

/// The outer TTL / hop limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ttl {
    /// Copied from the inner packet (64 when the inner has none, e.g. ARP).
    Inherit,
    /// This value.
    Fixed(u8),
}

/// The outer DSCP (ECN always follows RFC 6040 normal mode).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dscp {
    /// Copied from the inner packet.
    Inherit,
    /// This value (0..=63).
    Fixed(u8),
}

/// The outer IPv4 Don't-Fragment bit (IPv6 never fragments on the path).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum DontFragment {
    /// Always set.
    Set,
    /// Never set (Linux's default for VXLAN/Geneve).
    #[default]
    Unset,
    /// Copied from an inner IPv4 packet; unset for others.
    Inherit,
}

/// An IP prefix, `10.1.0.0/16` or `2001:db8::/32`, host bits zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IpPrefix {
    /// The network address (host bits zero).
    pub addr: IpAddr,
    /// The prefix length (≤ 32 or ≤ 128).
    pub len: u8,
}

impl IpPrefix {
    /// Whether `a` is inside the prefix (false across families).
    pub fn contains(&self, a: IpAddr) -> bool {
        match (self.addr, a) {
            (IpAddr::V4(p), IpAddr::V4(a)) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.len)).unwrap_or(0);
                u32::from(p) & mask == u32::from(a) & mask
            }
            (IpAddr::V6(p), IpAddr::V6(a)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.len))
                    .unwrap_or(0);
                u128::from(p) & mask == u128::from(a) & mask
            }
            _ => false,
        }
    }
}

impl fmt::Display for IpPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

/// Settings for the whole dataplane (`[dataplane]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataplaneConfig {
    /// At most this many GTP-U Error Indications per second (to unknown
    /// TEIDs), after TS 29.281 §7.3.1's advice to rate-limit them.
    pub error_indication_rate: u32,
    /// The GTP-U Recovery IE's restart counter sent in Echo Responses.
    pub restart_counter: u8,
}

impl Default for DataplaneConfig {
    fn default() -> Self {
        DataplaneConfig {
            error_indication_rate: 10,
            restart_counter: 0,
        }
    }
}

/// One `[[tunnel]]`, validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TunnelConfig {
    /// Unique name (counters, logs).
    pub name: String,
    /// What it encapsulates with.
    pub kind: TunnelKind,
    /// Our outer address.
    pub local: IpAddr,
    /// The peer's outer address (same family as `local`).
    pub remote: IpAddr,
    /// The UDP port we receive on (default: the kind's port).
    pub local_port: u16,
    /// The UDP destination port we send to (default: the kind's port).
    pub remote_port: u16,
    /// UDP source ports are chosen from the inner flow hash in this range
    /// (default 49152..=65535, RFC 6335 dynamic ports).
    pub source_ports: (u16, u16),
    /// VXLAN / Geneve VNI (< 2^24); 0 for other kinds.
    pub vni: u32,
    /// GTP-U: the TEID we put on packets we send (the peer's TEID).
    pub teid: u32,
    /// GTP-U: the TEID we accept (default: `teid`).
    pub local_teid: u32,
    /// GTP-U: add a PDU Session Container (UL PDU SESSION INFORMATION) with
    /// this QFI (0..=63).
    pub qfi: Option<u8>,
    /// GRE key (GRE-in-UDP, FOU-GRE), both directions.
    pub key: Option<u32>,
    /// How the outer UDP checksum is filled on transmit.
    pub checksum: ChecksumMode,
    /// Over IPv6: allowed to send checksum 0 (Linux `udp6zerocsumtx`).
    pub zero_checksum_tx: bool,
    /// Over IPv6: accept checksum 0 (Linux `udp6zerocsumrx`). IPv4 always
    /// accepts it (RFC 768).
    pub zero_checksum_rx: bool,
    /// Accept remote checksum offload from the peer (Linux `remcsumrx`).
    pub remote_checksum_rx: bool,
    /// GUE: which RCO encoding to send.
    pub gue_rco: GueRcoEncoding,
    /// GUE: the variant sent. 0: the 4-byte header; 1: no header, the
    /// inner IPv4/IPv6 packet right after UDP (draft-ietf-intarea-gue §4;
    /// Linux receives it but never sends it). Both are always received.
    pub gue_variant: u8,
    /// L3 kinds: the inner destinations routed into this tunnel.
    pub inner_prefixes: Vec<IpPrefix>,
    /// L2 kinds: the inner destination MACs sent into this tunnel; empty
    /// means "every MAC no other tunnel of the same kind claims" (like a
    /// Linux VXLAN all-zeros FDB entry).
    pub inner_macs: Vec<EthernetAddress>,
    /// Outer TTL / hop limit.
    pub ttl: Ttl,
    /// Outer DSCP.
    pub dscp: Dscp,
    /// Outer IPv4 DF.
    pub df: DontFragment,
}

/// The whole configuration.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Config {
    /// `[dataplane]`.
    pub dataplane: DataplaneConfig,
    /// `[[tunnel]]`, in file order (the tunnel index is the position).
    pub tunnels: Vec<TunnelConfig>,
    /// `[host]`: devices, queues and listeners of `tep run`.
    pub host: HostConfig,
}

/// A configuration error, naming the field it is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// Where: `tunnel[1] "gtp-a".vni`, `dataplane.error_indication_rate`,
    /// or `line 7` for TOML syntax errors.
    pub field: String,
    /// What is wrong, and what would be right.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

impl std::error::Error for ConfigError {}

impl TunnelConfig {
    /// A tunnel of `kind` between two addresses with every other field at
    /// its default: what tests and benchmarks start from.
    pub fn new(name: &str, kind: TunnelKind, local: IpAddr, remote: IpAddr) -> TunnelConfig {
        TunnelConfig {
            name: name.to_string(),
            kind,
            local,
            remote,
            local_port: kind.default_port(),
            remote_port: kind.default_port(),
            source_ports: (49152, 65535),
            vni: 0,
            teid: 0,
            local_teid: 0,
            qfi: None,
            key: None,
            checksum: ChecksumMode::Full,
            zero_checksum_tx: false,
            zero_checksum_rx: false,
            remote_checksum_rx: false,
            gue_rco: GueRcoEncoding::Linux,
            gue_variant: 0,
            inner_prefixes: Vec::new(),
            inner_macs: Vec::new(),
            ttl: Ttl::Fixed(64),
            dscp: Dscp::Inherit,
            df: DontFragment::Unset,
        }
    }
}

// ---------------------------------------------------------------------------
// Parsing
// ---------------------------------------------------------------------------

/// The default UDP source-port range (RFC 6335 dynamic ports).
const DEFAULT_SOURCE_PORTS: (u16, u16) = (49152, 65535);
/// The longest tunnel name (it ends up in counter names and log lines).
const MAX_NAME_LEN: usize = 32;
/// The largest VXLAN / Geneve VNI (24 bits).
const MAX_VNI: u32 = 0x00FF_FFFF;

impl FromStr for IpPrefix {
    type Err = String;

    /// `addr/len`, or a bare address meaning /32 or /128. Host bits must be
    /// zero: a typo like `10.1.2.3/16` is refused with the corrected prefix
    /// rather than silently masked.
    fn from_str(s: &str) -> Result<IpPrefix, String> {
        let prefix = IpPrefix::parse_address(s)?;
        let network = prefix.network();
        if network != prefix.addr {
            return Err(format!(
                "{s} has host bits set; did you mean {}?",
                IpPrefix {
                    addr: network,
                    len: prefix.len
                }
            ));
        }
        Ok(prefix)
    }
}

impl IpPrefix {
    /// `addr/len` of an interface address, host bits kept
    /// (`10.0.0.1/24`); a bare address means /32 or /128.
    pub fn parse_address(s: &str) -> Result<IpPrefix, String> {
        let (addr_text, len_text) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        let addr: IpAddr = addr_text.parse().map_err(|_| {
            format!(
                "\"{s}\" is not an IP prefix (address/length, like 10.1.0.0/16 or 2001:db8:1::/48)"
            )
        })?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let family = if addr.is_ipv4() { "IPv4" } else { "IPv6" };
        let len = match len_text {
            None => max,
            Some(l) => {
                if l.is_empty() || l.len() > 3 || !l.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(format!(
                        "\"{s}\": the prefix length \"{l}\" is not a number (0..={max} for {family})"
                    ));
                }
                let len: u16 = l
                    .parse()
                    .map_err(|_| format!("\"{s}\": bad prefix length"))?;
                if len > u16::from(max) {
                    return Err(format!(
                        "\"{s}\": the prefix length {len} is too long for {family} (0..={max})"
                    ));
                }
                len as u8
            }
        };
        Ok(IpPrefix { addr, len })
    }
}

impl IpPrefix {
    /// The address with the host bits cleared.
    pub fn network(&self) -> IpAddr {
        match self.addr {
            IpAddr::V4(a) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.len)).unwrap_or(0);
                IpAddr::V4((u32::from(a) & mask).into())
            }
            IpAddr::V6(a) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.len))
                    .unwrap_or(0);
                IpAddr::V6((u128::from(a) & mask).into())
            }
        }
    }

    /// The longest prefix length of the address family (32 or 128).
    pub const fn max_len(&self) -> u8 {
        match self.addr {
            IpAddr::V4(_) => 32,
            IpAddr::V6(_) => 128,
        }
    }
}

impl Config {
    /// Parses and validates `tep.toml` text. An empty text is a valid
    /// config with no tunnels.
    ///
    /// The first problem found is returned, naming its field
    /// (`tunnel[1] "gtp-a".vni`); TOML syntax errors name the line.
    pub fn parse(text: &str) -> Result<Config, ConfigError> {
        let raw: RawFile = toml::from_str(text).map_err(|e| toml_error(text, &e))?;
        let dataplane = raw.dataplane.unwrap_or_default().validate()?;
        let mut tunnels = Vec::with_capacity(raw.tunnel.len());
        for (index, t) in raw.tunnel.into_iter().enumerate() {
            let t = t.validate(index)?;
            t.check(index)?;
            tunnels.push(t);
        }
        let host = raw.host.unwrap_or_default().validate()?;
        let config = Config {
            dataplane,
            tunnels,
            host,
        };
        config.check_together()?;
        Ok(config)
    }

    /// Reads and parses a config file. An I/O error names the path.
    pub fn load(path: &std::path::Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            field: path.display().to_string(),
            message: format!("cannot read the config: {e}"),
        })?;
        Config::parse(&text)
    }

    /// Checks every rule [`parse`](Config::parse) enforces that the typed
    /// values can still break: for configs built in code (tests, benches,
    /// a control plane) before the dataplane is built from them.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (index, t) in self.tunnels.iter().enumerate() {
            t.check(index)?;
        }
        self.check_together()
    }

    /// The rules between tunnels: unique names, one kind per port, every
    /// packet received belongs to one tunnel, every inner destination routes
    /// to one tunnel.
    fn check_together(&self) -> Result<(), ConfigError> {
        let ts = &self.tunnels;
        for (j, b) in ts.iter().enumerate() {
            let at = |field: &str, message: String| tunnel_error(j, Some(&b.name), field, message);
            for (i, a) in ts[..j].iter().enumerate() {
                let earlier = tunnel_label(i, &a.name);
                if a.name == b.name {
                    return Err(tunnel_error(
                        j,
                        None,
                        "name",
                        format!(
                            "\"{}\" is already the name of {earlier}; names must be unique",
                            b.name
                        ),
                    ));
                }
                if a.local_port == b.local_port && a.kind != b.kind {
                    return Err(at(
                        "local_port",
                        format!(
                            "port {} already receives {} for {earlier}; a UDP port carries one tunnel kind, so this {} tunnel needs another local_port",
                            b.local_port, a.kind, b.kind
                        ),
                    ));
                }
                if a.local_port == b.local_port
                    && a.local == b.local
                    && a.remote == b.remote
                    && receive_id(a) == receive_id(b)
                {
                    let (field, what) = match receive_id(b) {
                        ReceiveId::Vni(v) => ("vni", format!(" and vni {v}")),
                        ReceiveId::Teid(t) => ("local_teid", format!(" and local_teid {t:#x}")),
                        ReceiveId::Key(Some(k)) => ("key", format!(" and key {k}")),
                        ReceiveId::Key(None) => ("key", " and no key".to_string()),
                        ReceiveId::None => ("remote", String::new()),
                    };
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
            }
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
        }
        Ok(())
    }
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
        TunnelKind::GreInUdp | TunnelKind::FouGre => ReceiveId::Key(t.key),
        TunnelKind::Gue | TunnelKind::FouIpip | TunnelKind::FouSit => ReceiveId::None,
    }
}

fn uses_vni(kind: TunnelKind) -> bool {
    matches!(kind, TunnelKind::Vxlan | TunnelKind::Geneve)
}

fn uses_key(kind: TunnelKind) -> bool {
    matches!(kind, TunnelKind::GreInUdp | TunnelKind::FouGre)
}

fn uses_remote_checksum(kind: TunnelKind) -> bool {
    matches!(kind, TunnelKind::Vxlan | TunnelKind::Gue)
}

/// `tunnel[1] "gtp-a"`, or `tunnel[1]` without a (usable) name.
fn tunnel_label(index: usize, name: &str) -> String {
    if valid_name(name) {
        format!("tunnel[{index}] \"{name}\"")
    } else {
        format!("tunnel[{index}]")
    }
}

fn tunnel_error(index: usize, name: Option<&str>, field: &str, message: String) -> ConfigError {
    let label = match name {
        Some(n) => tunnel_label(index, n),
        None => format!("tunnel[{index}]"),
    };
    ConfigError {
        field: format!("{label}.{field}"),
        message,
    }
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

fn family(a: IpAddr) -> &'static str {
    if a.is_ipv4() {
        "IPv4"
    } else {
        "IPv6"
    }
}

/// `aa:bb:cc:dd:ee:ff` or `aa-bb-cc-dd-ee-ff`, as a usable unicast
/// destination.
fn parse_mac(s: &str) -> Result<EthernetAddress, String> {
    let bad = || {
        format!("\"{s}\" is not a MAC address (six hex octets, like 02:00:00:00:00:01 or 02-00-00-00-00-01)")
    };
    let sep = if s.contains('-') { '-' } else { ':' };
    let mut octets = [0u8; 6];
    let mut parts = s.split(sep);
    for o in octets.iter_mut() {
        let p = parts.next().ok_or_else(bad)?;
        if p.is_empty() || p.len() > 2 || !p.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad());
        }
        *o = u8::from_str_radix(p, 16).map_err(|_| bad())?;
    }
    if parts.next().is_some() {
        return Err(bad());
    }
    check_mac(EthernetAddress(octets))?;
    Ok(EthernetAddress(octets))
}

fn check_mac(m: EthernetAddress) -> Result<(), String> {
    if m.is_multicast() {
        return Err(format!(
            "{m} is a multicast address (low bit of the first octet set); inner_macs lists unicast destinations, and multicast/broadcast frames go to every tunnel of the kind"
        ));
    }
    if m.0 == [0; 6] {
        return Err(format!(
            "{m} is not a usable address; to make this the default tunnel of its kind, leave inner_macs empty"
        ));
    }
    Ok(())
}

impl TunnelConfig {
    /// The per-tunnel rules on the typed values.
    fn check(&self, index: usize) -> Result<(), ConfigError> {
        if !valid_name(&self.name) {
            return Err(tunnel_error(
                index,
                None,
                "name",
                bad_name_message(&self.name),
            ));
        }
        let at =
            |field: &str, message: String| tunnel_error(index, Some(&self.name), field, message);
        let kind = self.kind;
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
                not_used(kind, "only gre and fou-gre have a GRE key"),
            ));
        }
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
            if p.len > p.max_len() {
                return Err(at(
                    &format!("inner_prefixes[{k}]"),
                    format!(
                        "{p}: the prefix length {} is too long for {} (0..={})",
                        p.len,
                        family(p.addr),
                        p.max_len()
                    ),
                ));
            }
            let only = match kind {
                TunnelKind::FouIpip => Some(false),
                TunnelKind::FouSit => Some(true),
                _ => None,
            };
            if only.is_some_and(|v6| v6 != p.addr.is_ipv6()) {
                return Err(at(
                    &format!("inner_prefixes[{k}]"),
                    format!(
                        "{p} is {} but {kind} carries only {} (fou-ipip: IPv4, fou-sit: IPv6; gue carries both)",
                        family(p.addr),
                        if p.addr.is_ipv6() { "IPv4" } else { "IPv6" }
                    ),
                ));
            }
            if p.network() != p.addr {
                let fixed = IpPrefix {
                    addr: p.network(),
                    len: p.len,
                };
                return Err(at(
                    &format!("inner_prefixes[{k}]"),
                    format!("{p} has host bits set; did you mean {fixed}?"),
                ));
            }
        }
        for (k, m) in self.inner_macs.iter().enumerate() {
            check_mac(*m).map_err(|e| at(&format!("inner_macs[{k}]"), e))?;
        }
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

fn not_used(kind: TunnelKind, why: &str) -> String {
    format!("not used by kind {kind} ({why}); remove it")
}

fn bad_name_message(name: &str) -> String {
    if name.is_empty() {
        "the name is empty; use 1 to 32 characters from A-Z a-z 0-9 _ . -".to_string()
    } else if name.len() > MAX_NAME_LEN {
        format!(
            "\"{name}\" is {} characters long; use at most {MAX_NAME_LEN}",
            name.len()
        )
    } else {
        format!("\"{name}\" is not a valid name; use 1 to 32 characters from A-Z a-z 0-9 _ . -")
    }
}

// ---------------------------------------------------------------------------
// The raw TOML shape: everything optional, enums and addresses as strings,
// integers wide, so that every message about a value is ours and names the
// field.
// ---------------------------------------------------------------------------

/// Any TOML integer, kept wide so that range errors say the range.
#[derive(Clone, Copy, Debug)]
struct Int(i128);

impl<'de> Deserialize<'de> for Int {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Int, D::Error> {
        d.deserialize_any(IntOrNameVisitor { name_ok: false })
            .map(|v| match v {
                IntOrName::Int(i) => i,
                // Unreachable: names are refused by the visitor.
                IntOrName::Name(_) => Int(-1),
            })
    }
}

/// An integer or a word (`ttl = 64` / `ttl = "inherit"`).
#[derive(Clone, Debug)]
enum IntOrName {
    Int(Int),
    Name(String),
}

impl<'de> Deserialize<'de> for IntOrName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<IntOrName, D::Error> {
        d.deserialize_any(IntOrNameVisitor { name_ok: true })
    }
}

struct IntOrNameVisitor {
    name_ok: bool,
}

impl<'de> Visitor<'de> for IntOrNameVisitor {
    type Value = IntOrName;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.name_ok {
            f.write_str("an integer or \"inherit\"")
        } else {
            f.write_str("an integer")
        }
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<IntOrName, E> {
        Ok(IntOrName::Int(Int(v.into())))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<IntOrName, E> {
        Ok(IntOrName::Int(Int(v.into())))
    }

    fn visit_i128<E: de::Error>(self, v: i128) -> Result<IntOrName, E> {
        Ok(IntOrName::Int(Int(v)))
    }

    fn visit_u128<E: de::Error>(self, v: u128) -> Result<IntOrName, E> {
        Ok(IntOrName::Int(Int(i128::try_from(v).unwrap_or(i128::MAX))))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<IntOrName, E> {
        if self.name_ok {
            Ok(IntOrName::Name(v.to_string()))
        } else {
            Err(E::invalid_type(de::Unexpected::Str(v), &self))
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    dataplane: Option<RawDataplane>,
    host: Option<RawHost>,
    #[serde(default)]
    tunnel: Vec<RawTunnel>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDataplane {
    error_indication_rate: Option<Int>,
    restart_counter: Option<Int>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTunnel {
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
}

/// `v` if it is within `lo..=hi`.
fn in_range(v: Int, lo: u32, hi: u32) -> Result<u32, String> {
    match u32::try_from(v.0) {
        Ok(x) if (lo..=hi).contains(&x) => Ok(x),
        _ => Err(format!("{} is out of range ({lo}..={hi})", v.0)),
    }
}

/// A word from a fixed list, or a message listing the list.
fn one_of<T: Copy>(s: &str, words: &[(&str, T)]) -> Result<T, String> {
    words
        .iter()
        .find(|(w, _)| w.eq_ignore_ascii_case(s))
        .map(|(_, v)| *v)
        .ok_or_else(|| {
            let names: Vec<String> = words.iter().map(|(w, _)| format!("\"{w}\"")).collect();
            format!("\"{s}\" is not one of {}", names.join(", "))
        })
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
    /// Types every field and checks the kind-specific ones are on their
    /// kind; the rules on typed values are [`TunnelConfig::check`].
    fn validate(self, index: usize) -> Result<TunnelConfig, ConfigError> {
        let name = match self.name {
            None => {
                return Err(tunnel_error(
                    index,
                    None,
                    "name",
                    "missing: every tunnel needs a unique name (1 to 32 characters from A-Z a-z 0-9 _ . -)".to_string(),
                ))
            }
            Some(n) if !valid_name(&n) => {
                return Err(tunnel_error(index, None, "name", bad_name_message(&n)))
            }
            Some(n) => n,
        };
        let at = |field: &str, message: String| tunnel_error(index, Some(&name), field, message);
        let missing = |field: &str, what: &str| at(field, format!("missing: {what}"));

        let kind_names: Vec<&str> = TunnelKind::ALL.iter().map(|k| k.name()).collect();
        let kind: TunnelKind = match &self.kind {
            None => {
                return Err(missing(
                    "kind",
                    &format!(
                        "every tunnel needs a kind (one of: {})",
                        kind_names.join(", ")
                    ),
                ))
            }
            Some(k) => k.parse().map_err(|e: String| at("kind", e))?,
        };
        let addr = |field: &str, v: &Option<String>| -> Result<IpAddr, ConfigError> {
            match v {
                None => Err(missing(
                    field,
                    "every tunnel needs a local and a remote IP address",
                )),
                Some(s) => s.trim().parse().map_err(|_| {
                    at(
                        field,
                        format!("\"{s}\" is not an IP address (like 192.0.2.1 or 2001:db8::1)"),
                    )
                }),
            }
        };
        let local = addr("local", &self.local)?;
        let remote = addr("remote", &self.remote)?;

        let mut t = TunnelConfig::new(&name, kind, local, remote);
        let port = |field: &str, v: Option<Int>, default: u16| -> Result<u16, ConfigError> {
            match v {
                None => Ok(default),
                Some(v) => Ok(in_range(v, 1, 65535).map_err(|m| at(field, m))? as u16),
            }
        };
        t.local_port = port("local_port", self.local_port, t.local_port)?;
        t.remote_port = port("remote_port", self.remote_port, t.remote_port)?;
        if let Some(sp) = self.source_ports {
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

        match (uses_vni(kind), self.vni) {
            (true, Some(v)) => t.vni = in_range(v, 0, MAX_VNI).map_err(|m| at("vni", m))?,
            (true, None) => {
                return Err(missing(
                    "vni",
                    &format!("a {kind} tunnel needs a vni (0..={MAX_VNI})"),
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
                    not_used(kind, "only gre and fou-gre have a GRE key"),
                ));
            }
            t.key = Some(in_range(k, 0, u32::MAX).map_err(|m| at("key", m))?);
        }
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
        Ok(t)
    }
}

// ---------------------------------------------------------------------------
// TOML errors: find the field the error's span is in.
// ---------------------------------------------------------------------------

/// The same document with every value kept, and the spans of keys and
/// values, to name the field a deserialization error points at.
type LooseTable = BTreeMap<Spanned<String>, Spanned<toml::Value>>;

#[derive(Deserialize)]
struct LooseFile {
    dataplane: Option<LooseTable>,
    host: Option<LooseTable>,
    tunnel: Option<Vec<LooseTable>>,
}

fn toml_error(text: &str, e: &toml::de::Error) -> ConfigError {
    let message = tidy_toml_message(e.message());
    let Some(span) = e.span() else {
        return ConfigError {
            field: "config".to_string(),
            message,
        };
    };
    let start = span.start.min(text.len());
    let line = text.as_bytes()[..start]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1;
    match locate(text, span) {
        Some(field) => ConfigError {
            field,
            message: format!("{message} (line {line})"),
        },
        None => ConfigError {
            field: format!("line {line}"),
            message,
        },
    }
}

/// The key whose key or value span holds `span` in `table`.
fn find_key(table: &LooseTable, span: &core::ops::Range<usize>) -> Option<String> {
    let inside = |r: core::ops::Range<usize>| r.start <= span.start && span.end <= r.end;
    table.iter().find_map(|(k, v)| {
        // A table value's span is its header, not its body: only
        // scalar and array values (and every key) can hold an error.
        let value_holds = !v.get_ref().is_table() && inside(v.span());
        (inside(k.span()) || value_holds).then(|| k.get_ref().clone())
    })
}

fn locate(text: &str, span: core::ops::Range<usize>) -> Option<String> {
    if let Ok(loose) = toml::from_str::<LooseFile>(text) {
        if let Some(key) = loose.dataplane.as_ref().and_then(|t| find_key(t, &span)) {
            return Some(format!("dataplane.{key}"));
        }
        if let Some(key) = loose.host.as_ref().and_then(|t| find_key(t, &span)) {
            return Some(format!("host.{key}"));
        }
        for (i, t) in loose.tunnel.iter().flatten().enumerate() {
            if let Some(key) = find_key(t, &span) {
                let name = t
                    .iter()
                    .find(|(k, _)| k.get_ref() == "name")
                    .and_then(|(_, v)| v.get_ref().as_str());
                return Some(format!("{}.{key}", tunnel_label(i, name.unwrap_or(""))));
            }
        }
    }
    let top: LooseTable = toml::from_str(text).ok()?;
    find_key(&top, &span)
}

/// toml/serde wording into config wording.
fn tidy_toml_message(m: &str) -> String {
    m.replace("expected a sequence", "expected an array")
        .replace("expected struct RawTunnel", "expected a [[tunnel]] table")
        .replace(
            "expected struct RawDataplane",
            "expected a [dataplane] table",
        )
        .replace("expected struct RawHost", "expected a [host] table")
        .replace("expected struct RawFile", "expected a table")
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::{Ipv4Addr, Ipv6Addr};

    const EXAMPLE: &str = include_str!("../../../../examples/tep.toml");

    fn err(text: &str) -> ConfigError {
        match Config::parse(text) {
            Ok(c) => panic!("expected an error, parsed {c:#?}"),
            Err(e) => e,
        }
    }

    fn ok(text: &str) -> Config {
        Config::parse(text).unwrap_or_else(|e| panic!("{e}\n--- in ---\n{text}"))
    }

    /// One `[[tunnel]]` named `name` of `kind` over IPv4 with `extra` lines.
    fn tunnel(name: &str, kind: &str, extra: &str) -> String {
        let id = match kind {
            "vxlan" | "geneve" => "vni = 1\n",
            "gtpu" => "teid = 1\n",
            _ => "",
        };
        format!(
            "[[tunnel]]\nname = \"{name}\"\nkind = \"{kind}\"\nlocal = \"192.0.2.1\"\nremote = \"192.0.2.2\"\n{id}{extra}\n"
        )
    }

    fn v4(a: [u8; 4]) -> IpAddr {
        IpAddr::V4(Ipv4Addr::from(a))
    }

    fn v6(s: &str) -> IpAddr {
        IpAddr::V6(s.parse::<Ipv6Addr>().unwrap())
    }

    fn mac(b: [u8; 6]) -> EthernetAddress {
        EthernetAddress(b)
    }

    fn prefix(s: &str) -> IpPrefix {
        s.parse().unwrap()
    }

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

    #[test]
    fn syntax_errors_name_the_line() {
        let e = err("[dataplane]\nrestart_counter = 1\n[[tunnel]\nname = \"a\"\n");
        assert_eq!(e.field, "line 3");
        assert!(e.message.contains("expected `]`"), "{e}");
        let e = err("[[tunnel]]\nname = \"a\"\nname = \"b\"\n");
        assert_eq!(e.to_string(), "line 3: duplicate key");
    }

    #[test]
    fn unknown_top_level_key() {
        let e = err("tunnels = []\n");
        assert_eq!(e.field, "tunnels");
        assert_eq!(
            e.message,
            "unknown field `tunnels`, expected one of `dataplane`, `host`, `tunnel` (line 1)"
        );
        let e = err("tunnel = 5\n");
        assert_eq!(
            e.to_string(),
            "tunnel: invalid type: integer `5`, expected an array (line 1)"
        );
    }

    #[test]
    fn unknown_tunnel_field_names_the_key() {
        let text = tunnel("a", "vxlan", "") + &tunnel("b", "vxlan", "vni_typo = 3");
        let e = err(&text);
        assert_eq!(e.field, "tunnel[1] \"b\".vni_typo");
        assert!(
            e.message
                .starts_with("unknown field `vni_typo`, expected one of `name`, `kind`"),
            "{e}"
        );
        assert!(e.message.ends_with("(line 14)"), "{e}");
        // Inline tables too.
        let e = err("tunnel = [{ name = \"x\", colour = \"red\" }]\n");
        assert_eq!(e.field, "tunnel[0] \"x\".colour");
    }

    #[test]
    fn type_errors_name_the_field() {
        let text = tunnel("a", "gtpu", "") + &tunnel("b", "vxlan", "local_port = \"4789\"");
        let e = err(&text);
        assert_eq!(
            e.to_string(),
            "tunnel[1] \"b\".local_port: invalid type: string \"4789\", expected an integer (line 14)"
        );
        let e = err(&tunnel("a", "gtpu", "source_ports = [1, \"x\"]"));
        assert_eq!(e.field, "tunnel[0] \"a\".source_ports");
        let e = err(&tunnel("a", "gtpu", "zero_checksum_tx = 1"));
        assert_eq!(e.field, "tunnel[0] \"a\".zero_checksum_tx");
        assert!(e.message.contains("expected a boolean"), "{e}");
        let e = err(&tunnel("a", "gtpu", "ttl = true"));
        assert_eq!(
            e.to_string(),
            "tunnel[0] \"a\".ttl: invalid type: boolean `true`, expected an integer or \"inherit\" (line 7)"
        );
        // A bad name cannot label the tunnel.
        let e = err("[[tunnel]]\nname = \"a b\"\nkind = 3\n");
        assert_eq!(e.field, "tunnel[0].kind");
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
            "tunnel[0] \"a\".kind: missing: every tunnel needs a kind (one of: vxlan, geneve, gtpu, gre, gue, fou-ipip, fou-sit, fou-gre)"
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
            "tunnel[0] \"a\".kind: unknown tunnel kind 'mpls' (one of: vxlan, geneve, gtpu, gre, gue, fou-ipip, fou-sit, fou-gre)"
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
    fn zero_checksum_over_ipv6_needs_opt_in() {
        let six = |extra: &str| {
            tunnel("z", "fou-sit", extra)
                .replace("192.0.2.1", "2001:db8::1")
                .replace("192.0.2.2", "2001:db8::2")
        };
        let e = err(&six("checksum = \"zero\""));
        assert_eq!(e.field, "tunnel[0] \"z\".checksum");
        assert_eq!(
            e.message,
            "\"zero\" over IPv6 needs zero_checksum_tx = true: RFC 6935 and RFC 6936 allow a zero UDP checksum over IPv6 only for tunnels that opt in explicitly (and the peer must accept it, e.g. Linux udp6zerocsumrx); set zero_checksum_tx = true, or use \"full\", \"lco\" or \"offload\""
        );
        let t = &ok(&six("checksum = \"zero\"\nzero_checksum_tx = true")).tunnels[0];
        assert!(t.zero_checksum_tx && t.checksum == ChecksumMode::Zero);
        // IPv4: always legal (RFC 768).
        ok(&tunnel("z", "fou-sit", "checksum = \"zero\""));
    }

    #[test]
    fn remote_checksum_only_vxlan_and_gue() {
        ok(&tunnel(
            "a",
            "vxlan",
            "checksum = \"remote\"\nremote_checksum_rx = true",
        ));
        ok(&tunnel(
            "a",
            "gue",
            "checksum = \"remote\"\nremote_checksum_rx = true",
        ));
        for kind in ["geneve", "gtpu", "gre", "fou-ipip", "fou-sit", "fou-gre"] {
            let e = err(&tunnel("a", kind, "checksum = \"remote\""));
            assert_eq!(e.field, "tunnel[0] \"a\".checksum", "{kind}");
            let e = err(&tunnel("a", kind, "remote_checksum_rx = true"));
            assert_eq!(e.field, "tunnel[0] \"a\".remote_checksum_rx", "{kind}");
            ok(&tunnel("a", kind, "remote_checksum_rx = false"));
        }
        let e = err(&tunnel("a", "gtpu", "checksum = \"remote\""));
        assert_eq!(
            e.to_string(),
            "tunnel[0] \"a\".checksum: \"remote\" (remote checksum offload) exists only for vxlan and gue, not gtpu; use \"full\", \"lco\" or \"offload\""
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
    fn fou_prefix_families() {
        let e = err(&tunnel(
            "i",
            "fou-ipip",
            "inner_prefixes = [\"10.0.0.0/8\", \"2001:db8::/32\"]",
        ));
        assert_eq!(
            e.to_string(),
            "tunnel[0] \"i\".inner_prefixes[1]: 2001:db8::/32 is IPv6 but fou-ipip carries only IPv4 (fou-ipip: IPv4, fou-sit: IPv6; gue carries both)"
        );
        let e = err(&tunnel("s", "fou-sit", "inner_prefixes = [\"10.0.0.0/8\"]"));
        assert_eq!(e.field, "tunnel[0] \"s\".inner_prefixes[0]");
        ok(&tunnel(
            "s",
            "fou-sit",
            "inner_prefixes = [\"2001:db8::/32\"]",
        ));
        ok(&tunnel(
            "f",
            "fou-gre",
            "inner_prefixes = [\"10.0.0.0/8\", \"2001:db8::/32\"]",
        ));
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

    // --- Between tunnels -----------------------------------------------

    #[test]
    fn duplicate_names() {
        let e = err(&[
            tunnel("a", "gue", ""),
            tunnel("b", "gue", "local_port = 1"),
            tunnel("a", "gue", "local_port = 2"),
        ]
        .concat());
        assert_eq!(
            e.to_string(),
            "tunnel[2].name: \"a\" is already the name of tunnel[0] \"a\"; names must be unique"
        );
    }

    #[test]
    fn tunnels_the_receive_path_cannot_tell_apart() {
        // VXLAN: same VNI.
        let e = err(&[
            tunnel("a", "vxlan", "inner_macs = [\"02:00:00:00:00:01\"]"),
            tunnel("b", "vxlan", ""),
        ]
        .concat());
        assert_eq!(
            e.to_string(),
            "tunnel[1] \"b\".vni: received packets could not be told apart from tunnel[0] \"a\"'s: same local 192.0.2.1 port 4789, remote 192.0.2.2 and vni 1; give one a different identifier, local_port, local or remote"
        );
        // A different VNI, remote, local or port tells them apart.
        let a = tunnel("a", "vxlan", "inner_macs = [\"02:00:00:00:00:01\"]");
        ok(&(a.clone() + &tunnel("b", "vxlan", "").replace("vni = 1", "vni = 2")));
        ok(&(a.clone() + &tunnel("b", "vxlan", "").replace("192.0.2.2", "192.0.2.9")));
        ok(&(a.clone() + &tunnel("b", "vxlan", "").replace("192.0.2.1", "192.0.2.9")));
        ok(&(a.clone() + &tunnel("b", "vxlan", "local_port = 4790")));
        // The remote port does not.
        let e = err(&(a + &tunnel("b", "vxlan", "remote_port = 4790")));
        assert_eq!(e.field, "tunnel[1] \"b\".vni");

        // GTP-U: the local TEID decides, not the TEID sent.
        let e = err(&[
            tunnel("g1", "gtpu", "teid = 5\nlocal_teid = 9").replace("teid = 1\n", ""),
            tunnel("g2", "gtpu", "teid = 6\nlocal_teid = 9").replace("teid = 1\n", ""),
        ]
        .concat());
        assert_eq!(e.field, "tunnel[1] \"g2\".local_teid");
        assert!(e.message.contains("local_teid 0x9"), "{e}");
        ok(&[
            tunnel("g1", "gtpu", "teid = 5").replace("teid = 1\n", ""),
            tunnel("g2", "gtpu", "teid = 5\nlocal_teid = 6").replace("teid = 1\n", ""),
        ]
        .concat());

        // GRE kinds: the key, or both without one.
        let e = err(&[
            tunnel("k1", "gre", "key = 3"),
            tunnel("k2", "gre", "key = 3"),
        ]
        .concat());
        assert_eq!(e.field, "tunnel[1] \"k2\".key");
        let e = err(&[tunnel("k1", "fou-gre", ""), tunnel("k2", "fou-gre", "")].concat());
        assert_eq!(e.field, "tunnel[1] \"k2\".key");
        assert!(e.message.contains("and no key;"), "{e}");
        ok(&[tunnel("k1", "gre", "key = 3"), tunnel("k2", "gre", "")].concat());

        // GUE and FOU have no identifier at all.
        for kind in ["gue", "fou-ipip", "fou-sit"] {
            let e = err(&[tunnel("x", kind, ""), tunnel("y", kind, "")].concat());
            assert_eq!(e.field, "tunnel[1] \"y\".remote", "{kind}");
            assert!(
                e.message
                    .ends_with("give one a different local_port, local or remote"),
                "{e}"
            );
        }
    }

    #[test]
    fn one_kind_per_port() {
        let e = err(&[
            tunnel("v", "vxlan", ""),
            tunnel("g", "gue", "local_port = 4789"),
        ]
        .concat());
        assert_eq!(
            e.to_string(),
            "tunnel[1] \"g\".local_port: port 4789 already receives vxlan for tunnel[0] \"v\"; a UDP port carries one tunnel kind, so this gue tunnel needs another local_port"
        );
        // FOU kinds share the default port 5555 but not a kind.
        let e = err(&[
            tunnel("i", "fou-ipip", ""),
            tunnel("s", "fou-sit", "").replace("192.0.2.2", "192.0.2.3"),
        ]
        .concat());
        assert_eq!(e.field, "tunnel[1] \"s\".local_port");
        // Different remote ports are fine.
        ok(&[
            tunnel("v", "vxlan", ""),
            tunnel("g", "gue", "remote_port = 4789"),
        ]
        .concat());
    }

    #[test]
    fn one_tunnel_per_prefix() {
        let e = err(&[
            tunnel("a", "gue", "inner_prefixes = [\"10.1.0.0/16\"]"),
            tunnel(
                "b",
                "gtpu",
                "inner_prefixes = [\"10.2.0.0/16\", \"10.1.0.0/16\"]",
            ),
        ]
        .concat());
        assert_eq!(
            e.to_string(),
            "tunnel[1] \"b\".inner_prefixes[1]: 10.1.0.0/16 is already routed into tunnel[0] \"a\"; a prefix may route to one tunnel only"
        );
        // Overlapping is longest-prefix match, not ambiguous.
        ok(&[
            tunnel("a", "gue", "inner_prefixes = [\"10.0.0.0/8\"]"),
            tunnel("b", "gtpu", "inner_prefixes = [\"10.1.0.0/16\"]"),
        ]
        .concat());
        let e = err(&tunnel(
            "a",
            "gue",
            "inner_prefixes = [\"10.1.0.0/16\", \"10.1.0.0/16\"]",
        ));
        assert_eq!(
            e.to_string(),
            "tunnel[0] \"a\".inner_prefixes[1]: 10.1.0.0/16 is listed twice"
        );
    }

    #[test]
    fn one_tunnel_per_mac() {
        let e = err(&[
            tunnel("a", "vxlan", "inner_macs = [\"02:00:00:00:00:01\"]"),
            tunnel("b", "geneve", "inner_macs = [\"02-00-00-00-00-01\"]"),
        ]
        .concat());
        assert_eq!(
            e.to_string(),
            "tunnel[1] \"b\".inner_macs[0]: 02:00:00:00:00:01 is already sent into tunnel[0] \"a\"; a MAC may go to one tunnel only"
        );
        let e = err(&tunnel(
            "a",
            "vxlan",
            "inner_macs = [\"02:00:00:00:00:01\", \"02:00:00:00:00:01\"]",
        ));
        assert_eq!(e.field, "tunnel[0] \"a\".inner_macs[1]");
    }

    #[test]
    fn one_default_l2_tunnel_per_kind() {
        let e = err(&[
            tunnel("a", "vxlan", ""),
            tunnel("b", "vxlan", "").replace("vni = 1", "vni = 2"),
        ]
        .concat());
        assert_eq!(
            e.to_string(),
            "tunnel[1] \"b\".inner_macs: tunnel[0] \"a\" is already the default vxlan tunnel (empty inner_macs); only one per kind may be, so list this tunnel's MACs"
        );
        // One default per kind.
        ok(&[tunnel("a", "vxlan", ""), tunnel("b", "geneve", "")].concat());
        ok(&[
            tunnel("a", "vxlan", ""),
            tunnel("b", "vxlan", "inner_macs = [\"02:00:00:00:00:01\"]")
                .replace("vni = 1", "vni = 2"),
        ]
        .concat());
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

    // --- Typed configs built in code -----------------------------------

    #[test]
    fn validate_typed_configs() {
        let l = v4([192, 0, 2, 1]);
        let r = v4([192, 0, 2, 2]);
        let mut t = TunnelConfig::new("t", TunnelKind::Gue, l, r);
        let good = Config {
            tunnels: vec![t.clone()],
            ..Config::default()
        };
        assert_eq!(good.validate(), Ok(()));
        t.inner_prefixes = vec![IpPrefix {
            addr: v4([10, 1, 2, 3]),
            len: 16,
        }];
        let c = Config {
            tunnels: vec![t.clone()],
            ..Config::default()
        };
        assert_eq!(
            c.validate().unwrap_err().to_string(),
            "tunnel[0] \"t\".inner_prefixes[0]: 10.1.2.3/16 has host bits set; did you mean 10.1.0.0/16?"
        );
        let mut bad = TunnelConfig::new("v", TunnelKind::Vxlan, l, r);
        bad.vni = 1 << 24;
        let c = Config {
            tunnels: vec![bad],
            ..Config::default()
        };
        assert_eq!(c.validate().unwrap_err().field, "tunnel[0] \"v\".vni");
        let mut bad = TunnelConfig::new("g", TunnelKind::Gtpu, l, r);
        bad.key = Some(1);
        let c = Config {
            tunnels: vec![bad],
            ..Config::default()
        };
        assert_eq!(c.validate().unwrap_err().field, "tunnel[0] \"g\".key");
        let mut bad = TunnelConfig::new("z", TunnelKind::Gue, v6("2001:db8::1"), v6("2001:db8::2"));
        bad.checksum = ChecksumMode::Zero;
        let c = Config {
            tunnels: vec![bad],
            ..Config::default()
        };
        assert_eq!(c.validate().unwrap_err().field, "tunnel[0] \"z\".checksum");
        let t = TunnelConfig::new("t", TunnelKind::Gue, l, r);
        let mut t2 = t.clone();
        t2.local_port = 1;
        let two = Config {
            tunnels: vec![t, t2],
            ..Config::default()
        };
        assert_eq!(two.validate().unwrap_err().field, "tunnel[1].name");
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
}
