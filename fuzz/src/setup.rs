//! What the pipeline targets share: the tunnels they run, the pool, and a
//! tep-wire dissection of what a pipeline puts out.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use tep_dataplane::config::{check_tunnels, ChecksumMode, IpPrefix, TunnelConfig};
use tep_dataplane::example::{A4, A6, B4, B6};
use tep_dataplane::ManualClock;
use tep_dataplane::Pipeline;
use tep_dataplane::TunnelKind;
use tep_dataplane::{PacketId, Pool, SUPER_PACKET_ROOM};
use tep_wire::ethernet::{self, EtherType};
use tep_wire::{geneve, gre, gtpu, gue, ipv4, ipv6, udp, vxlan, IpProtocol};

/// A pipeline as the targets run it.
pub type Pipe = Pipeline<ManualClock>;

/// Buffers in the targets' pool: a vector of 256 segments of a
/// super-packet, its decapsulation by the peer, and spare.
pub const POOL_BUFFERS: usize = 1024;

/// The pool every pipeline of a target shares (allocated once per process:
/// its arena is 64 MiB, zeroed lazily by the kernel).
pub fn pool() -> Pool {
    Pool::new(POOL_BUFFERS, SUPER_PACKET_ROOM)
}

/// A second peer address of each family, for the decap target's tunnels
/// with every receive opt-in off.
pub const C4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 3);
/// The IPv6 one.
pub const C6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 3);

/// The UDP port of each kind in the fuzz configs: the kind's own, except
/// where two kinds share one (GUE and GUE-GRE, the three FOUs), since a
/// port carries one kind in a tep config.
pub const fn port(kind: TunnelKind) -> u16 {
    match kind {
        TunnelKind::FouSit => 5556,
        TunnelKind::FouGre => 5557,
        TunnelKind::GueGre => 6082,
        k => k.default_port(),
    }
}

/// VNI, TEID and key of the fuzz tunnels (as `example::tunnel_pair`).
const VNI: u32 = 4242;
const TEID: u32 = 0x1000;
const KEY: u32 = 77;

/// One end of a tunnel of `kind` from `local` to `remote`, receive
/// opt-ins (zero checksums, remote checksum offload) as `opt_in`.
pub fn tunnel(
    name: &str,
    kind: TunnelKind,
    local: IpAddr,
    remote: IpAddr,
    opt_in: bool,
) -> TunnelConfig {
    let mut t = TunnelConfig::new(name, kind, local, remote);
    t.local_port = port(kind);
    t.remote_port = port(kind);
    t.zero_checksum_tx = true;
    t.zero_checksum_rx = opt_in;
    t.remote_checksum_rx = opt_in && matches!(kind, TunnelKind::Vxlan | TunnelKind::Gue);
    match kind {
        TunnelKind::Vxlan | TunnelKind::Geneve => t.vni = VNI,
        TunnelKind::Gtpu => {
            t.teid = TEID;
            t.local_teid = TEID;
            t.qfi = Some(9);
        }
        TunnelKind::GreInUdp | TunnelKind::FouGre | TunnelKind::GueGre => t.key = Some(KEY),
        _ => {}
    }
    t
}

/// The decap target's tunnels, as side B (the receiver) has them: one of
/// every kind over IPv4 and over IPv6, each twice: from A with every
/// receive opt-in on, and from C with them off. Each routes prefixes (or
/// MACs) of its own, so the config validates.
pub fn decap_config() -> Vec<TunnelConfig> {
    let mut tunnels = vec![];
    for kind in TunnelKind::ALL {
        for v6 in [false, true] {
            for opt_in in [true, false] {
                let i = tunnels.len() as u8;
                let (local, remote) = match (v6, opt_in) {
                    (false, true) => (IpAddr::V4(B4), IpAddr::V4(A4)),
                    (false, false) => (IpAddr::V4(B4), IpAddr::V4(C4)),
                    (true, true) => (IpAddr::V6(B6), IpAddr::V6(A6)),
                    (true, false) => (IpAddr::V6(B6), IpAddr::V6(C6)),
                };
                let name = format!("{kind}-{}-{}", if v6 { 6 } else { 4 }, i);
                let mut t = tunnel(&name, kind, local, remote, opt_in);
                route_own(&mut t, i);
                tunnels.push(t);
            }
        }
    }
    check_tunnels(&tunnels).expect("the decap target's config");
    tunnels
}

/// Gives tunnel number `i` inner prefixes (or MACs) no other has.
fn route_own(t: &mut TunnelConfig, i: u8) {
    if t.kind.carries_ethernet() {
        t.inner_macs = vec![ethernet::EthernetAddress([2, 0, 0, 0, i, 0xbb])];
        return;
    }
    let v4 = IpPrefix {
        addr: IpAddr::V4(Ipv4Addr::new(10, i, 0, 0)),
        len: 16,
    };
    let v6 = IpPrefix {
        addr: IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 8, u16::from(i), 0, 0, 0, 0)),
        len: 64,
    };
    t.inner_prefixes = match t.kind {
        TunnelKind::FouIpip => vec![v4],
        TunnelKind::FouSit => vec![v6],
        _ => vec![v4, v6],
    };
}

