//! Packet builders for the GSO, GRO, train and pipeline tests, written
//! byte by byte with the naive reference checksum (not the code under
//! test), and the strategies and helpers the property tests share.

use crate::buffer::{ChecksumState, Gso, GsoKind, PacketId, PacketMeta, Pool};
use crate::geometry::InnerLink;
use crate::vector::PacketVector;
use proptest::prelude::*;
use tep_csum::{reference, Sum};

/// IP header fields (IPv4 uses the first 4 bytes of the addresses).
#[derive(Clone, Debug)]
pub struct Ip {
    pub v6: bool,
    pub src: [u8; 16],
    pub dst: [u8; 16],
    pub tos: u8,
    pub ttl: u8,
    pub df: bool,
    pub ident: u16,
    pub flow_label: u32,
    /// IPv6 extension headers (next-header bytes fixed up), or IPv4
    /// options, raw.
    pub ext: Vec<u8>,
}

impl Ip {
    pub fn v4() -> Ip {
        Ip {
            v6: false,
            src: [10, 201, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            dst: [10, 201, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            tos: 0,
            ttl: 64,
            df: true,
            ident: 0x1234,
            flow_label: 0,
            ext: Vec::new(),
        }
    }

    pub fn v6() -> Ip {
        let mut src = [0u8; 16];
        src[..2].copy_from_slice(&[0xfd, 0x00]);
        src[15] = 1;
        let mut dst = src;
        dst[15] = 2;
        Ip {
            v6: true,
            src,
            dst,
            tos: 0,
            ttl: 64,
            df: false,
            ident: 0,
            flow_label: 0x12345,
            ext: Vec::new(),
        }
    }

    pub fn hlen(&self) -> usize {
        if self.v6 {
            40 + self.ext.len()
        } else {
            20 + self.ext.len()
        }
    }

    /// The IP header for `transport_len` transport bytes. For IPv6 the
    /// extension headers are chained: each 8-byte-multiple block of
    /// `ext` is taken as one destination-options header.
    pub fn header(&self, protocol: u8, transport_len: usize) -> Vec<u8> {
        let mut h = Vec::new();
        if self.v6 {
            let first = u32::from(6u8) << 28 | u32::from(self.tos) << 20 | self.flow_label;
            h.extend_from_slice(&first.to_be_bytes());
            h.extend_from_slice(&((self.ext.len() + transport_len) as u16).to_be_bytes());
            h.push(if self.ext.is_empty() { protocol } else { 60 });
            h.push(self.ttl);
            h.extend_from_slice(&self.src);
            h.extend_from_slice(&self.dst);
            let mut ext = self.ext.clone();
            let mut at = 0;
            while at < ext.len() {
                let len = (ext[at + 1] as usize + 1) * 8;
                ext[at] = if at + len >= ext.len() { protocol } else { 60 };
                at += len;
            }
            h.extend_from_slice(&ext);
        } else {
            let hl = 20 + self.ext.len();
            h.push(0x40 | (hl / 4) as u8);
            h.push(self.tos);
            h.extend_from_slice(&((hl + transport_len) as u16).to_be_bytes());
            h.extend_from_slice(&self.ident.to_be_bytes());
            h.extend_from_slice(&(if self.df { 0x4000u16 } else { 0 }).to_be_bytes());
            h.push(self.ttl);
            h.push(protocol);
            h.extend_from_slice(&[0, 0]);
            h.extend_from_slice(&self.src[..4]);
            h.extend_from_slice(&self.dst[..4]);
            h.extend_from_slice(&self.ext);
            let c = reference(&h).checksum();
            h[10..12].copy_from_slice(&c.to_be_bytes());
        }
        h
    }

    pub fn pseudo(&self, protocol: u8, len: usize) -> Sum {
        let mut p = Vec::new();
        if self.v6 {
            p.extend_from_slice(&self.src);
            p.extend_from_slice(&self.dst);
            p.extend_from_slice(&(len as u32).to_be_bytes());
            p.extend_from_slice(&[0, 0, 0, protocol]);
        } else {
            p.extend_from_slice(&self.src[..4]);
            p.extend_from_slice(&self.dst[..4]);
            p.extend_from_slice(&[0, protocol]);
            p.extend_from_slice(&(len as u16).to_be_bytes());
        }
        reference(&p)
    }
}

/// TCP header fields.
#[derive(Clone, Debug)]
pub struct Tcp {
    pub sport: u16,
    pub dport: u16,
    pub seq: u32,
    pub ack: u32,
    /// The low 9 bits of the word at offset 12.
    pub flags: u16,
    pub window: u16,
    pub urgent: u16,
    /// Raw options, a multiple of 4 bytes.
    pub options: Vec<u8>,
}

pub const FIN: u16 = 0x001;
pub const SYN: u16 = 0x002;
pub const RST: u16 = 0x004;
pub const PSH: u16 = 0x008;
pub const ACK: u16 = 0x010;
pub const URG: u16 = 0x020;
pub const ECE: u16 = 0x040;
pub const CWR: u16 = 0x080;

impl Tcp {
    pub fn new() -> Tcp {
        Tcp {
            sport: 40000,
            dport: 5201,
            seq: 1_000_000,
            ack: 77,
            flags: ACK,
            window: 502,
            urgent: 0,
            // NOP NOP timestamps.
            options: vec![1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2],
        }
    }
}

/// How the transport checksum field is filled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Csum {
    /// Complete and correct.
    Full,
    /// The pseudo-header sum (partial form).
    Partial,
    /// Zero (UDP: none).
    Zero,
}

fn finish(ip: &Ip, protocol: u8, mut t: Vec<u8>, at: usize, csum: Csum) -> Vec<u8> {
    let p = ip.pseudo(protocol, t.len());
    let v = match csum {
        Csum::Full if protocol == 17 => p.add(reference(&t)).udp_checksum(),
        Csum::Full => p.add(reference(&t)).checksum(),
        Csum::Partial => p.value(),
        Csum::Zero => 0,
    };
    t[at..at + 2].copy_from_slice(&v.to_be_bytes());
    let mut pkt = ip.header(protocol, t.len());
    pkt.extend_from_slice(&t);
    pkt
}

/// A TCP packet.
pub fn tcp(ip: &Ip, tcp: &Tcp, payload: &[u8], csum: Csum) -> Vec<u8> {
    let mut t = Vec::new();
    t.extend_from_slice(&tcp.sport.to_be_bytes());
    t.extend_from_slice(&tcp.dport.to_be_bytes());
    t.extend_from_slice(&tcp.seq.to_be_bytes());
    t.extend_from_slice(&tcp.ack.to_be_bytes());
    let doff = (20 + tcp.options.len()) as u16 / 4;
    t.extend_from_slice(&(doff << 12 | tcp.flags).to_be_bytes());
    t.extend_from_slice(&tcp.window.to_be_bytes());
    t.extend_from_slice(&[0, 0]);
    t.extend_from_slice(&tcp.urgent.to_be_bytes());
    t.extend_from_slice(&tcp.options);
    t.extend_from_slice(payload);
    finish(ip, 6, t, 16, csum)
}

/// A UDP datagram.
pub fn udp(ip: &Ip, sport: u16, dport: u16, payload: &[u8], csum: Csum) -> Vec<u8> {
    let mut t = Vec::new();
    t.extend_from_slice(&sport.to_be_bytes());
    t.extend_from_slice(&dport.to_be_bytes());
    t.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    t.extend_from_slice(&[0, 0]);
    t.extend_from_slice(payload);
    finish(ip, 17, t, 6, csum)
}

/// A payload whose bytes depend on their offset in the flow.
pub fn payload(offset: usize, len: usize, salt: u8) -> Vec<u8> {
    (offset..offset + len)
        .map(|i| {
            (i as u8)
                .wrapping_mul(31)
                .wrapping_add(salt ^ (i >> 8) as u8)
        })
        .collect()
}

/// The segments a sender with this MSS sends for `sizes`: IDs and
/// sequence numbers advance, CWR (if set) only on the first, FIN/PSH
/// (if set) only on the last.
pub fn tcp_train(ip: &Ip, t: &Tcp, sizes: &[usize], salt: u8) -> Vec<Vec<u8>> {
    let mut off = 0;
    let n = sizes.len();
    sizes
        .iter()
        .enumerate()
        .map(|(i, &len)| {
            let ip = nth(ip, i);
            let mut t = t.clone();
            t.seq = t.seq.wrapping_add(off as u32);
            if i > 0 {
                t.flags &= !CWR;
            }
            if i + 1 < n {
                t.flags &= !(FIN | PSH);
            }
            let p = tcp(&ip, &t, &payload(off, len, salt), Csum::Full);
            off += len;
            p
        })
        .collect()
}

/// The IP header of packet `i` of a flow that starts with `ip`: the
/// identification advances by one per packet, as segmentation numbers them.
fn nth(ip: &Ip, i: usize) -> Ip {
    let mut ip = ip.clone();
    ip.ident = ip.ident.wrapping_add(i as u16);
    ip
}

/// Datagrams of one flow with these payload sizes and advancing IDs.
pub fn udp_train(
    ip: &Ip,
    sport: u16,
    dport: u16,
    sizes: &[usize],
    csum: Csum,
    salt: u8,
) -> Vec<Vec<u8>> {
    let mut off = 0;
    sizes
        .iter()
        .enumerate()
        .map(|(i, &len)| {
            let ip = nth(ip, i);
            let p = udp(&ip, sport, dport, &payload(off, len, salt), csum);
            off += len;
            p
        })
        .collect()
}

/// Metadata of a plain packet with these bytes.
pub fn meta_of(bytes: &[u8], csum: ChecksumState) -> PacketMeta {
    let mut pool = Pool::new(1, 0);
    let id = pool.alloc().expect("one buffer");
    PacketMeta {
        l4: l4_of(bytes) as u16,
        csum,
        flow_hash: 0xabcd,
        tunnel: 3,
        inner_l4: 99,
        ..*pool.meta(id)
    }
}

/// Where the transport header of IP packet `bytes` starts (after IPv4
/// options or IPv6 destination options); 0 when it cannot be told.
pub fn l4_of(bytes: &[u8]) -> usize {
    if bytes.is_empty() {
        0
    } else if bytes[0] >> 4 == 4 {
        (bytes[0] & 0x0f) as usize * 4
    } else if bytes.len() < 40 {
        0
    } else {
        let mut next = bytes[6];
        let mut at = 40;
        while next == 60 {
            next = bytes[at];
            at += (bytes[at + 1] as usize + 1) * 8;
        }
        at
    }
}

/// Metadata of a super-packet in the partial convention.
pub fn super_meta(bytes: &[u8], kind: GsoKind, segment_size: u16) -> PacketMeta {
    let l4 = l4_of(bytes) as u16;
    let off = if kind == GsoKind::Udp { 6 } else { 16 };
    PacketMeta {
        gso: Some(Gso { kind, segment_size }),
        ..meta_of(
            bytes,
            ChecksumState::Partial {
                start: l4,
                offset: l4 + off,
            },
        )
    }
}

/// An Ethernet header to put before IP packets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Eth {
    pub dst: [u8; 6],
    pub src: [u8; 6],
    /// One 802.1Q tag (TPID 0x8100) with this TCI.
    pub vlan: Option<u16>,
}

