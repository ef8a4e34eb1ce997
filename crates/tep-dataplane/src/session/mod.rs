//! The UPF's sessions in the dataplane: what an SMF set up over PFCP,
//! compiled into lookups the per-packet path can afford.
//!
//! A GTP-U tunnel of the config (`[[tunnel]]`) is one peer and one TEID
//! each way. A 5G user plane has up to millions of PDU sessions that an SMF
//! creates, changes and deletes at run time, all on the UPF's few N3
//! addresses. They live here, apart from the tunnel table:
//!
//! - uplink (N3 → N6): a G-PDU to an N3 address is found by its TEID, and
//!   the QFI of its PDU Session Container where a PDR names one
//!   ([`SessionTable::uplink`]), and leaves only from the session's UE
//!   address ([`UeSource`]) and, optionally, its gNB;
//! - downlink (N6 → N3): an inner packet is found by its destination, the
//!   UE's IPv4 address, IPv6 address, or IPv6 /64 prefix
//!   ([`SessionTable::downlink`]);
//!
//! and either gives the session's slot, whose [`Session`] says what to do
//! each way (forward, drop, buffer) and where downlink packets go (the gNB
//! as a [`Peer`], its TEID, the QFI to put in the PDU Session Container).
//!
//! Each worker's pipeline holds a replica of the table and applies the
//! control plane's [`Change`]s between vectors ([`SessionTable::apply_pending`]):
//! lookups take no lock, and a change never stops a worker. The maps are
//! flat open-addressing arrays ([`flat`]) whose entries the lookup nodes
//! prefetch for a whole vector before they look, so that a million
//! sessions' tables, far larger than the caches, cost overlapped fetches. The price is a copy of the table per
//! worker; see [`SessionTable::bytes_per_session`] for what one costs.
//! (A table shared by all workers would need concurrent hash maps with
//! deferred reclamation on the per-packet path, as VPP's bihash does; a
//! replica per worker needs nothing of the kind, and host mode runs one
//! or two workers.)
//!
//! Usage (packets and bytes each way, for URRs) is counted per slot by
//! each worker into [`Usage`] blocks the control plane reads without
//! stopping anybody ([`control::Sessions::usage`]), and per rule where a
//! URR is on some of a direction's PDRs only ([`counters`]).

pub mod buffer;
pub mod control;
pub mod counters;
pub(crate) mod downlink;
pub(crate) mod flat;
pub(crate) mod n9;
pub mod rate;
pub mod rules;
pub(crate) mod uplink;
pub mod watch;

use crate::drop::DropReason;
use crate::memory::Table;
use core::net::IpAddr;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
pub(crate) use flat::staggered_runs;
use flat::{prefetch, FlatMap};
use rules::{FlowKey, RuleLines, RuleSet, Treatment};
use std::sync::{Arc, Mutex, OnceLock};

/// What a session does with its packets one way (a FAR's apply action).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Action {
    /// Forward: uplink to N6, downlink to the session's peer.
    Forward,
    /// Drop (counted as `session_drop`).
    #[default]
    Drop,
    /// Hold downlink packets for an idle UE until the FAR forwards again
    /// (bounded: [`buffer::Buffers`]); the first one held is reported so
    /// that the control plane can send a Downlink Data Report.
    Buffer,
    /// Drop: a quota of the session is used up (counted as
    /// `quota_exhausted`).
    QuotaExhausted,
}

/// A session's rules as the per-packet path needs them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Session {
    /// The N3 tunnel (an index of the tunnel table, a tunnel with
    /// `sessions` set, below [`MAX_N3_INDEX`]) whose address the
    /// session's F-TEID names: uplink packets arrive there, downlink
    /// packets leave from it.
    pub n3: u32,
    /// Its data network (`[[pfcp.network]]`, below [`MAX_NETWORKS`]): the
    /// N6 device its uplink packets leave by; its downlink keys are that
    /// network's.
    pub network: u8,
    /// Uplink action.
    pub uplink: Action,
    /// Downlink action.
    pub downlink: Action,
    /// Downlink: the gNB ([`Change::Peer`]) and its TEID (outer header
    /// creation).
    pub peer: u32,
    /// Downlink: the peer's TEID.
    pub teid: u32,
    /// Downlink: the QFI for a PDU Session Container (DL PDU SESSION
    /// INFORMATION), from the session's QER; None: no container.
    pub qfi: Option<u8>,
    /// Uplink: the inner source addresses the UE may use.
    pub ue: UeSource,
    /// Uplink: only from the peer (`[pfcp] n3_source_check`), where the
    /// session has one.
    pub gnb_source: bool,
    /// Uplink: packets over the rate of the session's uplink bucket
    /// ([`rate::Meters`], set by the control plane) are dropped.
    pub mbr_uplink: bool,
    /// Downlink: likewise, its downlink bucket.
    pub mbr_downlink: bool,
    /// Uplink: classified by the session's rules ([`rules`]) rather than
    /// the one `uplink` action.
    pub uplink_rules: bool,
    /// Downlink: classified by its rules rather than `downlink`, `peer`,
    /// `teid` and `qfi` (`peer` stays the session's gNB).
    pub downlink_rules: bool,
    /// Its packets are charged to its volume thresholds and quotas
    /// ([`watch`], armed by the control plane).
    pub watch: bool,
}

/// The inner source addresses a session's uplink packets may carry: its
/// UE's, as the UE IP Address of its PDRs gives them (IP address spoofing
/// prevention, TS 23.501 §5.8.2.x). Another source is dropped
/// (`ue_source_spoofed`), so that neither the UE nor anyone who guessed
/// its TEID sends as another address, counted in this session's usage.
///
/// A session with neither family (its PDRs name no UE address: an
/// Ethernet or Unstructured PDU session, which tep does not carry, N6
/// being IP) forwards no uplink packet: nothing says which source is the
/// UE's. Made by [`UeSource::new`], which refuses what a slot's line
/// cannot hold; kept as the slot keeps it, so that a packet's check reads
/// it as it is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UeSource {
    // The `UE_*` flags (as in `SlotUsage::actions`, shifted down).
    flags: u8,
    // An IPv6 address's upper half, or the /64 prefix.
    hi: u64,
    // An IPv6 address's lower half, or the IPv4 address.
    lo: u64,
}

/// A UE's IPv6 source: its address, or the /64 prefix the network
/// advertised to it (SLAAC).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ue6 {
    /// The address (/128).
    Addr(u128),
    /// The prefix (the upper 64 bits).
    Prefix(u64),
}

impl UeSource {
    /// The UE's IPv4 address and IPv6 address or prefix. None for an IPv4
    /// address with a /128 (160 bits: a slot's line has room for 128),
    /// which the caller refuses rather than check less than it was told
    /// (dual stack has a /64 prefix unless the SMF says otherwise,
    /// TS 29.244 §8.2.62).
    pub fn new(v4: Option<u32>, v6: Option<Ue6>) -> Option<UeSource> {
        let mut u = UeSource::default();
        if let Some(a) = v4 {
            u.flags |= UE_V4;
            u.lo = u64::from(a);
        }
        match v6 {
            Some(Ue6::Addr(_)) if v4.is_some() => return None,
            Some(Ue6::Addr(a)) => {
                u.flags |= UE_V6_ADDR;
                (u.hi, u.lo) = ((a >> 64) as u64, a as u64);
            }
            Some(Ue6::Prefix(p)) => {
                u.flags |= UE_V6_PREFIX;
                u.hi = p;
            }
            None => {}
        }
        Some(u)
    }

