//! One test per drop reason: the offending packet goes through the
//! pipeline, and exactly one drop of that reason is counted, on the node
//! that is supposed to see it. `every_reason_has_a_test` (at the end) reads
//! this file and fails when a reason has neither a test named after it nor
//! an entry in `UNREACHABLE`.

mod common;
use common::upf::*;
use common::*;
use core::net::{IpAddr, Ipv4Addr};
use tep_dataplane::config::{ChecksumMode, TunnelConfig};
use tep_dataplane::example;
use tep_dataplane::session::control::Volume;
use tep_dataplane::session::Action;
use tep_dataplane::DropReason;
use tep_dataplane::InnerLink;
use tep_dataplane::ManualClock;
use tep_dataplane::PacketVector;
use tep_dataplane::Pipeline;
use tep_dataplane::TunnelKind;
use tep_dataplane::{ChecksumState, Gso, GsoKind, Pool, SUPER_PACKET_ROOM};

/// Reasons no packet can trigger through the pipeline today, and why.
const UNREACHABLE: &[(DropReason, &str)] = &[(
    DropReason::VectorFull,
    "a bug by construction: every node makes room before it puts a packet \
     (PacketVector::put panics in debug builds, which these tests are); the \
     release path, freed and counted, is vector.rs's unit test",
)];

/// Decapsulates `packets` on B (the receiving side of `config`) and checks
/// that exactly one was dropped, for `reason`, on `node`.
fn decap_drop(
    config: &[TunnelConfig],
    link: InnerLink,
    packets: &[Vec<u8>],
    reason: DropReason,
    node: &str,
) -> Out {
    let mut b = pipeline(config, link);
    let mut pool = pool();
    let out = run_decap(&mut b, &mut pool, packets, 0);
    assert_eq!(
        out.packets.len(),
        packets.len() - 1,
        "{}",
        b.runtime().report()
    );
    assert_dropped_once(&b, reason, node);
    assert_balanced(&b);
    assert_no_leak(&pool);
    out
}

/// Encapsulates `packets` on A (the sending side of `config`) and checks
/// that exactly one was dropped, for `reason`, on `node`.
fn encap_drop(
    config: &[TunnelConfig],
    link: InnerLink,
    packets: &[Vec<u8>],
    reason: DropReason,
    node: &str,
) {
    let mut a = pipeline(config, link);
    let mut pool = pool();
    let out = run_encap(&mut a, &mut pool, packets);
    assert_eq!(
        out.packets.len(),
        packets.len() - 1,
        "{}",
        a.runtime().report()
    );
    assert_dropped_once(&a, reason, node);
    assert_balanced(&a);
    assert_no_leak(&pool);
}

/// B's config for `kind` over IPv4 with full checksums.
fn b_config(kind: TunnelKind) -> Vec<TunnelConfig> {
    pair(kind, false, ChecksumMode::Full).1
}

/// A's config for `kind` over IPv4 with full checksums.
fn a_config(kind: TunnelKind) -> Vec<TunnelConfig> {
    pair(kind, false, ChecksumMode::Full).0
}

/// The packet is accepted before it is damaged: the drop is the damage's.
fn accepted(config: &[TunnelConfig], link: InnerLink, p: &[u8]) {
    let out = decap_fresh(config, link, &[p.to_vec()]);
    assert_eq!(out.packets.len(), 1, "the undamaged packet must pass");
}

fn vxlan() -> (Vec<TunnelConfig>, Vec<u8>) {
    let c = b_config(TunnelKind::Vxlan);
    let p = valid_outer(TunnelKind::Vxlan, false);
    accepted(&c, InnerLink::Ethernet, &p);
    (c, p)
}

const C4: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 99));

// ---------------------------------------------------------------- ip-input

#[test]
fn not_ip() {
    let mut p = valid_outer(TunnelKind::FouIpip, false);
    p[0] = 0x55;
    let c = b_config(TunnelKind::FouIpip);
    decap_drop(
        &c,
        InnerLink::Ip,
        &[valid_outer(TunnelKind::FouIpip, false), p],
        DropReason::NotIp,
        "ip-input",
    );
    // The same on the transmit side: a TUN packet that is not IP.
    let mut inner = tcp4(b"x", 1);
    inner[0] = 0x55;
    encap_drop(
        &a_config(TunnelKind::FouIpip),
        InnerLink::Ip,
        &[tcp4(b"ok", 2), inner],
        DropReason::NotIp,
        "encap-classify",
    );
}

#[test]
fn truncated() {
    // The IPv4 total length says more than arrived.
    let (c, mut p) = vxlan();
    p.truncate(40);
    decap_drop(
        &c,
        InnerLink::Ethernet,
        &[p],
        DropReason::Truncated,
        "ip-input",
    );
}

#[test]
fn bad_ip_checksum() {
    let (c, mut p) = vxlan();
    p[10] ^= 0x40;
    decap_drop(
        &c,
        InnerLink::Ethernet,
        &[p],
        DropReason::BadIpChecksum,
        "ip-input",
    );
}

#[test]
fn fragment() {
    // The first fragment of an outer datagram (MF set): tep does not
    // reassemble.
    let (c, mut p) = vxlan();
    p[6] |= 0x20;
    fix_ip_checksum(&mut p);
    decap_drop(
        &c,
        InnerLink::Ethernet,
        &[p],
        DropReason::Fragment,
        "ip-input",
    );
}

/// The other pieces of an outer IPv4 datagram: a middle fragment (offset
/// and MF) and the last one (offset, no MF), whose bytes are not a UDP
/// header at all. Each beside a whole datagram that passes.
#[test]
fn fragment_not_first_ipv4() {
    let (c, good) = vxlan();
    for (flags_offset, what) in [(0x2000u16 | 185, "middle"), (370, "last")] {
        let mut p = good.clone();
        p[6..8].copy_from_slice(&flags_offset.to_be_bytes());
        fix_ip_checksum(&mut p);
        let out = decap_drop(
            &c,
            InnerLink::Ethernet,
            &[good.clone(), p],
            DropReason::Fragment,
            "ip-input",
        );
        assert_eq!(
            out.packets.len(),
            1,
            "{what} fragment: the whole one passes"
        );
    }
    // DF alone is no fragment.
    let mut df = good.clone();
    df[6] |= 0x40;
    fix_ip_checksum(&mut df);
    accepted(&c, InnerLink::Ethernet, &df);
}

/// B's config for VXLAN over IPv6, and a datagram it accepts.
fn vxlan6() -> (Vec<TunnelConfig>, Vec<u8>) {
    let c = pair(TunnelKind::Vxlan, true, ChecksumMode::Full).1;
    let p = valid_outer(TunnelKind::Vxlan, true);
    accepted(&c, InnerLink::Ethernet, &p);
    (c, p)
}

