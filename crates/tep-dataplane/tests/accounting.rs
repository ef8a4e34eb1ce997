//! The pipeline's books: mixed vectors of good and bad packets over every
//! kind at once, full vectors over many calls, answered and generated
//! GTP-U packets, GSO segments and GRO merges. Every packet in is a packet
//! out, a reply, a merge or one drop on one node (`assert_balanced`), and
//! every buffer comes back (`assert_no_leak`).

mod common;
use common::*;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use tep_dataplane::config::{check_tunnels, ChecksumMode, DataplaneConfig, IpPrefix, TunnelConfig};
use tep_dataplane::DropReason;
use tep_dataplane::InnerLink;
use tep_dataplane::ManualClock;
use tep_dataplane::TunnelKind;
use tep_dataplane::{ChecksumState, Gso, GsoKind, Pool, SUPER_PACKET_ROOM};
use tep_dataplane::{Output, Pipeline, PipelineOptions};
use tep_dataplane::{PacketVector, VECTOR_SIZE};
use tep_wire::ethernet::EthernetAddress;

/// The MAC of the L2 tunnel of kind index `k`.
fn mac(k: usize) -> [u8; 6] {
    [0x02, 0, 0, 0, 0x10, k as u8]
}

/// The UDP port of a kind in the all-kinds config: FOU kinds get their own.
fn port(kind: TunnelKind) -> u16 {
    match kind {
        TunnelKind::FouSit => 5556,
        TunnelKind::FouGre => 5557,
        // GUE's port is GUE's (the port picks the kind).
        TunnelKind::GueGre => 6082,
        k => k.default_port(),
    }
}

/// One tunnel of every kind between A and B (each direction's config):
/// L2 kinds by MAC, L3 kinds by 10.k.0.0/16 and 2001:db8:k::/48.
fn all_kinds(v6: bool) -> (Vec<TunnelConfig>, Vec<TunnelConfig>) {
    let (a, b) = if v6 { (A6, B6) } else { (A4, B4) };
    let side = |local, remote| {
        let tunnels: Vec<TunnelConfig> = TunnelKind::ALL
            .iter()
            .enumerate()
            .map(|(k, &kind)| {
                let mut t = TunnelConfig::new(kind.name(), kind, local, remote);
                t.local_port = port(kind);
                t.remote_port = port(kind);
                t.remote_checksum_rx = matches!(kind, TunnelKind::Vxlan | TunnelKind::Gue);
                match kind {
                    TunnelKind::Vxlan | TunnelKind::Geneve => t.vni = 100 + k as u32,
                    TunnelKind::Gtpu => {
                        t.teid = 300;
                        t.local_teid = 300;
                        t.qfi = Some(1);
                    }
                    TunnelKind::GreInUdp | TunnelKind::FouGre | TunnelKind::GueGre => {
                        t.key = Some(400 + k as u32)
                    }
                    _ => {}
                }
                if kind.carries_ethernet() {
                    t.inner_macs = vec![EthernetAddress(mac(k))];
                } else {
                    if kind != TunnelKind::FouSit {
                        t.inner_prefixes.push(IpPrefix {
                            addr: IpAddr::V4(Ipv4Addr::new(10, k as u8, 0, 0)),
                            len: 16,
                        });
                    }
                    if kind != TunnelKind::FouIpip {
                        t.inner_prefixes.push(IpPrefix {
                            addr: IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, k as u16, 0, 0, 0, 0, 0)),
                            len: 48,
                        });
                    }
                }
                t
            })
            .collect();
        assert_eq!(check_tunnels(&tunnels), Ok(()));
        tunnels
    };
    (side(a, b), side(b, a))
}

/// A frame to `dst` MAC around `ip`.
fn frame_to(dst: [u8; 6], ip: &[u8]) -> Vec<u8> {
    let mut f = frame(ip);
    f[..6].copy_from_slice(&dst);
    f
}

