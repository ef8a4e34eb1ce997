//! The control plane's side of the session tables: slots and peer ids
//! allocated, keys owned, changes published to every worker, usage summed
//! over the workers. The PFCP node drives it; the workers only apply.

use super::rate::Meters;
use super::{
    Action, Change, ChangeQueue, Peer, Session, SlotUsage, UeKey, UeSource, UplinkKey, Usage,
    WorkerLink,
};
use core::net::IpAddr;
use core::sync::atomic::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

/// A session as the control plane states it: its rules, and the keys that
/// find it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionSpec {
    /// The N3 tunnel (index of the tunnel table) of its F-TEID.
    pub n3: u32,
    /// Uplink action.
    pub uplink: Action,
    /// Downlink action.
    pub downlink: Action,
    /// Downlink outer header creation: the peer's address and TEID (None
    /// until the SMF gives them, as before the gNB answered).
    pub peer: Option<(IpAddr, u32)>,
    /// Downlink QFI (PDU Session Container), from the QER.
    pub qfi: Option<u8>,
    /// The uplink PDRs' keys.
    pub uplink_keys: Vec<UplinkKey>,
    /// The downlink PDRs' keys.
    pub downlink_keys: Vec<UeKey>,
    /// The inner sources its uplink packets may carry.
    pub ue: UeSource,
    /// Maximum bit rate each way (bit/s; None: none), from its QERs:
    /// a bucket per direction ([`super::rate`]).
    pub mbr: Mbr,
}

/// A session's maximum bit rates, bit/s.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mbr {
    /// Uplink.
    pub uplink: Option<u64>,
    /// Downlink.
    pub downlink: Option<u64>,
}

/// Packets and bytes each way, summed over the workers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Volume {
    /// Uplink packets.
    pub ul_packets: u64,
    /// Uplink bytes.
    pub ul_bytes: u64,
    /// Downlink packets.
    pub dl_packets: u64,
    /// Downlink bytes.
    pub dl_bytes: u64,
}

/// Why a session could not be set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SessionError {
    /// Every slot is in use (`max_sessions`).
    Full,
    /// A key is another session's already.
    KeyInUse(String),
    /// No such slot.
    NoSession,
    /// The peer's address family is not the N3 tunnel's.
    PeerFamily,
}

impl core::fmt::Display for SessionError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SessionError::Full => f.write_str("the session table is full"),
            SessionError::KeyInUse(k) => write!(f, "{k} belongs to another session"),
            SessionError::NoSession => f.write_str("no such session"),
            SessionError::PeerFamily => {
                f.write_str("the peer's address family differs from the N3 address's")
            }
        }
    }
}

/// What the control plane keeps per slot.
#[derive(Clone, Debug)]
struct Record {
    spec: SessionSpec,
    peer: Option<u32>,
}

/// The control plane's handle on every worker's session table.
#[derive(Debug)]
pub struct Sessions {
    max: u32,
    links: Vec<WorkerLink>,
    records: Vec<Option<Record>>,
    free: Vec<u32>,
    // Slots removed, with the change count after their removal: reusable
    // once every worker applied that many changes.
    quarantine: Vec<(u32, u64)>,
    published: u64,
    outbox: Vec<Change>,
    uplink_owner: HashMap<UplinkKey, u32>,
    downlink_owner: HashMap<UeKey, u32>,
    peers: HashMap<Peer, (u32, u32)>,
    peer_by_id: Vec<Option<Peer>>,
    free_peers: Vec<u32>,
    next_peer: u32,
    n3_families: Vec<bool>,
    gnb_source: bool,
    // Sessions bounded by their BAR (packets held), by slot: what a
    // replay publishes again.
    buffer_bounds: HashMap<u32, u32>,
}

impl Sessions {
    /// Tables for `workers` workers with room for `max_sessions`; the
    /// links go one to each worker's pipeline. `n3_v6[t]`: whether tunnel
    /// `t`'s local address is IPv6 (to refuse a peer of the other family).
    pub fn new(max_sessions: u32, workers: usize, n3_v6: Vec<bool>) -> (Sessions, Vec<WorkerLink>) {
        let meters = Arc::new(Meters::new(max_sessions));
        let links: Vec<WorkerLink> = (0..workers.max(1))
            .map(|_| WorkerLink {
                queue: Arc::new(ChangeQueue::default()),
                usage: Arc::new(Usage::new(max_sessions)),
                meters: meters.clone(),
            })
            .collect();
        (
            Sessions {
                max: max_sessions,
                links: links.clone(),
                records: Vec::new(),
                free: Vec::new(),
                quarantine: Vec::new(),
                published: 0,
                outbox: Vec::new(),
                uplink_owner: HashMap::new(),
                downlink_owner: HashMap::new(),
                peers: HashMap::new(),
                peer_by_id: Vec::new(),
                free_peers: Vec::new(),
                next_peer: 0,
                n3_families: n3_v6,
                gnb_source: false,
                buffer_bounds: HashMap::new(),
            },
            links,
        )
    }

