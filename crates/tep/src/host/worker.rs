//! One worker: a TUN queue, a TAP queue and one UDP socket per local
//! endpoint, driven by epoll, feeding batches through its own pipeline.
//!
//! Per wake-up, each ready descriptor is read until it is empty or a batch
//! is full; the batch goes through the pipeline in one call, and what
//! comes out leaves in batches (`sendmmsg`; a TUN write per packet, where
//! super-packets make the count small). No allocation per packet: buffers
//! come from the worker's pool, and the UDP payload is received straight
//! into them. This file is the loop; [`super::device_io`] and
//! [`super::udp_io`] are the two sides' reads and writes.

use super::data_networks::NONE as NO_NETWORK;
use super::device_io::{read_device, write_inner};
use super::endpoints::Endpoints;
use super::udp_io::{read_socket, send_outer, Senders, Tallies, TunnelFacts};
use super::uplink::write_frames;
use crate::daemon::idle::{bytes_in, Idle};
use crate::daemon::liveness::Beat;
use crate::daemon::run::{publish, WorkerCommon, DRAIN_LIMIT, PUBLISH_EVERY};
use crate::daemon::stats::{IoCounters, IoEvent, TunnelTraffic, WorkerSnapshot};
use crate::daemon::trace::Tracer;
use std::io;
use std::sync::atomic::Ordering;
use std::time::Instant;
use tep_dataplane::{
    InnerChecksums, InnerLink, LinkHeader, OuterLayers, Output, PacketVector, Pipeline,
    PipelineOptions, Pool, Tsc, TunnelTable, SUPER_PACKET_ROOM, VECTOR_SIZE,
};
use tep_sys::{Epoll, Event, TunQueue, UdpSocket, MAX_BATCH};

/// Buffers per worker: a full decap vector, a full encap vector, the
/// trains and super-packets in flight, with margin. Virtual memory is
/// `BUFFERS × 64 KiB`; only buffers in use are touched.
const BUFFERS: usize = 2048;
/// Reads stop when fewer buffers than this are free, so that segmentation
/// and splitting (up to a vector's worth each) never run dry.
const RESERVE: usize = 2 * VECTOR_SIZE + MAX_BATCH;
/// Packets read from a TUN/TAP per wake-up (then the sockets get a turn).
const DEVICE_BUDGET: usize = 64;
/// `recvmmsg` calls per socket per wake-up.
const SOCKET_ROUNDS: usize = 4;

const TOKEN_WAKE: u64 = 0;
const TOKEN_TUN: u64 = 1;
const TOKEN_TAP: u64 = 2;
const TOKEN_SOCKET: u64 = 16;
/// Network `k`'s device queue is `TOKEN_NETWORK + k` (above any socket).
const TOKEN_NETWORK: u64 = 1 << 32;
/// A UPF data network's own TUN queue `k` is `TOKEN_DATA_TUN + k` (above
/// any overlay network's).
const TOKEN_DATA_TUN: u64 = 1 << 40;

/// The descriptors a worker owns; handed back when it stops so that a
/// reload can reuse them.
#[derive(Debug, Default)]
pub struct WorkerIo {
    /// The TUN queue (L3 tunnels), if any tunnel needs it.
    pub tun: Option<TunQueue>,
    /// The TAP queue (L2 tunnels).
    pub tap: Option<TunQueue>,
    /// A queue of each network's device: its tunnel index, whether it is
    /// a TAP, the queue.
    pub networks: Vec<(u32, bool, TunQueue)>,
    /// A queue of each UPF data network's own TUN: the network, the queue.
    pub data_tuns: Vec<(u8, TunQueue)>,
    /// One socket per endpoint, in [`Endpoints`] order.
    pub sockets: Vec<UdpSocket>,
    /// Per endpoint: the sockets tunnel traffic leaves from, one source
    /// port each (`host.source_sockets`); empty: from `sockets`.
    pub senders: Vec<Vec<UdpSocket>>,
    /// `host.uplink`: the queue tunnel traffic leaves by instead, as whole
    /// frames, and their Ethernet header.
    pub uplink: Option<(TunQueue, LinkHeader)>,
}