    /// The source of a UE whose packets the downlink finds by `keys`
    /// (the last of each family counts); None as for [`UeSource::new`].
    pub fn of_keys<'a>(keys: impl IntoIterator<Item = &'a UeKey>) -> Option<UeSource> {
        let (mut v4, mut v6) = (None, None);
        for k in keys {
            match *k {
                UeKey::V4(a) => v4 = Some(a),
                UeKey::V6(a) => v6 = Some(Ue6::Addr(a)),
                UeKey::V6Prefix(p) => v6 = Some(Ue6::Prefix(p)),
            }
        }
        UeSource::new(v4, v6)
    }

    /// Whether the IP packet `inner` comes from the UE. An inner packet
    /// that is not IP, or too short for its source address, is dropped
    /// for that, not passed.
    // Always: left to itself LLVM kept it out of the large `tunnel_decap`
    // loop, a call with the registers around it spilled and reloaded.
    #[inline(always)]
    pub fn check(&self, inner: &[u8]) -> Result<(), DropReason> {
        let word = |at: usize| -> Result<u64, DropReason> {
            let w: [u8; 8] = inner
                .get(at..at + 8)
                .and_then(|w| w.try_into().ok())
                .ok_or(DropReason::Truncated)?;
            Ok(u64::from_be_bytes(w))
        };
        let ok = match inner.first().map(|b| b >> 4) {
            // The source is the upper half of the word at 12 (source,
            // destination): the fixed header is 20 bytes.
            Some(4) => self.flags & UE_V4 != 0 && word(12)? >> 32 == self.lo,
            Some(6) => {
                let (hi, lo) = (word(8)?, word(16)?);
                self.flags & (UE_V6_ADDR | UE_V6_PREFIX) != 0
                    && hi == self.hi
                    && (self.flags & UE_V6_ADDR == 0 || lo == self.lo)
            }
            Some(_) => return Err(DropReason::NotIp),
            None => return Err(DropReason::Truncated),
        };
        if ok {
            Ok(())
        } else {
            Err(DropReason::UeSourceSpoofed)
        }
    }
}

/// A gNB (or any N3 peer) as seen from one N3 tunnel: where downlink
/// packets go. Sessions name peers by id, so that thousands of sessions on
/// one gNB share one outer header template.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Peer {
    /// The N3 tunnel the packets leave from.
    pub n3: u32,
    /// The peer's N3 address (same family as the tunnel's local one).
    pub addr: IpAddr,
    /// The outer DSCP of the packets sent to it (a FAR's Transport Level
    /// Marking); None: the N3 tunnel's. Part of the peer's identity, so
    /// that the mark is in its outer header template.
    pub dscp: Option<u8>,
}

/// What a downlink lookup is keyed by: a UE's address or IPv6 prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UeKey {
    /// A UE's IPv4 address (/32).
    V4(u32),
    /// A UE's IPv6 address (/128).
    V6(u128),
    /// A UE's IPv6 /64 prefix (the upper 64 bits), as SLAAC hands out.
    V6Prefix(u64),
}

/// QFI wildcard in an uplink key: a PDR that names no QFI.
const ANY_QFI: u64 = 0x80;

/// An uplink key packed (TEID << 8 | QFI), hashed by its TEID alone: the
/// keys of one TEID share a home in the map, so that one fetch brings
/// them all, and a lookup that finds none of them knows the TEID is
/// unknown (an Error Indication) rather than only its QFI (no PDR).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct TeidKey(u64);

impl TeidKey {
    fn teid(self) -> u64 {
        self.0 >> 8
    }
}

impl flat::Key for TeidKey {
    #[inline]
    fn hash(self) -> u64 {
        self.teid().wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }
}

/// An uplink lookup key: TEID and QFI (or none).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct UplinkKey {
    /// The TEID the UPF allocated (local F-TEID).
    pub teid: u32,
    /// The QFI the PDR matches, or None for any.
    pub qfi: Option<u8>,
}

impl UplinkKey {
    /// The key of a local F-TEID on the Core side (N9: G-PDUs from another
    /// UPF, the session's downlink): its QFI is [`N9_QFI`], a value no
    /// G-PDU's 6-bit QFI has, so that `uplink_match` never finds it and
    /// an N3 packet's lookup pays nothing for N9 ([`SessionTable::n9`]).
    pub fn n9(teid: u32) -> UplinkKey {
        UplinkKey {
            teid,
            qfi: Some(N9_QFI),
        }
    }

    /// Whether it is an N9 key ([`UplinkKey::n9`]).
    pub fn is_n9(self) -> bool {
        self.qfi == Some(N9_QFI)
    }

    fn packed(self) -> TeidKey {
        let low = match self.qfi {
            None => ANY_QFI,
            Some(N9_QFI) => ANY_QFI | u64::from(N9_QFI),
            Some(q) => u64::from(q & 0x3f),
        };
        TeidKey(u64::from(self.teid) << 8 | low)
    }
}

/// The QFI of an N9 key ([`UplinkKey::n9`]): outside the 6 bits of a QFI.
pub const N9_QFI: u8 = 0x40;

/// A session's [`RuleSet`] as a change carries it: compared by identity.
#[derive(Clone, Debug)]
pub struct SharedRules(pub Arc<RuleSet>);

impl PartialEq for SharedRules {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for SharedRules {}

/// One change to the tables, as the control plane sends it to every
/// worker. Slots and peer ids are the control plane's to allocate
/// ([`control::Sessions`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// Creates or replaces slot `slot`'s session.
    Session {
        /// The slot.
        slot: u32,
        /// Its rules.
        session: Session,
    },
    /// Sets slot `slot`'s rules (before the [`Change::Session`] that
    /// flags them), or clears them.
    Rules {
        /// The slot.
        slot: u32,
        /// Its rules.
        rules: Option<SharedRules>,
    },
    /// Removes slot `slot`'s session (its keys are unmapped by their own
    /// changes); what it buffered is dropped.
    Remove {
        /// The slot.
        slot: u32,
    },
    /// Maps an uplink key to a slot, or unmaps it.
    Uplink {
        /// The key.
        key: UplinkKey,
        /// The slot, or None to unmap.
        slot: Option<u32>,
    },
    /// Maps a UE address or prefix of a data network to a slot, or
    /// unmaps it.
    Downlink {
        /// The data network the key is in.
        network: u8,
        /// The key.
        key: UeKey,
        /// The slot, or None to unmap.
        slot: Option<u32>,
    },
    /// Sets or clears a peer.
    Peer {
        /// Its id.
        id: u32,
        /// The peer, or None once no session names it.
        peer: Option<Peer>,
    },
    /// Sends a GTP-U End Marker (TS 29.281 §7.3.2) from the N3 tunnel
    /// `n3` to `peer` with `teid`: the last packet on the old path of a
    /// handover (the SMF's SNDEM flag).
    EndMarker {
        /// The N3 tunnel it leaves from.
        n3: u32,
        /// The old peer's address.
        peer: IpAddr,
        /// The old peer's TEID.
        teid: u32,
    },
    /// Bounds the packets slot `slot` holds (its BAR's Suggested
    /// Buffering Packets Count; None: the worker's bound), for the
    /// pipeline's [`buffer::Buffers`].
    BufferBound {
        /// The slot.
        slot: u32,
        /// Most packets held.
        packets: Option<u32>,
    },
    /// Drops the packets slot `slot` holds (DROBU), before any change of
    /// the same publication would send them.
    DropBuffered {
        /// The slot.
        slot: u32,
    },
}

