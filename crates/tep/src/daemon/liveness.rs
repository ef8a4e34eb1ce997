//! Which serving threads are alive and moving, for systemd's watchdog
//! ([`super::notify`]): the workers, the N4 thread, the control and
//! metrics listeners, the gateway's next-hop resolver, host mode's link
//! watcher.
//!
//! Each such thread is started with [`spawn`], which registers it and
//! hands it a [`Beat`]: the thread bumps it once per turn of its loop (a
//! relaxed atomic add), so every serving loop must come round on its own
//! (workers at least every 100 ms; the blocking ones wait at most a
//! second). A thread that returns an error, panics or stops beating for
//! longer than the watchdog's interval (or its own patience, for the
//! listeners whose one request may take a few seconds) makes
//! [`Liveness::check`] report it, and the watchdog goes hungry: systemd
//! restarts a daemon that has stopped serving part of its job instead of
//! seeing a healthy service. A thread that ends with `Ok` (stopping for
//! a reload or at exit) leaves the registry.

use std::fmt::Display;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const ALIVE: u8 = 0;
const RETIRED: u8 = 1;
const DEAD: u8 = 2;

#[derive(Debug)]
struct Slot {
    name: String,
    beats: AtomicU64,
    state: AtomicU8,
}

/// A serving thread's heartbeat. Dropped without [`Beat::retire`] (an
/// error returned, a panic unwinding), its thread counts as dead.
#[derive(Debug)]
pub struct Beat {
    slot: Arc<Slot>,
    retired: bool,
    #[cfg(debug_assertions)]
    fault: Option<(Fault, Instant)>,
}

impl Beat {
    /// One more turn of the thread's loop.
    #[inline]
    pub fn beat(&self) {
        self.slot.beats.fetch_add(1, Ordering::Relaxed);
        #[cfg(debug_assertions)]
        if let Some((fault, at)) = self.fault {
            if Instant::now() >= at {
                fault.strike(&self.slot.name);
            }
        }
    }

    /// The thread ends as it should (asked to stop).
    pub fn retire(mut self) {
        self.retired = true;
        self.slot.state.store(RETIRED, Ordering::Release);
    }
}

impl Drop for Beat {
    fn drop(&mut self) {
        if !self.retired {
            self.slot.state.store(DEAD, Ordering::Release);
        }
    }
}

#[derive(Debug)]
struct Watched {
    slot: Arc<Slot>,
    patience: Duration,
    seen: u64,
    since: Instant,
}

/// The serving threads of a daemon.
#[derive(Debug, Default)]
pub struct Liveness {
    watched: Mutex<Vec<Watched>>,
}

impl Liveness {
    /// Registers a thread `name` that may go `patience` without a beat
    /// (beyond the watchdog's interval) before it counts as stuck.
    pub fn register(&self, name: &str, patience: Duration) -> Beat {
        let slot = Arc::new(Slot {
            name: name.to_string(),
            beats: AtomicU64::new(0),
            state: AtomicU8::new(ALIVE),
        });
        self.watched
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Watched {
                slot: slot.clone(),
                patience,
                seen: 0,
                since: Instant::now(),
            });
        Beat {
            slot,
            retired: false,
            #[cfg(debug_assertions)]
            fault: Fault::asked(name),
        }
    }

    /// What is wrong at `now`: each thread that died, or that has not
    /// beaten for `interval` (or its patience, if longer). Empty: every
    /// serving thread is alive and moving. Retired threads are forgotten.
    pub fn check(&self, now: Instant, interval: Duration) -> Vec<String> {
        let mut watched = self.watched.lock().unwrap_or_else(|e| e.into_inner());
        watched.retain(|w| w.slot.state.load(Ordering::Acquire) != RETIRED);
        let mut wrong = Vec::new();
        for w in watched.iter_mut() {
            if w.slot.state.load(Ordering::Acquire) == DEAD {
                wrong.push(format!("{} ended", w.slot.name));
                continue;
            }
            let beats = w.slot.beats.load(Ordering::Relaxed);
            if beats != w.seen {
                w.seen = beats;
                w.since = now;
            } else if now.saturating_duration_since(w.since) >= interval.max(w.patience) {
                wrong.push(format!(
                    "{} stuck for {:.1} s",
                    w.slot.name,
                    now.saturating_duration_since(w.since).as_secs_f64()
                ));
            }
        }
        wrong
    }
}

