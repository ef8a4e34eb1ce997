//! Batched UDP over loopback in a private network namespace (root only).

mod common;

use std::io::{ErrorKind, IoSliceMut};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::AsRawFd;

use common::{deadline, in_netns, wait_readable};
use tep_sys::{Gathered, RecvMeta, Transmit, UdpOptions, UdpSocket, MAX_BATCH};

const V4: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
const V6: IpAddr = IpAddr::V6(Ipv6Addr::LOCALHOST);

fn bind(ip: IpAddr, opts: &UdpOptions) -> UdpSocket {
    UdpSocket::bind(SocketAddr::new(ip, 0), opts).unwrap()
}

/// Receives until `total` bytes arrived; returns (meta, bytes) per message.
fn recv_bytes(sock: &mut UdpSocket, total: usize) -> Vec<(RecvMeta, Vec<u8>)> {
    let mut storage = vec![vec![0u8; 65536]; 8];
    let mut meta = [RecvMeta::default(); 8];
    let mut got = Vec::new();
    let mut seen = 0;
    let end = deadline(1500);
    while seen < total {
        assert!(
            wait_readable(&[sock.as_raw_fd()], end).is_some(),
            "only {seen} of {total} bytes arrived"
        );
        let mut bufs: Vec<IoSliceMut<'_>> =
            storage.iter_mut().map(|b| IoSliceMut::new(b)).collect();
        let n = match sock.recv_batch(&mut bufs, &mut meta) {
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => continue,
            Err(e) => panic!("recv_batch: {e}"),
        };
        assert!(n > 0);
        for (m, buf) in meta[..n].iter().zip(&bufs) {
            seen += m.len;
            got.push((*m, buf[..m.len].to_vec()));
        }
    }
    assert_eq!(seen, total);
    got
}

fn batch_round_trip(ip: IpAddr) {
    let mut rx = bind(ip, &UdpOptions::default());
    let mut tx = bind(ip, &UdpOptions::default());
    assert_eq!(rx.local_addr().ip(), ip);
    assert_ne!(rx.local_addr().port(), 0);
    let sizes = [1usize, 100, 555, 1200, 1452];
    let payloads: Vec<Vec<u8>> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| vec![i as u8 + 1; n])
        .collect();
    let msgs: Vec<Transmit<'_>> = payloads
        .iter()
        .map(|p| Transmit {
            dest: rx.local_addr(),
            data: p,
            segment_size: None,
        })
        .collect();
    assert_eq!(tx.send_batch(&msgs).unwrap(), msgs.len());

    let got = recv_bytes(&mut rx, sizes.iter().sum());
    assert_eq!(got.len(), sizes.len(), "one message per datagram");
    for ((meta, bytes), sent) in got.iter().zip(&payloads) {
        assert_eq!(meta.source, tx.local_addr());
        assert_eq!(meta.len, sent.len());
        assert_eq!(meta.segment_size, None);
        assert_eq!(bytes, sent);
    }
    // Nothing more: WouldBlock.
    let mut buf = [0u8; 64];
    let mut meta = [RecvMeta::default()];
    let e = rx
        .recv_batch(&mut [IoSliceMut::new(&mut buf)], &mut meta)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::WouldBlock);
}

#[test]
fn udp_batch_round_trip_v4() {
    if !tep_sys::netns::is_root() {
        tep_testing::skip(format_args!(
            "udp_batch_round_trip_v4: needs root (CI runs it as root)"
        ));
        return;
    }
    in_netns(|| batch_round_trip(V4));
}

#[test]
fn udp_batch_round_trip_v6() {
    if !tep_sys::netns::is_root() {
        tep_testing::skip(format_args!(
            "udp_batch_round_trip_v6: needs root (CI runs it as root)"
        ));
        return;
    }
    in_netns(|| batch_round_trip(V6));
}

