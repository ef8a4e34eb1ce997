//! What the metrics listener and the control socket share towards their
//! clients, who are local but untrusted: each is served on a thread of
//! its own, a few at a time, within a deadline, reading a bounded
//! request; whatever is refused is counted by reason.
//!
//! A thread per client rather than an event loop or an HTTP crate: a
//! handful of clients at a time (a scraper, an operator), one short
//! request each, and plain blocking I/O with a deadline bounds each of
//! them; the limit on threads bounds the rest.

use super::liveness::Beat;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a client has to send its request, and then to take its
/// answer.
pub const DEADLINE: Duration = Duration::from_secs(5);

/// How often an accepting loop comes round with nobody connecting.
pub const ACCEPT_WAKE: Duration = Duration::from_secs(1);

/// Why a client was refused (the `reason` label).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// All the client threads were busy: closed at once.
    Busy,
    /// Its request outgrew the cap.
    TooLong,
    /// It did not send its request, or take its answer, within
    /// [`DEADLINE`].
    TimedOut,
    /// Malformed, or not a request served there.
    BadRequest,
    /// Control socket: neither root, its owner, nor in `control_group`.
    Peer,
    /// Control socket: a `trace` while another one runs.
    TraceRunning,
    /// Control socket: a `trace` answered with less than its count, cut
    /// at the capture's memory cap.
    TraceCut,
}

impl Refusal {
    /// How many there are (the counters' array).
    const COUNT: usize = Refusal::TraceCut as usize + 1;

    /// Its `reason` label.
    pub fn name(self) -> &'static str {
        match self {
            Refusal::Busy => "busy",
            Refusal::TooLong => "too_long",
            Refusal::TimedOut => "timed_out",
            Refusal::BadRequest => "bad_request",
            Refusal::Peer => "peer",
            Refusal::TraceRunning => "trace_running",
            Refusal::TraceCut => "trace_cut",
        }
    }
}

/// The clients of one listener: how many are served now, at most
/// `limit`, and what was refused, by reason.
#[derive(Debug)]
pub struct Clients {
    limit: usize,
    active: AtomicUsize,
    reasons: &'static [Refusal],
    refused: [AtomicU64; Refusal::COUNT],
}

impl Clients {
    /// `limit` clients at a time; `reasons`: those this listener counts
    /// (and exports, zeros included).
    pub const fn new(limit: usize, reasons: &'static [Refusal]) -> Clients {
        Clients {
            limit,
            active: AtomicUsize::new(0),
            reasons,
            refused: [const { AtomicU64::new(0) }; Refusal::COUNT],
        }
    }

    /// Counts one client refused for `r`.
    pub fn refuse(&self, r: Refusal) {
        self.refused[r as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// The count of each of this listener's reasons.
    pub fn refused(&self) -> Vec<(&'static str, u64)> {
        self.reasons
            .iter()
            .map(|&r| (r.name(), self.refused[r as usize].load(Ordering::Relaxed)))
            .collect()
    }

    fn take(&'static self) -> Option<Slot> {
        self.active
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.limit).then_some(n + 1)
            })
            .ok()
            .map(|_| Slot(self))
    }
}

