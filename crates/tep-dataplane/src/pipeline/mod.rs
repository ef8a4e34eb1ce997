//! The pipeline: the encap and decap node graphs over one tunnel table,
//! with the runtime counters of every node. One per worker.

use crate::buffer::Pool;
use crate::clock::Clock;
use crate::config::{DataplaneConfig, TunnelConfig};
use crate::decap;
use crate::dn_arp::{DnRouters, DnWorker};
use crate::drop::DropReason;
use crate::encap::{self, HeaderTemplate, TxSelect, TxState};
use crate::geometry::InnerLink;
use crate::gro::Gro;
use crate::gso;
use crate::gtpu_reply::{GtpuResponder, Replies};
use crate::icmp_error::{IcmpErrors, RouterOptions};
use crate::io::{InnerChecksums, OuterLayers};
use crate::kind::TunnelKind;
use crate::nexthop::{self, NextHops};
use crate::node::{Node, Runtime};
use crate::overlay::nodes::{self as overlay_nodes, OverlayWorker};
use crate::overlay::vlan::{self, Vlans};
use crate::overlay::Overlay;
use crate::tunnel::TunnelTable;
use crate::udp_train;
use crate::vector::{PacketVector, VECTOR_SIZE};
use sessions::Upf;
use std::sync::Arc;
use trains::{Leftover, PendingTrain};

mod sessions;
mod trains;

/// Where a vector the pipeline hands its sink goes (VPP's next nodes of
/// the graph's last node).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    /// Decap: inner packets and frames, to the inner side (TUN/TAP, the
    /// inner interface).
    Inner,
    /// Encap: tunnel packets, to the underlay.
    Outer,
    /// Decap: outer packets back to peers (GTP-U Echo Responses, Error
    /// Indications), to the underlay.
    Reply,
    /// Packets whose next hop has no known MAC yet (where tep writes whole
    /// frames): for the I/O layer to hand to the kernel's stack, which
    /// resolves the neighbour and delivers them.
    Kernel,
}

/// Takes each vector the pipeline hands out, and its buffers.
pub type Sink<'a> = dyn FnMut(Output, &mut Pool, &mut PacketVector) + 'a;

/// Which way packets go through the pipeline: what `tep pcap` runs and
/// what the pipeline benchmark times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Inner packets in, outer packets out.
    Encap,
    /// Outer packets in, inner packets (and replies) out.
    Decap,
}

impl Direction {
    pub fn name(self) -> &'static str {
        match self {
            Direction::Encap => "encap",
            Direction::Decap => "decap",
        }
    }
}

/// How the pipeline is wired.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PipelineOptions {
    /// What the inner side gives the encap path.
    pub inner_link: InnerLink,
    /// Coalesce decapsulated inner TCP/UDP flows (GRO).
    pub gro: bool,
    /// Hand consecutive equal-size datagrams of one flow (the segments of
    /// a super-packet) to the sink as one UDP GSO train (`meta.gso` =
    /// `Udp`), for a socket that sends them with `UDP_SEGMENT`.
    pub udp_trains: bool,
    /// Which outer layers tep writes and parses. Both ways
    /// [`OuterLayers::EthernetIpUdp`] makes tep a router (gateway mode:
    /// TTLs, path MTU, ICMP errors).
    pub outer: OuterLayers,
    /// What encap writes when it differs from `outer`: host mode with an
    /// uplink receives UDP payloads from sockets ([`OuterLayers::UdpPayload`])
    /// and sends whole frames ([`OuterLayers::EthernetIpUdp`]) into a TAP.
    pub send: Option<OuterLayers>,
    /// The sinks write gathered (packets with a [`crate::buffer::Tail`]), so
    /// payloads are not copied between buffers. Encap: a super-packet's
    /// segments keep their payload in it (`gso::segment_gathered`).
    /// Decap: a UDP GRO train the kernel verified is decapsulated once and
    /// its datagrams merged into one inner super-packet where they lie
    /// (node `train-merge`, `gro::merge_train`). Off: segments and
    /// datagrams are copied into buffers of their own.
    pub gather: bool,
    /// What the decap sink does with inner checksums.
    pub inner_checksums: InnerChecksums,
    /// Tunnel GSO: a TCP super-packet is encapsulated whole, its inner
    /// checksum left partial and its outer UDP checksum the pseudo-header
    /// sum (or 0 for `zero` tunnels), for a device that segments UDP
    /// tunnels (a TAP with `TUN_F_UDP_TUNNEL_GSO`: the I/O layer writes it
    /// with [`crate::vnet::TunnelGsoHeader`]). Only where tep writes the
    /// outer headers, and only for tunnels whose header has no length
    /// field and no remote checksum offload (see
    /// [`crate::tunnel::TunnelTable::allows_tunnel_gso`]); the others'
    /// super-packets are segmented as usual.
    pub tunnel_gso: bool,
}

