//! The kernel devices through which zebra sees an EVPN network: a bridge,
//! a VXLAN device of the network's VNI and tep's address on it (up, on
//! `[evpn] port`, carrying nothing), and tep's port on the bridge, a TAP
//! nobody reads, where tep's local MACs are written as static entries.

use std::io;
use std::net::IpAddr;
use tep_config::EvpnConfig;
use tep_dataplane::config::{default_evpn_device, Control, TunnelConfig};
use tep_sys::netlink::{self, VxlanDevice};
use tep_sys::tun::{DeviceKind, Offloads, Tun, TunOptions};

/// An EVPN network's devices. Those tep created (`[evpn] create`, when
/// missing) are removed when dropped: zebra then withdraws the VNI's
/// routes, this VTEP is gone. Devices the operator made stay, with the
/// FDB zebra keeps in them: a restarted tep starts from its dump.
#[derive(Debug)]
pub struct NetDevices {
    /// The VXLAN device: its name and ifindex.
    pub vxlan: (String, u32),
    /// The bridge it is on.
    pub bridge: (String, u32),
    /// tep's port on the bridge (closed, it disappears).
    pub port: Tun,
    /// Devices to delete when dropped, the VXLAN device first.
    created: Vec<u32>,
}

impl Drop for NetDevices {
    fn drop(&mut self) {
        for &ifindex in &self.created {
            if let Err(e) = netlink::link_delete(ifindex) {
                tracing::warn!(ifindex, "evpn: cannot remove a kernel device: {e}");
            }
        }
    }
}

/// The bridge of a network of `vni` that tep creates.
fn bridge_name(vni: u32) -> String {
    format!("tepbr{vni}")
}

/// tep's port on the bridge.
fn port_name(vni: u32) -> String {
    format!("tepmac{vni}")
}

/// Finds or makes network `t`'s devices (`t` has `control = "evpn"`).
pub fn open(evpn: &EvpnConfig, t: &TunnelConfig) -> Result<NetDevices, String> {
    let Some(Control::Evpn { device }) = t.network.as_deref().map(|n| &n.control) else {
        return Err(format!("network \"{}\" is not an EVPN network", t.name));
    };
    let name = device.clone().unwrap_or_else(|| default_evpn_device(t.vni));
    let fail = |what: &str, e: io::Error| format!("evpn: network \"{}\": {what}: {e}", t.name);
    let mut created = Vec::new();
    let existing = match netlink::link_by_name(&name) {
        Ok(l) => Some(l.index),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(fail(&format!("looking for {name}"), e)),
    };
    let vxlan = match existing {
        Some(ifindex) => ifindex,
        None if evpn.create => {
            let want = VxlanDevice {
                name: &name,
                vni: t.vni,
                local: t.local,
                port: evpn.port,
            };
            let ifindex = netlink::vxlan_create(&want)
                .map_err(|e| fail(&format!("creating VXLAN device {name}"), e))?;
            created.push(ifindex);
            quiet(&name);
            ifindex
        }
        None => {
            return Err(format!(
                "evpn: network \"{}\": no device {name}; make it (a VXLAN device of VNI {} with local {} on a bridge) or set [evpn] create = true",
                t.name, t.vni, t.local
            ))
        }
    };
    let master = check_vxlan(&name, vxlan, t.vni, t.local)?;
    let bridge = match master {
        Some(m) => {
            let b = netlink::link_info(m).map_err(|e| fail(&format!("the bridge of {name}"), e))?;
            (b.name, m)
        }
        None if evpn.create => {
            let b = bridge_name(t.vni);
            let ifindex =
                netlink::bridge_create(&b).map_err(|e| fail(&format!("creating bridge {b}"), e))?;
            created.insert(0, ifindex);
            no_addresses(&b);
            netlink::link_set_master(vxlan, ifindex)
                .map_err(|e| fail(&format!("putting {name} on {b}"), e))?;
            (b, ifindex)
        }
        None => {
            return Err(format!(
            "evpn: {name} is on no bridge; zebra takes a VNI only from a VXLAN device on a bridge"
        ))
        }
    };
    netlink::link_set_up(bridge.1, true)
        .map_err(|e| fail(&format!("setting {} up", bridge.0), e))?;
    // zebra drops a VNI whose device is down.
    netlink::link_set_up(vxlan, true).map_err(|e| fail(&format!("setting {name} up"), e))?;
    let port = open_port(t.vni, bridge.1).map_err(|e| fail("tep's port on the bridge", e))?;
    Ok(NetDevices {
        vxlan: (name, vxlan),
        bridge,
        port,
        created,
    })
}

/// The device is VXLAN of this VNI and address; returns its bridge.
fn check_vxlan(name: &str, ifindex: u32, vni: u32, local: IpAddr) -> Result<Option<u32>, String> {
    let info = netlink::vxlan_info(ifindex)
        .map_err(|e| format!("evpn: reading {name}: {e}"))?
        .ok_or_else(|| format!("evpn: {name} is not a VXLAN device"))?;
    if info.vni != vni || info.local != Some(local) {
        return Err(format!(
            "evpn: {name} is VNI {} local {}, not VNI {vni} local {local}: remove it or name another (evpn_device)",
            info.vni,
            info.local.map_or("none".to_string(), |a| a.to_string()),
        ));
    }
    Ok(info.master)
}

/// A device of tep's that must carry nothing: no IPv6 link-local address,
/// so the kernel sends no DAD or router solicitation through it.
fn quiet(dev: &str) {
    let _ = tep_sys::sysctl::set(&tep_sys::sysctl::ipv6_conf(dev, "disable_ipv6"), "1");
}

/// tep's bridge: IPv6 on, so that it holds IPv6 neighbours (zebra's and
/// tep's MAC+IP bindings, `neigh.rs`), but no address of its own (no
/// link-local address: no DAD, no router solicitation through it).
/// On even where IPv6 is off by default (`default.disable_ipv6`).
fn no_addresses(bridge: &str) {
    let conf = |key| tep_sys::sysctl::ipv6_conf(bridge, key);
    let _ = tep_sys::sysctl::set(&conf("addr_gen_mode"), "1");
    let _ = tep_sys::sysctl::set(&conf("disable_ipv6"), "0");
}

/// tep's port: a TAP on the bridge, up, read by nobody.
fn open_port(vni: u32, bridge: u32) -> io::Result<Tun> {
    let port = Tun::open(&TunOptions {
        name: port_name(vni),
        kind: DeviceKind::Tap,
        queues: 1,
        vnet_hdr: false,
        vnet_hdr_tunnel: false,
        offloads: Offloads::none(),
    })?;
    quiet(port.name());
    netlink::link_set_master(port.ifindex(), bridge)?;
    netlink::link_set_up(port.ifindex(), true)?;
    Ok(port)
}
