//! Where each destination's frames go: the Ethernet header to its next
//! hop, from the kernel's routing and neighbour tables.
//!
//! The resolver thread owns a copy of the neighbour table kept current
//! from rtnetlink notifications ([`Neighbours`]). Workers write whole
//! frames from their own [`tep_dataplane::NextHops`]; a
//! destination they meet without a route goes to the kernel (which
//! resolves the neighbour and delivers that packet) and is asked for here.
//! The resolver looks up the route (`ip route get`), gives its next hop
//! (interface and gateway or on-link address) a slot in a fixed table,
//! and publishes the next hop's header and the destination's route to it
//! as updates in [`Published`], which workers poll with one atomic load per
//! wake-up. A neighbour that changes its MAC, fails or goes away updates
//! its one next hop; a route or link change makes the workers forget their
//! routes (asked for again by the next packets); nothing is polled from
//! the kernel. Everything here is bounded: a scan of destinations evicts,
//! and counts ([`Bounds`]), instead of growing.

use super::Interface;
use crate::daemon::liveness::{self, Beat, Liveness};
use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::IpAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tep_dataplane::{HopId, LinkHeader, NextHops, Route};
use tep_sys::netlink::{self, Event, Neighbours};
use tep_sys::{Epoll, EventFd};

/// Updates kept for workers that have not applied them yet: one that falls
/// further behind reloads the next hops and forgets its routes.
const UPDATES: usize = 8192;
/// Destinations asked for and not yet looked up, at most: past it, asking
/// is refused (counted) and the packets' next ones ask again.
const REQUESTS: usize = 4096;
/// How often the resolver logs what it could not route through tep.
const SUMMARY_EVERY: Duration = Duration::from_secs(5);

/// How much the tables hold (`[gateway] route_cache`, `next_hops`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capacity {
    /// Destinations in each worker's route cache.
    pub routes: usize,
    /// Next hops, in the resolver's table and each worker's.
    pub hops: usize,
}

/// One change the resolver made, for the workers to apply in order.
#[derive(Clone, Copy, Debug)]
enum Update {
    Hop(HopId, Option<LinkHeader>),
    Route(IpAddr, Route),
    // The routing table changed: every route learned before is forgotten.
    Flush,
}

#[derive(Debug, Default)]
struct Log {
    // The generation of `updates[0]`.
    first: u64,
    updates: VecDeque<Update>,
    // Every next hop as it stands, for a worker that missed updates.
    hops: Vec<(HopId, Option<LinkHeader>)>,
}

/// The counters at the tables' bounds, as `tep show counters` lists them.
#[derive(Debug, Default)]
pub struct Bounds {
    /// Destinations asked for (each a packet or more the kernel carried).
    pub misses: AtomicU64,
    /// Requests refused with [`REQUESTS`] waiting.
    pub requests_dropped: AtomicU64,
    /// Destinations the workers' route caches evicted to make room.
    pub cache_evictions: AtomicU64,
    /// Next hops evicted from the table for another one.
    pub hop_evictions: AtomicU64,
    /// Times a worker fell more than [`UPDATES`] behind.
    pub updates_missed: AtomicU64,
    /// Route caches flushed for a routing or link change.
    pub route_flushes: AtomicU64,
}

