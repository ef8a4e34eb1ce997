//! `tep pcap encap|decap`: the dataplane pipeline over a capture file.
//!
//! Frames are read in order, put in vectors of up to 256
//! packets and given to the same [`Pipeline`] the host mode runs; what comes
//! out is written to a pcap file with each packet's input time stamp. The
//! pipeline's `show runtime` counters, edge counters and drops are the
//! report.

use crate::{read_frames, CaptureError, Frame, Link};
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::{DataLink, Endianness, TsResolution};
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tep_config::{Config, ConfigError};
pub use tep_dataplane::Direction;
use tep_dataplane::{
    ethernet_ip_offset, finish_offloaded, ChecksumState, Counters, DropCounts, DropReason,
    InnerLink, Output, PacketVector, Pipeline, PipelineOptions, Pool, Tsc, SUPER_PACKET_ROOM,
};

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    pub direction: Direction,
    pub config: PathBuf,
    pub input: PathBuf,
    pub output: PathBuf,
    /// Decap: where GTP-U Echo Responses and Error Indications go.
    pub replies: Option<PathBuf>,
    /// `PipelineOptions::gro`.
    pub gro: bool,
    /// Decap: mark every outer checksum verified before the pipeline sees
    /// it, as a veth peer or a NIC with receive offload does.
    pub trust_checksums: bool,
}

/// Why a run failed.
#[derive(Debug)]
pub enum PcapError {
    /// The config did not load (the error names the field).
    Config(ConfigError),
    /// The input capture could not be read.
    Capture(CaptureError),
    /// An output file could not be created or written.
    Output(PathBuf, String),
}

impl std::fmt::Display for PcapError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PcapError::Config(e) => write!(f, "config: {e}"),
            PcapError::Capture(e) => write!(f, "{e}"),
            PcapError::Output(p, e) => write!(f, "{}: {e}", p.display()),
        }
    }
}

/// Vectors are closed after this much capture time, so that `now_ns`
/// (which paces GTP-U Error Indications) is never far from a packet's own
/// time: a worker polls far more often than this.
const VECTOR_SPAN: Duration = Duration::from_millis(1);

/// Buffers in the pool: a vector in flight, its replies, and room to spare.
/// The arena is allocated zeroed, so untouched buffers cost no memory.
const POOL_BUFFERS: usize = 1024;

/// The synthetic Ethernet header put on IP packets written to an Ethernet
/// capture (decap of a config with L2 and L3 tunnels).
const SYNTH_DST: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
const SYNTH_SRC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];

/// The pcap-input pseudo node's name: frames never given to the pipeline.
const INPUT_NODE: &str = "pcap-input";

/// One node's line of the report.
#[derive(Debug, Clone)]
pub struct NodeReport {
    pub name: &'static str,
    pub calls: u64,
    pub vectors: u64,
    pub packets: u64,
    pub clocks_per_packet: f64,
    pub drops: Vec<(DropReason, u64)>,
}

/// What a run did.
#[derive(Debug, Clone)]
pub struct Report {
    pub direction: Direction,
    /// `show runtime`, as the pipeline prints it.
    pub runtime: String,
    pub nodes: Vec<NodeReport>,
    pub counters: Counters,
    /// Frames not given to the pipeline, by reason.
    pub skipped: Vec<(DropReason, u64)>,
    /// Frames read.
    pub frames: u64,
    /// Frames the capture's snap length cut (they drop in the pipeline).
    pub snap_cut: u64,
    /// Packets written to OUT.
    pub out: u64,
    /// Replies the pipeline produced (written to --replies, or discarded).
    pub replies: u64,
    /// Whether the replies were written.
    pub replies_written: bool,
    /// The inner link the pipeline ran with.
    pub inner_link: InnerLink,
    /// OUT's link type.
    pub out_link: DataLink,
    /// IP packets given a synthetic Ethernet header in OUT.
    pub wrapped: u64,
}

impl Report {
    /// Every packet dropped: by the pipeline's nodes and at the input.
    pub fn dropped(&self) -> u64 {
        let nodes: u64 = self
            .nodes
            .iter()
            .flat_map(|n| n.drops.iter().map(|d| d.1))
            .sum();
        nodes + self.skipped.iter().map(|d| d.1).sum::<u64>()
    }

