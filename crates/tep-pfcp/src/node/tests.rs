//! The node driven by byte-level requests (built with this crate's codec)
//! against a user plane that records what it is told: every message flow
//! and every Cause the node sends.

use super::*;
use crate::rules::*;
use crate::sample;

#[path = "bar_tests.rs"]
mod bar_tests;
#[path = "ie_table.rs"]
mod ie_table;
#[path = "path_tests.rs"]
mod path_tests;

const SMF: &str = "192.0.2.10:40000";
const N3: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 1);
const GNB: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 5);
const GNB2: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 6);
const SMF_RTS: u32 = 3_900_000_000;

#[derive(Debug, Clone, PartialEq)]
enum Seen {
    Install(Seid, Rules),
    Remove(Seid),
    EndMarker(Seid, u32, OuterHeader),
    DropBuffered(Seid),
}

#[derive(Debug, Default)]
struct FakeUp {
    seen: Vec<Seen>,
    usage: HashMap<(Seid, u32), Usage>,
    /// Installs are refused so.
    refuse: Option<Refused>,
}

impl UserPlane for FakeUp {
    fn apply(&mut self, change: Change<'_>) -> Result<(), Refused> {
        if let (Some(r), Change::Install { .. }) = (self.refuse, &change) {
            return Err(r);
        }
        self.seen.push(match change {
            Change::Install { seid, rules } => Seen::Install(seid, rules.clone()),
            Change::Remove { seid } => Seen::Remove(seid),
            Change::EndMarker { seid, far, old } => Seen::EndMarker(seid, far, old),
            Change::DropBuffered { seid } => Seen::DropBuffered(seid),
        });
        Ok(())
    }

    fn take_usage(&mut self, seid: Seid, urr: u32) -> Usage {
        self.usage.remove(&(seid, urr)).unwrap_or_default()
    }
}

struct Harness {
    node: Node,
    up: FakeUp,
    now: Instant,
    smf: SocketAddr,
    seq: u32,
}

impl Harness {
    fn new() -> Self {
        let mut c = Config::new(NodeId::V4(N3), 3_950_000_000, Some(N3), None);
        c.heartbeat_interval = None;
        // As the daemon runs it.
        c.usage_scans = true;
        Harness {
            node: Node::new(c),
            up: FakeUp::default(),
            now: Instant::now(),
            smf: SMF.parse().unwrap(),
            seq: 0,
        }
    }

    /// Sends raw bytes; returns every datagram the node queued.
    fn raw(&mut self, bytes: &[u8]) -> Vec<Transmit> {
        self.node.handle(self.now, self.smf, bytes, &mut self.up);
        std::iter::from_fn(|| self.node.poll_transmit()).collect()
    }

    fn bytes(&mut self, seid: Option<u64>, m: Message) -> Vec<u8> {
        self.seq += 1;
        PfcpRepr {
            seid,
            sequence: self.seq,
            priority: None,
            message: m,
        }
        .to_bytes()
    }

    /// Sends a request; returns the one response, parsed, checking that it
    /// goes back to the SMF with the request's sequence number.
    fn request(&mut self, seid: Option<u64>, m: Message) -> PfcpRepr {
        let b = self.bytes(seid, m);
        let out = self.raw(&b);
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0].destination, self.smf);
        let r = PfcpRepr::parse_bytes(&out[0].payload).unwrap();
        assert_eq!(r.sequence, self.seq);
        r
    }

    /// Associates as the SMF (accepted, as N3's node); the response.
    fn associate(&mut self) -> AssociationSetupResponse {
        let r = self.request(
            None,
            Message::AssociationSetupRequest(AssociationSetupRequest {
                node_id: NodeId::fqdn("smf.test").unwrap(),
                recovery_time_stamp: RecoveryTimeStamp(SMF_RTS),
                up_function_features: None,
            }),
        );
        let Message::AssociationSetupResponse(a) = r.message else {
            panic!("{r:?}")
        };
        assert_eq!(a.cause, Cause::REQUEST_ACCEPTED);
        assert_eq!(a.node_id, NodeId::V4(N3));
        assert_eq!(a.recovery_time_stamp, RecoveryTimeStamp(3_950_000_000));
        assert!(a
            .up_function_features
            .unwrap()
            .has(UpFunctionFeatures::FTUP));
        a
    }

    fn establish(&mut self, m: SessionEstablishmentRequest) -> SessionEstablishmentResponse {
        let r = self.request(Some(0), Message::SessionEstablishmentRequest(m));
        match r.message {
            Message::SessionEstablishmentResponse(e) => {
                assert_eq!(r.seid, Some(7000), "the CP SEID");
                e
            }
            m => panic!("{m:?}"),
        }
    }

    fn modify(
        &mut self,
        seid: Seid,
        m: SessionModificationRequest,
    ) -> (u64, SessionModificationResponse) {
        let r = self.request(Some(seid), Message::SessionModificationRequest(m));
        match r.message {
            Message::SessionModificationResponse(x) => (r.seid.unwrap(), x),
            m => panic!("{m:?}"),
        }
    }
}

fn cp_f_seid() -> FSeid {
    FSeid {
        seid: 7000,
        v4: Some(Ipv4Addr::new(192, 0, 2, 10)),
        v6: None,
    }
}

fn ue() -> Ipv4Addr {
    Ipv4Addr::new(10, 45, 0, 7)
}

/// An uplink PDR (CHOOSE, CHID 1, QFI 9) and a downlink PDR to the UE,
/// forwarding to N6 and to the gNB; QER 1 (QFI 9), URR 1 (volume).
fn est_request() -> SessionEstablishmentRequest {
    SessionEstablishmentRequest {
        node_id: NodeId::fqdn("smf.test").unwrap(),
        cp_f_seid: cp_f_seid(),
        create_pdrs: vec![sample::uplink_pdr(None), sample::downlink_pdr(ue(), None)],
        create_fars: vec![sample::far_to_core(None), sample::far_to_gnb(0x100, GNB)],
        create_urrs: vec![sample::volume_urr(
            ReportingTriggers(Bitmap::new(0, 2)),
            None,
        )],
        create_qers: vec![sample::qer(1, Some(9), None)],
        create_bars: vec![],
        skipped: Default::default(),
    }
}

fn up_seid(e: &SessionEstablishmentResponse) -> Seid {
    e.up_f_seid.expect("UP F-SEID").seid
}

fn established() -> (Harness, Seid) {
    let mut h = Harness::new();
    h.associate();
    let e = h.establish(est_request());
    assert_eq!(e.cause, Cause::REQUEST_ACCEPTED, "{e:?}");
    let seid = up_seid(&e);
    h.up.seen.clear();
    (h, seid)
}

fn rejected_establishment(
    h: &mut Harness,
    m: SessionEstablishmentRequest,
) -> SessionEstablishmentResponse {
    let before = h.node.session_count();
    let e = h.establish(m);
    assert!(!e.cause.is_acceptance(), "{e:?}");
    assert!(e.up_f_seid.is_none());
    assert_eq!(h.node.session_count(), before);
    e
}

#[test]
fn heartbeat_is_answered_with_our_recovery_time_stamp() {
    let mut h = Harness::new();
    let r = h.request(
        None,
        Message::HeartbeatRequest(HeartbeatRequest {
            recovery_time_stamp: RecoveryTimeStamp(1),
        }),
    );
    assert_eq!(
        r.message,
        Message::HeartbeatResponse(HeartbeatResponse {
            recovery_time_stamp: RecoveryTimeStamp(3_950_000_000)
        })
    );
    assert_eq!(h.node.counter(Counter::HeartbeatsAnswered), 1);
}