/// Cuts what one receiver got into datagrams: a GRO train at its segment size.
fn datagram_lengths(got: &[(RecvMeta, Vec<u8>)]) -> Vec<usize> {
    let mut lens = Vec::new();
    for (meta, _) in got {
        match meta.segment_size {
            Some(seg) => {
                let seg = seg as usize;
                let mut left = meta.len;
                while left > 0 {
                    lens.push(left.min(seg));
                    left -= left.min(seg);
                }
            }
            None => lens.push(meta.len),
        }
    }
    lens
}

fn gso_to_gro_and_plain(ip: IpAddr) {
    let mut tx = bind(ip, &UdpOptions::default());
    let caps = tx.capabilities();
    assert!(caps.gso && caps.gro, "{caps:?}");
    assert_eq!(caps.max_segments, 64);
    let mut rx_gro = bind(ip, &UdpOptions::default());
    let mut rx_plain = bind(
        ip,
        &UdpOptions {
            gro: false,
            ..UdpOptions::default()
        },
    );
    assert!(!rx_plain.capabilities().gro);

    let data: Vec<u8> = (0..1300u32).map(|i| (i % 251) as u8).collect();
    let msgs = [
        Transmit {
            dest: rx_gro.local_addr(),
            data: &data,
            segment_size: Some(500),
        },
        Transmit {
            dest: rx_plain.local_addr(),
            data: &data,
            segment_size: Some(500),
        },
    ];
    assert_eq!(tx.send_batch(&msgs).unwrap(), 2);
    assert!(tx.capabilities().gso, "GSO still on");

    let got = recv_bytes(&mut rx_gro, data.len());
    eprintln!(
        "{ip}: receiver with GRO got {} message(s): {:?}",
        got.len(),
        got.iter()
            .map(|(m, _)| (m.len, m.segment_size))
            .collect::<Vec<_>>()
    );
    assert_eq!(datagram_lengths(&got), [500, 500, 300]);
    assert_eq!(got.concat_bytes(), data);
    for (meta, _) in &got {
        assert_eq!(meta.source, tx.local_addr());
    }

    let got = recv_bytes(&mut rx_plain, data.len());
    let shape: Vec<_> = got.iter().map(|(m, _)| (m.len, m.segment_size)).collect();
    assert_eq!(
        shape,
        [(500, None), (500, None), (300, None)],
        "without GRO: one datagram each"
    );
    assert_eq!(got.concat_bytes(), data);
}

trait ConcatBytes {
    fn concat_bytes(&self) -> Vec<u8>;
}

impl ConcatBytes for Vec<(RecvMeta, Vec<u8>)> {
    fn concat_bytes(&self) -> Vec<u8> {
        self.iter().flat_map(|(_, b)| b.iter().copied()).collect()
    }
}

#[test]
fn udp_gso_v4() {
    if !tep_sys::netns::is_root() {
        tep_testing::skip(format_args!("udp_gso_v4: needs root (CI runs it as root)"));
        return;
    }
    in_netns(|| gso_to_gro_and_plain(V4));
}

#[test]
fn udp_gso_v6() {
    if !tep_sys::netns::is_root() {
        tep_testing::skip(format_args!("udp_gso_v6: needs root (CI runs it as root)"));
        return;
    }
    in_netns(|| gso_to_gro_and_plain(V6));
}

#[test]
fn udp_truncated_datagram_reports_the_bytes_received() {
    if !tep_sys::netns::is_root() {
        tep_testing::skip(format_args!(
            "udp_truncated_datagram_reports_the_bytes_received: needs root (CI runs it as root)"
        ));
        return;
    }
    in_netns(|| {
        let mut rx = bind(V4, &UdpOptions::default());
        let mut tx = bind(V4, &UdpOptions::default());
        let data = [7u8; 1000];
        let msg = Transmit {
            dest: rx.local_addr(),
            data: &data,
            segment_size: None,
        };
        assert_eq!(tx.send_batch(&[msg]).unwrap(), 1);
        assert!(wait_readable(&[rx.as_raw_fd()], deadline(1000)).is_some());
        let mut small = [0u8; 100];
        let mut meta = [RecvMeta::default()];
        assert_eq!(
            rx.recv_batch(&mut [IoSliceMut::new(&mut small)], &mut meta)
                .unwrap(),
            1
        );
        assert_eq!(meta[0].len, 100);
        assert_eq!(meta[0].source, tx.local_addr());
    });
}

