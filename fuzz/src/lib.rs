//! Fuzz bodies: one per tep-wire parser, tep-pfcp's (`pfcp`, in its own
//! module), and the dataplane's pipelines ([`decap()`], [`encap()`]), its
//! config parser ([`config()`]) and tep's capture reader ([`capture()`]),
//! each checking invariants.
//!
//! The tep-wire bodies:
//! Each body runs `new_checked` on the input and, if it accepts the bytes,
//! every getter, the iterators and `Repr::parse`. When the parse succeeds it
//! emits the repr into a fresh buffer (plus the original payload where the
//! re-parse needs one) and asserts that parsing the emitted bytes gives the
//! same repr back. Any panic is a bug: `new_checked` promises that no getter
//! and no `parse` panics afterwards (tep-wire's lib.rs panic contract).
//!
//! The bodies are plain functions so that `cargo fuzz` (fuzz_targets/) and
//! `cargo test` (tests/corpus.rs, over fuzz/seeds/) run the same code.
#![forbid(unsafe_code)]

use core::fmt::{self, Write as _};
use core::net::{Ipv4Addr, Ipv6Addr};
use std::hint::black_box;

mod flow;
mod pfcp;
pub use flow::flow_description;
pub use pfcp::pfcp;

use tep_wire::{
    ethernet, geneve, gre, gtpu, gue, icmpv4, icmpv6, ipv4, ipv6, tcp, udp, vxlan, IpProtocol,
};

mod capture;
mod config;
mod decap;
mod encap;
mod netlink_fdb;
mod overlay;
pub mod setup;

pub use capture::capture;
pub use config::config;
pub use decap::decap;
pub use encap::encap;
pub use netlink_fdb::netlink_fdb;
pub use overlay::overlay;

/// The decap target's control byte and the encap target's input, for the
/// seed generator and tests.
pub mod input {
    pub use crate::decap::{COMPLETED, GATHER, SOCKET, STATED, TRAIN, TRUSTED};
    pub use crate::encap::input as encap;
}

/// A fuzz body: any bytes in, a panic on a bug.
pub type Body = fn(&[u8]);

/// Every target: its name (the fuzz_targets/ file and the fuzz/seeds/
/// directory) and its body.
pub const TARGETS: &[(&str, Body)] = &[
    ("ethernet", ethernet),
    ("ipv4", ipv4),
    ("ipv6", ipv6),
    ("udp", udp),
    ("tcp", tcp),
    ("icmpv4", icmpv4),
    ("icmpv6", icmpv6),
    ("gue", gue),
    ("gre", gre),
    ("vxlan", vxlan),
    ("geneve", geneve),
    ("gtpu", gtpu),
    ("pfcp", pfcp),
    ("flow_description", flow_description),
    ("decap", decap),
    ("encap", encap),
    ("config", config),
    ("capture", capture),
    ("overlay", overlay),
    ("netlink_fdb", netlink_fdb),
];

/// Defines a fuzz target's entry point from a body: libFuzzer's under
/// `cargo fuzz` (which builds with `--cfg fuzzing`), otherwise a `main` that
/// replays the files named on the command line (reproduce a crash on stable
/// without libFuzzer: `cargo run -p tep-fuzz --bin ipv4 -- crash-file`).
/// The target file also needs `#![cfg_attr(fuzzing, no_main)]`.
#[macro_export]
macro_rules! fuzz_main {
    ($body:path) => {
        #[cfg(fuzzing)]
        libfuzzer_sys::fuzz_target!(|data: &[u8]| $body(data));

        #[cfg(not(fuzzing))]
        fn main() {
            $crate::replay_args($body)
        }
    };
}

/// Runs `body` over each file named in the arguments (directories: each file
/// in them), printing the name first so a panic shows which input it was.
pub fn replay_args(body: Body) {
    for arg in std::env::args_os().skip(1) {
        let path = std::path::PathBuf::from(arg);
        let mut files = vec![];
        match std::fs::read_dir(&path) {
            Ok(dir) => files.extend(dir.filter_map(|e| e.ok()).map(|e| e.path())),
            Err(_) => files.push(path),
        }
        files.sort();
        for f in files {
            let data = std::fs::read(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            eprintln!("{} ({} bytes)", f.display(), data.len());
            body(&data);
        }
    }
}

/// A `fmt::Write` that discards: Display/Debug impls run, nothing allocates.
struct Sink;

impl fmt::Write for Sink {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        black_box(s);
        Ok(())
    }
}