/// One slot of a worker's table, one cache line: the session's rules as
/// the packets need them and its usage counters, so that a packet of a
/// session among millions costs one line beyond its map entry. Written by
/// its worker only (the rules when it applies a change, the counters per
/// packet), so a relaxed load and store is enough (no read-modify-write);
/// the control plane reads the counters of every worker's.
#[derive(Debug)]
#[repr(C, align(64))]
pub struct SlotUsage {
    // The rules ([`Session`]), packed: read as one by `SessionTable::get`.
    // The N3 tunnel in the low `NETWORK_SHIFT` bits, the network above.
    n3: AtomicU32,
    peer: AtomicU32,
    teid: AtomicU32,
    // Uplink action, downlink action, QFI + 1 (0: none), and the `UE_*`
    // and `GNB_SOURCE` flags.
    actions: AtomicU32,
    // The UE's source ([`UeSource`]'s words).
    ue_hi: AtomicU64,
    ue_lo: AtomicU64,
    /// Uplink packets matched.
    pub ul_packets: AtomicU64,
    /// Uplink bytes (the inner packet, as TS 29.244's volume measurement
    /// counts the payload of the G-PDU).
    pub ul_bytes: AtomicU64,
    /// Downlink packets matched.
    pub dl_packets: AtomicU64,
    /// Downlink bytes (the inner packet).
    pub dl_bytes: AtomicU64,
}

impl SlotUsage {
    /// A slot with no session (and no usage).
    fn empty() -> SlotUsage {
        let u = SlotUsage {
            n3: AtomicU32::new(0),
            peer: AtomicU32::new(0),
            teid: AtomicU32::new(0),
            actions: AtomicU32::new(0),
            ue_hi: AtomicU64::new(0),
            ue_lo: AtomicU64::new(0),
            ul_packets: AtomicU64::new(0),
            ul_bytes: AtomicU64::new(0),
            dl_packets: AtomicU64::new(0),
            dl_bytes: AtomicU64::new(0),
        };
        u.set_session(&EMPTY);
        u
    }

    fn add(counter: &AtomicU64, n: u64) {
        counter.store(counter.load(Ordering::Relaxed) + n, Ordering::Relaxed);
    }

    #[inline]
    fn session(&self) -> Session {
        let a = self.actions.load(Ordering::Relaxed);
        let q = (a >> 16) & 0x7f;
        let ue = self.ue_source(a);
        let n3 = self.n3.load(Ordering::Relaxed);
        Session {
            n3: unpack_n3(n3),
            network: (n3 >> NETWORK_SHIFT) as u8,
            uplink: action_of(a),
            downlink: action_of(a >> 8),
            peer: self.peer.load(Ordering::Relaxed),
            teid: self.teid.load(Ordering::Relaxed),
            qfi: (q != 0).then(|| (q - 1) as u8),
            ue,
            gnb_source: a & GNB_SOURCE != 0,
            mbr_uplink: a & MBR_UPLINK != 0,
            mbr_downlink: a & MBR_DOWNLINK != 0,
            uplink_rules: a & UL_RULES != 0,
            downlink_rules: a & DL_RULES != 0,
            watch: a & WATCH != 0,
        }
    }

    /// The uplink's part of the rules, read alone: the N3 tunnel and the
    /// network (packed: [`unpack_n3`], `NETWORK_SHIFT`), and the actions
    /// word ([`action_of`] its uplink action, the `GNB_SOURCE` and `UE_*`
    /// flags). Not [`SlotUsage::session`]: in `gtpu-decap` the whole
    /// session, 40 bytes, went through the stack.
    #[inline]
    fn uplink_rules(&self) -> (u32, u32) {
        (
            self.n3.load(Ordering::Relaxed),
            self.actions.load(Ordering::Relaxed),
        )
    }

    #[inline]
    fn peer(&self) -> u32 {
        self.peer.load(Ordering::Relaxed)
    }

    /// The UE's source, its flags from the `actions` word.
    #[inline]
    fn ue_source(&self, actions: u32) -> UeSource {
        UeSource {
            flags: (actions >> UE_SHIFT) as u8 & UE_FLAGS,
            hi: self.ue_hi.load(Ordering::Relaxed),
            lo: self.ue_lo.load(Ordering::Relaxed),
        }
    }

    fn set_session(&self, s: &Session) {
        let code = |a: Action| match a {
            Action::Forward => 0u32,
            Action::Drop => 1,
            Action::Buffer => 2,
            Action::QuotaExhausted => 3,
        };
        let q = s.qfi.map_or(0, |q| u32::from(q) + 1);
        let mut flags = u32::from(s.ue.flags) << UE_SHIFT;
        for (on, bit) in [
            (s.gnb_source, GNB_SOURCE),
            (s.mbr_uplink, MBR_UPLINK),
            (s.mbr_downlink, MBR_DOWNLINK),
            (s.uplink_rules, UL_RULES),
            (s.downlink_rules, DL_RULES),
            (s.watch, WATCH),
        ] {
            if on {
                flags |= bit;
            }
        }
        let n3 = (s.n3 & N3_MASK) | u32::from(s.network) << NETWORK_SHIFT;
        self.n3.store(n3, Ordering::Relaxed);
        self.peer.store(s.peer, Ordering::Relaxed);
        self.teid.store(s.teid, Ordering::Relaxed);
        self.ue_hi.store(s.ue.hi, Ordering::Relaxed);
        self.ue_lo.store(s.ue.lo, Ordering::Relaxed);
        self.actions.store(
            code(s.uplink) | code(s.downlink) << 8 | q << 16 | flags,
            Ordering::Relaxed,
        );
    }

    /// Sets the worker's hints of the slot's classifiers (uplink,
    /// downlink: [`rules::RuleLines::set`]); the worker's alone to write,
    /// as the rest of the session is.
    fn set_hints(&self, (ul, dl): (u32, u32)) {
        let keep = !(HINT_MASK << UL_HINT_SHIFT | HINT_MASK << DL_HINT_SHIFT);
        let a = self.actions.load(Ordering::Relaxed) & keep;
        self.actions.store(
            a | (ul & HINT_MASK) << UL_HINT_SHIFT | (dl & HINT_MASK) << DL_HINT_SHIFT,
            Ordering::Relaxed,
        );
    }

    /// Zeroes the counters: the control plane does it when it reuses a
    /// slot, which no worker writes then (every worker applied the
    /// previous session's removal).
    pub fn reset(&self) {
        for c in [
            &self.ul_packets,
            &self.ul_bytes,
            &self.dl_packets,
            &self.dl_bytes,
        ] {
            c.store(0, Ordering::Relaxed);
        }
    }
}

