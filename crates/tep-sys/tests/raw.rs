//! Whole IP packets handed to the kernel through a raw socket arrive where
//! their header says (root only, in a private network namespace).

mod common;

use std::io::IoSliceMut;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::AsRawFd;

use common::{deadline, in_netns, wait_readable};
use tep_sys::raw::RawIp;
use tep_sys::{RecvMeta, UdpOptions, UdpSocket};

/// A UDP datagram from `src` to `dst` with its IP header, checksum 0 (IPv4:
/// none; the IPv6 test's receiver accepts zero checksums).
fn datagram(src: SocketAddr, dst: SocketAddr, payload: &[u8]) -> Vec<u8> {
    let udp_len = 8 + payload.len();
    let mut p = match (src.ip(), dst.ip()) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let mut h = vec![0u8; 20];
            h[0] = 0x45;
            h[2..4].copy_from_slice(&((20 + udp_len) as u16).to_be_bytes());
            h[8] = 64;
            h[9] = 17;
            h[12..16].copy_from_slice(&s.octets());
            h[16..20].copy_from_slice(&d.octets());
            h
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let mut h = vec![0u8; 40];
            h[0] = 0x60;
            h[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
            h[6] = 17;
            h[7] = 64;
            h[8..24].copy_from_slice(&s.octets());
            h[24..40].copy_from_slice(&d.octets());
            h
        }
        _ => unreachable!(),
    };
    p.extend_from_slice(&src.port().to_be_bytes());
    p.extend_from_slice(&dst.port().to_be_bytes());
    p.extend_from_slice(&(udp_len as u16).to_be_bytes());
    p.extend_from_slice(&[0, 0]);
    p.extend_from_slice(payload);
    p
}

fn delivers(ip: IpAddr) {
    let opts = UdpOptions {
        zero_checksum_rx: true,
        ..UdpOptions::default()
    };
    let mut rx = UdpSocket::bind(SocketAddr::new(ip, 0), &opts).unwrap();
    let raw = RawIp::new().unwrap();
    let src = SocketAddr::new(ip, 4242);
    raw.send(&datagram(src, rx.local_addr(), b"through the kernel"))
        .unwrap();
    assert!(
        wait_readable(&[rx.as_raw_fd()], deadline(1500)).is_some(),
        "{ip}: nothing arrived"
    );
    let mut buf = [0u8; 64];
    let mut meta = [RecvMeta::default()];
    let n = rx
        .recv_batch(&mut [IoSliceMut::new(&mut buf)], &mut meta)
        .unwrap();
    assert_eq!(n, 1);
    assert_eq!(&buf[..meta[0].len], b"through the kernel");
    assert_eq!(meta[0].source, src);
}

#[test]
fn raw_packets_reach_their_destination() {
    in_netns(|| {
        delivers(IpAddr::V4(Ipv4Addr::LOCALHOST));
        delivers(IpAddr::V6(Ipv6Addr::LOCALHOST));
        let raw = RawIp::new().unwrap();
        assert!(raw.send(&[0x50, 0, 0]).is_err(), "not IP");
    });
}
