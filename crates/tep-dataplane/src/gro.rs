//! Receive coalescing (GRO) in software: consecutive TCP segments or
//! same-size UDP datagrams of one flow in a vector become one super-packet
//! (the convention of [`crate::gso`]), so that the TUN write and the host
//! stack see one packet instead of tens.
//!
//! The rules are Linux's (net/ipv4/tcp_offload.c `tcp_gro_receive`,
//! net/ipv4/af_inet.c `inet_gro_receive`, net/ipv6/ip6_offload.c,
//! net/ipv4/udp_offload.c `udp_gro_receive_segment`), with these choices:
//! - Packets and frames: the caller says per packet what it is (the `link`
//!   argument of [`Gro::coalesce`]; after decapsulation, the tunnel's kind:
//!   VXLAN and Geneve carry Ethernet). An [`InnerLink::Ip`] packet is an IP
//!   packet at the data start. An [`InnerLink::Ethernet`] packet is a
//!   frame: its IP header is found by reading the Ethernet header (after
//!   up to two VLAN tags, EtherType 0x0800 / 0x86DD agreeing with the IP
//!   version), never from `meta.l3`, which is 0 both for an IP packet and
//!   for a frame without IP and so cannot tell them apart. A frame that
//!   does not carry IP (ARP, …, or a disagreeing EtherType) is opaque: it
//!   passes untouched and touches no flow. Within a frame the rules below
//!   apply to the IP packet after the Ethernet header, and the whole
//!   Ethernet header (MACs, tags, EtherType) is part of the flow key, as
//!   Linux's `gro_list_prepare` compares MAC headers.
//! - A flow is the tunnel (`meta.tunnel`), the Ethernet header of a frame,
//!   IP version, addresses, protocol and ports. Any other header difference
//!   (TOS / traffic class, flow label, TTL / hop limit, DF, TCP ack,
//!   window, options, flags) ends the flow's super-packet and the packet
//!   starts a new one, as Linux flushes on them. Linux keys IPv6 flows on the flow label too; ending instead
//!   means a flow is never merged around one of its own packets.
//! - A packet of a flow that cannot merge (bad checksum, a fragment, IP
//!   options, extension headers, a SYN, no payload, …) passes untouched and
//!   ends its flow's super-packet, so nothing of a flow is reordered. A
//!   packet whose ports cannot be read (a non-first fragment, extension
//!   headers) ends every flow between its addresses in its tunnel.
//! - IPv4 identification must be the head's + the packets merged so far,
//!   for TCP and UDP alike (Linux checks it for TCP only, and also accepts
//!   a fixed identification with DF): [`crate::gso::segment`] numbers
//!   segments that way, so segmenting gives the packets back byte for byte.
//! - Checksums must be known good: `meta.csum` Verified, or Partial at the
//!   transport's checksum (a locally built packet, completed later), or
//!   checked here. A UDP checksum of zero counts as good; the super-packet
//!   then has a real one after segmentation.
//! - A super-packet's IP packet holds at most 65535 bytes (Linux's
//!   `gro_max_size` default; a frame adds its Ethernet header), the whole
//!   fits the pool's data room, and for UDP at most 64 datagrams (Linux's
//!   `UDP_GRO_CNT_MAX`).
//!
//! Cost: one checksum pass per packet not already Verified, and one copy
//! of each merged payload, into the head's buffer (see [`crate::gso`]'s
//! "Cost").
//! No allocation after [`Gro::new`].

use crate::buffer::{ChecksumState, Gso, GsoKind, PacketId, PacketMeta, Pool, Tail};
use crate::geometry::{
    ethertype_agrees, holds_pseudo_sum, ip_start, pseudo_header, set_ip_len, InnerLink, MAX_IP_LEN,
    PROTO_TCP, PROTO_UDP,
};
use crate::vector::{PacketVector, VECTOR_SIZE};
use tep_csum::Sum;
use tep_wire::tcp::CHECKSUM_OFFSET as TCP_CSUM;
use tep_wire::udp::CHECKSUM_OFFSET as UDP_CSUM;

/// Flows one [`Gro`] follows at a time within a vector.
pub const GRO_FLOWS: usize = 32;

/// Linux's `UDP_GRO_CNT_MAX` (net/ipv4/udp_offload.c).
const UDP_GRO_MAX: u16 = 64;

// Bits of the TCP header's 16-bit word at offset 12 (RFC 9293 §3.1).
const FIN: u16 = 0x001;
const SYN: u16 = 0x002;
const RST: u16 = 0x004;
const PSH: u16 = 0x008;
const URG: u16 = 0x020;
const CWR: u16 = 0x080;

/// End of a member chain.
const END: u16 = u16::MAX;

/// An open super-packet in the making.
#[derive(Clone, Copy, Debug, Default)]
struct Flow {
    /// Hash of the tunnel, Ethernet header, version and addresses.
    addr_hash: u32,
    /// `addr_hash` with the protocol and ports.
    hash: u32,
    /// Vector position of the head and of the last member.
    head: u16,
    last: u16,
    /// Payload of the head: every member but the last has as much.
    mss: u16,
    /// Packets merged so far, the head included.
    count: u16,
    /// Bytes of the super-packet so far.
    len: u32,
    /// TCP sequence number the next member must have.
    next_seq: u32,
    /// IPv4 identification the next member must have.
    next_id: u16,
    /// Where the head's IP header starts (after its Ethernet header).
    l3: u8,
}

impl Flow {
    /// A flow headed by candidate `c` (`len` bytes) at vector position `pos`.
    fn start(c: &Candidate, pos: usize, len: usize) -> Flow {
        Flow {
            addr_hash: c.addr_hash,
            hash: c.hash,
            head: pos as u16,
            last: pos as u16,
            mss: c.payload as u16,
            count: 1,
            len: len as u32,
            next_seq: c.seq.wrapping_add(c.payload as u32),
            next_id: c.ident.wrapping_add(1),
            l3: c.l3 as u8,
        }
    }

    /// Takes candidate `c` as the flow's next member; returns whether that
    /// ends the super-packet: a short packet, PSH or FIN (Linux: `flush =
    /// len < mss` and the flags check), or UDP's cap.
    fn take(&mut self, c: &Candidate) -> bool {
        self.count += 1;
        self.len += c.payload as u32;
        self.next_seq = self.next_seq.wrapping_add(c.payload as u32);
        self.next_id = self.next_id.wrapping_add(1);
        c.payload < self.mss as usize
            || (c.tcp && c.flags & (PSH | FIN) != 0)
            || (!c.tcp && self.count >= UDP_GRO_MAX)
    }
}

/// A super-packet to build: its head's vector position and IP offset.
#[derive(Clone, Copy, Debug, Default)]
struct Head {
    pos: u16,
    l3: u8,
}

/// What the first pass learns about a packet.
#[derive(Clone, Copy, Debug)]
enum Seen {
    /// Not TCP or UDP over IP (or nothing to key on): touches no flow.
    Opaque,
    /// TCP or UDP that cannot merge: passes, and ends the flow(s) it may
    /// belong to (all flows between its addresses when `hash` is None).
    Closes { addr_hash: u32, hash: Option<u32> },
    /// A packet that may merge or start a super-packet.
    Candidate(Candidate),
}

