//! Several rules per direction (PDRs with SDF filters and precedence):
//! what a session's packets match once its TEID or UE address found it.
//!
//! A session whose direction has one treatment (the common case: one PDR,
//! or several that differ only in the keys that find the session) keeps
//! it in its slot's line and never comes here. A direction with several
//! treatments, or with packet filters, is flagged in the line; its
//! packets are classified by the session's [`RuleSet`]: the first rule,
//! by precedence, whose filter takes the packet gives the treatment (FAR
//! action, downlink peer, TEID and QFI, its QER's bucket). A packet no
//! rule takes is dropped as `no_pdr_match`.
//!
//! **Why the cost stays flat as filters are added.** Each direction's
//! rules compile into a [`Classifier`]: every filter (a Flow
//! Description, expanded over its port ranges, with ToS, SPI, Flow Label
//! and the rule's QFI) becomes one column of a few arrays of `u32` (a
//! structure of arrays, at most [`MAX_FILTERS`] columns). A packet is
//! read once into a [`FlowKey`] (protocol, ToS, the two ports, SPI, Flow
//! Label, QFI and family), its two addresses tested against the
//! classifier's few distinct prefixes (SMFs' filters name `any`,
//! `assigned` and a server or two), and then every column is checked
//! with the same handful of compares and masks, no branch per filter:
//! the compiler runs the columns through vector registers, and the
//! answer is the lowest set bit of the match mask. Sixteen filters are
//! two to four vector steps of one loop over data in a few lines, not
//! sixteen dependent tests. Filters written with `any`/`assigned` are the
//! same for every UE, so the control plane shares one classifier among
//! all the sessions with the same rules ([`super::control`]): at a
//! million sessions the classifiers stay in the cache and a session
//! costs its treatments only.

use super::counters::NO_COUNTER;
use super::rate::Bucket;
use super::Action;
use crate::memory::Table;
use core::net::IpAddr;
use std::collections::HashMap;
use std::sync::Arc;

/// Most rules (PDRs) per direction of a session.
pub const MAX_RULES: usize = 16;
/// Most filter columns per direction (each Flow Description's port
/// ranges multiply: one per pair of ranges).
pub const MAX_FILTERS: usize = 64;
/// Most distinct address prefixes per side of a direction's filters.
const MAX_PREFIXES: usize = 31;
/// The prefix bit every packet has: `any` (and `assigned`, which the
/// session's own lookup already checked).
const ANY_PREFIX: u32 = 1 << 31;
/// A key's port when the packet has none (not TCP, UDP or SCTP, or a
/// later fragment): beyond every range a filter names, inside the
/// range of a filter that names none.
const NO_PORT: u32 = 0x1_0000;

/// A packet filter as the control plane states it, written for the
/// downlink as Flow Descriptions are (TS 29.244 §5.2.1A.2A): `remote` is
/// the data network's end (a downlink packet's source, an uplink one's
/// destination), `ue` the UE's. None or empty: any.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct FlowMatch {
    /// The IP protocol.
    pub protocol: Option<u8>,
    /// The data network's address prefix.
    pub remote: Option<(IpAddr, u8)>,
    /// The UE's address prefix (`assigned`: None, the lookup found it).
    pub ue: Option<(IpAddr, u8)>,
    /// The data network's ports (inclusive ranges).
    pub remote_ports: Vec<(u16, u16)>,
    /// The UE's ports.
    pub ue_ports: Vec<(u16, u16)>,
    /// ToS / Traffic Class value and mask.
    pub tos: Option<(u8, u8)>,
    /// IPsec SPI (ESP or AH).
    pub spi: Option<u32>,
    /// IPv6 Flow Label.
    pub flow_label: Option<u32>,
}

/// One rule of a direction (a PDR and its FAR and QERs), as the control
/// plane states it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleSpec {
    /// The packets it takes: any of these; none: every packet.
    pub filters: Vec<FlowMatch>,
    /// Uplink: only G-PDUs with this QFI.
    pub qfi_match: Option<u8>,
    /// Its FAR's action (and gate).
    pub action: Action,
    /// The peer's address and TEID (outer header creation): downlink the
    /// gNB's, uplink a UPF's on N9 (None: to N6).
    pub peer: Option<(IpAddr, u32)>,
    /// The QFI of the PDU Session Container it sends: downlink to the
    /// gNB (DL PDU SESSION INFORMATION), uplink to a UPF on N9 (UL PDU
    /// SESSION INFORMATION; none: no container).
    pub qfi: Option<u8>,
    /// Its own maximum bit rate this way: (a key naming its bucket, e.g.
    /// the QER ID, shared by the rules with the same key; bit/s).
    pub mbr: Option<(u32, u64)>,
}

/// Why rules cannot be compiled; the index of the rule at fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleError {
    /// More than [`MAX_RULES`] rules.
    TooManyRules(usize),
    /// More than [`MAX_FILTERS`] filter columns, or [`MAX_PREFIXES`]
    /// prefixes a side, from this rule on.
    TooManyFilters(usize),
    /// A filter that can match nothing: IPv4 and IPv6 addresses, or an
    /// IPv4 address with a Flow Label.
    Families(usize),
}

/// A packet as the classifier reads it, oriented as the filters are
/// (see [`FlowMatch`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct FlowKey {
    remote: u128,
    ue: u128,
    v6: bool,
    // Protocol, ToS, family bit (1: IPv4, 2: IPv6) and QFI (0x40: none),
    // a byte each: one compare per filter.
    small: u32,
    remote_port: u32,
    ue_port: u32,
    spi: u32,
    flow_label: u32,
}

const FAMILY_SHIFT: u32 = 16;
const QFI_SHIFT: u32 = 24;
const NO_QFI: u32 = 0x40;

