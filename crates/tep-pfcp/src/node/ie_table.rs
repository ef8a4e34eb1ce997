//! TS 29.244's Create PDR, PDI, Create FAR, Forwarding Parameters, Create
//! URR, Create QER and Create BAR tables (Release 15: Tables 7.5.2.2-1,
//! 7.5.2.2-2, 7.5.2.3-1, 7.5.2.3-2, 7.5.2.4-1, 7.5.2.5-1, 7.5.2.6-1) and
//! the session-level IEs of Table 7.5.2.1-1 that are not rules, walked IE
//! by IE: each is applied (and seen in the rules the user plane gets),
//! refused with the cause and Failed Rule ID the spec gives, or, of a
//! type tep does not know, discarded as §7.6.1 asks. None is accepted and
//! ignored.

use super::*;

/// What tep does with an IE.
#[derive(Clone, Copy, Debug)]
enum Verdict {
    /// In the base session (sample's PDRs 1 and 2, FARs 1 and 2, URR 1,
    /// QER 1): accepted, and `check` sees it in the installed rules.
    Applied(fn(&Rules) -> bool),
    /// Added to the base session: accepted, and `check` sees it in the
    /// installed rules.
    Added(fn(&Rules) -> bool),
    /// Added to the base session: accepted, with no effect to see
    /// (informational session-level IEs).
    Accepted,
    /// Added: Rule creation/modification Failure naming this rule, the
    /// Offending IE naming the IE.
    Refused(FailedRuleId),
    /// Added at session level: Service not supported, Offending IE.
    NotSupported,
    /// Added, of a type tep does not know: accepted, counted.
    Discarded,
}
use Verdict::*;

/// Where an IE goes: a path of (group type, occurrence) from the message.
type Path = &'static [(IeType, usize)];
const MESSAGE: Path = &[];
const PDR1: Path = &[(IeType::CREATE_PDR, 0)];
const PDI1: Path = &[(IeType::CREATE_PDR, 0), (IeType::PDI, 0)];
const PDI2: Path = &[(IeType::CREATE_PDR, 1), (IeType::PDI, 0)];
const FAR1: Path = &[(IeType::CREATE_FAR, 0)];
const FP1: Path = &[(IeType::CREATE_FAR, 0), (IeType::FORWARDING_PARAMETERS, 0)];
const FP2: Path = &[(IeType::CREATE_FAR, 1), (IeType::FORWARDING_PARAMETERS, 0)];
const URR1: Path = &[(IeType::CREATE_URR, 0)];
const QER1: Path = &[(IeType::CREATE_QER, 0)];

const PDR: FailedRuleId = FailedRuleId::Pdr(1);
const FAR: FailedRuleId = FailedRuleId::Far(1);
const FAR2: FailedRuleId = FailedRuleId::Far(2);
const URR: FailedRuleId = FailedRuleId::Urr(1);
const QER: FailedRuleId = FailedRuleId::Qer(1);

fn pdr(r: &Rules, id: u16) -> &Pdr {
    r.pdr(id).expect("PDR")
}