/// A slot's packed N3 word: the N3 tunnel below, the data network above.
const NETWORK_SHIFT: u32 = 24;
const N3_MASK: u32 = (1 << NETWORK_SHIFT) - 1;
/// N3 tunnel indexes a session may have: below this (the empty session's
/// is all ones).
pub const MAX_N3_INDEX: u32 = N3_MASK;
/// Data networks at most.
pub const MAX_NETWORKS: usize = 255;

/// The N3 tunnel of a slot's packed N3 word (all ones: none).
#[inline]
pub(crate) fn unpack_n3(word: u32) -> u32 {
    match word & N3_MASK {
        N3_MASK => u32::MAX,
        n => n,
    }
}

/// The action coded in the low byte of `code` (as `set_session` codes it).
#[inline]
fn action_of(code: u32) -> Action {
    match code & ACTION_MASK {
        0 => Action::Forward,
        2 => Action::Buffer,
        3 => Action::QuotaExhausted,
        _ => Action::Drop,
    }
}

// An action's code: the low bits of its byte, the worker's hint of the
// slot's classifier that way above them (`rules::RuleLines::set`: 0 none,
// the rule line says).
const ACTION_MASK: u32 = 0x3;
const UL_HINT_SHIFT: u32 = 2;
const DL_HINT_SHIFT: u32 = 10;
const HINT_MASK: u32 = 0x3f;
// Charged to its volume limits (`Session::watch`): above the QFI + 1,
// which is at most 64.
pub(crate) const WATCH: u32 = 1 << 23;
// `UeSource::flags`, which `SlotUsage::actions` holds from `UE_SHIFT`
// on, above the actions and the QFI.
const UE_V4: u8 = 1;
const UE_V6_ADDR: u8 = 2;
const UE_V6_PREFIX: u8 = 4;
const UE_FLAGS: u8 = 7;
const UE_SHIFT: u32 = 24;
// Uplink only from the gNB (`Session::gnb_source`).
pub(crate) const GNB_SOURCE: u32 = 1 << 27;
// Metered each way (`Session::mbr_uplink`, `mbr_downlink`).
pub(crate) const MBR_UPLINK: u32 = 1 << 28;
const MBR_DOWNLINK: u32 = 1 << 29;
// Classified by the session's rules each way (`Session::uplink_rules`,
// `downlink_rules`).
pub(crate) const UL_RULES: u32 = 1 << 30;
const DL_RULES: u32 = 1 << 31;
/// A downlink packet's session as `session-lookup` leaves it for
/// `gtpu-encap` (the pool's per-packet session word): the slot in the low
/// bits (`max_sessions` is at most 2^24), the downlink rule that took it
/// above, plus one (0: the session's own treatment).
const RULE_SHIFT: u32 = 24;
const SLOT_MASK: u32 = (1 << RULE_SHIFT) - 1;
// The rule's bits (up to `MAX_RULES` + 1); the flags of `n9` above them.
const RULE_BITS: u32 = 0x1f;
const _: () = assert!(rules::MAX_RULES < RULE_BITS as usize);

// A slot's rules, UE source and counters share one cache line.
const _: () = assert!(core::mem::size_of::<SlotUsage>() == 64);

/// Slots per usage chunk, at most: chunks are allocated as slots are
/// first used, so that a table sized for a million sessions costs little
/// until they come. 32,768 slots are 4 MiB with the buckets and 2 MiB
/// without, whole huge pages ([`crate::memory`]); a table for fewer
/// sessions has one chunk of its size.
pub const USAGE_CHUNK: usize = 32_768;

/// One worker's usage counters, by slot, in chunks allocated on first use
/// (by the control plane, before it publishes a session in the chunk).
/// The first worker's also holds every session's buckets, which all the
/// workers share ([`WorkerLink::meters`]); the others' hold only lines.
#[derive(Debug)]
pub struct Usage {
    chunks: Chunks,
    // Slots per chunk: 1 << shift, USAGE_CHUNK at most. A shift, not a
    // count: a slot's chunk and place in it are read several times a
    // packet, and a division by a count the compiler cannot see cost a
    // `div` each time.
    shift: u32,
}

/// A usage block's chunks: with the buckets beside each line (the first
/// worker's), or the lines alone (64 bytes a slot less for every further
/// worker, at the price of a branch every worker predicts once).
#[derive(Debug)]
enum Chunks {
    WithMeters(Box<[OnceLock<Table<SlotLines>>]>),
    Lines(Box<[OnceLock<Table<SlotUsage>>]>),
}

/// A slot's line and its buckets' line side by side, in one page and one
/// 128-byte pair: a metered packet's session costs one page walk, not two,
/// and the buckets' line comes with the slot's (at a million sessions,
/// their line apart cost 12 % more per downlink packet in bursts of 8:
/// every random line of a table far beyond the TLB's reach is a page walk
/// too). Only the first worker's block has them: another worker's
/// metered packet still reads them on a page apart from its own line.
#[derive(Debug)]
#[repr(C, align(128))]
struct SlotLines {
    usage: SlotUsage,
    meters: rate::SlotMeters,
}

#[inline]
fn chunk_of<T>(chunks: &[OnceLock<Table<T>>], shift: u32, slot: u32) -> Option<&T> {
    let s = slot as usize;
    chunks
        .get(s >> shift)?
        .get()
        .map(|c| &c[s & ((1 << shift) - 1)])
}

fn chunk_bytes<T>(chunks: &[OnceLock<Table<T>>], shift: u32) -> usize {
    let used = chunks.iter().filter(|c| c.get().is_some()).count();
    (used << shift) * core::mem::size_of::<T>() + core::mem::size_of_val(chunks)
}

fn reserve_chunk<T>(chunks: &[OnceLock<Table<T>>], shift: u32, slot: u32, init: fn() -> T) {
    if let Some(c) = chunks.get(slot as usize >> shift) {
        c.get_or_init(|| Table::new(1 << shift, |_| init()));
    }
}

impl Usage {
    /// Room for `max_sessions` slots; `meters`: with the sessions' buckets
    /// (the first worker's block).
    pub fn new(max_sessions: u32, meters: bool) -> Usage {
        let chunk = (max_sessions.max(1) as usize)
            .next_power_of_two()
            .min(USAGE_CHUNK);
        let n = (max_sessions as usize).div_ceil(chunk);
        Usage {
            chunks: if meters {
                Chunks::WithMeters((0..n).map(|_| OnceLock::new()).collect())
            } else {
                Chunks::Lines((0..n).map(|_| OnceLock::new()).collect())
            },
            shift: chunk.trailing_zeros(),
        }
    }

    /// Slot `slot`'s counters; None beyond the table or in a chunk not
    /// allocated.
    #[inline]
    pub fn slot(&self, slot: u32) -> Option<&SlotUsage> {
        match &self.chunks {
            Chunks::WithMeters(c) => chunk_of(c, self.shift, slot).map(|l| &l.usage),
            Chunks::Lines(c) => chunk_of(c, self.shift, slot),
        }
    }

