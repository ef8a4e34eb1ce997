//! 802.1Q VLANs on a gateway's inner interface, as a hardware VTEP maps
//! them: the inner interface is a trunk port, each L2 network one VLAN
//! (`vlan = N`), the network without one the port's untagged VLAN.
//! - encap `vlan-input`: a frame's tag names its network; the tag is
//!   popped (the VNI carries the VLAN across, a remote VTEP's ports need
//!   not share its number). A priority tag (VID 0) is untagged, as
//!   802.1Q has it. A frame of no network goes on to the plain tunnels
//!   when the config has some, else is dropped `unknown_vlan`.
//! - `vlan-output`: a network's frame leaving by the inner interface
//!   (decapsulated, or an answer of `neigh-suppress`) gets its tag back.
//!
//! A UPF's data networks (`[[pfcp.network]] vlan`) share the trunk: a
//! frame of a data network's VLAN is popped and marked with that network
//! (`PacketMeta.network`: its sessions are looked up there), and a
//! session's uplink leaves tagged with its network's VLAN.

use crate::buffer::{ChecksumState, PacketId, Pool, NO_TUNNEL};
use crate::config::TunnelConfig;
use crate::drop::DropReason;
use crate::node::{each, NodeStats};
use crate::vector::PacketVector;

/// VLAN IDs 0..4095 (12 bits); 0 and 4095 are reserved by 802.1Q.
pub const VLAN_IDS: usize = 4096;
const TPID_8021Q: u16 = 0x8100;
const TPID_8021AD: u16 = 0x88a8;
/// The tunnels' tag where the network is the untagged one (or a tunnel
/// is no network).
const UNTAGGED: u16 = u16::MAX;
/// The tunnels' tag of a UPF's N3 tunnels: their packets carry the tag
/// of their data network (`PacketMeta.network`).
const BY_DATA_NETWORK: u16 = u16::MAX - 1;
/// No data network: a VID's, or an untagged frame's where every data
/// network is tagged (its sessions are looked up nowhere).
pub const NO_DATA_NETWORK: u8 = u8::MAX;

/// The VLAN map of one config's networks.
#[derive(Clone, Debug)]
pub struct Vlans {
    /// Per VID, the network's tunnel index, or [`NO_TUNNEL`].
    by_vid: Box<[u32; VLAN_IDS]>,
    /// The untagged network's tunnel index, or [`NO_TUNNEL`].
    untagged: u32,
    /// Per tunnel index, the VID its frames carry, or [`UNTAGGED`].
    tags: Box<[u16]>,
    /// Whether plain tunnels (no network) take what no VLAN maps.
    plain: bool,
    /// The data networks' VLANs, where a UPF's are tagged.
    data: Option<DataVlans>,
}

/// A UPF's data networks on the trunk.
#[derive(Clone, Debug)]
struct DataVlans {
    /// Per VID, the data network, or [`NO_DATA_NETWORK`].
    by_vid: Box<[u8; VLAN_IDS]>,
    /// The untagged data network, or [`NO_DATA_NETWORK`].
    untagged: u8,
    /// Per data network, its VID, or [`UNTAGGED`].
    tags: Box<[u16]>,
}

impl DataVlans {
    /// None where no data network is tagged (the sessions' frames are
    /// the trunk's untagged ones, as without a UPF).
    fn new(networks: &[Option<u16>]) -> Option<DataVlans> {
        if networks.iter().all(Option::is_none) {
            return None;
        }
        let mut d = DataVlans {
            by_vid: Box::new([NO_DATA_NETWORK; VLAN_IDS]),
            untagged: NO_DATA_NETWORK,
            tags: vec![UNTAGGED; networks.len()].into_boxed_slice(),
        };
        for (i, vlan) in networks
            .iter()
            .enumerate()
            .take(usize::from(NO_DATA_NETWORK))
        {
            match vlan.map(usize::from).filter(|&vid| vid < VLAN_IDS) {
                Some(vid) if d.by_vid[vid] == NO_DATA_NETWORK => {
                    d.by_vid[vid] = i as u8;
                    d.tags[i] = vid as u16;
                }
                Some(_) => {}
                None if d.untagged == NO_DATA_NETWORK => d.untagged = i as u8,
                None => {}
            }
        }
        Some(d)
    }
}

