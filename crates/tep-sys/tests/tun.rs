//! TUN/TAP devices in a private network namespace (root only).

mod common;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, UdpSocket};
use std::os::fd::AsRawFd;

use common::{deadline, icmp_echo_request, in_netns, is_echo_reply, wait_readable};
use tep_sys::{DeviceKind, Offloads, Tun, TunOptions, TunQueue};

/// Reads packets from `queues` until `wanted` accepts one (others, e.g. IPv6
/// router solicitations, are logged and skipped); returns the vnet header,
/// the packet and the index of the queue it came from.
fn read_until(
    queues: &[&TunQueue],
    what: &str,
    wanted: impl Fn(&[u8]) -> bool,
) -> ([u8; 10], Vec<u8>, usize) {
    let fds: Vec<_> = queues.iter().map(|q| q.as_raw_fd()).collect();
    let end = deadline(1500);
    let mut buf = vec![0u8; 65536];
    loop {
        let Some(i) = wait_readable(&fds, end) else {
            panic!("no {what} within the deadline");
        };
        let mut hdr = [0xaau8; 10];
        match queues[i].read_packet(&mut hdr, &mut buf) {
            Ok(n) => {
                let pkt = &buf[..n];
                if wanted(pkt) {
                    return (hdr, pkt.to_vec(), i);
                }
                eprintln!(
                    "skipping a {n}-byte packet while waiting for {what}: {:02x?}",
                    &pkt[..n.min(24)]
                );
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => panic!("read_packet: {e}"),
        }
    }
}

fn vnet_u16(hdr: &[u8; 10], at: usize) -> u16 {
    u16::from_le_bytes([hdr[at], hdr[at + 1]])
}

#[test]
fn tun_vnet_hdr_offloads_config_and_packets() {
    if !tep_sys::netns::is_root() {
        tep_testing::skip(format_args!(
            "tun_vnet_hdr_offloads_config_and_packets: needs root (CI runs it as root)"
        ));
        return;
    }
    in_netns(|| {
        let mut tun = Tun::open(&TunOptions {
            name: "teptun0".into(),
            kind: DeviceKind::Tun,
            queues: 1,
            vnet_hdr: true,
            vnet_hdr_tunnel: false,
            offloads: Offloads::all(),
        })
        .unwrap();
        assert_eq!(tun.name(), "teptun0");
        assert_eq!(tun.kind(), DeviceKind::Tun);
        assert_eq!(tun.queues(), 1);
        assert!(tun.ifindex() > 1, "ifindex {}", tun.ifindex()); // 1 is lo
        let off = tun.offloads();
        eprintln!("tun offloads asked: {}, in effect: {off}", Offloads::all());
        assert!(off.csum && off.tso4 && off.tso6 && off.tso_ecn, "{off}");
        // USO4/USO6 exist since Linux 6.2; the kernel takes them only as a pair.
        assert_eq!(off.uso4, off.uso6, "{off}");

        tun.set_mtu(1400).unwrap();
        assert_eq!(tun.mtu().unwrap(), 1400);
        tun.set_mtu(1500).unwrap();
        assert_eq!(tun.mtu().unwrap(), 1500);
        tun.set_txqueuelen(2000).unwrap();
        // Through rtnetlink (crate::rtnl), checked the way `ip` reads it.
        tun.set_gso_max_size(32768).unwrap();
        let shown = std::process::Command::new("ip")
            .args(["-d", "link", "show", "teptun0"])
            .output()
            .unwrap();
        let shown = String::from_utf8_lossy(&shown.stdout);
        assert!(shown.contains("gso_max_size 32768"), "{shown}");
        assert!(tun.set_gso_max_size(u32::MAX).is_err());
        tun.add_address(IpAddr::V4(Ipv4Addr::new(10, 99, 0, 1)), 24)
            .unwrap();
        tun.add_address(IpAddr::V4(Ipv4Addr::new(10, 99, 0, 1)), 24)
            .unwrap();
        let v6: Ipv6Addr = "fd00:99::1".parse().unwrap();
        tun.add_address(IpAddr::V6(v6), 64).unwrap();
        tun.add_address(IpAddr::V6(v6), 64).unwrap(); // EEXIST is fine
                                                      // A second IPv4 address joins the first (SIOCSIFADDR replaced it).
        tun.add_address(IpAddr::V4(Ipv4Addr::new(10, 98, 7, 1)), 24)
            .unwrap();
        let v4 = std::process::Command::new("ip")
            .args(["-4", "-o", "addr", "show", "dev", tun.name()])
            .output()
            .unwrap();
        let v4 = String::from_utf8_lossy(&v4.stdout);
        assert!(
            v4.contains("10.99.0.1/24") && v4.contains("10.98.7.1/24"),
            "{v4}"
        );
        assert!(tun
            .add_address(IpAddr::V4(Ipv4Addr::new(10, 99, 0, 1)), 33)
            .is_err());
        tun.set_up().unwrap();

        let queues = tun.take_queues();
        assert_eq!(queues.len(), 1);
        assert!(tun.take_queues().is_empty());
        assert_eq!(tun.queues(), 1);
        let q = &queues[0];
        assert!(q.has_vnet_hdr());

        // A UDP datagram routed into the TUN: the kernel leaves its checksum
        // partial (TUN_F_CSUM) and says where it goes in the vnet header.
        let sock = UdpSocket::bind("0.0.0.0:0").unwrap();
        let payload = b"hello from the tep-sys test";
        sock.send_to(payload, "10.99.0.2:9").unwrap();
        let (hdr, pkt, _) = read_until(&[q], "the IPv4 UDP datagram", |p| {
            p.len() >= 28 && p[0] == 0x45 && p[9] == 17 && p[16..20] == [10, 99, 0, 2]
        });
        assert_eq!(pkt.len(), 28 + payload.len());
        assert_eq!(&pkt[12..16], &[10, 99, 0, 1]);
        assert_eq!(u16::from_be_bytes([pkt[22], pkt[23]]), 9);
        assert_eq!(&pkt[28..], payload);
        eprintln!("vnet header of the UDP/IPv4 datagram: {hdr:02x?}");
        assert_eq!(hdr[0] & 1, 1, "VIRTIO_NET_HDR_F_NEEDS_CSUM");
        assert_eq!(hdr[1], 0, "gso_type NONE");
        assert_eq!(vnet_u16(&hdr, 6), 20, "csum_start");
        assert_eq!(vnet_u16(&hdr, 8), 6, "csum_offset");

        // The same over IPv6 (no DAD on a TUN: IFF_NOARP, so the address is usable at once).
        let sock6 = UdpSocket::bind("[::]:0").unwrap();
        sock6.send_to(payload, "[fd00:99::2]:9").unwrap();
        let dst6 = "fd00:99::2".parse::<Ipv6Addr>().unwrap().octets();
        let (hdr, pkt, _) = read_until(&[q], "the IPv6 UDP datagram", |p| {
            p.len() >= 48 && p[0] >> 4 == 6 && p[6] == 17 && p[24..40] == dst6
        });
        assert_eq!(&pkt[48..], payload);
        eprintln!("vnet header of the UDP/IPv6 datagram: {hdr:02x?}");
        assert_eq!(hdr[0] & 1, 1, "VIRTIO_NET_HDR_F_NEEDS_CSUM");
        assert_eq!(vnet_u16(&hdr, 6), 40, "csum_start");
        assert_eq!(vnet_u16(&hdr, 8), 6, "csum_offset");

        // An echo request for the TUN's own address, written into the TUN,
        // comes back as an echo reply.
        let (me, peer) = ([10, 99, 0, 1], [10, 99, 0, 2]);
        let ping = icmp_echo_request(peer, me, 0x7e9, 1, b"tep-sys ping");
        assert_eq!(q.write_packet(&[0; 10], &ping).unwrap(), ping.len());
        let (hdr, reply, _) = read_until(&[q], "the echo reply", |p| {
            is_echo_reply(p, peer, me, 0x7e9, 1, b"tep-sys ping")
        });
        eprintln!("vnet header of the echo reply: {hdr:02x?}");
        assert_eq!(common::checksum(&reply[..20]), 0, "IPv4 header checksum");
        if hdr[0] & 1 == 0 {
            assert_eq!(common::checksum(&reply[20..]), 0, "ICMP checksum");
        }

        // Nothing else queued up: WouldBlock, not a hang.
        let mut buf = [0u8; 2048];
        let mut hdr = [0u8; 10];
        loop {
            match q.read_packet(&mut hdr, &mut buf) {
                Ok(_) => continue, // stray IPv6 control traffic
                Err(e) => {
                    assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock);
                    break;
                }
            }
        }
    });
}

