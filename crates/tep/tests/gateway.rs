//! Gateway mode (`[gateway]`) in three network namespaces:
//!
//! ```text
//!  client ─c0──gi─ [gateway: tep over AF_XDP] ─gu──pu─ peer (tep in host mode, or the kernel's VXLAN)
//! ```
//!
//! Every kind × outer IPv4/IPv6 × zero/full carries pings both ways and a
//! TCP transfer whose digest is checked; the gateway's counters balance
//! (frames in + packets tep made = frames out + drops, and the steering
//! program's redirects = frames tep received + the AF_XDP rings' drops).
//! The kernel keeps the rest: ARP and ND, the gateway's own connections;
//! next hops follow the neighbour table; ICMP errors reach senders; no
//! XDP program outlives tep. Root only (CI is root); skipped loudly
//! otherwise.

use std::path::PathBuf;
use std::process::Output;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tep_testing::netns::{self, root_or_skip, spawn_daemon, Daemon, Lab, Namespaces};

static RIGS: AtomicUsize = AtomicUsize::new(0);

/// Three namespaces: `client —c0/gi— gateway —gu/pu— peer`.
struct Chain {
    client: String,
    gateway: String,
    peer: String,
    dir: PathBuf,
    /// Removes the namespaces on drop.
    _lab: Namespaces,
}

/// Underlay addresses: the gateway's `gu`, the peer's `pu`.
const GU4: &str = "192.0.2.1";
const PU4: &str = "192.0.2.2";
const GU6: &str = "2001:db8::1";
const PU6: &str = "2001:db8::2";

impl Lab for Chain {}

impl Chain {
    fn new() -> Chain {
        Chain::with_queues(1)
    }

    /// [`Chain::new`] with `queues` queues on every veth end.
    fn with_queues(queues: u32) -> Chain {
        let n = RIGS.fetch_add(1, Ordering::Relaxed);
        let tag = format!("tepg{}x{n}", std::process::id());
        let veths = [("c", "c0", "g", "gi"), ("g", "gu", "p", "pu")];
        let lab = Namespaces::new(&tag, &["c", "g", "p"])
            .and_then(|lab| {
                for (a, dev_a, b, dev_b) in veths {
                    lab.veth_queues(a, dev_a, b, dev_b, queues)?;
                }
                Ok(lab)
            })
            .unwrap_or_else(|e| panic!("three namespaces: {e}"));
        let c = Chain {
            client: lab.ns("c"),
            gateway: lab.ns("g"),
            peer: lab.ns("p"),
            dir: lab.dir.clone(),
            _lab: lab,
        };
        for (ns, dev, addrs) in [(&c.gateway, "gu", [GU4, GU6]), (&c.peer, "pu", [PU4, PU6])] {
            for (a, len) in addrs.iter().zip(["24", "64"]) {
                c.exec(
                    ns,
                    &[
                        "ip",
                        "addr",
                        "add",
                        &format!("{a}/{len}"),
                        "dev",
                        dev,
                        "nodad",
                    ],
                    true,
                );
            }
        }
        for (ns, dev) in [
            (&c.client, "c0"),
            (&c.gateway, "gi"),
            (&c.gateway, "gu"),
            (&c.peer, "pu"),
        ] {
            c.exec(ns, &["ip", "link", "set", dev, "up"], true);
        }
        // A NIC fills in the checksums it is asked to; a veth hands its
        // peer the frame with them still partial, which is what XDP sees:
        // the senders into the gateway compute their own.
        for (ns, dev) in [(&c.client, "c0"), (&c.peer, "pu")] {
            c.exec(ns, &["ethtool", "-K", dev, "tx", "off"], true);
        }
        c
    }

    fn socket(&self, ns: &str) -> String {
        self.dir.join(format!("{ns}.sock")).display().to_string()
    }

    fn daemon(&self, ns: &str, config: &str) -> Daemon {
        spawn_daemon(&self.dir, ns, config)
    }

    /// Whether an XDP program is attached to `dev` in `ns`.
    fn xdp_on(&self, ns: &str, dev: &str) -> bool {
        let out = self.exec(ns, &["ip", "-d", "link", "show", dev], true);
        String::from_utf8_lossy(&out.stdout).contains("prog/xdp")
    }
}

/// A tunnel between the gateway and the peer.
#[derive(Clone, Copy, Debug)]
struct Case {
    kind: &'static str,
    v6: bool,
    mode: &'static str,
}

impl Case {
    /// VXLAN and Geneve carry frames: the client and the peer share a
    /// subnet across the tunnel, the gateway bridges.
    fn ethernet(&self) -> bool {
        matches!(self.kind, "vxlan" | "geneve")
    }

    /// The inner family: FOU-SIT carries IPv6 only, FOU-IPIP IPv4 only;
    /// the rest carry both (IPv4 used here).
    fn inner6(&self) -> bool {
        self.kind == "fou-sit"
    }

    /// The peer's inner address, which the client reaches.
    fn far(&self) -> &'static str {
        match (self.ethernet(), self.inner6()) {
            (true, _) => "10.9.0.1",
            (false, true) => "fd09::1",
            (false, false) => "10.9.0.1",
        }
    }

    /// The client's address.
    fn near(&self) -> &'static str {
        match (self.ethernet(), self.inner6()) {
            (true, _) => "10.9.0.2",
            (false, true) => "fd01::2",
            (false, false) => "10.1.0.2",
        }
    }

    fn label(&self) -> String {
        format!(
            "{} {} over {}",
            self.kind,
            self.mode,
            if self.v6 { "IPv6" } else { "IPv4" }
        )
    }

    fn addrs(&self, gateway: bool) -> (&'static str, &'static str) {
        match (self.v6, gateway) {
            (false, true) => (GU4, PU4),
            (false, false) => (PU4, GU4),
            (true, true) => (GU6, PU6),
            (true, false) => (PU6, GU6),
        }
    }

    /// The `[[tunnel]]` of one side; `routes` the prefixes it routes in.
    fn tunnel(&self, gateway: bool, routes: &[&str]) -> String {
        let (local, remote) = self.addrs(gateway);
        let id = match self.kind {
            "vxlan" | "geneve" => "vni = 42".to_string(),
            "gtpu" => {
                let (tx, rx) = if gateway { (200, 100) } else { (100, 200) };
                format!("teid = {tx}\nlocal_teid = {rx}\nqfi = 9")
            }
            "gre" | "fou-gre" => "key = 7".to_string(),
            _ => String::new(),
        };
        let routes = if self.ethernet() {
            String::new()
        } else {
            // FOU-IPIP carries IPv4 only, FOU-SIT IPv6 only.
            let carried = |r: &&&str| match self.kind {
                "fou-ipip" => !r.contains(':'),
                "fou-sit" => r.contains(':'),
                _ => true,
            };
            let list: Vec<String> = routes
                .iter()
                .filter(carried)
                .map(|r| format!("\"{r}\""))
                .collect();
            format!("inner_prefixes = [{}]", list.join(", "))
        };
        let zero = if self.v6 && self.mode == "zero" {
            "zero_checksum_tx = true\nzero_checksum_rx = true"
        } else {
            ""
        };
        format!(
            "[[tunnel]]\nname = \"t\"\nkind = \"{}\"\nlocal = \"{local}\"\nremote = \"{remote}\"\nchecksum = \"{}\"\n{id}\n{routes}\n{zero}\n",
            self.kind, self.mode
        )
    }

    fn gateway_config(&self, chain: &Chain) -> String {
        format!(
            "[gateway]\ninner = \"gi\"\nunderlay = \"gu\"\ncontrol = \"{}\"\n\n{}",
            chain.socket(&chain.gateway),
            self.tunnel(true, &["10.9.0.0/24", "fd09::/64"])
        )
    }

    fn peer_config(&self, chain: &Chain) -> String {
        self.peer_config_routing(chain, &["10.1.0.0/24", "fd01::/64"])
    }

    /// [`Case::peer_config`] with `routes` into the tunnel.
    fn peer_config_routing(&self, chain: &Chain, routes: &[&str]) -> String {
        let device = if self.ethernet() {
            "tap = \"tepl2\"\ntap_addresses = [\"10.9.0.1/24\"]".to_string()
        } else {
            "tun = \"tepl3\"\ntun_addresses = [\"10.9.0.1/24\", \"fd09::1/64\"]".to_string()
        };
        format!(
            "[host]\n{device}\ncontrol = \"{}\"\n\n{}",
            chain.socket(&chain.peer),
            self.tunnel(false, routes)
        )
    }

    /// Addresses and routes of the client and the gateway's inner side.
    fn inner_side(&self, chain: &Chain) {
        let (c, g) = (&chain.client, &chain.gateway);
        if self.ethernet() {
            // Bridged: the client is on the peer's subnet; the gateway's
            // inner interface has no address in it.
            chain.exec(c, &["ip", "addr", "add", "10.9.0.2/24", "dev", "c0"], true);
            return;
        }
        for (ns, a) in [
            (c, "10.1.0.2/24"),
            (c, "fd01::2/64"),
            (g, "10.1.0.1/24"),
            (g, "fd01::1/64"),
        ] {
            let dev = if ns == c { "c0" } else { "gi" };
            chain.exec(ns, &["ip", "addr", "add", a, "dev", dev, "nodad"], true);
        }
        chain.exec(
            c,
            &["ip", "route", "add", "default", "via", "10.1.0.1"],
            true,
        );
        chain.exec(
            c,
            &["ip", "-6", "route", "add", "default", "via", "fd01::1"],
            true,
        );
        for k in ["net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1"] {
            chain.exec(g, &["sysctl", "-qw", k], true);
        }
    }

    /// The peer's routes back to the client through its tunnel device:
    /// tep installed them from its inner prefixes (host.routes), none is
    /// added by hand.
    fn peer_routes(&self, chain: &Chain) {
        if self.ethernet() {
            return;
        }
        for r in ["10.1.0.0/24", "fd01::/64"] {
            let carried = match self.kind {
                "fou-ipip" => !r.contains(':'),
                "fou-sit" => r.contains(':'),
                _ => true,
            };
            let family = if r.contains(':') { "-6" } else { "-4" };
            let out = chain.exec(&chain.peer, &["ip", family, "route", "show", r], true);
            let shown = String::from_utf8_lossy(&out.stdout).to_string();
            assert_eq!(
                shown.contains("dev tepl3 proto static"),
                carried,
                "{} route {r}: {shown}",
                self.kind
            );
        }
    }
}

