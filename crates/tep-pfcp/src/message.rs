//! PFCP messages (TS 29.244 §7.3–§7.5): the ones a UP function exchanges
//! with its SMF, each a struct of its IEs, and [`PfcpRepr`]: the header
//! fields and the message, parsed from and emitted to bytes.

use crate::header::{self, Packet};
use crate::ie::{IeType, Skipped, Writer};
use crate::report::*;
use crate::rules::*;
use crate::types::*;
use crate::Error;

/// Message type values (§7.3, Table 7.3-1).
pub mod msg_type {
    pub const HEARTBEAT_REQUEST: u8 = 1;
    pub const HEARTBEAT_RESPONSE: u8 = 2;
    pub const ASSOCIATION_SETUP_REQUEST: u8 = 5;
    pub const ASSOCIATION_SETUP_RESPONSE: u8 = 6;
    pub const ASSOCIATION_UPDATE_REQUEST: u8 = 7;
    pub const ASSOCIATION_UPDATE_RESPONSE: u8 = 8;
    pub const ASSOCIATION_RELEASE_REQUEST: u8 = 9;
    pub const ASSOCIATION_RELEASE_RESPONSE: u8 = 10;
    pub const VERSION_NOT_SUPPORTED_RESPONSE: u8 = 11;
    pub const NODE_REPORT_REQUEST: u8 = 12;
    pub const NODE_REPORT_RESPONSE: u8 = 13;
    pub const SESSION_ESTABLISHMENT_REQUEST: u8 = 50;
    pub const SESSION_ESTABLISHMENT_RESPONSE: u8 = 51;
    pub const SESSION_MODIFICATION_REQUEST: u8 = 52;
    pub const SESSION_MODIFICATION_RESPONSE: u8 = 53;
    pub const SESSION_DELETION_REQUEST: u8 = 54;
    pub const SESSION_DELETION_RESPONSE: u8 = 55;
    pub const SESSION_REPORT_REQUEST: u8 = 56;
    pub const SESSION_REPORT_RESPONSE: u8 = 57;

    /// Session messages (S = 1) are 50 and up (§7.2.2.1).
    pub const fn is_session(t: u8) -> bool {
        t >= 50
    }

    /// Whether `t` is a request: odd below 11, even from 12 (11, Version
    /// Not Supported Response, breaks the pairing).
    pub const fn is_request(t: u8) -> bool {
        match t {
            0 | 11 => false,
            1..=10 => t & 1 == 1,
            _ => t & 1 == 0,
        }
    }
}

// Node-related messages (§7.4).

ies! {
    /// Heartbeat Request (§7.4.2.1).
    pub message HeartbeatRequest {
        req recovery_time_stamp: RecoveryTimeStamp,
    }
}

ies! {
    /// Heartbeat Response (§7.4.2.2).
    pub message HeartbeatResponse {
        req recovery_time_stamp: RecoveryTimeStamp,
    }
}

ies! {
    /// Association Setup Request (§7.4.4.1).
    pub message AssociationSetupRequest {
        req node_id: NodeId,
        req recovery_time_stamp: RecoveryTimeStamp,
        one up_function_features: UpFunctionFeatures,
    }
}

ies! {
    /// Association Setup Response (§7.4.4.2).
    pub message AssociationSetupResponse {
        req node_id: NodeId,
        req cause: Cause,
        one offending_ie: OffendingIe,
        req recovery_time_stamp: RecoveryTimeStamp,
        one up_function_features: UpFunctionFeatures,
    }
}

ies! {
    /// Association Update Request (§7.4.4.3).
    pub message AssociationUpdateRequest {
        req node_id: NodeId,
        one up_function_features: UpFunctionFeatures,
    }
}

ies! {
    /// Association Update Response (§7.4.4.4).
    pub message AssociationUpdateResponse {
        req node_id: NodeId,
        req cause: Cause,
        one offending_ie: OffendingIe,
        one up_function_features: UpFunctionFeatures,
    }
}

