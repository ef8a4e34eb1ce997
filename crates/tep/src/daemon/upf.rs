//! The daemon's side of the UPF: tep-pfcp's node hands it each session's
//! rules (PDRs, FARs, QERs, URRs) and this compiles them into the
//! dataplane's session specs, which the control plane of the session
//! tables publishes to every worker ([`Sessions`]).
//!
//! What the dataplane keeps of a session is what its packets need: the
//! uplink keys (TEID, QFI) of its Access PDRs and what their FAR does; the
//! UE addresses of its downlink PDRs and what they do: forward to a gNB
//! with a TEID and the QFI of their QERs, drop, or buffer. A closed gate
//! drops. Usage is counted per session and, where a direction's PDRs are
//! under different URRs, per rule: a URR gets the counts of its PDRs
//! ([`super::urr`]). A rule set this cannot carry as
//! the SMF asks is refused by the rule at fault ([`compile`]), never
//! installed in part: tep never accepts what it does not enforce.
//!
//! Uplink packets must come from the UE: their inner source is checked
//! against the UE IP Address of the first Access PDR (by precedence) that
//! has one, else of the first downlink PDR (SMFs that name the UE in its
//! downlink PDRs only); a session that names none forwards no uplink
//! packet ([`tep_dataplane::session::UeSource`]).
//!
//! The N4 thread ([`super::n4`]) runs tep-pfcp's node over this.

use super::state::GbrTotals;
use std::collections::HashMap;
use std::net::IpAddr;
use tep_dataplane::session::control::{Mbr, RuleTag, SessionSpec, Sessions};
use tep_dataplane::session::rules::{Classifier, FlowMatch, RuleError, RuleSpec, MAX_RULES};
use tep_dataplane::session::{Action, UeKey, UeSource, UplinkKey};
use tep_pfcp::flow::Address;
use tep_pfcp::node::{self, Change, Refused, Rules, Seid, Usage, UserPlane};
use tep_pfcp::types::{FailedRuleId, Interface};
use tep_pfcp::IeType;

/// Compiles a session's rules for the N3 tunnels `n3` (their addresses
/// and tunnel indexes), or refuses the rule the dataplane cannot enforce
/// as asked ([`Refused::rule`]: the SMF gets Rule creation/modification
/// Failure naming it). Per direction:
/// - PDRs that all get the same treatment (action; for the downlink the
///   gNB tunnel and QFI) and have no SDF filter nor an MBR of their own
///   (a PDU session's one flow, or flows that differ only in the QFIs or
///   F-TEIDs that find the session) compile to that one treatment, kept
///   in the session's line;
/// - otherwise each PDR is a rule of its own, by precedence
///   ([`tep_dataplane::session::rules`]): its SDF filters (Flow
///   Descriptions written for the downlink; an uplink PDR's match with
///   source and destination swapped, TS 29.244 §5.2.1A.2A), its uplink
///   QFI, its FAR's action, its peer and QFI, its own MBR. At most
///   [`MAX_RULES`] a direction (the next PDR is refused), filters the
///   classifier holds (`rules::MAX_FILTERS` columns: the PDR whose filters
///   overflow is refused by its SDF Filter), one F-TEID and one UE
///   address for all the direction's PDRs (the session's lookup keys: a
///   PDR naming another is refused by that IE);
/// - an uplink PDR comes from Access with its GTP-U header removed and
///   goes to N6 (Core or N6-LAN) or, with Outer Header Creation toward
///   Core, to a UPF on N9 (always as rules: the rule carries the peer, so
///   a ULCL's PDRs branch by their filters between N6 and N9); a
///   downlink PDR comes from Core/N6-LAN matching a UE address (no QFI,
///   no header removal), or from N9 matching a local F-TEID with its
///   GTP-U header removed (UE address optional; refused by its F-TEID
///   where the downlink has several rules, or on a TEID an Access PDR
///   has; its FAR may buffer only where a downlink PDR names the UE, by
///   whose address held packets are released) and goes to Access in
///   GTP-U ([`super::n9`]); CP-function and
///   5G VN internal sources are refused; uplink buffering (which would
///   drop) is refused, and so is an uplink FAR to Access;
/// - PDRs of a direction under different URRs are rules of their own
///   (each rule has its usage counter, which its PDR's URRs read);
/// - a FAR's Transport Level Marking is the outer DSCP of its
///   packets to a gNB or a UPF on N9 (PDRs whose FARs mark differently
///   are rules of their own); an uplink FAR's to N6 is refused (N6
///   packets have no outer header);
/// - maximum bit rates ([`mbrs`]): the QERs with an MBR that every PDR of
///   a direction is under (a session AMBR) are the session's bucket, the
///   lowest rate; one more of a PDR's own is its rule's bucket, shared by
///   the PDRs under the same QER.
///
/// Refused too: an F-TEID on an address that is no N3 tunnel's, a UE IPv6
/// prefix other than /64 or /128, a UE with an IPv4 address and an IPv6
/// /128 (a session's line holds one of them), no N3 tunnel of the peer's
/// family.
pub fn compile(rules: &Rules, n3: &[(IpAddr, u32)]) -> Result<(SessionSpec, Option<u16>), Refused> {
    let (ul_mbr, ul_own) = mbrs(rules, true)?;
    let (dl_mbr, dl_own) = mbrs(rules, false)?;
    let mut spec = SessionSpec {
        n3: u32::MAX,
        uplink: Action::Drop,
        downlink: Action::Drop,
        peer: None,
        qfi: None,
        uplink_keys: Vec::new(),
        downlink_keys: Vec::new(),
        network: 0,
        ue: UeSource::default(),
        mbr: Mbr {
            uplink: ul_mbr,
            downlink: dl_mbr,
        },
        rules: Default::default(),
    };
    let (mut ue_up, mut ue_down) = (None, None);
    let mut by_precedence: Vec<&node::Pdr> = rules.pdrs.iter().collect();
    by_precedence.sort_by_key(|p| p.precedence);
    let (mut ul, mut dl) = (Vec::new(), Vec::new());
    let mut teid = None;
    // Downlink PDRs from N9: their keys and N3 tunnels.
    let mut n9 = Vec::new();
    for pdr in by_precedence {
        let far = rules.far(pdr.far).ok_or(refuse_pdr(pdr, IeType::FAR_ID))?;
        let mut rule = RuleSpec {
            filters: flows(pdr),
            qfi_match: None,
            action: far_action(far, rules.gate_open(pdr, pdr.source == Interface::ACCESS)),
            peer: None,
            qfi: None,
            mbr: None,
        };
        if pdr.source == Interface::ACCESS {
            let (n3_index, t) = uplink_of(pdr, far, n3)?;
            if ul.is_empty() {
                spec.n3 = n3_index;
            } else if n3_index != spec.n3 {
                return Err(refuse_pdr(pdr, IeType::F_TEID));
            }
            let key = UplinkKey {
                teid: t,
                qfi: pdr.qfi,
            };
            if !spec.uplink_keys.contains(&key) {
                spec.uplink_keys.push(key);
            }
            if teid.get_or_insert(t) != &t {
                teid = Some(u32::MAX);
            }
            if let (None, Some(ue)) = (&ue_up, &pdr.ue_ip) {
                ue_up = Some((
                    ue_keys(ue).ok_or(refuse_pdr(pdr, IeType::UE_IP_ADDRESS))?,
                    pdr,
                ));
            }
            (rule.qfi_match, rule.mbr) = (pdr.qfi, own(&ul_own, pdr));
            rule.peer = super::n9::uplink_peer(far)?;
            rule.qfi = super::n9::uplink_qfi(rules, pdr, rule.peer.is_some());
            ul.push((pdr, rule));
        } else {
            if let Some(key) = super::n9::downlink_key(pdr, n3)? {
                n9.push((pdr, key));
            }
            if let Some(ue) = downlink_of(pdr, far)? {
                let keys = ue_keys(&ue).ok_or(refuse_pdr(pdr, IeType::UE_IP_ADDRESS))?;
                for k in keys.iter().flatten() {
                    if !spec.downlink_keys.contains(k) {
                        spec.downlink_keys.push(*k);
                    }
                }
                ue_down.get_or_insert((keys, pdr));
            }
            rule.peer = far.outer.map(|o| (o.addr(), o.teid));
            (rule.qfi, rule.mbr) = (rules.qfi(pdr), own(&dl_own, pdr));
            dl.push((pdr, rule));
        }
    }
    if let Some((_, r)) = ul.first() {
        spec.uplink = r.action;
    }
    if let Some((_, r)) = dl.first() {
        (spec.downlink, spec.qfi, spec.peer) = (r.action, r.qfi, r.peer);
    }
    // The session's gNB (the uplink's source check, End Markers): the
    // first downlink rule's that forwards somewhere.
    if let Some((_, r)) = dl.iter().find(|(_, r)| r.peer.is_some()) {
        spec.peer = r.peer;
    }
    // A peer UPF on N9 is a rule's, never the session line's.
    if several(&ul) || ul.iter().any(|(_, r)| r.peer.is_some()) {
        if teid == Some(u32::MAX) {
            let odd = ul
                .iter()
                .find(|(p, _)| p.local.map(|l| l.teid) != ul[0].0.local.map(|l| l.teid));
            return Err(refuse_pdr(odd.map_or(ul[0].0, |o| o.0), IeType::F_TEID));
        }
        spec.rules.uplink = checked(&ul)?;
        spec.rules.uplink_tags = tags(rules, &ul);
    }
    let marks = |p: &node::Pdr| rules.far(p.far).and_then(|f| f.dscp);
    spec.rules.dscp = dl.first().and_then(|(p, _)| marks(p));
    if several(&dl) || dl.iter().any(|(p, _)| marks(p) != spec.rules.dscp) {
        spec.rules.downlink = checked(&dl)?;
        spec.rules.downlink_tags = tags(rules, &dl);
    }
    spec.ue = match ue_up.or(ue_down) {
        Some((keys, pdr)) => UeSource::of_keys(keys.iter().flatten())
            .ok_or(refuse_pdr(pdr, IeType::UE_IP_ADDRESS))?,
        None => UeSource::default(),
    };
    n9_keys(&mut spec, &n9, several(&dl))?;
    if !n9.is_empty() && spec.downlink_keys.is_empty() {
        // Held packets are released the way N6 packets come, by the UE's
        // address: with none, they would be held and then lost.
        if let Some((p, _)) = dl.iter().find(|(_, r)| r.action == Action::Buffer) {
            let far = rules.far(p.far).ok_or(refuse_pdr(p, IeType::FAR_ID))?;
            return Err(refuse_far(far, IeType::APPLY_ACTION));
        }
    }
    if spec.n3 == u32::MAX {
        // No uplink PDR yet: the N3 tunnel of the peer's family.
        let v6 = spec.peer.is_some_and(|(a, _)| a.is_ipv6());
        spec.n3 = n3
            .iter()
            .find(|(a, _)| a.is_ipv6() == v6)
            .ok_or(Refused::FULL)?
            .1;
    }
    // A Downlink Data Report names the PDR whose FAR buffers.
    let report = dl
        .iter()
        .find(|(_, r)| r.action == Action::Buffer)
        .or(dl.first())
        .map(|(p, _)| p.id);
    Ok((spec, report))
}