/// How one encap pair is set up: the encap target's first two bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EncapSetup {
    /// The one tunnel's kind.
    pub kind: TunnelKind,
    /// Its checksum mode (`remote` only where the kind has RCO).
    pub mode: ChecksumMode,
    /// Outer IPv6.
    pub v6: bool,
    /// The kind's variation: GUE variant 1 (no header; or, with `remote`,
    /// the IETF RCO encoding), GTP-U without a PDU Session Container,
    /// GRE kinds without a key, VXLAN/Geneve VNI 0.
    pub variant: bool,
    /// Outer TTL, DSCP and DF inherited from the inner packet.
    pub inherit: bool,
}

impl EncapSetup {
    /// From the control bytes: `k` = kind (low nibble, mod 9), mode (bits
    /// 4-6, mod 5), IPv6 (bit 7); `o` bit 2 the variation, bit 3 inherit.
    pub fn from_bytes(k: u8, o: u8) -> EncapSetup {
        let kind = TunnelKind::ALL[usize::from(k & 0xf) % TunnelKind::COUNT];
        let mut mode = ChecksumMode::ALL[usize::from((k >> 4) & 7) % ChecksumMode::ALL.len()];
        if mode == ChecksumMode::Remote && !matches!(kind, TunnelKind::Vxlan | TunnelKind::Gue) {
            mode = ChecksumMode::Full;
        }
        EncapSetup {
            kind,
            mode,
            v6: k & 0x80 != 0,
            variant: o & 4 != 0,
            inherit: o & 8 != 0,
        }
    }

    /// The control bytes that give this setup (with `o`'s other bits).
    pub fn to_bytes(self, o: u8) -> (u8, u8) {
        let mode = ChecksumMode::ALL
            .iter()
            .position(|&m| m == self.mode)
            .unwrap() as u8;
        let k = self.kind.index() as u8 | mode << 4 | u8::from(self.v6) << 7;
        let o = (o & !0xc) | u8::from(self.variant) << 2 | u8::from(self.inherit) << 3;
        (k, o)
    }

    /// The configs of the two ends (sender A, receiver B): one tunnel
    /// routing every inner address (or, L2, every MAC) of the kind.
    pub fn configs(self) -> (Vec<TunnelConfig>, Vec<TunnelConfig>) {
        let (a, b) = if self.v6 {
            (IpAddr::V6(A6), IpAddr::V6(B6))
        } else {
            (IpAddr::V4(A4), IpAddr::V4(B4))
        };
        let end = |local, remote, name: &str| {
            let mut t = tunnel(name, self.kind, local, remote, true);
            t.checksum = self.mode;
            if self.variant {
                match self.kind {
                    TunnelKind::Gue if self.mode == ChecksumMode::Remote => {
                        t.gue_rco = tep_dataplane::config::GueRcoEncoding::Ietf
                    }
                    TunnelKind::Gue => t.gue_variant = 1,
                    TunnelKind::Gtpu => t.qfi = None,
                    TunnelKind::GreInUdp | TunnelKind::FouGre | TunnelKind::GueGre => t.key = None,
                    TunnelKind::Vxlan | TunnelKind::Geneve => t.vni = 0,
                    _ => {}
                }
            }
            if self.inherit {
                t.ttl = tep_dataplane::config::Ttl::Inherit;
                t.dscp = tep_dataplane::config::Dscp::Inherit;
                t.df = tep_dataplane::config::DontFragment::Inherit;
            } else {
                t.ttl = tep_dataplane::config::Ttl::Fixed(61);
                t.dscp = tep_dataplane::config::Dscp::Fixed(10);
                t.df = tep_dataplane::config::DontFragment::Set;
            }
            let all4 = IpPrefix {
                addr: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
                len: 0,
            };
            let all6 = IpPrefix {
                addr: IpAddr::V6(Ipv6Addr::UNSPECIFIED),
                len: 0,
            };
            // L2: no MACs listed, so every MAC goes into the tunnel.
            if !self.kind.carries_ethernet() {
                t.inner_prefixes = match self.kind {
                    TunnelKind::FouIpip => vec![all4],
                    TunnelKind::FouSit => vec![all6],
                    _ => vec![all4, all6],
                };
            }
            let c = vec![t];
            check_tunnels(&c).unwrap_or_else(|e| panic!("encap target config {self:?}: {e}"));
            c
        };
        (end(a, b, "a-to-b"), end(b, a, "b-to-a"))
    }
}

