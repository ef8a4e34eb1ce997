//! Encap on one end, decap on the other, for every kind × outer family ×
//! checksum mode: the inner packet comes back byte for byte.

mod common;
use common::*;
use proptest::prelude::*;
use tep_dataplane::config::ChecksumMode;
use tep_dataplane::ChecksumState;
use tep_dataplane::DropReason;
use tep_dataplane::InnerLink;
use tep_dataplane::TunnelKind;

#[test]
fn every_kind_family_and_mode_round_trips() {
    let mut cases = 0;
    for kind in TunnelKind::ALL {
        for v6 in [false, true] {
            for mode in tep_dataplane::example::checksum_modes(kind) {
                let (ca, cb) = pair(kind, v6, mode);
                let link = kind.link();
                let mut a = pipeline(&ca, link);
                let mut b = pipeline(&cb, link);
                let mut pool = pool();
                let inner: Vec<Vec<u8>> = match kind {
                    TunnelKind::FouSit => vec![udp6(b"hello", 1000), udp6(&[7; 1400], 1001)],
                    TunnelKind::FouIpip => vec![tcp4(b"hello", 1000), tcp4(&[7; 1400], 1001)],
                    _ => vec![tcp4(b"hello", 1000), udp6(&[7; 1400], 1001)],
                };
                let inner: Vec<Vec<u8>> = if kind.carries_ethernet() {
                    inner.iter().map(|p| frame(p)).collect()
                } else {
                    inner
                };
                let enc = run_encap(&mut a, &mut pool, &inner);
                let what = format!("{kind} v6={v6} mode={mode}");
                assert_eq!(
                    enc.packets.len(),
                    inner.len(),
                    "{what}: encap drops {:?}",
                    a.runtime().report()
                );
                for (p, cs) in enc.packets.iter().zip(&enc.csum) {
                    match mode {
                        ChecksumMode::Zero => assert_eq!(outer_udp_ok(p), None, "{what}"),
                        ChecksumMode::Offload => {
                            assert!(matches!(cs, ChecksumState::Partial { .. }), "{what}");
                        }
                        _ => assert_eq!(outer_udp_ok(p), Some(true), "{what}"),
                    }
                }
                // Offload: the I/O layer would finish the checksum; do it.
                let wire: Vec<Vec<u8>> = enc
                    .packets
                    .iter()
                    .zip(&enc.csum)
                    .map(|(p, cs)| {
                        let mut p = p.clone();
                        if let ChecksumState::Partial { start, offset } = *cs {
                            let c = tep_csum::Sum::of(&p[usize::from(start)..]).checksum();
                            let o = usize::from(offset);
                            p[o..o + 2].copy_from_slice(&c.to_be_bytes());
                            assert_eq!(outer_udp_ok(&p), Some(true), "{what}");
                        }
                        p
                    })
                    .collect();
                let dec = run_decap(&mut b, &mut pool, &wire, 0);
                assert_eq!(dec.packets, inner, "{what}: {}", b.runtime().report());
                for cs in &dec.csum {
                    let expect = if mode == ChecksumMode::Zero {
                        ChecksumState::None
                    } else {
                        ChecksumState::Verified
                    };
                    assert_eq!(*cs, expect, "{what}");
                }
                assert_eq!(pool.available(), pool.capacity(), "{what}: leaked buffers");
                assert_balanced(&a);
                assert_balanced(&b);
                assert_eq!(a.counters().encap_out, inner.len() as u64, "{what}");
                assert_eq!(b.counters().decap_out, inner.len() as u64, "{what}");
                cases += 1;
            }
        }
    }
    assert_eq!(cases, TunnelKind::ALL.len() * 2 * 4 + 2 * 2);
}

fn kind_strategy() -> impl Strategy<Value = TunnelKind> {
    proptest::sample::select(TunnelKind::ALL.to_vec())
}

fn mode_strategy() -> impl Strategy<Value = ChecksumMode> {
    proptest::sample::select(ChecksumMode::ALL.to_vec())
}

