//! The memory limit a checksum is measured against: one read-only pass over
//! the same bytes with the widest loads the CPU has, doing the least work
//! that keeps the loads alive (an OR into four accumulators).

/// Reads every byte of `data` once and returns an OR of its 64-bit words, so
/// that the compiler cannot drop the loads.
pub fn read_only_pass(data: &[u8]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked just above).
        return unsafe { avx2(data) };
    }
    scalar(data)
}

fn scalar(data: &[u8]) -> u64 {
    let mut acc = [0u64; 4];
    let mut blocks = data.chunks_exact(32);
    for b in &mut blocks {
        for (i, a) in acc.iter_mut().enumerate() {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[8 * i..8 * i + 8]);
            *a |= u64::from_ne_bytes(w);
        }
    }
    blocks
        .remainder()
        .iter()
        .fold(acc[0] | acc[1] | acc[2] | acc[3], |a, &b| a | b as u64)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn avx2(data: &[u8]) -> u64 {
    use core::arch::x86_64::*;
    let mut acc = [_mm256_setzero_si256(); 4];
    let mut quads = data.chunks_exact(128);
    for q in &mut quads {
        for (i, a) in acc.iter_mut().enumerate() {
            // SAFETY: `q` has 128 bytes; loadu has no alignment requirement.
            *a = _mm256_or_si256(*a, unsafe {
                _mm256_loadu_si256(q.as_ptr().add(32 * i).cast())
            });
        }
    }
    let v = _mm256_or_si256(
        _mm256_or_si256(acc[0], acc[1]),
        _mm256_or_si256(acc[2], acc[3]),
    );
    let mut lanes = [0u64; 4];
    // SAFETY: stores 32 bytes into a 32-byte array.
    unsafe { _mm256_storeu_si256(lanes.as_mut_ptr().cast(), v) };
    lanes.iter().fold(scalar(quads.remainder()), |a, &l| a | l)
}

#[cfg(test)]
mod tests {
    #[test]
    fn sees_every_byte() {
        for len in [0usize, 1, 31, 127, 128, 129, 1492] {
            for pos in [0, len / 2, len.saturating_sub(1)] {
                if len == 0 {
                    assert_eq!(super::read_only_pass(&[]), 0);
                    continue;
                }
                let mut data = vec![0u8; len];
                data[pos] = 0x80;
                assert_ne!(super::read_only_pass(&data), 0, "len {len} pos {pos}");
            }
        }
    }
}
