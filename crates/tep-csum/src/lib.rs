//! The Internet checksum (RFC 1071) for tunnel endpoints.
//!
//! Everything revolves around [`Sum`], a folded 16-bit one's-complement sum
//! held as the big-endian value the bytes spell. Sums of pieces combine with
//! [`Sum::add`] whatever the byte offset of each piece ([`Sum::of_at`] swaps
//! the bytes of a piece that starts at an odd offset), which is what remote
//! checksum offload and segmentation need.
//!
//! The bulk summing kernel is chosen once per process ([`Kernel::best`]):
//! AVX-512 or AVX2 on x86_64 when the CPU has them, else a portable scalar
//! loop with 64-bit accumulation. All kernels agree bit for bit with the naive
//! 16-bit [`reference`] sum; the property tests hold them to it.
//!
//! This crate has no dependencies and does no I/O. It uses `std` only to
//! detect CPU features at run time.

mod kernel;
pub mod memory;
mod offload;
mod pseudo;

pub use kernel::Kernel;
pub use offload::{local_checksum_offload, remote_checksum_complete, RemoteChecksumDelta};
pub use pseudo::{pseudo_header_v4, pseudo_header_v6};

/// A folded one's-complement sum of 16-bit big-endian words.
///
/// The value is never "complemented": turning a sum into the value of a
/// checksum field is [`Sum::checksum`] (or [`Sum::udp_checksum`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Sum(u16);

impl Sum {
    /// The sum of nothing.
    pub const ZERO: Sum = Sum(0);

    /// A sum from its folded 16-bit value (e.g. a partial checksum field).
    #[inline]
    pub const fn from_value(value: u16) -> Sum {
        Sum(value)
    }

    /// A sum from big-endian 16- or 32-bit words added up in a plain
    /// integer, not folded yet (2^16 = 1 modulo 0xffff, so a 32-bit word
    /// counts as its two halves). Folding once at the end lets a few header
    /// fields be summed without a chain of carries.
    #[inline]
    pub const fn from_words(acc: u64) -> Sum {
        Sum(fold64(acc))
    }

    /// The folded 16-bit value.
    #[inline]
    pub const fn value(self) -> u16 {
        self.0
    }

    /// The sum of `data` laid at an even offset in the packet, with the best
    /// kernel for this CPU.
    #[inline]
    pub fn of(data: &[u8]) -> Sum {
        Kernel::best().sum(data)
    }

    /// Copies `src` into `dst` (same length) and returns the sum of the
    /// bytes, laid at an even offset, in one pass ([`Kernel::copy_sum`]).
    ///
    /// # Panics
    /// If the lengths differ.
    #[inline]
    pub fn copy_of(dst: &mut [u8], src: &[u8]) -> Sum {
        Kernel::best().copy_sum(dst, src)
    }

    /// The sum of `data` as it contributes to a packet sum when it starts at
    /// byte `offset` of the checksummed region: a piece at an odd offset has
    /// its bytes in the other halves of the 16-bit words, which the
    /// one's-complement sum turns into a byte swap of the piece's own sum.
    #[inline]
    pub fn of_at(data: &[u8], offset: usize) -> Sum {
        Sum::of(data).at(offset)
    }

    /// Moves a sum computed at an even offset to `offset`.
    #[inline]
    pub const fn at(self, offset: usize) -> Sum {
        if offset & 1 == 1 {
            Sum(self.0.swap_bytes())
        } else {
            self
        }
    }

    /// One's-complement addition (end-around carry).
    #[inline]
    #[allow(clippy::should_implement_trait)]
    pub const fn add(self, other: Sum) -> Sum {
        let s = self.0 as u32 + other.0 as u32;
        Sum(((s & 0xffff) + (s >> 16)) as u16)
    }

    /// One's-complement subtraction: adds the complement of `other`.
    #[inline]
    #[allow(clippy::should_implement_trait)]
    pub const fn sub(self, other: Sum) -> Sum {
        self.add(Sum(!other.0))
    }

    /// Adds one 16-bit word (as it reads in network byte order).
    #[inline]
    pub const fn add_u16(self, word: u16) -> Sum {
        self.add(Sum(word))
    }

    /// Adds a 32-bit value as two 16-bit words.
    #[inline]
    pub const fn add_u32(self, word: u32) -> Sum {
        self.add(Sum((word >> 16) as u16)).add(Sum(word as u16))
    }

    /// The value of a checksum field that makes the covered bytes sum to
    /// all ones: the complement of the sum (IPv4, TCP, ICMP, GRE).
    #[inline]
    pub const fn checksum(self) -> u16 {
        !self.0
    }

    /// The UDP checksum field: as [`Sum::checksum`], but a computed 0 is sent
    /// as 0xffff because 0 means "no checksum" (RFC 768).
    #[inline]
    pub const fn udp_checksum(self) -> u16 {
        match !self.0 {
            0 => 0xffff,
            c => c,
        }
    }

    /// Whether bytes that include their checksum field verify: their sum is
    /// all ones (negative zero).
    #[inline]
    pub const fn verifies(self) -> bool {
        self.0 == 0xffff
    }
}

