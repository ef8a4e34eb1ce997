//! The bridge forwarding table (FDB) of an EVPN VTEP. tep writes its local
//! MACs as static entries on a bridge port ([`bridge_fdb_add`]), which the
//! routing daemon advertises; it reads what the daemon learnt from the
//! fabric (remote MACs, one flood entry per remote VTEP) from the VXLAN
//! device's entries: a dump, then notifications ([`FdbWatch`]).
//!
//! Entries are AF_BRIDGE neighbour messages. The daemon and the kernel
//! are trusted less than they seem: the routing daemon writes what BGP
//! peers sent it, so every message is decoded defensively, and one that
//! does not decode is skipped and counted instead of stopping the watch.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};

use netlink_packet_core::{
    NetlinkBuffer, Parseable, NLM_F_ACK, NLM_F_APPEND, NLM_F_CREATE, NLM_F_REPLACE,
};
use netlink_packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourFlags, NeighbourHeader, NeighbourMessage,
    NeighbourState,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::Socket;

use super::{recv_notification, subscribe, Counts, Notified, Rtnl, POLL_BUDGET, RECV_BUF};
use crate::sys::context;

/// One bridge or VXLAN forwarding entry, as the kernel describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FdbEntry {
    /// The device it belongs to: a bridge port, or the VXLAN device itself
    /// for its own table (flags with NTF_SELF).
    pub ifindex: u32,
    /// The MAC; all zeroes for a VXLAN flood entry (a remote VTEP that
    /// receives broadcast, unknown unicast and multicast).
    pub mac: [u8; 6],
    /// The remote VTEP (VXLAN entries).
    pub dst: Option<IpAddr>,
    /// `ndm_state` (NUD_*): 0x80 permanent, 0x40 noarp (static), 0x02
    /// reachable.
    pub state: u16,
    /// `ndm_flags` (NTF_*): 0x02 self, 0x04 master, 0x10 extern_learn.
    pub flags: u8,
    /// The VNI, when it differs from the device's own.
    pub vni: Option<u32>,
    /// The remote UDP port (host order), when it differs from the
    /// device's own.
    pub port: Option<u16>,
    /// The bridge (entries of the bridge's own table).
    pub master: Option<u32>,
}

/// A forwarding entry that appeared or changed, or went away.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FdbEvent {
    /// RTM_NEWNEIGH: added, or changed (the entry as it is now).
    New(FdbEntry),
    /// RTM_DELNEIGH: removed (the entry as it was).
    Del(FdbEntry),
}

/// `ndm_state` of a static entry: iproute2's `static` is NUD_NOARP (it
/// adds NUD_REACHABLE, which the bridge ignores); the bridge keeps it
/// until deleted and the routing daemon advertises it. A permanent entry
/// (NUD_PERMANENT) would be a local address of the bridge, which the
/// daemon does not advertise.
const STATIC: u16 = libc::NUD_NOARP;

/// `bridge fdb replace MAC dev PORT master static`: `mac` is behind bridge
/// port `port`, for good, in the calling thread's namespace. Replaces an
/// entry of the same MAC (on this port or another), so adding twice is
/// not an error.
pub fn bridge_fdb_add(port: u32, mac: [u8; 6]) -> io::Result<()> {
    Rtnl::open()?
        .request(
            RouteNetlinkMessage::NewNeighbour(fdb_message(port, mac)),
            NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE,
            |_| {},
        )
        .map_err(|e| context(e, format_args!("bridge fdb add {} dev {port}", Mac(mac))))
}

/// `bridge fdb del MAC dev PORT master`; false when there was no such
/// entry.
pub fn bridge_fdb_del(port: u32, mac: [u8; 6]) -> io::Result<bool> {
    match Rtnl::open()?.request(
        RouteNetlinkMessage::DelNeighbour(fdb_message(port, mac)),
        NLM_F_ACK,
        |_| {},
    ) {
        Ok(()) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
        Err(e) => Err(context(
            e,
            format_args!("bridge fdb del {} dev {port}", Mac(mac)),
        )),
    }
}

