//! One worker: a TUN queue, a TAP queue and one UDP socket per local
//! endpoint, driven by epoll, feeding batches through its own pipeline.
//!
//! Per wake-up, each ready descriptor is read until it is empty or a batch
//! is full; the batch goes through the pipeline in one call, and what
//! comes out leaves in batches (`sendmmsg`; a TUN write per packet, where
//! super-packets make the count small). No allocation per packet: buffers
//! come from the worker's pool, and the UDP payload is received straight
//! into them behind room for the outer headers that the decap path parses.

use super::stats::{Carried, HostCounters, Totals, TunnelTraffic, WorkerSnapshot};
use super::trace::{Point, Tracer};
use std::io::{self, IoSlice, IoSliceMut};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};
use tep_dataplane::buffer::{
    ChecksumState, Gso, GsoKind, PacketId, PacketMeta, Pool, NO_TUNNEL, SUPER_PACKET_ROOM,
};
use tep_dataplane::clock::Tsc;
use tep_dataplane::config::{Config, DontFragment};
use tep_dataplane::geometry::{holds_pseudo_sum, transport_pseudo};
use tep_dataplane::pipeline::{Output, Pipeline, PipelineOptions};
use tep_dataplane::tunnel::TunnelTable;
use tep_dataplane::udp_train::train_end;
use tep_dataplane::vector::{PacketVector, VECTOR_SIZE};
use tep_dataplane::vnet::{VnetHeader, VNET_HDR_LEN};
use tep_dataplane::InnerLink;
use tep_sys::{Epoll, Event, EventFd, Gathered, RecvMeta, TunQueue, UdpSocket, MAX_BATCH};

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

/// State shared by the workers and the control thread.
#[derive(Debug, Default)]
pub struct Shared {
    /// Set to stop the workers (SIGTERM, reload).
    pub stop: AtomicBool,
    /// Generation of counters asked for; workers publish when theirs is older.
    pub refresh: AtomicU64,
    /// One snapshot per worker.
    pub snapshots: Mutex<Vec<WorkerSnapshot>>,
    /// Signalled on every publish.
    pub published: Condvar,
    /// Packet capture for `tep trace`.
    pub tracer: Tracer,
    /// What the workers of earlier configs counted.
    pub carried: Mutex<Carried>,
}

impl Shared {
    /// The daemon's counts since it started: `snapshots` (the running
    /// workers') on top of what the workers before the last reload counted.
    pub fn totals(&self, snapshots: &[WorkerSnapshot], config: &Config) -> Totals {
        let names: Vec<&str> = config.tunnels.iter().map(|t| t.name.as_str()).collect();
        let carried = self.carried.lock().unwrap_or_else(|e| e.into_inner());
        Totals::since_start(snapshots, &carried, &names)
    }

    /// Folds the stopped workers' last snapshots into [`Shared::carried`]
    /// (they counted under `config`). Called between a reload's stop and
    /// start, while no worker publishes.
    pub fn carry_over(&self, config: &Config) {
        let snaps = self
            .snapshots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let totals = self.totals(&snaps, config);
        *self.carried.lock().unwrap_or_else(|e| e.into_inner()) = Carried {
            totals,
            tunnels: config.tunnels.iter().map(|t| t.name.clone()).collect(),
        };
    }
}

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
}

/// The local (address, port) pairs the tunnels receive on, and which one
/// each tunnel sends from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Endpoints {
    /// Unique local endpoints, in order of first use.
    pub addrs: Vec<SocketAddr>,
    /// Per tunnel: its endpoint's index.
    pub of_tunnel: Vec<usize>,
    /// Per endpoint: whether it sends zero checksums (any tunnel on it
    /// does; the config allows only one checksum policy per socket to make
    /// sense, so the first tunnel's decides).
    pub zero_tx: Vec<bool>,
    /// Per endpoint: accepts zero checksums over IPv6.
    pub zero_rx: Vec<bool>,
    /// Per endpoint: the source port range of its first tunnel.
    pub source_ports: Vec<(u16, u16)>,
    /// Per endpoint: its first tunnel's outer Don't-Fragment (a socket
    /// sets DF for all it sends; `inherit` cannot be done per packet and
    /// is left to the kernel, which sets it).
    pub dont_fragment: Vec<Option<bool>>,
}