/// Inner frames for kind index `k` (to its MAC, or carrying an IP packet
/// routed to it) and what B delivers for each.
fn traffic(k: usize, n: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    let kind = TunnelKind::ALL[k];
    (0..n)
        .map(|i| {
            let payload = vec![k as u8; 10 + 100 * i];
            let ip = if kind == TunnelKind::FouSit || (i % 2 == 1 && kind != TunnelKind::FouIpip) {
                udp6_between(
                    Ipv6Addr::new(0x2001, 0xdb8, 0xff, 0, 0, 0, 0, 1),
                    Ipv6Addr::new(0x2001, 0xdb8, k as u16, 0, 0, 0, 0, 9),
                    &payload,
                    2000 + i as u16,
                )
            } else {
                tcp4_between(
                    [10, 255, 0, 1],
                    [10, k as u8, 0, 9],
                    &payload,
                    2000 + i as u16,
                )
            };
            if kind.carries_ethernet() {
                let f = frame_to(mac(k), &ip);
                (f.clone(), f)
            } else {
                // No L2 tunnel claims the MAC: the IP packet inside is
                // routed, and B delivers it without the Ethernet header.
                (frame_to([0x02, 0, 0, 0, 0, 0xee], &ip), ip)
            }
        })
        .collect()
}

fn sorted(mut v: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    v.sort();
    v
}

#[test]
fn a_mixed_vector_over_every_kind_balances() {
    for v6 in [false, true] {
        let (ca, cb) = all_kinds(v6);
        let mut a = pipeline(&ca, InnerLink::Ethernet);
        let mut b = pipeline(&cb, InnerLink::Ethernet);
        let mut pool = pool();

        let mut inner = Vec::new();
        let mut expect = Vec::new();
        for k in 0..TunnelKind::ALL.len() {
            for (i, e) in traffic(k, 3) {
                inner.push(i);
                expect.push(e);
            }
        }
        let good = inner.len();
        // Unroutable: an IPv4 and an IPv6 destination nobody routes, an
        // IPv6 packet to the FOU-IPIP prefix... which FOU-IPIP cannot carry
        // and nobody else routes; and a frame without IP to an unknown MAC.
        inner.push(frame_to(
            [2, 0, 0, 0, 0, 0xee],
            &tcp4_between([10, 255, 0, 1], [11, 0, 0, 1], b"", 1),
        ));
        inner.push(frame_to(
            [2, 0, 0, 0, 0, 0xee],
            &udp6_between(
                Ipv6Addr::LOCALHOST,
                Ipv6Addr::new(0x2001, 0xdb8, 5, 0, 0, 0, 0, 1),
                b"",
                1,
            ),
        ));
        let mut arp = frame_to([0xff; 6], &[0u8; 28]);
        arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        inner.push(arp);
        // Truncated: an IPv4 header cut short inside a frame.
        inner.push(frame_to(mac(0), &tcp4(b"cut", 1))[..30].to_vec());

        let enc = run_encap(&mut a, &mut pool, &inner);
        assert_eq!(enc.packets.len(), good, "{}", a.runtime().report());
        let c = a.counters();
        assert_eq!((c.encap_in, c.encap_out), (inner.len() as u64, good as u64));
        assert_eq!(a.drops(DropReason::NoRoute), 3, "{}", a.runtime().report());
        assert_eq!(a.drops(DropReason::Truncated), 1);
        for (k, kind) in TunnelKind::ALL.iter().enumerate() {
            let node = format!("{kind}-encap");
            let n = a.runtime().nodes().iter().find(|n| n.name == node).unwrap();
            assert_eq!(n.packets, 3, "{node}: one vector of 3 (kind {k})");
        }
        assert_balanced(&a);

        // The receiving side gets them with trouble mixed in.
        let mut wire = enc.packets.clone();
        let mut flipped = wire[0].clone();
        let n = flipped.len();
        flipped[n - 1] ^= 0x80;
        wire.push(flipped);
        let mut flipped = wire[5].clone();
        let n = flipped.len();
        flipped[n - 3] ^= 0x01;
        wire.push(flipped);
        let (peer, us) = if v6 { (A6, B6) } else { (A4, B4) };
        wire.push(udp_packet(peer, us, 1, 9, b"discard"));
        wire.push(udp_packet(peer, us, 2152, 2152, &gtpu_echo_request(3)));
        wire.push(udp_packet(
            peer,
            us,
            2152,
            2152,
            &gtpu_gpdu(999, &tcp4(b"?", 1)),
        ));
        wire.insert(7, udp_packet(peer, us, 2152, 2152, &gtpu_echo_request(4)));

        let dec = run_decap(&mut b, &mut pool, &wire, 0);
        assert_eq!(
            sorted(dec.packets.clone()),
            sorted(expect.clone()),
            "v6={v6}"
        );
        assert!(dec.csum.iter().all(|&c| c == ChecksumState::Verified));
        assert_eq!(
            dec.replies.len(),
            3,
            "two Echo Responses, one Error Indication"
        );
        let c = b.counters();
        assert_eq!(c.decap_in, wire.len() as u64);
        assert_eq!(c.decap_out, good as u64);
        assert_eq!((c.answered, c.generated, c.coalesced), (2, 1, 0));
        assert_eq!(b.drops(DropReason::BadChecksum), 2);
        assert_eq!(b.drops(DropReason::UnknownPort), 1);
        assert_eq!(b.drops(DropReason::UnknownTeid), 1);
        assert_eq!(b.drops_total(), 4);
        assert_balanced(&b);
        assert_no_leak(&pool);
    }
}

