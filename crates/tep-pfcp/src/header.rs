//! The PFCP message header (TS 29.244 §7.2.2): a view over named offsets.
//!
//! ```text
//!  octet 1   version(3) spare spare FO MP S
//!  octet 2   message type
//!  3..4      message length: the octets after the first four
//!  5..12     SEID, present when S = 1 (session messages)
//!  then      sequence number (3 octets), then priority (4 bits, MP = 1) or spare
//! ```

use crate::Error;

/// The UDP port of PFCP (TS 29.244 §4.2.2).
pub const PORT: u16 = 8805;

/// The PFCP version tep speaks.
pub const VERSION: u8 = 1;

/// Field offsets, public for tests and tools that patch a header in place.
pub mod field {
    use core::ops::Range;
    pub const FLAGS: usize = 0;
    pub const MSG_TYPE: usize = 1;
    pub const LENGTH: Range<usize> = 2..4;
    /// With S = 1.
    pub const SEID: Range<usize> = 4..12;
    /// The sequence number's start without an SEID; with one it is 12.
    pub const SEQUENCE_NO_SEID: usize = 4;
    pub const SEQUENCE_SEID: usize = 12;
}

/// Octets before the length field's count starts.
pub const FIXED_LEN: usize = 4;
/// Header length of a node message (S = 0).
pub const NODE_HEADER_LEN: usize = 8;
/// Header length of a session message (S = 1).
pub const SESSION_HEADER_LEN: usize = 16;

const FLAG_S: u8 = 0x01;
const FLAG_MP: u8 = 0x02;
const FLAG_FO: u8 = 0x04;

/// A read-only view of one PFCP message (the first of a bundle).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// A view without checks.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// A view whose accessors are all safe: version 1, the header within
    /// the buffer, the length field covering the header and within the
    /// buffer. Bytes past the message (a bundled next message when FO is
    /// set) are allowed.
    pub fn new_checked(buffer: T) -> Result<Packet<T>, Error> {
        let p = Packet { buffer };
        p.check_len()?;
        Ok(p)
    }

    /// The checks of [`Packet::new_checked`]: `Truncated` below the
    /// header, `BadVersion` (checked first, on the first octet alone),
    /// `BadLength` for a length field outside the buffer or inside the
    /// header.
    pub fn check_len(&self) -> Result<(), Error> {
        let b = self.buffer.as_ref();
        let Some(&flags) = b.first() else {
            return Err(Error::Truncated);
        };
        if flags >> 5 != VERSION {
            return Err(Error::BadVersion(flags >> 5));
        }
        if b.len() < self.header_len() {
            return Err(Error::Truncated);
        }
        let total = self.total_len();
        if total > b.len() || total < self.header_len() {
            return Err(Error::BadLength);
        }
        Ok(())
    }

    /// Whether the fixed part and the sequence number are readable (for a
    /// response to a message whose length field is wrong).
    pub fn header_readable(&self) -> bool {
        self.buffer.as_ref().len() >= self.header_len()
    }

    /// The version field.
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS] >> 5
    }

    /// S: an SEID is present.
    pub fn s_flag(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS] & FLAG_S != 0
    }

    /// MP: the last header octet carries a message priority.
    pub fn mp_flag(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS] & FLAG_MP != 0
    }

    /// FO: another message follows in the datagram (§7.2.1A).
    pub fn fo_flag(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS] & FLAG_FO != 0
    }

    /// The message type.
    pub fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[field::MSG_TYPE]
    }

    /// The length field.
    pub fn length(&self) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[field::LENGTH.start], b[field::LENGTH.start + 1]])
    }

    /// The message's length in the buffer: the fixed 4 octets plus the
    /// length field.
    pub fn total_len(&self) -> usize {
        FIXED_LEN + self.length() as usize
    }

    /// 16 with an SEID, 8 without.
    pub fn header_len(&self) -> usize {
        match self.buffer.as_ref().first() {
            Some(f) if f & FLAG_S != 0 => SESSION_HEADER_LEN,
            _ => NODE_HEADER_LEN,
        }
    }

    /// The SEID when S is set.
    pub fn seid(&self) -> Option<u64> {
        if !self.s_flag() {
            return None;
        }
        let b = &self.buffer.as_ref()[field::SEID];
        let mut a = [0; 8];
        a.copy_from_slice(b);
        Some(u64::from_be_bytes(a))
    }

    fn seq_at(&self) -> usize {
        if self.s_flag() {
            field::SEQUENCE_SEID
        } else {
            field::SEQUENCE_NO_SEID
        }
    }

    /// The 24-bit sequence number.
    pub fn sequence(&self) -> u32 {
        let b = self.buffer.as_ref();
        let at = self.seq_at();
        u32::from_be_bytes([0, b[at], b[at + 1], b[at + 2]])
    }

    /// The message priority when MP is set.
    pub fn priority(&self) -> Option<u8> {
        self.mp_flag()
            .then(|| self.buffer.as_ref()[self.seq_at() + 3] >> 4)
    }

    /// The IEs: from the header to the length field's end.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..self.total_len()]
    }

    /// What follows this message in the buffer (the next bundled message).
    pub fn rest(&self) -> &[u8] {
        &self.buffer.as_ref()[self.total_len()..]
    }
}

