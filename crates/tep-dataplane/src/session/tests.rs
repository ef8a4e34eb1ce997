use super::control::{SessionError, SessionSpec, Sessions, Volume};
use super::*;
use core::net::{Ipv4Addr, Ipv6Addr};

fn v4(a: [u8; 4]) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(a))
}

fn spec(n3: u32, teid: u32, ue: u32, peer: Option<(IpAddr, u32)>) -> SessionSpec {
    SessionSpec {
        n3,
        uplink: Action::Forward,
        downlink: Action::Forward,
        peer,
        qfi: Some(9),
        uplink_keys: vec![UplinkKey { teid, qfi: None }],
        downlink_keys: vec![UeKey::V4(ue)],
        network: 0,
        ue: UeSource::new(Some(ue), None).unwrap(),
        mbr: Default::default(),
        rules: Default::default(),
    }
}

/// Control plane and two worker replicas, the replicas caught up.
fn setup() -> (Sessions, Vec<SessionTable>) {
    let (c, links) = Sessions::new(1000, 2, vec![false, true]);
    (c, links.into_iter().map(SessionTable::new).collect())
}

/// A downlink rule taking what goes to the UE's port `port`, to `gnb`'s
/// TEID 0x10 with QFI 1.
fn port_rule(gnb: IpAddr, port: u16) -> super::rules::RuleSpec {
    super::rules::RuleSpec {
        filters: vec![super::rules::FlowMatch {
            ue_ports: vec![(port, port)],
            ..Default::default()
        }],
        qfi_match: None,
        action: Action::Forward,
        peer: Some((gnb, 0x10)),
        qfi: Some(1),
        mbr: None,
    }
}

fn sync(c: &mut Sessions, w: &mut [SessionTable]) -> Vec<Change> {
    c.publish();
    let mut applied = Vec::new();
    for t in w.iter_mut() {
        t.apply_pending(&mut applied);
    }
    assert!(c.settled());
    applied
}

#[test]
fn a_session_is_found_both_ways_in_every_replica() {
    let (mut c, mut w) = setup();
    let gnb = v4([192, 0, 2, 9]);
    let slot = c
        .create(&spec(0, 0x100, 0x0a00_0001, Some((gnb, 0x77))))
        .unwrap();
    assert!(
        w[0].uplink(0x100, None).is_none(),
        "not before it is applied"
    );
    sync(&mut c, &mut w);
    for t in &w {
        assert_eq!(t.uplink(0x100, None), Some(slot));
        assert_eq!(
            t.uplink(0x100, Some(5)),
            Some(slot),
            "no QFI in the PDR: any"
        );
        assert_eq!(t.uplink(0x101, None), None);
        assert_eq!(t.downlink(false, 0x0a00_0001), Some(slot));
        assert_eq!(t.downlink(false, 0x0a00_0002), None);
        let s = t.get(slot);
        assert_eq!(
            (s.n3, s.teid, s.qfi, s.downlink),
            (0, 0x77, Some(9), Action::Forward)
        );
        assert_eq!(
            t.peer(s.peer),
            Some(Peer {
                n3: 0,
                addr: gnb,
                dscp: None
            })
        );
    }
}

/// UE addresses repeat across data networks: the downlink finds the
/// session of the network a packet came from; within one network a key
/// is one session's; a session moved to another network takes its keys
/// along; the network rides in the slot's line beside the N3 tunnel.
#[test]
fn downlink_keys_are_per_data_network() {
    let (mut c, mut w) = setup();
    let ue = 0x0a2d_0001;
    let mut a = spec(0, 1, ue, None);
    a.network = 1;
    let mut b = spec(0, 2, ue, None);
    b.network = 2;
    let sa = c.create(&a).unwrap();
    let sb = c.create(&b).unwrap();
    let mut dup = spec(0, 3, ue, None);
    dup.network = 2;
    assert!(matches!(c.create(&dup), Err(SessionError::KeyInUse(_))));
    dup.network = super::MAX_NETWORKS as u8;
    assert_eq!(c.create(&dup), Err(SessionError::Full));
    sync(&mut c, &mut w);
    let t = &mut w[0];
    for (network, want) in [(0, None), (1, Some(sa)), (2, Some(sb)), (3, None)] {
        t.set_network(network);
        assert_eq!(t.downlink(false, u128::from(ue)), want, "network {network}");
    }
    assert_eq!((t.get(sa).network, t.get(sb).network), (1, 2));
    t.set_network(0);
    assert!(t.in_other_network(false, u128::from(ue)));
    assert!(!t.in_other_network(false, u128::from(ue) + 1));
    t.set_network(1);
    assert!(
        t.in_other_network(false, u128::from(ue)),
        "network 2 has it"
    );
    assert_eq!((t.get(sa).n3, t.get(sb).n3), (0, 0));
    let mut moved = a.clone();
    moved.network = 3;
    c.modify(sa, &moved, false).unwrap();
    c.remove(sb).unwrap();
    // Worker 0 applies it while on network 3 (new to it), worker 1 while
    // on network 0.
    sync(&mut c, &mut w);
    for t in &mut w {
        for (network, want) in [
            (3, Some(sa)),
            (1, None),
            (2, None),
            (3, Some(sa)),
            (0, None),
        ] {
            t.set_network(network);
            assert_eq!(t.downlink(false, u128::from(ue)), want, "network {network}");
        }
        assert!(t.in_other_network(false, u128::from(ue)));
        assert_eq!(t.get(sa).network, 3);
        assert_eq!(t.len(), 1);
    }
}

