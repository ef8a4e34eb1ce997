//! The UP function's PFCP node: pure protocol logic, no I/O, no clock
//! (after quinn-proto's `Endpoint`).
//!
//! # How the daemon drives it
//! ```text
//! loop {
//!     wait for the PFCP socket, or until node.poll_timeout()
//!     for each datagram (bytes, from):  node.handle(now, from, &bytes, &mut up)
//!     if the timeout passed:            node.handle_timeout(now, &mut up)
//!     for each first downlink packet the user plane buffered (FAR BUFF+NOCP):
//!                                       node.downlink_data(now, seid, pdr_id)
//!                                       (reported then, or after its BAR's
//!                                       Downlink Data Notification Delay)
//!     every few milliseconds, if node.usage_watched() > 0:
//!                                       node.scan_usage(now, &mut up)
//!     while let Some(t) = node.poll_transmit() { socket.send_to(&t.payload, t.destination) }
//! }
//! ```
//! `up` is the daemon's [`UserPlane`]: the node calls
//! [`UserPlane::apply`] with each [`Change`] (install a session's whole
//! rule set, remove a session, send an End Marker) while it handles a
//! request, before the response is queued, so the response says what the
//! user plane has; and [`UserPlane::take_usage`] when a usage report is
//! due (deletion, Query URR, Remove URR) and on each usage scan
//! ([`usage`]: thresholds, quotas, periodic reports, start and stop of
//! traffic).
//!
//! # What the node does
//! - Associations (TS 29.244 §6.2.6): Setup, Update, Release from the SMF;
//!   its Node ID and Recovery Time Stamp are kept per peer address. A new
//!   Recovery Time Stamp (in an Association Setup or a Heartbeat, from the
//!   association's own address) means the SMF restarted: its sessions are
//!   deleted (§6.2.6.2.2, §19A).
//! - Heartbeats (§6.2.2) both ways: answered, and sent to each associated
//!   SMF every `heartbeat_interval`; a peer that misses T1 × N1 is counted
//!   unreachable (its sessions keep forwarding), and released with its
//!   sessions once silent for `association_grace`.
//!
//! # Who may do what (trust boundaries)
//! - Only hosts in [`Config::peers`] are heard at all: anyone else's
//!   datagrams are dropped unanswered (no reflection), counted.
//! - A session request is served only from the association that owns the
//!   session (its address, or the CP F-SEID's); to anyone else the
//!   session does not exist (Session context not found).
//! - A Node ID associated from one address cannot be taken over from
//!   another while that association lives.
//! - Responses to our requests count only from the host asked.
//! - SEIDs and TEIDs are keyed permutations of dense indexes
//!   ([`Config::id_key`]): not guessable from one another.
//! - Sessions per association, associations, and the responses kept for
//!   retransmissions (per association, and for everyone else apart) are
//!   bounded.
//! - Sessions (§6.3): establishment (F-TEIDs chosen from the N3 addresses
//!   where the SMF asks CHOOSE, returned in Created PDR), modification,
//!   deletion with usage reports; Session Report Requests with a Downlink
//!   Data Report or Usage Reports (the triggers of [`usage`]),
//!   retransmitted T1/N1 until answered.
//! - Buffering (§5.2.4): one BAR per session; a FAR names it for the
//!   packets it buffers: its Suggested Buffering Packets Count bounds them
//!   (the user plane's own bound is the ceiling), its Downlink Data
//!   Notification Delay defers the Downlink Data Report, which is not sent
//!   if the FAR stops buffering meanwhile; DROBU drops the packets held.
//! - Never accepts what it does not apply (`support`, [`session`]): a
//!   rule carrying an IE tep knows and does not enforce is refused with
//!   Rule creation/modification Failure, its Failed Rule ID and the
//!   Offending IE (Service not supported outside the rules), and so is one
//!   the user plane cannot carry ([`Refused::rule`]); IEs of unknown types
//!   are discarded (§7.6.1), counted.
//! - A retransmitted request (same peer, sequence number and type) gets the
//!   cached response, and nothing is applied twice (§6.4).
//! - Bad input gets the response §7.6 asks for, with its Cause and
//!   Offending IE, or is discarded where §7.6 says so; each reason is a
//!   [`Counter`].

mod cache;
mod path;
mod perm;
pub mod session;
mod support;
mod teid;
mod usage;

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::{Duration, Instant};

use crate::header::{self, Packet};
use crate::ie::IeType;
use crate::message::*;
use crate::rules::{CreatedPdr, DownlinkDataReport, UpdateBar, UpdateBarSrr};
use crate::rules::{UsageReportSdr, UsageReportSmr};
use crate::types::*;
use crate::Error;

use cache::ResponseCache;
use perm::Permutation;
pub use session::MAX_SDF_FILTERS;
pub use session::{
    Action, Bar, Far, Ids, LocalFTeid, OuterHeader, Pdr, Qer, Rules, Sdf, UeIp, Urr,
};
use session::{Pending, Reject};
use teid::TeidAllocator;
pub use usage::VolumeLeft;

/// [`session::create_all`] over the Create IEs of `$m`, an establishment
/// or a modification request (the two messages name them alike).
macro_rules! create_rules {
    ($rules:expr, $pending:expr, $m:expr, $scans:expr) => {
        session::create_all(
            $rules,
            $pending,
            (
                &$m.create_fars,
                &$m.create_qers,
                &$m.create_urrs,
                &$m.create_pdrs,
            ),
            $scans,
        )
    };
}

/// A session as the node and the user plane name it: the UP SEID tep
/// allocated (what the SMF puts in the header of its session requests).
pub type Seid = u64;

tep_named::named_enum! {
    /// What the node counts: every reason a message was rejected or
    /// discarded, and the work done. Declared once: the daemon exports
    /// [`Node::counters`] under these names.
    pub enum Counter {
        /// A datagram shorter than a PFCP header (discarded).
        Truncated => "truncated",
        /// A PFCP version other than 1 (Version Not Supported Response).
        BadVersion => "bad_version",
        /// A message length field past the datagram or inside the header
        /// (a request gets Cause Invalid length).
        BadLength => "bad_length",
        /// The S flag contradicts the message type (discarded).
        BadSeidFlag => "bad_seid_flag",
        /// A message type tep does not handle (discarded, §7.6.4).
        UnknownMessage => "unknown_message",
        /// A response to no request of ours (discarded).
        UnexpectedResponse => "unexpected_response",
        /// A retransmitted request, answered from the cache.
        DuplicateRequest => "duplicate_request",
        /// Cause Mandatory IE missing.
        MandatoryIeMissing => "mandatory_ie_missing",
        /// Cause Conditional IE missing.
        ConditionalIeMissing => "conditional_ie_missing",
        /// Cause Mandatory IE incorrect.
        MandatoryIeIncorrect => "mandatory_ie_incorrect",
        /// Cause Invalid length (an IE past its message or group).
        InvalidLength => "invalid_length",
        /// Cause Session context not found.
        SessionNotFound => "session_not_found",
        /// Cause No established PFCP Association.
        NoAssociation => "no_association",
        /// Cause Rule creation/modification Failure.
        RuleFailure => "rule_failure",
        /// Cause Request rejected: more rules than a session may hold.
        TooManyRules => "too_many_rules",
        /// Cause Invalid F-TEID allocation option (CHOOSE for an IP version
        /// with no N3 address).
        InvalidFteidOption => "invalid_fteid_option",
        /// Cause No resources available: sessions or TEIDs exhausted.
        NoResources => "no_resources",
        /// Cause No resources available: the user plane refused a change.
        UserPlaneRefused => "user_plane_refused",
        /// A rule refused for an IE tep knows and does not apply (Rule
        /// creation/modification Failure with the Failed Rule ID), or a
        /// session request for one outside the rules (Service not
        /// supported); the Offending IE names it.
        UnsupportedIe => "unsupported_ie",
        /// IEs of a type tep does not know, discarded (§7.6.1).
        UnknownIe => "unknown_ie",
        /// Rule creation/modification Failure: the user plane cannot
        /// enforce a rule as asked (a second PDR in a direction with
        /// other treatment, an N9 F-TEID…).
        NotEnforceable => "not_enforceable",
        /// A response with a rejection cause to a request of ours.
        PeerRejected => "peer_rejected",
        /// An SMF's Recovery Time Stamp changed: its sessions were deleted.
        PeerRestarted => "peer_restarted",
        /// An SMF missed T1 × N1 heartbeats.
        PeerUnreachable => "peer_unreachable",
        /// A datagram from a host not in `peers` (dropped unanswered).
        Stranger => "stranger",
        /// A session request from a peer that does not own the session
        /// (answered Session context not found, as for an unknown SEID).
        ForeignSession => "foreign_session",
        /// An Association Setup with a Node ID associated from another
        /// address (Request rejected).
        AssociationTakeover => "association_takeover",
        /// An Association Setup with a Node ID its `peers` entry does not
        /// allow (Request rejected).
        NodeIdRefused => "node_id_refused",
        /// An Association Setup past the most associations (No resources
        /// available).
        TooManyAssociations => "too_many_associations",
        /// A response to one of our requests from a host other than the
        /// one asked (discarded).
        SpoofedResponse => "spoofed_response",
        /// Associations released after their peer stayed silent for the
        /// grace, with their sessions.
        AssociationsExpired => "associations_expired",
        /// Cause No resources available: the association's session quota.
        AssociationQuota => "association_quota",
        /// A request of ours resent after T1.
        Retransmitted => "retransmitted",
        /// A request of ours unanswered after N1 resends.
        RequestTimeout => "request_timeout",
        /// A downlink data notice for a session already reported, unknown,
        /// or whose FAR is not BUFF with NOCP; or a report deferred by the
        /// BAR's delay whose FAR stopped buffering before it was due.
        DlReportSuppressed => "dl_report_suppressed",
        /// Usage Reports sent in Session Report Requests (a trigger
        /// fired on a usage scan).
        UsageReports => "usage_reports",
        /// URRs whose volume or time quota ran out: the PDRs under them
        /// forward nothing until the SMF grants a new quota.
        QuotaExhausted => "quota_exhausted",
        /// A cached response dropped early to stay under the cap.
        CacheEvicted => "cache_evicted",
        /// A CP F-SEID naming an address other than its sender's that
        /// `peers` does not list (Request rejected): reports would go to, and
        /// the session would be owned by, a host that never associated.
        CpAddressRefused => "cp_address_refused",
        /// Associations set up (or refreshed).
        AssociationsSetUp => "associations_set_up",
        /// Associations released by the SMF.
        AssociationsReleased => "associations_released",
        /// Heartbeat Requests answered.
        HeartbeatsAnswered => "heartbeats_answered",
        /// Sessions established.
        SessionsEstablished => "sessions_established",
        /// Sessions modified.
        SessionsModified => "sessions_modified",
        /// Sessions deleted by the SMF.
        SessionsDeleted => "sessions_deleted",
        /// Session Report Requests sent (first transmissions).
        ReportsSent => "reports_sent",
        /// End Markers asked of the user plane (SNDEM).
        EndMarkers => "end_markers",
        /// Node Report Requests sent (first transmissions): a GTP-U path
        /// failed or recovered, one per associated SMF.
        NodeReportsSent => "node_reports_sent",
        /// Session Report Requests with an Error Indication Report sent.
        ErrorIndicationReports => "error_indication_reports",
        /// An Error Indication for a session the node does not have, or
        /// whose last report is still unanswered (not reported).
        ErrorIndicationSuppressed => "error_indication_suppressed",
    }
}