/// The gateway's counters from `show counters --json`, and the check that
/// they balance: frames tep received plus packets it made itself (ICMP
/// errors, GTP-U replies) are frames it sent plus its drops; what the
/// steering programs redirected is what tep received plus what the
/// AF_XDP rings dropped.
///
/// A redirect the program made can still fail in the kernel after it
/// (`xdp_do_redirect`, seen once in many runs under load): the veth then
/// counts the frame in its receive drops and not in its XDP redirects, and
/// the sockets never see it. So the redirects are checked against the
/// veths' own count of those delivered, each failure against a device
/// drop.
fn assert_balanced(chain: &Chain, gw: &Daemon, what: &str) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let c = gw.show("counters");
        let n = |section: &str, k: &str| c[section][k].as_u64().unwrap_or(0);
        let received = n("io", "underlay_rx") + n("io", "inner_rx");
        let made = n("pipeline", "icmp_errors") + n("pipeline", "generated");
        let sent = n("io", "underlay_tx") + n("io", "inner_tx") + n("io", "kernel_tx");
        let drops = c["drops_total"].as_u64().unwrap();
        let redirected = n("kernel", "underlay_redirected") + n("kernel", "inner_redirected");
        let ring_drops = n("io", "xsk_rx_dropped") + n("io", "xsk_rx_ring_full");
        let pipeline_ok = received + made == sent + drops;
        if pipeline_ok && redirected == received + ring_drops {
            return c;
        }
        if pipeline_ok && redirected > received + ring_drops {
            let (delivered, device_drops) = veth_xdp(chain);
            let failed = redirected - delivered;
            if delivered == received + ring_drops && failed <= device_drops {
                eprintln!(
                    "{what}: {failed} redirect(s) failed in the kernel after the program (veth receive drops {device_drops})"
                );
                return c;
            }
        }
        assert!(
            Instant::now() < deadline,
            "{what}: unbalanced: received {received} + made {made} != sent {sent} + drops {drops}, or redirected {redirected} != received + ring drops {ring_drops} (veths: delivered by XDP redirect, receive drops: {:?})\n{c}",
            veth_xdp(chain)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The gateway's veths' (gu, gi) XDP redirects that succeeded and their
/// receive drops (`ethtool -S`: rx_queue_N_xdp_redirect, rx_queue_N_drops).
fn veth_xdp(chain: &Chain) -> (u64, u64) {
    let (mut redirects, mut drops) = (0, 0);
    for dev in ["gu", "gi"] {
        let out = chain.exec(&chain.gateway, &["ethtool", "-S", dev], true);
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let Some((k, v)) = line.trim().split_once(':') else {
                continue;
            };
            let v: u64 = v.trim().parse().unwrap_or(0);
            if k.starts_with("rx_queue_") && k.ends_with("_xdp_redirect") {
                redirects += v;
            } else if k.starts_with("rx_queue_")
                && k.ends_with("_drops")
                && !k.ends_with("_xdp_drops")
            {
                drops += v;
            }
        }
    }
    (redirects, drops)
}

/// Sends `bytes` of random data over TCP from `from` to a listener in
/// `to` at `addr`; returns (SHA-256 sent, SHA-256 received).
fn transfer(chain: &Chain, from: &str, to: &str, addr: &str, bytes: usize) -> (String, String) {
    paced_transfer(chain, from, to, addr, bytes, 0.0)
}

/// [`transfer`], spread over about `seconds` (in 64 KiB pieces).
fn paced_transfer(
    chain: &Chain,
    from: &str,
    to: &str,
    addr: &str,
    bytes: usize,
    seconds: f64,
) -> (String, String) {
    let port = 5301;
    let bind = if addr.contains(':') { "::" } else { "0.0.0.0" };
    let family = if addr.contains(':') {
        "AF_INET6"
    } else {
        "AF_INET"
    };
    let server = format!(
        r#"
import socket, hashlib
s = socket.socket(socket.{family})
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("{bind}", {port}))
s.listen(1)
s.settimeout(15)
c, _ = s.accept()
c.settimeout(15)
h = hashlib.sha256()
while True:
    d = c.recv(65536)
    if not d:
        break
    h.update(d)
print(h.hexdigest())
"#
    );
    let client = format!(
        r#"
import socket, hashlib, os, time
d = os.urandom({bytes})
for i in range(50):
    try:
        c = socket.create_connection(("{addr}", {port}), timeout=15)
        break
    except OSError:
        time.sleep(0.1)
pause = {seconds} / max(1, len(d) // 65536)
for at in range(0, len(d), 65536):
    c.sendall(d[at:at + 65536])
    if pause:
        time.sleep(pause)
c.close()
print(hashlib.sha256(d).hexdigest())
"#
    );
    let (tx, rx) = std::thread::scope(|s| {
        let server = s.spawn(|| {
            std::process::Command::new("ip")
                .args([
                    "netns", "exec", to, "timeout", "20", "python3", "-c", &server,
                ])
                .output()
        });
        std::thread::sleep(Duration::from_millis(200));
        let tx = chain.exec(from, &["timeout", "20", "python3", "-c", &client], false);
        let rx = server.join().unwrap().unwrap();
        (tx, rx)
    });
    let out = |o: &Output| String::from_utf8_lossy(&o.stdout).trim().to_string();
    assert!(
        tx.status.success(),
        "client: {}",
        String::from_utf8_lossy(&tx.stderr)
    );
    (out(&tx), out(&rx))
}

