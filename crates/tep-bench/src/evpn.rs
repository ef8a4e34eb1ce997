//! `tep-bench evpn`: how fast tep follows BGP EVPN (issue 27), end to end
//! through the real daemon, in namespaces built here (root).
//!
//! `h1` runs `tep run` with one EVPN network, blue (VNI 100, 192.0.2.1),
//! on a VXLAN device `tepvx100` and its bridge made here as an operator
//! would; an underlay veth joins it to `sink`, which holds the remote
//! VTEPs' addresses (192.0.2.10 and up) and sees what tep sends with an
//! AF_PACKET socket. The bench plays zebra: it writes into `tepvx100`'s
//! FDB over rtnetlink what zebra writes for BGP routes (a MAC: NTF_SELF |
//! NTF_EXT_LEARNED, REACHABLE, dst VTEP; a VTEP: a flood entry). A sender
//! writes Ethernet frames into tep's TAP (`tep-blue`) through an AF_PACKET
//! socket, one per period; "forwarded by it" is the sink seeing a VXLAN
//! datagram at the right VTEP with that inner destination. The sender's
//! thread, the sink's and the writer's stamp with the same monotonic clock.
//!
//! Two measurements, on one daemon:
//! - start: MACs and flood entries are in the kernel before tep starts;
//!   from tep's spawn, the time until the sink has seen a frame to every
//!   MAC at its VTEP (the sender goes round the MACs not seen yet, one a
//!   period, so a round of N MACs takes N periods: an upper bound), the
//!   time the last frame that tep did not forward by its MAC's entry was
//!   sent (every later one was: a lower bound), and, for comparison, until
//!   `tep show evpn --json` counts them all (polled every 20 ms).
//! - changes: one at a time, half new MACs, half MACs moved to another
//!   VTEP; the flood entries are withdrawn first, so that a frame to a MAC
//!   tep does not know goes nowhere rather than to every VTEP. t0 is taken
//!   right before the netlink request, t1 when the sink's `recvfrom` returns
//!   the first datagram by it; the sender sends to the changed MAC from
//!   before t0, so t1 − t0 is late by up to one period (the resolution).

use crate::report::{targets_text, Target};
use serde::Serialize;
use std::io;
use std::net::{Ipv4Addr, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use tep_sys::netlink::{self, bridge_fdb_add_remote};
use tep_testing::netns::{Daemon, Namespaces};

/// What `tep-bench evpn` is asked.
#[derive(Clone, Debug, clap::Args)]
pub struct Options {
    /// Remote MAC changes timed, half new MACs and half moves to another
    /// VTEP (default 1000; --quick 40).
    #[arg(long)]
    pub changes: Option<usize>,
    /// Remote MACs in the kernel's FDB before tep starts (default 10000;
    /// --quick 500).
    #[arg(long)]
    pub macs: Option<u32>,
    /// Remote VTEPs they are behind, 2..=240 (default 100; --quick 10).
    #[arg(long)]
    pub vteps: Option<u16>,
    /// The sender's period in µs: one frame into tep's TAP each period,
    /// the resolution of the convergence times.
    #[arg(long, default_value_t = 20)]
    pub period_us: u64,
    /// A small run (for the test): 500 MACs, 10 VTEPs, 40 changes.
    #[arg(long)]
    pub quick: bool,
    /// One JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// The tep binary to run (default: the `tep` beside this tep-bench).
    #[arg(long, value_name = "PATH")]
    pub tep: Option<PathBuf>,
}

/// The sizes of a run.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Plan {
    pub macs: u32,
    pub vteps: u16,
    pub changes: usize,
    pub period_us: u64,
}

const VNI: u32 = 100;
const LOCAL: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
/// VTEP `j` is 192.0.2.(FIRST_VTEP + j).
const FIRST_VTEP: u8 = 10;
const MAX_VTEPS: u16 = 240;
const VXLAN_DEV: &str = "tepvx100";
const BRIDGE_DEV: &str = "tepbr100";
const TAP: &str = "tep-blue";
/// The underlay veth's ends, in h1 and in sink.
const UL: &str = "ul";
/// Where tep sends VXLAN (its networks' default `remote_port`).
const VXLAN_PORT: u16 = 4789;
/// The sender's source MAC: a workload behind tep.
const SRC_MAC: [u8; 6] = [2, 0xff, 0, 0, 0, 1];
/// The IEEE's local experimental ethertype: nothing answers it.
const ETHERTYPE: u16 = 0x88B5;
/// How long a change may take before it counts as a timeout.
const CHANGE_TIMEOUT: Duration = Duration::from_secs(2);
/// Frames flow to a changed MAC this long before its entry is written.
const SETTLE: Duration = Duration::from_millis(3);
/// Once every MAC has been seen at its VTEP, the sink watches this long
/// for a flooded copy that says one of them was seen early by chance.
const GRACE: Duration = Duration::from_millis(250);
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// MAC `id`: 02:00 and the id.
fn mac_of(id: u32) -> [u8; 6] {
    let b = id.to_be_bytes();
    [2, 0, b[0], b[1], b[2], b[3]]
}

fn id_of(mac: &[u8]) -> Option<u32> {
    (mac.len() == 6 && mac[..2] == [2, 0])
        .then(|| u32::from_be_bytes([mac[2], mac[3], mac[4], mac[5]]))
}

fn vtep_addr(j: u16) -> Ipv4Addr {
    Ipv4Addr::new(192, 0, 2, FIRST_VTEP + j as u8)
}

fn vtep_of(addr: [u8; 4], vteps: u16) -> Option<u16> {
    let j = u16::from(addr[3].checked_sub(FIRST_VTEP)?);
    (addr[..3] == [192, 0, 2] && j < vteps).then_some(j)
}

/// Where MAC `id` of the start's table is.
fn home(id: u32, vteps: u16) -> u16 {
    (id % u32::from(vteps)) as u16
}

