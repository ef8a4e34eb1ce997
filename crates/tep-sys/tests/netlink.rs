//! The kernel's routes, links and neighbours over rtnetlink (root only).
//!
//! Each test runs on a thread moved into a private namespace `a` (see
//! `common::in_netns`: its netlink sockets and the `ip` and `ping` it
//! starts live there), joined by a veth pair to a named namespace `b`
//! (`ip netns exec`), which a guard deletes even when the test fails:
//!
//! ```text
//!   a: va 02:00:00:00:00:0a  192.0.2.1/24 2001:db8:1::1/64
//!   b: vb 02:00:00:00:00:0b  192.0.2.2/24 2001:db8:1::2/64
//! ```
//!
//! Every wait is bounded (five seconds).

mod common;

use std::collections::VecDeque;
use std::io::ErrorKind;
use std::net::IpAddr;
use std::os::fd::AsRawFd;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{deadline, in_netns, wait_readable};
use tep_sys::netlink::{
    link_by_name, link_info, manage, route_get, solicit, Event, NeighbourChange, Neighbours,
    NudState, Route,
};

const MAC_A: [u8; 6] = [2, 0, 0, 0, 0, 0x0a];
const MAC_B: [u8; 6] = [2, 0, 0, 0, 0, 0x0b];

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// Runs `body` on a thread in namespace `a`, with the pair built, if the
/// test can run; says loudly why not.
fn in_pair(test: &str, body: impl FnOnce(Pair) + Send + 'static) {
    if !tep_testing::root_with(test, &["ip", "ping"]) {
        return;
    }
    in_netns(|| body(Pair::new()));
}

/// Runs a command line (words split at spaces) and returns its output.
fn command(line: &str) -> Output {
    let words: Vec<&str> = line.split_whitespace().collect();
    Command::new(words[0])
        .args(&words[1..])
        .output()
        .unwrap_or_else(|e| panic!("{line}: {e}"))
}

/// Runs a command line that must succeed; returns its standard output.
fn run(line: &str) -> String {
    let out = command(line);
    assert!(
        out.status.success(),
        "`{line}` failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Writes a sysctl of the calling thread's namespace.
fn sysctl(path: &str, value: &str) {
    std::fs::write(format!("/proc/sys/net/{path}"), value)
        .unwrap_or_else(|e| panic!("sysctl {path}: {e}"));
}

static CASES: AtomicUsize = AtomicUsize::new(0);

/// Namespace `b` and the veth pair; dropping it deletes `b`, and with it
/// the pair (namespace `a` goes with the test's thread).
struct Pair {
    b: String,
    /// `va`'s index.
    va: u32,
}

impl Pair {
    /// Builds the pair; call on the thread `in_netns` moved into `a`.
    fn new() -> Pair {
        let b = format!(
            "tepnl{}x{}",
            std::process::id(),
            CASES.fetch_add(1, Ordering::Relaxed)
        );
        run(&format!("ip netns add {b}"));
        // From here on the guard deletes `b`, also if the rest fails.
        let mut pair = Pair { b, va: 0 };
        // No duplicate address detection: addresses (and the IPv6
        // link-local routes) exist at once, so no route appears later on
        // its own while a test waits for one it made.
        sysctl("ipv6/conf/default/accept_dad", "0");
        let status = Command::new("ip")
            .args(["netns", "exec", &pair.b, "sh", "-c"])
            .arg("echo 0 > /proc/sys/net/ipv6/conf/default/accept_dad")
            .status();
        assert!(
            status.is_ok_and(|s| s.success()),
            "accept_dad in {}",
            pair.b
        );
        pair.exec("ip link set lo up");
        run(&format!(
            "ip link add va address 02:00:00:00:00:0a type veth \
             peer name vb address 02:00:00:00:00:0b netns {}",
            pair.b
        ));
        // ARP may replace an entry updated less than `locktime` ago (1 s
        // by default): the MAC-change test relearns right after a ping.
        sysctl("ipv4/neigh/va/locktime", "0");
        run("ip addr add 192.0.2.1/24 dev va");
        run("ip addr add 2001:db8:1::1/64 dev va nodad");
        pair.exec("ip addr add 192.0.2.2/24 dev vb");
        pair.exec("ip addr add 2001:db8:1::2/64 dev vb nodad");
        run("ip link set va up");
        pair.exec("ip link set vb up");
        pair.va = link_by_name("va").unwrap().index;
        pair
    }

    /// Runs a command line in namespace `b`; it must succeed.
    fn exec(&self, line: &str) -> String {
        run(&format!("ip netns exec {} {line}", self.b))
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.b]).status();
    }
}

