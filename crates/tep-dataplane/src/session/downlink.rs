//! The UPF's downlink (N6 → N3) per packet: node `session-lookup` finds
//! the session of a packet that `tunnel-lookup` routed into an N3 tunnel,
//! and `gtpu-encap` writes its GTP-U header from the session rather than
//! from a tunnel's template.

use super::buffer::{Buffers, Held};
use super::rules::Treatment;
use super::{Action, Session, SessionTable};
use crate::buffer::{PacketId, Pool};
use crate::drop::DropReason;
use crate::node::NodeStats;
use crate::tunnel::TunnelTable;
use crate::vector::{PacketVector, VECTOR_SIZE};
use tep_wire::ipv4::field as ip4;
use tep_wire::ipv6::field as ip6;

/// Marks a packet held in a buffer while the node runs.
const HELD: u32 = u32::MAX - 2;

/// Node `session-lookup`: each packet routed into an N3 tunnel is looked
/// up by its destination (the UE) and handled by the session's downlink
/// action: forwarded (its session and N3 tunnel set, its usage counted),
/// dropped, or held in `buffers`. Packets of other tunnels pass as they
/// are. A forwarded packet over the rate of the session's downlink bucket
/// at `now_ns` is dropped (`mbr_exceeded`). A session with several
/// downlink rules classifies the packet ([`super::rules`]): the rule that
/// takes it gives the action, the outer header (through the packet's
/// session word) and its own bucket; none: `no_pdr_match`. Returns how
/// many were held.
///
/// In passes over the vector, as VPP's lookup nodes do: the destinations
/// read; their map entries prefetched a few destinations ahead of the
/// lookups (once per run of packets to one destination), which prefetch
/// the sessions' slots; then each packet handled. With a
/// million sessions the fetches overlap instead of stalling one packet
/// after another.
pub(crate) fn lookup(
    stats: &mut NodeStats,
    pool: &mut Pool,
    v: &mut PacketVector,
    table: &TunnelTable,
    sessions: &SessionTable,
    buffers: &mut Buffers,
    now_ns: u64,
) -> usize {
    // Per packet: its destination (family, address), or None when it is
    // not a sessions tunnel's (or not IP).
    let mut dst = [None; VECTOR_SIZE];
    for (d, &id) in dst.iter_mut().zip(v.as_slice()) {
        if table.get(pool.meta(id).tunnel).sessions {
            *d = Some(destination(pool.data(id)));
        }
    }
    let mut slot = [None; VECTOR_SIZE];
    super::staggered_runs(
        &dst[..v.len()],
        |d| {
            if let Some(Some((v6, a))) = d {
                sessions.prefetch_downlink(v6, a);
            }
        },
        |d, packets| {
            if let Some(Some((v6, a))) = d {
                let s = sessions.downlink(v6, a);
                if let Some(x) = s {
                    sessions.prefetch_slot(x, true);
                }
                slot[packets].fill(s);
            }
        },
    );
    handle(stats, pool, v, sessions, buffers, now_ns, (&dst, &slot))
}

/// Node `session-lookup` for the packets [`super::n9`] brings back to
/// encapsulation: those from N9 are handled as [`lookup`] does, their
/// session the one their F-TEID found (their session word); those to N9
/// pass, their outer header set already. Returns how many were held.
pub(crate) fn lookup_known(
    stats: &mut NodeStats,
    pool: &mut Pool,
    v: &mut PacketVector,
    sessions: &SessionTable,
    buffers: &mut Buffers,
    now_ns: u64,
) -> usize {
    let mut dst = [None; VECTOR_SIZE];
    let mut slot = [None; VECTOR_SIZE];
    for (k, &id) in v.as_slice().iter().enumerate() {
        let word = pool.session(id);
        if word & super::n9::FROM_N9 != 0 {
            dst[k] = Some(destination(pool.data(id)));
            slot[k] = Some(word & super::SLOT_MASK);
        }
    }
    handle(stats, pool, v, sessions, buffers, now_ns, (&dst, &slot))
}

/// Per packet: its destination (None: not the node's to handle) and its
/// session's slot.
type Found<'a> = (&'a [Option<Option<(bool, u128)>>], &'a [Option<u32>]);

