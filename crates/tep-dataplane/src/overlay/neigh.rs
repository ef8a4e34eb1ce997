//! ARP/ND suppression: a neighbour table per network (IP → MAC), filled
//! from what the frames of the local side announce and from the control
//! plane, and the answers tep gives in the table's name.
//!
//! STUB: the API the rest of the overlay is written against; a helper
//! implements it (see the doc of each item).

use super::fdb::Origin;
use core::net::IpAddr;

/// One neighbour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Neigh {
    /// Its MAC.
    pub mac: [u8; 6],
    /// Who made it (`Learned` entries age as the FDB's do).
    pub origin: Origin,
    /// When it was last announced or set (the overlay's seconds).
    pub seen_s: u32,
}

/// What an ARP or ND frame is, for suppression.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NeighMessage {
    /// An ARP request or a Neighbor Solicitation for `target` (not a
    /// duplicate address probe: those are never answered).
    Request {
        /// The address asked for.
        target: IpAddr,
    },
    /// An address announced with its MAC: an ARP reply, a gratuitous ARP,
    /// a Neighbor Advertisement (target link-layer address option, or
    /// the frame's source MAC).
    Announce {
        /// The address.
        ip: IpAddr,
        /// Its MAC.
        mac: [u8; 6],
    },
    /// Neither (or malformed).
    Other,
}

/// The neighbour tables of every network, bounded per network.
#[derive(Debug, Default)]
pub struct Neighbours {}

/// The table of a network is full.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NeighFull;

impl Neighbours {
    /// Empty tables.
    pub fn new() -> Neighbours {
        todo!()
    }

    /// `ip`'s entry in `network`.
    pub fn get(&self, _network: u16, _ip: IpAddr) -> Option<Neigh> {
        todo!()
    }

    /// Sets `ip`'s entry in `network`; the old one. A learned entry never
    /// replaces a static or external one (then `Ok` with the entry kept,
    /// unchanged). Refused when the network holds `limit` entries.
    pub fn set(
        &self,
        _network: u16,
        _ip: IpAddr,
        _n: Neigh,
        _limit: u32,
    ) -> Result<Option<Neigh>, NeighFull> {
        todo!()
    }

    /// Removes `ip`'s entry in `network`; what it was.
    pub fn remove(&self, _network: u16, _ip: IpAddr) -> Option<Neigh> {
        todo!()
    }

    /// Every entry (of `network`, or all), sorted by network and address.
    pub fn entries(&self, _network: Option<u16>) -> Vec<(u16, IpAddr, Neigh)> {
        todo!()
    }

    /// Removes learned entries older than their network's ageing time;
    /// how many.
    pub fn sweep(&self, _now_s: u32, _ageing_s: impl Fn(u16) -> u32) -> usize {
        todo!()
    }

    /// Removes every entry of `network`; how many.
    pub fn flush(&self, _network: u16) -> usize {
        todo!()
    }
}

/// What the Ethernet frame `frame` is for suppression (never panics).
pub fn classify(_frame: &[u8]) -> NeighMessage {
    todo!()
}

/// The answer to the request `request` (an ARP request or Neighbor
/// Solicitation that [`classify`] called a `Request`) for an address whose
/// MAC is `mac`, written into `out` as a whole Ethernet frame: an ARP reply
/// or a solicited Neighbor Advertisement (S and O set, target link-layer
/// address option, ICMPv6 checksum), to the requester. Its length, or None
/// when `out` is too short or `request` is not a request.
pub fn answer(_request: &[u8], _mac: [u8; 6], _out: &mut [u8]) -> Option<usize> {
    todo!()
}
