//! The UPF's uplink (N3 → N6) per packet: a G-PDU whose TEID no
//! `[[tunnel]]` has is matched against the sessions by `gtpu-decap`, and a
//! train merged by `train-merge` counts its datagrams in its session's
//! usage.

use super::{
    action_of, unpack_n3, Action, SessionTable, GNB_SOURCE, MBR_UPLINK, NETWORK_SHIFT, UL_RULES,
    WATCH,
};
use crate::buffer::Pool;
use crate::drop::DropReason;
use crate::tunnel::TunnelTable;
use crate::vector::{PacketVector, VECTOR_SIZE};
use core::net::IpAddr;
use tep_wire::gtpu::{ExtensionType, Packet};

/// What a G-PDU belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Receiver {
    /// A `[[tunnel]]`.
    Tunnel(u32),
    /// A session (its slot) on its N3 tunnel, in its data network; the
    /// usage counter of the rule that took it
    /// ([`super::counters::NO_COUNTER`]: none).
    Session {
        slot: u32,
        n3: u32,
        network: u8,
        counter: u32,
    },
    /// A session's packet for encapsulation again ([`super::n9`]): to a
    /// UPF on N9, or from one; `word` is its session word, `counter` the
    /// usage counter of the uplink rule that took it.
    Reencap { word: u32, n3: u32, counter: u32 },
}

/// The session of a G-PDU (`gtpu`: its GTP-U header onwards, the inner
/// packet at `inner`) that came from `outer.0` to `outer.1`: by its TEID
/// and the QFI of its PDU Session Container. A session whose N3 address is
/// not `outer.1` does not take it (the TEID was handed out on another
/// address). `UnknownTeid` when no session has the TEID, `NoPdr` when one
/// has but no PDR takes the QFI, `SessionDrop` when the session's uplink
/// action is not to forward, `GnbSourceMismatch` from another than the
/// session's gNB ([`gnb_source`]), `UeSourceSpoofed` when the inner source
/// is not the UE's ([`super::UeSource`]), `MbrExceeded` over the rate of
/// the session's uplink bucket at `now_ns` ([`super::rate`]). All of it
/// from the slot's line (and, checking the gNB, its entry in the few
/// gNBs' table; metering, the session's bucket). A session with several
/// uplink rules classifies the inner packet ([`super::rules`]): the rule
/// that takes it gives the action and its own bucket; none: `NoPdrMatch`.
#[inline]
pub(crate) fn match_session(
    sessions: &SessionTable,
    table: &TunnelTable,
    gtpu: &[u8],
    inner: usize,
    teid: u32,
    outer: (IpAddr, IpAddr),
    now_ns: u64,
) -> Result<Receiver, DropReason> {
    let p = Packet::new_unchecked(gtpu);
    let qfi = if p.e_flag() {
        p.extensions()
            .find(|(t, _)| *t == ExtensionType::PDU_SESSION_CONTAINER)
            .and_then(|(_, c)| c.get(1))
            .map(|b| b & 0x3f)
    } else {
        None
    };
    let slot = match sessions.uplink_match(teid, qfi) {
        Ok(s) => s,
        Err(known) => return from_n9(sessions, table, teid, outer.1, known),
    };
    // Not `sessions.get`: a slot without a session (its empty session,
    // whose N3 tunnel is none) is an unknown TEID all the same.
    let Some(line) = sessions.link.usage.slot(slot) else {
        return Err(DropReason::UnknownTeid);
    };
    let (word, actions) = line.uplink_rules();
    let n3 = unpack_n3(word);
    if table.tunnels().get(n3 as usize).map(|t| t.local) != Some(outer.1) {
        return Err(DropReason::UnknownTeid);
    }
    let rules = actions & UL_RULES != 0;
    if !rules {
        match action_of(actions) {
            Action::Forward => {}
            Action::QuotaExhausted => return Err(DropReason::QuotaExhausted),
            _ => return Err(DropReason::SessionDrop),
        }
    }
    if actions & GNB_SOURCE != 0 {
        gnb_source(sessions, line.peer(), outer.0)?;
    }
    let packet = gtpu.get(inner..).unwrap_or_default();
    line.ue_source(actions).check(packet)?;
    let (mut n9, mut counter, mut watched) = (None, super::counters::NO_COUNTER, false);
    if rules {
        (n9, counter, watched) = by_rule(sessions, (slot, actions), packet, qfi, now_ns)?;
    }
    if actions & MBR_UPLINK != 0 && !sessions.admit(slot, true, packet.len(), now_ns) {
        return Err(DropReason::MbrExceeded);
    }
    if actions & WATCH != 0 {
        sessions.charge_volume(slot, true, packet.len())?;
    }
    // Last, so that a packet a rate drops is not charged to the lines.
    if watched {
        sessions.charge_rule_volume(counter, true, packet.len())?;
    }
    if let Some(n9) = n9 {
        return Ok(Receiver::Reencap {
            word: n9,
            n3,
            counter,
        });
    }
    Ok(Receiver::Session {
        slot,
        n3,
        network: (word >> NETWORK_SHIFT) as u8,
        counter,
    })
}

