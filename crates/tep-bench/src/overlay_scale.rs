//! `tep-bench pipeline --overlay`: what a network's tables cost per
//! packet at data-center scale, beside a point-to-point VXLAN tunnel
//! measured in the same run, and what flooding costs per copy.
//!
//! - FDB scale: `macs` MACs over `vteps` remote VTEPs and `networks`
//!   networks (VXLAN, one VNI each) learned into one overlay; each
//!   vector's 256 frames go to random (network, MAC) pairs in runs of
//!   `burst` (encap: the FDB lookup of the destination; decap: the
//!   frame from the MAC's VTEP, its source learned, i.e. found fresh).
//!   The tunnel does the same frames with its one peer. Also the FDB's
//!   bytes per entry.
//! - Flooding: a broadcast frame in a network of N remote VTEPs (1, 10,
//!   100): ns per copy on the wire against one unicast encapsulation of
//!   the same frame, `full` checksums (each copy derives its checksum
//!   from the first: RFC 1624).

use crate::sessions::{counting_sink, next, udp_packet};
use crate::timing::median;
use serde::Serialize;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Instant;
use tep_dataplane::config::{ChecksumMode, DataplaneConfig, NetworkSettings, TunnelConfig};
use tep_dataplane::overlay::fdb::{Dst, Entry, FdbKey, Origin};
use tep_dataplane::overlay::Overlay;
use tep_dataplane::{
    InnerLink, PacketVector, Pipeline, PipelineOptions, Pool, Tsc, TunnelKind, VECTOR_SIZE,
};

/// One FDB-scale measurement.
#[derive(Debug, Clone, Serialize)]
pub struct ScaleRow {
    pub direction: &'static str,
    pub macs: u32,
    pub vteps: u32,
    pub networks: u32,
    pub burst: usize,
    pub size: usize,
    pub tunnel_ns: f64,
    /// One network with one MAC behind one VTEP: the same path at the
    /// smallest scale.
    pub one_mac_ns: f64,
    pub network_ns: f64,
    /// The tunnel's ns over the network's: 1.0 as fast, 0.8 20 % slower.
    pub speed_vs_tunnel: f64,
    /// The one-MAC network's ns over the network's: what scale costs.
    pub speed_vs_one_mac: f64,
    pub fdb_bytes_per_entry: f64,
}

/// One flooding measurement.
#[derive(Debug, Clone, Serialize)]
pub struct FloodRow {
    pub peers: usize,
    pub size: usize,
    pub unicast_ns: f64,
    pub ns_per_copy: f64,
    /// ns per copy over one unicast encapsulation (target ≤ 1.2).
    pub ratio: f64,
}

const LOCAL: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const SRC_MAC: [u8; 6] = [2, 0xff, 0, 0, 0, 1];

fn mac(i: u32) -> [u8; 6] {
    let b = i.to_be_bytes();
    [2, 0, b[0], b[1], b[2], b[3]]
}

fn vtep_addr(v: u32) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 0, 0, 1)) + v)
}

/// An Ethernet frame to `dst` holding a UDP packet of `size` IP bytes.
fn frame(dst: [u8; 6], size: usize) -> Vec<u8> {
    let payload = vec![0x5a; size.saturating_sub(28)];
    let ip = udp_packet(
        IpAddr::from([10, 100, 0, 1]),
        IpAddr::from([10, 100, 0, 2]),
        &payload,
    );
    let mut f = dst.to_vec();
    f.extend_from_slice(&SRC_MAC);
    f.extend_from_slice(&[0x08, 0x00]);
    f.extend(ip);
    f
}

/// `frame` in IPv4 (from `from`), UDP (checksum 0) and VXLAN `vni`.
fn wrapped(frame: &[u8], from: Ipv4Addr, vni: u32) -> Vec<u8> {
    let total = (36 + frame.len()) as u16;
    let mut p = vec![0x45, 0, 0, 0, 0, 0, 0, 0, 64, 17, 0, 0];
    p[2..4].copy_from_slice(&total.to_be_bytes());
    p.extend_from_slice(&from.octets());
    p.extend_from_slice(&LOCAL.octets());
    let c = tep_csum::Sum::of(&p).checksum();
    p[10..12].copy_from_slice(&c.to_be_bytes());
    p.extend_from_slice(&49152u16.to_be_bytes());
    p.extend_from_slice(&4789u16.to_be_bytes());
    p.extend_from_slice(&(total - 20).to_be_bytes());
    p.extend_from_slice(&[0, 0, 0x08, 0, 0, 0]);
    p.extend_from_slice(&(vni << 8).to_be_bytes());
    p.extend_from_slice(frame);
    p
}

fn options() -> PipelineOptions {
    PipelineOptions {
        inner_link: InnerLink::Ethernet,
        ..PipelineOptions::default()
    }
}