impl Default for PipelineOptions {
    /// IP on the inner side, no GRO.
    fn default() -> Self {
        PipelineOptions {
            inner_link: InnerLink::Ip,
            gro: false,
            udp_trains: false,
            outer: OuterLayers::IpUdp,
            send: None,
            gather: false,
            inner_checksums: InnerChecksums::AsFound,
            tunnel_gso: false,
        }
    }
}

/// Packet counts at the pipeline's edges. With the node drops they balance:
/// `encap_in + segments_added + flood_copies = encap_out + encap drops +
/// buffered + suppressed` and
/// `decap_in = decap_out + coalesced + answered + decap drops`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Inner packets given to `encap`.
    pub encap_in: u64,
    /// Outer packets handed to the sink (a UDP GSO train counts as the
    /// datagrams it holds).
    pub encap_out: u64,
    /// Extra packets GSO made (segments minus super-packets).
    pub segments_added: u64,
    /// UPF: downlink packets held for an idle UE (they go through encap
    /// again, counted in `encap_in` again, when released).
    pub buffered: u64,
    /// Outer packets given to `decap` (a UDP GRO train counts as the
    /// datagrams it holds once split).
    pub decap_in: u64,
    /// Inner packets handed to the sink.
    pub decap_out: u64,
    /// Inner packets GRO merged into others.
    pub coalesced: u64,
    /// Requests answered (their buffer became the reply).
    pub answered: u64,
    /// Packets generated (Error Indications).
    pub generated: u64,
    /// Packets handed to the kernel because their next hop was not known
    /// yet (whole frames; counted in `encap_out` / `decap_out` too).
    pub to_kernel: u64,
    /// ICMP errors sent (where tep forwards as a router: Time Exceeded,
    /// Fragmentation Needed / Packet Too Big). The packets they are about
    /// count as drops (`ttl_expired`, `too_big`); errors back into a
    /// tunnel count in `encap_in` too.
    pub icmp_errors: u64,
    /// ICMP errors not sent: about packets that must not be answered
    /// (errors, later fragments, group sources), over the rate, or no
    /// buffer free.
    pub icmp_suppressed: u64,
    /// Packets GRO could not start a flow for, its table (`GRO_FLOWS`
    /// per vector) being full: they pass uncoalesced.
    pub gro_table_full: u64,
    /// GTP-U Error Indications (and Supported Extension Headers
    /// Notifications) not sent: over `error_indication_rate`.
    pub error_indications_suppressed: u64,
    /// Overlay: copies made of flooded frames (one per remote VTEP after
    /// the first; counted in `encap_out` too).
    pub flood_copies: u64,
    /// Overlay: ARP requests and Neighbor Solicitations answered back to
    /// the local side (`neigh-suppress`).
    pub suppressed: u64,
}

/// The encap and decap paths of one worker.
#[derive(Debug)]
pub struct Pipeline<C: Clock> {
    table: TunnelTable,
    options: PipelineOptions,
    runtime: Runtime<C>,
    tx: Vec<TxState>,
    // Per tunnel, its index in `tx` (networks share).
    tx_of: Vec<u32>,
    templates: Vec<HeaderTemplate>,
    gtpu: GtpuResponder,
    by_kind: Box<[PacketVector; TunnelKind::COUNT]>,
    replies: Box<PacketVector>,
    // Taken out while `encap` segments into it (no allocation per call).
    work: Option<Box<PacketVector>>,
    gro: Box<Gro>,
    // Whole frames: the Ethernet header to each next hop, and the packets
    // whose next hop is not known yet.
    next_hops: NextHops,
    unresolved: Box<PacketVector>,
    // Router ICMP errors, and those going back out the side their packet
    // came in on.
    icmp: IcmpErrors,
    bounced: Box<PacketVector>,
    // Router ICMP errors about decapsulated packets, to go back into the
    // tunnel they came from (taken out while they go through encap).
    icmp_back: Option<Box<PacketVector>>,
    // Per tunnel: the outer bytes in front of its inner packet (or inner
    // frame, for L2 kinds), for the path MTU check; and the most of them.
    added: Vec<u32>,
    max_added: usize,
    // The time of the latest `decap` or `set_now`, for rate limits on the
    // encap path.
    now_ns: u64,
    counters: Counters,
    // A UPF worker's sessions.
    upf: Option<Box<Upf>>,
    // The overlay's networks, and the copies of flooded frames.
    overlay: Option<Box<OverlayWorker>>,
    copies: Option<Box<PacketVector>>,
    // Gateway mode's networks: 802.1Q VLANs on the inner side.
    vlans: Option<Box<Vlans>>,
    // A UPF's tagged data networks' own routers.
    dn: Option<Box<DnWorker>>,
}