#[test]
fn establishment_chooses_f_teids_reports_them_and_installs_the_rules() {
    let mut h = Harness::new();
    h.associate();
    let mut m = est_request();
    // A third PDR sharing CHOOSE ID 1 (another QFI) shares the TEID.
    let mut p3 = m.create_pdrs[0].clone();
    p3.pdr_id = PdrId(3);
    p3.pdi.qfi = Some(Qfi(5));
    m.create_pdrs.push(p3);
    let e = h.establish(m);
    assert_eq!(e.cause, Cause::REQUEST_ACCEPTED);
    assert_eq!(e.node_id, NodeId::V4(N3));
    let f = e.up_f_seid.unwrap();
    assert_eq!(f.v4, Some(N3));
    // With an N4 address configured, the F-SEID carries it.
    let mut h4 = Harness::new();
    h4.node.config.n4 = Some("2001:db8::4".parse().unwrap());
    h4.associate();
    let f4 = h4.establish(est_request()).up_f_seid.unwrap();
    assert_eq!((f4.v4, f4.v6), (None, Some("2001:db8::4".parse().unwrap())));
    assert_eq!(e.created_pdrs.len(), 2);
    let FTeid::Assigned { teid, v4, v6 } = e.created_pdrs[0].local_f_teid.unwrap() else {
        panic!()
    };
    assert_eq!((v4, v6), (Some(N3), None));
    assert_ne!(teid, 0);
    assert_eq!(e.created_pdrs[0].pdr_id, PdrId(1));
    assert_eq!(e.created_pdrs[1].pdr_id, PdrId(3));
    assert_eq!(
        e.created_pdrs[1].local_f_teid,
        e.created_pdrs[0].local_f_teid
    );
    // The user plane got the resolved rules.
    let [Seen::Install(seid, rules)] = &h.up.seen[..] else {
        panic!("{:?}", h.up.seen)
    };
    assert_eq!(*seid, f.seid);
    let ul = rules.pdr(1).unwrap();
    assert_eq!(
        ul.local,
        Some(LocalFTeid {
            teid,
            v4: Some(N3),
            v6: None
        })
    );
    assert_eq!(ul.qfi, Some(9));
    assert!(ul.outer_header_removal.unwrap().is_gtpu());
    assert_eq!(
        rules.far(ul.far).unwrap().destination,
        Some(Interface::CORE)
    );
    let dl = rules.pdr(2).unwrap();
    assert_eq!(dl.ue_ip.unwrap().v4, Some(ue()));
    let far = rules.far(dl.far).unwrap();
    assert_eq!(far.action, Action::Forward);
    assert_eq!(far.outer.unwrap().teid, 0x100);
    assert_eq!(far.outer.unwrap().addr(), IpAddr::V4(GNB));
    assert_eq!(rules.qfi(dl), Some(9));
    assert_eq!(h.node.session(f.seid), Some(rules));
    assert_eq!(h.node.teids_in_use(), 1);
    // A second session gets another TEID and SEID.
    let e2 = h.establish(est_request());
    assert_ne!(up_seid(&e2), f.seid);
    assert_ne!(
        e2.created_pdrs[0].local_f_teid,
        e.created_pdrs[0].local_f_teid
    );
    assert_eq!(h.node.session_count(), 2);
    assert_eq!(h.node.counter(Counter::SessionsEstablished), 2);
}

#[test]
fn a_retransmitted_request_gets_the_same_response_and_is_not_applied_again() {
    let mut h = Harness::new();
    h.associate();
    let b = h.bytes(Some(0), Message::SessionEstablishmentRequest(est_request()));
    let first = h.raw(&b);
    let again = h.raw(&b);
    assert_eq!(first, again);
    assert_eq!(h.node.session_count(), 1);
    assert_eq!(h.up.seen.len(), 1);
    assert_eq!(h.node.counter(Counter::DuplicateRequest), 1);
    // The same sequence number from another port is another request.
    h.smf.set_port(40001);
    h.raw(&b);
    assert_eq!(h.node.session_count(), 2);
    // Past the cache's lifetime the entry is gone.
    h.now += Duration::from_secs(21);
    h.node.handle_timeout(h.now, &mut h.up);
    assert_eq!(h.node.cached_responses(), 0);
}

#[test]
fn establishment_without_an_association_is_refused() {
    let mut h = Harness::new();
    let e = rejected_establishment(&mut h, est_request());
    assert_eq!(e.cause, Cause::NO_ESTABLISHED_PFCP_ASSOCIATION);
    assert_eq!(h.node.counter(Counter::NoAssociation), 1);
    assert!(h.up.seen.is_empty());
    // Update and Release need one too.
    let r = h.request(
        None,
        Message::AssociationReleaseRequest(AssociationReleaseRequest {
            node_id: NodeId::V4(Ipv4Addr::LOCALHOST),
        }),
    );
    let Message::AssociationReleaseResponse(a) = r.message else {
        panic!()
    };
    assert_eq!(a.cause, Cause::NO_ESTABLISHED_PFCP_ASSOCIATION);
    let r = h.request(
        None,
        Message::AssociationUpdateRequest(AssociationUpdateRequest {
            node_id: NodeId::V4(Ipv4Addr::LOCALHOST),
            up_function_features: None,
        }),
    );
    let Message::AssociationUpdateResponse(a) = r.message else {
        panic!()
    };
    assert_eq!(a.cause, Cause::NO_ESTABLISHED_PFCP_ASSOCIATION);
    h.associate();
    let r = h.request(
        None,
        Message::AssociationUpdateRequest(AssociationUpdateRequest {
            node_id: NodeId::fqdn("smf.test").unwrap(),
            up_function_features: None,
        }),
    );
    let Message::AssociationUpdateResponse(a) = r.message else {
        panic!()
    };
    assert_eq!(a.cause, Cause::REQUEST_ACCEPTED);
}

#[test]
fn handover_with_sndem_installs_the_new_tunnel_then_sends_an_end_marker_to_the_old() {
    let (mut h, seid) = established();
    let (hdr_seid, r) = h.modify(
        seid,
        SessionModificationRequest {
            update_fars: vec![UpdateFar {
                far_id: FarId(2),
                apply_action: None,
                update_forwarding_parameters: Some(UpdateForwardingParameters {
                    outer_header_creation: Some(OuterHeaderCreation::gtpu(0x200, GNB2.into())),
                    transport_level_marking: None,
                    flags: Some(PfcpsmReqFlags(PfcpsmReqFlags::SNDEM)),
                    ..Default::default()
                }),
                bar_id: None,
                skipped: Default::default(),
            }],
            ..Default::default()
        },
    );
    assert_eq!(hdr_seid, 7000);
    assert_eq!(r.cause, Cause::REQUEST_ACCEPTED);
    let [Seen::Install(s1, rules), Seen::EndMarker(s2, 2, old)] = &h.up.seen[..] else {
        panic!("{:?}", h.up.seen)
    };
    assert_eq!((*s1, *s2), (seid, seid));
    assert_eq!(
        rules.far(2).unwrap().outer.unwrap().addr(),
        IpAddr::V4(GNB2)
    );
    assert_eq!((old.teid, old.addr()), (0x100, IpAddr::V4(GNB)));
    assert_eq!(h.node.counter(Counter::EndMarkers), 1);
    // Without SNDEM: no End Marker.
    h.up.seen.clear();
    h.modify(
        seid,
        SessionModificationRequest {
            update_fars: vec![UpdateFar {
                far_id: FarId(2),
                apply_action: None,
                update_forwarding_parameters: Some(UpdateForwardingParameters {
                    outer_header_creation: Some(OuterHeaderCreation::gtpu(0x300, GNB.into())),
                    transport_level_marking: None,
                    ..Default::default()
                }),
                bar_id: None,
                skipped: Default::default(),
            }],
            ..Default::default()
        },
    );
    assert_eq!(h.up.seen.len(), 1);
}

fn buffering(h: &mut Harness, seid: Seid) {
    let (_, r) = h.modify(
        seid,
        SessionModificationRequest {
            update_fars: vec![UpdateFar {
                far_id: FarId(2),
                apply_action: Some(ApplyAction::new(ApplyAction::BUFF | ApplyAction::NOCP)),
                update_forwarding_parameters: None,
                bar_id: None,
                skipped: Default::default(),
            }],
            ..Default::default()
        },
    );
    assert_eq!(r.cause, Cause::REQUEST_ACCEPTED);
}

#[test]
fn buffered_downlink_is_reported_once_retransmitted_and_answered() {
    let (mut h, seid) = established();
    // FORW: no report.
    h.node.downlink_data(h.now, seid, 2);
    assert!(h.node.poll_transmit().is_none());
    buffering(&mut h, seid);
    let Some(Seen::Install(_, rules)) = h.up.seen.last() else {
        panic!()
    };
    assert_eq!(
        rules.far(2).unwrap().action,
        Action::Buffer { notify_cp: true }
    );
    h.node.downlink_data(h.now, seid, 2);
    let t = h.node.poll_transmit().unwrap();
    assert_eq!(t.destination, "192.0.2.10:8805".parse().unwrap());
    let r = PfcpRepr::parse_bytes(&t.payload).unwrap();
    assert_eq!(r.seid, Some(7000));
    let Message::SessionReportRequest(sr) = &r.message else {
        panic!()
    };
    assert_eq!(sr.report_type, ReportType(ReportType::DLDR));
    assert_eq!(
        sr.downlink_data_report.as_ref().unwrap().pdr_ids,
        [PdrId(2)]
    );
    // Once until the session is modified.
    h.node.downlink_data(h.now, seid, 2);
    assert!(h.node.poll_transmit().is_none());
    assert_eq!(h.node.counter(Counter::DlReportSuppressed), 2);
    // No answer within T1: resent, byte for byte.
    assert_eq!(h.node.poll_timeout(), Some(h.now + Duration::from_secs(3)));
    h.now += Duration::from_secs(3);
    h.node.handle_timeout(h.now, &mut h.up);
    assert_eq!(h.node.poll_transmit().unwrap().payload, t.payload);
    assert_eq!(h.node.counter(Counter::Retransmitted), 1);
    // The SMF answers: no more resends.
    let resp = PfcpRepr {
        seid: Some(seid),
        sequence: r.sequence,
        priority: None,
        message: Message::SessionReportResponse(SessionReportResponse {
            cause: Cause::REQUEST_ACCEPTED,
            offending_ie: None,
            ..Default::default()
        }),
    };
    assert!(h.raw(&resp.to_bytes()).is_empty());
    h.now += Duration::from_secs(30);
    h.node.handle_timeout(h.now, &mut h.up);
    assert!(h.node.poll_transmit().is_none());
    // A second answer is unexpected.
    h.raw(&resp.to_bytes());
    assert_eq!(h.node.counter(Counter::UnexpectedResponse), 1);
    // So is a Heartbeat Response with the sequence number of a report.
    buffering(&mut h, seid);
    h.node.downlink_data(h.now, seid, 2);
    let seq = PfcpRepr::parse_bytes(&h.node.poll_transmit().unwrap().payload)
        .unwrap()
        .sequence;
    let hb = PfcpRepr {
        seid: None,
        sequence: seq,
        priority: None,
        message: Message::HeartbeatResponse(HeartbeatResponse {
            recovery_time_stamp: RecoveryTimeStamp(SMF_RTS),
        }),
    };
    h.raw(&hb.to_bytes());
    assert_eq!(h.node.counter(Counter::UnexpectedResponse), 2);
    h.now += Duration::from_secs(3);
    h.node.handle_timeout(h.now, &mut h.up);
    assert!(
        h.node.poll_transmit().is_some(),
        "the report is still outstanding"
    );
    // FORW again (the paging succeeded), BUFF again: reported again.
    buffering(&mut h, seid);
    h.node.downlink_data(h.now, seid, 2);
    assert!(h.node.poll_transmit().is_some());
}

