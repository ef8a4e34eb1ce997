//! A UPF's data networks in host mode (`[[pfcp.network]]`): each on its
//! own TUN, its UE pools routed into it. The network whose `tun` is left
//! out (or names `[host] tun`) shares the host's TUN with the
//! point-to-point tunnels; the others get a TUN of their own, opened here
//! with the host's queues and offloads. A worker reads each TUN's queue
//! and tells its pipeline which network the batch came from (downlink
//! lookups are by network and UE address); an uplink packet leaves by its
//! session's network's TUN (`device_io::write_inner`).

use super::routes::KernelRoutes;
use tep_config::{Config, ConfigError, IpPrefix};
use tep_sys::{DeviceKind, Offloads, Tun, TunOptions};

/// Where a network's packets go in host mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Device {
    /// `[host] tun`.
    HostTun,
    /// Its own TUN, the k-th opened (a worker finds its queue by network).
    Own(usize),
}

/// No network: the host TUN of a UPF none of whose networks is on it.
pub const NONE: u8 = u8::MAX;

/// The TUN of each network: its name (None: the host's).
fn tun_of<'a>(config: &'a Config, n: &'a tep_config::DataNetwork) -> Option<&'a str> {
    n.tun.as_deref().filter(|t| *t != config.host.tun)
}

/// Each network's device, by network index (empty without `[pfcp]`).
pub fn devices(config: &Config) -> Vec<Device> {
    let Some(p) = &config.pfcp else {
        return Vec::new();
    };
    let mut own = 0;
    p.networks
        .iter()
        .map(|n| match tun_of(config, n) {
            None => Device::HostTun,
            Some(_) => {
                own += 1;
                Device::Own(own - 1)
            }
        })
        .collect()
}

/// The network whose packets the host TUN carries ([`NONE`]: none).
pub fn host_network(config: &Config) -> u8 {
    devices(config)
        .iter()
        .position(|d| *d == Device::HostTun)
        .map_or(NONE, |i| i as u8)
}

/// The UE pools routed into the host TUN: its network's.
pub fn host_tun_prefixes(config: &Config) -> Vec<IpPrefix> {
    let Some(p) = &config.pfcp else {
        return Vec::new();
    };
    p.networks
        .iter()
        .filter(|n| tun_of(config, n).is_none())
        .flat_map(|n| n.ue_prefixes.iter().copied())
        .collect()
}

/// Host mode's rules for the networks' TUNs: one network per TUN (`[host]
/// tun` counts for a network that leaves `tun` out), none the host's TAP.
pub fn check(config: &Config) -> Result<(), ConfigError> {
    let Some(p) = &config.pfcp else {
        return Ok(());
    };
    let mut seen: Vec<&str> = Vec::new();
    for (i, n) in p.networks.iter().enumerate() {
        let name = n.tun.as_deref().unwrap_or(&config.host.tun);
        let field = format!("pfcp.network[{i}].tun");
        if seen.contains(&name) {
            return Err(ConfigError {
                field,
                message: format!("\"{name}\" is another data network's TUN already ([host] tun is the one of a network that leaves tun out)"),
            });
        }
        if name == config.host.tap {
            return Err(ConfigError {
                field,
                message: format!("\"{name}\" is [host] tap"),
            });
        }
        seen.push(name);
    }
    Ok(())
}

/// The networks' own TUNs, open, with their routes.
pub struct DataTuns {
    /// By [`Device::Own`] index: the network and its TUN.
    pub tuns: Vec<(u8, Tun)>,
    routes: Vec<KernelRoutes>,
}

impl DataTuns {
    /// Opens each network's own TUN (`routes`: with its UE pools routed
    /// into it, as `host.routes` does for the host TUN).
    pub fn open(config: &Config, routes: bool) -> Result<DataTuns, String> {
        let mut out = DataTuns {
            tuns: Vec::new(),
            routes: Vec::new(),
        };
        let Some(p) = &config.pfcp else {
            return Ok(out);
        };
        for (i, n) in p.networks.iter().enumerate() {
            let Some(name) = tun_of(config, n) else {
                continue;
            };
            let field = format!("pfcp.network[{i}].tun");
            let dev = open_tun(config, name).map_err(|e| format!("{field}: {e}"))?;
            if routes {
                let mut r = KernelRoutes::new(dev.ifindex(), dev.name());
                let want: Vec<_> = n.ue_prefixes.iter().map(|p| (p.addr, p.len)).collect();
                r.sync_to(&want)?;
                out.routes.push(r);
            }
            tracing::info!(
                network = n.name.as_deref().unwrap_or_default(),
                device = name,
                "data network TUN ready"
            );
            out.tuns.push((i as u8, dev));
        }
        Ok(out)
    }