impl<C: Clock> Pipeline<C> {
    /// A pipeline for validated tunnels
    /// ([`check_tunnels`](crate::config::check_tunnels)) and the
    /// `[dataplane]` settings, timed by `clock`.
    pub fn new(
        tunnels: &[TunnelConfig],
        dataplane: &DataplaneConfig,
        clock: C,
        options: PipelineOptions,
    ) -> Pipeline<C> {
        let runtime = Runtime::new(clock);
        Pipeline {
            table: TunnelTable::new(tunnels),
            options,
            runtime,
            tx: tunnels.iter().map(TxState::new).collect(),
            tx_of: encap::shared_tx(tunnels),
            templates: tunnels.iter().map(HeaderTemplate::new).collect(),
            gtpu: GtpuResponder::new(dataplane.restart_counter, dataplane.error_indication_rate),
            by_kind: Box::new(core::array::from_fn(|_| PacketVector::new())),
            replies: Box::new(PacketVector::new()),
            work: Some(Box::new(PacketVector::new())),
            gro: Box::new(Gro::new()),
            next_hops: NextHops::default(),
            unresolved: Box::new(PacketVector::new()),
            icmp: IcmpErrors::new(RouterOptions::default()),
            bounced: Box::new(PacketVector::new()),
            icmp_back: Some(Box::new(PacketVector::new())),
            added: tunnels
                .iter()
                .map(|t| encap::overhead(t) - if t.kind.carries_ethernet() { 14 } else { 0 })
                .collect(),
            // The outer IP header counts in its own length field, the rest
            // of the overhead with it (inner Ethernet included).
            max_added: tunnels
                .iter()
                .map(|t| encap::overhead(t) as usize)
                .max()
                .unwrap_or(0),
            now_ns: 0,
            counters: Counters::default(),
            upf: None,
            overlay: None,
            copies: Some(Box::new(PacketVector::new())),
            vlans: None,
            dn: None,
        }
    }

    /// Gives the pipeline the overlay of its networks (the daemon's one,
    /// shared by every worker).
    pub fn attach_overlay(&mut self, overlay: Arc<Overlay>) {
        self.overlay = Some(Box::new(OverlayWorker::new(overlay)));
    }

    /// [`encap_from`](Pipeline::encap_from) of packets from the device of
    /// one network (`tunnel`, a network's tunnel index): each is sent
    /// within that network.
    pub fn encap_into(
        &mut self,
        tunnel: u32,
        link: InnerLink,
        pool: &mut Pool,
        input: &mut PacketVector,
        sink: &mut Sink<'_>,
    ) {
        for &id in input.as_slice() {
            pool.meta_mut(id).tunnel = tunnel;
        }
        self.encap_from(link, pool, input, sink);
    }

    /// Maps the networks to 802.1Q VLANs on the inner side (gateway mode,
    /// [`encap_tagged`](Pipeline::encap_tagged)): their frames leave
    /// tagged. `data_networks`: a UPF's data networks' VLANs, by network
    /// index (`[[pfcp.network]] vlan`). False (nothing changed) where the
    /// tunnels have no L2 network and no data network is tagged.
    pub fn attach_vlans(&mut self, data_networks: &[Option<u16>]) -> bool {
        self.vlans = Vlans::new(self.table.tunnels(), data_networks).map(Box::new);
        self.vlans.is_some()
    }

    /// [`encap`](Pipeline::encap) of Ethernet frames from a trunk port:
    /// each frame goes into the network of its VLAN, the tag popped
    /// (node `vlan-input`); without [`attach_vlans`](Pipeline::attach_vlans)
    /// as `encap` does.
    pub fn encap_tagged(&mut self, pool: &mut Pool, input: &mut PacketVector, sink: &mut Sink<'_>) {
        if let Some(vlans) = self.vlans.as_deref() {
            let before = input.len();
            self.runtime.run(Node::VlanInput, input.len(), |s| {
                vlan::input(s, pool, input, vlans)
            });
            // Counted in as they were dropped; the rest in `encap_from`.
            self.counters.encap_in += (before - input.len()) as u64;
            if vlans.data_networks() {
                self.dn_arp(pool, input, sink);
                return self.encap_by_data_network(pool, input, sink);
            }
        }
        self.encap_from(InnerLink::Ethernet, pool, input, sink);
    }

    /// Gives a UPF's tagged data networks their own routers (gateway
    /// mode; the daemon's, shared by every worker): their uplink goes to
    /// them, and the ARP of their VLANs is tep's ([`crate::dn_arp`]).
    pub fn attach_dn_routers(&mut self, routers: Arc<DnRouters>) {
        self.dn = Some(Box::new(DnWorker::new(routers)));
    }

    /// Node `dn-arp` over frames from the trunk; answers go straight
    /// back out (they are no packets of a tunnel: not in `encap_in`).
    fn dn_arp(&mut self, pool: &mut Pool, input: &mut PacketVector, sink: &mut Sink<'_>) {
        let Some(dn) = self.dn.as_deref_mut() else {
            return;
        };
        let mut answers = PacketVector::new();
        let now_ns = self.now_ns;
        self.runtime.run(Node::DnArp, input.len(), |_| {
            dn.arp_input(pool, input, &mut answers, now_ns)
        });
        if !answers.is_empty() {
            sink(Output::Inner, pool, &mut answers);
        }
    }