#[test]
fn an_unanswered_report_times_out_and_session_not_found_drops_the_session() {
    let (mut h, seid) = established();
    buffering(&mut h, seid);
    h.node.downlink_data(h.now, seid, 2);
    let first = h.node.poll_transmit().unwrap();
    for _ in 0..3 {
        h.now += Duration::from_secs(3);
        h.node.handle_timeout(h.now, &mut h.up);
        assert!(h.node.poll_transmit().is_some());
    }
    h.now += Duration::from_secs(3);
    h.node.handle_timeout(h.now, &mut h.up);
    assert!(h.node.poll_transmit().is_none());
    assert_eq!(h.node.counter(Counter::RequestTimeout), 1);
    assert_eq!(
        h.node.poll_timeout(),
        h.node.associations[0].cache.next_expiry()
    );
    let _ = first;
    // Reported again after a modification; the SMF no longer knows it.
    buffering(&mut h, seid);
    h.node.downlink_data(h.now, seid, 2);
    let t = h.node.poll_transmit().unwrap();
    let seq = PfcpRepr::parse_bytes(&t.payload).unwrap().sequence;
    let resp = PfcpRepr {
        seid: Some(seid),
        sequence: seq,
        priority: None,
        message: Message::SessionReportResponse(SessionReportResponse {
            cause: Cause::SESSION_CONTEXT_NOT_FOUND,
            offending_ie: None,
            ..Default::default()
        }),
    };
    h.up.seen.clear();
    h.raw(&resp.to_bytes());
    assert_eq!(h.up.seen, [Seen::Remove(seid)]);
    assert_eq!(h.node.session_count(), 0);
    assert_eq!(h.node.teids_in_use(), 0);
    assert_eq!(h.node.counter(Counter::PeerRejected), 1);
}

#[test]
fn query_urr_and_deletion_report_the_user_planes_counts() {
    let (mut h, seid) = established();
    let usage = Usage {
        uplink_bytes: 1000,
        downlink_bytes: 3000,
        uplink_packets: 10,
        downlink_packets: 20,
    };
    h.up.usage.insert((seid, 1), usage);
    let (_, r) = h.modify(
        seid,
        SessionModificationRequest {
            query_urrs: vec![QueryUrr { urr_id: UrrId(1) }],
            ..Default::default()
        },
    );
    let [UsageReportSmr(u)] = &r.usage_reports[..] else {
        panic!("{r:?}")
    };
    assert_eq!(u.urr_id, UrrId(1));
    assert_eq!(u.ur_seqn, UrSeqn(0));
    assert!(u.trigger.has(UsageReportTrigger::IMMER));
    let v = u.volume.unwrap();
    assert_eq!(
        (v.total, v.uplink, v.downlink),
        (Some(4000), Some(1000), Some(3000))
    );
    assert_eq!(
        (v.total_packets, v.uplink_packets, v.downlink_packets),
        (Some(30), Some(10), Some(20))
    );
    // Deletion: the usage since the query, under TERMR, next UR-SEQN.
    h.up.usage.insert(
        (seid, 1),
        Usage {
            uplink_bytes: 5,
            ..Default::default()
        },
    );
    h.up.seen.clear();
    let r = h.request(
        Some(seid),
        Message::SessionDeletionRequest(SessionDeletionRequest {}),
    );
    assert_eq!(r.seid, Some(7000));
    let Message::SessionDeletionResponse(d) = r.message else {
        panic!()
    };
    assert_eq!(d.cause, Cause::REQUEST_ACCEPTED);
    let [UsageReportSdr(u)] = &d.usage_reports[..] else {
        panic!("{d:?}")
    };
    assert_eq!(u.ur_seqn, UrSeqn(1));
    assert!(u.trigger.has(UsageReportTrigger::TERMR));
    assert_eq!(u.volume.unwrap().total, Some(5));
    assert_eq!(h.up.seen, [Seen::Remove(seid)]);
    assert_eq!((h.node.session_count(), h.node.teids_in_use()), (0, 0));
    // The SEID is stale now, even when its slot is reused.
    let e = h.establish(est_request());
    assert_ne!(up_seid(&e), seid);
    let r = h.request(
        Some(seid),
        Message::SessionDeletionRequest(SessionDeletionRequest {}),
    );
    assert_eq!(r.seid, Some(0));
}

#[test]
fn usage_reports_carry_their_measurement_period() {
    // TS 29.244 Tables 7.5.5.2-1 and 7.5.7.2-1: Start Time and End Time,
    // NTP seconds; the period restarts at each report.
    let (mut h, seid) = established();
    let t0 = 3_950_000_000;
    h.now += Duration::from_secs(10);
    let (_, r) = h.modify(
        seid,
        SessionModificationRequest {
            query_urrs: vec![QueryUrr { urr_id: UrrId(1) }],
            ..Default::default()
        },
    );
    let u = &r.usage_reports[0].0;
    assert_eq!(
        (u.start_time, u.end_time),
        (Some(StartTime(t0)), Some(EndTime(t0 + 10)))
    );
    h.now += Duration::from_secs(5);
    let r = h.request(
        Some(seid),
        Message::SessionDeletionRequest(SessionDeletionRequest {}),
    );
    let Message::SessionDeletionResponse(d) = r.message else {
        panic!("{r:?}")
    };
    let u = &d.usage_reports[0].0;
    assert_eq!(
        (u.start_time, u.end_time),
        (Some(StartTime(t0 + 10)), Some(EndTime(t0 + 15)))
    );
}

#[test]
fn quarr_and_remove_urr_report_too() {
    let (mut h, seid) = established();
    let (_, r) = h.modify(
        seid,
        SessionModificationRequest {
            flags: Some(PfcpsmReqFlags(PfcpsmReqFlags::QUARR)),
            ..Default::default()
        },
    );
    assert_eq!(r.usage_reports.len(), 1);
    // Removing URR 1 while PDRs name it fails; with the PDRs updated it
    // reports under TERMR.
    let (_, r) = h.modify(
        seid,
        SessionModificationRequest {
            remove_urrs: vec![RemoveUrr { urr_id: UrrId(1) }],
            ..Default::default()
        },
    );
    assert_eq!(r.cause, Cause::RULE_CREATION_MODIFICATION_FAILURE);
    assert_eq!(r.failed_rule_id, Some(FailedRuleId::Pdr(1)));
    let (_, r) = h.modify(
        seid,
        SessionModificationRequest {
            remove_pdrs: vec![
                RemovePdr { pdr_id: PdrId(1) },
                RemovePdr { pdr_id: PdrId(2) },
            ],
            remove_urrs: vec![RemoveUrr { urr_id: UrrId(1) }],
            ..Default::default()
        },
    );
    assert_eq!(r.cause, Cause::REQUEST_ACCEPTED);
    assert!(r.usage_reports[0].0.trigger.has(UsageReportTrigger::TERMR));
    assert_eq!(r.usage_reports[0].0.ur_seqn, UrSeqn(1));
    // The uplink PDR's TEID went with it.
    assert_eq!(h.node.teids_in_use(), 0);
}

#[test]
fn unknown_seid_is_session_context_not_found_with_seid_zero() {
    let (mut h, seid) = established();
    for m in [
        Message::SessionModificationRequest(SessionModificationRequest::default()),
        Message::SessionDeletionRequest(SessionDeletionRequest {}),
    ] {
        assert_session_not_found(h.request(Some(seid + 1), m));
    }
    assert_eq!(h.node.counter(Counter::SessionNotFound), 2);
    assert!(h.up.seen.is_empty());
}

