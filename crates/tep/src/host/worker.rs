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

use super::device_io::{read_device, write_inner};
use super::endpoints::Endpoints;
use super::udp_io::{read_socket, send_outer, Routes, Senders, Tallies};
use super::uplink::write_frames;
use crate::daemon::idle::{bytes_in, Idle};
use crate::daemon::liveness::Beat;
use crate::daemon::state::Shared;
use crate::daemon::stats::{IoCounters, IoEvent, TunnelTraffic, WorkerSnapshot};
use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tep_config::Config;
use tep_dataplane::session::WorkerLink;
use tep_dataplane::InnerLink;
use tep_dataplane::LinkHeader;
use tep_dataplane::Tsc;
use tep_dataplane::TunnelTable;
use tep_dataplane::{InnerChecksums, OuterLayers, Output, Pipeline, PipelineOptions};
use tep_dataplane::{PacketVector, VECTOR_SIZE};
use tep_dataplane::{Pool, SUPER_PACKET_ROOM};
use tep_sys::{Epoll, Event, EventFd, TunQueue, UdpSocket, MAX_BATCH};

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
/// The longest a stopping worker keeps serving packets already queued.
const DRAIN_LIMIT: Duration = Duration::from_millis(200);
/// How often counters are published without being asked.
const PUBLISH_EVERY: Duration = Duration::from_millis(200);

const TOKEN_WAKE: u64 = 0;
const TOKEN_TUN: u64 = 1;
const TOKEN_TAP: u64 = 2;
const TOKEN_SOCKET: u64 = 16;

/// The descriptors a worker owns; handed back when it stops so that a
/// reload can reuse them.
#[derive(Debug, Default)]
pub struct WorkerIo {
    /// The TUN queue (L3 tunnels), if any tunnel needs it.
    pub tun: Option<TunQueue>,
    /// The TAP queue (L2 tunnels).
    pub tap: Option<TunQueue>,
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
    /// Position among the workers (its snapshot slot).
    pub index: usize,
    /// The validated config.
    pub config: Arc<Config>,
    /// Its descriptors.
    pub io: WorkerIo,
    /// Its endpoints (sockets in `io` in this order).
    pub endpoints: Endpoints,
    /// Pin to this CPU.
    pub cpu: Option<usize>,
    /// Offloads are on: vnet headers, GRO to the device, GSO trains.
    pub offloads: bool,
    /// Wakes the worker (stop, refresh, trace).
    pub wake: Arc<EventFd>,
    /// Shared with the control thread.
    pub shared: Arc<Shared>,
    /// A UPF worker's link to the session tables' control plane, and its
    /// downlink buffers (`[pfcp].buffer_packets`, `buffer_limit`).
    pub sessions: Option<(WorkerLink, u32, u32)>,
}

