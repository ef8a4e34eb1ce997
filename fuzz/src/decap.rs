//! The decap pipeline under arbitrary datagrams: one tunnel of every kind
//! over each family, with and without the receive opt-ins
//! ([`setup::decap_config`]), GRO on.
//!
//! Input: `[c]` then datagrams, each `[length: u16 BE][bytes]` (the last
//! one takes what is left), one vector. `c`:
//! - bit 0: the outer checksum trusted (the I/O layer verified it:
//!   `csum = Verified`, as `tep pcap --trust-checksums` and a NIC do);
//! - bit 1: a socket took the outer IP and UDP headers (host mode,
//!   [`OuterLayers::UdpPayload`]): each datagram's first byte picks the
//!   tunnel whose addresses and port the socket reports (bits 0-5; 36 and
//!   up: a port no tunnel has) and the outer ECN (bits 6-7); the rest is
//!   the UDP payload, verified by the socket;
//! - bit 2: gathered (host mode's `gather`: trains merged where they lie);
//! - bits 3-4: what the sink does with inner checksums (as found, stated,
//!   completed);
//! - bit 5, with bit 1: the datagrams' payloads are one UDP GRO train, its
//!   segment size the first one's length.
//!
//! Checked on every input:
//! - the counters balance: `decap_in = decap_out + coalesced + answered +
//!   drops`, and the sink got `decap_out` inner packets;
//! - every inner packet parses with tep-wire: an IP packet of its own IP
//!   length (L3 kinds) or an Ethernet frame whose IP, where the EtherType
//!   says IP, parses (L2 kinds); a checksum marked verified verifies, a
//!   partial one lies inside the packet;
//! - every reply (GTP-U) parses as an outer IP/UDP datagram to or from port
//!   2152 carrying a GTP-U message;
//! - every buffer is back in the pool.

use std::cell::RefCell;
use std::collections::HashMap;

use core::net::IpAddr;
use tep_dataplane::config::{DataplaneConfig, TunnelConfig};
use tep_dataplane::ManualClock;
use tep_dataplane::TunnelKind;
use tep_dataplane::{ChecksumState, Gso, GsoKind, PacketMeta, Pool};
use tep_dataplane::{InnerChecksums, Outer, OuterLayers};
use tep_dataplane::{Output, Pipeline, PipelineOptions};
use tep_dataplane::{PacketVector, VECTOR_SIZE};
use tep_wire::{gtpu, ipv4, ipv6, tcp, udp};

use crate::encap::hex;
use crate::setup::{self, bytes_of, Pipe};

struct State {
    pool: Pool,
    config: Vec<TunnelConfig>,
    pipes: HashMap<u8, Pipe>,
    now_ns: u64,
}

thread_local! {
    static STATE: RefCell<Option<State>> = const { RefCell::new(None) };
}

/// The control byte's bits.
pub const TRUSTED: u8 = 1;
pub const SOCKET: u8 = 2;
pub const GATHER: u8 = 4;
pub const STATED: u8 = 8;
pub const COMPLETED: u8 = 16;
pub const TRAIN: u8 = 32;

/// Datagrams per input at most (a vector holds 256).
const MAX_DATAGRAMS: usize = 64;

pub fn decap(data: &[u8]) {
    let Some((&c, mut rest)) = data.split_first() else {
        return;
    };
    let mut datagrams: Vec<&[u8]> = vec![];
    while !rest.is_empty() && datagrams.len() < MAX_DATAGRAMS {
        let (d, r) = match rest {
            [hi, lo, r @ ..] => {
                let n = usize::from(u16::from_be_bytes([*hi, *lo])).min(r.len());
                r.split_at(n)
            }
            r => (r, &[][..]),
        };
        datagrams.push(d);
        rest = r;
    }
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        let st = s.get_or_insert_with(|| State {
            pool: setup::pool(),
            config: setup::decap_config(),
            pipes: HashMap::new(),
            now_ns: 0,
        });
        // Far apart, so that the GTP-U Error Indication rate limit never
        // makes an input's result depend on the ones before it.
        st.now_ns += 10_000_000_000;
        let now_ns = st.now_ns;
        let variant = c & (SOCKET | GATHER | STATED | COMPLETED);
        let config = &st.config;
        let p = st
            .pipes
            .entry(variant)
            .or_insert_with(|| build(config, variant));
        run(&mut st.pool, &st.config, p, c, &datagrams, now_ns);
        assert_eq!(st.pool.available(), st.pool.capacity(), "buffers leaked");
    });
}