    /// Slot `slot`'s buckets (those of the first worker's block are
    /// shared); None as for [`slot`](Usage::slot), and in a block without.
    #[inline]
    pub fn meters(&self, slot: u32) -> Option<&rate::SlotMeters> {
        match &self.chunks {
            Chunks::WithMeters(c) => chunk_of(c, self.shift, slot).map(|l| &l.meters),
            Chunks::Lines(_) => None,
        }
    }

    /// Makes sure slot `slot`'s chunk exists (control plane).
    pub fn reserve(&self, slot: u32) {
        match &self.chunks {
            Chunks::WithMeters(c) => reserve_chunk(c, self.shift, slot, || SlotLines {
                usage: SlotUsage::empty(),
                meters: rate::SlotMeters::default(),
            }),
            Chunks::Lines(c) => reserve_chunk(c, self.shift, slot, SlotUsage::empty),
        }
    }

    /// Slots holding a session.
    pub fn sessions(&self) -> usize {
        let held = |u: &SlotUsage| u.n3.load(Ordering::Relaxed) != u32::MAX;
        match &self.chunks {
            Chunks::WithMeters(c) => c
                .iter()
                .filter_map(OnceLock::get)
                .flat_map(|c| c.iter())
                .filter(|l| held(&l.usage))
                .count(),
            Chunks::Lines(c) => c
                .iter()
                .filter_map(OnceLock::get)
                .flat_map(|c| c.iter())
                .filter(|u| held(u))
                .count(),
        }
    }

    /// Bytes allocated for counters and buckets.
    pub fn bytes(&self) -> usize {
        match &self.chunks {
            Chunks::WithMeters(c) => chunk_bytes(c, self.shift),
            Chunks::Lines(c) => chunk_bytes(c, self.shift),
        }
    }
}

/// The queue of changes from the control plane to one worker, and how far
/// the worker got: the control plane reuses a removed session's slot only
/// once every worker applied the removal.
#[derive(Debug, Default)]
pub struct ChangeQueue {
    pending: AtomicBool,
    changes: Mutex<Vec<Change>>,
    /// The number of changes the worker applied so far.
    applied: AtomicU64,
}

impl ChangeQueue {
    /// Queues changes (control plane).
    pub fn push(&self, changes: &[Change]) {
        let mut q = self.changes.lock().unwrap_or_else(|e| e.into_inner());
        q.extend_from_slice(changes);
        self.pending.store(true, Ordering::Release);
    }

    /// The number of changes the worker applied so far.
    pub fn applied(&self) -> u64 {
        self.applied.load(Ordering::Acquire)
    }
}

/// A worker's link to the control plane: its queue and its usage block.
#[derive(Debug, Clone)]
pub struct WorkerLink {
    /// Changes for this worker.
    pub queue: Arc<ChangeQueue>,
    /// Its usage counters.
    pub usage: Arc<Usage>,
    /// The sessions' buckets, for all the workers: the first worker's
    /// usage block, which holds them beside its lines ([`Usage::meters`]).
    pub meters: Arc<Usage>,
    /// Its rules' usage counters ([`counters`]).
    pub rule_usage: Arc<counters::RuleUsage>,
    /// The sessions' volume limits (one for all the workers).
    pub watches: Arc<watch::Watches>,
    /// The volume limits of URRs on only some PDRs, and the rules'
    /// lines (one for all the workers).
    pub urr_watches: Arc<watch::UrrWatches>,
    /// Whether it is the only worker: the buckets are then its own to
    /// charge, without a compare-and-swap ([`rate::Bucket::admit_run`]).
    pub lone: bool,
}

/// A data network's downlink maps: UE addresses may repeat across
/// networks, never within one.
#[derive(Debug, Default)]
struct UeMaps {
    ue4: FlatMap<u32>,
    ue6: FlatMap<u128>,
    ue6_64: FlatMap<u64>,
}

impl UeMaps {
    fn bytes(&self) -> usize {
        self.ue4.bytes() + self.ue6.bytes() + self.ue6_64.bytes()
    }

    /// The session of `dst` (IPv4 in the low 32 bits when `v6` is
    /// false): the UE's address, else (IPv6) its /64.
    #[inline]
    fn find(&self, v6: bool, dst: u128) -> Option<u32> {
        if !v6 {
            return self.ue4.get(dst as u32);
        }
        if let Some(s) = self.ue6.get(dst) {
            return Some(s);
        }
        self.ue6_64.get((dst >> 64) as u64)
    }

    /// Maps `key` to `v` (None: unmaps it); the value it had.
    fn set(&mut self, key: UeKey, v: Option<u32>) -> Option<u32> {
        match (key, v) {
            (UeKey::V4(a), Some(s)) => self.ue4.insert(a, s),
            (UeKey::V4(a), None) => self.ue4.remove(a),
            (UeKey::V6(a), Some(s)) => self.ue6.insert(a, s),
            (UeKey::V6(a), None) => self.ue6.remove(a),
            (UeKey::V6Prefix(p), Some(s)) => self.ue6_64.insert(p, s),
            (UeKey::V6Prefix(p), None) => self.ue6_64.remove(p),
        }
    }

    /// As owner counts: adds `delta` networks to `key`'s, unmapped at 0.
    fn own(&mut self, key: UeKey, delta: i64) {
        let had = match key {
            UeKey::V4(a) => self.ue4.get(a),
            UeKey::V6(a) => self.ue6.get(a),
            UeKey::V6Prefix(p) => self.ue6_64.get(p),
        };
        let n = i64::from(had.unwrap_or(0)) + delta;
        self.set(key, u32::try_from(n).ok().filter(|&n| n > 0));
    }

    /// Adds one owner to each of `self`'s keys in `owners`.
    fn count_into(&mut self, owners: &mut UeMaps) {
        self.ue4.retain(|a, _| {
            owners.own(UeKey::V4(a), 1);
            true
        });
        self.ue6.retain(|a, _| {
            owners.own(UeKey::V6(a), 1);
            true
        });
        self.ue6_64.retain(|p, _| {
            owners.own(UeKey::V6Prefix(p), 1);
            true
        });
    }
}

/// One worker's replica of the session table.
#[derive(Debug)]
pub struct SessionTable {
    uplink: FlatMap<TeidKey>,
    // The current network's downlink maps, in the table itself as a lone
    // network's were: a lookup reads no more than before (through a
    // vector by network, a million sessions' downlink cost 5 % more).
    ue: UeMaps,
    // The other networks' maps, by network; the current one's entry is
    // empty (its maps are `ue`), as is `ue` when the current network has
    // no entry.
    parked: Vec<UeMaps>,
    // With several networks: by UE address (or /64), how many networks
    // have a session for it, so that a downlink miss tells whether
    // another network has the address in one lookup, not one per
    // network (a sender spraying unknown addresses would make every miss
    // pay up to 63). None while one network has maps (nothing to ask).
    owners: Option<UeMaps>,
    // The network the downlink packets being looked up came from (the
    // device a batch was read from): `set_network`.
    network: usize,
    peers: Vec<Option<Peer>>,
    // By slot: the rules of sessions flagged `uplink_rules` or
    // `downlink_rules`.
    rules: RuleLines,
    link: WorkerLink,
    // Taken out of the queue under its lock, applied without it.
    inbox: Vec<Change>,
    /// End Markers to send (drained by the pipeline).
    pub(crate) end_markers: Vec<(u32, IpAddr, u32)>,
    // A packet charged crossed a volume limit: the control plane is to
    // be woken ([`SessionTable::wake_on_crossing`]).
    crossed: core::cell::Cell<bool>,
    // The last uplink packet classified: its slot, key and rule, so that
    // a burst of one flow is classified once (as the downlink's `last`);
    // forgotten whenever a slot's rules change.
    last_uplink: core::cell::Cell<Option<(u32, FlowKey, Option<u8>)>>,
}

