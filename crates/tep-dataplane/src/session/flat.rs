//! The session table's hash maps: open addressing with linear probing
//! over one flat array, written here rather than taken from std
//! (hashbrown) because the per-packet path needs the address of the slot a
//! key lands in before it looks: the lookup nodes prefetch every packet's
//! slot across the vector first, so that a million sessions (tables far
//! larger than the caches) cost overlapped memory fetches instead of one
//! miss after another, as VPP's bihash lookups do. hashbrown offers no
//! way to find a key's bucket without probing it.
//!
//! Keys are integers; values are slots (`u32`, `EMPTY` marks a free
//! entry). Deletion shifts the entries after it back (no tombstones), so
//! that a table churned by sessions coming and going keeps short probes.

use crate::memory::Table;

/// A free entry.
const EMPTY: u32 = u32::MAX;

/// The most a table is filled before it doubles: 3/4.
const LOAD_NUM: usize = 3;
const LOAD_DEN: usize = 4;

/// An integer key.
pub(crate) trait Key: Copy + Eq + Default {
    /// 64 well-mixed bits (the top ones pick the entry).
    fn hash(self) -> u64;
}

/// Fibonacci hashing's multiplier (2^64 / φ).
const PHI: u64 = 0x9e37_79b9_7f4a_7c15;

impl Key for u32 {
    #[inline]
    fn hash(self) -> u64 {
        u64::from(self).wrapping_mul(PHI)
    }
}

impl Key for u64 {
    #[inline]
    fn hash(self) -> u64 {
        (self ^ (self >> 32)).wrapping_mul(PHI)
    }
}

impl Key for u128 {
    #[inline]
    fn hash(self) -> u64 {
        ((self as u64) ^ ((self >> 64) as u64).rotate_left(29)).wrapping_mul(PHI)
    }
}

/// An IP address as a key (the default, 0.0.0.0, only fills free
/// entries: lookups compare values first).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AddrKey(pub core::net::IpAddr);

impl Default for AddrKey {
    fn default() -> Self {
        AddrKey(core::net::IpAddr::V4(core::net::Ipv4Addr::UNSPECIFIED))
    }
}