/// Inserts IPv6 extension headers right after the fixed header of `p`:
/// each `(type, bytes)` in order (the next-header bytes are chained here;
/// the last one names `upper`), and the payload length grows with them.
fn with_extensions(p: &[u8], headers: &[(u8, Vec<u8>)], upper: u8) -> Vec<u8> {
    let mut out = p[..40].to_vec();
    out[6] = headers.first().map_or(upper, |h| h.0);
    for (i, (_, h)) in headers.iter().enumerate() {
        let mut h = h.clone();
        h[0] = headers.get(i + 1).map_or(upper, |n| n.0);
        out.extend_from_slice(&h);
    }
    out.extend_from_slice(&p[40..]);
    let len = (out.len() - 40) as u16;
    out[4..6].copy_from_slice(&len.to_be_bytes());
    out
}

/// An IPv6 fragment header (RFC 8200 §4.5): `offset` in bytes, M flag.
fn fragment_header(offset: u16, more: bool) -> (u8, Vec<u8>) {
    let mut h = vec![0u8; 8];
    h[2..4].copy_from_slice(&(offset | u16::from(more)).to_be_bytes());
    h[4..8].copy_from_slice(&0x0bad_cafeu32.to_be_bytes());
    (44, h)
}

/// Hop-by-hop and destination options of 8 bytes (PadN filling them).
fn options_header(kind: u8) -> (u8, Vec<u8>) {
    (kind, vec![0, 0, 1, 4, 0, 0, 0, 0])
}

/// An outer IPv6 datagram that arrives in pieces (a Fragment extension
/// header): the first piece (offset 0, M), a middle and the last one, the
/// first also behind a hop-by-hop header. tep does not reassemble.
#[test]
fn fragment_ipv6() {
    let (c, good) = vxlan6();
    let cases = [
        (vec![fragment_header(0, true)], "first"),
        (vec![fragment_header(1232, true)], "middle"),
        (vec![fragment_header(2464, false)], "last"),
        (
            vec![options_header(0), fragment_header(0, true)],
            "first, after hop-by-hop",
        ),
    ];
    for (headers, what) in cases {
        let p = with_extensions(&good, &headers, 17);
        let out = decap_drop(
            &c,
            InnerLink::Ethernet,
            &[good.clone(), p],
            DropReason::Fragment,
            "ip-input",
        );
        assert_eq!(
            out.packets.len(),
            1,
            "{what} fragment: the whole one passes"
        );
    }
}

/// An atomic fragment (offset 0 and no M: RFC 8200 §4.5, RFC 6946) is a
/// whole packet, processed as one: it decapsulates like the datagram
/// without its Fragment header.
#[test]
fn an_atomic_ipv6_fragment_is_a_whole_datagram() {
    let (c, good) = vxlan6();
    let want = decap_fresh(&c, InnerLink::Ethernet, std::slice::from_ref(&good));
    let p = with_extensions(&good, &[fragment_header(0, false)], 17);
    let out = decap_fresh(&c, InnerLink::Ethernet, &[p]);
    assert_eq!(out.packets, want.packets);
}

/// Extension headers before the UDP header are stepped over: hop-by-hop,
/// destination options and a routing header with no segments left.
#[test]
fn ipv6_extension_headers_before_udp_are_stepped_over() {
    let (c, good) = vxlan6();
    let want = decap_fresh(&c, InnerLink::Ethernet, std::slice::from_ref(&good));
    let routing = (43, vec![0, 0, 4, 0, 0, 0, 0, 0]);
    let p = with_extensions(&good, &[options_header(0), options_header(60), routing], 17);
    let out = decap_fresh(&c, InnerLink::Ethernet, &[p]);
    assert_eq!(out.packets, want.packets);
}

#[test]
fn not_udp() {
    let (c, mut p) = vxlan();
    p[9] = 6;
    fix_ip_checksum(&mut p);
    decap_drop(
        &c,
        InnerLink::Ethernet,
        &[p],
        DropReason::NotUdp,
        "ip-input",
    );
}

/// IPv6 whose upper layer is not UDP: TCP right after the fixed header,
/// TCP and ICMPv6 at the end of an extension header chain, and No Next
/// Header.
#[test]
fn not_udp_ipv6() {
    let (c, good) = vxlan6();
    let cases = [
        (vec![], 6u8),
        (vec![options_header(0), options_header(60)], 6),
        (vec![options_header(60)], 58),
        (vec![options_header(0)], 59),
    ];
    for (headers, upper) in cases {
        let p = with_extensions(&good, &headers, upper);
        let out = decap_drop(
            &c,
            InnerLink::Ethernet,
            &[good.clone(), p],
            DropReason::NotUdp,
            "ip-input",
        );
        assert_eq!(
            out.packets.len(),
            1,
            "{upper} after {} headers",
            headers.len()
        );
    }
}

// --------------------------------------------------------------- udp-input

#[test]
fn unknown_port() {
    let p = udp_packet(A4, B4, 40000, 9999, b"to nobody");
    decap_drop(
        &b_config(TunnelKind::Vxlan),
        InnerLink::Ethernet,
        &[p],
        DropReason::UnknownPort,
        "udp-input",
    );
}

#[test]
fn bad_length() {
    // The UDP length is 10 bytes more than the IP packet holds.
    let (c, mut p) = vxlan();
    let l4 = l4_offset(&p);
    let len = u16::from_be_bytes([p[l4 + 4], p[l4 + 5]]) + 10;
    p[l4 + 4..l4 + 6].copy_from_slice(&len.to_be_bytes());
    decap_drop(
        &c,
        InnerLink::Ethernet,
        &[p],
        DropReason::BadLength,
        "udp-input",
    );
}

// ------------------------------------------------------------- <kind>-decap

#[test]
fn wrong_peer() {
    // The right VNI from an address that is not the tunnel's peer.
    let (c, mut p) = vxlan();
    if let IpAddr::V4(a) = C4 {
        p[12..16].copy_from_slice(&a.octets());
    }
    fix_ip_checksum(&mut p);
    fix_udp_checksum(&mut p);
    decap_drop(
        &c,
        InnerLink::Ethernet,
        &[p],
        DropReason::WrongPeer,
        "vxlan-decap",
    );
}

/// For GUE and FOU the peer's address is the only thing that ties a
/// datagram to a tunnel (no VNI, key or TEID to check): a valid datagram
/// from any other address is dropped as wrong_peer at the kind's node.
#[test]
fn wrong_peer_for_the_kinds_without_an_identifier() {
    for (kind, node) in [
        (TunnelKind::Gue, "gue-decap"),
        (TunnelKind::FouIpip, "fou-ipip-decap"),
        (TunnelKind::FouSit, "fou-sit-decap"),
        (TunnelKind::FouGre, "fou-gre-decap"),
        (TunnelKind::GueGre, "gue-gre-decap"),
    ] {
        let c = b_config(kind);
        let mut p = valid_outer(kind, false);
        accepted(&c, kind.link(), &p);
        if let IpAddr::V4(a) = C4 {
            p[12..16].copy_from_slice(&a.octets());
        }
        fix_ip_checksum(&mut p);
        fix_udp_checksum(&mut p);
        decap_drop(&c, kind.link(), &[p], DropReason::WrongPeer, node);
    }
}

#[test]
fn unknown_vni() {
    let (c, mut p) = vxlan();
    let at = udp_payload_offset(&p);
    p[at + 4..at + 7].copy_from_slice(&[0, 0x10, 0x93]);
    fix_udp_checksum(&mut p);
    decap_drop(
        &c,
        InnerLink::Ethernet,
        &[p],
        DropReason::UnknownVni,
        "vxlan-decap",
    );
}