/// (table, IE name, type, where, verdict): every IE of the tables.
#[rustfmt::skip]
const TABLE: &[(&str, &str, u16, Path, Verdict)] = &[
    ("7.5.2.2-1", "PDR ID", 56, PDR1, Applied(|r| r.pdr(1).is_some() && r.pdr(2).is_some())),
    ("7.5.2.2-1", "Precedence", 29, PDR1, Applied(|r| pdr(r, 1).precedence == 200)),
    ("7.5.2.2-1", "PDI", 2, PDR1, Applied(|r| pdr(r, 1).source == Interface::ACCESS)),
    ("7.5.2.2-1", "Outer Header Removal", 95, PDR1, Applied(|r| pdr(r, 1).outer_header_removal.is_some_and(|o| o.is_gtpu()))),
    ("7.5.2.2-1", "FAR ID", 108, PDR1, Applied(|r| pdr(r, 1).far == 1 && pdr(r, 2).far == 2)),
    ("7.5.2.2-1", "URR ID", 81, PDR1, Applied(|r| pdr(r, 1).urrs.as_slice() == [1])),
    ("7.5.2.2-1", "QER ID", 109, PDR1, Applied(|r| pdr(r, 1).qers.as_slice() == [1])),
    ("7.5.2.2-1", "Activate Predefined Rules", 106, PDR1, Refused(PDR)),
    ("7.5.2.2-2", "Source Interface", 20, PDI1, Applied(|r| pdr(r, 2).source == Interface::N6_LAN)),
    ("7.5.2.2-2", "Local F-TEID", 21, PDI1, Applied(|r| pdr(r, 1).local.is_some_and(|l| l.teid != 0))),
    // N9: a Core-side PDR with a local F-TEID (the user plane decapsulates
    // what arrives on it as its session's downlink; daemon/n9.rs).
    ("7.5.2.2-2", "Local F-TEID (Core side: N9)", 21, PDI2, Added(|r| pdr(r, 2).local.is_some_and(|l| l.teid != 0))),
    ("7.5.2.2-2", "Network Instance", 22, PDI2, Added(|r| pdr(r, 2).network.is_some_and(|n| n.is("internet")))),
    ("7.5.2.2-2", "UE IP address", 93, PDI1, Applied(|r| pdr(r, 2).ue_ip.is_some_and(|u| u.v4 == Some(ue())))),
    ("7.5.2.2-2", "Traffic Endpoint ID", 131, PDI1, Refused(PDR)),
    ("7.5.2.2-2", "SDF Filter", 23, PDI1, Added(|r| pdr(r, 1).sdf.first().and_then(|f| f.flow.as_ref()).is_some_and(|f| f.protocol == Some(17)))),
    ("7.5.2.2-2", "Application ID", 24, PDI1, Refused(PDR)),
    ("7.5.2.2-2", "Ethernet PDU Session Information", 142, PDI1, Refused(PDR)),
    ("7.5.2.2-2", "Ethernet Packet Filter", 132, PDI1, Refused(PDR)),
    ("7.5.2.2-2", "QFI", 124, PDI1, Applied(|r| pdr(r, 1).qfi == Some(9))),
    ("7.5.2.2-2", "QFI (a second one)", 124, PDI1, Refused(PDR)),
    ("7.5.2.2-2", "Framed-Route", 153, PDI1, Refused(PDR)),
    ("7.5.2.2-2", "Framed-Routing", 154, PDI1, Refused(PDR)),
    ("7.5.2.2-2", "Framed-IPv6-Route", 155, PDI1, Refused(PDR)),
    ("7.5.2.2-2", "3GPP Interface Type", 160, PDI1, Refused(PDR)),
    ("7.5.2.2-2", "a Release 16+ IE (type 200)", 200, PDI1, Discarded),
    ("7.5.2.3-1", "FAR ID", 108, FAR1, Applied(|r| r.far(1).is_some() && r.far(2).is_some())),
    ("7.5.2.3-1", "Apply Action", 44, FAR1, Applied(|r| r.far(1).is_some_and(|f| f.action == Action::Forward))),
    ("7.5.2.3-1", "Forwarding Parameters", 4, FAR1, Applied(|r| r.far(1).is_some_and(|f| f.destination == Some(Interface::CORE)))),
    ("7.5.2.3-1", "Duplicating Parameters", 5, FAR1, Refused(FAR)),
    ("7.5.2.3-1", "BAR ID (naming no BAR of the session)", 88, FAR1, Refused(FAR)),
    ("7.5.2.3-2", "Destination Interface", 42, FP2, Applied(|r| r.far(2).is_some_and(|f| f.destination == Some(Interface::ACCESS)))),
    ("7.5.2.3-2", "Network Instance", 22, FP2, Added(|r| r.far(2).is_some_and(|f| f.network.is_some_and(|n| n.is("internet"))))),
    ("7.5.2.3-2", "Redirect Information", 38, FP2, Refused(FAR2)),
    ("7.5.2.3-2", "Outer Header Creation", 84, FP2, Applied(|r| r.far(2).and_then(|f| f.outer).is_some_and(|o| o.teid == 0x100 && o.v4 == Some(GNB)))),
    // N9: an uplink FAR (Core) with an outer header, to a peer UPF.
    ("7.5.2.3-2", "Outer Header Creation (uplink FAR: N9)", 84, FP1, Added(|r| r.far(1).and_then(|f| f.outer).is_some_and(|o| o.teid == 0x99 && o.v4 == Some(GNB2)))),
    ("7.5.2.3-2", "Transport Level Marking", 30, FP2, Added(|r| r.far(2).is_some_and(|f| f.dscp == Some(46)))),
    ("7.5.2.3-2", "Forwarding Policy", 41, FP2, Refused(FAR2)),
    ("7.5.2.3-2", "Header Enrichment", 98, FP2, Refused(FAR2)),
    ("7.5.2.3-2", "Linked Traffic Endpoint ID", 131, FP2, Refused(FAR2)),
    ("7.5.2.3-2", "Proxying", 137, FP2, Refused(FAR2)),
    ("7.5.2.3-2", "3GPP Interface Type", 160, FP2, Refused(FAR2)),
    ("7.5.2.4-1", "URR ID", 81, URR1, Applied(|r| r.urr(1).is_some())),
    ("7.5.2.4-1", "Measurement Method", 62, URR1, Applied(|r| r.urr(1).is_some_and(|u| u.volume && !u.duration))),
    ("7.5.2.4-1", "Reporting Triggers", 37, URR1, Applied(|r| r.urr(1).is_some_and(|u| u.reporting_triggers.0.bits == 0))),
    // Without their trigger (PERIO, VOLTH, TIMTH) a period or threshold would
    // be ignored: refused. With it, applied (tests::periodic_…, usage.rs).
    ("7.5.2.4-1", "Measurement Period", 64, URR1, Refused(URR)),
    ("7.5.2.4-1", "Volume Threshold", 31, URR1, Refused(URR)),
    ("7.5.2.4-1", "Volume Quota", 73, URR1, Added(|r| r.urr(1).is_some_and(|u| u.volume_quota.is_some()))),
    ("7.5.2.4-1", "Event Threshold", 149, URR1, Refused(URR)),
    ("7.5.2.4-1", "Event Quota", 148, URR1, Refused(URR)),
    ("7.5.2.4-1", "Time Threshold", 32, URR1, Refused(URR)),
    ("7.5.2.4-1", "Time Quota", 74, URR1, Added(|r| r.urr(1).is_some_and(|u| u.time_quota.is_some()))),
    ("7.5.2.4-1", "Quota Holding Time", 71, URR1, Refused(URR)),
    ("7.5.2.4-1", "Dropped DL Traffic Threshold", 72, URR1, Refused(URR)),
    ("7.5.2.4-1", "Monitoring Time", 33, URR1, Refused(URR)),
    ("7.5.2.4-1", "Subsequent Volume Threshold", 34, URR1, Refused(URR)),
    ("7.5.2.4-1", "Subsequent Time Threshold", 35, URR1, Refused(URR)),
    ("7.5.2.4-1", "Subsequent Volume Quota", 121, URR1, Refused(URR)),
    ("7.5.2.4-1", "Subsequent Time Quota", 122, URR1, Refused(URR)),
    ("7.5.2.4-1", "Subsequent Event Threshold", 151, URR1, Refused(URR)),
    ("7.5.2.4-1", "Subsequent Event Quota", 150, URR1, Refused(URR)),
    ("7.5.2.4-1", "Inactivity Detection Time", 36, URR1, Added(|r| r.urr(1).is_some_and(|u| u.inactivity.is_some()))),
    ("7.5.2.4-1", "Linked URR ID", 82, URR1, Refused(URR)),
    ("7.5.2.4-1", "Measurement Information", 100, URR1, Refused(URR)),
    ("7.5.2.4-1", "Time Quota Mechanism", 115, URR1, Refused(URR)),
    ("7.5.2.4-1", "Aggregated URRs", 118, URR1, Refused(URR)),
    ("7.5.2.4-1", "FAR ID for Quota Action", 108, URR1, Refused(URR)),
    ("7.5.2.4-1", "Ethernet Inactivity Timer", 146, URR1, Refused(URR)),
    ("7.5.2.4-1", "Additional Monitoring Time", 147, URR1, Refused(URR)),
    ("7.5.2.5-1", "QER ID", 109, QER1, Applied(|r| r.qer(1).is_some())),
    ("7.5.2.5-1", "QER Correlation ID", 28, QER1, Refused(QER)),
    ("7.5.2.5-1", "Gate Status", 25, QER1, Applied(|r| r.qer(1).is_some_and(|q| q.ul_open && q.dl_open))),
    ("7.5.2.5-1", "MBR", 26, QER1, Added(|r| r.qer(1).is_some_and(|q| q.mbr == Some(Mbr { ul: 20_000, dl: 10_000 })))),
    // Recorded, not enforced: admission is the SMF's (session::Qer::gbr).
    ("7.5.2.5-1", "GBR", 27, QER1, Added(|r| r.qer(1).is_some_and(|q| q.gbr == Some(Gbr { ul: 5_000, dl: 8_000 })))),
    ("7.5.2.5-1", "Packet Rate", 94, QER1, Refused(QER)),
    ("7.5.2.5-1", "DL Flow Level Marking", 97, QER1, Refused(QER)),
    ("7.5.2.5-1", "QFI", 124, QER1, Applied(|r| r.qer(1).is_some_and(|q| q.qfi == Some(9)))),
    ("7.5.2.5-1", "RQI", 123, QER1, Refused(QER)),
    ("7.5.2.5-1", "Paging Policy Indicator", 158, QER1, Refused(QER)),
    ("7.5.2.5-1", "Averaging Window", 157, QER1, Refused(QER)),
    ("7.5.2.6-1", "Create BAR (BAR ID only)", 85, MESSAGE, Added(|r| r.bar == Some(Bar { id: 1, ddn_delay: 0, suggested_packets: None }))),
    ("7.5.2.6-1", "Downlink Data Notification Delay", 46, MESSAGE, Added(|r| r.bar.is_some_and(|b| b.ddn_delay == 1))),
    ("7.5.2.6-1", "Suggested Buffering Packets Count", 140, MESSAGE, Added(|r| r.bar.is_some_and(|b| b.suggested_packets == Some(1)))),
    ("7.5.2.1-1", "Create Traffic Endpoint", 127, MESSAGE, NotSupported),
    ("7.5.2.1-1", "User Plane Inactivity Timer", 117, MESSAGE, NotSupported),
    ("7.5.2.1-1", "Trace Information", 152, MESSAGE, NotSupported),
    ("7.5.2.1-1", "SGW-C FQ-CSID", 65, MESSAGE, NotSupported),
    ("7.5.2.1-1", "PDN Type", 113, MESSAGE, Accepted),
    ("7.5.2.1-1", "User ID", 141, MESSAGE, Accepted),
    ("7.5.2.1-1", "APN/DNN", 159, MESSAGE, Accepted),
    ("7.5.2.1-1", "S-NSSAI (Release 16, type 257)", 257, MESSAGE, Discarded),
];

