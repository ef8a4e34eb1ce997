//! CPU affinity: one worker per CPU keeps a queue's packets in one cache.

use std::io;
use std::mem;

use crate::sys::{context, cvt};

/// Pins the calling thread to `cpu` (sched_setaffinity).
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    // SAFETY: cpu_set_t is a plain bit array; all zeroes is the empty set.
    let mut set: libc::cpu_set_t = unsafe { mem::zeroed() };
    if cpu >= 8 * mem::size_of::<libc::cpu_set_t>() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("cpu {cpu} out of range"),
        ));
    }
    // SAFETY: `cpu` is within the set's bits (checked above).
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a live cpu_set_t of the size passed; pid 0 is the calling thread.
    cvt(unsafe { libc::sched_setaffinity(0, mem::size_of::<libc::cpu_set_t>(), &set) })
        .map(drop)
        .map_err(|e| context(e, format_args!("sched_setaffinity cpu {cpu}")))
}

/// CPUs online (sysconf _SC_NPROCESSORS_ONLN), at least 1.
pub fn online_cpus() -> usize {
    // SAFETY: sysconf has no memory effects.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n < 1 {
        1
    } else {
        n as usize
    }
}

/// CLOCK_MONOTONIC in microseconds: the clock systemd's `MONOTONIC_USEC`
/// is read against (std's `Instant` does not expose its raw value).
pub fn monotonic_usec() -> u64 {
    // SAFETY: timespec is plain data; all zeroes is valid.
    let mut ts: libc::timespec = unsafe { mem::zeroed() };
    // SAFETY: `ts` is a live timespec; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1_000
}
