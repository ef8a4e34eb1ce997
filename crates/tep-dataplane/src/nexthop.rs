//! Next hops, where tep writes whole frames (gateway mode): per destination
//! address (a tunnel's remote, or an inner destination it forwards to), the
//! Ethernet header to write in front. The I/O layer fills the table from
//! the kernel's routes and neighbours and keeps it current from their
//! notifications; the nodes that write frames read it. A destination the
//! table does not know yet is noted for the I/O layer to resolve, and its
//! packets go to the kernel meanwhile ([`Output::Kernel`]), which resolves
//! the neighbour itself and delivers them.
//!
//! [`Output::Kernel`]: crate::pipeline::Output::Kernel

use crate::buffer::{ChecksumState, PacketId, Pool};
use crate::tunnel::FastHasher;
use crate::vector::PacketVector;
use core::hash::BuildHasherDefault;
use core::net::IpAddr;
use std::collections::HashMap;
use tep_wire::{ethernet, ipv4, ipv6};

/// The Ethernet header in front of a frame tep sends on an interface: the
/// next hop's MAC, the interface's own, and an 802.1Q tag where the
/// interface is a trunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkHeader {
    /// Destination MAC: the next hop's.
    pub dst: [u8; 6],
    /// Source MAC: the sending interface's.
    pub src: [u8; 6],
    /// An 802.1Q VLAN id to tag with.
    pub vlan: Option<u16>,
}

impl LinkHeader {
    /// Bytes it takes in front of the IP packet.
    pub const fn len(&self) -> usize {
        match self.vlan {
            Some(_) => ethernet::HEADER_LEN + ethernet::TAG_LEN,
            None => ethernet::HEADER_LEN,
        }
    }

    /// Always false: a header has at least its MACs.
    pub const fn is_empty(&self) -> bool {
        false
    }

    /// Writes the header into `buf` (exactly [`len`](LinkHeader::len)
    /// bytes) for an IPv4 or IPv6 packet.
    pub fn write(&self, buf: &mut [u8], v6: bool) {
        let ethertype: u16 = if v6 { 0x86dd } else { 0x0800 };
        buf[ethernet::field::DESTINATION].copy_from_slice(&self.dst);
        buf[ethernet::field::SOURCE].copy_from_slice(&self.src);
        let at = ethernet::field::ETHERTYPE.start;
        match self.vlan {
            Some(vid) => {
                buf[at..at + 2].copy_from_slice(&0x8100u16.to_be_bytes());
                buf[at + 2..at + 4].copy_from_slice(&(vid & 0x0fff).to_be_bytes());
                buf[at + 4..at + 6].copy_from_slice(&ethertype.to_be_bytes());
            }
            None => buf[at..at + 2].copy_from_slice(&ethertype.to_be_bytes()),
        }
    }
}

/// Writes `h` in front of packet `id` (an IP packet at its data start) and
/// moves every offset of its metadata along. False when the headroom is
/// spent (it holds the deepest stack tep builds: not in practice).
pub(crate) fn prepend(pool: &mut Pool, id: PacketId, h: &LinkHeader) -> bool {
    let v6 = pool.data(id).first().is_some_and(|b| b >> 4 == 6);
    let Some(b) = pool.prepend(id, h.len()) else {
        return false;
    };
    h.write(b, v6);
    let n = h.len() as u16;
    let m = pool.meta_mut(id);
    let moved = |o: u16| if o == 0 { 0 } else { o + n };
    m.l3 += n;
    m.l4 = moved(m.l4);
    m.udp_payload = moved(m.udp_payload);
    m.inner += n;
    m.inner_l3 += n;
    m.inner_l4 = moved(m.inner_l4);
    if let ChecksumState::Partial { start, offset } = m.csum {
        m.csum = ChecksumState::Partial {
            start: start + n,
            offset: offset + n,
        };
    }
    true
}

/// Destinations noted unknown between two drains, at most: a burst to many
/// new destinations is resolved over a few rounds rather than allocating.
const WANTED: usize = 64;

/// The next-hop table (see the module doc).
#[derive(Debug)]
pub struct NextHops {
    table: HashMap<IpAddr, LinkHeader, BuildHasherDefault<FastHasher>>,
    wanted: Vec<IpAddr>,
}

