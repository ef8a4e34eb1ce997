//! Round trips: any message tep can represent emits to bytes that parse
//! back to it; arbitrary bytes and arbitrary mutations of valid messages
//! parse or fail without a panic.

use std::net::{Ipv4Addr, Ipv6Addr};

use proptest::collection::vec;
use proptest::option::of;
use proptest::prelude::*;

use tep_pfcp::message::*;
use tep_pfcp::report::*;
use tep_pfcp::rules::*;
use tep_pfcp::types::*;
use tep_pfcp::{IeType, PfcpRepr};

fn v4() -> impl Strategy<Value = Ipv4Addr> {
    any::<u32>().prop_map(Ipv4Addr::from)
}

fn v6() -> impl Strategy<Value = Ipv6Addr> {
    any::<u128>().prop_map(Ipv6Addr::from)
}

fn node_id() -> impl Strategy<Value = NodeId> {
    prop_oneof![
        v4().prop_map(NodeId::V4),
        v6().prop_map(NodeId::V6),
        "[a-z]{1,10}(\\.[a-z]{1,10}){0,3}".prop_map(|s| NodeId::fqdn(&s).unwrap()),
    ]
}

fn f_seid() -> impl Strategy<Value = FSeid> {
    (any::<u64>(), of(v4()), of(v6()))
        .prop_filter("an address", |(_, a, b)| a.is_some() || b.is_some())
        .prop_map(|(seid, v4, v6)| FSeid { seid, v4, v6 })
}

fn f_teid() -> impl Strategy<Value = FTeid> {
    prop_oneof![
        (any::<u32>(), of(v4()), of(v6()))
            .prop_filter("an address", |(_, a, b)| a.is_some() || b.is_some())
            .prop_map(|(teid, v4, v6)| FTeid::Assigned { teid, v4, v6 }),
        (any::<bool>(), any::<bool>(), of(any::<u8>()))
            .prop_map(|(v4, v6, choose_id)| FTeid::Choose { v4, v6, choose_id }),
    ]
}

fn ue_ip() -> impl Strategy<Value = UeIpAddress> {
    (
        of(v4()),
        of(v6()),
        any::<bool>(),
        of(any::<u8>()),
        of(any::<u8>()),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(v4, v6, destination, d, l, c4, c6)| UeIpAddress {
            v4,
            v6,
            destination,
            v6_delegation_bits: d,
            v6_prefix_len: l,
            choose_v4: c4,
            choose_v6: c6,
        })
}

fn ohc() -> impl Strategy<Value = OuterHeaderCreation> {
    (
        1u16..=0xff,
        0u16..4,
        any::<(u32, u32, u128, u16, u32, u32)>(),
    )
        .prop_map(|(lo, hi, (teid, a4, a6, port, c, s))| {
            let desc = lo | hi << 8;
            let mut o = OuterHeaderCreation {
                desc,
                ..Default::default()
            };
            if desc & 3 != 0 {
                o.teid = Some(teid);
            }
            if desc & 0x15 != 0 {
                o.v4 = Some(a4.into());
            }
            if desc & 0x2a != 0 {
                o.v6 = Some(a6.into());
            }
            if desc & 0x0c != 0 {
                o.port = Some(port);
            }
            if desc & 0x40 != 0 {
                o.c_tag = Some(c & 0xff_ffff);
            }
            if desc & 0x80 != 0 {
                o.s_tag = Some(s & 0xff_ffff);
            }
            o
        })
}

fn ohr() -> impl Strategy<Value = OuterHeaderRemoval> {
    (any::<u8>(), of(any::<u8>()))
        .prop_map(|(desc, ext_deletion)| OuterHeaderRemoval { desc, ext_deletion })
}

