//! `tep-bench flood`: a packet generator for benchmarks. It replays the
//! Ethernet frames of a pcap file, over and over, out of one interface
//! through an AF_XDP socket: each frame is written once into the socket's
//! UMEM and sent again whenever the kernel hands it back, so that the cost
//! per frame is the kernel's (on a veth in copy mode: an skb and a copy)
//! and a rate of several Mpps needs no tool this machine lacks (pktgen is
//! a module it does not have).

use std::io;
use std::path::Path;
use std::time::{Duration, Instant};
use tep_dataplane::{Pool, HEADROOM};
use tep_sys::{Desc, Umem, XskOptions, XskSocket};

/// Frames the socket may have out at once (its transmit ring).
const RING: u32 = 2048;
/// UMEM chunk size (a page).
const CHUNK: usize = 4096;

/// What a flood sent.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Flooded {
    /// Frames the kernel took (completed).
    pub frames: u64,
    /// Seconds it ran.
    pub seconds: f64,
    /// Frames per second.
    pub pps: f64,
}

/// The frames of a pcap file (Ethernet link type), at most `RING`.
pub fn frames_of(path: &Path) -> Result<Vec<Vec<u8>>, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut r = pcap_file::pcap::PcapReader::new(file)
        .map_err(|e| format!("{}: not a pcap file: {e}", path.display()))?;
    if r.header().datalink != pcap_file::DataLink::ETHERNET {
        return Err(format!("{}: the frames must be Ethernet", path.display()));
    }
    let mut frames = Vec::new();
    while let Some(p) = r.next_packet() {
        let p = p.map_err(|e| format!("{}: {e}", path.display()))?;
        if p.data.len() > CHUNK - HEADROOM {
            return Err(format!(
                "{}: a frame of {} bytes does not fit a {CHUNK}-byte chunk",
                path.display(),
                p.data.len()
            ));
        }
        frames.push(p.data.into_owned());
        if frames.len() == RING as usize {
            break;
        }
    }
    if frames.is_empty() {
        return Err(format!("{}: no frames", path.display()));
    }
    Ok(frames)
}

/// Sends `frames` round-robin out of queue `queue` of `ifindex` for
/// `seconds`.
pub fn run(ifindex: u32, queue: u32, frames: &[Vec<u8>], seconds: f64) -> io::Result<Flooded> {
    let mut pool = Pool::new(RING as usize, CHUNK - HEADROOM);
    let (addr, len) = pool.region();
    // SAFETY: the pool's arena, page-aligned, outlives the socket (dropped
    // first, below); the kernel only reads the frames put on the
    // transmit ring, and they are not written while it does.
    let umem = unsafe { Umem::register(addr, len, CHUNK as u32)? };
    let socket = XskSocket::new(
        &umem,
        ifindex,
        queue,
        &XskOptions {
            rx: 0,
            tx: RING,
            fill: 64,
            completion: RING,
            ..XskOptions::default()
        },
    )?;
    // Every chunk holds one of the frames, round-robin.
    let mut free: Vec<Desc> = Vec::with_capacity(RING as usize);
    for i in 0..RING as usize {
        let Some(id) = pool.alloc() else { break };
        let f = &frames[i % frames.len()];
        if !pool.fill(id, f) {
            break;
        }
        free.push(Desc {
            // The kernel's for the rest of the run: sent over and over.
            addr: pool.to_kernel(id),
            len: f.len() as u32,
            options: 0,
        });
    }
    // The frame each chunk holds, by chunk, for the completions.
    let mut lens = vec![0u32; RING as usize];
    for d in &free {
        lens[(d.addr / CHUNK as u64) as usize] = d.len;
    }
    let mut done = [0u64; 256];
    let mut frames_sent = 0u64;
    let started = Instant::now();
    let until = started + Duration::from_secs_f64(seconds);
    let mut socket = socket;
    // One batch of up to 256 descriptors per round, then a kick.
    while Instant::now() < until {
        let n = free.len().min(256);
        let at = free.len() - n;
        let sent = socket.send(&free[at..]);
        free.truncate(free.len() - sent);
        let _ = socket.kick();
        loop {
            let c = socket.complete(&mut done);
            for &a in &done[..c] {
                if let Some(&len) = lens.get((a / CHUNK as u64) as usize) {
                    free.push(Desc {
                        addr: a,
                        len,
                        options: 0,
                    });
                }
            }
            frames_sent += c as u64;
            if c < done.len() {
                break;
            }
        }
    }
    let secs = started.elapsed().as_secs_f64();
    drop(socket);
    drop(pool);
    Ok(Flooded {
        frames: frames_sent,
        seconds: secs,
        pps: frames_sent as f64 / secs,
    })
}
