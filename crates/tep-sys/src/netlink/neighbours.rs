//! A copy of the kernel's neighbour table, kept current from rtnetlink
//! notifications, and the route, link and address changes that make a
//! caller recompute its routes.

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};

use netlink_packet_core::{NetlinkPayload, NLM_F_DUMP};
use netlink_packet_route::address::{AddressAttribute, AddressMessage};
use netlink_packet_route::link::{LinkAttribute, LinkExtentMask, LinkMessage};
use netlink_packet_route::neighbour::{
    NeighbourAttribute, NeighbourFlags, NeighbourMessage, NeighbourState,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::Socket;

use super::{
    mac, neighbour_ip, parse_link, recv_notification, subscribe, truncated, Datagram, Notified,
    Rtnl, RECV_BUF,
};
use crate::sys::context;

/// A neighbour entry's NUD state (`ip neigh` prints it in capitals).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NudState {
    /// Being resolved: solicited, no answer yet.
    Incomplete,
    /// Confirmed recently.
    Reachable,
    /// Known but not confirmed lately; still used, and re-verified when used.
    Stale,
    /// Used while stale; waiting for traffic to confirm it.
    Delay,
    /// Being re-verified by unicast probes.
    Probe,
    /// Resolution failed.
    Failed,
    /// Needs no resolution (multicast, broadcast, devices without ARP).
    Noarp,
    /// Set by the administrator, never expires.
    Permanent,
    /// Just created, or invalidated.
    None,
    /// A state value this crate does not name.
    Other(u16),
}

impl NudState {
    /// Whether frames may go to the entry's MAC: the kernel's NUD_VALID
    /// (reachable, stale, delay, probe, permanent, noarp). Stale, delay and
    /// probe entries are being re-verified, but the kernel itself still
    /// sends to them meanwhile; incomplete and failed ones have no MAC.
    pub fn usable(self) -> bool {
        matches!(
            self,
            NudState::Reachable
                | NudState::Stale
                | NudState::Delay
                | NudState::Probe
                | NudState::Permanent
                | NudState::Noarp
        )
    }
}

impl From<NeighbourState> for NudState {
    fn from(s: NeighbourState) -> NudState {
        match s {
            NeighbourState::Incomplete => NudState::Incomplete,
            NeighbourState::Reachable => NudState::Reachable,
            NeighbourState::Stale => NudState::Stale,
            NeighbourState::Delay => NudState::Delay,
            NeighbourState::Probe => NudState::Probe,
            NeighbourState::Failed => NudState::Failed,
            NeighbourState::Noarp => NudState::Noarp,
            NeighbourState::Permanent => NudState::Permanent,
            NeighbourState::None => NudState::None,
            other => NudState::Other(u16::from(other)),
        }
    }
}

/// One entry of the neighbour table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Neighbour {
    /// Its MAC; None while the kernel has none (incomplete, failed).
    pub mac: Option<[u8; 6]>,
    /// Its state.
    pub state: NudState,
}

impl Neighbour {
    /// The MAC to send to, if the state allows it.
    pub fn usable_mac(&self) -> Option<[u8; 6]> {
        self.mac.filter(|_| self.state.usable())
    }
}

/// How a neighbour's resolution changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NeighbourChange {
    /// It resolves where it did not: a new entry, or one back from
    /// incomplete or failed.
    Resolved,
    /// It resolved and still does, to another MAC.
    MacChanged {
        /// The MAC it resolved to before.
        old: [u8; 6],
    },
    /// The entry went to NUD_FAILED: the neighbour did not answer. (The
    /// kernel also marks an entry it deletes by hand failed first, so
    /// `ip neigh del` of a resolved entry reads Failed, then Removed.)
    Failed,
    /// The entry was deleted (by hand, by garbage collection, with its
    /// interface going down), or it resolved and was invalidated.
    Removed,
}

