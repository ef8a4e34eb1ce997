//! The messages of a typical PDU session, as an SMF sends them: what the
//! establishment-rate example and `tep bench n4` (a load generator that
//! builds every request before it starts the clock) send.

use crate::message::*;
use crate::rules::*;
use crate::types::*;
use crate::PfcpRepr;
use core::net::Ipv4Addr;

/// Association Setup Request from an SMF with Node ID `smf`.
pub fn association_setup(sequence: u32, smf: Ipv4Addr, recovery: u32) -> PfcpRepr {
    PfcpRepr {
        seid: None,
        sequence,
        priority: None,
        message: Message::AssociationSetupRequest(AssociationSetupRequest {
            node_id: NodeId::V4(smf),
            recovery_time_stamp: RecoveryTimeStamp(recovery),
            up_function_features: None,
        }),
    }
}

/// Session Establishment Request for one PDU session: an uplink PDR whose
/// F-TEID the UPF chooses (CHOOSE), with QFI 9 and outer header removal;
/// a downlink PDR for UE `ue`; FARs forwarding to the core and to gNB
/// `gnb` with TEID `gnb_teid`; a QER (gate open, QFI 9); a URR measuring
/// volume. `cp_seid` is the SMF's SEID for it.
pub fn pdu_session_establishment(
    sequence: u32,
    cp_seid: u64,
    smf: Ipv4Addr,
    ue: Ipv4Addr,
    gnb: Ipv4Addr,
    gnb_teid: u32,
) -> PfcpRepr {
    let m = SessionEstablishmentRequest {
        node_id: NodeId::V4(smf),
        cp_f_seid: smf_f_seid(cp_seid, smf),
        create_pdrs: vec![
            CreatePdr {
                precedence: Precedence(255),
                ..uplink_pdr(Some(ue))
            },
            CreatePdr {
                precedence: Precedence(255),
                ..downlink_pdr(ue, Some(NetworkInstance(b"\x08internet".to_vec())))
            },
        ],
        create_fars: vec![far_to_core(None), far_to_gnb(gnb_teid, gnb)],
        create_urrs: vec![volume_urr(ReportingTriggers(Bitmap::new(0, 3)), None)],
        create_qers: vec![qer(1, Some(9), None)],
        create_bars: vec![],
        skipped: Default::default(),
    };
    establishment(sequence, m)
}

/// The SMF's F-SEID: its SEID `cp_seid` at its address `smf`.
pub fn smf_f_seid(cp_seid: u64, smf: Ipv4Addr) -> FSeid {
    FSeid {
        seid: cp_seid,
        v4: Some(smf),
        v6: None,
    }
}

/// `m` as a request with sequence number `sequence` (SEID 0: the UPF has
/// given none yet).
pub fn establishment(sequence: u32, m: SessionEstablishmentRequest) -> PfcpRepr {
    PfcpRepr {
        seid: Some(0),
        sequence,
        priority: None,
        message: Message::SessionEstablishmentRequest(m),
    }
}

/// URR 1: measures volume, reports on `triggers`, with `threshold`.
pub fn volume_urr(triggers: ReportingTriggers, threshold: Option<VolumeThreshold>) -> CreateUrr {
    CreateUrr {
        urr_id: UrrId(1),
        measurement_method: MeasurementMethod(MeasurementMethod::VOLUM),
        reporting_triggers: triggers,
        volume_threshold: threshold,
        ..Default::default()
    }
}

/// QER `id`: gate open, marking QFI `qfi`, with MBR `mbr` (uplink,
/// downlink, kbit/s).
pub fn qer(id: u32, qfi: Option<u8>, mbr: Option<(u64, u64)>) -> CreateQer {
    CreateQer {
        qer_id: QerId(id),
        mbr: mbr.map(|(ul, dl)| Mbr { ul, dl }),
        gbr: None,
        gate_status: GateStatus::open(),
        qfi: qfi.map(Qfi),
        skipped: Default::default(),
    }
}

