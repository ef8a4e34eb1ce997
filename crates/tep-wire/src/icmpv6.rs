//! ICMPv6 (RFC 4443), as far as path MTU discovery (RFC 8201) and echo
//! need it. The checksum covers the IPv6 pseudo-header (RFC 4443 §2.3).

use core::fmt;
use core::net::Ipv6Addr;

use tep_csum::Sum;

use crate::icmp::{self, V6};
use crate::{get_u32, set_u32, Result};

pub use crate::icmp::HEADER_LEN;

/// Bytes 4..8 of a Packet Too Big message.
const MTU: usize = 4;

const NEXT_HEADER_ICMPV6: u8 = 58;

/// Message type numbers.
pub mod msg_type {
    /// Destination unreachable.
    pub const DST_UNREACHABLE: u8 = 1;
    /// Packet too big.
    pub const PACKET_TOO_BIG: u8 = 2;
    /// Time exceeded.
    pub const TIME_EXCEEDED: u8 = 3;
    /// Parameter problem.
    pub const PARAM_PROBLEM: u8 = 4;
    /// Echo request.
    pub const ECHO_REQUEST: u8 = 128;
    /// Echo reply.
    pub const ECHO_REPLY: u8 = 129;
}

/// A read/write view of an ICMPv6 message (the upper-layer payload,
/// whole): the shared [`icmp::Packet`] with the Packet Too Big MTU and a
/// checksum that also covers the IPv6 pseudo-header.
pub type Packet<T> = icmp::Packet<T, V6>;

impl<T: AsRef<[u8]>> icmp::Packet<T, V6> {
    /// MTU of a Packet Too Big message (RFC 4443 §3.2).
    #[inline]
    pub fn mtu(&self) -> u32 {
        get_u32(self.buffer(), MTU)
    }

    /// Whether pseudo-header plus message sum to all ones.
    #[inline]
    pub fn verify_checksum(&self, src: &Ipv6Addr, dst: &Ipv6Addr) -> bool {
        self.sum_with(pseudo(src, dst, self.buffer().len()))
            .verifies()
    }
}