ies! {
    /// Association Release Request (§7.4.4.5).
    pub message AssociationReleaseRequest {
        req node_id: NodeId,
    }
}

ies! {
    /// Association Release Response (§7.4.4.6).
    pub message AssociationReleaseResponse {
        req node_id: NodeId,
        req cause: Cause,
        one offending_ie: OffendingIe,
    }
}

ies! {
    /// Node Report Request (§7.4.5.1): a GTP-U path failed or recovered.
    pub message NodeReportRequest {
        req node_id: NodeId,
        req node_report_type: NodeReportType,
        one user_plane_path_failure_report: UserPlanePathFailureReport,
        one user_plane_path_recovery_report: UserPlanePathRecoveryReport,
    }
}

ies! {
    /// Node Report Response (§7.4.5.2).
    pub message NodeReportResponse {
        req node_id: NodeId,
        req cause: Cause,
        one offending_ie: OffendingIe,
    }
}

// Session-related messages (§7.5).

ies! {
    /// Session Establishment Request (§7.5.2).
    pub message SessionEstablishmentRequest {
        req node_id: NodeId,
        req cp_f_seid: FSeid,
        some create_pdrs: CreatePdr,
        some create_fars: CreateFar,
        many create_urrs: CreateUrr,
        many create_qers: CreateQer,
        /// At most one (a session has one BAR): a second is refused.
        many create_bars: CreateBar,
        /// IEs tep does not apply (refused) or know (discarded).
        rest skipped: Skipped,
    }
}

ies! {
    /// Session Establishment Response (§7.5.3).
    pub message SessionEstablishmentResponse {
        req node_id: NodeId,
        req cause: Cause,
        one offending_ie: OffendingIe,
        one up_f_seid: FSeid,
        many created_pdrs: CreatedPdr,
        one failed_rule_id: FailedRuleId,
    }
}

ies! {
    /// Session Modification Request (§7.5.4).
    pub message SessionModificationRequest {
        one cp_f_seid: FSeid,
        many remove_pdrs: RemovePdr,
        many remove_fars: RemoveFar,
        many remove_urrs: RemoveUrr,
        many remove_qers: RemoveQer,
        many create_pdrs: CreatePdr,
        many create_fars: CreateFar,
        many create_urrs: CreateUrr,
        many create_qers: CreateQer,
        many update_pdrs: UpdatePdr,
        many update_fars: UpdateFar,
        many update_urrs: UpdateUrr,
        many update_qers: UpdateQer,
        /// QUARR: report every URR; DROBU: drop the buffered packets.
        one flags: PfcpsmReqFlags,
        many query_urrs: QueryUrr,
        /// At most one BAR in the session (a second is refused).
        many create_bars: CreateBar,
        one update_bar: UpdateBar,
        one remove_bar: RemoveBar,
        /// IEs tep does not apply (refused) or know (discarded).
        rest skipped: Skipped,
    }
}

ies! {
    /// Session Modification Response (§7.5.5).
    pub message SessionModificationResponse {
        req cause: Cause,
        one offending_ie: OffendingIe,
        many created_pdrs: CreatedPdr,
        many usage_reports: UsageReportSmr,
        one failed_rule_id: FailedRuleId,
    }
}

ies! {
    /// Session Deletion Request (§7.5.6): no IEs tep reads.
    pub message SessionDeletionRequest {}
}

ies! {
    /// Session Deletion Response (§7.5.7).
    pub message SessionDeletionResponse {
        req cause: Cause,
        one offending_ie: OffendingIe,
        many usage_reports: UsageReportSdr,
    }
}

ies! {
    /// Session Report Request (§7.5.8).
    pub message SessionReportRequest {
        req report_type: ReportType,
        one downlink_data_report: DownlinkDataReport,
        many usage_reports: UsageReportSrr,
        one error_indication_report: ErrorIndicationReport,
    }
}

ies! {
    /// Session Report Response (§7.5.9).
    pub message SessionReportResponse {
        req cause: Cause,
        one offending_ie: OffendingIe,
        one update_bar: UpdateBarSrr,
        /// DROBU: drop the packets buffered for the session.
        one flags: PfcpsrRspFlags,
    }
}