/// Encapsulates `inner` on A, finishes an offloaded outer checksum as the
/// NIC would, decapsulates on B: returns what B delivered.
fn round_trip(kind: TunnelKind, v6: bool, mode: ChecksumMode, inner: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let (ca, cb) = pair(kind, v6, mode);
    let link = kind.link();
    let mut a = pipeline(&ca, link);
    let mut b = pipeline(&cb, link);
    let mut pool = pool();
    let enc = run_encap(&mut a, &mut pool, inner);
    let wire: Vec<Vec<u8>> = enc
        .packets
        .iter()
        .zip(&enc.csum)
        .map(|(p, cs)| complete_offload(p, *cs))
        .collect();
    let dec = run_decap(&mut b, &mut pool, &wire, 0);
    assert_balanced(&a);
    assert_balanced(&b);
    assert_no_leak(&pool);
    dec.packets
}

proptest! {
    // Kind × mode × family × up to eight packets of many fields each: a
    // case is cheap (tens of microseconds), so many of them.
    #![proptest_config(ProptestConfig::with_cases(2048))]

    /// Any kind, checksum mode and outer family, and a vector of inner
    /// packets of any shape (TCP or UDP, IPv4 or IPv6 where the kind
    /// carries it, any length and header fields): encap then decap gives
    /// back every inner packet byte for byte, in order.
    #[test]
    fn random_round_trips(
        kind in kind_strategy(),
        mode in mode_strategy(),
        v6 in any::<bool>(),
        packets in prop::collection::vec(inner_strategy(), 1..=8),
    ) {
        let mode = tep_dataplane::example::usable_mode(kind, mode);
        let inner: Vec<Vec<u8>> = packets
            .iter()
            .map(|p| {
                let ip = p.for_kind(kind).bytes();
                if kind.carries_ethernet() { frame(&ip) } else { ip }
            })
            .collect();
        let got = round_trip(kind, v6, mode, &inner);
        prop_assert_eq!(got, inner, "{} v6={} mode={}", kind, v6, mode);
    }
}

/// Appends `n` bytes to the UDP datagram of an outer packet (IP and UDP
/// lengths and checksums fixed): padding after the inner packet.
fn pad_datagram(p: &[u8], n: usize) -> Vec<u8> {
    let mut q = p.to_vec();
    q.extend(std::iter::repeat_n(0xee, n));
    let l4 = l4_offset(&q);
    if q[0] >> 4 == 4 {
        let total = q.len() as u16;
        q[2..4].copy_from_slice(&total.to_be_bytes());
        fix_ip_checksum(&mut q);
    } else {
        let plen = (q.len() - 40) as u16;
        q[4..6].copy_from_slice(&plen.to_be_bytes());
    }
    let ulen = (q.len() - l4) as u16;
    q[l4 + 4..l4 + 6].copy_from_slice(&ulen.to_be_bytes());
    fix_udp_checksum(&mut q);
    q
}

/// Bytes after the inner IP packet inside a valid UDP datagram are cut
/// (as Linux's ip_rcv trims to the IP length), after the outer checksum
/// was verified over them (once cut first, a valid packet was counted as
/// bad_checksum).
#[test]
fn bytes_after_the_inner_packet_are_cut() {
    for kind in [
        TunnelKind::GreInUdp,
        TunnelKind::Gue,
        TunnelKind::FouIpip,
        TunnelKind::FouSit,
        TunnelKind::FouGre,
        TunnelKind::GueGre,
    ] {
        for v6 in [false, true] {
            let (ca, cb) = pair(kind, v6, ChecksumMode::Full);
            let inner = inner_for(kind);
            let p = pad_datagram(&encap_one(&ca, kind.link(), &inner), 4);
            assert_eq!(outer_udp_ok(&p), Some(true));
            let mut b = pipeline(&cb, kind.link());
            let mut pool = pool();
            let out = run_decap(&mut b, &mut pool, &[p], 0);
            assert_eq!(
                out.packets,
                vec![inner],
                "{kind} v6={v6}: {}",
                b.runtime().report()
            );
            assert_balanced(&b);
            assert_no_leak(&pool);
        }
    }
}

/// Ethernet frames keep their bytes: padding after the inner IP packet is
/// part of the frame (an L2 tunnel delivers the frame as sent).
#[test]
fn l2_frames_keep_their_padding() {
    for kind in [TunnelKind::Vxlan, TunnelKind::Geneve] {
        let (ca, cb) = pair(kind, false, ChecksumMode::Full);
        let mut f = frame(&tcp4(b"x", 1));
        f.extend_from_slice(&[0; 4]);
        let p = encap_one(&ca, InnerLink::Ethernet, &f);
        let out = decap_fresh(&cb, InnerLink::Ethernet, &[p]);
        assert_eq!(out.packets, vec![f], "{kind}");
    }
}

