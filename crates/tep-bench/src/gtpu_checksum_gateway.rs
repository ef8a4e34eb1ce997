//! Seed 000's experiment: 1492-byte packets at a steady rate into a tep
//! gateway that sends them on as GTP-U over IPv6, UDP checksum zero,
//! computed in software (`full`), left to the device (`offload`) or
//! local checksum offload (`lco`); loss and latency per case, beside the
//! VPP figures the seed published.
//!
//! The sender paces probes ([`super::probe`]) out of UDP sockets (bound
//! to an interface with `--tx`): one per sender thread, each thread its
//! own flow and sequence space, the rate split among them, what is due
//! sent in `sendmmsg` batches. The sink takes GTP-U datagrams on port
//! 2152 with the kernel's receive time stamps (SO_TIMESTAMPNS), finds the
//! probe behind the GTP-U and inner IP/UDP headers and counts it by
//! (thread, sequence). By default ([`run_in_namespaces`]) the whole setup
//! is built here: a generator namespace, tep's, and the sink's, joined by
//! veths of one queue per worker, each party on CPUs of its own where
//! there are enough ([`super::seat`]).

use super::probe::{probe_id, read_probe, write_probe, Pacer, Report, Tallies, PROBE_LEN};
use super::report::Target;
use super::seat::{self, CpuSplit, Layout};
use serde::Serialize;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tep_sys::{Epoll, Event, Transmit, UdpOptions, UdpSocket};
use tep_testing::netns::{cmd, Daemon, Namespaces};

/// The seed's packet: 1492 bytes of IP.
pub const PACKET_LEN: usize = 1492;
/// The seed's two rates.
pub const RATES: [f64; 2] = [100.0, 275_000.0];
/// GTP-U's port.
const GTPU_PORT: u16 = 2152;

/// CLOCK_REALTIME now, in ns: the clock of the kernel's receive stamps.
fn realtime_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// What a sender did (all its threads).
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Sent {
    pub packets: u64,
    pub seconds: f64,
    pub achieved_pps: f64,
    /// Sends the socket refused for a full buffer, and retried.
    pub blocked: u64,
    /// Sender threads.
    pub threads: usize,
    /// CPU seconds the threads used (user and system), all together.
    pub cpu_seconds: f64,
    /// `sendmmsg` calls.
    pub syscalls: u64,
    /// Probes per UDP GSO message the threads sent with (the fewest of
    /// any thread); 1: plain `sendmmsg`, one datagram per message.
    pub segments: usize,
    /// Some thread asked for GSO and the kernel refused it (it went on
    /// with plain messages).
    pub gso_refused: bool,
}

impl Sent {
    fn add(&mut self, o: &Sent) {
        self.packets += o.packets;
        self.seconds = self.seconds.max(o.seconds);
        self.blocked += o.blocked;
        self.threads += o.threads;
        self.cpu_seconds += o.cpu_seconds;
        self.syscalls += o.syscalls;
        self.segments = match self.segments {
            0 => o.segments,
            s => s.min(o.segments),
        };
        self.gso_refused |= o.gso_refused;
    }
}

/// Messages one `sendmmsg` sends at most.
const BATCH: usize = 32;
/// Probes one `sendmmsg` sends at most with GSO: those already due when
/// the sender gets to them (it never sends ahead of time).
const GSO_BATCH: usize = 128;
/// Probes per UDP GSO message by default: the kernel builds the headers
/// and walks the stack once for all of them.
pub const GSO_SEGMENTS: usize = 32;
/// The largest UDP payload of one message (IPv4's bound, the tighter).
const MAX_UDP_PAYLOAD: usize = 65_507;

/// How a generator sends: each thread its own socket (its own source
/// port, so its own flow) and its own sequence space, the rate split
/// evenly, on the CPU given for it (if any).
#[derive(Clone, Debug)]
pub struct Senders {
    pub cpus: Vec<Option<usize>>,
    /// Probes per UDP GSO message (UDP_SEGMENT); 1: plain `sendmmsg`.
    pub segments: usize,
}

impl Senders {
    /// One thread, not pinned, plain `sendmmsg`.
    pub fn one() -> Senders {
        Senders {
            cpus: vec![None],
            segments: 1,
        }
    }
}

/// Probes per GSO message for `payload`-byte probes when `asked` are
/// wanted: at most 64 (the kernel's UDP_MAX_SEGMENTS) and 64 KiB in all.
fn segments_for(asked: usize, payload: usize) -> usize {
    asked.min(64).min(MAX_UDP_PAYLOAD / payload.max(1)).max(1)
}

/// The messages of a batch of `k` probes, `segments` to a message: each
/// its first probe and its count of probes.
fn messages(k: usize, segments: usize) -> impl Iterator<Item = (usize, usize)> {
    let per = segments.max(1);
    (0..k)
        .step_by(per)
        .map(move |first| (first, per.min(k - first)))
}

/// Writes `k` probes of `payload` bytes back to back into `buf`, numbered
/// from `seq` in `thread`'s space, all stamped `stamp` (the batch leaves
/// as one): the layout a GSO message is cut from.
fn write_batch(buf: &mut [u8], payload: usize, thread: usize, seq: u64, k: usize, stamp: u64) {
    for (i, b) in buf.chunks_exact_mut(payload).take(k).enumerate() {
        write_probe(b, probe_id(thread, seq + i as u64), stamp);
    }
}

/// Sends probes of `packet_len` bytes of IP to `dst` at `pps` for
/// `seconds`, out of `device` if given, from `senders`' threads; each
/// thread starts in the calling thread's network namespace.
pub fn send(
    dst: SocketAddr,
    device: Option<&str>,
    packet_len: usize,
    pps: f64,
    seconds: f64,
    senders: &Senders,
) -> io::Result<Sent> {
    let ip_header = if dst.is_ipv4() { 20 } else { 40 };
    let payload = packet_len.saturating_sub(ip_header + 8).max(PROBE_LEN);
    let threads = senders.cpus.len().max(1);
    let start = Instant::now();
    let results: Vec<io::Result<Sent>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let cpu = senders.cpus.get(t).copied().flatten();
                scope.spawn(move || {
                    if let Some(cpu) = cpu {
                        let _ = tep_sys::thread::pin_current_thread(cpu);
                    }
                    // Thread t's probes fall between the others': the
                    // whole stream stays evenly spaced.
                    let pacer = Pacer::new((t as f64 * 1e9 / pps) as u64, pps / threads as f64);
                    let plan = SenderThread {
                        thread: t,
                        dst,
                        device,
                        payload,
                        segments: senders.segments,
                    };
                    send_thread(&plan, pacer, start, seconds)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(io::Error::other("sender panicked")))
            })
            .collect()
    });
    let mut sent = Sent::default();
    for r in results {
        sent.add(&r?);
    }
    sent.achieved_pps = sent.packets as f64 / sent.seconds.max(1e-9);
    Ok(sent)
}

/// Waits until `due` (ns after `start`): sleeps through long gaps (100
/// pps), spins through short ones (a sleep's wake-up is late by tens of
/// µs).
fn wait_until(start: Instant, due: u64) {
    loop {
        let now = start.elapsed().as_nanos() as u64;
        if now >= due {
            return;
        }
        if due - now > 300_000 {
            std::thread::sleep(Duration::from_nanos(due - now - 200_000));
        } else {
            std::hint::spin_loop();
        }
    }
}

/// What one sender thread sends: its index (its sequence space), where
/// to, the probes' payload length and the probes per GSO message.
struct SenderThread<'a> {
    thread: usize,
    dst: SocketAddr,
    device: Option<&'a str>,
    payload: usize,
    segments: usize,
}

