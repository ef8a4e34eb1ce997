//! The encap pipeline under arbitrary inner packets and virtio-net
//! headers, with a round trip through the mirror pipeline.
//!
//! Input: `[k][o][virtio-net header, 10 bytes][inner packet]`. `k` and `o`
//! pick the setup ([`EncapSetup::from_bytes`]: kind, checksum mode, outer
//! family, variation, inherit; `o` bit 0 gathered segments, bit 1 outer
//! headers by a socket). The header goes through `VnetHeader::to_meta` as
//! host mode's device read does (an error there is the I/O layer's drop);
//! the packet is then one vector into encap.
//!
//! Checked on every input:
//! - the pipeline's counters balance: `encap_in + segments_added =
//!   encap_out + drops`, and the sink got `encap_out` packets;
//! - every output parses with tep-wire: outer IP (IPv4 header checksum)
//!   and UDP (length; checksum verifying, or 0 exactly in mode `zero`) to
//!   the kind's port, the tunnel header, the inner IP packet or Ethernet
//!   frame (with a socket writing the headers: the metadata's ports and
//!   addresses instead);
//! - the round trip: what encap accepted, decapsulated by the mirror
//!   pipeline (the other end of the tunnel, its sink taking inner
//!   checksums as found),
//!   comes out without a drop and is the input back:
//!   - a packet without GSO: byte for byte the input (an IP packet cut to
//!     its IP length, as encap trims link padding), except a partial
//!     checksum, which comes back completed as a device completes it: the
//!     one's complement sum from `csum_start` to the end of the IP packet
//!     (Ethernet padding after it not summed; a frame without IP: to its
//!     end), plus the value the field held (the pseudo-header sum),
//!     verifies;
//!   - a super-packet: the segments a reference segmenter written here
//!     makes — the input's headers on each `gso_size` piece of the payload
//!     in order, IP length, IPv4 identification + i, TCP sequence number +
//!     offset, CWR on the first segment only, FIN and PSH on the last only,
//!     UDP length — byte for byte except the IPv4 header checksum and the
//!     transport checksum, which must verify instead (computed afresh).
//! - every buffer is back in the pool.

use std::cell::RefCell;
use std::collections::HashMap;

use tep_csum::Sum;
use tep_dataplane::config::{ChecksumMode, DataplaneConfig};
use tep_dataplane::vnet::{VnetHeader, VNET_HDR_LEN};
use tep_dataplane::InnerLink;
use tep_dataplane::ManualClock;
use tep_dataplane::PacketVector;
use tep_dataplane::{ethernet_ip_offset, finish_offloaded};
use tep_dataplane::{ChecksumState, GsoKind, Pool};
use tep_dataplane::{InnerChecksums, Outer, OuterLayers};
use tep_dataplane::{Output, Pipeline, PipelineOptions};
use tep_wire::{ipv4, ipv6, tcp, udp};

use crate::setup::{self, bytes_of, EncapSetup, Pipe};

/// The two ends of one setup.
struct Pair {
    a: Pipe,
    b: Pipe,
}

struct State {
    pool: Pool,
    pairs: HashMap<(EncapSetup, bool, bool), Pair>,
    now_ns: u64,
}

thread_local! {
    static STATE: RefCell<Option<State>> = const { RefCell::new(None) };
}

/// One output of the encap end.
struct Sent {
    bytes: Vec<u8>,
    outer: Outer,
}

pub fn encap(data: &[u8]) {
    let [k, o, rest @ ..] = data else {
        return;
    };
    let Some((hdr, packet)) = rest.split_first_chunk::<VNET_HDR_LEN>() else {
        return;
    };
    let setup = EncapSetup::from_bytes(*k, *o);
    let gather = o & 1 != 0;
    let socket = o & 2 != 0;
    // What host mode's device read does with the header: an error is its
    // drop (`bad_vnet_header`), the packet never reaches the pipeline.
    let Ok((csum, gso)) = VnetHeader::parse(hdr).to_meta(packet.len()) else {
        return;
    };
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        let st = s.get_or_insert_with(|| State {
            pool: setup::pool(),
            pairs: HashMap::new(),
            now_ns: 0,
        });
        st.now_ns += 10_000_000_000;
        let now_ns = st.now_ns;
        let pair = st
            .pairs
            .entry((setup, gather, socket))
            .or_insert_with(|| build(setup, gather, socket));
        run(&mut st.pool, pair, setup, socket, packet, csum, gso, now_ns);
        assert_eq!(st.pool.available(), st.pool.capacity(), "buffers leaked");
    });
}