/// Pings from `a` (every 200 ms, for up to three seconds) until one echo
/// is answered; whether one was.
fn ping(dst: &str) -> bool {
    command(&format!("ping -c1 -i0.2 -w3 -n {dst}"))
        .status
        .success()
}

/// A [`Neighbours`] whose events are read one at a time, so that a wait
/// for one event keeps those that came after it in the same call.
struct Watch {
    n: Neighbours,
    queue: VecDeque<Event>,
}

impl Watch {
    fn new() -> Watch {
        Watch {
            n: Neighbours::new().unwrap(),
            queue: VecDeque::new(),
        }
    }

    /// The next event, or None at `end`.
    fn next(&mut self, end: Instant) -> Option<Event> {
        loop {
            if let Some(e) = self.queue.pop_front() {
                return Some(e);
            }
            let mut out = Vec::new();
            self.n.poll_events(&mut out).unwrap();
            self.queue.extend(out);
            if self.queue.is_empty() && wait_readable(&[self.n.as_raw_fd()], end).is_none() {
                return None;
            }
        }
    }

    /// Reads events until one satisfies `wanted`, for at most five
    /// seconds; returns it and the events before it.
    fn wait_for(&mut self, what: &str, wanted: impl Fn(&Event) -> bool) -> (Event, Vec<Event>) {
        let end = deadline(5000);
        let mut before = Vec::new();
        loop {
            match self.next(end) {
                Some(e) if wanted(&e) => return (e, before),
                Some(e) => before.push(e),
                None => panic!("no {what} within 5 s; saw {before:?}"),
            }
        }
    }

    /// Reads events until none comes for 200 ms (the setup's own
    /// notifications), so that a test then sees the events of what it does.
    fn settle(&mut self) -> Vec<Event> {
        let mut all = Vec::new();
        while let Some(e) = self.next(deadline(200)) {
            all.push(e);
        }
        all
    }
}

impl std::ops::Deref for Watch {
    type Target = Neighbours;

    fn deref(&self) -> &Neighbours {
        &self.n
    }
}

/// A neighbour event of `ip` on `ifindex` with change `change`.
fn neighbour_event(ifindex: u32, ip: IpAddr, change: NeighbourChange) -> impl Fn(&Event) -> bool {
    move |e| {
        matches!(*e, Event::Neighbour { ifindex: i, ip: a, change: c, .. }
            if i == ifindex && a == ip && c == change)
    }
}

#[test]
fn route_get_on_link_behind_a_gateway_and_unreachable() {
    in_pair(
        "route_get_on_link_behind_a_gateway_and_unreachable",
        |pair| {
            run("ip route add 198.51.100.0/24 via 192.0.2.2");
            run("ip route add 203.0.113.0/24 via 192.0.2.2 mtu lock 1400");
            run("ip -6 route add 2001:db8:99::/64 via 2001:db8:1::2");
            let route = |gateway: Option<&str>, src: &str, mtu: Option<u32>| Route {
                oif: pair.va,
                gateway: gateway.map(ip),
                prefsrc: Some(ip(src)),
                mtu,
            };
            let get = |dst: &str| route_get(ip(dst)).unwrap();
            // On-link: the destination is its own next hop.
            assert_eq!(get("192.0.2.2"), route(None, "192.0.2.1", None));
            assert_eq!(get("192.0.2.2").next_hop(ip("192.0.2.2")), ip("192.0.2.2"));
            assert_eq!(get("2001:db8:1::2"), route(None, "2001:db8:1::1", None));
            // Behind a gateway.
            let via = get("198.51.100.7");
            assert_eq!(via, route(Some("192.0.2.2"), "192.0.2.1", None));
            assert_eq!(via.next_hop(ip("198.51.100.7")), ip("192.0.2.2"));
            assert_eq!(
                get("2001:db8:99::7"),
                route(Some("2001:db8:1::2"), "2001:db8:1::1", None)
            );
            // A route's MTU.
            assert_eq!(
                get("203.0.113.9"),
                route(Some("192.0.2.2"), "192.0.2.1", Some(1400))
            );
            // No route: the kernel's own error.
            for dst in ["10.99.0.1", "2001:db8:77::1"] {
                let e = route_get(ip(dst)).unwrap_err();
                assert_eq!(e.kind(), ErrorKind::NetworkUnreachable, "{dst}: {e}");
            }
            // A local address has no next hop to write a frame to.
            let e = route_get(ip("192.0.2.1")).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
            // A route change shows at once.
            run("ip route replace 198.51.100.0/24 dev va");
            assert_eq!(get("198.51.100.7"), route(None, "192.0.2.1", None));
        },
    );
}