/// How the node is set up.
#[derive(Clone, Debug)]
pub struct Config {
    /// tep's Node ID (sent in association and establishment responses).
    pub node_id: NodeId,
    /// When tep started, in seconds since 1900 (NTP era 0): see
    /// [`ntp_seconds`].
    pub recovery_time_stamp: u32,
    /// The N3 addresses put in F-TEIDs tep chooses.
    pub n3_v4: Option<Ipv4Addr>,
    pub n3_v6: Option<Ipv6Addr>,
    /// The address of tep's PFCP socket, sent in the UP F-SEID (where the
    /// SMF sends session messages); `None`: the N3 address of the SMF's
    /// family.
    pub n4: Option<IpAddr>,
    /// T1: how long to wait for a response before resending (§6.4).
    pub t1: Duration,
    /// N1: how many times to resend.
    pub n1: u8,
    /// How often to send a Heartbeat Request to each associated SMF;
    /// `None`: never.
    pub heartbeat_interval: Option<Duration>,
    /// How long a response is kept for retransmitted requests: the SMF's
    /// T1 × (N1 + 1) and a margin.
    pub response_cache_time: Duration,
    /// Most responses cached at once.
    pub response_cache_cap: usize,
    /// Most sessions at once (Session Establishment past it: No resources
    /// available).
    pub max_sessions: usize,
    /// Hosts heard at all; `None`: anyone.
    pub peers: Option<Vec<Peer>>,
    /// Keys the permutations that make SEIDs and TEIDs unpredictable (the
    /// daemon draws it at start).
    pub id_key: u64,
    /// How long an association stays after its peer stops answering
    /// Heartbeats (T1 × N1), before it is released with its sessions.
    pub association_grace: Duration,
    /// Most sessions of one association.
    pub max_sessions_per_association: usize,
    /// Most associations at once.
    pub max_associations: usize,
    /// Most responses cached for hosts with no association (each
    /// association has its own `response_cache_cap`).
    pub stranger_cache_cap: usize,
    /// The moment of `recovery_time_stamp`: the node dates its usage
    /// reports (Start Time, End Time) from the two.
    pub started: Instant,
    /// Whether the daemon runs usage scans ([`Node::scan_usage`]):
    /// without them a URR with a reporting trigger, a threshold, a quota,
    /// a period or duration measurement is refused.
    pub usage_scans: bool,
    /// How long without a packet means the traffic stopped (duration
    /// measurement, STOPT) where a URR names no Inactivity Detection Time.
    pub traffic_idle: Duration,
}

/// A host allowed to associate: an address or prefix, and the Node ID it
/// must give (`None`: any).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peer {
    pub addr: IpAddr,
    pub prefix_len: u8,
    pub node_id: Option<NodeId>,
}

impl Peer {
    /// Whether `a` is in the entry's prefix (an IPv4-mapped IPv6 address
    /// as its IPv4 address).
    pub fn covers(&self, a: IpAddr) -> bool {
        match (self.addr, a.to_canonical()) {
            (IpAddr::V4(p), IpAddr::V4(a)) => {
                let bits = u32::from(self.prefix_len.min(32));
                bits == 0 || (u32::from(p) ^ u32::from(a)) >> (32 - bits) == 0
            }
            (IpAddr::V6(p), IpAddr::V6(a)) => {
                let bits = u32::from(self.prefix_len.min(128));
                bits == 0 || (u128::from(p) ^ u128::from(a)) >> (128 - bits) == 0
            }
            _ => false,
        }
    }
}

/// Node IDs compare as DNS names do, without regard to case.
fn same_node(a: &NodeId, b: &NodeId) -> bool {
    match (a, b) {
        (NodeId::Fqdn(x), NodeId::Fqdn(y)) => x.eq_ignore_ascii_case(y),
        _ => a == b,
    }
}

/// Something the daemon should log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// An association was released because its peer stayed silent for
    /// the grace, with its `sessions`.
    AssociationExpired {
        node_id: NodeId,
        addr: IpAddr,
        sessions: usize,
    },
}

impl Config {
    /// Defaults for `node_id` and its N3 addresses: T1 3 s, N1 3,
    /// heartbeats every 10 s, responses kept 20 s (at most 1 M per
    /// association, 4096 for everyone else), 2 M sessions (any of them one
    /// association's), 16 associations released after 60 s of silence,
    /// any peer, SEIDs and TEIDs permuted under key 0.
    pub fn new(
        node_id: NodeId,
        recovery_time_stamp: u32,
        n3_v4: Option<Ipv4Addr>,
        n3_v6: Option<Ipv6Addr>,
    ) -> Self {
        Config {
            node_id,
            recovery_time_stamp,
            n3_v4,
            n3_v6,
            n4: None,
            t1: Duration::from_secs(3),
            n1: 3,
            heartbeat_interval: Some(Duration::from_secs(10)),
            response_cache_time: Duration::from_secs(20),
            response_cache_cap: 1 << 20,
            max_sessions: 2 << 20,
            peers: None,
            id_key: 0,
            association_grace: Duration::from_secs(60),
            max_sessions_per_association: 2 << 20,
            max_associations: 16,
            stranger_cache_cap: 4096,
            usage_scans: false,
            traffic_idle: Duration::from_secs(10),
            started: Instant::now(),
        }
    }
}

/// Seconds since 1900-01-01 (the Recovery Time Stamp's epoch) of a
/// `SystemTime` (the daemon passes its start time).
pub fn ntp_seconds(t: std::time::SystemTime) -> u32 {
    const UNIX_TO_NTP: u64 = 2_208_988_800;
    let unix = t
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    (unix + UNIX_TO_NTP) as u32
}

/// A change to the user plane, applied in the order given.
#[derive(Debug, Clone, Copy)]
pub enum Change<'a> {
    /// Session `seid` now has exactly `rules` (a new session, or one whose
    /// rules changed): replace its entry whole. Keys it had that `rules`
    /// lack (TEIDs, UE addresses) are gone; packets buffered under a FAR
    /// that now forwards leave by it.
    Install { seid: Seid, rules: &'a Rules },
    /// Session `seid` is gone (its final usage was taken first).
    Remove { seid: Seid },
    /// Drop the downlink packets held for session `seid` (DROBU), before
    /// the [`Change::Install`] just applied would send them: the two take
    /// effect together.
    DropBuffered { seid: Seid },
    /// Send a GTP-U End Marker on `old`, the tunnel FAR `far` used before
    /// the [`Change::Install`] just applied (handover, SNDEM), after the
    /// last packet sent on it.
    EndMarker {
        seid: Seid,
        far: u32,
        old: OuterHeader,
    },
}

/// The user plane refused a change, and nothing changed: a full table or
/// a TEID it cannot take (the request is answered "No resources
/// available"), or a rule it cannot enforce as the SMF asks (`rule`:
/// answered "Rule creation/modification Failure" naming the rule, and the
/// IE at fault if `offending`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refused {
    pub rule: Option<FailedRuleId>,
    pub offending: Option<IeType>,
}

impl Refused {
    /// No room (No resources available).
    pub const FULL: Refused = Refused {
        rule: None,
        offending: None,
    };

    /// Rule `rule` cannot be enforced as asked (because of `offending`).
    pub const fn rule(rule: FailedRuleId, offending: Option<IeType>) -> Refused {
        Refused {
            rule: Some(rule),
            offending,
        }
    }
}

/// Volume counted for a URR since it was last taken.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub uplink_bytes: u64,
    pub downlink_bytes: u64,
    pub uplink_packets: u64,
    pub downlink_packets: u64,
}

