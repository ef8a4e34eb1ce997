//! A UPF session's buffering parameters (a BAR) through the pipeline:
//! the session's bound on held packets, and DROBU, which drops what is
//! held rather than send it when the FAR forwards again.

mod common;
use common::upf::*;
use common::*;
use tep_dataplane::session::Action;
use tep_dataplane::DropReason;

#[test]
fn a_session_bound_holds_that_many_and_drobu_drops_them() {
    let mut pool = pool();
    let (mut c, mut p, mut s, slot) = buffering_session(&mut pool);
    // Its BAR suggests 3 (the workers' bound is 4).
    c.set_buffer_bound(slot, Some(3));
    settle(&mut c, &mut p, &mut pool);
    let pkts: Vec<Vec<u8>> = (0..5u8).map(|k| inner(ue4(1), false, &[k; 64])).collect();
    let out = run_encap(&mut p, &mut pool, &pkts);
    assert!(out.packets.is_empty());
    assert_eq!(p.counters().buffered, 3);
    assert_eq!(p.drops(DropReason::BufferFull), 2);
    // The FAR forwards again with DROBU: nothing of what was held leaves.
    s.downlink = Action::Forward;
    c.modify(slot, &s, false).unwrap();
    c.drop_buffered(slot);
    let out = settle(&mut c, &mut p, &mut pool);
    assert!(out.packets.is_empty(), "{}", p.runtime().report());
    assert_eq!(p.drops(DropReason::BufferDropped), 3);
    assert_eq!(c.usage(slot).dl_packets, 0);
    // New packets forward.
    let out = run_encap(&mut p, &mut pool, &pkts[..1]);
    assert_eq!(out.packets.len(), 1);
    assert_balanced(&p);
    assert_no_leak(&pool);
}

#[test]
fn without_drobu_the_held_packets_leave_and_the_bound_is_the_sessions() {
    let mut pool = pool();
    let (mut c, mut p, mut s, slot) = buffering_session(&mut pool);
    c.set_buffer_bound(slot, Some(1));
    settle(&mut c, &mut p, &mut pool);
    let pkts: Vec<Vec<u8>> = (0..3u8).map(|k| inner(ue4(1), false, &[k; 64])).collect();
    run_encap(&mut p, &mut pool, &pkts);
    assert_eq!(p.drops(DropReason::BufferFull), 2);
    s.downlink = Action::Forward;
    c.modify(slot, &s, false).unwrap();
    let out = settle(&mut c, &mut p, &mut pool);
    assert_eq!(out.packets.len(), 1);
    assert_eq!(p.drops(DropReason::BufferDropped), 0);
    // Back to the workers' bound (the BAR is gone): 4 held.
    s.downlink = Action::Buffer;
    c.modify(slot, &s, false).unwrap();
    c.set_buffer_bound(slot, None);
    settle(&mut c, &mut p, &mut pool);
    let more: Vec<Vec<u8>> = (0..5u8).map(|k| inner(ue4(1), false, &[k; 32])).collect();
    run_encap(&mut p, &mut pool, &more);
    assert_eq!(p.drops(DropReason::BufferFull), 3);
    // Deleted: what it held is dropped (no_session), not leaked.
    c.remove(slot).unwrap();
    settle(&mut c, &mut p, &mut pool);
    assert_eq!(p.drops(DropReason::NoSession), 4);
    assert_balanced(&p);
    assert_no_leak(&pool);
}
