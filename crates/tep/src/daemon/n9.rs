//! N9 in [`super::upf::compile`]: a session's GTP-U leg to another UPF
//! (TS 23.501 §5.6.4: an intermediate UPF or an uplink classifier in
//! front of the PDU Session Anchor; TS 29.244 §5.2.1, §8.2.56).
//!
//! - Uplink: a FAR with Destination Interface Core and Outer Header
//!   Creation GTP-U/UDP/IPv4 or IPv6 sends the decapsulated packet to the
//!   peer UPF with its TEID, from the session's N3 address (tep has one
//!   GTP-U side). Such a session's uplink is compiled into rules (the
//!   rule carries the peer), so that a ULCL's PDRs branch by their SDF
//!   filters between N6 and N9 and the session's line stays as it is
//!   ([`tep_dataplane::session::rules`]).
//! - The uplink's PDU Session Container: UL PDU SESSION INFORMATION
//!   (TS 29.281 §5.2.2.7) with the QFI of the PDR's QER where it sets one
//!   (TS 29.244 §7.5.2.5: the QFI the UPF inserts), else the QFI the PDR
//!   matches (the packet's as received on N3); neither: no container (a
//!   PDR taking every QFI does not carry the packet's own through).
//!   Its Transport Level Marking is the outer DSCP toward the peer UPF.
//! - Downlink: a PDR from Core with a local F-TEID (CHOOSE as on Access)
//!   and Outer Header Removal GTP-U: G-PDUs to that TEID are decapsulated
//!   and handled as downlink packets of the session (its downlink FAR).
//!   Its key is an N9 key ([`UplinkKey::n9`]), which the N3 lookup never
//!   finds.

use super::upf::{refuse_far, refuse_pdr};
use std::net::IpAddr;
use tep_dataplane::session::UplinkKey;
use tep_pfcp::node::{self, Refused};
use tep_pfcp::types::Interface;
use tep_pfcp::IeType;

/// The N3 tunnel (index) and TEID of a PDR's local F-TEID: one on an
/// address of an N3 tunnel (`n3`: address, tunnel index).
pub(super) fn local_teid(pdr: &node::Pdr, n3: &[(IpAddr, u32)]) -> Result<(u32, u32), Refused> {
    let local = pdr.local.ok_or(refuse_pdr(pdr, IeType::F_TEID))?;
    let tunnel = local
        .v4
        .map(IpAddr::V4)
        .into_iter()
        .chain(local.v6.map(IpAddr::V6))
        .find_map(|a| n3.iter().find(|(x, _)| *x == a).map(|&(_, t)| t))
        .ok_or(refuse_pdr(pdr, IeType::F_TEID))?;
    Ok((tunnel, local.teid))
}

/// An uplink FAR's peer UPF on N9 (address, TEID): where it forwards
/// with an outer header, which must be toward Core. None: to N6.
pub(super) fn uplink_peer(far: &node::Far) -> Result<Option<(IpAddr, u32)>, Refused> {
    match far.outer {
        Some(o) if far.action == node::Action::Forward => {
            if far.destination != Some(Interface::CORE) {
                return Err(refuse_far(far, IeType::DESTINATION_INTERFACE));
            }
            Ok(Some((o.addr(), o.teid)))
        }
        _ => Ok(None),
    }
}

/// The QFI an uplink PDR's G-PDUs carry to a UPF on N9 (`to_n9`): its
/// QER's, else the one it matches; none to N6.
pub(super) fn uplink_qfi(rules: &node::Rules, pdr: &node::Pdr, to_n9: bool) -> Option<u8> {
    to_n9.then(|| rules.qfi(pdr).or(pdr.qfi)).flatten()
}

/// A downlink PDR's N9 key and N3 tunnel, where it has a local F-TEID:
/// it must remove the GTP-U header (the G-PDU comes from a UPF).
pub(super) fn downlink_key(
    pdr: &node::Pdr,
    n3: &[(IpAddr, u32)],
) -> Result<Option<(UplinkKey, u32)>, Refused> {
    if pdr.local.is_none() {
        return Ok(None);
    }
    if !pdr.outer_header_removal.is_some_and(|o| o.is_gtpu()) {
        return Err(refuse_pdr(pdr, IeType::OUTER_HEADER_REMOVAL));
    }
    let (tunnel, teid) = local_teid(pdr, n3)?;
    Ok(Some((UplinkKey::n9(teid), tunnel)))
}
