//! A UPF's tagged data networks reach their own routers (gateway mode,
//! `[[pfcp.network]] address` and `gateway`). The kernel has no device
//! for a data network's VLAN of the inner interface, so neither its
//! routes nor its neighbour table can tell one network's router from
//! another's: tep is the network's host on the VLAN itself.
//! - uplink: every packet of such a network leaves tagged to its
//!   router's MAC, from the inner interface's MAC (`ip-rewrite`), never
//!   through the kernel's route; while the MAC is not known the packet is
//!   dropped `no_route` and a request is due;
//! - node `dn-arp` (encap, after `vlan-input`): an ARP request for tep's
//!   address on the VLAN is answered, tagged, with the inner interface's
//!   MAC; an ARP frame from the router's address (request, reply or
//!   gratuitous) sets its MAC; any other ARP frame of the VLAN is dropped
//!   (`arp_ignored`): a stranger's ARP changes nothing;
//! - [`DnWorker::resolve`], once per worker round: who-has router tell
//!   address, tagged, broadcast, where packets wait for the MAC or the
//!   MAC is older than [`REFRESH_NS`]; at most one per network per
//!   [`RETRY_NS`] across all workers. The old MAC is used meanwhile;
//!   one not confirmed for [`EXPIRE_NS`] is forgotten.
//!
//! The MAC lives in one `AtomicU64` per network (bit 63: known; bits
//! 0..48: the MAC), with the time it was learned beside it, shared by
//! every worker: the uplink reads it without a lock, and an ARP reply
//! seen by any worker serves them all. One entry per network: nothing a
//! stranger sends can grow it.

use crate::buffer::{ChecksumState, PacketId, PacketMeta, Pool};
use crate::nexthop::LinkHeader;
use crate::overlay::neigh::{self, NeighMessage};
use crate::vector::PacketVector;
use core::net::{IpAddr, Ipv4Addr};
use core::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A request at most this often per network, while packets wait.
pub const RETRY_NS: u64 = 1_000_000_000;
/// A MAC this old is asked for again (the old one still used).
pub const REFRESH_NS: u64 = 30_000_000_000;
/// A MAC not confirmed for this long is forgotten: the router's
/// refreshes went unanswered for 15 s.
pub const EXPIRE_NS: u64 = 45_000_000_000;
/// How often a worker looks at the entries when no packet waits.
const CHECK_NS: u64 = 100_000_000;
/// Data networks at most (the worker's wanted set is a 64-bit mask).
const MAX: usize = 64;
const KNOWN: u64 = 1 << 63;
const ETHERTYPE_ARP: [u8; 2] = [0x08, 0x06];
/// An Ethernet frame's least length (without the FCS).
const MIN_FRAME: usize = 60;

/// A tagged data network's router, as the config gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DnRouterConfig {
    /// The network's VLAN on the inner interface.
    pub vlan: u16,
    /// tep's address on it.
    pub address: Ipv4Addr,
    /// The router's address.
    pub gateway: Ipv4Addr,
}

#[derive(Debug)]
struct Router {
    config: DnRouterConfig,
    mac: AtomicU64,
    learned_ns: AtomicU64,
    /// When the last request left (any worker); 0: never.
    asked_ns: AtomicU64,
}

/// What the ARP of the data networks did, all networks together.
#[derive(Debug, Default)]
pub struct ArpCounters {
    /// Requests for tep's address answered.
    pub replies_sent: AtomicU64,
    /// Requests for a router's MAC sent.
    pub requests_sent: AtomicU64,
    /// A router's MAC set (or confirmed) by its ARP.
    pub learned: AtomicU64,
    /// ARP frames of a routed network that were neither: dropped.
    pub ignored: AtomicU64,
}

/// The routers of a UPF's data networks, shared by every worker.
#[derive(Debug)]
pub struct DnRouters {
    inner_mac: [u8; 6],
    /// By data network; None where a network has no router.
    routers: Box<[Option<Router>]>,
    /// What ARP did.
    pub counters: ArpCounters,
}