#[test]
fn tap_reads_the_arp_request() {
    if !tep_sys::netns::is_root() {
        tep_testing::skip(format_args!(
            "tap_reads_the_arp_request: needs root (CI runs it as root)"
        ));
        return;
    }
    in_netns(|| {
        let mut tap = Tun::open(&TunOptions {
            name: "teptap0".into(),
            kind: DeviceKind::Tap,
            queues: 1,
            vnet_hdr: false,
            vnet_hdr_tunnel: false,
            offloads: Offloads::all(),
        })
        .unwrap();
        assert_eq!(tap.name(), "teptap0");
        assert_eq!(tap.kind(), DeviceKind::Tap);
        assert_eq!(
            tap.offloads(),
            Offloads::none(),
            "no offloads without vnet_hdr"
        );
        tap.add_address(IpAddr::V4(Ipv4Addr::new(10, 98, 0, 1)), 24)
            .unwrap();
        tap.set_up().unwrap();
        let queues = tap.take_queues();
        let q = &queues[0];
        assert!(!q.has_vnet_hdr());

        let sock = UdpSocket::bind("0.0.0.0:0").unwrap();
        sock.send_to(b"x", "10.98.0.2:9").unwrap();
        let (hdr, frame, _) = read_until(&[q], "the ARP request", |f| {
            f.len() >= 42 && f[12..14] == [0x08, 0x06] && f[14 + 24..14 + 28] == [10, 98, 0, 2]
        });
        assert_eq!(hdr, [0; 10], "zero-filled without vnet_hdr");
        assert_eq!(&frame[0..6], &[0xff; 6], "broadcast");
        assert_eq!(&frame[14 + 6..14 + 8], &[0, 1], "ARP request");
        assert_eq!(&frame[14 + 14..14 + 18], &[10, 98, 0, 1], "sender IP");
        assert_eq!(
            &frame[6..12],
            &frame[14 + 8..14 + 14],
            "sender MAC = source MAC"
        );
    });
}