/// `bridge fdb replace MAC dev VXLAN dst DST self extern_learn`: what
/// zebra writes for a type-2 route (NUD_REACHABLE, NTF_SELF |
/// NTF_EXT_LEARNED), so that a lab or a benchmark makes the kernel send
/// the notification a fabric would; a MAC already there moves to `dst`.
/// All zeroes for `mac`: `bridge fdb append 00:00:00:00:00:00 dev VXLAN
/// dst DST` instead, a type-3 route's flood entry (NOARP | PERMANENT,
/// NTF_SELF), added beside the device's other flood entries.
pub fn bridge_fdb_add_remote(vxlan: u32, mac: [u8; 6], dst: IpAddr) -> io::Result<()> {
    let flood = mac == [0; 6];
    let mut msg = NeighbourMessage::default();
    msg.header.family = AddressFamily::Bridge;
    msg.header.ifindex = vxlan;
    let (state, flags, how) = if flood {
        (
            libc::NUD_NOARP | libc::NUD_PERMANENT,
            NeighbourFlags::Own,
            NLM_F_APPEND,
        )
    } else {
        (
            libc::NUD_REACHABLE,
            NeighbourFlags::Own | NeighbourFlags::ExtLearned,
            NLM_F_REPLACE,
        )
    };
    msg.header.state = NeighbourState::from(state);
    msg.header.flags = flags;
    msg.attributes
        .push(NeighbourAttribute::LinkLayerAddress(mac.to_vec()));
    msg.attributes
        .push(NeighbourAttribute::Destination(match dst {
            IpAddr::V4(a) => NeighbourAddress::Inet(a),
            IpAddr::V6(a) => NeighbourAddress::Inet6(a),
        }));
    Rtnl::open()?
        .request(
            RouteNetlinkMessage::NewNeighbour(msg),
            NLM_F_ACK | NLM_F_CREATE | how,
            |_| {},
        )
        .map_err(|e| {
            context(
                e,
                format_args!("bridge fdb add {} dev {vxlan} dst {dst} self", Mac(mac)),
            )
        })
}

/// A static entry of `mac` on bridge port `port`, for the bridge's table.
fn fdb_message(port: u32, mac: [u8; 6]) -> NeighbourMessage {
    let mut msg = NeighbourMessage::default();
    msg.header.family = AddressFamily::Bridge;
    msg.header.ifindex = port;
    msg.header.state = NeighbourState::from(STATIC);
    msg.header.flags = NeighbourFlags::Controller;
    msg.attributes
        .push(NeighbourAttribute::LinkLayerAddress(mac.to_vec()));
    msg
}

/// The bridge and VXLAN forwarding tables' changes: a socket subscribed
/// to RTNLGRP_NEIGH that keeps the AF_BRIDGE messages (the group also
/// carries ARP and ND, which are skipped and counted).
///
/// Create it, then [`FdbWatch::dump`]: a change between the two is both in
/// the dump and queued as an event, never in neither. Then
/// [`FdbWatch::poll`] whenever [`FdbWatch::fd`] is readable.
pub struct FdbWatch {
    sock: Socket,
    buf: Vec<u8>,
    counts: Counts,
}

impl FdbWatch {
    /// Subscribes, in the calling thread's namespace. Non-blocking.
    pub fn new() -> io::Result<FdbWatch> {
        let sock = subscribe(&[libc::RTNLGRP_NEIGH])?;
        Ok(FdbWatch {
            sock,
            buf: Vec::with_capacity(RECV_BUF),
            counts: Counts::default(),
        })
    }

    /// Appends every AF_BRIDGE neighbour of the namespace to `out` (`bridge
    /// fdb show`: the entries of every bridge, bridge port and VXLAN
    /// device), over a socket of its own. Blocks until the dump ends.
    pub fn dump(&mut self, out: &mut Vec<FdbEntry>) -> io::Result<()> {
        let mut msg = NeighbourMessage::default();
        msg.header.family = AddressFamily::Bridge;
        let counts = &mut self.counts;
        let dumped = Rtnl::open()?.dump(
            RouteNetlinkMessage::GetNeighbour(msg),
            "bridge fdb dump",
            |kind, payload| match counts.decode(kind, payload) {
                Some(FdbEvent::New(e)) => out.push(e),
                Some(FdbEvent::Del(_)) => counts.skipped += 1,
                None => {}
            },
        );
        if dumped
            .as_ref()
            .is_err_and(|e| e.kind() == io::ErrorKind::InvalidData)
        {
            self.counts.count_malformed();
        }
        dumped
    }

    /// Appends to `out` the changes queued so far, without blocking; at
    /// most [`POLL_BUDGET`] datagrams a call (the descriptor stays
    /// readable for the rest).
    ///
    /// An error for which [`FdbWatch::is_overrun`] holds means that
    /// changes were lost (the kernel's queue overflowed and it dropped
    /// notifications): the caller's copy is stale, and it answers with a
    /// new [`FdbWatch::dump`] (the events already in `out` are real but
    /// the dump supersedes them).
    pub fn poll(&mut self, out: &mut Vec<FdbEvent>) -> io::Result<()> {
        for _ in 0..POLL_BUDGET {
            match recv_notification(&self.sock, &mut self.buf)? {
                Notified::Datagram => self.counts.datagram(&self.buf, out),
                Notified::Empty => return Ok(()),
                Notified::Truncated(_) => {
                    self.counts.count_malformed();
                    return Err(io::Error::from_raw_os_error(libc::ENOBUFS));
                }
            }
        }
        Ok(())
    }

