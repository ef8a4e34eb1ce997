//! Usage reporting in the daemon: the N4 thread's usage scan, what each
//! URR counts, and what a used-up quota does to a session's packets.
//!
//! The workers count each session's packets and bytes, and each rule's
//! where a direction has several ([`tep_dataplane::session::counters`]),
//! into counters the N4 thread reads without stopping them
//! ([`super::upf::UpfPlane`]). A URR counts the packets of the PDRs it is
//! on ([`UrrCounts`]): a direction whose PDRs compiled to one treatment
//! (they are all under the same URRs, `compile` sees to it) gives the
//! session's counts that way, a direction with rules the counts of the
//! rules whose PDRs name the URR. The
//! scan hands what each watched URR counted since the last scan to
//! tep-pfcp's node ([`Node::scan_usage`]), which reports the triggers
//! that fired (volume and time thresholds and quotas, periodic, start and
//! stop of traffic) in Session Report Requests.
//!
//! How often: every [`MIN_INTERVAL`] while any session is watched, and
//! never more than a tenth of the thread's time (a scan that took `c`
//! waits `10 c` before the next one: measured (`scan_cost`, release) 54–61
//! ns per watched session at 1,000 and 660–730 ns at 100,000, so 5 ms
//! holds to about 8,000 sessions and 100,000 are scanned every 0.7 s,
//! rather than starve the N4 socket). Volume
//! thresholds and quotas of URRs on all of a session's packets are not
//! left to the scans: the workers charge each packet to the session's
//! line ([`tep_dataplane::session::watch`], armed by
//! [`UrrCounts::volume_limits`] at every install, and at a scan that
//! reported, ran a quota out or followed a crossing), a quota drops
//! from the packet that would exceed it, and the crossing wakes this
//! thread, which reports at once what was counted up to the crossing
//! packet ([`UrrCounts::take`]: what came after goes to the next
//! measurement). A URR on one way's PDRs only is checked on the same
//! line (its total is that way's), as is one on every rule of a way. A
//! URR on only some of a way's rules has a line of its own
//! ([`line_groups`]), charged by each of its rules and armed and re-armed
//! at the same moments with what that URR has left. What stays on the
//! scans, whose bound is what the session sends in one interval: a URR on
//! some rules of one way and on the other way's packets where that way
//! has no rules (a line would need every packet of that way charged), and
//! the URRs on a PDR under more than two such URRs. Periodic reports are
//! due on their period and leave at the first scan after: late by at most
//! one interval.

use std::time::{Duration, Instant};

use tep_dataplane::session::control::{SessionSpec, Sessions, Volume};
use tep_dataplane::session::watch::{VolumeLimits, RULE_LINES};
use tep_dataplane::session::Action;
use tep_pfcp::node::{Node, Rules, Usage, UserPlane, VolumeLeft};
use tep_pfcp::types::Interface;

/// The shortest time between two scans.
pub const MIN_INTERVAL: Duration = Duration::from_millis(5);
/// The longest (however long scans take).
pub const MAX_INTERVAL: Duration = Duration::from_secs(1);
/// How long without a packet means a session's traffic stopped (STOPT,
/// and the end of a duration's measurement) where its URR names no
/// Inactivity Detection Time.
pub const TRAFFIC_IDLE: Duration = Duration::from_secs(10);

/// When the N4 thread scans usage next.
#[derive(Debug)]
pub struct UsageScan {
    next: Instant,
    interval: Duration,
}

impl UsageScan {
    pub fn new(now: Instant) -> UsageScan {
        UsageScan {
            next: now + MIN_INTERVAL,
            interval: MIN_INTERVAL,
        }
    }

    /// When the next scan is due: none while no session has a URR to
    /// watch.
    pub fn deadline(&self, node: &Node) -> Option<Instant> {
        (node.usage_watched() > 0).then_some(self.next)
    }

    /// Scans if one is due at `now`.
    pub fn run(&mut self, now: Instant, node: &mut Node, up: &mut impl UserPlane) {
        if node.usage_watched() == 0 {
            // The first watched session is scanned one interval after.
            self.next = now + self.interval;
            return;
        }
        if now < self.next {
            return;
        }
        let started = Instant::now();
        node.scan_usage(now, up);
        self.interval = (started.elapsed() * 10).clamp(MIN_INTERVAL, MAX_INTERVAL);
        self.next = now + self.interval;
    }
}