/// LCO over a padded frame: the outer checksum covers the padding after
/// the inner IP packet, which the inner checksum does not vouch for, so
/// it is summed in full (found by the encap fuzz target,
/// fuzz/seeds/encap/crash-lco-padding); the peer accepts it.
#[test]
fn lco_of_a_padded_frame_sums_the_padding() {
    for kind in [TunnelKind::Vxlan, TunnelKind::Geneve] {
        let (ca, cb) = pair(kind, false, ChecksumMode::Lco);
        let mut f = frame(&tcp4(b"lco", 1));
        f.extend_from_slice(&[0x5a; 21]);
        let p = encap_one(&ca, InnerLink::Ethernet, &f);
        assert_eq!(outer_udp_ok(&p), Some(true), "{kind}");
        let out = decap_fresh(&cb, InnerLink::Ethernet, &[p]);
        assert_eq!(out.packets, vec![f], "{kind}");
    }
}

/// RFC 6040 §4.2 (normal mode): the outer ECN field on decapsulation. CE
/// outside marks an ECN-capable inner packet CE (IPv4 header checksum
/// updated), ECT(1) outside ECT(0) inside gives ECT(1), Not-ECT outside
/// changes nothing. Encap copies the inner ECN out.
#[test]
fn ecn_is_combined_on_decapsulation() {
    // (inner ECN, outer ECN set on the wire, inner ECN delivered)
    let cases = [
        (2u8, 3u8, 3u8),
        (1, 3, 3),
        (2, 1, 1),
        (1, 2, 1),
        (2, 0, 2),
        (3, 2, 3),
        (0, 1, 0),
        (0, 2, 0),
    ];
    for v6 in [false, true] {
        for (i, o, want) in cases {
            let kind = TunnelKind::GreInUdp;
            let (ca, cb) = pair(kind, v6, ChecksumMode::Full);
            for mut inner in [tcp4(b"ecn", 1), udp6(b"ecn", 1)] {
                set_tos(&mut inner, 0, 0xb8 | i);
                let mut p = encap_one(&ca, InnerLink::Ip, &inner);
                let outer_ecn = if v6 { (p[1] >> 4) & 3 } else { p[1] & 3 };
                assert_eq!(outer_ecn, i, "encap copies the inner ECN");
                let tos = if v6 {
                    ((p[0] & 0xf) << 4) | (p[1] >> 4)
                } else {
                    p[1]
                };
                set_tos(&mut p, 0, (tos & !3) | o);
                let out = decap_fresh(&cb, InnerLink::Ip, &[p]);
                let mut expect = inner.clone();
                set_tos(&mut expect, 0, 0xb8 | want);
                assert_eq!(out.packets, vec![expect], "inner {i} outer {o} v6={v6}");
            }
        }
    }
}

