//! The control plane's side of the session tables: slots and peer ids
//! allocated, keys owned, changes published to every worker, usage summed
//! over the workers. The PFCP node drives it; the workers only apply.

use super::counters::{CounterIds, RuleUsage, NO_COUNTER};
use super::rate::Bucket;
use super::rules::{Classifier, RuleError, RuleSet, RuleSpec, Treatment, MAX_RULES};
use super::watch::{UrrWatches, VolumeLimits, Watches, NO_LINE, RULE_LINES};
use super::{
    Action, Change, ChangeQueue, Peer, Session, SharedRules, SlotUsage, UeKey, UeSource, UplinkKey,
    Usage, WorkerLink,
};
use core::net::IpAddr;
use core::sync::atomic::Ordering;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// A session as the control plane states it: its rules, and the keys that
/// find it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionSpec {
    /// The N3 tunnel (index of the tunnel table) of its F-TEID.
    pub n3: u32,
    /// Uplink action.
    pub uplink: Action,
    /// Downlink action.
    pub downlink: Action,
    /// Downlink outer header creation: the peer's address and TEID (None
    /// until the SMF gives them, as before the gNB answered).
    pub peer: Option<(IpAddr, u32)>,
    /// Downlink QFI (PDU Session Container), from the QER.
    pub qfi: Option<u8>,
    /// The uplink PDRs' keys.
    pub uplink_keys: Vec<UplinkKey>,
    /// The downlink PDRs' keys, in `network`.
    pub downlink_keys: Vec<UeKey>,
    /// Its data network (below [`super::MAX_NETWORKS`]): where its
    /// downlink keys are looked up and its uplink packets leave.
    pub network: u8,
    /// The inner sources its uplink packets may carry.
    pub ue: UeSource,
    /// Maximum bit rate each way (bit/s; None: none), from its QERs:
    /// a bucket per direction ([`super::rate`]); with rules, the one all
    /// of them are under (a session AMBR), in addition to each rule's.
    pub mbr: Mbr,
    /// Several rules a direction ([`super::rules`]), in precedence order;
    /// empty: the direction's one treatment is the fields above.
    pub rules: SessionRules,
}

/// A session's rules for the directions that have several treatments or
/// packet filters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SessionRules {
    /// Uplink (a `peer` is a UPF on N9, their `qfi` its container's).
    pub uplink: Vec<RuleSpec>,
    /// Downlink (their `qfi_match` unused).
    pub downlink: Vec<RuleSpec>,
    /// Beside each uplink rule, by position (missing: keyed by its
    /// position, no counter, no mark).
    pub uplink_tags: Vec<RuleTag>,
    /// Beside each downlink rule.
    pub downlink_tags: Vec<RuleTag>,
    /// The outer DSCP of the downlink's one treatment (to `peer`; None:
    /// the N3 tunnel's), where the direction has no rules (a rule's is in
    /// its tag). Kept in the record, which drops the rules.
    pub dscp: Option<u8>,
}

/// What a rule carries beside its match and treatment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RuleTag {
    /// Names its usage counter ([`super::counters`]; the PDR ID): a rule
    /// keeps its counts over a modification that keeps its key, so that
    /// nothing counted between the modification and the workers applying
    /// it is lost. Unique within a direction.
    pub key: u32,
    /// Whether it has a usage counter at all: only where the direction's
    /// PDRs are under different URRs is it needed (otherwise the
    /// session's counts that way are theirs), and a counter costs its
    /// packets a write to one more line. A rule without a tag has none.
    pub counted: bool,
    /// The outer DSCP of its packets to its peer, a gNB or (uplink) a
    /// UPF on N9 (its FAR's Transport Level Marking; None: the N3
    /// tunnel's).
    pub dscp: Option<u8>,
    /// The groups whose volume line it charges ([`super::watch::UrrWatches`];
    /// a group is the caller's name for a URR with volume limits, unique
    /// within the session): every rule with the same group charges one
    /// line, armed by [`Sessions::arm_group`]. Only a `counted` rule's.
    pub watch: [Option<u32>; RULE_LINES],
}

/// A session's maximum bit rates, bit/s.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mbr {
    /// Uplink.
    pub uplink: Option<u64>,
    /// Downlink.
    pub downlink: Option<u64>,
}

/// Packets and bytes each way, summed over the workers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Volume {
    /// Uplink packets.
    pub ul_packets: u64,
    /// Uplink bytes.
    pub ul_bytes: u64,
    /// Downlink packets.
    pub dl_packets: u64,
    /// Downlink bytes.
    pub dl_bytes: u64,
}

/// Why a session could not be set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SessionError {
    /// Every slot is in use (`max_sessions`).
    Full,
    /// A key is another session's already.
    KeyInUse(String),
    /// No such slot.
    NoSession,
    /// The peer's address family is not the N3 tunnel's.
    PeerFamily,
    /// Rules the classifier cannot hold (the uplink's if `uplink`).
    Rules {
        /// Which direction's.
        uplink: bool,
        /// What, and the rule at fault.
        error: RuleError,
    },
}