/// The PDRs under a URR that used up its quota forward nothing, counted
/// apart from other drops (`quota_exhausted`), until the SMF grants a new
/// quota (TS 29.244 §5.2.2.2.1: without a FAR ID for Quota Action, which
/// tep refuses, the packets are dropped): their rules, or a way's one
/// treatment where the way has no rules (its PDRs are all under the same
/// URRs). The session's other PDRs go on: a URR on a voice flow's PDRs
/// stops the voice flow, one on every PDR the whole session.
pub fn stop_if_exhausted(rules: &Rules, spec: &mut SessionSpec) {
    let spent: Vec<u32> = rules
        .urrs
        .iter()
        .filter(|u| u.exhausted())
        .map(|u| u.id)
        .collect();
    if spent.is_empty() {
        return;
    }
    let stops = |urrs: &[u32]| urrs.iter().any(|id| spent.contains(id));
    let r = &mut spec.rules;
    for (list, tags) in [
        (&mut r.uplink, &r.uplink_tags),
        (&mut r.downlink, &r.downlink_tags),
    ] {
        for (i, rule) in list.iter_mut().enumerate() {
            // A rule without a tag cannot be told apart: it stops too.
            if tags.get(i).is_none_or(|t| stops(urrs_of(rules, t.key))) {
                rule.action = Action::QuotaExhausted;
            }
        }
    }
    for uplink in [true, false] {
        let (list, action) = match uplink {
            true => (&spec.rules.uplink, &mut spec.uplink),
            false => (&spec.rules.downlink, &mut spec.downlink),
        };
        let on = |p: &&tep_pfcp::node::Pdr| (p.source == Interface::ACCESS) == uplink;
        if list.is_empty()
            && rules
                .pdrs
                .iter()
                .filter(on)
                .any(|p| stops(p.urrs.as_slice()))
        {
            *action = Action::QuotaExhausted;
        }
    }
}

/// Where a URR's counts come from: the session's one way, or a rule's
/// counter (one way).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Source {
    Session { uplink: bool },
    Rule { uplink: bool, counter: u32 },
}

/// (packets, bytes).
type Counts = (u64, u64);

/// One URR's counting: its sources, what each had counted when the URR
/// last took it, and what it counted under sources a modification
/// replaced (banked for the next take).
#[derive(Clone, Debug)]
struct UrrCount {
    id: u32,
    sources: Vec<(Source, Counts)>,
    banked: Usage,
    // Whether it takes each way's packets all or none ([`whole`]): the
    // session's line checks it.
    whole: bool,
}

impl UrrCount {
    /// Which ways it takes all the packets of, where it takes each way's
    /// all or none: then the session's line can check it (None: it takes
    /// some rules' of a way, or nothing).
    fn session_ways(&self) -> Option<[bool; 2]> {
        let mut ways = [false; 2];
        for (s, _) in &self.sources {
            let (Source::Session { uplink } | Source::Rule { uplink, .. }) = *s;
            ways[usize::from(!uplink)] = true;
        }
        (self.whole && ways != [false; 2]).then_some(ways)
    }

    /// Whether it takes some rules' counts of a way, and only rules':
    /// its own line can check it.
    fn rules_only(&self) -> bool {
        !self.whole
            && !self.sources.is_empty()
            && self
                .sources
                .iter()
                .all(|(s, _)| matches!(s, Source::Rule { .. }))
    }

    /// What its sources counted since it last took them (bytes: total,
    /// uplink, downlink).
    fn since(&self, sessions: &Sessions, slot: u32, volume: &mut Option<Volume>) -> [u64; 3] {
        let mut since = self.banked;
        for &(src, base) in &self.sources {
            add(&mut since, src, base, read(sessions, slot, src, volume));
        }
        let (ul, dl) = (since.uplink_bytes, since.downlink_bytes);
        [ul + dl, ul, dl]
    }
}

/// A session's URRs' counting.
#[derive(Clone, Debug, Default)]
pub struct UrrCounts {
    urrs: Vec<UrrCount>,
    // The URRs with a quota that the session's line was last armed with.
    slot_quotas: Vec<u32>,
}

/// The URRs of the PDR with ID `key`.
fn urrs_of(rules: &Rules, key: u32) -> &[u32] {
    u16::try_from(key)
        .ok()
        .and_then(|id| rules.pdr(id))
        .map_or(&[][..], |p| p.urrs.as_slice())
}

/// Whether URR `urr` takes each way's packets all or none: where a way's
/// PDRs count apart, it is on all of their rules or none (elsewhere
/// `compile` puts only PDRs under the same URRs in one treatment). Its
/// counts each way are then the session's, which its line checks.
fn whole(rules: &Rules, spec: &SessionSpec, urr: u32) -> bool {
    let r = &spec.rules;
    [&r.uplink_tags, &r.downlink_tags].into_iter().all(|tags| {
        let on =
            |t: &tep_dataplane::session::control::RuleTag| urrs_of(rules, t.key).contains(&urr);
        !tags.iter().any(|t| t.counted) || tags.iter().all(on) || !tags.iter().any(on)
    })
}

