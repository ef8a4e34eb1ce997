//! Maximum bit rates (a QER's MBR, TS 29.244 §5.4.2) as token buckets,
//! one per session and direction, shared by every worker.
//!
//! A session's packets are spread over the workers by the NIC's or the
//! kernel's flow hash, so that one TCP flow may land on one worker and
//! the session's others elsewhere: a share of the rate per worker would
//! cap that flow at a fraction of the MBR. So each bucket is one word of
//! state that every worker updates with a compare-and-swap: the cost is
//! one cache line per packet of a session with an MBR (none without),
//! contended only while the session's own packets are on several
//! workers at once.
//!
//! The bucket is kept as the GCRA's theoretical arrival time (ITU-T
//! I.371's virtual scheduling), which is a token bucket in one word: a
//! packet conforms when the TAT is at most the burst tolerance ahead of
//! now; it then moves the TAT on by its bytes' worth of time at the rate.
//! A packet over the rate is dropped and moves nothing, so that what
//! passes is the rate, whatever the offered load.
//!
//! Time is in units of 2^-16 ns, so that a byte's time at rates up to a
//! few Tbit/s is kept to better than 0.1 %; the TAT then wraps every
//! 2^48 ns (3.3 days) and is compared with wrapping arithmetic.

use core::sync::atomic::{AtomicU64, Ordering};

/// Fraction bits of the time unit.
const FRAC: u32 = 16;

/// The burst tolerance: the rate's worth of 250 ms (Cisco's default
/// policer burst, CIR/32 bytes), at least 3000 bytes (two full-size
/// packets). A policer's burst below TCP's bursts (a window sent at line
/// rate; a gNB's or a host's 64 KB segmentation offload train) keeps a
/// TCP flow well under the rate, as eUPF's users measured: through tep,
/// iperf3 TCP under a 20 Mbit/s MBR got 1.3 Mbit/s with 10 ms, 10.5 with
/// 100 ms, 19.3 with 200 ms, 19.6 to 19.7 with 250 ms (test
/// `tcp_through_an_mbr`). The price is what an idle session may send at
/// once: a quarter second's worth.
pub const BURST_NS: u64 = 250_000_000;
/// The least burst, in bytes.
pub const BURST_MIN_BYTES: u64 = 3000;

/// A time or duration in units of 2^-16 ns, the TAT's unit.
#[inline]
fn units(ns: u64) -> u64 {
    ns.wrapping_shl(FRAC)
}

/// The largest packet (a segmentation offload's super-packet) the
/// backwards-jump test allows for beyond the burst.
const MAX_PACKET: u64 = 65_536;

/// One direction's bucket: its state and its rate, written by the
/// control plane when it sets the session (relaxed: the change that turns
/// the bucket on is published after, under the change queue's lock).
#[derive(Debug, Default)]
pub struct Bucket {
    // The TAT with bit 0 set; 0: fresh (full), as set.
    tat: AtomicU64,
    // A byte's time at the rate; 0: no limit.
    cost: AtomicU64,
    // The burst tolerance.
    tau: AtomicU64,
}

impl Bucket {
    /// Sets the rate in bit/s (0 or a rate over what the unit resolves:
    /// no limit), the bucket full.
    pub fn set(&self, bps: u64) {
        let cost = cost_per_byte(bps);
        let tau = units(BURST_NS).max(BURST_MIN_BYTES.saturating_mul(cost));
        self.cost.store(cost, Ordering::Relaxed);
        self.tau.store(tau, Ordering::Relaxed);
        self.tat.store(0, Ordering::Relaxed);
    }

    /// Whether a packet of `bytes` at `now_ns` (any monotonic ns) is
    /// within the rate; if so it is charged to the bucket (`shared`: by
    /// other workers too, [`Bucket::admit_run`]).
    #[inline]
    pub fn admit(&self, bytes: usize, now_ns: u64, shared: bool) -> bool {
        self.admit_run(&[bytes], now_ns, shared) == 1
    }

    /// How many of a run of packets of `bytes` each, arriving in this
    /// order at `now_ns`, are within the rate: always the run's first
    /// ones, charged to the bucket with one compare-and-swap rather than
    /// one each (a locked instruction, which keeps later loads waiting for
    /// its line). Packet by packet the bucket passes the same ones and
    /// ends the same: whether a packet conforms depends on the TAT alone,
    /// not on its size, and one over the rate moves nothing, so that
    /// every packet after the first refused at one instant is refused.
    ///
    /// `shared`: other workers charge the bucket too. A lone worker's
    /// bucket is its own, charged with a plain store: the locked
    /// instruction cost a metered downlink packet 3 % more at a million
    /// sessions, burst 1 (1.09–1.10× unmetered with it, 1.06–1.07×
    /// without). The control plane's reset ([`Bucket::set`]) may then be
    /// lost to a charge it overlaps, which leaves the bucket as the old
    /// rate left it, at most one burst: with the compare-and-swap the
    /// charge after a reset is still computed at the rate read before it.
    #[inline]
    pub fn admit_run(&self, bytes: &[usize], now_ns: u64, shared: bool) -> usize {
        let cost = self.cost.load(Ordering::Relaxed);
        if cost == 0 {
            return bytes.len();
        }
        let tau = self.tau.load(Ordering::Relaxed);
        let now = units(now_ns);
        let mut old = self.tat.load(Ordering::Relaxed);
        loop {
            let (n, new) = charge_run(old, now, bytes, tau, cost);
            if n == 0 {
                return 0;
            }
            if !shared {
                self.tat.store(new, Ordering::Relaxed);
                return n;
            }
            match self
                .tat
                .compare_exchange_weak(old, new, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return n,
                Err(seen) => old = seen,
            }
        }
    }
}