/// What changed in the kernel's tables, as [`Neighbours::poll_events`]
/// reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A neighbour's resolution changed; [`Neighbours::resolve`] already
    /// gives the new answer, `mac`.
    Neighbour {
        /// Interface index.
        ifindex: u32,
        /// The neighbour's address.
        ip: IpAddr,
        /// What [`Neighbours::resolve`] gives now.
        mac: Option<[u8; 6]>,
        /// How it changed.
        change: NeighbourChange,
    },
    /// Routes of either family were added, changed or removed since the
    /// previous call (reported once per call however many changed): the
    /// caller asks [`route_get`](super::route_get) again for what it sends
    /// to. IPv4 routes removed with their interface going down come without
    /// a notification: the [`Event::Link`] of that change covers them.
    Route,
    /// An interface appeared, or its MAC, MTU or state changed.
    Link {
        /// Interface index.
        ifindex: u32,
        /// Its MAC now.
        mac: Option<[u8; 6]>,
        /// Its MTU now.
        mtu: u32,
        /// Whether it is up and running now.
        up: bool,
    },
    /// An address was added to an interface or removed from it (IPv6
    /// addresses also come again when their flags change, e.g. when
    /// duplicate address detection ends: `added` is then true again).
    Address {
        /// Interface index.
        ifindex: u32,
        /// The interface's own address (IFA_LOCAL where the kernel gives
        /// one, as for IPv4 point-to-point links; IFA_ADDRESS otherwise).
        ip: IpAddr,
        /// Added (or changed) rather than removed.
        added: bool,
    },
    /// An interface was deleted; its neighbours were removed with it.
    LinkRemoved {
        /// Interface index.
        ifindex: u32,
    },
    /// Notifications were lost (the socket's receive queue overflowed):
    /// the neighbour and link tables were reloaded from the kernel and
    /// their differences reported, but route changes may have been missed,
    /// so the caller recomputes everything.
    Resync,
}

/// An interface's state as far as forwarding cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct LinkState {
    mac: Option<[u8; 6]>,
    mtu: u32,
    up: bool,
}

/// The kernel's neighbour table (IPv4 ARP and IPv6 ND entries) of the
/// calling thread's namespace, filled by a dump and kept current from a
/// notification socket subscribed to neighbour, IPv4 and IPv6 route and
/// link changes.
///
/// The socket is non-blocking: the caller puts [`as_raw_fd`] in its epoll
/// and calls [`poll_events`] when it is readable. Between two calls
/// [`resolve`] answers from the copy, without asking the kernel.
///
/// [`as_raw_fd`]: AsRawFd::as_raw_fd
/// [`poll_events`]: Neighbours::poll_events
/// [`resolve`]: Neighbours::resolve
pub struct Neighbours {
    sock: Socket,
    buf: Vec<u8>,
    table: HashMap<(u32, IpAddr), Neighbour>,
    links: HashMap<u32, LinkState>,
}

/// How many datagrams [`Neighbours::poll_events`] reads at most a call.
pub const POLL_BUDGET: usize = 256;

impl Neighbours {
    /// Subscribes to the notifications, then dumps the links and the
    /// neighbour table. In that order, so that no change falls between the
    /// dump and the subscription: a change made meanwhile is in the dump,
    /// or queued, or both (then the queued one is applied again, which
    /// ends in the same state).
    pub fn new() -> io::Result<Neighbours> {
        let sock = subscribe(&[
            libc::RTNLGRP_NEIGH,
            libc::RTNLGRP_IPV4_ROUTE,
            libc::RTNLGRP_IPV6_ROUTE,
            libc::RTNLGRP_LINK,
            libc::RTNLGRP_IPV4_IFADDR,
            libc::RTNLGRP_IPV6_IFADDR,
        ])?;
        let mut n = Neighbours {
            sock,
            buf: Vec::with_capacity(RECV_BUF),
            table: HashMap::new(),
            links: HashMap::new(),
        };
        n.reload(&mut Vec::new())?;
        Ok(n)
    }

    /// The MAC of neighbour `ip` on interface `ifindex`, if its entry is
    /// usable ([`NudState::usable`]). Reads the copy only: no syscall, no
    /// allocation.
    pub fn resolve(&self, ifindex: u32, ip: IpAddr) -> Option<[u8; 6]> {
        self.table.get(&(ifindex, ip))?.usable_mac()
    }

    /// The entry of `ip` on `ifindex`, whatever its state.
    pub fn get(&self, ifindex: u32, ip: IpAddr) -> Option<Neighbour> {
        self.table.get(&(ifindex, ip)).copied()
    }

