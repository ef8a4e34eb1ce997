//! A worker's TUN/TAP side: inner packets read with their virtio-net
//! header (checksum and GSO state into the packet's metadata), and
//! decapsulated ones written back gathered, with the header that carries
//! the state the pipeline settled for them.

use super::data_networks::Device;
use super::udp_io::{datagrams, Tallies, TunnelFacts};
use crate::daemon::stats::IoCounters;
use crate::daemon::stats::IoEvent;
use crate::daemon::trace::{Point, Tracer};
use std::io::{self, IoSlice};
use tep_dataplane::vnet::{VnetHeader, VNET_HDR_LEN};
use tep_dataplane::{DropReason, Gso, GsoKind, InnerLink, PacketMeta, PacketVector, Pool};
use tep_sys::TunQueue;

/// Reads up to `budget` packets from a TUN/TAP queue into `input`, while
/// more than `reserve` buffers are free.
pub(super) fn read_device(
    q: &TunQueue,
    link: InnerLink,
    pool: &mut Pool,
    input: &mut PacketVector,
    (budget, reserve): (usize, usize),
    io: &mut IoCounters,
    tracer: &Tracer,
) {
    let mut hdr = [0u8; VNET_HDR_LEN];
    for _ in 0..budget {
        if pool.available() < reserve {
            break;
        }
        let Some(id) = pool.alloc() else { break };
        let room = pool.data_room();
        pool.set_len(id, room);
        match q.read_packet(&mut hdr, pool.data_mut(id)) {
            Ok(n) => {
                pool.set_len(id, n);
                io.count(IoEvent::DeviceRx, 1);
                match VnetHeader::parse(&hdr).to_meta(n) {
                    Ok((csum, gso)) => {
                        let m = pool.meta_mut(id);
                        m.csum = csum;
                        m.gso = gso;
                        if gso.is_some() {
                            io.count(IoEvent::DeviceRxSuper, 1);
                        }
                        tracer.record(Point::DeviceRx(link), pool.data(id));
                        input.put(pool, id);
                    }
                    Err(_) => {
                        io.drop(DropReason::BadVnetHeader, 1);
                        pool.free(id);
                    }
                }
            }
            Err(e) => {
                pool.free(id);
                if e.kind() != io::ErrorKind::WouldBlock {
                    tracing::warn!("device read: {e}");
                }
                break;
            }
        }
    }
}

/// A TCP packet out of a tunnel longer than the device's MTU: a
/// super-packet a sender encapsulated whole that reached tep whole (its
/// uplink's UDP-tunnel GSO packet over a veth on the same host is never
/// segmented on the way). It goes to the device as TSO, in segments of
/// what the MTU leaves after its headers, so that the kernel can still
/// forward it, and it counts as those segments.
fn whole_tcp(data: &[u8], m: &PacketMeta, mtu: u32) -> Option<Gso> {
    let l3 = usize::from(m.l3);
    let l4 = usize::from(m.l4);
    let ip = data.get(l3..)?;
    let (kind, total, proto) = match ip.first()? >> 4 {
        4 if ip.len() >= 20 => (
            GsoKind::Tcp4,
            usize::from(u16::from_be_bytes([ip[2], ip[3]])),
            ip[9],
        ),
        6 if ip.len() >= 40 => (
            GsoKind::Tcp6,
            40 + usize::from(u16::from_be_bytes([ip[4], ip[5]])),
            ip[6],
        ),
        _ => return None,
    };
    if proto != 6 || total <= mtu as usize || l4 <= l3 {
        return None;
    }
    let headers = l4 - l3 + usize::from(data.get(l4 + 12)? >> 4) * 4;
    let segment_size = (mtu as usize).checked_sub(headers).filter(|&s| s > 0)?;
    Some(Gso {
        kind,
        segment_size: segment_size as u16,
    })
}

/// The inner side's devices of a worker: the TUN and TAP of the
/// point-to-point tunnels, a queue of each network's own device.
pub(super) struct Devices<'a> {
    pub tun: Option<&'a TunQueue>,
    pub tap: Option<&'a TunQueue>,
    pub networks: &'a [(u32, bool, TunQueue)],
    /// A UPF's data networks' own TUNs (`data_networks::Device::Own`).
    pub data_tuns: &'a [(u8, TunQueue)],
}

