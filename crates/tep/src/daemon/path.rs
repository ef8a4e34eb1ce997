//! Path supervision of a UPF (TS 29.281 §7.2.1, TS 29.244 §5.12): GTP-U
//! Echo Requests to every peer the sessions send downlink packets to (the
//! gNBs of their FARs' outer header creation), a peer that leaves
//! N3-REQUESTS of them unanswered T3-RESPONSE each failed and later
//! recovered (Node Reports to the SMFs), and the Error Indications the
//! peers send matched to the session whose F-TEID they name (Session
//! Reports).
//!
//! Echo Requests are control-plane work, a few per peer per interval: the
//! N4 thread sends them from a UDP socket of its own on each N3 address,
//! bound to a port the kernel picks. TS 29.281 §4.4.2.1 lets an Echo
//! Request come from any port and has the response sent back to it, so
//! the responses reach that socket in both modes without the workers: in
//! host mode the workers' sockets hold port 2152 only, in gateway mode the
//! XDP program steers only the tunnels' port to AF_XDP and passes the rest
//! to the kernel. A peer that answers to 2152 anyway is heard through the
//! workers ([`tep_dataplane::PeerSignal::EchoResponse`]), as are the Error
//! Indications, which do come to 2152.
//!
//! [`Paths`] is the state machine, driven with the clock passed in;
//! [`EchoSockets`] its I/O.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};
use tep_pfcp::node::{Rules, Seid};
use tep_wire::gtpu::{self, Extensions, GtpuMessage, GtpuRepr};

/// Error Indication Reports per session at most this often: a stranger
/// who guessed a session's gNB and TEID must not turn each forged Error
/// Indication into a message to the SMF.
const ERROR_REPORT_GAP: Duration = Duration::from_secs(1);

/// What path supervision counts (Prometheus `tep_pfcp_events_total`, with
/// the node's counters; `tep show pfcp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathCounter {
    /// Echo Requests sent (retries included).
    EchoSent,
    /// Echo Responses that answered an outstanding request.
    EchoAnswered,
    /// Echo Requests left unanswered T3-RESPONSE.
    EchoTimeouts,
    /// Echo Responses from no peer, or with a sequence number not sent.
    EchoUnexpected,
    /// Peers that left N3-REQUESTS Echo Requests unanswered.
    PathFailures,
    /// Failed peers that answered again.
    PathRecoveries,
    /// Error Indications matched to a session, for an Error Indication
    /// Report.
    ErrorIndications,
    /// Error Indications that name no session's peer and TEID, come from
    /// another address than the peer they name, or repeat a report of the
    /// same session within a second.
    ErrorIndicationsIgnored,
    /// Signalling the workers dropped because their queue was full.
    SignalsDropped,
}

impl PathCounter {
    pub const ALL: [PathCounter; 9] = [
        PathCounter::EchoSent,
        PathCounter::EchoAnswered,
        PathCounter::EchoTimeouts,
        PathCounter::EchoUnexpected,
        PathCounter::PathFailures,
        PathCounter::PathRecoveries,
        PathCounter::ErrorIndications,
        PathCounter::ErrorIndicationsIgnored,
        PathCounter::SignalsDropped,
    ];

    /// The name it is exported under.
    pub fn name(self) -> &'static str {
        match self {
            PathCounter::EchoSent => "echo_requests_sent",
            PathCounter::EchoAnswered => "echo_requests_answered",
            PathCounter::EchoTimeouts => "echo_request_timeouts",
            PathCounter::EchoUnexpected => "echo_responses_unexpected",
            PathCounter::PathFailures => "path_failures",
            PathCounter::PathRecoveries => "path_recoveries",
            PathCounter::ErrorIndications => "error_indications_received",
            PathCounter::ErrorIndicationsIgnored => "error_indications_ignored",
            PathCounter::SignalsDropped => "gtpu_signals_dropped",
        }
    }
}

