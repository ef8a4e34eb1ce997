//! A UPF's sessions through the pipeline: uplink G-PDUs found by TEID
//! (and QFI), downlink packets found by UE address and sent to the
//! session's gNB with its TEID and QFI, FAR actions (forward, drop,
//! buffer), End Markers, usage counts, accounting. Outer packets are
//! built and parsed with tep_wire.

mod common;
use common::upf::*;
use common::*;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use tep_dataplane::drop::DropReason;
use tep_dataplane::example;
use tep_dataplane::session::control::Volume;
use tep_dataplane::session::{Action, UplinkKey};
use tep_wire::gtpu::{Extension, GtpuMessage, GtpuRepr, Packet};

/// An outer packet's destination, UDP checksum state, and GTP-U message.
fn parse_outer(p: &[u8]) -> (IpAddr, GtpuRepr, Vec<u8>) {
    let dst = if p[0] >> 4 == 4 {
        IpAddr::from(<[u8; 4]>::try_from(&p[16..20]).unwrap())
    } else {
        IpAddr::from(<[u8; 16]>::try_from(&p[24..40]).unwrap())
    };
    assert_eq!(outer_udp_ok(p), Some(true), "outer UDP checksum");
    let g = Packet::new_checked(udp_payload(p)).unwrap();
    let r = GtpuRepr::parse(&g).unwrap();
    (dst, r, g.payload().to_vec())
}

fn dl_qfi(r: &GtpuRepr) -> Option<u8> {
    r.extensions.iter().find_map(|e| match e {
        Extension::PduSessionContainer(c) if c.pdu_type == 0 => Some(c.qfi),
        _ => None,
    })
}

#[test]
fn every_session_both_ways_with_exact_usage() {
    for v6 in [false, true] {
        let (mut c, mut p) = upf(v6);
        let mut pool = pool();
        let n = 300u32;
        let slots: Vec<u32> = (0..n)
            .map(|i| c.create(&example::session(i, v6, i % 2 == 1)).unwrap())
            .collect();
        settle(&mut c, &mut p, &mut pool);
        let ue = |i: u32| if i % 2 == 1 { ue6(i) } else { ue4(i) };
        // Uplink: one G-PDU per session, by its TEID (some with a QFI the
        // PDR does not name: any QFI matches).
        let ups: Vec<Vec<u8>> = (0..n)
            .map(|i| {
                let qfi = (i % 3 == 0).then_some(5);
                gpdu(v6, 0x10000 + i, qfi, &inner(ue(i), true, &[i as u8; 100]))
            })
            .collect();
        let mut got = Vec::new();
        for chunk in ups.chunks(100) {
            got.extend(run_decap(&mut p, &mut pool, chunk, 0).packets);
        }
        assert_eq!(got.len(), n as usize, "{}", p.runtime().report());
        for i in 0..n {
            assert_eq!(got[i as usize], inner(ue(i), true, &[i as u8; 100]));
        }
        // Downlink: one packet to each UE, out to the gNB with the
        // session's TEID and QFI.
        let downs: Vec<Vec<u8>> = (0..n).map(|i| inner(ue(i), false, &[7; 200])).collect();
        let mut got = Vec::new();
        for chunk in downs.chunks(100) {
            got.extend(run_encap(&mut p, &mut pool, chunk).packets);
        }
        assert_eq!(got.len(), n as usize, "{}", p.runtime().report());
        for (i, o) in got.iter().enumerate() {
            let (dst, r, payload) = parse_outer(o);
            assert_eq!(dst, addrs(v6).1);
            assert_eq!(r.teid, 0x20000 + i as u32);
            assert_eq!(r.message, GtpuMessage::GPdu);
            assert_eq!(dl_qfi(&r), Some(9));
            assert_eq!(payload, downs[i]);
        }
        for (i, &slot) in slots.iter().enumerate() {
            let want = Volume {
                ul_packets: 1,
                ul_bytes: inner(ue(i as u32), true, &[i as u8; 100]).len() as u64,
                dl_packets: 1,
                dl_bytes: downs[i].len() as u64,
            };
            assert_eq!(c.usage(slot), want, "session {i}");
        }
        // Deleting reports the same and stops both ways.
        assert_eq!(c.remove(slots[3]).unwrap().dl_packets, 1);
        settle(&mut c, &mut p, &mut pool);
        let out = run_decap(&mut p, &mut pool, &ups[3..4], 0);
        assert!(out.packets.is_empty());
        let out = run_encap(&mut p, &mut pool, &downs[3..4]);
        assert!(out.packets.is_empty());
        assert_eq!(p.drops(DropReason::UnknownTeid), 1);
        assert_eq!(p.drops(DropReason::NoSession), 1);
        assert_balanced(&p);
        assert_no_leak(&pool);
    }
}