/// From TAT `old`, how many of the packets of `bytes` conform one after
/// the other, and the TAT after them.
#[inline]
fn charge_run(old: u64, now: u64, bytes: &[usize], tau: u64, cost: u64) -> (usize, u64) {
    let mut tat = old;
    for (n, &b) in bytes.iter().enumerate() {
        let charge = cost.saturating_mul(b as u64);
        match next_tat(tat, now, charge, tau, cost) {
            Some(t) => tat = t,
            None => return (n, tat),
        }
    }
    (bytes.len(), tat)
}

/// A byte's time at `bps`, in 2^-16 ns (8e9 / bps ns); 0 for no limit.
fn cost_per_byte(bps: u64) -> u64 {
    if bps == 0 {
        return 0;
    }
    let c = (8_000_000_000u128 << FRAC) / u128::from(bps);
    u64::try_from(c).unwrap_or(u64::MAX)
}

/// The TAT after a conforming packet charged `charge`, or None when it
/// is over the rate. A TAT behind now (idle, or the clock jumped ahead)
/// starts from now: the bucket is full, no fuller. A TAT further ahead
/// than any conforming packet could have put it means the clock went
/// back (a worker's clock behind another's, a restart): it restarts from
/// now rather than refuse every packet until the clock catches up.
#[inline]
fn next_tat(old: u64, now: u64, charge: u64, tau: u64, cost: u64) -> Option<u64> {
    let ahead = old.wrapping_sub(now) as i64;
    let went_back = ahead as u64 > tau.saturating_add(cost.saturating_mul(MAX_PACKET));
    let base = if old == 0 || ahead <= 0 || went_back {
        now
    } else if ahead as u64 > tau {
        return None;
    } else {
        old
    };
    Some(base.wrapping_add(charge) | 1)
}

/// A session's buckets, uplink and downlink, on a line of their own:
/// shared by the workers, they are kept apart from each worker's slot
/// line, which only its worker writes, but beside the first worker's
/// ([`super::Usage::meters`]).
#[derive(Debug, Default)]
#[repr(C, align(64))]
pub struct SlotMeters {
    /// Uplink (the UL MBR).
    pub uplink: Bucket,
    /// Downlink (the DL MBR).
    pub downlink: Bucket,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Offers `size`-byte packets at the times `arrivals` gives (ns);
    /// returns the bytes passed.
    fn offer(b: &Bucket, size: usize, arrivals: impl Iterator<Item = u64>) -> u64 {
        arrivals
            .filter(|&t| b.admit(size, t, true))
            .map(|_| size as u64)
            .sum()
    }

    /// The bytes a full bucket passes at once at `bps`.
    fn burst_bytes(bps: u64) -> u64 {
        (bps * (BURST_NS / 1_000_000) / 8_000).max(BURST_MIN_BYTES)
    }

    /// The rate of what passed over `ns` beyond the first burst of a full
    /// bucket at `bps`.
    fn rate_of(bytes: u64, ns: u64, bps: u64) -> f64 {
        bytes.saturating_sub(burst_bytes(bps)) as f64 * 8.0 / (ns as f64 / 1e9)
    }

    #[test]
    fn steady_overload_passes_the_rate_within_1_percent() {
        for (bps, size, gap) in [
            (20_000_000, 1400, 100_000),
            (1_000_000, 100, 20_000),
            (10_000_000_000, 1500, 600),
        ] {
            let b = Bucket::default();
            b.set(bps);
            let span = 10_000_000_000u64;
            let passed = offer(&b, size, (0..span / gap).map(|i| 1_000 + i * gap));
            let r = rate_of(passed, span, bps);
            let err = (r - bps as f64).abs() / bps as f64;
            assert!(err < 0.01, "{bps} bit/s: passed {r:.0} ({err:.4})");
        }
    }

    #[test]
    fn bursty_overload_passes_the_rate_within_1_percent() {
        // Bursts of 20 packets 1 us apart every 5 ms: 48 Mbit/s offered
        // to 20 Mbit/s.
        let b = Bucket::default();
        b.set(20_000_000);
        let span = 10_000_000_000u64;
        let arrivals =
            (0..span / 5_000_000).flat_map(|k| (0..20).map(move |i| 5 + k * 5_000_000 + i * 1_000));
        let r = rate_of(offer(&b, 1500, arrivals), span, 20_000_000);
        assert!((r - 20e6).abs() / 20e6 < 0.01, "passed {r:.0}");
    }