/// Gives each rule of `spec` that counts apart (its tag `counted`)
/// the groups whose volume lines it charges: its PDR's URRs with a volume
/// threshold or quota that take some rules' packets of a way but not all
/// ([`whole`]), where every PDR of such a URR is a rule counted apart (a
/// URR that also takes a way's packets without rules is left to the
/// scans, as is one on a PDR under more than [`RULE_LINES`] of them). A
/// group is named by its URR ID.
pub fn line_groups(rules: &Rules, spec: &mut SessionSpec) {
    let urrs_of = |key: u32| urrs_of(rules, key);
    let r = &spec.rules;
    let counted = [&r.uplink_tags, &r.downlink_tags].map(|t| t.iter().any(|t| t.counted));
    let without_rules = |id: u32| {
        rules.pdrs.iter().any(|p| {
            let way = usize::from(p.source != Interface::ACCESS);
            !counted[way] && p.urrs.as_slice().contains(&id)
        })
    };
    let mut lined: Vec<u32> = rules
        .urrs
        .iter()
        .filter(|u| u.volume_left() != VolumeLeft::default())
        .filter(|u| !without_rules(u.id) && !whole(rules, spec, u.id))
        .map(|u| u.id)
        .collect();
    for t in r.uplink_tags.iter().chain(&r.downlink_tags) {
        let on = urrs_of(t.key);
        if on.iter().filter(|id| lined.contains(id)).count() > RULE_LINES {
            lined.retain(|id| !on.contains(id));
        }
    }
    let r = &mut spec.rules;
    for t in r.uplink_tags.iter_mut().chain(r.downlink_tags.iter_mut()) {
        if !t.counted {
            continue;
        }
        let mut groups = urrs_of(t.key).iter().filter(|id| lined.contains(id));
        t.watch = [(); RULE_LINES].map(|_| groups.next().copied());
    }
}

impl UrrCounts {
    /// After slot `slot` was set from `rules` (compiled into `spec`):
    /// each URR counts from its PDRs' sources from now on. What a URR
    /// counted under its old sources is banked, read at the same moment
    /// as the new sources' baselines, so that a source kept (the session's
    /// counts, a rule whose PDR stays) loses nothing; a URR created now
    /// starts from now; a removed one goes.
    pub fn rebase(&mut self, rules: &Rules, spec: &SessionSpec, sessions: &Sessions, slot: u32) {
        let mut snap: Vec<(Source, Counts)> = Vec::new();
        let mut volume = None;
        let mut once = |src: Source| match snap.iter().find(|s| s.0 == src) {
            Some(s) => s.1,
            None => {
                let c = read(sessions, slot, src, &mut volume);
                snap.push((src, c));
                c
            }
        };
        self.urrs.retain(|u| rules.urr(u.id).is_some());
        for u in &rules.urrs {
            let i = match self.urrs.iter().position(|c| c.id == u.id) {
                Some(i) => i,
                None => {
                    self.urrs.push(UrrCount {
                        id: u.id,
                        sources: Vec::new(),
                        banked: Usage::default(),
                        whole: true,
                    });
                    self.urrs.len() - 1
                }
            };
            let c = &mut self.urrs[i];
            for &(src, base) in &c.sources {
                add(&mut c.banked, src, base, once(src));
            }
            c.whole = whole(rules, spec, u.id);
            c.sources = sources_of(rules, spec, sessions, slot, u.id)
                .into_iter()
                .map(|src| (src, once(src)))
                .collect();
        }
    }

    /// Arms the session's volume checks with what is left now: its line
    /// with the URRs on all its packets, or all of one way's
    /// ([`UrrCounts::volume_limits`]), each group's line
    /// ([`line_groups`]) with its URR's.
    pub fn arm(&mut self, rules: &Rules, sessions: &mut Sessions, slot: u32) {
        let _ = sessions.arm_volume_with(slot, |s| self.volume_limits(rules, s, slot));
        self.slot_quotas.clear();
        for u in &rules.urrs {
            let left = u.volume_left();
            let Some(c) = self.urrs.iter().find(|c| c.id == u.id) else {
                continue;
            };
            if c.session_ways().is_some() && left.quota.iter().any(Option::is_some) {
                self.slot_quotas.push(u.id);
            }
            if left == VolumeLeft::default() || !c.rules_only() {
                continue;
            }
            sessions.arm_group_with(slot, u.id, |s| {
                let counted = c.since(s, slot, &mut None);
                let mut l = VolumeLimits::default();
                for (i, &n) in counted.iter().enumerate() {
                    nearest(&mut l.threshold[i], left.threshold[i], n);
                    nearest(&mut l.quota[i], left.quota[i], n);
                }
                l
            });
        }
    }

    /// The URRs one of which used up its quota when the session's line
    /// found a quota used up.
    pub fn slot_quotas(&self) -> &[u32] {
        &self.slot_quotas
    }

