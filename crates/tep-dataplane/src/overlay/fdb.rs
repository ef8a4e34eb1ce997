//! The forwarding database of every network: MAC → where it is (a remote
//! VTEP, or the local side), shared by all workers without a lock on the
//! read path.
//!
//! A fixed array of buckets, each four keys and their four values in one
//! cache line. A key hashes to one home bucket; a key whose home is full
//! goes to the next bucket with room, at most [`PROBE`] buckets on (linear
//! probing by buckets, the last bucket wrapping to the first). At the
//! sized capacity the table is at most half full, so nearly every key is
//! at home and a lookup reads one line, which `prefetch` starts early: a
//! lookup goes past a bucket only when that bucket has no never-used slot.
//! No entry ever moves. A removed key leaves a tombstone (a slot neither
//! holding a key nor stopping a lookup) while a key that went past its
//! bucket lives further on; the writer turns tombstones back into free
//! slots as soon as no key goes past them any more. So the rule "every
//! bucket from a key's home to its slot has no free slot" always holds,
//! and a lookup never stops before a present key.
//!
//! Readers take no lock and write nothing. Writers that change which key
//! a slot holds (add, remove, replace, sweep, flush) hold the table's
//! mutex; the data path reaches it only to add an entry, never to refresh
//! or move one: both are one compare-and-swap of the value, and a refresh
//! within the same second writes nothing at all.
//!
//! Each value carries a generation of its slot, bumped whenever the slot
//! takes a new key. A reader loads value, key, value and accepts when the
//! key is the one it wants and both values are of one generation: the key
//! it saw was then the slot's key for the whole read, so a slot emptied
//! and given to another key (or to the same key again) between its loads
//! is never read as this key's entry (a key, value, key read would accept
//! that case when the slot came back to the same key). The same generation
//! makes a learner's compare-and-swap fail if the slot changed hands.

use crate::geometry::mix;
use crate::session::flat::prefetch;
use core::fmt;
use core::ptr::NonNull;
use core::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use core::sync::atomic::{AtomicU32, AtomicU64};
use std::alloc::{self, Layout};
use std::sync::{Mutex, MutexGuard};

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

    /// The network (`u16::MAX`, never a network's index, for a key no
    /// [`FdbKey::new`] makes).
    pub const fn network(self) -> u16 {
        ((self.0 >> 48) as u16).wrapping_sub(1)
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
    /// A control plane (EVPN): not aged, not displaced by what is learned
    /// from the underlay, replaced and removed by its control plane; a
    /// frame from the local side moves it here (then it is learned).
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
    /// Not learned: the network holds its limit of learned entries (a
    /// network the table was not made for holds none).
    Limit,
    /// Not learned: no room in the [`PROBE`] buckets from the key's home.
    Full,
}

/// The seconds an entry keeps: 24 bits.
pub const SEEN_MASK: u32 = 0x00ff_ffff;

/// Slots per bucket: four keys and their four values fill one cache
/// line. Two choices of bucket (d-left, the design before) read two lines
/// a lookup; one home bucket with linear probing reads one in the common
/// case: at the bench's load (a quarter of the slots) about 0.4 % of the
/// buckets overflow, at the sized capacity (half) about 5 %.
const WAYS: usize = 4;
/// Buckets a key may go on to from its home, its own included: the most a
/// lookup reads (a miss stops at the first bucket with a free slot, nearly
/// always the home). A key finding all of them full is refused
/// ([`Learned::Full`]). Linear probing's runs of full buckets are longer
/// than two choices' fullest bucket: with 8 buckets the first refusal
/// came at 39–59 % of the slots, before the sized capacity; with 32 at
/// 70–78 % (a million entries and 32 Ki, four seeds each; two choices of
/// four slots: 54 %).
pub const PROBE: usize = 32;
/// A slot whose key was removed while a key that went past its bucket
/// lives further on: no key (its high 16 bits are 0), and not free.
const TOMB: u64 = 1;
/// The most slots a table takes (16 GiB): a capacity past it is cut to it
/// rather than overflowing the sizing.
const MAX_SLOTS: usize = 1 << 30;
/// Reads of a key retried when a writer changed its slot meanwhile; past
/// them the key reads as absent (a flood, which the next packet repairs).
const READ_TRIES: usize = 4;
/// Compare-and-swaps a learner tries without the lock before it takes it.
const CAS_TRIES: usize = 4;
/// Buckets swept or flushed per hold of the writer lock, so that a learner
/// adding an entry waits for a few of them, not for the whole table.
const CHUNK: usize = 16;

/// The slots of a table for `capacity` entries: twice as many, a power of
/// two, two buckets at least.
fn slots_for(capacity: usize) -> usize {
    capacity
        .clamp(1, MAX_SLOTS / 2)
        .saturating_mul(2)
        .next_power_of_two()
        .max(2 * WAYS)
}

/// Seconds from `seen` to `now`, both modulo 2^24; 0 when `seen` is
/// later (by less than half the circle): the clock one worker read ran
/// ahead of another's, and an entry just seen is neither refreshed
/// backwards nor aged at once.
const fn age(now: u32, seen: u32) -> u32 {
    let age = now.wrapping_sub(seen) & SEEN_MASK;
    if age > SEEN_MASK / 2 {
        0
    } else {
        age
    }
}

/// The layout of a value: the VTEP id (bits 0–31), local (32), seen
/// (33–56), origin (57–58: 1 static, 2 learned, 3 external; 0 not ready),
/// the slot's generation (59–63).
mod value {
    use super::{Dst, Entry, Origin, SEEN_MASK};

    const LOCAL: u64 = 1 << 32;
    const SEEN_SHIFT: u32 = 33;
    const ORIGIN_SHIFT: u32 = 57;
    const GEN_SHIFT: u32 = 59;

    pub(super) const fn gen(v: u64) -> u64 {
        v >> GEN_SHIFT
    }

    /// An empty slot's value, remembering its generation.
    pub(super) const fn empty(gen: u64) -> u64 {
        gen << GEN_SHIFT
    }

    /// The generation after `v`'s (five bits, wrapping).
    pub(super) const fn next_gen(v: u64) -> u64 {
        (gen(v) + 1) & 0x1f
    }

    pub(super) fn encode(e: Entry, gen: u64) -> u64 {
        let dst = match e.dst {
            Dst::Remote(id) => u64::from(id),
            Dst::Local => LOCAL,
        };
        let origin: u64 = match e.origin {
            Origin::Static => 1,
            Origin::Learned => 2,
            Origin::External => 3,
        };
        dst | u64::from(e.seen_s & SEEN_MASK) << SEEN_SHIFT
            | origin << ORIGIN_SHIFT
            | gen << GEN_SHIFT
    }

    /// Whether `v` is an entry (of any origin) at `dst` seen at `now` or
    /// later: what learning `dst` at `now` leaves as it is
    /// ([`super::Learned::Fresh`]).
    #[inline(always)]
    pub(super) fn fresh(v: u64, dst: Dst, now: u32) -> bool {
        let at = match dst {
            Dst::Remote(id) => u64::from(id),
            Dst::Local => LOCAL,
        };
        let seen = (v >> SEEN_SHIFT) as u32 & SEEN_MASK;
        v & (LOCAL | 0xffff_ffff) == at
            && (v >> ORIGIN_SHIFT) & 3 != 0
            && super::age(now, seen) == 0
    }

    /// The entry of `v`; None while its slot is empty or being emptied.
    pub(super) fn decode(v: u64) -> Option<Entry> {
        let origin = match (v >> ORIGIN_SHIFT) & 3 {
            1 => Origin::Static,
            2 => Origin::Learned,
            3 => Origin::External,
            _ => return None,
        };
        let dst = if v & LOCAL != 0 {
            Dst::Local
        } else {
            Dst::Remote(v as u32)
        };
        Some(Entry {
            dst,
            origin,
            seen_s: (v >> SEEN_SHIFT) as u32 & SEEN_MASK,
        })
    }
}

/// Four slots: keys and values in one cache line.
#[repr(C, align(64))]
#[derive(Default)]
struct Bucket {
    keys: [AtomicU64; WAYS],
    vals: [AtomicU64; WAYS],
}

/// The buckets, in an allocation of their own from the allocator's zeroed
/// path (a large block is fresh pages, untouched until used): all zero is
/// every slot empty; huge pages are asked for before the table fills
/// ([`crate::memory::advise`]).
struct Buckets {
    first: NonNull<Bucket>,
    len: usize,
    alloc: NonNull<u8>,
    layout: Layout,
}

impl Buckets {
    /// `len` empty buckets, a power of two (so that [`Buckets::at`] may
    /// wrap by a mask).
    fn zeroed(len: usize) -> Buckets {
        assert!(len.is_power_of_two(), "FDB buckets: {len}");
        let align = core::mem::align_of::<Bucket>();
        let bytes = len
            .checked_mul(core::mem::size_of::<Bucket>())
            .and_then(|b| b.checked_add(align))
            .expect("FDB size (slots are capped)");
        // Alignment 1: the allocator's calloc path, whose large blocks are
        // fresh pages; the buckets start at the first aligned byte.
        let layout = Layout::from_size_align(bytes, 1).expect("FDB layout");
        // SAFETY: the layout's size is not zero (`align` at least).
        let alloc = unsafe { alloc::alloc_zeroed(layout) };
        let Some(alloc) = NonNull::new(alloc) else {
            alloc::handle_alloc_error(layout)
        };
        let start = alloc.as_ptr().align_offset(align);
        assert!(start < align, "FDB alignment");
        // SAFETY: start < align, so `len` buckets from there lie inside
        // the allocation of `len` buckets plus `align` bytes; all-zero
        // bytes are a valid `Bucket` (atomic integers, every slot empty).
        let first = unsafe { NonNull::new_unchecked(alloc.as_ptr().add(start).cast::<Bucket>()) };
        // Fresh pages from the allocator's zeroed path, untouched: huge
        // ones where the owner asks for them (a million entries span 32
        // MiB; with 4 KiB pages a lookup also missed the TLB).
        crate::memory::advise(
            first.as_ptr() as usize,
            len * core::mem::size_of::<Bucket>(),
        );
        Buckets {
            first,
            len,
            alloc,
            layout,
        }
    }