/// Geneve's VNI sits where VXLAN's does (bytes 4-6 of its header).
#[test]
fn unknown_vni_geneve() {
    let c = b_config(TunnelKind::Geneve);
    let mut p = valid_outer(TunnelKind::Geneve, false);
    accepted(&c, InnerLink::Ethernet, &p);
    let at = udp_payload_offset(&p);
    assert_eq!(&p[at + 4..at + 7], &[0, 0x10, 0x92], "VNI 4242");
    p[at + 4..at + 7].copy_from_slice(&[0, 0x10, 0x93]);
    fix_udp_checksum(&mut p);
    decap_drop(
        &c,
        InnerLink::Ethernet,
        &[p],
        DropReason::UnknownVni,
        "geneve-decap",
    );
}

/// A GRE key no tunnel has, in FOU-GRE and in GUE-GRE (after the GUE
/// header's 4 bytes).
#[test]
fn unknown_key_in_fou_and_gue() {
    for (kind, gre_at, node) in [
        (TunnelKind::FouGre, 0, "fou-gre-decap"),
        (TunnelKind::GueGre, 4, "gue-gre-decap"),
    ] {
        let c = b_config(kind);
        let mut p = valid_outer(kind, false);
        accepted(&c, InnerLink::Ip, &p);
        let at = udp_payload_offset(&p) + gre_at;
        assert_eq!(p[at] & 0x20, 0x20, "{kind}: the K bit is set");
        assert_eq!(&p[at + 4..at + 8], &77u32.to_be_bytes(), "{kind}");
        p[at + 4..at + 8].copy_from_slice(&78u32.to_be_bytes());
        fix_udp_checksum(&mut p);
        decap_drop(&c, InnerLink::Ip, &[p], DropReason::UnknownKey, node);
    }
}

#[test]
fn unknown_teid() {
    let c = b_config(TunnelKind::Gtpu);
    let ok = udp_packet(A4, B4, 2152, 2152, &gtpu_gpdu(0x1000, &tcp4(b"known", 1)));
    let bad = udp_packet(A4, B4, 2152, 2152, &gtpu_gpdu(0xdead, &tcp4(b"unknown", 1)));
    let out = decap_drop(
        &c,
        InnerLink::Ip,
        &[ok, bad],
        DropReason::UnknownTeid,
        "gtpu-decap",
    );
    assert_eq!(out.replies.len(), 1, "one Error Indication");
    let g = &out.replies[0][28..];
    assert_eq!(g[1], 26, "message type Error Indication");
}

#[test]
fn unknown_key() {
    let c = b_config(TunnelKind::GreInUdp);
    let mut p = valid_outer(TunnelKind::GreInUdp, false);
    accepted(&c, InnerLink::Ip, &p);
    let at = udp_payload_offset(&p);
    assert_eq!(p[at] & 0x20, 0x20, "the K bit is set");
    assert_eq!(&p[at + 4..at + 8], &77u32.to_be_bytes());
    p[at + 4..at + 8].copy_from_slice(&78u32.to_be_bytes());
    fix_udp_checksum(&mut p);
    decap_drop(&c, InnerLink::Ip, &[p], DropReason::UnknownKey, "gre-decap");
}

#[test]
fn remote_checksum_off() {
    // The peer sends RCO; this end did not opt in (Linux `remcsumrx` off).
    let (ca, mut cb) = pair(TunnelKind::Vxlan, false, ChecksumMode::Remote);
    cb[0].remote_checksum_rx = false;
    let p = rco_vxlan(&ca);
    decap_drop(
        &cb,
        InnerLink::Ethernet,
        &[p],
        DropReason::RemoteChecksumOff,
        "vxlan-decap",
    );
}

/// A VXLAN packet from A with RCO for an inner TCP checksum.
fn rco_vxlan(ca: &[TunnelConfig]) -> Vec<u8> {
    let (inner, cs) = make_partial(&frame(&tcp4(b"remote checksum", 7)), 14);
    let mut a = pipeline(ca, InnerLink::Ethernet);
    let mut pool = pool();
    let out = run_encap_with(&mut a, &mut pool, &[(inner, cs)]);
    assert_balanced(&a);
    assert_no_leak(&pool);
    let p = out.packets.into_iter().next().expect("encapsulated");
    let at = udp_payload_offset(&p);
    assert_eq!(p[at + 1] & 0x20, 0x20, "RCO flag");
    p
}

#[test]
fn unknown_required_extension() {
    // 0xC1: comprehension required by every receiver, and unknown.
    let c = b_config(TunnelKind::Gtpu);
    let g = gtpu_gpdu_with_extension(0x1000, 0xc1, [0, 0], &tcp4(b"x", 1));
    let p = udp_packet(A4, B4, 2152, 2152, &g);
    decap_drop(
        &c,
        InnerLink::Ip,
        &[p],
        DropReason::UnknownRequiredExtension,
        "gtpu-decap",
    );
    // A known required one (PDCP PDU number, 0xC0) passes.
    let g = gtpu_gpdu_with_extension(0x1000, 0xc0, [0, 5], &tcp4(b"x", 1));
    let out = decap_fresh(&c, InnerLink::Ip, &[udp_packet(A4, B4, 2152, 2152, &g)]);
    assert_eq!(out.packets, vec![tcp4(b"x", 1)]);
}

#[test]
fn bad_version() {
    let c = b_config(TunnelKind::Gtpu);
    let mut g = gtpu_gpdu(0x1000, &tcp4(b"x", 1));
    g[0] = 0x50; // version 2, PT
    decap_drop(
        &c,
        InnerLink::Ip,
        &[udp_packet(A4, B4, 2152, 2152, &g)],
        DropReason::BadVersion,
        "gtpu-decap",
    );
}

#[test]
fn gtpu_signalling() {
    let c = b_config(TunnelKind::Gtpu);
    let mut end_marker = gtpu_gpdu(0x1000, &[]);
    end_marker[1] = 254;
    let p = udp_packet(A4, B4, 2152, 2152, &end_marker);
    let out = decap_drop(
        &c,
        InnerLink::Ip,
        &[p],
        DropReason::GtpuSignalling,
        "gtpu-decap",
    );
    assert!(out.replies.is_empty());
}

#[test]
fn unknown_critical_option() {
    let c = b_config(TunnelKind::Geneve);
    let mut g = vec![0x01, 0x40, 0x65, 0x58, 0, 0x10, 0x92, 0];
    assert_eq!(4242, 0x1092);
    g.extend_from_slice(&[0x01, 0x02, 0x80, 0x00]); // class 0x0102, critical type 0x80
    g.extend_from_slice(&frame(&tcp4(b"x", 1)));
    let p = udp_packet(A4, B4, 50000, 6081, &g);
    decap_drop(
        &c,
        InnerLink::Ethernet,
        &[p],
        DropReason::UnknownCriticalOption,
        "geneve-decap",
    );
    // The same option without the critical bit is skipped.
    g[1] = 0;
    g[10] = 0x00;
    let out = decap_fresh(
        &c,
        InnerLink::Ethernet,
        &[udp_packet(A4, B4, 50000, 6081, &g)],
    );
    assert_eq!(out.packets, vec![frame(&tcp4(b"x", 1))]);
}