/// One sender thread: its socket, its probes (numbered in its own space,
/// each stamped when its batch is written), paced by `pacer` from
/// `start`; with GSO, the probes due go out as messages of up to
/// `segments` probes, else one probe a message.
fn send_thread(
    plan: &SenderThread<'_>,
    pacer: Pacer,
    start: Instant,
    seconds: f64,
) -> io::Result<Sent> {
    let any: IpAddr = if plan.dst.is_ipv4() {
        Ipv4Addr::UNSPECIFIED.into()
    } else {
        Ipv6Addr::UNSPECIFIED.into()
    };
    let mut segments = segments_for(plan.segments, plan.payload);
    let mut socket = UdpSocket::bind(
        SocketAddr::new(any, 0),
        &UdpOptions {
            gro: false,
            gso: segments > 1,
            device: plan.device.map(str::to_owned),
            ..UdpOptions::default()
        },
    )?;
    let mut sent = Sent {
        threads: 1,
        ..Sent::default()
    };
    if segments > 1 && !socket.capabilities().gso {
        gso_refused(plan.thread, "UDP_SEGMENT not accepted", &mut sent);
        segments = 1;
    }
    let cpu_before = thread_cpu_seconds();
    let most = if segments > 1 { GSO_BATCH } else { BATCH };
    let mut buf = vec![0u8; most * plan.payload];
    let end_ns = (seconds * 1e9) as u64;
    let mut seq = 0;
    while pacer.due(seq) < end_ns {
        wait_until(start, pacer.due(seq));
        // Every probe due by now, up to a batch: a sender that fell
        // behind catches up in batches, never ahead of time.
        let now = start.elapsed().as_nanos() as u64;
        let mut k = 1;
        while k < most && pacer.due(seq + k as u64) <= now.min(end_ns - 1) {
            k += 1;
        }
        write_batch(&mut buf, plan.payload, plan.thread, seq, k, realtime_ns());
        let batch = Batch {
            buf: &buf,
            payload: plan.payload,
            k,
        };
        send_batch(&mut socket, plan, &batch, &mut segments, &mut sent)?;
        seq += k as u64;
    }
    sent.packets = seq;
    sent.segments = segments;
    sent.seconds = start.elapsed().as_secs_f64();
    sent.cpu_seconds = thread_cpu_seconds() - cpu_before;
    Ok(sent)
}

/// `k` probes of `payload` bytes, back to back in `buf`.
struct Batch<'a> {
    buf: &'a [u8],
    payload: usize,
    k: usize,
}

/// Sends all of `batch`, retrying while the socket's buffer is full; a
/// GSO send the kernel refuses (the route's device cannot checksum, say)
/// turns GSO off for the rest of the run and resends what is left plain.
fn send_batch(
    socket: &mut UdpSocket,
    plan: &SenderThread<'_>,
    batch: &Batch<'_>,
    segments: &mut usize,
    sent: &mut Sent,
) -> io::Result<()> {
    let mut done = 0;
    while done < batch.k {
        let mut msgs = [Transmit {
            dest: plan.dst,
            data: &[],
            segment_size: None,
        }; BATCH];
        let mut counts = [0usize; BATCH];
        let mut m = 0;
        for (first, n) in messages(batch.k - done, *segments).take(BATCH) {
            let at = (done + first) * batch.payload;
            msgs[m].data = &batch.buf[at..at + n * batch.payload];
            msgs[m].segment_size = (n > 1).then_some(batch.payload as u16);
            counts[m] = n;
            m += 1;
        }
        sent.syscalls += 1;
        match socket.send_batch(&msgs[..m]) {
            Ok(n) => done += counts[..n].iter().sum::<usize>(),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                sent.blocked += 1;
                std::hint::spin_loop();
            }
            Err(e) if *segments > 1 && !socket.capabilities().gso => {
                gso_refused(plan.thread, &e.to_string(), sent);
                *segments = 1;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Notes once per thread that GSO was refused, and why.
fn gso_refused(thread: usize, why: &str, sent: &mut Sent) {
    if !sent.gso_refused {
        eprintln!("sender thread {thread}: {why}; plain sendmmsg from here on");
    }
    sent.gso_refused = true;
}

/// CPU seconds (user and system) the calling thread has used.
fn thread_cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

/// The probe inside a GTP-U datagram: behind the G-PDU's header and the
/// inner IP and UDP headers.
fn probe_in(data: &[u8]) -> Option<(u64, u64)> {
    let p = tep_wire::gtpu::Packet::new_checked(data).ok()?;
    let inner = &data[p.checked_header_len().ok()?..];
    let ip_len = match inner.first()? >> 4 {
        4 => usize::from(inner[0] & 0x0f) * 4,
        6 => 40,
        _ => return None,
    };
    read_probe(inner.get(ip_len + 8..)?)
}

/// What a sink takes: probes inside GTP-U (behind the inner IP and UDP
/// headers), or bare in UDP (the generator measured alone).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    Gtpu,
    Udp,
}

/// What a sink counts: probes of `threads` sender threads, framed so;
/// with `gro`, the kernel hands it trains of datagrams (UDP_GRO) that it
/// splits and counts one by one.
#[derive(Clone, Copy, Debug)]
pub struct Count {
    pub threads: usize,
    pub framing: Framing,
    pub gro: bool,
}

/// Room for a GRO train: 64 KiB.
const TRAIN: usize = 1 << 16;
/// Buffers one `recvmmsg` fills at most.
const SINK_BATCH: usize = 32;

/// The datagrams of one received buffer: a GRO train (`segment` bytes
/// each, the last may be shorter) or a single datagram.
fn datagrams(data: &[u8], segment: Option<u16>) -> impl Iterator<Item = &[u8]> {
    let size = match segment {
        Some(s) if s > 0 => usize::from(s),
        _ => data.len().max(1),
    };
    data.chunks(size)
}

/// Receives datagrams carrying probes on `bind` (through `device` if
/// given) until `stop` is set and nothing has come for `quiet`.
pub fn sink(
    bind: SocketAddr,
    device: Option<&str>,
    expected: u64,
    count: Count,
    stop: &AtomicBool,
    quiet: Duration,
) -> io::Result<Tallies> {
    let mut socket = UdpSocket::bind(
        bind,
        &UdpOptions {
            gro: count.gro,
            gso: false,
            rx_timestamps: true,
            zero_checksum_rx: true,
            device: device.map(str::to_owned),
            ..UdpOptions::default()
        },
    )?;
    let epoll = Epoll::new()?;
    use std::os::fd::AsRawFd;
    epoll.add(socket.as_raw_fd(), 0, true, false)?;
    let mut events: Vec<Event> = Vec::with_capacity(4);
    let mut tally = Tallies::with_capacity(count.threads, expected);
    let room = if socket.capabilities().gro {
        TRAIN
    } else {
        2048
    };
    let mut storage = vec![vec![0u8; room]; SINK_BATCH];
    let mut meta = [tep_sys::RecvMeta::default(); SINK_BATCH];
    let mut last = Instant::now();
    loop {
        epoll.wait(&mut events, 10)?;
        loop {
            let mut bufs: Vec<io::IoSliceMut<'_>> =
                storage.iter_mut().map(|b| io::IoSliceMut::new(b)).collect();
            let n = match socket.recv_batch(&mut bufs, &mut meta) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
                Err(e) => return Err(e),
            };
            drop(bufs);
            if n == 0 {
                break;
            }
            last = Instant::now();
            let now = realtime_ns();
            tally.buffers += n as u64;
            for (m, b) in meta.iter().zip(&storage).take(n) {
                // A train has one stamp, its first datagram's arrival.
                let stamp = if m.stamp_ns > 0 { m.stamp_ns } else { now };
                for data in datagrams(&b[..m.len.min(b.len())], m.segment_size) {
                    let probe = match count.framing {
                        Framing::Gtpu => probe_in(data),
                        Framing::Udp => read_probe(data),
                    };
                    match probe {
                        Some((seq, sent)) => tally.record(seq, sent, stamp),
                        None => tally.foreign += 1,
                    }
                }
            }
        }
        if stop.load(Ordering::Acquire) && last.elapsed() >= quiet {
            return Ok(tally);
        }
    }
}

/// A checksum mode of the experiment and the seed's figures for it, where
/// the seed measured it (VPP, its section 3.2/3.3 tables).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct SeedFigure {
    pub loss_pct: f64,
    pub avg_ns: u64,
    pub min_ns: u64,
    pub max_ns: u64,
}

