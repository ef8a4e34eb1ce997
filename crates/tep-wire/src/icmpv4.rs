//! ICMP for IPv4 (RFC 792), as far as path MTU discovery (RFC 1191) and
//! echo need it.

use core::fmt;

use tep_csum::Sum;

use crate::icmp::{self, V4};
use crate::{get_u16, set_u16, Result};

pub use crate::icmp::HEADER_LEN;

/// Bytes 6..8 of a "fragmentation needed" message.
const NEXT_HOP_MTU: usize = 6;

/// Message type numbers.
pub mod msg_type {
    /// Echo reply.
    pub const ECHO_REPLY: u8 = 0;
    /// Destination unreachable.
    pub const DST_UNREACHABLE: u8 = 3;
    /// Echo request.
    pub const ECHO_REQUEST: u8 = 8;
    /// Time exceeded.
    pub const TIME_EXCEEDED: u8 = 11;
}

/// Destination unreachable code 4: fragmentation needed and DF set.
pub const CODE_FRAG_NEEDED: u8 = 4;

/// A read/write view of an ICMPv4 message (the IP payload, whole): the
/// shared [`icmp::Packet`] with the next-hop MTU and a checksum over the
/// message alone.
pub type Packet<T> = icmp::Packet<T, V4>;

impl<T: AsRef<[u8]>> icmp::Packet<T, V4> {
    /// Next-hop MTU of a "fragmentation needed" message (RFC 1191 §4);
    /// 0 from routers older than RFC 1191.
    #[inline]
    pub fn next_hop_mtu(&self) -> u16 {
        get_u16(self.buffer(), NEXT_HOP_MTU)
    }

    /// Whether the whole message sums to all ones.
    #[inline]
    pub fn verify_checksum(&self) -> bool {
        self.sum_with(Sum::ZERO).verifies()
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> icmp::Packet<T, V4> {
    /// Sets the next-hop MTU.
    #[inline]
    pub fn set_next_hop_mtu(&mut self, v: u16) {
        set_u16(self.buffer_mut(), NEXT_HOP_MTU, v);
    }

    /// Computes and writes the checksum over the whole buffer.
    #[inline]
    pub fn fill_checksum(&mut self) {
        self.fill_checksum_with(Sum::ZERO);
    }
}

/// The ICMPv4 messages a tunnel endpoint acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Icmpv4Repr {
    /// Type 8.
    EchoRequest {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
    },
    /// Type 0.
    EchoReply {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
    },
    /// Type 3 code 4: the path MTU signal.
    FragNeeded {
        /// Next-hop MTU (0 if the router predates RFC 1191).
        next_hop_mtu: u16,
    },
    /// Type 3, any other code.
    DstUnreachable {
        /// Code (never 4).
        code: u8,
    },
    /// Type 11.
    TimeExceeded {
        /// 0 TTL exceeded in transit, 1 reassembly time exceeded.
        code: u8,
    },
    /// Anything else, with its second header word.
    Other {
        /// Type.
        msg_type: u8,
        /// Code.
        code: u8,
        /// Bytes 4–7.
        rest: u32,
    },
}

impl Icmpv4Repr {
    /// Parses a checked message. The checksum is not verified here.
    /// Echo messages with a non-zero code are `Other`.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Icmpv4Repr> {
        packet.check_len()?;
        let (ident, seq_no) = (packet.echo_ident(), packet.echo_seq_no());
        Ok(match (packet.msg_type(), packet.code()) {
            (msg_type::ECHO_REQUEST, 0) => Icmpv4Repr::EchoRequest { ident, seq_no },
            (msg_type::ECHO_REPLY, 0) => Icmpv4Repr::EchoReply { ident, seq_no },
            (msg_type::DST_UNREACHABLE, CODE_FRAG_NEEDED) => Icmpv4Repr::FragNeeded {
                next_hop_mtu: packet.next_hop_mtu(),
            },
            (msg_type::DST_UNREACHABLE, code) => Icmpv4Repr::DstUnreachable { code },
            (msg_type::TIME_EXCEEDED, code) => Icmpv4Repr::TimeExceeded { code },
            (msg_type, code) => Icmpv4Repr::Other {
                msg_type,
                code,
                rest: packet.rest_of_header(),
            },
        })
    }

