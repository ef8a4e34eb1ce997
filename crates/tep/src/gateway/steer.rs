//! What the XDP programs steer to tep, from the tunnels: on the underlay,
//! UDP to each tunnel's local address and port; on the inner interface,
//! what a tunnel routes (L3: its inner prefixes; L2: its inner MACs, or
//! every frame not for the host when an L2 tunnel has none), and a
//! network's frames (its 802.1Q VLAN; untagged frames not for the host
//! when a network is untagged). The rest is the kernel's, frames of a
//! VLAN no network has among them (counted). And the counters the
//! program keeps, for `tep show`.

use super::next_hops::Published;
use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use tep_config::Config;
use tep_dataplane::dn_arp::{DnRouterConfig, DnRouters};
use tep_sys::{Role, Steering};

use crate::daemon::state::KernelCounters;

/// What one config steers.
#[derive(Debug, Default, PartialEq, Eq)]
struct Steered {
    endpoints: BTreeSet<(IpAddr, u16)>,
    prefixes: BTreeSet<(IpAddr, u8)>,
    macs: BTreeSet<[u8; 6]>,
    l2_default: bool,
    /// The L2 networks' VLANs; whether there is any L2 network, and an
    /// untagged one.
    vlans: BTreeSet<u16>,
    networks: bool,
    untagged: bool,
}

impl Steered {
    fn of(config: &Config) -> Steered {
        let mut s = Steered::default();
        for t in &config.tunnels {
            s.endpoints.insert((t.local, t.local_port));
            if let Some(n) = t.network.as_deref() {
                // A network's remote VTEPs are its own; what it takes from
                // the inner side is by VLAN (gateway mode carries L2
                // networks only: `check_networks`).
                s.networks = true;
                match n.vlan {
                    Some(vid) => {
                        s.vlans.insert(vid);
                    }
                    None => s.untagged = true,
                }
            } else if t.kind.carries_ethernet() {
                s.macs.extend(t.inner_macs.iter().map(|m| m.0));
                s.l2_default |= t.inner_macs.is_empty();
            } else {
                s.prefixes
                    .extend(t.inner_prefixes.iter().map(|p| (p.addr, p.len)));
            }
        }
        // A UPF's tagged data networks: their frames come by VLAN (an
        // untagged one's by its UE pools, the N3 tunnel's prefixes).
        for vid in data_network_vlans(config).into_iter().flatten() {
            s.networks = true;
            s.vlans.insert(vid);
        }
        s
    }
}

/// The VLAN of each of a UPF's data networks on the inner interface, by
/// network index (`[[pfcp.network]] vlan`; empty without `[pfcp]`).
pub fn data_network_vlans(config: &Config) -> Vec<Option<u16>> {
    config
        .pfcp
        .as_ref()
        .map_or_else(Vec::new, |p| p.networks.iter().map(|n| n.vlan).collect())
}

/// The routers of a UPF's tagged data networks (`[[pfcp.network]]
/// address`/`gateway`), by network index; None where none has one.
pub fn dn_routers(config: &Config, inner_mac: [u8; 6]) -> Option<Arc<DnRouters>> {
    let p = config.pfcp.as_ref()?;
    let routers: Vec<Option<DnRouterConfig>> = p
        .networks
        .iter()
        .map(|n| {
            let (vlan, r) = (n.vlan?, n.next_hop?);
            Some(DnRouterConfig {
                vlan,
                address: r.address,
                gateway: r.gateway,
            })
        })
        .collect();
    DnRouters::new(inner_mac, &routers).map(Arc::new)
}

/// Moves the maps from what `old` steered (nothing at start) to what
/// `new` steers; `inner_mac` is the inner interface's own (never an L2
/// tunnel's by default: frames to it are the host's).
pub fn configure(
    steering: &mut Steering,
    old: Option<&Config>,
    new: &Config,
    inner_mac: [u8; 6],
) -> Result<(), String> {
    let was = old.map(Steered::of).unwrap_or_default();
    let now = Steered::of(new);
    let fail = |what: String| move |e: std::io::Error| format!("XDP maps: {what}: {e}");
    for &(a, p) in was.endpoints.difference(&now.endpoints) {
        steering
            .remove_endpoint(a, p)
            .map_err(fail(format!("remove endpoint {a}:{p}")))?;
    }
    for &(a, p) in now.endpoints.difference(&was.endpoints) {
        steering
            .add_endpoint(a, p)
            .map_err(fail(format!("add endpoint {a}:{p}")))?;
    }
    for &(a, l) in was.prefixes.difference(&now.prefixes) {
        steering
            .remove_inner_prefix(a, l)
            .map_err(fail(format!("remove prefix {a}/{l}")))?;
    }
    for &(a, l) in now.prefixes.difference(&was.prefixes) {
        steering
            .add_inner_prefix(a, l)
            .map_err(fail(format!("add prefix {a}/{l}")))?;
    }
    for m in was.macs.difference(&now.macs) {
        steering
            .remove_inner_mac(*m)
            .map_err(fail(format!("remove MAC {m:02x?}")))?;
    }
    for m in now.macs.difference(&was.macs) {
        steering
            .add_inner_mac(*m)
            .map_err(fail(format!("add MAC {m:02x?}")))?;
    }
    for &vid in was.vlans.difference(&now.vlans) {
        steering
            .set_inner_vlan(vid, false)
            .map_err(fail(format!("remove VLAN {vid}")))?;
    }
    for &vid in now.vlans.difference(&was.vlans) {
        steering
            .set_inner_vlan(vid, true)
            .map_err(fail(format!("add VLAN {vid}")))?;
    }
    steering
        .set_inner_networks(now.networks, now.untagged)
        .map_err(fail("inner networks".to_string()))?;
    steering
        .set_inner_config(inner_mac, now.l2_default)
        .map_err(fail("inner config".to_string()))
}