    /// What is left now before the session's nearest volume threshold
    /// and of its nearest quota, each of total, uplink and downlink: each
    /// URR's ([`tep_pfcp::node::Urr::volume_left`], as far as its meter
    /// counted) less what its sources counted since it last took them,
    /// of the URRs that take the session's counts both ways (a URR of
    /// one way's: its total is that way's) and no rule's.
    pub fn volume_limits(&self, rules: &Rules, sessions: &Sessions, slot: u32) -> VolumeLimits {
        let mut out = VolumeLimits::default();
        let mut volume = None;
        for u in &rules.urrs {
            let left = u.volume_left();
            if left == VolumeLeft::default() {
                continue;
            }
            let Some(c) = self.urrs.iter().find(|c| c.id == u.id) else {
                continue;
            };
            let Some(ways) = c.session_ways() else {
                continue;
            };
            let counted = c.since(sessions, slot, &mut volume);
            for (i, &n) in counted.iter().enumerate() {
                let w = match (i, ways) {
                    (0, [true, false]) => 1,
                    (0, [false, true]) => 2,
                    _ => i,
                };
                // A way it does not take never reaches its limit.
                if w == 0 || ways[w - 1] {
                    nearest(&mut out.threshold[w], left.threshold[i], n);
                    nearest(&mut out.quota[w], left.quota[i], n);
                }
            }
        }
        out
    }

    /// What URR `urr` counted since it last took it, up to the packet
    /// that crossed a threshold of the line that checks it, if one did
    /// since the line was armed: what came after is left to the next
    /// measurement, so that the crossing's report ends at that packet
    /// however late the N4 thread looks (a scan that comes first
    /// included).
    pub fn take(&mut self, sessions: &Sessions, slot: u32, urr: u32) -> Usage {
        let Some(c) = self.urrs.iter_mut().find(|c| c.id == urr) else {
            return Usage::default();
        };
        let mut u = core::mem::take(&mut c.banked);
        // The counts and the line at one moment, however long the
        // reading takes (a preempted N4 thread).
        let sources = &c.sources;
        let read_all = || {
            let mut volume = None;
            let counts = sources
                .iter()
                .map(|&(src, _)| read(sessions, slot, src, &mut volume));
            counts.collect::<Vec<Counts>>()
        };
        let (counts, (ul, dl)) = match c.whole {
            true => sessions.watches().settled(slot, read_all),
            false => sessions.group_settled(slot, c.id, read_all),
        };
        let mut held = [ul, dl];
        for ((src, base), mut now) in c.sources.iter_mut().zip(counts) {
            let (Source::Session { uplink } | Source::Rule { uplink, .. }) = *src;
            let h = &mut held[usize::from(!uplink)];
            let d = (*h).min(now.1 - base.1);
            now.1 -= d;
            *h -= d;
            add(&mut u, *src, *base, now);
            *base = now;
        }
        u
    }
}

/// Keeps in `out` the nearer of it and `left` less `counted`.
fn nearest(out: &mut Option<u64>, left: Option<u64>, counted: u64) {
    if let Some(l) = left {
        let l = l.saturating_sub(counted);
        *out = Some(out.map_or(l, |o| o.min(l)));
    }
}

/// Adds to `u` what `src` counted from `base` to `now`.
fn add(u: &mut Usage, src: Source, base: Counts, now: Counts) {
    let (p, b) = (now.0 - base.0, now.1 - base.1);
    match src {
        Source::Session { uplink: true } | Source::Rule { uplink: true, .. } => {
            u.uplink_packets += p;
            u.uplink_bytes += b;
        }
        _ => {
            u.downlink_packets += p;
            u.downlink_bytes += b;
        }
    }
}

/// What `src` counted so far; `volume`: the session's counts, read once
/// for both directions.
fn read(sessions: &Sessions, slot: u32, src: Source, volume: &mut Option<Volume>) -> Counts {
    match src {
        Source::Session { uplink } => {
            let v = *volume.get_or_insert_with(|| sessions.usage(slot));
            if uplink {
                (v.ul_packets, v.ul_bytes)
            } else {
                (v.dl_packets, v.dl_bytes)
            }
        }
        Source::Rule { counter, .. } => sessions.rule_usage(counter),
    }
}

