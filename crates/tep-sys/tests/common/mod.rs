//! Shared by the integration tests: run a test body in a private network
//! namespace, wait for a descriptor, build and check IPv4 packets.
#![allow(dead_code)]

use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use tep_sys::Epoll;

/// Runs `body` on a new thread moved into its own network namespace (with
/// `lo` up). The namespace disappears with the thread; a panic in `body`
/// fails the test.
pub fn in_netns<F: FnOnce() + Send + 'static>(body: F) {
    let handle = std::thread::spawn(move || {
        tep_sys::netns::unshare_net().expect("unshare_net");
        body();
    });
    if let Err(panic) = handle.join() {
        std::panic::resume_unwind(panic);
    }
}

/// Waits until one of `fds` is readable; returns its index, or None at the deadline.
pub fn wait_readable(fds: &[RawFd], deadline: Instant) -> Option<usize> {
    let epoll = Epoll::new().unwrap();
    for (i, &fd) in fds.iter().enumerate() {
        epoll.add(fd, i as u64, true, false).unwrap();
    }
    let mut events = Vec::with_capacity(8);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        let ms = left.as_millis().clamp(1, 1000) as i32;
        if epoll.wait(&mut events, ms).unwrap() > 0 {
            return Some(events[0].token as usize);
        }
    }
}

pub fn deadline(ms: u64) -> Instant {
    Instant::now() + Duration::from_millis(ms)
}

/// RFC 1071 checksum of `data` (the complement of the folded sum).
pub fn checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    for chunk in data.chunks(2) {
        let word = if chunk.len() == 2 {
            u16::from_be_bytes([chunk[0], chunk[1]])
        } else {
            u16::from_be_bytes([chunk[0], 0])
        };
        sum += u32::from(word);
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// The IPv4 pseudo-header of a UDP datagram of `udp_len` bytes.
pub fn pseudo_header_v4(src: [u8; 4], dst: [u8; 4], udp_len: usize) -> Vec<u8> {
    let mut p = Vec::with_capacity(12);
    p.extend_from_slice(&src);
    p.extend_from_slice(&dst);
    p.extend_from_slice(&[0, 17]);
    p.extend_from_slice(&(udp_len as u16).to_be_bytes());
    p
}

/// An IPv4 header (no options, DF clear, TTL 64) for `payload_len` bytes
/// of protocol `proto`, its checksum right. The total length is capped at
/// 65535 (a super-packet's header says what the kernel expects).
pub fn ipv4_header(src: [u8; 4], dst: [u8; 4], proto: u8, payload_len: usize) -> Vec<u8> {
    let mut p = vec![0u8; 20];
    p[0] = 0x45;
    let total = (20 + payload_len).min(65535) as u16;
    p[2..4].copy_from_slice(&total.to_be_bytes());
    p[8] = 64;
    p[9] = proto;
    p[12..16].copy_from_slice(&src);
    p[16..20].copy_from_slice(&dst);
    let c = checksum(&p[..20]);
    p[10..12].copy_from_slice(&c.to_be_bytes());
    p
}

/// An IPv4 UDP datagram (no options, DF clear) with both checksums right.
pub fn ipv4_udp(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let udp_len = 8 + payload.len();
    let mut p = ipv4_header(src, dst, 17, udp_len);
    p.resize(20 + udp_len, 0);
    p[20..22].copy_from_slice(&sport.to_be_bytes());
    p[22..24].copy_from_slice(&dport.to_be_bytes());
    p[24..26].copy_from_slice(&(udp_len as u16).to_be_bytes());
    p[28..].copy_from_slice(payload);
    let mut sum = pseudo_header_v4(src, dst, udp_len);
    sum.extend_from_slice(&p[20..]);
    let c = checksum(&sum);
    p[26..28].copy_from_slice(&c.to_be_bytes());
    p
}

/// An IPv4 ICMP echo request from `src` to `dst` with both checksums right.
pub fn icmp_echo_request(src: [u8; 4], dst: [u8; 4], id: u16, seq: u16, payload: &[u8]) -> Vec<u8> {
    let total = 20 + 8 + payload.len();
    let mut p = vec![0u8; total];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    p[4..6].copy_from_slice(&0x1234u16.to_be_bytes());
    p[6] = 0x40; // DF
    p[8] = 64;
    p[9] = 1; // ICMP
    p[12..16].copy_from_slice(&src);
    p[16..20].copy_from_slice(&dst);
    let c = checksum(&p[..20]);
    p[10..12].copy_from_slice(&c.to_be_bytes());
    p[20] = 8; // echo request
    p[24..26].copy_from_slice(&id.to_be_bytes());
    p[26..28].copy_from_slice(&seq.to_be_bytes());
    p[28..].copy_from_slice(payload);
    let c = checksum(&p[20..]);
    p[22..24].copy_from_slice(&c.to_be_bytes());
    assert_eq!(checksum(&p[..20]), 0);
    assert_eq!(checksum(&p[20..]), 0);
    p
}

/// Whether `pkt` is the echo reply to [`icmp_echo_request`]`(src, dst, id, seq, payload)`.
pub fn is_echo_reply(
    pkt: &[u8],
    src: [u8; 4],
    dst: [u8; 4],
    id: u16,
    seq: u16,
    payload: &[u8],
) -> bool {
    pkt.len() == 28 + payload.len()
        && pkt[0] == 0x45
        && pkt[9] == 1
        && pkt[12..16] == dst
        && pkt[16..20] == src
        && pkt[20] == 0
        && pkt[24..26] == id.to_be_bytes()
        && pkt[26..28] == seq.to_be_bytes()
        && &pkt[28..] == payload
}
