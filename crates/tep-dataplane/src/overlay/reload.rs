//! A reload builds a new [`Overlay`] from the new config; what the old
//! one holds beyond its own config goes over to it, so that a reload
//! forgets neither the MACs the data path learned (they would be flooded
//! until learned again) nor what the control verbs added at run time.

use super::fdb::{Dst, Entry, FdbKey, Origin};
use super::neigh::Neigh;
use super::{NetworkCounters, Overlay, Registry};
use crate::config::{NetworkSettings, TunnelConfig};
use core::net::IpAddr;

/// Entries are stamped with the overlay's seconds modulo 2^24.
const STAMP: u32 = 0x00ff_ffff;

/// What [`Overlay::carry_over`] took over, and what it could not.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Carried {
    /// FDB entries (learned, external, and static ones from `tep fdb add`).
    pub fdb: u32,
    /// Flood list members and routes from `tep peer add`, `tep route add`.
    pub topology: u32,
    /// Neighbours (learned, or from `tep neigh add`).
    pub neighbours: u32,
    /// Left behind: the new network's `max_macs`, or no room in a table
    /// or for a VTEP. Learned MACs among them are counted as
    /// `learn_refused`.
    pub refused: u32,
}

impl Overlay {
    /// Carries into this overlay (a reloaded config's, before any worker
    /// uses it) what `old`, the overlay it replaces, holds beyond
    /// `old_tunnels` (the config `old` was built from): learned MACs and
    /// neighbours, their age kept; external FDB entries; the FDB
    /// entries, flood list members, routes and neighbours the control
    /// verbs added; and the counters, which count since the daemon
    /// started as the tunnels' do. Per network of the same name, layer and underlay
    /// family (another kind of network under the old name starts afresh).
    /// What the new config says of a MAC, prefix, VTEP or address wins; what
    /// the old config said and the new one no longer does is gone.
    pub fn carry_over(&self, old: &Overlay, old_tunnels: &[TunnelConfig]) -> Carried {
        let mut carried = Carried::default();
        let none = NetworkSettings::default();
        let old_topology = old.topology();
        let mut r = self.registry();
        for (n, net) in self.networks.iter().enumerate() {
            let Ok(o) = old.index(&net.name) else {
                continue;
            };
            let was = &old.networks[usize::from(o)];
            if was.l2 != net.l2 || was.underlay_v4 != net.underlay_v4 {
                continue;
            }
            let config = old_tunnels
                .get(was.tunnel as usize)
                .and_then(|t| t.network.as_deref())
                .unwrap_or(&none);
            carry_counters(&was.counters, &net.counters);
            let pair = (o, n as u16);
            self.carry_fdb(&mut r, old, pair, config, &mut carried);
            if let Some(t) = old_topology.networks.get(usize::from(o)) {
                self.carry_topology(&mut r, old, t, pair, config, &mut carried);
            }
            self.carry_neighbours(old, pair, config, &mut carried);
        }
        self.publish(&mut r);
        carried
    }

    /// `seen_s` of `old`'s clock on this overlay's, the age kept.
    fn restamp(&self, old: &Overlay, seen_s: u32) -> u32 {
        let age = old.now_s().wrapping_sub(seen_s) & STAMP;
        self.now_s().wrapping_sub(age) & STAMP
    }

    /// The id here of `old`'s VTEP `id`.
    fn vtep_from(&self, r: &mut Registry, old: &Overlay, id: u32) -> Option<u32> {
        Self::vtep_in(&self.vteps, r, old.vteps.addr(id)?)
    }