/// The verdict of the uplink rule of slot `slot`'s session (its line's
/// actions word `actions`) that takes `packet` (its G-PDU's QFI `qfi`):
/// forward to N6 (None) or to a UPF on N9 (the packet's session word,
/// [`super::n9`]), with the rule's usage counter and whether it charges
/// volume lines; or why not. A rule whose treatment is the session's own
/// is the session's action, to N6.
#[inline]
fn by_rule(
    sessions: &SessionTable,
    (slot, actions): (u32, u32),
    packet: &[u8],
    qfi: Option<u8>,
    now_ns: u64,
) -> Result<(Option<u32>, u32, bool), DropReason> {
    let (i, t) = sessions
        .uplink_rule(slot, actions, packet, qfi)
        .ok_or(DropReason::NoPdrMatch)?;
    let Some(t) = t else {
        return match action_of(actions) {
            Action::Forward => Ok((None, super::counters::NO_COUNTER, false)),
            Action::QuotaExhausted => Err(DropReason::QuotaExhausted),
            _ => Err(DropReason::SessionDrop),
        };
    };
    match t.action {
        Action::Forward => {}
        Action::QuotaExhausted => return Err(DropReason::QuotaExhausted),
        _ => return Err(DropReason::SessionDrop),
    }
    if !t.admit(packet.len(), now_ns, sessions.shared_buckets()) {
        return Err(DropReason::MbrExceeded);
    }
    let n9 = (t.peer != u32::MAX).then(|| super::n9::uplink_word(slot, i));
    Ok((n9, t.counter, t.watched))
}

/// A G-PDU whose TEID no N3 key has (`known`: one has, not for its QFI):
/// from N9 if a session's Core-side F-TEID on the N3 address `local` is
/// `teid` ([`super::n9`]), else `NoPdr` or `UnknownTeid`. Its downlink
/// treatment is looked up after decapsulation.
#[cold]
fn from_n9(
    sessions: &SessionTable,
    table: &TunnelTable,
    teid: u32,
    local: IpAddr,
    known: bool,
) -> Result<Receiver, DropReason> {
    let miss = if known {
        DropReason::NoPdr
    } else {
        DropReason::UnknownTeid
    };
    let slot = sessions.n9(teid).ok_or(miss)?;
    let n3 = sessions.link.usage.slot(slot).ok_or(miss)?.uplink_rules().0;
    if table.tunnels().get(n3 as usize).map(|t| t.local) != Some(local) {
        return Err(miss);
    }
    Ok(Receiver::Reencap {
        word: slot | super::n9::FROM_N9,
        n3,
        counter: super::counters::NO_COUNTER,
    })
}