/// The baseline: one point-to-point VXLAN tunnel (VNI 1), every MAC its.
fn tunnel(mode: ChecksumMode) -> Pipeline<Tsc> {
    let mut t = TunnelConfig::new("p2p", TunnelKind::Vxlan, LOCAL.into(), vtep_addr(0).into());
    t.vni = 1;
    t.checksum = mode;
    Pipeline::new(&[t], &DataplaneConfig::default(), Tsc, options())
}

/// `networks` networks (VNI k + 1), one overlay holding `macs` learned
/// MACs behind `vteps` VTEPs.
fn networks(
    macs: u32,
    vteps: u32,
    networks: u32,
    flood: &[IpAddr],
    mode: ChecksumMode,
) -> Result<(Pipeline<Tsc>, Arc<Overlay>), String> {
    let per = macs / networks.max(1) + 16;
    let tunnels: Vec<TunnelConfig> = (0..networks)
        .map(|k| {
            let s = NetworkSettings {
                flood: flood.to_vec(),
                max_macs: per,
                ..NetworkSettings::default()
            };
            let mut t = TunnelConfig::network(&format!("n{k}"), TunnelKind::Vxlan, LOCAL.into(), s);
            t.vni = k + 1;
            t.checksum = mode;
            t
        })
        .collect();
    let overlay = Arc::new(
        Overlay::new(
            &tunnels,
            macs as usize + 1024,
            vteps.max(flood.len() as u32) + 16,
        )
        .map_err(|e| e.to_string())?,
    );
    // As the daemon does: huge pages for the FDB where the kernel has them.
    let ids: Vec<u32> = (0..vteps)
        .map(|v| overlay.vtep_id(vtep_addr(v).into()).ok_or("VTEP ids"))
        .collect::<Result<_, _>>()?;
    let now = overlay.now_s();
    for i in 0..macs {
        let entry = Entry {
            dst: Dst::Remote(ids[(i % vteps) as usize]),
            origin: Origin::Learned,
            seen_s: now,
        };
        let key = FdbKey::new((i % networks) as u16, mac(i));
        overlay
            .fdb()
            .insert(key, entry)
            .map_err(|_| format!("FDB full at {i}"))?;
    }
    let mut p = Pipeline::new(&tunnels, &DataplaneConfig::default(), Tsc, options());
    p.attach_overlay(overlay.clone());
    Ok((p, overlay))
}

/// Loads a vector of `template` with each pick's fields patched in
/// place in its buffer (`patch` returns the packet's tunnel), as a NIC or
/// a socket would have written it there, and runs it through encap or
/// decap; ns for the call, packets out.
fn run(
    p: &mut Pipeline<Tsc>,
    pool: &mut Pool,
    encap: bool,
    template: &[u8],
    picks: &[u32],
    patch: impl Fn(&mut [u8], u32) -> u32,
) -> Result<(f64, usize), String> {
    let mut v = PacketVector::new();
    for &i in picks {
        let id = pool.alloc().ok_or("pool")?;
        pool.fill(id, template);
        let t = patch(pool.data_mut(id), i);
        pool.meta_mut(id).tunnel = t;
        v.put(pool, id);
    }
    let mut out = 0;
    let t = Instant::now();
    if encap {
        p.encap(pool, &mut v, &mut counting_sink(&mut out));
    } else {
        p.decap(pool, &mut v, 0, &mut counting_sink(&mut out));
    }
    Ok((t.elapsed().as_nanos() as f64, out))
}

/// Writes `from` as the outer source and `vni` into a [`wrapped`] frame
/// (the IPv4 header checksum redone), and `src` as the inner source MAC.
fn patch_outer(d: &mut [u8], from: Ipv4Addr, vni: u32, src: [u8; 6]) {
    d[12..16].copy_from_slice(&from.octets());
    d[10..12].copy_from_slice(&[0, 0]);
    let c = tep_csum::Sum::of(&d[..20]).checksum();
    d[10..12].copy_from_slice(&c.to_be_bytes());
    d[32..36].copy_from_slice(&(vni << 8).to_be_bytes());
    d[36 + 6..36 + 12].copy_from_slice(&src);
}

fn whole(what: &str, out: usize, want: usize) -> Result<(), String> {
    if out == want {
        Ok(())
    } else {
        Err(format!("{what}: {out} of {want} packets came out"))
    }
}

/// Each node's clocks a packet, per round (a round runs each of a
/// pipeline's directions once), for medians: a worker preempted by the
/// others on a shared machine would swell a mean.
struct NodeClocks {
    last: Vec<(u64, u64)>,
    per_round: Vec<Vec<f64>>,
}

