//! The TEID allocator: local TEIDs for F-TEIDs tep chooses (CHOOSE), and
//! the record of TEIDs the SMF chose, so that no two PDRs of different
//! sessions share one.
//!
//! TEIDs are handed out densely from 1 (0 is reserved: TS 29.281 uses it
//! for path messages), so a bitmap over the range in use answers "taken?"
//! in O(1) at 1 bit per TEID (128 KiB for a million): no per-TEID map. A
//! next-fit cursor keeps allocation amortised O(1). An SMF-chosen TEID
//! above the bitmap's end is kept in a small set until the bitmap grows
//! over it (SMFs use CHOOSE when the UP function announces FTUP, so that
//! set stays empty in practice).

use std::collections::BTreeSet;

#[derive(Debug, Default)]
pub struct TeidAllocator {
    /// Bit `t` set: TEID `t` is taken. Covers `0..words.len() * 64`.
    words: Vec<u64>,
    /// The word the next search starts from.
    cursor: usize,
    /// Taken TEIDs at or above the bitmap's end.
    above: BTreeSet<u32>,
    in_use: usize,
}

impl TeidAllocator {
    pub fn new() -> Self {
        // TEID 0 is never handed out.
        TeidAllocator {
            words: vec![1],
            ..Default::default()
        }
    }

    /// TEIDs taken.
    pub fn in_use(&self) -> usize {
        self.in_use
    }

    fn end(&self) -> u64 {
        self.words.len() as u64 * 64
    }

    /// A free TEID, now taken; `None` when all 2^32 - 1 are.
    pub fn allocate(&mut self) -> Option<u32> {
        let n = self.words.len();
        for i in 0..n {
            let w = (self.cursor + i) % n;
            if self.words[w] != u64::MAX {
                let bit = (!self.words[w]).trailing_zeros() as u64;
                self.words[w] |= 1 << bit;
                self.cursor = w;
                self.in_use += 1;
                return Some((w as u64 * 64 + bit) as u32);
            }
        }
        // Every word full: grow by one, taking over what the SMF chose there.
        if self.end() > u32::MAX as u64 {
            return None;
        }
        let base = self.end();
        let mut word = 0u64;
        let taken: Vec<u32> = self
            .above
            .range(base as u32..=(base + 63).min(u32::MAX as u64) as u32)
            .copied()
            .collect();
        for t in taken {
            self.above.remove(&t);
            word |= 1 << (t as u64 - base);
        }
        self.words.push(word);
        self.cursor = self.words.len() - 1;
        self.allocate()
    }

    /// Takes `teid` as chosen by the SMF; false if it is taken (or 0).
    pub fn reserve(&mut self, teid: u32) -> bool {
        if teid == 0 {
            return false;
        }
        let t = teid as u64;
        if t < self.end() {
            let (w, b) = ((t / 64) as usize, t % 64);
            if self.words[w] & (1 << b) != 0 {
                return false;
            }
            self.words[w] |= 1 << b;
        } else if !self.above.insert(teid) {
            return false;
        }
        self.in_use += 1;
        true
    }

    /// Whether `teid` is taken.
    #[cfg(test)]
    pub fn is_taken(&self, teid: u32) -> bool {
        let t = teid as u64;
        if t < self.end() {
            self.words[(t / 64) as usize] & (1 << (t % 64)) != 0
        } else {
            self.above.contains(&teid)
        }
    }

    /// Gives `teid` back.
    pub fn free(&mut self, teid: u32) {
        if teid == 0 {
            return;
        }
        let t = teid as u64;
        let was = if t < self.end() {
            let (w, b) = ((t / 64) as usize, t % 64);
            let was = self.words[w] & (1 << b) != 0;
            self.words[w] &= !(1 << b);
            was
        } else {
            self.above.remove(&teid)
        };
        if was {
            self.in_use -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dense_from_one_reusing_freed_ones_late() {
        let mut a = TeidAllocator::new();
        let got: Vec<u32> = (0..200).map(|_| a.allocate().unwrap()).collect();
        assert_eq!(got, (1..=200).collect::<Vec<_>>());
        a.free(70);
        a.free(3);
        // Next fit: the current word (up to 255) first, so a freed TEID is
        // not handed out again at once (a late G-PDU to it would reach
        // another session).
        let rest: Vec<u32> = (0..55).map(|_| a.allocate().unwrap()).collect();
        assert_eq!(rest, (201..=255).collect::<Vec<_>>());
        assert_eq!([a.allocate(), a.allocate()], [Some(3), Some(70)]);
        assert_eq!(a.in_use(), 255);
    }

    #[test]
    fn smf_chosen_teids_are_never_handed_out() {
        let mut a = TeidAllocator::new();
        assert!(a.reserve(5));
        assert!(!a.reserve(5));
        assert!(!a.reserve(0));
        assert!(a.reserve(130));
        let got: Vec<u32> = (0..140).map(|_| a.allocate().unwrap()).collect();
        assert!(!got.contains(&5) && !got.contains(&130));
        assert!(!a.reserve(got[0]));
        assert_eq!(a.in_use(), 142);
        a.free(130);
        assert!(!a.is_taken(130));
        assert_eq!(a.allocate(), Some(130));
    }
}