#[test]
fn multi_queue_tun_has_one_fd_per_queue() {
    if !tep_sys::netns::is_root() {
        tep_testing::skip(format_args!(
            "multi_queue_tun_has_one_fd_per_queue: needs root (CI runs it as root)"
        ));
        return;
    }
    in_netns(|| {
        let mut tun = Tun::open(&TunOptions {
            name: "tepmq%d".into(),
            kind: DeviceKind::Tun,
            queues: 2,
            vnet_hdr: true,
            vnet_hdr_tunnel: false,
            offloads: Offloads::none(),
        })
        .unwrap();
        assert_eq!(tun.name(), "tepmq0", "the kernel fills the pattern");
        assert_eq!(tun.queues(), 2);
        assert_eq!(tun.offloads(), Offloads::none());
        tun.add_address(IpAddr::V4(Ipv4Addr::new(10, 97, 0, 1)), 24)
            .unwrap();
        tun.set_up().unwrap();
        let queues = tun.take_queues();
        assert_eq!(queues.len(), 2);
        assert_ne!(queues[0].as_raw_fd(), queues[1].as_raw_fd());
        let refs: Vec<&TunQueue> = queues.iter().collect();

        // Either queue takes packets in; the reply comes out of one of them.
        let (me, peer) = ([10, 97, 0, 1], [10, 97, 0, 2]);
        for (seq, q) in queues.iter().enumerate() {
            let seq = seq as u16;
            let ping = icmp_echo_request(peer, me, 0x3131, seq, b"multi-queue");
            assert_eq!(q.write_packet(&[0; 10], &ping).unwrap(), ping.len());
            let (_, _, from) = read_until(&refs, "the echo reply", |p| {
                is_echo_reply(p, peer, me, 0x3131, seq, b"multi-queue")
            });
            eprintln!("echo request written to queue {seq}, reply read from queue {from}");
        }
    });
}

