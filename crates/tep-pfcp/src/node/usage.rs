//! Usage reporting (TS 29.244 §5.2.2): what each URR measured since its
//! last report, and which of its triggers are due.
//!
//! The user plane counts packets and bytes; the node takes them
//! ([`super::UserPlane::take_usage`]) when a report is asked for (Query
//! URR, removal, deletion) and, for URRs with triggers, on every usage
//! scan the daemon runs ([`super::Node::scan_usage`]). A scan hands each
//! watched URR what was counted since the last one ([`Urr::observe`]):
//! it adds it to the measurement, follows whether traffic flows, and
//! says which triggers fired. Time is what the caller passes (`now`): no
//! clock is read here, so that the tests can step it.
//!
//! - Volume: packets and octets each way since the last report; the
//!   volume quota's use since the quota was set.
//! - Duration: the time traffic flowed, at the scans' granularity: from
//!   the scan that saw the first packet after none to the scan that saw
//!   none for the Inactivity Detection Time (or the node's default); time
//!   quota use likewise, since the quota was set.
//! - Triggers: VOLTH, TIMTH (the measurement since the last report
//!   reached the threshold; any report restarts it), VOLQU, TIMQU (the
//!   quota is used up: the URR is `exhausted`, and the user plane stops
//!   the session's traffic until the SMF grants a new quota), PERIO (every
//!   Measurement Period from the URR's creation), START (a packet after
//!   none), STOPT (none for the inactivity time). START and STOPT are
//!   events: their reports carry no measurement and restart nothing.

use std::time::{Duration, Instant};

use crate::rules::UsageReport;
use crate::types::*;

use super::session::Urr;
use super::Usage;

/// Which reporting triggers tep acts on; the others are refused.
pub const APPLIED_TRIGGERS: u64 = ReportingTriggers::PERIO
    | ReportingTriggers::VOLTH
    | ReportingTriggers::TIMTH
    | ReportingTriggers::START
    | ReportingTriggers::STOPT
    | ReportingTriggers::VOLQU
    | ReportingTriggers::TIMQU;

/// A URR's running measurement (kept in [`Urr`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Meter {
    /// The UR-SEQN of the next report.
    next_seqn: u32,
    /// When the measurement the next report covers began (its Start
    /// Time, NTP seconds): the URR's creation, then the last report.
    /// `None` until the request that creates it is accepted.
    measured_since: Option<u32>,
    /// Counted since the last report.
    counted: Usage,
    /// Traffic time since the last report.
    duration: Duration,
    /// Octets against the volume quota, since it was set.
    quota_volume: Usage,
    /// Traffic time against the time quota, since it was set.
    quota_time: Duration,
    /// Up to when durations were added.
    clock: Option<Instant>,
    /// The last scan that saw a packet.
    last_packet: Option<Instant>,
    /// Traffic flows (a packet seen, and none missing for the inactivity
    /// time since).
    active: bool,
    /// When the next periodic report is due.
    next_period: Option<Instant>,
    /// A quota is used up.
    exhausted: bool,
}

/// What is left of a URR's volume threshold and quota by what its meter
/// holds (total, uplink, downlink; None: no such limit; a quota used up:
/// 0), for the user plane to check packet by packet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VolumeLeft {
    /// Before the threshold (only with the VOLTH trigger).
    pub threshold: [Option<u64>; 3],
    /// Of the quota.
    pub quota: [Option<u64>; 3],
}

/// What is left of each volume `v` gives after `u`.
fn left(v: &VolumeThreshold, u: &Usage) -> [Option<u64>; 3] {
    let total = u.uplink_bytes + u.downlink_bytes;
    [
        v.total.map(|t| t.saturating_sub(total)),
        v.uplink.map(|t| t.saturating_sub(u.uplink_bytes)),
        v.downlink.map(|t| t.saturating_sub(u.downlink_bytes)),
    ]
}

