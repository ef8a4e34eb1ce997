//! The fuzz body of tep-pfcp's decoder and node (target `pfcp`).
//!
//! On any input: the header view's getters; the IE walk over the body
//! (it must advance); `PfcpRepr::parse`, and when it succeeds, emitting
//! the repr and parsing that gives the repr back and the same bytes again.
//! Then a UP function node with an association and one session takes the
//! input as a datagram (then a downlink data notice, a volume threshold
//! notice and a timeout): it must not panic, and everything it sends must
//! parse as PFCP. The header's two spare bits pick the source among
//! [`SOURCES`]: the SMF, another host of `peers` (which must leave the
//! SMF's session as it was: neither the user plane nor the rules change),
//! and two hosts outside `peers` (which must get no answer and change
//! nothing but the `stranger` counter). A session message naming SEID
//! 0x1_0000_0001 (the scapy vectors' UP SEID) is given the session's
//! permuted SEID, so that the seeds reach the session code. Seeds:
//! fuzz/seeds/pfcp, from tep-pfcp's scapy vectors
//! (`crates/tep-pfcp/tests/scapy_pfcp.py seeds`).

use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use tep_pfcp::ie::{IeType, Ies};
use tep_pfcp::message::*;
use tep_pfcp::node::{Change, Config, Counter, Node, Peer, Refused, Usage, UserPlane};
use tep_pfcp::types::*;
use tep_pfcp::{Packet, PfcpRepr};

use crate::look;

/// A user plane that only counts the changes it is asked for: all, and
/// those to session `watch`.
#[derive(Default)]
struct NullUp {
    watch: u64,
    all: usize,
    watched: usize,
}

impl UserPlane for NullUp {
    fn apply(&mut self, c: Change<'_>) -> Result<(), Refused> {
        look(&c);
        self.all += 1;
        let seid = match c {
            Change::Install { seid, .. }
            | Change::Remove { seid }
            | Change::DropBuffered { seid }
            | Change::EndMarker { seid, .. } => seid,
        };
        self.watched += usize::from(seid == self.watch);
        Ok(())
    }
    fn take_usage(&mut self, _: u64, _: u32) -> Usage {
        Usage {
            uplink_bytes: 1,
            ..Default::default()
        }
    }
}

const SMF: &str = "192.0.2.10:8805";
/// The SMF, another peer, two hosts outside `peers`.
const SOURCES: [&str; 4] = [
    SMF,
    "192.0.2.11:8805",
    "198.51.100.99:8805",
    "[2001:db8::99]:8805",
];
/// The scapy vectors' UP SEID (the dense SEID of slot 1).
const SCAPY_SEID: u64 = 0x1_0000_0001;

/// A node with an association from [`SMF`] and one session, so that
/// session messages reach the session code; `peers` the first two
/// [`SOURCES`].
fn node(now: Instant) -> Node {
    let n3 = Ipv4Addr::new(198, 51, 100, 1);
    let mut config = Config::new(NodeId::V4(n3), 1, Some(n3), None);
    // The session's URR has VOLTH; the threshold path is exercised below.
    config.usage_scans = true;
    config.peers = Some(
        SOURCES[..2]
            .iter()
            .map(|s| Peer {
                addr: s.parse::<SocketAddr>().unwrap().ip(),
                prefix_len: 32,
                node_id: None,
            })
            .collect(),
    );
    let mut node = Node::new(config);
    let smf: SocketAddr = SMF.parse().unwrap();
    let setup = PfcpRepr {
        seid: None,
        sequence: 0xfffff0,
        priority: None,
        message: Message::AssociationSetupRequest(AssociationSetupRequest {
            node_id: NodeId::V4(Ipv4Addr::new(192, 0, 2, 10)),
            recovery_time_stamp: RecoveryTimeStamp(3_900_000_000),
            up_function_features: None,
        }),
    };
    node.handle(now, smf, &setup.to_bytes(), &mut NullUp::default());
    let est = PfcpRepr {
        seid: Some(0),
        sequence: 0xfffff1,
        priority: None,
        message: Message::SessionEstablishmentRequest(session()),
    };
    node.handle(now, smf, &est.to_bytes(), &mut NullUp::default());
    assert_eq!(node.session_count(), 1, "{:?}", {
        node.poll_transmit();
        node.poll_transmit()
            .map(|t| PfcpRepr::parse_bytes(&t.payload))
    });
    while node.poll_transmit().is_some() {}
    node
}