/// What the threads share.
#[derive(Debug)]
struct Shared {
    stop: AtomicBool,
    /// The start: the sender goes over the MACs not seen yet.
    start_mode: AtomicBool,
    /// The changes: the MAC the sender sends to (u64::MAX: none).
    target: AtomicU64,
    /// The changes: (MAC << 16 | VTEP) + 1 the sink waits for; 0: none.
    armed: AtomicU64,
    /// The start: each MAC seen at its VTEP (last copy).
    done: Vec<AtomicBool>,
    sent: AtomicU64,
    send_errors: AtomicU64,
    /// The start's frames.
    track: Track,
}

/// When each frame of the start was sent and whether it arrived at its
/// MAC's VTEP, by sequence number (the first [`TRACKED`]).
#[derive(Debug)]
struct Track {
    base: Instant,
    /// ns after `base` + 1; 0: not sent.
    sent_ns: Vec<AtomicU64>,
    /// The MAC each frame went to.
    macs: Vec<AtomicU32>,
    /// [`ARRIVED`], [`FLOODED`] or 0 (neither yet).
    arrived: Vec<AtomicU8>,
}

/// What [`Track::last_lost`] found.
#[derive(Debug, Default, PartialEq, Eq)]
struct Lost {
    last: Option<Instant>,
    lost: u64,
    dropped: u64,
}

/// A frame's one copy arrived at its MAC's VTEP.
const ARRIVED: u8 = 1;
/// A copy arrived at another VTEP: it was flooded, not forwarded by the
/// MAC's entry (whatever other copies did).
const FLOODED: u8 = 2;

/// Frames of the start tracked: 64 per MAC of the largest table at least.
const TRACKED: usize = 1 << 22;

impl Track {
    fn new(frames: usize) -> Track {
        Track {
            base: Instant::now(),
            sent_ns: (0..frames).map(|_| AtomicU64::new(0)).collect(),
            macs: (0..frames).map(|_| AtomicU32::new(0)).collect(),
            arrived: (0..frames).map(|_| AtomicU8::new(0)).collect(),
        }
    }

    /// Frame `seq`, to MAC `id`, is sent now.
    fn sent(&self, seq: u64, id: u32) {
        if let Some(s) = self.sent_ns.get(seq as usize) {
            self.macs[seq as usize].store(id, Ordering::Relaxed);
            s.store(self.base.elapsed().as_nanos() as u64 + 1, Ordering::Relaxed);
        }
    }

    /// A copy of frame `seq` arrived, at its MAC's VTEP (`right`) or not.
    fn arrived(&self, seq: u64, right: bool) {
        if let Some(a) = self.arrived.get(seq as usize) {
            if right {
                let _ = a.compare_exchange(0, ARRIVED, Ordering::Relaxed, Ordering::Relaxed);
            } else {
                a.store(FLOODED, Ordering::Relaxed);
            }
        }
    }

    /// The frames that did not arrive at their MAC's VTEP: when the last
    /// one sent before a frame to its MAC first did was sent (tep did not
    /// forward by that MAC yet), how many were such, and how many were
    /// lost after their MAC worked (dropped on the way, not unknown).
    fn last_lost(&self) -> Lost {
        let mut worked = vec![false; self.macs.len()];
        let mut l = Lost::default();
        for seq in 0..self.sent_ns.len() {
            let ns = self.sent_ns[seq].load(Ordering::Relaxed);
            if ns == 0 {
                break;
            }
            let m = self.macs[seq].load(Ordering::Relaxed) as usize;
            let ok = self.arrived[seq].load(Ordering::Relaxed) == ARRIVED;
            match worked.get_mut(m) {
                Some(w) if ok => *w = true,
                Some(true) => l.dropped += 1,
                _ => {
                    l.lost += 1;
                    l.last = Some(self.base + Duration::from_nanos(ns - 1));
                }
            }
        }
        l
    }
}

impl Shared {
    fn new(macs: u32) -> Shared {
        Shared {
            stop: AtomicBool::new(false),
            start_mode: AtomicBool::new(false),
            target: AtomicU64::new(u64::MAX),
            armed: AtomicU64::new(0),
            done: (0..macs).map(|_| AtomicBool::new(false)).collect(),
            sent: AtomicU64::new(0),
            send_errors: AtomicU64::new(0),
            track: Track::new(TRACKED.min(macs as usize * 64 + 4096)),
        }
    }
}

fn pack(id: u32, vtep: u16) -> u64 {
    ((u64::from(id) << 16) | u64::from(vtep)) + 1
}

/// What the sink tells the writer.
#[derive(Debug)]
enum Seen {
    /// Its socket is open.
    Ready,
    /// The armed (MAC, VTEP) arrived at `t`.
    Hit { id: u32, vtep: u16, t: Instant },
    /// The start: every MAC at its VTEP since `t`; copies seen elsewhere.
    All { t: Instant, flooded: u64 },
}

/// An AF_PACKET socket bound to one interface.
#[derive(Debug)]
struct Packet(OwnedFd);