/// A frame's 802.1Q header as `vlan-input` reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tag {
    /// No tag, or a priority tag (`pop`: it has one to remove).
    Untagged { pop: bool },
    /// An 802.1Q VLAN.
    Vid(u16),
    /// An 802.1ad service tag: no network's.
    Other,
}

impl Vlans {
    /// The map of `tunnels`' L2 networks and of a UPF's data networks
    /// (`data_networks`: each one's VLAN, by network index); None where
    /// neither is on a VLAN (plain tunnels keep the frames as they are).
    /// Validated config: at most one untagged network of each kind, no
    /// VID twice, VIDs 1..=4094.
    pub fn new(tunnels: &[TunnelConfig], data_networks: &[Option<u16>]) -> Option<Vlans> {
        let data = DataVlans::new(data_networks);
        let mut v = Vlans {
            by_vid: Box::new([NO_TUNNEL; VLAN_IDS]),
            untagged: NO_TUNNEL,
            tags: vec![UNTAGGED; tunnels.len()].into_boxed_slice(),
            plain: false,
            data: None,
        };
        let mut any = data.is_some();
        for (i, t) in tunnels.iter().enumerate() {
            if t.sessions && data.is_some() {
                v.tags[i] = BY_DATA_NETWORK;
                continue;
            }
            let Some(n) = t.network.as_deref() else {
                v.plain = true;
                continue;
            };
            if !t.kind.carries_ethernet() {
                continue;
            }
            any = true;
            let i = i as u32;
            match n.vlan.map(usize::from).filter(|&vid| vid < VLAN_IDS) {
                Some(vid) if v.by_vid[vid] == NO_TUNNEL => {
                    v.by_vid[vid] = i;
                    v.tags[i as usize] = vid as u16;
                }
                Some(_) => {}
                None if v.untagged == NO_TUNNEL => v.untagged = i,
                None => {}
            }
        }
        v.data = data;
        any.then_some(v)
    }

    /// Whether frames from the trunk are marked with a data network (and
    /// the sessions are looked up in it).
    pub fn data_networks(&self) -> bool {
        self.data.is_some()
    }

    /// The data network of a frame of the trunk: of VID `vid`, or
    /// untagged (None); `NO_DATA_NETWORK` if none.
    fn data_network(&self, vid: Option<u16>) -> u8 {
        match (&self.data, vid) {
            (None, _) => NO_DATA_NETWORK,
            (Some(d), None) => d.untagged,
            (Some(d), Some(vid)) => d
                .by_vid
                .get(usize::from(vid))
                .copied()
                .unwrap_or(NO_DATA_NETWORK),
        }
    }

    /// The network (tunnel index) of VID `vid`, or [`NO_TUNNEL`].
    pub fn network(&self, vid: u16) -> u32 {
        self.by_vid
            .get(usize::from(vid))
            .copied()
            .unwrap_or(NO_TUNNEL)
    }

    /// The untagged network's tunnel index, or [`NO_TUNNEL`].
    pub fn untagged(&self) -> u32 {
        self.untagged
    }

    /// The VID tunnel `tunnel`'s frames carry on the inner side (None:
    /// untagged, or no network).
    pub fn tag_of(&self, tunnel: u32) -> Option<u16> {
        match self.tags.get(tunnel as usize) {
            Some(&t) if t != UNTAGGED && t != BY_DATA_NETWORK => Some(t),
            _ => None,
        }
    }

    /// The VID a packet of `tunnel` carries on the inner side, a UPF
    /// session's by its data network `network`.
    fn tag_of_packet(&self, tunnel: u32, network: u8) -> Option<u16> {
        match (self.tags.get(tunnel as usize), &self.data) {
            (Some(&BY_DATA_NETWORK), Some(d)) => match d.tags.get(usize::from(network)) {
                Some(&t) if t != UNTAGGED => Some(t),
                _ => None,
            },
            _ => self.tag_of(tunnel),
        }
    }
}

