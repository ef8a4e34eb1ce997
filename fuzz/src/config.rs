//! The config parser under arbitrary text (TOML or not).
//!
//! Checked on every input: `Config::parse` returns; an error names a field
//! and leads with it (`field: message`, both non-empty); a success
//! validates (`Config::validate`), parses the same again, and builds a
//! pipeline that encapsulates an IPv4 and an IPv6 packet and an Ethernet
//! frame with its counters balanced and every output parsing with tep-wire
//! (no config that parses can build a dataplane that breaks).

use tep_config::Config;
use tep_dataplane::example::INNER_DST_MAC;
use tep_dataplane::InnerLink;
use tep_dataplane::ManualClock;
use tep_dataplane::PacketVector;
use tep_dataplane::Pool;
use tep_dataplane::{Output, Pipeline, PipelineOptions};

use crate::setup;
use std::cell::RefCell;

thread_local! {
    static POOL: RefCell<Option<Pool>> = const { RefCell::new(None) };
}

pub fn config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let c = match Config::parse(text) {
        Err(e) => {
            assert!(!e.field.is_empty(), "an error without a field: {e:?}");
            assert!(!e.message.is_empty(), "an error without a message: {e:?}");
            assert!(e.to_string().starts_with(&format!("{}: ", e.field)));
            return;
        }
        Ok(c) => c,
    };
    if let Err(e) = c.validate() {
        panic!("parsed, yet does not validate: {e}");
    }
    assert_eq!(
        Config::parse(text).as_ref(),
        Ok(&c),
        "parsed twice, differently"
    );
    let _ = c.run_mode();
    if c.tunnels.is_empty() {
        return;
    }
    POOL.with(|pool| {
        let mut pool = pool.borrow_mut();
        let pool = pool.get_or_insert_with(|| Pool::new(64, 2048));
        through_pipeline(&c, pool);
        assert_eq!(pool.available(), pool.capacity(), "buffers leaked");
    });
}

/// An IPv4 and an IPv6 UDP packet to the first address of the first
/// tunnel's prefixes (or anywhere) and a frame to its first MAC.
fn through_pipeline(c: &Config, pool: &mut Pool) {
    let t = &c.tunnels[0];
    let mut p = Pipeline::new(
        &c.tunnels,
        &c.dataplane,
        ManualClock::default(),
        PipelineOptions::default(),
    );
    let mut packets = vec![];
    let v4 = t
        .inner_prefixes
        .iter()
        .find(|p| p.addr.is_ipv4())
        .map_or([10, 0, 0, 1], |p| match p.addr {
            core::net::IpAddr::V4(a) => a.octets(),
            _ => unreachable!(),
        });
    let v6 = t
        .inner_prefixes
        .iter()
        .find(|p| p.addr.is_ipv6())
        .map_or([0x20; 16], |p| match p.addr {
            core::net::IpAddr::V6(a) => a.octets(),
            _ => unreachable!(),
        });
    let mut ip4 = vec![0x45, 0, 0, 28, 0, 1, 0x40, 0, 64, 17, 0, 0, 10, 9, 9, 9];
    ip4.extend_from_slice(&v4);
    ip4.extend_from_slice(&[0x30, 0x39, 0, 53, 0, 8, 0, 0]);
    let sum = tep_csum::Sum::of(&ip4[..20]).checksum();
    ip4[10..12].copy_from_slice(&sum.to_be_bytes());
    let mut ip6 = vec![0x60, 0, 0, 0, 0, 8, 17, 64];
    ip6.extend_from_slice(&[0x20, 1, 0xd, 0xb8, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    ip6.extend_from_slice(&v6);
    ip6.extend_from_slice(&[0x30, 0x39, 0, 53, 0, 8, 0, 0]);
    let mac = t.inner_macs.first().map_or(INNER_DST_MAC, |m| m.0);
    let mut frame = mac.to_vec();
    frame.extend_from_slice(&[2, 0, 0, 0, 0, 0xaa, 0x08, 0x00]);
    frame.extend_from_slice(&ip4);
    packets.push((InnerLink::Ip, ip4));
    packets.push((InnerLink::Ip, ip6));
    packets.push((InnerLink::Ethernet, frame));
    for (link, bytes) in packets {
        let id = pool.alloc().expect("pool");
        assert!(pool.fill(id, &bytes));
        let mut v = PacketVector::new();
        v.push(id).unwrap();
        let before = (p.counters(), p.drops_total());
        let mut out = 0u64;
        p.encap_from(link, pool, &mut v, &mut |o, pool, v| {
            assert_eq!(o, Output::Outer);
            for &id in v.as_slice() {
                let m = *pool.meta(id);
                let mut bytes = setup::bytes_of(pool, id);
                tep_dataplane::finish_offloaded(&mut bytes, m.csum).unwrap();
                let (port, payload) = setup::outer_ip_udp(&bytes).unwrap_or_else(|e| panic!("{e}"));
                let kind = c.tunnels[m.tunnel as usize].kind;
                assert_eq!(port, c.tunnels[m.tunnel as usize].remote_port);
                setup::tunnel_payload(kind, payload).unwrap_or_else(|e| panic!("{e}"));
                out += 1;
                pool.free(id);
            }
            v.clear();
        });
        let c1 = p.counters();
        let drops = p.drops_total() - before.1;
        assert_eq!(c1.encap_in - before.0.encap_in, 1);
        assert_eq!(c1.encap_out - before.0.encap_out, out);
        assert_eq!(1 + c1.segments_added - before.0.segments_added, out + drops);
    }
}
