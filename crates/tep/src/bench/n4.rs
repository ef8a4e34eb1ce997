//! `tep bench n4`: a PFCP load generator, the SMF side of a session
//! establishment rate test against a running UPF (tep's, or any other).
//!
//! Every request is built and encoded before the clock starts, so the
//! generator's cost per session is a `send` and a `recv` and a glance at
//! the response's cause: the UPF's rate is what is measured, not the
//! generator's (the scapy SMF of the tests does some hundreds a second).
//! A window of requests stays outstanding, as an SMF serving many UEs
//! keeps; one unanswered for a second is sent again, same sequence
//! number (the UPF answers a duplicate from its cache).
//!
//! It sends from port 8805 where it can, and answers the UPF's Heartbeat
//! Requests there, as an SMF does: a UPF that releases an association
//! whose SMF stops answering would otherwise end a long run.
//!
//! Per round: N establishments (each a PDU session as [`tep_pfcp::sample`]
//! builds it, a fresh UE address and gNB TEID), then N deletions; rates
//! per round and the medians. `--profile simple,rich` runs each round
//! once per profile, in turn, so that both see the same machine: `rich`
//! is a session with two QoS flows ([`rich_establishment`]), what the
//! UPF's classifier, buckets and usage triggers cost to set up.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};
use tep_pfcp::message::{Message, SessionEstablishmentRequest};
use tep_pfcp::rules::{CreateBar, CreatePdr, Pdi};
use tep_pfcp::types::*;
use tep_pfcp::{sample, Cause, PfcpRepr};

/// What each session of a round is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    /// One PDR each way, two FARs, a QER, a URR
    /// ([`sample::pdu_session_establishment`]).
    Simple,
    /// Two QoS flows: four PDRs with SDF filters, two FARs (one with a
    /// BAR), a session AMBR and a QER with an MBR of the voice flow's
    /// own, a URR with a volume threshold ([`rich_establishment`]).
    Rich,
}

/// What to run.
#[derive(Clone, Debug, clap::Args)]
pub struct Options {
    /// The UPF's PFCP address (port 8805 if none is given).
    #[arg(long)]
    pub upf: String,
    /// Sessions per round.
    #[arg(long, default_value_t = 100_000)]
    pub sessions: u32,
    /// Requests outstanding at once.
    #[arg(long, default_value_t = 64)]
    pub window: usize,
    /// Rounds (the median is reported).
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
    /// The UE addresses start here (one per session).
    #[arg(long, default_value = "10.128.0.1")]
    pub ue_base: Ipv4Addr,
    /// The gNB address put in the downlink FARs.
    #[arg(long, default_value = "203.0.113.5")]
    pub gnb: Ipv4Addr,
    /// Session profiles, each run every round (e.g. simple,rich).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "simple")]
    pub profile: Vec<Profile>,
    /// One JSON object.
    #[arg(long)]
    pub json: bool,
}

/// One round's rates for one profile.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct Round {
    /// The sessions' profile.
    pub profile: Profile,
    /// Session establishments per second.
    pub establish: f64,
    /// Session deletions per second.
    pub delete: f64,
    /// Requests sent again after a second unanswered.
    pub resent: u64,
}

const TIMEOUT: Duration = Duration::from_secs(1);
/// Gives up on a round after this long without any response.
const STALL: Duration = Duration::from_secs(10);

fn parse_upf(s: &str) -> Result<SocketAddr, String> {
    s.parse::<SocketAddr>()
        .or_else(|_| {
            s.parse::<std::net::IpAddr>()
                .map(|a| SocketAddr::new(a, tep_pfcp::PORT))
        })
        .map_err(|_| format!("--upf: \"{s}\" is not an address"))
}

