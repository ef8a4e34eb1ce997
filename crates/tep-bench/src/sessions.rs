//! `tep-bench pipeline --sessions 1,1000,1000000`: a UPF's GTP-U paths
//! with that many PDU sessions installed, downlink (session lookup by UE
//! address, encap with the session's TEID and QFI) and uplink (decap, the
//! session found by TEID), ns per packet side by side, and what a session
//! costs in memory.
//!
//! Each vector's 256 packets go to (come from) sessions picked at random
//! over the whole table, in runs of `burst` packets per session: 1 is the
//! worst case for the caches, where every packet's session is elsewhere
//! in memory; a real vector holds bursts of a few flows (a TCP window's
//! segments arrive together). The tables are built first and sampled in
//! turn, so that every count sees the same machine.
//!
//! `--filters 0,1,4,16`: each count again with sessions whose PDRs carry
//! SDF filters, that many each way (one PDR per filter, UDP to a port of
//! the UE's; the packets match the last), classified per packet
//! ([`tep_dataplane::session::rules`]); `vs no filter` is the cost beside
//! the same count without.
//!
//! `--mbr`: each count and filter count again with every session metered
//! both ways (a session AMBR high enough never to drop: the buckets'
//! cost, not their drops); `vs mbr off` is the cost beside the same row
//! without.

use crate::timing::median;
use serde::Serialize;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Instant;
use tep_dataplane::config::{ChecksumMode, DataplaneConfig};
use tep_dataplane::example;
use tep_dataplane::prefetch;
use tep_dataplane::session::control::Sessions;
use tep_dataplane::Pool;
use tep_dataplane::Tsc;
use tep_dataplane::{PacketVector, VECTOR_SIZE};
use tep_dataplane::{Pipeline, PipelineOptions};
use tep_wire::gtpu::{Extension, GtpuRepr, PduSessionContainer};

/// One measured count and direction.
#[derive(Debug, Clone, Serialize)]
pub struct SessionRow {
    pub sessions: u32,
    pub direction: &'static str,
    pub family: &'static str,
    pub checksum: &'static str,
    /// Inner IP packet length.
    pub size: usize,
    /// Packets per session in a row within a vector.
    pub burst: usize,
    /// SDF filters per session each way (0: one PDR, no filter).
    pub filters: usize,
    /// Every session metered both ways (an MBR that never drops).
    pub mbr: bool,
    pub ns_per_packet: f64,
    /// The 1-session figure's ns per packet over this one's: 1.0 means
    /// as fast, 0.9 means 10 % slower.
    pub speed_vs_one: f64,
    /// This row's ns per packet over the same count's without filters
    /// (1.0 without filters).
    pub vs_no_filter: f64,
    /// This row's ns per packet over the same row's without MBR (1.0
    /// without).
    pub vs_mbr_off: f64,
    /// Bytes one worker's replica holds per session (maps, slots, usage).
    pub bytes_per_session: f64,
    /// TSC clocks per packet of the node that finds the session
    /// (`session-lookup` downlink, `gtpu-decap` uplink).
    pub lookup_clocks: f64,
    /// What one random cache line costs over as many bytes as this
    /// count's tables, read and written with 32 lines in flight: the
    /// machine's floor for the memory a packet's session costs (its map
    /// entry and its slot's line: two lines).
    pub random_line_ns: f64,
}

/// ns per cache line of random reads and writes over `bytes` (at least a
/// line), prefetched 32 lines ahead: the median of 101 rounds of 256.
pub fn random_line_ns(bytes: usize, rng: &mut u64) -> f64 {
    const AHEAD: usize = 32;
    let lines = (bytes / 64).max(1);
    // Every page touched first: first touches would time page faults.
    let mut mem: Vec<[u64; 8]> = (0..lines as u64).map(|i| [i; 8]).collect();
    let mut times = Vec::with_capacity(101);
    let mut picks = [0usize; VECTOR_SIZE];
    for _ in 0..101 {
        for p in picks.iter_mut() {
            *p = (next(rng) % lines as u64) as usize;
        }
        let t = Instant::now();
        for i in 0..VECTOR_SIZE + AHEAD {
            if i < VECTOR_SIZE {
                prefetch(&mem[picks[i]]);
            }
            if i >= AHEAD {
                let l = &mut mem[picks[i - AHEAD]];
                l[1] = l[1].wrapping_add(l[0] | 1);
            }
        }
        times.push(t.elapsed().as_nanos() as f64 / VECTOR_SIZE as f64);
    }
    std::hint::black_box(&mem);
    median(&mut times)
}

