//! The kernel's routing and neighbour tables over rtnetlink, for gateway
//! mode (issue 14): tep writes whole Ethernet frames itself, the kernel
//! keeps ARP, ND and routing, and tep asks it for the route to a
//! destination ([`route_get`]), an interface's MAC and MTU
//! ([`link_info`]), and the next hop's MAC ([`Neighbours`], a copy of the
//! neighbour table kept current from notifications). For a VTEP of a BGP
//! EVPN fabric (issue 27) it also creates the kernel bridge and VXLAN
//! devices the routing daemon watches, writes tep's local MACs into the
//! bridge's forwarding table and follows the remote entries the daemon
//! writes there (`bridge.rs`, `links.rs`).
//!
//! Messages are built and parsed by `netlink-packet-route`; the sockets are
//! `netlink-sys`'s synchronous ones. A netlink socket belongs to the
//! network namespace of the thread that opens it, so every call here asks
//! the namespace of the calling thread (each free function opens its own
//! short-lived socket: they are control-plane calls, not per packet).

mod bridge;
mod bridge_neigh;
mod links;
mod neighbours;

pub use bridge::{
    bridge_fdb_add, bridge_fdb_add_remote, bridge_fdb_del, decode_notifications, FdbEntry,
    FdbEvent, FdbWatch,
};
pub use bridge_neigh::{
    bridge_neigh_del, bridge_neigh_set, BridgeNeigh, BridgeNeighEvent, BridgeNeighWatch, PROTO_TEP,
};
pub use links::{
    bridge_create, link_delete, link_set_master, link_set_up, vxlan_create, vxlan_info,
    VxlanDevice, VxlanInfo,
};
pub use neighbours::{Event, Neighbour, NeighbourChange, Neighbours, NudState, POLL_BUDGET};

use std::io;
use std::net::IpAddr;

use netlink_packet_core::{
    NetlinkBuffer, NetlinkHeader, NetlinkMessage, NetlinkPayload, NLMSG_DONE, NLMSG_ERROR,
    NLM_F_ACK, NLM_F_CREATE, NLM_F_DUMP, NLM_F_EXCL, NLM_F_REPLACE, NLM_F_REQUEST,
};
use netlink_packet_route::address::{AddressAttribute, AddressMessage};
use netlink_packet_route::link::{LinkAttribute, LinkExtentMask, LinkFlags, LinkMessage};
use netlink_packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourExtFlags, NeighbourFlags, NeighbourMessage,
    NeighbourState,
};
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteHeader, RouteMessage, RouteMetric, RouteProtocol,
    RouteScope, RouteType, RouteVia,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::protocols::NETLINK_ROUTE;
use netlink_sys::{Socket, SocketAddr};

use crate::sys::{context, retry};

/// The kernel's answer to "how would you send to this address" (what `ip
/// route get` prints): the output interface, the next hop when it is not
/// the destination itself, the source address the kernel would pick, and
/// the path MTU when the route (or a learnt PMTU) sets one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    /// Output interface index.
    pub oif: u32,
    /// The gateway; None when the destination is on-link (its own next hop).
    pub gateway: Option<IpAddr>,
    /// The preferred source address.
    pub prefsrc: Option<IpAddr>,
    /// The route's MTU metric (`mtu` on the route, or a learnt path MTU);
    /// None when the interface MTU applies.
    pub mtu: Option<u32>,
}

impl Route {
    /// The address whose MAC the frames go to: the gateway, or `dst`
    /// itself when it is on-link.
    pub fn next_hop(&self, dst: IpAddr) -> IpAddr {
        self.gateway.unwrap_or(dst)
    }
}

/// One interface as `ip link` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link {
    /// Interface index.
    pub index: u32,
    /// Interface name.
    pub name: String,
    /// Its MAC address; None for interfaces without a 6-byte hardware
    /// address (TUN, some tunnels).
    pub mac: Option<[u8; 6]>,
    /// Its MTU.
    pub mtu: u32,
    /// Administratively up and running (IFF_UP and IFF_RUNNING): frames
    /// written to it can leave.
    pub up: bool,
}