/// The owner counts that answer `in_other_network` in one lookup: built
/// from network 0's keys when a second network appears, kept as keys
/// come and go (a key two networks have stays until both let it go).
#[test]
fn other_networks_are_found_by_owner_counts() {
    let (mut c, mut w) = setup();
    let (ue, other) = (0x0a2d_0001u32, 0x0a2d_0002u32);
    let first = c.create(&spec(0, 1, ue, None)).unwrap();
    sync(&mut c, &mut w);
    assert!(!w[0].in_other_network(false, u128::from(ue)), "one network");
    let mut b = spec(0, 2, ue, None);
    b.network = 1;
    let second = c.create(&b).unwrap();
    let mut d = spec(0, 3, other, None);
    d.network = 1;
    let third = c.create(&d).unwrap();
    sync(&mut c, &mut w);
    for t in &mut w {
        t.set_network(2);
        assert!(t.in_other_network(false, u128::from(ue)));
        assert!(t.in_other_network(false, u128::from(other)));
        assert!(!t.in_other_network(false, u128::from(other) + 1));
    }
    c.remove(first).unwrap();
    c.remove(third).unwrap();
    sync(&mut c, &mut w);
    assert!(w[0].in_other_network(false, u128::from(ue)), "network 1's");
    assert!(!w[0].in_other_network(false, u128::from(other)));
    c.remove(second).unwrap();
    sync(&mut c, &mut w);
    assert!(!w[1].in_other_network(false, u128::from(ue)));
}

#[test]
fn uplink_qfi_exact_before_any() {
    let (mut c, mut w) = setup();
    let mut a = spec(0, 5, 1, None);
    a.uplink_keys = vec![UplinkKey {
        teid: 5,
        qfi: Some(1),
    }];
    let mut b = spec(0, 5, 2, None);
    b.uplink_keys = vec![UplinkKey { teid: 5, qfi: None }];
    let sa = c.create(&a).unwrap();
    let sb = c.create(&b).unwrap();
    sync(&mut c, &mut w);
    assert_eq!(w[0].uplink(5, Some(1)), Some(sa));
    assert_eq!(w[0].uplink(5, Some(2)), Some(sb));
    assert_eq!(w[0].uplink(5, None), Some(sb));
}

#[test]
fn ipv6_addresses_and_64_prefixes() {
    let (mut c, mut w) = setup();
    let ue: u128 = Ipv6Addr::new(0x2001, 0xdb8, 1, 2, 0, 0, 0, 5).into();
    let mut s = spec(1, 9, 0, None);
    s.downlink_keys = vec![UeKey::V6Prefix((ue >> 64) as u64)];
    let prefix = c.create(&s).unwrap();
    s.downlink_keys = vec![UeKey::V6(ue)];
    s.uplink_keys = vec![UplinkKey {
        teid: 10,
        qfi: None,
    }];
    let exact = c.create(&s).unwrap();
    sync(&mut c, &mut w);
    assert_eq!(w[1].downlink(true, ue), Some(exact), "/128 before /64");
    assert_eq!(w[1].downlink(true, ue + 1), Some(prefix));
    assert_eq!(w[1].downlink(true, ue + (1 << 64)), None);
}

/// Every UE source a slot's line holds comes back out of it as it went
/// in, beside the rest of the rules; the one it cannot hold is refused.
#[test]
fn ue_sources_share_the_slots_line() {
    let (mut c, mut w) = setup();
    let a6: u128 = Ipv6Addr::new(0x2001, 0xdb8, 1, 2, 0, 0, 0, 5).into();
    let sources = [
        UeSource::default(),
        UeSource::new(Some(0x0a00_0001), None).unwrap(),
        UeSource::new(None, Some(Ue6::Addr(a6))).unwrap(),
        UeSource::new(None, Some(Ue6::Prefix(u64::MAX))).unwrap(),
        UeSource::new(Some(u32::MAX), Some(Ue6::Prefix(1))).unwrap(),
    ];
    for (i, &ue) in sources.iter().enumerate() {
        let mut s = spec(0, 100 + i as u32, i as u32, Some((v4([192, 0, 2, 9]), 7)));
        s.ue = ue;
        let slot = c.create(&s).unwrap();
        sync(&mut c, &mut w);
        let got = w[0].get(slot);
        assert_eq!((got.ue, got.teid, got.qfi), (ue, 7, Some(9)), "{ue:?}");
    }
    assert_eq!(UeSource::new(Some(1), Some(Ue6::Addr(a6))), None);
    assert_eq!(
        UeSource::of_keys(&[UeKey::V4(1), UeKey::V6Prefix(2)]),
        UeSource::new(Some(1), Some(Ue6::Prefix(2)))
    );
    assert_eq!(UeSource::of_keys(&[UeKey::V4(1), UeKey::V6(2)]), None);
}

