//! The UPF's sessions in a worker's pipeline: the replica of the session
//! table, the packets held for idle UEs, and the control plane's changes
//! applied between vectors (see [`crate::session`]).

use super::{Output, Pipeline, Sink};
use crate::buffer::{PacketId, Pool, NO_TUNNEL};
use crate::clock::Clock;
use crate::drop::DropReason;
use crate::encap::TxState;
use crate::geometry::InnerLink;
use crate::gtpu_reply::Replies;
use crate::io::OuterLayers;
use crate::nexthop;
use crate::node::Node;
use crate::session::buffer::Buffers;
use crate::session::{Change, SessionTable, WorkerLink};
use crate::vector::{PacketVector, VECTOR_SIZE};

/// A worker's sessions.
#[derive(Debug)]
pub(super) struct Upf {
    pub table: SessionTable,
    pub buffers: Buffers,
    /// Packets of sessions `gtpu-decap` sends back to encapsulation (to
    /// or from N9), between the decap nodes and [`Pipeline::reencap`].
    pub reencap: PacketVector,
    // Scratch: the changes applied in a round, the packets released.
    applied: Vec<Change>,
    released: Vec<PacketId>,
}

impl<C: Clock> Pipeline<C> {
    /// Makes this pipeline a UPF worker: its session table fed by `link`
    /// (one of [`crate::session::control::Sessions::new`]'s), downlink
    /// buffers of `per_session` packets per session and `limit` in all.
    pub fn attach_sessions(&mut self, link: WorkerLink, per_session: u32, limit: u32) {
        self.upf = Some(Box::new(Upf {
            table: SessionTable::new(link),
            buffers: Buffers::new(per_session, limit),
            reencap: PacketVector::new(),
            applied: Vec::new(),
            released: Vec::new(),
        }));
    }

    /// The worker's session table, if it is a UPF worker.
    pub fn sessions(&self) -> Option<&SessionTable> {
        self.upf.as_ref().map(|u| &u.table)
    }

    /// Applies the control plane's changes, if any (call between vectors;
    /// one atomic load when there are none). Packets held for a session
    /// that no longer buffers (its FAR forwards or drops now, or it is
    /// gone) go through encap again, in order; End Markers asked for go to
    /// `sink` as [`Output::Reply`].
    pub fn apply_session_changes(&mut self, pool: &mut Pool, sink: &mut Sink<'_>) {
        let Some(upf) = self.upf.as_mut() else {
            return;
        };
        let mut applied = core::mem::take(&mut upf.applied);
        upf.table.apply_pending(&mut applied);
        if applied.is_empty() {
            upf.applied = applied;
            return;
        }
        let tunnels = self.table.tunnels().len();
        let mut released = core::mem::take(&mut upf.released);
        // Dropped before any change of the batch sends them (the FAR that
        // forwards again comes with the DROBU that drops them).
        for c in &applied {
            if let Change::DropBuffered { slot } = *c {
                upf.buffers.release(slot, &mut released);
            }
        }
        if !released.is_empty() {
            for &id in &released {
                pool.free(id);
            }
            // They leave the buffer as released ones do, counted in
            // `encap_in` again, and end as drops: the edges balance.
            let n = released.len() as u64;
            self.counters.encap_in += n;
            self.runtime
                .drop_many(Node::SessionLookup, DropReason::BufferDropped, n);
            released.clear();
        }
        for c in &applied {
            match *c {
                Change::Peer { id, peer } => {
                    let i = tunnels + id as usize;
                    if self.tx.len() <= i {
                        let filler = self.tx.first().copied();
                        if let Some(f) = filler {
                            self.tx.resize(i + 1, f);
                        }
                    }
                    if let (Some(p), Some(slot)) = (peer, self.tx.get_mut(i)) {
                        let mut t = self.table.get(p.n3).clone();
                        t.remote = p.addr;
                        if let Some(d) = p.dscp {
                            t.dscp = crate::config::Dscp::Fixed(d);
                        }
                        *slot = TxState::new(&t);
                    }
                }
                Change::Session { slot, ref session }
                    if session.downlink != crate::session::Action::Buffer =>
                {
                    upf.buffers.release(slot, &mut released);
                }
                Change::Remove { slot } => {
                    upf.buffers.release(slot, &mut released);
                    upf.buffers.set_bound(slot, None);
                }
                Change::BufferBound { slot, packets } => upf.buffers.set_bound(slot, packets),
                _ => {}
            }
        }
        let markers = core::mem::take(&mut upf.table.end_markers);
        upf.applied = applied;
        if !markers.is_empty() {
            let headers = self
                .options
                .send
                .unwrap_or(self.options.outer)
                .ip_in_buffer();
            let mut r = Replies {
                out: &mut self.replies,
                answered: 0,
                generated: 0,
            };
            for &(n3, peer, teid) in &markers {
                let local = self.table.get(n3).local;
                self.gtpu
                    .end_marker(pool, &mut r, local, peer, teid, headers);
            }
            self.counters.generated += r.generated;
            // Whole frames (a gateway): behind the Ethernet header to the
            // old peer's next hop, or to the kernel while it is unknown.
            if self.options.outer == OuterLayers::EthernetIpUdp {
                nexthop::frame(
                    pool,
                    &mut self.replies,
                    &mut self.next_hops,
                    &mut self.unresolved,
                );
            }
            if !self.replies.is_empty() {
                sink(Output::Reply, pool, &mut self.replies);
            }
            self.replies.clear();
            self.hand_unresolved(pool, sink);
        }
        self.encap_released(pool, &released, sink);
        released.clear();
        if let Some(upf) = self.upf.as_mut() {
            upf.released = released;
        }
    }