/// The seed's table: (mode, rate) → figures.
pub fn seed_figure(mode: &str, pps: f64) -> Option<SeedFigure> {
    let f = |loss_pct, avg_ns, min_ns, max_ns| {
        Some(SeedFigure {
            loss_pct,
            avg_ns,
            min_ns,
            max_ns,
        })
    };
    match (mode, pps as u64) {
        ("zero", 100) => f(0.0, 15_336, 14_535, 124_397),
        ("full", 100) => f(0.0, 15_477, 14_592, 123_337),
        ("offload", 100) => f(0.0, 15_349, 14_537, 63_742),
        ("zero", 275_000) => f(0.0, 120_005, 62_650, 1_300_217),
        ("full", 275_000) => f(3.676, 8_167_461, 52_467, 9_341_807),
        ("offload", 275_000) => f(0.0, 134_126, 74_090, 2_443_992),
        _ => None,
    }
}

/// One case of the experiment.
#[derive(Clone, Debug, Serialize)]
pub struct Case {
    pub mode: String,
    pub offered_pps: f64,
    pub sent: Sent,
    pub report: Report,
    /// The sender reached less than 95 % of the offered rate: the case
    /// says what this machine's generator could do, not what tep can.
    pub generator_short: bool,
    pub seed: Option<SeedFigure>,
    /// The gateway's workers (one queue each).
    pub workers: usize,
    /// What the workers and their CPUs did during the case.
    pub seat: Seated,
}

/// What the gateway's workers and their CPUs did during one case.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Seated {
    /// Each worker CPU's time, in order of the workers.
    pub cpus: Vec<CpuSplit>,
    /// Each worker thread's own CPU time, in percent of the case: the
    /// rest of its CPU's busy time was somebody else's.
    pub tep_pct: Vec<f64>,
    /// Frames each worker received.
    pub frames: Vec<u64>,
    /// The longest time between two rounds of a worker loop (any worker).
    pub longest_gap_us: f64,
    /// Gaps over 1 ms between two rounds, all workers.
    pub stalls: u64,
    /// Some CPU ran more than one of sender, sink and workers.
    pub shared: bool,
}

impl Seated {
    /// A short account: the worker CPUs' split, the longest gap, the
    /// stalls.
    pub fn summary(&self) -> String {
        let cpus: Vec<String> = self
            .cpus
            .iter()
            .enumerate()
            .map(|(i, c)| {
                format!(
                    "cpu{} {:.0}/{:.0}/{:.0}/{:.0} (tep {:.0})",
                    c.cpu,
                    c.user,
                    c.system,
                    c.softirq,
                    c.idle,
                    self.tep_pct.get(i).copied().unwrap_or(0.0)
                )
            })
            .collect();
        let frames = if self.frames.len() > 1 {
            format!(", frames per worker {:?}", self.frames)
        } else {
            String::new()
        };
        format!(
            "{} gap {:.0} µs, {} stalls{frames}",
            cpus.join(" "),
            self.longest_gap_us,
            self.stalls
        )
    }
}

/// Addresses of the namespaces' links.
const GEN_ADDR: &str = "10.70.0.2/24";
const GW_INNER_ADDR: &str = "10.70.0.1/24";
const GW_INNER_IP: &str = "10.70.0.1";
const INNER_PREFIX: &str = "10.71.0.0/24";
const INNER_DST: Ipv4Addr = Ipv4Addr::new(10, 71, 0, 2);
const GW_UNDERLAY: &str = "2001:db8:70::1";
const SINK_UNDERLAY: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0x70, 0, 0, 0, 0, 2);

/// The generator's, tep's and the sink's namespaces, their veths of
/// `queues` queues each; the kernel's receive work on the sink's end
/// steered to the sink's CPU and on the generator's to its senders',
/// each sender thread's traffic on queue `thread % queues`.
fn build(setup: &Namespaces, queues: usize, seats: &Layout, segments: usize) -> Result<(), String> {
    let (g, w, s) = (setup.ns("g"), setup.ns("w"), setup.ns("s"));
    let q = queues as u32;
    setup.veth_queues("g", "g0", "w", "wi", q)?;
    setup.veth_queues("w", "wu", "s", "s0", q)?;
    let sink = format!("{SINK_UNDERLAY}/64");
    let gw = format!("{GW_UNDERLAY}/64");
    for args in [
        vec!["ip", "-n", &g, "addr", "add", GEN_ADDR, "dev", "g0"],
        vec!["ip", "-n", &w, "addr", "add", GW_INNER_ADDR, "dev", "wi"],
        vec!["ip", "-n", &w, "addr", "add", &gw, "dev", "wu", "nodad"],
        vec!["ip", "-n", &s, "addr", "add", &sink, "dev", "s0", "nodad"],
        // GTP-U/IPv6 of a 1492-byte packet is about 1,560 bytes: the
        // underlay's MTU allows it, as the seed's did.
        vec!["ip", "-n", &w, "link", "set", "wu", "mtu", "1600"],
        vec!["ip", "-n", &s, "link", "set", "s0", "mtu", "1600"],
        vec!["ip", "-n", &g, "link", "set", "g0", "up"],
        vec!["ip", "-n", &w, "link", "set", "wi", "up"],
        vec!["ip", "-n", &w, "link", "set", "wu", "up"],
        vec!["ip", "-n", &s, "link", "set", "s0", "up"],
        vec![
            "ip",
            "-n",
            &g,
            "route",
            "add",
            INNER_PREFIX,
            "via",
            GW_INNER_IP,
        ],
        // A NIC fills the checksums it is asked to; a veth leaves them
        // partial in the frames tep's XDP program sees (`lco` needs them
        // whole). Since Linux 6.11 a GSO send cuts and checksums its
        // datagrams in software then, rather than fail with EIO.
        vec![
            "ip", "netns", "exec", &g, "ethtool", "-K", "g0", "tx", "off",
        ],
    ] {
        cmd(&args)?;
    }
    if segments > 1 {
        sink_gro(setup, "s", "s0")?;
        // tep sends through AF_XDP, which a veth that can do TSO hands
        // its peer outside its NAPI, so past GRO: tep never uses TSO.
        cmd(&[
            "ip", "netns", "exec", &w, "ethtool", "-K", "wu", "tso", "off",
        ])?;
    }
    seat::rps(setup, "s", "s0", &[seats.sink])?;
    seat::rps(setup, "g", "g0", &seats.senders)?;
    seat::xps(setup, "g", "g0", &seats.senders, queues)
}

/// Turns on GRO on `dev` (a veth: its NAPI), so that a UDP_GRO socket
/// behind it gets trains of datagrams rather than one at a time. A veth
/// whose peer can do TSO takes a frame into its NAPI (where GRO is) only
/// if it forwards UDP GRO too (`rx-udp-gro-forwarding`); a socket without
/// UDP_GRO still gets its datagrams one at a time.
fn sink_gro(setup: &Namespaces, ns: &str, dev: &str) -> Result<(), String> {
    setup
        .run(
            ns,
            &[
                "ethtool",
                "-K",
                dev,
                "gro",
                "on",
                "rx-udp-gro-forwarding",
                "on",
            ],
        )
        .map(drop)
}

