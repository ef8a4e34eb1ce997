//! What ICMP for IPv4 (RFC 792) and ICMPv6 (RFC 4443) share: the 8-byte
//! header (type, code, checksum, one word) and its view. [`icmpv4`] and
//! [`icmpv6`] add their message types, their MTU field and their checksum
//! (ICMPv6's also covers a pseudo-header).
//!
//! [`icmpv4`]: crate::icmpv4
//! [`icmpv6`]: crate::icmpv6

use core::marker::PhantomData;

use tep_csum::Sum;

use crate::{get_u16, get_u32, set_u16, set_u32, Error, Result};

pub(crate) mod field {
    use core::ops::Range;
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: Range<usize> = 2..4;
    /// The second word: echo ident/seq, an MTU, or unused.
    pub const REST: Range<usize> = 4..8;
    pub const ECHO_IDENT: Range<usize> = 4..6;
    pub const ECHO_SEQNO: Range<usize> = 6..8;
}

/// Length of the header (type, code, checksum, one word).
pub const HEADER_LEN: usize = 8;

/// ICMP for IPv4.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum V4 {}

/// ICMPv6.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum V6 {}

/// A read/write view of an ICMP message of version `V`
/// ([`icmpv4::Packet`](crate::icmpv4::Packet),
/// [`icmpv6::Packet`](crate::icmpv6::Packet)). The buffer must be exactly
/// the message (the IP payload): the checksum covers all of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>, V> {
    buffer: T,
    version: PhantomData<V>,
}

impl<T: AsRef<[u8]>, V> Packet<T, V> {
    /// A view without checks.
    pub const fn new_unchecked(buffer: T) -> Packet<T, V> {
        Packet {
            buffer,
            version: PhantomData,
        }
    }

    /// A view whose 8-byte header fits.
    pub fn new_checked(buffer: T) -> Result<Packet<T, V>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks the 8-byte header fits.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Message type.
    #[inline]
    pub fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[field::TYPE]
    }

    /// Code.
    #[inline]
    pub fn code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }

    /// Checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::CHECKSUM.start)
    }

    /// The second header word, whatever the type.
    #[inline]
    pub fn rest_of_header(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::REST.start)
    }

    /// Echo identifier.
    #[inline]
    pub fn echo_ident(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::ECHO_IDENT.start)
    }

    /// Echo sequence number.
    #[inline]
    pub fn echo_seq_no(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::ECHO_SEQNO.start)
    }

    /// Always 8.
    #[inline]
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// The data: echo payload, or the quoted invoking packet.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }

    /// The message's sum plus `pseudo` (zero for ICMP over IPv4).
    pub(crate) fn sum_with(&self, pseudo: Sum) -> Sum {
        pseudo.add(Sum::of(self.buffer.as_ref()))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>, V> Packet<T, V> {
    /// Sets the message type.
    #[inline]
    pub fn set_msg_type(&mut self, v: u8) {
        self.buffer.as_mut()[field::TYPE] = v;
    }

    /// Sets the code.
    #[inline]
    pub fn set_code(&mut self, v: u8) {
        self.buffer.as_mut()[field::CODE] = v;
    }

    /// Sets the checksum field.
    #[inline]
    pub fn set_checksum(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::CHECKSUM.start, v);
    }

    /// Sets the second header word.
    #[inline]
    pub fn set_rest_of_header(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), field::REST.start, v);
    }

    /// Sets the echo identifier.
    #[inline]
    pub fn set_echo_ident(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::ECHO_IDENT.start, v);
    }

    /// Sets the echo sequence number.
    #[inline]
    pub fn set_echo_seq_no(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::ECHO_SEQNO.start, v);
    }

    /// The data, writable.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[HEADER_LEN..]
    }

    /// Writes the checksum that makes the message plus `pseudo` sum to
    /// all ones.
    pub(crate) fn fill_checksum_with(&mut self, pseudo: Sum) {
        self.set_checksum(0);
        let c = self.sum_with(pseudo).checksum();
        self.set_checksum(c);
    }

    /// Byte access for the version modules' own fields.
    pub(crate) fn buffer_mut(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }
}

impl<T: AsRef<[u8]>, V> Packet<T, V> {
    /// Byte access for the version modules' own fields.
    pub(crate) fn buffer(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}