#[test]
fn full_vectors_over_many_calls_accumulate() {
    let (ca, cb) = pair(TunnelKind::GreInUdp, false, ChecksumMode::Lco);
    let mut a = pipeline(&ca, InnerLink::Ip);
    let mut b = pipeline(&cb, InnerLink::Ip);
    let mut pool = pool();
    let (mut sent, mut lost) = (0u64, 0u64);
    for call in 0..5u16 {
        let inner: Vec<Vec<u8>> = (0..VECTOR_SIZE as u16)
            .map(|i| {
                let dst = if i % 7 == 0 {
                    [11, 0, 0, 1]
                } else {
                    [10, 1, 2, 3]
                };
                tcp4_between([10, 0, 0, 1], dst, &[i as u8; 64], call * 1000 + i)
            })
            .collect();
        lost += inner.iter().filter(|p| p[16] == 11).count() as u64;
        let enc = run_encap(&mut a, &mut pool, &inner);
        sent += enc.packets.len() as u64;
        assert_balanced(&a);
        let mut wire = enc.packets;
        for p in wire.iter_mut().step_by(10) {
            let n = p.len();
            p[n - 1] ^= 0xff;
        }
        let dec = run_decap(&mut b, &mut pool, &wire, u64::from(call));
        assert_eq!(dec.packets.len(), wire.len() - wire.len().div_ceil(10));
        assert_balanced(&b);
        assert_no_leak(&pool);
    }
    let c = a.counters();
    assert_eq!(c.encap_in, 5 * VECTOR_SIZE as u64);
    assert_eq!(c.encap_out, sent);
    assert_eq!(a.drops(DropReason::NoRoute), lost);
    let classify = &a.runtime().nodes()[a
        .runtime()
        .nodes()
        .iter()
        .position(|n| n.name == "encap-classify")
        .unwrap()];
    assert_eq!(
        (classify.calls, classify.packets),
        (5, 5 * VECTOR_SIZE as u64)
    );
    assert_eq!(b.counters().decap_in, sent);
    assert_eq!(
        b.drops(DropReason::BadChecksum) + b.counters().decap_out,
        sent
    );
}

/// A TCP super-packet (what a TUN with TSO hands over) of `segments`
/// segments of `mss`, with a partial checksum, as the pipeline takes it.
fn super_packet(segments: usize, mss: usize) -> (Vec<u8>, ChecksumState, Gso) {
    let payload: Vec<u8> = (0..segments * mss).map(|i| (i * 7) as u8).collect();
    let (p, cs) = make_partial(&tcp4(&payload, 4242), 0);
    (
        p,
        cs,
        Gso {
            kind: GsoKind::Tcp4,
            segment_size: mss as u16,
        },
    )
}