/// One count's pipeline and what it is fed.
struct Upf {
    sessions: u32,
    filters: usize,
    mbr: bool,
    pipeline: Pipeline<Tsc>,
    pool: Pool,
    bytes_per_session: f64,
    rng: u64,
}

pub(crate) fn next(rng: &mut u64) -> u64 {
    // splitmix64
    *rng = rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *rng;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A UDP packet with valid checksums, from `src` to `dst` (IP at 0).
pub(crate) fn udp_packet(src: IpAddr, dst: IpAddr, payload: &[u8]) -> Vec<u8> {
    let udp_len = 8 + payload.len();
    let (mut p, l4) = match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let mut p = vec![0u8; 20 + udp_len];
            p[0] = 0x45;
            p[2..4].copy_from_slice(&((20 + udp_len) as u16).to_be_bytes());
            p[8] = 64;
            p[9] = 17;
            p[12..16].copy_from_slice(&s.octets());
            p[16..20].copy_from_slice(&d.octets());
            let c = tep_csum::Sum::of(&p[..20]).checksum();
            p[10..12].copy_from_slice(&c.to_be_bytes());
            (p, 20)
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let mut p = vec![0u8; 40 + udp_len];
            p[0] = 0x60;
            p[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
            p[6] = 17;
            p[7] = 64;
            p[8..24].copy_from_slice(&s.octets());
            p[24..40].copy_from_slice(&d.octets());
            (p, 40)
        }
        _ => unreachable!("one family"),
    };
    p[l4..l4 + 2].copy_from_slice(&2152u16.to_be_bytes());
    p[l4 + 2..l4 + 4].copy_from_slice(&2152u16.to_be_bytes());
    p[l4 + 4..l4 + 6].copy_from_slice(&(udp_len as u16).to_be_bytes());
    p[l4 + 8..].copy_from_slice(payload);
    let pseudo = match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            tep_csum::pseudo_header_v4(s.octets(), d.octets(), 17, udp_len as u16)
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            tep_csum::pseudo_header_v6(&s.octets(), &d.octets(), 17, udp_len as u32)
        }
        _ => unreachable!("one family"),
    };
    let c = pseudo.add(tep_csum::Sum::of(&p[l4..])).udp_checksum();
    p[l4 + 6..l4 + 8].copy_from_slice(&c.to_be_bytes());
    p
}

/// The pseudo-header sum of an outer IPv4/IPv6 + UDP datagram (IP at 0).
fn outer_pseudo(d: &[u8], v6: bool) -> tep_csum::Sum {
    let addr = |r: core::ops::Range<usize>| -> [u8; 16] {
        let mut a = [0u8; 16];
        a[..r.len()].copy_from_slice(&d[r]);
        a
    };
    if v6 {
        tep_csum::pseudo_header_v6(&addr(8..24), &addr(24..40), 17, (d.len() - 40) as u32)
    } else {
        let (s, t) = (addr(12..16), addr(16..20));
        let four = |a: [u8; 16]| [a[0], a[1], a[2], a[3]];
        tep_csum::pseudo_header_v4(four(s), four(t), 17, (d.len() - 20) as u16)
    }
}

fn ue(i: u32) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 0, 0, 0)) + i))
}

/// The inner packet a server sends UE `i` (downlink), or the UE sends
/// (uplink), `size` bytes in all.
fn inner(i: u32, up: bool, size: usize) -> Vec<u8> {
    let server = IpAddr::V4(Ipv4Addr::new(198, 51, 100, 1));
    let payload = vec![0x5a; size - 28];
    if up {
        udp_packet(ue(i), server, &payload)
    } else {
        udp_packet(server, ue(i), &payload)
    }
}

