//! What the kernel's FDB of an EVPN network's VXLAN device means to the
//! overlay, with no I/O: zebra installs there what BGP learned (a flood
//! entry `00:00:00:00:00:00 dst VTEP` per type-3 route, a MAC with its VTEP
//! per type-2 route); [`NetSync`] takes each entry into the network's flood
//! list and FDB (origin External), and says which local MACs the bridge
//! must hold for zebra to advertise. The thread in `super` feeds it.

use super::counters::{Event, NetCounters};
use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::Arc;
use tep_dataplane::overlay::fdb::{Dst, FdbKey, Origin};
use tep_dataplane::overlay::{Overlay, OverlayError};
use tep_sys::netlink::{FdbEntry, FdbEvent};

/// An entry of the device's own FDB (`bridge fdb … self`), not the
/// bridge's view of the device as a port.
const NTF_SELF: u8 = 0x02;

/// One EVPN network as the kernel shows it.
#[derive(Debug)]
pub struct NetSync {
    /// The network's name.
    pub name: String,
    /// Its index in the overlay.
    pub index: u16,
    /// Its VNI.
    pub vni: u32,
    /// tep's address in it.
    pub local: IpAddr,
    /// The port tep sends to (the network's `remote_port`).
    pub peer_port: u16,
    /// The kernel VXLAN device's ifindex.
    pub vxlan: u32,
    /// Flood entries tep took from the kernel (not those of the config or
    /// `tep peer add`, which the kernel never removes).
    flood: BTreeSet<IpAddr>,
    /// Local MACs written to the bridge for zebra.
    exported: BTreeSet<[u8; 6]>,
    /// Its counters (shared with `tep show evpn` and the metrics).
    pub counters: Arc<NetCounters>,
}

/// A remote entry of the device's FDB, sorted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Remote {
    /// `00:00:00:00:00:00 dst VTEP`: head-end replication to VTEP.
    Flood(IpAddr),
    /// A MAC behind a VTEP.
    Mac([u8; 6], IpAddr),
}

impl NetSync {
    /// A network with nothing taken from the kernel yet.
    pub fn new(
        name: &str,
        index: u16,
        vni: u32,
        local: IpAddr,
        peer_port: u16,
        vxlan: u32,
    ) -> NetSync {
        NetSync {
            name: name.to_string(),
            index,
            vni,
            local,
            peer_port,
            vxlan,
            flood: BTreeSet::new(),
            exported: BTreeSet::new(),
            counters: Arc::new(NetCounters::default()),
        }
    }

    /// The remote VTEPs taken from the kernel.
    pub fn flood(&self) -> &BTreeSet<IpAddr> {
        &self.flood
    }

    /// The local MACs written to the bridge.
    pub fn exported(&self) -> &BTreeSet<[u8; 6]> {
        &self.exported
    }

    /// Takes one notification into `o`; false when it is not about this
    /// network's device.
    pub fn apply(&mut self, o: &Overlay, ev: &FdbEvent) -> bool {
        let (entry, added) = match ev {
            FdbEvent::New(e) => (e, true),
            FdbEvent::Del(e) => (e, false),
        };
        if !self.is_mine(entry) {
            return false;
        }
        match self.remote(entry) {
            Ok(Some(r)) if added => self.add(o, r),
            Ok(Some(r)) => self.remove(o, r),
            Ok(None) => {}
            Err(why) => self.counters.count(why),
        }
        true
    }