    /// Takes uplink packets of the sessions set from now on only from
    /// their gNB, the peer of their downlink FAR (`[pfcp]
    /// n3_source_check`; the uplink module's `gnb_source` says which gNB
    /// that is when there is none or it changes).
    pub fn check_gnb_source(&mut self, on: bool) {
        self.gnb_source = on;
    }

    /// Sessions set.
    pub fn len(&self) -> usize {
        self.records.iter().filter(|r| r.is_some()).count()
    }

    /// Whether none is set.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Sets a new session; its slot.
    pub fn create(&mut self, spec: &SessionSpec) -> Result<u32, SessionError> {
        self.check_keys(spec, None)?;
        self.check_peer(spec)?;
        let slot = self.take_slot()?;
        for l in &self.links {
            l.usage.reserve(slot);
            if let Some(u) = l.usage.slot(slot) {
                u.reset();
            }
        }
        let idx = slot as usize;
        if self.records.len() <= idx {
            self.records.resize(idx + 1, None);
        }
        self.set_meters(slot, spec.mbr, None);
        let peer = spec.peer.map(|(addr, _)| self.peer_ref(spec.n3, addr));
        for &key in &spec.uplink_keys {
            self.uplink_owner.insert(key, slot);
            self.outbox.push(Change::Uplink {
                key,
                slot: Some(slot),
            });
        }
        for &key in &spec.downlink_keys {
            self.downlink_owner.insert(key, slot);
            self.outbox.push(Change::Downlink {
                key,
                slot: Some(slot),
            });
        }
        self.outbox.push(Change::Session {
            slot,
            session: session_of(spec, peer, self.gnb_source),
        });
        self.records[idx] = Some(Record {
            spec: spec.clone(),
            peer,
        });
        Ok(slot)
    }

    /// Replaces slot `slot`'s session. `end_marker`: when the downlink peer
    /// or TEID changes, send an End Marker to the old one (SNDEM).
    pub fn modify(
        &mut self,
        slot: u32,
        spec: &SessionSpec,
        end_marker: bool,
    ) -> Result<(), SessionError> {
        let old = self
            .records
            .get(slot as usize)
            .cloned()
            .flatten()
            .ok_or(SessionError::NoSession)?;
        self.check_keys(spec, Some(slot))?;
        self.check_peer(spec)?;
        self.set_meters(slot, spec.mbr, Some(old.spec.mbr));
        for key in &old.spec.uplink_keys {
            if !spec.uplink_keys.contains(key) {
                self.uplink_owner.remove(key);
                self.outbox.push(Change::Uplink {
                    key: *key,
                    slot: None,
                });
            }
        }
        for key in &old.spec.downlink_keys {
            if !spec.downlink_keys.contains(key) {
                self.downlink_owner.remove(key);
                self.outbox.push(Change::Downlink {
                    key: *key,
                    slot: None,
                });
            }
        }
        for &key in &spec.uplink_keys {
            if self.uplink_owner.insert(key, slot).is_none() {
                self.outbox.push(Change::Uplink {
                    key,
                    slot: Some(slot),
                });
            }
        }
        for &key in &spec.downlink_keys {
            if self.downlink_owner.insert(key, slot).is_none() {
                self.outbox.push(Change::Downlink {
                    key,
                    slot: Some(slot),
                });
            }
        }
        let peer = if spec.peer.map(|p| p.0) == old.spec.peer.map(|p| p.0) && spec.n3 == old.spec.n3
        {
            old.peer
        } else {
            let new = spec.peer.map(|(addr, _)| self.peer_ref(spec.n3, addr));
            if let Some(p) = old.peer {
                self.peer_unref(p);
            }
            new
        };
        if end_marker && spec.peer != old.spec.peer {
            if let Some((addr, teid)) = old.spec.peer {
                self.outbox.push(Change::EndMarker {
                    n3: old.spec.n3,
                    peer: addr,
                    teid,
                });
            }
        }
        self.outbox.push(Change::Session {
            slot,
            session: session_of(spec, peer, self.gnb_source),
        });
        self.records[slot as usize] = Some(Record {
            spec: spec.clone(),
            peer,
        });
        Ok(())
    }

