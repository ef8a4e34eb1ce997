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
//! per round and the medians.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};
use tep_pfcp::message::Message;
use tep_pfcp::{sample, Cause, PfcpRepr};

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
    /// One JSON object.
    #[arg(long)]
    pub json: bool,
}

/// One round's rates.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct Round {
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
        let requests: Vec<Vec<u8>> = (0..o.sessions)
            .map(|i| {
                let ue = Ipv4Addr::from(u32::from(o.ue_base).wrapping_add(i));
                sample::pdu_session_establishment(
                    seq.wrapping_add(i) & 0xff_ffff,
                    u64::from(i) + 1,
                    smf,
                    ue,
                    o.gnb,
                    i + 1,
                )
                .to_bytes()
            })
            .collect();
        seq = seq.wrapping_add(o.sessions);
        let t = Instant::now();
        let (responses, resent) = exchange_counted(&socket, &requests, o.window, recovery)?;
        let establish = f64::from(o.sessions) / t.elapsed().as_secs_f64();
        let mut seids = Vec::with_capacity(responses.len());
        for r in &responses {
            match &r.message {
                Message::SessionEstablishmentResponse(m) if m.cause == Cause::REQUEST_ACCEPTED => {
                    seids.push(m.up_f_seid.map(|f| f.seid).unwrap_or_default());
                }
                other => return Err(format!("establishment refused: {other:?}")),
            }
        }
        let deletions: Vec<Vec<u8>> = seids
            .iter()
            .enumerate()
            .map(|(i, &s)| {
                sample::session_deletion(seq.wrapping_add(i as u32) & 0xff_ffff, s).to_bytes()
            })
            .collect();
        seq = seq.wrapping_add(o.sessions);
        let t = Instant::now();
        let (responses, resent_d) = exchange_counted(&socket, &deletions, o.window, recovery)?;
        let delete = f64::from(o.sessions) / t.elapsed().as_secs_f64();
        for r in &responses {
            match &r.message {
                Message::SessionDeletionResponse(m) if m.cause == Cause::REQUEST_ACCEPTED => {}
                other => return Err(format!("deletion refused: {other:?}")),
            }
        }
        rounds.push(Round {
            establish,
            delete,
            resent: resent + resent_d,
        });
    }
    Ok(rounds)
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

/// The rounds and their medians, as a table or one JSON object.
pub fn render(o: &Options, rounds: &[Round]) -> String {
    let est = median(rounds.iter().map(|r| r.establish).collect());
    let del = median(rounds.iter().map(|r| r.delete).collect());
    if o.json {
        return serde_json::json!({
            "upf": o.upf,
            "sessions": o.sessions,
            "window": o.window,
            "rounds": rounds,
            "median_establishments_per_s": est,
            "median_deletions_per_s": del,
        })
        .to_string()
            + "\n";
    }
    let mut out = format!(
        "PFCP against {}: {} sessions per round, {} outstanding\n{:>6} {:>16} {:>16} {:>8}\n",
        o.upf, o.sessions, o.window, "round", "establish/s", "delete/s", "resent"
    );
    for (i, r) in rounds.iter().enumerate() {
        out += &format!(
            "{i:>6} {:>16.0} {:>16.0} {:>8}\n",
            r.establish, r.delete, r.resent
        );
    }
    out += &format!("median {est:>16.0} {del:>16.0}\n");
    out
}