    /// Between vectors (once a round): the ARP requests the data
    /// networks' routers are due (an unknown MAC packets waited for, or
    /// one to refresh), out to the inner side.
    pub fn resolve_dn_routers(&mut self, pool: &mut Pool, sink: &mut Sink<'_>) {
        let Some(dn) = self.dn.as_deref_mut() else {
            return;
        };
        let mut out = PacketVector::new();
        dn.resolve(pool, self.now_ns, &mut out);
        if !out.is_empty() {
            sink(Output::Inner, pool, &mut out);
        }
    }

    /// The frames of `input` through encap in vectors of one data network
    /// each (the one `vlan-input` marked): a session is looked up in its
    /// own network's UE addresses.
    fn encap_by_data_network(
        &mut self,
        pool: &mut Pool,
        input: &mut PacketVector,
        sink: &mut Sink<'_>,
    ) {
        let Some(before) = self.upf.as_ref().map(|u| u.table.network()) else {
            return self.encap_from(InnerLink::Ethernet, pool, input, sink);
        };
        while let Some(&first) = input.as_slice().first() {
            let network = pool.meta(first).network;
            let mut v = input.split_off_where(|id| pool.meta(id).network == network);
            self.set_network(network);
            self.encap_from(InnerLink::Ethernet, pool, &mut v, sink);
        }
        self.set_network(before);
    }

    /// The next hops tep writes whole frames to ([`OuterLayers::EthernetIpUdp`]):
    /// the I/O layer fills them, and drains the destinations the pipeline
    /// met without one ([`NextHops::take_wanted`]).
    pub fn next_hops(&mut self) -> &mut NextHops {
        &mut self.next_hops
    }

    /// How the pipeline acts as a router where it forwards whole frames:
    /// the path MTU it checks and the ICMP errors it sends.
    pub fn set_router(&mut self, options: RouterOptions) {
        self.icmp = IcmpErrors::new(options);
    }

    /// Tells the pipeline the time (any monotonic nanoseconds; `decap`
    /// does too), for the rate limits of the packets it generates.
    pub fn set_now(&mut self, now_ns: u64) {
        self.now_ns = now_ns;
    }

    /// The spare vector segmentation and train splitting fill (taken out
    /// while they do, so that no call allocates).
    fn take_work(&mut self) -> Box<PacketVector> {
        self.work
            .take()
            .unwrap_or_else(|| Box::new(PacketVector::new()))
    }

    /// Turns UDP GSO trains on or off (off for good once the socket's
    /// device turned out unable to segment them).
    pub fn set_udp_trains(&mut self, on: bool) {
        self.options.udp_trains = on;
    }

    /// The tunnel table.
    pub fn table(&self) -> &TunnelTable {
        &self.table
    }

    /// The per-node counters.
    pub fn runtime(&self) -> &Runtime<C> {
        &self.runtime
    }

    /// The edge counters.
    pub fn counters(&self) -> Counters {
        Counters {
            icmp_errors: self.icmp.sent,
            icmp_suppressed: self.icmp.suppressed,
            gro_table_full: self.gro.table_full,
            error_indications_suppressed: self.gtpu.suppressed,
            ..self.counters
        }
    }

    /// All drops of all nodes.
    pub fn drops_total(&self) -> u64 {
        self.runtime.nodes().iter().map(|n| n.drops_total()).sum()
    }

    /// Drops of one reason over all nodes.
    pub fn drops(&self, reason: DropReason) -> u64 {
        self.runtime.nodes().iter().map(|n| n.drops[reason]).sum()
    }

    /// Whether super-packet `id` goes through encap whole ([tunnel
    /// GSO](PipelineOptions::tunnel_gso)): TCP, every tunnel of the table
    /// able to, and small enough that the outer IP length still fits.
    fn whole(&self, pool: &Pool, id: crate::buffer::PacketId) -> bool {
        let m = pool.meta(id);
        matches!(
            m.gso.map(|g| g.kind),
            Some(crate::buffer::GsoKind::Tcp4 | crate::buffer::GsoKind::Tcp6)
        ) && m.tail.is_none()
            && self.table.allows_tunnel_gso()
            && pool.total_len(id) + self.max_added <= crate::geometry::MAX_IP_LEN
    }

    /// Encapsulates a vector of inner packets. Super-packets (`meta.gso`)
    /// are segmented first. The finished outer packets (as [`OuterLayers`]
    /// says: IP header at offset 0, or the UDP payload with the headers'
    /// fields in `meta.outer`) go to `sink`, which takes their buffers, in vectors of at
    /// most [`VECTOR_SIZE`]; `input` is left empty.
    pub fn encap(&mut self, pool: &mut Pool, input: &mut PacketVector, sink: &mut Sink<'_>) {
        let link = self.options.inner_link;
        self.encap_from(link, pool, input, sink);
    }