/// What one scan of a URR found due.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Due {
    /// Usage Report Trigger bits of a usage report (the measurement, which
    /// then restarts); 0: none.
    pub report: u64,
    /// START and/or STOPT: event reports.
    pub events: u64,
    /// A quota was used up at this scan: the traffic of the PDRs under it stops.
    pub exhausted: bool,
}

fn secs(s: u32) -> Duration {
    Duration::from_secs(u64::from(s))
}

fn add(a: &mut Usage, b: Usage) {
    a.uplink_bytes += b.uplink_bytes;
    a.downlink_bytes += b.downlink_bytes;
    a.uplink_packets += b.uplink_packets;
    a.downlink_packets += b.downlink_packets;
}

/// Whether `u` reached any of the volumes `v` gives.
fn reached(u: &Usage, v: &VolumeThreshold) -> bool {
    let total = u.uplink_bytes + u.downlink_bytes;
    v.total.is_some_and(|t| total >= t)
        || v.uplink.is_some_and(|t| u.uplink_bytes >= t)
        || v.downlink.is_some_and(|t| u.downlink_bytes >= t)
}

impl Urr {
    /// Whether scans must watch this URR: it has a trigger, a quota or
    /// measures duration (which follows the traffic).
    pub fn watched(&self) -> bool {
        self.reporting_triggers.0.bits & APPLIED_TRIGGERS != 0
            || self.duration
            || self.volume_quota.is_some()
            || self.time_quota.is_some()
    }

    /// What is left of its volume threshold and quota, as far as its
    /// meter counted.
    pub fn volume_left(&self) -> VolumeLeft {
        let m = &self.meter;
        let mut out = VolumeLeft::default();
        if self.reporting_triggers.has(ReportingTriggers::VOLTH) {
            if let Some(v) = &self.volume_threshold {
                out.threshold = left(v, &m.counted);
            }
        }
        if let Some(q) = &self.volume_quota {
            out.quota = left(&q.0, &m.quota_volume);
            if m.exhausted {
                // Nothing left (the meter may fall short by the packet
                // that did not fit): the user plane keeps dropping until
                // the session's rules stop it, and after.
                out.quota = out.quota.map(|l| l.map(|_| 0));
            }
        }
        out
    }

    /// The user plane dropped a packet that would have gone beyond the
    /// volume quota (it passes none that does not fit): the quota is used
    /// up although the meter falls short of it by less than that packet.
    /// Whether it was not already; the VOLQU report is due if asked for.
    pub(crate) fn exhaust_volume(&mut self) -> Due {
        let mut due = Due::default();
        if self.meter.exhausted || self.volume_quota.is_none() {
            return due;
        }
        self.meter.exhausted = true;
        due.exhausted = true;
        if self.reporting_triggers.has(ReportingTriggers::VOLQU) {
            due.report = UsageReportTrigger::VOLQU;
        }
        due
    }

    /// Whether a quota of the URR is used up (its session forwards
    /// nothing until the SMF grants more).
    pub fn exhausted(&self) -> bool {
        self.meter.exhausted
    }

    /// Starts measuring at `at` (NTP seconds) and `now`, if it is not
    /// already: a URR created or whose period changed.
    pub(crate) fn start(&mut self, at: u32, now: Instant) {
        let m = &mut self.meter;
        m.measured_since.get_or_insert(at);
        m.clock.get_or_insert(now);
        if let (Some(p), None) = (self.measurement_period, m.next_period) {
            m.next_period = Some(now + secs(p));
        }
    }

    /// A new volume quota: counted afresh, and traffic may flow again.
    pub(crate) fn new_volume_quota(&mut self) {
        self.meter.quota_volume = Usage::default();
        self.meter.exhausted = false;
    }

    /// A new time quota.
    pub(crate) fn new_time_quota(&mut self) {
        self.meter.quota_time = Duration::ZERO;
        self.meter.exhausted = false;
    }

    /// A new Measurement Period: the next report one period from when the
    /// change is accepted.
    pub(crate) fn new_period(&mut self) {
        self.meter.next_period = None;
    }