/// A modification or deletion response: Session context not found, to
/// SEID 0.
fn assert_session_not_found(r: PfcpRepr) {
    assert_eq!(r.seid, Some(0));
    let cause = match r.message {
        Message::SessionModificationResponse(x) => x.cause,
        Message::SessionDeletionResponse(x) => x.cause,
        m => panic!("{m:?}"),
    };
    assert_eq!(cause, Cause::SESSION_CONTEXT_NOT_FOUND);
}

/// A message body with the IEs of `ies` (raw TLVs) after the header.
fn raw_message(t: u8, seid: Option<u64>, seq: u32, ies: &[u8]) -> Vec<u8> {
    let mut b = vec![];
    header::emit(&mut b, t, seid, seq, None);
    b.extend_from_slice(ies);
    header::set_length(&mut b, 0);
    b
}

fn ies(f: impl FnOnce(&mut crate::ie::Writer<'_>)) -> Vec<u8> {
    let mut b = vec![];
    f(&mut crate::ie::Writer::new(&mut b));
    b
}

fn establishment_response(h: &mut Harness, body: &[u8]) -> SessionEstablishmentResponse {
    let b = raw_message(msg_type::SESSION_ESTABLISHMENT_REQUEST, Some(0), 99, body);
    let out = h.raw(&b);
    assert_eq!(out.len(), 1);
    let r = PfcpRepr::parse_bytes(&out[0].payload).unwrap();
    assert_eq!(r.sequence, 99);
    let Message::SessionEstablishmentResponse(e) = r.message else {
        panic!("{r:?}")
    };
    assert_eq!(e.node_id, NodeId::V4(N3));
    e
}

#[test]
fn a_missing_mandatory_ie_is_named() {
    let mut h = Harness::new();
    h.associate();
    let m = est_request();
    let body = ies(|w| {
        w.ie(&m.node_id);
        w.all(&m.create_pdrs);
        w.all(&m.create_fars);
    });
    let e = establishment_response(&mut h, &body);
    assert_eq!(e.cause, Cause::MANDATORY_IE_MISSING);
    assert_eq!(e.offending_ie, Some(OffendingIe(IeType::F_SEID)));
    // No Create PDR at all.
    let body = ies(|w| {
        w.ie(&m.node_id);
        w.ie(&m.cp_f_seid);
        w.all(&m.create_fars);
    });
    let e = establishment_response(&mut h, &body);
    assert_eq!(e.offending_ie, Some(OffendingIe(IeType::CREATE_PDR)));
    // The F-SEID was readable: the response goes to its SEID.
    let out = h.raw(&raw_message(
        msg_type::SESSION_ESTABLISHMENT_REQUEST,
        Some(0),
        98,
        &body,
    ));
    assert_eq!(
        PfcpRepr::parse_bytes(&out[0].payload).unwrap().seid,
        Some(7000)
    );
    // Inside a group: a Create FAR without its Apply Action.
    let body = ies(|w| {
        w.ie(&m.node_id);
        w.ie(&m.cp_f_seid);
        w.all(&m.create_pdrs);
        w.tlv(IeType::CREATE_FAR, |w| w.ie(&FarId(1)));
    });
    let e = establishment_response(&mut h, &body);
    assert_eq!(
        (e.cause, e.offending_ie),
        (
            Cause::MANDATORY_IE_MISSING,
            Some(OffendingIe(IeType::APPLY_ACTION))
        )
    );
    assert_eq!(h.node.counter(Counter::MandatoryIeMissing), 4);
    assert_eq!(h.node.session_count(), 0);
}

#[test]
fn an_incorrect_mandatory_ie_is_named() {
    let mut h = Harness::new();
    h.associate();
    let m = est_request();
    // An F-SEID with neither V4 nor V6.
    let body = ies(|w| {
        w.ie(&m.node_id);
        w.tlv(IeType::F_SEID, |w| {
            w.u8(0);
            w.u64(1)
        });
        w.all(&m.create_pdrs);
        w.all(&m.create_fars);
    });
    let e = establishment_response(&mut h, &body);
    assert_eq!(
        (e.cause, e.offending_ie),
        (
            Cause::MANDATORY_IE_INCORRECT,
            Some(OffendingIe(IeType::F_SEID))
        )
    );
    assert_eq!(h.node.counter(Counter::MandatoryIeIncorrect), 1);
}

#[test]
fn an_ie_past_its_message_is_invalid_length() {
    let mut h = Harness::new();
    h.associate();
    let m = est_request();
    let mut body = ies(|w| {
        w.ie(&m.node_id);
        w.ie(&m.cp_f_seid);
        w.all(&m.create_pdrs);
        w.all(&m.create_fars);
    });
    // The last FAR's length says 200 more octets than the message has.
    let at = body.len() - {
        let mut one = vec![];
        crate::ie::Writer::new(&mut one).ie(&m.create_fars[1]);
        one.len()
    };
    let l = u16::from_be_bytes([body[at + 2], body[at + 3]]) + 200;
    body[at + 2..at + 4].copy_from_slice(&l.to_be_bytes());
    let e = establishment_response(&mut h, &body);
    assert_eq!(
        (e.cause, e.offending_ie),
        (Cause::INVALID_LENGTH, Some(OffendingIe(IeType::CREATE_FAR)))
    );
    assert_eq!(h.node.counter(Counter::InvalidLength), 1);
    // A header whose length runs past the datagram: Invalid length too.
    let mut b = h.bytes(Some(0), Message::SessionEstablishmentRequest(m));
    b.truncate(b.len() - 5);
    let out = h.raw(&b);
    let r = PfcpRepr::parse_bytes(&out[0].payload).unwrap();
    let Message::SessionEstablishmentResponse(e) = r.message else {
        panic!()
    };
    assert_eq!((e.cause, e.offending_ie), (Cause::INVALID_LENGTH, None));
    assert_eq!(h.node.counter(Counter::BadLength), 1);
    assert_eq!(h.node.session_count(), 0);
}

#[test]
fn a_pdr_naming_a_missing_far_is_a_rule_creation_failure() {
    let mut h = Harness::new();
    h.associate();
    let mut m = est_request();
    m.create_pdrs[1].far_id = Some(FarId(9));
    let e = rejected_establishment(&mut h, m);
    assert_eq!(e.cause, Cause::RULE_CREATION_MODIFICATION_FAILURE);
    assert_eq!(e.failed_rule_id, Some(FailedRuleId::Pdr(2)));
    assert_eq!(h.node.counter(Counter::RuleFailure), 1);
    // Nothing leaked: the TEID chosen for PDR 1 was given back.
    assert_eq!(h.node.teids_in_use(), 0);
    assert!(h.up.seen.is_empty());
    // In a modification, the session keeps its rules.
    let e = h.establish(est_request());
    let seid = up_seid(&e);
    let before = h.node.session(seid).cloned();
    let (_, r) = h.modify(
        seid,
        SessionModificationRequest {
            update_pdrs: vec![UpdatePdr {
                pdr_id: PdrId(2),
                far_id: Some(FarId(77)),
                outer_header_removal: None,
                precedence: None,
                pdi: None,
                urr_ids: vec![],
                qer_ids: vec![],
                skipped: Default::default(),
            }],
            ..Default::default()
        },
    );
    assert_eq!(r.cause, Cause::RULE_CREATION_MODIFICATION_FAILURE);
    assert_eq!(r.failed_rule_id, Some(FailedRuleId::Pdr(2)));
    assert_eq!(h.node.session(seid).cloned(), before);
    // Updating a FAR that does not exist.
    let (_, r) = h.modify(
        seid,
        SessionModificationRequest {
            update_fars: vec![UpdateFar {
                far_id: FarId(5),
                apply_action: Some(ApplyAction::new(ApplyAction::DROP)),
                update_forwarding_parameters: None,
                bar_id: None,
                skipped: Default::default(),
            }],
            ..Default::default()
        },
    );
    assert_eq!(r.failed_rule_id, Some(FailedRuleId::Far(5)));
}

#[test]
fn conditional_ies_the_rules_need() {
    let mut h = Harness::new();
    h.associate();
    // A FAR forwarding to Access needs an Outer Header Creation.
    let mut m = est_request();
    m.create_fars[1]
        .forwarding_parameters
        .as_mut()
        .unwrap()
        .outer_header_creation = None;
    let e = rejected_establishment(&mut h, m);
    assert_eq!(
        (e.cause, e.offending_ie),
        (
            Cause::CONDITIONAL_IE_MISSING,
            Some(OffendingIe(IeType::OUTER_HEADER_CREATION))
        )
    );
    // A PDR without a FAR ID.
    let mut m = est_request();
    m.create_pdrs[0].far_id = None;
    let e = rejected_establishment(&mut h, m);
    assert_eq!(e.offending_ie, Some(OffendingIe(IeType::FAR_ID)));
    // An uplink PDR without an F-TEID.
    let mut m = est_request();
    m.create_pdrs[0].pdi.local_f_teid = None;
    let e = rejected_establishment(&mut h, m);
    assert_eq!(e.offending_ie, Some(OffendingIe(IeType::F_TEID)));
    assert_eq!(h.node.counter(Counter::ConditionalIeMissing), 3);
}

#[test]
fn choose_for_a_family_without_an_n3_address_is_an_invalid_allocation_option() {
    let mut h = Harness::new();
    h.associate();
    let mut m = est_request();
    m.create_pdrs[0].pdi.local_f_teid = Some(FTeid::Choose {
        v4: false,
        v6: true,
        choose_id: None,
    });
    let e = rejected_establishment(&mut h, m);
    assert_eq!(e.cause, Cause::INVALID_F_TEID_ALLOCATION_OPTION);
    assert_eq!(h.node.counter(Counter::InvalidFteidOption), 1);
}

#[test]
fn smf_chosen_teids_are_reserved_and_collisions_fail() {
    let mut h = Harness::new();
    h.associate();
    let mut m = est_request();
    m.create_pdrs[0].pdi.local_f_teid = Some(FTeid::Assigned {
        teid: 4242,
        v4: Some(N3),
        v6: None,
    });
    let e = h.establish(m.clone());
    assert_eq!(e.cause, Cause::REQUEST_ACCEPTED);
    assert!(e.created_pdrs.is_empty());
    let e = rejected_establishment(&mut h, m.clone());
    assert_eq!(e.failed_rule_id, Some(FailedRuleId::Pdr(1)));
    // An address that is not ours.
    m.create_pdrs[0].pdi.local_f_teid = Some(FTeid::Assigned {
        teid: 4243,
        v4: Some(GNB),
        v6: None,
    });
    let e = rejected_establishment(&mut h, m);
    assert_eq!(e.failed_rule_id, Some(FailedRuleId::Pdr(1)));
    assert_eq!(h.node.teids_in_use(), 1);
}

#[test]
fn too_many_rules_is_request_rejected() {
    let mut h = Harness::new();
    h.associate();
    let mut m = est_request();
    for i in 10..10 + session::MAX_RULES as u32 {
        let mut f = m.create_fars[0].clone();
        f.far_id = FarId(i);
        m.create_fars.push(f);
    }
    let e = rejected_establishment(&mut h, m);
    assert_eq!(
        (e.cause, e.offending_ie),
        (
            Cause::REQUEST_REJECTED,
            Some(OffendingIe(IeType::CREATE_FAR))
        )
    );
    assert_eq!(h.node.counter(Counter::TooManyRules), 1);
}

#[test]
fn a_refusing_user_plane_is_no_resources_and_nothing_changes() {
    let mut h = Harness::new();
    h.associate();
    h.up.refuse = Some(Refused::FULL);
    let e = rejected_establishment(&mut h, est_request());
    assert_eq!(e.cause, Cause::NO_RESOURCES_AVAILABLE);
    assert_eq!(h.node.teids_in_use(), 0);
    h.up.refuse = None;
    let seid = up_seid(&h.establish(est_request()));
    h.up.refuse = Some(Refused::FULL);
    let before = h.node.session(seid).cloned();
    let (_, r) = h.modify(
        seid,
        SessionModificationRequest {
            remove_fars: vec![],
            update_fars: vec![UpdateFar {
                far_id: FarId(1),
                apply_action: Some(ApplyAction::new(ApplyAction::DROP)),
                update_forwarding_parameters: None,
                bar_id: None,
                skipped: Default::default(),
            }],
            ..Default::default()
        },
    );
    assert_eq!(r.cause, Cause::NO_RESOURCES_AVAILABLE);
    assert_eq!(h.node.session(seid).cloned(), before);
    assert_eq!(h.node.counter(Counter::UserPlaneRefused), 2);
}

#[test]
fn an_unsupported_version_gets_version_not_supported() {
    let mut h = Harness::new();
    let mut b = h.bytes(
        None,
        Message::HeartbeatRequest(HeartbeatRequest {
            recovery_time_stamp: RecoveryTimeStamp(1),
        }),
    );
    b[0] = (b[0] & 0x1f) | 2 << 5;
    let out = h.raw(&b);
    let r = PfcpRepr::parse_bytes(&out[0].payload).unwrap();
    assert_eq!(r.message, Message::VersionNotSupportedResponse);
    assert_eq!(r.sequence, h.seq);
    assert_eq!(h.node.counter(Counter::BadVersion), 1);
}

#[test]
fn what_is_discarded_is_counted() {
    let mut h = Harness::new();
    assert!(h.raw(&[0x20, 1, 0]).is_empty());
    assert!(h.raw(&[]).is_empty());
    // An unknown message type (PFD Management Request).
    assert!(h.raw(&raw_message(3, None, 1, &[])).is_empty());
    // A heartbeat with S set.
    let hb = ies(|w| w.ie(&RecoveryTimeStamp(1)));
    assert!(h.raw(&raw_message(1, Some(5), 1, &hb)).is_empty());
    // A Heartbeat Response nobody asked for.
    assert!(h.raw(&raw_message(2, None, 1, &hb)).is_empty());
    assert_eq!(h.node.counter(Counter::Truncated), 1);
    assert_eq!(h.node.counter(Counter::UnknownMessage), 1);
    assert_eq!(h.node.counter(Counter::BadSeidFlag), 1);
    assert_eq!(h.node.counter(Counter::UnexpectedResponse), 1);
}

#[test]
fn bundled_messages_are_each_handled() {
    let mut h = Harness::new();
    let hb = Message::HeartbeatRequest(HeartbeatRequest {
        recovery_time_stamp: RecoveryTimeStamp(1),
    });
    let mut b = h.bytes(None, hb.clone());
    b[0] |= 0x04; // FO: another message follows.
    b.extend(h.bytes(None, hb));
    assert_eq!(h.raw(&b).len(), 2);
}

#[test]
fn a_new_recovery_time_stamp_means_the_smf_restarted() {
    let (mut h, seid) = established();
    // The same time stamp in a new Association Setup keeps the sessions.
    h.associate();
    assert_eq!(h.node.session_count(), 1);
    // A heartbeat with a new one drops them.
    h.request(
        None,
        Message::HeartbeatRequest(HeartbeatRequest {
            recovery_time_stamp: RecoveryTimeStamp(SMF_RTS + 60),
        }),
    );
    assert_eq!(h.up.seen, [Seen::Remove(seid)]);
    assert_eq!(h.node.session_count(), 0);
    assert_eq!(h.node.counter(Counter::PeerRestarted), 1);
    // And so does an Association Setup with another one.
    let seid = up_seid(&h.establish(est_request()));
    h.up.seen.clear();
    h.associate(); // SMF_RTS again: a change
    assert_eq!(h.up.seen, [Seen::Remove(seid)]);
}

#[test]
fn association_release_deletes_the_smfs_sessions() {
    let (mut h, seid) = established();
    let r = h.request(
        None,
        Message::AssociationReleaseRequest(AssociationReleaseRequest {
            node_id: NodeId::fqdn("smf.test").unwrap(),
        }),
    );
    let Message::AssociationReleaseResponse(a) = r.message else {
        panic!()
    };
    assert_eq!(a.cause, Cause::REQUEST_ACCEPTED);
    assert_eq!(h.up.seen, [Seen::Remove(seid)]);
    assert_eq!(h.node.associations().count(), 0);
    let e = rejected_establishment(&mut h, est_request());
    assert_eq!(e.cause, Cause::NO_ESTABLISHED_PFCP_ASSOCIATION);
}

#[test]
fn heartbeats_to_the_smf_and_an_unreachable_one() {
    let mut h = Harness::new();
    h.node.config.heartbeat_interval = Some(Duration::from_secs(10));
    h.associate();
    assert_eq!(h.node.poll_timeout(), Some(h.now + Duration::from_secs(10)));
    h.now += Duration::from_secs(10);
    h.node.handle_timeout(h.now, &mut h.up);
    let t = h.node.poll_transmit().unwrap();
    assert_eq!(t.destination, "192.0.2.10:8805".parse().unwrap());
    let r = PfcpRepr::parse_bytes(&t.payload).unwrap();
    assert_eq!(
        r.message,
        Message::HeartbeatRequest(HeartbeatRequest {
            recovery_time_stamp: RecoveryTimeStamp(3_950_000_000)
        })
    );
    let resp = PfcpRepr {
        seid: None,
        sequence: r.sequence,
        priority: None,
        message: Message::HeartbeatResponse(HeartbeatResponse {
            recovery_time_stamp: RecoveryTimeStamp(SMF_RTS),
        }),
    };
    assert!(h.raw(&resp.to_bytes()).is_empty());
    assert_eq!(h.node.counter(Counter::UnexpectedResponse), 0);
    // The next one goes unanswered: three resends, then unreachable.
    h.now += Duration::from_secs(10);
    h.node.handle_timeout(h.now, &mut h.up);
    for _ in 0..4 {
        assert!(h.node.poll_transmit().is_some());
        h.now += Duration::from_secs(3);
        h.node.handle_timeout(h.now, &mut h.up);
    }
    assert_eq!(h.node.counter(Counter::PeerUnreachable), 1);
    assert_eq!(h.node.counter(Counter::Retransmitted), 3);
}

#[test]
fn every_counter_has_a_distinct_name() {
    let mut names: Vec<_> = Counter::ALL.iter().map(|c| c.name()).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), Counter::COUNT);
}

