//! A UPF pipeline and its sessions for the integration tests: side A is
//! the UPF's N3, side B the gNB ([`example::upf`], [`example::session`]).

use super::*;
use core::net::{Ipv4Addr, Ipv6Addr};
use tep_dataplane::example;
use tep_dataplane::session::control::{SessionSpec, Sessions};
use tep_dataplane::session::{Action, UplinkKey};
use tep_dataplane::ManualClock;
use tep_dataplane::OuterLayers;
use tep_dataplane::Pool;
use tep_dataplane::{Output, Pipeline, PipelineOptions};
use tep_wire::gtpu::{Extension, GtpuRepr, PduSessionContainer};

/// A UPF whose session 1 buffers its downlink, settled: the control, the
/// pipeline, the session's spec and its slot.
pub fn buffering_session(pool: &mut Pool) -> (Sessions, Pipeline<ManualClock>, SessionSpec, u32) {
    let (mut c, mut p) = upf(false);
    let mut s = example::session(1, false, false);
    s.downlink = Action::Buffer;
    let slot = c.create(&s).unwrap();
    settle(&mut c, &mut p, pool);
    (c, p, s, slot)
}

/// A UPF whose session 1's uplink PDR takes only QFI 9 (TEID 0x10001),
/// settled.
pub fn qfi9_session(pool: &mut Pool) -> (Sessions, Pipeline<ManualClock>) {
    let (mut c, mut p) = upf(false);
    let mut s = example::session(1, false, false);
    s.uplink_keys = vec![UplinkKey {
        teid: 0x10001,
        qfi: Some(9),
    }];
    c.create(&s).unwrap();
    settle(&mut c, &mut p, pool);
    (c, p)
}

/// A UPF pipeline (N3 = side A) with its control plane.
pub fn upf(v6: bool) -> (Sessions, Pipeline<ManualClock>) {
    upf_over(v6, OuterLayers::IpUdp)
}

/// [`upf`] whose decap path takes `outer` (host mode: the sockets' UDP
/// payloads).
pub fn upf_over(v6: bool, outer: OuterLayers) -> (Sessions, Pipeline<ManualClock>) {
    let config = example::upf(v6, ChecksumMode::Full);
    let (control, links) = Sessions::new(1 << 16, 1, vec![v6]);
    let options = PipelineOptions {
        inner_link: InnerLink::Ip,
        outer,
        ..PipelineOptions::default()
    };
    let mut p = Pipeline::new(
        &config,
        &DataplaneConfig::default(),
        ManualClock::default(),
        options,
    );
    p.attach_sessions(links[0].clone(), 4, 64);
    (control, p)
}

/// Publishes the control plane's changes and lets the pipeline apply them;
/// what it sends meanwhile (released packets, End Markers).
pub fn settle(c: &mut Sessions, p: &mut Pipeline<ManualClock>, pool: &mut Pool) -> Out {
    c.publish();
    let mut out = Out::default();
    p.apply_session_changes(pool, &mut |o, pool, v| {
        for &id in v.as_slice() {
            let d = pool.data(id).to_vec();
            match o {
                Output::Reply => out.replies.push(d),
                _ => out.packets.push(d),
            }
            pool.free(id);
        }
        v.clear();
    });
    assert!(c.settled());
    out
}

pub fn addrs(v6: bool) -> (IpAddr, IpAddr) {
    if v6 {
        (A6, B6)
    } else {
        (A4, B4)
    }
}

/// An inner UDP packet from a server on N6 to UE `ue` (or from the UE
/// when `up`).
pub fn inner(ue: IpAddr, up: bool, payload: &[u8]) -> Vec<u8> {
    let server = if ue.is_ipv4() {
        IpAddr::V4(Ipv4Addr::new(198, 51, 100, 1))
    } else {
        IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0x99, 0, 0, 0, 0, 1))
    };
    if up {
        udp_packet(ue, server, 5000, 53, payload)
    } else {
        udp_packet(server, ue, 53, 5000, payload)
    }
}

pub fn ue4(i: u32) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 0, 0, 0)) + i))
}

pub fn ue6(i: u32) -> IpAddr {
    IpAddr::V6(Ipv6Addr::from(
        u128::from(Ipv6Addr::new(0x2001, 0xdb8, 8, 0, 0, 0, 0, 0)) + u128::from(i),
    ))
}

/// A G-PDU from the gNB (side B) to N3 with `teid`, an UL PDU Session
/// Container with `qfi` where given, around `inner`.
pub fn gpdu(v6: bool, teid: u32, qfi: Option<u8>, inner: &[u8]) -> Vec<u8> {
    let (n3, gnb) = addrs(v6);
    udp_packet(gnb, n3, 2152, 2152, &gtpu(teid, qfi, inner))
}

/// The GTP-U part (header onwards) of [`gpdu`].
pub fn gtpu(teid: u32, qfi: Option<u8>, inner: &[u8]) -> Vec<u8> {
    let mut r = GtpuRepr::gpdu(teid);
    if let Some(q) = qfi {
        let _ = r
            .extensions
            .push(Extension::PduSessionContainer(PduSessionContainer::ul(q)));
    }
    let mut g = vec![0u8; r.buffer_len() + inner.len()];
    let n = r.buffer_len();
    r.emit(&mut g[..n], inner.len());
    g[n..].copy_from_slice(inner);
    g
}
