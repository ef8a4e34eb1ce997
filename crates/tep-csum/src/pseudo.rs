//! Transport pseudo-header sums (RFC 768/793 for IPv4, RFC 8200 §8.1 for IPv6).

use crate::Sum;

/// The big-endian 32-bit words of an address added into a u64: no carry is
/// folded until the end, so the adds of a pseudo-header do not wait on each
/// other (folding after every 16-bit word made the IPv6 pseudo-header a
/// chain of 16 dependent add-and-fold steps). 2^16 = 1 modulo 0xffff, so
/// [`Sum::from_words`] of this sum is the one's-complement sum of the 16-bit words.
#[inline]
fn wide<const N: usize>(bytes: &[u8; N]) -> u64 {
    bytes
        .chunks_exact(4)
        .map(|w| u32::from_be_bytes([w[0], w[1], w[2], w[3]]) as u64)
        .sum()
}

/// The IPv4 pseudo-header sum: source, destination, zero|protocol, and the
/// transport length (header plus payload).
#[inline]
pub fn pseudo_header_v4(src: [u8; 4], dst: [u8; 4], protocol: u8, length: u16) -> Sum {
    Sum::from_words(wide(&src) + wide(&dst) + protocol as u64 + length as u64)
}

/// The IPv6 pseudo-header sum: source, destination, 32-bit upper-layer
/// length, three zero bytes and the next header value.
#[inline]
pub fn pseudo_header_v6(src: &[u8; 16], dst: &[u8; 16], next_header: u8, length: u32) -> Sum {
    Sum::from_words(wide(src) + wide(dst) + length as u64 + next_header as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference;

    #[test]
    fn v4_matches_laid_out_header() {
        let (src, dst) = ([10, 200, 0, 1], [10, 200, 0, 2]);
        let mut laid = Vec::new();
        laid.extend_from_slice(&src);
        laid.extend_from_slice(&dst);
        laid.extend_from_slice(&[0, 17, 0x00, 0x6a]);
        assert_eq!(pseudo_header_v4(src, dst, 17, 0x6a), reference(&laid));
    }

    #[test]
    fn v6_matches_laid_out_header() {
        let src = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        let dst = [
            0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x12, 0x34, 0, 0, 0, 0, 0xab, 0xcd,
        ];
        let mut laid = Vec::new();
        laid.extend_from_slice(&src);
        laid.extend_from_slice(&dst);
        laid.extend_from_slice(&0x0001_0010u32.to_be_bytes());
        laid.extend_from_slice(&[0, 0, 0, 6]);
        assert_eq!(
            pseudo_header_v6(&src, &dst, 6, 0x0001_0010),
            reference(&laid)
        );
    }
}
