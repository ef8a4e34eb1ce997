//! The decap side of UDP GRO trains in the pipeline: a train the socket
//! verified is decapsulated one datagram at a time, and the datagrams after
//! it that continue the same inner flow are merged into it where they lie
//! (`train-merge`); the rest is cut into datagrams (`udp-train-split`).

use super::{Counters, Pipeline, Sink};
use crate::buffer::{ChecksumState, GsoKind, PacketId, Pool};
use crate::clock::Clock;
use crate::kind::TunnelKind;
use crate::node::{Node, Runtime};
use crate::tunnel::TunnelTable;
use crate::udp_train;
use crate::vector::{PacketVector, VECTOR_SIZE};

/// A train being merged: `head`, a copy of its datagram at payload offset
/// `at` ([`udp_train::detach_at`]), goes through decapsulation; the train waits
/// in `rest`, untouched.
#[derive(Clone, Copy, Debug)]
pub(super) struct PendingTrain {
    pub head: PacketId,
    pub rest: PacketId,
    pub at: usize,
    pub segment: usize,
}

/// What is left of a train after one of its datagrams was decapsulated.
#[derive(Clone, Copy, Debug)]
pub(super) enum Leftover {
    /// Nothing merged: the train, from its datagram at this payload
    /// offset, goes the copying way.
    Split(PacketId, usize),
    /// Datagrams after a merged run, from this payload offset: merge again.
    Again(PacketId, usize),
}

impl<C: Clock> Pipeline<C> {
    /// [`Pipeline::decap`] of a vector holding trains: each merged where
    /// it can be, split where it cannot.
    pub(super) fn decap_trains(
        &mut self,
        pool: &mut Pool,
        input: &mut PacketVector,
        now_ns: u64,
        sink: &mut Sink<'_>,
    ) {
        let mut work = self.take_work();
        for &id in input.as_slice() {
            let mut next = Some(Leftover::Again(id, 0));
            while let Some(left) = next.take() {
                let (id, at) = match left {
                    Leftover::Again(id, at) => {
                        if let Some((head, segment)) = self.detach(pool, id, at) {
                            if work.len() == VECTOR_SIZE {
                                self.decap_vector(pool, &mut work, now_ns, sink);
                            }
                            work.put(pool, head);
                            let train = PendingTrain {
                                head,
                                rest: id,
                                at,
                                segment,
                            };
                            next = self.decap_train(pool, &mut work, now_ns, sink, train);
                            continue;
                        }
                        (id, at)
                    }
                    Leftover::Split(id, at) => (id, at),
                };
                let Some(id) = self.train_from_offset(pool, id, at) else {
                    continue;
                };
                self.split_into(pool, id, &mut work, now_ns, sink);
            }
        }
        input.clear();
        self.decap_vector(pool, &mut work, now_ns, sink);
        self.work = Some(work);
    }

    /// A copy of the datagram at payload offset `at` of a train that
    /// [`gather`] with GRO merges ([`udp_train::detach_at`]): one the socket
    /// verified, whose outer ECN leaves the inner one as it is. The merged
    /// datagrams skip `decap-output`'s RFC 6040 step; the socket's GRO only
    /// builds trains of one outer TOS, and by RFC 6040 §4.2 an outer
    /// Not-ECT or ECT(0) changes no inner ECN field, where ECT(1) and CE
    /// can. None for any other packet.
    ///
    /// [`gather`]: PipelineOptions::gather
    fn detach(&mut self, pool: &mut Pool, id: PacketId, at: usize) -> Option<(PacketId, usize)> {
        let m = pool.meta(id);
        // Merging is GRO: not without it (a device without offloads).
        if !self.options.gather
            || !self.options.gro
            || m.csum != ChecksumState::Verified
            || !matches!(m.gso, Some(g) if g.kind == GsoKind::Udp)
        {
            return None;
        }
        const NOT_ECT: u8 = 0;
        const ECT0: u8 = 2;
        if !matches!(pool.outer(id).tos & 3, NOT_ECT | ECT0) {
            return None;
        }
        udp_train::detach_at(pool, id, at).ok()
    }