/// Runs a value's Display impl.
fn show(x: &dyn fmt::Display) {
    let _ = write!(Sink, "{x}");
}

/// Runs a value's Debug impl (getters' results go through here so they are
/// all computed and formatted).
fn look(x: &dyn fmt::Debug) {
    let _ = write!(Sink, "{x:?}");
}

const SRC4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const DST4: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 2);
const SRC6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
const DST6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);

/// `header` followed by `payload`, in a fresh buffer.
fn concat(header: &[u8], payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(header.len() + payload.len());
    v.extend_from_slice(header);
    v.extend_from_slice(payload);
    v
}

pub fn ethernet(data: &[u8]) {
    let Ok(p) = ethernet::Packet::new_checked(data) else {
        return;
    };
    let (dst, src) = (p.dst_addr(), p.src_addr());
    look(&(
        dst,
        dst.is_multicast(),
        dst.is_broadcast(),
        dst.is_unicast(),
    ));
    show(&src);
    look(&(p.outer_ethertype(), p.tag_count(), p.ethertype()));
    for i in 0..=ethernet::MAX_TAGS {
        if let Some(t) = p.vlan_tag(i) {
            look(&(t, t.pcp(), t.dei(), t.vid()));
            show(&t);
        }
    }
    let hl = p.header_len();
    assert_eq!(hl + p.payload().len(), data.len());
    let Ok(repr) = ethernet::EthernetRepr::parse(&p) else {
        return;
    };
    show(&repr);
    assert_eq!(repr.header_len(), hl);
    let mut buf = vec![0; repr.buffer_len()];
    repr.emit(&mut ethernet::Packet::new_unchecked(&mut buf[..]));
    // Every header bit is in the repr: the bytes come back exactly.
    assert_eq!(buf[..], data[..hl], "{repr}");
    let buf = concat(&buf, p.payload());
    let q = ethernet::Packet::new_checked(&buf[..]).expect("emitted frame");
    assert_eq!(ethernet::EthernetRepr::parse(&q), Ok(repr));
}

pub fn ipv4(data: &[u8]) {
    let Ok(p) = ipv4::Packet::new_checked(data) else {
        return;
    };
    look(&(
        p.version(),
        p.header_len(),
        p.dscp(),
        p.ecn(),
        p.total_len(),
    ));
    look(&(p.ident(), p.reserved_flag(), p.dont_frag(), p.more_frags()));
    look(&(p.frag_offset(), p.is_fragment(), p.ttl(), p.protocol()));
    look(&(
        p.checksum(),
        p.src_addr(),
        p.dst_addr(),
        p.verify_checksum(),
    ));
    show(&p.protocol());
    look(&(p.options(), p.payload()));
    assert_eq!(p.header_len() + p.payload().len(), p.total_len() as usize);
    let Ok(repr) = ipv4::Ipv4Repr::parse(&p) else {
        return;
    };
    show(&repr);
    look(&repr.pseudo_header(repr.protocol, repr.payload_len as u16));
    let mut buf = concat(&vec![0; repr.buffer_len()], p.payload());
    repr.emit(&mut ipv4::Packet::new_unchecked(&mut buf[..]));
    let q = ipv4::Packet::new_checked(&buf[..]).expect("emitted packet");
    assert!(q.verify_checksum(), "emit wrote a bad checksum: {repr}");
    assert_eq!(ipv4::Ipv4Repr::parse(&q), Ok(repr));
}