    /// [`encap`](Pipeline::encap) of packets from an inner side of the given
    /// link type: one pipeline serves both the TUN (IP) and the TAP
    /// (Ethernet) of a host.
    pub fn encap_from(
        &mut self,
        link: InnerLink,
        pool: &mut Pool,
        input: &mut PacketVector,
        sink: &mut Sink<'_>,
    ) {
        self.counters.encap_in += input.len() as u64;
        if !holds_super_packets(pool, input) {
            self.encap_flush(link, pool, input, sink);
            return;
        }
        let mut work = self.take_work();
        for &id in input.as_slice() {
            let whole = self.options.tunnel_gso && self.whole(pool, id);
            let need = match pool.meta(id).gso {
                _ if whole => 1,
                None => 1,
                Some(g) => pool
                    .data(id)
                    .len()
                    .div_ceil(usize::from(g.segment_size).max(1))
                    .min(VECTOR_SIZE),
            };
            if work.len() + need > VECTOR_SIZE {
                self.encap_flush(link, pool, &mut work, sink);
            }
            if whole || pool.meta(id).gso.is_none() {
                // Room was made above.
                work.put(pool, id);
                continue;
            }
            let added = &mut self.counters.segments_added;
            let gather = self.options.gather;
            self.runtime.run(Node::GsoSegment, 1, |s| {
                let cut = if gather {
                    gso::segment_gathered
                } else {
                    gso::segment
                };
                match cut(pool, id, &mut work, link) {
                    Ok(n) => *added += n as u64 - 1,
                    Err(r) => {
                        s.drop(r);
                        pool.free(id);
                    }
                }
            });
        }
        input.clear();
        self.encap_flush(link, pool, &mut work, sink);
        self.work = Some(work);
        self.count_vector_full(pool, Node::TunnelLookup);
    }

    /// Counts the packets a full vector dropped (a bug, see
    /// `PacketVector::put`) on `node`, the first of the path they were on.
    #[inline]
    fn count_vector_full(&mut self, pool: &mut Pool, node: Node) {
        let n = pool.take_vector_full();
        if n > 0 {
            self.runtime.drop_many(node, DropReason::VectorFull, n);
        }
    }

    fn encap_flush(
        &mut self,
        link: InnerLink,
        pool: &mut Pool,
        v: &mut PacketVector,
        sink: &mut Sink<'_>,
    ) {
        self.encap_flush_from(Front::Routed(link), pool, v, sink);
    }

    /// [`encap_flush`](Self::encap_flush) from `front`.
    fn encap_flush_from(
        &mut self,
        front: Front,
        pool: &mut Pool,
        v: &mut PacketVector,
        sink: &mut Sink<'_>,
    ) {
        self.encap_vector(front, pool, v);
        if self.overlay.as_ref().is_some_and(|o| o.flooding) {
            self.flood(pool, v, sink);
        }
        self.frame_outer(pool, v);
        self.counters.encap_out += v.len() as u64;
        if self.options.udp_trains && v.len() > 1 {
            let table = &self.table;
            self.runtime.run(Node::UdpTrain, v.len(), |_| {
                udp_train::make_trains(pool, v, table)
            });
        }
        self.counters.encap_out += self.unresolved.len() as u64;
        if !v.is_empty() {
            sink(Output::Outer, pool, v);
        }
        v.clear();
        if let Some(mut copies) = self.copies.take() {
            self.hand_copies(pool, &mut copies, sink);
            self.copies = Some(copies);
        }
        self.hand_bounced(pool, sink);
        self.hand_unresolved(pool, sink);
    }

    /// Node `flood` over the finished vector `v`: the copies of its flooded
    /// frames, left in `self.copies` for after `v` (handed to `sink`
    /// before only when they fill a vector).
    fn flood(&mut self, pool: &mut Pool, v: &mut PacketVector, sink: &mut Sink<'_>) {
        let Some(mut copies) = self.copies.take() else {
            return;
        };
        let mut at = (0, 1);
        while let Some(ow) = self.overlay.as_deref() {
            let table = &self.table;
            let (done, made) = self.runtime.run(Node::Flood, v.len(), |_| {
                overlay_nodes::flood(pool, v, ow, table, &mut copies, &mut at)
            });
            self.counters.flood_copies += made;
            if done {
                break;
            }
            self.hand_copies(pool, &mut copies, sink);
        }
        self.copies = Some(copies);
    }

    /// Frames and hands the copies of flooded frames to `sink`.
    fn hand_copies(&mut self, pool: &mut Pool, copies: &mut PacketVector, sink: &mut Sink<'_>) {
        if copies.is_empty() {
            return;
        }
        self.frame_outer(pool, copies);
        self.counters.encap_out += copies.len() as u64;
        if !copies.is_empty() {
            sink(Output::Outer, pool, copies);
        }
        copies.clear();
    }

