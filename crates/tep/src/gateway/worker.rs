//! One gateway worker: queue `i` of both interfaces, one AF_XDP socket on
//! each sharing one UMEM (the worker's pool), and its own pipeline.
//!
//! Each round: completions back to the pool, the fill rings topped up,
//! a vector from the underlay decapsulated and one from the inner side
//! encapsulated; what comes out leaves by descriptor on the other socket
//! (a frame received on one interface leaves by the other without a
//! copy), or to the kernel's stack for a next hop without a MAC yet. The
//! next hops come from the resolver ([`super::next_hops`]), polled with
//! one atomic load per round. With nothing to do the worker polls on
//! while [`Idle`] says the next frame is near, then sleeps in epoll on
//! both sockets.

use super::next_hops::Published;
use super::rings::{tally, to_kernel, Side, Way};
use crate::daemon::idle::{bytes_in, Idle};
use crate::daemon::liveness::Beat;
use crate::daemon::run::{publish, WorkerCommon, DRAIN_LIMIT, PUBLISH_EVERY};
use crate::daemon::stats::{IoCounters, IoEvent, IoMode, TunnelTraffic, WorkerSnapshot};
use crate::daemon::trace::Tracer;
use std::io;
use std::net::IpAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tep_dataplane::{
    Direction, InnerChecksums, InnerLink, OuterLayers, Output, PacketVector, Pipeline,
    PipelineOptions, Pool, RouterOptions, Tsc, VECTOR_SIZE,
};
use tep_sys::raw::RawIp;
use tep_sys::{Epoll, XskStats};

/// Buffers kept free for what the pipeline makes itself (replies, ICMP
/// errors) while the fill rings are topped up.
pub const RESERVE: usize = 2 * VECTOR_SIZE;
/// How long a stopping worker waits for the kernel to hand back what it
/// is still sending.
const COMPLETION_LIMIT: Duration = Duration::from_millis(100);

const TOKEN_WAKE: u64 = 0;
const TOKEN_UNDERLAY: u64 = 1;
const TOKEN_INNER: u64 = 2;

/// What a worker owns; handed back when it stops, so that a reload keeps
/// the sockets, the UMEM and the buffers the kernel holds.
#[derive(Debug)]
pub struct WorkerIo {
    /// Queue `i` of the underlay.
    pub underlay: Side,
    /// Queue `i` of the inner interface.
    pub inner: Side,
    /// Where packets go to the kernel's stack: opened at start with the
    /// sockets (CAP_NET_RAW), kept across reloads, after the daemon has
    /// dropped its privileges.
    pub raw: RawIp,
    /// The UMEM of both sockets. Declared last: the sockets close before
    /// the memory they use goes.
    pub pool: Pool,
}

/// Everything a worker needs to start.
#[derive(Debug)]
pub struct WorkerSetup {
    /// What every mode's worker gets.
    pub common: WorkerCommon,
    /// Its sockets and pool.
    pub io: WorkerIo,
    /// Pin to this CPU.
    pub cpu: Option<usize>,
    /// Buffers to keep on each fill ring.
    pub fill_target: usize,
    /// How the pipeline routes (path MTU, ICMP errors).
    pub router: RouterOptions,
    /// Where next hops are published and asked for.
    pub next_hops: Arc<Published>,
    /// A UPF's data networks' own routers, where some have one.
    pub dn_routers: Option<Arc<tep_dataplane::dn_arp::DnRouters>>,
}

/// The pipeline of a gateway: whole frames on both sides.
pub fn pipeline_options() -> PipelineOptions {
    PipelineOptions {
        inner_link: InnerLink::Ethernet,
        gro: false,
        udp_trains: false,
        outer: OuterLayers::EthernetIpUdp,
        gather: false,
        // Frames leave for a wire: a partial inner checksum (remote
        // checksum offload) is completed.
        inner_checksums: InnerChecksums::Completed,
        // AF_XDP frames are never super-packets.
        tunnel_gso: false,
        send: None,
    }
}