/// A harness whose node runs usage scans, and a session whose URR 1 has
/// `triggers` and the IEs `edit` sets.
fn scanned(triggers: u64, edit: impl FnOnce(&mut CreateUrr)) -> (Harness, Seid) {
    let mut h = Harness::new();
    h.associate();
    let mut m = est_request();
    m.create_urrs[0].reporting_triggers = ReportingTriggers(Bitmap::new(triggers, 2));
    edit(&mut m.create_urrs[0]);
    let seid = up_seid(&h.establish(m));
    (h, seid)
}

impl Harness {
    /// A scan `ms` after the last, the user plane having counted `dl`
    /// downlink bytes (one packet) for URR 1; the Usage Reports of the
    /// Session Report Request it sent, if any.
    fn scan(&mut self, seid: Seid, ms: u64, dl: u64) -> Vec<UsageReport> {
        self.now += Duration::from_millis(ms);
        self.up.usage.insert(
            (seid, 1),
            Usage {
                downlink_bytes: dl,
                downlink_packets: u64::from(dl > 0),
                ..Default::default()
            },
        );
        self.node.scan_usage(self.now, &mut self.up);
        let Some(t) = self.node.poll_transmit() else {
            return vec![];
        };
        let r = PfcpRepr::parse_bytes(&t.payload).unwrap();
        assert_eq!(r.seid, Some(7000));
        let Message::SessionReportRequest(sr) = r.message else {
            panic!("{r:?}")
        };
        assert_eq!(sr.report_type, ReportType(ReportType::USAR));
        sr.usage_reports.into_iter().map(|u| u.0).collect()
    }
}