/// A client thread's place, given back when it ends.
struct Slot(&'static Clients);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Accepts clients with `accept` for ever, serving each on a thread of
/// its own (named `thread`) while `clients` has room, and closing it at
/// once otherwise. `accept` gives up every [`ACCEPT_WAKE`] (see
/// [`tep_sys::unix::set_accept_timeout`]), so the loop comes round even
/// when nobody connects.
pub fn accept_loop<S: Send + 'static>(
    beat: &Beat,
    clients: &'static Clients,
    thread: &str,
    accept: impl Fn() -> io::Result<S>,
    serve: impl Fn(S) + Send + Sync + 'static,
) -> io::Result<()> {
    let serve = Arc::new(serve);
    loop {
        beat.beat();
        let stream = match accept() {
            Ok(s) => s,
            Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                // Out of descriptors, say: wait rather than spin.
                tracing::debug!("{thread}: accept: {e}");
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        let Some(slot) = clients.take() else {
            clients.refuse(Refusal::Busy);
            continue;
        };
        let serve = serve.clone();
        let spawned = std::thread::Builder::new()
            .name(thread.to_string())
            .spawn(move || {
                let _slot = slot;
                serve(stream);
            });
        if let Err(e) = spawned {
            clients.refuse(Refusal::Busy);
            tracing::warn!("{thread}: cannot start a client thread: {e}");
        }
    }
}

/// Makes `listener` give up accepting every [`ACCEPT_WAKE`].
pub fn wake_periodically(listener: &impl std::os::fd::AsRawFd) -> io::Result<()> {
    tep_sys::unix::set_accept_timeout(listener, ACCEPT_WAKE)
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// A stream whose reads and writes can time out.
pub trait Timed: Read + Write {
    fn read_timeout(&self, t: Duration) -> io::Result<()>;
    fn write_timeout(&self, t: Duration) -> io::Result<()>;
}

impl Timed for TcpStream {
    fn read_timeout(&self, t: Duration) -> io::Result<()> {
        self.set_read_timeout(Some(t))
    }
    fn write_timeout(&self, t: Duration) -> io::Result<()> {
        self.set_write_timeout(Some(t))
    }
}

impl Timed for UnixStream {
    fn read_timeout(&self, t: Duration) -> io::Result<()> {
        self.set_read_timeout(Some(t))
    }
    fn write_timeout(&self, t: Duration) -> io::Result<()> {
        self.set_write_timeout(Some(t))
    }
}

/// Why a request could not be read.
#[derive(Debug)]
pub enum ReadError {
    /// Over the cap without its end.
    TooLong,
    /// Not whole by the deadline.
    TimedOut,
    /// The client closed, or the socket failed.
    Gone,
}

impl ReadError {
    /// What to count it as; `None`: the client left, nothing to hold
    /// against it.
    pub fn refusal(&self) -> Option<Refusal> {
        match self {
            ReadError::TooLong => Some(Refusal::TooLong),
            ReadError::TimedOut => Some(Refusal::TimedOut),
            ReadError::Gone => None,
        }
    }
}

/// Reads a request until `end` finds where it ends, within `cap` bytes
/// and by `deadline`; returns it up to its end. `end(buf, from)` looks
/// for the end in `buf`, where nothing before `from` can end it.
pub fn read_request(
    stream: &mut impl Timed,
    cap: usize,
    deadline: Instant,
    end: impl Fn(&[u8], usize) -> Option<usize>,
) -> Result<Vec<u8>, ReadError> {
    let mut buf = vec![0u8; cap];
    let mut len = 0;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ReadError::TimedOut);
        }
        if len == cap {
            return Err(ReadError::TooLong);
        }
        stream.read_timeout(left).map_err(|_| ReadError::Gone)?;
        let n = match stream.read(&mut buf[len..]) {
            Ok(0) => return Err(ReadError::Gone),
            Ok(n) => n,
            Err(e) if is_timeout(&e) => return Err(ReadError::TimedOut),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return Err(ReadError::Gone),
        };
        let from = len.saturating_sub(3);
        len += n;
        if let Some(at) = end(&buf[..len], from) {
            buf.truncate(at);
            return Ok(buf);
        }
    }
}

/// Writes all of `parts` by `deadline`; [`io::ErrorKind::TimedOut`] if
/// the client does not take them in time.
pub fn write_by(stream: &mut impl Timed, parts: &[&[u8]], deadline: Instant) -> io::Result<()> {
    for part in parts {
        let mut rest = *part;
        while !rest.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::ErrorKind::TimedOut.into());
            }
            stream.write_timeout(left)?;
            match stream.write(rest) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => rest = &rest[n..],
                Err(e) if is_timeout(&e) => return Err(io::ErrorKind::TimedOut.into()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}