pub fn ipv6(data: &[u8]) {
    // The extension walk on its own, over the raw bytes: any first protocol.
    if let Some((&first, rest)) = data.split_first() {
        if let Ok(ul) = ipv6::walk_extensions(IpProtocol::from(first), rest) {
            check_upper_layer(&ul, rest);
        }
    }
    let Ok(p) = ipv6::Packet::new_checked(data) else {
        return;
    };
    look(&(
        p.version(),
        p.traffic_class(),
        p.flow_label(),
        p.payload_len(),
    ));
    look(&(p.next_header(), p.hop_limit(), p.src_addr(), p.dst_addr()));
    look(&(p.header_len(), p.payload()));
    assert_eq!(p.payload().len(), p.payload_len() as usize);
    let ul = p.upper_layer();
    assert_eq!(ul, ipv6::walk_extensions(p.next_header(), p.payload()));
    if let Ok(ul) = ul {
        check_upper_layer(&ul, p.payload());
    }
    let Ok(repr) = ipv6::Ipv6Repr::parse(&p) else {
        return;
    };
    show(&repr);
    look(&repr.pseudo_header(repr.next_header, repr.payload_len as u32));
    let mut buf = concat(&vec![0; repr.buffer_len()], p.payload());
    repr.emit(&mut ipv6::Packet::new_unchecked(&mut buf[..]));
    let q = ipv6::Packet::new_checked(&buf[..]).expect("emitted packet");
    assert_eq!(ipv6::Ipv6Repr::parse(&q), Ok(repr));
    assert_eq!(q.upper_layer(), p.upper_layer());
}

fn check_upper_layer(ul: &ipv6::UpperLayer, payload: &[u8]) {
    look(ul);
    show(&ul.protocol);
    assert!(ul.offset <= payload.len(), "{ul:?} past {}", payload.len());
    if let Some(f) = ul.fragment {
        look(&(f.is_first(), f.offset % 8));
    }
}

pub fn udp(data: &[u8]) {
    let Ok(p) = udp::Packet::new_checked(data) else {
        return;
    };
    look(&(p.src_port(), p.dst_port(), p.len(), p.checksum()));
    look(&(p.checksum_zero(), p.header_len(), p.payload()));
    let v4 = p.verify_checksum_v4(&SRC4, &DST4);
    look(&(v4, v4.acceptable_v4(), p.verify_checksum_v6(&SRC6, &DST6)));
    assert_eq!(p.header_len() + p.payload().len(), p.len() as usize);
    let Ok(repr) = udp::UdpRepr::parse(&p) else {
        return;
    };
    show(&repr);
    let mut buf = concat(&vec![0; repr.buffer_len()], p.payload());
    repr.emit(&mut udp::Packet::new_unchecked(&mut buf[..]));
    assert_eq!(buf[..udp::HEADER_LEN], data[..udp::HEADER_LEN], "{repr}");
    let q = udp::Packet::new_checked(&buf[..]).expect("emitted datagram");
    assert_eq!(udp::UdpRepr::parse(&q), Ok(repr));
    let mut q = udp::Packet::new_unchecked(&mut buf[..]);
    q.fill_checksum_v4(&SRC4, &DST4);
    assert_eq!(
        q.verify_checksum_v4(&SRC4, &DST4),
        udp::ChecksumStatus::Valid
    );
    q.fill_checksum_v6(&SRC6, &DST6);
    assert_eq!(
        q.verify_checksum_v6(&SRC6, &DST6),
        udp::ChecksumStatus::Valid
    );
}

pub fn tcp(data: &[u8]) {
    let Ok(p) = tcp::Packet::new_checked(data) else {
        return;
    };
    look(&(p.src_port(), p.dst_port(), p.seq_number(), p.ack_number()));
    look(&(p.header_len(), p.flags(), p.reserved(), p.window_len()));
    look(&(p.checksum(), p.urgent_pointer(), p.options(), p.payload()));
    show(&p.flags());
    // verify_checksum_v4 documents a panic past 65535 bytes (the IPv4
    // pseudo-header length is 16 bits); libFuzzer never gets near that.
    if data.len() <= 0xffff {
        look(&p.verify_checksum_v4(&SRC4, &DST4));
    }
    look(&p.verify_checksum_v6(&SRC6, &DST6));
    tcp_options(p.options());
    let Ok(repr) = tcp::TcpRepr::parse(&p) else {
        return;
    };
    show(&repr);
    let mut buf = concat(&vec![0; repr.buffer_len()], p.payload());
    repr.emit(&mut tcp::Packet::new_unchecked(&mut buf[..]));
    let q = tcp::Packet::new_checked(&buf[..]).expect("emitted segment");
    assert_eq!(tcp::TcpRepr::parse(&q), Ok(repr));
    let mut q = tcp::Packet::new_unchecked(&mut buf[..]);
    if data.len() <= 0xffff {
        q.fill_checksum_v4(&SRC4, &DST4);
        assert!(q.verify_checksum_v4(&SRC4, &DST4));
    }
    q.fill_checksum_v6(&SRC6, &DST6);
    assert!(q.verify_checksum_v6(&SRC6, &DST6));
}