/// The G-PDU UE `i`'s gNB sends N3: TEID and QFI container.
fn gpdu(i: u32, v6: bool, size: usize) -> Vec<u8> {
    let mut r = GtpuRepr::gpdu(0x10000 + i);
    let _ = r
        .extensions
        .push(Extension::PduSessionContainer(PduSessionContainer::ul(9)));
    let t = inner(i, true, size);
    let n = r.buffer_len();
    let mut g = vec![0u8; n + t.len()];
    r.emit(&mut g[..n], t.len());
    g[n..].copy_from_slice(&t);
    let (n3, gnb) = if v6 {
        (IpAddr::V6(example::A6), IpAddr::V6(example::B6))
    } else {
        (IpAddr::V4(example::A4), IpAddr::V4(example::B4))
    };
    udp_packet(gnb, n3, &g)
}

/// A session AMBR no benchmark reaches (1 Tbit/s each way: within what
/// the buckets resolve, so that every packet is metered).
const MBR_NEVER_REACHED: u64 = 1_000_000_000_000;

/// Session `i` with `filters` PDRs each way, one SDF filter each (UDP to
/// a port of the UE's), the one the benchmark's packets match (port 2152)
/// last; as [`example::session`] with 0; metered both ways with `mbr`.
fn session(
    i: u32,
    v6: bool,
    filters: usize,
    mbr: bool,
) -> tep_dataplane::session::control::SessionSpec {
    use tep_dataplane::session::rules::{FlowMatch, RuleSpec};
    let mut spec = example::session(i, v6, false);
    if mbr {
        spec.mbr.uplink = Some(MBR_NEVER_REACHED);
        spec.mbr.downlink = Some(MBR_NEVER_REACHED);
    }
    let rule = |k: usize| RuleSpec {
        filters: vec![FlowMatch {
            protocol: Some(17),
            ue_ports: vec![if k + 1 == filters {
                (2152, 2152)
            } else {
                (1000 + k as u16, 1000 + k as u16)
            }],
            ..Default::default()
        }],
        qfi_match: None,
        action: tep_dataplane::session::Action::Forward,
        peer: spec.peer,
        qfi: spec.qfi,
        mbr: None,
    };
    let rules: Vec<RuleSpec> = (0..filters).map(rule).collect();
    // Uplink to N6: an uplink rule's peer would be a UPF on N9.
    spec.rules.uplink = rules
        .iter()
        .map(|r| RuleSpec {
            peer: None,
            qfi: None,
            ..r.clone()
        })
        .collect();
    spec.rules.downlink = rules;
    spec
}

impl Upf {
    fn new(
        n: u32,
        (filters, mbr): (usize, bool),
        v6: bool,
        mode: ChecksumMode,
    ) -> Result<Upf, String> {
        let config = example::upf(v6, mode);
        let (mut control, links) = Sessions::new(n.max(1), 1, vec![v6]);
        let mut pipeline = Pipeline::new(
            &config,
            &DataplaneConfig::default(),
            Tsc,
            PipelineOptions::default(),
        );
        pipeline.attach_sessions(links[0].clone(), 16, 4096);
        let mut pool = Pool::new(1024, 2048);
        let mut sink = |_: tep_dataplane::Output, pool: &mut Pool, v: &mut PacketVector| {
            for &id in v.as_slice() {
                pool.free(id);
            }
            v.clear();
        };
        for i in 0..n {
            control
                .create(&session(i, v6, filters, mbr))
                .map_err(|e| format!("session {i}: {e}"))?;
            if i % 65536 == 65535 {
                control.publish();
                pipeline.apply_session_changes(&mut pool, &mut sink);
            }
        }
        control.publish();
        pipeline.apply_session_changes(&mut pool, &mut sink);
        let bytes_per_session = pipeline.sessions().map_or(0.0, |s| s.bytes_per_session());
        Ok(Upf {
            sessions: n,
            filters,
            mbr,
            pipeline,
            pool,
            bytes_per_session,
            rng: 0x5eed ^ u64::from(n),
        })
    }