#[test]
fn a_crossed_volume_threshold_is_reported_with_the_usage() {
    let (mut h, seid) = scanned(ReportingTriggers::VOLTH, |u| {
        u.volume_threshold = Some(VolumeThreshold {
            total: Some(1000),
            ..Default::default()
        })
    });
    assert_eq!(h.node.usage_watched(), 1);
    assert!(h.scan(seid, 10, 600).is_empty());
    let [u] = &h.scan(seid, 10, 600)[..] else {
        panic!()
    };
    assert!(u.trigger.has(UsageReportTrigger::VOLTH));
    assert_eq!(u.volume.unwrap().downlink, Some(1200));
    assert_eq!(u.ur_seqn, UrSeqn(0));
    assert_eq!(h.node.counter(Counter::UsageReports), 1);
    // Counted afresh from the report.
    assert!(h.scan(seid, 10, 900).is_empty());
    // The UR-SEQN goes on in the deletion's report, which has the 900.
    let r = h.request(
        Some(seid),
        Message::SessionDeletionRequest(SessionDeletionRequest {}),
    );
    let Message::SessionDeletionResponse(d) = r.message else {
        panic!()
    };
    let u = &d.usage_reports[0].0;
    assert_eq!(
        (u.ur_seqn, u.volume.unwrap().downlink),
        (UrSeqn(1), Some(900))
    );
    assert_eq!(h.node.usage_watched(), 0);
}

#[test]
fn a_used_up_quota_stops_the_session_until_a_new_one() {
    let (mut h, seid) = scanned(ReportingTriggers::VOLQU, |u| {
        u.volume_quota = Some(VolumeQuota(VolumeThreshold {
            total: Some(1000),
            ..Default::default()
        }))
    });
    h.up.seen.clear();
    assert!(h.scan(seid, 10, 999).is_empty());
    assert!(h.up.seen.is_empty());
    let [u] = &h.scan(seid, 10, 1)[..] else {
        panic!()
    };
    assert!(u.trigger.has(UsageReportTrigger::VOLQU));
    assert_eq!(u.volume.unwrap().total, Some(1000));
    // The rules installed again, marked: the user plane drops.
    let [Seen::Install(s, rules)] = &h.up.seen[..] else {
        panic!("{:?}", h.up.seen)
    };
    assert_eq!(*s, seid);
    assert!(rules.quota_exhausted());
    assert_eq!(h.node.counter(Counter::QuotaExhausted), 1);
    assert!(h.scan(seid, 10, 0).is_empty(), "reported once");
    // A new quota from the SMF: forwarding again.
    h.up.seen.clear();
    let (_, r) = h.modify(
        seid,
        SessionModificationRequest {
            update_urrs: vec![UpdateUrr {
                urr_id: UrrId(1),
                volume_quota: Some(VolumeQuota(VolumeThreshold {
                    total: Some(5000),
                    ..Default::default()
                })),
                ..Default::default()
            }],
            ..Default::default()
        },
    );
    assert_eq!(r.cause, Cause::REQUEST_ACCEPTED);
    let [Seen::Install(_, rules)] = &h.up.seen[..] else {
        panic!("{:?}", h.up.seen)
    };
    assert!(!rules.quota_exhausted());
    assert!(h.scan(seid, 10, 4999).is_empty());
}

#[test]
fn periodic_start_and_stop_reports_go_in_session_report_requests() {
    let t = ReportingTriggers::PERIO | ReportingTriggers::START | ReportingTriggers::STOPT;
    let (mut h, seid) = scanned(t, |u| {
        u.measurement_method =
            MeasurementMethod(MeasurementMethod::VOLUM | MeasurementMethod::DURAT);
        u.measurement_period = Some(MeasurementPeriod(2));
        u.inactivity_detection_time = Some(InactivityDetectionTime(1));
    });
    let [s] = &h.scan(seid, 100, 500)[..] else {
        panic!()
    };
    assert!(s.trigger.has(UsageReportTrigger::START));
    assert_eq!((s.start_time, s.volume), (None, None));
    assert!(h.scan(seid, 1000, 500).is_empty());
    let [p] = &h.scan(seid, 900, 0)[..] else {
        panic!()
    };
    assert!(p.trigger.has(UsageReportTrigger::PERIO));
    assert_eq!(p.volume.unwrap().downlink, Some(1000));
    assert_eq!(p.duration, Some(DurationMeasurement(1)), "1.9 s of traffic");
    assert_eq!(p.end_time.unwrap().0 - p.start_time.unwrap().0, 2);
    assert_eq!((s.ur_seqn, p.ur_seqn), (UrSeqn(0), UrSeqn(1)));
    // A second without a packet: stopped.
    let [e] = &h.scan(seid, 200, 0)[..] else {
        panic!()
    };
    assert!(e.trigger.has(UsageReportTrigger::STOPT));
}

#[test]
fn triggers_need_their_ies_and_scans() {
    // VOLTH without a Volume Threshold: Conditional IE missing.
    let mut h = Harness::new();
    h.associate();
    let mut m = est_request();
    m.create_urrs[0].reporting_triggers =
        ReportingTriggers(Bitmap::new(ReportingTriggers::VOLTH, 2));
    let e = rejected_establishment(&mut h, m);
    assert_eq!(
        (e.cause, e.offending_ie),
        (
            Cause::CONDITIONAL_IE_MISSING,
            Some(OffendingIe(IeType::VOLUME_THRESHOLD))
        )
    );
    // A Time Threshold without TIMTH would be ignored: refused.
    let mut m = est_request();
    m.create_urrs[0].time_threshold = Some(TimeThreshold(60));
    let e = rejected_establishment(&mut h, m);
    assert_eq!(
        (e.cause, e.failed_rule_id, e.offending_ie),
        (
            Cause::RULE_CREATION_MODIFICATION_FAILURE,
            Some(FailedRuleId::Urr(1)),
            Some(OffendingIe(IeType::TIME_THRESHOLD))
        )
    );
    // QUHTI: not done.
    let mut m = est_request();
    m.create_urrs[0].reporting_triggers =
        ReportingTriggers(Bitmap::new(ReportingTriggers::QUHTI, 2));
    let e = rejected_establishment(&mut h, m);
    assert_eq!(
        e.offending_ie,
        Some(OffendingIe(IeType::REPORTING_TRIGGERS))
    );
    // Without scans, a quota is refused.
    let mut h = Harness::new();
    let mut c = h.node.config().clone();
    c.usage_scans = false;
    h.node = Node::new(c);
    h.associate();
    let mut m = est_request();
    m.create_urrs[0].volume_quota = Some(VolumeQuota::default());
    let e = rejected_establishment(&mut h, m);
    assert_eq!(e.offending_ie, Some(OffendingIe(IeType::VOLUME_QUOTA)));
}

// Trust boundaries: who may do what on N4.

const STRANGER: &str = "192.0.2.99:8805";

impl Harness {
    /// Sends raw bytes from `from`; returns every datagram the node queued.
    fn raw_from(&mut self, from: &str, bytes: &[u8]) -> Vec<Transmit> {
        self.node
            .handle(self.now, from.parse().unwrap(), bytes, &mut self.up);
        std::iter::from_fn(|| self.node.poll_transmit()).collect()
    }

