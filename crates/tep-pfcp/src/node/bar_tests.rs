//! BARs (TS 29.244 §5.2.4, §7.5.2.6): one per session, named by the FARs
//! that buffer under it; its Suggested Buffering Packets Count reaches
//! the user plane with the rules, its Downlink Data Notification Delay
//! defers the Downlink Data Report; DROBU drops what is held.

use super::*;

const BAR: u8 = 5;

fn create_bar(id: u8, delay: Option<u8>, count: Option<u8>) -> CreateBar {
    CreateBar {
        bar_id: BarId(id),
        downlink_data_notification_delay: delay.map(DownlinkDataNotificationDelay),
        suggested_buffering_packets_count: count.map(SuggestedBufferingPacketsCount),
        skipped: Default::default(),
    }
}

/// The base session with BAR 5 (500 ms, 3 packets), which FAR 2 (to the
/// gNB) names.
fn with_bar() -> (Harness, Seid) {
    let mut h = Harness::new();
    h.associate();
    let mut m = est_request();
    m.create_bars = vec![create_bar(BAR, Some(10), Some(3))];
    m.create_fars[1].bar_id = Some(BarId(BAR));
    let e = h.establish(m);
    assert_eq!(e.cause, Cause::REQUEST_ACCEPTED, "{e:?}");
    let seid = up_seid(&e);
    h.up.seen.clear();
    (h, seid)
}

fn far2(action: u64) -> SessionModificationRequest {
    SessionModificationRequest {
        update_fars: vec![UpdateFar {
            far_id: FarId(2),
            apply_action: Some(ApplyAction::new(action)),
            update_forwarding_parameters: None,
            bar_id: None,
            skipped: Default::default(),
        }],
        ..Default::default()
    }
}

fn accepted(h: &mut Harness, seid: Seid, m: SessionModificationRequest) {
    let (_, r) = h.modify(seid, m);
    assert_eq!(r.cause, Cause::REQUEST_ACCEPTED, "{r:?}");
}

fn refused(
    h: &mut Harness,
    seid: Seid,
    m: SessionModificationRequest,
) -> (Option<FailedRuleId>, Option<IeType>) {
    let before = h.node.session(seid).cloned();
    let (_, r) = h.modify(seid, m);
    assert_eq!(r.cause, Cause::RULE_CREATION_MODIFICATION_FAILURE, "{r:?}");
    assert_eq!(h.node.session(seid).cloned(), before, "unchanged");
    (r.failed_rule_id, r.offending_ie.map(|o| o.0))
}

fn report_sent(h: &mut Harness) -> bool {
    std::iter::from_fn(|| h.node.poll_transmit()).any(|t| {
        matches!(
            PfcpRepr::parse_bytes(&t.payload).map(|r| r.message),
            Ok(Message::SessionReportRequest(SessionReportRequest {
                downlink_data_report: Some(_),
                ..
            }))
        )
    })
}

#[test]
fn a_bar_is_installed_with_the_rules_and_its_far() {
    let (mut h, seid) = with_bar();
    let r = h.node.session(seid).unwrap();
    let bar = Bar {
        id: BAR,
        ddn_delay: 10,
        suggested_packets: Some(3),
    };
    assert_eq!(r.bar, Some(bar));
    assert_eq!(r.far(2).unwrap().bar, Some(BAR));
    assert_eq!(r.buffering_bar(), None, "FAR 2 forwards");
    accepted(&mut h, seid, far2(ApplyAction::BUFF | ApplyAction::NOCP));
    let Some(Seen::Install(_, rules)) = h.up.seen.last() else {
        panic!("{:?}", h.up.seen)
    };
    assert_eq!(rules.buffering_bar(), Some(&bar));
    assert_eq!(bar.delay(), Duration::from_millis(500));
    // Update BAR: present fields replace the BAR's.
    accepted(
        &mut h,
        seid,
        SessionModificationRequest {
            update_bar: Some(UpdateBar {
                bar_id: BarId(BAR),
                downlink_data_notification_delay: None,
                suggested_buffering_packets_count: Some(SuggestedBufferingPacketsCount(7)),
                skipped: Default::default(),
            }),
            ..Default::default()
        },
    );
    let b = h.node.session(seid).unwrap().bar.unwrap();
    assert_eq!((b.ddn_delay, b.suggested_packets), (10, Some(7)));
}