    /// One vector of 256 packets each way to random sessions; ns per
    /// packet (downlink, uplink).
    fn sample(
        &mut self,
        down: &[u8],
        up: &[u8],
        v6: bool,
        burst: usize,
    ) -> Result<(f64, f64), String> {
        let n = u64::from(self.sessions);
        let mut picks = [0u32; VECTOR_SIZE];
        for run in picks.chunks_mut(burst.max(1)) {
            let s = (next(&mut self.rng) % n) as u32;
            run.fill(s);
        }
        let times = |what: &str, out: usize| {
            if out == VECTOR_SIZE {
                Ok(())
            } else {
                Err(format!("{what}: {out} of {VECTOR_SIZE} packets came out"))
            }
        };
        // Downlink: the template with each pick's UE address (and the IP
        // checksum adjusted by the changed words).
        let mut v = PacketVector::new();
        for &i in &picks {
            let id = self.pool.alloc().ok_or("pool")?;
            self.pool.fill(id, down);
            let d = self.pool.data_mut(id);
            let ue = u32::from(Ipv4Addr::new(10, 0, 0, 0)) + i;
            d[16..20].copy_from_slice(&ue.to_be_bytes());
            d[10..12].copy_from_slice(&[0, 0]);
            let c = tep_csum::Sum::of(&d[..20]).checksum();
            d[10..12].copy_from_slice(&c.to_be_bytes());
            v.put(&mut self.pool, id);
        }
        let mut out = 0;
        let t = Instant::now();
        self.pipeline
            .encap(&mut self.pool, &mut v, &mut counting_sink(&mut out));
        let dl = t.elapsed().as_nanos() as f64 / VECTOR_SIZE as f64;
        times("downlink", out)?;
        // Uplink: the template with each pick's TEID, UDP checksum redone.
        let l4 = if v6 { 40 } else { 20 };
        let mut v = PacketVector::new();
        for &i in &picks {
            let id = self.pool.alloc().ok_or("pool")?;
            self.pool.fill(id, up);
            let d = self.pool.data_mut(id);
            d[l4 + 8 + 4..l4 + 8 + 8].copy_from_slice(&(0x10000 + i).to_be_bytes());
            // Inner source address: the UE's (not in the UDP checksum's
            // pseudo-header, but in its payload).
            let inner = l4 + 8 + 16;
            d[inner + 12..inner + 16]
                .copy_from_slice(&(u32::from(Ipv4Addr::new(10, 0, 0, 0)) + i).to_be_bytes());
            d[inner + 10..inner + 12].copy_from_slice(&[0, 0]);
            let c = tep_csum::Sum::of(&d[inner..inner + 20]).checksum();
            d[inner + 10..inner + 12].copy_from_slice(&c.to_be_bytes());
            d[l4 + 6..l4 + 8].copy_from_slice(&[0, 0]);
            let s = outer_pseudo(d, v6);
            let c = s.add(tep_csum::Sum::of(&d[l4..])).udp_checksum();
            d[l4 + 6..l4 + 8].copy_from_slice(&c.to_be_bytes());
            v.put(&mut self.pool, id);
        }
        let mut out = 0;
        let t = Instant::now();
        self.pipeline
            .decap(&mut self.pool, &mut v, 0, &mut counting_sink(&mut out));
        let ul = t.elapsed().as_nanos() as f64 / VECTOR_SIZE as f64;
        times("uplink", out)?;
        Ok((dl, ul))
    }
}