    /// Packets held for sessions that forward again, through encap in
    /// order, in vectors of one data network each (the one they were held
    /// in: `session-lookup` finds their session again there).
    fn encap_released(&mut self, pool: &mut Pool, released: &[PacketId], sink: &mut Sink<'_>) {
        let Some(before) = self.upf.as_ref().map(|u| u.table.network()) else {
            return;
        };
        let mut at = 0;
        while at < released.len() {
            let network = pool.meta(released[at]).network;
            let mut v = PacketVector::new();
            while at < released.len()
                && v.len() < VECTOR_SIZE
                && pool.meta(released[at]).network == network
            {
                let id = released[at];
                // Marked held by session-lookup: no tunnel until
                // tunnel-lookup finds it again.
                pool.meta_mut(id).tunnel = NO_TUNNEL;
                v.put(pool, id);
                at += 1;
            }
            self.set_network(network);
            // Held as tunnel-lookup left them: IP packets (a gateway's
            // frames lost their Ethernet header there), before any node
            // changed their bytes.
            self.encap_from(InnerLink::Ip, pool, &mut v, sink);
        }
        self.set_network(before);
    }

    /// The data network of the downlink packets encapsulated next, until
    /// set again: the one whose N6 device they were read from (a UPF
    /// worker's; 0 until set).
    pub fn set_network(&mut self, network: u8) {
        if let Some(u) = self.upf.as_mut() {
            u.table.set_network(network);
        }
    }

    /// Moves into `out` the sessions whose first downlink packet was held
    /// since the last call: each is for a Downlink Data Report.
    pub fn take_session_reports(&mut self, out: &mut Vec<u32>) {
        if let Some(u) = self.upf.as_mut() {
            u.buffers.take_reports(out);
        }
    }

    /// Moves into `out` the Error Indications and Echo Responses the UPF's
    /// peers sent since the last call ([`crate::PeerSignal`]); returns how
    /// many found the worker's queue full and were dropped.
    pub fn take_gtpu_signals(&mut self, out: &mut Vec<crate::PeerSignal>) -> u64 {
        self.gtpu.signals.take(out)
    }
}

impl<C: Clock> Pipeline<C> {
    /// The packets `gtpu-decap` left for encapsulation again
    /// ([`crate::session::n9`]): `decap-output` strips their outer
    /// headers, then the encapsulation nodes from `session-lookup` on
    /// send them to their peer. They leave decapsulation and enter
    /// encapsulation in the counters, as a packet through the TUN would.
    pub(super) fn reencap(&mut self, pool: &mut Pool, sink: &mut Sink<'_>) {
        let Some(upf) = self.upf.as_mut().filter(|u| !u.reencap.is_empty()) else {
            return;
        };
        let mut v = core::mem::take(&mut upf.reencap);
        let (table, checksums) = (&self.table, self.options.inner_checksums);
        self.runtime.run(Node::DecapOutput, v.len(), |s| {
            crate::decap::decap_output(s, pool, &mut v, table, checksums)
        });
        self.counters.decap_out += v.len() as u64;
        self.counters.encap_in += v.len() as u64;
        self.encap_flush_from(super::Front::Sessions, pool, &mut v, sink);
        v.clear();
        if let Some(u) = self.upf.as_mut() {
            u.reencap = v;
        }
    }
}
