//! The node's reports of GTP-U paths (TS 29.244 §5.12): a peer that stopped
//! answering Echo Requests or answers again (Node Report Request), and an
//! Error Indication a peer sent for a session's F-TEID (Session Report
//! Request with an Error Indication Report). Who watches the paths is the
//! daemon's business; the node only tells the SMFs, T1/N1 as for every
//! request of its own.

use super::{header, Counter, Node, Purpose, Seid};
use crate::message::{Message, NodeReportRequest, SessionReportRequest};
use crate::report::*;
use crate::types::{FTeid, ReportType};
use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

impl Node {
    /// The GTP-U paths to `peers` failed (`recovered` false: N3-REQUESTS
    /// Echo Requests unanswered) or answer again: a Node Report Request
    /// (UPFR or UPRR) to every associated SMF. Every one, not only those
    /// with a session on the peer now: a path is the node's, not a
    /// session's, and the recovery must reach the SMF that heard of the
    /// failure even after it released the sessions that used the path.
    pub fn path_report(&mut self, now: Instant, peers: &[IpAddr], recovered: bool) {
        if peers.is_empty() {
            return;
        }
        let remote_gtp_u_peers: Vec<RemoteGtpuPeer> =
            peers.iter().map(|&a| RemoteGtpuPeer::of(a)).collect();
        let mut m = NodeReportRequest {
            node_id: self.config.node_id.clone(),
            ..Default::default()
        };
        if recovered {
            m.node_report_type = NodeReportType(NodeReportType::UPRR);
            m.user_plane_path_recovery_report =
                Some(UserPlanePathRecoveryReport { remote_gtp_u_peers });
        } else {
            m.node_report_type = NodeReportType(NodeReportType::UPFR);
            m.user_plane_path_failure_report =
                Some(UserPlanePathFailureReport { remote_gtp_u_peers });
        }
        let smfs: Vec<IpAddr> = self.associations.iter().map(|a| a.addr).collect();
        for addr in smfs {
            self.send_request(
                now,
                SocketAddr::new(addr, header::PORT),
                None,
                Message::NodeReportRequest(m.clone()),
                Purpose::NodeReport,
            );
            self.count(Counter::NodeReportsSent);
        }
    }

    /// The peer at `peer` sent an Error Indication for `teid`, the TEID
    /// session `seid`'s downlink sends it (TS 29.281 §7.3.1): a Session
    /// Report Request with an Error Indication Report naming that F-TEID
    /// to the SMF that owns the session, which decides what becomes of it.
    /// Not while an earlier report of the session awaits its answer (a
    /// peer that repeats itself adds nothing); whether it was sent.
    pub fn error_indication(&mut self, now: Instant, seid: Seid, peer: IpAddr, teid: u32) -> bool {
        let pending = self
            .outstanding
            .values()
            .any(|o| matches!(o.purpose, Purpose::Report { seid: s } if s == seid));
        let Some(s) = self.get(seid).filter(|_| !pending) else {
            self.count(Counter::ErrorIndicationSuppressed);
            return false;
        };
        let cp = (s.cp_seid, s.cp_addr);
        let (v4, v6) = match peer {
            IpAddr::V4(a) => (Some(a), None),
            IpAddr::V6(a) => (None, Some(a)),
        };
        let m = SessionReportRequest {
            report_type: ReportType(ReportType::ERIR),
            error_indication_report: Some(ErrorIndicationReport {
                remote_f_teids: vec![FTeid::Assigned { teid, v4, v6 }],
            }),
            ..Default::default()
        };
        self.send_report(now, seid, cp, m);
        self.count(Counter::ErrorIndicationReports);
        true
    }
}