impl Eth {
    pub fn new() -> Eth {
        Eth {
            dst: [0x02, 0, 0, 0, 0, 0x02],
            src: [0x02, 0, 0, 0, 0, 0x01],
            vlan: None,
        }
    }

    pub fn tagged(vlan: u16) -> Eth {
        Eth {
            vlan: Some(vlan),
            ..Eth::new()
        }
    }

    /// Bytes of the header: where the IP header starts.
    pub fn hlen(&self) -> usize {
        if self.vlan.is_some() {
            18
        } else {
            14
        }
    }

    pub fn header(&self, ethertype: u16) -> Vec<u8> {
        let mut h = Vec::new();
        h.extend_from_slice(&self.dst);
        h.extend_from_slice(&self.src);
        if let Some(tci) = self.vlan {
            h.extend_from_slice(&0x8100u16.to_be_bytes());
            h.extend_from_slice(&tci.to_be_bytes());
        }
        h.extend_from_slice(&ethertype.to_be_bytes());
        h
    }

    /// The frame carrying IP packet `pkt` (EtherType by its version).
    pub fn wrap(&self, pkt: &[u8]) -> Vec<u8> {
        let ty = if pkt[0] >> 4 == 6 { 0x86dd } else { 0x0800 };
        let mut f = self.header(ty);
        f.extend_from_slice(pkt);
        f
    }