    /// Train `id` from its datagram at payload offset `at` on, for the
    /// copying way: in place when the headers can move up, else copied
    /// (and `id` let go). None, counted, when that fails.
    fn train_from_offset(&mut self, pool: &mut Pool, id: PacketId, at: usize) -> Option<PacketId> {
        if at == 0 || udp_train::advance_train(pool, id, at).is_ok() {
            return Some(id);
        }
        let copy = udp_train::train_from(pool, id, at);
        pool.free(id);
        match copy {
            Ok(c) => Some(c),
            Err(r) => {
                let counters = &mut self.counters;
                self.runtime.run(Node::UdpTrainSplit, 1, |s| {
                    counters.decap_in += 1;
                    s.drop(r);
                });
                None
            }
        }
    }

    /// Adds `id` to `work`: a plain packet as it is, a train cut into its
    /// datagrams by node `udp-train-split`.
    fn split_into(
        &mut self,
        pool: &mut Pool,
        id: PacketId,
        work: &mut PacketVector,
        now_ns: u64,
        sink: &mut Sink<'_>,
    ) {
        let need = match pool.meta(id).gso {
            None => 1,
            Some(g) => {
                let hdr = usize::from(pool.meta(id).udp_payload);
                (pool.data(id).len().saturating_sub(hdr))
                    .div_ceil(usize::from(g.segment_size).max(1))
                    .clamp(1, VECTOR_SIZE)
            }
        };
        if work.len() + need > VECTOR_SIZE {
            self.decap_vector(pool, work, now_ns, sink);
        }
        if pool.meta(id).gso.is_none() {
            work.put(pool, id);
            return;
        }
        let counters = &mut self.counters;
        self.runtime.run(Node::UdpTrainSplit, 1, |s| {
            if let Err(r) = udp_train::split_udp_train(pool, id, work) {
                // Counted in: the train is one dropped packet.
                counters.decap_in += 1;
                s.drop(r);
                pool.free(id);
            }
        });
    }
}

/// Whether `head` is an uplink packet of a session with an uplink MBR:
/// its train is not merged but split, so that each datagram is metered
/// as `gtpu-decap` matches it (merged ones would pass unmetered).
fn metered(
    table: &TunnelTable,
    pool: &Pool,
    head: PacketId,
    sessions: Option<&crate::session::SessionTable>,
) -> bool {
    sessions.is_some_and(|s| {
        table.get(pool.meta(head).tunnel).sessions && s.mbr_uplink(pool.session(head))
    })
}

/// Node `train-merge` for the train whose head `decap-output` is about to
/// see in `v`: the datagrams after the head's that continue its inner flow
/// become its tail ([`crate::gro::merge_train`]). Returns what is left of
/// the train.
pub(super) fn merge_pending<C: Clock>(
    runtime: &mut Runtime<C>,
    counters: &mut Counters,
    table: &TunnelTable,
    pool: &mut Pool,
    v: &PacketVector,
    t: PendingTrain,
    sessions: Option<&crate::session::SessionTable>,
) -> Option<Leftover> {
    // The datagrams after the head's, if any.
    let hdr = usize::from(pool.meta(t.rest).udp_payload);
    let after = t.at + t.segment;
    let mut next = Some(after).filter(|&a| hdr + a < pool.data(t.rest).len());
    let mut merged = false;
    if next.is_some() && v.as_slice().contains(&t.head) && !metered(table, pool, t.head, sessions) {
        runtime.run(Node::TrainMerge, 1, |_| {
            let m = *pool.meta(t.head);
            let kind = table.get(m.tunnel).kind;
            let link = kind.link();
            let trusted = m.remote_csum.is_some() && m.csum == ChecksumState::Verified;
            let length_field = (kind == TunnelKind::Gtpu).then_some((2, 8));
            let r = crate::gro::merge_train(
                pool,
                t.head,
                t.rest,
                t.segment,
                after,
                link,
                trusted,
                length_field,
            );
            if r.merged > 0 {
                if let Some(s) = sessions.filter(|_| table.get(m.tunnel).sessions) {
                    // The merged datagrams' usage, counted as they were
                    // matched one by one.
                    let header = usize::from(m.inner - m.udp_payload);
                    let available = pool.data(t.rest).len().saturating_sub(hdr + after);
                    let slot = pool.session(t.head);
                    crate::session::uplink::count_merged(
                        s, slot, r.merged, t.segment, available, header,
                    );
                }
                merged = true;
                counters.decap_in += r.merged as u64;
                counters.coalesced += r.merged as u64;
                next = r.next;
            }
        });
    }
    match next {
        Some(at) if merged => Some(Leftover::Again(t.rest, at)),
        Some(at) => Some(Leftover::Split(t.rest, at)),
        None => {
            // Done with the train: what merged keeps it alive.
            pool.free(t.rest);
            None
        }
    }
}
