//! The lab of the overlay tests (issues 26 and 27), shared by `overlay.rs`
//! and `evpn.rs`. Per test a lab of namespaces:
//!
//! - `u`: the underlay, a bridge joining `h1`, `h2`, `h3` (192.0.2.1/2/3
//!   on their `ul`).
//! - `h1` runs tep with the networks of the test; each network's TAP
//!   (`tep-<name>`) is a port of a Linux bridge `b<vni>` with a veth to the
//!   workload `w1<x>` (x: `b` blue, `r` red).
//! - `h2`, `h3` are kernel VTEPs: per network `vx<vni>` (learning on, port
//!   4789, head-end replication to the two other hosts through
//!   `bridge fdb append 00:00:00:00:00:00`) in a bridge `br<vni>` with a
//!   veth to `w2<x>` / `w3<x>`.
//! - Workload `w<i><x>` has MAC 02:00:00:00:00:0i and 10.100.0.i/24 in
//!   every network: the networks must keep apart what looks the same.
//!
//! Nobody writes an FDB entry by hand unless the test is about that: tep
//! and the kernels learn. Traffic is ping, TCP transfers whose SHA-256 is
//! taken on both ends, and raw frames, sent and counted by a python3
//! helper (AF_PACKET) written into the lab's directory. IPv6 is off in
//! every namespace, so that nothing but the tests' traffic refreshes the
//! tables. Root only (CI is root); skipped loudly otherwise.

// Each test file uses its part.
#![allow(dead_code)]

use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tep_testing::netns::{tep, Daemon, Namespaces, Script};

/// The python3 helper: `sniff` (frames seen on an interface until stdin
/// closes), `send` (raw Ethernet frames), `serve`/`push` (a TCP transfer
/// hashed on both ends). Its one argument is a JSON object, inline or a
/// file's path; it answers JSON lines.
pub const HELPER: &str = r#"
import hashlib, json, os, random, select, socket, struct, sys, time

def sniff(c):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.bind((c["iface"], 0))
    snap, most = c.get("snap", 160), c.get("max_frames", 5000)
    mark = bytes.fromhex(c.get("mark", ""))
    frames = []
    def take():
        data, addr = s.recvfrom(65535)
        if len(frames) < most:
            frames.append([addr[2], data[:snap].hex()])
        if mark and mark in data:
            print("seen", flush=True)
    print("ready", flush=True)
    end = time.monotonic() + c.get("max_s", 60)
    while time.monotonic() < end:
        r, _, _ = select.select([s, sys.stdin], [], [], 0.2)
        if s in r:
            take()
        if sys.stdin in r:
            break
    s.setblocking(False)
    try:
        while True:
            take()
    except BlockingIOError:
        pass
    print(json.dumps({"frames": frames}), flush=True)

def send(c):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((c["iface"], 0))
    dst = bytes.fromhex(c["dst"].replace(":", ""))
    src = bytes.fromhex(c.get("src", "020000000000").replace(":", ""))
    body = struct.pack("!H", c.get("ethertype", 0x88B5)) + c["payload"].encode()
    body = body.ljust(48, b"\0")
    for i in range(c.get("count", 1)):
        if c.get("random_src"):
            src = bytes([random.randrange(256) & 0xFE | 0x02]) + os.urandom(5)
        s.send(dst + src + body)
        if i % 50 == 49:
            time.sleep(0.002)
    print(json.dumps({"sent": c.get("count", 1)}), flush=True)

def serve(c):
    l = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind((c["addr"], c["port"]))
    l.listen(1)
    l.settimeout(c.get("timeout", 30))
    print("ready", flush=True)
    conn, _ = l.accept()
    conn.settimeout(c.get("timeout", 30))
    h, n = hashlib.sha256(), 0
    while True:
        b = conn.recv(1 << 16)
        if not b:
            break
        h.update(b)
        n += len(b)
    conn.close()
    print(json.dumps({"bytes": n, "sha256": h.hexdigest()}), flush=True)