/// Offsets but `l3` are within the IP packet (from its header's start).
#[derive(Clone, Copy, Debug)]
struct Candidate {
    addr_hash: u32,
    hash: u32,
    /// Where the IP header starts: 0, or after the Ethernet header.
    l3: usize,
    v6: bool,
    tcp: bool,
    l4: usize,
    /// Transport header length.
    th: usize,
    payload: usize,
    seq: u32,
    /// The TCP word at offset 12 (data offset and flags).
    flags: u16,
    ident: u16,
}

impl Candidate {
    /// Whether it may start a super-packet: Linux flushes at once a segment
    /// with URG, PSH, RST, SYN or FIN (`tcp_gro_receive`'s final check).
    fn can_head(&self) -> bool {
        !self.tcp || self.flags & (SYN | RST | URG | PSH | FIN) == 0
    }
}

/// A GRO engine: a fixed flow table and per-vector bookkeeping, allocated
/// once. One per worker.
#[derive(Debug)]
pub struct Gro {
    flows: [Flow; GRO_FLOWS],
    nflows: usize,
    /// Per vector position: the next member of its super-packet, or END.
    next: [u16; VECTOR_SIZE],
    /// The heads that took at least one packet.
    heads: [Head; VECTOR_SIZE],
    nheads: usize,
    /// Per vector position: merged into a head.
    merged: [bool; VECTOR_SIZE],
    /// Packets that could have started a flow with the table full (they
    /// pass uncoalesced).
    pub table_full: u64,
}

impl Default for Gro {
    fn default() -> Self {
        Gro::new()
    }
}

fn mix(h: u32, w: u32) -> u32 {
    (h ^ w).wrapping_mul(0x9e37_79b1).rotate_left(15)
}

fn hash_bytes(mut h: u32, bytes: &[u8]) -> u32 {
    for c in bytes.chunks(4) {
        let mut w = [0u8; 4];
        w[..c.len()].copy_from_slice(c);
        h = mix(h, u32::from_be_bytes(w));
    }
    h
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// Classifies a packet or frame (see [`Seen`]).
fn inspect(frame: &[u8], meta: &PacketMeta, link: InnerLink) -> Seen {
    let Some(l3) = ip_start(frame, link) else {
        return Seen::Opaque;
    };
    let data = &frame[l3..];
    let Some(&b0) = data.first() else {
        return Seen::Opaque;
    };
    // Key: tunnel, version, addresses; then protocol and ports.
    let (v6, l4, protocol, addrs, ports_readable, ip_ok) = match b0 >> 4 {
        4 if data.len() >= 20 => {
            let ihl = (b0 & 0x0f) as usize * 4;
            let frag = be16(data, 6);
            let first_fragment = frag & 0x1fff == 0;
            let ok = b0 == 0x45
                && frag & 0xbfff == 0
                && be16(data, 2) as usize == data.len()
                && Sum::of(&data[..20]).verifies();
            (false, ihl, data[9], &data[12..20], first_fragment, ok)
        }
        6 if data.len() >= 40 => {
            let ok = 40 + be16(data, 4) as usize == data.len();
            (true, 40, data[6], &data[8..40], true, ok)
        }
        _ => return Seen::Opaque,
    };
    if !ethertype_agrees(frame, l3, v6) {
        return Seen::Opaque;
    }
    let link_hash = hash_bytes(mix(meta.tunnel, b0 as u32 >> 4), &frame[..l3]);
    let addr_hash = hash_bytes(link_hash, addrs);
    if protocol != PROTO_TCP && protocol != PROTO_UDP {
        // IPv6 extension headers may hide TCP or UDP of a flow.
        return match protocol {
            0 | 43 | 44 | 51 | 60 if v6 => Seen::Closes {
                addr_hash,
                hash: None,
            },
            _ => Seen::Opaque,
        };
    }
    let tcp = protocol == PROTO_TCP;
    let Some(ports) = data.get(l4..l4 + 4).filter(|_| ports_readable && l4 >= 20) else {
        return Seen::Closes {
            addr_hash,
            hash: None,
        };
    };
    let hash = hash_bytes(mix(addr_hash, protocol as u32), ports);
    let closes = Seen::Closes {
        addr_hash,
        hash: Some(hash),
    };
    if !ip_ok || meta.gso.is_some() || meta.drop.is_some() {
        return closes;
    }
    let (th, seq, flags) = if tcp {
        let Some(t) = data.get(l4..l4 + 20) else {
            return closes;
        };
        let th = (t[12] >> 4) as usize * 4;
        let seq = u32::from_be_bytes([t[4], t[5], t[6], t[7]]);
        (th, seq, be16(t, 12))
    } else {
        if data.len() < l4 + 8 || be16(data, l4 + 4) as usize != data.len() - l4 {
            return closes;
        }
        (8, 0, 0)
    };
    if (tcp && th < 20) || l4 + th >= data.len() {
        // A TCP data offset under 5 words, or no payload.
        return closes;
    }
    if !checksum_good(data, meta, tcp, l3, l4, protocol) {
        return closes;
    }
    Seen::Candidate(Candidate {
        addr_hash,
        hash,
        l3,
        v6,
        tcp,
        l4,
        th,
        payload: data.len() - l4 - th,
        seq,
        flags,
        ident: if v6 { 0 } else { be16(data, 4) },
    })
}

/// Whether the transport checksum of IP packet `data` is known good (see
/// the module doc). `meta.csum`'s offsets count from the frame start, `l3`
/// bytes before `data`.
fn checksum_good(
    data: &[u8],
    meta: &PacketMeta,
    tcp: bool,
    l3: usize,
    l4: usize,
    protocol: u8,
) -> bool {
    let field = l4 + if tcp { TCP_CSUM } else { UDP_CSUM };
    match meta.csum {
        ChecksumState::Verified => return true,
        ChecksumState::Partial { start, offset } => {
            return start as usize == l3 + l4 && offset as usize == l3 + field
        }
        ChecksumState::None | ChecksumState::Zero => {}
    }
    if !tcp && be16(data, field) == 0 {
        return true;
    }
    pseudo_header(data, protocol, data.len() - l4)
        .add(Sum::of(&data[l4..]))
        .verifies()
}

/// Whether `c` (bytes `d`) continues `flow` whose head has bytes `h`, and
/// fits in `limit` bytes. The key (Ethernet header, addresses, ports) is
/// already equal.
fn continues(flow: &Flow, h: &[u8], d: &[u8], c: &Candidate, limit: usize) -> bool {
    let (h, d) = (&h[c.l3..], &d[c.l3..]);
    let ip_same = if c.v6 {
        // Version, traffic class, flow label; hop limit.
        h[..4] == d[..4] && h[7] == d[7]
    } else {
        // TOS; flags (DF); TTL; identification + 1.
        h[1] == d[1] && h[6..9] == d[6..9] && c.ident == flow.next_id
    };
    if !ip_same || c.payload > flow.mss as usize || flow.len as usize + c.payload > limit {
        return false;
    }
    if !c.tcp {
        return flow.count < UDP_GRO_MAX;
    }
    let l4 = c.l4;
    let head_flags = be16(h, l4 + 12);
    c.seq == flow.next_seq
        && c.flags & CWR == 0
        && (head_flags ^ c.flags) & !(CWR | FIN | PSH) == 0
        // Ack, then window; the equal data offsets make the options equal
        // in length.
        && h[l4 + 8..l4 + 12] == d[l4 + 8..l4 + 12]
        && h[l4 + 14..l4 + 16] == d[l4 + 14..l4 + 16]
        && h[l4 + 20..l4 + c.th] == d[l4 + 20..l4 + c.th]
}

/// Whether `h` and `d` (both candidates of the same version and layout,
/// IP header at `c.l3`) carry the same flow key.
fn same_key(h: &[u8], d: &[u8], c: &Candidate, h_tunnel: u32, d_tunnel: u32) -> bool {
    if h[..c.l3] != d[..c.l3] {
        return false;
    }
    let (h, d) = (&h[c.l3..], &d[c.l3..]);
    let ip = if c.v6 {
        h[0] >> 4 == 6 && h[6] == d[6] && h[8..40] == d[8..40]
    } else {
        h[0] >> 4 == 4 && h[9] == d[9] && h[12..20] == d[12..20]
    };
    ip && h_tunnel == d_tunnel && h[c.l4..c.l4 + 4] == d[c.l4..c.l4 + 4]
}

/// Writes a super-packet's headers for its size (IP packet at `buf`,
/// transport header at `l4` in it, `ip_len` bytes in all): IP length and
/// IPv4 header checksum, UDP length, the pseudo-header sum in the
/// transport checksum (the partial convention), and for TCP the PSH / FIN
/// of its last segment (`last_flags`).
fn finish_headers(
    buf: &mut [u8],
    v6: bool,
    l4: usize,
    protocol: u8,
    ip_len: usize,
    last_flags: u16,
) {
    set_ip_len(buf, v6, ip_len, None);
    let partial = pseudo_header(buf, protocol, ip_len - l4).value();
    if protocol == PROTO_TCP {
        let f = be16(buf, l4 + 12) | (last_flags & (PSH | FIN));
        buf[l4 + 12..l4 + 14].copy_from_slice(&f.to_be_bytes());
        buf[l4 + TCP_CSUM..l4 + TCP_CSUM + 2].copy_from_slice(&partial.to_be_bytes());
    } else {
        buf[l4 + 4..l4 + 6].copy_from_slice(&((ip_len - l4) as u16).to_be_bytes());
        buf[l4 + UDP_CSUM..l4 + UDP_CSUM + 2].copy_from_slice(&partial.to_be_bytes());
    }
}

/// A super-packet's segmentation metadata.
fn super_gso(tcp: bool, v6: bool, mss: usize) -> Gso {
    Gso {
        kind: match (tcp, v6) {
            (true, false) => GsoKind::Tcp4,
            (true, true) => GsoKind::Tcp6,
            (false, _) => GsoKind::Udp,
        },
        segment_size: mss as u16,
    }
}

/// A super-packet's checksum state: partial at its transport header `l4`
/// (from the frame start).
fn super_csum(tcp: bool, l4: usize) -> ChecksumState {
    let offset = l4 + if tcp { TCP_CSUM } else { UDP_CSUM };
    ChecksumState::Partial {
        start: l4 as u16,
        offset: offset as u16,
    }
}

/// Whether a datagram's tunnel header `d` (of a `len`-byte datagram)
/// equals the head's `h`, but for a length field holding its own length.
fn same_tunnel_header(
    h: &[u8],
    d: &[u8],
    len: usize,
    length_field: Option<(usize, usize)>,
) -> bool {
    match length_field {
        Some((at, after)) if at + 2 <= h.len() => {
            h[..at] == d[..at]
                && h[at + 2..] == d[at + 2..]
                && usize::from(be16(d, at)) + after == len
        }
        _ => h == d,
    }
}

/// What [`merge_train`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TrainMerge {
    /// Datagrams merged into the head.
    pub merged: usize,
    /// Where the datagrams not merged start in the train's payload, if
    /// any are left.
    pub next: Option<usize>,
}

