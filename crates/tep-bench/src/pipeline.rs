//! `tep-bench pipeline`: ns per packet of the whole encap and decap paths,
//! for every tunnel kind, outer family, checksum mode and packet size,
//! each beside a read-only pass over the same bytes measured in the same
//! run; then the per-node cost of two paths in the shape of seed 002's
//! "clock cycles per layer" table, and the two checksum targets.
//!
//! # What is timed
//! One call of `Pipeline::encap` / `Pipeline::decap` on a full vector of
//! 256 packets, sink included: the sink frees every buffer it is given (a
//! push per packet onto the pool's free list). Not timed: refilling the
//! vector from its templates before each call (copying packets into
//! buffers is the receive side's work, not the pipeline's). The read-only
//! pass is timed the same way: refill, then one `read_only_pass` per packet
//! over the same buffers. Pipeline and read-only samples alternate, and the
//! median of each is reported.

use crate::timing::median;
use serde::Serialize;
use std::hint::black_box;
use std::net::Ipv6Addr;
use std::time::Instant;
use tep_csum::memory::read_only_pass;
use tep_csum::Sum;
use tep_dataplane::config::{ChecksumMode, DataplaneConfig, TunnelConfig};
use tep_dataplane::finish_offloaded;
use tep_dataplane::NodeStats;
use tep_dataplane::TunnelKind;
use tep_dataplane::{ChecksumState, Gso, GsoKind, Pool, SUPER_PACKET_ROOM};
use tep_dataplane::{Clock, Tsc};
use tep_dataplane::{Direction, Pipeline, PipelineOptions};
use tep_dataplane::{PacketVector, VECTOR_SIZE};

/// Outer address family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    Ipv4,
    Ipv6,
}

impl Family {
    pub const ALL: [Family; 2] = [Family::Ipv6, Family::Ipv4];

    pub fn name(self) -> &'static str {
        match self {
            Family::Ipv4 => "ipv4",
            Family::Ipv6 => "ipv6",
        }
    }

    pub fn parse(s: &str) -> Result<Family, String> {
        match s.to_ascii_lowercase().as_str() {
            "ipv4" | "v4" | "4" => Ok(Family::Ipv4),
            "ipv6" | "v6" | "6" => Ok(Family::Ipv6),
            _ => Err(format!("unknown family '{s}' (ipv4 or ipv6)")),
        }
    }
}

/// An inner packet size: the total IP packet length, or a TSO super-packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Size {
    /// Inner IP packets of this total length.
    Ip(usize),
    /// 64 KiB TCP super-packets (`meta.gso` set), as a TUN with TSO gives.
    Tso,
}

/// The inner IP length of a TSO super-packet and its segment payload.
const TSO_LEN: usize = 65535;
const TSO_MSS: u16 = 1400;

impl Size {
    pub const ALL: [Size; 4] = [Size::Ip(64), Size::Ip(576), Size::Ip(1492), Size::Tso];

    fn ip_len(self) -> usize {
        match self {
            Size::Ip(n) => n,
            Size::Tso => TSO_LEN,
        }
    }

    pub fn label(self) -> String {
        match self {
            Size::Ip(n) => n.to_string(),
            Size::Tso => "64K-tso".into(),
        }
    }

    pub fn parse(s: &str) -> Result<Size, String> {
        match s.to_ascii_lowercase().as_str() {
            "tso" | "64k" | "64k-tso" | "65535" => Ok(Size::Tso),
            n => match n.parse::<usize>() {
                Ok(n) if (64..=9000).contains(&n) => Ok(Size::Ip(n)),
                _ => Err(format!(
                    "unknown size '{s}' (an inner IP length 64..=9000, or 64k for TSO)"
                )),
            },
        }
    }
}

/// The checksum modes a kind sends (remote only where the header says it).
pub fn modes_of(kind: TunnelKind) -> impl Iterator<Item = ChecksumMode> {
    ChecksumMode::ALL.into_iter().filter(move |&m| {
        m != ChecksumMode::Remote || matches!(kind, TunnelKind::Vxlan | TunnelKind::Gue)
    })
}

/// Parses a checksum mode name.
pub fn parse_mode(s: &str) -> Result<ChecksumMode, String> {
    ChecksumMode::ALL
        .into_iter()
        .find(|m| m.name().eq_ignore_ascii_case(s))
        .ok_or_else(|| format!("unknown checksum mode '{s}' (zero, full, lco, offload, remote)"))
}

/// What to measure and how long.
#[derive(Debug, Clone)]
pub struct Options {
    pub samples: usize,
    /// Timed nanoseconds per sample (at least one call).
    pub sample_ns: f64,
    pub kinds: Vec<TunnelKind>,
    pub families: Vec<Family>,
    pub modes: Vec<ChecksumMode>,
    pub sizes: Vec<Size>,
    /// Measure the targets (GTP-U encap zero, full and read-only).
    pub checks: bool,
}

