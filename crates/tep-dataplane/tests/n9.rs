//! N9 through the pipeline: an uplink rule whose FAR sends to a peer UPF
//! re-encapsulates the decapsulated packet to it (a ULCL branching by
//! destination prefix between N6 and N9), and a G-PDU to a session's N9
//! F-TEID comes out of decapsulation as a downlink packet of the session,
//! to its gNB with its TEID and QFI (or dropped, or buffered).

mod common;
use common::upf::*;
use common::*;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use tep_dataplane::example;
use tep_dataplane::session::control::{RuleTag, SessionSpec};
use tep_dataplane::session::rules::{FlowMatch, RuleSpec};
use tep_dataplane::session::{Action, UplinkKey};
use tep_dataplane::DropReason;
use tep_wire::gtpu::{Extension, GtpuMessage, GtpuRepr, Packet, PduSessionContainer};

/// The peer UPF (a PSA on N9).
fn psa(v6: bool) -> IpAddr {
    if v6 {
        IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0x20, 0, 0, 0, 0, 20))
    } else {
        IpAddr::V4(Ipv4Addr::new(203, 0, 113, 20))
    }
}

/// A server on the branch the ULCL keeps on its own N6 (10.60.0.0/16,
/// 2001:db8:60::/48), and the prefix.
fn local_dn(v6: bool) -> (IpAddr, (IpAddr, u8)) {
    if v6 {
        let p = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0x60, 0, 0, 0, 0, 0));
        (
            IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0x60, 1, 0, 0, 0, 1)),
            (p, 48),
        )
    } else {
        let p = IpAddr::V4(Ipv4Addr::new(10, 60, 0, 0));
        (IpAddr::V4(Ipv4Addr::new(10, 60, 1, 1)), (p, 16))
    }
}

/// Session 1 of the example as a ULCL: uplink to the local prefix to N6,
/// the rest to the PSA with TEID 0x99.
fn ulcl(v6: bool) -> SessionSpec {
    let mut s = example::session(1, v6, v6);
    let rule = |filters, peer| RuleSpec {
        filters,
        qfi_match: None,
        action: Action::Forward,
        peer,
        qfi: None,
        mbr: None,
    };
    let local = FlowMatch {
        remote: Some(local_dn(v6).1),
        ..Default::default()
    };
    s.rules.uplink = vec![rule(vec![local], None), rule(vec![], Some((psa(v6), 0x99)))];
    s
}

/// The outer packet's destination, GTP-U header and payload.
fn outer(p: &[u8]) -> (IpAddr, GtpuRepr, Vec<u8>) {
    let dst = if p[0] >> 4 == 4 {
        IpAddr::from(<[u8; 4]>::try_from(&p[16..20]).unwrap())
    } else {
        IpAddr::from(<[u8; 16]>::try_from(&p[24..40]).unwrap())
    };
    let g = Packet::new_checked(udp_payload(p)).unwrap();
    (dst, GtpuRepr::parse(&g).unwrap(), g.payload().to_vec())
}

#[test]
fn a_ulcl_sends_its_prefix_to_n6_and_the_rest_to_the_psa_on_n9() {
    for v6 in [false, true] {
        let mut pool = pool();
        let (mut c, mut p) = upf(v6);
        let slot = c.create(&ulcl(v6)).unwrap();
        settle(&mut c, &mut p, &mut pool);
        let ue = if v6 { ue6(1) } else { ue4(1) };
        let to_local = udp_packet(ue, local_dn(v6).0, 5000, 53, b"local");
        let to_psa = inner(ue, true, b"through the PSA");
        let ups = [
            gpdu(v6, 0x10001, Some(9), &to_local),
            gpdu(v6, 0x10001, Some(9), &to_psa),
            gpdu(v6, 0x10001, None, &to_psa),
        ];
        let out = run_decap(&mut p, &mut pool, &ups, 0);
        assert_eq!(out.packets, [to_local], "N6: {}", p.runtime().report());
        // Out of the N3 address to the PSA, TEID 0x99, no container.
        assert_eq!(out.replies.len(), 2, "N9: {}", p.runtime().report());
        for o in &out.replies {
            assert_eq!(outer_udp_ok(o), Some(true), "outer UDP checksum");
            let (dst, r, payload) = outer(o);
            assert_eq!((dst, r.teid, r.message), (psa(v6), 0x99, GtpuMessage::GPdu));
            let src = if v6 {
                IpAddr::from(<[u8; 16]>::try_from(&o[8..24]).unwrap())
            } else {
                IpAddr::from(<[u8; 4]>::try_from(&o[12..16]).unwrap())
            };
            assert_eq!(src, addrs(v6).0, "from the N3 address");
            assert!(r.extensions.is_empty(), "{r:?}");
            assert_eq!(payload, to_psa);
        }
        let u = c.usage(slot);
        assert_eq!((u.ul_packets, u.dl_packets), (3, 0));
        // A spoofed UE source goes nowhere, N9 included.
        let spoofed = inner(if v6 { ue6(2) } else { ue4(2) }, true, b"x");
        let out = run_decap(&mut p, &mut pool, &[gpdu(v6, 0x10001, None, &spoofed)], 0);
        assert!(out.packets.is_empty() && out.replies.is_empty());
        assert_eq!(p.drops(DropReason::UeSourceSpoofed), 1);
        assert_balanced(&p);
        assert_no_leak(&pool);
    }
}