/// With `[pfcp] n3_source_check`: whether a G-PDU from `src` comes from
/// session `s`'s gNB, the peer of its downlink FAR's outer header
/// creation as the SMF last set it. A session without one yet (set up
/// before the gNB answered with its downlink F-TEID, or a FAR whose outer
/// header the SMF removed while the UE is idle) takes any source: the gNB
/// sends uplink as soon as it has the uplink F-TEID, before the SMF can
/// tell the UPF its own, and the UE's source is still checked. In a
/// handover the gNB is the one the FAR names: G-PDUs the target gNB sends
/// before the SMF moves the FAR to it (Xn handover sends uplink ahead of
/// the Path Switch), and those the source gNB still sends after, are
/// dropped. That loss is why the check is off by default.
#[inline]
fn gnb_source(sessions: &SessionTable, peer: u32, src: IpAddr) -> Result<(), DropReason> {
    match sessions.peer(peer) {
        Some(p) if p.addr != src => Err(DropReason::GnbSourceMismatch),
        _ => Ok(()),
    }
}

/// Usage of the datagrams a train merged into its head: `merged`
/// datagrams of `segment` bytes each (the last of the train may be
/// shorter: `available` bytes were left from the first merged one on),
/// each counting its bytes after the tunnel header of `header` bytes.
pub(crate) fn count_merged(
    sessions: &SessionTable,
    slot: u32,
    merged: usize,
    segment: usize,
    available: usize,
    header: usize,
) {
    let mut left = available;
    for _ in 0..merged {
        let dg = segment.min(left);
        left -= dg;
        sessions.count_uplink(slot, dg.saturating_sub(header));
    }
}

/// The TEID and the container's QFI of the G-PDU at `at` of `data`, read
/// at their usual places (a container right after the fixed header), for
/// prefetching: None where the header is shorter or laid out otherwise
/// (the lookup proper parses the chain).
#[inline]
fn teid_qfi(data: &[u8], at: usize) -> Option<(u32, Option<u8>)> {
    let h = data.get(at..at + 8)?;
    let teid = u32::from_be_bytes([h[4], h[5], h[6], h[7]]);
    let qfi = match data.get(at + 11..at + 15) {
        Some(x) if h[0] & 0x04 != 0 && x[0] == 0x85 => Some(x[3] & 0x3f),
        _ => None,
    };
    Some((teid, qfi))
}

/// Before `gtpu-decap` handles a vector: every G-PDU's uplink entry
/// fetched, then the session slots the entries name, so that the node's
/// lookups find them in the cache (see [`super::downlink::lookup`]).
pub(crate) fn prefetch(sessions: &SessionTable, pool: &Pool, v: &PacketVector) {
    let mut keys = [None; VECTOR_SIZE];
    let mut slots = [None; VECTOR_SIZE];
    for (k, &id) in keys.iter_mut().zip(v.as_slice()) {
        *k = teid_qfi(pool.data(id), usize::from(pool.meta(id).udp_payload));
    }
    super::staggered_runs(
        &keys[..v.len()],
        |k| {
            if let Some((teid, qfi)) = k {
                sessions.prefetch_uplink(teid, qfi);
            }
        },
        |k, packets| {
            let s = k.and_then(|(t, q)| sessions.uplink(t, q));
            if let Some(slot) = s {
                sessions.prefetch_slot(slot, false);
            }
            slots[packets].fill(s);
        },
    );
    if !sessions.any_uplink_ahead() {
        return;
    }
    // Sessions with several uplink rules whose treatment is not all in
    // their rule line: each G-PDU classified ahead (a container right
    // after the fixed header, as gNBs send it), so that its rule's
    // treatment is fetched before `gtpu-decap` reads it.
    for (k, &id) in v.as_slice().iter().enumerate() {
        if let (Some((_, Some(qfi))), Some(slot)) = (keys[k], slots[k]) {
            let at = usize::from(pool.meta(id).udp_payload);
            let data = pool.data(id);
            if data.get(at + 15) == Some(&0) {
                sessions.prefetch_uplink_rule(slot, data.get(at + 16..).unwrap_or_default(), qfi);
            }
        }
    }
}
