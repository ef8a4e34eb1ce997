//! Packet builders and pipeline drivers shared by the integration tests.
#![allow(dead_code)]

pub mod upf;

use core::net::{IpAddr, Ipv6Addr};
use proptest::prelude::*;
use tep_csum::Sum;
use tep_dataplane::config::{ChecksumMode, DataplaneConfig, TunnelConfig};
use tep_dataplane::example;
use tep_dataplane::DropReason;
use tep_dataplane::InnerLink;
use tep_dataplane::PacketVector;
use tep_dataplane::TunnelKind;
use tep_dataplane::{ChecksumState, PacketId, Pool, SUPER_PACKET_ROOM};
use tep_dataplane::{Clock, ManualClock};
use tep_dataplane::{OuterLayers, Output, Pipeline, PipelineOptions};

pub const A4: IpAddr = IpAddr::V4(example::A4);
pub const B4: IpAddr = IpAddr::V4(example::B4);
pub const A6: IpAddr = IpAddr::V6(example::A6);
pub const B6: IpAddr = IpAddr::V6(example::B6);

/// An inner IPv4 TCP segment 10.0.0.1 → 10.9.0.1 with `payload` and a
/// correct checksum.
pub fn tcp4(payload: &[u8], sport: u16) -> Vec<u8> {
    let tcp_len = 20 + payload.len();
    let total = 20 + tcp_len;
    let mut p = vec![0u8; total];
    p[0] = 0x45;
    p[1] = 0x02; // ECT(0)
    p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    p[4..6].copy_from_slice(&0x1234u16.to_be_bytes());
    p[6] = 0x40;
    p[8] = 61;
    p[9] = 6;
    p[12..16].copy_from_slice(&[10, 0, 0, 1]);
    p[16..20].copy_from_slice(&[10, 9, 0, 1]);
    let c = Sum::of(&p[..20]).checksum();
    p[10..12].copy_from_slice(&c.to_be_bytes());
    let t = &mut p[20..];
    t[0..2].copy_from_slice(&sport.to_be_bytes());
    t[2..4].copy_from_slice(&80u16.to_be_bytes());
    t[4..8].copy_from_slice(&1000u32.to_be_bytes());
    t[12] = 0x50;
    t[13] = 0x18;
    t[14..16].copy_from_slice(&512u16.to_be_bytes());
    t[20..].copy_from_slice(payload);
    let ph = tep_csum::pseudo_header_v4([10, 0, 0, 1], [10, 9, 0, 1], 6, tcp_len as u16);
    let c = ph.add(Sum::of(t)).checksum();
    t[16..18].copy_from_slice(&c.to_be_bytes());
    p
}

/// An inner IPv6 UDP datagram 2001:db8:9::1 → 2001:db8:9::2 with a correct
/// checksum.
pub fn udp6(payload: &[u8], sport: u16) -> Vec<u8> {
    let udp_len = 8 + payload.len();
    let mut p = vec![0u8; 40 + udp_len];
    p[0] = 0x60;
    p[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
    p[6] = 17;
    p[7] = 63;
    let s = Ipv6Addr::new(0x2001, 0xdb8, 9, 0, 0, 0, 0, 1).octets();
    let d = Ipv6Addr::new(0x2001, 0xdb8, 9, 0, 0, 0, 0, 2).octets();
    p[8..24].copy_from_slice(&s);
    p[24..40].copy_from_slice(&d);
    let u = &mut p[40..];
    u[0..2].copy_from_slice(&sport.to_be_bytes());
    u[2..4].copy_from_slice(&53u16.to_be_bytes());
    u[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
    u[8..].copy_from_slice(payload);
    let ph = tep_csum::pseudo_header_v6(&s, &d, 17, udp_len as u32);
    let c = ph.add(Sum::of(u)).udp_checksum();
    u[6..8].copy_from_slice(&c.to_be_bytes());
    p
}

pub const INNER_DST_MAC: [u8; 6] = example::INNER_DST_MAC;

/// An Ethernet frame around `ip`.
pub fn frame(ip: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(14 + ip.len());
    f.extend_from_slice(&INNER_DST_MAC);
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, 0xaa]);
    let ty: u16 = if ip[0] >> 4 == 6 { 0x86dd } else { 0x0800 };
    f.extend_from_slice(&ty.to_be_bytes());
    f.extend_from_slice(ip);
    f
}

/// The two ends of a tunnel of `kind`: (A's config, B's config).
pub fn pair(
    kind: TunnelKind,
    v6: bool,
    mode: ChecksumMode,
) -> (Vec<TunnelConfig>, Vec<TunnelConfig>) {
    tep_dataplane::example::tunnel_pair(kind, v6, mode)
}