    /// Adds the traffic time up to `now`.
    fn advance(&mut self, now: Instant) {
        let m = &mut self.meter;
        let since = m.clock.unwrap_or(now);
        if m.active {
            let d = now.saturating_duration_since(since);
            m.duration += d;
            m.quota_time += d;
        }
        m.clock = Some(now.max(since));
    }

    /// One scan at `now`: `u` was counted since the last; `idle` is how
    /// long without a packet stops the traffic where the URR names no
    /// Inactivity Detection Time.
    pub(crate) fn observe(&mut self, now: Instant, u: Usage, idle: Duration) -> Due {
        self.advance(now);
        let idle = self.inactivity.map_or(idle, secs);
        let t = self.reporting_triggers;
        let m = &mut self.meter;
        add(&mut m.counted, u);
        add(&mut m.quota_volume, u);
        let mut due = Due::default();
        if u.uplink_packets + u.downlink_packets > 0 {
            m.last_packet = Some(now);
            if !m.active {
                m.active = true;
                due.events |= UsageReportTrigger::START;
            }
        } else if m.active
            && m.last_packet
                .is_some_and(|p| now.saturating_duration_since(p) >= idle)
        {
            m.active = false;
            due.events |= UsageReportTrigger::STOPT;
        }
        due.events &= t.0.bits & (ReportingTriggers::START | ReportingTriggers::STOPT);
        let mut fire = |on: bool, trigger: u64, report: u64| {
            if on && t.has(trigger) {
                due.report |= report;
            }
        };
        fire(
            self.volume_threshold
                .is_some_and(|v| reached(&m.counted, &v)),
            ReportingTriggers::VOLTH,
            UsageReportTrigger::VOLTH,
        );
        fire(
            self.time_threshold.is_some_and(|s| m.duration >= secs(s)),
            ReportingTriggers::TIMTH,
            UsageReportTrigger::TIMTH,
        );
        let volume_out = self
            .volume_quota
            .is_some_and(|q| reached(&m.quota_volume, &q.0));
        let time_out = self.time_quota.is_some_and(|s| m.quota_time >= secs(s));
        if !m.exhausted && (volume_out || time_out) {
            m.exhausted = true;
            due.exhausted = true;
            fire(
                volume_out,
                ReportingTriggers::VOLQU,
                UsageReportTrigger::VOLQU,
            );
            fire(
                time_out,
                ReportingTriggers::TIMQU,
                UsageReportTrigger::TIMQU,
            );
        }
        if let (Some(next), Some(p)) = (m.next_period, self.measurement_period) {
            if next <= now {
                fire(true, ReportingTriggers::PERIO, UsageReportTrigger::PERIO);
                // The next one a period after this one was due (not after
                // the scan that saw it): no drift; periods missed (a
                // stalled thread) are skipped.
                let mut n = next + secs(p);
                while n <= now {
                    n += secs(p);
                }
                m.next_period = Some(n);
            }
        }
        due
    }

    /// The usage report for the measurement from the last report (or the
    /// URR's creation) to `at` (NTP seconds) and `now`, with `u` counted
    /// since the last take; the measurement restarts.
    pub(crate) fn report(&mut self, u: Usage, trigger: u64, at: u32, now: Instant) -> UsageReport {
        self.advance(now);
        let (volume, duration) = (self.volume, self.duration);
        let m = &mut self.meter;
        add(&mut m.counted, u);
        add(&mut m.quota_volume, u);
        let c = core::mem::take(&mut m.counted);
        let whole = m.duration.as_secs();
        // The fraction of a second not reported goes to the next report.
        m.duration -= Duration::from_secs(whole);
        // A URR created by the request that queries it has measured
        // nothing before `at`.
        let since = m.measured_since.replace(at).unwrap_or(at);
        UsageReport {
            urr_id: UrrId(self.id),
            ur_seqn: UrSeqn(self.next_seqn()),
            trigger: UsageReportTrigger::new(trigger),
            start_time: Some(StartTime(since)),
            end_time: Some(EndTime(at)),
            volume: volume.then_some(VolumeMeasurement {
                total: Some(c.uplink_bytes + c.downlink_bytes),
                uplink: Some(c.uplink_bytes),
                downlink: Some(c.downlink_bytes),
                total_packets: Some(c.uplink_packets + c.downlink_packets),
                uplink_packets: Some(c.uplink_packets),
                downlink_packets: Some(c.downlink_packets),
            }),
            duration: duration.then_some(DurationMeasurement(whole.min(u32::MAX as u64) as u32)),
        }
    }