/// Measures each count in `counts` with each of `filters` (SDF filters per
/// session), without MBR and, with `mbr`, with, over each family,
/// `samples` vectors each way per count, counts interleaved; `size` is
/// the inner length.
pub fn run(
    (counts, filters, mbr): (&[u32], &[usize], bool),
    families: &[bool],
    mode: ChecksumMode,
    size: usize,
    burst: usize,
    samples: usize,
    mut progress: impl FnMut(&str),
) -> Result<Vec<SessionRow>, String> {
    let mut rows = Vec::new();
    for &v6 in families {
        let family = if v6 { "ipv6" } else { "ipv4" };
        let meters: &[bool] = if mbr { &[false, true] } else { &[false] };
        let mut upfs = Vec::new();
        for &n in counts {
            for &f in filters {
                for &m in meters {
                    let on = if m { ", MBR" } else { "" };
                    progress(&format!(
                        "installing {n} sessions, {f} filters{on} ({family})"
                    ));
                    upfs.push(Upf::new(n, (f, m), v6, mode)?);
                }
            }
        }
        let down = inner(0, false, size);
        let up = gpdu(0, v6, size);
        let mut dl = vec![Vec::new(); upfs.len()];
        let mut ul = vec![Vec::new(); upfs.len()];
        progress(&format!("sampling {family}"));
        // A warm-up round, then the samples, the UPFs in turn: forwards
        // one round, backwards the next, so that none is always sampled
        // after the same other.
        for round in 0..samples + 1 {
            let n = upfs.len();
            for i in 0..n {
                let k = if round % 2 == 0 { i } else { n - 1 - i };
                let (d, uu) = upfs[k].sample(&down, &up, v6, burst)?;
                if round > 0 {
                    dl[k].push(d);
                    ul[k].push(uu);
                }
            }
        }
        if std::env::var_os("TEP_NODE_REPORT").is_some() {
            for u in &upfs {
                eprintln!(
                    "== {} sessions\n{}",
                    u.sessions,
                    u.pipeline.runtime().report()
                );
            }
        }
        let base_dl = median(&mut dl[0].clone());
        let base_ul = median(&mut ul[0].clone());
        // Each count's first filter count (0 unless told otherwise) is
        // what its others are measured against, MBR on beside on; a
        // metered row beside the same one unmetered.
        let (m, group) = (meters.len(), filters.len() * meters.len());
        let med = |k: usize, s: &[Vec<f64>]| median(&mut s[k].clone());
        let unfiltered = |k: usize| k - k % group + k % m;
        let plain: Vec<(f64, f64)> = (0..upfs.len())
            .map(|k| (med(unfiltered(k), &dl), med(unfiltered(k), &ul)))
            .collect();
        let unmetered: Vec<(f64, f64)> = (0..upfs.len())
            .map(|k| (med(k - k % m, &dl), med(k - k % m, &ul)))
            .collect();
        for (k, u) in upfs.iter().enumerate() {
            let footprint = (u.bytes_per_session * f64::from(u.sessions)) as usize;
            let mut rng = 0x11e5 ^ u64::from(u.sessions);
            let line = random_line_ns(footprint, &mut rng);
            let clocks = |name: &str| {
                u.pipeline
                    .runtime()
                    .nodes()
                    .iter()
                    .find(|n| n.name == name)
                    .map_or(0.0, |n| n.ticks_per_packet())
            };
            for (direction, samples, base, (plain, unmetered), node) in [
                (
                    "downlink",
                    &mut dl[k],
                    base_dl,
                    (plain[k].0, unmetered[k].0),
                    "session-lookup",
                ),
                (
                    "uplink",
                    &mut ul[k],
                    base_ul,
                    (plain[k].1, unmetered[k].1),
                    "gtpu-decap",
                ),
            ] {
                let ns = median(samples);
                rows.push(SessionRow {
                    sessions: u.sessions,
                    direction,
                    family,
                    checksum: mode.name(),
                    size,
                    burst,
                    filters: u.filters,
                    mbr: u.mbr,
                    ns_per_packet: ns,
                    speed_vs_one: base / ns,
                    vs_no_filter: ns / plain,
                    vs_mbr_off: ns / unmetered,
                    bytes_per_session: u.bytes_per_session,
                    lookup_clocks: clocks(node),
                    random_line_ns: line,
                });
            }
        }
    }
    Ok(rows)
}

