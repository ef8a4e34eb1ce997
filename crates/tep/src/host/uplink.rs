//! Host mode's uplink (`host.uplink`): tunnel traffic leaves as whole
//! frames written into a TAP, and the kernel forwards them out of the
//! underlay like packets it routes.
//!
//! Why: a kernel peer receives tep's UDP_SEGMENT trains one datagram at a
//! time (its VXLAN socket cuts SKB_GSO_UDP_L4 apart, each datagram through
//! the tunnel and GRO again), and a socket with zero checksums gets no
//! UDP_SEGMENT at all. A TCP super-packet from the TUN, encapsulated once
//! ([tunnel GSO](tep_dataplane::pipeline::PipelineOptions::tunnel_gso)) and
//! written with the virtio-net UDP-tunnel GSO header (Linux 6.17+), crosses
//! the kernel as one SKB_GSO_UDP_TUNNEL[_CSUM] packet, the shape the
//! kernel's own VXLAN sends: segmented at the device (or not at all over a
//! veth: the peer's VXLAN decapsulates it whole), its outer checksum per
//! segment or 0. One write per super-packet.
//!
//! What the kernel's forwarding path needs from the TAP: forwarding on,
//! `accept_local` (the frames carry the host's own source address), and
//! reverse-path filtering off, which for IPv4 means
//! `net.ipv4.conf.all.rp_filter` too (the effective value is the larger):
//! tep sets the device's, and refuses to start when `all` is not 0 rather
//! than weaken the host's filtering unasked. IPv6 forwarding is one switch
//! for the whole namespace, so the uplink carries IPv4 underlays only.

use super::udp_io::Tallies;
use crate::daemon::stats::IoEvent;
use crate::daemon::trace::{Point, Tracer};
use std::io::IoSlice;
use tep_dataplane::buffer::Pool;
use tep_dataplane::config::{ChecksumMode, Config, ConfigError};
use tep_dataplane::TunnelKind;
use tep_dataplane::drop::DropReason;
use tep_dataplane::nexthop::LinkHeader;
use tep_dataplane::tunnel::TunnelTable;
use tep_dataplane::vector::PacketVector;
use tep_dataplane::vnet::{TunnelGsoHeader, VnetHeader, VNET_HDR_LEN, VNET_HDR_TUNNEL_LEN};
use tep_sys::{sysctl, DeviceKind, Offloads, Tun, TunOptions, TunQueue};

/// The source MAC of the frames written into the uplink: the kernel
/// forwards by the destination (the TAP's own), nobody answers this one.
const FRAME_SOURCE: [u8; 6] = [0x02, 0x74, 0x65, 0x70, 0x00, 0x01];

/// The host-mode rules of `host.uplink`: every tunnel over IPv4, none
/// that a UDP-tunnel GSO device cannot segment (GTP-U has a length field,
/// remote checksum offload a per-packet start).
pub fn check(config: &Config) -> Result<(), ConfigError> {
    if config.host.uplink.is_none() {
        return Ok(());
    }
    for (i, t) in config.tunnels.iter().enumerate() {
        let field = |f: &str| format!("tunnel[{i}] \"{}\".{f}", t.name);
        if !t.local.is_ipv4() {
            return Err(ConfigError {
                field: field("local"),
                message: "host.uplink sends over IPv4 only (IPv6 forwarding is one switch for the whole namespace): leave host.uplink out for IPv6 underlays".to_string(),
            });
        }
        if t.kind == TunnelKind::Gtpu {
            return Err(ConfigError {
                field: field("kind"),
                message: "host.uplink cannot carry GTP-U (its header holds a length, which segmentation by the kernel would not fix)".to_string(),
            });
        }
        if t.checksum == ChecksumMode::Remote {
            return Err(ConfigError {
                field: field("checksum"),
                message: "host.uplink cannot carry remote checksum offload (its start and offset are per packet)".to_string(),
            });
        }
    }
    Ok(())
}

