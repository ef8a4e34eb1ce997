//! Transport pseudo-header sums (RFC 768/793 for IPv4, RFC 8200 §8.1 for IPv6).

use crate::Sum;

fn sum_words(bytes: &[u8]) -> Sum {
    // Addresses are 4 or 16 bytes: a word loop beats dispatching a kernel.
    bytes.chunks_exact(2).fold(Sum::ZERO, |s, w| {
        s.add_u16(u16::from_be_bytes([w[0], w[1]]))
    })
}

/// The IPv4 pseudo-header sum: source, destination, zero|protocol, and the
/// transport length (header plus payload).
#[inline]
pub fn pseudo_header_v4(src: [u8; 4], dst: [u8; 4], protocol: u8, length: u16) -> Sum {
    sum_words(&src)
        .add(sum_words(&dst))
        .add_u16(protocol as u16)
        .add_u16(length)
}

/// The IPv6 pseudo-header sum: source, destination, 32-bit upper-layer
/// length, three zero bytes and the next header value.
#[inline]
pub fn pseudo_header_v6(src: &[u8; 16], dst: &[u8; 16], next_header: u8, length: u32) -> Sum {
    sum_words(src)
        .add(sum_words(dst))
        .add_u32(length)
        .add_u16(next_header as u16)
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
