//! Gateway mode carrying networks, as a hardware VTEP does: the inner
//! interface is a trunk port whose 802.1Q VLANs are networks.
//!
//! ```text
//!  hosts ─h0──gi─ [gw: tep over AF_XDP] ─gu──┐
//!                                            u: bridge ─┬─ k1: kernel VTEP 192.0.2.11
//!                                                       └─ k2: kernel VTEP 192.0.2.12
//! ```
//!
//! Networks "blue" (VLAN 100, VNI 100), "red" (VLAN 200, VNI 200) and
//! "green" (untagged, VNI 50), each flooding to both kernel VTEPs, which
//! flood to each other and to the gateway (`bridge fdb append
//! 00:00:00:00:00:00 dst …`). The workloads overlap: 10.0.0.2 is k1's
//! blue bridge and k2's red one; green's is 10.5.0.2 on k2. This kernel has
//! no 8021q module, so the "hosts" side is a Python script writing and
//! reading tagged frames on an AF_PACKET socket (the kernel moves a
//! received tag into the socket's auxiliary data). Root only; skipped
//! loudly otherwise.

use std::sync::atomic::{AtomicUsize, Ordering};
use tep_testing::netns::{root_or_skip, spawn_daemon, Daemon, Lab, Namespaces};

static RIGS: AtomicUsize = AtomicUsize::new(0);

const GW: &str = "192.0.2.1";
const K1: &str = "192.0.2.11";
const K2: &str = "192.0.2.12";

struct Rig {
    hosts: String,
    gw: String,
    k1: String,
    k2: String,
    dir: std::path::PathBuf,
    _lab: Namespaces,
}

impl Lab for Rig {}

impl Rig {
    fn new() -> Rig {
        let n = RIGS.fetch_add(1, Ordering::Relaxed);
        let tag = format!("tepv{}x{n}", std::process::id());
        let veths = [
            ("h", "h0", "g", "gi"),
            ("g", "gu", "u", "u0"),
            ("k1", "k1u", "u", "u1"),
            ("k2", "k2u", "u", "u2"),
        ];
        let lab = Namespaces::with_veths(&tag, &["h", "g", "u", "k1", "k2"], &veths)
            .unwrap_or_else(|e| panic!("namespaces: {e}"));
        let r = Rig {
            hosts: lab.ns("h"),
            gw: lab.ns("g"),
            k1: lab.ns("k1"),
            k2: lab.ns("k2"),
            dir: lab.dir.clone(),
            _lab: lab,
        };
        let u = format!("{tag}u");
        // No IPv6 chatter (router solicitations, MLD) among the frames the
        // test counts.
        for ns in [&r.hosts, &r.gw, &u, &r.k1, &r.k2] {
            for k in [
                "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1",
            ] {
                r.exec(ns, &["sysctl", "-qw", k], true);
            }
        }
        r.exec(&u, &["ip", "link", "add", "br0", "type", "bridge"], true);
        for dev in ["u0", "u1", "u2"] {
            r.exec(&u, &["ip", "link", "set", dev, "master", "br0", "up"], true);
        }
        r.exec(&u, &["ip", "link", "set", "br0", "up"], true);
        for (ns, dev, addr) in [(&r.gw, "gu", GW), (&r.k1, "k1u", K1), (&r.k2, "k2u", K2)] {
            let a = format!("{addr}/24");
            r.exec(ns, &["ip", "addr", "add", &a, "dev", dev], true);
            r.exec(ns, &["ip", "link", "set", dev, "up"], true);
        }
        // A veth hands its peer partial checksums, which XDP would see:
        // the kernel VTEPs compute their own.
        for (ns, dev) in [(&r.k1, "k1u"), (&r.k2, "k2u")] {
            r.exec(ns, &["ethtool", "-K", dev, "tx", "off"], true);
            // 10.0.0.2 is on one bridge of each VTEP: only that bridge
            // answers ARP for it (Linux answers on every interface by
            // default, which would bridge the networks' workloads).
            r.exec(
                ns,
                &["sysctl", "-qw", "net.ipv4.conf.all.arp_ignore=1"],
                true,
            );
        }
        for (ns, dev) in [(&r.hosts, "h0"), (&r.gw, "gi")] {
            r.exec(ns, &["ip", "link", "set", dev, "up"], true);
        }
        r
    }