fn pseudo(src: &Ipv6Addr, dst: &Ipv6Addr, len: usize) -> Sum {
    tep_csum::pseudo_header_v6(&src.octets(), &dst.octets(), NEXT_HEADER_ICMPV6, len as u32)
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> icmp::Packet<T, V6> {
    /// Sets the Packet Too Big MTU.
    #[inline]
    pub fn set_mtu(&mut self, v: u32) {
        set_u32(self.buffer_mut(), MTU, v);
    }

    /// Computes and writes the checksum over pseudo-header and buffer.
    #[inline]
    pub fn fill_checksum(&mut self, src: &Ipv6Addr, dst: &Ipv6Addr) {
        let p = pseudo(src, dst, self.buffer().len());
        self.fill_checksum_with(p);
    }
}

/// The ICMPv6 messages a tunnel endpoint acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Icmpv6Repr {
    /// Type 128.
    EchoRequest {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
    },
    /// Type 129.
    EchoReply {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
    },
    /// Type 2: the path MTU signal. The code is sent 0 and ignored on
    /// receipt (RFC 4443 §3.2).
    PacketTooBig {
        /// MTU of the next-hop link.
        mtu: u32,
    },
    /// Type 1.
    DstUnreachable {
        /// Code.
        code: u8,
    },
    /// Type 3.
    TimeExceeded {
        /// 0 hop limit exceeded, 1 reassembly time exceeded.
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

impl Icmpv6Repr {
    /// Parses a checked message. The checksum is not verified here.
    /// Echo messages with a non-zero code are `Other`.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Icmpv6Repr> {
        packet.check_len()?;
        let (ident, seq_no) = (packet.echo_ident(), packet.echo_seq_no());
        Ok(match (packet.msg_type(), packet.code()) {
            (msg_type::ECHO_REQUEST, 0) => Icmpv6Repr::EchoRequest { ident, seq_no },
            (msg_type::ECHO_REPLY, 0) => Icmpv6Repr::EchoReply { ident, seq_no },
            (msg_type::PACKET_TOO_BIG, _) => Icmpv6Repr::PacketTooBig { mtu: packet.mtu() },
            (msg_type::DST_UNREACHABLE, code) => Icmpv6Repr::DstUnreachable { code },
            (msg_type::TIME_EXCEEDED, code) => Icmpv6Repr::TimeExceeded { code },
            (msg_type, code) => Icmpv6Repr::Other {
                msg_type,
                code,
                rest: packet.rest_of_header(),
            },
        })
    }

    /// Bytes [`Icmpv6Repr::emit`] writes: 8.
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Same as [`Icmpv6Repr::header_len`].
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header with a zero checksum: the checksum covers the
    /// payload, so write it, then call [`Packet::fill_checksum`].
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        let (t, c, rest) = match *self {
            Icmpv6Repr::EchoRequest { ident, seq_no } => (
                msg_type::ECHO_REQUEST,
                0,
                (ident as u32) << 16 | seq_no as u32,
            ),
            Icmpv6Repr::EchoReply { ident, seq_no } => (
                msg_type::ECHO_REPLY,
                0,
                (ident as u32) << 16 | seq_no as u32,
            ),
            Icmpv6Repr::PacketTooBig { mtu } => (msg_type::PACKET_TOO_BIG, 0, mtu),
            Icmpv6Repr::DstUnreachable { code } => (msg_type::DST_UNREACHABLE, code, 0),
            Icmpv6Repr::TimeExceeded { code } => (msg_type::TIME_EXCEEDED, code, 0),
            Icmpv6Repr::Other {
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

impl fmt::Display for Icmpv6Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Icmpv6Repr::EchoRequest { ident, seq_no } => {
                write!(f, "icmpv6 echo request id {ident} seq {seq_no}")
            }
            Icmpv6Repr::EchoReply { ident, seq_no } => {
                write!(f, "icmpv6 echo reply id {ident} seq {seq_no}")
            }
            Icmpv6Repr::PacketTooBig { mtu } => write!(f, "icmpv6 packet too big mtu {mtu}"),
            Icmpv6Repr::DstUnreachable { code } => write!(f, "icmpv6 unreachable code {code}"),
            Icmpv6Repr::TimeExceeded { code } => write!(f, "icmpv6 time exceeded code {code}"),
            Icmpv6Repr::Other { msg_type, code, .. } => {
                write!(f, "icmpv6 type {msg_type} code {code}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;
    use crate::{ipv6, udp, IpProtocol};
    use proptest::prelude::*;

    use crate::test_vectors::hex;

    /// First packet of kernel-vxlan-csum.pcap (140 bytes): inner MLDv2 report.
    const KERNEL_VXLAN_FULL: &str = "ae8df6a408e5027ea0b0bef708004500007e5c9e00004011083f0ac800010ac80002e3c912b5006a160e0800000000002a00333300000016e6cfd361dcee86dd600000000024000100000000000000000000000000000000ff0200000000000000000000000000163a000502000001008f00923a0000000104000000ff0200000000000000000001ff61dcee";

    #[test]
    fn kernel_mld_checksum() {
        let bytes = hex(KERNEL_VXLAN_FULL);
        let ip = ipv6::Packet::new_checked(&bytes[64..]).unwrap();
        let up = ip.upper_layer().unwrap();
        assert_eq!(up.protocol, IpProtocol::Icmpv6);
        let msg = &ip.payload()[up.offset..];
        let p = Packet::new_checked(msg).unwrap();
        assert_eq!((p.msg_type(), p.code(), p.checksum()), (143, 0, 0x923a));
        assert!(p.verify_checksum(&ip.src_addr(), &ip.dst_addr()));
        assert!(!p.verify_checksum(&ip.dst_addr(), &ip.dst_addr()));
        assert_eq!(
            Icmpv6Repr::parse(&p),
            Ok(Icmpv6Repr::Other {
                msg_type: 143,
                code: 0,
                rest: 1
            })
        );
    }

    #[test]
    fn packet_too_big_vector() {
        let bytes = hex(include_str!("../tests/vectors/base_icmpv6_ptb.hex"));
        let ip = ipv6::Packet::new_checked(&bytes[..]).unwrap();
        let (src, dst) = (ip.src_addr(), ip.dst_addr());
        let msg = ip.payload();
        let p = Packet::new_checked(msg).unwrap();
        assert_eq!((p.msg_type(), p.code(), p.checksum()), (2, 0, 0x2549));
        assert_eq!(p.mtu(), 1280);
        assert!(p.verify_checksum(&src, &dst));
        let r = Icmpv6Repr::parse(&p).unwrap();
        assert_eq!(r, Icmpv6Repr::PacketTooBig { mtu: 1280 });
        assert_eq!(r.to_string(), "icmpv6 packet too big mtu 1280");
        // The quote: the invoking IPv6 header and its UDP header.
        let quoted = ipv6::Packet::new_unchecked(p.payload());
        assert_eq!(quoted.payload_len(), 1452);
        assert_eq!(quoted.next_header(), IpProtocol::Udp);
        let qudp = udp::Packet::new_unchecked(&p.payload()[40..]);
        assert_eq!((qudp.src_port(), qudp.dst_port()), (40000, 4789));
        let mut out = msg.to_vec();
        out[..8].fill(0xee);
        let mut q = Packet::new_unchecked(&mut out[..]);
        r.emit(&mut q);
        q.fill_checksum(&src, &dst);
        assert_eq!(out, msg);
        for n in 0..HEADER_LEN {
            assert_eq!(Packet::new_checked(&msg[..n]).err(), Some(Error::Truncated));
        }
    }

    #[test]
    fn echo() {
        let (s, d) = (Ipv6Addr::LOCALHOST, "fe80::1".parse().unwrap());
        let mut b = [0u8; 13];
        let mut p = Packet::new_unchecked(&mut b[..]);
        Icmpv6Repr::EchoReply {
            ident: 1,
            seq_no: 2,
        }
        .emit(&mut p);
        p.payload_mut().copy_from_slice(b"pong!");
        p.fill_checksum(&s, &d);
        let p = Packet::new_checked(&b[..]).unwrap();
        assert!(p.verify_checksum(&s, &d));
        assert_eq!((p.echo_ident(), p.echo_seq_no()), (1, 2));
        assert_eq!(
            Icmpv6Repr::parse(&p).unwrap().to_string(),
            "icmpv6 echo reply id 1 seq 2"
        );
    }

    fn repr() -> impl Strategy<Value = Icmpv6Repr> {
        prop_oneof![
            any::<(u16, u16)>()
                .prop_map(|(ident, seq_no)| Icmpv6Repr::EchoRequest { ident, seq_no }),
            any::<(u16, u16)>().prop_map(|(ident, seq_no)| Icmpv6Repr::EchoReply { ident, seq_no }),
            any::<u32>().prop_map(|mtu| Icmpv6Repr::PacketTooBig { mtu }),
            any::<u8>().prop_map(|code| Icmpv6Repr::DstUnreachable { code }),
            any::<u8>().prop_map(|code| Icmpv6Repr::TimeExceeded { code }),
            (any::<u8>(), any::<u8>(), any::<u32>())
                .prop_filter("not a named type", |(t, c, _)| {
                    !matches!((*t, *c), (128 | 129, 0) | (1..=3, _))
                })
                .prop_map(|(msg_type, code, rest)| Icmpv6Repr::Other {
                    msg_type,
                    code,
                    rest
                }),
        ]
    }

    proptest! {
        #[test]
        fn round_trip(r in repr(), data in proptest::collection::vec(any::<u8>(), 0..40),
                      s in any::<[u8; 16]>(), d in any::<[u8; 16]>()) {
            let (s, d) = (Ipv6Addr::from(s), Ipv6Addr::from(d));
            let mut buf = vec![0u8; HEADER_LEN + data.len()];
            let mut p = Packet::new_unchecked(&mut buf[..]);
            r.emit(&mut p);
            p.payload_mut().copy_from_slice(&data);
            p.fill_checksum(&s, &d);
            let p = Packet::new_checked(&buf[..]).unwrap();
            prop_assert!(p.verify_checksum(&s, &d));
            prop_assert_eq!(Icmpv6Repr::parse(&p).unwrap(), r);
        }

        #[test]
        fn arbitrary_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..20)) {
            if let Ok(p) = Packet::new_checked(&b[..]) {
                let _ = (p.msg_type(), p.code(), p.checksum(), p.mtu(), p.echo_ident());
                let _ = (p.echo_seq_no(), p.payload().len());
                let _ = p.verify_checksum(&Ipv6Addr::LOCALHOST, &Ipv6Addr::LOCALHOST);
                let _ = Icmpv6Repr::parse(&p).map(|r| r.to_string());
            }
        }
    }
}
