//! Whole frames (gateway mode, `OuterLayers::EthernetIpUdp`): tep writes
//! the outer Ethernet header to the next hop the I/O layer resolved, strips
//! it on receive, forwards the inner IP packets of L3 tunnels as a router
//! (TTL, the Ethernet header to the inner next hop), and hands what has no
//! next hop yet to the kernel.

mod common;
use common::*;
use core::net::IpAddr;
use tep_dataplane::config::ChecksumMode;
use tep_dataplane::DropReason;
use tep_dataplane::LinkHeader;
use tep_dataplane::ManualClock;
use tep_dataplane::TunnelKind;
use tep_dataplane::{ChecksumState, Pool};
use tep_dataplane::{Output, Pipeline};

/// The header to a next hop of MAC `..:nn` from an interface of MAC `..:ee`.
fn hop(nn: u8, vlan: Option<u16>) -> LinkHeader {
    LinkHeader {
        dst: [2, 0, 0, 0, 1, nn],
        src: [2, 0, 0, 0, 1, 0xee],
        vlan,
    }
}

/// What each output got, copied out; buffers freed.
#[derive(Debug, Default)]
struct Outs {
    outer: Vec<Vec<u8>>,
    inner: Vec<Vec<u8>>,
    kernel: Vec<Vec<u8>>,
    csum: Vec<ChecksumState>,
}

fn sink(outs: &mut Outs) -> impl FnMut(Output, &mut Pool, &mut tep_dataplane::PacketVector) + '_ {
    move |o, pool, v| {
        for &id in v.as_slice() {
            let bytes = pool.data(id).to_vec();
            match o {
                Output::Outer => {
                    outs.csum.push(pool.meta(id).csum);
                    outs.outer.push(bytes)
                }
                Output::Inner => outs.inner.push(bytes),
                Output::Kernel => outs.kernel.push(bytes),
                Output::Reply => panic!("no replies here"),
            }
            pool.free(id);
        }
        v.clear();
    }
}

fn encap(p: &mut Pipeline<ManualClock>, pool: &mut Pool, frames: &[Vec<u8>]) -> Outs {
    let mut outs = Outs::default();
    let mut v = load(pool, frames);
    p.encap(pool, &mut v, &mut sink(&mut outs));
    outs
}

fn decap(p: &mut Pipeline<ManualClock>, pool: &mut Pool, frames: &[Vec<u8>]) -> Outs {
    let mut outs = Outs::default();
    let mut v = load(pool, frames);
    p.decap(pool, &mut v, 0, &mut sink(&mut outs));
    outs
}

/// The inner packets of a kind, as frames from the inner interface.
fn inner_frames(kind: TunnelKind) -> Vec<Vec<u8>> {
    let ip = match kind {
        TunnelKind::FouSit => vec![udp6(b"hello", 1000), udp6(&[7; 1400], 1001)],
        TunnelKind::FouIpip => vec![tcp4(b"hello", 1000), tcp4(&[7; 1400], 1001)],
        _ => vec![tcp4(b"hello", 1000), udp6(&[7; 1400], 1001)],
    };
    ip.iter().map(|p| frame(p)).collect()
}

/// `frame` as a router forwards it: TTL / hop limit one less (IPv4: its
/// header checksum recomputed), the Ethernet header `to`.
fn forwarded(frame: &[u8], to: &LinkHeader) -> Vec<u8> {
    let mut ip = frame[14..].to_vec();
    if ip[0] >> 4 == 4 {
        ip[8] -= 1;
        ip[10..12].fill(0);
        let c = tep_csum::Sum::of(&ip[..20]).checksum();
        ip[10..12].copy_from_slice(&c.to_be_bytes());
    } else {
        ip[7] -= 1;
    }
    let mut out = vec![0u8; to.len()];
    to.write(&mut out, ip[0] >> 4 == 6);
    out.extend_from_slice(&ip);
    out
}

