//! Probes: the packets of seed 000's experiment, and what a sink makes of
//! them. Each probe's payload starts with a magic, its sequence number and
//! the time it was sent (CLOCK_REALTIME, the clock of the kernel's receive
//! time stamps, so that one machine's sender and sink share it); the sink
//! counts loss and reordering by sequence and takes each probe's latency
//! from the kernel's receive stamp. The I/O is in [`super::seed000`].

use serde::Serialize;

/// The first bytes of every probe payload.
pub const MAGIC: [u8; 4] = *b"tepP";
/// Magic, sequence number, send time.
pub const PROBE_LEN: usize = 4 + 8 + 8;

/// Writes a probe into the start of `buf` (at least [`PROBE_LEN`] long).
pub fn write_probe(buf: &mut [u8], seq: u64, sent_ns: u64) {
    buf[..4].copy_from_slice(&MAGIC);
    buf[4..12].copy_from_slice(&seq.to_be_bytes());
    buf[12..20].copy_from_slice(&sent_ns.to_be_bytes());
}

/// The sequence number and send time of a probe payload.
pub fn read_probe(buf: &[u8]) -> Option<(u64, u64)> {
    if buf.len() < PROBE_LEN || buf[..4] != MAGIC {
        return None;
    }
    let word = |at: usize| u64::from_be_bytes(buf[at..at + 8].try_into().unwrap_or([0; 8]));
    Some((word(4), word(12)))
}

/// Bits of a probe's sequence number below its sender thread's index:
/// each thread numbers its probes from 0 in its own space.
const THREAD_SHIFT: u32 = 48;

/// The sequence number on the wire of thread `thread`'s probe `seq`.
pub fn probe_id(thread: usize, seq: u64) -> u64 {
    ((thread as u64) << THREAD_SHIFT) | (seq & ((1 << THREAD_SHIFT) - 1))
}

/// The sender thread and its sequence number of a probe's number.
pub fn split_id(id: u64) -> (usize, u64) {
    (
        (id >> THREAD_SHIFT) as usize,
        id & ((1 << THREAD_SHIFT) - 1),
    )
}

/// Steady pacing at a rate: probe `i` is due at `start + i / rate`. A
/// sender that falls behind sends the late ones as soon as it can, one at
/// a time, never ahead of time: the achieved rate says by how much it fell
/// short.
#[derive(Clone, Copy, Debug)]
pub struct Pacer {
    start_ns: u64,
    interval_ns: f64,
}

impl Pacer {
    /// Starting at `start_ns`, `pps` probes per second.
    pub fn new(start_ns: u64, pps: f64) -> Pacer {
        Pacer {
            start_ns,
            interval_ns: 1e9 / pps.max(1e-3),
        }
    }

    /// When probe `seq` is due.
    pub fn due(&self, seq: u64) -> u64 {
        self.start_ns + (seq as f64 * self.interval_ns) as u64
    }
}

/// What a sink saw of one run.
#[derive(Debug, Default)]
pub struct Tally {
    received: u64,
    reordered: u64,
    duplicates: u64,
    highest: Option<u64>,
    /// One bit per sequence number seen.
    seen: Vec<u64>,
    latencies_ns: Vec<u64>,
    /// Datagrams that were not probes (or not of this run).
    pub foreign: u64,
}

impl Tally {
    /// Room for `expected` probes, so that recording does not allocate.
    pub fn with_capacity(expected: u64) -> Tally {
        Tally {
            seen: vec![0; (expected as usize).div_ceil(64) + 1],
            latencies_ns: Vec::with_capacity(expected as usize + 1024),
            ..Tally::default()
        }
    }

    /// Probe `seq`, sent at `sent_ns`, received at `received_ns`.
    pub fn record(&mut self, seq: u64, sent_ns: u64, received_ns: u64) {
        let (word, bit) = ((seq / 64) as usize, seq % 64);
        if word >= self.seen.len() {
            self.seen.resize((word + 1).next_power_of_two(), 0);
        }
        if self.seen[word] & (1 << bit) != 0 {
            self.duplicates += 1;
            return;
        }
        self.seen[word] |= 1 << bit;
        self.received += 1;
        match self.highest {
            Some(h) if seq < h => self.reordered += 1,
            _ => self.highest = Some(seq),
        }
        self.latencies_ns.push(received_ns.saturating_sub(sent_ns));
    }

    /// The figures of a run in which `sent` probes left the sender.
    pub fn report(&self, sent: u64) -> Report {
        let mut l = self.latencies_ns.clone();
        l.sort_unstable();
        let pick = |p: f64| -> u64 {
            if l.is_empty() {
                return 0;
            }
            l[((l.len() - 1) as f64 * p).round() as usize]
        };
        let lost = sent.saturating_sub(self.received);
        Report {
            sent,
            received: self.received,
            lost,
            loss_pct: if sent == 0 {
                0.0
            } else {
                lost as f64 * 100.0 / sent as f64
            },
            reordered: self.reordered,
            duplicates: self.duplicates,
            foreign: self.foreign,
            min_ns: l.first().copied().unwrap_or(0),
            avg_ns: if l.is_empty() {
                0
            } else {
                l.iter().sum::<u64>() / l.len() as u64
            },
            max_ns: l.last().copied().unwrap_or(0),
            p50_ns: pick(0.50),
            p99_ns: pick(0.99),
        }
    }
}

