//! A session's rules as the user plane needs them, and their edits by
//! Session Establishment and Modification Requests (TS 29.244 §5.2, §7.5).
//!
//! The rules are resolved values, not the messages' IEs: a PDR names its
//! match (local F-TEID with the TEID tep chose, or UE address/prefix) and
//! its FAR; a FAR says forward (with the GTP-U peer), drop or buffer. The
//! node edits a copy and hands the whole set to the user plane, which
//! replaces the session's entry in one step.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::flow::FlowDescription;
use crate::ie::IeType;
use crate::rules::{CreateBar, CreateFar, CreatePdr, CreateQer, CreateUrr, Pdi, UpdateFar};
use crate::rules::{UpdateBar, UpdatePdr, UpdateQer, UpdateUrr};
use crate::types::*;

use super::Counter;

/// Most QER or URR IDs one PDR names.
pub const MAX_IDS: usize = 4;
/// Most rules of each kind in one session (a PDU session has a handful).
pub const MAX_RULES: usize = 32;

/// Up to [`MAX_IDS`] rule IDs, inline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Ids {
    len: u8,
    ids: [u32; MAX_IDS],
}

impl Ids {
    /// `None` past [`MAX_IDS`].
    pub fn new(ids: &[u32]) -> Option<Ids> {
        if ids.len() > MAX_IDS {
            return None;
        }
        let mut a = [0; MAX_IDS];
        a[..ids.len()].copy_from_slice(ids);
        Some(Ids {
            len: ids.len() as u8,
            ids: a,
        })
    }

    pub fn as_slice(&self) -> &[u32] {
        &self.ids[..self.len as usize]
    }
}

/// The local F-TEID an uplink PDR matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LocalFTeid {
    pub teid: u32,
    pub v4: Option<Ipv4Addr>,
    pub v6: Option<Ipv6Addr>,
}

/// The UE address a downlink PDR matches: IPv4 /32, and/or an IPv6 prefix
/// (/64 unless the SMF said otherwise, /128 for one address).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UeIp {
    pub v4: Option<Ipv4Addr>,
    pub v6: Option<Ipv6Addr>,
    pub v6_prefix_len: u8,
}

/// A Packet Detection Rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pdr {
    pub id: u16,
    /// Lower matches first among a session's PDRs.
    pub precedence: u32,
    /// Access (uplink from N3), Core (N9), N6-LAN (downlink), CP-function.
    pub source: Interface,
    /// Uplink match: packets to this TEID (and address).
    pub local: Option<LocalFTeid>,
    /// Downlink match: packets to this UE address or prefix.
    pub ue_ip: Option<UeIp>,
    /// Match only this QFI (uplink, from the PDU Session Container).
    pub qfi: Option<u8>,
    /// Match only packets one of these filters takes (none: any packet).
    pub sdf: Vec<Sdf>,
    /// Strip the outer GTP-U/UDP/IP header (uplink).
    pub outer_header_removal: Option<OuterHeaderRemoval>,
    pub far: u32,
    pub qers: Ids,
    pub urrs: Ids,
    /// The PDI's Network Instance: the data network it matches in.
    pub network: Option<NetworkName>,
}

/// Most SDF Filters one PDR holds (a PCC rule has a few; each is checked
/// per packet).
pub const MAX_SDF_FILTERS: usize = 8;

/// An SDF Filter (§8.2.5) as checked: its Flow Description parsed. A
/// packet matches when it matches every field given.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Sdf {
    /// Protocol, addresses and ports, written for the downlink.
    pub flow: Option<FlowDescription>,
    /// ToS / Traffic Class value and mask.
    pub tos: Option<(u8, u8)>,
    /// IPsec SPI.
    pub spi: Option<u32>,
    /// IPv6 Flow Label.
    pub flow_label: Option<u32>,
    /// The SDF Filter ID (informational: tep keeps no filters by ID).
    pub id: Option<u32>,
}

impl Sdf {
    /// A PDR's filter, checked; None for what tep does not apply: a Flow
    /// Description outside [`crate::flow`]'s subset, or a filter with no
    /// field to match (an SDF Filter ID alone refers to a filter the SMF
    /// provisioned earlier, which tep does not keep).
    pub fn of(f: &SdfFilter) -> Option<Sdf> {
        let flow = match &f.flow_description {
            Some(d) => Some(FlowDescription::parse(d).ok()?),
            None => None,
        };
        let matches = flow.is_some()
            || f.tos_traffic_class.is_some()
            || f.spi.is_some()
            || f.flow_label.is_some();
        matches.then_some(Sdf {
            flow,
            tos: f.tos_traffic_class,
            spi: f.spi,
            flow_label: f.flow_label,
            id: f.filter_id,
        })
    }
}

/// What a FAR does with a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Forward,
    Drop,
    /// Hold downlink packets (idle UE); `notify_cp`: NOCP, report the first
    /// one to the SMF (the daemon calls `Node::downlink_data`).
    Buffer {
        notify_cp: bool,
    },
}