/// A message tep handles.
// A Session Modification Request is the largest by far (a few hundred
// bytes, its rule lists on the heap anyway): a message is parsed once per
// datagram and handled in place, so boxing it would add an allocation
// per message to save stack space nobody lacks.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    HeartbeatRequest(HeartbeatRequest),
    HeartbeatResponse(HeartbeatResponse),
    AssociationSetupRequest(AssociationSetupRequest),
    AssociationSetupResponse(AssociationSetupResponse),
    AssociationUpdateRequest(AssociationUpdateRequest),
    AssociationUpdateResponse(AssociationUpdateResponse),
    AssociationReleaseRequest(AssociationReleaseRequest),
    AssociationReleaseResponse(AssociationReleaseResponse),
    VersionNotSupportedResponse,
    NodeReportRequest(NodeReportRequest),
    NodeReportResponse(NodeReportResponse),
    SessionEstablishmentRequest(SessionEstablishmentRequest),
    SessionEstablishmentResponse(SessionEstablishmentResponse),
    SessionModificationRequest(SessionModificationRequest),
    SessionModificationResponse(SessionModificationResponse),
    SessionDeletionRequest(SessionDeletionRequest),
    SessionDeletionResponse(SessionDeletionResponse),
    SessionReportRequest(SessionReportRequest),
    SessionReportResponse(SessionReportResponse),
}

impl Message {
    /// The message type.
    pub fn msg_type(&self) -> u8 {
        use msg_type::*;
        match self {
            Message::HeartbeatRequest(_) => HEARTBEAT_REQUEST,
            Message::HeartbeatResponse(_) => HEARTBEAT_RESPONSE,
            Message::AssociationSetupRequest(_) => ASSOCIATION_SETUP_REQUEST,
            Message::AssociationSetupResponse(_) => ASSOCIATION_SETUP_RESPONSE,
            Message::AssociationUpdateRequest(_) => ASSOCIATION_UPDATE_REQUEST,
            Message::AssociationUpdateResponse(_) => ASSOCIATION_UPDATE_RESPONSE,
            Message::AssociationReleaseRequest(_) => ASSOCIATION_RELEASE_REQUEST,
            Message::AssociationReleaseResponse(_) => ASSOCIATION_RELEASE_RESPONSE,
            Message::VersionNotSupportedResponse => VERSION_NOT_SUPPORTED_RESPONSE,
            Message::NodeReportRequest(_) => NODE_REPORT_REQUEST,
            Message::NodeReportResponse(_) => NODE_REPORT_RESPONSE,
            Message::SessionEstablishmentRequest(_) => SESSION_ESTABLISHMENT_REQUEST,
            Message::SessionEstablishmentResponse(_) => SESSION_ESTABLISHMENT_RESPONSE,
            Message::SessionModificationRequest(_) => SESSION_MODIFICATION_REQUEST,
            Message::SessionModificationResponse(_) => SESSION_MODIFICATION_RESPONSE,
            Message::SessionDeletionRequest(_) => SESSION_DELETION_REQUEST,
            Message::SessionDeletionResponse(_) => SESSION_DELETION_RESPONSE,
            Message::SessionReportRequest(_) => SESSION_REPORT_REQUEST,
            Message::SessionReportResponse(_) => SESSION_REPORT_RESPONSE,
        }
    }