    /// (node, reason, count) for every non-zero drop counter.
    pub fn drops(&self) -> Vec<(&'static str, DropReason, u64)> {
        let mut v: Vec<_> = self
            .skipped
            .iter()
            .map(|&(r, n)| (INPUT_NODE, r, n))
            .collect();
        for n in &self.nodes {
            v.extend(n.drops.iter().map(|&(r, c)| (n.name, r, c)));
        }
        v
    }

    /// The summary line.
    pub fn summary(&self) -> String {
        format!(
            "in {}, out {}, replies {}, dropped {}",
            self.frames,
            self.out,
            self.replies,
            self.dropped()
        )
    }

    /// The text report.
    pub fn text(&self) -> String {
        let mut s = String::new();
        s += &self.runtime;
        let c = &self.counters;
        let _ = writeln!(s);
        let _ = writeln!(
            s,
            "counters: encap_in {} encap_out {} segments_added {} decap_in {} decap_out {} coalesced {} answered {} generated {}",
            c.encap_in, c.encap_out, c.segments_added, c.decap_in, c.decap_out, c.coalesced, c.answered, c.generated
        );
        let drops = self.drops();
        if !drops.is_empty() {
            let _ = writeln!(s, "drops:");
            let _ = writeln!(s, "  {:<24} {:<28} {:>10}", "node", "reason", "packets");
            for (node, r, n) in drops {
                let _ = writeln!(s, "  {:<24} {:<28} {:>10}", node, r.name(), n);
            }
        }
        if self.snap_cut > 0 {
            let _ = writeln!(
                s,
                "note: {} frames were cut by the capture's snap length; their IP or UDP length runs past the captured bytes, so they drop",
                self.snap_cut
            );
        }
        if self.wrapped > 0 {
            let _ = writeln!(
                s,
                "note: {} IP packets were written with a synthetic Ethernet header (the output also holds Ethernet frames)",
                self.wrapped
            );
        }
        if self.replies > 0 && !self.replies_written {
            let _ = writeln!(
                s,
                "note: {} replies were discarded (write them with --replies FILE)",
                self.replies
            );
        }
        let _ = writeln!(s, "{}", self.summary());
        s
    }

    /// The JSON report.
    pub fn json(&self) -> Value {
        let c = &self.counters;
        // The nodes that ran, as `show runtime` lists them.
        let nodes: Vec<Value> = self
            .nodes
            .iter()
            .filter(|n| n.calls > 0)
            .map(|n| {
                let drops: serde_json::Map<String, Value> = n
                    .drops
                    .iter()
                    .map(|&(r, c)| (r.name().to_string(), json!(c)))
                    .collect();
                json!({
                    "name": n.name,
                    "calls": n.calls,
                    "vectors": n.vectors,
                    "packets": n.packets,
                    "clocks_per_packet": n.clocks_per_packet,
                    "drops": drops,
                })
            })
            .collect();
        let drops: Vec<Value> = self
            .drops()
            .into_iter()
            .map(|(node, r, n)| json!({"node": node, "reason": r.name(), "count": n}))
            .collect();
        json!({
            "direction": self.direction.name(),
            // What encap was given (decap takes outer IP packets only).
            "inner_link": match (self.direction, self.inner_link) {
                (Direction::Decap, _) => Value::Null,
                (_, InnerLink::Ip) => json!("ip"),
                (_, InnerLink::Ethernet) => json!("ethernet"),
            },
            "output_link": if self.out_link == DataLink::ETHERNET { "ethernet" } else { "raw" },
            "nodes": nodes,
            "counters": {
                "encap_in": c.encap_in,
                "encap_out": c.encap_out,
                "segments_added": c.segments_added,
                "decap_in": c.decap_in,
                "decap_out": c.decap_out,
                "coalesced": c.coalesced,
                "answered": c.answered,
                "generated": c.generated,
            },
            "drops": drops,
            "in": self.frames,
            "out": self.out,
            "replies": self.replies,
            "dropped": self.dropped(),
            "snap_cut": self.snap_cut,
            "wrapped": self.wrapped,
        })
    }
}

