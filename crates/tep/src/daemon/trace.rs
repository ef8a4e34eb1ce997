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

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tep_dataplane::InnerLink;

use pcap_file::DataLink;
use tep_capture::write::{pcapng, Packet};

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
    records: Mutex<Capture>,
}

#[derive(Debug, Default)]
struct Capture {
    records: Vec<Record>,
    /// The packet bytes in `records`.
    bytes: usize,
    /// Whether it stopped at [`MAX_BYTES`].
    cut: bool,
}

/// Bytes kept of each packet (the pcapng snap length).
const SNAPLEN: usize = 65535;

/// Packet bytes a capture holds at most: it stops there (super-packets
/// of 64 KiB would otherwise make the count cap a memory cap of
/// COUNT × 64 KiB).
pub const MAX_BYTES: usize = 32 << 20;

impl Tracer {
    /// Starts capturing the next `count` packets (dropping any earlier
    /// capture).
    pub fn start(&self, count: usize) {
        *self.records.lock().unwrap_or_else(|e| e.into_inner()) = Capture::default();
        self.remaining.store(count, Ordering::Release);
    }

    /// Whether the capture has all it asked for.
    pub fn done(&self) -> bool {
        self.remaining.load(Ordering::Acquire) == 0
    }

    /// Stops and returns the capture as pcapng bytes.
    pub fn finish(&self) -> Vec<u8> {
        self.remaining.store(0, Ordering::Release);
        let mut r = self.records.lock().unwrap_or_else(|e| e.into_inner());
        let records = std::mem::take(&mut r.records);
        r.bytes = 0;
        drop(r);
        to_pcapng(&records)
    }

    /// Whether the last capture stopped at [`MAX_BYTES`], short of its
    /// count (until the next [`start`](Tracer::start)).
    pub fn cut(&self) -> bool {
        self.records.lock().unwrap_or_else(|e| e.into_inner()).cut
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
        let data = &data[..data.len().min(SNAPLEN)];
        if r.bytes + data.len() > MAX_BYTES {
            self.remaining.store(0, Ordering::Release);
            r.cut = true;
            tracing::info!(
                packets = r.records.len(),
                "trace: stopped at its cap of {} MiB of packets",
                MAX_BYTES >> 20
            );
            return;
        }
        self.remaining.store(left - 1, Ordering::Release);
        let time = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        r.bytes += data.len();
        r.records.push(Record {
            point,
            time,
            data: data.to_vec(),
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

/// The capture points' pcapng interfaces, in [`place`]'s order.
const INTERFACES: [(&str, DataLink); 7] = [
    ("tun", DataLink::RAW),
    ("tap", DataLink::ETHERNET),
    ("udp", DataLink::RAW),
    ("inner", DataLink::ETHERNET),
    ("underlay", DataLink::ETHERNET),
    ("kernel", DataLink::RAW),
    ("uplink", DataLink::ETHERNET),
];

fn to_pcapng(records: &[Record]) -> Vec<u8> {
    let packets = records.iter().map(|r| {
        let (interface, direction) = place(r.point);
        Packet {
            interface,
            direction,
            time: r.time,
            data: &r.data,
        }
    });
    pcapng(&INTERFACES, SNAPLEN as u32, packets)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketOption;

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
    fn a_capture_stops_at_its_byte_cap() {
        let t = Tracer::default();
        t.start(usize::MAX);
        let big = vec![0x45; SNAPLEN];
        let fit = MAX_BYTES / SNAPLEN;
        for _ in 0..fit + 3 {
            t.record(Point::UdpRx, &big);
        }
        assert!(t.done(), "stopped by the cap, not the count");
        {
            let capture = t.records.lock().unwrap();
            assert_eq!(capture.records.len(), fit);
            assert!(capture.bytes <= MAX_BYTES);
        }
        let _ = t.finish();
        assert!(t.cut());
        t.start(1);
        t.record(Point::UdpRx, &big);
        let _ = t.finish();
        assert!(!t.cut(), "a new capture starts whole");
    }
}
