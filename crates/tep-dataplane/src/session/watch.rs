//! Volume thresholds and quotas checked where the workers count
//! (TS 29.244 §5.2.2.2): a session whose URRs have a volume threshold or
//! quota has a line of words, "bytes left before the nearest threshold"
//! and "bytes left of the nearest quota", in total and each way, that
//! every worker charges its packets to with one `fetch_sub` per armed
//! word. The words are shared, not split per worker, so that the sum is
//! exact whichever worker counts: the packet that takes a word to zero or
//! below is the crossing, seen by exactly one `fetch_sub`, which queues
//! the slot; the worker wakes the control plane once
//! ([`Watches::set_notify`]) at the end of its vector, its packets
//! counted: woken at once, the control plane could preempt the worker and
//! read the counts before the crossing packet is in them (a quota's
//! report one packet short, seen on a loaded machine).
//!
//! A quota passes a packet only if all of it fits in what is left: the
//! packet that would go beyond is the first dropped (`quota_exhausted`),
//! so that what passes never exceeds the quota (TS 29.244 §5.2.2.2.1:
//! traffic stops once the quota is used up; passing part of a packet is
//! not possible, passing the whole would exceed it). Sessions without a
//! volume trigger have no line and pay nothing: the slot's `WATCH` flag
//! is off and no word is read.
//!
//! The control plane (re)arms a line whenever it (re)sets a URR
//! (creation, a report, a new quota, a modification, a crossing), with
//! what is left at that moment. Its reading of the counters and the
//! line's words go together ([`Watches::arm_with`], [`Watches::settled`]):
//! it reads the words, the counters, the words again, and reads anew
//! until no packet was charged in between, so that a thread preempted
//! mid-reading (a loaded machine: milliseconds, hundreds of packets)
//! still reads the counters and the crossing at one moment. A word
//! already armed is then moved by what is left less what it held at that
//! moment (`fetch_add`), not stored, so that packets charged after the
//! reading stay charged. Scans that change nothing leave the line alone.
//!
//! A URR on only some of a direction's PDRs (whose rules count apart,
//! [`super::counters`]) has a line of its own instead ([`UrrWatches`]):
//! the same words, in a second table indexed by line rather than by
//! slot, charged by every rule the URR is on. A rule finds its lines
//! (at most [`RULE_LINES`]) by its usage counter's index, and only if its
//! treatment is flagged `watched`: rules without such a URR read nothing
//! more. A rule under more URRs with volume limits than that charges
//! none of them (the control plane leaves those URRs to its scans).
//! A packet is charged to the session's line, then to its rule's lines,
//! after every rate: one that a later line's quota drops stays charged
//! to the lines before (at most one packet, at the moment a quota runs
//! out, which stops that URR's PDRs).

use core::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

/// Slots per chunk of lines: allocated when a slot in it is first armed.
pub const WATCH_CHUNK: usize = 1024;

/// Most slots queued as crossed before the control plane drains them
/// (each slot crosses at most twice per arming, so this is only reached
/// with that many watched sessions crossing between two drains; beyond,
/// the scan finds them).
pub const MAX_CROSSED: usize = 65_536;

// Word indexes: threshold total, uplink, downlink; quota likewise.
const THRESHOLD: usize = 0;
const QUOTA: usize = 3;
const TOTAL: usize = 0;
const UP: usize = 1;
const DOWN: usize = 2;

/// What is left before a session's nearest volume limits, in bytes
/// (None: no such limit), as the control plane arms them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VolumeLimits {
    /// Before the nearest threshold: total, uplink, downlink.
    pub threshold: [Option<u64>; 3],
    /// Of the nearest quota: total, uplink, downlink.
    pub quota: [Option<u64>; 3],
}

impl VolumeLimits {
    /// Whether no limit is armed.
    pub fn is_empty(&self) -> bool {
        self.threshold
            .iter()
            .chain(&self.quota)
            .all(Option::is_none)
    }
}