impl core::fmt::Display for SessionError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SessionError::Full => f.write_str("the session table is full"),
            SessionError::KeyInUse(k) => write!(f, "{k} belongs to another session"),
            SessionError::NoSession => f.write_str("no such session"),
            SessionError::PeerFamily => {
                f.write_str("the peer's address family differs from the N3 address's")
            }
            SessionError::Rules { uplink, error } => {
                let dir = if *uplink { "uplink" } else { "downlink" };
                write!(f, "{dir} rules: {error:?}")
            }
        }
    }
}

/// What the control plane keeps per slot.
#[derive(Clone, Debug)]
struct Record {
    // Without its rules (`SessionSpec::rules`), which `rules` and
    // `session` hold compiled: a million sessions' rule lists are more
    // than the tables.
    spec: SessionSpec,
    peer: Option<u32>,
    rules: Built,
    session: Session,
}

/// A session's rules as published: the set, the peer ids its downlink
/// rules hold, the buckets of their QERs ((key, uplink, bit/s)).
#[derive(Clone, Debug, Default)]
struct Built {
    set: Option<RuleSet>,
    peers: Vec<u32>,
    buckets: Vec<(u32, bool, u64, Arc<Bucket>)>,
    // The rules' usage counters: (uplink, key, index).
    counters: Vec<(bool, u32, u32)>,
    // The groups' volume lines: (group, line; NO_LINE where none was
    // left, so that none of the group's rules charges one).
    lines: Vec<(u32, u32)>,
}

/// A group's volume line crossed a threshold or quota
/// ([`Sessions::crossed_groups`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupCrossed {
    /// The session's slot.
    pub slot: u32,
    /// The group ([`RuleTag::watch`]).
    pub group: u32,
    /// The bytes charged each way (uplink, downlink) after the packet
    /// that crossed a threshold.
    pub since: (u64, u64),
    /// Whether a quota of the line is used up.
    pub quota_spent: bool,
}

/// Both directions' rules compiled, before anything is changed.
struct Compiled {
    uplink: Option<Classifier>,
    downlink: Option<Classifier>,
}

/// The control plane's handle on every worker's session table.
#[derive(Debug)]
pub struct Sessions {
    max: u32,
    links: Vec<WorkerLink>,
    records: Vec<Option<Record>>,
    free: Vec<u32>,
    // Slots removed, with the change count after their removal: reusable
    // once every worker applied that many changes.
    quarantine: Vec<(u32, u64)>,
    published: u64,
    outbox: Vec<Change>,
    uplink_owner: HashMap<UplinkKey, u32>,
    downlink_owner: HashMap<(u8, UeKey), u32>,
    peers: HashMap<Peer, (u32, u32)>,
    peer_by_id: Vec<Option<Peer>>,
    free_peers: Vec<u32>,
    next_peer: u32,
    n3_families: Vec<bool>,
    gnb_source: bool,
    // Sessions bounded by their BAR (packets held), by slot: what a
    // replay publishes again.
    buffer_bounds: HashMap<u32, u32>,
    // Classifiers shared by every session with the same rules (filters
    // written with `any`/`assigned` are the same for every UE); swept of
    // those no session holds when the set doubles.
    classifiers: HashSet<Arc<Classifier>>,
    classifiers_swept: usize,
    counters: CounterIds,
    // Volume lines of groups ([`RuleTag::watch`]), and each one's (slot,
    // group).
    lines: CounterIds,
    // URR groups left without a line (the table full): only scanned.
    lines_refused: u64,
    line_owner: Vec<Option<(u32, u32)>>,
}

/// Volume lines per session on average: the groups' table has room for
/// that many (a group left without one is only scanned).
pub const LINES_PER_SESSION: u32 = 4;

impl Sessions {
    /// Tables for `workers` workers with room for `max_sessions`; the
    /// links go one to each worker's pipeline. `n3_v6[t]`: whether tunnel
    /// `t`'s local address is IPv6 (to refuse a peer of the other family).
    pub fn new(max_sessions: u32, workers: usize, n3_v6: Vec<bool>) -> (Sessions, Vec<WorkerLink>) {
        // The first worker's usage block holds the buckets ([`Usage::meters`]).
        let meters = Arc::new(Usage::new(max_sessions, true));
        let watches = Arc::new(Watches::new(max_sessions));
        // Every session with the most rules both ways.
        let max_counters = max_sessions.saturating_mul(2 * MAX_RULES as u32);
        let max_lines = max_sessions.saturating_mul(LINES_PER_SESSION);
        let urr_watches = Arc::new(UrrWatches::new(max_lines, max_counters));
        let links: Vec<WorkerLink> = (0..workers.max(1))
            .map(|w| WorkerLink {
                queue: Arc::new(ChangeQueue::default()),
                usage: if w == 0 {
                    meters.clone()
                } else {
                    Arc::new(Usage::new(max_sessions, false))
                },
                meters: meters.clone(),
                rule_usage: Arc::new(RuleUsage::new(max_counters)),
                watches: watches.clone(),
                urr_watches: urr_watches.clone(),
                lone: workers <= 1,
            })
            .collect();
        (
            Sessions {
                max: max_sessions,
                links: links.clone(),
                records: Vec::new(),
                free: Vec::new(),
                quarantine: Vec::new(),
                published: 0,
                outbox: Vec::new(),
                uplink_owner: HashMap::new(),
                downlink_owner: HashMap::new(),
                peers: HashMap::new(),
                peer_by_id: Vec::new(),
                free_peers: Vec::new(),
                next_peer: 0,
                n3_families: n3_v6,
                gnb_source: false,
                buffer_bounds: HashMap::new(),
                classifiers: HashSet::new(),
                classifiers_swept: 0,
                counters: CounterIds::new(max_counters),
                lines: CounterIds::new(max_lines),
                lines_refused: 0,
                line_owner: Vec::new(),
            },
            links,
        )
    }