/// The daemon's side: the dataplane's session table.
pub trait UserPlane {
    /// Applies a change. `Install` and `Remove` are all-or-nothing: a
    /// refused `Install` leaves the session as it was.
    fn apply(&mut self, change: Change<'_>) -> Result<(), Refused>;
    /// The volume counted for URR `urr` of session `seid` since the last
    /// call for it (the count restarts at zero): the packets of the PDRs
    /// that name the URR (TS 29.244 §5.2.2), all of them for a URR shared
    /// by several.
    fn take_usage(&mut self, seid: Seid, urr: u32) -> Usage;
    /// Session `seid`'s URRs' measurements were taken and may have
    /// restarted (a scan, its reports): the user plane may arm its
    /// packet-by-packet volume check with what is left
    /// ([`Urr::volume_left`]). `rearm`: what is left changed other than by
    /// the packets counted (a report restarted a measurement, a quota ran
    /// out, or the user plane saw a crossing); otherwise the armed check
    /// is still right, and storing it again would lose the packets
    /// charged between the counts' reading and the store.
    fn usage_taken(&mut self, _seid: Seid, _rules: &Rules, _rearm: bool) {}
}

/// A datagram to send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transmit {
    pub destination: SocketAddr,
    pub payload: Vec<u8>,
}

#[derive(Debug)]
struct Association {
    /// Distinguishes associations over time (sessions name theirs).
    id: u32,
    node_id: NodeId,
    addr: IpAddr,
    recovery: u32,
    /// When the next Heartbeat Request is due.
    heartbeat_due: Instant,
    /// Our outstanding Heartbeat Request.
    heartbeat_seq: Option<u32>,
    /// Since when the peer has missed T1 × N1 Heartbeats; `None`: it
    /// answers.
    silent_since: Option<Instant>,
    sessions: usize,
    /// Responses to its requests, for their retransmissions: its own
    /// share, which no other host's requests evict.
    cache: ResponseCache,
}

#[derive(Debug)]
struct Session {
    assoc: u32,
    cp_seid: u64,
    cp_addr: IpAddr,
    rules: Rules,
    /// A Downlink Data Report was sent (or is due) and no modification
    /// came since.
    dl_reported: bool,
    /// When the Downlink Data Report deferred by the BAR's delay is due,
    /// and the PDR it names.
    dl_due: Option<(Instant, u16)>,
}

#[derive(Debug, Default)]
struct Slot {
    generation: u32,
    session: Option<Session>,
}

#[derive(Debug, Clone, Copy)]
enum Purpose {
    Heartbeat { assoc: u32 },
    Report { seid: Seid },
    NodeReport,
}

#[derive(Debug)]
struct Outstanding {
    destination: SocketAddr,
    payload: Vec<u8>,
    deadline: Instant,
    resends: u8,
    purpose: Purpose,
}

/// The UP function's PFCP node. See the module docs for how to drive it.
#[derive(Debug)]
pub struct Node {
    config: Config,
    associations: Vec<Association>,
    next_assoc_id: u32,
    slots: Vec<Slot>,
    free_slots: Vec<u32>,
    sessions: usize,
    seids: Permutation,
    teids: TeidAllocator,
    /// Responses to hosts with no association.
    stranger_cache: ResponseCache,
    events: VecDeque<Event>,
    /// Our requests awaiting a response, by sequence number; `deadlines`
    /// holds (deadline, seq) in deadline order (every wait is T1), stale
    /// entries skipped.
    outstanding: HashMap<u32, Outstanding>,
    deadlines: VecDeque<(Instant, u32)>,
    /// Deferred Downlink Data Reports (`Session::dl_due`), earliest first;
    /// an entry the session no longer has is skipped.
    dl_timers: BinaryHeap<Reverse<(Instant, Seid)>>,
    next_seq: u32,
    transmits: VecDeque<Transmit>,
    counters: [u64; Counter::COUNT],
    /// The slots of the sessions with a URR usage scans watch
    /// ([`Rules::usage_watched`]), in order: a scan walks the slots (and
    /// the rules they point to, allocated about in that order) forwards,
    /// not in a hash's order, which at 100,000 sessions cost a cache miss
    /// at every step.
    watched: BTreeSet<u32>,
    /// A scan's copy of `watched` (kept: a scan every few milliseconds
    /// allocates nothing).
    scanning: Vec<u32>,
}

impl Node {
    pub fn new(config: Config) -> Node {
        Node {
            stranger_cache: ResponseCache::new(config.stranger_cache_cap),
            events: VecDeque::new(),
            seids: Permutation::new(config.id_key, 1, 32),
            teids: TeidAllocator::new(config.id_key),
            config,
            associations: vec![],
            next_assoc_id: 1,
            slots: vec![],
            free_slots: vec![],
            sessions: 0,
            outstanding: HashMap::new(),
            deadlines: VecDeque::new(),
            dl_timers: BinaryHeap::new(),
            next_seq: 1,
            transmits: VecDeque::new(),
            counters: [0; Counter::COUNT],
            watched: BTreeSet::new(),
            scanning: Vec::new(),
        }
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// `now` in NTP seconds (what Start Time and End Time carry), from
    /// the start the Recovery Time Stamp names.
    fn ntp(&self, now: Instant) -> u32 {
        let up = now.saturating_duration_since(self.config.started).as_secs();
        self.config.recovery_time_stamp.wrapping_add(up as u32)
    }

    /// Every counter, indexed by `Counter as usize` (names:
    /// [`Counter::ALL`]).
    pub fn counters(&self) -> &[u64; Counter::COUNT] {
        &self.counters
    }

    pub fn counter(&self, c: Counter) -> u64 {
        self.counters[c as usize]
    }

    fn count(&mut self, c: Counter) {
        self.counters[c as usize] += 1;
    }

    /// Sessions in place.
    pub fn session_count(&self) -> usize {
        self.sessions
    }

    /// A session's rules.
    pub fn session(&self, seid: Seid) -> Option<&Rules> {
        self.get(seid).map(|s| &s.rules)
    }

    /// The SEIDs of every session.
    pub fn seids(&self) -> impl Iterator<Item = Seid> + '_ {
        self.slots.iter().enumerate().filter_map(|(i, s)| {
            s.session
                .as_ref()
                .map(|_| self.seid_of(i as u32, s.generation))
        })
    }

    /// The SEID of slot `index` in `generation`: dense, then permuted.
    fn seid_of(&self, index: u32, generation: u32) -> Seid {
        self.seids
            .forward((generation as u64) << 32 | (index as u64 + 1))
    }

    /// The slot index a SEID names, if its generation is the slot's.
    fn slot_of(&self, seid: Seid) -> Option<usize> {
        let dense = self.seids.backward(seid);
        let index = (dense as u32).checked_sub(1)? as usize;
        let slot = self.slots.get(index)?;
        (slot.generation == (dense >> 32) as u32).then_some(index)
    }

