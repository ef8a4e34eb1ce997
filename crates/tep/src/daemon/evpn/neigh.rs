//! MAC+IP bindings (EVPN type-2 routes with an IP) between an EVPN
//! network's neighbour table (ARP/ND suppression's) and zebra, with no
//! I/O. zebra takes the VNI's bridge as its SVI: a valid neighbour entry
//! on the bridge whose MAC is a local MAC of the bridge it advertises with
//! that MAC, and each MAC+IP the fabric advertises it installs on the
//! bridge as an NTF_EXT_LEARNED entry. So [`NetNeigh`] says which of the
//! network's neighbours the bridge must hold (those of its local MACs, not
//! those BGP brought) and takes zebra's entries into the table as
//! external neighbours, which suppression then answers for; both only
//! while the network has `neigh_suppress` on (the table is unused
//! otherwise). The thread in `super` feeds it.

use super::counters::{Event, NetCounters};
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::Arc;
use tep_dataplane::overlay::fdb::Origin;
use tep_dataplane::overlay::{Overlay, OverlayError};
use tep_sys::netlink::{BridgeNeigh, BridgeNeighEvent};

/// One EVPN network's bindings as the bridge shows them.
#[derive(Debug)]
pub struct NetNeigh {
    /// The network's name.
    pub name: String,
    /// Its index in the overlay.
    pub index: u16,
    /// The bridge's ifindex.
    pub bridge: u32,
    /// Local bindings written to the bridge for zebra.
    exported: BTreeMap<IpAddr, [u8; 6]>,
    /// Addresses taken from zebra's entries into the table.
    imported: BTreeSet<IpAddr>,
    /// The network's counters (shared with its `NetSync`).
    counters: Arc<NetCounters>,
}

impl NetNeigh {
    /// A network with nothing written or taken yet.
    pub fn new(name: &str, index: u16, bridge: u32, counters: Arc<NetCounters>) -> NetNeigh {
        NetNeigh {
            name: name.to_string(),
            index,
            bridge,
            exported: BTreeMap::new(),
            imported: BTreeSet::new(),
            counters,
        }
    }

    /// The local bindings on the bridge.
    pub fn exported(&self) -> &BTreeMap<IpAddr, [u8; 6]> {
        &self.exported
    }

    /// Takes one notification into `o`; false when it is not about this
    /// network's bridge.
    pub fn apply(&mut self, o: &Overlay, ev: &BridgeNeighEvent) -> bool {
        let (BridgeNeighEvent::New(n) | BridgeNeighEvent::Del(n)) = ev;
        if n.ifindex == self.bridge && !self.suppressing(o) {
            return true;
        }
        match ev {
            BridgeNeighEvent::New(n) if n.ifindex == self.bridge => self.seen(o, n),
            BridgeNeighEvent::Del(n) if n.ifindex == self.bridge => self.gone(o, n),
            _ => return false,
        }
        true
    }

    /// Takes a dump of the kernel's neighbours into `o`: zebra's entries
    /// are taken, those taken earlier that it no longer holds removed; the
    /// bridge's entries written by a tep (this one, or an earlier one that
    /// stopped without withdrawing them) are what the next export compares
    /// with, so a missing one is written again and a stale one withdrawn.
    pub fn resync(&mut self, o: &Overlay, dump: &[BridgeNeigh]) {
        let on = self.suppressing(o);
        let mine: Vec<&BridgeNeigh> = dump
            .iter()
            .filter(|n| on && n.ifindex == self.bridge)
            .collect();
        let remote: BTreeSet<IpAddr> = mine
            .iter()
            .filter(|n| n.ext_learned())
            .map(|n| n.ip)
            .collect();
        for n in &mine {
            self.seen(o, n);
        }
        let mut stale = Vec::new();
        if let Ok(rows) = o.neigh_rows(Some(&self.name)) {
            for (_, ip, e) in rows {
                if e.origin == Origin::External && !remote.contains(&ip) {
                    stale.push(ip);
                }
            }
        }
        for ip in stale {
            self.imported.insert(ip);
            self.remove(o, ip);
        }
        self.exported = dump
            .iter()
            .filter(|n| n.ifindex == self.bridge && n.by_tep())
            .filter_map(|n| Some((n.ip, n.mac?)))
            .collect();
    }

    /// Whether the network suppresses ARP/ND now (a reload may turn it
    /// on or off): only then has its neighbour table a use, and only then
    /// are bindings exchanged.
    fn suppressing(&self, o: &Overlay) -> bool {
        o.networks()
            .get(usize::from(self.index))
            .is_some_and(|n| n.neigh_suppress)
    }