#[test]
fn the_downlink_data_report_waits_for_the_delay() {
    let (mut h, seid) = with_bar();
    accepted(&mut h, seid, far2(ApplyAction::BUFF | ApplyAction::NOCP));
    let t0 = h.now;
    h.node.downlink_data(t0, seid, 2);
    assert!(!report_sent(&mut h), "not at once");
    assert_eq!(h.node.poll_timeout(), Some(t0 + Duration::from_millis(500)));
    h.now = t0 + Duration::from_millis(499);
    h.node.handle_timeout(h.now, &mut h.up);
    assert!(!report_sent(&mut h));
    // A modification that keeps buffering keeps the report due (the user
    // plane does not report the same held packets again).
    accepted(
        &mut h,
        seid,
        SessionModificationRequest {
            update_bar: Some(UpdateBar {
                bar_id: BarId(BAR),
                downlink_data_notification_delay: Some(DownlinkDataNotificationDelay(1)),
                suggested_buffering_packets_count: None,
                skipped: Default::default(),
            }),
            ..Default::default()
        },
    );
    h.node.downlink_data(h.now, seid, 2);
    assert_eq!(h.node.counter(Counter::DlReportSuppressed), 1, "still due");
    h.now = t0 + Duration::from_millis(500);
    h.node.handle_timeout(h.now, &mut h.up);
    assert!(report_sent(&mut h), "due");
    h.now += Duration::from_secs(1);
    h.node.handle_timeout(h.now, &mut h.up);
    assert!(!report_sent(&mut h), "once");
    assert_eq!(h.node.counter(Counter::ReportsSent), 1);
}

#[test]
fn a_far_that_stops_buffering_cancels_the_report() {
    let (mut h, seid) = with_bar();
    accepted(&mut h, seid, far2(ApplyAction::BUFF | ApplyAction::NOCP));
    h.node.downlink_data(h.now, seid, 2);
    h.now += Duration::from_millis(200);
    accepted(&mut h, seid, far2(ApplyAction::FORW));
    assert_eq!(h.node.counter(Counter::DlReportSuppressed), 1);
    h.now += Duration::from_secs(1);
    h.node.handle_timeout(h.now, &mut h.up);
    assert!(!report_sent(&mut h));
    assert_eq!(h.node.counter(Counter::ReportsSent), 0);
    // Buffering again: a new first packet is reported after the delay.
    accepted(&mut h, seid, far2(ApplyAction::BUFF | ApplyAction::NOCP));
    h.node.downlink_data(h.now, seid, 2);
    h.now += Duration::from_millis(500);
    h.node.handle_timeout(h.now, &mut h.up);
    assert!(report_sent(&mut h));
}

#[test]
fn an_smf_toggling_buffering_leaves_no_unbounded_timers() {
    let (mut h, seid) = with_bar();
    for _ in 0..1000 {
        accepted(&mut h, seid, far2(ApplyAction::BUFF | ApplyAction::NOCP));
        h.node.downlink_data(h.now, seid, 2);
        accepted(&mut h, seid, far2(ApplyAction::FORW));
    }
    assert!(h.node.dl_timers.len() <= 2 * h.node.sessions + 64);
    // The last one still counts.
    accepted(&mut h, seid, far2(ApplyAction::BUFF | ApplyAction::NOCP));
    h.node.downlink_data(h.now, seid, 2);
    h.now += Duration::from_millis(500);
    h.node.handle_timeout(h.now, &mut h.up);
    assert!(report_sent(&mut h));
}

#[test]
fn without_a_bar_or_with_no_delay_the_report_goes_at_once() {
    let (mut h, seid) = with_bar();
    accepted(
        &mut h,
        seid,
        SessionModificationRequest {
            update_bar: Some(UpdateBar {
                bar_id: BarId(BAR),
                downlink_data_notification_delay: Some(DownlinkDataNotificationDelay(0)),
                suggested_buffering_packets_count: None,
                skipped: Default::default(),
            }),
            ..far2(ApplyAction::BUFF | ApplyAction::NOCP)
        },
    );
    h.node.downlink_data(h.now, seid, 2);
    assert!(report_sent(&mut h));
}

