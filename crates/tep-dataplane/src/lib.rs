//! tep's dataplane: a VPP-style vector pipeline over a buffer pool.
//!
//! Like quinn-proto, this crate does no I/O and makes no system calls: an
//! I/O mode (`tep pcap`, host mode's TUN/TAP and UDP sockets) fills vectors
//! of packets and takes what the pipeline hands back, and the time source
//! is passed in ([`clock::Clock`]), so everything here runs in tests and
//! benchmarks without a kernel.
//!
//! The API, what an I/O mode uses:
//! - [`pipeline`]: the encap and decap graphs of one worker and how they
//!   are wired ([`pipeline::PipelineOptions`]), their edge counters.
//! - [`io`]: the boundary with an I/O mode: which outer layers tep writes
//!   and parses ([`io::OuterLayers`]), the outer header fields that travel
//!   as metadata ([`io::Outer`]), what the decap sink does with inner
//!   checksums ([`io::InnerChecksums`]).
//! - [`buffer`]: a pool of fixed-size buffers allocated once, each with
//!   headroom so that encapsulation prepends in place, and the per-packet
//!   metadata ([`buffer::PacketMeta`]); [`vector`]: vectors of up to
//!   [`vector::VECTOR_SIZE`] packet handles.
//! - [`config`]: the validated config model and its TOML parser.
//! - [`node`] and [`drop`](mod@drop): every node and every drop reason, each declared
//!   once, with the per-node counters and the `show runtime` report.
//! - [`vnet`] (the virtio-net header as packet metadata), [`udp_train`]
//!   (UDP GSO trains, which a sink sends as one message), [`geometry`]
//!   (where a packet's headers are, checksum completion), [`tunnel`] (the
//!   tunnel table), [`nexthop`] (the Ethernet header to each next hop,
//!   where tep writes whole frames), [`clock`], [`example`] (one tunnel of each kind, for
//!   tests and benchmarks).
//! - [`session`]: a UPF's PDU sessions (PFCP's rules compiled into uplink
//!   and downlink lookups), a replica per worker fed by the control plane.
//!
//! The rest, the nodes themselves, is the crate's own: `encap` and
//! `decap` (the two paths, which share nothing but [`geometry`] and the
//! node driver in [`node`]), `gso` and `gro` (segmentation and coalescing
//! in software), `gtpu_reply` (the GTP-U reply plane).

pub mod buffer;
pub mod clock;
pub mod config;
mod decap;
pub mod drop;
mod encap;
pub mod example;
pub mod geometry;
mod gro;
mod gso;
mod gtpu_reply;
pub mod icmp_error;
pub mod io;
mod kind;
pub mod nexthop;
pub mod node;
pub mod pipeline;
pub mod session;
#[cfg(test)]
mod testpkt;
pub mod tunnel;
pub mod udp_train;
pub mod vector;
pub mod vnet;

pub use encap::overhead;
pub use geometry::InnerLink;
pub use kind::TunnelKind;
// Until crates/tep names tep_named itself (the next commit).
pub use tep_named::named_enum;
