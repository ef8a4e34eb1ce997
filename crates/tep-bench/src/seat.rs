//! Where seed 000's threads sit: the generator's sender threads, the sink
//! and the gateway's workers each on CPUs of their own where the machine
//! has enough, the kernel's work for each steered to its owner's CPU, and
//! what each worker CPU did during a case (from `/proc/stat`), so that a
//! loss reads as "tep too slow" or "the CPU was taken away".

use serde::Serialize;
use tep_testing::netns::Namespaces;

/// The CPUs of one run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Layout {
    /// One per gateway worker (queue `i` is worker `i`'s).
    pub workers: Vec<usize>,
    /// One per sender thread.
    pub senders: Vec<usize>,
    pub sink: usize,
    /// Some CPU runs more than one of them.
    pub shared: bool,
}

/// Workers the cores allow beside the generator and the sink: half of
/// what the sink leaves (the generator gets the other half), at least one.
pub fn default_workers(cpus: usize) -> usize {
    (cpus.saturating_sub(1) / 2).max(1)
}

/// Sender threads for `workers` workers on `cpus` CPUs: what the workers
/// and the sink leave, and at least one per worker (each thread's flow
/// takes one queue: fewer would leave a worker without traffic).
pub fn default_senders(cpus: usize, workers: usize) -> usize {
    cpus.saturating_sub(workers + 1).max(workers).max(1)
}

/// Workers on the last CPUs, the sink on the one before them, the sender
/// threads on the first ones; where there are too few, they wrap around
/// and share (`shared`).
pub fn layout(cpus: usize, workers: usize, senders: usize) -> Layout {
    let n = cpus.max(1);
    let worker_cpus: Vec<usize> = (0..workers)
        .map(|i| (n - 1 + n * workers - i) % n)
        .collect();
    let sink = (2 * n - 1 - workers % n) % n;
    let sender_cpus: Vec<usize> = (0..senders).map(|i| i % n).collect();
    let mut all: Vec<usize> = worker_cpus
        .iter()
        .chain(&sender_cpus)
        .copied()
        .chain([sink])
        .collect();
    let total = all.len();
    all.sort_unstable();
    all.dedup();
    Layout {
        shared: all.len() < total,
        workers: worker_cpus,
        senders: sender_cpus,
        sink,
    }
}

/// A CPU mask as `/sys` takes it (hex, no prefix).
fn mask(cpus: impl IntoIterator<Item = usize>) -> String {
    let m = cpus.into_iter().fold(0u128, |m, c| m | (1 << (c % 128)));
    format!("{m:x}")
}

/// Steers the receive work of every queue of `dev` (in namespace `ns` of
/// `lab`) to `cpus` (RPS): a veth hands a frame to its peer on the
/// sending CPU, and without RPS the receiver's whole stack would run
/// there.
pub fn rps(lab: &Namespaces, ns: &str, dev: &str, cpus: &[usize]) -> Result<(), String> {
    let script = format!(
        "for q in /sys/class/net/{dev}/queues/rx-*; do echo {} > $q/rps_cpus; done",
        mask(cpus.iter().copied())
    );
    lab.run(ns, &["sh", "-c", &script]).map(drop)
}

/// Sends what sender thread `t` (on CPU `senders[t]`) sends out of `dev`
/// through its transmit queue `t % queues` (XPS), so that the threads'
/// flows spread over the queues by the same rule on every run (without
/// it, each socket's queue is a hash of a random per-socket value).
pub fn xps(
    lab: &Namespaces,
    ns: &str,
    dev: &str,
    senders: &[usize],
    queues: usize,
) -> Result<(), String> {
    // One queue: nothing to spread (and the kernel refuses an XPS map on
    // a device of one queue).
    if queues <= 1 {
        return Ok(());
    }
    for q in 0..queues {
        let cpus = senders
            .iter()
            .enumerate()
            .filter(|(t, _)| t % queues == q)
            .map(|(_, &c)| c);
        let script = format!(
            "echo {} > /sys/class/net/{dev}/queues/tx-{q}/xps_cpus",
            mask(cpus)
        );
        lab.run(ns, &["sh", "-c", &script])?;
    }
    Ok(())
}

/// One CPU's time from `/proc/stat`, in ticks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTicks {
    user: u64,
    system: u64,
    softirq: u64,
    idle: u64,
    other: u64,
}

/// The share of a CPU's time during a case, in percent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct CpuSplit {
    pub cpu: usize,
    pub user: f64,
    pub system: f64,
    /// Interrupts and softirqs (a veth's transmit into its peer, NAPI).
    pub softirq: f64,
    pub idle: f64,
    /// Steal, guests.
    pub other: f64,
}

