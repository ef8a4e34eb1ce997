//! A UPF's sessions through the pipeline: uplink G-PDUs found by TEID
//! (and QFI), downlink packets found by UE address and sent to the
//! session's gNB with its TEID and QFI, FAR actions (forward, drop,
//! buffer), End Markers, usage counts, accounting. Outer packets are
//! built and parsed with tep_wire.

mod common;
use common::upf::*;
use common::*;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use tep_dataplane::example;
use tep_dataplane::session::control::Volume;
use tep_dataplane::session::rules::{FlowMatch, RuleSpec};
use tep_dataplane::session::{Action, UeKey, UeSource};
use tep_dataplane::DropReason;
use tep_dataplane::ManualClock;
use tep_dataplane::Pipeline;
use tep_dataplane::Pool;
use tep_dataplane::{Outer, OuterLayers};
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

/// A rule of `filters` (none: every packet) that does `action`, toward
/// `peer` (gNB and TEID; None: N6) with QFI `qfi`, without an MBR.
fn rule(filters: Vec<FlowMatch>, action: Action, peer: Option<(IpAddr, u32)>, qfi: u8) -> RuleSpec {
    RuleSpec {
        filters,
        qfi_match: None,
        action,
        peer,
        qfi: Some(qfi),
        mbr: None,
    }
}

/// UDP to (downlink) or from (uplink) the UE's ports `lo..=hi`.
fn udp_ports(lo: u16, hi: u16) -> FlowMatch {
    FlowMatch {
        protocol: Some(17),
        ue_ports: vec![(lo, hi)],
        ..Default::default()
    }
}