#[test]
fn bad_options_are_refused_before_opening() {
    let opts = |name: &str, queues| TunOptions {
        name: name.into(),
        kind: DeviceKind::Tun,
        queues,
        vnet_hdr: false,
        vnet_hdr_tunnel: false,
        offloads: Offloads::none(),
    };
    for (name, queues) in [("a-name-that-is-too-long", 1), ("", 1), ("ok", 0)] {
        let e = Tun::open(&opts(name, queues)).unwrap_err();
        assert_eq!(
            e.kind(),
            std::io::ErrorKind::InvalidInput,
            "{name:?}/{queues}: {e}"
        );
    }
}

#[test]
fn offloads_display_and_flags() {
    assert_eq!(Offloads::none().to_string(), "none");
    assert_eq!(
        Offloads::all().to_string(),
        "csum tso4 tso6 tso_ecn uso4 uso6"
    );
    assert_eq!(
        Offloads::from_flags(Offloads::all().to_flags()),
        Offloads::all()
    );
    let no_csum = Offloads {
        csum: false,
        ..Offloads::all()
    };
    assert_eq!(no_csum.to_flags(), 0, "everything needs csum");
    let ecn_only = Offloads {
        csum: true,
        tso_ecn: true,
        ..Offloads::none()
    };
    assert_eq!(ecn_only.to_flags(), 1, "tso_ecn needs TSO");
}

/// UDP super-packets across the TUN in both directions, when the kernel took
/// USO: a GSO send routed into the TUN comes out as one packet with
/// gso_type UDP_L4; a super-packet written with such a header reaches a local
/// socket as its datagrams.
#[test]
fn tun_udp_super_packets_with_uso() {
    if !tep_sys::netns::is_root() {
        tep_testing::skip(format_args!(
            "tun_udp_super_packets_with_uso: needs root (CI runs it as root)"
        ));
        return;
    }
    in_netns(|| udp_through_the_tun(Offloads::all()));
}

/// TSO without USO, as the offload fallback leaves a kernel older than
/// 6.2: the kernel segments UDP super-packets before the TUN, and the
/// device still takes TCP ones.
#[test]
fn tun_udp_datagrams_without_uso() {
    if !tep_sys::netns::is_root() {
        tep_testing::skip(format_args!(
            "tun_udp_datagrams_without_uso: needs root (CI runs it as root)"
        ));
        return;
    }
    let no_uso = Offloads {
        uso4: false,
        uso6: false,
        ..Offloads::all()
    };
    in_netns(move || udp_through_the_tun(no_uso));
}