    /// Bucket `j` modulo the table's length: probing wraps from the last
    /// bucket to the first, and the data path's lookups pay no bounds
    /// check.
    #[inline(always)]
    fn at(&self, j: usize) -> &Bucket {
        // SAFETY: `len` is a power of two (`zeroed`), so the index is
        // below it: an initialized bucket, alive as long as `self`.
        unsafe { &*self.first.as_ptr().add(j & (self.len - 1)) }
    }
}

impl core::ops::Deref for Buckets {
    type Target = [Bucket];
    fn deref(&self) -> &[Bucket] {
        // SAFETY: `len` initialized (zeroed) buckets at `first`, alive as
        // long as `self`; only shared references are ever made (the
        // buckets are atomics).
        unsafe { core::slice::from_raw_parts(self.first.as_ptr(), self.len) }
    }
}

impl Drop for Buckets {
    fn drop(&mut self) {
        // SAFETY: the allocation made in `zeroed` with this layout, freed
        // once; no reference into it outlives `self` (Deref borrows it).
        unsafe { alloc::dealloc(self.alloc.as_ptr(), self.layout) };
    }
}

// SAFETY: `Buckets` owns its allocation as a Box<[Bucket]> would, and
// `Bucket` (atomics only) is Send and Sync.
unsafe impl Send for Buckets {}
// SAFETY: as above: shared access is to atomics only.
unsafe impl Sync for Buckets {}

impl fmt::Debug for Buckets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} buckets", self.len)
    }
}

/// What one consistent read of a slot found.
enum Read {
    /// The key's value.
    Entry(u64),
    /// The key's slot is being emptied.
    Gone,
    /// The slot changed hands during the read.
    Torn,
}

/// Whether slot key `k` holds a key (neither free nor a tombstone).
const fn is_key(k: u64) -> bool {
    k >> 48 != 0
}

impl Bucket {
    /// Reads slot `i`, expected to hold `key` (see the module's doc).
    #[inline]
    fn read(&self, i: usize, key: u64) -> Read {
        let v1 = self.vals[i].load(Acquire);
        let k = self.keys[i].load(Acquire);
        let v2 = self.vals[i].load(Acquire);
        if k != key || value::gen(v1) != value::gen(v2) {
            return Read::Torn;
        }
        match (value::decode(v1), value::decode(v2)) {
            (Some(_), Some(_)) => Read::Entry(v2),
            _ => Read::Gone,
        }
    }

    /// A bit per slot holding `key`, and whether a slot is free (no key
    /// lives past this bucket then): every slot compared without a
    /// branch, a branch per slot was mispredicted at nearly every lookup.
    #[inline(always)]
    fn scan(&self, key: u64) -> (u32, bool) {
        let mut hits = 0;
        let mut free = false;
        for (i, k) in self.keys.iter().enumerate() {
            let k = k.load(Acquire);
            hits |= u32::from(k == key) << i;
            free |= k == 0;
        }
        (hits, free)
    }

    /// Whether a slot is free (exact under the writer lock: keys change
    /// only there).
    fn has_free(&self) -> bool {
        self.keys.iter().any(|k| k.load(Relaxed) == 0)
    }

    /// A slot a new key may take: free or a tombstone.
    fn room(&self) -> Option<usize> {
        self.keys.iter().position(|k| !is_key(k.load(Relaxed)))
    }
}

/// Where a key was found: its bucket's index, slot and value.
type Found = (usize, usize, u64);

/// The table.
pub struct Fdb {
    buckets: Buckets,
    /// Buckets less one (a power of two less one).
    mask: usize,
    /// Buckets a probe visits: [`PROBE`], or all of a smaller table.
    probe: usize,
    seed: [u64; 2],
    /// Learned entries per network.
    learned: Box<[AtomicU32]>,
    /// Held to change which key a slot holds.
    writer: Mutex<()>,
}

impl fmt::Debug for Fdb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fdb")
            .field("slots", &self.slots())
            .field("networks", &self.learned.len())
            .finish_non_exhaustive()
    }
}

impl Fdb {
    /// A table for up to `capacity` entries over `networks` networks.
    pub fn new(capacity: usize, networks: usize) -> Fdb {
        // std keys every RandomState at random (once per process, then
        // stepped): a secret seed without a syscall of ours.
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_usize(capacity);
        Fdb::with_seed(capacity, networks, h.finish())
    }

    /// [`Fdb::new`] with the hash's seed given: MACs are chosen by
    /// strangers, so a seed they cannot guess keeps them from crowding
    /// one run of buckets (tests pass a fixed one).
    pub fn with_seed(capacity: usize, networks: usize, seed: u64) -> Fdb {
        let buckets = Buckets::zeroed(slots_for(capacity) / WAYS);
        let networks = networks.min(super::MAX_NETWORKS);
        Fdb {
            mask: buckets.len() - 1,
            probe: PROBE.min(buckets.len()),
            buckets,
            seed: [seed, mix(seed, 0x6664_625f_7365_6564)],
            learned: (0..networks).map(|_| AtomicU32::new(0)).collect(),
            writer: Mutex::new(()),
        }
    }

    /// Slots in all (twice the capacity asked for, or more).
    pub fn slots(&self) -> usize {
        self.buckets.len() * WAYS
    }

    /// The bucket `key` hashes to.
    #[inline]
    fn home(&self, key: u64) -> usize {
        // A multiply alone leaves its low bits blind to the key's high
        // ones (MACs differing in their first bytes would share a
        // bucket): the fold in between spreads every bit of the key.
        let h = mix(self.seed[0], key);
        let h = mix(self.seed[1], h ^ h >> 29);
        (h ^ h >> 32) as usize & self.mask
    }

    /// Buckets from `from` on to `to`, wrapping.
    #[inline]
    fn distance(&self, from: usize, to: usize) -> usize {
        to.wrapping_sub(from) & self.mask
    }

    /// Whether `key` can be in the table: made by [`FdbKey::new`] for one
    /// of its networks.
    #[inline]
    fn counter(&self, key: FdbKey) -> Option<&AtomicU32> {
        self.learned.get(usize::from(key.network()))
    }

    /// Finds `key` (lock-free; under the writer lock, exact). Inlined into
    /// the data path's callers: out of line, its call and the registers it
    /// saved were a fifth of a lookup's instructions. The common case, a
    /// key found at home or a home with a free slot, reads one bucket
    /// here; the rest is [`Fdb::find_on`].
    #[inline(always)]
    fn find(&self, key: u64) -> Option<Found> {
        self.find_from(key, self.home(key))
    }

    /// [`Fdb::find`] from `home`, `key`'s home bucket.
    #[inline(always)]
    fn find_from(&self, key: u64, home: usize) -> Option<Found> {
        debug_assert_eq!(home, self.home(key));
        if !is_key(key) {
            return None;
        }
        let bucket = self.buckets.at(home);
        let (hits, free) = bucket.scan(key);
        if hits != 0 {
            // One hit unless a writer moved the key meanwhile.
            let i = hits.trailing_zeros() as usize;
            if let (Read::Entry(v), 0) = (bucket.read(i, key), hits & (hits - 1)) {
                return Some((home, i, v));
            }
        } else if free {
            return None;
        }
        self.find_on(key, home)
    }