/// The bytes of a packet, its [`Tail`](tep_dataplane::Tail)
/// (a gathered segment's payload, a merged train's) included.
pub fn bytes_of(pool: &Pool, id: PacketId) -> Vec<u8> {
    let mut v = pool.data(id).to_vec();
    for part in pool.tail_parts(id) {
        v.extend_from_slice(part);
    }
    v
}

/// What a tunnel datagram holds, dissected by tep-wire.
#[derive(Debug)]
pub struct Dissected<'a> {
    /// The UDP destination port (where the outer headers are in the
    /// buffer; else the caller's).
    pub dst_port: u16,
    /// The tunnel header's own length field or flags say it carries an
    /// Ethernet frame (VXLAN, Geneve) rather than an IP packet.
    pub ethernet: bool,
    /// The inner packet or frame.
    pub inner: &'a [u8],
}

/// Outer IPv4/IPv6 + UDP of `p` (IP at 0), checked: a header that parses
/// and, IPv4, verifies; UDP with the length the IP header gives it and a
/// checksum that verifies or is zero. Returns the UDP destination port and
/// payload.
pub fn outer_ip_udp(p: &[u8]) -> Result<(u16, &[u8]), String> {
    match outer_ip_udp_sum(p)? {
        (port, payload, true) => Ok((port, payload)),
        _ => Err("outer UDP checksum".into()),
    }
}

/// [`outer_ip_udp`], the checksum's verdict returned rather than checked.
pub fn outer_ip_udp_sum(p: &[u8]) -> Result<(u16, &[u8], bool), String> {
    let (src, dst, l4) = match p.first().map(|b| b >> 4) {
        Some(4) => {
            let ip = ipv4::Packet::new_checked(p).map_err(|e| format!("outer IPv4: {e}"))?;
            let r = ipv4::Ipv4Repr::parse(&ip).map_err(|e| format!("outer IPv4: {e}"))?;
            if !ip.verify_checksum() {
                return Err("outer IPv4 header checksum".into());
            }
            if usize::from(ip.total_len()) != p.len() || r.protocol != IpProtocol::Udp {
                return Err(format!("outer IPv4 {r}: {} bytes", p.len()));
            }
            (
                IpAddr::V4(r.src_addr),
                IpAddr::V4(r.dst_addr),
                ip.header_len(),
            )
        }
        Some(6) => {
            let ip = ipv6::Packet::new_checked(p).map_err(|e| format!("outer IPv6: {e}"))?;
            let r = ipv6::Ipv6Repr::parse(&ip).map_err(|e| format!("outer IPv6: {e}"))?;
            if ipv6::HEADER_LEN + r.payload_len != p.len() || r.next_header != IpProtocol::Udp {
                return Err(format!("outer IPv6 {r}: {} bytes", p.len()));
            }
            (
                IpAddr::V6(r.src_addr),
                IpAddr::V6(r.dst_addr),
                ipv6::HEADER_LEN,
            )
        }
        _ => return Err("outer: not IP".into()),
    };
    let l4 = &p[l4..];
    let u = udp::Packet::new_checked(l4).map_err(|e| format!("outer UDP: {e}"))?;
    if usize::from(u.len()) != l4.len() {
        return Err(format!("outer UDP length {} of {}", u.len(), l4.len()));
    }
    let ok = match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => u.verify_checksum_v4(&s, &d),
        (IpAddr::V6(s), IpAddr::V6(d)) => u.verify_checksum_v6(&s, &d),
        _ => unreachable!(),
    };
    let ok = ok != udp::ChecksumStatus::Invalid;
    Ok((u.dst_port(), &l4[udp::HEADER_LEN..], ok))
}