/// The N9 keys of the downlink PDRs from N9 (`n9`: PDR, key, N3 tunnel),
/// each on the session's N3 tunnel (its first one's where no uplink PDR
/// set it). Refused by the F-TEID where the downlink has several rules
/// (`rules`): they classify packets by their filters only, and a packet
/// from N9 would take a rule of a PDR from N6.
fn n9_keys(
    spec: &mut SessionSpec,
    n9: &[(&node::Pdr, (UplinkKey, u32))],
    rules: bool,
) -> Result<(), Refused> {
    for &(pdr, (key, tunnel)) in n9 {
        if rules {
            return Err(refuse_pdr(pdr, IeType::F_TEID));
        }
        if spec.n3 == u32::MAX {
            spec.n3 = tunnel;
        } else if spec.n3 != tunnel {
            return Err(refuse_pdr(pdr, IeType::F_TEID));
        }
        if spec
            .uplink_keys
            .iter()
            .any(|k| k.teid == key.teid && *k != key)
        {
            // The TEID an Access PDR matches too: which side is it?
            return Err(refuse_pdr(pdr, IeType::F_TEID));
        }
        if !spec.uplink_keys.contains(&key) {
            spec.uplink_keys.push(key);
        }
    }
    Ok(())
}

/// Whether a direction's PDRs need rules of their own: more than one
/// treatment, or a filter or an MBR of a PDR's own, or URRs that differ
/// (the one treatment's counts are the session's: a URR on some of the
/// PDRs needs theirs apart).
fn several(list: &[(&node::Pdr, RuleSpec)]) -> bool {
    let treatment = |r: &RuleSpec| (r.action, r.peer, r.qfi);
    list.iter().any(|(p, r)| {
        !r.filters.is_empty()
            || r.mbr.is_some()
            || treatment(r) != treatment(&list[0].1)
            || urrs_of(p) != urrs_of(list[0].0)
    })
}

/// A PDR's URR IDs as a set.
fn urrs_of(p: &node::Pdr) -> Vec<u32> {
    let mut u = p.urrs.as_slice().to_vec();
    u.sort_unstable();
    u.dedup();
    u
}

/// Each rule's tag: a usage counter kept by its PDR ID where the
/// direction's PDRs are under different URRs (else the session's counts
/// are each URR's); its FAR's outer DSCP (uplink: toward N9 only, as
/// [`uplink_of`] checks).
fn tags(rules: &Rules, list: &[(&node::Pdr, RuleSpec)]) -> Vec<RuleTag> {
    let counted = list.iter().any(|(p, _)| urrs_of(p) != urrs_of(list[0].0));
    list.iter()
        .map(|(p, _)| RuleTag {
            key: u32::from(p.id),
            counted,
            dscp: rules.far(p.far).and_then(|f| f.dscp),
            // Set once the URRs are known (`urr::line_groups`).
            watch: Default::default(),
        })
        .collect()
}

/// A direction's rules as the classifier takes them, or the PDR refused:
/// past [`MAX_RULES`], a UE address other than the first PDR's (the
/// rules do not match addresses the session's lookup already did), or
/// filters the classifier cannot hold.
fn checked(list: &[(&node::Pdr, RuleSpec)]) -> Result<Vec<RuleSpec>, Refused> {
    if let Some((p, _)) = list.get(MAX_RULES) {
        return Err(refuse_pdr(p, IeType::PDR_ID));
    }
    let ue = list.iter().find_map(|(p, _)| p.ue_ip);
    if let Some((p, _)) = list
        .iter()
        .find(|(p, _)| p.ue_ip.is_some() && p.ue_ip != ue)
    {
        return Err(refuse_pdr(p, IeType::UE_IP_ADDRESS));
    }
    let rules: Vec<RuleSpec> = list.iter().map(|(_, r)| r.clone()).collect();
    match Classifier::new(&rules) {
        Ok(_) => Ok(rules),
        Err(RuleError::TooManyRules(i)) => Err(refuse_pdr(list[i].0, IeType::PDR_ID)),
        Err(RuleError::TooManyFilters(i) | RuleError::Families(i)) => {
            Err(refuse_pdr(list[i].0, IeType::SDF_FILTER))
        }
    }
}

/// A PDR's SDF filters as the dataplane matches them. `assigned` is the
/// UE's address, which the session's lookup found: any.
fn flows(pdr: &node::Pdr) -> Vec<FlowMatch> {
    let addr = |a: Address| match a {
        Address::Prefix(ip, len) => Some((ip, len)),
        Address::Any | Address::Assigned => None,
    };
    pdr.sdf
        .iter()
        .map(|f| {
            let mut m = FlowMatch {
                tos: f.tos,
                spi: f.spi,
                flow_label: f.flow_label,
                ..Default::default()
            };
            if let Some(d) = &f.flow {
                m.protocol = d.protocol;
                (m.remote, m.ue) = (addr(d.from.addr), addr(d.to.addr));
                (m.remote_ports, m.ue_ports) = (d.from.ports.clone(), d.to.ports.clone());
            }
            m
        })
        .collect()
}

pub(super) fn refuse_pdr(pdr: &node::Pdr, ie: IeType) -> Refused {
    Refused::rule(FailedRuleId::Pdr(pdr.id), Some(ie))
}

pub(super) fn refuse_far(far: &node::Far, ie: IeType) -> Refused {
    Refused::rule(FailedRuleId::Far(far.id), Some(ie))
}

