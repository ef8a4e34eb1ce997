//! The kernel side of an EVPN VTEP (root only): bridge and VXLAN devices
//! made over rtnetlink and checked with `ip -d link`, forwarding entries
//! written with `bridge fdb` and read back through [`FdbWatch`], static
//! entries written by tep and checked with `bridge fdb show`.
//!
//! Each test runs on a thread moved into a private namespace
//! (`common::in_netns`), which goes with the thread, and with it every
//! device; the `ip` and `bridge` it starts live there too. Every wait is
//! bounded (five seconds).

mod common;

use std::collections::VecDeque;
use std::io::ErrorKind;
use std::net::IpAddr;
use std::process::Command;

use common::{deadline, in_netns, wait_readable};
use tep_sys::netlink::{
    bridge_create, bridge_fdb_add, bridge_fdb_add_remote, bridge_fdb_del, link_by_name,
    link_delete, link_set_master, link_set_up, vxlan_create, vxlan_info, FdbEntry, FdbEvent,
    FdbWatch, VxlanDevice, VxlanInfo,
};
use tep_sys::{DeviceKind, Offloads, Tun, TunOptions};

const NUD_REACHABLE: u16 = 0x02;
const NUD_NOARP: u16 = 0x40;
const NUD_PERMANENT: u16 = 0x80;
const NTF_SELF: u8 = 0x02;
const NTF_EXT_LEARNED: u8 = 0x10;
const LOCAL_MAC: [u8; 6] = [2, 0, 0, 0, 0, 0xaa];
const REMOTE_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// Runs `body` in a private namespace if the test can run; says loudly
/// why not.
fn in_lab(test: &str, body: impl FnOnce() + Send + 'static) {
    if !tep_testing::root_with(test, &["ip", "bridge"]) {
        return;
    }
    in_netns(body);
}

/// Runs a command line (words split at spaces) that must succeed; returns
/// its standard output.
fn run(line: &str) -> String {
    let words: Vec<&str> = line.split_whitespace().collect();
    let out = Command::new(words[0])
        .args(&words[1..])
        .output()
        .unwrap_or_else(|e| panic!("{line}: {e}"));
    assert!(
        out.status.success(),
        "`{line}` failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The devices of one tep network, as the daemon will make them.
struct Vtep {
    br: u32,
    vx: u32,
    tap: Tun,
}

impl Vtep {
    fn new(n: u32, local: &str) -> Vtep {
        let br = bridge_create(&format!("br{n}")).unwrap();
        let vx = vxlan_create(&VxlanDevice {
            name: &format!("vx{n}"),
            vni: n,
            local: ip(local),
            port: 4790,
        })
        .unwrap();
        let tap = Tun::open(&TunOptions {
            name: format!("tap{n}"),
            kind: DeviceKind::Tap,
            queues: 1,
            vnet_hdr: false,
            vnet_hdr_tunnel: false,
            offloads: Offloads::none(),
        })
        .unwrap();
        for port in [vx, tap.ifindex()] {
            link_set_master(port, br).unwrap();
        }
        for dev in [br, vx, tap.ifindex()] {
            link_set_up(dev, true).unwrap();
        }
        Vtep { br, vx, tap }
    }
}

#[test]
fn evpn_devices_are_what_was_asked() {
    in_lab("evpn_devices_are_what_was_asked", || {
        let v = Vtep::new(100, "192.0.2.1");
        let shown = run("ip -d link show vx100");
        for want in [
            "vxlan id 100 ",
            "local 192.0.2.1 ",
            "dstport 4790 ",
            "nolearning",
            "master br100",
            ",UP",
        ] {
            assert!(shown.contains(want), "{want:?} not in {shown}");
        }
        assert!(run("ip -d link show br100").contains("bridge forward_delay"));
        assert!(run("ip link show tap100").contains("master br100"));
        let info = VxlanInfo {
            vni: 100,
            local: Some(ip("192.0.2.1")),
            port: 4790,
            master: Some(v.br),
            up: true,
        };
        assert_eq!(vxlan_info(v.vx).unwrap(), Some(info));
        assert_eq!(vxlan_info(v.br).unwrap(), None);
        assert_eq!(vxlan_info(v.tap.ifindex()).unwrap(), None);

        link_set_up(v.vx, false).unwrap();
        link_set_master(v.vx, 0).unwrap();
        let down = vxlan_info(v.vx).unwrap().unwrap();
        assert_eq!((down.up, down.master), (false, None));
        assert!(!run("ip link show vx100").contains(",UP"));

        let six = vxlan_create(&VxlanDevice {
            name: "vx6",
            vni: 0xff_ffff,
            local: ip("2001:db8::1"),
            port: 4790,
        })
        .unwrap();
        let info6 = vxlan_info(six).unwrap().unwrap();
        assert_eq!(
            (info6.vni, info6.local, info6.port),
            (0xff_ffff, Some(ip("2001:db8::1")), 4790)
        );
        assert!(run("ip -d link show vx6").contains("local 2001:db8::1 "));

        // Errors: a name in use, a name too long.
        let e = bridge_create("br100").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::AlreadyExists, "{e}");
        let e = vxlan_create(&VxlanDevice {
            name: "tap100",
            vni: 7,
            local: ip("192.0.2.1"),
            port: 4791,
        })
        .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::AlreadyExists, "{e}");
        let e = bridge_create("br_sixteen_bytes").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
        assert!(e.to_string().contains("br_sixteen_bytes"), "{e}");
        assert!(link_by_name("br_sixteen_byte").is_err(), "nothing made");

        for dev in [v.vx, six, v.br] {
            link_delete(dev).unwrap();
        }
        for name in ["vx100", "vx6", "br100"] {
            let e = link_by_name(name).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::NotFound, "{name}: {e}");
        }
        assert_eq!(vxlan_info(v.vx).unwrap_err().kind(), ErrorKind::NotFound);
        assert_eq!(link_delete(v.vx).unwrap_err().kind(), ErrorKind::NotFound);
        assert_eq!(
            link_set_up(v.vx, true).unwrap_err().kind(),
            ErrorKind::NotFound
        );
    });
}

