//! tep's dataplane: a VPP-style vector pipeline over a buffer pool.
//!
//! Like quinn-proto, this crate does no I/O and makes no system calls: an
//! I/O mode (`tep pcap`, host mode's TUN/TAP and UDP sockets) fills vectors
//! of packets and takes what the pipeline hands back, and the time source
//! is passed in ([`Clock`]), so everything here runs in tests and
//! benchmarks without a kernel.
//!
//! The API, what an I/O mode uses, each item at the crate's root (one
//! path each):
//! - the encap and decap graphs of one worker, [`Pipeline`], how they are
//!   wired ([`PipelineOptions`]), what they hand back ([`Output`]) and
//!   their counters ([`Counters`], [`NodeStats`] per [`Node`], every
//!   [`DropReason`]);
//! - the boundary with an I/O mode: which outer layers tep writes and
//!   parses ([`OuterLayers`]), the outer header fields that travel as
//!   metadata ([`Outer`]), what the decap sink does with inner checksums
//!   ([`InnerChecksums`]);
//! - a [`Pool`] of fixed-size buffers allocated once, each with headroom
//!   so that encapsulation prepends in place, the per-packet metadata
//!   ([`PacketMeta`]), and vectors of up to [`VECTOR_SIZE`] packet handles
//!   ([`PacketVector`]);
//! - UDP GSO trains ([`train_end`], [`split_udp_train`]), where a packet's
//!   headers are and checksum completion ([`finish_offloaded`]), the
//!   tunnel table ([`TunnelTable`]), the Ethernet header to each next hop
//!   where tep writes whole frames ([`NextHops`]), the clocks.
//!
//! Three modules are namespaces of their own: [`config`] (the tunnel
//! model and its rules; tep-config parses the TOML into it), [`session`] (a UPF's PDU sessions:
//! PFCP's rules compiled into uplink and downlink lookups, a replica per
//! worker fed by [`session::control`]) and [`vnet`] (the virtio-net header
//! and its flags). With the `fixtures` feature, `example` has one tunnel
//! of each kind, for tests and benchmarks.
//!
//! The rest, the nodes themselves, is the crate's own: `encap` and
//! `decap` (the two paths, which share nothing but `geometry` and the
//! node driver in `node`), `gso` and `gro` (segmentation and coalescing
//! in software), `gtpu_reply` (the GTP-U reply plane).

mod buffer;
mod clock;
pub mod config;
mod decap;
pub mod dn_arp;
mod drop;
mod encap;
#[cfg(feature = "fixtures")]
pub mod example;
mod geometry;
mod gro;
mod gso;
mod gtpu_reply;
mod icmp_error;
mod io;
mod kind;
pub mod memory;
mod nexthop;
mod node;
pub mod overlay;
mod pipeline;
pub mod session;
#[cfg(test)]
mod testpkt;
mod tunnel;
mod udp_train;
mod vector;
pub mod vnet;

pub use buffer::{
    ChecksumState, Gso, GsoKind, PacketId, PacketMeta, Pool, Tail, HEADROOM, NO_TUNNEL,
    SUPER_PACKET_ROOM,
};
pub use clock::{Clock, ManualClock, Tsc};
pub use drop::{DropCounts, DropReason};
pub use encap::overhead;
pub use geometry::{ethernet_ip_offset, finish_offloaded, InnerLink};
pub use gtpu_reply::{PeerSignal, SIGNALS};
pub use icmp_error::RouterOptions;
pub use io::{InnerChecksums, Outer, OuterLayers};
pub use kind::TunnelKind;
pub use nexthop::{HopId, LinkHeader, NextHops, Route, DEFAULT_HOPS, DEFAULT_ROUTES};
pub use node::{render_report, tunnel_drops, Node, NodeStats, Runtime};
pub use pipeline::{Counters, Direction, Output, Pipeline, PipelineOptions, Sink};
pub use session::flat::prefetch;
pub use tunnel::TunnelTable;
pub use udp_train::{split_udp_train, train_end, UDP_MAX_SEGMENTS};
pub use vector::{PacketVector, VECTOR_SIZE};