/// The GTP-U tunnel a forwarded packet is put in: peer TEID and address
/// (IPv4 and/or IPv6; with both the user plane picks its family).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OuterHeader {
    pub teid: u32,
    pub v4: Option<Ipv4Addr>,
    pub v6: Option<Ipv6Addr>,
}

impl OuterHeader {
    /// The peer address, IPv4 preferred.
    pub fn addr(&self) -> IpAddr {
        self.v4
            .map(IpAddr::V4)
            .or(self.v6.map(IpAddr::V6))
            .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED))
    }
}

/// A Forwarding Action Rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Far {
    pub id: u32,
    pub action: Action,
    /// Where forwarded packets go (Access: to the gNB, with `outer`;
    /// Core/N6-LAN: out of the tunnel).
    pub destination: Option<Interface>,
    pub outer: Option<OuterHeader>,
    /// The BAR whose parameters the packets it buffers follow (the
    /// session's, [`Rules::bar`]).
    pub bar: Option<u8>,
    /// The Forwarding Parameters' Network Instance: the data network it
    /// forwards into.
    pub network: Option<NetworkName>,
    /// The DSCP of the outer header of the packets it sends (Transport
    /// Level Marking); None: the N3 tunnel's.
    pub dscp: Option<u8>,
}

/// A Buffering Action Rule: how the packets of the FARs that name it are
/// held (TS 29.244 §5.2.4: one per session).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bar {
    pub id: u8,
    /// How long after the first packet is held the Downlink Data Report
    /// goes, in units of 50 ms (0: at once).
    pub ddn_delay: u8,
    /// Most packets held (the user plane's own bound still caps it).
    pub suggested_packets: Option<u8>,
}

impl Bar {
    /// The Downlink Data Notification Delay as a duration.
    pub fn delay(&self) -> std::time::Duration {
        std::time::Duration::from_millis(u64::from(self.ddn_delay) * 50)
    }
}

/// A QoS Enforcement Rule: gates, maximum bit rates and the QFI to mark
/// downlink packets with (PDU Session Container).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Qer {
    pub id: u32,
    pub ul_open: bool,
    pub dl_open: bool,
    /// MBR, kbit/s each way (§8.2.8).
    pub mbr: Option<Mbr>,
    /// GBR, kbit/s each way (§8.2.9): recorded and shown, not enforced.
    /// Guaranteeing a rate is admission control, which is the SMF's and
    /// the RAN's (TS 23.501 §5.7.2.2); the UPF's part of a GBR flow is
    /// its MBR, which is enforced.
    pub gbr: Option<Gbr>,
    pub qfi: Option<u8>,
}

/// A Usage Reporting Rule: tep measures volume (packets and octets each
/// way) and duration, reports on deletion, on Query URR and when the URR
/// is removed, and on the triggers of [`super::usage`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Urr {
    pub id: u32,
    /// VOLUM is set in the Measurement Method.
    pub volume: bool,
    /// DURAT is set in the Measurement Method.
    pub duration: bool,
    pub reporting_triggers: ReportingTriggers,
    /// Seconds between periodic reports (PERIO).
    pub measurement_period: Option<u32>,
    pub volume_threshold: Option<VolumeThreshold>,
    pub volume_quota: Option<VolumeQuota>,
    /// Seconds (TIMTH).
    pub time_threshold: Option<u32>,
    /// Seconds.
    pub time_quota: Option<u32>,
    /// Seconds without a packet that stop the traffic (duration, STOPT).
    pub inactivity: Option<u32>,
    /// The measurement so far.
    pub(crate) meter: super::usage::Meter,
}

/// A session's rules.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rules {
    pub pdrs: Vec<Pdr>,
    pub fars: Vec<Far>,
    pub qers: Vec<Qer>,
    pub urrs: Vec<Urr>,
    /// The session's BAR.
    pub bar: Option<Bar>,
}

impl Rules {
    pub fn pdr(&self, id: u16) -> Option<&Pdr> {
        self.pdrs.iter().find(|p| p.id == id)
    }

    pub fn far(&self, id: u32) -> Option<&Far> {
        self.fars.iter().find(|f| f.id == id)
    }

    pub fn qer(&self, id: u32) -> Option<&Qer> {
        self.qers.iter().find(|q| q.id == id)
    }

    pub fn urr(&self, id: u32) -> Option<&Urr> {
        self.urrs.iter().find(|u| u.id == id)
    }

    /// The BAR FAR `far` buffers under, if it names the session's.
    pub fn bar_of(&self, far: &Far) -> Option<&Bar> {
        self.bar.as_ref().filter(|b| far.bar == Some(b.id))
    }

    /// The BAR a buffering FAR of the session names: what bounds the
    /// packets the session holds.
    pub fn buffering_bar(&self) -> Option<&Bar> {
        self.fars
            .iter()
            .filter(|f| matches!(f.action, Action::Buffer { .. }))
            .find_map(|f| self.bar_of(f))
    }

    /// The QFI a PDR's downlink packets carry: from the first of its QERs
    /// that sets one.
    pub fn qfi(&self, pdr: &Pdr) -> Option<u8> {
        pdr.qers
            .as_slice()
            .iter()
            .filter_map(|&q| self.qer(q))
            .find_map(|q| q.qfi)
    }

