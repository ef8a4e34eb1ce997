//! Node Reports of GTP-U paths and Error Indication Reports
//! ([`super::super::path`]).

use super::*;
use crate::report::*;

fn answer(h: &mut Harness, seid: Option<u64>, seq: u32, m: Message) -> Vec<Transmit> {
    let b = PfcpRepr {
        seid,
        sequence: seq,
        priority: None,
        message: m,
    }
    .to_bytes();
    h.raw(&b)
}

#[test]
fn a_failed_path_and_its_recovery_go_to_every_smf_until_answered() {
    let mut h = Harness::new();
    // No association: nobody to tell.
    h.node.path_report(h.now, &[IpAddr::V4(GNB)], false);
    assert!(h.node.poll_transmit().is_none());
    h.associate();
    h.node
        .path_report(h.now, &[IpAddr::V4(GNB), IpAddr::V4(GNB2)], false);
    let t = h.node.poll_transmit().unwrap();
    assert!(h.node.poll_transmit().is_none());
    assert_eq!(t.destination, "192.0.2.10:8805".parse().unwrap());
    let r = PfcpRepr::parse_bytes(&t.payload).unwrap();
    assert_eq!(r.seid, None);
    let Message::NodeReportRequest(m) = &r.message else {
        panic!("{r:?}")
    };
    assert_eq!(m.node_id, NodeId::V4(N3));
    assert_eq!(m.node_report_type, NodeReportType(NodeReportType::UPFR));
    let f = m.user_plane_path_failure_report.as_ref().unwrap();
    assert_eq!(
        f.remote_gtp_u_peers,
        [
            RemoteGtpuPeer::of(IpAddr::V4(GNB)),
            RemoteGtpuPeer::of(IpAddr::V4(GNB2))
        ]
    );
    assert!(m.user_plane_path_recovery_report.is_none());
    assert_eq!(h.node.counter(Counter::NodeReportsSent), 1);
    // Resent after T1, then answered: no more.
    h.now += Duration::from_secs(3);
    h.node.handle_timeout(h.now, &mut h.up);
    assert_eq!(h.node.poll_transmit().unwrap().payload, t.payload);
    let ok = Message::NodeReportResponse(NodeReportResponse {
        node_id: NodeId::fqdn("smf.test").unwrap(),
        cause: Cause::REQUEST_ACCEPTED,
        offending_ie: None,
    });
    assert!(answer(&mut h, None, r.sequence, ok.clone()).is_empty());
    h.now += Duration::from_secs(30);
    h.node.handle_timeout(h.now, &mut h.up);
    assert!(h.node.poll_transmit().is_none());
    assert_eq!(h.node.counter(Counter::UnexpectedResponse), 0);
    // A second answer is unexpected.
    answer(&mut h, None, r.sequence, ok);
    assert_eq!(h.node.counter(Counter::UnexpectedResponse), 1);
    // The recovery.
    h.node.path_report(h.now, &[IpAddr::V4(GNB)], true);
    let r = PfcpRepr::parse_bytes(&h.node.poll_transmit().unwrap().payload).unwrap();
    let Message::NodeReportRequest(m) = &r.message else {
        panic!("{r:?}")
    };
    assert_eq!(m.node_report_type, NodeReportType(NodeReportType::UPRR));
    assert!(m.user_plane_path_failure_report.is_none());
    assert_eq!(
        m.user_plane_path_recovery_report
            .as_ref()
            .unwrap()
            .remote_gtp_u_peers,
        [RemoteGtpuPeer::of(IpAddr::V4(GNB))]
    );
    // Refused: counted as the SMF's rejection.
    let no = Message::NodeReportResponse(NodeReportResponse {
        node_id: NodeId::fqdn("smf.test").unwrap(),
        cause: Cause::REQUEST_REJECTED,
        offending_ie: None,
    });
    answer(&mut h, None, r.sequence, no);
    assert_eq!(h.node.counter(Counter::PeerRejected), 1);
}