#[test]
fn keys_belong_to_one_session() {
    let (mut c, _w) = setup();
    c.create(&spec(0, 1, 1, None)).unwrap();
    assert!(matches!(
        c.create(&spec(0, 1, 2, None)),
        Err(SessionError::KeyInUse(_))
    ));
    assert!(matches!(
        c.create(&spec(0, 2, 1, None)),
        Err(SessionError::KeyInUse(_))
    ));
    assert_eq!(
        c.create(&spec(1, 3, 3, Some((v4([1, 1, 1, 1]), 1)))),
        Err(SessionError::PeerFamily)
    );
    assert_eq!(c.len(), 1);
}

#[test]
fn modify_moves_keys_and_peers_with_an_end_marker() {
    let (mut c, mut w) = setup();
    let (old, new) = (v4([192, 0, 2, 9]), v4([192, 0, 2, 10]));
    let slot = c.create(&spec(0, 1, 1, Some((old, 0x10)))).unwrap();
    sync(&mut c, &mut w);
    let old_peer = w[0].get(slot).peer;
    let mut s = spec(0, 1, 1, Some((new, 0x20)));
    s.downlink_keys = vec![UeKey::V4(2)];
    c.modify(slot, &s, true).unwrap();
    let applied = sync(&mut c, &mut w);
    assert!(applied.contains(&Change::EndMarker {
        n3: 0,
        peer: old,
        teid: 0x10
    }));
    for t in &w {
        assert_eq!(t.downlink(false, 1), None);
        assert_eq!(t.downlink(false, 2), Some(slot));
        let sess = t.get(slot);
        assert_eq!(t.peer(sess.peer).unwrap().addr, new);
        assert_eq!(sess.teid, 0x20);
        assert_eq!(t.end_markers, [(0, old, 0x10)]);
        // The old gNB has no session left: its id is cleared.
        assert_ne!(sess.peer, old_peer);
        assert_eq!(t.peer(old_peer), None);
    }
    // Without SNDEM, no End Marker.
    c.modify(slot, &spec(0, 1, 1, Some((old, 0x30))), false)
        .unwrap();
    let applied = sync(&mut c, &mut w);
    assert!(!applied
        .iter()
        .any(|c| matches!(c, Change::EndMarker { .. })));
}

#[test]
fn forward_without_a_peer_drops() {
    let (mut c, mut w) = setup();
    let slot = c.create(&spec(0, 1, 1, None)).unwrap();
    sync(&mut c, &mut w);
    assert_eq!(w[0].get(slot).downlink, Action::Drop);
    assert_eq!(w[0].get(slot).uplink, Action::Forward);
}

#[test]
fn usage_sums_the_workers_and_starts_at_zero_in_a_reused_slot() {
    let (mut c, mut w) = setup();
    let slot = c.create(&spec(0, 1, 1, None)).unwrap();
    sync(&mut c, &mut w);
    w[0].count_uplink(slot, 100);
    w[1].count_uplink(slot, 50);
    w[1].count_downlink(slot, 1400);
    assert_eq!(
        c.usage(slot),
        Volume {
            ul_packets: 2,
            ul_bytes: 150,
            dl_packets: 1,
            dl_bytes: 1400
        }
    );
    assert_eq!(c.remove(slot).unwrap().ul_bytes, 150);
    // Not reused before every worker applied the removal.
    c.publish();
    let mut applied = Vec::new();
    w[0].apply_pending(&mut applied);
    let other = c.create(&spec(0, 2, 2, None)).unwrap();
    assert_ne!(other, slot);
    w[1].apply_pending(&mut applied);
    sync(&mut c, &mut w);
    let again = c.create(&spec(0, 3, 3, None)).unwrap();
    assert_eq!(again, slot, "reused once every worker applied the removal");
    assert_eq!(c.usage(again), Volume::default());
    assert_eq!(w[0].uplink(1, None), None, "the old key is gone");
}

#[test]
fn a_full_table_refuses() {
    let (mut c, _) = Sessions::new(2, 1, vec![false]);
    c.create(&spec(0, 1, 1, None)).unwrap();
    c.create(&spec(0, 2, 2, None)).unwrap();
    assert_eq!(c.create(&spec(0, 3, 3, None)), Err(SessionError::Full));
    assert_eq!(
        c.modify(9, &spec(0, 3, 3, None), false),
        Err(SessionError::NoSession)
    );
    assert_eq!(c.remove(9), Err(SessionError::NoSession));
}

#[test]
fn a_million_sessions_fit_in_200_bytes_each() {
    let (mut c, links) = Sessions::new(1 << 20, 1, vec![false]);
    let mut w = SessionTable::new(links[0].clone());
    let gnb = v4([192, 0, 2, 9]);
    let mut applied = Vec::new();
    for i in 0..1_000_000u32 {
        c.create(&spec(0, i + 1, 0x0a00_0000 + i, Some((gnb, i))))
            .unwrap();
        if i % 4096 == 0 {
            c.publish();
            w.apply_pending(&mut applied);
        }
    }
    c.publish();
    w.apply_pending(&mut applied);
    assert_eq!(w.len(), 1_000_000);
    let per = w.bytes_per_session();
    eprintln!("{per:.1} bytes per session per worker");
    assert!(per <= 200.0, "{per:.0} bytes per session");
    assert_eq!(w.uplink(777_778, None), Some(777_777));
    assert_eq!(w.downlink(false, 0x0a00_0000 + 5), Some(5));
}