    /// Whether the PDR's QERs leave the gate open (uplink or downlink).
    pub fn gate_open(&self, pdr: &Pdr, uplink: bool) -> bool {
        pdr.qers
            .as_slice()
            .iter()
            .filter_map(|&q| self.qer(q))
            .all(|q| if uplink { q.ul_open } else { q.dl_open })
    }

    /// Gives back the lists' spare capacity: a session's rules are built
    /// once per request and then kept, possibly for days.
    pub(crate) fn shrink(&mut self) {
        self.pdrs.shrink_to_fit();
        self.fars.shrink_to_fit();
        self.qers.shrink_to_fit();
        self.urrs.shrink_to_fit();
    }

    /// URRs created by the request being accepted start measuring `at`
    /// (NTP seconds), `now`.
    pub(crate) fn start_measuring(&mut self, at: u32, now: std::time::Instant) {
        for u in &mut self.urrs {
            u.start(at, now);
        }
    }

    /// Whether a URR's quota is used up (the PDRs under it forward nothing).
    pub fn quota_exhausted(&self) -> bool {
        self.urrs.iter().any(|u| u.exhausted())
    }

    /// Whether usage scans must watch the session.
    pub fn usage_watched(&self) -> bool {
        self.urrs.iter().any(|u| u.watched())
    }

    /// Every local TEID the session's PDRs match.
    pub fn teids(&self) -> impl Iterator<Item = u32> + '_ {
        self.pdrs.iter().filter_map(|p| p.local.map(|l| l.teid))
    }
}

/// Why an edit failed: the response's Cause, Offending IE and Failed Rule
/// ID, and the counter it goes under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reject {
    pub cause: Cause,
    pub offending: Option<IeType>,
    pub failed_rule: Option<FailedRuleId>,
    pub counter: Counter,
}

impl Reject {
    pub fn rule(rule: FailedRuleId) -> Self {
        Reject {
            cause: Cause::RULE_CREATION_MODIFICATION_FAILURE,
            offending: None,
            failed_rule: Some(rule),
            counter: Counter::RuleFailure,
        }
    }

    /// Rule `rule` asks for something tep does not do: IE `ie` (a child
    /// it does not apply, or a flag or value of one it does). TS 29.244
    /// §7.5.3.1/§7.5.5.1 ask for the Failed Rule ID with this cause; the
    /// Offending IE, which they ask for only with a missing or faulty IE,
    /// is added to say which IE (nothing forbids it, and an SMF's log
    /// needs it).
    pub fn unsupported(rule: FailedRuleId, ie: IeType) -> Self {
        Reject {
            cause: Cause::RULE_CREATION_MODIFICATION_FAILURE,
            offending: Some(ie),
            failed_rule: Some(rule),
            counter: Counter::UnsupportedIe,
        }
    }

    pub fn conditional(ie: IeType) -> Self {
        Reject {
            cause: Cause::CONDITIONAL_IE_MISSING,
            offending: Some(ie),
            failed_rule: None,
            counter: Counter::ConditionalIeMissing,
        }
    }

    pub fn too_many(ie: IeType) -> Self {
        Reject {
            cause: Cause::REQUEST_REJECTED,
            offending: Some(ie),
            failed_rule: None,
            counter: Counter::TooManyRules,
        }
    }

    pub fn simple(cause: Cause, offending: Option<IeType>, counter: Counter) -> Self {
        Reject {
            cause,
            offending,
            failed_rule: None,
            counter,
        }
    }
}

/// A CHOOSE F-TEID waiting for a TEID, by PDR.
#[derive(Clone, Copy, Debug)]
pub struct Choose {
    pub pdr: u16,
    pub v4: bool,
    pub v6: bool,
    pub choose_id: Option<u8>,
}

/// An SMF-chosen TEID to reserve, by PDR.
#[derive(Clone, Copy, Debug)]
pub struct Assigned {
    pub pdr: u16,
    pub teid: u32,
}

/// An End Marker to send: the FAR's old tunnel (SNDEM).
#[derive(Clone, Copy, Debug)]
pub struct EndMarkerTo {
    pub far: u32,
    pub old: OuterHeader,
}

/// Edits of one request, collected beside the rules.
#[derive(Debug, Default)]
pub struct Pending {
    pub choose: Vec<Choose>,
    pub assigned: Vec<Assigned>,
    pub end_markers: Vec<EndMarkerTo>,
}

fn ids(list: &[u32], ie: IeType) -> Result<Ids, Reject> {
    Ids::new(list).ok_or(Reject::too_many(ie))
}

/// A PDI's SDF Filters, or the PDR refused (Rule creation/modification
/// Failure, the Offending IE SDF Filter) for one tep cannot apply or for
/// more than [`MAX_SDF_FILTERS`].
fn sdf_filters(pdr: u16, list: &[SdfFilter]) -> Result<Vec<Sdf>, Reject> {
    let refuse = || Reject::unsupported(FailedRuleId::Pdr(pdr), IeType::SDF_FILTER);
    if list.len() > MAX_SDF_FILTERS {
        return Err(refuse());
    }
    list.iter().map(|f| Sdf::of(f).ok_or_else(refuse)).collect()
}