/// The outer IP header follows the tunnel's TTL, DSCP and DF settings;
/// ECN is the inner one; IPv6 carries a non-zero flow label.
#[test]
fn outer_headers_follow_the_tunnel_config() {
    use tep_dataplane::config::{DontFragment, Dscp, Ttl};
    // tcp4: TOS 0x02 (DSCP 0, ECT(0)), TTL 61, DF set.
    let mut inner = tcp4(b"fields", 1);
    set_tos(&mut inner, 0, (10 << 2) | 2);
    for (ttl, dscp, df, want_ttl, want_dscp, want_df) in [
        (
            Ttl::Fixed(33),
            Dscp::Fixed(46),
            DontFragment::Set,
            33,
            46,
            true,
        ),
        (
            Ttl::Inherit,
            Dscp::Inherit,
            DontFragment::Inherit,
            61,
            10,
            true,
        ),
        (
            Ttl::Fixed(64),
            Dscp::Inherit,
            DontFragment::Unset,
            64,
            10,
            false,
        ),
    ] {
        for v6 in [false, true] {
            let (mut ca, cb) = pair(TunnelKind::GreInUdp, v6, ChecksumMode::Full);
            let t = &mut ca[0];
            t.ttl = ttl;
            t.dscp = dscp;
            t.df = df;
            let p = encap_one(&ca, InnerLink::Ip, &inner);
            let what = format!("{ttl:?} {dscp:?} {df:?} v6={v6}");
            if v6 {
                let tc = ((p[0] & 0xf) << 4) | (p[1] >> 4);
                assert_eq!(tc, (want_dscp << 2) | 2, "{what}");
                assert_eq!(p[7], want_ttl, "{what}");
                let label = u32::from_be_bytes([0, p[1] & 0xf, p[2], p[3]]);
                assert_ne!(label, 0, "{what}: flow label");
            } else {
                assert_eq!(p[1], (want_dscp << 2) | 2, "{what}");
                assert_eq!(p[8], want_ttl, "{what}");
                assert_eq!(p[6] & 0x40 != 0, want_df, "{what}: DF");
                assert_eq!(p[6] & 0x20, 0, "{what}: MF");
                assert!(tep_wire::ipv4::Packet::new_checked(&p[..])
                    .unwrap()
                    .verify_checksum());
            }
            let out = decap_fresh(&cb, InnerLink::Ip, &[p]);
            assert_eq!(out.packets, vec![inner.clone()], "{what}");
        }
    }
    // Inherit copies DF either way: an inner packet without it gets an
    // outer packet without it (the cases above all have DF inside).
    let mut no_df = inner.clone();
    no_df[6] &= !0x40;
    fix_ip_checksum(&mut no_df);
    let (mut ca, cb) = pair(TunnelKind::GreInUdp, false, ChecksumMode::Full);
    ca[0].df = DontFragment::Inherit;
    let p = encap_one(&ca, InnerLink::Ip, &no_df);
    assert_eq!(
        p[6] & 0x40,
        0,
        "DF inherited from an inner packet without it"
    );
    let out = decap_fresh(&cb, InnerLink::Ip, &[p]);
    assert_eq!(out.packets, vec![no_df]);
}

/// Outer IPv4 options and an IPv6 hop-by-hop header are stepped over.
#[test]
fn outer_options_and_extension_headers_are_skipped() {
    let kind = TunnelKind::Vxlan;
    let inner = inner_for(kind);
    // IPv4 with a 4-byte option (NOP, NOP, NOP, EOL).
    let (ca, cb) = pair(kind, false, ChecksumMode::Full);
    let p = encap_one(&ca, InnerLink::Ethernet, &inner);
    let mut q = p[..20].to_vec();
    q.extend_from_slice(&[1, 1, 1, 0]);
    q.extend_from_slice(&p[20..]);
    q[0] = 0x46;
    let total = q.len() as u16;
    q[2..4].copy_from_slice(&total.to_be_bytes());
    fix_ip_checksum(&mut q);
    assert_eq!(outer_udp_ok(&q), Some(true));
    let out = decap_fresh(&cb, InnerLink::Ethernet, &[q]);
    assert_eq!(out.packets, vec![inner.clone()], "IPv4 options");
    // IPv6 with a hop-by-hop header (PadN) before UDP.
    let (ca, cb) = pair(kind, true, ChecksumMode::Full);
    let p = encap_one(&ca, InnerLink::Ethernet, &inner);
    let mut q = p[..40].to_vec();
    q.extend_from_slice(&[17, 0, 1, 4, 0, 0, 0, 0]);
    q.extend_from_slice(&p[40..]);
    q[6] = 0;
    let plen = (q.len() - 40) as u16;
    q[4..6].copy_from_slice(&plen.to_be_bytes());
    let out = decap_fresh(&cb, InnerLink::Ethernet, &[q]);
    assert_eq!(out.packets, vec![inner], "IPv6 hop-by-hop");
    assert_eq!(out.csum, vec![tep_dataplane::ChecksumState::Verified]);
}

/// GUE variant 1 (no GUE header: the UDP payload is the IP packet) is
/// accepted, as Linux accepts it.
#[test]
fn gue_variant_1_is_accepted() {
    for (v6, ip) in [(false, tcp4(b"direct", 1)), (true, udp6(b"direct", 1))] {
        let (_, cb) = pair(TunnelKind::Gue, v6, ChecksumMode::Full);
        let (a, b) = if v6 { (A6, B6) } else { (A4, B4) };
        let p = udp_packet(a, b, 50000, 6080, &ip);
        let out = decap_fresh(&cb, InnerLink::Ip, &[p]);
        assert_eq!(out.packets, vec![ip], "v6={v6}");
    }
}