/// A worker restarted with an empty replica (a reload) catches up from
/// `replay`: the same sessions, keys and peers as one that ran throughout,
/// whatever was still queued for the old one.
#[test]
fn a_fresh_replica_catches_up_by_replay() {
    let (mut c, mut w) = setup();
    let gnb = v4([192, 0, 2, 9]);
    let a = c.create(&spec(0, 0x100, 1, Some((gnb, 0x77)))).unwrap();
    let b = c.create(&spec(0, 0x200, 2, Some((gnb, 0x78)))).unwrap();
    let gone = c.create(&spec(0, 0x300, 3, None)).unwrap();
    sync(&mut c, &mut w);
    // Changes the old worker 1 never applied: a removal and a new session.
    c.remove(gone).unwrap();
    let d = c.create(&spec(0, 0x400, 4, None)).unwrap();
    c.publish();
    w[0].apply_pending(&mut Vec::new());
    let link = w[1].link.clone();
    w[1] = SessionTable::new(link);
    c.replay();
    let mut applied = Vec::new();
    for t in w.iter_mut() {
        t.apply_pending(&mut applied);
    }
    assert!(c.settled());
    for t in &w {
        assert_eq!(t.len(), 3);
        for (teid, ue, slot) in [(0x100, 1, a), (0x200, 2, b), (0x400, 4, d)] {
            assert_eq!(t.uplink(teid, None), Some(slot));
            assert_eq!(t.downlink(false, ue), Some(slot));
        }
        assert_eq!(t.uplink(0x300, None), None);
        assert_eq!(t.downlink(false, 3), None);
        let s = t.get(b);
        assert_eq!(
            t.peer(s.peer),
            Some(Peer {
                n3: 0,
                addr: gnb,
                dscp: None
            })
        );
        assert_eq!(s.teid, 0x78);
    }
}

/// The uplink map keeps a TEID's keys in one probe run: a lookup tells a
/// QFI no PDR takes (`Err(true)`) from a TEID nobody has (`Err(false)`),
/// through hundreds of TEIDs sharing runs and removals shifting them.
#[test]
fn uplink_lookups_tell_an_unknown_teid_from_an_unmatched_qfi() {
    let (mut c, mut w) = setup();
    let mut slots = Vec::new();
    for t in 1..=900u32 {
        let mut s = spec(0, t, t, None);
        s.uplink_keys = if t.is_multiple_of(2) {
            vec![
                UplinkKey {
                    teid: t,
                    qfi: Some(1),
                },
                UplinkKey {
                    teid: t,
                    qfi: Some(2),
                },
            ]
        } else {
            vec![
                UplinkKey { teid: t, qfi: None },
                UplinkKey {
                    teid: t,
                    qfi: Some(5),
                },
            ]
        };
        slots.push(c.create(&s).unwrap());
    }
    sync(&mut c, &mut w);
    let check = |w: &SessionTable, t: u32, slot: Option<u32>| {
        let s = slot.ok_or(false);
        if t.is_multiple_of(2) {
            assert_eq!(w.uplink_match(t, Some(1)), s);
            assert_eq!(w.uplink_match(t, Some(2)), s);
            // No PDR takes QFI 3, or none: known while the session is.
            assert_eq!(w.uplink_match(t, Some(3)), Err(slot.is_some()));
            assert_eq!(w.uplink_match(t, None), Err(slot.is_some()));
        } else {
            // The wildcard takes any QFI, and none; QFI 5 its own.
            for q in [None, Some(1), Some(5), Some(63)] {
                assert_eq!(w.uplink_match(t, q), s, "teid {t} qfi {q:?}");
            }
        }
    };
    for t in 1..=900u32 {
        check(&w[0], t, Some(slots[t as usize - 1]));
    }
    assert_eq!(w[0].uplink_match(901, Some(1)), Err(false));
    for t in (1..=900u32).filter(|t| t.is_multiple_of(3)) {
        c.remove(slots[t as usize - 1]).unwrap();
    }
    sync(&mut c, &mut w);
    for t in 1..=900u32 {
        let slot = (!t.is_multiple_of(3)).then(|| slots[t as usize - 1]);
        check(&w[1], t, slot);
    }
}