/// The route the kernel would take to `dst` (RTM_GETROUTE with a
/// destination, as `ip route get` does), in the calling thread's
/// namespace.
///
/// Errors: what the kernel answers for destinations it cannot reach
/// (`NetworkUnreachable` without a route, `HostUnreachable`,
/// `PermissionDenied` for prohibit routes), and `InvalidInput` for routes
/// that are not unicast — local addresses, broadcast, multicast — to
/// which tep cannot write a frame for a next hop.
pub fn route_get(dst: IpAddr) -> io::Result<Route> {
    let mut msg = RouteMessage::default();
    let (family, bits) = match dst {
        IpAddr::V4(_) => (AddressFamily::Inet, 32),
        IpAddr::V6(_) => (AddressFamily::Inet6, 128),
    };
    msg.header.address_family = family;
    msg.header.destination_prefix_length = bits;
    msg.attributes
        .push(RouteAttribute::Destination(RouteAddress::from(dst)));
    let mut reply = None;
    Rtnl::open()?
        .request(RouteNetlinkMessage::GetRoute(msg), NLM_F_ACK, |m| {
            if let RouteNetlinkMessage::NewRoute(r) = m {
                reply = Some(r);
            }
        })
        .map_err(|e| context(e, format_args!("route get {dst}")))?;
    let reply = reply.ok_or_else(|| no_reply(format_args!("route get {dst}")))?;
    if reply.header.kind != RouteType::Unicast {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "route get {dst}: a {:?} route, not unicast",
                reply.header.kind
            ),
        ));
    }
    let mut route = Route {
        oif: 0,
        gateway: None,
        prefsrc: None,
        mtu: None,
    };
    for attr in reply.attributes {
        match attr {
            RouteAttribute::Oif(i) => route.oif = i,
            RouteAttribute::Gateway(a) => route.gateway = route_ip(a),
            // An IPv4 route with an IPv6 next hop (RFC 5549) names it in
            // RTA_VIA instead of RTA_GATEWAY.
            RouteAttribute::Via(RouteVia::Inet(a)) => route.gateway = Some(a.into()),
            RouteAttribute::Via(RouteVia::Inet6(a)) => route.gateway = Some(a.into()),
            RouteAttribute::PrefSource(a) => route.prefsrc = route_ip(a),
            RouteAttribute::Metrics(metrics) => {
                for m in metrics {
                    if let RouteMetric::Mtu(v) = m {
                        route.mtu = Some(v);
                    }
                }
            }
            _ => {}
        }
    }
    if route.oif == 0 {
        return Err(no_reply(format_args!(
            "route get {dst}: no output interface"
        )));
    }
    Ok(route)
}

/// Interface `ifindex` (RTM_GETLINK), in the calling thread's namespace;
/// `NotFound` when there is none.
pub fn link_info(ifindex: u32) -> io::Result<Link> {
    let mut msg = LinkMessage::default();
    msg.header.index = ifindex;
    get_link(msg).map_err(|e| context(e, format_args!("link {ifindex}")))
}

/// Interface `name` (RTM_GETLINK by IFLA_IFNAME), in the calling thread's
/// namespace; `NotFound` when there is none.
pub fn link_by_name(name: &str) -> io::Result<Link> {
    let mut msg = LinkMessage::default();
    msg.attributes.push(LinkAttribute::IfName(name.to_string()));
    get_link(msg).map_err(|e| context(e, format_args!("link {name}")))
}

fn get_link(msg: LinkMessage) -> io::Result<Link> {
    get_link_message(msg).map(parse_link)
}

/// The kernel's whole answer to RTM_GETLINK `msg`; `NotFound` when there
/// is no such link.
fn get_link_message(mut msg: LinkMessage) -> io::Result<LinkMessage> {
    // Statistics are most of a link message and of no use here.
    msg.attributes
        .push(LinkAttribute::ExtMask(vec![LinkExtentMask::SkipStats]));
    let mut link = None;
    Rtnl::open()?
        .request(RouteNetlinkMessage::GetLink(msg), NLM_F_ACK, |m| {
            if let RouteNetlinkMessage::NewLink(l) = m {
                link = Some(l);
            }
        })
        .map_err(enodev_not_found)?;
    link.ok_or_else(|| no_reply("RTM_GETLINK"))
}

/// The kernel says ENODEV for a link that does not exist, which std
/// leaves uncategorized.
fn enodev_not_found(e: io::Error) -> io::Error {
    match e.raw_os_error() {
        Some(libc::ENODEV) => io::Error::new(io::ErrorKind::NotFound, e),
        _ => e,
    }
}