    /// Removes slot `slot`'s session; returns its usage up to now (what the
    /// workers counted before they apply the removal is all there is: the
    /// caller reads it after the packets in flight, as a deletion's final
    /// usage report does).
    pub fn remove(&mut self, slot: u32) -> Result<Volume, SessionError> {
        let old = self
            .records
            .get_mut(slot as usize)
            .and_then(Option::take)
            .ok_or(SessionError::NoSession)?;
        let usage = self.usage(slot);
        for key in &old.spec.uplink_keys {
            self.uplink_owner.remove(key);
            self.outbox.push(Change::Uplink {
                key: *key,
                slot: None,
            });
        }
        for key in &old.spec.downlink_keys {
            self.downlink_owner.remove(key);
            self.outbox.push(Change::Downlink {
                key: *key,
                slot: None,
            });
        }
        if let Some(p) = old.peer {
            self.peer_unref(p);
        }
        // The workers forget the bound with the session.
        self.buffer_bounds.remove(&slot);
        self.outbox.push(Change::Remove { slot });
        let after = self.published + self.outbox.len() as u64;
        self.quarantine.push((slot, after));
        Ok(usage)
    }

    /// Asks the workers for an End Marker from N3 tunnel `n3` to `peer`
    /// with its `teid` (a handover the SMF flagged SNDEM), after the
    /// changes made before it.
    pub fn end_marker(&mut self, n3: u32, peer: IpAddr, teid: u32) {
        self.outbox.push(Change::EndMarker { n3, peer, teid });
    }

    /// Bounds the downlink packets slot `slot` holds to `packets` (its
    /// BAR's Suggested Buffering Packets Count; None: the workers' own
    /// bound, `[pfcp] buffer_packets`, which also caps `packets`).
    /// Published only when it changes.
    pub fn set_buffer_bound(&mut self, slot: u32, packets: Option<u32>) {
        let was = match packets {
            Some(n) => self.buffer_bounds.insert(slot, n),
            None => self.buffer_bounds.remove(&slot),
        };
        if was != packets {
            self.outbox.push(Change::BufferBound { slot, packets });
        }
    }

    /// Has the workers drop what slot `slot` holds (DROBU), before the
    /// changes published with it would send it.
    pub fn drop_buffered(&mut self, slot: u32) {
        self.outbox.push(Change::DropBuffered { slot });
    }

    /// Slot `slot`'s usage so far, summed over the workers.
    pub fn usage(&self, slot: u32) -> Volume {
        let mut v = Volume::default();
        for l in &self.links {
            if let Some(u) = l.usage.slot(slot) {
                let r = |c: &core::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
                let SlotUsage {
                    ul_packets,
                    ul_bytes,
                    dl_packets,
                    dl_bytes,
                    ..
                } = u;
                v.ul_packets += r(ul_packets);
                v.ul_bytes += r(ul_bytes);
                v.dl_packets += r(dl_packets);
                v.dl_bytes += r(dl_bytes);
            }
        }
        v
    }

    /// The spec slot `slot` was last set with.
    pub fn spec(&self, slot: u32) -> Option<&SessionSpec> {
        self.records.get(slot as usize)?.as_ref().map(|r| &r.spec)
    }

    /// Sends the changes made since the last call to every worker.
    pub fn publish(&mut self) {
        if self.outbox.is_empty() {
            return;
        }
        for l in &self.links {
            l.queue.push(&self.outbox);
        }
        self.published += self.outbox.len() as u64;
        self.outbox.clear();
    }

    /// Publishes every session and peer set now, as changes to tables that
    /// hold nothing: what a worker started afresh (a reload restarts them
    /// with new pipelines) needs to catch up. Changes still queued for the
    /// stopped worker come first and are overwritten by these.
    pub fn replay(&mut self) {
        self.publish();
        for (id, peer) in self.peer_by_id.iter().enumerate() {
            if let Some(p) = peer {
                self.outbox.push(Change::Peer {
                    id: id as u32,
                    peer: Some(*p),
                });
            }
        }
        for (&key, &slot) in &self.uplink_owner {
            self.outbox.push(Change::Uplink {
                key,
                slot: Some(slot),
            });
        }
        for (&key, &slot) in &self.downlink_owner {
            self.outbox.push(Change::Downlink {
                key,
                slot: Some(slot),
            });
        }
        for (slot, r) in self.records.iter().enumerate() {
            if let Some(r) = r {
                self.outbox.push(Change::Session {
                    slot: slot as u32,
                    session: session_of(&r.spec, r.peer, self.gnb_source),
                });
            }
        }
        for (&slot, &n) in &self.buffer_bounds {
            self.outbox.push(Change::BufferBound {
                slot,
                packets: Some(n),
            });
        }
        self.publish();
    }

    /// Changes published so far.
    pub fn published(&self) -> u64 {
        self.published
    }