pub fn pipeline(config: &[TunnelConfig], link: InnerLink) -> Pipeline<ManualClock> {
    pipeline_with(config, &DataplaneConfig::default(), link)
}

/// [`pipeline`] with these `[dataplane]` settings.
pub fn pipeline_with(
    config: &[TunnelConfig],
    dataplane: &DataplaneConfig,
    link: InnerLink,
) -> Pipeline<ManualClock> {
    Pipeline::new(
        config,
        dataplane,
        ManualClock::default(),
        PipelineOptions {
            inner_link: link,
            ..PipelineOptions::default()
        },
    )
}

/// A gateway's pipeline: frames on both sides.
pub fn gateway(config: &[TunnelConfig]) -> Pipeline<ManualClock> {
    Pipeline::new(
        config,
        &DataplaneConfig::default(),
        ManualClock::default(),
        PipelineOptions {
            inner_link: InnerLink::Ethernet,
            outer: OuterLayers::EthernetIpUdp,
            ..PipelineOptions::default()
        },
    )
}

pub fn pool() -> Pool {
    Pool::new(1024, SUPER_PACKET_ROOM)
}

/// Loads packets into a vector.
pub fn load(pool: &mut Pool, packets: &[Vec<u8>]) -> PacketVector {
    let mut v = PacketVector::new();
    for p in packets {
        let id = pool.alloc().expect("pool");
        assert!(pool.fill(id, p));
        v.push(id).unwrap();
    }
    v
}

/// What came out of a pipeline call, copied out, buffers freed.
#[derive(Debug, Default)]
pub struct Out {
    pub packets: Vec<Vec<u8>>,
    pub csum: Vec<ChecksumState>,
    /// Replies (GTP-U), and ICMP errors back where their packet came
    /// from (whole frames).
    pub replies: Vec<Vec<u8>>,
}

fn take(
    pool: &mut Pool,
    v: &mut PacketVector,
    into: &mut Vec<Vec<u8>>,
    cs: Option<&mut Vec<ChecksumState>>,
) {
    let mut cs = cs;
    for &id in v.as_slice() {
        into.push(pool.data(id).to_vec());
        if let Some(c) = cs.as_mut() {
            c.push(pool.meta(id).csum);
        }
        pool.free(id);
    }
    v.clear();
}

pub fn run_encap(p: &mut Pipeline<ManualClock>, pool: &mut Pool, packets: &[Vec<u8>]) -> Out {
    let mut v = load(pool, packets);
    let mut out = Out::default();
    p.encap(pool, &mut v, &mut |o, pool, v| match o {
        // ICMP errors back to the sender (whole frames).
        Output::Inner => take(pool, v, &mut out.replies, None),
        _ => take(pool, v, &mut out.packets, Some(&mut out.csum)),
    });
    out
}

pub fn run_decap(
    p: &mut Pipeline<ManualClock>,
    pool: &mut Pool,
    packets: &[Vec<u8>],
    now_ns: u64,
) -> Out {
    let mut v = load(pool, packets);
    let mut out = Out::default();
    p.decap(pool, &mut v, now_ns, &mut |o, pool, v| match o {
        Output::Inner => take(pool, v, &mut out.packets, Some(&mut out.csum)),
        // ICMP errors about decapsulated packets, back into the tunnel.
        Output::Outer => take(pool, v, &mut out.replies, None),
        Output::Kernel => panic!("{o:?} out of decap"),
        Output::Reply => {
            for &id in v.as_slice() {
                // The I/O layer sends a reply from the endpoint its source
                // names: it belongs to no tunnel.
                assert_eq!(
                    pool.meta(id).tunnel,
                    tep_dataplane::NO_TUNNEL,
                    "a reply leaves with no tunnel"
                );
            }
            take(pool, v, &mut out.replies, None)
        }
    });
    out
}

/// Whether the UDP checksum of an outer packet (IP at 0) verifies; `None`
/// when it is zero.
pub fn outer_udp_ok(p: &[u8]) -> Option<bool> {
    let (l4, pseudo) = if p[0] >> 4 == 4 {
        let l4 = usize::from(p[0] & 0xf) * 4;
        let len = (p.len() - l4) as u16;
        (
            l4,
            tep_csum::pseudo_header_v4(
                p[12..16].try_into().unwrap(),
                p[16..20].try_into().unwrap(),
                17,
                len,
            ),
        )
    } else {
        let len = (p.len() - 40) as u32;
        (
            40,
            tep_csum::pseudo_header_v6(
                &p[8..24].try_into().unwrap(),
                &p[24..40].try_into().unwrap(),
                17,
                len,
            ),
        )
    };
    if p[l4 + 6..l4 + 8] == [0, 0] {
        return None;
    }
    Some(pseudo.add(Sum::of(&p[l4..])).verifies())
}