/// A G-PDU from the PSA to TEID `teid` around `inner`, with a DL PDU
/// Session Container of QFI 5 (the PSA's marking, which the I-UPF's own
/// QER replaces).
fn from_psa(v6: bool, teid: u32, inner: &[u8]) -> Vec<u8> {
    let mut r = GtpuRepr::gpdu(teid);
    let dl = PduSessionContainer::dl(5, false);
    let _ = r.extensions.push(Extension::PduSessionContainer(dl));
    let mut g = vec![0u8; r.buffer_len() + inner.len()];
    let n = r.buffer_len();
    r.emit(&mut g[..n], inner.len());
    g[n..].copy_from_slice(inner);
    udp_packet(psa(v6), addrs(v6).0, 2152, 2152, &g)
}

#[test]
fn downlink_from_n9_goes_to_the_gnb_as_the_sessions_downlink() {
    for v6 in [false, true] {
        let mut pool = pool();
        let (mut c, mut p) = upf(v6);
        let mut spec = example::session(1, v6, v6);
        spec.uplink_keys.push(UplinkKey::n9(0x66));
        let slot = c.create(&spec).unwrap();
        settle(&mut c, &mut p, &mut pool);
        let ue = if v6 { ue6(1) } else { ue4(1) };
        let down = inner(ue, false, b"from the PSA");
        let out = run_decap(&mut p, &mut pool, &[from_psa(v6, 0x66, &down)], 0);
        assert!(out.packets.is_empty(), "nothing to N6");
        assert_eq!(out.replies.len(), 1, "{}", p.runtime().report());
        let (dst, r, payload) = outer(&out.replies[0]);
        assert_eq!((dst, r.teid), (addrs(v6).1, 0x20001));
        let qfi = r.extensions.iter().find_map(|e| match e {
            Extension::PduSessionContainer(c) if c.pdu_type == 0 => Some(c.qfi),
            _ => None,
        });
        assert_eq!(qfi, Some(9));
        assert_eq!(payload, down);
        let u = c.usage(slot);
        assert_eq!((u.ul_packets, u.dl_packets), (0, 1));
        // A TEID no key has, N3 or N9, is still unknown.
        let out = run_decap(&mut p, &mut pool, &[from_psa(v6, 0x67, &down)], 0);
        assert!(out.packets.is_empty());
        assert_eq!(p.drops(DropReason::UnknownTeid), 1);
        // The downlink FAR drops (or its quota is used up), then buffers,
        // then forwards what it held.
        for (action, reason) in [
            (Action::Drop, DropReason::SessionDrop),
            (Action::QuotaExhausted, DropReason::QuotaExhausted),
        ] {
            spec.downlink = action;
            c.modify(slot, &spec, false).unwrap();
            settle(&mut c, &mut p, &mut pool);
            let out = run_decap(&mut p, &mut pool, &[from_psa(v6, 0x66, &down)], 0);
            assert!(out.packets.is_empty() && out.replies.is_empty());
            assert_eq!(p.drops(reason), 1);
        }
        spec.downlink = Action::Buffer;
        c.modify(slot, &spec, false).unwrap();
        settle(&mut c, &mut p, &mut pool);
        let out = run_decap(&mut p, &mut pool, &[from_psa(v6, 0x66, &down)], 0);
        assert!(out.packets.is_empty() && out.replies.is_empty());
        assert_eq!(p.counters().buffered, 1);
        spec.downlink = Action::Forward;
        c.modify(slot, &spec, false).unwrap();
        let released = settle(&mut c, &mut p, &mut pool);
        assert_eq!(released.packets.len(), 1);
        let (dst, r, payload) = outer(&released.packets[0]);
        assert_eq!((dst, r.teid, payload), (addrs(v6).1, 0x20001, down));
        // Deleted: its N9 TEID is unknown again.
        c.remove(slot).unwrap();
        settle(&mut c, &mut p, &mut pool);
        run_decap(&mut p, &mut pool, &[from_psa(v6, 0x66, b"")], 0);
        assert_eq!(p.drops(DropReason::UnknownTeid), 2);
        assert_balanced(&p);
        assert_no_leak(&pool);
    }
}

/// The N9 uplink's G-PDU carries its rule's QFI in a UL PDU Session
/// Container (what the PSA's PDRs match) and its FAR's marking as the
/// outer DSCP, the ECN bits still the inner packet's.
#[test]
fn the_n9_uplink_carries_a_ul_container_and_its_mark() {
    for v6 in [false, true] {
        let mut pool = pool();
        let (mut c, mut p) = upf(v6);
        let mut spec = ulcl(v6);
        spec.rules.uplink[1].qfi = Some(9);
        let tag = |key, dscp| RuleTag {
            key,
            counted: false,
            dscp,
            ..Default::default()
        };
        spec.rules.uplink_tags = vec![tag(0, None), tag(1, Some(46))];
        c.create(&spec).unwrap();
        settle(&mut c, &mut p, &mut pool);
        let ue = if v6 { ue6(1) } else { ue4(1) };
        let to_psa = inner(ue, true, b"through the PSA");
        let out = run_decap(&mut p, &mut pool, &[gpdu(v6, 0x10001, Some(5), &to_psa)], 0);
        assert_eq!(out.replies.len(), 1, "N9: {}", p.runtime().report());
        let o = &out.replies[0];
        let (dst, r, payload) = outer(o);
        assert_eq!((dst, r.teid, payload), (psa(v6), 0x99, to_psa));
        let ext: Vec<_> = r.extensions.iter().collect();
        let ul = Extension::PduSessionContainer(PduSessionContainer::ul(9));
        assert_eq!(ext, [&ul]);
        let tos = if v6 {
            (u16::from_be_bytes([o[0], o[1]]) >> 4) as u8
        } else {
            o[1]
        };
        assert_eq!(tos >> 2, 46, "the FAR's DSCP");
        assert_eq!(outer_udp_ok(o), Some(true), "outer UDP checksum");
        assert_balanced(&p);
        assert_no_leak(&pool);
    }
}
