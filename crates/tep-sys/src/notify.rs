//! systemd's service notifications (sd_notify(3)), written here rather
//! than linking libsystemd: one datagram to the socket `$NOTIFY_SOCKET`
//! names. `READY=1`, `RELOADING=1` (with `MONOTONIC_USEC`, as
//! `Type=notify-reload` wants), `STOPPING=1` and `WATCHDOG=1`. Without
//! `$NOTIFY_SOCKET` (not under systemd) nothing is sent.

use std::io;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::Duration;

/// Where notifications go, and how often the watchdog wants feeding.
#[derive(Debug)]
pub struct Notify {
    socket: Option<(UnixDatagram, SocketAddr)>,
    /// Half of `$WATCHDOG_USEC`, when the watchdog is on for this process.
    pub watchdog: Option<Duration>,
}

impl Notify {
    /// From the environment systemd gives a `Type=notify` service.
    pub fn from_env() -> Notify {
        let socket = std::env::var_os("NOTIFY_SOCKET").and_then(|p| {
            let p = p.to_string_lossy().into_owned();
            let addr = if let Some(name) = p.strip_prefix('@') {
                use std::os::linux::net::SocketAddrExt;
                SocketAddr::from_abstract_name(name.as_bytes()).ok()?
            } else {
                SocketAddr::from_pathname(&p).ok()?
            };
            Some((UnixDatagram::unbound().ok()?, addr))
        });
        // WATCHDOG_PID, when set, names the process meant.
        let for_us = std::env::var("WATCHDOG_PID")
            .map_or(true, |p| p.parse::<u32>().ok() == Some(std::process::id()));
        let watchdog = std::env::var("WATCHDOG_USEC")
            .ok()
            .and_then(|u| u.parse::<u64>().ok())
            .filter(|&u| u > 0 && for_us && socket.is_some())
            .map(|u| Duration::from_micros(u / 2));
        Notify { socket, watchdog }
    }

    /// To the socket at `addr`, feeding a watchdog every `watchdog`.
    pub fn to(addr: SocketAddr, watchdog: Option<Duration>) -> io::Result<Notify> {
        let socket = Some((UnixDatagram::unbound()?, addr));
        Ok(Notify { socket, watchdog })
    }

    fn send(&self, msg: &str) -> io::Result<()> {
        match &self.socket {
            Some((sock, addr)) => sock.send_to_addr(msg.as_bytes(), addr).map(drop),
            None => Ok(()),
        }
    }

    /// The service runs.
    pub fn ready(&self, status: &str) -> io::Result<()> {
        self.send(&format!("READY=1\nSTATUS={status}"))
    }

    /// A reload starts; [`Notify::ready`] when it is done.
    pub fn reloading(&self) -> io::Result<()> {
        let now = crate::thread::monotonic_usec();
        self.send(&format!("RELOADING=1\nMONOTONIC_USEC={now}"))
    }

    pub fn stopping(&self) -> io::Result<()> {
        self.send("STOPPING=1")
    }

    /// Feeds the watchdog.
    pub fn alive(&self) -> io::Result<()> {
        self.send("WATCHDOG=1")
    }

    /// How long the main loop may sleep: the watchdog's interval at most.
    pub fn wait_ms(&self, default_ms: i32) -> i32 {
        match self.watchdog {
            Some(d) => (d.as_millis() as i32).clamp(1, default_ms),
            None => default_ms,
        }
    }
}