    /// Takes uplink packets of the sessions set from now on only from
    /// their gNB, the peer of their downlink FAR (`[pfcp]
    /// n3_source_check`; the uplink module's `gnb_source` says which gNB
    /// that is when there is none or it changes).
    pub fn check_gnb_source(&mut self, on: bool) {
        self.gnb_source = on;
    }

    /// Sessions set.
    pub fn len(&self) -> usize {
        self.records.iter().filter(|r| r.is_some()).count()
    }

    /// Whether none is set.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Sets a new session; its slot.
    pub fn create(&mut self, spec: &SessionSpec) -> Result<u32, SessionError> {
        self.check_keys(spec, None)?;
        self.check_peer(spec)?;
        let compiled = compile(spec)?;
        self.check_counters(spec)?;
        let slot = self.take_slot()?;
        for l in &self.links {
            l.usage.reserve(slot);
            if let Some(u) = l.usage.slot(slot) {
                u.reset();
            }
        }
        let idx = slot as usize;
        if self.records.len() <= idx {
            self.records.resize(idx + 1, None);
        }
        self.set_meters(slot, spec.mbr, None);
        let dscp = spec.rules.dscp;
        let peer = spec
            .peer
            .map(|(addr, _)| self.peer_ref(spec.n3, addr, dscp));
        for &key in &spec.uplink_keys {
            self.uplink_owner.insert(key, slot);
            self.outbox.push(Change::Uplink {
                key,
                slot: Some(slot),
            });
        }
        for &key in &spec.downlink_keys {
            self.downlink_owner.insert((spec.network, key), slot);
            self.outbox.push(Change::Downlink {
                network: spec.network,
                key,
                slot: Some(slot),
            });
        }
        let rules = self.build(slot, spec, compiled, None);
        // A slot reused: its last session's limits go.
        self.links[0].watches.arm(slot, &VolumeLimits::default());
        let session = session_of(spec, peer, self.gnb_source);
        self.outbox.push(Change::Session { slot, session });
        self.records[idx] = Some(Record {
            spec: without_rules(spec),
            peer,
            rules,
            session,
        });
        Ok(slot)
    }

    /// Replaces slot `slot`'s session. `end_marker`: when the downlink peer
    /// or TEID changes, send an End Marker to the old one (SNDEM).
    pub fn modify(
        &mut self,
        slot: u32,
        spec: &SessionSpec,
        end_marker: bool,
    ) -> Result<(), SessionError> {
        let old = self
            .records
            .get(slot as usize)
            .cloned()
            .flatten()
            .ok_or(SessionError::NoSession)?;
        self.check_keys(spec, Some(slot))?;
        self.check_peer(spec)?;
        let compiled = compile(spec)?;
        self.check_counters(spec)?;
        self.set_meters(slot, spec.mbr, Some(old.spec.mbr));
        for key in &old.spec.uplink_keys {
            if !spec.uplink_keys.contains(key) {
                self.uplink_owner.remove(key);
                self.outbox.push(Change::Uplink {
                    key: *key,
                    slot: None,
                });
            }
        }
        for key in &old.spec.downlink_keys {
            if old.spec.network != spec.network || !spec.downlink_keys.contains(key) {
                self.downlink_owner.remove(&(old.spec.network, *key));
                self.outbox.push(Change::Downlink {
                    network: old.spec.network,
                    key: *key,
                    slot: None,
                });
            }
        }
        for &key in &spec.uplink_keys {
            if self.uplink_owner.insert(key, slot).is_none() {
                self.outbox.push(Change::Uplink {
                    key,
                    slot: Some(slot),
                });
            }
        }
        for &key in &spec.downlink_keys {
            if self
                .downlink_owner
                .insert((spec.network, key), slot)
                .is_none()
            {
                self.outbox.push(Change::Downlink {
                    network: spec.network,
                    key,
                    slot: Some(slot),
                });
            }
        }
        let same_peer = |s: &SessionSpec| (s.peer.map(|p| p.0), s.n3, s.rules.dscp);
        let peer = if same_peer(spec) == same_peer(&old.spec) {
            old.peer
        } else {
            let dscp = spec.rules.dscp;
            let new = spec
                .peer
                .map(|(addr, _)| self.peer_ref(spec.n3, addr, dscp));
            if let Some(p) = old.peer {
                self.peer_unref(p);
            }
            new
        };
        if end_marker && spec.peer != old.spec.peer {
            if let Some((addr, teid)) = old.spec.peer {
                self.outbox.push(Change::EndMarker {
                    n3: old.spec.n3,
                    peer: addr,
                    teid,
                });
            }
        }
        let rules = self.build(slot, spec, compiled, Some(&old.rules));
        for &p in &old.rules.peers {
            self.peer_unref(p);
        }
        let kept: Vec<u32> = rules.counters.iter().map(|c| c.2).collect();
        let gone = old.rules.counters.iter().filter(|c| !kept.contains(&c.2));
        let after = self.published + self.outbox.len() as u64 + 1;
        for c in gone {
            self.counters.release(c.2, after);
        }
        for &(_, line) in &old.rules.lines {
            if !rules.lines.iter().any(|l| l.1 == line) {
                self.release_line(line, after);
            }
        }
        let session = Session {
            watch: old.session.watch,
            ..session_of(spec, peer, self.gnb_source)
        };
        self.outbox.push(Change::Session { slot, session });
        self.records[slot as usize] = Some(Record {
            spec: without_rules(spec),
            peer,
            rules,
            session,
        });
        Ok(())
    }

