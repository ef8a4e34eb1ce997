//! The rig of the gateway-mode network tests (issues 26 and 27), shared
//! by `gateway_overlay.rs` and `gateway_evpn.rs`: tep in gateway mode on
//! `g`, its inner interface a trunk port whose 802.1Q VLANs are networks.
//!
//! ```text
//!  hosts ─h0──gi─ [g: tep over AF_XDP] ─gu──┐
//!                                           u: bridge ─┬─ k1: kernel VTEP 192.0.2.11
//!                                                      └─ k2: kernel VTEP 192.0.2.12
//! ```
//!
//! This kernel has no 8021q module, so the "hosts" side is a Python
//! script writing and reading tagged frames on an AF_PACKET socket (the
//! kernel moves a received tag into the socket's auxiliary data). What
//! each test puts on the kernel VTEPs is its own. Root only.

// Each test file uses its part.
#![allow(dead_code)]

use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use tep_testing::netns::{Daemon, Lab, Namespaces};

static RIGS: AtomicUsize = AtomicUsize::new(0);

pub const GW: &str = "192.0.2.1";
pub const K1: &str = "192.0.2.11";
pub const K2: &str = "192.0.2.12";

pub struct Rig {
    pub hosts: String,
    pub gw: String,
    pub k1: String,
    pub k2: String,
    pub dir: std::path::PathBuf,
    pub lab: Namespaces,
}

impl Lab for Rig {}

impl Rig {
    /// The rig's namespaces, named `<prefix><pid>x<n>…`, with `extra`
    /// namespaces and veths (as [`Namespaces::with_veths`] takes them)
    /// beside its own.
    pub fn new(prefix: &str, extra: &[&str], extra_veths: &[(&str, &str, &str, &str)]) -> Rig {
        let n = RIGS.fetch_add(1, Ordering::Relaxed);
        let tag = format!("{prefix}{}x{n}", std::process::id());
        let mut names = vec!["h", "g", "u", "k1", "k2"];
        names.extend_from_slice(extra);
        let mut veths = vec![
            ("h", "h0", "g", "gi"),
            ("g", "gu", "u", "u0"),
            ("k1", "k1u", "u", "u1"),
            ("k2", "k2u", "u", "u2"),
        ];
        veths.extend_from_slice(extra_veths);
        let lab = Namespaces::with_veths(&tag, &names, &veths)
            .unwrap_or_else(|e| panic!("namespaces: {e}"));
        let r = Rig {
            hosts: lab.ns("h"),
            gw: lab.ns("g"),
            k1: lab.ns("k1"),
            k2: lab.ns("k2"),
            dir: lab.dir.clone(),
            lab,
        };
        // No IPv6 chatter (router solicitations, MLD) among the frames the
        // tests count.
        for name in &names {
            for k in [
                "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1",
            ] {
                r.exec(&r.lab.ns(name), &["sysctl", "-qw", k], true);
            }
        }
        r.underlay();
        for (ns, dev) in [(&r.hosts, "h0"), (&r.gw, "gi")] {
            r.exec(ns, &["ip", "link", "set", dev, "up"], true);
        }
        r
    }

    /// The bridge `u` joining the gateway's underlay and the kernel VTEPs.
    fn underlay(&self) {
        let u = self.lab.ns("u");
        self.exec(&u, &["ip", "link", "add", "br0", "type", "bridge"], true);
        for dev in ["u0", "u1", "u2"] {
            self.exec(&u, &["ip", "link", "set", dev, "master", "br0", "up"], true);
        }
        self.exec(&u, &["ip", "link", "set", "br0", "up"], true);
        for (ns, dev, addr) in [
            (&self.gw, "gu", GW),
            (&self.k1, "k1u", K1),
            (&self.k2, "k2u", K2),
        ] {
            let a = format!("{addr}/24");
            self.exec(ns, &["ip", "addr", "add", &a, "dev", dev], true);
            self.exec(ns, &["ip", "link", "set", dev, "up"], true);
        }
        // A veth hands its peer partial checksums, which XDP would see:
        // the kernel VTEPs compute their own.
        for (ns, dev) in [(&self.k1, "k1u"), (&self.k2, "k2u")] {
            self.exec(ns, &["ethtool", "-K", dev, "tx", "off"], true);
            // An address may be on one bridge of each VTEP: only that
            // bridge answers ARP for it (Linux answers on every interface
            // by default, which would bridge the networks' workloads).
            self.exec(
                ns,
                &["sysctl", "-qw", "net.ipv4.conf.all.arp_ignore=1"],
                true,
            );
        }
    }