impl Packet {
    /// `protocol` (host order): 0 sends only, ETH_P_IP receives IPv4.
    fn bind(ifindex: u32, protocol: u16) -> io::Result<Packet> {
        let proto = protocol.to_be();
        // SAFETY: plain socket(2) call, no pointers.
        let fd = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                i32::from(proto),
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a new descriptor nobody else owns.
        let sock = Packet(unsafe { OwnedFd::from_raw_fd(fd) });
        // SAFETY: all-zero is a valid sockaddr_ll.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = proto;
        sll.sll_ifindex = ifindex as i32;
        // SAFETY: sll lives across the call and its size is given.
        let r = unsafe {
            libc::bind(
                fd,
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(sock)
    }

    fn set_int(&self, level: i32, name: i32, value: i32) -> io::Result<()> {
        // SAFETY: value lives across the call and its size is given.
        let r = unsafe {
            libc::setsockopt(
                self.0.as_raw_fd(),
                level,
                name,
                (&value as *const i32).cast(),
                4,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Receives for at most `timeout` per call, into a large queue.
    fn for_receiving(self, timeout: Duration) -> io::Result<Packet> {
        self.set_int(libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, 32 << 20)?;
        let tv = libc::timeval {
            tv_sec: 0,
            tv_usec: timeout.as_micros() as libc::suseconds_t,
        };
        // SAFETY: tv lives across the call and its size is given.
        let r = unsafe {
            libc::setsockopt(
                self.0.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&tv as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as u32,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(self)
    }

    fn send(&self, frame: &[u8]) -> io::Result<()> {
        // SAFETY: frame is valid for its length during the call.
        let n = unsafe { libc::send(self.0.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// One frame that arrived (not one this host sent); its length.
    fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            // SAFETY: all-zero is a valid sockaddr_ll.
            let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            let mut len = std::mem::size_of::<libc::sockaddr_ll>() as u32;
            // SAFETY: buf, from and len are valid for the call; the kernel
            // writes at most their sizes.
            let n = unsafe {
                libc::recvfrom(
                    self.0.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    0,
                    (&mut from as *mut libc::sockaddr_ll).cast(),
                    &mut len,
                )
            };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            if from.sll_pkttype != libc::PACKET_OUTGOING {
                return Ok(n as usize);
            }
        }
    }
}

/// A datagram of tep's to a VTEP of the lab, as the sink sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Datagram {
    /// The inner destination MAC's id.
    id: u32,
    vtep: u16,
    /// The sender's sequence number.
    seq: u64,
}

/// The datagram in an Ethernet frame, when it is one of tep's to a VTEP
/// of the lab.
fn parse(frame: &[u8], vteps: u16) -> Option<Datagram> {
    if frame.get(12..14)? != [0x08, 0x00] {
        return None;
    }
    let ip = frame.get(14..)?;
    let ihl = usize::from(ip.first()? & 0x0f) * 4;
    if ip.first()? >> 4 != 4 || ihl < 20 || *ip.get(9)? != 17 {
        return None;
    }
    let vtep = vtep_of(ip.get(16..20)?.try_into().ok()?, vteps)?;
    let udp = ip.get(ihl..)?;
    if udp.get(2..4)? != VXLAN_PORT.to_be_bytes() {
        return None;
    }
    // UDP 8, VXLAN 8, then the inner frame: its destination, and the
    // sequence number after its Ethernet header.
    let inner = udp.get(16..)?;
    let id = id_of(inner.get(..6)?)?;
    let seq = u64::from_be_bytes(inner.get(14..22)?.try_into().ok()?);
    Some(Datagram { id, vtep, seq })
}

/// The start's count: each MAC counts once its last copy went to its
/// VTEP; a copy elsewhere (flooded while tep did not have the MAC yet)
/// takes it back.
#[derive(Debug)]
struct Tally {
    macs: u32,
    vteps: u16,
    seen: u32,
    flooded: u64,
    /// When `seen` last reached `macs`.
    full_at: Option<Instant>,
}

impl Tally {
    /// Takes a copy of MAC `id` at `vtep`; true when it is the MAC's.
    fn see(&mut self, done: &[AtomicBool], id: u32, vtep: u16, t: Instant) -> bool {
        let Some(flag) = done.get(id as usize) else {
            return false;
        };
        let right = vtep == home(id, self.vteps);
        if !right {
            self.flooded += 1;
        }
        match (flag.swap(right, Ordering::Relaxed), right) {
            (false, true) => {
                self.seen += 1;
                if self.seen == self.macs {
                    self.full_at = Some(t);
                }
            }
            (true, false) => {
                self.seen -= 1;
                self.full_at = None;
            }
            _ => {}
        }
        right
    }
}

/// The sink, on the calling thread: in namespace `ns`, every VXLAN
/// datagram of tep's is stamped and matched.
fn sink(ns: &str, shared: &Shared, plan: Plan, tx: mpsc::Sender<Seen>) -> Result<(), String> {
    tep_sys::netns::enter(ns).map_err(|e| format!("sink: {e}"))?;
    let ul = netlink::link_by_name(UL).map_err(|e| format!("sink: {e}"))?;
    let sock = Packet::bind(ul.index, libc::ETH_P_IP as u16)
        .and_then(|s| s.for_receiving(Duration::from_millis(20)))
        .map_err(|e| format!("sink: AF_PACKET on {UL}: {e}"))?;
    // Bound and never read: the datagrams end here instead of drawing ICMP
    // port unreachables back to tep.
    let _drain = UdpSocket::bind(("0.0.0.0", VXLAN_PORT)).map_err(|e| format!("sink: {e}"))?;
    let _ = tx.send(Seen::Ready);
    let mut tally = Tally {
        macs: plan.macs,
        vteps: plan.vteps,
        seen: 0,
        flooded: 0,
        full_at: None,
    };
    let mut buf = [0u8; 2048];
    while !shared.stop.load(Ordering::Relaxed) {
        let got = match sock.recv(&mut buf) {
            Ok(n) => Some((parse(&buf[..n], plan.vteps), Instant::now())),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) =>
            {
                None
            }
            Err(e) => return Err(format!("sink: recv: {e}")),
        };
        let start = shared.start_mode.load(Ordering::Relaxed);
        if let Some((Some(Datagram { id, vtep, seq }), t)) = got {
            if start {
                let right = tally.see(&shared.done, id, vtep, t);
                shared.track.arrived(seq, right);
            } else if shared
                .armed
                .compare_exchange(pack(id, vtep), 0, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
            {
                let _ = tx.send(Seen::Hit { id, vtep, t });
            }
        }
        if let Some(t) = tally.full_at.filter(|t| start && t.elapsed() > GRACE) {
            shared.start_mode.store(false, Ordering::Relaxed);
            let _ = tx.send(Seen::All {
                t,
                flooded: tally.flooded,
            });
        }
    }
    Ok(())
}

/// The sender, on the calling thread: in namespace `ns`, once tep's TAP
/// exists, one frame per period into it.
fn sender(ns: &str, shared: &Shared, period: Duration) -> Result<(), String> {
    tep_sys::netns::enter(ns).map_err(|e| format!("sender: {e}"))?;
    let tap = loop {
        if shared.stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        if let Ok(l) = netlink::link_by_name(TAP) {
            break l.index;
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    let sock = Packet::bind(tap, 0).map_err(|e| format!("sender: AF_PACKET on {TAP}: {e}"))?;
    tight_timers();
    let mut frame = [0u8; 60];
    frame[6..12].copy_from_slice(&SRC_MAC);
    frame[12..14].copy_from_slice(&ETHERTYPE.to_be_bytes());
    let (mut cursor, mut seq, mut due) = (0usize, 0u64, Instant::now());
    while !shared.stop.load(Ordering::Relaxed) {
        let id = if shared.start_mode.load(Ordering::Relaxed) {
            next_unseen(&shared.done, &mut cursor)
        } else {
            u32::try_from(shared.target.load(Ordering::Relaxed)).ok()
        };
        if let Some(id) = id {
            frame[..6].copy_from_slice(&mac_of(id));
            frame[14..22].copy_from_slice(&seq.to_be_bytes());
            if shared.start_mode.load(Ordering::Relaxed) {
                shared.track.sent(seq, id);
            }
            seq += 1;
            // Down for a moment while tep sets its TAP up: counted (and a
            // frame tep did not forward).
            match sock.send(&frame) {
                Ok(()) => shared.sent.fetch_add(1, Ordering::Relaxed),
                Err(_) => shared.send_errors.fetch_add(1, Ordering::Relaxed),
            };
        }
        due = pace(due + period);
    }
    Ok(())
}

/// The next MAC from `cursor` on that the sink has not seen at its VTEP.
fn next_unseen(done: &[AtomicBool], cursor: &mut usize) -> Option<u32> {
    for _ in 0..done.len() {
        let i = *cursor % done.len();
        *cursor = i + 1;
        if !done[i].load(Ordering::Relaxed) {
            return Some(i as u32);
        }
    }
    None
}

/// Waits until `due`; a sender that fell more than a millisecond behind
/// starts again from now rather than bursting. It sleeps rather than
/// spins (the machine's other work, tep included, keeps its CPUs): with
/// the timer slack at 1 ns a sleep overshoots by a few µs on an idle CPU,
/// more on a busy one, which the achieved period reports.
fn pace(due: Instant) -> Instant {
    let now = Instant::now();
    match due.checked_duration_since(now) {
        Some(left) => {
            std::thread::sleep(left);
            due
        }
        None if now - due > Duration::from_millis(1) => now,
        None => due,
    }
}

/// The calling thread's sleeps end as close to their time as the kernel
/// can (the default slack is 50 µs).
fn tight_timers() {
    // SAFETY: prctl with an integer argument, no pointers.
    let _ = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
}

/// Percentiles of one kind of change, ms.
#[derive(Clone, Debug, Serialize)]
pub struct Stats {
    pub n: usize,
    pub median_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// Nearest-rank percentiles; None for no samples.
fn stats(samples: &[f64]) -> Option<Stats> {
    if samples.is_empty() {
        return None;
    }
    let mut v = samples.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let rank = |p: f64| v[((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
    Some(Stats {
        n: v.len(),
        median_ms: rank(0.5),
        p90_ms: rank(0.9),
        p99_ms: rank(0.99),
        max_ms: v[v.len() - 1],
    })
}

/// The start, ms from tep's spawn.
#[derive(Clone, Debug, Serialize)]
pub struct Start {
    /// `tep show tunnels` first answered (polled every 50 ms).
    pub control_ms: f64,
    /// `tep show evpn --json` first counted every MAC and VTEP (polled
    /// every 20 ms).
    pub shown_ms: Option<f64>,
    /// The sink had seen a frame to every MAC at its VTEP: the sender's
    /// round over the MACs, at least `macs` periods, bounds it from below.
    pub forwarded_ms: Option<f64>,
    /// The last frame that did not arrive at its MAC's VTEP (tep's TAP not
    /// up, the MAC not taken yet) was sent then: every frame sent later
    /// was forwarded by its entry. None: no frame was lost.
    pub last_lost_ms: Option<f64>,
    /// Frames of the start that did not arrive at their MAC's VTEP.
    pub lost_frames: u64,
    /// Frames lost after a frame to their MAC had arrived: dropped on the
    /// way (a queue full on a busy machine), not evidence of tep's state.
    pub dropped_frames: u64,
    /// MACs seen at their VTEP (all of them unless it timed out).
    pub forwarded_macs: u64,
    pub frames_sent: u64,
    /// Copies seen at another VTEP than their MAC's: flooded while tep had
    /// the flood entries and not yet the MAC.
    pub flooded_copies: u64,
}

/// The changes.
#[derive(Clone, Debug, Serialize)]
pub struct Changes {
    pub count: usize,
    pub new: Option<Stats>,
    pub moved: Option<Stats>,
    pub all: Option<Stats>,
    /// Changes not forwarded by within 2 s.
    pub timeouts: usize,
    /// Changes seen forwarded before their entry was written (a broken
    /// lab: none expected).
    pub early: usize,
    pub frames_sent: u64,
    /// The sender's mean period over the changes, µs: the resolution
    /// achieved (the asked one is `plan.period_us`).
    pub achieved_period_us: f64,
    /// The netlink request's round trip, µs (median): t0 to the kernel's
    /// acknowledgement.
    pub write_us: f64,
}

/// A run's results.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub plan: Plan,
    pub start: Start,
    pub changes: Changes,
    pub targets: Vec<Target>,
}

/// Runs and prints.
pub fn command(o: &Options) -> ExitCode {
    let fail = |e: String| {
        eprintln!("tep-bench evpn: {e}");
        ExitCode::from(1)
    };
    let plan = match plan(o) {
        Ok(p) => p,
        Err(e) => return fail(e),
    };
    let tep = match crate::seeds::find_tep(o.tep.as_deref()) {
        Ok(t) => t,
        Err(e) => return fail(e),
    };
    if let Err(e) = crate::seeds::clean_up_on_signals() {
        return fail(e);
    }
    match run(&tep, plan) {
        Ok(r) if o.json => {
            println!("{}", serde_json::to_string(&r).expect("serializes"));
            ExitCode::SUCCESS
        }
        Ok(r) => {
            print!("{}", render(&r));
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

fn plan(o: &Options) -> Result<Plan, String> {
    let (changes, macs, vteps) = if o.quick {
        (40, 500, 10)
    } else {
        (1000, 10_000, 100)
    };
    let p = Plan {
        changes: o.changes.unwrap_or(changes),
        macs: o.macs.unwrap_or(macs),
        vteps: o.vteps.unwrap_or(vteps),
        period_us: o.period_us,
    };
    if !(2..=MAX_VTEPS).contains(&p.vteps) {
        return Err(format!(
            "--vteps: 2..={MAX_VTEPS} (a MAC moves between two)"
        ));
    }
    if p.macs == 0 || p.macs > 1 << 22 {
        return Err("--macs: 1..=4194304".into());
    }
    if !(1..=10_000).contains(&p.period_us) {
        return Err("--period-us: 1..=10000".into());
    }
    Ok(p)
}

/// The namespaces: h1 (tep, its VXLAN device and bridge, static
/// neighbours for every VTEP) and sink (every VTEP's address).
fn build(plan: Plan) -> Result<Namespaces, String> {
    let lab = Namespaces::new(&format!("tepevpn{}", std::process::id()), &["h1", "sink"])?;
    lab.veth("h1", UL, "sink", UL)?;
    for ns in ["h1", "sink"] {
        // Nothing but the bench's frames: no router solicitations, no DAD.
        lab.run(
            ns,
            &[
                "sysctl",
                "-qw",
                "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1",
            ],
        )?;
        lab.run(ns, &["ip", "link", "set", UL, "up"])?;
    }
    lab.run(
        "h1",
        &["ip", "addr", "add", &format!("{LOCAL}/24"), "dev", UL],
    )?;
    let sink_mac = lab
        .run("sink", &["cat", &format!("/sys/class/net/{UL}/address")])?
        .trim()
        .to_string();
    let (mut addrs, mut neighs) = (String::new(), String::new());
    for j in 0..plan.vteps {
        let a = vtep_addr(j);
        addrs += &format!("addr add {a}/24 dev {UL}\n");
        neighs += &format!("neigh replace {a} lladdr {sink_mac} dev {UL} nud permanent\n");
    }
    batch(&lab, "sink", "ip", "addrs", &addrs)?;
    // tep's first datagram to a VTEP waits for no ARP.
    batch(&lab, "h1", "ip", "neighs", &neighs)?;
    let vx = [
        "ip",
        "link",
        "add",
        VXLAN_DEV,
        "type",
        "vxlan",
        "id",
        "100",
        "local",
        "192.0.2.1",
        "dstport",
        "4790",
        "nolearning",
    ];
    lab.run("h1", &vx)?;
    lab.run("h1", &["ip", "link", "add", BRIDGE_DEV, "type", "bridge"])?;
    lab.run(
        "h1",
        &["ip", "link", "set", VXLAN_DEV, "master", BRIDGE_DEV, "up"],
    )?;
    lab.run("h1", &["ip", "link", "set", BRIDGE_DEV, "up"])?;
    Ok(lab)
}

/// `tool -batch FILE` in namespace `ns`, the file holding `lines`.
fn batch(lab: &Namespaces, ns: &str, tool: &str, name: &str, lines: &str) -> Result<(), String> {
    let path = lab.dir.join(format!("{name}.batch"));
    std::fs::write(&path, lines).map_err(|e| format!("{}: {e}", path.display()))?;
    lab.run(ns, &[tool, "-batch", &path.display().to_string()])
        .map(drop)
}

fn config(lab: &Namespaces, plan: Plan) -> String {
    let max_macs = plan.macs as usize + plan.changes + 1024;
    format!(
        "[host]\ncontrol = \"{}\"\n\n[evpn]\nport = 4790\n\n\
         [[network]]\nname = \"blue\"\nkind = \"vxlan\"\nvni = {VNI}\nlocal = \"{LOCAL}\"\n\
         control = \"evpn\"\nevpn_device = \"{VXLAN_DEV}\"\nlearning = false\nmax_macs = {max_macs}\n",
        lab.socket("h1")
    )
}

/// Builds the lab, runs both measurements, removes the lab.
pub fn run(tep: &Path, plan: Plan) -> Result<Report, String> {
    let lab = build(plan)?;
    let shared = Shared::new(plan.macs);
    let (tx, rx) = mpsc::channel();
    let (h1, sink_ns) = (lab.ns("h1"), lab.ns("sink"));
    let (lab, shared, h1) = (&lab, &shared, h1.as_str());
    std::thread::scope(|s| {
        let sink = s.spawn(|| sink(&sink_ns, shared, plan, tx));
        let sender = s.spawn(|| sender(h1, shared, Duration::from_micros(plan.period_us)));
        let result = s
            .spawn(move || {
                tep_sys::netns::enter(h1).map_err(|e| e.to_string())?;
                experiment(lab, tep, shared, &rx, plan)
            })
            .join()
            .unwrap_or_else(|_| Err("the bench panicked".into()));
        shared.stop.store(true, Ordering::Relaxed);
        let sink = sink
            .join()
            .unwrap_or_else(|_| Err("the sink panicked".into()));
        let sender = sender
            .join()
            .unwrap_or_else(|_| Err("the sender panicked".into()));
        let report = result?;
        sink?;
        sender?;
        Ok(report)
    })
}

/// Both measurements, on a thread in h1.
fn experiment(
    lab: &Namespaces,
    tep: &Path,
    shared: &Shared,
    rx: &mpsc::Receiver<Seen>,
    plan: Plan,
) -> Result<Report, String> {
    match rx.recv_timeout(Duration::from_secs(10)) {
        Ok(Seen::Ready) => {}
        _ => return Err("the sink did not start".into()),
    }
    let vx = netlink::link_by_name(VXLAN_DEV)
        .map_err(|e| e.to_string())?
        .index;
    load(vx, plan)?;
    let (daemon, start) = start(lab, tep, shared, rx, plan)?;
    let sent_before = shared.sent.load(Ordering::Relaxed);
    withdraw_flood(lab, &daemon, plan)?;
    let changes = changes(vx, shared, rx, plan, sent_before)?;
    drop(daemon);
    let targets = targets(&start, &changes, plan);
    Ok(Report {
        plan,
        start,
        changes,
        targets,
    })
}

/// The kernel FDB before tep starts: a flood entry per VTEP and the MACs,
/// MAC `i` behind VTEP `i % vteps`.
fn load(vx: u32, plan: Plan) -> Result<(), String> {
    for j in 0..plan.vteps {
        bridge_fdb_add_remote(vx, [0; 6], vtep_addr(j).into()).map_err(|e| e.to_string())?;
    }
    for i in 0..plan.macs {
        let dst = vtep_addr(home(i, plan.vteps)).into();
        bridge_fdb_add_remote(vx, mac_of(i), dst).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Starts tep (t0) and times it taking and forwarding by the kernel's
/// FDB; the daemon goes on running.
fn start(
    lab: &Namespaces,
    tep: &Path,
    shared: &Shared,
    rx: &mpsc::Receiver<Seen>,
    plan: Plan,
) -> Result<(Daemon, Start), String> {
    let config = config(lab, plan);
    let socket = PathBuf::from(lab.socket("h1"));
    shared.start_mode.store(true, Ordering::Relaxed);
    let t0 = Instant::now();
    let poller = {
        let (tep, socket) = (tep.to_path_buf(), socket.clone());
        std::thread::spawn(move || poll_shown(&tep, &socket, plan, t0))
    };
    let daemon = Daemon::start(tep, &lab.ns("h1"), &lab.dir, "h1", &config, None, &[]);
    let control_ms = ms(t0.elapsed());
    let daemon = daemon?;
    let (forwarded, flooded) = match rx.recv_timeout(START_TIMEOUT) {
        Ok(Seen::All { t, flooded }) => (Some(ms(t - t0)), flooded),
        _ => (None, 0),
    };
    shared.start_mode.store(false, Ordering::Relaxed);
    let shown = poller.join().unwrap_or(None);
    let lost = shared.track.last_lost();
    let start = Start {
        last_lost_ms: lost.last.map(|t| ms(t.saturating_duration_since(t0))),
        lost_frames: lost.lost,
        dropped_frames: lost.dropped,
        control_ms,
        shown_ms: shown.map(ms),
        forwarded_ms: forwarded,
        forwarded_macs: shared
            .done
            .iter()
            .filter(|d| d.load(Ordering::Relaxed))
            .count() as u64,
        frames_sent: shared.sent.load(Ordering::Relaxed),
        flooded_copies: flooded,
    };
    Ok((daemon, start))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// `tep show evpn --json`, polled every 20 ms from `t0` until blue's
/// counters hold every MAC and VTEP of `plan`: when they first did.
fn poll_shown(tep: &Path, socket: &Path, plan: Plan, t0: Instant) -> Option<Duration> {
    while t0.elapsed() < START_TIMEOUT {
        if let Some(v) = show_evpn(tep, socket) {
            let count = |k: &str| v["events"][k].as_u64().unwrap_or(0);
            if count("mac_added") >= u64::from(plan.macs)
                && count("vtep_added") >= u64::from(plan.vteps)
            {
                return Some(t0.elapsed());
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// Network blue of `tep show evpn --json`.
fn show_evpn(tep: &Path, socket: &Path) -> Option<serde_json::Value> {
    let out = std::process::Command::new(tep)
        .args(["show", "evpn", "--json", "--socket"])
        .arg(socket)
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    blue(&String::from_utf8_lossy(&out.stdout))
}

fn blue(show: &str) -> Option<serde_json::Value> {
    let v: serde_json::Value = serde_json::from_str(show).ok()?;
    v.as_array()?.iter().find(|n| n["name"] == "blue").cloned()
}

/// Takes the flood entries out of the kernel (BGP withdrew every type-3
/// route) and waits for tep to follow: a frame to a MAC tep does not know
/// then goes nowhere, and a new MAC's first datagram is by its entry.
fn withdraw_flood(lab: &Namespaces, daemon: &Daemon, plan: Plan) -> Result<(), String> {
    let mut lines = String::new();
    for j in 0..plan.vteps {
        lines += &format!(
            "fdb del 00:00:00:00:00:00 dev {VXLAN_DEV} dst {} self\n",
            vtep_addr(j)
        );
    }
    batch(lab, "h1", "bridge", "withdraw", &lines)?;
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let v = daemon
            .control(&["show", "evpn", "--json"])
            .ok()
            .and_then(|t| blue(&t));
        if v.is_some_and(|v| v["vteps"].as_array().is_some_and(Vec::is_empty)) {
            return Ok(());
        }
        if Instant::now() > until {
            return Err(format!(
                "tep kept flood entries 10 s after they were withdrawn:\n{}",
                daemon.log()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What change `k` is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// A MAC the FDB does not have.
    New,
    /// A MAC it has, behind another VTEP now.
    Moved,
}

/// Change `k`: (MAC, its VTEP now, kind); `at` is where each MAC is.
/// Even changes add MAC `macs + k/2`, odd ones move one of the start's
/// MACs (spread over the table) to another VTEP.
fn change(k: usize, plan: Plan, at: &mut Vec<u16>) -> (u32, u16, Kind) {
    let half = (k / 2) as u32;
    let vteps = u32::from(plan.vteps);
    if k.is_multiple_of(2) {
        let id = plan.macs + half;
        let vtep = (half % vteps) as u16;
        if at.len() <= id as usize {
            at.resize(id as usize + 1, u16::MAX);
        }
        at[id as usize] = vtep;
        return (id, vtep, Kind::New);
    }
    let id = half.wrapping_mul(7919) % plan.macs;
    let from = u32::from(at[id as usize]);
    let vtep = ((from + 1 + half % (vteps - 1)) % vteps) as u16;
    at[id as usize] = vtep;
    (id, vtep, Kind::Moved)
}

/// The outcome of one change.
#[derive(Debug)]
enum Outcome {
    Converged(Duration),
    Early,
    Timeout,
}

/// Times `plan.changes` changes, one at a time.
fn changes(
    vx: u32,
    shared: &Shared,
    rx: &mpsc::Receiver<Seen>,
    plan: Plan,
    sent_before: u64,
) -> Result<Changes, String> {
    let mut at: Vec<u16> = (0..plan.macs).map(|i| home(i, plan.vteps)).collect();
    let (mut new, mut moved, mut writes) = (Vec::new(), Vec::new(), Vec::new());
    let (mut timeouts, mut early) = (0, 0);
    let began = Instant::now();
    for k in 0..plan.changes {
        let (id, vtep, kind) = change(k, plan, &mut at);
        match time_change(vx, shared, rx, id, vtep, &mut writes)? {
            Outcome::Converged(d) if kind == Kind::New => new.push(ms(d)),
            Outcome::Converged(d) => moved.push(ms(d)),
            Outcome::Early => early += 1,
            Outcome::Timeout => timeouts += 1,
        }
    }
    shared.target.store(u64::MAX, Ordering::Relaxed);
    let frames = shared.sent.load(Ordering::Relaxed) - sent_before;
    let all: Vec<f64> = new.iter().chain(&moved).copied().collect();
    Ok(Changes {
        count: plan.changes,
        new: stats(&new),
        moved: stats(&moved),
        all: stats(&all),
        timeouts,
        early,
        frames_sent: frames,
        achieved_period_us: began.elapsed().as_secs_f64() * 1e6 / frames.max(1) as f64,
        write_us: stats(&writes).map_or(0.0, |s| s.median_ms * 1e3),
    })
}

/// One change: frames to MAC `id` flow, the sink waits for it at `vtep`,
/// its entry is written at t0; pushes the write's round trip to `writes`.
fn time_change(
    vx: u32,
    shared: &Shared,
    rx: &mpsc::Receiver<Seen>,
    id: u32,
    vtep: u16,
    writes: &mut Vec<f64>,
) -> Result<Outcome, String> {
    while rx.try_recv().is_ok() {}
    shared.target.store(u64::from(id), Ordering::Relaxed);
    shared.armed.store(pack(id, vtep), Ordering::Relaxed);
    std::thread::sleep(SETTLE);
    let t0 = Instant::now();
    bridge_fdb_add_remote(vx, mac_of(id), vtep_addr(vtep).into()).map_err(|e| e.to_string())?;
    writes.push(ms(t0.elapsed()));
    let until = t0 + CHANGE_TIMEOUT;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(Seen::Hit { id: i, vtep: v, t }) if (i, v) == (id, vtep) => {
                return Ok(match t.checked_duration_since(t0) {
                    Some(d) => Outcome::Converged(d),
                    None => Outcome::Early,
                });
            }
            Ok(_) => continue,
            Err(_) => {
                shared.armed.store(0, Ordering::Relaxed);
                return Ok(Outcome::Timeout);
            }
        }
    }
}

/// Issue 27's targets.
fn targets(start: &Start, changes: &Changes, plan: Plan) -> Vec<Target> {
    let p99 = changes.all.as_ref().map(|s| s.p99_ms);
    vec![
        Target {
            name: "convergence p99 under 10 ms".into(),
            pass: p99.is_some_and(|p| p < 10.0) && changes.timeouts == 0,
            detail: format!(
                "p99 {} ms over {} changes, {} timeouts",
                crate::report::cell(p99, 2),
                changes.all.as_ref().map_or(0, |s| s.n),
                changes.timeouts
            ),
        },
        Target {
            name: format!("{} MACs and {} VTEPs at start", plan.macs, plan.vteps),
            pass: start.forwarded_ms.is_some(),
            detail: format!(
                "forwarded by all after {} ms ({} of {})",
                crate::report::cell(start.forwarded_ms, 1),
                start.forwarded_macs,
                plan.macs
            ),
        },
    ]
}

fn stats_row(name: &str, s: &Option<Stats>) -> String {
    match s {
        Some(s) => format!(
            "  {name:<7} {:>6} {:>8.3} {:>8.3} {:>8.3} {:>8.3}\n",
            s.n, s.median_ms, s.p90_ms, s.p99_ms, s.max_ms
        ),
        None => format!("  {name:<7} {:>6}\n", 0),
    }
}

/// The table.
pub fn render(r: &Report) -> String {
    let (p, s, c) = (&r.plan, &r.start, &r.changes);
    let cell = crate::report::cell;
    let mut out = format!(
        "tep-bench evpn: {} MACs over {} VTEPs, one frame every {} µs into tep's TAP\n\n",
        p.macs, p.vteps, p.period_us
    );
    out += "start, ms from tep's spawn:\n";
    out += &format!(
        "  control socket answers (50 ms polls)   {:>9.1}\n",
        s.control_ms
    );
    out += &format!(
        "  show evpn counts them all (20 ms polls) {:>8}\n",
        cell(s.shown_ms, 1)
    );
    out += &format!(
        "  last frame not forwarded by its MAC sent {:>7}   ({} such frames; {} dropped later)\n",
        cell(s.last_lost_ms, 1),
        s.lost_frames,
        s.dropped_frames
    );
    out += &format!(
        "  forwarded by every MAC at its VTEP     {:>9}   ({} of {} MACs, {} frames, {} flooded copies)\n\n",
        cell(s.forwarded_ms, 1),
        s.forwarded_macs,
        p.macs,
        s.frames_sent,
        s.flooded_copies
    );
    out += "changes, ms from the netlink write to the first VXLAN datagram by it:\n";
    out += "  kind         n   median      p90      p99      max\n";
    out += &stats_row("new", &c.new);
    out += &stats_row("moved", &c.moved);
    out += &stats_row("all", &c.all);
    out += &format!(
        "  {} timeouts, {} early; {} frames sent, one every {:.1} µs (asked {}): the resolution; netlink write {:.0} µs (median)\n",
        c.timeouts, c.early, c.frames_sent, c.achieved_period_us, p.period_us, c.write_us
    );
    out + &targets_text(&r.targets)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datagrams_are_matched_to_their_vtep_and_inner_mac() {
        let mut f = vec![0u8; 14];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        let mut ip = vec![
            0x45, 0, 0, 0, 0, 0, 0, 0, 64, 17, 0, 0, 192, 0, 2, 1, 192, 0, 2, 12,
        ];
        let mut udp = vec![0u8; 16];
        udp[2..4].copy_from_slice(&4789u16.to_be_bytes());
        udp.extend_from_slice(&mac_of(70_000));
        udp.extend_from_slice(&SRC_MAC);
        udp.extend_from_slice(&ETHERTYPE.to_be_bytes());
        udp.extend_from_slice(&77u64.to_be_bytes());
        ip.extend(udp);
        f.extend(ip);
        let d = Datagram {
            id: 70_000,
            vtep: 2,
            seq: 77,
        };
        assert_eq!(parse(&f, 100), Some(d));
        assert_eq!(parse(&f, 2), None, "VTEP 2 is not in a lab of 2");
        for cut in 0..f.len() {
            assert_eq!(parse(&f[..cut], 100), None, "cut at {cut}");
        }
        let mut other_port = f.clone();
        other_port[14 + 20 + 3] = 0x15;
        assert_eq!(parse(&other_port, 100), None);
    }

    #[test]
    fn changes_alternate_new_macs_and_moves_to_another_vtep() {
        let plan = Plan {
            macs: 10,
            vteps: 3,
            changes: 8,
            period_us: 20,
        };
        let mut at: Vec<u16> = (0..plan.macs).map(|i| home(i, plan.vteps)).collect();
        for k in 0..40 {
            let before = at.clone();
            let (id, vtep, kind) = change(k, plan, &mut at);
            assert_eq!(at[id as usize], vtep);
            if k.is_multiple_of(2) {
                assert_eq!((kind, id), (Kind::New, 10 + k as u32 / 2));
            } else {
                assert_eq!(kind, Kind::Moved);
                assert!(id < 10 && before[id as usize] != vtep, "change {k}");
            }
        }
    }

    #[test]
    fn a_flooded_copy_takes_a_mac_back() {
        let done: Vec<AtomicBool> = (0..2).map(|_| AtomicBool::new(false)).collect();
        let mut t = Tally {
            macs: 2,
            vteps: 2,
            seen: 0,
            flooded: 0,
            full_at: None,
        };
        let now = Instant::now();
        assert!(t.see(&done, 0, 0, now));
        assert!(t.see(&done, 1, 1, now));
        assert_eq!((t.seen, t.full_at), (2, Some(now)));
        assert!(!t.see(&done, 1, 0, now));
        assert_eq!((t.seen, t.full_at, t.flooded), (1, None, 1));
        assert!(!done[1].load(Ordering::Relaxed));
        assert!(!t.see(&done, 5, 0, now));
        assert_eq!(t.seen, 1, "not a MAC of the table");
    }

    #[test]
    fn the_last_lost_frame_is_the_last_sent_before_its_mac_worked() {
        let track = Track::new(8);
        assert_eq!(track.last_lost(), Lost::default());
        // MAC 0: lost, lost, arrived, lost (a drop); MAC 1: lost, arrived.
        for (seq, id) in [0, 1, 0, 0, 1, 0].into_iter().enumerate() {
            track.sent(seq as u64, id);
        }
        for seq in [3, 4] {
            track.arrived(seq, true);
        }
        let at = |seq: usize| {
            track.base + Duration::from_nanos(track.sent_ns[seq].load(Ordering::Relaxed) - 1)
        };
        let want = |last, lost, dropped| Lost {
            last: Some(last),
            lost,
            dropped,
        };
        assert_eq!(track.last_lost(), want(at(2), 3, 1));
        // A flooded frame (a copy elsewhere, before or after the right
        // one) is no proof: MAC 0 never worked.
        track.arrived(3, false);
        track.arrived(3, true);
        assert_eq!(track.last_lost(), want(at(5), 5, 0));
        // Past the tracked frames: nothing recorded, no panic.
        track.sent(100, 0);
        track.arrived(100, true);
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        let s = stats(&v).unwrap();
        assert_eq!(
            (s.median_ms, s.p90_ms, s.p99_ms, s.max_ms),
            (50.0, 90.0, 99.0, 100.0)
        );
        assert!(stats(&[]).is_none());
    }
}