fn build(setup: EncapSetup, gather: bool, socket: bool) -> Pair {
    let (ca, cb) = setup.configs();
    let outer = if socket {
        OuterLayers::UdpPayload
    } else {
        OuterLayers::IpUdp
    };
    let a = Pipeline::new(
        &ca,
        &DataplaneConfig::default(),
        ManualClock::default(),
        PipelineOptions {
            inner_link: setup.kind.link(),
            outer,
            gather,
            ..PipelineOptions::default()
        },
    );
    let b = Pipeline::new(
        &cb,
        &DataplaneConfig::default(),
        ManualClock::default(),
        PipelineOptions {
            inner_link: setup.kind.link(),
            outer,
            // As found: decap completes what RCO left partial, and
            // nothing else (`completed` would also complete an inner
            // checksum that holds its pseudo-header sum, as a same-host
            // Linux sender leaves it: not the packet encap was given).
            inner_checksums: InnerChecksums::AsFound,
            ..PipelineOptions::default()
        },
    );
    Pair { a, b }
}

#[allow(clippy::too_many_arguments)]
fn run(
    pool: &mut Pool,
    pair: &mut Pair,
    setup: EncapSetup,
    socket: bool,
    packet: &[u8],
    csum: ChecksumState,
    gso: Option<tep_dataplane::Gso>,
    now_ns: u64,
) {
    let Some(id) = pool.alloc() else {
        panic!("pool empty")
    };
    if !pool.fill(id, packet) {
        // Longer than a buffer: no device read gives that.
        pool.free(id);
        return;
    }
    let m = pool.meta_mut(id);
    m.csum = csum;
    m.gso = gso;
    let mut v = PacketVector::new();
    v.push(id).unwrap();

    let before = (pair.a.counters(), pair.a.drops_total());
    let mut sent = vec![];
    pair.a.encap(pool, &mut v, &mut |o, pool, v| {
        assert_eq!(o, Output::Outer, "encap gave {o:?}");
        for &id in v.as_slice() {
            let mut bytes = bytes_of(pool, id);
            if !socket {
                // `offload`: the I/O layer (a NIC) completes it.
                let st = pool.meta(id).csum;
                assert!(
                    setup.mode == ChecksumMode::Offload
                        || !matches!(st, ChecksumState::Partial { .. }),
                    "outer checksum partial in mode {}",
                    setup.mode
                );
                finish_offloaded(&mut bytes, st).expect("offload region inside the packet");
            }
            sent.push(Sent {
                bytes,
                outer: *pool.outer(id),
            });
            pool.free(id);
        }
        v.clear();
    });
    let c = pair.a.counters();
    let drops = pair.a.drops_total() - before.1;
    let (c0, _) = before;
    let (inn, added, out) = (
        c.encap_in - c0.encap_in,
        c.segments_added - c0.segments_added,
        c.encap_out - c0.encap_out,
    );
    assert_eq!(inn, 1);
    assert_eq!(
        inn + added,
        out + drops,
        "encap: in {inn} + segments added {added} != out {out} + drops {drops}\n{}",
        pair.a.runtime().report()
    );
    assert_eq!(sent.len() as u64, out, "the sink got what encap_out says");

    let mut all_good = true;
    for s in &sent {
        all_good &= check_sent(setup, socket, s);
    }
    if drops > 0 || sent.is_empty() || !all_good {
        return;
    }

    // The round trip: the peer decapsulates everything encap sent.
    let mut v = PacketVector::new();
    for s in &sent {
        let id = pool.alloc().expect("pool");
        assert!(pool.fill(id, &s.bytes));
        if socket {
            pool.received_by_socket(id, s.outer);
        }
        v.push(id).unwrap();
    }
    let before = (pair.b.counters(), pair.b.drops_total());
    let mut got = vec![];
    pair.b.decap(pool, &mut v, now_ns, &mut |o, pool, v| {
        assert_eq!(o, Output::Inner, "the peer's decap gave {o:?}");
        for &id in v.as_slice() {
            got.push(bytes_of(pool, id));
            pool.free(id);
        }
        v.clear();
    });
    let c = pair.b.counters();
    let drops = pair.b.drops_total() - before.1;
    assert_eq!(
        drops,
        0,
        "the peer dropped what encap sent\n{}",
        pair.b.runtime().report()
    );
    assert_eq!(c.decap_in - before.0.decap_in, sent.len() as u64);
    assert_eq!(c.decap_out - before.0.decap_out, sent.len() as u64);
    assert_eq!(got.len(), sent.len());

    let link = setup.kind.link();
    match gso {
        None => {
            assert_eq!(got.len(), 1);
            let what = format!("{setup:?}, socket {socket}");
            same_packet(packet, csum, link, &got[0], &what);
        }
        Some(g) => same_segments(packet, g, link, &got),
    }
}