fn build(config: &[TunnelConfig], variant: u8) -> Pipe {
    Pipeline::new(
        config,
        &DataplaneConfig::default(),
        ManualClock::default(),
        PipelineOptions {
            gro: true,
            outer: if variant & SOCKET != 0 {
                OuterLayers::UdpPayload
            } else {
                OuterLayers::IpUdp
            },
            gather: variant & GATHER != 0,
            inner_checksums: if variant & COMPLETED != 0 {
                InnerChecksums::Completed
            } else if variant & STATED != 0 {
                InnerChecksums::Stated
            } else {
                InnerChecksums::AsFound
            },
            ..PipelineOptions::default()
        },
    )
}

/// What a socket reports for a datagram whose selector byte is `sel`.
fn socket_outer(config: &[TunnelConfig], sel: u8) -> Outer {
    let i = usize::from(sel & 0x3f);
    let t = &config[i % config.len()];
    Outer {
        src: t.remote,
        dst: t.local,
        src_port: 49152 + u16::from(sel),
        dst_port: if i < config.len() { t.local_port } else { 9 },
        tos: sel >> 6,
        ttl: 64,
    }
}

fn run(
    pool: &mut Pool,
    config: &[TunnelConfig],
    p: &mut Pipe,
    c: u8,
    datagrams: &[&[u8]],
    now_ns: u64,
) {
    let socket = c & SOCKET != 0;
    let mut v = PacketVector::new();
    let mut fed = 0u64;
    let mut train = false;
    if socket && c & TRAIN != 0 && !datagrams.is_empty() {
        // One buffer: every datagram's payload one after the other, as a
        // socket with UDP_GRO hands a train over.
        let sel = datagrams[0].first().copied().unwrap_or(0);
        let seg = datagrams[0].len().saturating_sub(1);
        let mut bytes = vec![];
        for d in datagrams {
            bytes.extend_from_slice(d.get(1..).unwrap_or(&[]));
        }
        if seg > 0 && !bytes.is_empty() {
            let id = pool.alloc().expect("pool");
            if pool.fill(id, &bytes) {
                pool.received_by_socket(id, socket_outer(config, sel));
                if bytes.len() > seg {
                    pool.meta_mut(id).gso = Some(Gso {
                        kind: GsoKind::Udp,
                        segment_size: seg as u16,
                    });
                    train = true;
                }
                v.push(id).unwrap();
                fed += 1;
            } else {
                pool.free(id);
            }
        }
    } else {
        for d in datagrams {
            let (outer, bytes) = match (socket, d.split_first()) {
                (true, Some((&sel, b))) => (Some(socket_outer(config, sel)), b),
                (true, None) => continue,
                (false, _) => (None, *d),
            };
            let id = pool.alloc().expect("pool");
            if !pool.fill(id, bytes) {
                pool.free(id);
                continue;
            }
            match outer {
                Some(o) => pool.received_by_socket(id, o),
                None if c & TRUSTED != 0 => pool.meta_mut(id).csum = ChecksumState::Verified,
                None => {}
            }
            v.push(id).unwrap();
            fed += 1;
        }
    }
    assert!(v.len() <= VECTOR_SIZE);

    let before = (p.counters(), p.drops_total());
    let mut inner = vec![];
    let mut replies = vec![];
    p.decap(pool, &mut v, now_ns, &mut |o, pool, v| {
        for &id in v.as_slice() {
            let item = (bytes_of(pool, id), *pool.meta(id), *pool.outer(id));
            match o {
                Output::Inner => inner.push(item),
                Output::Reply => replies.push(item),
                _ => panic!("decap gave {o:?}"),
            }
            pool.free(id);
        }
        v.clear();
    });
    let c1 = p.counters();
    let c0 = before.0;
    let drops = p.drops_total() - before.1;
    let din = c1.decap_in - c0.decap_in;
    let out = c1.decap_out - c0.decap_out;
    let coalesced = c1.coalesced - c0.coalesced;
    let answered = c1.answered - c0.answered;
    let generated = c1.generated - c0.generated;
    if !train {
        assert_eq!(din, fed, "decap_in counts the datagrams given");
    }
    assert_eq!(
        din,
        out + coalesced + answered + drops,
        "decap: in {din} != out {out} + coalesced {coalesced} + answered {answered} + drops {drops}\n{}",
        p.runtime().report()
    );
    assert_eq!(inner.len() as u64, out, "the sink got what decap_out says");
    assert_eq!(replies.len() as u64, answered + generated);

    for (bytes, m, _) in &inner {
        let kind = config[m.tunnel as usize].kind;
        check_inner(kind, bytes, m).unwrap_or_else(|e| {
            panic!(
                "{kind} inner packet: {e}\n{m:?}\n{}\n{}",
                hex(bytes),
                p.runtime().report()
            )
        });
    }
    for (bytes, _, outer) in &replies {
        check_reply(socket, bytes, outer)
            .unwrap_or_else(|e| panic!("GTP-U reply: {e}\n{}", hex(bytes)));
    }
}