#[test]
fn a_pdr_with_a_qfi_takes_only_that_flow() {
    let (mut c, mut p) = upf(false);
    let mut pool = pool();
    let mut s = example::session(1, false, false);
    s.uplink_keys = vec![UplinkKey {
        teid: 0x10001,
        qfi: Some(9),
    }];
    c.create(&s).unwrap();
    settle(&mut c, &mut p, &mut pool);
    let pkt = |qfi| gpdu(false, 0x10001, qfi, &inner(ue4(1), true, b"x"));
    let out = run_decap(
        &mut p,
        &mut pool,
        &[pkt(Some(9)), pkt(Some(8)), pkt(None)],
        0,
    );
    assert_eq!(out.packets.len(), 1);
    // The TEID is the session's: no PDR takes those flows, and the gNB
    // gets no Error Indication (which would tear the session down).
    assert_eq!(p.drops(DropReason::NoPdr), 2);
    assert_eq!(p.drops(DropReason::UnknownTeid), 0);
    assert!(out.replies.is_empty());
    // A TEID no session has is answered (TS 29.281 §7.3.1); once the
    // session is gone, its TEID is such a one.
    let out = run_decap(&mut p, &mut pool, &[gpdu(false, 0x20002, Some(9), b"")], 1);
    assert_eq!(p.drops(DropReason::UnknownTeid), 1);
    assert_eq!(out.replies.len(), 1);
    c.remove(0).unwrap();
    settle(&mut c, &mut p, &mut pool);
    let out = run_decap(&mut p, &mut pool, &[pkt(Some(8))], 20_000_000_000);
    assert_eq!(p.drops(DropReason::UnknownTeid), 2);
    assert_eq!(out.replies.len(), 1);
    assert_balanced(&p);
    assert_no_leak(&pool);
}

/// BUFF: downlink packets held, the first reported once, then released in
/// order when the FAR forwards; past the bound, dropped and counted.
#[test]
fn buffer_then_forward_loses_nothing() {
    let (mut c, mut p) = upf(false);
    let mut pool = pool();
    let mut s = example::session(1, false, false);
    s.downlink = Action::Buffer;
    let slot = c.create(&s).unwrap();
    settle(&mut c, &mut p, &mut pool);
    let pkts: Vec<Vec<u8>> = (0..4u8).map(|k| inner(ue4(1), false, &[k; 64])).collect();
    let out = run_encap(&mut p, &mut pool, &pkts[..2]);
    assert!(out.packets.is_empty());
    let out = run_encap(&mut p, &mut pool, &pkts[2..]);
    assert!(out.packets.is_empty());
    assert_eq!(p.counters().buffered, 4);
    let mut reports = Vec::new();
    p.take_session_reports(&mut reports);
    assert_eq!(reports, [slot], "reported once, for the first packet");
    // The per-session bound is 4: the fifth is dropped.
    let out = run_encap(&mut p, &mut pool, &[inner(ue4(1), false, b"late")]);
    assert!(out.packets.is_empty());
    assert_dropped_once(&p, DropReason::BufferFull, "session-lookup");
    s.downlink = Action::Forward;
    c.modify(slot, &s, false).unwrap();
    let out = settle(&mut c, &mut p, &mut pool);
    assert_eq!(out.packets.len(), 4);
    for (k, o) in out.packets.iter().enumerate() {
        let (_, r, payload) = parse_outer(o);
        assert_eq!(r.teid, 0x20001);
        assert_eq!(payload, pkts[k], "in order");
    }
    assert_eq!(c.usage(slot).dl_packets, 4);
    reports.clear();
    p.take_session_reports(&mut reports);
    assert!(reports.is_empty());
    assert_balanced(&p);
    assert_no_leak(&pool);
}