/// What went wrong writing: the system's words (pcap-file says "Error
/// reading bytes" for every I/O error, writes too).
fn write_error(e: pcap_file::PcapError) -> String {
    match e {
        pcap_file::PcapError::IoError(io) => io.to_string(),
        e => e.to_string(),
    }
}

/// A pcap file being written.
struct PcapOut {
    path: PathBuf,
    writer: PcapWriter<BufWriter<File>>,
}

impl PcapOut {
    fn create(path: &Path, link: DataLink) -> Result<PcapOut, PcapError> {
        let err = |e: String| PcapError::Output(path.to_path_buf(), e);
        let file = File::create(path).map_err(|e| err(e.to_string()))?;
        let header = PcapHeader {
            // Super-packets are up to 64 KiB plus outer headers.
            snaplen: 262_144,
            datalink: link,
            ts_resolution: TsResolution::NanoSecond,
            endianness: if cfg!(target_endian = "big") {
                Endianness::Big
            } else {
                Endianness::Little
            },
            ..PcapHeader::default()
        };
        let writer = PcapWriter::with_header(BufWriter::new(file), header)
            .map_err(|e| err(write_error(e)))?;
        Ok(PcapOut {
            path: path.to_path_buf(),
            writer,
        })
    }

    fn write(&mut self, ts: Duration, data: &[u8]) -> Result<(), PcapError> {
        let p = PcapPacket::new(ts, data.len() as u32, data);
        self.writer
            .write_packet(&p)
            .map(|_| ())
            .map_err(|e| PcapError::Output(self.path.clone(), write_error(e)))
    }

    fn finish(self) -> Result<(), PcapError> {
        let path = self.path;
        self.writer
            .into_writer()
            .flush()
            .map_err(|e| PcapError::Output(path, e.to_string()))
    }
}

/// The IP packet of a frame whose link layer is not Ethernet: raw IP, Linux
/// cooked (SLL, SLL2), BSD loopback. `None` if it carries something else.
fn ip_of_non_ethernet(frame: &Frame) -> Option<&[u8]> {
    let d = &frame.data[..];
    let ip = match frame.link {
        Link::RawIp => d,
        Link::Ethernet => &d[ethernet_ip_offset(d)?..],
        // LINKTYPE_LINUX_SLL: 16 bytes, protocol at 14.
        Link::Other(113) => {
            let ty = u16::from_be_bytes([*d.get(14)?, *d.get(15)?]);
            matches!(ty, 0x0800 | 0x86dd).then_some(&d[16..])?
        }
        // LINKTYPE_LINUX_SLL2: 20 bytes, protocol at 0.
        Link::Other(276) => {
            let ty = u16::from_be_bytes([*d.first()?, *d.get(1)?]);
            matches!(ty, 0x0800 | 0x86dd).then_some(d.get(20..)?)?
        }
        // LINKTYPE_NULL / LINKTYPE_LOOP: a 4-byte address family; the IP
        // version nibble says which.
        Link::Other(0) | Link::Other(108) => d.get(4..)?,
        Link::Other(_) => return None,
    };
    match ip.first()? >> 4 {
        4 | 6 => Some(ip),
        _ => None,
    }
}

/// The state of a run between vectors.
struct Run {
    direction: Direction,
    pipeline: Option<Pipeline<Tsc>>,
    config: Config,
    options: Options,
    /// Whether each tunnel carries Ethernet (decap output framing).
    tunnel_l2: Vec<bool>,
    pool: Pool,
    vector: PacketVector,
    /// Each buffer's input time stamp, valid while `live`.
    ts: Vec<Duration>,
    /// Whether a buffer holds a packet of the vector being processed.
    live: Vec<bool>,
    vector_start: Duration,
    out: Option<PcapOut>,
    out_link: DataLink,
    replies: Option<PcapOut>,
    skipped: DropCounts,
    frames: u64,
    snap_cut: u64,
    written: u64,
    replies_seen: u64,
    wrapped: u64,
    inner_link: InnerLink,
    error: Option<PcapError>,
}

