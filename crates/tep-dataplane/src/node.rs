//! The nodes of the graph, each declared once, their counters, the
//! driver every node function runs under, and the `show runtime` report,
//! after VPP: each node is one function over a vector, and its cost is
//! visible per packet.

use crate::buffer::{PacketId, Pool};
use crate::clock::Clock;
use crate::drop::{DropCounts, DropReason};
use crate::kind::TunnelKind;
use crate::vector::PacketVector;
use core::fmt::Write;

tep_named::named_enum! {
    /// A node of the encap or decap graph.
    pub enum Node {
        /// Encap: TSO super-packets cut into segments.
        GsoSegment => "gso-segment",
        /// Encap, overlay (gateway mode): the network of a frame by its
        /// 802.1Q VLAN, the tag popped.
        VlanInput => "vlan-input",
        /// Encap, UPF (gateway mode): the ARP of data networks with a
        /// router of their own, answered and learned from.
        DnArp => "dn-arp",
        /// Encap: parses the inner packet (offsets, flow hash).
        EncapClassify => "encap-classify",
        /// Encap: the tunnel by inner MAC or destination prefix.
        TunnelLookup => "tunnel-lookup",
        /// Encap, overlay: ARP requests and Neighbor Solicitations for known
        /// addresses answered locally; announcements learned.
        NeighSuppress => "neigh-suppress",
        /// Encap, overlay: the remote VTEP of a network's packet (FDB,
        /// flood list, routes); local source MACs learned.
        FdbLookup => "fdb-lookup",
        /// Encap, UPF: the session of a packet to a UE (downlink), and its
        /// FAR's action: forward, drop, or buffer.
        SessionLookup => "session-lookup",
        /// Encap: completes a partial inner checksum unless RCO carries it.
        InnerChecksum => "inner-checksum",
        /// Encap: the VXLAN header.
        VxlanEncap => "vxlan-encap",
        /// Encap: the Geneve header.
        GeneveEncap => "geneve-encap",
        /// Encap: the GTP-U header.
        GtpuEncap => "gtpu-encap",
        /// Encap: the GRE header of GRE-in-UDP.
        GreEncap => "gre-encap",
        /// Encap: the GUE header.
        GueEncap => "gue-encap",
        /// Encap: FOU of IPv4 (no header).
        FouIpipEncap => "fou-ipip-encap",
        /// Encap: FOU of IPv6 (no header).
        FouSitEncap => "fou-sit-encap",
        /// Encap: the GRE header of FOU-GRE.
        FouGreEncap => "fou-gre-encap",
        /// Encap: the GUE and GRE headers of GUE-GRE.
        GueGreEncap => "gue-gre-encap",
        /// Encap: the outer IP and UDP fields (and headers, where tep writes
        /// them).
        IpUdpEncap => "ip-udp-encap",
        /// Encap: the outer UDP checksum by the tunnel's mode.
        UdpChecksum => "udp-checksum",
        /// Encap, whole frames: the TTL of an IP packet routed into a
        /// tunnel, as a router forwards it.
        IpForward => "ip-forward",
        /// Encap, overlay: a flooded frame's copies to the rest of its flood
        /// list.
        Flood => "flood",
        /// Encap, whole frames: the outer Ethernet header to the next hop.
        EthernetEncap => "ethernet-encap",
        /// Decap, whole frames: the outer Ethernet header (and VLAN tags)
        /// stripped.
        EthernetInput => "ethernet-input",
        /// Decap: the outer IP header.
        IpInput => "ip-input",
        /// Decap: the outer UDP header; the port picks the kind.
        UdpInput => "udp-input",
        /// Decap: the VXLAN header.
        VxlanDecap => "vxlan-decap",
        /// Decap: the Geneve header.
        GeneveDecap => "geneve-decap",
        /// Decap: the GTP-U header (and the replies it draws).
        GtpuDecap => "gtpu-decap",
        /// Decap: the GRE header of GRE-in-UDP.
        GreDecap => "gre-decap",
        /// Decap: the GUE header.
        GueDecap => "gue-decap",
        /// Decap: FOU of IPv4.
        FouIpipDecap => "fou-ipip-decap",
        /// Decap: FOU of IPv6.
        FouSitDecap => "fou-sit-decap",
        /// Decap: the GRE header of FOU-GRE.
        FouGreDecap => "fou-gre-decap",
        /// Decap: the GUE and GRE headers of GUE-GRE.
        GueGreDecap => "gue-gre-decap",
        /// Decap: the outer UDP checksum, and what its sum says of the inner
        /// one.
        UdpChecksumVerify => "udp-checksum-verify",
        /// Decap, overlay: source MACs learned behind their VTEP.
        FdbLearn => "fdb-learn",
        /// Decap: strips the outer headers, RFC 6040 ECN, the inner checksum
        /// settled for the sink.
        DecapOutput => "decap-output",
        /// Decap: coalesces inner TCP/UDP flows.
        Gro => "gro",
        /// Decap, whole frames: an inner IP packet forwarded as a router
        /// does (TTL), with the Ethernet header to its next hop.
        IpRewrite => "ip-rewrite",
        /// Overlay (gateway mode): a network's 802.1Q tag pushed on its
        /// frames to the inner interface.
        VlanOutput => "vlan-output",
        /// Encap: runs of datagrams become UDP GSO trains.
        UdpTrain => "udp-train",
        /// Decap: a UDP GRO train cut into its datagrams.
        UdpTrainSplit => "udp-train-split",
        /// Decap: the datagrams of a UDP GRO train merged where they lie.
        TrainMerge => "train-merge",
    }
}