    /// Removes slot `slot`'s session; returns its usage up to now (what the
    /// workers counted before they apply the removal is all there is: the
    /// caller reads it after the packets in flight, as a deletion's final
    /// usage report does).
    pub fn remove(&mut self, slot: u32) -> Result<Volume, SessionError> {
        let old = self
            .records
            .get_mut(slot as usize)
            .and_then(Option::take)
            .ok_or(SessionError::NoSession)?;
        let usage = self.usage(slot);
        for key in &old.spec.uplink_keys {
            self.uplink_owner.remove(key);
            self.outbox.push(Change::Uplink {
                key: *key,
                slot: None,
            });
        }
        for key in &old.spec.downlink_keys {
            self.downlink_owner.remove(&(old.spec.network, *key));
            self.outbox.push(Change::Downlink {
                network: old.spec.network,
                key: *key,
                slot: None,
            });
        }
        if let Some(p) = old.peer {
            self.peer_unref(p);
        }
        // The workers forget the bound with the session.
        self.buffer_bounds.remove(&slot);
        for &p in &old.rules.peers {
            self.peer_unref(p);
        }
        self.outbox.push(Change::Remove { slot });
        let after = self.published + self.outbox.len() as u64;
        self.quarantine.push((slot, after));
        for c in &old.rules.counters {
            self.counters.release(c.2, after);
        }
        for &(_, line) in &old.rules.lines {
            self.release_line(line, after);
        }
        Ok(usage)
    }

    /// Asks the workers for an End Marker from N3 tunnel `n3` to `peer`
    /// with its `teid` (a handover the SMF flagged SNDEM), after the
    /// changes made before it.
    pub fn end_marker(&mut self, n3: u32, peer: IpAddr, teid: u32) {
        self.outbox.push(Change::EndMarker { n3, peer, teid });
    }

    /// Bounds the downlink packets slot `slot` holds to `packets` (its
    /// BAR's Suggested Buffering Packets Count; None: the workers' own
    /// bound, `[pfcp] buffer_packets`, which also caps `packets`).
    /// Published only when it changes.
    pub fn set_buffer_bound(&mut self, slot: u32, packets: Option<u32>) {
        let was = match packets {
            Some(n) => self.buffer_bounds.insert(slot, n),
            None => self.buffer_bounds.remove(&slot),
        };
        if was != packets {
            self.outbox.push(Change::BufferBound { slot, packets });
        }
    }

    /// Has the workers drop what slot `slot` holds (DROBU), before the
    /// changes published with it would send it.
    pub fn drop_buffered(&mut self, slot: u32) {
        self.outbox.push(Change::DropBuffered { slot });
    }

    /// Slot `slot`'s usage so far, summed over the workers.
    pub fn usage(&self, slot: u32) -> Volume {
        let mut v = Volume::default();
        for l in &self.links {
            if let Some(u) = l.usage.slot(slot) {
                let r = |c: &core::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
                let SlotUsage {
                    ul_packets,
                    ul_bytes,
                    dl_packets,
                    dl_bytes,
                    ..
                } = u;
                v.ul_packets += r(ul_packets);
                v.ul_bytes += r(ul_bytes);
                v.dl_packets += r(dl_packets);
                v.dl_bytes += r(dl_bytes);
            }
        }
        v
    }

    /// The usage counter of slot `slot`'s rule `key` one way (`uplink`):
    /// None where its direction has no rules or none with that key.
    pub fn rule_counter(&self, slot: u32, uplink: bool, key: u32) -> Option<u32> {
        let r = self.records.get(slot as usize)?.as_ref()?;
        let c = r
            .rules
            .counters
            .iter()
            .find(|c| (c.0, c.1) == (uplink, key));
        c.map(|c| c.2)
    }

    /// Rule counter `counter` so far, summed over the workers: (packets,
    /// bytes).
    pub fn rule_usage(&self, counter: u32) -> (u64, u64) {
        self.links.iter().fold((0, 0), |(p, b), l| {
            let (lp, lb) = l.rule_usage.read(counter);
            (p + lp, b + lb)
        })
    }

    /// The spec slot `slot` was last set with, less its rules.
    pub fn spec(&self, slot: u32) -> Option<&SessionSpec> {
        self.records.get(slot as usize)?.as_ref().map(|r| &r.spec)
    }

    /// Sends the changes made since the last call to every worker.
    pub fn publish(&mut self) {
        if self.outbox.is_empty() {
            return;
        }
        for l in &self.links {
            l.queue.push(&self.outbox);
        }
        self.published += self.outbox.len() as u64;
        self.outbox.clear();
    }

