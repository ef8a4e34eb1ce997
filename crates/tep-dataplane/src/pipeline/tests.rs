//! The pipeline end to end: encap at one end, the wire, decap at the other.

use super::*;
use crate::buffer::{ChecksumState, GsoKind, SUPER_PACKET_ROOM};
use crate::clock::ManualClock;
use crate::config::{ChecksumMode, DataplaneConfig, TunnelConfig};
use crate::testpkt::{payload, super_meta, tcp, vector_of, Csum, Ip, Tcp};
use core::net::{IpAddr, Ipv6Addr};

fn gtpu_pair(mode: ChecksumMode) -> (Vec<TunnelConfig>, Vec<TunnelConfig>) {
    let a = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1));
    let b = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2));
    let mk = |l, r| {
        let mut t = TunnelConfig::new("t", TunnelKind::Gtpu, l, r);
        t.teid = 7;
        t.local_teid = 7;
        t.checksum = mode;
        t.zero_checksum_tx = true;
        t.zero_checksum_rx = true;
        t.inner_prefixes = vec!["10.201.0.0/16".parse().unwrap()];
        vec![t]
    };
    (mk(a, b), mk(b, a))
}

/// A 64 KiB TSO super-packet from the TUN side is segmented, each
/// segment tunnelled on its own (GTP-U needs a length per datagram);
/// the peer decapsulates and GRO rebuilds the very same super-packet.
#[test]
fn tso_super_packet_segments_tunnels_and_coalesces_back() {
    for mode in [ChecksumMode::Full, ChecksumMode::Lco, ChecksumMode::Zero] {
        let (ca, cb) = gtpu_pair(mode);
        let mut a = Pipeline::new(
            &ca,
            &DataplaneConfig::default(),
            ManualClock::default(),
            PipelineOptions::default(),
        );
        let mut b = Pipeline::new(
            &cb,
            &DataplaneConfig::default(),
            ManualClock::default(),
            PipelineOptions {
                gro: true,
                ..PipelineOptions::default()
            },
        );
        let mut pool = Pool::new(256, SUPER_PACKET_ROOM);
        let mss = 1448;
        let bytes = tcp(
            &Ip::v4(),
            &Tcp::new(),
            &payload(0, 45 * mss, 3),
            Csum::Partial,
        );
        let meta = super_meta(&bytes, GsoKind::Tcp4, mss as u16);
        let mut v = vector_of(&mut pool, &bytes, meta);
        let mut wire = PacketVector::new();
        a.encap(&mut pool, &mut v, &mut |_, _, out| {
            for &id in out.as_slice() {
                wire.push(id).unwrap();
            }
        });
        assert_eq!(wire.len(), 45, "{mode}: {}", a.runtime().report());
        let c = a.counters();
        assert_eq!((c.encap_in, c.segments_added, c.encap_out), (1, 44, 45));
        let mut got = Vec::new();
        b.decap(&mut pool, &mut wire, 0, &mut |o, pool, out| {
            assert_eq!(o, Output::Inner);
            for &id in out.as_slice() {
                got.push((pool.data(id).to_vec(), pool.meta(id).gso));
                pool.free(id);
            }
        });
        assert_eq!(got.len(), 1, "{mode}: {}", b.runtime().report());
        assert_eq!(got[0].0, bytes, "{mode}: byte for byte");
        assert_eq!(got[0].1, meta.gso);
        let c = b.counters();
        assert_eq!((c.decap_in, c.decap_out, c.coalesced), (45, 1, 44));
        assert_eq!(a.drops_total() + b.drops_total(), 0);
        assert_eq!(pool.available(), pool.capacity());
    }
}

/// With UDP GSO trains on, the 45 tunnelled segments leave as two
/// trains, and splitting it (what the kernel does for UDP_SEGMENT)
/// gives exactly the datagrams sent without trains.
#[test]
fn segments_leave_as_one_udp_gso_train() {
    let (ca, _) = gtpu_pair(ChecksumMode::Full);
    let mut pool = Pool::new(256, SUPER_PACKET_ROOM + 8192);
    let mss = 1448;
    let bytes = tcp(
        &Ip::v4(),
        &Tcp::new(),
        &payload(0, 45 * mss, 3),
        Csum::Partial,
    );
    let meta = super_meta(&bytes, GsoKind::Tcp4, mss as u16);
    let mut runs = Vec::new();
    for trains in [false, true] {
        let mut p = Pipeline::new(
            &ca,
            &DataplaneConfig::default(),
            ManualClock::default(),
            PipelineOptions {
                udp_trains: trains,
                ..PipelineOptions::default()
            },
        );
        let mut v = vector_of(&mut pool, &bytes, meta);
        let mut got = Vec::new();
        p.encap(&mut pool, &mut v, &mut |_, pool, out| {
            for &id in out.as_slice() {
                if pool.meta(id).gso.is_some() {
                    let mut split = PacketVector::new();
                    // Frees the train.
                    udp_train::split_udp_train(pool, id, &mut split).unwrap();
                    for &s in split.as_slice() {
                        got.push(pool.data(s).to_vec());
                        pool.free(s);
                    }
                    got.push(b"end of train".to_vec());
                } else {
                    got.push(pool.data(id).to_vec());
                    pool.free(id);
                }
            }
        });
        runs.push(got);
    }
    assert_eq!(runs[0].len(), 45);
    // 1516 bytes of UDP payload each: 43 fit an IPv6 payload length.
    assert_eq!(runs[1].len(), 47, "trains of 43 and 2");
    assert_eq!(runs[1][43], b"end of train");
    let mut split: Vec<_> = runs[1].clone();
    split.retain(|p| p != b"end of train");
    assert_eq!(split, runs[0]);
    assert_eq!(pool.available(), pool.capacity());
}

/// Host mode: the encap path leaves the outer UDP checksum to the
/// socket and hands UDP GSO trains over; the peer's socket verifies
/// and coalesces them (UDP_GRO), and the decap path splits the
/// Verified trains without reading payload for checksums, then GRO
/// rebuilds the sender's super-packet byte for byte.
#[test]
fn host_mode_trains_split_on_decap_and_coalesce_back() {
    for mode in [ChecksumMode::Offload, ChecksumMode::Full] {
        let (ca, cb) = gtpu_pair(mode);
        let host = PipelineOptions {
            udp_trains: true,
            outer: OuterLayers::UdpPayload,
            gro: true,
            ..PipelineOptions::default()
        };
        let mut a = Pipeline::new(
            &ca,
            &DataplaneConfig::default(),
            ManualClock::default(),
            host,
        );
        let mut b = Pipeline::new(
            &cb,
            &DataplaneConfig::default(),
            ManualClock::default(),
            host,
        );
        let mut pool = Pool::new(256, SUPER_PACKET_ROOM + 8192);
        let mss = 1448;
        let bytes = tcp(
            &Ip::v4(),
            &Tcp::new(),
            &payload(0, 45 * mss, 3),
            Csum::Partial,
        );
        let meta = super_meta(&bytes, GsoKind::Tcp4, mss as u16);
        let mut v = vector_of(&mut pool, &bytes, meta);
        let mut wire = PacketVector::new();
        a.encap(&mut pool, &mut v, &mut |_, pool, out| {
            for &id in out.as_slice() {
                // What the receiving socket reports: verified by the kernel.
                pool.meta_mut(id).csum = ChecksumState::Verified;
                wire.push(id).unwrap();
            }
        });
        assert_eq!(wire.len(), 2, "{mode}: two trains");
        let names: Vec<_> = a
            .runtime()
            .nodes()
            .iter()
            .map(|n| (n.name, n.packets))
            .collect();
        assert!(
            names.contains(&("udp-checksum", 0)),
            "{mode}: no software outer checksum: {}",
            a.runtime().report()
        );
        let mut got = Vec::new();
        b.decap(&mut pool, &mut wire, 0, &mut |o, pool, out| {
            assert_eq!(o, Output::Inner);
            for &id in out.as_slice() {
                got.push((pool.data(id).to_vec(), pool.meta(id).gso));
                pool.free(id);
            }
        });
        assert_eq!(got.len(), 1, "{mode}: {}", b.runtime().report());
        assert_eq!(got[0].0, bytes, "{mode}: byte for byte");
        assert_eq!(got[0].1, meta.gso);
        let c = b.counters();
        assert_eq!((c.decap_in, c.decap_out, c.coalesced), (45, 1, 44));
        assert_eq!(a.drops_total() + b.drops_total(), 0);
        assert_eq!(pool.available(), pool.capacity());
    }
}