/// Runs a worker until `shared.stop`; returns its sockets and pool.
pub fn run(setup: WorkerSetup, beat: &Beat) -> io::Result<WorkerIo> {
    if let Some(cpu) = setup.cpu {
        if let Err(e) = tep_sys::thread::pin_current_thread(cpu) {
            tracing::warn!(worker = setup.common.index, cpu, "cannot pin: {e}");
        }
    }
    let epoll = Epoll::new()?;
    epoll.add(setup.common.wake.as_raw_fd(), TOKEN_WAKE, true, false)?;
    epoll.add(
        setup.io.underlay.socket.as_raw_fd(),
        TOKEN_UNDERLAY,
        true,
        false,
    )?;
    epoll.add(setup.io.inner.socket.as_raw_fd(), TOKEN_INNER, true, false)?;
    let mut idle = setup
        .common
        .config
        .gateway
        .as_ref()
        .map_or(Idle::new(0, 0), |g| {
            Idle::new(g.busy_poll_us, g.adaptive_poll_us)
        });
    let mut w = Worker::new(setup);
    let shared = w.common.shared.clone();
    let mut events = Vec::with_capacity(4);
    let mut generation = 0;
    let mut published_at = Instant::now();
    let mut draining: Option<Instant> = None;
    loop {
        beat.beat();
        let (frames, round_bytes) = w.round();
        let busy = frames > 0;
        if busy {
            idle.worked(Instant::now(), round_bytes);
        }
        if draining.is_none() && shared.stop.load(Ordering::Acquire) {
            draining = Some(Instant::now());
        }
        let drained = draining.is_some_and(|since| !busy || since.elapsed() >= DRAIN_LIMIT);
        let asked = shared.refresh.load(Ordering::Acquire);
        if asked != generation || published_at.elapsed() >= PUBLISH_EVERY || drained {
            generation = asked;
            published_at = Instant::now();
            w.publish(generation);
        }
        if drained {
            return Ok(w.finish());
        }
        if busy || draining.is_some() || idle.keep_polling(Instant::now()) {
            continue;
        }
        // Asleep: the sockets wake the worker when frames arrive, the
        // eventfd for a stop, a refresh or a trace; the timeout reaps
        // completions and publishes now and then.
        w.ends.io.count(IoEvent::Sleeps, 1);
        w.lap.slept = true;
        epoll.wait(&mut events, 100)?;
        if events.iter().any(|e| e.token == TOKEN_WAKE) {
            let _ = w.common.wake.drain();
        }
    }
}

/// Where a worker's frames leave, and what it counts of them.
struct Ends {
    underlay: Side,
    inner: Side,
    raw: RawIp,
    io: IoCounters,
    tunnels: Vec<TunnelTraffic>,
}

/// Which of the [`Ends`].
#[derive(Clone, Copy)]
enum To {
    Underlay,
    Inner,
    /// The kernel's stack.
    Kernel,
}

impl Ends {
    /// Sends `v` to `to`, counted on its tunnels as `way` first.
    fn send(
        &mut self,
        way: Option<Way>,
        to: To,
        pool: &mut Pool,
        v: &mut PacketVector,
        tracer: &Tracer,
    ) {
        if let Some(way) = way {
            tally(way, pool, v, &mut self.tunnels);
        }
        match to {
            To::Underlay => self.underlay.transmit(pool, v, &mut self.io, tracer),
            To::Inner => self.inner.transmit(pool, v, &mut self.io, tracer),
            To::Kernel => to_kernel(&self.raw, pool, v, &mut self.io, tracer),
        }
    }
}

/// Where a vector's output leaves, and as what its tunnels count it.
fn route(dir: Direction, o: Output) -> (Option<Way>, To) {
    match (dir, o) {
        (Direction::Decap, Output::Inner) => (Some(Way::Delivered), To::Inner),
        (Direction::Decap, Output::Kernel) => (Some(Way::Delivered), To::Kernel),
        // Replies to peers, and ICMP errors back into a tunnel.
        (_, Output::Outer | Output::Reply) => (Some(Way::Sent), To::Underlay),
        (Direction::Encap, Output::Kernel) => (Some(Way::Sent), To::Kernel),
        // ICMP errors back to their sender.
        (Direction::Encap, Output::Inner) => (None, To::Inner),
    }
}

/// How long a gap between two rounds lasts to count as a stall.
const STALL_NS: u64 = 1_000_000;

/// The worker loop's pace: from the start of one round to the next.
/// A gap across a sleep is the worker's choice, not counted; a long one
/// while it polls means the CPU was elsewhere (interrupts, another
/// thread) or a round was slow.
#[derive(Debug, Default)]
struct Lap {
    /// When the last round started (ns since the daemon's epoch).
    last_ns: u64,
    /// The last round moved frames.
    busy: bool,
    /// The worker slept since the last round started.
    slept: bool,
    /// The longest gap since the last control request for a snapshot.
    longest_ns: u64,
}