fn apply_pdi(pdr: &mut Pdr, pdi: &Pdi, pending: &mut Pending) -> Result<(), Reject> {
    pdr.source = pdi.source_interface.0;
    pdr.network = pdi.network_instance.as_ref().map(NetworkInstance::name);
    pdr.qfi = pdi.qfi.map(|q| q.0);
    pdr.sdf = sdf_filters(pdr.id, &pdi.sdf_filters)?;
    pdr.local = None;
    match pdi.local_f_teid {
        Some(FTeid::Choose { v4, v6, choose_id }) => {
            pending.choose.push(Choose {
                pdr: pdr.id,
                v4,
                v6,
                choose_id,
            });
            // Filled in when the TEID is allocated.
            pdr.local = Some(LocalFTeid {
                teid: 0,
                v4: None,
                v6: None,
            });
        }
        Some(FTeid::Assigned { teid, v4, v6 }) => {
            pending.assigned.push(Assigned { pdr: pdr.id, teid });
            pdr.local = Some(LocalFTeid { teid, v4, v6 });
        }
        None => {}
    }
    pdr.ue_ip = match pdi.ue_ip_address {
        Some(u) if u.choose_v4 || u.choose_v6 => {
            // tep does not allocate UE addresses.
            return Err(Reject::rule(FailedRuleId::Pdr(pdr.id)));
        }
        // S/D says which end of the packet is the UE: the source of what
        // comes from Access, the destination of what comes from the core.
        // The other way round is a match tep's user plane never makes.
        Some(u) if u.destination == (pdr.source == Interface::ACCESS) => {
            return Err(Reject::unsupported(
                FailedRuleId::Pdr(pdr.id),
                IeType::UE_IP_ADDRESS,
            ));
        }
        Some(u) if u.v4.is_some() || u.v6.is_some() => Some(UeIp {
            v4: u.v4,
            v6: u.v6,
            v6_prefix_len: u.v6_match_len(),
        }),
        Some(_) => {
            return Err(Reject::simple(
                Cause::MANDATORY_IE_INCORRECT,
                Some(IeType::UE_IP_ADDRESS),
                Counter::MandatoryIeIncorrect,
            ))
        }
        None => None,
    };
    Ok(())
}

/// The rules of a message's Create FAR, QER, URR and PDR IEs (an
/// establishment or a modification), in that order: a PDR names its FAR,
/// QERs and URRs, so they exist before it.
/// `scans`: whether the daemon runs usage scans ([`create_urr`]).
pub fn create_all(
    r: &mut Rules,
    pending: &mut Pending,
    (fars, qers, urrs, pdrs): (&[CreateFar], &[CreateQer], &[CreateUrr], &[CreatePdr]),
    scans: bool,
) -> Result<(), Reject> {
    for c in fars {
        create_far(r, c)?;
    }
    for c in qers {
        create_qer(r, c)?;
    }
    for c in urrs {
        create_urr(r, c, scans)?;
    }
    for c in pdrs {
        create_pdr(r, c, pending)?;
    }
    Ok(())
}

pub fn create_pdr(r: &mut Rules, c: &CreatePdr, pending: &mut Pending) -> Result<(), Reject> {
    if r.pdr(c.pdr_id.0).is_some() {
        return Err(Reject::rule(FailedRuleId::Pdr(c.pdr_id.0)));
    }
    if r.pdrs.len() >= MAX_RULES {
        return Err(Reject::too_many(IeType::CREATE_PDR));
    }
    let far = c.far_id.ok_or(Reject::conditional(IeType::FAR_ID))?.0;
    let mut pdr = Pdr {
        id: c.pdr_id.0,
        precedence: c.precedence.0,
        source: Interface::ACCESS,
        local: None,
        ue_ip: None,
        qfi: None,
        sdf: Vec::new(),
        outer_header_removal: c.outer_header_removal,
        far,
        qers: ids(
            &c.qer_ids.iter().map(|q| q.0).collect::<Vec<_>>(),
            IeType::QER_ID,
        )?,
        urrs: ids(
            &c.urr_ids.iter().map(|q| q.0).collect::<Vec<_>>(),
            IeType::URR_ID,
        )?,
        network: None,
    };
    apply_pdi(&mut pdr, &c.pdi, pending)?;
    r.pdrs.push(pdr);
    Ok(())
}