/// Sessions with the same filters share one classifier; each rule's peer
/// is held while a rule names it; a QER's bucket is one for the rules
/// under it and kept over a modification at the same rate; a worker
/// started afresh gets the rules in the replay.
#[test]
fn rules_share_classifiers_peers_and_buckets() {
    use super::rules::{FlowMatch, RuleSpec};
    let (mut c, links) = Sessions::new(1000, 2, vec![false, true]);
    let mut w: Vec<SessionTable> = links.iter().cloned().map(SessionTable::new).collect();
    let gnb = v4([192, 0, 2, 9]);
    let other = v4([192, 0, 2, 10]);
    let voice = FlowMatch {
        protocol: Some(17),
        ue_ports: vec![(5000, 5010)],
        ..Default::default()
    };
    let rule = |filters: Vec<FlowMatch>, peer, mbr| RuleSpec {
        filters,
        qfi_match: None,
        action: Action::Forward,
        peer: Some((peer, 0x10)),
        qfi: Some(1),
        mbr,
    };
    let with_rules = |teid, ue, peer2| {
        let mut s = spec(0, teid, ue, Some((gnb, 0x77)));
        s.rules.downlink = vec![
            rule(vec![voice.clone()], peer2, Some((7, 1_000_000))),
            rule(vec![], gnb, Some((7, 1_000_000))),
        ];
        s
    };
    let a = c.create(&with_rules(0x100, 0x0a00_0001, other)).unwrap();
    let b = c.create(&with_rules(0x200, 0x0a00_0002, gnb)).unwrap();
    sync(&mut c, &mut w);
    let set = |t: &SessionTable, s: u32| t.rules[s as usize].clone().unwrap();
    let (sa, sb) = (set(&w[0], a), set(&w[0], b));
    let (ca, cb) = (sa.downlink.as_ref().unwrap(), sb.downlink.as_ref().unwrap());
    assert!(Arc::ptr_eq(ca, cb), "one classifier for both");
    let bucket = |s: &RuleSet, i: usize| s.dl[i].bucket.clone().unwrap();
    assert!(
        Arc::ptr_eq(&bucket(&sa, 0), &bucket(&sa, 1)),
        "one QER, one bucket"
    );
    assert!(
        !Arc::ptr_eq(&bucket(&sa, 0), &bucket(&sb, 0)),
        "a session's own"
    );
    assert!(w[0].get(a).downlink_rules && !w[0].get(a).uplink_rules);
    // The voice rule's peer of session a is the second gNB's.
    let peer = |t: &SessionTable, id: u32| t.peer(id).map(|p| p.addr);
    assert_eq!(peer(&w[0], sa.dl[0].peer), Some(other));
    assert_eq!(peer(&w[0], sa.dl[1].peer), Some(gnb));
    // Modified at the same rate: the bucket stays; with the rules gone,
    // the second gNB (no rule names it any more) goes.
    let mut same = with_rules(0x100, 0x0a00_0001, other);
    same.rules.downlink[1].qfi = Some(2);
    c.modify(a, &same, false).unwrap();
    sync(&mut c, &mut w);
    let sa2 = set(&w[0], a);
    assert!(Arc::ptr_eq(&bucket(&sa, 0), &bucket(&sa2, 0)));
    let other_id = sa2.dl[0].peer;
    c.modify(a, &spec(0, 0x100, 0x0a00_0001, Some((gnb, 0x77))), false)
        .unwrap();
    sync(&mut c, &mut w);
    assert!(w[0].rules[a as usize].is_none());
    assert_eq!(peer(&w[0], other_id), None);
    assert!(!w[0].get(a).downlink_rules);
    // A fresh worker catches up with the replay, rules included.
    let mut fresh = SessionTable::new(links[1].clone());
    c.replay();
    fresh.apply_pending(&mut Vec::new());
    assert!(fresh.rules[b as usize].is_some());
    assert!(fresh.get(b).downlink_rules);
    // Removed: the worker drops its rules.
    c.remove(b).unwrap();
    sync(&mut c, &mut w);
    assert!(w[1].rules[b as usize].is_none());
}

#[test]
fn rules_the_classifier_cannot_hold_are_refused_and_change_nothing() {
    use super::rules::{RuleError, RuleSpec, MAX_RULES};
    let (mut c, mut w) = setup();
    let mut s = spec(0, 0x100, 0x0a00_0001, None);
    s.rules.uplink = (0..=MAX_RULES)
        .map(|_| RuleSpec {
            filters: vec![],
            qfi_match: None,
            action: Action::Forward,
            peer: None,
            qfi: None,
            mbr: None,
        })
        .collect();
    assert_eq!(
        c.create(&s),
        Err(SessionError::Rules {
            uplink: true,
            error: RuleError::TooManyRules(MAX_RULES)
        })
    );
    assert!(c.is_empty());
    assert!(sync(&mut c, &mut w).is_empty());
}

/// A rule's usage counter: its own per rule, summed over the workers,
/// kept over a modification that keeps the rule's key (its PDR), new and
/// zeroed for a new key, and reused only once every worker applied the
/// change that stopped the old rule.
#[test]
fn rule_counters_follow_their_keys() {
    use super::control::RuleTag;
    let (mut c, mut w) = setup();
    let gnb = v4([192, 0, 2, 9]);
    let rule = |port| port_rule(gnb, port);
    let with = |keys: &[u32]| {
        let mut s = spec(0, 0x100, 0x0a00_0001, Some((gnb, 0x77)));
        s.rules.downlink = keys.iter().map(|&k| rule(k as u16)).collect();
        s.rules.downlink_tags = keys
            .iter()
            .map(|&key| RuleTag {
                key,
                counted: true,
                ..Default::default()
            })
            .collect();
        s
    };
    let slot = c.create(&with(&[3, 4])).unwrap();
    sync(&mut c, &mut w);
    let id = |c: &Sessions, key| c.rule_counter(slot, false, key).unwrap();
    let (three, four) = (id(&c, 3), id(&c, 4));
    assert_ne!(three, four);
    assert_eq!(c.rule_counter(slot, true, 3), None, "no uplink rules");
    let set = w[0].rules[slot as usize].clone().unwrap();
    assert_eq!((set.dl[0].counter, set.dl[1].counter), (three, four));
    w[0].count_rule(three, 100);
    w[1].count_rule(three, 50);
    w[1].count_rule(four, 7);
    assert_eq!(c.rule_usage(three), (2, 150));
    assert_eq!(c.rule_usage(four), (1, 7));
    // Rule 4 replaced by rule 5: 3 keeps its counts, 5 starts at zero.
    c.modify(slot, &with(&[3, 5]), false).unwrap();
    assert_eq!(id(&c, 3), three);
    let five = id(&c, 5);
    assert_ne!(five, four, "not reused before the workers moved on");
    assert_eq!(c.rule_usage(five), (0, 0));
    sync(&mut c, &mut w);
    assert_eq!(c.rule_usage(three), (2, 150));
    // Once they did, 4's counter goes to the next new rule, zeroed.
    c.modify(slot, &with(&[3, 5, 6]), false).unwrap();
    assert_eq!(id(&c, 6), four);
    assert_eq!(c.rule_usage(four), (0, 0));
    sync(&mut c, &mut w);
    c.remove(slot).unwrap();
    sync(&mut c, &mut w);
    let again = c.create(&with(&[1, 2, 3])).unwrap();
    let ids: Vec<u32> = (1..=3)
        .map(|k| c.rule_counter(again, false, k).unwrap())
        .collect();
    assert!(ids.iter().all(|&i| c.rule_usage(i) == (0, 0)));
}