    /// [`Fdb::find`] past its common case: the home bucket, then the next
    /// ones while each has no free slot, the whole probe read again when a
    /// slot changed hands during its read.
    #[inline(never)]
    fn find_on(&self, key: u64, home: usize) -> Option<Found> {
        'again: for _ in 0..READ_TRIES {
            for j in home..home + self.probe {
                let bucket = self.buckets.at(j);
                let (mut hits, free) = bucket.scan(key);
                while hits != 0 {
                    let i = hits.trailing_zeros() as usize;
                    hits &= hits - 1;
                    match bucket.read(i, key) {
                        Read::Entry(v) => return Some((j & self.mask, i, v)),
                        Read::Gone => continue,
                        Read::Torn => continue 'again,
                    }
                }
                if free {
                    return None;
                }
            }
            return None;
        }
        None
    }

    /// The entry of `key` (lock-free).
    #[inline]
    pub fn lookup(&self, key: FdbKey) -> Option<Entry> {
        self.find(key.0).and_then(|(_, _, v)| value::decode(v))
    }

    /// Prefetches where `key` would be (for a vector, before lookups): its
    /// home bucket's line, where a key nearly always is.
    #[inline]
    pub fn prefetch(&self, key: FdbKey) {
        self.prefetch_home(self.home(key.0));
    }

    /// `key`'s home bucket, for a caller that fetches it ahead
    /// ([`Fdb::prefetch_home`]) and reads it later ([`Fdb::lookup_from`],
    /// [`Fdb::learn_from`]) without hashing the key again.
    #[inline]
    pub fn home_of(&self, key: FdbKey) -> usize {
        self.home(key.0)
    }

    /// Prefetches bucket `home` (see [`Fdb::home_of`]).
    #[inline]
    pub fn prefetch_home(&self, home: usize) {
        prefetch(self.buckets.at(home));
    }

    /// [`Fdb::lookup`] of `key` from its home bucket `home`, which must be
    /// [`Fdb::home_of`]`(key)`.
    #[inline]
    pub fn lookup_from(&self, key: FdbKey, home: usize) -> Option<Entry> {
        self.find_from(key.0, home)
            .and_then(|(_, _, v)| value::decode(v))
    }

    /// Data-path learning: `key` is at `dst` now (second `now_s`). A new
    /// entry counts against `limit` learned entries of the key's network.
    /// Only adding an entry takes the lock; a refresh within the second
    /// writes nothing. Prefetch the key first: like a lookup, it is a
    /// memory miss otherwise.
    #[inline(always)]
    pub fn learn(&self, key: FdbKey, dst: Dst, now_s: u32, limit: u32) -> Learned {
        self.learn_from(key, self.home(key.0), dst, now_s, limit)
    }

    /// [`Fdb::learn`] with `key`'s home bucket `home`, which must be
    /// [`Fdb::home_of`]`(key)`.
    #[inline(always)]
    pub fn learn_from(
        &self,
        key: FdbKey,
        home: usize,
        dst: Dst,
        now_s: u32,
        limit: u32,
    ) -> Learned {
        // The common case, an entry already right and seen this second, is
        // a find and a comparison, inlined: nothing to write.
        if let Some((_, _, v)) = self.find_from(key.0, home) {
            if value::fresh(v, dst, now_s & SEEN_MASK) {
                return Learned::Fresh;
            }
        }
        self.learn_slow(key, dst, now_s, limit)
    }

    /// [`Fdb::learn`] past its common case.
    #[inline(never)]
    fn learn_slow(&self, key: FdbKey, dst: Dst, now_s: u32, limit: u32) -> Learned {
        let Some(count) = self.counter(key) else {
            return Learned::Limit;
        };
        let now = now_s & SEEN_MASK;
        for _ in 0..CAS_TRIES {
            let Some((j, i, v)) = self.find(key.0) else {
                break;
            };
            let val = &self.buckets.at(j).vals[i];
            if let Some(done) = Self::update(val, v, dst, now, (count, limit)) {
                return done;
            }
        }
        // A stranger sending from new MACs past the limit, or into a full
        // probe window, is turned away here, without the lock (the locked
        // path checks again).
        if self.find(key.0).is_none() {
            if count.load(Relaxed) >= limit {
                return Learned::Limit;
            }
            if self.room_for(key.0).is_none() {
                return Learned::Full;
            }
        }
        self.learn_locked(key, count, dst, now, limit)
    }
    /// What learning `dst` at `now` does to the entry whose value is `v`:
    /// the outcome, or None when another writer changed the value first.
    /// `learned` is the network's count of learned entries and its limit.
    #[inline]
    fn update(
        val: &AtomicU64,
        v: u64,
        dst: Dst,
        now: u32,
        (count, limit): (&AtomicU32, u32),
    ) -> Option<Learned> {
        let e = value::decode(v)?;
        // Seen now, or later by a worker whose clock read ran ahead: time
        // never goes back, and nothing is written.
        let current = age(now, e.seen_s) == 0;
        let (next, done) = match e.origin {
            Origin::Learned if e.dst != dst => (
                Entry {
                    dst,
                    seen_s: now,
                    ..e
                },
                Learned::Moved(e.dst),
            ),
            // A MAC a control plane put behind a remote VTEP speaks from
            // the local side: it moved here (EVPN MAC mobility). The local
            // side is first-hand; learned, it is advertised and BGP's
            // sequence numbers settle the rest. Underlay learning never
            // overrides the control plane.
            Origin::External if dst == Dst::Local && e.dst != dst => {
                if count.load(Relaxed) >= limit {
                    return Some(Learned::Limit);
                }
                let next = Entry {
                    dst,
                    origin: Origin::Learned,
                    seen_s: now,
                };
                (next, Learned::Moved(e.dst))
            }
            _ if e.dst != dst => return Some(Learned::Pinned),
            _ if current => return Some(Learned::Fresh),
            _ => (Entry { seen_s: now, ..e }, Learned::Refreshed),
        };
        // A move keeps the key in its slot and the network's count as it
        // is, so it needs no lock either.
        let won = val
            .compare_exchange(v, value::encode(next, value::gen(v)), Release, Relaxed)
            .is_ok();
        if won && e.origin != next.origin {
            count.fetch_add(1, Relaxed);
        }
        won.then_some(done)
    }

    fn learn_locked(
        &self,
        key: FdbKey,
        count: &AtomicU32,
        dst: Dst,
        now: u32,
        limit: u32,
    ) -> Learned {
        let w = self.writer();
        // Under the lock only other learners' compare-and-swaps race with
        // this one, and each that wins is progress.
        while let Some((j, i, v)) = self.find(key.0) {
            let val = &self.buckets.at(j).vals[i];
            if let Some(done) = Self::update(val, v, dst, now, (count, limit)) {
                return done;
            }
        }
        if count.load(Relaxed) >= limit {
            return Learned::Limit;
        }
        let entry = Entry {
            dst,
            origin: Origin::Learned,
            seen_s: now,
        };
        if !self.place(&w, key.0, entry) {
            return Learned::Full;
        }
        count.fetch_add(1, Relaxed);
        Learned::Added
    }

    fn writer(&self) -> MutexGuard<'_, ()> {
        // The lock guards no data of its own: a writer that panicked left
        // every slot either whole or empty.
        self.writer.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The first slot from `key`'s home on, within the probe window, that
    /// a new key may take (bucket, slot); None when the window is full.
    /// Every bucket before it is then full of keys: taking it keeps the
    /// module's rule (no free slot between a key's home and its slot).
    fn room_for(&self, key: u64) -> Option<(usize, usize)> {
        let home = self.home(key);
        (home..home + self.probe).find_map(|j| {
            let j = j & self.mask;
            self.buckets.at(j).room().map(|i| (j, i))
        })
    }

    /// Puts `key` (absent) into the first slot its probe may take; false
    /// when the window is full.
    fn place(&self, _writer: &MutexGuard<'_, ()>, key: u64, entry: Entry) -> bool {
        let Some((j, i)) = self.room_for(key) else {
            return false;
        };
        let bucket = self.buckets.at(j);
        let old = bucket.vals[i].load(Relaxed);
        bucket.vals[i].store(value::encode(entry, value::next_gen(old)), Release);
        bucket.keys[i].store(key, Release);
        true
    }

    /// Empties slot `i` of bucket `j` whose value was `v`: the entry it
    /// held, or None when a learner changed the value first.
    fn clear(&self, w: &MutexGuard<'_, ()>, j: usize, i: usize, v: u64) -> Option<Entry> {
        let e = value::decode(v)?;
        let bucket = self.buckets.at(j);
        bucket.vals[i]
            .compare_exchange(v, value::empty(value::gen(v)), AcqRel, Relaxed)
            .ok()?;
        // The value is not ready before the key goes: a reader that still
        // sees the key sees it empty. A tombstone first: freeing the slot
        // at once would stop the lookups of keys that went past it.
        let key = bucket.keys[i].swap(TOMB, Release);
        if e.origin == Origin::Learned {
            if let Some(c) = self.counter(FdbKey(key)) {
                c.fetch_sub(1, Relaxed);
            }
        }
        // The key's own probe went past its home up to here: those
        // buckets' tombstones may be the only thing it kept.
        let home = self.home(key);
        for back in 0..=self.distance(home, j) {
            self.tidy(w, j.wrapping_sub(back) & self.mask);
        }
        Some(e)
    }

    /// Frees bucket `j`'s tombstones when no key went past it.
    fn tidy(&self, _writer: &MutexGuard<'_, ()>, j: usize) {
        let bucket = self.buckets.at(j);
        let tombs = bucket.keys.iter().filter(|k| k.load(Relaxed) == TOMB);
        if tombs.clone().next().is_none() || self.passed(j) {
            return;
        }
        tombs.for_each(|k| k.store(0, Release));
    }

    /// Whether a key lives past bucket `j` having gone by it (under the
    /// writer lock). Only the buckets up to the first one with a free slot
    /// are looked at: no key went past that one.
    fn passed(&self, j: usize) -> bool {
        if self.buckets.at(j).has_free() {
            return false;
        }
        for step in 1..self.probe {
            let m = (j + step) & self.mask;
            let bucket = self.buckets.at(m);
            let went_by = bucket.keys.iter().any(|k| {
                let k = k.load(Relaxed);
                is_key(k) && self.distance(self.home(k), m) >= step
            });
            if went_by {
                return true;
            }
            if bucket.has_free() {
                return false;
            }
        }
        false
    }

    /// Control plane: sets `key`'s entry, replacing what is there; the old
    /// entry, or `Err` when there is no room (or `key` is of no network
    /// the table was made for).
    // The signature the overlay is written against: one way to fail, which
    // the caller names in its own error.
    #[allow(clippy::result_unit_err)]
    pub fn insert(&self, key: FdbKey, entry: Entry) -> Result<Option<Entry>, ()> {
        let count = self.counter(key).ok_or(())?;
        let entry = Entry {
            seen_s: entry.seen_s & SEEN_MASK,
            ..entry
        };
        let w = self.writer();
        let learned = u32::from(entry.origin == Origin::Learned);
        if let Some((j, i, v)) = self.find(key.0) {
            // The key stays in its slot: its generation too.
            let val = &self.buckets.at(j).vals[i];
            let old = value::decode(val.swap(value::encode(entry, value::gen(v)), AcqRel));
            let was = u32::from(old.is_some_and(|o| o.origin == Origin::Learned));
            count.fetch_add(learned, Relaxed);
            count.fetch_sub(was, Relaxed);
            return Ok(old);
        }
        if !self.place(&w, key.0, entry) {
            return Err(());
        }
        count.fetch_add(learned, Relaxed);
        Ok(None)
    }

    /// Removes `key`'s entry; what it was.
    pub fn remove(&self, key: FdbKey) -> Option<Entry> {
        let w = self.writer();
        loop {
            let (j, i, v) = self.find(key.0)?;
            if let Some(e) = self.clear(&w, j, i, v) {
                return Some(e);
            }
        }
    }

    /// Every entry (of `network`, or all), in no order. Takes no lock
    /// (`f` may call the table): each entry is read whole, but an entry
    /// added, removed or re-added meanwhile may be missed or seen twice.
    pub fn for_each(&self, network: Option<u16>, mut f: impl FnMut(FdbKey, Entry)) {
        for bucket in self.buckets.iter() {
            for i in 0..WAYS {
                let key = FdbKey(bucket.keys[i].load(Acquire));
                if !is_key(key.0) || network.is_some_and(|n| n != key.network()) {
                    continue;
                }
                if let Read::Entry(v) = bucket.read(i, key.0) {
                    if let Some(e) = value::decode(v) {
                        f(key, e);
                    }
                }
            }
        }
    }

    /// Removes learned entries not seen for their network's ageing time
    /// (`ageing_s(network)` seconds before `now_s`), calling `aged` for
    /// each. `ageing_s` runs under the writer lock (it must not call the
    /// table; `aged` may); an ageing time past 2^23 seconds never ages.
    pub fn sweep(
        &self,
        now_s: u32,
        ageing_s: impl Fn(u16) -> u32,
        aged: impl FnMut(FdbKey, Entry),
    ) {
        let now = now_s & SEEN_MASK;
        self.drain(
            |k, e| e.origin == Origin::Learned && age(now, e.seen_s) >= ageing_s(k.network()),
            aged,
        );
    }

    /// Removes every entry of `network` (its config went away).
    pub fn flush(&self, network: u16) -> usize {
        self.drain(|k, _| k.network() == network, |_, _| {})
    }

    /// Removes the entries `pick` chooses, a [`CHUNK`] of buckets per hold
    /// of the lock; `taken` hears of each after the lock is let go (it may
    /// call the table). How many were removed.
    fn drain(
        &self,
        mut pick: impl FnMut(FdbKey, Entry) -> bool,
        mut taken: impl FnMut(FdbKey, Entry),
    ) -> usize {
        let none = (
            FdbKey(0),
            Entry {
                dst: Dst::Local,
                origin: Origin::Static,
                seen_s: 0,
            },
        );
        let mut removed = 0;
        for first in (0..self.buckets.len()).step_by(CHUNK) {
            let mut out = [none; CHUNK * WAYS];
            let mut n = 0;
            {
                let w = self.writer();
                for j in first..(first + CHUNK).min(self.buckets.len()) {
                    for i in 0..WAYS {
                        if let Some(took) = self.take_if(&w, j, i, &mut pick) {
                            out[n] = took;
                            n += 1;
                        }
                    }
                }
            }
            for &(k, e) in &out[..n] {
                taken(k, e);
            }
            removed += n;
        }
        removed
    }

    /// Empties slot `i` of bucket `j` if `pick` chooses its entry.
    fn take_if(
        &self,
        w: &MutexGuard<'_, ()>,
        j: usize,
        i: usize,
        pick: &mut impl FnMut(FdbKey, Entry) -> bool,
    ) -> Option<(FdbKey, Entry)> {
        let bucket = self.buckets.at(j);
        let key = FdbKey(bucket.keys[i].load(Relaxed));
        if !is_key(key.0) {
            return None;
        }
        loop {
            // A learner refreshing the entry between this read and the
            // clear makes the clear fail: it is looked at again.
            let v = bucket.vals[i].load(Acquire);
            if !pick(key, value::decode(v)?) {
                return None;
            }
            if let Some(e) = self.clear(w, j, i, v) {
                return Some((key, e));
            }
        }
    }

    /// The learned entries of `network`.
    pub fn learned(&self, network: u16) -> u32 {
        self.learned
            .get(usize::from(network))
            .map_or(0, |c| c.load(Relaxed))
    }

    /// Bytes the table takes.
    pub fn bytes(&self) -> usize {
        core::mem::size_of_val(&*self.buckets)
            + core::mem::size_of_val(&*self.learned)
            + core::mem::size_of::<Fdb>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::{HashMap, HashSet};

    const SEED: u64 = 0x5eed_f00d_1234_5678;

    fn key(net: u16, n: u64) -> FdbKey {
        let b = n.to_be_bytes();
        FdbKey::new(net, [0x02, b[3], b[4], b[5], b[6], b[7]])
    }

    fn entry(dst: Dst, origin: Origin, seen_s: u32) -> Entry {
        Entry {
            dst,
            origin,
            seen_s,
        }
    }

    fn r(id: u32) -> Dst {
        Dst::Remote(id)
    }

    /// A table past a huge page asks for huge pages over its buckets
    /// before it is written.
    #[test]
    fn the_buckets_ask_for_huge_pages() {
        crate::memory::recorded::install();
        let t = Fdb::new(1 << 20, 1);
        let (at, bytes) = (
            t.buckets.as_ptr() as usize,
            core::mem::size_of_val(&*t.buckets),
        );
        let advised = crate::memory::recorded::advised();
        let inside = |&(a, l): &(usize, usize)| a >= at && a + l <= at + bytes && l >= bytes / 2;
        assert!(
            advised.iter().any(inside),
            "{advised:?} for {at:#x}+{bytes}"
        );
    }

    #[test]
    fn keys_pack_and_unpack() {
        let k = FdbKey::new(7, [1, 2, 3, 4, 5, 6]);
        assert_eq!((k.network(), k.mac()), (7, [1, 2, 3, 4, 5, 6]));
        assert_eq!(FdbKey::new(u16::MAX - 1, [0xff; 6]).network(), u16::MAX - 1);
        // Keys no `new` makes name no network, without a panic.
        assert_eq!(FdbKey(0).network(), u16::MAX);
        assert_eq!(FdbKey(5).network(), u16::MAX);
    }

    #[test]
    fn values_round_trip() {
        for dst in [r(0), r(77), r(u32::MAX), Dst::Local] {
            for origin in [Origin::Static, Origin::Learned, Origin::External] {
                for gen in [0, 1, 31] {
                    let e = entry(dst, origin, SEEN_MASK - 3);
                    let v = value::encode(e, gen);
                    assert_eq!(value::decode(v), Some(e));
                    assert_eq!(value::gen(v), gen);
                    assert_eq!(value::decode(value::empty(value::gen(v))), None);
                }
            }
        }
        assert_eq!(value::next_gen(value::empty(31)), 0);
    }

    #[test]
    fn a_home_found_ahead_finds_what_the_key_finds() {
        // The nodes hash a key when they fetch it and look it up later
        // from that bucket: both ways must agree, past the home bucket too
        // (a small table, its buckets overflowing into the next).
        let t = Fdb::with_seed(64, 1, SEED);
        let keys: Vec<FdbKey> = (0..40).map(|n| key(0, n)).collect();
        for (i, &k) in keys.iter().enumerate() {
            let want = if i % 2 == 0 {
                Learned::Added
            } else {
                Learned::Fresh
            };
            if i % 2 == 1 {
                assert_eq!(t.learn(k, r(1), 10, 100), Learned::Added);
            }
            assert_eq!(t.learn_from(k, t.home_of(k), r(1), 10, 100), want);
        }
        for &k in &keys {
            let found = t.lookup_from(k, t.home_of(k));
            assert_eq!(found, t.lookup(k));
            assert_eq!(found.map(|e| e.dst), Some(r(1)));
        }
        let absent = key(0, 1000);
        assert_eq!(t.lookup_from(absent, t.home_of(absent)), None);
    }

    #[test]
    fn the_inlined_fresh_check_tells_every_place_apart() {
        // Learning's common case compares the value's place bits alone:
        // the local side, VTEP 0 and the largest ids must not meet there.
        let t = Fdb::with_seed(1024, 1, SEED);
        let k = key(0, 1);
        assert_eq!(t.learn(k, r(0), 10, 100), Learned::Added);
        assert_eq!(t.learn(k, r(0), 10, 100), Learned::Fresh);
        assert_eq!(t.learn(k, Dst::Local, 10, 100), Learned::Moved(r(0)));
        assert_eq!(t.learn(k, Dst::Local, 10, 100), Learned::Fresh);
        assert_eq!(t.learn(k, r(0), 10, 100), Learned::Moved(Dst::Local));
        let far = r(u32::MAX - 2);
        assert_eq!(t.learn(k, far, 10, 100), Learned::Moved(r(0)));
        assert_eq!(t.learn(k, far, 10, 100), Learned::Fresh);
        assert_eq!(t.learn(k, r(u32::MAX - 3), 10, 100), Learned::Moved(far));
        assert_eq!(
            t.lookup(k),
            Some(entry(r(u32::MAX - 3), Origin::Learned, 10))
        );
    }

    #[test]
    fn every_learning_outcome() {
        let t = Fdb::with_seed(1024, 2, SEED);
        let k = key(0, 1);
        assert_eq!(t.lookup(k), None);
        assert_eq!(t.learn(k, r(3), 10, 100), Learned::Added);
        assert_eq!(t.lookup(k), Some(entry(r(3), Origin::Learned, 10)));
        assert_eq!(t.learned(0), 1);
        assert_eq!(t.learn(k, r(3), 10, 100), Learned::Fresh);
        // A worker whose clock lags by a second neither writes nor takes
        // the time back.
        assert_eq!(t.learn(k, r(3), 9, 100), Learned::Fresh);
        assert_eq!(t.lookup(k).unwrap().seen_s, 10);
        assert_eq!(t.learn(k, r(3), 12, 100), Learned::Refreshed);
        assert_eq!(t.lookup(k).unwrap().seen_s, 12);
        assert_eq!(t.learn(k, Dst::Local, 13, 100), Learned::Moved(r(3)));
        assert_eq!(t.lookup(k), Some(entry(Dst::Local, Origin::Learned, 13)));
        assert_eq!(t.learn(k, r(4), 13, 100), Learned::Moved(Dst::Local));
        assert_eq!(t.learned(0), 1);

        for origin in [Origin::Static, Origin::External] {
            let s = key(1, 9);
            t.insert(s, entry(r(5), origin, 20)).unwrap();
            assert_eq!(t.learn(s, r(6), 21, 100), Learned::Pinned);
            assert_eq!(t.lookup(s), Some(entry(r(5), origin, 20)));
            assert_eq!(t.learn(s, r(5), 20, 100), Learned::Fresh);
            assert_eq!(t.learn(s, r(5), 22, 100), Learned::Refreshed);
            assert_eq!(t.lookup(s), Some(entry(r(5), origin, 22)));
            assert_eq!(t.learned(1), 0);
        }
        // The static entry stays where it is said to be, seen locally too;
        // the control plane's moves here, learned from now on.
        let s = key(1, 9);
        assert_eq!(t.learn(s, Dst::Local, 23, 100), Learned::Moved(r(5)));
        assert_eq!(t.lookup(s), Some(entry(Dst::Local, Origin::Learned, 23)));
        assert_eq!(t.learned(1), 1);
        t.insert(s, entry(r(5), Origin::Static, 24)).unwrap();
        assert_eq!(t.learn(s, Dst::Local, 25, 100), Learned::Pinned);
        t.insert(s, entry(r(5), Origin::External, 26)).unwrap();
        assert_eq!(t.learned(1), 0);
        assert_eq!(t.learn(s, Dst::Local, 27, 0), Learned::Limit);
        assert_eq!(t.lookup(s), Some(entry(r(5), Origin::External, 26)));
        t.remove(s);

        // The limit counts learned entries of the key's network only.
        assert_eq!(t.learn(key(0, 2), r(1), 30, 2), Learned::Added);
        assert_eq!(t.learn(key(0, 3), r(1), 30, 2), Learned::Limit);
        assert_eq!(t.lookup(key(0, 3)), None);
        assert_eq!(t.learn(key(1, 3), r(1), 30, 2), Learned::Added);
        // An entry there is refreshed and moved at the limit.
        assert_eq!(t.learn(key(0, 2), r(2), 31, 2), Learned::Moved(r(1)));
        assert_eq!(t.learned(0), 2);
        // A network the table was not made for learns nothing.
        assert_eq!(t.learn(key(2, 1), r(1), 30, 100), Learned::Limit);
        assert_eq!(t.learn(FdbKey(0), r(1), 30, 100), Learned::Limit);
        assert_eq!(t.learned(2), 0);
    }

    /// Keys held (not free, not tombstones) in bucket `j`.
    fn held(t: &Fdb, j: usize) -> usize {
        let keys = &t.buckets.at(j).keys;
        keys.iter().filter(|k| is_key(k.load(Relaxed))).count()
    }

    /// `n` keys of `net` whose home is bucket `j`.
    fn homed_at(t: &Fdb, net: u16, j: usize, n: usize) -> Vec<FdbKey> {
        (0..)
            .map(|i| key(net, i))
            .filter(|k| t.home(k.0) == j)
            .take(n)
            .collect()
    }

    /// The module's rule, and tombstones only where it needs them: every
    /// bucket from a key's home to its slot has no free slot, and a bucket
    /// holding a tombstone was gone past by a key that lives further on.
    fn check_rule(t: &Fdb) {
        for j in 0..t.buckets.len() {
            for k in &t.buckets.at(j).keys {
                let k = k.load(Relaxed);
                if !is_key(k) {
                    continue;
                }
                let home = t.home(k);
                let d = t.distance(home, j);
                assert!(d < t.probe, "{k:x} {d} buckets from home");
                for b in (0..d).map(|s| (home + s) & t.mask) {
                    assert!(
                        !t.buckets.at(b).has_free(),
                        "{k:x}: bucket {b} has a free slot"
                    );
                }
            }
            let tomb = t.buckets.at(j).keys.iter().any(|k| k.load(Relaxed) == TOMB);
            assert!(
                !tomb || t.passed(j),
                "bucket {j}: a tombstone nothing needs"
            );
        }
    }

    #[test]
    fn full_when_the_probe_window_is() {
        // The smallest table: two buckets, the window wrapping over both.
        let t = Fdb::with_seed(1, 1, SEED);
        let all = 2 * WAYS as u64;
        assert_eq!((t.slots(), t.probe), (2 * WAYS, 2));
        for n in 0..all {
            assert_eq!(t.learn(key(0, n), r(1), 0, 100), Learned::Added, "{n}");
        }
        assert!((0..2).all(|j| held(&t, j) == WAYS));
        assert_eq!(t.learn(key(0, all), r(1), 0, 100), Learned::Full);
        assert_eq!(
            t.insert(key(0, all), entry(r(1), Origin::Static, 0)),
            Err(())
        );
        assert_eq!(t.learned(0), all as u32);
        // What is there is still refreshed, moved and replaced.
        assert_eq!(t.learn(key(0, 3), r(2), 1, 100), Learned::Moved(r(1)));
        let old = t.insert(key(0, 4), entry(r(9), Origin::Static, 1));
        assert_eq!(old, Ok(Some(entry(r(1), Origin::Learned, 0))));
        assert_eq!(t.learned(0), all as u32 - 1);
        assert!(t.remove(key(0, 5)).is_some());
        assert_eq!(t.learned(0), all as u32 - 2);
        assert_eq!(t.learn(key(0, all), r(1), 2, 100), Learned::Added);
        assert_eq!(t.learn(key(0, all + 1), r(1), 2, 100), Learned::Full);
        check_rule(&t);

        // A larger table: one home's window full (wrapping from the last
        // bucket to the first) refuses that home's keys only.
        let t = Fdb::with_seed(128, 1, SEED);
        let last = t.buckets.len() - 1;
        let keys = homed_at(&t, 0, last, WAYS * PROBE + 1);
        for &k in &keys[..WAYS * PROBE] {
            assert_eq!(t.learn(k, r(1), 0, u32::MAX), Learned::Added);
        }
        assert!((last..last + PROBE).all(|j| held(&t, j & t.mask) == WAYS));
        assert_eq!(
            t.learn(keys[WAYS * PROBE], r(1), 0, u32::MAX),
            Learned::Full
        );
        let fixed = entry(r(1), Origin::Static, 0);
        assert_eq!(t.insert(keys[WAYS * PROBE], fixed), Err(()));
        for &k in &keys[..WAYS * PROBE] {
            assert_eq!(t.lookup(k), Some(entry(r(1), Origin::Learned, 0)));
        }
        // Past the window, a bucket of its own.
        let next = homed_at(&t, 0, PROBE, 1)[0];
        assert_eq!(t.learn(next, r(1), 0, u32::MAX), Learned::Added);
        assert_eq!(t.find(next.0).map(|(j, _, _)| j), Some(PROBE));
        // A miss reads the whole full window, and finds nothing.
        assert_eq!(t.lookup(FdbKey(keys[WAYS * PROBE].0)), None);
        check_rule(&t);
    }

    #[test]
    fn keys_past_a_full_home_are_found_in_the_next_buckets() {
        let t = Fdb::with_seed(128, 1, SEED);
        let last = t.buckets.len() - 1;
        // Six keys of the last bucket: four at home, two wrap to bucket 0.
        let keys = homed_at(&t, 0, last, 7);
        for (n, &k) in keys[..6].iter().enumerate() {
            assert_eq!(t.learn(k, r(n as u32), 0, 100), Learned::Added);
        }
        let at = |k: FdbKey| t.find(k.0).map(|(j, _, _)| j);
        for (n, &k) in keys[..6].iter().enumerate() {
            assert_eq!(at(k), Some(if n < WAYS { last } else { 0 }), "{n}");
            assert_eq!(t.lookup(k), Some(entry(r(n as u32), Origin::Learned, 0)));
            assert_eq!(t.learn(k, r(n as u32), 0, 100), Learned::Fresh);
        }
        // Bucket 0's own keys take what is left of it, then bucket 1.
        let zeros = homed_at(&t, 0, 0, 3);
        for &k in &zeros {
            assert_eq!(t.learn(k, r(9), 0, 100), Learned::Added);
        }
        assert_eq!(
            zeros.iter().map(|&k| at(k)).collect::<Vec<_>>(),
            [Some(0), Some(0), Some(1)]
        );
        // The seventh misses, reading on to the first bucket with room.
        assert_eq!(t.lookup(keys[6]), None);
        assert_eq!(t.learn(keys[6], r(6), 0, 100), Learned::Added);
        assert_eq!(at(keys[6]), Some(1));
        assert!(keys.iter().chain(&zeros).all(|&k| t.lookup(k).is_some()));
        check_rule(&t);
    }

    /// Fills the last bucket and the ones after it (wrapping) with keys of
    /// four networks homed there, so that keys went past full buckets and
    /// buckets are full of keys homed elsewhere; learned at second
    /// `seen(i)` for key `i`.
    fn crowded(seen: impl Fn(usize) -> u32) -> (Fdb, Vec<FdbKey>) {
        let t = Fdb::with_seed(128, 4, SEED);
        let last = t.buckets.len() - 1;
        let mut keys = Vec::new();
        for (j, n) in [(last, 7), (0, 3), (1, 2), (last - 1, 5)] {
            for net in 0..4 {
                keys.extend(homed_at(
                    &t,
                    net,
                    j,
                    n / 4 + usize::from(net < n as u16 % 4),
                ));
            }
        }
        for (i, &k) in keys.iter().enumerate() {
            assert_eq!(t.learn(k, r(i as u32), seen(i), u32::MAX), Learned::Added);
        }
        assert!(t.find(keys[0].0).is_some());
        check_rule(&t);
        (t, keys)
    }

    /// Every key of `keys` is found (with its place) unless in `gone`.
    fn all_found_but(t: &Fdb, keys: &[FdbKey], gone: &HashSet<FdbKey>) {
        for (i, &k) in keys.iter().enumerate() {
            let want = (!gone.contains(&k)).then_some(r(i as u32));
            assert_eq!(t.lookup(k).map(|e| e.dst), want, "{i}");
        }
        check_rule(t);
    }

    #[test]
    fn removal_ageing_and_flush_keep_every_other_key_findable() {
        let mut x = 0x0123_4567_89ab_cdefu64;
        for round in 0..40 {
            // Removed in a random order.
            let (t, keys) = crowded(|_| 0);
            let mut order = keys.clone();
            for i in (1..order.len()).rev() {
                order.swap(i, next(&mut x) as usize % (i + 1));
            }
            let mut gone = HashSet::new();
            for &k in &order {
                assert!(t.remove(k).is_some());
                gone.insert(k);
                all_found_but(&t, &keys, &gone);
            }
            // Nothing left: every tombstone freed.
            assert!(
                (0..t.buckets.len()).all(|j| t
                    .buckets
                    .at(j)
                    .keys
                    .iter()
                    .all(|k| k.load(Relaxed) == 0)),
                "{round}"
            );

            // Aged one by one in a random order: key i seen at rank[i].
            let mut rank: Vec<u32> = (0..keys.len() as u32).collect();
            for i in (1..rank.len()).rev() {
                rank.swap(i, next(&mut x) as usize % (i + 1));
            }
            let (t, keys) = crowded(|i| rank[i]);
            let mut gone = HashSet::new();
            for now in 1..=keys.len() as u32 {
                let mut aged = Vec::new();
                t.sweep(now, |_| 1, |k, _| aged.push(k));
                assert_eq!(aged.len(), 1);
                gone.extend(aged);
                all_found_but(&t, &keys, &gone);
            }

            // Flushed network by network, in a random order.
            let (t, keys) = crowded(|_| 0);
            let mut gone = HashSet::new();
            let mut nets = [0u16, 1, 2, 3];
            for i in (1..4).rev() {
                nets.swap(i, next(&mut x) as usize % (i + 1));
            }
            for net in nets {
                let of_net = keys.iter().filter(|k| k.network() == net).count();
                assert_eq!(t.flush(net), of_net);
                gone.extend(keys.iter().filter(|k| k.network() == net));
                all_found_but(&t, &keys, &gone);
            }
        }
    }

    #[test]
    fn insert_replace_remove_keep_counts() {
        let t = Fdb::with_seed(64, 2, SEED);
        let k = key(1, 42);
        let learned = entry(r(1), Origin::Learned, 5);
        let fixed = entry(r(2), Origin::Static, 6);
        assert_eq!(t.insert(k, learned), Ok(None));
        assert_eq!(t.learned(1), 1);
        assert_eq!(t.insert(k, fixed), Ok(Some(learned)));
        assert_eq!(t.learned(1), 0);
        assert_eq!(t.insert(k, learned), Ok(Some(fixed)));
        assert_eq!(t.insert(k, learned), Ok(Some(learned)));
        assert_eq!(t.learned(1), 1);
        assert_eq!(t.remove(k), Some(learned));
        assert_eq!(t.learned(1), 0);
        assert_eq!(t.remove(k), None);
        assert_eq!(t.lookup(k), None);
        // Remote VTEP u32::MAX and the local side stay apart; seconds
        // past 24 bits are cut.
        let far = entry(r(u32::MAX), Origin::External, SEEN_MASK + 8);
        assert_eq!(t.insert(k, far), Ok(None));
        assert_eq!(t.lookup(k), Some(entry(r(u32::MAX), Origin::External, 7)));
        // Keys of no network the table knows are refused.
        assert_eq!(t.insert(key(2, 1), fixed), Err(()));
        assert_eq!(t.insert(FdbKey(0), fixed), Err(()));
        assert_eq!(t.lookup(FdbKey(0)), None);
        assert_eq!(t.remove(FdbKey(0)), None);
        t.prefetch(FdbKey(0));
        assert_eq!(t.learned(u16::MAX), 0);
    }

    #[test]
    fn sweep_ages_learned_entries_across_the_wrap() {
        let t = Fdb::with_seed(64, 2, SEED);
        let start = SEEN_MASK - 4;
        t.learn(key(0, 1), r(1), start, 100);
        t.learn(key(1, 1), r(1), start, 100);
        t.insert(key(0, 2), entry(r(1), Origin::Static, start))
            .unwrap();
        t.insert(key(0, 3), entry(r(1), Origin::External, start))
            .unwrap();
        let ageing = |n: u16| if n == 0 { 10 } else { 20 };
        let mut aged = Vec::new();
        // 9 seconds on, past the 24-bit wrap: nothing is old enough.
        t.sweep(start.wrapping_add(9), ageing, |k, e| aged.push((k, e)));
        assert!(aged.is_empty());
        // The clock given in full 32 bits is taken modulo 2^24.
        t.sweep(start + 10 + (5 << 24), ageing, |k, e| aged.push((k, e)));
        let want = entry(r(1), Origin::Learned, start);
        assert_eq!(aged, vec![(key(0, 1), want)]);
        assert_eq!((t.learned(0), t.learned(1)), (0, 1));
        assert_eq!(t.lookup(key(0, 1)), None);
        // Static and external entries never age.
        t.sweep(start + 1000, ageing, |k, e| aged.push((k, e)));
        assert_eq!(aged.len(), 2);
        assert_eq!(aged[1].0, key(1, 1));
        assert!(t.lookup(key(0, 2)).is_some() && t.lookup(key(0, 3)).is_some());
        assert_eq!(t.learned(1), 0);
    }

    #[test]
    fn sweep_keeps_what_was_refreshed() {
        let t = Fdb::with_seed(64, 1, SEED);
        t.learn(key(0, 1), r(1), 100, 10);
        t.learn(key(0, 2), r(1), 100, 10);
        t.learn(key(0, 1), r(1), 140, 10);
        let mut aged = Vec::new();
        t.sweep(150, |_| 30, |k, _| aged.push(k));
        assert_eq!(aged, vec![key(0, 2)]);
        assert_eq!(t.learned(0), 1);
        // A sweeper whose clock reads a second behind the learner's does
        // not take the entry for 2^24 - 1 seconds old.
        t.learn(key(0, 1), r(1), 151, 10);
        t.sweep(150, |_| 30, |k, _| aged.push(k));
        assert_eq!(aged.len(), 1);
        assert!(t.lookup(key(0, 1)).is_some());
    }

    #[test]
    fn flush_and_for_each_by_network() {
        let t = Fdb::with_seed(256, 3, SEED);
        for n in 0..10 {
            t.learn(key(0, n), r(1), 0, 100);
            t.learn(key(1, n), r(1), 0, 100);
        }
        t.insert(key(1, 99), entry(Dst::Local, Origin::Static, 0))
            .unwrap();
        t.insert(key(2, 5), entry(Dst::Local, Origin::Static, 0))
            .unwrap();
        let keys = |net| {
            let mut v = Vec::new();
            t.for_each(net, |k, _| v.push(k));
            v.sort();
            v
        };
        assert_eq!(
            keys(Some(0)),
            (0..10).map(|n| key(0, n)).collect::<Vec<_>>()
        );
        assert_eq!(keys(Some(1)).len(), 11);
        assert_eq!(keys(None).len(), 22);
        assert_eq!(t.flush(1), 11);
        assert_eq!(t.learned(1), 0);
        assert!(keys(Some(1)).is_empty());
        assert_eq!(keys(None).len(), 11);
        assert_eq!(t.learned(0), 10);
        assert_eq!(t.flush(1), 0);
        // A callback may call the table: no lock is held around it.
        t.for_each(Some(2), |k, _| assert!(t.remove(k).is_some()));
        assert_eq!(keys(Some(2)), vec![]);
    }

    #[test]
    fn at_most_64_bytes_an_entry() {
        for cap in [1, 3, 1000, (1 << 16) + 1, 1 << 17] {
            let t = Fdb::with_seed(cap, 16, SEED);
            assert!(t.slots() >= 2 * cap);
            let per = t.bytes() as f64 / cap.max(16) as f64;
            assert!(per <= 64.0 + 1024.0 / cap as f64, "{cap}: {per}");
        }
        // A capacity past the bound is cut, not overflowed.
        assert_eq!(slots_for(usize::MAX), MAX_SLOTS);
        assert_eq!(slots_for(0), 2 * WAYS);
    }

    #[test]
    fn fills_to_capacity() {
        // Exactly half the slots used, the most the sizing allows.
        let cap = 1 << 15;
        let t = Fdb::with_seed(cap, 1, SEED);
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut added = 0;
        while added < cap {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            match t.learn(key(0, x), r(1), 0, u32::MAX) {
                Learned::Added => added += 1,
                Learned::Fresh => {}
                other => panic!("{added}: {other:?}"),
            }
        }
        assert_eq!(t.learned(0) as usize, cap);
    }

    #[derive(Clone, Debug)]
    enum Op {
        Learn(FdbKey, Dst, u32, u32),
        Insert(FdbKey, Entry),
        Remove(FdbKey),
        Sweep(u32),
        Flush(u16),
    }

    /// Keys of three networks the table has and one it has not.
    fn any_key() -> impl Strategy<Value = FdbKey> {
        (0u16..4, 0u64..12).prop_map(|(net, n)| key(net, n))
    }

    fn any_dst() -> impl Strategy<Value = Dst> {
        (0u32..4).prop_map(|d| if d == 3 { Dst::Local } else { r(d) })
    }

    fn any_op() -> impl Strategy<Value = Op> {
        let origin = prop_oneof![
            Just(Origin::Static),
            Just(Origin::Learned),
            Just(Origin::External)
        ];
        prop_oneof![
            4 => (any_key(), any_dst(), 0u32..3, 0u32..6)
                .prop_map(|(k, d, dt, limit)| Op::Learn(k, d, dt, limit)),
            2 => (any_key(), any_dst(), origin, 0u32..=SEEN_MASK)
                .prop_map(|(k, d, o, s)| Op::Insert(k, entry(d, o, s))),
            1 => any_key().prop_map(Op::Remove),
            1 => (0u32..6).prop_map(Op::Sweep),
            1 => (0u16..4).prop_map(Op::Flush),
        ]
    }

    /// Seconds since seen, a clock behind the entry's reading none.
    fn model_since(now: u32, seen: u32) -> u32 {
        let since = now.wrapping_sub(seen) & SEEN_MASK;
        if since > SEEN_MASK / 2 {
            0
        } else {
            since
        }
    }

    /// What learning does, said plainly.
    fn model_learn(
        m: &mut HashMap<FdbKey, Entry>,
        k: FdbKey,
        dst: Dst,
        now: u32,
        limit: u32,
        slots: usize,
    ) -> Learned {
        if k.network() >= 3 {
            return Learned::Limit;
        }
        let full = m.len() >= slots;
        let n = m
            .iter()
            .filter(|(mk, me)| mk.network() == k.network() && me.origin == Origin::Learned)
            .count();
        let Some(e) = m.get_mut(&k) else {
            if n as u32 >= limit {
                return Learned::Limit;
            }
            if full {
                return Learned::Full;
            }
            m.insert(k, entry(dst, Origin::Learned, now));
            return Learned::Added;
        };
        let since = model_since(now, e.seen_s);
        if e.dst != dst {
            if e.origin == Origin::External && dst == Dst::Local {
                if n as u32 >= limit {
                    return Learned::Limit;
                }
                let old = e.dst;
                *e = entry(dst, Origin::Learned, now);
                return Learned::Moved(old);
            }
            if e.origin != Origin::Learned {
                return Learned::Pinned;
            }
            let old = e.dst;
            *e = entry(dst, Origin::Learned, now);
            return Learned::Moved(old);
        }
        if since == 0 {
            return Learned::Fresh;
        }
        e.seen_s = now;
        Learned::Refreshed
    }

    /// Runs `ops` on a table for `capacity` entries and on a plain map:
    /// every outcome, every entry, every count agree (the clock starts
    /// just short of the 24-bit wrap), and the module's rule holds after
    /// each operation.
    fn agrees_with_the_model(capacity: usize, ops: Vec<Op>) -> Result<(), TestCaseError> {
        let t = Fdb::with_seed(capacity, 3, SEED);
        // A window over the whole table: full exactly when every slot is
        // taken, which the map can tell.
        let slots = if t.probe == t.buckets.len() {
            t.slots()
        } else {
            usize::MAX
        };
        let mut m: HashMap<FdbKey, Entry> = HashMap::new();
        let mut now = SEEN_MASK - 30;
        for op in ops {
            match op {
                Op::Learn(k, dst, dt, limit) => {
                    now = now.wrapping_add(dt) & SEEN_MASK;
                    let want = model_learn(&mut m, k, dst, now, limit, slots);
                    prop_assert_eq!(t.learn(k, dst, now, limit), want);
                }
                Op::Insert(k, e) => {
                    let fits = m.contains_key(&k) || m.len() < slots;
                    let want = if k.network() < 3 && fits {
                        Ok(m.insert(k, e))
                    } else {
                        Err(())
                    };
                    prop_assert_eq!(t.insert(k, e), want);
                }
                Op::Remove(k) => prop_assert_eq!(t.remove(k), m.remove(&k)),
                Op::Sweep(ageing) => {
                    let ageing_of = |n: u16| ageing + u32::from(n);
                    let mut want: Vec<FdbKey> = m
                        .iter()
                        .filter(|(k, e)| {
                            e.origin == Origin::Learned
                                && model_since(now, e.seen_s) >= ageing_of(k.network())
                        })
                        .map(|(k, _)| *k)
                        .collect();
                    m.retain(|k, _| !want.contains(k));
                    let mut got = Vec::new();
                    t.sweep(now, ageing_of, |k, _| got.push(k));
                    got.sort();
                    want.sort();
                    prop_assert_eq!(got, want);
                }
                Op::Flush(net) => {
                    let before = m.len();
                    m.retain(|k, _| k.network() != net);
                    prop_assert_eq!(t.flush(net), before - m.len());
                }
            }
            check_rule(&t);
            for net in 0..4u16 {
                let learned = m
                    .iter()
                    .filter(|(k, e)| k.network() == net && e.origin == Origin::Learned)
                    .count();
                prop_assert_eq!(t.learned(net) as usize, learned);
            }
        }
        for net in 0..4u16 {
            for n in 0..12 {
                let k = key(net, n);
                prop_assert_eq!(t.lookup(k), m.get(&k).copied());
            }
        }
        let mut all = Vec::new();
        t.for_each(None, |k, e| all.push((k, e)));
        all.sort_by_key(|(k, _)| *k);
        let mut want: Vec<_> = m.into_iter().collect();
        want.sort_by_key(|(k, _)| *k);
        prop_assert_eq!(all, want);
        Ok(())
    }

    proptest! {
        /// A table larger than every key.
        #[test]
        fn agrees_with_a_map(ops in proptest::collection::vec(any_op(), 0..300)) {
            agrees_with_the_model(512, ops)?;
        }

        /// Four buckets for 36 keys: keys past their home, wrapping,
        /// tombstones and a full table all the time.
        #[test]
        fn agrees_with_a_map_when_crowded(ops in proptest::collection::vec(any_op(), 0..300)) {
            agrees_with_the_model(8, ops)?;
        }
    }

    /// A xorshift step: the tests' cheap, repeatable randomness.
    fn next(x: &mut u64) -> u64 {
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        *x
    }

    const KEYS: u64 = 256;

    /// Every dst written for key `i` names it in its high 16 bits, so that
    /// a value read under another key's name shows.
    fn tagged(i: u64, x: u64) -> Dst {
        r((i as u32) << 16 | (x as u32 & 0xffff))
    }

    fn check(i: u64, e: Entry) {
        assert_eq!(e.dst, tagged(i, e.dst_id() & 0xffff), "key {i}: {e:?}");
    }

    impl Entry {
        fn dst_id(self) -> u64 {
            match self.dst {
                Dst::Remote(id) => u64::from(id),
                Dst::Local => u64::MAX,
            }
        }
    }

    fn key_of(i: u64) -> FdbKey {
        key((i % 2) as u16, i)
    }

    fn index(k: FdbKey) -> u64 {
        k.0 & 0xff_ffff_ffff
    }

    /// A learner: looks up and learns random keys (at most 60 learned
    /// per network); how many it added.
    fn learner(
        t: &Fdb,
        clock: &AtomicU32,
        controlling: &std::sync::atomic::AtomicBool,
        mut x: u64,
    ) -> u32 {
        let mut added = 0;
        let start = std::time::Instant::now();
        let mut n = 0;
        // 20,000 learns and on while the control plane runs, so that the
        // two overlap however the threads are scheduled.
        while n < 20_000 || (controlling.load(Relaxed) && start.elapsed().as_secs() < 10) {
            n += 1;
            let i = next(&mut x) % KEYS;
            let k = key_of(i);
            t.prefetch(k);
            if let Some(e) = t.lookup(k) {
                check(i, e);
            }
            let now = clock.load(Relaxed);
            match t.learn(k, tagged(i, next(&mut x) % 4), now, 60) {
                Learned::Moved(old) => check(i, entry(old, Origin::Learned, 0)),
                Learned::Added => added += 1,
                _ => {}
            }
        }
        added
    }

    /// The control plane: inserts of every origin, removes, sweeps,
    /// flushes, and the clock's ticks.
    fn control(t: &Fdb, clock: &AtomicU32) {
        let mut x = 77;
        for n in 0..20_000u32 {
            let i = next(&mut x) % KEYS;
            let k = key_of(i);
            let now = clock.load(Relaxed);
            match next(&mut x) % 8 {
                0 | 1 => {
                    let origin = [Origin::Static, Origin::Learned, Origin::External]
                        [(next(&mut x) % 3) as usize];
                    if let Ok(Some(old)) = t.insert(k, entry(tagged(i, 9), origin, now)) {
                        check(i, old);
                    }
                }
                2..=4 => {
                    if let Some(old) = t.remove(k) {
                        check(i, old);
                    }
                }
                5 => t.sweep(now, |_| 2, |k, e| check(index(k), e)),
                _ => clock.store((now + 1) & SEEN_MASK, Relaxed),
            }
            if n % 5000 == 4999 {
                t.flush((n / 5000 % 2) as u16);
            }
        }
    }

    /// Static entries of a third network no thread touches, in the same
    /// buckets as the churn: a lookup must find each at every try, however
    /// slots around it change hands.
    const PINNED: u64 = 16;

    fn pinned(p: u64) -> FdbKey {
        key(2, KEYS + p)
    }

    /// A reader of every key and of the whole table until `stop` (or ten
    /// seconds, so that a panic elsewhere ends the test); entries read.
    fn reader(t: &Fdb, stop: &std::sync::atomic::AtomicBool) -> u64 {
        let mut reads = 0;
        let start = std::time::Instant::now();
        // At least one pass, however late the thread is scheduled.
        loop {
            for i in 0..KEYS {
                if let Some(e) = t.lookup(key_of(i)) {
                    check(i, e);
                    reads += 1;
                }
            }
            for p in 0..PINNED {
                let e = t.lookup(pinned(p));
                assert_eq!(e.map(|e| e.dst), Some(tagged(KEYS + p, 9)), "pinned {p}");
            }
            t.for_each(None, |k, e| check(index(k), e));
            if stop.load(Relaxed) || start.elapsed().as_secs() >= 10 {
                break;
            }
        }
        reads
    }

    /// Learners on three threads, one reader and the control plane at
    /// once, on tables too small for every key (slots change hands all
    /// the time, keys go past full buckets, the smaller table's window is
    /// all of it): no read returns another key's value, no present key is
    /// missed, no key is in two slots, the counts match what is there.
    #[test]
    fn concurrent_learners_and_control_plane() {
        for capacity in [96, 24] {
            concurrently(capacity);
        }
    }

    fn concurrently(capacity: usize) {
        let t = Fdb::with_seed(capacity, 3, SEED);
        for p in 0..PINNED {
            let fixed = entry(tagged(KEYS + p, 9), Origin::Static, 0);
            assert_eq!(t.insert(pinned(p), fixed), Ok(None));
        }
        let clock = AtomicU32::new(SEEN_MASK - 50);
        let stop = std::sync::atomic::AtomicBool::new(false);
        let controlling = std::sync::atomic::AtomicBool::new(true);
        // All start at once (the reader first to be spawned) and the
        // reader stops after the others: they all overlap.
        let go = std::sync::Barrier::new(5);
        let (added, reads) = std::thread::scope(|s| {
            let (t, clock, stop, go) = (&t, &clock, &stop, &go);
            let r = s.spawn(move || {
                go.wait();
                reader(t, stop)
            });
            let controlling = &controlling;
            let learners: Vec<_> = (1..=3u64)
                .map(|n| {
                    s.spawn(move || {
                        go.wait();
                        learner(t, clock, controlling, n * 0x1234_5678_9abc)
                    })
                })
                .collect();
            go.wait();
            control(t, clock);
            controlling.store(false, Relaxed);
            let added: u32 = learners.into_iter().map(|h| h.join().unwrap()).sum();
            stop.store(true, Relaxed);
            (added, r.join().unwrap())
        });
        // More added than fit at once: slots were emptied and retaken
        // (the learners ran until the control plane was done). The
        // reader's count is told, not asserted: a late-scheduled reader
        // may make its one pass when few keys are left.
        assert!(
            added as usize > capacity,
            "{capacity}: {added} added, {reads} reads"
        );
        let mut seen = HashSet::new();
        let mut learned = [0u32; 3];
        t.for_each(None, |k, e| {
            assert!(seen.insert(k), "{k:?} twice");
            check(index(k), e);
            if e.origin == Origin::Learned {
                learned[usize::from(k.network())] += 1;
            }
        });
        assert_eq!(learned, [t.learned(0), t.learned(1), 0]);
        for k in (0..KEYS).map(key_of).chain((0..PINNED).map(pinned)) {
            assert_eq!(t.lookup(k).is_some(), seen.contains(&k));
        }
        check_rule(&t);
    }

    /// Nanoseconds a key, the best of three passes over `keys` in bursts
    /// of eight: `fetch` over the burst, then `op` over it (`ahead`: the
    /// fetches run eight keys ahead of the ops instead, as the pipeline's
    /// nodes run them). How many ops said yes.
    fn ns_per_key(
        t: &Fdb,
        keys: &[FdbKey],
        ahead: bool,
        fetch: impl Fn(&Fdb, FdbKey),
        op: impl Fn(&Fdb, FdbKey) -> bool,
    ) -> (f64, usize) {
        let mut best = f64::MAX;
        let mut yes = 0;
        for _ in 0..3 {
            let start = std::time::Instant::now();
            yes = 0;
            for burst in keys.chunks(crate::vector::VECTOR_SIZE) {
                if ahead {
                    crate::session::flat::staggered(
                        burst.len(),
                        |i| fetch(t, burst[i]),
                        |i| yes += usize::from(op(t, burst[i])),
                    );
                    continue;
                }
                for burst in burst.chunks(8) {
                    burst.iter().for_each(|&k| fetch(t, k));
                    for &k in burst {
                        yes += usize::from(op(t, k));
                    }
                }
            }
            best = best.min(start.elapsed().as_nanos() as f64 / keys.len() as f64);
        }
        (best, yes)
    }

    /// `cargo test --release -p tep-dataplane --lib overlay::fdb --
    /// --ignored --nocapture`: lookups in a table of a million entries.
    #[test]
    #[ignore]
    fn measure_lookups() {
        const N: usize = 1 << 20;
        let t = Fdb::with_seed(N, 1, SEED);
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut keys = Vec::with_capacity(N);
        let mut full = 0;
        while keys.len() < N {
            let k = key(0, next(&mut x));
            match t.learn(k, r(k.0 as u32), 0, u32::MAX) {
                Learned::Added => keys.push(k),
                Learned::Full => full += 1,
                _ => {}
            }
        }
        let most = (0..t.buckets.len()).map(|j| held(&t, j)).max().unwrap_or(0);
        // Looked up in another order than added.
        for i in (1..keys.len()).rev() {
            keys.swap(i, next(&mut x) as usize % (i + 1));
        }
        let absent: Vec<_> = (0..N)
            .map(|_| FdbKey(key(0, next(&mut x)).0 ^ 4 << 40))
            .collect();
        let none = |_: &Fdb, _: FdbKey| {};
        let pre = |t: &Fdb, k: FdbKey| t.prefetch(k);
        let hit = |t: &Fdb, k: FdbKey| std::hint::black_box(t.lookup(k)).is_some();
        let fresh = |t: &Fdb, k: FdbKey| t.learn(k, r(k.0 as u32), 0, u32::MAX) == Learned::Fresh;
        let (plain, n1) = ns_per_key(&t, &keys, false, none, hit);
        let (burst, n2) = ns_per_key(&t, &keys, false, pre, hit);
        let (ahead, n3) = ns_per_key(&t, &keys, true, pre, hit);
        let (miss_plain, m1) = ns_per_key(&t, &absent, false, none, hit);
        let (miss, m2) = ns_per_key(&t, &absent, true, pre, hit);
        let (learn_plain, l1) = ns_per_key(&t, &keys, false, none, fresh);
        let (learn, l2) = ns_per_key(&t, &keys, true, pre, fresh);
        assert_eq!([n1, n2, n3, l1, l2, m1 + m2], [N, N, N, N, N, 0]);
        // Past the capacity asked for: how far until a key finds its whole
        // probe window full.
        let mut over = 0;
        while t.learn(key(0, next(&mut x)), r(0), 0, u32::MAX) != Learned::Full {
            over += 1;
        }
        println!(
            "fdb: first Full at {:.0}% of the slots ({over} entries past the capacity)",
            100.0 * (N + over) as f64 / t.slots() as f64
        );
        println!(
            "fdb: {N} entries, {} slots, {} B ({:.1} B/entry), fullest bucket {most}/{WAYS}, \
             {full} refused Full while filling",
            t.slots(),
            t.bytes(),
            t.bytes() as f64 / N as f64
        );
        println!(
            "fdb ns/key: lookup {plain:.1} plain, {burst:.1} bursts of 8 prefetched, \
             {ahead:.1} prefetched 8 ahead; miss {miss_plain:.1} plain, {miss:.1} ahead; \
             learn (refresh, no write) {learn_plain:.1} plain, {learn:.1} ahead"
        );
    }
}