/// Writes a header at the start of `buf` (which must hold
/// [`SESSION_HEADER_LEN`] or [`NODE_HEADER_LEN`] bytes), length 0: the
/// message emitter patches it with [`set_length`].
pub fn emit(buf: &mut Vec<u8>, msg_type: u8, seid: Option<u64>, sequence: u32, prio: Option<u8>) {
    let mut flags = VERSION << 5;
    if seid.is_some() {
        flags |= FLAG_S;
    }
    if prio.is_some() {
        flags |= FLAG_MP;
    }
    buf.push(flags);
    buf.push(msg_type);
    buf.extend_from_slice(&[0, 0]);
    if let Some(s) = seid {
        buf.extend_from_slice(&s.to_be_bytes());
    }
    buf.extend_from_slice(&sequence.to_be_bytes()[1..]);
    buf.push(prio.map_or(0, |p| p << 4));
}

/// Sets the length field of the message that starts at `start` in `buf`
/// and ends at the buffer's end.
pub fn set_length(buf: &mut [u8], start: usize) {
    let len = (buf.len() - start - FIXED_LEN).min(u16::MAX as usize) as u16;
    buf[start + 2..start + 4].copy_from_slice(&len.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_header_fields() {
        let mut b = vec![];
        emit(&mut b, 50, Some(0x0102_0304_0506_0708), 0xabcdef, Some(3));
        b.extend_from_slice(&[0, 60, 0, 0]);
        set_length(&mut b, 0);
        assert_eq!(
            b,
            [0x23, 50, 0, 16, 1, 2, 3, 4, 5, 6, 7, 8, 0xab, 0xcd, 0xef, 0x30, 0, 60, 0, 0]
        );
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.seid(), Some(0x0102_0304_0506_0708));
        assert_eq!(p.sequence(), 0xabcdef);
        assert_eq!(p.priority(), Some(3));
        assert_eq!(p.payload(), [0, 60, 0, 0]);
        assert!(p.rest().is_empty());
    }

    #[test]
    fn node_header_and_errors() {
        let b = [0x20, 1, 0, 4, 0, 0, 7, 0];
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!((p.seid(), p.sequence(), p.msg_type()), (None, 7, 1));
        assert_eq!(Packet::new_checked(&b[..7]).err(), Some(Error::Truncated));
        assert_eq!(Packet::new_checked(&[][..]).err(), Some(Error::Truncated));
        let mut v2 = b;
        v2[0] = 0x40;
        assert_eq!(
            Packet::new_checked(&v2[..]).err(),
            Some(Error::BadVersion(2))
        );
        let mut long = b;
        long[3] = 5;
        assert_eq!(Packet::new_checked(&long[..]).err(), Some(Error::BadLength));
        let mut short = b;
        short[3] = 3;
        assert_eq!(
            Packet::new_checked(&short[..]).err(),
            Some(Error::BadLength)
        );
        // A session header needs 16 octets.
        let s = [0x21, 50, 0, 4, 0, 0, 7, 0];
        assert_eq!(Packet::new_checked(&s[..]).err(), Some(Error::Truncated));
    }
}