/// A session's bucket is one for all the workers, wherever it is kept:
/// what two workers pass between them is what one bucket passes, and once
/// the burst is spent, neither passes more.
#[test]
fn the_workers_share_a_sessions_bucket() {
    let (mut c, mut w) = setup();
    let mut s = spec(0, 0x100, 0x0a00_0001, None);
    s.mbr.downlink = Some(8_000_000);
    let slot = c.create(&s).unwrap();
    sync(&mut c, &mut w);
    // Two workers: each charge a compare-and-swap; a lone one's, a store.
    assert!(w.iter().all(SessionTable::shared_buckets));
    let (_, lone) = Sessions::new(10, 1, vec![false]);
    assert!(lone[0].lone);
    let one = rate::Bucket::default();
    one.set(8_000_000);
    let now = 1_000_000_000;
    let (mut passed, mut want) = ([0; 2], 0);
    for k in 0..600 {
        want += usize::from(one.admit(1000, now, true));
        passed[k % 2] += usize::from(w[k % 2].admit(slot, false, 1000, now));
    }
    // A quarter second at 1 MB/s: 250 KB.
    assert_eq!(want, 250);
    assert_eq!((passed[0], passed[1]), (125, 125));
    assert!(!w[0].admit(slot, false, 1000, now));
    assert!(!w[1].admit(slot, false, 1000, now));
    assert!(w[1].admit(slot, true, 1000, now), "the uplink has no MBR");
}

/// URRs on only some PDRs: every rule under a group charges its one line
/// (whichever worker), a rule under none is not flagged and has no line,
/// a crossing is queued once with its slot and group, a quota passes
/// exactly what fits, and a group's line goes when its rules do, reused
/// only once every worker applied that.
/// A session's groups past the table of lines (4 a session: here one
/// session's worth) get none, counted: their rules charge nothing and
/// arming them says so, so the scans are left to check them.
#[test]
fn groups_past_the_table_of_lines_are_counted() {
    use super::control::RuleTag;
    use super::watch::{VolumeLimits, NO_LINE};
    let (mut c, links) = Sessions::new(1, 1, vec![false]);
    let mut w: Vec<SessionTable> = links.into_iter().map(SessionTable::new).collect();
    let gnb = v4([192, 0, 2, 9]);
    let mut s = spec(0, 0x100, 0x0a00_0001, Some((gnb, 0x77)));
    s.rules.downlink = (1..=3).map(|port| port_rule(gnb, port)).collect();
    // Six groups, two a rule.
    s.rules.downlink_tags = (0..3u32)
        .map(|k| RuleTag {
            key: k + 1,
            counted: true,
            watch: [Some(2 * k + 1), Some(2 * k + 2)],
            ..Default::default()
        })
        .collect();
    let slot = c.create(&s).unwrap();
    sync(&mut c, &mut w);
    assert_eq!(c.lines_refused(), 2);
    let set = w[0].rules[slot as usize].clone().unwrap();
    let u = &w[0].link.urr_watches;
    let lines: Vec<u32> = set.dl.iter().flat_map(|t| u.rule(t.counter)).collect();
    assert_eq!(
        lines.iter().filter(|&&l| l == NO_LINE).count(),
        2,
        "{lines:?}"
    );
    let armed = (1..=6)
        .filter(|&g| c.arm_group(slot, g, &VolumeLimits::default()))
        .count();
    assert_eq!(armed, 4);
}