impl Run {
    fn new(options: Options, config: Config) -> Result<Run, PcapError> {
        let has_l2 = config.tunnels.iter().any(|t| t.kind.carries_ethernet());
        let direction = options.direction;
        let out_link = match direction {
            Direction::Encap => DataLink::RAW,
            Direction::Decap if has_l2 => DataLink::ETHERNET,
            Direction::Decap => DataLink::RAW,
        };
        let out = PcapOut::create(&options.output, out_link)?;
        let replies = match (&options.replies, direction) {
            (Some(p), Direction::Decap) => match PcapOut::create(p, DataLink::RAW) {
                Ok(r) => Some(r),
                Err(e) => {
                    remove_partial(&[out.path]);
                    return Err(e);
                }
            },
            _ => None,
        };
        let pool = Pool::new(POOL_BUFFERS, SUPER_PACKET_ROOM);
        Ok(Run {
            direction,
            pipeline: None,
            tunnel_l2: config
                .tunnels
                .iter()
                .map(|t| t.kind.carries_ethernet())
                .collect(),
            config,
            options,
            ts: vec![Duration::ZERO; pool.capacity()],
            live: vec![false; pool.capacity()],
            pool,
            vector: PacketVector::new(),
            vector_start: Duration::ZERO,
            out: Some(out),
            out_link,
            replies,
            skipped: DropCounts::ZERO,
            frames: 0,
            snap_cut: 0,
            written: 0,
            replies_seen: 0,
            wrapped: 0,
            inner_link: InnerLink::Ip,
            error: None,
        })
    }

    /// Builds the pipeline at the first frame: encap of an Ethernet capture
    /// with an L2 tunnel configured takes frames whole.
    fn pipeline_for(&mut self, first: Option<&Frame>) {
        if self.pipeline.is_some() {
            return;
        }
        let has_l2 = self.tunnel_l2.iter().any(|&l2| l2);
        self.inner_link = match (self.direction, first.map(|f| f.link)) {
            (Direction::Encap, Some(Link::Ethernet)) if has_l2 => InnerLink::Ethernet,
            _ => InnerLink::Ip,
        };
        self.pipeline = Some(Pipeline::new(
            &self.config.tunnels,
            &self.config.dataplane,
            Tsc,
            PipelineOptions {
                inner_link: self.inner_link,
                gro: self.options.gro,
                ..PipelineOptions::default()
            },
        ));
    }

    fn skip(&mut self, r: DropReason) {
        self.skipped[r] += 1;
    }

    fn frame(&mut self, frame: Frame) {
        self.frames += 1;
        if self.error.is_some() {
            return;
        }
        self.pipeline_for(Some(&frame));
        if frame.orig_len > frame.data.len() {
            self.snap_cut += 1;
        }
        let bytes: &[u8] = match (self.inner_link, frame.link) {
            (InnerLink::Ethernet, Link::Ethernet) => &frame.data,
            // An L2 pipeline takes Ethernet frames only.
            (InnerLink::Ethernet, _) => return self.skip(DropReason::Unsupported),
            (InnerLink::Ip, _) => match ip_of_non_ethernet(&frame) {
                Some(ip) => ip,
                None => return self.skip(DropReason::NotIp),
            },
        };
        if !self.vector.is_empty()
            && frame.timestamp.saturating_sub(self.vector_start) > VECTOR_SPAN
        {
            self.flush();
        }
        let Some(id) = self.pool.alloc() else {
            // Not reached: the pool holds several vectors' worth.
            return self.skip(DropReason::NoBuffer);
        };
        if !self.pool.fill(id, bytes) {
            self.pool.free(id);
            return self.skip(DropReason::TooBig);
        }
        if self.direction == Direction::Decap && self.options.trust_checksums {
            self.pool.meta_mut(id).csum = ChecksumState::Verified;
        }
        if self.vector.is_empty() {
            self.vector_start = frame.timestamp;
        }
        self.ts[id.index()] = frame.timestamp;
        // Not full: it is flushed when it fills.
        self.vector.put(&mut self.pool, id);
        if self.vector.is_full() {
            self.flush();
        }
    }