    /// The report of a start or stop of traffic (`trigger`): no
    /// measurement (Start Time and End Time are not required for them,
    /// Table 7.5.8.3-1), and the measurement goes on.
    pub(crate) fn event(&mut self, trigger: u64) -> UsageReport {
        UsageReport {
            urr_id: UrrId(self.id),
            ur_seqn: UrSeqn(self.next_seqn()),
            trigger: UsageReportTrigger::new(trigger),
            ..Default::default()
        }
    }

    fn next_seqn(&mut self) -> u32 {
        let s = self.meter.next_seqn;
        self.meter.next_seqn = s.wrapping_add(1);
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::CreateUrr;

    const IDLE: Duration = Duration::from_secs(5);

    fn urr(triggers: u64, f: impl FnOnce(&mut CreateUrr)) -> Urr {
        let mut c = CreateUrr {
            urr_id: UrrId(1),
            measurement_method: MeasurementMethod(
                MeasurementMethod::VOLUM | MeasurementMethod::DURAT,
            ),
            reporting_triggers: ReportingTriggers(Bitmap::new(triggers, 2)),
            ..Default::default()
        };
        f(&mut c);
        let mut r = super::super::Rules::default();
        super::super::session::create_urr(&mut r, &c, true).unwrap();
        r.urrs[0]
    }

    fn bytes(ul: u64, dl: u64) -> Usage {
        Usage {
            uplink_bytes: ul,
            downlink_bytes: dl,
            uplink_packets: u64::from(ul > 0),
            downlink_packets: u64::from(dl > 0),
        }
    }

    fn ms(t0: Instant, n: u64) -> Instant {
        t0 + Duration::from_millis(n)
    }

    #[test]
    fn a_volume_threshold_fires_when_reached_and_restarts_with_the_report() {
        let mut u = urr(ReportingTriggers::VOLTH, |c| {
            c.volume_threshold = Some(VolumeThreshold {
                total: Some(3000),
                ..Default::default()
            })
        });
        let t0 = Instant::now();
        u.start(100, t0);
        assert_eq!(u.observe(ms(t0, 10), bytes(1000, 1000), IDLE).report, 0);
        let due = u.observe(ms(t0, 20), bytes(1000, 0), IDLE);
        assert_eq!(due.report, UsageReportTrigger::VOLTH);
        let r = u.report(Usage::default(), due.report, 101, ms(t0, 20));
        assert_eq!(r.volume.unwrap().total, Some(3000));
        assert_eq!(
            (r.start_time, r.end_time),
            (Some(StartTime(100)), Some(EndTime(101)))
        );
        // Counted afresh: 2999 more is not yet the threshold.
        assert_eq!(u.observe(ms(t0, 30), bytes(2999, 0), IDLE).report, 0);
        // A direction's threshold alone.
        let mut d = urr(ReportingTriggers::VOLTH, |c| {
            c.volume_threshold = Some(VolumeThreshold {
                downlink: Some(500),
                ..Default::default()
            })
        });
        d.start(100, t0);
        assert_eq!(d.observe(ms(t0, 10), bytes(900, 0), IDLE).report, 0);
        assert_eq!(
            d.observe(ms(t0, 20), bytes(0, 500), IDLE).report,
            UsageReportTrigger::VOLTH
        );
    }

    #[test]
    fn a_volume_quota_is_exhausted_once_until_a_new_one() {
        let mut u = urr(ReportingTriggers::VOLQU, |c| {
            c.volume_quota = Some(VolumeQuota(VolumeThreshold {
                total: Some(2000),
                ..Default::default()
            }))
        });
        let t0 = Instant::now();
        u.start(100, t0);
        assert!(!u.observe(ms(t0, 10), bytes(1500, 0), IDLE).exhausted);
        // A report in between does not restart the quota.
        u.report(Usage::default(), UsageReportTrigger::IMMER, 100, ms(t0, 15));
        let due = u.observe(ms(t0, 20), bytes(600, 0), IDLE);
        assert!(due.exhausted && u.exhausted());
        assert_eq!(due.report, UsageReportTrigger::VOLQU);
        // Reported once.
        assert_eq!(u.observe(ms(t0, 30), bytes(100, 0), IDLE), Due::default());
        u.new_volume_quota();
        assert!(!u.exhausted());
        assert!(!u.observe(ms(t0, 40), bytes(1999, 0), IDLE).exhausted);
    }

    #[test]
    fn what_is_left_follows_the_meter_and_a_dropped_packet_exhausts_the_quota() {
        let mut u = urr(ReportingTriggers::VOLTH | ReportingTriggers::VOLQU, |c| {
            c.volume_threshold = Some(VolumeThreshold {
                total: Some(3000),
                ..Default::default()
            });
            c.volume_quota = Some(VolumeQuota(VolumeThreshold {
                uplink: Some(5000),
                ..Default::default()
            }));
        });
        let t0 = Instant::now();
        u.start(100, t0);
        u.observe(ms(t0, 10), bytes(1000, 500), IDLE);
        let l = u.volume_left();
        assert_eq!(l.threshold, [Some(1500), None, None]);
        assert_eq!(l.quota, [None, Some(4000), None]);
        // A report restarts the threshold, not the quota.
        u.report(Usage::default(), UsageReportTrigger::VOLTH, 101, ms(t0, 20));
        assert_eq!(u.volume_left().threshold, [Some(3000), None, None]);
        assert_eq!(u.volume_left().quota, [None, Some(4000), None]);
        let due = u.exhaust_volume();
        assert!(due.exhausted && u.exhausted());
        assert_eq!(due.report, UsageReportTrigger::VOLQU);
        assert_eq!(u.volume_left().quota, [None, Some(0), None], "nothing left");
        assert_eq!(u.exhaust_volume(), Due::default(), "once");
        u.new_volume_quota();
        assert_eq!(u.volume_left().quota, [None, Some(5000), None]);
    }

    #[test]
    fn time_is_measured_while_traffic_flows() {
        let mut u = urr(ReportingTriggers::TIMTH | ReportingTriggers::TIMQU, |c| {
            c.time_threshold = Some(TimeThreshold(2));
            c.time_quota = Some(TimeQuota(5));
            c.inactivity_detection_time = Some(InactivityDetectionTime(3));
        });
        let t0 = Instant::now();
        u.start(100, t0);
        // No traffic for 10 s: no time.
        assert_eq!(u.observe(ms(t0, 10_000), Usage::default(), IDLE).report, 0);
        assert_eq!(u.observe(ms(t0, 10_100), bytes(1, 0), IDLE).report, 0);
        assert_eq!(u.observe(ms(t0, 11_100), bytes(1, 0), IDLE).report, 0);
        let due = u.observe(ms(t0, 12_100), bytes(1, 0), IDLE);
        assert_eq!(due.report, UsageReportTrigger::TIMTH);
        let r = u.report(Usage::default(), due.report, 102, ms(t0, 12_100));
        assert_eq!(r.duration, Some(DurationMeasurement(2)));
        // The traffic goes quiet: 3 s of inactivity are still counted,
        // which makes 2 + 3 = 5 s of the quota (and 3 s past the
        // threshold); then the clock stops.
        let due = u.observe(ms(t0, 15_100), Usage::default(), IDLE);
        assert!(due.exhausted && u.exhausted());
        assert_eq!(
            due.report,
            UsageReportTrigger::TIMTH | UsageReportTrigger::TIMQU
        );
        let r = u.report(
            Usage::default(),
            UsageReportTrigger::IMMER,
            110,
            ms(t0, 30_000),
        );
        assert_eq!(r.duration, Some(DurationMeasurement(3)));
        assert_eq!(
            u.observe(ms(t0, 30_100), Usage::default(), IDLE),
            Due::default()
        );
    }

    #[test]
    fn periodic_reports_keep_their_period() {
        let mut u = urr(ReportingTriggers::PERIO, |c| {
            c.measurement_period = Some(MeasurementPeriod(2))
        });
        let t0 = Instant::now();
        u.start(100, t0);
        assert_eq!(u.observe(ms(t0, 1990), Usage::default(), IDLE).report, 0);
        assert_eq!(
            u.observe(ms(t0, 2010), Usage::default(), IDLE).report,
            UsageReportTrigger::PERIO
        );
        assert_eq!(u.observe(ms(t0, 2020), Usage::default(), IDLE).report, 0);
        // Due at 4 s, not 2.01 + 2.
        assert_eq!(
            u.observe(ms(t0, 4000), Usage::default(), IDLE).report,
            UsageReportTrigger::PERIO
        );
        // A stall past two periods reports once.
        assert_eq!(
            u.observe(ms(t0, 9000), Usage::default(), IDLE).report,
            UsageReportTrigger::PERIO
        );
        assert_eq!(u.observe(ms(t0, 9500), Usage::default(), IDLE).report, 0);
        assert_eq!(
            u.observe(ms(t0, 10_000), Usage::default(), IDLE).report,
            UsageReportTrigger::PERIO
        );
    }

    #[test]
    fn start_and_stop_of_traffic_are_events() {
        let mut u = urr(ReportingTriggers::START | ReportingTriggers::STOPT, |_| {});
        let t0 = Instant::now();
        u.start(100, t0);
        assert_eq!(u.observe(ms(t0, 10), Usage::default(), IDLE).events, 0);
        let due = u.observe(ms(t0, 20), bytes(100, 0), IDLE);
        assert_eq!((due.events, due.report), (UsageReportTrigger::START, 0));
        assert_eq!(u.observe(ms(t0, 30), bytes(100, 0), IDLE).events, 0);
        assert_eq!(u.observe(ms(t0, 5020), Usage::default(), IDLE).events, 0);
        assert_eq!(
            u.observe(ms(t0, 5030), Usage::default(), IDLE).events,
            UsageReportTrigger::STOPT
        );
        let e = u.event(UsageReportTrigger::STOPT);
        assert_eq!((e.ur_seqn, e.start_time, e.volume), (UrSeqn(0), None, None));
        // The measurement went on through the event.
        let r = u.report(
            Usage::default(),
            UsageReportTrigger::IMMER,
            101,
            ms(t0, 6000),
        );
        assert_eq!(r.ur_seqn, UrSeqn(1));
        assert_eq!(r.volume.unwrap().uplink, Some(200));
        assert_eq!(
            u.observe(ms(t0, 6010), bytes(1, 0), IDLE).events,
            UsageReportTrigger::START
        );
    }

    #[test]
    fn without_a_trigger_nothing_fires_but_a_quota_still_stops() {
        let mut u = urr(0, |c| {
            c.volume_quota = Some(VolumeQuota(VolumeThreshold {
                uplink: Some(10),
                ..Default::default()
            }))
        });
        assert!(u.watched());
        let t0 = Instant::now();
        u.start(100, t0);
        let due = u.observe(ms(t0, 10), bytes(10, 0), IDLE);
        assert_eq!((due.report, due.events, due.exhausted), (0, 0, true));
        let plain = urr(0, |c| {
            c.measurement_method = MeasurementMethod(MeasurementMethod::VOLUM)
        });
        assert!(!plain.watched());
    }
}