impl NodeClocks {
    // Not inlined: a mark where the measured rounds start, for a profiler
    // to cut its counts at (callgrind's `--dump-before`).
    #[inline(never)]
    fn new(p: &Pipeline<Tsc>) -> NodeClocks {
        let n = p.runtime().nodes();
        NodeClocks {
            last: n.iter().map(|n| (n.ticks, n.packets)).collect(),
            per_round: vec![Vec::new(); n.len()],
        }
    }

    fn sample(&mut self, p: &Pipeline<Tsc>, keep: bool) {
        for ((n, last), per) in p
            .runtime()
            .nodes()
            .iter()
            .zip(&mut self.last)
            .zip(&mut self.per_round)
        {
            if keep && n.packets > last.1 {
                per.push((n.ticks - last.0) as f64 / (n.packets - last.1) as f64);
            }
            *last = (n.ticks, n.packets);
        }
    }

    /// Medians per node: tunnel, one-MAC network and networks side by side.
    fn render(all: &mut [NodeClocks; 3], p: &Pipeline<Tsc>, burst: usize, size: usize) -> String {
        let mut s = format!(
            "== clocks/packet by node, medians of rounds, burst {burst}, {size} bytes\n\
             {:<24}{:>9}{:>9}{:>10}\n",
            "node", "tunnel", "1-MAC", "networks"
        );
        for (i, n) in p.runtime().nodes().iter().enumerate() {
            let cells = all.each_mut().map(|c| match c.per_round[i].is_empty() {
                true => "-".to_string(),
                false => format!("{:.1}", median(&mut c.per_round[i])),
            });
            if cells.iter().any(|c| c != "-") {
                s += &format!(
                    "{:<24}{:>9}{:>9}{:>10}\n",
                    n.name, cells[0], cells[1], cells[2]
                );
            }
        }
        s
    }
}

/// The FDB-scale rows: encap and decap, tunnel beside networks.
pub fn scale(
    macs: u32,
    vteps: u32,
    nets: u32,
    burst: usize,
    size: usize,
    samples: usize,
) -> Result<Vec<ScaleRow>, String> {
    let mode = ChecksumMode::Full;
    let mut base = tunnel(mode);
    let (mut net, overlay) = networks(macs, vteps, nets, &[], mode)?;
    let (mut one, one_overlay) = networks(1, 1, 1, &[], mode)?;
    let one_tunnel = one_overlay.networks()[0].tunnel;
    let mut pool = Pool::new(1024, 2048);
    let mut rng = 0x0f0d_u64 ^ u64::from(macs);
    let mut ns: [[Vec<f64>; 3]; 2] = Default::default();
    let tunnel_index = |k: u32| overlay.networks()[k as usize].tunnel;
    let to = frame(SRC_MAC, size);
    let from = wrapped(&frame(SRC_MAC, size), vtep_addr(0), 1);
    let no_tunnel = tep_dataplane::NO_TUNNEL;
    let to_net = |d: &mut [u8], i: u32| {
        d[..6].copy_from_slice(&mac(i));
        tunnel_index(i % nets)
    };
    let to_tunnel = |d: &mut [u8], i: u32| {
        d[..6].copy_from_slice(&mac(i));
        no_tunnel
    };
    let from_net = |d: &mut [u8], i: u32| {
        patch_outer(d, vtep_addr(i % vteps), i % nets + 1, mac(i));
        no_tunnel
    };
    let from_tunnel = |d: &mut [u8], i: u32| {
        patch_outer(d, vtep_addr(0), 1, mac(i));
        no_tunnel
    };
    let to_one = |d: &mut [u8], _: u32| {
        d[..6].copy_from_slice(&mac(0));
        one_tunnel
    };
    let from_one = |d: &mut [u8], _: u32| {
        patch_outer(d, vtep_addr(0), 1, mac(0));
        no_tunnel
    };
    // Steady state first: the worker has met every VTEP (its cache of
    // VTEP ids; the first frame from a VTEP asks the registry) and every
    // network's local MAC (learned once, found fresh after).
    let all: Vec<u32> = (0..vteps.max(nets)).map(|i| i % macs).collect();
    for picks in all.chunks(VECTOR_SIZE) {
        run(&mut net, &mut pool, false, &from, picks, from_net)?;
        run(&mut net, &mut pool, true, &to, picks, to_net)?;
    }
    run(&mut one, &mut pool, false, &from, &[0], from_one)?;
    run(&mut one, &mut pool, true, &to, &[0], to_one)?;
    let mut clocks = [&base, &one, &net].map(NodeClocks::new);
    for round in 0..=samples {
        let mut picks = [0u32; VECTOR_SIZE];
        for run in picks.chunks_mut(burst.max(1)) {
            run.fill((next(&mut rng) % u64::from(macs)) as u32);
        }
        let runs = [
            (
                run(&mut base, &mut pool, true, &to, &picks, to_tunnel)?,
                0,
                0,
            ),
            (run(&mut net, &mut pool, true, &to, &picks, to_net)?, 0, 2),
            (run(&mut one, &mut pool, true, &to, &picks, to_one)?, 0, 1),
            (
                run(&mut base, &mut pool, false, &from, &picks, from_tunnel)?,
                1,
                0,
            ),
            (
                run(&mut net, &mut pool, false, &from, &picks, from_net)?,
                1,
                2,
            ),
            (
                run(&mut one, &mut pool, false, &from, &picks, from_one)?,
                1,
                1,
            ),
        ];
        for ((t, out), dir, which) in runs {
            whole(["encap", "decap"][dir], out, VECTOR_SIZE)?;
            if round > 0 {
                ns[dir][which].push(t / VECTOR_SIZE as f64);
            }
        }
        for (c, p) in clocks.iter_mut().zip([&base, &one, &net]) {
            c.sample(p, round > 0);
        }
    }
    if std::env::var_os("TEP_NODE_REPORT").is_some() {
        eprint!("{}", NodeClocks::render(&mut clocks, &net, burst, size));
    }
    let per_entry = overlay.fdb().bytes() as f64 / f64::from(macs.max(1));
    Ok(["encap", "decap"]
        .iter()
        .enumerate()
        .map(|(d, &direction)| {
            let [t, o, n] = &mut ns[d];
            let (t, o, n) = (median(t), median(o), median(n));
            ScaleRow {
                direction,
                macs,
                vteps,
                networks: nets,
                burst,
                size,
                tunnel_ns: t,
                one_mac_ns: o,
                network_ns: n,
                speed_vs_tunnel: t / n,
                speed_vs_one_mac: o / n,
                fdb_bytes_per_entry: per_entry,
            }
        })
        .collect())
}