fn gro_pipeline(config: &[TunnelConfig]) -> Pipeline<ManualClock> {
    Pipeline::new(
        config,
        &DataplaneConfig::default(),
        ManualClock::default(),
        PipelineOptions {
            inner_link: InnerLink::Ip,
            gro: true,
            ..PipelineOptions::default()
        },
    )
}

#[test]
fn gso_segments_and_gro_merges_are_counted() {
    for mode in [ChecksumMode::Full, ChecksumMode::Lco, ChecksumMode::Zero] {
        let (ca, cb) = pair(TunnelKind::FouIpip, false, mode);
        let mut a = pipeline(&ca, InnerLink::Ip);
        let mut b = gro_pipeline(&cb);
        let mut pool = Pool::new(64, SUPER_PACKET_ROOM);
        let (sp, cs, gso) = super_packet(10, 1000);
        let before = tcp4(b"before", 1);
        let after = tcp4(b"after", 2);
        let mut v = load(&mut pool, &[before.clone(), sp.clone(), after.clone()]);
        let id = v.as_slice()[1];
        pool.meta_mut(id).csum = cs;
        pool.meta_mut(id).gso = Some(gso);
        let mut wire = Vec::new();
        a.encap(&mut pool, &mut v, &mut |_, pool, v| {
            for &id in v.as_slice() {
                wire.push(pool.data(id).to_vec());
                pool.free(id);
            }
        });
        let c = a.counters();
        assert_eq!(
            (c.encap_in, c.segments_added, c.encap_out),
            (3, 9, 12),
            "{mode}"
        );
        assert_eq!(wire.len(), 12);
        assert_balanced(&a);
        assert_no_leak(&pool);

        let mut v = load(&mut pool, &wire);
        let mut got = Vec::new();
        b.decap(&mut pool, &mut v, 0, &mut |o, pool, v| {
            assert_eq!(o, Output::Inner);
            for &id in v.as_slice() {
                got.push((pool.data(id).to_vec(), pool.meta(id).gso));
                pool.free(id);
            }
        });
        let c = b.counters();
        assert_eq!(
            (c.decap_in, c.decap_out, c.coalesced),
            (12, 3, 9),
            "{mode}: {}",
            b.runtime().report()
        );
        assert_balanced(&b);
        assert_no_leak(&pool);
        // The ten segments are one super-packet again, as it was sent.
        let merged = got
            .iter()
            .find(|(_, g)| g.is_some())
            .expect("a super-packet");
        assert_eq!(merged.1, Some(gso), "{mode}");
        assert_eq!(
            merged.0, sp,
            "{mode}: the super-packet comes back byte for byte"
        );
        let singles: Vec<_> = got
            .iter()
            .filter(|(_, g)| g.is_none())
            .map(|(p, _)| p.clone())
            .collect();
        assert_eq!(sorted(singles), sorted(vec![before.clone(), after.clone()]));
    }
}

#[test]
fn a_gso_refusal_is_one_drop() {
    // Segment size 0: the super-packet is malformed; it is one drop on
    // gso-segment and the plain packets around it go on.
    let (ca, _) = pair(TunnelKind::FouIpip, false, ChecksumMode::Full);
    let mut a = pipeline(&ca, InnerLink::Ip);
    let mut pool = Pool::new(16, SUPER_PACKET_ROOM);
    let (sp, cs, _) = super_packet(3, 500);
    let mut v = load(&mut pool, &[tcp4(b"a", 1), sp, tcp4(b"b", 2)]);
    let id = v.as_slice()[1];
    pool.meta_mut(id).csum = cs;
    pool.meta_mut(id).gso = Some(Gso {
        kind: GsoKind::Tcp4,
        segment_size: 0,
    });
    let mut n = 0;
    a.encap(&mut pool, &mut v, &mut |_, pool, v| {
        for &id in v.as_slice() {
            n += 1;
            pool.free(id);
        }
    });
    assert_eq!(n, 2);
    assert_dropped_once(&a, DropReason::Malformed, "gso-segment");
    assert_balanced(&a);
    assert_no_leak(&pool);
}