/// The tunnel header of `kind` at the start of `payload` (a UDP payload),
/// dissected with tep-wire down to the inner packet.
pub fn tunnel_payload(kind: TunnelKind, payload: &[u8]) -> Result<Dissected<'_>, String> {
    let err = |what: &'static str| move |e: tep_wire::Error| format!("{kind}: {what}: {e}");
    let d = |ethernet, inner| Dissected {
        dst_port: 0,
        ethernet,
        inner,
    };
    match kind {
        TunnelKind::Vxlan => {
            let p = vxlan::Packet::new_checked(payload).map_err(err("VXLAN"))?;
            let ext = vxlan::Extensions::RCO;
            vxlan::VxlanRepr::parse(&p, ext).map_err(err("VXLAN"))?;
            Ok(d(true, p.payload()))
        }
        TunnelKind::Geneve => {
            let p = geneve::Packet::new_checked(payload).map_err(err("Geneve"))?;
            geneve::GeneveRepr::parse(&p).map_err(err("Geneve"))?;
            if p.protocol() != EtherType::TransparentEthernet {
                return Err(format!("Geneve protocol {}", p.protocol()));
            }
            Ok(d(true, p.payload()))
        }
        TunnelKind::Gtpu => {
            let p = gtpu::Packet::new_checked(payload).map_err(err("GTP-U"))?;
            let r = gtpu::GtpuRepr::parse(&p).map_err(err("GTP-U"))?;
            if r.message != gtpu::GtpuMessage::GPdu {
                return Err(format!("GTP-U {r}"));
            }
            // The T-PDU, within the message's length.
            let (start, n) = (p.header_len(), p.payload().len());
            Ok(d(false, &payload[start..start + n]))
        }
        TunnelKind::GreInUdp | TunnelKind::FouGre => gre_payload(kind, payload),
        TunnelKind::FouIpip | TunnelKind::FouSit => Ok(d(false, payload)),
        TunnelKind::Gue | TunnelKind::GueGre => {
            let p = gue::Packet::new_checked(payload).map_err(err("GUE"))?;
            let r = gue::GueRepr::parse(&p).map_err(err("GUE"))?;
            match (kind, r) {
                (
                    TunnelKind::GueGre,
                    gue::GueRepr::Data {
                        proto: IpProtocol::Gre,
                        ..
                    },
                ) => gre_payload(kind, p.payload()),
                (
                    TunnelKind::Gue,
                    gue::GueRepr::Data {
                        proto: IpProtocol::Ipv4 | IpProtocol::Ipv6,
                        ..
                    }
                    | gue::GueRepr::Direct { .. },
                ) => Ok(d(false, p.payload())),
                _ => Err(format!("{kind}: GUE {r}")),
            }
        }
    }
}

fn gre_payload(kind: TunnelKind, payload: &[u8]) -> Result<Dissected<'_>, String> {
    let p = gre::Packet::new_checked(payload).map_err(|e| format!("{kind}: GRE: {e}"))?;
    let r = gre::GreRepr::parse(&p).map_err(|e| format!("{kind}: GRE: {e}"))?;
    if p.checksum_present() && !p.verify_checksum() {
        return Err(format!("{kind}: GRE checksum"));
    }
    match p.protocol() {
        EtherType::Ipv4 | EtherType::Ipv6 => Ok(Dissected {
            dst_port: 0,
            ethernet: false,
            inner: p.payload(),
        }),
        _ => Err(format!("{kind}: GRE {r}")),
    }
}

/// An inner IP packet, checked by tep-wire: the header parses, its length
/// is the packet's. Returns the IP version.
pub fn inner_ip(p: &[u8]) -> Result<u8, String> {
    match p.first().map(|b| b >> 4) {
        Some(4) => {
            let ip = ipv4::Packet::new_checked(p).map_err(|e| format!("inner IPv4: {e}"))?;
            if usize::from(ip.total_len()) != p.len() {
                return Err(format!(
                    "inner IPv4 length {} of {}",
                    ip.total_len(),
                    p.len()
                ));
            }
            Ok(4)
        }
        Some(6) => {
            let ip = ipv6::Packet::new_checked(p).map_err(|e| format!("inner IPv6: {e}"))?;
            if ipv6::HEADER_LEN + usize::from(ip.payload_len()) != p.len() {
                return Err(format!(
                    "inner IPv6 length {} of {}",
                    ip.payload_len(),
                    p.len()
                ));
            }
            Ok(6)
        }
        _ => Err("inner packet is not IP".into()),
    }
}

/// An inner Ethernet frame, checked by tep-wire; where its EtherType says
/// IP, the IP packet in it parses (Ethernet padding after it allowed).
/// Returns where the IP header starts, if it carries one.
pub fn inner_frame(f: &[u8]) -> Result<Option<usize>, String> {
    let e = match ethernet::Packet::new_checked(f) {
        Ok(e) => e,
        // A frame cut inside a VLAN tag carries no IP: tep bridges it as
        // a bridge would, unparsed, like any other non-IP frame.
        Err(_)
            if f.len() >= ethernet::HEADER_LEN
                && tep_dataplane::ethernet_ip_offset(f).is_none() =>
        {
            return Ok(None)
        }
        Err(e) => return Err(format!("inner Ethernet: {e}")),
    };
    match e.ethertype() {
        EtherType::Ipv4 | EtherType::Ipv6 => {
            let ip = e.payload();
            let at = e.header_len();
            match ip.first().map(|b| b >> 4) {
                Some(4) => ipv4::Packet::new_checked(ip)
                    .map(|_| Some(at))
                    .map_err(|e| format!("inner frame's IPv4: {e}")),
                Some(6) => ipv6::Packet::new_checked(ip)
                    .map(|_| Some(at))
                    .map_err(|e| format!("inner frame's IPv6: {e}")),
                _ => Err("inner frame's IP: bad version".into()),
            }
        }
        _ => Ok(None),
    }
}