/// A bitmap of `min..=max` octets with bits only in them.
fn bitmap(min: u8, max: u8) -> impl Strategy<Value = Bitmap> {
    (min..=max, any::<u64>()).prop_map(|(n, b)| {
        let mask = if n == 8 {
            u64::MAX
        } else {
            (1u64 << (8 * n)) - 1
        };
        Bitmap::new(b & mask, n)
    })
}

fn apply_action() -> impl Strategy<Value = ApplyAction> {
    let primary = prop::sample::select(vec![
        ApplyAction::DROP,
        ApplyAction::FORW,
        ApplyAction::BUFF,
        ApplyAction::IPMA,
        ApplyAction::IPMD,
    ]);
    (primary, 1u8..=2, any::<u16>()).prop_map(|(p, n, extra)| {
        let others = (extra as u64) & !0x67 & if n == 1 { 0xff } else { 0xffff };
        ApplyAction(Bitmap::new(p | others, n))
    })
}

fn volume_threshold() -> impl Strategy<Value = VolumeThreshold> {
    (of(any::<u64>()), of(any::<u64>()), of(any::<u64>())).prop_map(|(total, uplink, downlink)| {
        VolumeThreshold {
            total,
            uplink,
            downlink,
        }
    })
}

fn volume() -> impl Strategy<Value = VolumeMeasurement> {
    prop::array::uniform6(of(any::<u64>())).prop_map(|a| VolumeMeasurement {
        total: a[0],
        uplink: a[1],
        downlink: a[2],
        total_packets: a[3],
        uplink_packets: a[4],
        downlink_packets: a[5],
    })
}

fn gate() -> impl Strategy<Value = GateStatus> {
    (0u8..4, 0u8..4).prop_map(|(ul, dl)| GateStatus { ul, dl })
}

fn ni() -> impl Strategy<Value = NetworkInstance> {
    vec(any::<u8>(), 0..20).prop_map(NetworkInstance)
}

fn failed_rule() -> impl Strategy<Value = FailedRuleId> {
    prop_oneof![
        any::<u16>().prop_map(FailedRuleId::Pdr),
        any::<u32>().prop_map(FailedRuleId::Far),
        any::<u32>().prop_map(FailedRuleId::Qer),
        any::<u32>().prop_map(FailedRuleId::Urr),
        any::<u8>().prop_map(FailedRuleId::Bar),
    ]
}

fn sdf() -> impl Strategy<Value = SdfFilter> {
    (
        of(vec(any::<u8>(), 0..40)),
        of((any::<u8>(), any::<u8>())),
        of(any::<u32>()),
        of(0u32..1 << 20),
        of(any::<u32>()),
    )
        .prop_map(|(d, t, s, l, b)| SdfFilter {
            flow_description: d,
            tos_traffic_class: t,
            spi: s,
            flow_label: l,
            filter_id: b,
        })
}

fn pdi() -> impl Strategy<Value = Pdi> {
    (
        0u8..4,
        of(f_teid()),
        of(ni()),
        of(ue_ip()),
        vec(sdf(), 0..3),
        of(0u8..64),
    )
        .prop_map(|(s, f, n, u, sdf, q)| Pdi {
            source_interface: SourceInterface(Interface(s)),
            local_f_teid: f,
            network_instance: n,
            ue_ip_address: u,
            sdf_filters: sdf,
            qfi: q.map(Qfi),
            skipped: Default::default(),
        })
}

fn ids<T: std::fmt::Debug>(f: fn(u32) -> T) -> impl Strategy<Value = Vec<T>> {
    vec(any::<u32>().prop_map(f), 0..3)
}

fn create_pdr() -> impl Strategy<Value = CreatePdr> {
    (
        any::<u16>(),
        any::<u32>(),
        pdi(),
        of(ohr()),
        of(any::<u32>()),
        ids(UrrId),
        ids(QerId),
    )
        .prop_map(|(id, p, pdi, o, far, urr_ids, qer_ids)| CreatePdr {
            pdr_id: PdrId(id),
            precedence: Precedence(p),
            pdi,
            outer_header_removal: o,
            far_id: far.map(FarId),
            urr_ids,
            qer_ids,
            skipped: Default::default(),
        })
}