pub fn ids(v: &PacketVector) -> Vec<PacketId> {
    v.as_slice().to_vec()
}

// ---------------------------------------------------------------------------
// Accounting: every packet that enters a path leaves it or is counted as a
// drop on exactly one node.

/// Nodes of the transmit path (the rest of `-encap` names too).
pub const ENCAP_NODES: &[&str] = &[
    "vlan-input",
    "dn-arp",
    "encap-classify",
    "tunnel-lookup",
    "neigh-suppress",
    "fdb-lookup",
    "flood",
    "session-lookup",
    "inner-checksum",
    "ip-udp-encap",
    "udp-checksum",
    "udp-train",
    "ip-forward",
];

/// Nodes of the receive path (and every `-decap` name).
pub const DECAP_NODES: &[&str] = &[
    "udp-train-split",
    "train-merge",
    "ip-input",
    "udp-input",
    "udp-checksum-verify",
    "fdb-learn",
    "decap-output",
    "vlan-output",
    "ethernet-input",
    "ip-rewrite",
];

/// Which path a node belongs to: true for encap. Panics on a node this
/// helper does not know, so that a new node is classified here rather than
/// silently left out of the balance.
pub fn is_encap_node(name: &str) -> bool {
    if ENCAP_NODES.contains(&name) || name.ends_with("-encap") || name.starts_with("gso") {
        true
    } else if DECAP_NODES.contains(&name) || name.ends_with("-decap") || name.starts_with("gro") {
        false
    } else {
        panic!("node {name:?} is neither an encap nor a decap node: add it to ENCAP_NODES or DECAP_NODES in tests/common/mod.rs")
    }
}

/// Checks the pipeline's edge counters against the drops of its nodes:
/// `encap_in + segments_added + flood_copies == encap_out + Σ encap drops +
/// buffered + suppressed` and
/// `decap_in == decap_out + coalesced + answered + Σ decap drops`.
pub fn assert_balanced<C: Clock>(p: &Pipeline<C>) {
    let c = p.counters();
    let mut encap_drops = 0;
    let mut decap_drops = 0;
    for n in p.runtime().nodes() {
        if is_encap_node(n.name) {
            encap_drops += n.drops_total();
        } else {
            decap_drops += n.drops_total();
        }
    }
    assert_eq!(
        c.encap_in + c.segments_added + c.flood_copies,
        c.encap_out + encap_drops + c.buffered + c.suppressed,
        "encap unbalanced: {c:?}, encap drops {encap_drops}\n{}",
        p.runtime().report()
    );
    assert_eq!(
        c.decap_in,
        c.decap_out + c.coalesced + c.answered + decap_drops,
        "decap unbalanced: {c:?}, decap drops {decap_drops}\n{}",
        p.runtime().report()
    );
    assert_eq!(encap_drops + decap_drops, p.drops_total());
}

/// Every buffer is back in the pool (the sinks freed theirs).
pub fn assert_no_leak(pool: &Pool) {
    assert_eq!(
        pool.available(),
        pool.capacity(),
        "{} buffers leaked",
        pool.capacity() - pool.available()
    );
}

/// The nodes that counted drops of `reason`, with their counts.
pub fn drop_nodes<C: Clock>(p: &Pipeline<C>, reason: DropReason) -> Vec<(&'static str, u64)> {
    p.runtime()
        .nodes()
        .iter()
        .filter(|n| n.drops[reason] > 0)
        .map(|n| (n.name, n.drops[reason]))
        .collect()
}

/// Exactly one packet was dropped, for `reason`, on node `node`.
pub fn assert_dropped_once<C: Clock>(p: &Pipeline<C>, reason: DropReason, node: &str) {
    assert_eq!(
        p.drops(reason),
        1,
        "drops of {reason}:\n{}",
        p.runtime().report()
    );
    assert_eq!(
        drop_nodes(p, reason),
        vec![(node_name(p, node), 1)],
        "{reason} counted on the wrong node:\n{}",
        p.runtime().report()
    );
    assert_eq!(
        p.drops_total(),
        1,
        "other drops besides {reason}:\n{}",
        p.runtime().report()
    );
}

/// The registered name equal to `name` (panics if the pipeline has none, so
/// a renamed node fails loudly).
fn node_name<C: Clock>(p: &Pipeline<C>, name: &str) -> &'static str {
    p.runtime()
        .nodes()
        .iter()
        .find(|n| n.name == name)
        .unwrap_or_else(|| panic!("no node named {name:?}"))
        .name
}