#[test]
fn unsupported() {
    // Geneve carrying IPv4 directly (protocol 0x0800): tep's Geneve carries
    // Ethernet only.
    let c = b_config(TunnelKind::Geneve);
    let mut g = vec![0x00, 0x00, 0x08, 0x00, 0, 0x10, 0x92, 0];
    g.extend_from_slice(&tcp4(b"x", 1));
    let p = udp_packet(A4, B4, 50000, 6081, &g);
    decap_drop(
        &c,
        InnerLink::Ethernet,
        &[p],
        DropReason::Unsupported,
        "geneve-decap",
    );
}

#[test]
fn gue_control() {
    let c = b_config(TunnelKind::Gue);
    let g = [0x20, 0x00, 0x00, 0x00, 1, 2, 3, 4];
    let p = udp_packet(A4, B4, 50000, 6080, &g);
    decap_drop(&c, InnerLink::Ip, &[p], DropReason::GueControl, "gue-decap");
}

#[test]
fn geneve_control() {
    // RFC 8926 §3.4: the O bit marks a control message, never forwarded.
    let (ca, cb) = pair(TunnelKind::Geneve, false, ChecksumMode::Full);
    let good = encap_one(&ca, InnerLink::Ethernet, &inner_for(TunnelKind::Geneve));
    let mut p = good.clone();
    let at = udp_payload_offset(&p);
    p[at + 1] |= 0x80;
    fix_udp_checksum(&mut p);
    decap_drop(
        &cb,
        InnerLink::Ethernet,
        &[good, p],
        DropReason::GeneveControl,
        "geneve-decap",
    );
}

#[test]
fn malformed() {
    // FOU-IPIP says "IPv4" by its port alone; an IPv6 packet there is
    // malformed.
    let c = b_config(TunnelKind::FouIpip);
    let p = udp_packet(A4, B4, 50000, 5555, &udp6(b"v6 on the v4 port", 1));
    decap_drop(
        &c,
        InnerLink::Ip,
        &[p],
        DropReason::Malformed,
        "fou-ipip-decap",
    );
}

// ----------------------------------------------------- udp-checksum-verify

#[test]
fn bad_checksum() {
    let (c, mut p) = vxlan();
    let n = p.len();
    p[n - 1] ^= 0x01;
    decap_drop(
        &c,
        InnerLink::Ethernet,
        &[p],
        DropReason::BadChecksum,
        "udp-checksum-verify",
    );
    // A GRE checksum (RFC 2784 C bit) that does not verify, in a datagram
    // whose UDP checksum does: counted where GRE is parsed.
    let c = b_config(TunnelKind::GreInUdp);
    let inner = tcp4(b"gre with checksum", 1);
    let good = udp_packet(A4, B4, 50000, 4754, &gre_with_checksum(&inner));
    accepted(&c, InnerLink::Ip, &good);
    let mut g = gre_with_checksum(&inner);
    let n = g.len();
    g[n - 1] ^= 0x01;
    let p = udp_packet(A4, B4, 50000, 4754, &g);
    assert_eq!(outer_udp_ok(&p), Some(true));
    decap_drop(
        &c,
        InnerLink::Ip,
        &[p],
        DropReason::BadChecksum,
        "gre-decap",
    );
}

/// GRE with C and K (key 77) and a correct GRE checksum around `ip`.
fn gre_with_checksum(ip: &[u8]) -> Vec<u8> {
    let mut g = vec![0xa0, 0x00, 0x08, 0x00, 0, 0, 0, 0];
    g.extend_from_slice(&77u32.to_be_bytes());
    g.extend_from_slice(ip);
    let c = tep_csum::Sum::of(&g).checksum();
    g[4..6].copy_from_slice(&c.to_be_bytes());
    g
}

#[test]
fn zero_checksum() {
    // IPv6 outer with checksum 0 on a tunnel without zero_checksum_rx.
    let (ca, mut cb) = pair(TunnelKind::Vxlan, true, ChecksumMode::Zero);
    let p = encap_one(&ca, InnerLink::Ethernet, &inner_for(TunnelKind::Vxlan));
    assert_eq!(outer_udp_ok(&p), None, "zero checksum sent");
    accepted(&cb, InnerLink::Ethernet, &p);
    cb[0].zero_checksum_rx = false;
    decap_drop(
        &cb,
        InnerLink::Ethernet,
        &[p],
        DropReason::ZeroChecksum,
        "udp-checksum-verify",
    );
}

#[test]
fn bad_remote_checksum() {
    // RCO with a zero outer checksum: nothing protects the inner checksum
    // the receiver would derive.
    let (ca, cb) = pair(TunnelKind::Vxlan, false, ChecksumMode::Remote);
    let mut p = rco_vxlan(&ca);
    accepted(&cb, InnerLink::Ethernet, &p);
    zero_udp_checksum(&mut p);
    decap_drop(
        &cb,
        InnerLink::Ethernet,
        &[p],
        DropReason::BadRemoteChecksum,
        "udp-checksum-verify",
    );
    // GUE RCO whose checksum field lies before the region it covers, and
    // one at an odd offset: neither can be applied.
    let (_, cb) = pair(TunnelKind::Gue, false, ChecksumMode::Remote);
    for (start, offset) in [(20u16, 10u16), (20, 37)] {
        let mut g = vec![0x02, 4, 0x00, 0x01, 0x80, 0, 0, 0];
        g.extend_from_slice(&start.to_be_bytes());
        g.extend_from_slice(&offset.to_be_bytes());
        g.extend_from_slice(&tcp4(b"some payload bytes", 1));
        let p = udp_packet(A4, B4, 50000, 6080, &g);
        decap_drop(
            &cb,
            InnerLink::Ip,
            &[p],
            DropReason::BadRemoteChecksum,
            "udp-checksum-verify",
        );
    }
}

/// An RCO offset past the end of the packet is bad_remote_checksum (as
/// DropReason documents it), not the parser's bad_length: counted on
/// vxlan-decap, where the header is parsed.
#[test]
fn bad_remote_checksum_offset_past_the_end() {
    let (c, mut p) = vxlan();
    let at = udp_payload_offset(&p);
    p[at + 1] |= 0x20; // RCO
    p[at + 7] = 127; // start 254, TCP: offset 270, past the 67-byte frame
    fix_udp_checksum(&mut p);
    decap_drop(
        &c,
        InnerLink::Ethernet,
        &[p],
        DropReason::BadRemoteChecksum,
        "vxlan-decap",
    );
}

/// An RCO checksum field inside the inner headers (here VXLAN's start 0,
/// TCP offset 16: the inner IPv4 total length) would overwrite what decap
/// parsed and checked; found by the decap fuzz target (seeds/decap/crash-2).
#[test]
fn bad_remote_checksum_field_in_the_inner_headers() {
    let (c, mut p) = vxlan();
    let at = udp_payload_offset(&p);
    accepted(&c, InnerLink::Ethernet, &p);
    p[at + 1] |= 0x20; // RCO
    p[at + 7] = 0; // start 0 (the inner Ethernet header), TCP: offset 16
    fix_udp_checksum(&mut p);
    decap_drop(
        &c,
        InnerLink::Ethernet,
        &[p],
        DropReason::BadRemoteChecksum,
        "udp-checksum-verify",
    );
}

