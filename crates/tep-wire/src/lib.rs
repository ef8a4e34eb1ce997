//! Zero-copy views and representations of the headers a UDP tunnel endpoint
//! reads and writes, in the style of smoltcp's `wire` module.
//!
//! Every format has:
//! - a `Packet<T: AsRef<[u8]>>` view with `new_unchecked`, `new_checked`,
//!   `into_inner`, field accessors over offset constants, setters when
//!   `T: AsMut<[u8]>`, and `payload()`/`payload_mut()` past the header;
//! - a `Repr` that `parse`s a checked packet into plain values and `emit`s
//!   them into a caller's buffer, without allocating.
//!
//! # Panic contract
//! `new_checked` validates every length the accessors rely on. After it
//! returns `Ok`, no accessor, `payload()`, or `Repr::parse` of that packet
//! panics, whatever the bytes. `new_unchecked` views are the caller's
//! responsibility. `Repr::emit` panics only if the caller's buffer is shorter
//! than `Repr::buffer_len()` (a programming error, not bad input).
#![forbid(unsafe_code)]

/// Declares a format's `Packet<T: AsRef<[u8]>>` view and the part of it
/// every format has alike: `new_unchecked`, `new_checked` (which runs the
/// format's own `check_len`) and `into_inner`. Each format writes its
/// `check_len`, accessors and setters beside it.
macro_rules! packet_view {
    ($(#[$doc:meta])*) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct Packet<T: AsRef<[u8]>> {
            buffer: T,
        }

        impl<T: AsRef<[u8]>> Packet<T> {
            /// A view without checks.
            #[inline]
            pub const fn new_unchecked(buffer: T) -> Packet<T> {
                Packet { buffer }
            }

            /// A view that passed [`Packet::check_len`]: every accessor of
            /// it is safe to call.
            pub fn new_checked(buffer: T) -> Result<Packet<T>> {
                let p = Self::new_unchecked(buffer);
                p.check_len()?;
                Ok(p)
            }

            /// The underlying buffer.
            pub fn into_inner(self) -> T {
                self.buffer
            }
        }
    };
}

mod error;
pub mod ip;

pub mod ethernet;
pub mod icmp;
pub mod icmpv4;
pub mod icmpv6;
pub mod ipv4;
pub mod ipv6;
pub mod tcp;
pub mod udp;

pub mod geneve;
pub mod gre;
pub mod gtpu;
pub mod gue;
pub mod vxlan;

pub use error::{Error, Result};

pub use ip::IpProtocol;

/// Reads a big-endian u16 at `at`. Callers have checked the length.
#[inline]
pub(crate) fn get_u16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// Reads a big-endian u32 at `at`. Callers have checked the length.
#[inline]
pub(crate) fn get_u32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Writes a big-endian u16 at `at`.
#[inline]
pub(crate) fn set_u16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

/// Writes a big-endian u32 at `at`.
#[inline]
pub(crate) fn set_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

/// Reading the hex test vectors under `tests/vectors/`.
#[cfg(test)]
pub(crate) mod test_vectors {
    /// Decodes hex, ignoring white space (vector files are one line;
    /// hand-written vectors group bytes by word).
    pub fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex vector"))
            .collect()
    }
}