    /// A kernel VTEP's bridge domain `vni` in `ns` (local `me`), flooding
    /// to the other two VTEPs; `workload` is an address for its bridge.
    fn kernel_network(&self, ns: &str, me: &str, vni: u16, workload: Option<&str>) {
        let (vx, br) = (format!("vx{vni}"), format!("br{vni}"));
        let id = vni.to_string();
        let add = [
            "ip", "link", "add", &vx, "type", "vxlan", "id", &id, "local", me, "dstport", "4789",
        ];
        self.exec(ns, &add, true);
        self.exec(ns, &["ip", "link", "add", &br, "type", "bridge"], true);
        self.exec(ns, &["ip", "link", "set", &vx, "master", &br, "up"], true);
        self.exec(ns, &["ip", "link", "set", &br, "up"], true);
        for other in [GW, K1, K2].into_iter().filter(|&a| a != me) {
            let fdb = [
                "bridge",
                "fdb",
                "append",
                "00:00:00:00:00:00",
                "dev",
                &vx,
                "dst",
                other,
            ];
            self.exec(ns, &fdb, true);
        }
        if let Some(a) = workload {
            self.exec(ns, &["ip", "addr", "add", a, "dev", &br], true);
        }
    }

    fn mac(&self, ns: &str, dev: &str) -> String {
        let path = format!("/sys/class/net/{dev}/address");
        let out = self.exec(ns, &["cat", &path], true);
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    fn gateway(&self) -> Daemon {
        let net = |name: &str, vni: u16, vlan: &str| {
            format!(
                "[[network]]\nname = \"{name}\"\nkind = \"vxlan\"\nvni = {vni}\n{vlan}\nlocal = \"{GW}\"\nflood = [\"{K1}\", \"{K2}\"]\n"
            )
        };
        let config = format!(
            "[gateway]\ninner = \"gi\"\nunderlay = \"gu\"\ncontrol = \"{}\"\n\n{}\n{}\n{}",
            self.dir.join(format!("{}.sock", self.gw)).display(),
            net("blue", 100, "vlan = 100"),
            net("red", 200, "vlan = 200"),
            net("green", 50, "")
        );
        spawn_daemon(&self.dir, &self.gw, &config)
    }

    /// Runs the hosts' script; its JSON.
    fn hosts(&self) -> serde_json::Value {
        let out = self.exec(
            &self.hosts,
            &["timeout", "60", "python3", "-c", HOSTS],
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

/// The hosts behind the trunk port: per VLAN (100, 200, untagged), an ARP
/// request for the workload and an ICMP echo to the MAC that answered,
/// resent until an answer in the same VLAN comes (the gateway resolves
/// its VTEPs' next hops on the first packets); ARP requests for the
/// hosts' addresses answered in their VLAN. Then three frames tagged 300.
/// Prints what came back.
const HOSTS: &str = r#"
import json, socket, struct, time
SOL_PACKET, PACKET_AUXDATA, VLAN_VALID = 263, 8, 0x10
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
s.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
s.bind(("h0", 0))
mine = bytes.fromhex(open("/sys/class/net/h0/address").read().strip().replace(":", ""))
BCAST = b"\xff" * 6
# VLAN (None: untagged): (the hosts' address, the workload's).
NETS = {100: (bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])),
        200: (bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])),
        None: (bytes([10, 5, 0, 1]), bytes([10, 5, 0, 2]))}

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
        me = NETS.get(v, (None,))[0]
        if d[12:14] == b"\x08\x06" and d[20:22] == b"\0\x01" and d[38:42] == me:
            s.send(frame(d[6:12], v, 0x0806, arp(2, mine, me, d[22:28], d[28:32])))
            continue
        if v == vid:
            r = want(d)
            if r is not None:
                return r

