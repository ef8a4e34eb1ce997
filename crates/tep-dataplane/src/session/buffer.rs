//! Downlink packets held for idle UEs (a FAR whose apply action is BUFF):
//! a FIFO per session, linked through the pool's buffers so that holding a
//! packet allocates nothing, bounded per session and in all so that idle
//! UEs cannot take the pool from live ones. A session's bound is the
//! worker's (`[pfcp] buffer_packets`) unless its BAR suggests fewer
//! ([`Buffers::set_bound`]): the operator's bound stays the ceiling.

use crate::buffer::PacketId;
use crate::tunnel::FastMap;

/// No next packet.
const END: u32 = u32::MAX;

/// One session's queue.
#[derive(Clone, Copy, Debug)]
struct Queue {
    head: u32,
    tail: u32,
    len: u32,
    // The session's bound when the queue began (or was last set).
    bound: u32,
}

/// The held packets of one worker.
#[derive(Debug)]
pub struct Buffers {
    per_session: u32,
    limit: u32,
    total: u32,
    queues: FastMap<u32, Queue>,
    // Sessions bounded below `per_session`, by slot: at most one entry per
    // session the control plane set, gone with the session.
    bounds: FastMap<u32, u32>,
    // The next packet of the same queue, by packet index.
    next: Vec<u32>,
    // Sessions whose first packet was held since the last drain: each is
    // reported once until the session's queue is released.
    reports: Vec<u32>,
}

/// What [`Buffers::hold`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Held {
    /// Held; the first of its session's queue (report it).
    First,
    /// Held behind others.
    Queued,
    /// Not held: the session's or the worker's bound is reached.
    Full,
}

impl Buffers {
    /// At most `per_session` packets per session and `limit` in all.
    pub fn new(per_session: u32, limit: u32) -> Buffers {
        Buffers {
            per_session,
            limit,
            total: 0,
            queues: FastMap::default(),
            bounds: FastMap::default(),
            next: Vec::new(),
            reports: Vec::new(),
        }
    }

