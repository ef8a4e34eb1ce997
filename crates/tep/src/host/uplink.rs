//! Host mode's uplink (`host.uplink`): tunnel traffic leaves as whole
//! frames written into a TAP, and the kernel forwards them out of the
//! underlay like packets it routes.
//!
//! Why: a kernel peer receives tep's UDP_SEGMENT trains one datagram at a
//! time (its VXLAN socket cuts SKB_GSO_UDP_L4 apart, each datagram through
//! the tunnel and GRO again), and a socket with zero checksums gets no
//! UDP_SEGMENT at all. A TCP super-packet from the TUN, encapsulated once
//! ([tunnel GSO](tep_dataplane::PipelineOptions::tunnel_gso)) and
//! written with the virtio-net UDP-tunnel GSO header (Linux 6.17+), crosses
//! the kernel as one SKB_GSO_UDP_TUNNEL[_CSUM] packet, the shape the
//! kernel's own VXLAN sends: segmented at the device (or not at all over a
//! veth: the peer's VXLAN decapsulates it whole), its outer checksum per
//! segment or 0. One write per super-packet.
//!
//! What the kernel's forwarding path needs from the TAP. IPv4: forwarding
//! on, `accept_local` (the frames carry the host's own source address),
//! and reverse-path filtering off, which means
//! `net.ipv4.conf.all.rp_filter` too (the effective value is the larger):
//! tep sets the device's, and refuses to start when `all` is not 0 rather
//! than weaken the host's filtering unasked. IPv6: `force_forwarding` on
//! the device (Linux 6.17+; the older `forwarding` switch acts for the
//! whole namespace, and turning it on would make the host a router).

use super::udp_io::Tallies;
use crate::daemon::stats::IoEvent;
use crate::daemon::trace::{Point, Tracer};
use std::io::IoSlice;
use tep_config::{ChecksumMode, Config, ConfigError, Uplink};
use tep_dataplane::vnet::{TunnelGsoHeader, VnetHeader, VNET_HDR_LEN, VNET_HDR_TUNNEL_LEN};
use tep_dataplane::{DropReason, LinkHeader, PacketVector, Pool, TunnelKind, TunnelTable};
use tep_sys::{sysctl, DeviceKind, Offloads, Tun, TunOptions, TunQueue};

/// The source MAC of the frames written into the uplink: the kernel
/// forwards by the destination (the TAP's own), nobody answers this one.
const FRAME_SOURCE: [u8; 6] = [0x02, 0x74, 0x65, 0x70, 0x00, 0x01];

/// Why `config`'s tunnels cannot leave through an uplink, if they cannot:
/// GTP-U (its header holds a length, which the
/// kernel's segmentation would not fix), remote checksum offload (its
/// start and offset are per packet), or offloads off (no super-packets to
/// send whole). The error names the field.
fn unfit(config: &Config) -> Option<ConfigError> {
    if !config.host.offloads {
        return Some(ConfigError {
            field: "host.offloads".to_string(),
            message: "off: the uplink sends the TUN/TAP's super-packets whole".to_string(),
        });
    }
    for (i, t) in config.tunnels.iter().enumerate() {
        let field = |f: &str| format!("tunnel[{i}] \"{}\".{f}", t.name);
        if t.is_network() {
            return Some(ConfigError {
                field: format!("network \"{}\"", t.name),
                message: "the uplink writes frames to each tunnel's one remote; a network's VTEPs come and go at run time, so networks send by the sockets".to_string(),
            });
        }
        let why = if t.kind == TunnelKind::Gtpu {
            Some(("kind", "the uplink cannot carry GTP-U (its header holds a length, which segmentation by the kernel would not fix)"))
        } else if t.checksum == ChecksumMode::Remote {
            Some(("checksum", "the uplink cannot carry remote checksum offload (its start and offset are per packet)"))
        } else {
            None
        };
        if let Some((f, message)) = why {
            return Some(ConfigError {
                field: field(f),
                message: message.to_string(),
            });
        }
    }
    None
}

/// The host-mode rules of a named `host.uplink`: every tunnel fit for it
/// (`"auto"` falls back to the sockets instead).
pub fn check(config: &Config) -> Result<(), ConfigError> {
    match (&config.host.uplink, unfit(config)) {
        (Uplink::Device(_), Some(e)) => Err(ConfigError {
            message: format!(
                "{} (host.uplink names a device; \"auto\" would use the sockets)",
                e.message
            ),
            ..e
        }),
        _ => Ok(()),
    }
}

/// The uplink `config` asks for, opened: `None` for `"off"`, and for
/// `"auto"` where it cannot serve (logged, with why); an error only for a
/// named device that cannot.
pub fn open_for(config: &Config) -> Result<Option<(Tun, LinkHeader)>, String> {
    let name = match &config.host.uplink {
        Uplink::Off => return Ok(None),
        Uplink::Device(name) => return open(name, config).map(Some),
        Uplink::Auto => "tepup%d",
    };
    if let Some(e) = unfit(config) {
        tracing::info!("uplink off, the sockets send: {e}");
        return Ok(None);
    }
    match open(name, config) {
        Ok(u) => Ok(Some(u)),
        Err(e) => {
            tracing::info!("uplink off, the sockets send: {e}");
            Ok(None)
        }
    }
}