/// `ies` with `child` appended inside the group `path` names (lengths
/// patched on the way out).
fn inject(ies: &[u8], path: &[(IeType, usize)], child: &[u8]) -> Vec<u8> {
    let Some((&(ty, nth), rest)) = path.split_first() else {
        return [ies, child].concat();
    };
    let mut out = vec![];
    let mut seen = 0;
    for ie in crate::ie::Ies::new(ies, IeType(0)) {
        let ie = ie.unwrap();
        let value = if ie.ty == ty && seen == nth {
            inject(ie.value, rest, child)
        } else {
            ie.value.to_vec()
        };
        seen += usize::from(ie.ty == ty);
        out.extend_from_slice(&ie.ty.0.to_be_bytes());
        out.extend_from_slice(&(value.len() as u16).to_be_bytes());
        out.extend_from_slice(&value);
    }
    out
}

/// The IE of type `ty` as the test sends it: a Create BAR with BAR ID 1
/// (and the BAR child the entry names), any other with filler content
/// (tep refuses or discards it without reading it).
fn child_of(ty: u16) -> Vec<u8> {
    ies(|w| match ty {
        85 => w.tlv(IeType::CREATE_BAR, |w| w.ie(&BarId(1))),
        46 | 140 => w.tlv(IeType::CREATE_BAR, |w| {
            w.ie(&BarId(1));
            w.tlv(IeType(ty), |w| w.u8(1));
        }),
        124 => w.ie(&Qfi(5)),
        31 => w.ie(&VolumeThreshold {
            total: Some(1000),
            ..Default::default()
        }),
        73 => w.ie(&VolumeQuota(VolumeThreshold {
            total: Some(1000),
            ..Default::default()
        })),
        22 => w.ie(&NetworkInstance(b"\x08internet".to_vec())),
        23 => w.ie(&SdfFilter {
            flow_description: Some(b"permit out 17 from any to assigned 5000-5010".to_vec()),
            ..Default::default()
        }),
        21 => w.ie(&FTeid::Choose {
            v4: true,
            v6: false,
            choose_id: Some(9),
        }),
        84 => w.ie(&OuterHeaderCreation::gtpu(0x99, GNB2.into())),
        26 => w.ie(&Mbr {
            ul: 20_000,
            dl: 10_000,
        }),
        27 => w.ie(&Gbr {
            ul: 5_000,
            dl: 8_000,
        }),
        // DSCP 46 (EF), the mask TS 29.212 gives.
        30 => w.ie(&TransportLevelMarking {
            tos: 0xb8,
            mask: 0xfc,
        }),
        _ => w.tlv(IeType(ty), |w| w.bytes(&[1, 0, 0, 0])),
    })
}

