//! Writes the seeds of the decap, encap, config and capture targets into
//! fuzz/seeds/<target>/ (the tep-wire targets' seeds come from
//! make-seeds.py): `cargo run -p tep-fuzz --example make-pipeline-seeds`.
//!
//! - encap: inner packets of each shape tep's TUN/TAP gives it (TCP, UDP,
//!   IPv4 with options, IPv6 with an extension header, partial checksums,
//!   TSO and USO super-packets, Ethernet frames with and without IP, a
//!   VLAN tag) for every kind, both outer families and every checksum
//!   mode the kind has;
//! - decap: what tep's own encap sends into each of the decap target's
//!   tunnels (every checksum mode), alone, as a flow of segments GRO
//!   merges, trusted and not, as a socket hands it over and as a UDP GRO
//!   train; GTP-U Echo Requests; and the IP packets of the tep-wire
//!   vectors (fuzz/seeds/ipv4, ipv6);
//! - config: examples/tep.toml and one small config per kind and section;
//! - capture: the pcap vectors of tep-wire (cut to a few frames) and
//!   pcapng files written here.
//!
//! Deterministic: the same files on every run. `crash-*` files are left
//! alone; every other file of these directories is rewritten.

use std::fs;
use std::path::{Path, PathBuf};

use core::net::IpAddr;
use tep_config::Config;
use tep_csum::Sum;
use tep_dataplane::config::{check_tunnels, ChecksumMode, DataplaneConfig, TunnelConfig};
use tep_dataplane::finish_offloaded;
use tep_dataplane::vnet::{self, VnetHeader};
use tep_dataplane::ManualClock;
use tep_dataplane::PacketVector;
use tep_dataplane::{ChecksumState, Gso, GsoKind, Pool};
use tep_dataplane::{InnerLink, TunnelKind};
use tep_dataplane::{Output, Pipeline, PipelineOptions};
use tep_fuzz::input;
use tep_fuzz::setup::{self, EncapSetup};

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let seeds = root.join("seeds");
    let mut w = Writer::default();
    encap_seeds(&mut w);
    decap_seeds(&mut w, &seeds);
    config_seeds(&mut w, &root.join("../examples/tep.toml"));
    capture_seeds(&mut w, &root.join("../crates/tep-wire/tests/vectors"));
    for (target, files) in &w.targets {
        let dir = seeds.join(target);
        fs::create_dir_all(&dir).unwrap();
        for e in fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if !p
                .file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("crash-")
            {
                fs::remove_file(p).unwrap();
            }
        }
        for (name, bytes) in files {
            fs::write(dir.join(name), bytes).unwrap();
        }
        println!("{target}: {} seeds", files.len());
    }
}

/// A seed file: its name and bytes.
type Seed = (String, Vec<u8>);