fn vxlan_pair(mode: ChecksumMode) -> (Vec<TunnelConfig>, Vec<TunnelConfig>) {
    let a = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1));
    let b = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2));
    let mk = |l, r| {
        // No inner_macs: the default VXLAN tunnel takes every frame.
        let mut t = TunnelConfig::new("t", TunnelKind::Vxlan, l, r);
        t.vni = 42;
        t.checksum = mode;
        t.remote_checksum_rx = mode == ChecksumMode::Remote;
        t.zero_checksum_tx = true;
        t.zero_checksum_rx = true;
        vec![t]
    };
    (mk(a, b), mk(b, a))
}

/// A 64 KiB TSO super-frame from a TAP is segmented into frames (the
/// same Ethernet header on each), each tunnelled over VXLAN; the peer
/// decapsulates, and GRO rebuilds the very same super-frame, with its
/// offsets from the frame start.
#[test]
fn tso_super_frame_crosses_vxlan_and_coalesces_back() {
    use crate::testpkt::Eth;
    for mode in [ChecksumMode::Full, ChecksumMode::Lco, ChecksumMode::Zero] {
        for (ip, eth) in [(Ip::v4(), Eth::new()), (Ip::v6(), Eth::tagged(10))] {
            let (ca, cb) = vxlan_pair(mode);
            let l2 = PipelineOptions {
                inner_link: InnerLink::Ethernet,
                ..PipelineOptions::default()
            };
            let mut a = Pipeline::new(&ca, &DataplaneConfig::default(), ManualClock::default(), l2);
            let mut b = Pipeline::new(
                &cb,
                &DataplaneConfig::default(),
                ManualClock::default(),
                PipelineOptions { gro: true, ..l2 },
            );
            let mut pool = Pool::new(256, SUPER_PACKET_ROOM);
            let mss = 1448;
            let packet = tcp(&ip, &Tcp::new(), &payload(0, 45 * mss, 3), Csum::Partial);
            let kind = if ip.v6 { GsoKind::Tcp6 } else { GsoKind::Tcp4 };
            let bytes = eth.wrap(&packet);
            let meta = eth.meta(super_meta(&packet, kind, mss as u16));
            let mut v = vector_of(&mut pool, &bytes, meta);
            let mut wire = PacketVector::new();
            a.encap_from(InnerLink::Ethernet, &mut pool, &mut v, &mut |_, _, out| {
                for &id in out.as_slice() {
                    wire.push(id).unwrap();
                }
            });
            assert_eq!(wire.len(), 45, "{mode}: {}", a.runtime().report());
            let c = a.counters();
            assert_eq!((c.encap_in, c.segments_added, c.encap_out), (1, 44, 45));
            let mut got = Vec::new();
            b.decap(&mut pool, &mut wire, 0, &mut |o, pool, out| {
                assert_eq!(o, Output::Inner);
                for &id in out.as_slice() {
                    got.push((pool.data(id).to_vec(), *pool.meta(id)));
                    pool.free(id);
                }
            });
            assert_eq!(got.len(), 1, "{mode}: {}", b.runtime().report());
            assert_eq!(got[0].0, bytes, "{mode}: byte for byte");
            let m = got[0].1;
            assert_eq!(m.gso, meta.gso);
            assert_eq!((m.l2, m.l3, m.l4), (0, meta.l3, meta.l4));
            assert_eq!(m.csum, meta.csum, "{mode}: partial, from the frame start");
            let c = b.counters();
            assert_eq!((c.decap_in, c.decap_out, c.coalesced), (45, 1, 44));
            assert_eq!(a.drops_total() + b.drops_total(), 0);
            assert_eq!(pool.available(), pool.capacity());
        }
    }
}

/// Host mode with remote checksum offload: the socket verified the
/// outer checksum, which vouches for the bytes, so the decap path
/// leaves the inner checksum partial where the sink takes it (no
/// payload read), and completes it where the sink does not. Both
/// outputs carry the same packet once the partial one is completed.
#[test]
fn remote_checksum_is_left_partial_for_a_sink_that_takes_it() {
    use crate::testpkt::{l4_of, meta_of, udp, Eth};
    for (ip, tcp_inner) in [(Ip::v4(), true), (Ip::v6(), true), (Ip::v4(), false)] {
        let (ca, cb) = vxlan_pair(ChecksumMode::Remote);
        let l2 = PipelineOptions {
            inner_link: InnerLink::Ethernet,
            outer: OuterLayers::UdpPayload,
            ..PipelineOptions::default()
        };
        let eth = Eth::new();
        let packet = if tcp_inner {
            tcp(&ip, &Tcp::new(), &payload(0, 1200, 7), Csum::Partial)
        } else {
            udp(&ip, 4000, 5000, &payload(0, 1200, 7), Csum::Partial)
        };
        let (off, proto): (u16, u8) = if tcp_inner { (16, 6) } else { (6, 17) };
        let frame = eth.wrap(&packet);
        let l4 = l4_of(&packet) as u16;
        let meta = eth.meta(meta_of(
            &packet,
            ChecksumState::Partial {
                start: l4,
                offset: l4 + off,
            },
        ));
        let mut outputs = Vec::new();
        for inner_partial in [true, false] {
            let mut a = Pipeline::new(&ca, &DataplaneConfig::default(), ManualClock::default(), l2);
            let mut b = Pipeline::new(
                &cb,
                &DataplaneConfig::default(),
                ManualClock::default(),
                PipelineOptions {
                    inner_checksums: if inner_partial {
                        InnerChecksums::Stated
                    } else {
                        InnerChecksums::AsFound
                    },
                    ..l2
                },
            );
            let mut pool = Pool::new(16, 4096);
            let mut v = vector_of(&mut pool, &frame, meta);
            let mut wire = PacketVector::new();
            a.encap_from(
                InnerLink::Ethernet,
                &mut pool,
                &mut v,
                &mut |_, pool, out| {
                    for &id in out.as_slice() {
                        // What host mode's receiving socket reports: the
                        // kernel verified a non-zero checksum.
                        pool.meta_mut(id).csum = ChecksumState::Verified;
                        wire.push(id).unwrap();
                    }
                },
            );
            assert_eq!(wire.len(), 1);
            b.decap(&mut pool, &mut wire, 0, &mut |_, pool, out| {
                for &id in out.as_slice() {
                    outputs.push((pool.data(id).to_vec(), pool.meta(id).csum));
                    pool.free(id);
                }
            });
            assert_eq!(b.drops_total(), 0, "{}", b.runtime().report());
            assert_eq!(pool.available(), pool.capacity());
        }
        let (partial, partial_csum) = &outputs[0];
        let (done, done_csum) = &outputs[1];
        assert_eq!(*done_csum, ChecksumState::Verified);
        let (l3, l4) = (usize::from(meta.l3), usize::from(meta.l4));
        assert_eq!(
            *partial_csum,
            ChecksumState::Partial {
                start: meta.l4,
                offset: meta.l4 + off
            },
            "offsets from the frame start"
        );
        assert_eq!(partial, &frame, "left as the sender left it");
        assert!(crate::geometry::holds_pseudo_sum(partial, l3, l4, proto));
        // Completing it gives the packet the other sink got.
        let mut completed = partial.clone();
        let sum = tep_csum::Sum::of(&completed[l4..]);
        let c = if proto == 17 {
            sum.udp_checksum()
        } else {
            sum.checksum()
        };
        let at = l4 + usize::from(off);
        completed[at..at + 2].copy_from_slice(&c.to_be_bytes());
        assert_eq!(&completed, done);
    }
}

