//! The UPF's uplink (N3 → N6) per packet: a G-PDU whose TEID no
//! `[[tunnel]]` has is matched against the sessions by `gtpu-decap`, and a
//! train merged by `train-merge` counts its datagrams in its session's
//! usage.

use super::{Action, SessionTable};
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
    /// A session (its slot) on its N3 tunnel.
    Session { slot: u32, n3: u32 },
}

/// The session of a G-PDU (`gtpu`: its GTP-U header onwards) that arrived
/// at `local`: by its TEID and the QFI of its PDU Session Container. A
/// session whose N3 address is not `local` does not take it (the TEID was
/// handed out on another address). `UnknownTeid` when no session has
/// the TEID, `NoPdr` when one has but no PDR takes the QFI, `SessionDrop`
/// when the session's uplink action is not to forward.
#[inline]
pub(crate) fn match_session(
    sessions: &SessionTable,
    table: &TunnelTable,
    gtpu: &[u8],
    teid: u32,
    local: IpAddr,
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
    let slot = sessions.uplink_match(teid, qfi).map_err(|known| {
        if known {
            DropReason::NoPdr
        } else {
            DropReason::UnknownTeid
        }
    })?;
    let s = sessions.get(slot);
    if table.tunnels().get(s.n3 as usize).map(|t| t.local) != Some(local) {
        return Err(DropReason::UnknownTeid);
    }
    match s.uplink {
        Action::Forward => Ok(Receiver::Session { slot, n3: s.n3 }),
        Action::Drop | Action::Buffer => Err(DropReason::SessionDrop),
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
        |k, _| {
            if let Some(slot) = k.and_then(|(t, q)| sessions.uplink(t, q)) {
                sessions.prefetch_slot(slot);
            }
        },
    );
}