/// The uplink device, ready: a TAP with the tunnel header and UDP-tunnel
/// GSO, its forwarding switches set, up; and the header of the frames
/// written into it.
pub fn open(name: &str, queues: usize) -> Result<(Tun, LinkHeader), String> {
    let all = sysctl::get("net.ipv4.conf.all.rp_filter").map_err(|e| format!("host.uplink: {e}"))?;
    if all != "0" {
        return Err(format!(
            "host.uplink: net.ipv4.conf.all.rp_filter is {all}: the uplink's frames carry this host's own address, which reverse-path filtering drops; set it to 0 (sysctl -w net.ipv4.conf.all.rp_filter=0) or leave host.uplink out"
        ));
    }
    let tap = Tun::open(&TunOptions {
        name: name.to_string(),
        kind: DeviceKind::Tap,
        queues,
        vnet_hdr: true,
        vnet_hdr_tunnel: true,
        offloads: Offloads {
            udp_tunnel: true,
            udp_tunnel_csum: true,
            ..Offloads::all()
        },
    })
    .map_err(|e| format!("host.uplink: cannot open {name}: {e}"))?;
    if !tap.offloads().udp_tunnel {
        return Err(format!(
            "host.uplink: this kernel has no UDP-tunnel GSO for a TAP (Linux 6.17+; {name} took {})",
            tap.offloads()
        ));
    }
    let name = tap.name().to_string();
    for (key, value) in [("forwarding", "1"), ("accept_local", "1"), ("rp_filter", "0")] {
        sysctl::set(&sysctl::ipv4_conf(&name, key), value)
            .map_err(|e| format!("host.uplink: {e}"))?;
    }
    tap.set_up()
        .map_err(|e| format!("host.uplink: cannot bring {name} up: {e}"))?;
    let mac = tep_sys::netlink::link_by_name(&name)
        .ok()
        .and_then(|l| l.mac)
        .ok_or_else(|| format!("host.uplink: {name} has no MAC"))?;
    tracing::info!(device = name.as_str(), offloads = %tap.offloads(), "uplink ready");
    Ok((
        tap,
        LinkHeader {
            dst: mac,
            src: FRAME_SOURCE,
            vlan: None,
        },
    ))
}

/// Writes each of `out`'s frames into the uplink (a super-frame with its
/// tunnel GSO header, one write each), counts them on their tunnels and
/// frees them.
pub(super) fn write_frames(
    queue: &TunQueue,
    pool: &mut Pool,
    out: &mut PacketVector,
    table: &TunnelTable,
    tallies: &mut Tallies,
    tracer: &Tracer,
) {
    let mut hdr = [0u8; VNET_HDR_TUNNEL_LEN];
    for &id in out.as_slice() {
        let m = *pool.meta(id);
        let t = table.get(m.tunnel);
        let data = pool.data_mut(id);
        let segments = match TunnelGsoHeader::for_frame(data, &m, t.checksum != ChecksumMode::Zero) {
            Some(h) => {
                h.emit(&mut hdr);
                let payload = data.len() - usize::from(h.base.hdr_len);
                payload.div_ceil(usize::from(h.base.gso_size).max(1))
            }
            None => {
                // One datagram: no GSO; an `offload` outer checksum left
                // partial goes as NEEDS_CSUM.
                let mut v1 = [0u8; VNET_HDR_LEN];
                VnetHeader::for_packet(data, &m).emit(&mut v1);
                hdr.fill(0);
                hdr[..VNET_HDR_LEN].copy_from_slice(&v1);
                1
            }
        };
        let data = pool.data(id);
        if tracer.active() {
            tracer.record(Point::UplinkTx, data);
        }
        match queue.write_with_header(&hdr, &[IoSlice::new(data)]) {
            Ok(_) => {
                tallies.io.count(IoEvent::UplinkTx, 1);
                if segments > 1 {
                    tallies.io.count(IoEvent::UplinkTxSuper, 1);
                }
                if let Some(s) = tallies.tunnels.get_mut(m.tunnel as usize) {
                    s.tx_packets += segments as u64;
                    s.tx_bytes += (data.len() - usize::from(m.udp_payload)) as u64;
                }
            }
            Err(e) => {
                tracing::debug!("uplink write: {e}");
                tallies.io.drop(DropReason::SendFailed, segments as u64);
            }
        }
        pool.free(id);
    }
    out.clear();
}