    /// Whether every worker applied every change published.
    pub fn settled(&self) -> bool {
        self.links
            .iter()
            .all(|l| l.queue.applied() >= self.published)
    }

    /// Sets slot `slot`'s buckets to `mbr` before a change turns them on:
    /// full when new, left as they are where the rate stays (a
    /// modification that keeps the MBR must not hand out a burst).
    fn set_meters(&self, slot: u32, mbr: Mbr, old: Option<Mbr>) {
        if mbr.uplink.is_none() && mbr.downlink.is_none() {
            return;
        }
        let Some(m) = self.links.first().and_then(|l| l.meters.reserve(slot)) else {
            return;
        };
        let old = old.unwrap_or_default();
        for (rate, was, bucket) in [
            (mbr.uplink, old.uplink, &m.uplink),
            (mbr.downlink, old.downlink, &m.downlink),
        ] {
            if let Some(bps) = rate.filter(|_| rate != was) {
                bucket.set(bps);
            }
        }
    }

    fn check_keys(&self, spec: &SessionSpec, me: Option<u32>) -> Result<(), SessionError> {
        for k in &spec.uplink_keys {
            if let Some(&o) = self.uplink_owner.get(k) {
                if Some(o) != me {
                    return Err(SessionError::KeyInUse(format!("TEID {:#x}", k.teid)));
                }
            }
        }
        for k in &spec.downlink_keys {
            if let Some(&o) = self.downlink_owner.get(k) {
                if Some(o) != me {
                    return Err(SessionError::KeyInUse(format!("UE address {k:?}")));
                }
            }
        }
        Ok(())
    }

    fn check_peer(&self, spec: &SessionSpec) -> Result<(), SessionError> {
        match (spec.peer, self.n3_families.get(spec.n3 as usize)) {
            (Some((addr, _)), Some(&v6)) if addr.is_ipv6() != v6 => Err(SessionError::PeerFamily),
            _ => Ok(()),
        }
    }

    fn take_slot(&mut self) -> Result<u32, SessionError> {
        let applied = self
            .links
            .iter()
            .map(|l| l.queue.applied())
            .min()
            .unwrap_or(0);
        let mut i = 0;
        while i < self.quarantine.len() {
            if self.quarantine[i].1 <= applied {
                let (slot, _) = self.quarantine.swap_remove(i);
                self.free.push(slot);
            } else {
                i += 1;
            }
        }
        if let Some(s) = self.free.pop() {
            return Ok(s);
        }
        let next = self.records.len() as u32;
        if next >= self.max {
            return Err(SessionError::Full);
        }
        self.records.push(None);
        Ok(next)
    }

    fn peer_ref(&mut self, n3: u32, addr: IpAddr) -> u32 {
        let key = Peer { n3, addr };
        if let Some((id, refs)) = self.peers.get_mut(&key) {
            *refs += 1;
            return *id;
        }
        let id = self.free_peers.pop().unwrap_or_else(|| {
            self.next_peer += 1;
            self.next_peer - 1
        });
        self.peers.insert(key, (id, 1));
        if self.peer_by_id.len() <= id as usize {
            self.peer_by_id.resize(id as usize + 1, None);
        }
        self.peer_by_id[id as usize] = Some(key);
        self.outbox.push(Change::Peer {
            id,
            peer: Some(key),
        });
        id
    }

    fn peer_unref(&mut self, id: u32) {
        let Some(key) = self.peer_by_id.get(id as usize).copied().flatten() else {
            return;
        };
        let entry = self.peers.get_mut(&key).map(|e| {
            e.1 -= 1;
            e.1
        });
        if entry == Some(0) {
            self.peers.remove(&key);
            self.peer_by_id[id as usize] = None;
            // A peer id is reused at once: the changes that stop every
            // session naming it come before the one that sets it again.
            self.free_peers.push(id);
            self.outbox.push(Change::Peer { id, peer: None });
        }
    }
}

fn session_of(spec: &SessionSpec, peer: Option<u32>, gnb_source: bool) -> Session {
    Session {
        n3: spec.n3,
        uplink: spec.uplink,
        // Forwarding needs somewhere to go: without outer header creation
        // yet, downlink packets are dropped (counted).
        downlink: match (spec.downlink, peer) {
            (Action::Forward, None) => Action::Drop,
            (a, _) => a,
        },
        peer: peer.unwrap_or(u32::MAX),
        teid: spec.peer.map_or(0, |p| p.1),
        qfi: spec.qfi,
        ue: spec.ue,
        gnb_source,
        mbr_uplink: spec.mbr.uplink.is_some(),
        mbr_downlink: spec.mbr.downlink.is_some(),
    }
}
