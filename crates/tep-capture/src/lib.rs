//! Capture files, offline: read (pcap and pcapng) into frames, dissected
//! layer by layer with tep-wire and printed ([`decode`], `tep decode`),
//! replayed through the dataplane's pipeline ([`replay`], `tep pcap`);
//! and written ([`write`], `tep trace`).
//! The `tep` command is their front; `fuzz/` runs the reader over
//! arbitrary bytes without the daemon. Its own crate so that tep-wire and
//! the dataplane stay free of pcap-file and serde_json, and the daemon's
//! crate holds the daemon.

pub mod decode;
pub mod dissect;
pub mod ports;
pub mod replay;
pub mod write;

pub use dissect::{dissect, Dissection};
pub use ports::PortMap;

use pcap_file::pcap::PcapParser;
use pcap_file::pcapng::{Block, PcapNgParser};
use pcap_file::{DataLink, TsResolution};
use std::fmt;
use std::io::Read;
use std::path::Path;
use std::time::Duration;

/// One captured frame.
#[derive(Debug, Clone)]
pub struct Frame {
    /// Time stamp since the epoch.
    pub timestamp: Duration,
    /// The link type of the interface it was captured on.
    pub link: Link,
    /// Length on the wire; more than `data.len()` when the snap length cut it.
    pub orig_len: usize,
    /// The captured bytes.
    pub data: Vec<u8>,
}

/// The link layers tep dissects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link {
    /// DLT_EN10MB.
    Ethernet,
    /// DLT_RAW / LINKTYPE_IPV4 / LINKTYPE_IPV6: the frame starts at the IP header.
    RawIp,
    /// Any other link type, by number.
    Other(u32),
}

impl From<DataLink> for Link {
    fn from(d: DataLink) -> Link {
        match d {
            DataLink::ETHERNET => Link::Ethernet,
            DataLink::RAW | DataLink::IPV4 | DataLink::IPV6 => Link::RawIp,
            other => Link::Other(u32::from(other)),
        }
    }
}

/// Why a capture file could not be read.
#[derive(Debug)]
pub enum CaptureError {
    /// The file could not be opened or read.
    Io(std::io::Error),
    /// The file is neither pcap nor pcapng.
    NotACapture,
    /// The file is pcap/pcapng but broken at some record.
    Corrupt(String),
}

impl fmt::Display for CaptureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CaptureError::Io(e) => write!(f, "{e}"),
            CaptureError::NotACapture => f.write_str("not a pcap or pcapng file"),
            CaptureError::Corrupt(e) => write!(f, "corrupt capture: {e}"),
        }
    }
}

const PCAP_MAGICS: [[u8; 4]; 4] = [
    [0xd4, 0xc3, 0xb2, 0xa1],
    [0xa1, 0xb2, 0xc3, 0xd4],
    [0x4d, 0x3c, 0xb2, 0xa1],
    [0xa1, 0xb2, 0x3c, 0x4d],
];
const PCAPNG_MAGIC: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];

/// Reads every frame of a pcap or pcapng file, calling `each` in order.
/// Frames read before a corrupt record are delivered before the error.
pub fn read_frames(path: &Path, each: impl FnMut(Frame)) -> Result<(), CaptureError> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .map_err(CaptureError::Io)?;
    read_frames_from(&bytes, each)
}

/// [`read_frames`] of a capture already in memory (the fuzz target's
/// entry: any bytes in, frames or a [`CaptureError`] out, never a panic).
pub fn read_frames_from(bytes: &[u8], mut each: impl FnMut(Frame)) -> Result<(), CaptureError> {
    let magic: [u8; 4] = bytes
        .get(..4)
        .and_then(|m| m.try_into().ok())
        .ok_or(CaptureError::NotACapture)?;
    let corrupt = |e: pcap_file::PcapError| CaptureError::Corrupt(e.to_string());
    if PCAP_MAGICS.contains(&magic) {
        // The slice parsers, not the readers: the file is in memory, and a
        // reader zeroes an 8 MB buffer of its own for every file.
        let (mut rest, parser) = PcapParser::new(bytes).map_err(corrupt)?;
        let header = parser.header();
        let link = Link::from(header.datalink);
        let frac_ns = match header.ts_resolution {
            TsResolution::MicroSecond => 1_000,
            TsResolution::NanoSecond => 1,
        };
        // Raw records: pcap-file's checked reader refuses a record whose
        // original length exceeds the snap length, which is exactly what a
        // capture with a short snap length holds (the kernel captures here).
        let mut n = 0usize;
        while !rest.is_empty() {
            n += 1;
            let (r, p) = parser
                .next_raw_packet(rest)
                .map_err(|e| CaptureError::Corrupt(format!("frame {n}: {e}")))?;
            rest = r;
            each(Frame {
                timestamp: Duration::from_secs(p.ts_sec.into())
                    + Duration::from_nanos(u64::from(p.ts_frac) * frac_ns),
                link,
                orig_len: (p.orig_len as usize).max(p.data.len()),
                data: p.data.into_owned(),
            });
        }
        Ok(())
    } else if magic == PCAPNG_MAGIC {
        let (mut rest, mut parser) = PcapNgParser::new(bytes).map_err(corrupt)?;
        // Interface ids index the description blocks of the section.
        let mut links = Vec::new();
        let mut n = 0usize;
        while !rest.is_empty() {
            n += 1;
            let (r, block) = parser
                .next_block(rest)
                .map_err(|e| CaptureError::Corrupt(format!("block {n}: {e}")))?;
            rest = r;
            let frame = match block {
                Block::InterfaceDescription(i) => {
                    links.push(Link::from(i.linktype));
                    continue;
                }
                Block::EnhancedPacket(p) => {
                    let link = *links.get(p.interface_id as usize).ok_or_else(|| {
                        CaptureError::Corrupt(format!(
                            "block {n}: interface id {} has no description block",
                            p.interface_id
                        ))
                    })?;
                    Frame {
                        timestamp: p.timestamp,
                        link,
                        orig_len: p.original_len as usize,
                        data: p.data.into_owned(),
                    }
                }
                Block::SimplePacket(p) => {
                    let link = *links.first().ok_or_else(|| {
                        CaptureError::Corrupt(format!("block {n}: no interface block before it"))
                    })?;
                    Frame {
                        timestamp: Duration::ZERO,
                        link,
                        orig_len: p.original_len as usize,
                        data: p.data.into_owned(),
                    }
                }
                Block::SectionHeader(_) => {
                    links.clear();
                    continue;
                }
                _ => continue,
            };
            each(frame);
        }
        Ok(())
    } else {
        Err(CaptureError::NotACapture)
    }
}