/// The gateway's config for checksum `mode`, a worker on each of `cpus`.
fn gateway_config(setup: &Namespaces, mode: &str, cpus: &[usize]) -> String {
    let list: Vec<String> = cpus.iter().map(|c| c.to_string()).collect();
    format!(
        "[gateway]\ninner = \"wi\"\nunderlay = \"wu\"\nqueues = {}\ncpus = [{}]\ncontrol = \"{}\"\n\n\
         [[tunnel]]\nname = \"n3\"\nkind = \"gtpu\"\nlocal = \"{GW_UNDERLAY}\"\nremote = \"{SINK_UNDERLAY}\"\n\
         teid = 100\nlocal_teid = 100\nchecksum = \"{mode}\"\nzero_checksum_tx = true\nzero_checksum_rx = true\n\
         inner_prefixes = [\"{INNER_PREFIX}\"]\n",
        cpus.len(),
        list.join(", "),
        setup.socket(&format!("gw-{mode}"))
    )
}

fn start_gateway(
    setup: &Namespaces,
    tep: &Path,
    mode: &str,
    cpus: &[usize],
) -> Result<Daemon, String> {
    let gw = setup.start_tep(
        tep,
        "w",
        &format!("gw-{mode}"),
        &gateway_config(setup, mode, cpus),
        None,
    )?;
    // The kernel resolves the neighbours on both sides.
    let _ = setup.run("g", &["ping", "-c", "1", "-W", "1", GW_INNER_IP]);
    let _ = setup.run(
        "w",
        &["ping", "-c", "1", "-W", "1", &SINK_UNDERLAY.to_string()],
    );
    Ok(gw)
}

