//! What workers publish and `tep show` / the metrics endpoint read: one
//! snapshot per worker, merged on demand.

use serde::Serialize;
use tep_dataplane::{tunnel_drops, Counters, DropCounts, DropReason, NodeStats};

/// Traffic of one tunnel on one worker.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TunnelTraffic {
    /// Outer datagrams sent (a GSO train counts as its datagrams).
    pub tx_packets: u64,
    /// UDP payload bytes sent (tunnel header + inner packet).
    pub tx_bytes: u64,
    /// Inner packets delivered to the TUN/TAP (a GRO super-packet counts as
    /// the packets it holds).
    pub rx_packets: u64,
    /// Inner bytes delivered.
    pub rx_bytes: u64,
    /// Packets of this tunnel the pipeline dropped, by reason (indexed by
    /// `DropReason as usize`): those dropped once their tunnel was known.
    #[serde(skip)]
    pub drops: DropCounts,
}

impl TunnelTraffic {
    fn add(&mut self, o: &TunnelTraffic) {
        self.tx_packets += o.tx_packets;
        self.tx_bytes += o.tx_bytes;
        self.rx_packets += o.rx_packets;
        self.rx_bytes += o.rx_bytes;
        self.drops.add(&o.drops);
    }

    /// Drops by reason, non-zero only.
    pub fn drops_by_reason(&self) -> impl Iterator<Item = (DropReason, u64)> + '_ {
        self.drops.nonzero()
    }
}

tep_named::named_enum! {
    /// What the I/O layer around the pipeline counts besides its drops.
    pub enum IoEvent {
        /// Packets read from the TUN/TAP.
        DeviceRx => "device_rx",
        /// Of those, super-packets (TSO/USO): segmented by tep.
        DeviceRxSuper => "device_rx_super",
        /// Packets written to the TUN/TAP.
        DeviceTx => "device_tx",
        /// Of those, super-packets (GRO): segmented, if at all, by the
        /// kernel.
        DeviceTxSuper => "device_tx_super",
        /// Buffers (datagrams or GRO trains) received from UDP sockets.
        UdpRx => "udp_rx",
        /// Of those, GRO trains of several datagrams.
        UdpRxTrains => "udp_rx_trains",
        /// Messages given to UDP sockets.
        UdpTx => "udp_tx",
        /// Of those, GSO trains of several datagrams.
        UdpTxTrains => "udp_tx_trains",
        /// `recvmmsg`/`sendmmsg` calls.
        UdpSyscalls => "udp_syscalls",
        /// Frames written into the uplink TAP (`host.uplink`).
        UplinkTx => "uplink_tx",
        /// Of those, super-packets the kernel segments (UDP-tunnel GSO).
        UplinkTxSuper => "uplink_tx_super",
        /// Gateway: frames received from the underlay's AF_XDP sockets.
        UnderlayRx => "underlay_rx",
        /// Frames put on the underlay's transmit rings.
        UnderlayTx => "underlay_tx",
        /// Frames received from the inner interface's AF_XDP sockets.
        InnerRx => "inner_rx",
        /// Frames put on the inner interface's transmit rings.
        InnerTx => "inner_tx",
        /// IP packets handed to the kernel's stack (a next hop tep has no
        /// MAC for yet: the kernel resolves it and delivers the packet).
        KernelTx => "kernel_tx",
        /// Wake-ups the rings asked for (need_wakeup: a `sendto` to make
        /// the kernel transmit, a `recvfrom` to refill).
        XskWakeups => "xsk_wakeups",
        /// Frames received in several descriptors (AF_XDP multi-buffer,
        /// longer than a chunk): their later parts copied behind the
        /// first, into one buffer.
        XskRxChained => "xsk_rx_chained",
        /// Frames sent as several descriptors, one per chunk of their
        /// buffer (no copy).
        XskTxChained => "xsk_tx_chained",
        /// Outer UDP checksums of `offload` tunnels computed in software:
        /// the device takes no checksum request through AF_XDP.
        ChecksumInSoftware => "checksum_in_software",
        /// The kernel's counts for the AF_XDP sockets (XDP_STATISTICS,
        /// since the worker started): frames for tep dropped before tep
        /// saw them for want of a buffer (no frame on the fill ring among
        /// them).
        XskRxDropped => "xsk_rx_dropped",
        /// Frames dropped because a receive ring was full (not in
        /// `xsk_rx_dropped`).
        XskRxRingFull => "xsk_rx_ring_full",
        /// Times the kernel found a fill ring empty.
        XskFillRingEmpty => "xsk_fill_ring_empty",
        /// Invalid descriptors tep put on a fill ring.
        XskRxInvalid => "xsk_rx_invalid",
        /// Invalid descriptors tep put on a transmit ring.
        XskTxInvalid => "xsk_tx_invalid",
        /// Times a worker slept waiting for work: each ends in a wake-up
        /// that the packet which ends it waits for (polling spares them;
        /// see `adaptive_poll_us`).
        Sleeps => "sleeps",
        /// Gateway: rounds of the worker loop (a round tends the rings
        /// and moves at most a vector each way).
        Rounds => "rounds",
        /// Of those, rounds that moved frames.
        BusyRounds => "busy_rounds",
        /// Vectors read from the receive rings (a read of at least one
        /// frame): the frames received over this are the frames per vector.
        Vectors => "vectors",
        /// Nanoseconds from the start of a busy round to the start of the
        /// next: the worker's time at work (the rest it polled or slept).
        BusyNs => "busy_ns",
        /// Times more than 1 ms passed between the starts of two rounds
        /// with no sleep between: the CPU was taken from the worker (or
        /// one round took that long).
        LoopStalls => "loop_stalls",
    }
}