    /// A neighbour on the bridge, new or changed.
    fn seen(&mut self, o: &Overlay, n: &BridgeNeigh) {
        if n.by_tep() {
            // Its own write echoed (or, when it differs, an earlier one's:
            // compared with at the next export).
            if let Some(mac) = n.mac {
                self.exported.insert(n.ip, mac);
            }
            return;
        }
        if !n.ext_learned() {
            // Not zebra's, not tep's: the kernel's own (multicast groups),
            // an operator's, or one that replaced zebra's or tep's.
            self.exported.remove(&n.ip);
            self.remove(o, n.ip);
            return self.counters.count(Event::NeighIgnored);
        }
        // zebra's replaces a binding tep wrote: the address is remote now.
        self.exported.remove(&n.ip);
        let Some(mac) = n.mac.filter(|m| m[0] & 1 == 0 && *m != [0; 6]) else {
            self.remove(o, n.ip);
            return self.counters.count(Event::IgnoredMac);
        };
        let was = o.neighbours().get(self.index, n.ip);
        if was.is_some_and(|w| w.origin == Origin::External && w.mac == mac) {
            self.imported.insert(n.ip);
            return;
        }
        match o.neigh_set_external(&self.name, n.ip, mac) {
            Ok(()) => {
                self.imported.insert(n.ip);
                self.counters.count(Event::NeighImported);
            }
            Err(OverlayError::Exists(_)) => self.counters.count(Event::RefusedStatic),
            Err(OverlayError::Full(_)) => self.counters.count(Event::RefusedFull),
            Err(_) => self.counters.count(Event::IgnoredAddress),
        }
    }

    /// A neighbour gone from the bridge.
    fn gone(&mut self, o: &Overlay, n: &BridgeNeigh) {
        if n.by_tep() {
            // Withdrawn by tep, or deleted by someone else: written again.
            self.exported.remove(&n.ip);
        }
        self.remove(o, n.ip);
    }

    /// Removes `ip` from the table if it was taken from zebra.
    fn remove(&mut self, o: &Overlay, ip: IpAddr) {
        if self.imported.remove(&ip) && o.neigh_del_external(&self.name, ip) == Ok(true) {
            self.counters.count(Event::NeighRemoved);
        }
    }

    /// The bindings the bridge must hold: the network's neighbours that
    /// BGP did not bring, whose MAC is one of `local` (zebra advertises an
    /// address only with a local MAC).
    pub fn wanted(&self, o: &Overlay, local: &BTreeSet<[u8; 6]>) -> BTreeMap<IpAddr, [u8; 6]> {
        if !self.suppressing(o) {
            return BTreeMap::new();
        }
        o.neigh_rows(Some(&self.name))
            .unwrap_or_default()
            .into_iter()
            .filter(|(_, _, e)| e.origin != Origin::External && local.contains(&e.mac))
            .map(|(_, ip, e)| (ip, e.mac))
            .collect()
    }