/// Runs the rounds; the rates of each.
pub fn run(o: &Options) -> Result<Vec<Round>, String> {
    let upf = parse_upf(&o.upf)?;
    let any = match upf {
        SocketAddr::V4(_) => "0.0.0.0",
        SocketAddr::V6(_) => "[::]",
    };
    // PFCP's port if free (another UPF or SMF on this host may hold it).
    let socket = UdpSocket::bind(format!("{any}:{}", tep_pfcp::PORT))
        .or_else(|_| UdpSocket::bind(format!("{any}:0")))
        .map_err(|e| format!("bind: {e}"))?;
    socket
        .connect(upf)
        .map_err(|e| format!("--upf {upf}: {e}"))?;
    let smf = match socket.local_addr().map_err(|e| e.to_string())?.ip() {
        std::net::IpAddr::V4(a) => a,
        std::net::IpAddr::V6(_) => {
            return Err("--upf: the sample sessions are IPv4: give an IPv4 UPF".to_string())
        }
    };
    // Big enough for a window of responses whatever the window.
    let _ = socket.set_read_timeout(Some(Duration::from_millis(100)));
    let mut seq = 1u32;
    let recovery = tep_pfcp::node::ntp_seconds(std::time::SystemTime::now());
    let setup = sample::association_setup(seq, smf, recovery);
    let answer = exchange(&socket, &[setup.to_bytes()], o.window, recovery)?;
    match answer.first().map(|r| &r.message) {
        Some(Message::AssociationSetupResponse(r)) if r.cause == Cause::REQUEST_ACCEPTED => {}
        Some(other) => return Err(format!("association refused: {other:?}")),
        None => return Err("no Association Setup Response".to_string()),
    }
    seq += 1;
    let mut rounds = Vec::new();
    for _ in 0..o.rounds {
        for &profile in &o.profile {
            rounds.push(round(&socket, o, profile, (&mut seq, smf), recovery)?);
        }
    }
    Ok(rounds)
}

/// One round of `profile`: `o.sessions` establishments, then as many
/// deletions, the sequence numbers from `*seq` on.
fn round(
    socket: &UdpSocket,
    o: &Options,
    profile: Profile,
    (seq, smf): (&mut u32, Ipv4Addr),
    recovery: u32,
) -> Result<Round, String> {
    let requests: Vec<Vec<u8>> = (0..o.sessions)
        .map(|i| {
            let ue = Ipv4Addr::from(u32::from(o.ue_base).wrapping_add(i));
            let sequence = seq.wrapping_add(i) & 0xff_ffff;
            let session = (u64::from(i) + 1, smf, ue, o.gnb, i + 1);
            match profile {
                Profile::Simple => {
                    let (cp_seid, smf, ue, gnb, teid) = session;
                    sample::pdu_session_establishment(sequence, cp_seid, smf, ue, gnb, teid)
                }
                Profile::Rich => rich_establishment(sequence, session),
            }
            .to_bytes()
        })
        .collect();
    *seq = seq.wrapping_add(o.sessions);
    let t = Instant::now();
    let (responses, resent) = exchange_counted(socket, &requests, o.window, recovery)?;
    let establish = f64::from(o.sessions) / t.elapsed().as_secs_f64();
    let mut seids = Vec::with_capacity(responses.len());
    for r in &responses {
        match &r.message {
            Message::SessionEstablishmentResponse(m) if m.cause == Cause::REQUEST_ACCEPTED => {
                seids.push(m.up_f_seid.map(|f| f.seid).unwrap_or_default());
            }
            other => return Err(format!("{profile:?} establishment refused: {other:?}")),
        }
    }
    let deletions: Vec<Vec<u8>> = seids
        .iter()
        .enumerate()
        .map(|(i, &s)| {
            sample::session_deletion(seq.wrapping_add(i as u32) & 0xff_ffff, s).to_bytes()
        })
        .collect();
    *seq = seq.wrapping_add(o.sessions);
    let t = Instant::now();
    let (responses, resent_d) = exchange_counted(socket, &deletions, o.window, recovery)?;
    let delete = f64::from(o.sessions) / t.elapsed().as_secs_f64();
    for r in &responses {
        match &r.message {
            Message::SessionDeletionResponse(m) if m.cause == Cause::REQUEST_ACCEPTED => {}
            other => return Err(format!("deletion refused: {other:?}")),
        }
    }
    Ok(Round {
        profile,
        establish,
        delete,
        resent: resent + resent_d,
    })
}

