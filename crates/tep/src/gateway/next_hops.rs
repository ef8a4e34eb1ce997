//! Where each destination's frames go: the Ethernet header to its next
//! hop, from the kernel's routing and neighbour tables.
//!
//! The resolver thread owns a copy of the neighbour table kept current
//! from rtnetlink notifications ([`Neighbours`]). Workers write whole
//! frames from their own [`tep_dataplane::nexthop::NextHops`]; a
//! destination they meet without a header goes to the kernel (which
//! resolves the neighbour and delivers that packet) and is asked for here.
//! The resolver looks up the route (`ip route get`), the neighbour's MAC
//! on the route's interface, and publishes the header in [`Published`],
//! which workers poll with one atomic load per wake-up. A neighbour that
//! changes its MAC, fails or goes away, and any route or link change,
//! republishes what depends on it; nothing is polled from the kernel.

use super::Interface;
use crate::daemon::liveness::{self, Beat, Liveness};
use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tep_dataplane::nexthop::{LinkHeader, NextHops};
use tep_sys::netlink::{self, Event, Neighbours};
use tep_sys::{Epoll, EventFd};

/// The headers the resolver has published, each with the generation it
/// changed in; workers apply what changed since the generation they saw.
#[derive(Debug, Default)]
pub struct Published {
    generation: AtomicU64,
    entries: Mutex<HashMap<IpAddr, (Option<LinkHeader>, u64)>>,
    // Destinations workers met without a header, for the resolver.
    wanted: Mutex<Vec<IpAddr>>,
    wake: Option<EventFd>,
    /// Destinations asked for (each a packet or more the kernel carried).
    pub misses: AtomicU64,
}

impl Published {
    fn new() -> io::Result<Published> {
        Ok(Published {
            wake: Some(EventFd::new()?),
            ..Published::default()
        })
    }

    /// Copies what changed since generation `seen` into `into`; returns
    /// the generation now. One atomic load when nothing did.
    pub fn apply(&self, seen: u64, into: &mut NextHops) -> u64 {
        let now = self.generation.load(Ordering::Acquire);
        if now == seen {
            return seen;
        }
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        for (&dst, &(header, changed)) in entries.iter() {
            if changed > seen {
                into.set(dst, header);
            }
        }
        now
    }

    /// Asks for the destinations a worker's pipeline met without a header
    /// (drained from its `NextHops`): the slow path, a lock and a write.
    pub fn want(&self, dsts: &mut Vec<IpAddr>) {
        if dsts.is_empty() {
            return;
        }
        self.misses.fetch_add(dsts.len() as u64, Ordering::Relaxed);
        self.wanted
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .append(dsts);
        if let Some(w) = &self.wake {
            let _ = w.notify();
        }
    }

    /// Headers known now (for `tep show`).
    pub fn known(&self) -> usize {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.values().filter(|(h, _)| h.is_some()).count()
    }

    fn publish(&self, dst: IpAddr, header: Option<LinkHeader>) -> bool {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.get(&dst).map(|e| e.0) == Some(header) {
            return false;
        }
        let generation = self.generation.load(Ordering::Relaxed) + 1;
        entries.insert(dst, (header, generation));
        self.generation.store(generation, Ordering::Release);
        true
    }
}

/// The resolver thread; stops when dropped.
#[derive(Debug)]
pub struct Resolver {
    /// What it publishes.
    pub published: Arc<Published>,
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<io::Result<()>>>,
}

impl Resolver {
    /// Starts resolving for frames out of `interfaces`, beginning with
    /// `first` (the tunnels' remote addresses: resolved before any packet
    /// asks, so that the first ones need not take the kernel's way).
    pub fn start(
        interfaces: Vec<Interface>,
        first: &[IpAddr],
        liveness: &Liveness,
    ) -> Result<Resolver, String> {
        let published = Arc::new(Published::new().map_err(|e| format!("eventfd: {e}"))?);
        let neighbours =
            Neighbours::new().map_err(|e| format!("rtnetlink: cannot watch neighbours: {e}"))?;
        let mut state = State {
            interfaces,
            neighbours,
            routes: HashMap::new(),
            looked_up: HashMap::new(),
            published: published.clone(),
        };
        for &dst in first {
            state.resolve(dst);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let handle = liveness::spawn(liveness, "next-hops", Duration::ZERO, move |beat| {
            state.run(&stopping, beat)
        })
        .map_err(|e| format!("cannot start the resolver thread: {e}"))?;
        Ok(Resolver {
            published,
            stop,
            handle: Some(handle),
        })
    }
}

impl Drop for Resolver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(w) = &self.published.wake {
            let _ = w.notify();
        }
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// How a destination is reached: the interface and the address whose MAC
/// its frames go to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Via {
    ifindex: u32,
    next_hop: IpAddr,
}

struct State {
    interfaces: Vec<Interface>,
    neighbours: Neighbours,
    // Every destination asked for, and how it is reached (None: not out
    // of tep's interfaces, or no route: the kernel carries it).
    routes: HashMap<IpAddr, Option<Via>>,
    // When each was last looked up: a destination the kernel cannot
    // resolve is asked for by every wake-up of a busy worker.
    looked_up: HashMap<IpAddr, Instant>,
    published: Arc<Published>,
}