    /// Removes the routes tep added.
    pub fn clear(&mut self) {
        for r in &mut self.routes {
            r.clear();
        }
    }
}

/// A network's TUN, as the host's is opened: its queues, offloads and MTU.
fn open_tun(config: &Config, name: &str) -> Result<Tun, String> {
    let host = &config.host;
    let offloads = if host.offloads {
        Offloads::all()
    } else {
        Offloads::none()
    };
    let dev = Tun::open(&TunOptions {
        name: name.to_string(),
        kind: DeviceKind::Tun,
        queues: host.queues,
        vnet_hdr: host.offloads,
        vnet_hdr_tunnel: false,
        offloads,
    })
    .map_err(|e| format!("cannot open {name}: {e}"))?;
    let mtu = super::device_mtu(config, false);
    dev.set_mtu(mtu)
        .map_err(|e| format!("cannot set MTU {mtu} on {name}: {e}"))?;
    if host.offloads {
        if let Err(e) = dev.set_gso_max_size(super::gso_max_size(config, false)) {
            tracing::warn!(device = name, "cannot limit super-packets: {e}");
        }
    }
    dev.set_up()
        .map_err(|e| format!("cannot bring {name} up: {e}"))?;
    Ok(dev)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(networks: &str) -> Config {
        Config::parse(&format!(
            "[host]\ntun = \"n6\"\ntap = \"t6\"\n[pfcp]\nn3 = [\"192.0.2.1\"]\n{networks}"
        ))
        .unwrap()
    }

    const TWO: &str = "[[pfcp.network]]\nname = \"internet\"\nue_prefixes = [\"10.45.0.0/16\"]\n\
                       [[pfcp.network]]\nname = \"ims\"\ntun = \"n6i\"\nue_prefixes = [\"10.46.0.0/16\"]\n";

    #[test]
    fn each_network_its_tun_the_host_tun_for_one() {
        let c = cfg(TWO);
        check(&c).unwrap();
        assert_eq!(devices(&c), [Device::HostTun, Device::Own(0)]);
        assert_eq!(host_network(&c), 0);
        let host: Vec<String> = host_tun_prefixes(&c)
            .iter()
            .map(|p| format!("{}/{}", p.addr, p.len))
            .collect();
        assert_eq!(host, ["10.45.0.0/16"], "the other pool is n6i's");
        // Naming the host TUN is leaving tun out; no network on it: none.
        let c = cfg(&TWO.replace(
            "name = \"internet\"\n",
            "name = \"internet\"\ntun = \"n6x\"\n",
        ));
        assert_eq!(devices(&c), [Device::Own(0), Device::Own(1)]);
        assert_eq!(host_network(&c), NONE);
        assert!(host_tun_prefixes(&c).is_empty());
        // The single unnamed network is the host TUN's.
        let c = cfg("ue_prefixes = [\"10.45.0.0/16\"]\n");
        assert_eq!((devices(&c), host_network(&c)), (vec![Device::HostTun], 0));
    }

    #[test]
    fn one_network_per_tun() {
        let same = TWO.replace(
            "name = \"internet\"\n",
            "name = \"internet\"\ntun = \"n6i\"\n",
        );
        let host = TWO.replace("tun = \"n6i\"", "tun = \"n6\"");
        let tap = TWO.replace("tun = \"n6i\"", "tun = \"t6\"");
        for (text, want) in [
            (
                host,
                "pfcp.network[1].tun: \"n6\" is another data network's TUN",
            ),
            (tap, "pfcp.network[1].tun: \"t6\" is [host] tap"),
        ] {
            let e = check(&cfg(&text)).unwrap_err().to_string();
            assert!(e.starts_with(want), "{e}");
        }
        // Two on one named TUN: tep-config refuses it already.
        assert!(Config::parse(&format!("[pfcp]\nn3 = [\"192.0.2.1\"]\n{same}")).is_err());
    }
}
