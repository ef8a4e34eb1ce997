//! The pcap/pcapng reader (`tep_capture`, what `tep decode` and `tep
//! pcap` read with) under arbitrary bytes.
//!
//! Checked on every input: the reader returns; a corrupt record's error
//! names the frame or block it is at (the frames before it were
//! delivered); each frame's original length is at least what was captured
//! where the format says so (pcap); and the frames written back as a pcap
//! file (nanosecond time stamps, one link type) read back the same: time
//! stamp, link, original length, bytes.

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::{DataLink, Endianness, TsResolution};
use std::time::Duration;
use tep_capture::{read_frames_from, CaptureError, Frame, Link};

pub fn capture(data: &[u8]) {
    let mut frames = vec![];
    let res = read_frames_from(data, |f| frames.push(f));
    let pcap = data.len() >= 4 && data[..4] != [0x0a, 0x0d, 0x0d, 0x0a];
    match &res {
        Err(CaptureError::Corrupt(msg)) => {
            assert!(!msg.is_empty());
            if !frames.is_empty() {
                assert!(
                    msg.starts_with("frame ") || msg.starts_with("block "),
                    "an error after {} frames names no record: {msg}",
                    frames.len()
                );
            }
        }
        Err(CaptureError::Io(e)) => panic!("an I/O error reading memory: {e}"),
        Err(CaptureError::NotACapture) | Ok(()) => {}
    }
    if pcap {
        for f in &frames {
            assert!(f.orig_len >= f.data.len(), "{f:?}");
        }
    }
    round_trip(&frames);
}

fn link_number(l: Link) -> u32 {
    match l {
        Link::Ethernet => 1,
        Link::RawIp => 101,
        Link::Other(n) => n,
    }
}

/// Frames of one link type, written as pcap and read back.
fn round_trip(frames: &[Frame]) {
    let Some(first) = frames.first() else {
        return;
    };
    // One pcap file has one link type, 32-bit seconds and lengths.
    if frames.iter().any(|f| {
        f.link != first.link
            || f.timestamp.as_secs() > u64::from(u32::MAX)
            || f.orig_len > u32::MAX as usize
    }) {
        return;
    }
    let header = PcapHeader {
        datalink: DataLink::from(link_number(first.link)),
        ts_resolution: TsResolution::NanoSecond,
        endianness: Endianness::Little,
        snaplen: u32::MAX,
        ..PcapHeader::default()
    };
    let mut w = PcapWriter::with_header(Vec::new(), header).expect("pcap header");
    for f in frames {
        let p = PcapPacket::new(f.timestamp, f.orig_len.max(f.data.len()) as u32, &f.data);
        w.write_packet(&p).expect("write a frame");
    }
    let bytes = w.into_writer();
    let mut back = vec![];
    read_frames_from(&bytes, |f| back.push(f)).expect("a capture tep wrote reads back");
    assert_eq!(back.len(), frames.len());
    for (a, b) in frames.iter().zip(&back) {
        assert_eq!(b.link, a.link);
        assert_eq!(b.data, a.data);
        assert_eq!(b.orig_len, a.orig_len.max(a.data.len()));
        assert_eq!(
            b.timestamp,
            Duration::new(a.timestamp.as_secs(), a.timestamp.subsec_nanos())
        );
    }
}
