//! GTP-U signalling through the pipeline (TS 29.281): Echo Requests are
//! answered, G-PDUs to unknown TEIDs draw rate-limited Error Indications,
//! G-PDUs carry their extension headers both ways. Replies are parsed with
//! tep_wire::gtpu.

mod common;
use common::*;
use core::net::IpAddr;
use tep_dataplane::config::{ChecksumMode, DataplaneConfig, TunnelConfig};
use tep_dataplane::ChecksumState;
use tep_dataplane::DropReason;
use tep_dataplane::InnerLink;
use tep_dataplane::TunnelKind;
use tep_wire::gtpu::{
    Extension, GtpuMessage, GtpuRepr, MessageType, Packet, PduSessionContainer, PDU_TYPE_UL,
};

/// B's side of a GTP-U pair: TEID 0x1000 from A.
fn b_side(v6: bool) -> Vec<TunnelConfig> {
    pair(TunnelKind::Gtpu, v6, ChecksumMode::Full).1
}

fn addrs(v6: bool) -> (IpAddr, IpAddr) {
    if v6 {
        (A6, B6)
    } else {
        (A4, B4)
    }
}

/// The outer addresses and ports of a reply and its GTP-U message.
fn parse_reply(p: &[u8]) -> ((IpAddr, u16), (IpAddr, u16), GtpuRepr) {
    let (src, dst) = if p[0] >> 4 == 4 {
        assert!(tep_wire::ipv4::Packet::new_checked(p)
            .unwrap()
            .verify_checksum());
        let s: [u8; 4] = p[12..16].try_into().unwrap();
        let d: [u8; 4] = p[16..20].try_into().unwrap();
        (IpAddr::from(s), IpAddr::from(d))
    } else {
        let s: [u8; 16] = p[8..24].try_into().unwrap();
        let d: [u8; 16] = p[24..40].try_into().unwrap();
        (IpAddr::from(s), IpAddr::from(d))
    };
    let l4 = l4_offset(p);
    let sport = u16::from_be_bytes([p[l4], p[l4 + 1]]);
    let dport = u16::from_be_bytes([p[l4 + 2], p[l4 + 3]]);
    assert_eq!(
        usize::from(u16::from_be_bytes([p[l4 + 4], p[l4 + 5]])),
        p.len() - l4,
        "UDP length"
    );
    assert_eq!(outer_udp_ok(p), Some(true), "reply UDP checksum");
    let g = Packet::new_checked(udp_payload(p)).expect("GTP-U");
    assert_eq!(
        usize::from(g.length()) + 8,
        udp_payload(p).len(),
        "GTP-U length"
    );
    let repr = GtpuRepr::parse(&g).expect("GTP-U message");
    ((src, sport), (dst, dport), repr)
}

#[test]
fn echo_request_is_answered_with_the_sequence_and_restart_counter() {
    for v6 in [false, true] {
        let (peer, us) = addrs(v6);
        let c = b_side(v6);
        let dataplane = DataplaneConfig {
            restart_counter: 7,
            ..DataplaneConfig::default()
        };
        let mut b = pipeline_with(&c, &dataplane, InnerLink::Ip);
        let mut pool = pool();
        let req = udp_packet(peer, us, 33333, 2152, &gtpu_echo_request(0x1234));
        let out = run_decap(&mut b, &mut pool, &[req], 0);
        assert!(out.packets.is_empty());
        assert_eq!(out.replies.len(), 1, "exactly one reply");
        let (from, to, r) = parse_reply(&out.replies[0]);
        assert_eq!(from, (us, 2152), "from our address and port");
        assert_eq!(to, (peer, 33333), "to the requester's address and port");
        assert_eq!(r.teid, 0);
        assert_eq!(r.sequence, Some(0x1234));
        assert_eq!(r.message, GtpuMessage::EchoResponse { recovery: 7 });
        // On the wire: S set, type 2, Recovery IE (14) = 7.
        let g = udp_payload(&out.replies[0]);
        assert_eq!(g[0], 0x32);
        assert_eq!(g[1], 2);
        assert_eq!(&g[8..10], &[0x12, 0x34]);
        assert_eq!(&g[12..], &[14, 7]);
        let c = b.counters();
        assert_eq!((c.decap_in, c.answered, c.decap_out), (1, 1, 0));
        assert_eq!(b.drops_total(), 0);
        assert_balanced(&b);
        assert_no_leak(&pool);
    }
}

