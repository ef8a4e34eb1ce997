//! Cross-checks tep-wire's emitters against an outside dissector: every
//! frame below is built with tep-wire's Reprs only (`emit`,
//! `fill_checksum*`), written to a pcap and read back by `tshark`, and the
//! fields tshark shows must equal the values the Reprs were built from. A
//! wrong VNI, TEID, length or checksum in an emitter fails here.
//!
//! tshark 4.0 is run once for all frames with checksum validation on (it is
//! off by default). Without tshark on PATH the test says SKIPPED where a
//! person sees it and passes, or fails under CI=true (CI installs it).

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use tep_wire::ethernet::{self, EtherType, EthernetAddress, EthernetRepr};
use tep_wire::geneve::{self, GeneveOption, GeneveRepr};
use tep_wire::gre::{self, GreRepr};
use tep_wire::gtpu::{self, Extension, GtpuMessage, GtpuRepr, PduSessionContainer};
use tep_wire::gue::{self, GueFields, GueRepr};
use tep_wire::ipv4::{self, Ipv4Repr};
use tep_wire::ipv6::{self, Ipv6Repr};
use tep_wire::tcp::{self, TcpFlags, TcpRepr};
use tep_wire::udp::{self, UdpRepr};
use tep_wire::vxlan::{self, GpeProtocol, VxlanGbp, VxlanGpe, VxlanRco, VxlanRepr};
use tep_wire::IpProtocol;

// tshark's `*.checksum.status` values (epan/proto.h, proto_checksum_enum_e).
const CSUM_BAD: u64 = 0;
const CSUM_GOOD: u64 = 1;
const CSUM_ILLEGAL: u64 = 4;

const VXLAN_PORT: u16 = 4789;
const VXLAN_GPE_PORT: u16 = 4790;
const GENEVE_PORT: u16 = 6081;
const GRE_UDP_PORT: u16 = 4754;
const GUE_PORT: u16 = 6080;

const OUTER_SRC4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const OUTER_DST4: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 2);
const OUTER_SRC6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
const OUTER_DST6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);
const INNER_SRC4: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const INNER_DST4: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const INNER_SRC6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 0xa);
const INNER_DST6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 0xb);
const MAC_A: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x0a]);
const MAC_B: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x0b]);

// ---------------------------------------------------------------- builders

/// A header of `len` bytes written by `emit`, then `payload`.
fn header_then(len: usize, payload: &[u8], emit: impl FnOnce(&mut [u8])) -> Vec<u8> {
    let mut b = vec![0; len + payload.len()];
    emit(&mut b[..]);
    b[len..].copy_from_slice(payload);
    b
}

/// Ethernet header + `payload`.
fn eth(ethertype: EtherType, payload: &[u8]) -> Vec<u8> {
    let repr = EthernetRepr {
        src_addr: MAC_A,
        dst_addr: MAC_B,
        outer_tag: None,
        inner_tag: None,
        ethertype,
    };
    header_then(repr.buffer_len(), payload, |b| {
        repr.emit(&mut ethernet::Packet::new_unchecked(b))
    })
}

/// IPv4 header (checksum by `emit`) + `payload`.
fn ipv4(src: Ipv4Addr, dst: Ipv4Addr, protocol: IpProtocol, payload: &[u8]) -> Vec<u8> {
    let repr = Ipv4Repr {
        src_addr: src,
        dst_addr: dst,
        protocol,
        payload_len: payload.len(),
        ttl: 64,
        dscp: 0,
        ecn: 0,
        ident: 0x1234,
        dont_frag: true,
        more_frags: false,
        frag_offset: 0,
    };
    header_then(repr.buffer_len(), payload, |b| {
        repr.emit(&mut ipv4::Packet::new_unchecked(b))
    })
}

/// IPv6 header + `payload`.
fn ipv6(src: Ipv6Addr, dst: Ipv6Addr, next_header: IpProtocol, payload: &[u8]) -> Vec<u8> {
    let repr = Ipv6Repr {
        src_addr: src,
        dst_addr: dst,
        next_header,
        payload_len: payload.len(),
        hop_limit: 64,
        traffic_class: 0,
        flow_label: 0x12345,
    };
    header_then(repr.buffer_len(), payload, |b| {
        repr.emit(&mut ipv6::Packet::new_unchecked(b))
    })
}

#[derive(Clone, Copy)]
enum Csum {
    /// `fill_checksum_v4/v6`.
    Full,
    /// Checksum field 0 (no checksum; RFC 6935 zero-checksum for IPv6).
    Zero,
}