    /// Reads the queued notifications without blocking, updates the table
    /// and appends to `out` what changed; returns at once when nothing is
    /// queued. At most [`POLL_BUDGET`] datagrams a call, so that a storm of
    /// changes (a full routing table arriving) does not hold the caller's
    /// loop: what is left keeps the descriptor readable for the next
    /// (level-triggered) wakeup.
    ///
    /// A notification that does not decode (or did not fit the buffer) is
    /// a change lost: the tables are reloaded as after an overflow
    /// ([`Event::Resync`]) and the decoding error is returned, after the
    /// events.
    pub fn poll_events(&mut self, out: &mut Vec<Event>) -> io::Result<()> {
        let mut routes = false;
        let mut lost = None;
        for _ in 0..POLL_BUDGET {
            match recv_notification(&self.sock, &mut self.buf) {
                Ok(Notified::Datagram) => {}
                Ok(Notified::Empty) => break,
                Ok(Notified::Truncated(n)) => {
                    lost.get_or_insert(truncated(n));
                    continue;
                }
                // The queue overflowed: notifications were dropped.
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                    self.resync(out)?;
                    continue;
                }
                Err(e) => return Err(e),
            }
            let buf = std::mem::take(&mut self.buf);
            for m in Datagram(&buf) {
                match m {
                    Ok(m) => {
                        if let NetlinkPayload::InnerMessage(m) = m.payload {
                            routes |= self.apply(m, out);
                        }
                    }
                    Err(e) => {
                        lost.get_or_insert(e);
                    }
                }
            }
            self.buf = buf;
        }
        if routes {
            out.push(Event::Route);
        }
        match lost {
            Some(e) => {
                self.resync(out)?;
                Err(e)
            }
            None => Ok(()),
        }
    }

    /// Applies one notification; true for a route change.
    fn apply(&mut self, msg: RouteNetlinkMessage, out: &mut Vec<Event>) -> bool {
        match msg {
            RouteNetlinkMessage::NewNeighbour(m) => self.neighbour(m, false, out),
            RouteNetlinkMessage::DelNeighbour(m) => self.neighbour(m, true, out),
            RouteNetlinkMessage::NewLink(m) => self.link(m, false, out),
            RouteNetlinkMessage::DelLink(m) => self.link(m, true, out),
            RouteNetlinkMessage::NewAddress(m) => out.extend(address(m, true)),
            RouteNetlinkMessage::DelAddress(m) => out.extend(address(m, false)),
            RouteNetlinkMessage::NewRoute(_) | RouteNetlinkMessage::DelRoute(_) => return true,
            _ => {}
        }
        false
    }

    /// A neighbour added, changed or (`deleted`) removed.
    fn neighbour(&mut self, m: NeighbourMessage, deleted: bool, out: &mut Vec<Event>) {
        let Some((key, entry)) = neighbour(m) else {
            return;
        };
        let old = if deleted {
            self.table.remove(&key)
        } else {
            self.table.insert(key, entry)
        };
        report(key, old, (!deleted).then_some(entry), out);
    }

    /// A link added, changed or (`deleted`) removed.
    fn link(&mut self, m: LinkMessage, deleted: bool, out: &mut Vec<Event>) {
        let Some((index, state)) = link(m) else {
            return;
        };
        if !deleted {
            let old = self.links.insert(index, state);
            report_link(index, old, state, out);
            return;
        }
        self.links.remove(&index);
        // The kernel deletes the neighbours of a link with it (and says so
        // first); this covers any it did not name.
        let gone: Vec<_> = self
            .table
            .keys()
            .filter(|k| k.0 == index)
            .copied()
            .collect();
        for key in gone {
            let old = self.table.remove(&key);
            report(key, old, None, out);
        }
        out.push(Event::LinkRemoved { ifindex: index });
    }

    /// After lost notifications: reload, report the differences, and ask
    /// the caller to recompute its routes.
    fn resync(&mut self, out: &mut Vec<Event>) -> io::Result<()> {
        self.reload(out)?;
        out.push(Event::Resync);
        Ok(())
    }

    /// Replaces the link and neighbour tables with dumps of the kernel's,
    /// reporting what differs.
    fn reload(&mut self, out: &mut Vec<Event>) -> io::Result<()> {
        let mut rtnl = Rtnl::open()?;
        let mut links = HashMap::new();
        let mut msg = LinkMessage::default();
        msg.attributes
            .push(LinkAttribute::ExtMask(vec![LinkExtentMask::SkipStats]));
        rtnl.request(RouteNetlinkMessage::GetLink(msg), NLM_F_DUMP, |m| {
            if let RouteNetlinkMessage::NewLink(m) = m {
                links.extend(link(m));
            }
        })
        .map_err(|e| context(e, "link dump"))?;
        let mut table = HashMap::new();
        rtnl.request(
            RouteNetlinkMessage::GetNeighbour(NeighbourMessage::default()),
            NLM_F_DUMP,
            |m| {
                if let RouteNetlinkMessage::NewNeighbour(m) = m {
                    table.extend(neighbour(m));
                }
            },
        )
        .map_err(|e| context(e, "neighbour dump"))?;
        for (&key, &new) in &table {
            report(key, self.table.get(&key).copied(), Some(new), out);
        }
        for (&key, &old) in &self.table {
            if !table.contains_key(&key) {
                report(key, Some(old), None, out);
            }
        }
        for (&index, &new) in &links {
            report_link(index, self.links.get(&index).copied(), new, out);
        }
        for &index in self.links.keys() {
            if !links.contains_key(&index) {
                out.push(Event::LinkRemoved { ifindex: index });
            }
        }
        self.table = table;
        self.links = links;
        Ok(())
    }
}