pub fn update_pdr(r: &mut Rules, u: &UpdatePdr, pending: &mut Pending) -> Result<(), Reject> {
    let id = u.pdr_id.0;
    let Some(pdr) = r.pdrs.iter_mut().find(|p| p.id == id) else {
        return Err(Reject::rule(FailedRuleId::Pdr(id)));
    };
    if let Some(o) = u.outer_header_removal {
        pdr.outer_header_removal = Some(o);
    }
    if let Some(p) = u.precedence {
        pdr.precedence = p.0;
    }
    if let Some(f) = u.far_id {
        pdr.far = f.0;
    }
    if !u.qer_ids.is_empty() {
        pdr.qers = ids(
            &u.qer_ids.iter().map(|q| q.0).collect::<Vec<_>>(),
            IeType::QER_ID,
        )?;
    }
    if !u.urr_ids.is_empty() {
        pdr.urrs = ids(
            &u.urr_ids.iter().map(|q| q.0).collect::<Vec<_>>(),
            IeType::URR_ID,
        )?;
    }
    if let Some(pdi) = &u.pdi {
        // A PDI that keeps the same SMF-chosen F-TEID is no new reservation.
        let old = pdr.local;
        apply_pdi(pdr, pdi, pending)?;
        if let (Some(o), Some(a)) = (old, pending.assigned.last()) {
            if a.pdr == id && a.teid == o.teid {
                pending.assigned.pop();
            }
        }
    }
    Ok(())
}

/// Apply Action flags tep enforces: forward, drop, buffer in the UP and
/// notify the CP of the first buffered packet. DUPL (duplicate to LI),
/// IPMA/IPMD (multicast), DFRT/EDRT (redundant transmission), BDPN/DDPN
/// (notification policies) are refused.
const APPLIED_ACTIONS: u64 =
    ApplyAction::FORW | ApplyAction::DROP | ApplyAction::BUFF | ApplyAction::NOCP;

fn far_action(bits: ApplyAction, far: u32) -> Result<Action, Reject> {
    if bits.0.bits & !APPLIED_ACTIONS != 0 {
        return Err(Reject::unsupported(
            FailedRuleId::Far(far),
            IeType::APPLY_ACTION,
        ));
    }
    if bits.has(ApplyAction::FORW) {
        Ok(Action::Forward)
    } else if bits.has(ApplyAction::DROP) {
        Ok(Action::Drop)
    } else if bits.has(ApplyAction::BUFF) {
        Ok(Action::Buffer {
            notify_cp: bits.has(ApplyAction::NOCP),
        })
    } else {
        // IPMA/IPMD (multicast): not a UPF feature tep has.
        Err(Reject::rule(FailedRuleId::Far(far)))
    }
}

fn outer(o: &OuterHeaderCreation, far: u32) -> Result<OuterHeader, Reject> {
    let gtpu = OuterHeaderCreation::GTPU_UDP_IPV4 | OuterHeaderCreation::GTPU_UDP_IPV6;
    if o.desc & gtpu == 0 || o.desc & !gtpu != 0 {
        // Plain UDP/IP, VLAN tags, the N19/N6 indications (5G VN groups):
        // tep creates GTP-U headers only.
        return Err(Reject::unsupported(
            FailedRuleId::Far(far),
            IeType::OUTER_HEADER_CREATION,
        ));
    }
    Ok(OuterHeader {
        teid: o.teid.unwrap_or(0),
        v4: o
            .v4
            .filter(|_| o.desc & OuterHeaderCreation::GTPU_UDP_IPV4 != 0),
        v6: o
            .v6
            .filter(|_| o.desc & OuterHeaderCreation::GTPU_UDP_IPV6 != 0),
    })
}

pub fn create_far(r: &mut Rules, c: &CreateFar) -> Result<(), Reject> {
    let id = c.far_id.0;
    if r.far(id).is_some() {
        return Err(Reject::rule(FailedRuleId::Far(id)));
    }
    if r.fars.len() >= MAX_RULES {
        return Err(Reject::too_many(IeType::CREATE_FAR));
    }
    let fp = c.forwarding_parameters.as_ref();
    r.fars.push(Far {
        id,
        action: far_action(c.apply_action, id)?,
        destination: fp.map(|f| f.destination_interface.0),
        outer: match fp.and_then(|f| f.outer_header_creation.as_ref()) {
            Some(o) => Some(outer(o, id)?),
            None => None,
        },
        bar: c.bar_id.map(|b| b.0),
        network: fp
            .and_then(|f| f.network_instance.as_ref())
            .map(NetworkInstance::name),
        dscp: match fp.and_then(|f| f.transport_level_marking) {
            Some(m) => dscp(m, id)?,
            None => None,
        },
    });
    Ok(())
}

/// The outer DSCP a Transport Level Marking sets: its value's upper six
/// bits under a mask of all of them (TS 29.212 §5.3.15: "0xFC"; the ECN
/// bits are the inner packet's, RFC 6040), nothing under a mask of none.
/// A mask of some DSCP bits would keep the others from each packet's
/// inner header: refused.
fn dscp(m: TransportLevelMarking, far: u32) -> Result<Option<u8>, Reject> {
    match m.mask & 0xfc {
        0xfc => Ok(Some(m.tos >> 2)),
        0 => Ok(None),
        _ => Err(Reject::unsupported(
            FailedRuleId::Far(far),
            IeType::TRANSPORT_LEVEL_MARKING,
        )),
    }
}

