//! A Geneve multipoint network of three VTEPs, two of them tep and the
//! third Open vSwitch's userspace datapath (this kernel has no geneve
//! module, so OVS is the independent implementation tep is checked
//! against). Root only (CI is root); skipped loudly without OVS.
//!
//! ```text
//!   w1 10.100.0.1        w2 10.100.0.2        w3 10.100.0.3
//!    | veth               | veth               | veth (offloads off)
//!   h1: br0 + tep-blue   h2: br0 + tep-blue   h3: OVS br-int
//!   tep 192.0.2.1        tep 192.0.2.2          t1, t2: geneve key 100
//!    |                    |                     OVS br-phy 192.0.2.3
//!    +------ u: Linux bridge br0 (p1, p2, p3) ----+ AF_PACKET on h3's u
//! ```
//!
//! OVS in h3 is userspace tunnelling as OVS documents it: its own
//! ovsdb-server and ovs-vswitchd ([`tep_testing::ovs`]), a netdev bridge
//! br-phy on the underlay veth (AF_PACKET) that holds the VTEP address,
//! with the kernel kept off that veth, and a netdev bridge br-int with one
//! Geneve port per tep VTEP. OVS 3.1 reads AF_PACKET without virtio-net
//! headers, so frames it reads must be whole with final checksums: the
//! underlay bridge's port towards h3 and w3's veth have checksum and
//! segmentation offloads off (the kernel completes them on the way out).
//!
//! NORMAL floods a broadcast that came in on one tunnel port out of the
//! other too, so tep on h2 would get a second copy of w1's ARP request
//! from 192.0.2.3 (it has one from h1 already: head-end replication) and
//! learn w1 behind the wrong VTEP. The tunnel ports are `protected`
//! (OVS's split horizon: NORMAL sends nothing from one protected port to
//! another), which keeps NORMAL's learning for every frame, where
//! OpenFlow rules steering broadcasts past NORMAL would hide their source
//! MACs from it. The FDB checks below fail without it.
//!
//! t1 (to h1) has `options:csum=true` (OVS fills the outer UDP checksum),
//! t2 (to h2) the default (zero), so tep's receive side is checked with
//! both. At the end w3's frames get a Geneve option from OVS: an
//! uncritical one that tep must skip, then a critical one it must drop
//! and count (`unknown_critical_option`).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tep_testing::netns::{ping, root_or_skip, tep, Daemon, Lab, Namespaces};
use tep_testing::ovs::Ovs;

/// Inner MTU everywhere: the underlay's 1500 less Geneve's 50 (outer IPv4
/// 20, UDP 8, Geneve 8, inner Ethernet 14), what tep gives its TAP.
const MTU: &str = "1450";
/// Drop reasons that mean the two implementations disagree on the wire.
const INTEROP_DROPS: &[&str] = &[
    "bad_checksum",
    "malformed",
    "truncated",
    "bad_length",
    "bad_version",
    "unsupported",
    "unknown_vni",
    "unknown_critical_option",
    "geneve_control",
    "bad_ip_checksum",
];

/// Workload `i`'s MAC (set, so that the FDB checks know what to find).
fn mac(i: usize) -> String {
    format!("02:00:00:00:64:0{i}")
}

fn inner(i: usize) -> String {
    format!("10.100.0.{i}")
}

fn vtep(i: usize) -> String {
    format!("192.0.2.{i}")
}

/// The namespaces, removed on drop (after what runs in them: declare
/// this first).
struct Rig {
    lab: Namespaces,
}

impl Lab for Rig {}

impl Rig {
    fn new() -> Rig {
        let tag = format!("tg{}", std::process::id());
        let names = ["u", "h1", "h2", "h3", "w1", "w2", "w3"];
        let lab = Namespaces::new(&tag, &names).unwrap_or_else(|e| panic!("namespaces: {e}"));
        let rig = Rig { lab };
        // IPv4 only: no router solicitations or MLD reports from the
        // bridges and workloads in the FDBs.
        for n in names {
            rig.run(
                n,
                &[
                    "sysctl",
                    "-qw",
                    "net.ipv6.conf.all.disable_ipv6=1",
                    "net.ipv6.conf.default.disable_ipv6=1",
                ],
            );
        }
        rig
    }