impl Lap {
    /// A round starts at `now_ns`.
    fn start(&mut self, now_ns: u64, io: &mut IoCounters) {
        let gap = now_ns.saturating_sub(self.last_ns);
        if self.last_ns != 0 && !self.slept {
            self.longest_ns = self.longest_ns.max(gap);
            if gap > STALL_NS {
                io.count(IoEvent::LoopStalls, 1);
            }
        }
        if self.busy {
            io.count(IoEvent::BusyNs, gap);
        }
        io.count(IoEvent::Rounds, 1);
        self.last_ns = now_ns;
        self.slept = false;
    }

    /// The round that started last moved `frames`.
    fn end(&mut self, frames: usize, io: &mut IoCounters) {
        self.busy = frames > 0;
        if self.busy {
            io.count(IoEvent::BusyRounds, 1);
        }
    }
}

/// A running worker: its pipeline, both sides, the pool and the counts.
struct Worker {
    common: WorkerCommon,
    pipeline: Pipeline<Tsc>,
    ends: Ends,
    pool: Pool,
    fill_target: usize,
    next_hops: Arc<Published>,
    /// The sockets' kernel counters when the worker started: they outlive
    /// a worker (a reload keeps them), and it reports what they counted
    /// since.
    baseline: XskStats,
    /// The config has L2 networks: frames from the inner interface go in
    /// by their VLAN ([`Pipeline::encap_tagged`]).
    trunk: bool,
    /// Some data networks have their own router, resolved by ARP.
    dn_routers: bool,
    input: PacketVector,
    wanted: Vec<IpAddr>,
    reports: Vec<u32>,
    /// Peer signalling for the N4 thread (path supervision).
    signals: Vec<tep_dataplane::PeerSignal>,
    /// The next-hop table's generation and evictions seen last.
    seen: u64,
    evictions: u64,
    started: Instant,
    lap: Lap,
    /// The generation of the last snapshot published.
    published: u64,
}

impl Worker {
    fn new(setup: WorkerSetup) -> Worker {
        let config = &setup.common.config;
        let mut pipeline =
            Pipeline::new(&config.tunnels, &config.dataplane, Tsc, pipeline_options());
        pipeline.set_router(setup.router);
        *pipeline.next_hops() = setup.next_hops.table();
        if let Some((link, per_session, limit)) = setup.common.sessions.clone() {
            pipeline.attach_sessions(link, per_session, limit);
        }
        if let Some(o) = &setup.common.overlay {
            pipeline.attach_overlay(o.clone());
        }
        // The inner interface is a trunk port: networks (and a UPF's data
        // networks) are its VLANs.
        let trunk = pipeline.attach_vlans(&super::steer::data_network_vlans(config));
        let dn_routers = setup.dn_routers.is_some();
        if let Some(r) = setup.dn_routers {
            pipeline.attach_dn_routers(r);
        }
        let WorkerIo {
            underlay,
            inner,
            raw,
            pool,
        } = setup.io;
        Worker {
            pipeline,
            baseline: xsk_stats(&underlay, &inner),
            ends: Ends {
                underlay,
                inner,
                raw,
                io: IoCounters::new(IoMode::Gateway),
                tunnels: vec![TunnelTraffic::default(); config.tunnels.len()],
            },
            pool,
            fill_target: setup.fill_target,
            next_hops: setup.next_hops,
            trunk,
            dn_routers,
            input: PacketVector::new(),
            wanted: Vec::with_capacity(64),
            reports: Vec::new(),
            signals: Vec::with_capacity(tep_dataplane::SIGNALS),
            seen: 0,
            evictions: 0,
            started: crate::daemon::epoch(),
            lap: Lap::default(),
            published: 0,
            common: setup.common,
        }
    }