    /// Whether `e`, from [`FdbWatch::poll`], says that changes were lost
    /// (ENOBUFS): then dump again.
    pub fn is_overrun(e: &io::Error) -> bool {
        e.raw_os_error() == Some(libc::ENOBUFS)
    }

    /// The notification socket, for epoll (readable when
    /// [`FdbWatch::poll`] has something to read).
    pub fn fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }

    /// Messages not turned into entries or events: other families (ARP and
    /// ND entries share the group), malformed ones, what does not belong
    /// in a dump.
    pub fn skipped(&self) -> u64 {
        self.counts.skipped
    }

    /// Of [`FdbWatch::skipped`], those that did not decode: a malformed or
    /// missing attribute, a MAC that is not 6 bytes, an address that is
    /// neither IPv4 nor IPv6, a datagram too large for the buffer.
    pub fn malformed(&self) -> u64 {
        self.counts.malformed
    }
}

impl std::fmt::Debug for FdbWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FdbWatch")
            .field("fd", &self.sock.as_raw_fd())
            .field("skipped", &self.counts.skipped)
            .field("malformed", &self.counts.malformed)
            .finish()
    }
}

impl AsRawFd for FdbWatch {
    fn as_raw_fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }
}

impl AsFd for FdbWatch {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.sock.as_fd()
    }
}

impl Counts {
    /// The forwarding events of one notification datagram, appended to
    /// `out`; the rest counted.
    fn datagram(&mut self, buf: &[u8], out: &mut Vec<FdbEvent>) {
        for m in Messages(buf) {
            match m {
                Some((kind, _, payload)) => out.extend(self.decode(kind, payload)),
                None => self.count_malformed(),
            }
        }
    }

    /// One message of type `kind` as a forwarding event; None (counted) for
    /// anything else.
    fn decode(&mut self, kind: u16, payload: &[u8]) -> Option<FdbEvent> {
        let event: fn(FdbEntry) -> FdbEvent = match kind {
            libc::RTM_NEWNEIGH => FdbEvent::New,
            libc::RTM_DELNEIGH => FdbEvent::Del,
            _ => {
                self.skipped += 1;
                return None;
            }
        };
        match fdb_entry(payload) {
            Ok(Some(e)) => Some(event(e)),
            Ok(None) => {
                self.skipped += 1;
                None
            }
            Err(Malformed) => {
                self.count_malformed();
                None
            }
        }
    }
}

/// One notification datagram decoded as [`FdbWatch::poll`] decodes it:
/// its forwarding events appended to `out`; returns how many messages were
/// skipped and, of those, how many did not decode. For the fuzz target
/// and tests: the kernel is the only sender the watch hears, but its bytes
/// are parsed as untrusted all the same.
pub fn decode_notifications(buf: &[u8], out: &mut Vec<FdbEvent>) -> (u64, u64) {
    let mut counts = Counts::default();
    counts.datagram(buf, out);
    (counts.skipped, counts.malformed)
}

/// A message that does not decode.
#[derive(Debug, PartialEq, Eq)]
struct Malformed;

/// A neighbour message's forwarding entry; None for the other families
/// (ARP, ND).
fn fdb_entry(payload: &[u8]) -> Result<Option<FdbEntry>, Malformed> {
    let header = NeighbourHeader::parse(payload).map_err(|_| Malformed)?;
    if header.family != AddressFamily::Bridge {
        return Ok(None);
    }
    let msg = NeighbourMessage::parse(payload).map_err(|_| Malformed)?;
    let mut mac = None;
    let mut entry = FdbEntry {
        ifindex: msg.header.ifindex,
        mac: [0; 6],
        dst: None,
        state: msg.header.state.into(),
        flags: msg.header.flags.bits(),
        vni: None,
        port: None,
        master: None,
    };
    for attr in &msg.attributes {
        match attr {
            NeighbourAttribute::LinkLayerAddress(a) => {
                mac = Some(<[u8; 6]>::try_from(a.as_slice()).map_err(|_| Malformed)?);
            }
            NeighbourAttribute::Destination(a) => entry.dst = Some(address(a)?),
            NeighbourAttribute::Vni(v) => entry.vni = Some(*v),
            NeighbourAttribute::Port(p) => entry.port = Some(*p),
            NeighbourAttribute::Controller(m) => entry.master = Some(*m),
            _ => {}
        }
    }
    entry.mac = mac.ok_or(Malformed)?;
    Ok(Some(entry))
}

