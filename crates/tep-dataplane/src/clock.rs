//! Time, passed in: the dataplane reads a [`Clock`] and never the system.

use core::cell::Cell;

/// A monotonic tick source for per-node cost accounting.
pub trait Clock {
    /// The current tick count.
    fn now(&self) -> u64;
    /// What a tick is, for reports: "clocks" (TSC) or "ns".
    fn unit(&self) -> &'static str;
}

/// The CPU's time-stamp counter: one instruction, no system call, the same
/// unit VPP reports in. On other architectures it counts nothing (reports
/// then show zero cost rather than a wrong one).
#[derive(Clone, Copy, Debug, Default)]
pub struct Tsc;

impl Clock for Tsc {
    #[inline]
    fn now(&self) -> u64 {
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: RDTSC has no memory effects and exists on every x86_64 CPU.
            unsafe { core::arch::x86_64::_rdtsc() }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            0
        }
    }

    fn unit(&self) -> &'static str {
        "clocks"
    }
}

/// A clock that advances only when told to: deterministic tests.
#[derive(Debug, Default)]
pub struct ManualClock {
    ticks: Cell<u64>,
}

impl ManualClock {
    /// Moves time forward by `ticks`.
    pub fn advance(&self, ticks: u64) {
        self.ticks.set(self.ticks.get() + ticks);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> u64 {
        self.ticks.get()
    }

    fn unit(&self) -> &'static str {
        "ticks"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_told() {
        let c = ManualClock::default();
        assert_eq!(c.now(), 0);
        c.advance(7);
        assert_eq!(c.now(), 7);
    }

    #[test]
    fn tsc_is_monotonic_here() {
        let t = Tsc;
        let a = t.now();
        let b = t.now();
        assert!(b >= a);
    }
}
