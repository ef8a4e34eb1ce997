//! IP neighbours (ARP and ND entries) of an EVPN VTEP's bridge: the
//! MAC+IP bindings the routing daemon exchanges as type-2 routes with an
//! IP. zebra treats a VLAN-unaware bridge as the VNI's SVI: a valid
//! neighbour on it whose MAC is a local MAC of the bridge is advertised
//! ([`bridge_neigh_set`] writes one, [`bridge_neigh_del`] withdraws it), and
//! what the fabric advertises zebra installs there as NTF_EXT_LEARNED
//! entries, read by [`BridgeNeighWatch`] (a dump, then notifications).
//!
//! Like the forwarding entries (`bridge.rs`), the entries read carry what
//! BGP peers sent: each message is decoded defensively, one that does not
//! decode is skipped and counted.

use std::io;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, RawFd};

use netlink_packet_core::{Parseable, NLM_F_ACK, NLM_F_CREATE, NLM_F_REPLACE};
use netlink_packet_route::neighbour::{
    NeighbourAttribute, NeighbourHeader, NeighbourMessage, NeighbourState,
};
use netlink_packet_route::route::RouteProtocol;
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::Socket;

use super::bridge::Messages;
use super::{
    neighbour_ip, neighbour_message, recv_notification, subscribe, Counts, Notified, Rtnl,
    POLL_BUDGET, RECV_BUF,
};
use crate::sys::context;

/// One ARP or ND entry, as the kernel describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BridgeNeigh {
    /// The device it is on.
    pub ifindex: u32,
    /// The neighbour's address.
    pub ip: IpAddr,
    /// Its MAC; None while unresolved (or not 6 bytes long).
    pub mac: Option<[u8; 6]>,
    /// `ndm_state` (NUD_*).
    pub state: u16,
    /// `ndm_flags` (NTF_*): 0x10 NTF_EXT_LEARNED for the routing daemon's.
    pub flags: u8,
    /// NDA_PROTOCOL, who wrote it: [`PROTO_TEP`] for tep's, 11 for zebra's.
    pub proto: Option<u8>,
}

impl BridgeNeigh {
    /// Installed by a control plane (zebra's remote MAC+IP).
    pub fn ext_learned(&self) -> bool {
        self.flags & NTF_EXT_LEARNED != 0
    }

    /// Written by [`bridge_neigh_set`] (this tep or an earlier one).
    pub fn by_tep(&self) -> bool {
        self.proto == Some(PROTO_TEP) && !self.ext_learned()
    }
}

/// A neighbour that appeared or changed, or went away.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BridgeNeighEvent {
    /// RTM_NEWNEIGH: added or changed (as it is now).
    New(BridgeNeigh),
    /// RTM_DELNEIGH: removed (as it was).
    Del(BridgeNeigh),
}

const NTF_EXT_LEARNED: u8 = 0x10;

/// The NDA_PROTOCOL tep marks its entries with (`ip neigh` shows `proto
/// 116`; unassigned in iproute2's rt_protos), so that a restarted tep
/// recognises what an earlier one left on a bridge that outlived it.
pub const PROTO_TEP: u8 = 116;

/// The state tep writes: NUD_PERMANENT, which the kernel never probes,
/// ages nor garbage-collects (a noarp entry it may collect past
/// gc_thresh1), and which zebra takes as a valid local neighbour.
const PERMANENT: u16 = libc::NUD_PERMANENT;

/// `ip neigh replace IP lladdr MAC dev IFINDEX nud permanent`, in the
/// calling thread's namespace. Replacing, so a write twice or a new MAC is
/// no error.
pub fn bridge_neigh_set(ifindex: u32, ip: IpAddr, mac: [u8; 6]) -> io::Result<()> {
    let mut msg = neighbour_message(ifindex, ip);
    msg.header.state = NeighbourState::from(PERMANENT);
    msg.attributes
        .push(NeighbourAttribute::LinkLayerAddress(mac.to_vec()));
    msg.attributes
        .push(NeighbourAttribute::Protocol(RouteProtocol::from(PROTO_TEP)));
    Rtnl::open()?
        .request(
            RouteNetlinkMessage::NewNeighbour(msg),
            NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE,
            |_| {},
        )
        .map_err(|e| context(e, format_args!("ip neigh replace {ip} dev {ifindex}")))
}

/// `ip neigh del IP dev IFINDEX`; false when there was no such entry.
pub fn bridge_neigh_del(ifindex: u32, ip: IpAddr) -> io::Result<bool> {
    let msg = neighbour_message(ifindex, ip);
    match Rtnl::open()?.request(RouteNetlinkMessage::DelNeighbour(msg), NLM_F_ACK, |_| {}) {
        Ok(()) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
        Err(e) => Err(context(e, format_args!("ip neigh del {ip} dev {ifindex}"))),
    }
}