    /// An ARP request frame (not IP).
    pub fn arp(&self) -> Vec<u8> {
        let mut f = self.header(0x0806);
        f.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
        f.extend_from_slice(&self.src);
        f.extend_from_slice(&[10, 201, 0, 1]);
        f.extend_from_slice(&[0; 6]);
        f.extend_from_slice(&[10, 201, 0, 2]);
        f
    }

    /// The metadata of the IP packet with metadata `m`, framed: `l3`,
    /// `l4` and a partial checksum's offsets move by the header.
    pub fn meta(&self, m: PacketMeta) -> PacketMeta {
        let n = self.hlen() as u16;
        PacketMeta {
            l3: m.l3 + n,
            l4: if m.l4 == 0 { 0 } else { m.l4 + n },
            csum: match m.csum {
                ChecksumState::Partial { start, offset } => ChecksumState::Partial {
                    start: start + n,
                    offset: offset + n,
                },
                c => c,
            },
            ..m
        }
    }
}

/// The `link` of [`Gro::coalesce`](crate::gro::Gro::coalesce) for IP
/// packets only.
pub fn ip_link(_: &PacketMeta) -> InnerLink {
    InnerLink::Ip
}

/// The `link` of [`Gro::coalesce`](crate::gro::Gro::coalesce) for
/// Ethernet frames only.
pub fn eth_link(_: &PacketMeta) -> InnerLink {
    InnerLink::Ethernet
}