    /// Bytes [`Icmpv4Repr::emit`] writes: 8.
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Same as [`Icmpv4Repr::header_len`].
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header with a zero checksum: the checksum covers the
    /// payload, so write it, then call [`Packet::fill_checksum`].
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        let (t, c, rest) = match *self {
            Icmpv4Repr::EchoRequest { ident, seq_no } => (
                msg_type::ECHO_REQUEST,
                0,
                (ident as u32) << 16 | seq_no as u32,
            ),
            Icmpv4Repr::EchoReply { ident, seq_no } => (
                msg_type::ECHO_REPLY,
                0,
                (ident as u32) << 16 | seq_no as u32,
            ),
            Icmpv4Repr::FragNeeded { next_hop_mtu } => (
                msg_type::DST_UNREACHABLE,
                CODE_FRAG_NEEDED,
                next_hop_mtu as u32,
            ),
            Icmpv4Repr::DstUnreachable { code } => (msg_type::DST_UNREACHABLE, code, 0),
            Icmpv4Repr::TimeExceeded { code } => (msg_type::TIME_EXCEEDED, code, 0),
            Icmpv4Repr::Other {
                msg_type,
                code,
                rest,
            } => (msg_type, code, rest),
        };
        packet.set_msg_type(t);
        packet.set_code(c);
        packet.set_checksum(0);
        packet.set_rest_of_header(rest);
    }
}