fn session() -> SessionEstablishmentRequest {
    use tep_pfcp::rules::*;
    SessionEstablishmentRequest {
        node_id: NodeId::V4(Ipv4Addr::new(192, 0, 2, 10)),
        cp_f_seid: FSeid {
            seid: 7000,
            v4: Some(Ipv4Addr::new(192, 0, 2, 10)),
            v6: None,
        },
        create_pdrs: vec![CreatePdr {
            precedence: Precedence(1),
            qer_ids: vec![],
            ..tep_pfcp::sample::downlink_pdr(Ipv4Addr::new(10, 0, 0, 1), None)
        }],
        create_fars: vec![CreateFar {
            far_id: FarId(2),
            apply_action: ApplyAction::new(ApplyAction::BUFF | ApplyAction::NOCP),
            forwarding_parameters: None,
            // Reports deferred by BAR 1's delay: the fuzzer's clock
            // reaches them.
            bar_id: Some(BarId(1)),
            skipped: Default::default(),
        }],
        create_urrs: vec![CreateUrr {
            urr_id: UrrId(1),
            measurement_method: MeasurementMethod(MeasurementMethod::VOLUM),
            reporting_triggers: ReportingTriggers(Bitmap::new(ReportingTriggers::VOLTH, 2)),
            volume_threshold: Some(VolumeThreshold {
                total: Some(1),
                ..Default::default()
            }),
            ..Default::default()
        }],
        create_qers: vec![],
        create_bars: vec![CreateBar {
            bar_id: BarId(1),
            downlink_data_notification_delay: Some(DownlinkDataNotificationDelay(1)),
            suggested_buffering_packets_count: Some(SuggestedBufferingPacketsCount(2)),
            skipped: Default::default(),
        }],
        skipped: Default::default(),
    }
}

pub fn pfcp(data: &[u8]) {
    if let Ok(p) = Packet::new_checked(data) {
        look(&(p.version(), p.s_flag(), p.mp_flag(), p.fo_flag()));
        look(&(p.msg_type(), p.length(), p.seid(), p.sequence()));
        look(&(p.priority(), p.header_len(), p.total_len(), p.rest()));
        let body = p.payload();
        let mut n = 0;
        for ie in Ies::new(body, IeType(0)) {
            n += 1;
            assert!(n <= body.len() / 4 + 1, "IE walk does not advance");
            look(&ie);
        }
        if let Ok(r) = PfcpRepr::parse(&p) {
            let b = r.to_bytes();
            let again = PfcpRepr::parse_bytes(&b).expect("emitted message parses");
            // What a rule group skipped (`Skipped`) is noted, not emitted:
            // past that the message comes back as it was.
            assert_eq!(again, PfcpRepr::parse_bytes(&again.to_bytes()).unwrap());
            assert_eq!(again.to_bytes(), b);
        }
    }
    // The node, only past the header's length (tiny inputs take the
    // decoder's path above; a node per input keeps runs reproducible).
    if data.len() < 8 {
        return;
    }
    let now = Instant::now();
    let mut node = node(now);
    let seid = node.seids().next().expect("the session");
    let rules = node.session(seid).cloned();
    let source = usize::from(data[0] >> 3 & 3);
    let from: SocketAddr = SOURCES[source].parse().unwrap();
    let mut datagram = data.to_vec();
    if data[0] & 1 != 0 && data.get(4..12) == Some(&SCAPY_SEID.to_be_bytes()[..]) {
        datagram[4..12].copy_from_slice(&seid.to_be_bytes());
    }
    let counters = *node.counters();
    let mut up = NullUp {
        watch: seid,
        ..Default::default()
    };
    node.handle(now, from, &datagram, &mut up);
    match source {
        0 => {}
        1 => {
            assert_eq!(up.watched, 0, "another peer changed the SMF's session");
            assert_eq!(
                node.session(seid).cloned(),
                rules,
                "another peer changed the session"
            );
        }
        _ => {
            assert_eq!(node.poll_transmit(), None, "a stranger was answered");
            let mut want = counters;
            want[Counter::Stranger as usize] += 1;
            assert_eq!(*node.counters(), want, "a stranger changed something");
            assert_eq!(up.all, 0);
        }
    }
    let heard = node.associations().all(|(_, a)| {
        SOURCES[..2]
            .iter()
            .any(|s| s.parse::<SocketAddr>().unwrap().ip() == a)
    });
    assert!(heard, "an association from outside peers");
    node.downlink_data(now, seid, 2);
    node.scan_usage(now, &mut up);
    node.handle_timeout(now + Duration::from_secs(4), &mut up);
    while let Some(t) = node.poll_transmit() {
        let r = PfcpRepr::parse_bytes(&t.payload).expect("the node sends valid PFCP");
        look(&r);
    }
    look(&node.counters());
}