#[derive(Default)]
struct Writer {
    targets: Vec<(&'static str, Vec<Seed>)>,
}

impl Writer {
    fn add(&mut self, target: &'static str, name: String, bytes: Vec<u8>) {
        let files = match self.targets.iter_mut().find(|(t, _)| *t == target) {
            Some((_, f)) => f,
            None => {
                self.targets.push((target, vec![]));
                &mut self.targets.last_mut().unwrap().1
            }
        };
        assert!(
            !files.iter().any(|(n, _)| *n == name),
            "{target}/{name} twice"
        );
        files.push((name, bytes));
    }
}

// ---------------------------------------------------------------------------
// Inner packets.

const SRC4: [u8; 4] = [10, 0, 0, 1];
const DST4: [u8; 4] = [10, 9, 0, 1];
const SRC6: [u8; 16] = [0x20, 1, 0xd, 0xb8, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
const DST6: [u8; 16] = [0x20, 1, 0xd, 0xb8, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

fn payload(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(7).wrapping_add(seed))
        .collect()
}

/// An IP header for `proto` and `l4_len` transport bytes: IPv4 (with
/// `opts` bytes of options) or IPv6 (with a hop-by-hop header when `opts`).
fn ip_header(v6: bool, src: &[u8], dst: &[u8], proto: u8, l4_len: usize, opts: usize) -> Vec<u8> {
    if v6 {
        let ext = if opts > 0 { 8 } else { 0 };
        let mut h = vec![0x60, 0, 0, 0];
        h.extend_from_slice(&((l4_len + ext) as u16).to_be_bytes());
        h.push(if ext > 0 { 0 } else { proto });
        h.push(64);
        h.extend_from_slice(src);
        h.extend_from_slice(dst);
        if ext > 0 {
            // Hop-by-hop: next header, length 0, PadN of 4.
            h.extend_from_slice(&[proto, 0, 1, 4, 0, 0, 0, 0]);
        }
        h
    } else {
        let hl = 20 + opts;
        let mut h = vec![0x40 | (hl / 4) as u8, 0x02];
        h.extend_from_slice(&((hl + l4_len) as u16).to_be_bytes());
        h.extend_from_slice(&[0x12, 0x34, 0x40, 0, 64, proto, 0, 0]);
        h.extend_from_slice(src);
        h.extend_from_slice(dst);
        // NOPs, then End of options.
        h.extend(std::iter::repeat_n(1u8, opts.saturating_sub(1)));
        if opts > 0 {
            h.push(0);
        }
        let c = Sum::of(&h).checksum();
        h[10..12].copy_from_slice(&c.to_be_bytes());
        h
    }
}

fn pseudo(v6: bool, src: &[u8], dst: &[u8], proto: u8, len: usize) -> Sum {
    if v6 {
        tep_csum::pseudo_header_v6(
            src.try_into().unwrap(),
            dst.try_into().unwrap(),
            proto,
            len as u32,
        )
    } else {
        tep_csum::pseudo_header_v4(
            src.try_into().unwrap(),
            dst.try_into().unwrap(),
            proto,
            len as u16,
        )
    }
}

/// How an inner packet's transport checksum is left.
#[derive(Clone, Copy, PartialEq)]
enum Cs {
    Full,
    /// The pseudo-header sum, for NEEDS_CSUM.
    Partial,
}

struct Inner {
    bytes: Vec<u8>,
    /// Transport header offset and checksum field offset.
    l4: usize,
    field: usize,
}

fn tcp(v6: bool, dst: &[u8], seq: u32, flags: u8, body: &[u8], cs: Cs, opts: usize) -> Inner {
    let (src, dst): (&[u8], &[u8]) = if v6 { (&SRC6, dst) } else { (&SRC4, dst) };
    let mut t = vec![0u8; 32];
    t[0..2].copy_from_slice(&40000u16.to_be_bytes());
    t[2..4].copy_from_slice(&80u16.to_be_bytes());
    t[4..8].copy_from_slice(&seq.to_be_bytes());
    t[8..12].copy_from_slice(&7u32.to_be_bytes());
    t[12] = 8 << 4; // 32 bytes: timestamps option
    t[13] = flags;
    t[14..16].copy_from_slice(&512u16.to_be_bytes());
    t[20..32].copy_from_slice(&[1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2]);
    t.extend_from_slice(body);
    let ph = pseudo(v6, src, dst, 6, t.len());
    let c = match cs {
        Cs::Full => ph.add(Sum::of(&t)).checksum(),
        Cs::Partial => ph.value(),
    };
    t[16..18].copy_from_slice(&c.to_be_bytes());
    let mut p = ip_header(v6, src, dst, 6, t.len(), opts);
    let l4 = p.len();
    p.extend_from_slice(&t);
    Inner {
        bytes: p,
        l4,
        field: l4 + 16,
    }
}

fn udp(v6: bool, dst: &[u8], body: &[u8], cs: Cs) -> Inner {
    let src: &[u8] = if v6 { &SRC6 } else { &SRC4 };
    let mut u = vec![0u8; 8];
    u[0..2].copy_from_slice(&40001u16.to_be_bytes());
    u[2..4].copy_from_slice(&53u16.to_be_bytes());
    u[4..6].copy_from_slice(&((8 + body.len()) as u16).to_be_bytes());
    u.extend_from_slice(body);
    let ph = pseudo(v6, src, dst, 17, u.len());
    let c = match cs {
        Cs::Full => ph.add(Sum::of(&u)).udp_checksum(),
        Cs::Partial => ph.value(),
    };
    u[6..8].copy_from_slice(&c.to_be_bytes());
    let mut p = ip_header(v6, src, dst, 17, u.len(), 0);
    let l4 = p.len();
    p.extend_from_slice(&u);
    Inner {
        bytes: p,
        l4,
        field: l4 + 6,
    }
}

/// An Ethernet frame to `mac` around `inner` (offsets moved), with a VLAN
/// tag when `vlan`.
fn frame(mac: [u8; 6], inner: Inner, vlan: bool) -> Inner {
    let mut f = mac.to_vec();
    f.extend_from_slice(&[2, 0, 0, 0, 0, 0xaa]);
    if vlan {
        f.extend_from_slice(&[0x81, 0, 0, 42]);
    }
    let ty: u16 = if inner.bytes[0] >> 4 == 6 {
        0x86dd
    } else {
        0x0800
    };
    f.extend_from_slice(&ty.to_be_bytes());
    let n = f.len();
    f.extend_from_slice(&inner.bytes);
    Inner {
        bytes: f,
        l4: inner.l4 + n,
        field: inner.field + n,
    }
}

fn arp_frame(mac: [u8; 6]) -> Vec<u8> {
    let mut f = mac.to_vec();
    f.extend_from_slice(&[2, 0, 0, 0, 0, 0xaa, 0x08, 0x06]);
    f.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    f.extend_from_slice(&[2, 0, 0, 0, 0, 0xaa, 10, 0, 0, 1]);
    f.extend_from_slice(&[0, 0, 0, 0, 0, 0, 10, 9, 0, 1]);
    f
}

fn partial_hdr(i: &Inner) -> VnetHeader {
    VnetHeader {
        flags: vnet::F_NEEDS_CSUM,
        csum_start: i.l4 as u16,
        csum_offset: (i.field - i.l4) as u16,
        ..VnetHeader::default()
    }
}

fn tso_hdr(i: &Inner, gso_type: u8, size: u16, th: usize) -> VnetHeader {
    VnetHeader {
        gso_type,
        gso_size: size,
        hdr_len: (i.l4 + th) as u16,
        ..partial_hdr(i)
    }
}

/// Inner packets of one family for a kind: (name, vnet header, bytes).
fn inner_packets(
    kind: TunnelKind,
    v6: bool,
    dst4: [u8; 4],
    dst6: [u8; 16],
    mac: [u8; 6],
) -> Vec<(String, VnetHeader, Vec<u8>)> {
    let dst: &[u8] = if v6 { &dst6 } else { &dst4 };
    let fam = if v6 { "6" } else { "4" };
    let l2 = kind.carries_ethernet();
    let wrap = |i: Inner| if l2 { frame(mac, i, false) } else { i };
    let mut out = vec![];
    let plain = wrap(tcp(v6, dst, 1000, 0x18, &payload(100, 1), Cs::Full, 0));
    out.push((format!("tcp{fam}"), VnetHeader::default(), plain.bytes));
    let valid = wrap(udp(v6, dst, &payload(60, 2), Cs::Full));
    let h = VnetHeader {
        flags: vnet::F_DATA_VALID,
        ..VnetHeader::default()
    };
    out.push((format!("udp{fam}-valid"), h, valid.bytes));
    let part = wrap(tcp(v6, dst, 5, 0x10, &payload(300, 3), Cs::Partial, 8));
    out.push((format!("tcp{fam}-partial"), partial_hdr(&part), part.bytes));
    let part = wrap(udp(v6, dst, &payload(33, 4), Cs::Partial));
    out.push((format!("udp{fam}-partial"), partial_hdr(&part), part.bytes));
    let (t, ecn) = if v6 {
        (vnet::GSO_TCPV6, 0)
    } else {
        (vnet::GSO_TCPV4, vnet::GSO_ECN)
    };
    // CWR, PSH, FIN set: segmentation keeps each on its segment.
    let tso = wrap(tcp(
        v6,
        dst,
        77,
        0x80 | 0x18 | 0x01,
        &payload(3000, 5),
        Cs::Partial,
        0,
    ));
    let h = tso_hdr(&tso, t | ecn, 1000, 32);
    out.push((format!("tso{fam}"), h, tso.bytes));
    let uso = wrap(udp(v6, dst, &payload(2500, 6), Cs::Partial));
    let h = tso_hdr(&uso, vnet::GSO_UDP_L4, 1200, 8);
    out.push((format!("uso{fam}"), h, uso.bytes));
    if l2 {
        let tagged = frame(
            mac,
            tcp(v6, dst, 9, 0x18, &payload(80, 7), Cs::Full, 0),
            true,
        );
        out.push((format!("vlan{fam}"), VnetHeader::default(), tagged.bytes));
        if !v6 {
            out.push(("arp".into(), VnetHeader::default(), arp_frame(mac)));
        }
    }
    out
}

fn families(kind: TunnelKind) -> &'static [bool] {
    match kind {
        TunnelKind::FouIpip => &[false],
        TunnelKind::FouSit => &[true],
        _ => &[false, true],
    }
}

fn encap_seeds(w: &mut Writer) {
    for kind in TunnelKind::ALL {
        for (m, mode) in tep_dataplane::example::checksum_modes(kind)
            .into_iter()
            .enumerate()
        {
            // One outer family per mode, turn about.
            for outer_v6 in [m % 2 == 1] {
                // Options: gathered and socket vary with the mode, the
                // variation and inherit with the family.
                let o = (m as u8 & 3) | u8::from(outer_v6) << 2 | u8::from(m % 2 == 1) << 3;
                let setup = EncapSetup {
                    kind,
                    mode,
                    v6: outer_v6,
                    variant: o & 4 != 0,
                    inherit: o & 8 != 0,
                };
                for &v6 in families(kind) {
                    let pk =
                        inner_packets(kind, v6, DST4, DST6, tep_dataplane::example::INNER_DST_MAC);
                    // A third of the shapes per mode, turn about: each
                    // shape meets every kind in one mode or two.
                    let pk = pk.into_iter().enumerate().filter(|(j, _)| (j + m) % 3 == 0);
                    for (_, (name, h, bytes)) in pk {
                        let o6 = if outer_v6 { 6 } else { 4 };
                        w.add(
                            "encap",
                            format!("{kind}-{mode}-o{o6}-{name}"),
                            input::encap(setup, o, &h, &bytes),
                        );
                    }
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Decap.

/// What side A (and C) send: the decap config with the ends swapped, in
/// one checksum mode.
fn sender_config(mode: ChecksumMode) -> Vec<TunnelConfig> {
    let mut c = setup::decap_config();
    for t in &mut c {
        core::mem::swap(&mut t.local, &mut t.remote);
        t.checksum = if mode == ChecksumMode::Remote
            && !matches!(t.kind, TunnelKind::Vxlan | TunnelKind::Gue)
        {
            ChecksumMode::Full
        } else {
            mode
        };
    }
    check_tunnels(&c).unwrap();
    c
}

/// Encapsulates `packets` (one vector, each with its checksum state and
/// GSO) in `p`; returns the outer packets, offload checksums completed.
fn encap_all(
    p: &mut Pipeline<ManualClock>,
    pool: &mut Pool,
    link: InnerLink,
    packets: &[(ChecksumState, Option<Gso>, Vec<u8>)],
) -> Vec<Vec<u8>> {
    let mut v = PacketVector::new();
    for (cs, gso, b) in packets {
        let id = pool.alloc().unwrap();
        assert!(pool.fill(id, b));
        pool.meta_mut(id).csum = *cs;
        pool.meta_mut(id).gso = *gso;
        v.push(id).unwrap();
    }
    let mut out = vec![];
    p.encap_from(link, pool, &mut v, &mut |o, pool, v| {
        assert_eq!(o, Output::Outer);
        for &id in v.as_slice() {
            let mut b = setup::bytes_of(pool, id);
            finish_offloaded(&mut b, pool.meta(id).csum).unwrap();
            out.push(b);
            pool.free(id);
        }
        v.clear();
    });
    assert_eq!(p.drops_total(), 0, "{}", p.runtime().report());
    out
}

/// A decap input: control byte, then each datagram behind its length.
fn decap_input(c: u8, datagrams: &[Vec<u8>]) -> Vec<u8> {
    let mut v = vec![c];
    for d in datagrams {
        v.extend_from_slice(&(d.len() as u16).to_be_bytes());
        v.extend_from_slice(d);
    }
    v
}

/// What a UDP socket would hand the decap target for `out`: the selector
/// byte `sel`, then each packet's UDP payload.
fn as_from_socket(sel: u8, out: &[Vec<u8>]) -> Vec<Vec<u8>> {
    out.iter()
        .map(|o| {
            let mut d = vec![sel];
            d.extend_from_slice(udp_payload(o));
            d
        })
        .collect()
}

/// The UDP payload of an outer packet tep wrote (no IPv6 extensions).
fn udp_payload(p: &[u8]) -> &[u8] {
    let l4 = if p[0] >> 4 == 4 {
        usize::from(p[0] & 0xf) * 4
    } else {
        40
    };
    &p[l4 + 8..]
}

fn decap_seeds(w: &mut Writer, seeds: &Path) {
    let receiver = setup::decap_config();
    let mut pool = setup::pool();
    for (mi, mode) in ChecksumMode::ALL.into_iter().enumerate() {
        let config = sender_config(mode);
        let mut p = Pipeline::new(
            &config,
            &DataplaneConfig::default(),
            ManualClock::default(),
            PipelineOptions::default(),
        );
        for (i, t) in config.iter().enumerate() {
            // Each tunnel in one of the five modes, turn about.
            if (i + mi) % 5 != 0 {
                continue;
            }
            let i8 = i as u8;
            let dst4 = [10, i8, 0, 1];
            let dst6 = [0x20, 1, 0xd, 0xb8, 0, 8, 0, i8, 0, 0, 0, 0, 0, 0, 0, 1];
            let mac = [2, 0, 0, 0, i8, 0xbb];
            let v6 = match t.kind {
                TunnelKind::FouIpip => false,
                TunnelKind::FouSit => true,
                _ => i % 4 >= 2,
            };
            let link = t.kind.link();
            let name = format!("{}-{mode}", t.name);
            let wrap = |x: Inner| {
                if t.kind.carries_ethernet() {
                    frame(mac, x, false)
                } else {
                    x
                }
            };
            let dst: &[u8] = if v6 { &dst6 } else { &dst4 };
            // One packet, then a flow of three segments GRO merges.
            let one = wrap(udp(v6, dst, &payload(70, i8), Cs::Full));
            let out = encap_all(
                &mut p,
                &mut pool,
                link,
                &[(ChecksumState::None, None, one.bytes)],
            );
            let sel = i8 | if i % 3 == 0 { 0x40 } else { 0 };
            w.add("decap", format!("{name}-one"), decap_input(0, &out));
            w.add(
                "decap",
                format!("{name}-one-trusted"),
                decap_input(input::TRUSTED | input::COMPLETED, &out),
            );
            let flow: Vec<_> = (0..3u32)
                .map(|k| {
                    let x = wrap(tcp(
                        v6,
                        dst,
                        100 + 200 * k,
                        0x10,
                        &payload(200, k as u8),
                        Cs::Full,
                        0,
                    ));
                    (ChecksumState::None, None, x.bytes)
                })
                .collect();
            let out = encap_all(&mut p, &mut pool, link, &flow);
            w.add(
                "decap",
                format!("{name}-flow"),
                decap_input(input::STATED, &out),
            );
            let socketed = as_from_socket(sel, &out);
            w.add(
                "decap",
                format!("{name}-flow-socket"),
                decap_input(input::SOCKET | input::STATED, &socketed),
            );
            // A TSO super-packet segmented: a train of equal datagrams.
            let tso = wrap(tcp(v6, dst, 9, 0x18, &payload(2000, i8), Cs::Partial, 0));
            let kind = if v6 { GsoKind::Tcp6 } else { GsoKind::Tcp4 };
            let gso = Some(Gso {
                kind,
                segment_size: 700,
            });
            let cs = ChecksumState::Partial {
                start: tso.l4 as u16,
                offset: tso.field as u16,
            };
            let out = encap_all(&mut p, &mut pool, link, &[(cs, gso, tso.bytes)]);
            let socketed = as_from_socket(sel, &out);
            w.add(
                "decap",
                format!("{name}-train"),
                decap_input(
                    input::SOCKET | input::TRAIN | input::GATHER | input::STATED,
                    &socketed,
                ),
            );
        }
    }
    assert_eq!(pool.available(), pool.capacity());
    // GTP-U Echo Requests to each GTP-U tunnel's address, and a G-PDU to
    // an unknown TEID (an Error Indication back).
    for t in receiver.iter().filter(|t| t.kind == TunnelKind::Gtpu) {
        let echo = [0x32, 1, 0, 4, 0, 0, 0, 0, 0x12, 0x34, 0, 0];
        let mut gpdu = vec![0x30, 0xff, 0, 28, 0, 0, 0x99, 0x99];
        gpdu.extend_from_slice(&udp(false, &DST4, &payload(0, 0), Cs::Full).bytes);
        for (what, msg) in [("echo", &echo[..]), ("unknown-teid", &gpdu[..])] {
            let d = outer_udp(t.remote, t.local, 2152, msg);
            w.add(
                "decap",
                format!("{}-{what}", t.name),
                decap_input(input::TRUSTED, &[d]),
            );
        }
    }
    // The tep-wire vectors' IP packets (tunnels to other addresses).
    for dir in ["ipv4", "ipv6"] {
        let mut files: Vec<_> = fs::read_dir(seeds.join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                !p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("crash-")
            })
            .collect();
        files.sort();
        for f in files.iter().take(12) {
            let d = fs::read(f).unwrap();
            let name = f.file_name().unwrap().to_string_lossy().to_string();
            w.add("decap", format!("vector-{name}"), decap_input(0, &[d]));
        }
    }
}

/// An outer IP/UDP datagram from `src` to `dst`, checksums complete.
fn outer_udp(src: IpAddr, dst: IpAddr, port: u16, payload: &[u8]) -> Vec<u8> {
    let (v6, s, d) = match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => (false, s.octets().to_vec(), d.octets().to_vec()),
        (IpAddr::V6(s), IpAddr::V6(d)) => (true, s.octets().to_vec(), d.octets().to_vec()),
        _ => unreachable!(),
    };
    let mut u = vec![0u8; 8];
    u[0..2].copy_from_slice(&2152u16.to_be_bytes());
    u[2..4].copy_from_slice(&port.to_be_bytes());
    u[4..6].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    u.extend_from_slice(payload);
    let c = pseudo(v6, &s, &d, 17, u.len())
        .add(Sum::of(&u))
        .udp_checksum();
    u[6..8].copy_from_slice(&c.to_be_bytes());
    let mut p = ip_header(v6, &s, &d, 17, u.len(), 0);
    p.extend_from_slice(&u);
    p
}

// ---------------------------------------------------------------------------
// Config and capture.

fn config_seeds(w: &mut Writer, example: &Path) {
    w.add(
        "config",
        "example-tep.toml".into(),
        fs::read(example).unwrap(),
    );
    for kind in TunnelKind::ALL {
        let (l, r) = ("192.0.2.1", "192.0.2.2");
        let mut t = format!(
            "[[tunnel]]\nname = \"t-{kind}\"\nkind = \"{kind}\"\nlocal = \"{l}\"\nremote = \"{r}\"\n"
        );
        match kind {
            TunnelKind::Vxlan | TunnelKind::Geneve => {
                t += "vni = 42\ninner_macs = [\"02:00:00:00:00:01\"]\n"
            }
            TunnelKind::Gtpu => {
                t +=
                    "teid = 0x100\nlocal_teid = 0x200\nqfi = 5\ninner_prefixes = [\"10.0.0.0/8\"]\n"
            }
            TunnelKind::FouSit => t += "inner_prefixes = [\"2001:db8:1::/48\"]\n",
            TunnelKind::GreInUdp | TunnelKind::FouGre | TunnelKind::GueGre => {
                t += "key = 7\ninner_prefixes = [\"10.0.0.0/8\", \"2001:db8:1::/48\"]\n"
            }
            _ => t += "inner_prefixes = [\"10.0.0.0/8\"]\n",
        }
        if kind == TunnelKind::Gue {
            t += "checksum = \"remote\"\ngue_rco = \"ietf\"\nremote_checksum_rx = true\n";
        }
        t += "ttl = \"inherit\"\ndscp = 10\ndf = \"inherit\"\nsource_ports = [1000, 2000]\n";
        w.add("config", format!("{kind}.toml"), t.into_bytes());
    }
    let host = "[host]\ntun = \"tep0\"\ntap = \"tap0\"\ntun_addresses = [\"10.1.0.1/24\"]\nmtu = 1400\nqueues = 2\noffloads = true\n\n[dataplane]\nerror_indication_rate = 5\nrestart_counter = 3\n\n[[tunnel]]\nname = \"a\"\nkind = \"gue\"\nlocal = \"2001:db8::1\"\nremote = \"2001:db8::2\"\nchecksum = \"zero\"\nzero_checksum_tx = true\ninner_prefixes = [\"10.2.0.0/16\"]\n";
    w.add("config", "host.toml".into(), host.as_bytes().to_vec());
    let gw = "[gateway]\ninner = \"eth0\"\nunderlay = \"eth1\"\nxdp_mode = \"generic\"\n\n[[tunnel]]\nname = \"g\"\nkind = \"vxlan\"\nlocal = \"192.0.2.1\"\nremote = \"192.0.2.2\"\nvni = 1\n";
    w.add("config", "gateway.toml".into(), gw.as_bytes().to_vec());
    // Every seed but the broken ones is a config tep takes.
    for (name, text) in &w.targets.last().unwrap().1 {
        let text = std::str::from_utf8(text).unwrap();
        if let Err(e) = Config::parse(text) {
            panic!("config seed {name}: {e}");
        }
    }
}

fn capture_seeds(w: &mut Writer, vectors: &Path) {
    use pcap_file::pcap::{PcapReader, PcapWriter};
    use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
    use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionBlock;
    use pcap_file::pcapng::blocks::simple_packet::SimplePacketBlock;
    use pcap_file::pcapng::PcapNgWriter;
    use pcap_file::DataLink;
    use std::borrow::Cow;
    use std::time::Duration;
    for name in ["gtpu.pcap", "tunnels.pcap", "kernel-vxlan-rco.pcap"] {
        // The first three frames: small seeds, every record kind kept.
        let bytes = fs::read(vectors.join(name)).unwrap();
        let mut r = PcapReader::new(&bytes[..]).unwrap();
        let mut wr = PcapWriter::with_header(Vec::new(), r.header()).unwrap();
        for _ in 0..3 {
            match r.next_raw_packet() {
                Some(p) => {
                    wr.write_raw_packet(&p.unwrap()).unwrap();
                }
                None => break,
            }
        }
        w.add("capture", name.to_string(), wr.into_writer());
    }
    // pcapng: two interfaces (Ethernet and raw IP), enhanced and simple
    // packet blocks.
    let frame_bytes = frame(
        [2, 0, 0, 0, 0, 1],
        udp(false, &DST4, &payload(20, 9), Cs::Full),
        false,
    )
    .bytes;
    let ip = udp(true, &DST6, &payload(12, 3), Cs::Full).bytes;
    let mut ng = PcapNgWriter::new(Vec::new()).unwrap();
    for link in [DataLink::ETHERNET, DataLink::RAW] {
        ng.write_pcapng_block(InterfaceDescriptionBlock {
            linktype: link,
            snaplen: 0xffff,
            options: vec![],
        })
        .unwrap();
    }
    for (iface, data) in [(0u32, &frame_bytes), (1, &ip), (0, &frame_bytes)] {
        ng.write_pcapng_block(EnhancedPacketBlock {
            interface_id: iface,
            timestamp: Duration::new(1_700_000_000, 123_456_000),
            original_len: data.len() as u32,
            data: Cow::Borrowed(&data[..]),
            options: vec![],
        })
        .unwrap();
    }
    ng.write_pcapng_block(SimplePacketBlock {
        original_len: frame_bytes.len() as u32,
        data: Cow::Borrowed(&frame_bytes[..]),
    })
    .unwrap();
    w.add("capture", "two-interfaces.pcapng".into(), ng.into_inner());
}