    /// One round: the rings tended, a vector each way through the
    /// pipeline, the next hops traded. Returns the frames and bytes read.
    fn round(&mut self) -> (usize, u64) {
        let now_ns = self.started.elapsed().as_nanos() as u64;
        self.lap.start(now_ns, &mut self.ends.io);
        self.pipeline.set_now(now_ns);
        self.seen = self.next_hops.apply(self.seen, self.pipeline.next_hops());
        let e = &mut self.ends;
        e.underlay.complete(&mut self.pool);
        e.inner.complete(&mut self.pool);
        e.underlay
            .refill(&mut self.pool, self.fill_target, RESERVE, &mut e.io);
        e.inner
            .refill(&mut self.pool, self.fill_target, RESERVE, &mut e.io);
        if self.common.sessions.is_some() {
            self.apply_session_changes();
        }
        let (from_underlay, decap_bytes) = self.through(Direction::Decap, now_ns);
        let (from_inner, encap_bytes) = self.through(Direction::Encap, now_ns);
        if self.dn_routers {
            self.resolve_dn_routers();
        }
        self.ends.underlay.flush(&mut self.ends.io);
        self.ends.inner.flush(&mut self.ends.io);
        self.trade_next_hops();
        if self.common.sessions.is_some() {
            self.pipeline.take_session_reports(&mut self.reports);
            self.common.shared.upf.report(&mut self.reports);
            let dropped = self.pipeline.take_gtpu_signals(&mut self.signals);
            self.common.shared.upf.signal(&mut self.signals, dropped);
        }
        self.lap.end(from_underlay + from_inner, &mut self.ends.io);
        (from_underlay + from_inner, decap_bytes + encap_bytes)
    }

    /// The ARP requests the data networks' routers are due, out the
    /// inner interface.
    fn resolve_dn_routers(&mut self) {
        let (ends, tracer) = (&mut self.ends, &self.common.shared.tracer);
        self.pipeline
            .resolve_dn_routers(&mut self.pool, &mut |_, pool, v| {
                ends.send(None, To::Inner, pool, v, tracer)
            });
    }

    /// Between vectors: the sessions the N4 thread changed, and what they
    /// release (held packets, End Markers).
    fn apply_session_changes(&mut self) {
        let (ends, tracer) = (&mut self.ends, &self.common.shared.tracer);
        self.pipeline
            .apply_session_changes(&mut self.pool, &mut |o, pool, v| {
                let to = if o == Output::Kernel {
                    To::Kernel
                } else {
                    To::Underlay
                };
                ends.send(Some(Way::Sent), to, pool, v, tracer)
            });
    }

    /// A vector through the pipeline: from the underlay decapsulated,
    /// from the inner interface encapsulated. Returns the frames and
    /// bytes read.
    fn through(&mut self, dir: Direction, now_ns: u64) -> (usize, u64) {
        let (ends, tracer) = (&mut self.ends, &self.common.shared.tracer);
        let from = match dir {
            Direction::Decap => &mut ends.underlay,
            Direction::Encap => &mut ends.inner,
        };
        let n = from.receive(&mut self.pool, &mut self.input, &mut ends.io, tracer);
        if n > 0 {
            ends.io.count(IoEvent::Vectors, 1);
        }
        let bytes = bytes_in(&self.pool, &self.input);
        if self.input.is_empty() {
            return (n, bytes);
        }
        let sink = &mut |o, pool: &mut Pool, v: &mut PacketVector| {
            let (way, to) = route(dir, o);
            ends.send(way, to, pool, v, tracer)
        };
        match dir {
            Direction::Decap => self
                .pipeline
                .decap(&mut self.pool, &mut self.input, now_ns, sink),
            Direction::Encap if self.trunk => {
                self.pipeline
                    .encap_tagged(&mut self.pool, &mut self.input, sink)
            }
            Direction::Encap => self.pipeline.encap(&mut self.pool, &mut self.input, sink),
        }
        (n, bytes)
    }

    /// The next hops the pipeline asked for to the resolver, and its
    /// cache's evictions to the bounds' counter.
    fn trade_next_hops(&mut self) {
        self.pipeline.next_hops().take_wanted(&mut self.wanted);
        self.next_hops.want(&mut self.wanted);
        let evicted = self.pipeline.next_hops().evictions();
        if evicted != self.evictions {
            self.next_hops
                .bounds
                .cache_evictions
                .fetch_add(evicted - self.evictions, Ordering::Relaxed);
            self.evictions = evicted;
        }
    }