/// What the resolver publishes: next hops and routes, as a bounded log of
/// updates numbered by generation; workers apply what is newer than the
/// generation they saw.
#[derive(Debug, Default)]
pub struct Published {
    generation: AtomicU64,
    log: Mutex<Log>,
    // Destinations workers met without a route, for the resolver.
    wanted: Mutex<Vec<IpAddr>>,
    // The tunnels' remotes: resolved again whenever the routes change.
    pinned: Mutex<Option<Vec<IpAddr>>>,
    wake: Option<EventFd>,
    capacity: Option<Capacity>,
    /// The counters at each bound.
    pub bounds: Bounds,
}

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Published {
    fn new(capacity: Capacity) -> io::Result<Published> {
        Ok(Published {
            wake: Some(EventFd::new()?),
            capacity: Some(capacity),
            log: Mutex::new(Log {
                first: 1,
                ..Log::default()
            }),
            ..Published::default()
        })
    }

    /// An empty table of the resolver's size, for a worker's pipeline.
    pub fn table(&self) -> NextHops {
        let c = self.capacity.unwrap_or(Capacity {
            routes: tep_dataplane::DEFAULT_ROUTES,
            hops: tep_dataplane::DEFAULT_HOPS,
        });
        NextHops::new(c.routes, c.hops)
    }

    /// Applies the updates since generation `seen` to `into`; returns the
    /// generation now. One atomic load when nothing changed. A worker that
    /// missed updates (or starts, `seen` 0) takes every next hop as it
    /// stands and learns its routes again.
    pub fn apply(&self, seen: u64, into: &mut NextHops) -> u64 {
        let now = self.generation.load(Ordering::Acquire);
        if now == seen {
            return seen;
        }
        let log = locked(&self.log);
        let mut from = seen + 1;
        if from < log.first {
            if seen != 0 {
                self.bounds.updates_missed.fetch_add(1, Ordering::Relaxed);
            }
            into.flush_routes();
            for &(id, h) in &log.hops {
                into.set_hop(id, h);
            }
            from = log.first;
        }
        let skip = (from - log.first) as usize;
        for u in log.updates.iter().skip(skip) {
            match *u {
                Update::Hop(id, h) => into.set_hop(id, h),
                Update::Route(dst, r) => into.route(dst, r),
                Update::Flush => into.flush_routes(),
            }
        }
        log.first + log.updates.len() as u64 - 1
    }

    /// Asks for the destinations a worker's pipeline met without a route
    /// (drained from its `NextHops`): the slow path, a lock and a write.
    /// Past [`REQUESTS`] waiting, the rest are refused and counted.
    pub fn want(&self, dsts: &mut Vec<IpAddr>) {
        if dsts.is_empty() {
            return;
        }
        self.bounds
            .misses
            .fetch_add(dsts.len() as u64, Ordering::Relaxed);
        let mut wanted = locked(&self.wanted);
        let room = REQUESTS.saturating_sub(wanted.len()).min(dsts.len());
        let refused = dsts.len() - room;
        wanted.extend(dsts.drain(..).take(room));
        drop(wanted);
        if refused > 0 {
            self.bounds
                .requests_dropped
                .fetch_add(refused as u64, Ordering::Relaxed);
        }
        self.notify();
    }

    /// The tunnels' remotes now (after a reload): resolved at once and
    /// again whenever the routes change, whatever traffic asks.
    pub fn pin(&self, remotes: &[IpAddr]) {
        *locked(&self.pinned) = Some(remotes.to_vec());
        self.notify();
    }

    fn notify(&self) {
        if let Some(w) = &self.wake {
            let _ = w.notify();
        }
    }

    /// Next hops resolved now (for `tep show`).
    pub fn known(&self) -> usize {
        locked(&self.log)
            .hops
            .iter()
            .filter(|(_, h)| h.is_some())
            .count()
    }

    fn publish(&self, u: Update) {
        let mut log = locked(&self.log);
        if let Update::Hop(id, h) = u {
            let slot = id.slot as usize;
            if log.hops.len() <= slot {
                log.hops.resize(slot + 1, (id, None));
            }
            log.hops[slot] = (id, h);
        }
        if log.updates.len() == UPDATES {
            log.updates.pop_front();
            log.first += 1;
        }
        log.updates.push_back(u);
        let generation = log.first + log.updates.len() as u64 - 1;
        self.generation.store(generation, Ordering::Release);
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
        capacity: Capacity,
        liveness: &Liveness,
    ) -> Result<Resolver, String> {
        let published = Arc::new(Published::new(capacity).map_err(|e| format!("eventfd: {e}"))?);
        let neighbours =
            Neighbours::new().map_err(|e| format!("rtnetlink: cannot watch neighbours: {e}"))?;
        let mut state = State {
            interfaces,
            neighbours,
            hops: Hops::new(capacity.hops),
            pinned: first.to_vec(),
            published: published.clone(),
            summary: Summary::default(),
        };
        state.resolve_pinned();
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
        self.published.notify();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// How a destination is reached: the interface and the address whose MAC
/// its frames go to. What a next hop is keyed by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Via {
    ifindex: u32,
    next_hop: IpAddr,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Hop {
    via: Option<Via>,
    generation: u32,
    header: Option<LinkHeader>,
    // Asked for since the clock's hand last passed.
    used: bool,
    // Made NTF_MANAGED in the kernel (undone when evicted).
    managed: bool,
    // Published since it took the slot.
    published: bool,
}

/// The next hops, a fixed number of slots reused by clock: a destination's
/// route names a slot and its occupant's generation, so that evicting a
/// next hop needs no search for the routes through it (they miss).
#[derive(Debug)]
struct Hops {
    slots: Vec<Hop>,
    by_via: HashMap<Via, u32>,
    hand: usize,
}

impl Hops {
    fn new(capacity: usize) -> Hops {
        Hops {
            slots: vec![Hop::default(); capacity.max(1)],
            by_via: HashMap::with_capacity(capacity),
            hand: 0,
        }
    }

    fn id(&self, slot: u32) -> HopId {
        HopId {
            slot,
            generation: self.slots[slot as usize].generation,
        }
    }

    /// The slot of `via`, and the next hop evicted to make room for it (a
    /// new one, when every slot is taken).
    fn slot(&mut self, via: Via) -> (u32, Option<Hop>) {
        if let Some(&s) = self.by_via.get(&via) {
            self.slots[s as usize].used = true;
            return (s, None);
        }
        let s = self.victim();
        let old = std::mem::take(&mut self.slots[s]);
        if let Some(v) = old.via {
            self.by_via.remove(&v);
        }
        self.slots[s] = Hop {
            via: Some(via),
            generation: old.generation.wrapping_add(1),
            ..Hop::default()
        };
        self.by_via.insert(via, s as u32);
        (s as u32, old.via.is_some().then_some(old))
    }

    /// A free slot, else the first one not used since the hand passed.
    fn victim(&mut self) -> usize {
        if let Some(s) = self.slots.iter().position(|h| h.via.is_none()) {
            return s;
        }
        loop {
            let s = self.hand;
            self.hand = (s + 1) % self.slots.len();
            if !std::mem::take(&mut self.slots[s].used) {
                return s;
            }
        }
    }
}

/// What could not be routed through tep since the last summary line.
#[derive(Debug, Default)]
struct Summary {
    logged: Option<Instant>,
    elsewhere: u64,
    unrouted: u64,
    example: Option<(IpAddr, String)>,
}

impl Summary {
    fn note(&mut self, dst: IpAddr, routed: bool, why: impl FnOnce() -> String) {
        if routed {
            self.elsewhere += 1;
        } else {
            self.unrouted += 1;
        }
        self.example.get_or_insert_with(|| (dst, why()));
    }

    /// One line at most every [`SUMMARY_EVERY`]: a scan of destinations
    /// the kernel routes elsewhere costs counts, not a line each.
    fn log(&mut self, bounds: &Bounds) {
        if self.logged.is_some_and(|t| t.elapsed() < SUMMARY_EVERY) {
            return;
        }
        let Some((dst, why)) = self.example.take() else {
            return;
        };
        tracing::warn!(
            routed_elsewhere = self.elsewhere,
            no_route = self.unrouted,
            requests_dropped = bounds.requests_dropped.load(Ordering::Relaxed),
            next_hops_evicted = bounds.hop_evictions.load(Ordering::Relaxed),
            example = %dst,
            "destinations the kernel carries (not out of the gateway's interfaces), at most a line every {} s; first: {why}",
            SUMMARY_EVERY.as_secs()
        );
        *self = Summary {
            logged: Some(Instant::now()),
            ..Summary::default()
        };
    }
}

struct State {
    interfaces: Vec<Interface>,
    neighbours: Neighbours,
    hops: Hops,
    // The tunnels' remotes.
    pinned: Vec<IpAddr>,
    published: Arc<Published>,
    summary: Summary,
}

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
        let mut wanted = Vec::with_capacity(REQUESTS);
        while !stop.load(Ordering::Acquire) {
            beat.beat();
            epoll.wait(&mut events, liveness::WAKE.as_millis() as i32)?;
            if let Some(w) = &self.published.wake {
                let _ = w.drain();
            }
            let pinned = locked(&self.published.pinned).take();
            if let Some(p) = pinned {
                self.pinned = p;
                self.resolve_pinned();
            }
            std::mem::swap(&mut wanted, &mut *locked(&self.published.wanted));
            // Several workers (or rounds) may ask for the same one.
            wanted.sort_unstable();
            wanted.dedup();
            for dst in wanted.drain(..) {
                self.resolve(dst);
            }
            changes.clear();
            self.neighbours.poll_events(&mut changes)?;
            let mut flush = false;
            for e in changes.drain(..) {
                flush |= self.follow(e);
            }
            if flush {
                // A route change can move any destination, and only asking
                // the kernel again for each tells which: the workers forget
                // them all instead (they are asked for again by their next
                // packet, which the kernel carries meanwhile); the tunnels'
                // remotes are asked for at once.
                self.published
                    .bounds
                    .route_flushes
                    .fetch_add(1, Ordering::Relaxed);
                self.published.publish(Update::Flush);
                self.resolve_pinned();
            }
            self.summary.log(&self.published.bounds);
        }
        Ok(())
    }

    /// Follows one change of the kernel's tables; true when the routes
    /// learned so far may be wrong now.
    fn follow(&mut self, e: Event) -> bool {
        match e {
            Event::Neighbour { ifindex, ip, .. } => {
                let via = Via {
                    ifindex,
                    next_hop: ip,
                };
                if let Some(&s) = self.hops.by_via.get(&via) {
                    self.refresh(s);
                }
                false
            }
            // The routes that depend on an address change come as Route.
            Event::Address { .. } => false,
            Event::Route | Event::LinkRemoved { .. } | Event::Resync => true,
            Event::Link {
                ifindex, mac, mtu, ..
            } => {
                if let Some(i) = self.interfaces.iter_mut().find(|i| i.index == ifindex) {
                    if let Some(m) = mac {
                        i.mac = m;
                    }
                    i.mtu = mtu;
                }
                // The source MAC of the next hops out of it.
                for s in 0..self.hops.slots.len() as u32 {
                    if self.hops.slots[s as usize]
                        .via
                        .is_some_and(|v| v.ifindex == ifindex)
                    {
                        self.refresh(s);
                    }
                }
                true
            }
        }
    }

    fn resolve_pinned(&mut self) {
        for dst in self.pinned.clone() {
            self.resolve(dst);
        }
    }

    /// Looks up `dst`'s route, its next hop's slot and header, and
    /// publishes them.
    fn resolve(&mut self, dst: IpAddr) {
        let route = match netlink::route_get(dst) {
            Ok(r) if self.interfaces.iter().any(|i| i.index == r.oif) => {
                let via = Via {
                    ifindex: r.oif,
                    next_hop: r.next_hop(dst),
                };
                let (s, evicted) = self.hops.slot(via);
                if let Some(old) = evicted {
                    self.evicted(old);
                }
                if self.hops.slots[s as usize].header.is_none() {
                    self.refresh(s);
                }
                Route::Via(self.hops.id(s))
            }
            Ok(r) => {
                self.summary.note(dst, true, || {
                    format!(
                        "{dst} is routed out of interface {} (neither gateway interface)",
                        r.oif
                    )
                });
                Route::Kernel
            }
            Err(e) => {
                self.summary
                    .note(dst, false, || format!("{dst}: no route: {e}"));
                Route::Kernel
            }
        };
        self.published.publish(Update::Route(dst, route));
    }

    /// A next hop pushed out of the table: the kernel may collect its
    /// neighbour entry again.
    fn evicted(&mut self, old: Hop) {
        self.published
            .bounds
            .hop_evictions
            .fetch_add(1, Ordering::Relaxed);
        if let (true, Some(v)) = (old.managed, old.via) {
            // Setting the entry without NTF_MANAGED clears the flag.
            let _ = netlink::solicit(v.ifindex, v.next_hop);
        }
    }

    /// Recomputes slot `s`'s header from what is known now and publishes a
    /// change; asks the kernel to resolve a next hop it has no MAC for.
    fn refresh(&mut self, s: u32) {
        let hop = self.hops.slots[s as usize];
        let Some(via) = hop.via else {
            return;
        };
        let header = self.header(via);
        if header.is_none() && !hop.managed {
            // The kernel sends the ARP request / neighbour solicitation;
            // its answer arrives as a notification.
            if let Err(e) = netlink::solicit(via.ifindex, via.next_hop) {
                tracing::debug!(next_hop = %via.next_hop, "cannot solicit: {e}");
            }
        } else if header.is_some() && !hop.managed {
            // tep's frames bypass the kernel, which would let the entry go
            // stale and stop checking it: managed, the kernel keeps probing
            // it, so a changed MAC is noticed and notified.
            self.hops.slots[s as usize].managed =
                netlink::manage(via.ifindex, via.next_hop).is_ok();
        }
        if header != hop.header || !hop.published {
            let slot = &mut self.hops.slots[s as usize];
            slot.header = header;
            slot.published = true;
            tracing::debug!(next_hop = %via.next_hop, ?header, "next hop");
            self.published.publish(Update::Hop(self.hops.id(s), header));
        }
    }

    /// The header to next hop `via` from what is known now.
    fn header(&self, via: Via) -> Option<LinkHeader> {
        let out = self.interfaces.iter().find(|i| i.index == via.ifindex)?;
        let mac = self.neighbours.resolve(via.ifindex, via.next_hop)?;
        Some(LinkHeader {
            dst: mac,
            src: out.mac,
            vlan: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn via(i: u8) -> Via {
        Via {
            ifindex: 2,
            next_hop: IpAddr::from([192, 0, 2, i]),
        }
    }

    fn header(i: u8) -> Option<LinkHeader> {
        Some(LinkHeader {
            dst: [i; 6],
            src: [2; 6],
            vlan: None,
        })
    }

    #[test]
    fn next_hops_are_reused_by_clock() {
        let mut h = Hops::new(2);
        assert_eq!(h.slot(via(1)), (0, None));
        assert_eq!(h.slot(via(2)).0, 1);
        let first = h.id(0);
        // Asked for again: spared once.
        assert_eq!(h.slot(via(1)), (0, None));
        let (s, old) = h.slot(via(3));
        assert_eq!((s, old.and_then(|o| o.via)), (1, Some(via(2))));
        assert_eq!(h.id(1).generation, 2, "a new occupant");
        assert_eq!(h.id(0), first);
        // Nobody used since: the hand takes slot 0 next.
        let (s, old) = h.slot(via(4));
        assert_eq!((s, old.and_then(|o| o.via)), (0, Some(via(1))));
        assert_eq!(h.by_via.len(), 2, "bounded");
        assert!(!h.by_via.contains_key(&via(1)));
    }

    #[test]
    fn workers_apply_the_log_and_recover_from_falling_behind() {
        let p = Published::new(Capacity {
            routes: 64,
            hops: 4,
        })
        .unwrap();
        let mut w = p.table();
        let hop = HopId {
            slot: 1,
            generation: 1,
        };
        let a: IpAddr = "198.18.0.1".parse().unwrap();
        p.publish(Update::Hop(hop, header(7)));
        p.publish(Update::Route(a, Route::Via(hop)));
        let mut seen = p.apply(0, &mut w);
        assert_eq!(seen, 2);
        assert_eq!(w.get(a), header(7).as_ref());
        assert_eq!(p.apply(seen, &mut w), seen, "nothing new");
        // A new MAC: one update for every destination through it.
        p.publish(Update::Hop(hop, header(8)));
        seen = p.apply(seen, &mut w);
        assert_eq!(w.get(a), header(8).as_ref());
        // A route change: the routes go, the next hops stay.
        p.publish(Update::Flush);
        seen = p.apply(seen, &mut w);
        assert!(w.get(a).is_none());
        p.publish(Update::Route(a, Route::Via(hop)));
        seen = p.apply(seen, &mut w);
        assert_eq!(w.get(a), header(8).as_ref());
        // More updates than the log keeps: the worker takes the next hops
        // as they stand and forgets its routes.
        p.publish(Update::Hop(hop, header(9)));
        for i in 0..UPDATES as u32 {
            let d = IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + i));
            p.publish(Update::Route(d, Route::Kernel));
        }
        assert_eq!(locked(&p.log).updates.len(), UPDATES, "bounded");
        p.apply(seen, &mut w);
        assert_eq!(p.bounds.updates_missed.load(Ordering::Relaxed), 1);
        assert!(w.get(a).is_none(), "forgotten");
        w.route(a, Route::Via(hop));
        assert_eq!(w.get(a), header(9).as_ref(), "the next hop as it stands");
        assert_eq!(p.known(), 1);
    }

    #[test]
    fn requests_are_bounded_and_counted() {
        let p = Published::new(Capacity {
            routes: 64,
            hops: 4,
        })
        .unwrap();
        let mut batch: Vec<IpAddr> = (0..REQUESTS as u32 + 10)
            .map(|i| IpAddr::from(std::net::Ipv4Addr::from(i)))
            .collect();
        p.want(&mut batch);
        assert!(batch.is_empty());
        assert_eq!(locked(&p.wanted).len(), REQUESTS);
        assert_eq!(p.bounds.requests_dropped.load(Ordering::Relaxed), 10);
        assert_eq!(
            p.bounds.misses.load(Ordering::Relaxed),
            REQUESTS as u64 + 10
        );
    }
}
