//! Networks end to end: three VTEPs' pipelines on one wire, each with the
//! same VXLAN network, an overlay of its own.

use super::fdb::{Dst, FdbKey, Origin};
use super::*;
use crate::buffer::{PacketMeta, Pool};
use crate::clock::ManualClock;
use crate::config::{ChecksumMode, DataplaneConfig, NetworkSettings, TunnelConfig};
use crate::drop::DropReason;
use crate::geometry::InnerLink;
use crate::io::OuterLayers;
use crate::kind::TunnelKind;
use crate::pipeline::{Output, Pipeline, PipelineOptions};
use crate::testpkt::{self, Csum, Ip};
use crate::vector::PacketVector;
use core::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

const M1: [u8; 6] = [2, 0, 0, 0, 0, 1];
const M2: [u8; 6] = [2, 0, 0, 0, 0, 2];
const M3: [u8; 6] = [2, 0, 0, 0, 0, 3];
const BROADCAST: [u8; 6] = [0xff; 6];

fn vtep(i: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(192, 0, 2, i))
}

/// VTEP `i` of three (1, 2, 3): network "blue", VNI 100, flooding to the
/// other two, `edit` applied to its settings and tunnel.
struct Vtep {
    pipeline: Pipeline<ManualClock>,
    overlay: Arc<Overlay>,
    addr: IpAddr,
}

fn vtep_with(
    i: u8,
    mode: ChecksumMode,
    outer: OuterLayers,
    edit: impl Fn(&mut NetworkSettings),
) -> Vtep {
    let mut s = NetworkSettings {
        flood: (1..=3).filter(|&j| j != i).map(vtep).collect(),
        ..NetworkSettings::default()
    };
    edit(&mut s);
    let mut t = TunnelConfig::network("blue", TunnelKind::Vxlan, vtep(i), s);
    t.vni = 100;
    t.checksum = mode;
    let tunnels = vec![t];
    let overlay = Arc::new(Overlay::new(&tunnels, 1024, 64).unwrap());
    let options = PipelineOptions {
        inner_link: InnerLink::Ethernet,
        outer,
        ..PipelineOptions::default()
    };
    let mut pipeline = Pipeline::new(
        &tunnels,
        &DataplaneConfig::default(),
        ManualClock::default(),
        options,
    );
    pipeline.attach_overlay(overlay.clone());
    Vtep {
        pipeline,
        overlay,
        addr: vtep(i),
    }
}

fn three(mode: ChecksumMode) -> Vec<Vtep> {
    (1..=3)
        .map(|i| vtep_with(i, mode, OuterLayers::IpUdp, |_| {}))
        .collect()
}

fn frame(dst: [u8; 6], src: [u8; 6], salt: u8) -> Vec<u8> {
    let mut f = dst.to_vec();
    f.extend_from_slice(&src);
    f.extend_from_slice(&[0x08, 0x00]);
    f.extend(testpkt::udp(
        &Ip::v4(),
        1000,
        2000,
        &testpkt::payload(0, 100, salt),
        Csum::Full,
    ));
    f
}

fn arp_request(src: [u8; 6], sender: [u8; 4], target: [u8; 4]) -> Vec<u8> {
    let mut f = BROADCAST.to_vec();
    f.extend_from_slice(&src);
    f.extend_from_slice(&[0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1]);
    f.extend_from_slice(&src);
    f.extend_from_slice(&sender);
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&target);
    f
}

/// What a pipeline hands out, by output.
#[derive(Default)]
struct Out {
    outer: Vec<(Vec<u8>, IpAddr)>,
    inner: Vec<Vec<u8>>,
}

fn take(out: &mut Out, o: Output, pool: &mut Pool, v: &mut PacketVector) {
    for &id in v.as_slice() {
        let bytes = pool.data(id).to_vec();
        match o {
            Output::Inner => out.inner.push(bytes),
            _ => {
                let dst = if pool.meta(id).by_socket {
                    pool.outer(id).dst
                } else {
                    IpAddr::V4(Ipv4Addr::new(bytes[16], bytes[17], bytes[18], bytes[19]))
                };
                out.outer.push((bytes, dst));
            }
        }
        pool.free(id);
    }
}