/// RFC 8926 §3.4: a Geneve packet with O (control) set carries a control
/// message; "tunnel endpoints MUST NOT forward the payload". geneve-decap
/// ignores the bit and delivers it as data.
#[test]
fn geneve_control_packets_are_not_forwarded() {
    let (ca, cb) = pair(TunnelKind::Geneve, false, ChecksumMode::Full);
    let mut p = encap_one(&ca, InnerLink::Ethernet, &inner_for(TunnelKind::Geneve));
    let at = udp_payload_offset(&p);
    p[at + 1] |= 0x80;
    fix_udp_checksum(&mut p);
    let mut b = pipeline(&cb, InnerLink::Ethernet);
    let mut pool = pool();
    let out = run_decap(&mut b, &mut pool, &[p], 0);
    assert_balanced(&b);
    assert_no_leak(&pool);
    assert!(
        out.packets.is_empty(),
        "an OAM payload was delivered as data"
    );
    assert_eq!(b.drops_total(), 1);
}

/// The outer source port and the IPv6 flow label come from the inner flow:
/// every packet of a flow gets the same ones (no reordering across
/// underlay paths), and different flows spread over the range (ECMP and
/// receive-side scaling see them apart).
#[test]
fn flows_keep_their_source_port_and_label_and_spread() {
    const FLOWS: u16 = 64;
    for inner_v6 in [false, true] {
        let (mut ca, _) = pair(TunnelKind::GreInUdp, true, ChecksumMode::Full);
        ca[0].source_ports = (40000, 40999);
        let outer_of = |sport: u16, payload: &[u8]| {
            let inner = if inner_v6 {
                udp6(payload, sport)
            } else {
                tcp4(payload, sport)
            };
            let p = encap_one(&ca, InnerLink::Ip, &inner);
            let label = u32::from_be_bytes([0, p[1] & 0xf, p[2], p[3]]);
            (u16::from_be_bytes([p[40], p[41]]), label)
        };
        let mut ports = std::collections::BTreeSet::new();
        let mut labels = std::collections::BTreeSet::new();
        for flow in 0..FLOWS {
            let sport = 1000 + flow;
            let first = outer_of(sport, b"first");
            assert_eq!(outer_of(sport, b"second packet"), first, "flow {sport}");
            assert!((40000..=40999).contains(&first.0), "port {}", first.0);
            assert_ne!(first.1, 0, "a zero label says 'no label'");
            ports.insert(first.0);
            labels.insert(first.1);
        }
        // 64 flows over 1000 ports: a fair hash gives ~62 distinct ones.
        let what = format!(
            "inner v6 {inner_v6}: {} ports, {} labels",
            ports.len(),
            labels.len()
        );
        assert!(ports.len() >= 56 && labels.len() >= 56, "{what}");
    }
}

/// The transmit lookup's last-hit cache never hands a packet the previous
/// packet's tunnel when its destination differs.
#[test]
fn the_last_hit_cache_follows_each_destination() {
    use std::net::{IpAddr, Ipv4Addr};
    use tep_dataplane::config::IpPrefix;
    let (mut ca, _) = pair(TunnelKind::GreInUdp, false, ChecksumMode::Full);
    let mut second = ca[0].clone();
    second.name = "second".into();
    second.key = Some(78);
    ca[0].inner_prefixes = vec![IpPrefix {
        addr: IpAddr::V4(Ipv4Addr::new(10, 1, 0, 0)),
        len: 16,
    }];
    second.inner_prefixes = vec![IpPrefix {
        addr: IpAddr::V4(Ipv4Addr::new(10, 2, 0, 0)),
        len: 16,
    }];
    ca.push(second);
    let to = |net: u8, n: u16| tcp4_between([10, 9, 0, 1], [10, net, 0, 1], b"x", n);
    let nets = [1u8, 1, 2, 2, 1, 2, 1, 1, 2];
    let inner: Vec<Vec<u8>> = nets
        .iter()
        .enumerate()
        .map(|(i, &n)| to(n, i as u16))
        .collect();
    let mut a = pipeline(&ca, InnerLink::Ip);
    let mut pool = pool();
    let out = run_encap(&mut a, &mut pool, &inner);
    assert_eq!(out.packets.len(), nets.len());
    // GRE key (bytes 4..8 of the GRE header after outer IPv4 + UDP) names
    // the tunnel; the inner packet says where it was going.
    let mut seen = Vec::new();
    for p in &out.packets {
        let key = u32::from_be_bytes([p[32], p[33], p[34], p[35]]);
        let net = p[28 + 8 + 17];
        seen.push((net, key));
    }
    let want: Vec<(u8, u32)> = nets.iter().map(|&n| (n, 76 + u32::from(n))).collect();
    assert_eq!(seen, want);
    assert_balanced(&a);
}