/// `cpu`'s line of `/proc/stat` text `stat`.
pub fn cpu_ticks(stat: &str, cpu: usize) -> Option<CpuTicks> {
    let name = format!("cpu{cpu}");
    let line = stat
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name.as_str()))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    let f = |i: usize| v.get(i).copied().unwrap_or(0);
    // user nice system idle iowait irq softirq steal guest guest_nice
    Some(CpuTicks {
        user: f(0) + f(1),
        system: f(2),
        idle: f(3) + f(4),
        softirq: f(5) + f(6),
        other: f(7),
    })
}

/// Every CPU's ticks in `cpus` now.
pub fn sample(cpus: &[usize]) -> Vec<Option<CpuTicks>> {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    cpus.iter().map(|&c| cpu_ticks(&stat, c)).collect()
}

/// The split of `cpu`'s time between two samples.
pub fn split(cpu: usize, a: CpuTicks, b: CpuTicks) -> CpuSplit {
    let d = |x: u64, y: u64| y.saturating_sub(x) as f64;
    let parts = [
        d(a.user, b.user),
        d(a.system, b.system),
        d(a.softirq, b.softirq),
        d(a.idle, b.idle),
        d(a.other, b.other),
    ];
    let total: f64 = parts.iter().sum::<f64>().max(1.0);
    let pct = |x: f64| x * 100.0 / total;
    CpuSplit {
        cpu,
        user: pct(parts[0]),
        system: pct(parts[1]),
        softirq: pct(parts[2]),
        idle: pct(parts[3]),
        other: pct(parts[4]),
    }
}

/// CPU ticks (user and system) of each of process `pid`'s workers (its
/// threads `tep-worker-N`, by N), so that a worker CPU's busy time can be
/// told apart into tep's and everybody else's.
pub fn worker_ticks(pid: u32, workers: usize) -> Vec<u64> {
    let mut out = vec![0; workers];
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for task in tasks.flatten() {
        let path = task.path();
        let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        let Some(n) = comm
            .trim()
            .strip_prefix("tep-worker-")
            .and_then(|n| n.parse::<usize>().ok())
        else {
            continue;
        };
        let stat = std::fs::read_to_string(path.join("stat")).unwrap_or_default();
        if let (Some(slot), Some(t)) = (out.get_mut(n), task_ticks(&stat)) {
            *slot = t;
        }
    }
    out
}

/// utime + stime of a `/proc/PID/task/TID/stat` line (fields 14 and 15,
/// counted after the command name, which may hold spaces).
fn task_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

/// Ticks per second of `/proc`'s CPU times.
pub fn ticks_per_second() -> f64 {
    // SAFETY: sysconf reads a constant.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn everyone_has_a_cpu_where_there_are_enough() {
        let l = layout(16, 4, 8);
        assert_eq!(l.workers, vec![15, 14, 13, 12]);
        assert_eq!(l.sink, 11);
        assert_eq!(l.senders, (0..8).collect::<Vec<_>>());
        assert!(!l.shared);
        // Two CPUs: the worker on the last, sender and sink share CPU 0.
        let l = layout(2, 1, 1);
        assert_eq!(
            (l.workers, l.senders, l.sink, l.shared),
            (vec![1], vec![0], 0, true)
        );
        let l = layout(2, 2, 2);
        assert_eq!((l.workers, l.senders, l.sink), (vec![1, 0], vec![0, 1], 1));
        assert_eq!(default_workers(2), 1);
        assert_eq!(default_workers(16), 7);
        assert_eq!(default_senders(16, 7), 8);
        assert_eq!(default_senders(2, 1), 1);
        assert_eq!(default_senders(2, 2), 2);
        assert_eq!(mask([0, 3]), "9");
    }

    #[test]
    fn a_cpu_split_sums_to_a_hundred() {
        let stat =
            "cpu  1 2 3 4 5 6 7 8 0 0\ncpu0 10 0 20 60 0 0 10 0 0 0\ncpu1 1 1 1 1 1 1 1 1 0 0\n";
        let a = cpu_ticks(stat, 0).unwrap();
        let b = CpuTicks {
            user: a.user + 20,
            system: a.system + 21,
            softirq: a.softirq + 42,
            idle: a.idle + 17,
            other: a.other,
        };
        let s = split(0, a, b);
        assert_eq!(
            (s.user, s.system, s.softirq, s.idle),
            (20.0, 21.0, 42.0, 17.0)
        );
        assert_eq!(cpu_ticks(stat, 1).unwrap().softirq, 2);
        assert!(cpu_ticks(stat, 2).is_none());
        let task = "42 (tep-worker 0) R 1 2 3 4 5 6 7 8 9 10 250 30 0 0";
        assert_eq!(task_ticks(task), Some(280));
    }
}
