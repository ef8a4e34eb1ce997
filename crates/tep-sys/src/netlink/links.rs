//! The kernel devices of an EVPN VTEP: per tep network a bridge, and on it
//! a VXLAN device the routing daemon (FRR's zebra) reads the VNI and the
//! VTEP address from. tep creates, enslaves, raises and deletes them over
//! rtnetlink (`ip link add|set|del`), and reads a VXLAN device back to
//! check that one found at start-up is the one it would have made.

use std::io;
use std::net::IpAddr;

use netlink_packet_core::{NLM_F_ACK, NLM_F_CREATE, NLM_F_EXCL};
use netlink_packet_route::link::{
    InfoData, InfoKind, InfoVxlan, LinkAttribute, LinkFlags, LinkInfo, LinkMessage,
};
use netlink_packet_route::RouteNetlinkMessage;

use super::{enodev_not_found, get_link_message, link_by_name, Rtnl};
use crate::sys::context;

/// The largest VNI: 24 bits on the wire.
const VNI_MAX: u32 = (1 << 24) - 1;

/// A VXLAN device to create: `ip link add NAME type vxlan id VNI local
/// LOCAL dstport PORT nolearning`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VxlanDevice<'a> {
    /// Interface name, at most 15 bytes.
    pub name: &'a str,
    /// The VNI (24 bits).
    pub vni: u32,
    /// The VTEP address the routing daemon advertises.
    pub local: IpAddr,
    /// The UDP port the kernel device binds (on the wildcard address, even
    /// with `local`): not tep's own port, or tep's bind fails.
    pub port: u16,
}

/// A VXLAN device as the kernel describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VxlanInfo {
    /// Its VNI.
    pub vni: u32,
    /// Its source address; None when it has none.
    pub local: Option<IpAddr>,
    /// Its UDP destination port (0 if the kernel did not say).
    pub port: u16,
    /// The bridge it is a port of.
    pub master: Option<u32>,
    /// Administratively up (IFF_UP).
    pub up: bool,
}

/// Creates bridge `name` (`ip link add NAME type bridge`) in the calling
/// thread's namespace, down, with the kernel's defaults; returns its index.
/// `AlreadyExists` when a link of that name exists; `InvalidInput` for a
/// name the kernel would refuse.
pub fn bridge_create(name: &str) -> io::Result<u32> {
    new_link(name, InfoKind::Bridge, None)
}

/// Creates the VXLAN device `dev` (learning off: the routing daemon, not
/// the data path, fills its forwarding table), down; returns its index.
/// `AlreadyExists` when a link of that name exists; `InvalidInput` for a
/// bad name, a VNI over 24 bits or port 0 (which the kernel would replace
/// by its own default).
pub fn vxlan_create(dev: &VxlanDevice<'_>) -> io::Result<u32> {
    let invalid = |what: String| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("vxlan {}: {what}", dev.name),
        )
    };
    if dev.vni > VNI_MAX {
        return Err(invalid(format!("vni {} is over {VNI_MAX}", dev.vni)));
    }
    if dev.port == 0 {
        return Err(invalid("port 0".into()));
    }
    let local = match dev.local {
        IpAddr::V4(a) => InfoVxlan::Local(a),
        IpAddr::V6(a) => InfoVxlan::Local6(a),
    };
    let data = vec![
        InfoVxlan::Id(dev.vni),
        local,
        InfoVxlan::Port(dev.port),
        InfoVxlan::Learning(false),
    ];
    new_link(dev.name, InfoKind::Vxlan, Some(InfoData::Vxlan(data)))
}

/// Makes `ifindex` a port of bridge `master` (`ip link set DEV master
/// BR`); `master` 0 takes it off its bridge (`nomaster`).
pub fn link_set_master(ifindex: u32, master: u32) -> io::Result<()> {
    let mut msg = LinkMessage::default();
    msg.header.index = ifindex;
    msg.attributes.push(LinkAttribute::Controller(master));
    set_link(msg).map_err(|e| context(e, format_args!("link {ifindex} master {master}")))
}

/// Sets `ifindex` administratively up or down (`ip link set DEV up|down`).
pub fn link_set_up(ifindex: u32, up: bool) -> io::Result<()> {
    let mut msg = LinkMessage::default();
    msg.header.index = ifindex;
    msg.header.change_mask = LinkFlags::Up;
    if up {
        msg.header.flags = LinkFlags::Up;
    }
    set_link(msg).map_err(|e| context(e, format_args!("link {ifindex} up={up}")))
}

/// Deletes link `ifindex` (`ip link del`); `NotFound` when there is none.
pub fn link_delete(ifindex: u32) -> io::Result<()> {
    let mut msg = LinkMessage::default();
    msg.header.index = ifindex;
    Rtnl::open()?
        .request(RouteNetlinkMessage::DelLink(msg), NLM_F_ACK, |_| {})
        .map_err(|e| context(enodev_not_found(e), format_args!("link del {ifindex}")))
}