// ---------------------------------------------------------------------------
// Outer packet builders and editors (IP header at offset 0).

/// An outer IP/UDP datagram with a valid IPv4 header checksum and a full
/// UDP checksum.
pub fn udp_packet(src: IpAddr, dst: IpAddr, sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let udp_len = 8 + payload.len();
    let mut p = match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let total = 20 + udp_len;
            let mut p = vec![0u8; total];
            p[0] = 0x45;
            p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
            p[4..6].copy_from_slice(&0x4321u16.to_be_bytes());
            p[8] = 64;
            p[9] = 17;
            p[12..16].copy_from_slice(&s.octets());
            p[16..20].copy_from_slice(&d.octets());
            p
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let mut p = vec![0u8; 40 + udp_len];
            p[0] = 0x60;
            p[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
            p[6] = 17;
            p[7] = 64;
            p[8..24].copy_from_slice(&s.octets());
            p[24..40].copy_from_slice(&d.octets());
            p
        }
        _ => panic!("mixed families"),
    };
    let l4 = l4_offset(&p);
    p[l4..l4 + 2].copy_from_slice(&sport.to_be_bytes());
    p[l4 + 2..l4 + 4].copy_from_slice(&dport.to_be_bytes());
    p[l4 + 4..l4 + 6].copy_from_slice(&(udp_len as u16).to_be_bytes());
    p[l4 + 8..].copy_from_slice(payload);
    fix_ip_checksum(&mut p);
    fix_udp_checksum(&mut p);
    p
}

/// Offset of the UDP header of an outer packet without IPv6 extension
/// headers.
pub fn l4_offset(p: &[u8]) -> usize {
    if p[0] >> 4 == 4 {
        usize::from(p[0] & 0xf) * 4
    } else {
        40
    }
}

/// The UDP payload of an outer packet (the tunnel header on).
pub fn udp_payload(p: &[u8]) -> &[u8] {
    &p[l4_offset(p) + 8..]
}

/// Offset of the UDP payload of an outer packet.
pub fn udp_payload_offset(p: &[u8]) -> usize {
    l4_offset(p) + 8
}

/// Recomputes the IPv4 header checksum (no-op for IPv6).
pub fn fix_ip_checksum(p: &mut [u8]) {
    if p[0] >> 4 == 4 {
        let hl = usize::from(p[0] & 0xf) * 4;
        p[10..12].copy_from_slice(&[0, 0]);
        let c = Sum::of(&p[..hl]).checksum();
        p[10..12].copy_from_slice(&c.to_be_bytes());
    }
}

/// The outer UDP pseudo-header sum of a packet (length from the packet).
pub fn outer_pseudo(p: &[u8]) -> Sum {
    let l4 = l4_offset(p);
    let len = p.len() - l4;
    if p[0] >> 4 == 4 {
        tep_csum::pseudo_header_v4(
            p[12..16].try_into().unwrap(),
            p[16..20].try_into().unwrap(),
            17,
            len as u16,
        )
    } else {
        tep_csum::pseudo_header_v6(
            &p[8..24].try_into().unwrap(),
            &p[24..40].try_into().unwrap(),
            17,
            len as u32,
        )
    }
}

/// Recomputes the outer UDP checksum in full.
pub fn fix_udp_checksum(p: &mut [u8]) {
    let l4 = l4_offset(p);
    p[l4 + 6..l4 + 8].copy_from_slice(&[0, 0]);
    let c = outer_pseudo(p).add(Sum::of(&p[l4..])).udp_checksum();
    p[l4 + 6..l4 + 8].copy_from_slice(&c.to_be_bytes());
}

/// Sets the outer UDP checksum to zero (none sent).
pub fn zero_udp_checksum(p: &mut [u8]) {
    let l4 = l4_offset(p);
    p[l4 + 6..l4 + 8].copy_from_slice(&[0, 0]);
}

/// Sets the TOS / traffic class byte of the IP header at `at` (fixing an
/// IPv4 header checksum).
pub fn set_tos(p: &mut [u8], at: usize, tos: u8) {
    let ip = &mut p[at..];
    if ip[0] >> 4 == 4 {
        ip[1] = tos;
        let hl = usize::from(ip[0] & 0xf) * 4;
        ip[10..12].copy_from_slice(&[0, 0]);
        let c = Sum::of(&ip[..hl]).checksum();
        ip[10..12].copy_from_slice(&c.to_be_bytes());
    } else {
        ip[0] = 0x60 | (tos >> 4);
        ip[1] = (ip[1] & 0x0f) | (tos << 4);
    }
}