impl Node {
    /// The `<kind>-encap` node.
    pub const fn encap(kind: TunnelKind) -> Node {
        match kind {
            TunnelKind::Vxlan => Node::VxlanEncap,
            TunnelKind::Geneve => Node::GeneveEncap,
            TunnelKind::Gtpu => Node::GtpuEncap,
            TunnelKind::GreInUdp => Node::GreEncap,
            TunnelKind::Gue => Node::GueEncap,
            TunnelKind::FouIpip => Node::FouIpipEncap,
            TunnelKind::FouSit => Node::FouSitEncap,
            TunnelKind::FouGre => Node::FouGreEncap,
            TunnelKind::GueGre => Node::GueGreEncap,
        }
    }

    /// The `<kind>-decap` node.
    pub const fn decap(kind: TunnelKind) -> Node {
        match kind {
            TunnelKind::Vxlan => Node::VxlanDecap,
            TunnelKind::Geneve => Node::GeneveDecap,
            TunnelKind::Gtpu => Node::GtpuDecap,
            TunnelKind::GreInUdp => Node::GreDecap,
            TunnelKind::Gue => Node::GueDecap,
            TunnelKind::FouIpip => Node::FouIpipDecap,
            TunnelKind::FouSit => Node::FouSitDecap,
            TunnelKind::FouGre => Node::FouGreDecap,
            TunnelKind::GueGre => Node::GueGreDecap,
        }
    }
}

/// Tunnels whose drops are counted per tunnel: far more than a config
/// holds (per-tunnel rows grow to the highest index seen).
const MAX_COUNTED_TUNNELS: u32 = 1 << 20;

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
    pub drops: DropCounts,
    /// The same drops for packets that had a tunnel when they were dropped:
    /// one row per tunnel index (grown on the first such drop, so a node
    /// that never drops one holds nothing).
    pub by_tunnel: Vec<DropCounts>,
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
            drops: DropCounts::ZERO,
            by_tunnel: Vec::new(),
        }
    }

    /// Counts one dropped packet.
    #[inline]
    pub fn drop(&mut self, reason: DropReason) {
        self.drops[reason] += 1;
    }

    /// Counts a drop of a packet of tunnel `tunnel` (an index of the
    /// config's tunnels; [`NO_TUNNEL`] before the lookup found one).
    ///
    /// [`NO_TUNNEL`]: crate::buffer::NO_TUNNEL
    pub fn drop_in(&mut self, reason: DropReason, tunnel: u32) {
        self.drop(reason);
        // Rows are allocated up to the index: one that no config reaches
        // (NO_TUNNEL, a node's marker left on a packet) must not size them.
        if tunnel >= MAX_COUNTED_TUNNELS {
            return;
        }
        let t = tunnel as usize;
        if self.by_tunnel.len() <= t {
            self.by_tunnel.resize(t + 1, DropCounts::ZERO);
        }
        self.by_tunnel[t][reason] += 1;
    }

    /// All drops of this node.
    pub fn drops_total(&self) -> u64 {
        self.drops.total()
    }

    /// The drops by reason, skipping zeros.
    pub fn drops_by_reason(&self) -> impl Iterator<Item = (DropReason, u64)> + '_ {
        self.drops.nonzero()
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

/// The nodes of one worker, with the clock they are timed by: the
/// counters of every [`Node`], in [`Node::ALL`] order.
#[derive(Debug)]
pub struct Runtime<C: Clock> {
    clock: C,
    nodes: Vec<NodeStats>,
}

impl<C: Clock> Runtime<C> {
    /// Zeroed counters for every node, timed by `clock`.
    pub fn new(clock: C) -> Runtime<C> {
        Runtime {
            clock,
            nodes: Node::ALL.iter().map(|n| NodeStats::new(n.name())).collect(),
        }
    }