/// Everything a worker needs to start.
#[derive(Debug)]
pub struct WorkerSetup {
    /// What every mode's worker gets.
    pub common: WorkerCommon,
    /// Its descriptors.
    pub io: WorkerIo,
    /// Its endpoints (sockets in `io` in this order).
    pub endpoints: Endpoints,
    /// Pin to this CPU.
    pub cpu: Option<usize>,
    /// Offloads are on: vnet headers, GRO to the device, GSO trains.
    pub offloads: bool,
}

/// Runs a worker until `shared.stop`; returns its descriptors.
pub fn run(setup: WorkerSetup, beat: &Beat) -> io::Result<WorkerIo> {
    if let Some(cpu) = setup.cpu {
        if let Err(e) = tep_sys::thread::pin_current_thread(cpu) {
            tracing::warn!(worker = setup.common.index, cpu, "cannot pin: {e}");
        }
    }
    let config = setup.common.config.clone();
    let epoll = register(&setup)?;
    let mut w = Worker::new(setup);
    let shared = w.common.shared.clone();
    let mut events: Vec<Event> = Vec::with_capacity(64);
    let mut published_at = Instant::now();
    let mut generation = 0;
    // Polling (epoll without sleeping) while the next packet is likely
    // to come sooner than a wake-up: it then finds the worker awake.
    let mut idle = Idle::new(config.host.busy_poll_us, config.host.adaptive_poll_us);
    // Set once told to stop: from then on the worker serves what is
    // already queued (epoll without sleeping) and leaves when nothing is,
    // or after DRAIN_LIMIT under a flow that does not stop.
    let mut draining: Option<Instant> = None;
    let mut read_before_drain = 0;
    loop {
        beat.beat();
        let timeout = if draining.is_some() || idle.keep_polling(Instant::now()) {
            0
        } else {
            w.tallies.io.count(IoEvent::Sleeps, 1);
            100
        };
        epoll.wait(&mut events, timeout)?;
        w.apply_session_changes();
        let drained = match draining {
            Some(since) => events.is_empty() || since.elapsed() >= DRAIN_LIMIT,
            None => false,
        };
        let round_bytes: u64 = events.iter().map(|ev| w.serve(ev.token)).sum();
        if !events.is_empty() {
            idle.worked(Instant::now(), round_bytes);
        }
        w.report_sessions();
        let wanted = shared.refresh.load(Ordering::Acquire);
        let read = w.tallies.io.get(IoEvent::DeviceRx) + w.tallies.io.get(IoEvent::UdpRx);
        if draining.is_none() && shared.stop.load(Ordering::Acquire) {
            draining = Some(Instant::now());
            read_before_drain = read;
        }
        if wanted != generation || published_at.elapsed() >= PUBLISH_EVERY || drained {
            generation = wanted;
            published_at = Instant::now();
            w.publish(generation);
        }
        if drained {
            tracing::info!(
                worker = w.common.index,
                // Device packets and socket buffers (a GRO train is one).
                reads_while_draining = read - read_before_drain,
                delivered = w.tallies.tunnels.iter().map(|t| t.rx_packets).sum::<u64>(),
                "stopped; served what was queued"
            );
            return Ok(w.io);
        }
    }
}

/// The worker's epoll over its wake-up, devices and sockets.
fn register(setup: &WorkerSetup) -> io::Result<Epoll> {
    use std::os::fd::AsRawFd;
    let epoll = Epoll::new()?;
    epoll.add(setup.common.wake.as_raw_fd(), TOKEN_WAKE, true, false)?;
    if let Some(q) = &setup.io.tun {
        epoll.add(q.as_raw_fd(), TOKEN_TUN, true, false)?;
    }
    if let Some(q) = &setup.io.tap {
        epoll.add(q.as_raw_fd(), TOKEN_TAP, true, false)?;
    }
    for (i, s) in setup.io.sockets.iter().enumerate() {
        epoll.add(s.as_raw_fd(), TOKEN_SOCKET + i as u64, true, false)?;
    }
    for (k, (_, _, q)) in setup.io.networks.iter().enumerate() {
        epoll.add(q.as_raw_fd(), TOKEN_NETWORK + k as u64, true, false)?;
    }
    for (k, (_, q)) in setup.io.data_tuns.iter().enumerate() {
        epoll.add(q.as_raw_fd(), TOKEN_DATA_TUN + k as u64, true, false)?;
    }
    Ok(epoll)
}