/// One output of encap, dissected with tep-wire. False for an outer
/// checksum that does not verify where that is right: `lco` derives it
/// from the inner checksum without reading the payload (Linux
/// `lco_csum`), so an inner packet whose own checksum is wrong gets an
/// outer one that is wrong too, and the peer drops it (`bad_checksum`)
/// rather than the inner host.
fn check_sent(setup: EncapSetup, socket: bool, s: &Sent) -> bool {
    let mut good = true;
    let kind = setup.kind;
    let payload = if socket {
        assert_eq!(s.outer.dst_port, setup::port(kind));
        assert_eq!(s.outer.src.is_ipv6(), setup.v6);
        assert_eq!(s.outer.dst.is_ipv6(), setup.v6);
        &s.bytes[..]
    } else {
        let (port, payload, ok) =
            setup::outer_ip_udp_sum(&s.bytes).unwrap_or_else(|e| panic!("{e}: {}", hex(&s.bytes)));
        good = ok;
        assert_eq!(port, setup::port(kind));
        let l4 = s.bytes.len() - payload.len() - udp::HEADER_LEN;
        let zero = s.bytes[l4 + 6..l4 + 8] == [0, 0];
        assert_eq!(
            zero,
            setup.mode == ChecksumMode::Zero,
            "outer checksum in mode {}",
            setup.mode
        );
        payload
    };
    let d =
        setup::tunnel_payload(kind, payload).unwrap_or_else(|e| panic!("{e}: {}", hex(&s.bytes)));
    let l3 = if kind.carries_ethernet() {
        setup::inner_frame(d.inner).unwrap_or_else(|e| panic!("{e}: {}", hex(&s.bytes)))
    } else {
        setup::inner_ip(d.inner).unwrap_or_else(|e| panic!("{e}: {}", hex(&s.bytes)));
        Some(0)
    };
    if !good {
        let inner_bad = l3.is_some_and(|l3| transport_sum_ok(&d.inner[l3..]) == Some(false));
        assert!(
            setup.mode == ChecksumMode::Lco && inner_bad,
            "outer UDP checksum in mode {}: {}",
            setup.mode,
            hex(&s.bytes)
        );
    }
    good
}

/// Where the IP packet of `p` starts and ends, by tep-wire.
fn ip_span(p: &[u8], link: InnerLink) -> Option<(usize, usize)> {
    let l3 = match link {
        InnerLink::Ip => 0,
        InnerLink::Ethernet => ethernet_ip_offset(p)?,
    };
    let ip = &p[l3..];
    let len = match ip.first()? >> 4 {
        4 => usize::from(ipv4::Packet::new_checked(ip).ok()?.total_len()),
        6 => ipv6::HEADER_LEN + usize::from(ipv6::Packet::new_checked(ip).ok()?.payload_len()),
        _ => return None,
    };
    Some((l3, l3 + len))
}

/// A packet without GSO came back as it went in (see the module doc).
fn same_packet(input: &[u8], csum: ChecksumState, link: InnerLink, got: &[u8], what: &str) {
    let mut want = input.to_vec();
    if link == InnerLink::Ip {
        // Encap accepted it, so it is an IP packet: trimmed to its length.
        let (_, end) = ip_span(input, link).expect("encap accepted a non-IP packet");
        want.truncate(end);
    }
    assert_eq!(
        got.len(),
        want.len(),
        "round trip changed the length\n in  {}\n out {}",
        hex(&want),
        hex(got)
    );
    let mut got_masked = got.to_vec();
    if let ChecksumState::Partial { start, offset } = csum {
        let (s, o) = (usize::from(start), usize::from(offset));
        // Completed as a device does: the field becomes the complement of
        // the sum from `start` over the bytes with the field's old value
        // (the pseudo-header sum a TUN leaves there), so the new sum plus
        // that old value verifies.
        // The region ends where the IP packet does (Ethernet padding is
        // not summed); a frame without IP, at its end.
        let end = ip_span(got, link).map_or(got.len(), |(_, e)| e);
        let old = Sum::of(&want[o..o + 2]);
        // Ones' complement has two zeros: a region of zeros only (the
        // field's old value, the pseudo-header sum, 0 too: no real packet,
        // whose protocol and length are in it) completes to 0xffff on a
        // device and to 0x0000 where tep derives the region's sum from the
        // datagram's (x - x = -0). Both are zero.
        let all_zero = got[s..end].iter().all(|&b| b == 0) && want[o..o + 2] == [0, 0];
        assert!(
            all_zero || Sum::of(&got[s..end]).add(old).verifies(),
            "{what}: partial checksum (start {s}, field {o}) not completed\n in  {}\n out {}",
            hex(&want),
            hex(got)
        );
        want[o..o + 2].fill(0);
        got_masked[o..o + 2].fill(0);
    }
    assert!(
        got_masked == want,
        "round trip changed the packet\n in  {}\n out {}",
        hex(&want),
        hex(got)
    );
}