/// Which run mode's I/O a set of counters is about: each shows its own
/// events and drops.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IoMode {
    /// TUN/TAP and UDP sockets.
    #[default]
    Host,
    /// AF_XDP on two interfaces.
    Gateway,
}

impl IoMode {
    /// The events this mode counts.
    pub fn events(self) -> &'static [IoEvent] {
        use IoEvent::*;
        match self {
            IoMode::Host => &[
                DeviceRx,
                DeviceRxSuper,
                DeviceTx,
                DeviceTxSuper,
                UdpRx,
                UdpRxTrains,
                UdpTx,
                UdpTxTrains,
                UdpSyscalls,
                UplinkTx,
                UplinkTxSuper,
                Sleeps,
            ],
            IoMode::Gateway => &[
                UnderlayRx,
                UnderlayTx,
                InnerRx,
                InnerTx,
                KernelTx,
                XskWakeups,
                XskRxChained,
                XskTxChained,
                ChecksumInSoftware,
                XskRxDropped,
                XskRxRingFull,
                XskFillRingEmpty,
                XskRxInvalid,
                XskTxInvalid,
                Sleeps,
                Rounds,
                BusyRounds,
                Vectors,
                BusyNs,
                LoopStalls,
            ],
        }
    }

    /// The reasons this mode's I/O drops for.
    pub fn drops(self) -> &'static [DropReason] {
        match self {
            IoMode::Host => &[
                DropReason::BadVnetHeader,
                DropReason::NoBuffer,
                DropReason::SendFailed,
                DropReason::GsoRefused,
                DropReason::DeviceWrite,
                DropReason::NoDevice,
            ],
            IoMode::Gateway => &[
                DropReason::NoBuffer,
                DropReason::TxRingFull,
                DropReason::FrameTooLong,
                DropReason::SendFailed,
            ],
        }
    }
}

/// Events and drops of the I/O around the pipeline, each named. Drops here
/// are the host's own (the pipeline's are per node and reason).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IoCounters {
    mode: IoMode,
    events: [u64; IoEvent::COUNT],
    drops: DropCounts,
}