    /// Publishes every session and peer set now, as changes to tables that
    /// hold nothing: what a worker started afresh (a reload restarts them
    /// with new pipelines) needs to catch up. Changes still queued for the
    /// stopped worker come first and are overwritten by these.
    pub fn replay(&mut self) {
        self.publish();
        for (id, peer) in self.peer_by_id.iter().enumerate() {
            if let Some(p) = peer {
                self.outbox.push(Change::Peer {
                    id: id as u32,
                    peer: Some(*p),
                });
            }
        }
        for (&key, &slot) in &self.uplink_owner {
            self.outbox.push(Change::Uplink {
                key,
                slot: Some(slot),
            });
        }
        for (&(network, key), &slot) in &self.downlink_owner {
            self.outbox.push(Change::Downlink {
                network,
                key,
                slot: Some(slot),
            });
        }
        for (slot, r) in self.records.iter().enumerate() {
            if let Some(r) = r {
                if let Some(set) = &r.rules.set {
                    self.outbox.push(Change::Rules {
                        slot: slot as u32,
                        rules: Some(SharedRules(Arc::new(set.clone()))),
                    });
                }
                self.outbox.push(Change::Session {
                    slot: slot as u32,
                    session: Session {
                        gnb_source: self.gnb_source,
                        ..r.session
                    },
                });
            }
        }
        for (&slot, &n) in &self.buffer_bounds {
            self.outbox.push(Change::BufferBound {
                slot,
                packets: Some(n),
            });
        }
        self.publish();
    }

    /// (Re)arms slot `slot`'s volume limits ([`super::watch`]) with what
    /// is left now; empty limits disarm them. The slot's packets are
    /// charged from the change this queues on (when watched-ness changes).
    pub fn arm_volume(&mut self, slot: u32, limits: &VolumeLimits) -> Result<(), SessionError> {
        self.arm_volume_with(slot, |_| *limits)
    }

    /// As [`Sessions::arm_volume`], with what `limits` computes from the
    /// counters it reads, read together with the line
    /// ([`Watches::arm_with`]).
    pub fn arm_volume_with(
        &mut self,
        slot: u32,
        mut limits: impl FnMut(&Sessions) -> VolumeLimits,
    ) -> Result<(), SessionError> {
        if self
            .records
            .get(slot as usize)
            .and_then(Option::as_ref)
            .is_none()
        {
            return Err(SessionError::NoSession);
        }
        let on = self.links[0].watches.arm_with(slot, || limits(self));
        let Some(r) = self.records.get_mut(slot as usize).and_then(Option::as_mut) else {
            return Err(SessionError::NoSession);
        };
        if r.session.watch != on {
            r.session.watch = on;
            let session = r.session;
            self.outbox.push(Change::Session { slot, session });
        }
        Ok(())
    }

    /// The sessions' volume limits (the crossings queued, the quotas
    /// spent).
    pub fn watches(&self) -> &Watches {
        &self.links[0].watches
    }

    /// Changes published so far.
    pub fn published(&self) -> u64 {
        self.published
    }

    /// Whether every worker applied every change published.
    pub fn settled(&self) -> bool {
        self.links
            .iter()
            .all(|l| l.queue.applied() >= self.published)
    }

    /// Sets slot `slot`'s buckets to `mbr` before a change turns them on:
    /// full when new, left as they are where the rate stays (a
    /// modification that keeps the MBR must not hand out a burst).
    fn set_meters(&self, slot: u32, mbr: Mbr, old: Option<Mbr>) {
        if mbr.uplink.is_none() && mbr.downlink.is_none() {
            return;
        }
        let Some(m) = self.links.first().and_then(|l| {
            l.meters.reserve(slot);
            l.meters.meters(slot)
        }) else {
            return;
        };
        let old = old.unwrap_or_default();
        for (rate, was, bucket) in [
            (mbr.uplink, old.uplink, &m.uplink),
            (mbr.downlink, old.downlink, &m.downlink),
        ] {
            if let Some(bps) = rate.filter(|_| rate != was) {
                bucket.set(bps);
            }
        }
    }

    /// Whether there are counters for every rule of `spec` (there are,
    /// unless removed sessions' wait for slow workers).
    fn check_counters(&mut self, spec: &SessionSpec) -> Result<(), SessionError> {
        let n = spec.rules.uplink.len() + spec.rules.downlink.len();
        let applied = self.applied();
        if n == 0 || self.counters.room(n, applied) {
            Ok(())
        } else {
            Err(SessionError::Full)
        }
    }

    /// The changes the slowest worker applied.
    fn applied(&self) -> u64 {
        self.links
            .iter()
            .map(|l| l.queue.applied())
            .min()
            .unwrap_or(0)
    }

    fn check_keys(&self, spec: &SessionSpec, me: Option<u32>) -> Result<(), SessionError> {
        for k in &spec.uplink_keys {
            if let Some(&o) = self.uplink_owner.get(k) {
                if Some(o) != me {
                    return Err(SessionError::KeyInUse(format!("TEID {:#x}", k.teid)));
                }
            }
        }
        if usize::from(spec.network) >= super::MAX_NETWORKS || spec.n3 >= super::MAX_N3_INDEX {
            return Err(SessionError::Full);
        }
        for k in &spec.downlink_keys {
            if let Some(&o) = self.downlink_owner.get(&(spec.network, *k)) {
                if Some(o) != me {
                    return Err(SessionError::KeyInUse(format!(
                        "UE address {k:?} in network {}",
                        spec.network
                    )));
                }
            }
        }
        Ok(())
    }