/// The timers of `[pfcp]`: `echo_interval_ms` (zero: no Echo Requests),
/// `t3_response_ms`, `n3_requests`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timers {
    pub interval: Duration,
    pub t3: Duration,
    pub n3: u8,
}

/// What a peer's path did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathEvent {
    Failed(IpAddr),
    Recovered(IpAddr),
}

/// An Echo Request to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Echo {
    /// The N3 address it leaves from.
    pub local: IpAddr,
    pub peer: IpAddr,
    pub sequence: u16,
}

/// One peer's path.
#[derive(Clone, Copy, Debug)]
struct Peer {
    /// The N3 address its sessions use.
    local: IpAddr,
    /// The sessions' F-TEIDs at it (a session's FARs may name two).
    sessions: usize,
    failed: bool,
    /// When the next round of Echo Requests starts.
    next_round: Instant,
    /// The round's request: its sequence number, when it times out, and
    /// how many of the round were sent.
    outstanding: Option<(u16, Instant, u8)>,
    /// The last round answered: the answers to its retransmissions are
    /// late, not unexpected.
    answered: Option<u16>,
}

/// A session's remote F-TEIDs (peer, TEID), from its FARs.
type Remotes = Vec<(IpAddr, u32)>;

/// The paths to the sessions' peers; see the module docs.
#[derive(Debug)]
pub struct Paths {
    timers: Timers,
    n3: Vec<IpAddr>,
    peers: HashMap<IpAddr, Peer>,
    sessions: HashMap<Seid, Remotes>,
    by_remote: HashMap<(IpAddr, u32), Seid>,
    last_error_report: HashMap<Seid, Instant>,
    next_sequence: u16,
    events: Vec<PathEvent>,
    counters: [u64; PathCounter::ALL.len()],
}

impl Paths {
    /// Paths under `timers`, sent from the N3 addresses `n3` (the first of
    /// a peer's family where its sessions' F-TEIDs name none).
    pub fn new(timers: Timers, n3: Vec<IpAddr>) -> Paths {
        Paths {
            timers,
            n3,
            peers: HashMap::new(),
            sessions: HashMap::new(),
            by_remote: HashMap::new(),
            last_error_report: HashMap::new(),
            next_sequence: 1,
            events: Vec::new(),
            counters: [0; PathCounter::ALL.len()],
        }
    }

    pub fn counter(&self, c: PathCounter) -> u64 {
        self.counters[c as usize]
    }

    pub fn count(&mut self, c: PathCounter, n: u64) {
        self.counters[c as usize] += n;
    }