/// The uplink device, ready: a TAP with the tunnel header and UDP-tunnel
/// GSO, its forwarding switches set for the underlays `config`'s tunnels
/// use, up; and the header of the frames written into it.
pub fn open(name: &str, config: &Config) -> Result<(Tun, LinkHeader), String> {
    let ipv4 = config.tunnels.iter().any(|t| t.local.is_ipv4());
    let ipv6 = config.tunnels.iter().any(|t| t.local.is_ipv6());
    if ipv4 {
        let all =
            sysctl::get("net.ipv4.conf.all.rp_filter").map_err(|e| format!("host.uplink: {e}"))?;
        if all != "0" {
            return Err(format!(
                "host.uplink: net.ipv4.conf.all.rp_filter is {all}: the uplink's frames carry this host's own address, which reverse-path filtering drops; set it to 0 (sysctl -w net.ipv4.conf.all.rp_filter=0) or leave host.uplink out"
            ));
        }
    }
    let queues = config.host.queues;
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
    if ipv4 {
        for (key, value) in [
            ("forwarding", "1"),
            ("accept_local", "1"),
            ("rp_filter", "0"),
        ] {
            sysctl::set(&sysctl::ipv4_conf(&name, key), value)
                .map_err(|e| format!("host.uplink: {e}"))?;
        }
    }
    if ipv6 {
        let key = sysctl::ipv6_conf(&name, "force_forwarding");
        if sysctl::get(&key).is_err() {
            return Err(format!(
                "host.uplink: this kernel has no per-device IPv6 forwarding for the IPv6 tunnels (net.ipv6.conf.{name}.force_forwarding, Linux 6.17+)"
            ));
        }
        // Its frames need no address of its own: no duplicate address
        // detection or router solicitations either.
        for (key, value) in [
            ("disable_ipv6", "0"),
            ("accept_dad", "0"),
            ("router_solicitations", "0"),
            ("force_forwarding", "1"),
        ] {
            sysctl::set(&sysctl::ipv6_conf(&name, key), value)
                .map_err(|e| format!("host.uplink: {e}"))?;
        }
    }
    tap.set_up()
        .map_err(|e| format!("host.uplink: cannot bring {name} up: {e}"))?;
    // What tep writes here the kernel forwards, and on one machine hands
    // to the receiver's whole stack, in the writing worker's context
    // unless RPS moves it to other CPUs.
    let cpus = &config.host.uplink_cpus;
    if !cpus.is_empty() {
        for q in 0..queues {
            tep_sys::iface::set_rps_cpus(&name, q, cpus)
                .map_err(|e| format!("host.uplink_cpus: {e}"))?;
        }
        tracing::info!(device = name.as_str(), cpus = ?cpus, "uplink's kernel work on these CPUs (RPS)");
    }
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

/// The kernel forwards what the uplink hands it, and forwarding takes one
/// off the TTL or hop limit: the outer IP header (after the 14-byte
/// Ethernet header) leaves with one more, so that the tunnel's `ttl` is
/// what the wire carries (255 stays: the wire gets 254).
fn add_forwarding_hop(frame: &mut [u8]) {
    const TTL: usize = 14 + 8;
    const PROTO: usize = 14 + 9;
    const CHECKSUM: usize = 14 + 10;
    const HOP_LIMIT: usize = 14 + 7;
    if frame.len() >= 14 + 40 && frame[14] >> 4 == 6 {
        // No header checksum in IPv6.
        frame[HOP_LIMIT] = frame[HOP_LIMIT].saturating_add(1);
        return;
    }
    if frame.len() < 14 + 20 || frame[14] >> 4 != 4 || frame[TTL] == u8::MAX {
        return;
    }
    let word = |ttl: u8| u16::from_be_bytes([ttl, frame[PROTO]]);
    let (old, new) = (word(frame[TTL]), word(frame[TTL] + 1));
    let c = u16::from_be_bytes([frame[CHECKSUM], frame[CHECKSUM + 1]]);
    let c = tep_csum::incremental_update(c, old, new);
    frame[TTL] += 1;
    frame[CHECKSUM..CHECKSUM + 2].copy_from_slice(&c.to_be_bytes());
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
        let segments = match TunnelGsoHeader::for_frame(data, &m, t.checksum != ChecksumMode::Zero)
        {
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
        let data = pool.data_mut(id);
        add_forwarding_hop(data);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_hop_more_with_a_checksum_that_still_verifies() {
        let mut f = vec![0u8; 14 + 28];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        let ip = &mut f[14..34];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&28u16.to_be_bytes());
        ip[8] = 33;
        ip[9] = 17;
        ip[12..16].copy_from_slice(&[192, 0, 2, 1]);
        ip[16..20].copy_from_slice(&[192, 0, 2, 2]);
        let c = tep_csum::Sum::of(ip).checksum();
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        add_forwarding_hop(&mut f);
        assert_eq!(f[22], 34);
        assert!(tep_csum::Sum::of(&f[14..34]).verifies());
        f[22] = 255;
        let before = f.clone();
        add_forwarding_hop(&mut f);
        assert_eq!(f, before, "255 stays");

        let mut f6 = vec![0u8; 14 + 48];
        f6[14] = 0x60;
        f6[14 + 7] = 64;
        add_forwarding_hop(&mut f6);
        assert_eq!(f6[14 + 7], 65);
        f6[14 + 7] = 255;
        add_forwarding_hop(&mut f6);
        assert_eq!(f6[14 + 7], 255, "255 stays");
    }
}