    #[test]
    fn under_the_rate_everything_passes() {
        let b = Bucket::default();
        b.set(20_000_000);
        // 1400 bytes every 1 ms: 11.2 Mbit/s.
        assert!((0..10_000).all(|i| b.admit(1400, 7 + i * 1_000_000, true)));
    }

    #[test]
    fn a_burst_is_bounded_by_the_tolerance() {
        for bps in [1_000_000u64, 20_000_000, 1_000_000_000] {
            let b = Bucket::default();
            b.set(bps);
            // Idle for a second (full), then 400k packets at one instant.
            assert!(b.admit(100, 1_000, true));
            let passed = offer(&b, 100, core::iter::repeat_n(1_000_000_000, 400_000));
            let burst = burst_bytes(bps);
            assert!(
                passed <= burst + 100 && passed + 100 >= burst,
                "{bps}: {passed} bytes at once, burst {burst}"
            );
        }
    }

    #[test]
    fn the_clock_wrapping_the_unit_changes_nothing() {
        // The TAT's unit wraps at 2^48 ns; straddle it.
        let start = (1u64 << 48) - 3_000_000_000;
        let b = Bucket::default();
        b.set(20_000_000);
        let span = 6_000_000_000u64;
        let passed = offer(&b, 1400, (0..span / 100_000).map(|i| start + i * 100_000));
        let r = rate_of(passed, span, 20_000_000);
        assert!((r - 20e6).abs() / 20e6 < 0.01, "passed {r:.0}");
    }

    #[test]
    fn the_clock_jumping_back_restarts_the_bucket() {
        let b = Bucket::default();
        b.set(1_000_000);
        let t = 50_000_000_000;
        // Drained at t.
        while b.admit(1500, t, true) {}
        // A second back: without the restart nothing would pass for a
        // second.
        assert!(b.admit(1500, t - 1_000_000_000, true));
    }

    #[test]
    fn a_jump_ahead_fills_the_bucket_no_more_than_full() {
        let b = Bucket::default();
        b.set(1_000_000);
        assert!(b.admit(100, 0, true));
        let later = 3_600_000_000_000;
        let passed = offer(&b, 100, core::iter::repeat_n(later, 10_000));
        assert!(passed <= burst_bytes(1_000_000) + 100, "{passed}");
    }

    #[test]
    fn no_rate_is_no_limit_and_set_resets() {
        let b = Bucket::default();
        assert!((0..1000).all(|_| b.admit(65_535, 0, true)));
        b.set(1_000_000);
        while b.admit(1500, 5, true) {}
        b.set(1_000_000);
        assert!(b.admit(1500, 5, true), "set again: full");
        b.set(0);
        assert!((0..1000).all(|_| b.admit(1500, 5, true)));
    }

    #[test]
    fn a_run_passes_what_packet_by_packet_passes() {
        // Runs of mixed sizes at one instant each, against a second bucket
        // charged one packet at a time: the same packets pass and the
        // buckets end alike (then pass the same at the next instant).
        let sizes = [1500usize, 64, 9000, 1400, 576, 1500, 40, 65_535];
        for bps in [1_000_000u64, 20_000_000, 200_000_000] {
            let (run, one, lone) = (Bucket::default(), Bucket::default(), Bucket::default());
            run.set(bps);
            one.set(bps);
            lone.set(bps);
            let mut refused = 0;
            for (i, t) in (0..2_000u64).map(|i| (i, 1_000 + i * 150_000)) {
                let k = 1 + (i as usize * 7) % sizes.len();
                let n = run.admit_run(&sizes[..k], t, true);
                // A lone worker's store passes what the swap passes.
                assert_eq!(lone.admit_run(&sizes[..k], t, false), n);
                let each = sizes[..k]
                    .iter()
                    .take_while(|&&b| one.admit(b, t, true))
                    .count();
                assert_eq!(n, each, "{bps} bit/s at {t}");
                // Packet by packet, the rest of a refused run is refused.
                assert!(sizes[each..k].iter().all(|&b| !one.admit(b, t, true)));
                refused += k - n;
            }
            assert!(refused > 0, "{bps}: the runs never met the rate");
            assert_eq!(
                run.tat.load(Ordering::Relaxed),
                one.tat.load(Ordering::Relaxed)
            );
            assert_eq!(
                run.tat.load(Ordering::Relaxed),
                lone.tat.load(Ordering::Relaxed)
            );
        }
    }

    #[test]
    fn extreme_rates_do_not_overflow() {
        for bps in [1u64, 1000, u64::MAX] {
            let b = Bucket::default();
            b.set(bps);
            for t in [0, 1, u64::MAX / 2, u64::MAX] {
                let _ = b.admit(usize::MAX, t, true);
                let _ = b.admit(0, t, true);
            }
        }
    }
}