impl FlowKey {
    /// The key of IP packet `p` (`uplink`: from the UE), with the QFI of
    /// its PDU Session Container; None if it is not IP or too short for
    /// its header. Transport fields are read after the fixed header (an
    /// IPv6 extension header stands in for the protocol, with no ports).
    #[inline]
    pub(crate) fn of(p: &[u8], uplink: bool, qfi: Option<u8>) -> Option<FlowKey> {
        let b = |i: usize| p.get(i).copied();
        let word = |i: usize| Some(u32::from_be_bytes(p.get(i..i + 4)?.try_into().ok()?));
        let (v6, proto, tos, src, dst, l4, fragment, flow_label) = match b(0)? >> 4 {
            4 => {
                let ihl = usize::from(b(0)? & 0x0f) * 4;
                let frag = word(4)? & 0x1fff != 0;
                let (s, d) = (word(12)?, word(16)?);
                (
                    false,
                    b(9)?,
                    b(1)?,
                    u128::from(s),
                    u128::from(d),
                    ihl,
                    frag,
                    0,
                )
            }
            6 => {
                let first = word(0)?;
                let addr = |i: usize| Some(u128::from_be_bytes(p.get(i..i + 16)?.try_into().ok()?));
                let tc = (first >> 20) as u8;
                (
                    true,
                    b(6)?,
                    tc,
                    addr(8)?,
                    addr(24)?,
                    40,
                    false,
                    first & 0xf_ffff,
                )
            }
            _ => return None,
        };
        let (mut sport, mut dport, mut spi) = (NO_PORT, NO_PORT, 0);
        if !fragment {
            match proto {
                6 | 17 | 132 | 136 => {
                    if let Some(w) = word(l4) {
                        (sport, dport) = (w >> 16, w & 0xffff);
                    }
                }
                50 => spi = word(l4).unwrap_or(0),
                51 => spi = word(l4 + 4).unwrap_or(0),
                _ => {}
            }
        }
        let family = if v6 { 2 } else { 1 };
        let q = qfi.map_or(NO_QFI, |q| u32::from(q & 0x3f));
        let small =
            u32::from(proto) | u32::from(tos) << 8 | family << FAMILY_SHIFT | q << QFI_SHIFT;
        let (remote, ue, remote_port, ue_port) = if uplink {
            (dst, src, dport, sport)
        } else {
            (src, dst, sport, dport)
        };
        Some(FlowKey {
            remote,
            ue,
            v6,
            small,
            remote_port,
            ue_port,
            spi,
            flow_label,
        })
    }
}

/// An address prefix a side's filters name: (IPv6, value, mask).
type Prefix = (bool, u128, u128);

/// One direction's rules compiled (see the module's doc): filter columns
/// in precedence order, each naming its rule.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Classifier {
    remote_prefixes: Vec<Prefix>,
    ue_prefixes: Vec<Prefix>,
    // Per column: protocol/ToS/family/QFI value and mask; the prefix bits
    // it takes on each side; its port ranges; SPI and Flow Label value
    // and mask; its rule.
    small: Vec<u32>,
    small_mask: Vec<u32>,
    remote_bits: Vec<u32>,
    ue_bits: Vec<u32>,
    remote_lo: Vec<u32>,
    remote_hi: Vec<u32>,
    ue_lo: Vec<u32>,
    ue_hi: Vec<u32>,
    spi: Vec<u32>,
    spi_mask: Vec<u32>,
    flow_label: Vec<u32>,
    flow_label_mask: Vec<u32>,
    rule: Vec<u8>,
}

impl Classifier {
    /// `rules`, in precedence order, compiled.
    pub fn new(rules: &[RuleSpec]) -> Result<Classifier, RuleError> {
        if rules.len() > MAX_RULES {
            return Err(RuleError::TooManyRules(MAX_RULES));
        }
        let mut c = Classifier::default();
        let any = FlowMatch::default();
        for (i, r) in rules.iter().enumerate() {
            let filters = if r.filters.is_empty() {
                core::slice::from_ref(&any)
            } else {
                &r.filters[..]
            };
            for f in filters {
                c.push(i, f, r.qfi_match)?;
            }
        }
        Ok(c)
    }

    /// The filter columns.
    pub fn len(&self) -> usize {
        self.rule.len()
    }

    /// Whether it has none (matches nothing).
    pub fn is_empty(&self) -> bool {
        self.rule.is_empty()
    }

    fn push(&mut self, rule: usize, f: &FlowMatch, qfi: Option<u8>) -> Result<(), RuleError> {
        let family = family_of(f).map_err(|()| RuleError::Families(rule))?;
        let remote = prefix_bit(&mut self.remote_prefixes, f.remote)
            .ok_or(RuleError::TooManyFilters(rule))?;
        let ue = prefix_bit(&mut self.ue_prefixes, f.ue).ok_or(RuleError::TooManyFilters(rule))?;
        let (mut small, mut mask) = (0u32, 0u32);
        if let Some(p) = f.protocol {
            (small, mask) = (u32::from(p), 0xff);
        }
        if let Some((v, m)) = f.tos {
            small |= u32::from(v & m) << 8;
            mask |= u32::from(m) << 8;
        }
        if let Some(v6) = family {
            small |= if v6 { 2 } else { 1 } << FAMILY_SHIFT;
            mask |= 3 << FAMILY_SHIFT;
        }
        if let Some(q) = qfi {
            small |= u32::from(q & 0x3f) << QFI_SHIFT;
            mask |= 0x7f << QFI_SHIFT;
        }
        let ranges = |r: &[(u16, u16)]| -> Vec<(u32, u32)> {
            if r.is_empty() {
                vec![(0, NO_PORT)]
            } else {
                r.iter()
                    .map(|&(a, b)| (u32::from(a), u32::from(b)))
                    .collect()
            }
        };
        for (rlo, rhi) in ranges(&f.remote_ports) {
            for (ulo, uhi) in ranges(&f.ue_ports) {
                if self.rule.len() == MAX_FILTERS {
                    return Err(RuleError::TooManyFilters(rule));
                }
                self.small.push(small);
                self.small_mask.push(mask);
                self.remote_bits.push(remote);
                self.ue_bits.push(ue);
                self.remote_lo.push(rlo);
                self.remote_hi.push(rhi);
                self.ue_lo.push(ulo);
                self.ue_hi.push(uhi);
                self.spi.push(f.spi.unwrap_or(0));
                self.spi_mask.push(if f.spi.is_some() { !0 } else { 0 });
                self.flow_label.push(f.flow_label.unwrap_or(0) & 0xf_ffff);
                self.flow_label_mask
                    .push(if f.flow_label.is_some() { 0xf_ffff } else { 0 });
                self.rule.push(rule as u8);
            }
        }
        Ok(())
    }

