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

/// An EVPN network's devices; those tep created are removed when dropped
/// (zebra then withdraws the VNI's routes: this VTEP is gone).
#[derive(Debug)]
pub struct NetDevices {
    /// The VXLAN device: its name and ifindex.
    pub vxlan: (String, u32),
    /// The bridge it is on.
    pub bridge: (String, u32),
    /// tep's port on the bridge (closed, it disappears).
    pub port: Tun,
    /// Devices to delete when dropped, in order.
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
    let (vxlan, bridge) = if evpn.create {
        let want = VxlanDevice {
            name: &name,
            vni: t.vni,
            local: t.local,
            port: evpn.port,
        };
        let vxlan = made_or_found(netlink::vxlan_create(&want), &name)
            .map_err(|e| fail(&format!("creating VXLAN device {name}"), e))?;
        created.push(vxlan);
        check_vxlan(&name, vxlan, t.vni, t.local, Some(evpn.port))?;
        let b = bridge_name(t.vni);
        let bridge = made_or_found(netlink::bridge_create(&b), &b)
            .map_err(|e| fail(&format!("creating bridge {b}"), e))?;
        created.push(bridge);
        quiet(&b);
        quiet(&name);
        netlink::link_set_master(vxlan, bridge)
            .map_err(|e| fail(&format!("putting {name} on {b}"), e))?;
        netlink::link_set_up(bridge, true).map_err(|e| fail(&format!("setting {b} up"), e))?;
        (vxlan, (b, bridge))
    } else {
        let vxlan = netlink::link_by_name(&name)
            .map_err(|e| {
                fail(
                    &format!(
                        "evpn_device {name} (with [evpn] create = false, the operator makes it)"
                    ),
                    e,
                )
            })?
            .index;
        let master = check_vxlan(&name, vxlan, t.vni, t.local, None)?;
        let bridge =
            netlink::link_info(master).map_err(|e| fail(&format!("the bridge of {name}"), e))?;
        (vxlan, (bridge.name, master))
    };
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

/// The ifindex of a device just made, or of the one of that name found.
fn made_or_found(made: io::Result<u32>, name: &str) -> io::Result<u32> {
    match made {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            netlink::link_by_name(name).map(|l| l.index)
        }
        other => other,
    }
}

/// The device is VXLAN of this VNI and address (and port, when tep made
/// it) on a bridge; returns the bridge's ifindex (0 before tep put it on
/// one).
fn check_vxlan(
    name: &str,
    ifindex: u32,
    vni: u32,
    local: IpAddr,
    port: Option<u16>,
) -> Result<u32, String> {
    let info = netlink::vxlan_info(ifindex)
        .map_err(|e| format!("evpn: reading {name}: {e}"))?
        .ok_or_else(|| format!("evpn: {name} is not a VXLAN device"))?;
    let port_ok = port.is_none_or(|p| p == info.port);
    if info.vni != vni || info.local != Some(local) || !port_ok {
        return Err(format!(
            "evpn: {name} exists as VNI {} local {} port {}, not VNI {vni} local {local}{}: remove it or name another (evpn_device)",
            info.vni,
            info.local.map_or("none".to_string(), |a| a.to_string()),
            info.port,
            port.map_or(String::new(), |p| format!(" port {p}")),
        ));
    }
    match (port, info.master) {
        (_, Some(m)) => Ok(m),
        (Some(_), None) => Ok(0),
        (None, None) => Err(format!(
            "evpn: {name} is on no bridge; zebra takes a VNI only from a VXLAN device on a bridge"
        )),
    }
}

/// A device of tep's that must carry nothing: no IPv6 link-local address,
/// so the kernel sends no DAD or router solicitation through it.
fn quiet(dev: &str) {
    let _ = tep_sys::sysctl::set(&tep_sys::sysctl::ipv6_conf(dev, "disable_ipv6"), "1");
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