/// As a JSON object of [`IoCounters::named`]: the field names it always
/// had.
impl Serialize for IoCounters {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let named = self.named();
        let mut map = s.serialize_map(Some(named.len()))?;
        for (k, v) in &named {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl Default for IoCounters {
    fn default() -> IoCounters {
        IoCounters::new(IoMode::Host)
    }
}

impl IoCounters {
    /// Zero counters of `mode`'s I/O.
    pub fn new(mode: IoMode) -> IoCounters {
        IoCounters {
            mode,
            events: [0; IoEvent::COUNT],
            drops: DropCounts::ZERO,
        }
    }

    /// Counts `n` of event `e`.
    pub fn count(&mut self, e: IoEvent, n: u64) {
        self.events[e as usize] += n;
    }

    /// Sets event `e`'s count (for counts the kernel keeps, read whole).
    pub fn set(&mut self, e: IoEvent, n: u64) {
        self.events[e as usize] = n;
    }

    /// How many of event `e`.
    pub fn get(&self, e: IoEvent) -> u64 {
        self.events[e as usize]
    }

    /// Counts `n` packets dropped for `reason`.
    pub fn drop(&mut self, reason: DropReason, n: u64) {
        self.drops[reason] += n;
    }

    /// Every counter, named (the metrics and `show counters` use it): the
    /// events, then the drops as `drop_<reason>`.
    pub fn named(&self) -> Vec<(String, u64)> {
        let events = self
            .mode
            .events()
            .iter()
            .map(|&e| (e.name().to_string(), self.get(e)));
        let drops = self
            .mode
            .drops()
            .iter()
            .map(|&r| (format!("drop_{}", r.name()), self.drops[r]));
        events.chain(drops).collect()
    }

    fn add(&mut self, o: &IoCounters) {
        // Stopped workers' counts (carried over a reload) are of the same
        // daemon, so of the same mode; a sum starts from the defaults.
        if o.mode != IoMode::Host {
            self.mode = o.mode;
        }
        for (a, b) in self.events.iter_mut().zip(o.events) {
            *a += b;
        }
        self.drops.add(&o.drops);
    }

    /// Packets the host layer dropped.
    pub fn drops(&self) -> u64 {
        self.drops.total()
    }
}

/// One worker's counters at one moment.
#[derive(Clone, Debug, Default)]
pub struct WorkerSnapshot {
    /// The pipeline's nodes.
    pub nodes: Vec<NodeStats>,
    /// The pipeline's edge counters.
    pub counters: Counters,
    /// Per tunnel, in config order.
    pub tunnels: Vec<TunnelTraffic>,
    /// The I/O layer's.
    pub io: IoCounters,
    /// The control request this snapshot answers (see `Shared::refresh`).
    pub generation: u64,
    /// Gateway: the longest time between the starts of two rounds of the
    /// worker loop (no sleep between) since the previous control request
    /// asked for fresh snapshots, so that a bench reads it per case.
    pub longest_gap_ns: u64,
}

impl WorkerSnapshot {
    /// A worker's counters now. The nodes' per-tunnel drops move into the
    /// tunnels' rows: tunnels are matched by name across a reload, nodes
    /// by theirs, and a tunnel's index may change.
    pub fn new(
        nodes: &[NodeStats],
        counters: Counters,
        tunnels: &[TunnelTraffic],
        io: IoCounters,
        generation: u64,
    ) -> WorkerSnapshot {
        let rows = tunnel_drops(nodes, tunnels.len());
        let mut tunnels = tunnels.to_vec();
        for (t, row) in tunnels.iter_mut().zip(rows) {
            t.drops = row;
        }
        let nodes = nodes
            .iter()
            .map(|n| NodeStats {
                by_tunnel: Vec::new(),
                ..n.clone()
            })
            .collect();
        WorkerSnapshot {
            nodes,
            counters,
            tunnels,
            io,
            generation,
            longest_gap_ns: 0,
        }
    }
}

/// All workers' snapshots summed.
#[derive(Clone, Debug, Default)]
pub struct Totals {
    /// Nodes summed by position (every worker registers the same nodes).
    pub nodes: Vec<NodeStats>,
    /// Edge counters summed.
    pub counters: Counters,
    /// Per tunnel.
    pub tunnels: Vec<TunnelTraffic>,
    /// Host counters summed.
    pub io: IoCounters,
}

/// What the workers of earlier configs counted (they stop at a reload):
/// the running workers' counts are added to it, so that counters only
/// grow for the daemon's lifetime.
#[derive(Clone, Debug, Default)]
pub struct Carried {
    /// Summed over every stopped worker.
    pub totals: Totals,
    /// The tunnel name of each entry of `totals.tunnels`.
    pub tunnels: Vec<String>,
}

fn add_node(a: &mut NodeStats, b: &NodeStats) {
    a.calls += b.calls;
    a.vectors += b.vectors;
    a.packets += b.packets;
    a.ticks += b.ticks;
    a.drops.add(&b.drops);
}

fn add_counters(c: &mut Counters, d: &Counters) {
    c.encap_in += d.encap_in;
    c.encap_out += d.encap_out;
    c.segments_added += d.segments_added;
    c.decap_in += d.decap_in;
    c.decap_out += d.decap_out;
    c.coalesced += d.coalesced;
    c.answered += d.answered;
    c.generated += d.generated;
    c.to_kernel += d.to_kernel;
    c.icmp_errors += d.icmp_errors;
    c.icmp_suppressed += d.icmp_suppressed;
    c.gro_table_full += d.gro_table_full;
    c.error_indications_suppressed += d.error_indications_suppressed;
    c.flood_copies += d.flood_copies;
    c.suppressed += d.suppressed;
}

impl Totals {
    /// Sums `snapshots`.
    pub fn of(snapshots: &[WorkerSnapshot]) -> Totals {
        let mut t = Totals::default();
        for s in snapshots {
            if t.nodes.is_empty() {
                t.nodes = s.nodes.clone();
            } else {
                for (a, b) in t.nodes.iter_mut().zip(&s.nodes) {
                    add_node(a, b);
                }
            }
            add_counters(&mut t.counters, &s.counters);
            if t.tunnels.len() < s.tunnels.len() {
                t.tunnels.resize(s.tunnels.len(), TunnelTraffic::default());
            }
            for (a, b) in t.tunnels.iter_mut().zip(&s.tunnels) {
                a.add(b);
            }
            t.io.add(&s.io);
        }
        t
    }

    /// Sums `snapshots` on top of what stopped workers `carried`: nodes
    /// matched by name, tunnels by name against `tunnels` (the running
    /// config's, in order; a tunnel a reload removed is no longer shown).
    pub fn since_start(
        snapshots: &[WorkerSnapshot],
        carried: &Carried,
        tunnels: &[&str],
    ) -> Totals {
        let mut t = Totals::of(snapshots);
        for b in &carried.totals.nodes {
            match t.nodes.iter_mut().find(|a| a.name == b.name) {
                Some(a) => add_node(a, b),
                None => t.nodes.push(b.clone()),
            }
        }
        add_counters(&mut t.counters, &carried.totals.counters);
        t.io.add(&carried.totals.io);
        if t.tunnels.len() < tunnels.len() {
            t.tunnels.resize(tunnels.len(), TunnelTraffic::default());
        }
        for (a, name) in t.tunnels.iter_mut().zip(tunnels) {
            let before = carried.tunnels.iter().position(|n| n == name);
            if let Some(b) = before.and_then(|j| carried.totals.tunnels.get(j)) {
                a.add(b);
            }
        }
        t
    }

    /// The pipeline's edge counters, named.
    pub fn edges(&self) -> [(&'static str, u64); 15] {
        let c = &self.counters;
        [
            ("encap_in", c.encap_in),
            ("segments_added", c.segments_added),
            ("encap_out", c.encap_out),
            ("decap_in", c.decap_in),
            ("decap_out", c.decap_out),
            ("coalesced", c.coalesced),
            ("answered", c.answered),
            ("generated", c.generated),
            ("to_kernel", c.to_kernel),
            ("icmp_errors", c.icmp_errors),
            ("icmp_suppressed", c.icmp_suppressed),
            ("gro_table_full", c.gro_table_full),
            (
                "error_indications_suppressed",
                c.error_indications_suppressed,
            ),
            ("flood_copies", c.flood_copies),
            ("suppressed", c.suppressed),
        ]
    }

    /// Pipeline drops by (node, reason), non-zero only.
    pub fn drops(&self) -> Vec<(&'static str, DropReason, u64)> {
        let mut out = Vec::new();
        for n in &self.nodes {
            for (r, c) in n.drops_by_reason() {
                out.push((n.name, r, c));
            }
        }
        out
    }

    /// Pipeline drops by reason, over all nodes, non-zero only.
    pub fn drops_by_reason(&self) -> Vec<(DropReason, u64)> {
        let mut by = [0u64; DropReason::COUNT];
        for n in &self.nodes {
            for (r, c) in n.drops_by_reason() {
                by[r as usize] += c;
            }
        }
        DropReason::ALL
            .iter()
            .filter(|r| by[**r as usize] > 0)
            .map(|&r| (r, by[r as usize]))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_sum_workers() {
        let mut a = WorkerSnapshot {
            nodes: vec![NodeStats::new("ip-input")],
            tunnels: vec![TunnelTraffic {
                tx_packets: 1,
                ..Default::default()
            }],
            ..Default::default()
        };
        a.nodes[0].packets = 5;
        a.nodes[0].drops[DropReason::BadChecksum] = 2;
        a.io.count(IoEvent::UdpRx, 3);
        a.io.drop(DropReason::NoBuffer, 1);
        let mut b = a.clone();
        b.tunnels[0].rx_bytes = 100;
        let t = Totals::of(&[a, b]);
        assert_eq!(t.nodes[0].packets, 10);
        assert_eq!(t.drops_by_reason(), vec![(DropReason::BadChecksum, 4)]);
        assert_eq!(t.drops(), vec![("ip-input", DropReason::BadChecksum, 4)]);
        assert_eq!(t.tunnels[0].tx_packets, 2);
        assert_eq!(t.tunnels[0].rx_bytes, 100);
        assert_eq!((t.io.get(IoEvent::UdpRx), t.io.drops()), (6, 2));
    }

    /// A reload: the old workers' counts carry over, nodes by name,
    /// tunnels by name (one renamed away, one added, one reordered).
    #[test]
    fn counts_carry_over_a_reload() {
        let mut old = WorkerSnapshot {
            nodes: vec![NodeStats::new("ip-input"), NodeStats::new("gro")],
            tunnels: vec![
                TunnelTraffic {
                    tx_packets: 7,
                    drops: {
                        let mut d = DropCounts::ZERO;
                        d[DropReason::TooBig] = 2;
                        d
                    },
                    ..Default::default()
                },
                TunnelTraffic {
                    rx_packets: 9,
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        old.nodes[0].drops[DropReason::BadChecksum] = 3;
        old.nodes[1].packets = 4;
        old.counters.decap_in = 11;
        old.io.count(IoEvent::UdpRx, 5);
        let carried = Carried {
            totals: Totals::of(&[old]),
            tunnels: vec!["a".into(), "gone".into()],
        };
        let mut new = WorkerSnapshot {
            nodes: vec![NodeStats::new("ip-input")],
            tunnels: vec![TunnelTraffic::default(); 2],
            ..Default::default()
        };
        new.nodes[0].drops[DropReason::BadChecksum] = 1;
        new.tunnels[1].tx_packets = 1;
        new.counters.decap_in = 2;
        let t = Totals::since_start(&[new], &carried, &["b", "a"]);
        assert_eq!(t.drops_by_reason(), vec![(DropReason::BadChecksum, 4)]);
        assert_eq!(t.nodes.iter().find(|n| n.name == "gro").unwrap().packets, 4);
        assert_eq!(t.counters.decap_in, 13);
        assert_eq!(t.io.get(IoEvent::UdpRx), 5);
        assert_eq!(t.tunnels[0], TunnelTraffic::default(), "b is new");
        assert_eq!(t.tunnels[1].tx_packets, 8, "a: 7 before, 1 since");
        assert_eq!(
            t.tunnels[1].drops_by_reason().collect::<Vec<_>>(),
            vec![(DropReason::TooBig, 2)],
            "a's drops carried"
        );
        // Before the first worker publishes: what was carried.
        let t = Totals::since_start(&[], &carried, &["a"]);
        assert_eq!((t.tunnels[0].tx_packets, t.counters.decap_in), (7, 11));
    }
}