/// Frame `bytes` from VTEP `v`'s local side.
fn send(pool: &mut Pool, v: &mut Vtep, bytes: &[u8]) -> Out {
    let mut input = testpkt::vector_of(pool, bytes, PacketMeta::FRESH);
    let mut out = Out::default();
    v.pipeline.encap_into(
        0,
        InnerLink::Ethernet,
        pool,
        &mut input,
        &mut |o, pool, vv| take(&mut out, o, pool, vv),
    );
    out
}

/// Outer packet `bytes` into VTEP `v`.
fn receive(pool: &mut Pool, v: &mut Vtep, bytes: &[u8]) -> Out {
    let mut input = testpkt::vector_of(pool, bytes, PacketMeta::FRESH);
    let mut out = Out::default();
    v.pipeline.decap(pool, &mut input, 0, &mut |o, pool, vv| {
        take(&mut out, o, pool, vv)
    });
    out
}

/// Sends `bytes` from VTEP `from` and delivers what leaves to the VTEPs
/// it is addressed to: what each hands its local side.
fn across(pool: &mut Pool, vs: &mut [Vtep], from: usize, bytes: &[u8]) -> Vec<(usize, Vec<u8>)> {
    let sent = send(pool, &mut vs[from], bytes);
    let mut got = Vec::new();
    for (b, dst) in sent.outer {
        let to = vs
            .iter()
            .position(|v| v.addr == dst)
            .expect("to a VTEP of the three");
        for inner in receive(pool, &mut vs[to], &b).inner {
            got.push((to, inner));
        }
    }
    got
}

fn entry(v: &Vtep, mac: [u8; 6]) -> Option<fdb::Entry> {
    v.overlay.fdb().lookup(FdbKey::new(0, mac))
}

fn remote(v: &Vtep, addr: IpAddr) -> Dst {
    Dst::Remote(v.overlay.find_vtep(addr).expect("a known VTEP"))
}

/// A broadcast reaches each peer once, in every checksum mode whose
/// receiver verifies; each learns the sender; unicast answers go to one
/// VTEP only, learned on the way.
#[test]
fn a_broadcast_reaches_every_peer_once_and_learning_follows() {
    for mode in [
        ChecksumMode::Full,
        ChecksumMode::Lco,
        ChecksumMode::Zero,
        ChecksumMode::Remote,
    ] {
        let mut pool = Pool::new(64, 4096);
        let mut vs = three(mode);
        let b = frame(BROADCAST, M1, 1);
        let got = across(&mut pool, &mut vs, 0, &b);
        assert_eq!(
            got.len(),
            2,
            "{mode}: {}",
            vs[0].pipeline.runtime().report()
        );
        assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), vec![1, 2]);
        assert!(got.iter().all(|g| g.1 == b), "{mode}: the frame as sent");
        assert_eq!(vs[0].pipeline.counters().flood_copies, 1);
        assert_eq!(entry(&vs[0], M1).map(|e| e.dst), Some(Dst::Local));
        for v in &vs[1..] {
            assert_eq!(
                entry(v, M1).map(|e| e.dst),
                Some(remote(v, vtep(1))),
                "{mode}"
            );
        }
        // VTEP 2 answers M1: to VTEP 1 alone, which learns M2.
        let u = frame(M1, M2, 2);
        let got = across(&mut pool, &mut vs, 1, &u);
        assert_eq!(got, vec![(0, u.clone())], "{mode}");
        assert_eq!(
            entry(&vs[0], M2).map(|e| e.dst),
            Some(remote(&vs[0], vtep(2)))
        );
        let back = frame(M2, M1, 3);
        assert_eq!(
            across(&mut pool, &mut vs, 0, &back),
            vec![(1, back.clone())]
        );
        for v in &vs {
            assert_eq!(
                v.pipeline.drops_total(),
                0,
                "{mode}: {}",
                v.pipeline.runtime().report()
            );
        }
        assert_eq!(pool.available(), 64, "every buffer back");
    }
}