/// The downlink of three rules by precedence: voice (UDP to ports
/// 5000-5010) to TEID 0x501 with QFI 1, what goes to port 6666 dropped,
/// the rest to TEID 0x509 with QFI 9.
fn voice_drop_default(gnb: IpAddr) -> Vec<RuleSpec> {
    vec![
        rule(
            vec![udp_ports(5000, 5010)],
            Action::Forward,
            Some((gnb, 0x501)),
            1,
        ),
        rule(vec![udp_ports(6666, 6666)], Action::Drop, None, 0),
        rule(vec![], Action::Forward, Some((gnb, 0x509)), 9),
    ]
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
    let mut pool = pool();
    let (mut c, mut p) = qfi9_session(&mut pool);
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
    let mut pool = pool();
    let (mut c, mut p, mut s, slot) = buffering_session(&mut pool);
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
    let mut pool = pool();
    let (mut c, mut p, _, slot) = buffering_session(&mut pool);
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

/// A peer's Error Indications and Echo Responses end at the UPF's N3
/// tunnel and go up to its control plane (path supervision), malformed
/// ones not; answered by nothing.
#[test]
fn peer_signalling_goes_up_to_the_control_plane() {
    let (_c, mut p) = upf(false);
    let mut pool = pool();
    // TEID Data I 0x100, GTP-U Peer Address B4.
    let b = example::B4.octets();
    let ies = [16, 0, 0, 1, 0, 133, 0, 4, b[0], b[1], b[2], b[3]];
    let ei = udp_packet(B4, A4, 2152, 2152, &gtpu_signalling(26, 0, 6, &ies));
    let echo = udp_packet(B4, A4, 2152, 2152, &gtpu_signalling(2, 0, 9, &[14, 0]));
    let short = udp_packet(B4, A4, 2152, 2152, &gtpu_signalling(26, 0, 7, &ies[..5]));
    let out = run_decap(&mut p, &mut pool, &[ei, echo, short], 1_000_000_000);
    assert!(out.replies.is_empty() && out.packets.is_empty());
    let mut got = Vec::new();
    assert_eq!(p.take_gtpu_signals(&mut got), 0);
    let from = B4;
    assert_eq!(
        got,
        [
            tep_dataplane::PeerSignal::ErrorIndication {
                from,
                peer: from,
                teid: 0x100
            },
            tep_dataplane::PeerSignal::EchoResponse { from, sequence: 9 }
        ]
    );
    got.clear();
    assert_eq!(p.take_gtpu_signals(&mut got), 0);
    assert!(got.is_empty(), "taken once");
    assert_no_leak(&pool);
}

/// Sends G-PDUs (`gtpus`, GTP-U header onwards) from `from` to N3 up
/// through the pipeline: as whole outer packets (gateway mode parses
/// them), or with `host` as a socket hands them over (the UDP payload,
/// the addresses in the metadata). What came out on N6.
fn send_up(
    p: &mut Pipeline<ManualClock>,
    pool: &mut Pool,
    host: bool,
    from: IpAddr,
    gtpus: &[Vec<u8>],
) -> Vec<Vec<u8>> {
    let n3 = addrs(from.is_ipv6()).0;
    if !host {
        let outer: Vec<Vec<u8>> = gtpus
            .iter()
            .map(|g| udp_packet(from, n3, 2152, 2152, g))
            .collect();
        return run_decap(p, pool, &outer, 0).packets;
    }
    let mut v = load(pool, gtpus);
    for &id in v.as_slice() {
        let outer = Outer {
            src: from,
            dst: n3,
            src_port: 2152,
            dst_port: 2152,
            tos: 0,
            ttl: 64,
        };
        pool.received_by_socket(id, outer);
    }
    let mut got = Vec::new();
    p.decap(pool, &mut v, 0, &mut |_, pool, v| {
        for &id in v.as_slice() {
            got.push(pool.data(id).to_vec());
            pool.free(id);
        }
        v.clear();
    });
    got
}

fn v6_addr(a: &str) -> IpAddr {
    IpAddr::V6(a.parse().unwrap())
}

/// IP address spoofing prevention (TS 23.501 §5.8.2.x): an uplink
/// packet leaves only from its session's UE address (IPv4 /32, IPv6 /128)
/// or IPv6 /64 prefix; any other source, a session naming no UE address,
/// and an inner packet that is not IP or too short are dropped under
/// their reasons and count nowhere in the session's usage.
#[test]
fn uplink_leaves_only_from_the_sessions_ue_address() {
    for v6 in [false, true] {
        let (mut c, mut p) = upf(v6);
        let mut pool = pool();
        let s4 = c.create(&example::session(1, v6, false)).unwrap();
        let s128 = c.create(&example::session(2, v6, true)).unwrap();
        let mut s = example::session(3, v6, true);
        s.downlink_keys = vec![UeKey::V6Prefix(0x2001_0db8_0009_0000)];
        s.ue = UeSource::of_keys(&s.downlink_keys).unwrap();
        let s64 = c.create(&s).unwrap();
        // Names no UE address (as an Ethernet PDU session would not).
        let mut s = example::session(4, v6, false);
        s.downlink_keys.clear();
        s.ue = UeSource::default();
        let none = c.create(&s).unwrap();
        settle(&mut c, &mut p, &mut pool);
        let up = |ue: IpAddr| inner(ue, true, b"from the UE");
        let (other4, other6) = (ue4(2), v6_addr("2001:db8:8::3"));
        // (TEID, inner packet, leaves?)
        let cases = [
            (0x10001, up(ue4(1)), true),
            (0x10001, up(other4), false),
            (0x10001, up(ue6(1)), false),
            (0x10002, up(ue6(2)), true),
            (0x10002, up(other6), false),
            (0x10002, up(ue4(2)), false),
            (0x10003, up(v6_addr("2001:db8:9::1234")), true),
            (0x10003, up(v6_addr("2001:db8:9::ffff:1")), true),
            (0x10003, up(v6_addr("2001:db8:a::1")), false),
            (0x10003, up(ue4(3)), false),
            (0x10004, up(ue4(4)), false),
        ];
        let packets: Vec<Vec<u8>> = cases
            .iter()
            .map(|(teid, i, _)| gpdu(v6, *teid, None, i))
            .collect();
        let out = run_decap(&mut p, &mut pool, &packets, 0);
        let want: Vec<Vec<u8>> = cases.iter().filter(|c| c.2).map(|c| c.1.clone()).collect();
        assert_eq!(out.packets, want, "{}", p.runtime().report());
        assert_eq!(p.drops(DropReason::UeSourceSpoofed), 7);
        let usage = |slot| {
            let u = c.usage(slot);
            (u.ul_packets, u.ul_bytes)
        };
        let bytes = |ue| up(ue).len() as u64;
        assert_eq!(usage(s4), (1, bytes(ue4(1))));
        assert_eq!(usage(s128), (1, bytes(ue6(2))));
        assert_eq!(usage(s64), (2, 2 * bytes(ue6(2))));
        assert_eq!(usage(none), (0, 0));
        // Not IP, and too short for a source address: their own reasons.
        let bad = [
            gpdu(v6, 0x10001, None, &[0x10; 40]),
            gpdu(v6, 0x10001, None, &up(ue4(1))[..10]),
            gpdu(v6, 0x10002, None, &up(ue6(2))[..20]),
        ];
        assert!(run_decap(&mut p, &mut pool, &bad, 0).packets.is_empty());
        assert_eq!(p.drops(DropReason::NotIp), 1);
        assert_eq!(p.drops(DropReason::Truncated), 2);
        assert_eq!(p.drops(DropReason::UeSourceSpoofed), 7);
        assert_eq!(usage(s4), (1, bytes(ue4(1))));
        assert_eq!(usage(s128), (1, bytes(ue6(2))));
        assert_balanced(&p);
        assert_no_leak(&pool);
    }
}

/// `[pfcp] n3_source_check`: uplink only from the gNB of the session's
/// downlink FAR, parsed from the outer header (gateway mode) or reported
/// by the socket (host mode). A session whose FAR names no gNB yet takes
/// any; after a handover moved the FAR, only the new gNB. Off, any
/// source is taken.
#[test]
fn n3_source_check_takes_only_the_sessions_gnb() {
    for (v6, host, check) in [false, true]
        .into_iter()
        .flat_map(|a| [false, true].map(|b| (a, b)))
        .flat_map(|(a, b)| [false, true].map(|c| (a, b, c)))
    {
        let label = format!("v6 {v6}, host {host}, check {check}");
        let outer = if host {
            OuterLayers::UdpPayload
        } else {
            OuterLayers::IpUdp
        };
        let (mut c, mut p) = upf_over(v6, outer);
        let mut pool = pool();
        c.check_gnb_source(check);
        let mut s1 = example::session(1, v6, false);
        let a = c.create(&s1).unwrap();
        let mut s2 = example::session(2, v6, false);
        s2.peer = None;
        let b = c.create(&s2).unwrap();
        settle(&mut c, &mut p, &mut pool);
        let gnb = addrs(v6).1;
        let stranger = if v6 {
            v6_addr("2001:db8::77")
        } else {
            IpAddr::V4(Ipv4Addr::new(192, 0, 2, 77))
        };
        let g = |i: u32| gtpu(0x10000 + i, None, &inner(ue4(i), true, b"x"));
        let both = [g(1), g(2)];
        let mut sent = |from| send_up(&mut p, &mut pool, host, from, &both).len();
        assert_eq!(sent(gnb), 2, "{label}");
        assert_eq!(sent(stranger), if check { 1 } else { 2 }, "{label}");
        // A handover: the FAR now names the stranger.
        s1.peer = Some((stranger, 0x30001));
        c.modify(a, &s1, false).unwrap();
        settle(&mut c, &mut p, &mut pool);
        let mut sent = |from| send_up(&mut p, &mut pool, host, from, &both).len();
        assert_eq!(sent(stranger), 2, "{label}");
        assert_eq!(sent(gnb), if check { 1 } else { 2 }, "{label}");
        let dropped = if check { 2 } else { 0 };
        assert_eq!(p.drops(DropReason::GnbSourceMismatch), dropped, "{label}");
        assert_eq!(c.usage(a).ul_packets, 4 - dropped, "{label}");
        assert_eq!(c.usage(b).ul_packets, 4, "{label}");
        assert_balanced(&p);
        assert_no_leak(&pool);
    }
}

/// A QER's MBR: a session's packets over its rate each way are dropped
/// (`mbr_exceeded`) and count nowhere in its usage; what passes over a
/// second is the rate, give or take the burst; a session without an MBR
/// beside it loses nothing.
#[test]
fn packets_over_the_mbr_are_dropped_and_counted() {
    let (mut c, mut p) = upf(false);
    let mut pool = pool();
    let mut s = example::session(1, false, false);
    s.mbr.uplink = Some(1_000_000);
    s.mbr.downlink = Some(2_000_000);
    let metered = c.create(&s).unwrap();
    let free = c.create(&example::session(2, false, false)).unwrap();
    settle(&mut c, &mut p, &mut pool);
    let (up, down) = (
        inner(ue4(1), true, &[1; 1000]),
        inner(ue4(1), false, &[2; 1000]),
    );
    let len = up.len() as u64;
    // 100 vectors of 10 packets each way, one vector every 10 ms (8 Mbit/s
    // offered) over a second, session 2's beside.
    let (mut ul, mut dl) = (0u64, 0u64);
    for k in 0..100u64 {
        let now = 1_000_000_000 + k * 10_000_000;
        let ups: Vec<Vec<u8>> = (0..10)
            .flat_map(|_| {
                [
                    gpdu(false, 0x10001, None, &up),
                    gpdu(false, 0x10002, None, &inner(ue4(2), true, &[3; 1000])),
                ]
            })
            .collect();
        ul += run_decap(&mut p, &mut pool, &ups, now).packets.len() as u64;
        p.set_now(now);
        let downs: Vec<Vec<u8>> = (0..10)
            .flat_map(|_| [down.clone(), inner(ue4(2), false, &[4; 1000])])
            .collect();
        dl += run_encap(&mut p, &mut pool, &downs).packets.len() as u64;
    }
    let (u, f) = (c.usage(metered), c.usage(free));
    assert_eq!((f.ul_packets, f.dl_packets), (1000, 1000));
    assert_eq!((u.ul_packets + 1000, u.dl_packets + 1000), (ul, dl));
    // From the first vector to the last, 990 ms at the rate, plus the
    // burst (250 ms at the rate), within a packet.
    for (got, bps, name) in [
        (u.ul_bytes, 1_000_000, "uplink"),
        (u.dl_bytes, 2_000_000, "downlink"),
    ] {
        let want = bps / 8 * 99 / 100 + bps / 32;
        assert!(
            got.abs_diff(want) <= len,
            "{name}: {got} bytes, want {want}"
        );
    }
    let over = 2000 - u.ul_packets - u.dl_packets;
    assert_eq!(p.drops(DropReason::MbrExceeded), over);
    assert_balanced(&p);
    assert_no_leak(&pool);
}

/// Runs of a metered session's packets in one vector (charged to its
/// bucket a run at a time) pass exactly the packets that a bucket asked
/// one packet at a time passes, in order: the first of each run until the
/// burst is spent, none after; a free session's packets between them cut
/// the runs and lose nothing.
#[test]
fn runs_of_a_sessions_packets_meter_as_one_by_one() {
    let (mut c, mut p) = upf(false);
    let mut pool = pool();
    let mut s = example::session(1, false, false);
    s.mbr.downlink = Some(1_000_000);
    c.create(&s).unwrap();
    c.create(&example::session(2, false, false)).unwrap();
    settle(&mut c, &mut p, &mut pool);
    let want = tep_dataplane::session::rate::Bucket::default();
    want.set(1_000_000);
    // Runs of 1, 2, 5, 9 and 3 packets of session 1 (sizes varying), one
    // of session 2 after each; every vector 10 ms after the last.
    let (mut passed, mut expected, mut free) = (vec![], vec![], 0);
    for k in 0..20u64 {
        let now = 1_000_000_000 + k * 10_000_000;
        p.set_now(now);
        let mut downs = vec![];
        for (r, n) in [1usize, 2, 5, 9, 3].into_iter().enumerate() {
            for i in 0..n {
                let tag = (k as usize * 100 + r * 10 + i) as u16;
                let body = [tag.to_be_bytes().to_vec(), vec![0; 200 + 97 * i]].concat();
                let pkt = inner(ue4(1), false, &body);
                if want.admit(pkt.len(), now, true) {
                    expected.push(tag);
                }
                downs.push(pkt);
            }
            downs.push(inner(ue4(2), false, &[7; 300]));
        }
        for o in run_encap(&mut p, &mut pool, &downs).packets {
            let (_, _, ip) = parse_outer(&o);
            // The tag leads the UDP payload (IPv4 20 + UDP 8).
            match IpAddr::from(<[u8; 4]>::try_from(&ip[16..20]).unwrap()) == ue4(1) {
                true => passed.push(u16::from_be_bytes([ip[28], ip[29]])),
                false => free += 1,
            }
        }
    }
    assert_eq!(free, 20 * 5);
    assert!(
        expected.len() > 20 && expected.len() < 400,
        "{}",
        expected.len()
    );
    assert_eq!(passed, expected);
    assert_eq!(
        p.drops(DropReason::MbrExceeded),
        400 - expected.len() as u64
    );
    assert_balanced(&p);
    assert_no_leak(&pool);
}

/// Several rules a direction (PDRs with SDF filters, by precedence): a
/// voice rule (UDP to the UE's ports 5000-5010 downlink, from them
/// uplink) with its own TEID and QFI 1, a rule that drops what goes to or
/// from port 6666, and the default rule (QFI 9). Each downlink packet
/// leaves with its rule's TEID and QFI; uplink, the drop rule drops;
/// packets no rule takes are `no_pdr_match`; usage counts every packet
/// forwarded.
#[test]
fn several_rules_each_way_by_sdf_filter() {
    use tep_dataplane::session::control::RuleTag;
    for v6 in [false, true] {
        let mut pool = pool();
        let (mut c, mut p) = upf(v6);
        let gnb = addrs(v6).1;
        let ue = if v6 { ue6(1) } else { ue4(1) };
        let mut spec = example::session(1, v6, v6);
        spec.rules.downlink = voice_drop_default(gnb);
        // Uplink: no default rule, so what the others miss is no one's;
        // to N6 (a peer would be a UPF on N9).
        spec.rules.uplink = vec![
            rule(vec![udp_ports(6666, 6666)], Action::Drop, None, 0),
            rule(vec![udp_ports(5000, 5010)], Action::Forward, None, 0),
        ];
        // Each rule counted (as for URRs on some of the PDRs), by position.
        let counted = |n: u32| -> Vec<RuleTag> {
            (0..n)
                .map(|key| RuleTag {
                    key,
                    counted: true,
                    ..Default::default()
                })
                .collect()
        };
        (spec.rules.downlink_tags, spec.rules.uplink_tags) = (counted(3), counted(2));
        let slot = c.create(&spec).unwrap();
        settle(&mut c, &mut p, &mut pool);
        let server = if v6 {
            v6_addr("2001:db8:99::1")
        } else {
            IpAddr::V4(Ipv4Addr::new(198, 51, 100, 1))
        };
        let down = |dport| udp_packet(server, ue, 53, dport, b"down");
        let downs = [down(5005), down(80), down(6666), down(5011)];
        let out = run_encap(&mut p, &mut pool, &downs);
        let got: Vec<(u32, Option<u8>)> = out
            .packets
            .iter()
            .map(|o| {
                let (_, r, _) = parse_outer(o);
                (r.teid, dl_qfi(&r))
            })
            .collect();
        assert_eq!(got, [(0x501, Some(1)), (0x509, Some(9)), (0x509, Some(9))]);
        assert_eq!(p.drops(DropReason::SessionDrop), 1);
        let up = |sport| {
            gpdu(
                v6,
                0x10001,
                Some(9),
                &udp_packet(ue, server, sport, 53, b"up"),
            )
        };
        let out = run_decap(&mut p, &mut pool, &[up(5000), up(6666), up(80)], 0);
        assert_eq!(out.packets, [udp_packet(ue, server, 5000, 53, b"up")]);
        assert_eq!(p.drops(DropReason::SessionDrop), 2);
        assert_eq!(p.drops(DropReason::NoPdrMatch), 1);
        let u = c.usage(slot);
        assert_eq!((u.dl_packets, u.ul_packets), (3, 1));
        // Each rule counted the packets it took and forwarded: the voice rule one downlink packet and
        // one uplink, the default rule two, the drop rules none.
        let rule_packets =
            |c: &tep_dataplane::session::control::Sessions, uplink, n: u32| -> Vec<u64> {
                (0..n)
                    .map(|k| c.rule_usage(c.rule_counter(slot, uplink, k).unwrap()).0)
                    .collect()
            };
        assert_eq!(rule_packets(&c, false, 3), [1, 0, 2]);
        assert_eq!(rule_packets(&c, true, 2), [0, 1]);
        let voice_bytes = c.rule_usage(c.rule_counter(slot, false, 0).unwrap()).1;
        assert_eq!(voice_bytes, down(5005).len() as u64);
        // A URR on the voice rules both ways (group 7), with a quota of
        // one packet each way: each passes, the next voice packet is
        // dropped, the default rule's go on.
        spec.rules.downlink_tags[0].watch = [Some(7), None];
        spec.rules.uplink_tags[1].watch = [Some(7), None];
        c.modify(slot, &spec, false).unwrap();
        let ul_len = udp_packet(ue, server, 5000, 53, b"up").len() as u64;
        let quota = tep_dataplane::session::watch::VolumeLimits {
            quota: [Some(down(5005).len() as u64 + ul_len), None, None],
            ..Default::default()
        };
        assert!(c.arm_group(slot, 7, &quota));
        settle(&mut c, &mut p, &mut pool);
        assert_eq!(run_encap(&mut p, &mut pool, &downs[..2]).packets.len(), 2);
        assert_eq!(
            run_decap(&mut p, &mut pool, &[up(5000)], 0).packets.len(),
            1
        );
        let mut crossed = Vec::new();
        c.crossed_groups(&mut Vec::new(), &mut crossed);
        assert_eq!(crossed.len(), 1, "used to the byte");
        assert!(crossed[0].quota_spent && crossed[0].group == 7);
        assert_eq!(run_encap(&mut p, &mut pool, &downs[..2]).packets.len(), 1);
        assert_eq!(
            run_decap(&mut p, &mut pool, &[up(5000)], 0).packets.len(),
            0
        );
        assert_eq!(p.drops(DropReason::QuotaExhausted), 2);
        assert_eq!(rule_packets(&c, false, 3), [2, 0, 4]);
        // Back to one treatment each way: the session's own again.
        c.modify(slot, &example::session(1, v6, v6), false).unwrap();
        settle(&mut c, &mut p, &mut pool);
        let out = run_encap(&mut p, &mut pool, &downs[..1]);
        let (_, r, _) = parse_outer(&out.packets[0]);
        assert_eq!((r.teid, dl_qfi(&r)), (0x20001, Some(9)));
        assert_balanced(&p);
        assert_no_leak(&pool);
    }
}

/// Bursts of one flow in a vector (classified once, the rest taking the
/// first packet's rule) among other flows of the same session: each
/// packet leaves with its own rule's TEID and QFI, or is dropped by it.
#[test]
fn a_flows_burst_takes_its_rule_and_a_new_flow_is_classified() {
    let (mut c, mut p) = upf(false);
    let mut pool = pool();
    let mut spec = example::session(1, false, false);
    spec.rules.downlink = voice_drop_default(addrs(false).1);
    c.create(&spec).unwrap();
    settle(&mut c, &mut p, &mut pool);
    let server = IpAddr::V4(Ipv4Addr::new(198, 51, 100, 1));
    let ports = [5005, 5005, 5005, 80, 80, 5005, 6666, 6666, 5011, 5011, 5006];
    let downs: Vec<Vec<u8>> = ports
        .iter()
        .map(|&d| udp_packet(server, ue4(1), 53, d, b"down"))
        .collect();
    let got: Vec<(u32, Option<u8>)> = run_encap(&mut p, &mut pool, &downs)
        .packets
        .iter()
        .map(|o| {
            let (_, r, _) = parse_outer(o);
            (r.teid, dl_qfi(&r))
        })
        .collect();
    let (voice, other) = ((0x501, Some(1)), (0x509, Some(9)));
    let want = [
        voice, voice, voice, other, other, voice, other, other, voice,
    ];
    assert_eq!(got, want);
    assert_eq!(p.drops(DropReason::SessionDrop), 2);
    assert_balanced(&p);
    assert_no_leak(&pool);
}

/// Uplink, a burst of one flow takes its first packet's rule (the
/// classifier asked once per flow run) and a new flow is classified;
/// once the session's rules change, the same flows take the new rules.
#[test]
fn an_uplink_flows_burst_takes_its_rule_until_the_rules_change() {
    let (mut c, mut p) = upf(false);
    let mut pool = pool();
    let mut spec = example::session(1, false, false);
    let uplink = |drop: u16, pass: u16| {
        vec![
            rule(vec![udp_ports(drop, drop)], Action::Drop, None, 0),
            rule(vec![udp_ports(pass, pass)], Action::Forward, None, 0),
        ]
    };
    spec.rules.uplink = uplink(6666, 5005);
    let slot = c.create(&spec).unwrap();
    settle(&mut c, &mut p, &mut pool);
    let server = IpAddr::V4(Ipv4Addr::new(198, 51, 100, 1));
    let up = |sport| {
        gpdu(
            false,
            0x10001,
            Some(9),
            &udp_packet(ue4(1), server, sport, 53, b"up"),
        )
    };
    // Ends and starts with the same flow: a rule remembered across the
    // change would let the second vector's first packets through.
    let burst = [5005, 5005, 6666, 6666, 80, 80, 5005, 5005].map(up);
    let passed = |p: &mut Pipeline<ManualClock>, pool: &mut Pool| {
        run_decap(p, pool, &burst, 0)
            .packets
            .iter()
            .map(|b| u16::from_be_bytes([b[20], b[21]]))
            .collect::<Vec<u16>>()
    };
    assert_eq!(passed(&mut p, &mut pool), [5005; 4]);
    assert_eq!(p.drops(DropReason::SessionDrop), 2);
    assert_eq!(p.drops(DropReason::NoPdrMatch), 2);
    spec.rules.uplink = uplink(5005, 6666);
    c.modify(slot, &spec, false).unwrap();
    settle(&mut c, &mut p, &mut pool);
    assert_eq!(passed(&mut p, &mut pool), [6666; 2]);
    assert_eq!(p.drops(DropReason::SessionDrop), 6);
    assert_eq!(p.drops(DropReason::NoPdrMatch), 4);
    assert_balanced(&p);
    assert_no_leak(&pool);
}

/// A rule's own MBR (its QER's bucket) holds its packets to the rate,
/// beside a rule of the same session without one: of ten 1000-octet
/// packets at once, the voice rule at 8 kbit/s passes its burst (3000
/// octets, the least a bucket holds) and drops the rest as
/// `mbr_exceeded`; the default rule passes all ten.
#[test]
fn a_rules_own_mbr_meters_only_its_packets() {
    let mut pool = pool();
    let (mut c, mut p) = upf(false);
    let mut spec = example::session(1, false, false);
    let voice = RuleSpec {
        mbr: Some((2, 8_000)),
        ..rule(vec![udp_ports(5000, 5010)], Action::Forward, spec.peer, 9)
    };
    spec.rules.downlink = vec![voice, rule(vec![], Action::Forward, spec.peer, 9)];
    c.create(&spec).unwrap();
    settle(&mut c, &mut p, &mut pool);
    let server = IpAddr::V4(Ipv4Addr::new(198, 51, 100, 1));
    let to = |port| udp_packet(server, ue4(1), 53, port, &[0; 972]);
    let voice: Vec<Vec<u8>> = (0..10).map(|_| to(5000)).collect();
    let other: Vec<Vec<u8>> = (0..10).map(|_| to(80)).collect();
    let passed = run_encap(&mut p, &mut pool, &voice).packets.len();
    assert_eq!(run_encap(&mut p, &mut pool, &other).packets.len(), 10);
    assert!((3..=4).contains(&passed), "{passed}");
    assert_eq!(p.drops(DropReason::MbrExceeded), 10 - passed as u64);
    assert_balanced(&p);
    assert_no_leak(&pool);
}

/// The outer DSCP of a downlink G-PDU: a FAR's Transport Level Marking
/// where it has one (the session's one treatment, or a rule's), the
/// tunnel's otherwise (here the inner packet's, 0), on three sessions to
/// one gNB; the IPv4 header checksum covers the marked byte.
#[test]
fn a_fars_marking_sets_the_outer_dscp() {
    use tep_dataplane::session::control::RuleTag;
    for v6 in [false, true] {
        let mut pool = pool();
        let (mut c, mut p) = upf(v6);
        let gnb = addrs(v6).1;
        let plain = example::session(1, v6, false);
        let mut marked = example::session(2, v6, false);
        marked.rules.dscp = Some(46);
        let mut rules = example::session(3, v6, false);
        let to_gnb = |filters, teid| rule(filters, Action::Forward, Some((gnb, teid)), 1);
        rules.rules.downlink = vec![
            to_gnb(vec![udp_ports(5000, 5010)], 0x501),
            to_gnb(vec![], 0x509),
        ];
        rules.rules.downlink_tags = vec![
            RuleTag {
                key: 1,
                counted: false,
                dscp: Some(34),
                ..Default::default()
            },
            RuleTag {
                key: 2,
                counted: false,
                dscp: None,
                ..Default::default()
            },
        ];
        for s in [&plain, &marked, &rules] {
            c.create(s).unwrap();
        }
        settle(&mut c, &mut p, &mut pool);
        let server = IpAddr::V4(Ipv4Addr::new(198, 51, 100, 1));
        let to = |i: u32, port| udp_packet(server, ue4(i), 53, port, b"down");
        let out = run_encap(
            &mut p,
            &mut pool,
            &[to(1, 80), to(2, 80), to(3, 5005), to(3, 80)],
        );
        let dscp: Vec<(u32, u8)> = out
            .packets
            .iter()
            .map(|o| {
                let (_, r, _) = parse_outer(o);
                let tos = if v6 {
                    (o[0] << 4) | (o[1] >> 4)
                } else {
                    assert_eq!(ipv4_sum(&o[..20]), 0xffff, "outer IPv4 checksum");
                    o[1]
                };
                (r.teid, tos >> 2)
            })
            .collect();
        assert_eq!(
            dscp,
            [(0x20001, 0), (0x20002, 46), (0x501, 34), (0x509, 0)],
            "v6 {v6}"
        );
        assert_balanced(&p);
        assert_no_leak(&pool);
    }
}

/// The ones' complement sum of `h`'s 16-bit words (0xffff: a header whose
/// checksum is right).
fn ipv4_sum(h: &[u8]) -> u16 {
    let mut s: u32 = h
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}