fn tcp_options(options: &[u8]) {
    let mut n = 0;
    for o in tcp::TcpOptions::new(options) {
        n += 1;
        // Each item consumes at least a byte (or ends the walk).
        assert!(n <= options.len(), "option iterator does not advance");
        look(&o);
    }
}

pub fn icmpv4(data: &[u8]) {
    let Ok(p) = icmpv4::Packet::new_checked(data) else {
        return;
    };
    look(&(p.msg_type(), p.code(), p.checksum(), p.rest_of_header()));
    look(&(p.echo_ident(), p.echo_seq_no(), p.next_hop_mtu()));
    look(&(p.header_len(), p.payload(), p.verify_checksum()));
    let Ok(repr) = icmpv4::Icmpv4Repr::parse(&p) else {
        return;
    };
    show(&repr);
    let mut buf = concat(&vec![0; repr.buffer_len()], p.payload());
    repr.emit(&mut icmpv4::Packet::new_unchecked(&mut buf[..]));
    let q = icmpv4::Packet::new_checked(&buf[..]).expect("emitted message");
    assert_eq!(icmpv4::Icmpv4Repr::parse(&q), Ok(repr));
    let mut q = icmpv4::Packet::new_unchecked(&mut buf[..]);
    q.fill_checksum();
    assert!(q.verify_checksum());
}

pub fn icmpv6(data: &[u8]) {
    let Ok(p) = icmpv6::Packet::new_checked(data) else {
        return;
    };
    look(&(p.msg_type(), p.code(), p.checksum(), p.rest_of_header()));
    look(&(p.echo_ident(), p.echo_seq_no(), p.mtu()));
    look(&(p.header_len(), p.payload(), p.verify_checksum(&SRC6, &DST6)));
    let Ok(repr) = icmpv6::Icmpv6Repr::parse(&p) else {
        return;
    };
    show(&repr);
    let mut buf = concat(&vec![0; repr.buffer_len()], p.payload());
    repr.emit(&mut icmpv6::Packet::new_unchecked(&mut buf[..]));
    let q = icmpv6::Packet::new_checked(&buf[..]).expect("emitted message");
    assert_eq!(icmpv6::Icmpv6Repr::parse(&q), Ok(repr));
    let mut q = icmpv6::Packet::new_unchecked(&mut buf[..]);
    q.fill_checksum(&SRC6, &DST6);
    assert!(q.verify_checksum(&SRC6, &DST6));
}

pub fn gue(data: &[u8]) {
    let Ok(p) = gue::Packet::new_checked(data) else {
        return;
    };
    look(&(p.variant(), p.control(), p.hlen(), p.options_len()));
    look(&(p.header_len(), p.proto_ctype(), p.flags(), p.encoding()));
    look(&(p.flags_len(), p.group_id(), p.security_len(), p.ietf_rco()));
    look(&(p.private_flags(), p.linux_rco(), p.rco()));
    for flag in [
        gue::FLAG_G,
        gue::FLAG_SEC_MASK,
        gue::FLAG_F,
        gue::FLAG_T,
        gue::FLAG_R,
        gue::FLAG_K,
        gue::FLAG_N,
        gue::FLAG_A,
    ] {
        if let Some(at) = p.ietf_field_offset(flag) {
            assert!(at < p.header_len(), "field 0x{flag:04x} at {at}");
        }
    }
    if let Some(r) = p.rco() {
        look(&r.min_payload_len());
    }
    look(&(p.options(), p.payload()));
    assert_eq!(p.header_len() + p.payload().len(), data.len());
    let Ok(repr) = gue::GueRepr::parse(&p) else {
        return;
    };
    show(&repr);
    let fields = repr.fields();
    look(&(
        fields.rco(),
        fields.flags(),
        fields.len(),
        fields.is_empty(),
    ));
    look(&(repr.rco(), gue::encapsulation_len(&repr)));
    let mut buf = concat(&vec![0; repr.buffer_len()], p.payload());
    repr.emit(&mut gue::Packet::new_unchecked(&mut buf[..]));
    let q = gue::Packet::new_checked(&buf[..]).expect("emitted header");
    assert_eq!(q.header_len(), repr.header_len());
    assert_eq!(gue::GueRepr::parse(&q), Ok(repr));
    // GUE-GRE (Linux's GRE with `encap gue`): the GRE header follows.
    if let gue::GueRepr::Data {
        proto: IpProtocol::Gre,
        ..
    } = repr
    {
        gre(p.payload());
    }
}

