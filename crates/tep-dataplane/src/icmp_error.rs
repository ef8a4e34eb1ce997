//! ICMP errors a router sends (where tep forwards whole frames): Time
//! Exceeded when a forwarded packet's TTL / hop limit runs out, and
//! Fragmentation Needed / Packet Too Big when a packet would leave its
//! tunnel larger than the path MTU, as the kernel's tunnels send them.
//!
//! RFC 1812 §4.3.2 and RFC 4443 §2.4 say when not to answer: not about an
//! ICMP error, a fragment other than the first, a packet from an address
//! that names no single host (unspecified, multicast, broadcast,
//! loopback), nor (except Packet Too Big) a packet to a multicast
//! address; and rate-limited. The error quotes as much of the packet as
//! fits in 576 bytes (IPv4) or 1280 (IPv6).

use crate::buffer::{ChecksumState, PacketId, Pool};
use crate::gtpu_reply::RateLimit;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use tep_wire::icmpv4::{self, Icmpv4Repr};
use tep_wire::icmpv6::{self, Icmpv6Repr};
use tep_wire::ip::IpProtocol;
use tep_wire::ipv4::{self, Ipv4Repr};
use tep_wire::ipv6::{self, Ipv6Repr};

/// The largest IPv4 ICMP error (RFC 1812 §4.3.2.3).
const MAX_V4: usize = 576;
/// The largest ICMPv6 error: the IPv6 minimum MTU (RFC 4443 §2.4 c).
const MAX_V6: usize = 1280;
/// TTL / hop limit of the errors.
const ERROR_TTL: u8 = 64;
/// IPv4 precedence "internetwork control", as Linux marks its errors.
const TOS_INTERNETWORK_CONTROL: u8 = 0xc0;

/// How a gateway's pipeline acts as a router.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RouterOptions {
    /// The largest outer IP packet the underlay carries (its interface's
    /// MTU); 0: not checked (a socket or a pcap file takes any size).
    pub path_mtu: u32,
    /// The source of IPv4 errors (an address of the gateway); `None`: the
    /// destination of the packet the error is about.
    pub v4: Option<Ipv4Addr>,
    /// The source of IPv6 errors, likewise.
    pub v6: Option<Ipv6Addr>,
    /// Errors sent per second, at most (a burst of as many).
    pub icmp_per_second: u32,
}

impl Default for RouterOptions {
    /// No MTU check; Linux's `icmp_msgs_per_sec` (1000).
    fn default() -> Self {
        RouterOptions {
            path_mtu: 0,
            v4: None,
            v6: None,
            icmp_per_second: 1000,
        }
    }
}

/// Which error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IcmpError {
    /// TTL / hop limit exceeded in transit.
    TimeExceeded,
    /// The packet does not fit the next link, of this MTU (IP bytes).
    TooBig(u32),
}

/// The error source of a pipeline: its options, rate limit and counts.
#[derive(Debug)]
pub(crate) struct IcmpErrors {
    pub options: RouterOptions,
    limit: RateLimit,
    /// Errors written.
    pub sent: u64,
    /// Errors not sent: not allowed about that packet, over the rate, or
    /// no buffer free.
    pub suppressed: u64,
}

impl IcmpErrors {
    pub fn new(options: RouterOptions) -> IcmpErrors {
        IcmpErrors {
            options,
            limit: RateLimit::new(options.icmp_per_second),
            sent: 0,
            suppressed: 0,
        }
    }

    /// Writes `error` about packet `id` (its IP header at `l3`, behind the
    /// link header `0..l3`) into a new buffer: the same link header with
    /// the MACs swapped (back where the packet came from), then the ICMP
    /// error to the packet's source. `None` when it must not or cannot be
    /// sent (counted in `suppressed`).
    pub fn answer(
        &mut self,
        pool: &mut Pool,
        id: PacketId,
        l3: usize,
        error: IcmpError,
        now_ns: u64,
    ) -> Option<PacketId> {
        let made = self.write(pool, id, l3, error, now_ns);
        match made {
            Some(_) => self.sent += 1,
            None => self.suppressed += 1,
        }
        made
    }