fn update_pdr() -> impl Strategy<Value = UpdatePdr> {
    (
        any::<u16>(),
        of(ohr()),
        of(any::<u32>()),
        of(pdi()),
        of(any::<u32>()),
        ids(UrrId),
        ids(QerId),
    )
        .prop_map(|(id, o, p, pdi, far, urr_ids, qer_ids)| UpdatePdr {
            pdr_id: PdrId(id),
            outer_header_removal: o,
            precedence: p.map(Precedence),
            pdi,
            far_id: far.map(FarId),
            urr_ids,
            qer_ids,
            skipped: Default::default(),
        })
}

fn create_far() -> impl Strategy<Value = CreateFar> {
    (
        any::<u32>(),
        apply_action(),
        of((0u8..5, of(ni()), of(ohc()), of(marking()))),
    )
        .prop_map(|(id, a, fp)| CreateFar {
            far_id: FarId(id),
            apply_action: a,
            forwarding_parameters: fp.map(|(d, n, o, m)| ForwardingParameters {
                destination_interface: DestinationInterface(Interface(d)),
                network_instance: n,
                outer_header_creation: o,
                transport_level_marking: m,
                skipped: Default::default(),
            }),
            bar_id: None,
            skipped: Default::default(),
        })
}

fn update_far() -> impl Strategy<Value = UpdateFar> {
    (
        any::<u32>(),
        of(apply_action()),
        of((of(0u8..5), of(ni()), of(ohc()), of(marking()), of(0u8..8))),
    )
        .prop_map(|(id, a, fp)| UpdateFar {
            far_id: FarId(id),
            apply_action: a,
            update_forwarding_parameters: fp.map(|(d, n, o, m, f)| UpdateForwardingParameters {
                destination_interface: d.map(|d| DestinationInterface(Interface(d))),
                network_instance: n,
                outer_header_creation: o,
                transport_level_marking: m,
                flags: f.map(PfcpsmReqFlags),
                skipped: Default::default(),
            }),
            bar_id: None,
            skipped: Default::default(),
        })
}

fn create_urr() -> impl Strategy<Value = CreateUrr> {
    (any::<u32>(), 0u8..8, bitmap(2, 3), of(volume_threshold())).prop_map(|(id, m, t, v)| {
        CreateUrr {
            urr_id: UrrId(id),
            measurement_method: MeasurementMethod(m),
            reporting_triggers: ReportingTriggers(t),
            volume_threshold: v,
            ..Default::default()
        }
    })
}

fn update_urr() -> impl Strategy<Value = UpdateUrr> {
    (
        any::<u32>(),
        of(0u8..8),
        of(bitmap(2, 3)),
        of(volume_threshold()),
    )
        .prop_map(|(id, m, t, v)| UpdateUrr {
            urr_id: UrrId(id),
            measurement_method: m.map(MeasurementMethod),
            reporting_triggers: t.map(ReportingTriggers),
            volume_threshold: v,
            ..Default::default()
        })
}

fn mbr() -> impl Strategy<Value = Mbr> {
    (0..=Mbr::MAX, 0..=Mbr::MAX).prop_map(|(ul, dl)| Mbr { ul, dl })
}

fn gbr() -> impl Strategy<Value = Gbr> {
    (0..=Mbr::MAX, 0..=Mbr::MAX).prop_map(|(ul, dl)| Gbr { ul, dl })
}

fn marking() -> impl Strategy<Value = TransportLevelMarking> {
    (any::<u8>(), any::<u8>()).prop_map(|(tos, mask)| TransportLevelMarking { tos, mask })
}

