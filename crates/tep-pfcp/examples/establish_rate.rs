//! How fast the pure node establishes sessions, and what a session costs
//! it in memory: pre-builds N Session Establishment Requests (an uplink
//! PDR with CHOOSE, a downlink PDR, two FARs, a QER, a URR: what an SMF
//! sends for a PDU session), then times `Node::handle` over them, the
//! responses emitted and drained, in rounds of a fresh node. Prints each
//! round and the median; then the heap the node holds per session, with
//! the response cache full and after it expired.
//!
//! ```sh
//! cargo run --release -p tep-pfcp --example establish_rate [sessions] [rounds]
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::{Duration, Instant};

use tep_pfcp::node::{Change, Config, Node, Refused, Usage, UserPlane};
use tep_pfcp::sample;
use tep_pfcp::types::NodeId;

/// Counts live heap bytes (the example's own measurement, nothing else).
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract for `alloc` is passed on.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        // SAFETY: `p` came from `alloc` with layout `l`.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new as isize - l.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract for `realloc` is passed on.
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static A: Counting = Counting;

/// The daemon's user plane would copy the rules into its table; this one
/// only looks at them.
struct NullUp(u64);

impl UserPlane for NullUp {
    fn apply(&mut self, c: Change<'_>) -> Result<(), Refused> {
        if let Change::Install { rules, .. } = c {
            self.0 += rules.pdrs.len() as u64;
        }
        Ok(())
    }
    fn take_usage(&mut self, _: u64, _: u32) -> Usage {
        Usage::default()
    }
}

const SMF: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 10);
const N3: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 1);

fn request(i: u32) -> Vec<u8> {
    let ue = Ipv4Addr::from(0x0a00_0000 + i);
    let gnb = Ipv4Addr::new(203, 0, 113, 5);
    sample::pdu_session_establishment(i & 0xff_ffff, i as u64 + 1, SMF, ue, gnb, i).to_bytes()
}

fn associated(now: Instant, smf: SocketAddr) -> Node {
    let mut c = Config::new(NodeId::V4(N3), 1, Some(N3), None);
    c.heartbeat_interval = None;
    let mut node = Node::new(c);
    let setup = sample::association_setup(0, SMF, 1);
    node.handle(now, smf, &setup.to_bytes(), &mut NullUp(0));
    while node.poll_transmit().is_some() {}
    node
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u32 = args
        .next()
        .map_or(100_000, |a| a.parse().expect("sessions"));
    let rounds: usize = args.next().map_or(7, |a| a.parse().expect("rounds"));
    let smf = SocketAddr::new(SMF.into(), 8805);
    let requests: Vec<Vec<u8>> = (1..=n).map(request).collect();
    let avg = requests.iter().map(Vec::len).sum::<usize>() / requests.len();
    println!(
        "{n} Session Establishment Requests of {avg} bytes, {rounds} rounds (a fresh node each)"
    );
    let mut rates = vec![];
    let mut up = NullUp(0);
    for r in 0..rounds {
        let now = Instant::now();
        let mut node = associated(now, smf);
        let mut sent = 0usize;
        let t = Instant::now();
        for q in &requests {
            node.handle(now, smf, q, &mut up);
            while let Some(x) = node.poll_transmit() {
                sent += x.payload.len();
            }
        }
        let dt = t.elapsed();
        assert_eq!(node.session_count(), n as usize);
        let rate = n as f64 / dt.as_secs_f64();
        println!(
            "round {r}: {:.1} ms, {:.0} establishments/s, {} response bytes",
            dt.as_secs_f64() * 1e3,
            rate,
            sent
        );
        rates.push(rate);
    }
    rates.sort_by(f64::total_cmp);
    println!(
        "median: {:.0} establishments/s ({:.2} us each)",
        rates[rates.len() / 2],
        1e6 / rates[rates.len() / 2]
    );

    // Memory: the node's heap per session, responses cached and not.
    let now = Instant::now();
    let before = LIVE.load(Ordering::Relaxed);
    let mut node = associated(now, smf);
    for q in &requests {
        node.handle(now, smf, q, &mut up);
        while node.poll_transmit().is_some() {}
    }
    let with_cache = LIVE.load(Ordering::Relaxed) - before;
    node.handle_timeout(now + Duration::from_secs(60), &mut up);
    let without = LIVE.load(Ordering::Relaxed) - before;
    println!(
        "node heap per session: {} bytes with the response cache full, {} bytes after it expired",
        with_cache / n as isize,
        without / n as isize
    );
    drop(node);
}