/// Folds a wide accumulator of 16-bit words into a 16-bit one's-complement
/// sum (still in the byte order the words were read in).
#[inline]
pub(crate) const fn fold64(mut acc: u64) -> u16 {
    // Two steps bring any u64 below 2^17 + small; the loop finishes the rest.
    acc = (acc & 0xffff_ffff) + (acc >> 32);
    acc = (acc & 0xffff_ffff) + (acc >> 32);
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// RFC 1624 (eqn. 3) incremental update: the new value of a checksum field
/// after one 16-bit word it covers changes from `old` to `new`:
/// `HC' = ~(~HC + ~m + m')`.
#[inline]
pub const fn incremental_update(checksum: u16, old: u16, new: u16) -> u16 {
    Sum::from_value(!checksum)
        .sub(Sum(old))
        .add(Sum(new))
        .checksum()
}

/// As [`incremental_update`] for a 32-bit field (an IPv4 address).
#[inline]
pub const fn incremental_update_u32(checksum: u16, old: u32, new: u32) -> u16 {
    let c = incremental_update(checksum, (old >> 16) as u16, (new >> 16) as u16);
    incremental_update(c, old as u16, new as u16)
}

/// The naive RFC 1071 sum: one 16-bit big-endian word at a time, an odd
/// trailing byte padded with a zero. The kernels are tested against it.
pub fn reference(data: &[u8]) -> Sum {
    let mut acc: u64 = 0;
    let mut words = data.chunks_exact(2);
    for w in &mut words {
        acc += u16::from_be_bytes([w[0], w[1]]) as u64;
    }
    if let [last] = words.remainder() {
        acc += (*last as u64) << 8;
    }
    Sum(fold64(acc))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3: 00 01 f2 03 f4 f5 f6 f7 sums to ddf2.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(reference(&data).value(), 0xddf2);
        assert_eq!(Sum::of(&data).value(), 0xddf2);
        assert_eq!(Sum::of(&data).checksum(), !0xddf2);
    }

    #[test]
    fn ipv4_header_from_capture_verifies() {
        // Outer IPv4 header of the first packet of kernel-vxlan-csum.pcap.
        let hdr = [
            0x45, 0x00, 0x00, 0x7e, 0x5c, 0x9e, 0x00, 0x00, 0x40, 0x11, 0x08, 0x3f, 0x0a, 0xc8,
            0x00, 0x01, 0x0a, 0xc8, 0x00, 0x02,
        ];
        let s = Sum::of(&hdr);
        // Recompute the field: zero it, sum, complement.
        let mut zeroed = hdr;
        zeroed[10] = 0;
        zeroed[11] = 0;
        let field = Sum::of(&zeroed).checksum();
        assert_eq!(field, u16::from_be_bytes([hdr[10], hdr[11]]));
        assert!(s.verifies());
    }

    #[test]
    fn odd_offset_is_a_byte_swap() {
        let data: Vec<u8> = (0..=255u8).cycle().take(1001).collect();
        for split in [0, 1, 2, 3, 500, 999, 1000, 1001] {
            let (a, b) = data.split_at(split);
            let combined = Sum::of(a).add(Sum::of_at(b, split));
            assert_eq!(combined, reference(&data), "split at {split}");
        }
    }

    #[test]
    fn incremental_update_matches_recompute() {
        let mut hdr = [
            0x45u8, 0x00, 0x00, 0x54, 0x12, 0x34, 0x40, 0x00, 0x40, 0x01, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        let c = Sum::of(&hdr).checksum();
        hdr[10..12].copy_from_slice(&c.to_be_bytes());
        // Decrement the TTL (word 4: TTL|proto).
        let old = u16::from_be_bytes([hdr[8], hdr[9]]);
        hdr[8] -= 1;
        let new = u16::from_be_bytes([hdr[8], hdr[9]]);
        let updated = incremental_update(c, old, new);
        hdr[10..12].copy_from_slice(&[0, 0]);
        assert_eq!(updated, Sum::of(&hdr).checksum());
        // And a 32-bit address rewrite.
        let old_dst = u32::from_be_bytes([hdr[16], hdr[17], hdr[18], hdr[19]]);
        hdr[16..20].copy_from_slice(&[10, 1, 2, 3]);
        let updated = incremental_update_u32(updated, old_dst, 0x0a01_0203);
        assert_eq!(updated, Sum::of(&hdr).checksum());
    }

    #[test]
    fn words_fold_once_like_the_reference() {
        let bytes: Vec<u8> = (0..40u32).map(|i| (i * 37 + 11) as u8).collect();
        let words16: u64 = bytes
            .chunks_exact(2)
            .map(|w| u64::from(u16::from_be_bytes([w[0], w[1]])))
            .sum();
        let words32: u64 = bytes
            .chunks_exact(4)
            .map(|w| u64::from(u32::from_be_bytes([w[0], w[1], w[2], w[3]])))
            .sum();
        assert_eq!(Sum::from_words(words16), reference(&bytes));
        assert_eq!(Sum::from_words(words32), reference(&bytes));
        assert_eq!(Sum::from_words(u64::MAX), Sum::from_value(0xffff));
    }

    #[test]
    fn udp_checksum_never_zero() {
        assert_eq!(Sum::from_value(0xffff).udp_checksum(), 0xffff);
        assert_eq!(Sum::from_value(0xffff).checksum(), 0);
        assert_eq!(Sum::from_value(0x1234).udp_checksum(), !0x1234);
    }
}