/// The TUN of an uplink packet of a UPF session: its data network's
/// (`meta.network`). None where the network has no device here, which
/// never falls back to another network's.
fn data_tun<'a>(devices: &Devices<'a>, routes: &TunnelFacts, network: u8) -> Option<&'a TunQueue> {
    match routes.data_devices.get(usize::from(network))? {
        Device::HostTun => devices.tun,
        // By network, not by position: a worker short of a device's queue
        // must not shift the others (a network or two: a short scan).
        Device::Own(_) => devices
            .data_tuns
            .iter()
            .find(|d| d.0 == network)
            .map(|d| &d.1),
    }
}

/// Writes decapsulated packets and frames to the TUN or TAP, with the
/// virtio-net header that carries the checksum and GRO state the pipeline
/// settled (`decap-output`). Frees every buffer.
pub(super) fn write_inner(
    pool: &mut Pool,
    out: &mut PacketVector,
    devices: &Devices<'_>,
    routes: &TunnelFacts,
    tallies: &mut Tallies,
    tracer: &Tracer,
) {
    let mut hdr = [0u8; VNET_HDR_LEN];
    for &id in out.as_slice() {
        let mut m = *pool.meta(id);
        let t = m.tunnel as usize;
        let ethernet = routes.ethernet.get(t).copied().unwrap_or(false);
        let network = routes.network_queue.get(t).copied().flatten();
        let mtu = match network {
            Some(_) => routes.network_mtu[t],
            None => routes.device_mtu[usize::from(ethernet)],
        };
        if m.gso.is_none() {
            m.gso = whole_tcp(pool.data(id), &m, mtu);
        }
        let queue = match network {
            Some(k) => devices.networks.get(k).map(|n| &n.2),
            None if ethernet => devices.tap,
            None if !routes.data_devices.is_empty() && routes.table.get(m.tunnel).sessions => {
                data_tun(devices, routes, m.network)
            }
            None => devices.tun,
        };
        let Some(q) = queue else {
            tallies.io.drop(DropReason::NoDevice, 1);
            pool.free(id);
            continue;
        };
        // Merged trains (tails) come with GRO only, which needs the header.
        debug_assert!(m.tail.is_none() || q.has_vnet_hdr());
        if q.has_vnet_hdr() {
            VnetHeader::for_packet(pool.data_mut(id), &m).emit(&mut hdr);
        }
        let data = pool.data(id);
        let mut parts = [IoSlice::new(&[]); TunQueue::MAX_PARTS];
        parts[0] = IoSlice::new(data);
        let mut nparts = 1;
        let mut len = data.len();
        for p in pool.tail_parts(id) {
            // A train holds at most 64 datagrams: always room.
            if let Some(slot) = parts.get_mut(nparts) {
                *slot = IoSlice::new(p);
                nparts += 1;
                len += p.len();
            }
        }
        let parts = &parts[..nparts];
        // A GRO super-packet counts as the segments it holds: its payload
        // after the transport header, in segment-size pieces.
        let l4 = usize::from(m.l4);
        let transport = match (m.gso.map(|g| g.kind), data.get(l4 + 12)) {
            (Some(GsoKind::Tcp4 | GsoKind::Tcp6), Some(&off)) => usize::from(off >> 4) * 4,
            _ => 8,
        };
        let count = datagrams(len, l4 + transport, m.gso);
        let link = if ethernet {
            InnerLink::Ethernet
        } else {
            InnerLink::Ip
        };
        tracer.record_parts(Point::DeviceTx(link), parts);
        match q.write_gathered(&hdr, parts) {
            Ok(_) => {
                tallies.io.count(IoEvent::DeviceTx, 1);
                if m.gso.is_some() {
                    tallies.io.count(IoEvent::DeviceTxSuper, 1);
                }
                if let Some(s) = tallies.tunnels.get_mut(t) {
                    s.rx_packets += count;
                    s.rx_bytes += len as u64;
                }
            }
            Err(e) => {
                tracing::debug!("device write: {e}");
                tallies.io.drop(DropReason::DeviceWrite, count);
            }
        }
        pool.free(id);
    }
}