/// One entry: the session established with it, or refused as it says.
fn walk_one(name: &str, ty: u16, path: Path, verdict: Verdict) {
    let mut h = Harness::new();
    h.associate();
    let base = PfcpRepr {
        seid: Some(0),
        sequence: 1,
        priority: None,
        message: Message::SessionEstablishmentRequest(est_request()),
    }
    .to_bytes()[16..]
        .to_vec();
    let body = match verdict {
        Applied(_) => base,
        _ => inject(&base, path, &child_of(ty)),
    };
    let unknown = h.node.counter(Counter::UnknownIe);
    let e = establishment_response(&mut h, &body);
    let what = format!("{name} ({ty})");
    match verdict {
        Applied(_) | Added(_) | Accepted | Discarded => {
            assert_eq!(e.cause, Cause::REQUEST_ACCEPTED, "{what}: {e:?}");
            let rules = h.node.session(up_seid(&e)).expect("the session");
            if let Applied(check) | Added(check) = verdict {
                assert!(check(rules), "{what}: not in {rules:?}");
            }
            let discarded = h.node.counter(Counter::UnknownIe) - unknown;
            assert_eq!(discarded, u64::from(matches!(verdict, Discarded)), "{what}");
        }
        Refused(rule) => {
            assert_eq!(
                (e.cause, e.failed_rule_id),
                (Cause::RULE_CREATION_MODIFICATION_FAILURE, Some(rule)),
                "{what}"
            );
            assert_eq!(e.offending_ie, Some(OffendingIe(IeType(ty))), "{what}");
            assert_eq!(h.node.session_count(), 0, "{what}");
        }
        NotSupported => {
            assert_eq!(
                (e.cause, e.offending_ie, e.failed_rule_id),
                (
                    Cause::SERVICE_NOT_SUPPORTED,
                    Some(OffendingIe(IeType(ty))),
                    None
                ),
                "{what}"
            );
            assert_eq!(h.node.session_count(), 0, "{what}");
        }
    }
}