/// UDP header + `payload` with the checksum per `csum`, for `src`/`dst`.
fn udp(src: IpAddr, dst: IpAddr, sport: u16, dport: u16, csum: Csum, payload: &[u8]) -> Vec<u8> {
    let repr = UdpRepr {
        src_port: sport,
        dst_port: dport,
        payload_len: payload.len(),
        checksum: 0,
    };
    let mut b = vec![0; repr.buffer_len() + payload.len()];
    let mut p = udp::Packet::new_unchecked(&mut b[..]);
    repr.emit(&mut p);
    p.payload_mut().copy_from_slice(payload);
    if let Csum::Full = csum {
        match (src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => p.fill_checksum_v4(&s, &d),
            (IpAddr::V6(s), IpAddr::V6(d)) => p.fill_checksum_v6(&s, &d),
            _ => unreachable!("mixed address families"),
        }
    }
    b
}

/// TCP header + `payload` with a full checksum for `src`/`dst`.
fn tcp(src: IpAddr, dst: IpAddr, payload: &[u8]) -> Vec<u8> {
    let repr = TcpRepr {
        src_port: 40000,
        dst_port: 443,
        seq_number: 0x0102_0304,
        ack_number: 0x0a0b_0c0d,
        flags: TcpFlags::ACK | TcpFlags::PSH,
        window_len: 502,
        checksum: 0,
        urgent_pointer: 0,
        options: &[],
    };
    let mut b = vec![0; repr.buffer_len() + payload.len()];
    let mut p = tcp::Packet::new_unchecked(&mut b[..]);
    repr.emit(&mut p);
    p.payload_mut().copy_from_slice(payload);
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => p.fill_checksum_v4(&s, &d),
        (IpAddr::V6(s), IpAddr::V6(d)) => p.fill_checksum_v6(&s, &d),
        _ => unreachable!("mixed address families"),
    }
    b
}

/// Inner IPv4/UDP packet with a full checksum.
fn inner_v4_udp() -> Vec<u8> {
    let u = udp(
        INNER_SRC4.into(),
        INNER_DST4.into(),
        33333,
        60000,
        Csum::Full,
        b"inner udp payload",
    );
    ipv4(INNER_SRC4, INNER_DST4, IpProtocol::Udp, &u)
}

/// Inner IPv4/TCP packet with a full checksum.
fn inner_v4_tcp() -> Vec<u8> {
    let t = tcp(INNER_SRC4.into(), INNER_DST4.into(), b"inner tcp payload");
    ipv4(INNER_SRC4, INNER_DST4, IpProtocol::Tcp, &t)
}

/// Inner IPv6/TCP packet with a full checksum.
fn inner_v6_tcp() -> Vec<u8> {
    let t = tcp(INNER_SRC6.into(), INNER_DST6.into(), b"inner tcp6 payload");
    ipv6(INNER_SRC6, INNER_DST6, IpProtocol::Tcp, &t)
}

/// Outer Ethernet/IPv4/UDP frame to `dport` carrying `tunnel`.
fn outer_v4(dport: u16, tunnel: &[u8]) -> Vec<u8> {
    let u = udp(
        OUTER_SRC4.into(),
        OUTER_DST4.into(),
        49321,
        dport,
        Csum::Full,
        tunnel,
    );
    eth(
        EtherType::Ipv4,
        &ipv4(OUTER_SRC4, OUTER_DST4, IpProtocol::Udp, &u),
    )
}

/// Outer Ethernet/IPv6/UDP frame to `dport` carrying `tunnel`.
fn outer_v6(dport: u16, csum: Csum, tunnel: &[u8]) -> Vec<u8> {
    let u = udp(
        OUTER_SRC6.into(),
        OUTER_DST6.into(),
        50123,
        dport,
        csum,
        tunnel,
    );
    eth(
        EtherType::Ipv6,
        &ipv6(OUTER_SRC6, OUTER_DST6, IpProtocol::Udp, &u),
    )
}

fn vxlan(repr: &VxlanRepr, inner: &[u8]) -> Vec<u8> {
    header_then(repr.buffer_len(), inner, |b| {
        repr.emit(&mut vxlan::Packet::new_unchecked(b))
    })
}

fn geneve(repr: &GeneveRepr<'_>, inner: &[u8]) -> Vec<u8> {
    header_then(repr.buffer_len(), inner, |b| {
        repr.emit(&mut geneve::Packet::new_unchecked(b))
    })
}

/// GRE header + `inner`, the GRE checksum (if any) filled over both.
fn gre(repr: &GreRepr, inner: &[u8]) -> Vec<u8> {
    let mut b = vec![0; repr.buffer_len() + inner.len()];
    let mut p = gre::Packet::new_unchecked(&mut b[..]);
    repr.emit(&mut p);
    p.payload_mut().copy_from_slice(inner);
    p.fill_checksum();
    b
}