impl Key for AddrKey {
    #[inline]
    fn hash(self) -> u64 {
        match self.0 {
            core::net::IpAddr::V4(a) => u32::from(a).hash(),
            core::net::IpAddr::V6(a) => u128::from(a).hash() ^ 1,
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Entry<K> {
    key: K,
    value: u32,
}

/// A map from integer keys to slots.
#[derive(Debug)]
pub(crate) struct FlatMap<K: Key> {
    // A table of its own: at a million sessions tens of megabytes read at
    // random, on huge pages where the owner asks for them.
    entries: Table<Entry<K>>,
    // 64 - log2(entries.len()): the hash's top bits index the array.
    shift: u32,
    len: usize,
}

impl<K: Key> Default for FlatMap<K> {
    fn default() -> Self {
        FlatMap {
            entries: Table::default(),
            shift: 64,
            len: 0,
        }
    }
}

impl<K: Key> FlatMap<K> {
    #[inline]
    fn home(&self, k: K) -> usize {
        // `shift` is 64 only while the array is empty: checked_shr gives 0.
        k.hash().checked_shr(self.shift).unwrap_or(0) as usize
    }

    /// The slot `k` maps to.
    #[inline]
    pub fn get(&self, k: K) -> Option<u32> {
        if self.entries.is_empty() {
            return None;
        }
        let mask = self.entries.len() - 1;
        let mut i = self.home(k);
        loop {
            let e = self.entries[i];
            if e.value == EMPTY {
                return None;
            }
            if e.key == k {
                return Some(e.value);
            }
            i = (i + 1) & mask;
        }
    }

    /// Visits the entries from `k`'s home to the first free one (every
    /// key whose home is `k`'s is among them: linear probing puts it
    /// there) until `visit` returns true.
    #[inline]
    pub fn scan(&self, k: K, mut visit: impl FnMut(K, u32) -> bool) {
        if self.entries.is_empty() {
            return;
        }
        let mask = self.entries.len() - 1;
        let mut i = self.home(k);
        loop {
            let e = self.entries[i];
            if e.value == EMPTY || visit(e.key, e.value) {
                return;
            }
            i = (i + 1) & mask;
        }
    }

    /// Starts fetching the entry `k` lands in (a hint; no effect on what
    /// any lookup returns).
    #[inline]
    pub fn prefetch(&self, k: K) {
        if let Some(e) = self.entries.get(self.home(k)) {
            prefetch(e);
        }
    }

    /// Maps `k` to `v`; the value it had.
    pub fn insert(&mut self, k: K, v: u32) -> Option<u32> {
        if (self.len + 1) * LOAD_DEN > self.entries.len() * LOAD_NUM {
            self.grow();
        }
        let mask = self.entries.len() - 1;
        let mut i = self.home(k);
        loop {
            let e = &mut self.entries[i];
            if e.value == EMPTY {
                *e = Entry { key: k, value: v };
                self.len += 1;
                return None;
            }
            if e.key == k {
                return Some(core::mem::replace(&mut e.value, v));
            }
            i = (i + 1) & mask;
        }
    }

    /// Unmaps `k`; the value it had.
    pub fn remove(&mut self, k: K) -> Option<u32> {
        if self.entries.is_empty() {
            return None;
        }
        let mask = self.entries.len() - 1;
        let mut i = self.home(k);
        loop {
            let e = self.entries[i];
            if e.value == EMPTY {
                return None;
            }
            if e.key == k {
                break;
            }
            i = (i + 1) & mask;
        }
        let old = self.entries[i].value;
        // Backward shift: each later entry of the run moves into the hole
        // if its home is not between the hole and itself (cyclically).
        let mut hole = i;
        let mut j = (i + 1) & mask;
        loop {
            let e = self.entries[j];
            if e.value == EMPTY {
                break;
            }
            let home = self.home(e.key);
            let between = if hole <= j {
                hole < home && home <= j
            } else {
                hole < home || home <= j
            };
            if !between {
                self.entries[hole] = e;
                hole = j;
            }
            j = (j + 1) & mask;
        }
        self.entries[hole] = Entry {
            key: K::default(),
            value: EMPTY,
        };
        self.len -= 1;
        Some(old)
    }

    fn grow(&mut self) {
        let cap = (self.entries.len() * 2).max(16);
        let empty = Entry {
            key: K::default(),
            value: EMPTY,
        };
        let old = core::mem::replace(&mut self.entries, Table::new(cap, |_| empty));
        self.shift = 64 - cap.trailing_zeros();
        self.len = 0;
        for e in old.iter().filter(|e| e.value != EMPTY) {
            self.insert(e.key, e.value);
        }
    }

    /// Keys mapped.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Unmaps every key, keeping the array (no allocation to fill it
    /// again).
    pub fn clear(&mut self) {
        for e in self.entries.iter_mut() {
            e.value = EMPTY;
        }
        self.len = 0;
    }

    /// Keeps only the keys `keep` says yes to, in place.
    pub fn retain(&mut self, mut keep: impl FnMut(K, u32) -> bool) {
        let mut i = 0;
        while i < self.entries.len() {
            let e = self.entries[i];
            // Entries only move back: a removal shifts later ones into
            // `i`, asked again; one at the array's start may wrap to its
            // end and be asked twice, which is harmless.
            if e.value != EMPTY && !keep(e.key, e.value) {
                self.remove(e.key);
                continue;
            }
            i += 1;
        }
    }

    /// Bytes of the array.
    pub fn bytes(&self) -> usize {
        self.entries.len() * core::mem::size_of::<Entry<K>>()
    }
}

/// How far ahead of its lookup a key's entry is prefetched: enough
/// fetches in flight to hide a memory access, few enough that the CPU's
/// miss buffers (about ten to a core) do not drop them.
pub(crate) const AHEAD: usize = 8;

/// Calls `fetch(i)` for `i` in `0..n`, each [`AHEAD`] steps before
/// `look(i)`: the prefetches of a vector's keys run ahead of the lookups
/// that read what they fetched (VPP's dual and quad loops do the same with
/// their prefetch of the packets after the ones at hand).
#[inline]
pub(crate) fn staggered(n: usize, mut fetch: impl FnMut(usize), mut look: impl FnMut(usize)) {
    for i in 0..n + AHEAD {
        if i < n {
            fetch(i);
        }
        if i >= AHEAD {
            look(i - AHEAD);
        }
    }
}

/// [`staggered`] over the runs of equal keys in `keys` (at most a
/// vector's): a burst of one flow's packets, which a vector often holds,
/// is fetched and looked up once, and the fetches run [`AHEAD`] distinct
/// keys ahead rather than packets (eight packets of one session would
/// leave one fetch in flight). `look(key, packets)` gets each run.
#[inline]
pub(crate) fn staggered_runs<T: PartialEq + Copy>(
    keys: &[T],
    mut fetch: impl FnMut(T),
    mut look: impl FnMut(T, core::ops::Range<usize>),
) {
    let n = keys.len().min(crate::vector::VECTOR_SIZE);
    let mut starts = [0u16; crate::vector::VECTOR_SIZE + 1];
    let mut runs = 0;
    for i in 0..n {
        if i == 0 || keys[i] != keys[i - 1] {
            starts[runs] = i as u16;
            runs += 1;
        }
    }
    starts[runs] = n as u16;
    let at = |r: usize| usize::from(starts[r]);
    staggered(
        runs,
        |r| fetch(keys[at(r)]),
        |r| look(keys[at(r)], at(r)..at(r + 1)),
    );
}

/// Starts fetching `*p`'s cache line into every level (a hint: it never
/// faults, changes nothing, and is a no-op off x86-64).
#[inline(always)]
pub fn prefetch<T>(p: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT0 reads no memory architecturally and cannot fault
    // (a hint the CPU may drop); SSE, its feature, is part of x86-64's
    // baseline; `p` is a valid reference anyway.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(
            (p as *const T).cast::<i8>(),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each run of equal keys is fetched once and looked up once with its
    /// packets, fetches AHEAD runs before their lookups.
    #[test]
    fn runs_of_equal_keys_are_fetched_and_looked_up_once() {
        let keys = [1, 1, 1, 2, 3, 3, 1, 1, 4, 5, 6, 7, 8, 9, 10, 11, 12, 12];
        let events = core::cell::RefCell::new(Vec::new());
        staggered_runs(
            &keys,
            |k| events.borrow_mut().push((0, k, 0..0)),
            |k, r| events.borrow_mut().push((1, k, r)),
        );
        let events = events.into_inner();
        let fetched: Vec<i32> = events.iter().filter(|e| e.0 == 0).map(|e| e.1).collect();
        assert_eq!(fetched, [1, 2, 3, 1, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
        let looked: Vec<(i32, core::ops::Range<usize>)> = events
            .iter()
            .filter(|e| e.0 == 1)
            .map(|e| (e.1, e.2.clone()))
            .collect();
        assert_eq!(looked[0], (1, 0..3));
        assert_eq!(looked[2], (3, 4..6));
        assert_eq!(looked[3], (1, 6..8));
        assert_eq!(looked.last(), Some(&(12, 16..18)));
        assert_eq!(looked.len(), 13);
        // The first lookup comes with the fetch AHEAD runs on (or after
        // all of them).
        let first_look = events.iter().position(|e| e.0 == 1).unwrap();
        assert_eq!(first_look, (AHEAD + 1).min(13));
        staggered_runs(
            &[] as &[u8],
            |_| panic!("no keys"),
            |_, _| panic!("no keys"),
        );
    }
    use proptest::prelude::*;
    use std::collections::HashMap;

    proptest! {
        /// Any sequence of inserts and removes leaves the map agreeing
        /// with std's, keys crowded into few homes included.
        #[test]
        fn agrees_with_std(ops in proptest::collection::vec((any::<bool>(), 0u32..64, 0u32..1000), 0..400)) {
            let mut m = FlatMap::<u32>::default();
            let mut want = HashMap::new();
            for (insert, k, v) in ops {
                // Keys that collide: multiples of 2^26 share their top bits.
                let k = k << 26 | (k & 3);
                if insert {
                    prop_assert_eq!(m.insert(k, v), want.insert(k, v));
                } else {
                    prop_assert_eq!(m.remove(k), want.remove(&k));
                }
                prop_assert_eq!(m.len(), want.len());
            }
            for k in 0u32..64 {
                let k = k << 26 | (k & 3);
                prop_assert_eq!(m.get(k), want.get(&k).copied());
            }
        }
    }

    proptest! {
        /// `retain` keeps exactly what its predicate keeps, crowded homes
        /// and runs that wrap past the array's end included; `clear`
        /// leaves nothing.
        #[test]
        fn retain_and_clear_agree_with_std(keys in proptest::collection::vec((0u32..64, 0u32..1000), 0..40), cut in 0u32..1000) {
            let mut m = FlatMap::<u32>::default();
            let mut want = HashMap::new();
            for (k, v) in keys {
                // As above: keys that collide, in a table filled to its
                // load factor, whose runs wrap past the end.
                let k = k << 26 | (k & 3);
                m.insert(k, v);
                want.insert(k, v);
            }
            m.retain(|_, v| v < cut);
            want.retain(|_, v| *v < cut);
            prop_assert_eq!(m.len(), want.len());
            for (&k, &v) in &want {
                prop_assert_eq!(m.get(k), Some(v));
            }
            let mut seen = 0;
            for k in 0u32..64 {
                seen += usize::from(m.get(k << 26 | (k & 3)).is_some());
            }
            prop_assert_eq!(seen, want.len());
            m.clear();
            prop_assert_eq!(m.len(), 0);
            for k in 0u32..64 {
                prop_assert_eq!(m.get(k << 26 | (k & 3)), None);
            }
        }
    }

    #[test]
    fn addr_keys_keep_families_apart() {
        use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
        let mut m = FlatMap::<AddrKey>::default();
        let v4 = AddrKey(IpAddr::V4(Ipv4Addr::new(0, 0, 0, 1)));
        let v6 = AddrKey(IpAddr::V6(Ipv6Addr::from(1u128)));
        m.insert(v4, 4);
        assert_eq!(m.get(v6), None);
        m.insert(v6, 6);
        assert_eq!((m.get(v4), m.get(v6)), (Some(4), Some(6)));
        assert_eq!(m.get(AddrKey::default()), None);
    }

    #[test]
    fn wide_keys_and_growth() {
        let mut m = FlatMap::<u128>::default();
        assert_eq!(m.get(5), None);
        m.prefetch(5);
        for i in 0..10_000u128 {
            assert_eq!(m.insert(i << 64 | i, i as u32), None);
        }
        for i in 0..10_000u128 {
            assert_eq!(m.get(i << 64 | i), Some(i as u32));
        }
        for i in (0..10_000u128).step_by(2) {
            assert_eq!(m.remove(i << 64 | i), Some(i as u32));
        }
        assert_eq!(m.len(), 5000);
        assert_eq!(m.get(2 << 64 | 2), None);
        assert_eq!(m.get(3 << 64 | 3), Some(3));
    }
}