/// URR `urr`'s sources each way: the rules whose PDRs name it where the
/// direction has rules with counters (its PDRs are under different
/// URRs), else the session's counts if its PDRs name it.
fn sources_of(
    rules: &Rules,
    spec: &SessionSpec,
    sessions: &Sessions,
    slot: u32,
    urr: u32,
) -> Vec<Source> {
    let mut out = Vec::new();
    let on = |pdr: u32| {
        u16::try_from(pdr)
            .ok()
            .and_then(|id| rules.pdr(id))
            .is_some_and(|p| p.urrs.as_slice().contains(&urr))
    };
    for uplink in [true, false] {
        let (list, tags) = if uplink {
            (&spec.rules.uplink, &spec.rules.uplink_tags)
        } else {
            (&spec.rules.downlink, &spec.rules.downlink_tags)
        };
        if list.is_empty() || !tags.iter().any(|t| t.counted) {
            let named = rules.pdrs.iter().any(|p| {
                (p.source == Interface::ACCESS) == uplink && p.urrs.as_slice().contains(&urr)
            });
            if named {
                out.push(Source::Session { uplink });
            }
            continue;
        }
        for t in tags.iter().filter(|t| on(t.key)) {
            if let Some(counter) = sessions.rule_counter(slot, uplink, t.key) {
                out.push(Source::Rule { uplink, counter });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::upf::tests::associated;
    use crate::daemon::upf::UpfPlane;
    use std::net::{IpAddr, Ipv4Addr};
    use tep_dataplane::session::watch::NO_LINE;
    use tep_dataplane::session::{SessionTable, WorkerLink};
    use tep_pfcp::message::Message;
    use tep_pfcp::node::Config;
    use tep_pfcp::sample;
    use tep_pfcp::types::{Bitmap, NodeId, ReportingTriggers, VolumeQuota, VolumeThreshold};

    const N3: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
    const SMF: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 10);

    /// A node over the daemon's user plane with `n` sessions whose URR
    /// has a volume threshold (watched by every scan), on 2 workers.
    fn watched(n: u32) -> (Node, UpfPlane) {
        let (node, up, _links) = with_urr(n, |u| {
            u.reporting_triggers = ReportingTriggers(Bitmap::new(ReportingTriggers::VOLTH, 3));
            u.volume_threshold = Some(VolumeThreshold {
                total: Some(1 << 40),
                ..Default::default()
            });
        });
        (node, up)
    }

    /// A node over the daemon's user plane with `n` sessions whose first
    /// URR `urr` sets, on 2 workers (their links).
    fn with_urr(
        n: u32,
        urr: impl Fn(&mut tep_pfcp::rules::CreateUrr),
    ) -> (Node, UpfPlane, Vec<WorkerLink>) {
        let (mut node, mut up, links, smf, now) = associated(n + 1, 2);
        for i in 1..=n {
            let ue = Ipv4Addr::from(0x0a00_0000 + i);
            let gnb = Ipv4Addr::new(192, 0, 2, 9);
            let mut r = sample::pdu_session_establishment(i, u64::from(i), SMF, ue, gnb, i);
            if let Message::SessionEstablishmentRequest(m) = &mut r.message {
                urr(&mut m.create_urrs[0]);
            }
            node.handle(now, smf, &r.to_bytes(), &mut up);
        }
        while node.poll_transmit().is_some() {}
        (node, up, links)
    }

    /// The Usage Reports' (trigger, total volume) of the Session Report
    /// Request `node` sends next.
    fn next_report(node: &mut Node) -> Vec<(u64, Option<u64>)> {
        let t = node.poll_transmit().expect("a report");
        let r = tep_pfcp::PfcpRepr::parse_bytes(&t.payload).unwrap();
        let Message::SessionReportRequest(sr) = r.message else {
            panic!("{:?}", r.message)
        };
        sr.usage_reports
            .iter()
            .map(|u| (u.0.trigger.0.bits, u.0.volume.and_then(|v| v.total)))
            .collect()
    }

    #[test]
    fn a_crossing_is_reported_at_once_and_a_quota_stops_at_the_packet_that_does_not_fit() {
        let (mut node, mut up, links) = with_urr(1, |u| {
            let t = ReportingTriggers::VOLTH | ReportingTriggers::VOLQU;
            u.reporting_triggers = ReportingTriggers(Bitmap::new(t, 3));
            u.volume_threshold = Some(VolumeThreshold {
                total: Some(2500),
                ..Default::default()
            });
            u.volume_quota = Some(VolumeQuota(VolumeThreshold {
                total: Some(4500),
                ..Default::default()
            }));
        });
        let mut w = SessionTable::new(links[0].clone());
        let mut applied = Vec::new();
        up.publish();
        w.apply_pending(&mut applied);
        let slot = (0..2).find(|&s| w.get(s).watch).expect("armed and flagged");
        let seid = up.report_of(slot).map(|r| r.0);
        // A worker's packet: charged, then counted if it passes.
        let packet = |w: &SessionTable| {
            let r = w.charge_volume(slot, true, 1000);
            if r.is_ok() {
                w.count_uplink(slot, 1000);
            }
            r.is_ok()
        };
        let (mut slots, mut crossed) = (Vec::new(), Vec::new());
        assert!(packet(&w) && packet(&w));
        up.volume_crossed(&mut slots, &mut crossed);
        assert!(crossed.is_empty());
        assert!(packet(&w), "the threshold's packet passes");
        up.volume_crossed(&mut slots, &mut crossed);
        assert_eq!(crossed.len(), 1);
        assert!(crossed[0].1.is_empty(), "a threshold, not a quota");
        let now = Instant::now();
        for (s, q) in crossed.drain(..) {
            assert_eq!(Some(s), seid);
            node.usage_crossed(now, s, &q, &mut up);
        }
        assert_eq!(
            next_report(&mut node),
            [(tep_pfcp::types::UsageReportTrigger::VOLTH, Some(3000))]
        );
        // Re-armed: the quota has 1500 left, the threshold 2500 again.
        assert!(packet(&w), "4000 of 4500");
        assert!(!packet(&w), "the packet that would exceed the quota");
        assert!(!packet(&w));
        up.volume_crossed(&mut slots, &mut crossed);
        assert_eq!(crossed.len(), 1);
        assert_eq!(crossed[0].1, [1], "URR 1's quota");
        for (s, q) in crossed.drain(..) {
            node.usage_crossed(now, s, &q, &mut up);
        }
        assert_eq!(
            next_report(&mut node),
            [(tep_pfcp::types::UsageReportTrigger::VOLQU, Some(1000))]
        );
        // Its line keeps dropping (armed with nothing left) until the
        // session's rules stop it.
        assert!(!packet(&w));
        up.volume_crossed(&mut slots, &mut crossed);
        assert!(crossed.is_empty(), "crossed once");
        up.publish();
        w.apply_pending(&mut applied);
        assert_eq!(w.get(slot).uplink, Action::QuotaExhausted);
        assert_eq!(node.counter(tep_pfcp::node::Counter::QuotaExhausted), 1);
    }

    /// A node over the daemon's user plane with one session whose
    /// downlink has a default PDR (2) and a voice PDR (3: UDP to the UE's
    /// port 5000), both under URR 1 (VOLUM, no trigger); URR 2, which
    /// `urr2` sets, is on the voice PDR only. On 2 workers (their links).
    fn voice_under_urr2(
        urr2: impl Fn(&mut tep_pfcp::rules::CreateUrr),
    ) -> (Node, UpfPlane, Vec<WorkerLink>) {
        use tep_pfcp::rules::{CreatePdr, CreateUrr};
        use tep_pfcp::types::{Precedence, SdfFilter, UrrId};
        let (mut node, mut up, links, smf, now) = associated(2, 2);
        let (ue, gnb) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(192, 0, 2, 9));
        let mut r = sample::pdu_session_establishment(1, 1, SMF, ue, gnb, 1);
        if let Message::SessionEstablishmentRequest(m) = &mut r.message {
            let mut voice = CreatePdr {
                precedence: Precedence(10),
                ..m.create_pdrs[1].clone()
            };
            voice.pdr_id.0 = 3;
            voice.pdi.sdf_filters = vec![SdfFilter {
                flow_description: Some(b"permit out 17 from any to assigned 5000".to_vec()),
                ..Default::default()
            }];
            voice.urr_ids = vec![UrrId(1), UrrId(2)];
            m.create_pdrs.push(voice);
            let mut u = CreateUrr {
                urr_id: UrrId(2),
                ..m.create_urrs[0].clone()
            };
            urr2(&mut u);
            m.create_urrs.push(u);
        }
        while node.poll_transmit().is_some() {}
        node.handle(now, smf, &r.to_bytes(), &mut up);
        let t = node.poll_transmit().expect("a response");
        let resp = tep_pfcp::PfcpRepr::parse_bytes(&t.payload).unwrap();
        assert!(
            matches!(resp.message, Message::SessionEstablishmentResponse(ref m) if m.cause.0 == 1),
            "{:?}",
            resp.message
        );
        (node, up, links)
    }

    /// A worker's downlink packet of `len` bytes taken by the rule with
    /// usage counter `counter` of slot `slot`: charged to the session's
    /// line if watched and to the rule's lines, then counted if it
    /// passes (what `session-lookup` does).
    fn downlink(w: &SessionTable, slot: u32, counter: u32, len: usize) -> bool {
        let pass = (!w.get(slot).watch || w.charge_volume(slot, false, len).is_ok())
            && w.charge_rule_volume(counter, false, len).is_ok();
        if pass {
            w.count_downlink(slot, len);
            w.count_rule(counter, len);
        }
        pass
    }

    /// The crossings the workers saw, handed to the node at `now`.
    fn cross(node: &mut Node, up: &mut UpfPlane, now: Instant) -> usize {
        let (mut scratch, mut crossed) = (Vec::new(), Vec::new());
        up.volume_crossed(&mut scratch, &mut crossed);
        for (seid, spent) in &crossed {
            node.usage_crossed(now, *seid, spent, up);
        }
        crossed.len()
    }

    #[test]
    fn a_threshold_on_one_of_two_pdrs_is_reported_at_its_packet() {
        let (mut node, mut up, links) = voice_under_urr2(|u| {
            u.reporting_triggers = ReportingTriggers(Bitmap::new(ReportingTriggers::VOLTH, 3));
            u.volume_threshold = Some(VolumeThreshold {
                total: Some(2500),
                ..Default::default()
            });
        });
        let w: Vec<SessionTable> = links.iter().cloned().map(SessionTable::new).collect();
        let mut w = w;
        up.publish();
        for t in &mut w {
            t.apply_pending(&mut Vec::new());
        }
        let slot = 0;
        let seid = up.report_of(slot).expect("the session").0;
        let counter = |pdr| up.sessions().rule_counter(slot, false, pdr).unwrap();
        let (default, voice) = (counter(2), counter(3));
        let lines = &links[0].urr_watches;
        assert_eq!(lines.rule(default), [NO_LINE; 2], "URR 1 takes it all");
        assert_ne!(lines.rule(voice)[0], NO_LINE, "URR 2's line");
        assert!(!w[0].get(slot).watch, "no session-wide limit");
        let now = Instant::now();
        // The default flow's packets never reach URR 2's threshold.
        for k in 0..10 {
            assert!(downlink(&w[k % 2], slot, default, 1000));
        }
        assert_eq!(cross(&mut node, &mut up, now), 0);
        // Voice packets one by one: the third, on either worker, crosses.
        assert!(downlink(&w[0], slot, voice, 1000));
        assert!(downlink(&w[1], slot, voice, 1000));
        assert_eq!(cross(&mut node, &mut up, now), 0);
        assert!(downlink(&w[1], slot, voice, 1000));
        // Sent before the N4 thread looks: the next measurement's, even
        // where a scan comes before the crossing is drained.
        assert!(downlink(&w[0], slot, voice, 700));
        node.scan_usage(now, &mut up);
        assert_eq!(
            next_report(&mut node),
            [(tep_pfcp::types::UsageReportTrigger::VOLTH, Some(3000))]
        );
        assert_eq!(cross(&mut node, &mut up, now), 1);
        assert!(node.poll_transmit().is_none(), "reported once");
        assert_eq!(node.session(seid).map(|r| r.urrs.len()), Some(2));
        // Re-armed with 2500 less the 700 after the crossing.
        assert!(downlink(&w[0], slot, voice, 1000));
        assert_eq!(cross(&mut node, &mut up, now), 0);
        assert!(downlink(&w[1], slot, voice, 800));
        assert_eq!(cross(&mut node, &mut up, now), 1);
        assert_eq!(
            next_report(&mut node),
            [(tep_pfcp::types::UsageReportTrigger::VOLTH, Some(2500))]
        );
    }

    #[test]
    fn a_quota_on_one_of_two_pdrs_stops_only_its_packets() {
        let (mut node, mut up, links) = voice_under_urr2(|u| {
            u.reporting_triggers = ReportingTriggers(Bitmap::new(ReportingTriggers::VOLQU, 3));
            u.volume_quota = Some(VolumeQuota(VolumeThreshold {
                total: Some(2500),
                ..Default::default()
            }));
        });
        let mut w = SessionTable::new(links[0].clone());
        up.publish();
        w.apply_pending(&mut Vec::new());
        let slot = 0;
        let seid = up.report_of(slot).expect("the session").0;
        let counter = |pdr| up.sessions().rule_counter(slot, false, pdr).unwrap();
        let (default, voice) = (counter(2), counter(3));
        let now = Instant::now();
        assert!(downlink(&w, slot, voice, 1000));
        assert!(downlink(&w, slot, voice, 1000));
        assert!(!downlink(&w, slot, voice, 1000), "beyond the quota");
        assert!(
            downlink(&w, slot, default, 1000),
            "the default flow goes on"
        );
        assert_eq!(cross(&mut node, &mut up, now), 1);
        assert_eq!(
            next_report(&mut node),
            [(tep_pfcp::types::UsageReportTrigger::VOLQU, Some(2000))]
        );
        assert_eq!(node.counter(tep_pfcp::node::Counter::QuotaExhausted), 1);
        // Installed again: the voice rule stops, the default one forwards.
        let rules = node.session(seid).unwrap();
        let (mut spec, _) = crate::daemon::upf::compile(rules, &[(IpAddr::V4(N3), 0)]).unwrap();
        stop_if_exhausted(rules, &mut spec);
        let actions: Vec<(u32, Action)> = (spec.rules.downlink_tags.iter())
            .zip(&spec.rules.downlink)
            .map(|(t, r)| (t.key, r.action))
            .collect();
        assert_eq!(actions, [(3, Action::QuotaExhausted), (2, Action::Forward)]);
        assert_eq!(spec.uplink, Action::Forward, "URR 2 is on no uplink PDR");
        up.publish();
        w.apply_pending(&mut Vec::new());
        assert!(downlink(&w, slot, default, 1000));
        assert!(!downlink(&w, slot, voice, 1), "still spent");
        assert_eq!(cross(&mut node, &mut up, now), 0, "crossed once");
    }

    /// Which URRs get a line of their own: those on some of a way's
    /// rules (not one on all of them, which the session's line checks),
    /// at most two a rule (a rule under more leaves them all to the
    /// scans), none that also takes a way's packets without rules.
    #[test]
    fn urrs_on_some_rules_get_lines_two_a_rule_at_most() {
        use crate::daemon::upf::{compile, tests::rules};
        use tep_pfcp::node::{self as node, Ids};
        let mut r = rules(node::Action::Forward);
        let mut voice = r.pdrs[1].clone();
        (voice.id, voice.precedence) = (3, 10);
        let d = b"permit out 17 from any to assigned 5000-5010";
        voice.sdf = vec![node::Sdf {
            flow: Some(tep_pfcp::flow::FlowDescription::parse(d).unwrap()),
            tos: None,
            spi: None,
            flow_label: None,
            id: None,
        }];
        r.pdrs.push(voice);
        for id in 1..=4 {
            let c = tep_pfcp::rules::CreateUrr {
                urr_id: tep_pfcp::types::UrrId(id),
                measurement_method: tep_pfcp::types::MeasurementMethod(
                    tep_pfcp::types::MeasurementMethod::VOLUM,
                ),
                reporting_triggers: ReportingTriggers(Bitmap::new(ReportingTriggers::VOLTH, 3)),
                volume_threshold: Some(VolumeThreshold {
                    total: Some(1000),
                    ..Default::default()
                }),
                ..Default::default()
            };
            node::session::create_urr(&mut r, &c, true).unwrap();
        }
        let groups = |r: &Rules, pdrs: [&[u32]; 3]| {
            let mut r = r.clone();
            for (p, urrs) in r.pdrs.iter_mut().zip(pdrs) {
                p.urrs = Ids::new(urrs).unwrap();
            }
            let (mut spec, _) = compile(&r, &[(IpAddr::V4(N3), 0)]).unwrap();
            line_groups(&r, &mut spec);
            let mut w: Vec<(u32, [Option<u32>; 2])> = (spec.rules.downlink_tags.iter())
                .map(|t| (t.key, t.watch))
                .collect();
            w.sort_unstable();
            assert!(spec.rules.uplink_tags.iter().all(|t| t.watch == [None; 2]));
            w
        };
        // URR 1 on every PDR: the session's line; 2 and 3 on the voice
        // PDR only: a line each, which its rule charges.
        assert_eq!(
            groups(&r, [&[1], &[1], &[1, 2, 3]]),
            [(2, [None; 2]), (3, [Some(2), Some(3)])]
        );
        // One more on the voice PDR: none of the three fits.
        assert_eq!(
            groups(&r, [&[1], &[1], &[1, 2, 3, 4]]),
            [(2, [None; 2]), (3, [None; 2])]
        );
        // URR 2 also on the uplink PDR, a way without rules: scanned;
        // URR 3 on the default PDR only still gets its line.
        assert_eq!(
            groups(&r, [&[1, 2], &[1, 3], &[1, 2]]),
            [(2, [Some(3), None]), (3, [None; 2])]
        );
    }

    #[test]
    fn scans_run_every_interval_while_a_session_is_watched() {
        let (mut node, mut up) = watched(3);
        assert_eq!(node.usage_watched(), 3);
        let t0 = Instant::now();
        let mut scan = UsageScan::new(t0);
        assert_eq!(scan.deadline(&node), Some(t0 + MIN_INTERVAL));
        scan.run(t0, &mut node, &mut up);
        assert_eq!(scan.deadline(&node), Some(t0 + MIN_INTERVAL), "not due");
        let t1 = t0 + MIN_INTERVAL;
        scan.run(t1, &mut node, &mut up);
        let next = scan.deadline(&node).unwrap();
        assert!(next >= t1 + MIN_INTERVAL && next <= t1 + MAX_INTERVAL);
        // No watched session: no deadline.
        let mut idle = Node::new(Config::new(NodeId::V4(N3), 1, None, None));
        assert_eq!(scan.deadline(&idle), None);
        scan.run(t1, &mut idle, &mut up);
        assert_eq!(scan.deadline(&idle), None);
    }

    /// What a scan costs the N4 thread per watched session (the node's
    /// check and the dataplane's counters of 2 workers), at `n` sessions:
    /// `cargo test -p tep --release --bin tep scan_cost -- --ignored --nocapture`.
    #[test]
    #[ignore = "a measurement"]
    fn scan_cost() {
        for n in [1_000, 100_000] {
            let (mut node, mut up) = watched(n);
            assert_eq!(node.usage_watched(), n as usize);
            let mut best = Duration::MAX;
            for _ in 0..5 {
                let t = Instant::now();
                node.scan_usage(Instant::now(), &mut up);
                best = best.min(t.elapsed());
            }
            println!(
                "{n} watched sessions: a scan takes {:.2} ms, {:.0} ns per session",
                best.as_secs_f64() * 1e3,
                best.as_nanos() as f64 / f64::from(n)
            );
        }
    }
}