#[test]
fn link_info_by_index_and_by_name() {
    in_pair("link_info_by_index_and_by_name", |pair| {
        run("ip link set va mtu 1400");
        let link = link_info(pair.va).unwrap();
        assert_eq!(link.index, pair.va);
        assert_eq!(link.name, "va");
        assert_eq!(link.mac, Some(MAC_A));
        assert_eq!(link.mtu, 1400);
        assert!(link.up);
        assert_eq!(link_by_name("va").unwrap(), link);
        let lo = link_by_name("lo").unwrap();
        assert_eq!((lo.index, lo.mtu, lo.up), (1, 65536, true));
        run("ip link set va down");
        assert!(!link_info(pair.va).unwrap().up);
        let e = link_by_name("nosuch0").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
        let e = link_info(9999).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
    });
}

#[test]
fn neighbour_dump_sees_permanent_and_learnt_entries() {
    in_pair("neighbour_dump_sees_permanent_and_learnt_entries", |pair| {
        let perm_mac = [2, 0, 0, 0, 0, 0x50];
        for dst in ["192.0.2.50", "2001:db8:1::50"] {
            run(&format!(
                "ip neigh add {dst} lladdr 02:00:00:00:00:50 nud permanent dev va"
            ));
        }
        assert!(ping("192.0.2.2"));
        assert!(ping("2001:db8:1::2"));
        let mut n = Watch::new();
        for dst in [ip("192.0.2.50"), ip("2001:db8:1::50")] {
            assert_eq!(n.resolve(pair.va, dst), Some(perm_mac), "{dst}");
            assert_eq!(n.get(pair.va, dst).unwrap().state, NudState::Permanent);
        }
        for dst in [ip("192.0.2.2"), ip("2001:db8:1::2")] {
            assert_eq!(n.resolve(pair.va, dst), Some(MAC_B), "{dst}");
            let state = n.get(pair.va, dst).unwrap().state;
            assert!(state.usable(), "{dst}: {state:?}");
        }
        // Not on this interface, or not there at all.
        assert_eq!(n.resolve(1, ip("192.0.2.2")), None);
        assert_eq!(n.resolve(pair.va, ip("192.0.2.3")), None);

        // Nothing queued: poll_events returns at once.
        n.settle();
        for _ in 0..3 {
            let started = Instant::now();
            let mut out = Vec::new();
            n.n.poll_events(&mut out).unwrap();
            let took = started.elapsed();
            assert!(
                took < Duration::from_millis(50),
                "poll_events took {took:?}"
            );
            assert!(out.is_empty(), "{out:?}");
        }
    });
}