/// A host worker's pipeline: IP packets on the device side, UDP payloads
/// (or with an uplink whole frames) on the other.
fn pipeline(setup: &WorkerSetup) -> Pipeline<Tsc> {
    let config = &setup.common.config;
    let options = PipelineOptions {
        inner_link: InnerLink::Ip,
        gro: setup.offloads,
        // Trains are gathered at the socket from the datagrams' own
        // buffers (send_outer), not copied together in the pipeline.
        udp_trains: false,
        // The sockets write and read the outer IP and UDP headers.
        outer: OuterLayers::UdpPayload,
        // Written gathered (send_outer, write_inner): payloads go from the
        // buffer they were read into to the other side with no copy here.
        gather: true,
        // With offloads, the devices' virtio-net header carries each inner
        // checksum's state (NEEDS_CSUM, DATA_VALID); without, partial ones
        // are completed.
        inner_checksums: if setup.offloads {
            InnerChecksums::Stated
        } else {
            InnerChecksums::Completed
        },
        // With an uplink tep writes whole frames, super-packets whole;
        // else the sockets write the outer headers.
        tunnel_gso: setup.io.uplink.is_some(),
        send: setup.io.uplink.as_ref().map(|_| OuterLayers::EthernetIpUdp),
    };
    let mut pipeline = Pipeline::new(&config.tunnels, &config.dataplane, Tsc, options);
    if let Some(o) = &setup.common.overlay {
        pipeline.attach_overlay(o.clone());
    }
    if let Some((_, header)) = &setup.io.uplink {
        // Every tunnel's frames go to the uplink, whatever the remote.
        for t in &config.tunnels {
            pipeline.next_hops().set(t.remote, Some(*header));
        }
    }
    if let Some((link, per_session, limit)) = setup.common.sessions.clone() {
        pipeline.attach_sessions(link, per_session, limit);
    }
    pipeline
}

/// Where a worker's pipeline output goes, borrowed for one call.
struct Sinks<'a> {
    devices: super::device_io::Devices<'a>,
    to: Senders<'a>,
    uplink: Option<&'a TunQueue>,
    facts: &'a TunnelFacts,
    tallies: &'a mut Tallies,
    tracer: &'a Tracer,
}

impl<'a> Sinks<'a> {
    fn of(
        io: &'a mut WorkerIo,
        facts: &'a TunnelFacts,
        tallies: &'a mut Tallies,
        tracer: &'a Tracer,
    ) -> Self {
        let WorkerIo {
            tun,
            tap,
            networks,
            data_tuns,
            sockets,
            senders,
            uplink,
        } = io;
        Sinks {
            devices: super::device_io::Devices {
                tun: tun.as_ref(),
                tap: tap.as_ref(),
                networks,
                data_tuns,
            },
            to: Senders { sockets, senders },
            uplink: uplink.as_ref().map(|(q, _)| q),
            facts,
            tallies,
            tracer,
        }
    }

    /// Toward the peers: whole frames by the uplink, else by the sockets.
    fn underlay(&mut self, pool: &mut Pool, out: &mut PacketVector) {
        match self.uplink {
            Some(q) => write_frames(q, pool, out, &self.facts.table, self.tallies, self.tracer),
            None => self.sockets(pool, out),
        }
    }

    /// By the UDP sockets.
    fn sockets(&mut self, pool: &mut Pool, out: &mut PacketVector) {
        send_outer(
            pool,
            out,
            &mut self.to,
            self.facts,
            self.tallies,
            self.tracer,
        );
    }

    /// To the TUN/TAP: the kernel's stack.
    fn inner(&mut self, pool: &mut Pool, out: &mut PacketVector) {
        write_inner(
            pool,
            out,
            &self.devices,
            self.facts,
            self.tallies,
            self.tracer,
        );
    }
}