/// GRO for a UDP GRO train without copying its payload.
///
/// `head` is a datagram of train `rest` ([`crate::udp_train::detach_at`] copied
/// it), decapsulated up to but not including `decap-output`: its tunnel
/// header starts at `meta.udp_payload` (after the outer IP and UDP headers,
/// where they are in the buffer), `meta.inner` is where the inner packet
/// (`link`: IP packet or Ethernet frame) starts. The datagrams of `rest`
/// from payload offset `from` on (`segment` bytes each, the last may be
/// shorter) that carry the same tunnel header as the head (byte for byte,
/// so the same tunnel and the same decapsulation) and whose inner packets
/// [`Gro::coalesce`] would merge into the head's, by the same rules,
/// become the head's [`Tail`]: the head becomes a super-packet (headers as
/// `coalesce` writes them) whose payload beyond the first segment stays
/// where the socket put it. `trusted`: the inner checksums need no check
/// (remote checksum offload, whose inner checksum the receiver derives
/// from the verified outer one); otherwise each is verified, as
/// `coalesce` does. `length_field`: where the tunnel header has a 16-bit
/// length of the datagram's bytes after the first `.1` (GTP-U: `(2, 8)`);
/// it may differ from the head's where it holds the datagram's own length.
///
/// `rest` is not changed; the tail holds a reference on it. The datagrams
/// after a merged run (`next`) are for the caller to decapsulate next,
/// before anything received after them.
#[allow(clippy::too_many_arguments)]
pub fn merge_train(
    pool: &mut Pool,
    head: PacketId,
    rest: PacketId,
    segment: usize,
    from: usize,
    link: InnerLink,
    trusted: bool,
    length_field: Option<(usize, usize)>,
) -> TrainMerge {
    let none = TrainMerge::default();
    let m = *pool.meta(head);
    let (hdr, inner) = (usize::from(m.udp_payload), usize::from(m.inner));
    if inner < hdr || m.tail.is_some() || m.gso.is_some() || segment == 0 {
        return none;
    }
    let rest_hdr = usize::from(pool.meta(rest).udp_payload);
    let hd = pool.data(head);
    let (tunnel, frame) = (&hd[hdr..inner], &hd[inner..]);
    let t = tunnel.len();
    // Offsets in the frame of the head's IP and TCP headers.
    let (il3, il4) = (
        usize::from(m.inner_l3).saturating_sub(inner),
        usize::from(m.inner_l4).saturating_sub(inner),
    );
    let head_meta = PacketMeta {
        gso: None,
        drop: None,
        csum: if m.inner_proto == PROTO_TCP && holds_pseudo_sum(frame, il3, il4, PROTO_TCP) {
            ChecksumState::Verified
        } else {
            m.csum
        },
        ..m
    };
    let c0 = match inspect(frame, &head_meta, link) {
        Seen::Candidate(c) if c.tcp && c.can_head() => c,
        _ => return none,
    };
    let limit = (MAX_IP_LEN + c0.l3).min(pool.data_room());
    let mut flow = Flow::start(&c0, 0, frame.len());
    let member_meta = PacketMeta {
        csum: if trusted {
            ChecksumState::Verified
        } else {
            ChecksumState::None
        },
        ..head_meta
    };
    let members = pool.data(rest).get(rest_hdr + from..).unwrap_or_default();
    let mut merged = 0;
    let mut last_flags = 0;
    for dg in members.chunks(segment) {
        if dg.len() <= t || !same_tunnel_header(tunnel, &dg[..t], dg.len(), length_field) {
            break;
        }
        let d = &dg[t..];
        let partial = !trusted && holds_pseudo_sum(d, c0.l3, c0.l3 + c0.l4, PROTO_TCP);
        let mm = PacketMeta {
            csum: if partial {
                ChecksumState::Verified
            } else {
                member_meta.csum
            },
            ..member_meta
        };
        let Seen::Candidate(c) = inspect(d, &mm, link) else {
            break;
        };
        if !(c.tcp
            && c.hash == flow.hash
            && c.l3 == c0.l3
            && same_key(frame, d, &c, 0, 0)
            && continues(&flow, frame, d, &c, limit))
        {
            break;
        }
        merged += 1;
        last_flags = c.flags;
        if flow.take(&c) {
            break;
        }
    }
    if merged == 0 {
        return none;
    }
    let kept = (merged * segment).min(members.len());
    let out = TrainMerge {
        merged,
        next: (kept < members.len()).then_some(from + kept),
    };
    let (l3, l4) = (c0.l3, c0.l3 + c0.l4);
    let buf = &mut pool.data_mut(head)[inner + l3..];
    finish_headers(
        buf,
        c0.v6,
        c0.l4,
        PROTO_TCP,
        flow.len as usize - l3,
        last_flags,
    );
    let meta = pool.meta_mut(head);
    meta.gso = Some(super_gso(true, c0.v6, c0.payload));
    meta.csum = super_csum(true, l4);
    let tail = Tail {
        buf: rest,
        start: (rest_hdr + from) as u32,
        len: kept as u32,
        stride: segment as u16,
        skip: (t + l4 + c0.th) as u16,
    };
    let kept_tail = pool.set_tail(head, tail);
    debug_assert!(kept_tail, "inside rest by construction");
    out
}