#[test]
fn every_ie_of_the_create_tables_is_applied_refused_or_unknown() {
    for &(table, name, ty, path, verdict) in TABLE {
        walk_one(&format!("Table {table} {name}"), ty, path, verdict);
    }
    // Each table is walked whole: every IE of it is in TABLE (once, or
    // once per use: a second QFI, an N9 F-TEID, an uplink outer header).
    let count = |t: &str| TABLE.iter().filter(|e| e.0 == t).count();
    assert_eq!(
        [
            count("7.5.2.2-1"),
            count("7.5.2.2-2"),
            count("7.5.2.3-1"),
            count("7.5.2.3-2"),
            count("7.5.2.4-1"),
            count("7.5.2.5-1"),
            count("7.5.2.6-1"),
        ],
        [8, 17, 5, 11, 27, 11, 3]
    );
}

/// Values of IEs tep decodes that ask for what it does not do: refused
/// by the rule, the Offending IE naming the IE.
#[test]
fn values_tep_does_not_apply_fail_their_rule() {
    type Edit = fn(&mut SessionEstablishmentRequest);
    let cases: [(Edit, FailedRuleId, IeType); 10] = [
        (
            // A Flow Description outside the IPFilterRule subset.
            |m| {
                m.create_pdrs[1].pdi.sdf_filters = vec![SdfFilter {
                    flow_description: Some(b"permit out ip from any to assigned frag".to_vec()),
                    ..Default::default()
                }]
            },
            FailedRuleId::Pdr(2),
            IeType::SDF_FILTER,
        ),
        (
            // An SDF Filter ID alone: a filter tep never received.
            |m| {
                m.create_pdrs[0].pdi.sdf_filters = vec![SdfFilter {
                    filter_id: Some(7),
                    ..Default::default()
                }]
            },
            PDR,
            IeType::SDF_FILTER,
        ),
        (
            |m| {
                let f = SdfFilter {
                    flow_description: Some(b"permit out 6 from any 80 to assigned".to_vec()),
                    ..Default::default()
                };
                m.create_pdrs[0].pdi.sdf_filters = vec![f; MAX_SDF_FILTERS + 1];
            },
            PDR,
            IeType::SDF_FILTER,
        ),
        (
            // The UE as the source of what comes from the core.
            |m| {
                let ue = m.create_pdrs[1].pdi.ue_ip_address.as_mut().unwrap();
                ue.destination = false;
            },
            FailedRuleId::Pdr(2),
            IeType::UE_IP_ADDRESS,
        ),
        (
            |m| {
                m.create_fars[0].apply_action =
                    ApplyAction::new(ApplyAction::FORW | ApplyAction::DUPL)
            },
            FAR,
            IeType::APPLY_ACTION,
        ),
        (
            |m| {
                let fp = m.create_fars[1].forwarding_parameters.as_mut().unwrap();
                fp.outer_header_creation.as_mut().unwrap().desc |= OuterHeaderCreation::N19;
            },
            FAR2,
            IeType::OUTER_HEADER_CREATION,
        ),
        (
            // A marking of some of the DSCP's bits: the others would be
            // each packet's own.
            |m| {
                let fp = m.create_fars[1].forwarding_parameters.as_mut().unwrap();
                fp.transport_level_marking = Some(TransportLevelMarking {
                    tos: 0xb8,
                    mask: 0xe0,
                });
            },
            FAR2,
            IeType::TRANSPORT_LEVEL_MARKING,
        ),
        (
            |m| m.create_urrs[0].measurement_method.0 |= MeasurementMethod::EVENT,
            URR,
            IeType::MEASUREMENT_METHOD,
        ),
        (
            // Quota holding time: not done.
            |m| {
                m.create_urrs[0].reporting_triggers =
                    ReportingTriggers(Bitmap::new(ReportingTriggers::QUHTI, 2))
            },
            URR,
            IeType::REPORTING_TRIGGERS,
        ),
        (
            // Linked usage reporting: not done.
            |m| {
                m.create_urrs[0].reporting_triggers =
                    ReportingTriggers(Bitmap::new(ReportingTriggers::LIUSA, 2))
            },
            URR,
            IeType::REPORTING_TRIGGERS,
        ),
    ];
    for (i, (edit, rule, ie)) in cases.into_iter().enumerate() {
        let mut h = Harness::new();
        h.associate();
        let mut m = est_request();
        edit(&mut m);
        let e = rejected_establishment(&mut h, m);
        assert_eq!(
            (e.cause, e.failed_rule_id, e.offending_ie),
            (
                Cause::RULE_CREATION_MODIFICATION_FAILURE,
                Some(rule),
                Some(OffendingIe(ie))
            ),
            "case {i}"
        );
        assert_eq!(h.node.counter(Counter::UnsupportedIe), 1, "case {i}");
    }
}