pub fn gre(data: &[u8]) {
    let Ok(p) = gre::Packet::new_checked(data) else {
        return;
    };
    look(&(p.flags_word(), p.checksum_present(), p.routing_present()));
    look(&(
        p.key_present(),
        p.sequence_present(),
        p.reserved0(),
        p.version(),
    ));
    look(&(p.protocol(), p.header_len(), p.checksum(), p.reserved1()));
    look(&(p.key(), p.sequence(), p.verify_checksum(), p.payload()));
    assert_eq!(p.header_len() + p.payload().len(), data.len());
    let Ok(repr) = gre::GreRepr::parse(&p) else {
        return;
    };
    show(&repr);
    assert_eq!(repr.header_len(), p.header_len());
    assert_eq!(repr.flags_word(), p.flags_word());
    let mut buf = concat(&vec![0; repr.buffer_len()], p.payload());
    repr.emit(&mut gre::Packet::new_unchecked(&mut buf[..]));
    let q = gre::Packet::new_checked(&buf[..]).expect("emitted header");
    assert_eq!(gre::GreRepr::parse(&q), Ok(repr));
    let mut q = gre::Packet::new_unchecked(&mut buf[..]);
    q.fill_checksum();
    assert!(q.verify_checksum());
}

/// Every extension set a caller can ask `VxlanRepr::parse` for.
const VXLAN_EXTENSIONS: [vxlan::Extensions; 6] = [
    vxlan::Extensions::PLAIN,
    vxlan::Extensions::RCO,
    vxlan::Extensions::GBP,
    vxlan::Extensions {
        variant: vxlan::Variant::Gbp,
        rco: true,
    },
    vxlan::Extensions::GPE,
    vxlan::Extensions {
        variant: vxlan::Variant::Gpe,
        rco: true,
    },
];

pub fn vxlan(data: &[u8]) {
    let Ok(p) = vxlan::Packet::new_checked(data) else {
        return;
    };
    look(&(
        p.flags_word(),
        p.flags(),
        p.flags2(),
        p.vni_valid(),
        p.vni(),
    ));
    look(&(p.reserved2(), p.rco(), p.gbp(), p.gpe_version()));
    look(&(p.gpe_next_protocol(), p.gpe_oam(), p.payload()));
    if let Some(r) = p.rco() {
        look(&(r.start(), r.udp(), r.offset(), r.remote_checksum()));
        assert_eq!(vxlan::VxlanRco::new(r.start(), r.udp()), Some(r));
    }
    for ext in VXLAN_EXTENSIONS {
        let Ok(repr) = vxlan::VxlanRepr::parse(&p, ext) else {
            continue;
        };
        show(&repr);
        let mut buf = concat(&vec![0; repr.buffer_len()], p.payload());
        repr.emit(&mut vxlan::Packet::new_unchecked(&mut buf[..]));
        let q = vxlan::Packet::new_checked(&buf[..]).expect("emitted header");
        assert_eq!(vxlan::VxlanRepr::parse(&q, ext), Ok(repr), "{ext:?}");
        // The extensions the repr says it uses are enough to read it back.
        let own = repr.extensions();
        assert_eq!(vxlan::VxlanRepr::parse(&q, own), Ok(repr), "{own:?}");
    }
}

pub fn geneve(data: &[u8]) {
    let Ok(p) = geneve::Packet::new_checked(data) else {
        return;
    };
    look(&(p.version(), p.opt_len(), p.oam(), p.critical()));
    look(&(p.reserved_flags(), p.protocol(), p.vni(), p.reserved()));
    look(&(p.header_len(), p.has_critical_options(), p.payload()));
    let opts = p.options_bytes();
    assert_eq!(geneve::HEADER_LEN + opts.len(), p.header_len());
    geneve_options(opts);
    let Ok(repr) = geneve::GeneveRepr::parse(&p) else {
        return;
    };
    show(&repr);
    assert_eq!(repr.options().count(), p.options().count());
    let mut buf = concat(&vec![0; repr.buffer_len()], p.payload());
    repr.emit(&mut geneve::Packet::new_unchecked(&mut buf[..]));
    let q = geneve::Packet::new_checked(&buf[..]).expect("emitted header");
    assert_eq!(geneve::GeneveRepr::parse(&q), Ok(repr));
}

