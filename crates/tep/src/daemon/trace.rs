//! `tep trace`: the next N packets at the tunnel's edges, captured into a
//! pcapng file (VPP's `pcap trace`).
//!
//! Capture points, one pcapng interface each, so Wireshark shows where a
//! packet was seen. Host mode's:
//! - `tun`: inner IP packets, both directions (read from / written to the
//!   TUN; flags say which);
//! - `tap`: inner Ethernet frames, both directions;
//! - `udp`: outer IP packets, both directions, as tep sees them: sent ones
//!   with the headers the pipeline built (the socket then writes its own,
//!   with its own source port and checksum; a GSO train shows as one
//!   super-datagram), received ones with the headers tep rebuilt from what
//!   the socket reported.
//!
//! Gateway mode's, whole frames at the AF_XDP rings: `inner` and
//! `underlay` (both directions, flags say which), and `kernel`, IP packets
//! handed to the kernel's stack for a next hop tep cannot reach yet.
//! Host mode's uplink: `uplink`, the frames written into it.
//!
//! Off, a capture point costs one relaxed atomic load per packet.

use std::borrow::Cow;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tep_dataplane::InnerLink;

use pcap_file::pcapng::blocks::enhanced_packet::{EnhancedPacketBlock, EnhancedPacketOption};
use pcap_file::pcapng::blocks::interface_description::{
    InterfaceDescriptionBlock, InterfaceDescriptionOption,
};
use pcap_file::pcapng::PcapNgWriter;
use pcap_file::DataLink;

/// Where a packet was seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Point {
    /// Read from the TUN (Ip) or TAP (Ethernet).
    DeviceRx(InnerLink),
    /// Written to the TUN or TAP.
    DeviceTx(InnerLink),
    /// Received from a UDP socket.
    UdpRx,
    /// Handed to a UDP socket.
    UdpTx,
    /// Gateway: a frame from the inner interface's receive ring.
    InnerRx,
    /// Gateway: a frame put on the inner interface's transmit ring.
    InnerTx,
    /// Gateway: a frame from the underlay's receive ring.
    UnderlayRx,
    /// Gateway: a frame put on the underlay's transmit ring.
    UnderlayTx,
    /// Gateway: an IP packet handed to the kernel's stack.
    Kernel,
    /// Host mode: a frame written into the uplink TAP.
    UplinkTx,
}

#[derive(Debug)]
struct Record {
    point: Point,
    time: Duration,
    data: Vec<u8>,
}

/// The capture shared by the workers.
#[derive(Debug, Default)]
pub struct Tracer {
    /// Packets still wanted; 0 = off.
    remaining: AtomicUsize,
    records: Mutex<Vec<Record>>,
    // Bytes the records hold, and the packets asked for that the capture
    // ended without (it reached TRACE_BYTES).
    held: AtomicUsize,
    cut_short: AtomicUsize,
}

/// Bytes a capture holds at most: the count asked for is the operator's,
/// the packets' sizes are the senders'. Past it the capture ends early.
const TRACE_BYTES: usize = 64 << 20;

/// Bytes kept of each packet (the pcapng snap length).
const SNAPLEN: usize = 65535;

impl Tracer {
    /// Starts capturing the next `count` packets (dropping any earlier
    /// capture).
    pub fn start(&self, count: usize) {
        let mut r = self.records.lock().unwrap_or_else(|e| e.into_inner());
        r.clear();
        self.held.store(0, Ordering::Relaxed);
        self.cut_short.store(0, Ordering::Relaxed);
        self.remaining.store(count, Ordering::Release);
    }

    /// Whether the capture has all it asked for.
    pub fn done(&self) -> bool {
        self.remaining.load(Ordering::Acquire) == 0
    }

    /// Stops and returns the capture as pcapng bytes.
    pub fn finish(&self) -> Vec<u8> {
        self.remaining.store(0, Ordering::Release);
        let records = std::mem::take(&mut *self.records.lock().unwrap_or_else(|e| e.into_inner()));
        let cut = self.cut_short.load(Ordering::Relaxed);
        if cut > 0 {
            tracing::warn!(
                captured = records.len(),
                not_captured = cut,
                "trace ended at its {} MiB bound",
                TRACE_BYTES >> 20
            );
        }
        to_pcapng(&records)
    }

    /// Captures `data` at `point` while a capture is on.
    #[inline]
    pub fn record(&self, point: Point, data: &[u8]) {
        if !self.active() {
            return;
        }
        self.record_slow(point, data);
    }

    /// Whether a capture is running (so that a caller can skip gathering
    /// what it would record).
    pub fn active(&self) -> bool {
        self.remaining.load(Ordering::Relaxed) != 0
    }