#[test]
fn group_lines_are_charged_by_their_rules() {
    use super::control::{GroupCrossed, RuleTag};
    use super::watch::{VolumeLimits, NO_LINE};
    let (mut c, mut w) = setup();
    let gnb = v4([192, 0, 2, 9]);
    let rule = |port| port_rule(gnb, port);
    // Rules 3 and 4 under group 7 (4 also under 8), rule 5 under none.
    let with = |ue: u32, rules: &[(u32, [Option<u32>; 2])]| {
        let mut s = spec(0, 0x100 + ue, 0x0a00_0000 + ue, Some((gnb, 0x77)));
        s.rules.downlink = rules.iter().map(|&(k, _)| rule(k as u16)).collect();
        s.rules.downlink_tags = rules
            .iter()
            .map(|&(key, watch)| RuleTag {
                key,
                counted: true,
                watch,
                ..Default::default()
            })
            .collect();
        s
    };
    let three_rules = [
        (3, [Some(7), None]),
        (4, [Some(7), Some(8)]),
        (5, [None; 2]),
    ];
    let slot = c.create(&with(1, &three_rules)).unwrap();
    sync(&mut c, &mut w);
    let set = w[0].rules[slot as usize].clone().unwrap();
    let (r3, r4, r5) = (&set.dl[0], &set.dl[1], &set.dl[2]);
    assert!(r3.watched && r4.watched && !r5.watched);
    let u = &w[0].link.urr_watches;
    let (l7, l8) = (u.rule(r3.counter)[0], u.rule(r4.counter)[1]);
    assert_eq!(u.rule(r4.counter), [l7, l8], "one line per group");
    assert_ne!(l7, l8);
    assert_eq!(u.rule(r5.counter), [NO_LINE; 2]);
    let limits = |threshold, quota| VolumeLimits {
        threshold: [threshold, None, None],
        quota: [quota, None, None],
    };
    assert!(c.arm_group(slot, 7, &limits(Some(2500), Some(4500))));
    assert!(c.arm_group(slot, 8, &limits(None, Some(1000))));
    assert!(
        !c.arm_group(slot, 9, &limits(Some(1), None)),
        "no such group"
    );
    let crossed = |c: &Sessions| {
        let mut out = Vec::new();
        c.crossed_groups(&mut Vec::new(), &mut out);
        out
    };
    let charge = |w: &SessionTable, counter| w.charge_rule_volume(counter, false, 1000).is_ok();
    assert!(charge(&w[0], r3.counter) && charge(&w[1], r3.counter));
    assert!(crossed(&c).is_empty());
    let wakes = Arc::new(core::sync::atomic::AtomicUsize::new(0));
    let n = wakes.clone();
    c.wake_on_volume(Box::new(move || {
        n.fetch_add(1, core::sync::atomic::Ordering::Relaxed);
    }));
    assert!(charge(&w[1], r4.counter), "the third packet crosses 7");
    // The control plane is woken once the worker is done with its
    // vector (its packets counted), once.
    assert_eq!(wakes.load(core::sync::atomic::Ordering::Relaxed), 0);
    w[0].wake_on_crossing();
    assert_eq!(
        wakes.load(core::sync::atomic::Ordering::Relaxed),
        0,
        "not this worker's"
    );
    w[1].wake_on_crossing();
    w[1].wake_on_crossing();
    assert_eq!(wakes.load(core::sync::atomic::Ordering::Relaxed), 1);
    let at = |group, since, quota_spent| GroupCrossed {
        slot,
        group,
        since,
        quota_spent,
    };
    // 8's quota is used to the byte: used up.
    let mut x = crossed(&c);
    x.sort_by_key(|g| g.group);
    assert_eq!(x, [at(7, (0, 0), false), at(8, (0, 0), true)]);
    assert!(charge(&w[0], r3.counter), "4000 of 7's 4500");
    assert!(crossed(&c).is_empty(), "crossed once");
    assert!(!charge(&w[0], r3.counter), "the packet that would exceed");
    assert!(!charge(&w[1], r4.counter), "8's quota is spent");
    assert_eq!(crossed(&c), [at(7, (0, 1000), true)]);
    // A rule without a group charges nothing, whatever it takes.
    let mut none = false;
    assert_eq!(
        w[0].link
            .urr_watches
            .charge(r5.counter, false, 1 << 20, &mut none),
        super::watch::Charged::Pass
    );
    assert!(!none);
    // Group 7 goes: its line is no one's and disarmed; not reused by
    // another session before the workers apply that.
    c.modify(
        slot,
        &with(1, &[(3, [None; 2]), (4, [Some(8), None])]),
        false,
    )
    .unwrap();
    assert!(!c.arm_group(slot, 7, &limits(Some(1), None)));
    let other = c
        .create(&with(2, &[(1, [Some(7), None]), (2, [None; 2])]))
        .unwrap();
    sync(&mut c, &mut w);
    let set = w[0].rules[slot as usize].clone().unwrap();
    assert!(!set.dl[0].watched);
    assert_eq!(
        w[0].link.urr_watches.rule(set.dl[1].counter),
        [l8, NO_LINE],
        "kept"
    );
    let o = w[0].rules[other as usize].clone().unwrap();
    let lo = w[0].link.urr_watches.rule(o.dl[0].counter)[0];
    assert!(lo != l7 && lo != l8 && lo != NO_LINE);
    let third = c
        .create(&with(3, &[(1, [Some(5), None]), (2, [None; 2])]))
        .unwrap();
    sync(&mut c, &mut w);
    let t = w[0].rules[third as usize].clone().unwrap();
    assert_eq!(w[0].link.urr_watches.rule(t.dl[0].counter)[0], l7, "reused");
    assert!(c.arm_group(third, 5, &limits(Some(1000), None)));
    assert!(charge(&w[0], t.dl[0].counter));
    assert_eq!(
        crossed(&c),
        [GroupCrossed {
            slot: third,
            group: 5,
            since: (0, 0),
            quota_spent: false
        }]
    );
    // Removed: its line's crossings are no one's.
    c.remove(third).unwrap();
    assert!(charge(&w[0], t.dl[0].counter), "disarmed");
    assert!(crossed(&c).is_empty());
}