/// What a FAR does, with its PDR's gate (closed: drop).
fn far_action(far: &node::Far, gate: bool) -> Action {
    match far.action {
        _ if !gate => Action::Drop,
        node::Action::Forward => Action::Forward,
        node::Action::Drop => Action::Drop,
        node::Action::Buffer { .. } => Action::Buffer,
    }
}

/// An uplink PDR's N3 tunnel and TEID, if the dataplane does what it and
/// its FAR ask: strip GTP-U, forward to N6 or to a UPF on N9
/// ([`super::n9::uplink_peer`]), or drop.
fn uplink_of(
    pdr: &node::Pdr,
    far: &node::Far,
    n3: &[(IpAddr, u32)],
) -> Result<(u32, u32), Refused> {
    if !pdr.outer_header_removal.is_some_and(|o| o.is_gtpu()) {
        return Err(refuse_pdr(pdr, IeType::OUTER_HEADER_REMOVAL));
    }
    match far.action {
        node::Action::Buffer { .. } => return Err(refuse_far(far, IeType::APPLY_ACTION)),
        // No outer header to mark on N6 (the UE's own packets); on N9 it
        // is the peer UPF's template's, as a gNB's.
        _ if far.dscp.is_some() && far.outer.is_none() => {
            return Err(refuse_far(far, IeType::TRANSPORT_LEVEL_MARKING))
        }
        node::Action::Forward
            if !matches!(far.destination, Some(Interface::CORE | Interface::N6_LAN)) =>
        {
            return Err(refuse_far(far, IeType::DESTINATION_INTERFACE))
        }
        _ => {}
    }
    super::n9::local_teid(pdr, n3)
}

/// A downlink PDR's UE address, if the dataplane does what it and its
/// FAR ask: match the UE address from N6 (or the F-TEID from N9, where
/// the UE address is optional), forward to the gNB in GTP-U (or drop, or
/// buffer).
fn downlink_of(pdr: &node::Pdr, far: &node::Far) -> Result<Option<node::UeIp>, Refused> {
    if !matches!(pdr.source, Interface::CORE | Interface::N6_LAN) {
        return Err(refuse_pdr(pdr, IeType::SOURCE_INTERFACE));
    }
    if pdr.qfi.is_some() {
        return Err(refuse_pdr(pdr, IeType::QFI));
    }
    // From N9 (a local F-TEID) the GTP-U header goes ([`super::n9`]);
    // from N6 there is none.
    if pdr.local.is_none() && pdr.outer_header_removal.is_some() {
        return Err(refuse_pdr(pdr, IeType::OUTER_HEADER_REMOVAL));
    }
    if far.action == node::Action::Forward && far.destination != Some(Interface::ACCESS) {
        return Err(refuse_far(far, IeType::DESTINATION_INTERFACE));
    }
    match pdr.ue_ip {
        None if pdr.local.is_none() => Err(refuse_pdr(pdr, IeType::UE_IP_ADDRESS)),
        ue => Ok(ue),
    }
}

/// A direction's maximum bit rates (`uplink`: from Access): the
/// session's, bit/s, and each PDR's own (PDR ID -> (QER ID, bit/s)). The
/// QERs of a PDR all apply to its packets (TS 29.244 §5.4.2): those with
/// an MBR that every PDR of the direction is under (a session AMBR, TS
/// 23.501 §5.7.2.6) are the session's bucket, at the lowest of their
/// rates, since one bucket at that rate passes what each of theirs
/// would; a PDR under one more (a flow's MBR) gets that QER's bucket,
/// shared by the PDRs under it. Two more on one PDR would each need their
/// own bucket per packet: the second is refused. An MBR of 0 kbit/s one
/// way sets no rate that way (the gate is what stops traffic).
fn mbrs(rules: &Rules, uplink: bool) -> Result<(Option<u64>, Vec<OwnMbr>), Refused> {
    let kbps = |q: &node::Qer| q.mbr.map_or(0, |m| if uplink { m.ul } else { m.dl });
    let metered = |pdr: &node::Pdr| -> Vec<&node::Qer> {
        let mut m: Vec<&node::Qer> = pdr
            .qers
            .as_slice()
            .iter()
            .filter_map(|&q| rules.qer(q))
            .filter(|q| kbps(q) > 0)
            .collect();
        m.sort_by_key(|q| q.id);
        m.dedup_by_key(|q| q.id);
        m
    };
    let pdrs: Vec<&node::Pdr> = rules
        .pdrs
        .iter()
        .filter(|p| (p.source == Interface::ACCESS) == uplink)
        .collect();
    let Some(first) = pdrs.first() else {
        return Ok((None, Vec::new()));
    };
    let mut common = metered(first);
    for p in &pdrs[1..] {
        let m = metered(p);
        common.retain(|q| m.contains(q));
    }
    let mut own = Vec::new();
    for p in &pdrs {
        let extra: Vec<&node::Qer> = metered(p)
            .into_iter()
            .filter(|q| !common.contains(q))
            .collect();
        match extra[..] {
            [] => {}
            [q] => own.push((p.id, q.id, kbps(q).saturating_mul(1000))),
            [_, q, ..] => return Err(Refused::rule(FailedRuleId::Qer(q.id), Some(IeType::MBR))),
        }
    }
    let lowest = common.iter().map(|q| kbps(q)).min();
    Ok((lowest.map(|k| k.saturating_mul(1000)), own))
}

/// A PDR's own MBR: (PDR ID, QER ID, bit/s).
type OwnMbr = (u16, u32, u64);

/// PDR `pdr`'s own MBR among `own` ([`mbrs`]).
fn own(own: &[OwnMbr], pdr: &node::Pdr) -> Option<(u32, u64)> {
    own.iter().find(|o| o.0 == pdr.id).map(|o| (o.1, o.2))
}

/// A PDR's UE IP Address as the dataplane's keys (IPv4, IPv6); None for
/// an IPv6 prefix other than /64 or /128.
fn ue_keys(ue: &node::UeIp) -> Option<[Option<UeKey>; 2]> {
    let v6 = match (ue.v6, ue.v6_prefix_len) {
        (None, _) => None,
        (Some(a), 128) => Some(UeKey::V6(a.into())),
        (Some(a), 64) => Some(UeKey::V6Prefix((u128::from(a) >> 64) as u64)),
        _ => return None,
    };
    Some([ue.v4.map(|a| UeKey::V4(a.into())), v6])
}

/// One session as the daemon knows it.
#[derive(Clone, Debug)]
struct Entry {
    slot: u32,
    /// What each URR counts, and took so far.
    urrs: super::urr::UrrCounts,
    /// Its QERs' GBRs.
    gbr: GbrTotals,
    /// The PDR a Downlink Data Report names.
    downlink_pdr: Option<u16>,
}

/// tep-pfcp's user plane: the dataplane's session tables.
#[derive(Debug)]
pub struct UpfPlane {
    sessions: Sessions,
    n3: Vec<(IpAddr, u32)>,
    /// The data networks a session's Network Instances name.
    networks: super::dnn::Networks,
    by_seid: HashMap<Seid, Entry>,
    by_slot: HashMap<u32, Seid>,
    /// The sessions' GBRs.
    gbr: GbrTotals,
    /// The sessions' GTP-U peers, supervised (off until the N4 thread
    /// sets its timers).
    pub paths: super::path::Paths,
}

impl UpfPlane {
    /// Over `sessions`, with the N3 tunnels `n3` (address, tunnel index).
    pub fn new(sessions: Sessions, n3: Vec<(IpAddr, u32)>) -> UpfPlane {
        let off = super::path::Timers {
            interval: std::time::Duration::ZERO,
            t3: std::time::Duration::ZERO,
            n3: 1,
        };
        let paths = super::path::Paths::new(off, n3.iter().map(|&(a, _)| a).collect());
        UpfPlane {
            sessions,
            n3,
            networks: Default::default(),
            by_seid: HashMap::new(),
            by_slot: HashMap::new(),
            gbr: GbrTotals::default(),
            paths,
        }
    }

    /// With the data networks `networks` rather than the one unnamed.
    pub fn with_networks(mut self, networks: super::dnn::Networks) -> UpfPlane {
        self.networks = networks;
        self
    }

    /// Sends the changes made since the last call to the workers; whether
    /// there were any (the workers are then to be woken).
    pub fn publish(&mut self) -> bool {
        let before = self.sessions.published();
        self.sessions.publish();
        self.sessions.published() != before
    }

    /// Publishes every session again, for workers started afresh.
    pub fn replay(&mut self) {
        self.sessions.replay();
    }