/// A slot with no session.
const EMPTY: Session = Session {
    n3: u32::MAX,
    network: u8::MAX,
    uplink: Action::Drop,
    downlink: Action::Drop,
    peer: u32::MAX,
    teid: 0,
    qfi: None,
    ue: UeSource {
        flags: 0,
        hi: 0,
        lo: 0,
    },
    gnb_source: false,
    mbr_uplink: false,
    mbr_downlink: false,
    uplink_rules: false,
    downlink_rules: false,
    watch: false,
};

impl SessionTable {
    /// An empty replica fed by `link`.
    pub fn new(link: WorkerLink) -> SessionTable {
        SessionTable {
            uplink: FlatMap::default(),
            ue: UeMaps::default(),
            parked: vec![UeMaps::default()],
            owners: None,
            network: 0,
            peers: Vec::new(),
            rules: RuleLines::default(),
            link,
            inbox: Vec::new(),
            end_markers: Vec::new(),
            crossed: core::cell::Cell::new(false),
            last_uplink: core::cell::Cell::new(None),
        }
    }

    /// The session of an uplink G-PDU: by TEID and QFI, else by TEID alone
    /// (a PDR without a QFI). `Err(true)`: PDRs name the TEID, none takes
    /// the QFI; `Err(false)`: none names the TEID. One pass over the
    /// TEID's keys, which share a home ([`TeidKey`]).
    #[inline]
    pub fn uplink_match(&self, teid: u32, qfi: Option<u8>) -> Result<u32, bool> {
        // Packed as `UplinkKey::packed` does, a G-PDU's 6-bit QFI never
        // taken for the N9 mark.
        let any = TeidKey(u64::from(teid) << 8 | ANY_QFI);
        let exact = qfi.map(|q| TeidKey(u64::from(teid) << 8 | u64::from(q & 0x3f)));
        let (mut hit, mut wildcard, mut known) = (None, None, false);
        self.uplink.scan(any, |k, v| {
            if Some(k) == exact {
                hit = Some(v);
                return true;
            }
            if k == any {
                wildcard = Some(v);
                // Nothing more to find without a QFI to match exactly.
                return exact.is_none();
            }
            known |= k.teid() == any.teid();
            false
        });
        match hit.or(wildcard) {
            Some(s) => Ok(s),
            None => Err(known),
        }
    }

    /// [`uplink_match`](SessionTable::uplink_match)'s session, if any.
    #[inline]
    pub fn uplink(&self, teid: u32, qfi: Option<u8>) -> Option<u32> {
        self.uplink_match(teid, qfi).ok()
    }

    /// Starts fetching what [`uplink`](SessionTable::uplink) reads: the
    /// home of the TEID's keys.
    #[inline]
    pub fn prefetch_uplink(&self, teid: u32, _qfi: Option<u8>) {
        self.uplink.prefetch(UplinkKey { teid, qfi: None }.packed());
    }

    /// The data network of the downlink packets looked up next (until
    /// set again): the network whose N6 device they were read from.
    #[inline]
    pub fn set_network(&mut self, network: u8) {
        let n = usize::from(network);
        if n == self.network {
            return;
        }
        if let Some(parked) = self.parked.get_mut(self.network) {
            core::mem::swap(&mut self.ue, parked);
        }
        self.network = n;
        if let Some(parked) = self.parked.get_mut(n) {
            core::mem::swap(&mut self.ue, parked);
        }
    }

    /// The current network ([`set_network`](SessionTable::set_network)).
    pub fn network(&self) -> u8 {
        self.network as u8
    }

    /// Starts fetching what [`downlink`](SessionTable::downlink) reads
    /// first.
    #[inline]
    pub fn prefetch_downlink(&self, v6: bool, dst: u128) {
        if v6 {
            self.ue.ue6.prefetch(dst);
        } else {
            self.ue.ue4.prefetch(dst as u32);
        }
    }

    /// Starts fetching slot `slot`'s line (its session and usage) and
    /// its rules' line where a packet may read one
    /// ([`rules::RuleLines::any_read`]), both found by the slot alone so
    /// that they come in parallel; `buckets`: its buckets' line
    /// too (shared by the workers, it cannot sit in a worker's line, but
    /// sits beside the first worker's: [`Usage::meters`]). The downlink
    /// asks for the buckets, the uplink does not: measured at a million
    /// sessions, burst 1, the uplink's metered packets took 188 ns with
    /// the fetch and 178 without (the line beside the slot's comes with
    /// it, and one more fetch in flight a packet held back the others),
    /// the downlink's 222 with and 279 without.
    #[inline]
    pub fn prefetch_slot(&self, slot: u32, buckets: bool) {
        if let Some(u) = self.link.usage.slot(slot) {
            prefetch(u);
        }
        if self.rules.any_read() {
            self.rules.prefetch(slot);
        }
        if buckets {
            if let Some(m) = self.link.meters.meters(slot) {
                prefetch(m);
            }
        }
    }

    /// The session of a downlink packet to `dst` (IPv4 in the low 32 bits
    /// when `v6` is false) in the current network
    /// ([`set_network`](SessionTable::set_network)): the UE's address,
    /// else (IPv6) its /64.
    #[inline]
    pub fn downlink(&self, v6: bool, dst: u128) -> Option<u32> {
        self.ue.find(v6, dst)
    }

    /// Whether a network other than the current one has a session for
    /// `dst` (as [`downlink`](SessionTable::downlink) finds it), asked
    /// after the current one missed, so that a packet that came in on
    /// the wrong network's device is counted as such: one lookup in the
    /// owner counts, any owner being another network.
    pub fn in_other_network(&self, v6: bool, dst: u128) -> bool {
        self.owners
            .as_ref()
            .is_some_and(|o| o.find(v6, dst).is_some())
    }

    /// Slot `slot`'s session (an empty one, which drops, if none).
    #[inline]
    pub fn get(&self, slot: u32) -> Session {
        self.link.usage.slot(slot).map_or(EMPTY, SlotUsage::session)
    }

    /// A peer.
    #[inline]
    pub fn peer(&self, id: u32) -> Option<Peer> {
        self.peers.get(id as usize).copied().flatten()
    }

    /// The peers' slots (set or not): their number bounds peer ids.
    pub fn peer_slots(&self) -> usize {
        self.peers.len()
    }

    /// Whether a packet of `bytes` of slot `slot` at `now_ns` is within
    /// the rate of its bucket one way (`uplink` or not); false where the
    /// slot has no buckets, which a session flagged metered always has.
    #[inline]
    pub fn admit(&self, slot: u32, uplink: bool, bytes: usize, now_ns: u64) -> bool {
        self.link.meters.meters(slot).is_some_and(|m| {
            let b = if uplink { &m.uplink } else { &m.downlink };
            b.admit(bytes, now_ns, self.shared_buckets())
        })
    }