    /// The Node IDs of the associated SMFs, with their addresses.
    pub fn associations(&self) -> impl Iterator<Item = (&NodeId, IpAddr)> + '_ {
        self.associations.iter().map(|a| (&a.node_id, a.addr))
    }

    /// Responses kept for retransmitted requests.
    pub fn cached_responses(&self) -> usize {
        self.stranger_cache.len()
            + self
                .associations
                .iter()
                .map(|a| a.cache.len())
                .sum::<usize>()
    }

    /// The next thing to log.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// TEIDs in use.
    pub fn teids_in_use(&self) -> usize {
        self.teids.in_use()
    }

    /// The next datagram to send.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.transmits.pop_front()
    }

    /// When [`Node::handle_timeout`] is next due.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let mut t = self.stranger_cache.next_expiry();
        let mut earliest = |x: Instant| t = Some(t.map_or(x, |t: Instant| t.min(x)));
        if let Some(&(d, _)) = self.deadlines.front() {
            earliest(d);
        }
        if let Some(&Reverse((d, _))) = self.dl_timers.peek() {
            earliest(d);
        }
        for a in &self.associations {
            if let Some(e) = a.cache.next_expiry() {
                earliest(e);
            }
            if let Some(s) = a.silent_since {
                earliest(s + self.config.association_grace);
            }
            if self.config.heartbeat_interval.is_some() && a.heartbeat_seq.is_none() {
                earliest(a.heartbeat_due);
            }
        }
        t
    }

    /// Runs what is due at `now`: resends, timeouts, heartbeats, cache
    /// expiry.
    pub fn handle_timeout(&mut self, now: Instant, up: &mut impl UserPlane) {
        self.downlink_reports_due(now);
        self.stranger_cache.expire(now);
        for a in &mut self.associations {
            a.cache.expire(now);
        }
        while let Some(&(d, seq)) = self.deadlines.front() {
            if d > now {
                break;
            }
            self.deadlines.pop_front();
            let Some(o) = self.outstanding.get_mut(&seq) else {
                continue;
            };
            if o.deadline != d {
                continue;
            }
            if o.resends < self.config.n1 {
                o.resends += 1;
                o.deadline = now + self.config.t1;
                self.deadlines.push_back((o.deadline, seq));
                self.transmits.push_back(Transmit {
                    destination: o.destination,
                    payload: o.payload.clone(),
                });
                self.count(Counter::Retransmitted);
                continue;
            }
            let o = self.outstanding.remove(&seq).expect("looked up above");
            self.count(Counter::RequestTimeout);
            if let Purpose::Heartbeat { assoc } = o.purpose {
                if let Some(a) = self.associations.iter_mut().find(|a| a.id == assoc) {
                    a.heartbeat_seq = None;
                    a.heartbeat_due = now;
                    if a.silent_since.is_none() {
                        a.silent_since = Some(now);
                        self.counters[Counter::PeerUnreachable as usize] += 1;
                    }
                }
            }
        }
        if let Some(interval) = self.config.heartbeat_interval {
            let due: Vec<(u32, IpAddr)> = self
                .associations
                .iter()
                .filter(|a| a.heartbeat_seq.is_none() && a.heartbeat_due <= now)
                .map(|a| (a.id, a.addr))
                .collect();
            for (id, addr) in due {
                let m = Message::HeartbeatRequest(HeartbeatRequest {
                    recovery_time_stamp: RecoveryTimeStamp(self.config.recovery_time_stamp),
                });
                let seq = self.send_request(
                    now,
                    SocketAddr::new(addr, header::PORT),
                    None,
                    m,
                    Purpose::Heartbeat { assoc: id },
                );
                if let Some(a) = self.associations.iter_mut().find(|a| a.id == id) {
                    a.heartbeat_seq = Some(seq);
                    a.heartbeat_due = now + interval;
                }
            }
        }
        let grace = self.config.association_grace;
        while let Some(i) = self
            .associations
            .iter()
            .position(|a| a.silent_since.is_some_and(|s| s + grace <= now))
        {
            let sessions = self.associations[i].sessions;
            let a = self.release(i, up);
            self.count(Counter::AssociationsExpired);
            self.events.push_back(Event::AssociationExpired {
                node_id: a.node_id,
                addr: a.addr,
                sessions,
            });
        }
    }

    /// The user plane buffered the first downlink packet for PDR `pdr` of
    /// session `seid` (its FAR is BUFF with NOCP): send the SMF a Session
    /// Report Request with a Downlink Data Report, once until the session
    /// is modified; after the Downlink Data Notification Delay of the
    /// FAR's BAR where it has one (the FAR is judged again then).
    pub fn downlink_data(&mut self, now: Instant, seid: Seid, pdr: u16) {
        let Some(s) = self.get(seid) else {
            self.count(Counter::DlReportSuppressed);
            return;
        };
        if s.dl_reported || !notifies(&s.rules, pdr) {
            self.count(Counter::DlReportSuppressed);
            return;
        }
        let delay = s
            .rules
            .pdr(pdr)
            .and_then(|p| s.rules.far(p.far))
            .and_then(|f| s.rules.bar_of(f))
            .map_or(Duration::ZERO, Bar::delay);
        let s = self.get_mut(seid).expect("looked up above");
        s.dl_reported = true;
        if delay.is_zero() {
            self.send_downlink_report(now, seid, pdr);
        } else {
            s.dl_due = Some((now + delay, pdr));
            self.dl_timers.push(Reverse((now + delay, seid)));
            self.compact_dl_timers();
        }
    }

    /// Keeps the deferred reports' heap bounded by the sessions: an SMF
    /// that modifies a buffering session again and again leaves a stale
    /// entry each time (skipped when due, up to 12.75 s later); past
    /// twice the sessions the heap keeps only the entries sessions hold.
    fn compact_dl_timers(&mut self) {
        if self.dl_timers.len() <= 2 * self.sessions + 64 {
            return;
        }
        // One entry per session at most (stale ones may share its time).
        let mut kept = std::collections::HashSet::new();
        let live: Vec<_> = core::mem::take(&mut self.dl_timers)
            .into_iter()
            .filter(|&Reverse((at, seid))| {
                self.get(seid)
                    .is_some_and(|s| s.dl_due.is_some_and(|d| d.0 == at))
                    && kept.insert(seid)
            })
            .collect();
        self.dl_timers = live.into();
    }

    /// Sends the deferred Downlink Data Reports due at `now` whose FAR
    /// still buffers and notifies.
    fn downlink_reports_due(&mut self, now: Instant) {
        while let Some(&Reverse((at, seid))) = self.dl_timers.peek() {
            if at > now {
                break;
            }
            self.dl_timers.pop();
            let Some(s) = self.get_mut(seid) else {
                continue;
            };
            let Some((_, pdr)) = s.dl_due.filter(|d| d.0 == at) else {
                continue;
            };
            s.dl_due = None;
            if notifies(&s.rules, pdr) {
                self.send_downlink_report(now, seid, pdr);
            } else {
                self.count(Counter::DlReportSuppressed);
            }
        }
    }

    /// Sends session `seid`'s Downlink Data Report naming PDR `pdr`.
    fn send_downlink_report(&mut self, now: Instant, seid: Seid, pdr: u16) {
        let Some(s) = self.get(seid) else {
            return;
        };
        let cp = (s.cp_seid, s.cp_addr);
        let m = SessionReportRequest {
            report_type: ReportType(ReportType::DLDR),
            downlink_data_report: Some(DownlinkDataReport {
                pdr_ids: vec![PdrId(pdr)],
            }),
            usage_reports: vec![],
            error_indication_report: None,
        };
        self.send_report(now, seid, cp, m);
    }

    /// How many sessions usage scans watch: none, no scan is needed.
    pub fn usage_watched(&self) -> usize {
        self.watched.len()
    }

    /// A usage scan at `now`: each watched URR takes what the user plane
    /// counted since the last scan and checks its triggers ([`usage`]).
    /// The reports due go to each session's SMF in one Session Report
    /// Request; a session whose quota ran out gets its rules installed
    /// again, which stops its traffic ([`Rules::quota_exhausted`]).
    pub fn scan_usage(&mut self, now: Instant, up: &mut impl UserPlane) {
        let mut slots = core::mem::take(&mut self.scanning);
        slots.clear();
        slots.extend(self.watched.iter().copied());
        for &i in &slots {
            let seid = self.seid_of(i, self.slots[i as usize].generation);
            self.scan_session(now, seid, None, up);
        }
        self.scanning = slots;
    }

    /// The user plane saw session `seid`'s packets reach a volume
    /// threshold or quota it armed ([`UserPlane::usage_taken`]): the
    /// session is scanned now, not at the next scan. `spent`: the URRs
    /// whose quotas the user plane checked together found one used up
    /// (it dropped a packet that would have gone beyond, or passed one
    /// that used it to the byte): of those, the URR nearest its volume
    /// quota takes it as used up. Empty: a threshold was crossed.
    pub fn usage_crossed(
        &mut self,
        now: Instant,
        seid: Seid,
        spent: &[u32],
        up: &mut impl UserPlane,
    ) {
        self.scan_session(now, seid, Some(spent), up);
    }

    /// `crossed`: the user plane saw a volume limit crossed, and the
    /// URRs one of which used up its quota (as for
    /// [`Node::usage_crossed`]); None for a periodic scan.
    fn scan_session(
        &mut self,
        now: Instant,
        seid: Seid,
        crossed: Option<&[u32]>,
        up: &mut impl UserPlane,
    ) {
        let spent = crossed.unwrap_or_default();
        let at = self.ntp(now);
        let idle = self.config.traffic_idle;
        let Some(s) = self.get_mut(seid) else {
            return;
        };
        let mut reports = vec![];
        let mut exhausted = 0;
        for u in s.rules.urrs.iter_mut().filter(|u| u.watched()) {
            let due = u.observe(now, up.take_usage(seid, u.id), idle);
            for e in [UsageReportTrigger::START, UsageReportTrigger::STOPT] {
                if due.events & e != 0 {
                    reports.push(crate::rules::UsageReportSrr(u.event(e)));
                }
            }
            if due.report != 0 {
                let r = u.report(Usage::default(), due.report, at, now);
                reports.push(crate::rules::UsageReportSrr(r));
            }
            exhausted += u64::from(due.exhausted);
        }
        if !spent.is_empty() && exhausted == 0 {
            exhausted = exhaust_nearest_quota(&mut s.rules.urrs, spent, (at, now), &mut reports);
        }
        let rearm = crossed.is_some() || !reports.is_empty() || exhausted > 0;
        up.usage_taken(seid, &s.rules, rearm);
        let (cp_seid, cp_addr) = (s.cp_seid, s.cp_addr);
        if exhausted > 0 {
            self.counters[Counter::QuotaExhausted as usize] += exhausted;
            let s = self.get(seid).expect("looked up above");
            if up
                .apply(Change::Install {
                    seid,
                    rules: &s.rules,
                })
                .is_err()
            {
                self.count(Counter::UserPlaneRefused);
            }
        }
        if reports.is_empty() {
            return;
        }
        self.counters[Counter::UsageReports as usize] += reports.len() as u64;
        let m = SessionReportRequest {
            report_type: ReportType(ReportType::USAR),
            downlink_data_report: None,
            usage_reports: reports,
            error_indication_report: None,
        };
        self.send_report(now, seid, (cp_seid, cp_addr), m);
    }

    /// Sends the SMF that owns session `seid` (its F-SEID `cp`) a Session
    /// Report Request, and counts it.
    fn send_report(
        &mut self,
        now: Instant,
        seid: Seid,
        cp: (u64, IpAddr),
        m: SessionReportRequest,
    ) {
        let (cp_seid, cp_addr) = cp;
        self.send_request(
            now,
            SocketAddr::new(cp_addr, header::PORT),
            Some(cp_seid),
            Message::SessionReportRequest(m),
            Purpose::Report { seid },
        );
        self.count(Counter::ReportsSent);
    }

    fn send_request(
        &mut self,
        now: Instant,
        destination: SocketAddr,
        seid: Option<u64>,
        message: Message,
        purpose: Purpose,
    ) -> u32 {
        let seq = self.next_seq;
        self.next_seq = (self.next_seq + 1) & 0xff_ffff;
        if self.next_seq == 0 {
            self.next_seq = 1;
        }
        let payload = PfcpRepr {
            seid,
            sequence: seq,
            priority: None,
            message,
        }
        .to_bytes();
        let deadline = now + self.config.t1;
        self.transmits.push_back(Transmit {
            destination,
            payload: payload.clone(),
        });
        self.deadlines.push_back((deadline, seq));
        self.outstanding.insert(
            seq,
            Outstanding {
                destination,
                payload,
                deadline,
                resends: 0,
                purpose,
            },
        );
        seq
    }

    /// Whether usage scans watch session `seid`, after its rules changed.
    fn watch(&mut self, seid: Seid) {
        let Some(i) = self.slot_of(seid) else {
            return;
        };
        if self.get(seid).is_some_and(|s| s.rules.usage_watched()) {
            self.watched.insert(i as u32);
        } else {
            self.watched.remove(&(i as u32));
        }
    }

    fn get(&self, seid: Seid) -> Option<&Session> {
        self.slots[self.slot_of(seid)?].session.as_ref()
    }

    fn get_mut(&mut self, seid: Seid) -> Option<&mut Session> {
        let i = self.slot_of(seid)?;
        self.slots[i].session.as_mut()
    }

    fn assoc_by_addr(&self, addr: IpAddr) -> Option<&Association> {
        self.associations.iter().find(|a| a.addr == addr)
    }

    fn assoc_mut(&mut self, id: u32) -> Option<&mut Association> {
        self.associations.iter_mut().find(|a| a.id == id)
    }

    /// Whether session `seid` exists and `from` may act on it: the address
    /// of the association that set it up, or of its CP F-SEID.
    fn owns(&self, from: IpAddr, seid: Seid) -> bool {
        self.get(seid).is_some_and(|s| {
            s.cp_addr == from
                || self
                    .associations
                    .iter()
                    .any(|a| a.id == s.assoc && a.addr == from)
        })
    }

    /// Whether `peers` lets `from` be heard at all.
    fn heard(&self, from: IpAddr) -> bool {
        self.config
            .peers
            .as_ref()
            .is_none_or(|p| p.iter().any(|e| e.covers(from)))
    }

    /// Whether a CP F-SEID from `from` naming `addr` is refused: only the
    /// sender itself, or with `peers` a host they list, may receive the
    /// session's reports and act on it.
    /// A refusal is answered Request rejected with the F-SEID as
    /// Offending IE (`seq`, `t`, `cp_seid`: the request answered).
    fn refuse_cp_addr(
        &mut self,
        now: Instant,
        from: SocketAddr,
        (seq, t, cp_seid): (u32, u8, u64),
        addr: Option<IpAddr>,
    ) -> bool {
        let refused =
            addr.is_some_and(|a| a != from.ip() && (self.config.peers.is_none() || !self.heard(a)));
        if refused {
            self.count(Counter::CpAddressRefused);
            let r = self.rejection(
                t,
                Reject::simple(
                    Cause::REQUEST_REJECTED,
                    Some(IeType::F_SEID),
                    Counter::CpAddressRefused,
                ),
            );
            self.respond(now, from, seq, t, Some(cp_seid), r);
        }
        refused
    }

    /// The responses kept for `peer`'s retransmissions: its association's,
    /// else the strangers' share.
    fn cache_of(&mut self, peer: IpAddr) -> &mut ResponseCache {
        match self.associations.iter_mut().find(|a| a.addr == peer) {
            Some(a) => &mut a.cache,
            None => &mut self.stranger_cache,
        }
    }

    /// Handles one datagram from `from` (a PFCP message, or several
    /// bundled with FO).
    pub fn handle(&mut self, now: Instant, from: SocketAddr, data: &[u8], up: &mut impl UserPlane) {
        if !self.heard(from.ip()) {
            self.count(Counter::Stranger);
            return;
        }
        let mut rest = data;
        while !rest.is_empty() {
            let p = Packet::new_unchecked(rest);
            match p.check_len() {
                Ok(()) => {}
                Err(Error::BadVersion(_)) => {
                    self.count(Counter::BadVersion);
                    // §7.6.2: answered with the sequence number if there is one.
                    let seq = if rest.len() >= header::NODE_HEADER_LEN {
                        u32::from_be_bytes([0, rest[4], rest[5], rest[6]])
                    } else {
                        0
                    };
                    self.reply(from, seq, None, Message::VersionNotSupportedResponse);
                    return;
                }
                Err(Error::BadLength) => {
                    self.count(Counter::BadLength);
                    let t = p.msg_type();
                    if msg_type::is_request(t) {
                        let seid = p
                            .seid()
                            .filter(|&s| self.owns(from.ip(), s))
                            .and_then(|s| self.get(s))
                            .map(|s| s.cp_seid);
                        self.reject(from, &p, t, seid, Cause::INVALID_LENGTH, None);
                    }
                    return;
                }
                Err(_) => {
                    self.count(Counter::Truncated);
                    return;
                }
            }
            self.handle_message(now, from, &p, up);
            if !p.fo_flag() {
                return;
            }
            rest = &rest[p.total_len()..];
        }
    }

    fn handle_message(
        &mut self,
        now: Instant,
        from: SocketAddr,
        p: &Packet<&[u8]>,
        up: &mut impl UserPlane,
    ) {
        let t = p.msg_type();
        let request = msg_type::is_request(t);
        if request {
            if let Some(r) = self.cache_of(from.ip()).get(from, p.sequence(), t) {
                let payload = r.to_vec();
                self.transmits.push_back(Transmit {
                    destination: from,
                    payload,
                });
                self.count(Counter::DuplicateRequest);
                return;
            }
        }
        // Session Context not found comes before IE errors: the header is
        // sound and names no session of ours. A session of another peer's
        // is answered the same, so that a SEID tells a stranger nothing.
        let session = match t {
            msg_type::SESSION_MODIFICATION_REQUEST | msg_type::SESSION_DELETION_REQUEST => {
                match p.seid().filter(|&s| self.get(s).is_some()) {
                    Some(s) if self.owns(from.ip(), s) => Some(s),
                    Some(_) => {
                        self.count(Counter::ForeignSession);
                        self.reject(from, p, t, Some(0), Cause::SESSION_CONTEXT_NOT_FOUND, None);
                        return;
                    }
                    None if p.s_flag() => {
                        self.count(Counter::SessionNotFound);
                        self.reject(from, p, t, Some(0), Cause::SESSION_CONTEXT_NOT_FOUND, None);
                        return;
                    }
                    None => None,
                }
            }
            _ => None,
        };
        let repr = match PfcpRepr::parse(p) {
            Ok(r) => r,
            Err(Error::Ie(e)) => {
                if request {
                    self.count(counter_for(e.cause));
                    let seid = match session.and_then(|s| self.get(s)) {
                        Some(s) => Some(s.cp_seid),
                        // An establishment answers to the CP F-SEID if it
                        // is readable.
                        None => cp_seid_of(p.payload()),
                    };
                    self.reject(from, p, t, seid, e.cause, Some(e.ie));
                } else {
                    self.count(Counter::UnexpectedResponse);
                }
                return;
            }
            Err(Error::UnknownMessage(_)) => {
                self.count(Counter::UnknownMessage);
                return;
            }
            Err(_) => {
                self.count(Counter::BadSeidFlag);
                return;
            }
        };
        let seq = repr.sequence;
        match repr.message {
            Message::HeartbeatRequest(m) => {
                self.peer_recovery(from.ip(), m.recovery_time_stamp.0, up);
                self.count(Counter::HeartbeatsAnswered);
                let r = Message::HeartbeatResponse(HeartbeatResponse {
                    recovery_time_stamp: RecoveryTimeStamp(self.config.recovery_time_stamp),
                });
                self.respond(now, from, seq, t, None, r);
            }
            Message::AssociationSetupRequest(m) => self.association_setup(now, from, seq, m, up),
            Message::AssociationUpdateRequest(m) => {
                // An update names the association's own Node ID: another
                // is refused as a takeover would be.
                let cause = match self.assoc_by_addr(from.ip()) {
                    Some(a) if same_node(&a.node_id, &m.node_id) => Cause::REQUEST_ACCEPTED,
                    Some(_) => {
                        self.count(Counter::AssociationTakeover);
                        Cause::REQUEST_REJECTED
                    }
                    None => {
                        self.count(Counter::NoAssociation);
                        Cause::NO_ESTABLISHED_PFCP_ASSOCIATION
                    }
                };
                let r = Message::AssociationUpdateResponse(AssociationUpdateResponse {
                    node_id: self.config.node_id.clone(),
                    cause,
                    offending_ie: None,
                    up_function_features: None,
                });
                self.respond(now, from, seq, t, None, r);
            }
            Message::AssociationReleaseRequest(_) => {
                let cause = match self.associations.iter().position(|a| a.addr == from.ip()) {
                    Some(i) => {
                        self.release(i, up);
                        self.count(Counter::AssociationsReleased);
                        Cause::REQUEST_ACCEPTED
                    }
                    None => {
                        self.count(Counter::NoAssociation);
                        Cause::NO_ESTABLISHED_PFCP_ASSOCIATION
                    }
                };
                let r = Message::AssociationReleaseResponse(AssociationReleaseResponse {
                    node_id: self.config.node_id.clone(),
                    cause,
                    offending_ie: None,
                });
                self.respond(now, from, seq, t, None, r);
            }
            Message::SessionEstablishmentRequest(m) => self.establish(now, from, seq, m, up),
            Message::SessionModificationRequest(m) => match session {
                Some(s) => self.modify(now, from, seq, s, m, up),
                None => self.count(Counter::BadSeidFlag),
            },
            Message::SessionDeletionRequest(_) => match session {
                Some(s) => self.delete(now, from, seq, s, up),
                None => self.count(Counter::BadSeidFlag),
            },
            Message::HeartbeatResponse(m) => {
                let Some(Purpose::Heartbeat { assoc }) = self.answered(from, seq, true) else {
                    return;
                };
                if let Some(a) = self.assoc_mut(assoc) {
                    a.heartbeat_seq = None;
                }
                self.peer_recovery(from.ip(), m.recovery_time_stamp.0, up);
            }
            Message::SessionReportResponse(m) => {
                let Some(purpose) = self.answered(from, seq, false) else {
                    return;
                };
                if !m.cause.is_acceptance() {
                    self.count(Counter::PeerRejected);
                }
                // The SMF has no such session any more: neither do we.
                if let (Purpose::Report { seid }, Cause::SESSION_CONTEXT_NOT_FOUND) =
                    (purpose, m.cause)
                {
                    self.remove_session(seid, up);
                } else if let Purpose::Report { seid } = purpose {
                    self.report_answered(seid, &m, up);
                }
            }
            Message::NodeReportResponse(m) => {
                if self.answered(from, seq, false).is_some() && !m.cause.is_acceptance() {
                    self.count(Counter::PeerRejected);
                }
            }
            // Responses to requests tep never sends, and requests only a
            // UP function sends.
            _ => self.count(Counter::UnexpectedResponse),
        }
    }

    /// What an SMF's Session Report Response asks of session `seid`: its
    /// Update BAR (the BAR's delay and count, installed with the rules) and
    /// DROBU (drop what the session holds). A response cannot be refused:
    /// what tep does not apply of it (a BAR ID not the session's, DL
    /// Buffering Duration, DL Buffering Suggested Packet Count) is counted
    /// as `unsupported_ie` and left out.
    fn report_answered(&mut self, seid: Seid, m: &SessionReportResponse, up: &mut impl UserPlane) {
        if !m.cause.is_acceptance() {
            return;
        }
        if let Some(u) = &m.update_bar {
            self.counters[Counter::UnsupportedIe as usize] += u.skipped.types().len() as u64;
            self.report_update_bar(seid, u, up);
        }
        if m.flags.is_some_and(|f| f.0 & PfcpsrRspFlags::DROBU != 0) {
            let _ = up.apply(Change::DropBuffered { seid });
        }
    }

    /// Applies a Session Report Response's Update BAR to session `seid`
    /// and installs the rules; one naming another BAR is counted
    /// `unsupported_ie`, one the user plane refuses `user_plane_refused`.
    fn report_update_bar(&mut self, seid: Seid, u: &UpdateBarSrr, up: &mut impl UserPlane) {
        let Some(s) = self.get(seid) else {
            return;
        };
        let mut rules = s.rules.clone();
        let update = UpdateBar {
            bar_id: u.bar_id,
            downlink_data_notification_delay: u.downlink_data_notification_delay,
            suggested_buffering_packets_count: u.suggested_buffering_packets_count,
            skipped: Default::default(),
        };
        if session::update_bar(&mut rules, &update).is_err() {
            self.count(Counter::UnsupportedIe);
            return;
        }
        let installed = up.apply(Change::Install {
            seid,
            rules: &rules,
        });
        match (installed, self.get_mut(seid)) {
            (Ok(()), Some(s)) => s.rules = rules,
            _ => self.count(Counter::UserPlaneRefused),
        }
    }

    /// The outstanding request `seq` a response from `from` answers, if it
    /// is one of ours of the right kind (a Heartbeat Request, or a Session
    /// Report Request) sent to that host: no longer outstanding. Anything
    /// else is counted and changes nothing.
    fn answered(&mut self, from: SocketAddr, seq: u32, heartbeat: bool) -> Option<Purpose> {
        let Some(o) = self
            .outstanding
            .get(&seq)
            .filter(|o| matches!(o.purpose, Purpose::Heartbeat { .. }) == heartbeat)
        else {
            self.count(Counter::UnexpectedResponse);
            return None;
        };
        // By address: an SMF may answer from another port of its host.
        if o.destination.ip() != from.ip() {
            self.count(Counter::SpoofedResponse);
            return None;
        }
        self.outstanding.remove(&seq).map(|o| o.purpose)
    }

    /// An SMF's Recovery Time Stamp: a changed one means it restarted, and
    /// the sessions it had are gone.
    fn peer_recovery(&mut self, addr: IpAddr, recovery: u32, up: &mut impl UserPlane) {
        let Some(a) = self.associations.iter_mut().find(|a| a.addr == addr) else {
            return;
        };
        a.silent_since = None;
        if a.recovery == recovery {
            return;
        }
        a.recovery = recovery;
        let id = a.id;
        self.count(Counter::PeerRestarted);
        self.drop_sessions_of(id, up);
    }

    fn association_setup(
        &mut self,
        now: Instant,
        from: SocketAddr,
        seq: u32,
        m: AssociationSetupRequest,
        up: &mut impl UserPlane,
    ) {
        let addr = from.ip();
        let cause = match self.setup_refusal(addr, &m.node_id) {
            Some((cause, counter)) => {
                self.count(counter);
                cause
            }
            None => {
                match self.associations.iter().position(|a| a.addr == addr) {
                    Some(i) => {
                        self.associations[i].node_id = m.node_id;
                        // §6.2.6.2.2: the same Recovery Time Stamp keeps
                        // the sessions; a new one means the SMF restarted.
                        self.peer_recovery(addr, m.recovery_time_stamp.0, up);
                    }
                    None => {
                        let id = self.next_assoc_id;
                        self.next_assoc_id = self.next_assoc_id.wrapping_add(1).max(1);
                        self.associations.push(Association {
                            id,
                            node_id: m.node_id,
                            addr,
                            recovery: m.recovery_time_stamp.0,
                            heartbeat_due: now + self.config.heartbeat_interval.unwrap_or_default(),
                            heartbeat_seq: None,
                            silent_since: None,
                            sessions: 0,
                            cache: ResponseCache::new(self.config.response_cache_cap),
                        });
                    }
                }
                self.count(Counter::AssociationsSetUp);
                Cause::REQUEST_ACCEPTED
            }
        };
        let r = Message::AssociationSetupResponse(AssociationSetupResponse {
            node_id: self.config.node_id.clone(),
            cause,
            offending_ie: None,
            recovery_time_stamp: RecoveryTimeStamp(self.config.recovery_time_stamp),
            up_function_features: Some(UpFunctionFeatures::TEP),
        });
        self.respond(now, from, seq, msg_type::ASSOCIATION_SETUP_REQUEST, None, r);
    }

    /// Why an Association Setup from `addr` naming `node_id` is refused:
    /// a Node ID its `peers` entry does not allow; one associated from
    /// another address (§6.2.6.2.2 would overwrite that association, which
    /// would let any host on N4 take an SMF's sessions: it must be
    /// released first, by the SMF or by the grace after it falls silent);
    /// too many associations. Request rejected is the cause §8.2.1 leaves
    /// for a refusal no other cause describes; it says nothing of which
    /// rule refused.
    fn setup_refusal(&self, addr: IpAddr, node_id: &NodeId) -> Option<(Cause, Counter)> {
        if let Some(peers) = &self.config.peers {
            let allowed = peers
                .iter()
                .filter(|p| p.covers(addr))
                .any(|p| p.node_id.as_ref().is_none_or(|n| same_node(n, node_id)));
            if !allowed {
                return Some((Cause::REQUEST_REJECTED, Counter::NodeIdRefused));
            }
        }
        if self
            .associations
            .iter()
            .any(|a| a.addr != addr && same_node(&a.node_id, node_id))
        {
            return Some((Cause::REQUEST_REJECTED, Counter::AssociationTakeover));
        }
        if self.assoc_by_addr(addr).is_none()
            && self.associations.len() >= self.config.max_associations
        {
            return Some((Cause::NO_RESOURCES_AVAILABLE, Counter::TooManyAssociations));
        }
        None
    }

    /// Releases association `i` with its sessions and our requests to it.
    fn release(&mut self, i: usize, up: &mut impl UserPlane) -> Association {
        let id = self.associations[i].id;
        self.drop_sessions_of(id, up);
        self.outstanding
            .retain(|_, o| !matches!(o.purpose, Purpose::Heartbeat { assoc } if assoc == id));
        self.associations.swap_remove(i)
    }

    fn establish(
        &mut self,
        now: Instant,
        from: SocketAddr,
        seq: u32,
        m: SessionEstablishmentRequest,
        up: &mut impl UserPlane,
    ) {
        let t = msg_type::SESSION_ESTABLISHMENT_REQUEST;
        let cp_seid = m.cp_f_seid.seid;
        let Some(assoc) = self.assoc_by_addr(from.ip()).map(|a| a.id) else {
            self.count(Counter::NoAssociation);
            let r = self.rejection(
                t,
                Reject::simple(
                    Cause::NO_ESTABLISHED_PFCP_ASSOCIATION,
                    None,
                    Counter::NoAssociation,
                ),
            );
            self.respond(now, from, seq, t, Some(cp_seid), r);
            return;
        };
        if self.refuse_cp_addr(now, from, (seq, t, cp_seid), m.cp_f_seid.addr()) {
            return;
        }
        let full = if self.sessions >= self.config.max_sessions {
            Some(Counter::NoResources)
        } else if self
            .assoc_by_addr(from.ip())
            .is_some_and(|a| a.sessions >= self.config.max_sessions_per_association)
        {
            Some(Counter::AssociationQuota)
        } else {
            None
        };
        if let Some(counter) = full {
            self.count(counter);
            let r = self.rejection(
                t,
                Reject::simple(Cause::NO_RESOURCES_AVAILABLE, None, counter),
            );
            self.respond(now, from, seq, t, Some(cp_seid), r);
            return;
        }
        let mut rules = Rules::default();
        let mut pending = Pending::default();
        let (supported, unknown) = support::establishment(&m);
        self.counters[Counter::UnknownIe as usize] += u64::from(unknown);
        let scans = self.config.usage_scans;
        let built = supported.and_then(|()| {
            create_rules!(&mut rules, &mut pending, m, scans)?;
            for c in &m.create_bars {
                session::create_bar(&mut rules, c)?;
            }
            session::validate(&rules)
        });
        let created =
            match built.and_then(|()| self.take_teids(&mut rules, &pending, &Rules::default())) {
                Ok(c) => c,
                Err(e) => {
                    self.count(e.counter);
                    let r = self.rejection(t, e);
                    self.respond(now, from, seq, t, Some(cp_seid), r);
                    return;
                }
            };
        // A slot for the session: its SEID names slot and generation.
        let index = match self.free_slots.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot::default());
                self.slots.len() as u32 - 1
            }
        };
        // SEID 0 means none in a header (and one generation's image is 0).
        let mut seid = 0;
        while seid == 0 {
            let slot = &mut self.slots[index as usize];
            slot.generation = slot.generation.wrapping_add(1);
            let generation = slot.generation;
            seid = self.seid_of(index, generation);
        }
        rules.start_measuring(self.ntp(now), now);
        if let Err(why) = up.apply(Change::Install {
            seid,
            rules: &rules,
        }) {
            self.free_slots.push(index);
            for t in rules.teids() {
                self.teids.free(t);
            }
            let r = self.user_plane_refused(t, why);
            self.respond(now, from, seq, t, Some(cp_seid), r);
            return;
        }
        let cp_addr = m.cp_f_seid.addr().unwrap_or(from.ip());
        rules.shrink();
        self.slots[index as usize].session = Some(Session {
            assoc,
            cp_seid,
            cp_addr,
            rules,
            dl_reported: false,
            dl_due: None,
        });
        self.sessions += 1;
        if let Some(a) = self.assoc_mut(assoc) {
            a.sessions += 1;
        }
        self.watch(seid);
        self.count(Counter::SessionsEstablished);
        let (v4, v6) = self.up_seid_addrs(from.ip());
        let r = Message::SessionEstablishmentResponse(SessionEstablishmentResponse {
            node_id: self.config.node_id.clone(),
            cause: Cause::REQUEST_ACCEPTED,
            offending_ie: None,
            up_f_seid: Some(FSeid { seid, v4, v6 }),
            created_pdrs: created,
            failed_rule_id: None,
        });
        self.respond(now, from, seq, t, Some(cp_seid), r);
    }

    /// The UP F-SEID's address: the N4 address, else the N3 address of
    /// the SMF's family.
    fn up_seid_addrs(&self, peer: IpAddr) -> (Option<Ipv4Addr>, Option<Ipv6Addr>) {
        match self.config.n4 {
            Some(IpAddr::V4(a)) => return (Some(a), None),
            Some(IpAddr::V6(a)) => return (None, Some(a)),
            None => {}
        }
        match (peer, self.config.n3_v4, self.config.n3_v6) {
            (IpAddr::V6(_), _, Some(a)) => (None, Some(a)),
            (_, Some(a), _) => (Some(a), None),
            (_, None, a) => (None, a.or(Some(Ipv6Addr::LOCALHOST))),
        }
    }

    /// Reserves the SMF-chosen TEIDs and allocates the CHOOSE ones of
    /// `pending` into `rules`; on failure gives back what it took. `old`
    /// holds the session's rules before the edit (their TEIDs stay taken).
    fn take_teids(
        &mut self,
        rules: &mut Rules,
        pending: &Pending,
        old: &Rules,
    ) -> Result<Vec<CreatedPdr>, Reject> {
        let mut taken: Vec<u32> = vec![];
        let result = (|| {
            for a in &pending.assigned {
                if old.teids().any(|t| t == a.teid) {
                    continue;
                }
                let ours = rules.pdr(a.pdr).and_then(|p| p.local).is_some_and(|l| {
                    l.v4.is_none_or(|v| Some(v) == self.config.n3_v4)
                        && l.v6.is_none_or(|v| Some(v) == self.config.n3_v6)
                });
                if !ours || !self.teids.reserve(a.teid) {
                    return Err(Reject::rule(FailedRuleId::Pdr(a.pdr)));
                }
                taken.push(a.teid);
            }
            let mut by_choose_id: Vec<(u8, LocalFTeid)> = vec![];
            let mut created = vec![];
            for c in &pending.choose {
                let shared = c
                    .choose_id
                    .and_then(|id| by_choose_id.iter().find(|e| e.0 == id).map(|e| e.1));
                let local = match shared {
                    Some(l) => l,
                    None => {
                        let (want4, want6) = match (c.v4, c.v6) {
                            (false, false) => {
                                (self.config.n3_v4.is_some(), self.config.n3_v4.is_none())
                            }
                            w => w,
                        };
                        if (want4 && self.config.n3_v4.is_none())
                            || (want6 && self.config.n3_v6.is_none())
                        {
                            return Err(Reject::simple(
                                Cause::INVALID_F_TEID_ALLOCATION_OPTION,
                                Some(IeType::F_TEID),
                                Counter::InvalidFteidOption,
                            ));
                        }
                        let Some(teid) = self.teids.allocate() else {
                            return Err(Reject::simple(
                                Cause::NO_RESOURCES_AVAILABLE,
                                None,
                                Counter::NoResources,
                            ));
                        };
                        taken.push(teid);
                        let l = LocalFTeid {
                            teid,
                            v4: self.config.n3_v4.filter(|_| want4),
                            v6: self.config.n3_v6.filter(|_| want6),
                        };
                        if let Some(id) = c.choose_id {
                            by_choose_id.push((id, l));
                        }
                        l
                    }
                };
                if let Some(p) = rules.pdrs.iter_mut().find(|p| p.id == c.pdr) {
                    p.local = Some(local);
                }
                created.push(CreatedPdr {
                    pdr_id: PdrId(c.pdr),
                    local_f_teid: Some(FTeid::Assigned {
                        teid: local.teid,
                        v4: local.v4,
                        v6: local.v6,
                    }),
                });
            }
            Ok(created)
        })();
        if result.is_err() {
            for t in taken {
                self.teids.free(t);
            }
        }
        result
    }

    fn modify(
        &mut self,
        now: Instant,
        from: SocketAddr,
        seq: u32,
        seid: Seid,
        m: SessionModificationRequest,
        up: &mut impl UserPlane,
    ) {
        let t = msg_type::SESSION_MODIFICATION_REQUEST;
        let cp_seid = self.get(seid).expect("checked by the caller").cp_seid;
        let named = m.cp_f_seid.as_ref().and_then(|f| f.addr());
        if self.refuse_cp_addr(now, from, (seq, t, cp_seid), named) {
            return;
        }
        let s = self.get(seid).expect("checked by the caller");
        let old_rules = s.rules.clone();
        let mut rules = old_rules.clone();
        let mut pending = Pending::default();
        let mut removed_urrs = vec![];
        let (supported, unknown) = support::modification(&m);
        self.counters[Counter::UnknownIe as usize] += u64::from(unknown);
        let scans = self.config.usage_scans;
        let edited = supported.and_then(|()| {
            use crate::types::FailedRuleId as F;
            for r in &m.remove_pdrs {
                session::remove(&mut rules.pdrs, |p| p.id == r.pdr_id.0, F::Pdr(r.pdr_id.0))?;
            }
            for r in &m.remove_fars {
                session::remove(&mut rules.fars, |f| f.id == r.far_id.0, F::Far(r.far_id.0))?;
            }
            for r in &m.remove_qers {
                session::remove(&mut rules.qers, |q| q.id == r.qer_id.0, F::Qer(r.qer_id.0))?;
            }
            for r in &m.remove_urrs {
                removed_urrs.push(session::remove(
                    &mut rules.urrs,
                    |u| u.id == r.urr_id.0,
                    F::Urr(r.urr_id.0),
                )?);
            }
            if let Some(r) = &m.remove_bar {
                session::remove_bar(&mut rules, r.bar_id.0)?;
            }
            create_rules!(&mut rules, &mut pending, m, scans)?;
            for c in &m.create_bars {
                session::create_bar(&mut rules, c)?;
            }
            if let Some(u) = &m.update_bar {
                session::update_bar(&mut rules, u)?;
            }
            for u in &m.update_fars {
                session::update_far(&mut rules, u, &mut pending)?;
            }
            for u in &m.update_qers {
                session::update_qer(&mut rules, u)?;
            }
            for u in &m.update_urrs {
                session::update_urr(&mut rules, u, scans)?;
            }
            for u in &m.update_pdrs {
                session::update_pdr(&mut rules, u, &mut pending)?;
            }
            for q in &m.query_urrs {
                if rules.urr(q.urr_id.0).is_none() {
                    return Err(Reject::rule(F::Urr(q.urr_id.0)));
                }
            }
            session::validate(&rules)
        });
        let created = match edited.and_then(|()| self.take_teids(&mut rules, &pending, &old_rules))
        {
            Ok(c) => c,
            Err(e) => {
                self.count(e.counter);
                let r = self.rejection(t, e);
                self.respond(now, from, seq, t, Some(cp_seid), r);
                return;
            }
        };
        // Final reports of removed URRs, before their counters go.
        let at = self.ntp(now);
        let mut reports: Vec<UsageReportSmr> = final_reports(&mut removed_urrs, seid, up, at, now)
            .map(UsageReportSmr)
            .collect();
        rules.start_measuring(at, now);
        if let Err(why) = up.apply(Change::Install {
            seid,
            rules: &rules,
        }) {
            let kept: Vec<u32> = old_rules.teids().collect();
            for t in rules.teids().filter(|t| !kept.contains(t)) {
                self.teids.free(t);
            }
            let r = self.user_plane_refused(t, why);
            self.respond(now, from, seq, t, Some(cp_seid), r);
            return;
        }
        if m.flags.is_some_and(|f| f.0 & PfcpsmReqFlags::DROBU != 0) {
            let _ = up.apply(Change::DropBuffered { seid });
        }
        for e in &pending.end_markers {
            let _ = up.apply(Change::EndMarker {
                seid,
                far: e.far,
                old: e.old,
            });
            self.count(Counter::EndMarkers);
        }
        let now_teids: Vec<u32> = rules.teids().collect();
        for t in old_rules.teids().filter(|t| !now_teids.contains(t)) {
            self.teids.free(t);
        }
        let query_all = m.flags.is_some_and(|f| f.0 & PfcpsmReqFlags::QUARR != 0);
        for u in rules.urrs.iter_mut() {
            if query_all || m.query_urrs.iter().any(|q| q.urr_id.0 == u.id) {
                let usage = up.take_usage(seid, u.id);
                reports.push(UsageReportSmr(u.report(
                    usage,
                    UsageReportTrigger::IMMER,
                    at,
                    now,
                )));
            }
        }
        let s = self.get_mut(seid).expect("checked by the caller");
        rules.shrink();
        s.rules = rules;
        // A report still due stays due while its FAR buffers (the user
        // plane reports a session's first held packet only once); it is
        // judged again when due.
        s.dl_reported = s.dl_due.is_some_and(|(_, pdr)| notifies(&s.rules, pdr));
        let cancelled = !s.dl_reported && s.dl_due.take().is_some();
        if let Some(a) = m.cp_f_seid {
            s.cp_seid = a.seid;
            if let Some(addr) = a.addr() {
                s.cp_addr = addr;
            }
        }
        self.watch(seid);
        if cancelled {
            self.count(Counter::DlReportSuppressed);
        }
        self.count(Counter::SessionsModified);
        let r = Message::SessionModificationResponse(SessionModificationResponse {
            cause: Cause::REQUEST_ACCEPTED,
            offending_ie: None,
            created_pdrs: created,
            usage_reports: reports,
            failed_rule_id: None,
        });
        self.respond(now, from, seq, t, Some(cp_seid), r);
    }

    fn delete(
        &mut self,
        now: Instant,
        from: SocketAddr,
        seq: u32,
        seid: Seid,
        up: &mut impl UserPlane,
    ) {
        let t = msg_type::SESSION_DELETION_REQUEST;
        let cp_seid = self.get(seid).map_or(0, |s| s.cp_seid);
        let mut urrs = self
            .get(seid)
            .map(|s| s.rules.urrs.clone())
            .unwrap_or_default();
        let at = self.ntp(now);
        let reports = final_reports(&mut urrs, seid, up, at, now)
            .map(UsageReportSdr)
            .collect();
        self.remove_session(seid, up);
        self.count(Counter::SessionsDeleted);
        let r = Message::SessionDeletionResponse(SessionDeletionResponse {
            cause: Cause::REQUEST_ACCEPTED,
            offending_ie: None,
            usage_reports: reports,
        });
        self.respond(now, from, seq, t, Some(cp_seid), r);
    }

    fn remove_session(&mut self, seid: Seid, up: &mut impl UserPlane) {
        let Some(index) = self.slot_of(seid) else {
            return;
        };
        let Some(s) = self.slots[index].session.take() else {
            return;
        };
        if let Some(a) = self.assoc_mut(s.assoc) {
            a.sessions -= 1;
        }
        let _ = up.apply(Change::Remove { seid });
        for t in s.rules.teids() {
            self.teids.free(t);
        }
        self.free_slots.push(index as u32);
        self.sessions -= 1;
        self.watched.remove(&(index as u32));
        // Our reports for it are moot.
        self.outstanding
            .retain(|_, o| !matches!(o.purpose, Purpose::Report { seid: s2 } if s2 == seid));
    }

    fn drop_sessions_of(&mut self, assoc: u32, up: &mut impl UserPlane) {
        let doomed: Vec<Seid> = self
            .slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.session.as_ref().is_some_and(|s| s.assoc == assoc))
            .map(|(i, s)| self.seid_of(i as u32, s.generation))
            .collect();
        for seid in doomed {
            self.remove_session(seid, up);
        }
    }

    /// The answer to a request whose rules the user plane refused, counted:
    /// Rule creation/modification Failure naming the rule it cannot
    /// enforce, else No resources available.
    fn user_plane_refused(&mut self, t: u8, why: Refused) -> Message {
        let e = match why.rule {
            Some(rule) => Reject {
                cause: Cause::RULE_CREATION_MODIFICATION_FAILURE,
                offending: why.offending,
                failed_rule: Some(rule),
                counter: Counter::NotEnforceable,
            },
            None => Reject::simple(
                Cause::NO_RESOURCES_AVAILABLE,
                None,
                Counter::UserPlaneRefused,
            ),
        };
        self.count(e.counter);
        self.rejection(t, e)
    }

    fn rejection(&self, t: u8, e: Reject) -> Message {
        let mut m = Message::rejection(
            t,
            e.cause,
            e.offending,
            &self.config.node_id,
            RecoveryTimeStamp(self.config.recovery_time_stamp),
        )
        .expect("a request type");
        match &mut m {
            Message::SessionEstablishmentResponse(r) => r.failed_rule_id = e.failed_rule,
            Message::SessionModificationResponse(r) => r.failed_rule_id = e.failed_rule,
            _ => {}
        }
        m
    }

    /// Answers a request that could not be parsed (or whose header
    /// length was wrong): not cached, as nothing was applied.
    fn reject(
        &mut self,
        from: SocketAddr,
        p: &Packet<&[u8]>,
        t: u8,
        seid: Option<u64>,
        cause: Cause,
        offending: Option<IeType>,
    ) {
        let Some(m) = Message::rejection(
            t,
            cause,
            offending,
            &self.config.node_id,
            RecoveryTimeStamp(self.config.recovery_time_stamp),
        ) else {
            return;
        };
        let seid = msg_type::is_session(t).then(|| seid.unwrap_or(0));
        self.reply(from, p.sequence(), seid, m);
    }

    fn reply(&mut self, to: SocketAddr, seq: u32, seid: Option<u64>, m: Message) {
        let payload = PfcpRepr {
            seid,
            sequence: seq,
            priority: None,
            message: m,
        }
        .to_bytes();
        self.transmits.push_back(Transmit {
            destination: to,
            payload,
        });
    }

    /// Sends a response and keeps it for the request's retransmissions.
    fn respond(
        &mut self,
        now: Instant,
        to: SocketAddr,
        seq: u32,
        request_type: u8,
        seid: Option<u64>,
        m: Message,
    ) {
        let payload = PfcpRepr {
            seid: msg_type::is_session(request_type).then(|| seid.unwrap_or(0)),
            sequence: seq,
            priority: None,
            message: m,
        }
        .to_bytes();
        let expires = now + self.config.response_cache_time;
        let evicted =
            self.cache_of(to.ip())
                .insert(to, seq, request_type, payload.clone(), expires);
        self.counters[Counter::CacheEvicted as usize] += evicted as u64;
        self.transmits.push_back(Transmit {
            destination: to,
            payload,
        });
    }
}