/// An inner packet as the sink gets it (see the module doc).
fn check_inner(kind: TunnelKind, p: &[u8], m: &PacketMeta) -> Result<(), String> {
    let l3 = if kind.carries_ethernet() {
        match setup::inner_frame(p)? {
            Some(l3) => l3,
            None => return Ok(()),
        }
    } else {
        // A GRO super-packet too: one IP packet of its whole length.
        setup::inner_ip(p)?;
        0
    };
    match m.csum {
        ChecksumState::Partial { start, offset } => {
            let (s, o) = (usize::from(start), usize::from(offset));
            if s > o || o + 2 > p.len() {
                return Err(format!("partial checksum at {s}/{o} of {}", p.len()));
            }
        }
        ChecksumState::Verified if m.gso.is_none() => verified(&p[l3..])?,
        _ => {}
    }
    Ok(())
}

/// A TCP or UDP checksum marked verified verifies (tep-wire's own sum).
fn verified(ip: &[u8]) -> Result<(), String> {
    let (src, dst, proto, t) = match ip[0] >> 4 {
        4 => {
            let p = ipv4::Packet::new_checked(ip).map_err(|e| e.to_string())?;
            if p.is_fragment() {
                return Ok(());
            }
            let end = usize::from(p.total_len());
            let t = &ip[p.header_len()..end.min(ip.len())];
            (
                IpAddr::V4(p.src_addr()),
                IpAddr::V4(p.dst_addr()),
                u8::from(p.protocol()),
                t,
            )
        }
        _ => {
            let p = ipv6::Packet::new_checked(ip).map_err(|e| e.to_string())?;
            let Ok(ul) = p.upper_layer() else {
                return Ok(());
            };
            if ul.fragment.is_some() {
                return Ok(());
            }
            (
                IpAddr::V6(p.src_addr()),
                IpAddr::V6(p.dst_addr()),
                u8::from(ul.protocol),
                &ip[ipv6::HEADER_LEN + ul.offset..ipv6::HEADER_LEN + usize::from(p.payload_len())],
            )
        }
    };
    let ok = match (proto, src, dst) {
        (6, IpAddr::V4(s), IpAddr::V4(d)) => tcp::Packet::new_checked(t)
            .map(|t| t.verify_checksum_v4(&s, &d))
            .unwrap_or(true),
        (6, IpAddr::V6(s), IpAddr::V6(d)) => tcp::Packet::new_checked(t)
            .map(|t| t.verify_checksum_v6(&s, &d))
            .unwrap_or(true),
        (17, IpAddr::V4(s), IpAddr::V4(d)) => udp::Packet::new_checked(t)
            .map(|u| u.verify_checksum_v4(&s, &d) != udp::ChecksumStatus::Invalid)
            .unwrap_or(true),
        (17, IpAddr::V6(s), IpAddr::V6(d)) => udp::Packet::new_checked(t)
            .map(|u| u.verify_checksum_v6(&s, &d) != udp::ChecksumStatus::Invalid)
            .unwrap_or(true),
        _ => true,
    };
    ok.then_some(())
        .ok_or_else(|| format!("protocol {proto} marked verified, checksum bad"))
}

/// A GTP-U reply: outer IP/UDP (or the socket's fields) and a message.
fn check_reply(socket: bool, p: &[u8], outer: &Outer) -> Result<(), String> {
    let payload = if socket {
        if outer.src_port != 2152 && outer.dst_port != 2152 {
            return Err(format!("ports {}/{}", outer.src_port, outer.dst_port));
        }
        p
    } else {
        let (_, payload) = setup::outer_ip_udp(p)?;
        payload
    };
    let g = gtpu::Packet::new_checked(payload).map_err(|e| e.to_string())?;
    gtpu::GtpuRepr::parse(&g).map_err(|e| e.to_string())?;
    Ok(())
}
