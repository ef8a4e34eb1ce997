//! The underlay at run time: a thread that follows the kernel's link
//! notifications (rtnetlink, tep-sys's [`Neighbours`] table) for the
//! interfaces holding the tunnels' local addresses. Each change is logged
//! once — down, up, a new MTU, a tunnel's local address removed or back —
//! and a new MTU moves the TUN/TAP's MTU the way it was set at start
//! ([`super::device_mtu`]), unless the config fixes `host.mtu` or
//! `host.underlay_mtu`. The datapath needs nothing else: the sockets stay
//! bound through a link going down and up and through their address
//! leaving and coming back (Linux keeps a socket bound to an address that
//! is gone; its sends fail until the address returns, counted as
//! `send_failed`), and traffic resumes with the link or the address.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tep_config::Config;
use tep_sys::netlink::{Event, Neighbours};

use crate::daemon::liveness;
use crate::daemon::state::State;

/// The thread; it ends when `stop` is set.
pub struct LinkWatch {
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<Result<(), String>>>,
}

impl Drop for LinkWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Starts following the underlay of the running config (`state.config`,
/// which a reload replaces) for the devices `devices` (name, carries
/// Ethernet).
pub fn watch(state: Arc<State>, devices: Vec<(String, bool)>) -> Result<LinkWatch, String> {
    let mut table = Neighbours::new().map_err(|e| format!("link notifications: {e}"))?;
    // What the underlay interfaces are now, so that the first change of
    // each is told from its state at start.
    let config = state
        .config
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let mut seen: HashMap<u32, (String, u32, bool)> = HashMap::new();
    for t in &config.tunnels {
        if let Ok(Some((name, _))) = tep_sys::iface::holding(t.local) {
            if let Ok(l) = tep_sys::netlink::link_by_name(&name) {
                seen.insert(l.index, (name, l.mtu, l.up));
            }
        }
    }
    // The tunnels' local addresses seen removed and not back yet (at
    // start every one is present: the sockets bound to them).
    let mut gone: HashSet<IpAddr> = HashSet::new();
    let stop = Arc::new(AtomicBool::new(false));
    let stopped = stop.clone();
    let shared = state.shared.clone();
    let handle = liveness::spawn(&shared.liveness, "links", Duration::ZERO, move |beat| {
        let mut events = Vec::new();
        while !stopped.load(Ordering::Acquire) {
            beat.beat();
            events.clear();
            if let Err(e) = table.poll_events(&mut events) {
                tracing::warn!("link notifications: {e}");
            }
            for ev in &events {
                let cfg = || {
                    state
                        .config
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .clone()
                };
                match *ev {
                    Event::Link {
                        ifindex, mtu, up, ..
                    } => changed(&cfg(), &devices, &mut seen, ifindex, mtu, up),
                    Event::Address { ifindex, ip, added } => {
                        address(&cfg(), &mut gone, ifindex, ip, added)
                    }
                    _ => {}
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(())
    })
    .map_err(|e| format!("cannot start the link thread: {e}"))?;
    Ok(LinkWatch {
        stop,
        handle: Some(handle),
    })
}

/// One address notification: logged once per change if it is a tunnel's
/// local address (IPv6 addresses are notified again when their flags
/// change: only a change of presence is logged). `gone` holds the local
/// addresses removed and not back yet.
fn address(config: &Config, gone: &mut HashSet<IpAddr>, ifindex: u32, ip: IpAddr, added: bool) {
    let tunnels: Vec<&str> = config
        .tunnels
        .iter()
        .filter(|t| t.local == ip)
        .map(|t| t.name.as_str())
        .collect();
    if tunnels.is_empty() {
        return;
    }
    let changed = if added {
        gone.remove(&ip)
    } else {
        gone.insert(ip)
    };
    if !changed {
        return;
    }
    let on = tep_sys::netlink::link_info(ifindex)
        .map(|l| l.name)
        .unwrap_or_else(|_| format!("ifindex {ifindex}"));
    let tunnels = tunnels.join(", ");
    if added {
        tracing::info!(address = %ip, interface = %on, %tunnels, "underlay address back: traffic resumes");
    } else {
        tracing::warn!(address = %ip, interface = %on, %tunnels, "underlay address removed: these tunnels cannot send until it is back");
    }
}

/// One link notification: logged once per change if it is an underlay
/// interface, and the devices' MTU follows a new MTU.
fn changed(
    config: &Config,
    devices: &[(String, bool)],
    seen: &mut HashMap<u32, (String, u32, bool)>,
    ifindex: u32,
    mtu: u32,
    up: bool,
) {
    let name = match tep_sys::netlink::link_info(ifindex) {
        Ok(l) => l.name,
        Err(_) => return,
    };
    let underlay = config
        .tunnels
        .iter()
        .any(|t| matches!(tep_sys::iface::holding(t.local), Ok(Some((n, _))) if n == name))
        || seen.contains_key(&ifindex);
    if !underlay {
        return;
    }
    let before = seen.insert(ifindex, (name.clone(), mtu, up));
    let Some((_, old_mtu, was_up)) = before else {
        tracing::info!(underlay = %name, mtu, up, "following the underlay interface");
        return;
    };
    if was_up != up {
        if up {
            tracing::info!(underlay = %name, "underlay up: traffic resumes");
        } else {
            tracing::warn!(underlay = %name, "underlay down: tunnel traffic stops until it is up");
        }
    }
    if old_mtu != mtu {
        tracing::info!(underlay = %name, from = old_mtu, to = mtu, "underlay MTU changed");
        if config.host.mtu.is_some() || config.host.underlay_mtu.is_some() {
            return;
        }
        for (dev, ethernet) in devices {
            let want = super::device_mtu(config, *ethernet);
            match tep_sys::iface::set_mtu(dev, want) {
                Ok(()) => {
                    tracing::info!(device = %dev, mtu = want, "device MTU follows the underlay")
                }
                Err(e) => tracing::warn!(device = %dev, "cannot set MTU {want}: {e}"),
            }
        }
    }
}
