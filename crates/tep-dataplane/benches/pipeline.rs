//! The pipeline under criterion: one vector of 256 packets per iteration
//! through encap or decap, for GTP-U over IPv6 and VXLAN over IPv4, 64 and
//! 1492-byte inner packets, checksum zero / full / lco; and a read-only
//! pass over the same bytes for comparison. `tep-bench pipeline` runs the
//! whole matrix with per-node clocks.
//!
//! Timed: the `encap`/`decap` call, its sink freeing the buffers included.
//! Not timed: loading the vector from its templates before each call.

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};
use tep_csum::memory::read_only_pass;
use tep_csum::Sum;
use tep_dataplane::config::{ChecksumMode, DataplaneConfig, IpPrefix, TunnelConfig};
use tep_dataplane::Pool;
use tep_dataplane::Tsc;
use tep_dataplane::TunnelKind;
use tep_dataplane::{PacketVector, VECTOR_SIZE};
use tep_dataplane::{Pipeline, PipelineOptions};
use tep_wire::ethernet::EthernetAddress;

const SIZES: [usize; 2] = [64, 1492];
const MODES: [ChecksumMode; 3] = [ChecksumMode::Zero, ChecksumMode::Full, ChecksumMode::Lco];
const INNER_DST_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0xbb];

/// (sender, receiver) configs of one tunnel.
fn configs(
    kind: TunnelKind,
    v6: bool,
    mode: ChecksumMode,
) -> (Vec<TunnelConfig>, Vec<TunnelConfig>) {
    let (a, b) = if v6 {
        (
            IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1)),
            IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2)),
        )
    } else {
        (
            IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)),
            IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2)),
        )
    };
    let end = |local, remote| {
        let mut t = TunnelConfig::new("bench", kind, local, remote);
        t.checksum = mode;
        t.zero_checksum_tx = true;
        t.zero_checksum_rx = true;
        t.vni = 4242;
        t.teid = 0x1000;
        t.local_teid = 0x1000;
        if kind == TunnelKind::Gtpu {
            t.qfi = Some(9);
        }
        if kind.carries_ethernet() {
            t.vni = 4242;
            t.inner_macs = vec![EthernetAddress(INNER_DST_MAC)];
        } else {
            t.inner_prefixes = vec![IpPrefix {
                addr: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 0)),
                len: 8,
            }];
        }
        vec![t]
    };
    (end(a, b), end(b, a))
}

/// An inner TCP/IPv4 packet of `total` bytes with a correct checksum, in
/// an Ethernet frame when `ethernet`.
fn inner_packet(total: usize, sport: u16, ethernet: bool) -> Vec<u8> {
    let l3 = if ethernet { 14 } else { 0 };
    let mut f = vec![0u8; l3 + total];
    if ethernet {
        f[..6].copy_from_slice(&INNER_DST_MAC);
        f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0xaa]);
        f[12..14].copy_from_slice(&[0x08, 0x00]);
    }
    let (src, dst) = ([10, 8, 0, 1], [10, 9, 0, 1]);
    let p = &mut f[l3..];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    p[6] = 0x40;
    p[8] = 64;
    p[9] = 6;
    p[12..16].copy_from_slice(&src);
    p[16..20].copy_from_slice(&dst);
    let c = Sum::of(&p[..20]).checksum();
    p[10..12].copy_from_slice(&c.to_be_bytes());
    let t = &mut p[20..];
    t[0..2].copy_from_slice(&sport.to_be_bytes());
    t[2..4].copy_from_slice(&5201u16.to_be_bytes());
    t[12] = 0x50;
    t[13] = 0x10;
    for (i, b) in t[20..].iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(31);
    }
    let ph = tep_csum::pseudo_header_v4(src, dst, 6, (total - 20) as u16);
    let c = ph.add(Sum::of(t)).checksum();
    t[16..18].copy_from_slice(&c.to_be_bytes());
    f
}

fn pipeline(config: &[TunnelConfig], kind: TunnelKind) -> Pipeline<Tsc> {
    let inner_link = kind.link();
    Pipeline::new(
        config,
        &DataplaneConfig::default(),
        Tsc,
        PipelineOptions {
            inner_link,
            ..PipelineOptions::default()
        },
    )
}