impl Gro {
    /// An engine with an empty table.
    pub fn new() -> Gro {
        Gro {
            flows: [Flow::default(); GRO_FLOWS],
            nflows: 0,
            next: [END; VECTOR_SIZE],
            heads: [Head::default(); VECTOR_SIZE],
            nheads: 0,
            merged: [false; VECTOR_SIZE],
            table_full: 0,
        }
    }

    /// Coalesces the packets of `vector` (inner IP packets and Ethernet
    /// frames, after decapsulation; `link` says which each one is, see the
    /// module doc) in place: each super-packet is built in its first
    /// packet's buffer, which keeps its position; merged packets are freed
    /// and removed, the others keep their order. Returns how many packets
    /// were merged away. A packet that merged with nothing is left exactly
    /// as it was (bytes and metadata).
    ///
    /// A super-packet gets `meta.gso = Some(Gso { Tcp4 | Tcp6 | Udp, first
    /// payload length })`, `meta.csum = Partial { l4, l4 + 16 | 6 }` with
    /// the pseudo-header sum in the field, IP (and UDP) lengths and the IPv4
    /// header checksum for its size, `l2 = 0`, `l3` (0, or the Ethernet
    /// header's length), `l4`, and for TCP the PSH / FIN of its last
    /// segment; in a frame every offset counts from the frame start. The
    /// flow table starts empty on every call.
    pub fn coalesce(
        &mut self,
        pool: &mut Pool,
        vector: &mut PacketVector,
        link: impl Fn(&PacketMeta) -> InnerLink,
    ) -> usize {
        self.nflows = 0;
        self.nheads = 0;
        let room = pool.data_room();
        let ids = vector.as_slice();
        for (pos, &id) in ids.iter().enumerate() {
            self.next[pos] = END;
            self.merged[pos] = false;
            let meta = pool.meta(id);
            match inspect(pool.data(id), meta, link(meta)) {
                Seen::Opaque => {}
                Seen::Closes { addr_hash, hash } => self.close(addr_hash, hash),
                Seen::Candidate(c) => {
                    let limit = (MAX_IP_LEN + c.l3).min(room);
                    self.offer(pool, ids, pos, &c, limit)
                }
            }
        }
        if self.nheads == 0 {
            return 0;
        }
        let mut merged = 0;
        for k in 0..self.nheads {
            merged += self.build(pool, vector.as_slice(), self.heads[k]);
        }
        let flags = &self.merged;
        let mut pos = 0;
        vector.retain(
            |_| {
                pos += 1;
                !flags[pos - 1]
            },
            |_| {},
        );
        merged
    }

    /// Ends the flows a non-mergeable packet may belong to.
    fn close(&mut self, addr_hash: u32, hash: Option<u32>) {
        let mut i = 0;
        while i < self.nflows {
            let f = &self.flows[i];
            if f.addr_hash == addr_hash && hash.is_none_or(|h| h == f.hash) {
                self.remove(i);
            } else {
                i += 1;
            }
        }
    }

    fn remove(&mut self, i: usize) {
        self.nflows -= 1;
        self.flows[i] = self.flows[self.nflows];
    }

    /// Merges candidate `c` at `pos` into its flow, or starts a flow.
    fn offer(&mut self, pool: &Pool, ids: &[PacketId], pos: usize, c: &Candidate, limit: usize) {
        let d = pool.data(ids[pos]);
        let tunnel = pool.meta(ids[pos]).tunnel;
        let found = self.flows[..self.nflows].iter().position(|f| {
            let head = ids[f.head as usize];
            f.hash == c.hash
                && usize::from(f.l3) == c.l3
                && same_key(pool.data(head), d, c, pool.meta(head).tunnel, tunnel)
        });
        if let Some(i) = found {
            let flow = self.flows[i];
            if continues(&flow, pool.data(ids[flow.head as usize]), d, c, limit) {
                self.next[flow.last as usize] = pos as u16;
                if flow.count == 1 {
                    self.heads[self.nheads] = Head {
                        pos: flow.head,
                        l3: flow.l3,
                    };
                    self.nheads += 1;
                }
                let f = &mut self.flows[i];
                f.last = pos as u16;
                if f.take(c) {
                    self.remove(i);
                }
                return;
            }
            self.remove(i);
        }
        if c.can_head() {
            if self.nflows < GRO_FLOWS {
                self.flows[self.nflows] = Flow::start(c, pos, d.len());
                self.nflows += 1;
            } else {
                self.table_full += 1;
            }
        }
    }