    /// The peers supervised: address, N3 address, failed, sessions.
    pub fn peers(&self) -> impl Iterator<Item = (IpAddr, IpAddr, bool, usize)> + '_ {
        self.peers
            .iter()
            .map(|(&a, p)| (a, p.local, p.failed, p.sessions))
    }

    /// Session `seid` now has `rules` (installed or modified): its peers
    /// are supervised from now on (a new one gets its first Echo Request
    /// at once), the ones it no longer names only while other sessions do.
    pub fn install(&mut self, now: Instant, seid: Seid, rules: &Rules) {
        let mut remotes: Remotes = rules
            .fars
            .iter()
            .filter_map(|f| f.outer)
            .map(|o| (o.addr(), o.teid))
            .filter(|(a, _)| !a.is_unspecified())
            .collect();
        remotes.sort_unstable();
        remotes.dedup();
        let local = |peer: IpAddr| {
            let own = rules
                .pdrs
                .iter()
                .filter_map(|p| p.local)
                .find_map(|f| match peer {
                    IpAddr::V4(_) => f.v4.map(IpAddr::V4),
                    IpAddr::V6(_) => f.v6.map(IpAddr::V6),
                });
            own.or_else(|| {
                self.n3
                    .iter()
                    .copied()
                    .find(|a| a.is_ipv4() == peer.is_ipv4())
            })
        };
        // A peer of a family no N3 address has gets no packet from tep,
        // nor supervision.
        let added: Vec<(IpAddr, IpAddr)> = remotes
            .iter()
            .filter_map(|&(peer, _)| Some((peer, local(peer)?)))
            .collect();
        remotes.retain(|&(peer, _)| added.iter().any(|&(a, _)| a == peer));
        // The new peers counted before the old ones are let go: a session
        // modified on the same gNB keeps that gNB's state.
        for &(peer, local) in &added {
            let p = self.peers.entry(peer).or_insert(Peer {
                local,
                sessions: 0,
                failed: false,
                next_round: now,
                outstanding: None,
                answered: None,
            });
            p.sessions += 1;
        }
        for &r in &remotes {
            self.by_remote.insert(r, seid);
        }
        if let Some(old) = self.sessions.insert(seid, remotes) {
            self.release(seid, &old);
        }
    }

    /// Session `seid` is gone.
    pub fn remove(&mut self, seid: Seid) {
        if let Some(old) = self.sessions.remove(&seid) {
            self.release(seid, &old);
        }
        self.last_error_report.remove(&seid);
    }

    /// Lets go of what `old` (session `seid`'s remotes before) counted.
    fn release(&mut self, seid: Seid, old: &Remotes) {
        for &(peer, teid) in old {
            if self.by_remote.get(&(peer, teid)) == Some(&seid)
                && !self
                    .sessions
                    .get(&seid)
                    .is_some_and(|r| r.contains(&(peer, teid)))
            {
                self.by_remote.remove(&(peer, teid));
            }
            if let Some(p) = self.peers.get_mut(&peer) {
                p.sessions = p.sessions.saturating_sub(1);
                if p.sessions == 0 {
                    self.peers.remove(&peer);
                }
            }
        }
    }

    /// When [`Paths::poll`] is next due; None while Echo Requests are off
    /// or there is no peer.
    pub fn next_timeout(&self) -> Option<Instant> {
        if self.timers.interval.is_zero() {
            return None;
        }
        self.peers
            .values()
            .map(|p| p.outstanding.map_or(p.next_round, |(_, t, _)| t))
            .min()
    }

    /// What is due at `now`: the Echo Requests to send go to `out`, a
    /// peer whose last try of a round timed out fails ([`Paths::events`]).
    pub fn poll(&mut self, now: Instant, out: &mut Vec<Echo>) {
        if self.timers.interval.is_zero() {
            return;
        }
        let Timers { interval, t3, n3 } = self.timers;
        for (&addr, p) in &mut self.peers {
            let send = match p.outstanding {
                Some((seq, deadline, tries)) if deadline <= now => {
                    self.counters[PathCounter::EchoTimeouts as usize] += 1;
                    if tries < n3 {
                        // Retransmitted with its sequence number
                        // (TS 29.281 §4.3.1 and §7.2.1's T3/N3).
                        Some((seq, tries + 1))
                    } else {
                        p.outstanding = None;
                        if !p.failed {
                            p.failed = true;
                            self.counters[PathCounter::PathFailures as usize] += 1;
                            self.events.push(PathEvent::Failed(addr));
                        }
                        None
                    }
                }
                Some(_) => None,
                None if p.next_round <= now => {
                    let seq = self.next_sequence;
                    self.next_sequence = seq.wrapping_add(1).max(1);
                    p.next_round = now + interval;
                    Some((seq, 1))
                }
                None => None,
            };
            if let Some((sequence, tries)) = send {
                p.outstanding = Some((sequence, now + t3, tries));
                self.counters[PathCounter::EchoSent as usize] += 1;
                out.push(Echo {
                    local: p.local,
                    peer: addr,
                    sequence,
                });
            }
        }
    }

    /// An Echo Response from `from` with `sequence`: the round is over, a
    /// failed path has recovered.
    pub fn answered(&mut self, from: IpAddr, sequence: u16) {
        if self
            .peers
            .get(&from)
            .is_some_and(|p| p.answered == Some(sequence))
        {
            return;
        }
        let Some(p) = self
            .peers
            .get_mut(&from)
            .filter(|p| p.outstanding.is_some_and(|(s, _, _)| s == sequence))
        else {
            self.count(PathCounter::EchoUnexpected, 1);
            return;
        };
        p.outstanding = None;
        p.answered = Some(sequence);
        self.counters[PathCounter::EchoAnswered as usize] += 1;
        if p.failed {
            p.failed = false;
            self.counters[PathCounter::PathRecoveries as usize] += 1;
            self.events.push(PathEvent::Recovered(from));
        }
    }

    /// The paths that failed or recovered since the last call.
    pub fn events(&mut self) -> std::vec::Drain<'_, PathEvent> {
        self.events.drain(..)
    }

    /// An Error Indication from `from`: the peer at `peer` has no context
    /// for `teid`. The session whose FAR sends it there, if any and if it
    /// was not reported within [`ERROR_REPORT_GAP`]; anything else is
    /// counted and ignored (only the peer itself can know it lost a TEID).
    pub fn error_indication(
        &mut self,
        now: Instant,
        from: IpAddr,
        peer: IpAddr,
        teid: u32,
    ) -> Option<Seid> {
        let seid = self
            .by_remote
            .get(&(peer, teid))
            .copied()
            .filter(|_| from == peer)
            .filter(|s| {
                self.last_error_report
                    .get(s)
                    .is_none_or(|&t| now.saturating_duration_since(t) >= ERROR_REPORT_GAP)
            });
        let Some(seid) = seid else {
            self.count(PathCounter::ErrorIndicationsIgnored, 1);
            return None;
        };
        self.last_error_report.insert(seid, now);
        self.count(PathCounter::ErrorIndications, 1);
        Some(seid)
    }
}