// ------------------------------------------------------------ decap-output

#[test]
fn ecn_ce_not_ect() {
    // RFC 6040 §4.2: CE outside a Not-ECT inner packet must be dropped (the
    // congestion signal cannot be passed on).
    let c = b_config(TunnelKind::GreInUdp);
    let mut inner = tcp4(b"not ect", 1);
    set_tos(&mut inner, 0, 0x00);
    let mut p = encap_one(&a_config(TunnelKind::GreInUdp), InnerLink::Ip, &inner);
    assert_eq!(p[1] & 3, 0, "outer Not-ECT, copied");
    accepted(&c, InnerLink::Ip, &p);
    set_tos(&mut p, 0, 0x03);
    decap_drop(
        &c,
        InnerLink::Ip,
        &[p],
        DropReason::EcnCeNotEct,
        "decap-output",
    );
}

// ------------------------------------------------------------------ encap

/// A partial checksum whose field lies in the Ethernet padding after the
/// inner IP packet (a virtio-net header pointing there) is malformed in
/// `remote` mode too: sent as RCO, no receiver could complete it (it
/// completes to the IP packet's end). Found by the encap fuzz target.
#[test]
fn remote_checksum_field_past_the_inner_ip_packet() {
    let (ca, _) = pair(TunnelKind::Vxlan, false, ChecksumMode::Remote);
    let good = make_partial(&frame(&tcp4(b"remote checksum", 7)), 14);
    let mut padded = frame(&tcp4(b"remote checksum", 7));
    padded.extend_from_slice(&[0u8; 64]);
    // Even, as RCO encodes it: past the IP packet's end (byte 69).
    let start = 70;
    assert!(14 + 20 + 20 + 15 < start && start + 18 < padded.len());
    let bad = ChecksumState::Partial {
        start: start as u16,
        offset: (start + 16) as u16,
    };
    let mut a = pipeline(&ca, InnerLink::Ethernet);
    let mut pool = pool();
    let out = run_encap_with(&mut a, &mut pool, &[good, (padded, bad)]);
    assert_eq!(out.packets.len(), 1, "{}", a.runtime().report());
    assert_dropped_once(&a, DropReason::Malformed, "inner-checksum");
    assert_balanced(&a);
    assert_no_leak(&pool);
}

#[test]
fn no_route() {
    let a = a_config(TunnelKind::GreInUdp);
    let lost = tcp4_between([10, 0, 0, 1], [11, 0, 0, 1], b"nowhere", 1);
    encap_drop(
        &a,
        InnerLink::Ip,
        &[tcp4(b"ok", 1), lost],
        DropReason::NoRoute,
        "tunnel-lookup",
    );
}

#[test]
fn too_big() {
    // A 65500-byte inner IPv4 packet in GRE-in-UDP with a key (8 bytes)
    // over IPv4: 65500 + 8 + 8 + 20 > 65535.
    let a = a_config(TunnelKind::GreInUdp);
    let big = tcp4(&vec![0xab; 65500 - 40], 1);
    assert_eq!(big.len(), 65500);
    encap_drop(
        &a,
        InnerLink::Ip,
        &[tcp4(b"ok", 1), big],
        DropReason::TooBig,
        "ip-udp-encap",
    );
}

#[test]
fn no_buffer() {
    // An Echo Response is written into the request's buffer; with buffers of
    // exactly the request's 40 bytes (IPv4 + UDP + GTP-U with sequence) the
    // 42-byte response does not fit.
    let c = b_config(TunnelKind::Gtpu);
    let req = udp_packet(A4, B4, 2152, 2152, &gtpu_echo_request(7));
    assert_eq!(req.len(), 40);
    let mut pool = Pool::new(4, 40);
    let mut b = pipeline(&c, InnerLink::Ip);
    let out = run_decap(&mut b, &mut pool, &[req], 0);
    assert!(out.replies.is_empty() && out.packets.is_empty());
    assert_dropped_once(&b, DropReason::NoBuffer, "gtpu-decap");
    assert_balanced(&b);
    assert_no_leak(&pool);

    // GSO: a super-packet of 5 segments in a pool with no buffer to spare.
    let a = a_config(TunnelKind::GreInUdp);
    let mut pool = Pool::new(1, SUPER_PACKET_ROOM);
    let mut p = pipeline(&a, InnerLink::Ip);
    let (sp, cs) = make_partial(&tcp4(&[3u8; 5000], 9), 0);
    let id = pool.alloc().unwrap();
    assert!(pool.fill(id, &sp));
    pool.meta_mut(id).csum = cs;
    pool.meta_mut(id).gso = Some(Gso {
        kind: GsoKind::Tcp4,
        segment_size: 1000,
    });
    let mut v = PacketVector::new();
    v.push(id).unwrap();
    let mut sent = 0;
    p.encap(&mut pool, &mut v, &mut |_, pool, v| {
        for &id in v.as_slice() {
            sent += 1;
            pool.free(id);
        }
    });
    assert_eq!(sent, 0);
    assert_dropped_once(&p, DropReason::NoBuffer, "gso-segment");
    assert_balanced(&p);
    assert_no_leak(&pool);
}

/// A UDP/IPv6 super-packet of five 1000-byte segments from the TUN with
/// extension headers `headers` before UDP, encapsulated on A (GUE).
fn encap_super6(headers: &[(u8, Vec<u8>)]) -> (Pipeline<ManualClock>, usize) {
    let (sp, cs) = make_partial(&udp6(&[3u8; 5000], 9), 0);
    let sp = with_extensions(&sp, headers, 17);
    let shift = (sp.len() - 5048) as u16;
    let ChecksumState::Partial { start, offset } = cs else {
        unreachable!()
    };
    let mut pool = pool();
    let mut p = pipeline(&a_config(TunnelKind::Gue), InnerLink::Ip);
    let id = pool.alloc().unwrap();
    assert!(pool.fill(id, &sp));
    pool.meta_mut(id).csum = ChecksumState::Partial {
        start: start + shift,
        offset: offset + shift,
    };
    pool.meta_mut(id).gso = Some(Gso {
        kind: GsoKind::Udp,
        segment_size: 1000,
    });
    let mut v = PacketVector::new();
    v.push(id).unwrap();
    let mut sent = 0;
    p.encap(&mut pool, &mut v, &mut |_, pool, v| {
        for &id in v.as_slice() {
            sent += 1;
            pool.free(id);
        }
    });
    assert_balanced(&p);
    assert_no_leak(&pool);
    (p, sent)
}

