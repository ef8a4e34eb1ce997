//! tep's dataplane: a VPP-style vector pipeline over a buffer pool.
//!
//! Like quinn-proto, this crate does no I/O and makes no system calls: the
//! host layer (tep-sys) fills vectors from TUN/TAP and UDP sockets, and the
//! time source is passed in ([`clock::Clock`]), so everything here runs in
//! tests and benchmarks without a kernel.
//!
//! - [`buffer`]: a pool of fixed-size buffers allocated once, each with
//!   headroom so that encapsulation prepends in place, and the per-packet
//!   metadata ([`buffer::PacketMeta`]).
//! - [`vector`]: vectors of up to [`vector::VECTOR_SIZE`] packet handles.
//! - [`drop`]: every reason a packet can be dropped, each with its name.
//! - [`node`]: per-node counters (calls, vectors, packets, clocks, drops by
//!   reason) and the `show runtime` report.

pub mod buffer;
pub mod clock;
pub mod config;
pub mod decap;
pub mod drop;
pub mod encap;
pub mod example;
pub mod geometry;
pub mod gro;
pub mod gso;
pub mod gtpu_reply;
pub mod io;
pub mod kind;
pub mod node;
pub mod pipeline;
#[cfg(test)]
pub(crate) mod testpkt;
pub mod tunnel;
pub mod udp_train;
pub mod vector;
pub mod vnet;

pub use geometry::InnerLink;
pub use kind::TunnelKind;