    /// Sends a request from `from`; returns its one response, parsed.
    fn request_from(&mut self, from: &str, seid: Option<u64>, m: Message) -> PfcpRepr {
        let b = self.bytes(seid, m);
        let out = self.raw_from(from, &b);
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0].destination, from.parse().unwrap());
        PfcpRepr::parse_bytes(&out[0].payload).unwrap()
    }
}

fn setup_request(node_id: &str, rts: u32) -> Message {
    Message::AssociationSetupRequest(AssociationSetupRequest {
        node_id: NodeId::fqdn(node_id).unwrap(),
        recovery_time_stamp: RecoveryTimeStamp(rts),
        up_function_features: None,
    })
}

fn setup_cause(r: &PfcpRepr) -> Cause {
    match &r.message {
        Message::AssociationSetupResponse(a) => a.cause,
        m => panic!("{m:?}"),
    }
}

fn peer(addr: &str, prefix_len: u8, node_id: Option<&str>) -> Peer {
    Peer {
        addr: addr.parse().unwrap(),
        prefix_len,
        node_id: node_id.map(|n| NodeId::fqdn(n).unwrap()),
    }
}

#[test]
fn peers_covers_addresses_and_prefixes() {
    let p = peer("192.0.2.0", 24, None);
    assert!(p.covers("192.0.2.200".parse().unwrap()));
    assert!(p.covers("::ffff:192.0.2.7".parse().unwrap()));
    assert!(!p.covers("192.0.3.1".parse().unwrap()));
    assert!(!p.covers("2001:db8::1".parse().unwrap()));
    let p = peer("2001:db8::", 64, None);
    assert!(p.covers("2001:db8::ffff:1".parse().unwrap()));
    assert!(!p.covers("2001:db8:0:1::1".parse().unwrap()));
    assert!(peer("192.0.2.10", 32, None).covers("192.0.2.10".parse().unwrap()));
    assert!(!peer("192.0.2.10", 32, None).covers("192.0.2.11".parse().unwrap()));
}

#[test]
fn a_host_outside_peers_is_not_answered_at_all() {
    let mut h = Harness::new();
    h.node.config.peers = Some(vec![peer("192.0.2.10", 32, None)]);
    for m in [
        setup_request("stranger.test", 1),
        Message::HeartbeatRequest(HeartbeatRequest {
            recovery_time_stamp: RecoveryTimeStamp(1),
        }),
    ] {
        let b = h.bytes(None, m);
        assert!(h.raw_from(STRANGER, &b).is_empty());
    }
    // Not even a Version Not Supported.
    assert!(h
        .raw_from(STRANGER, &[0x40, 1, 0, 4, 0, 0, 1, 0])
        .is_empty());
    assert_eq!(h.node.counter(Counter::Stranger), 3);
    assert_eq!(h.node.associations().count(), 0);
    assert_eq!(h.node.cached_responses(), 0);
    // The SMF is heard.
    h.associate();
}

#[test]
fn a_peers_entry_with_a_node_id_refuses_another() {
    let mut h = Harness::new();
    h.node.config.peers = Some(vec![peer("192.0.2.0", 24, Some("SMF.test"))]);
    let r = h.request_from(STRANGER, None, setup_request("other.test", 1));
    assert_eq!(setup_cause(&r), Cause::REQUEST_REJECTED);
    assert_eq!(h.node.counter(Counter::NodeIdRefused), 1);
    assert_eq!(h.node.associations().count(), 0);
    // Node IDs compare without regard to case.
    h.associate();
}

#[test]
fn a_session_is_served_only_to_the_association_that_owns_it() {
    let (mut h, seid) = established();
    let rules = h.node.session(seid).unwrap().clone();
    // The stranger has an association of its own: still not its session.
    let r = h.request_from(STRANGER, None, setup_request("stranger.test", 1));
    assert_eq!(setup_cause(&r), Cause::REQUEST_ACCEPTED);
    let hijack = SessionModificationRequest {
        update_fars: vec![UpdateFar {
            far_id: FarId(2),
            apply_action: Some(ApplyAction::new(ApplyAction::FORW)),
            update_forwarding_parameters: Some(UpdateForwardingParameters {
                outer_header_creation: Some(OuterHeaderCreation::gtpu(
                    99,
                    Ipv4Addr::new(192, 0, 2, 99).into(),
                )),
                ..Default::default()
            }),
            bar_id: None,
            skipped: Default::default(),
        }],
        ..Default::default()
    };
    for m in [
        Message::SessionModificationRequest(hijack),
        Message::SessionDeletionRequest(SessionDeletionRequest::default()),
    ] {
        // Exactly what an unknown SEID gets.
        assert_session_not_found(h.request_from(STRANGER, Some(seid), m));
    }
    assert_eq!(h.node.counter(Counter::ForeignSession), 2);
    assert_eq!(h.node.counter(Counter::SessionNotFound), 0);
    assert!(h.up.seen.is_empty(), "{:?}", h.up.seen);
    assert_eq!(h.node.session(seid), Some(&rules));
    // A bad length from the stranger does not learn the CP SEID either.
    let mut b = h.bytes(
        Some(seid),
        Message::SessionDeletionRequest(Default::default()),
    );
    b[3] = 200;
    let out = h.raw_from(STRANGER, &b);
    assert_eq!(
        PfcpRepr::parse_bytes(&out[0].payload).unwrap().seid,
        Some(0)
    );
    // The SMF's next modification is accepted.
    buffering(&mut h, seid);
}

#[test]
fn an_associated_node_id_is_not_taken_over_from_another_address() {
    let (mut h, seid) = established();
    // The SMF's Node ID from elsewhere, claiming a restart.
    let r = h.request_from(STRANGER, None, setup_request("smf.test", SMF_RTS + 1));
    assert_eq!(setup_cause(&r), Cause::REQUEST_REJECTED);
    assert_eq!(h.node.counter(Counter::AssociationTakeover), 1);
    // A Heartbeat from it with a new time stamp restarts nobody.
    h.request_from(
        STRANGER,
        None,
        Message::HeartbeatRequest(HeartbeatRequest {
            recovery_time_stamp: RecoveryTimeStamp(SMF_RTS + 1),
        }),
    );
    assert_eq!(h.node.counter(Counter::PeerRestarted), 0);
    assert!(h.up.seen.is_empty());
    let assoc: Vec<_> = h.node.associations().map(|(n, a)| (n.clone(), a)).collect();
    assert_eq!(
        assoc,
        [(NodeId::fqdn("smf.test").unwrap(), h.smf.ip())],
        "still the SMF's"
    );
    assert!(h.node.session(seid).is_some());
    buffering(&mut h, seid);
    // Once the SMF released it, the Node ID is free again.
    h.request(
        None,
        Message::AssociationReleaseRequest(AssociationReleaseRequest {
            node_id: NodeId::fqdn("smf.test").unwrap(),
        }),
    );
    let r = h.request_from(STRANGER, None, setup_request("smf.test", SMF_RTS + 1));
    assert_eq!(setup_cause(&r), Cause::REQUEST_ACCEPTED);
}

#[test]
fn associations_are_bounded() {
    let mut h = Harness::new();
    h.node.config.max_associations = 1;
    h.associate();
    let r = h.request_from(STRANGER, None, setup_request("stranger.test", 1));
    assert_eq!(setup_cause(&r), Cause::NO_RESOURCES_AVAILABLE);
    assert_eq!(h.node.counter(Counter::TooManyAssociations), 1);
    // Refreshing an existing one is not a new one.
    h.associate();
}

fn report_response(seid: Seid, seq: u32, cause: Cause) -> Vec<u8> {
    PfcpRepr {
        seid: Some(seid),
        sequence: seq,
        priority: None,
        message: Message::SessionReportResponse(SessionReportResponse {
            cause,
            offending_ie: None,
            ..Default::default()
        }),
    }
    .to_bytes()
}

#[test]
fn responses_count_only_from_the_host_asked() {
    let (mut h, seid) = established();
    buffering(&mut h, seid);
    h.node.downlink_data(h.now, seid, 2);
    let t = h.node.poll_transmit().unwrap();
    let seq = PfcpRepr::parse_bytes(&t.payload).unwrap().sequence;
    // "Session context not found" from elsewhere deletes nothing and
    // completes nothing.
    let spoof = report_response(seid, seq, Cause::SESSION_CONTEXT_NOT_FOUND);
    assert!(h.raw_from(STRANGER, &spoof).is_empty());
    assert_eq!(h.node.counter(Counter::SpoofedResponse), 1);
    assert!(h.node.session(seid).is_some());
    h.now += Duration::from_secs(3);
    h.node.handle_timeout(h.now, &mut h.up);
    assert_eq!(h.node.poll_transmit().unwrap().payload, t.payload, "resent");
    // The SMF's answer, from another port of its host, does.
    let ok = report_response(seid, seq, Cause::REQUEST_ACCEPTED);
    h.raw_from("192.0.2.10:8805", &ok);
    h.now += Duration::from_secs(3);
    h.node.handle_timeout(h.now, &mut h.up);
    assert!(h.node.poll_transmit().is_none());
    // Heartbeat Responses likewise.
    h.node.config.heartbeat_interval = Some(Duration::from_secs(10));
    h.now += Duration::from_secs(10);
    h.node.handle_timeout(h.now, &mut h.up);
    h.now += Duration::from_secs(10);
    h.node.handle_timeout(h.now, &mut h.up);
    let hb = PfcpRepr::parse_bytes(&h.node.poll_transmit().unwrap().payload).unwrap();
    let resp = PfcpRepr {
        seid: None,
        sequence: hb.sequence,
        priority: None,
        message: Message::HeartbeatResponse(HeartbeatResponse {
            recovery_time_stamp: RecoveryTimeStamp(SMF_RTS + 1),
        }),
    }
    .to_bytes();
    h.raw_from(STRANGER, &resp);
    assert_eq!(h.node.counter(Counter::SpoofedResponse), 2);
    assert_eq!(h.node.counter(Counter::PeerRestarted), 0);
    assert!(h.node.session(seid).is_some());
}