/// Per worker: frames received, stalls, the longest gap (ns) since the
/// last such read, from `show runtime --json` (which starts a new
/// window for the gap).
fn worker_loops(gw: &Daemon) -> Vec<(u64, u64, u64)> {
    let text = gw
        .control(&["show", "runtime", "--json"])
        .unwrap_or_default();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    let Some(workers) = v["workers"].as_array() else {
        return Vec::new();
    };
    workers
        .iter()
        .map(|w| {
            let n = |k: &str| w["io"][k].as_u64().unwrap_or(0);
            (
                n("underlay_rx") + n("inner_rx"),
                n("loop_stalls"),
                w["longest_gap_ns"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

/// The sink (`count`, run in namespace `sink_ns` on its CPU) beside the
/// senders (in `send_ns`, to `dst`): the sink binds before the first
/// probe leaves and stops when the senders are done.
fn sink_beside_senders<T: Send>(
    (sink_ns, sink_cpu): (&str, usize),
    (send_ns, dst, senders): (&str, SocketAddr, &Senders),
    (pps, seconds): (f64, f64),
    stop: &AtomicBool,
    count: impl FnOnce(&AtomicBool) -> std::io::Result<T> + Send,
) -> (Result<T, String>, Result<Sent, String>) {
    std::thread::scope(|scope| {
        let sink_thread = scope.spawn(|| -> Result<T, String> {
            tep_sys::netns::enter(sink_ns).map_err(|e| e.to_string())?;
            let _ = tep_sys::thread::pin_current_thread(sink_cpu);
            count(stop).map_err(|e| format!("sink: {e}"))
        });
        std::thread::sleep(Duration::from_millis(100));
        let sent = scope
            .spawn(|| -> Result<Sent, String> {
                tep_sys::netns::enter(send_ns).map_err(|e| e.to_string())?;
                send(dst, None, PACKET_LEN, pps, seconds, senders)
                    .map_err(|e| format!("sender: {e}"))
            })
            .join()
            .map_err(|_| "sender panicked".to_string())
            .and_then(|r| r);
        stop.store(true, Ordering::Release);
        let tally = sink_thread
            .join()
            .map_err(|_| "sink panicked".to_string())
            .and_then(|r| r);
        (tally, sent)
    })
}

/// The lab of one run: the namespaces, where everyone sits, the gateway.
pub struct Lab<'a> {
    pub setup: &'a Namespaces,
    pub seats: &'a Layout,
    pub gw: &'a Daemon,
    /// Probes per GSO message of the senders (1: plain); above 1 the sink
    /// takes GRO trains too.
    pub segments: usize,
}

/// One case: the sink in its namespace, the senders in the generator's,
/// each on its CPU; the report, and what the workers' CPUs did.
fn run_case(lab: &Lab<'_>, mode: &str, pps: f64, seconds: f64) -> Result<Case, String> {
    let expected = (pps * seconds) as u64 + 1;
    let stop = AtomicBool::new(false);
    let (g, s) = (lab.setup.ns("g"), lab.setup.ns("s"));
    let seats = lab.seats;
    let senders = Senders {
        cpus: seats.senders.iter().map(|&c| Some(c)).collect(),
        segments: lab.segments,
    };
    let threads = senders.cpus.len();
    let before = worker_loops(lab.gw);
    let ticks = seat::sample(&seats.workers);
    let threads_before = seat::worker_ticks(lab.gw.pid(), seats.workers.len());
    let started = Instant::now();
    let (tally, sent) = sink_beside_senders(
        (&s, seats.sink),
        (&g, SocketAddr::new(INNER_DST.into(), 9), &senders),
        (pps, seconds),
        &stop,
        |stop| {
            sink(
                SocketAddr::new(SINK_UNDERLAY.into(), GTPU_PORT),
                None,
                expected,
                Count {
                    threads,
                    framing: Framing::Gtpu,
                    gro: lab.segments > 1,
                },
                stop,
                Duration::from_millis(300),
            )
        },
    );
    let (tally, sent) = (tally?, sent?);
    let mut seated = seated(seats, &before, &worker_loops(lab.gw), &ticks);
    let wall = started.elapsed().as_secs_f64().max(1e-9) * seat::ticks_per_second();
    seated.tep_pct = seat::worker_ticks(lab.gw.pid(), seats.workers.len())
        .iter()
        .zip(&threads_before)
        .map(|(b, a)| b.saturating_sub(*a) as f64 * 100.0 / wall)
        .collect();
    Ok(Case {
        mode: mode.to_string(),
        offered_pps: pps,
        report: tally.report(sent.packets),
        generator_short: sent.achieved_pps < 0.95 * pps,
        sent,
        seed: seed_figure(mode, pps),
        workers: seats.workers.len(),
        seat: seated,
    })
}

/// What the workers did between two reads of their loops and CPU ticks.
fn seated(
    seats: &Layout,
    before: &[(u64, u64, u64)],
    after: &[(u64, u64, u64)],
    ticks: &[Option<seat::CpuTicks>],
) -> Seated {
    let now = seat::sample(&seats.workers);
    let cpus = seats
        .workers
        .iter()
        .zip(ticks.iter().zip(&now))
        .filter_map(|(&c, (a, b))| Some(seat::split(c, (*a)?, (*b)?)))
        .collect();
    let at = |v: &[(u64, u64, u64)], i: usize| v.get(i).copied().unwrap_or_default();
    let frames = (0..after.len())
        .map(|i| at(after, i).0.saturating_sub(at(before, i).0))
        .collect();
    Seated {
        cpus,
        tep_pct: Vec::new(),
        frames,
        longest_gap_us: after.iter().map(|w| w.2).max().unwrap_or(0) as f64 / 1e3,
        stalls: (0..after.len())
            .map(|i| at(after, i).1.saturating_sub(at(before, i).1))
            .sum(),
        shared: seats.shared,
    }
}

/// One case of the generator measured alone.
#[derive(Clone, Debug, Serialize)]
pub struct GeneratorCase {
    pub offered_pps: f64,
    pub sent: Sent,
    pub report: Report,
    /// CPU seconds the sink's thread used.
    pub sink_cpu_seconds: f64,
    /// Buffers the sink received (a GRO train is one).
    pub sink_buffers: u64,
    pub senders: Vec<usize>,
    pub sink: usize,
    pub config: GenConfig,
    pub round: usize,
}

/// One way of sending the generator is measured with: its sender
/// threads and their probes per GSO message (1: plain `sendmmsg`, the
/// sink without GRO too).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct GenConfig {
    pub threads: usize,
    pub segments: usize,
}

/// A generator lab: the generator's and the sink's namespaces joined by
/// a veth of a queue per sender thread.
struct GenLab {
    setup: Namespaces,
    config: GenConfig,
    senders: Vec<usize>,
    sink: usize,
}

fn gen_lab(config: GenConfig, n: usize, tag: usize) -> Result<GenLab, String> {
    let threads = config.threads.max(1);
    let setup = Namespaces::new(&format!("tepgen{}c{tag}", std::process::id()), &["g", "s"])?;
    setup.veth_queues("g", "g0", "s", "s0", threads as u32)?;
    let senders: Vec<usize> = (0..threads).map(|t| t % n).collect();
    let sink = n - 1;
    for (ns, dev, addr) in [("g", "g0", "10.72.0.1/24"), ("s", "s0", "10.72.0.2/24")] {
        setup.run(ns, &["ip", "addr", "add", addr, "dev", dev])?;
        setup.run(ns, &["ip", "link", "set", dev, "up"])?;
    }
    // The senders checksum their datagrams, as in front of the gateway.
    setup.run("g", &["ethtool", "-K", "g0", "tx", "off"])?;
    if config.segments > 1 {
        // As in front of the gateway (whose XDP program takes GSO off its
        // peer veth): the sender's own transmit cuts the GSO messages
        // into datagrams, and the sink's veth coalesces them again (GRO).
        setup.run("g", &["ethtool", "-K", "g0", "tx-udp-segmentation", "off"])?;
        sink_gro(&setup, "s", "s0")?;
    }
    seat::rps(&setup, "s", "s0", &[sink])?;
    seat::xps(&setup, "g", "g0", &senders, threads)?;
    let _ = setup.run("g", &["ping", "-c", "1", "-W", "1", "10.72.0.2"]);
    Ok(GenLab {
        setup,
        config,
        senders,
        sink,
    })
}

/// The generator alone: for each of `configs`, its sender threads (each
/// on its CPU, its own queue) straight over a veth into a sink that only
/// counts, at each of `rates`, so that what it reaches is the
/// generator's (and the sink's), no gateway between; `rounds` times, the
/// configs alternating in each round.
pub fn generator_alone(
    configs: &[GenConfig],
    rates: &[f64],
    seconds: f64,
    rounds: usize,
) -> Result<Vec<GeneratorCase>, String> {
    let n = tep_sys::thread::online_cpus().max(1);
    let labs = configs
        .iter()
        .enumerate()
        .map(|(i, &c)| gen_lab(c, n, i))
        .collect::<Result<Vec<_>, String>>()?;
    let mut out = Vec::new();
    for round in 0..rounds.max(1) {
        for lab in &labs {
            for &pps in rates {
                let mut c = generator_case(lab, pps, seconds)?;
                c.round = round;
                eprintln!(
                    "  round {round}: {} thread(s), {} per message, {pps:.0} pps: achieved {:.0}, loss {:.3} %",
                    lab.config.threads, c.sent.segments, c.sent.achieved_pps, c.report.loss_pct
                );
                out.push(c);
            }
        }
    }
    Ok(out)
}

fn generator_case(lab: &GenLab, pps: f64, seconds: f64) -> Result<GeneratorCase, String> {
    let (setup, senders, sink_cpu) = (&lab.setup, &lab.senders, lab.sink);
    let segments = lab.config.segments;
    let dst = SocketAddr::new(Ipv4Addr::new(10, 72, 0, 2).into(), 9);
    let stop = AtomicBool::new(false);
    let (g, s) = (setup.ns("g"), setup.ns("s"));
    let plan = Senders {
        cpus: senders.iter().map(|&c| Some(c)).collect(),
        segments,
    };
    let expected = (pps * seconds) as u64 + 1;
    let (tally, sent) = sink_beside_senders(
        (&s, sink_cpu),
        (&g, dst, &plan),
        (pps, seconds),
        &stop,
        |stop| {
            let before = thread_cpu_seconds();
            let count = Count {
                threads: senders.len(),
                framing: Framing::Udp,
                gro: segments > 1,
            };
            let t = sink(dst, None, expected, count, stop, Duration::from_millis(300))?;
            Ok((t, thread_cpu_seconds() - before))
        },
    );
    let ((tally, sink_cpu_seconds), sent) = (tally?, sent?);
    Ok(GeneratorCase {
        offered_pps: pps,
        report: tally.report(sent.packets),
        sent,
        sink_cpu_seconds,
        sink_buffers: tally.buffers,
        senders: senders.to_vec(),
        sink: sink_cpu,
        config: lab.config,
        round: 0,
    })
}

/// The generator's table: per case, what it reached and what its
/// threads and the sink cost; then per way of sending and rate the
/// medians over the rounds, and the best against plain single-thread.
pub fn generator_table(cases: &[GeneratorCase]) -> String {
    let mut out = String::from(
        "generator alone: 1492-byte probes, sender threads straight into a sink that only counts\n",
    );
    out += &format!(
        "{:>5} {:>7} {:>4} {:>10} {:>10} {:>10} {:>7} {:>12} {:>11} {:>9} {:>10} {:>7} {:>9}  {}\n",
        "round",
        "threads",
        "seg",
        "offered",
        "achieved",
        "received",
        "loss%",
        "sender CPU%",
        "µs/probe",
        "per call",
        "sink µs/p",
        "p/recv",
        "blocked",
        "CPUs (senders; sink)"
    );
    for c in cases {
        let secs = c.sent.seconds.max(1e-9);
        out += &format!(
            "{:>5} {:>7} {:>4} {:>10.0} {:>10.0} {:>10} {:>7.3} {:>12.0} {:>11.2} {:>9.1} {:>10.2} {:>7.1} {:>9}  {:?}; {}{}\n",
            c.round,
            c.sent.threads,
            c.sent.segments,
            c.offered_pps,
            c.sent.achieved_pps,
            c.report.received,
            c.report.loss_pct,
            c.sent.cpu_seconds * 100.0 / secs,
            c.sent.cpu_seconds * 1e6 / c.sent.packets.max(1) as f64,
            c.sent.packets as f64 / c.sent.syscalls.max(1) as f64,
            c.sink_cpu_seconds * 1e6 / c.report.received.max(1) as f64,
            c.report.received as f64 / c.sink_buffers.max(1) as f64,
            c.sent.blocked,
            c.senders,
            c.sink,
            if c.sent.gso_refused { " (GSO refused)" } else { "" }
        );
    }
    out += "seg: probes per UDP GSO message (1: plain sendmmsg, sink without GRO); µs/probe: the senders' CPU time per probe sent; per call: probes per sendmmsg; sink µs/p: the sink thread's CPU per probe received; p/recv: probes per buffer the sink received (GRO trains)\n";
    out + &generator_medians(cases)
}

/// Per way of sending and offered rate, the medians over the rounds; the
/// highest median achieved against plain sendmmsg's single thread.
fn generator_medians(cases: &[GeneratorCase]) -> String {
    let mut keys: Vec<(GenConfig, u64)> = Vec::new();
    for c in cases {
        let k = (c.config, c.offered_pps as u64);
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let mut out = format!(
        "\nmedians over rounds\n{:>7} {:>4} {:>10} {:>10} {:>10} {:>7} {:>11} {:>10} {:>6}\n",
        "threads",
        "seg",
        "offered",
        "achieved",
        "received/s",
        "loss%",
        "µs/probe",
        "sink µs/p",
        "rounds"
    );
    let med = |mut v: Vec<f64>| -> f64 {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(0.0)
    };
    let mut best: Vec<(GenConfig, f64)> = Vec::new();
    for (config, pps) in keys {
        let cs: Vec<&GeneratorCase> = cases
            .iter()
            .filter(|c| c.config == config && c.offered_pps as u64 == pps)
            .collect();
        let of = |f: &dyn Fn(&GeneratorCase) -> f64| med(cs.iter().map(|c| f(c)).collect());
        let achieved = of(&|c| c.sent.achieved_pps);
        out += &format!(
            "{:>7} {:>4} {:>10} {:>10.0} {:>10.0} {:>7.3} {:>11.2} {:>10.2} {:>6}\n",
            config.threads,
            config.segments,
            pps,
            achieved,
            of(&|c| c.report.received as f64 / c.sent.seconds.max(1e-9)),
            of(&|c| c.report.loss_pct),
            of(&|c| c.sent.cpu_seconds * 1e6 / c.sent.packets.max(1) as f64),
            of(&|c| c.sink_cpu_seconds * 1e6 / c.report.received.max(1) as f64),
            cs.len()
        );
        match best.iter_mut().find(|(c, _)| *c == config) {
            Some((_, b)) => *b = b.max(achieved),
            None => best.push((config, achieved)),
        }
    }
    out += "received/s: probes the sink counted per second of sending\n";
    out + &generator_verdict(&best)
}

/// The highest median achieved rate of each way of sending against
/// plain single-thread `sendmmsg`'s.
fn generator_verdict(best: &[(GenConfig, f64)]) -> String {
    let plain = GenConfig {
        threads: 1,
        segments: 1,
    };
    let Some(&(_, base)) = best.iter().find(|(c, _)| *c == plain) else {
        return String::new();
    };
    let mut out = String::from("highest median achieved rate:");
    for (c, b) in best {
        out += &format!(
            " {} thread(s) x {} per message {b:.0} pps ({:.2}x plain 1 thread);",
            c.threads,
            c.segments,
            b / base.max(1.0)
        );
    }
    out.pop();
    out + "\n"
}

/// What to run per checksum mode: the seed's rates, then a sweep.
#[derive(Clone, Debug)]
pub struct Plan {
    pub rates: Vec<f64>,
    /// Ascending; a mode's sweep stops at the first rate the generator
    /// falls short of, or that loses more than [`SWEEP_STOP_LOSS_PCT`].
    pub sweep: Vec<f64>,
    pub seconds: f64,
    /// Rounds of the seed's rates, the modes interleaved in each.
    pub repeat: usize,
    /// The gateway's workers, one run each (the scaling table).
    pub workers: Vec<usize>,
    /// Sender threads (None: what the workers and the sink leave).
    pub senders: Option<usize>,
    /// Probes per GSO message of the senders (1: plain `sendmmsg`).
    pub segments: usize,
}

/// Loss past which a sweep goes no higher: the loss-free rate is below.
pub const SWEEP_STOP_LOSS_PCT: f64 = 10.0;

/// The sweep's offered rates: 1-2-5 steps from 1,000 packets per second
/// up to `max`, and `max` itself.
pub fn sweep_rates(max: f64) -> Vec<f64> {
    let mut out = Vec::new();
    let mut decade = 1_000.0;
    'outer: loop {
        for step in [1.0, 2.0, 5.0] {
            let r = decade * step;
            if r >= max {
                break 'outer;
            }
            out.push(r);
        }
        decade *= 10.0;
    }
    out.push(max);
    out
}

/// The results of a run: the seed's rates and the sweep.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Runs {
    pub cases: Vec<Case>,
    pub sweep: Vec<Case>,
}

/// Each mode's loss-free rate: the highest offered rate of its sweep that
/// lost nothing with the generator keeping up (None: not even the lowest).
pub fn loss_free(sweep: &[Case], modes: &[&str]) -> Vec<(String, Option<f64>)> {
    modes
        .iter()
        .map(|&m| {
            (
                m.to_string(),
                best_case(sweep.iter().filter(|c| c.mode == m)).map(|c| c.offered_pps),
            )
        })
        .collect()
}

/// The case of the highest offered rate that lost nothing with the
/// generator keeping up.
fn best_case<'a>(cases: impl Iterator<Item = &'a Case>) -> Option<&'a Case> {
    cases
        .filter(|c| !c.generator_short && c.report.lost == 0)
        .max_by(|a, b| a.offered_pps.total_cmp(&b.offered_pps))
}

