//! Usage reporting in the daemon: the N4 thread's usage scan, and what a
//! used-up quota does to a session's packets.
//!
//! The workers count each session's packets and bytes into counters the
//! N4 thread reads without stopping them ([`super::upf::UpfPlane`]). The
//! scan hands what each watched URR counted since the last scan to
//! tep-pfcp's node ([`Node::scan_usage`]), which reports the triggers
//! that fired (volume and time thresholds and quotas, periodic, start and
//! stop of traffic) in Session Report Requests.
//!
//! How often: every [`MIN_INTERVAL`] while any session is watched, and
//! never more than a tenth of the thread's time (a scan that took `c`
//! waits `10 c` before the next one: at a million watched sessions the
//! scans space out rather than starve the N4 socket). A threshold is
//! seen at the first scan after it is crossed, so a report's volume
//! overshoots the threshold by what the session sent in one interval: at
//! most one packet while the session sends less than one packet per
//! interval (1500 bytes per 5 ms: 2.4 Mbit/s), rate × interval above
//! that (1 Gbit/s: 625 kB). Likewise a quota: packets pass for up to one
//! interval after it is used up. Periodic reports are due on their period
//! and leave at the first scan after: late by at most one interval.

use std::time::{Duration, Instant};

use tep_dataplane::session::control::SessionSpec;
use tep_dataplane::session::Action;
use tep_pfcp::node::{Node, Rules, UserPlane};

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

/// A session one of whose URRs used up its quota forwards nothing either
/// way, counted apart from other drops (`quota_exhausted`), until the SMF
/// grants a new quota (TS 29.244 §5.2.2.2.1: without a FAR ID for Quota
/// Action, which tep refuses, the packets are dropped). Its usage is
/// counted per session, so a URR's quota is the session's.
pub fn stop_if_exhausted(rules: &Rules, spec: &mut SessionSpec) {
    if rules.quota_exhausted() {
        spec.uplink = Action::QuotaExhausted;
        spec.downlink = Action::QuotaExhausted;
    }
}