#[test]
fn neighbour_notifications_follow_mac_changes_failures_and_deletes() {
    in_pair(
        "neighbour_notifications_follow_mac_changes_failures_and_deletes",
        |pair| {
            let (b4, b6) = (ip("192.0.2.2"), ip("2001:db8:1::2"));
            assert!(ping("192.0.2.2"));
            assert!(ping("2001:db8:1::2"));
            let mut n = Watch::new();
            assert_eq!(n.resolve(pair.va, b4), Some(MAC_B));
            n.settle();

            // The peer's MAC changes; `b` (whose own entries the change
            // flushed) pings `a`, whose kernel learns the new MAC from the
            // ARP request.
            let mac_c = [2, 0, 0, 0, 0, 0x0c];
            pair.exec("ip link set vb address 02:00:00:00:00:0c");
            pair.exec("ping -c1 -i0.2 -w3 -n 192.0.2.1");
            let changed = NeighbourChange::MacChanged { old: MAC_B };
            let (e, _) = n.wait_for("relearnt MAC", neighbour_event(pair.va, b4, changed));
            assert!(matches!(e, Event::Neighbour { mac: Some(m), .. } if m == mac_c));
            // From the copy, without asking the kernel.
            assert_eq!(n.resolve(pair.va, b4), Some(mac_c));

            // Replaced by hand, both families.
            for (dst, old) in [(b4, mac_c), (b6, MAC_B)] {
                run(&format!(
                    "ip neigh replace {dst} lladdr 02:00:00:00:00:99 nud reachable dev va"
                ));
                let changed = NeighbourChange::MacChanged { old };
                n.wait_for("replaced MAC", neighbour_event(pair.va, dst, changed));
                assert_eq!(n.resolve(pair.va, dst), Some([2, 0, 0, 0, 0, 0x99]));
            }

            // Deleted: it stops resolving.
            run("ip neigh del 192.0.2.2 dev va");
            let removed = neighbour_event(pair.va, b4, NeighbourChange::Removed);
            n.wait_for("deleted neighbour", removed);
            assert_eq!(n.resolve(pair.va, b4), None);
            assert_eq!(n.get(pair.va, b4), None);

            // Nobody answers: incomplete, then failed (three solicitations
            // 100 ms apart).
            sysctl("ipv4/neigh/va/retrans_time_ms", "100");
            let nobody = ip("192.0.2.77");
            assert!(!command("ping -c1 -W1 -n 192.0.2.77").status.success());
            let failed = neighbour_event(pair.va, nobody, NeighbourChange::Failed);
            n.wait_for("failed resolution", failed);
            assert_eq!(n.resolve(pair.va, nobody), None);
            assert_eq!(n.get(pair.va, nobody).unwrap().state, NudState::Failed);
        },
    );
}

#[test]
fn route_and_link_changes_are_events() {
    in_pair("route_and_link_changes_are_events", |pair| {
        let va = pair.va;
        assert!(ping("192.0.2.2"));
        let mut n = Watch::new();
        n.settle();
        let is_route = |e: &Event| *e == Event::Route;
        for line in [
            "ip route add 198.51.100.0/24 via 192.0.2.2",
            "ip -6 route add 2001:db8:99::/64 via 2001:db8:1::2",
            "ip route del 198.51.100.0/24",
        ] {
            run(line);
            n.wait_for(line, is_route);
            n.settle();
        }
        // Many changes, one event per call.
        for i in 0..20 {
            run(&format!("ip route add 198.51.{i}.0/24 via 192.0.2.2"));
        }
        let events = n.settle();
        let routes = events.iter().filter(|e| is_route(e)).count();
        assert!(
            (1..20).contains(&routes),
            "{routes} route events: {events:?}"
        );

        // Addresses, both families, removed and added back.
        for (line, ip4or6, added) in [
            ("ip addr add 198.51.100.9/32 dev va", "198.51.100.9", true),
            ("ip addr del 198.51.100.9/32 dev va", "198.51.100.9", false),
            (
                "ip addr add 2001:db8:7::9/128 dev va nodad",
                "2001:db8:7::9",
                true,
            ),
            (
                "ip addr del 2001:db8:7::9/128 dev va",
                "2001:db8:7::9",
                false,
            ),
        ] {
            run(line);
            let want = Event::Address {
                ifindex: va,
                ip: ip(ip4or6),
                added,
            };
            n.wait_for(line, |e| *e == want);
            n.settle();
        }

        // MTU and MAC.
        let link = |mac: [u8; 6], mtu: u32| Event::Link {
            ifindex: va,
            mac: Some(mac),
            mtu,
            up: true,
        };
        run("ip link set va mtu 1400");
        n.wait_for("MTU change", |e| *e == link(MAC_A, 1400));
        run("ip link set va address 02:00:00:00:00:1a");
        n.wait_for("MAC change", |e| *e == link([2, 0, 0, 0, 0, 0x1a], 1400));

        // The kernel flushed va's neighbours with its MAC change; relearn.
        let b4 = ip("192.0.2.2");
        assert!(ping("192.0.2.2"));
        n.wait_for(
            "relearnt",
            neighbour_event(va, b4, NeighbourChange::Resolved),
        );

        // Down: the link's neighbours go with it.
        run("ip link set va down");
        let (_, mut seen) = n.wait_for(
            "link down",
            |e| matches!(*e, Event::Link { ifindex, up: false, .. } if ifindex == va),
        );
        // The kernel reports the link first, then the flushed neighbours.
        seen.extend(n.settle());
        let flushed = neighbour_event(va, b4, NeighbourChange::Removed);
        assert!(seen.iter().any(flushed), "{seen:?}");
        assert_eq!(n.resolve(va, b4), None);

        // A new link, then deleted.
        run("ip link add x0 type veth peer name x1");
        let x0 = link_by_name("x0").unwrap().index;
        n.wait_for(
            "new link",
            |e| matches!(*e, Event::Link { ifindex, up: false, .. } if ifindex == x0),
        );
        run("ip link del x0");
        n.wait_for("deleted link", |e| *e == Event::LinkRemoved { ifindex: x0 });
    });
}