    /// The session and PDR of slot `slot`'s Downlink Data Report.
    pub fn report_of(&self, slot: u32) -> Option<(Seid, u16)> {
        let seid = *self.by_slot.get(&slot)?;
        Some((seid, self.by_seid.get(&seid)?.downlink_pdr?))
    }

    /// The sessions whose packets reached a volume threshold or quota
    /// since the last call, on their line or a URR's ([`super::urr`]),
    /// into `out`, with the URRs one of which used up its quota (none: a
    /// threshold); `scratch`: scratch.
    pub fn volume_crossed(&mut self, scratch: &mut Vec<u32>, out: &mut Vec<(Seid, Vec<u32>)>) {
        let w = self.sessions.watches();
        w.take_crossed(scratch);
        for slot in scratch.drain(..) {
            let Some(&seid) = self.by_slot.get(&slot) else {
                continue;
            };
            let Some(e) = self.by_seid.get(&seid) else {
                continue;
            };
            let spent = match w.quota_spent(slot) {
                true => e.urrs.slot_quotas().to_vec(),
                false => Vec::new(),
            };
            out.push((seid, spent));
        }
        let mut groups = Vec::new();
        self.sessions.crossed_groups(scratch, &mut groups);
        for g in groups {
            let Some(&seid) = self.by_slot.get(&g.slot) else {
                continue;
            };
            let spent = if g.quota_spent {
                vec![g.group]
            } else {
                Vec::new()
            };
            out.push((seid, spent));
        }
    }

    /// Has the workers call `wake` when a session's packets reach a
    /// volume threshold or quota.
    pub fn wake_on_volume(&self, wake: Box<dyn Fn() + Send + Sync>) {
        self.sessions.wake_on_volume(wake);
    }

    /// The sessions' QERs' GBRs, summed.
    pub fn gbr(&self) -> GbrTotals {
        self.gbr
    }

    /// URRs left to the scans for want of a volume line
    /// ([`Sessions::lines_refused`]).
    pub fn usage_lines_refused(&self) -> u64 {
        self.sessions.lines_refused()
    }

    /// The dataplane's session tables.
    #[cfg(test)]
    pub fn sessions(&self) -> &Sessions {
        &self.sessions
    }

    /// Whether none is.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.by_seid.is_empty()
    }
}

impl UserPlane for UpfPlane {
    fn apply(&mut self, change: Change<'_>) -> Result<(), Refused> {
        match change {
            Change::Install { seid, rules } => {
                let (mut spec, downlink_pdr) = compile(rules, &self.n3)?;
                spec.network = self.networks.of_session(rules)?;
                super::urr::stop_if_exhausted(rules, &mut spec);
                super::urr::line_groups(rules, &mut spec);
                let e = match self.by_seid.get_mut(&seid) {
                    Some(e) => {
                        self.sessions
                            .modify(e.slot, &spec, false)
                            .map_err(|_| Refused::FULL)?;
                        e.downlink_pdr = downlink_pdr;
                        e
                    }
                    None => {
                        let slot = self.sessions.create(&spec).map_err(|_| Refused::FULL)?;
                        self.by_slot.insert(slot, seid);
                        self.by_seid.entry(seid).or_insert(Entry {
                            slot,
                            urrs: Default::default(),
                            gbr: GbrTotals::default(),
                            downlink_pdr,
                        })
                    }
                };
                e.urrs.rebase(rules, &spec, &self.sessions, e.slot);
                e.urrs.arm(rules, &mut self.sessions, e.slot);
                let gbr = GbrTotals::of(&rules.qers);
                self.gbr = self.gbr.replace(e.gbr, gbr);
                e.gbr = gbr;
                self.paths.install(std::time::Instant::now(), seid, rules);
                let slot = e.slot;
                // The packets a buffering FAR holds: as many as its BAR
                // suggests, `[pfcp] buffer_packets` at most (the workers').
                let bound = rules.buffering_bar().and_then(|b| b.suggested_packets);
                self.sessions.set_buffer_bound(slot, bound.map(u32::from));
                Ok(())
            }
            Change::DropBuffered { seid } => {
                let e = self.by_seid.get(&seid).ok_or(Refused::FULL)?;
                self.sessions.drop_buffered(e.slot);
                Ok(())
            }
            Change::Remove { seid } => {
                self.paths.remove(seid);
                if let Some(e) = self.by_seid.remove(&seid) {
                    self.by_slot.remove(&e.slot);
                    self.gbr = self.gbr.replace(e.gbr, GbrTotals::default());
                    let _ = self.sessions.remove(e.slot);
                }
                Ok(())
            }
            Change::EndMarker { seid, old, .. } => {
                let e = self.by_seid.get(&seid).ok_or(Refused::FULL)?;
                let n3 = self
                    .sessions
                    .spec(e.slot)
                    .map(|s| s.n3)
                    .ok_or(Refused::FULL)?;
                self.sessions.end_marker(n3, old.addr(), old.teid);
                Ok(())
            }
        }
    }

    fn take_usage(&mut self, seid: Seid, urr: u32) -> Usage {
        let Some(e) = self.by_seid.get_mut(&seid) else {
            return Usage::default();
        };
        e.urrs.take(&self.sessions, e.slot, urr)
    }