impl Default for NextHops {
    fn default() -> Self {
        NextHops {
            table: HashMap::default(),
            wanted: Vec::with_capacity(WANTED),
        }
    }
}

impl NextHops {
    /// Sets (`Some`) or forgets (`None`) how to reach `dst`.
    pub fn set(&mut self, dst: IpAddr, header: Option<LinkHeader>) {
        match header {
            Some(h) => {
                self.table.insert(dst, h);
            }
            None => {
                self.table.remove(&dst);
            }
        }
    }

    /// How to reach `dst`, if known.
    pub fn get(&self, dst: IpAddr) -> Option<&LinkHeader> {
        self.table.get(&dst)
    }

    /// The destinations the table knows.
    pub fn known(&self) -> impl Iterator<Item = (&IpAddr, &LinkHeader)> {
        self.table.iter()
    }

    /// Notes that a packet went to `dst` while it was unknown. No
    /// allocation: past [`WANTED`] distinct ones, later ones wait for the
    /// next round.
    pub(crate) fn want(&mut self, dst: IpAddr) {
        if self.wanted.len() < WANTED && !self.wanted.contains(&dst) {
            self.wanted.push(dst);
        }
    }

    /// Moves the destinations noted unknown since the last call to `out`,
    /// for the I/O layer to resolve.
    pub fn take_wanted(&mut self, out: &mut Vec<IpAddr>) {
        out.append(&mut self.wanted);
    }
}

/// Puts each packet of `v` (a bare IP packet: an outer reply, an ICMP
/// error) behind the Ethernet header to the next hop of its destination;
/// those without a known next hop go to `unresolved`, their destination
/// noted.
pub(crate) fn frame(
    pool: &mut Pool,
    v: &mut PacketVector,
    next_hops: &mut NextHops,
    unresolved: &mut PacketVector,
) {
    let mut keep = PacketVector::new();
    for &id in v.as_slice() {
        let dst = ip_dst(pool.data(id));
        match next_hops.get(dst).copied() {
            Some(h) if prepend(pool, id, &h) => {
                let _ = keep.push(id);
            }
            _ => {
                next_hops.want(dst);
                // At most as many as the vector held.
                let _ = unresolved.push(id);
            }
        }
    }
    *v = keep;
}

/// The destination address of the checked IP header at the start of `ip`.
pub(crate) fn ip_dst(ip: &[u8]) -> IpAddr {
    let field = |r: core::ops::Range<usize>| ip.get(r).unwrap_or_default();
    if ip[0] >> 4 == 6 {
        let a: [u8; 16] = field(ipv6::field::DST_ADDR).try_into().unwrap_or_default();
        IpAddr::from(a)
    } else {
        let a: [u8; 4] = field(ipv4::field::DST_ADDR).try_into().unwrap_or_default();
        IpAddr::from(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_with_and_without_a_tag() {
        let h = LinkHeader {
            dst: [2, 0, 0, 0, 0, 2],
            src: [2, 0, 0, 0, 0, 1],
            vlan: None,
        };
        let mut b = [0u8; 18];
        h.write(&mut b[..14], true);
        assert_eq!(&b[..14], &[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x86, 0xdd]);
        let t = LinkHeader {
            vlan: Some(100),
            ..h
        };
        assert_eq!(t.len(), 18);
        t.write(&mut b, false);
        assert_eq!(&b[12..18], &[0x81, 0x00, 0, 100, 0x08, 0x00]);
    }

    #[test]
    fn unknown_destinations_are_noted_once_and_bounded() {
        let mut n = NextHops::default();
        let a: IpAddr = "192.0.2.2".parse().unwrap();
        n.want(a);
        n.want(a);
        for i in 0..200u8 {
            n.want(IpAddr::from([10, 0, 0, i]));
        }
        let mut out = Vec::new();
        n.take_wanted(&mut out);
        assert_eq!(out.len(), WANTED);
        assert_eq!(out[0], a);
        n.take_wanted(&mut out);
        assert_eq!(out.len(), WANTED, "drained");
        assert!(n.get(a).is_none());
        let h = LinkHeader {
            dst: [1; 6],
            src: [2; 6],
            vlan: None,
        };
        n.set(a, Some(h));
        assert_eq!(n.get(a), Some(&h));
        n.set(a, None);
        assert!(n.get(a).is_none());
    }
}