    fn write(
        &mut self,
        pool: &mut Pool,
        id: PacketId,
        l3: usize,
        error: IcmpError,
        now_ns: u64,
    ) -> Option<PacketId> {
        let data = pool.data(id);
        let ip = data.get(l3..)?;
        let about = About::parse(ip)?;
        if !about.may_answer(error) || !self.limit.allow(now_ns) {
            return None;
        }
        let out = pool.alloc()?;
        let ok = self.emit(pool, id, out, l3, &about, error);
        if !ok {
            pool.free(out);
            return None;
        }
        Some(out)
    }

    /// The error packet into `out`.
    fn emit(
        &self,
        pool: &mut Pool,
        id: PacketId,
        out: PacketId,
        l3: usize,
        about: &About,
        error: IcmpError,
    ) -> bool {
        let (ip_len, max) = if about.v6 {
            (ipv6::HEADER_LEN, MAX_V6)
        } else {
            (ipv4::HEADER_LEN, MAX_V4)
        };
        let icmp_len = icmpv4::HEADER_LEN;
        let quoted = (about.len).min(max - ip_len - icmp_len);
        let total = l3 + ip_len + icmp_len + quoted;
        let [src, dst] = pool.rooms_mut::<2>(&[id, out], 0);
        let Some(dst) = dst.get_mut(..total) else {
            return false;
        };
        let (link, rest) = dst.split_at_mut(l3);
        link.copy_from_slice(&src[..l3]);
        if l3 >= 12 {
            // Back to where the frame came from, from where it went.
            let (d, s) = link.split_at_mut(6);
            d.swap_with_slice(&mut s[..6]);
        }
        let (ip, icmp) = rest.split_at_mut(ip_len);
        icmp[icmp_len..].copy_from_slice(&src[l3..l3 + quoted]);
        let icmp_total = icmp_len + quoted;
        match (about.src, about.dst) {
            (IpAddr::V4(to), IpAddr::V4(was)) => {
                let from = self.options.v4.unwrap_or(was);
                Ipv4Repr {
                    src_addr: from,
                    dst_addr: to,
                    protocol: IpProtocol::Icmp,
                    payload_len: icmp_total,
                    ttl: ERROR_TTL,
                    dscp: TOS_INTERNETWORK_CONTROL >> 2,
                    ecn: 0,
                    ident: 0,
                    dont_frag: false,
                    more_frags: false,
                    frag_offset: 0,
                }
                .emit(&mut ipv4::Packet::new_unchecked(&mut *ip));
                let repr = match error {
                    IcmpError::TimeExceeded => Icmpv4Repr::TimeExceeded { code: 0 },
                    IcmpError::TooBig(mtu) => Icmpv4Repr::FragNeeded {
                        next_hop_mtu: mtu.min(u32::from(u16::MAX)) as u16,
                    },
                };
                let mut p = icmpv4::Packet::new_unchecked(&mut *icmp);
                repr.emit(&mut p);
                p.fill_checksum();
            }
            (IpAddr::V6(to), IpAddr::V6(was)) => {
                let from = self.options.v6.unwrap_or(was);
                Ipv6Repr {
                    src_addr: from,
                    dst_addr: to,
                    next_header: IpProtocol::Icmpv6,
                    payload_len: icmp_total,
                    hop_limit: ERROR_TTL,
                    traffic_class: 0,
                    flow_label: 0,
                }
                .emit(&mut ipv6::Packet::new_unchecked(&mut *ip));
                let repr = match error {
                    IcmpError::TimeExceeded => Icmpv6Repr::TimeExceeded { code: 0 },
                    IcmpError::TooBig(mtu) => Icmpv6Repr::PacketTooBig { mtu },
                };
                let mut p = icmpv6::Packet::new_unchecked(&mut *icmp);
                repr.emit(&mut p);
                p.fill_checksum(&from, &to);
            }
            _ => return false,
        }
        if !pool.set_len(out, total) {
            return false;
        }
        let m = pool.meta_mut(out);
        m.csum = ChecksumState::Verified;
        m.inner_l3 = l3 as u16;
        m.l3 = l3 as u16;
        true
    }
}

/// What the error is about: the offending packet's addresses and what
/// forbids answering it.
#[derive(Debug)]
struct About {
    v6: bool,
    src: IpAddr,
    dst: IpAddr,
    /// The packet's length by its header (what may be quoted), at most
    /// what the buffer holds.
    len: usize,
    /// A fragment other than the first.
    later_fragment: bool,
    /// An ICMP error itself (or ICMP whose type cannot be read).
    icmp_error: bool,
}

