//! Vectors: up to [`VECTOR_SIZE`] packets processed by one node call.

use crate::buffer::{PacketId, Pool};

/// The most packets in a vector (VPP's frame size).
pub const VECTOR_SIZE: usize = 256;

/// A fixed-capacity list of packet handles; never allocates after creation.
#[derive(Clone, Debug)]
pub struct PacketVector {
    ids: [PacketId; VECTOR_SIZE],
    len: usize,
}

impl Default for PacketVector {
    fn default() -> Self {
        PacketVector::new()
    }
}

impl PacketVector {
    /// An empty vector.
    pub fn new() -> PacketVector {
        PacketVector {
            ids: [PacketId::default_id(); VECTOR_SIZE],
            len: 0,
        }
    }

    /// Appends a packet; hands it back if the vector is full.
    pub fn push(&mut self, id: PacketId) -> Result<(), PacketId> {
        if self.len == VECTOR_SIZE {
            return Err(id);
        }
        self.ids[self.len] = id;
        self.len += 1;
        Ok(())
    }

    /// Appends a packet where the caller made room for it (a node's output
    /// is never larger than its input vector, and a node that grows its
    /// output flushes first; an I/O layer reads at most the room left). A
    /// full vector here is a bug: it panics in debug builds, and in release
    /// the packet is dropped, its buffer back in `pool`, counted as
    /// `vector_full` by the pipeline's next call. The bound check is the
    /// one [`push`](Self::push) makes anyway; the failure is out of line.
    #[inline(always)]
    pub fn put(&mut self, pool: &mut Pool, id: PacketId) {
        if self.len < VECTOR_SIZE {
            self.ids[self.len] = id;
            self.len += 1;
        } else {
            overflow(pool, id);
        }
    }

    /// Moves the packets for which `take` is true into a new vector, in
    /// order, keeping the others: it cannot overflow, having the capacity
    /// of the vector it splits.
    pub(crate) fn split_off_where(
        &mut self,
        mut take: impl FnMut(PacketId) -> bool,
    ) -> PacketVector {
        let mut taken = PacketVector::new();
        let mut w = 0;
        for r in 0..self.len {
            let id = self.ids[r];
            if take(id) {
                taken.ids[taken.len] = id;
                taken.len += 1;
            } else {
                self.ids[w] = id;
                w += 1;
            }
        }
        self.len = w;
        taken
    }

    /// The packets.
    pub fn as_slice(&self) -> &[PacketId] {
        &self.ids[..self.len]
    }

    /// How many packets.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether no more fit.
    pub fn is_full(&self) -> bool {
        self.len == VECTOR_SIZE
    }

    /// Empties the vector.
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Keeps the packets for which `keep` is true, in order; hands each
    /// other one to `dropped`. This is how a node removes the packets it
    /// drops without a second vector.
    pub fn retain(
        &mut self,
        mut keep: impl FnMut(PacketId) -> bool,
        mut dropped: impl FnMut(PacketId),
    ) {
        let mut w = 0;
        for r in 0..self.len {
            let id = self.ids[r];
            if keep(id) {
                self.ids[w] = id;
                w += 1;
            } else {
                dropped(id);
            }
        }
        self.len = w;
    }
}

#[cold]
#[inline(never)]
fn overflow(pool: &mut Pool, id: PacketId) {
    debug_assert!(
        false,
        "packet vector overflow: a node put more than it made room for"
    );
    pool.drop_vector_full(id);
}

impl PacketId {
    /// A placeholder for unused vector slots (never read).
    const fn default_id() -> PacketId {
        // Reached only through `PacketVector`, which reads slots below len.
        crate::buffer::PacketId::from_index(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffer::Pool;

    #[test]
    fn fills_to_capacity_and_retains_in_order() {
        let mut pool = Pool::new(VECTOR_SIZE + 1, 64);
        let mut v = PacketVector::new();
        for _ in 0..VECTOR_SIZE {
            v.push(pool.alloc().unwrap()).unwrap();
        }
        assert!(v.is_full());
        let extra = pool.alloc().unwrap();
        assert_eq!(v.push(extra), Err(extra));
        let mut dropped = Vec::new();
        v.retain(|id| id.index() % 3 != 0, |id| dropped.push(id.index()));
        assert_eq!(v.len() + dropped.len(), VECTOR_SIZE);
        assert!(v.as_slice().windows(2).all(|w| w[0].index() < w[1].index()));
        assert!(dropped.iter().all(|i| i % 3 == 0));
        v.clear();
        assert!(v.is_empty());
    }

    // A full vector is a bug: caught in debug builds; in release the
    // packet is freed and counted, never leaked.
    #[test]
    #[cfg_attr(debug_assertions, should_panic(expected = "packet vector overflow"))]
    fn put_past_capacity_frees_and_counts() {
        let mut pool = Pool::new(VECTOR_SIZE + 1, 64);
        let mut v = PacketVector::new();
        for _ in 0..VECTOR_SIZE {
            let id = pool.alloc().unwrap();
            v.put(&mut pool, id);
        }
        let extra = pool.alloc().unwrap();
        assert!(pool.alloc().is_none());
        v.put(&mut pool, extra);
        assert_eq!(v.len(), VECTOR_SIZE);
        assert_eq!(pool.take_vector_full(), 1);
        assert!(
            pool.alloc().is_some(),
            "the dropped buffer is back in the pool"
        );
    }

    #[test]
    fn split_off_where_keeps_order_on_both_sides() {
        let mut pool = Pool::new(8, 64);
        let mut v = PacketVector::new();
        for _ in 0..8 {
            v.push(pool.alloc().unwrap()).unwrap();
        }
        let odd = v.split_off_where(|id| id.index() % 2 == 1);
        assert_eq!(v.len() + odd.len(), 8);
        assert!(v.as_slice().iter().all(|id| id.index() % 2 == 0));
        assert!(odd.as_slice().iter().all(|id| id.index() % 2 == 1));
        assert!(odd
            .as_slice()
            .windows(2)
            .all(|w| w[0].index() < w[1].index()));
    }
}