    /// Builds the super-packet headed at `head` and frees its other
    /// members; returns how many.
    fn build(&mut self, pool: &mut Pool, ids: &[PacketId], head: Head) -> usize {
        let (head_pos, l3) = (head.pos as usize, head.l3 as usize);
        let head = ids[head_pos];
        // Offsets within the IP packet, then `hdr` from the frame start.
        let h = &pool.data(head)[l3..];
        let v6 = h[0] >> 4 == 6;
        let (l4, protocol) = if v6 { (40, h[6]) } else { (20, h[9]) };
        let tcp = protocol == PROTO_TCP;
        let hdr = l3
            + l4
            + if tcp {
                (h[l4 + 12] >> 4) as usize * 4
            } else {
                8
            };
        let mut total = pool.data(head).len();
        let mss = total - hdr;
        let mut last_flags = 0;
        let mut members = 0;
        let mut m = self.next[head_pos];
        while m != END {
            let d = pool.data(ids[m as usize]);
            total += d.len() - hdr;
            if tcp {
                last_flags = be16(d, l3 + l4 + 12);
            }
            members += 1;
            m = self.next[m as usize];
        }
        let next = &self.next;
        {
            // The head grows in place; each member's payload is copied once.
            let mut at = pool.data(head).len();
            pool.set_len(head, total);
            let mut m = next[head_pos];
            while m != END {
                let id = ids[m as usize];
                let n = pool.data(id).len() - hdr;
                pool.copy_between(id, hdr..hdr + n, head, at);
                at += n;
                m = next[m as usize];
            }
            let buf = &mut pool.data_mut(head)[l3..];
            finish_headers(buf, v6, l4, protocol, total - l3, last_flags);
        }
        let meta = pool.meta_mut(head);
        meta.l2 = 0;
        meta.l3 = l3 as u16;
        meta.l4 = (l3 + l4) as u16;
        meta.gso = Some(super_gso(tcp, v6, mss));
        meta.csum = super_csum(tcp, l3 + l4);
        let mut m = self.next[head_pos];
        while m != END {
            pool.free(ids[m as usize]);
            self.merged[m as usize] = true;
            m = self.next[m as usize];
        }
        members
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffer::SUPER_PACKET_ROOM;
    use crate::gso::segment;
    use crate::testpkt::{self, Csum, Eth, Ip, Tcp, ACK, CWR, FIN, PSH, RST, SYN, URG};
    use crate::udp_train::UDP_MAX_SEGMENTS;

    fn load(pool: &mut Pool, pkts: &[Vec<u8>]) -> PacketVector {
        let mut v = PacketVector::new();
        for p in pkts {
            v.push(testpkt::load(
                pool,
                p,
                testpkt::meta_of(p, ChecksumState::None),
            ))
            .unwrap();
        }
        v
    }

    fn contents(pool: &Pool, v: &PacketVector) -> Vec<(Vec<u8>, PacketMeta)> {
        v.as_slice()
            .iter()
            .map(|&id| (pool.data(id).to_vec(), *pool.meta(id)))
            .collect()
    }

    /// Coalescing merges nothing and changes nothing.
    fn assert_unmerged(pkts: &[Vec<u8>]) {
        let mut pool = Pool::new(pkts.len() + 1, SUPER_PACKET_ROOM);
        let mut v = load(&mut pool, pkts);
        let before = contents(&pool, &v);
        assert_eq!(Gro::new().coalesce(&mut pool, &mut v, testpkt::ip_link), 0);
        assert_eq!(contents(&pool, &v), before);
    }

    fn train(sizes: &[usize]) -> Vec<Vec<u8>> {
        testpkt::tcp_train(&Ip::v4(), &Tcp::new(), sizes, 1)
    }

    /// Changes one packet of a train and fixes its checksums.
    fn with(ip: Ip, t: Tcp, payload_at: usize, len: usize) -> Vec<u8> {
        testpkt::tcp(&ip, &t, &testpkt::payload(payload_at, len, 1), Csum::Full)
    }

    fn second_ip() -> Ip {
        let mut ip = Ip::v4();
        ip.ident += 1;
        ip
    }

    fn second_tcp() -> Tcp {
        let mut t = Tcp::new();
        t.seq += 1000;
        t
    }

    #[test]
    fn a_tcp_train_becomes_one_super_packet_in_place() {
        let mut pool = Pool::new(8, SUPER_PACKET_ROOM);
        let mut t = Tcp::new();
        t.flags = ACK | PSH;
        let a = testpkt::tcp_train(&Ip::v4(), &t, &[1000, 1000, 500], 1);
        let other = testpkt::udp(&Ip::v6(), 1, 2, b"other", Csum::Full);
        let icmp = {
            let mut p = testpkt::udp(&Ip::v4(), 1, 2, b"icmp", Csum::Full);
            p[9] = 1;
            p[10..12].fill(0);
            let c = Sum::of(&p[..20]).checksum();
            p[10..12].copy_from_slice(&c.to_be_bytes());
            p
        };
        let pkts = [
            other.clone(),
            a[0].clone(),
            icmp.clone(),
            a[1].clone(),
            a[2].clone(),
        ];
        let mut v = load(&mut pool, &pkts);
        let head = v.as_slice()[1];
        assert_eq!(Gro::new().coalesce(&mut pool, &mut v, testpkt::ip_link), 2);
        assert_eq!(pool.available(), 8 - 3);
        assert_eq!(v.len(), 3);
        assert_eq!(v.as_slice()[1], head, "the head keeps its place");
        assert_eq!(pool.data(v.as_slice()[0]), &other[..]);
        assert_eq!(pool.data(v.as_slice()[2]), &icmp[..]);

        let s = pool.data(head);
        assert_eq!(s.len(), 20 + 32 + 2500);
        let ip = tep_wire::ipv4::Packet::new_checked(s).unwrap();
        assert!(ip.verify_checksum());
        assert_eq!((ip.total_len(), ip.ident()), (2552, 0x1234));
        let th = tep_wire::tcp::Packet::new_checked(&s[20..]).unwrap();
        assert_eq!(th.flags().bits(), ACK | PSH, "the last segment's PSH");
        assert_eq!(th.seq_number(), 1_000_000);
        assert_eq!(
            th.checksum(),
            Ip::v4().pseudo(6, 2532).value(),
            "the partial form"
        );
        assert_eq!(&s[52..], &testpkt::payload(0, 2500, 1)[..]);
        let m = pool.meta(head);
        assert_eq!(
            m.gso,
            Some(Gso {
                kind: GsoKind::Tcp4,
                segment_size: 1000
            })
        );
        assert_eq!(
            m.csum,
            ChecksumState::Partial {
                start: 20,
                offset: 36
            }
        );
        assert_eq!((m.l3, m.l4, m.tunnel, m.flow_hash), (0, 20, 3, 0xabcd));
    }

    #[test]
    fn interleaved_flows_merge_separately() {
        let mut pool = Pool::new(8, SUPER_PACKET_ROOM);
        let a = train(&[100, 100, 100]);
        let mut t = Tcp::new();
        t.sport += 1;
        let b = testpkt::tcp_train(&Ip::v4(), &t, &[200, 200], 2);
        let mut v = load(
            &mut pool,
            &[
                a[0].clone(),
                b[0].clone(),
                a[1].clone(),
                b[1].clone(),
                a[2].clone(),
            ],
        );
        assert_eq!(Gro::new().coalesce(&mut pool, &mut v, testpkt::ip_link), 3);
        let sizes: Vec<_> = v.as_slice().iter().map(|&id| pool.data(id).len()).collect();
        assert_eq!(sizes, [52 + 300, 52 + 400]);
    }

    #[test]
    fn linux_rules_that_prevent_a_merge() {
        let first = train(&[1000])[0].clone();
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("ttl", {
                let mut ip = second_ip();
                ip.ttl = 63;
                with(ip, second_tcp(), 1000, 1000)
            }),
            ("tos", {
                let mut ip = second_ip();
                ip.tos = 4;
                with(ip, second_tcp(), 1000, 1000)
            }),
            ("df", {
                let mut ip = second_ip();
                ip.df = false;
                with(ip, second_tcp(), 1000, 1000)
            }),
            ("ip id not +1", {
                let mut ip = second_ip();
                ip.ident += 1;
                with(ip, second_tcp(), 1000, 1000)
            }),
            ("seq gap", {
                let mut t = second_tcp();
                t.seq += 1;
                with(second_ip(), t, 1000, 1000)
            }),
            ("ack", {
                let mut t = second_tcp();
                t.ack += 1;
                with(second_ip(), t, 1000, 1000)
            }),
            ("window", {
                let mut t = second_tcp();
                t.window += 1;
                with(second_ip(), t, 1000, 1000)
            }),
            ("options", {
                let mut t = second_tcp();
                t.options[11] ^= 1;
                with(second_ip(), t, 1000, 1000)
            }),
            ("options length", {
                let mut t = second_tcp();
                t.options.clear();
                with(second_ip(), t, 1000, 1000)
            }),
            ("syn", {
                let mut t = second_tcp();
                t.flags |= SYN;
                with(second_ip(), t, 1000, 1000)
            }),
            ("rst", {
                let mut t = second_tcp();
                t.flags |= RST;
                with(second_ip(), t, 1000, 1000)
            }),
            ("urg", {
                let mut t = second_tcp();
                t.flags |= URG;
                with(second_ip(), t, 1000, 1000)
            }),
            ("cwr in a later segment", {
                let mut t = second_tcp();
                t.flags |= CWR;
                with(second_ip(), t, 1000, 1000)
            }),
            ("ece differs", {
                let mut t = second_tcp();
                t.flags |= 0x040;
                with(second_ip(), t, 1000, 1000)
            }),
            (
                "longer than the first",
                with(second_ip(), second_tcp(), 1000, 1001),
            ),
            ("no payload", with(second_ip(), second_tcp(), 1000, 0)),
            ("bad checksum", {
                let mut p = with(second_ip(), second_tcp(), 1000, 1000);
                *p.last_mut().unwrap() ^= 1;
                p
            }),
            ("bad ip header checksum", {
                let mut p = with(second_ip(), second_tcp(), 1000, 1000);
                p[10] ^= 1;
                p
            }),
            ("ip options", {
                let mut ip = second_ip();
                ip.ext = vec![1, 1, 1, 0];
                with(ip, second_tcp(), 1000, 1000)
            }),
            ("fragment", {
                let mut p = with(second_ip(), second_tcp(), 1000, 1000);
                p[6] |= 0x20;
                p[10..12].fill(0);
                let c = Sum::of(&p[..20]).checksum();
                p[10..12].copy_from_slice(&c.to_be_bytes());
                p
            }),
            ("padding", {
                let mut p = with(second_ip(), second_tcp(), 1000, 1000);
                p.push(0);
                p
            }),
        ];
        for (name, second) in cases {
            eprintln!("case: {name}");
            assert_unmerged(&[first.clone(), second]);
        }
        // The control: the unchanged second segment merges.
        let mut pool = Pool::new(3, SUPER_PACKET_ROOM);
        let mut v = load(
            &mut pool,
            &[first.clone(), with(second_ip(), second_tcp(), 1000, 1000)],
        );
        assert_eq!(Gro::new().coalesce(&mut pool, &mut v, testpkt::ip_link), 1);
    }