/// A packet's verdict under its session's volume limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Charged {
    /// Within every limit.
    Pass,
    /// Beyond a quota: drop it.
    QuotaExhausted,
}

/// One session's words, one cache line.
#[derive(Debug, Default)]
#[repr(C, align(64))]
pub struct Line {
    // Which words are armed: bit i for word i.
    armed: AtomicU32,
    words: [AtomicI64; 6],
    // The threshold words just after the packet that crossed: what the
    // session sent past it each way since, for the report to leave to
    // the next measurement.
    snap: [AtomicI64; 3],
}

const _: () = assert!(core::mem::size_of::<Line>() == 128);

/// A threshold word armed for no threshold: charged (so that the bytes
/// after a crossing are known each way), never crossing.
const UNLIMITED: i64 = i64::MAX >> 1;
/// A snapshot not taken since the line was armed.
const NOT_CROSSED: i64 = i64::MIN;

/// Readings of the counters tried before one that no packet charged to
/// the line overlaps is given up on (the last one is taken: a packet
/// charged meanwhile is then the crossing's rather than the next
/// measurement's).
const SETTLE_TRIES: usize = 64;

/// A line's words as the control plane read them at one moment.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
struct State {
    armed: u32,
    words: [i64; 6],
    snap: [i64; 3],
}

impl State {
    /// The bytes charged each way (uplink, downlink) after the packet
    /// that last crossed a threshold.
    fn since_crossing(&self) -> (u64, u64) {
        let after = |w: usize| {
            if self.armed & (1 << w) == 0 || self.snap[w] == NOT_CROSSED {
                return 0;
            }
            u64::try_from(self.snap[w].saturating_sub(self.words[w])).unwrap_or(0)
        };
        (after(UP), after(DOWN))
    }
}

impl Line {
    fn state(&self) -> State {
        // Not reordered with the control plane's reading of the counters
        // between two of these; the workers charge with a
        // read-modify-write before they count.
        core::sync::atomic::fence(Ordering::SeqCst);
        let s = State {
            armed: self.armed.load(Ordering::Acquire),
            words: core::array::from_fn(|i| self.words[i].load(Ordering::Relaxed)),
            snap: core::array::from_fn(|i| self.snap[i].load(Ordering::Relaxed)),
        };
        core::sync::atomic::fence(Ordering::SeqCst);
        s
    }

    /// Calls `read` until no packet was charged to the line while it ran
    /// (at most [`SETTLE_TRIES`] times): what it returned, and the line
    /// as it was then.
    fn settled<R>(&self, mut read: impl FnMut() -> R) -> (R, State) {
        let mut tries = 0;
        loop {
            let before = self.state();
            let r = read();
            tries += 1;
            if self.state() == before || tries == SETTLE_TRIES {
                return (r, before);
            }
        }
    }

    /// Arms the line with `l`, what was left when it was as `at`: a word
    /// armed then too is moved by the difference, so that what was
    /// charged since stays charged; a word armed anew is set.
    fn arm(&self, l: &VolumeLimits, at: &State) {
        let mut armed = 0;
        let any_threshold = l.threshold.iter().any(Option::is_some);
        for (i, v) in l.threshold.iter().chain(&l.quota).enumerate() {
            let v = match v {
                Some(v) => i64::try_from(*v).unwrap_or(UNLIMITED).min(UNLIMITED),
                None if i < QUOTA && any_threshold => UNLIMITED,
                None => continue,
            };
            match at.armed & (1 << i) != 0 {
                true => {
                    let d = v.saturating_sub(at.words[i]);
                    self.words[i].fetch_add(d, Ordering::Relaxed);
                }
                false => self.words[i].store(v, Ordering::Relaxed),
            }
            if i < QUOTA {
                self.snap[i].store(NOT_CROSSED, Ordering::Relaxed);
            }
            armed |= 1 << i;
        }
        self.armed.store(armed, Ordering::Release);
    }