    fn check_peer(&self, spec: &SessionSpec) -> Result<(), SessionError> {
        let Some(&v6) = self.n3_families.get(spec.n3 as usize) else {
            return Ok(());
        };
        let rules = spec.rules.downlink.iter().chain(&spec.rules.uplink);
        let peers = rules.filter_map(|r| r.peer);
        match spec
            .peer
            .into_iter()
            .chain(peers)
            .find(|(a, _)| a.is_ipv6() != v6)
        {
            Some(_) => Err(SessionError::PeerFamily),
            None => Ok(()),
        }
    }

    /// Publishes slot `slot`'s rules (before its session, which flags
    /// them): classifiers shared, the downlink rules' peers referenced,
    /// their QERs' buckets kept from `old` where the rate stays.
    fn build(
        &mut self,
        slot: u32,
        spec: &SessionSpec,
        compiled: Compiled,
        old: Option<&Built>,
    ) -> Built {
        let mut built = Built::default();
        if compiled.uplink.is_none() && compiled.downlink.is_none() {
            if old.is_some_and(|o| o.set.is_some()) {
                self.outbox.push(Change::Rules { slot, rules: None });
            }
            return built;
        }
        let mut treatments = |rules: &[RuleSpec], uplink: bool, me: &mut Sessions| {
            let tags = if uplink {
                &spec.rules.uplink_tags
            } else {
                &spec.rules.downlink_tags
            };
            let list: Vec<Treatment> = rules
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    let tag = tags.get(i).copied().unwrap_or(RuleTag {
                        key: i as u32,
                        ..Default::default()
                    });
                    let counter = match tag.counted {
                        true => me.counter(&mut built, old, uplink, tag.key),
                        false => NO_COUNTER,
                    };
                    let watched = counter != NO_COUNTER
                        && me.rule_lines(&mut built, old, (slot, counter), tag.watch);
                    // Uplink: a UPF on N9 (none: to N6).
                    let peer = r.peer.map(|(addr, _)| me.peer_ref(spec.n3, addr, tag.dscp));
                    built.peers.extend(peer);
                    let bucket = r
                        .mbr
                        .map(|(key, bps)| bucket(&mut built, old, key, uplink, bps));
                    Treatment {
                        action: match (r.action, peer) {
                            (Action::Forward, None) if !uplink => Action::Drop,
                            (a, _) => a,
                        },
                        peer: peer.unwrap_or(u32::MAX),
                        teid: r.peer.map_or(0, |p| p.1),
                        qfi: r.qfi,
                        bucket,
                        counter,
                        watched,
                    }
                })
                .collect();
            list
        };
        let ul = treatments(&spec.rules.uplink, true, self);
        let dl = treatments(&spec.rules.downlink, false, self);
        let set = RuleSet {
            uplink: compiled.uplink.map(|c| self.shared(c)),
            downlink: compiled.downlink.map(|c| self.shared(c)),
            ul: ul.into(),
            dl: dl.into(),
        };
        self.outbox.push(Change::Rules {
            slot,
            rules: Some(SharedRules(Arc::new(set.clone()))),
        });
        built.set = Some(set);
        built
    }

    /// The usage counter of the rule `key` one way: `old`'s where it had
    /// one (its counts go on), else a new one, zeroed.
    fn counter(&mut self, built: &mut Built, old: Option<&Built>, uplink: bool, key: u32) -> u32 {
        let same = |c: &&(bool, u32, u32)| (c.0, c.1) == (uplink, key);
        let reused = old.and_then(|o| o.counters.iter().find(same));
        let id = match reused {
            Some(&(_, _, id)) if !built.counters.iter().any(|c| c.2 == id) => id,
            _ => {
                let id = self.counters.take();
                for l in &self.links {
                    l.rule_usage.reset(id);
                }
                id
            }
        };
        built.counters.push((uplink, key, id));
        id
    }

    /// Has the rule of slot `slot` with usage counter `counter` charge
    /// the lines of `groups` (`old`'s where it had them); whether it
    /// charges any.
    fn rule_lines(
        &mut self,
        built: &mut Built,
        old: Option<&Built>,
        (slot, counter): (u32, u32),
        groups: [Option<u32>; RULE_LINES],
    ) -> bool {
        let lines = groups.map(|g| g.map_or(NO_LINE, |g| self.line(built, old, slot, g)));
        let w = &self.links[0].urr_watches;
        w.set_rule(counter, lines);
        lines != [NO_LINE; RULE_LINES]
    }

    /// Group `group`'s line in slot `slot`: the one it has in `built`,
    /// else `old`'s, else a new one, disarmed ([`NO_LINE`] when none is
    /// left: then none of its rules charges one).
    fn line(&mut self, built: &mut Built, old: Option<&Built>, slot: u32, group: u32) -> u32 {
        if let Some(&(_, l)) = built.lines.iter().find(|l| l.0 == group) {
            return l;
        }
        let kept = old.and_then(|o| o.lines.iter().find(|l| l.0 == group && l.1 != NO_LINE));
        let line = match kept {
            Some(&(_, l)) => l,
            None => {
                let applied = self.applied();
                let l = match self.lines.room(1, applied) {
                    true => self.lines.take(),
                    false => {
                        self.lines_refused += 1;
                        NO_LINE
                    }
                };
                if l != NO_LINE {
                    let w = &self.links[0].urr_watches.lines;
                    w.arm(l, &VolumeLimits::default());
                    let i = l as usize;
                    if self.line_owner.len() <= i {
                        self.line_owner.resize(i + 1, None);
                    }
                    self.line_owner[i] = Some((slot, group));
                }
                l
            }
        };
        built.lines.push((group, line));
        line
    }

    /// Line `line` is out of use once the workers applied `after`
    /// changes: disarmed now (a worker still charging it passes its
    /// packets), its crossings no longer anyone's.
    fn release_line(&mut self, line: u32, after: u64) {
        if line == NO_LINE {
            return;
        }
        let w = &self.links[0].urr_watches.lines;
        w.arm(line, &VolumeLimits::default());
        if let Some(o) = self.line_owner.get_mut(line as usize) {
            *o = None;
        }
        self.lines.release(line, after);
    }

    /// (Re)arms the line of slot `slot`'s group `group` with what is left
    /// now (a store, as [`Sessions::arm_volume`]); whether the group has
    /// a line (without one its URR is left to the caller's scans).
    pub fn arm_group(&mut self, slot: u32, group: u32, limits: &VolumeLimits) -> bool {
        self.arm_group_with(slot, group, |_| *limits)
    }

    /// As [`Sessions::arm_group`], with what `limits` computes from the
    /// counters it reads, read together with the line
    /// ([`Watches::arm_with`]).
    pub fn arm_group_with(
        &mut self,
        slot: u32,
        group: u32,
        mut limits: impl FnMut(&Sessions) -> VolumeLimits,
    ) -> bool {
        let Some(line) = self.group_line(slot, group) else {
            return false;
        };
        self.links[0]
            .urr_watches
            .lines
            .arm_with(line, || limits(self));
        true
    }

    /// The line of slot `slot`'s group `group`, if it was given one.
    fn group_line(&self, slot: u32, group: u32) -> Option<u32> {
        let r = self.records.get(slot as usize).and_then(Option::as_ref)?;
        let &(_, line) = r.rules.lines.iter().find(|l| l.0 == group)?;
        (line != NO_LINE).then_some(line)
    }

    /// What `read` (a reading of the counters) returns, and the bytes
    /// charged each way (uplink, downlink) to the line of slot `slot`'s
    /// group `group` after the packet that last crossed its threshold, at
    /// the same moment ([`Watches::settled`]; (0, 0): no line, or no
    /// crossing since it was armed).
    pub fn group_settled<R>(
        &self,
        slot: u32,
        group: u32,
        mut read: impl FnMut() -> R,
    ) -> (R, (u64, u64)) {
        match self.group_line(slot, group) {
            Some(l) => self.links[0].urr_watches.lines.settled(l, read),
            None => (read(), (0, 0)),
        }
    }

    /// URR groups given no volume line because the table was full: their
    /// thresholds and quotas are left to the scans.
    pub fn lines_refused(&self) -> u64 {
        self.lines_refused
    }

    /// The groups' lines that crossed since the last call, into `out`;
    /// `lines`: scratch.
    pub fn crossed_groups(&self, lines: &mut Vec<u32>, out: &mut Vec<GroupCrossed>) {
        let w = &self.links[0].urr_watches.lines;
        w.take_crossed(lines);
        for line in lines.drain(..) {
            if let Some(&Some((slot, group))) = self.line_owner.get(line as usize) {
                out.push(GroupCrossed {
                    slot,
                    group,
                    since: w.since_crossing(line),
                    quota_spent: w.quota_spent(line),
                });
            }
        }
    }

    /// Has the workers call `wake` when a session's or a group's packets
    /// reach a volume threshold or quota (once per crossing).
    pub fn wake_on_volume(&self, wake: Box<dyn Fn() + Send + Sync>) {
        let wake: Arc<dyn Fn() + Send + Sync> = wake.into();
        let again = wake.clone();
        self.watches().set_notify(Box::new(move || wake()));
        let w = &self.links[0].urr_watches.lines;
        w.set_notify(Box::new(move || again()));
    }

    /// The classifier equal to `c` that sessions share, `c` if none.
    fn shared(&mut self, c: Classifier) -> Arc<Classifier> {
        if let Some(a) = self.classifiers.get(&c) {
            return a.clone();
        }
        if self.classifiers.len() >= 2 * self.classifiers_swept.max(64) {
            self.classifiers.retain(|a| Arc::strong_count(a) > 1);
            self.classifiers_swept = self.classifiers.len();
        }
        let a = Arc::new(c);
        self.classifiers.insert(a.clone());
        a
    }

    fn take_slot(&mut self) -> Result<u32, SessionError> {
        let applied = self.applied();
        let mut i = 0;
        while i < self.quarantine.len() {
            if self.quarantine[i].1 <= applied {
                let (slot, _) = self.quarantine.swap_remove(i);
                self.free.push(slot);
            } else {
                i += 1;
            }
        }
        if let Some(s) = self.free.pop() {
            return Ok(s);
        }
        let next = self.records.len() as u32;
        if next >= self.max {
            return Err(SessionError::Full);
        }
        self.records.push(None);
        Ok(next)
    }

    /// The id of the peer at `addr` from N3 tunnel `n3` with outer DSCP
    /// `dscp`: sessions that mark differently have templates of their
    /// own, so that marking costs no packet anything.
    fn peer_ref(&mut self, n3: u32, addr: IpAddr, dscp: Option<u8>) -> u32 {
        let key = Peer { n3, addr, dscp };
        if let Some((id, refs)) = self.peers.get_mut(&key) {
            *refs += 1;
            return *id;
        }
        let id = self.free_peers.pop().unwrap_or_else(|| {
            self.next_peer += 1;
            self.next_peer - 1
        });
        self.peers.insert(key, (id, 1));
        if self.peer_by_id.len() <= id as usize {
            self.peer_by_id.resize(id as usize + 1, None);
        }
        self.peer_by_id[id as usize] = Some(key);
        self.outbox.push(Change::Peer {
            id,
            peer: Some(key),
        });
        id
    }

    fn peer_unref(&mut self, id: u32) {
        let Some(key) = self.peer_by_id.get(id as usize).copied().flatten() else {
            return;
        };
        let entry = self.peers.get_mut(&key).map(|e| {
            e.1 -= 1;
            e.1
        });
        if entry == Some(0) {
            self.peers.remove(&key);
            self.peer_by_id[id as usize] = None;
            // A peer id is reused at once: the changes that stop every
            // session naming it come before the one that sets it again.
            self.free_peers.push(id);
            self.outbox.push(Change::Peer { id, peer: None });
        }
    }
}

