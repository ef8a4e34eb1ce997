//! What the main thread shares with the control thread and the metrics
//! listener: the config and I/O in effect, the workers' wake-ups and
//! counters, and the way to ask for a reload. It has a module of its own so
//! that those readers depend on it and not on the daemon that fills it.

use super::worker::Shared;
use std::net::SocketAddr;
use std::sync::{mpsc, Arc, Mutex};
use tep_dataplane::config::Config;
use tep_sys::EventFd;

/// What `tep show tunnels` reports about the I/O in effect.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct IoInfo {
    /// Per device: name, kind, MTU, offloads in effect.
    pub devices: Vec<DeviceInfo>,
    /// Per local endpoint: address, GSO/GRO in effect, zero checksums.
    pub sockets: Vec<SocketInfo>,
    /// Worker threads.
    pub workers: usize,
    /// `host.busy_poll_us`: how long workers poll before they sleep.
    pub busy_poll_us: u32,
}

/// A TUN/TAP device in use.
#[derive(Clone, Debug, serde::Serialize)]
pub struct DeviceInfo {
    /// Interface name.
    pub name: String,
    /// "tun" or "tap".
    pub kind: String,
    /// MTU set.
    pub mtu: u32,
    /// Offloads the kernel took ("csum tso4 …" or "none").
    pub offloads: String,
}

/// A local UDP endpoint in use.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SocketInfo {
    /// Bound address.
    pub local: SocketAddr,
    /// UDP_SEGMENT in use.
    pub gso: bool,
    /// UDP_GRO in use.
    pub gro: bool,
    /// Sends zero checksums (SO_NO_CHECK / UDP_NO_CHECK6_TX).
    pub zero_checksum_tx: bool,
    /// Accepts zero checksums over IPv6 (UDP_NO_CHECK6_RX).
    pub zero_checksum_rx: bool,
    /// The source ports tunnel traffic leaves from (`host.source_sockets`
    /// of them; first worker's). Empty: the socket's own port.
    pub source_ports: Vec<u16>,
}

/// Where the control thread finds what it reports.
#[derive(Debug)]
pub struct State {
    /// The config in effect.
    pub config: Mutex<Arc<Config>>,
    /// The I/O in effect.
    pub io: Mutex<IoInfo>,
    /// The workers' wake-ups.
    pub wakes: Mutex<Vec<Arc<EventFd>>>,
    /// Counters and trace.
    pub shared: Arc<Shared>,
    /// Reload requests to the main thread, each with where to answer.
    pub reload: Mutex<mpsc::Sender<mpsc::Sender<Result<(), String>>>>,
    /// Wakes the main thread for a reload request.
    pub main_wake: EventFd,
}