/// Walks checked options: `new_checked` validated each, so every item is
/// `Ok`, they tile the option bytes, and re-emitting them reads back equal.
fn geneve_options(opts: &[u8]) {
    let mut total = 0;
    let mut n = 0;
    for o in geneve::Options::new(opts) {
        let o = o.expect("new_checked validated the options");
        show(&o);
        look(&o.critical());
        total += o.buffer_len();
        let mut one = vec![0; o.buffer_len()];
        geneve::emit_options(&[o], &mut one);
        let mut back = geneve::Options::new(&one);
        assert_eq!(back.next(), Some(Ok(o)));
        assert_eq!(back.next(), None);
        n += 1;
    }
    assert_eq!(total, opts.len());
    assert!(n <= opts.len() / geneve::OPT_HEADER_LEN);
}

pub fn gtpu(data: &[u8]) {
    let Ok(p) = gtpu::Packet::new_checked(data) else {
        return;
    };
    look(&(p.flags(), p.version(), p.pt(), p.spare(), p.e_flag()));
    look(&(p.s_flag(), p.pn_flag(), p.has_optional(), p.msg_type()));
    show(&p.msg_type());
    look(&(p.length(), p.teid(), p.raw_sequence(), p.raw_npdu()));
    look(&(p.raw_next_ext(), p.sequence(), p.npdu(), p.next_ext()));
    look(&(
        p.first_unknown_required_extension(),
        p.header_len(),
        p.payload(),
    ));

    // The checked chain tiles the header past the 12 fixed bytes.
    let mut chain = 0;
    let mut exts = p.extensions();
    for (ty, content) in exts.by_ref() {
        show(&ty);
        look(&(
            ty.comprehension(),
            ty.comprehension_required(),
            ty.is_known(),
        ));
        chain += content.len() + 2;
        if let Ok(e) = gtpu::Extension::parse(ty, content) {
            show(&e);
            look(&(e.ext_type(), e.buffer_len()));
        }
    }
    look(&exts.rest());
    if p.has_optional() {
        assert_eq!(p.header_len(), 12 + chain, "extension chain");
    } else {
        assert_eq!((p.header_len(), chain), (gtpu::HEADER_LEN, 0));
    }
    assert_eq!(
        gtpu::first_unknown_required(p.extensions()),
        p.first_unknown_required_extension()
    );
    let mut n = 0;
    for ie in p.information_elements() {
        n += 1;
        assert!(n <= p.payload().len(), "IE iterator does not advance");
        look(&ie);
    }

    if let Ok(echo) = gtpu::GtpuRepr::echo_response_for(&p, 7) {
        gtpu_round_trip(&echo, &[]);
    }
    let Ok(repr) = gtpu::GtpuRepr::parse(&p) else {
        return;
    };
    show(&repr);
    look(&(repr.extensions.len(), repr.extensions.is_empty()));
    look(&repr.extensions.pdu_session_container());
    for e in repr.extensions.iter() {
        assert_eq!(
            repr.extensions.find(e.ext_type()).map(|f| f.ext_type()),
            Some(e.ext_type())
        );
    }
    // Alone, then with the original payload after the emitted IEs (its IEs,
    // if the type has any, all parsed, so the sequence still parses).
    gtpu_round_trip(&repr, &[]);
    if repr.buffer_len() + p.payload().len() - gtpu::HEADER_LEN <= 0xffff {
        gtpu_round_trip(&repr, p.payload());
    }
}

fn gtpu_round_trip(repr: &gtpu::GtpuRepr, payload: &[u8]) {
    let mut buf = vec![0; repr.buffer_len() + payload.len()];
    repr.emit(&mut buf, payload.len());
    buf[repr.buffer_len()..].copy_from_slice(payload);
    let q = gtpu::Packet::new_checked(&buf[..]).expect("emitted message");
    assert_eq!(q.header_len(), repr.header_len(), "{repr}");
    assert_eq!(gtpu::GtpuRepr::parse(&q), Ok(*repr));
}