/// An [`FdbWatch`] whose events are read one at a time, so that a wait
/// for one keeps those that came after it in the same call.
struct Watch {
    w: FdbWatch,
    queue: VecDeque<FdbEvent>,
}

impl Watch {
    /// Reads events until one satisfies `wanted`, for at most five
    /// seconds.
    fn wait_for(&mut self, what: &str, wanted: impl Fn(&FdbEvent) -> bool) -> FdbEvent {
        let end = deadline(5000);
        let mut seen = Vec::new();
        loop {
            while let Some(e) = self.queue.pop_front() {
                if wanted(&e) {
                    return e;
                }
                seen.push(e);
            }
            let mut out = Vec::new();
            self.w.poll(&mut out).unwrap();
            self.queue.extend(out);
            if self.queue.is_empty() && wait_readable(&[self.w.fd()], end).is_none() {
                panic!("no event {what} in five seconds; saw {seen:?}");
            }
        }
    }
}

fn new(ifindex: u32, mac: [u8; 6]) -> impl Fn(&FdbEvent) -> bool {
    move |e| matches!(e, FdbEvent::New(e) if e.ifindex == ifindex && e.mac == mac)
}

fn del(ifindex: u32, mac: [u8; 6]) -> impl Fn(&FdbEvent) -> bool {
    move |e| matches!(e, FdbEvent::Del(e) if e.ifindex == ifindex && e.mac == mac)
}

fn entry(e: FdbEvent) -> FdbEntry {
    match e {
        FdbEvent::New(e) | FdbEvent::Del(e) => e,
    }
}