    /// [`record`](Tracer::record) of a packet gathered from `parts`.
    pub fn record_parts(&self, point: Point, parts: &[std::io::IoSlice<'_>]) {
        if !self.active() {
            return;
        }
        let mut data = Vec::new();
        for p in parts {
            data.extend_from_slice(&p[..p.len().min(SNAPLEN.saturating_sub(data.len()))]);
        }
        self.record_slow(point, &data);
    }

    #[cold]
    fn record_slow(&self, point: Point, data: &[u8]) {
        let mut r = self.records.lock().unwrap_or_else(|e| e.into_inner());
        // Re-checked under the lock: several workers race for the last slots.
        let left = self.remaining.load(Ordering::Acquire);
        if left == 0 {
            return;
        }
        let kept = data.len().min(SNAPLEN);
        let held = self.held.load(Ordering::Relaxed) + kept;
        if held > TRACE_BYTES {
            self.cut_short.store(left, Ordering::Relaxed);
            self.remaining.store(0, Ordering::Release);
            return;
        }
        self.held.store(held, Ordering::Relaxed);
        self.remaining.store(left - 1, Ordering::Release);
        let time = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        r.push(Record {
            point,
            time,
            data: data[..kept].to_vec(),
        });
    }
}

/// pcapng interface of a point, and its direction flag (RFC draft
/// pcapng §4.3.1 epb_flags: bits 0-1, 1 inbound, 2 outbound).
fn place(p: Point) -> (u32, u32) {
    match p {
        Point::DeviceRx(InnerLink::Ip) => (0, 1),
        Point::DeviceTx(InnerLink::Ip) => (0, 2),
        Point::DeviceRx(InnerLink::Ethernet) => (1, 1),
        Point::DeviceTx(InnerLink::Ethernet) => (1, 2),
        Point::UdpRx => (2, 1),
        Point::UdpTx => (2, 2),
        Point::InnerRx => (3, 1),
        Point::InnerTx => (3, 2),
        Point::UnderlayRx => (4, 1),
        Point::UnderlayTx => (4, 2),
        Point::Kernel => (5, 2),
        Point::UplinkTx => (6, 2),
    }
}

fn to_pcapng(records: &[Record]) -> Vec<u8> {
    let mut w = match PcapNgWriter::new(Vec::new()) {
        Ok(w) => w,
        Err(_) => return Vec::new(),
    };
    for (name, link) in [
        ("tun", DataLink::RAW),
        ("tap", DataLink::ETHERNET),
        ("udp", DataLink::RAW),
        ("inner", DataLink::ETHERNET),
        ("underlay", DataLink::ETHERNET),
        ("kernel", DataLink::RAW),
        ("uplink", DataLink::ETHERNET),
    ] {
        let idb = InterfaceDescriptionBlock {
            linktype: link,
            snaplen: SNAPLEN as u32,
            options: vec![InterfaceDescriptionOption::IfName(Cow::Borrowed(name))],
        };
        let _ = w.write_pcapng_block(idb);
    }
    for r in records {
        let (interface_id, dir) = place(r.point);
        let epb = EnhancedPacketBlock {
            interface_id,
            timestamp: r.time,
            original_len: r.data.len() as u32,
            data: Cow::Borrowed(&r.data),
            options: vec![EnhancedPacketOption::Flags(dir)],
        };
        let _ = w.write_pcapng_block(epb);
    }
    w.into_inner()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captures_exactly_the_count_asked_then_stops() {
        let t = Tracer::default();
        t.record(Point::UdpRx, b"before");
        t.start(2);
        t.record(Point::UdpRx, &[0x45; 30]);
        assert!(!t.done());
        t.record(Point::DeviceTx(InnerLink::Ethernet), &[1; 60]);
        t.record(Point::UdpTx, b"after");
        assert!(t.done());
        let bytes = t.finish();
        let mut r = pcap_file::pcapng::PcapNgReader::new(&bytes[..]).unwrap();
        let mut packets = Vec::new();
        while let Some(b) = r.next_block() {
            if let pcap_file::pcapng::Block::EnhancedPacket(p) = b.unwrap() {
                let flags = p.options.iter().find_map(|o| match o {
                    EnhancedPacketOption::Flags(f) => Some(*f),
                    _ => None,
                });
                packets.push((p.interface_id, p.data.len(), flags));
            }
        }
        assert_eq!(packets, vec![(2, 30, Some(1)), (1, 60, Some(2)),]);
    }

    #[test]
    fn a_capture_ends_at_its_byte_bound() {
        let t = Tracer::default();
        t.start(usize::MAX);
        let big = vec![0x45u8; 100_000];
        let fits = TRACE_BYTES / SNAPLEN;
        for _ in 0..fits + 10 {
            t.record(Point::UdpRx, &big);
        }
        assert!(t.done(), "ended");
        assert_eq!(t.records.lock().unwrap().len(), fits);
        assert_eq!(t.cut_short.load(Ordering::Relaxed), usize::MAX - fits);
        t.start(1);
        assert_eq!(t.cut_short.load(Ordering::Relaxed), 0);
        t.record(Point::UdpRx, b"again");
        assert!(t.done());
    }
}