impl About {
    fn parse(ip: &[u8]) -> Option<About> {
        match ip.first()? >> 4 {
            4 => {
                let p = ipv4::Packet::new_checked(ip).ok()?;
                let ihl = p.header_len();
                let icmp_error = p.protocol() == IpProtocol::Icmp
                    && ip.get(ihl).is_none_or(|&t| is_icmpv4_error(t));
                Some(About {
                    v6: false,
                    src: p.src_addr().into(),
                    dst: p.dst_addr().into(),
                    len: usize::from(p.total_len()).min(ip.len()),
                    later_fragment: p.frag_offset() != 0,
                    icmp_error,
                })
            }
            6 => {
                let p = ipv6::Packet::new_checked(ip).ok()?;
                let upper = p.upper_layer().ok()?;
                let at = ipv6::HEADER_LEN + upper.offset;
                let later_fragment = upper.fragment.is_some_and(|f| f.offset != 0);
                // ICMPv6 types below 128 are errors (RFC 4443 §2.1).
                let icmp_error =
                    upper.protocol == IpProtocol::Icmpv6 && ip.get(at).is_none_or(|&t| t < 128);
                Some(About {
                    v6: true,
                    src: p.src_addr().into(),
                    dst: p.dst_addr().into(),
                    len: (ipv6::HEADER_LEN + usize::from(p.payload_len())).min(ip.len()),
                    later_fragment,
                    icmp_error,
                })
            }
            _ => None,
        }
    }

    fn may_answer(&self, error: IcmpError) -> bool {
        if self.icmp_error || self.later_fragment {
            return false;
        }
        let to_group = match self.dst {
            IpAddr::V4(d) => d.is_multicast() || d.is_broadcast(),
            IpAddr::V6(d) => d.is_multicast(),
        };
        // RFC 4443 §2.4 (e.3): Packet Too Big goes back even about
        // multicast, so that multicast senders learn the path MTU.
        if to_group && !(self.v6 && matches!(error, IcmpError::TooBig(_))) {
            return false;
        }
        match self.src {
            IpAddr::V4(s) => {
                !(s.is_unspecified() || s.is_multicast() || s.is_broadcast() || s.is_loopback())
            }
            IpAddr::V6(s) => !(s.is_unspecified() || s.is_multicast() || s.is_loopback()),
        }
    }
}