/// The ARP and ND tables' changes: a socket subscribed to RTNLGRP_NEIGH
/// that keeps the AF_INET and AF_INET6 messages (the bridge forwarding
/// entries of the same group are [`FdbWatch`]'s; here they are skipped and
/// counted). Create it, then [`BridgeNeighWatch::dump`], then
/// [`BridgeNeighWatch::poll`] until [`FdbWatch::is_overrun`](super::FdbWatch::is_overrun) says to dump
/// again.
pub struct BridgeNeighWatch {
    sock: Socket,
    buf: Vec<u8>,
    counts: Counts,
}

impl BridgeNeighWatch {
    /// Subscribes, in the calling thread's namespace. Non-blocking.
    pub fn new() -> io::Result<BridgeNeighWatch> {
        let sock = subscribe(&[libc::RTNLGRP_NEIGH])?;
        Ok(BridgeNeighWatch {
            sock,
            buf: Vec::with_capacity(RECV_BUF),
            counts: Counts::default(),
        })
    }

    /// Appends every IPv4 and IPv6 neighbour of the namespace (`ip neigh
    /// show`) to `out`, over a socket of its own. Blocks until the dump
    /// ends.
    pub fn dump(&mut self, out: &mut Vec<BridgeNeigh>) -> io::Result<()> {
        let mut rtnl = Rtnl::open()?;
        for family in [AddressFamily::Inet, AddressFamily::Inet6] {
            let mut msg = NeighbourMessage::default();
            msg.header.family = family;
            let mut events = Vec::new();
            rtnl.dump(
                RouteNetlinkMessage::GetNeighbour(msg),
                "ip neigh dump",
                |kind, payload| self.message(kind, payload, &mut events),
            )?;
            out.extend(events.into_iter().filter_map(|e| match e {
                BridgeNeighEvent::New(n) => Some(n),
                BridgeNeighEvent::Del(_) => None,
            }));
        }
        Ok(())
    }

    /// Appends to `out` the changes queued so far, without blocking; at
    /// most [`POLL_BUDGET`] datagrams a call. An error for which
    /// [`FdbWatch::is_overrun`](super::FdbWatch::is_overrun) holds means changes were lost: dump again.
    pub fn poll(&mut self, out: &mut Vec<BridgeNeighEvent>) -> io::Result<()> {
        for _ in 0..POLL_BUDGET {
            match recv_notification(&self.sock, &mut self.buf)? {
                Notified::Datagram => {
                    let buf = std::mem::take(&mut self.buf);
                    self.datagram(&buf, out);
                    self.buf = buf;
                }
                Notified::Empty => return Ok(()),
                Notified::Truncated(_) => {
                    self.counts.count_malformed();
                    return Err(io::Error::from_raw_os_error(libc::ENOBUFS));
                }
            }
        }
        Ok(())
    }

    /// The notification socket, readable when [`BridgeNeighWatch::poll`]
    /// has something to read.
    pub fn fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }

    /// Messages not turned into neighbours: forwarding entries, other
    /// message types, malformed ones.
    pub fn skipped(&self) -> u64 {
        self.counts.skipped
    }

    /// Of [`BridgeNeighWatch::skipped`], those that did not decode.
    pub fn malformed(&self) -> u64 {
        self.counts.malformed
    }

    /// The neighbour events of one notification datagram, appended to
    /// `out`; the rest counted.
    fn datagram(&mut self, buf: &[u8], out: &mut Vec<BridgeNeighEvent>) {
        for m in Messages(buf) {
            match m {
                Some((kind, _, payload)) => self.message(kind, payload, out),
                None => self.counts.count_malformed(),
            }
        }
    }

    /// One message of type `kind` as an event in `out`, or counted.
    fn message(&mut self, kind: u16, payload: &[u8], out: &mut Vec<BridgeNeighEvent>) {
        let event: fn(BridgeNeigh) -> BridgeNeighEvent = match kind {
            libc::RTM_NEWNEIGH => BridgeNeighEvent::New,
            libc::RTM_DELNEIGH => BridgeNeighEvent::Del,
            _ => {
                self.counts.skipped += 1;
                return;
            }
        };
        match decode(payload) {
            Ok(Some(n)) => out.push(event(n)),
            Ok(None) => self.counts.skipped += 1,
            Err(()) => self.counts.count_malformed(),
        }
    }
}

impl std::fmt::Debug for BridgeNeighWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BridgeNeighWatch")
            .field("fd", &self.sock.as_raw_fd())
            .field("skipped", &self.counts.skipped)
            .field("malformed", &self.counts.malformed)
            .finish()
    }
}

/// An IPv4 or IPv6 neighbour message; Ok(None) for other families, Err
/// for one that does not decode.
fn decode(payload: &[u8]) -> Result<Option<BridgeNeigh>, ()> {
    let header = NeighbourHeader::parse(payload).map_err(|_| ())?;
    if !matches!(header.family, AddressFamily::Inet | AddressFamily::Inet6) {
        return Ok(None);
    }
    let msg = NeighbourMessage::parse(payload).map_err(|_| ())?;
    bridge_neigh(&msg).map(Some).ok_or(())
}