/// Where a sweep goes after the case at `pps`: the rates of 10 % steps
/// up from the last loss-free rate below the first lossy one (the limit
/// lies between them), each once.
pub fn refine(loss_free_below: f64, lossy: f64) -> Vec<f64> {
    (1..)
        .map(|k| loss_free_below * (1.0 + 0.1 * k as f64))
        .take_while(|&r| r < lossy * 0.999)
        .take(9)
        .collect()
}

/// One mode's sweep with the gateway of `lab`: up the plan's rates until
/// the generator falls short or a case loses more than
/// [`SWEEP_STOP_LOSS_PCT`]; at the first loss, 10 % steps from the last
/// loss-free rate.
fn sweep_mode(lab: &Lab<'_>, mode: &str, plan: &Plan, out: &mut Vec<Case>) -> Result<(), String> {
    let mut last_free: Option<f64> = None;
    let mut refined = false;
    for &pps in &plan.sweep {
        let c = run_case(lab, mode, pps, plan.seconds)?;
        eprintln!(
            "  {mode} x{} {pps:.0} pps: achieved {:.0}, loss {:.3} %, {}",
            c.workers,
            c.sent.achieved_pps,
            c.report.loss_pct,
            c.seat.summary()
        );
        let (lossy, stop) = (
            c.report.lost > 0,
            c.generator_short || c.report.loss_pct > SWEEP_STOP_LOSS_PCT,
        );
        if !lossy && !c.generator_short {
            last_free = Some(pps);
        }
        out.push(c);
        if let (true, false, Some(free)) = (lossy, refined, last_free) {
            refined = true;
            for r in refine(free, pps) {
                let c = run_case(lab, mode, r, plan.seconds)?;
                let lost = c.report.lost > 0 || c.generator_short;
                out.push(c);
                if lost {
                    break;
                }
            }
        }
        if stop {
            break;
        }
    }
    Ok(())
}

/// The experiment in namespaces of this machine: for each count of
/// workers, for each checksum mode, a tep gateway (its workers pinned),
/// the seed's rates and the sweep.
pub fn run_in_namespaces(tep: &Path, modes: &[&str], plan: &Plan) -> Result<Runs, String> {
    let n = tep_sys::thread::online_cpus().max(1);
    let mut runs = Runs::default();
    let workers = if plan.workers.is_empty() {
        vec![seat::default_workers(n)]
    } else {
        plan.workers.clone()
    };
    for &w in &workers {
        let senders = plan.senders.unwrap_or(seat::default_senders(n, w));
        let seats = seat::layout(n, w, senders);
        eprintln!(
            "seed 000: {w} worker(s) on CPU {:?}, {senders} sender thread(s) on {:?}, the sink on {}{}",
            seats.workers,
            seats.senders,
            seats.sink,
            if seats.shared { " (some share a CPU: too few)" } else { "" }
        );
        let setup = Namespaces::new(
            &format!("tepseed{}w{w}", std::process::id()),
            &["g", "w", "s"],
        )?;
        build(&setup, w, &seats, plan.segments)?;
        for _ in 0..plan.repeat.max(1) {
            for &mode in modes {
                let gw = start_gateway(&setup, tep, mode, &seats.workers)?;
                let lab = Lab {
                    setup: &setup,
                    seats: &seats,
                    gw: &gw,
                    segments: plan.segments,
                };
                for &pps in &plan.rates {
                    runs.cases.push(run_case(&lab, mode, pps, plan.seconds)?);
                }
            }
        }
        for &mode in modes {
            if plan.sweep.is_empty() {
                break;
            }
            let gw = start_gateway(&setup, tep, mode, &seats.workers)?;
            let lab = Lab {
                setup: &setup,
                seats: &seats,
                gw: &gw,
                segments: plan.segments,
            };
            sweep_mode(&lab, mode, plan, &mut runs.sweep)?;
        }
    }
    Ok(runs)
}

