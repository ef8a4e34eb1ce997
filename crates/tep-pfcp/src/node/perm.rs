//! A keyed permutation of the integers below 2^(2 × half) (a balanced
//! Feistel network): what makes SEIDs and TEIDs unpredictable while the
//! node keeps allocating them densely.
//!
//! The node hands out dense indexes (slot and generation, bitmap bit) as
//! before and sends their image under the permutation. A permutation is a
//! bijection, so two distinct indexes never share an identifier: the
//! uniqueness the dense allocators guarantee carries over unchanged, and
//! the inverse turns an identifier back into its index in a few
//! multiplications (lookups stay as cheap as they were). Without the key
//! (drawn at start by the daemon) an off-path host cannot tell which
//! identifiers are in use; an identifier it guesses names a session or
//! tunnel with probability (in use) / 2^bits.
//!
//! Each Feistel round is invertible whatever its round function, so the
//! whole is a permutation by construction; four rounds of a
//! pseudorandom round function make a strong pseudorandom permutation
//! (Luby–Rackoff). The round function is a keyed 64-bit mixer
//! (splitmix64's finaliser), not a cryptographic PRF: enough to hide the
//! allocation order from hosts that do not see N4 traffic, which is all
//! it is for (a host that sees N4 reads the SEIDs anyway).

const ROUNDS: usize = 4;

#[derive(Clone, Copy, Debug)]
pub struct Permutation {
    keys: [u64; ROUNDS],
    half: u32,
}

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Permutation {
    /// A permutation of the `2 * half`-bit integers (`half` 16 or 32)
    /// keyed by `key`; `domain` separates the permutations drawn from one
    /// key.
    pub fn new(key: u64, domain: u64, half: u32) -> Self {
        debug_assert!(half == 16 || half == 32);
        let mut keys = [0; ROUNDS];
        for (i, k) in keys.iter_mut().enumerate() {
            *k = mix(key ^ mix(domain.wrapping_mul(ROUNDS as u64) + i as u64 + 1));
        }
        Permutation { keys, half }
    }

    fn mask(&self) -> u64 {
        (1u64 << self.half) - 1
    }

    fn round(&self, x: u64, k: u64) -> u64 {
        mix(x ^ k) & self.mask()
    }

    pub fn forward(&self, v: u64) -> u64 {
        let (mut l, mut r) = (v >> self.half & self.mask(), v & self.mask());
        for &k in &self.keys {
            (l, r) = (r, l ^ self.round(r, k));
        }
        l << self.half | r
    }

    pub fn backward(&self, v: u64) -> u64 {
        let (mut l, mut r) = (v >> self.half & self.mask(), v & self.mask());
        for &k in self.keys.iter().rev() {
            (l, r) = (r ^ self.round(l, k), l);
        }
        l << self.half | r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inverts_and_scatters() {
        let p = Permutation::new(0x1234_5678, 1, 32);
        let q = Permutation::new(0x1234_5679, 1, 32);
        for v in [0u64, 1, 2, 3, 1 << 32 | 1, u64::MAX] {
            assert_eq!(p.backward(p.forward(v)), v);
        }
        // Consecutive indexes land far apart, and another key moves them.
        let a: Vec<u64> = (1..=4).map(|v| p.forward(v)).collect();
        assert!(
            a.windows(2).all(|w| w[0].abs_diff(w[1]) > 1 << 20),
            "{a:x?}"
        );
        assert_ne!(p.forward(1), q.forward(1));
    }

    #[test]
    fn a_32_bit_permutation_is_a_bijection() {
        let p = Permutation::new(42, 2, 16);
        let mut seen = std::collections::HashSet::new();
        for v in 0..1u64 << 16 {
            let t = p.forward(v);
            assert!(t < 1 << 32);
            assert!(seen.insert(t));
            assert_eq!(p.backward(t), v);
        }
        assert_eq!(p.backward(p.forward(u32::MAX as u64)), u32::MAX as u64);
    }
}