// ---------------------------------------------------------------------------
// Inner packets with partial checksums (a TUN with virtio-net NEEDS_CSUM).

/// Offset of the transport header of the IP packet at `l3` (no IPv6
/// extension headers).
pub fn ip_l4(p: &[u8], l3: usize) -> usize {
    if p[l3] >> 4 == 4 {
        l3 + usize::from(p[l3] & 0xf) * 4
    } else {
        l3 + 40
    }
}

/// The pseudo-header sum of the TCP/UDP segment of the IP packet at `l3`.
pub fn inner_pseudo(p: &[u8], l3: usize) -> Sum {
    let ip = &p[l3..];
    let l4 = ip_l4(p, l3);
    if ip[0] >> 4 == 4 {
        let end = l3 + usize::from(u16::from_be_bytes([ip[2], ip[3]]));
        tep_csum::pseudo_header_v4(
            ip[12..16].try_into().unwrap(),
            ip[16..20].try_into().unwrap(),
            ip[9],
            (end - l4) as u16,
        )
    } else {
        let end = l3 + 40 + usize::from(u16::from_be_bytes([ip[4], ip[5]]));
        tep_csum::pseudo_header_v6(
            &ip[8..24].try_into().unwrap(),
            &ip[24..40].try_into().unwrap(),
            ip[6],
            (end - l4) as u32,
        )
    }
}

/// The IP protocol / next header of the IP packet at `l3`.
pub fn ip_proto(p: &[u8], l3: usize) -> u8 {
    if p[l3] >> 4 == 4 {
        p[l3 + 9]
    } else {
        p[l3 + 6]
    }
}

/// Offset of the checksum field inside a TCP (16) or UDP (6) header.
pub fn csum_field(proto: u8) -> usize {
    match proto {
        6 => 16,
        17 => 6,
        p => panic!("no transport checksum for protocol {p}"),
    }
}

/// `p` (a complete packet or frame whose IP header is at `l3`) as a TUN
/// with NEEDS_CSUM hands it over: the transport checksum field holds the
/// pseudo-header sum, and the metadata says where to finish it.
pub fn make_partial(p: &[u8], l3: usize) -> (Vec<u8>, ChecksumState) {
    let mut q = p.to_vec();
    let l4 = ip_l4(&q, l3);
    let off = l4 + csum_field(ip_proto(&q, l3));
    let pseudo = inner_pseudo(&q, l3);
    q[off..off + 2].copy_from_slice(&pseudo.value().to_be_bytes());
    (
        q,
        ChecksumState::Partial {
            start: l4 as u16,
            offset: off as u16,
        },
    )
}

/// Whether the transport checksum of the IP packet at `l3` verifies.
pub fn inner_checksum_ok(p: &[u8], l3: usize) -> bool {
    let l4 = ip_l4(p, l3);
    let end = if p[l3] >> 4 == 4 {
        l3 + usize::from(u16::from_be_bytes([p[l3 + 2], p[l3 + 3]]))
    } else {
        l3 + 40 + usize::from(u16::from_be_bytes([p[l3 + 4], p[l3 + 5]]))
    };
    inner_pseudo(p, l3).add(Sum::of(&p[l4..end])).verifies()
}

/// Loads packets with their checksum metadata into a vector.
pub fn load_with(pool: &mut Pool, packets: &[(Vec<u8>, ChecksumState)]) -> PacketVector {
    let mut v = PacketVector::new();
    for (p, cs) in packets {
        let id = pool.alloc().expect("pool");
        assert!(pool.fill(id, p));
        pool.meta_mut(id).csum = *cs;
        v.push(id).unwrap();
    }
    v
}

/// Encapsulates packets that carry checksum metadata.
pub fn run_encap_with(
    p: &mut Pipeline<ManualClock>,
    pool: &mut Pool,
    packets: &[(Vec<u8>, ChecksumState)],
) -> Out {
    let mut v = load_with(pool, packets);
    let mut out = Out::default();
    p.encap(pool, &mut v, &mut |o, pool, v| match o {
        // ICMP errors back to the sender (whole frames).
        Output::Inner => take(pool, v, &mut out.replies, None),
        _ => take(pool, v, &mut out.packets, Some(&mut out.csum)),
    });
    out
}

/// Finishes a partial outer checksum the way a NIC or veth would; leaves a
/// complete one alone.
pub fn complete_offload(p: &[u8], cs: ChecksumState) -> Vec<u8> {
    let mut p = p.to_vec();
    if let ChecksumState::Partial { start, offset } = cs {
        let c = Sum::of(&p[usize::from(start)..]).udp_checksum();
        let o = usize::from(offset);
        p[o..o + 2].copy_from_slice(&c.to_be_bytes());
    }
    p
}