/// The last usage reports of URRs that go (removed, or their session
/// deleted): what each counted since its last report.
fn final_reports<'a>(
    urrs: &'a mut [Urr],
    seid: Seid,
    up: &'a mut impl UserPlane,
    at: u32,
    now: Instant,
) -> impl Iterator<Item = crate::rules::UsageReport> + 'a {
    urrs.iter_mut().map(move |u| {
        u.report(
            up.take_usage(seid, u.id),
            UsageReportTrigger::TERMR,
            at,
            now,
        )
    })
}

/// Whether PDR `pdr`'s FAR buffers and notifies the SMF (BUFF, NOCP).
fn notifies(rules: &Rules, pdr: u16) -> bool {
    rules
        .pdr(pdr)
        .and_then(|p| rules.far(p.far))
        .is_some_and(|f| f.action == Action::Buffer { notify_cp: true })
}

/// The SEID of the first readable F-SEID among a message's IEs (the CP
/// F-SEID of an establishment that failed to parse elsewhere).
fn cp_seid_of(body: &[u8]) -> Option<u64> {
    use crate::ie::{Ies, Value};
    Ies::new(body, IeType(0))
        .map_while(Result::ok)
        .find(|ie| ie.ty == IeType::F_SEID && ie.enterprise.is_none())
        .and_then(|ie| FSeid::from_ie(ie.value).ok())
        .map(|f| f.seid)
}