/// Where a batch for encap comes from.
#[derive(Clone, Copy, Debug)]
enum Inner {
    /// The TUN (`Ip`) or TAP of the point-to-point tunnels.
    Tunnels(InnerLink),
    /// Network `k`'s device (`WorkerIo::networks`).
    Network(usize),
    /// A UPF data network's own TUN (`WorkerIo::data_tuns`).
    DataTun(usize),
}

/// A running worker's pipeline, buffers, descriptors and counts.
struct Worker {
    common: WorkerCommon,
    endpoints: Endpoints,
    pipeline: Pipeline<Tsc>,
    pool: Pool,
    io: WorkerIo,
    facts: TunnelFacts,
    tallies: Tallies,
    input: PacketVector,
    reports: Vec<u32>,
    /// Peer signalling for the N4 thread (path supervision).
    signals: Vec<tep_dataplane::PeerSignal>,
    started: Instant,
}

impl Worker {
    fn new(setup: WorkerSetup) -> Worker {
        let pipeline = pipeline(&setup);
        let config = &setup.common.config;
        let gso_ok = setup
            .io
            .sockets
            .iter()
            .chain(setup.io.senders.iter().flatten())
            .all(|s| s.capabilities().gso);
        let facts = TunnelFacts {
            endpoint: setup.endpoints.of_tunnel.clone(),
            ethernet: config
                .tunnels
                .iter()
                .map(|t| t.kind.carries_ethernet())
                .collect(),
            endpoints: setup.endpoints.addrs.clone(),
            table: TunnelTable::new(&config.tunnels),
            device_mtu: [
                super::device_mtu(config, false),
                super::device_mtu(config, true),
            ],
            network_queue: config
                .tunnels
                .iter()
                .enumerate()
                .map(|(i, _)| setup.io.networks.iter().position(|n| n.0 == i as u32))
                .collect(),
            network_mtu: config
                .tunnels
                .iter()
                .map(|t| super::network_mtu(config, t))
                .collect(),
            data_devices: super::data_networks::devices(config),
            host_network: super::data_networks::host_network(config),
        };
        let tallies = Tallies {
            tunnels: vec![TunnelTraffic::default(); config.tunnels.len()],
            io: IoCounters::default(),
            trains: setup.offloads && gso_ok,
        };
        Worker {
            pipeline,
            pool: Pool::new(BUFFERS, SUPER_PACKET_ROOM),
            io: setup.io,
            facts,
            tallies,
            input: PacketVector::new(),
            reports: Vec::new(),
            signals: Vec::with_capacity(tep_dataplane::SIGNALS),
            started: crate::daemon::epoch(),
            endpoints: setup.endpoints,
            common: setup.common,
        }
    }

    fn upf(&self) -> bool {
        self.common.sessions.is_some()
    }

    /// Between vectors: the sessions the N4 thread changed, and what they
    /// release (held packets, End Markers).
    fn apply_session_changes(&mut self) {
        if !self.upf() {
            return;
        }
        let tracer = &self.common.shared.tracer;
        let mut sinks = Sinks::of(&mut self.io, &self.facts, &mut self.tallies, tracer);
        self.pipeline
            .apply_session_changes(&mut self.pool, &mut |_, pool, out| {
                sinks.underlay(pool, out)
            });
    }

    /// The Downlink Data Reports of sessions whose first packet was held.
    fn report_sessions(&mut self) {
        if self.upf() {
            self.pipeline.take_session_reports(&mut self.reports);
            self.common.shared.upf.report(&mut self.reports);
            let dropped = self.pipeline.take_gtpu_signals(&mut self.signals);
            self.common.shared.upf.signal(&mut self.signals, dropped);
        }
    }

    /// Serves one ready descriptor; returns the bytes read.
    fn serve(&mut self, token: u64) -> u64 {
        match token {
            TOKEN_WAKE => {
                let _ = self.common.wake.drain();
                0
            }
            TOKEN_TUN => self.encap_device(Inner::Tunnels(InnerLink::Ip)),
            TOKEN_TAP => self.encap_device(Inner::Tunnels(InnerLink::Ethernet)),
            t if t >= TOKEN_DATA_TUN => {
                self.encap_device(Inner::DataTun((t - TOKEN_DATA_TUN) as usize))
            }
            t if t >= TOKEN_NETWORK => {
                self.encap_device(Inner::Network((t - TOKEN_NETWORK) as usize))
            }
            t => self.decap_socket((t - TOKEN_SOCKET) as usize),
        }
    }