fn gtpu(repr: &GtpuRepr, tpdu: &[u8]) -> Vec<u8> {
    header_then(repr.buffer_len(), tpdu, |b| repr.emit(b, tpdu.len()))
}

fn gue(repr: &GueRepr, inner: &[u8]) -> Vec<u8> {
    header_then(repr.buffer_len(), inner, |b| {
        repr.emit(&mut gue::Packet::new_unchecked(b))
    })
}

/// The outer UDP checksum tep wrote into `frame` (Ethernet/IPvX/UDP).
fn outer_udp_checksum(frame: &[u8]) -> u16 {
    let l3 = &frame[ethernet::HEADER_LEN..];
    let l4 = match l3[0] >> 4 {
        4 => &l3[ipv4::HEADER_LEN..],
        _ => &l3[ipv6::HEADER_LEN..],
    };
    udp::Packet::new_checked(l4).unwrap().checksum()
}

// ------------------------------------------------------------ expectations

/// What one tshark field must show in one frame.
#[derive(Debug)]
enum Want {
    /// Occurrence `n` (0-based) of the field is this number.
    Num(usize, u64),
    /// Occurrence `n` is this text (addresses).
    Text(usize, String),
    /// The field occurs exactly this many times.
    Count(usize),
}

struct Case {
    name: &'static str,
    frame: Vec<u8>,
    checks: Vec<(&'static str, Want)>,
}

impl Case {
    fn new(name: &'static str, frame: Vec<u8>) -> Case {
        Case {
            name,
            frame,
            checks: Vec::new(),
        }
    }

    fn num(mut self, field: &'static str, n: usize, v: impl Into<u64>) -> Case {
        self.checks.push((field, Want::Num(n, v.into())));
        self
    }

    fn text(mut self, field: &'static str, n: usize, v: impl ToString) -> Case {
        self.checks.push((field, Want::Text(n, v.to_string())));
        self
    }

    fn count(mut self, field: &'static str, c: usize) -> Case {
        self.checks.push((field, Want::Count(c)));
        self
    }

    /// Outer IPv4 header checksum and outer UDP checksum value and status.
    fn outer_v4_good(self) -> Case {
        let c = outer_udp_checksum(&self.frame);
        self.num("ip.checksum.status", 0, CSUM_GOOD)
            .num("udp.checksum", 0, c)
            .num("udp.checksum.status", 0, CSUM_GOOD)
    }