/// Runs a worker until `shared.stop`; returns its descriptors.
pub fn run(setup: WorkerSetup, beat: &Beat) -> io::Result<WorkerIo> {
    if let Some(cpu) = setup.cpu {
        if let Err(e) = tep_sys::thread::pin_current_thread(cpu) {
            tracing::warn!(worker = setup.index, cpu, "cannot pin: {e}");
        }
    }
    let config = &setup.config;
    let gso_ok = setup
        .io
        .sockets
        .iter()
        .chain(setup.io.senders.iter().flatten())
        .all(|s| s.capabilities().gso);
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
    if let Some((_, header)) = &setup.io.uplink {
        // Every tunnel's frames go to the uplink, whatever the remote.
        for t in &config.tunnels {
            pipeline.next_hops().set(t.remote, Some(*header));
        }
    }
    let upf = setup.sessions.is_some();
    if let Some((link, per_session, limit)) = setup.sessions.clone() {
        pipeline.attach_sessions(link, per_session, limit);
    }
    let mut reports: Vec<u32> = Vec::new();
    let mut pool = Pool::new(BUFFERS, SUPER_PACKET_ROOM);
    let mut io = setup.io;
    let routes = Routes {
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
    };
    let mut tallies = Tallies {
        tunnels: vec![TunnelTraffic::default(); config.tunnels.len()],
        io: IoCounters::default(),
        trains: setup.offloads && gso_ok,
    };
    let epoll = Epoll::new()?;
    use std::os::fd::AsRawFd;
    epoll.add(setup.wake.as_raw_fd(), TOKEN_WAKE, true, false)?;
    if let Some(q) = &io.tun {
        epoll.add(q.as_raw_fd(), TOKEN_TUN, true, false)?;
    }
    if let Some(q) = &io.tap {
        epoll.add(q.as_raw_fd(), TOKEN_TAP, true, false)?;
    }
    for (i, s) in io.sockets.iter().enumerate() {
        epoll.add(s.as_raw_fd(), TOKEN_SOCKET + i as u64, true, false)?;
    }
    let started = Instant::now();
    let mut events: Vec<Event> = Vec::with_capacity(64);
    let mut input = PacketVector::new();
    let mut published_at = Instant::now();
    let mut generation = 0;
    let shared = &setup.shared;
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
            tallies.io.count(IoEvent::Sleeps, 1);
            100
        };
        epoll.wait(&mut events, timeout)?;
        if upf {
            // Between vectors: the sessions the N4 thread changed, and
            // what they release (held packets, End Markers).
            let WorkerIo {
                sockets,
                senders,
                uplink,
                ..
            } = &mut io;
            let mut to = Senders { sockets, senders };
            pipeline.apply_session_changes(&mut pool, &mut |_, pool, out| match uplink {
                Some((q, _)) => {
                    write_frames(q, pool, out, &routes.table, &mut tallies, &shared.tracer)
                }
                None => send_outer(pool, out, &mut to, &routes, &mut tallies, &shared.tracer),
            });
        }
        let mut round_bytes = 0;
        let drained = match draining {
            Some(since) => events.is_empty() || since.elapsed() >= DRAIN_LIMIT,
            None => false,
        };
        for ev in events.iter() {
            match ev.token {
                TOKEN_WAKE => {
                    let _ = setup.wake.drain();
                }
                TOKEN_TUN | TOKEN_TAP => {
                    let (queue, link) = if ev.token == TOKEN_TUN {
                        (io.tun.as_ref(), InnerLink::Ip)
                    } else {
                        (io.tap.as_ref(), InnerLink::Ethernet)
                    };
                    if let Some(q) = queue {
                        read_device(
                            q,
                            link,
                            &mut pool,
                            &mut input,
                            (DEVICE_BUDGET, RESERVE),
                            &mut tallies.io,
                            &shared.tracer,
                        );
                        round_bytes += bytes_in(&pool, &input);
                        let WorkerIo {
                            sockets,
                            senders,
                            uplink,
                            ..
                        } = &mut io;
                        let mut to = Senders { sockets, senders };
                        pipeline.encap_from(link, &mut pool, &mut input, &mut |_, pool, out| {
                            match uplink {
                                Some((q, _)) => write_frames(
                                    q,
                                    pool,
                                    out,
                                    &routes.table,
                                    &mut tallies,
                                    &shared.tracer,
                                ),
                                None => send_outer(
                                    pool,
                                    out,
                                    &mut to,
                                    &routes,
                                    &mut tallies,
                                    &shared.tracer,
                                ),
                            }
                        });
                    }
                }
                t => {
                    let i = (t - TOKEN_SOCKET) as usize;
                    for _ in 0..SOCKET_ROUNDS {
                        let local = setup.endpoints.addrs[i];
                        let full = read_socket(
                            &mut io.sockets[i],
                            local,
                            &mut pool,
                            &mut input,
                            RESERVE,
                            &mut tallies.io,
                            &shared.tracer,
                        );
                        round_bytes += bytes_in(&pool, &input);
                        let now_ns = started.elapsed().as_nanos() as u64;
                        let WorkerIo {
                            tun,
                            tap,
                            sockets,
                            senders,
                            ..
                        } = &mut io;
                        let mut to = Senders { sockets, senders };
                        pipeline.decap(
                            &mut pool,
                            &mut input,
                            now_ns,
                            &mut |o, pool, out| match o {
                                // The TUN/TAP is the kernel's stack.
                                Output::Inner | Output::Kernel => write_inner(
                                    pool,
                                    out,
                                    (tun.as_ref(), tap.as_ref()),
                                    &routes,
                                    &mut tallies,
                                    &shared.tracer,
                                ),
                                Output::Reply | Output::Outer => send_outer(
                                    pool,
                                    out,
                                    &mut to,
                                    &routes,
                                    &mut tallies,
                                    &shared.tracer,
                                ),
                            },
                        );
                        if !full {
                            break;
                        }
                    }
                }
            }
        }
        if !events.is_empty() {
            idle.worked(Instant::now(), round_bytes);
        }
        if upf {
            pipeline.take_session_reports(&mut reports);
            shared.upf.report(&mut reports);
        }
        let wanted = shared.refresh.load(Ordering::Acquire);
        let read = tallies.io.get(IoEvent::DeviceRx) + tallies.io.get(IoEvent::UdpRx);
        if draining.is_none() && shared.stop.load(Ordering::Acquire) {
            draining = Some(Instant::now());
            read_before_drain = read;
        }
        if wanted != generation || published_at.elapsed() >= PUBLISH_EVERY || drained {
            generation = wanted;
            published_at = Instant::now();
            let snap = WorkerSnapshot::new(
                pipeline.runtime().nodes(),
                pipeline.counters(),
                &tallies.tunnels,
                tallies.io,
                generation,
            );
            let mut all = shared.snapshots.lock().unwrap_or_else(|e| e.into_inner());
            if all.len() <= setup.index {
                all.resize(setup.index + 1, WorkerSnapshot::default());
            }
            all[setup.index] = snap;
            drop(all);
            shared.published.notify_all();
        }
        if drained {
            tracing::info!(
                worker = setup.index,
                // Device packets and socket buffers (a GRO train is one).
                reads_while_draining = read - read_before_drain,
                delivered = tallies.tunnels.iter().map(|t| t.rx_packets).sum::<u64>(),
                "stopped; served what was queued"
            );
            return Ok(io);
        }
    }
}