    /// The rule (index in precedence order) of the first column that
    /// takes `k`, if any.
    #[inline]
    pub(crate) fn classify(&self, k: &FlowKey) -> Option<u8> {
        let remote = hits(&self.remote_prefixes, k.v6, k.remote);
        let ue = hits(&self.ue_prefixes, k.v6, k.ue);
        let n = self.rule.len();
        let mut first = None;
        // Columns in blocks of 32: each block's mask is computed whole
        // (no early exit inside, so that it vectorises), and a block that
        // matches ends the search.
        let mut at = 0;
        while at < n {
            let end = (at + 32).min(n);
            let m = self.block(k, remote, ue, at, end);
            if m != 0 {
                first = Some(at + m.trailing_zeros() as usize);
                break;
            }
            at = end;
        }
        first.map(|i| self.rule[i])
    }

    /// The match mask of columns `at..end` (at most 32): every column's
    /// tests combined with `&`, not `&&`, over slices of one length, so
    /// that the loop has no branch and no bounds check and vectorises.
    #[inline]
    fn block(&self, k: &FlowKey, remote: u32, ue: u32, at: usize, end: usize) -> u32 {
        let small = &self.small[at..end];
        let n = small.len();
        let (small_mask, remote_bits, ue_bits) = (
            cut(&self.small_mask, at, n),
            cut(&self.remote_bits, at, n),
            cut(&self.ue_bits, at, n),
        );
        let (remote_lo, remote_hi, ue_lo, ue_hi) = (
            cut(&self.remote_lo, at, n),
            cut(&self.remote_hi, at, n),
            cut(&self.ue_lo, at, n),
            cut(&self.ue_hi, at, n),
        );
        let (spi, spi_mask, label, label_mask) = (
            cut(&self.spi, at, n),
            cut(&self.spi_mask, at, n),
            cut(&self.flow_label, at, n),
            cut(&self.flow_label_mask, at, n),
        );
        let mut m = 0u32;
        for i in 0..n {
            let ok = ((k.small & small_mask[i]) == small[i])
                & ((remote & remote_bits[i]) != 0)
                & ((ue & ue_bits[i]) != 0)
                & (k.remote_port >= remote_lo[i])
                & (k.remote_port <= remote_hi[i])
                & (k.ue_port >= ue_lo[i])
                & (k.ue_port <= ue_hi[i])
                & ((k.spi & spi_mask[i]) == spi[i])
                & ((k.flow_label & label_mask[i]) == label[i]);
            m |= u32::from(ok) << i;
        }
        m
    }
}

/// `v[at..at + n]`.
#[inline]
fn cut(v: &[u32], at: usize, n: usize) -> &[u32] {
    &v[at..at + n]
}

/// The family a filter is limited to (Some(true): IPv6), or Err for one
/// that can match nothing.
fn family_of(f: &FlowMatch) -> Result<Option<bool>, ()> {
    let mut fam = None;
    for a in [f.remote, f.ue].into_iter().flatten() {
        let v6 = a.0.is_ipv6();
        if fam.is_some_and(|x| x != v6) {
            return Err(());
        }
        fam = Some(v6);
    }
    if f.flow_label.is_some() {
        if fam == Some(false) {
            return Err(());
        }
        fam = Some(true);
    }
    Ok(fam)
}

/// The bit of prefix `p` among `list` (added if new); None when the list
/// is full.
fn prefix_bit(list: &mut Vec<Prefix>, p: Option<(IpAddr, u8)>) -> Option<u32> {
    let Some((addr, len)) = p else {
        return Some(ANY_PREFIX);
    };
    let (v6, value, width) = match addr {
        IpAddr::V4(a) => (false, u128::from(u32::from(a)), 32),
        IpAddr::V6(a) => (true, u128::from(a), 128),
    };
    let len = u32::from(len).min(width);
    let all = if v6 { !0u128 } else { u128::from(u32::MAX) };
    let mask = if len == 0 {
        0
    } else {
        (!0u128 << (width - len)) & all
    };
    let entry = (v6, value & mask, mask);
    let i = match list.iter().position(|&e| e == entry) {
        Some(i) => i,
        None if list.len() < MAX_PREFIXES => {
            list.push(entry);
            list.len() - 1
        }
        None => return None,
    };
    Some(1 << i)
}

/// The bits of the prefixes of `list` that `addr` (of family `v6`) is in,
/// and [`ANY_PREFIX`].
#[inline]
fn hits(list: &[Prefix], v6: bool, addr: u128) -> u32 {
    let mut m = ANY_PREFIX;
    for (i, &(f, value, mask)) in list.iter().enumerate() {
        if f == v6 && addr & mask == value {
            m |= 1 << i;
        }
    }
    m
}

/// What a rule does with the packets it takes, as the per-packet path
/// reads it. A plain struct: [`RuleLines`] holds two of them in a line
/// while it is at most 24 bytes (one each, up to 40).
#[derive(Clone, Debug)]
pub(crate) struct Treatment {
    pub(crate) action: Action,
    /// Downlink: the peer's id ([`super::Change::Peer`]) and TEID; uplink:
    /// the peer UPF's on N9 (`u32::MAX`: none, to N6).
    pub(crate) peer: u32,
    pub(crate) teid: u32,
    pub(crate) qfi: Option<u8>,
    /// Its QER's bucket (shared with the rules under the same QER).
    pub(crate) bucket: Option<Arc<Bucket>>,
    /// Its usage counter in each worker's [`super::counters::RuleUsage`].
    pub(crate) counter: u32,
    /// Whether it charges the volume lines of its URRs
    /// ([`super::watch::UrrWatches`], found by `counter`): a flag in the
    /// padding, so that a rule without one reads nothing more.
    pub(crate) watched: bool,
}

// Two treatments a line ([`RuleLines`]): the flag costs no room.
const _: () = assert!(core::mem::size_of::<Option<Treatment>>() <= 24);