#[test]
fn udp_zero_checksum_options() {
    if !tep_sys::netns::is_root() {
        tep_testing::skip(format_args!(
            "udp_zero_checksum_options: needs root (CI runs it as root)"
        ));
        return;
    }
    in_netns(|| {
        let zero = UdpOptions {
            zero_checksum_tx: true,
            zero_checksum_rx: true,
            ..UdpOptions::default()
        };
        for ip in [V6, V4] {
            let mut tx = bind(ip, &zero);
            let mut rx = bind(ip, &zero);
            let caps = tx.capabilities();
            assert!(!caps.gso, "{ip}: no GSO without checksums: {caps:?}");
            assert_eq!(caps.max_segments, 1);
            let data = [0x5au8; 300];
            let msg = Transmit {
                dest: rx.local_addr(),
                data: &data,
                segment_size: None,
            };
            assert_eq!(tx.send_batch(&[msg]).unwrap(), 1);
            let got = recv_bytes(&mut rx, data.len());
            assert_eq!(got[0].1, data);

            // A GSO message anyway: the kernel refuses it (EINVAL) and the
            // socket says so in the agreed form.
            let msg = Transmit {
                dest: rx.local_addr(),
                data: &[1u8; 1000],
                segment_size: Some(500),
            };
            let e = tx.send_batch(&[msg]).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Other, "{e}");
            assert!(e.to_string().starts_with("udp gso disabled: "), "{e}");
            assert!(!tx.capabilities().gso);
        }
    });
}

#[test]
fn udp_reuse_port_shares_an_address() {
    if !tep_sys::netns::is_root() {
        tep_testing::skip(format_args!(
            "udp_reuse_port_shares_an_address: needs root (CI runs it as root)"
        ));
        return;
    }
    in_netns(|| {
        for ip in [V4, V6] {
            let reuse = UdpOptions {
                reuse_port: true,
                ..UdpOptions::default()
            };
            let a = bind(ip, &reuse);
            let b = UdpSocket::bind(a.local_addr(), &reuse).unwrap();
            assert_eq!(a.local_addr(), b.local_addr());
            let e = UdpSocket::bind(a.local_addr(), &UdpOptions::default()).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::AddrInUse, "{e}");
        }
    });
}

#[test]
fn udp_batch_limits_and_families() {
    if !tep_sys::netns::is_root() {
        tep_testing::skip(format_args!(
            "udp_batch_limits_and_families: needs root (CI runs it as root)"
        ));
        return;
    }
    in_netns(|| {
        let mut rx = bind(V4, &UdpOptions::default());
        let mut tx = bind(V4, &UdpOptions::default());
        let v6_dest = SocketAddr::new(V6, 9);
        let e = tx
            .send_batch(&[Transmit {
                dest: v6_dest,
                data: b"x",
                segment_size: None,
            }])
            .unwrap_err();
        assert_eq!(
            e.kind(),
            ErrorKind::InvalidInput,
            "a v4 socket talks to v4 peers only: {e}"
        );
        // A family change in the middle ends the batch there.
        let ok = Transmit {
            dest: rx.local_addr(),
            data: b"ok",
            segment_size: None,
        };
        let bad = Transmit {
            dest: v6_dest,
            data: b"x",
            segment_size: None,
        };
        assert_eq!(tx.send_batch(&[ok, ok, bad, ok]).unwrap(), 2);
        assert_eq!(tx.send_batch(&[]).unwrap(), 0);

        // More than MAX_BATCH given: MAX_BATCH sent per call.
        let many = vec![ok; MAX_BATCH + 10];
        let mut sent = 0;
        while sent < many.len() {
            let n = tx.send_batch(&many[sent..]).unwrap();
            assert!(n <= MAX_BATCH);
            sent += n;
        }
        let total = 2 * (2 + MAX_BATCH + 10);
        let got = recv_bytes(&mut rx, total);
        assert_eq!(got.len(), 2 + MAX_BATCH + 10);
        assert!(got.iter().all(|(m, b)| m.len == 2 && b == b"ok"));
    });
}