/// Copies of a flooded frame in socket mode carry their own destination.
#[test]
fn copies_for_a_socket_name_their_vtep() {
    let mut pool = Pool::new(64, 4096);
    let mut a = vtep_with(1, ChecksumMode::Full, OuterLayers::UdpPayload, |s| {
        s.flood.push(vtep(4));
    });
    let out = send(&mut pool, &mut a, &frame(BROADCAST, M1, 1));
    let dsts: Vec<IpAddr> = out.outer.iter().map(|o| o.1).collect();
    assert_eq!(dsts, vec![vtep(2), vtep(3), vtep(4)]);
    assert!(
        out.outer.iter().all(|o| o.0 == out.outer[0].0),
        "same payload"
    );
    assert_eq!(a.pipeline.counters().flood_copies, 2);
}

/// A MAC seen behind another VTEP moves (counted); a static entry does
/// not; a frame to a local MAC stays out of the overlay.
#[test]
fn moves_are_followed_static_entries_pinned_local_macs_kept() {
    let mut pool = Pool::new(64, 4096);
    let mut vs = three(ChecksumMode::Full);
    vs[0].overlay.fdb_add("blue", M3, vtep(3), false).unwrap();
    across(&mut pool, &mut vs, 1, &frame(BROADCAST, M2, 1));
    assert_eq!(
        entry(&vs[0], M2).map(|e| e.dst),
        Some(remote(&vs[0], vtep(2)))
    );
    // M2 now behind VTEP 3; M3 claimed by VTEP 2.
    across(&mut pool, &mut vs, 2, &frame(BROADCAST, M2, 2));
    across(&mut pool, &mut vs, 1, &frame(BROADCAST, M3, 3));
    let o = &vs[0].overlay;
    assert_eq!(
        entry(&vs[0], M2).map(|e| e.dst),
        Some(remote(&vs[0], vtep(3)))
    );
    let e3 = entry(&vs[0], M3).unwrap();
    assert_eq!(
        (e3.dst, e3.origin),
        (remote(&vs[0], vtep(3)), Origin::Static)
    );
    let s = o.stats()[0];
    assert_eq!((s.moved, s.move_refused), (1, 1));
    // M1 is local to VTEP 1 (learned from its side): not sent.
    send(&mut pool, &mut vs[0], &frame(BROADCAST, M1, 4));
    let out = send(&mut pool, &mut vs[0], &frame(M1, [2, 0, 0, 0, 0, 9], 5));
    assert!(out.outer.is_empty());
    assert_eq!(vs[0].pipeline.drops(DropReason::LocalMac), 1);
}

/// With learning off, only the VTEPs the network names are received
/// from, and nothing is learned.
#[test]
fn learning_off_takes_only_named_vteps() {
    let mut pool = Pool::new(64, 4096);
    let mut a = vtep_with(1, ChecksumMode::Full, OuterLayers::IpUdp, |s| {
        s.learning = false;
        s.flood = vec![vtep(2)];
    });
    let mut c = vtep_with(3, ChecksumMode::Full, OuterLayers::IpUdp, |_| {});
    let mut b = vtep_with(2, ChecksumMode::Full, OuterLayers::IpUdp, |_| {});
    for (from, delivered) in [(&mut b, 1), (&mut c, 0)] {
        let out = send(&mut pool, from, &frame(M1, M2, 1));
        let to_a = out
            .outer
            .iter()
            .find(|o| o.1 == vtep(1))
            .expect("flooded to VTEP 1");
        assert_eq!(receive(&mut pool, &mut a, &to_a.0).inner.len(), delivered);
    }
    assert_eq!(a.pipeline.drops(DropReason::WrongPeer), 1);
    assert_eq!(entry(&a, M2), None, "nothing learned");
}

/// A burst of random source MACs stops at the network's limit; frames
/// from known MACs keep flowing, and the refusals are counted.
#[test]
fn the_limit_bounds_learning() {
    let mut pool = Pool::new(64, 4096);
    let mut a = vtep_with(1, ChecksumMode::Full, OuterLayers::IpUdp, |s| {
        s.max_macs = 4
    });
    let mut b = vtep_with(2, ChecksumMode::Full, OuterLayers::IpUdp, |_| {});
    for i in 0..10u8 {
        let out = send(&mut pool, &mut b, &frame(BROADCAST, [2, 0, 0, 1, 0, i], i));
        let to_a = out.outer.iter().find(|o| o.1 == vtep(1)).unwrap();
        assert_eq!(
            receive(&mut pool, &mut a, &to_a.0).inner.len(),
            1,
            "delivered anyway"
        );
    }
    let s = a.overlay.stats()[0];
    assert_eq!((s.learned, s.learn_refused, s.entries), (4, 6, 4));
    assert_eq!(a.overlay.fdb().learned(0), 4);
}