/// A sink's tallies, one per sender thread: loss and reordering are each
/// thread's own sequence (its flow), latencies are all of them.
#[derive(Debug, Default)]
pub struct Tallies {
    threads: Vec<Tally>,
    /// Sequence numbers past this are no probe of this run: a stranger's
    /// number grows no bitmap.
    limit: u64,
    /// Datagrams that were not probes, or of no thread of this run.
    pub foreign: u64,
    /// Buffers the sink received (a GRO train is one): with `received`,
    /// how many datagrams the kernel handed over at a time.
    pub buffers: u64,
}

impl Tallies {
    /// For `threads` senders of about `expected` probes in all.
    pub fn with_capacity(threads: usize, expected: u64) -> Tallies {
        let each = expected / threads.max(1) as u64 + 1;
        Tallies {
            threads: (0..threads.max(1))
                .map(|_| Tally::with_capacity(each))
                .collect(),
            limit: 4 * each + (1 << 20),
            foreign: 0,
            buffers: 0,
        }
    }

    /// Probe number `id` (thread and sequence), sent at `sent_ns`, received
    /// at `received_ns`; a thread this run does not have is foreign.
    pub fn record(&mut self, id: u64, sent_ns: u64, received_ns: u64) {
        let (thread, seq) = split_id(id);
        match self.threads.get_mut(thread) {
            Some(t) if seq <= self.limit => t.record(seq, sent_ns, received_ns),
            _ => self.foreign += 1,
        }
    }

    /// The figures of a run in which `sent` probes left the senders.
    pub fn report(&self, sent: u64) -> Report {
        let mut all = Tally {
            foreign: self.foreign,
            ..Tally::default()
        };
        for t in &self.threads {
            all.received += t.received;
            all.reordered += t.reordered;
            all.duplicates += t.duplicates;
            all.foreign += t.foreign;
            all.latencies_ns.extend_from_slice(&t.latencies_ns);
        }
        all.report(sent)
    }
}

/// Loss, reordering and latency of one run, as seed 000 reports them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Report {
    pub sent: u64,
    pub received: u64,
    pub lost: u64,
    pub loss_pct: f64,
    /// Probes that came after one with a higher sequence number.
    pub reordered: u64,
    pub duplicates: u64,
    /// Datagrams that were not this run's probes.
    pub foreign: u64,
    pub min_ns: u64,
    pub avg_ns: u64,
    pub max_ns: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_reads_back_and_others_do_not() {
        let mut b = [0u8; 64];
        write_probe(&mut b, 12345, 987_654_321);
        assert_eq!(read_probe(&b), Some((12345, 987_654_321)));
        assert_eq!(read_probe(&b[..PROBE_LEN - 1]), None);
        b[0] = b'x';
        assert_eq!(read_probe(&b), None);
    }

    #[test]
    fn each_thread_counts_its_own_sequence() {
        assert_eq!(split_id(probe_id(3, 17)), (3, 17));
        let mut t = Tallies::with_capacity(2, 10);
        // Thread 0: 0, 1, 2; thread 1: 0, 2, 1 (one late), 1 again.
        for (thread, seq) in [(0, 0), (1, 0), (0, 1), (1, 2), (0, 2), (1, 1), (1, 1)] {
            t.record(probe_id(thread, seq), 100, 150);
        }
        // A thread this run has not, a number far past the run's.
        t.record(probe_id(7, 0), 100, 150);
        t.record(probe_id(0, 1 << 40), 100, 150);
        let r = t.report(8);
        assert_eq!((r.received, r.lost), (6, 2));
        assert_eq!((r.reordered, r.duplicates, r.foreign), (1, 1, 2));
        assert_eq!((r.min_ns, r.max_ns), (50, 50));
    }

    #[test]
    fn pacing_is_steady_from_the_start() {
        let p = Pacer::new(1_000, 275_000.0);
        assert_eq!(p.due(0), 1_000);
        // 3.636 µs apart: not bunched.
        assert_eq!(p.due(1), 1_000 + 3_636);
        assert_eq!(p.due(275_000), 1_000 + 1_000_000_000);
    }

    #[test]
    fn loss_reordering_duplicates_and_latency() {
        let mut t = Tally::with_capacity(10);
        // 0, 1, 3, 2 (late), 3 again, 5; 4 and 6..9 lost.
        for (seq, lat) in [(0, 10), (1, 20), (3, 30), (2, 40), (3, 99), (5, 50)] {
            t.record(seq, 1_000, 1_000 + lat);
        }
        t.record(200, 0, 7); // past the capacity: grows
        let r = t.report(10);
        assert_eq!((r.sent, r.received, r.lost), (10, 6, 4));
        assert_eq!((r.reordered, r.duplicates), (1, 1));
        assert!((r.loss_pct - 40.0).abs() < 1e-9);
        assert_eq!((r.min_ns, r.max_ns), (7, 50));
        assert_eq!(r.avg_ns, (10 + 20 + 30 + 40 + 50 + 7) / 6);
        assert_eq!(r.p50_ns, 30);
        let empty = Tally::default().report(0);
        assert_eq!(empty, Report::default());
    }
}