#[test]
fn a_path_report_goes_to_each_smf_and_each_answer_counts_for_its_own() {
    let mut h = Harness::new();
    h.associate();
    let r = h.request_from(STRANGER, None, setup_request("smf2.test", 1));
    assert_eq!(setup_cause(&r), Cause::REQUEST_ACCEPTED);
    h.node.path_report(h.now, &[IpAddr::V4(GNB)], false);
    let sent: Vec<Transmit> = std::iter::from_fn(|| h.node.poll_transmit()).collect();
    let mut to: Vec<SocketAddr> = sent.iter().map(|t| t.destination).collect();
    to.sort();
    let want: [SocketAddr; 2] = [
        "192.0.2.10:8805".parse().unwrap(),
        "192.0.2.99:8805".parse().unwrap(),
    ];
    assert_eq!(to, want);
    assert_eq!(h.node.counter(Counter::NodeReportsSent), 2);
    // The first SMF answers the second's request: spoofed, still
    // outstanding; each answers its own.
    let seq_of = |t: &Transmit| PfcpRepr::parse_bytes(&t.payload).unwrap().sequence;
    let (mine, theirs) = match sent[0].destination.ip() == h.smf.ip() {
        true => (seq_of(&sent[0]), seq_of(&sent[1])),
        false => (seq_of(&sent[1]), seq_of(&sent[0])),
    };
    let ok = Message::NodeReportResponse(NodeReportResponse {
        node_id: NodeId::fqdn("smf.test").unwrap(),
        cause: Cause::REQUEST_ACCEPTED,
        offending_ie: None,
    });
    answer(&mut h, None, theirs, ok.clone());
    assert_eq!(h.node.counter(Counter::SpoofedResponse), 1);
    answer(&mut h, None, mine, ok.clone());
    let b = PfcpRepr {
        seid: None,
        sequence: theirs,
        priority: None,
        message: ok,
    }
    .to_bytes();
    h.raw_from(STRANGER, &b);
    h.now += Duration::from_secs(30);
    h.node.handle_timeout(h.now, &mut h.up);
    assert!(h.node.poll_transmit().is_none(), "both answered");
    assert_eq!(h.node.counter(Counter::Retransmitted), 0);
}

#[test]
fn an_error_indication_is_reported_to_the_sessions_smf_once_at_a_time() {
    let (mut h, seid) = established();
    let gnb = IpAddr::V4(GNB);
    assert!(h.node.error_indication(h.now, seid, gnb, 0x100));
    let t = h.node.poll_transmit().unwrap();
    assert_eq!(t.destination, "192.0.2.10:8805".parse().unwrap());
    let r = PfcpRepr::parse_bytes(&t.payload).unwrap();
    assert_eq!(r.seid, Some(7000), "the CP SEID");
    let Message::SessionReportRequest(m) = &r.message else {
        panic!("{r:?}")
    };
    assert_eq!(m.report_type, ReportType(ReportType::ERIR));
    assert_eq!(
        m.error_indication_report.as_ref().unwrap().remote_f_teids,
        [FTeid::Assigned {
            teid: 0x100,
            v4: Some(GNB),
            v6: None
        }]
    );
    assert!(m.downlink_data_report.is_none() && m.usage_reports.is_empty());
    // While it is unanswered, another is not sent.
    assert!(!h.node.error_indication(h.now, seid, gnb, 0x100));
    assert!(h.node.poll_transmit().is_none());
    let ok = Message::SessionReportResponse(SessionReportResponse {
        cause: Cause::REQUEST_ACCEPTED,
        offending_ie: None,
        update_bar: None,
        flags: None,
    });
    answer(&mut h, Some(seid), r.sequence, ok);
    assert!(h.node.error_indication(h.now, seid, gnb, 0x100));
    assert!(h.node.poll_transmit().is_some());
    // An unknown session: nothing.
    assert!(!h.node.error_indication(h.now, seid ^ 1, gnb, 0x100));
    assert!(h.node.poll_transmit().is_none());
    assert_eq!(h.node.counter(Counter::ErrorIndicationReports), 2);
    assert_eq!(h.node.counter(Counter::ErrorIndicationSuppressed), 2);
    assert_eq!(h.node.counter(Counter::ReportsSent), 2);
}