#[test]
fn remote_entries_written_with_bridge_are_dumped_and_followed() {
    in_lab(
        "remote_entries_written_with_bridge_are_dumped_and_followed",
        || {
            let v = Vtep::new(100, "192.0.2.1");
            let v6 = Vtep::new(200, "2001:db8::1");
            let mut w = Watch {
                w: FdbWatch::new().unwrap(),
                queue: VecDeque::new(),
            };
            // Between subscribing and dumping: in both.
            run("bridge fdb add 00:00:00:00:00:00 dev vx100 dst 192.0.2.2 self permanent");
            let mut dump = Vec::new();
            w.w.dump(&mut dump).unwrap();
            let flood = FdbEntry {
                ifindex: v.vx,
                mac: [0; 6],
                dst: Some(ip("192.0.2.2")),
                state: NUD_NOARP | NUD_PERMANENT,
                flags: NTF_SELF,
                vni: None,
                port: None,
                master: None,
            };
            assert!(dump.contains(&flood), "{flood:?} not in {dump:?}");
            assert_eq!(entry(w.wait_for("flood", new(v.vx, [0; 6]))), flood);
            // The bridge's own entries are dumped too (the TAP's MAC).
            assert!(dump.iter().any(|e| e.ifindex == v.tap.ifindex()
                && e.master == Some(v.br)
                && e.state & NUD_PERMANENT != 0));

            run("bridge fdb add 02:00:00:00:00:01 dev vx100 dst 192.0.2.3 self extern_learn");
            let remote = entry(w.wait_for("remote MAC", new(v.vx, REMOTE_MAC)));
            assert_eq!(remote.dst, Some(ip("192.0.2.3")));
            assert_eq!(remote.flags, NTF_SELF | NTF_EXT_LEARNED);
            let show = run("bridge fdb show dev vx100");
            assert!(
                show.contains("02:00:00:00:00:01 dst 192.0.2.3 self extern_learn permanent"),
                "{show}"
            );
            assert_eq!(remote.state, NUD_NOARP | NUD_PERMANENT);

            // A VNI and port other than the device's own come with the entry.
            run("bridge fdb append 00:00:00:00:00:00 dev vx100 dst 192.0.2.4 vni 300 port 4789 self permanent");
            let other = entry(w.wait_for(
                "flood with vni",
                |e| matches!(e, FdbEvent::New(e) if e.dst == Some(ip("192.0.2.4"))),
            ));
            assert_eq!((other.vni, other.port), (Some(300), Some(4789)));

            run("bridge fdb add 00:00:00:00:00:00 dev vx200 dst 2001:db8::2 self permanent");
            let six = entry(w.wait_for("IPv6 flood", new(v6.vx, [0; 6])));
            assert_eq!(six.dst, Some(ip("2001:db8::2")));

            run("bridge fdb del 02:00:00:00:00:01 dev vx100 self");
            let gone = entry(w.wait_for("remote MAC deleted", del(v.vx, REMOTE_MAC)));
            assert_eq!(gone.dst, Some(ip("192.0.2.3")));

            // ARP entries share the group: skipped and counted.
            let before = w.w.skipped();
            run("ip neigh add 192.0.2.9 lladdr 02:00:00:00:00:09 dev br100");
            run("bridge fdb add 02:00:00:00:00:02 dev vx100 dst 192.0.2.3 self extern_learn");
            w.wait_for("after the ARP entry", new(v.vx, [2, 0, 0, 0, 0, 2]));
            assert!(w.w.skipped() > before, "the ARP entry was not counted");
            assert_eq!(w.w.malformed(), 0);
        },
    );
}

/// What zebra writes, written over netlink: the notifications are those
/// of docs/evpn.md's table, a second write of a MAC moves it, a second
/// flood entry is added beside the first.
#[test]
fn remote_entries_written_over_netlink_are_zebras() {
    in_lab("remote_entries_written_over_netlink_are_zebras", || {
        let v = Vtep::new(100, "192.0.2.1");
        let mut w = Watch {
            w: FdbWatch::new().unwrap(),
            queue: VecDeque::new(),
        };
        bridge_fdb_add_remote(v.vx, [0; 6], ip("192.0.2.2")).unwrap();
        bridge_fdb_add_remote(v.vx, [0; 6], ip("192.0.2.3")).unwrap();
        let flood = entry(w.wait_for("flood", new(v.vx, [0; 6])));
        assert_eq!(
            (flood.state, flood.flags, flood.dst),
            (NUD_NOARP | NUD_PERMANENT, NTF_SELF, Some(ip("192.0.2.2")))
        );
        let second = entry(w.wait_for("second flood", new(v.vx, [0; 6])));
        assert_eq!(second.dst, Some(ip("192.0.2.3")));

        bridge_fdb_add_remote(v.vx, REMOTE_MAC, ip("192.0.2.2")).unwrap();
        let remote = entry(w.wait_for("remote MAC", new(v.vx, REMOTE_MAC)));
        assert_eq!(
            (remote.state, remote.flags, remote.dst),
            (
                NUD_REACHABLE,
                NTF_SELF | NTF_EXT_LEARNED,
                Some(ip("192.0.2.2"))
            )
        );
        bridge_fdb_add_remote(v.vx, REMOTE_MAC, ip("192.0.2.3")).unwrap();
        let moved = entry(w.wait_for("moved MAC", new(v.vx, REMOTE_MAC)));
        assert_eq!(moved.dst, Some(ip("192.0.2.3")));
        let show = run("bridge fdb show dev vx100");
        assert_eq!(show.matches("00:00:00:00:00:00 dst").count(), 2, "{show}");
        assert_eq!(show.matches("02:00:00:00:00:01 dst").count(), 1, "{show}");
        assert!(
            show.contains("02:00:00:00:00:01 dst 192.0.2.3 self extern_learn"),
            "{show}"
        );
        let e = bridge_fdb_add_remote(9999, REMOTE_MAC, ip("192.0.2.3")).unwrap_err();
        assert!(e.to_string().contains("dev 9999"), "{e}");
    });
}