pub fn update_far(r: &mut Rules, u: &UpdateFar, pending: &mut Pending) -> Result<(), Reject> {
    let id = u.far_id.0;
    let Some(far) = r.fars.iter_mut().find(|f| f.id == id) else {
        return Err(Reject::rule(FailedRuleId::Far(id)));
    };
    if let Some(a) = u.apply_action {
        far.action = far_action(a, id)?;
    }
    if let Some(b) = u.bar_id {
        far.bar = Some(b.0);
    }
    if let Some(p) = &u.update_forwarding_parameters {
        if let Some(d) = p.destination_interface {
            far.destination = Some(d.0);
        }
        if let Some(n) = &p.network_instance {
            far.network = Some(n.name());
        }
        if p.flags.is_some_and(|f| f.0 & !PfcpsmReqFlags::SNDEM != 0) {
            // DROBU and QUARR belong to the message, not to a FAR.
            return Err(Reject::unsupported(
                FailedRuleId::Far(id),
                IeType::PFCPSMREQ_FLAGS,
            ));
        }
        if let Some(m) = p.transport_level_marking {
            far.dscp = dscp(m, id)?;
        }
        if let Some(o) = &p.outer_header_creation {
            let new = outer(o, id)?;
            let sndem = p.flags.is_some_and(|f| f.0 & PfcpsmReqFlags::SNDEM != 0);
            if let Some(old) = far.outer.filter(|&old| sndem && old != new) {
                pending.end_markers.push(EndMarkerTo { far: id, old });
            }
            far.outer = Some(new);
        }
    }
    Ok(())
}

fn qer_from(c: &CreateQer) -> Qer {
    Qer {
        id: c.qer_id.0,
        ul_open: c.gate_status.ul == GateStatus::OPEN,
        dl_open: c.gate_status.dl == GateStatus::OPEN,
        mbr: c.mbr,
        gbr: c.gbr,
        qfi: c.qfi.map(|q| q.0),
    }
}

pub fn create_qer(r: &mut Rules, c: &CreateQer) -> Result<(), Reject> {
    let id = c.qer_id.0;
    if r.qer(id).is_some() {
        return Err(Reject::rule(FailedRuleId::Qer(id)));
    }
    if r.qers.len() >= MAX_RULES {
        return Err(Reject::too_many(IeType::CREATE_QER));
    }
    r.qers.push(qer_from(c));
    Ok(())
}

pub fn update_qer(r: &mut Rules, u: &UpdateQer) -> Result<(), Reject> {
    let id = u.qer_id.0;
    let Some(q) = r.qers.iter_mut().find(|q| q.id == id) else {
        return Err(Reject::rule(FailedRuleId::Qer(id)));
    };
    if let Some(g) = u.gate_status {
        q.ul_open = g.ul == GateStatus::OPEN;
        q.dl_open = g.dl == GateStatus::OPEN;
    }
    if let Some(m) = u.mbr {
        q.mbr = Some(m);
    }
    if let Some(g) = u.gbr {
        q.gbr = Some(g);
    }
    if let Some(f) = u.qfi {
        q.qfi = Some(f.0);
    }
    Ok(())
}

/// The URR IEs of a Create or Update URR, as given.
#[derive(Clone, Copy, Debug, Default)]
struct UrrIes {
    method: Option<MeasurementMethod>,
    triggers: Option<ReportingTriggers>,
    period: Option<MeasurementPeriod>,
    volume_threshold: Option<VolumeThreshold>,
    volume_quota: Option<VolumeQuota>,
    time_threshold: Option<TimeThreshold>,
    time_quota: Option<TimeQuota>,
    inactivity: Option<InactivityDetectionTime>,
}

impl From<&CreateUrr> for UrrIes {
    fn from(c: &CreateUrr) -> Self {
        UrrIes {
            method: Some(c.measurement_method),
            triggers: Some(c.reporting_triggers),
            period: c.measurement_period,
            volume_threshold: c.volume_threshold,
            volume_quota: c.volume_quota,
            time_threshold: c.time_threshold,
            time_quota: c.time_quota,
            inactivity: c.inactivity_detection_time,
        }
    }
}

impl From<&UpdateUrr> for UrrIes {
    fn from(c: &UpdateUrr) -> Self {
        UrrIes {
            method: c.measurement_method,
            triggers: c.reporting_triggers,
            period: c.measurement_period,
            volume_threshold: c.volume_threshold,
            volume_quota: c.volume_quota,
            time_threshold: c.time_threshold,
            time_quota: c.time_quota,
            inactivity: c.inactivity_detection_time,
        }
    }
}