/// A UDP_SEGMENT send routed out of a TUN opened with `offloads`: one
/// super-packet with USO, else the kernel's datagrams; with USO, also a
/// super-packet written into the TUN reaching a local socket as datagrams.
fn udp_through_the_tun(offloads: Offloads) {
    let mut tun = Tun::open(&TunOptions {
        name: "tepuso0".into(),
        kind: DeviceKind::Tun,
        queues: 1,
        vnet_hdr: true,
        vnet_hdr_tunnel: false,
        offloads,
    })
    .unwrap();
    let taken = tun.offloads();
    assert!(taken.csum && taken.tso4 && taken.tso6, "TSO in {taken}");
    if !offloads.uso4 {
        assert!(!taken.uso4 && !taken.uso6, "USO not wanted, but {taken}");
    }
    let uso = taken.uso4;
    eprintln!("offloads in effect: {}", tun.offloads());
    tun.add_address(IpAddr::V4(Ipv4Addr::new(10, 96, 0, 1)), 24)
        .unwrap();
    tun.set_up().unwrap();
    let queues = tun.take_queues();
    let q = &queues[0];

    // Out of the TUN: 1300 bytes sent with UDP_SEGMENT 500.
    let mut tx = tep_sys::UdpSocket::bind(
        "10.96.0.1:0".parse().unwrap(),
        &tep_sys::UdpOptions::default(),
    )
    .unwrap();
    let data: Vec<u8> = (0..1300u32).map(|i| i as u8).collect();
    let dest = "10.96.0.2:4000".parse().unwrap();
    let msg = tep_sys::Transmit {
        dest,
        data: &data,
        segment_size: Some(500),
    };
    assert_eq!(tx.send_batch(&[msg]).unwrap(), 1);
    let is_ours =
        |p: &[u8]| p.len() > 28 && p[0] == 0x45 && p[9] == 17 && p[22..24] == [0x0f, 0xa0];
    let (hdr, pkt, _) = read_until(&[q], "the UDP train", is_ours);
    eprintln!(
        "first packet of the train: {} bytes, vnet header {hdr:02x?}",
        pkt.len()
    );
    if uso {
        assert_eq!(pkt.len(), 28 + 1300, "one super-packet");
        assert_eq!(hdr[0] & 1, 1, "NEEDS_CSUM");
        assert_eq!(hdr[1], 5, "VIRTIO_NET_HDR_GSO_UDP_L4");
        assert_eq!(vnet_u16(&hdr, 4), 500, "gso_size");
        assert_eq!((vnet_u16(&hdr, 6), vnet_u16(&hdr, 8)), (20, 6));
        assert_eq!(&pkt[28..], &data[..]);
    } else {
        assert_eq!(pkt.len(), 28 + 500, "segmented by the kernel");
        for len in [500, 300] {
            let (_, pkt, _) = read_until(&[q], "the next datagram", is_ours);
            assert_eq!(pkt.len(), 28 + len);
        }
        if offloads.uso4 {
            tep_testing::skip(
                "tun_udp_super_packets_with_uso: no USO on this kernel (Linux 6.2+): the \
                 super-packet direction into the TUN did not run",
            );
        }
        return;
    }

    // Into the TUN: an IPv4/UDP super-packet for a local socket, with the
    // pseudo-header sum in the checksum field (CHECKSUM_PARTIAL).
    let rx = std::net::UdpSocket::bind("10.96.0.1:5000").unwrap();
    let (src, dst) = ([10, 96, 0, 2], [10, 96, 0, 1]);
    let mut p = common::ipv4_udp(src, dst, 4000, 5000, &data);
    let pseudo = common::pseudo_header_v4(src, dst, 8 + data.len());
    let partial = !common::checksum(&pseudo); // the folded sum, not complemented
    p[26..28].copy_from_slice(&partial.to_be_bytes());
    let mut hdr = [0u8; 10];
    hdr[0] = 1; // NEEDS_CSUM
    hdr[1] = 5; // GSO_UDP_L4
    hdr[2..4].copy_from_slice(&28u16.to_le_bytes()); // hdr_len
    hdr[4..6].copy_from_slice(&500u16.to_le_bytes()); // gso_size
    hdr[6..8].copy_from_slice(&20u16.to_le_bytes()); // csum_start
    hdr[8..10].copy_from_slice(&6u16.to_le_bytes()); // csum_offset
    assert_eq!(q.write_packet(&hdr, &p).unwrap(), p.len());
    rx.set_read_timeout(Some(std::time::Duration::from_secs(1)))
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 2048];
    for want in [500, 500, 300] {
        let (n, from) = rx.recv_from(&mut buf).unwrap();
        assert_eq!((n, from), (want, "10.96.0.2:4000".parse().unwrap()));
        got.extend_from_slice(&buf[..n]);
    }
    assert_eq!(got, data);
}