    fn publish(&mut self, generation: u64) {
        let e = &mut self.ends;
        set_xsk_counts(&mut e.io, &self.baseline, &xsk_stats(&e.underlay, &e.inner));
        let mut snap = WorkerSnapshot::new(
            self.pipeline.runtime().nodes(),
            self.pipeline.counters(),
            &e.tunnels,
            e.io,
            generation,
        );
        snap.longest_gap_ns = self.lap.longest_ns;
        publish(&self.common.shared, self.common.index, snap);
        // A request for fresh snapshots starts a new window for the
        // longest gap (the periodic publishes keep it).
        if generation != self.published {
            self.published = generation;
            self.lap.longest_ns = 0;
        }
    }

    /// Stopped: what the kernel still sends settled, the descriptors
    /// handed back.
    fn finish(self) -> WorkerIo {
        let Ends {
            mut underlay,
            mut inner,
            raw,
            tunnels,
            ..
        } = self.ends;
        let mut pool = self.pool;
        settle(&mut underlay, &mut inner, &mut pool);
        tracing::info!(
            worker = self.common.index,
            delivered = tunnels.iter().map(|t| t.rx_packets).sum::<u64>(),
            sent = tunnels.iter().map(|t| t.tx_packets).sum::<u64>(),
            "stopped; served what was queued"
        );
        WorkerIo {
            underlay,
            inner,
            raw,
            pool,
        }
    }
}

/// Waits (briefly) for the kernel to hand back what it is still sending,
/// so that the pool the next worker gets has it back.
fn settle(underlay: &mut Side, inner: &mut Side, pool: &mut Pool) {
    let until = Instant::now() + COMPLETION_LIMIT;
    while underlay.in_flight + inner.in_flight > 0 && Instant::now() < until {
        let mut io = IoCounters::new(IoMode::Gateway);
        underlay.flush(&mut io);
        inner.flush(&mut io);
        underlay.complete(pool);
        inner.complete(pool);
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Both sockets' kernel counters, summed.
fn xsk_stats(underlay: &Side, inner: &Side) -> XskStats {
    let mut sum = XskStats::default();
    for s in [&underlay.socket, &inner.socket] {
        if let Ok(x) = s.statistics() {
            sum.rx_dropped += x.rx_dropped;
            sum.rx_invalid_descs += x.rx_invalid_descs;
            sum.tx_invalid_descs += x.tx_invalid_descs;
            sum.rx_ring_full += x.rx_ring_full;
            sum.rx_fill_ring_empty_descs += x.rx_fill_ring_empty_descs;
            sum.tx_ring_empty_descs += x.tx_ring_empty_descs;
        }
    }
    sum
}

/// The kernel's counts since `base` into `io`.
fn set_xsk_counts(io: &mut IoCounters, base: &XskStats, now: &XskStats) {
    for (e, b, n) in [
        (IoEvent::XskRxDropped, base.rx_dropped, now.rx_dropped),
        (IoEvent::XskRxRingFull, base.rx_ring_full, now.rx_ring_full),
        (
            IoEvent::XskFillRingEmpty,
            base.rx_fill_ring_empty_descs,
            now.rx_fill_ring_empty_descs,
        ),
        (
            IoEvent::XskRxInvalid,
            base.rx_invalid_descs,
            now.rx_invalid_descs,
        ),
        (
            IoEvent::XskTxInvalid,
            base.tx_invalid_descs,
            now.tx_invalid_descs,
        ),
    ] {
        io.set(e, n.saturating_sub(b));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Gaps count between rounds the worker polled through, not across a
    /// sleep; over 1 ms is a stall; busy time runs from a busy round's
    /// start to the next round's.
    #[test]
    fn the_loop_pace_is_kept() {
        let mut io = IoCounters::new(IoMode::Gateway);
        let mut lap = Lap::default();
        let ms = 1_000_000;
        lap.start(10 * ms, &mut io);
        lap.end(5, &mut io);
        lap.start(10 * ms + 50_000, &mut io);
        lap.end(0, &mut io);
        // Taken away for 3 ms while polling.
        lap.start(13 * ms + 50_000, &mut io);
        lap.end(0, &mut io);
        // Asleep for 100 ms: the worker's choice.
        lap.slept = true;
        lap.start(113 * ms, &mut io);
        lap.end(1, &mut io);
        assert_eq!(lap.longest_ns, 3 * ms);
        assert_eq!(io.get(IoEvent::LoopStalls), 1);
        assert_eq!(io.get(IoEvent::Rounds), 4);
        assert_eq!(io.get(IoEvent::BusyRounds), 2);
        assert_eq!(io.get(IoEvent::BusyNs), 50_000);
    }
}