    /// Runs the pipeline over the vector and writes what comes out.
    fn flush(&mut self) {
        if self.vector.is_empty() {
            return;
        }
        let Run {
            direction,
            pipeline,
            tunnel_l2,
            pool,
            vector,
            ts,
            live,
            out,
            out_link,
            replies,
            written,
            replies_seen,
            wrapped,
            error,
            ..
        } = self;
        let Some(pipeline) = pipeline.as_mut() else {
            return;
        };
        let now = ts[vector.as_slice()[vector.len() - 1].index()];
        let input = vector.clone();
        for &id in input.as_slice() {
            live[id.index()] = true;
        }
        // A generated reply (a buffer not in the input) gets the time of
        // the vector's last packet.
        let stamp = |id: tep_dataplane::PacketId| {
            if live[id.index()] {
                ts[id.index()]
            } else {
                now
            }
        };
        let mut frame = Vec::new();
        let mut write = |pool: &mut Pool,
                         v: &mut PacketVector,
                         to: &mut Option<PcapOut>,
                         wrap: Option<&[bool]>| {
            for &id in v.as_slice() {
                let csum = pool.meta(id).csum;
                let tunnel = pool.meta(id).tunnel as usize;
                // Offsets outside the packet: written as they are.
                let _ = finish_offloaded(pool.data_mut(id), csum);
                if let (Some(o), None) = (to.as_mut(), error.as_ref()) {
                    let data = pool.data(id);
                    let r = match wrap {
                        // An IP packet from an L3 tunnel in an Ethernet capture.
                        Some(l2) if !l2.get(tunnel).copied().unwrap_or(false) => {
                            in_ethernet(&mut frame, data);
                            *wrapped += 1;
                            o.write(stamp(id), &frame)
                        }
                        _ => o.write(stamp(id), data),
                    };
                    if let Err(e) = r {
                        *error = Some(e);
                    }
                }
                pool.free(id);
            }
        };
        let wrap = (*out_link == DataLink::ETHERNET).then_some(&tunnel_l2[..]);
        match direction {
            Direction::Encap => {
                pipeline.encap(pool, vector, &mut |_, pool, v| {
                    *written += v.len() as u64;
                    write(pool, v, out, None);
                });
            }
            Direction::Decap => {
                let now_ns = u64::try_from(now.as_nanos()).unwrap_or(u64::MAX);
                pipeline.decap(pool, vector, now_ns, &mut |o, pool, v| match o {
                    // Kernel: none without an Ethernet outer layer.
                    Output::Inner | Output::Kernel => {
                        *written += v.len() as u64;
                        write(pool, v, out, wrap);
                    }
                    Output::Reply | Output::Outer => {
                        *replies_seen += v.len() as u64;
                        write(pool, v, replies, None);
                    }
                });
            }
        }
        vector.clear();
        for &id in input.as_slice() {
            live[id.index()] = false;
        }
    }

    fn finish(mut self) -> Result<Report, PcapError> {
        self.flush();
        self.pipeline_for(None);
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        if let Some(o) = self.out.take() {
            o.finish()?;
        }
        let replies_written = self.replies.is_some();
        if let Some(o) = self.replies.take() {
            o.finish()?;
        }
        let Some(p) = self.pipeline.as_ref() else {
            unreachable!("built above");
        };
        let nodes = p
            .runtime()
            .nodes()
            .iter()
            .map(|n| NodeReport {
                name: n.name,
                calls: n.calls,
                vectors: n.vectors,
                packets: n.packets,
                clocks_per_packet: n.ticks_per_packet(),
                drops: n.drops_by_reason().collect(),
            })
            .collect();
        Ok(Report {
            direction: self.direction,
            runtime: p.runtime().report(),
            nodes,
            counters: p.counters(),
            skipped: DropReason::ALL
                .iter()
                .map(|&r| (r, self.skipped[r]))
                .filter(|&(_, n)| n > 0)
                .collect(),
            frames: self.frames,
            snap_cut: self.snap_cut,
            out: self.written,
            replies: self.replies_seen,
            replies_written,
            inner_link: self.inner_link,
            out_link: self.out_link,
            wrapped: self.wrapped,
        })
    }
}