    /// Charges a packet of `bytes` one way; `crossed`: whether this
    /// packet took a word from above zero to zero or below.
    #[inline]
    fn charge(&self, uplink: bool, bytes: u64, crossed: &mut bool) -> Charged {
        let armed = self.armed.load(Ordering::Acquire);
        let dir = if uplink { UP } else { DOWN };
        let b = i64::try_from(bytes).unwrap_or(i64::MAX);
        for w in [QUOTA + TOTAL, QUOTA + dir] {
            if armed & (1 << w) != 0 {
                let prev = self.words[w].fetch_sub(b, Ordering::Relaxed);
                let now = prev.saturating_sub(b);
                *crossed |= prev > 0 && now <= 0;
                if now < 0 {
                    return Charged::QuotaExhausted;
                }
            }
        }
        let mut threshold = false;
        for w in [THRESHOLD + TOTAL, THRESHOLD + dir] {
            if armed & (1 << w) != 0 {
                let prev = self.words[w].fetch_sub(b, Ordering::Relaxed);
                threshold |= prev > 0 && prev.saturating_sub(b) <= 0;
            }
        }
        if threshold {
            self.snapshot();
            *crossed = true;
        }
        Charged::Pass
    }

    #[cold]
    fn snapshot(&self) {
        for (s, w) in self.snap.iter().zip(&self.words) {
            s.store(w.load(Ordering::Relaxed), Ordering::Relaxed);
        }
    }

    /// Whether an armed quota word is used up (at or below zero).
    fn quota_spent(&self) -> bool {
        let armed = self.armed.load(Ordering::Acquire);
        (QUOTA..QUOTA + 3)
            .any(|w| armed & (1 << w) != 0 && self.words[w].load(Ordering::Relaxed) <= 0)
    }
}

/// Every session's lines, shared by the workers and the control plane,
/// and the slots whose words crossed zero since the control plane last
/// looked.
#[derive(Default)]
pub struct Watches {
    chunks: Box<[OnceLock<Box<[Line]>>]>,
    crossed: Mutex<Vec<u32>>,
    notify: OnceLock<Box<dyn Fn() + Send + Sync>>,
}

impl core::fmt::Debug for Watches {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Watches")
            .field("bytes", &self.bytes())
            .finish_non_exhaustive()
    }
}

impl Watches {
    /// Room for `max_sessions` slots (no line allocated yet).
    pub fn new(max_sessions: u32) -> Watches {
        let n = (max_sessions as usize).div_ceil(WATCH_CHUNK);
        Watches {
            chunks: (0..n).map(|_| OnceLock::new()).collect(),
            crossed: Mutex::new(Vec::new()),
            notify: OnceLock::new(),
        }
    }

    /// What wakes the control plane when a word crosses zero (set once;
    /// the N4 thread's event fd).
    pub fn set_notify(&self, f: Box<dyn Fn() + Send + Sync>) {
        let _ = self.notify.set(f);
    }

    fn line(&self, slot: u32) -> Option<&Line> {
        let s = slot as usize;
        self.chunks
            .get(s / WATCH_CHUNK)?
            .get()
            .map(|c| &c[s % WATCH_CHUNK])
    }

    /// Arms slot `slot`'s line with `limits` (control plane); empty
    /// limits disarm it. Returns whether the slot is armed.
    pub fn arm(&self, slot: u32, limits: &VolumeLimits) -> bool {
        self.arm_with(slot, || *limits)
    }

