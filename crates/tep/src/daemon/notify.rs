//! systemd's service notifications ([`tep_sys::notify`]): `READY=1` once
//! the workers run, `RELOADING=1` around a reload, `STOPPING=1` on the way
//! out, and `WATCHDOG=1` every half `$WATCHDOG_USEC` — only while every
//! serving thread (workers, N4, control, metrics, next hops) is alive and
//! going round its loop ([`Liveness`]), so that a stuck or dead one gets
//! the service restarted.

use std::time::Instant;
use tep_sys::notify::Notify;

use super::liveness::Liveness;

/// Where notifications go, and when the watchdog is fed next.
#[derive(Debug)]
pub struct Notifier {
    notify: Notify,
    next_watchdog: Instant,
}

/// A notification the socket refused costs a log line, nothing more.
fn sent(r: std::io::Result<()>) {
    if let Err(e) = r {
        tracing::warn!("NOTIFY_SOCKET: {e}");
    }
}

impl Notifier {
    /// From the environment systemd gives a `Type=notify` service.
    pub fn from_env() -> Notifier {
        let notify = Notify::from_env();
        let next_watchdog = Instant::now();
        Notifier {
            notify,
            next_watchdog,
        }
    }

    /// The workers run.
    pub fn ready(&self, status: &str) {
        sent(self.notify.ready(status));
    }

    /// A reload starts; [`Notifier::ready`] when it is done.
    pub fn reloading(&self) {
        sent(self.notify.reloading());
    }

    pub fn stopping(&self) {
        sent(self.notify.stopping());
    }

    /// How long the main loop may sleep: the watchdog's interval at most.
    pub fn wait_ms(&self, default_ms: i32) -> i32 {
        self.notify.wait_ms(default_ms)
    }

    /// Feeds the watchdog when it is due and every serving thread is
    /// alive and moved since the last time; otherwise says which are not
    /// and leaves the watchdog hungry.
    pub fn tend(&mut self, liveness: &Liveness) {
        let Some(every) = self.notify.watchdog else {
            return;
        };
        let now = Instant::now();
        if now < self.next_watchdog {
            return;
        }
        self.next_watchdog = now + every;
        let wrong = liveness.check(now, every);
        if wrong.is_empty() {
            sent(self.notify.alive());
        } else {
            tracing::error!(threads = ?wrong, "the watchdog is not fed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixDatagram;
    use std::time::Duration;

    #[test]
    fn the_watchdog_is_fed_only_while_every_serving_thread_moves() {
        let dir = std::env::temp_dir().join(format!("tep-notify-{}", std::process::id()));
        let _ = std::fs::remove_file(&dir);
        let listener = UnixDatagram::bind(&dir).unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = std::os::unix::net::SocketAddr::from_pathname(&dir).unwrap();
        let mut n = Notifier {
            notify: Notify::to(addr, Some(Duration::ZERO)).unwrap(),
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