    #[test]
    fn push_fin_and_short_segments_end_the_super_packet() {
        // PSH, FIN, SYN or URG on the head: nothing is appended.
        for f in [PSH, FIN, SYN, URG] {
            let mut t = Tcp::new();
            t.flags |= f;
            let mut t2 = Tcp::new();
            t2.seq += 100;
            assert_unmerged(&[with(Ip::v4(), t, 0, 100), with(second_ip(), t2, 100, 100)]);
        }
        // PSH mid-flow: merged as the last, the next starts anew.
        let mut t = Tcp::new();
        t.flags |= PSH;
        let mut a = testpkt::tcp_train(&Ip::v4(), &t, &[100, 100], 1);
        a.push(with(
            {
                let mut ip = Ip::v4();
                ip.ident += 2;
                ip
            },
            {
                let mut t = Tcp::new();
                t.seq += 200;
                t
            },
            200,
            100,
        ));
        let mut pool = Pool::new(4, SUPER_PACKET_ROOM);
        let mut v = load(&mut pool, &a);
        assert_eq!(Gro::new().coalesce(&mut pool, &mut v, testpkt::ip_link), 1);
        let lens: Vec<_> = v.as_slice().iter().map(|&id| pool.data(id).len()).collect();
        assert_eq!(lens, [52 + 200, 52 + 100]);
        // A short segment ends it too.
        let a = train(&[100, 50, 100]);
        let mut pool = Pool::new(4, SUPER_PACKET_ROOM);
        let mut v = load(&mut pool, &a);
        assert_eq!(Gro::new().coalesce(&mut pool, &mut v, testpkt::ip_link), 1);
        let lens: Vec<_> = v.as_slice().iter().map(|&id| pool.data(id).len()).collect();
        assert_eq!(lens, [52 + 150, 52 + 100]);
    }

    #[test]
    fn a_packet_of_the_flow_that_cannot_merge_ends_it() {
        let a = train(&[100, 100, 100]);
        let mut bad = a[1].clone();
        *bad.last_mut().unwrap() ^= 0xff;
        // a0, a corrupted a1, the retransmitted a1: nothing may jump the
        // corrupted one.
        assert_unmerged(&[a[0].clone(), bad, a[1].clone()]);
        // A non-first fragment (no ports) ends every flow between the hosts.
        let mut frag = a[1].clone();
        frag[6] = 0x00;
        frag[7] = 0x10;
        frag[10..12].fill(0);
        let c = Sum::of(&frag[..20]).checksum();
        frag[10..12].copy_from_slice(&c.to_be_bytes());
        assert_unmerged(&[a[0].clone(), frag, a[1].clone()]);
    }

    #[test]
    fn other_flow_keys_do_not_merge() {
        let a = train(&[100, 100]);
        // Another tunnel.
        let mut pool = Pool::new(3, SUPER_PACKET_ROOM);
        let mut v = load(&mut pool, &a);
        pool.meta_mut(v.as_slice()[1]).tunnel = 4;
        let before = contents(&pool, &v);
        assert_eq!(Gro::new().coalesce(&mut pool, &mut v, testpkt::ip_link), 0);
        assert_eq!(contents(&pool, &v), before);
        // Other ports, other addresses.
        let mut t = second_tcp();
        t.dport += 1;
        assert_unmerged(&[a[0].clone(), with(second_ip(), t, 100, 100)]);
        let mut ip = second_ip();
        ip.dst[3] += 1;
        assert_unmerged(&[a[0].clone(), with(ip, second_tcp(), 100, 100)]);
    }

    #[test]
    fn ipv6_rules() {
        let t = Tcp::new();
        let a = testpkt::tcp_train(&Ip::v6(), &t, &[500, 500, 500], 1);
        let mut pool = Pool::new(4, SUPER_PACKET_ROOM);
        let mut v = load(&mut pool, &a);
        assert_eq!(Gro::new().coalesce(&mut pool, &mut v, testpkt::ip_link), 2);
        let m = pool.meta(v.as_slice()[0]);
        assert_eq!(m.gso.unwrap().kind, GsoKind::Tcp6);
        assert_eq!(
            tep_wire::ipv6::Packet::new_unchecked(pool.data(v.as_slice()[0])).payload_len(),
            32 + 1500
        );

        let mut t2 = Tcp::new();
        t2.seq += 500;
        for change in 0..4 {
            let mut ip = Ip::v6();
            match change {
                0 => ip.ttl = 1,
                1 => ip.tos = 0x10,
                2 => ip.flow_label = 7,
                _ => ip.ext = vec![0, 0, 1, 4, 0, 0, 0, 0],
            }
            assert_unmerged(&[
                a[0].clone(),
                testpkt::tcp(&ip, &t2, &testpkt::payload(500, 500, 1), Csum::Full),
            ]);
        }
    }