/// A route to `dst/prefix_len` through interface `ifindex` (`ip route add
/// DST/LEN dev DEV proto static`), in the main table of the calling
/// thread's namespace. Returns false, leaving it alone, when a route to
/// that prefix exists already (the device's own subnet, or one the
/// administrator added): tep only ever removes routes it created.
pub fn route_add(dst: IpAddr, prefix_len: u8, ifindex: u32) -> io::Result<bool> {
    let msg = device_route(dst, prefix_len, ifindex);
    match Rtnl::open()?.request(
        RouteNetlinkMessage::NewRoute(msg),
        NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL,
        |_| {},
    ) {
        Ok(()) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::EEXIST) => Ok(false),
        Err(e) => Err(context(e, format_args!("route add {dst}/{prefix_len}"))),
    }
}

/// Adds `addr/prefix_len` to interface `ifindex` (`ip addr add`): one
/// more address beside those it has (the SIOCSIFADDR ioctl replaces an
/// IPv4 interface's address instead). An address it has already is not
/// an error.
pub fn address_add(ifindex: u32, addr: IpAddr, prefix_len: u8) -> io::Result<()> {
    let mut msg = AddressMessage::default();
    msg.header.family = match addr {
        IpAddr::V4(_) => AddressFamily::Inet,
        IpAddr::V6(_) => AddressFamily::Inet6,
    };
    msg.header.prefix_len = prefix_len;
    msg.header.index = ifindex;
    // IFA_LOCAL is the interface's own address; IFA_ADDRESS the peer's on
    // point-to-point links, the same here.
    msg.attributes.push(AddressAttribute::Local(addr));
    msg.attributes.push(AddressAttribute::Address(addr));
    match Rtnl::open()?.request(
        RouteNetlinkMessage::NewAddress(msg),
        NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL,
        |_| {},
    ) {
        Err(e) if e.raw_os_error() != Some(libc::EEXIST) => {
            Err(context(e, format_args!("address add {addr}/{prefix_len}")))
        }
        _ => Ok(()),
    }
}

/// Removes the route [`route_add`] created; a route already gone (the
/// device went away with its routes) is not an error.
pub fn route_del(dst: IpAddr, prefix_len: u8, ifindex: u32) -> io::Result<()> {
    let msg = device_route(dst, prefix_len, ifindex);
    match Rtnl::open()?.request(RouteNetlinkMessage::DelRoute(msg), NLM_F_ACK, |_| {}) {
        Err(e) if e.raw_os_error() != Some(libc::ESRCH) => {
            Err(context(e, format_args!("route del {dst}/{prefix_len}")))
        }
        _ => Ok(()),
    }
}

/// A unicast, link-scope route message to `dst/prefix_len` out of
/// `ifindex`, protocol static, main table.
fn device_route(dst: IpAddr, prefix_len: u8, ifindex: u32) -> RouteMessage {
    let mut msg = RouteMessage::default();
    msg.header.address_family = match dst {
        IpAddr::V4(_) => AddressFamily::Inet,
        IpAddr::V6(_) => AddressFamily::Inet6,
    };
    msg.header.destination_prefix_length = prefix_len;
    msg.header.table = RouteHeader::RT_TABLE_MAIN;
    msg.header.protocol = RouteProtocol::Static;
    msg.header.scope = RouteScope::Link;
    msg.header.kind = RouteType::Unicast;
    msg.attributes
        .push(RouteAttribute::Destination(RouteAddress::from(dst)));
    msg.attributes.push(RouteAttribute::Oif(ifindex));
    msg
}

/// Asks the kernel to resolve neighbour `ip` on interface `ifindex` now,
/// without a packet to send (RTM_NEWNEIGH with NTF_USE, as `ip neigh
/// replace IP dev DEV use`): the kernel creates the entry if needed and
/// solicits (ARP request, neighbour solicitation) unless it is already
/// reachable; a stale entry is re-verified. The answer arrives as a
/// [`Neighbours`] event. Without this, the first packet tep hands to the
/// kernel starts the same resolution. Permanent and noarp entries are
/// left alone.
pub fn solicit(ifindex: u32, ip: IpAddr) -> io::Result<()> {
    modify_neighbour(ifindex, ip, NeighbourExtFlags::empty())
        .map_err(|e| context(e, format_args!("solicit {ip} on {ifindex}")))
}