/// A super-packet came back as the segments the reference segmenter
/// makes (see the module doc).
fn same_segments(input: &[u8], g: tep_dataplane::Gso, link: InnerLink, got: &[Vec<u8>]) {
    let (l3, end) = ip_span(input, link).expect("encap segmented a non-IP packet");
    assert_eq!(end, input.len(), "a super-packet is one whole IP packet");
    let ip = &input[l3..];
    let v6 = ip[0] >> 4 == 6;
    let (l4, proto) = if v6 {
        let p = ipv6::Packet::new_checked(ip).unwrap();
        let ul = p.upper_layer().expect("encap segmented a bad IPv6 chain");
        (l3 + ipv6::HEADER_LEN + ul.offset, u8::from(ul.protocol))
    } else {
        let p = ipv4::Packet::new_checked(ip).unwrap();
        (l3 + p.header_len(), u8::from(p.protocol()))
    };
    let tcp = proto == 6;
    assert!(tcp || proto == 17, "segmented protocol {proto}");
    assert_eq!(
        tcp,
        matches!(g.kind, GsoKind::Tcp4 | GsoKind::Tcp6),
        "{:?} on protocol {proto}",
        g.kind
    );
    let th = if tcp {
        usize::from(input[l4 + 12] >> 4) * 4
    } else {
        udp::HEADER_LEN
    };
    let hdr = l4 + th;
    let payload = &input[hdr..];
    let seg = usize::from(g.segment_size);
    let n = payload.len().div_ceil(seg).max(1);
    assert_eq!(
        got.len(),
        n,
        "{} payload bytes in {seg}-byte segments",
        payload.len()
    );
    let csum_at = l4 + if tcp { 16 } else { 6 };
    for (i, out) in got.iter().enumerate() {
        let piece = &payload[(i * seg).min(payload.len())..((i + 1) * seg).min(payload.len())];
        let mut want = input[..hdr].to_vec();
        want.extend_from_slice(piece);
        let len = want.len();
        if v6 {
            want[l3 + 4..l3 + 6].copy_from_slice(&((len - l3 - 40) as u16).to_be_bytes());
        } else {
            want[l3 + 2..l3 + 4].copy_from_slice(&((len - l3) as u16).to_be_bytes());
            let id = u16::from_be_bytes([want[l3 + 4], want[l3 + 5]]).wrapping_add(i as u16);
            want[l3 + 4..l3 + 6].copy_from_slice(&id.to_be_bytes());
        }
        if tcp {
            let seq = u32::from_be_bytes(want[l4 + 4..l4 + 8].try_into().unwrap());
            let seq = seq.wrapping_add((i * seg) as u32);
            want[l4 + 4..l4 + 8].copy_from_slice(&seq.to_be_bytes());
            let flags = &mut want[l4 + 13];
            if i > 0 {
                *flags &= !0x80; // CWR
            }
            if i + 1 < n {
                *flags &= !0x09; // FIN, PSH
            }
        } else {
            want[l4 + 4..l4 + 6].copy_from_slice(&((len - l4) as u16).to_be_bytes());
        }
        // The checksums must verify; their values are not compared.
        let o = &out[..];
        assert_eq!(
            o.len(),
            want.len(),
            "segment {i} of {n}\n want {}\n got  {}",
            hex(&want),
            hex(o)
        );
        transport_verifies(o, l3, l4, v6, tcp)
            .unwrap_or_else(|e| panic!("segment {i} of {n}: {e}: {}", hex(o)));
        let mut o = o.to_vec();
        if !v6 {
            o[l3 + 10..l3 + 12].fill(0);
            want[l3 + 10..l3 + 12].fill(0);
        }
        o[csum_at..csum_at + 2].fill(0);
        want[csum_at..csum_at + 2].fill(0);
        assert!(
            o == want,
            "segment {i} of {n}\n want {}\n got  {}",
            hex(&want),
            hex(&o)
        );
    }
}