/// A packet in the pool with these bytes and metadata.
pub fn load(pool: &mut Pool, bytes: &[u8], meta: PacketMeta) -> PacketId {
    let id = pool.alloc().expect("test pool too small");
    assert!(pool.fill(id, bytes));
    *pool.meta_mut(id) = meta;
    id
}

/// A vector of one packet [`load`]ed with these bytes and metadata.
pub fn vector_of(pool: &mut Pool, bytes: &[u8], meta: PacketMeta) -> crate::vector::PacketVector {
    let mut v = crate::vector::PacketVector::new();
    v.push(load(pool, bytes, meta)).expect("an empty vector");
    v
}

pub fn out_bytes(pool: &Pool, out: &PacketVector) -> Vec<Vec<u8>> {
    out.as_slice()
        .iter()
        .map(|&id| pool.data(id).to_vec())
        .collect()
}

pub fn ip_strategy() -> impl Strategy<Value = Ip> {
    (
        any::<bool>(),
        any::<[u8; 16]>(),
        any::<[u8; 16]>(),
        any::<u8>(),
        1u8..,
        any::<bool>(),
        any::<u16>(),
        0u32..1 << 20,
    )
        .prop_map(|(v6, src, dst, tos, ttl, df, ident, flow_label)| Ip {
            v6,
            src,
            dst,
            tos,
            ttl,
            df: df && !v6,
            ident: if v6 { 0 } else { ident },
            flow_label: if v6 { flow_label } else { 0 },
            ext: Vec::new(),
        })
}

pub fn tcp_strategy() -> impl Strategy<Value = Tcp> {
    (
        any::<(u16, u16, u32, u32, u16, u16)>(),
        prop::sample::select(vec![ACK, ACK | ECE, 0, ACK | 0x100]),
        any::<bool>(),
        prop::collection::vec(any::<u8>(), 0..=10).prop_map(|w| {
            let mut o = w;
            o.truncate(o.len() / 4 * 4);
            o
        }),
    )
        .prop_map(
            |((sport, dport, seq, ack, window, urgent), flags, cwr, options)| Tcp {
                sport,
                dport,
                seq,
                ack,
                flags: flags | if cwr { CWR } else { 0 },
                window,
                urgent,
                options,
            },
        )
}

/// Sizes of a train: `n` segments of `mss`, the last `last` (≤ mss).
pub fn sizes(n: usize, mss: usize, last: usize) -> Vec<usize> {
    let mut s = vec![mss; n];
    s[n - 1] = last.clamp(1, mss);
    s
}

pub fn load_all(pool: &mut Pool, pkts: &[Vec<u8>], csum: ChecksumState) -> PacketVector {
    let mut v = PacketVector::new();
    for p in pkts {
        let id = load(pool, p, meta_of(p, csum));
        v.push(id).unwrap();
    }
    v
}

pub fn metas(pool: &Pool, v: &PacketVector) -> Vec<PacketMeta> {
    v.as_slice().iter().map(|&id| *pool.meta(id)).collect()
}

pub fn eth_strategy() -> impl Strategy<Value = Eth> {
    (
        any::<[u8; 6]>(),
        any::<[u8; 6]>(),
        prop::option::of(any::<u16>()),
    )
        .prop_map(|(dst, src, vlan)| Eth { dst, src, vlan })
}
