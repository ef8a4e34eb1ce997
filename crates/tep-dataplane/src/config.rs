//! The tunnel configuration: what `tep.toml` says, validated.
//!
//! These are the checked types the dataplane is built from. Parsing the
//! TOML and every validation rule live in [`parse`](Config::parse); a bad
//! config is an error that names the field (`tunnel[1] "gtp-a": vni: ...`).

use crate::kind::TunnelKind;
use core::fmt;
use core::net::IpAddr;
use tep_wire::ethernet::EthernetAddress;

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
                let mask = u128::MAX.checked_shl(128 - u32::from(self.len)).unwrap_or(0);
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
            inner_prefixes: Vec::new(),
            inner_macs: Vec::new(),
            ttl: Ttl::Fixed(64),
            dscp: Dscp::Inherit,
            df: DontFragment::Unset,
        }
    }
}