out = {}
for vid, (me, wl) in NETS.items():
    def arp_reply(d):
        if d[12:14] == b"\x08\x06" and d[20:22] == b"\0\x02" and d[28:32] == wl and d[38:42] == me:
            return d[22:28]
    who = frame(BCAST, vid, 0x0806, arp(1, mine, me, b"\0" * 6, wl))
    mac = exchange(vid, who, arp_reply)
    row = {"mac": mac.hex(":") if mac else None, "echo": False}
    ident = vid or 1
    if mac:
        def reply(d):
            ip = d[14:]
            if d[12:14] == b"\x08\x00" and ip[9] == 1 and ip[12:16] == wl and ip[20] == 0:
                return struct.unpack("!H", ip[24:26])[0] == ident or None
        row["echo"] = bool(exchange(vid, frame(mac, vid, 0x0800, echo(ident, me, wl)), reply))
    out[str(vid)] = row
# VLAN 300 is no network's: nothing may come back in it.
back = 0
for i in range(3):
    s.send(frame(BCAST, 300, 0x0806, arp(1, mine, NETS[100][0], b"\0" * 6, NETS[100][1])))
end = time.time() + 1.5
while True:
    got = recv(end)
    if got is None:
        break
    back += got[0] == 300
out["300"] = back
print(json.dumps(out))
"#;

fn counter(c: &serde_json::Value, section: &str, key: &str) -> u64 {
    c[section][key].as_u64().unwrap_or(0)
}

/// Waits until the gateway's counters balance: frames received plus the
/// copies flooding made are frames sent plus drops (the workers publish
/// now and then); returns them.
fn balanced(gw: &Daemon) -> serde_json::Value {
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

#[test]
fn vlans_are_networks() {
    if !root_or_skip("gateway_overlay vlans_are_networks") {
        return;
    }
    if tep_testing::netns::sh(&["python3", "-c", "import socket; socket.AF_PACKET"], false)
        .status
        .code()
        != Some(0)
    {
        tep_testing::skip("gateway_overlay: python3 with AF_PACKET is missing");
        return;
    }
    let r = Rig::new();
    let workload = Some("10.0.0.2/24");
    r.kernel_network(&r.k1, K1, 100, workload);
    r.kernel_network(&r.k1, K1, 200, None);
    r.kernel_network(&r.k1, K1, 50, None);
    r.kernel_network(&r.k2, K2, 100, None);
    r.kernel_network(&r.k2, K2, 200, workload);
    r.kernel_network(&r.k2, K2, 50, Some("10.5.0.2/24"));
    let (blue_wl, red_wl) = (r.mac(&r.k1, "br100"), r.mac(&r.k2, "br200"));
    let green_wl = r.mac(&r.k2, "br50");
    assert_ne!(blue_wl, red_wl);
    let gw = r.gateway();
    let got = r.hosts();
    let counters = balanced(&gw);
    let context = || {
        format!(
            "hosts: {got}\n{}\n{}\n{}",
            gw.control(&["show", "counters"]).unwrap_or_default(),
            gw.control(&["show", "networks"]).unwrap_or_default(),
            gw.log()
        )
    };
    // The overlapping address answers in each VLAN from its own network's
    // workload: blue's behind k1, red's behind k2.
    assert_eq!(got["100"]["mac"], blue_wl.as_str(), "{}", context());
    assert_eq!(got["200"]["mac"], red_wl.as_str(), "{}", context());
    assert_eq!(got["100"]["echo"], true, "blue echo\n{}", context());
    assert_eq!(got["200"]["echo"], true, "red echo\n{}", context());
    // Untagged frames are green's, and come back untagged.
    assert_eq!(got["None"]["mac"], green_wl.as_str(), "{}", context());
    assert_eq!(got["None"]["echo"], true, "green echo\n{}", context());
    assert_eq!(got["300"], 0, "{}", context());
    // The frames of VLAN 300 stayed with the kernel, counted.
    assert!(
        counter(&counters, "kernel", "inner_unknown_vlan") >= 3,
        "{}",
        context()
    );
    assert!(counter(&counters, "io", "inner_rx") > 0, "{}", context());
    assert_eq!(counters["drops_total"], 0, "{}", context());
}