/// The rows as a table.
pub fn render(rows: &[SessionRow]) -> String {
    let mut s = String::from(
        "GTP-U through a UPF's sessions: random sessions, medians\n\
         sessions  burst  filters  mbr  direction  family  ns/packet  speed vs 1 session  vs no filter  vs mbr off  bytes/session  lookup clocks  line ns\n",
    );
    for r in rows {
        s += &format!(
            "{:>9}  {:>5}  {:>7}  {:<3}  {:<9}  {:<6}  {:>9.1}  {:>18.2}  {:>12.2}  {:>10.2}  {:>13.1}  {:>13.1}  {:>7.1}\n",
            r.sessions,
            r.burst,
            r.filters,
            if r.mbr { "on" } else { "off" },
            r.direction,
            r.family,
            r.ns_per_packet,
            r.speed_vs_one,
            r.vs_no_filter,
            r.vs_mbr_off,
            r.bytes_per_session,
            r.lookup_clocks,
            r.random_line_ns
        );
    }
    s += "lookup clocks: TSC clocks per packet of session-lookup (downlink) or gtpu-decap (uplink).\n\
          line ns: one random cache line over as many bytes as the count's tables, 32 in flight:\n\
          the machine's floor for a session's memory; a packet's session costs two lines (its map\n\
          entry, its slot's line of rules and counters), once per burst.\n\
          filters: SDF filters per session each way, the packets matching the last; vs no filter:\n\
          ns per packet over the same count's without filters (a cost: 1.3 is 30 % more).\n\
          mbr on: every session metered both ways at a rate it never reaches; vs mbr off: ns per\n\
          packet over the same row's unmetered.\n";
    s
}

/// A sink that counts what the pipeline hands out and frees it at once.
pub(crate) fn counting_sink(
    out: &mut usize,
) -> impl FnMut(tep_dataplane::Output, &mut Pool, &mut PacketVector) + '_ {
    |_, pool, v| {
        *out += v.len();
        for &id in v.as_slice() {
            pool.free(id);
        }
        v.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_count_moves_every_packet_both_ways() {
        let rows = run(
            (&[1, 300], &[0], false),
            &[false, true],
            ChecksumMode::Full,
            300,
            4,
            2,
            |_| {},
        )
        .unwrap();
        assert_eq!(rows.len(), 2 * 2 * 2);
        for r in &rows {
            assert!(r.ns_per_packet > 0.0, "{r:?}");
            assert!(r.bytes_per_session > 0.0, "{r:?}");
        }
        assert!(rows
            .iter()
            .filter(|r| r.sessions == 1)
            .all(|r| (r.speed_vs_one - 1.0).abs() < 1e-9));
    }

    /// With filters every packet still comes out (the last rule takes
    /// it: a miss would be a drop, and `sample` an error).
    #[test]
    fn filtered_sessions_move_every_packet() {
        let rows = run(
            (&[300], &[0, 4, 16], false),
            &[false],
            ChecksumMode::Full,
            300,
            4,
            2,
            |_| {},
        )
        .unwrap();
        assert_eq!(rows.len(), 3 * 2);
        let filters: Vec<usize> = rows.iter().map(|r| r.filters).collect();
        assert_eq!(filters, [0, 0, 4, 4, 16, 16]);
        assert!(rows[..2]
            .iter()
            .all(|r| (r.vs_no_filter - 1.0).abs() < 1e-9));
    }

    /// Metered rows beside unmetered ones, every packet through (an MBR
    /// that dropped one would fail `sample`).
    #[test]
    fn metered_sessions_move_every_packet() {
        let rows = run(
            (&[300], &[0, 4], true),
            &[false],
            ChecksumMode::Full,
            300,
            4,
            2,
            |_| {},
        )
        .unwrap();
        let seen: Vec<(usize, bool)> = rows.iter().map(|r| (r.filters, r.mbr)).collect();
        assert_eq!(
            seen,
            [
                (0, false),
                (0, false),
                (0, true),
                (0, true),
                (4, false),
                (4, false),
                (4, true),
                (4, true)
            ]
        );
        for r in rows.iter().filter(|r| !r.mbr) {
            assert!((r.vs_mbr_off - 1.0).abs() < 1e-9, "{r:?}");
        }
        // A metered row's no-filter base is the metered 0-filter row.
        let base = rows[2].ns_per_packet;
        assert!((rows[6].vs_no_filter - rows[6].ns_per_packet / base).abs() < 1e-9);
    }
}