/// A modification asking what tep does not do is refused whole: the
/// session keeps its rules.
#[test]
fn a_modification_with_what_tep_does_not_apply_changes_nothing() {
    let (mut h, seid) = established();
    let before = h.node.session(seid).unwrap().clone();
    let modification = |seq: u32, body: Vec<u8>| {
        raw_message(
            msg_type::SESSION_MODIFICATION_REQUEST,
            Some(seid),
            50 + seq,
            &body,
        )
    };
    // Update QER 1 closing the gates, with a Packet Rate.
    let packet_rate = ies(|w| {
        w.tlv(IeType::UPDATE_QER, |w| {
            w.ie(&QerId(1));
            w.ie(&GateStatus {
                ul: GateStatus::CLOSED,
                dl: GateStatus::CLOSED,
            });
            w.tlv(IeType(94), |w| w.bytes(&[3, 0, 1, 0, 1]));
        })
    });
    // SNDEM, a FAR's flag, among the message's; an Update BAR with a DL
    // Buffering Duration (an Update BAR of a Session Report Response's).
    let sndem = ies(|w| w.ie(&PfcpsmReqFlags(PfcpsmReqFlags::SNDEM)));
    let update_bar = ies(|w| {
        w.tlv(IeType::UPDATE_BAR, |w| {
            w.ie(&BarId(1));
            w.tlv(IeType(47), |w| w.u8(0x21));
        })
    });
    let want = [
        (
            Cause::RULE_CREATION_MODIFICATION_FAILURE,
            Some(QER),
            IeType(94),
        ),
        (Cause::SERVICE_NOT_SUPPORTED, None, IeType::PFCPSMREQ_FLAGS),
        (
            Cause::RULE_CREATION_MODIFICATION_FAILURE,
            Some(FailedRuleId::Bar(1)),
            IeType(47),
        ),
    ];
    for (seq, (body, (cause, rule, ie))) in [packet_rate, sndem, update_bar]
        .into_iter()
        .zip(want)
        .enumerate()
    {
        let out = h.raw(&modification(seq as u32, body));
        let r = PfcpRepr::parse_bytes(&out[0].payload).unwrap();
        let Message::SessionModificationResponse(m) = r.message else {
            panic!("{r:?}")
        };
        assert_eq!(
            (m.cause, m.failed_rule_id, m.offending_ie),
            (cause, rule, Some(OffendingIe(ie)))
        );
        assert_eq!(h.node.session(seid), Some(&before));
    }
    assert!(h.up.seen.is_empty(), "nothing installed: {:?}", h.up.seen);
}

