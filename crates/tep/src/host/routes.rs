//! Kernel routes for what the L3 tunnels carry: each tunnel's
//! `inner_prefixes` through the TUN, as wg-quick routes a WireGuard
//! interface's AllowedIPs, so that a ping to a tunnelled prefix reaches tep
//! without a route added by hand. Over rtnetlink (tep-sys, the same crate
//! as gateway mode). tep removes only routes it created: a prefix the
//! kernel already routes (the TUN's own subnet, an administrator's route)
//! is left as it is.

use std::net::IpAddr;
use tep_config::Config;

/// The routes tep installed through one device.
pub struct KernelRoutes {
    ifindex: u32,
    device: String,
    installed: Vec<(IpAddr, u8)>,
    /// Prefixes found routed already when tep asked: left alone, and not
    /// asked again at each reload (a daemon that dropped CAP_NET_ADMIN
    /// could not even ask).
    found: Vec<(IpAddr, u8)>,
}

/// Each L3 tunnel's inner prefixes, each once; of a UPF's N3 tunnels,
/// only the UE pools of the data network on this TUN (the others have
/// TUNs of their own: `data_networks`).
fn wanted(config: &Config) -> Vec<(IpAddr, u8)> {
    let mut out: Vec<(IpAddr, u8)> = Vec::new();
    let upf = super::data_networks::host_tun_prefixes(config);
    for t in config.tunnels.iter().filter(|t| !t.kind.carries_ethernet()) {
        let prefixes = if t.sessions { &upf } else { &t.inner_prefixes };
        for p in prefixes {
            if !out.contains(&(p.addr, p.len)) {
                out.push((p.addr, p.len));
            }
        }
    }
    out
}

impl KernelRoutes {
    pub fn new(ifindex: u32, device: &str) -> KernelRoutes {
        KernelRoutes {
            ifindex,
            device: device.to_string(),
            installed: Vec::new(),
            found: Vec::new(),
        }
    }

    /// Makes the routes follow `config`: adds what is missing, removes
    /// what tep added that the config no longer names. An error names the
    /// prefix and what the kernel said.
    pub fn sync(&mut self, config: &Config) -> Result<(), String> {
        self.sync_to(&wanted(config))
    }

    /// Makes the routes these prefixes, as [`sync`](KernelRoutes::sync).
    pub fn sync_to(&mut self, want: &[(IpAddr, u8)]) -> Result<(), String> {
        let want = want.to_vec();
        self.found.retain(|r| want.contains(r));
        let gone: Vec<(IpAddr, u8)> = self
            .installed
            .iter()
            .filter(|r| !want.contains(r))
            .copied()
            .collect();
        for (addr, len) in gone {
            tep_sys::netlink::route_del(addr, len, self.ifindex)
                .map_err(|e| format!("host.routes: cannot remove {addr}/{len}: {e}"))?;
            self.installed.retain(|&r| r != (addr, len));
            tracing::info!(route = %format!("{addr}/{len}"), device = %self.device, "route removed");
        }
        for (addr, len) in want {
            if self.installed.contains(&(addr, len)) || self.found.contains(&(addr, len)) {
                continue;
            }
            let created = tep_sys::netlink::route_add(addr, len, self.ifindex).map_err(|e| {
                format!(
                    "host.routes: cannot route {addr}/{len} through {}: {e}",
                    self.device
                )
            })?;
            if created {
                self.installed.push((addr, len));
                tracing::info!(route = %format!("{addr}/{len}"), device = %self.device, "route added");
            } else {
                self.found.push((addr, len));
                tracing::info!(
                    route = %format!("{addr}/{len}"),
                    device = %self.device,
                    "route exists already: left as it is"
                );
            }
        }
        Ok(())
    }

    /// Removes every route tep added (at exit; the TUN's deletion would
    /// take them too, a persistent TUN would not).
    pub fn clear(&mut self) {
        for (addr, len) in std::mem::take(&mut self.installed) {
            if let Err(e) = tep_sys::netlink::route_del(addr, len, self.ifindex) {
                tracing::warn!("cannot remove route {addr}/{len}: {e}");
            }
        }
    }
}