impl Treatment {
    /// Whether a packet of `bytes` at `now_ns` is within the rule's own
    /// rate (always, without one).
    #[inline]
    pub(crate) fn admit(&self, bytes: usize, now_ns: u64, shared: bool) -> bool {
        self.bucket
            .as_ref()
            .is_none_or(|b| b.admit(bytes, now_ns, shared))
    }

    /// Whether the session's own treatment one way does all it does: the
    /// same action and (downlink) outer header, and (uplink) to N6; no
    /// bucket, counter or volume line of its own.
    fn is_own(&self, own: &Own, uplink: bool) -> bool {
        let plain = self.bucket.is_none() && self.counter == NO_COUNTER && !self.watched;
        plain
            && if uplink {
                self.action == own.uplink && self.peer == u32::MAX
            } else {
                (self.action, self.peer, self.teid, self.qfi) == own.downlink
            }
    }

    /// Whether it does what `o` does (its bucket the same one).
    fn same(&self, o: &Treatment) -> bool {
        let bucket = match (&self.bucket, &o.bucket) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (a, b) => a.is_none() && b.is_none(),
        };
        let key = |t: &Treatment| (t.action, t.peer, t.teid, t.qfi, t.counter, t.watched);
        key(self) == key(o) && bucket
    }
}

/// A session's rules for the directions that have several (the others'
/// one treatment is in the session's line): immutable (a change replaces
/// it whole), its parts shared by the workers. What a packet reads of it
/// a worker copies into its [`RuleLines`]; the set itself is read only
/// for treatments its line cannot hold.
#[derive(Clone, Debug)]
pub struct RuleSet {
    pub(crate) uplink: Option<Arc<Classifier>>,
    pub(crate) downlink: Option<Arc<Classifier>>,
    pub(crate) ul: Arc<[Treatment]>,
    pub(crate) dl: Arc<[Treatment]>,
}

impl RuleSet {
    /// The heap it holds beyond the shared classifiers, bytes.
    pub(crate) fn bytes(&self) -> usize {
        (self.ul.len() + self.dl.len()) * core::mem::size_of::<Treatment>() + 32
    }
}

/// A line's classifier index where the direction has no rules.
const NO_CLASS: u16 = u16::MAX;
/// ... where the worker's [`RuleLines`] holds no more classifiers: the
/// set's own, its treatments read from the set.
const OWN_CLASS: u16 = u16::MAX - 1;
/// A rule whose treatment is not in the line (read from the set).
const FAR: u8 = u8::MAX;
/// A rule whose treatment is the session's own ([`Own`]): read from the
/// slot's line of counters, not from the rule line.
const OWN: u8 = u8::MAX - 1;
/// Set in a rule's index where its treatment is the session's own
/// ([`RuleLines::class_of`]): above every rule's index.
pub(crate) const OWN_RULE: u8 = 0x80;
const _: () = assert!(MAX_RULES < OWN_RULE as usize);
/// Classes a hint names ([`RuleLines::set`]): the slot's line of counters
/// has 6 bits a way for it, 0 meaning none.
const HINTS: usize = 63;
/// Treatments a line holds beside its 16 bytes of header.
const NEAR: usize = (64 - 16) / core::mem::size_of::<Option<Treatment>>();
const _: () = assert!(NEAR >= 1);

/// A session's own treatment each way, as its slot's line of counters
/// holds it ([`super::Session`]): its uplink action (to N6), and its
/// downlink action, peer, TEID and QFI. A rule that does the same is
/// served from that line, which its packets read anyway: at a million
/// sessions the rule line is a third random line per packet (30 % more
/// per downlink packet at burst 1 with 16 filters, 18 % without it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Own {
    pub(crate) uplink: Action,
    pub(crate) downlink: (Action, u32, u32, Option<u8>),
}

/// One session's rules as its worker reads them per packet, one cache
/// line by slot: fetched beside the slot's own line (the same index, no
/// pointer to follow), it names the session's classifiers by their index
/// in the worker's small table of them, which stays cached (sessions
/// share them), and holds its first [`NEAR`] distinct treatments, so
/// that a packet of a session among millions costs this one line more
/// than a session without rules. Treatments beyond those are read from
/// the set (two dependent fetches): the last rule each way, the
/// catch-all most packets fall through to, is placed first. A rule whose
/// treatment is the session's own ([`Own`]) is not placed: its packets
/// find their classifier by the hint in the slot's line and read no rule
/// line at all.
#[derive(Clone, Debug)]
#[repr(C, align(64))]
pub(crate) struct RuleLine {
    // Classifier indices (or NO_CLASS, OWN_CLASS) up and down.
    ul: u16,
    dl: u16,
    // Whether a packet's treatment up (down) is worth fetching ahead,
    // once classified: some are only in `set`, or have a bucket.
    ul_ahead: bool,
    dl_ahead: bool,
    // Whether a packet may read the line: a way without a hint, or a
    // rule whose treatment is not the session's own.
    read: bool,
    set: Option<Arc<RuleSet>>,
    near: [Option<Treatment>; NEAR],
}

const _: () = assert!(core::mem::size_of::<RuleLine>() == 64);

impl Default for RuleLine {
    fn default() -> RuleLine {
        RuleLine {
            ul: NO_CLASS,
            dl: NO_CLASS,
            ul_ahead: false,
            dl_ahead: false,
            read: false,
            set: None,
            near: Default::default(),
        }
    }
}

/// A classifier as the worker's lines name it, with where each of its
/// rules' treatments is in the lines that name it (sessions with the same
/// classifier and the same pattern of treatments share one).
#[derive(Debug)]
struct Class {
    classifier: Arc<Classifier>,
    // By rule: the index of its treatment in the line's `near`, FAR or
    // OWN.
    near: [u8; MAX_RULES],
    refs: u32,
}

