//! Usage per rule: the packets and bytes each rule of a session with
//! several rules a direction ([`super::rules`]) took, so that a URR on
//! some of a session's PDRs counts only theirs (TS 29.244 §5.2.2: a URR
//! shared by several PDRs counts them all).
//!
//! A rule's counter is an index ([`super::rules::Treatment`]'s `counter`)
//! into an array each worker has of its own ([`RuleUsage`], in its
//! [`super::WorkerLink`]): the packet reaches it from the treatment it
//! already read, the worker writes only its own array (a relaxed load and
//! store, no read-modify-write, no line shared with another worker), and
//! the control plane sums the workers' arrays, as it does the slots'
//! counters ([`super::SlotUsage`]). Only rules tagged `counted`
//! ([`super::control::RuleTag`]) have one: where every PDR of a direction
//! is under the same URRs, or the direction has one treatment, the slot's
//! counters are exactly what each URR counts, and the rules' packets pay
//! nothing (measured, `tep-bench pipeline --sessions 1000 --filters 4`:
//! a counter on every rule cost 15 to 35 ns a packet, one more line
//! written; none, no difference from before counters existed).
//!
//! The control plane allocates the indexes ([`CounterIds`]); one stopped
//! being used is reused only once every worker applied the change that
//! stopped it, and is zeroed then, so that no worker writes a counter
//! while it is handed to another rule.

use core::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// No counter (a rule the control plane gave none: not counted).
pub const NO_COUNTER: u32 = u32::MAX;

/// Counters per chunk, allocated as they are first used.
pub const COUNTER_CHUNK: usize = 4096;

/// One rule's usage one way (a rule takes one direction's packets).
#[derive(Debug, Default)]
pub struct RuleCounter {
    /// Packets taken.
    pub packets: AtomicU64,
    /// Bytes of the inner packets.
    pub bytes: AtomicU64,
}

/// One worker's rule counters, by index, in chunks allocated on first use
/// (by the control plane, before it publishes a rule that names one).
#[derive(Debug)]
pub struct RuleUsage {
    chunks: Box<[OnceLock<Box<[RuleCounter]>>]>,
}

impl RuleUsage {
    /// Room for `max` counters.
    pub fn new(max: u32) -> RuleUsage {
        let n = (max as usize).div_ceil(COUNTER_CHUNK);
        RuleUsage {
            chunks: (0..n).map(|_| OnceLock::new()).collect(),
        }
    }

    /// Counter `i`; None beyond the array or in a chunk not allocated.
    #[inline]
    pub fn get(&self, i: u32) -> Option<&RuleCounter> {
        let i = i as usize;
        self.chunks
            .get(i / COUNTER_CHUNK)?
            .get()
            .map(|c| &c[i % COUNTER_CHUNK])
    }

    /// Counts a packet of `bytes` in counter `i` (none for [`NO_COUNTER`]).
    /// Its worker's only: a load and a store.
    #[inline]
    pub fn count(&self, i: u32, bytes: usize) {
        if let Some(c) = self.get(i) {
            c.packets
                .store(c.packets.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
            c.bytes.store(
                c.bytes.load(Ordering::Relaxed) + bytes as u64,
                Ordering::Relaxed,
            );
        }
    }

    /// Makes sure counter `i`'s chunk exists and zeroes it (control plane,
    /// while no worker writes it).
    pub(crate) fn reset(&self, i: u32) {
        if let Some(c) = self.chunks.get(i as usize / COUNTER_CHUNK) {
            c.get_or_init(|| (0..COUNTER_CHUNK).map(|_| RuleCounter::default()).collect());
        }
        if let Some(c) = self.get(i) {
            c.packets.store(0, Ordering::Relaxed);
            c.bytes.store(0, Ordering::Relaxed);
        }
    }

    /// Counter `i`: (packets, bytes).
    pub fn read(&self, i: u32) -> (u64, u64) {
        self.get(i).map_or((0, 0), |c| {
            (
                c.packets.load(Ordering::Relaxed),
                c.bytes.load(Ordering::Relaxed),
            )
        })
    }

    /// Bytes allocated.
    pub fn bytes(&self) -> usize {
        let used = self.chunks.iter().filter(|c| c.get().is_some()).count();
        used * COUNTER_CHUNK * core::mem::size_of::<RuleCounter>()
            + self.chunks.len() * core::mem::size_of::<OnceLock<Box<[RuleCounter]>>>()
    }
}

/// The control plane's counter indexes: taken by the rules published,
/// quarantined when a change stops their use, free once every worker
/// applied it.
#[derive(Debug, Default)]
pub(crate) struct CounterIds {
    max: u32,
    next: u32,
    free: Vec<u32>,
    // (index, the change count after the change that stopped its use).
    quarantine: Vec<(u32, u64)>,
}

impl CounterIds {
    /// Up to `max` indexes.
    pub(crate) fn new(max: u32) -> CounterIds {
        CounterIds {
            max,
            ..Default::default()
        }
    }

    /// Frees the quarantined indexes every worker is past (`applied`
    /// changes applied by the slowest); whether `n` can be taken then.
    pub(crate) fn room(&mut self, n: usize, applied: u64) -> bool {
        let mut i = 0;
        while i < self.quarantine.len() {
            if self.quarantine[i].1 <= applied {
                let (c, _) = self.quarantine.swap_remove(i);
                self.free.push(c);
            } else {
                i += 1;
            }
        }
        self.free.len() + (self.max - self.next) as usize >= n
    }

    /// An index ([`NO_COUNTER`] when none is left: call
    /// [`room`](CounterIds::room) first).
    pub(crate) fn take(&mut self) -> u32 {
        if let Some(c) = self.free.pop() {
            return c;
        }
        if self.next < self.max {
            self.next += 1;
            return self.next - 1;
        }
        NO_COUNTER
    }

    /// Index `c` is out of use once the workers applied `after` changes.
    pub(crate) fn release(&mut self, c: u32, after: u64) {
        if c != NO_COUNTER {
            self.quarantine.push((c, after));
        }
    }
}