    /// Node `ethernet-encap` where tep writes whole frames: the outer
    /// Ethernet header to each packet's next hop.
    fn frame_outer(&mut self, pool: &mut Pool, v: &mut PacketVector) {
        if self.options.send.unwrap_or(self.options.outer) != OuterLayers::EthernetIpUdp {
            return;
        }
        let select = TxSelect {
            table: &self.table,
            sessions: self.upf.as_deref().map(|u| &u.table),
            overlay: self.overlay.as_deref(),
            tx_of: &self.tx_of,
        };
        let (next_hops, unresolved) = (&mut self.next_hops, &mut self.unresolved);
        self.runtime.run(Node::EthernetEncap, v.len(), |_| {
            encap::ethernet_encap(pool, v, select, next_hops, unresolved)
        });
    }

    /// Hands the ICMP errors about packets from the inner side back to
    /// it. Those about bridged frames are framed already (back to the
    /// frame's source); those about routed packets are bare IP, framed
    /// here to their destination's next hop like any packet tep routes.
    fn hand_bounced(&mut self, pool: &mut Pool, sink: &mut Sink<'_>) {
        if self.bounced.is_empty() {
            return;
        }
        if self.options.outer == OuterLayers::EthernetIpUdp {
            let mut bare = self
                .bounced
                .split_off_where(|id| pool.meta(id).inner_l3 == 0);
            nexthop::frame(pool, &mut bare, &mut self.next_hops, &mut self.unresolved);
            for &id in bare.as_slice() {
                self.bounced.put(pool, id);
            }
        }
        if let Some(vlans) = self.vlans.as_deref() {
            let bounced = &mut self.bounced;
            self.runtime.run(Node::VlanOutput, bounced.len(), |s| {
                vlan::output(s, pool, bounced, vlans)
            });
        }
        if !self.bounced.is_empty() {
            sink(Output::Inner, pool, &mut self.bounced);
        }
        self.bounced.clear();
    }

    /// Hands the packets whose next hop was not known to the kernel.
    fn hand_unresolved(&mut self, pool: &mut Pool, sink: &mut Sink<'_>) {
        if !self.unresolved.is_empty() {
            self.counters.to_kernel += self.unresolved.len() as u64;
            sink(Output::Kernel, pool, &mut self.unresolved);
            self.unresolved.clear();
        }
    }

    fn encap_vector(&mut self, front: Front, pool: &mut Pool, v: &mut PacketVector) {
        let Pipeline {
            table,
            options,
            runtime,
            tx,
            templates,
            by_kind,
            icmp,
            bounced,
            added,
            now_ns,
            upf,
            counters,
            overlay,
            tx_of,
            ..
        } = self;
        let link = match front {
            Front::Routed(link) => link,
            Front::Sessions => InnerLink::Ip,
        };
        runtime.run(Node::EncapClassify, v.len(), |s| {
            encap::classify(s, pool, v, link)
        });
        if front == Front::Sessions {
            if let Some(u) = upf.as_deref_mut() {
                runtime.run(Node::SessionLookup, v.len(), |s| {
                    let held = crate::session::downlink::lookup_known(
                        s,
                        pool,
                        v,
                        &u.table,
                        &mut u.buffers,
                        *now_ns,
                    );
                    counters.buffered += held as u64;
                });
            }
        } else {
            runtime.run(Node::TunnelLookup, v.len(), |s| {
                encap::lookup(s, pool, v, table, link)
            });
        }
        if let (Some(ow), Front::Routed(_)) = (overlay.as_deref_mut(), front) {
            ow.refresh();
            let now_s = ow.overlay.now_s();
            if ow.suppresses() {
                let answered = runtime.run(Node::NeighSuppress, v.len(), |_| {
                    overlay_nodes::suppress(pool, v, ow, bounced, now_s)
                });
                counters.suppressed += answered;
            }
            let fetch = |t: u32| encap::prefetch_template(templates, t);
            ow.flooding = runtime.run(Node::FdbLookup, v.len(), |s| {
                overlay_nodes::lookup(s, pool, v, ow, now_s, fetch)
            });
        }
        if let (Some(u), Front::Routed(_)) = (upf.as_deref_mut(), front) {
            runtime.run(Node::SessionLookup, v.len(), |s| {
                let held = crate::session::downlink::lookup(
                    s,
                    pool,
                    v,
                    table,
                    &u.table,
                    &mut u.buffers,
                    *now_ns,
                );
                counters.buffered += held as u64;
            });
        }
        let sessions = upf.as_deref().map(|u| &u.table);
        if options.outer == OuterLayers::EthernetIpUdp {
            let mut f = encap::Forwarding {
                path_mtu: icmp.options.path_mtu,
                added,
                icmp,
                bounced,
                now_ns: *now_ns,
            };
            runtime.run(Node::IpForward, v.len(), |s| {
                encap::ip_forward(s, pool, v, table, &mut f)
            });
        }
        runtime.run(Node::InnerChecksum, v.len(), |s| {
            encap::inner_checksum(s, pool, v, table)
        });
        // One kind in the vector (the common case): its node runs on the
        // vector as it is, without sorting it into per-kind vectors.
        let kind_of = |id| table.kind(pool.meta(id).tunnel);
        let first = v.as_slice().first().map(|&id| kind_of(id));
        if let Some(k) = first.filter(|&k| v.as_slice().iter().all(|&id| kind_of(id) == k)) {
            runtime.run(Node::encap(k), v.len(), |s| {
                encap::tunnel_encap(s, pool, v, table, templates, sessions)
            });
        } else {
            Self::encap_by_kind(runtime, by_kind, pool, v, table, templates, sessions);
        }
        let outer = options.send.unwrap_or(options.outer);
        let select = TxSelect {
            table,
            sessions,
            overlay: overlay.as_deref(),
            tx_of,
        };
        runtime.run(Node::IpUdpEncap, v.len(), |s| {
            encap::ip_udp_encap(s, pool, v, tx, select, outer)
        });
        if outer.ip_in_buffer() {
            runtime.run(Node::UdpChecksum, v.len(), |_| {
                encap::udp_checksum(pool, v, tx, select)
            });
        }
    }