/// Makes neighbour `ip` on `ifindex` a managed entry (NTF_MANAGED, Linux
/// 5.16+; `ip neigh replace IP dev DEV managed use`): the kernel resolves
/// it at once and keeps re-probing it so that it stays reachable without
/// traffic. That is what gateway mode wants for its next hops, whose
/// traffic the kernel never sees (tep sends it from userspace) and so
/// never confirms: an unmanaged entry only goes stale, and a next hop
/// whose MAC changed is noticed when something probes it. The entry lives
/// until deleted (`ip neigh del`) or its interface goes down. Permanent
/// and noarp entries are left alone.
pub fn manage(ifindex: u32, ip: IpAddr) -> io::Result<()> {
    // NTF_USE as well, so that an existing entry keeps its state and MAC
    // instead of being reset to the NUD_NONE this request carries.
    modify_neighbour(ifindex, ip, NeighbourExtFlags::Managed)
        .map_err(|e| context(e, format_args!("manage {ip} on {ifindex}")))
}

/// Sets NTF_USE (with `ext`) on the entry of `ip` on `ifindex`, creating it
/// if needed, unless it is permanent or noarp.
fn modify_neighbour(ifindex: u32, ip: IpAddr, ext: NeighbourExtFlags) -> io::Result<()> {
    let mut rtnl = Rtnl::open()?;
    // NTF_USE drops NUD_PERMANENT from the state it keeps, which leaves a
    // permanent entry without a usable MAC; such entries (and noarp ones)
    // need no resolution anyway. ENOENT: no entry yet.
    let mut state = None;
    match rtnl.request(
        RouteNetlinkMessage::GetNeighbour(neighbour_message(ifindex, ip)),
        NLM_F_ACK,
        |m| {
            if let RouteNetlinkMessage::NewNeighbour(m) = m {
                state = Some(NudState::from(m.header.state));
            }
        },
    ) {
        Err(e) if e.raw_os_error() != Some(libc::ENOENT) => return Err(e),
        _ => {}
    }
    if matches!(state, Some(NudState::Permanent | NudState::Noarp)) {
        return Ok(());
    }
    let mut msg = neighbour_message(ifindex, ip);
    msg.header.state = NeighbourState::None;
    msg.header.flags = NeighbourFlags::Use;
    if !ext.is_empty() {
        msg.attributes.push(NeighbourAttribute::ExtFlags(ext));
    }
    rtnl.request(
        RouteNetlinkMessage::NewNeighbour(msg),
        NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE,
        |_| {},
    )
}

/// A neighbour message naming `ip` on `ifindex`.
fn neighbour_message(ifindex: u32, ip: IpAddr) -> NeighbourMessage {
    let mut msg = NeighbourMessage::default();
    msg.header.family = match ip {
        IpAddr::V4(_) => AddressFamily::Inet,
        IpAddr::V6(_) => AddressFamily::Inet6,
    };
    msg.header.ifindex = ifindex;
    msg.attributes
        .push(NeighbourAttribute::Destination(NeighbourAddress::from(ip)));
    msg
}

/// A link message's index, name, MAC, MTU and state.
fn parse_link(msg: LinkMessage) -> Link {
    let mut link = Link {
        index: msg.header.index,
        name: String::new(),
        mac: None,
        mtu: 0,
        up: msg
            .header
            .flags
            .contains(LinkFlags::Up | LinkFlags::Running),
    };
    for attr in msg.attributes {
        match attr {
            LinkAttribute::IfName(n) => link.name = n,
            LinkAttribute::Address(a) => link.mac = mac(&a),
            LinkAttribute::Mtu(m) => link.mtu = m,
            _ => {}
        }
    }
    link
}

/// A 6-byte hardware address; None for any other length.
fn mac(bytes: &[u8]) -> Option<[u8; 6]> {
    bytes.try_into().ok()
}

fn route_ip(a: RouteAddress) -> Option<IpAddr> {
    match a {
        RouteAddress::Inet(v4) => Some(IpAddr::V4(v4)),
        RouteAddress::Inet6(v6) => Some(IpAddr::V6(v6)),
        _ => None,
    }
}

fn neighbour_ip(a: &NeighbourAddress) -> Option<IpAddr> {
    match *a {
        NeighbourAddress::Inet(v4) => Some(IpAddr::V4(v4)),
        NeighbourAddress::Inet6(v6) => Some(IpAddr::V6(v6)),
        _ => None,
    }
}

