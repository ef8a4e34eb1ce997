//! The TEID allocator: local TEIDs for F-TEIDs tep chooses (CHOOSE), and
//! the record of TEIDs the SMF chose, so that no two PDRs of different
//! sessions share one.
//!
//! Indexes are handed out densely from 0, so a bitmap over the range in
//! use answers "taken?" in O(1) at 1 bit per TEID (128 KiB for a
//! million): no per-TEID map. A next-fit cursor keeps allocation
//! amortised O(1). The TEID of an index is its image under a keyed
//! permutation ([`Permutation`]): unpredictable to a host that does not
//! see N4, unique because the permutation is a bijection. The index whose
//! image is TEID 0 is never handed out (TS 29.281 uses TEID 0 for path
//! messages). An index above the bitmap's end (an SMF-chosen TEID, or
//! TEID 0's) is kept in a small set until the bitmap grows over it (SMFs
//! use CHOOSE when the UP function announces FTUP, so that set stays
//! small in practice).

use std::collections::BTreeSet;

use super::perm::Permutation;

#[derive(Debug)]
pub struct TeidAllocator {
    /// Bit `i` set: index `i` is taken. Covers `0..words.len() * 64`.
    words: Vec<u64>,
    /// The word the next search starts from.
    cursor: usize,
    /// Taken indexes at or above the bitmap's end.
    above: BTreeSet<u32>,
    in_use: usize,
    perm: Permutation,
}

impl TeidAllocator {
    /// TEIDs permuted under `key`.
    pub fn new(key: u64) -> Self {
        let mut a = TeidAllocator {
            words: vec![0],
            cursor: 0,
            above: BTreeSet::new(),
            in_use: 0,
            perm: Permutation::new(key, 2, 16),
        };
        // TEID 0 is never handed out (and not counted in use).
        a.mark(a.index(0));
        a
    }

    fn index(&self, teid: u32) -> u32 {
        self.perm.backward(teid.into()) as u32
    }

    fn teid(&self, index: u32) -> u32 {
        self.perm.forward(index.into()) as u32
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
                return Some(self.teid((w as u64 * 64 + bit) as u32));
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

    /// Takes index `i`; false if it was taken.
    fn mark(&mut self, i: u32) -> bool {
        let t = i as u64;
        if t < self.end() {
            let (w, b) = ((t / 64) as usize, t % 64);
            let was = self.words[w] & (1 << b) != 0;
            self.words[w] |= 1 << b;
            !was
        } else {
            self.above.insert(i)
        }
    }

    /// Takes `teid` as chosen by the SMF; false if it is taken (or 0).
    pub fn reserve(&mut self, teid: u32) -> bool {
        if teid == 0 || !self.mark(self.index(teid)) {
            return false;
        }
        self.in_use += 1;
        true
    }

    /// Whether `teid` is taken.
    #[cfg(test)]
    pub fn is_taken(&self, teid: u32) -> bool {
        let t = self.index(teid) as u64;
        if t < self.end() {
            self.words[(t / 64) as usize] & (1 << (t % 64)) != 0
        } else {
            self.above.contains(&(t as u32))
        }
    }

    /// Gives `teid` back.
    pub fn free(&mut self, teid: u32) {
        if teid == 0 {
            return;
        }
        let i = self.index(teid);
        let t = i as u64;
        let was = if t < self.end() {
            let (w, b) = ((t / 64) as usize, t % 64);
            let was = self.words[w] & (1 << b) != 0;
            self.words[w] &= !(1 << b);
            was
        } else {
            self.above.remove(&i)
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
    fn dense_indexes_reusing_freed_ones_late() {
        let mut a = TeidAllocator::new(7);
        let got: Vec<u32> = (0..200).map(|_| a.allocate().unwrap()).collect();
        let indexes: Vec<u32> = got.iter().map(|&t| a.index(t)).collect();
        assert_eq!(indexes, (0..200).collect::<Vec<_>>());
        // Not the indexes themselves: no TEID tells the next one.
        assert!(got.iter().zip(1..).filter(|(&t, i)| t == *i).count() < 2);
        assert!(!got.contains(&0));
        a.free(got[70]);
        a.free(got[3]);
        // Next fit: the current word (up to index 255) first, so a freed
        // TEID is not handed out again at once (a late G-PDU to it would
        // reach another session).
        let rest: Vec<u32> = (0..56).map(|_| a.allocate().unwrap()).collect();
        let rest: Vec<u32> = rest.iter().map(|&t| a.index(t)).collect();
        assert_eq!(rest, (200..=255).collect::<Vec<_>>());
        assert_eq!([a.allocate(), a.allocate()], [Some(got[3]), Some(got[70])]);
        assert_eq!(a.in_use(), 256);
    }

    #[test]
    fn teid_zero_is_never_handed_out() {
        // A key whose permutation sends index 50 to TEID 0 (found by
        // search): the allocator skips that index.
        let mut a = TeidAllocator::new(3_234_587);
        assert_eq!(a.index(0), 50);
        let got: Vec<u32> = (0..64).map(|_| a.allocate().unwrap()).collect();
        assert!(!got.contains(&0));
        assert_eq!(a.in_use(), 64);
        assert!(!a.reserve(0));
    }

    #[test]
    fn smf_chosen_teids_are_never_handed_out() {
        let mut a = TeidAllocator::new(7);
        let (t5, t130) = (a.teid(5), a.teid(130));
        assert!(a.reserve(t5));
        assert!(!a.reserve(t5));
        assert!(!a.reserve(0));
        // Above the bitmap's end until it grows over it.
        assert!(a.reserve(t130));
        let got: Vec<u32> = (0..140).map(|_| a.allocate().unwrap()).collect();
        assert!(!got.contains(&t5) && !got.contains(&t130));
        assert!(!a.reserve(got[0]));
        assert_eq!(a.in_use(), 142);
        a.free(t130);
        assert!(!a.is_taken(t130));
        assert_eq!(a.allocate(), Some(t130));
    }
}