/// A rule that does what its session's own treatment does is served by
/// the slot's line, its classifier found by the line's hint: its packets
/// get the same outer header as the rule's, and a rule that differs
/// (another QFI, an N9 peer) still gets its own, from the rule line. A
/// modification of the session's own treatment moves which rules it
/// serves.
#[test]
fn rules_like_the_session_are_served_by_its_line() {
    use super::rules::{FlowMatch, RuleSpec, OWN_RULE};
    let (mut c, mut w) = setup();
    let gnb = v4([192, 0, 2, 9]);
    let ue = 0x0a00_0001;
    let voice = port_rule(gnb, 5060);
    let catch_all = RuleSpec {
        filters: Vec::new(),
        qfi: Some(9),
        peer: Some((gnb, 0x77)),
        ..voice.clone()
    };
    let mut s = spec(0, 0x100, ue, Some((gnb, 0x77)));
    s.rules.downlink = vec![voice.clone(), catch_all.clone()];
    let to_n6 = RuleSpec {
        peer: None,
        qfi: None,
        ..catch_all.clone()
    };
    let to_n9 = RuleSpec {
        filters: vec![FlowMatch {
            ue_ports: vec![(5060, 5060)],
            ..Default::default()
        }],
        peer: Some((v4([198, 51, 100, 7]), 0x99)),
        ..to_n6.clone()
    };
    s.rules.uplink = vec![to_n9, to_n6];
    let slot = c.create(&s).unwrap();
    sync(&mut c, &mut w);
    let udp = |src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16| {
        let mut p = vec![0x45, 0, 0, 28, 0, 0, 0x40, 0, 64, 17, 0, 0];
        p.extend_from_slice(&src);
        p.extend_from_slice(&dst);
        p.extend_from_slice(&sport.to_be_bytes());
        p.extend_from_slice(&dport.to_be_bytes());
        p.extend_from_slice(&[0, 8, 0, 0]);
        p
    };
    let (server, phone) = ([203, 0, 113, 5], ue.to_be_bytes());
    let down_voice = udp(server, phone, 40000, 5060);
    let down_web = udp(server, phone, 443, 50000);
    let up_web = udp(phone, server, 50000, 443);
    let actions_of = |t: &SessionTable| {
        let line = t.link.usage.slot(slot).unwrap();
        line.actions.load(Ordering::Relaxed)
    };
    for t in &w {
        let actions = actions_of(t);
        let hints = (
            actions >> UL_HINT_SHIFT & HINT_MASK,
            actions >> DL_HINT_SHIFT & HINT_MASK,
        );
        assert!(hints.0 != 0 && hints.1 != 0, "hinted both ways: {hints:?}");
        // Downlink: the voice rule its own (QFI 1, TEID 0x10), the rest
        // the session's (QFI 9, TEID 0x77) through the slot's line.
        let mut last = None;
        let r = t.classify_downlink(slot, &down_voice, &mut last).unwrap();
        assert_eq!(r, Some(0));
        let (word, _) = t.downlink_rule(slot, 0).unwrap();
        let (_, teid, (qfi, _)) = t.downlink_header(word);
        assert_eq!((teid, qfi), (0x10, Some(1)));
        let r = t.classify_downlink(slot, &down_web, &mut last).unwrap();
        assert_eq!(r, Some(1 | OWN_RULE));
        let (_, teid, (qfi, _)) = t.downlink_header(slot);
        assert_eq!((teid, qfi), (0x77, Some(9)));
        // Uplink: to N9 from its rule, to N6 the session's.
        let (r, own) = t.uplink_rule(slot, actions, &up_web, None).unwrap();
        assert_eq!((r, own.is_none()), (1, true));
        let voice_up = udp(phone, server, 5060, 5060);
        let (r, own) = t.uplink_rule(slot, actions, &voice_up, None).unwrap();
        assert_eq!((r, own.map(|t| t.teid)), (0, Some(0x99)));
    }
    // The session's QFI moves to 5: the catch-all (QFI 9) is no longer
    // the session's own, and its packets read their rule again.
    s.qfi = Some(5);
    c.modify(slot, &s, false).unwrap();
    sync(&mut c, &mut w);
    let mut last = None;
    let r = w[1].classify_downlink(slot, &down_web, &mut last).unwrap();
    assert_eq!(r, Some(1));
    let (word, t) = w[1].downlink_rule(slot, 1).unwrap();
    assert_eq!(t.qfi, Some(9));
    assert_eq!(w[1].downlink_header(word).2 .0, Some(9));
    // Removed: the line's hints go with it.
    c.remove(slot).unwrap();
    sync(&mut c, &mut w);
    let hints = HINT_MASK << UL_HINT_SHIFT | HINT_MASK << DL_HINT_SHIFT;
    assert_eq!(actions_of(&w[0]) & hints, 0);
}
