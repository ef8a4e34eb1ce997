//! ns per next-hop lookup (gateway mode's per-packet question: the
//! Ethernet header to a destination's next hop), with 1 to 32768
//! destinations known, looked up in a random order. Medians of 11 samples.
//!
//! `cargo run --release -p tep-dataplane --example nexthop_lookup`

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Instant;
use tep_dataplane::{LinkHeader, NextHops};

fn table() -> NextHops {
    NextHops::new(65536, 1024)
}

fn main() {
    let header = LinkHeader {
        dst: [2, 0, 0, 0, 0, 1],
        src: [2, 0, 0, 0, 0, 2],
        vlan: None,
    };
    for known in [1u32, 64, 4096, 32768] {
        let mut n = table();
        let dsts: Vec<IpAddr> = (0..known)
            .map(|i| IpAddr::V4(Ipv4Addr::from(0xc612_0000 + i * 7)))
            .collect();
        for &d in &dsts {
            let _ = n.set(d, Some(header));
        }
        // A fixed pseudo-random order (xorshift), the same for every run.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let order: Vec<IpAddr> = (0..1 << 16)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                dsts[(x % u64::from(known)) as usize]
            })
            .collect();
        let mut samples = Vec::new();
        let mut hits = 0usize;
        for _ in 0..11 {
            let t = Instant::now();
            hits = 0;
            for _ in 0..8 {
                for &d in &order {
                    hits += usize::from(black_box(n.get(black_box(d))).is_some());
                }
            }
            samples.push(t.elapsed().as_nanos() as f64 / (8 * order.len()) as f64);
        }
        samples.sort_by(f64::total_cmp);
        println!(
            "{known:>6} destinations: {:.2} ns per lookup (hits {:.1}%)",
            samples[5],
            100.0 * hits as f64 / (8 * order.len()) as f64
        );
    }
}