/// The flooding rows: a broadcast to each count of peers, beside unicast.
pub fn flooding(peers: &[usize], size: usize, samples: usize) -> Result<Vec<FloodRow>, String> {
    let mode = ChecksumMode::Full;
    let mut rows = Vec::new();
    let mut pool = Pool::new(1024, 2048);
    for &n in peers {
        let list: Vec<IpAddr> = (0..n as u32).map(|v| vtep_addr(v).into()).collect();
        let (mut p, overlay) = networks(1, n as u32, 1, &list, mode)?;
        let t0 = overlay.networks()[0].tunnel;
        // About a vector of copies per call.
        let per_vector = (VECTOR_SIZE / n.max(1)).max(1);
        let (broadcast, unicast) = (frame([0xff; 6], size), frame(mac(0), size));
        let (few, all) = (vec![0; per_vector], vec![0; VECTOR_SIZE]);
        let (mut b, mut u) = (Vec::new(), Vec::new());
        for round in 0..=samples {
            let (tb, ob) = run(&mut p, &mut pool, true, &broadcast, &few, |_, _| t0)?;
            whole("flood", ob, per_vector * n)?;
            let (tu, ou) = run(&mut p, &mut pool, true, &unicast, &all, |_, _| t0)?;
            whole("unicast", ou, VECTOR_SIZE)?;
            if round > 0 {
                b.push(tb / (per_vector * n) as f64);
                u.push(tu / VECTOR_SIZE as f64);
            }
        }
        let (per_copy, one) = (median(&mut b), median(&mut u));
        rows.push(FloodRow {
            peers: n,
            size,
            unicast_ns: one,
            ns_per_copy: per_copy,
            ratio: per_copy / one,
        });
    }
    Ok(rows)
}

/// Both tables as text.
pub fn render(scale: &[ScaleRow], flood: &[FloodRow]) -> String {
    let mut s = String::from(
        "Networks at scale beside one point-to-point VXLAN tunnel and one network of one MAC\n\
         (full checksums), medians; speed: their ns over the networks'\n\
         direction     MACs   VTEPs  networks  burst  size  tunnel ns  1-MAC ns  network ns  vs tunnel  vs 1 MAC  FDB B/entry\n",
    );
    for r in scale {
        s += &format!(
            "{:<9} {:>8} {:>7} {:>9} {:>6} {:>5} {:>10.1} {:>9.1} {:>11.1} {:>10.2} {:>9.2} {:>12.1}\n",
            r.direction,
            r.macs,
            r.vteps,
            r.networks,
            r.burst,
            r.size,
            r.tunnel_ns,
            r.one_mac_ns,
            r.network_ns,
            r.speed_vs_tunnel,
            r.speed_vs_one_mac,
            r.fdb_bytes_per_entry
        );
    }
    s += "\nFlooding a broadcast frame (full checksums): ns per copy against one unicast encapsulation\n\
          peers  size  unicast ns  ns/copy  ratio\n";
    for r in flood {
        s += &format!(
            "{:>5} {:>5} {:>11.1} {:>8.1} {:>6.2}\n",
            r.peers, r.size, r.unicast_ns, r.ns_per_copy, r.ratio
        );
    }
    s
}