/// NDA_DST of an AF_BRIDGE message: the crate leaves its bytes raw (the
/// message's family says nothing of the address's); the length does.
fn address(a: &NeighbourAddress) -> Result<IpAddr, Malformed> {
    match a {
        NeighbourAddress::Inet(v4) => Ok((*v4).into()),
        NeighbourAddress::Inet6(v6) => Ok((*v6).into()),
        NeighbourAddress::Other(b) => {
            if let Ok(v4) = <[u8; 4]>::try_from(b.as_slice()) {
                Ok(Ipv4Addr::from(v4).into())
            } else if let Ok(v6) = <[u8; 16]>::try_from(b.as_slice()) {
                Ok(Ipv6Addr::from(v6).into())
            } else {
                Err(Malformed)
            }
        }
        _ => Err(Malformed),
    }
}

/// The error an NLMSG_ERROR payload carries (a negative errno; 0 is an
/// acknowledgement, which a dump does not send).
pub(super) fn error_of(payload: &[u8], what: &str) -> io::Error {
    match payload
        .get(..4)
        .map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
    {
        Some(code) if code < 0 => context(io::Error::from_raw_os_error(-code), what),
        _ => io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{what}: a malformed NLMSG_ERROR"),
        ),
    }
}

/// The messages of one datagram as (type, sequence number, payload),
/// without decoding them; None for a header that does not fit, after
/// which the datagram's rest cannot be delimited and is dropped.
pub(super) struct Messages<'a>(pub(super) &'a [u8]);

impl<'a> Iterator for Messages<'a> {
    type Item = Option<(u16, u32, &'a [u8])>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.0.is_empty() {
            return None;
        }
        let Ok(b) = NetlinkBuffer::new_checked(self.0) else {
            self.0 = &[];
            return Some(None);
        };
        let len = b.length() as usize;
        let item = (b.message_type(), b.sequence_number(), b.payload());
        // Messages start on 4-byte boundaries (NLMSG_ALIGN).
        self.0 = self.0.get(len.next_multiple_of(4)..).unwrap_or(&[]);
        Some(Some(item))
    }
}

/// A MAC as `bridge` prints it.
struct Mac([u8; 6]);

impl std::fmt::Display for Mac {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let [a, b, c, d, e, g] = self.0;
        write!(f, "{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{g:02x}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const AF_BRIDGE: u8 = libc::AF_BRIDGE as u8;
    const MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];

    /// A netlink attribute, padded to 4 bytes.
    fn attr(kind: u16, value: &[u8]) -> Vec<u8> {
        let mut a = ((4 + value.len()) as u16).to_ne_bytes().to_vec();
        a.extend_from_slice(&kind.to_ne_bytes());
        a.extend_from_slice(value);
        a.resize(a.len().next_multiple_of(4), 0);
        a
    }

    /// A neighbour message: nlmsghdr, ndmsg, attributes.
    fn message(kind: u16, family: u8, state: u16, flags: u8, attrs: &[Vec<u8>]) -> Vec<u8> {
        let mut body = vec![family, 0, 0, 0];
        body.extend_from_slice(&7u32.to_ne_bytes()); // ifindex
        body.extend_from_slice(&state.to_ne_bytes());
        body.extend_from_slice(&[flags, 0]);
        for a in attrs {
            body.extend_from_slice(a);
        }
        let mut m = ((16 + body.len()) as u32).to_ne_bytes().to_vec();
        m.extend_from_slice(&kind.to_ne_bytes());
        m.extend_from_slice(&[0; 10]); // flags, seq, pid
        m.extend_from_slice(&body);
        m
    }

    fn lladdr(mac: &[u8]) -> Vec<u8> {
        attr(libc::NDA_LLADDR, mac)
    }

    fn decode(datagram: &[u8]) -> (Vec<FdbEvent>, Counts) {
        let mut counts = Counts::default();
        let mut out = Vec::new();
        counts.datagram(datagram, &mut out);
        (out, counts)
    }