    fn ns(&self, name: &str) -> String {
        self.lab.ns(name)
    }

    /// Runs `args` in namespace `name`; panics with its stderr on failure.
    fn run(&self, name: &str, args: &[&str]) -> String {
        self.lab
            .run(name, args)
            .unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    /// Waits (5 s at most) until `dev` exists in `name`.
    fn wait_link(&self, name: &str, dev: &str) {
        let until = Instant::now() + Duration::from_secs(5);
        while self.lab.run(name, &["ip", "link", "show", dev]).is_err() {
            assert!(Instant::now() < until, "{name}: no {dev} after 5 s");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The underlay: a Linux bridge in `u`, a veth from each host to it.
    /// The port towards OVS completes checksums and segments (see the
    /// module comment).
    fn underlay(&self) {
        self.run("u", &["ip", "link", "add", "br0", "type", "bridge"]);
        self.run("u", &["ip", "link", "set", "br0", "up"]);
        for i in 1..=3 {
            let (h, p) = (format!("h{i}"), format!("p{i}"));
            self.lab
                .veth(&h, "u", "u", &p)
                .unwrap_or_else(|e| panic!("veth: {e}"));
            self.run("u", &["ip", "link", "set", &p, "master", "br0", "up"]);
            self.run(&h, &["ip", "link", "set", "u", "up"]);
        }
        self.run(
            "u",
            &[
                "ethtool",
                "-K",
                "p3",
                "tx",
                "off",
                "tso",
                "off",
                "gso",
                "off",
                "tx-udp-segmentation",
                "off",
            ],
        );
        for i in 1..=2 {
            let a = format!("{}/24", vtep(i));
            self.run(&format!("h{i}"), &["ip", "addr", "add", &a, "dev", "u"]);
        }
    }

    /// Workload `i`: namespace w<i> with eth0 (its MAC, 10.100.0.i/24,
    /// MTU 1450), the veth's other end `w<i>` in h<i>, up and unaddressed.
    fn workload(&self, i: usize) {
        let (h, w) = (format!("h{i}"), format!("w{i}"));
        self.lab
            .veth(&h, &w, &w, "eth0")
            .unwrap_or_else(|e| panic!("veth: {e}"));
        self.run(&h, &["ip", "link", "set", &w, "mtu", MTU, "up"]);
        let m = mac(i);
        self.run(
            &w,
            &["ip", "link", "set", "eth0", "address", &m, "mtu", MTU],
        );
        let a = format!("{}/24", inner(i));
        self.run(&w, &["ip", "addr", "add", &a, "dev", "eth0"]);
        self.run(&w, &["ip", "link", "set", "eth0", "up"]);
    }

    /// tep on h<i> with network "blue", its TAP and w<i>'s veth in a
    /// Linux bridge.
    fn tep_host(&self, i: usize) -> Daemon {
        let h = format!("h{i}");
        let flood: Vec<String> = (1..=3)
            .filter(|&j| j != i)
            .map(|j| format!("\"{}\"", vtep(j)))
            .collect();
        let config = format!(
            r#"[host]
control = "{control}"
uplink = "off"

[[network]]
name = "blue"
kind = "geneve"
vni = 100
local = "{local}"
flood = [{flood}]
"#,
            control = self.lab.socket(&h),
            local = vtep(i),
            flood = flood.join(", "),
        );
        let d = Daemon::start(
            Path::new(tep()),
            &self.ns(&h),
            &self.lab.dir,
            &h,
            &config,
            None,
            &[],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        self.workload(i);
        self.wait_link(&h, "tep-blue");
        self.run(&h, &["ip", "link", "add", "br0", "type", "bridge"]);
        for dev in ["tep-blue", &format!("w{i}")] {
            self.run(&h, &["ip", "link", "set", dev, "master", "br0"]);
        }
        self.run(&h, &["ip", "link", "set", "br0", "up"]);
        d
    }
}

/// An interface's OpenFlow port number.
fn ofport(ovs: &Ovs, iface: &str) -> String {
    ovs.vsctl(&["get", "Interface", iface, "ofport"])
        .trim()
        .to_string()
}

/// br-int's MAC table: (OpenFlow port, MAC) rows.
fn ovs_fdb(ovs: &Ovs) -> Vec<(String, String)> {
    ovs.appctl(&["fdb/show", "br-int"])
        .lines()
        .skip(1)
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            Some((w.first()?.to_string(), w.get(2)?.to_string()))
        })
        .collect()
}

/// h3: OVS with br-phy on the underlay veth (192.0.2.3) and br-int with
/// the two Geneve ports and w3's veth.
fn ovs_host(rig: &Rig) -> Ovs {
    rig.workload(3);
    // OVS reads w3's frames from AF_PACKET: whole, with final checksums.
    rig.run(
        "w3",
        &[
            "ethtool", "-K", "eth0", "tx", "off", "tso", "off", "gso", "off",
        ],
    );
    let ovs = Ovs::start(&rig.lab.dir.join("ovs"), &rig.ns("h3"));
    let hwaddr = rig.run("h3", &["cat", "/sys/class/net/u/address"]);
    let hwaddr = format!("other_config:hwaddr={}", hwaddr.trim());
    ovs.vsctl(&[
        "add-br",
        "br-phy",
        "--",
        "set",
        "bridge",
        "br-phy",
        "datapath_type=netdev",
        "fail-mode=standalone",
        &hwaddr,
        "--",
        "add-port",
        "br-phy",
        "u",
    ]);
    // The kernel stays off u: it holds no address, but would answer ARP
    // for br-phy's address there and send port unreachables for every
    // Geneve packet (weak host model). AF_PACKET still sees it all.
    rig.run(
        "h3",
        &[
            "sysctl",
            "-qw",
            "net.ipv4.conf.all.rp_filter=1",
            "net.ipv4.conf.u.rp_filter=1",
            "net.ipv4.conf.u.arp_ignore=8",
        ],
    );
    rig.wait_link("h3", "br-phy");
    let a = format!("{}/24", vtep(3));
    rig.run("h3", &["ip", "addr", "add", &a, "dev", "br-phy"]);
    rig.run("h3", &["ip", "link", "set", "br-phy", "up"]);
    let mut args = vec![
        "add-br",
        "br-int",
        "--",
        "set",
        "bridge",
        "br-int",
        "datapath_type=netdev",
        "fail-mode=standalone",
    ];
    for (port, remote, csum) in [
        ("t1", "options:remote_ip=192.0.2.1", "options:csum=true"),
        ("t2", "options:remote_ip=192.0.2.2", "options:csum=false"),
    ] {
        args.extend([
            "--",
            "add-port",
            "br-int",
            port,
            "--",
            "set",
            "interface",
            port,
            "type=geneve",
            remote,
            "options:key=100",
            csum,
            "--",
            "set",
            "port",
            port,
            "protected=true",
        ]);
    }
    args.extend(["--", "add-port", "br-int", "w3"]);
    ovs.vsctl(&args);
    tunnel_route(&ovs);
    ovs
}

/// OVS takes the route to the other VTEPs from the namespace's table;
/// added by hand if it has not within 3 s.
fn tunnel_route(ovs: &Ovs) {
    let has = || {
        ovs.appctl(&["ovs/route/show"])
            .contains("192.0.2.0/24 dev br-phy")
    };
    let until = Instant::now() + Duration::from_secs(3);
    while !has() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(100));
    }
    if !has() {
        ovs.appctl(&["ovs/route/add", "192.0.2.0/24", "br-phy"]);
    }
}