/// An ARP request for a known address is answered to the local side and
/// never reaches the overlay; an unknown one is flooded; replies seen
/// teach the table.
#[test]
fn arp_requests_for_known_addresses_are_answered_locally() {
    let mut pool = Pool::new(64, 4096);
    let mut vs: Vec<Vtep> = (1..=2)
        .map(|i| {
            vtep_with(i, ChecksumMode::Full, OuterLayers::IpUdp, |s| {
                s.neigh_suppress = true
            })
        })
        .collect();
    vs[0]
        .overlay
        .neigh_add("blue", IpAddr::from([10, 0, 0, 2]), M2, false)
        .unwrap();
    let out = send(
        &mut pool,
        &mut vs[0],
        &arp_request(M1, [10, 0, 0, 1], [10, 0, 0, 2]),
    );
    assert!(out.outer.is_empty(), "suppressed");
    assert_eq!(out.inner.len(), 1);
    let reply = &out.inner[0];
    assert_eq!(&reply[..6], &M1, "to the requester");
    assert_eq!(&reply[22..28], &M2, "the known MAC");
    assert_eq!(vs[0].pipeline.counters().suppressed, 1);
    assert_eq!(vs[0].overlay.stats()[0].suppressed, 1);
    // Unknown: flooded to the two others.
    let out = send(
        &mut pool,
        &mut vs[0],
        &arp_request(M1, [10, 0, 0, 1], [10, 0, 0, 3]),
    );
    assert_eq!(out.outer.len(), 2);
    // A reply from VTEP 2's side teaches VTEP 1 (from the overlay).
    let mut r = arp_request(M3, [10, 0, 0, 3], [10, 0, 0, 1]);
    r[..6].copy_from_slice(&M1);
    r[21] = 2;
    r[32..38].copy_from_slice(&M1);
    let sent = send(&mut pool, &mut vs[1], &r);
    let to_a = sent.outer.iter().find(|o| o.1 == vtep(1)).unwrap();
    receive(&mut pool, &mut vs[0], &to_a.0);
    let n = vs[0]
        .overlay
        .neighbours()
        .get(0, IpAddr::from([10, 0, 0, 3]));
    assert_eq!(n.map(|n| n.mac), Some(M3));
}

/// `fdb-learn` asks once per run of frames with the same tunnel, source
/// MAC and VTEP; a suppressing network's frames are still each read:
/// announcements of three addresses by one host, received in one vector,
/// are all learned (and the host's MAC once, behind its VTEP).
#[test]
fn a_run_of_announcements_is_read_frame_by_frame() {
    let mut pool = Pool::new(64, 4096);
    let mut vs: Vec<Vtep> = (1..=2)
        .map(|i| {
            vtep_with(i, ChecksumMode::Full, OuterLayers::IpUdp, |s| {
                s.neigh_suppress = true
            })
        })
        .collect();
    let mut input = PacketVector::new();
    for host in 3..=5 {
        let mut r = arp_request(M3, [10, 0, 0, host], [10, 0, 0, 1]);
        r[..6].copy_from_slice(&M1);
        r[21] = 2;
        r[32..38].copy_from_slice(&M1);
        let sent = send(&mut pool, &mut vs[1], &r);
        let (bytes, _) = sent.outer.iter().find(|o| o.1 == vtep(1)).unwrap();
        input
            .push(testpkt::load(&mut pool, bytes, PacketMeta::FRESH))
            .unwrap();
    }
    let mut inner = 0;
    vs[0]
        .pipeline
        .decap(&mut pool, &mut input, 0, &mut |o, pool, vv| {
            if o == Output::Inner {
                inner += vv.len();
            }
            for &id in vv.as_slice() {
                pool.free(id);
            }
        });
    assert_eq!(inner, 3);
    for host in 3..=5 {
        let n = vs[0]
            .overlay
            .neighbours()
            .get(0, IpAddr::from([10, 0, 0, host]));
        assert_eq!(n.map(|n| n.mac), Some(M3), "10.0.0.{host}");
    }
    let e = entry(&vs[0], M3).expect("learned");
    assert_eq!(e.dst, remote(&vs[0], vtep(2)));
    assert_eq!(vs[0].overlay.stats()[0].learned, 1);
}