/// Held packets of a session deleted are dropped as no_session, not
/// leaked.
#[test]
fn a_deleted_session_drops_what_it_held() {
    let (mut c, mut p) = upf(false);
    let mut pool = pool();
    let mut s = example::session(1, false, false);
    s.downlink = Action::Buffer;
    let slot = c.create(&s).unwrap();
    settle(&mut c, &mut p, &mut pool);
    run_encap(
        &mut p,
        &mut pool,
        &[inner(ue4(1), false, b"a"), inner(ue4(1), false, b"b")],
    );
    c.remove(slot).unwrap();
    let out = settle(&mut c, &mut p, &mut pool);
    assert!(out.packets.is_empty());
    assert_eq!(p.drops(DropReason::NoSession), 2);
    assert_balanced(&p);
    assert_no_leak(&pool);
}

/// Handover with SNDEM: an End Marker to the old gNB with the old TEID,
/// then packets to the new one.
#[test]
fn handover_sends_an_end_marker_to_the_old_peer() {
    for v6 in [false, true] {
        let (mut c, mut p) = upf(v6);
        let mut pool = pool();
        let mut s = example::session(1, v6, false);
        let slot = c.create(&s).unwrap();
        settle(&mut c, &mut p, &mut pool);
        let new_gnb = if v6 {
            IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 3))
        } else {
            IpAddr::V4(Ipv4Addr::new(192, 0, 2, 3))
        };
        s.peer = Some((new_gnb, 0x999));
        c.modify(slot, &s, true).unwrap();
        let out = settle(&mut c, &mut p, &mut pool);
        assert_eq!(out.replies.len(), 1);
        let (dst, r, _) = parse_outer(&out.replies[0]);
        assert_eq!(
            (dst, r.teid, r.message),
            (addrs(v6).1, 0x20001, GtpuMessage::EndMarker)
        );
        let out = run_encap(&mut p, &mut pool, &[inner(ue4(1), false, b"a")]);
        let (dst, r, _) = parse_outer(&out.packets[0]);
        assert_eq!((dst, r.teid), (new_gnb, 0x999));
        assert_eq!(p.counters().generated, 1);
        assert_no_leak(&pool);
    }
}

/// The N3 tunnel's own traffic still works beside the sessions: Echo
/// Requests are answered, and a G-PDU to an unknown TEID draws an Error
/// Indication.
#[test]
fn echo_and_error_indication_stay() {
    let (_c, mut p) = upf(false);
    let mut pool = pool();
    let req = udp_packet(B4, A4, 2152, 2152, &gtpu_echo_request(7));
    let unknown = gpdu(false, 0x4242, None, &inner(ue4(1), true, b"x"));
    let out = run_decap(&mut p, &mut pool, &[req, unknown], 1_000_000_000);
    assert_eq!(out.replies.len(), 2);
    let kinds: Vec<_> = out
        .replies
        .iter()
        .map(|r| parse_outer(r).1.message.msg_type())
        .collect();
    assert!(
        kinds.contains(&tep_wire::gtpu::MessageType::EchoResponse),
        "{kinds:?}"
    );
    assert!(
        kinds.contains(&tep_wire::gtpu::MessageType::ErrorIndication),
        "{kinds:?}"
    );
    assert_no_leak(&pool);
}
