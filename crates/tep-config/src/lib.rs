//! `tep.toml`, parsed and checked.
//!
//! The one rule: TOML in, checked values out, every error naming its field
//! (`tunnel[1] "gtp-a".vni: ...`); nothing here opens a device or a socket.
//! The tunnel model and its rules are the dataplane's
//! ([`tep_dataplane::config`], re-exported here so that a reader of the
//! config has one crate to import from); this crate types the TOML into
//! that model and owns the sections the daemon alone reads.
//!
//! - `file`: [`Config`], the whole file, and the [`RunMode`] it asks for.
//! - `parse`: the TOML typed into the model field by field, and
//!   `toml_error`: the field of an error the TOML reader reports.
//! - `network`: `[[network]]` (multipoint overlays) and `[overlay]`, and
//!   their rules that need the rest of the file.
//! - `host`, `gateway`, `pfcp`: the `[host]` and `[gateway]` sections of
//!   `tep run` (one per I/O mode) and the `[pfcp]` section of a UPF.
//!
//! This file only declares and re-exports, so that no module imports
//! another through it.

mod evpn;
mod file;
mod gateway;
mod host;
mod network;
mod parse;
mod pfcp;
mod pfcp_network;
mod toml_error;
mod value;

#[cfg(test)]
mod check_tests;
#[cfg(test)]
mod testing;

pub use evpn::{EvpnConfig, DEFAULT_KERNEL_PORT};
pub use file::{Config, RunMode};
pub use gateway::{GatewayConfig, XdpMode};
pub use host::{Capabilities, HostConfig, Uplink, DEFAULT_ADAPTIVE_POLL_US, DEFAULT_CONTROL};
pub use network::OverlayConfig;
pub use pfcp::{NodeId, PfcpConfig, PfcpPeer, PFCP_PORT};
pub use pfcp_network::{DataNetwork, DnRouter, MAX_DATA_NETWORKS, MAX_NETWORK_NAME};
pub use tep_dataplane::config::{
    ChecksumMode, ConfigError, Control, DataplaneConfig, DontFragment, Dscp, GueRcoEncoding,
    IpPrefix, NetworkSettings, Ttl, TunnelConfig,
};