/// Gateway mode's kernel counters: the steering program's, per role, and
/// the next-hop misses (packets the kernel carried for want of a MAC).
#[derive(Debug)]
pub struct SteeringCounters {
    /// The loaded programs.
    pub steering: Arc<Mutex<Steering>>,
    /// The resolver's table.
    pub next_hops: Arc<Published>,
    /// A UPF's data networks' own routers, where some have one.
    pub dn_routers: Option<Arc<DnRouters>>,
}

impl KernelCounters for SteeringCounters {
    fn about(&self) -> &'static str {
        "xdp (the steering programs: frames to tep, frames left to the kernel), next hops and the data networks' ARP"
    }

    fn metric(&self) -> (&'static str, &'static str) {
        ("xdp", "counter")
    }

    fn read(&self) -> Vec<(String, u64)> {
        let mut out = Vec::new();
        let steering = self.steering.lock().unwrap_or_else(|e| e.into_inner());
        for (role, name) in [(Role::Underlay, "underlay"), (Role::Inner, "inner")] {
            let s = steering.stats(role).unwrap_or_default();
            out.push((format!("{name}_redirected"), s.redirected));
            out.push((format!("{name}_passed"), s.passed));
            out.push((format!("{name}_redirect_failed"), s.redirect_failed));
        }
        let inner = steering.stats(Role::Inner).unwrap_or_default();
        out.push(("inner_unknown_vlan".to_string(), inner.unknown_vlan));
        let b = &self.next_hops.bounds;
        for (name, c) in [
            ("neighbour_misses", &b.misses),
            ("next_hop_requests_dropped", &b.requests_dropped),
            ("next_hop_cache_evictions", &b.cache_evictions),
            ("next_hop_evictions", &b.hop_evictions),
            ("next_hop_updates_missed", &b.updates_missed),
            ("next_hop_route_flushes", &b.route_flushes),
        ] {
            out.push((name.to_string(), c.load(Ordering::Relaxed)));
        }
        out.push(("next_hops_known".to_string(), self.next_hops.known() as u64));
        if let Some(r) = &self.dn_routers {
            let c = &r.counters;
            for (name, c) in [
                ("arp_replies_sent", &c.replies_sent),
                ("arp_requests_sent", &c.requests_sent),
                ("arp_learned", &c.learned),
                ("arp_ignored", &c.ignored),
            ] {
                out.push((name.to_string(), c.load(Ordering::Relaxed)));
            }
            let now_ns = crate::daemon::epoch().elapsed().as_nanos() as u64;
            out.push(("arp_routers_known".to_string(), r.known(now_ns) as u64));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_each_tunnel_steers() {
        let c = Config::parse(
            r#"
[gateway]
inner = "a"
underlay = "b"
[[tunnel]]
name = "l3"
kind = "gtpu"
local = "192.0.2.1"
remote = "192.0.2.2"
teid = 1
inner_prefixes = ["10.1.0.0/16", "2001:db8:1::/48"]
[[tunnel]]
name = "l2"
kind = "vxlan"
local = "192.0.2.1"
remote = "192.0.2.3"
vni = 5
inner_macs = ["02:00:00:00:00:07"]
[[tunnel]]
name = "l2-default"
kind = "geneve"
local = "2001:db8::1"
remote = "2001:db8::2"
vni = 6
"#,
        )
        .unwrap();
        let s = Steered::of(&c);
        let ep: Vec<String> = s
            .endpoints
            .iter()
            .map(|(a, p)| std::net::SocketAddr::new(*a, *p).to_string())
            .collect();
        assert_eq!(
            ep,
            ["192.0.2.1:2152", "192.0.2.1:4789", "[2001:db8::1]:6081"]
        );
        assert_eq!(s.prefixes.len(), 2);
        assert_eq!(s.macs.iter().collect::<Vec<_>>(), [&[2, 0, 0, 0, 0, 7]]);
        assert!(s.l2_default, "geneve names no MAC");
    }

    #[test]
    fn what_networks_steer() {
        use tep_dataplane::config::{NetworkSettings, TunnelConfig};
        use tep_dataplane::TunnelKind;
        let mut c = Config::parse("[gateway]\ninner = \"a\"\nunderlay = \"b\"\n").unwrap();
        let local: IpAddr = "192.0.2.1".parse().unwrap();
        let net = |name, vlan| {
            let s = NetworkSettings {
                vlan,
                ..NetworkSettings::default()
            };
            TunnelConfig::network(name, TunnelKind::Vxlan, local, s)
        };
        c.tunnels = vec![net("blue", Some(100)), net("red", Some(200))];
        let s = Steered::of(&c);
        assert_eq!(s.endpoints.len(), 1, "one VXLAN endpoint for both");
        assert_eq!(s.vlans.iter().copied().collect::<Vec<_>>(), [100, 200]);
        assert!(s.networks && !s.untagged);
        assert!(
            s.macs.is_empty() && !s.l2_default,
            "a network without MACs is no L2 default"
        );
        c.tunnels.push(net("green", None));
        let s = Steered::of(&c);
        assert!(s.untagged && !s.l2_default);
    }

    /// A UPF's tagged data networks steer by VLAN; an untagged one by
    /// its UE pools (the N3 tunnel's prefixes), as a single network does.
    #[test]
    fn what_data_networks_steer() {
        let c = Config::parse(
            "[gateway]\ninner = \"a\"\nunderlay = \"b\"\n[pfcp]\nn3 = [\"192.0.2.1\"]\n\
             [[pfcp.network]]\nname = \"internet\"\nvlan = 10\nue_prefixes = [\"10.45.0.0/16\"]\n\
             [[pfcp.network]]\nname = \"ims\"\nvlan = 20\nue_prefixes = [\"10.45.0.0/16\"]\n\
             [[pfcp.network]]\nname = \"iot\"\nue_prefixes = [\"10.46.0.0/16\"]\n",
        )
        .unwrap();
        assert_eq!(data_network_vlans(&c), [Some(10), Some(20), None]);
        let s = Steered::of(&c);
        assert_eq!(s.vlans.iter().copied().collect::<Vec<_>>(), [10, 20]);
        assert!(s.networks && !s.untagged, "untagged frames by prefix only");
        assert_eq!(s.prefixes.len(), 2);
        let one = Config::parse(
            "[gateway]\ninner = \"a\"\nunderlay = \"b\"\n[pfcp]\nn3 = [\"192.0.2.1\"]\nue_prefixes = [\"10.45.0.0/16\"]\n",
        )
        .unwrap();
        let s = Steered::of(&one);
        assert!(s.vlans.is_empty() && !s.networks);
    }

    /// Only a tagged network with `address` and `gateway` has a router
    /// of its own; none without.
    #[test]
    fn the_routers_of_data_networks() {
        let c = Config::parse(
            "[gateway]\ninner = \"a\"\nunderlay = \"b\"\n[pfcp]\nn3 = [\"192.0.2.1\"]\n\
             [[pfcp.network]]\nname = \"internet\"\nvlan = 10\nue_prefixes = [\"10.45.0.0/16\"]\n\
             [[pfcp.network]]\nname = \"ims\"\nvlan = 20\nue_prefixes = [\"10.45.0.0/16\"]\n\
             address = \"10.70.0.1/24\"\ngateway = \"10.70.0.254\"\n",
        )
        .unwrap();
        let mac = [2, 0, 0, 0, 0, 1];
        let r = dn_routers(&c, mac).expect("ims has a router");
        assert_eq!(r.gateway_mac(1, 0), None, "not known yet");
        let rc = DnRouterConfig {
            vlan: 20,
            address: "10.70.0.1".parse().unwrap(),
            gateway: "10.70.0.254".parse().unwrap(),
        };
        let want = DnRouters::new(mac, &[None, Some(rc)]).unwrap();
        assert_eq!(format!("{r:?}"), format!("{want:?}"));
        let plain = Config::parse(
            "[gateway]\ninner = \"a\"\nunderlay = \"b\"\n[pfcp]\nn3 = [\"192.0.2.1\"]\n\
             [[pfcp.network]]\nname = \"internet\"\nvlan = 10\nue_prefixes = [\"10.45.0.0/16\"]\n",
        )
        .unwrap();
        assert!(dn_routers(&plain, mac).is_none());
    }
}
