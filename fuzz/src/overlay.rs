//! The overlay: ARP/ND suppression's parser and answers, and a network's
//! pipeline (learning, flooding, suppression) driven by untrusted frames
//! from both sides.
//!
//! Input: records of `[control, len, bytes…]`. Control bit 7 picks the
//! side: set, the frame comes from the overlay, wrapped by the body in
//! IPv4/UDP/VXLAN from VTEP `control & 7` (three are in the flood list,
//! the rest are strangers); clear, it comes from the network's local
//! side. Invariants:
//! - `classify` never panics, and what `answer` writes for a request is an
//!   announcement of the answering MAC;
//! - no buffer is lost; the counters balance: `encap_in + flood_copies =
//!   encap_out + encap drops + suppressed`, `decap_in = decap_out + decap
//!   drops`;
//! - a frame from the local side leaves to one VTEP, or to each VTEP of
//!   the flood list once;
//! - the FDB never holds more learned MACs than `max_macs`.

use core::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use tep_dataplane::config::{DataplaneConfig, NetworkSettings, TunnelConfig};
use tep_dataplane::overlay::neigh::{self, NeighMessage};
use tep_dataplane::overlay::Overlay;
use tep_dataplane::{
    InnerLink, ManualClock, Output, PacketVector, Pipeline, PipelineOptions, Pool, TunnelKind,
};

const MAX_MACS: u32 = 8;
const ANSWERING: [u8; 6] = [2, 0, 0, 0, 0, 0x42];

fn vtep(i: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(192, 0, 2, i))
}

struct Lab {
    pipeline: Pipeline<ManualClock>,
    overlay: Arc<Overlay>,
    pool: Pool,
}

fn lab() -> Lab {
    let s = NetworkSettings {
        flood: vec![vtep(2), vtep(3), vtep(4)],
        max_macs: MAX_MACS,
        neigh_suppress: true,
        ..NetworkSettings::default()
    };
    let mut t = TunnelConfig::network("blue", TunnelKind::Vxlan, vtep(1), s);
    t.vni = 100;
    let tunnels = vec![t];
    let overlay = Arc::new(Overlay::new(&tunnels, 64, 16).expect("a valid network"));
    let _ = overlay.neigh_add("blue", IpAddr::from([10, 0, 0, 2]), ANSWERING, false);
    let options = PipelineOptions {
        inner_link: InnerLink::Ethernet,
        ..PipelineOptions::default()
    };
    let mut pipeline = Pipeline::new(
        &tunnels,
        &DataplaneConfig::default(),
        ManualClock::default(),
        options,
    );
    pipeline.attach_overlay(overlay.clone());
    Lab {
        pipeline,
        overlay,
        pool: Pool::new(64, 4096),
    }
}

/// `frame` behind IPv4 (checksum set), UDP (checksum 0) and VXLAN VNI 100
/// from VTEP `from` to VTEP 1.
fn wrap(frame: &[u8], from: u8) -> Vec<u8> {
    let total = (20 + 8 + 8 + frame.len()) as u16;
    let mut p = vec![0x45, 0, 0, 0, 0, 0, 0, 0, 64, 17, 0, 0];
    p[2..4].copy_from_slice(&total.to_be_bytes());
    p.extend_from_slice(&[192, 0, 2, from, 192, 0, 2, 1]);
    let sum = tep_csum::Sum::of(&p).checksum();
    p[10..12].copy_from_slice(&sum.to_be_bytes());
    p.extend_from_slice(&49152u16.to_be_bytes());
    p.extend_from_slice(&4789u16.to_be_bytes());
    p.extend_from_slice(&(total - 20).to_be_bytes());
    p.extend_from_slice(&[0, 0, 0x08, 0, 0, 0, 0, 0x64, 0]);
    p.extend_from_slice(frame);
    p
}

fn check_answer(frame: &[u8]) {
    if let NeighMessage::Request { .. } = neigh::classify(frame) {
        let mut out = [0u8; 128];
        if let Some(n) = neigh::answer(frame, ANSWERING, &mut out) {
            match neigh::classify(&out[..n]) {
                NeighMessage::Announce { mac, .. } => assert_eq!(mac, ANSWERING),
                other => panic!("an answer that announces nothing: {other:?}"),
            }
        }
    }
}

fn local(l: &mut Lab, frame: &[u8]) {
    let Some(id) = l.pool.alloc() else { return };
    if !l.pool.fill(id, frame) {
        l.pool.free(id);
        return;
    }
    let mut v = PacketVector::new();
    v.put(&mut l.pool, id);
    let mut dsts = Vec::new();
    l.pipeline.encap_into(
        0,
        InnerLink::Ethernet,
        &mut l.pool,
        &mut v,
        &mut |o, pool, out| {
            for &id in out.as_slice() {
                if o == Output::Outer {
                    dsts.push(pool.data(id)[19]);
                }
                pool.free(id);
            }
        },
    );
    dsts.sort_unstable();
    if dsts.len() > 1 {
        assert_eq!(dsts, vec![2, 3, 4], "each VTEP of the flood list once");
    }
}

fn remote(l: &mut Lab, frame: &[u8], from: u8) {
    let Some(id) = l.pool.alloc() else { return };
    if !l.pool.fill(id, &wrap(frame, from)) {
        l.pool.free(id);
        return;
    }
    let mut v = PacketVector::new();
    v.put(&mut l.pool, id);
    l.pipeline
        .decap(&mut l.pool, &mut v, 0, &mut |o, pool, out| {
            assert_eq!(o, Output::Inner, "decap of a network hands out frames only");
            for &id in out.as_slice() {
                pool.free(id);
            }
        });
}

/// The body.
pub fn overlay(data: &[u8]) {
    let mut l = lab();
    let mut rest = data;
    while let [control, len, tail @ ..] = rest {
        let n = usize::from(*len).min(tail.len());
        let (frame, next) = tail.split_at(n);
        rest = next;
        check_answer(frame);
        if control & 0x80 != 0 {
            remote(&mut l, frame, 2 + (control & 7));
        } else {
            local(&mut l, frame);
        }
        assert_eq!(l.pool.available(), l.pool.capacity(), "buffers leaked");
        assert!(l.overlay.fdb().learned(0) <= MAX_MACS);
    }
    let c = l.pipeline.counters();
    let drops = l.pipeline.drops_total();
    assert_eq!(
        c.encap_in + c.flood_copies + c.decap_in,
        c.encap_out + c.suppressed + c.decap_out + drops,
        "counters balance: {c:?}, {drops} drops"
    );
}