/// Segmentation refuses an IPv6 super-packet it cannot cut right, and the
/// refusal is counted at `gso-segment` under its reason: a routing header
/// with segments left (the checksum covers the final destination, inside
/// the header) is `unsupported`, a first fragment is `fragment`. With no
/// segments left the same super-packet leaves as its five segments.
#[test]
fn gso_refusals_of_ipv6_extension_headers_are_counted() {
    let routing = |left: u8| (43, vec![0, 0, 4, left, 0, 0, 0, 0]);
    let (p, sent) = encap_super6(&[options_header(0), routing(0)]);
    assert_eq!((sent, p.drops_total()), (5, 0), "{}", p.runtime().report());
    for (headers, reason) in [
        (vec![options_header(0), routing(1)], DropReason::Unsupported),
        (vec![fragment_header(0, true)], DropReason::Fragment),
    ] {
        let (p, sent) = encap_super6(&headers);
        assert_eq!(sent, 0);
        assert_dropped_once(&p, reason, "gso-segment");
    }
}

// ------------------------------------------------- whole frames (gateway)

/// A router drops what it would forward with a TTL of 0: into a tunnel
/// (`ip-forward`) and out of one (`ip-rewrite`).
#[test]
fn ttl_expired() {
    use tep_dataplane::LinkHeader;
    let hop = LinkHeader {
        dst: [2, 0, 0, 0, 0, 2],
        src: [2, 0, 0, 0, 0, 1],
        vlan: None,
    };
    let mut last_hop = tcp4(b"ttl", 1000);
    last_hop[8] = 1;
    last_hop[10..12].fill(0);
    let c = tep_csum::Sum::of(&last_hop[..20]).checksum();
    last_hop[10..12].copy_from_slice(&c.to_be_bytes());
    let frames = [frame(&tcp4(b"ok", 1001)), frame(&last_hop)];
    let (ca, cb) = pair(TunnelKind::Gue, false, ChecksumMode::Full);
    let mut a = gateway(&ca);
    a.next_hops().set(ca[0].remote, Some(hop));
    // The way back to the sender, for the ICMP error (a router routes it).
    let sender = core::net::IpAddr::from(<[u8; 4]>::try_from(&last_hop[12..16]).unwrap());
    let back_hop = LinkHeader {
        dst: [2, 0, 0, 0, 0, 9],
        ..hop
    };
    a.next_hops().set(sender, Some(back_hop));
    let mut pool = pool();
    let out = run_encap(&mut a, &mut pool, &frames);
    assert_eq!(out.packets.len(), 1, "{}", a.runtime().report());
    assert_dropped_once(&a, DropReason::TtlExpired, "ip-forward");
    assert_balanced(&a);
    // ICMP Time Exceeded back out the inner side, to the sender's MAC.
    assert_eq!(out.replies.len(), 1);
    let e = &out.replies[0];
    assert_eq!(&e[..12], &[back_hop.dst, back_hop.src].concat()[..]);
    assert_eq!(&e[14 + 16..14 + 20], &last_hop[12..16], "to the sender");
    assert_eq!((e[14 + 9], e[34]), (1, 11), "ICMP time exceeded");
    assert_eq!(&e[42..], &last_hop[..], "quotes the packet");
    assert_eq!(a.counters().icmp_errors, 1);
    // A TTL of 2 crosses A and runs out at B.
    let mut two_hops = last_hop.clone();
    two_hops[8] = 2;
    two_hops[10..12].fill(0);
    let c = tep_csum::Sum::of(&two_hops[..20]).checksum();
    two_hops[10..12].copy_from_slice(&c.to_be_bytes());
    let out = run_encap(
        &mut a,
        &mut pool,
        &[frame(&tcp4(b"ok", 1001)), frame(&two_hops)],
    );
    let mut b = gateway(&cb);
    b.next_hops()
        .set(core::net::IpAddr::from([10, 9, 0, 1]), Some(hop));
    b.next_hops().set(cb[0].remote, Some(hop));
    let dec = run_decap(&mut b, &mut pool, &out.packets, 0);
    assert_eq!(dec.packets.len(), 1, "{}", b.runtime().report());
    assert_dropped_once(&b, DropReason::TtlExpired, "ip-rewrite");
    assert_balanced(&b);
    // Its Time Exceeded goes back through the tunnel, and A delivers it to
    // the sender.
    assert_eq!(dec.replies.len(), 1, "{}", b.runtime().report());
    assert_eq!(b.counters().icmp_errors, 1);
    let back = run_decap(&mut a, &mut pool, &dec.replies, 0);
    assert_eq!(back.packets.len(), 1, "{}", a.runtime().report());
    let e = &back.packets[0];
    assert_eq!(&e[14 + 16..14 + 20], &two_hops[12..16], "to the sender");
    assert_eq!((e[14 + 9], e[34]), (1, 11), "ICMP time exceeded");
    assert_no_leak(&pool);
}

// -------------------------------------------------------------- UPF sessions

#[test]
fn no_session() {
    let (mut c, mut p) = upf(false);
    let mut pool = pool();
    c.create(&example::session(1, false, false)).unwrap();
    settle(&mut c, &mut p, &mut pool);
    let out = run_encap(
        &mut p,
        &mut pool,
        &[inner(ue4(1), false, b"a"), inner(ue4(2), false, b"b")],
    );
    assert_eq!(out.packets.len(), 1);
    assert_dropped_once(&p, DropReason::NoSession, "session-lookup");
    assert_balanced(&p);
    assert_no_leak(&pool);
}

/// A UE address only another data network has: the packet came in on
/// that network's wrong device. Found once set to the right network.
#[test]
fn wrong_network() {
    let (mut c, mut p) = upf(false);
    let mut pool = pool();
    let mut s = example::session(1, false, false);
    s.network = 1;
    c.create(&s).unwrap();
    c.create(&example::session(2, false, false)).unwrap();
    settle(&mut c, &mut p, &mut pool);
    let packets = [inner(ue4(1), false, b"a"), inner(ue4(2), false, b"b")];
    let out = run_encap(&mut p, &mut pool, &packets);
    assert_eq!(out.packets.len(), 1);
    assert_dropped_once(&p, DropReason::WrongNetwork, "session-lookup");
    p.set_network(1);
    let out = run_encap(&mut p, &mut pool, &packets);
    assert_eq!(out.packets.len(), 1, "network 1 has UE 1, network 0 UE 2");
    assert_eq!(p.drops(DropReason::WrongNetwork), 2);
    assert_eq!(p.drops(DropReason::NoSession), 0);
    assert_balanced(&p);
    assert_no_leak(&pool);
}

#[test]
fn session_drop() {
    let (mut c, mut p) = upf(false);
    let mut pool = pool();
    let mut s = example::session(1, false, false);
    s.uplink = Action::Drop;
    s.downlink = Action::Drop;
    c.create(&s).unwrap();
    settle(&mut c, &mut p, &mut pool);
    let out = run_encap(&mut p, &mut pool, &[inner(ue4(1), false, b"a")]);
    assert!(out.packets.is_empty());
    let out = run_decap(
        &mut p,
        &mut pool,
        &[gpdu(false, 0x10001, None, &inner(ue4(1), true, b"b"))],
        0,
    );
    assert!(out.packets.is_empty());
    assert_eq!(
        drop_nodes(&p, DropReason::SessionDrop),
        [("session-lookup", 1), ("gtpu-decap", 1)]
    );
    assert_eq!(
        c.usage(0),
        Volume::default(),
        "dropped packets are not usage"
    );
    assert_balanced(&p);
    assert_no_leak(&pool);
}