impl std::fmt::Debug for Neighbours {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Neighbours")
            .field("fd", &self.sock.as_raw_fd())
            .field("neighbours", &self.table.len())
            .field("links", &self.links.len())
            .finish()
    }
}

impl AsRawFd for Neighbours {
    /// The notification socket, for epoll (readable when
    /// [`Neighbours::poll_events`] has something to read).
    fn as_raw_fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }
}

impl AsFd for Neighbours {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.sock.as_fd()
    }
}

/// An IPv4 or IPv6 neighbour message's key and entry. Proxy entries
/// (answered for others, `ip neigh add proxy`) and the bridge's forwarding
/// entries, which share the notification group, are not next hops: None.
fn neighbour(m: NeighbourMessage) -> Option<((u32, IpAddr), Neighbour)> {
    if !matches!(m.header.family, AddressFamily::Inet | AddressFamily::Inet6)
        || m.header.flags.contains(NeighbourFlags::Proxy)
    {
        return None;
    }
    let mut ip = None;
    let mut lladdr = None;
    for attr in &m.attributes {
        match attr {
            NeighbourAttribute::Destination(a) => ip = neighbour_ip(a),
            NeighbourAttribute::LinkLayerAddress(a) => lladdr = mac(a),
            _ => {}
        }
    }
    let entry = Neighbour {
        mac: lladdr,
        state: m.header.state.into(),
    };
    Some(((m.header.ifindex, ip?), entry))
}

/// A link message's index and state; None for the bridge's per-port
/// messages (family AF_BRIDGE), which share the group but are not the
/// link itself (a port leaving its bridge sends an RTM_DELLINK of them).
fn link(m: LinkMessage) -> Option<(u32, LinkState)> {
    if m.header.interface_family != AddressFamily::Unspec {
        return None;
    }
    let l = parse_link(m);
    Some((
        l.index,
        LinkState {
            mac: l.mac,
            mtu: l.mtu,
            up: l.up,
        },
    ))
}

/// An address notification as an event; None without an address.
fn address(m: AddressMessage, added: bool) -> Option<Event> {
    let mut local = None;
    let mut address = None;
    for attr in &m.attributes {
        match attr {
            AddressAttribute::Local(a) => local = Some(*a),
            AddressAttribute::Address(a) => address = Some(*a),
            _ => {}
        }
    }
    Some(Event::Address {
        ifindex: m.header.index,
        ip: local.or(address)?,
        added,
    })
}