    /// Arms slot `slot`'s line with what `limits` computes from the
    /// counters, read together with the line ([`Line::settled`]): what
    /// is charged after that reading counts against them. Empty limits
    /// disarm it. Returns whether the slot is armed.
    pub fn arm_with(&self, slot: u32, mut limits: impl FnMut() -> VolumeLimits) -> bool {
        let (limits, at) = match self.line(slot) {
            Some(l) => l.settled(&mut limits),
            None => (limits(), State::default()),
        };
        if limits.is_empty() {
            if let Some(l) = self.line(slot) {
                l.armed.store(0, Ordering::Release);
            }
            return false;
        }
        let Some(c) = self.chunks.get(slot as usize / WATCH_CHUNK) else {
            return false;
        };
        let c = c.get_or_init(|| (0..WATCH_CHUNK).map(|_| Line::default()).collect());
        c[slot as usize % WATCH_CHUNK].arm(&limits, &at);
        true
    }

    /// Charges a packet of `bytes` of slot `slot` one way (worker, for
    /// slots flagged watched only); a crossing queues the slot and wakes
    /// the control plane.
    #[inline]
    pub fn charge(&self, slot: u32, uplink: bool, bytes: usize) -> Charged {
        let mut crossed = false;
        let c = self.charge_quietly(slot, uplink, bytes, &mut crossed);
        if crossed {
            self.wake();
        }
        c
    }

    /// As [`Watches::charge`], but a crossing only queues the slot and
    /// sets `crossed`: the worker wakes the control plane
    /// ([`Watches::wake`]) once it has counted the packet, so that the
    /// control plane never reads the counts without it.
    #[inline]
    pub fn charge_quietly(
        &self,
        slot: u32,
        uplink: bool,
        bytes: usize,
        crossed: &mut bool,
    ) -> Charged {
        let Some(l) = self.line(slot) else {
            return Charged::Pass;
        };
        let mut now = false;
        let c = l.charge(uplink, bytes as u64, &mut now);
        if now {
            self.cross(slot);
            *crossed = true;
        }
        c
    }

    #[cold]
    fn cross(&self, slot: u32) {
        let mut q = self.crossed.lock().unwrap_or_else(|e| e.into_inner());
        if q.len() < MAX_CROSSED {
            q.push(slot);
        }
    }

    /// Wakes the control plane to look at the crossings queued (a
    /// syscall: once per crossing, never per packet).
    #[cold]
    pub fn wake(&self) {
        if let Some(n) = self.notify.get() {
            n();
        }
    }

    /// Moves the slots that crossed since the last call into `out`
    /// (control plane).
    pub fn take_crossed(&self, out: &mut Vec<u32>) {
        out.append(&mut self.crossed.lock().unwrap_or_else(|e| e.into_inner()));
    }

    /// The bytes slot `slot`'s session sent each way (uplink, downlink)
    /// after the packet that last crossed a threshold: the report of
    /// that crossing leaves them to the next measurement.
    pub fn since_crossing(&self, slot: u32) -> (u64, u64) {
        self.line(slot)
            .map_or((0, 0), |l| l.state().since_crossing())
    }

    /// What `read` (the control plane's reading of the counters)
    /// returns, and [`Watches::since_crossing`] at the same moment: read
    /// again until no packet was charged to slot `slot`'s line meanwhile.
    pub fn settled<R>(&self, slot: u32, mut read: impl FnMut() -> R) -> (R, (u64, u64)) {
        let Some(l) = self.line(slot) else {
            return (read(), (0, 0));
        };
        let (r, at) = l.settled(&mut read);
        (r, at.since_crossing())
    }

    /// Whether slot `slot`'s armed quota is used up.
    pub fn quota_spent(&self, slot: u32) -> bool {
        self.line(slot).is_some_and(Line::quota_spent)
    }

    /// Bytes allocated for lines.
    pub fn bytes(&self) -> usize {
        let used = self.chunks.iter().filter(|c| c.get().is_some()).count();
        used * WATCH_CHUNK * core::mem::size_of::<Line>()
            + self.chunks.len() * core::mem::size_of::<OnceLock<Box<[Line]>>>()
    }
}

/// No line: a rule's unused place, or a URR none was left for.
pub const NO_LINE: u32 = u32::MAX;