/// A worker's rules by slot ([`RuleLine`]) and the classifiers they name.
/// Indexed by slot, it gives the slot's [`RuleSet`] (None without).
#[derive(Debug, Default)]
pub(crate) struct RuleLines {
    // By slot; a table of its own (huge pages at a million sessions),
    // doubled as slots come.
    lines: Table<RuleLine>,
    classes: Vec<Option<Class>>,
    index: HashMap<(usize, [u8; MAX_RULES]), u16>,
    free: Vec<u16>,
    // Lines holding a set: none, and no packet is classified.
    sets: usize,
    // Lines a packet may read (`RuleLine::read`): none, and no packet's
    // rule line is worth fetching.
    read: usize,
    // Lines whose uplink packets are worth classifying ahead: none, and
    // `gtpu-decap`'s pass that would do it is skipped (it costs about
    // 9 ns a packet at a million sessions even where every line says
    // no, reading each line again).
    ul_ahead: usize,
}

static NO_SET: Option<Arc<RuleSet>> = None;

/// The hint of class `k` ([`RuleLines::set`]).
fn hint(k: u16) -> u32 {
    match usize::from(k) {
        k if k < HINTS => k as u32 + 1,
        _ => 0,
    }
}

/// Whether a class's map (`near`: None, all in the set) serves rule `r`
/// by the session's own treatment.
#[inline]
pub(crate) fn is_own(near: Option<&[u8; MAX_RULES]>, r: u8) -> bool {
    near.is_some_and(|m| m[usize::from(r) % MAX_RULES] == OWN)
}

impl core::ops::Index<usize> for RuleLines {
    type Output = Option<Arc<RuleSet>>;

    fn index(&self, slot: usize) -> &Option<Arc<RuleSet>> {
        self.lines.get(slot).map_or(&NO_SET, |l| &l.set)
    }
}

impl RuleLines {
    /// Sets slot `slot`'s rules, or clears them (between vectors), its
    /// session's own treatment being `own`; returns the hints for the
    /// slot's line of counters, uplink and downlink: 1 + the index of
    /// the slot's classifier that way where it is among the first
    /// [`HINTS`], else 0 (the packets read the rule line to find it).
    pub(crate) fn set(&mut self, slot: u32, set: Option<Arc<RuleSet>>, own: &Own) -> (u32, u32) {
        let i = slot as usize;
        if set.is_none() && i >= self.lines.len() {
            return (0, 0);
        }
        if self.lines.len() <= i {
            let mut grown =
                Table::new((i + 1).next_power_of_two().max(64), |_| RuleLine::default());
            for (new, old) in grown.iter_mut().zip(self.lines.iter_mut()) {
                *new = core::mem::take(old);
            }
            self.lines = grown;
        }
        let old = core::mem::take(&mut self.lines[i]);
        self.ul_ahead -= usize::from(old.ul_ahead);
        self.read -= usize::from(old.read);
        self.sets -= usize::from(old.set.is_some());
        self.release(old.ul);
        self.release(old.dl);
        let Some(s) = set else {
            return (0, 0);
        };
        let line = self.line_of(s, own);
        self.ul_ahead += usize::from(line.ul_ahead);
        self.read += usize::from(line.read);
        self.sets += 1;
        let hints = (hint(line.ul), hint(line.dl));
        self.lines[i] = line;
        hints
    }