#[test]
fn echo_requests_in_a_vector_with_g_pdus() {
    // Answers leave the vector; the G-PDUs around them are delivered.
    let c = b_side(false);
    let mut b = pipeline(&c, InnerLink::Ip);
    let mut pool = pool();
    let g1 = udp_packet(A4, B4, 2152, 2152, &gtpu_gpdu(0x1000, &tcp4(b"one", 1)));
    let e1 = udp_packet(A4, B4, 2152, 2152, &gtpu_echo_request(1));
    let g2 = udp_packet(A4, B4, 2152, 2152, &gtpu_gpdu(0x1000, &tcp4(b"two", 2)));
    let e2 = udp_packet(A4, B4, 2152, 2152, &gtpu_echo_request(2));
    let out = run_decap(&mut b, &mut pool, &[g1, e1, g2, e2], 0);
    assert_eq!(out.packets, vec![tcp4(b"one", 1), tcp4(b"two", 2)]);
    let seqs: Vec<_> = out
        .replies
        .iter()
        .map(|p| parse_reply(p).2.sequence)
        .collect();
    assert_eq!(seqs, vec![Some(1), Some(2)]);
    assert_eq!(b.counters().answered, 2);
    assert_balanced(&b);
    assert_no_leak(&pool);
}

#[test]
fn error_indication_names_the_teid_and_our_address() {
    for v6 in [false, true] {
        let (peer, us) = addrs(v6);
        let c = b_side(v6);
        let mut b = pipeline(&c, InnerLink::Ip);
        let mut pool = pool();
        // From a source port that is not 2152: the indication still goes
        // to 2152 (TS 29.281 §7.3.1).
        let bad = udp_packet(
            peer,
            us,
            40000,
            2152,
            &gtpu_gpdu(0xdead_beef, &tcp4(b"x", 1)),
        );
        let out = run_decap(&mut b, &mut pool, &[bad], 0);
        assert!(out.packets.is_empty());
        assert_eq!(out.replies.len(), 1);
        let (from, to, r) = parse_reply(&out.replies[0]);
        assert_eq!(from, (us, 2152));
        assert_eq!(to, (peer, 2152));
        assert_eq!(r.teid, 0);
        assert!(r.sequence.is_some(), "S set");
        assert_eq!(
            r.message,
            GtpuMessage::ErrorIndication {
                teid_data_i: 0xdead_beef,
                peer: us,
                udp_port: None,
            }
        );
        assert_eq!(b.counters().generated, 1);
        assert_dropped_once(&b, DropReason::UnknownTeid, "gtpu-decap");
        assert_balanced(&b);
        assert_no_leak(&pool);
    }
}

#[test]
fn error_indications_are_rate_limited() {
    let c = b_side(false);
    let mut dataplane = DataplaneConfig {
        error_indication_rate: 2,
        ..DataplaneConfig::default()
    };
    let mut b = pipeline_with(&c, &dataplane, InnerLink::Ip);
    let mut pool = pool();
    let bad: Vec<Vec<u8>> = (0..5)
        .map(|i| udp_packet(A4, B4, 2152, 2152, &gtpu_gpdu(0x2000 + i, &tcp4(b"x", 1))))
        .collect();
    let t = 5_000_000_000u64;
    let out = run_decap(&mut b, &mut pool, &bad, t);
    assert_eq!(out.replies.len(), 2, "a burst of at most the rate");
    let mut seqs = Vec::new();
    for (i, p) in out.replies.iter().enumerate() {
        let r = parse_reply(p).2;
        seqs.push(r.sequence);
        match r.message {
            GtpuMessage::ErrorIndication { teid_data_i, .. } => {
                assert_eq!(teid_data_i, 0x2000 + i as u32, "the first two TEIDs")
            }
            m => panic!("{m:?}"),
        }
    }
    assert_ne!(seqs[0], seqs[1], "each indication has its own sequence");
    // Same instant, another call: the bucket is empty.
    let out = run_decap(&mut b, &mut pool, &bad[..1], t);
    assert!(out.replies.is_empty());
    // 0.4 s later: 0.8 of a token, none yet.
    let out = run_decap(&mut b, &mut pool, &bad[..1], t + 400_000_000);
    assert!(out.replies.is_empty());
    // A second later, two more are allowed, not three.
    let out = run_decap(&mut b, &mut pool, &bad[..3], t + 1_000_000_000);
    assert_eq!(out.replies.len(), 2);
    assert_eq!(b.drops(DropReason::UnknownTeid), 10);
    assert_eq!(b.counters().generated, 4);
    assert_balanced(&b);
    assert_no_leak(&pool);

    // Rate 0: never.
    dataplane.error_indication_rate = 0;
    let mut b = pipeline_with(&c, &dataplane, InnerLink::Ip);
    let out = run_decap(&mut b, &mut pool, &bad, t);
    assert!(out.replies.is_empty());
    assert_balanced(&b);
    assert_no_leak(&pool);
}

