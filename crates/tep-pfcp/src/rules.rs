//! The grouped IEs of session messages (TS 29.244 §7.5): rules to create,
//! update and remove, and what the UP function reports back. Each group
//! parses its children in one walk: a missing mandatory child is
//! `Mandatory IE missing` naming it, a child whose content is wrong is
//! `Mandatory IE incorrect` naming it, and every child a rule group does
//! not decode is noted in its `skipped` ([`Skipped`]): the node refuses
//! the rule for a known type (tep never accepts what it does not apply)
//! and discards an unknown one (§7.6.1).

use crate::ie::{first, need, walk, IeError, IeType, Reader, Skipped, Value, Writer};
use crate::types::*;

ies! {
    /// PDI (§7.5.2.2-2): what a PDR matches.
    pub struct Pdi = PDI {
        req source_interface: SourceInterface,
        one local_f_teid: FTeid,
        one network_instance: NetworkInstance,
        one ue_ip_address: UeIpAddress,
        /// Packet filters (any matches), applied per [`crate::flow`].
        many sdf_filters: SdfFilter,
        /// The first QFI (a PDI may list several; tep matches one).
        one qfi: Qfi,
        /// Children tep does not apply (the rule is refused) or know.
        rest skipped: Skipped,
    }
}

ies! {
    /// Create PDR (§7.5.2.2).
    pub struct CreatePdr = CREATE_PDR {
        req pdr_id: PdrId,
        req precedence: Precedence,
        req pdi: Pdi,
        one outer_header_removal: OuterHeaderRemoval,
        one far_id: FarId,
        many urr_ids: UrrId,
        many qer_ids: QerId,
        /// Children tep does not apply (the rule is refused) or know.
        rest skipped: Skipped,
    }
}

ies! {
    /// Forwarding Parameters (§7.5.2.3-2).
    pub struct ForwardingParameters = FORWARDING_PARAMETERS {
        req destination_interface: DestinationInterface,
        one network_instance: NetworkInstance,
        one outer_header_creation: OuterHeaderCreation,
        /// The outer DSCP of the packets sent (to the gNB).
        one transport_level_marking: TransportLevelMarking,
        /// Children tep does not apply (the rule is refused) or know.
        rest skipped: Skipped,
    }
}

ies! {
    /// Create FAR (§7.5.2.3).
    pub struct CreateFar = CREATE_FAR {
        req far_id: FarId,
        req apply_action: ApplyAction,
        one forwarding_parameters: ForwardingParameters,
        /// The session's BAR, for the packets the FAR buffers.
        one bar_id: BarId,
        /// Children tep does not apply (the rule is refused) or know.
        rest skipped: Skipped,
    }
}

ies! {
    /// Create URR (§7.5.2.4).
    pub struct CreateUrr = CREATE_URR {
        req urr_id: UrrId,
        req measurement_method: MeasurementMethod,
        req reporting_triggers: ReportingTriggers,
        one measurement_period: MeasurementPeriod,
        one volume_threshold: VolumeThreshold,
        one volume_quota: VolumeQuota,
        one time_threshold: TimeThreshold,
        one time_quota: TimeQuota,
        one inactivity_detection_time: InactivityDetectionTime,
        /// Children tep does not apply (the rule is refused) or know.
        rest skipped: Skipped,
    }
}

ies! {
    /// Create QER (§7.5.2.5).
    pub struct CreateQer = CREATE_QER {
        req qer_id: QerId,
        req gate_status: GateStatus,
        one mbr: Mbr,
        /// Recorded, not enforced: admission is the SMF's.
        one gbr: Gbr,
        one qfi: Qfi,
        /// Children tep does not apply (the rule is refused) or know.
        rest skipped: Skipped,
    }
}

ies! {
    /// Create BAR (§7.5.2.6): the session's buffering parameters, for the
    /// FARs that name it.
    pub struct CreateBar = CREATE_BAR {
        req bar_id: BarId,
        one downlink_data_notification_delay: DownlinkDataNotificationDelay,
        one suggested_buffering_packets_count: SuggestedBufferingPacketsCount,
        /// Children tep does not apply (the rule is refused) or know.
        rest skipped: Skipped,
    }
}