    /// A batch from the TUN (`Ip`) or the TAP of the tunnels, or from a
    /// network's device (sent within that network), encapsulated.
    fn encap_device(&mut self, from: Inner) -> u64 {
        // The UPF's downlink lookups are in the data network read from.
        let data_network = match from {
            Inner::DataTun(k) => self.io.data_tuns.get(k).map_or(NO_NETWORK, |d| d.0),
            _ => self.facts.host_network,
        };
        self.pipeline.set_network(data_network);
        let (queue, link, network) = match from {
            Inner::DataTun(k) => (self.io.data_tuns.get(k).map(|d| &d.1), InnerLink::Ip, None),
            Inner::Tunnels(InnerLink::Ip) => (self.io.tun.as_ref(), InnerLink::Ip, None),
            Inner::Tunnels(InnerLink::Ethernet) => {
                (self.io.tap.as_ref(), InnerLink::Ethernet, None)
            }
            Inner::Network(k) => match self.io.networks.get(k) {
                Some((t, true, q)) => (Some(q), InnerLink::Ethernet, Some(*t)),
                Some((t, false, q)) => (Some(q), InnerLink::Ip, Some(*t)),
                None => (None, InnerLink::Ip, None),
            },
        };
        let Some(q) = queue else { return 0 };
        let tracer = &self.common.shared.tracer;
        read_device(
            q,
            link,
            &mut self.pool,
            &mut self.input,
            (DEVICE_BUDGET, RESERVE),
            &mut self.tallies.io,
            tracer,
        );
        let bytes = bytes_in(&self.pool, &self.input);
        let mut sinks = Sinks::of(&mut self.io, &self.facts, &mut self.tallies, tracer);
        // Back to the inner side: a network's ARP/ND answers.
        let sink = &mut |o, pool: &mut Pool, out: &mut PacketVector| match o {
            Output::Inner => sinks.inner(pool, out),
            _ => sinks.underlay(pool, out),
        };
        // The sessions' MBR buckets refill by this clock: decap alone
        // would leave it still while only downlink traffic flows.
        self.pipeline
            .set_now(self.started.elapsed().as_nanos() as u64);
        let (pool, input) = (&mut self.pool, &mut self.input);
        match network {
            Some(t) => self.pipeline.encap_into(t, link, pool, input, sink),
            None => self.pipeline.encap_from(link, pool, input, sink),
        }
        bytes
    }

    /// Up to `SOCKET_ROUNDS` batches from endpoint `i`'s socket,
    /// decapsulated.
    fn decap_socket(&mut self, i: usize) -> u64 {
        let tracer = &self.common.shared.tracer;
        let mut bytes = 0;
        for _ in 0..SOCKET_ROUNDS {
            let full = read_socket(
                &mut self.io.sockets[i],
                self.endpoints.addrs[i],
                &mut self.pool,
                &mut self.input,
                RESERVE,
                &mut self.tallies.io,
                tracer,
            );
            bytes += bytes_in(&self.pool, &self.input);
            let now_ns = self.started.elapsed().as_nanos() as u64;
            let mut sinks = Sinks::of(&mut self.io, &self.facts, &mut self.tallies, tracer);
            self.pipeline.decap(
                &mut self.pool,
                &mut self.input,
                now_ns,
                &mut |o, pool, out| match o {
                    Output::Inner | Output::Kernel => sinks.inner(pool, out),
                    Output::Reply | Output::Outer => sinks.sockets(pool, out),
                },
            );
            if !full {
                break;
            }
        }
        bytes
    }

    fn publish(&self, generation: u64) {
        let snap = WorkerSnapshot::new(
            self.pipeline.runtime().nodes(),
            self.pipeline.counters(),
            &self.tallies.tunnels,
            self.tallies.io,
            generation,
        );
        publish(&self.common.shared, self.common.index, snap);
    }
}