/// The scaling table: per count of workers and mode, the loss-free rate,
/// its median latency and what the worker CPUs did there.
pub fn scaling_table(runs: &Runs, modes: &[&str]) -> String {
    let mut counts: Vec<usize> = runs.sweep.iter().map(|c| c.workers).collect();
    counts.sort_unstable();
    counts.dedup();
    if runs.sweep.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "\nseed 000 scaling: loss-free rate per workers and mode (worker CPUs: user/system/softirq/idle %)\n",
    );
    out += &format!(
        "{:>7} {:<8} {:>11} {:>9} {:>9}  {}\n",
        "workers",
        "mode",
        "loss-free",
        "p50 µs",
        "p99 µs",
        "at that rate: worker CPUs, longest loop gap, stalls > 1 ms"
    );
    for &w in &counts {
        for &m in modes {
            let cases = runs.sweep.iter().filter(|c| c.workers == w && c.mode == m);
            match best_case(cases) {
                Some(c) => {
                    out += &format!(
                        "{w:>7} {m:<8} {:>11.0} {:>9.1} {:>9.1}  {}{}\n",
                        c.offered_pps,
                        c.report.p50_ns as f64 / 1e3,
                        c.report.p99_ns as f64 / 1e3,
                        c.seat.summary(),
                        if c.seat.shared { " (CPUs shared)" } else { "" }
                    )
                }
                None => out += &format!("{w:>7} {m:<8} {:>11}\n", "none"),
            }
        }
    }
    out
}

/// The table: per case, tep here beside the seed's VPP figure.
pub fn table(cases: &[Case]) -> String {
    let mut out = String::new();
    out += "seed 000: 1492-byte IPv4 packets into a tep gateway, GTP-U/IPv6 out (workers pinned)\n";
    out += &format!(
        "{:>2} {:<8} {:>9} {:>9} {:>9} {:>7} {:>10} {:>10} {:>10} {:>10} {:>10} | {:>7} {:>11}\n",
        "wk",
        "mode",
        "offered",
        "achieved",
        "received",
        "loss%",
        "min µs",
        "avg µs",
        "p50 µs",
        "p99 µs",
        "max µs",
        "VPP loss%",
        "VPP avg µs"
    );
    for c in cases {
        let r = &c.report;
        let us = |ns: u64| format!("{:.1}", ns as f64 / 1000.0);
        let (seed_loss, seed_avg) = match c.seed {
            Some(s) => (format!("{:.3}", s.loss_pct), us(s.avg_ns)),
            None => ("-".to_string(), "-".to_string()),
        };
        out += &format!(
            "{:>2} {:<8} {:>9.0} {:>9.0} {:>9} {:>7.3} {:>10} {:>10} {:>10} {:>10} {:>10} | {:>7} {:>11}{}\n",
            c.workers,
            c.mode,
            c.offered_pps,
            c.sent.achieved_pps,
            r.received,
            r.loss_pct,
            us(r.min_ns),
            us(r.avg_ns),
            us(r.p50_ns),
            us(r.p99_ns),
            us(r.max_ns),
            seed_loss,
            seed_avg,
            if c.generator_short {
                "  (generator short of the offered rate)"
            } else {
                ""
            }
        );
        if !c.seat.cpus.is_empty() {
            out += &format!(
                "     {} sender thread(s); {}\n",
                c.sent.threads,
                c.seat.summary()
            );
        }
    }
    out += "latency: probe send time (CLOCK_REALTIME) to the sink's kernel receive stamp (SO_TIMESTAMPNS), one machine's clock; loss by sequence number\n";
    out
}