/// Encapsulates `inner` on a fresh pipeline for `config` and returns the one
/// outer packet (partial outer checksums completed), checking the
/// pipeline's accounting on the way.
pub fn encap_one(config: &[TunnelConfig], link: InnerLink, inner: &[u8]) -> Vec<u8> {
    let mut a = pipeline(config, link);
    let mut pool = pool();
    let out = run_encap(&mut a, &mut pool, &[inner.to_vec()]);
    assert_eq!(out.packets.len(), 1, "{}", a.runtime().report());
    assert_balanced(&a);
    assert_no_leak(&pool);
    complete_offload(&out.packets[0], out.csum[0])
}

/// Chooses the last two payload bytes of an inner IPv6 UDP datagram so
/// that its checksum computes to 0 and is therefore sent as 0xffff
/// (RFC 768): the case where "complement of the sum" and "UDP checksum"
/// differ.
pub fn udp6_all_ones_checksum(len: usize) -> Vec<u8> {
    assert!(len >= 2);
    let mut payload = vec![0x5a; len];
    let n = payload.len();
    payload[n - 2..].copy_from_slice(&[0, 0]);
    let p = udp6(&payload, 4000);
    // The sum over pseudo header and segment with the checksum field zero.
    let mut q = p.clone();
    q[46..48].copy_from_slice(&[0, 0]);
    let s = inner_pseudo(&q, 0).add(Sum::of(&q[40..]));
    // Adding !s makes the total all ones: the checksum then computes to 0.
    let w = !s.value();
    payload[n - 2..].copy_from_slice(&w.to_be_bytes());
    let p = udp6(&payload, 4000);
    assert_eq!(&p[46..48], &[0xff, 0xff], "checksum field must be 0xffff");
    p
}

// ---------------------------------------------------------------------------
// pcap files.

/// One record of a pcap file.
#[derive(Clone, Debug)]
pub struct PcapRecord {
    /// Bytes captured.
    pub data: Vec<u8>,
    /// Length on the wire (more than `data.len()` when snapped).
    pub orig_len: usize,
}

/// Reads a classic pcap file: (link type, records).
pub fn read_pcap(bytes: &[u8]) -> (u32, Vec<PcapRecord>) {
    let magic = u32::from_le_bytes(bytes[0..4].try_into().unwrap());
    let le = match magic {
        0xa1b2_c3d4 | 0xa1b2_3c4d => true,
        _ if u32::from_be_bytes(bytes[0..4].try_into().unwrap()) & 0xffff_0000 == 0xa1b2_0000 => {
            false
        }
        m => panic!("not a pcap file (magic {m:#x})"),
    };
    let u32_at = |at: usize| {
        let b: [u8; 4] = bytes[at..at + 4].try_into().unwrap();
        if le {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        }
    };
    let linktype = u32_at(20);
    let mut at = 24;
    let mut records = Vec::new();
    while at + 16 <= bytes.len() {
        let caplen = u32_at(at + 8) as usize;
        let orig_len = u32_at(at + 12) as usize;
        let data = bytes[at + 16..at + 16 + caplen].to_vec();
        records.push(PcapRecord { data, orig_len });
        at += 16 + caplen;
    }
    assert_eq!(at, bytes.len(), "trailing bytes in the pcap file");
    (linktype, records)
}

/// LINKTYPE_RAW: each record starts at an IPv4 or IPv6 header.
pub const LINKTYPE_RAW: u32 = 101;

/// A classic little-endian pcap file of `packets`.
pub fn write_pcap(linktype: u32, packets: &[Vec<u8>]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    f.extend_from_slice(&2u16.to_le_bytes());
    f.extend_from_slice(&4u16.to_le_bytes());
    f.extend_from_slice(&0i32.to_le_bytes());
    f.extend_from_slice(&0u32.to_le_bytes());
    f.extend_from_slice(&262_144u32.to_le_bytes());
    f.extend_from_slice(&linktype.to_le_bytes());
    for (i, p) in packets.iter().enumerate() {
        f.extend_from_slice(&(i as u32).to_le_bytes());
        f.extend_from_slice(&0u32.to_le_bytes());
        f.extend_from_slice(&(p.len() as u32).to_le_bytes());
        f.extend_from_slice(&(p.len() as u32).to_le_bytes());
        f.extend_from_slice(p);
    }
    f
}

// ---------------------------------------------------------------------------
// More inner packets.