/// What the kernel says of VXLAN device `ifindex`; None when the link is
/// not a VXLAN device, `NotFound` when there is no such link.
pub fn vxlan_info(ifindex: u32) -> io::Result<Option<VxlanInfo>> {
    let mut msg = LinkMessage::default();
    msg.header.index = ifindex;
    let msg = get_link_message(msg).map_err(|e| context(e, format_args!("link {ifindex}")))?;
    Ok(parse_vxlan(msg))
}

/// A VXLAN link message's settings; None for any other kind of link.
fn parse_vxlan(msg: LinkMessage) -> Option<VxlanInfo> {
    let mut vxlan = false;
    let mut data = Vec::new();
    let mut info = VxlanInfo {
        vni: 0,
        local: None,
        port: 0,
        master: None,
        up: msg.header.flags.contains(LinkFlags::Up),
    };
    for attr in msg.attributes {
        match attr {
            LinkAttribute::Controller(m) => info.master = Some(m),
            LinkAttribute::LinkInfo(infos) => {
                for i in infos {
                    match i {
                        LinkInfo::Kind(InfoKind::Vxlan) => vxlan = true,
                        LinkInfo::Data(InfoData::Vxlan(d)) => data = d,
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    for d in data {
        match d {
            InfoVxlan::Id(v) => info.vni = v,
            InfoVxlan::Local(a) => info.local = Some(a.into()),
            InfoVxlan::Local6(a) => info.local = Some(a.into()),
            InfoVxlan::Port(p) => info.port = p,
            _ => {}
        }
    }
    vxlan.then_some(info)
}

/// RTM_NEWLINK of a new `kind` device `name` (never an existing one:
/// NLM_F_EXCL), then its index.
fn new_link(name: &str, kind: InfoKind, data: Option<InfoData>) -> io::Result<u32> {
    check_name(name)?;
    let mut info = vec![LinkInfo::Kind(kind)];
    info.extend(data.map(LinkInfo::Data));
    let mut msg = LinkMessage::default();
    msg.attributes.push(LinkAttribute::IfName(name.to_string()));
    msg.attributes.push(LinkAttribute::LinkInfo(info));
    Rtnl::open()?
        .request(
            RouteNetlinkMessage::NewLink(msg),
            NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL,
            |_| {},
        )
        .map_err(|e| context(e, format_args!("link add {name}")))?;
    // The acknowledgement carries no index; a name is unique in a
    // namespace.
    Ok(link_by_name(name)?.index)
}

/// RTM_SETLINK of an existing link.
fn set_link(msg: LinkMessage) -> io::Result<()> {
    Rtnl::open()?
        .request(RouteNetlinkMessage::SetLink(msg), NLM_F_ACK, |_| {})
        .map_err(enodev_not_found)
}

/// Refuses what the kernel's dev_valid_name refuses, with the name in the
/// error instead of a bare EINVAL: empty, over IFNAMSIZ - 1 bytes, `.`,
/// `..`, or with `/`, `:`, NUL or white space in it.
fn check_name(name: &str) -> io::Result<()> {
    let bad = name.is_empty()
        || name.len() >= libc::IFNAMSIZ
        || name == "."
        || name == ".."
        || name
            .bytes()
            .any(|b| b == b'/' || b == b':' || b == 0 || b.is_ascii_whitespace() || b == 0x0b);
    if bad {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "interface name {name:?}: must be 1..={} bytes, without '/', ':', NUL or spaces, not '.' or '..'",
                libc::IFNAMSIZ - 1
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_kernel_refuses_are_refused_here() {
        for ok in ["br100", "vx-100", "a", "fifteen_bytes_x"] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "sixteen_bytes_xx",
            ".",
            "..",
            "a/b",
            "a:b",
            "a b",
            "a\tb",
            "a\0",
        ] {
            let e = check_name(bad).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{bad:?}");
            assert!(e.to_string().contains(&format!("{bad:?}")), "{e}");
        }
    }

    #[test]
    fn bad_vxlan_settings_are_refused_before_the_kernel_sees_them() {
        let dev = VxlanDevice {
            name: "vx0",
            vni: 1 << 24,
            local: "192.0.2.1".parse().unwrap(),
            port: 4790,
        };
        let e = vxlan_create(&dev).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("vni 16777216"), "{e}");
        let e = vxlan_create(&VxlanDevice {
            vni: 100,
            port: 0,
            ..dev
        })
        .unwrap_err();
        assert!(e.to_string().contains("port 0"), "{e}");
        let e = vxlan_create(&VxlanDevice {
            vni: 100,
            name: "a_name_far_too_long",
            ..dev
        })
        .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("a_name_far_too_long"), "{e}");
    }
}
