//! GB/s of each checksum kernel against a read-only pass over the same bytes
//! (the memory limit), for the packet sizes tunnels carry.
use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use tep_csum::{memory::read_only_pass, Kernel};

const SIZES: [usize; 6] = [20, 64, 576, 1492, 9000, 65535];

fn checksum(c: &mut Criterion) {
    let data: Vec<u8> = (0..65536 + 64).map(|i| (i * 7 + 1) as u8).collect();
    for size in SIZES {
        let mut group = c.benchmark_group(format!("checksum/{size}"));
        group.throughput(Throughput::Bytes(size as u64));
        let bytes = &data[..size];
        group.bench_function(BenchmarkId::from_parameter("read-only"), |b| {
            b.iter(|| read_only_pass(black_box(bytes)))
        });
        for k in Kernel::available() {
            group.bench_function(BenchmarkId::from_parameter(k.name()), |b| {
                b.iter(|| k.sum(black_box(bytes)))
            });
        }
        group.finish();
    }
}

criterion_group!(benches, checksum);
criterion_main!(benches);