    fn carry_fdb(
        &self,
        r: &mut Registry,
        old: &Overlay,
        (o, n): (u16, u16),
        config: &NetworkSettings,
        carried: &mut Carried,
    ) {
        let net = &self.networks[usize::from(n)];
        let mut entries = Vec::new();
        old.fdb.for_each(Some(o), |k, e| entries.push((k.mac(), e)));
        for (mac, e) in entries {
            let key = FdbKey::new(n, mac);
            let wanted = match e.origin {
                Origin::Learned => net.learning,
                Origin::External => true,
                Origin::Static => !config.fdb.iter().any(|(m, _)| m.0 == mac),
            };
            if !wanted || self.fdb.lookup(key).is_some() {
                continue;
            }
            let dst = match e.dst {
                Dst::Local => Some(Dst::Local),
                Dst::Remote(v) => self.vtep_from(r, old, v).map(Dst::Remote),
            };
            let learned = e.origin == Origin::Learned;
            let room = !learned || self.fdb.learned(n) < net.max_macs;
            let entry = dst.filter(|_| room).map(|dst| Entry {
                dst,
                origin: e.origin,
                seen_s: self.restamp(old, e.seen_s),
            });
            match entry.map(|entry| (entry, self.fdb.insert(key, entry))) {
                Some((entry, Ok(_))) => {
                    carried.fdb += 1;
                    if let (Dst::Remote(v), false) = (entry.dst, learned) {
                        *r.fdb_dsts[usize::from(n)].entry(v).or_insert(0) += 1;
                    }
                }
                _ => {
                    carried.refused += 1;
                    if learned {
                        NetworkCounters::add(&net.counters.learn_refused, 1);
                    }
                }
            }
        }
    }

    fn carry_topology(
        &self,
        r: &mut Registry,
        old: &Overlay,
        was: &super::NetTopology,
        (_, n): (u16, u16),
        config: &NetworkSettings,
        carried: &mut Carried,
    ) {
        let from_config = |a: Option<IpAddr>| a.is_some_and(|a| config.flood.contains(&a));
        for &v in was
            .flood
            .iter()
            .filter(|&&v| !from_config(old.vteps.addr(v)))
        {
            let Some(id) = self.vtep_from(r, old, v) else {
                carried.refused += 1;
                continue;
            };
            let flood = &mut r.topology.networks[usize::from(n)].flood;
            if !flood.contains(&id) {
                flood.push(id);
                carried.topology += 1;
            }
        }
        for &(prefix, v) in &was.routes {
            if config.routes.iter().any(|&(p, _)| p == prefix) {
                continue;
            }
            let Some(id) = self.vtep_from(r, old, v) else {
                carried.refused += 1;
                continue;
            };
            let routes = &mut r.topology.networks[usize::from(n)].routes;
            if !routes.iter().any(|&(p, _)| p == prefix) {
                routes.push((prefix, id));
                carried.topology += 1;
            }
        }
    }

    fn carry_neighbours(
        &self,
        old: &Overlay,
        (o, n): (u16, u16),
        config: &NetworkSettings,
        carried: &mut Carried,
    ) {
        let net = &self.networks[usize::from(n)];
        for (_, ip, e) in old.neigh.entries(Some(o)) {
            let from_config = config.neighbours.iter().any(|&(a, _)| a == ip);
            if (e.origin == Origin::Static && from_config) || self.neigh.get(n, ip).is_some() {
                continue;
            }
            let entry = Neigh {
                seen_s: self.restamp(old, e.seen_s),
                ..e
            };
            match self.neigh.set(n, ip, entry, net.max_macs) {
                Ok(_) => carried.neighbours += 1,
                Err(_) => carried.refused += 1,
            }
        }
    }
}

/// Adds what `from` counted to `to`.
fn carry_counters(from: &NetworkCounters, to: &NetworkCounters) {
    let s = from.snapshot();
    for (c, v) in [
        (&to.learned, s.learned),
        (&to.aged, s.aged),
        (&to.moved, s.moved),
        (&to.learn_refused, s.learn_refused),
        (&to.move_refused, s.move_refused),
        (&to.flooded, s.flooded),
        (&to.flood_copies, s.flood_copies),
        (&to.suppressed, s.suppressed),
        (&to.neigh_learned, s.neigh_learned),
    ] {
        NetworkCounters::add(c, v);
    }
}

#[cfg(test)]
mod tests {
    //! These need the real FDB and neighbour tables (fdb.rs, neigh.rs).

    use super::*;
    use crate::config::{IpPrefix, NetworkSettings, TunnelConfig};
    use crate::TunnelKind;
    use tep_wire::ethernet::EthernetAddress;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn mac(last: u8) -> [u8; 6] {
        [2, 0, 0, 0, 0, last]
    }