/// Session Establishment Request for a PDU session with two QoS flows,
/// as an SMF sets up a voice call beside the default flow: PDRs 1 (up,
/// QFI 9) and 2 (down), precedence 255, SDF `permit out ip from any to
/// assigned`, and PDRs 3 (up, QFI 1) and 4 (down), precedence 10, SDF UDP
/// to the UE's ports 5000-5010; FAR 1 to the core, FAR 2 to gNB `gnb`
/// with TEID `gnb_teid` and BAR 1 (delay 20 ms, 16 packets); QER 1 the
/// session AMBR (100/200 Mbit/s) on all four, QER 2 (QFI 9) on the
/// default flow, QER 3 (QFI 1, 128 kbit/s each way) on the voice flow;
/// URR 1 on all, volume with a 1 GB threshold. `session`: the SMF's SEID,
/// its address, the UE's, the gNB's and its TEID.
pub fn rich_establishment(
    sequence: u32,
    (cp_seid, smf, ue, gnb, gnb_teid): (u64, Ipv4Addr, Ipv4Addr, Ipv4Addr, u32),
) -> PfcpRepr {
    let sdf = |flow: &str| SdfFilter {
        flow_description: Some(flow.as_bytes().to_vec()),
        ..Default::default()
    };
    let (default, voice) = (
        "permit out ip from any to assigned",
        "permit out 17 from any to assigned 5000-5010",
    );
    let pdr = |id: u16, prec: u32, uplink: bool, flow: &str, qer: u32| {
        let base = if uplink {
            sample::uplink_pdr(Some(ue))
        } else {
            sample::downlink_pdr(ue, Some(NetworkInstance(b"\x08internet".to_vec())))
        };
        CreatePdr {
            pdr_id: PdrId(id),
            precedence: Precedence(prec),
            pdi: Pdi {
                sdf_filters: vec![sdf(flow)],
                qfi: uplink.then_some(Qfi(if qer == 3 { 1 } else { 9 })),
                ..base.pdi
            },
            qer_ids: vec![QerId(1), QerId(qer)],
            ..base
        }
    };
    let qer = sample::qer;
    let mut to_gnb = sample::far_to_gnb(gnb_teid, gnb);
    to_gnb.bar_id = Some(BarId(1));
    let m = SessionEstablishmentRequest {
        node_id: NodeId::V4(smf),
        cp_f_seid: sample::smf_f_seid(cp_seid, smf),
        create_pdrs: vec![
            pdr(1, 255, true, default, 2),
            pdr(2, 255, false, default, 2),
            pdr(3, 10, true, voice, 3),
            pdr(4, 10, false, voice, 3),
        ],
        create_fars: vec![sample::far_to_core(None), to_gnb],
        create_urrs: vec![sample::volume_urr(
            ReportingTriggers(Bitmap::new(ReportingTriggers::VOLTH, 3)),
            Some(VolumeThreshold {
                total: Some(1 << 30),
                uplink: None,
                downlink: None,
            }),
        )],
        create_qers: vec![
            qer(1, None, Some((100_000, 200_000))),
            qer(2, Some(9), None),
            qer(3, Some(1), Some((128, 128))),
        ],
        create_bars: vec![CreateBar {
            bar_id: BarId(1),
            downlink_data_notification_delay: Some(DownlinkDataNotificationDelay(1)),
            suggested_buffering_packets_count: Some(SuggestedBufferingPacketsCount(16)),
            skipped: Default::default(),
        }],
        skipped: Default::default(),
    };
    sample::establishment(sequence, m)
}

fn exchange(
    socket: &UdpSocket,
    requests: &[Vec<u8>],
    window: usize,
    recovery: u32,
) -> Result<Vec<PfcpRepr>, String> {
    exchange_counted(socket, requests, window, recovery).map(|(r, _)| r)
}