    /// Node `<kind>-encap` for a vector of several kinds: each kind's
    /// packets through its own node, then back into `v`.
    fn encap_by_kind(
        runtime: &mut Runtime<C>,
        by_kind: &mut [PacketVector; TunnelKind::COUNT],
        pool: &mut Pool,
        v: &mut PacketVector,
        table: &TunnelTable,
        templates: &[HeaderTemplate],
        sessions: Option<&crate::session::SessionTable>,
    ) {
        for &id in v.as_slice() {
            let k = table.kind(pool.meta(id).tunnel);
            by_kind[k.index()].put(pool, id);
        }
        v.clear();
        for (k, kv) in by_kind.iter_mut().enumerate() {
            if kv.is_empty() {
                continue;
            }
            runtime.run(Node::encap(TunnelKind::ALL[k]), kv.len(), |s| {
                encap::tunnel_encap(s, pool, kv, table, templates, sessions)
            });
            for &id in kv.as_slice() {
                v.put(pool, id);
            }
            kv.clear();
        }
    }

    /// Decapsulates a vector of outer packets, as [`OuterLayers`] says: IP
    /// header at offset 0, or the UDP payload with the headers' fields in
    /// `meta.outer`. Inner packets go to `sink` with [`Output::Inner`],
    /// replies with [`Output::Reply`]; the sink takes their buffers.
    /// `now_ns` (any monotonic nanoseconds) paces generated packets.
    ///
    /// An input marked `gso = Udp` is a UDP GRO train (as a socket with
    /// `UDP_GRO` hands it over: the payloads of its datagrams one after the
    /// other, behind the outer headers of the first where tep parses them):
    /// its datagrams are merged where they lie (`train-merge`) or cut apart
    /// (`udp-train-split`), without reading the payload for checksums when
    /// the train is marked `Verified`.
    pub fn decap(
        &mut self,
        pool: &mut Pool,
        input: &mut PacketVector,
        now_ns: u64,
        sink: &mut Sink<'_>,
    ) {
        if holds_super_packets(pool, input) {
            self.decap_trains(pool, input, now_ns, sink);
        } else {
            self.decap_vector(pool, input, now_ns, sink);
        }
        self.count_vector_full(pool, Node::UdpInput);
    }

    /// Runs the decap nodes over `input` and hands the results to `sink`.
    fn decap_vector(
        &mut self,
        pool: &mut Pool,
        input: &mut PacketVector,
        now_ns: u64,
        sink: &mut Sink<'_>,
    ) {
        // Nothing is left of a train where none was pending.
        let left = self.decap_with(pool, input, now_ns, sink, None);
        debug_assert!(left.is_none());
    }

    /// [`decap_vector`](Self::decap_vector) where `input` holds the first
    /// datagram of `train`: returns what is left of the train.
    #[must_use]
    fn decap_train(
        &mut self,
        pool: &mut Pool,
        input: &mut PacketVector,
        now_ns: u64,
        sink: &mut Sink<'_>,
        train: PendingTrain,
    ) -> Option<Leftover> {
        self.decap_with(pool, input, now_ns, sink, Some(train))
    }