    /// Takes a whole dump of the kernel's FDB into `o`: what it holds is
    /// added, what tep took earlier and it no longer holds is removed
    /// (after a restart of the thread or a lost notification).
    pub fn resync(&mut self, o: &Overlay, dump: &[FdbEntry]) {
        let mut flood = BTreeSet::new();
        let mut macs = BTreeSet::new();
        for e in dump {
            if !self.is_mine(e) {
                continue;
            }
            match self.remote(e) {
                Ok(Some(r)) => {
                    match r {
                        Remote::Flood(a) => flood.insert(a),
                        Remote::Mac(m, _) => macs.insert(m),
                    };
                    self.add(o, r);
                }
                Ok(None) => {}
                Err(why) => self.counters.count(why),
            }
        }
        let gone: Vec<IpAddr> = self.flood.difference(&flood).copied().collect();
        for a in gone {
            self.remove(o, Remote::Flood(a));
        }
        let mut stale = Vec::new();
        o.fdb().for_each(Some(self.index), |k, e| {
            if e.origin == Origin::External && !macs.contains(&k.mac()) {
                stale.push(k.mac());
            }
        });
        for m in stale {
            if o.fdb_del(&self.name, m).is_ok() {
                self.counters.count(Event::MacRemoved);
            }
        }
    }

    /// An entry of this network's device's own FDB.
    fn is_mine(&self, e: &FdbEntry) -> bool {
        e.ifindex == self.vxlan && e.flags & NTF_SELF != 0
    }

    /// What an entry of the device says, or why tep cannot use it; None
    /// for entries that are not remote state (no destination: the
    /// device's own address).
    fn remote(&self, e: &FdbEntry) -> Result<Option<Remote>, Event> {
        let Some(dst) = e.dst else {
            return Ok(None);
        };
        if e.vni.is_some_and(|v| v != self.vni) {
            return Err(Event::IgnoredVni);
        }
        if e.port.is_some_and(|p| p != self.peer_port) {
            return Err(Event::IgnoredPort);
        }
        if dst.is_ipv4() != self.local.is_ipv4() {
            return Err(Event::IgnoredFamily);
        }
        if !unicast(dst) || dst == self.local {
            return Err(Event::IgnoredAddress);
        }
        if e.mac == [0; 6] {
            return Ok(Some(Remote::Flood(dst)));
        }
        if e.mac[0] & 1 != 0 {
            return Err(Event::IgnoredMac);
        }
        Ok(Some(Remote::Mac(e.mac, dst)))
    }

    fn add(&mut self, o: &Overlay, r: Remote) {
        match r {
            Remote::Flood(a) => {
                if self.flood.contains(&a) {
                    return;
                }
                match o.peer_add(&self.name, a) {
                    Ok(()) => {
                        self.flood.insert(a);
                        self.counters.count(Event::VtepAdded);
                    }
                    // The config or `tep peer add` named it: theirs.
                    Err(OverlayError::Exists(_)) => {}
                    Err(e) => self.counters.count(refusal(&e)),
                }
            }
            Remote::Mac(mac, dst) => self.add_mac(o, mac, dst),
        }
    }

    fn add_mac(&mut self, o: &Overlay, mac: [u8; 6], dst: IpAddr) {
        let was = o.fdb().lookup(FdbKey::new(self.index, mac));
        if let Some(e) = was {
            if e.origin == Origin::Static {
                return self.counters.count(Event::RefusedStatic);
            }
            if e.origin == Origin::External
                && o.vtep_id(dst).is_some_and(|v| e.dst == Dst::Remote(v))
            {
                return;
            }
        }
        match o.fdb_set(&self.name, mac, dst, Origin::External, true) {
            Ok(()) if was.is_some() => self.counters.count(Event::MacMoved),
            Ok(()) => self.counters.count(Event::MacAdded),
            Err(e) => self.counters.count(refusal(&e)),
        }
    }

    fn remove(&mut self, o: &Overlay, r: Remote) {
        match r {
            Remote::Flood(a) => {
                if self.flood.remove(&a) && o.peer_del(&self.name, a).is_ok() {
                    self.counters.count(Event::VtepRemoved);
                }
            }
            Remote::Mac(mac, _) => {
                let key = FdbKey::new(self.index, mac);
                let external = o
                    .fdb()
                    .lookup(key)
                    .is_some_and(|e| e.origin == Origin::External);
                if external && o.fdb_del(&self.name, mac).is_ok() {
                    self.counters.count(Event::MacRemoved);
                }
            }
        }
    }