/// PDR 1, uplink: from the access side to a F-TEID the UPF chooses
/// (CHOOSE, CHID 1) in network instance "internet", QFI 9, from UE `ue`
/// if given; GTP-U removed, through FAR 1, URR 1 and QER 1; precedence 200.
pub fn uplink_pdr(ue: Option<Ipv4Addr>) -> CreatePdr {
    CreatePdr {
        pdr_id: PdrId(1),
        precedence: Precedence(200),
        pdi: Pdi {
            sdf_filters: vec![],
            source_interface: SourceInterface(Interface::ACCESS),
            local_f_teid: Some(FTeid::Choose {
                v4: true,
                v6: false,
                choose_id: Some(1),
            }),
            network_instance: Some(NetworkInstance(b"\x08internet".to_vec())),
            ue_ip_address: ue.map(|ue| UeIpAddress {
                v4: Some(ue),
                ..Default::default()
            }),
            qfi: Some(Qfi(9)),
            skipped: Default::default(),
        },
        outer_header_removal: Some(OuterHeaderRemoval::default()),
        far_id: Some(FarId(1)),
        urr_ids: vec![UrrId(1)],
        qer_ids: vec![QerId(1)],
        skipped: Default::default(),
    }
}

/// PDR 2, downlink: from N6 to UE `ue` in `network_instance`, through
/// FAR 2, URR 1 and QER 1; precedence 200.
pub fn downlink_pdr(ue: Ipv4Addr, network_instance: Option<NetworkInstance>) -> CreatePdr {
    CreatePdr {
        pdr_id: PdrId(2),
        precedence: Precedence(200),
        pdi: Pdi {
            sdf_filters: vec![],
            source_interface: SourceInterface(Interface::N6_LAN),
            local_f_teid: None,
            network_instance,
            ue_ip_address: Some(UeIpAddress {
                v4: Some(ue),
                destination: true,
                ..Default::default()
            }),
            qfi: None,
            skipped: Default::default(),
        },
        outer_header_removal: None,
        far_id: Some(FarId(2)),
        urr_ids: vec![UrrId(1)],
        qer_ids: vec![QerId(1)],
        skipped: Default::default(),
    }
}

/// FAR 1, uplink: forward to the core, in `network_instance`.
pub fn far_to_core(network_instance: Option<NetworkInstance>) -> CreateFar {
    CreateFar {
        far_id: FarId(1),
        apply_action: ApplyAction::new(ApplyAction::FORW),
        forwarding_parameters: Some(ForwardingParameters {
            destination_interface: DestinationInterface(Interface::CORE),
            network_instance,
            outer_header_creation: None,
            transport_level_marking: None,
            skipped: Default::default(),
        }),
        bar_id: None,
        skipped: Default::default(),
    }
}

/// FAR 2, downlink: forward to gNB `gnb` in GTP-U with its TEID `teid`.
pub fn far_to_gnb(teid: u32, gnb: Ipv4Addr) -> CreateFar {
    CreateFar {
        far_id: FarId(2),
        apply_action: ApplyAction::new(ApplyAction::FORW),
        forwarding_parameters: Some(ForwardingParameters {
            destination_interface: DestinationInterface(Interface::ACCESS),
            network_instance: None,
            outer_header_creation: Some(OuterHeaderCreation::gtpu(teid, gnb.into())),
            transport_level_marking: None,
            skipped: Default::default(),
        }),
        bar_id: None,
        skipped: Default::default(),
    }
}

/// Session Deletion Request for the UPF's SEID `up_seid`.
pub fn session_deletion(sequence: u32, up_seid: u64) -> PfcpRepr {
    PfcpRepr {
        seid: Some(up_seid),
        sequence,
        priority: None,
        message: Message::SessionDeletionRequest(SessionDeletionRequest {}),
    }
}