/// Applies `ies` to `u` and checks the result. What a URR may ask of tep:
/// volume and duration measurement (EVENT refused), the triggers of
/// [`super::usage::APPLIED_TRIGGERS`], each with the IE it needs
/// (Conditional IE missing without it), and the thresholds, quotas,
/// period and inactivity time, each only with its trigger where it has
/// one (a threshold without it would be ignored). Reports on deletion, on
/// Query URR and on removal need no trigger. Without `scans` (a user
/// plane that does not run usage scans) only volume measurement without
/// triggers is accepted.
fn apply_urr(u: &mut Urr, ies: &UrrIes, scans: bool) -> Result<(), Reject> {
    let refuse = |ie| Err(Reject::unsupported(FailedRuleId::Urr(u.id), ie));
    let method_ok = if scans {
        MeasurementMethod::VOLUM | MeasurementMethod::DURAT
    } else {
        MeasurementMethod::VOLUM
    };
    if ies.method.is_some_and(|m| m.0 & !method_ok != 0) {
        return refuse(IeType::MEASUREMENT_METHOD);
    }
    let allowed = if scans {
        super::usage::APPLIED_TRIGGERS
    } else {
        0
    };
    if ies.triggers.is_some_and(|t| t.0.bits & !allowed != 0) {
        return refuse(IeType::REPORTING_TRIGGERS);
    }
    if let Some(m) = ies.method {
        u.volume = m.0 & MeasurementMethod::VOLUM != 0;
        u.duration = m.0 & MeasurementMethod::DURAT != 0;
    }
    if let Some(t) = ies.triggers {
        u.reporting_triggers = t;
    }
    let t = u.reporting_triggers;
    use ReportingTriggers as R;
    // Each IE given, with the trigger that makes it matter (None: the
    // quotas, enforced with or without their report).
    let given = [
        (
            ies.period.is_some(),
            Some(R::PERIO),
            IeType::MEASUREMENT_PERIOD,
        ),
        (
            ies.volume_threshold.is_some(),
            Some(R::VOLTH),
            IeType::VOLUME_THRESHOLD,
        ),
        (
            ies.time_threshold.is_some(),
            Some(R::TIMTH),
            IeType::TIME_THRESHOLD,
        ),
        (ies.volume_quota.is_some(), None, IeType::VOLUME_QUOTA),
        (ies.time_quota.is_some(), None, IeType::TIME_QUOTA),
        (
            ies.inactivity.is_some(),
            None,
            IeType::INACTIVITY_DETECTION_TIME,
        ),
    ];
    for (present, trigger, ie) in given {
        if present && (!scans || trigger.is_some_and(|b| !t.has(b))) {
            return refuse(ie);
        }
    }
    if ies.period.is_some_and(|p| p.0 == 0) {
        return refuse(IeType::MEASUREMENT_PERIOD);
    }
    if let Some(p) = ies.period {
        u.measurement_period = Some(p.0);
        u.new_period();
    }
    if let Some(v) = ies.volume_threshold {
        u.volume_threshold = Some(v);
    }
    if let Some(v) = ies.time_threshold {
        u.time_threshold = Some(v.0);
    }
    if let Some(q) = ies.volume_quota {
        u.volume_quota = Some(q);
        u.new_volume_quota();
    }
    if let Some(q) = ies.time_quota {
        u.time_quota = Some(q.0);
        u.new_time_quota();
    }
    if let Some(i) = ies.inactivity {
        u.inactivity = Some(i.0);
    }
    // A trigger whose IE the URR does not have.
    let needs = [
        (
            R::PERIO,
            u.measurement_period.is_some(),
            IeType::MEASUREMENT_PERIOD,
        ),
        (
            R::VOLTH,
            u.volume_threshold.is_some(),
            IeType::VOLUME_THRESHOLD,
        ),
        (R::TIMTH, u.time_threshold.is_some(), IeType::TIME_THRESHOLD),
        (R::VOLQU, u.volume_quota.is_some(), IeType::VOLUME_QUOTA),
        (R::TIMQU, u.time_quota.is_some(), IeType::TIME_QUOTA),
    ];
    for (trigger, has, ie) in needs {
        if t.has(trigger) && !has {
            return Err(Reject::conditional(ie));
        }
    }
    Ok(())
}

/// `scans`: whether the user plane runs usage scans ([`apply_urr`]).
pub fn create_urr(r: &mut Rules, c: &CreateUrr, scans: bool) -> Result<(), Reject> {
    let id = c.urr_id.0;
    let mut u = Urr {
        id,
        volume: false,
        duration: false,
        reporting_triggers: ReportingTriggers::default(),
        measurement_period: None,
        volume_threshold: None,
        volume_quota: None,
        time_threshold: None,
        time_quota: None,
        inactivity: None,
        meter: Default::default(),
    };
    apply_urr(&mut u, &UrrIes::from(c), scans)?;
    if r.urr(id).is_some() {
        return Err(Reject::rule(FailedRuleId::Urr(id)));
    }
    if r.urrs.len() >= MAX_RULES {
        return Err(Reject::too_many(IeType::CREATE_URR));
    }
    r.urrs.push(u);
    Ok(())
}

pub fn update_urr(r: &mut Rules, u: &UpdateUrr, scans: bool) -> Result<(), Reject> {
    let id = u.urr_id.0;
    let Some(x) = r.urrs.iter_mut().find(|x| x.id == id) else {
        return Err(Reject::rule(FailedRuleId::Urr(id)));
    };
    apply_urr(x, &UrrIes::from(u), scans)
}