#[test]
fn every_kind_crosses_two_gateways_as_frames() {
    for kind in TunnelKind::ALL {
        for v6 in [false, true] {
            for mode in [ChecksumMode::Zero, ChecksumMode::Full] {
                let (ca, cb) = pair(kind, v6, mode);
                let what = format!("{kind} v6={v6} {mode}");
                let (mut a, mut b) = (gateway(&ca), gateway(&cb));
                let mut pool = pool();
                let underlay = hop(1, Some(7));
                a.next_hops().set(ca[0].remote, Some(underlay));
                let inner = inner_frames(kind);
                let enc = encap(&mut a, &mut pool, &inner);
                assert!(enc.kernel.is_empty(), "{what}");
                assert_eq!(
                    enc.outer.len(),
                    inner.len(),
                    "{what}: {}",
                    a.runtime().report()
                );
                for f in &enc.outer {
                    assert_eq!(&f[..12], &[2, 0, 0, 0, 1, 1, 2, 0, 0, 0, 1, 0xee]);
                    assert_eq!(&f[12..14], &[0x81, 0x00], "{what}: tagged");
                    let ip = &f[18..];
                    match mode {
                        ChecksumMode::Zero => assert_eq!(outer_udp_ok(ip), None, "{what}"),
                        _ => assert_eq!(outer_udp_ok(ip), Some(true), "{what}"),
                    }
                }
                // The inner next hops at B, for every destination.
                let inner_hop = hop(9, None);
                for f in &inner {
                    let ip = &f[14..];
                    let dst: IpAddr = if ip[0] >> 4 == 4 {
                        IpAddr::from(<[u8; 4]>::try_from(&ip[16..20]).unwrap())
                    } else {
                        IpAddr::from(<[u8; 16]>::try_from(&ip[24..40]).unwrap())
                    };
                    b.next_hops().set(dst, Some(inner_hop));
                }
                let dec = decap(&mut b, &mut pool, &enc.outer);
                assert!(dec.kernel.is_empty(), "{what}");
                let want: Vec<Vec<u8>> = if kind.carries_ethernet() {
                    // Bridged: the frame as it entered A.
                    inner.clone()
                } else {
                    // Routed twice: a TTL less at each gateway.
                    inner
                        .iter()
                        .map(|f| forwarded(&forwarded(f, &inner_hop), &inner_hop))
                        .collect()
                };
                assert_eq!(dec.inner, want, "{what}: {}", b.runtime().report());
                assert_balanced(&a);
                assert_balanced(&b);
                assert_no_leak(&pool);
            }
        }
    }
}

#[test]
fn packets_without_a_next_hop_go_to_the_kernel_and_are_noted() {
    let (ca, cb) = pair(TunnelKind::Gtpu, true, ChecksumMode::Full);
    let (mut a, mut b) = (gateway(&ca), gateway(&cb));
    let mut pool = pool();
    let inner = inner_frames(TunnelKind::Gtpu);
    let enc = encap(&mut a, &mut pool, &inner);
    assert_eq!((enc.outer.len(), enc.kernel.len()), (0, 2));
    // Whole outer packets, without an Ethernet header: the kernel routes.
    assert_eq!(outer_udp_ok(&enc.kernel[0]), Some(true));
    let mut wanted = Vec::new();
    a.next_hops().take_wanted(&mut wanted);
    assert_eq!(wanted, vec![ca[0].remote], "noted once");
    assert_eq!(a.counters().to_kernel, 2);
    assert_balanced(&a);
    // Once resolved, the next packets go out as frames.
    a.next_hops().set(ca[0].remote, Some(hop(1, None)));
    let enc = encap(&mut a, &mut pool, &inner);
    assert_eq!((enc.outer.len(), enc.kernel.len()), (2, 0));
    // Decap: the inner destination is unknown at B.
    let dec = decap(&mut b, &mut pool, &enc.outer);
    assert_eq!((dec.inner.len(), dec.kernel.len()), (0, 2));
    // As A forwarded it: the kernel routes it as a router itself.
    assert_eq!(dec.kernel[0], forwarded(&inner[0], &hop(0, None))[14..]);
    let mut wanted = Vec::new();
    b.next_hops().take_wanted(&mut wanted);
    assert_eq!(wanted.len(), 2, "two inner destinations");
    assert_balanced(&b);
    assert_no_leak(&pool);
}

#[test]
fn frames_that_are_not_ip_and_short_ones_drop_at_ethernet_input() {
    let (_, cb) = pair(TunnelKind::Vxlan, false, ChecksumMode::Full);
    let mut b = gateway(&cb);
    let mut pool = pool();
    let mut arp = vec![0u8; 60];
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    decap(&mut b, &mut pool, &[arp, vec![0u8; 10]]);
    assert_eq!(
        drop_nodes(&b, DropReason::NotIp),
        vec![("ethernet-input", 1)]
    );
    assert_eq!(
        drop_nodes(&b, DropReason::Truncated),
        vec![("ethernet-input", 1)]
    );
    assert_balanced(&b);
    assert_no_leak(&pool);
}