impl fmt::Display for Icmpv4Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Icmpv4Repr::EchoRequest { ident, seq_no } => {
                write!(f, "icmp echo request id {ident} seq {seq_no}")
            }
            Icmpv4Repr::EchoReply { ident, seq_no } => {
                write!(f, "icmp echo reply id {ident} seq {seq_no}")
            }
            Icmpv4Repr::FragNeeded { next_hop_mtu } => {
                write!(f, "icmp frag needed mtu {next_hop_mtu}")
            }
            Icmpv4Repr::DstUnreachable { code } => write!(f, "icmp unreachable code {code}"),
            Icmpv4Repr::TimeExceeded { code } => write!(f, "icmp time exceeded code {code}"),
            Icmpv4Repr::Other { msg_type, code, .. } => {
                write!(f, "icmp type {msg_type} code {code}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;
    use crate::{ipv4, udp, IpProtocol};
    use proptest::prelude::*;

    use crate::test_vectors::hex;

    #[test]
    fn frag_needed_vector() {
        let bytes = hex(include_str!("../tests/vectors/base_icmpv4_frag_needed.hex"));
        let ip = ipv4::Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(ip.protocol(), IpProtocol::Icmp);
        let msg = ip.payload();
        let p = Packet::new_checked(msg).unwrap();
        assert_eq!((p.msg_type(), p.code()), (3, 4));
        assert_eq!(p.checksum(), 0xe994);
        assert!(p.verify_checksum());
        assert_eq!(p.next_hop_mtu(), 1400);
        let r = Icmpv4Repr::parse(&p).unwrap();
        assert_eq!(r, Icmpv4Repr::FragNeeded { next_hop_mtu: 1400 });
        assert_eq!(r.to_string(), "icmp frag needed mtu 1400");
        // The quote: the invoking IPv4 header and its UDP header.
        let quoted = ipv4::Packet::new_unchecked(p.payload());
        assert_eq!(quoted.total_len(), 1500);
        assert!(quoted.dont_frag());
        assert_eq!(quoted.protocol(), IpProtocol::Udp);
        let qudp = udp::Packet::new_unchecked(&p.payload()[20..]);
        assert_eq!((qudp.src_port(), qudp.dst_port()), (40000, 4789));
        // emit + fill reproduces the message.
        let mut out = msg.to_vec();
        out[..8].fill(0xee);
        let mut q = Packet::new_unchecked(&mut out[..]);
        r.emit(&mut q);
        q.fill_checksum();
        assert_eq!(out, msg);
        for n in 0..HEADER_LEN {
            assert_eq!(Packet::new_checked(&msg[..n]).err(), Some(Error::Truncated));
        }
    }

    #[test]
    fn echo_and_others() {
        let mut b = [0u8; 12];
        let mut p = Packet::new_unchecked(&mut b[..]);
        Icmpv4Repr::EchoRequest {
            ident: 0x1234,
            seq_no: 7,
        }
        .emit(&mut p);
        p.payload_mut().copy_from_slice(b"ping");
        p.fill_checksum();
        let p = Packet::new_checked(&b[..]).unwrap();
        assert!(p.verify_checksum());
        assert_eq!((p.echo_ident(), p.echo_seq_no()), (0x1234, 7));
        assert_eq!(p.payload(), b"ping");
        assert_eq!(
            Icmpv4Repr::parse(&p).unwrap().to_string(),
            "icmp echo request id 4660 seq 7"
        );
        b[0] = 11;
        b[1] = 1;
        let p = Packet::new_checked(&b[..]).unwrap();
        assert!(!p.verify_checksum());
        assert_eq!(
            Icmpv4Repr::parse(&p),
            Ok(Icmpv4Repr::TimeExceeded { code: 1 })
        );
        b[0] = 8;
        assert!(matches!(
            Icmpv4Repr::parse(&Packet::new_unchecked(&b[..])),
            Ok(Icmpv4Repr::Other {
                msg_type: 8,
                code: 1,
                rest: 0x1234_0007
            })
        ));
    }

    fn repr() -> impl Strategy<Value = Icmpv4Repr> {
        prop_oneof![
            any::<(u16, u16)>()
                .prop_map(|(ident, seq_no)| Icmpv4Repr::EchoRequest { ident, seq_no }),
            any::<(u16, u16)>().prop_map(|(ident, seq_no)| Icmpv4Repr::EchoReply { ident, seq_no }),
            any::<u16>().prop_map(|next_hop_mtu| Icmpv4Repr::FragNeeded { next_hop_mtu }),
            any::<u8>()
                .prop_filter("not 4", |c| *c != CODE_FRAG_NEEDED)
                .prop_map(|code| Icmpv4Repr::DstUnreachable { code }),
            any::<u8>().prop_map(|code| Icmpv4Repr::TimeExceeded { code }),
            (any::<u8>(), any::<u8>(), any::<u32>())
                .prop_filter("not a named type", |(t, c, _)| {
                    !matches!((*t, *c), (0 | 8, 0) | (3 | 11, _))
                })
                .prop_map(|(msg_type, code, rest)| Icmpv4Repr::Other {
                    msg_type,
                    code,
                    rest
                }),
        ]
    }

    proptest! {
        #[test]
        fn round_trip(r in repr(), data in proptest::collection::vec(any::<u8>(), 0..40)) {
            let mut buf = vec![0u8; HEADER_LEN + data.len()];
            let mut p = Packet::new_unchecked(&mut buf[..]);
            r.emit(&mut p);
            p.payload_mut().copy_from_slice(&data);
            p.fill_checksum();
            let p = Packet::new_checked(&buf[..]).unwrap();
            prop_assert!(p.verify_checksum());
            prop_assert_eq!(Icmpv4Repr::parse(&p).unwrap(), r);
        }

        #[test]
        fn arbitrary_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..20)) {
            if let Ok(p) = Packet::new_checked(&b[..]) {
                let _ = (p.msg_type(), p.code(), p.checksum(), p.next_hop_mtu(), p.echo_ident());
                let _ = (p.echo_seq_no(), p.payload().len(), p.verify_checksum());
                let _ = Icmpv4Repr::parse(&p).map(|r| r.to_string());
            }
        }
    }
}
