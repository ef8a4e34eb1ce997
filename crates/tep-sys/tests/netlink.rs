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

use std::io::ErrorKind;
use std::net::IpAddr;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

use common::in_netns;
use tep_sys::netlink::{link_by_name, link_info, route_get, Route};

const MAC_A: [u8; 6] = [2, 0, 0, 0, 0, 0x0a];

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// Runs `body` on a thread in namespace `a`, with the pair built, if the
/// test can run; says loudly why not.
fn in_pair(test: &str, body: impl FnOnce(Pair) + Send + 'static) {
    if !tep_sys::netns::is_root() {
        eprintln!("SKIPPED {test}: needs root (CI runs it as root)");
        return;
    }
    for tool in ["ip", "ping"] {
        let found = Command::new(tool)
            .arg("-V")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok();
        if !found {
            eprintln!("SKIPPED {test}: `{tool}` is not installed (.ci/run installs it)");
            return;
        }
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