fn create_qer() -> impl Strategy<Value = CreateQer> {
    (any::<u32>(), gate(), of(mbr()), of(gbr()), of(0u8..64)).prop_map(|(id, g, m, b, q)| {
        CreateQer {
            qer_id: QerId(id),
            gate_status: g,
            mbr: m,
            gbr: b,
            qfi: q.map(Qfi),
            skipped: Default::default(),
        }
    })
}

fn update_qer() -> impl Strategy<Value = UpdateQer> {
    (any::<u32>(), of(gate()), of(mbr()), of(gbr()), of(0u8..64)).prop_map(|(id, g, m, b, q)| {
        UpdateQer {
            qer_id: QerId(id),
            gate_status: g,
            mbr: m,
            gbr: b,
            qfi: q.map(Qfi),
            skipped: Default::default(),
        }
    })
}

fn usage_report() -> impl Strategy<Value = UsageReport> {
    let period = (of(any::<u32>()), of(any::<u32>()));
    (
        any::<u32>(),
        any::<u32>(),
        bitmap(1, 3),
        period,
        of(volume()),
        of(any::<u32>()),
    )
        .prop_map(|(id, s, t, (start, end), v, d)| UsageReport {
            urr_id: UrrId(id),
            ur_seqn: UrSeqn(s),
            trigger: UsageReportTrigger(t),
            start_time: start.map(StartTime),
            end_time: end.map(EndTime),
            volume: v,
            duration: d.map(DurationMeasurement),
        })
}

fn created_pdr() -> impl Strategy<Value = CreatedPdr> {
    (any::<u16>(), of(f_teid())).prop_map(|(id, f)| CreatedPdr {
        pdr_id: PdrId(id),
        local_f_teid: f,
    })
}

fn cause() -> impl Strategy<Value = Cause> {
    (1u8..=255).prop_map(Cause)
}

fn offending() -> impl Strategy<Value = Option<OffendingIe>> {
    of(any::<u16>().prop_map(|t| OffendingIe(IeType(t))))
}

fn rts() -> impl Strategy<Value = RecoveryTimeStamp> {
    any::<u32>().prop_map(RecoveryTimeStamp)
}