/// The IPv4 header and the transport checksum of segment `p` verify.
fn transport_verifies(p: &[u8], l3: usize, l4: usize, v6: bool, tcp: bool) -> Result<(), String> {
    let t = &p[l4..];
    if v6 {
        let ip = ipv6::Packet::new_checked(&p[l3..]).map_err(|e| e.to_string())?;
        let (s, d) = (ip.src_addr(), ip.dst_addr());
        let ok = if tcp {
            tcp::Packet::new_checked(t)
                .map_err(|e| e.to_string())?
                .verify_checksum_v6(&s, &d)
        } else {
            udp::Packet::new_checked(t)
                .map_err(|e| e.to_string())?
                .verify_checksum_v6(&s, &d)
                == udp::ChecksumStatus::Valid
        };
        ok.then_some(()).ok_or("transport checksum".into())
    } else {
        let ip = ipv4::Packet::new_checked(&p[l3..]).map_err(|e| e.to_string())?;
        if !ip.verify_checksum() {
            return Err("IPv4 header checksum".into());
        }
        let (s, d) = (ip.src_addr(), ip.dst_addr());
        let ok = if tcp {
            tcp::Packet::new_checked(t)
                .map_err(|e| e.to_string())?
                .verify_checksum_v4(&s, &d)
        } else {
            udp::Packet::new_checked(t)
                .map_err(|e| e.to_string())?
                .verify_checksum_v4(&s, &d)
                == udp::ChecksumStatus::Valid
        };
        ok.then_some(()).ok_or("transport checksum".into())
    }
}

pub(crate) fn hex(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02x}")).collect()
}

/// The encap target's input for `packet` with `vnet`, in `setup`.
pub fn input(setup: EncapSetup, o: u8, vnet: &VnetHeader, packet: &[u8]) -> Vec<u8> {
    let (k, o) = setup.to_bytes(o);
    let mut h = [0u8; VNET_HDR_LEN];
    vnet.emit(&mut h);
    let mut v = vec![k, o];
    v.extend_from_slice(&h);
    v.extend_from_slice(packet);
    v
}

/// Whether the TCP, UDP or ICMP checksum of the IP packet at the start of `ip`
/// verifies, by the sum alone (pseudo-header plus the segment to the IP
/// end, whatever its header holds): what LCO takes for granted. `None`
/// where there is no such checksum.
fn transport_sum_ok(ip: &[u8]) -> Option<bool> {
    let (ph, seg) = match ip.first()? >> 4 {
        4 => {
            let p = ipv4::Packet::new_checked(ip).ok()?;
            let proto = u8::from(p.protocol());
            let seg = ip.get(p.header_len()..usize::from(p.total_len()))?;
            let ph = tep_csum::pseudo_header_v4(
                p.src_addr().octets(),
                p.dst_addr().octets(),
                proto,
                seg.len() as u16,
            );
            (ph, (proto, seg))
        }
        6 => {
            let p = ipv6::Packet::new_checked(ip).ok()?;
            let ul = p.upper_layer().ok()?;
            let end = ipv6::HEADER_LEN + usize::from(p.payload_len());
            let seg = ip.get(ipv6::HEADER_LEN + ul.offset..end)?;
            let proto = u8::from(ul.protocol);
            let ph = tep_csum::pseudo_header_v6(
                &p.src_addr().octets(),
                &p.dst_addr().octets(),
                proto,
                seg.len() as u32,
            );
            (ph, (proto, seg))
        }
        _ => return None,
    };
    let (proto, seg) = seg;
    match proto {
        6 if seg.len() >= 18 => Some(ph.add(Sum::of(seg)).verifies()),
        17 if seg.len() >= 8 && seg[6..8] != [0, 0] => Some(ph.add(Sum::of(seg)).verifies()),
        // ICMP: LCO trusts its checksum as it trusts TCP's and UDP's
        // (ICMPv4 sums no pseudo-header, ICMPv6 does).
        1 if seg.len() >= 4 => Some(Sum::of(seg).verifies()),
        58 if seg.len() >= 4 => Some(ph.add(Sum::of(seg)).verifies()),
        _ => None,
    }
}