/// `spec` less its rules.
fn without_rules(spec: &SessionSpec) -> SessionSpec {
    SessionSpec {
        n3: spec.n3,
        uplink: spec.uplink,
        downlink: spec.downlink,
        peer: spec.peer,
        qfi: spec.qfi,
        uplink_keys: spec.uplink_keys.clone(),
        downlink_keys: spec.downlink_keys.clone(),
        network: spec.network,
        ue: spec.ue,
        mbr: spec.mbr,
        rules: SessionRules {
            dscp: spec.rules.dscp,
            ..Default::default()
        },
    }
}

/// Both directions' rules compiled, or why they cannot be.
fn compile(spec: &SessionSpec) -> Result<Compiled, SessionError> {
    let one = |rules: &[RuleSpec], uplink: bool| {
        if rules.is_empty() {
            return Ok(None);
        }
        Classifier::new(rules)
            .map(Some)
            .map_err(|error| SessionError::Rules { uplink, error })
    };
    Ok(Compiled {
        uplink: one(&spec.rules.uplink, true)?,
        downlink: one(&spec.rules.downlink, false)?,
    })
}

/// The bucket of the rules under the QER `key` one way at `bps`: one per
/// QER, kept from `old` where its rate stays (a modification must not
/// hand out a fresh burst).
fn bucket(built: &mut Built, old: Option<&Built>, key: u32, uplink: bool, bps: u64) -> Arc<Bucket> {
    let same = |b: &&(u32, bool, u64, Arc<Bucket>)| (b.0, b.1, b.2) == (key, uplink, bps);
    if let Some(b) = built.buckets.iter().find(same) {
        return b.3.clone();
    }
    let b = match old.and_then(|o| o.buckets.iter().find(same)) {
        Some(b) => b.3.clone(),
        None => {
            let b = Arc::new(Bucket::default());
            b.set(bps);
            b
        }
    };
    built.buckets.push((key, uplink, bps, b.clone()));
    b
}