    fn usage_taken(&mut self, seid: Seid, rules: &Rules, rearm: bool) {
        if let Some(e) = self.by_seid.get_mut(&seid) {
            if rearm {
                e.urrs.arm(rules, &mut self.sessions, e.slot);
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::net::{Ipv4Addr, SocketAddr};
    use std::time::Instant;
    use tep_dataplane::session::{SessionTable, WorkerLink};
    use tep_pfcp::node::{Far, Ids, LocalFTeid, OuterHeader, Pdr, Qer, UeIp};
    use tep_pfcp::types::OuterHeaderRemoval;

    const N3_V4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
    pub(in crate::daemon) const N3: IpAddr = IpAddr::V4(N3_V4);
    const GNB: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 9);
    /// The SMF of [`associated`].
    pub(crate) const SMF: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 10);

    /// tep's node on N3 over the daemon's user plane with room for
    /// `max_sessions` on `workers` workers (their links), usage scans on
    /// as the daemon runs it, associated with [`SMF`] (port 8805, its
    /// address as the second value) at the returned instant.
    pub(crate) fn associated(
        max_sessions: u32,
        workers: usize,
    ) -> (node::Node, UpfPlane, Vec<WorkerLink>, SocketAddr, Instant) {
        let n3 = N3_V4;
        let (sessions, links) = Sessions::new(max_sessions, workers, vec![false]);
        let mut up = UpfPlane::new(sessions, vec![(IpAddr::V4(n3), 0)]);
        let mut c = node::Config::new(tep_pfcp::types::NodeId::V4(n3), 1, Some(n3), None);
        c.heartbeat_interval = None;
        c.usage_scans = true;
        let mut node = node::Node::new(c);
        let now = Instant::now();
        let smf = SocketAddr::new(SMF.into(), 8805);
        let setup = tep_pfcp::sample::association_setup(0, SMF, 1).to_bytes();
        node.handle(now, smf, &setup, &mut up);
        while node.poll_transmit().is_some() {}
        (node, up, links, smf, now)
    }

    fn pdr(id: u16, precedence: u32, source: Interface, far: u32) -> Pdr {
        Pdr {
            id,
            precedence,
            source,
            local: None,
            ue_ip: None,
            qfi: None,
            sdf: Vec::new(),
            outer_header_removal: None,
            far,
            qers: Ids::new(&[1]).unwrap(),
            urrs: Ids::new(&[]).unwrap(),
            network: None,
        }
    }

    /// A session as an SMF sets it up: uplink TEID 0x55 on N3, downlink
    /// to UE 10.45.0.7 via the gNB with TEID 0x77, QFI 9.
    pub(in crate::daemon) fn rules(dl: node::Action) -> Rules {
        let mut up = pdr(1, 100, Interface::ACCESS, 1);
        up.outer_header_removal = Some(OuterHeaderRemoval::default());
        up.local = Some(LocalFTeid {
            teid: 0x55,
            v4: Some(N3_V4),
            v6: None,
        });
        let mut down = pdr(2, 100, Interface::N6_LAN, 2);
        down.ue_ip = Some(UeIp {
            v4: Some(Ipv4Addr::new(10, 45, 0, 7)),
            v6: None,
            v6_prefix_len: 64,
        });
        Rules {
            pdrs: vec![up, down],
            fars: vec![
                Far {
                    id: 1,
                    action: node::Action::Forward,
                    destination: Some(Interface::CORE),
                    outer: None,
                    bar: None,
                    network: None,
                    dscp: None,
                },
                Far {
                    id: 2,
                    action: dl,
                    destination: Some(Interface::ACCESS),
                    outer: Some(OuterHeader {
                        teid: 0x77,
                        v4: Some(GNB),
                        v6: None,
                    }),
                    bar: None,
                    network: None,
                    dscp: None,
                },
            ],
            qers: vec![Qer {
                id: 1,
                ul_open: true,
                dl_open: true,
                mbr: None,
                gbr: None,
                qfi: Some(9),
            }],
            urrs: vec![],
            bar: None,
        }
    }

    #[test]
    fn rules_compile_to_what_the_packets_need() {
        let (spec, dl_pdr) = compile(&rules(node::Action::Forward), &[(N3, 3)]).unwrap();
        assert_eq!(spec.n3, 3);
        assert_eq!(
            (spec.uplink, spec.downlink),
            (Action::Forward, Action::Forward)
        );
        assert_eq!(
            spec.uplink_keys,
            [UplinkKey {
                teid: 0x55,
                qfi: None
            }]
        );
        assert_eq!(spec.downlink_keys, [UeKey::V4(0x0a2d_0007)]);
        assert_eq!(
            (spec.peer, spec.qfi),
            (Some((IpAddr::V4(GNB), 0x77)), Some(9))
        );
        assert_eq!(dl_pdr, Some(2));
        let (spec, _) =
            compile(&rules(node::Action::Buffer { notify_cp: true }), &[(N3, 3)]).unwrap();
        assert_eq!(spec.downlink, Action::Buffer);
        // A closed gate drops; an F-TEID on no N3 address is refused.
        let mut r = rules(node::Action::Forward);
        r.qers[0].dl_open = false;
        assert_eq!(compile(&r, &[(N3, 3)]).unwrap().0.downlink, Action::Drop);
        let other = IpAddr::V4(Ipv4Addr::new(198, 51, 100, 1));
        assert_eq!(
            compile(&r, &[(other, 3)]).unwrap_err(),
            Refused::rule(FailedRuleId::Pdr(1), Some(IeType::F_TEID))
        );
    }

    /// MBRs (kbit/s in the QERs) become the buckets' rates (bit/s) each
    /// way: a QER all PDRs share (the session AMBR) sets both; a PDR's own
    /// QER under it takes the lowest; PDRs of a direction under different
    /// MBRs are refused by the QER that differs.
    #[test]
    fn mbrs_compile_to_one_rate_each_way() {
        use tep_pfcp::types::Mbr as QerMbr;
        let n3 = [(N3, 3)];
        let mbr = |r: &Rules| compile(r, &n3).map(|(s, _)| (s.mbr.uplink, s.mbr.downlink));
        let mut r = rules(node::Action::Forward);
        assert_eq!(mbr(&r), Ok((None, None)));
        r.qers[0].mbr = Some(QerMbr {
            ul: 20_000,
            dl: 50_000,
        });
        assert_eq!(mbr(&r), Ok((Some(20_000_000), Some(50_000_000))));
        // The uplink PDR's own QER at 5 Mbit/s up, nothing down.
        r.qers.push(Qer {
            id: 2,
            mbr: Some(QerMbr { ul: 5_000, dl: 0 }),
            qfi: None,
            ..r.qers[0]
        });
        r.pdrs[0].qers = Ids::new(&[1, 2]).unwrap();
        assert_eq!(mbr(&r), Ok((Some(5_000_000), Some(50_000_000))));
        // A second uplink flow not under QER 2: QER 1 is the session's
        // (an AMBR), QER 2 the first flow's own, a rule each.
        let mut second = r.pdrs[0].clone();
        second.id = 3;
        second.qfi = Some(5);
        second.qers = Ids::new(&[1]).unwrap();
        r.pdrs.push(second);
        assert_eq!(mbr(&r), Ok((Some(20_000_000), Some(50_000_000))));
        let (spec, _) = compile(&r, &n3).unwrap();
        let own: Vec<_> = spec.rules.uplink.iter().map(|r| r.mbr).collect();
        assert_eq!(own, [Some((2, 5_000_000)), None]);
        assert!(spec.rules.downlink.is_empty());
        // Two of its own on one PDR: the second is refused.
        r.qers.push(Qer {
            id: 3,
            mbr: Some(QerMbr { ul: 7_000, dl: 0 }),
            qfi: None,
            ..r.qers[0]
        });
        r.pdrs[0].qers = Ids::new(&[1, 2, 3]).unwrap();
        assert_eq!(
            mbr(&r),
            Err(Refused::rule(FailedRuleId::Qer(3), Some(IeType::MBR)))
        );
        r.pdrs[0].qers = Ids::new(&[1, 2]).unwrap();
        // Both under QER 2 again: one rate.
        r.pdrs[2].qers = Ids::new(&[2, 1]).unwrap();
        assert_eq!(mbr(&r), Ok((Some(5_000_000), Some(50_000_000))));
    }

    /// The UE's uplink source: the Access PDR's UE IP Address, else the
    /// downlink PDR's; none when neither names one; refused when a line
    /// cannot hold it.
    #[test]
    fn the_ue_source_is_the_uplink_pdrs_else_the_downlink_pdrs() {
        use tep_dataplane::session::Ue6;
        let n3 = [(N3, 3)];
        let mut r = rules(node::Action::Forward);
        let ue = |r: &Rules| compile(r, &n3).ok().map(|(s, _)| s.ue);
        assert_eq!(ue(&r), UeSource::new(Some(0x0a2d_0007), None));
        r.pdrs[0].ue_ip = Some(UeIp {
            v4: Some(Ipv4Addr::new(10, 45, 0, 8)),
            v6: Some("2001:db8:5:6::1".parse().unwrap()),
            v6_prefix_len: 64,
        });
        let prefix = Ue6::Prefix(0x2001_0db8_0005_0006);
        assert_eq!(ue(&r), UeSource::new(Some(0x0a2d_0008), Some(prefix)));
        r.pdrs[0].ue_ip.as_mut().unwrap().v6_prefix_len = 128;
        assert_eq!(ue(&r), None, "IPv4 and a /128: more than a line holds");
        // A downlink PDR must name its UE (it matches nothing else).
        r.pdrs[0].ue_ip = None;
        r.pdrs[1].ue_ip = None;
        assert!(ue(&r).is_none());
        r.pdrs.truncate(1);
        assert_eq!(ue(&r), Some(UeSource::default()));
    }

    /// Each rule shape the dataplane cannot carry as asked is refused by
    /// its ID and the IE at fault; the shapes it carries compile.
    #[test]
    fn what_the_dataplane_cannot_enforce_is_refused_by_rule() {
        let n3 = [(N3, 3)];
        let pdr_ie = |id, ie| Err(Refused::rule(FailedRuleId::Pdr(id), Some(ie)));
        let far_ie = |id, ie| Err(Refused::rule(FailedRuleId::Far(id), Some(ie)));
        let verdict = |edit: &dyn Fn(&mut Rules)| {
            let mut r = rules(node::Action::Forward);
            edit(&mut r);
            compile(&r, &n3).map(|_| ())
        };
        // A second flow on the uplink with the first one's FAR: taken.
        let mut r = rules(node::Action::Forward);
        let mut second = r.pdrs[0].clone();
        (second.id, second.qfi) = (3, Some(5));
        r.pdrs.push(second.clone());
        assert_eq!(compile(&r, &n3).unwrap().0.uplink_keys.len(), 2);
        // With a FAR that drops: a rule each, by precedence.
        second.far = 3;
        let mut dropping = r.fars[0];
        (dropping.id, dropping.action) = (3, node::Action::Drop);
        r.pdrs[2] = second;
        r.fars.push(dropping);
        let (spec, _) = compile(&r, &n3).unwrap();
        let got: Vec<_> = spec
            .rules
            .uplink
            .iter()
            .map(|r| (r.qfi_match, r.action))
            .collect();
        assert_eq!(got, [(None, Action::Forward), (Some(5), Action::Drop)]);
        // A second downlink PDR with another QFI: a rule each.
        let other_qfi = |r: &mut Rules| {
            let mut d = r.pdrs[1].clone();
            d.id = 4;
            d.qers = Ids::new(&[2]).unwrap();
            r.pdrs.push(d);
            r.qers.push(Qer {
                id: 2,
                qfi: Some(5),
                ..r.qers[0]
            });
        };
        let mut r = rules(node::Action::Forward);
        other_qfi(&mut r);
        let (spec, _) = compile(&r, &n3).unwrap();
        let qfis: Vec<_> = spec.rules.downlink.iter().map(|r| r.qfi).collect();
        assert_eq!(qfis, [Some(9), Some(5)]);
        // On another UE address: the rules would not tell them apart.
        let other_ue = |r: &mut Rules| {
            other_qfi(r);
            r.pdrs[2].ue_ip.as_mut().unwrap().v4 = Some(Ipv4Addr::new(10, 45, 0, 8));
        };
        assert_eq!(verdict(&other_ue), pdr_ie(4, IeType::UE_IP_ADDRESS));
        // More PDRs a direction than the classifier holds: the first
        // past it is refused.
        let many = |r: &mut Rules| {
            for i in 0..MAX_RULES as u16 {
                let mut d = r.pdrs[1].clone();
                (d.id, d.precedence) = (10 + i, 200 + u32::from(i));
                d.sdf = vec![voice()];
                r.pdrs.push(d);
            }
        };
        assert_eq!(
            verdict(&many),
            pdr_ie(10 + MAX_RULES as u16 - 1, IeType::PDR_ID)
        );
        type Edit<'a> = &'a dyn Fn(&mut Rules);
        let cases: [(Edit<'_>, Result<(), Refused>); 8] = [
            (
                &|r| r.pdrs[0].outer_header_removal = None,
                pdr_ie(1, IeType::OUTER_HEADER_REMOVAL),
            ),
            (
                &|r| r.fars[0].destination = Some(Interface::ACCESS),
                far_ie(1, IeType::DESTINATION_INTERFACE),
            ),
            // An outer header toward N6-LAN: N9 is Core.
            (
                &|r| {
                    r.fars[0].outer = r.fars[1].outer;
                    r.fars[0].destination = Some(Interface::N6_LAN);
                },
                far_ie(1, IeType::DESTINATION_INTERFACE),
            ),
            (
                &|r| r.fars[0].action = node::Action::Buffer { notify_cp: false },
                far_ie(1, IeType::APPLY_ACTION),
            ),
            (
                &|r| r.fars[1].destination = Some(Interface::CORE),
                far_ie(2, IeType::DESTINATION_INTERFACE),
            ),
            // A core-side F-TEID (N9) whose GTP-U header stays.
            (
                &|r| r.pdrs[1].local = r.pdrs[0].local,
                pdr_ie(2, IeType::OUTER_HEADER_REMOVAL),
            ),
            (&|r| r.pdrs[1].qfi = Some(9), pdr_ie(2, IeType::QFI)),
            (
                &|r| r.pdrs[1].source = Interface::CP_FUNCTION,
                pdr_ie(2, IeType::SOURCE_INTERFACE),
            ),
        ];
        for (i, (edit, want)) in cases.iter().enumerate() {
            assert_eq!(verdict(*edit), *want, "case {i}");
        }
        // URRs each on every PDR, on some, on none: taken.
        let urrs = |ids: &'static [u32]| {
            move |r: &mut Rules| {
                r.urrs = vec![urr(1), urr(2)];
                for p in &mut r.pdrs {
                    p.urrs = Ids::new(ids).unwrap();
                }
                r.pdrs[0].urrs = Ids::new(&[1]).unwrap();
            }
        };
        assert_eq!(verdict(&urrs(&[1, 2])), Ok(()));
        assert_eq!(verdict(&urrs(&[])), Ok(()));
    }

    /// URRs `ids`, each on every PDR.
    fn with_urrs(r: &mut Rules, ids: &[u32]) {
        r.urrs = ids.iter().map(|&i| urr(i)).collect();
        for p in &mut r.pdrs {
            p.urrs = Ids::new(ids).unwrap();
        }
    }

    fn voice() -> node::Sdf {
        let d = b"permit out 17 from any to assigned 5000-5010";
        node::Sdf {
            flow: Some(tep_pfcp::flow::FlowDescription::parse(d).unwrap()),
            tos: None,
            spi: None,
            flow_label: None,
            id: None,
        }
    }

    /// A voice flow beside the default one: its SDF filter, written for
    /// the downlink, becomes the rule's match on the UE's ports (the
    /// dataplane swaps the ends for the uplink); the default PDR after it.
    #[test]
    fn sdf_filters_compile_to_rules_by_precedence() {
        let n3 = [(N3, 3)];
        let mut r = rules(node::Action::Forward);
        let mut voice_dl = r.pdrs[1].clone();
        (voice_dl.id, voice_dl.precedence, voice_dl.far) = (3, 10, 3);
        voice_dl.sdf = vec![voice()];
        voice_dl.qers = Ids::new(&[2]).unwrap();
        r.pdrs.push(voice_dl);
        r.fars.push(Far {
            id: 3,
            outer: Some(OuterHeader {
                teid: 0x88,
                v4: Some(GNB),
                v6: None,
            }),
            ..r.fars[1]
        });
        r.qers.push(Qer {
            id: 2,
            qfi: Some(1),
            ..r.qers[0]
        });
        let (spec, report) = compile(&r, &n3).unwrap();
        assert_eq!(report, Some(3));
        let dl = &spec.rules.downlink;
        assert_eq!(dl.len(), 2);
        assert_eq!(
            (dl[0].qfi, dl[0].peer, dl[1].qfi, dl[1].peer),
            (
                Some(1),
                Some((IpAddr::V4(GNB), 0x88)),
                Some(9),
                Some((IpAddr::V4(GNB), 0x77))
            )
        );
        let f = &dl[0].filters[0];
        assert_eq!((f.protocol, f.remote, f.ue), (Some(17), None, None));
        assert_eq!(
            (&f.remote_ports[..], &f.ue_ports[..]),
            (&[][..], &[(5000, 5010)][..])
        );
        assert!(dl[1].filters.is_empty());
        assert!(spec.rules.uplink.is_empty(), "one uplink treatment");
        assert_eq!(spec.downlink_keys.len(), 1);
        // A filter the classifier cannot hold (both families): refused by
        // the PDR and its SDF Filter.
        let mut bad = voice();
        bad.flow =
            tep_pfcp::flow::FlowDescription::parse(b"permit out ip from any to assigned").ok();
        bad.flow_label = Some(5);
        r.pdrs[2].sdf = vec![bad];
        r.pdrs[2].sdf[0].flow.as_mut().unwrap().to.addr =
            tep_pfcp::flow::Address::Prefix(IpAddr::V4(Ipv4Addr::new(10, 45, 0, 7)), 32);
        assert_eq!(
            compile(&r, &n3).map(|_| ()),
            Err(Refused::rule(
                FailedRuleId::Pdr(3),
                Some(IeType::SDF_FILTER)
            ))
        );
    }

    const PSA: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 20);