/// One case with a tep peer: pings both ways, a TCP transfer with its
/// digest, the gateway's counters.
fn run_case(c: Case) {
    let chain = Chain::new();
    c.inner_side(&chain);
    let peer = chain.daemon(&chain.peer, &c.peer_config(&chain));
    c.peer_routes(&chain);
    let gw = chain.daemon(&chain.gateway, &c.gateway_config(&chain));
    let label = c.label();
    let got = netns::ping(&chain, &chain.client, c.far(), 5);
    assert!(
        got >= 4,
        "{label}: ping client→peer got {got}/5\ngateway:\n{}\n{}\npeer:\n{}",
        gw.log(),
        gw.control(&["show", "counters"]).unwrap_or_default(),
        peer.control(&["show", "counters"]).unwrap_or_default()
    );
    assert!(
        netns::ping(&chain, &chain.peer, c.near(), 3) >= 3,
        "{label}: ping peer→client"
    );
    let (sent, received) = transfer(&chain, &chain.client, &chain.peer, c.far(), 4 << 20);
    assert_eq!(sent, received, "{label}: the digest of what crossed");
    let (sent, received) = transfer(&chain, &chain.peer, &chain.client, c.near(), 1 << 20);
    assert_eq!(sent, received, "{label}: the digest of what crossed back");
    let counters = assert_balanced(&chain, &gw, &label);
    let drops: Vec<_> = counters["drops"]
        .as_array()
        .unwrap()
        .iter()
        // IPv6 router solicitations and MLD reports to multicast groups
        // no tunnel routes.
        .filter(|d| d["reason"] != "no_route")
        .collect();
    assert!(drops.is_empty(), "{label}: drops {drops:?}");
    let t = gw.show("tunnels");
    let row = &t["tunnels"][0];
    assert!(
        row["tx_packets"].as_u64().unwrap() > 1000 && row["rx_packets"].as_u64().unwrap() > 100,
        "{label}: {row}"
    );
}

fn each(kind: &'static str) {
    if !root_or_skip(&format!("gateway {kind}")) {
        return;
    }
    for v6 in [false, true] {
        for mode in ["zero", "full"] {
            run_case(Case { kind, v6, mode });
        }
    }
}

#[test]
fn gue() {
    each("gue");
}

#[test]
fn fou_ipip() {
    each("fou-ipip");
}

#[test]
fn fou_sit() {
    each("fou-sit");
}

#[test]
fn fou_gre() {
    each("fou-gre");
}

#[test]
fn gre() {
    each("gre");
}

#[test]
fn gtpu() {
    each("gtpu");
}

#[test]
fn vxlan() {
    each("vxlan");
}

#[test]
fn geneve() {
    each("geneve");
}

/// The kernel's VXLAN device as the peer: checksums on and off, remote
/// checksum offload both ways, IPv6 with zero checksums.
#[test]
fn kernel_vxlan_peer() {
    if !root_or_skip("gateway kernel_vxlan_peer") {
        return;
    }
    for (v6, mode, kernel_opts, extra) in [
        (false, "full", "udpcsum", ""),
        (false, "zero", "noudpcsum", ""),
        (
            false,
            "remote",
            "udpcsum remcsumtx remcsumrx",
            "remote_checksum_rx = true",
        ),
        (true, "zero", "udp6zerocsumtx udp6zerocsumrx", ""),
    ] {
        let c = Case {
            kind: "vxlan",
            v6,
            mode,
        };
        let label = format!("kernel VXLAN {kernel_opts} / tep {}", c.label());
        let chain = Chain::new();
        c.inner_side(&chain);
        let (local, remote) = c.addrs(false);
        let p = &chain.peer;
        let mut add = vec![
            "ip", "link", "add", "vx0", "type", "vxlan", "id", "42", "local", local, "remote",
            remote, "dstport", "4789", "dev", "pu",
        ];
        add.extend(kernel_opts.split_whitespace());
        chain.exec(p, &add, true);
        chain.exec(p, &["ip", "addr", "add", "10.9.0.1/24", "dev", "vx0"], true);
        chain.exec(p, &["ip", "link", "set", "vx0", "up"], true);
        let config = c.gateway_config(&chain) + extra + "\n";
        let gw = chain.daemon(&chain.gateway, &config);
        let got = netns::ping(&chain, &chain.client, "10.9.0.1", 5);
        assert!(got >= 4, "{label}: ping got {got}/5\n{}", gw.log());
        assert_eq!(
            netns::ping(&chain, p, "10.9.0.2", 3),
            3,
            "{label}: ping back"
        );
        let (a, b) = transfer(&chain, &chain.client, p, "10.9.0.1", 4 << 20);
        assert_eq!(a, b, "{label}: digest");
        let (a, b) = transfer(&chain, p, &chain.client, "10.9.0.2", 4 << 20);
        assert_eq!(a, b, "{label}: digest back");
        let counters = assert_balanced(&chain, &gw, &label);
        let drops: Vec<_> = counters["drops"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["reason"] != "no_route")
            .collect();
        assert!(drops.is_empty(), "{label}: drops {drops:?}");
    }
}

/// An L3 tunnel (GUE over IPv4) for the tests of the gateway's router side.
fn l3() -> Case {
    Case {
        kind: "gue",
        v6: false,
        mode: "full",
    }
}

/// While the tunnel carries a transfer, what is not the tunnel's still
/// reaches the gateway's kernel on both interfaces: ARP and ND resolve,
/// TCP to the gateway's own addresses connects.
#[test]
fn the_kernel_keeps_everything_else() {
    if !root_or_skip("gateway the_kernel_keeps_everything_else") {
        return;
    }
    let c = l3();
    let chain = Chain::new();
    c.inner_side(&chain);
    let _peer = chain.daemon(&chain.peer, &c.peer_config(&chain));
    c.peer_routes(&chain);
    let gw = chain.daemon(&chain.gateway, &c.gateway_config(&chain));
    std::thread::scope(|s| {
        let tunnel = s
            .spawn(|| paced_transfer(&chain, &chain.client, &chain.peer, "10.9.0.1", 8 << 20, 2.0));
        std::thread::sleep(Duration::from_millis(300));
        // The gateway's own addresses, from each side, IPv4 and IPv6.
        for (from, to) in [
            (&chain.client, "10.1.0.1"),
            (&chain.client, "fd01::1"),
            (&chain.peer, GU4),
            (&chain.peer, GU6),
        ] {
            let (a, b) = transfer(&chain, from, &chain.gateway, to, 256 << 10);
            assert_eq!(a, b, "TCP to the gateway's {to}");
        }
        let (a, b) = tunnel.join().unwrap();
        assert_eq!(a, b, "the tunnel's transfer meanwhile");
    });
    // ARP and ND resolved the gateway from both sides.
    for (ns, dev, addr) in [
        (&chain.client, "c0", "10.1.0.1"),
        (&chain.client, "c0", "fd01::1"),
        (&chain.peer, "pu", GU4),
        (&chain.peer, "pu", GU6),
    ] {
        let out = chain.exec(ns, &["ip", "neigh", "show", addr, "dev", dev], true);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("lladdr"), "{addr} on {dev}: {text}");
    }
    let counters = assert_balanced(&chain, &gw, "everything else");
    let passed = counters["kernel"]["inner_passed"].as_u64().unwrap()
        + counters["kernel"]["underlay_passed"].as_u64().unwrap();
    assert!(passed > 20, "the programs passed the rest: {counters}");
}