/// Most lines one rule charges.
pub const RULE_LINES: usize = 2;

/// Entries per chunk of [`UrrWatches`]' rule table.
const RULE_CHUNK: usize = 4096;

/// The lines of URRs on only some PDRs, and which lines each rule
/// charges, shared by the workers and the control plane.
pub struct UrrWatches {
    /// The lines, by line id: queued when crossed, as slots' are.
    pub lines: Watches,
    // By a rule's usage counter index: its lines, two `u32`s in one word
    // (so that a worker never reads half of a change).
    rules: Box<[OnceLock<Box<[AtomicU64]>>]>,
}

impl core::fmt::Debug for UrrWatches {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("UrrWatches")
            .field("bytes", &self.bytes())
            .finish_non_exhaustive()
    }
}

const NO_LINES: u64 = u64::MAX;

impl UrrWatches {
    /// Room for `lines` lines and `counters` rules (nothing allocated yet).
    pub fn new(lines: u32, counters: u32) -> UrrWatches {
        let n = (counters as usize).div_ceil(RULE_CHUNK);
        UrrWatches {
            lines: Watches::new(lines),
            rules: (0..n).map(|_| OnceLock::new()).collect(),
        }
    }

    fn entry(&self, counter: u32) -> Option<&AtomicU64> {
        let i = counter as usize;
        self.rules
            .get(i / RULE_CHUNK)?
            .get()
            .map(|c| &c[i % RULE_CHUNK])
    }

    /// Has the rule whose usage counter is `counter` charge `lines`
    /// ([`NO_LINE`]: none) from now on (control plane, before it
    /// publishes a treatment flagged `watched`).
    pub fn set_rule(&self, counter: u32, lines: [u32; RULE_LINES]) {
        let Some(c) = self.rules.get(counter as usize / RULE_CHUNK) else {
            return;
        };
        let none = lines == [NO_LINE; RULE_LINES];
        if none && c.get().is_none() {
            return;
        }
        let c = c.get_or_init(|| (0..RULE_CHUNK).map(|_| AtomicU64::new(NO_LINES)).collect());
        let word = u64::from(lines[0]) | u64::from(lines[1]) << 32;
        c[counter as usize % RULE_CHUNK].store(word, Ordering::Release);
    }

    /// The lines the rule whose usage counter is `counter` charges.
    #[inline]
    pub fn rule(&self, counter: u32) -> [u32; RULE_LINES] {
        let w = self
            .entry(counter)
            .map_or(NO_LINES, |e| e.load(Ordering::Acquire));
        [w as u32, (w >> 32) as u32]
    }

    /// Charges a packet of `bytes` one way to the lines of the rule whose
    /// usage counter is `counter` (worker, for rules flagged `watched`):
    /// dropped if a quota of one of them has no room for it, the lines
    /// after it then not charged. A crossing is queued and sets `crossed`
    /// ([`Watches::charge_quietly`]).
    #[inline]
    pub fn charge(&self, counter: u32, uplink: bool, bytes: usize, crossed: &mut bool) -> Charged {
        for line in self.rule(counter) {
            if line != NO_LINE
                && self.lines.charge_quietly(line, uplink, bytes, crossed)
                    == Charged::QuotaExhausted
            {
                return Charged::QuotaExhausted;
            }
        }
        Charged::Pass
    }