impl Endpoints {
    /// The endpoints of `config`'s tunnels.
    pub fn of(config: &Config) -> Endpoints {
        let mut e = Endpoints::default();
        for t in &config.tunnels {
            let a = SocketAddr::new(t.local, t.local_port);
            let i = match e.addrs.iter().position(|&x| x == a) {
                Some(i) => i,
                None => {
                    e.addrs.push(a);
                    e.zero_tx
                        .push(t.checksum == tep_dataplane::config::ChecksumMode::Zero);
                    e.zero_rx.push(false);
                    e.source_ports.push(t.source_ports);
                    e.dont_fragment.push(match t.df {
                        DontFragment::Set => Some(true),
                        DontFragment::Unset => Some(false),
                        DontFragment::Inherit => None,
                    });
                    e.addrs.len() - 1
                }
            };
            e.zero_rx[i] |= t.zero_checksum_rx;
            e.of_tunnel.push(i);
        }
        e
    }
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
}

/// Per-tunnel facts the sinks need, resolved once.
#[derive(Debug)]
struct Routes {
    endpoint: Vec<usize>,
    ethernet: Vec<bool>,
    endpoints: Vec<SocketAddr>,
    /// The tunnels, for finding GSO runs.
    table: TunnelTable,
}

impl Routes {
    /// The socket to send an outer packet from: its tunnel's endpoint, or
    /// for a reply without a tunnel (an Error Indication) the endpoint
    /// whose address and port are the packet's source.
    fn endpoint_of(&self, tunnel: u32, data: &[u8], l4: usize) -> Option<usize> {
        if tunnel != NO_TUNNEL {
            return self.endpoint.get(tunnel as usize).copied();
        }
        let (src, _) = tep_dataplane::decap::outer_addrs(data);
        let port = u16::from_be_bytes([data[l4], data[l4 + 1]]);
        self.endpoints
            .iter()
            .position(|&e| e == SocketAddr::new(src, port))
    }
}

/// The worker's counters besides the pipeline's.
#[derive(Debug)]
struct Tallies {
    tunnels: Vec<TunnelTraffic>,
    host: HostCounters,
    /// Send runs of datagrams as GSO trains (off when a socket refused).
    trains: bool,
}