/// The N4 thread's GTP-U sockets: one per N3 address, on a port of the
/// kernel's choosing (see the module docs).
#[derive(Debug)]
pub struct EchoSockets {
    sockets: Vec<(IpAddr, UdpSocket)>,
}

impl EchoSockets {
    /// Binds one non-blocking socket per address of `n3`.
    pub fn bind(n3: &[IpAddr]) -> Result<EchoSockets, String> {
        let sockets = n3
            .iter()
            .map(|&a| {
                let s = UdpSocket::bind(SocketAddr::new(a, 0))
                    .map_err(|e| format!("pfcp.n3: cannot bind a GTP-U echo socket on {a}: {e}"))?;
                s.set_nonblocking(true)
                    .map_err(|e| format!("pfcp.n3: {a}: {e}"))?;
                Ok((a, s))
            })
            .collect::<Result<_, String>>()?;
        Ok(EchoSockets { sockets })
    }

    pub fn sockets(&self) -> impl Iterator<Item = &UdpSocket> {
        self.sockets.iter().map(|(_, s)| s)
    }

    /// Sends `echo` (an Echo Request, TS 29.281 §7.2.1: TEID 0, S set).
    pub fn send(&self, echo: &Echo) {
        self.send_to_port(echo, gtpu::UDP_PORT);
    }

    fn send_to_port(&self, echo: &Echo, port: u16) {
        let Some((_, s)) = self.sockets.iter().find(|(a, _)| *a == echo.local) else {
            return;
        };
        let repr = GtpuRepr {
            teid: 0,
            sequence: Some(echo.sequence),
            npdu: None,
            extensions: Extensions::new(),
            message: GtpuMessage::EchoRequest,
        };
        let mut b = [0u8; 32];
        let n = repr.buffer_len();
        repr.emit(&mut b[..n], 0);
        if let Err(e) = s.send_to(&b[..n], SocketAddr::new(echo.peer, port)) {
            tracing::debug!(peer = %echo.peer, "GTP-U echo send: {e}");
        }
    }

