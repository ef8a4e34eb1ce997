//! Bulk summing kernels and their run-time selection.
//!
//! Why our own and not a crate: the checksum is the hot loop of every tunnel
//! endpoint, and the SIMD kernels below sum at close to the speed of a plain
//! read of the same bytes, which the crates we looked at do not (they stop at
//! 64-bit scalar loops).

use crate::{fold64, Sum};
use std::sync::atomic::{AtomicU8, Ordering};

/// One implementation of the bulk sum.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kernel {
    /// Portable: 32-bit loads into four 64-bit accumulators.
    Scalar,
    /// x86_64 AVX2: 256-bit loads, 32-bit lanes (see `avx2`).
    Avx2,
    /// x86_64 AVX-512F: the AVX2 method on 512-bit vectors.
    Avx512,
}

/// Shorter inputs are summed by the scalar kernel whatever was asked.
pub(crate) const SIMD_MIN_LEN: usize = 128;

const UNSET: u8 = u8::MAX;
static BEST: AtomicU8 = AtomicU8::new(UNSET);

impl Kernel {
    /// Every kernel, fastest last.
    pub const ALL: [Kernel; 3] = [Kernel::Scalar, Kernel::Avx2, Kernel::Avx512];

    /// The fastest kernel this CPU runs, detected once per process.
    #[inline]
    pub fn best() -> Kernel {
        match BEST.load(Ordering::Relaxed) {
            UNSET => {
                let k = Kernel::ALL
                    .into_iter()
                    .rev()
                    .find(|k| k.is_available())
                    .unwrap_or(Kernel::Scalar);
                BEST.store(k as u8, Ordering::Relaxed);
                k
            }
            0 => Kernel::Scalar,
            1 => Kernel::Avx2,
            _ => Kernel::Avx512,
        }
    }

    /// The kernels this CPU can run.
    pub fn available() -> impl Iterator<Item = Kernel> {
        Kernel::ALL.into_iter().filter(|k| k.is_available())
    }

    /// Whether this CPU has the instructions the kernel needs.
    pub fn is_available(self) -> bool {
        match self {
            Kernel::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => std::is_x86_feature_detected!("avx2"),
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512 => {
                std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx2")
            }
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }

    /// A short name for tables.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Scalar => "scalar",
            Kernel::Avx2 => "avx2",
            Kernel::Avx512 => "avx512",
        }
    }

    /// The sum of `data` at an even offset. A kernel this CPU cannot run
    /// falls back to the scalar one rather than fault.
    #[inline]
    pub fn sum(self, data: &[u8]) -> Sum {
        let native = match self {
            // Below two vectors the SIMD set-up and reduction cost more than
            // they save.
            _ if data.len() < SIMD_MIN_LEN => scalar(data),
            Kernel::Scalar => scalar(data),
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 if self.is_available() => {
                // SAFETY: the CPU has AVX2 (checked just above).
                unsafe { x86::avx2(data) }
            }
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512 if self.is_available() => {
                // SAFETY: the CPU has AVX-512F and AVX2 (checked just above).
                unsafe { x86::avx512(data) }
            }
            _ => scalar(data),
        };
        to_network_order(native)
    }

    /// Copies `src` into `dst` (of the same length) and returns the sum of
    /// the bytes, as [`Kernel::sum`] would: one pass over memory instead of
    /// a copy and then a read (segmentation's payload copy, whose checksum
    /// is needed anyway).
    ///
    /// # Panics
    /// If the lengths differ.
    #[inline]
    pub fn copy_sum(self, dst: &mut [u8], src: &[u8]) -> Sum {
        assert_eq!(dst.len(), src.len(), "copy_sum: lengths differ");
        let native = match self {
            _ if src.len() < SIMD_MIN_LEN => {
                dst.copy_from_slice(src);
                scalar(src)
            }
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 | Kernel::Avx512 if Kernel::Avx2.is_available() => {
                // SAFETY: the CPU has AVX2 (checked just above); the lengths
                // are equal (asserted above). AVX-512 gains nothing here: the
                // copy is bound by the stores.
                unsafe { x86::avx2_copy(dst, src) }
            }
            _ => {
                dst.copy_from_slice(src);
                scalar(src)
            }
        };
        to_network_order(native)
    }
}

/// The kernels add 16-bit words as they sit in memory (native order); the
/// one's-complement sum commutes with byte swapping (RFC 1071 §2.B), so the
/// folded native sum converts to the big-endian value at the very end.
#[inline]
fn to_network_order(native: u16) -> Sum {
    Sum::from_value(u16::from_be_bytes(native.to_ne_bytes()))
}