#[test]
fn a_known_teid_from_another_peer_draws_no_error_indication() {
    // The TEID exists: the sender is wrong, not the TEID (wrong_peer).
    let c = b_side(false);
    let mut b = pipeline(&c, InnerLink::Ip);
    let mut pool = pool();
    let p = udp_packet(
        IpAddr::from([192, 0, 2, 77]),
        B4,
        2152,
        2152,
        &gtpu_gpdu(0x1000, &tcp4(b"x", 1)),
    );
    let out = run_decap(&mut b, &mut pool, &[p], 0);
    assert!(out.replies.is_empty() && out.packets.is_empty());
    assert_dropped_once(&b, DropReason::WrongPeer, "gtpu-decap");
    assert_balanced(&b);
    assert_no_leak(&pool);
}

#[test]
fn signalling_that_ends_here_is_counted_not_answered() {
    let c = b_side(false);
    let mut b = pipeline(&c, InnerLink::Ip);
    let mut pool = pool();
    let msgs = [
        gtpu_signalling(2, 0, 5, &[14, 0]), // Echo Response
        gtpu_signalling(26, 0, 6, &[16, 0, 0, 0, 1, 133, 0, 4, 192, 0, 2, 2]), // Error Indication
        gtpu_signalling(31, 0, 7, &[141, 1, 0x85]), // SEHN
        gtpu_signalling(254, 0x1000, 8, &[]), // End Marker
    ];
    let pkts: Vec<_> = msgs
        .iter()
        .map(|m| udp_packet(A4, B4, 2152, 2152, m))
        .collect();
    let out = run_decap(&mut b, &mut pool, &pkts, 0);
    assert!(out.replies.is_empty() && out.packets.is_empty());
    assert_eq!(b.drops(DropReason::GtpuSignalling), 4);
    assert_eq!(b.drops_total(), 4);
    assert_balanced(&b);
    assert_no_leak(&pool);
}

/// TS 29.281 §5.2.1 / §7.3.2 (and tep_wire::gtpu::first_unknown_required's
/// doc): a G-PDU with an unknown comprehension-required extension header is
/// dropped AND answered with a Supported Extension Headers Notification
/// listing the types this endpoint supports.
#[test]
fn unknown_required_extension_draws_a_supported_extension_headers_notification() {
    let c = b_side(false);
    let mut b = pipeline(&c, InnerLink::Ip);
    let mut pool = pool();
    let g = gtpu_gpdu_with_extension(0x1000, 0xc1, [0, 0], &tcp4(b"x", 1));
    let out = run_decap(&mut b, &mut pool, &[udp_packet(A4, B4, 40000, 2152, &g)], 0);
    assert!(out.packets.is_empty());
    assert_eq!(b.drops(DropReason::UnknownRequiredExtension), 1);
    assert_balanced(&b);
    assert_no_leak(&pool);
    assert_eq!(out.replies.len(), 1, "one notification");
    let (from, to, r) = parse_reply(&out.replies[0]);
    assert_eq!(from, (B4, 2152));
    assert_eq!(to.0, A4);
    assert_eq!(
        r.message.msg_type(),
        MessageType::SupportedExtensionHeadersNotification
    );
    match r.message {
        GtpuMessage::SupportedExtensionHeadersNotification(list) => {
            assert!(list.as_slice().contains(&0x85), "PDU Session Container");
            assert!(!list.as_slice().contains(&0xc1));
        }
        m => panic!("{m:?}"),
    }
}

