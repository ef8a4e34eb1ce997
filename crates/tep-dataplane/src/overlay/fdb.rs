//! The forwarding database of every network: MAC → where it is (a remote
//! VTEP, or the local side), shared by all workers without a lock on the
//! read path.
//!
//! STUB: the API the rest of the overlay is written against; a helper
//! implements it (see the doc of each item).

use core::sync::atomic::AtomicU64;

/// A MAC in a network, packed: `(network + 1) << 48 | mac`, so that 0 is
/// never a key (an empty slot).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FdbKey(pub u64);

impl FdbKey {
    /// The key of `mac` in network `network`.
    #[inline]
    pub const fn new(network: u16, mac: [u8; 6]) -> FdbKey {
        let m = (mac[0] as u64) << 40
            | (mac[1] as u64) << 32
            | (mac[2] as u64) << 24
            | (mac[3] as u64) << 16
            | (mac[4] as u64) << 8
            | mac[5] as u64;
        FdbKey(((network as u64) + 1) << 48 | m)
    }

    /// The network.
    pub const fn network(self) -> u16 {
        ((self.0 >> 48) - 1) as u16
    }

    /// The MAC.
    pub const fn mac(self) -> [u8; 6] {
        let b = self.0.to_be_bytes();
        [b[2], b[3], b[4], b[5], b[6], b[7]]
    }
}

/// Where a MAC is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dst {
    /// Behind remote VTEP `id` ([`super::Vteps`]).
    Remote(u32),
    /// On the network's local side (the TAP, the inner interface).
    Local,
}

/// Who made an entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Origin {
    /// The config or `tep fdb add`: never aged, never displaced by
    /// learning.
    Static,
    /// Learned by the data path: aged, followed when it moves.
    Learned,
    /// A control plane (EVPN): not aged, not displaced by learning,
    /// replaced and removed by its control plane only.
    External,
}

/// One entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Entry {
    /// Where the MAC is.
    pub dst: Dst,
    /// Who made it.
    pub origin: Origin,
    /// When it was last seen (learned) or made: seconds of the overlay's
    /// clock, kept modulo 2^24.
    pub seen_s: u32,
}

/// What learning did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Learned {
    /// The entry was there, same place, seen this second: nothing written.
    Fresh,
    /// The entry was there, same place: its time written.
    Refreshed,
    /// A new entry.
    Added,
    /// A learned entry moved (from where it was).
    Moved(Dst),
    /// Not learned: a static or external entry says otherwise (a move it
    /// does not follow).
    Pinned,
    /// Not learned: the network holds its limit of learned entries.
    Limit,
    /// Not learned: no room in the table where the key hashes.
    Full,
}

/// The table.
#[derive(Debug)]
pub struct Fdb {
    _slots: Box<[AtomicU64]>,
}

impl Fdb {
    /// A table for up to `capacity` entries over `networks` networks.
    pub fn new(_capacity: usize, _networks: usize) -> Fdb {
        todo!()
    }

    /// The entry of `key` (lock-free).
    #[inline]
    pub fn lookup(&self, _key: FdbKey) -> Option<Entry> {
        todo!()
    }

    /// Prefetches where `key` would be (for a vector, before lookups).
    #[inline]
    pub fn prefetch(&self, _key: FdbKey) {
        todo!()
    }

    /// Data-path learning: `key` is at `dst` now (second `now_s`). A new
    /// entry counts against `limit` learned entries of the key's network.
    #[inline]
    pub fn learn(&self, _key: FdbKey, _dst: Dst, _now_s: u32, _limit: u32) -> Learned {
        todo!()
    }

    /// Control plane: sets `key`'s entry, replacing what is there; the old
    /// entry, or `Err` when there is no room.
    pub fn insert(&self, _key: FdbKey, _entry: Entry) -> Result<Option<Entry>, ()> {
        todo!()
    }

    /// Removes `key`'s entry; what it was.
    pub fn remove(&self, _key: FdbKey) -> Option<Entry> {
        todo!()
    }

    /// Every entry (of `network`, or all), in no order.
    pub fn for_each(&self, _network: Option<u16>, _f: impl FnMut(FdbKey, Entry)) {
        todo!()
    }

    /// Removes learned entries not seen for their network's ageing time
    /// (`ageing_s(network)` seconds before `now_s`), calling `aged` for
    /// each.
    pub fn sweep(
        &self,
        _now_s: u32,
        _ageing_s: impl Fn(u16) -> u32,
        _aged: impl FnMut(FdbKey, Entry),
    ) {
        todo!()
    }

    /// Removes every entry of `network` (its config went away).
    pub fn flush(&self, _network: u16) -> usize {
        todo!()
    }

    /// The learned entries of `network`.
    pub fn learned(&self, _network: u16) -> u32 {
        todo!()
    }

    /// Bytes the table takes.
    pub fn bytes(&self) -> usize {
        todo!()
    }
}
