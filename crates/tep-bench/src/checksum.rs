//! `tep-bench checksum`: GB/s of every checksum kernel this CPU runs and of a
//! read-only pass over the same bytes, per packet size; and of a copy into
//! another buffer followed by the sum, against the fused copy and sum.

use crate::timing::{calibrate, median, time_per_call};
use serde::Serialize;
use std::hint::black_box;
use tep_csum::{memory::read_only_pass, Kernel};

/// Packet sizes: minimum IPv4 header, small packet, IPv4 minimum MTU, the
/// seed's GTP-U packet, a jumbo frame, and a 64 KiB super-packet.
pub const SIZES: [usize; 6] = [20, 64, 576, 1492, 9000, 65535];

/// One measured row: a method at a size.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub size: usize,
    pub method: &'static str,
    pub ns_per_call: f64,
    pub gbytes_per_s: f64,
    /// Throughput relative to the read-only pass at the same size.
    pub vs_read_only: f64,
    /// Throughput relative to the scalar kernel at the same size.
    pub vs_scalar: f64,
}

/// Options of a run.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    pub samples: usize,
    pub sample_ns: f64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            samples: 15,
            sample_ns: 2e6,
        }
    }
}

const READ_ONLY: &str = "read-only";
/// A copy into another buffer, then the best kernel over the copy: how a
/// segment's checksum was filled before the fused kernel.
const COPY_THEN_SUM: &str = "copy,sum";
/// The same in one pass ([`tep_csum::Sum::copy_of`]).
const COPY_SUM: &str = "copy+sum";
/// The RFC 1071 textbook loop, one 16-bit word at a time: what "software
/// checksum" means in most userspace dataplanes.
const NAIVE: &str = "naive-16bit";

/// Measures every method at every size. The methods' samples are
/// interleaved (round-robin), so that a noisy neighbour slows them alike and
/// the ratios stay honest.
pub fn run(opts: Options) -> Vec<Row> {
    // Offset by one cache line plus 2 so that the data is not conveniently aligned.
    let buf: Vec<u8> = (0..65535 + 66).map(|i| (i * 7 + 1) as u8).collect();
    // The copies' destination sits half a page away from the source
    // (modulo 4 KiB). Glibc's memcpy copies sizes above a few KiB with `rep
    // movsb`, which on this machine's AMD CPU runs ~20x slower when the
    // destination is a few bytes past the source modulo a page: that is a
    // fact about one CPU and layout, not about copying then summing.
    let mut room = vec![0u8; 65535 + 4096];
    let skew = (room.as_ptr() as usize).wrapping_sub(buf[66..].as_ptr() as usize) % 4096;
    let at = (2048 + 4096 - skew) % 4096;
    let copy = &mut room[at..at + 65535];
    let kernels: Vec<Kernel> = Kernel::available().collect();
    let k = kernels.len();
    let mut rows = Vec::new();
    for size in SIZES {
        let data = &buf[66..66 + size];
        // Methods: 0 read-only, 1..=k each kernel, then the naive
        // reference, the copy then the sum, the fused copy and sum.
        let n_methods = k + 4;
        let mut run_method = |m: usize| {
            if m == 0 {
                black_box(read_only_pass(black_box(data)));
            } else if m <= k {
                black_box(kernels[m - 1].sum(black_box(data)));
            } else if m == k + 1 {
                black_box(tep_csum::reference(black_box(data)));
            } else if m == k + 2 {
                copy[..size].copy_from_slice(black_box(data));
                black_box(Kernel::best().sum(black_box(&copy[..size])));
            } else {
                black_box(Kernel::best().copy_sum(&mut copy[..size], black_box(data)));
            }
        };
        let iters: Vec<u64> = (0..n_methods)
            .map(|m| calibrate(opts.sample_ns, || run_method(m)))
            .collect();
        let mut samples = vec![Vec::with_capacity(opts.samples); n_methods];
        for _ in 0..opts.samples {
            for (m, s) in samples.iter_mut().enumerate() {
                s.push(time_per_call(iters[m], || run_method(m)));
            }
        }
        let ns: Vec<f64> = samples.iter_mut().map(|s| median(s)).collect();
        let gbps = |ns: f64| size as f64 / ns;
        for (m, &ns_m) in ns.iter().enumerate() {
            rows.push(Row {
                size,
                method: match m {
                    0 => READ_ONLY,
                    m if m <= k => kernels[m - 1].name(),
                    m if m == k + 1 => NAIVE,
                    m if m == k + 2 => COPY_THEN_SUM,
                    _ => COPY_SUM,
                },
                ns_per_call: ns_m,
                gbytes_per_s: gbps(ns_m),
                vs_read_only: gbps(ns_m) / gbps(ns[0]),
                vs_scalar: gbps(ns_m) / gbps(ns[1]),
            });
        }
    }
    rows
}

/// The table as text.
pub fn render(rows: &[Row]) -> String {
    let mut out = format!(
        "checksum kernels (best here: {}); median of interleaved samples\n",
        Kernel::best().name()
    );
    out += &format!(
        "{:>6}  {:<12} {:>10} {:>8} {:>12} {:>10}\n",
        "bytes", "method", "ns/call", "GB/s", "x read-only", "x scalar"
    );
    for r in rows {
        out += &format!(
            "{:>6}  {:<12} {:>10.1} {:>8.2} {:>12.2} {:>10.2}\n",
            r.size, r.method, r.ns_per_call, r.gbytes_per_s, r.vs_read_only, r.vs_scalar
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_size_has_every_method_and_consistent_ratios() {
        let rows = run(Options {
            samples: 3,
            sample_ns: 2e4,
        });
        let methods = Kernel::available().count() + 4;
        assert_eq!(rows.len(), SIZES.len() * methods);
        // Each row's throughput is its size over its time, and its ratios
        // are against the read-only and scalar rows of the same size (not
        // of another size, not inverted).
        let of = |size: usize, method: &str| {
            rows.iter()
                .find(|r| r.size == size && r.method == method)
                .unwrap_or_else(|| panic!("no {method} row at {size}"))
        };
        for r in &rows {
            assert!(r.gbytes_per_s.is_finite() && r.gbytes_per_s > 0.0, "{r:?}");
            let gbps = r.size as f64 / r.ns_per_call;
            assert!((r.gbytes_per_s - gbps).abs() <= 1e-9 * gbps, "{r:?}");
            let (ro, sc) = (of(r.size, READ_ONLY), of(r.size, "scalar"));
            let want = ro.ns_per_call / r.ns_per_call;
            assert!((r.vs_read_only - want).abs() <= 1e-9 * want, "{r:?} {ro:?}");
            let want = sc.ns_per_call / r.ns_per_call;
            assert!((r.vs_scalar - want).abs() <= 1e-9 * want, "{r:?} {sc:?}");
        }
        let text = render(&rows);
        assert!(text.contains("1492") && text.contains("scalar") && text.contains(READ_ONLY));
        assert!(text.contains(NAIVE) && text.contains(COPY_THEN_SUM) && text.contains(COPY_SUM));
    }
}
