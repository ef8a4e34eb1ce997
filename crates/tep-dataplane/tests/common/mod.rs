//! Packet builders and pipeline drivers shared by the integration tests.
#![allow(dead_code)]

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use tep_csum::Sum;
use tep_dataplane::buffer::{ChecksumState, PacketId, Pool, SUPER_PACKET_ROOM};
use tep_dataplane::clock::ManualClock;
use tep_dataplane::config::{ChecksumMode, Config, IpPrefix, TunnelConfig};
use tep_dataplane::encap::InnerLink;
use tep_dataplane::pipeline::{Output, Pipeline, PipelineOptions};
use tep_dataplane::vector::PacketVector;
use tep_dataplane::TunnelKind;
use tep_wire::ethernet::EthernetAddress;

pub const A4: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
pub const B4: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2));
pub const A6: IpAddr = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1));
pub const B6: IpAddr = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2));

/// An inner IPv4 TCP segment 10.0.0.1 → 10.9.0.1 with `payload` and a
/// correct checksum.
pub fn tcp4(payload: &[u8], sport: u16) -> Vec<u8> {
    let tcp_len = 20 + payload.len();
    let total = 20 + tcp_len;
    let mut p = vec![0u8; total];
    p[0] = 0x45;
    p[1] = 0x02; // ECT(0)
    p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    p[4..6].copy_from_slice(&0x1234u16.to_be_bytes());
    p[6] = 0x40;
    p[8] = 61;
    p[9] = 6;
    p[12..16].copy_from_slice(&[10, 0, 0, 1]);
    p[16..20].copy_from_slice(&[10, 9, 0, 1]);
    let c = Sum::of(&p[..20]).checksum();
    p[10..12].copy_from_slice(&c.to_be_bytes());
    let t = &mut p[20..];
    t[0..2].copy_from_slice(&sport.to_be_bytes());
    t[2..4].copy_from_slice(&80u16.to_be_bytes());
    t[4..8].copy_from_slice(&1000u32.to_be_bytes());
    t[12] = 0x50;
    t[13] = 0x18;
    t[14..16].copy_from_slice(&512u16.to_be_bytes());
    t[20..].copy_from_slice(payload);
    let ph = tep_csum::pseudo_header_v4([10, 0, 0, 1], [10, 9, 0, 1], 6, tcp_len as u16);
    let c = ph.add(Sum::of(t)).checksum();
    t[16..18].copy_from_slice(&c.to_be_bytes());
    p
}

/// An inner IPv6 UDP datagram 2001:db8:9::1 → 2001:db8:9::2 with a correct
/// checksum.
pub fn udp6(payload: &[u8], sport: u16) -> Vec<u8> {
    let udp_len = 8 + payload.len();
    let mut p = vec![0u8; 40 + udp_len];
    p[0] = 0x60;
    p[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
    p[6] = 17;
    p[7] = 63;
    let s = Ipv6Addr::new(0x2001, 0xdb8, 9, 0, 0, 0, 0, 1).octets();
    let d = Ipv6Addr::new(0x2001, 0xdb8, 9, 0, 0, 0, 0, 2).octets();
    p[8..24].copy_from_slice(&s);
    p[24..40].copy_from_slice(&d);
    let u = &mut p[40..];
    u[0..2].copy_from_slice(&sport.to_be_bytes());
    u[2..4].copy_from_slice(&53u16.to_be_bytes());
    u[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
    u[8..].copy_from_slice(payload);
    let ph = tep_csum::pseudo_header_v6(&s, &d, 17, udp_len as u32);
    let c = ph.add(Sum::of(u)).udp_checksum();
    u[6..8].copy_from_slice(&c.to_be_bytes());
    p
}

pub const INNER_DST_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0xbb];

/// An Ethernet frame around `ip`.
pub fn frame(ip: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(14 + ip.len());
    f.extend_from_slice(&INNER_DST_MAC);
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, 0xaa]);
    let ty: u16 = if ip[0] >> 4 == 6 { 0x86dd } else { 0x0800 };
    f.extend_from_slice(&ty.to_be_bytes());
    f.extend_from_slice(ip);
    f
}