    /// Decodes the body of a message of type `t`.
    pub fn parse(t: u8, body: &[u8]) -> Result<Message, Error> {
        use msg_type::*;
        let p = IeType(0);
        Ok(match t {
            HEARTBEAT_REQUEST => Message::HeartbeatRequest(HeartbeatRequest::parse_ies(body, p)?),
            HEARTBEAT_RESPONSE => {
                Message::HeartbeatResponse(HeartbeatResponse::parse_ies(body, p)?)
            }
            ASSOCIATION_SETUP_REQUEST => {
                Message::AssociationSetupRequest(AssociationSetupRequest::parse_ies(body, p)?)
            }
            ASSOCIATION_SETUP_RESPONSE => {
                Message::AssociationSetupResponse(AssociationSetupResponse::parse_ies(body, p)?)
            }
            ASSOCIATION_UPDATE_REQUEST => {
                Message::AssociationUpdateRequest(AssociationUpdateRequest::parse_ies(body, p)?)
            }
            ASSOCIATION_UPDATE_RESPONSE => {
                Message::AssociationUpdateResponse(AssociationUpdateResponse::parse_ies(body, p)?)
            }
            ASSOCIATION_RELEASE_REQUEST => {
                Message::AssociationReleaseRequest(AssociationReleaseRequest::parse_ies(body, p)?)
            }
            ASSOCIATION_RELEASE_RESPONSE => {
                Message::AssociationReleaseResponse(AssociationReleaseResponse::parse_ies(body, p)?)
            }
            VERSION_NOT_SUPPORTED_RESPONSE => Message::VersionNotSupportedResponse,
            NODE_REPORT_REQUEST => {
                Message::NodeReportRequest(NodeReportRequest::parse_ies(body, p)?)
            }
            NODE_REPORT_RESPONSE => {
                Message::NodeReportResponse(NodeReportResponse::parse_ies(body, p)?)
            }
            SESSION_ESTABLISHMENT_REQUEST => Message::SessionEstablishmentRequest(
                SessionEstablishmentRequest::parse_ies(body, p)?,
            ),
            SESSION_ESTABLISHMENT_RESPONSE => Message::SessionEstablishmentResponse(
                SessionEstablishmentResponse::parse_ies(body, p)?,
            ),
            SESSION_MODIFICATION_REQUEST => {
                Message::SessionModificationRequest(SessionModificationRequest::parse_ies(body, p)?)
            }
            SESSION_MODIFICATION_RESPONSE => Message::SessionModificationResponse(
                SessionModificationResponse::parse_ies(body, p)?,
            ),
            SESSION_DELETION_REQUEST => {
                Message::SessionDeletionRequest(SessionDeletionRequest::parse_ies(body, p)?)
            }
            SESSION_DELETION_RESPONSE => {
                Message::SessionDeletionResponse(SessionDeletionResponse::parse_ies(body, p)?)
            }
            SESSION_REPORT_REQUEST => {
                Message::SessionReportRequest(SessionReportRequest::parse_ies(body, p)?)
            }
            SESSION_REPORT_RESPONSE => {
                Message::SessionReportResponse(SessionReportResponse::parse_ies(body, p)?)
            }
            t => return Err(Error::UnknownMessage(t)),
        })
    }

    fn emit_ies(&self, w: &mut Writer<'_>) {
        match self {
            Message::HeartbeatRequest(m) => m.emit_ies(w),
            Message::HeartbeatResponse(m) => m.emit_ies(w),
            Message::AssociationSetupRequest(m) => m.emit_ies(w),
            Message::AssociationSetupResponse(m) => m.emit_ies(w),
            Message::AssociationUpdateRequest(m) => m.emit_ies(w),
            Message::AssociationUpdateResponse(m) => m.emit_ies(w),
            Message::AssociationReleaseRequest(m) => m.emit_ies(w),
            Message::AssociationReleaseResponse(m) => m.emit_ies(w),
            Message::VersionNotSupportedResponse => {}
            Message::NodeReportRequest(m) => m.emit_ies(w),
            Message::NodeReportResponse(m) => m.emit_ies(w),
            Message::SessionEstablishmentRequest(m) => m.emit_ies(w),
            Message::SessionEstablishmentResponse(m) => m.emit_ies(w),
            Message::SessionModificationRequest(m) => m.emit_ies(w),
            Message::SessionModificationResponse(m) => m.emit_ies(w),
            Message::SessionDeletionRequest(m) => m.emit_ies(w),
            Message::SessionDeletionResponse(m) => m.emit_ies(w),
            Message::SessionReportRequest(m) => m.emit_ies(w),
            Message::SessionReportResponse(m) => m.emit_ies(w),
        }
    }