/// The peer's MAC changes mid-transfer: the gratuitous ARP / unsolicited
/// neighbour advertisement updates the gateway kernel's neighbour table,
/// its notification the next hop; the transfer completes.
#[test]
fn a_neighbour_that_changes_its_mac_is_followed() {
    if !root_or_skip("gateway a_neighbour_that_changes_its_mac_is_followed") {
        return;
    }
    for v6 in [false, true] {
        let c = Case { v6, ..l3() };
        let chain = Chain::new();
        c.inner_side(&chain);
        let _peer = chain.daemon(&chain.peer, &c.peer_config(&chain));
        c.peer_routes(&chain);
        let p = &chain.peer;
        for k in [
            "net.ipv4.conf.pu.arp_notify=1",
            "net.ipv6.conf.pu.ndisc_notify=1",
        ] {
            chain.exec(p, &["sysctl", "-qw", k], true);
        }
        let gw = chain.daemon(&chain.gateway, &c.gateway_config(&chain));
        assert_eq!(netns::ping(&chain, &chain.client, "10.9.0.1", 2), 2);
        std::thread::scope(|s| {
            let t = s.spawn(|| paced_transfer(&chain, &chain.client, p, "10.9.0.1", 8 << 20, 2.0));
            std::thread::sleep(Duration::from_millis(600));
            chain.exec(
                p,
                &["ip", "link", "set", "pu", "address", "02:00:5e:00:53:99"],
                true,
            );
            let (a, b) = t.join().unwrap();
            assert_eq!(
                a,
                b,
                "v6={v6}: the transfer across the change\n{}",
                gw.log()
            );
        });
        let gw_ns = &chain.gateway;
        let under = if v6 { PU6 } else { PU4 };
        let out = chain.exec(gw_ns, &["ip", "neigh", "show", under, "dev", "gu"], true);
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("02:00:5e:00:53:99"),
            "v6={v6}: the kernel learnt the new MAC: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        assert_balanced(&chain, &gw, "MAC change");
    }
}

/// The first packet to a next hop tep has no MAC for goes through the
/// kernel (which resolves it) and arrives; the next ones go through tep.
#[test]
fn the_first_packet_to_an_unresolved_next_hop_arrives() {
    if !root_or_skip("gateway the_first_packet_to_an_unresolved_next_hop_arrives") {
        return;
    }
    let c = l3();
    let chain = Chain::new();
    c.inner_side(&chain);
    let _peer = chain.daemon(&chain.peer, &c.peer_config(&chain));
    c.peer_routes(&chain);
    let gw = chain.daemon(&chain.gateway, &c.gateway_config(&chain));
    // Nothing has gone to the client yet: the gateway has no neighbour
    // entry for it. One echo request, one try.
    let out = chain.exec(
        &chain.peer,
        &["ping", "-c", "1", "-W", "3", "10.1.0.2"],
        false,
    );
    assert!(
        out.status.success(),
        "the first packet: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        gw.log()
    );
    let before = assert_balanced(&chain, &gw, "first packet");
    assert!(before["io"]["kernel_tx"].as_u64().unwrap() >= 1, "{before}");
    assert!(before["pipeline"]["to_kernel"].as_u64().unwrap() >= 1);
    // Resolved now: the next ones leave through tep.
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(netns::ping(&chain, &chain.peer, "10.1.0.2", 3), 3);
    let after = assert_balanced(&chain, &gw, "resolved");
    assert_eq!(
        after["io"]["kernel_tx"], before["io"]["kernel_tx"],
        "no more through the kernel: {after}"
    );
    assert!(after["io"]["inner_tx"].as_u64().unwrap() >= 3);
}

/// ICMP errors reach the sender: Fragmentation Needed / Packet Too Big
/// for a DF packet that does not fit the tunnel, Time Exceeded for a TTL
/// that runs out at the gateway (into the tunnel, and out of it).
#[test]
fn icmp_errors_reach_the_sender() {
    if !root_or_skip("gateway icmp_errors_reach_the_sender") {
        return;
    }
    let c = l3();
    let chain = Chain::new();
    c.inner_side(&chain);
    let _peer = chain.daemon(&chain.peer, &c.peer_config(&chain));
    c.peer_routes(&chain);
    let gw = chain.daemon(&chain.gateway, &c.gateway_config(&chain));
    let cl = &chain.client;
    let ping = |ns: &str, args: &[&str]| {
        let mut a = vec!["ping", "-c", "1", "-W", "2"];
        a.extend_from_slice(args);
        String::from_utf8_lossy(&chain.exec(ns, &a, false).stdout).into_owned()
    };
    // GUE over IPv4 adds 20 + 8 + 4 bytes: 1468 fits a 1500 underlay.
    let out = ping(cl, &["-M", "do", "-s", "1472", "10.9.0.1"]);
    assert!(
        out.contains("Frag needed") && out.contains("mtu = 1468"),
        "{out}"
    );
    let out = ping(cl, &["-M", "do", "-s", "1452", "fd09::1"]);
    assert!(
        out.contains("Packet too big") && out.contains("mtu=1468"),
        "{out}"
    );
    // And what fits, fits.
    assert!(ping(cl, &["-M", "do", "-s", "1440", "10.9.0.1"]).contains(" 0% packet loss"));
    let out = ping(cl, &["-t", "1", "10.9.0.1"]);
    assert!(
        out.contains("From 10.1.0.1") && out.contains("Time to live exceeded"),
        "{out}"
    );
    let out = ping(cl, &["-t", "1", "fd09::1"]);
    assert!(out.contains("Time exceeded"), "{out}");
    // Out of the tunnel: the peer's packet has one hop left at the
    // gateway; the error goes back through the tunnel.
    // (Under load the peer's first packet may wait for ARP past the
    // timeout: a few tries, each error counted.)
    let mut tries = 0;
    let out = loop {
        tries += 1;
        let out = ping(&chain.peer, &["-t", "1", "10.1.0.2"]);
        if out.contains("Time to live exceeded") || tries == 3 {
            break out;
        }
    };
    assert!(out.contains("Time to live exceeded"), "{out}");
    let counters = assert_balanced(&chain, &gw, "ICMP");
    let errors = counters["pipeline"]["icmp_errors"].as_u64().unwrap();
    assert!(
        (5..=4 + tries).contains(&errors),
        "{errors} errors for 4 + {tries} packets: {counters}"
    );
}

/// SIGTERM takes the XDP programs off both interfaces; so does SIGKILL
/// (they hang on bpf_links that die with the process), and a tep started
/// after either runs.
#[test]
fn no_program_outlives_tep() {
    if !root_or_skip("gateway no_program_outlives_tep") {
        return;
    }
    let c = l3();
    let chain = Chain::new();
    c.inner_side(&chain);
    let _peer = chain.daemon(&chain.peer, &c.peer_config(&chain));
    c.peer_routes(&chain);
    let g = &chain.gateway;
    let attached = || (chain.xdp_on(g, "gi"), chain.xdp_on(g, "gu"));
    for signal in ["TERM", "KILL", "TERM"] {
        let mut gw = chain.daemon(g, &c.gateway_config(&chain));
        assert_eq!(attached(), (true, true), "while running");
        assert_eq!(netns::ping(&chain, &chain.client, "10.9.0.1", 2), 2);
        match signal {
            "TERM" => assert_eq!(gw.stop(), Some(0), "{}", gw.log()),
            _ => assert!(gw.kill()),
        }
        assert_eq!(attached(), (false, false), "after SIG{signal}");
        // The host's own traffic on the interfaces, as before tep.
        assert_eq!(netns::ping(&chain, &chain.client, "10.1.0.1", 1), 1);
    }
}