#[test]
fn quota_exhausted() {
    // A session whose URR's quota ran out: the control plane sets both
    // actions so; each way a packet is dropped, apart from session_drop.
    let (mut c, mut p) = upf(false);
    let mut pool = pool();
    let mut s = example::session(1, false, false);
    s.uplink = Action::QuotaExhausted;
    s.downlink = Action::QuotaExhausted;
    c.create(&s).unwrap();
    settle(&mut c, &mut p, &mut pool);
    let out = run_encap(&mut p, &mut pool, &[inner(ue4(1), false, b"a")]);
    assert!(out.packets.is_empty());
    let out = run_decap(
        &mut p,
        &mut pool,
        &[gpdu(false, 0x10001, None, &inner(ue4(1), true, b"b"))],
        0,
    );
    assert!(out.packets.is_empty());
    assert_eq!(
        drop_nodes(&p, DropReason::QuotaExhausted),
        [("session-lookup", 1), ("gtpu-decap", 1)]
    );
    assert!(drop_nodes(&p, DropReason::SessionDrop).is_empty());
    assert_eq!(
        c.usage(0),
        Volume::default(),
        "dropped packets are not usage"
    );
    assert_balanced(&p);
    assert_no_leak(&pool);
}

#[test]
fn buffer_full() {
    let mut pool = pool();
    let (mut c, mut p, _, _) = buffering_session(&mut pool);
    // Four per session (common::upf): the fifth is dropped.
    let pkts: Vec<Vec<u8>> = (0..5u8).map(|k| inner(ue4(1), false, &[k; 8])).collect();
    let out = run_encap(&mut p, &mut pool, &pkts);
    assert!(out.packets.is_empty());
    assert_dropped_once(&p, DropReason::BufferFull, "session-lookup");
    assert_eq!(p.counters().buffered, 4);
    assert_balanced(&p);
    // The held packets go back to the pool with the session.
    c.remove(0).unwrap();
    settle(&mut c, &mut p, &mut pool);
    assert_no_leak(&pool);
}

#[test]
fn buffer_dropped() {
    let mut pool = pool();
    let (mut c, mut p, mut s, slot) = buffering_session(&mut pool);
    run_encap(&mut p, &mut pool, &[inner(ue4(1), false, b"held")]);
    // DROBU as the FAR forwards again: dropped, not sent.
    s.downlink = Action::Forward;
    c.modify(slot, &s, false).unwrap();
    c.drop_buffered(slot);
    let out = settle(&mut c, &mut p, &mut pool);
    assert!(out.packets.is_empty());
    assert_dropped_once(&p, DropReason::BufferDropped, "session-lookup");
    assert_balanced(&p);
    assert_no_leak(&pool);
}

#[test]
fn no_pdr() {
    // The session's only uplink PDR takes QFI 9: its TEID with QFI 8 is
    // the session's, no PDR's (and gets no Error Indication).
    let mut pool = pool();
    let (_c, mut p) = qfi9_session(&mut pool);
    let pkt = |qfi| gpdu(false, 0x10001, Some(qfi), &inner(ue4(1), true, b"x"));
    let out = run_decap(&mut p, &mut pool, &[pkt(9), pkt(8)], 0);
    assert_eq!(out.packets.len(), 1);
    assert!(out.replies.is_empty());
    assert_dropped_once(&p, DropReason::NoPdr, "gtpu-decap");
    assert_balanced(&p);
    assert_no_leak(&pool);
}

#[test]
fn no_pdr_match() {
    // The session's downlink rules take UDP to port 5000 only: a packet
    // to the UE's address on another port is the session's, no rule's.
    use tep_dataplane::session::rules::{FlowMatch, RuleSpec};
    let (mut c, mut p) = upf(false);
    let mut pool = pool();
    let mut spec = tep_dataplane::example::session(1, false, false);
    spec.rules.downlink = vec![RuleSpec {
        filters: vec![FlowMatch {
            ue_ports: vec![(5000, 5000)],
            ..Default::default()
        }],
        qfi_match: None,
        action: tep_dataplane::session::Action::Forward,
        peer: spec.peer,
        qfi: Some(9),
        mbr: None,
    }];
    c.create(&spec).unwrap();
    settle(&mut c, &mut p, &mut pool);
    let server = IpAddr::V4(Ipv4Addr::new(198, 51, 100, 1));
    let to = |port| udp_packet(server, ue4(1), 53, port, b"x");
    let out = run_encap(&mut p, &mut pool, &[to(5000), to(5001)]);
    assert_eq!(out.packets.len(), 1);
    assert_dropped_once(&p, DropReason::NoPdrMatch, "session-lookup");
    assert_balanced(&p);
    assert_no_leak(&pool);
}

#[test]
fn ue_source_spoofed() {
    // Session 1's TEID with an inner source that is UE 2's address: the
    // TEID is the session's, the sender is not its UE.
    let (mut c, mut p) = upf(false);
    let mut pool = pool();
    c.create(&example::session(1, false, false)).unwrap();
    settle(&mut c, &mut p, &mut pool);
    let pkt = |ue| gpdu(false, 0x10001, None, &inner(ue, true, b"x"));
    let out = run_decap(&mut p, &mut pool, &[pkt(ue4(1)), pkt(ue4(2))], 0);
    assert_eq!(out.packets.len(), 1);
    assert!(out.replies.is_empty());
    assert_dropped_once(&p, DropReason::UeSourceSpoofed, "gtpu-decap");
    assert_balanced(&p);
    assert_no_leak(&pool);
}

#[test]
fn mbr_exceeded() {
    // Session 1's uplink MBR is 1 Mbit/s, whose burst is 250 ms of it,
    // 31250 bytes: of 23 1428-byte packets at one instant the 23rd is
    // over the rate.
    let (mut c, mut p) = upf(false);
    let mut pool = pool();
    let mut s = example::session(1, false, false);
    s.mbr.uplink = Some(1_000_000);
    c.create(&s).unwrap();
    settle(&mut c, &mut p, &mut pool);
    let pkt = gpdu(false, 0x10001, None, &inner(ue4(1), true, &[0; 1400]));
    let out = run_decap(&mut p, &mut pool, &vec![pkt; 23], 1_000);
    assert_eq!(out.packets.len(), 22);
    assert!(out.replies.is_empty());
    assert_dropped_once(&p, DropReason::MbrExceeded, "gtpu-decap");
    assert_balanced(&p);
    assert_no_leak(&pool);
}

#[test]
fn gnb_source_mismatch() {
    // With the gNB check on, session 1's G-PDU from its gNB passes and the
    // same G-PDU from another N3 host does not.
    let (mut c, mut p) = upf(false);
    c.check_gnb_source(true);
    let mut pool = pool();
    c.create(&example::session(1, false, false)).unwrap();
    settle(&mut c, &mut p, &mut pool);
    let (n3, gnb) = addrs(false);
    let g = gtpu(0x10001, None, &inner(ue4(1), true, b"x"));
    let stranger = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 250));
    assert_ne!(stranger, gnb);
    let from = |src| udp_packet(src, n3, 2152, 2152, &g);
    let out = run_decap(&mut p, &mut pool, &[from(gnb), from(stranger)], 0);
    assert_eq!(out.packets.len(), 1);
    assert!(out.replies.is_empty());
    assert_dropped_once(&p, DropReason::GnbSourceMismatch, "gtpu-decap");
    assert_balanced(&p);
    assert_no_leak(&pool);
}