    /// An intermediate UPF with an uplink classifier (TS 23.501 §5.6.4):
    /// uplink to 10.60.0.0/16 to its own N6, the rest to the PSA on N9
    /// (TEID 0x99); downlink from N6 and from N9 (F-TEID 0x66) to the gNB.
    fn ulcl() -> Rules {
        let mut r = rules(node::Action::Forward);
        r.fars[0].outer = Some(OuterHeader {
            teid: 0x99,
            v4: Some(PSA),
            v6: None,
        });
        let mut local = r.pdrs[0].clone();
        (local.id, local.precedence, local.far) = (3, 10, 3);
        let d = b"permit out ip from 10.60.0.0/16 to assigned";
        local.sdf = vec![node::Sdf {
            flow: tep_pfcp::flow::FlowDescription::parse(d).ok(),
            ..voice()
        }];
        r.pdrs.push(local);
        r.fars.push(Far {
            id: 3,
            outer: None,
            ..r.fars[0]
        });
        let mut from_n9 = pdr(4, 100, Interface::CORE, 2);
        from_n9.outer_header_removal = Some(OuterHeaderRemoval::default());
        from_n9.local = Some(LocalFTeid {
            teid: 0x66,
            ..r.pdrs[0].local.unwrap()
        });
        r.pdrs.push(from_n9);
        r
    }