def push(c):
    data = os.urandom(c["bytes"])
    s = socket.create_connection((c["addr"], c["port"]), timeout=c.get("timeout", 30))
    step, pace = 1 << 16, c.get("pace_ms", 0) / 1000
    for at in range(0, len(data), step):
        s.sendall(data[at:at + step])
        if pace:
            time.sleep(pace)
    s.shutdown(socket.SHUT_WR)
    while s.recv(4096):
        pass
    print(json.dumps({"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}), flush=True)

arg = sys.argv[1]
c = json.loads(arg if arg.startswith("{") else open(arg).read())
{"sniff": sniff, "send": send, "serve": serve, "push": push}[c["cmd"]](c)
"#;

/// One network of a lab.
#[derive(Clone, Copy, Debug)]
pub struct Net {
    pub name: &'static str,
    pub vni: u32,
    /// The workloads' suffix: `w1b`, `w2b`, …
    pub x: &'static str,
}

pub const BLUE: Net = Net {
    name: "blue",
    vni: 100,
    x: "b",
};
pub const RED: Net = Net {
    name: "red",
    vni: 200,
    x: "r",
};

/// Host `h`'s bridge of `net`: `b<vni>` on h1 (with tep's TAP),
/// `br<vni>` on the kernel VTEPs.
pub fn bridge(h: &str, net: &Net) -> String {
    let prefix = if h == "h1" { "b" } else { "br" };
    format!("{prefix}{}", net.vni)
}

/// Workload `i`'s MAC, the same in every network.
pub fn mac(i: u8) -> String {
    format!("02:00:00:00:00:{i:02x}")
}

/// Workload `i`'s address.
pub fn ip(i: u8) -> String {
    format!("10.100.0.{i}")
}

/// Host `i`'s underlay address.
pub fn vtep(i: u8) -> String {
    format!("192.0.2.{i}")
}

/// The inner MTU: the underlay's 1500 less VXLAN's 50, what tep and the
/// kernel give their devices.
pub const MTU: &str = "1450";

pub static CASES: AtomicUsize = AtomicUsize::new(0);

/// The namespaces of a test and tep in `h1`. Fields drop in order: tep
/// stops before its namespace goes, and the namespaces go on every exit,
/// a failed assertion included.
pub struct Lab {
    pub tep: Option<Daemon>,
    pub nets: Vec<Net>,
    /// The kernel VTEPs learn nothing and flood to nobody until BGP EVPN
    /// (FRR's zebra) fills their FDB.
    pub evpn: bool,
    pub script: PathBuf,
    pub ns: Namespaces,
}

impl Lab {
    /// The underlay, the kernel VTEPs and every workload of `nets`, and
    /// the namespaces named in `extra` (empty); tep is not started.
    pub fn build(nets: &[Net], extra: &[&str]) -> Lab {
        Lab::build_with(nets, extra, false)
    }

    /// [`Self::build`], the kernel VTEPs as BGP EVPN makes them (`evpn`):
    /// `nolearning`, no flood entries.
    pub fn build_with(nets: &[Net], extra: &[&str], evpn: bool) -> Lab {
        let n = CASES.fetch_add(1, Ordering::Relaxed);
        let tag = format!("ov{}x{n}", std::process::id());
        let mut names = vec!["u".to_string(), "h1".into(), "h2".into(), "h3".into()];
        for net in nets {
            names.extend((1..=3).map(|i| format!("w{i}{}", net.x)));
        }
        names.extend(extra.iter().map(|s| s.to_string()));
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let ns = Namespaces::new(&tag, &refs).unwrap_or_else(|e| panic!("namespaces: {e}"));
        let script = ns.dir.join("helper.py");
        std::fs::write(&script, HELPER).unwrap();
        let lab = Lab {
            tep: None,
            nets: nets.to_vec(),
            evpn,
            script,
            ns,
        };
        for name in &refs {
            lab.must(
                name,
                &[
                    "sysctl",
                    "-qw",
                    "net.ipv6.conf.all.disable_ipv6=1",
                    "net.ipv6.conf.default.disable_ipv6=1",
                ],
            );
        }
        lab.underlay();
        for net in nets {
            for i in 1..=3 {
                lab.host_bridge(net, i);
                lab.workload(&format!("h{i}"), &format!("e{}", net.vni), net, i);
            }
        }
        lab
    }

    /// `args` in namespace `name`; panics with its error.
    pub fn must(&self, name: &str, args: &[&str]) -> String {
        self.ns
            .run(name, args)
            .unwrap_or_else(|e| panic!("in {name}: {e}"))
    }

    pub fn underlay(&self) {
        self.must("u", &["ip", "link", "add", "br0", "type", "bridge"]);
        self.must("u", &["ip", "link", "set", "br0", "up"]);
        for i in 1..=3u8 {
            let (h, p) = (format!("h{i}"), format!("p{i}"));
            self.ns.veth(&h, "ul", "u", &p).unwrap();
            self.must("u", &["ip", "link", "set", &p, "master", "br0", "up"]);
            let addr = format!("{}/24", vtep(i));
            self.must(&h, &["ip", "addr", "add", &addr, "dev", "ul"]);
            self.must(&h, &["ip", "link", "set", "ul", "up"]);
        }
    }

    /// Host `i`'s bridge of `net`: on h1 `b<vni>` (tep's TAP joins it
    /// once tep runs), on h2/h3 `br<vni>` with the kernel's `vx<vni>`.
    pub fn host_bridge(&self, net: &Net, i: u8) {
        let h = format!("h{i}");
        let br = bridge(&h, net);
        self.must(&h, &["ip", "link", "add", &br, "type", "bridge"]);
        self.must(&h, &["ip", "link", "set", &br, "up"]);
        if i == 1 {
            return;
        }
        let (vx, id, local) = (format!("vx{}", net.vni), net.vni.to_string(), vtep(i));
        let mut add = vec![
            "ip", "link", "add", &vx, "type", "vxlan", "id", &id, "local", &local, "dstport",
            "4789",
        ];
        if self.evpn {
            add.push("nolearning");
        }
        self.must(&h, &add);
        self.must(&h, &["ip", "link", "set", &vx, "master", &br, "up"]);
        if self.evpn {
            return;
        }
        for j in (1..=3u8).filter(|&j| j != i) {
            self.must(
                &h,
                &[
                    "bridge",
                    "fdb",
                    "append",
                    "00:00:00:00:00:00",
                    "dev",
                    &vx,
                    "dst",
                    &vtep(j),
                ],
            );
        }
    }

    /// Workload `w<i><x>` (see [`Self::workload_in`]).
    pub fn workload(&self, h: &str, port: &str, net: &Net, i: u8) {
        self.workload_in(&format!("w{i}{}", net.x), h, port, net, i);
    }

    /// Namespace `w` as a workload with MAC `mac(i)` and `ip(i)` on its
    /// `eth0`, joined by veth `port` to host `h`'s bridge of `net`.
    pub fn workload_in(&self, w: &str, h: &str, port: &str, net: &Net, i: u8) {
        let br = bridge(h, net);
        self.ns.veth(h, port, w, "eth0").unwrap();
        self.must(h, &["ip", "link", "set", port, "mtu", MTU]);
        self.must(h, &["ip", "link", "set", port, "master", &br, "up"]);
        self.must(
            w,
            &["ip", "link", "set", "eth0", "address", &mac(i), "mtu", MTU],
        );
        let addr = format!("{}/24", ip(i));
        self.must(w, &["ip", "addr", "add", &addr, "dev", "eth0"]);
        self.must(w, &["ip", "link", "set", "eth0", "up"]);
    }

    /// Starts tep in h1 with `networks` (TOML `[[network]]` tables), a
    /// running one stopped first, and puts each network's TAP into its
    /// bridge.
    pub fn start_tep(&mut self, networks: &str) {
        drop(self.tep.take());
        let config = format!(
            "[host]\ncontrol = \"{}\"\n\n{networks}",
            self.ns.socket("h1")
        );
        let d = Daemon::start(
            std::path::Path::new(tep()),
            &self.ns.ns("h1"),
            &self.ns.dir,
            "h1",
            &config,
            None,
            &[],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        self.tep = Some(d);
        for net in self.nets.clone() {
            let tap = format!("tep-{}", net.name);
            let br = bridge("h1", &net);
            let until = Instant::now() + Duration::from_secs(5);
            while self
                .ns
                .run("h1", &["ip", "link", "set", &tap, "master", &br, "up"])
                .is_err()
            {
                assert!(
                    Instant::now() < until,
                    "{tap} did not appear:\n{}",
                    self.d().log()
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    pub fn d(&self) -> &Daemon {
        self.tep.as_ref().expect("tep runs")
    }

    /// `tep ARGS --socket …`: its output or its error.
    pub fn ctl(&self, args: &[&str]) -> Result<String, String> {
        self.d().control(args)
    }

    /// `tep fdb show --json` of `net`.
    pub fn fdb(&self, net: &str) -> Vec<Value> {
        let text = self
            .ctl(&["fdb", "show", "dev", net, "--json"])
            .unwrap_or_else(|e| panic!("fdb show: {e}\n{}", self.d().log()));
        let v: Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("fdb show: {e}: {text}"));
        match v {
            Value::Array(rows) => rows,
            other => other
                .get("fdb")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_else(|| panic!("fdb show --json: no rows in {other}")),
        }
    }

    /// tep's FDB row for `mac` in `net`.
    pub fn fdb_row(&self, net: &str, mac: &str) -> Option<Value> {
        self.fdb(net).into_iter().find(|r| {
            r["mac"]
                .as_str()
                .is_some_and(|m| m.eq_ignore_ascii_case(mac))
        })
    }

    /// Counter `key` of network `net` in `tep show networks --json`.
    pub fn counter(&self, net: &str, key: &str) -> u64 {
        let v = self.d().show("networks");
        let n = find_network(&v, net).unwrap_or_else(|| panic!("no network {net} in {v}"));
        find_key(n, key).unwrap_or_else(|| panic!("no {key} for {net} in {n}"))
    }

    /// Polls `what` (every 100 ms) until it holds or `secs` pass.
    pub fn until(&self, secs: u64, mut what: impl FnMut() -> bool) -> bool {
        let end = Instant::now() + Duration::from_secs(secs);
        loop {
            if what() {
                return true;
            }
            if Instant::now() > end {
                return false;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `count` pings from `w` to `dst` within `deadline` seconds: the
    /// replies.
    pub fn ping(&self, w: &str, dst: &str, count: u32, deadline: u32) -> u32 {
        let (c, d) = (count.to_string(), deadline.to_string());
        let out = self
            .ns
            .run(
                w,
                &["ping", "-c", &c, "-i", "0.05", "-W", "1", "-w", &d, dst],
            )
            .unwrap_or_else(|e| e);
        out.lines()
            .find_map(|l| {
                l.split(", ")
                    .find(|p| p.ends_with("received"))
                    .and_then(|p| p.split_whitespace().next()?.parse().ok())
            })
            .unwrap_or(0)
    }

    /// Pings that must all come back (the first may wait for ARP and
    /// flooding: 10 s for one to).
    pub fn ping_ok(&self, w: &str, dst: &str) {
        // A failed resolution before makes ping give up at once: ask
        // again until the deadline.
        assert!(
            self.until(10, || self.ping(w, dst, 1, 1) == 1),
            "{w} cannot reach {dst}\n{}\n{}\n{}",
            self.d().log(),
            self.ctl(&["show", "networks"]).unwrap_or_else(|e| e),
            self.ctl(&["show", "counters"]).unwrap_or_else(|e| e),
        );
        let got = self.ping(w, dst, 3, 5);
        assert_eq!(got, 3, "{w} -> {dst}: {got}/3 replies");
    }

    /// The python3 helper in `name` with `config`: its output.
    pub fn helper(&self, name: &str, config: &Value) -> Result<String, String> {
        let script = self.script.display().to_string();
        self.ns.run(
            name,
            &[
                "timeout",
                "60",
                "/usr/bin/python3",
                &script,
                &config.to_string(),
            ],
        )
    }

    /// The helper started in `name` (it said "ready").
    pub fn start_helper(&self, name: &str, label: &str, config: &Value) -> Script {
        let ns = self.ns.ns(name);
        let script = self.script.display().to_string();
        Script::start(&ns, &script, &self.ns.dir, label, config, |l| l == "ready")
    }

    /// A sniffer on `iface` in `name`; it says "seen" for each frame
    /// holding `mark`.
    pub fn sniff(&self, name: &str, iface: &str, mark: &[u8]) -> Sniffer {
        let label = format!("sniff-{name}-{iface}");
        let mark: String = mark.iter().map(|b| format!("{b:02x}")).collect();
        let config = json!({"cmd": "sniff", "iface": iface, "mark": mark});
        Sniffer(self.start_helper(name, &label, &config))
    }

    /// `bytes` random bytes over TCP from workload `from` to `to_ip` in
    /// workload `to`; both ends' SHA-256 must agree.
    pub fn transfer(&self, from: &str, to: &str, to_ip: &str, bytes: usize) {
        self.transfer_paced(from, to, to_ip, bytes, 0);
    }

    /// [`Self::transfer`] with a pause of `pace_ms` after each 64 KiB
    /// written (so that it lasts).
    pub fn transfer_paced(&self, from: &str, to: &str, to_ip: &str, bytes: usize, pace_ms: u32) {
        let t0 = Instant::now();
        let port = 7000 + CASES.fetch_add(1, Ordering::Relaxed) as u16;
        let server = self.start_helper(
            to,
            &format!("serve-{to}-{port}"),
            &json!({"cmd": "serve", "addr": to_ip, "port": port}),
        );
        let sent = self
            .helper(
                from,
                &json!({"cmd": "push", "addr": to_ip, "port": port, "bytes": bytes, "pace_ms": pace_ms}),
            )
            .unwrap_or_else(|e| panic!("{from} -> {to}: {e}\n{}", self.d().log()));
        let got = server
            .recv(Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("{to} received nothing: {e}\n{}", server.log()));
        let (sent, got): (Value, Value) = (
            serde_json::from_str(&sent).unwrap(),
            serde_json::from_str(&got).unwrap(),
        );
        assert_eq!(sent["bytes"], json!(bytes), "{from} -> {to}");
        assert_eq!(sent, got, "{from} -> {to}: what arrived differs");
        eprintln!("{from} -> {to}: {bytes} bytes in {:?}", t0.elapsed());
    }

    /// Sends `count` frames from workload `w`'s eth0.
    pub fn send(&self, w: &str, frame: Value) {
        let mut c = frame;
        c["cmd"] = json!("send");
        c["iface"] = json!("eth0");
        self.helper(w, &c)
            .unwrap_or_else(|e| panic!("send from {w}: {e}"));
    }
}

/// A running sniffer.
pub struct Sniffer(pub Script);

/// A frame a sniffer saw: the packet type (4: outgoing) and the bytes.
pub struct Seen {
    pub outgoing: bool,
    pub bytes: Vec<u8>,
}

impl Sniffer {
    /// Waits (`secs` at most) for a frame holding the mark.
    pub fn seen(&self, secs: u64) -> bool {
        self.0.recv(Duration::from_secs(secs)).as_deref() == Ok("seen")
    }

    /// Stops it (any line on its stdin): every frame it saw.
    pub fn stop(mut self) -> Vec<Seen> {
        self.0.send("stop");
        let line = loop {
            match self.0.recv(Duration::from_secs(20)) {
                Ok(l) if l == "seen" => continue,
                Ok(l) => break l,
                Err(e) => panic!("sniffer: {e}\n{}", self.0.log()),
            }
        };
        let v: Value = serde_json::from_str(&line).unwrap();
        v["frames"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| Seen {
                outgoing: f[0].as_u64() == Some(4),
                bytes: unhex(f[1].as_str().unwrap()),
            })
            .collect()
    }
}

pub fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

/// Whether `hay` holds `needle`.
pub fn holds(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// A VXLAN datagram on the underlay: outer source and destination, VNI,
/// inner frame (as far as captured).
#[derive(Debug)]
pub struct Vxlan {
    pub src: [u8; 4],
    pub dst: [u8; 4],
    pub vni: u32,
    pub inner: Vec<u8>,
}

impl Vxlan {
    pub fn parse(f: &[u8]) -> Option<Vxlan> {
        if f.len() < 14 + 20 + 8 + 8 || f[12..14] != [0x08, 0x00] {
            return None;
        }
        let ip = &f[14..];
        let ihl = usize::from(ip[0] & 0x0f) * 4;
        if ip[9] != 17 || ip.len() < ihl + 16 {
            return None;
        }
        let udp = &ip[ihl..];
        if udp[2..4] != 4789u16.to_be_bytes() {
            return None;
        }
        let vx = &udp[8..];
        Some(Vxlan {
            src: ip[12..16].try_into().ok()?,
            dst: ip[16..20].try_into().ok()?,
            vni: u32::from_be_bytes([0, vx[4], vx[5], vx[6]]),
            inner: vx[8..].to_vec(),
        })
    }

    /// An ARP request in it: the target address.
    pub fn arp_request(&self) -> Option<[u8; 4]> {
        let f = &self.inner;
        (f.len() >= 14 + 28 && f[12..14] == [0x08, 0x06] && f[20..22] == [0, 1])
            .then(|| f[14 + 24..14 + 28].try_into().ok())
            .flatten()
    }
}

/// The VXLAN datagrams among `frames`.
pub fn vxlan(frames: &[Seen]) -> Vec<Vxlan> {
    frames
        .iter()
        .filter_map(|f| Vxlan::parse(&f.bytes))
        .collect()
}

/// The object of network `net` in `show networks --json` (an array or a
/// map of objects naming it).
pub fn find_network<'a>(v: &'a Value, net: &str) -> Option<&'a Value> {
    match v {
        Value::Object(m) => {
            if m.get("name").and_then(Value::as_str) == Some(net)
                || m.get("network").and_then(Value::as_str) == Some(net)
            {
                return Some(v);
            }
            if let Some(n) = m.get(net).filter(|n| n.is_object()) {
                return Some(n);
            }
            m.values().find_map(|x| find_network(x, net))
        }
        Value::Array(a) => a.iter().find_map(|x| find_network(x, net)),
        _ => None,
    }
}

/// The number under `key` anywhere in `v`.
pub fn find_key(v: &Value, key: &str) -> Option<u64> {
    match v {
        Value::Object(m) => m
            .get(key)
            .and_then(Value::as_u64)
            .or_else(|| m.values().find_map(|x| find_key(x, key))),
        Value::Array(a) => a.iter().find_map(|x| find_key(x, key)),
        _ => None,
    }
}

/// Root and the tools; says why not.
pub fn can_run(test: &str) -> bool {
    if !tep_testing::is_root() {
        tep_testing::skip(format_args!(
            "{test}: needs root for network namespaces (CI runs it as root)"
        ));
        return false;
    }
    for tool in ["ip", "bridge", "ping", "timeout"] {
        if !tep_testing::have(tool) {
            tep_testing::skip(format_args!(
                "{test}: `{tool}` is not installed (.ci/run installs it)"
            ));
            return false;
        }
    }
    if !std::path::Path::new("/usr/bin/python3").exists() {
        tep_testing::skip(format_args!(
            "{test}: /usr/bin/python3 is not installed (.ci/run installs it)"
        ));
        return false;
    }
    true
}

/// A `[[network]]` table of `net`, host h1, with `extra` lines.
pub fn network(net: &Net, flood: bool, extra: &str) -> String {
    let flood = if flood {
        format!("flood = [\"{}\", \"{}\"]\n", vtep(2), vtep(3))
    } else {
        String::new()
    };
    format!(
        "[[network]]\nname = \"{}\"\nkind = \"vxlan\"\nvni = {}\nlocal = \"{}\"\n{flood}{extra}\n",
        net.name,
        net.vni,
        vtep(1)
    )
}

impl Lab {
    /// The MAC workload `w`'s neighbour table has for `addr`, if any.
    pub fn neighbour(&self, w: &str, addr: &str) -> Option<String> {
        let out = self.must(w, &["ip", "neigh", "show", addr, "dev", "eth0"]);
        let mut words = out.split_whitespace();
        words.find(|&x| x == "lladdr")?;
        words.next().map(str::to_string)
    }

    /// Where tep's FDB puts `mac` in `net`: (destination or "local",
    /// origin).
    pub fn fdb_at(&self, net: &str, mac: &str) -> Option<(String, String)> {
        let r = self.fdb_row(net, mac)?;
        let dst = r["dst"].as_str().unwrap_or("local").to_string();
        Some((dst, r["origin"].as_str().unwrap_or("?").to_string()))
    }

    /// Drops of `node` for `reason` (`tep show counters`).
    pub fn drops(&self, node: &str, reason: &str) -> u64 {
        let text = self.ctl(&["show", "counters"]).unwrap_or_default();
        text.lines()
            .find_map(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                (w.len() == 3 && w[0] == node && w[1] == reason).then(|| w[2].parse().ok())?
            })
            .unwrap_or(0)
    }

    pub fn log(&self) -> String {
        self.d().log()
    }
}

/// `(a, b)` for every ordered pair of the three workloads.
pub const PAIRS: [(u8, u8); 6] = [(1, 2), (1, 3), (2, 1), (2, 3), (3, 1), (3, 2)];

impl Lab {
    /// w1 asks (ARP) for workload 2 of blue, whose binding tep knows, and
    /// for 10.100.0.9, which nobody knows: tep answers the first with w2's
    /// MAC and it never reaches the underlay; the second is flooded.
    pub fn assert_arp_suppressed(&self) {
        let suppressed = self.counter("blue", "suppressed");
        let unknown = [10, 100, 0, 9];
        let underlay = self.sniff("h1", "ul", &unknown);
        self.must("w1b", &["ip", "neigh", "flush", "all"]);
        self.ping("w1b", &ip(2), 1, 3);
        assert_eq!(
            self.neighbour("w1b", &ip(2)),
            Some(mac(2)),
            "w1's ARP request for w2 went unanswered\n{}",
            self.log()
        );
        assert_eq!(self.ping("w1b", &ip(9), 1, 1), 0);
        assert!(
            underlay.seen(10),
            "the request for 10.100.0.9 was not flooded"
        );
        let requests: Vec<[u8; 4]> = vxlan(&underlay.stop())
            .iter()
            .filter(|v| v.src == [192, 0, 2, 1])
            .filter_map(Vxlan::arp_request)
            .collect();
        assert!(
            !requests.contains(&[10, 100, 0, 2]),
            "the request for w2 went onto the underlay: {requests:?}"
        );
        assert!(requests.contains(&unknown), "{requests:?}");
        assert!(self.counter("blue", "suppressed") > suppressed);
        self.ping_ok("w1b", &ip(2));
    }
}