/// Starts serving thread `name` (named `tep-NAME`) running `body` with
/// its [`Beat`]; `Ok` retires it, an `Err` is logged and leaves it dead
/// (the watchdog then starves), as does a panic.
pub fn spawn<T, E>(
    liveness: &Liveness,
    name: &str,
    patience: Duration,
    body: impl FnOnce(&Beat) -> Result<T, E> + Send + 'static,
) -> std::io::Result<JoinHandle<Result<T, E>>>
where
    T: Send + 'static,
    E: Display + Send + 'static,
{
    let beat = liveness.register(name, patience);
    let thread = name.to_string();
    std::thread::Builder::new()
        .name(format!("tep-{name}"))
        .spawn(move || {
            let result = body(&beat);
            match &result {
                Ok(_) => beat.retire(),
                Err(e) => tracing::error!(thread, "stopped on an error: {e}"),
            }
            result
        })
}

/// The longest a serving thread that waits on a socket sleeps before it
/// beats again.
pub const WAKE: Duration = Duration::from_secs(1);

/// Test-only faults, for the watchdog's tests: `TEP_TEST_FAULT=stall:NAME`
/// or `panic:NAME` makes serving thread NAME (`n4`, `control`,
/// `worker-0`...) hang or panic on its first beat two seconds after it
/// starts. Compiled into debug builds only (`cargo test` runs those);
/// release builds have no such variable.
#[cfg(debug_assertions)]
#[derive(Clone, Copy, Debug)]
enum Fault {
    Stall,
    Panic,
}

#[cfg(debug_assertions)]
impl Fault {
    fn asked(name: &str) -> Option<(Fault, Instant)> {
        let v = std::env::var("TEP_TEST_FAULT").ok()?;
        let fault = match v.split_once(':')? {
            ("stall", n) if n == name => Fault::Stall,
            ("panic", n) if n == name => Fault::Panic,
            _ => return None,
        };
        Some((fault, Instant::now() + Duration::from_secs(2)))
    }

    fn strike(self, name: &str) {
        match self {
            Fault::Stall => loop {
                std::thread::sleep(Duration::from_secs(3600));
            },
            Fault::Panic => panic!("TEP_TEST_FAULT: {name} panics"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dead_stuck_and_retired_threads() {
        let l = Liveness::default();
        let t0 = Instant::now();
        let second = Duration::from_secs(1);
        let a = l.register("a", Duration::ZERO);
        let b = l.register("b", Duration::from_secs(10));
        let c = l.register("c", Duration::ZERO);
        a.beat();
        b.beat();
        c.beat();
        assert!(l.check(t0, second).is_empty());
        // a moves, b is patient, c is stuck.
        a.beat();
        assert_eq!(l.check(t0 + second, second), ["c stuck for 1.0 s"]);
        // An error or a panic drops the beat unretired: dead.
        drop(c);
        a.beat();
        assert_eq!(l.check(t0 + 2 * second, second), ["c ended"]);
        b.retire();
        a.retire();
        // Retired threads leave; the dead one stays reported.
        assert_eq!(l.check(t0 + 20 * second, second), ["c ended"]);
        assert_eq!(l.watched.lock().unwrap().len(), 1);
    }

    #[test]
    fn spawned_threads_retire_on_ok_and_die_on_err() {
        let l = Liveness::default();
        let ok = spawn(&l, "ok", Duration::ZERO, |b| {
            b.beat();
            Ok::<_, String>(1)
        })
        .unwrap();
        assert_eq!(ok.join().unwrap(), Ok(1));
        let err = spawn(&l, "err", Duration::ZERO, |_| Err::<(), _>("gone")).unwrap();
        assert!(err.join().unwrap().is_err());
        let far = Instant::now() + Duration::from_secs(60);
        assert_eq!(l.check(far, Duration::from_secs(1)), ["err ended"]);
    }
}