    /// Whether other workers charge the buckets too.
    #[inline]
    pub(crate) fn shared_buckets(&self) -> bool {
        !self.link.lone
    }

    /// How many of a run of slot `slot`'s downlink packets of `bytes`
    /// each at `now_ns` are within the rate of its bucket: the run's first
    /// ones, charged at once ([`rate::Bucket::admit_run`]); none where the
    /// slot has no buckets.
    #[inline]
    pub fn admit_downlink_run(&self, slot: u32, bytes: &[usize], now_ns: u64) -> usize {
        self.link.meters.meters(slot).map_or(0, |m| {
            m.downlink.admit_run(bytes, now_ns, self.shared_buckets())
        })
    }

    /// Whether slot `slot`'s session meters its uplink, classifies it by
    /// rules or charges it to volume limits: then each datagram is its own (no train merges them).
    #[inline]
    pub fn mbr_uplink(&self, slot: u32) -> bool {
        self.link.usage.slot(slot).is_some_and(|u| {
            u.actions.load(Ordering::Relaxed) & (MBR_UPLINK | UL_RULES | WATCH) != 0
        })
    }

    /// Charges a packet of `bytes` of slot `slot`, flagged watched, to
    /// its volume limits one way ([`watch`]).
    #[inline]
    pub fn charge_volume(&self, slot: u32, uplink: bool, bytes: usize) -> Result<(), DropReason> {
        let mut crossed = false;
        let c = self
            .link
            .watches
            .charge_quietly(slot, uplink, bytes, &mut crossed);
        self.verdict(c, crossed)
    }

    /// Charges a packet of `bytes` that a rule flagged `watched`, with
    /// usage counter `counter`, took one way to its URRs' volume lines
    /// ([`watch::UrrWatches`]).
    #[inline]
    pub fn charge_rule_volume(
        &self,
        counter: u32,
        uplink: bool,
        bytes: usize,
    ) -> Result<(), DropReason> {
        let mut crossed = false;
        let c = self
            .link
            .urr_watches
            .charge(counter, uplink, bytes, &mut crossed);
        self.verdict(c, crossed)
    }

    /// A charge's verdict; a crossing noted for [`wake_on_crossing`](SessionTable::wake_on_crossing).
    #[inline]
    fn verdict(&self, c: watch::Charged, crossed: bool) -> Result<(), DropReason> {
        if crossed {
            self.crossed.set(true);
        }
        match c {
            watch::Charged::Pass => Ok(()),
            watch::Charged::QuotaExhausted => Err(DropReason::QuotaExhausted),
        }
    }

    /// Wakes the control plane if a packet charged since the last call
    /// crossed a volume limit (a node calls it once its vector's packets
    /// are counted: woken earlier, the control plane could read the
    /// counts without the crossing packet).
    #[inline]
    pub fn wake_on_crossing(&self) {
        if self.crossed.replace(false) {
            self.link.watches.wake();
        }
    }

    /// Counts a matched uplink packet of `bytes`.
    #[inline]
    pub fn count_uplink(&self, slot: u32, bytes: usize) {
        if let Some(u) = self.link.usage.slot(slot) {
            SlotUsage::add(&u.ul_packets, 1);
            SlotUsage::add(&u.ul_bytes, bytes as u64);
        }
    }

    /// Counts a matched downlink packet of `bytes`.
    #[inline]
    pub fn count_downlink(&self, slot: u32, bytes: usize) {
        if let Some(u) = self.link.usage.slot(slot) {
            SlotUsage::add(&u.dl_packets, 1);
            SlotUsage::add(&u.dl_bytes, bytes as u64);
        }
    }

    /// Counts a packet of `bytes` that a rule with counter `counter` took
    /// ([`counters`]; none for [`counters::NO_COUNTER`]).
    #[inline]
    pub fn count_rule(&self, counter: u32, bytes: usize) {
        // Most rules have none: not even the counters' table is read.
        if counter != counters::NO_COUNTER {
            self.link.rule_usage.count(counter, bytes);
        }
    }

    /// Takes the control plane's changes, if any, and applies them; returns
    /// them (for the caller to follow up: buffered packets to release or
    /// drop) in `applied`, which is cleared first. One atomic load when
    /// nothing is pending.
    pub fn apply_pending(&mut self, applied: &mut Vec<Change>) {
        applied.clear();
        if !self.link.queue.pending.load(Ordering::Acquire) {
            return;
        }
        {
            let mut q = self
                .link
                .queue
                .changes
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            core::mem::swap(&mut *q, &mut self.inbox);
            self.link.queue.pending.store(false, Ordering::Release);
        }
        let n = self.inbox.len() as u64;
        let inbox = core::mem::take(&mut self.inbox);
        for c in &inbox {
            self.apply(c.clone());
        }
        self.inbox = inbox;
        applied.append(&mut self.inbox);
        self.link.queue.applied.fetch_add(n, Ordering::Release);
    }

    /// Applies one change.
    pub fn apply(&mut self, change: Change) {
        match change {
            Change::Session { slot, session } => {
                // The control plane reserved the slot's chunk before it
                // published the change.
                if let Some(u) = self.link.usage.slot(slot) {
                    u.set_session(&session);
                }
                // Its rules again: which of them its own treatment serves.
                if let Some(set) = self.rules[slot as usize].clone() {
                    self.set_rules(slot, Some(set));
                }
            }
            Change::Remove { slot } => {
                if let Some(u) = self.link.usage.slot(slot) {
                    u.set_session(&EMPTY);
                }
                self.set_rules(slot, None);
            }
            Change::Rules { slot, rules } => self.set_rules(slot, rules.map(|r| r.0)),
            Change::Uplink { key, slot } => {
                let k = key.packed();
                match slot {
                    Some(s) => {
                        self.uplink.insert(k, s);
                    }
                    None => {
                        self.uplink.remove(k);
                    }
                }
            }
            Change::Downlink { network, key, slot } => self.set_downlink(network, key, slot),
            Change::Peer { id, peer } => {
                let i = id as usize;
                if self.peers.len() <= i {
                    self.peers.resize(i + 1, None);
                }
                self.peers[i] = peer;
            }
            Change::EndMarker { n3, peer, teid } => self.end_markers.push((n3, peer, teid)),
            // The pipeline's buffers, not the table's.
            Change::BufferBound { .. } | Change::DropBuffered { .. } => {}
        }
    }

    /// Maps (or unmaps) downlink key `key` of network `network`, and
    /// counts its owners once a second network has maps.
    fn set_downlink(&mut self, network: u8, key: UeKey, slot: Option<u32>) {
        let n = usize::from(network);
        if self.parked.len() <= n {
            self.parked.resize_with(n + 1, UeMaps::default);
        }
        if n > 0 && self.owners.is_none() {
            let mut owners = UeMaps::default();
            self.ue.count_into(&mut owners);
            for m in &mut self.parked {
                m.count_into(&mut owners);
            }
            self.owners = Some(owners);
        }
        let m = if n == self.network {
            &mut self.ue
        } else {
            &mut self.parked[n]
        };
        let had = m.set(key, slot).is_some();
        if let Some(o) = self.owners.as_mut() {
            match (had, slot.is_some()) {
                (false, true) => o.own(key, 1),
                (true, false) => o.own(key, -1),
                _ => {}
            }
        }
    }

