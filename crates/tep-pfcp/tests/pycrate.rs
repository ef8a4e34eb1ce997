//! tep-pfcp against pycrate (`pycrate_mobile/TS29244_PFCP.py`), a second
//! PFCP implementation beside scapy (tests/scapy.rs), driven by
//! tests/pycrate_pfcp.py:
//! - the requests an SMF sends, encoded by pycrate, parse in tep-pfcp to
//!   the values pycrate was given, and tep's node accepts them;
//! - every message the node sends in answer (and the ones it sends on its
//!   own: Heartbeat Request, Session Report Requests, refusals) decodes in
//!   pycrate without error, re-encodes to the same bytes, holds only the
//!   IEs TS 29.244 lists for its message and grouped IEs, with the values
//!   tep wrote (and the Start Time and End Time the spec's tables require
//!   in usage reports, which pycrate lists as optional).
//!
//! pycrate comes from PyPI: .ci/run installs it in a venv at
//! /opt/tep-pycrate; `TEP_PYCRATE_PYTHON` names another interpreter.

use std::collections::HashMap;
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tep_pfcp::message::*;
use tep_pfcp::node::{Change, Config, Node, Refused, Usage, UserPlane};
use tep_pfcp::report::*;
use tep_pfcp::rules::*;
use tep_pfcp::types::*;
use tep_pfcp::{sample, IeType, PfcpRepr};

const V4: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 1);
const SMF: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 10);
const GNB: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 5);
const GNB2: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 6);
const UE: Ipv4Addr = Ipv4Addr::new(10, 45, 0, 7);
const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/pycrate_pfcp.py");