/// A rule the user plane cannot enforce as asked: Rule creation/
/// modification Failure naming it, nothing established.
#[test]
fn a_rule_the_user_plane_cannot_enforce_is_named() {
    let mut h = Harness::new();
    h.associate();
    h.up.refuse = Some(crate::node::Refused::rule(
        FailedRuleId::Pdr(2),
        Some(IeType::F_TEID),
    ));
    let e = rejected_establishment(&mut h, est_request());
    assert_eq!(
        (e.cause, e.failed_rule_id, e.offending_ie),
        (
            Cause::RULE_CREATION_MODIFICATION_FAILURE,
            Some(FailedRuleId::Pdr(2)),
            Some(OffendingIe(IeType::F_TEID))
        )
    );
    assert_eq!(h.node.counter(Counter::NotEnforceable), 1);
    assert_eq!(h.node.counter(Counter::UserPlaneRefused), 0);
    assert_eq!(h.node.teids_in_use(), 0);
}

/// An Update QER's GBR and an Update FAR's Transport Level Marking
/// replace the QER's and the FAR's; a marking with a mask of no DSCP
/// bits clears the FAR's.
#[test]
fn updates_set_the_gbr_and_the_marking() {
    let (mut h, seid) = established();
    let modify = |h: &mut Harness, seq: u32, body: Vec<u8>| {
        let m = raw_message(
            msg_type::SESSION_MODIFICATION_REQUEST,
            Some(seid),
            60 + seq,
            &body,
        );
        let out = h.raw(&m);
        let r = PfcpRepr::parse_bytes(&out[0].payload).unwrap();
        let Message::SessionModificationResponse(m) = r.message else {
            panic!("{r:?}")
        };
        assert_eq!(m.cause, Cause::REQUEST_ACCEPTED, "{m:?}");
    };
    let mark = |tos: u8, mask: u8| {
        ies(|w| {
            w.tlv(IeType::UPDATE_FAR, |w| {
                w.ie(&FarId(2));
                w.tlv(IeType::UPDATE_FORWARDING_PARAMETERS, |w| {
                    w.ie(&TransportLevelMarking { tos, mask })
                });
            });
            w.tlv(IeType::UPDATE_QER, |w| {
                w.ie(&QerId(1));
                w.ie(&Gbr {
                    ul: 1,
                    dl: u64::from(tos),
                });
            });
        })
    };
    modify(&mut h, 0, mark(0x88, 0xff));
    let r = h.node.session(seid).unwrap();
    assert_eq!(r.far(2).unwrap().dscp, Some(34));
    assert_eq!(r.qer(1).unwrap().gbr, Some(Gbr { ul: 1, dl: 0x88 }));
    modify(&mut h, 1, mark(0x88, 0x03));
    assert_eq!(h.node.session(seid).unwrap().far(2).unwrap().dscp, None);
}