/// Runs a worker until `shared.stop`; returns its descriptors.
pub fn run(setup: WorkerSetup) -> io::Result<WorkerIo> {
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
        outer_by_socket: true,
        // Written gathered (send_outer, write_inner): payloads go from the
        // buffer they were read into to the other side with no copy here.
        gather: true,
        // write_inner hands a partial inner checksum to the device as
        // NEEDS_CSUM (or completes it where the device has no header).
        inner_partial: true,
    };
    let mut pipeline = Pipeline::new(config, Tsc, options);
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
        table: TunnelTable::new(config),
    };
    let mut tallies = Tallies {
        tunnels: vec![TunnelTraffic::default(); config.tunnels.len()],
        host: HostCounters::default(),
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
    // Busy polling: epoll_wait without sleeping until `busy_poll` has gone
    // by since the last event, so that the next packet finds the worker
    // awake (no wake-up on its path).
    let busy_poll = Duration::from_micros(u64::from(config.host.busy_poll_us));
    let mut last_event = Instant::now();
    // Set once told to stop: from then on the worker serves what is
    // already queued (epoll without sleeping) and leaves when nothing is,
    // or after DRAIN_LIMIT under a flow that does not stop.
    let mut draining: Option<Instant> = None;
    let mut read_before_drain = 0;
    loop {
        let timeout = if draining.is_some() || last_event.elapsed() < busy_poll {
            0
        } else {
            100
        };
        epoll.wait(&mut events, timeout)?;
        if !events.is_empty() {
            last_event = Instant::now();
        }
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
                            &mut tallies.host,
                            &shared.tracer,
                        );
                        let mut to = Senders {
                            sockets: &mut io.sockets,
                            senders: &mut io.senders,
                        };
                        pipeline.encap_from(link, &mut pool, &mut input, &mut |pool, out| {
                            send_outer(pool, out, &mut to, &routes, &mut tallies, &shared.tracer)
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
                            &mut tallies.host,
                            &shared.tracer,
                        );
                        let now_ns = started.elapsed().as_nanos() as u64;
                        let WorkerIo {
                            tun,
                            tap,
                            sockets,
                            senders,
                        } = &mut io;
                        let mut to = Senders { sockets, senders };
                        pipeline.decap(
                            &mut pool,
                            &mut input,
                            now_ns,
                            &mut |o, pool, out| match o {
                                Output::Inner => write_inner(
                                    pool,
                                    out,
                                    tun.as_ref(),
                                    tap.as_ref(),
                                    &routes,
                                    &mut tallies,
                                    &shared.tracer,
                                ),
                                Output::Reply => send_outer(
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
        let wanted = shared.refresh.load(Ordering::Acquire);
        let read = tallies.host.device_rx + tallies.host.udp_rx;
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
                tallies.host,
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

/// Reads up to [`DEVICE_BUDGET`] packets from a TUN/TAP queue into `input`.
fn read_device(
    q: &TunQueue,
    link: InnerLink,
    pool: &mut Pool,
    input: &mut PacketVector,
    host: &mut HostCounters,
    tracer: &Tracer,
) {
    let mut hdr = [0u8; VNET_HDR_LEN];
    for _ in 0..DEVICE_BUDGET {
        if pool.available() < RESERVE {
            break;
        }
        let Some(id) = pool.alloc() else { break };
        let room = pool.data_room();
        pool.set_len(id, room);
        match q.read_packet(&mut hdr, pool.data_mut(id)) {
            Ok(n) => {
                pool.set_len(id, n);
                host.device_rx += 1;
                match VnetHeader::parse(&hdr).to_meta(n) {
                    Ok((csum, gso)) => {
                        let m = pool.meta_mut(id);
                        m.csum = csum;
                        m.gso = gso;
                        if gso.is_some() {
                            host.device_rx_super += 1;
                        }
                        tracer.record(Point::DeviceRx(link), pool.data(id));
                        let _ = input.push(id);
                    }
                    Err(_) => {
                        host.drop_bad_vnet_header += 1;
                        pool.free(id);
                    }
                }
            }
            Err(e) => {
                pool.free(id);
                if e.kind() != io::ErrorKind::WouldBlock {
                    tracing::warn!("device read: {e}");
                }
                break;
            }
        }
    }
}

/// One `recvmmsg` into fresh buffers, each behind room for the outer IP
/// and UDP headers, which are then written from what the socket reports
/// (source, local address, lengths). The kernel verified the UDP checksum
/// (or accepted a zero one where the socket allows it), so the packets are
/// marked `Verified`. Returns whether the batch came back full.
fn read_socket(
    sock: &mut UdpSocket,
    local: SocketAddr,
    pool: &mut Pool,
    input: &mut PacketVector,
    host: &mut HostCounters,
    tracer: &Tracer,
) -> bool {
    let hdr_len = if local.is_ipv6() { 48 } else { 28 };
    let want = MAX_BATCH.min(pool.available().saturating_sub(RESERVE));
    let Some(first) = (want > 0).then(|| pool.alloc()).flatten() else {
        return false;
    };
    let mut ids = [first; MAX_BATCH];
    let mut n = 1;
    while n < want {
        match pool.alloc() {
            Some(id) => ids[n] = id,
            None => break,
        }
        n += 1;
    }
    let mut metas = [RecvMeta::default(); MAX_BATCH];
    let got = {
        let rooms: [&mut [u8]; MAX_BATCH] = pool.rooms_mut(&ids[..n], hdr_len);
        let mut iov = rooms.map(IoSliceMut::new);
        sock.recv_batch(&mut iov[..n], &mut metas[..n])
    };
    host.udp_syscalls += 1;
    let got = match got {
        Ok(g) => g,
        Err(e) => {
            if e.kind() != io::ErrorKind::WouldBlock {
                tracing::warn!("udp receive on {local}: {e}");
            }
            0
        }
    };
    for (k, &id) in ids[..n].iter().enumerate() {
        if k >= got {
            pool.free(id);
            continue;
        }
        let m = metas[k];
        let first = m.segment_size.map_or(m.len, usize::from).min(m.len);
        pool.set_len(id, hdr_len + m.len);
        let outer = OuterFields {
            source: m.source,
            local,
            tos: m.tos,
            ttl: m.ttl,
        };
        write_outer_headers(pool.data_mut(id), &outer, first);
        let meta = pool.meta_mut(id);
        meta.csum = ChecksumState::Verified;
        meta.l4 = (hdr_len - 8) as u16;
        host.udp_rx += 1;
        if let Some(seg) = m.segment_size {
            meta.gso = Some(Gso {
                kind: GsoKind::Udp,
                segment_size: seg,
            });
            host.udp_rx_trains += 1;
        }
        tracer.record(Point::UdpRx, pool.data(id));
        let _ = input.push(id);
    }
    got == n
}

/// What the socket tells of a received datagram's outer headers.
struct OuterFields {
    source: SocketAddr,
    local: SocketAddr,
    /// TOS / traffic class: the decap path merges its ECN field into the
    /// inner one (RFC 6040).
    tos: u8,
    /// TTL / hop limit (0 if not reported: written as 64).
    ttl: u8,
}

/// The outer IPv4/IPv6 + UDP headers of a received datagram (the first of
/// a GRO train: `first` payload bytes), as the decap path expects them.
fn write_outer_headers(buf: &mut [u8], outer: &OuterFields, first: usize) {
    let (source, local, tos) = (outer.source, outer.local, outer.tos);
    let ttl = if outer.ttl == 0 { 64 } else { outer.ttl };
    let udp_len = (first + 8) as u16;
    let l4 = match (source.ip(), local.ip()) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let total = (20 + first + 8) as u16;
            buf[..20].copy_from_slice(&[
                0x45, tos, 0, 0, 0, 0, 0x40, 0, ttl, 17, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            ]);
            buf[2..4].copy_from_slice(&total.to_be_bytes());
            buf[12..16].copy_from_slice(&s.octets());
            buf[16..20].copy_from_slice(&d.octets());
            let c = tep_csum::Sum::of(&buf[..20]).checksum();
            buf[10..12].copy_from_slice(&c.to_be_bytes());
            20
        }
        (s, d) => {
            let s = match s {
                IpAddr::V6(a) => a,
                IpAddr::V4(a) => a.to_ipv6_mapped(),
            };
            let d = match d {
                IpAddr::V6(a) => a,
                IpAddr::V4(a) => a.to_ipv6_mapped(),
            };
            buf[..8].copy_from_slice(&[0x60 | tos >> 4, tos << 4, 0, 0, 0, 0, 17, ttl]);
            buf[4..6].copy_from_slice(&udp_len.to_be_bytes());
            buf[8..24].copy_from_slice(&s.octets());
            buf[24..40].copy_from_slice(&d.octets());
            40
        }
    };
    buf[l4..l4 + 2].copy_from_slice(&source.port().to_be_bytes());
    buf[l4 + 2..l4 + 4].copy_from_slice(&local.port().to_be_bytes());
    buf[l4 + 4..l4 + 6].copy_from_slice(&udp_len.to_be_bytes());
    // Not the sender's checksum (the socket does not give it): a non-zero
    // stand-in; the packet is marked Verified and nobody reads it.
    buf[l4 + 6..l4 + 8].copy_from_slice(&[0xff, 0xff]);
}

/// Datagrams in an outer packet or train.
fn datagrams(len: usize, hdr: usize, gso: Option<Gso>) -> u64 {
    match gso {
        Some(g) if g.segment_size > 0 => len
            .saturating_sub(hdr)
            .div_ceil(usize::from(g.segment_size))
            .max(1) as u64,
        _ => 1,
    }
}

/// The sockets outer packets leave from.
struct Senders<'a> {
    /// Per endpoint: the receiving socket (replies, and all traffic when
    /// there are no sending sockets).
    sockets: &'a mut [UdpSocket],
    /// Per endpoint: the sending sockets, one source port each.
    senders: &'a mut [Vec<UdpSocket>],
}

impl Senders<'_> {
    /// Which socket sends an outer packet: (endpoint, 0) for the receiving
    /// one, (endpoint, 1 + k) for sending socket k. A tunnel's flow keeps
    /// one sending socket: the pipeline's source port, which the flow hash
    /// chose, picks it.
    fn slot_of(
        &self,
        routes: &Routes,
        tunnel: u32,
        data: &[u8],
        l4: usize,
    ) -> Option<(usize, usize)> {
        let e = routes.endpoint_of(tunnel, data, l4)?;
        let n = self.senders.get(e).map_or(0, Vec::len);
        if tunnel == NO_TUNNEL || n == 0 {
            return Some((e, 0));
        }
        let port = u16::from_be_bytes([data[l4], data[l4 + 1]]);
        Some((e, 1 + usize::from(port) % n))
    }

    /// The local port of the socket at `slot`.
    fn port_of(&self, (e, k): (usize, usize)) -> u16 {
        match k {
            0 => self.sockets[e].local_addr().port(),
            k => self.senders[e][k - 1].local_addr().port(),
        }
    }

    fn socket(&mut self, (e, k): (usize, usize)) -> &mut UdpSocket {
        match k {
            0 => &mut self.sockets[e],
            k => &mut self.senders[e][k - 1],
        }
    }
}

/// Sends a vector of outer packets (full IP/UDP headers, as the pipeline
/// builds them) from their sockets ([`Senders::slot_of`]): the UDP payload
/// goes, the kernel writes the headers. Consecutive datagrams of one flow
/// (the segments of a super-packet) leave as one GSO message gathered
/// straight from their buffers: one syscall, no copy into a train. Frees
/// every buffer.
fn send_outer(
    pool: &mut Pool,
    out: &mut PacketVector,
    to: &mut Senders<'_>,
    routes: &Routes,
    tallies: &mut Tallies,
    tracer: &Tracer,
) {
    {
        let ids = out.as_slice();
        let mut slots = [None; VECTOR_SIZE];
        for (slot, &id) in slots.iter_mut().zip(ids) {
            let l4 = usize::from(pool.meta(id).l4);
            *slot = to.slot_of(routes, pool.meta(id).tunnel, pool.data(id), l4);
            // The header says what goes on the wire (a trace shows it): the
            // kernel writes the sending socket's port, not the pipeline's.
            if let Some(port) = slot.map(|s| to.port_of(s)) {
                pool.data_mut(id)[l4..l4 + 2].copy_from_slice(&port.to_be_bytes());
            }
        }
        let pool: &Pool = pool;
        let slots = &mut slots[..ids.len()];
        // One socket at a time, in the order they first appear; a packet
        // with no socket (cannot happen with a valid config) stays None.
        while let Some(slot) = slots.iter().flatten().next().copied() {
            let mut mine = [ids[0]; VECTOR_SIZE];
            let mut n = 0;
            for (s, &id) in slots.iter_mut().zip(ids) {
                if *s == Some(slot) {
                    mine[n] = id;
                    n += 1;
                    *s = None;
                }
            }
            send_from(to.socket(slot), pool, &mine[..n], routes, tallies, tracer);
        }
    }
    for &id in out.as_slice() {
        pool.free(id);
    }
}

/// [`send_outer`]'s part for one socket: `mine`, in order.
fn send_from(
    sock: &mut UdpSocket,
    pool: &Pool,
    mine: &[PacketId],
    routes: &Routes,
    tallies: &mut Tallies,
    tracer: &Tracer,
) {
    let placeholder = SocketAddr::new(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), 0);
    // Each datagram's UDP payload: its buffer's part, then its
    // tail (a segment's payload, left in the super-packet).
    let mut slices = [IoSlice::new(&[]); 2 * VECTOR_SIZE];
    let mut first_part = [0usize; VECTOR_SIZE + 1];
    let mut nslices = 0;
    for (k, &id) in mine.iter().enumerate() {
        first_part[k] = nslices;
        let d = pool.data(id);
        for part in
            core::iter::once(&d[usize::from(pool.meta(id).l4) + 8..]).chain(pool.tail_parts(id))
        {
            if let Some(slot) = slices.get_mut(nslices) {
                *slot = IoSlice::new(part);
                nslices += 1;
            }
        }
    }
    first_part[mine.len()] = nslices;
    // One syscall's worth of messages at a time: a fill of 64 entries per
    // call, not of a vector's 256 (which cost more than the ACKs it sent).
    let mut msgs = [Gathered {
        dest: placeholder,
        parts: &[],
        segment_size: None,
        tos: None,
        ttl: None,
    }; MAX_BATCH];
    let mut counts = [0u64; MAX_BATCH];
    let mut k = 0;
    let mut i = 0;
    while i < mine.len() {
        let j = if tallies.trains {
            train_end(pool, mine, i, &routes.table)
        } else {
            i + 1
        };
        let first = mine[i];
        let m = *pool.meta(first);
        let data = pool.data(first);
        let total = pool.total_len(first);
        let l4 = usize::from(m.l4);
        let (_, dst) = tep_dataplane::decap::outer_addrs(data);
        let port = u16::from_be_bytes([data[l4 + 2], data[l4 + 3]]);
        for (k, &id) in mine[i..j].iter().enumerate() {
            if tracer.active() {
                // The outer headers, then the UDP payload's parts.
                let d = pool.data(id);
                let mut whole = [
                    IoSlice::new(&d[..l4 + 8]),
                    IoSlice::new(&[]),
                    IoSlice::new(&[]),
                ];
                let parts = &slices[first_part[i + k]..first_part[i + k + 1]];
                let n = parts.len().min(2);
                whole[1..1 + n].copy_from_slice(&parts[..n]);
                tracer.record_parts(Point::UdpTx, &whole[..1 + n]);
            }
            if let Some(t) = tallies.tunnels.get_mut(m.tunnel as usize) {
                t.tx_packets += 1;
                t.tx_bytes += (pool.total_len(id) - l4 - 8) as u64;
            }
        }
        tallies.host.udp_tx += 1;
        if j - i > 1 {
            tallies.host.udp_tx_trains += 1;
        }
        // The DSCP, ECN and TTL the pipeline chose (one per train:
        // train_end), for the kernel to write; a TTL of 0 (inherited
        // from an inner 0) would fail the whole batch (EINVAL).
        let (tos, ttl) = tep_dataplane::decap::outer_tos_ttl(data);
        msgs[k] = Gathered {
            dest: SocketAddr::new(dst, port),
            parts: &slices[first_part[i]..first_part[j]],
            segment_size: (j - i > 1).then(|| (total - l4 - 8) as u16),
            tos: Some(tos),
            ttl: (ttl > 0).then_some(ttl),
        };
        counts[k] = (j - i) as u64;
        k += 1;
        i = j;
        if k == MAX_BATCH || i == mine.len() {
            send_all(
                sock,
                &msgs[..k],
                &counts[..k],
                &mut tallies.host,
                &mut tallies.trains,
            );
            k = 0;
        }
    }
}

