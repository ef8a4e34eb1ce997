//! The tunnel model: the checked values the dataplane is built from, and
//! the error that names a bad one's field (`tunnel[1] "gtp-a".vni: ...`).
//! Parsing them from TOML is tep-config's; the rules on them are
//! [`check`](super::check)'s.

use crate::kind::TunnelKind;
use core::fmt;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use core::str::FromStr;
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
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.len))
                    .unwrap_or(0);
                u128::from(p) & mask == u128::from(a) & mask
            }
            _ => false,
        }
    }

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
    /// An N3 tunnel of `[pfcp]`: its peers and TEIDs come from the
    /// sessions an SMF sets up (`remote` is unspecified), not from the
    /// config.
    pub sessions: bool,
    /// A multipoint network (`[[network]]`): its remote VTEPs come from
    /// its flood list, FDB and routes (`remote` is unspecified), not from
    /// `remote`.
    pub network: Option<Box<NetworkSettings>>,
}

/// The most networks a config holds (a network's index is 16 bits).
pub const MAX_NETWORKS: usize = 65_535;

/// What makes a tunnel a multipoint network (`[[network]]`): one bridge
/// domain (VXLAN, Geneve) or routing domain (the L3 kinds) with any number
/// of remote VTEPs, as Linux's `ip link add … type vxlan` and `bridge fdb`
/// configure one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetworkSettings {
    /// Remote VTEPs that get a copy of broadcast, unknown unicast and
    /// multicast frames (head-end replication; Linux's
    /// `bridge fdb append 00:00:00:00:00:00 dst …`). L3 networks: the
    /// VTEPs frames may come from without a route naming them.
    pub flood: Vec<IpAddr>,
    /// Static FDB entries (L2): a MAC behind a remote VTEP. Never aged,
    /// never displaced by a learned entry.
    pub fdb: Vec<(EthernetAddress, IpAddr)>,
    /// Routes (L3 kinds): an inner prefix behind a remote VTEP.
    pub routes: Vec<(IpPrefix, IpAddr)>,
    /// Static neighbours (ARP/ND suppression): an IP address's MAC.
    pub neighbours: Vec<(IpAddr, EthernetAddress)>,
    /// Learn source MACs of decapsulated frames (their VTEP) and of
    /// local frames (Linux's `learning`). Off: a frame from a VTEP the
    /// network does not name is dropped as `wrong_peer`.
    pub learning: bool,
    /// Learned entries are removed after this many seconds unseen
    /// (Linux's `ageing`, default 300).
    pub ageing_s: u32,
    /// At most this many learned MACs (remote and local); more are not
    /// learned and counted (a MAC-flooding attack stays bounded).
    pub max_macs: u32,
    /// Answer ARP requests and Neighbor Solicitations for known addresses
    /// locally (Linux's `neigh_suppress`).
    pub neigh_suppress: bool,
    /// Host mode: the TAP (L2) or TUN (L3) the network's inner side is;
    /// default `tep-<name>` (cut to 15 bytes).
    pub device: Option<String>,
    /// Gateway mode: the 802.1Q VLAN its frames carry on the inner
    /// interface (None: untagged, the default network).
    pub vlan: Option<u16>,
    /// Who keeps the remote state beside the config and learning.
    pub control: Control,
}

/// Who keeps a network's remote VTEPs and MACs (`control`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Control {
    /// The config, `tep peer|fdb|neigh|route` and learning (the default).
    #[default]
    Static,
    /// BGP EVPN through FRR (VXLAN): zebra's view of the network is a
    /// kernel VXLAN device, named `device` (default `tepvx<VNI>`), whose
    /// FDB tep follows and beside which tep writes its local MACs.
    Evpn {
        /// The kernel VXLAN device (`evpn_device`).
        device: Option<String>,
    },
}

impl Default for NetworkSettings {
    fn default() -> Self {
        NetworkSettings {
            flood: Vec::new(),
            fdb: Vec::new(),
            routes: Vec::new(),
            neighbours: Vec::new(),
            learning: true,
            ageing_s: 300,
            max_macs: 16_384,
            neigh_suppress: false,
            device: None,
            vlan: None,
            control: Control::Static,
        }
    }
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
            sessions: false,
            network: None,
        }
    }

    /// Multipoint network `name` of `kind` on `local`: every remote from
    /// `settings`, every other field at its default.
    pub fn network(
        name: &str,
        kind: TunnelKind,
        local: IpAddr,
        settings: NetworkSettings,
    ) -> TunnelConfig {
        let any = match local {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        };
        let mut t = TunnelConfig::new(name, kind, local, any);
        t.network = Some(Box::new(settings));
        t
    }

    /// Whether this is a multipoint network.
    pub fn is_network(&self) -> bool {
        self.network.is_some()
    }

    /// N3 tunnel `index` of a UPF on `local`: GTP-U, its peers and TEIDs
    /// from sessions (`remote` unspecified), every other field at its
    /// default.
    pub fn n3(index: usize, local: IpAddr) -> TunnelConfig {
        let any = match local {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        };
        let mut t = TunnelConfig::new(&format!("n3.{index}"), TunnelKind::Gtpu, local, any);
        t.sessions = true;
        t
    }
}