#[test]
fn local_macs_are_static_bridge_entries() {
    in_lab("local_macs_are_static_bridge_entries", || {
        let v = Vtep::new(100, "192.0.2.1");
        let tap = v.tap.ifindex();
        let mut w = Watch {
            w: FdbWatch::new().unwrap(),
            queue: VecDeque::new(),
        };
        let line = "02:00:00:00:00:aa dev tap100 master br100 static";
        bridge_fdb_add(tap, LOCAL_MAC).unwrap();
        let show = run("bridge fdb show");
        assert!(show.contains(line), "{show}");
        let added = entry(w.wait_for("static entry", new(tap, LOCAL_MAC)));
        assert_eq!(
            (added.state, added.master, added.dst),
            (NUD_NOARP, Some(v.br), None)
        );
        // Idempotent, and one entry however often added.
        bridge_fdb_add(tap, LOCAL_MAC).unwrap();
        let show = run("bridge fdb show dev tap100");
        assert_eq!(show.matches("02:00:00:00:00:aa").count(), 1, "{show}");

        assert!(bridge_fdb_del(tap, LOCAL_MAC).unwrap());
        w.wait_for("static entry deleted", del(tap, LOCAL_MAC));
        assert!(!run("bridge fdb show dev tap100").contains("02:00:00:00:00:aa"));
        assert!(!bridge_fdb_del(tap, LOCAL_MAC).unwrap(), "already gone");

        // Written by tep, removed by the tool (the lead's daemon must
        // notice an administrator doing this).
        bridge_fdb_add(tap, LOCAL_MAC).unwrap();
        w.wait_for("static entry again", new(tap, LOCAL_MAC));
        run("bridge fdb del 02:00:00:00:00:aa dev tap100 master");
        w.wait_for("static entry deleted by bridge", del(tap, LOCAL_MAC));

        // A port that is not a bridge's: the kernel's error, with context.
        link_set_master(tap, 0).unwrap();
        let e = bridge_fdb_add(tap, LOCAL_MAC).unwrap_err();
        assert!(
            e.to_string().contains("bridge fdb add 02:00:00:00:00:aa"),
            "{e}"
        );
    });
}

#[test]
fn an_overrun_is_an_error_and_a_dump_recovers() {
    in_lab("an_overrun_is_an_error_and_a_dump_recovers", || {
        let v = Vtep::new(100, "192.0.2.1");
        let mut w = FdbWatch::new().unwrap();
        // More notifications than the watch's 4 MiB queue holds, unread.
        let batch = std::env::temp_dir().join(format!("tepfdb{}-batch", std::process::id()));
        let mut lines = String::new();
        for i in 0..30_000u32 {
            let [_, _, x, y] = i.to_be_bytes();
            lines += &format!(
                "fdb add 02:00:00:01:{x:02x}:{y:02x} dev vx100 dst 192.0.2.3 self extern_learn\n"
            );
        }
        std::fs::write(&batch, lines).unwrap();
        let out = Command::new("bridge")
            .arg("-batch")
            .arg(&batch)
            .output()
            .unwrap();
        let _ = std::fs::remove_file(&batch);
        assert!(out.status.success(), "{out:?}");

        let end = deadline(5000);
        let mut events = Vec::new();
        let overrun = loop {
            match w.poll(&mut events) {
                Err(e) => break e,
                Ok(()) => assert!(
                    wait_readable(&[w.fd()], end).is_some(),
                    "no overrun after {} events",
                    events.len()
                ),
            }
        };
        assert!(FdbWatch::is_overrun(&overrun), "{overrun}");
        assert!(events.len() < 30_000, "{}", events.len());
        let mut dump = Vec::new();
        w.dump(&mut dump).unwrap();
        let remote = dump
            .iter()
            .filter(|e| e.ifindex == v.vx && e.flags & NTF_EXT_LEARNED != 0)
            .count();
        assert_eq!(remote, 30_000);
    });
}