impl Default for Options {
    /// The full matrix: about half a minute.
    fn default() -> Self {
        Options {
            samples: 11,
            sample_ns: 3e5,
            kinds: TunnelKind::ALL.to_vec(),
            families: Family::ALL.to_vec(),
            modes: ChecksumMode::ALL.to_vec(),
            sizes: Size::ALL.to_vec(),
            checks: true,
        }
    }
}

impl Options {
    /// A CI-sized run: every kind and family, zero and full, 1492 bytes,
    /// one call per sample.
    pub fn quick() -> Options {
        Options {
            samples: 3,
            sample_ns: 0.0,
            modes: vec![ChecksumMode::Zero, ChecksumMode::Full],
            sizes: vec![Size::Ip(1492)],
            ..Options::default()
        }
    }
}

/// One node's cost in a row, per input packet.
#[derive(Debug, Clone, Serialize)]
pub struct NodeCost {
    pub node: &'static str,
    pub clocks_per_packet: f64,
}

/// One measured configuration.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub direction: &'static str,
    pub kind: &'static str,
    pub family: &'static str,
    pub mode: &'static str,
    /// Inner IP packet length.
    pub size: usize,
    pub size_label: String,
    /// The inner transport checksum as given to encap: "complete", or
    /// "partial" (remote mode, TSO: what a TUN with offloads gives).
    pub inner_checksum: &'static str,
    /// Input packets per call (the vector).
    pub packets_per_call: usize,
    /// Packets the sink got per call (GSO segments, GRO merges).
    pub outputs_per_call: f64,
    /// Bytes the read-only pass reads per input packet.
    pub bytes_per_packet: f64,
    /// Wall time per input packet, median.
    pub ns_per_packet: f64,
    /// Million input packets per second on one core.
    pub mpps: f64,
    /// TSC clocks per input packet around the whole call, median.
    pub clocks_per_packet: f64,
    /// The part of it spent inside nodes (the runtime counters).
    pub node_clocks_per_packet: f64,
    /// One read-only pass over the same bytes, per packet, median.
    pub read_only_ns_per_packet: f64,
    /// `ns_per_packet / read_only_ns_per_packet`.
    pub ratio: f64,
    pub nodes: Vec<NodeCost>,
}

/// A row the pipeline could not run (it dropped the packets).
#[derive(Debug, Clone, Serialize)]
pub struct Skipped {
    pub direction: &'static str,
    pub kind: &'static str,
    pub family: &'static str,
    pub mode: &'static str,
    pub size_label: String,
    pub reason: String,
}

/// A target with its verdict.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub description: &'static str,
    pub value: f64,
    pub limit: f64,
    pub pass: bool,
    pub numerator_ns: f64,
    pub denominator_ns: f64,
}

/// One line of a per-layer table.
#[derive(Debug, Clone, Serialize)]
pub struct LayerLine {
    pub stack: &'static str,
    pub layer: &'static str,
    pub node: &'static str,
    pub clocks_per_packet: f64,
    pub share: f64,
    /// Seed 002's figure for the Linux layer it matches, in clocks.
    pub seed_clocks: Option<u32>,
}

/// A "clock cycles per layer" table.
#[derive(Debug, Clone, Serialize)]
pub struct LayerTable {
    pub title: String,
    pub lines: Vec<LayerLine>,
    pub total_clocks: f64,
    pub seed_total: Option<u32>,
}

/// Everything a run measured.
#[derive(Debug, Clone, Serialize)]
pub struct Results {
    pub vector_size: usize,
    pub samples: usize,
    /// TSC clocks per nanosecond seen during the run.
    pub tsc_ghz: f64,
    pub rows: Vec<Row>,
    pub skipped: Vec<Skipped>,
    pub tables: Vec<LayerTable>,
    pub checks: Vec<Check>,
    /// What the two targets ask of the checksum together.
    pub joint: Option<Joint>,
}

/// The two targets together. With checksum cost C (full − zero), zero path
/// Z and read-only pass R, `full <= 1.3 zero` is C <= 0.3 Z and `full <= 2
/// read-only` is Z + C <= 2 R; both hold only if C <= (2 / 4.33) R = 6/13 R,
/// i.e. if summing the bytes takes under half the time of reading them.
#[derive(Debug, Clone, Serialize)]
pub struct Joint {
    /// C: full − zero, ns per packet.
    pub checksum_ns: f64,
    /// R, ns per packet.
    pub read_only_ns: f64,
    /// C / R.
    pub value: f64,
    /// 6/13: the largest C / R that lets both targets pass.
    pub limit: f64,
}