    pub fn mac(&self, ns: &str, dev: &str) -> String {
        let path = format!("/sys/class/net/{dev}/address");
        let out = self.exec(ns, &["cat", &path], true);
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// The control socket of the gateway's config.
    pub fn control(&self) -> String {
        self.dir
            .join(format!("{}.sock", self.gw))
            .display()
            .to_string()
    }

    /// Runs the hosts' script over `rows` (see [`HOSTS`]), with three
    /// frames in VLAN `stray` at the end; its JSON.
    pub fn hosts(&self, rows: &[Row], stray: u16) -> Value {
        let rows: Vec<Value> = rows
            .iter()
            .map(|r| json!({"vid": r.vid, "me": r.me, "wl": r.wl}))
            .collect();
        let config = json!({"rows": rows, "stray": stray}).to_string();
        let out = self.exec(
            &self.hosts,
            &["timeout", "60", "python3", "-c", HOSTS, &config],
            false,
        );
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(
            out.status.success(),
            "hosts script: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("hosts script: {e}: {text}"))
    }
}

/// What the hosts' script does in one network: in VLAN `vid` (None:
/// untagged) the hosts, at `me`, look for the workload at `wl`.
pub struct Row {
    pub vid: Option<u16>,
    pub me: &'static str,
    pub wl: &'static str,
}

/// Whether python3 can open AF_PACKET sockets; says why not.
pub fn can_run_hosts(test: &str) -> bool {
    let ok = tep_testing::netns::sh(&["python3", "-c", "import socket; socket.AF_PACKET"], false)
        .status
        .code()
        == Some(0);
    if !ok {
        tep_testing::skip(format_args!("{test}: python3 with AF_PACKET is missing"));
    }
    ok
}

/// The hosts behind the trunk port: per row, an ARP request for the
/// workload and an ICMP echo to the MAC that answered, resent until an
/// answer in the same VLAN comes (the gateway resolves its VTEPs' next
/// hops on the first packets); ARP requests for the hosts' address of a
/// VLAN answered in that VLAN. Then three frames tagged `stray`. Prints
/// per row what came back, the frames back in the stray VLAN, and every
/// ARP reply seen: [VLAN, sender address, target address, sender MAC].
pub const HOSTS: &str = r#"
import json, socket, struct, sys, time
SOL_PACKET, PACKET_AUXDATA, VLAN_VALID = 263, 8, 0x10
cfg = json.loads(sys.argv[1])
ROWS = [(r["vid"], socket.inet_aton(r["me"]), socket.inet_aton(r["wl"])) for r in cfg["rows"]]
# The hosts' address in each VLAN (None: untagged).
MINE = {vid: me for vid, me, _ in ROWS}
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
s.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
s.bind(("h0", 0))
mine = bytes.fromhex(open("/sys/class/net/h0/address").read().strip().replace(":", ""))
BCAST = b"\xff" * 6
replies = set()

def frame(dst, vid, ethertype, payload):
    tag = b"" if vid is None else struct.pack("!HH", 0x8100, vid)
    return dst + mine + tag + struct.pack("!H", ethertype) + payload

def arp(op, sha, spa, tha, tpa):
    return struct.pack("!HHBBH", 1, 0x0800, 6, 4, op) + sha + spa + tha + tpa

def csum(b):
    if len(b) % 2:
        b += b"\0"
    n = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while n >> 16:
        n = (n & 0xffff) + (n >> 16)
    return ~n & 0xffff

def echo(ident, me, wl):
    icmp = struct.pack("!BBHHH", 8, 0, 0, ident, 1) + b"tep-overlay" * 4
    icmp = icmp[:2] + struct.pack("!H", csum(icmp)) + icmp[4:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(icmp), ident, 0, 64, 1, 0, me, wl)
    return ip[:10] + struct.pack("!H", csum(ip)) + ip[12:] + icmp

def recv(until):
    """(VLAN or None, the frame without its tag), or None at `until`."""
    while True:
        left = until - time.time()
        if left <= 0:
            return None
        s.settimeout(left)
        try:
            data, anc, _, addr = s.recvmsg(65535, socket.CMSG_SPACE(20))
        except socket.timeout:
            return None
        if addr[2] == socket.PACKET_OUTGOING:
            continue
        vid = None
        for level, kind, d in anc:
            if level == SOL_PACKET and kind == PACKET_AUXDATA:
                status, _, _, _, _, tci, _ = struct.unpack("IIIHHHH", d[:20])
                if status & VLAN_VALID:
                    vid = tci & 0xfff
        if vid is None and data[12:14] == b"\x81\x00":
            vid = struct.unpack("!H", data[14:16])[0] & 0xfff
            data = data[:12] + data[16:]
        if data[12:14] == b"\x08\x06" and data[20:22] == b"\0\x02":
            replies.add((vid, socket.inet_ntoa(data[28:32]), socket.inet_ntoa(data[38:42]), data[22:28].hex(":")))
        return vid, data

def exchange(vid, request, want, seconds=10):
    """Sends `request` each second until a frame tagged `vid` that `want`
    takes arrives: what `want` made of it, or None."""
    end, resend = time.time() + seconds, 0
    while time.time() < end:
        if time.time() >= resend:
            s.send(request)
            resend = time.time() + 1
        got = recv(min(end, resend))
        if got is None:
            continue
        v, d = got
        me = MINE.get(v)
        if d[12:14] == b"\x08\x06" and d[20:22] == b"\0\x01" and d[38:42] == me:
            s.send(frame(d[6:12], v, 0x0806, arp(2, mine, me, d[22:28], d[28:32])))
            continue
        if v == vid:
            r = want(d)
            if r is not None:
                return r

out = {"rows": []}
for i, (vid, me, wl) in enumerate(ROWS):
    def arp_reply(d):
        if d[12:14] == b"\x08\x06" and d[20:22] == b"\0\x02" and d[28:32] == wl and d[38:42] == me:
            return d[22:28]
    who = frame(BCAST, vid, 0x0806, arp(1, mine, me, b"\0" * 6, wl))
    mac = exchange(vid, who, arp_reply)
    row = {"mac": mac.hex(":") if mac else None, "echo": False}
    ident = i + 1
    if mac:
        def reply(d):
            ip = d[14:]
            if d[12:14] == b"\x08\x00" and ip[9] == 1 and ip[12:16] == wl and ip[20] == 0:
                return struct.unpack("!H", ip[24:26])[0] == ident or None
        row["echo"] = bool(exchange(vid, frame(mac, vid, 0x0800, echo(ident, me, wl)), reply))
    out["rows"].append(row)
# The stray VLAN is no network's: nothing may come back in it.
vid, me, wl = ROWS[0]
back = 0
for i in range(3):
    s.send(frame(BCAST, cfg["stray"], 0x0806, arp(1, mine, me, b"\0" * 6, wl)))
end = time.time() + 1.5
while True:
    got = recv(end)
    if got is None:
        break
    back += got[0] == cfg["stray"]
out["stray"] = back
out["arp_replies"] = sorted(replies, key=str)
print(json.dumps(out))
"#;

pub fn counter(c: &Value, section: &str, key: &str) -> u64 {
    c[section][key].as_u64().unwrap_or(0)
}

/// Waits until the gateway's counters balance: frames received plus the
/// copies flooding made are frames sent plus drops (the workers publish
/// now and then); returns them.
pub fn balanced(gw: &Daemon) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
    loop {
        let c = gw.show("counters");
        let n = |k: &str| counter(&c, "io", k);
        let copies: u64 = gw
            .show("networks")
            .as_array()
            .unwrap()
            .iter()
            .map(|row| row["events"]["flood_copies"].as_u64().unwrap())
            .sum();
        let drops = c["drops_total"].as_u64().unwrap();
        let (received, sent) = (
            n("underlay_rx") + n("inner_rx"),
            n("underlay_tx") + n("inner_tx") + n("kernel_tx"),
        );
        if received + copies == sent + drops {
            return c;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "unbalanced: received {received} + flood copies {copies} != sent {sent} + drops {drops}\n{c}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}