    fn net(name: &str, kind: TunnelKind, local: &str, s: NetworkSettings) -> TunnelConfig {
        TunnelConfig::network(name, kind, ip(local), s)
    }

    fn blue(flood: &[&str], fdb: &[(u8, &str)]) -> NetworkSettings {
        NetworkSettings {
            flood: flood.iter().map(|a| ip(a)).collect(),
            fdb: fdb
                .iter()
                .map(|&(m, a)| (EthernetAddress(mac(m)), ip(a)))
                .collect(),
            max_macs: 3,
            ..NetworkSettings::default()
        }
    }

    fn overlay(tunnels: &[TunnelConfig]) -> Overlay {
        Overlay::new(tunnels, 1024, 64).unwrap()
    }

    fn fdb(o: &Overlay, name: &str) -> Vec<(u8, Option<IpAddr>, Origin)> {
        let rows = o.fdb_rows(Some(name)).unwrap();
        rows.iter().map(|r| (r.mac[5], r.dst, r.origin)).collect()
    }

    /// Learns `mac` behind `dst` (None: the local side) as the data path
    /// does.
    fn learn(o: &Overlay, name: &str, m: u8, dst: Option<&str>) {
        let n = o.index(name).unwrap();
        let dst = dst.map_or(Dst::Local, |a| Dst::Remote(o.vtep_id(ip(a)).unwrap()));
        let limit = o.networks()[usize::from(n)].max_macs;
        o.fdb().learn(FdbKey::new(n, mac(m)), dst, o.now_s(), limit);
    }

    #[test]
    fn learned_external_and_verb_entries_survive_a_reload_the_old_config_does_not() {
        let v4 = |s| net("blue", TunnelKind::Vxlan, "192.0.2.1", s);
        let old_tunnels = [v4(blue(&["192.0.2.2", "192.0.2.3"], &[(1, "192.0.2.2")]))];
        let old = overlay(&old_tunnels);
        learn(&old, "blue", 10, Some("192.0.2.9"));
        learn(&old, "blue", 11, None);
        let ext = Origin::External;
        old.fdb_set("blue", mac(12), ip("192.0.2.8"), ext, false)
            .unwrap();
        old.fdb_add("blue", mac(13), ip("192.0.2.7"), false)
            .unwrap();
        old.peer_add("blue", ip("192.0.2.6")).unwrap();
        old.neigh_add("blue", ip("10.0.0.5"), mac(10), false)
            .unwrap();
        // The new config drops 192.0.2.3 and MAC 1, and sets MAC 10.
        let new = overlay(&[v4(blue(&["192.0.2.2"], &[(10, "192.0.2.4")]))]);
        let carried = new.carry_over(&old, &old_tunnels);
        assert_eq!(
            fdb(&new, "blue"),
            vec![
                (10, Some(ip("192.0.2.4")), Origin::Static),
                (11, None, Origin::Learned),
                (12, Some(ip("192.0.2.8")), Origin::External),
                (13, Some(ip("192.0.2.7")), Origin::Static),
            ]
        );
        assert_eq!(
            new.peers("blue").unwrap(),
            vec![ip("192.0.2.2"), ip("192.0.2.6")]
        );
        let neigh = new.neigh_rows(Some("blue")).unwrap();
        assert_eq!(neigh.len(), 1);
        assert_eq!((neigh[0].1, neigh[0].2.mac), (ip("10.0.0.5"), mac(10)));
        assert_eq!(
            carried,
            Carried {
                fdb: 3,
                topology: 1,
                neighbours: 1,
                refused: 0
            }
        );
        // The external entry's VTEP is one the network knows (learning
        // off would still take its frames).
        let t = new.topology();
        let id = new.vtep_id(ip("192.0.2.8")).unwrap();
        assert!(t.networks[0].knows(id));
    }

