//! Per-node counters and the `show runtime` report, after VPP: each node is
//! one function over a vector, and its cost is visible per packet.

use crate::clock::Clock;
use crate::drop::DropReason;
use core::fmt::Write;

/// The counters of one node on one worker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeStats {
    /// The node's name (`vxlan-encap`, `ip4-lookup`, …).
    pub name: &'static str,
    /// Times the node function ran.
    pub calls: u64,
    /// Non-empty vectors it processed.
    pub vectors: u64,
    /// Packets it was given.
    pub packets: u64,
    /// Clock ticks spent inside it.
    pub ticks: u64,
    /// Packets it dropped, by reason ([`DropReason`] as index).
    pub drops: [u64; DropReason::COUNT],
    /// The same drops for packets that had a tunnel when they were dropped:
    /// one row per tunnel index (grown on the first such drop, so a node
    /// that never drops one holds nothing).
    pub by_tunnel: Vec<[u64; DropReason::COUNT]>,
}

impl NodeStats {
    /// Zeroed counters for a node.
    pub const fn new(name: &'static str) -> NodeStats {
        NodeStats {
            name,
            calls: 0,
            vectors: 0,
            packets: 0,
            ticks: 0,
            drops: [0; DropReason::COUNT],
            by_tunnel: Vec::new(),
        }
    }

    /// Counts one dropped packet.
    #[inline]
    pub fn drop(&mut self, reason: DropReason) {
        self.drops[reason as usize] += 1;
    }

    /// Counts a drop of a packet of tunnel `tunnel` (an index of the
    /// config's tunnels; [`NO_TUNNEL`] before the lookup found one).
    ///
    /// [`NO_TUNNEL`]: crate::buffer::NO_TUNNEL
    pub fn drop_in(&mut self, reason: DropReason, tunnel: u32) {
        self.drop(reason);
        if tunnel == crate::buffer::NO_TUNNEL {
            return;
        }
        let t = tunnel as usize;
        if self.by_tunnel.len() <= t {
            self.by_tunnel.resize(t + 1, [0; DropReason::COUNT]);
        }
        self.by_tunnel[t][reason as usize] += 1;
    }

    /// All drops of this node.
    pub fn drops_total(&self) -> u64 {
        self.drops.iter().sum()
    }

    /// The drops by reason, skipping zeros.
    pub fn drops_by_reason(&self) -> impl Iterator<Item = (DropReason, u64)> + '_ {
        DropReason::ALL
            .iter()
            .map(|&r| (r, self.drops[r as usize]))
            .filter(|&(_, n)| n > 0)
    }

    /// Ticks per packet (0 before any packet).
    pub fn ticks_per_packet(&self) -> f64 {
        if self.packets == 0 {
            0.0
        } else {
            self.ticks as f64 / self.packets as f64
        }
    }

    /// Packets per call: VPP's "vectors/call", the mean vector size.
    pub fn packets_per_call(&self) -> f64 {
        if self.calls == 0 {
            0.0
        } else {
            self.packets as f64 / self.calls as f64
        }
    }
}

/// The nodes of one worker, with the clock they are timed by.
#[derive(Debug)]
pub struct Runtime<C: Clock> {
    clock: C,
    nodes: Vec<NodeStats>,
}

/// A node's place in its [`Runtime`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeIndex(usize);

impl<C: Clock> Runtime<C> {
    /// An empty runtime timed by `clock`.
    pub fn new(clock: C) -> Runtime<C> {
        Runtime {
            clock,
            nodes: Vec::new(),
        }
    }

    /// Registers a node (at set-up, not per packet).
    pub fn register(&mut self, name: &'static str) -> NodeIndex {
        self.nodes.push(NodeStats::new(name));
        NodeIndex(self.nodes.len() - 1)
    }

    /// Runs one node function over a vector of `packets` packets, timing
    /// it and counting the call. The function gets the node's counters to
    /// record its drops.
    #[inline]
    pub fn run<R>(
        &mut self,
        node: NodeIndex,
        packets: usize,
        f: impl FnOnce(&mut NodeStats) -> R,
    ) -> R {
        let start = self.clock.now();
        let stats = &mut self.nodes[node.0];
        let r = f(stats);
        let end = self.clock.now();
        stats.calls += 1;
        if packets > 0 {
            stats.vectors += 1;
        }
        stats.packets += packets as u64;
        stats.ticks += end.saturating_sub(start);
        r
    }

