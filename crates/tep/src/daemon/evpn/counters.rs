//! What the EVPN thread did and refused, per network: declared once
//! ([`Event::ALL`]), read by `tep show evpn` and the metrics.

use std::sync::atomic::{AtomicU64, Ordering};

macro_rules! events {
    ($($(#[$doc:meta])* $v:ident = $name:literal,)*) => {
        /// One thing the EVPN thread counts.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum Event { $($(#[$doc])* $v,)* }

        impl Event {
            /// Every event, in the order of [`NetCounters`].
            pub const ALL: &'static [Event] = &[$(Event::$v,)*];

            /// Its name in `tep show evpn` and the metrics' `event` label.
            pub fn name(self) -> &'static str {
                match self { $(Event::$v => $name,)* }
            }
        }
    };
}

events! {
    /// A flood entry (type-3 route) taken into the flood list.
    VtepAdded = "vtep_added",
    /// A flood entry withdrawn, its VTEP taken out of the flood list.
    VtepRemoved = "vtep_removed",
    /// A remote MAC (type-2 route) taken into the FDB.
    MacAdded = "mac_added",
    /// A remote MAC that moved to another VTEP.
    MacMoved = "mac_moved",
    /// A remote MAC withdrawn and removed.
    MacRemoved = "mac_removed",
    /// Ignored: a VTEP of the other address family than the network's.
    IgnoredFamily = "ignored_family",
    /// Ignored: a port other than the one tep sends the network's frames to.
    IgnoredPort = "ignored_port",
    /// Ignored: a VNI other than the network's.
    IgnoredVni = "ignored_vni",
    /// Ignored: a VTEP address that is multicast, broadcast, unspecified or
    /// tep's own (no multicast underlay).
    IgnoredAddress = "ignored_address",
    /// Ignored: a multicast or broadcast MAC.
    IgnoredMac = "ignored_mac",
    /// Not taken: the config's static entry for that MAC stays.
    RefusedStatic = "refused_static",
    /// Not taken: the FDB or the VTEP registry is full.
    RefusedFull = "refused_full",
    /// A local MAC written to the bridge for zebra to advertise.
    Exported = "exported",
    /// A local MAC (aged, moved) taken off the bridge: withdrawn.
    Withdrawn = "withdrawn",
    /// A bridge FDB or neighbour write that failed (tried again).
    ExportFailed = "export_failed",
    /// A full dump of the kernel's FDB, after notifications were lost.
    Resync = "resync",
    /// A remote MAC+IP (zebra's entry on the bridge, a type-2 route with
    /// an IP) taken into the neighbour table.
    NeighImported = "neigh_imported",
    /// A remote MAC+IP withdrawn and removed from the neighbour table.
    NeighRemoved = "neigh_removed",
    /// A local MAC+IP written to the bridge for zebra to advertise.
    NeighExported = "neigh_exported",
    /// A local MAC+IP (aged, moved, gone) taken off the bridge: withdrawn.
    NeighWithdrawn = "neigh_withdrawn",
    /// Ignored: a neighbour on the bridge neither zebra's nor tep's (the
    /// kernel's own, an operator's).
    NeighIgnored = "neigh_ignored",
}

/// A network's counters, one per [`Event`].
#[derive(Debug, Default)]
pub struct NetCounters([AtomicU64; EVENT_COUNT]);

const EVENT_COUNT: usize = 21;
const _: () = assert!(Event::ALL.len() == EVENT_COUNT);

impl NetCounters {
    /// Counts one `e`.
    pub fn count(&self, e: Event) {
        self.0[e as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// How many `e`.
    pub fn get(&self, e: Event) -> u64 {
        self.0[e as usize].load(Ordering::Relaxed)
    }

    /// Every event with its count.
    pub fn rows(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        Event::ALL.iter().map(|&e| (e.name(), self.get(e)))
    }
}
