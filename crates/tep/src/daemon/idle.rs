//! When a worker sleeps. A sleep costs nothing while nothing comes, but
//! the packet that ends it pays a wake-up (on a virtual machine several
//! microseconds per hop, four hops per round trip through two teps), so
//! a worker keeps polling while the next packet is likely to come sooner
//! than that: after a packet that came soon after the one before it
//! (`adaptive`, as NAPI keeps polling while its budget fills and
//! SO_PREFER_BUSY_POLL while the application keeps asking), or for a
//! fixed time after any packet (`busy`, the user's choice of a CPU for
//! latency). An idle worker sleeps.
//!
//! Adaptive polling serves conversations, not bulk: while the rounds move
//! tens of kilobytes each (super-packets, GRO trains), a wake-up is a
//! small part of a round's cost, and the CPU a poll would take is the
//! application's on a small machine (measured on 2 vCPUs: 5 % more CPU
//! per Gbit/s with polling through bulk TCP).

use std::time::{Duration, Instant};
use tep_dataplane::{PacketVector, Pool};

/// One worker's polling state.
#[derive(Debug)]
pub struct Idle {
    busy: Duration,
    adaptive: Duration,
    last_event: Instant,
    /// Between the last two rounds that found work.
    last_gap: Duration,
    /// Bytes per round that found work, a moving average (1/8 weight).
    round_bytes: u64,
}

/// Average bytes per round above which adaptive polling stops: a few
/// full-sized packets; bulk rounds move a super-packet or a train each.
const BULK_ROUND_BYTES: u64 = 4096;

impl Idle {
    /// `busy_poll_us` and `adaptive_poll_us` of the config.
    pub fn new(busy_poll_us: u32, adaptive_poll_us: u32) -> Idle {
        Idle {
            busy: Duration::from_micros(u64::from(busy_poll_us)),
            adaptive: Duration::from_micros(u64::from(adaptive_poll_us)),
            last_event: Instant::now(),
            last_gap: Duration::MAX,
            round_bytes: 0,
        }
    }

    /// A round found work at `now`: `bytes` of packets.
    pub fn worked(&mut self, now: Instant, bytes: u64) {
        self.last_gap = now.saturating_duration_since(self.last_event);
        self.last_event = now;
        self.round_bytes = self.round_bytes - self.round_bytes / 8 + bytes / 8;
    }

    /// Whether to poll once more at `now` rather than sleep.
    pub fn keep_polling(&self, now: Instant) -> bool {
        let quiet = now.saturating_duration_since(self.last_event);
        quiet < self.busy
            || (self.last_gap < self.adaptive
                && quiet < self.adaptive
                && self.round_bytes < BULK_ROUND_BYTES)
    }
}

/// The bytes of the packets in `v`: what a round read, for
/// [`Idle::worked`].
pub fn bytes_in(pool: &Pool, v: &PacketVector) -> u64 {
    v.as_slice()
        .iter()
        .map(|&id| pool.data(id).len() as u64)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: Duration = Duration::from_micros(1);

    #[test]
    fn adaptive_polls_only_while_packets_come_close_together() {
        let t0 = Instant::now();
        let mut idle = Idle::new(0, 100);
        // A first packet after a long pause: sleep again at once.
        idle.worked(t0 + 1000 * US, 100);
        assert!(!idle.keep_polling(t0 + 1001 * US));
        // The next one 60 µs later: packets come close together, poll
        // for up to 100 µs after it, and no longer.
        idle.worked(t0 + 1060 * US, 100);
        assert!(idle.keep_polling(t0 + 1061 * US));
        assert!(idle.keep_polling(t0 + 1159 * US));
        assert!(!idle.keep_polling(t0 + 1161 * US));
        // 150 µs apart: further than a poll is worth.
        idle.worked(t0 + 1210 * US, 100);
        assert!(!idle.keep_polling(t0 + 1211 * US));
    }

    #[test]
    fn adaptive_leaves_bulk_alone() {
        let t0 = Instant::now();
        let mut idle = Idle::new(0, 100);
        let mut t = t0;
        // Rounds of 64 KiB, 20 µs apart: no polling between them.
        for _ in 0..32 {
            t += 20 * US;
            idle.worked(t, 65536);
        }
        assert!(!idle.keep_polling(t + US));
        // Small rounds again: the average comes down, polling resumes.
        for _ in 0..32 {
            t += 20 * US;
            idle.worked(t, 100);
        }
        assert!(idle.keep_polling(t + US));
    }

    #[test]
    fn busy_polls_after_any_packet_and_off_never_polls() {
        let t0 = Instant::now();
        let mut busy = Idle::new(200, 0);
        busy.worked(t0 + 1000 * US, 100);
        assert!(busy.keep_polling(t0 + 1199 * US));
        assert!(!busy.keep_polling(t0 + 1201 * US));
        let mut off = Idle::new(0, 0);
        off.worked(t0 + 1000 * US, 100);
        off.worked(t0 + 1001 * US, 100);
        assert!(!off.keep_polling(t0 + 1001 * US));
    }
}