/// Reports the change of `key`'s entry from `old` to `new` (None: absent),
/// if its resolution changed.
fn report(
    (ifindex, ip): (u32, IpAddr),
    old: Option<Neighbour>,
    new: Option<Neighbour>,
    out: &mut Vec<Event>,
) {
    let was = old.and_then(|n| n.usable_mac());
    let now = new.and_then(|n| n.usable_mac());
    let failed = |n: Option<Neighbour>| n.is_some_and(|n| n.state == NudState::Failed);
    let change = match (was, now) {
        (None, Some(_)) => NeighbourChange::Resolved,
        (Some(a), Some(b)) if a != b => NeighbourChange::MacChanged { old: a },
        (Some(_), Some(_)) => return,
        _ if failed(new) && !failed(old) => NeighbourChange::Failed,
        (Some(_), None) => NeighbourChange::Removed,
        (None, None) if old.is_some() && new.is_none() => NeighbourChange::Removed,
        (None, None) => return,
    };
    out.push(Event::Neighbour {
        ifindex,
        ip,
        mac: now,
        change,
    });
}

/// Reports a link that appeared or changed.
fn report_link(ifindex: u32, old: Option<LinkState>, new: LinkState, out: &mut Vec<Event>) {
    if old != Some(new) {
        out.push(Event::Link {
            ifindex,
            mac: new.mac,
            mtu: new.mtu,
            up: new.up,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;
    use NudState as S;

    const KEY: (u32, IpAddr) = (2, IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2)));
    const A: [u8; 6] = [2, 0, 0, 0, 0, 0xa];
    const B: [u8; 6] = [2, 0, 0, 0, 0, 0xb];

    fn entry(mac: Option<[u8; 6]>, state: NudState) -> Option<Neighbour> {
        Some(Neighbour { mac, state })
    }

    fn change(old: Option<Neighbour>, new: Option<Neighbour>) -> Option<NeighbourChange> {
        let mut out = Vec::new();
        report(KEY, old, new, &mut out);
        assert!(out.len() <= 1);
        out.first().map(|e| match *e {
            Event::Neighbour {
                ifindex,
                ip,
                mac,
                change,
            } => {
                assert_eq!((ifindex, ip), KEY);
                assert_eq!(mac, new.and_then(|n| n.usable_mac()));
                change
            }
            other => panic!("{other:?}"),
        })
    }

    #[test]
    fn neighbour_changes_are_changes_of_resolution() {
        use NeighbourChange::*;
        let reachable_a = entry(Some(A), S::Reachable);
        assert_eq!(change(None, entry(None, S::Incomplete)), None);
        assert_eq!(
            change(entry(None, S::Incomplete), reachable_a),
            Some(Resolved)
        );
        assert_eq!(change(None, entry(Some(A), S::Permanent)), Some(Resolved));
        // Reachable, stale, delay, probe: the same MAC, nothing to report.
        assert_eq!(change(reachable_a, entry(Some(A), S::Stale)), None);
        assert_eq!(
            change(entry(Some(A), S::Stale), entry(Some(A), S::Delay)),
            None
        );
        assert_eq!(
            change(entry(Some(A), S::Stale), entry(Some(B), S::Stale)),
            Some(MacChanged { old: A })
        );
        assert_eq!(
            change(entry(Some(A), S::Probe), entry(None, S::Failed)),
            Some(Failed)
        );
        assert_eq!(
            change(entry(None, S::Incomplete), entry(None, S::Failed)),
            Some(Failed)
        );
        assert_eq!(change(entry(None, S::Failed), entry(None, S::Failed)), None);
        assert_eq!(change(reachable_a, None), Some(Removed));
        assert_eq!(
            change(reachable_a, entry(None, S::Incomplete)),
            Some(Removed)
        );
        // Deleted, whatever its state.
        assert_eq!(change(entry(None, S::Failed), None), Some(Removed));
        assert_eq!(change(entry(None, S::Incomplete), None), Some(Removed));
        assert_eq!(change(None, None), None);
    }

    #[test]
    fn usable_states_are_the_kernels_nud_valid() {
        for s in [
            S::Reachable,
            S::Stale,
            S::Delay,
            S::Probe,
            S::Permanent,
            S::Noarp,
        ] {
            assert!(s.usable(), "{s:?}");
        }
        for s in [S::Incomplete, S::Failed, S::None, S::Other(0x100)] {
            assert!(!s.usable(), "{s:?}");
        }
        assert_eq!(entry(None, S::Reachable).unwrap().usable_mac(), None);
        assert_eq!(entry(Some(A), S::Failed).unwrap().usable_mac(), None);
    }
}