/// What one receiver made of a wire vector: each output linearized,
/// with its metadata.
struct Received {
    outputs: Vec<(Vec<u8>, crate::buffer::PacketMeta)>,
    counters: Counters,
    drops: Vec<(DropReason, u64)>,
    report: String,
}

/// Sends `frames` (bytes, metadata) through `a` as host mode does
/// (segments gathered, sent as UDP GSO trains; the kernel's
/// verification on receive), lets `tamper` touch the wire, and
/// decapsulates at `b` with or without `gather`.
fn over_the_wire(
    ca: &[TunnelConfig],
    cb: &[TunnelConfig],
    link: InnerLink,
    frames: &[(Vec<u8>, crate::buffer::PacketMeta)],
    merge: bool,
    tamper: &dyn Fn(&mut Pool, &PacketVector),
) -> Received {
    let tx = PipelineOptions {
        inner_link: link,
        outer: OuterLayers::UdpPayload,
        gather: true,
        ..PipelineOptions::default()
    };
    let rx = PipelineOptions {
        inner_link: link,
        outer: OuterLayers::UdpPayload,
        gro: true,
        gather: merge,
        ..PipelineOptions::default()
    };
    let mut a = Pipeline::new(ca, &DataplaneConfig::default(), ManualClock::default(), tx);
    let mut b = Pipeline::new(cb, &DataplaneConfig::default(), ManualClock::default(), rx);
    let mut pool = Pool::new(512, SUPER_PACKET_ROOM + 8192);
    let mut wire = PacketVector::new();
    for (bytes, meta) in frames {
        let mut v = vector_of(&mut pool, bytes, *meta);
        let table = TunnelTable::new(ca);
        a.encap_from(link, &mut pool, &mut v, &mut |_, pool, out| {
            // What the socket does: gathers each datagram, sends runs
            // as GSO trains, which the peer's socket receives as trains.
            for &id in out.as_slice() {
                assert!(pool.linearize(id));
            }
            let ids = out.as_slice();
            let mut i = 0;
            while i < ids.len() {
                let j = udp_train::train_end(pool, ids, i, &table);
                let id = if j - i > 1 {
                    udp_train::build_udp_train(pool, &ids[i..j]).unwrap()
                } else {
                    ids[i]
                };
                pool.meta_mut(id).csum = ChecksumState::Verified;
                wire.push(id).unwrap();
                i = j;
            }
        });
    }
    assert_eq!(a.drops_total(), 0, "{}", a.runtime().report());
    tamper(&mut pool, &wire);
    let mut outputs = Vec::new();
    b.decap(&mut pool, &mut wire, 0, &mut |o, pool, out| {
        for &id in out.as_slice() {
            if o == Output::Reply {
                // GTP-U Error Indications for an unknown TEID.
                pool.free(id);
                continue;
            }
            assert!(pool.linearize(id));
            outputs.push((pool.data(id).to_vec(), *pool.meta(id)));
            pool.free(id);
        }
    });
    assert_eq!(pool.available(), pool.capacity(), "every buffer back");
    let drops = DropReason::ALL
        .iter()
        .map(|&r| (r, b.drops(r)))
        .filter(|&(_, n)| n > 0)
        .collect();
    Received {
        outputs,
        counters: b.counters(),
        drops,
        report: b.runtime().report(),
    }
}

/// The TCP payload of each output, in order, after checking that the
/// output is a well-formed packet or super-packet: IP length, IPv4
/// header checksum, and for a super-packet the partial checksum and
/// segment size.
fn tcp_stream(outputs: &[(Vec<u8>, crate::buffer::PacketMeta)], mss: u16) -> Vec<u8> {
    let mut stream = Vec::new();
    for (d, m) in outputs {
        let l3 = usize::from(m.l3);
        let ip = &d[l3..];
        let v6 = ip[0] >> 4 == 6;
        let (hl, len) = if v6 {
            (40, 40 + usize::from(u16::from_be_bytes([ip[4], ip[5]])))
        } else {
            assert!(
                tep_csum::Sum::of(&ip[..20]).verifies(),
                "IPv4 header checksum"
            );
            (20, usize::from(u16::from_be_bytes([ip[2], ip[3]])))
        };
        assert_eq!(len, ip.len(), "IP length");
        let th = usize::from(ip[hl + 12] >> 4) * 4;
        if let Some(g) = m.gso {
            assert_eq!(g.segment_size, mss);
            let partial = crate::geometry::pseudo_header(ip, 6, len - hl).value();
            assert_eq!(
                u16::from_be_bytes([ip[hl + 16], ip[hl + 17]]),
                partial,
                "pseudo-header sum in a super-packet"
            );
            let l4 = (l3 + hl) as u16;
            assert_eq!(
                m.csum,
                ChecksumState::Partial {
                    start: l4,
                    offset: l4 + 16
                }
            );
        }
        stream.extend_from_slice(&ip[hl + th..]);
    }
    stream
}

/// The receiver got one 45-segment super-packet's stream whole, with
/// nothing dropped.
fn assert_whole_stream(r: &Received, name: &str, mss: usize) {
    assert_eq!(
        tcp_stream(&r.outputs, mss as u16),
        payload(0, 45 * mss, 3),
        "{name}"
    );
    assert!(r.drops.is_empty(), "{name}: {:?}", r.drops);
}

/// A case: name, sender and receiver config, inner link, frame, meta.
type TrainCase = (
    &'static str,
    Vec<TunnelConfig>,
    Vec<TunnelConfig>,
    InnerLink,
    Vec<u8>,
    crate::buffer::PacketMeta,
);

/// A TCP super-packet of `data` (checksum partial, as a TUN/TAP with
/// TSO gives it), framed for `link`: an IPv6 one in a VLAN-tagged
/// Ethernet frame, an IPv4 one in a plain frame.
fn super_frame(
    ip: &Ip,
    t: &Tcp,
    data: &[u8],
    link: InnerLink,
    mss: u16,
) -> (Vec<u8>, crate::buffer::PacketMeta) {
    let packet = tcp(ip, t, data, Csum::Partial);
    let kind = if ip.v6 { GsoKind::Tcp6 } else { GsoKind::Tcp4 };
    let meta = super_meta(&packet, kind, mss);
    if link == InnerLink::Ip {
        return (packet, meta);
    }
    let eth = if ip.v6 {
        crate::testpkt::Eth::tagged(10)
    } else {
        crate::testpkt::Eth::new()
    };
    (eth.wrap(&packet), eth.meta(meta))
}