/// How often one destination is looked up again on request.
const LOOKUP_AGAIN: Duration = Duration::from_millis(200);

const TOKEN_NEIGHBOURS: u64 = 0;
const TOKEN_WANTED: u64 = 1;

impl State {
    fn run(&mut self, stop: &AtomicBool, beat: &Beat) -> io::Result<()> {
        let epoll = Epoll::new()?;
        epoll.add(self.neighbours.as_raw_fd(), TOKEN_NEIGHBOURS, true, false)?;
        if let Some(w) = &self.published.wake {
            epoll.add(w.as_raw_fd(), TOKEN_WANTED, true, false)?;
        }
        let mut events = Vec::with_capacity(4);
        let mut changes = Vec::new();
        while !stop.load(Ordering::Acquire) {
            beat.beat();
            epoll.wait(&mut events, liveness::WAKE.as_millis() as i32)?;
            if let Some(w) = &self.published.wake {
                let _ = w.drain();
            }
            let wanted: Vec<IpAddr> = std::mem::take(
                &mut *self
                    .published
                    .wanted
                    .lock()
                    .unwrap_or_else(|e| e.into_inner()),
            );
            for dst in wanted {
                let recent = self
                    .looked_up
                    .get(&dst)
                    .is_some_and(|t| t.elapsed() < LOOKUP_AGAIN);
                if !recent {
                    self.resolve(dst);
                }
            }
            changes.clear();
            self.neighbours.poll_events(&mut changes)?;
            for e in changes.drain(..) {
                self.follow(e);
            }
        }
        Ok(())
    }

    /// Follows one change of the kernel's tables.
    fn follow(&mut self, e: Event) {
        match e {
            Event::Neighbour { ifindex, ip, .. } => {
                let hit: Vec<IpAddr> = self
                    .routes
                    .iter()
                    .filter(|(_, via)| {
                        **via
                            == Some(Via {
                                ifindex,
                                next_hop: ip,
                            })
                    })
                    .map(|(&d, _)| d)
                    .collect();
                for dst in hit {
                    let header = self.header(dst);
                    if self.published.publish(dst, header) {
                        tracing::debug!(%dst, ?header, "next hop changed");
                    }
                }
            }
            // The routes that depend on an address change come as Route.
            Event::Address { .. } => {}
            Event::Route | Event::Link { .. } | Event::LinkRemoved { .. } | Event::Resync => {
                if let Event::Link {
                    ifindex, mac, mtu, ..
                } = e
                {
                    if let Some(i) = self.interfaces.iter_mut().find(|i| i.index == ifindex) {
                        if let Some(m) = mac {
                            i.mac = m;
                        }
                        i.mtu = mtu;
                    }
                }
                let all: Vec<IpAddr> = self.routes.keys().copied().collect();
                for dst in all {
                    self.resolve(dst);
                }
            }
        }
    }

    /// Looks up `dst`'s route and publishes its header (or that it has
    /// none); asks the kernel to resolve a next hop it has no MAC for.
    fn resolve(&mut self, dst: IpAddr) {
        self.looked_up.insert(dst, Instant::now());
        let via = match netlink::route_get(dst) {
            Ok(r) if self.interfaces.iter().any(|i| i.index == r.oif) => Some(Via {
                ifindex: r.oif,
                next_hop: r.next_hop(dst),
            }),
            Ok(r) => {
                if !self.routes.contains_key(&dst) {
                    tracing::warn!(%dst, oif = r.oif, "routed out of neither gateway interface: the kernel carries it");
                }
                None
            }
            Err(e) => {
                if !self.routes.contains_key(&dst) {
                    tracing::warn!(%dst, "no route: {e}");
                }
                None
            }
        };
        self.routes.insert(dst, via);
        let header = self.header(dst);
        if header.is_none() {
            if let Some(v) = via {
                // The kernel sends the ARP request / neighbour solicitation;
                // its answer arrives as a notification.
                if let Err(e) = netlink::solicit(v.ifindex, v.next_hop) {
                    tracing::debug!(next_hop = %v.next_hop, "cannot solicit: {e}");
                }
            }
        } else if let Some(v) = via {
            // tep's frames bypass the kernel, which would let the entry go
            // stale and stop checking it: managed, the kernel keeps probing
            // it, so a changed MAC is noticed and notified.
            let _ = netlink::manage(v.ifindex, v.next_hop);
        }
        if self.published.publish(dst, header) {
            tracing::debug!(%dst, ?header, "next hop");
        }
    }

    /// The header to `dst` from what is known now.
    fn header(&self, dst: IpAddr) -> Option<LinkHeader> {
        let via = (*self.routes.get(&dst)?)?;
        let out = self.interfaces.iter().find(|i| i.index == via.ifindex)?;
        let mac = self.neighbours.resolve(via.ifindex, via.next_hop)?;
        Some(LinkHeader {
            dst: mac,
            src: out.mac,
            vlan: None,
        })
    }
}