    fn decap_with(
        &mut self,
        pool: &mut Pool,
        input: &mut PacketVector,
        now_ns: u64,
        sink: &mut Sink<'_>,
        train: Option<PendingTrain>,
    ) -> Option<Leftover> {
        self.counters.decap_in += input.len() as u64;
        self.now_ns = now_ns;
        let Pipeline {
            table,
            options,
            runtime,
            by_kind,
            replies,
            gro,
            gtpu,
            counters,
            next_hops,
            unresolved,
            icmp,
            icmp_back,
            upf,
            overlay,
            vlans,
            dn,
            ..
        } = self;
        let (sessions, mut reencap) = match upf.as_deref_mut() {
            Some(u) => (Some(&u.table), Some(&mut u.reencap)),
            None => (None, None),
        };
        let v = input;
        let outer = options.outer;
        if outer == OuterLayers::EthernetIpUdp {
            runtime.run(Node::EthernetInput, v.len(), |s| {
                decap::ethernet_input(s, pool, v)
            });
        }
        if outer.ip_in_buffer() {
            runtime.run(Node::IpInput, v.len(), |s| decap::ip_input(s, pool, v));
        }
        runtime.run(Node::UdpInput, v.len(), |s| {
            decap::udp_input(s, pool, v, table, by_kind, outer)
        });
        let mut r = Replies {
            out: replies,
            answered: 0,
            generated: 0,
        };
        for (k, kv) in by_kind.iter_mut().enumerate() {
            if kv.is_empty() {
                continue;
            }
            let kind = TunnelKind::ALL[k];
            let again = runtime.run(Node::decap(kind), kv.len(), |s| {
                decap::tunnel_decap(s, pool, kv, table, kind, gtpu, &mut r, now_ns, sessions)
            });
            if let (true, Some(s), Some(out)) = (again > 0, sessions, reencap.as_deref_mut()) {
                crate::session::n9::divert(pool, kv, s, out);
            }
            for &id in kv.as_slice() {
                v.put(pool, id);
            }
            kv.clear();
        }
        counters.answered += r.answered;
        counters.generated += r.generated;
        runtime.run(Node::UdpChecksumVerify, v.len(), |s| {
            let partial_ok = options.inner_checksums == InnerChecksums::Stated;
            decap::udp_checksum_verify(s, pool, v, table, partial_ok)
        });
        if let Some(ow) = overlay.as_deref_mut() {
            ow.refresh();
            let now_s = ow.overlay.now_s();
            runtime.run(Node::FdbLearn, v.len(), |s| {
                overlay_nodes::learn(s, pool, v, ow, now_s)
            });
        }
        let leftover = train
            .and_then(|t| trains::merge_pending(runtime, counters, table, pool, v, t, sessions));
        runtime.run(Node::DecapOutput, v.len(), |s| {
            decap::decap_output(s, pool, v, table, options.inner_checksums)
        });
        if options.gro && v.len() > 1 {
            // Frames of L2 tunnels coalesce like IP packets, by the IP
            // packet after their Ethernet header.
            let link = |m: &crate::buffer::PacketMeta| table.kind(m.tunnel).link();
            runtime.run(Node::Gro, v.len(), |_| {
                counters.coalesced += gro.coalesce(pool, v, link) as u64;
            });
        }
        if outer == OuterLayers::EthernetIpUdp {
            runtime.run(Node::IpRewrite, v.len(), |s| {
                decap::ip_rewrite(
                    s,
                    pool,
                    v,
                    table,
                    next_hops,
                    unresolved,
                    (icmp, icmp_back.get_or_insert_with(Default::default), now_ns),
                    dn.as_deref_mut(),
                )
            });
        }
        if let Some(vlans) = vlans.as_deref() {
            runtime.run(Node::VlanOutput, v.len() + unresolved.len(), |s| {
                vlan::output(s, pool, v, vlans);
                vlan::kernel_untagged(s, pool, unresolved, vlans);
            });
        }
        counters.decap_out += (v.len() + unresolved.len()) as u64;
        if outer == OuterLayers::EthernetIpUdp && !replies.is_empty() {
            nexthop::frame(pool, replies, next_hops, unresolved);
        }
        if !v.is_empty() {
            sink(Output::Inner, pool, v);
        }
        v.clear();
        if !replies.is_empty() {
            sink(Output::Reply, pool, replies);
        }
        replies.clear();
        self.hand_unresolved(pool, sink);
        if let Some(mut back) = self.icmp_back.take() {
            if !back.is_empty() {
                self.counters.encap_in += back.len() as u64;
                self.encap_flush(InnerLink::Ip, pool, &mut back, sink);
            }
            self.icmp_back = Some(back);
        }
        self.reencap(pool, sink);
        leftover
    }
}

/// Where encapsulation starts: packets from an inner side, routed into
/// tunnels; or a UPF's packets whose session is known already
/// ([`crate::session::n9`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Front {
    Routed(InnerLink),
    Sessions,
}

/// Whether any packet of `v` is a super-packet or a train (`meta.gso`).
fn holds_super_packets(pool: &Pool, v: &PacketVector) -> bool {
    v.as_slice().iter().any(|&id| pool.meta(id).gso.is_some())
}

#[cfg(test)]
mod tests;