/// `tep trace` captures whole frames at the AF_XDP edges: an echo request
/// from the inner interface's ring, its tunnel frame on the underlay's
/// ring, the reply the other way, each on its pcapng interface.
#[test]
fn trace_captures_at_the_rings() {
    if !root_or_skip("gateway trace_captures_at_the_rings") {
        return;
    }
    let c = l3();
    let chain = Chain::new();
    c.inner_side(&chain);
    let _peer = chain.daemon(&chain.peer, &c.peer_config(&chain));
    c.peer_routes(&chain);
    let gw = chain.daemon(&chain.gateway, &c.gateway_config(&chain));
    // Next hops resolved first, so that every packet takes the rings.
    assert_eq!(netns::ping(&chain, &chain.client, "10.9.0.1", 2), 2);
    let file = chain.dir.join("trace.pcapng");
    let (socket, f) = (gw.socket.clone(), file.clone());
    let tracer = std::thread::spawn(move || {
        std::process::Command::new(netns::tep())
            .args(["trace", "--count", "8", "--timeout", "10", "--pcap"])
            .arg(&f)
            .arg("--socket")
            .arg(&socket)
            .status()
            .unwrap()
    });
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(netns::ping(&chain, &chain.client, "10.9.0.1", 2), 2);
    assert!(tracer.join().unwrap().success());
    let bytes = std::fs::read(&file).unwrap();
    let mut r = pcap_file::pcapng::PcapNgReader::new(&bytes[..]).unwrap();
    let mut names = Vec::new();
    let mut seen = Vec::new();
    while let Some(b) = r.next_block() {
        match b.unwrap() {
            pcap_file::pcapng::Block::InterfaceDescription(i) => {
                let name = i.options.iter().find_map(|o| match o {
                    pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionOption::IfName(n) => Some(n.to_string()),
                    _ => None,
                });
                names.push(name.unwrap_or_default());
            }
            pcap_file::pcapng::Block::EnhancedPacket(p) => {
                // Whole Ethernet frames: IPv4 after the header.
                assert_eq!(&p.data[12..14], &[0x08, 0x00]);
                seen.push(names[p.interface_id as usize].clone());
            }
            _ => {}
        }
    }
    assert_eq!(seen.len(), 8, "{seen:?}");
    assert!(
        seen.iter().any(|n| n == "inner") && seen.iter().any(|n| n == "underlay"),
        "{seen:?}"
    );
}

/// Somebody else's XDP program on an interface is left alone: tep refuses
/// to start, naming it, and the program stays.
#[test]
fn somebody_elses_program_is_refused_by_name() {
    if !root_or_skip("gateway somebody_elses_program_is_refused_by_name") {
        return;
    }
    let c = l3();
    let chain = Chain::new();
    c.inner_side(&chain);
    let g = &chain.gateway;
    let obj = concat!(env!("CARGO_MANIFEST_DIR"), "/../tep-sys/bpf/xdp_pass.o");
    chain.exec(
        g,
        &[
            "ip", "link", "set", "dev", "gi", "xdpdrv", "obj", obj, "sec", "xdp",
        ],
        true,
    );
    let config = chain.dir.join("gw.toml");
    std::fs::write(&config, c.gateway_config(&chain)).unwrap();
    let out = chain.exec(
        g,
        &[
            "timeout",
            "10",
            netns::tep(),
            "run",
            "-c",
            config.to_str().unwrap(),
        ],
        false,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("gateway.inner") && err.contains("not_tep_pass"),
        "names the field and the program: {err}"
    );
    assert!(chain.xdp_on(g, "gi"), "the other program stays");
    assert!(!chain.xdp_on(g, "gu"), "nothing left on the underlay");
}