/// A control plane's neighbour answers ARP like a static one; it never
/// displaces a static entry, is not displaced by learning, and goes only
/// by its control plane's removal.
#[test]
fn external_neighbours_answer_and_keep_their_place() {
    let mut pool = Pool::new(64, 4096);
    let mut v = vtep_with(1, ChecksumMode::Full, OuterLayers::IpUdp, |s| {
        s.neigh_suppress = true
    });
    let (a2, a3) = (IpAddr::from([10, 0, 0, 2]), IpAddr::from([10, 0, 0, 3]));
    let o = v.overlay.clone();
    o.neigh_set_external("blue", a2, M2).unwrap();
    o.neigh_add("blue", a3, M3, false).unwrap();
    assert!(matches!(
        o.neigh_set_external("blue", a3, M2),
        Err(OverlayError::Exists(_))
    ));
    let out = send(
        &mut pool,
        &mut v,
        &arp_request(M1, [10, 0, 0, 1], [10, 0, 0, 2]),
    );
    assert!(out.outer.is_empty(), "suppressed");
    assert_eq!(&out.inner[0][22..28], &M2);
    // A local host claiming the address does not take it over.
    let mut claim = arp_request(M1, [10, 0, 0, 2], [10, 0, 0, 9]);
    claim[21] = 2;
    send(&mut pool, &mut v, &claim);
    let n = o.neighbours().get(0, a2).unwrap();
    assert_eq!((n.mac, n.origin), (M2, Origin::External));
    assert_eq!(o.neigh_del_external("blue", a3), Ok(false), "static stays");
    assert_eq!(o.neigh_del_external("blue", a2), Ok(true));
    assert!(o.neighbours().get(0, a2).is_none());
    assert!(o.neighbours().get(0, a3).is_some());
}

/// An L3 network sends each packet to the VTEP its route names.
#[test]
fn an_l3_network_routes_by_prefix() {
    let s = NetworkSettings {
        routes: vec![
            ("10.201.0.0/16".parse().unwrap(), vtep(2)),
            ("10.201.0.2/32".parse().unwrap(), vtep(3)),
        ],
        ..NetworkSettings::default()
    };
    let t = TunnelConfig::network("l3", TunnelKind::Gue, vtep(1), s);
    let tunnels = vec![t];
    let overlay = Arc::new(Overlay::new(&tunnels, 1024, 64).unwrap());
    let mut p = Pipeline::new(
        &tunnels,
        &DataplaneConfig::default(),
        ManualClock::default(),
        PipelineOptions::default(),
    );
    p.attach_overlay(overlay.clone());
    let mut pool = Pool::new(16, 4096);
    let mut dsts = Vec::new();
    for last in [2u8, 9] {
        let mut ip = Ip::v4();
        ip.dst[3] = last;
        let pkt = testpkt::udp(&ip, 1, 2, b"x", Csum::Full);
        let mut v = testpkt::vector_of(&mut pool, &pkt, PacketMeta::FRESH);
        let mut out = Out::default();
        p.encap_into(0, InnerLink::Ip, &mut pool, &mut v, &mut |o, pool, vv| {
            take(&mut out, o, pool, vv)
        });
        dsts.extend(out.outer.into_iter().map(|o| o.1));
    }
    assert_eq!(dsts, vec![vtep(3), vtep(2)], "longest prefix first");
    overlay
        .route_del("l3", "10.201.0.0/16".parse().unwrap())
        .unwrap();
    let mut ip = Ip::v4();
    ip.dst[3] = 9;
    let pkt = testpkt::udp(&ip, 1, 2, b"x", Csum::Full);
    let mut v = testpkt::vector_of(&mut pool, &pkt, PacketMeta::FRESH);
    p.encap_into(0, InnerLink::Ip, &mut pool, &mut v, &mut |_, pool, vv| {
        for &id in vv.as_slice() {
            pool.free(id);
        }
    });
    assert_eq!(p.drops(DropReason::NoRoute), 1, "the route is gone at once");
}