/// Sends `requests` keeping `window` outstanding; their responses in
/// request order, and how many were sent again. The UPF's Heartbeat
/// Requests meanwhile are answered with `recovery`.
fn exchange_counted(
    socket: &UdpSocket,
    requests: &[Vec<u8>],
    window: usize,
    recovery: u32,
) -> Result<(Vec<PfcpRepr>, u64), String> {
    let seq_of = |b: &[u8]| -> u32 {
        // The sequence number sits after the SEID when S is set.
        let at = if b[0] & 1 != 0 { 12 } else { 4 };
        u32::from_be_bytes([0, b[at], b[at + 1], b[at + 2]])
    };
    let index: HashMap<u32, usize> = requests
        .iter()
        .enumerate()
        .map(|(i, r)| (seq_of(r), i))
        .collect();
    let mut responses: Vec<Option<PfcpRepr>> = (0..requests.len()).map(|_| None).collect();
    let mut sent_at: HashMap<usize, Instant> = HashMap::new();
    let mut next = 0;
    let mut done = 0;
    let mut resent = 0u64;
    let mut last_progress = Instant::now();
    let mut buf = vec![0u8; 65_535];
    while done < requests.len() {
        while sent_at.len() < window.max(1) && next < requests.len() {
            socket
                .send(&requests[next])
                .map_err(|e| format!("send: {e}"))?;
            sent_at.insert(next, Instant::now());
            next += 1;
        }
        match socket.recv(&mut buf) {
            Ok(n) => {
                let Ok(r) = PfcpRepr::parse_bytes(&buf[..n]) else {
                    continue;
                };
                if let Message::HeartbeatRequest(_) = r.message {
                    let answer = PfcpRepr {
                        seid: None,
                        sequence: r.sequence,
                        priority: None,
                        message: Message::HeartbeatResponse(tep_pfcp::message::HeartbeatResponse {
                            recovery_time_stamp: tep_pfcp::types::RecoveryTimeStamp(recovery),
                        }),
                    };
                    let _ = socket.send(&answer.to_bytes());
                    continue;
                }
                if let Some(&i) = index.get(&r.sequence) {
                    if sent_at.remove(&i).is_some() {
                        responses[i] = Some(r);
                        done += 1;
                        last_progress = Instant::now();
                    }
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => return Err(format!("recv: {e}")),
        }
        if last_progress.elapsed() > STALL {
            return Err(format!(
                "no response for {} s ({done} of {} answered)",
                STALL.as_secs(),
                requests.len()
            ));
        }
        let now = Instant::now();
        for (&i, at) in sent_at.iter_mut() {
            if now.duration_since(*at) > TIMEOUT {
                let _ = socket.send(&requests[i]);
                *at = now;
                resent += 1;
            }
        }
    }
    Ok((responses.into_iter().flatten().collect(), resent))
}

/// Median of `xs`.
fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs.get(xs.len() / 2).copied().unwrap_or(0.0)
}

/// The rounds and their medians (per profile), as a table or one JSON
/// object (its `median_*` keys the first profile's).
pub fn render(o: &Options, rounds: &[Round]) -> String {
    let medians: Vec<(Profile, f64, f64)> = o
        .profile
        .iter()
        .map(|&p| {
            let of = |f: fn(&Round) -> f64| {
                median(rounds.iter().filter(|r| r.profile == p).map(f).collect())
            };
            (p, of(|r| r.establish), of(|r| r.delete))
        })
        .collect();
    let name = |p: Profile| format!("{p:?}").to_lowercase();
    if o.json {
        let (_, est, del) = medians
            .first()
            .copied()
            .unwrap_or((Profile::Simple, 0.0, 0.0));
        let per: serde_json::Map<String, serde_json::Value> = medians
            .iter()
            .map(|&(p, e, d)| {
                let v = serde_json::json!({"establishments_per_s": e, "deletions_per_s": d});
                (name(p), v)
            })
            .collect();
        return serde_json::json!({
            "upf": o.upf,
            "sessions": o.sessions,
            "window": o.window,
            "rounds": rounds,
            "median_establishments_per_s": est,
            "median_deletions_per_s": del,
            "medians": per,
        })
        .to_string()
            + "\n";
    }
    let mut out = format!(
        "PFCP against {}: {} sessions per round, {} outstanding\n{:>6} {:>8} {:>16} {:>16} {:>8}\n",
        o.upf, o.sessions, o.window, "round", "profile", "establish/s", "delete/s", "resent"
    );
    for (i, r) in rounds.iter().enumerate() {
        out += &format!(
            "{:>6} {:>8} {:>16.0} {:>16.0} {:>8}\n",
            i / o.profile.len().max(1),
            name(r.profile),
            r.establish,
            r.delete,
            r.resent
        );
    }
    for (p, est, del) in medians {
        out += &format!("median {:>8} {est:>16.0} {del:>16.0}\n", name(p));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::upf::tests::{associated, SMF};

    /// tep's node over the daemon's user plane accepts the rich session
    /// (every IE in it is one tep enforces: a refusal would fail a run of
    /// the benchmark), and its dataplane session classifies both ways.
    #[test]
    fn the_rich_session_is_accepted_with_rules_each_way() {
        let (mut node, mut up, links, smf, now) = associated(16, 1);
        let ue = Ipv4Addr::new(10, 128, 0, 1);
        let gnb = Ipv4Addr::new(203, 0, 113, 5);
        let r = rich_establishment(1, (7, SMF, ue, gnb, 0x99));
        node.handle(now, smf, &r.to_bytes(), &mut up);
        let answer = node.poll_transmit().expect("a response");
        let parsed = PfcpRepr::parse_bytes(&answer.payload).unwrap();
        match parsed.message {
            Message::SessionEstablishmentResponse(m) => {
                assert_eq!(m.cause, Cause::REQUEST_ACCEPTED, "{m:?}")
            }
            other => panic!("{other:?}"),
        }
        up.publish();
        let mut table = tep_dataplane::session::SessionTable::new(links[0].clone());
        table.apply_pending(&mut Vec::new());
        let slot = table.downlink(false, u128::from(u32::from(ue))).unwrap();
        let s = table.get(slot);
        assert!(s.uplink_rules && s.downlink_rules && s.mbr_uplink && s.mbr_downlink);
    }
}