    /// Whether no slot has rules.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.sets == 0
    }

    /// Whether a packet may read a rule line ([`RuleLines::class_of`]):
    /// without, none is worth fetching.
    #[inline]
    pub(crate) fn any_read(&self) -> bool {
        self.read > 0
    }

    /// Whether any slot's uplink packets are worth classifying ahead
    /// ([`RuleLines::ahead`]).
    #[inline]
    pub(crate) fn any_uplink_ahead(&self) -> bool {
        self.ul_ahead > 0
    }

    fn line_of(&mut self, set: Arc<RuleSet>, own: &Own) -> RuleLine {
        let mut near: [Option<Treatment>; NEAR] = Default::default();
        let mut place = |t: &Treatment, uplink: bool| -> u8 {
            if t.is_own(own, uplink) {
                return OWN;
            }
            for (k, n) in near.iter_mut().enumerate() {
                match n {
                    Some(x) if x.same(t) => return k as u8,
                    Some(_) => {}
                    None => {
                        *n = Some(t.clone());
                        return k as u8;
                    }
                }
            }
            FAR
        };
        // The catch-alls first (downlink's, which carries more), then
        // the rest in precedence order.
        for (t, uplink) in [(set.dl.last(), false), (set.ul.last(), true)] {
            if let Some(t) = t {
                place(t, uplink);
            }
        }
        let mut map = |list: &[Treatment], uplink: bool| {
            let mut m = [FAR; MAX_RULES];
            for (slot, t) in m.iter_mut().zip(list) {
                *slot = place(t, uplink);
            }
            let used = &m[..list.len().min(MAX_RULES)];
            let far = used.contains(&FAR);
            let all_own = used.iter().all(|&k| k == OWN);
            (m, far || list.iter().any(|t| t.bucket.is_some()), all_own)
        };
        let ((ul_map, ul_ahead, ul_own), (dl_map, dl_ahead, dl_own)) =
            (map(&set.ul, true), map(&set.dl, false));
        let ul = set
            .uplink
            .as_ref()
            .map_or(NO_CLASS, |c| self.intern(c, ul_map));
        let dl = set
            .downlink
            .as_ref()
            .map_or(NO_CLASS, |c| self.intern(c, dl_map));
        // A way is served without the line where its class has a hint
        // and every rule's treatment is the session's own.
        let served = |class: u16, all_own: bool| class == NO_CLASS || (hint(class) != 0 && all_own);
        RuleLine {
            ul,
            dl,
            ul_ahead: ul_ahead || ul == OWN_CLASS,
            dl_ahead: dl_ahead || dl == OWN_CLASS,
            read: !(served(ul, ul_own) && served(dl, dl_own)),
            set: Some(set),
            near,
        }
    }

    /// The index of `c` with treatments placed as `near` says, added if
    /// new; OWN_CLASS if the table is full.
    fn intern(&mut self, c: &Arc<Classifier>, near: [u8; MAX_RULES]) -> u16 {
        let key = (Arc::as_ptr(c) as usize, near);
        if let Some(&k) = self.index.get(&key) {
            if let Some(class) = &mut self.classes[usize::from(k)] {
                class.refs += 1;
            }
            return k;
        }
        let k = match self.free.pop() {
            Some(k) => k,
            None if self.classes.len() < usize::from(OWN_CLASS) => {
                self.classes.push(None);
                (self.classes.len() - 1) as u16
            }
            None => return OWN_CLASS,
        };
        self.classes[usize::from(k)] = Some(Class {
            classifier: c.clone(),
            near,
            refs: 1,
        });
        self.index.insert(key, k);
        k
    }

    fn release(&mut self, k: u16) {
        let Some(entry) = self.classes.get_mut(usize::from(k)) else {
            return;
        };
        let Some(class) = entry else {
            return;
        };
        class.refs -= 1;
        if class.refs == 0 {
            self.index
                .remove(&(Arc::as_ptr(&class.classifier) as usize, class.near));
            *entry = None;
            self.free.push(k);
        }
    }

    /// Starts fetching slot `slot`'s line, if it has one.
    #[inline]
    pub(crate) fn prefetch(&self, slot: u32) {
        if let Some(l) = self.lines.get(slot as usize) {
            super::flat::prefetch(l);
        }
    }

    /// Slot `slot`'s classifier one way, and where its rules' treatments
    /// are (None: all in the set).
    #[inline]
    fn class<'a>(
        &'a self,
        l: &'a RuleLine,
        uplink: bool,
    ) -> Option<(&'a Classifier, Option<&'a [u8; MAX_RULES]>)> {
        match if uplink { l.ul } else { l.dl } {
            NO_CLASS => None,
            OWN_CLASS => {
                let s = l.set.as_ref()?;
                let c = if uplink { &s.uplink } else { &s.downlink };
                Some((c.as_deref()?, None))
            }
            k => {
                let c = self.classes.get(usize::from(k))?.as_ref()?;
                Some((&c.classifier, Some(&c.near)))
            }
        }
    }

    /// Slot `slot`'s classifier one way and where its rules' treatments
    /// are (None: all in the set), `hint` being the way's hint in the
    /// slot's line of counters ([`RuleLines::set`]): from the small table
    /// of classes where it names one, else from the rule line. A rule
    /// mapped to OWN is served by the session's own treatment.
    #[inline]
    pub(crate) fn class_of(
        &self,
        slot: u32,
        uplink: bool,
        hint: u32,
    ) -> Option<(&Classifier, Option<&[u8; MAX_RULES]>)> {
        if hint != 0 {
            let c = self.classes.get(hint as usize - 1)?.as_ref()?;
            return Some((&c.classifier, Some(&c.near)));
        }
        let l = self.lines.get(slot as usize)?;
        self.class(l, uplink)
    }

    /// Slot `slot`'s classifier one way: None where the session has no
    /// rules that way.
    #[inline]
    pub(crate) fn classifier(&self, slot: u32, uplink: bool) -> Option<&Classifier> {
        let l = self.lines.get(slot as usize)?;
        self.class(l, uplink).map(|(c, _)| c)
    }

    /// Rule `rule`'s treatment one way of slot `slot`'s session.
    #[inline]
    pub(crate) fn treatment(&self, slot: u32, uplink: bool, rule: u8) -> Option<&Treatment> {
        self.find(slot, uplink, rule).map(|(t, _)| t)
    }

    /// Rule `rule`'s treatment, and whether it is in the line.
    #[inline]
    fn find(&self, slot: u32, uplink: bool, rule: u8) -> Option<(&Treatment, bool)> {
        let l = self.lines.get(slot as usize)?;
        let (_, map) = self.class(l, uplink)?;
        match map.map(|m| m[usize::from(rule) % MAX_RULES]) {
            Some(i) if usize::from(i) < NEAR => l.near[usize::from(i)].as_ref().map(|t| (t, true)),
            _ => {
                let s = l.set.as_ref()?;
                let list = if uplink { &s.ul } else { &s.dl };
                list.get(usize::from(rule)).map(|t| (t, false))
            }
        }
    }

    /// Whether slot `slot`'s packets one way are worth classifying ahead
    /// (some treatments are not in its line, or have a bucket).
    #[inline]
    pub(crate) fn ahead(&self, slot: u32, uplink: bool) -> bool {
        self.lines
            .get(slot as usize)
            .is_some_and(|l| if uplink { l.ul_ahead } else { l.dl_ahead })
    }

    /// Starts fetching what rule `rule`'s treatment one way needs beyond
    /// the line: the treatment where the line does not hold it, else its
    /// bucket (a random line per packet at scale, as the session's own).
    #[inline]
    pub(crate) fn prefetch_treatment(&self, slot: u32, uplink: bool, rule: u8) {
        match self.find(slot, uplink, rule) {
            Some((t, true)) => {
                if let Some(b) = &t.bucket {
                    super::flat::prefetch(&**b);
                }
            }
            Some((t, false)) => super::flat::prefetch(t),
            None => {}
        }
    }

    /// Bytes held: the lines, the classifier table, and the sets' own
    /// heap (shared with the other workers, counted in each).
    pub(crate) fn bytes(&self) -> usize {
        self.lines.len() * core::mem::size_of::<RuleLine>()
            + self.classes.capacity() * core::mem::size_of::<Option<Class>>()
            + self
                .lines
                .iter()
                .filter_map(|l| l.set.as_ref())
                .map(|s| s.bytes())
                .sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(filters: Vec<FlowMatch>) -> RuleSpec {
        RuleSpec {
            filters,
            qfi_match: None,
            action: Action::Forward,
            peer: None,
            qfi: None,
            mbr: None,
        }
    }

    fn udp4(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, tos: u8) -> Vec<u8> {
        let mut p = vec![0x45, tos, 0, 28, 0, 0, 0x40, 0, 64, 17, 0, 0];
        p.extend_from_slice(&src);
        p.extend_from_slice(&dst);
        p.extend_from_slice(&sport.to_be_bytes());
        p.extend_from_slice(&dport.to_be_bytes());
        p.extend_from_slice(&[0, 8, 0, 0]);
        p
    }

    fn tcp6(src: &str, dst: &str, sport: u16, dport: u16, label: u32) -> Vec<u8> {
        let s: core::net::Ipv6Addr = src.parse().unwrap();
        let d: core::net::Ipv6Addr = dst.parse().unwrap();
        let mut p = (0x6000_0000u32 | label).to_be_bytes().to_vec();
        p.extend_from_slice(&[0, 20, 6, 64]);
        p.extend_from_slice(&s.octets());
        p.extend_from_slice(&d.octets());
        p.extend_from_slice(&sport.to_be_bytes());
        p.extend_from_slice(&dport.to_be_bytes());
        p.extend_from_slice(&[0; 16]);
        p
    }

    fn voice() -> FlowMatch {
        FlowMatch {
            protocol: Some(17),
            ue_ports: vec![(5000, 5010)],
            ..Default::default()
        }
    }

    #[test]
    fn first_rule_by_precedence_that_takes_the_packet() {
        let c = Classifier::new(&[rule(vec![voice()]), rule(vec![])]).unwrap();
        let k = |p: &[u8], up| FlowKey::of(p, up, None).unwrap();
        let server = [192, 0, 2, 1];
        let ue = [10, 45, 0, 2];
        // Downlink to the UE's voice port; to another port; the uplink
        // from the voice port (source and destination swapped).
        assert_eq!(
            c.classify(&k(&udp4(server, ue, 9, 5005, 0), false)),
            Some(0)
        );
        assert_eq!(
            c.classify(&k(&udp4(server, ue, 9, 5011, 0), false)),
            Some(1)
        );
        assert_eq!(c.classify(&k(&udp4(ue, server, 5000, 9, 0), true)), Some(0));
        assert_eq!(c.classify(&k(&udp4(ue, server, 9, 5000, 0), true)), Some(1));
        // Without the catch-all, what the voice rule does not take is
        // nobody's.
        let only = Classifier::new(&[rule(vec![voice()])]).unwrap();
        assert_eq!(only.classify(&k(&udp4(server, ue, 9, 80, 0), false)), None);
        let tcp = tcp6("2001:db8::1", "2001:db8:1::2", 9, 5005, 0);
        assert_eq!(only.classify(&k(&tcp, false)), None, "TCP, not UDP");
    }

    #[test]
    fn addresses_families_tos_flow_label_and_qfi() {
        let net = |s: &str, l| Some((s.parse().unwrap(), l));
        let rules = [
            rule(vec![FlowMatch {
                remote: net("10.0.0.0", 8),
                tos: Some((0xb8, 0xfc)),
                ..Default::default()
            }]),
            rule(vec![FlowMatch {
                remote: net("2001:db8::", 32),
                flow_label: Some(0x12345),
                ..Default::default()
            }]),
            RuleSpec {
                qfi_match: Some(5),
                ..rule(vec![FlowMatch {
                    remote: net("10.0.0.0", 8),
                    ..Default::default()
                }])
            },
        ];
        let c = Classifier::new(&rules).unwrap();
        let dl = |p: &[u8]| c.classify(&FlowKey::of(p, false, None).unwrap());
        let ue = [10, 45, 0, 2];
        assert_eq!(dl(&udp4([10, 1, 2, 3], ue, 1, 2, 0xb8)), Some(0));
        assert_eq!(
            dl(&udp4([10, 1, 2, 3], ue, 1, 2, 0xbb)),
            Some(0),
            "ECN bits masked"
        );
        assert_eq!(dl(&udp4([10, 1, 2, 3], ue, 1, 2, 0)), None);
        assert_eq!(dl(&udp4([11, 1, 2, 3], ue, 1, 2, 0xb8)), None);
        // An IPv4 address whose bits an IPv6 prefix's low word shares
        // matches no IPv6 rule.
        assert_eq!(
            dl(&tcp6("2001:db8::5", "2001:db8:9::1", 1, 2, 0x12345)),
            Some(1)
        );
        assert_eq!(
            dl(&tcp6("2001:db8::5", "2001:db8:9::1", 1, 2, 0x12346)),
            None
        );
        assert_eq!(dl(&tcp6("::a00:1", "2001:db8:9::1", 1, 2, 0)), None);
        let up = |p: &[u8], q| c.classify(&FlowKey::of(p, true, q).unwrap());
        let to_net = udp4(ue, [10, 9, 9, 9], 2, 1, 0);
        assert_eq!(up(&to_net, Some(5)), Some(2));
        assert_eq!(up(&to_net, Some(6)), None);
        assert_eq!(up(&to_net, None), None);
        let mixed = FlowMatch {
            remote: net("10.0.0.0", 8),
            ue: net("2001:db8::", 64),
            ..Default::default()
        };
        assert_eq!(
            Classifier::new(&[rule(vec![]), rule(vec![mixed])]),
            Err(RuleError::Families(1))
        );
    }

    #[test]
    fn bounds() {
        let many = FlowMatch {
            remote_ports: vec![(1, 1), (2, 2), (3, 3), (4, 4)],
            ue_ports: vec![(1, 1), (2, 2), (3, 3), (4, 4)],
            ..Default::default()
        };
        // 16 columns a filter: four such rules fill the classifier.
        let rules: Vec<_> = (0..5).map(|_| rule(vec![many.clone()])).collect();
        assert!(Classifier::new(&rules[..4]).is_ok_and(|c| c.len() == MAX_FILTERS));
        assert_eq!(Classifier::new(&rules), Err(RuleError::TooManyFilters(4)));
        let rules: Vec<_> = (0..=MAX_RULES).map(|_| rule(vec![])).collect();
        assert_eq!(
            Classifier::new(&rules),
            Err(RuleError::TooManyRules(MAX_RULES))
        );
        // A packet too short for its header has no key; a fragment has
        // no ports (only a rule without ports takes it).
        assert_eq!(FlowKey::of(&[0x45, 0, 0], false, None), None);
        let mut frag = udp4([1, 1, 1, 1], [2, 2, 2, 2], 9, 5005, 0);
        frag[7] = 10;
        let k = FlowKey::of(&frag, false, None).unwrap();
        let c = Classifier::new(&[rule(vec![voice()]), rule(vec![])]).unwrap();
        assert_eq!(c.classify(&k), Some(1));
    }

    /// A set of more distinct treatments than a line holds: every rule
    /// still gets its own (the catch-alls from the line, the others from
    /// the set), sessions alike share their classes, and clearing the last
    /// frees it.
    #[test]
    fn lines_hold_the_catch_alls_and_find_the_rest_in_the_set() {
        let t = |action, teid| Treatment {
            action,
            peer: 1,
            teid,
            qfi: None,
            bucket: None,
            counter: super::super::counters::NO_COUNTER,
            watched: false,
        };
        let rules = [rule(vec![voice()]), rule(vec![]), rule(vec![])];
        let c = Arc::new(Classifier::new(&rules).unwrap());
        let set = |base: u32| {
            Arc::new(RuleSet {
                uplink: Some(c.clone()),
                downlink: Some(c.clone()),
                ul: vec![
                    t(Action::Forward, base),
                    t(Action::Drop, 0),
                    t(Action::Forward, base + 1),
                ]
                .into(),
                dl: vec![
                    t(Action::Forward, base + 2),
                    t(Action::Forward, base + 3),
                    t(Action::Buffer, 0),
                ]
                .into(),
            })
        };
        // An own treatment no rule has: every one from the line or set.
        let own = Own {
            uplink: Action::QuotaExhausted,
            downlink: (Action::Drop, u32::MAX, 0, None),
        };
        let mut lines = RuleLines::default();
        assert_eq!(lines.set(3, Some(set(10)), &own), (1, 2));
        lines.set(5, Some(set(20)), &own);
        assert!(lines.any_read());
        for (slot, base) in [(3, 10), (5, 20)] {
            let set = set(base);
            for (uplink, list) in [(true, &set.ul), (false, &set.dl)] {
                for (r, want) in list.iter().enumerate() {
                    let got = lines.treatment(slot, uplink, r as u8).unwrap();
                    assert!(got.same(want), "slot {slot} rule {r} up {uplink}");
                    let near = lines.find(slot, uplink, r as u8).unwrap().1;
                    assert_eq!(near, r == 2, "only the catch-alls in the line");
                }
                assert!(lines.ahead(slot, uplink), "some only in the set");
            }
        }
        // One class each way (the treatments' places differ), for both.
        assert_eq!(lines.classes.iter().flatten().count(), 2);
        assert!(
            lines.treatment(4, true, 0).is_none(),
            "a slot between has none"
        );
        // A set whose treatments all fit its line: not worth classifying
        // ahead, and with only such lines `gtpu-decap` skips that pass.
        let near = Arc::new(RuleSet {
            uplink: Some(c.clone()),
            downlink: None,
            ul: vec![t(Action::Forward, 7); 3].into(),
            dl: Vec::new().into(),
        });
        lines.set(7, Some(near), &own);
        assert!(!lines.ahead(7, true));
        assert!(lines.any_uplink_ahead());
        lines.set(3, None, &own);
        lines.set(5, Some(set(30)), &own);
        assert!(lines.any_uplink_ahead(), "one line replaced by another");
        lines.set(5, None, &own);
        assert!(!lines.any_uplink_ahead());
        lines.set(7, None, &own);
        assert!(lines[5].is_none());
        assert_eq!(lines.classes.iter().flatten().count(), 0);
        assert!(lines.index.is_empty());
        assert!(!lines.any_read());
    }

    /// Rules whose treatment is the session's own are served by it: their
    /// class says so, its hint names it, and a line whose rules all are
    /// needs no reading; one rule of its own and the line is read again.
    #[test]
    fn rules_like_the_session_are_served_by_its_own_treatment() {
        let t = |action, peer, qfi| Treatment {
            action,
            peer,
            teid: 9,
            qfi,
            bucket: None,
            counter: super::super::counters::NO_COUNTER,
            watched: false,
        };
        let own = Own {
            uplink: Action::Forward,
            downlink: (Action::Forward, 1, 9, Some(9)),
        };
        let rules = [rule(vec![voice()]), rule(vec![])];
        let c = Arc::new(Classifier::new(&rules).unwrap());
        let set = |voice: Treatment| {
            Arc::new(RuleSet {
                uplink: Some(c.clone()),
                downlink: Some(c.clone()),
                ul: vec![t(Action::Forward, u32::MAX, None); 2].into(),
                dl: vec![voice, t(Action::Forward, 1, Some(9))].into(),
            })
        };
        let mut lines = RuleLines::default();
        let (ul, dl) = lines.set(4, Some(set(t(Action::Forward, 1, Some(9)))), &own);
        assert!(ul != 0 && dl != 0, "both ways hinted: {ul} {dl}");
        assert!(!lines.any_read(), "every rule the session's own");
        assert!(!lines.is_empty());
        for (uplink, hint) in [(true, ul), (false, dl)] {
            let (_, near) = lines.class_of(4, uplink, hint).unwrap();
            assert!(is_own(near, 0) && is_own(near, 1));
        }
        // A voice flow on its own QFI: its rule from the line, the
        // catch-all still the session's.
        let (_, dl) = lines.set(4, Some(set(t(Action::Forward, 1, Some(1)))), &own);
        assert!(lines.any_read());
        let (_, near) = lines.class_of(4, false, dl).unwrap();
        assert!(!is_own(near, 0) && is_own(near, 1));
        assert_eq!(lines.treatment(4, false, 0).unwrap().qfi, Some(1));
        // Without a hint (0), the class comes from the line, the same.
        let (_, from_line) = lines.class_of(4, false, 0).unwrap();
        assert_eq!(from_line, near);
        // A bucket of its own is never the session's.
        let mut metered = t(Action::Forward, 1, Some(9));
        metered.bucket = Some(Arc::new(Bucket::default()));
        assert!(!metered.is_own(&own, false));
        assert!(t(Action::Forward, 1, Some(9)).is_own(&own, false));
        assert!(
            !t(Action::Forward, 1, Some(9)).is_own(&own, true),
            "uplink to N9"
        );
        lines.set(4, None, &own);
        assert!(!lines.any_read());
        assert!(lines.is_empty());
    }
}