/// The kernel cuts a packet that does not fit and says only how much it
/// copied: the buffer must hold the largest packet (MTU, or 64 KiB with
/// TSO/USO).
#[test]
fn tun_read_into_a_short_buffer_truncates() {
    if !tep_sys::netns::is_root() {
        tep_testing::skip(format_args!(
            "tun_read_into_a_short_buffer_truncates: needs root (CI runs it as root)"
        ));
        return;
    }
    in_netns(|| {
        for vnet_hdr in [false, true] {
            let name = if vnet_hdr { "tepshort1" } else { "tepshort0" };
            let mut tun = Tun::open(&TunOptions {
                name: name.into(),
                kind: DeviceKind::Tun,
                queues: 1,
                vnet_hdr,
                vnet_hdr_tunnel: false,
                offloads: Offloads::none(),
            })
            .unwrap();
            let net = if vnet_hdr { 94 } else { 95 };
            tun.add_address(IpAddr::V4(Ipv4Addr::new(10, net, 0, 1)), 24)
                .unwrap();
            tun.set_up().unwrap();
            let queues = tun.take_queues();
            let q = &queues[0];
            let sock = UdpSocket::bind("0.0.0.0:0").unwrap();
            sock.send_to(&[0u8; 100], (Ipv4Addr::new(10, net, 0, 2), 9))
                .unwrap();
            let end = deadline(1000);
            // Whatever comes first (the datagram or an IPv6 solicitation) is
            // longer than 20 bytes.
            loop {
                assert!(
                    wait_readable(&[q.as_raw_fd()], end).is_some(),
                    "nothing to read"
                );
                let mut hdr = [0u8; 10];
                let mut small = [0u8; 20];
                match q.read_packet(&mut hdr, &mut small) {
                    Ok(n) => {
                        assert_eq!(n, 20, "vnet_hdr {vnet_hdr}: the bytes copied");
                        break;
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(e) => panic!("vnet_hdr {vnet_hdr}: {e}"),
                }
            }
        }
    });
}

/// A TAP opened with the 24-byte tunnel header and UDP-tunnel GSO (Linux
/// 6.17+) takes a whole VXLAN super-packet: outer IPv4/UDP/VXLAN, inner
/// Ethernet/IPv4/TCP of ten segments, `gso_type` UDP_TUNNEL_IPV4 | TCPV4,
/// the offsets of the outer UDP and the inner IP header. The kernel's VXLAN
/// device receives it as one packet (no segmentation on the way, no
/// checksum error), which is how tep can hand the kernel the shape its
/// own VXLAN sends.
#[test]
fn tap_takes_udp_tunnel_super_packets() {
    if !tep_sys::netns::is_root() {
        tep_testing::skip(format_args!(
            "tap_takes_udp_tunnel_super_packets: needs root (CI runs it as root)"
        ));
        return;
    }
    in_netns(|| {
        let opened = Tun::open(&TunOptions {
            name: "tepup0".into(),
            kind: DeviceKind::Tap,
            queues: 1,
            vnet_hdr: true,
            vnet_hdr_tunnel: true,
            offloads: Offloads {
                udp_tunnel: true,
                udp_tunnel_csum: true,
                ..Offloads::all()
            },
        });
        let mut tap = match opened {
            Ok(t) => t,
            Err(e) => panic!("a TAP with the tunnel header: {e}"),
        };
        if !tap.offloads().udp_tunnel {
            tep_testing::skip(format_args!("tap_takes_udp_tunnel_super_packets: this kernel has no UDP tunnel GSO on TUN/TAP (6.17+): {}",
                tap.offloads()));
            return;
        }
        let sh = |args: &str| {
            let ok = std::process::Command::new("sh")
                .args(["-c", args])
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "{args}");
        };
        let name = tap.name().to_string();
        tap.set_up().unwrap();
        // The peer: a VXLAN device of this namespace on 192.0.2.2 (no dummy
        // module here: the address sits on lo).
        sh("ip addr add 192.0.2.2/32 dev lo");
        sh("ip link add tepvx0 type vxlan id 42 local 192.0.2.2 dstport 4789 && ip addr add 10.9.0.1/24 dev tepvx0 && ip link set tepvx0 up");
        sh(&format!(
            "sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.{name}.rp_filter=0"
        ));
        // This thread's namespace: netlink and /proc/thread-self (sysfs
        // shows the namespace it was mounted in).
        let mac = |dev: &str| tep_sys::netlink::link_by_name(dev).unwrap().mac.unwrap();
        let (tap_mac, vx_mac) = (mac(&name), mac("tepvx0"));
        let rx = |what: &str| -> u64 {
            let dev = std::fs::read_to_string("/proc/thread-self/net/dev").unwrap();
            let line = dev
                .lines()
                .find(|l| l.trim_start().starts_with("tepvx0:"))
                .unwrap()
                .to_string();
            let cols: Vec<u64> = line
                .split(':')
                .nth(1)
                .unwrap()
                .split_whitespace()
                .map(|c| c.parse().unwrap())
                .collect();
            // Receive bytes, then packets.
            if what == "rx_bytes" {
                cols[0]
            } else {
                cols[1]
            }
        };
        let (packets0, bytes0) = (rx("rx_packets"), rx("rx_bytes"));
        let (mss, segments) = (1400usize, 10usize);
        let payload: Vec<u8> = (0..mss * segments).map(|i| (i * 7) as u8).collect();
        let (isrc, idst) = ([10, 9, 0, 2], [10, 9, 0, 1]);
        // Inner TCP with the pseudo-header sum in the checksum field
        // (NEEDS_CSUM), inner IPv4 with its checksum.
        let tcp_len = 20 + payload.len();
        let mut tcp = vec![0u8; 20];
        tcp[0..2].copy_from_slice(&40000u16.to_be_bytes());
        tcp[2..4].copy_from_slice(&5001u16.to_be_bytes());
        tcp[4..8].copy_from_slice(&1000u32.to_be_bytes());
        tcp[12] = 5 << 4;
        tcp[13] = 0x18;
        tcp[14..16].copy_from_slice(&65535u16.to_be_bytes());
        let pseudo = common::checksum(
            &[
                &isrc[..],
                &idst[..],
                &[0, 6],
                &(tcp_len as u16).to_be_bytes(),
            ]
            .concat(),
        );
        tcp[16..18].copy_from_slice(&(!pseudo).to_be_bytes());
        let inner_ip = common::ipv4_header(isrc, idst, 6, tcp_len);
        let mut inner = [vx_mac, [2, 0, 0, 0, 0, 0x99]].concat();
        inner.extend_from_slice(&[0x08, 0x00]);
        inner.extend_from_slice(&inner_ip);
        inner.extend_from_slice(&tcp);
        inner.extend_from_slice(&payload);
        let mut vxlan = vec![0x08, 0, 0, 0, 0, 0, 42, 0];
        vxlan.extend_from_slice(&inner);
        let (osrc, odst) = ([192, 0, 2, 1], [192, 0, 2, 2]);
        let udp_len = 8 + vxlan.len();
        let mut udp = vec![0u8; 8];
        udp[0..2].copy_from_slice(&50000u16.to_be_bytes());
        udp[2..4].copy_from_slice(&4789u16.to_be_bytes());
        udp[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
        udp.extend_from_slice(&vxlan);
        let outer_ip = common::ipv4_header(osrc, odst, 17, udp_len);
        let mut frame = [tap_mac, [2, 0, 0, 0, 0, 1]].concat();
        frame.extend_from_slice(&[0x08, 0x00]);
        frame.extend_from_slice(&outer_ip);
        frame.extend_from_slice(&udp);
        // virtio_net_hdr_v1_hash_tunnel: NEEDS_CSUM on the inner TCP,
        // UDP_TUNNEL_IPV4 | TCPV4, gso_size the inner MSS, the offsets.
        let inner_nh = 14 + 20 + 8 + 8 + 14;
        let inner_th = inner_nh + 20;
        let mut hdr = [0u8; TunQueue::VNET_HDR_TUNNEL_LEN];
        hdr[0] = 1;
        hdr[1] = 0x20 | 0x01;
        hdr[2..4].copy_from_slice(&((inner_th + 20) as u16).to_le_bytes());
        hdr[4..6].copy_from_slice(&(mss as u16).to_le_bytes());
        hdr[6..8].copy_from_slice(&(inner_th as u16).to_le_bytes());
        hdr[8..10].copy_from_slice(&16u16.to_le_bytes());
        hdr[20..22].copy_from_slice(&(14u16 + 20).to_le_bytes());
        hdr[22..24].copy_from_slice(&(inner_nh as u16).to_le_bytes());
        let q = &tap.take_queues()[0];
        for _ in 0..3 {
            let n = q
                .write_with_header(&hdr, &[std::io::IoSlice::new(&frame)])
                .expect("the kernel takes the super-packet");
            assert_eq!(n, frame.len());
        }
        let end = deadline(1500);
        while rx("rx_packets") < packets0 + 3 && std::time::Instant::now() < end {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        // Three packets of the whole inner frame each (the device counts
        // them past their Ethernet header): not segmented.
        assert_eq!(rx("rx_packets") - packets0, 3);
        assert_eq!(rx("rx_bytes") - bytes0, 3 * (inner.len() - 14) as u64);
        let snmp = std::fs::read_to_string("/proc/thread-self/net/snmp").unwrap();
        let tcp_line: Vec<&str> = snmp.lines().filter(|l| l.starts_with("Tcp:")).collect();
        let names: Vec<&str> = tcp_line[0].split_whitespace().collect();
        let values: Vec<&str> = tcp_line[1].split_whitespace().collect();
        let at = names.iter().position(|n| *n == "InCsumErrors").unwrap();
        assert_eq!(values[at], "0", "no inner checksum error");
    });
}
