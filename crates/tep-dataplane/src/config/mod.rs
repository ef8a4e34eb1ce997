//! The tunnel configuration the dataplane is built from: the tunnels
//! (`[[tunnel]]`, a UPF's N3 tunnels) and `[dataplane]`, as checked values.
//!
//! `model` holds the types, `check` the rules on them (per tunnel and
//! between tunnels) and `network_check` those on multipoint networks, the same for a config parsed by tep-config and one
//! built in code (tests, benches, a control plane). This module only
//! re-exports the two, so that neither imports the other through it.

mod check;
mod model;
mod network_check;
mod value;

pub use check::{
    check_together, check_tunnels, tunnel_error, tunnel_label, uses_key, uses_vni, MAX_VNI,
};
pub use model::{
    ChecksumMode, ConfigError, Control, DataplaneConfig, DontFragment, Dscp, GueRcoEncoding,
    IpPrefix, NetworkSettings, Ttl, TunnelConfig, MAX_NETWORKS,
};
pub use network_check::{
    default_device, default_evpn_device, network_error, network_key_not_used, network_label,
    not_a_network_kind, not_for_networks, valid_ifname, MAX_AGEING_S, MAX_IFNAME, MAX_MACS,
};
pub use value::{bad_name_message, check_mac, not_used, valid_name};