/// Native-order sum of `data`, folded to 16 bits.
fn scalar(data: &[u8]) -> u16 {
    fold64(scalar_wide(data))
}

/// The sum of `data` as native-order 32-bit words (a last partial word
/// padded with zeros), for [`fold64`]: two halves of one 64-bit load per
/// eight bytes. Short regions (headers, for local checksum offload and the
/// pseudo-header sums) and the SIMD kernels' tails go through here, so it
/// is kept to a few instructions per word.
#[inline]
fn scalar_wide(data: &[u8]) -> u64 {
    let mut acc = 0u64;
    let mut words = data.chunks_exact(8);
    for w in &mut words {
        if let &[a, b, c, d, e, f, g, h] = w {
            let v = u64::from_ne_bytes([a, b, c, d, e, f, g, h]);
            acc += (v & 0xffff_ffff) + (v >> 32);
        }
    }
    // Up to seven bytes: a 32-bit word, a 16-bit one, a last byte padded
    // with zero (each is its 16-bit words' sum modulo 0xffff).
    let mut rest = words.remainder();
    if let [a, b, c, d, tail @ ..] = rest {
        acc += u64::from(u32::from_ne_bytes([*a, *b, *c, *d]));
        rest = tail;
    }
    if let [a, b, tail @ ..] = rest {
        acc += u64::from(u16::from_ne_bytes([*a, *b]));
        rest = tail;
    }
    if let [a] = rest {
        acc += u64::from(u16::from_ne_bytes([*a, 0]));
    }
    acc
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::scalar_wide;
    use crate::fold64;
    use core::arch::x86_64::*;

    /// Bytes summed between two flushes of the lane accumulators (each of the
    /// four accumulator pairs then takes 8192 vectors of 32 or 64 bytes).
    const FLUSH_BLOCK: usize = 1 << 20;

    /// The SIMD kernels' trick: a 32-bit lane `x` holds two 16-bit words,
    /// `x >> 16` and `x & 0xffff`. Keeping per lane only `all = Σx mod 2^32`
    /// and `hi = Σ(x >> 16)` costs one shift and two adds per vector, and
    /// still gives the low words' sum exactly, `lo = all - (hi << 16) mod
    /// 2^32`, as long as `lo` stays below 2^32, i.e. at most 65537 vectors
    /// per lane between flushes. The kernels flush every `FLUSH_BLOCK`
    /// bytes, far inside that. This turns the lanes into their 16-bit
    /// words' total.
    #[inline]
    fn lanes_total(all: &[u32], hi: &[u32]) -> u64 {
        all.iter()
            .zip(hi)
            .map(|(&a, &h)| h as u64 + a.wrapping_sub(h << 16) as u64)
            .sum()
    }

    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn avx2(data: &[u8]) -> u16 {
        // SAFETY: the caller guarantees AVX2.
        fold64(unsafe { avx2_wide(data) })
    }

    #[target_feature(enable = "avx2")]
    unsafe fn avx2_wide(data: &[u8]) -> u64 {
        let mut total = 0u64;
        for block in data.chunks(FLUSH_BLOCK) {
            let mut all = [_mm256_setzero_si256(); 4];
            let mut hi = [_mm256_setzero_si256(); 4];
            let mut quads = block.chunks_exact(128);
            for q in &mut quads {
                for i in 0..4 {
                    // SAFETY: `q` has 128 bytes, so bytes 32*i..32*i+32 are in
                    // bounds; loadu has no alignment requirement.
                    let v = unsafe { _mm256_loadu_si256(q.as_ptr().add(32 * i).cast()) };
                    all[i] = _mm256_add_epi32(all[i], v);
                    hi[i] = _mm256_add_epi32(hi[i], _mm256_srli_epi32::<16>(v));
                }
            }
            let rest = quads.remainder();
            let mut singles = rest.chunks_exact(32);
            for s in &mut singles {
                // SAFETY: `s` has exactly 32 bytes.
                let v = unsafe { _mm256_loadu_si256(s.as_ptr().cast()) };
                all[0] = _mm256_add_epi32(all[0], v);
                hi[0] = _mm256_add_epi32(hi[0], _mm256_srli_epi32::<16>(v));
            }
            // Folding the four pairs into one keeps every lane within the
            // bound: at most 4 * FLUSH_BLOCK / 128 = 32768 vectors per lane.
            let all = _mm256_add_epi32(
                _mm256_add_epi32(all[0], all[1]),
                _mm256_add_epi32(all[2], all[3]),
            );
            let hi = _mm256_add_epi32(
                _mm256_add_epi32(hi[0], hi[1]),
                _mm256_add_epi32(hi[2], hi[3]),
            );
            let mut a = [0u32; 8];
            let mut h = [0u32; 8];
            // SAFETY: each store writes 32 bytes (8 lanes of u32) into an
            // array of 8 u32.
            unsafe {
                _mm256_storeu_si256(a.as_mut_ptr().cast(), all);
                _mm256_storeu_si256(h.as_mut_ptr().cast(), hi);
            }
            total += lanes_total(&a, &h) + scalar_wide(singles.remainder());
        }
        total
    }

    /// [`avx2`] that also stores every vector it loads into `dst`.
    ///
    /// # Safety
    /// The CPU has AVX2 and `dst.len() == src.len()`.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn avx2_copy(dst: &mut [u8], src: &[u8]) -> u16 {
        debug_assert_eq!(dst.len(), src.len());
        let mut total = 0u64;
        for (dblock, block) in dst.chunks_mut(FLUSH_BLOCK).zip(src.chunks(FLUSH_BLOCK)) {
            let (mut all0, mut hi0) = (_mm256_setzero_si256(), _mm256_setzero_si256());
            let (mut all1, mut hi1) = (_mm256_setzero_si256(), _mm256_setzero_si256());
            let vectors = block.len() / 32;
            let (s, d) = (block.as_ptr(), dblock.as_mut_ptr());
            // Two vectors per step, each into its own accumulator pair, so
            // that the adds of one do not wait for the other's.
            for n in (0..vectors / 2 * 2).step_by(2) {
                // SAFETY: vectors `n` and `n + 1` are within both blocks
                // (same length, `n + 1 < len / 32`); loadu/storeu have no
                // alignment requirement.
                let (v0, v1) = unsafe {
                    let v0 = _mm256_loadu_si256(s.add(32 * n).cast());
                    let v1 = _mm256_loadu_si256(s.add(32 * n + 32).cast());
                    _mm256_storeu_si256(d.add(32 * n).cast(), v0);
                    _mm256_storeu_si256(d.add(32 * n + 32).cast(), v1);
                    (v0, v1)
                };
                all0 = _mm256_add_epi32(all0, v0);
                hi0 = _mm256_add_epi32(hi0, _mm256_srli_epi32::<16>(v0));
                all1 = _mm256_add_epi32(all1, v1);
                hi1 = _mm256_add_epi32(hi1, _mm256_srli_epi32::<16>(v1));
            }
            if vectors % 2 == 1 {
                let n = vectors - 1;
                // SAFETY: vector `n` is the last whole one of both blocks.
                let v = unsafe {
                    let v = _mm256_loadu_si256(s.add(32 * n).cast());
                    _mm256_storeu_si256(d.add(32 * n).cast(), v);
                    v
                };
                all0 = _mm256_add_epi32(all0, v);
                hi0 = _mm256_add_epi32(hi0, _mm256_srli_epi32::<16>(v));
            }
            let done = vectors * 32;
            dblock[done..].copy_from_slice(&block[done..]);
            // Two pairs: at most 2 * FLUSH_BLOCK / 64 vectors per lane.
            let all = _mm256_add_epi32(all0, all1);
            let hi = _mm256_add_epi32(hi0, hi1);
            let mut a = [0u32; 8];
            let mut h = [0u32; 8];
            // SAFETY: each store writes 32 bytes into an array of 8 u32.
            unsafe {
                _mm256_storeu_si256(a.as_mut_ptr().cast(), all);
                _mm256_storeu_si256(h.as_mut_ptr().cast(), hi);
            }
            total += lanes_total(&a, &h) + scalar_wide(&block[done..]);
        }
        fold64(total)
    }

    #[target_feature(enable = "avx512f,avx2")]
    pub(super) unsafe fn avx512(data: &[u8]) -> u16 {
        let mut total = 0u64;
        for block in data.chunks(FLUSH_BLOCK) {
            let mut all = [_mm512_setzero_si512(); 4];
            let mut hi = [_mm512_setzero_si512(); 4];
            let mut quads = block.chunks_exact(256);
            for q in &mut quads {
                for i in 0..4 {
                    // SAFETY: `q` has 256 bytes; loadu has no alignment requirement.
                    let v = unsafe { _mm512_loadu_si512(q.as_ptr().add(64 * i).cast()) };
                    all[i] = _mm512_add_epi32(all[i], v);
                    hi[i] = _mm512_add_epi32(hi[i], _mm512_srli_epi32::<16>(v));
                }
            }
            // As in the AVX2 kernel: 4 * FLUSH_BLOCK / 256 vectors per lane at most.
            let all = _mm512_add_epi32(
                _mm512_add_epi32(all[0], all[1]),
                _mm512_add_epi32(all[2], all[3]),
            );
            let hi = _mm512_add_epi32(
                _mm512_add_epi32(hi[0], hi[1]),
                _mm512_add_epi32(hi[2], hi[3]),
            );
            let mut a = [0u32; 16];
            let mut h = [0u32; 16];
            // SAFETY: each store writes 64 bytes (16 lanes of u32) into an
            // array of 16 u32.
            unsafe {
                _mm512_storeu_si512(a.as_mut_ptr().cast(), all);
                _mm512_storeu_si512(h.as_mut_ptr().cast(), hi);
            }
            // SAFETY: the caller guarantees AVX2 as well.
            total += lanes_total(&a, &h) + unsafe { avx2_wide(quads.remainder()) };
        }
        fold64(total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference;
    use proptest::prelude::*;

    fn check_all(data: &[u8]) {
        let want = reference(data);
        for k in Kernel::available() {
            assert_eq!(k.sum(data), want, "{} on {} bytes", k.name(), data.len());
        }
    }

    #[test]
    fn edge_lengths_and_values() {
        for len in (0..600).chain([1491, 1492, 9000, 65535, 65536, 65537]) {
            check_all(&vec![0xffu8; len]);
            check_all(&vec![0u8; len]);
            let mixed: Vec<u8> = (0..len).map(|i| (i * 151 + 17) as u8).collect();
            check_all(&mixed);
        }
    }

    #[test]
    fn past_a_flush_block_of_all_ones() {
        // All-ones words are the worst case for the lane accumulators.
        check_all(&vec![0xffu8; (1 << 20) * 3 + 77]);
    }

    /// Every kernel's copy gives the bytes back and the reference sum.
    fn check_copies(src: &[u8]) {
        let want = reference(src);
        for k in Kernel::available() {
            let mut dst = vec![0x5au8; src.len()];
            assert_eq!(
                k.copy_sum(&mut dst, src),
                want,
                "{} on {} bytes",
                k.name(),
                src.len()
            );
            assert!(dst == src, "{} copied {} bytes wrong", k.name(), src.len());
        }
    }

    #[test]
    fn copy_sum_edge_lengths_and_values() {
        for len in (0..300).chain([1491, 1492, 9000, 65535]) {
            check_copies(&vec![0xffu8; len]);
            let mixed: Vec<u8> = (0..len).map(|i| (i * 151 + 17) as u8).collect();
            check_copies(&mixed);
        }
        check_copies(&vec![0xffu8; (1 << 20) * 2 + 33]);
    }

    #[test]
    #[should_panic(expected = "lengths differ")]
    fn copy_sum_refuses_different_lengths() {
        Kernel::best().copy_sum(&mut [0u8; 3], &[0u8; 4]);
    }

    #[test]
    fn reports_which_kernels_run_here() {
        let avail: Vec<_> = Kernel::available().map(Kernel::name).collect();
        eprintln!(
            "checksum kernels on this CPU: {avail:?}; best: {}",
            Kernel::best().name()
        );
        if !Kernel::Avx512.is_available() {
            eprintln!("NOTE: no AVX-512 on this CPU: the avx512 kernel is not exercised here");
        }
        assert!(avail.contains(&Kernel::best().name()));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn kernels_agree_with_reference(
            data in prop::collection::vec(any::<u8>(), 0..=70_000usize),
            start in 0usize..64,
        ) {
            // A random start exercises every load alignment.
            let data = &data[start.min(data.len())..];
            let want = reference(data);
            for k in Kernel::available() {
                prop_assert_eq!(k.sum(data), want, "{}", k.name());
            }
        }

        #[test]
        fn copy_sum_agrees_with_reference(
            data in prop::collection::vec(any::<u8>(), 0..=20_000usize),
            start in 0usize..64,
            to in 0usize..64,
        ) {
            let src = &data[start.min(data.len())..];
            let want = reference(src);
            for k in Kernel::available() {
                // A random destination offset: unaligned stores too.
                let mut room = vec![0u8; src.len() + to];
                prop_assert_eq!(k.copy_sum(&mut room[to..], src), want, "{}", k.name());
                prop_assert_eq!(&room[to..], src);
            }
        }

        #[test]
        fn pieces_combine_at_any_offset(
            data in prop::collection::vec(any::<u8>(), 0..=4000usize),
            cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..6),
        ) {
            let mut cuts: Vec<usize> = cuts.iter().map(|c| c.index(data.len() + 1)).collect();
            cuts.push(0);
            cuts.push(data.len());
            cuts.sort_unstable();
            let mut total = Sum::ZERO;
            for w in cuts.windows(2) {
                total = total.add(Sum::of_at(&data[w[0]..w[1]], w[0]));
            }
            prop_assert_eq!(total, reference(&data));
        }
    }
}
