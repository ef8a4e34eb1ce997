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
//! waits `10 c` before the next one: measured (`scan_cost`, release) 54–61
//! ns per watched session at 1,000 and 660–730 ns at 100,000, so 5 ms
//! holds to about 8,000 sessions and 100,000 are scanned every 0.7 s,
//! rather than starve the N4 socket). A threshold is
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
        // Every packet stops, whichever rule would have taken it.
        spec.rules = Default::default();
        spec.uplink = Action::QuotaExhausted;
        spec.downlink = Action::QuotaExhausted;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::upf::UpfPlane;
    use std::net::{IpAddr, Ipv4Addr, SocketAddr};
    use tep_dataplane::session::control::Sessions;
    use tep_pfcp::message::Message;
    use tep_pfcp::node::Config;
    use tep_pfcp::sample;
    use tep_pfcp::types::{Bitmap, NodeId, ReportingTriggers, VolumeThreshold};

    const N3: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
    const SMF: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 10);

    /// A node over the daemon's user plane with `n` sessions whose URR
    /// has a volume threshold (watched by every scan), on 2 workers.
    fn watched(n: u32) -> (Node, UpfPlane) {
        let (sessions, _links) = Sessions::new(n + 1, 2, vec![false]);
        let mut up = UpfPlane::new(sessions, vec![(IpAddr::V4(N3), 0)]);
        let mut c = Config::new(NodeId::V4(N3), 1, Some(N3), None);
        c.heartbeat_interval = None;
        c.usage_scans = true;
        let mut node = Node::new(c);
        let now = Instant::now();
        let smf = SocketAddr::new(SMF.into(), 8805);
        let setup = sample::association_setup(0, SMF, 1).to_bytes();
        node.handle(now, smf, &setup, &mut up);
        for i in 1..=n {
            let ue = Ipv4Addr::from(0x0a00_0000 + i);
            let gnb = Ipv4Addr::new(192, 0, 2, 9);
            let mut r = sample::pdu_session_establishment(i, u64::from(i), SMF, ue, gnb, i);
            if let Message::SessionEstablishmentRequest(m) = &mut r.message {
                let u = &mut m.create_urrs[0];
                u.reporting_triggers = ReportingTriggers(Bitmap::new(ReportingTriggers::VOLTH, 3));
                u.volume_threshold = Some(VolumeThreshold {
                    total: Some(1 << 40),
                    ..Default::default()
                });
            }
            node.handle(now, smf, &r.to_bytes(), &mut up);
        }
        while node.poll_transmit().is_some() {}
        (node, up)
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
