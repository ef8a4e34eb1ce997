//! The response cache: a retransmitted request (same peer, same sequence
//! number, same type, TS 29.244 §6.4) gets the response it got the first
//! time, and is not acted on again. Entries live for a bounded time (the
//! SMF's T1 × N1 and a margin) and their number is capped.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::time::Instant;

#[derive(Debug)]
struct Entry {
    request_type: u8,
    response: Vec<u8>,
}

#[derive(Debug, Default)]
pub struct ResponseCache {
    map: HashMap<(SocketAddr, u32), Entry>,
    /// Insertion order is expiry order: every entry lives as long.
    order: VecDeque<(Instant, SocketAddr, u32)>,
    cap: usize,
}

impl ResponseCache {
    pub fn new(cap: usize) -> Self {
        ResponseCache {
            cap: cap.max(1),
            ..Default::default()
        }
    }

    /// The response sent to `peer`'s request `seq` of `request_type`.
    pub fn get(&self, peer: SocketAddr, seq: u32, request_type: u8) -> Option<&[u8]> {
        self.map
            .get(&(peer, seq))
            .filter(|e| e.request_type == request_type)
            .map(|e| &e.response[..])
    }

    /// Keeps `response` until `expires`; returns how many entries were
    /// evicted early to stay under the cap.
    pub fn insert(
        &mut self,
        peer: SocketAddr,
        seq: u32,
        request_type: u8,
        response: Vec<u8>,
        expires: Instant,
    ) -> usize {
        let mut evicted = 0;
        while self.map.len() >= self.cap {
            match self.order.pop_front() {
                Some((_, p, s)) => {
                    if self.map.remove(&(p, s)).is_some() {
                        evicted += 1;
                    }
                }
                None => break,
            }
        }
        if self
            .map
            .insert(
                (peer, seq),
                Entry {
                    request_type,
                    response,
                },
            )
            .is_none()
        {
            self.order.push_back((expires, peer, seq));
        }
        evicted
    }

    /// Drops what expired by `now`.
    pub fn expire(&mut self, now: Instant) {
        while let Some(&(t, p, s)) = self.order.front() {
            if t > now {
                break;
            }
            self.order.pop_front();
            self.map.remove(&(p, s));
        }
    }

    /// When the oldest entry expires.
    pub fn next_expiry(&self) -> Option<Instant> {
        self.order.front().map(|e| e.0)
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn hits_by_peer_seq_and_type_then_expires() {
        let t0 = Instant::now();
        let a: SocketAddr = "192.0.2.1:8805".parse().unwrap();
        let b: SocketAddr = "192.0.2.2:8805".parse().unwrap();
        let mut c = ResponseCache::new(10);
        c.insert(a, 7, 50, vec![1], t0 + Duration::from_secs(5));
        assert_eq!(c.get(a, 7, 50), Some(&[1][..]));
        assert_eq!(c.get(a, 7, 52), None);
        assert_eq!(c.get(b, 7, 50), None);
        c.expire(t0 + Duration::from_secs(4));
        assert_eq!(c.len(), 1);
        c.expire(t0 + Duration::from_secs(5));
        assert_eq!(c.len(), 0);
    }

    #[test]
    fn capped() {
        let t0 = Instant::now();
        let a: SocketAddr = "192.0.2.1:8805".parse().unwrap();
        let mut c = ResponseCache::new(3);
        let evicted: usize = (0..5).map(|s| c.insert(a, s, 1, vec![], t0)).sum();
        assert_eq!((c.len(), evicted), (3, 2));
        assert!(c.get(a, 0, 1).is_none() && c.get(a, 4, 1).is_some());
    }
}
