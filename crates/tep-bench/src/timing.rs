//! Timing what runs in-process: calls per sample calibrated to a target
//! time, medians of samples.

use std::time::Instant;

/// Times `f` over `iters` calls, returning nanoseconds per call.
#[inline(never)]
pub fn time_per_call(iters: u64, mut f: impl FnMut()) -> f64 {
    let t = Instant::now();
    for _ in 0..iters {
        f();
    }
    t.elapsed().as_nanos() as f64 / iters as f64
}

/// Picks an iteration count so that one sample of `f` takes about
/// `target_ns`.
pub fn calibrate(target_ns: f64, mut f: impl FnMut()) -> u64 {
    let mut iters = 1u64;
    loop {
        let per = time_per_call(iters, &mut f);
        if per * iters as f64 >= target_ns / 4.0 || iters >= 1 << 30 {
            return ((target_ns / per.max(0.1)) as u64).max(1);
        }
        iters *= 4;
    }
}

/// The median of a non-empty list of samples.
pub fn median(samples: &mut [f64]) -> f64 {
    samples.sort_by(|a, b| a.total_cmp(b));
    let n = samples.len();
    if n % 2 == 1 {
        samples[n / 2]
    } else {
        (samples[n / 2 - 1] + samples[n / 2]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
    }
}