/// A packet that would leave its tunnel larger than the path MTU is
/// dropped (`too_big`) and its sender told the MTU that fits, as the
/// kernel's tunnels do: ICMP Fragmentation Needed for IPv4 with DF, Packet
/// Too Big for IPv6; an IPv4 packet without DF is dropped without one.
/// A bridged frame's error goes back to the frame's source MAC.
#[test]
fn too_big_for_the_path_gets_icmp_back_to_its_sender() {
    use tep_dataplane::RouterOptions;
    for kind in [TunnelKind::Gue, TunnelKind::Vxlan] {
        let (ca, _) = pair(kind, false, ChecksumMode::Full);
        let t = &ca[0];
        let added = tep_dataplane::overhead(t) - if kind.carries_ethernet() { 14 } else { 0 };
        let mut a = gateway(&ca);
        a.set_router(RouterOptions {
            path_mtu: 1500,
            v4: Some([192, 0, 2, 254].into()),
            ..RouterOptions::default()
        });
        a.next_hops().set(t.remote, Some(hop(1, None)));
        let back = hop(9, None);
        for sender in [
            IpAddr::from([10, 0, 0, 1]),
            "2001:db8:9::1".parse().unwrap(),
        ] {
            a.next_hops().set(sender, Some(back));
        }
        let mut pool = pool();
        // Inner IP packets that fit exactly, and one byte more.
        let link = if kind.carries_ethernet() { 14 } else { 0 };
        let fits = 1500 - added as usize - link;
        let v4 = |len: usize| tcp4(&vec![1; len - 40], 1000);
        let v6 = |len: usize| udp6(&vec![2; len - 48], 1000);
        let mut no_df = v4(fits + 1);
        no_df[6] = 0;
        no_df[10..12].fill(0);
        let c = tep_csum::Sum::of(&no_df[..20]).checksum();
        no_df[10..12].copy_from_slice(&c.to_be_bytes());
        let frames: Vec<Vec<u8>> = [v4(fits), v4(fits + 1), v6(fits), v6(fits + 1), no_df]
            .iter()
            .map(|p| frame(p))
            .collect();
        let outs = encap(&mut a, &mut pool, &frames);
        let what = format!("{kind}");
        assert_eq!(outs.outer.len(), 2, "{what}: {}", a.runtime().report());
        assert!(outs.outer.iter().all(|f| f.len() == 14 + 1500), "{what}");
        assert_eq!(a.drops(DropReason::TooBig), 3, "{what}");
        assert_eq!(outs.inner.len(), 2, "{what}: two errors");
        for e in &outs.inner {
            let (mac, from) = if kind.carries_ethernet() {
                // Mirrored: to the frame's source, as if from its destination.
                (&frame(&[0x45])[6..12], &frame(&[0x45])[..6])
            } else {
                (&back.dst[..], &back.src[..])
            };
            assert_eq!((&e[..6], &e[6..12]), (mac, from), "{what}");
            match e[12..14] {
                [0x08, 0x00] => {
                    let ip = &e[14..];
                    assert_eq!((ip[9], ip[20], ip[21]), (1, 3, 4), "{what}: frag needed");
                    assert_eq!(
                        u16::from_be_bytes([ip[26], ip[27]]) as usize,
                        fits,
                        "{what}"
                    );
                    assert_eq!(&ip[12..16], &[192, 0, 2, 254], "{what}: from the router");
                }
                _ => {
                    let ip = &e[14..];
                    assert_eq!((ip[6], ip[40]), (58, 2), "{what}: packet too big");
                    let mtu = u32::from_be_bytes([ip[44], ip[45], ip[46], ip[47]]);
                    assert_eq!(mtu as usize, fits, "{what}");
                }
            }
        }
        assert_eq!(a.counters().icmp_errors, 2, "{what}");
        assert_no_leak(&pool);
    }
}