impl Joint {
    /// From the two checks as `measure_checks` returns them (full vs zero,
    /// full vs read-only).
    fn of(checks: &[Check]) -> Option<Joint> {
        let [a, b] = checks else {
            return None;
        };
        let (full, zero, read_only) = (a.numerator_ns, a.denominator_ns, b.denominator_ns);
        let checksum_ns = full - zero;
        Some(Joint {
            checksum_ns,
            read_only_ns: read_only,
            value: checksum_ns / read_only,
            limit: 6.0 / 13.0,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Spec {
    direction: Direction,
    kind: TunnelKind,
    family: Family,
    mode: ChecksumMode,
    size: Size,
}

/// A packet to load into a buffer.
#[derive(Debug, Clone)]
struct Template {
    bytes: Vec<u8>,
    csum: ChecksumState,
    gso: Option<Gso>,
}

const INNER_SRC_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0xaa];
const INNER4: ([u8; 4], [u8; 4]) = ([10, 8, 0, 1], [10, 9, 0, 1]);
const INNER6: ([u8; 16], [u8; 16]) = (
    Ipv6Addr::new(0x2001, 0xdb8, 8, 0, 0, 0, 0, 1).octets(),
    Ipv6Addr::new(0x2001, 0xdb8, 9, 0, 0, 0, 0, 1).octets(),
);

/// The two ends of a tunnel: (sender's config, receiver's config), as the
/// integration tests set them up.
fn configs(
    kind: TunnelKind,
    family: Family,
    mode: ChecksumMode,
) -> (Vec<TunnelConfig>, Vec<TunnelConfig>) {
    tep_dataplane::example::tunnel_pair(kind, family == Family::Ipv6, mode)
}

/// An inner TCP packet of `total` IP bytes (IPv6 when `v6`), at `l3` bytes
/// into the returned buffer (after an Ethernet header when `l3` is 14).
/// With `partial` the TCP checksum field holds the pseudo-header sum only.
fn tcp_packet(v6: bool, total: usize, sport: u16, partial: bool, l3: usize) -> (Vec<u8>, usize) {
    let ihl = if v6 { 40 } else { 20 };
    let tcp_len = total - ihl;
    let mut f = vec![0u8; l3 + total];
    if l3 == 14 {
        f[..6].copy_from_slice(&tep_dataplane::example::INNER_DST_MAC);
        f[6..12].copy_from_slice(&INNER_SRC_MAC);
        let ty: u16 = if v6 { 0x86dd } else { 0x0800 };
        f[12..14].copy_from_slice(&ty.to_be_bytes());
    }
    let p = &mut f[l3..];
    let pseudo = if v6 {
        p[0] = 0x60;
        p[4..6].copy_from_slice(&(tcp_len as u16).to_be_bytes());
        p[6] = 6;
        p[7] = 64;
        p[8..24].copy_from_slice(&INNER6.0);
        p[24..40].copy_from_slice(&INNER6.1);
        tep_csum::pseudo_header_v6(&INNER6.0, &INNER6.1, 6, tcp_len as u32)
    } else {
        p[0] = 0x45;
        p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        p[4..6].copy_from_slice(&sport.to_be_bytes());
        p[6] = 0x40;
        p[8] = 64;
        p[9] = 6;
        p[12..16].copy_from_slice(&INNER4.0);
        p[16..20].copy_from_slice(&INNER4.1);
        let c = Sum::of(&p[..20]).checksum();
        p[10..12].copy_from_slice(&c.to_be_bytes());
        tep_csum::pseudo_header_v4(INNER4.0, INNER4.1, 6, tcp_len as u16)
    };
    let t = &mut p[ihl..];
    t[0..2].copy_from_slice(&sport.to_be_bytes());
    t[2..4].copy_from_slice(&5201u16.to_be_bytes());
    t[4..8].copy_from_slice(&(u32::from(sport) << 12).to_be_bytes());
    t[8..12].copy_from_slice(&1u32.to_be_bytes());
    t[12] = 0x50;
    t[13] = 0x10;
    t[14..16].copy_from_slice(&512u16.to_be_bytes());
    for (i, b) in t[20..].iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(31).wrapping_add(sport as u8);
    }
    let c = if partial {
        pseudo.value()
    } else {
        pseudo.add(Sum::of(t)).checksum()
    };
    t[16..18].copy_from_slice(&c.to_be_bytes());
    (f, l3 + ihl)
}

/// The 256 inner packets of a row.
fn inner_templates(spec: &Spec) -> Vec<Template> {
    let v6 = spec.kind == TunnelKind::FouSit;
    let l3 = if spec.kind.carries_ethernet() { 14 } else { 0 };
    let tso = spec.size == Size::Tso;
    let partial = tso || spec.mode == ChecksumMode::Remote;
    (0..VECTOR_SIZE)
        .map(|i| {
            let (bytes, l4) = tcp_packet(v6, spec.size.ip_len(), 1000 + i as u16, partial, l3);
            Template {
                bytes,
                csum: if partial {
                    ChecksumState::Partial {
                        start: l4 as u16,
                        offset: (l4 + 16) as u16,
                    }
                } else {
                    ChecksumState::None
                },
                gso: tso.then_some(Gso {
                    kind: if v6 { GsoKind::Tcp6 } else { GsoKind::Tcp4 },
                    segment_size: TSO_MSS,
                }),
            }
        })
        .collect()
}

fn load(pool: &mut Pool, v: &mut PacketVector, templates: &[Template]) {
    for t in templates {
        let id = pool
            .alloc()
            .expect("the pool holds a vector and its outputs");
        assert!(pool.fill(id, &t.bytes), "templates fit the pool");
        let m = pool.meta_mut(id);
        m.csum = t.csum;
        m.gso = t.gso;
        v.push(id).expect("at most a vector");
    }
}

fn free_all(pool: &mut Pool, v: &mut PacketVector) {
    for &id in v.as_slice() {
        pool.free(id);
    }
    v.clear();
}

fn make_pool(size: Size) -> Pool {
    // Headroom comes on top of the data room; TSO needs 64 KiB buffers
    // (super-packets in, GRO super-packets out).
    match size {
        Size::Tso => Pool::new(1024, SUPER_PACKET_ROOM),
        // Decap loads outer packets: inner + Ethernet + the outer headers.
        Size::Ip(n) => Pool::new(1024, (n + 192).next_multiple_of(64)),
    }
}

fn pipeline(config: &[TunnelConfig], kind: TunnelKind, gro: bool) -> Pipeline<Tsc> {
    Pipeline::new(
        config,
        &DataplaneConfig::default(),
        Tsc,
        PipelineOptions {
            inner_link: kind.link(),
            gro,
            ..PipelineOptions::default()
        },
    )
}

/// A pipeline ready to be timed, and the vectors it is fed in turn.
struct Bench {
    pipeline: Pipeline<Tsc>,
    pool: Pool,
    direction: Direction,
    vectors: Vec<Vec<Template>>,
    outputs_per_call: f64,
}

impl Bench {
    /// Builds both ends, runs encap once (the decap input), and checks
    /// that one call of the measured path drops nothing.
    fn new(spec: &Spec) -> Result<Bench, String> {
        let (ca, cb) = configs(spec.kind, spec.family, spec.mode);
        let mut pool = make_pool(spec.size);
        let inner = inner_templates(spec);
        let mut a = pipeline(&ca, spec.kind, false);
        let mut outer = Vec::new();
        let mut v = PacketVector::new();
        load(&mut pool, &mut v, &inner);
        a.encap(&mut pool, &mut v, &mut |_, pool, v| {
            for &id in v.as_slice() {
                let mut bytes = pool.data(id).to_vec();
                finish_offloaded(&mut bytes, pool.meta(id).csum).expect("the pipeline's offsets");
                outer.push(Template {
                    bytes,
                    csum: ChecksumState::None,
                    gso: None,
                });
            }
            free_all(pool, v);
        });
        if a.drops_total() > 0 {
            return Err(drops_text(&a));
        }
        let (pipeline, vectors, outputs) = match spec.direction {
            Direction::Encap => (a, vec![inner], outer.len() as f64),
            Direction::Decap => {
                // GRO is the receive half of TSO.
                let mut b = pipeline(&cb, spec.kind, spec.size == Size::Tso);
                let vectors: Vec<Vec<Template>> =
                    outer.chunks(VECTOR_SIZE).map(|c| c.to_vec()).collect();
                let mut out = 0usize;
                for t in &vectors {
                    load(&mut pool, &mut v, t);
                    b.decap(&mut pool, &mut v, 0, &mut |_, pool, v| {
                        out += v.len();
                        free_all(pool, v);
                    });
                }
                if b.drops_total() > 0 || out == 0 {
                    return Err(drops_text(&b));
                }
                let per_call = out as f64 / vectors.len() as f64;
                (b, vectors, per_call)
            }
        };
        if pool.available() != pool.capacity() {
            return Err("buffers leaked".into());
        }
        Ok(Bench {
            pipeline,
            pool,
            direction: spec.direction,
            vectors,
            outputs_per_call: outputs,
        })
    }

    /// One timed call on vector `i`: (ns, clocks, packets).
    fn call(&mut self, i: usize) -> (f64, u64, usize) {
        let Bench {
            pipeline,
            pool,
            direction,
            vectors,
            ..
        } = self;
        let t = &vectors[i % vectors.len()];
        let mut v = PacketVector::new();
        load(pool, &mut v, t);
        let sink = |pool: &mut Pool, v: &mut PacketVector| {
            for &id in v.as_slice() {
                pool.free(id);
            }
        };
        let start = Instant::now();
        let c0 = Tsc.now();
        match direction {
            Direction::Encap => pipeline.encap(pool, &mut v, &mut |_, pool, v| sink(pool, v)),
            Direction::Decap => pipeline.decap(pool, &mut v, 0, &mut |_, pool, v| sink(pool, v)),
        }
        let c1 = Tsc.now();
        let ns = start.elapsed().as_nanos() as f64;
        (ns, c1.saturating_sub(c0), t.len())
    }

    /// One timed read-only pass over vector `i` loaded the same way:
    /// (ns, packets, bytes).
    fn read_only(&mut self, i: usize) -> (f64, usize, usize) {
        let t = &self.vectors[i % self.vectors.len()];
        let mut v = PacketVector::new();
        load(&mut self.pool, &mut v, t);
        let pool = &self.pool;
        let start = Instant::now();
        let mut acc = 0u64;
        for &id in v.as_slice() {
            acc |= read_only_pass(black_box(pool.data(id)));
        }
        black_box(acc);
        let ns = start.elapsed().as_nanos() as f64;
        let bytes = v.as_slice().iter().map(|&id| pool.data(id).len()).sum();
        free_all(&mut self.pool, &mut v);
        (ns, t.len(), bytes)
    }
}

fn drops_text<C: Clock>(p: &Pipeline<C>) -> String {
    let mut parts = Vec::new();
    for n in p.runtime().nodes() {
        for (r, c) in n.drops_by_reason() {
            parts.push(format!("{} {} x{c}", n.name, r.name()));
        }
    }
    if parts.is_empty() {
        "no output".into()
    } else {
        format!("dropped: {}", parts.join(", "))
    }
}

fn ticks(nodes: &[NodeStats]) -> Vec<u64> {
    nodes.iter().map(|n| n.ticks).collect()
}

/// One pipeline sample: ns and clocks per input packet over `calls`
/// calls, and each node's clocks per input packet.
struct Sample {
    ns: f64,
    clocks: f64,
    nodes: Vec<f64>,
}

impl Bench {
    /// Warms up, then sizes a sample to about `sample_ns` (at least one call).
    fn calls_per_sample(&mut self, sample_ns: f64) -> usize {
        let (ns, _, _) = self.call(0);
        if sample_ns > 0.0 {
            ((sample_ns / ns.max(1.0)).ceil() as usize).clamp(1, 10_000)
        } else {
            1
        }
    }

    fn sample(&mut self, calls: usize, next: &mut usize) -> Sample {
        let before = ticks(self.pipeline.runtime().nodes());
        let (mut ns, mut clocks, mut n) = (0.0, 0u64, 0usize);
        for _ in 0..calls {
            let (t, c, p) = self.call(*next);
            ns += t;
            clocks += c;
            n += p;
            *next += 1;
        }
        let after = ticks(self.pipeline.runtime().nodes());
        Sample {
            ns: ns / n as f64,
            clocks: clocks as f64 / n as f64,
            nodes: after
                .iter()
                .zip(&before)
                .map(|(a, b)| (a - b) as f64 / n as f64)
                .collect(),
        }
    }

    /// A read-only sample over the same vectors: (ns per packet, bytes per
    /// packet).
    fn read_only_sample(&mut self, calls: usize, first: usize) -> (f64, f64) {
        let (mut ns, mut n, mut bytes) = (0.0, 0usize, 0usize);
        for j in 0..calls {
            let (t, p, b) = self.read_only(first + j);
            ns += t;
            n += p;
            bytes += b;
        }
        (ns / n as f64, bytes as f64 / n as f64)
    }
}

fn measure(spec: &Spec, opts: &Options) -> Result<Row, String> {
    let mut b = Bench::new(spec)?;
    let calls = b.calls_per_sample(opts.sample_ns);
    let names: Vec<&'static str> = b
        .pipeline
        .runtime()
        .nodes()
        .iter()
        .map(|n| n.name)
        .collect();
    let mut node_samples = vec![Vec::with_capacity(opts.samples); names.len()];
    let mut pipe_ns = Vec::with_capacity(opts.samples);
    let mut pipe_clocks = Vec::with_capacity(opts.samples);
    let mut ro_ns = Vec::with_capacity(opts.samples);
    let mut bytes = 0.0;
    let mut next = 1;
    // Pipeline and read-only samples alternate.
    for _ in 0..opts.samples {
        let s = b.sample(calls, &mut next);
        for (all, one) in node_samples.iter_mut().zip(s.nodes) {
            all.push(one);
        }
        pipe_ns.push(s.ns);
        pipe_clocks.push(s.clocks);
        let (ns, by) = b.read_only_sample(calls, next);
        ro_ns.push(ns);
        bytes = by;
    }
    if b.pipeline.drops_total() > 0 {
        return Err(drops_text(&b.pipeline));
    }
    // The nodes the path runs (the others cost nothing, not even a call).
    let ran = |name: &str| {
        b.pipeline
            .runtime()
            .nodes()
            .iter()
            .any(|n| n.name == name && n.packets > 0)
    };
    let nodes: Vec<NodeCost> = names
        .iter()
        .zip(node_samples.iter_mut())
        .filter(|(name, _)| ran(name))
        .map(|(&node, s)| NodeCost {
            node,
            clocks_per_packet: median(s),
        })
        .collect();
    let ns = median(&mut pipe_ns);
    let ro = median(&mut ro_ns);
    Ok(Row {
        direction: spec.direction.name(),
        kind: spec.kind.name(),
        family: spec.family.name(),
        mode: spec.mode.name(),
        size: spec.size.ip_len(),
        size_label: spec.size.label(),
        inner_checksum: if spec.size == Size::Tso || spec.mode == ChecksumMode::Remote {
            "partial"
        } else {
            "complete"
        },
        packets_per_call: b.vectors[0].len(),
        outputs_per_call: b.outputs_per_call,
        bytes_per_packet: bytes,
        ns_per_packet: ns,
        mpps: 1e3 / ns,
        clocks_per_packet: median(&mut pipe_clocks),
        node_clocks_per_packet: nodes.iter().map(|n| n.clocks_per_packet).sum(),
        read_only_ns_per_packet: ro,
        ratio: ns / ro,
        nodes,
    })
}

/// The two targets, measured on their own with the samples of the three
/// quantities interleaved (zero, full, read-only), so that a busy machine
/// slows them alike.
fn measure_checks(opts: &Options) -> Result<Vec<Check>, String> {
    let [zero, full, _] = required();
    let mut z = Bench::new(&zero)?;
    let mut f = Bench::new(&full)?;
    let zc = z.calls_per_sample(opts.sample_ns);
    let fc = f.calls_per_sample(opts.sample_ns);
    let samples = opts.samples.max(5);
    let (mut zs, mut fs, mut rs) = (Vec::new(), Vec::new(), Vec::new());
    let (mut zn, mut fnext) = (1, 1);
    for _ in 0..samples {
        zs.push(z.sample(zc, &mut zn).ns);
        fs.push(f.sample(fc, &mut fnext).ns);
        rs.push(f.read_only_sample(fc, fnext).0);
    }
    let (zero_ns, full_ns, ro_ns) = (median(&mut zs), median(&mut fs), median(&mut rs));
    let (a, b) = (full_ns / zero_ns, full_ns / ro_ns);
    Ok(vec![
        Check {
            name: "full_vs_zero",
            description: "encap GTP-U/IPv6 1492 B: checksum full <= 1.3x checksum zero",
            value: a,
            limit: 1.3,
            pass: a <= 1.3,
            numerator_ns: full_ns,
            denominator_ns: zero_ns,
        },
        Check {
            name: "full_vs_read_only",
            description: "encap GTP-U/IPv6 1492 B, checksum full <= 2x one read-only pass over the same bytes",
            value: b,
            limit: 2.0,
            pass: b <= 2.0,
            numerator_ns: full_ns,
            denominator_ns: ro_ns,
        },
    ])
}

fn spec_matches(r: &Row, s: &Spec) -> bool {
    r.direction == s.direction.name()
        && r.kind == s.kind.name()
        && r.family == s.family.name()
        && r.mode == s.mode.name()
        && r.size_label == s.size.label()
}

/// What the targets (zero, full) and the tables (full, VXLAN receive) need.
fn required() -> [Spec; 3] {
    let gtpu = |mode| Spec {
        direction: Direction::Encap,
        kind: TunnelKind::Gtpu,
        family: Family::Ipv6,
        mode,
        size: Size::Ip(1492),
    };
    [
        gtpu(ChecksumMode::Zero),
        gtpu(ChecksumMode::Full),
        Spec {
            direction: Direction::Decap,
            kind: TunnelKind::Vxlan,
            family: Family::Ipv4,
            mode: ChecksumMode::Full,
            size: Size::Ip(1492),
        },
    ]
}

/// Runs the matrix. `progress` is told of each row as it starts.
pub fn run(opts: &Options, mut progress: impl FnMut(&str)) -> Results {
    let mut specs = Vec::new();
    for &kind in &opts.kinds {
        for &family in &opts.families {
            for mode in modes_of(kind).filter(|m| opts.modes.contains(m)) {
                for &size in &opts.sizes {
                    for direction in [Direction::Encap, Direction::Decap] {
                        specs.push(Spec {
                            direction,
                            kind,
                            family,
                            mode,
                            size,
                        });
                    }
                }
            }
        }
    }
    // The per-layer tables' rows, whatever the filters say: measured for
    // the tables only, not reported as rows nobody asked for.
    let requested = specs.len();
    for s in required().into_iter().skip(1) {
        if !specs.contains(&s) {
            specs.push(s);
        }
    }
    let mut rows = Vec::new();
    let mut for_tables = Vec::new();
    let mut skipped = Vec::new();
    let mut tsc = (0.0, 0.0);
    for (k, s) in specs.iter().enumerate() {
        progress(&format!(
            "{} {} {} {} {}",
            s.direction.name(),
            s.kind,
            s.family.name(),
            s.mode,
            s.size.label()
        ));
        match measure(s, opts) {
            Ok(r) => {
                tsc.0 += r.clocks_per_packet;
                tsc.1 += r.ns_per_packet;
                if k < requested {
                    rows.push(r);
                } else {
                    for_tables.push(r);
                }
            }
            Err(reason) => skipped.push(Skipped {
                direction: s.direction.name(),
                kind: s.kind.name(),
                family: s.family.name(),
                mode: s.mode.name(),
                size_label: s.size.label(),
                reason,
            }),
        }
    }
    let find = |s: &Spec| rows.iter().chain(&for_tables).find(|r| spec_matches(r, s));
    let [_, full, vx] = required();
    let mut tables = Vec::new();
    if let Some(r) = find(&vx) {
        tables.push(layer_table(
            "VXLAN receive (tep decap): IPv4 outer, 1492-byte inner TCP/IPv4, checksum full",
            r,
            true,
        ));
    }
    if let Some(r) = find(&full) {
        tables.push(layer_table(
            "GTP-U transmit (tep encap): IPv6 outer, 1492-byte inner TCP/IPv4, checksum full",
            r,
            false,
        ));
    }
    progress("targets");
    let measured = if opts.checks {
        measure_checks(opts)
    } else {
        Ok(Vec::new())
    };
    let checks = match measured {
        Ok(c) => c,
        Err(reason) => {
            skipped.push(Skipped {
                direction: "encap",
                kind: "gtpu",
                family: "ipv6",
                mode: "zero/full",
                size_label: "1492".into(),
                reason,
            });
            Vec::new()
        }
    };
    Results {
        vector_size: VECTOR_SIZE,
        samples: opts.samples,
        tsc_ghz: if tsc.1 > 0.0 { tsc.0 / tsc.1 } else { 0.0 },
        rows,
        skipped,
        tables,
        joint: Joint::of(&checks),
        checks,
    }
}

/// Where a node sits in seed 002's layering, and the seed's Linux figure
/// for that layer (VXLAN receive, Linux 3.12, i7-950).
fn layer_of(node: &str) -> (&'static str, &'static str, Option<u32>) {
    match node {
        "ip-input" => ("outer", "L3 (IP)", Some(668)),
        "udp-input" => ("outer", "L4 (UDP)", Some(180)),
        "vxlan-decap" => ("outer", "VXLAN", Some(256)),
        "udp-checksum-verify" => (
            "outer+inner",
            "L4 checksum: outer UDP, inner TCP from the same sum",
            Some(608),
        ),
        "decap-output" => ("outer", "Net Core (strip, ECN, hand-off)", Some(120)),
        "gro" => ("inner", "GRO", None),
        "gso-segment" => ("inner", "GSO", None),
        "encap-classify" => ("inner", "L3 (IP) parse, flow hash", None),
        "tunnel-lookup" => ("inner", "route lookup", None),
        "inner-checksum" => ("inner", "L4 checksum (partial only)", None),
        "ip-udp-encap" => ("outer", "L3 + L4 headers", None),
        "udp-checksum" => ("outer", "L4 checksum", None),
        "udp-train" => ("outer", "UDP GSO trains", None),
        n if n.ends_with("-encap") || n.ends_with("-decap") => ("tunnel", "tunnel header", None),
        _ => ("", "", None),
    }
}

fn layer_table(title: &str, r: &Row, seed: bool) -> LayerTable {
    let total = r.clocks_per_packet.max(r.node_clocks_per_packet);
    let mut lines: Vec<LayerLine> = r
        .nodes
        .iter()
        .map(|n| {
            let (stack, layer, seed_clocks) = layer_of(n.node);
            LayerLine {
                stack,
                layer,
                node: n.node,
                clocks_per_packet: n.clocks_per_packet,
                share: n.clocks_per_packet / total,
                seed_clocks: if seed { seed_clocks } else { None },
            }
        })
        .collect();
    let between = total - r.node_clocks_per_packet;
    lines.push(LayerLine {
        stack: "",
        layer: "between nodes (vector sorting, counters, sink)",
        node: "-",
        clocks_per_packet: between,
        share: between / total,
        seed_clocks: None,
    });
    LayerTable {
        title: title.into(),
        lines,
        total_clocks: total,
        // Net core + IP + UDP + VXLAN + the inner TCP checksum.
        seed_total: seed.then_some(120 + 668 + 180 + 256 + 608),
    }
}

/// One "clock cycles per layer" table as text.
pub fn render_layer_table(t: &LayerTable) -> String {
    let mut out = String::new();
    out += &format!("\nclock cycles per layer: {}\n", t.title);
    let seed = t.seed_total.is_some();
    out += &format!(
        "{:<12} {:<52} {:<20} {:>10} {:>7}{}\n",
        "stack",
        "layer",
        "tep node",
        "clocks/pkt",
        "share",
        if seed { "  Linux (seed 002)" } else { "" }
    );
    for l in &t.lines {
        out += &format!(
            "{:<12} {:<52} {:<20} {:>10.1} {:>6.1}%{}\n",
            l.stack,
            l.layer,
            l.node,
            l.clocks_per_packet,
            100.0 * l.share,
            match l.seed_clocks {
                Some(c) => format!("  {c:>17}"),
                None => String::new(),
            }
        );
    }
    out += &format!(
        "{:<12} {:<52} {:<20} {:>10.1} {:>6.1}%{}\n",
        "",
        "total",
        "",
        t.total_clocks,
        100.0,
        match t.seed_total {
            Some(c) => format!("  {c:>17}"),
            None => String::new(),
        }
    );
    if seed {
        out +=
            "seed 002: Linux 3.12, i7-950 at 3.07 GHz, MTU-size VXLAN/TCP; its other inner-stack \
                costs (IP 252, TCP 652, net core 92) stay with the host stack after tep\n";
    }
    out
}

/// The results as text.
pub fn render(res: &Results) -> String {
    let mut out = format!(
        "pipeline: vectors of {}, median of {} interleaved samples, TSC {:.2} GHz\n\
         ns/pkt: one call on a full vector, sink freeing the buffers; refilling the vector is not timed\n\
         read-only: one pass over the same buffers, refilled the same way; ratio = ns/pkt / read-only\n\n",
        res.vector_size, res.samples, res.tsc_ghz
    );
    out += &format!(
        "{:<6} {:<9} {:<5} {:<8} {:>8} {:>6} {:>10} {:>8} {:>10} {:>12} {:>7}\n",
        "dir",
        "kind",
        "fam",
        "mode",
        "size",
        "inner",
        "ns/pkt",
        "Mpps",
        "clk/pkt",
        "read-only ns",
        "ratio"
    );
    for r in &res.rows {
        out += &format!(
            "{:<6} {:<9} {:<5} {:<8} {:>8} {:>6} {:>10.1} {:>8.2} {:>10.0} {:>12.1} {:>7.2}\n",
            r.direction,
            r.kind,
            r.family,
            r.mode,
            r.size_label,
            if r.inner_checksum == "partial" {
                "part"
            } else {
                "full"
            },
            r.ns_per_packet,
            r.mpps,
            r.clocks_per_packet,
            r.read_only_ns_per_packet,
            r.ratio
        );
    }
    if res.rows.iter().any(|r| r.size_label.contains("tso")) {
        out += "64K-tso: 256 super-packets of 65535 bytes (MSS 1400) per call, segmented before encap; \
                decap gets the segments (256 per call) with GRO on; per packet = per input packet\n";
    }
    if !res.skipped.is_empty() {
        out += "\nnot measured (the pipeline dropped the packets; see \"skipped\" in --json):\n";
        // One line per kind, size and reason.
        let mut groups: Vec<(&str, &str, &str, usize)> = Vec::new();
        for s in &res.skipped {
            match groups
                .iter_mut()
                .find(|g| (g.0, g.1, g.2) == (s.kind, &s.size_label[..], &s.reason[..]))
            {
                Some(g) => g.3 += 1,
                None => groups.push((s.kind, &s.size_label, &s.reason, 1)),
            }
        }
        for (kind, size, reason, n) in groups {
            out += &format!("  {kind} {size} ({n} rows): {reason}\n");
        }
    }
    for t in &res.tables {
        out += &render_layer_table(t);
    }
    if !res.checks.is_empty() {
        out += "\ntargets (measured on their own: zero, full and read-only samples interleaved):\n";
        for c in &res.checks {
            out += &format!(
                "  {} {}: {:.2}x (limit {:.1}x; {:.1} ns vs {:.1} ns)\n",
                if c.pass { "PASS" } else { "FAIL" },
                c.description,
                c.value,
                c.limit,
                c.numerator_ns,
                c.denominator_ns
            );
        }
    }
    if let Some(j) = &res.joint {
        out += &format!(
            "  both together: the checksum alone (full - zero, {:.1} ns) is {:.2}x a read-only pass; \
             both limits hold only below {:.2}x (summing the bytes faster than half a read of them)\n",
            j.checksum_ns, j.value, j.limit
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inner_templates_have_good_or_partial_checksums() {
        for kind in [TunnelKind::Gtpu, TunnelKind::Vxlan, TunnelKind::FouSit] {
            for mode in [ChecksumMode::Full, ChecksumMode::Remote] {
                let spec = Spec {
                    direction: Direction::Encap,
                    kind,
                    family: Family::Ipv4,
                    mode,
                    size: Size::Ip(576),
                };
                let t = &inner_templates(&spec)[3];
                let l3 = if kind.carries_ethernet() { 14 } else { 0 };
                assert_eq!(t.bytes.len(), l3 + 576);
                let mut b = t.bytes.clone();
                finish_offloaded(&mut b, t.csum).expect("the template's offsets");
                let v6 = kind == TunnelKind::FouSit;
                let ip = &b[l3..];
                let seg = &ip[if v6 { 40 } else { 20 }..];
                let ph = if v6 {
                    tep_csum::pseudo_header_v6(&INNER6.0, &INNER6.1, 6, seg.len() as u32)
                } else {
                    tep_csum::pseudo_header_v4(INNER4.0, INNER4.1, 6, seg.len() as u16)
                };
                assert!(ph.add(Sum::of(seg)).verifies(), "{kind} {mode}");
            }
        }
    }

    #[test]
    fn a_quick_row_measures_without_drops() {
        let opts = Options {
            samples: 1,
            ..Options::quick()
        };
        for direction in [Direction::Encap, Direction::Decap] {
            let spec = Spec {
                direction,
                kind: TunnelKind::Gtpu,
                family: Family::Ipv6,
                mode: ChecksumMode::Full,
                size: Size::Ip(64),
            };
            let r = measure(&spec, &opts).unwrap();
            assert!(r.ns_per_packet > 0.0 && r.ratio > 0.0, "{r:?}");
            assert_eq!(r.packets_per_call, VECTOR_SIZE);
        }
    }
}
