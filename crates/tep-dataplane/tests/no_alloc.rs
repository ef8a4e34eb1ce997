//! "No allocation per packet": once a pipeline has run a vector (its
//! scratch vectors and GRO tables exist), encap and decap of further
//! vectors allocate nothing, for every kind and checksum mode, TSO
//! super-packets and GRO included. A counting allocator checks it.

mod common;
use common::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use tep_csum::Sum;
use tep_dataplane::config::{ChecksumMode, DataplaneConfig};
use tep_dataplane::ManualClock;
use tep_dataplane::PacketVector;
use tep_dataplane::TunnelKind;
use tep_dataplane::{ChecksumState, Gso, GsoKind, PacketId, Pool, SUPER_PACKET_ROOM};
use tep_dataplane::{Pipeline, PipelineOptions};

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

/// The system allocator, counting this thread's allocations while
/// `COUNTING` is on.
struct Counting;

// SAFETY: every call is forwarded to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note();
        // SAFETY: the caller's layout contract is passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note();
        // SAFETY: as in `alloc` and `dealloc`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

fn note() {
    // `try_with`: the thread-locals may be gone while a thread exits.
    if COUNTING.try_with(Cell::get).unwrap_or(false) {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Allocations made by `f` on this thread.
fn allocations_in(f: impl FnOnce()) -> u64 {
    ALLOCATIONS.with(|n| n.set(0));
    COUNTING.with(|c| c.set(true));
    f();
    COUNTING.with(|c| c.set(false));
    ALLOCATIONS.with(Cell::get)
}

/// What one round feeds the encap side: plain packets and, for L3 kinds, a
/// TSO super-packet with a partial checksum.
fn inputs(kind: TunnelKind) -> Vec<(Vec<u8>, ChecksumState, Option<Gso>)> {
    let l3 = !kind.carries_ethernet();
    let ip = |n: u16| match kind {
        TunnelKind::FouSit => udp6(&[n as u8; 300], 1000 + n),
        _ => tcp4(&[n as u8; 300], 1000 + n),
    };
    let mut v: Vec<_> = (0..16)
        .map(|n| {
            let p = if l3 { ip(n) } else { frame(&ip(n)) };
            (p, ChecksumState::None, None)
        })
        .collect();
    if l3 && kind != TunnelKind::FouSit {
        let payload: Vec<u8> = (0..8 * 1000).map(|i| (i * 7) as u8).collect();
        let (p, cs) = make_partial(&tcp4(&payload, 4242), 0);
        let gso = Gso {
            kind: GsoKind::Tcp4,
            segment_size: 1000,
        };
        v.push((p, cs, Some(gso)));
    }
    v
}

/// Finishes a checksum left for an offloading device, in place (what the
/// NIC would do before the packet reaches the peer).
fn complete_in_place(data: &mut [u8], cs: ChecksumState) {
    if let ChecksumState::Partial { start, offset } = cs {
        let (s, o) = (usize::from(start), usize::from(offset));
        let c = Sum::of(&data[s..]).udp_checksum();
        data[o..o + 2].copy_from_slice(&c.to_be_bytes());
    }
}

/// Two pipelines, A encapsulating and B decapsulating, with what their
/// rounds share.
struct Rig {
    a: Pipeline<ManualClock>,
    b: Pipeline<ManualClock>,
    pool: Pool,
    scratch: Vec<u8>,
    outer: PacketVector,
}

impl Rig {
    /// One round: the inputs through A's encap, every outer packet copied
    /// into a fresh buffer (as a receive would) and through B's decap.
    /// Returns the inner packets delivered.
    fn round(&mut self, packets: &[(Vec<u8>, ChecksumState, Option<Gso>)]) -> usize {
        let Rig {
            a,
            b,
            pool,
            scratch,
            outer,
        } = self;
        let mut v = PacketVector::new();
        for (p, cs, gso) in packets {
            let id = pool.alloc().expect("pool");
            assert!(pool.fill(id, p));
            let m = pool.meta_mut(id);
            m.csum = *cs;
            m.gso = *gso;
            v.push(id).expect("a vector");
        }
        outer.clear();
        a.encap(pool, &mut v, &mut |_, pool, out| {
            for &id in out.as_slice() {
                let n = pool.data(id).len();
                scratch[..n].copy_from_slice(pool.data(id));
                complete_in_place(&mut scratch[..n], pool.meta(id).csum);
                pool.free(id);
                let fresh: PacketId = pool.alloc().expect("pool");
                assert!(pool.fill(fresh, &scratch[..n]));
                outer.push(fresh).expect("a vector");
            }
            out.clear();
        });
        let mut delivered = 0;
        b.decap(pool, outer, 0, &mut |_, pool, out| {
            for &id in out.as_slice() {
                delivered += 1;
                pool.free(id);
            }
            out.clear();
        });
        delivered
    }
}

#[test]
fn encap_and_decap_allocate_nothing_per_packet() {
    // The counter counts.
    assert_eq!(
        allocations_in(|| drop(std::hint::black_box(vec![1u8; 10]))),
        1
    );
    let mut rig: Option<Rig> = None;
    let mut cases = 0;
    for kind in TunnelKind::ALL {
        for v6 in [false, true] {
            let mut modes = vec![
                ChecksumMode::Zero,
                ChecksumMode::Full,
                ChecksumMode::Lco,
                ChecksumMode::Offload,
            ];
            if matches!(kind, TunnelKind::Vxlan | TunnelKind::Gue) {
                modes.push(ChecksumMode::Remote);
            }
            for mode in modes {
                let (ca, cb) = pair(kind, v6, mode);
                let link = kind.link();
                let options = PipelineOptions {
                    inner_link: link,
                    gro: true,
                    ..PipelineOptions::default()
                };
                // The pool and scratch space carry over from case to case.
                let (pool, scratch) = match rig.take() {
                    Some(r) => (r.pool, r.scratch),
                    None => (
                        Pool::new(512, SUPER_PACKET_ROOM),
                        vec![0u8; SUPER_PACKET_ROOM],
                    ),
                };
                let r = rig.insert(Rig {
                    a: pipeline(&ca, link),
                    b: Pipeline::new(
                        &cb,
                        &DataplaneConfig::default(),
                        ManualClock::default(),
                        options,
                    ),
                    pool,
                    scratch,
                    outer: PacketVector::new(),
                });
                let packets = inputs(kind);
                let what = format!("{kind} {mode} v6={v6}");
                // The first round sets up what stays.
                let first = r.round(&packets);
                assert!(first > 0, "{what}: nothing delivered");
                let mut later = 0;
                let n = allocations_in(|| {
                    for _ in 0..3 {
                        later += r.round(&packets);
                    }
                });
                assert_eq!(n, 0, "{what}: {n} allocations in 3 rounds");
                assert_eq!(later, 3 * first, "{what}");
                assert_eq!(r.a.drops_total() + r.b.drops_total(), 0, "{what}");
                assert_no_leak(&r.pool);
                cases += 1;
            }
        }
    }
    // Every kind × 2 families × 4 modes, and remote for VXLAN and GUE.
    assert_eq!(cases, TunnelKind::ALL.len() * 2 * 4 + 2 * 2, "cases run");
}

/// One rule each way that takes every packet of `s`, with a usage counter
/// of its own, charging group 7's volume line; the downlink one's packets
/// marked DSCP 46.
fn counted_rules(
    s: &tep_dataplane::session::control::SessionSpec,
) -> tep_dataplane::session::control::SessionRules {
    use tep_dataplane::session::control::{RuleTag, SessionRules};
    use tep_dataplane::session::rules::RuleSpec;
    let rule = RuleSpec {
        filters: vec![],
        qfi_match: None,
        action: s.downlink,
        peer: s.peer,
        qfi: s.qfi,
        mbr: None,
    };
    let tag = |dscp| RuleTag {
        key: 1,
        counted: true,
        dscp,
        watch: [Some(7), None],
    };
    SessionRules {
        uplink: vec![rule.clone()],
        downlink: vec![rule],
        uplink_tags: vec![tag(None)],
        downlink_tags: vec![tag(Some(46))],
        dscp: None,
    }
}

/// A UPF's sessions: downlink packets to 100 UEs and uplink G-PDUs from
/// them, after a first round, allocate nothing either (the lookups, the
/// session's GTP-U header, the peer's outer template, usage counting, a
/// quarter's rules, per-rule counters and volume lines).
#[test]
fn upf_sessions_allocate_nothing_per_packet() {
    use common::upf::*;
    use tep_dataplane::example;
    for v6 in [false, true] {
        let (mut c, mut p) = upf(v6);
        let mut pool = Pool::new(1024, SUPER_PACKET_ROOM);
        let mut ruled = Vec::new();
        for i in 0..100 {
            let mut s = example::session(i, v6, i % 2 == 1);
            if i % 4 == 0 {
                // A quarter with rules each way, counted per rule (URRs
                // on some PDRs), the downlink one marking DSCP 46.
                s.rules = counted_rules(&s);
                let slot = c.create(&s).unwrap();
                let far = tep_dataplane::session::watch::VolumeLimits {
                    threshold: [Some(1 << 40), None, None],
                    ..Default::default()
                };
                assert!(c.arm_group(slot, 7, &far));
                ruled.push(slot);
            } else {
                c.create(&s).unwrap();
            }
        }
        settle(&mut c, &mut p, &mut pool);
        let ue = |i: u32| if i % 2 == 1 { ue6(i) } else { ue4(i) };
        let downs: Vec<Vec<u8>> = (0..100).map(|i| inner(ue(i), false, &[1; 300])).collect();
        let ups: Vec<Vec<u8>> = (0..100)
            .map(|i| gpdu(v6, 0x10000 + i, Some(9), &inner(ue(i), true, &[2; 300])))
            .collect();
        let round = |p: &mut Pipeline<ManualClock>, pool: &mut Pool| {
            let mut out = 0;
            let mut v = load(pool, &downs);
            p.encap(pool, &mut v, &mut |_, pool, o| {
                for &id in o.as_slice() {
                    out += 1;
                    pool.free(id);
                }
                o.clear();
            });
            let mut v = load(pool, &ups);
            p.decap(pool, &mut v, 0, &mut |_, pool, o| {
                for &id in o.as_slice() {
                    out += 1;
                    pool.free(id);
                }
                o.clear();
            });
            out
        };
        assert_eq!(round(&mut p, &mut pool), 200);
        // `load` builds a vector on the stack: nothing of the test's own
        // allocates in the rounds.
        let mut later = 0;
        let n = allocations_in(|| {
            for _ in 0..3 {
                later += round(&mut p, &mut pool);
            }
        });
        assert_eq!(n, 0, "v6={v6}: {n} allocations in 3 rounds");
        assert_eq!(later, 600);
        for &slot in &ruled {
            for uplink in [true, false] {
                let counter = c.rule_counter(slot, uplink, 1).unwrap();
                assert_eq!(c.rule_usage(counter).0, 4, "v6={v6}: rounds counted");
            }
        }
        assert_no_leak(&pool);
    }
}

/// N9 (a session's uplink to a peer UPF, its downlink from one): the
/// packets' way back from decapsulation to encapsulation allocates
/// nothing either.
#[test]
fn n9_allocates_nothing_per_packet() {
    use common::upf::*;
    use tep_dataplane::example;
    use tep_dataplane::session::rules::RuleSpec;
    use tep_dataplane::session::{Action, UplinkKey};
    let (mut c, mut p) = upf(false);
    let mut pool = Pool::new(1024, SUPER_PACKET_ROOM);
    let psa = core::net::IpAddr::V4(core::net::Ipv4Addr::new(203, 0, 113, 20));
    for i in 0..100 {
        let mut s = example::session(i, false, false);
        s.uplink_keys.push(UplinkKey::n9(0x30000 + i));
        s.rules.uplink = vec![RuleSpec {
            filters: vec![],
            qfi_match: None,
            action: Action::Forward,
            peer: Some((psa, 0x40000 + i)),
            qfi: None,
            mbr: None,
        }];
        c.create(&s).unwrap();
    }
    settle(&mut c, &mut p, &mut pool);
    let ups: Vec<Vec<u8>> = (0..100)
        .map(|i| gpdu(false, 0x10000 + i, Some(9), &inner(ue4(i), true, &[2; 300])))
        .collect();
    let from_psa: Vec<Vec<u8>> = (0..100)
        .map(|i| {
            let g = gtpu(0x30000 + i, None, &inner(ue4(i), false, &[3; 300]));
            udp_packet(psa, A4, 2152, 2152, &g)
        })
        .collect();
    let round = |p: &mut Pipeline<ManualClock>, pool: &mut Pool| {
        let mut out = 0;
        for input in [&ups, &from_psa] {
            let mut v = load(pool, input);
            p.decap(pool, &mut v, 0, &mut |o, pool, v| {
                assert_eq!(o, tep_dataplane::Output::Outer);
                for &id in v.as_slice() {
                    out += 1;
                    pool.free(id);
                }
                v.clear();
            });
        }
        out
    };
    assert_eq!(round(&mut p, &mut pool), 200);
    let mut later = 0;
    let n = allocations_in(|| {
        for _ in 0..3 {
            later += round(&mut p, &mut pool);
        }
    });
    assert_eq!(n, 0, "{n} allocations in 3 rounds");
    assert_eq!(later, 600);
    assert_no_leak(&pool);
}