    /// Brings the bridge's bindings to `wanted`: `write(ip, Some(mac))`
    /// writes one, `write(ip, None)` removes one; a failed write is counted
    /// and tried again next time.
    pub fn export<E>(
        &mut self,
        wanted: &BTreeMap<IpAddr, [u8; 6]>,
        mut write: impl FnMut(IpAddr, Option<[u8; 6]>) -> Result<(), E>,
    ) {
        let gone: Vec<IpAddr> = self
            .exported
            .keys()
            .filter(|ip| !wanted.contains_key(ip))
            .copied()
            .collect();
        for ip in gone {
            match write(ip, None) {
                Ok(()) => {
                    self.exported.remove(&ip);
                    self.counters.count(Event::NeighWithdrawn);
                }
                Err(_) => self.counters.count(Event::ExportFailed),
            }
        }
        for (&ip, &mac) in wanted {
            if self.exported.get(&ip) == Some(&mac) {
                continue;
            }
            match write(ip, Some(mac)) {
                Ok(()) => {
                    self.exported.insert(ip, mac);
                    self.counters.count(Event::NeighExported);
                }
                Err(_) => self.counters.count(Event::ExportFailed),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tep_dataplane::config::{NetworkSettings, TunnelConfig};
    use tep_dataplane::TunnelKind;
    use tep_sys::netlink::PROTO_TEP;

    const BRIDGE: u32 = 5;
    const M1: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const M2: [u8; 6] = [2, 0, 0, 0, 0, 2];

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    /// Network "blue" with neighbour suppression and a static neighbour
    /// 10.0.0.9.
    fn blue() -> (Overlay, NetNeigh) {
        let mut t = TunnelConfig::network(
            "blue",
            TunnelKind::Vxlan,
            ip("192.0.2.1"),
            NetworkSettings {
                neigh_suppress: true,
                max_macs: 16,
                ..NetworkSettings::default()
            },
        );
        t.vni = 100;
        let o = Overlay::new(&[t], 64, 16).unwrap();
        o.neigh_add("blue", ip("10.0.0.9"), M2, false).unwrap();
        let n = NetNeigh::new("blue", 0, BRIDGE, Arc::default());
        (o, n)
    }

    /// zebra's entry for a remote MAC+IP.
    fn zebra(addr: &str, mac: [u8; 6]) -> BridgeNeigh {
        BridgeNeigh {
            ifindex: BRIDGE,
            ip: ip(addr),
            mac: Some(mac),
            state: 0x40,
            flags: 0x10,
            proto: Some(11),
        }
    }

    /// An entry tep wrote.
    fn teps(addr: &str, mac: [u8; 6]) -> BridgeNeigh {
        BridgeNeigh {
            state: 0x80,
            flags: 0,
            proto: Some(PROTO_TEP),
            ..zebra(addr, mac)
        }
    }

    fn at(o: &Overlay, addr: &str) -> Option<([u8; 6], Origin)> {
        o.neighbours().get(0, ip(addr)).map(|n| (n.mac, n.origin))
    }

    fn count(n: &NetNeigh, e: Event) -> u64 {
        n.counters.get(e)
    }

    #[test]
    fn zebras_bindings_are_taken_and_withdrawn() {
        let (o, mut n) = blue();
        let z = zebra("10.0.0.2", M2);
        assert!(n.apply(&o, &BridgeNeighEvent::New(z)));
        assert!(n.apply(&o, &BridgeNeighEvent::New(zebra("2001:db8::2", M2))));
        assert_eq!(at(&o, "10.0.0.2"), Some((M2, Origin::External)));
        assert_eq!(at(&o, "2001:db8::2"), Some((M2, Origin::External)));
        // The same again is no new import.
        n.apply(&o, &BridgeNeighEvent::New(z));
        assert_eq!(count(&n, Event::NeighImported), 2);
        // Another bridge's entry is not this network's.
        let other = BridgeNeigh { ifindex: 99, ..z };
        assert!(!n.apply(&o, &BridgeNeighEvent::Del(other)));
        assert_eq!(at(&o, "10.0.0.2"), Some((M2, Origin::External)));
        assert!(n.apply(&o, &BridgeNeighEvent::Del(z)));
        assert_eq!(at(&o, "10.0.0.2"), None);
        assert_eq!(count(&n, Event::NeighRemoved), 1);
    }

    #[test]
    fn what_cannot_be_taken_is_counted() {
        let (o, mut n) = blue();
        // The config's static neighbour stays.
        n.apply(&o, &BridgeNeighEvent::New(zebra("10.0.0.9", M1)));
        assert_eq!(at(&o, "10.0.0.9"), Some((M2, Origin::Static)));
        assert_eq!(count(&n, Event::RefusedStatic), 1);
        // A multicast MAC, no MAC, a multicast address.
        n.apply(
            &o,
            &BridgeNeighEvent::New(zebra("10.0.0.3", [1, 0, 0x5e, 0, 0, 1])),
        );
        let none = BridgeNeigh {
            mac: None,
            ..zebra("10.0.0.4", M1)
        };
        n.apply(&o, &BridgeNeighEvent::New(none));
        assert_eq!(count(&n, Event::IgnoredMac), 2);
        n.apply(&o, &BridgeNeighEvent::New(zebra("224.0.0.22", M1)));
        assert_eq!(count(&n, Event::IgnoredAddress), 1);
        // Not zebra's: the kernel's own multicast entry.
        let kernel = BridgeNeigh {
            flags: 0,
            proto: None,
            ..zebra("10.0.0.5", M1)
        };
        n.apply(&o, &BridgeNeighEvent::New(kernel));
        assert_eq!(count(&n, Event::NeighIgnored), 1);
        assert_eq!(o.neighbours().count(0), 1, "only the static one");
    }

    #[test]
    fn the_table_is_bounded() {
        let (o, mut n) = blue();
        for i in 0..20u8 {
            let z = zebra(&format!("10.0.1.{i}"), [2, 0, 0, 0, 1, i]);
            n.apply(&o, &BridgeNeighEvent::New(z));
        }
        assert_eq!(o.neighbours().count(0), 16, "max_macs");
        assert_eq!(count(&n, Event::RefusedFull), 5);
    }

    #[test]
    fn local_bindings_of_local_macs_are_exported_and_withdrawn() {
        let (o, mut n) = blue();
        o.neigh_add("blue", ip("10.0.0.1"), M1, false).unwrap();
        n.apply(&o, &BridgeNeighEvent::New(zebra("10.0.0.2", M2)));
        let local = BTreeSet::from([M1]);
        let want = n.wanted(&o, &local);
        // Not the remote one, not the static one of a MAC not local.
        assert_eq!(want, BTreeMap::from([(ip("10.0.0.1"), M1)]));
        let mut writes = Vec::new();
        n.export(&want, |a, m| {
            writes.push((a, m));
            Ok::<(), ()>(())
        });
        assert_eq!(writes, [(ip("10.0.0.1"), Some(M1))]);
        // Unchanged: nothing written; a failed write is tried again.
        n.export(&want, |_, _| -> Result<(), ()> { panic!("written again") });
        n.export(&BTreeMap::new(), |_, _| Err(()));
        assert_eq!(count(&n, Event::ExportFailed), 1);
        writes.clear();
        n.export(&BTreeMap::new(), |a, m| {
            writes.push((a, m));
            Ok::<(), ()>(())
        });
        assert_eq!(writes, [(ip("10.0.0.1"), None)]);
        assert_eq!(count(&n, Event::NeighWithdrawn), 1);
        assert!(n.exported().is_empty());
    }

    #[test]
    fn zebra_taking_an_exported_address_makes_it_remote() {
        let (o, mut n) = blue();
        let want = BTreeMap::from([(ip("10.0.0.1"), M1)]);
        n.export(&want, |_, _| Ok::<(), ()>(()));
        // tep's own write echoed back: nothing.
        let echo = teps("10.0.0.1", M1);
        n.apply(&o, &BridgeNeighEvent::New(echo));
        assert_eq!(count(&n, Event::NeighIgnored), 0);
        // zebra replaced it (the host moved): not tep's to delete.
        n.apply(&o, &BridgeNeighEvent::New(zebra("10.0.0.1", M2)));
        assert!(n.exported().is_empty());
        assert_eq!(at(&o, "10.0.0.1"), Some((M2, Origin::External)));
        // Someone deleted one of tep's: it is written again.
        n.export(&want, |_, _| Ok::<(), ()>(()));
        n.apply(&o, &BridgeNeighEvent::Del(echo));
        assert!(n.exported().is_empty());
    }

    #[test]
    fn nothing_is_exchanged_without_suppression() {
        let mut t = TunnelConfig::network(
            "blue",
            TunnelKind::Vxlan,
            ip("192.0.2.1"),
            NetworkSettings::default(),
        );
        t.vni = 100;
        let o = Overlay::new(&[t], 64, 16).unwrap();
        o.neigh_add("blue", ip("10.0.0.1"), M1, false).unwrap();
        let mut n = NetNeigh::new("blue", 0, BRIDGE, Arc::default());
        assert!(n.apply(&o, &BridgeNeighEvent::New(zebra("10.0.0.2", M2))));
        n.resync(&o, &[zebra("10.0.0.3", M2)]);
        assert_eq!(o.neighbours().count(0), 1);
        assert!(n.wanted(&o, &BTreeSet::from([M1])).is_empty());
    }

    #[test]
    fn a_dump_replaces_what_was_taken() {
        let (o, mut n) = blue();
        n.apply(&o, &BridgeNeighEvent::New(zebra("10.0.0.2", M2)));
        n.apply(&o, &BridgeNeighEvent::New(zebra("10.0.0.3", M2)));
        let want = BTreeMap::from([(ip("10.0.0.1"), M1), (ip("10.0.0.7"), M1)]);
        n.export(&want, |_, _| Ok::<(), ()>(()));
        // Lost notifications: .2 went, .4 came, tep's .7 was deleted;
        // .8 an earlier tep left (and an operator's .6 is not tep's).
        let operators = BridgeNeigh {
            proto: None,
            ..teps("10.0.0.6", M1)
        };
        let dump = [
            zebra("10.0.0.3", M2),
            zebra("10.0.0.4", M1),
            teps("10.0.0.1", M1),
            teps("10.0.0.8", M2),
            operators,
        ];
        n.resync(&o, &dump);
        assert_eq!(at(&o, "10.0.0.2"), None);
        assert_eq!(at(&o, "10.0.0.3"), Some((M2, Origin::External)));
        assert_eq!(at(&o, "10.0.0.4"), Some((M1, Origin::External)));
        let left = BTreeMap::from([(ip("10.0.0.1"), M1), (ip("10.0.0.8"), M2)]);
        assert_eq!(n.exported(), &left);
        let mut writes = Vec::new();
        n.export(&want, |a, m| {
            writes.push((a, m));
            Ok::<(), ()>(())
        });
        assert_eq!(
            writes,
            [(ip("10.0.0.8"), None), (ip("10.0.0.7"), Some(M1))],
            "the stale one withdrawn, the lost one written again"
        );
    }
}