    /// Brings the bridge's entries to `local` (the network's local MACs):
    /// `write(mac, true)` adds one, `write(mac, false)` removes one; a
    /// failed write is counted and tried again next time.
    pub fn export<E>(
        &mut self,
        local: &BTreeSet<[u8; 6]>,
        mut write: impl FnMut([u8; 6], bool) -> Result<(), E>,
    ) {
        let gone: Vec<[u8; 6]> = self.exported.difference(local).copied().collect();
        for mac in gone {
            match write(mac, false) {
                Ok(()) => {
                    self.exported.remove(&mac);
                    self.counters.count(Event::Withdrawn);
                }
                Err(_) => self.counters.count(Event::ExportFailed),
            }
        }
        let new: Vec<[u8; 6]> = local.difference(&self.exported).copied().collect();
        for mac in new {
            match write(mac, true) {
                Ok(()) => {
                    self.exported.insert(mac);
                    self.counters.count(Event::Exported);
                }
                Err(_) => self.counters.count(Event::ExportFailed),
            }
        }
    }
}

/// The local MACs of each of `networks` in `o` now, in one walk of the
/// FDB.
pub fn local_macs(o: &Overlay, networks: &[u16]) -> Vec<BTreeSet<[u8; 6]>> {
    let mut macs = vec![BTreeSet::new(); networks.len()];
    o.fdb().for_each(None, |k, e| {
        if e.dst != Dst::Local {
            return;
        }
        if let Some(i) = networks.iter().position(|&n| n == k.network()) {
            macs[i].insert(k.mac());
        }
    });
    macs
}

/// Not multicast, broadcast or unspecified.
fn unicast(a: IpAddr) -> bool {
    let broadcast = matches!(a, IpAddr::V4(v) if v.is_broadcast());
    !a.is_unspecified() && !a.is_multicast() && !broadcast
}