    #[test]
    fn learned_macs_over_the_new_limit_are_refused_and_counted() {
        let old_tunnels = [net("blue", TunnelKind::Vxlan, "192.0.2.1", blue(&[], &[]))];
        let old = overlay(&old_tunnels);
        for m in 1..=3 {
            learn(&old, "blue", m, Some("192.0.2.2"));
        }
        let mut fewer = blue(&[], &[]);
        fewer.max_macs = 2;
        let new = overlay(&[net("blue", TunnelKind::Vxlan, "192.0.2.1", fewer)]);
        NetworkCounters::add(&old.networks()[0].counters.learn_refused, 5);
        let carried = new.carry_over(&old, &old_tunnels);
        assert_eq!((carried.fdb, carried.refused), (2, 1));
        // The old overlay's count, and the MAC left behind.
        assert_eq!(new.stats()[0].learn_refused, 6);
        assert_eq!(new.fdb_rows(None).unwrap().len(), 2);
    }

    #[test]
    fn another_layer_or_family_under_the_same_name_starts_afresh() {
        let old_tunnels = [net("blue", TunnelKind::Vxlan, "192.0.2.1", blue(&[], &[]))];
        let old = overlay(&old_tunnels);
        learn(&old, "blue", 1, Some("192.0.2.2"));
        old.peer_add("blue", ip("192.0.2.3")).unwrap();
        let v6 = overlay(&[net(
            "blue",
            TunnelKind::Geneve,
            "2001:db8::1",
            blue(&[], &[]),
        )]);
        assert_eq!(v6.carry_over(&old, &old_tunnels), Carried::default());
        assert!(v6.fdb_rows(None).unwrap().is_empty());
        let mut l3 = blue(&[], &[]);
        l3.routes = vec![("10.1.0.0/16".parse::<IpPrefix>().unwrap(), ip("192.0.2.5"))];
        let l3 = overlay(&[net("blue", TunnelKind::Gue, "192.0.2.1", l3)]);
        assert_eq!(l3.carry_over(&old, &old_tunnels), Carried::default());
        assert!(l3.peers("blue").unwrap().is_empty());
    }

    #[test]
    fn a_learned_entry_keeps_its_age() {
        let old_tunnels = [net("blue", TunnelKind::Vxlan, "192.0.2.1", blue(&[], &[]))];
        let old = overlay(&old_tunnels);
        let n = old.index("blue").unwrap();
        let id = old.vtep_id(ip("192.0.2.2")).unwrap();
        // Seen 100 s before the old overlay's clock started (wrapping).
        let seen = old.now_s().wrapping_sub(100) & STAMP;
        let e = Entry {
            dst: Dst::Remote(id),
            origin: Origin::Learned,
            seen_s: seen,
        };
        old.fdb().insert(FdbKey::new(n, mac(1)), e).unwrap();
        let new = overlay(&[net("blue", TunnelKind::Vxlan, "192.0.2.1", blue(&[], &[]))]);
        new.carry_over(&old, &old_tunnels);
        let age = new.fdb_rows(None).unwrap()[0].age_s;
        assert!((100..=101).contains(&age), "{age}");
    }

    #[test]
    fn routes_added_at_run_time_survive() {
        let l3 = |routes: Vec<(IpPrefix, IpAddr)>| {
            let s = NetworkSettings {
                routes,
                ..NetworkSettings::default()
            };
            net("red", TunnelKind::Gue, "192.0.2.1", s)
        };
        let p = |s: &str| s.parse::<IpPrefix>().unwrap();
        let old_tunnels = [l3(vec![(p("10.1.0.0/16"), ip("192.0.2.2"))])];
        let old = overlay(&old_tunnels);
        old.route_add("red", p("10.2.0.0/16"), ip("192.0.2.3"), false)
            .unwrap();
        old.route_add("red", p("10.3.0.0/16"), ip("192.0.2.3"), false)
            .unwrap();
        let new = overlay(&[l3(vec![(p("10.3.0.0/16"), ip("192.0.2.4"))])]);
        new.carry_over(&old, &old_tunnels);
        let mut routes: Vec<_> = new
            .routes(None)
            .unwrap()
            .into_iter()
            .map(|(_, p, a)| (p, a))
            .collect();
        routes.sort_by_key(|(p, _)| p.to_string());
        assert_eq!(
            routes,
            vec![
                (p("10.2.0.0/16"), ip("192.0.2.3")),
                (p("10.3.0.0/16"), ip("192.0.2.4")),
            ]
        );
    }
}