/// A gateway as a UPF: downlink frames to a UE leave as frames to the
/// next hop of the session's gNB (the N3 tunnel has no remote of its
/// own), asked for by the gNB's address while unknown; frames held while
/// the session buffers leave in order, as frames, when it forwards; an End
/// Marker leaves as a frame to the old gNB.
#[test]
fn sessions_leave_as_frames_to_their_peers() {
    use tep_dataplane::example;
    use tep_dataplane::session::control::Sessions;
    use tep_dataplane::session::Action;
    let config = example::upf(false, ChecksumMode::Full);
    let (mut c, links) = Sessions::new(64, 1, vec![false]);
    let mut a = gateway(&config);
    a.attach_sessions(links[0].clone(), 4, 64);
    let mut pool = pool();
    let settle = |c: &mut Sessions, a: &mut Pipeline<ManualClock>, pool: &mut Pool| {
        c.publish();
        let mut outs = Outs::default();
        a.apply_session_changes(pool, &mut |o, pool, v| {
            for &id in v.as_slice() {
                let bytes = pool.data(id).to_vec();
                match o {
                    Output::Kernel => outs.kernel.push(bytes),
                    _ => outs.outer.push(bytes),
                }
                pool.free(id);
            }
            v.clear();
        });
        outs
    };
    let mut s = example::session(1, false, false);
    let gnb = s.peer.unwrap().0;
    let slot = c.create(&s).unwrap();
    settle(&mut c, &mut a, &mut pool);
    let to_ue = |k: u8| {
        let ip = inner_packet_to(IpAddr::from([10, 0, 0, 1]), &[k; 32]);
        frame(&ip)
    };
    // Unresolved: to the kernel, the gNB's address asked for.
    let out = encap(&mut a, &mut pool, &[to_ue(0)]);
    assert_eq!((out.outer.len(), out.kernel.len()), (0, 1));
    let mut wanted = Vec::new();
    a.next_hops().take_wanted(&mut wanted);
    assert_eq!(wanted, vec![gnb]);
    a.next_hops().set(gnb, Some(hop(9, None)));
    let out = encap(&mut a, &mut pool, &[to_ue(1)]);
    assert_eq!(out.outer.len(), 1);
    assert_eq!(out.outer[0][..6], hop(9, None).dst);
    // Buffered, then released in order as frames.
    s.downlink = Action::Buffer;
    c.modify(slot, &s, false).unwrap();
    settle(&mut c, &mut a, &mut pool);
    let held: Vec<Vec<u8>> = (2..5u8).map(to_ue).collect();
    let out = encap(&mut a, &mut pool, &held);
    assert_eq!((out.outer.len(), out.kernel.len()), (0, 0));
    s.downlink = Action::Forward;
    c.modify(slot, &s, false).unwrap();
    let out = settle(&mut c, &mut a, &mut pool);
    assert_eq!(out.outer.len(), 3);
    for (k, f) in out.outer.iter().enumerate() {
        assert_eq!(f[..6], hop(9, None).dst);
        // Ethernet, IPv4 20, UDP 8, GTP-U 8 + 4 + container 4: the inner
        // packet follows as it was held, routed (TTL one less).
        let routed = forwarded(&held[k], &hop(0, None));
        assert_eq!(f[14 + 20 + 8 + 16..], routed[14..], "in order");
    }
    // Handover to another gNB with an End Marker to the old one.
    let old = s.peer.unwrap();
    s.peer = Some((IpAddr::from([192, 0, 2, 99]), 0x777));
    c.modify(slot, &s, true).unwrap();
    let out = settle(&mut c, &mut a, &mut pool);
    assert_eq!(out.outer.len(), 1, "the End Marker, framed");
    let m = &out.outer[0];
    assert_eq!(m[..6], hop(9, None).dst);
    assert_eq!(m[14 + 20 + 8 + 1], 254, "GTP-U End Marker");
    assert_eq!(m[14 + 20 + 8 + 4..14 + 20 + 8 + 8], old.1.to_be_bytes());
    assert_balanced(&a);
    assert_no_leak(&pool);
}

/// An IPv4 UDP packet from a server to `dst`.
fn inner_packet_to(dst: IpAddr, payload: &[u8]) -> Vec<u8> {
    let IpAddr::V4(d) = dst else { unreachable!() };
    let len = 28 + payload.len();
    let mut p = vec![0u8; len];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    p[8] = 64;
    p[9] = 17;
    p[12..16].copy_from_slice(&[198, 51, 100, 1]);
    p[16..20].copy_from_slice(&d.octets());
    let c = tep_csum::Sum::of(&p[..20]).checksum();
    p[10..12].copy_from_slice(&c.to_be_bytes());
    p[20..22].copy_from_slice(&5000u16.to_be_bytes());
    p[22..24].copy_from_slice(&6000u16.to_be_bytes());
    p[24..26].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    p[28..].copy_from_slice(payload);
    p
}