/// The gateway's resident memory (kB), from /proc/PID/status.
fn rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// A scan from the tunnel of many inner destinations (ordinary internet
/// traffic on N6 looks the same): the gateway's memory stays put (its
/// route cache and next-hop table are fixed in size, the rest bounded),
/// the evictions and refusals are counted, the destinations the kernel
/// carries cost a summary line now and then rather than a line each, and
/// traffic to the real next hops still goes through tep afterwards, also
/// after a route change.
#[test]
fn a_scan_of_destinations_is_bounded() {
    if !root_or_skip("gateway a_scan_of_destinations_is_bounded") {
        return;
    }
    let c = l3();
    let chain = Chain::new();
    c.inner_side(&chain);
    // What the peer routes into its tunnel: the client's side, the scanned
    // prefixes (reached through the client as a router) and a blackholed
    // one (the kernel carries it: no route out of the gateway).
    let scanned = ["198.18.0.0/15", "2001:db8:5ca::/48", "198.51.100.0/24"];
    let mut peer_routes = vec!["10.1.0.0/24", "fd01::/64"];
    peer_routes.extend(scanned);
    let _peer = chain.daemon(&chain.peer, &c.peer_config_routing(&chain, &peer_routes));
    let g = &chain.gateway;
    for route in [
        &["ip", "route", "add", "198.18.0.0/15", "via", "10.1.0.2"][..],
        &[
            "ip",
            "-6",
            "route",
            "add",
            "2001:db8:5ca::/48",
            "via",
            "fd01::2",
        ],
        &["ip", "route", "add", "blackhole", "198.51.100.0/24"],
    ] {
        chain.exec(g, route, true);
    }
    let (routes, hops) = (4096u64, 64u64);
    let config = format!(
        "[gateway]\ninner = \"gi\"\nunderlay = \"gu\"\ncontrol = \"{}\"\nroute_cache = {routes}\nnext_hops = {hops}\n\n{}",
        chain.socket(g),
        c.tunnel(true, &["10.9.0.0/24", "fd09::/64"])
    );
    let gw = chain.daemon(g, &config);
    assert_eq!(netns::ping(&chain, &chain.client, "10.9.0.1", 2), 2);
    assert_eq!(netns::ping(&chain, &chain.peer, "10.1.0.2", 2), 2);
    let before = rss_kb(gw.pid());
    // 60000 destinations, one datagram each, paced (about 50k/s at most):
    // one in eight IPv6, one in sixty blackholed, one in a hundred on the
    // inner link (each its own next hop: 250 of them for 64 slots).
    let n = 60_000;
    let scan = format!(
        r#"
import socket, time, ipaddress
s4 = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s6 = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
base4 = int(ipaddress.IPv4Address("198.18.0.0"))
base6 = int(ipaddress.IPv6Address("2001:db8:5ca::"))
failed = 0
for i in range({n}):
    try:
        if i % 100 == 50:
            s4.sendto(b"scan", ("10.1.0.%d" % (i // 100 % 250 + 3), 9))
        elif i % 60 == 59:
            s4.sendto(b"scan", ("198.51.100.%d" % (i // 60 % 250 + 1), 9))
        elif i % 8 == 7:
            s6.sendto(b"scan", (str(ipaddress.IPv6Address(base6 + i)), 9))
        else:
            s4.sendto(b"scan", (str(ipaddress.IPv4Address(base4 + i)), 9))
    except OSError:
        failed += 1
    if i % 256 == 255:
        time.sleep(0.005)
print(failed)
"#
    );
    let started = Instant::now();
    let out = chain.exec(
        &chain.peer,
        &["timeout", "120", "python3", "-c", &scan],
        true,
    );
    let scan_s = started.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_millis(500));
    let after = rss_kb(gw.pid());
    let counters = gw.show("counters");
    let k = |name: &str| counters["kernel"][name].as_u64().unwrap_or(0);
    let (misses, dropped, evictions) = (
        k("neighbour_misses"),
        k("next_hop_requests_dropped"),
        k("next_hop_cache_evictions"),
    );
    eprintln!(
        "scan of {n} in {scan_s:.1} s (send failures {}): RSS {before} -> {after} kB; asked {misses}, refused {dropped}, evicted {evictions}, next hops evicted {}, known {}; kernel_tx {}",
        String::from_utf8_lossy(&out.stdout).trim(),
        k("next_hop_evictions"),
        k("next_hops_known"),
        counters["io"]["kernel_tx"]
    );
    // Each destination resolved takes a route cache entry: past the cache's
    // size, one is evicted for each (every destination asked for and not
    // refused was resolved; the cache holds `routes` of them).
    assert!(misses > routes, "the scan reached the gateway: {counters}");
    assert!(
        evictions + routes + dropped >= misses,
        "evictions counted: {counters}"
    );
    assert!(k("next_hops_known") <= hops, "{counters}");
    assert!(k("next_hop_evictions") > 0, "{counters}");
    // The tables are fixed in size: what the scan may add is the update
    // log (8192 updates of 32 bytes) and the request queue (4096
    // addresses), well under 1 MiB, and allocator slack. (Unbounded, each
    // destination resolved cost four hash map entries, ~200 bytes.)
    assert!(
        after < before + 4096,
        "RSS grew from {before} to {after} kB: {counters}"
    );
    // A summary line now and then, not a line per destination.
    let log = gw.log();
    let summaries = log.matches("destinations the kernel carries").count();
    let limit = 2 + (scan_s / 5.0) as usize;
    assert!(
        (1..=limit).contains(&summaries),
        "{summaries} summary lines in {scan_s:.1} s:\n{log}"
    );
    assert!(!log.contains("no route:") || summaries > 0);
    // The real next hops: through tep once resolved again.
    let through_tep = |what: &str| {
        assert_eq!(
            netns::ping(&chain, &chain.client, "10.9.0.1", 3),
            3,
            "{what}"
        );
        assert_eq!(netns::ping(&chain, &chain.peer, "10.1.0.2", 3), 3, "{what}");
        std::thread::sleep(Duration::from_millis(200));
        let kernel_tx = gw.show("counters")["io"]["kernel_tx"].clone();
        assert_eq!(
            netns::ping(&chain, &chain.client, "10.9.0.1", 3),
            3,
            "{what}"
        );
        assert_eq!(netns::ping(&chain, &chain.peer, "10.1.0.2", 3), 3, "{what}");
        let c = gw.show("counters");
        assert_eq!(
            c["io"]["kernel_tx"], kernel_tx,
            "{what}: not through tep: {c}"
        );
    };
    through_tep("after the scan");
    // A route change: every route is learnt again, once.
    let flushes = k("next_hop_route_flushes");
    chain.exec(
        g,
        &["ip", "route", "add", "203.0.113.0/24", "via", "10.1.0.2"],
        true,
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let c = gw.show("counters");
        if c["kernel"]["next_hop_route_flushes"].as_u64().unwrap_or(0) > flushes {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no flush after a route change: {c}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    through_tep("after a route change");
    assert_balanced(&chain, &gw, "scan");
}

/// `gateway.user`: once the programs are attached and the sockets open,
/// every thread of the gateway runs as nobody with only CAP_NET_ADMIN
/// (the default) or nothing (`capabilities = "none"`); the traffic, `tep
/// show`, the metrics and a reload that adds a tunnel (new entries in the
/// steering maps, through the descriptors tep holds) still work, and at
/// exit the programs come off both interfaces. tep starts with only the
/// capabilities examples/tep-gateway.service keeps (setpriv), so that the
/// unit's set is shown to be enough; small rings keep the UMEM within the
/// default RLIMIT_MEMLOCK (the unit raises the limit, LimitMEMLOCK,
/// instead of keeping CAP_IPC_LOCK).
#[test]
fn the_gateway_drops_to_a_user() {
    if !root_or_skip("gateway the_gateway_drops_to_a_user") {
        return;
    }
    let Some(uid) = netns::id("-u", "nobody") else {
        tep_testing::skip("gateway the_gateway_drops_to_a_user: no user nobody");
        return;
    };
    for (kept, cap_eff) in [
        ("net_admin", "0000000000001000"),
        ("none", "0000000000000000"),
    ] {
        let c = l3();
        let chain = Chain::new();
        c.inner_side(&chain);
        let _peer = chain.daemon(&chain.peer, &c.peer_config(&chain));
        c.peer_routes(&chain);
        let config = c.gateway_config(&chain).replace(
            "[gateway]\n",
            &format!(
                "[gateway]\nuser = \"nobody\"\ncapabilities = \"{kept}\"\nmetrics = \"127.0.0.1:19466\"\nring_size = 64\n"
            ),
        );
        let g = &chain.gateway;
        let Some(mut gw) =
            netns::spawn_daemon_as_unit(&chain.dir, g, &config, "tep-gateway.service")
        else {
            tep_testing::skip("gateway the_gateway_drops_to_a_user: setpriv is not installed");
            return;
        };
        assert!(gw.log().contains("privileges dropped"), "{}", gw.log());
        let threads = netns::thread_credentials(gw.pid());
        assert!(
            threads.len() >= 5,
            "main, worker, next hops, control, metrics: {threads:?}"
        );
        for t in &threads {
            assert_eq!(t[0], format!("{uid} {uid} {uid} {uid}"), "Uid: {threads:?}");
            assert_eq!(t[2], "", "no supplementary groups: {threads:?}");
            assert_eq!(t[3], cap_eff, "{kept}: CapEff: {threads:?}");
            assert_eq!(t[4], cap_eff, "{kept}: CapPrm: {threads:?}");
        }
        assert!(
            netns::ping(&chain, &chain.client, "10.9.0.1", 5) >= 4,
            "{kept}: {}",
            gw.log()
        );
        let (sent, received) = transfer(&chain, &chain.client, &chain.peer, "10.9.0.1", 1 << 20);
        assert_eq!(sent, received, "{kept}: the transfer");
        let t = gw.show("tunnels");
        assert!(t["tunnels"][0]["tx_packets"].as_u64().unwrap() > 100, "{t}");
        let out = chain.exec(
            g,
            &[
                "python3",
                "-c",
                "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:19466/metrics', timeout=5).read().decode())",
            ],
            true,
        );
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("tep_tunnel_tx_packets_total{tunnel=\"t\""),
            "{text}"
        );
        // A second tunnel: its endpoint and prefix enter the steering maps.
        // The peer does not know it; what tep sends into it is counted.
        let two = format!(
            "{config}\n[[tunnel]]\nname = \"f\"\nkind = \"fou-ipip\"\nlocal = \"{GU4}\"\nremote = \"{PU4}\"\ninner_prefixes = [\"10.8.0.0/24\"]\n"
        );
        std::fs::write(&gw.config, two).unwrap();
        assert_eq!(
            gw.control(&["reload"]).unwrap().trim(),
            "reloaded",
            "{kept}: {}",
            gw.log()
        );
        let _ = netns::ping(&chain, &chain.client, "10.8.0.5", 2);
        let t = gw.show("tunnels");
        let f = t["tunnels"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == "f")
            .unwrap_or_else(|| panic!("{t}"));
        assert!(
            f["tx_packets"].as_u64().unwrap() >= 2,
            "{kept}: steered to f: {t}"
        );
        assert!(
            netns::ping(&chain, &chain.client, "10.9.0.1", 3) >= 2,
            "{kept}: after the reload"
        );
        assert_eq!(gw.stop(), Some(0), "{}", gw.log());
        assert_eq!(
            (chain.xdp_on(g, "gi"), chain.xdp_on(g, "gu")),
            (false, false),
            "{kept}: programs left after the drop"
        );
    }
}

/// `ping -M do -s size` (no fragmentation anywhere): how many of `count`
/// came back.
fn ping_sized(chain: &Chain, ns: &str, dst: &str, size: usize, count: u32) -> u32 {
    let (size, count) = (size.to_string(), count.to_string());
    let out = chain.exec(
        ns,
        &[
            "ping", "-c", &count, "-i", "0.05", "-W", "1", "-w", "5", "-M", "do", "-s", &size, dst,
        ],
        false,
    );
    let text = String::from_utf8_lossy(&out.stdout);
    text.split(", ")
        .find(|p| p.ends_with("received"))
        .and_then(|p| p.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Jumbo frames: MTU 9000 on the underlay and 8900 inside (the client's,
/// the gateway's inner interface, the peer's VXLAN), the kernel's VXLAN as
/// the peer, in each checksum mode. Pings of 8,000 bytes and of the whole
/// inner MTU both ways, and TCP both ways in 8,848-byte segments with its
/// digest checked: frames longer than a UMEM chunk arrive at the gateway
/// as descriptor chains and leave as chains (both counted), and the
/// gateway drops nothing.
#[test]
fn jumbo_frames_cross_both_ways() {
    if !root_or_skip("gateway jumbo_frames_cross_both_ways") {
        return;
    }
    const INNER_MTU: usize = 8900;
    for (v6, mode, kernel_opts, extra, xdp) in [
        (false, "full", "udpcsum", "", "auto"),
        (false, "zero", "noudpcsum", "", "auto"),
        (true, "full", "", "", "auto"),
        (true, "zero", "udp6zerocsumtx udp6zerocsumrx", "", "auto"),
        (false, "lco", "udpcsum", "", "auto"),
        (false, "offload", "udpcsum", "", "auto"),
        (
            false,
            "remote",
            "udpcsum remcsumtx remcsumrx",
            "remote_checksum_rx = true",
            "auto",
        ),
        // The generic (skb) path hands XDP and the socket fragments too.
        (false, "full", "udpcsum", "", "generic"),
    ] {
        let c = Case {
            kind: "vxlan",
            v6,
            mode,
        };
        let label = format!(
            "jumbo: kernel VXLAN {kernel_opts} / tep {}, XDP {xdp}",
            c.label()
        );
        let chain = Chain::new();
        c.inner_side(&chain);
        let inner_mtu = INNER_MTU.to_string();
        for (ns, dev, mtu) in [
            (&chain.gateway, "gu", "9000"),
            (&chain.peer, "pu", "9000"),
            (&chain.gateway, "gi", &inner_mtu),
            (&chain.client, "c0", &inner_mtu),
        ] {
            chain.exec(ns, &["ip", "link", "set", dev, "mtu", mtu], true);
        }
        let (local, remote) = c.addrs(false);
        let p = &chain.peer;
        let mut add = vec![
            "ip", "link", "add", "vx0", "mtu", &inner_mtu, "type", "vxlan", "id", "42", "local",
            local, "remote", remote, "dstport", "4789", "dev", "pu",
        ];
        add.extend(kernel_opts.split_whitespace());
        chain.exec(p, &add, true);
        chain.exec(p, &["ip", "addr", "add", "10.9.0.1/24", "dev", "vx0"], true);
        chain.exec(p, &["ip", "link", "set", "vx0", "up"], true);
        let config = c.gateway_config(&chain).replacen(
            "[gateway]\n",
            &format!("[gateway]\nxdp_mode = \"{xdp}\"\n"),
            1,
        ) + extra
            + "\n";
        let gw = chain.daemon(&chain.gateway, &config);
        for size in [8000, INNER_MTU - 28] {
            let got = ping_sized(&chain, &chain.client, "10.9.0.1", size, 3);
            assert_eq!(got, 3, "{label}: ping -s {size} got {got}/3\n{}", gw.log());
            let got = ping_sized(&chain, p, "10.9.0.2", size, 3);
            assert_eq!(got, 3, "{label}: ping -s {size} back got {got}/3");
        }
        let (a, b) = transfer(&chain, &chain.client, p, "10.9.0.1", 4 << 20);
        assert_eq!(a, b, "{label}: digest");
        let (a, b) = transfer(&chain, p, &chain.client, "10.9.0.2", 4 << 20);
        assert_eq!(a, b, "{label}: digest back");
        let counters = assert_balanced(&chain, &gw, &label);
        let drops: Vec<_> = counters["drops"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["reason"] != "no_route")
            .collect();
        assert!(drops.is_empty(), "{label}: drops {drops:?}");
        let io = &counters["io"];
        eprintln!(
            "{label}: xsk_rx_chained {}, xsk_tx_chained {}, underlay_rx {}, inner_rx {}",
            io["xsk_rx_chained"], io["xsk_tx_chained"], io["underlay_rx"], io["inner_rx"]
        );
        for k in ["xsk_rx_chained", "xsk_tx_chained"] {
            // Each transfer alone is about 470 full segments, each
            // received and sent as a chain.
            let n = io[k].as_u64().unwrap_or(0);
            assert!(n > 470, "{label}: {k} = {n}\n{counters}");
        }
        assert_eq!(io["xsk_rx_dropped"].as_u64(), Some(0), "{label}: {io}");
    }
}

/// The bound on a chain: buffers are sized from the MTUs when tep starts
/// (4000 here: two pages each); raised to 9000 afterwards, a frame comes in
/// three descriptors, more than its buffer holds, and is dropped whole,
/// counted as `frame_too_long`, while frames that fit keep crossing.
#[test]
fn a_frame_longer_than_its_buffer_is_dropped_counted() {
    if !root_or_skip("gateway a_frame_longer_than_its_buffer_is_dropped_counted") {
        return;
    }
    let c = Case {
        kind: "vxlan",
        v6: false,
        mode: "full",
    };
    let chain = Chain::new();
    c.inner_side(&chain);
    let devices = [
        (&chain.gateway, "gu"),
        (&chain.peer, "pu"),
        (&chain.gateway, "gi"),
        (&chain.client, "c0"),
    ];
    for (ns, dev) in devices {
        chain.exec(ns, &["ip", "link", "set", dev, "mtu", "4000"], true);
    }
    let (local, remote) = c.addrs(false);
    let p = &chain.peer;
    chain.exec(
        p,
        &[
            "ip", "link", "add", "vx0", "mtu", "3900", "type", "vxlan", "id", "42", "local", local,
            "remote", remote, "dstport", "4789", "dev", "pu", "udpcsum",
        ],
        true,
    );
    chain.exec(p, &["ip", "addr", "add", "10.9.0.1/24", "dev", "vx0"], true);
    chain.exec(p, &["ip", "link", "set", "vx0", "up"], true);
    let gw = chain.daemon(&chain.gateway, &c.gateway_config(&chain));
    assert_eq!(ping_sized(&chain, &chain.client, "10.9.0.1", 3800, 3), 3);
    for (ns, dev) in devices {
        chain.exec(ns, &["ip", "link", "set", dev, "mtu", "9000"], true);
    }
    chain.exec(p, &["ip", "link", "set", "vx0", "mtu", "8900"], true);
    assert_eq!(
        ping_sized(&chain, &chain.client, "10.9.0.1", 8000, 3),
        0,
        "8000 bytes in a buffer of 7936"
    );
    assert_eq!(ping_sized(&chain, &chain.client, "10.9.0.1", 3800, 3), 3);
    let counters = assert_balanced(&chain, &gw, "frame_too_long");
    // The I/O's own drop (`drop_frame_too_long`), at least one per ping
    // (ping sends on until its deadline): tep saw and counted each, none
    // was lost in the kernel.
    let io = &counters["io"];
    let too_long = io["drop_frame_too_long"].as_u64().unwrap_or(0);
    assert!(too_long >= 3, "{counters}");
    assert_eq!(io["xsk_rx_dropped"].as_u64(), Some(0), "{counters}");
    assert_eq!(
        counters["drops_total"].as_u64(),
        Some(too_long),
        "{counters}"
    );
}

/// The largest frames a veth passes: MTU 65535 on the underlay, 65000
/// inside. Buffers are 17 pages (bounded there whatever the MTU), frames
/// come in 18 descriptors and leave in up to 17; smaller rings keep the
/// pool at 100 MiB.
#[test]
fn a_veths_largest_frames_cross() {
    if !root_or_skip("gateway a_veths_largest_frames_cross") {
        return;
    }
    let c = Case {
        kind: "vxlan",
        v6: false,
        mode: "full",
    };
    let chain = Chain::new();
    c.inner_side(&chain);
    for (ns, dev, mtu) in [
        (&chain.gateway, "gu", "65535"),
        (&chain.peer, "pu", "65535"),
        (&chain.gateway, "gi", "65000"),
        (&chain.client, "c0", "65000"),
    ] {
        chain.exec(ns, &["ip", "link", "set", dev, "mtu", mtu], true);
    }
    let (local, remote) = c.addrs(false);
    let p = &chain.peer;
    chain.exec(
        p,
        &[
            "ip", "link", "add", "vx0", "mtu", "65000", "type", "vxlan", "id", "42", "local",
            local, "remote", remote, "dstport", "4789", "dev", "pu", "udpcsum",
        ],
        true,
    );
    chain.exec(p, &["ip", "addr", "add", "10.9.0.1/24", "dev", "vx0"], true);
    chain.exec(p, &["ip", "link", "set", "vx0", "up"], true);
    let config =
        c.gateway_config(&chain)
            .replacen("[gateway]\n", "[gateway]\nring_size = 256\n", 1);
    let gw = chain.daemon(&chain.gateway, &config);
    for size in [30000, 65000 - 28] {
        let got = ping_sized(&chain, &chain.client, "10.9.0.1", size, 3);
        assert_eq!(got, 3, "ping -s {size} got {got}/3\n{}", gw.log());
        assert_eq!(
            ping_sized(&chain, p, "10.9.0.2", size, 3),
            3,
            "ping -s {size} back"
        );
    }
    let counters = assert_balanced(&chain, &gw, "64 KiB");
    assert_eq!(counters["drops_total"].as_u64(), Some(0), "{counters}");
    let io = &counters["io"];
    assert!(
        io["xsk_rx_chained"].as_u64().unwrap_or(0) >= 12,
        "{counters}"
    );
}

/// The Python of [`numbered_flows`]' sender: round-robin over the flows,
/// a pause per round, a steady stream that no queue on the way
/// overflows. With `fou` (a FOU-IPIP endpoint's address) each flow's
/// datagrams go inside FOU from a socket of their own, as a tunnel
/// endpoint that spreads its flows would send them.
fn flow_sender(flows: u32, each: u32, addr: &str, fou: Option<&str>) -> String {
    let (to, wrap) = match fou {
        None => (format!("(\"{addr}\", 5400)"), "lambda i, d: d"),
        Some(outer) => (
            format!("(\"{outer}\", 5555)"),
            "lambda i, d: inner(40000 + i, d)",
        ),
    };
    format!(
        r#"
import socket, time, struct
def csum(b):
    s = sum(struct.unpack("!10H", b))
    s = (s & 0xffff) + (s >> 16)
    return (~((s & 0xffff) + (s >> 16))) & 0xffff
def inner(sport, d):
    udp = struct.pack("!HHHH", sport, 5400, 8 + len(d), 0) + d
    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0, 64, 17, 0,
        socket.inet_aton("10.9.0.1"), socket.inet_aton("{addr}"))
    return h[:10] + struct.pack("!H", csum(h)) + h[12:] + udp
wrap = {wrap}
socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range({flows})]
for seq in range({each}):
    for i, s in enumerate(socks):
        s.sendto(wrap(i, seq.to_bytes(4, "big") + bytes(300)), {to})
    time.sleep(0.001)
"#
    )
}

/// Flows of numbered UDP datagrams from `from` to `to` at `addr` (one
/// socket, so one source port, per flow; inside FOU to `fou` if given):
/// what the receiver got, how many came after a higher number of their
/// flow, and how many flows it heard.
fn numbered_flows(
    chain: &Chain,
    from: &str,
    to: &str,
    addr: &str,
    fou: Option<&str>,
    flows: u32,
    each: u32,
) -> (u64, u64, u64) {
    let receiver = r#"
import socket, json
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
s.bind(("0.0.0.0", 5400))
s.settimeout(3)
last, got, late = {}, 0, 0
while True:
    try:
        d, a = s.recvfrom(2048)
    except socket.timeout:
        break
    seq = int.from_bytes(d[:4], "big")
    if seq <= last.get(a[1], -1):
        late += 1
    last[a[1]] = max(seq, last.get(a[1], -1))
    got += 1
print(json.dumps([got, late, len(last)]))
"#;
    let sender = flow_sender(flows, each, addr, fou);
    let rx = std::thread::scope(|s| {
        let rx = s.spawn(|| {
            std::process::Command::new("ip")
                .args([
                    "netns", "exec", to, "timeout", "30", "python3", "-c", receiver,
                ])
                .output()
        });
        std::thread::sleep(Duration::from_millis(300));
        let tx = chain.exec(from, &["timeout", "20", "python3", "-c", &sender], false);
        assert!(
            tx.status.success(),
            "sender: {}",
            String::from_utf8_lossy(&tx.stderr)
        );
        rx.join().unwrap().unwrap()
    });
    let text = String::from_utf8_lossy(&rx.stdout);
    let v: Vec<u64> = serde_json::from_str(text.trim()).unwrap_or_else(|e| {
        panic!(
            "receiver: {e}: {text} {}",
            String::from_utf8_lossy(&rx.stderr)
        )
    });
    (v[0], v[1], v[2])
}

/// Two queues, two workers: the veths have two queues each, a flow's
/// frames take the queue its hash picks on the sender, so flows spread
/// over both and each stays on one. Both workers carry frames both ways;
/// every datagram of every flow arrives, in order.
#[test]
fn two_workers_on_two_queues() {
    if !root_or_skip("gateway two_workers_on_two_queues") {
        return;
    }
    let c = Case {
        kind: "fou-ipip",
        v6: false,
        mode: "full",
    };
    let chain = Chain::with_queues(2);
    c.inner_side(&chain);
    let _peer = chain.daemon(&chain.peer, &c.peer_config(&chain));
    let config = c
        .gateway_config(&chain)
        .replacen("[gateway]\n", "[gateway]\nqueues = 2\n", 1);
    let gw = chain.daemon(&chain.gateway, &config);
    assert!(netns::ping(&chain, &chain.client, c.far(), 3) >= 2, "ping");
    assert!(
        netns::ping(&chain, &chain.peer, c.near(), 3) >= 2,
        "ping back"
    );
    let (flows, each) = (16, 300);
    // Back from the peer, the flows are FOU datagrams of their own
    // sockets: a veth hands a frame to its peer's queue of the number
    // the sender's stack picked, one per socket (the peer's tep, one
    // socket, would land every flow on one queue, where a NIC's RSS
    // would spread them by their outer ports).
    for (from, to, addr, fou) in [
        (&chain.client, &chain.peer, c.far(), None),
        (&chain.peer, &chain.client, c.near(), Some(GU4)),
    ] {
        let (got, late, heard) = numbered_flows(&chain, from, to, addr, fou, flows, each);
        assert_eq!(
            (got, late, heard),
            (u64::from(flows * each), 0, u64::from(flows)),
            "{from} -> {addr}: received, out of order, flows\n{}",
            gw.control(&["show", "runtime"]).unwrap_or_default()
        );
    }
    let runtime = gw.show("runtime");
    let workers = runtime["workers"].as_array().expect("workers");
    assert_eq!(workers.len(), 2, "{runtime}");
    for w in workers {
        let n = |k: &str| w["io"][k].as_u64().unwrap_or(0);
        // Each way over both queues: at least a sixteenth of the flows.
        for k in ["underlay_rx", "inner_rx"] {
            assert!(
                n(k) >= u64::from(each),
                "worker {}: {k} {}\n{runtime}",
                w["worker"],
                n(k)
            );
        }
        assert!(
            n("rounds") >= n("busy_rounds") && n("busy_rounds") > 0,
            "{w}"
        );
        assert!(
            n("vectors") > 0 && n("vectors") <= n("underlay_rx") + n("inner_rx"),
            "{w}"
        );
    }
    assert_balanced(&chain, &gw, "two queues");
}