    /// The response to a request of type `t` that failed with `cause`
    /// (naming `offending` if any), or `None` if `t` is not a request tep
    /// answers. `node_id` fills the responses whose Node ID is mandatory.
    pub fn rejection(
        t: u8,
        cause: Cause,
        offending: Option<IeType>,
        node_id: &NodeId,
        recovery_time_stamp: RecoveryTimeStamp,
    ) -> Option<Message> {
        use msg_type::*;
        let offending_ie = offending.map(OffendingIe);
        let node_id = node_id.clone();
        Some(match t {
            ASSOCIATION_SETUP_REQUEST => {
                Message::AssociationSetupResponse(AssociationSetupResponse {
                    node_id,
                    cause,
                    offending_ie,
                    recovery_time_stamp,
                    up_function_features: None,
                })
            }
            ASSOCIATION_UPDATE_REQUEST => {
                Message::AssociationUpdateResponse(AssociationUpdateResponse {
                    node_id,
                    cause,
                    offending_ie,
                    up_function_features: None,
                })
            }
            ASSOCIATION_RELEASE_REQUEST => {
                Message::AssociationReleaseResponse(AssociationReleaseResponse {
                    node_id,
                    cause,
                    offending_ie,
                })
            }
            NODE_REPORT_REQUEST => Message::NodeReportResponse(NodeReportResponse {
                node_id,
                cause,
                offending_ie,
            }),
            SESSION_ESTABLISHMENT_REQUEST => {
                Message::SessionEstablishmentResponse(SessionEstablishmentResponse {
                    node_id,
                    cause,
                    offending_ie,
                    ..Default::default()
                })
            }
            SESSION_MODIFICATION_REQUEST => {
                Message::SessionModificationResponse(SessionModificationResponse {
                    cause,
                    offending_ie,
                    ..Default::default()
                })
            }
            SESSION_DELETION_REQUEST => Message::SessionDeletionResponse(SessionDeletionResponse {
                cause,
                offending_ie,
                ..Default::default()
            }),
            SESSION_REPORT_REQUEST => Message::SessionReportResponse(SessionReportResponse {
                cause,
                offending_ie,
                ..Default::default()
            }),
            _ => return None,
        })
    }
}

/// A PFCP message: header fields and body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PfcpRepr {
    /// The SEID of a session message (S = 1), `None` for a node message.
    pub seid: Option<u64>,
    /// The 24-bit sequence number.
    pub sequence: u32,
    /// The message priority (MP = 1), 4 bits.
    pub priority: Option<u8>,
    pub message: Message,
}

impl PfcpRepr {
    /// Parses the first message of a checked packet. The S flag must match
    /// the type (session messages carry an SEID, node messages none).
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<PfcpRepr, Error> {
        let t = p.msg_type();
        let message = Message::parse(t, p.payload())?;
        if p.s_flag() != msg_type::is_session(t) {
            return Err(Error::BadSeidFlag);
        }
        Ok(PfcpRepr {
            seid: p.seid(),
            sequence: p.sequence(),
            priority: p.priority(),
            message,
        })
    }

    /// Parses bytes holding one message (the first, if bundled).
    pub fn parse_bytes(b: &[u8]) -> Result<PfcpRepr, Error> {
        Self::parse(&Packet::new_checked(b)?)
    }

    /// Appends the message to `buf`. A session message without an SEID
    /// gets SEID 0; a node message's SEID is not sent.
    pub fn emit(&self, buf: &mut Vec<u8>) {
        let start = buf.len();
        let t = self.message.msg_type();
        let seid = if msg_type::is_session(t) {
            Some(self.seid.unwrap_or(0))
        } else {
            None
        };
        header::emit(
            buf,
            t,
            seid,
            self.sequence & 0xff_ffff,
            self.priority.map(|p| p & 0x0f),
        );
        self.message.emit_ies(&mut Writer::new(buf));
        header::set_length(buf, start);
    }

    /// The message as a new buffer.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(64);
        self.emit(&mut b);
        b
    }
}