fn no_reply(what: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{what}: the kernel's reply lacked what was asked"),
    )
}

/// Room for one datagram from the kernel: a dump packs messages into
/// datagrams of at most 32 KiB (netlink_recvmsg caps what it sizes them
/// to), and notifications carry a single message.
const RECV_BUF: usize = 64 * 1024;

/// Room the kernel may queue for a subscriber's notifications before it
/// drops them: bursts (a link going down flushes its neighbours and
/// routes at once; a rejoining EVPN peer brings every MAC) should not
/// overrun it. Past rmem_max only with CAP_NET_ADMIN (SO_RCVBUFFORCE);
/// otherwise what rmem_max permits: a full queue costs a resync, not
/// correctness.
const NOTIFY_RCVBUF: libc::c_int = 4 << 20;

/// A non-blocking socket subscribed to `groups` (RTNLGRP_*), in the
/// calling thread's namespace: what each watcher here starts from.
fn subscribe(groups: &[u32]) -> io::Result<Socket> {
    let mut sock = Socket::new(NETLINK_ROUTE).map_err(|e| context(e, "socket(NETLINK_ROUTE)"))?;
    let fd = std::os::fd::AsRawFd::as_raw_fd(&sock);
    use crate::sys::setsockopt_int;
    if setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, NOTIFY_RCVBUF).is_err() {
        setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, NOTIFY_RCVBUF)
            .map_err(|e| context(e, "SO_RCVBUF"))?;
    }
    sock.bind_auto()
        .map_err(|e| context(e, "bind(NETLINK_ROUTE)"))?;
    for &group in groups {
        sock.add_membership(group)
            .map_err(|e| context(e, format_args!("NETLINK_ADD_MEMBERSHIP {group}")))?;
    }
    sock.set_non_blocking(true)
        .map_err(|e| context(e, "O_NONBLOCK"))?;
    Ok(sock)
}

/// Messages a watcher did not turn into events.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Counts {
    /// Every message skipped, malformed ones included.
    skipped: u64,
    /// Those that did not decode.
    malformed: u64,
}

impl Counts {
    fn count_malformed(&mut self) {
        self.skipped += 1;
        self.malformed += 1;
    }
}

/// What one non-blocking receive of a subscribed socket gave.
enum Notified {
    /// A whole datagram, in the buffer.
    Datagram,
    /// Nothing queued.
    Empty,
    /// A datagram larger than the buffer: what did not fit is lost, as an
    /// overflow's drops are.
    Truncated(usize),
}

/// Receives one queued notification datagram into `buf` (cleared first).
/// ENOBUFS (the queue overflowed: notifications were dropped) comes back
/// as the error it is.
fn recv_notification(sock: &Socket, buf: &mut Vec<u8>) -> io::Result<Notified> {
    buf.clear();
    match retry(|| sock.recv(buf, libc::MSG_TRUNC | libc::MSG_DONTWAIT)) {
        Ok(n) if n > buf.len() => Ok(Notified::Truncated(n)),
        Ok(_) => Ok(Notified::Datagram),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(Notified::Empty),
        Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => Err(e),
        Err(e) => Err(context(e, "recv(NETLINK_ROUTE notifications)")),
    }
}

/// A NETLINK_ROUTE socket connected to the kernel for one request at a time.
struct Rtnl {
    sock: Socket,
    seq: u32,
    buf: Vec<u8>,
}