/// [`lookup`]'s handling of each packet once its session is found.
fn handle(
    stats: &mut NodeStats,
    pool: &mut Pool,
    v: &mut PacketVector,
    sessions: &SessionTable,
    buffers: &mut Buffers,
    now_ns: u64,
    (dst, slot): Found<'_>,
) -> usize {
    // Sessions with several downlink rules: each packet classified ahead,
    // its rule's treatment fetched while the others are.
    let mut rule = [None; VECTOR_SIZE];
    let mut last = None;
    for (k, &id) in v.as_slice().iter().enumerate() {
        if let (Some(Some(_)), Some(s)) = (dst[k], slot[k]) {
            rule[k] = sessions
                .classify_downlink(s, pool.data(id), &mut last)
                .flatten();
        }
    }
    let over = meter_runs(pool, v, sessions, (dst, slot), &rule, now_ns);
    let mut held = 0;
    for (k, &id) in v.as_slice().iter().enumerate() {
        let Some(d) = dst[k] else {
            continue;
        };
        let r = match (d, slot[k]) {
            (Some(_), Some(s)) => one(pool, id, (s, rule[k], over[k]), sessions, buffers, now_ns),
            (Some((v6, a)), None) if sessions.in_other_network(v6, a) => {
                Err(DropReason::WrongNetwork)
            }
            _ => Err(DropReason::NoSession),
        };
        match r {
            Ok(true) => {}
            Ok(false) => {
                pool.meta_mut(id).tunnel = HELD;
                held += 1;
            }
            Err(r) => pool.meta_mut(id).drop = Some(r),
        }
    }
    sessions.wake_on_crossing();
    if held > 0 {
        // Held packets leave the vector without being freed or counted
        // as drops: the buffer has them.
        v.retain(|id| pool.meta(id).tunnel != HELD, |_| {});
    }
    crate::node::sweep(stats, pool, v);
    held
}

/// Per packet: whether its session's downlink bucket refuses it. The
/// packets that the bucket would be asked about one by one (a metered
/// session's, forwarded by its action or rule) are charged a run of one
/// session's at a time, with one compare-and-swap per run rather than
/// one per packet: the same packets pass ([`super::rate::Bucket::admit_run`]).
fn meter_runs(
    pool: &Pool,
    v: &PacketVector,
    sessions: &SessionTable,
    (dst, slot): Found<'_>,
    rule: &[Option<u8>],
    now_ns: u64,
) -> [bool; VECTOR_SIZE] {
    let mut over = [false; VECTOR_SIZE];
    let ids = v.as_slice();
    let of = |k: usize| match (dst[k], slot[k]) {
        (Some(Some(_)), Some(s)) => Some(s),
        _ => None,
    };
    // One pair of arrays for the vector's runs: made per run, their
    // zeroing (4 KiB) cost more than the meter itself at burst 1.
    let (mut charged, mut len) = ([0; VECTOR_SIZE], [0; VECTOR_SIZE]);
    let mut k = 0;
    while k < ids.len() {
        let Some(s) = of(k) else {
            k += 1;
            continue;
        };
        let end = (k + 1..ids.len())
            .find(|&j| of(j) != Some(s))
            .unwrap_or(ids.len());
        let session = sessions.get(s);
        if session.mbr_downlink {
            let mut m = 0;
            for j in k..end {
                if matches!(
                    resolve(sessions, s, &session, rule[j]),
                    Ok((Action::Forward, ..))
                ) {
                    (charged[m], len[m]) = (j, pool.total_len(ids[j]));
                    m += 1;
                }
            }
            let n = sessions.admit_downlink_run(s, &len[..m], now_ns);
            for &j in &charged[n..m] {
                over[j] = true;
            }
        }
        k = end;
    }
    over
}

/// A downlink packet's action, session word and rule (where the session
/// has rules) in session `slot` (`s`), which its `rule` took.
#[inline]
fn resolve<'a>(
    sessions: &'a SessionTable,
    slot: u32,
    s: &Session,
    rule: Option<u8>,
) -> Result<(Action, u32, Option<&'a Treatment>), DropReason> {
    // A rule that does what the session's own treatment does is served
    // by it ([`super::rules::Own`]).
    let own = rule.is_some_and(|r| r & super::rules::OWN_RULE != 0);
    if s.downlink_rules && !own {
        let (word, t) = rule
            .and_then(|r| sessions.downlink_rule(slot, r))
            .ok_or(DropReason::NoPdrMatch)?;
        Ok((t.action, word, Some(t)))
    } else {
        Ok((s.downlink, slot, None))
    }
}

/// An inner IP packet's destination: (IPv6, the address as an integer).
#[inline]
fn destination(data: &[u8]) -> Option<(bool, u128)> {
    match data.first().map(|b| b >> 4) {
        Some(4) if data.len() >= 20 => {
            let mut a = [0u8; 4];
            a.copy_from_slice(&data[ip4::DST_ADDR]);
            Some((false, u128::from(u32::from_be_bytes(a))))
        }
        Some(6) if data.len() >= 40 => {
            let mut a = [0u8; 16];
            a.copy_from_slice(&data[ip6::DST_ADDR]);
            Some((true, u128::from_be_bytes(a)))
        }
        _ => None,
    }
}