    fn set_rules(&mut self, slot: u32, rules: Option<Arc<RuleSet>>) {
        self.last_uplink.set(None);
        let s = self.get(slot);
        let own = rules::Own {
            uplink: s.uplink,
            downlink: (s.downlink, s.peer, s.teid, s.qfi),
        };
        let hints = self.rules.set(slot, rules, &own);
        if let Some(u) = self.link.usage.slot(slot) {
            u.set_hints(hints);
        }
    }

    /// The uplink rule of the IP packet `inner` of slot `slot`'s session
    /// (flagged `uplink_rules` in `actions`, its line's word), its
    /// G-PDU's QFI `qfi`, if one of its rules takes it, and the rule's
    /// treatment: None where it is the session's own ([`rules::Own`]),
    /// which then reads no rule line.
    #[inline]
    fn uplink_rule(
        &self,
        slot: u32,
        actions: u32,
        inner: &[u8],
        qfi: Option<u8>,
    ) -> Option<(u8, Option<&Treatment>)> {
        let hint = (actions >> UL_HINT_SHIFT) & HINT_MASK;
        let (c, near) = self.rules.class_of(slot, true, hint)?;
        let k = FlowKey::of(inner, true, qfi)?;
        let r = match self.last_uplink.get() {
            Some((s, key, r)) if s == slot && key == k => r,
            _ => {
                let r = c.classify(&k);
                self.last_uplink.set(Some((slot, k, r)));
                r
            }
        }?;
        if rules::is_own(near, r) {
            return Some((r, None));
        }
        Some((r, Some(self.rules.treatment(slot, true, r)?)))
    }

    /// The session whose N9 F-TEID is `teid` ([`UplinkKey::n9`]): looked
    /// up only after the N3 lookup found nothing.
    #[inline]
    pub fn n9(&self, teid: u32) -> Option<u32> {
        self.uplink.get(UplinkKey::n9(teid).packed())
    }

    /// Whether any session's uplink packets are worth classifying ahead
    /// (a treatment its rule line does not hold, or a rule's bucket).
    #[inline]
    pub(crate) fn any_uplink_ahead(&self) -> bool {
        self.rules.any_uplink_ahead()
    }

    /// Starts fetching the treatment of the uplink rule that takes the IP
    /// packet `inner` (QFI `qfi`) of slot `slot`'s session, if any, where
    /// its line does not hold it.
    #[inline]
    pub(crate) fn prefetch_uplink_rule(&self, slot: u32, inner: &[u8], qfi: u8) {
        if !self.rules.ahead(slot, true) {
            return;
        }
        let c = self.rules.classifier(slot, true);
        let k = FlowKey::of(inner, true, Some(qfi));
        if let Some(r) = c.zip(k).and_then(|(c, k)| c.classify(&k)) {
            self.rules.prefetch_treatment(slot, true, r);
        }
    }

    /// The downlink rule of the IP packet `inner` of slot `slot`'s
    /// session: None where the session has no downlink rules, Some(None)
    /// where none takes it; the rule with [`rules::OWN_RULE`] set where
    /// its treatment is the session's own, which reads no rule line (as
    /// its classifier is found by the hint in the slot's line). Another
    /// rule's treatment is fetched (read by
    /// [`downlink_rule`](SessionTable::downlink_rule) a little later).
    /// `last` is the previous packet's slot, key and rule, and becomes
    /// this one's: a packet of the same session with the same key (a
    /// burst of one flow) takes the same rule without classifying again.
    #[inline]
    fn classify_downlink(
        &self,
        slot: u32,
        inner: &[u8],
        last: &mut Option<(u32, FlowKey, Option<u8>)>,
    ) -> Option<Option<u8>> {
        if self.rules.is_empty() {
            return None;
        }
        let a = self.link.usage.slot(slot)?.actions.load(Ordering::Relaxed);
        if a & DL_RULES == 0 {
            return None;
        }
        let hint = (a >> DL_HINT_SHIFT) & HINT_MASK;
        let (c, near) = self.rules.class_of(slot, false, hint)?;
        // Not IP (or too short): no rule takes it.
        let Some(k) = FlowKey::of(inner, false, None) else {
            *last = None;
            return Some(None);
        };
        if let Some((s, key, r)) = *last {
            if s == slot && key == k {
                return Some(r);
            }
        }
        let r = match c.classify(&k) {
            Some(r) if rules::is_own(near, r) => Some(r | rules::OWN_RULE),
            Some(r) => {
                if self.rules.ahead(slot, false) {
                    self.rules.prefetch_treatment(slot, false, r);
                }
                Some(r)
            }
            None => None,
        };
        *last = Some((slot, k, r));
        Some(r)
    }

    /// Downlink rule `rule` of slot `slot`'s session (as
    /// [`classify_downlink`](SessionTable::classify_downlink) found it),
    /// and the word `gtpu-encap` gets ([`RULE_SHIFT`]).
    #[inline]
    fn downlink_rule(&self, slot: u32, rule: u8) -> Option<(u32, &Treatment)> {
        let t = self.rules.treatment(slot, false, rule)?;
        Some((slot | (u32::from(rule) + 1) << RULE_SHIFT, t))
    }

    /// The outer header of a downlink packet whose session word (as
    /// `session-lookup` set it) is `word`: the peer's id, TEID and QFI.
    #[inline]
    pub(crate) fn downlink_header(&self, word: u32) -> (u32, u32, (Option<u8>, bool)) {
        let slot = word & SLOT_MASK;
        if word >> RULE_SHIFT == 0 {
            let s = self.get(slot);
            return (s.peer, s.teid, (s.qfi, false));
        }
        let rule = ((word >> RULE_SHIFT) & RULE_BITS) as usize;
        // An uplink rule's peer: a G-PDU on its way to N9 ([`n9`]), its
        // container an uplink one.
        let uplink = word & n9::UPLINK_RULE != 0;
        let t = self.rules.treatment(slot, uplink, (rule - 1) as u8);
        t.map_or((u32::MAX, 0, (None, false)), |t| {
            (t.peer, t.teid, (t.qfi, uplink))
        })
    }

    /// Sessions with a slot in use.
    pub fn len(&self) -> usize {
        self.link.usage.sessions()
    }

    /// Whether no session is set.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes this replica holds for its sessions: the maps' arrays, the
    /// slot vector and the worker's usage block (the first worker's with
    /// the buckets).
    pub fn bytes(&self) -> usize {
        self.uplink.bytes()
            + self.ue.bytes()
            + self.parked.iter().map(UeMaps::bytes).sum::<usize>()
            + self.owners.as_ref().map_or(0, UeMaps::bytes)
            + self.peers.capacity() * core::mem::size_of::<Option<Peer>>()
            + self.rules.bytes()
            + self.link.usage.bytes()
            + self.link.rule_usage.bytes()
    }

    /// [`bytes`](SessionTable::bytes) over the sessions set.
    pub fn bytes_per_session(&self) -> f64 {
        self.bytes() as f64 / self.len().max(1) as f64
    }
}

#[cfg(test)]
mod tests;