fn train_cases() -> Vec<TrainCase> {
    use crate::testpkt::Eth;
    let mss = 1448;
    let mut cases = Vec::new();
    let data = payload(0, 45 * mss, 3);
    for mode in [ChecksumMode::Full, ChecksumMode::Offload] {
        let (ca, cb) = gtpu_pair(mode);
        let bytes = tcp(&Ip::v4(), &Tcp::new(), &data, Csum::Partial);
        let meta = super_meta(&bytes, GsoKind::Tcp4, mss as u16);
        cases.push(("gtpu/ipv4", ca, cb, InnerLink::Ip, bytes, meta));
    }
    for mode in [
        ChecksumMode::Full,
        ChecksumMode::Offload,
        ChecksumMode::Remote,
    ] {
        for (name, ip, eth) in [
            ("vxlan/ipv4", Ip::v4(), Eth::new()),
            ("vxlan/ipv6+vlan", Ip::v6(), Eth::tagged(10)),
        ] {
            let (ca, cb) = vxlan_pair(mode);
            let packet = tcp(&ip, &Tcp::new(), &data, Csum::Partial);
            let kind = if ip.v6 { GsoKind::Tcp6 } else { GsoKind::Tcp4 };
            let meta = eth.meta(super_meta(&packet, kind, mss as u16));
            cases.push((name, ca, cb, InnerLink::Ethernet, eth.wrap(&packet), meta));
        }
    }
    cases
}

/// Merging trains in place gives the receiver the byte stream that
/// splitting and coalescing them gives, in super-packets as the host
/// expects them, with no payload copied and the counters balanced.
#[test]
fn merged_trains_carry_what_split_trains_carry() {
    let mss = 1448;
    for (name, ca, cb, link, bytes, meta) in train_cases() {
        let frames = [(bytes.clone(), meta)];
        let split = over_the_wire(&ca, &cb, link, &frames, false, &|_, _| {});
        let merged = over_the_wire(&ca, &cb, link, &frames, true, &|_, _| {});
        let want = payload(0, 45 * mss, 3);
        assert!(
            split.drops.is_empty(),
            "{name}: {:?} {}",
            split.drops,
            split.report
        );
        assert_eq!(tcp_stream(&split.outputs, mss as u16), want, "{name}");
        assert_eq!(tcp_stream(&merged.outputs, mss as u16), want, "{name}");
        // The head's headers are the original's: link header, IP
        // addresses, TCP ports, seq, ack, flags, window.
        let (first, m) = &merged.outputs[0];
        let (l3, l4) = (usize::from(m.l3), usize::from(m.l4));
        let addrs = if first[l3] >> 4 == 6 { 8..40 } else { 12..20 };
        let (a, b) = (&first[l3..], &bytes[l3..]);
        assert_eq!(first[..l3], bytes[..l3], "{name}: link header");
        assert_eq!(a[addrs.clone()], b[addrs], "{name}: addresses");
        assert_eq!(first[l4..l4 + 16], bytes[l4..l4 + 16], "{name}: TCP header");
        assert!(merged.outputs.len() <= 2, "{name}: {}", merged.report);
        assert!(merged.outputs.iter().all(|(_, m)| m.gso.is_some()));
        assert!(merged.drops.is_empty(), "{name}: {:?}", merged.drops);
        let c = merged.counters;
        assert_eq!(c.decap_in, 45, "{name}: {}", merged.report);
        assert_eq!(c.decap_out + c.coalesced, 45);
        assert!(merged.report.contains("train-merge"));
        assert!(
            !merged.report.contains("udp-train-split"),
            "{name}: nothing split: {}",
            merged.report
        );
    }
}

/// The outer ECN of a train reaches every inner packet by RFC 6040:
/// an outer ECT(0) changes nothing, so the train merges; ECT(1) and CE
/// can change the inner field, so the train takes the split path, where
/// each datagram gets `decap-output`'s step.
#[test]
fn outer_ecn_of_a_train_reaches_every_inner_packet() {
    const ECT1: u8 = 1;
    const ECT0: u8 = 2;
    const CE: u8 = 3;
    let mss = 1448;
    for (name, ca, cb, link, _, _) in train_cases() {
        let ip = if name.contains("ipv6") {
            Ip {
                tos: ECT0,
                ..Ip::v6()
            }
        } else {
            Ip {
                tos: ECT0,
                ..Ip::v4()
            }
        };
        let data = payload(0, 45 * mss, 3);
        let frame = super_frame(&ip, &Tcp::new(), &data, link, mss as u16);
        for (outer, inner, merges) in [(ECT0, ECT0, true), (ECT1, ECT1, false), (CE, CE, false)] {
            // What the receiving socket reports of the underlay's marks.
            let set_outer_ecn = |pool: &mut Pool, wire: &PacketVector| {
                for &id in wire.as_slice() {
                    let o = pool.outer_mut(id);
                    o.tos = (o.tos & !3) | outer;
                }
            };
            let r = over_the_wire(
                &ca,
                &cb,
                link,
                std::slice::from_ref(&frame),
                true,
                &set_outer_ecn,
            );
            let label = format!("{name} outer ECN {outer}");
            assert!(r.drops.is_empty(), "{label}: {:?}", r.drops);
            assert_eq!(tcp_stream(&r.outputs, mss as u16), data, "{label}");
            for (d, m) in &r.outputs {
                let ip = &d[usize::from(m.l3)..];
                let ecn = if ip[0] >> 4 == 4 {
                    ip[1] & 3
                } else {
                    (ip[1] >> 4) & 3
                };
                assert_eq!(ecn, inner, "{label}: {}", r.report);
            }
            assert_eq!(
                r.report.contains("udp-train-split"),
                !merges,
                "{label}: {}",
                r.report
            );
        }
    }
}

/// Two super-packets back to back with different acks: a train that
/// runs across them merges in two runs, never mixing the acks, and the
/// stream is whole.
#[test]
fn a_train_across_super_packets_merges_in_runs() {
    let mss = 1448;
    for (name, ca, cb, link, _, _) in train_cases() {
        let ip = if name.contains("ipv6") {
            Ip::v6()
        } else {
            Ip::v4()
        };
        let mut frames = Vec::new();
        for k in 0..3u32 {
            let t = Tcp {
                seq: Tcp::new().seq.wrapping_add(k * 45 * mss as u32),
                ack: 1000 + k,
                ..Tcp::new()
            };
            let data = payload(k as usize * 45 * mss, 45 * mss, 3);
            frames.push(super_frame(&ip, &t, &data, link, mss as u16));
        }
        let r = over_the_wire(&ca, &cb, link, &frames, true, &|_, _| {});
        assert_eq!(
            tcp_stream(&r.outputs, mss as u16),
            payload(0, 135 * mss, 3),
            "{name}"
        );
        for (d, m) in &r.outputs {
            let at = usize::from(m.l4) + 8;
            let ack = u32::from_be_bytes([d[at], d[at + 1], d[at + 2], d[at + 3]]);
            let seq = u32::from_be_bytes([d[at - 4], d[at - 3], d[at - 2], d[at - 1]]);
            let k = seq.wrapping_sub(Tcp::new().seq) / (45 * mss as u32);
            assert_eq!(ack, 1000 + k, "{name}: one ack per super-packet");
        }
        assert!(r.drops.is_empty(), "{name}: {:?}", r.drops);
        assert_eq!(r.counters.decap_in, 135, "{name}: {}", r.report);
        assert_eq!(r.counters.decap_out + r.counters.coalesced, 135);
    }
}