/// An inner IPv4 TCP segment `src` → `dst` with a correct checksum (the
/// layout of [`tcp4`]).
pub fn tcp4_between(src: [u8; 4], dst: [u8; 4], payload: &[u8], sport: u16) -> Vec<u8> {
    let mut p = tcp4(payload, sport);
    p[12..16].copy_from_slice(&src);
    p[16..20].copy_from_slice(&dst);
    refresh_checksums(&mut p);
    p
}

/// An inner IPv6 UDP datagram `src` → `dst` with a correct checksum (the
/// layout of [`udp6`]).
pub fn udp6_between(src: Ipv6Addr, dst: Ipv6Addr, payload: &[u8], sport: u16) -> Vec<u8> {
    let mut p = udp6(payload, sport);
    p[8..24].copy_from_slice(&src.octets());
    p[24..40].copy_from_slice(&dst.octets());
    refresh_checksums(&mut p);
    p
}

/// Recomputes the IPv4 header checksum and the TCP/UDP checksum of an
/// inner IP packet at offset 0.
pub fn refresh_checksums(p: &mut [u8]) {
    fix_ip_checksum(p);
    let l4 = ip_l4(p, 0);
    let proto = ip_proto(p, 0);
    let off = l4 + csum_field(proto);
    p[off..off + 2].copy_from_slice(&[0, 0]);
    let s = inner_pseudo(p, 0).add(Sum::of(&p[l4..]));
    let c = if proto == 17 {
        s.udp_checksum()
    } else {
        s.checksum()
    };
    p[off..off + 2].copy_from_slice(&c.to_be_bytes());
}

/// The default inner packet for a kind: an IPv4 TCP segment (in a frame for
/// L2 kinds), an IPv6 UDP datagram for FOU-SIT.
pub fn inner_for(kind: TunnelKind) -> Vec<u8> {
    match kind {
        TunnelKind::FouSit => udp6(b"inner payload", 1000),
        _ if kind.carries_ethernet() => frame(&tcp4(b"inner payload", 1000)),
        _ => tcp4(b"inner payload", 1000),
    }
}

/// A valid outer packet from A to B for `kind` (full checksums): what the
/// B side of [`pair`] accepts.
pub fn valid_outer(kind: TunnelKind, v6: bool) -> Vec<u8> {
    let (ca, _) = pair(kind, v6, ChecksumMode::Full);
    encap_one(&ca, kind.link(), &inner_for(kind))
}

/// Decapsulates `packets` on a fresh pipeline for `config` and returns what
/// came out, after checking the accounting.
pub fn decap_fresh(config: &[TunnelConfig], link: InnerLink, packets: &[Vec<u8>]) -> Out {
    let mut b = pipeline(config, link);
    let mut pool = pool();
    let out = run_decap(&mut b, &mut pool, packets, 0);
    assert_balanced(&b);
    assert_no_leak(&pool);
    out
}

// ---------------------------------------------------------------------------
// GTP-U messages (the bytes after the UDP header).

/// A G-PDU to `teid` carrying `tpdu`, without optional fields.
pub fn gtpu_gpdu(teid: u32, tpdu: &[u8]) -> Vec<u8> {
    let mut g = vec![0x30, 0xff];
    g.extend_from_slice(&(tpdu.len() as u16).to_be_bytes());
    g.extend_from_slice(&teid.to_be_bytes());
    g.extend_from_slice(tpdu);
    g
}

/// A signalling message with S set: type, TEID, sequence, then `ies`.
pub fn gtpu_signalling(msg_type: u8, teid: u32, sequence: u16, ies: &[u8]) -> Vec<u8> {
    let mut g = vec![0x32, msg_type];
    g.extend_from_slice(&((4 + ies.len()) as u16).to_be_bytes());
    g.extend_from_slice(&teid.to_be_bytes());
    g.extend_from_slice(&sequence.to_be_bytes());
    g.extend_from_slice(&[0, 0]);
    g.extend_from_slice(ies);
    g
}

/// An Echo Request with `sequence`.
pub fn gtpu_echo_request(sequence: u16) -> Vec<u8> {
    gtpu_signalling(1, 0, sequence, &[])
}

/// A G-PDU with one extension header of `ext_type` (4 bytes: length 1,
/// two content bytes, next type 0).
pub fn gtpu_gpdu_with_extension(teid: u32, ext_type: u8, content: [u8; 2], tpdu: &[u8]) -> Vec<u8> {
    let mut g = vec![0x34, 0xff];
    g.extend_from_slice(&((8 + tpdu.len()) as u16).to_be_bytes());
    g.extend_from_slice(&teid.to_be_bytes());
    g.extend_from_slice(&[0, 0, 0, ext_type]);
    g.extend_from_slice(&[1, content[0], content[1], 0]);
    g.extend_from_slice(tpdu);
    g
}