#[test]
fn one_bar_per_session_and_a_far_names_it() {
    // Two BARs in an establishment: the second is refused.
    let mut h = Harness::new();
    h.associate();
    let mut m = est_request();
    m.create_bars = vec![create_bar(1, None, None), create_bar(2, None, None)];
    let e = rejected_establishment(&mut h, m);
    assert_eq!(
        (e.cause, e.failed_rule_id),
        (
            Cause::RULE_CREATION_MODIFICATION_FAILURE,
            Some(FailedRuleId::Bar(2))
        )
    );
    // A FAR naming a BAR the session lacks.
    let mut m = est_request();
    m.create_fars[1].bar_id = Some(BarId(9));
    let e = rejected_establishment(&mut h, m);
    assert_eq!(
        (e.failed_rule_id, e.offending_ie),
        (
            Some(FailedRuleId::Far(2)),
            Some(OffendingIe(IeType::BAR_ID))
        )
    );
    assert_eq!(h.node.session_count(), 0);

    let (mut h, seid) = with_bar();
    let create = |id| SessionModificationRequest {
        create_bars: vec![create_bar(id, None, None)],
        ..Default::default()
    };
    assert_eq!(
        refused(&mut h, seid, create(6)).0,
        Some(FailedRuleId::Bar(6))
    );
    assert_eq!(
        refused(&mut h, seid, create(BAR)).0,
        Some(FailedRuleId::Bar(BAR))
    );
    let mut m = far2(ApplyAction::BUFF);
    m.update_fars[0].bar_id = Some(BarId(6));
    assert_eq!(
        refused(&mut h, seid, m),
        (Some(FailedRuleId::Far(2)), Some(IeType::BAR_ID))
    );
    let update = SessionModificationRequest {
        update_bar: Some(UpdateBar {
            bar_id: BarId(6),
            downlink_data_notification_delay: None,
            suggested_buffering_packets_count: None,
            skipped: Default::default(),
        }),
        ..Default::default()
    };
    assert_eq!(refused(&mut h, seid, update).0, Some(FailedRuleId::Bar(6)));
    let remove = |id| SessionModificationRequest {
        remove_bar: Some(RemoveBar { bar_id: BarId(id) }),
        ..Default::default()
    };
    assert_eq!(
        refused(&mut h, seid, remove(6)).0,
        Some(FailedRuleId::Bar(6))
    );
    // FAR 2 still names it.
    assert_eq!(
        refused(&mut h, seid, remove(BAR)),
        (Some(FailedRuleId::Far(2)), Some(IeType::BAR_ID))
    );
    assert!(h.up.seen.is_empty(), "nothing installed: {:?}", h.up.seen);
    // Removed with its FAR; another BAR then takes its place.
    accepted(
        &mut h,
        seid,
        SessionModificationRequest {
            remove_fars: vec![RemoveFar { far_id: FarId(2) }],
            remove_pdrs: vec![RemovePdr { pdr_id: PdrId(2) }],
            ..remove(BAR)
        },
    );
    assert_eq!(h.node.session(seid).unwrap().bar, None);
    accepted(&mut h, seid, create(6));
    assert_eq!(h.node.session(seid).unwrap().bar.map(|b| b.id), Some(6));
}

#[test]
fn drobu_drops_what_is_held_as_the_rules_change() {
    let (mut h, seid) = with_bar();
    accepted(&mut h, seid, far2(ApplyAction::BUFF | ApplyAction::NOCP));
    h.up.seen.clear();
    let mut m = far2(ApplyAction::FORW);
    m.flags = Some(PfcpsmReqFlags(PfcpsmReqFlags::DROBU));
    accepted(&mut h, seid, m);
    assert!(
        matches!(
            h.up.seen.as_slice(),
            [Seen::Install(s, _), Seen::DropBuffered(d)] if *s == seid && *d == seid
        ),
        "{:?}",
        h.up.seen
    );
    // Without DROBU, nothing is dropped.
    h.up.seen.clear();
    accepted(&mut h, seid, far2(ApplyAction::BUFF | ApplyAction::NOCP));
    accepted(&mut h, seid, far2(ApplyAction::FORW));
    assert!(!h.up.seen.iter().any(|s| matches!(s, Seen::DropBuffered(_))));
}