/// GUE-GRE is Linux's layout for a GRE tunnel with `encap gue`
/// (net/ipv4/fou_core.c: gue_build_header, after gre_build_header): a GUE
/// data header with protocol 47 and no options, then the GRE header with
/// its key, then the inner packet. A GUE datagram of another protocol on
/// its port is dropped and counted, not passed on.
#[test]
fn gue_gre_is_linux_layout_and_other_gue_is_refused() {
    let (ca, cb) = pair(TunnelKind::GueGre, false, ChecksumMode::Full);
    let key = ca[0].key.expect("the example has a key");
    let mut a = pipeline(&ca, InnerLink::Ip);
    let mut b = pipeline(&cb, InnerLink::Ip);
    let mut pool = pool();
    for inner in [tcp4(b"hello", 1000), udp6(b"hello", 1001)] {
        let enc = run_encap(&mut a, &mut pool, std::slice::from_ref(&inner));
        let h = udp_payload(&enc.packets[0]);
        let ethertype: [u8; 2] = if inner[0] >> 4 == 6 {
            [0x86, 0xdd]
        } else {
            [0x08, 0x00]
        };
        let mut want = vec![0x00, 47, 0x00, 0x00, 0x20, 0x00];
        want.extend_from_slice(&ethertype);
        want.extend_from_slice(&key.to_be_bytes());
        assert_eq!(&h[..12], &want[..]);
        assert_eq!(&h[12..], &inner[..]);
    }
    let enc = run_encap(&mut a, &mut pool, &[tcp4(b"hello", 1000)]);
    let at = udp_payload_offset(&enc.packets[0]);
    // GUE protocol 4 (IPIP) on a GUE-GRE port.
    let mut ipip = enc.packets[0].clone();
    ipip[at + 1] = 4;
    fix_udp_checksum(&mut ipip);
    let dec = run_decap(&mut b, &mut pool, &[ipip], 0);
    assert!(dec.packets.is_empty());
    assert_dropped_once(&b, DropReason::Unsupported, "gue-gre-decap");
    assert_no_leak(&pool);
}

/// A tunnel whose remote port is not its local port: A listens on 7001 and
/// sends to 7002, B the other way round. Every datagram leaves for the
/// peer's port (the source port from the tunnel's range, not the local
/// port) and is taken by the peer; one sent to the sender's own port
/// meets no tunnel at the peer.
#[test]
fn the_remote_port_is_where_datagrams_go() {
    for kind in TunnelKind::ALL {
        for v6 in [false, true] {
            let (mut ca, mut cb) = pair(kind, v6, ChecksumMode::Full);
            (ca[0].local_port, ca[0].remote_port) = (7001, 7002);
            (cb[0].local_port, cb[0].remote_port) = (7002, 7001);
            let what = format!("{kind} v6={v6}");
            let inner = inner_for(kind);
            for (from, to, dport) in [(&ca, &cb, 7002u16), (&cb, &ca, 7001)] {
                let p = encap_one(from, kind.link(), &inner);
                let l4 = l4_offset(&p);
                let ports = (
                    u16::from_be_bytes([p[l4], p[l4 + 1]]),
                    u16::from_be_bytes([p[l4 + 2], p[l4 + 3]]),
                );
                assert_eq!(ports.1, dport, "{what}: destination port");
                let (lo, hi) = from[0].source_ports;
                assert!(
                    (lo..=hi).contains(&ports.0),
                    "{what}: source port {}",
                    ports.0
                );
                let out = decap_fresh(to, kind.link(), std::slice::from_ref(&p));
                assert_eq!(out.packets, vec![inner.clone()], "{what}");
                // The same datagram to the sender's own (local) port.
                let mut wrong = p.clone();
                let own = from[0].local_port;
                wrong[l4 + 2..l4 + 4].copy_from_slice(&own.to_be_bytes());
                fix_udp_checksum(&mut wrong);
                let mut b = pipeline(to, kind.link());
                let mut pool = pool();
                let out = run_decap(&mut b, &mut pool, &[wrong], 0);
                assert!(out.packets.is_empty(), "{what}");
                assert_dropped_once(&b, DropReason::UnknownPort, "udp-input");
                assert_balanced(&b);
            }
        }
    }
}
