//! PFCP (3GPP TS 29.244, the N4 interface between an SMF and a UPF) for
//! tep's user plane: a codec and the UP function's protocol node, pure
//! logic with no I/O (after quinn-proto): the daemon moves datagrams on UDP
//! port 8805 and applies the rule changes the node hands it.
//!
//! - [`header`]: the message header, a zero-copy view over named offsets.
//! - [`ie`]: the TLV walk ([`ie::Ies`]), IE types, and the writer that
//!   emits TLVs with back-patched lengths.
//! - [`types`]: the values of the leaf IEs tep reads or writes (Node ID,
//!   F-SEID, F-TEID, UE IP Address, Apply Action, Outer Header Creation, …).
//! - [`rules`]: the grouped IEs (Create/Update/Remove PDR, FAR, QER, URR,
//!   PDI, Forwarding Parameters, Created PDR, Usage Report, Downlink Data
//!   Report, Query URR).
//! - [`report`]: what a UP function reports of its GTP-U paths: Node
//!   Report Type, Remote GTP-U Peer, User Plane Path Failure/Recovery
//!   Report, Error Indication Report.
//! - [`message`]: the messages, [`message::PfcpRepr`] parses and emits them.
//! - [`sample`]: the messages of a typical PDU session (examples, load).
//! - [`node`]: the UP function: associations, heartbeats, sessions, the
//!   retransmission cache, timers, and the boundary to the user plane
//!   ([`node::UserPlane`]).
//!
//! # Why tep has its own codec
//! The one maintained PFCP crate, `rs-pfcp` (0.5.0, checked when this crate
//! was written), covers every Release 18 IE, but is not a fit: its messages
//! hold each IE as an owned `Vec<u8>` with a `Vec` of children (a typed
//! decode is a second pass over that tree, errors carry `String`s), it pulls
//! `clap`, `serde_yaml_ng`, `serde_json`, `pcap-file` and
//! `network-interface` into any library user, and it needs Rust 1.87 where
//! tep builds with 1.85. tep needs about forty IEs, decoded in one pass
//! straight into the values the node uses, with the Cause and Offending IE
//! TS 29.244 §7.6 asks for on every malformed input; that is this crate,
//! checked against scapy's `contrib/pfcp.py` (tests/scapy.rs).
//!
//! # Panic contract
//! Parsing never panics, whatever the bytes: every read is bounded by the
//! length already checked for it (the fuzz target `pfcp` in fuzz/ runs the
//! decoder and the node over arbitrary input). Emitting writes into a
//! growable `Vec<u8>`: PFCP messages are control plane, nested TLVs whose
//! lengths are patched after their content, which needs no size pass.
#![forbid(unsafe_code)]

#[macro_use]
mod group;

mod cause;
pub mod flow;
pub mod header;
pub mod ie;
pub mod message;
pub mod node;
pub mod report;
pub mod rules;
pub mod sample;
pub mod types;

pub use cause::Cause;
pub use header::{Packet, PORT};
pub use ie::{IeError, IeType};
pub use message::{Message, PfcpRepr};

/// Why bytes are not a PFCP message tep can act on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Error {
    /// Shorter than the header (TS 29.244 §7.6.3: silently discarded).
    Truncated,
    /// A version other than 1 (§7.6.2: Version Not Supported Response).
    BadVersion(u8),
    /// The header's length field contradicts the datagram or the header
    /// (§7.6.3: a request gets Cause "Invalid length").
    BadLength,
    /// The S flag does not match the message type (a session message
    /// without an SEID, a node message with one).
    BadSeidFlag,
    /// A message type tep does not handle (§7.6.4: silently discarded).
    UnknownMessage(u8),
    /// An IE error: what the response's Cause and Offending IE say.
    Ie(IeError),
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Error::Truncated => f.write_str("shorter than a PFCP header"),
            Error::BadVersion(v) => write!(f, "PFCP version {v}"),
            Error::BadLength => f.write_str("message length inconsistent with the datagram"),
            Error::BadSeidFlag => f.write_str("S flag does not match the message type"),
            Error::UnknownMessage(t) => write!(f, "message type {t} not handled"),
            Error::Ie(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<IeError> for Error {
    fn from(e: IeError) -> Self {
        Error::Ie(e)
    }
}