/// A datagram of a train with another tunnel header (here an unknown
/// VNI / TEID) ends the merged run and is dropped alone, counted; the
/// datagrams around it still arrive. A bad first datagram leaves the
/// rest to the copying path.
#[test]
fn a_stranger_in_a_train_is_dropped_alone() {
    let mss = 1448;
    for (name, ca, cb, link, bytes, meta) in train_cases() {
        for bad in [0usize, 7] {
            let tamper = |pool: &mut Pool, wire: &PacketVector| {
                let id = wire.as_slice()[0];
                let m = *pool.meta(id);
                let seg = usize::from(m.gso.unwrap().segment_size);
                let at = usize::from(m.udp_payload) + bad * seg;
                let d = pool.data_mut(id);
                // VXLAN VNI (bytes 4..7), GTP-U TEID (bytes 4..8).
                d[at + 5] ^= 0x5a;
            };
            let frames = [(bytes.clone(), meta)];
            let r = over_the_wire(&ca, &cb, link, &frames, true, &tamper);
            let mut want = payload(0, 45 * mss, 3);
            want.drain(bad * mss..(bad + 1) * mss);
            assert_eq!(tcp_stream(&r.outputs, mss as u16), want, "{name} bad {bad}");
            let reason = if name.starts_with("gtpu") {
                DropReason::UnknownTeid
            } else {
                DropReason::UnknownVni
            };
            assert_eq!(r.drops, [(reason, 1)], "{name} bad {bad}: {}", r.report);
            let c = r.counters;
            assert_eq!(c.decap_in, 45, "{name} bad {bad}: {}", r.report);
            assert_eq!(c.decap_out + c.coalesced + 1, 45);
        }
    }
}

/// Trains of inner UDP (or anything but TCP) do not merge: they take
/// the copying path and come out as they would without merging.
#[test]
fn trains_of_inner_udp_come_out_as_split_ones() {
    use crate::testpkt::udp;
    let (ca, cb) = vxlan_pair(ChecksumMode::Full);
    let eth = crate::testpkt::Eth::new();
    let frames: Vec<_> = (0..40)
        .map(|k| {
            let p = udp(
                &Ip::v4(),
                5000,
                6000,
                &payload(k * 1200, 1200, 5),
                Csum::Full,
            );
            let m = eth.meta(crate::testpkt::meta_of(&p, ChecksumState::None));
            (eth.wrap(&p), m)
        })
        .collect();
    let split = over_the_wire(&ca, &cb, InnerLink::Ethernet, &frames, false, &|_, _| {});
    let merged = over_the_wire(&ca, &cb, InnerLink::Ethernet, &frames, true, &|_, _| {});
    let bytes = |r: &Received| r.outputs.iter().map(|(d, _)| d.clone()).collect::<Vec<_>>();
    assert_eq!(bytes(&merged), bytes(&split));
    assert!(merged.drops.is_empty());
    assert_eq!(merged.counters.decap_in, 40);
}

/// Where the inner IP and TCP headers of a test datagram start, found
/// by the test addresses.
fn inner_ip_tcp(dg: &[u8], v6: bool) -> (usize, usize) {
    let key: Vec<u8> = if v6 {
        [&Ip::v6().src[..], &Ip::v6().dst[..]].concat()
    } else {
        [&Ip::v4().src[..4], &Ip::v4().dst[..4]].concat()
    };
    let at = if v6 { 8 } else { 12 };
    let ip = dg.windows(key.len()).position(|w| w == key).unwrap() - at;
    (ip, ip + if v6 { 40 } else { 20 })
}

/// A same-host Linux sender (a kernel tunnel over veth) leaves inner
/// TCP checksums holding the pseudo-header sum: its trains merge all
/// the same, nothing split, the stream whole.
#[test]
fn trains_of_partial_inner_checksums_merge() {
    let mss = 1448;
    for (name, ca, cb, link, bytes, meta) in train_cases() {
        if ca[0].checksum == ChecksumMode::Remote {
            continue;
        }
        let v6 = name.contains("ipv6");
        let tamper = |pool: &mut Pool, wire: &PacketVector| {
            for &id in wire.as_slice() {
                let m = *pool.meta(id);
                let hdr = usize::from(m.udp_payload);
                let d = pool.data_mut(id);
                let seg = m.gso.map_or(d.len() - hdr, |g| usize::from(g.segment_size));
                let n = (d.len() - hdr).div_ceil(seg);
                for k in 0..n {
                    let end = (hdr + (k + 1) * seg).min(d.len());
                    let dg = &mut d[hdr + k * seg..end];
                    let (ip, th) = inner_ip_tcp(dg, v6);
                    let len = dg.len() - th;
                    let p = crate::geometry::pseudo_header(&dg[ip..], 6, len).value();
                    dg[th + 16..th + 18].copy_from_slice(&p.to_be_bytes());
                }
            }
        };
        let frames = [(bytes.clone(), meta)];
        let r = over_the_wire(&ca, &cb, link, &frames, true, &tamper);
        assert_whole_stream(&r, name, mss);
        assert!(
            !r.report.contains("udp-train-split"),
            "{name}: {}",
            r.report
        );
        assert!(r.outputs.len() <= 2, "{name}: {}", r.report);
    }
}

/// Where the headers change inside a train (here the ack and window,
/// the checksum unchanged), the merged run ends and the rest of the
/// train merges on its own: two super-packets, each with one ack.
#[test]
fn a_run_ends_where_the_headers_change_and_the_rest_merges_alone() {
    let mss = 1448;
    for (name, ca, cb, link, bytes, meta) in train_cases() {
        let v6 = name.contains("ipv6");
        let tamper = |pool: &mut Pool, wire: &PacketVector| {
            let id = wire.as_slice()[0];
            let m = *pool.meta(id);
            let seg = usize::from(m.gso.unwrap().segment_size);
            let hdr = usize::from(m.udp_payload);
            let d = pool.data_mut(id);
            let n = (d.len() - hdr).div_ceil(seg);
            for k in 5..n {
                let dg = &mut d[hdr + k * seg..];
                let (_, th) = inner_ip_tcp(dg, v6);
                // ack + 1 and window - 1: the same one's-complement sum.
                let ack = u16::from_be_bytes([dg[th + 10], dg[th + 11]]);
                let win = u16::from_be_bytes([dg[th + 14], dg[th + 15]]);
                dg[th + 10..th + 12].copy_from_slice(&ack.wrapping_add(1).to_be_bytes());
                dg[th + 14..th + 16].copy_from_slice(&win.wrapping_sub(1).to_be_bytes());
            }
        };
        let frames = [(bytes.clone(), meta)];
        let r = over_the_wire(&ca, &cb, link, &frames, true, &tamper);
        assert_whole_stream(&r, name, mss);
        assert_eq!(r.outputs.len(), 3, "{name}: {}", r.report);
        let seqs: Vec<u32> = r
            .outputs
            .iter()
            .map(|(d, m)| {
                let at = usize::from(m.l4) + 4;
                u32::from_be_bytes([d[at], d[at + 1], d[at + 2], d[at + 3]])
            })
            .collect();
        let base = Tcp::new().seq;
        assert_eq!(
            seqs[..2],
            [base, base.wrapping_add(5 * mss as u32)],
            "{name}"
        );
        assert!(
            !r.report.contains("udp-train-split"),
            "{name}: {}",
            r.report
        );
        assert_eq!(r.counters.decap_in, 45);
        assert_eq!(r.counters.decap_out + r.counters.coalesced, 45);
    }
}