/// Counts a failed answer: a client that did not take it in time.
pub fn count_write(clients: &Clients, result: io::Result<()>) {
    if let Err(e) = result {
        if e.kind() == io::ErrorKind::TimedOut {
            clients.refuse(Refusal::TimedOut);
        }
        tracing::debug!("client: {e}");
    }
}

/// Clients served at once: an operator's commands and a trace or two; a
/// stalled client holds one of them for [`DEADLINE`] at most.
const CONTROL_CLIENTS: usize = 8;

/// The control socket's refusals, in `show counters` and the metrics.
pub static CONTROL: Clients = Clients::new(
    CONTROL_CLIENTS,
    &[
        Refusal::Busy,
        Refusal::Peer,
        Refusal::TooLong,
        Refusal::TimedOut,
        Refusal::BadRequest,
        Refusal::TraceRunning,
        Refusal::TraceCut,
    ],
);

/// Scrapers served at once: Prometheus scrapes one at a time, and a few
/// more leave room for an operator's curl beside a stuck client.
const METRICS_CLIENTS: usize = 8;

/// The scrapers' refusals, exported as `tep_metrics_requests_refused`.
pub static METRICS: Clients = Clients::new(
    METRICS_CLIENTS,
    &[
        Refusal::Busy,
        Refusal::TooLong,
        Refusal::TimedOut,
        Refusal::BadRequest,
    ],
);

/// What the control socket and the metrics listener refused, by reason
/// (in `show counters` and the metrics).
pub fn refusals() -> [(&'static str, Vec<(&'static str, u64)>); 2] {
    [
        ("control", CONTROL.refused()),
        ("metrics", METRICS.refused()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn newline(buf: &[u8], from: usize) -> Option<usize> {
        buf[from..]
            .iter()
            .position(|&b| b == b'\n')
            .map(|i| from + i)
    }

    #[test]
    fn a_request_is_bounded_by_its_cap_and_its_deadline() {
        let (mut a, mut b) = UnixStream::pair().unwrap();
        let soon = || Instant::now() + Duration::from_millis(200);
        b.write_all(b"show tunnels\nrest").unwrap();
        let got = read_request(&mut a, 64, soon(), newline).unwrap();
        assert_eq!(got, b"show tunnels");
        // Nothing more comes: the deadline.
        let (mut a, mut b) = UnixStream::pair().unwrap();
        b.write_all(b"partial").unwrap();
        assert!(matches!(
            read_request(&mut a, 64, soon(), newline),
            Err(ReadError::TimedOut)
        ));
        // Exactly the cap without an end: too long.
        let (mut a, mut b2) = UnixStream::pair().unwrap();
        b2.write_all(&[b'x'; 64]).unwrap();
        assert!(matches!(
            read_request(&mut a, 64, soon(), newline),
            Err(ReadError::TooLong)
        ));
        drop(b2);
        let (mut a, b3) = UnixStream::pair().unwrap();
        drop(b3);
        let e = read_request(&mut a, 64, soon(), newline).unwrap_err();
        assert!(e.refusal().is_none(), "{e:?}");
    }

    #[test]
    fn an_answer_nobody_takes_times_out() {
        let (mut a, _b) = UnixStream::pair().unwrap();
        let big = vec![0u8; 16 << 20];
        let e = write_by(
            &mut a,
            &[b"ok\n", &big],
            Instant::now() + Duration::from_millis(200),
        )
        .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
    }

    #[test]
    fn clients_past_the_limit_find_no_room() {
        static C: Clients = Clients::new(2, &[Refusal::Busy, Refusal::Peer]);
        let one = C.take().unwrap();
        let _two = C.take().unwrap();
        assert!(C.take().is_none());
        drop(one);
        assert!(C.take().is_some());
        C.refuse(Refusal::Peer);
        assert_eq!(C.refused(), vec![("busy", 0), ("peer", 1)]);
    }
}