#[test]
fn encapsulated_g_pdu_has_the_peer_teid_and_an_ul_pdu_session_container() {
    for v6 in [false, true] {
        let (mut ca, _) = pair(TunnelKind::Gtpu, v6, ChecksumMode::Full);
        ca[0].teid = 0xabcd_0001;
        ca[0].qfi = Some(9);
        let inner = tcp4(b"uplink", 1);
        let p = encap_one(&ca, InnerLink::Ip, &inner);
        assert_eq!(outer_udp_ok(&p), Some(true));
        let l4 = l4_offset(&p);
        assert_eq!(&p[l4 + 2..l4 + 4], &2152u16.to_be_bytes());
        let g = Packet::new_checked(udp_payload(&p)).unwrap();
        assert_eq!(g.msg_type(), MessageType::GPdu);
        assert_eq!(usize::from(g.length()) + 8, udp_payload(&p).len());
        assert_eq!(g.payload(), &inner[..]);
        let r = GtpuRepr::parse(&g).unwrap();
        assert_eq!(r.teid, 0xabcd_0001);
        let psc = r.extensions.pdu_session_container().expect("PSC");
        assert_eq!((psc.pdu_type, psc.qfi), (PDU_TYPE_UL, 9));
        // Without a QFI: the 8-byte header only.
        ca[0].qfi = None;
        let p = encap_one(&ca, InnerLink::Ip, &inner);
        let g = udp_payload(&p);
        assert_eq!(&g[..2], &[0x30, 0xff]);
        assert_eq!(&g[8..], &inner[..]);
    }
}

#[test]
fn g_pdu_with_an_extension_chain_is_decapsulated() {
    // PDCP PDU number then a DL PDU Session Container with QFI 5: both
    // known, the T-PDU starts after the chain.
    let c = b_side(false);
    let inner = tcp4(b"downlink with extensions", 3);
    let mut repr = GtpuRepr::gpdu(0x1000);
    repr.sequence = Some(9);
    repr.extensions
        .push(Extension::PdcpPduNumber(0x0123))
        .unwrap();
    repr.extensions
        .push(Extension::PduSessionContainer(PduSessionContainer::dl(
            5, false,
        )))
        .unwrap();
    let mut g = vec![0u8; repr.buffer_len()];
    repr.emit(&mut g, inner.len());
    g.extend_from_slice(&inner);
    let p = udp_packet(A4, B4, 2152, 2152, &g);
    let out = decap_fresh(&c, InnerLink::Ip, &[p]);
    assert_eq!(out.packets, vec![inner]);
    assert_eq!(out.csum, vec![ChecksumState::Verified]);
    assert!(out.replies.is_empty());
}

/// Bytes after the GTP-U message (inside the UDP datagram, covered by its
/// checksum) are not part of the inner packet, and the outer checksum is
/// verified over them before they are cut (once cut first, a valid packet
/// was dropped as bad_checksum).
#[test]
fn g_pdu_length_cuts_trailing_bytes() {
    let c = b_side(false);
    let inner = tcp4(b"exact", 3);
    let mut g = gtpu_gpdu(0x1000, &inner);
    g.extend_from_slice(&[0xee; 6]);
    let mut b = pipeline(&c, InnerLink::Ip);
    let mut pool = pool();
    let out = run_decap(&mut b, &mut pool, &[udp_packet(A4, B4, 2152, 2152, &g)], 0);
    assert_eq!(out.packets, vec![inner], "{}", b.runtime().report());
    assert_balanced(&b);
    assert_no_leak(&pool);
}

/// A damaged datagram gets no answer: the outer UDP checksum is checked
/// before anything is sent back. An Echo Request with a bad checksum is
/// dropped as bad_checksum, and a G-PDU whose TEID was damaged on the way
/// draws no Error Indication — which would make the peer delete a live
/// session (TS 29.281 §7.3.1) because of a bit flip.
#[test]
fn damaged_datagrams_draw_no_reply() {
    for v6 in [false, true] {
        let (peer, us) = addrs(v6);
        let c = b_side(v6);
        let mut b = pipeline(&c, InnerLink::Ip);
        let mut pool = pool();
        let mut echo = udp_packet(peer, us, 2152, 2152, &gtpu_echo_request(0x4444));
        let at = udp_payload_offset(&echo);
        echo[at + 8] ^= 0x01; // the sequence number, after the checksum
        let mut gpdu = udp_packet(peer, us, 2152, 2152, &gtpu_gpdu(0x1000, &tcp4(b"x", 1)));
        gpdu[at + 7] ^= 0x01; // TEID 0x1000 -> 0x1001
        let out = run_decap(&mut b, &mut pool, &[echo, gpdu], 0);
        assert!(out.packets.is_empty());
        assert!(
            out.replies.is_empty(),
            "v6={v6}: {} replies to damaged datagrams",
            out.replies.len()
        );
        assert_eq!(
            b.drops(DropReason::BadChecksum),
            2,
            "{}",
            b.runtime().report()
        );
        assert_balanced(&b);
        assert_no_leak(&pool);
    }
}