#[test]
fn a_queue_overflow_resyncs_from_a_dump() {
    in_pair("a_queue_overflow_resyncs_from_a_dump", |pair| {
        let mut n = Watch::new();
        n.settle();
        // More route notifications than the socket's 4 MiB queue holds,
        // then a neighbour whose notification is lost with them.
        let batch = std::env::temp_dir().join(format!("tepnl{}-batch", pair.b));
        let mut lines = String::new();
        for i in 0..40_000u32 {
            let (x, y) = (i >> 8, i & 0xff);
            lines += &format!("route add 10.{x}.{y}.0/24 via 192.0.2.2\n");
        }
        lines += "neigh add 192.0.2.60 lladdr 02:00:00:00:00:60 nud permanent dev va\n";
        std::fs::write(&batch, lines).unwrap();
        let out = command(&format!("ip -batch {}", batch.display()));
        let _ = std::fs::remove_file(&batch);
        assert!(out.status.success(), "{out:?}");
        let (_, before) = n.wait_for("resync", |e| *e == Event::Resync);
        let learnt = neighbour_event(pair.va, ip("192.0.2.60"), NeighbourChange::Resolved);
        assert!(before.iter().any(learnt), "{before:?}");
        assert_eq!(
            n.resolve(pair.va, ip("192.0.2.60")),
            Some([2, 0, 0, 0, 0, 0x60])
        );
    });
}

#[test]
fn solicit_and_manage_resolve_without_a_packet() {
    in_pair("solicit_and_manage_resolve_without_a_packet", |pair| {
        let mut n = Watch::new();
        let (b4, b6) = (ip("192.0.2.2"), ip("2001:db8:1::2"));
        assert_eq!(n.resolve(pair.va, b4), None);

        solicit(pair.va, b4).unwrap();
        let resolved = neighbour_event(pair.va, b4, NeighbourChange::Resolved);
        let (e, _) = n.wait_for("solicited neighbour", resolved);
        assert!(
            matches!(
                e,
                Event::Neighbour {
                    mac: Some(MAC_B),
                    ..
                }
            ),
            "{e:?}"
        );
        assert_eq!(n.resolve(pair.va, b4), Some(MAC_B));

        manage(pair.va, b6).unwrap();
        let resolved = neighbour_event(pair.va, b6, NeighbourChange::Resolved);
        n.wait_for("managed neighbour", resolved);
        assert_eq!(n.resolve(pair.va, b6), Some(MAC_B));
        let shown = run("ip -6 neigh show dev va");
        assert!(shown.contains("managed"), "{shown}");

        // Managing an entry that resolves keeps it resolved: no event.
        n.settle();
        manage(pair.va, b4).unwrap();
        let events = n.settle();
        let about_b4 = |e: &Event| matches!(*e, Event::Neighbour { ip, .. } if ip == b4);
        assert!(!events.iter().any(about_b4), "{events:?}");
        assert_eq!(n.resolve(pair.va, b4), Some(MAC_B));

        // Permanent entries stay as they are.
        let perm = ip("192.0.2.50");
        run("ip neigh add 192.0.2.50 lladdr 02:00:00:00:00:50 nud permanent dev va");
        n.settle();
        solicit(pair.va, perm).unwrap();
        manage(pair.va, perm).unwrap();
        let events = n.settle();
        assert!(events.is_empty(), "{events:?}");
        assert_eq!(n.get(pair.va, perm).unwrap().state, NudState::Permanent);
        let shown = run("ip neigh show 192.0.2.50 dev va");
        assert!(
            shown.contains("lladdr 02:00:00:00:00:50 PERMANENT"),
            "{shown}"
        );

        // Errors are the kernel's.
        assert!(solicit(9999, b4).is_err());
    });
}