/// The median of `v` (0 for none).
fn median_u64(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

/// tep's targets for seed 000: at the highest of the seed's rates, `full`
/// and `offload` lose nothing and their mean latency (the median over the
/// rounds) is at most 1.1x `zero`'s; `full`'s loss-free rate is at least
/// 0.95x `zero`'s. A target whose cases were not run is left out.
pub fn targets(runs: &Runs) -> Vec<Target> {
    // With several counts of workers, the targets are the first count's
    // (the scaling table has the rest).
    let first = |cases: &[Case]| -> Vec<Case> {
        let w = cases.first().map(|c| c.workers);
        cases
            .iter()
            .filter(|c| Some(c.workers) == w)
            .cloned()
            .collect()
    };
    let runs = &Runs {
        cases: first(&runs.cases),
        sweep: first(&runs.sweep),
    };
    let mut out = Vec::new();
    let top = runs.cases.iter().map(|c| c.offered_pps).fold(0.0, f64::max);
    let at_top = |mode: &str| -> Option<(u64, u64, usize, bool)> {
        let cs: Vec<&Case> = runs
            .cases
            .iter()
            .filter(|c| c.mode == mode && c.offered_pps == top)
            .collect();
        (!cs.is_empty()).then(|| {
            (
                median_u64(cs.iter().map(|c| c.report.avg_ns).collect()),
                cs.iter().map(|c| c.report.lost).sum(),
                cs.len(),
                cs.iter().any(|c| c.generator_short),
            )
        })
    };
    // How far zero's own mean moves between rounds: a ratio to zero's
    // mean below this spread cannot be told from the machine's noise.
    let zero_means: Vec<u64> = runs
        .cases
        .iter()
        .filter(|c| c.mode == "zero" && c.offered_pps == top)
        .map(|c| c.report.avg_ns)
        .collect();
    let noise = match (zero_means.iter().min(), zero_means.iter().max()) {
        (Some(&lo), Some(&hi)) if zero_means.len() > 1 && lo > 0 => format!(
            "; zero's own mean ranges {:.2}x between rounds",
            hi as f64 / lo as f64
        ),
        _ => String::new(),
    };
    if let Some((zero_avg, _, _, _)) = at_top("zero") {
        for mode in ["full", "offload"] {
            if let Some((avg, lost, rounds, short)) = at_top(mode) {
                let ratio = avg as f64 / zero_avg.max(1) as f64;
                out.push(Target {
                    name: format!("{mode} at {top:.0} pps: no loss, mean latency <= 1.1x zero's"),
                    pass: lost == 0 && ratio <= 1.1,
                    detail: format!(
                        "lost {lost}; mean {:.1} us against zero's {:.1} ({ratio:.2}x; medians of {rounds} round(s)){noise}{}",
                        avg as f64 / 1000.0,
                        zero_avg as f64 / 1000.0,
                        if short { "; the generator fell short of the offered rate" } else { "" }
                    ),
                });
            }
        }
    }
    let free = loss_free(&runs.sweep, &["zero", "full"]);
    if let [(_, Some(zero)), (_, Some(full))] = free.as_slice() {
        let ratio = full / zero;
        out.push(Target {
            name: "full's loss-free rate >= 0.95x zero's".to_string(),
            pass: ratio >= 0.95,
            detail: format!(
                "{full:.0} against {zero:.0} pps ({ratio:.2}x; the sweep's steps bound both)"
            ),
        });
    }
    out
}

/// The sweep: loss and latency against offered rate per mode, and each
/// mode's loss-free rate against `zero`'s.
pub fn sweep_table(runs: &Runs, modes: &[&str]) -> String {
    if runs.sweep.is_empty() {
        return String::new();
    }
    let mut out = String::from("\nseed 000 sweep: loss and latency against the offered rate\n");
    out += &format!(
        "{:>2} {:<8} {:>9} {:>9} {:>8} {:>10} {:>10} {:>10}  {}\n",
        "wk",
        "mode",
        "offered",
        "achieved",
        "loss%",
        "avg µs",
        "p50 µs",
        "p99 µs",
        "worker CPUs u/s/si/idle % (the worker thread's own %), longest loop gap, stalls"
    );
    for c in &runs.sweep {
        let us = |ns: u64| format!("{:.1}", ns as f64 / 1000.0);
        out += &format!(
            "{:>2} {:<8} {:>9.0} {:>9.0} {:>8.3} {:>10} {:>10} {:>10}  {}{}\n",
            c.workers,
            c.mode,
            c.offered_pps,
            c.sent.achieved_pps,
            c.report.loss_pct,
            us(c.report.avg_ns),
            us(c.report.p50_ns),
            us(c.report.p99_ns),
            c.seat.summary(),
            if c.generator_short {
                "  (generator short: the sweep stops here)"
            } else {
                ""
            }
        );
    }
    let single: Vec<Case> = runs
        .sweep
        .iter()
        .filter(|c| c.workers == runs.sweep[0].workers)
        .cloned()
        .collect();
    let free = loss_free(&single, modes);
    let zero = free.iter().find(|(m, _)| m == "zero").and_then(|(_, r)| *r);
    out += &format!(
        "loss-free rate with {} worker(s) (highest offered rate with no loss, the generator keeping up):",
        runs.sweep[0].workers
    );
    for (m, r) in &free {
        match (r, zero) {
            (Some(r), Some(z)) if m != "zero" => {
                out += &format!(" {m} {r:.0} pps ({:.2}x zero's);", r / z)
            }
            (Some(r), _) => out += &format!(" {m} {r:.0} pps;"),
            (None, _) => out += &format!(" {m} none;"),
        }
    }
    out.pop();
    out += "\n";
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::targets_text;

    #[test]
    fn the_probe_is_found_behind_gtpu_and_the_inner_headers() {
        // G-PDU header (8 bytes, no options), IPv4 (20), UDP (8), probe.
        let mut d = vec![0x30, 0xff, 0, 0, 0, 0, 0, 100];
        let mut ip = vec![0u8; 28];
        ip[0] = 0x45;
        d.extend_from_slice(&ip);
        let mut probe = [0u8; PROBE_LEN];
        write_probe(&mut probe, 7, 1234);
        d.extend_from_slice(&probe);
        let len = (d.len() - 8) as u16;
        d[2..4].copy_from_slice(&len.to_be_bytes());
        assert_eq!(probe_in(&d), Some((7, 1234)));
        assert_eq!(probe_in(&d[..20]), None);
    }

    #[test]
    fn a_gso_batch_is_probes_back_to_back_cut_into_messages() {
        // Seed 000's probe: 1492 bytes of IPv4, 1464 of UDP payload; 44
        // fit one 64 KiB message, the kernel takes 64 at most.
        assert_eq!(segments_for(32, 1464), 32);
        assert_eq!(segments_for(64, 1464), 44);
        assert_eq!(segments_for(100, 20), 64);
        assert_eq!(segments_for(0, 1464), 1);
        assert_eq!(
            messages(70, 32).collect::<Vec<_>>(),
            vec![(0, 32), (32, 32), (64, 6)]
        );
        assert_eq!(
            messages(3, 1).collect::<Vec<_>>(),
            vec![(0, 1), (1, 1), (2, 1)]
        );
        assert_eq!(messages(0, 8).count(), 0);
        let payload = 100;
        let mut buf = vec![0u8; 8 * payload];
        write_batch(&mut buf, payload, 3, 1000, 5, 777);
        // What the kernel cuts out of the message: each segment one probe,
        // its own number, the batch's stamp; past the batch, nothing.
        let probes: Vec<_> = buf.chunks(payload).map(read_probe).collect();
        for (i, p) in probes.iter().take(5).enumerate() {
            assert_eq!(*p, Some((probe_id(3, 1000 + i as u64), 777)), "segment {i}");
        }
        assert_eq!(probes[5], None);
    }

    #[test]
    fn a_gro_train_is_split_into_its_datagrams() {
        let payload = 64;
        let mut train = vec![0u8; 3 * payload + 30];
        for (i, b) in train.chunks_mut(payload).enumerate() {
            if b.len() >= PROBE_LEN {
                write_probe(b, probe_id(1, i as u64), 5);
            }
        }
        let got: Vec<_> = datagrams(&train, Some(payload as u16))
            .map(|d| (d.len(), read_probe(d)))
            .collect();
        assert_eq!(got.len(), 4);
        assert_eq!(got[2], (payload, Some((probe_id(1, 2), 5))));
        // The last is shorter: a datagram of its own.
        assert_eq!(got[3], (30, Some((probe_id(1, 3), 5))));
        // No train, or a size of zero: the buffer is one datagram.
        assert_eq!(datagrams(&train, None).count(), 1);
        assert_eq!(datagrams(&train[..10], Some(0)).count(), 1);
        assert_eq!(datagrams(&[], Some(64)).count(), 0);
    }

    #[test]
    fn sweep_steps_and_loss_free_rates() {
        assert_eq!(
            sweep_rates(275_000.0),
            vec![1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 2e5, 275_000.0]
        );
        assert_eq!(sweep_rates(500.0), vec![500.0]);
        let case = |mode: &str, pps: f64, lost: u64, short: bool| Case {
            mode: mode.to_string(),
            offered_pps: pps,
            sent: Sent::default(),
            report: Report {
                lost,
                ..Report::default()
            },
            generator_short: short,
            seed: None,
            workers: 1,
            seat: Seated::default(),
        };
        let sweep = [
            case("zero", 1e3, 0, false),
            case("zero", 2e3, 0, false),
            case("zero", 5e3, 0, true),
            case("full", 1e3, 0, false),
            case("full", 2e3, 3, false),
            case("lco", 1e3, 1, false),
        ];
        assert_eq!(
            loss_free(&sweep, &["zero", "full", "lco"]),
            vec![
                ("zero".to_string(), Some(2e3)),
                ("full".to_string(), Some(1e3)),
                ("lco".to_string(), None)
            ]
        );
    }

    #[test]
    fn targets_compare_medians_over_rounds_with_zero() {
        let case = |mode: &str, pps: f64, avg_ns: u64, lost: u64| Case {
            mode: mode.to_string(),
            offered_pps: pps,
            sent: Sent::default(),
            report: Report {
                avg_ns,
                lost,
                ..Report::default()
            },
            generator_short: false,
            seed: None,
            workers: 1,
            seat: Seated::default(),
        };
        let runs = Runs {
            cases: vec![
                case("zero", 100.0, 50_000, 0),
                case("zero", 1e5, 10_000, 0),
                case("zero", 1e5, 12_000, 0),
                case("zero", 1e5, 90_000, 0),
                // One outlier round: the median stays 10.5 us.
                case("full", 1e5, 10_500, 0),
                case("full", 1e5, 99_000, 0),
                case("full", 1e5, 10_400, 0),
                case("offload", 1e5, 10_000, 1),
            ],
            sweep: vec![case("zero", 1e3, 0, 0), case("full", 1e3, 0, 0)],
        };
        let t = targets(&runs);
        assert_eq!(t.len(), 3, "{t:?}");
        assert!(t[0].pass, "{t:?}");
        assert!(!t[1].pass, "offload lost one: {t:?}");
        assert!(t[2].pass, "{t:?}");
        assert!(targets_text(&t).contains("FAIL offload at 100000 pps"));
        // Zero against itself: 10 to 90 us between rounds.
        assert!(
            t[0].detail.contains("zero's own mean ranges 9.00x"),
            "{t:?}"
        );
    }

    #[test]
    fn the_limit_is_found_in_ten_percent_steps() {
        let r = refine(50_000.0, 100_000.0);
        assert_eq!(r.len(), 9, "{r:?}");
        assert!(
            (r[0] - 55_000.0).abs() < 1e-6 && (r[8] - 95_000.0).abs() < 1e-6,
            "{r:?}"
        );
        // The next decade's step: 10 % of the loss-free rate apart, up to
        // nine of them.
        assert_eq!(refine(20_000.0, 50_000.0).len(), 9);
        assert!(refine(100_000.0, 105_000.0).is_empty());
    }

    #[test]
    fn the_seed_table_is_there_for_what_it_measured() {
        assert_eq!(seed_figure("full", 275_000.0).unwrap().avg_ns, 8_167_461);
        assert!(seed_figure("lco", 100.0).is_none());
    }
}