/// Packet `id` of session `slot`, which its downlink `rule` took (where
/// the session has rules), `over` the rate of the session's bucket
/// ([`meter_runs`]) or not. Ok(true): forward; Ok(false): held.
#[inline]
fn one(
    pool: &mut Pool,
    id: PacketId,
    (slot, rule, over): (u32, Option<u8>, bool),
    sessions: &SessionTable,
    buffers: &mut Buffers,
    now_ns: u64,
) -> Result<bool, DropReason> {
    let s = sessions.get(slot);
    let (action, word, rule) = resolve(sessions, slot, &s, rule)?;
    match action {
        Action::Forward => {
            let len = pool.total_len(id);
            if over {
                return Err(DropReason::MbrExceeded);
            }
            if rule.is_some_and(|t| !t.admit(len, now_ns, sessions.shared_buckets())) {
                return Err(DropReason::MbrExceeded);
            }
            if s.watch {
                sessions.charge_volume(slot, false, len)?;
            }
            if let Some(t) = rule.filter(|t| t.watched) {
                sessions.charge_rule_volume(t.counter, false, len)?;
            }
            pool.set_session(id, word);
            pool.meta_mut(id).tunnel = s.n3;
            sessions.count_downlink(slot, len);
            if let Some(t) = rule {
                sessions.count_rule(t.counter, len);
            }
            Ok(true)
        }
        Action::Drop => Err(DropReason::SessionDrop),
        Action::QuotaExhausted => Err(DropReason::QuotaExhausted),
        Action::Buffer => {
            // Released, it is looked up again in its network.
            pool.meta_mut(id).network = s.network;
            match buffers.hold(slot, id) {
                Held::First | Held::Queued => Ok(false),
                Held::Full => Err(DropReason::BufferFull),
            }
        }
    }
}

/// The GTP-U header of a G-PDU of a session to its peer: the peer's
/// TEID and, where the session has a QFI, a PDU Session Container with it:
/// DL PDU SESSION INFORMATION toward a gNB (TS 38.415 §5.5.2.1), UL PDU
/// SESSION INFORMATION (`uplink`) toward a UPF on N9 (TS 29.281
/// §5.2.2.7, TS 38.415 §5.5.2.2: the PSA matches its PDRs by that QFI).
/// Written into `h`, which is 8 or 16 bytes ([`header_len`]);
/// `payload_len` is the inner packet's.
#[inline]
pub(crate) fn write_gtpu(
    h: &mut [u8],
    teid: u32,
    (qfi, uplink): (Option<u8>, bool),
    payload_len: usize,
) {
    let len = (h.len() - tep_wire::gtpu::HEADER_LEN + payload_len) as u16;
    // Version 1, protocol type GTP, E flag with a container.
    h[0] = if qfi.is_some() { 0x34 } else { 0x30 };
    h[1] = 0xff;
    h[2..4].copy_from_slice(&len.to_be_bytes());
    h[4..8].copy_from_slice(&teid.to_be_bytes());
    if let Some(q) = qfi {
        // Sequence number, N-PDU number (unused: S and PN clear), next
        // extension: PDU Session Container; the container is 1 unit of 4
        // bytes: PDU type 0 (DL) or 1 (UL) in the high nibble with no
        // flags, the QFI, no next extension.
        let pdu_type = if uplink { 0x10 } else { 0x00 };
        h[8..16].copy_from_slice(&[0, 0, 0, 0x85, 1, pdu_type, q & 0x3f, 0]);
    }
}

/// The GTP-U header length of a downlink G-PDU with or without a QFI.
#[inline]
pub(crate) const fn header_len(qfi: Option<u8>) -> usize {
    if qfi.is_some() {
        16
    } else {
        8
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tep_wire::gtpu::{Extension, GtpuRepr, PduSessionContainer};

    #[test]
    fn the_header_is_tep_wires_g_pdu_with_a_dl_or_ul_container() {
        for (qfi, uplink) in [None, Some(9), Some(63)]
            .into_iter()
            .flat_map(|q| [(q, false), (q, true)])
        {
            let payload = 1400;
            let mut h = [0u8; 16];
            let n = header_len(qfi);
            write_gtpu(&mut h[..n], 0xdead_beef, (qfi, uplink), payload);
            let mut want = GtpuRepr::gpdu(0xdead_beef);
            if let Some(q) = qfi {
                let c = match uplink {
                    true => PduSessionContainer::ul(q),
                    false => PduSessionContainer::dl(q, false),
                };
                let _ = want.extensions.push(Extension::PduSessionContainer(c));
            }
            let mut expect = vec![0u8; want.buffer_len()];
            want.emit(&mut expect, payload);
            assert_eq!(&h[..n], &expect[..], "qfi {qfi:?} uplink {uplink}");
        }
    }
}
