//! epoll (level-triggered) and eventfd: a worker sleeps on its queues, its
//! sockets and an eventfd other threads use to wake it.

use std::io;
use std::mem::{self, MaybeUninit};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

use crate::sys::{context, cvt, cvt_size, owned};

/// Most events one [`Epoll::wait`] returns (the caller's capacity permitting).
const MAX_EVENTS: usize = 256;

/// An epoll instance.
#[derive(Debug)]
pub struct Epoll {
    fd: OwnedFd,
}

/// One ready descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    pub token: u64,
    /// EPOLLIN.
    pub readable: bool,
    /// EPOLLOUT.
    pub writable: bool,
    /// EPOLLHUP, EPOLLRDHUP or EPOLLERR: reading or writing will report why.
    pub hangup: bool,
}

fn interest(readable: bool, writable: bool) -> u32 {
    let mut events = 0;
    if readable {
        events |= libc::EPOLLIN as u32;
    }
    if writable {
        events |= libc::EPOLLOUT as u32;
    }
    events
}

impl Epoll {
    /// epoll_create1(EPOLL_CLOEXEC).
    pub fn new() -> io::Result<Epoll> {
        // SAFETY: plain syscall, no pointers.
        let fd = owned(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })
            .map_err(|e| context(e, "epoll_create1"))?;
        Ok(Epoll { fd })
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, token: u64, events: u32) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: `ev` is a live epoll_event the kernel only reads.
        cvt(unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), op, fd, &mut ev) }).map(drop)
    }

    /// Watches `fd` (level-triggered); events carry `token`.
    pub fn add(&self, fd: RawFd, token: u64, readable: bool, writable: bool) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, token, interest(readable, writable))
            .map_err(|e| context(e, format_args!("epoll add fd {fd}")))
    }

    /// Changes what `fd` is watched for.
    pub fn modify(&self, fd: RawFd, token: u64, readable: bool, writable: bool) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd, token, interest(readable, writable))
            .map_err(|e| context(e, format_args!("epoll modify fd {fd}")))
    }

    /// Stops watching `fd`.
    pub fn delete(&self, fd: RawFd) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_DEL, fd, 0, 0)
            .map_err(|e| context(e, format_args!("epoll delete fd {fd}")))
    }

    /// Waits up to `timeout_ms` (-1: forever, 0: poll). `events` is cleared
    /// and filled with up to min(its capacity, 256) events (at least 1); no
    /// allocation when the capacity suffices. EINTR gives Ok(0).
    pub fn wait(&self, events: &mut Vec<Event>, timeout_ms: i32) -> io::Result<usize> {
        events.clear();
        let max = events.capacity().clamp(1, MAX_EVENTS);
        let mut raw = [MaybeUninit::<libc::epoll_event>::uninit(); MAX_EVENTS];
        // SAFETY: `raw` has room for `max` <= MAX_EVENTS events; the kernel
        // writes them and reads nothing.
        let n = unsafe {
            libc::epoll_wait(
                self.fd.as_raw_fd(),
                raw.as_mut_ptr().cast(),
                max as libc::c_int,
                timeout_ms,
            )
        };
        let n = match cvt(n) {
            Ok(n) => n as usize,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(0),
            Err(e) => return Err(context(e, "epoll_wait")),
        };
        let hangup = (libc::EPOLLHUP | libc::EPOLLRDHUP | libc::EPOLLERR) as u32;
        for ev in &raw[..n] {
            // SAFETY: epoll_wait initialised the first `n` entries.
            let ev = unsafe { ev.assume_init() };
            let bits = ev.events;
            events.push(Event {
                token: ev.u64,
                readable: bits & libc::EPOLLIN as u32 != 0,
                writable: bits & libc::EPOLLOUT as u32 != 0,
                hangup: bits & hangup != 0,
            });
        }
        Ok(n)
    }
}

impl AsRawFd for Epoll {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl AsFd for Epoll {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC): wakes a worker waiting in epoll.
#[derive(Debug)]
pub struct EventFd {
    fd: OwnedFd,
}

impl EventFd {
    pub fn new() -> io::Result<EventFd> {
        // SAFETY: plain syscall, no pointers.
        let fd = owned(unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) })
            .map_err(|e| context(e, "eventfd"))?;
        Ok(EventFd { fd })
    }

    /// Adds 1 to the counter: the descriptor becomes readable. A counter at
    /// its maximum (WouldBlock) is already readable, so that is Ok too.
    pub fn notify(&self) -> io::Result<()> {
        let one: u64 = 1;
        // SAFETY: writes the 8 bytes of `one`, which is live.
        let r = cvt_size(unsafe {
            libc::write(
                self.fd.as_raw_fd(),
                (&one as *const u64).cast(),
                mem::size_of::<u64>(),
            )
        });
        match r {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(()),
            Err(e) => Err(context(e, "eventfd write")),
        }
    }

    /// Reads and resets the counter: how many notifications since the last
    /// drain (0 when none).
    pub fn drain(&self) -> io::Result<u64> {
        let mut count: u64 = 0;
        // SAFETY: reads at most 8 bytes into `count`, which is live and exclusive.
        let r = cvt_size(unsafe {
            libc::read(
                self.fd.as_raw_fd(),
                (&mut count as *mut u64).cast(),
                mem::size_of::<u64>(),
            )
        });
        match r {
            Ok(_) => Ok(count),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
            Err(e) => Err(context(e, "eventfd read")),
        }
    }
}

impl AsRawFd for EventFd {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl AsFd for EventFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Waits until `fd` is readable or `timeout` passes; true when readable.
/// A signal ends the wait early (false): callers loop anyway. For one
/// control-plane descriptor, where an epoll set would be one more fd.
pub fn wait_readable(fd: RawFd, timeout: std::time::Duration) -> io::Result<bool> {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    // SAFETY: one pollfd, valid for the call.
    let n = unsafe { libc::poll(&mut p, 1, ms) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return match e.kind() {
            io::ErrorKind::Interrupted => Ok(false),
            _ => Err(e),
        };
    }
    Ok(n > 0 && p.revents & libc::POLLIN != 0)
}