fn tag(data: &[u8]) -> Result<Tag, DropReason> {
    let word = |at: usize| {
        data.get(at..at + 2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
            .ok_or(DropReason::Truncated)
    };
    Ok(match word(12)? {
        TPID_8021Q => match word(14)? & 0x0fff {
            0 => Tag::Untagged { pop: true },
            vid => Tag::Vid(vid),
        },
        TPID_8021AD => Tag::Other,
        _ => Tag::Untagged { pop: false },
    })
}

/// Node `vlan-input`.
pub(crate) fn input(stats: &mut NodeStats, pool: &mut Pool, v: &mut PacketVector, vlans: &Vlans) {
    each(stats, pool, v, |pool, id| input_one(pool, id, vlans));
}

fn input_one(pool: &mut Pool, id: PacketId, vlans: &Vlans) -> Result<(), DropReason> {
    let (tunnel, pop, vid) = match tag(pool.data(id))? {
        Tag::Untagged { pop } => (vlans.untagged, pop, None),
        Tag::Vid(vid) => (vlans.network(vid), true, Some(vid)),
        Tag::Other => (NO_TUNNEL, false, Some(0)),
    };
    if tunnel == NO_TUNNEL {
        return data_network_input(pool, id, vlans, vid, pop);
    }
    if pop {
        pool.data_mut(id).copy_within(0..12, 4);
        pool.trim_front(id, 4);
        shift(pool, id, -4)?;
    }
    pool.meta_mut(id).tunnel = tunnel;
    Ok(())
}

/// A frame of no L2 network: a data network's (marked with it, its tag
/// popped), else the plain tunnels' when there are some, else dropped.
fn data_network_input(
    pool: &mut Pool,
    id: PacketId,
    vlans: &Vlans,
    vid: Option<u16>,
    pop: bool,
) -> Result<(), DropReason> {
    let network = vlans.data_network(vid);
    if network == NO_DATA_NETWORK {
        if vlans.data.is_some() {
            // Looked up in no data network: a plain tunnel's, or nobody's.
            pool.meta_mut(id).network = NO_DATA_NETWORK;
        }
        return if vlans.plain {
            Ok(())
        } else {
            Err(DropReason::UnknownVlan)
        };
    }
    if pop {
        pool.data_mut(id).copy_within(0..12, 4);
        pool.trim_front(id, 4);
        shift(pool, id, -4)?;
    }
    pool.meta_mut(id).network = network;
    Ok(())
}

/// Node `vlan-output`: the packets of `v` of a tagged network get its
/// tag.
pub(crate) fn output(stats: &mut NodeStats, pool: &mut Pool, v: &mut PacketVector, vlans: &Vlans) {
    each(stats, pool, v, |pool, id| output_one(pool, id, vlans));
}

fn output_one(pool: &mut Pool, id: PacketId, vlans: &Vlans) -> Result<(), DropReason> {
    let m = pool.meta(id);
    let Some(vid) = vlans.tag_of_packet(m.tunnel, m.network) else {
        return Ok(());
    };
    if pool.data(id).len() < 12 {
        return Err(DropReason::Truncated);
    }
    // Decapsulation freed far more than 4 bytes in front; an answer made
    // in a request's buffer had its tag popped.
    pool.prepend(id, 4).ok_or(DropReason::NoBuffer)?;
    let data = pool.data_mut(id);
    data.copy_within(4..16, 0);
    data[12..14].copy_from_slice(&TPID_8021Q.to_be_bytes());
    data[14..16].copy_from_slice(&vid.to_be_bytes());
    shift(pool, id, 4)
}

/// The packets of `v` bound for the kernel's stack (their next hop not
/// known yet) that a tagged network's would be: dropped `no_route`. The
/// kernel would send them untagged, into another network; a tagged
/// network's next hop comes from the kernel's neighbour table (learned,
/// or configured) without a packet of it. (A network with a router of
/// its own never gets here: [`crate::dn_arp`].)
pub(crate) fn kernel_untagged(
    stats: &mut NodeStats,
    pool: &mut Pool,
    v: &mut PacketVector,
    vlans: &Vlans,
) {
    each(stats, pool, v, |pool, id| {
        let m = pool.meta(id);
        match vlans.tag_of_packet(m.tunnel, m.network) {
            Some(_) => Err(DropReason::NoRoute),
            None => Ok(()),
        }
    });
}

/// Moves the offsets past the Ethernet addresses by `by` bytes (a tag
/// popped or pushed).
fn shift(pool: &mut Pool, id: PacketId, by: i32) -> Result<(), DropReason> {
    let m = pool.meta_mut(id);
    let moved = |o: u16| -> Result<u16, DropReason> {
        if o == 0 {
            return Ok(0);
        }
        u16::try_from(i32::from(o) + by).map_err(|_| DropReason::Malformed)
    };
    m.l3 = moved(m.l3)?;
    m.l4 = moved(m.l4)?;
    m.inner_l3 = moved(m.inner_l3)?;
    m.inner_l4 = moved(m.inner_l4)?;
    if let ChecksumState::Partial { start, offset } = m.csum {
        if i32::from(start) + by < 14 {
            return Err(DropReason::Malformed);
        }
        m.csum = ChecksumState::Partial {
            start: moved(start)?,
            offset: moved(offset)?,
        };
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffer::PacketMeta;
    use crate::config::NetworkSettings;
    use crate::kind::TunnelKind;
    use crate::testpkt::{self, Csum, Eth, Ip};
    use core::net::{IpAddr, Ipv4Addr};

    fn net(name: &str, kind: TunnelKind, vlan: Option<u16>) -> TunnelConfig {
        let s = NetworkSettings {
            vlan,
            ..NetworkSettings::default()
        };
        TunnelConfig::network(name, kind, IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)), s)
    }

    fn plain() -> TunnelConfig {
        crate::example::tunnel_pair(TunnelKind::Vxlan, false, crate::config::ChecksumMode::Full)
            .0
            .remove(0)
    }

    /// blue (VLAN 100), red (VLAN 200), green (untagged).
    fn three() -> Vlans {
        Vlans::new(
            &[
                net("blue", TunnelKind::Vxlan, Some(100)),
                net("red", TunnelKind::Geneve, Some(200)),
                net("green", TunnelKind::Vxlan, None),
            ],
            &[],
        )
        .unwrap()
    }

    fn frame(eth: &Eth) -> Vec<u8> {
        eth.wrap(&testpkt::udp(&Ip::v4(), 1, 2, b"payload", Csum::Full))
    }

    /// Runs `node` over one frame: its bytes and tunnel after, or the
    /// reason it was dropped.
    fn run(
        node: fn(&mut NodeStats, &mut Pool, &mut PacketVector, &Vlans),
        vlans: &Vlans,
        bytes: &[u8],
        tunnel: u32,
    ) -> Result<(Vec<u8>, u32), DropReason> {
        let meta = PacketMeta {
            tunnel,
            ..PacketMeta::FRESH
        };
        run_meta(node, vlans, bytes, meta).map(|(data, m)| (data, m.tunnel))
    }

    /// The frame `node` leaves of `bytes` with `meta`, and its metadata.
    fn run_meta(
        node: fn(&mut NodeStats, &mut Pool, &mut PacketVector, &Vlans),
        vlans: &Vlans,
        bytes: &[u8],
        meta: PacketMeta,
    ) -> Result<(Vec<u8>, PacketMeta), DropReason> {
        let mut pool = Pool::new(4, 2048);
        let mut v = testpkt::vector_of(&mut pool, bytes, meta);
        let mut stats = NodeStats::new("vlan");
        node(&mut stats, &mut pool, &mut v, vlans);
        let out = match v.as_slice() {
            [id] => Ok((pool.data(*id).to_vec(), *pool.meta(*id))),
            _ => Err(stats.drops_by_reason().next().expect("a drop").0),
        };
        v.as_slice().iter().for_each(|&id| pool.free(id));
        v.clear();
        assert_eq!(pool.available(), 4, "no buffer leaked");
        out
    }

    /// A UPF's N3 tunnel (0) with data networks on VLAN 10 and 20 (and
    /// `untagged`, a third, untagged).
    fn upf(untagged: bool) -> Vlans {
        let mut n3 = plain();
        n3.sessions = true;
        let networks = [Some(10), Some(20), None];
        Vlans::new(&[n3], &networks[..if untagged { 3 } else { 2 }]).unwrap()
    }

    #[test]
    fn a_data_networks_tag_marks_the_frame_with_it() {
        let untagged = frame(&Eth::new());
        let fresh = PacketMeta::FRESH;
        for (v, default) in [(upf(false), None), (upf(true), Some(2))] {
            for (tci, network) in [(10, 0), (20, 1), (0x2000 | 20, 1)] {
                let (data, m) = run_meta(input, &v, &frame(&Eth::tagged(tci)), fresh).unwrap();
                assert_eq!(
                    (data, m.network, m.tunnel),
                    (untagged.clone(), network, NO_TUNNEL)
                );
            }
            assert_eq!(
                run_meta(input, &v, &frame(&Eth::tagged(30)), fresh).map(|_| ()),
                Err(DropReason::UnknownVlan)
            );
            let got = run_meta(input, &v, &untagged, fresh).map(|(d, m)| (d, m.network));
            match default {
                Some(n) => assert_eq!(got, Ok((untagged.clone(), n))),
                None => assert_eq!(got, Err(DropReason::UnknownVlan)),
            }
        }
    }

    #[test]
    fn a_sessions_uplink_leaves_with_its_data_networks_tag() {
        let v = upf(true);
        let untagged = frame(&Eth::new());
        for (network, want) in [
            (0, frame(&Eth::tagged(10))),
            (1, frame(&Eth::tagged(20))),
            (2, untagged.clone()),
        ] {
            let meta = PacketMeta {
                tunnel: 0,
                network,
                ..PacketMeta::FRESH
            };
            let (data, _) = run_meta(output, &v, &untagged, meta).unwrap();
            assert_eq!(data, want, "network {network}");
        }
        // Without a next hop yet: the kernel may carry only the untagged
        // network's packets.
        for (network, want) in [
            (0, Err(DropReason::NoRoute)),
            (1, Err(DropReason::NoRoute)),
            (2, Ok(untagged.clone())),
        ] {
            let meta = PacketMeta {
                tunnel: 0,
                network,
                ..PacketMeta::FRESH
            };
            let got = run_meta(kernel_untagged, &v, &untagged, meta).map(|(d, _)| d);
            assert_eq!(got, want, "network {network}");
        }
        // Without tagged data networks the N3 tunnel is a plain one.
        let mut n3 = plain();
        n3.sessions = true;
        assert!(Vlans::new(&[n3], &[None]).is_none());
    }

    #[test]
    fn the_map_of_a_config() {
        let v = three();
        assert_eq!(
            (v.network(100), v.network(200), v.network(300)),
            (0, 1, NO_TUNNEL)
        );
        assert_eq!(v.untagged(), 2);
        assert_eq!(
            (v.tag_of(0), v.tag_of(1), v.tag_of(2)),
            (Some(100), Some(200), None)
        );
        assert_eq!(v.tag_of(NO_TUNNEL), None);
        assert!(Vlans::new(&[plain()], &[]).is_none(), "no network, no map");
        // An L3 network has no VLAN on an Ethernet port.
        let l3 = Vlans::new(&[net("l3", TunnelKind::Gue, Some(5))], &[]);
        assert!(l3.is_none());
    }

    #[test]
    fn a_tag_picks_the_network_and_is_popped() {
        let v = three();
        let untagged = frame(&Eth::new());
        for (tci, tunnel) in [(100, 0), (200, 1), (0x2000 | 100, 0)] {
            let got = run(input, &v, &frame(&Eth::tagged(tci)), NO_TUNNEL);
            assert_eq!(got, Ok((untagged.clone(), tunnel)), "TCI {tci:#x}");
        }
    }

    #[test]
    fn untagged_and_priority_tagged_frames_are_the_untagged_networks() {
        let v = three();
        let untagged = frame(&Eth::new());
        assert_eq!(
            run(input, &v, &untagged, NO_TUNNEL),
            Ok((untagged.clone(), 2))
        );
        let priority = frame(&Eth::tagged(0xa000));
        assert_eq!(run(input, &v, &priority, NO_TUNNEL), Ok((untagged, 2)));
    }

    #[test]
    fn a_frame_of_no_network_is_dropped_unless_plain_tunnels_take_it() {
        let mut nets = vec![net("blue", TunnelKind::Vxlan, Some(100))];
        let only = Vlans::new(&nets, &[]).unwrap();
        let mut qinq = frame(&Eth::tagged(100));
        qinq[12..14].copy_from_slice(&TPID_8021AD.to_be_bytes());
        for f in [frame(&Eth::tagged(300)), frame(&Eth::new()), qinq.clone()] {
            assert_eq!(
                run(input, &only, &f, NO_TUNNEL),
                Err(DropReason::UnknownVlan)
            );
        }
        nets.push(plain());
        let mixed = Vlans::new(&nets, &[]).unwrap();
        for f in [frame(&Eth::tagged(300)), frame(&Eth::new()), qinq] {
            let got = run(input, &mixed, &f, NO_TUNNEL);
            assert_eq!(got, Ok((f, NO_TUNNEL)), "left as it came, for the lookup");
        }
    }

    #[test]
    fn short_frames_are_truncated() {
        let v = three();
        let f = frame(&Eth::tagged(100));
        for len in [0, 13, 15] {
            assert_eq!(
                run(input, &v, &f[..len], NO_TUNNEL),
                Err(DropReason::Truncated)
            );
        }
    }

    #[test]
    fn output_pushes_the_networks_tag_and_leaves_the_rest() {
        let v = three();
        let untagged = frame(&Eth::new());
        let tagged = |vid| frame(&Eth::tagged(vid));
        assert_eq!(run(output, &v, &untagged, 0), Ok((tagged(100), 0)));
        assert_eq!(run(output, &v, &untagged, 1), Ok((tagged(200), 1)));
        for tunnel in [2, 7, NO_TUNNEL] {
            assert_eq!(
                run(output, &v, &untagged, tunnel),
                Ok((untagged.clone(), tunnel))
            );
        }
        assert_eq!(
            run(output, &v, &untagged[..11], 0),
            Err(DropReason::Truncated)
        );
    }

    #[test]
    fn offsets_follow_the_tag() {
        let v = three();
        let mut pool = Pool::new(2, 2048);
        let bytes = frame(&Eth::tagged(100));
        let meta = Eth::tagged(100).meta(PacketMeta {
            l4: 20,
            csum: ChecksumState::Partial {
                start: 20,
                offset: 26,
            },
            ..PacketMeta::FRESH
        });
        let mut vec = testpkt::vector_of(&mut pool, &bytes, meta);
        let id = vec.as_slice()[0];
        let mut stats = NodeStats::new("vlan");
        input(&mut stats, &mut pool, &mut vec, &v);
        assert_eq!((pool.meta(id).l3, pool.meta(id).l4), (14, 34));
        output(&mut stats, &mut pool, &mut vec, &v);
        let m = pool.meta(id);
        assert_eq!((m.l3, m.l4, m.csum), (meta.l3, meta.l4, meta.csum));
        assert_eq!(pool.data(id), &bytes[..]);
    }

    /// A gateway (VLANs on) and a peer VTEP, both with blue (VNI 100,
    /// VLAN 100) and red (VNI 200, VLAN 200) flooding to each other.
    fn gateway_and_peer() -> [crate::pipeline::Pipeline<crate::clock::ManualClock>; 2] {
        gateway_and_peer_with(|_| {})
    }

    /// [`gateway_and_peer`] with `edit` applied to every network.
    fn gateway_and_peer_with(
        edit: impl Fn(&mut NetworkSettings),
    ) -> [crate::pipeline::Pipeline<crate::clock::ManualClock>; 2] {
        use crate::config::DataplaneConfig;
        use crate::pipeline::{Pipeline, PipelineOptions};
        let addr = |i| IpAddr::V4(Ipv4Addr::new(192, 0, 2, i));
        let end = |me: u8, other: u8| {
            let tunnels: Vec<TunnelConfig> = [("blue", 100u16), ("red", 200)]
                .into_iter()
                .map(|(name, id)| {
                    let mut s = NetworkSettings {
                        vlan: Some(id),
                        flood: vec![addr(other)],
                        ..NetworkSettings::default()
                    };
                    edit(&mut s);
                    let mut t = TunnelConfig::network(name, TunnelKind::Vxlan, addr(me), s);
                    t.vni = u32::from(id);
                    t
                })
                .collect();
            let overlay = super::super::Overlay::new(&tunnels, 1024, 64).unwrap();
            let options = PipelineOptions {
                inner_link: crate::geometry::InnerLink::Ethernet,
                ..PipelineOptions::default()
            };
            let clock = crate::clock::ManualClock::default();
            let mut p = Pipeline::new(&tunnels, &DataplaneConfig::default(), clock, options);
            p.attach_overlay(std::sync::Arc::new(overlay));
            p
        };
        let mut gw = end(1, 2);
        assert!(gw.attach_vlans(&[]));
        [gw, end(2, 1)]
    }

    fn collect(out: &mut Vec<(Vec<u8>, u32)>, pool: &mut Pool, v: &mut PacketVector) {
        for &id in v.as_slice() {
            out.push((pool.data(id).to_vec(), pool.meta(id).tunnel));
            pool.free(id);
        }
        v.clear();
    }

    #[test]
    fn through_the_pipeline_the_vni_carries_the_vlan() {
        let [mut gw, mut peer] = gateway_and_peer();
        let mut pool = Pool::new(32, 2048);
        let from_port = frame(&Eth::tagged(200));
        let mut input = testpkt::vector_of(&mut pool, &from_port, PacketMeta::FRESH);
        let mut outer = Vec::new();
        gw.encap_tagged(&mut pool, &mut input, &mut |_, pool, v| {
            collect(&mut outer, pool, v)
        });
        assert_eq!(outer.len(), 1, "{}", gw.runtime().report());
        // VXLAN behind IPv4 (20) and UDP (8): flags, then the VNI.
        assert_eq!(&outer[0].0[32..35], &[0, 0, 200], "red's VNI");
        let mut input = testpkt::vector_of(&mut pool, &outer[0].0, PacketMeta::FRESH);
        let mut inner = Vec::new();
        peer.decap(&mut pool, &mut input, 0, &mut |_, pool, v| {
            collect(&mut inner, pool, v)
        });
        assert_eq!(inner, [(frame(&Eth::new()), 1)], "untagged, in red");

        let mut input = testpkt::vector_of(&mut pool, &frame(&Eth::new()), PacketMeta::FRESH);
        let mut outer = Vec::new();
        peer.encap_into(
            0,
            crate::geometry::InnerLink::Ethernet,
            &mut pool,
            &mut input,
            &mut |_, pool, v| collect(&mut outer, pool, v),
        );
        let mut input = testpkt::vector_of(&mut pool, &outer[0].0, PacketMeta::FRESH);
        let mut inner = Vec::new();
        gw.decap(&mut pool, &mut input, 0, &mut |_, pool, v| {
            collect(&mut inner, pool, v)
        });
        assert_eq!(inner, [(frame(&Eth::tagged(100)), 0)], "tagged 100, blue's");

        let mut input = testpkt::vector_of(&mut pool, &frame(&Eth::tagged(300)), PacketMeta::FRESH);
        gw.encap_tagged(&mut pool, &mut input, &mut |_, _, _| {
            panic!("nothing leaves")
        });
        assert_eq!(gw.drops(DropReason::UnknownVlan), 1);
        let c = gw.counters();
        assert_eq!(c.encap_in, c.encap_out + gw.drops_total(), "balanced");
        assert_eq!(pool.available(), 32, "no buffer leaked");
    }

    /// ARP suppression answers on the trunk port in the request's VLAN.
    #[test]
    fn a_suppressed_answer_goes_back_tagged() {
        let known = [2, 0, 0, 0, 0, 0x99];
        let target = IpAddr::V4(Ipv4Addr::new(10, 201, 0, 2));
        let [mut gw, _] = gateway_and_peer_with(|s| {
            s.neigh_suppress = true;
            s.neighbours = vec![(target, tep_wire::ethernet::EthernetAddress(known))];
        });
        let mut pool = Pool::new(8, 2048);
        let request = Eth::tagged(200).arp();
        let mut input = testpkt::vector_of(&mut pool, &request, PacketMeta::FRESH);
        let mut out = Vec::new();
        gw.encap_tagged(&mut pool, &mut input, &mut |o, pool, v| {
            assert_eq!(o, crate::pipeline::Output::Inner, "answered, not sent");
            collect(&mut out, pool, v)
        });
        assert_eq!(out.len(), 1, "{}", gw.runtime().report());
        let (answer, tunnel) = &out[0];
        assert_eq!(*tunnel, 1, "red's");
        assert_eq!(&answer[12..16], &[0x81, 0x00, 0, 200], "tagged 200");
        // Behind the tag: ARP, a reply (2), from the known MAC.
        assert_eq!(&answer[16..18], &[0x08, 0x06]);
        assert_eq!(&answer[24..26], &[0, 2]);
        assert_eq!(&answer[26..32], &known);
        assert_eq!(pool.available(), 8, "no buffer leaked");
    }
}