/// A GSO train sent straight from the buffers of its datagrams: the kernel
/// concatenates the parts and segments the whole, so the receiver sees the
/// same train as from one contiguous buffer. A second message in the same
/// call is plain.
fn gathered_train(ip: IpAddr) {
    let mut tx = bind(ip, &UdpOptions::default());
    let mut rx = bind(ip, &UdpOptions::default());
    let parts: Vec<Vec<u8>> = [500usize, 500, 300]
        .iter()
        .enumerate()
        .map(|(k, &n)| {
            (0..n)
                .map(|i| (i as u8).wrapping_mul(7) ^ k as u8)
                .collect()
        })
        .collect();
    let slices: Vec<std::io::IoSlice<'_>> =
        parts.iter().map(|p| std::io::IoSlice::new(p)).collect();
    let tail = [std::io::IoSlice::new(b"after")];
    let msgs = [
        Gathered {
            dest: rx.local_addr(),
            parts: &slices,
            segment_size: Some(500),
            tos: None,
            ttl: None,
        },
        Gathered {
            dest: rx.local_addr(),
            parts: &tail,
            segment_size: None,
            tos: None,
            ttl: None,
        },
    ];
    assert_eq!(tx.send_gathered(&msgs).unwrap(), 2);
    let got = recv_bytes(&mut rx, 1300 + 5);
    let lens = datagram_lengths(&got);
    assert_eq!(lens, [500, 500, 300, 5]);
    assert_eq!(
        got.concat_bytes(),
        [parts.concat(), b"after".to_vec()].concat()
    );
}

#[test]
fn udp_gathered_train_v4_and_v6() {
    if !tep_sys::netns::is_root() {
        tep_testing::skip(format_args!(
            "udp_gathered_train_v4_and_v6: needs root (CI runs it as root)"
        ));
        return;
    }
    in_netns(|| {
        gathered_train(V4);
        gathered_train(V6);
    });
}

/// The TOS / traffic class and TTL / hop limit given per message reach the
/// receiver, which reads them back per message (and per GRO train): what
/// carries DSCP, ECN and the tunnel's TTL across the socket.
fn tos_and_ttl(ip: IpAddr) {
    let mut tx = bind(ip, &UdpOptions::default());
    let mut rx = bind(ip, &UdpOptions::default());
    let payload = vec![0x5au8; 3000];
    let whole = [std::io::IoSlice::new(&payload)];
    let one = [std::io::IoSlice::new(b"one")];
    let plain = [std::io::IoSlice::new(b"plain")];
    let msg = |parts, segment_size, tos, ttl| Gathered {
        dest: rx.local_addr(),
        parts,
        segment_size,
        tos,
        ttl,
    };
    // ECT(0) with DSCP AF11; CE with DSCP 46 on a GSO train of 3; the
    // socket's defaults.
    let msgs = [
        msg(&one[..], None, Some(0x2a), Some(33)),
        msg(&whole[..], Some(1000), Some(0xbb), Some(7)),
        msg(&plain[..], None, None, None),
    ];
    assert_eq!(tx.send_gathered(&msgs).unwrap(), 3);
    let got = recv_bytes(&mut rx, 3 + 3000 + 5);
    let seen: Vec<(usize, u8, u8)> = got.iter().map(|(m, _)| (m.len, m.tos, m.ttl)).collect();
    let train: Vec<&(usize, u8, u8)> = seen.iter().filter(|s| s.0 >= 1000).collect();
    assert_eq!(seen[0], (3, 0x2a, 33), "{ip}: {seen:?}");
    assert!(!train.is_empty(), "{ip}: {seen:?}");
    for t in train {
        assert_eq!((t.1, t.2), (0xbb, 7), "{ip}: {seen:?}");
    }
    let last = seen.last().unwrap();
    assert_eq!(last.0, 5, "{ip}: {seen:?}");
    assert_eq!(last.1, 0, "{ip}: {seen:?}");
    assert!(last.2 > 7 && last.2 != 33, "{ip}: default TTL {seen:?}");
}