fn message() -> impl Strategy<Value = Message> {
    prop_oneof![
        rts().prop_map(|r| Message::HeartbeatRequest(HeartbeatRequest {
            recovery_time_stamp: r
        })),
        rts().prop_map(|r| Message::HeartbeatResponse(HeartbeatResponse {
            recovery_time_stamp: r
        })),
        (node_id(), rts(), of(bitmap(1, 8))).prop_map(|(n, r, f)| {
            Message::AssociationSetupRequest(AssociationSetupRequest {
                node_id: n,
                recovery_time_stamp: r,
                up_function_features: f.map(UpFunctionFeatures),
            })
        }),
        (node_id(), cause(), offending(), rts(), of(bitmap(1, 8))).prop_map(|(n, c, o, r, f)| {
            Message::AssociationSetupResponse(AssociationSetupResponse {
                node_id: n,
                cause: c,
                offending_ie: o,
                recovery_time_stamp: r,
                up_function_features: f.map(UpFunctionFeatures),
            })
        }),
        (node_id(), of(bitmap(1, 8))).prop_map(|(n, f)| {
            Message::AssociationUpdateRequest(AssociationUpdateRequest {
                node_id: n,
                up_function_features: f.map(UpFunctionFeatures),
            })
        }),
        (node_id(), cause(), offending()).prop_map(|(n, c, o)| {
            Message::AssociationUpdateResponse(AssociationUpdateResponse {
                node_id: n,
                cause: c,
                offending_ie: o,
                up_function_features: None,
            })
        }),
        node_id().prop_map(
            |n| Message::AssociationReleaseRequest(AssociationReleaseRequest { node_id: n })
        ),
        (node_id(), cause(), offending()).prop_map(|(n, c, o)| {
            Message::AssociationReleaseResponse(AssociationReleaseResponse {
                node_id: n,
                cause: c,
                offending_ie: o,
            })
        }),
        Just(Message::VersionNotSupportedResponse),
        (
            node_id(),
            f_seid(),
            vec(create_pdr(), 1..4),
            vec(create_far(), 1..4),
            vec(create_urr(), 0..2),
            vec(create_qer(), 0..2)
        )
            .prop_map(|(n, f, p, fa, u, q)| {
                Message::SessionEstablishmentRequest(SessionEstablishmentRequest {
                    node_id: n,
                    cp_f_seid: f,
                    create_pdrs: p,
                    create_fars: fa,
                    create_urrs: u,
                    create_qers: q,
                    create_bars: vec![],
                    skipped: Default::default(),
                })
            }),
        (
            node_id(),
            cause(),
            offending(),
            of(f_seid()),
            vec(created_pdr(), 0..3),
            of(failed_rule())
        )
            .prop_map(|(n, c, o, f, p, r)| {
                Message::SessionEstablishmentResponse(SessionEstablishmentResponse {
                    node_id: n,
                    cause: c,
                    offending_ie: o,
                    up_f_seid: f,
                    created_pdrs: p,
                    failed_rule_id: r,
                })
            }),
        (
            (
                of(f_seid()),
                ids(|i| RemovePdr {
                    pdr_id: PdrId(i as u16)
                }),
                ids(|i| RemoveFar { far_id: FarId(i) }),
                ids(|i| RemoveUrr { urr_id: UrrId(i) }),
                ids(|i| RemoveQer { qer_id: QerId(i) }),
            ),
            (
                vec(create_pdr(), 0..2),
                vec(create_far(), 0..2),
                vec(create_urr(), 0..2),
                vec(create_qer(), 0..2),
            ),
            (
                vec(update_pdr(), 0..2),
                vec(update_far(), 0..2),
                vec(update_urr(), 0..2),
                vec(update_qer(), 0..2),
                of(0u8..8),
                ids(|i| QueryUrr { urr_id: UrrId(i) }),
            )
        )
            .prop_map(
                |((f, rp, rf, ru, rq), (cp, cf, cu, cq), (up, uf, uu, uq, fl, qu))| {
                    Message::SessionModificationRequest(SessionModificationRequest {
                        cp_f_seid: f,
                        remove_pdrs: rp,
                        remove_fars: rf,
                        remove_urrs: ru,
                        remove_qers: rq,
                        create_pdrs: cp,
                        create_fars: cf,
                        create_urrs: cu,
                        create_qers: cq,
                        update_pdrs: up,
                        update_fars: uf,
                        update_urrs: uu,
                        update_qers: uq,
                        flags: fl.map(PfcpsmReqFlags),
                        query_urrs: qu,
                        create_bars: vec![],
                        update_bar: None,
                        remove_bar: None,
                        skipped: Default::default(),
                    })
                }
            ),
        (
            cause(),
            offending(),
            vec(created_pdr(), 0..2),
            vec(usage_report(), 0..3),
            of(failed_rule())
        )
            .prop_map(|(c, o, p, u, r)| {
                Message::SessionModificationResponse(SessionModificationResponse {
                    cause: c,
                    offending_ie: o,
                    created_pdrs: p,
                    usage_reports: u.into_iter().map(UsageReportSmr).collect(),
                    failed_rule_id: r,
                })
            }),
        Just(Message::SessionDeletionRequest(SessionDeletionRequest {})),
        (cause(), offending(), vec(usage_report(), 0..3)).prop_map(|(c, o, u)| {
            Message::SessionDeletionResponse(SessionDeletionResponse {
                cause: c,
                offending_ie: o,
                usage_reports: u.into_iter().map(UsageReportSdr).collect(),
            })
        }),
        (
            0u8..0x80,
            of(vec(any::<u16>().prop_map(PdrId), 0..3)),
            vec(usage_report(), 0..2)
        )
            .prop_map(|(t, d, u)| {
                Message::SessionReportRequest(SessionReportRequest {
                    report_type: ReportType(t),
                    downlink_data_report: d.map(|pdr_ids| DownlinkDataReport { pdr_ids }),
                    usage_reports: u.into_iter().map(UsageReportSrr).collect(),
                    error_indication_report: None,
                })
            }),
        (cause(), offending()).prop_map(|(c, o)| {
            Message::SessionReportResponse(SessionReportResponse {
                cause: c,
                offending_ie: o,
                ..Default::default()
            })
        }),
    ]
}