    /// Bytes allocated, lines and rule table.
    pub fn bytes(&self) -> usize {
        let used = self.rules.iter().filter(|c| c.get().is_some()).count();
        self.lines.bytes()
            + used * RULE_CHUNK * 8
            + self.rules.len() * core::mem::size_of::<OnceLock<Box<[AtomicU64]>>>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    fn limits(threshold: Option<u64>, quota: Option<u64>) -> VolumeLimits {
        VolumeLimits {
            threshold: [threshold, None, None],
            quota: [quota, None, None],
        }
    }

    fn crossed(w: &Watches) -> Vec<u32> {
        let mut v = Vec::new();
        w.take_crossed(&mut v);
        v
    }

    #[test]
    fn a_threshold_crosses_once_exactly_at_its_packet() {
        let w = Watches::new(10);
        assert!(w.arm(3, &limits(Some(2500), None)));
        assert_eq!(w.charge(3, true, 1000), Charged::Pass);
        assert_eq!(w.charge(3, false, 1000), Charged::Pass);
        assert!(crossed(&w).is_empty());
        // The third packet takes it to -500: the crossing.
        assert_eq!(w.charge(3, true, 1000), Charged::Pass);
        assert_eq!(crossed(&w), vec![3]);
        assert_eq!(w.since_crossing(3), (0, 0));
        assert_eq!(w.charge(3, true, 1000), Charged::Pass);
        assert_eq!(w.charge(3, false, 300), Charged::Pass);
        assert!(crossed(&w).is_empty(), "one signal per crossing");
        assert_eq!(w.since_crossing(3), (1000, 300), "past the crossing");
        w.arm(3, &limits(Some(5000), None));
        w.charge(3, true, 1000);
        assert_eq!(w.since_crossing(3), (0, 0), "no crossing since armed");
        // Re-armed: crosses again.
        w.arm(3, &limits(Some(1000), None));
        assert_eq!(w.charge(3, true, 1000), Charged::Pass);
        assert_eq!(crossed(&w), vec![3], "exactly zero is reached");
        // A direction's threshold ignores the other way.
        w.arm(
            3,
            &VolumeLimits {
                threshold: [None, None, Some(100)],
                ..Default::default()
            },
        );
        w.charge(3, true, 1000);
        assert!(crossed(&w).is_empty());
        w.charge(3, false, 100);
        assert_eq!(crossed(&w), vec![3]);
    }

    #[test]
    fn a_quota_passes_what_fits_and_drops_from_the_packet_that_would_exceed() {
        let w = Watches::new(10);
        let wakes = Arc::new(AtomicUsize::new(0));
        let n = wakes.clone();
        w.set_notify(Box::new(move || {
            n.fetch_add(1, Ordering::Relaxed);
        }));
        w.arm(1, &limits(None, Some(2500)));
        assert_eq!(w.charge(1, true, 1000), Charged::Pass);
        assert_eq!(w.charge(1, false, 1000), Charged::Pass);
        assert!(!w.quota_spent(1));
        assert_eq!(w.charge(1, true, 1000), Charged::QuotaExhausted);
        assert!(w.quota_spent(1));
        // Smaller packets that would have fit stay dropped.
        assert_eq!(w.charge(1, true, 100), Charged::QuotaExhausted);
        assert_eq!(crossed(&w), vec![1]);
        assert_eq!(wakes.load(Ordering::Relaxed), 1);
        // A quota used to the byte passes its last packet.
        w.arm(1, &limits(None, Some(2000)));
        assert_eq!(w.charge(1, true, 1000), Charged::Pass);
        assert_eq!(w.charge(1, true, 1000), Charged::Pass);
        assert_eq!(crossed(&w), vec![1]);
        assert_eq!(w.charge(1, true, 1), Charged::QuotaExhausted);
        // A packet a quota drops is not charged to the threshold.
        w.arm(1, &limits(Some(1500), Some(1000)));
        assert_eq!(w.charge(1, true, 1000), Charged::Pass);
        crossed(&w);
        assert_eq!(w.charge(1, true, 1000), Charged::QuotaExhausted);
        assert!(crossed(&w).is_empty(), "the quota's crossing came first");
        // Disarmed: everything passes, nothing is queued.
        assert!(!w.arm(1, &VolumeLimits::default()));
        assert_eq!(w.charge(1, true, 1 << 20), Charged::Pass);
        assert!(crossed(&w).is_empty());
        // A slot never armed (no chunk) passes.
        assert_eq!(Watches::new(5000).charge(4000, true, 1), Charged::Pass);
    }

    #[test]
    fn a_reading_a_packet_overlaps_is_read_again() {
        let w = Watches::new(10);
        w.arm(3, &limits(Some(2500), None));
        for _ in 0..3 {
            w.charge(3, true, 1000);
        }
        // The first reading of the counters has a packet charged while it
        // runs (a preempted N4 thread): read again, with the line as it
        // was during the second.
        let mut calls = 0;
        let (r, since) = w.settled(3, || {
            calls += 1;
            if calls == 1 {
                w.charge(3, false, 700);
            }
            calls
        });
        assert_eq!((r, since), (2, (0, 700)));
        // Packets all the time: given up on after SETTLE_TRIES readings.
        let (r, _) = w.settled(3, || {
            w.charge(3, true, 1);
            calls += 1;
            calls
        });
        assert_eq!(r, 2 + SETTLE_TRIES);
        // A slot with no line: read once.
        assert_eq!(w.settled(9, || 5), (5, (0, 0)));
    }

    #[test]
    fn rearming_keeps_what_was_charged_after_the_reading() {
        let w = Watches::new(10);
        w.arm(2, &limits(Some(5000), Some(8000)));
        w.charge(2, true, 1000);
        let l = w.line(2).unwrap();
        // The control plane read the counters here (1000 counted) and
        // re-arms 1000 more before the threshold, 2000 more of the
        // quota; 400 are charged before its store.
        let at = l.state();
        w.charge(2, true, 400);
        l.arm(&limits(Some(1000), Some(2000)), &at);
        assert!(crossed(&w).is_empty());
        // 600 more reach the threshold: the 400 stayed charged.
        assert_eq!(w.charge(2, true, 600), Charged::Pass);
        assert_eq!(crossed(&w), vec![2]);
        assert_eq!(w.charge(2, true, 1000), Charged::Pass);
        assert_eq!(crossed(&w), vec![2], "the quota used to the byte");
        assert_eq!(w.charge(2, true, 1), Charged::QuotaExhausted);
        // A word armed anew is set, not moved.
        let at = l.state();
        l.arm(
            &VolumeLimits {
                threshold: [None, Some(100), None],
                ..Default::default()
            },
            &at,
        );
        w.charge(2, false, 5000);
        assert!(crossed(&w).is_empty());
        w.charge(2, true, 100);
        assert_eq!(crossed(&w), vec![2]);
    }

    #[test]
    fn workers_share_the_words_exactly() {
        let w = Arc::new(Watches::new(10));
        // 4 workers × 10,000 packets of 100 bytes against a quota of
        // 2,500,050: exactly 25,000 pass, one crossing.
        w.arm(7, &limits(Some(1_000_000), Some(2_500_050)));
        let passed: usize = (0..4)
            .map(|i| {
                let w = w.clone();
                std::thread::spawn(move || {
                    (0..10_000)
                        .filter(|_| w.charge(7, i % 2 == 0, 100) == Charged::Pass)
                        .count()
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|t| t.join().unwrap())
            .sum();
        assert_eq!(passed, 25_000);
        let mut c = crossed(&w);
        c.sort_unstable();
        assert_eq!(c, vec![7, 7], "the threshold and the quota, once each");
    }

    #[test]
    fn lines_are_allocated_by_chunk_when_armed() {
        let w = Watches::new(1_000_000);
        let empty = w.bytes();
        assert!(empty < 32 * 1024, "{empty} bytes before any line");
        w.arm(5, &limits(Some(1), None));
        assert_eq!(w.bytes(), empty + WATCH_CHUNK * 128);
        w.arm(6, &limits(Some(1), None));
        assert_eq!(w.bytes(), empty + WATCH_CHUNK * 128);
        assert!(
            !w.arm(2_000_000, &limits(Some(1), None)),
            "beyond the table"
        );
    }
}