#[test]
fn seids_and_teids_are_permuted_under_the_key() {
    let run = |key: u64| {
        let mut h = Harness::new();
        h.node = Node::new(Config {
            id_key: key,
            ..h.node.config.clone()
        });
        h.associate();
        let mut out = vec![];
        for _ in 0..3 {
            let e = h.establish(est_request());
            let teid = match e.created_pdrs[0].local_f_teid {
                Some(FTeid::Assigned { teid, .. }) => teid,
                ref f => panic!("{f:?}"),
            };
            out.push((up_seid(&e), teid));
        }
        // A deleted session's SEID is unknown, and its slot's next SEID
        // is another.
        let (seid, _) = out[0];
        h.request(
            Some(seid),
            Message::SessionDeletionRequest(Default::default()),
        );
        let r = h.request(
            Some(seid),
            Message::SessionDeletionRequest(Default::default()),
        );
        assert_eq!(r.seid, Some(0));
        let again = up_seid(&h.establish(est_request()));
        assert!(!out.iter().any(|o| o.0 == again));
        out
    };
    let a = run(1);
    let b = run(2);
    assert_ne!(a, b, "the key chooses them");
    for w in a.windows(2) {
        assert!(w[0].0.abs_diff(w[1].0) > 1 << 16, "{a:x?}");
        assert!(w[0].1.abs_diff(w[1].1) > 1 << 8, "{a:x?}");
    }
}

#[test]
fn a_silent_association_is_released_after_the_grace_with_its_sessions() {
    let (mut h, seid) = established();
    h.node.config.heartbeat_interval = Some(Duration::from_secs(10));
    h.node.config.association_grace = Duration::from_secs(60);
    h.now += Duration::from_secs(10);
    // Unanswered: T1 × (N1 + 1) = 12 s to unreachable, then 60 s.
    let start = h.now;
    while h.node.associations().count() == 1 {
        assert!(h.now < start + Duration::from_secs(120), "never released");
        h.node.handle_timeout(h.now, &mut h.up);
        while h.node.poll_transmit().is_some() {}
        h.now = h.node.poll_timeout().unwrap().max(h.now);
    }
    assert!(h.now >= start + Duration::from_secs(72));
    assert_eq!(h.node.counter(Counter::PeerUnreachable), 1);
    assert_eq!(h.node.counter(Counter::AssociationsExpired), 1);
    assert_eq!(h.up.seen, [Seen::Remove(seid)]);
    assert_eq!((h.node.session_count(), h.node.teids_in_use()), (0, 0));
    assert_eq!(
        h.node.poll_event(),
        Some(Event::AssociationExpired {
            node_id: NodeId::fqdn("smf.test").unwrap(),
            addr: h.smf.ip(),
            sessions: 1,
        })
    );
    // No more heartbeats to it.
    h.now += Duration::from_secs(60);
    h.node.handle_timeout(h.now, &mut h.up);
    assert_eq!(h.node.poll_transmit(), None);
}

#[test]
fn an_answer_within_the_grace_keeps_the_association() {
    let (mut h, seid) = established();
    h.node.config.heartbeat_interval = Some(Duration::from_secs(10));
    h.now += Duration::from_secs(10);
    for _ in 0..5 {
        h.node.handle_timeout(h.now, &mut h.up);
        while h.node.poll_transmit().is_some() {}
        h.now += Duration::from_secs(3);
    }
    assert_eq!(h.node.counter(Counter::PeerUnreachable), 1);
    // The SMF speaks again (a Heartbeat of its own): alive.
    h.request(
        None,
        Message::HeartbeatRequest(HeartbeatRequest {
            recovery_time_stamp: RecoveryTimeStamp(SMF_RTS),
        }),
    );
    h.now += Duration::from_secs(59);
    h.node.handle_timeout(h.now, &mut h.up);
    assert_eq!(h.node.associations().count(), 1);
    assert!(h.node.session(seid).is_some());
}

#[test]
fn each_association_has_a_session_quota() {
    let mut h = Harness::new();
    h.node.config.max_sessions_per_association = 1;
    h.associate();
    h.establish(est_request());
    let e = rejected_establishment(&mut h, est_request());
    assert_eq!(e.cause, Cause::NO_RESOURCES_AVAILABLE);
    assert_eq!(h.node.counter(Counter::AssociationQuota), 1);
    assert_eq!(h.node.counter(Counter::NoResources), 0);
}

#[test]
fn a_strangers_flood_does_not_evict_the_smfs_cached_responses() {
    let mut h = Harness::new();
    h.node = Node::new(Config {
        stranger_cache_cap: 8,
        ..h.node.config.clone()
    });
    h.associate();
    let est = h.bytes(Some(0), Message::SessionEstablishmentRequest(est_request()));
    let first = h.raw(&est);
    for _ in 0..1000 {
        let b = h.bytes(
            None,
            Message::HeartbeatRequest(HeartbeatRequest {
                recovery_time_stamp: RecoveryTimeStamp(1),
            }),
        );
        assert_eq!(h.raw_from(STRANGER, &b).len(), 1);
    }
    assert!(h.node.counter(Counter::CacheEvicted) >= 990);
    // The SMF's retransmission: the same answer, applied once.
    assert_eq!(h.raw(&est), first);
    assert_eq!(h.node.counter(Counter::DuplicateRequest), 1);
    assert_eq!(h.node.session_count(), 1);
    assert_eq!(h.up.seen.len(), 1);
}

/// A CP F-SEID is where reports go and who may act on the session: only
/// the sender itself, or with `peers` a host they list, is taken.
#[test]
fn a_cp_f_seid_naming_another_host_is_refused() {
    let mut h = Harness::new();
    h.associate();
    let elsewhere = |a: [u8; 4]| SessionEstablishmentRequest {
        cp_f_seid: FSeid {
            v4: Some(Ipv4Addr::from(a)),
            ..cp_f_seid()
        },
        ..est_request()
    };
    let e = rejected_establishment(&mut h, elsewhere([198, 51, 100, 7]));
    assert_eq!(e.cause, Cause::REQUEST_REJECTED);
    assert_eq!(e.offending_ie, Some(OffendingIe(IeType::F_SEID)));
    assert_eq!(h.node.counter(Counter::CpAddressRefused), 1);
    // A host `peers` lists may be named (an SMF's second address).
    h.node.config.peers = Some(vec![peer("192.0.2.0", 24, None)]);
    let e = h.establish(elsewhere([192, 0, 2, 11]));
    assert_eq!(e.cause, Cause::REQUEST_ACCEPTED, "{e:?}");
    let seid = up_seid(&e);
    // A modification cannot move the session's reports to a stranger.
    let (_, r) = h.modify(
        seid,
        SessionModificationRequest {
            cp_f_seid: Some(FSeid {
                v4: Some(Ipv4Addr::new(198, 51, 100, 7)),
                ..cp_f_seid()
            }),
            ..Default::default()
        },
    );
    assert_eq!(r.cause, Cause::REQUEST_REJECTED);
    assert_eq!(h.node.counter(Counter::CpAddressRefused), 2);
}

/// An Association Update names the association's own Node ID; another is
/// refused as a takeover.
#[test]
fn an_association_update_for_another_node_id_is_refused() {
    let mut h = Harness::new();
    h.associate();
    let update = |n: &str| {
        Message::AssociationUpdateRequest(AssociationUpdateRequest {
            node_id: NodeId::fqdn(n).unwrap(),
            up_function_features: None,
        })
    };
    let cause = |r: PfcpRepr| match r.message {
        Message::AssociationUpdateResponse(a) => a.cause,
        m => panic!("{m:?}"),
    };
    assert_eq!(
        cause(h.request(None, update("smf.test"))),
        Cause::REQUEST_ACCEPTED
    );
    assert_eq!(
        cause(h.request(None, update("other.test"))),
        Cause::REQUEST_REJECTED
    );
    assert_eq!(h.node.counter(Counter::AssociationTakeover), 1);
}