ies! {
    /// Update BAR in a Session Modification Request (§7.5.4.14): present
    /// fields replace the BAR's.
    pub struct UpdateBar = UPDATE_BAR {
        req bar_id: BarId,
        one downlink_data_notification_delay: DownlinkDataNotificationDelay,
        one suggested_buffering_packets_count: SuggestedBufferingPacketsCount,
        /// Children tep does not apply (the rule is refused) or know.
        rest skipped: Skipped,
    }
}

ies! {
    /// Update BAR in a Session Report Response (§7.5.9.2): present fields
    /// replace the BAR's. DL Buffering Duration and DL Buffering
    /// Suggested Packet Count (DLBD, not advertised) are noted, counted
    /// and not applied: a response cannot be refused.
    pub struct UpdateBarSrr = UPDATE_BAR_SRR {
        req bar_id: BarId,
        one downlink_data_notification_delay: DownlinkDataNotificationDelay,
        one suggested_buffering_packets_count: SuggestedBufferingPacketsCount,
        /// Children tep does not apply or know.
        rest skipped: Skipped,
    }
}

ies! {
    /// Remove BAR (§7.5.4.12).
    pub struct RemoveBar = REMOVE_BAR {
        req bar_id: BarId,
    }
}

ies! {
    /// Created PDR (§7.5.3.2): the F-TEID the UP function chose.
    pub struct CreatedPdr = CREATED_PDR {
        req pdr_id: PdrId,
        one local_f_teid: FTeid,
    }
}

ies! {
    /// Update PDR (§7.5.4.2): present fields replace the PDR's.
    pub struct UpdatePdr = UPDATE_PDR {
        req pdr_id: PdrId,
        one outer_header_removal: OuterHeaderRemoval,
        one precedence: Precedence,
        one pdi: Pdi,
        one far_id: FarId,
        many urr_ids: UrrId,
        many qer_ids: QerId,
        /// Children tep does not apply (the rule is refused) or know.
        rest skipped: Skipped,
    }
}

ies! {
    /// Update Forwarding Parameters (§7.5.4.3-2).
    pub struct UpdateForwardingParameters = UPDATE_FORWARDING_PARAMETERS {
        one destination_interface: DestinationInterface,
        one network_instance: NetworkInstance,
        one outer_header_creation: OuterHeaderCreation,
        /// The outer DSCP of the packets sent (to the gNB).
        one transport_level_marking: TransportLevelMarking,
        /// SNDEM: send End Marker packets to the old peer.
        one flags: PfcpsmReqFlags,
        /// Children tep does not apply (the rule is refused) or know.
        rest skipped: Skipped,
    }
}

ies! {
    /// Update FAR (§7.5.4.3).
    pub struct UpdateFar = UPDATE_FAR {
        req far_id: FarId,
        one apply_action: ApplyAction,
        one update_forwarding_parameters: UpdateForwardingParameters,
        /// The session's BAR, for the packets the FAR buffers.
        one bar_id: BarId,
        /// Children tep does not apply (the rule is refused) or know.
        rest skipped: Skipped,
    }
}

ies! {
    /// Update URR (§7.5.4.4).
    pub struct UpdateUrr = UPDATE_URR {
        req urr_id: UrrId,
        one measurement_method: MeasurementMethod,
        one reporting_triggers: ReportingTriggers,
        one measurement_period: MeasurementPeriod,
        one volume_threshold: VolumeThreshold,
        one volume_quota: VolumeQuota,
        one time_threshold: TimeThreshold,
        one time_quota: TimeQuota,
        one inactivity_detection_time: InactivityDetectionTime,
        /// Children tep does not apply (the rule is refused) or know.
        rest skipped: Skipped,
    }
}