impl Rtnl {
    /// Sends dump request `msg` and hands each answer (its type and
    /// payload) to `each` until the dump's end. A message is `each`'s to
    /// judge (decode, or skip and count): one the crate could not parse
    /// does not fail the dump; a header that does not fit its datagram
    /// does (the rest of it, perhaps the dump's end, is lost).
    fn dump(
        &mut self,
        msg: RouteNetlinkMessage,
        what: &str,
        mut each: impl FnMut(u16, &[u8]),
    ) -> io::Result<()> {
        self.send(msg, NLM_F_DUMP).map_err(|e| context(e, what))?;
        loop {
            self.recv().map_err(|e| context(e, what))?;
            for m in bridge::Messages(&self.buf) {
                let Some((kind, seq, payload)) = m else {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("{what}: a message header that does not fit its datagram"),
                    ));
                };
                if seq != self.seq {
                    continue;
                }
                match kind {
                    NLMSG_DONE => return Ok(()),
                    NLMSG_ERROR => return Err(bridge::error_of(payload, what)),
                    _ => each(kind, payload),
                }
            }
        }
    }

    fn open() -> io::Result<Rtnl> {
        let mut sock =
            Socket::new(NETLINK_ROUTE).map_err(|e| context(e, "socket(NETLINK_ROUTE)"))?;
        sock.bind_auto()
            .map_err(|e| context(e, "bind(NETLINK_ROUTE)"))?;
        sock.connect(&SocketAddr::new(0, 0))
            .map_err(|e| context(e, "connect(NETLINK_ROUTE)"))?;
        Ok(Rtnl {
            sock,
            seq: 0,
            buf: Vec::with_capacity(RECV_BUF),
        })
    }

    /// Sends `msg` with `flags` (NLM_F_REQUEST added) and hands each
    /// message of the answer to `each`, until the answer ends: NLMSG_DONE
    /// for a dump (NLM_F_DUMP), the ACK otherwise (so other requests must
    /// carry NLM_F_ACK). An NLMSG_ERROR becomes the error.
    fn request(
        &mut self,
        msg: RouteNetlinkMessage,
        flags: u16,
        mut each: impl FnMut(RouteNetlinkMessage),
    ) -> io::Result<()> {
        self.send(msg, flags)?;
        loop {
            self.recv()?;
            for m in Datagram(&self.buf) {
                let m = m?;
                // A reply to an earlier request this socket gave up on.
                if m.header.sequence_number != self.seq {
                    continue;
                }
                match m.payload {
                    NetlinkPayload::InnerMessage(inner) => each(inner),
                    NetlinkPayload::Done(_) => return Ok(()),
                    NetlinkPayload::Error(e) => {
                        return match e.code {
                            None => Ok(()),
                            Some(_) => Err(e.to_io()),
                        }
                    }
                    _ => {}
                }
            }
        }
    }

    /// Sends `msg` with `flags` (NLM_F_REQUEST added) under a new sequence
    /// number.
    fn send(&mut self, msg: RouteNetlinkMessage, flags: u16) -> io::Result<()> {
        debug_assert!(flags & (NLM_F_DUMP | NLM_F_ACK) != 0, "the answer must end");
        self.seq = self.seq.wrapping_add(1);
        let mut header = NetlinkHeader::default();
        header.flags = NLM_F_REQUEST | flags;
        header.sequence_number = self.seq;
        let mut packet = NetlinkMessage::new(header, NetlinkPayload::InnerMessage(msg));
        packet.finalize();
        let mut out = vec![0u8; packet.buffer_len()];
        packet.serialize(&mut out);
        retry(|| self.sock.send(&out, 0)).map_err(|e| context(e, "send(NETLINK_ROUTE)"))?;
        Ok(())
    }

    /// Waits for the next datagram of the answer, into `buf`.
    fn recv(&mut self) -> io::Result<()> {
        self.buf.clear();
        let n = retry(|| self.sock.recv(&mut self.buf, libc::MSG_TRUNC))
            .map_err(|e| context(e, "recv(NETLINK_ROUTE)"))?;
        if n > self.buf.len() {
            return Err(truncated(n));
        }
        Ok(())
    }
}

fn truncated(n: usize) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("a netlink datagram of {n} bytes does not fit {RECV_BUF}"),
    )
}

/// The netlink messages of one datagram, decoded.
struct Datagram<'a>(&'a [u8]);

impl Iterator for Datagram<'_> {
    type Item = io::Result<NetlinkMessage<RouteNetlinkMessage>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.0.is_empty() {
            return None;
        }
        let len = match NetlinkBuffer::new_checked(self.0) {
            Ok(b) => b.length() as usize,
            Err(e) => {
                self.0 = &[];
                return Some(Err(invalid(e)));
            }
        };
        let (this, rest) = self.0.split_at(len);
        // Messages start on 4-byte boundaries (NLMSG_ALIGN).
        self.0 = rest.get(len.next_multiple_of(4) - len..).unwrap_or(&[]);
        Some(NetlinkMessage::deserialize(this).map_err(invalid))
    }
}

fn invalid(e: netlink_packet_core::DecodeError) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("netlink message: {e}"))
}
