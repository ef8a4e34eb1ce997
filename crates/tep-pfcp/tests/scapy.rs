//! tep-pfcp against scapy's `contrib/pfcp.py`, a PFCP implementation tep
//! did not write:
//! - the messages scapy built (tests/vectors/scapy.hex, from
//!   `tests/scapy_pfcp.py generate`) parse to the reprs written out here,
//!   and emit back byte for byte where they hold no IE tep skips;
//! - the messages tep emits (the node's own responses among them) dissect
//!   in scapy (`tests/scapy_pfcp.py dump`) to the same fields. That part
//!   runs scapy, so it needs /usr/bin/python3 with python3-scapy.

use std::collections::HashMap;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::process::{Command, Stdio};

use tep_pfcp::message::*;
use tep_pfcp::rules::*;
use tep_pfcp::types::*;
use tep_pfcp::{sample, IeType, PfcpRepr};

const V4: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 1);
const SMF: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 10);
const GNB: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 5);
const GNB2: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 6);
const UP_SEID: u64 = 0x1_0000_0001;

fn vectors() -> Vec<(String, Vec<u8>)> {
    let text = include_str!("vectors/scapy.hex");
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let (name, hex) = l.split_once(' ').unwrap();
            let b = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
                .collect();
            (name.to_string(), b)
        })
        .collect()
}

fn repr(seq: u32, seid: Option<u64>, message: Message) -> PfcpRepr {
    PfcpRepr {
        seid,
        sequence: seq,
        priority: None,
        message,
    }
}

fn fqdn(s: &str) -> NodeId {
    NodeId::fqdn(s).unwrap()
}

fn internet() -> Option<NetworkInstance> {
    Some(NetworkInstance(b"\x08internet".to_vec()))
}