/// `tep ARGS --json`, parsed.
fn json(d: &Daemon, args: &[&str]) -> serde_json::Value {
    let mut all = args.to_vec();
    all.push("--json");
    let text = d
        .control(&all)
        .unwrap_or_else(|e| panic!("{args:?}: {e}\n{}", d.log()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{args:?}: {e}: {text}"))
}

/// Pings from w<from> to w<to> until one answers (20 s at most): how
/// long that took. The first packets to a VTEP OVS has not resolved yet
/// are lost while OVS ARPs for it.
fn first_answer(rig: &Rig, from: usize, to: usize) -> Option<Duration> {
    let t0 = Instant::now();
    while ping(rig, &rig.ns(&format!("w{from}")), &inner(to), 1) == 0 {
        if t0.elapsed() > Duration::from_secs(20) {
            return None;
        }
    }
    Some(t0.elapsed())
}

/// The MAC w<from> resolved for w<to>'s address.
fn neighbour(rig: &Rig, from: usize, to: usize) -> String {
    let out = rig.run(
        &format!("w{from}"),
        &["ip", "neigh", "show", &inner(to), "dev", "eth0"],
    );
    out.split_whitespace()
        .skip_while(|w| *w != "lladdr")
        .nth(1)
        .unwrap_or("")
        .to_string()
}

const SERVER: &str = r#"
import hashlib, socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 5000))
s.listen(1)
s.settimeout(20)
print("listening", flush=True)
c, _ = s.accept()
c.settimeout(20)
h, n = hashlib.sha256(), 0
while True:
    b = c.recv(65536)
    if not b:
        break
    h.update(b)
    n += len(b)