/// The two ends of a tunnel of `kind`: (A's config, B's config).
pub fn pair(kind: TunnelKind, v6: bool, mode: ChecksumMode) -> (Config, Config) {
    let (a, b) = if v6 { (A6, B6) } else { (A4, B4) };
    let mk = |local, remote, name: &str| {
        let mut t = TunnelConfig::new(name, kind, local, remote);
        t.checksum = mode;
        t.zero_checksum_tx = true;
        t.zero_checksum_rx = true;
        t.remote_checksum_rx = true;
        match kind {
            TunnelKind::Vxlan | TunnelKind::Geneve => t.vni = 4242,
            TunnelKind::Gtpu => {
                t.teid = 0x1000;
                t.local_teid = 0x1000;
                t.qfi = Some(9);
            }
            TunnelKind::GreInUdp | TunnelKind::FouGre => t.key = Some(77),
            _ => {}
        }
        if kind.carries_ethernet() {
            t.inner_macs = vec![EthernetAddress(INNER_DST_MAC)];
        } else {
            t.inner_prefixes = vec![
                IpPrefix {
                    addr: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 0)),
                    len: 8,
                },
                IpPrefix {
                    addr: IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 9, 0, 0, 0, 0, 0)),
                    len: 48,
                },
            ];
        }
        t
    };
    let ca = Config {
        tunnels: vec![mk(a, b, "a-to-b")],
        ..Config::default()
    };
    let cb = Config {
        tunnels: vec![mk(b, a, "b-to-a")],
        ..Config::default()
    };
    (ca, cb)
}

pub fn link_for(kind: TunnelKind) -> InnerLink {
    if kind.carries_ethernet() {
        InnerLink::Ethernet
    } else {
        InnerLink::Ip
    }
}

pub fn pipeline(config: &Config, link: InnerLink) -> Pipeline<ManualClock> {
    Pipeline::new(
        config,
        ManualClock::default(),
        PipelineOptions {
            inner_link: link,
            gro: false,
        },
    )
}

pub fn pool() -> Pool {
    Pool::new(1024, SUPER_PACKET_ROOM)
}

/// Loads packets into a vector.
pub fn load(pool: &mut Pool, packets: &[Vec<u8>]) -> PacketVector {
    let mut v = PacketVector::new();
    for p in packets {
        let id = pool.alloc().expect("pool");
        assert!(pool.fill(id, p));
        v.push(id).unwrap();
    }
    v
}

/// What came out of a pipeline call, copied out, buffers freed.
#[derive(Debug, Default)]
pub struct Out {
    pub packets: Vec<Vec<u8>>,
    pub csum: Vec<ChecksumState>,
    pub replies: Vec<Vec<u8>>,
}

fn take(
    pool: &mut Pool,
    v: &mut PacketVector,
    into: &mut Vec<Vec<u8>>,
    cs: Option<&mut Vec<ChecksumState>>,
) {
    let mut cs = cs;
    for &id in v.as_slice() {
        into.push(pool.data(id).to_vec());
        if let Some(c) = cs.as_mut() {
            c.push(pool.meta(id).csum);
        }
        pool.free(id);
    }
    v.clear();
}

pub fn run_encap(p: &mut Pipeline<ManualClock>, pool: &mut Pool, packets: &[Vec<u8>]) -> Out {
    let mut v = load(pool, packets);
    let mut out = Out::default();
    p.encap(pool, &mut v, &mut |pool, v| {
        take(pool, v, &mut out.packets, Some(&mut out.csum))
    });
    out
}

pub fn run_decap(
    p: &mut Pipeline<ManualClock>,
    pool: &mut Pool,
    packets: &[Vec<u8>],
    now_ns: u64,
) -> Out {
    let mut v = load(pool, packets);
    let mut out = Out::default();
    p.decap(pool, &mut v, now_ns, &mut |o, pool, v| match o {
        Output::Inner => take(pool, v, &mut out.packets, Some(&mut out.csum)),
        Output::Reply => take(pool, v, &mut out.replies, None),
    });
    out
}

/// Whether the UDP checksum of an outer packet (IP at 0) verifies; `None`
/// when it is zero.
pub fn outer_udp_ok(p: &[u8]) -> Option<bool> {
    let (l4, pseudo) = if p[0] >> 4 == 4 {
        let l4 = usize::from(p[0] & 0xf) * 4;
        let len = (p.len() - l4) as u16;
        (
            l4,
            tep_csum::pseudo_header_v4(
                p[12..16].try_into().unwrap(),
                p[16..20].try_into().unwrap(),
                17,
                len,
            ),
        )
    } else {
        let len = (p.len() - 40) as u32;
        (
            40,
            tep_csum::pseudo_header_v6(
                &p[8..24].try_into().unwrap(),
                &p[24..40].try_into().unwrap(),
                17,
                len,
            ),
        )
    };
    if p[l4 + 6..l4 + 8] == [0, 0] {
        return None;
    }
    Some(pseudo.add(Sum::of(&p[l4..])).verifies())
}

pub fn ids(v: &PacketVector) -> Vec<PacketId> {
    v.as_slice().to_vec()
}