    /// Outer UDP checksum value and status (IPv6 has no header checksum).
    fn outer_v6_good(self) -> Case {
        let c = outer_udp_checksum(&self.frame);
        self.num("udp.checksum", 0, c)
            .num("udp.checksum.status", 0, CSUM_GOOD)
    }
}

/// tshark prints unsigned fields in decimal or, for hex-displayed ones,
/// as `0x...`; booleans as `1`/`0` or `True`/`False`.
fn parse_num(s: &str) -> Option<u64> {
    match s {
        "True" => Some(1),
        "False" => Some(0),
        _ => match s.strip_prefix("0x") {
            Some(h) => u64::from_str_radix(h, 16).ok(),
            None => s.parse().ok(),
        },
    }
}

// ------------------------------------------------------------ tshark runner

/// A temp dir removed on drop (also when an assertion panics).
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let p = std::env::temp_dir().join(format!(
            "tep-wire-tshark-{tag}-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A classic pcap (microsecond, LINKTYPE_ETHERNET) of `frames`.
fn write_pcap(path: &Path, frames: &[&[u8]]) {
    let mut out = Vec::new();
    out.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes()); // magic
    out.extend_from_slice(&2u16.to_le_bytes()); // version major
    out.extend_from_slice(&4u16.to_le_bytes()); // version minor
    out.extend_from_slice(&0i32.to_le_bytes()); // thiszone
    out.extend_from_slice(&0u32.to_le_bytes()); // sigfigs
    out.extend_from_slice(&65535u32.to_le_bytes()); // snaplen
    out.extend_from_slice(&1u32.to_le_bytes()); // LINKTYPE_ETHERNET
    for (i, f) in frames.iter().enumerate() {
        let len = u32::try_from(f.len()).unwrap();
        out.extend_from_slice(&(1_700_000_000u32 + i as u32).to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(f);
    }
    std::fs::write(path, out).unwrap();
}

fn tshark_available() -> bool {
    Command::new("tshark")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

fn hex(b: &[u8]) -> String {
    b.iter().fold(String::new(), |mut s, x| {
        let _ = write!(s, "{x:02x}");
        s
    })
}

/// Runs tshark once over all `cases` and returns one message per mismatch
/// (empty when tshark agrees with every expectation).
fn run_cases(tag: &str, cases: &[Case]) -> Vec<String> {
    let dir = TempDir::new(tag);
    let pcap = dir.0.join("frames.pcap");
    let frames: Vec<&[u8]> = cases.iter().map(|c| &c.frame[..]).collect();
    write_pcap(&pcap, &frames);

    let mut fields: Vec<&str> = vec!["frame.number"];
    for c in cases {
        for (f, _) in &c.checks {
            if !fields.contains(f) {
                fields.push(f);
            }
        }
    }
    let mut cmd = Command::new("tshark");
    cmd.env("HOME", &dir.0)
        .arg("-n")
        .arg("-r")
        .arg(&pcap)
        .args(["-o", "ip.check_checksum:TRUE"])
        .args(["-o", "udp.check_checksum:TRUE"])
        .args(["-o", "tcp.check_checksum:TRUE"])
        .args(["-T", "fields", "-E", "separator=/t"])
        .args(["-E", "occurrence=a", "-E", "aggregator=|"]);
    for f in &fields {
        cmd.args(["-e", f]);
    }
    let out = cmd.output().expect("run tshark");
    assert!(
        out.status.success(),
        "tshark failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), cases.len(), "tshark output:\n{stdout}");

    let mut errors = Vec::new();
    for (i, (case, line)) in cases.iter().zip(&lines).enumerate() {
        let cols: Vec<&str> = line.split('\t').collect();
        assert_eq!(cols.len(), fields.len(), "line {line:?}");
        assert_eq!(cols[0], (i + 1).to_string());
        let values = |f: &str| -> Vec<&str> {
            let col = cols[fields.iter().position(|x| *x == f).unwrap()];
            if col.is_empty() {
                Vec::new()
            } else {
                col.split('|').collect()
            }
        };
        for (field, want) in &case.checks {
            let got = values(field);
            let ok = match want {
                Want::Num(n, v) => got.get(*n).and_then(|s| parse_num(s)) == Some(*v),
                Want::Text(n, v) => got.get(*n) == Some(&v.as_str()),
                Want::Count(c) => got.len() == *c,
            };
            if !ok {
                errors.push(format!(
                    "frame {} `{}`: {field}: want {want:?}, tshark shows {got:?}\n  frame bytes: {}",
                    i + 1,
                    case.name,
                    hex(&case.frame)
                ));
            }
        }
    }
    errors
}

fn check(tag: &str, cases: &[Case]) {
    if !tshark_available() {
        tep_testing::skip(format_args!(
            "{tag}: tshark not installed; the tep-wire/tshark cross-check did not run"
        ));
        return;
    }
    let errors = run_cases(tag, cases);
    assert!(
        errors.is_empty(),
        "{} mismatches between tep-wire and tshark:\n{}",
        errors.len(),
        errors.join("\n")
    );
}

// ------------------------------------------------------------------ cases

fn vxlan_cases() -> Vec<Case> {
    let mut cases = Vec::new();

    // Plain VXLAN, IPv4 outer, inner Ethernet/IPv4/TCP.
    let repr = VxlanRepr {
        vni: 0x00ab_cdef,
        rco: None,
        gbp: None,
        gpe: None,
    };
    let frame = outer_v4(
        VXLAN_PORT,
        &vxlan(&repr, &eth(EtherType::Ipv4, &inner_v4_tcp())),
    );
    cases.push(
        Case::new("vxlan v4", frame)
            .outer_v4_good()
            .num("vxlan.vni", 0, repr.vni)
            .num("vxlan.flags", 0, u16::from(vxlan::FLAG_I) << 8)
            .num("vxlan.flag_i", 0, 1u8)
            .num("ip.checksum.status", 1, CSUM_GOOD)
            .num("tcp.checksum.status", 0, CSUM_GOOD),
    );

    // VXLAN with RCO (TCP, start 34): I in byte 0, RCO 0x20 in byte 1,
    // start/2 in byte 7. tshark has no RCO support: it shows the raw flags
    // word and byte 7 as `vxlan.reserved8`. The inner TCP checksum holds
    // only the pseudo-header sum as RCO prescribes, so it is not checked.
    let rco = VxlanRco::new(34, false).unwrap();
    let repr = VxlanRepr {
        vni: 42,
        rco: Some(rco),
        gbp: None,
        gpe: None,
    };
    let frame = outer_v4(
        VXLAN_PORT,
        &vxlan(&repr, &eth(EtherType::Ipv4, &inner_v4_tcp())),
    );
    cases.push(
        Case::new("vxlan rco v4", frame)
            .outer_v4_good()
            .num("vxlan.vni", 0, repr.vni)
            .num(
                "vxlan.flags",
                0,
                u16::from_be_bytes([vxlan::FLAG_I, vxlan::FLAG_RCO]),
            )
            .num("vxlan.reserved8", 0, rco.start() / 2),
    );

    // IPv6 outer with a full UDP checksum.
    let repr = VxlanRepr {
        vni: 0x0012_3456,
        rco: None,
        gbp: None,
        gpe: None,
    };
    let frame = outer_v6(
        VXLAN_PORT,
        Csum::Full,
        &vxlan(&repr, &eth(EtherType::Ipv4, &inner_v4_udp())),
    );
    cases.push(
        Case::new("vxlan v6", frame)
            .outer_v6_good()
            .num("vxlan.vni", 0, repr.vni)
            .num("vxlan.flags", 0, u16::from(vxlan::FLAG_I) << 8)
            .num("ip.checksum.status", 0, CSUM_GOOD)
            .num("udp.checksum.status", 1, CSUM_GOOD),
    );

    // IPv6 outer with a zero UDP checksum (RFC 6935 tunnels; Linux
    // `udp6zerocsumtx`). tshark 4.0 flags it as Illegal: RFC 8200 forbids
    // zero for plain UDP/IPv6 and tshark does not know the tunnel exception.
    let repr = VxlanRepr {
        vni: 7,
        rco: None,
        gbp: None,
        gpe: None,
    };
    let frame = outer_v6(
        VXLAN_PORT,
        Csum::Zero,
        &vxlan(&repr, &eth(EtherType::Ipv4, &inner_v4_udp())),
    );
    cases.push(
        Case::new("vxlan v6 zero csum", frame)
            .num("udp.checksum", 0, 0u16)
            .num("udp.checksum.status", 0, CSUM_ILLEGAL)
            .num("vxlan.vni", 0, repr.vni)
            .num("udp.checksum.status", 1, CSUM_GOOD),
    );

    // GBP (policy ID, D and A) and GPE (next protocol IPv4, port 4790):
    // tshark reads byte 0..1 as one 16-bit flags field.
    let gbp = VxlanGbp {
        policy_id: 0x0abc,
        dont_learn: true,
        policy_applied: true,
    };
    let repr = VxlanRepr {
        vni: 0x0000_1001,
        rco: None,
        gbp: Some(gbp),
        gpe: None,
    };
    let frame = outer_v4(
        VXLAN_PORT,
        &vxlan(&repr, &eth(EtherType::Ipv4, &inner_v4_udp())),
    );
    cases.push(
        Case::new("vxlan gbp v4", frame)
            .outer_v4_good()
            .num("vxlan.vni", 0, repr.vni)
            .num(
                "vxlan.flags",
                0,
                u16::from_be_bytes([
                    vxlan::FLAG_I | vxlan::FLAG_G,
                    vxlan::GBP_FLAG_D | vxlan::GBP_FLAG_A,
                ]),
            )
            .num("vxlan.flag_g", 0, true)
            .num("vxlan.flag_d", 0, gbp.dont_learn)
            .num("vxlan.flag_a", 0, gbp.policy_applied)
            .num("vxlan.gbp", 0, gbp.policy_id),
    );
    let gpe = VxlanGpe {
        next_protocol: GpeProtocol::Ipv4,
        oam: false,
    };
    let repr = VxlanRepr {
        vni: 0x0000_2002,
        rco: None,
        gbp: None,
        gpe: Some(gpe),
    };
    let frame = outer_v4(VXLAN_GPE_PORT, &vxlan(&repr, &inner_v4_udp()));
    cases.push(
        Case::new("vxlan-gpe v4", frame)
            .outer_v4_good()
            .num("vxlan.vni", 0, repr.vni)
            .num("vxlan.p_bit", 0, true)
            .num("vxlan.o_bit", 0, gpe.oam)
            .num("vxlan.next_proto", 0, u8::from(gpe.next_protocol))
            .num("ip.checksum.status", 1, CSUM_GOOD)
            .num("udp.checksum.status", 1, CSUM_GOOD),
    );
    cases
}

fn geneve_cases() -> Vec<Case> {
    let opts = [
        GeneveOption {
            class: 0x0102,
            typ: 0x80 | 0x05,
            data: &[1, 2, 3, 4, 5, 6, 7, 8],
        },
        GeneveOption {
            class: 0xfff0,
            typ: 0x11,
            data: &[0xaa, 0xbb, 0xcc, 0xdd],
        },
    ];
    let mut raw = [0u8; 20];
    let n = geneve::emit_options(&opts, &mut raw);
    let repr = GeneveRepr {
        vni: 0x00fe_dcba,
        protocol: EtherType::TransparentEthernet,
        oam: false,
        critical: true,
        options: &raw[..n],
    };
    let frame = outer_v4(
        GENEVE_PORT,
        &geneve(&repr, &eth(EtherType::Ipv4, &inner_v4_udp())),
    );
    let mut c = Case::new("geneve v4 options", frame)
        .outer_v4_good()
        .num("geneve.vni", 0, repr.vni)
        .num("geneve.proto_type", 0, u16::from(repr.protocol))
        .num("geneve.flags.critical", 0, repr.critical)
        .num("geneve.flags.oam", 0, repr.oam)
        .count("geneve.option.class", opts.len())
        // The first geneve.option.length is the base header's option
        // length (in bytes); then one per option, header included.
        .num("geneve.option.length", 0, repr.options.len() as u64)
        .num("ip.checksum.status", 1, CSUM_GOOD)
        .num("udp.checksum.status", 1, CSUM_GOOD);
    for (i, o) in opts.iter().enumerate() {
        c = c
            .num("geneve.option.class", i, o.class)
            .num("geneve.option.type", i, o.typ)
            .num("geneve.option.type.critical", i, o.critical())
            .num("geneve.option.length", i + 1, o.buffer_len() as u64);
    }

    // No options, OAM, inner IPv6 via EtherType 0x86dd.
    let repr = GeneveRepr {
        vni: 1,
        protocol: EtherType::Ipv6,
        oam: true,
        critical: false,
        options: &[],
    };
    let frame = outer_v4(GENEVE_PORT, &geneve(&repr, &inner_v6_tcp()));
    let d = Case::new("geneve v4 oam ipv6", frame)
        .outer_v4_good()
        .num("geneve.vni", 0, repr.vni)
        .num("geneve.proto_type", 0, u16::from(repr.protocol))
        .num("geneve.flags.critical", 0, repr.critical)
        .num("geneve.flags.oam", 0, repr.oam)
        .count("geneve.option.class", 0)
        .num("geneve.option.length", 0, 0u8)
        .num("tcp.checksum.status", 0, CSUM_GOOD);
    vec![c, d]
}

fn gre_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    // C, K, S, inner Ethernet.
    let repr = GreRepr {
        protocol: EtherType::TransparentEthernet,
        checksum: true,
        key: Some(0xdead_beef),
        sequence: Some(0x0102_0304),
    };
    let frame = outer_v4(
        GRE_UDP_PORT,
        &gre(&repr, &eth(EtherType::Ipv4, &inner_v4_tcp())),
    );
    let gre_off = ethernet::HEADER_LEN + ipv4::HEADER_LEN + udp::HEADER_LEN;
    let gre_csum = gre::Packet::new_checked(&frame[gre_off..])
        .unwrap()
        .checksum()
        .unwrap();
    cases.push(
        Case::new("gre-in-udp v4 cks", frame)
            .outer_v4_good()
            .num("gre.proto", 0, u16::from(repr.protocol))
            .num("gre.key", 0, repr.key.unwrap())
            .num("gre.sequence_number", 0, repr.sequence.unwrap())
            .num("gre.flags_and_version", 0, repr.flags_word())
            .num("gre.checksum", 0, gre_csum)
            .num("gre.checksum.status", 0, CSUM_GOOD)
            .num("ip.checksum.status", 1, CSUM_GOOD)
            .num("tcp.checksum.status", 0, CSUM_GOOD),
    );
    // Key only, inner IPv4.
    let repr = GreRepr {
        protocol: EtherType::Ipv4,
        checksum: false,
        key: Some(77),
        sequence: None,
    };
    let frame = outer_v4(GRE_UDP_PORT, &gre(&repr, &inner_v4_udp()));
    cases.push(
        Case::new("gre-in-udp v4 key", frame)
            .outer_v4_good()
            .num("gre.proto", 0, u16::from(repr.protocol))
            .num("gre.key", 0, repr.key.unwrap())
            .num("gre.flags_and_version", 0, repr.flags_word())
            .count("gre.checksum", 0)
            .count("gre.sequence_number", 0)
            .num("ip.checksum.status", 1, CSUM_GOOD)
            .num("udp.checksum.status", 1, CSUM_GOOD),
    );
    cases
}

impl Case {
    /// The GTP-U header fields of `repr` carrying `tpdu_len` bytes: TEID,
    /// message type, length, flags, sequence number and the extension
    /// chain (types and lengths).
    fn gtp_header(mut self, repr: &GtpuRepr, tpdu_len: usize) -> Case {
        let mut chain: Vec<Extension> = Vec::new();
        if let GtpuMessage::ErrorIndication {
            udp_port: Some(p), ..
        } = repr.message
        {
            chain.push(Extension::UdpPort(p));
        }
        chain.extend(repr.extensions.iter().copied());
        let flags: u8 = 0x30
            | if chain.is_empty() { 0 } else { 0x04 }
            | if repr.sequence.is_some() { 0x02 } else { 0 }
            | if repr.npdu.is_some() { 0x01 } else { 0 };
        self = self
            .num("gtp.teid", 0, repr.teid)
            .num("gtp.message", 0, u8::from(repr.message.msg_type()))
            .num("gtp.length", 0, (repr.buffer_len() + tpdu_len - 8) as u64)
            .num("gtp.flags", 0, flags);
        self = match repr.sequence {
            Some(s) => self.num("gtp.seq_number", 0, s),
            None => self.count("gtp.seq_number", 0),
        };
        // gtp.ext_hdr.next: the header's next type, then each extension's.
        if chain.is_empty() {
            return self.count("gtp.ext_hdr.length", 0);
        }
        self = self
            .count("gtp.ext_hdr.next", chain.len() + 1)
            .count("gtp.ext_hdr.length", chain.len());
        for (i, e) in chain.iter().enumerate() {
            self = self.num("gtp.ext_hdr.next", i, e.ext_type().0).num(
                "gtp.ext_hdr.length",
                i,
                (e.buffer_len() / 4) as u64,
            );
        }
        self.num("gtp.ext_hdr.next", chain.len(), 0u8)
    }
}

fn gtpu_cases() -> Vec<Case> {
    let mut cases = Vec::new();

    // Plain G-PDU, IPv4 outer, inner IPv4/UDP.
    let repr = GtpuRepr::gpdu(0x1122_3344);
    let tpdu = inner_v4_udp();
    let frame = outer_v4(gtpu::UDP_PORT, &gtpu(&repr, &tpdu));
    cases.push(
        Case::new("gtpu gpdu v4", frame)
            .outer_v4_good()
            .gtp_header(&repr, tpdu.len())
            .num("ip.checksum.status", 1, CSUM_GOOD)
            .num("udp.checksum.status", 1, CSUM_GOOD),
    );

    // G-PDU with S and a DL PDU Session Container (RQI, PPP: 2 units
    // long), IPv6 outer, inner IPv6/TCP.
    let mut psc = PduSessionContainer::dl(9, true);
    psc.ppp = Some(5);
    let mut repr = GtpuRepr::gpdu(0xcafe_f00d);
    repr.sequence = Some(0x4242);
    repr.extensions
        .push(Extension::PduSessionContainer(psc))
        .unwrap();
    let tpdu = inner_v6_tcp();
    let frame = outer_v6(gtpu::UDP_PORT, Csum::Full, &gtpu(&repr, &tpdu));
    cases.push(
        Case::new("gtpu gpdu seq psc dl v6", frame)
            .outer_v6_good()
            .gtp_header(&repr, tpdu.len())
            .num("gtp.ext_hdr.pdu_ses_con.pdu_type", 0, psc.pdu_type)
            .num("gtp.ext_hdr.pdu_ses_con.qos_flow_id", 0, psc.qfi)
            .num("gtp.ext_hdr.pdu_ses_cont.rqi", 0, psc.rqi)
            .num("gtp.ext_hdr.pdu_ses_cont.ppp", 0, psc.ppp.is_some())
            .num("gtp.ext_hdr.pdu_ses_cont.ppi", 0, psc.ppp.unwrap())
            .num("tcp.checksum.status", 0, CSUM_GOOD),
    );

    // Two-header chain: PDCP PDU number then an UL PDU Session Container.
    let psc = PduSessionContainer::ul(33);
    let mut repr = GtpuRepr::gpdu(0x0000_0101);
    repr.extensions
        .push(Extension::PdcpPduNumber(0x1234))
        .unwrap();
    repr.extensions
        .push(Extension::PduSessionContainer(psc))
        .unwrap();
    let tpdu = inner_v4_tcp();
    let frame = outer_v4(gtpu::UDP_PORT, &gtpu(&repr, &tpdu));
    cases.push(
        Case::new("gtpu gpdu pdcp+psc ul v4", frame)
            .outer_v4_good()
            .gtp_header(&repr, tpdu.len())
            .num("gtp.ext_hdr.pdcp_sn", 0, 0x1234u16)
            .num("gtp.ext_hdr.pdu_ses_con.pdu_type", 0, psc.pdu_type)
            .num("gtp.ext_hdr.pdu_ses_con.qos_flow_id", 0, psc.qfi)
            .num("ip.checksum.status", 1, CSUM_GOOD)
            .num("tcp.checksum.status", 0, CSUM_GOOD),
    );

    // Echo Response with Recovery (TS 29.281 says send 0; a non-zero
    // counter shows the value really comes from the repr).
    let mut req = GtpuRepr::gpdu(0);
    req.sequence = Some(0x0777);
    req.message = GtpuMessage::EchoRequest;
    let recovery = 7;
    let repr = GtpuRepr::echo_response(&req, recovery);
    let frame = outer_v4(gtpu::UDP_PORT, &gtpu(&repr, &[]));
    cases.push(
        Case::new("gtpu echo response v4", frame)
            .outer_v4_good()
            .gtp_header(&repr, 0)
            .num("gtp.seq_number", 0, req.sequence.unwrap())
            .num("gtp.recovery", 0, recovery),
    );

    // Error Indication with an IPv4 peer and the UDP Port extension.
    let (teid_i, peer, port) = (0x8765_4321u32, Ipv4Addr::new(203, 0, 113, 9), 2152u16);
    let repr = GtpuRepr::error_indication(0x0102, teid_i, peer.into(), Some(port));
    let frame = outer_v4(gtpu::UDP_PORT, &gtpu(&repr, &[]));
    cases.push(
        Case::new("gtpu error indication v4 peer", frame)
            .outer_v4_good()
            .gtp_header(&repr, 0)
            .num("gtp.teid_data", 0, teid_i)
            .text("gtp.gsn_ipv4", 0, peer)
            .num("gtp.ext_hdr.udp_port", 0, port),
    );

    // Error Indication with an IPv6 peer, IPv6 outer.
    let (teid_i, peer6) = (
        0xaau32,
        Ipv6Addr::new(0x2001, 0xdb8, 0xdead, 0, 0, 0, 0, 0x99),
    );
    let repr = GtpuRepr::error_indication(0xfffe, teid_i, peer6.into(), None);
    let frame = outer_v6(gtpu::UDP_PORT, Csum::Full, &gtpu(&repr, &[]));
    cases.push(
        Case::new("gtpu error indication v6 peer", frame)
            .outer_v6_good()
            .gtp_header(&repr, 0)
            .num("gtp.teid_data", 0, teid_i)
            .text("gtp.gsn_ipv6", 0, peer6),
    );

    // End Marker.
    let mut repr = GtpuRepr::gpdu(0x0bad_cafe);
    repr.message = GtpuMessage::EndMarker;
    let frame = outer_v4(gtpu::UDP_PORT, &gtpu(&repr, &[]));
    cases.push(
        Case::new("gtpu end marker v4", frame)
            .outer_v4_good()
            .gtp_header(&repr, 0),
    );
    cases
}

/// tshark 4.0 has no GUE dissector (`tshark -G protocols` lists none), so
/// only the outer IPv4/UDP checksums of a GUE datagram are checked.
fn gue_cases() -> Vec<Case> {
    let repr = GueRepr::Data {
        proto: IpProtocol::Ipv4,
        fields: GueFields::Linux { rco: None },
    };
    let frame = outer_v4(GUE_PORT, &gue(&repr, &inner_v4_udp()));
    vec![Case::new("gue v4 (outer only)", frame).outer_v4_good()]
}

#[test]
fn tshark_agrees_with_emitters() {
    let mut cases = Vec::new();
    cases.extend(vxlan_cases());
    cases.extend(geneve_cases());
    cases.extend(gre_cases());
    cases.extend(gtpu_cases());
    cases.extend(gue_cases());
    check("main", &cases);
}

/// tshark must see a corrupted checksum as Bad, or the test proves nothing.
#[test]
fn tshark_catches_a_wrong_checksum() {
    let repr = VxlanRepr {
        vni: 99,
        rco: None,
        gbp: None,
        gpe: None,
    };
    let mut frame = outer_v4(
        VXLAN_PORT,
        &vxlan(&repr, &eth(EtherType::Ipv4, &inner_v4_tcp())),
    );
    let at = ethernet::HEADER_LEN + ipv4::HEADER_LEN + udp::CHECKSUM_OFFSET;
    frame[at] ^= 0x01;
    let case = Case::new("vxlan v4 corrupted udp checksum", frame)
        .num("udp.checksum.status", 0, CSUM_BAD)
        .num("vxlan.vni", 0, repr.vni);
    check("neg", &[case]);
}