fn load(pool: &mut Pool, v: &mut PacketVector, packets: &[Vec<u8>]) {
    for p in packets {
        let id = pool.alloc().expect("pool");
        assert!(pool.fill(id, p));
        v.push(id).expect("a vector");
    }
}

fn free(pool: &mut Pool, v: &mut PacketVector) {
    for &id in v.as_slice() {
        pool.free(id);
    }
    v.clear();
}

/// Encapsulates `inner` once: the outer packets a peer receives.
fn encapsulate(p: &mut Pipeline<Tsc>, pool: &mut Pool, inner: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut v = PacketVector::new();
    load(pool, &mut v, inner);
    let mut out = Vec::new();
    p.encap(pool, &mut v, &mut |_, pool, v| {
        out.extend(v.as_slice().iter().map(|&id| pool.data(id).to_vec()));
        free(pool, v);
    });
    assert_eq!(out.len(), inner.len(), "{}", p.runtime().report());
    out
}

fn bench_pipeline(c: &mut Criterion) {
    for (kind, v6) in [(TunnelKind::Gtpu, true), (TunnelKind::Vxlan, false)] {
        let family = if v6 { "ipv6" } else { "ipv4" };
        for size in SIZES {
            let inner: Vec<Vec<u8>> = (0..VECTOR_SIZE)
                .map(|i| inner_packet(size, 1000 + i as u16, kind.carries_ethernet()))
                .collect();
            let mut pool = Pool::new(2 * VECTOR_SIZE, size + 256);
            let mut encap = c.benchmark_group(format!("encap/{kind}-{family}/{size}"));
            encap.throughput(Throughput::Elements(VECTOR_SIZE as u64));
            let mut outers = Vec::new();
            for mode in MODES {
                let (ca, cb) = configs(kind, v6, mode);
                let mut a = pipeline(&ca, kind);
                outers.push((mode, cb, encapsulate(&mut a, &mut pool, &inner)));
                encap.bench_function(BenchmarkId::from_parameter(mode), |b| {
                    b.iter_custom(|iters| {
                        let mut v = PacketVector::new();
                        let mut total = Duration::ZERO;
                        for _ in 0..iters {
                            load(&mut pool, &mut v, &inner);
                            let t = Instant::now();
                            a.encap(&mut pool, &mut v, &mut |_, pool, v| free(pool, v));
                            total += t.elapsed();
                        }
                        total
                    })
                });
            }
            encap.finish();
            let mut decap = c.benchmark_group(format!("decap/{kind}-{family}/{size}"));
            decap.throughput(Throughput::Elements(VECTOR_SIZE as u64));
            for (mode, cb, outer) in &outers {
                let mut p = pipeline(cb, kind);
                decap.bench_function(BenchmarkId::from_parameter(mode), |b| {
                    b.iter_custom(|iters| {
                        let mut v = PacketVector::new();
                        let mut total = Duration::ZERO;
                        for _ in 0..iters {
                            load(&mut pool, &mut v, outer);
                            let t = Instant::now();
                            p.decap(&mut pool, &mut v, 0, &mut |_, pool, v| free(pool, v));
                            total += t.elapsed();
                        }
                        total
                    })
                });
                assert_eq!(p.drops_total(), 0, "{}", p.runtime().report());
            }
            decap.finish();
            // The memory limit: one read-only pass over the same bytes,
            // loaded the same way.
            let mut ro = c.benchmark_group(format!("read-only/{kind}-{family}/{size}"));
            ro.throughput(Throughput::Elements(VECTOR_SIZE as u64));
            let full_outer = &outers[1].2;
            for (name, packets) in [("inner", &inner), ("outer", full_outer)] {
                ro.bench_function(BenchmarkId::from_parameter(name), |b| {
                    b.iter_custom(|iters| {
                        let mut v = PacketVector::new();
                        let mut total = Duration::ZERO;
                        for _ in 0..iters {
                            load(&mut pool, &mut v, packets);
                            let t = Instant::now();
                            let mut acc = 0;
                            for &id in v.as_slice() {
                                acc |= read_only_pass(black_box(pool.data(id)));
                            }
                            black_box(acc);
                            total += t.elapsed();
                            free(&mut pool, &mut v);
                        }
                        total
                    })
                });
            }
            ro.finish();
        }
    }
}

criterion_group!(benches, bench_pipeline);
criterion_main!(benches);