/// The session's BAR: one per session (TS 29.244 §5.2.4), so a second,
/// whatever its ID, fails naming it.
pub fn create_bar(r: &mut Rules, c: &CreateBar) -> Result<(), Reject> {
    if r.bar.is_some() {
        return Err(Reject::rule(FailedRuleId::Bar(c.bar_id.0)));
    }
    r.bar = Some(Bar {
        id: c.bar_id.0,
        ddn_delay: c.downlink_data_notification_delay.map_or(0, |d| d.0),
        suggested_packets: c.suggested_buffering_packets_count.map(|n| n.0),
    });
    Ok(())
}

pub fn update_bar(r: &mut Rules, u: &UpdateBar) -> Result<(), Reject> {
    let id = u.bar_id.0;
    let Some(b) = r.bar.as_mut().filter(|b| b.id == id) else {
        return Err(Reject::rule(FailedRuleId::Bar(id)));
    };
    if let Some(d) = u.downlink_data_notification_delay {
        b.ddn_delay = d.0;
    }
    if let Some(n) = u.suggested_buffering_packets_count {
        b.suggested_packets = Some(n.0);
    }
    Ok(())
}

pub fn remove_bar(r: &mut Rules, id: u8) -> Result<(), Reject> {
    match r.bar {
        Some(b) if b.id == id => {
            r.bar = None;
            Ok(())
        }
        _ => Err(Reject::rule(FailedRuleId::Bar(id))),
    }
}

/// Removes rule `id` of a kind; unknown IDs fail with their Failed Rule ID.
pub fn remove<T>(
    list: &mut Vec<T>,
    matches: impl Fn(&T) -> bool,
    failed: FailedRuleId,
) -> Result<T, Reject> {
    match list.iter().position(matches) {
        Some(i) => Ok(list.swap_remove(i)),
        None => Err(Reject::rule(failed)),
    }
}

/// The checks that need the whole set: every PDR's FAR, QERs and URRs
/// exist; every PDR can be matched; every FAR's BAR ID names the
/// session's BAR; every forwarding FAR has its parameters.
pub fn validate(r: &Rules) -> Result<(), Reject> {
    for p in &r.pdrs {
        let fail = || Reject::rule(FailedRuleId::Pdr(p.id));
        if r.far(p.far).is_none() {
            return Err(fail());
        }
        if p.qers.as_slice().iter().any(|&q| r.qer(q).is_none()) {
            return Err(fail());
        }
        if p.urrs.as_slice().iter().any(|&u| r.urr(u).is_none()) {
            return Err(fail());
        }
        match p.source {
            Interface::ACCESS if p.local.is_none() => {
                return Err(Reject::conditional(IeType::F_TEID))
            }
            Interface::N6_LAN if p.ue_ip.is_none() => {
                return Err(Reject::conditional(IeType::UE_IP_ADDRESS))
            }
            Interface::CORE if p.local.is_none() && p.ue_ip.is_none() => {
                return Err(Reject::conditional(IeType::F_TEID))
            }
            _ => {}
        }
    }
    for f in &r.fars {
        if f.bar.is_some() && r.bar_of(f).is_none() {
            // A BAR ID that names no BAR of the session.
            return Err(Reject {
                offending: Some(IeType::BAR_ID),
                ..Reject::rule(FailedRuleId::Far(f.id))
            });
        }
        if f.action != Action::Forward {
            continue;
        }
        match f.destination {
            None => return Err(Reject::conditional(IeType::FORWARDING_PARAMETERS)),
            Some(Interface::ACCESS) if f.outer.is_none() => {
                return Err(Reject::conditional(IeType::OUTER_HEADER_CREATION))
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_capped() {
        assert_eq!(Ids::new(&[1, 2]).unwrap().as_slice(), [1, 2]);
        assert!(Ids::new(&[1; MAX_IDS + 1]).is_none());
    }

    #[test]
    fn rules_resolve_qfi_and_gates() {
        let r = Rules {
            pdrs: vec![Pdr {
                id: 1,
                precedence: 1,
                source: Interface::N6_LAN,
                local: None,
                ue_ip: Some(UeIp {
                    v4: Some(Ipv4Addr::new(10, 0, 0, 1)),
                    v6: None,
                    v6_prefix_len: 64,
                }),
                qfi: None,
                sdf: Vec::new(),
                outer_header_removal: None,
                far: 1,
                qers: Ids::new(&[1, 2]).unwrap(),
                urrs: Ids::default(),
                network: None,
            }],
            qers: vec![
                Qer {
                    id: 1,
                    ul_open: true,
                    dl_open: true,
                    mbr: None,
                    gbr: None,
                    qfi: None,
                },
                Qer {
                    id: 2,
                    ul_open: true,
                    dl_open: false,
                    mbr: None,
                    gbr: None,
                    qfi: Some(5),
                },
            ],
            ..Default::default()
        };
        let p = &r.pdrs[0];
        assert_eq!(r.qfi(p), Some(5));
        assert!(r.gate_open(p, true));
        assert!(!r.gate_open(p, false));
        // No FAR 1: the PDR fails validation, naming itself.
        assert_eq!(
            validate(&r).unwrap_err().failed_rule,
            Some(FailedRuleId::Pdr(1))
        );
    }
}