ies! {
    /// Update QER (§7.5.4.5).
    pub struct UpdateQer = UPDATE_QER {
        req qer_id: QerId,
        one gate_status: GateStatus,
        one mbr: Mbr,
        /// Recorded, not enforced: admission is the SMF's.
        one gbr: Gbr,
        one qfi: Qfi,
        /// Children tep does not apply (the rule is refused) or know.
        rest skipped: Skipped,
    }
}

ies! {
    /// Remove PDR (§7.5.4.6).
    pub struct RemovePdr = REMOVE_PDR {
        req pdr_id: PdrId,
    }
}

ies! {
    /// Remove FAR (§7.5.4.7).
    pub struct RemoveFar = REMOVE_FAR {
        req far_id: FarId,
    }
}

ies! {
    /// Remove URR (§7.5.4.8).
    pub struct RemoveUrr = REMOVE_URR {
        req urr_id: UrrId,
    }
}

ies! {
    /// Remove QER (§7.5.4.9).
    pub struct RemoveQer = REMOVE_QER {
        req qer_id: QerId,
    }
}

ies! {
    /// Query URR (§7.5.4.10).
    pub struct QueryUrr = QUERY_URR {
        req urr_id: UrrId,
    }
}

ies! {
    /// Downlink Data Report (§7.5.8.2): the PDRs that saw the first
    /// downlink packet buffered.
    pub struct DownlinkDataReport = DOWNLINK_DATA_REPORT {
        many pdr_ids: PdrId,
    }
}

/// Usage Report (§7.5.5.2, §7.5.7.2, §7.5.8.3): one IE layout under three
/// types, by the message that carries it.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct UsageReport {
    pub urr_id: UrrId,
    pub ur_seqn: UrSeqn,
    pub trigger: UsageReportTrigger,
    /// The measurement period: TS 29.244 Tables 7.5.5.2-1, 7.5.7.2-1 and
    /// 7.5.8.3-1 require both unless the trigger is start or stop of
    /// traffic (or MAC address reporting).
    pub start_time: Option<StartTime>,
    pub end_time: Option<EndTime>,
    pub volume: Option<VolumeMeasurement>,
    /// Seconds measured, where the URR measures duration (DURAT).
    pub duration: Option<DurationMeasurement>,
}

impl UsageReport {
    /// Parses the content of a Usage Report of any of the three types.
    pub fn parse_as(ty: IeType, value: &[u8]) -> Result<Self, IeError> {
        let (mut urr_id, mut ur_seqn, mut trigger, mut volume) = (None, None, None, None);
        let (mut start_time, mut end_time, mut duration) = (None, None, None);
        walk(value, ty, |t, v| match t {
            IeType::URR_ID => first(&mut urr_id, v),
            IeType::UR_SEQN => first(&mut ur_seqn, v),
            IeType::USAGE_REPORT_TRIGGER => first(&mut trigger, v),
            IeType::START_TIME => first(&mut start_time, v),
            IeType::END_TIME => first(&mut end_time, v),
            IeType::VOLUME_MEASUREMENT => first(&mut volume, v),
            IeType::DURATION_MEASUREMENT => first(&mut duration, v),
            _ => Ok(()),
        })?;
        Ok(UsageReport {
            urr_id: need(urr_id)?,
            ur_seqn: need(ur_seqn)?,
            trigger: need(trigger)?,
            start_time,
            end_time,
            volume,
            duration,
        })
    }

    /// Writes the report as an IE of type `ty`.
    pub fn emit_as(&self, ty: IeType, w: &mut Writer<'_>) {
        w.tlv(ty, |w| self.emit_children(w));
    }

    /// The report's IEs, in the order of the spec's tables.
    fn emit_children(&self, w: &mut Writer<'_>) {
        w.ie(&self.urr_id);
        w.ie(&self.ur_seqn);
        w.ie(&self.trigger);
        w.opt(&self.start_time);
        w.opt(&self.end_time);
        w.opt(&self.volume);
        w.opt(&self.duration);
    }
}