fn pack(mac: [u8; 6]) -> u64 {
    let mut b = [0u8; 8];
    b[2..].copy_from_slice(&mac);
    u64::from_be_bytes(b) | KNOWN
}

fn unpack(word: u64) -> [u8; 6] {
    let b = word.to_be_bytes();
    [b[2], b[3], b[4], b[5], b[6], b[7]]
}

fn count(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

impl DnRouters {
    /// The routers of `networks` (by data network index), reached from
    /// the inner interface's MAC `inner_mac`; None where no network has
    /// one.
    pub fn new(inner_mac: [u8; 6], networks: &[Option<DnRouterConfig>]) -> Option<DnRouters> {
        if networks.iter().take(MAX).all(Option::is_none) {
            return None;
        }
        let routers = networks
            .iter()
            .take(MAX)
            .map(|c| {
                c.map(|config| Router {
                    config,
                    mac: AtomicU64::new(0),
                    learned_ns: AtomicU64::new(0),
                    asked_ns: AtomicU64::new(0),
                })
            })
            .collect();
        Some(DnRouters {
            inner_mac,
            routers,
            counters: ArpCounters::default(),
        })
    }

    fn router(&self, network: u8) -> Option<&Router> {
        self.routers.get(usize::from(network))?.as_ref()
    }

    /// Network `network`'s router's MAC where it is known and not
    /// expired at `now_ns`.
    pub fn gateway_mac(&self, network: u8, now_ns: u64) -> Option<[u8; 6]> {
        let r = self.router(network)?;
        let word = r.mac.load(Ordering::Acquire);
        let fresh = now_ns.saturating_sub(r.learned_ns.load(Ordering::Relaxed)) < EXPIRE_NS;
        (word & KNOWN != 0 && fresh).then(|| unpack(word))
    }

    /// How many routers' MACs are known at `now_ns`.
    pub fn known(&self, now_ns: u64) -> usize {
        (0..self.routers.len())
            .filter(|&n| self.gateway_mac(n as u8, now_ns).is_some())
            .count()
    }

    fn learn(&self, r: &Router, mac: [u8; 6], now_ns: u64) {
        r.learned_ns.store(now_ns, Ordering::Relaxed);
        r.mac.store(pack(mac), Ordering::Release);
        count(&self.counters.learned);
    }

    /// Whether a request for network `network`'s router leaves now: its
    /// MAC is unknown and packets wait (`wanted`), or it is due for a
    /// refresh; and no worker sent one in the last [`RETRY_NS`] (the
    /// first to ask claims the slot).
    fn due(&self, network: u8, now_ns: u64, wanted: bool) -> bool {
        let Some(r) = self.router(network) else {
            return false;
        };
        let age = now_ns.saturating_sub(r.learned_ns.load(Ordering::Relaxed));
        let known = r.mac.load(Ordering::Acquire) & KNOWN != 0;
        let want = match (known, age) {
            (true, a) if a < REFRESH_NS => false,
            (true, a) if a < EXPIRE_NS => true,
            _ => wanted,
        };
        let asked = r.asked_ns.load(Ordering::Relaxed);
        if !want || (asked != 0 && now_ns.saturating_sub(asked) < RETRY_NS) {
            return false;
        }
        let now = now_ns.max(1);
        r.asked_ns
            .compare_exchange(asked, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }
}

/// Where an uplink packet of a data network goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DnHop {
    /// Its network has no router of its own: the kernel's routes.
    NotRouted,
    /// To its router.
    Via(LinkHeader),
    /// Its router's MAC is not known yet.
    Unknown,
}

/// A worker's side: the shared routers, and the networks whose packets
/// waited for a MAC that no request has asked for since.
#[derive(Debug)]
pub(crate) struct DnWorker {
    shared: Arc<DnRouters>,
    wanted: u64,
    /// Per network, when its wish in `wanted` was made.
    wished_ns: [u64; MAX],
    next_check_ns: u64,
}

impl DnWorker {
    /// Every router is asked for at the first round: the first packets
    /// need not wait.
    pub(crate) fn new(shared: Arc<DnRouters>) -> DnWorker {
        let wanted = (0..shared.routers.len())
            .filter(|&n| shared.routers[n].is_some())
            .fold(0u64, |w, n| w | 1 << n);
        DnWorker {
            shared,
            wanted,
            wished_ns: [0; MAX],
            next_check_ns: 0,
        }
    }

    /// The next hop of an uplink packet of data network `network`.
    #[inline]
    pub(crate) fn hop(&mut self, network: u8, now_ns: u64) -> DnHop {
        let s = &*self.shared;
        if s.router(network).is_none() {
            return DnHop::NotRouted;
        }
        match s.gateway_mac(network, now_ns) {
            Some(dst) => DnHop::Via(LinkHeader {
                dst,
                src: s.inner_mac,
                // `vlan-output` tags it with its network's VLAN.
                vlan: None,
            }),
            None => {
                let bit = 1 << network;
                if self.wanted & bit == 0 {
                    self.wanted |= bit;
                    self.wished_ns[usize::from(network)] = now_ns;
                }
                DnHop::Unknown
            }
        }
    }

    /// Node `dn-arp`: the ARP frames of routed networks in `v` (their tag
    /// popped, `meta.network` marked) are taken out: requests for tep's
    /// address answered into `answers`, the router's learned, the rest
    /// dropped; every other frame stays.
    pub(crate) fn arp_input(
        &mut self,
        pool: &mut Pool,
        v: &mut PacketVector,
        answers: &mut PacketVector,
        now_ns: u64,
    ) {
        let mut keep = PacketVector::new();
        for &id in v.as_slice() {
            let network = pool.meta(id).network;
            let arp = pool.data(id).get(12..14) == Some(&ETHERTYPE_ARP[..]);
            // `NO_DATA_NETWORK` is past the routers: no router's.
            let Some(r) = self.shared.router(network).filter(|_| arp) else {
                keep.put(pool, id);
                continue;
            };
            if !pool.linearize(id) {
                count(&self.shared.counters.ignored);
                pool.free(id);
            } else if self.arp_one(pool, id, r, now_ns) {
                // At most as many as `v` held.
                answers.put(pool, id);
            } else {
                pool.free(id);
            }
        }
        *v = keep;
    }

    /// One ARP frame of `r`'s network: true where it became the answer.
    fn arp_one(&self, pool: &mut Pool, id: PacketId, r: &Router, now_ns: u64) -> bool {
        let s = &*self.shared;
        let data = pool.data(id);
        let gateway = IpAddr::V4(r.config.gateway);
        let from_router = neigh::sender(data).filter(|&(ip, _)| ip == gateway);
        if let Some((_, mac)) = from_router {
            s.learn(r, mac, now_ns);
        }
        let asks_me = neigh::classify(data)
            == NeighMessage::Request {
                target: IpAddr::V4(r.config.address),
            };
        let mut out = [0u8; MIN_FRAME + 4];
        let answer = asks_me
            .then(|| neigh::answer(data, s.inner_mac, &mut out[4..]))
            .flatten();
        let Some(len) = answer else {
            if from_router.is_none() {
                count(&s.counters.ignored);
            }
            return false;
        };
        // The request came with its tag popped: the answer gets it back.
        out.copy_within(4..16, 0);
        out[12..16].copy_from_slice(&tag(r.config.vlan));
        if !pool.fill(id, &out[..(len + 4).max(MIN_FRAME)]) {
            return false;
        }
        framed(pool, id);
        count(&s.counters.replies_sent);
        true
    }

    /// Once per worker round: the requests due (see the module's doc)
    /// into `out`, as many as buffers allow.
    pub(crate) fn resolve(&mut self, pool: &mut Pool, now_ns: u64, out: &mut PacketVector) {
        if self.wanted == 0 && now_ns < self.next_check_ns {
            return;
        }
        self.next_check_ns = now_ns.saturating_add(CHECK_NS);
        let s = &*self.shared;
        for (n, r) in s.routers.iter().enumerate() {
            let Some(r) = r else { continue };
            // A wish stands until the MAC is known or a request leaves
            // after it (any worker's): a packet that waits later wishes
            // again.
            let asked = r.asked_ns.load(Ordering::Relaxed);
            let answered = asked != 0 && asked >= self.wished_ns[n];
            if answered || s.gateway_mac(n as u8, now_ns).is_some() {
                self.wanted &= !(1 << n);
            }
            if out.is_full() || !s.due(n as u8, now_ns, self.wanted & 1 << n != 0) {
                continue;
            }
            // Claimed: the next comes after RETRY_NS even if no buffer
            // was free for this one.
            self.wanted &= !(1 << n);
            let c = r.config;
            let mut frame = [0u8; MIN_FRAME];
            let Some(id) = pool.alloc() else { break };
            let written =
                neigh::arp_request(s.inner_mac, c.address, c.gateway, Some(c.vlan), &mut frame);
            if written.is_none() || !pool.fill(id, &frame) {
                pool.free(id);
                continue;
            }
            framed(pool, id);
            count(&s.counters.requests_sent);
            out.put(pool, id);
        }
    }
}

/// An 802.1Q tag of VID `vid`.
fn tag(vid: u16) -> [u8; 4] {
    let [a, b] = (vid & 0x0fff).to_be_bytes();
    [0x81, 0x00, a, b]
}

/// Marks frame `id` whole, made by tep: nothing of it to finish.
fn framed(pool: &mut Pool, id: PacketId) {
    let network = pool.meta(id).network;
    *pool.meta_mut(id) = PacketMeta {
        network,
        csum: ChecksumState::None,
        inner_l3: 18,
        ..PacketMeta::FRESH
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::overlay::vlan::NO_DATA_NETWORK;
    use crate::testpkt;

    const INNER: [u8; 6] = [2, 0, 0, 0, 0, 0x10];
    const ROUTER: [u8; 6] = [2, 0, 0, 0, 0, 0xfe];
    const STRANGER: [u8; 6] = [2, 0, 0, 0, 0, 0x66];
    const S: u64 = 1_000_000_000;

    fn ip(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }

    /// Network 0 on VLAN 10 (10.60.0.1, router .254), network 1
    /// without a router, network 2 on VLAN 30 (10.70.0.1, router .254).
    fn routers() -> Arc<DnRouters> {
        let r = |vlan, net: &str| DnRouterConfig {
            vlan,
            address: ip(&format!("{net}.1")),
            gateway: ip(&format!("{net}.254")),
        };
        let nets = [Some(r(10, "10.60.0")), None, Some(r(30, "10.70.0"))];
        Arc::new(DnRouters::new(INNER, &nets).unwrap())
    }

    /// An untagged ARP request (as `vlan-input` leaves it) from `mac`
    /// and `from` for `target`.
    fn request(mac: [u8; 6], from: &str, target: &str) -> Vec<u8> {
        let mut out = [0u8; 64];
        let n = neigh::arp_request(mac, ip(from), ip(target), None, &mut out).unwrap();
        out[..n].to_vec()
    }

    /// `mac`'s reply, as `from`, to `request`.
    fn reply(request: &[u8], mac: [u8; 6]) -> Vec<u8> {
        let mut out = [0u8; 64];
        let n = neigh::answer(request, mac, &mut out).unwrap();
        out[..n].to_vec()
    }

    /// `frames` (of data network `network`) through `dn-arp`: the frames
    /// kept, and the answers.
    fn arp(
        w: &mut DnWorker,
        frames: &[Vec<u8>],
        network: u8,
        now_ns: u64,
    ) -> (usize, Vec<Vec<u8>>) {
        let mut pool = Pool::new(8, 2048);
        let meta = PacketMeta {
            network,
            ..PacketMeta::FRESH
        };
        let mut v = PacketVector::new();
        for f in frames {
            let id = testpkt::load(&mut pool, f, meta);
            v.put(&mut pool, id);
        }
        let mut answers = PacketVector::new();
        w.arp_input(&mut pool, &mut v, &mut answers, now_ns);
        let kept = v.len();
        let out = testpkt::out_bytes(&pool, &answers);
        for &id in v.as_slice().iter().chain(answers.as_slice()) {
            pool.free(id);
        }
        assert_eq!(pool.available(), 8, "no buffer leaked");
        (kept, out)
    }

    fn resolve(w: &mut DnWorker, now_ns: u64) -> Vec<Vec<u8>> {
        let mut pool = Pool::new(8, 2048);
        let mut out = PacketVector::new();
        w.resolve(&mut pool, now_ns, &mut out);
        let frames = testpkt::out_bytes(&pool, &out);
        out.as_slice().iter().for_each(|&id| pool.free(id));
        frames
    }

    fn counters(r: &DnRouters) -> [u64; 4] {
        let c = &r.counters;
        [&c.replies_sent, &c.requests_sent, &c.learned, &c.ignored]
            .map(|a| a.load(Ordering::Relaxed))
    }

    #[test]
    fn a_request_for_teps_address_is_answered_tagged_with_the_inner_mac() {
        let shared = routers();
        let mut w = DnWorker::new(shared.clone());
        let asked = request(STRANGER, "10.60.0.9", "10.60.0.1");
        let (kept, out) = arp(&mut w, std::slice::from_ref(&asked), 0, S);
        assert_eq!((kept, out.len()), (0, 1));
        let a = &out[0];
        assert_eq!(a.len(), MIN_FRAME, "padded");
        assert_eq!(&a[..6], &STRANGER, "to the requester");
        assert_eq!(&a[6..12], &INNER);
        assert_eq!(&a[12..16], &[0x81, 0, 0, 10], "in its VLAN");
        // Behind the tag, what the overlay's writer answers untagged.
        let untagged = reply(&asked, INNER);
        assert_eq!(&a[16..16 + untagged.len() - 12], &untagged[12..]);
        assert_eq!(counters(&shared), [1, 0, 0, 0]);
        // Network 2's address is not network 0's.
        let (kept, out) = arp(&mut w, &[request(STRANGER, "10.60.0.9", "10.70.0.1")], 0, S);
        assert_eq!((kept, out.len()), (0, 0));
        assert_eq!(counters(&shared), [1, 0, 0, 1]);
    }

    #[test]
    fn only_the_routers_address_sets_its_mac() {
        let shared = routers();
        let mut w = DnWorker::new(shared.clone());
        assert_eq!(w.hop(0, S), DnHop::Unknown);
        let ours = request(INNER, "10.60.0.1", "10.60.0.254");
        // Strangers' replies and requests for their own addresses, or
        // asking for the router's: nothing changes. (One that claims the
        // router's address is the router, to ARP.)
        let forged = [
            reply(&request(INNER, "10.60.0.1", "10.60.0.3"), STRANGER),
            request(STRANGER, "10.60.0.7", "10.60.0.254"),
            reply(&request(INNER, "10.60.0.1", "10.60.0.2"), ROUTER),
        ];
        assert_eq!(arp(&mut w, &forged, 0, S), (0, vec![]));
        assert_eq!(counters(&shared), [0, 0, 0, 3]);
        assert_eq!(w.hop(0, S), DnHop::Unknown);
        // The router's reply on network 2's VLAN is network 2's only.
        let theirs = reply(&request(INNER, "10.70.0.1", "10.70.0.254"), ROUTER);
        arp(&mut w, &[theirs], 2, S);
        assert_eq!(w.hop(0, S), DnHop::Unknown);
        arp(&mut w, &[reply(&ours, ROUTER)], 0, S);
        let via = LinkHeader {
            dst: ROUTER,
            src: INNER,
            vlan: None,
        };
        assert_eq!(w.hop(0, 2 * S), DnHop::Via(via));
        assert_eq!(w.hop(1, 2 * S), DnHop::NotRouted);
        assert_eq!(w.hop(NO_DATA_NETWORK, 2 * S), DnHop::NotRouted);
        assert_eq!(counters(&shared), [0, 0, 2, 3]);
        // The router's own request (for tep) sets it too, and is answered.
        let moved = [2, 0, 0, 0, 0, 0xfd];
        let (_, out) = arp(
            &mut w,
            &[request(moved, "10.60.0.254", "10.60.0.1")],
            0,
            3 * S,
        );
        assert_eq!(out.len(), 1);
        assert_eq!(shared.gateway_mac(0, 3 * S), Some(moved));
        // Unconfirmed for EXPIRE_NS: forgotten.
        assert_eq!(shared.gateway_mac(0, 3 * S + EXPIRE_NS), None);
        assert_eq!(w.hop(0, 3 * S + EXPIRE_NS), DnHop::Unknown);
    }

    #[test]
    fn other_frames_pass() {
        let mut w = DnWorker::new(routers());
        let ip4 = testpkt::Eth::new().wrap(&testpkt::udp(
            &testpkt::Ip::v4(),
            1,
            2,
            b"x",
            testpkt::Csum::Full,
        ));
        let asked = request(STRANGER, "10.60.0.9", "10.60.0.1");
        assert_eq!(arp(&mut w, std::slice::from_ref(&ip4), 0, S), (1, vec![]));
        // ARP of a network without a router (or of none) is not dn-arp's.
        assert_eq!(arp(&mut w, std::slice::from_ref(&asked), 1, S), (1, vec![]));
        assert_eq!(arp(&mut w, &[asked], NO_DATA_NETWORK, S), (1, vec![]));
    }

    /// Strangers' bytes behind an ARP EtherType: never a panic or a
    /// leak, and only the router's address (never sent here) could
    /// change the entry.
    #[test]
    fn random_arp_frames_change_nothing() {
        let shared = routers();
        let mut w = DnWorker::new(shared.clone());
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let asked = request(STRANGER, "10.60.0.9", "10.60.0.1");
        for len in 0..200 {
            let mut f: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            // Half of them a valid request with some bytes flipped.
            if len % 2 == 0 && len >= asked.len() {
                f[..asked.len()].copy_from_slice(&asked);
                let at = 14 + len % 28;
                f[at] ^= x as u8 | 1;
            }
            if f.len() >= 14 {
                f[12..14].copy_from_slice(&ETHERTYPE_ARP);
            }
            arp(&mut w, &[f], 0, S);
        }
        assert_eq!(shared.gateway_mac(0, S), None);
    }

    #[test]
    fn requests_once_per_interval_across_workers() {
        let shared = routers();
        let (mut a, mut b) = (DnWorker::new(shared.clone()), DnWorker::new(shared.clone()));
        // The first round asks for every router, once among the workers.
        let first = resolve(&mut a, S);
        assert_eq!(first.len(), 2);
        assert!(resolve(&mut b, S).is_empty());
        let want = {
            let mut f = [0u8; MIN_FRAME];
            neigh::arp_request(INNER, ip("10.60.0.1"), ip("10.60.0.254"), Some(10), &mut f)
                .unwrap();
            f.to_vec()
        };
        assert_eq!(first[0], want);
        assert_eq!(&first[1][12..16], &[0x81, 0, 0, 30]);
        // Packets wait: again after RETRY_NS, not before.
        assert_eq!(b.hop(0, S + 1), DnHop::Unknown);
        assert!(resolve(&mut b, S + RETRY_NS / 2).is_empty());
        assert_eq!(b.hop(0, S + RETRY_NS / 2), DnHop::Unknown);
        // Another worker's packet waits too: b's request covers it.
        assert_eq!(a.hop(0, S + RETRY_NS - 1), DnHop::Unknown);
        assert_eq!(resolve(&mut b, S + RETRY_NS).len(), 1);
        assert!(resolve(&mut b, S + 2 * RETRY_NS).is_empty(), "asked");
        // Nothing waits: nothing asked.
        assert!(resolve(&mut a, S + 3 * RETRY_NS).is_empty());
        assert_eq!(counters(&shared)[1], 3);
    }

    #[test]
    fn a_known_mac_is_refreshed_while_used() {
        let shared = routers();
        let mut w = DnWorker::new(shared.clone());
        resolve(&mut w, S);
        let ours = request(INNER, "10.60.0.1", "10.60.0.254");
        arp(&mut w, &[reply(&ours, ROUTER)], 0, S);
        assert!(resolve(&mut w, 2 * S + CHECK_NS).is_empty(), "fresh");
        let old = S + REFRESH_NS;
        let asked = resolve(&mut w, old);
        assert_eq!(asked.len(), 1, "a refresh");
        assert!(
            matches!(w.hop(0, old), DnHop::Via(_)),
            "the old MAC meanwhile"
        );
        assert!(resolve(&mut w, old + CHECK_NS).is_empty(), "once a second");
        assert_eq!(resolve(&mut w, old + RETRY_NS).len(), 1);
        arp(&mut w, &[reply(&ours, ROUTER)], 0, old + RETRY_NS);
        assert!(resolve(&mut w, old + 3 * RETRY_NS).is_empty(), "confirmed");
        // Unanswered: the refreshes stop once it expired, unless packets
        // wait for it.
        let gone = old + RETRY_NS + EXPIRE_NS;
        assert!(resolve(&mut w, gone).is_empty());
        assert_eq!(w.hop(0, gone), DnHop::Unknown);
        assert_eq!(resolve(&mut w, gone).len(), 1);
    }

    /// `ip-rewrite` sends a session's uplink of a routed network to its
    /// router, never to the kernel; other packets as before.
    #[test]
    fn the_uplink_of_a_routed_network_goes_to_its_router() {
        use crate::icmp_error::{IcmpErrors, RouterOptions};
        use crate::kind::TunnelKind;
        use crate::node::NodeStats;
        let (mut tunnels, _) =
            crate::example::tunnel_pair(TunnelKind::Gtpu, false, crate::config::ChecksumMode::Full);
        tunnels.truncate(1);
        tunnels.push(tunnels[0].clone());
        tunnels[0].sessions = true;
        let table = crate::tunnel::TunnelTable::new(&tunnels);
        let shared = routers();
        let mut w = DnWorker::new(shared.clone());
        let packet = testpkt::udp(&testpkt::Ip::v4(), 1, 2, b"up", testpkt::Csum::Full);
        // (tunnel, network): routed, unrouted network, not a session's.
        let run = |w: &mut DnWorker, tunnel: u32, network: u8, now_ns: u64| {
            let mut pool = Pool::new(4, 2048);
            let meta = PacketMeta {
                tunnel,
                network,
                ..PacketMeta::FRESH
            };
            let mut v = testpkt::vector_of(&mut pool, &packet, meta);
            let (mut unresolved, mut back) = (PacketVector::new(), PacketVector::new());
            let mut icmp = IcmpErrors::new(RouterOptions::default());
            let mut hops = crate::nexthop::NextHops::default();
            let mut stats = NodeStats::new("ip-rewrite");
            let errors = (&mut icmp, &mut back, now_ns);
            crate::decap::ip_rewrite(
                &mut stats,
                &mut pool,
                &mut v,
                &table,
                &mut hops,
                &mut unresolved,
                errors,
                Some(w),
            );
            let out = (
                testpkt::out_bytes(&pool, &v),
                unresolved.len(),
                stats.drops_by_reason().next().map(|d| d.0),
            );
            for &id in v.as_slice().iter().chain(unresolved.as_slice()) {
                pool.free(id);
            }
            out
        };
        assert_eq!(
            run(&mut w, 0, 0, S),
            (vec![], 0, Some(crate::DropReason::NoRoute))
        );
        assert_eq!(w.wanted, 0b101, "asked for at once; network 0 again");
        assert_eq!(run(&mut w, 0, 1, S), (vec![], 1, None), "the kernel's");
        assert_eq!(run(&mut w, 1, 0, S), (vec![], 1, None), "no session's");
        let ours = request(INNER, "10.60.0.1", "10.60.0.254");
        arp(&mut w, &[reply(&ours, ROUTER)], 0, S);
        let (out, unresolved, drop) = run(&mut w, 0, 0, S);
        assert_eq!((out.len(), unresolved, drop), (1, 0, None));
        let f = &out[0];
        assert_eq!(
            (&f[..6], &f[6..12], &f[12..14]),
            (&ROUTER[..], &INNER[..], &[8, 0][..])
        );
        assert_eq!(f[14 + 8], packet[8] - 1, "TTL decremented, as routed");
    }
}