    #[test]
    fn udp_rules() {
        let ip = Ip::v4();
        let a = testpkt::udp_train(&ip, 7, 8, &[300, 300, 100], Csum::Full, 1);
        let mut pool = Pool::new(4, SUPER_PACKET_ROOM);
        let mut v = load(&mut pool, &a);
        assert_eq!(Gro::new().coalesce(&mut pool, &mut v, testpkt::ip_link), 2);
        let s = pool.data(v.as_slice()[0]);
        assert_eq!(
            &s[24..26],
            &(8u16 + 700).to_be_bytes(),
            "UDP length of the whole"
        );

        // A zero checksum counts as good.
        let z = testpkt::udp_train(&ip, 7, 8, &[300, 300], Csum::Zero, 1);
        let mut pool = Pool::new(4, SUPER_PACKET_ROOM);
        let mut v = load(&mut pool, &z);
        assert_eq!(Gro::new().coalesce(&mut pool, &mut v, testpkt::ip_link), 1);

        let longer = testpkt::udp_train(&ip, 7, 8, &[300, 301], Csum::Full, 1);
        assert_unmerged(&longer);
        let mut bad = testpkt::udp_train(&ip, 7, 8, &[300, 300], Csum::Full, 1);
        bad[1][30] ^= 1;
        assert_unmerged(&bad);
        let mut id = testpkt::udp_train(&ip, 7, 8, &[300, 300], Csum::Full, 1);
        id[1] = testpkt::udp(
            &{
                let mut i = ip.clone();
                i.ident += 5;
                i
            },
            7,
            8,
            &testpkt::payload(300, 300, 1),
            Csum::Full,
        );
        assert_unmerged(&id);

        // At most 64 datagrams.
        let many = testpkt::udp_train(&ip, 7, 8, &[10; 70], Csum::Full, 1);
        let mut pool = Pool::new(71, SUPER_PACKET_ROOM);
        let mut v = load(&mut pool, &many);
        assert_eq!(
            Gro::new().coalesce(&mut pool, &mut v, testpkt::ip_link),
            63 + 5
        );
        let gso: Vec<_> = v
            .as_slice()
            .iter()
            .map(|&i| pool.meta(i).gso.is_some())
            .collect();
        assert_eq!(gso, [true, true]);
        let mut out = PacketVector::new();
        assert_eq!(
            segment(&mut pool, v.as_slice()[0], &mut out, InnerLink::Ip),
            Ok(UDP_MAX_SEGMENTS)
        );
    }

    #[test]
    fn known_good_checksums_are_not_verified() {
        let mut a = train(&[100, 100]);
        a[1][60] ^= 1; // payload damaged after the check
        let mut pool = Pool::new(3, SUPER_PACKET_ROOM);
        let mut v = load(&mut pool, &a);
        pool.meta_mut(v.as_slice()[1]).csum = ChecksumState::Verified;
        assert_eq!(Gro::new().coalesce(&mut pool, &mut v, testpkt::ip_link), 1);

        // Partial at the TCP checksum: locally built, merged.
        let mut p = train(&[100, 100]);
        let partial = Ip::v4().pseudo(6, 132).value().to_be_bytes();
        p[1][36..38].copy_from_slice(&partial);
        let mut pool = Pool::new(3, SUPER_PACKET_ROOM);
        let mut v = load(&mut pool, &p);
        pool.meta_mut(v.as_slice()[1]).csum = ChecksumState::Partial {
            start: 20,
            offset: 36,
        };
        assert_eq!(Gro::new().coalesce(&mut pool, &mut v, testpkt::ip_link), 1);
        // Partial elsewhere: not known good.
        let mut pool = Pool::new(3, SUPER_PACKET_ROOM);
        let mut v = load(&mut pool, &p);
        pool.meta_mut(v.as_slice()[1]).csum = ChecksumState::Partial {
            start: 20,
            offset: 26,
        };
        assert_eq!(Gro::new().coalesce(&mut pool, &mut v, testpkt::ip_link), 0);
    }

    #[test]
    fn size_limits() {
        // The data room: 20 + 32 + 3 * 1000 does not fit 3000.
        let a = train(&[1000, 1000, 1000]);
        let mut pool = Pool::new(4, 3000);
        let mut v = load(&mut pool, &a);
        assert_eq!(Gro::new().coalesce(&mut pool, &mut v, testpkt::ip_link), 1);
        assert_eq!(v.len(), 2);
        // 65535 bytes: 50 × 1400 makes two super-packets.
        let a = train(&[1400; 50]);
        let mut pool = Pool::new(51, SUPER_PACKET_ROOM);
        let mut v = load(&mut pool, &a);
        assert_eq!(Gro::new().coalesce(&mut pool, &mut v, testpkt::ip_link), 48);
        let lens: Vec<_> = v.as_slice().iter().map(|&id| pool.data(id).len()).collect();
        assert_eq!(lens, [52 + 46 * 1400, 52 + 4 * 1400]);
    }

    #[test]
    fn the_flow_table_is_bounded_and_reset_per_call() {
        let mut pkts = Vec::new();
        let trains: Vec<_> = (0..40)
            .map(|k| {
                let mut t = Tcp::new();
                t.sport = 1000 + k;
                testpkt::tcp_train(&Ip::v4(), &t, &[100, 100], k as u8)
            })
            .collect();
        for tr in &trains {
            pkts.push(tr[0].clone());
        }
        for tr in &trains {
            pkts.push(tr[1].clone());
        }
        let mut pool = Pool::new(81, SUPER_PACKET_ROOM);
        let mut v = load(&mut pool, &pkts);
        let mut gro = Gro::new();
        assert_eq!(gro.coalesce(&mut pool, &mut v, testpkt::ip_link), GRO_FLOWS);
        assert_eq!(v.len(), 80 - GRO_FLOWS);
        // Both packets of each of the 8 flows left out.
        assert_eq!(gro.table_full, 2 * (40 - GRO_FLOWS as u64), "counted");

        // A new call does not continue the last call's flows.
        let a = train(&[100, 100]);
        let mut v1 = load(&mut pool, &a[..1]);
        let mut v2 = load(&mut pool, &a[1..]);
        assert_eq!(gro.coalesce(&mut pool, &mut v1, testpkt::ip_link), 0);
        assert_eq!(gro.coalesce(&mut pool, &mut v2, testpkt::ip_link), 0);
    }

    #[test]
    fn empty_and_odd_vectors() {
        let mut pool = Pool::new(4, 2048);
        let mut v = PacketVector::new();
        assert_eq!(Gro::new().coalesce(&mut pool, &mut v, testpkt::ip_link), 0);
        assert_unmerged(&[vec![], vec![0x45], vec![0x60; 39], vec![0x99; 60]]);
    }