// ------------------------------------------------------------- vlan-input

#[test]
fn unknown_vlan() {
    // Gateway mode: blue is VLAN 100 on the inner side; a frame tagged
    // 300 is no network's (and no plain tunnel takes it).
    use tep_dataplane::config::NetworkSettings;
    use tep_dataplane::overlay::Overlay;
    let s = NetworkSettings {
        vlan: Some(100),
        flood: vec![IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2))],
        ..NetworkSettings::default()
    };
    let local = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
    let config = [TunnelConfig::network("blue", TunnelKind::Vxlan, local, s)];
    let mut p = pipeline(&config, InnerLink::Ethernet);
    p.attach_overlay(std::sync::Arc::new(Overlay::new(&config, 64, 8).unwrap()));
    assert!(p.attach_vlans(&[]));
    let mut pool = pool();
    let frame = |tci: u16| {
        let mut f = [[0xff; 6], [2, 0, 0, 0, 0, 1]].concat();
        f.extend_from_slice(&[0x81, 0, (tci >> 8) as u8, tci as u8, 0x88, 0xb5]);
        f.extend_from_slice(&[0; 46]);
        f
    };
    let mut v = load(&mut pool, &[frame(100), frame(300)]);
    let mut sent = 0;
    p.encap_tagged(&mut pool, &mut v, &mut |_, pool, v| {
        sent += v.len();
        v.as_slice().iter().for_each(|&id| pool.free(id));
        v.clear();
    });
    assert_eq!(sent, 1, "blue's frame, flooded to its one peer");
    assert_dropped_once(&p, DropReason::UnknownVlan, "vlan-input");
    let c = p.counters();
    assert_eq!(c.encap_in + c.flood_copies, c.encap_out + p.drops_total());
    assert_no_leak(&pool);
}

// ------------------------------------------------------------- fdb-lookup

#[test]
fn local_mac() {
    // Host 02::1 spoke from blue's local side (learned local); a frame to
    // it from that side again (a bridge flooding what it does not know)
    // stays out of the overlay.
    use tep_dataplane::config::NetworkSettings;
    use tep_dataplane::overlay::Overlay;
    let s = NetworkSettings {
        flood: vec![IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2))],
        ..NetworkSettings::default()
    };
    let local = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
    let config = [TunnelConfig::network("blue", TunnelKind::Vxlan, local, s)];
    let mut p = pipeline(&config, InnerLink::Ethernet);
    p.attach_overlay(std::sync::Arc::new(Overlay::new(&config, 64, 8).unwrap()));
    let mut pool = pool();
    let frame = |dst: [u8; 6], src: [u8; 6]| {
        let mut f = [dst, src].concat();
        f.extend_from_slice(&[0x88, 0xb5]);
        f.extend_from_slice(&[0; 46]);
        f
    };
    let mut v = load(
        &mut pool,
        &[
            frame([0xff; 6], [2, 0, 0, 0, 0, 1]),
            frame([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]),
        ],
    );
    let mut sent = 0;
    p.encap_into(
        0,
        InnerLink::Ethernet,
        &mut pool,
        &mut v,
        &mut |_, pool, v| {
            sent += v.len();
            v.as_slice().iter().for_each(|&id| pool.free(id));
            v.clear();
        },
    );
    assert_eq!(sent, 1, "the broadcast, to blue's one peer");
    assert_dropped_once(&p, DropReason::LocalMac, "fdb-lookup");
    assert_balanced(&p);
    assert_no_leak(&pool);
}

// ----------------------------------------------------------------- the list

/// Every reason the pipeline drops for has a `#[test] fn <reason name>()`
/// in this file, or is in `UNREACHABLE` with why — not both. The reasons
/// only the I/O layer counts (`DropReason::IO`, but `no_buffer`, which the
/// pipeline counts too) are host mode's, counted and tested in crates/tep.
#[test]
fn every_reason_has_a_test() {
    let source = include_str!("drops.rs");
    let mut missing = Vec::new();
    let io_only = |r: DropReason| DropReason::IO.contains(&r) && r != DropReason::NoBuffer;
    for &r in DropReason::ALL.iter().filter(|&&r| !io_only(r)) {
        let tested = source.contains(&format!("#[test]\nfn {}() {{", r.name()));
        let unreachable = UNREACHABLE.iter().any(|&(u, _)| u == r);
        assert!(
            !(tested && unreachable),
            "{r} is tested and listed unreachable"
        );
        if !tested && !unreachable {
            missing.push(r.name());
        }
    }
    assert!(
        missing.is_empty(),
        "drop reasons without a test: {missing:?}"
    );
}

/// Drops of packets whose tunnel was known are also counted under that
/// tunnel (what `show tunnels` and the per-tunnel metric report); drops
/// before a tunnel is found are not.
#[test]
fn drops_are_counted_per_tunnel_once_the_tunnel_is_known() {
    use tep_dataplane::tunnel_drops;
    let rows = |nodes: &[tep_dataplane::NodeStats]| tunnel_drops(nodes, 1)[0];
    // Decap: a bad checksum is found after the VNI named the tunnel.
    let (c, good) = vxlan();
    let mut bad = good.clone();
    let n = bad.len();
    bad[n - 1] ^= 0x01;
    let mut unknown = good.clone();
    let at = udp_payload_offset(&unknown);
    unknown[at + 4..at + 7].copy_from_slice(&[0, 0x10, 0x93]);
    fix_udp_checksum(&mut unknown);
    let mut b = pipeline(&c, InnerLink::Ethernet);
    let mut pool = pool();
    let out = run_decap(&mut b, &mut pool, &[good, bad, unknown], 0);
    assert_eq!(out.packets.len(), 1);
    let row = rows(b.runtime().nodes());
    assert_eq!(row[DropReason::BadChecksum], 1, "{}", b.runtime().report());
    assert_eq!(row[DropReason::UnknownVni], 0, "no tunnel has that VNI");
    assert_eq!(row.total(), 1);
    assert_eq!(b.drops_total(), 2);
    // Encap: too big for the tunnel it was routed to; no route: no tunnel.
    let a = a_config(TunnelKind::GreInUdp);
    let big = tcp4(&vec![0xab; 65500 - 40], 1);
    let lost = tcp4_between([10, 0, 0, 1], [11, 0, 0, 1], b"nowhere", 1);
    let mut p = pipeline(&a, InnerLink::Ip);
    let out = run_encap(&mut p, &mut pool, &[tcp4(b"ok", 1), big, lost]);
    assert_eq!(out.packets.len(), 1);
    let row = rows(p.runtime().nodes());
    assert_eq!(row[DropReason::TooBig], 1, "{}", p.runtime().report());
    assert_eq!(row.total(), 1, "no_route has no tunnel");
    assert_eq!(p.drops_total(), 2);
    assert_no_leak(&pool);
}
