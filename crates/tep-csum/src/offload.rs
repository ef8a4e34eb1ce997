//! Checksum offload arithmetic: what lets a tunnel endpoint fill in an outer
//! or inner checksum without reading the payload a second time.

use crate::Sum;

/// Local checksum offload (Linux `lco_csum`, Documentation/networking/
/// checksum-offloads.rst): the outer UDP checksum of an encapsulated packet
/// whose inner transport checksum is already right (or left partial, holding
/// its pseudo-header sum).
///
/// Either way the inner transport segment, once its checksum is complete,
/// sums to the complement of its pseudo-header sum, so the payload never has
/// to be read: the outer sum is the outer pseudo-header, the bytes from the
/// outer UDP header up to the inner transport header (`outer_headers`, with
/// the UDP checksum field zero), and `!inner_pseudo`.
///
/// Returns the value for the outer UDP checksum field (never 0).
#[inline]
pub fn local_checksum_offload(outer_pseudo: Sum, outer_headers: &[u8], inner_pseudo: Sum) -> u16 {
    let inner_segment = Sum::from_value(!inner_pseudo.value()).at(outer_headers.len());
    outer_pseudo
        .add(Sum::of(outer_headers))
        .add(inner_segment)
        .udp_checksum()
}

/// What completing a remote checksum offload changed, so that a caller that
/// holds a running sum over the packet (e.g. the outer UDP sum it verified)
/// can keep it right without summing again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteChecksumDelta {
    /// The 16-bit word at the checksum offset before.
    pub old: u16,
    /// The checksum written there.
    pub new: u16,
}

impl RemoteChecksumDelta {
    /// Applies the change to a sum of a region in which the checksum word
    /// stands at `position` (its offset from the start of that region).
    #[inline]
    pub fn adjust(self, sum: Sum, position: usize) -> Sum {
        sum.sub(Sum::from_value(self.old).at(position))
            .add(Sum::from_value(self.new).at(position))
    }
}