    /// N9 and the uplink classifier compile: the uplink as rules, each
    /// with its peer (none: N6), by precedence; the downlink from N9 an N9
    /// key beside the N3 one, its treatment the session's one.
    #[test]
    fn n9_and_an_uplink_classifier_compile() {
        let n3 = [(N3, 3)];
        let (spec, _) = compile(&ulcl(), &n3).unwrap();
        let ul: Vec<_> = spec.rules.uplink.iter().map(|r| (r.peer, r.qfi)).collect();
        // The N9 rule's container: its QER's QFI.
        assert_eq!(ul, [(None, None), (Some((IpAddr::V4(PSA), 0x99)), Some(9))]);
        let remote = Some((IpAddr::V4(Ipv4Addr::new(10, 60, 0, 0)), 16));
        assert_eq!(spec.rules.uplink[0].filters[0].remote, remote);
        let n9 = UplinkKey::n9(0x66);
        assert!(n9.is_n9());
        let n3_key = UplinkKey {
            teid: 0x55,
            qfi: None,
        };
        assert_eq!(spec.uplink_keys, [n3_key, n9]);
        assert!(spec.rules.downlink.is_empty(), "one downlink treatment");
        assert_eq!(spec.downlink_keys, [UeKey::V4(0x0a2d_0007)]);
        assert_eq!((spec.n3, spec.peer), (3, Some((IpAddr::V4(GNB), 0x77))));
        // No classifier: one uplink rule, to N9, all the same.
        let mut r = ulcl();
        r.pdrs.remove(2);
        let (spec, _) = compile(&r, &n3).unwrap();
        assert_eq!(spec.rules.uplink.len(), 1);
        assert_eq!(spec.rules.uplink[0].peer, Some((IpAddr::V4(PSA), 0x99)));
        // Only from N9 downlink (no UE address there): still the one
        // treatment, the N3 tunnel the F-TEID's.
        r.pdrs.remove(1);
        r.pdrs.remove(0);
        let (spec, _) = compile(&r, &n3).unwrap();
        assert_eq!((spec.n3, &spec.uplink_keys[..]), (3, &[n9][..]));
        assert_eq!(spec.downlink, Action::Forward);
    }

    /// The N9 uplink's container QFI: its QER's, else the one its PDR
    /// matches, none to N6; its FAR's marking is its outer DSCP, refused
    /// only toward N6.
    #[test]
    fn the_n9_uplink_carries_a_qfi_and_a_mark() {
        let n3 = [(N3, 3)];
        let mut r = ulcl();
        r.qers[0].qfi = None;
        r.pdrs[0].qfi = Some(5);
        r.pdrs[2].qfi = Some(5);
        let qfis = |r: &Rules| {
            let (spec, _) = compile(r, &n3).unwrap();
            let q: Vec<_> = spec.rules.uplink.iter().map(|r| r.qfi).collect();
            q
        };
        assert_eq!(qfis(&r), [None, Some(5)], "to N6 no container");
        r.qers[0].qfi = Some(9);
        assert_eq!(qfis(&r), [None, Some(9)], "the QER's first");
        r.fars[0].dscp = Some(46);
        let (spec, _) = compile(&r, &n3).unwrap();
        let marks: Vec<_> = spec.rules.uplink_tags.iter().map(|t| t.dscp).collect();
        assert_eq!(marks, [None, Some(46)]);
        r.fars[2].dscp = Some(46);
        assert_eq!(
            compile(&r, &n3).map(|_| ()),
            Err(Refused::rule(
                FailedRuleId::Far(3),
                Some(IeType::TRANSPORT_LEVEL_MARKING)
            ))
        );
    }

    /// What N9 cannot carry is refused by the rule and IE at fault.
    #[test]
    fn what_n9_cannot_carry_is_refused() {
        let n3 = [(N3, 3)];
        let refused = |edit: &dyn Fn(&mut Rules), id: u16, ie: IeType| {
            let mut r = ulcl();
            edit(&mut r);
            assert_eq!(
                compile(&r, &n3).map(|_| ()),
                Err(Refused::rule(FailedRuleId::Pdr(id), Some(ie))),
            );
        };
        refused(
            &|r| r.pdrs[3].outer_header_removal = None,
            4,
            IeType::OUTER_HEADER_REMOVAL,
        );
        refused(
            &|r| r.pdrs[3].local.as_mut().unwrap().teid = 0x55,
            4,
            IeType::F_TEID,
        );
        refused(
            &|r| r.pdrs[3].local.as_mut().unwrap().v4 = Some(PSA),
            4,
            IeType::F_TEID,
        );
        refused(&|r| r.pdrs[3].qfi = Some(9), 4, IeType::QFI);
        // Buffering with no UE address to release the packets by.
        let mut r = ulcl();
        r.fars[1].action = node::Action::Buffer { notify_cp: true };
        assert!(compile(&r, &n3).is_ok(), "the N6 PDR names the UE");
        r.pdrs.remove(1);
        assert_eq!(
            compile(&r, &n3).map(|_| ()),
            Err(Refused::rule(
                FailedRuleId::Far(2),
                Some(IeType::APPLY_ACTION)
            ))
        );
        // Downlink rules classify by filters alone: a packet from N9
        // could take an N6 PDR's rule.
        refused(
            &|r| {
                let mut v = r.pdrs[1].clone();
                (v.id, v.precedence) = (5, 1);
                v.sdf = vec![voice()];
                v.qers = Ids::new(&[]).unwrap();
                r.pdrs.push(v);
            },
            4,
            IeType::F_TEID,
        );
        // To Access on the uplink: not N9.
        let mut r = ulcl();
        r.fars[0].destination = Some(Interface::ACCESS);
        assert_eq!(
            compile(&r, &n3).map(|_| ()),
            Err(Refused::rule(
                FailedRuleId::Far(1),
                Some(IeType::DESTINATION_INTERFACE)
            ))
        );
    }

    /// A URR counts the PDRs it is on: URR 1 on every PDR sees all the
    /// session's packets, URR 2 on the voice PDR only sees the voice
    /// rule's (and nothing uplink, its PDR being downlink); a URR keeps
    /// what it counted over a modification; PDRs of one treatment under
    /// different URRs become rules of their own.
    #[test]
    fn a_urr_counts_the_pdrs_it_is_on() {
        let (sessions, links) = Sessions::new(16, 1, vec![false]);
        let mut worker = SessionTable::new(links[0].clone());
        let mut up = UpfPlane::new(sessions, vec![(N3, 0)]);
        let mut r = rules(node::Action::Forward);
        let mut voice_dl = r.pdrs[1].clone();
        (voice_dl.id, voice_dl.precedence) = (3, 10);
        voice_dl.sdf = vec![voice()];
        r.pdrs.push(voice_dl);
        r.urrs = vec![urr(1), urr(2)];
        for p in &mut r.pdrs {
            p.urrs = Ids::new(&[1]).unwrap();
        }
        r.pdrs[2].urrs = Ids::new(&[1, 2]).unwrap();
        let install = |up: &mut UpfPlane, w: &mut SessionTable, r: &Rules| {
            up.apply(Change::Install { seid: 7, rules: r }).unwrap();
            up.publish();
            w.apply_pending(&mut Vec::new());
        };
        install(&mut up, &mut worker, &r);
        let slot = up.by_seid[&7].slot;
        let counter = |up: &UpfPlane, pdr| up.sessions.rule_counter(slot, false, pdr).unwrap();
        let (default, voice) = (counter(&up, 2), counter(&up, 3));
        // What the workers count for an uplink packet, a downlink one of
        // the default rule and one of the voice rule.
        let traffic = |w: &SessionTable, dl: u64, v: u64| {
            w.count_uplink(slot, 100);
            w.count_downlink(slot, dl as usize);
            w.count_rule(default, dl as usize);
            w.count_downlink(slot, v as usize);
            w.count_rule(voice, v as usize);
        };
        traffic(&worker, 1000, 300);
        let a = up.take_usage(7, 1);
        assert_eq!(
            (a.uplink_bytes, a.downlink_packets, a.downlink_bytes),
            (100, 2, 1300)
        );
        let b = up.take_usage(7, 2);
        assert_eq!(
            (b.uplink_packets, b.downlink_packets, b.downlink_bytes),
            (0, 1, 300)
        );
        // Counted, then modified (the same PDRs): nothing lost.
        traffic(&worker, 1000, 50);
        install(&mut up, &mut worker, &r);
        assert_eq!(counter(&up, 3), voice, "the voice PDR's counter stays");
        assert_eq!(up.take_usage(7, 2).downlink_bytes, 50);
        // URR 2 moved to the default PDR: from now on, its packets.
        r.pdrs[2].urrs = Ids::new(&[1]).unwrap();
        r.pdrs[1].urrs = Ids::new(&[1, 2]).unwrap();
        install(&mut up, &mut worker, &r);
        traffic(&worker, 1000, 7);
        assert_eq!(up.take_usage(7, 2).downlink_bytes, 1000);
        assert_eq!(up.take_usage(7, 1).downlink_bytes, 1050 + 1007);
        // Both URRs on every PDR again: the rules keep no counters (a
        // write per packet saved), the session's counts are each URR's.
        for p in &mut r.pdrs {
            p.urrs = Ids::new(&[1, 2]).unwrap();
        }
        install(&mut up, &mut worker, &r);
        assert_eq!(up.sessions.rule_counter(slot, false, 3), None);
        worker.count_downlink(slot, 400);
        assert_eq!(up.take_usage(7, 2).downlink_bytes, 400);
        // Two uplink flows with one FAR, URR 2 on one of them: a rule
        // each, so that its counts are its own.
        let mut second = r.pdrs[0].clone();
        (second.id, second.qfi) = (4, Some(5));
        second.urrs = Ids::new(&[1, 2]).unwrap();
        r.pdrs[0].urrs = Ids::new(&[1]).unwrap();
        r.pdrs.push(second);
        let (spec, _) = compile(&r, &[(N3, 0)]).unwrap();
        let keys: Vec<u32> = spec.rules.uplink_tags.iter().map(|t| t.key).collect();
        assert_eq!(keys, [1, 4]);
    }