fn remote_peers() -> impl Strategy<Value = Vec<RemoteGtpuPeer>> {
    vec(
        (of(v4()), of(v6()))
            .prop_filter("an address", |(a, b)| a.is_some() || b.is_some())
            .prop_map(|(v4, v6)| RemoteGtpuPeer { v4, v6 }),
        1..3,
    )
}

/// What tep reports of GTP-U paths (`tep_pfcp::report`).
fn path_message() -> impl Strategy<Value = Message> {
    let assigned = (any::<u32>(), of(v4()), of(v6()))
        .prop_filter("an address", |(_, a, b)| a.is_some() || b.is_some())
        .prop_map(|(teid, v4, v6)| FTeid::Assigned { teid, v4, v6 });
    prop_oneof![
        (node_id(), 0u8..0x40, of(remote_peers()), of(remote_peers())).prop_map(|(n, t, f, r)| {
            Message::NodeReportRequest(NodeReportRequest {
                node_id: n,
                node_report_type: NodeReportType(t),
                user_plane_path_failure_report: f
                    .map(|remote_gtp_u_peers| UserPlanePathFailureReport { remote_gtp_u_peers }),
                user_plane_path_recovery_report: r
                    .map(|remote_gtp_u_peers| UserPlanePathRecoveryReport { remote_gtp_u_peers }),
            })
        }),
        (node_id(), cause(), offending()).prop_map(|(n, c, o)| {
            Message::NodeReportResponse(NodeReportResponse {
                node_id: n,
                cause: c,
                offending_ie: o,
            })
        }),
        (0u8..0x80, vec(assigned, 1..3)).prop_map(|(t, f)| {
            Message::SessionReportRequest(SessionReportRequest {
                report_type: ReportType(t),
                error_indication_report: Some(ErrorIndicationReport { remote_f_teids: f }),
                ..Default::default()
            })
        }),
    ]
}

fn repr() -> impl Strategy<Value = PfcpRepr> {
    (
        prop_oneof![4 => message(), 1 => path_message()],
        any::<u64>(),
        0u32..1 << 24,
        of(0u8..16),
    )
        .prop_map(|(m, seid, seq, prio)| {
            let session = msg_type::is_session(m.msg_type());
            PfcpRepr {
                seid: session.then_some(seid),
                sequence: seq,
                priority: prio,
                message: m,
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn emitted_messages_parse_back(r in repr()) {
        let b = r.to_bytes();
        prop_assert_eq!(PfcpRepr::parse_bytes(&b), Ok(r.clone()));
        // Emitting what was parsed gives the same bytes.
        prop_assert_eq!(PfcpRepr::parse_bytes(&b).unwrap().to_bytes(), b);
    }

    #[test]
    fn mutated_messages_never_panic(r in repr(), edits in vec((any::<prop::sample::Index>(), any::<u8>()), 1..6), cut in any::<prop::sample::Index>()) {
        let mut b = r.to_bytes();
        for (i, v) in edits {
            let i = i.index(b.len());
            b[i] = v;
        }
        let _ = PfcpRepr::parse_bytes(&b);
        let _ = PfcpRepr::parse_bytes(&b[..cut.index(b.len() + 1)]);
    }

    #[test]
    fn arbitrary_bytes_never_panic(b in vec(any::<u8>(), 0..300)) {
        let _ = PfcpRepr::parse_bytes(&b);
    }
}