/// ICMPv4 types that report errors (RFC 1812 §4.3.2.7: never answered
/// with another error).
fn is_icmpv4_error(msg_type: u8) -> bool {
    matches!(msg_type, 3 | 4 | 5 | 11 | 12)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testpkt::{tcp, udp, Csum, Ip, Tcp};

    fn tcp4_packet(payload: &[u8]) -> Vec<u8> {
        tcp(&Ip::v4(), &Tcp::new(), payload, Csum::Full)
    }

    fn udp6_packet(payload: &[u8]) -> Vec<u8> {
        udp(&Ip::v6(), 1000, 2000, payload, Csum::Full)
    }

    fn pool() -> Pool {
        Pool::new(8, 2048)
    }

    fn frame(ip: &[u8]) -> Vec<u8> {
        let mut f = vec![2, 0, 0, 0, 0, 0xaa, 2, 0, 0, 0, 0, 0xbb];
        f.extend_from_slice(&if ip[0] >> 4 == 6 {
            [0x86, 0xdd]
        } else {
            [0x08, 0x00]
        });
        f.extend_from_slice(ip);
        f
    }

    fn load(pool: &mut Pool, bytes: &[u8]) -> PacketId {
        let id = pool.alloc().unwrap();
        assert!(pool.fill(id, bytes));
        id
    }

    #[test]
    fn time_exceeded_v4_goes_back_framed_and_quotes_the_packet() {
        let mut pool = pool();
        let ip = tcp4_packet(&[7; 1000]);
        let id = load(&mut pool, &frame(&ip));
        let mut e = IcmpErrors::new(RouterOptions {
            v4: Some(Ipv4Addr::new(192, 0, 2, 254)),
            ..RouterOptions::default()
        });
        let out = e
            .answer(&mut pool, id, 14, IcmpError::TimeExceeded, 0)
            .unwrap();
        let f = pool.data(out);
        assert_eq!(&f[..12], &[2, 0, 0, 0, 0, 0xbb, 2, 0, 0, 0, 0, 0xaa]);
        assert_eq!(f.len(), 14 + 576, "quoted up to 576 bytes of IP");
        let p = ipv4::Packet::new_checked(&f[14..]).unwrap();
        assert!(p.verify_checksum());
        assert_eq!(p.src_addr(), Ipv4Addr::new(192, 0, 2, 254));
        assert_eq!(IpAddr::from(p.dst_addr()), About::parse(&ip).unwrap().src);
        let icmp = icmpv4::Packet::new_checked(&f[34..]).unwrap();
        assert!(icmp.verify_checksum());
        assert_eq!(
            Icmpv4Repr::parse(&icmp).unwrap(),
            Icmpv4Repr::TimeExceeded { code: 0 }
        );
        assert_eq!(&f[42..], &ip[..576 - 28]);
        assert_eq!(e.sent, 1);
    }

    #[test]
    fn packet_too_big_v6_from_the_destination_when_no_address_is_set() {
        let mut pool = pool();
        let ip = udp6_packet(&[1; 1400]);
        let id = load(&mut pool, &frame(&ip));
        let mut e = IcmpErrors::new(RouterOptions::default());
        let out = e
            .answer(&mut pool, id, 14, IcmpError::TooBig(1430), 0)
            .unwrap();
        let f = pool.data(out).to_vec();
        assert_eq!(f.len(), 14 + 1280);
        let p = ipv6::Packet::new_checked(&f[14..]).unwrap();
        let about = About::parse(&ip).unwrap();
        assert_eq!(IpAddr::from(p.src_addr()), about.dst);
        assert_eq!(IpAddr::from(p.dst_addr()), about.src);
        let icmp = icmpv6::Packet::new_checked(&f[54..]).unwrap();
        assert!(icmp.verify_checksum(&p.src_addr(), &p.dst_addr()));
        assert_eq!(
            Icmpv6Repr::parse(&icmp).unwrap(),
            Icmpv6Repr::PacketTooBig { mtu: 1430 }
        );
    }

    #[test]
    fn no_error_about_an_error_a_later_fragment_or_a_group_source_and_rate_limited() {
        let mut pool = pool();
        let mut e = IcmpErrors::new(RouterOptions {
            icmp_per_second: 2,
            ..RouterOptions::default()
        });
        // An error about an error: answer one, then try to answer that.
        let ip = tcp4_packet(b"x");
        let id = load(&mut pool, &ip);
        let err = e
            .answer(&mut pool, id, 0, IcmpError::TimeExceeded, 0)
            .unwrap();
        assert!(e
            .answer(&mut pool, err, 0, IcmpError::TimeExceeded, 0)
            .is_none());
        // A later fragment.
        let mut frag = tcp4_packet(b"y");
        frag[6..8].copy_from_slice(&100u16.to_be_bytes());
        fix_v4(&mut frag);
        let id = load(&mut pool, &frag);
        assert!(e
            .answer(&mut pool, id, 0, IcmpError::TimeExceeded, 0)
            .is_none());
        // From a multicast source.
        let mut m = tcp4_packet(b"z");
        m[12..16].copy_from_slice(&[224, 0, 0, 1]);
        fix_v4(&mut m);
        let id = load(&mut pool, &m);
        assert!(e
            .answer(&mut pool, id, 0, IcmpError::TimeExceeded, 0)
            .is_none());
        assert_eq!((e.sent, e.suppressed), (1, 3));
        // The second token, then the bucket is empty until time passes.
        let id = load(&mut pool, &ip);
        assert!(e
            .answer(&mut pool, id, 0, IcmpError::TimeExceeded, 0)
            .is_some());
        assert!(e
            .answer(&mut pool, id, 0, IcmpError::TimeExceeded, 1)
            .is_none());
        assert!(e
            .answer(&mut pool, id, 0, IcmpError::TimeExceeded, 1_000_000_000)
            .is_some());
    }

    fn fix_v4(ip: &mut [u8]) {
        ip[10..12].fill(0);
        let c = tep_csum::Sum::of(&ip[..20]).checksum();
        ip[10..12].copy_from_slice(&c.to_be_bytes());
    }
}