print(n, h.hexdigest(), flush=True)
"#;

const CLIENT: &str = r#"
import hashlib, os, socket, sys
data = os.urandom(2 * 1024 * 1024 + 12345)
c = socket.create_connection((sys.argv[1], 5000), timeout=20)
c.sendall(data)
c.shutdown(socket.SHUT_WR)
c.recv(1)
print(len(data), hashlib.sha256(data).hexdigest(), flush=True)
"#;

/// A ~2 MB TCP transfer from w<from> to w<to> (30 s at most): what each
/// side counted and hashed must agree.
fn transfer(rig: &Rig, from: usize, to: usize) {
    let what = format!("TCP w{from} -> w{to}");
    let t0 = Instant::now();
    let dst = inner(to);
    let mut server = Command::new("timeout")
        .args(["30", "ip", "netns", "exec", &rig.ns(&format!("w{to}"))])
        .args(["python3", "-c", SERVER, &dst])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 server");
    let mut lines = BufReader::new(server.stdout.take().unwrap()).lines();
    let first = lines.next().and_then(Result::ok).unwrap_or_default();
    if first != "listening" {
        let _ = server.kill();
        let out = server.wait_with_output().expect("python3 server");
        panic!(
            "{what}: the server did not start: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let client = Command::new("timeout")
        .args(["30", "ip", "netns", "exec", &rig.ns(&format!("w{from}"))])
        .args(["python3", "-c", CLIENT, &dst])
        .output()
        .expect("python3 client");
    let got = lines.next().and_then(Result::ok).unwrap_or_default();
    let _ = server.kill();
    let _ = server.wait();
    let sent = String::from_utf8_lossy(&client.stdout).trim().to_string();
    assert!(
        client.status.success(),
        "{what}: client failed: {}",
        String::from_utf8_lossy(&client.stderr)
    );
    assert_eq!(got, sent, "{what}: received (bytes, SHA-256) != sent");
    eprintln!("{what}: {sent} in {:.2?}", t0.elapsed());
}

/// tep on h<i> learned w<j> behind VTEP j (and its own workload as local).
fn check_tep_fdb(d: &Daemon, i: usize) {
    let fdb = json(d, &["fdb", "show"]);
    let rows = fdb.as_array().unwrap_or_else(|| panic!("{fdb}"));
    for j in 1..=3 {
        let row = rows
            .iter()
            .find(|r| r["network"] == "blue" && r["mac"] == mac(j))
            .unwrap_or_else(|| panic!("h{i}: w{j} ({}) not in the FDB: {fdb}", mac(j)));
        assert_eq!(row["origin"], "learned", "h{i}: {row}");
        if i == j {
            assert_eq!(row["local"], true, "h{i}: its own w{j}: {row}");
        } else {
            assert_eq!(row["local"], false, "h{i}: w{j}: {row}");
            assert_eq!(
                row["dst"],
                vtep(j),
                "h{i}: w{j} behind the wrong VTEP: {row}"
            );
        }
    }
}

/// Drops of reasons that mean the peers disagree on the wire.
fn interop_drops(d: &Daemon) -> Vec<serde_json::Value> {
    let counters = json(d, &["show", "counters"]);
    counters["drops"]
        .as_array()
        .unwrap_or_else(|| panic!("no drops in {counters}"))
        .iter()
        .filter(|r| INTEROP_DROPS.contains(&r["reason"].as_str().unwrap_or("")))
        .cloned()
        .collect()
}

/// Packets tep dropped for `reason`, all nodes together.
fn dropped(d: &Daemon, reason: &str) -> u64 {
    let counters = json(d, &["show", "counters"]);
    counters["drops"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["reason"] == reason)
        .filter_map(|r| r["packets"].as_u64())
        .sum()
}

/// `nstat` absolute counter `name` in namespace `ns`.
fn nstat(rig: &Rig, ns: &str, name: &str) -> u64 {
    rig.run(ns, &["nstat", "-asz", name])
        .lines()
        .find_map(|l| {
            let mut w = l.split_whitespace();
            (w.next() == Some(name)).then(|| w.next()?.parse().ok())?
        })
        .unwrap_or_else(|| panic!("nstat has no {name}"))
}

fn tools_or_skip(test: &str) -> bool {
    if !root_or_skip(test) {
        return false;
    }
    if let Some(why) = tep_testing::ovs::missing() {
        tep_testing::skip(format_args!("{test}: {why}"));
        return false;
    }
    for tool in ["python3", "ethtool", "nstat"] {
        if !tep_testing::have(tool) {
            tep_testing::skip(format_args!(
                "{test}: `{tool}` is not installed (apt-get install python3 ethtool iproute2)"
            ));
            return false;
        }
    }
    true
}

#[test]
fn geneve_three_vteps_with_open_vswitch() {
    if !tools_or_skip("geneve_three_vteps_with_open_vswitch") {
        return;
    }
    let t0 = Instant::now();
    let rig = Rig::new();
    rig.underlay();
    let ovs = ovs_host(&rig);
    let h1 = rig.tep_host(1);
    let h2 = rig.tep_host(2);
    let teps = [&h1, &h2];
    let diag = |what: &str| -> String {
        let mut s = format!("{what}\n{}\n", ovs.log_tail(40));
        for (i, d) in teps.iter().enumerate() {
            s += &format!(
                "h{} log:\n{}\nh{} counters:\n{}\n",
                i + 1,
                d.log(),
                i + 1,
                d.control(&["show", "counters"]).unwrap_or_default()
            );
        }
        let drops = ovs.coverage("drop");
        s + &ovs.appctl(&["fdb/show", "br-int"]) + &format!("OVS drops: {drops:?}")
    };
    eprintln!("set up in {:.2?}", t0.elapsed());

    // From w3 first: OVS resolves each tep VTEP's MAC on the first packet
    // to it, and loses that packet.
    for (from, to) in [(3, 1), (3, 2), (1, 2)] {
        let took = first_answer(&rig, from, to)
            .unwrap_or_else(|| panic!("{}", diag(&format!("w{from} -> w{to}: no answer in 20 s"))));
        eprintln!("w{from} -> w{to}: first answer after {took:.2?}");
    }
    for from in 1..=3 {
        for to in (1..=3).filter(|&t| t != from) {
            let got = ping(&rig, &rig.ns(&format!("w{from}")), &inner(to), 5);
            assert!(
                got >= 4,
                "{}",
                diag(&format!("ping w{from} -> w{to}: {got}/5"))
            );
            assert_eq!(
                neighbour(&rig, from, to),
                mac(to),
                "w{from}'s ARP entry for w{to}"
            );
        }
    }

    for (from, to) in [(1, 3), (3, 1), (2, 3), (3, 2)] {
        transfer(&rig, from, to);
    }

    check_tep_fdb(&h1, 1);
    check_tep_fdb(&h2, 2);
    let ovs_fdb = ovs_fdb(&ovs);
    for (i, port) in [(1, "t1"), (2, "t2"), (3, "w3")] {
        let ofport = ofport(&ovs, port);
        assert!(
            ovs_fdb.contains(&(ofport.clone(), mac(i))),
            "OVS has w{i} ({}) not behind {port} (port {ofport}): {ovs_fdb:?}",
            mac(i)
        );
    }
    for (i, d) in teps.iter().enumerate() {
        let bad = interop_drops(d);
        assert!(bad.is_empty(), "h{}: {bad:?}\n{}", i + 1, diag("drops"));
        // The socket verifies OVS's outer checksums (t1's) before tep sees
        // the datagram: a bad one shows only here.
        let kernel = &json(d, &["show", "counters"])["kernel"];
        assert_eq!(kernel["udp_bad_checksum"], 0, "h{}: {kernel}", i + 1);
    }
    // OVS verifies tep's outer checksums and headers when it decapsulates.
    let drops = ovs.coverage("datapath_drop");
    for counter in [
        "datapath_drop_tunnel_pop_error",
        "datapath_drop_invalid_tnl_port",
        "datapath_drop_rx_invalid_packet",
    ] {
        assert!(
            !drops.iter().any(|(name, _)| name == counter),
            "{}",
            diag(&format!("OVS counted {counter}"))
        );
    }
    for w in ["w1", "w2", "w3"] {
        let errors = nstat(&rig, w, "TcpInCsumErrors");
        assert_eq!(errors, 0, "{w}: inner TCP checksum errors");
    }

    geneve_options(&rig, &ovs, &h1);
    eprintln!("all in {:.2?}", t0.elapsed());
}

/// OVS adds a Geneve option to w3's frames: tep skips an uncritical one
/// (delivers), drops and counts a critical one (RFC 8926 §3.5).
fn geneve_options(rig: &Rig, ovs: &Ovs, h1: &Daemon) {
    let w3 = ofport(ovs, "w3");
    // The option's 8 bytes (4 of header, 4 of data) make w3's full-size
    // frames 8 bytes too big for the underlay, and OVS sends nothing that
    // big (it does not fragment): w3's MTU, and with it the MSS of its
    // connections, shrinks by as much.
    rig.run("w3", &["ip", "link", "set", "eth0", "mtu", "1442"]);
    // Option class 0x0102 (no one's), type 0x01 (uncritical) or 0x81
    // (critical: the type's high bit), four bytes.
    for (tlv_type, critical) in [("0x01", false), ("0x81", true)] {
        ovs.ofctl(&["del-tlv-map", "br-int"]);
        ovs.ofctl(&[
            "add-tlv-map",
            "br-int",
            &format!("{{class=0x0102,type={tlv_type},len=4}}->tun_metadata0"),
        ]);
        ovs.ofctl(&[
            "add-flow",
            "br-int",
            &format!("priority=10,in_port={w3},actions=set_field:0x5a5a5a5a->tun_metadata0,NORMAL"),
        ]);
        ovs.appctl(&["revalidator/purge"]);
        let before = dropped(h1, "unknown_critical_option");
        let got = ping(rig, &rig.ns("w3"), &inner(1), 5);
        let after = dropped(h1, "unknown_critical_option");
        if critical {
            assert_eq!(got, 0, "w3 -> w1 with a critical option got through");
            assert!(
                after >= before + 5,
                "h1 counted {} unknown_critical_option drops for 5 pings",
                after - before
            );
        } else {
            assert!(got >= 4, "w3 -> w1 with an uncritical option: {got}/5");
            assert_eq!(after, before, "an uncritical option dropped");
            transfer(rig, 3, 1);
        }
        ovs.ofctl(&["del-flows", "br-int", &format!("in_port={w3}")]);
    }
}