    /// Runs one node function over a vector of `packets` packets, timing
    /// it and counting the call. The function gets the node's counters to
    /// record its drops.
    #[inline]
    pub fn run<R>(&mut self, node: Node, packets: usize, f: impl FnOnce(&mut NodeStats) -> R) -> R {
        let start = self.clock.now();
        let stats = &mut self.nodes[node as usize];
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

    /// Counts `n` drops for `reason` on `node`, outside a node's run.
    pub(crate) fn drop_many(&mut self, node: Node, reason: DropReason, n: u64) {
        self.nodes[node as usize].drops[reason] += n;
    }

    /// The counters of one node.
    pub fn stats(&self, node: Node) -> &NodeStats {
        &self.nodes[node as usize]
    }

    /// Every node's counters, in [`Node::ALL`] order.
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

/// Runs a node's per-packet step over `v`: a packet the step refuses is
/// marked with its reason and then swept out. The vector is walked again
/// only when some packet was refused (a scan per node and vector cost ~10
/// instructions per packet, for nothing in the common case).
pub(crate) fn each(
    stats: &mut NodeStats,
    pool: &mut Pool,
    v: &mut PacketVector,
    mut step: impl FnMut(&mut Pool, PacketId) -> Result<(), DropReason>,
) {
    let mut refused = false;
    for &id in v.as_slice() {
        if let Err(r) = step(pool, id) {
            pool.meta_mut(id).drop = Some(r);
            refused = true;
        }
    }
    if refused {
        remove_dropped(stats, pool, v);
    }
}

/// Removes the packets a node marked dropped: counts each by its reason on
/// the node and returns its buffer to the pool.
pub(crate) fn sweep(stats: &mut NodeStats, pool: &mut Pool, v: &mut PacketVector) {
    let mut any = false;
    for &id in v.as_slice() {
        any |= pool.meta(id).drop.is_some();
    }
    if any {
        remove_dropped(stats, pool, v);
    }
}

fn remove_dropped(stats: &mut NodeStats, pool: &mut Pool, v: &mut PacketVector) {
    let dropped = v.split_off_where(|id| pool.meta(id).drop.is_some());
    for &id in dropped.as_slice() {
        let m = pool.meta(id);
        if let Some(r) = m.drop {
            stats.drop_in(r, m.tunnel);
        }
        pool.free(id);
    }
}

/// Drops by tunnel and reason over `nodes`: one row per tunnel index, for
/// `tunnels` tunnels.
pub fn tunnel_drops(nodes: &[NodeStats], tunnels: usize) -> Vec<DropCounts> {
    let mut rows = vec![DropCounts::ZERO; tunnels];
    for n in nodes {
        for (row, by) in rows.iter_mut().zip(&n.by_tunnel) {
            row.add(by);
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

    /// A drop under an index no config reaches (a marker a node left on a
    /// packet) is counted for the node but sizes no per-tunnel rows: the
    /// held-packet marker once asked for 10^12 bytes of them.
    #[test]
    fn a_marker_tunnel_index_allocates_no_rows() {
        let mut n = NodeStats::new("session-lookup");
        n.drop_in(DropReason::NoRoute, u32::MAX - 2);
        n.drop_in(DropReason::NoRoute, crate::buffer::NO_TUNNEL);
        assert!(n.by_tunnel.is_empty());
        n.drop_in(DropReason::NoRoute, 2);
        assert_eq!(n.by_tunnel.len(), 3);
        assert_eq!(n.drops_total(), 3);
    }

    #[test]
    fn counts_calls_vectors_packets_ticks_and_drops() {
        let mut rt = Runtime::new(ManualClock::default());
        let decap = Node::VxlanDecap;
        let lookup = Node::TunnelLookup;
        for _ in 0..3 {
            rt.run(decap, 256, |s| {
                s.drop(DropReason::BadChecksum);
            });
        }
        rt.run(lookup, 256, |_| ());
        rt.run(decap, 0, |_| ());
        let d = rt.stats(decap);
        assert_eq!((d.calls, d.vectors, d.packets), (4, 3, 768));
        assert_eq!(d.drops[DropReason::BadChecksum], 3);
        assert_eq!(d.drops_total(), 3);
        assert_eq!(d.packets_per_call(), 192.0);
        let report = rt.report();
        assert!(report.contains("vxlan-decap") && report.contains("tunnel-lookup"));
        assert!(report.contains("drop bad_checksum"));
        assert!(!rt.report().contains("gtpu-encap"), "never called");
        assert!(report.lines().next().unwrap().contains("ticks/pkt"));
    }

    #[test]
    fn every_node_is_named_once_and_each_kind_has_its_two() {
        let mut seen = std::collections::HashSet::new();
        for (i, n) in Node::ALL.iter().enumerate() {
            assert_eq!(*n as usize, i);
            assert!(seen.insert(n.name()), "{} twice", n.name());
        }
        for k in TunnelKind::ALL {
            assert_eq!(Node::encap(k).name(), format!("{}-encap", k.name()));
            assert_eq!(Node::decap(k).name(), format!("{}-decap", k.name()));
        }
    }

    #[test]
    fn ticks_are_measured_around_the_node_function() {
        let mut rt = Runtime::new(ManualClock::default());
        let n = Node::GtpuEncap;
        rt.run(n, 100, |_| ());
        assert_eq!(
            rt.stats(n).ticks,
            0,
            "a clock that does not move costs nothing"
        );
        let mut rt = Runtime::new(AdvancingClock::default());
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