/// The counter of an overlay refusal.
fn refusal(e: &OverlayError) -> Event {
    match e {
        OverlayError::Full(_) => Event::RefusedFull,
        _ => Event::IgnoredAddress,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tep_dataplane::config::{NetworkSettings, TunnelConfig};
    use tep_dataplane::TunnelKind;

    const VXLAN: u32 = 7;
    const M1: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const M2: [u8; 6] = [2, 0, 0, 0, 0, 2];

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    /// Network "blue" (VNI 100, 192.0.2.1, peers' port 4789) with a
    /// configured flood entry and static MAC.
    fn blue() -> (Overlay, NetSync) {
        let mut t = TunnelConfig::network(
            "blue",
            TunnelKind::Vxlan,
            ip("192.0.2.1"),
            NetworkSettings {
                flood: vec![ip("192.0.2.9")],
                fdb: vec![(tep_wire::ethernet::EthernetAddress(M2), ip("192.0.2.9"))],
                ..NetworkSettings::default()
            },
        );
        t.vni = 100;
        let o = Overlay::new(&[t], 64, 16).unwrap();
        let n = NetSync::new("blue", 0, 100, ip("192.0.2.1"), 4789, VXLAN);
        (o, n)
    }

    /// A remote entry of the VXLAN device, as zebra writes it.
    fn remote(mac: [u8; 6], dst: &str) -> FdbEntry {
        FdbEntry {
            ifindex: VXLAN,
            mac,
            dst: Some(ip(dst)),
            state: 0x02,
            flags: 0x12,
            vni: None,
            port: None,
            master: None,
        }
    }

    fn flood(dst: &str) -> FdbEntry {
        FdbEntry {
            state: 0xc0,
            flags: 0x02,
            ..remote([0; 6], dst)
        }
    }

    fn at(o: &Overlay, mac: [u8; 6]) -> Option<(Origin, Option<IpAddr>)> {
        let e = o.fdb().lookup(FdbKey::new(0, mac))?;
        let dst = match e.dst {
            Dst::Remote(v) => o.vteps().addr(v),
            Dst::Local => None,
        };
        Some((e.origin, dst))
    }

    #[test]
    fn flood_entries_follow_type3_routes() {
        let (o, mut n) = blue();
        assert!(n.apply(&o, &FdbEvent::New(flood("192.0.2.2"))));
        assert!(n.apply(&o, &FdbEvent::New(flood("192.0.2.3"))));
        // The configured one stays the config's.
        assert!(n.apply(&o, &FdbEvent::New(flood("192.0.2.9"))));
        let peers = o.peers("blue").unwrap();
        assert_eq!(peers, [ip("192.0.2.9"), ip("192.0.2.2"), ip("192.0.2.3")]);
        assert!(n.apply(&o, &FdbEvent::Del(flood("192.0.2.2"))));
        assert!(n.apply(&o, &FdbEvent::Del(flood("192.0.2.9"))));
        assert_eq!(o.peers("blue").unwrap(), [ip("192.0.2.9"), ip("192.0.2.3")]);
        assert_eq!(n.counters.get(Event::VtepAdded), 2);
        assert_eq!(n.counters.get(Event::VtepRemoved), 1);
        assert_eq!(
            n.flood().iter().copied().collect::<Vec<_>>(),
            [ip("192.0.2.3")]
        );
    }

    #[test]
    fn macs_follow_type2_routes_moves_and_withdrawals() {
        let (o, mut n) = blue();
        n.apply(&o, &FdbEvent::New(remote(M1, "192.0.2.2")));
        assert_eq!(at(&o, M1), Some((Origin::External, Some(ip("192.0.2.2")))));
        // The same again: nothing new.
        n.apply(&o, &FdbEvent::New(remote(M1, "192.0.2.2")));
        // Mobility: the MAC is behind h3 now.
        n.apply(&o, &FdbEvent::New(remote(M1, "192.0.2.3")));
        assert_eq!(at(&o, M1), Some((Origin::External, Some(ip("192.0.2.3")))));
        assert_eq!(n.counters.get(Event::MacAdded), 1);
        assert_eq!(n.counters.get(Event::MacMoved), 1);
        n.apply(&o, &FdbEvent::Del(remote(M1, "192.0.2.3")));
        assert_eq!(at(&o, M1), None);
        assert_eq!(n.counters.get(Event::MacRemoved), 1);
        // The config's static entry is neither replaced nor removed.
        n.apply(&o, &FdbEvent::New(remote(M2, "192.0.2.2")));
        n.apply(&o, &FdbEvent::Del(remote(M2, "192.0.2.2")));
        assert_eq!(at(&o, M2), Some((Origin::Static, Some(ip("192.0.2.9")))));
        assert_eq!(n.counters.get(Event::RefusedStatic), 1);
        // A learned entry is the data path's: a withdrawal elsewhere does
        // not remove it.
        let key = FdbKey::new(0, M1);
        o.fdb().learn(key, Dst::Local, o.now_s(), 100);
        n.apply(&o, &FdbEvent::Del(remote(M1, "192.0.2.2")));
        assert_eq!(at(&o, M1), Some((Origin::Learned, None)));
    }

    #[test]
    fn entries_tep_cannot_use_are_ignored_and_counted() {
        let (o, mut n) = blue();
        let bad = [
            (
                FdbEntry {
                    vni: Some(200),
                    ..remote(M1, "192.0.2.2")
                },
                Event::IgnoredVni,
            ),
            (
                FdbEntry {
                    port: Some(4790),
                    ..remote(M1, "192.0.2.2")
                },
                Event::IgnoredPort,
            ),
            (remote(M1, "2001:db8::2"), Event::IgnoredFamily),
            (flood("239.1.1.1"), Event::IgnoredAddress),
            (remote(M1, "192.0.2.1"), Event::IgnoredAddress),
            (remote(M1, "0.0.0.0"), Event::IgnoredAddress),
            (
                remote([1, 0, 0x5e, 0, 0, 1], "192.0.2.2"),
                Event::IgnoredMac,
            ),
        ];
        for (e, why) in bad {
            let before = n.counters.get(why);
            assert!(n.apply(&o, &FdbEvent::New(e)));
            assert_eq!(n.counters.get(why), before + 1, "{e:?}");
        }
        assert_eq!(at(&o, M1), None);
        assert_eq!(o.peers("blue").unwrap(), [ip("192.0.2.9")]);
        // The port that is the network's own is fine.
        n.apply(
            &o,
            &FdbEvent::New(FdbEntry {
                port: Some(4789),
                ..remote(M1, "192.0.2.2")
            }),
        );
        assert!(at(&o, M1).is_some());
        // Not this network's device's own table: not ours at all.
        let other = FdbEntry {
            ifindex: 8,
            ..remote(M1, "192.0.2.3")
        };
        let bridge_side = FdbEntry {
            flags: 0x10,
            master: Some(3),
            ..remote(M1, "192.0.2.3")
        };
        assert!(!n.apply(&o, &FdbEvent::New(other)));
        assert!(!n.apply(&o, &FdbEvent::New(bridge_side)));
        assert_eq!(at(&o, M1), Some((Origin::External, Some(ip("192.0.2.2")))));
        // An entry without a destination (the device's own) is no remote
        // state and no error.
        let own = FdbEntry {
            dst: None,
            ..remote(M1, "192.0.2.3")
        };
        assert!(n.apply(&o, &FdbEvent::New(own)));
    }

    #[test]
    fn a_dump_replaces_what_was_taken() {
        let (o, mut n) = blue();
        n.resync(
            &o,
            &[
                flood("192.0.2.2"),
                flood("192.0.2.3"),
                remote(M1, "192.0.2.2"),
            ],
        );
        assert_eq!(o.peers("blue").unwrap().len(), 3);
        assert!(at(&o, M1).is_some());
        // Notifications lost: h2 and M1 went away meanwhile.
        n.resync(&o, &[flood("192.0.2.3")]);
        assert_eq!(o.peers("blue").unwrap(), [ip("192.0.2.9"), ip("192.0.2.3")]);
        assert_eq!(at(&o, M1), None);
        assert_eq!(at(&o, M2).map(|e| e.0), Some(Origin::Static));
    }

    #[test]
    fn local_macs_go_to_the_bridge_and_are_withdrawn() {
        let (o, mut n) = blue();
        for m in [M1, [2, 0, 0, 0, 0, 3]] {
            o.fdb().learn(FdbKey::new(0, m), Dst::Local, o.now_s(), 100);
        }
        let mut bridge = BTreeSet::new();
        let mut fail = false;
        let write = |m: [u8; 6], add: bool, fail: bool, bridge: &mut BTreeSet<[u8; 6]>| {
            if fail {
                return Err(());
            }
            if add {
                bridge.insert(m);
            } else {
                bridge.remove(&m);
            }
            Ok(())
        };
        let local = local_macs(&o, &[0]).remove(0);
        assert_eq!(local.len(), 2, "remote and static entries are not local");
        n.export(&local, |m, add| write(m, add, fail, &mut bridge));
        assert_eq!(bridge, local);
        // M1 moved behind a remote VTEP (BGP says so): withdrawn.
        n.apply(&o, &FdbEvent::New(remote(M1, "192.0.2.2")));
        let local = local_macs(&o, &[0]).remove(0);
        fail = true;
        n.export(&local, |m, add| write(m, add, fail, &mut bridge));
        assert_eq!(n.counters.get(Event::ExportFailed), 1);
        assert!(bridge.contains(&M1), "a failed write is tried again");
        fail = false;
        n.export(&local, |m, add| write(m, add, fail, &mut bridge));
        assert_eq!(bridge, local);
        assert_eq!(n.counters.get(Event::Exported), 2);
        assert_eq!(n.counters.get(Event::Withdrawn), 1);
        assert_eq!(n.exported(), &local);
    }
}