proptest::proptest! {
    #![proptest_config(proptest::test_runner::Config::with_cases(200))]

    /// Trains corrupted anywhere (tunnel header, inner headers,
    /// lengths, payload) never panic the merge: every buffer comes
    /// back, and every datagram is delivered, merged, answered or
    /// dropped with a reason.
    #[test]
    fn corrupted_trains_merge_or_drop_and_balance(
        case in 0usize..8,
        flips in proptest::collection::vec((0usize..70_000, 0u8..=255), 1..6),
        cut in 0usize..3000,
    ) {
        let cases = train_cases();
        let (_, ca, cb, link, bytes, meta) = &cases[case % cases.len()];
        let tamper = |pool: &mut Pool, wire: &PacketVector| {
            for &id in wire.as_slice() {
                let hdr = usize::from(pool.meta(id).udp_payload);
                let d = pool.data_mut(id);
                for &(at, x) in &flips {
                    // Past the outer headers, which the socket vouches for.
                    let n = d.len() - hdr;
                    d[hdr + at % n] ^= x;
                }
            }
            // A train cut short, mid-datagram.
            if let Some(&id) = wire.as_slice().first() {
                let len = pool.data(id).len();
                let hdr = usize::from(pool.meta(id).udp_payload);
                let seg = pool.meta(id).gso.map_or(len, |g| usize::from(g.segment_size));
                pool.truncate(id, (len - cut.min(len - hdr - seg.min(len - hdr))).max(hdr + 1));
            }
        };
        let r = over_the_wire(ca, cb, *link, &[(bytes.clone(), *meta)], true, &tamper);
        let c = r.counters;
        let dropped: u64 = r.drops.iter().map(|&(_, n)| n).sum();
        proptest::prop_assert_eq!(
            c.decap_in,
            c.decap_out + c.coalesced + c.answered + dropped,
            "{}",
            r.report
        );
    }
}

/// Tunnel GSO: a TCP super-packet encapsulated whole, then cut the way a
/// UDP-tunnel GSO device cuts it (the inner TCP segmented as
/// `tcp_gso_segment` does, the headers up to the inner IP copied to each
/// segment, the outer IP and UDP lengths fixed, the outer UDP checksum
/// computed per segment or left 0), gives the frames that segmenting
/// first and encapsulating each segment gives — but for the outer IPv4
/// identification and header checksum, which count per datagram on one
/// side and per segment of the super-packet on the other.
#[test]
fn tunnel_gso_equals_segment_then_encap() {
    use crate::nexthop::LinkHeader;
    use crate::testpkt::Eth;
    use crate::vnet::TunnelGsoHeader;
    let kinds = [
        TunnelKind::Vxlan,
        TunnelKind::Geneve,
        TunnelKind::Gue,
        TunnelKind::FouIpip,
        TunnelKind::FouSit,
        TunnelKind::FouGre,
        TunnelKind::GueGre,
        TunnelKind::GreInUdp,
    ];
    for kind in kinds {
        for outer_v6 in [false, true] {
            for mode in [ChecksumMode::Zero, ChecksumMode::Full, ChecksumMode::Lco] {
                let what = format!("{kind} outer v6 {outer_v6} {mode}");
                let (mut ca, _) = crate::example::tunnel_pair(kind, outer_v6, mode);
                // Routes for the test packets: every MAC, their prefixes.
                ca[0].inner_macs.clear();
                if !kind.carries_ethernet() {
                    ca[0].inner_prefixes = match kind {
                        TunnelKind::FouSit => vec!["fd00::/16".parse().unwrap()],
                        _ => vec!["10.201.0.0/16".parse().unwrap()],
                    };
                }
                let whole_frames = |tunnel_gso| PipelineOptions {
                    inner_link: InnerLink::Ethernet,
                    outer: OuterLayers::EthernetIpUdp,
                    tunnel_gso,
                    ..PipelineOptions::default()
                };
                let hop = LinkHeader {
                    dst: [2, 0, 0, 0, 0, 0xaa],
                    src: [2, 0, 0, 0, 0, 0xbb],
                    vlan: None,
                };
                let ip = if kind == TunnelKind::FouSit {
                    Ip::v6()
                } else {
                    Ip::v4()
                };
                let mss = 1400;
                let packet = tcp(
                    &ip,
                    &Tcp::new(),
                    &payload(0, 20 * mss + 7, 5),
                    Csum::Partial,
                );
                let gso_kind = if ip.v6 { GsoKind::Tcp6 } else { GsoKind::Tcp4 };
                let eth = Eth::new();
                let bytes = eth.wrap(&packet);
                let meta = eth.meta(super_meta(&packet, gso_kind, mss as u16));
                let mut pool = Pool::new(256, SUPER_PACKET_ROOM);
                let mut run = |tunnel_gso| {
                    let mut p = Pipeline::new(
                        &ca,
                        &DataplaneConfig::default(),
                        ManualClock::default(),
                        whole_frames(tunnel_gso),
                    );
                    p.next_hops().set(ca[0].remote, Some(hop));
                    let mut v = vector_of(&mut pool, &bytes, meta);
                    let mut out = Vec::new();
                    p.encap(&mut pool, &mut v, &mut |o, pool, v| {
                        assert_eq!(o, Output::Outer, "{what}");
                        for &id in v.as_slice() {
                            out.push((pool.data(id).to_vec(), *pool.meta(id)));
                            pool.free(id);
                        }
                        v.clear();
                    });
                    assert_eq!(p.drops_total(), 0, "{what}: {}", p.runtime().report());
                    out
                };
                let segmented = run(false);
                let whole = run(true);
                assert_eq!(segmented.len(), 21, "{what}");
                assert_eq!(whole.len(), 1, "{what}: one frame");
                let (frame, m) = &whole[0];
                let hdr = TunnelGsoHeader::for_frame(frame, m, mode != ChecksumMode::Zero)
                    .unwrap_or_else(|| panic!("{what}: a tunnel GSO frame: {m:?}"));
                let cut = cut_like_the_kernel(frame, &hdr, &mut pool);
                assert_eq!(cut.len(), segmented.len(), "{what}");
                for (i, (mine, (theirs, _))) in cut.iter().zip(&segmented).enumerate() {
                    assert_eq!(
                        masked_outer_id(mine),
                        masked_outer_id(theirs),
                        "{what}: segment {i}"
                    );
                }
                assert_eq!(pool.available(), pool.capacity());
            }
        }
    }
}

/// A frame's bytes with the outer IPv4 identification and header checksum
/// zeroed (IPv6: as it is).
fn masked_outer_id(frame: &[u8]) -> Vec<u8> {
    let mut f = frame.to_vec();
    if f[14] >> 4 == 4 {
        f[14 + 4..14 + 6].fill(0);
        f[14 + 10..14 + 12].fill(0);
    }
    f
}