fn session_of(spec: &SessionSpec, peer: Option<u32>, gnb_source: bool) -> Session {
    let buffers = spec
        .rules
        .downlink
        .iter()
        .any(|r| r.action == Action::Buffer);
    Session {
        n3: spec.n3,
        network: spec.network,
        uplink: spec.uplink,
        // Forwarding needs somewhere to go: without outer header creation
        // yet, downlink packets are dropped (counted). With rules, each
        // rule's action applies; the session's says whether it holds
        // packets (they are released when none of its rules buffers).
        downlink: match (spec.downlink, peer) {
            _ if !spec.rules.downlink.is_empty() && buffers => Action::Buffer,
            _ if !spec.rules.downlink.is_empty() => Action::Forward,
            (Action::Forward, None) => Action::Drop,
            (a, _) => a,
        },
        peer: peer.unwrap_or(u32::MAX),
        teid: spec.peer.map_or(0, |p| p.1),
        qfi: spec.qfi,
        ue: spec.ue,
        gnb_source,
        mbr_uplink: spec.mbr.uplink.is_some(),
        mbr_downlink: spec.mbr.downlink.is_some(),
        uplink_rules: !spec.rules.uplink.is_empty(),
        downlink_rules: !spec.rules.downlink.is_empty(),
        // Set by `Sessions::arm_volume`, kept across modifications.
        watch: false,
    }
}