/// Sends `msgs`, retrying what the socket did not take; counts what is
/// lost. A socket whose send queue is full is waited for briefly (the
/// back-pressure a TUN lacks), then the rest is dropped. A socket that
/// refuses GSO turns `trains` off for good.
fn send_all(
    sock: &mut UdpSocket,
    msgs: &[Gathered<'_>],
    counts: &[u64],
    host: &mut HostCounters,
    trains: &mut bool,
) {
    let mut sent = 0;
    let mut waits = 0;
    while sent < msgs.len() {
        host.udp_syscalls += 1;
        match sock.send_gathered(&msgs[sent..]) {
            Ok(0) => {
                host.drop_send_failed += counts[sent..].iter().sum::<u64>();
                return;
            }
            Ok(k) => sent += k,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && waits < 20 => {
                waits += 1;
                std::thread::sleep(Duration::from_micros(200));
            }
            Err(e) => {
                if msgs[sent].segment_size.is_some() && !sock.capabilities().gso {
                    tracing::warn!(
                        "{}: {e}; sending without GSO from now on",
                        sock.local_addr()
                    );
                    host.drop_gso_refused += counts[sent];
                    *trains = false;
                } else {
                    if e.kind() != io::ErrorKind::WouldBlock {
                        tracing::debug!("udp send from {}: {e}", sock.local_addr());
                    }
                    host.drop_send_failed += counts[sent];
                }
                sent += 1;
            }
        }
    }
}

/// Writes decapsulated packets and frames to the TUN or TAP, with the
/// virtio-net header that carries their checksum and GRO state. Frees
/// every buffer.
fn write_inner(
    pool: &mut Pool,
    out: &mut PacketVector,
    tun: Option<&TunQueue>,
    tap: Option<&TunQueue>,
    routes: &Routes,
    tallies: &mut Tallies,
    tracer: &Tracer,
) {
    let mut hdr = [0u8; VNET_HDR_LEN];
    for &id in out.as_slice() {
        let mut m = *pool.meta(id);
        let t = m.tunnel as usize;
        let ethernet = routes.ethernet.get(t).copied().unwrap_or(false);
        let queue = if ethernet { tap } else { tun };
        let Some(q) = queue else {
            tallies.host.drop_no_device += 1;
            pool.free(id);
            continue;
        };
        // Merged trains (tails) come with GRO only, which needs the header.
        debug_assert!(m.tail.is_none() || q.has_vnet_hdr());
        if q.has_vnet_hdr() {
            m.csum = inner_checksum(pool.data(id), &m);
            VnetHeader::for_packet(pool.data_mut(id), &m).emit(&mut hdr);
        } else {
            // No header to carry a partial checksum: the packet goes as it
            // came, and the host verifies it; one a same-host sender left
            // partial is completed first.
            if let ChecksumState::Partial { start, offset } = inner_checksum(pool.data(id), &m) {
                complete_partial(pool.data_mut(id), &m, start, offset);
            }
            hdr = [0; VNET_HDR_LEN];
        }
        let data = pool.data(id);
        let mut parts = [IoSlice::new(&[]); TunQueue::MAX_PARTS];
        parts[0] = IoSlice::new(data);
        let mut nparts = 1;
        let mut len = data.len();
        for p in pool.tail_parts(id) {
            // A train holds at most 64 datagrams: always room.
            if let Some(slot) = parts.get_mut(nparts) {
                *slot = IoSlice::new(p);
                nparts += 1;
                len += p.len();
            }
        }
        let parts = &parts[..nparts];
        // A GRO super-packet counts as the segments it holds: its payload
        // after the transport header, in segment-size pieces.
        let l4 = usize::from(m.l4);
        let transport = match (m.gso.map(|g| g.kind), data.get(l4 + 12)) {
            (Some(GsoKind::Tcp4 | GsoKind::Tcp6), Some(&off)) => usize::from(off >> 4) * 4,
            _ => 8,
        };
        let count = datagrams(len, l4 + transport, m.gso);
        tracer.record_parts(
            Point::DeviceTx(if ethernet {
                InnerLink::Ethernet
            } else {
                InnerLink::Ip
            }),
            parts,
        );
        match q.write_gathered(&hdr, parts) {
            Ok(_) => {
                tallies.host.device_tx += 1;
                if m.gso.is_some() {
                    tallies.host.device_tx_super += 1;
                }
                if let Some(s) = tallies.tunnels.get_mut(t) {
                    s.rx_packets += count;
                    s.rx_bytes += len as u64;
                }
            }
            Err(e) => {
                tracing::debug!("device write: {e}");
                tallies.host.drop_device_write += count;
            }
        }
        pool.free(id);
    }
}

/// The inner TCP/UDP checksum state of a decapsulated packet that
/// nobody verified (the socket vouches for the outer datagram only).
///
/// A Linux sender on this host — a kernel tunnel in another namespace,
/// over veth — leaves the inner checksum partial: the field holds the
/// pseudo-header sum (`CHECKSUM_PARTIAL`), veth never completes it, and
/// the UDP socket hands the payload over as it is. The kernel's own tunnel
/// would pass such a packet on still partial, so it goes to the device
/// partial too (`NEEDS_CSUM`): trusted on local delivery, completed if the
/// host forwards it. A checksum that verifies is marked `Verified` (the
/// host does not sum it again); anything else stays `None` and the host
/// verifies, drops and counts it. A corrupted packet whose checksum field
/// happens to equal its pseudo-header sum passes: one in 65536, what the
/// checksum itself lets through anyway.
fn inner_checksum(data: &[u8], m: &PacketMeta) -> ChecksumState {
    let (l3, l4) = (usize::from(m.l3), usize::from(m.l4));
    let Some(field) = tep_dataplane::geometry::transport_checksum_offset(m.inner_proto) else {
        return m.csum;
    };
    if m.gso.is_some() || m.csum != ChecksumState::None || l4 <= l3 {
        return m.csum;
    }
    let Some(end) = transport_end(data, l3) else {
        return m.csum;
    };
    let at = l4 + field;
    if at + 2 > end {
        return m.csum;
    }
    // inner_pseudo: none for a UDP checksum of zero (none sent, IPv4).
    let data = &data[..end];
    let Some(pseudo) = transport_pseudo(data, l3, l4, m.inner_proto) else {
        return m.csum;
    };
    if pseudo.add(tep_csum::Sum::of(&data[l4..])).verifies() {
        return ChecksumState::Verified;
    }
    if holds_pseudo_sum(data, l3, l4, m.inner_proto) {
        return ChecksumState::Partial {
            start: l4 as u16,
            offset: at as u16,
        };
    }
    m.csum
}

/// Where the transport segment of the IP packet at `l3` ends: where the
/// IP header says, not at any Ethernet padding. None when it does not fit.
fn transport_end(data: &[u8], l3: usize) -> Option<usize> {
    let word = |at: usize| usize::from(u16::from_be_bytes([data[at], data[at + 1]]));
    let end = match data.get(l3).map(|b| b >> 4) {
        Some(4) if data.len() >= l3 + 20 => l3 + word(l3 + 2),
        Some(6) if data.len() >= l3 + 40 => l3 + 40 + word(l3 + 4),
        _ => return None,
    };
    (end <= data.len()).then_some(end)
}

/// Completes a partial inner checksum (as [`inner_checksum`] found it) in
/// place: the field holds the pseudo-header sum, so the sum of the segment
/// as it is is the sum the checksum complements.
fn complete_partial(data: &mut [u8], m: &PacketMeta, start: u16, offset: u16) {
    let (start, offset) = (usize::from(start), usize::from(offset));
    let Some(end) = transport_end(data, usize::from(m.l3)) else {
        return;
    };
    let _ = tep_dataplane::geometry::complete_partial_in(data, start, offset, end);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outer_headers_parse_as_the_decap_path_expects() {
        let mut b = [0u8; 28 + 100];
        let s: SocketAddr = "192.0.2.2:40000".parse().unwrap();
        let l: SocketAddr = "192.0.2.1:4789".parse().unwrap();
        let outer = |source, local, tos, ttl| OuterFields {
            source,
            local,
            tos,
            ttl,
        };
        write_outer_headers(&mut b, &outer(s, l, 0xbb, 9), 100);
        let ip = tep_wire::ipv4::Packet::new_checked(&b[..]).unwrap();
        assert!(ip.verify_checksum());
        assert_eq!(ip.total_len(), 128);
        assert_eq!(tep_dataplane::decap::outer_addrs(&b), (s.ip(), l.ip()));
        assert_eq!(tep_dataplane::decap::outer_tos_ttl(&b), (0xbb, 9));
        assert_eq!(&b[20..26], &[0x9c, 0x40, 0x12, 0xb5, 0, 108]);
        // Not reported: TOS 0, TTL 64.
        write_outer_headers(&mut b, &outer(s, l, 0, 0), 100);
        assert_eq!(tep_dataplane::decap::outer_tos_ttl(&b), (0, 64));
        let mut b6 = [0u8; 48 + 10];
        let s: SocketAddr = "[2001:db8::2]:1".parse().unwrap();
        let l: SocketAddr = "[2001:db8::1]:6081".parse().unwrap();
        write_outer_headers(&mut b6, &outer(s, l, 0x2b, 200), 10);
        let ip = tep_wire::ipv6::Packet::new_checked(&b6[..]).unwrap();
        assert_eq!(ip.payload_len(), 18);
        assert_eq!(ip.traffic_class(), 0x2b);
        assert_eq!(ip.hop_limit(), 200);
        assert_eq!(ip.flow_label(), 0);
        assert_eq!(tep_dataplane::decap::outer_addrs(&b6), (s.ip(), l.ip()));
    }

    #[test]
    fn endpoints_are_shared_by_tunnels_on_one_address_and_port() {
        let c = Config::parse(
            r#"
[[tunnel]]
name = "a"
kind = "vxlan"
local = "10.0.0.1"
remote = "10.0.0.2"
vni = 1
inner_macs = ["02:00:00:00:00:01"]
[[tunnel]]
name = "b"
kind = "vxlan"
local = "10.0.0.1"
remote = "10.0.0.3"
vni = 2
[[tunnel]]
name = "c"
kind = "gue"
local = "10.0.0.1"
remote = "10.0.0.2"
checksum = "zero"
"#,
        )
        .unwrap();
        let e = Endpoints::of(&c);
        assert_eq!(
            e.addrs,
            vec![
                "10.0.0.1:4789".parse::<SocketAddr>().unwrap(),
                "10.0.0.1:6080".parse().unwrap()
            ]
        );
        assert_eq!(e.of_tunnel, vec![0, 0, 1]);
        assert_eq!(e.zero_tx, vec![false, true]);
    }

    #[test]
    fn inner_checksums_are_verified_partial_or_left_to_the_host() {
        let mut pool = Pool::new(1, 2048);
        let id = pool.alloc().unwrap();
        let mut m = *pool.meta(id);
        m.l3 = 14;
        m.l4 = 34;
        m.inner_proto = 6;
        // Ethernet, IPv4 10.9.0.2 → 10.9.0.1, TCP with 6 bytes, then 4
        // bytes of Ethernet padding.
        let mut f = vec![0u8; 14 + 20 + 20 + 6 + 4];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14..34].copy_from_slice(&[
            0x45, 0, 0, 46, 0, 1, 0x40, 0, 64, 6, 0, 0, 10, 9, 0, 2, 10, 9, 0, 1,
        ]);
        f[34..38].copy_from_slice(&[0x9c, 0x40, 0x14, 0x51]);
        f[46] = 5 << 4;
        f[54..60].copy_from_slice(b"abcdef");
        let pseudo = tep_csum::pseudo_header_v4([10, 9, 0, 2], [10, 9, 0, 1], 6, 26);
        // As a Linux sender leaves it: the pseudo-header sum.
        f[50..52].copy_from_slice(&pseudo.value().to_be_bytes());
        assert_eq!(
            inner_checksum(&f, &m),
            ChecksumState::Partial {
                start: 34,
                offset: 50
            }
        );
        f[50..52].copy_from_slice(&[0, 0]);
        let c = pseudo.add(tep_csum::Sum::of(&f[34..60])).checksum();
        f[50..52].copy_from_slice(&c.to_be_bytes());
        assert_eq!(inner_checksum(&f, &m), ChecksumState::Verified);
        // Completing the partial form gives the same checksum.
        let mut p = f.clone();
        p[50..52].copy_from_slice(&pseudo.value().to_be_bytes());
        complete_partial(&mut p, &m, 34, 50);
        assert_eq!(p, f);
        // Super-packets keep their state: the device header marks them.
        let mut g = m;
        g.gso = Some(Gso {
            kind: GsoKind::Tcp4,
            segment_size: 1000,
        });
        assert_eq!(inner_checksum(&f, &g), ChecksumState::None);
        f[55] ^= 1;
        assert_eq!(inner_checksum(&f, &m), ChecksumState::None);
        // A UDP datagram without a checksum stays as it is.
        m.inner_proto = 17;
        f[23] = 17;
        f[40..42].copy_from_slice(&[0, 0]);
        assert_eq!(inner_checksum(&f, &m), ChecksumState::None);
        // A truncated packet is left to the host.
        m.inner_proto = 6;
        assert_eq!(inner_checksum(&f[..40], &m), ChecksumState::None);
    }

    #[test]
    fn datagram_counts() {
        let g = Some(Gso {
            kind: GsoKind::Udp,
            segment_size: 100,
        });
        assert_eq!(datagrams(28 + 250, 28, g), 3);
        assert_eq!(datagrams(28 + 250, 28, None), 1);
    }
}