#[test]
fn replies_and_generated_packets_are_outside_the_decap_balance() {
    // 256 GTP-U packets in one vector: Echo Requests (answered in their
    // own buffer), unknown TEIDs (dropped, each drawing a new buffer for an
    // Error Indication while the rate allows) and G-PDUs.
    let (_, cb) = pair(TunnelKind::Gtpu, false, ChecksumMode::Full);
    let dataplane = DataplaneConfig {
        error_indication_rate: 50,
        ..DataplaneConfig::default()
    };
    let mut b = pipeline_with(&cb, &dataplane, InnerLink::Ip);
    let mut pool = pool();
    let wire: Vec<Vec<u8>> = (0..VECTOR_SIZE as u32)
        .map(|i| {
            let g = match i % 3 {
                0 => gtpu_echo_request(i as u16),
                1 => gtpu_gpdu(0x9000 + i, &tcp4(b"lost", 1)),
                _ => gtpu_gpdu(0x1000, &tcp4(b"fine", i as u16)),
            };
            udp_packet(A4, B4, 2152, 2152, &g)
        })
        .collect();
    let echo = wire.len().div_ceil(3) as u64;
    let unknown = (wire.len() / 3 + usize::from(wire.len() % 3 == 2)) as u64;
    let fine = wire.len() as u64 - echo - unknown;
    let out = run_decap(&mut b, &mut pool, &wire, 1);
    let c = b.counters();
    assert_eq!(c.decap_in, 256);
    assert_eq!((c.answered, c.decap_out), (echo, fine));
    assert_eq!(b.drops(DropReason::UnknownTeid), unknown);
    assert_eq!(c.generated, 50, "the rate's burst");
    assert_eq!(
        c.error_indications_suppressed,
        unknown - 50,
        "the rest counted"
    );
    assert_eq!(out.replies.len() as u64, echo + 50);
    assert_eq!(out.packets.len() as u64, fine);
    assert_balanced(&b);
    assert_no_leak(&pool);
}

#[test]
fn udp_trains_count_as_their_datagrams() {
    // With UDP GSO trains on, the segments of one super-packet leave as one
    // train buffer: encap_out still counts datagrams, the balance holds,
    // and splitting the train gives what was sent without trains.
    let (ca, _) = pair(TunnelKind::GreInUdp, true, ChecksumMode::Full);
    let mut runs = Vec::new();
    for trains in [false, true] {
        let mut a = Pipeline::new(
            &ca,
            &DataplaneConfig::default(),
            ManualClock::default(),
            PipelineOptions {
                inner_link: InnerLink::Ip,
                udp_trains: trains,
                ..PipelineOptions::default()
            },
        );
        let mut pool = Pool::new(64, SUPER_PACKET_ROOM);
        let (sp, cs, gso) = super_packet(8, 1200);
        let mut v = load(&mut pool, &[sp, tcp4(b"single", 5)]);
        let id = v.as_slice()[0];
        pool.meta_mut(id).csum = cs;
        pool.meta_mut(id).gso = Some(gso);
        let mut datagrams = Vec::new();
        let mut buffers = 0;
        a.encap(&mut pool, &mut v, &mut |_, pool, v| {
            for &id in v.as_slice() {
                buffers += 1;
                if pool.meta(id).gso.is_some() {
                    let mut split = PacketVector::new();
                    tep_dataplane::split_udp_train(pool, id, &mut split).unwrap();
                    for &s in split.as_slice() {
                        datagrams.push(pool.data(s).to_vec());
                        pool.free(s);
                    }
                } else {
                    datagrams.push(pool.data(id).to_vec());
                    pool.free(id);
                }
            }
        });
        let c = a.counters();
        assert_eq!((c.encap_in, c.segments_added, c.encap_out), (2, 7, 9));
        assert_eq!(datagrams.len(), 9);
        assert_eq!(buffers, if trains { 2 } else { 9 });
        assert_balanced(&a);
        assert_no_leak(&pool);
        runs.push(datagrams);
    }
    assert_eq!(runs[0], runs[1]);
}