/// Remote checksum offload completion on receive (Linux
/// `skb_remcsum_process`): the sender left the inner checksum field holding
/// only its pseudo-header sum. Given `payload_sum`, the sum of the packet
/// from the checksum start to its end (which includes that field as sent),
/// writes the finished checksum `!payload_sum` at `offset` of `packet`.
///
/// Returns `None` (and writes nothing) when `offset + 2` is past the end or
/// `offset` is odd: RCO places checksums on 16-bit boundaries only.
#[inline]
pub fn remote_checksum_complete(
    packet: &mut [u8],
    offset: usize,
    payload_sum: Sum,
) -> Option<RemoteChecksumDelta> {
    if offset & 1 == 1 {
        return None;
    }
    let field = packet.get_mut(offset..offset.checked_add(2)?)?;
    let old = u16::from_be_bytes([field[0], field[1]]);
    let new = payload_sum.checksum();
    field.copy_from_slice(&new.to_be_bytes());
    Some(RemoteChecksumDelta { old, new })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{pseudo_header_v4, reference};

    /// Builds outer IPv4 addresses + UDP + 8-byte tunnel header + inner
    /// IPv4 + inner UDP with a valid checksum, and returns (packet from the
    /// outer UDP header on, offset of the inner UDP header, inner pseudo sum).
    fn encapsulated(payload: &[u8], outer_hdr_pad: usize) -> (Vec<u8>, usize, Sum) {
        let inner_src = [192, 0, 2, 1];
        let inner_dst = [198, 51, 100, 7];
        let inner_len = (8 + payload.len()) as u16;
        let mut inner_udp = Vec::new();
        inner_udp.extend_from_slice(&1234u16.to_be_bytes());
        inner_udp.extend_from_slice(&5678u16.to_be_bytes());
        inner_udp.extend_from_slice(&inner_len.to_be_bytes());
        inner_udp.extend_from_slice(&[0, 0]);
        inner_udp.extend_from_slice(payload);
        let inner_pseudo = pseudo_header_v4(inner_src, inner_dst, 17, inner_len);
        let c = inner_pseudo.add(reference(&inner_udp)).udp_checksum();
        inner_udp[6..8].copy_from_slice(&c.to_be_bytes());

        let mut pkt = vec![0u8; 8 + outer_hdr_pad];
        for (i, b) in pkt.iter_mut().enumerate().skip(8) {
            *b = 0x40 + i as u8;
        }
        let inner_off = pkt.len();
        pkt.extend_from_slice(&inner_udp);
        let outer_len = pkt.len() as u16;
        pkt[0..2].copy_from_slice(&40000u16.to_be_bytes());
        pkt[2..4].copy_from_slice(&4789u16.to_be_bytes());
        pkt[4..6].copy_from_slice(&outer_len.to_be_bytes());
        (pkt, inner_off, inner_pseudo)
    }

    #[test]
    fn lco_equals_full_checksum() {
        let outer_pseudo_for = |len| pseudo_header_v4([10, 0, 0, 1], [10, 0, 0, 2], 17, len);
        // Header stacks of even and odd length, payloads of even and odd length.
        for pad in [8usize, 9, 28, 29] {
            for plen in [0usize, 1, 2, 57, 1400, 1401] {
                let payload: Vec<u8> = (0..plen).map(|i| (i * 7 + 3) as u8).collect();
                let (pkt, inner_off, inner_pseudo) = encapsulated(&payload, pad);
                let outer_pseudo = outer_pseudo_for(pkt.len() as u16);
                let full = outer_pseudo.add(reference(&pkt)).udp_checksum();
                let lco = local_checksum_offload(outer_pseudo, &pkt[..inner_off], inner_pseudo);
                assert_eq!(lco, full, "pad {pad} payload {plen}");
            }
        }
    }

    #[test]
    fn lco_with_partial_inner_checksum() {
        // A TSO/CHECKSUM_PARTIAL inner packet holds its pseudo-header sum.
        let payload: Vec<u8> = (0..999).map(|i| (i * 13) as u8).collect();
        let (mut pkt, inner_off, inner_pseudo) = encapsulated(&payload, 8);
        let complete = u16::from_be_bytes([pkt[inner_off + 6], pkt[inner_off + 7]]);
        pkt[inner_off + 6..inner_off + 8].copy_from_slice(&inner_pseudo.value().to_be_bytes());
        let outer_pseudo = pseudo_header_v4([10, 0, 0, 1], [10, 0, 0, 2], 17, pkt.len() as u16);
        let lco = local_checksum_offload(outer_pseudo, &pkt[..inner_off], inner_pseudo);
        // Once the inner checksum is completed, the full outer sum equals LCO.
        pkt[inner_off + 6..inner_off + 8].copy_from_slice(&complete.to_be_bytes());
        assert_eq!(lco, outer_pseudo.add(reference(&pkt)).udp_checksum());
    }

    #[test]
    fn rco_completion_equals_recompute_and_keeps_running_sum() {
        for plen in [0usize, 1, 100, 1401] {
            let payload: Vec<u8> = (0..plen).map(|i| (i * 31 + 5) as u8).collect();
            let (pkt, inner_off, inner_pseudo) = encapsulated(&payload, 8);
            let correct = pkt.clone();
            // Sender side of RCO: leave only the pseudo-header sum.
            let mut sent = pkt.clone();
            let csum_off = inner_off + 6;
            sent[csum_off..csum_off + 2].copy_from_slice(&inner_pseudo.value().to_be_bytes());
            let before = reference(&sent);
            let payload_sum = Sum::of(&sent[inner_off..]);
            let delta = remote_checksum_complete(&mut sent, csum_off, payload_sum).unwrap();
            assert_eq!(sent, correct, "payload {plen}");
            assert_eq!(delta.adjust(before, csum_off), reference(&sent));
        }
    }

    #[test]
    fn rco_rejects_out_of_range_and_odd_offsets() {
        let mut pkt = [0u8; 10];
        assert!(remote_checksum_complete(&mut pkt, 9, Sum::ZERO).is_none());
        assert!(remote_checksum_complete(&mut pkt, 10, Sum::ZERO).is_none());
        assert!(remote_checksum_complete(&mut pkt, usize::MAX - 1, Sum::ZERO).is_none());
        assert!(remote_checksum_complete(&mut pkt, 8, Sum::ZERO).is_some());
    }
}