/// The counter of an IE error's cause.
fn counter_for(cause: Cause) -> Counter {
    match cause {
        Cause::MANDATORY_IE_MISSING => Counter::MandatoryIeMissing,
        Cause::CONDITIONAL_IE_MISSING => Counter::ConditionalIeMissing,
        Cause::INVALID_LENGTH => Counter::InvalidLength,
        _ => Counter::MandatoryIeIncorrect,
    }
}

#[cfg(test)]
mod tests;

/// Of the URRs `spent` names, those whose volume quota is nearest its end
/// (the one the user plane armed, whose next packet did not fit) are used
/// up; their VOLQU reports go into `reports`. How many were.
fn exhaust_nearest_quota(
    urrs: &mut [Urr],
    spent: &[u32],
    (at, now): (u32, Instant),
    reports: &mut Vec<crate::rules::UsageReportSrr>,
) -> u64 {
    let left = |u: &Urr| {
        let q = u.volume_left().quota.into_iter().flatten().min();
        q.filter(|_| spent.contains(&u.id))
    };
    let Some(nearest) = urrs.iter().filter_map(left).min() else {
        return 0;
    };
    let mut n = 0;
    for u in urrs.iter_mut().filter(|u| left(u) == Some(nearest)) {
        let due = u.exhaust_volume();
        if due.report != 0 {
            let r = u.report(Usage::default(), due.report, at, now);
            reports.push(crate::rules::UsageReportSrr(r));
        }
        n += u64::from(due.exhausted);
    }
    n
}