/// A neighbour message as a [`BridgeNeigh`]; None without an IP address
/// (or of another family).
fn bridge_neigh(m: &NeighbourMessage) -> Option<BridgeNeigh> {
    let (mut ip, mut mac, mut proto) = (None, None, None);
    for attr in &m.attributes {
        match attr {
            NeighbourAttribute::Destination(a) => ip = neighbour_ip(a),
            NeighbourAttribute::LinkLayerAddress(a) => mac = <[u8; 6]>::try_from(&a[..]).ok(),
            NeighbourAttribute::Protocol(p) => proto = Some(u8::from(*p)),
            _ => {}
        }
    }
    let ip = ip?;
    let family_ok = match m.header.family {
        AddressFamily::Inet => ip.is_ipv4(),
        AddressFamily::Inet6 => ip.is_ipv6(),
        _ => false,
    };
    family_ok.then_some(BridgeNeigh {
        ifindex: m.header.ifindex,
        ip,
        mac,
        state: m.header.state.into(),
        flags: m.header.flags.bits(),
        proto,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A netlink attribute, padded to 4 bytes.
    fn attr(kind: u16, value: &[u8]) -> Vec<u8> {
        let mut a = ((4 + value.len()) as u16).to_ne_bytes().to_vec();
        a.extend_from_slice(&kind.to_ne_bytes());
        a.extend_from_slice(value);
        a.resize(a.len().next_multiple_of(4), 0);
        a
    }

    /// nlmsghdr, ndmsg (ifindex 9), attributes.
    fn message(kind: u16, family: i32, state: u16, flags: u8, attrs: &[Vec<u8>]) -> Vec<u8> {
        let mut body = vec![family as u8, 0, 0, 0];
        body.extend_from_slice(&9u32.to_ne_bytes());
        body.extend_from_slice(&state.to_ne_bytes());
        body.extend_from_slice(&[flags, 0]);
        for a in attrs {
            body.extend_from_slice(a);
        }
        let mut m = ((16 + body.len()) as u32).to_ne_bytes().to_vec();
        m.extend_from_slice(&kind.to_ne_bytes());
        m.extend_from_slice(&[0; 10]);
        m.extend_from_slice(&body);
        m
    }

    fn watch_decode(d: &[u8]) -> (Vec<BridgeNeighEvent>, u64, u64) {
        let mut w = BridgeNeighWatch::new().expect("a netlink socket");
        let mut out = Vec::new();
        w.datagram(d, &mut out);
        (out, w.counts.skipped, w.counts.malformed)
    }

    const MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];
    const NDA_PROTOCOL: u16 = 12;

    #[test]
    fn zebras_entries_decode_and_the_rest_is_counted() {
        let v6: std::net::Ipv6Addr = "2001:db8::22".parse().unwrap();
        let mut d = message(
            libc::RTM_NEWNEIGH,
            libc::AF_INET,
            0x40,
            0x10,
            &[
                attr(libc::NDA_DST, &[10, 0, 0, 22]),
                attr(libc::NDA_LLADDR, &MAC),
                attr(NDA_PROTOCOL, &[11]),
            ],
        );
        d.extend(message(
            libc::RTM_DELNEIGH,
            libc::AF_INET6,
            0x80,
            0,
            &[attr(libc::NDA_DST, &v6.octets())],
        ));
        // A bridge forwarding entry: FdbWatch's.
        d.extend(message(
            libc::RTM_NEWNEIGH,
            libc::AF_BRIDGE,
            0x02,
            0x12,
            &[attr(libc::NDA_LLADDR, &MAC)],
        ));
        // An IPv4 message with a 16-byte address, and one without any.
        d.extend(message(
            libc::RTM_NEWNEIGH,
            libc::AF_INET,
            0x02,
            0,
            &[attr(libc::NDA_DST, &v6.octets())],
        ));
        d.extend(message(libc::RTM_NEWNEIGH, libc::AF_INET, 0x02, 0, &[]));
        let (out, skipped, malformed) = watch_decode(&d);
        let n = BridgeNeigh {
            ifindex: 9,
            ip: "10.0.0.22".parse().unwrap(),
            mac: Some(MAC),
            state: 0x40,
            flags: 0x10,
            proto: Some(11),
        };
        assert!(n.ext_learned() && !n.by_tep());
        let gone = BridgeNeigh {
            ip: v6.into(),
            mac: None,
            state: 0x80,
            flags: 0,
            proto: None,
            ..n
        };
        assert_eq!(out, [BridgeNeighEvent::New(n), BridgeNeighEvent::Del(gone)]);
        assert_eq!((skipped, malformed), (3, 2));
    }

    #[test]
    fn truncated_datagrams_never_panic() {
        let d = message(
            libc::RTM_NEWNEIGH,
            libc::AF_INET,
            0x40,
            0x10,
            &[
                attr(libc::NDA_DST, &[10, 0, 0, 22]),
                attr(libc::NDA_LLADDR, &MAC),
            ],
        );
        for len in 0..d.len() {
            let _ = watch_decode(&d[..len]);
        }
    }
}