    // ---- Ethernet frames ----

    /// Frames of the IP packets `pkts`, loaded with their metadata.
    fn load_frames(pool: &mut Pool, eth: &Eth, pkts: &[Vec<u8>]) -> PacketVector {
        let mut v = PacketVector::new();
        for p in pkts {
            let m = eth.meta(testpkt::meta_of(p, ChecksumState::None));
            v.push(testpkt::load(pool, &eth.wrap(p), m)).unwrap();
        }
        v
    }

    /// Coalescing these frames merges nothing and changes nothing.
    fn assert_frames_unmerged(frames: &[Vec<u8>]) {
        let mut pool = Pool::new(frames.len() + 1, SUPER_PACKET_ROOM);
        let mut v = load(&mut pool, frames);
        let before = contents(&pool, &v);
        assert_eq!(Gro::new().coalesce(&mut pool, &mut v, testpkt::eth_link), 0);
        assert_eq!(contents(&pool, &v), before);
    }

    /// A train of frames becomes the frame of the super-packet the bare
    /// packets become, with offsets from the frame start; frames without
    /// IP in between pass untouched.
    #[test]
    fn frames_coalesce_by_the_ip_packet_after_their_header() {
        for (eth, ip) in [(Eth::new(), Ip::v4()), (Eth::tagged(42), Ip::v6())] {
            let a = testpkt::tcp_train(&ip, &Tcp::new(), &[1000, 1000, 500], 1);
            let mut pool = Pool::new(8, SUPER_PACKET_ROOM);
            let mut bare = load(&mut pool, &a);
            assert_eq!(
                Gro::new().coalesce(&mut pool, &mut bare, testpkt::ip_link),
                2
            );
            let want = eth.wrap(pool.data(bare.as_slice()[0]));
            let want_meta = eth.meta(*pool.meta(bare.as_slice()[0]));

            let mut pool = Pool::new(8, SUPER_PACKET_ROOM);
            let arp = eth.arp();
            let mut lldp = eth.header(0x88cc);
            lldp.extend_from_slice(&[0x02, 0x07, 0x04, 1, 2, 3, 4, 5, 6, 0, 0]);
            let frames = [
                eth.wrap(&a[0]),
                arp.clone(),
                eth.wrap(&a[1]),
                lldp.clone(),
                eth.wrap(&a[2]),
            ];
            let mut v = PacketVector::new();
            for (k, f) in frames.iter().enumerate() {
                let m = if k % 2 == 0 {
                    eth.meta(testpkt::meta_of(&a[k / 2], ChecksumState::None))
                } else {
                    PacketMeta {
                        l3: 0,
                        l4: 0,
                        ..testpkt::meta_of(f, ChecksumState::None)
                    }
                };
                v.push(testpkt::load(&mut pool, f, m)).unwrap();
            }
            let others = [
                contents(&pool, &v)[1].clone(),
                contents(&pool, &v)[3].clone(),
            ];
            assert_eq!(Gro::new().coalesce(&mut pool, &mut v, testpkt::eth_link), 2);
            let got = contents(&pool, &v);
            assert_eq!(got.len(), 3);
            assert_eq!(got[0].0, want, "byte for byte");
            assert_eq!(got[0].1, want_meta);
            assert_eq!(&got[1..], &others[..], "non-IP frames untouched");
            let m = got[0].1;
            let (l3, l4) = (eth.hlen(), eth.hlen() + ip.hlen());
            assert_eq!((m.l2, m.l3, m.l4), (0, l3 as u16, l4 as u16));
            assert_eq!(
                m.csum,
                ChecksumState::Partial {
                    start: l4 as u16,
                    offset: (l4 + 16) as u16
                }
            );
            let kind = if ip.v6 { GsoKind::Tcp6 } else { GsoKind::Tcp4 };
            assert_eq!(
                m.gso,
                Some(Gso {
                    kind,
                    segment_size: 1000
                })
            );
        }
    }

    #[test]
    fn frames_with_other_ethernet_headers_do_not_merge() {
        let a = train(&[100, 100]);
        let base = Eth::new();
        let mut other_src = Eth::new();
        other_src.src[5] ^= 0x10;
        let mut other_dst = Eth::new();
        other_dst.dst[0] ^= 0x04;
        for second in [other_src, other_dst, Eth::tagged(1)] {
            assert_frames_unmerged(&[base.wrap(&a[0]), second.wrap(&a[1])]);
        }
        assert_frames_unmerged(&[Eth::tagged(1).wrap(&a[0]), Eth::tagged(2).wrap(&a[1])]);
        // The control: equal headers merge.
        let mut pool = Pool::new(3, SUPER_PACKET_ROOM);
        let mut v = load_frames(&mut pool, &Eth::tagged(1), &a);
        assert_eq!(Gro::new().coalesce(&mut pool, &mut v, testpkt::eth_link), 1);
    }

    /// The link decides how a packet is read: an IP packet read as a frame
    /// and a frame read as a packet carry no IP; a frame whose EtherType
    /// names the other IP version is opaque too, and none of them ends the
    /// flow around it.
    #[test]
    fn the_link_decides_and_opaque_frames_do_not_end_flows() {
        let a = train(&[100, 100]);
        let mut pool = Pool::new(3, SUPER_PACKET_ROOM);
        let mut v = load(&mut pool, &a);
        let before = contents(&pool, &v);
        assert_eq!(Gro::new().coalesce(&mut pool, &mut v, testpkt::eth_link), 0);
        assert_eq!(contents(&pool, &v), before);
        let eth = Eth::new();
        let mut pool = Pool::new(3, SUPER_PACKET_ROOM);
        let mut v = load_frames(&mut pool, &eth, &a);
        let before = contents(&pool, &v);
        assert_eq!(Gro::new().coalesce(&mut pool, &mut v, testpkt::ip_link), 0);
        assert_eq!(contents(&pool, &v), before);

        let mut wrong = eth.wrap(&a[1]);
        wrong[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
        assert_frames_unmerged(&[eth.wrap(&a[0]), wrong.clone()]);
        let mut pool = Pool::new(4, SUPER_PACKET_ROOM);
        let mut v = load(
            &mut pool,
            &[eth.wrap(&a[0]), wrong.clone(), eth.wrap(&a[1])],
        );
        assert_eq!(Gro::new().coalesce(&mut pool, &mut v, testpkt::eth_link), 1);
        assert_eq!(pool.data(v.as_slice()[1]), &wrong[..]);
    }

    /// A partial checksum is known good when its offsets are the
    /// transport's counted from the frame start.
    #[test]
    fn partial_checksums_of_frames_count_from_the_frame_start() {
        let eth = Eth::new();
        let mut p = train(&[100, 100]);
        let partial = Ip::v4().pseudo(6, 132).value().to_be_bytes();
        p[1][36..38].copy_from_slice(&partial);
        for (start, offset, merges) in [(34, 50, 1), (20, 36, 0)] {
            let mut pool = Pool::new(3, SUPER_PACKET_ROOM);
            let mut v = load_frames(&mut pool, &eth, &p);
            pool.meta_mut(v.as_slice()[1]).csum = ChecksumState::Partial { start, offset };
            assert_eq!(
                Gro::new().coalesce(&mut pool, &mut v, testpkt::eth_link),
                merges
            );
        }
    }
}