    /// A downlink FAR's marking is the session's outer DSCP, or its
    /// rule's where the PDRs' FARs mark differently; an uplink FAR's is
    /// refused.
    #[test]
    fn transport_level_marking_compiles_to_the_outer_dscp() {
        let n3 = [(N3, 3)];
        let mut r = rules(node::Action::Forward);
        r.fars[1].dscp = Some(46);
        let (spec, _) = compile(&r, &n3).unwrap();
        assert_eq!(spec.rules.dscp, Some(46));
        assert!(spec.rules.downlink.is_empty(), "one treatment");
        // A voice PDR whose FAR marks EF beside the default one's AF41.
        let mut voice_dl = r.pdrs[1].clone();
        (voice_dl.id, voice_dl.precedence, voice_dl.far) = (3, 10, 3);
        voice_dl.sdf = vec![voice()];
        r.pdrs.push(voice_dl);
        r.fars.push(Far {
            id: 3,
            dscp: Some(34),
            ..r.fars[1]
        });
        let (spec, _) = compile(&r, &n3).unwrap();
        let marks: Vec<_> = spec.rules.downlink_tags.iter().map(|t| t.dscp).collect();
        assert_eq!(marks, [Some(34), Some(46)]);
        // The same filters and FARs but for the mark: still two rules.
        r.pdrs[2].sdf.clear();
        assert_eq!(compile(&r, &n3).unwrap().0.rules.downlink.len(), 2);
        r.fars[0].dscp = Some(46);
        assert_eq!(
            compile(&r, &n3).map(|_| ()),
            Err(Refused::rule(
                FailedRuleId::Far(1),
                Some(IeType::TRANSPORT_LEVEL_MARKING)
            ))
        );
    }

    /// The sessions' GBRs are summed for `show pfcp` as sessions come,
    /// change and go (recorded, not enforced).
    #[test]
    fn gbrs_are_summed_over_the_sessions() {
        let (sessions, _links) = Sessions::new(16, 1, vec![false]);
        let mut up = UpfPlane::new(sessions, vec![(N3, 0)]);
        let mut r = rules(node::Action::Forward);
        r.qers[0].gbr = Some(tep_pfcp::types::Gbr { ul: 64, dl: 128 });
        up.apply(Change::Install { seid: 7, rules: &r }).unwrap();
        let mut other = rules(node::Action::Forward);
        other.pdrs[0].local.as_mut().unwrap().teid = 0x56;
        other.pdrs[1].ue_ip.as_mut().unwrap().v4 = Some(Ipv4Addr::new(10, 45, 0, 8));
        other.qers[0].gbr = Some(tep_pfcp::types::Gbr { ul: 1, dl: 2 });
        up.apply(Change::Install {
            seid: 8,
            rules: &other,
        })
        .unwrap();
        let total = |up: &UpfPlane| {
            let g = up.gbr();
            (g.qers, g.uplink_kbps, g.downlink_kbps)
        };
        assert_eq!(total(&up), (2, 65, 130));
        r.qers[0].gbr = Some(tep_pfcp::types::Gbr { ul: 10, dl: 20 });
        up.apply(Change::Install { seid: 7, rules: &r }).unwrap();
        assert_eq!(total(&up), (2, 11, 22));
        up.apply(Change::Remove { seid: 8 }).unwrap();
        assert_eq!(total(&up), (1, 10, 20));
    }

    fn urr(id: u32) -> node::Urr {
        let mut r = Rules::default();
        let c = tep_pfcp::rules::CreateUrr {
            urr_id: tep_pfcp::types::UrrId(id),
            measurement_method: tep_pfcp::types::MeasurementMethod(
                tep_pfcp::types::MeasurementMethod::VOLUM,
            ),
            ..Default::default()
        };
        node::session::create_urr(&mut r, &c, false).unwrap();
        r.urrs[0]
    }

    #[test]
    fn sessions_installed_modified_reported_and_removed() {
        let (sessions, links) = Sessions::new(16, 1, vec![false]);
        let link: WorkerLink = links[0].clone();
        let mut worker = SessionTable::new(link);
        let mut up = UpfPlane::new(sessions, vec![(N3, 0)]);
        let mut applied = Vec::new();
        let mut r = rules(node::Action::Buffer { notify_cp: true });
        with_urrs(&mut r, &[1]);
        up.apply(Change::Install { seid: 7, rules: &r }).unwrap();
        up.publish();
        worker.apply_pending(&mut applied);
        let slot = worker.uplink(0x55, None).unwrap();
        assert_eq!(worker.downlink(false, 0x0a2d_0007), Some(slot));
        assert_eq!(worker.get(slot).downlink, Action::Buffer);
        assert_eq!(up.report_of(slot), Some((7, 2)));
        // Usage is what was counted since the last report.
        worker.count_uplink(slot, 100);
        worker.count_downlink(slot, 1000);
        let u = up.take_usage(7, 1);
        assert_eq!(
            (u.uplink_packets, u.uplink_bytes, u.downlink_bytes),
            (1, 100, 1000)
        );
        worker.count_uplink(slot, 50);
        assert_eq!(up.take_usage(7, 1).uplink_bytes, 50);
        // A second URR counts from its creation, apart from the first.
        let mut two = r.clone();
        with_urrs(&mut two, &[1, 2]);
        up.apply(Change::Install {
            seid: 7,
            rules: &two,
        })
        .unwrap();
        worker.count_uplink(slot, 30);
        assert_eq!(up.take_usage(7, 2).uplink_bytes, 30);
        worker.count_uplink(slot, 20);
        assert_eq!(up.take_usage(7, 1).uplink_bytes, 50);
        assert_eq!(up.take_usage(7, 2).uplink_bytes, 20);
        assert_eq!(up.take_usage(7, 9), Usage::default(), "no such URR");
        // Modified to forward; an End Marker to the old peer.
        let fwd = rules(node::Action::Forward);
        up.apply(Change::Install {
            seid: 7,
            rules: &fwd,
        })
        .unwrap();
        let old = fwd.fars[1].outer.unwrap();
        up.apply(Change::EndMarker {
            seid: 7,
            far: 2,
            old,
        })
        .unwrap();
        up.publish();
        worker.apply_pending(&mut applied);
        assert_eq!(worker.get(slot).downlink, Action::Forward);
        assert!(applied.iter().any(|c| matches!(
            c,
            tep_dataplane::session::Change::EndMarker { teid: 0x77, .. }
        )));
        up.apply(Change::Remove { seid: 7 }).unwrap();
        up.publish();
        worker.apply_pending(&mut applied);
        assert_eq!(worker.uplink(0x55, None), None);
        assert!(up.is_empty());
        assert_eq!(up.report_of(slot), None);
    }
}