fn expected() -> Vec<(&'static str, PfcpRepr, bool)> {
    // (name, repr, whether tep re-emits the very bytes: false where scapy's
    // message holds an IE tep skips)
    let ul = sample::uplink_pdr(None);
    let dl = sample::downlink_pdr(Ipv4Addr::new(10, 45, 0, 7), None);
    let pdr = |id: u16, source, f_teid, ue_ip_address| CreatePdr {
        pdr_id: PdrId(id),
        precedence: Precedence(10),
        pdi: Pdi {
            sdf_filters: vec![],
            source_interface: SourceInterface(source),
            local_f_teid: f_teid,
            network_instance: None,
            ue_ip_address,
            qfi: None,
            skipped: Default::default(),
        },
        outer_header_removal: None,
        far_id: Some(FarId(id as u32)),
        urr_ids: vec![],
        qer_ids: vec![],
        skipped: Default::default(),
    };
    let far = |id: u32, bits: u64| CreateFar {
        far_id: FarId(id),
        apply_action: ApplyAction::new(bits),
        forwarding_parameters: None,
        bar_id: None,
        skipped: Default::default(),
    };
    vec![
        (
            "heartbeat_request",
            repr(
                1,
                None,
                Message::HeartbeatRequest(HeartbeatRequest {
                    recovery_time_stamp: RecoveryTimeStamp(3_950_000_000),
                }),
            ),
            false,
        ),
        (
            "heartbeat_response",
            repr(
                1,
                None,
                Message::HeartbeatResponse(HeartbeatResponse {
                    recovery_time_stamp: RecoveryTimeStamp(3_900_000_000),
                }),
            ),
            true,
        ),
        (
            "association_setup_request",
            repr(
                2,
                None,
                Message::AssociationSetupRequest(AssociationSetupRequest {
                    node_id: fqdn("smf.test"),
                    recovery_time_stamp: RecoveryTimeStamp(3_900_000_000),
                    up_function_features: None,
                }),
            ),
            false,
        ),
        (
            "association_setup_response",
            repr(
                2,
                None,
                Message::AssociationSetupResponse(AssociationSetupResponse {
                    node_id: NodeId::V4(V4),
                    cause: Cause::REQUEST_ACCEPTED,
                    offending_ie: None,
                    recovery_time_stamp: RecoveryTimeStamp(3_950_000_000),
                    // The vector's features (FTUP, EMPU): a sample, not
                    // what tep advertises now.
                    up_function_features: Some(UpFunctionFeatures(Bitmap::new(
                        UpFunctionFeatures::FTUP | UpFunctionFeatures::EMPU,
                        2,
                    ))),
                }),
            ),
            true,
        ),
        (
            "association_update_request",
            repr(
                3,
                None,
                Message::AssociationUpdateRequest(AssociationUpdateRequest {
                    node_id: NodeId::V4(SMF),
                    up_function_features: None,
                }),
            ),
            true,
        ),
        (
            "association_release_request",
            repr(
                4,
                None,
                Message::AssociationReleaseRequest(AssociationReleaseRequest {
                    node_id: NodeId::V6("2001:db8::10".parse().unwrap()),
                }),
            ),
            true,
        ),
        (
            "association_release_response",
            repr(
                4,
                None,
                Message::AssociationReleaseResponse(AssociationReleaseResponse {
                    node_id: NodeId::V4(V4),
                    cause: Cause::REQUEST_ACCEPTED,
                    offending_ie: None,
                }),
            ),
            true,
        ),
        (
            "session_establishment_request",
            repr(
                5,
                Some(0),
                Message::SessionEstablishmentRequest(SessionEstablishmentRequest {
                    node_id: NodeId::V4(SMF),
                    cp_f_seid: FSeid {
                        seid: 7000,
                        v4: Some(SMF),
                        v6: None,
                    },
                    create_pdrs: vec![ul, dl],
                    create_fars: vec![
                        sample::far_to_core(internet()),
                        sample::far_to_gnb(0x100, GNB),
                    ],
                    create_urrs: vec![CreateUrr {
                        urr_id: UrrId(1),
                        measurement_method: MeasurementMethod(MeasurementMethod::VOLUM),
                        reporting_triggers: ReportingTriggers(Bitmap::new(
                            ReportingTriggers::VOLTH,
                            2,
                        )),
                        volume_threshold: Some(VolumeThreshold {
                            total: Some(1_000_000),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }],
                    create_qers: vec![CreateQer {
                        qer_id: QerId(1),
                        mbr: None,
                        gbr: None,
                        gate_status: GateStatus {
                            ul: GateStatus::OPEN,
                            dl: GateStatus::CLOSED,
                        },
                        qfi: Some(Qfi(9)),
                        skipped: Default::default(),
                    }],
                    create_bars: vec![],
                    skipped: Default::default(),
                }),
            ),
            false,
        ),
        (
            "session_establishment_request_v6",
            repr(
                6,
                Some(0),
                Message::SessionEstablishmentRequest(SessionEstablishmentRequest {
                    node_id: NodeId::V4(SMF),
                    cp_f_seid: FSeid {
                        seid: 7001,
                        v4: None,
                        v6: Some("2001:db8::10".parse().unwrap()),
                    },
                    create_pdrs: vec![
                        pdr(
                            1,
                            Interface::ACCESS,
                            Some(FTeid::Assigned {
                                teid: 0x1234,
                                v4: None,
                                v6: Some("2001:db8::1".parse().unwrap()),
                            }),
                            None,
                        ),
                        pdr(
                            2,
                            Interface::CORE,
                            None,
                            Some(UeIpAddress {
                                v6: Some("2001:db8:45::".parse::<Ipv6Addr>().unwrap()),
                                destination: true,
                                ..Default::default()
                            }),
                        ),
                    ],
                    create_fars: vec![
                        far(1, ApplyAction::DROP),
                        far(2, ApplyAction::BUFF | ApplyAction::NOCP),
                    ],
                    create_urrs: vec![],
                    create_qers: vec![],
                    create_bars: vec![],
                    skipped: Default::default(),
                }),
            ),
            true,
        ),
        (
            "session_establishment_response",
            repr(
                5,
                Some(7000),
                Message::SessionEstablishmentResponse(SessionEstablishmentResponse {
                    node_id: NodeId::V4(V4),
                    cause: Cause::REQUEST_ACCEPTED,
                    offending_ie: None,
                    up_f_seid: Some(FSeid {
                        seid: UP_SEID,
                        v4: Some(V4),
                        v6: None,
                    }),
                    created_pdrs: vec![CreatedPdr {
                        pdr_id: PdrId(1),
                        local_f_teid: Some(FTeid::Assigned {
                            teid: 1,
                            v4: Some(V4),
                            v6: None,
                        }),
                    }],
                    failed_rule_id: None,
                }),
            ),
            true,
        ),
        (
            "session_establishment_rejected",
            repr(
                5,
                Some(0),
                Message::SessionEstablishmentResponse(SessionEstablishmentResponse {
                    node_id: NodeId::V4(V4),
                    cause: Cause::RULE_CREATION_MODIFICATION_FAILURE,
                    failed_rule_id: Some(FailedRuleId::Pdr(2)),
                    ..Default::default()
                }),
            ),
            true,
        ),
        (
            "session_modification_request",
            repr(
                7,
                Some(UP_SEID),
                Message::SessionModificationRequest(SessionModificationRequest {
                    remove_pdrs: vec![RemovePdr { pdr_id: PdrId(3) }],
                    remove_fars: vec![RemoveFar { far_id: FarId(3) }],
                    remove_urrs: vec![RemoveUrr { urr_id: UrrId(3) }],
                    remove_qers: vec![RemoveQer { qer_id: QerId(3) }],
                    update_pdrs: vec![UpdatePdr {
                        pdr_id: PdrId(1),
                        outer_header_removal: None,
                        precedence: None,
                        pdi: None,
                        far_id: Some(FarId(4)),
                        urr_ids: vec![],
                        qer_ids: vec![],
                        skipped: Default::default(),
                    }],
                    update_fars: vec![UpdateFar {
                        far_id: FarId(2),
                        apply_action: Some(ApplyAction::new(ApplyAction::FORW)),
                        update_forwarding_parameters: Some(UpdateForwardingParameters {
                            destination_interface: Some(DestinationInterface(Interface::ACCESS)),
                            network_instance: None,
                            outer_header_creation: Some(OuterHeaderCreation::gtpu(
                                0x200,
                                GNB2.into(),
                            )),
                            transport_level_marking: None,
                            flags: Some(PfcpsmReqFlags(PfcpsmReqFlags::SNDEM)),
                            skipped: Default::default(),
                        }),
                        bar_id: None,
                        skipped: Default::default(),
                    }],
                    update_urrs: vec![UpdateUrr {
                        urr_id: UrrId(1),
                        measurement_method: None,
                        reporting_triggers: None,
                        volume_threshold: Some(VolumeThreshold {
                            downlink: Some(5000),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }],
                    update_qers: vec![UpdateQer {
                        qer_id: QerId(1),
                        mbr: None,
                        gbr: None,
                        gate_status: Some(GateStatus::open()),
                        qfi: None,
                        skipped: Default::default(),
                    }],
                    query_urrs: vec![QueryUrr { urr_id: UrrId(1) }],
                    ..Default::default()
                }),
            ),
            true,
        ),
        (
            "session_modification_response",
            repr(
                7,
                Some(7000),
                Message::SessionModificationResponse(SessionModificationResponse {
                    cause: Cause::REQUEST_ACCEPTED,
                    usage_reports: vec![UsageReportSmr(UsageReport {
                        urr_id: UrrId(1),
                        ur_seqn: UrSeqn(0),
                        // scapy 2.5 writes the Rel-14 2-octet form.
                        trigger: UsageReportTrigger(Bitmap::new(UsageReportTrigger::IMMER, 2)),
                        start_time: None,
                        end_time: None,
                        volume: Some(VolumeMeasurement {
                            total: Some(4000),
                            uplink: Some(1000),
                            downlink: Some(3000),
                            ..Default::default()
                        }),
                        duration: None,
                    })],
                    ..Default::default()
                }),
            ),
            true,
        ),
        (
            "session_deletion_request",
            repr(
                8,
                Some(UP_SEID),
                Message::SessionDeletionRequest(SessionDeletionRequest {}),
            ),
            true,
        ),
        (
            "session_deletion_response",
            repr(
                8,
                Some(7000),
                Message::SessionDeletionResponse(SessionDeletionResponse {
                    cause: Cause::REQUEST_ACCEPTED,
                    offending_ie: None,
                    usage_reports: vec![UsageReportSdr(UsageReport {
                        urr_id: UrrId(1),
                        ur_seqn: UrSeqn(1),
                        trigger: UsageReportTrigger(Bitmap::new(UsageReportTrigger::TERMR, 2)),
                        start_time: None,
                        end_time: None,
                        volume: Some(VolumeMeasurement {
                            total: Some(5),
                            ..Default::default()
                        }),
                        duration: None,
                    })],
                }),
            ),
            true,
        ),
        (
            "session_not_found",
            repr(
                8,
                Some(0),
                Message::SessionDeletionResponse(SessionDeletionResponse {
                    cause: Cause::SESSION_CONTEXT_NOT_FOUND,
                    ..Default::default()
                }),
            ),
            true,
        ),
        (
            "mandatory_ie_missing",
            repr(
                5,
                Some(0),
                Message::SessionEstablishmentResponse(SessionEstablishmentResponse {
                    node_id: NodeId::V4(V4),
                    cause: Cause::MANDATORY_IE_MISSING,
                    offending_ie: Some(OffendingIe(IeType::F_SEID)),
                    ..Default::default()
                }),
            ),
            true,
        ),
        (
            "session_report_request",
            repr(
                9,
                Some(7000),
                Message::SessionReportRequest(SessionReportRequest {
                    report_type: ReportType(ReportType::DLDR),
                    downlink_data_report: Some(DownlinkDataReport {
                        pdr_ids: vec![PdrId(2)],
                    }),
                    usage_reports: vec![],
                    error_indication_report: None,
                }),
            ),
            true,
        ),
        (
            "session_report_response",
            repr(
                9,
                Some(UP_SEID),
                Message::SessionReportResponse(SessionReportResponse {
                    cause: Cause::REQUEST_ACCEPTED,
                    offending_ie: None,
                    ..Default::default()
                }),
            ),
            true,
        ),
    ]
}

#[test]
fn scapys_messages_parse_to_the_expected_reprs() {
    let v: HashMap<_, _> = vectors().into_iter().collect();
    let exp = expected();
    assert_eq!(v.len(), exp.len(), "every vector has its expectation");
    for (name, want, exact) in exp {
        let bytes = &v[name];
        let got = PfcpRepr::parse_bytes(bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(got, want, "{name}");
        let again = got.to_bytes();
        if exact {
            assert_eq!(&again, bytes, "{name}: re-emitted");
        } else {
            assert_eq!(PfcpRepr::parse_bytes(&again).unwrap(), want, "{name}");
        }
    }
}

/// Runs scapy's dissector over `msgs`; returns its lines, or `None` (after
/// `tep_testing::skip`) without scapy.
fn scapy_dump(test: &str, msgs: &[(&str, Vec<u8>)]) -> Option<Vec<String>> {
    let py = "/usr/bin/python3";
    let ok = Command::new(py)
        .args(["-c", "import scapy.contrib.pfcp"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        tep_testing::skip(format!("{test}: needs /usr/bin/python3 with python3-scapy"));
        return None;
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/scapy_pfcp.py");
    let mut child = Command::new(py)
        .args([script, "dump"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = String::new();
    for (name, b) in msgs {
        input.push_str(name);
        input.push(' ');
        for x in b {
            input.push_str(&format!("{x:02x}"));
        }
        input.push('\n');
    }
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "scapy dump failed");
    Some(
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect(),
    )
}

#[test]
fn the_generator_still_writes_the_checked_in_vectors() {
    let test = "the_generator_still_writes_the_checked_in_vectors";
    // Dumping the checked-in vectors through scapy and regenerating them
    // in a scratch copy: the same bytes.
    let Some(_) = scapy_dump(test, &[]) else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("tep-pfcp-vectors-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("vectors")).unwrap();
    let script = dir.join("scapy_pfcp.py");
    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/scapy_pfcp.py"),
        &script,
    )
    .unwrap();
    let st = Command::new("/usr/bin/python3")
        .arg(&script)
        .arg("generate")
        .status()
        .unwrap();
    assert!(st.success());
    let fresh = std::fs::read_to_string(dir.join("vectors/scapy.hex")).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(fresh, include_str!("vectors/scapy.hex"));
}

/// Lines of `dump` for message `name`.
fn lines_of<'a>(all: &'a [String], name: &str) -> Vec<&'a str> {
    all.iter()
        .filter_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .collect()
}

fn has(lines: &[&str], want: &str) {
    assert!(
        lines.iter().any(|l| l == &want),
        "scapy has no line {want:?}:\n{}",
        lines.join("\n")
    );
}

#[test]
fn what_tep_emits_dissects_in_scapy_to_the_same_fields() {
    let test = "what_tep_emits_dissects_in_scapy_to_the_same_fields";
    // tep's own messages: every vector re-emitted, and the ones only the
    // node writes (Rel-15 Usage Report fields scapy 2.5 predates included).
    let mut msgs: Vec<(&str, Vec<u8>)> = expected()
        .into_iter()
        .map(|(n, r, _)| (n, r.to_bytes()))
        .collect();
    let report = repr(
        11,
        Some(7000),
        Message::SessionModificationResponse(SessionModificationResponse {
            cause: Cause::REQUEST_ACCEPTED,
            usage_reports: vec![UsageReportSmr(UsageReport {
                urr_id: UrrId(1),
                ur_seqn: UrSeqn(4),
                trigger: UsageReportTrigger::new(UsageReportTrigger::IMMER),
                start_time: Some(StartTime(3_950_000_000)),
                end_time: Some(EndTime(3_950_000_002)),
                volume: Some(VolumeMeasurement {
                    total: Some(4000),
                    uplink: Some(1000),
                    downlink: Some(3000),
                    total_packets: Some(30),
                    uplink_packets: Some(10),
                    downlink_packets: Some(20),
                }),
                duration: Some(DurationMeasurement(2)),
            })],
            created_pdrs: vec![CreatedPdr {
                pdr_id: PdrId(7),
                local_f_teid: Some(FTeid::Assigned {
                    teid: 0xdead_beef,
                    v4: Some(V4),
                    v6: Some("2001:db8::1".parse().unwrap()),
                }),
            }],
            failed_rule_id: None,
            offending_ie: None,
        }),
    );
    msgs.push(("tep_usage_report", report.to_bytes()));
    let Some(all) = scapy_dump(test, &msgs) else {
        return;
    };
    for (name, bytes) in &msgs {
        let l = lines_of(&all, name);
        assert!(!l.is_empty(), "{name}: scapy printed nothing");
        // The header: type, sequence number, SEID, length as tep wrote them.
        let r = PfcpRepr::parse_bytes(bytes).unwrap();
        let seid = r.seid.map_or(String::new(), |s| format!(" seid={s}"));
        let want = format!(
            "msg type={} seq={}{seid} S={} len={}",
            r.message.msg_type(),
            r.sequence,
            r.seid.is_some() as u8,
            bytes.len() - 4
        );
        assert_eq!(l[0], want, "{name}");
        assert!(
            !l.iter()
                .any(|l| l.contains("IE_NotImplemented") || l.starts_with("raw")),
            "{name}: scapy did not know an IE:\n{}",
            l.join("\n")
        );
    }
    let l = lines_of(&all, "session_establishment_request");
    has(
        &l,
        "IE_NodeId spare=0 id_type=0 ipv4=192.0.2.10 extra_data=",
    );
    has(
        &l,
        "IE_FSEID spare=0 v4=1 v6=0 seid=7000 ipv4=192.0.2.10 extra_data=",
    );
    has(
        &l,
        "IE_CreatePDR/IE_PDI/IE_FTEID spare=0 CHID=1 CH=1 V6=0 V4=1 choose_id=1 extra_data=",
    );
    has(
        &l,
        "IE_CreatePDR/IE_PDI/IE_NetworkInstance instance=internet",
    );
    has(&l, "IE_CreatePDR/IE_PDI/IE_QFI spare=0 QFI=9 extra_data=");
    has(
        &l,
        "IE_CreatePDR/IE_PDI/IE_UE_IP_Address spare=0 SD=1 V4=1 V6=0 ipv4=10.45.0.7 extra_data=",
    );
    has(
        &l,
        "IE_CreatePDR/IE_OuterHeaderRemoval header=0 extra_data=",
    );
    has(
        &l,
        "IE_CreateFAR/IE_ForwardingParameters/IE_OuterHeaderCreation STAG=0 CTAG=0 IPV6=0 IPV4=0 UDPIPV6=0 UDPIPV4=0 GTPUUDPIPV6=0 GTPUUDPIPV4=1 spare=0 TEID=256 ipv4=203.0.113.5 extra_data=",
    );
    has(
        &l,
        "IE_CreateQER/IE_GateStatus spare=0 ul=0 dl=1 extra_data=",
    );
    has(
        &l,
        "IE_CreateURR/IE_VolumeThreshold spare=0 DLVOL=0 ULVOL=0 TOVOL=1 total=1000000 extra_data=",
    );
    let l = lines_of(&all, "session_modification_request");
    has(
        &l,
        "IE_UpdateFAR/IE_UpdateForwardingParameters/IE_PFCPSMReqFlags spare=0 QUARR=0 SNDEM=1 DROBU=0 extra_data=",
    );
    has(
        &l,
        "IE_UpdateFAR/IE_ApplyAction spare=0 DUPL=0 NOCP=0 BUFF=0 FORW=1 DROP=0 extra_data=",
    );
    has(&l, "IE_QueryURR/IE_URR_Id id=1 extra_data=");
    let l = lines_of(&all, "session_establishment_request_v6");
    has(
        &l,
        "IE_CreateFAR/IE_ApplyAction spare=0 DUPL=0 NOCP=1 BUFF=1 FORW=0 DROP=0 extra_data=",
    );
    has(
        &l,
        "IE_CreatePDR/IE_PDI/IE_FTEID spare=0 CHID=0 CH=0 V6=1 V4=0 TEID=4660 ipv6=2001:db8::1 extra_data=",
    );
    let l = lines_of(&all, "association_setup_response");
    assert!(l.iter().any(|x| x.starts_with("IE_UPFunctionFeatures")
        && x.contains(" FTUP=1 ")
        && x.contains(" EMPU=1 ")));
    let l = lines_of(&all, "session_report_request");
    has(
        &l,
        "IE_ReportType spare=0 UPIR=0 ERIR=0 USAR=0 DLDR=1 extra_data=",
    );
    has(&l, "IE_DownlinkDataReport/IE_PDR_Id id=2 extra_data=");
    let l = lines_of(&all, "mandatory_ie_missing");
    has(&l, "IE_OffendingIE type=57");
    let l = lines_of(&all, "session_establishment_rejected");
    has(&l, "IE_FailedRuleId spare=0 type=0 pdr_id=2 extra_data=");
    // The node's usage report: scapy 2.5 knows the volumes; the Rel-15
    // packet counts (TONOP/ULNOP/DLNOP, bits 4-6) follow as extra data.
    let l = lines_of(&all, "tep_usage_report");
    has(&l, "IE_UsageReport_SMR/IE_UR_SEQN number=4");
    has(
        &l,
        "IE_UsageReport_SMR/IE_StartTime timestamp=3950000000 extra_data=",
    );
    has(
        &l,
        "IE_UsageReport_SMR/IE_EndTime timestamp=3950000002 extra_data=",
    );
    has(
        &l,
        "IE_UsageReport_SMR/IE_DurationMeasurement duration=2 extra_data=",
    );
    let vm = l
        .iter()
        .find(|x| x.starts_with("IE_UsageReport_SMR/IE_VolumeMeasurement"))
        .unwrap();
    // spare=7: the three packet-count flags, bits scapy calls spare.
    assert!(
        vm.contains("spare=7 DLVOL=1 ULVOL=1 TOVOL=1 total=4000 uplink=1000 downlink=3000 "),
        "{vm}"
    );
    let counts: String = [30u64, 10, 20]
        .iter()
        .map(|c| format!("{c:016x}"))
        .collect();
    assert!(vm.ends_with(&format!("extra_data={counts}")), "{vm}");
    // The 3-octet Usage Report Trigger: the third octet is scapy's extra.
    has(&l, "IE_UsageReport_SMR/IE_UsageReportTrigger IMMER=1 DROTH=0 STOPT=0 START=0 QUHTI=0 TIMTH=0 VOLTH=0 PERIO=0 EVETH=0 MACAR=0 ENVCL=0 MONIT=0 TERMR=0 LIUSA=0 TIMQU=0 VOLQU=0 extra_data=00");
    has(
        &l,
        "IE_CreatedPDR/IE_FTEID spare=0 CHID=0 CH=0 V6=1 V4=1 TEID=3735928559 ipv4=198.51.100.1 ipv6=2001:db8::1 extra_data=",
    );
    let _ = IpAddr::V4(V4);
}

/// A user plane that accepts everything and counts what it was told.
#[derive(Default)]
struct CountingUp {
    installs: usize,
    removes: usize,
}

impl tep_pfcp::node::UserPlane for CountingUp {
    fn apply(&mut self, c: tep_pfcp::node::Change<'_>) -> Result<(), tep_pfcp::node::Refused> {
        match c {
            tep_pfcp::node::Change::Install { .. } => self.installs += 1,
            tep_pfcp::node::Change::Remove { .. } => self.removes += 1,
            tep_pfcp::node::Change::EndMarker { .. }
            | tep_pfcp::node::Change::DropBuffered { .. } => {}
        }
        Ok(())
    }
    fn take_usage(&mut self, _: u64, _: u32) -> tep_pfcp::node::Usage {
        tep_pfcp::node::Usage {
            uplink_bytes: 100,
            downlink_bytes: 200,
            uplink_packets: 1,
            downlink_packets: 2,
        }
    }
}

#[test]
fn the_node_answers_scapys_requests() {
    use tep_pfcp::node::{Config, Node, Peer};
    let v: HashMap<_, _> = vectors().into_iter().collect();
    let mut c = Config::new(NodeId::V4(V4), 3_950_000_000, Some(V4), None);
    c.heartbeat_interval = None;
    // The v6 session's CP F-SEID names the SMF's IPv6 address, not the one
    // it sends from: tep takes that only from a host `peers` lists.
    let peer = |a: &str, prefix_len| Peer {
        addr: a.parse().unwrap(),
        prefix_len,
        node_id: None,
    };
    c.peers = Some(vec![peer("192.0.2.10", 32), peer("2001:db8::10", 128)]);
    // scapy's URR has a volume threshold: this user plane stands for one
    // that reports it.
    c.usage_scans = true;
    let mut node = Node::new(c);
    let mut up = CountingUp::default();
    let now = std::time::Instant::now();
    let smf = "192.0.2.10:8805".parse().unwrap();
    // scapy's session requests name the dense SEID of slot 1; tep's SEIDs
    // are permuted, so the header gets the one tep chose.
    let mut up_seid = UP_SEID;
    let mut ask = |name: &str, seid: Option<u64>| {
        let mut bytes = v[name].clone();
        if let Some(s) = seid {
            up_seid = s;
        }
        if bytes[0] & 1 != 0 && !name.starts_with("session_establishment") {
            bytes[4..12].copy_from_slice(&up_seid.to_be_bytes());
        }
        node.handle(now, smf, &bytes, &mut up);
        let t = node.poll_transmit().expect(name);
        assert!(node.poll_transmit().is_none());
        PfcpRepr::parse_bytes(&t.payload).unwrap()
    };
    let r = ask("association_setup_request", None);
    assert!(
        matches!(r.message, Message::AssociationSetupResponse(ref a) if a.cause == Cause::REQUEST_ACCEPTED)
    );
    let r = ask("session_establishment_request", None);
    assert_eq!((r.sequence, r.seid), (5, Some(7000)));
    let Message::SessionEstablishmentResponse(e) = r.message else {
        panic!("{r:?}")
    };
    assert_eq!(
        (e.cause, e.failed_rule_id, e.offending_ie),
        (Cause::REQUEST_ACCEPTED, None, None)
    );
    let seid = e.up_f_seid.unwrap().seid;
    assert_ne!(seid, 0);
    assert_eq!(e.created_pdrs.len(), 1);
    // scapy's modification removes PDR 3, which this session lacks.
    let r = ask("session_modification_request", Some(seid));
    let Message::SessionModificationResponse(m) = r.message else {
        panic!("{r:?}")
    };
    assert_eq!(m.cause, Cause::RULE_CREATION_MODIFICATION_FAILURE);
    assert_eq!(m.failed_rule_id, Some(FailedRuleId::Pdr(3)));
    let r = ask("session_deletion_request", None);
    let Message::SessionDeletionResponse(d) = r.message else {
        panic!("{r:?}")
    };
    assert_eq!(d.cause, Cause::REQUEST_ACCEPTED);
    assert_eq!(d.usage_reports[0].0.volume.unwrap().total, Some(300));
    // Deleted: now unknown.
    let r = ask("session_deletion_request", None);
    assert_eq!(
        r.seid,
        Some(7000),
        "the cached response, for the retransmission"
    );
    // The v6 session: an SMF-chosen TEID on an address that is not tep's.
    let r = ask("session_establishment_request_v6", None);
    let Message::SessionEstablishmentResponse(e) = r.message else {
        panic!("{r:?}")
    };
    assert_eq!(e.failed_rule_id, Some(FailedRuleId::Pdr(1)));
    // The heartbeat carries another Recovery Time Stamp: a restarted SMF.
    let r = ask("heartbeat_request", None);
    assert!(matches!(r.message, Message::HeartbeatResponse(_)));
    assert_eq!((up.installs, up.removes), (1, 1));
    assert_eq!(node.counter(tep_pfcp::node::Counter::PeerRestarted), 1);
}

#[test]
fn path_reports_dissect_in_scapy() {
    use tep_pfcp::report::*;
    let test = "path_reports_dissect_in_scapy";
    let peers = vec![
        RemoteGtpuPeer::of(IpAddr::V4(GNB)),
        RemoteGtpuPeer::of("2001:db8::5".parse().unwrap()),
    ];
    let failure = repr(
        21,
        None,
        Message::NodeReportRequest(NodeReportRequest {
            node_id: NodeId::V4(V4),
            node_report_type: NodeReportType(NodeReportType::UPFR),
            user_plane_path_failure_report: Some(UserPlanePathFailureReport {
                remote_gtp_u_peers: peers.clone(),
            }),
            user_plane_path_recovery_report: None,
        }),
    );
    let recovery = repr(
        22,
        None,
        Message::NodeReportRequest(NodeReportRequest {
            node_id: NodeId::V4(V4),
            node_report_type: NodeReportType(NodeReportType::UPRR),
            user_plane_path_failure_report: None,
            user_plane_path_recovery_report: Some(UserPlanePathRecoveryReport {
                remote_gtp_u_peers: peers,
            }),
        }),
    );
    let error = repr(
        23,
        Some(7000),
        Message::SessionReportRequest(SessionReportRequest {
            report_type: ReportType(ReportType::ERIR),
            error_indication_report: Some(ErrorIndicationReport {
                remote_f_teids: vec![FTeid::Assigned {
                    teid: 0x100,
                    v4: Some(GNB),
                    v6: None,
                }],
            }),
            ..Default::default()
        }),
    );
    let msgs = [
        ("failure", failure.to_bytes()),
        ("recovery", recovery.to_bytes()),
        ("error", error.to_bytes()),
    ];
    let Some(all) = scapy_dump(test, &msgs) else {
        return;
    };
    let l = lines_of(&all, "failure");
    has(&l, "msg type=12 seq=21 S=0 len=52");
    has(
        &l,
        "IE_NodeId spare=0 id_type=0 ipv4=198.51.100.1 extra_data=",
    );
    has(&l, "IE_NodeReportType spare=0 UPFR=1 extra_data=");
    has(
        &l,
        "IE_UserPlanePathFailureReport/IE_RemoteGTP_U_Peer spare_1=0 NI=0 DI=0 V4=1 V6=0 ipv4=203.0.113.5 extra_data=",
    );
    has(
        &l,
        "IE_UserPlanePathFailureReport/IE_RemoteGTP_U_Peer spare_1=0 NI=0 DI=0 V4=0 V6=1 ipv6=2001:db8::5 extra_data=",
    );
    // UPRR (Release 16) is bit 2, which scapy 2.5 (Release 15) calls
    // spare; IE 187 it does not know, and shows its children as data:
    // the same two Remote GTP-U Peers.
    let l = lines_of(&all, "recovery");
    has(&l, "IE_NodeReportType spare=1 UPFR=0 extra_data=");
    let b = recovery.to_bytes();
    assert_eq!(&b[b.len() - 34..b.len() - 32], &187u16.to_be_bytes());
    let children: String = b[b.len() - 30..]
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect();
    has(&l, &format!("IE_NotImplemented data={children}"));
    let l = lines_of(&all, "error");
    has(
        &l,
        "IE_ReportType spare=0 UPIR=0 ERIR=1 USAR=0 DLDR=0 extra_data=",
    );
    has(
        &l,
        "IE_ErrorIndicationReport/IE_FTEID spare=0 CHID=0 CH=0 V6=0 V4=1 TEID=256 ipv4=203.0.113.5 extra_data=",
    );
}