    /// Reads every datagram waiting on socket `i`; each Echo Response goes
    /// to `paths`.
    pub fn receive(&self, i: usize, paths: &mut Paths) {
        let Some((_, s)) = self.sockets.get(i) else {
            return;
        };
        let mut b = [0u8; 512];
        while let Ok((n, from)) = s.recv_from(&mut b) {
            let response = gtpu::Packet::new_checked(&b[..n])
                .and_then(|p| GtpuRepr::parse(&p))
                .ok()
                .filter(|r| matches!(r.message, GtpuMessage::EchoResponse { .. }));
            match response {
                Some(r) => paths.answered(from.ip(), r.sequence.unwrap_or(0)),
                None => paths.count(PathCounter::EchoUnexpected, 1),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;
    use tep_pfcp::node::{Action, Far, LocalFTeid, OuterHeader, Pdr};
    use tep_pfcp::types::Interface;

    const N3: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
    const GNB: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 9);
    const GNB2: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 10);

    fn timers() -> Timers {
        Timers {
            interval: Duration::from_secs(60),
            t3: Duration::from_secs(3),
            n3: 3,
        }
    }

    fn rules(gnb: Ipv4Addr, teid: u32) -> Rules {
        let far = Far {
            id: 2,
            action: Action::Forward,
            destination: Some(Interface::ACCESS),
            outer: Some(OuterHeader {
                teid,
                v4: Some(gnb),
                v6: None,
            }),
            bar: None,
            network: None,
            dscp: None,
        };
        let pdr = Pdr {
            id: 1,
            precedence: 1,
            source: Interface::ACCESS,
            local: Some(LocalFTeid {
                teid: 7,
                v4: Some(Ipv4Addr::new(198, 51, 100, 1)),
                v6: None,
            }),
            ue_ip: None,
            qfi: None,
            outer_header_removal: None,
            far: 1,
            qers: Default::default(),
            urrs: Default::default(),
            sdf: Vec::new(),
            network: None,
        };
        Rules {
            pdrs: vec![pdr],
            fars: vec![far],
            ..Default::default()
        }
    }

    fn poll(p: &mut Paths, now: Instant) -> Vec<Echo> {
        let mut out = Vec::new();
        p.poll(now, &mut out);
        out
    }

    #[test]
    fn a_silent_peer_fails_after_n3_tries_and_recovers_when_it_answers() {
        let t0 = Instant::now();
        let mut p = Paths::new(timers(), vec![N3]);
        assert_eq!(p.next_timeout(), None, "no peer");
        p.install(t0, 1, &rules(GNB, 0x100));
        let gnb = IpAddr::V4(GNB);
        // At once, from the N3 address of the session's F-TEID.
        assert_eq!(p.next_timeout(), Some(t0));
        let e = poll(&mut p, t0);
        let local = IpAddr::V4(Ipv4Addr::new(198, 51, 100, 1));
        assert_eq!(
            e,
            [Echo {
                local,
                peer: gnb,
                sequence: 1
            }]
        );
        assert!(poll(&mut p, t0 + Duration::from_secs(2)).is_empty());
        // Answered: the next round an interval after the first; the answer
        // to a retransmission of the round changes nothing.
        p.answered(gnb, 1);
        p.answered(gnb, 1);
        assert_eq!(p.counter(PathCounter::EchoUnexpected), 0);
        assert_eq!(p.next_timeout(), Some(t0 + Duration::from_secs(60)));
        assert!(poll(&mut p, t0 + Duration::from_secs(59)).is_empty());
        let t1 = t0 + Duration::from_secs(60);
        assert_eq!(poll(&mut p, t1)[0].sequence, 2);
        // Silent: retried with the same sequence number after T3, N3
        // tries in all, then failed once.
        for k in 1..3u64 {
            let e = poll(&mut p, t1 + Duration::from_secs(3 * k));
            assert_eq!(e.len(), 1);
            assert_eq!(e[0].sequence, 2);
        }
        assert_eq!(p.events().count(), 0);
        assert!(poll(&mut p, t1 + Duration::from_secs(9)).is_empty());
        assert_eq!(p.events().collect::<Vec<_>>(), [PathEvent::Failed(gnb)]);
        assert_eq!(p.counter(PathCounter::EchoTimeouts), 3);
        assert_eq!(p.counter(PathCounter::PathFailures), 1);
        // Still failed the next round: no second report.
        let t2 = t1 + Duration::from_secs(60);
        assert_eq!(p.next_timeout(), Some(t2));
        for k in 0..4u64 {
            poll(&mut p, t2 + Duration::from_secs(3 * k));
        }
        assert_eq!(p.events().count(), 0);
        assert_eq!(p.counter(PathCounter::PathFailures), 1);
        // A late answer to an old round, a stranger: unexpected.
        p.answered(gnb, 2);
        p.answered(IpAddr::V4(GNB2), 3);
        assert_eq!(p.counter(PathCounter::EchoUnexpected), 2);
        // It answers again: recovered.
        let t3 = t2 + Duration::from_secs(60);
        let seq = poll(&mut p, t3)[0].sequence;
        p.answered(gnb, seq);
        assert_eq!(p.events().collect::<Vec<_>>(), [PathEvent::Recovered(gnb)]);
        assert_eq!(p.counter(PathCounter::PathRecoveries), 1);
        assert_eq!(p.counter(PathCounter::EchoAnswered), 2);
    }

    #[test]
    fn peers_follow_the_sessions_that_name_them() {
        let t0 = Instant::now();
        let mut p = Paths::new(timers(), vec![N3]);
        p.install(t0, 1, &rules(GNB, 0x100));
        p.install(t0, 2, &rules(GNB, 0x200));
        assert_eq!(poll(&mut p, t0).len(), 1, "one peer, one request");
        // Session 1 moves to another gNB: the first keeps session 2.
        p.install(t0, 1, &rules(GNB2, 0x100));
        let mut peers: Vec<_> = p.peers().map(|(a, _, _, n)| (a, n)).collect();
        peers.sort();
        assert_eq!(peers, [(IpAddr::V4(GNB), 1), (IpAddr::V4(GNB2), 1)]);
        // The old gNB's state stays; the new one is asked at once.
        assert_eq!(poll(&mut p, t0).len(), 1);
        p.remove(2);
        p.remove(1);
        assert_eq!(p.peers().count(), 0);
        assert_eq!(p.next_timeout(), None);
        // A session modified on its gNB keeps the gNB's state.
        p.install(t0, 3, &rules(GNB, 0x300));
        poll(&mut p, t0);
        p.install(t0, 3, &rules(GNB, 0x301));
        assert!(poll(&mut p, t0).is_empty(), "still the same round");
        // A peer of a family without an N3 address is supervised only for
        // a session whose own F-TEID has that family; the others' removal
        // leaves its count alone.
        let gnb6 = "2001:db8::9".parse().unwrap();
        let mut own = rules(GNB, 0x400);
        own.fars[0].outer = Some(OuterHeader {
            teid: 0x400,
            v4: None,
            v6: Some(gnb6),
        });
        own.pdrs[0].local.as_mut().unwrap().v6 = Some("2001:db8::1".parse().unwrap());
        let mut other = own.clone();
        other.pdrs.clear();
        p.install(t0, 5, &own);
        p.install(t0, 6, &other);
        p.remove(6);
        let count = |p: &Paths| p.peers().find(|x| x.0 == IpAddr::V6(gnb6)).map(|x| x.3);
        assert_eq!(count(&p), Some(1));
        p.remove(5);
        assert_eq!(count(&p), None);
        // A session with no outer header creation, or an echo interval of
        // zero: nothing.
        p.install(t0, 4, &Rules::default());
        assert_eq!(p.peers().count(), 1);
        let mut off = Paths::new(
            Timers {
                interval: Duration::ZERO,
                ..timers()
            },
            vec![N3],
        );
        off.install(t0, 1, &rules(GNB, 1));
        assert!(off.next_timeout().is_none() && poll(&mut off, t0).is_empty());
    }

    #[test]
    fn error_indications_name_a_session_from_its_own_peer_at_most_once_a_second() {
        let t0 = Instant::now();
        let mut p = Paths::new(timers(), vec![N3]);
        p.install(t0, 1, &rules(GNB, 0x100));
        let gnb = IpAddr::V4(GNB);
        assert_eq!(p.error_indication(t0, gnb, gnb, 0x100), Some(1));
        // Repeated within the second, from another host, for another TEID.
        assert_eq!(p.error_indication(t0, gnb, gnb, 0x100), None);
        let t1 = t0 + Duration::from_secs(1);
        assert_eq!(p.error_indication(t1, IpAddr::V4(GNB2), gnb, 0x100), None);
        assert_eq!(p.error_indication(t1, gnb, gnb, 0x101), None);
        assert_eq!(p.error_indication(t1, gnb, gnb, 0x100), Some(1));
        assert_eq!(p.counter(PathCounter::ErrorIndications), 2);
        assert_eq!(p.counter(PathCounter::ErrorIndicationsIgnored), 3);
        // Moved to another TEID: the old one names nothing.
        p.install(t1, 1, &rules(GNB, 0x200));
        let t2 = t1 + Duration::from_secs(5);
        assert_eq!(p.error_indication(t2, gnb, gnb, 0x100), None);
        assert_eq!(p.error_indication(t2, gnb, gnb, 0x200), Some(1));
        p.remove(1);
        assert_eq!(p.error_indication(t2 + t3(), gnb, gnb, 0x200), None);
    }

    fn t3() -> Duration {
        Duration::from_secs(3)
    }

    #[test]
    fn echo_requests_are_answered_on_their_socket() {
        let lo = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let sockets = EchoSockets::bind(&[lo]).unwrap();
        // Port 2152 on loopback may be another test's: the peer here
        // listens elsewhere, and answers to the port the request came from.
        let peer = UdpSocket::bind((lo, 0)).unwrap();
        let port = peer.local_addr().unwrap().port();
        let mut p = Paths::new(timers(), vec![lo]);
        let t0 = Instant::now();
        let mut r = rules(GNB, 0x100);
        r.pdrs.clear();
        r.fars[0].outer = Some(OuterHeader {
            teid: 1,
            v4: Some(Ipv4Addr::LOCALHOST),
            v6: None,
        });
        p.install(t0, 1, &r);
        let echo = poll(&mut p, t0)[0];
        assert_eq!(echo.local, lo, "the first N3 address of the family");
        sockets.send_to_port(&echo, port);
        let mut got = [0u8; 64];
        let (n, from) = peer.recv_from(&mut got).unwrap();
        let req = GtpuRepr::parse(&gtpu::Packet::new_checked(&got[..n]).unwrap()).unwrap();
        assert_eq!(
            (req.teid, req.sequence, req.message),
            (0, Some(echo.sequence), GtpuMessage::EchoRequest)
        );
        let mut b = [0u8; 32];
        let resp = GtpuRepr::echo_response(&req, 0);
        resp.emit(&mut b[..resp.buffer_len()], 0);
        peer.send_to(&b[..resp.buffer_len()], from).unwrap();
        peer.send_to(&b[..3], from).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        sockets.receive(0, &mut p);
        assert_eq!(p.counter(PathCounter::EchoAnswered), 1);
        assert_eq!(p.counter(PathCounter::EchoUnexpected), 1, "the runt");
    }
}