/// What a UDP-tunnel GSO device makes of `frame` (see
/// `tunnel_gso_equals_segment_then_encap`), with tep's own TCP
/// segmentation standing in for the kernel's `tcp_gso_segment`.
fn cut_like_the_kernel(
    frame: &[u8],
    hdr: &crate::vnet::TunnelGsoHeader,
    pool: &mut Pool,
) -> Vec<Vec<u8>> {
    use crate::testpkt::meta_of;
    let inner_nh = usize::from(hdr.inner_nh_offset);
    let outer_th = usize::from(hdr.outer_th_offset);
    let inner = &frame[inner_nh..];
    let start = usize::from(hdr.base.csum_start) - inner_nh;
    let kind = if inner[0] >> 4 == 6 {
        GsoKind::Tcp6
    } else {
        GsoKind::Tcp4
    };
    let meta = crate::buffer::PacketMeta {
        gso: Some(crate::buffer::Gso {
            kind,
            segment_size: hdr.base.gso_size,
        }),
        ..meta_of(
            inner,
            ChecksumState::Partial {
                start: start as u16,
                offset: (start + usize::from(hdr.base.csum_offset)) as u16,
            },
        )
    };
    let id = pool.alloc().unwrap();
    assert!(pool.fill(id, inner));
    *pool.meta_mut(id) = meta;
    let mut segs = PacketVector::new();
    crate::gso::segment(pool, id, &mut segs, InnerLink::Ip).unwrap();
    let mut out = Vec::new();
    for &s in segs.as_slice() {
        let mut f = frame[..inner_nh].to_vec();
        f.extend_from_slice(pool.data(s));
        pool.free(s);
        let l3 = 14;
        let udp_len = f.len() - outer_th;
        if f[l3] >> 4 == 4 {
            let total = (f.len() - l3) as u16;
            f[l3 + 2..l3 + 4].copy_from_slice(&total.to_be_bytes());
            f[l3 + 10..l3 + 12].fill(0);
            let c = tep_csum::Sum::of(&f[l3..l3 + 20]).checksum();
            f[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
        } else {
            f[l3 + 4..l3 + 6].copy_from_slice(&(udp_len as u16).to_be_bytes());
        }
        f[outer_th + 4..outer_th + 6].copy_from_slice(&(udp_len as u16).to_be_bytes());
        f[outer_th + 6..outer_th + 8].fill(0);
        if hdr.base.flags & crate::vnet::F_UDP_TUNNEL_CSUM != 0 {
            let pseudo = crate::geometry::pseudo_header(&f[l3..], 17, udp_len);
            let c = pseudo.add(tep_csum::Sum::of(&f[outer_th..])).udp_checksum();
            f[outer_th + 6..outer_th + 8].copy_from_slice(&c.to_be_bytes());
        }
        out.push(f);
    }
    out
}

/// Gathered segments (their payload left in the super-packet as a tail)
/// with outer headers tep writes, as host mode's uplink sends a USO or
/// TSO super-packet it cannot send whole: the outer UDP checksum (and,
/// for `offload`, the pseudo-header sum left for the device) covers the
/// whole datagram, tail included. It covered the buffer's head alone,
/// and the peer dropped every such datagram (found by the encap fuzz
/// target).
#[test]
fn gathered_segments_get_the_outer_checksum_of_the_whole_datagram() {
    let a = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1));
    let b = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2));
    for mode in [
        ChecksumMode::Full,
        ChecksumMode::Lco,
        ChecksumMode::Offload,
        ChecksumMode::Remote,
    ] {
        let mut t = TunnelConfig::new("t", TunnelKind::Gue, a, b);
        t.checksum = mode;
        t.inner_prefixes = vec!["10.201.0.0/16".parse().unwrap()];
        let config = vec![t];
        let mut p = Pipeline::new(
            &config,
            &DataplaneConfig::default(),
            ManualClock::default(),
            PipelineOptions {
                gather: true,
                ..PipelineOptions::default()
            },
        );
        let mut pool = Pool::new(64, SUPER_PACKET_ROOM);
        let body = payload(0, 3000, 5);
        let uso = crate::testpkt::udp(&Ip::v4(), 1000, 2000, &body, Csum::Partial);
        let tso = tcp(&Ip::v4(), &Tcp::new(), &body, Csum::Partial);
        for (bytes, kind) in [(uso, GsoKind::Udp), (tso, GsoKind::Tcp4)] {
            let meta = super_meta(&bytes, kind, 1200);
            let mut v = vector_of(&mut pool, &bytes, meta);
            let mut n = 0;
            p.encap(&mut pool, &mut v, &mut |_, pool, out| {
                for &id in out.as_slice() {
                    assert!(pool.meta(id).tail.is_some(), "a gathered segment");
                    let state = pool.meta(id).csum;
                    assert!(pool.linearize(id));
                    let mut d = pool.data(id).to_vec();
                    crate::geometry::finish_offloaded(&mut d, state).unwrap();
                    let udp_len = d.len() - 40;
                    let ph = crate::geometry::pseudo_header(&d, 17, udp_len);
                    assert!(
                        ph.add(tep_csum::Sum::of(&d[40..])).verifies(),
                        "{mode} {kind:?}: outer UDP checksum of segment {n}"
                    );
                    n += 1;
                    pool.free(id);
                }
                out.clear();
            });
            assert_eq!(n, 3, "{mode} {kind:?}");
        }
        assert_eq!(p.drops_total(), 0, "{}", p.runtime().report());
        assert_eq!(pool.available(), pool.capacity());
    }
}

/// A frame from the TAP whose IP packet is followed by Ethernet padding,
/// with its TCP checksum partial: `inner-checksum` completes it over the
/// TCP segment the IP length gives, not over the padding too (as the
/// receiver, and remote checksum offload at the peer, sum it). It summed
/// to the frame's end (found by the encap fuzz target: the non-RCO and
/// RCO round trips of one frame disagreed).
#[test]
fn inner_checksum_of_a_padded_frame_stops_at_the_ip_end() {
    let a = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1));
    let b = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2));
    let mut t = TunnelConfig::new("t", TunnelKind::Vxlan, a, b);
    t.vni = 5;
    let config = vec![t];
    let mut p = Pipeline::new(
        &config,
        &DataplaneConfig::default(),
        ManualClock::default(),
        PipelineOptions {
            inner_link: InnerLink::Ethernet,
            ..PipelineOptions::default()
        },
    );
    let mut pool = Pool::new(8, SUPER_PACKET_ROOM);
    let ip = tcp(&Ip::v4(), &Tcp::new(), &payload(0, 101, 9), Csum::Partial);
    let mut f = vec![2, 0, 0, 0, 0, 0xbb, 2, 0, 0, 0, 0, 0xaa, 0x08, 0x00];
    f.extend_from_slice(&ip);
    f.extend_from_slice(&[0xde, 0xad, 0xbe, 0xef, 0x55]);
    let mut meta = crate::testpkt::meta_of(&f, ChecksumState::None);
    meta.csum = ChecksumState::Partial {
        start: 14 + 20,
        offset: 14 + 20 + 16,
    };
    let mut v = vector_of(&mut pool, &f, meta);
    let mut out = vec![];
    p.encap(&mut pool, &mut v, &mut |_, pool, o| {
        for &id in o.as_slice() {
            out.push(pool.data(id).to_vec());
            pool.free(id);
        }
        o.clear();
    });
    assert_eq!(out.len(), 1, "{}", p.runtime().report());
    // Outer IPv6 40 + UDP 8 + VXLAN 8, then the frame.
    let inner = &out[0][56..];
    assert_eq!(inner.len(), f.len(), "the padding travels");
    let tcp_seg = &inner[14 + 20..14 + ip.len()];
    let ph = tep_csum::pseudo_header_v4(
        ip[12..16].try_into().unwrap(),
        ip[16..20].try_into().unwrap(),
        6,
        tcp_seg.len() as u16,
    );
    assert!(ph.add(tep_csum::Sum::of(tcp_seg)).verifies());
}