/// Declares the Usage Report under one of its IE types.
macro_rules! usage_report_as {
    ($($(#[$m:meta])* $name:ident = $ty:ident;)+) => {$(
        $(#[$m])*
        #[derive(Clone, Debug, PartialEq, Eq, Default)]
        pub struct $name(pub UsageReport);

        impl Value for $name {
            const TYPE: IeType = IeType::$ty;
            fn parse(r: &mut Reader<'_>) -> Result<Self, IeError> {
                UsageReport::parse_as(IeType::$ty, r.rest()).map($name)
            }
            fn emit(&self, w: &mut Writer<'_>) {
                self.0.emit_children(w);
            }
        }
    )+};
}

usage_report_as! {
    /// Usage Report in a Session Modification Response (type 78).
    UsageReportSmr = USAGE_REPORT_SMR;
    /// Usage Report in a Session Deletion Response (type 79).
    UsageReportSdr = USAGE_REPORT_SDR;
    /// Usage Report in a Session Report Request (type 80).
    UsageReportSrr = USAGE_REPORT_SRR;
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::Ipv4Addr;

    fn emit<V: Value>(v: &V) -> Vec<u8> {
        let mut b = vec![];
        Writer::new(&mut b).ie(v);
        b
    }

    fn uplink_pdr() -> CreatePdr {
        CreatePdr {
            pdr_id: PdrId(1),
            precedence: Precedence(100),
            pdi: Pdi {
                sdf_filters: vec![],
                source_interface: SourceInterface(Interface::ACCESS),
                local_f_teid: Some(FTeid::Choose {
                    v4: true,
                    v6: false,
                    choose_id: None,
                }),
                network_instance: Some(NetworkInstance(b"\x08internet".to_vec())),
                ue_ip_address: Some(UeIpAddress {
                    v4: Some(Ipv4Addr::new(10, 45, 0, 2)),
                    ..Default::default()
                }),
                qfi: Some(Qfi(9)),
                skipped: Default::default(),
            },
            outer_header_removal: Some(OuterHeaderRemoval::default()),
            far_id: Some(FarId(1)),
            urr_ids: vec![UrrId(1), UrrId(2)],
            qer_ids: vec![QerId(1)],
            skipped: Skipped::default(),
        }
    }

    #[test]
    fn create_pdr_round_trips_and_nests() {
        let p = uplink_pdr();
        let b = emit(&p);
        assert_eq!(&b[..2], [0, 1]);
        assert_eq!(CreatePdr::from_ie(&b[4..]), Ok(p));
    }

    #[test]
    fn missing_and_incorrect_children_are_named() {
        let mut b = vec![];
        let mut w = Writer::new(&mut b);
        w.ie(&PdrId(1));
        w.ie(&Precedence(1));
        assert_eq!(CreatePdr::from_ie(&b), Err(IeError::missing(IeType::PDI)));
        // A PDI whose Source Interface is 9.
        let mut w = Writer::new(&mut b);
        w.tlv(IeType::PDI, |w| {
            w.tlv(IeType::SOURCE_INTERFACE, |w| w.u8(9))
        });
        assert_eq!(
            CreatePdr::from_ie(&b),
            Err(IeError::incorrect(IeType::SOURCE_INTERFACE))
        );
    }

    /// A child the group does not decode is kept for the node: by type
    /// when TS 29.244 defines it (QER Correlation ID, here), counted when its type is
    /// unknown (999); a vendor IE is the vendor's, discarded.
    #[test]
    fn children_not_decoded_are_noted() {
        let mut b = vec![];
        let mut w = Writer::new(&mut b);
        w.tlv(IeType(999), |w| w.u32(1));
        w.ie(&QerId(4));
        w.tlv(IeType(0x8123), |w| w.u16(18681));
        w.tlv(IeType(28), |w| w.u32(7));
        w.ie(&GateStatus::open());
        let q = CreateQer::from_ie(&b).unwrap();
        assert_eq!((q.qer_id, q.qfi), (QerId(4), None));
        assert_eq!(q.skipped.types(), [IeType(28)]);
        assert_eq!(q.skipped.first(), Some(IeType(28)));
        assert_eq!(q.skipped.unknown, 1);
        // Nested: an SDF Filter inside the PDI is the Create PDR's too.
        let mut p = uplink_pdr();
        p.pdi.skipped.note(IeType(23));
        let b = emit(&p);
        let back = CreatePdr::from_ie(&b[4..]).unwrap();
        assert_eq!(back.pdi.skipped.types(), [] as [IeType; 0], "not emitted");
        let mut outer = Skipped::default();
        outer.note(IeType(24));
        assert_eq!(outer.and(&p.pdi.skipped).types(), [IeType(24), IeType(23)]);
        // Past KEPT only counted; informational session IEs not at all.
        let mut s = Skipped::default();
        for t in [23, 24, 26, 27, 30, 113] {
            s.note(IeType(t));
        }
        assert_eq!(s.types(), [IeType(23), IeType(24), IeType(26), IeType(27)]);
    }

    #[test]
    fn bar_groups_round_trip() {
        let c = CreateBar {
            bar_id: BarId(3),
            downlink_data_notification_delay: Some(DownlinkDataNotificationDelay(10)),
            suggested_buffering_packets_count: Some(SuggestedBufferingPacketsCount(4)),
            skipped: Skipped::default(),
        };
        let b = emit(&c);
        // Create BAR (85), then BAR ID (88), DDN Delay (46), SBPC (140).
        assert_eq!(b[..2], [0, 85]);
        assert_eq!(b[4..9], [0, 88, 0, 1, 3]);
        assert_eq!(b[9..14], [0, 46, 0, 1, 10]);
        assert_eq!(b[14..19], [0, 140, 0, 1, 4]);
        assert_eq!(CreateBar::from_ie(&b[4..]), Ok(c));
        let u = UpdateBar {
            bar_id: BarId(3),
            downlink_data_notification_delay: None,
            suggested_buffering_packets_count: Some(SuggestedBufferingPacketsCount(0)),
            skipped: Skipped::default(),
        };
        let b = emit(&u);
        assert_eq!(b[..2], [0, 86]);
        assert_eq!(UpdateBar::from_ie(&b[4..]), Ok(u));
        let r = RemoveBar { bar_id: BarId(3) };
        let b = emit(&r);
        assert_eq!(b, [0, 87, 0, 5, 0, 88, 0, 1, 3]);
        assert_eq!(RemoveBar::from_ie(&b[4..]), Ok(r));
        // A FAR's BAR ID.
        let mut w = vec![];
        Writer::new(&mut w).ie(&FarId(2));
        Writer::new(&mut w).ie(&ApplyAction::new(ApplyAction::BUFF));
        Writer::new(&mut w).ie(&BarId(3));
        assert_eq!(CreateFar::from_ie(&w).unwrap().bar_id, Some(BarId(3)));
    }

    #[test]
    fn usage_report_under_each_type() {
        let u = UsageReport {
            urr_id: UrrId(3),
            ur_seqn: UrSeqn(0),
            trigger: UsageReportTrigger::new(UsageReportTrigger::TERMR),
            start_time: Some(StartTime(3_950_000_000)),
            end_time: Some(EndTime(3_950_000_060)),
            volume: Some(VolumeMeasurement {
                total: Some(10),
                ..Default::default()
            }),
            duration: Some(DurationMeasurement(60)),
        };
        for ty in [
            IeType::USAGE_REPORT_SMR,
            IeType::USAGE_REPORT_SDR,
            IeType::USAGE_REPORT_SRR,
        ] {
            let mut b = vec![];
            u.emit_as(ty, &mut Writer::new(&mut b));
            assert_eq!(u16::from_be_bytes([b[0], b[1]]), ty.0);
            assert_eq!(UsageReport::parse_as(ty, &b[4..]), Ok(u.clone()));
        }
    }
}
