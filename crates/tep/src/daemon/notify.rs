//! systemd's service notifications (sd_notify(3)), written here rather
//! than linking libsystemd: one datagram to the socket `$NOTIFY_SOCKET`
//! names. `READY=1` once the workers run, `RELOADING=1` (with
//! `MONOTONIC_USEC`, as `Type=notify-reload` wants) around a reload,
//! `STOPPING=1` on the way out, and `WATCHDOG=1` every half
//! `$WATCHDOG_USEC` — only while every serving thread (workers, N4,
//! control, metrics, next hops) is alive and going round its loop
//! ([`Liveness`]), so that a stuck or dead one gets the service
//! restarted. Without `$NOTIFY_SOCKET` (not under systemd) nothing is
//! sent.

use std::os::unix::net::UnixDatagram;
use std::time::{Duration, Instant};

use super::liveness::Liveness;

/// Where notifications go, and the watchdog's state.
#[derive(Debug)]
pub struct Notifier {
    socket: Option<(UnixDatagram, std::os::unix::net::SocketAddr)>,
    /// Half of `$WATCHDOG_USEC`, when the watchdog is on for this process.
    pub watchdog: Option<Duration>,
    next_watchdog: Instant,
}

impl Notifier {
    /// From the environment systemd gives a `Type=notify` service.
    pub fn from_env() -> Notifier {
        let socket = std::env::var_os("NOTIFY_SOCKET").and_then(|p| {
            let p = p.to_string_lossy().into_owned();
            let addr = if let Some(name) = p.strip_prefix('@') {
                use std::os::linux::net::SocketAddrExt;
                std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).ok()?
            } else {
                std::os::unix::net::SocketAddr::from_pathname(&p).ok()?
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
        Notifier {
            socket,
            watchdog,
            next_watchdog: Instant::now(),
        }
    }

    fn send(&self, msg: &str) {
        if let Some((sock, addr)) = &self.socket {
            if let Err(e) = sock.send_to_addr(msg.as_bytes(), addr) {
                tracing::warn!("NOTIFY_SOCKET: {e}");
            }
        }
    }

    /// The workers run.
    pub fn ready(&self, status: &str) {
        self.send(&format!("READY=1\nSTATUS={status}"));
    }

    /// A reload starts; [`Notifier::ready`] when it is done.
    pub fn reloading(&self) {
        self.send(&format!(
            "RELOADING=1\nMONOTONIC_USEC={}",
            tep_sys::thread::monotonic_usec()
        ));
    }

    pub fn stopping(&self) {
        self.send("STOPPING=1");
    }

    /// How long the main loop may sleep: the watchdog's interval at most.
    pub fn wait_ms(&self, default_ms: i32) -> i32 {
        match self.watchdog {
            Some(d) => (d.as_millis() as i32).clamp(1, default_ms),
            None => default_ms,
        }
    }

    /// Feeds the watchdog when it is due and every serving thread is
    /// alive and moved since the last time; otherwise says which are not
    /// and leaves the watchdog hungry.
    pub fn tend(&mut self, liveness: &Liveness) {
        let Some(every) = self.watchdog else {
            return;
        };
        let now = Instant::now();
        if now < self.next_watchdog {
            return;
        }
        self.next_watchdog = now + every;
        let wrong = liveness.check(now, every);
        if wrong.is_empty() {
            self.send("WATCHDOG=1");
        } else {
            tracing::error!(threads = ?wrong, "the watchdog is not fed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watchdog_is_fed_only_while_every_serving_thread_moves() {
        let dir = std::env::temp_dir().join(format!("tep-notify-{}", std::process::id()));
        let _ = std::fs::remove_file(&dir);
        let listener = UnixDatagram::bind(&dir).unwrap();
        listener.set_nonblocking(true).unwrap();
        let mut n = Notifier {
            socket: Some((
                UnixDatagram::unbound().unwrap(),
                std::os::unix::net::SocketAddr::from_pathname(&dir).unwrap(),
            )),
            watchdog: Some(Duration::ZERO),
            next_watchdog: Instant::now(),
        };
        let liveness = Liveness::default();
        let w0 = liveness.register("worker-0", Duration::ZERO);
        let n4 = liveness.register("n4", Duration::ZERO);
        let recv = || {
            let mut buf = [0u8; 256];
            listener
                .recv(&mut buf)
                .map(|k| String::from_utf8_lossy(&buf[..k]).into_owned())
                .ok()
        };
        n.ready("ok");
        assert_eq!(recv().as_deref(), Some("READY=1\nSTATUS=ok"));
        w0.beat();
        n4.beat();
        n.tend(&liveness);
        assert_eq!(recv().as_deref(), Some("WATCHDOG=1"));
        // The N4 thread stuck: not fed.
        w0.beat();
        n.tend(&liveness);
        assert_eq!(recv(), None);
        // Moving again, then ended on an error: not fed.
        w0.beat();
        n4.beat();
        n.tend(&liveness);
        assert_eq!(recv().as_deref(), Some("WATCHDOG=1"));
        drop(n4);
        w0.beat();
        n.tend(&liveness);
        assert_eq!(recv(), None);
        n.reloading();
        assert!(recv().unwrap().starts_with("RELOADING=1\nMONOTONIC_USEC="));
        let _ = std::fs::remove_file(&dir);
    }
}