/// The SMF's answer to a Downlink Data Report: an Update BAR (§7.5.9.2)
/// and DROBU (PFCPSRRsp-Flags) apply to the session; what tep does not
/// apply of it (a DL Buffering Duration, a BAR not the session's) is
/// counted, not applied.
#[test]
fn the_report_response_updates_the_bar_and_drops_the_held() {
    let (mut h, seid) = with_bar();
    accepted(&mut h, seid, far2(ApplyAction::BUFF | ApplyAction::NOCP));
    h.node.downlink_data(h.now, seid, 2);
    h.now += Duration::from_millis(500);
    h.node.handle_timeout(h.now, &mut h.up);
    let t = h.node.poll_transmit().expect("the report");
    let seq = PfcpRepr::parse_bytes(&t.payload).unwrap().sequence;
    h.up.seen.clear();
    let answer = PfcpRepr {
        seid: Some(seid),
        sequence: seq,
        priority: None,
        message: Message::SessionReportResponse(SessionReportResponse {
            cause: Cause::REQUEST_ACCEPTED,
            offending_ie: None,
            update_bar: Some(UpdateBarSrr {
                bar_id: BarId(BAR),
                downlink_data_notification_delay: Some(DownlinkDataNotificationDelay(2)),
                suggested_buffering_packets_count: Some(SuggestedBufferingPacketsCount(1)),
                skipped: Default::default(),
            }),
            flags: Some(PfcpsrRspFlags(PfcpsrRspFlags::DROBU)),
        }),
    };
    h.raw(&answer.to_bytes());
    let b = h.node.session(seid).unwrap().bar.unwrap();
    assert_eq!((b.ddn_delay, b.suggested_packets), (2, Some(1)));
    assert!(
        matches!(
            h.up.seen.as_slice(),
            [Seen::Install(_, r), Seen::DropBuffered(d)]
                if *d == seid && r.buffering_bar() == Some(&b)
        ),
        "{:?}",
        h.up.seen
    );
    assert_eq!(h.node.counter(Counter::UnsupportedIe), 0);
    // The session's BAR with a DL Buffering Duration: installed, the
    // duration counted.
    buffering_report_answered(&mut h, seid, BAR);
    assert!(matches!(h.up.seen.as_slice(), [Seen::Install(..)]));
    assert_eq!(h.node.counter(Counter::UnsupportedIe), 1);
    // Another BAR: nothing installed; it and the duration counted.
    buffering_report_answered(&mut h, seid, 9);
    assert!(h.up.seen.is_empty(), "{:?}", h.up.seen);
    assert_eq!(h.node.counter(Counter::UnsupportedIe), 3);
    assert_eq!(h.node.session(seid).unwrap().bar, Some(b));
}

/// Buffers again, reports (no delay now: 100 ms), and answers with an
/// Update BAR naming `bar`, with a DL Buffering Duration.
fn buffering_report_answered(h: &mut Harness, seid: Seid, bar: u8) {
    accepted(h, seid, far2(ApplyAction::FORW));
    accepted(h, seid, far2(ApplyAction::BUFF | ApplyAction::NOCP));
    h.up.seen.clear();
    h.node.downlink_data(h.now, seid, 2);
    h.now += Duration::from_millis(100);
    h.node.handle_timeout(h.now, &mut h.up);
    let t = h.node.poll_transmit().expect("the report");
    let seq = PfcpRepr::parse_bytes(&t.payload).unwrap().sequence;
    let mut body = vec![];
    let mut w = crate::ie::Writer::new(&mut body);
    w.ie(&Cause::REQUEST_ACCEPTED);
    w.tlv(IeType::UPDATE_BAR_SRR, |w| {
        w.ie(&BarId(bar));
        w.tlv(IeType(47), |w| w.u8(0x21));
    });
    let m = raw_message(msg_type::SESSION_REPORT_RESPONSE, Some(seid), seq, &body);
    h.raw(&m);
}

/// What tep does with a BAR is what it advertises: DDND (the delay) and
/// UDBC (the packet count), not DLBD (DL Buffering Duration) nor BUCP.
#[test]
fn the_buffering_features_advertised_are_those_applied() {
    let f = Harness::new().associate().up_function_features.unwrap();
    let has = |bit| f.has(bit);
    assert!(has(UpFunctionFeatures::DDND) && has(UpFunctionFeatures::UDBC));
    assert!(!has(UpFunctionFeatures::DLBD) && !has(UpFunctionFeatures::BUCP));
}