    /// Packets held in all.
    pub fn len(&self) -> usize {
        self.total as usize
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// Packets held for `slot`.
    pub fn held(&self, slot: u32) -> usize {
        self.queues.get(&slot).map_or(0, |q| q.len as usize)
    }

    /// Bounds session `slot` to `packets` (a BAR's Suggested Buffering
    /// Packets Count), at most the worker's per-session bound and at least
    /// one, the packet whose report pages the UE; `None`: the worker's
    /// bound. Packets already held stay; new ones past the bound are
    /// refused.
    pub fn set_bound(&mut self, slot: u32, packets: Option<u32>) {
        let bound = match packets {
            Some(n) if n < self.per_session => {
                let n = n.max(1);
                self.bounds.insert(slot, n);
                n
            }
            _ => {
                self.bounds.remove(&slot);
                self.per_session
            }
        };
        if let Some(q) = self.queues.get_mut(&slot) {
            q.bound = bound;
        }
    }

    /// Session `slot`'s bound.
    pub fn bound(&self, slot: u32) -> u32 {
        self.bounds.get(&slot).copied().unwrap_or(self.per_session)
    }

    /// Holds packet `id` for session `slot`.
    pub fn hold(&mut self, slot: u32, id: PacketId) -> Held {
        if self.total >= self.limit {
            return Held::Full;
        }
        let i = id.index();
        if self.next.len() <= i {
            // Grows to the pool's size at most, once.
            self.next.resize(i + 1, END);
        }
        self.next[i] = END;
        let me = i as u32;
        match self.queues.get_mut(&slot) {
            Some(q) if q.len >= q.bound => Held::Full,
            Some(q) => {
                self.next[q.tail as usize] = me;
                q.tail = me;
                q.len += 1;
                self.total += 1;
                Held::Queued
            }
            None => {
                let bound = self.bound(slot);
                self.queues.insert(
                    slot,
                    Queue {
                        head: me,
                        tail: me,
                        len: 1,
                        bound,
                    },
                );
                self.total += 1;
                self.reports.push(slot);
                Held::First
            }
        }
    }

    /// Takes `slot`'s packets, oldest first, into `out` (to send them, or
    /// to drop them: DROBU, or the session is gone).
    pub fn release(&mut self, slot: u32, out: &mut Vec<PacketId>) {
        let Some(q) = self.queues.remove(&slot) else {
            return;
        };
        let mut at = q.head;
        while at != END {
            out.push(PacketId::from_index(at));
            at = self.next[at as usize];
        }
        self.total -= q.len;
    }

    /// Moves the sessions to report (first packet held) into `out`.
    pub fn take_reports(&mut self, out: &mut Vec<u32>) {
        out.append(&mut self.reports);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_per_session_bounded_and_reported_once() {
        let mut b = Buffers::new(3, 5);
        let ids: Vec<PacketId> = (0..8).map(PacketId::from_index).collect();
        assert_eq!(b.hold(7, ids[0]), Held::First);
        assert_eq!(b.hold(7, ids[2]), Held::Queued);
        assert_eq!(b.hold(9, ids[1]), Held::First);
        assert_eq!(b.hold(7, ids[3]), Held::Queued);
        assert_eq!(b.hold(7, ids[4]), Held::Full, "per-session bound");
        assert_eq!(b.hold(9, ids[5]), Held::Queued);
        assert_eq!(b.hold(11, ids[6]), Held::Full, "worker bound");
        assert_eq!((b.len(), b.held(7), b.held(9)), (5, 3, 2));
        let mut reports = Vec::new();
        b.take_reports(&mut reports);
        assert_eq!(reports, [7, 9]);
        let mut out = Vec::new();
        b.release(7, &mut out);
        assert_eq!(out, [ids[0], ids[2], ids[3]], "oldest first");
        assert_eq!(b.len(), 2);
        // Released: the next packet held is a first again.
        assert_eq!(b.hold(7, ids[7]), Held::First);
        reports.clear();
        b.take_reports(&mut reports);
        assert_eq!(reports, [7]);
        out.clear();
        b.release(12, &mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn a_session_bound_below_the_workers_only() {
        let mut b = Buffers::new(4, 100);
        let ids: Vec<PacketId> = (0..30).map(PacketId::from_index).collect();
        b.set_bound(7, Some(2));
        b.set_bound(8, Some(9));
        b.set_bound(9, Some(0));
        assert_eq!(
            (b.bound(7), b.bound(8), b.bound(9), b.bound(10)),
            (2, 4, 1, 4)
        );
        let held = |b: &mut Buffers, slot, from: usize, n: usize| {
            (from..from + n)
                .map(|i| b.hold(slot, ids[i]))
                .filter(|h| *h != Held::Full)
                .count()
        };
        assert_eq!(held(&mut b, 7, 0, 3), 2, "its BAR's count");
        assert_eq!(held(&mut b, 8, 3, 6), 4, "capped by the worker's");
        assert_eq!(held(&mut b, 9, 9, 2), 1, "one: the packet reported");
        assert_eq!(held(&mut b, 10, 11, 5), 4, "no BAR: the worker's");
        // Raised while held: more fit; lowered: the held stay, no more.
        b.set_bound(7, Some(3));
        assert_eq!(held(&mut b, 7, 15, 2), 1);
        b.set_bound(10, Some(1));
        assert_eq!((b.held(10), b.hold(10, ids[17])), (4, Held::Full));
        // Released, the bound stays the session's; unset, the worker's.
        let mut out = Vec::new();
        b.release(7, &mut out);
        assert_eq!(out.len(), 3);
        assert_eq!(held(&mut b, 7, 20, 5), 3);
        b.set_bound(7, None);
        assert_eq!(b.bound(7), 4);
    }
}