// ---------------------------------------------------------------------------
// Inner packets for property tests.

/// One inner packet of a proptest case: TCP or UDP over IPv4 or IPv6, to
/// an address the L3 tunnels route (10.0.0.0/8, 2001:db8:8::/47), any
/// length, ports, TOS, TTL, DF, IPv4 identification and IPv6 flow label.
#[derive(Clone, Debug)]
pub struct Inner {
    pub v6: bool,
    pub tcp: bool,
    pub dst: u32,
    pub tos: u8,
    pub ttl: u8,
    pub df: bool,
    pub id_or_label: u32,
    pub ports: (u16, u16),
    pub seq: u32,
    pub len: usize,
    pub fill: u8,
}

impl Inner {
    /// The packet's bytes, checksums correct.
    /// This packet in the family a tunnel of `kind` carries: FOU-IPIP
    /// IPv4 only, FOU-SIT IPv6 only, the others either.
    pub fn for_kind(&self, kind: TunnelKind) -> Inner {
        let mut p = self.clone();
        match kind {
            TunnelKind::FouIpip => p.v6 = false,
            TunnelKind::FouSit => p.v6 = true,
            _ => {}
        }
        p
    }

    pub fn bytes(&self) -> Vec<u8> {
        let th = if self.tcp { 20 } else { 8 };
        let ih = if self.v6 { 40 } else { 20 };
        let mut p = vec![0u8; ih + th + self.len];
        let proto = if self.tcp { 6 } else { 17 };
        if self.v6 {
            let first = (6u32 << 28) | (u32::from(self.tos) << 20) | (self.id_or_label & 0xf_ffff);
            p[0..4].copy_from_slice(&first.to_be_bytes());
            p[4..6].copy_from_slice(&((th + self.len) as u16).to_be_bytes());
            p[6] = proto;
            p[7] = self.ttl;
            p[8..24].copy_from_slice(&Ipv6Addr::new(0x2001, 0xdb8, 9, 0, 0, 0, 0, 1).octets());
            // 2001:db8:8::/47: the prefix's last bit and the low 64 bits vary.
            let dst = Ipv6Addr::new(
                0x2001,
                0xdb8,
                8 | (self.dst >> 31) as u16,
                0,
                0,
                0,
                (self.dst >> 16) as u16,
                self.dst as u16,
            );
            p[24..40].copy_from_slice(&dst.octets());
        } else {
            p[0] = 0x45;
            p[1] = self.tos;
            p[2..4].copy_from_slice(&((ih + th + self.len) as u16).to_be_bytes());
            p[4..6].copy_from_slice(&(self.id_or_label as u16).to_be_bytes());
            p[6] = if self.df { 0x40 } else { 0 };
            p[8] = self.ttl;
            p[9] = proto;
            p[12..16].copy_from_slice(&[10, 0, 0, 1]);
            // 10.0.0.0/8: the low 24 bits vary.
            p[16] = 10;
            p[17..20].copy_from_slice(&self.dst.to_be_bytes()[1..]);
        }
        let t = &mut p[ih..];
        t[0..2].copy_from_slice(&self.ports.0.to_be_bytes());
        t[2..4].copy_from_slice(&self.ports.1.to_be_bytes());
        if self.tcp {
            t[4..8].copy_from_slice(&self.seq.to_be_bytes());
            t[12] = 0x50;
            t[13] = 0x18;
            t[14..16].copy_from_slice(&1024u16.to_be_bytes());
        } else {
            t[4..6].copy_from_slice(&((th + self.len) as u16).to_be_bytes());
        }
        for (i, b) in t[th..].iter_mut().enumerate() {
            *b = self.fill.wrapping_add(i as u8);
        }
        refresh_checksums(&mut p);
        p
    }
}

pub fn inner_strategy() -> impl Strategy<Value = Inner> {
    (
        (
            any::<bool>(),
            any::<bool>(),
            any::<u32>(),
            any::<u8>(),
            1u8..,
        ),
        (
            any::<bool>(),
            any::<u32>(),
            any::<(u16, u16)>(),
            any::<u32>(),
        ),
        (0usize..1400, any::<u8>()),
    )
        .prop_map(
            |((v6, tcp, dst, tos, ttl), (df, id_or_label, ports, seq), (len, fill))| Inner {
                v6,
                tcp,
                dst,
                tos,
                ttl,
                df,
                id_or_label,
                ports,
                seq,
                len,
                fill,
            },
        )
}
