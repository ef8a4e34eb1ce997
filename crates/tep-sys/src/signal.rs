//! Signals as a readable descriptor (signalfd), so the main loop sees them
//! in epoll instead of in an async handler.

use std::io;
use std::mem;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

use crate::sys::{context, cvt_size, owned};

/// The signals tep reacts to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Signal {
    /// SIGTERM: stop.
    Terminate,
    /// SIGINT: stop.
    Interrupt,
    /// SIGHUP: reload.
    Hangup,
}

impl Signal {
    /// The signal number.
    pub fn number(self) -> libc::c_int {
        match self {
            Signal::Terminate => libc::SIGTERM,
            Signal::Interrupt => libc::SIGINT,
            Signal::Hangup => libc::SIGHUP,
        }
    }

    /// The signal of a number, if tep has a name for it.
    pub fn from_number(signo: libc::c_int) -> Option<Signal> {
        match signo {
            libc::SIGTERM => Some(Signal::Terminate),
            libc::SIGINT => Some(Signal::Interrupt),
            libc::SIGHUP => Some(Signal::Hangup),
            _ => None,
        }
    }
}

/// A signalfd for a set of signals, which [`Signals::new`] blocks in the
/// calling thread (pthread_sigmask). Create it in main before spawning
/// threads: they inherit the mask, so the signals wait for this descriptor
/// instead of killing the process.
#[derive(Debug)]
pub struct Signals {
    fd: OwnedFd,
}

impl Signals {
    pub fn new(signals: &[Signal]) -> io::Result<Signals> {
        // SAFETY: sigset_t is plain data; sigemptyset initialises it.
        let mut set: libc::sigset_t = unsafe { mem::zeroed() };
        // SAFETY: `set` is a live sigset_t; the signal numbers are valid.
        unsafe {
            libc::sigemptyset(&mut set);
            for s in signals {
                libc::sigaddset(&mut set, s.number());
            }
        }
        // SAFETY: `set` is initialised; the old mask is not wanted (null).
        let r = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
        if r != 0 {
            return Err(context(io::Error::from_raw_os_error(r), "pthread_sigmask"));
        }
        // SAFETY: `set` is initialised and only read.
        let fd = owned(unsafe { libc::signalfd(-1, &set, libc::SFD_NONBLOCK | libc::SFD_CLOEXEC) })
            .map_err(|e| context(e, "signalfd"))?;
        Ok(Signals { fd })
    }

    /// The next pending signal, or None (non-blocking).
    pub fn read(&self) -> io::Result<Option<Signal>> {
        loop {
            // SAFETY: signalfd_siginfo is plain data; all zeroes is valid.
            let mut info: libc::signalfd_siginfo = unsafe { mem::zeroed() };
            let size = mem::size_of::<libc::signalfd_siginfo>();
            // SAFETY: reads at most `size` bytes into `info`, live and exclusive.
            let r = cvt_size(unsafe {
                libc::read(
                    self.fd.as_raw_fd(),
                    (&mut info as *mut libc::signalfd_siginfo).cast(),
                    size,
                )
            });
            match r {
                Ok(n) if n == size => {
                    // Only the signals of the mask arrive here; skip anything else.
                    if let Some(s) = Signal::from_number(info.ssi_signo as libc::c_int) {
                        return Ok(Some(s));
                    }
                }
                Ok(n) => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("signalfd read {n} bytes"),
                    ))
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(context(e, "signalfd read")),
            }
        }
    }
}

impl AsRawFd for Signals {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl AsFd for Signals {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Sends `signal` to process `pid` (kill(2)); a process already gone is
/// not an error.
pub fn send(pid: u32, signal: Signal) -> io::Result<()> {
    // SAFETY: plain syscall, no pointers.
    match crate::sys::cvt(unsafe { libc::kill(pid as libc::pid_t, signal.number()) }) {
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Ok(()),
        r => r.map(|_| ()),
    }
}