    /// The counters of one node.
    pub fn stats(&self, node: NodeIndex) -> &NodeStats {
        &self.nodes[node.0]
    }

    /// Every node's counters, in registration order.
    pub fn nodes(&self) -> &[NodeStats] {
        &self.nodes
    }

    /// The clock.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// The `show runtime` table: node, calls, vectors, packets, ticks per
    /// packet, packets per call, drops. Nodes never called are left out,
    /// as VPP does.
    pub fn report(&self) -> String {
        render_report(&self.nodes, self.clock.unit())
    }
}

/// Drops by tunnel and reason over `nodes`: one row per tunnel index, for
/// `tunnels` tunnels.
pub fn tunnel_drops(nodes: &[NodeStats], tunnels: usize) -> Vec<[u64; DropReason::COUNT]> {
    let mut rows = vec![[0u64; DropReason::COUNT]; tunnels];
    for n in nodes {
        for (row, by) in rows.iter_mut().zip(&n.by_tunnel) {
            for (a, b) in row.iter_mut().zip(by) {
                *a += b;
            }
        }
    }
    rows
}

/// The `show runtime` table of `nodes` (one worker's, or several workers'
/// summed), costs in `unit` per packet.
pub fn render_report(nodes: &[NodeStats], unit: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<24} {:>10} {:>10} {:>12} {:>12} {:>12} {:>10}",
        "Name",
        "Calls",
        "Vectors",
        "Packets",
        format!("{unit}/pkt"),
        "Vectors/Call",
        "Drops"
    );
    for n in nodes.iter().filter(|n| n.calls > 0) {
        let _ = writeln!(
            out,
            "{:<24} {:>10} {:>10} {:>12} {:>12.2} {:>12.2} {:>10}",
            n.name,
            n.calls,
            n.vectors,
            n.packets,
            n.ticks_per_packet(),
            n.packets_per_call(),
            n.drops_total()
        );
        for (r, count) in n.drops_by_reason() {
            let _ = writeln!(out, "  drop {:<30} {:>10}", r.name(), count);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    #[test]
    fn counts_calls_vectors_packets_ticks_and_drops() {
        let mut rt = Runtime::new(ManualClock::default());
        let decap = rt.register("vxlan-decap");
        let lookup = rt.register("tunnel-lookup");
        for _ in 0..3 {
            rt.run(decap, 256, |s| {
                s.drop(DropReason::BadChecksum);
            });
        }
        rt.run(lookup, 256, |_| ());
        rt.run(decap, 0, |_| ());
        let d = rt.stats(decap);
        assert_eq!((d.calls, d.vectors, d.packets), (4, 3, 768));
        assert_eq!(d.drops[DropReason::BadChecksum as usize], 3);
        assert_eq!(d.drops_total(), 3);
        assert_eq!(d.packets_per_call(), 192.0);
        let report = rt.report();
        assert!(report.contains("vxlan-decap") && report.contains("tunnel-lookup"));
        assert!(report.contains("drop bad_checksum"));
        rt.register("never-called");
        assert!(!rt.report().contains("never-called"));
        assert!(report.lines().next().unwrap().contains("ticks/pkt"));
    }

    #[test]
    fn ticks_are_measured_around_the_node_function() {
        let mut rt = Runtime::new(ManualClock::default());
        let n = rt.register("gtpu-encap");
        rt.run(n, 100, |_| ());
        assert_eq!(
            rt.stats(n).ticks,
            0,
            "a clock that does not move costs nothing"
        );
        let mut rt = Runtime::new(AdvancingClock::default());
        let n = rt.register("gtpu-encap");
        rt.run(n, 100, |_| ());
        assert_eq!(rt.stats(n).ticks, 250, "one now() before, one after");
        assert_eq!(rt.stats(n).ticks_per_packet(), 2.5);
    }

    /// A clock that moves 250 ticks every time it is read.
    #[derive(Default)]
    struct AdvancingClock(core::cell::Cell<u64>);

    impl Clock for AdvancingClock {
        fn now(&self) -> u64 {
            let t = self.0.get();
            self.0.set(t + 250);
            t
        }
        fn unit(&self) -> &'static str {
            "ticks"
        }
    }
}