/// Runs the pipeline over a capture.
pub fn run(options: Options) -> Result<Report, PcapError> {
    let config = Config::load(&options.config).map_err(PcapError::Config)?;
    let input = options.input.clone();
    // Check the input before creating the outputs.
    File::open(&input).map_err(|e| PcapError::Capture(CaptureError::Io(e)))?;
    let mut run = Run::new(options, config)?;
    let outputs: Vec<PathBuf> = [&run.out, &run.replies]
        .into_iter()
        .flatten()
        .map(|o| o.path.clone())
        .collect();
    let res = read_frames(&input, |f| run.frame(f))
        .map_err(PcapError::Capture)
        .and_then(|()| run.finish());
    if res.is_err() {
        // A half-written OUT would look like a result: none is left.
        remove_partial(&outputs);
    }
    res
}

/// Removes outputs an error left half-written: regular files only (OUT
/// may be /dev/null or /dev/stdout, which are not tep's to remove).
fn remove_partial(paths: &[PathBuf]) {
    for path in paths {
        if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_file()) {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// `ip` as the payload of a made-up Ethernet frame in `frame` (an IP
/// packet from an L3 tunnel written into an Ethernet capture).
fn in_ethernet(frame: &mut Vec<u8>, ip: &[u8]) {
    frame.clear();
    frame.extend_from_slice(&SYNTH_DST);
    frame.extend_from_slice(&SYNTH_SRC);
    let ty: u16 = if ip.first().map(|b| b >> 4) == Some(6) {
        0x86dd
    } else {
        0x0800
    };
    frame.extend_from_slice(&ty.to_be_bytes());
    frame.extend_from_slice(ip);
}

#[cfg(test)]
mod tests {
    use super::*;
    use tep_csum::Sum;

    #[test]
    fn partial_udp_checksums_are_finished_as_a_device_would() {
        // IPv4 + UDP with only the pseudo-header sum in the field.
        let mut p = vec![0u8; 20 + 8 + 4];
        p[0] = 0x45;
        p[9] = 17;
        p[12..16].copy_from_slice(&[192, 0, 2, 1]);
        p[16..20].copy_from_slice(&[192, 0, 2, 2]);
        p[24..26].copy_from_slice(&12u16.to_be_bytes());
        p[28..].copy_from_slice(b"abcd");
        let ph = tep_csum::pseudo_header_v4([192, 0, 2, 1], [192, 0, 2, 2], 17, 12);
        p[26..28].copy_from_slice(&ph.value().to_be_bytes());
        finish_offloaded(
            &mut p,
            ChecksumState::Partial {
                start: 20,
                offset: 26,
            },
        )
        .unwrap();
        assert!(ph.add(Sum::of(&p[20..])).verifies());
    }

    #[test]
    fn non_ethernet_links_give_their_ip_packet() {
        let ip = [0x45u8, 0, 0, 20];
        let mk = |link, data: Vec<u8>| Frame {
            timestamp: Duration::ZERO,
            link,
            orig_len: data.len(),
            data,
        };
        let mut sll = vec![0u8; 16];
        sll[14..16].copy_from_slice(&0x0800u16.to_be_bytes());
        sll.extend_from_slice(&ip);
        assert_eq!(
            ip_of_non_ethernet(&mk(Link::Other(113), sll)),
            Some(&ip[..])
        );
        let mut eth = vec![0u8; 12];
        eth.extend_from_slice(&[0x81, 0, 0, 5, 0x08, 0]);
        eth.extend_from_slice(&ip);
        assert_eq!(ip_of_non_ethernet(&mk(Link::Ethernet, eth)), Some(&ip[..]));
        let mut arp = vec![0u8; 12];
        arp.extend_from_slice(&[0x08, 0x06]);
        arp.extend_from_slice(&[0; 28]);
        assert_eq!(ip_of_non_ethernet(&mk(Link::Ethernet, arp)), None);
        assert_eq!(ip_of_non_ethernet(&mk(Link::Other(147), ip.to_vec())), None);
    }
}
