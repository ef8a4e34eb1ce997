//! N9: a session's GTP-U leg to another UPF (TS 23.501 §5.6.4, an
//! intermediate UPF or an uplink classifier in front of the PDU Session
//! Anchor). tep has one GTP-U side, so N9 shares the N3 tunnels:
//!
//! - **uplink to N9**: an uplink rule whose FAR creates an outer header
//!   toward Core (the peer UPF's address and TEID) takes the decapsulated
//!   packet back to encapsulation, where it leaves as a G-PDU from the
//!   session's N3 address, exactly as a downlink packet to a gNB does
//!   (the peer is a [`super::Peer`] like a gNB, its TEID in the rule's
//!   [`super::rules::Treatment`]). Where the rule has a QFI it carries a
//!   PDU Session Container of type UL PDU SESSION INFORMATION with it
//!   (TS 29.281 §5.2.2.7), so that the PSA's PDRs can match by QFI; the
//!   rule's, not the received G-PDU's: the packet's own QFI is not
//!   carried through encapsulation, and a rule's QFI is the one its PDR
//!   matched or its QER sets. Its outer DSCP is its peer's, as a gNB's
//!   ([`super::Peer`]: the FAR's Transport Level Marking).
//! - **downlink from N9**: a G-PDU to a session's Core-side F-TEID (an
//!   N9 key, [`super::UplinkKey::n9`], found only after the N3 lookup
//!   missed) is decapsulated and then looked up as a downlink packet of
//!   that session, by its slot rather than by its destination: the
//!   session's downlink FAR (gNB, TEID, QFI; drop; buffer) applies.
//!
//! Both ways the packet leaves `gtpu-decap` marked [`REENCAP`], is taken
//! out of the decap vector ([`divert`]) and goes through `decap-output`
//! and then the encapsulation nodes from `session-lookup` on (no route
//! lookup: its session is known). A buffered N9 downlink packet, once
//! released, is routed as one from N6 (by its destination, the UE).

use super::{SessionTable, RULE_SHIFT, SLOT_MASK};
use crate::buffer::{PacketId, Pool};
use crate::drop::DropReason;
use crate::vector::PacketVector;

/// `meta.tunnel` of a packet `gtpu-decap` hands to [`divert`].
pub(crate) const REENCAP: u32 = u32::MAX - 3;

/// In a packet's session word: the rule above [`RULE_SHIFT`] is an uplink
/// one (its peer is a UPF on N9).
pub(crate) const UPLINK_RULE: u32 = 1 << 29;
/// In a packet's session word: a G-PDU from N9, the slot its F-TEID
/// found; its downlink treatment is still to be looked up.
pub(crate) const FROM_N9: u32 = 1 << 30;

/// The session word of an uplink packet of slot `slot` that uplink rule
/// `rule` sends to N9.
#[inline]
pub(crate) fn uplink_word(slot: u32, rule: u8) -> u32 {
    slot | (u32::from(rule) + 1) << RULE_SHIFT | UPLINK_RULE
}

/// Moves the packets `gtpu-decap` marked [`REENCAP`] from `v` to `out`,
/// on their session's N3 tunnel again. `out` has room: it is emptied
/// after each decapsulated vector, which is no longer than one.
pub(crate) fn divert(
    pool: &mut Pool,
    v: &mut PacketVector,
    sessions: &SessionTable,
    out: &mut PacketVector,
) {
    let taken = v.split_off_where(|id| pool.meta(id).tunnel == REENCAP);
    for &id in taken.as_slice() {
        let slot = pool.session(id) & SLOT_MASK;
        pool.meta_mut(id).tunnel = sessions.get(slot).n3;
        out.put(pool, id);
    }
}

/// `gtpu-decap`'s end for a G-PDU (`id`) of a session that goes back to
/// encapsulation: its inner packet at `inner`, its N3 tunnel `n3` and its
/// session word `word` set, marked [`REENCAP`] (Ok(false)); an uplink one counted in
/// the session's uplink usage (one from N9 counts as downlink, once its
/// downlink treatment takes it).
pub(crate) fn received(
    pool: &mut Pool,
    id: PacketId,
    (inner, n3, word, counter): (usize, u32, u32, u32),
    sessions: Option<&SessionTable>,
) -> Result<bool, DropReason> {
    let m = pool.meta_mut(id);
    m.tunnel = n3;
    m.inner = inner as u16;
    m.remote_csum = None;
    pool.set_session(id, word);
    crate::decap::finish_inner(pool, id, false)?;
    if word & FROM_N9 == 0 {
        if let Some(s) = sessions {
            let len = pool.total_len(id) - inner;
            s.count_uplink(word & SLOT_MASK, len);
            s.count_rule(counter, len);
        }
    }
    pool.meta_mut(id).tunnel = REENCAP;
    // Not `true`: `gtpu-decap` counts these apart from what it forwards.
    Ok(false)
}