/// Encapsulates one packet; how many came out (the buffers freed).
fn encap_count(
    p: &mut Pipeline<ManualClock>,
    pool: &mut Pool,
    bytes: &[u8],
    meta: crate::buffer::PacketMeta,
) -> usize {
    let mut v = vector_of(pool, bytes, meta);
    let mut n = 0;
    p.encap(pool, &mut v, &mut |_, pool, o| {
        n += o.len();
        for &id in o.as_slice() {
            pool.free(id);
        }
        o.clear();
    });
    n
}

/// A partial checksum whose field lies inside the inner IP header (a
/// virtio-net header with csum_start 0, csum_offset 0) is dropped as
/// malformed: completing it overwrote the IP version, and a non-IP packet
/// went into the tunnel (found by the encap fuzz target).
#[test]
fn partial_checksum_inside_the_ip_header_is_malformed() {
    let (ca, _) = gtpu_pair(ChecksumMode::Full);
    let mut p = Pipeline::new(
        &ca,
        &DataplaneConfig::default(),
        ManualClock::default(),
        PipelineOptions::default(),
    );
    let mut pool = Pool::new(8, SUPER_PACKET_ROOM);
    let ip = crate::testpkt::udp(&Ip::v4(), 1, 2, &payload(0, 40, 1), Csum::Full);
    let mut meta = crate::testpkt::meta_of(&ip, ChecksumState::None);
    meta.csum = ChecksumState::Partial {
        start: 0,
        offset: 0,
    };
    let n = encap_count(&mut p, &mut pool, &ip, meta);
    assert_eq!(n, 0);
    assert_eq!(
        p.drops(DropReason::Malformed),
        1,
        "{}",
        p.runtime().report()
    );
}

/// A frame that carries no IP with a partial checksum in its Ethernet
/// header (csum_start 0, offset 6: the source MAC) is malformed too, as
/// the peer refuses such RCO (found by the encap fuzz target,
/// fuzz/seeds/encap/crash-rco-mac).
#[test]
fn partial_checksum_inside_the_ethernet_header_is_malformed() {
    let a = IpAddr::V4(core::net::Ipv4Addr::new(192, 0, 2, 1));
    let b = IpAddr::V4(core::net::Ipv4Addr::new(192, 0, 2, 2));
    let mut t = TunnelConfig::new("t", TunnelKind::Vxlan, a, b);
    t.vni = 5;
    t.checksum = ChecksumMode::Remote;
    let config = vec![t];
    let options = PipelineOptions {
        inner_link: InnerLink::Ethernet,
        ..PipelineOptions::default()
    };
    let mut p = Pipeline::new(
        &config,
        &DataplaneConfig::default(),
        ManualClock::default(),
        options,
    );
    let mut pool = Pool::new(8, SUPER_PACKET_ROOM);
    // EtherType 0x88b5 (local experimental): no IP.
    let mut f = vec![2, 0, 0, 0, 0, 0xbb, 2, 0, 0, 0, 0, 0xaa, 0x88, 0xb5];
    f.extend_from_slice(&[0x11; 46]);
    let mut meta = crate::testpkt::meta_of(&f, ChecksumState::None);
    for (offset, sent) in [(6u16, 0usize), (20, 1)] {
        meta.csum = ChecksumState::Partial { start: 0, offset };
        let n = encap_count(&mut p, &mut pool, &f, meta);
        assert_eq!(n, sent, "offset {offset}: {}", p.runtime().report());
    }
    assert_eq!(p.drops(DropReason::Malformed), 1);
}

/// A partial checksum whose field lies in an IPv6 fragment header (a
/// non-first fragment: no transport located) is malformed: completing it
/// there rewrote the fragment header, and the peer dropped the packet
/// (found by the encap fuzz target, fuzz/seeds/encap/crash-frag-header).
#[test]
fn partial_checksum_inside_an_ipv6_extension_header_is_malformed() {
    let (mut ca, _) = gtpu_pair(ChecksumMode::Full);
    ca[0]
        .inner_prefixes
        .push("2001:db8:8::/64".parse().unwrap());
    let mut p = Pipeline::new(
        &ca,
        &DataplaneConfig::default(),
        ManualClock::default(),
        PipelineOptions::default(),
    );
    let mut pool = Pool::new(8, SUPER_PACKET_ROOM);
    // IPv6, a fragment header (offset 32 × 8, a later piece), 40 bytes.
    let mut ip = vec![0x60, 0, 0, 0, 0, 48, 44, 64];
    ip.extend_from_slice(&[0x20, 1, 0xd, 0xb8, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    ip.extend_from_slice(&[0x20, 1, 0xd, 0xb8, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    ip.extend_from_slice(&[6, 0, 0x01, 0x00, 0, 0, 0, 7]);
    ip.extend_from_slice(&[0x33; 40]);
    for (offset, sent) in [(42u16, 0usize), (50, 1)] {
        let mut meta = crate::testpkt::meta_of(&ip, ChecksumState::None);
        meta.csum = ChecksumState::Partial { start: 40, offset };
        let n = encap_count(&mut p, &mut pool, &ip, meta);
        assert_eq!(n, sent, "offset {offset}: {}", p.runtime().report());
    }
    assert_eq!(p.drops(DropReason::Malformed), 1);
}

/// The same through remote checksum offload: a VXLAN `remote` tunnel
/// left a field at the frame's offset 16 (the inner IP total length) to
/// the peer, which overwrote it (found by the encap fuzz target,
/// fuzz/seeds/encap/crash-3).
#[test]
fn partial_checksum_inside_the_ip_header_is_not_sent_as_rco() {
    let a = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1));
    let b = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2));
    let mut t = TunnelConfig::new("t", TunnelKind::Vxlan, a, b);
    t.vni = 5;
    t.checksum = ChecksumMode::Remote;
    let config = vec![t];
    let options = PipelineOptions {
        inner_link: InnerLink::Ethernet,
        ..PipelineOptions::default()
    };
    let mut p = Pipeline::new(
        &config,
        &DataplaneConfig::default(),
        ManualClock::default(),
        options,
    );
    let mut pool = Pool::new(8, SUPER_PACKET_ROOM);
    let ip = tcp(&Ip::v4(), &Tcp::new(), &payload(0, 64, 2), Csum::Partial);
    let mut f = vec![2, 0, 0, 0, 0, 0xbb, 2, 0, 0, 0, 0, 0xaa, 0x08, 0x00];
    f.extend_from_slice(&ip);
    let mut meta = crate::testpkt::meta_of(&f, ChecksumState::None);
    meta.csum = ChecksumState::Partial {
        start: 0,
        offset: 16,
    };
    let n = encap_count(&mut p, &mut pool, &f, meta);
    assert_eq!(n, 0);
    assert_eq!(
        p.drops(DropReason::Malformed),
        1,
        "{}",
        p.runtime().report()
    );
}