#[test]
fn udp_tos_and_ttl_per_message_v4_and_v6() {
    if !tep_sys::netns::is_root() {
        tep_testing::skip(format_args!(
            "udp_tos_and_ttl_per_message_v4_and_v6: needs root (CI runs it as root)"
        ));
        return;
    }
    in_netns(|| {
        tos_and_ttl(V4);
        tos_and_ttl(V6);
    });
}

/// An integer socket option, read back.
fn sockopt(s: &UdpSocket, level: libc::c_int, name: libc::c_int) -> libc::c_int {
    let mut v: libc::c_int = -1;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `v` and `len` are valid for the call; the kernel writes at
    // most `len` bytes.
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            level,
            name,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    assert_eq!(r, 0, "getsockopt {level}/{name}");
    v
}

/// What a reload changes on a kept socket: DF (IPv4: DO, DONT, back to the
/// kernel's WANT) and the checksum policy (GSO off with zero checksums,
/// on again without), as the kernel reads them back.
#[test]
fn udp_policy_changes_on_a_bound_socket() {
    if !tep_sys::netns::is_root() {
        tep_testing::skip(format_args!(
            "udp_policy_changes_on_a_bound_socket: needs root (CI runs it as root)"
        ));
        return;
    }
    in_netns(|| {
        let opts = UdpOptions {
            dont_fragment: Some(false),
            ..UdpOptions::default()
        };
        let mut s = bind(V4, &opts);
        let df = |s: &UdpSocket| sockopt(s, libc::IPPROTO_IP, libc::IP_MTU_DISCOVER);
        assert_eq!(df(&s), libc::IP_PMTUDISC_DONT);
        let gso = s.capabilities().gso;
        for (want, mode) in [
            (Some(true), libc::IP_PMTUDISC_DO),
            (None, libc::IP_PMTUDISC_WANT),
            (Some(false), libc::IP_PMTUDISC_DONT),
        ] {
            s.set_policy(&UdpOptions {
                dont_fragment: want,
                ..opts.clone()
            })
            .unwrap();
            assert_eq!(df(&s), mode, "{want:?}");
        }
        for ip in [V4, V6] {
            let mut s = bind(ip, &UdpOptions::default());
            let (level, tx) = if ip.is_ipv6() {
                (libc::SOL_UDP, libc::UDP_NO_CHECK6_TX)
            } else {
                (libc::SOL_SOCKET, libc::SO_NO_CHECK)
            };
            assert_eq!(sockopt(&s, level, tx), 0);
            let zero = UdpOptions {
                zero_checksum_tx: true,
                zero_checksum_rx: true,
                ..UdpOptions::default()
            };
            s.set_policy(&zero).unwrap();
            assert_eq!(sockopt(&s, level, tx), 1, "{ip}");
            assert!(!s.capabilities().gso, "{ip}: no GSO without checksums");
            assert_eq!(s.capabilities().max_segments, 1);
            if ip.is_ipv6() {
                assert_eq!(sockopt(&s, libc::SOL_UDP, libc::UDP_NO_CHECK6_RX), 1);
            }
            s.set_policy(&UdpOptions::default()).unwrap();
            assert_eq!(sockopt(&s, level, tx), 0, "{ip}");
            assert_eq!(s.capabilities().gso, gso, "{ip}: GSO as at bind");
        }
    });
}