/// The first interpreter that imports pycrate's PFCP, or `None` (after
/// `tep_testing::skip`).
fn python(test: &str) -> Option<String> {
    let mut candidates: Vec<String> = std::env::var("TEP_PYCRATE_PYTHON").into_iter().collect();
    candidates.extend(["/opt/tep-pycrate/bin/python3".into(), "python3".into()]);
    let found = candidates.into_iter().find(|py| {
        Command::new(py)
            .args(["-c", "import pycrate_mobile.TS29244_PFCP"])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    });
    if found.is_none() {
        tep_testing::skip(format!(
            "{test}: needs pycrate (.ci/run: a venv at /opt/tep-pycrate)"
        ));
    }
    found
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// Runs the script in `mode` with `input` on stdin; its stdout's lines.
fn script(py: &str, mode: &str, input: &str) -> Vec<String> {
    let mut child = Command::new(py)
        .args([SCRIPT, mode])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "pycrate_pfcp.py {mode} failed");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// pycrate's requests by name.
fn requests(py: &str) -> HashMap<String, Vec<u8>> {
    script(py, "encode", "")
        .iter()
        .map(|l| {
            let (name, h) = l.split_once(' ').unwrap();
            (name.to_string(), unhex(h))
        })
        .collect()
}

fn fqdn() -> NodeId {
    NodeId::fqdn("smf.pycrate.test").unwrap()
}

fn internet() -> Option<NetworkInstance> {
    Some(NetworkInstance(b"\x08internet".to_vec()))
}

fn gtpu(teid: u32, to: Ipv4Addr) -> Option<OuterHeaderCreation> {
    Some(OuterHeaderCreation::gtpu(teid, to.into()))
}

/// pycrate writes Apply Action in the Rel-16 two octets.
fn action(bits: u64) -> ApplyAction {
    ApplyAction(Bitmap::new(bits, 2))
}

fn establishment() -> SessionEstablishmentRequest {
    let mut dl = sample::downlink_pdr(UE, internet());
    dl.pdi.source_interface = SourceInterface(Interface::CORE);
    let mut far_core = sample::far_to_core(internet());
    far_core.apply_action = action(ApplyAction::FORW);
    let mut far_gnb = sample::far_to_gnb(0x100, GNB);
    far_gnb.apply_action = action(ApplyAction::FORW);
    far_gnb.bar_id = Some(BarId(1));
    if let Some(fp) = far_gnb.forwarding_parameters.as_mut() {
        fp.transport_level_marking = Some(TransportLevelMarking {
            tos: 0xb8,
            mask: 0xfc,
        });
    }
    SessionEstablishmentRequest {
        node_id: NodeId::V4(SMF),
        cp_f_seid: FSeid {
            seid: 7000,
            v4: Some(SMF),
            v6: None,
        },
        create_pdrs: vec![sample::uplink_pdr(Some(UE)), dl],
        create_fars: vec![far_core, far_gnb],
        create_urrs: vec![CreateUrr {
            urr_id: UrrId(1),
            measurement_method: MeasurementMethod(
                MeasurementMethod::VOLUM | MeasurementMethod::DURAT,
            ),
            // pycrate writes the Rel-16 three octets.
            reporting_triggers: ReportingTriggers(Bitmap::new(
                ReportingTriggers::VOLTH
                    | ReportingTriggers::PERIO
                    | ReportingTriggers::TIMTH
                    | ReportingTriggers::START
                    | ReportingTriggers::STOPT
                    | ReportingTriggers::VOLQU
                    | ReportingTriggers::TIMQU,
                3,
            )),
            measurement_period: Some(MeasurementPeriod(3600)),
            volume_threshold: Some(VolumeThreshold {
                total: Some(1_000_000),
                ..Default::default()
            }),
            volume_quota: Some(VolumeQuota(VolumeThreshold {
                uplink: Some(1 << 40),
                ..Default::default()
            })),
            time_threshold: Some(TimeThreshold(7200)),
            time_quota: Some(TimeQuota(86400)),
            inactivity_detection_time: Some(InactivityDetectionTime(30)),
            ..Default::default()
        }],
        create_qers: vec![CreateQer {
            qer_id: QerId(1),
            mbr: None,
            gbr: Some(Gbr { ul: 64, dl: 128 }),
            gate_status: GateStatus::open(),
            qfi: Some(Qfi(9)),
            skipped: Default::default(),
        }],
        create_bars: vec![CreateBar {
            bar_id: BarId(1),
            downlink_data_notification_delay: Some(DownlinkDataNotificationDelay(2)),
            suggested_buffering_packets_count: Some(SuggestedBufferingPacketsCount(4)),
            skipped: Default::default(),
        }],
        skipped: Default::default(),
    }
}

fn handover() -> SessionModificationRequest {
    SessionModificationRequest {
        update_fars: vec![UpdateFar {
            far_id: FarId(2),
            apply_action: Some(action(ApplyAction::FORW)),
            update_forwarding_parameters: Some(UpdateForwardingParameters {
                destination_interface: Some(DestinationInterface(Interface::ACCESS)),
                network_instance: None,
                outer_header_creation: gtpu(0x200, GNB2),
                transport_level_marking: None,
                flags: None,
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
        flags: Some(PfcpsmReqFlags(PfcpsmReqFlags::DROBU)),
        query_urrs: vec![QueryUrr { urr_id: UrrId(1) }],
        ..Default::default()
    }
}

fn idle() -> SessionModificationRequest {
    SessionModificationRequest {
        update_fars: vec![UpdateFar {
            far_id: FarId(2),
            apply_action: Some(action(ApplyAction::BUFF | ApplyAction::NOCP)),
            update_forwarding_parameters: None,
            bar_id: None,
            skipped: Default::default(),
        }],
        update_bar: Some(UpdateBar {
            bar_id: BarId(1),
            downlink_data_notification_delay: None,
            suggested_buffering_packets_count: Some(SuggestedBufferingPacketsCount(3)),
            skipped: Default::default(),
        }),
        ..Default::default()
    }
}

/// What pycrate was asked to encode (tests/pycrate_pfcp.py `requests`).
fn expected() -> Vec<(&'static str, Option<u64>, u32, Message)> {
    use Message as M;
    vec![
        (
            "heartbeat_request",
            None,
            1,
            M::HeartbeatRequest(HeartbeatRequest {
                recovery_time_stamp: RecoveryTimeStamp(3_950_000_000),
            }),
        ),
        (
            "association_setup_request",
            None,
            2,
            M::AssociationSetupRequest(AssociationSetupRequest {
                node_id: fqdn(),
                recovery_time_stamp: RecoveryTimeStamp(3_900_000_000),
                up_function_features: None,
            }),
        ),
        (
            "association_update_request",
            None,
            3,
            M::AssociationUpdateRequest(AssociationUpdateRequest {
                node_id: fqdn(),
                up_function_features: None,
            }),
        ),
        (
            "session_establishment_request",
            Some(0),
            4,
            M::SessionEstablishmentRequest(establishment()),
        ),
        (
            "session_modification_request",
            Some(0),
            5,
            M::SessionModificationRequest(handover()),
        ),
        (
            "session_modification_idle",
            Some(0),
            6,
            M::SessionModificationRequest(idle()),
        ),
        (
            "session_deletion_request",
            Some(0),
            7,
            M::SessionDeletionRequest(SessionDeletionRequest {}),
        ),
        (
            "session_report_response",
            Some(0),
            0,
            M::SessionReportResponse(SessionReportResponse {
                cause: Cause::REQUEST_ACCEPTED,
                offending_ie: None,
                update_bar: None,
                flags: Some(PfcpsrRspFlags(PfcpsrRspFlags::DROBU)),
            }),
        ),
        (
            "association_release_request",
            None,
            8,
            M::AssociationReleaseRequest(AssociationReleaseRequest { node_id: fqdn() }),
        ),
    ]
}

#[test]
fn pycrates_requests_parse_to_what_it_was_given() {
    let Some(py) = python("pycrates_requests_parse_to_what_it_was_given") else {
        return;
    };
    let req = requests(&py);
    let exp = expected();
    assert_eq!(req.len(), exp.len(), "every request has its expectation");
    for (name, seid, sequence, message) in exp {
        let bytes = &req[name];
        let got = PfcpRepr::parse_bytes(bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        let want = PfcpRepr {
            seid,
            sequence,
            priority: None,
            message,
        };
        assert_eq!(got, want, "{name}");
        // Nothing skipped: tep writes back pycrate's very bytes.
        assert_eq!(&got.to_bytes(), bytes, "{name}: re-emitted");
    }
}

/// A user plane that takes every change and counts 100 bytes up and 200
/// down (1 and 2 packets) for each URR asked.
#[derive(Default)]
struct Up {
    installs: usize,
    removes: usize,
    drops: usize,
}

impl UserPlane for Up {
    fn apply(&mut self, c: Change<'_>) -> Result<(), Refused> {
        match c {
            Change::Install { .. } => self.installs += 1,
            Change::Remove { .. } => self.removes += 1,
            Change::DropBuffered { .. } => self.drops += 1,
            Change::EndMarker { .. } => {}
        }
        Ok(())
    }
    fn take_usage(&mut self, _: u64, _: u32) -> Usage {
        Usage {
            uplink_bytes: 100,
            downlink_bytes: 200,
            uplink_packets: 1,
            downlink_packets: 2,
        }
    }
}

/// tep's node talking to the SMF pycrate plays; what it sent, by name.
struct Smf {
    node: Node,
    up: Up,
    now: Instant,
    req: HashMap<String, Vec<u8>>,
    sent: Vec<(String, Vec<u8>)>,
}

const FROM: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(SMF), 8805);

impl Smf {
    fn new(req: HashMap<String, Vec<u8>>) -> Smf {
        let mut c = Config::new(NodeId::V4(V4), 3_950_000_000, Some(V4), None);
        c.heartbeat_interval = Some(Duration::from_secs(60));
        // pycrate's URR has a volume threshold: this user plane stands for
        // one that scans usage.
        c.usage_scans = true;
        Smf {
            node: Node::new(c),
            up: Up::default(),
            now: Instant::now(),
            req,
            sent: Vec::new(),
        }
    }

    /// The one datagram the node has to send, recorded as `name`.
    fn take(&mut self, name: &str) -> PfcpRepr {
        let t = self.node.poll_transmit().expect(name);
        assert_eq!(t.destination, FROM, "{name}");
        assert!(self.node.poll_transmit().is_none(), "{name}: one datagram");
        let r = PfcpRepr::parse_bytes(&t.payload).unwrap_or_else(|e| panic!("{name}: {e}"));
        self.sent.push((name.to_string(), t.payload));
        r
    }

    /// Sends `bytes`; the node's answer, recorded as `answer`.
    fn send(&mut self, bytes: &[u8], answer: &str) -> PfcpRepr {
        self.node.handle(self.now, FROM, bytes, &mut self.up);
        self.take(answer)
    }

    /// Sends pycrate's request `name` (a session message to `seid`, with
    /// sequence number `seq` if given).
    fn ask(&mut self, name: &str, seid: Option<u64>, seq: Option<u32>, answer: &str) -> PfcpRepr {
        let mut b = self.req[name].clone();
        if let Some(s) = seid {
            b[4..12].copy_from_slice(&s.to_be_bytes());
        }
        if let Some(q) = seq {
            let at = if b[0] & 1 != 0 { 12 } else { 4 };
            b[at..at + 3].copy_from_slice(&q.to_be_bytes()[1..]);
        }
        self.send(&b, answer)
    }

    /// Answers the node's Session Report Request `r` with pycrate's
    /// Session Report Response.
    fn acknowledge(&mut self, r: &PfcpRepr) {
        let mut b = self.req["session_report_response"].clone();
        b[4..12].copy_from_slice(&r.seid.unwrap().to_be_bytes());
        b[12..15].copy_from_slice(&r.sequence.to_be_bytes()[1..]);
        self.node.handle(self.now, FROM, &b, &mut self.up);
        assert!(
            self.node.poll_transmit().is_none(),
            "a response is not answered"
        );
    }
}

fn cause(r: &PfcpRepr) -> Cause {
    match &r.message {
        Message::HeartbeatResponse(_) => Cause::REQUEST_ACCEPTED,
        Message::AssociationSetupResponse(m) => m.cause,
        Message::AssociationUpdateResponse(m) => m.cause,
        Message::AssociationReleaseResponse(m) => m.cause,
        Message::SessionEstablishmentResponse(m) => m.cause,
        Message::SessionModificationResponse(m) => m.cause,
        Message::SessionDeletionResponse(m) => m.cause,
        m => panic!("not a response: {m:?}"),
    }
}

/// pycrate's establishment request without its CP F-SEID (a mandatory IE),
/// under sequence number 20.
fn without_f_seid(est: &[u8]) -> Vec<u8> {
    let mut b = est[..16].to_vec();
    let mut ies = &est[16..];
    while ies.len() >= 4 {
        let len = 4 + u16::from_be_bytes([ies[2], ies[3]]) as usize;
        if u16::from_be_bytes([ies[0], ies[1]]) != IeType::F_SEID.0 {
            b.extend_from_slice(&ies[..len]);
        }
        ies = &ies[len..];
    }
    let len = (b.len() - 4) as u16;
    b[2..4].copy_from_slice(&len.to_be_bytes());
    b[12..15].copy_from_slice(&[0, 0, 20]);
    b
}

/// Drives the node through a PDU session's life with pycrate's requests
/// (each accepted), and through the refusals it sends; returns what it
/// sent, by name.
fn a_session_with_pycrate(req: HashMap<String, Vec<u8>>) -> Vec<(String, Vec<u8>)> {
    let mut s = Smf::new(req);
    let r = s.ask(
        "association_setup_request",
        None,
        None,
        "association_setup_response",
    );
    assert_eq!(cause(&r), Cause::REQUEST_ACCEPTED);
    let r = s.ask("heartbeat_request", None, None, "heartbeat_response");
    assert_eq!(cause(&r), Cause::REQUEST_ACCEPTED);
    let r = s.ask(
        "association_update_request",
        None,
        None,
        "association_update_response",
    );
    assert_eq!(cause(&r), Cause::REQUEST_ACCEPTED);
    let r = s.ask(
        "session_establishment_request",
        None,
        None,
        "session_establishment_response",
    );
    assert_eq!((cause(&r), r.seid), (Cause::REQUEST_ACCEPTED, Some(7000)));
    let Message::SessionEstablishmentResponse(e) = r.message else {
        unreachable!()
    };
    let seid = e.up_f_seid.unwrap().seid;
    let r = s.ask(
        "session_modification_request",
        Some(seid),
        None,
        "session_modification_response",
    );
    assert_eq!(cause(&r), Cause::REQUEST_ACCEPTED);
    let (now, mut up) = (s.now, std::mem::take(&mut s.up));
    // Each scan takes 200 bytes down: the first sees the traffic start
    // (START), the 25th the 5000-byte threshold reached.
    s.node.scan_usage(now, &mut up);
    let r = s.take("session_report_start");
    s.acknowledge(&r);
    for _ in 1..25 {
        assert!(s.node.poll_transmit().is_none());
        s.node.scan_usage(now, &mut up);
    }
    s.up = up;
    let r = s.take("session_report_usage");
    s.acknowledge(&r);
    let r = s.ask(
        "session_modification_idle",
        Some(seid),
        None,
        "session_modification_idle_response",
    );
    assert_eq!(cause(&r), Cause::REQUEST_ACCEPTED);
    s.node.downlink_data(now, seid, 2);
    assert!(
        s.node.poll_transmit().is_none(),
        "not before the BAR's delay"
    );
    s.now += Duration::from_millis(100);
    let (now, mut up) = (s.now, std::mem::take(&mut s.up));
    s.node.handle_timeout(now, &mut up);
    s.up = up;
    let r = s.take("session_report_downlink_data");
    s.acknowledge(&r);
    s.now += Duration::from_secs(61);
    let (now, mut up) = (s.now, std::mem::take(&mut s.up));
    s.node.handle_timeout(now, &mut up);
    s.up = up;
    let hb = s.take("heartbeat_request");
    assert!(matches!(hb.message, Message::HeartbeatRequest(_)), "{hb:?}");
    let r = s.ask(
        "session_deletion_request",
        Some(seid),
        None,
        "session_deletion_response",
    );
    assert_eq!(cause(&r), Cause::REQUEST_ACCEPTED);
    // Measured from the last report (the threshold's, at start) to the
    // deletion, 61 s later, in NTP seconds from the Recovery Time Stamp.
    let Message::SessionDeletionResponse(d) = &r.message else {
        unreachable!()
    };
    let u = &d.usage_reports[0].0;
    assert_eq!(
        (u.start_time, u.end_time),
        (Some(StartTime(3_950_000_000)), Some(EndTime(3_950_000_061)))
    );
    assert_eq!((s.up.installs, s.up.removes), (3, 1));
    // DROBU: the handover's, and each Session Report Response's.
    assert_eq!(s.up.drops, 3);
    // The refusals: the session is gone; a mandatory IE missing; a PDR
    // naming a FAR the request lacks; PFCP version 2.
    let r = s.ask(
        "session_deletion_request",
        Some(seid),
        Some(21),
        "session_not_found",
    );
    assert_eq!(cause(&r), Cause::SESSION_CONTEXT_NOT_FOUND);
    let b = without_f_seid(&s.req["session_establishment_request"]);
    let r = s.send(&b, "mandatory_ie_missing");
    assert_eq!(cause(&r), Cause::MANDATORY_IE_MISSING);
    let mut bad = establishment();
    bad.create_pdrs[1].far_id = Some(FarId(9));
    let bad = PfcpRepr {
        seid: Some(0),
        sequence: 22,
        priority: None,
        message: Message::SessionEstablishmentRequest(bad),
    };
    let r = s.send(&bad.to_bytes(), "session_establishment_refused");
    assert_eq!(cause(&r), Cause::RULE_CREATION_MODIFICATION_FAILURE);
    let mut v2 = s.req["heartbeat_request"].clone();
    v2[0] = (v2[0] & 0x1f) | 2 << 5;
    v2[6] = 23;
    s.send(&v2, "version_not_supported");
    let r = s.ask(
        "association_release_request",
        None,
        None,
        "association_release_response",
    );
    assert_eq!(cause(&r), Cause::REQUEST_ACCEPTED);
    s.sent
}

/// pycrate's lines for message `name`: (path, value; "" for an IE).
fn fields<'a>(all: &'a [String], name: &str) -> Vec<(&'a str, &'a str)> {
    all.iter()
        .filter_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .map(|l| l.split_once('=').unwrap_or((l, "")))
        .collect()
}

/// Asserts that pycrate read `path` = `want` in `f` (at least once).
fn has(f: &[(&str, &str)], name: &str, path: &str, want: impl ToString) {
    let want = want.to_string();
    assert!(
        f.iter().any(|&(p, v)| p == path && v == want),
        "{name}: pycrate read no {path}={want}; it read {:?}",
        f.iter().filter(|(p, _)| p == &path).collect::<Vec<_>>()
    );
}

#[test]
fn the_node_accepts_pycrates_requests_and_pycrate_decodes_all_it_sends() {
    let test = "the_node_accepts_pycrates_requests_and_pycrate_decodes_all_it_sends";
    let Some(py) = python(test) else {
        return;
    };
    let sent = a_session_with_pycrate(requests(&py));
    decodes_as_written(&py, &sent);
}

/// pycrate decodes each of `sent` without complaint, to the values tep
/// wrote.
fn decodes_as_written(py: &str, sent: &[(String, Vec<u8>)]) {
    let input: String = sent
        .iter()
        .map(|(n, b)| format!("{n} {}\n", hex(b)))
        .collect();
    let all = script(py, "decode", &input);
    for (name, bytes) in sent {
        let f = fields(&all, name);
        let r = PfcpRepr::parse_bytes(bytes).unwrap();
        has(&f, name, "!error", 0);
        has(&f, name, "!reencoded", "same");
        let wrong: Vec<_> = f
            .iter()
            .filter(|(p, _)| matches!(*p, "!missing" | "!unexpected" | "!raw"))
            .collect();
        assert!(wrong.is_empty(), "{name}: {wrong:?}");
        has(&f, name, "Hdr/Type", r.message.msg_type());
        has(&f, name, "Hdr/SeqNum", r.sequence);
        has(&f, name, "Hdr/Len", bytes.len() - 4);
        if let Some(seid) = r.seid {
            has(&f, name, "Hdr/SEID", seid);
        }
        // Every octet inside a known IE is one pycrate knows.
        let ext: Vec<_> = f
            .iter()
            .filter(|(p, v)| p.ends_with("/ext") && !v.is_empty())
            .collect();
        assert!(
            ext.is_empty(),
            "{name}: octets pycrate did not know: {ext:?}"
        );
        check_values(name, &r, &f);
    }
}

/// pycrate's names of a bitmap IE's flags, octet by octet, most
/// significant bit first (TS 29.244 §8.2.25, §8.2.41, §8.2.21).
const UP_FEATURES: [&str; 16] = [
    "TREU", "HEEU", "PFDM", "FTUP", "TRST", "DLBD", "DDND", "BUCP", "EPFAR", "PFDE", "FRRT",
    "TRACE", "QUOAC", "UDBC", "PDIU", "EMPU",
];
const REPORT_TRIGGERS: [&str; 16] = [
    "IMMER", "DROTH", "STOPT", "START", "QUHTI", "TIMTH", "VOLTH", "PERIO", "EVETH", "MACAR",
    "ENVCL", "MONIT", "TERMR", "LIUSA", "TIMQU", "VOLQU",
];
const REPORT_TYPE: [&str; 8] = [
    "spare", "UISR", "SESR", "TMIR", "UPIR", "ERIR", "USAR", "DLDR",
];

/// The flags set in tep's `bits`, by pycrate's names.
fn names(bits: u64, table: &[&'static str]) -> Vec<&'static str> {
    let mut v: Vec<_> = table
        .iter()
        .enumerate()
        .filter(|&(i, _)| bits >> (i / 8 * 8 + 7 - i % 8) & 1 == 1)
        .map(|(_, n)| *n)
        .collect();
    v.sort();
    v
}

/// The flags pycrate read as set in IE `ie`.
fn set_flags<'a>(f: &[(&'a str, &str)], ie: &str) -> Vec<&'a str> {
    let mut v: Vec<_> = f
        .iter()
        .filter(|(_, v)| *v == "1")
        .filter_map(|(p, _)| p.strip_prefix(ie)?.strip_prefix('/'))
        .filter(|n| !n.contains('/') && n.chars().all(|c| c.is_ascii_uppercase()))
        .collect();
    // The same IE twice (two reports) reads as one.
    v.sort();
    v.dedup();
    v
}

/// pycrate read IE `ie` (a path) and its `fields` as tep wrote them.
fn ie_has(f: &[(&str, &str)], name: &str, ie: &str, fields: &[(&str, String)]) {
    for (k, v) in fields {
        has(f, name, &format!("{ie}/{k}"), v);
    }
}

/// DNS labels as dotted text.
fn dotted(mut labels: &[u8]) -> String {
    let mut parts = vec![];
    while let Some((&n, rest)) = labels.split_first() {
        let (label, rest) = rest.split_at(usize::from(n).min(rest.len()));
        parts.push(String::from_utf8_lossy(label).into_owned());
        labels = rest;
    }
    parts.join(".")
}

fn check_node_id(f: &[(&str, &str)], name: &str, id: &NodeId) {
    match id {
        NodeId::V4(a) => has(f, name, "NodeID/IPv4Addr", a),
        NodeId::V6(a) => has(f, name, "NodeID/IPv6Addr", a),
        NodeId::Fqdn(labels) => has(f, name, "NodeID/FQDN", dotted(labels)),
    }
}

fn check_f_teid(f: &[(&str, &str)], name: &str, ie: &str, t: &FTeid) {
    let FTeid::Assigned { teid, v4, v6 } = t else {
        panic!("{name}: tep sends assigned F-TEIDs")
    };
    ie_has(f, name, ie, &[("TEID", teid.to_string())]);
    if let Some(a) = v4 {
        ie_has(
            f,
            name,
            ie,
            &[("V4", "1".into()), ("IPv4Addr", a.to_string())],
        );
    }
    if let Some(a) = v6 {
        ie_has(
            f,
            name,
            ie,
            &[("V6", "1".into()), ("IPv6Addr", a.to_string())],
        );
    }
}

fn check_failed_rule(f: &[(&str, &str)], name: &str, r: &FailedRuleId) {
    let (ty, field, id) = match *r {
        FailedRuleId::Pdr(i) => (0, "PDRID", u32::from(i)),
        FailedRuleId::Far(i) => (1, "FARID", i),
        FailedRuleId::Qer(i) => (2, "QERID", i),
        FailedRuleId::Urr(i) => (3, "URRID", i),
        FailedRuleId::Bar(i) => (4, "BARID", u32::from(i)),
    };
    let fields = [("RuleIDType", ty.to_string()), (field, id.to_string())];
    ie_has(f, name, "FailedRuleID", &fields);
}

fn check_usage(f: &[(&str, &str)], name: &str, ie: &str, u: &UsageReport) {
    ie_has(f, name, ie, &[("URRID/Val", u.urr_id.0.to_string())]);
    ie_has(f, name, ie, &[("URSEQN/Data", u.ur_seqn.0.to_string())]);
    let trigger = format!("{ie}/UsageReportTrigger");
    assert_eq!(
        set_flags(f, &trigger),
        names(u.trigger.0.bits, &REPORT_TRIGGERS),
        "{name}: {trigger}"
    );
    // TS 29.244 Tables 7.5.5.2-1, 7.5.7.2-1, 7.5.8.3-1: Start Time and
    // End Time unless the trigger is start or stop of traffic or MAC
    // address reporting (MACAR, octet 6 bit 7).
    const MACAR: u64 = 0x4000;
    let exempt = UsageReportTrigger::START | UsageReportTrigger::STOPT | MACAR;
    if u.trigger.0.bits & exempt == 0 {
        let (Some(start), Some(end)) = (u.start_time, u.end_time) else {
            panic!("{name}: {ie} without its Start Time and End Time")
        };
        assert!(start.0 <= end.0, "{name}: {ie} ends before it starts");
        ie_has(f, name, ie, &[("StartTime/Val", start.0.to_string())]);
        ie_has(f, name, ie, &[("EndTime/Val", end.0.to_string())]);
    }
    if let Some(d) = u.duration {
        ie_has(f, name, ie, &[("DurationMeasurement/Val", d.0.to_string())]);
    }
    // Start and stop of traffic are events: no measurement.
    let Some(v) = u.volume else {
        assert!(
            u.trigger.0.bits & exempt != 0,
            "{name}: {ie} without volumes"
        );
        return;
    };
    let vols = [
        ("TotalVolume", v.total),
        ("UplinkVolume", v.uplink),
        ("DownlinkVolume", v.downlink),
        ("TotalNumPackets", v.total_packets),
        ("UplinkNumPackets", v.uplink_packets),
        ("DownlinkNumPackets", v.downlink_packets),
    ];
    for (k, x) in vols {
        let x = x.expect("tep sends every volume and count");
        ie_has(
            f,
            name,
            &format!("{ie}/VolumeMeasurement"),
            &[(k, x.to_string())],
        );
    }
}

/// The fields tep wrote in `r` are the ones pycrate read in `f`.
fn check_values(name: &str, r: &PfcpRepr, f: &[(&str, &str)]) {
    let cause = |c: &Cause| has(f, name, "Cause/Data", c.0);
    let offending = |o: &Option<OffendingIe>| {
        if let Some(o) = o {
            has(f, name, "OffendingIE/Data", o.0 .0);
        }
    };
    let failed = |x: &Option<FailedRuleId>| x.iter().for_each(|x| check_failed_rule(f, name, x));
    let created = |c: &[CreatedPdr]| {
        for p in c {
            has(f, name, "CreatedPDR/PDRID/Val", p.pdr_id.0);
            let t = p
                .local_f_teid
                .as_ref()
                .expect("a created PDR has its F-TEID");
            check_f_teid(f, name, "CreatedPDR/FTEID", t);
        }
    };
    match &r.message {
        Message::HeartbeatRequest(HeartbeatRequest {
            recovery_time_stamp: t,
        })
        | Message::HeartbeatResponse(HeartbeatResponse {
            recovery_time_stamp: t,
        }) => has(f, name, "RecoveryTimeStamp/Val", t.0),
        Message::AssociationSetupResponse(m) => {
            check_node_id(f, name, &m.node_id);
            cause(&m.cause);
            offending(&m.offending_ie);
            has(f, name, "RecoveryTimeStamp/Val", m.recovery_time_stamp.0);
            // Absent from a refusal (Message::rejection).
            let bits = m.up_function_features.map_or(0, |x| x.0.bits);
            assert_eq!(
                set_flags(f, "UPFunctionFeatures"),
                names(bits, &UP_FEATURES),
                "{name}"
            );
        }
        Message::AssociationUpdateResponse(m) => {
            check_node_id(f, name, &m.node_id);
            cause(&m.cause);
            offending(&m.offending_ie);
        }
        Message::AssociationReleaseResponse(m) => {
            check_node_id(f, name, &m.node_id);
            cause(&m.cause);
            offending(&m.offending_ie);
        }
        Message::VersionNotSupportedResponse => {}
        Message::SessionEstablishmentResponse(m) => {
            check_node_id(f, name, &m.node_id);
            cause(&m.cause);
            offending(&m.offending_ie);
            failed(&m.failed_rule_id);
            created(&m.created_pdrs);
            if let Some(s) = &m.up_f_seid {
                let mut fields = vec![("SEID", s.seid.to_string())];
                fields.extend(s.v4.map(|a| ("IPv4Addr", a.to_string())));
                fields.extend(s.v6.map(|a| ("IPv6Addr", a.to_string())));
                ie_has(f, name, "FSEID", &fields);
            }
        }
        Message::SessionModificationResponse(m) => {
            cause(&m.cause);
            offending(&m.offending_ie);
            failed(&m.failed_rule_id);
            created(&m.created_pdrs);
            for u in &m.usage_reports {
                check_usage(f, name, "UsageReportSessionModResp", &u.0);
            }
        }
        Message::SessionDeletionResponse(m) => {
            cause(&m.cause);
            offending(&m.offending_ie);
            for u in &m.usage_reports {
                check_usage(f, name, "UsageReportSessionDeletionResp", &u.0);
            }
        }
        Message::SessionReportRequest(m) => {
            let bits = u64::from(m.report_type.0);
            assert_eq!(
                set_flags(f, "ReportType"),
                names(bits, &REPORT_TYPE),
                "{name}"
            );
            if let Some(d) = &m.downlink_data_report {
                for p in &d.pdr_ids {
                    has(f, name, "DownlinkDataReport/PDRID/Val", p.0);
                }
            }
            for u in &m.usage_reports {
                check_usage(f, name, "UsageReportSessionReportReq", &u.0);
            }
            for t in m
                .error_indication_report
                .iter()
                .flat_map(|e| &e.remote_f_teids)
            {
                check_f_teid(f, name, "ErrorIndicationReport/FTEID", t);
            }
        }
        Message::NodeReportRequest(m) => {
            check_node_id(f, name, &m.node_id);
            let flags: Vec<&str> = [
                (NodeReportType::UPFR, "UPFR"),
                (NodeReportType::UPRR, "UPRR"),
            ]
            .into_iter()
            .filter(|&(b, _)| m.node_report_type.0 & b != 0)
            .map(|(_, n)| n)
            .collect();
            assert_eq!(set_flags(f, "NodeReportType"), flags, "{name}");
            let reports = [
                (
                    "UserPlanePathFailureReport",
                    m.user_plane_path_failure_report
                        .as_ref()
                        .map(|r| &r.remote_gtp_u_peers),
                ),
                (
                    "UserPlanePathRecoveryReport",
                    m.user_plane_path_recovery_report
                        .as_ref()
                        .map(|r| &r.remote_gtp_u_peers),
                ),
            ];
            for (ie, peers) in reports {
                for p in peers.into_iter().flatten() {
                    let ie = format!("{ie}/RemoteGTPUPeer");
                    if let Some(a) = p.v4 {
                        ie_has(
                            f,
                            name,
                            &ie,
                            &[("V4", "1".into()), ("IPv4Addr", a.to_string())],
                        );
                    }
                    if let Some(a) = p.v6 {
                        ie_has(
                            f,
                            name,
                            &ie,
                            &[("V6", "1".into()), ("IPv6Addr", a.to_string())],
                        );
                    }
                }
            }
        }
        m => panic!("{name}: tep does not send {m:?}"),
    }
}

/// The forms of tep's messages the session above does not produce: other
/// Node IDs and address families, every Failed Rule ID type with its
/// Offending IE, a Created PDR in a modification, a refused association,
/// both reports in one Session Report Request, path supervision's Node
/// Reports (failure, recovery) and Error Indication Report.
fn other_forms() -> Vec<(&'static str, Message)> {
    use Message as M;
    let v6: std::net::Ipv6Addr = "2001:db8::1".parse().unwrap();
    let assigned = |teid, v4, v6| FTeid::Assigned { teid, v4, v6 };
    let refused = |rule, ie| {
        M::SessionModificationResponse(SessionModificationResponse {
            cause: Cause::RULE_CREATION_MODIFICATION_FAILURE,
            failed_rule_id: Some(rule),
            offending_ie: Some(OffendingIe(ie)),
            ..Default::default()
        })
    };
    let usage = |urr, trigger| UsageReport {
        urr_id: UrrId(urr),
        ur_seqn: UrSeqn(9),
        trigger: UsageReportTrigger::new(trigger),
        start_time: Some(StartTime(3_950_000_000)),
        end_time: Some(EndTime(u32::MAX)),
        volume: Some(VolumeMeasurement {
            total: Some(u64::MAX),
            uplink: Some(u64::MAX - 1),
            downlink: Some(1),
            total_packets: Some(1 << 40),
            uplink_packets: Some(0),
            downlink_packets: Some(1 << 40),
        }),
        duration: Some(DurationMeasurement(86_400)),
    };
    let rejected = Message::rejection(
        msg_type::ASSOCIATION_SETUP_REQUEST,
        Cause::REQUEST_REJECTED,
        None,
        &NodeId::V6(v6),
        RecoveryTimeStamp(1),
    );
    vec![
        (
            "association_setup_response_fqdn",
            M::AssociationSetupResponse(AssociationSetupResponse {
                node_id: NodeId::fqdn("upf.tep.test").unwrap(),
                cause: Cause::REQUEST_ACCEPTED,
                offending_ie: None,
                recovery_time_stamp: RecoveryTimeStamp(u32::MAX),
                up_function_features: Some(UpFunctionFeatures::TEP),
            }),
        ),
        ("association_setup_rejected", rejected.unwrap()),
        (
            "session_establishment_response_dual_stack",
            M::SessionEstablishmentResponse(SessionEstablishmentResponse {
                node_id: NodeId::V6(v6),
                cause: Cause::REQUEST_ACCEPTED,
                up_f_seid: Some(FSeid {
                    seid: u64::MAX,
                    v4: Some(V4),
                    v6: Some(v6),
                }),
                created_pdrs: vec![
                    CreatedPdr {
                        pdr_id: PdrId(1),
                        local_f_teid: Some(assigned(u32::MAX, Some(V4), Some(v6))),
                    },
                    CreatedPdr {
                        pdr_id: PdrId(u16::MAX),
                        local_f_teid: Some(assigned(1, None, Some(v6))),
                    },
                ],
                ..Default::default()
            }),
        ),
        (
            "session_modification_created_pdr",
            M::SessionModificationResponse(SessionModificationResponse {
                cause: Cause::REQUEST_ACCEPTED,
                created_pdrs: vec![CreatedPdr {
                    pdr_id: PdrId(3),
                    local_f_teid: Some(assigned(0x1234, Some(V4), None)),
                }],
                ..Default::default()
            }),
        ),
        (
            "failed_far",
            refused(FailedRuleId::Far(u32::MAX), IeType::APPLY_ACTION),
        ),
        (
            "failed_qer",
            refused(FailedRuleId::Qer(4), IeType::GATE_STATUS),
        ),
        (
            "failed_urr",
            refused(FailedRuleId::Urr(5), IeType::MEASUREMENT_METHOD),
        ),
        (
            "failed_bar",
            refused(FailedRuleId::Bar(6), IeType::CREATE_BAR),
        ),
        (
            "session_report_both",
            M::SessionReportRequest(SessionReportRequest {
                report_type: ReportType(ReportType::DLDR | ReportType::USAR),
                downlink_data_report: Some(DownlinkDataReport {
                    pdr_ids: vec![PdrId(2)],
                }),
                usage_reports: vec![UsageReportSrr(usage(7, UsageReportTrigger::VOLTH))],
                error_indication_report: None,
            }),
        ),
        (
            "node_report_path_failure",
            M::NodeReportRequest(NodeReportRequest {
                node_id: NodeId::V4(V4),
                node_report_type: NodeReportType(NodeReportType::UPFR),
                user_plane_path_failure_report: Some(UserPlanePathFailureReport {
                    remote_gtp_u_peers: vec![
                        RemoteGtpuPeer::of(GNB.into()),
                        RemoteGtpuPeer::of(v6.into()),
                    ],
                }),
                user_plane_path_recovery_report: None,
            }),
        ),
        (
            "node_report_path_recovery",
            M::NodeReportRequest(NodeReportRequest {
                node_id: fqdn(),
                node_report_type: NodeReportType(NodeReportType::UPRR),
                user_plane_path_failure_report: None,
                user_plane_path_recovery_report: Some(UserPlanePathRecoveryReport {
                    remote_gtp_u_peers: vec![RemoteGtpuPeer::of(GNB2.into())],
                }),
            }),
        ),
        (
            "session_report_error_indication",
            M::SessionReportRequest(SessionReportRequest {
                report_type: ReportType(ReportType::ERIR),
                error_indication_report: Some(ErrorIndicationReport {
                    remote_f_teids: vec![assigned(0x100, Some(GNB), None)],
                }),
                ..Default::default()
            }),
        ),
        (
            // What a usage scan sends: a start-of-traffic event (no
            // measurement); a periodic report at a used-up quota (one
            // message each: the check reads a message's flags together).
            "session_report_start_of_traffic",
            M::SessionReportRequest(SessionReportRequest {
                report_type: ReportType(ReportType::USAR),
                downlink_data_report: None,
                usage_reports: vec![UsageReportSrr(UsageReport {
                    urr_id: UrrId(1),
                    ur_seqn: UrSeqn(0),
                    trigger: UsageReportTrigger::new(UsageReportTrigger::START),
                    ..Default::default()
                })],
                error_indication_report: None,
            }),
        ),
        (
            "session_report_periodic_quota",
            M::SessionReportRequest(SessionReportRequest {
                report_type: ReportType(ReportType::USAR),
                downlink_data_report: None,
                usage_reports: vec![UsageReportSrr(usage(
                    2,
                    UsageReportTrigger::PERIO | UsageReportTrigger::VOLQU,
                ))],
                error_indication_report: None,
            }),
        ),
        (
            "session_deletion_response_reports",
            M::SessionDeletionResponse(SessionDeletionResponse {
                cause: Cause::REQUEST_ACCEPTED,
                offending_ie: None,
                usage_reports: vec![
                    UsageReportSdr(usage(u32::MAX, UsageReportTrigger::TERMR)),
                    UsageReportSdr(usage(8, UsageReportTrigger::TERMR)),
                ],
            }),
        ),
    ]
}

#[test]
fn the_other_forms_of_teps_messages_decode_in_pycrate() {
    let Some(py) = python("the_other_forms_of_teps_messages_decode_in_pycrate") else {
        return;
    };
    let sent: Vec<_> = other_forms()
        .into_iter()
        .enumerate()
        .map(|(i, (name, message))| {
            let seid = msg_type::is_session(message.msg_type()).then_some(7000);
            let r = PfcpRepr {
                seid,
                sequence: 100 + i as u32,
                priority: None,
                message,
            };
            (name.to_string(), r.to_bytes())
        })
        .collect();
    decodes_as_written(&py, &sent);
}