    #[test]
    fn entries_decode_with_their_optional_attributes() {
        let v6: Ipv6Addr = "2001:db8::3".parse().unwrap();
        let mut d = message(
            libc::RTM_NEWNEIGH,
            AF_BRIDGE,
            0xc0,
            0x02,
            &[lladdr(&[0; 6]), attr(libc::NDA_DST, &[192, 0, 2, 2])],
        );
        d.extend(message(
            libc::RTM_DELNEIGH,
            AF_BRIDGE,
            0x02,
            0x12,
            &[
                lladdr(&MAC),
                attr(libc::NDA_DST, &v6.octets()),
                attr(libc::NDA_VNI, &200u32.to_ne_bytes()),
                // The port travels in network byte order.
                attr(libc::NDA_PORT, &4789u16.to_be_bytes()),
                attr(libc::NDA_MASTER, &5u32.to_ne_bytes()),
                attr(99, &[1, 2, 3]), // unknown: ignored
            ],
        ));
        let (out, counts) = decode(&d);
        assert_eq!(counts, Counts::default());
        let flood = FdbEntry {
            ifindex: 7,
            mac: [0; 6],
            dst: Some(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2))),
            state: 0xc0,
            flags: 0x02,
            vni: None,
            port: None,
            master: None,
        };
        let remote = FdbEntry {
            mac: MAC,
            dst: Some(v6.into()),
            state: 0x02,
            flags: 0x12,
            vni: Some(200),
            port: Some(4789),
            master: Some(5),
            ..flood
        };
        assert_eq!(out, [FdbEvent::New(flood), FdbEvent::Del(remote)]);
    }

    #[test]
    fn malformed_messages_are_skipped_and_counted_and_the_rest_kept() {
        let good = message(libc::RTM_NEWNEIGH, AF_BRIDGE, 0x40, 0x04, &[lladdr(&MAC)]);
        let bad: [&[Vec<u8>]; 6] = [
            &[lladdr(&MAC[..5])],
            &[],
            &[lladdr(&MAC), attr(libc::NDA_DST, &[192, 0, 2, 2, 9])],
            &[lladdr(&MAC), attr(libc::NDA_VNI, &[1, 2, 3])],
            &[lladdr(&MAC), attr(libc::NDA_PORT, &[1])],
            &[lladdr(&MAC), attr(libc::NDA_MASTER, &[])],
        ];
        let mut d = Vec::new();
        for attrs in bad {
            d.extend(message(libc::RTM_NEWNEIGH, AF_BRIDGE, 0x40, 0x04, attrs));
            d.extend_from_slice(&good);
        }
        // An attribute whose length runs past its message.
        let mut overlong = message(libc::RTM_NEWNEIGH, AF_BRIDGE, 0x40, 0, &[lladdr(&MAC)]);
        overlong[28] = 200;
        d.extend(overlong);
        // Not bridge entries: an ARP neighbour, a link message, a header
        // too short to be a neighbour's.
        d.extend(message(
            libc::RTM_NEWNEIGH,
            libc::AF_INET as u8,
            2,
            0,
            &[lladdr(&MAC)],
        ));
        d.extend(message(libc::RTM_NEWLINK, 0, 0, 0, &[]));
        let mut short = message(libc::RTM_NEWNEIGH, AF_BRIDGE, 0, 0, &[]);
        short.truncate(16 + 8);
        short[0] = 24;
        d.extend(short);
        let (out, counts) = decode(&d);
        assert_eq!(out.len(), 6, "{out:?}");
        assert!(out
            .iter()
            .all(|e| matches!(e, FdbEvent::New(e) if e.mac == MAC && e.state == 0x40)));
        assert_eq!(
            counts,
            Counts {
                skipped: 10,
                malformed: 8
            }
        );
    }

    #[test]
    fn truncated_datagrams_never_panic() {
        let full = message(
            libc::RTM_NEWNEIGH,
            AF_BRIDGE,
            0x02,
            0x12,
            &[
                lladdr(&MAC),
                attr(libc::NDA_DST, &[192, 0, 2, 3]),
                attr(libc::NDA_VNI, &100u32.to_ne_bytes()),
            ],
        );
        for cut in 0..full.len() {
            let (out, counts) = decode(&full[..cut]);
            // A cut anywhere breaks the header's length: nothing decodes.
            assert!(out.is_empty(), "cut at {cut}");
            assert_eq!(counts.malformed, u64::from(cut > 0), "cut at {cut}");
        }
        // Every byte of the message set to every value: decodes or is
        // counted.
        for i in 0..full.len() {
            for v in [0u8, 1, 3, 0x7f, 0xff] {
                let mut m = full.clone();
                m[i] = v;
                let (out, counts) = decode(&m);
                assert!(out.len() + counts.skipped as usize >= 1, "byte {i} = {v}");
            }
        }
    }
}
