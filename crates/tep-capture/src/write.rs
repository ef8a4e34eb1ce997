//! Writing a pcapng file: what `tep trace` hands back.

use pcap_file::pcapng::blocks::enhanced_packet::{EnhancedPacketBlock, EnhancedPacketOption};
use pcap_file::pcapng::blocks::interface_description::{
    InterfaceDescriptionBlock, InterfaceDescriptionOption,
};
use pcap_file::pcapng::PcapNgWriter;
use pcap_file::DataLink;
use std::borrow::Cow;
use std::time::Duration;

/// One packet of a pcapng file.
#[derive(Debug, Clone, Copy)]
pub struct Packet<'a> {
    /// Its interface: an index into the interfaces given.
    pub interface: u32,
    /// Its direction, epb_flags bits 0-1: 1 inbound, 2 outbound.
    pub direction: u32,
    /// Since the epoch.
    pub time: Duration,
    /// Its bytes, whole.
    pub data: &'a [u8],
}

/// A pcapng file: one interface per `(name, link)` with `snaplen`, then
/// each packet on its interface. Empty if the writer fails (it writes to
/// memory: it does not).
pub fn pcapng<'a>(
    interfaces: &[(&str, DataLink)],
    snaplen: u32,
    packets: impl IntoIterator<Item = Packet<'a>>,
) -> Vec<u8> {
    let Ok(mut w) = PcapNgWriter::new(Vec::new()) else {
        return Vec::new();
    };
    for &(name, linktype) in interfaces {
        let idb = InterfaceDescriptionBlock {
            linktype,
            snaplen,
            options: vec![InterfaceDescriptionOption::IfName(Cow::Borrowed(name))],
        };
        let _ = w.write_pcapng_block(idb);
    }
    for p in packets {
        let epb = EnhancedPacketBlock {
            interface_id: p.interface,
            timestamp: p.time,
            original_len: p.data.len() as u32,
            data: Cow::Borrowed(p.data),
            options: vec![EnhancedPacketOption::Flags(p.direction)],
        };
        let _ = w.write_pcapng_block(epb);
    }
    w.into_inner()
}
