//! tep-pfcp against pycrate (`pycrate_mobile/TS29244_PFCP.py`), a second
//! PFCP implementation beside scapy (tests/scapy.rs), driven by
//! tests/pycrate_pfcp.py:
//! - the requests an SMF sends, encoded by pycrate, parse in tep-pfcp to
//!   the values pycrate was given, and tep's node accepts them;
//! - every message the node sends in answer (and the ones it sends on its
//!   own: Heartbeat Request, Session Report Requests, refusals) decodes in
//!   pycrate without error, re-encodes to the same bytes, holds only the
//!   IEs TS 29.244 lists for its message and grouped IEs, with the values
//!   tep wrote.
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
            measurement_method: MeasurementMethod(MeasurementMethod::VOLUM),
            // pycrate writes the Rel-16 three octets.
            reporting_triggers: ReportingTriggers(Bitmap::new(ReportingTriggers::VOLTH, 3)),
            volume_threshold: Some(VolumeThreshold {
                total: Some(1_000_000),
                ..Default::default()
            }),
            skipped: Default::default(),
        }],
        create_qers: vec![CreateQer {
            qer_id: QerId(1),
            gate_status: GateStatus::open(),
            qfi: Some(Qfi(9)),
            skipped: Default::default(),
        }],
        create_bars: vec![],
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
                flags: None,
                skipped: Default::default(),
            }),
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
            skipped: Default::default(),
        }],
        update_qers: vec![UpdateQer {
            qer_id: QerId(1),
            gate_status: Some(GateStatus::open()),
            qfi: None,
            skipped: Default::default(),
        }],
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
            skipped: Default::default(),
        }],
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
