//! TCP request/response, the way netperf's TCP_RR measures it (which
//! Debian does not ship): one connection, a fixed-size request, a response
//! of the same size, the next request when the response is in; each round
//! trip timed with the monotonic clock. Written here rather than driving
//! sockperf because sockperf 3.7 binds IPv4 only (the seeds' SIT cases are
//! IPv6 inside) and reports no 95th percentile.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Round trips of one run.
pub struct RoundTrips {
    /// Each round trip, µs, in order.
    pub rtts_us: Vec<f64>,
    /// The timed span, seconds.
    pub seconds: f64,
}

/// Enters namespace `ns` (none when empty) and pins the calling thread to
/// `cpu`.
fn place(ns: &str, cpu: usize) -> io::Result<()> {
    if !ns.is_empty() {
        tep_sys::netns::enter(ns)?;
    }
    let _ = tep_sys::thread::pin_current_thread(cpu);
    Ok(())
}

/// The server, on the calling thread: in `ns` on `cpu`, listening on
/// `addr`; says on `ready` once bound, answers one connection until it
/// closes, gives up waiting for it when `stop` is set.
pub fn serve(
    ns: &str,
    cpu: usize,
    addr: SocketAddr,
    size: usize,
    ready: mpsc::Sender<io::Result<()>>,
    stop: &AtomicBool,
) -> io::Result<()> {
    let bound = place(ns, cpu).and_then(|_| TcpListener::bind(addr));
    let listener = match bound {
        Ok(l) => l,
        Err(e) => {
            let _ = ready.send(Err(io::Error::new(e.kind(), e.to_string())));
            return Err(e);
        }
    };
    listener.set_nonblocking(true)?;
    let _ = ready.send(Ok(()));
    let mut conn = loop {
        match listener.accept() {
            Ok((c, _)) => break c,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if stop.load(Ordering::Acquire) {
                    return Ok(());
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(e),
        }
    };
    conn.set_nonblocking(false)?;
    conn.set_nodelay(true)?;
    let mut buf = vec![0u8; size];
    loop {
        match conn.read_exact(&mut buf) {
            Ok(()) => conn.write_all(&buf)?,
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e),
        }
    }
}

/// The client, on the calling thread: in `ns` on `cpu`, connects to
/// `addr`, warms up for `warmup`, then times round trips for `seconds`.
pub fn measure(
    ns: &str,
    cpu: usize,
    addr: SocketAddr,
    size: usize,
    warmup: Duration,
    seconds: f64,
) -> io::Result<RoundTrips> {
    place(ns, cpu)?;
    let mut conn = TcpStream::connect_timeout(&addr, Duration::from_secs(3))?;
    conn.set_nodelay(true)?;
    conn.set_read_timeout(Some(Duration::from_secs(2)))?;
    let mut buf = vec![0x5au8; size];
    let mut one = |conn: &mut TcpStream| -> io::Result<()> {
        conn.write_all(&buf)?;
        conn.read_exact(&mut buf)
    };
    let until = Instant::now() + warmup;
    while Instant::now() < until {
        one(&mut conn)?;
    }
    // Room for a fast path's round trips, so that none allocates.
    let mut rtts_us = Vec::with_capacity((seconds * 200_000.0) as usize);
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(seconds);
    loop {
        let t = Instant::now();
        if t >= end {
            break;
        }
        one(&mut conn)?;
        rtts_us.push(t.elapsed().as_nanos() as f64 / 1000.0);
    }
    Ok(RoundTrips {
        rtts_us,
        seconds: start.elapsed().as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Over loopback in this namespace (an empty name enters none), the
    /// client times round trips and the server ends with its connection.
    #[test]
    fn round_trips_over_loopback() {
        let stop = AtomicBool::new(false);
        let (tx, rx) = mpsc::channel();
        // An ephemeral port: bind once to learn a free one.
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        std::thread::scope(|s| {
            let server = s.spawn(|| serve("", 0, addr, 64, tx, &stop));
            rx.recv().unwrap().unwrap();
            let r = s
                .spawn(|| measure("", 0, addr, 64, Duration::from_millis(10), 0.05))
                .join()
                .unwrap()
                .unwrap();
            assert!(!r.rtts_us.is_empty());
            assert!(r.rtts_us.iter().all(|&x| x > 0.0));
            assert!(r.seconds >= 0.05);
            server.join().unwrap().unwrap();
        });
    }

    /// A server nobody connects to gives up when told to.
    #[test]
    fn an_idle_server_stops() {
        let stop = AtomicBool::new(true);
        let (tx, rx) = mpsc::channel();
        let addr = SocketAddr::from(([127, 0, 0, 1], 0));
        serve("", 0, addr, 64, tx, &stop).unwrap();
        rx.recv().unwrap().unwrap();
    }
}
