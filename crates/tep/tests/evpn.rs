//! tep as a VTEP of a BGP EVPN fabric (issue 27): the lab of `overlay_lab`
//! with FRR (zebra + bgpd, iBGP full mesh, `advertise-all-vni`) on h1, h2
//! and h3; h2 and h3 are kernel VXLAN VTEPs (`nolearning`), h1 runs tep
//! with `control = "evpn"` networks. Nobody writes a flood list or a MAC:
//! zebra fills the kernels' FDBs from BGP, tep follows h1's and writes its
//! local MACs where h1's zebra advertises them.
//!
//! blue (VNI 100) uses the devices tep makes (and removes when it stops);
//! red (VNI 200) uses devices the test makes, as an operator would, which
//! keep zebra's FDB while tep is down. Root and FRR only (CI has both);
//! skipped loudly otherwise.

mod overlay_lab;

use overlay_lab::*;
use serde_json::{json, Value};
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};
use tep_testing::frr::{self, Frr};

/// The networks' `[[network]]` tables, `[evpn]` before them.
fn evpn_networks() -> String {
    format!(
        "[evpn]\nport = 4790\n\n{}{}",
        network(&BLUE, false, "control = \"evpn\"\n"),
        network(
            &RED,
            false,
            "control = \"evpn\"\nevpn_device = \"vxr200\"\n"
        ),
    )
}

/// The lab with FRR on the three hosts. Fields drop in order: FRR stops,
/// then tep and the namespaces (the lab).
struct Fabric {
    frr: Vec<Frr>,
    lab: Lab,
}

impl Fabric {
    fn build(extra: &[&str]) -> Fabric {
        let lab = Lab::build_with(&[BLUE, RED], extra, true);
        // red's devices on h1, made by "the operator".
        let vxr = [
            "ip",
            "link",
            "add",
            "vxr200",
            "type",
            "vxlan",
            "id",
            "200",
            "local",
            "192.0.2.1",
            "dstport",
            "4790",
            "nolearning",
        ];
        lab.must("h1", &vxr);
        lab.must("h1", &["ip", "link", "add", "brr200", "type", "bridge"]);
        lab.must(
            "h1",
            &["ip", "link", "set", "vxr200", "master", "brr200", "up"],
        );
        lab.must("h1", &["ip", "link", "set", "brr200", "up"]);
        let mut frr = Vec::new();
        for i in 1..=3u8 {
            let peers: Vec<Ipv4Addr> = (1..=3u8).filter(|&j| j != i).map(v4).collect();
            let f = Frr::start(&lab.ns.ns(&format!("h{i}")), v4(i), &peers)
                .unwrap_or_else(|e| panic!("{e}"));
            frr.push(f);
        }
        Fabric { frr, lab }
    }

    fn frr(&self, i: u8) -> &Frr {
        &self.frr[usize::from(i - 1)]
    }

    /// `tep show evpn --json`: network `net`'s object.
    fn evpn(&self, net: &str) -> Value {
        self.lab.d().evpn(net)
    }

    /// The remote VTEPs tep took for `net` from BGP.
    fn vteps(&self, net: &str) -> Vec<String> {
        self.lab.d().evpn_vteps(net)
    }

    fn event(&self, net: &str, name: &str) -> u64 {
        self.evpn(net)["events"][name].as_u64().unwrap_or(0)
    }

    /// Waits (`secs`) for `what`, panicking with `label`, tep's log and
    /// FRR's.
    fn wait(&self, secs: u64, label: &str, what: impl FnMut() -> bool) -> Duration {
        let t0 = Instant::now();
        if !self.lab.until(secs, what) {
            let frr: Vec<String> = self.frr.iter().map(Frr::log).collect();
            panic!(
                "{label}: not within {secs} s\ntep:\n{}\nshow evpn:\n{}\nFRR:\n{}",
                self.lab.log(),
                self.lab.ctl(&["show", "evpn"]).unwrap_or_else(|e| e),
                frr.join("\n")
            );
        }
        t0.elapsed()
    }

    /// Each workload of `nets` sends one broadcast frame, so that its
    /// bridge (or tep) learns its MAC and zebra advertises it.
    fn announce(&self, ws: &[&str]) {
        for w in ws {
            let i = w.as_bytes()[1] - b'0';
            self.lab.send(
                w,
                json!({"dst": "ff:ff:ff:ff:ff:ff", "src": mac(i), "payload": format!("hello from {w}")}),
            );
        }
    }
}

fn v4(i: u8) -> Ipv4Addr {
    Ipv4Addr::new(192, 0, 2, i)
}

/// Root, the lab's tools and FRR; says why not.
fn can_run_evpn(test: &str) -> bool {
    if !can_run(test) {
        return false;
    }
    if let Some(what) = frr::missing() {
        tep_testing::skip(format_args!("{test}: {what} (.ci/run installs frr)"));
        return false;
    }
    true
}

/// The part of `f`'s zebra advertisements for VNI `vni` that are `mac`.
fn zebra_has(f: &Frr, vni: u32, mac: &str, vtep: &str) -> bool {
    f.evpn_macs(vni)
        .unwrap_or_default()
        .iter()
        .any(|(m, v)| m.eq_ignore_ascii_case(mac) && v == vtep)
}

#[test]
fn evpn_fabric_with_frr() {
    if !can_run_evpn("evpn_fabric_with_frr") {
        return;
    }
    let t0 = Instant::now();
    let mut f = Fabric::build(&["w2m", "w3m"]);
    f.lab.start_tep(&evpn_networks());
    for i in 1..=3 {
        f.frr(i)
            .wait_established(2, Duration::from_secs(20))
            .unwrap_or_else(|e| panic!("h{i}: {e}"));
    }
    eprintln!("BGP up in {:?}", t0.elapsed());
    let ws = ["w1b", "w2b", "w3b", "w1r", "w2r", "w3r"];
    f.announce(&ws);
    learned_from_bgp(&f);
    eprintln!("routes exchanged in {:?}", t0.elapsed());
    traffic(&f);
    bad_kernel_entries(&f);
    lost_session(&mut f);
    mobility(&f);
    reload(&f);
    restart(&mut f);
    eprintln!("evpn_fabric_with_frr: {:?}", t0.elapsed());
}

/// Type-3 and type-2 routes both ways: h2/h3 learn w1's MAC from VTEP h1
/// (tep's local MAC, advertised by h1's zebra), tep learns h2/h3 as
/// flood VTEPs and w2/w3's MACs.
fn learned_from_bgp(f: &Fabric) {
    let h1 = "192.0.2.1";
    for (net, vni) in [(&BLUE, 100), (&RED, 200)] {
        for i in [2u8, 3] {
            f.wait(15, &format!("h{i} learns w1's MAC in VNI {vni}"), || {
                zebra_has(f.frr(i), vni, &mac(1), h1)
            });
        }
        f.wait(15, &format!("tep's flood list of {}", net.name), || {
            f.vteps(net.name) == [vtep(2), vtep(3)]
        });
        for i in [2u8, 3] {
            f.wait(
                15,
                &format!("tep learns w{i}'s MAC in {}", net.name),
                || f.lab.fdb_at(net.name, &mac(i)) == Some((vtep(i), "external".into())),
            );
        }
    }
    let routes = f.frr(2).vtysh("show bgp l2vpn evpn route").unwrap();
    assert!(
        routes.to_lowercase().contains(&mac(1)),
        "h2's BGP table lacks w1's MAC:\n{routes}"
    );
    // tep's own local MAC is on its port, a static entry zebra advertises.
    let local = f.frr(1).evpn_local_macs(100).unwrap();
    assert!(
        local
            .iter()
            .any(|(m, port)| m == &mac(1) && port == "tepmac100"),
        "h1's zebra does not advertise w1 from tep's port: {local:?}"
    );
    assert_eq!(f.event("blue", "ignored_family"), 0);
}

/// Ping and a SHA-256-checked transfer between every pair of blue, ping
/// in red (the same MACs and addresses); a broadcast from w1 reaches w2
/// and w3 once each, and nothing in red.
fn traffic(f: &Fabric) {
    let lab = &f.lab;
    for (a, b) in PAIRS {
        lab.ping_ok(&format!("w{a}b"), &ip(b));
        lab.ping_ok(&format!("w{a}r"), &ip(b));
    }
    for (a, b) in PAIRS {
        lab.transfer(&format!("w{a}b"), &format!("w{b}b"), &ip(b), 1 << 20);
    }
    let mark = b"evpn-broadcast-7431";
    let sniffers: Vec<(&str, Sniffer)> = ["w2b", "w3b", "w2r", "w3r"]
        .into_iter()
        .map(|w| (w, lab.sniff(w, "eth0", mark)))
        .collect();
    lab.send(
        "w1b",
        json!({"dst": "ff:ff:ff:ff:ff:ff", "src": mac(1), "payload": String::from_utf8_lossy(mark)}),
    );
    std::thread::sleep(Duration::from_millis(500));
    for (w, s) in sniffers {
        let got = s
            .stop()
            .iter()
            .filter(|x| !x.outgoing && holds(&x.bytes, mark))
            .count();
        let want = usize::from(w.ends_with('b'));
        assert_eq!(got, want, "{w} saw the broadcast {got} times");
    }
}

/// Kernel FDB entries tep cannot use are counted, not taken: a port
/// other than the network's, another VNI, a multicast group (no multicast
/// underlay). An IPv6 VTEP in this IPv4 network the kernel itself refuses
/// (tep's check of the family is the unit tests' `sync`).
fn bad_kernel_entries(f: &Fabric) {
    let lab = &f.lab;
    let count = |e: &str| f.event("blue", e);
    let before = ["ignored_port", "ignored_vni", "ignored_address"].map(count);
    let entries: [(&str, &[&str]); 3] = [
        ("02:00:00:00:00:98", &["dst", "192.0.2.2", "port", "9999"]),
        ("02:00:00:00:00:97", &["dst", "192.0.2.2", "vni", "300"]),
        ("02:00:00:00:00:96", &["dst", "239.1.1.1", "via", "ul"]),
    ];
    let bridge = |verb: &str, m: &str, rest: &[&str]| {
        let mut a = vec!["bridge", "fdb", verb, m, "dev", "tepvx100"];
        a.extend_from_slice(rest);
        a.extend_from_slice(&["self", "permanent"]);
        lab.ns.run("h1", &a)
    };
    let v6 = bridge("add", "02:00:00:00:00:99", &["dst", "2001:db8::9"]);
    assert!(
        v6.is_err(),
        "the kernel took an IPv6 VTEP on an IPv4 device"
    );
    for (m, rest) in entries {
        bridge("add", m, rest).unwrap_or_else(|e| panic!("{e}"));
    }
    f.wait(5, "tep counts the entries it cannot use", || {
        ["ignored_port", "ignored_vni", "ignored_address"]
            .map(count)
            .iter()
            .zip(before)
            .all(|(now, was)| *now > was)
    });
    for (m, rest) in entries {
        assert_eq!(lab.fdb_at("blue", m), None, "{m} {rest:?} taken");
        bridge("del", m, &rest[..2]).unwrap_or_else(|e| panic!("{e}"));
    }
    assert_eq!(f.vteps("blue"), [vtep(2), vtep(3)]);
}

/// h3's bgpd stops: its routes are withdrawn and tep forgets h3 and its
/// MACs, while traffic between w1 and w2 goes on without a loss; h3's
/// bgpd back, h3 back.
fn lost_session(f: &mut Fabric) {
    let w1 = f.lab.ns.ns("w1b");
    let ping = std::process::Command::new("ip")
        .args([
            "netns", "exec", &w1, "ping", "-c", "80", "-i", "0.05", "-W", "1",
        ])
        .arg(ip(2))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    f.frr[2].stop_bgpd().unwrap();
    let gone = f.wait(15, "tep forgets h3", || {
        f.vteps("blue") == [vtep(2)] && f.lab.fdb_at("blue", &mac(3)).is_none()
    });
    eprintln!("h3's routes withdrawn from tep in {gone:?}");
    let out = ping.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("80 packets transmitted, 80 received"),
        "w1 -> w2 lost packets while h3 went away:\n{text}"
    );
    f.frr[2].start_bgpd().unwrap();
    f.wait(20, "h3 back in tep", || {
        f.vteps("blue") == [vtep(2), vtep(3)]
            && f.lab.fdb_at("blue", &mac(3)) == Some((vtep(3), "external".into()))
    });
}

/// w2's MAC moves behind h3: h2's bridge loses it, h3's learns it, BGP's
/// MAC mobility moves it, and tep follows. Then w3 moves behind tep.
fn mobility(f: &Fabric) {
    let lab = &f.lab;
    lab.must("h2", &["ip", "link", "del", "e100"]);
    lab.workload_in("w2m", "h3", "m100", &BLUE, 2);
    let t0 = Instant::now();
    f.announce(&["w2m"]);
    f.wait(20, "tep follows w2 to h3", || {
        lab.fdb_at("blue", &mac(2)) == Some((vtep(3), "external".into()))
    });
    eprintln!("w2's move to h3 followed by tep in {:?}", t0.elapsed());
    lab.ping_ok("w1b", &ip(2));
    // w3 moves behind tep: seen on the local side, the entry BGP made is
    // learned here and advertised, and the fabric follows.
    lab.must("h3", &["ip", "link", "del", "e100"]);
    lab.workload_in("w3m", "h1", "m100", &BLUE, 3);
    let t0 = Instant::now();
    f.announce(&["w3m"]);
    f.wait(20, "h2 learns w3 behind tep", || {
        zebra_has(f.frr(2), 100, &mac(3), "192.0.2.1")
    });
    eprintln!(
        "w3's move behind tep advertised to h2 in {:?}",
        t0.elapsed()
    );
    assert_eq!(
        lab.fdb_at("blue", &mac(3)),
        Some(("local".into(), "learned".into()))
    );
    lab.ping_ok("w2m", &ip(3));
}

/// A reload (a new overlay, what was taken carried over) keeps the EVPN
/// networks following their devices; one that changes `[evpn]` is
/// refused.
fn reload(f: &Fabric) {
    let lab = &f.lab;
    let d = lab.d();
    let write = |evpn: &str| {
        let text = format!("[host]\ncontrol = \"{}\"\n\n{evpn}", lab.ns.socket("h1"));
        std::fs::write(&d.config, text).unwrap();
    };
    write(&evpn_networks().replace("port = 4790", "port = 4791"));
    let e = lab.ctl(&["reload"]).unwrap_err();
    assert!(e.contains("change only with a restart"), "{e}");
    write(&evpn_networks().replace("control = \"evpn\"\n", "control = \"evpn\"\nageing = 600\n"));
    lab.ctl(&["reload"])
        .unwrap_or_else(|e| panic!("reload: {e}"));
    let m = "02:00:00:00:00:55";
    let add = [
        "bridge",
        "fdb",
        "add",
        m,
        "dev",
        "tepvx100",
        "dst",
        "192.0.2.2",
        "self",
        "extern_learn",
    ];
    lab.must("h1", &add);
    f.wait(5, "blue follows tepvx100 after the reload", || {
        lab.fdb_at("blue", m) == Some((vtep(2), "external".into()))
    });
    assert_eq!(lab.fdb_at("red", m), None);
    // What was taken before the reload is still there.
    assert_eq!(
        lab.fdb_at("blue", &mac(2)),
        Some((vtep(3), "external".into()))
    );
    lab.must(
        "h1",
        &["bridge", "fdb", "del", m, "dev", "tepvx100", "self"],
    );
    f.wait(5, "the entry withdrawn", || lab.fdb_at("blue", m).is_none());
}

/// tep restarted. Its own devices (blue) went with it, and zebra
/// withdrew w1; the operator's (red) kept zebra's FDB, which changed while
/// tep was down (w3 left red): the new tep starts from the dump, nothing
/// stale, and blue comes back from BGP.
fn restart(f: &mut Fabric) {
    let lab = &mut f.lab;
    drop(lab.tep.take());
    assert!(lab
        .ns
        .run("h1", &["ip", "link", "show", "tepvx100"])
        .is_err());
    assert!(lab.ns.run("h1", &["ip", "link", "show", "vxr200"]).is_ok());
    let h1 = "192.0.2.1";
    let f2 = &f.frr[1];
    f2.wait_for(
        "h2 withdraws w1 (tep stopped)",
        Duration::from_secs(15),
        |z| {
            (!zebra_has(z, 100, &mac(1), h1))
                .then_some(())
                .ok_or("still there".into())
        },
    )
    .unwrap();
    f.lab.must("h3", &["ip", "link", "del", "e200"]);
    let gone = || {
        let out = f
            .lab
            .must("h1", &["bridge", "fdb", "show", "dev", "vxr200"]);
        !out.contains(&mac(3))
    };
    assert!(f.lab.until(15, gone), "h1's zebra kept w3r");
    f.lab.start_tep(&evpn_networks());
    // From the dump alone: no BGP change is on its way for red.
    assert_eq!(
        f.lab.fdb_at("red", &mac(2)),
        Some((vtep(2), "external".into())),
        "red after restart: {:?}",
        f.lab.fdb("red")
    );
    assert_eq!(f.lab.fdb_at("red", &mac(3)), None, "stale w3r");
    assert_eq!(f.vteps("red"), [vtep(2), vtep(3)]);
    f.wait(20, "blue rebuilt from BGP", || {
        f.lab.fdb_at("blue", &mac(2)) == Some((vtep(3), "external".into()))
    });
    f.announce(&["w1b"]);
    f.lab.ping_ok("w1b", &ip(2));
}

/// Devices that cannot be used stop tep at start with an error naming
/// them: a missing device when tep may not create it, a device of another
/// VNI, one on no bridge. Needs no FRR.
#[test]
fn unusable_kernel_devices_are_refused_at_start() {
    if !can_run("unusable_kernel_devices_are_refused_at_start") {
        return;
    }
    let ns = tep_testing::netns::Namespaces::new(&format!("ed{}x", std::process::id()), &["h"])
        .unwrap_or_else(|e| panic!("{e}"));
    let must = |args: &[&str]| ns.run("h", args).unwrap_or_else(|e| panic!("{e}"));
    let vxlan = |vni: &str| {
        let local = ["local", "192.0.2.1", "dstport", "4790"];
        must(
            &[
                &["ip", "link", "add", "vx9", "type", "vxlan", "id", vni][..],
                &local,
            ]
            .concat(),
        );
    };
    must(&["ip", "link", "set", "lo", "up"]);
    must(&["ip", "addr", "add", "192.0.2.1/32", "dev", "lo"]);
    let start = |create: bool| -> String {
        let config = format!(
            "[host]\ncontrol = \"{}\"\n[evpn]\ncreate = {create}\n{}",
            ns.socket("h"),
            network(&BLUE, false, "control = \"evpn\"\nevpn_device = \"vx9\"\n")
        );
        let path = ns.dir.join("bad.toml");
        std::fs::write(&path, config).unwrap();
        let out = std::process::Command::new("timeout")
            .args([
                "10",
                "ip",
                "netns",
                "exec",
                &ns.ns("h"),
                tep_testing::netns::tep(),
                "run",
                "-c",
            ])
            .arg(&path)
            .output()
            .unwrap();
        assert!(!out.status.success(), "tep ran with unusable devices");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let e = start(false);
    assert!(
        e.contains("no device vx9") && e.contains("create = true"),
        "{e}"
    );
    vxlan("9");
    let e = start(true);
    assert!(
        e.contains("vx9 is VNI 9 local 192.0.2.1, not VNI 100"),
        "{e}"
    );
    must(&["ip", "link", "del", "vx9"]);
    vxlan("100");
    let e = start(false);
    assert!(e.contains("vx9 is on no bridge"), "{e}");
    // An operator's device on a bridge is used, and left in place.
    must(&["ip", "link", "add", "br9", "type", "bridge"]);
    must(&["ip", "link", "set", "vx9", "master", "br9"]);
    let mut d = tep_testing::netns::Daemon::start(
        std::path::Path::new(tep_testing::netns::tep()),
        &ns.ns("h"),
        &ns.dir,
        "ok",
        &format!(
            "[host]\ncontrol = \"{}\"\n[evpn]\ncreate = false\n{}",
            ns.dir.join("ok.sock").display(),
            network(&BLUE, false, "control = \"evpn\"\nevpn_device = \"vx9\"\n")
        ),
        None,
        &[],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let shown = d.control(&["show", "evpn"]).unwrap();
    assert!(
        shown.contains("vxlan vx9 bridge br9 port tepmac100"),
        "{shown}"
    );
    assert!(must(&["ip", "-d", "link", "show", "tepmac100"]).contains("master br9"));
    d.stop();
    assert!(
        ns.run("h", &["ip", "link", "show", "vx9"]).is_ok(),
        "the operator's device went"
    );
    assert!(
        ns.run("h", &["ip", "link", "show", "tepmac100"]).is_err(),
        "tep's port stayed"
    );
}

/// [`evpn_networks`] with ARP/ND suppression in blue (its neighbour
/// table is what MAC+IP routes fill and come from).
fn suppressing_blue() -> String {
    evpn_networks().replacen(
        "control = \"evpn\"\n",
        "control = \"evpn\"\nneigh_suppress = true\n",
        1,
    )
}

/// tep's neighbour of `addr` in blue: (MAC, origin).
fn tep_neigh(f: &Fabric, addr: &str) -> Option<(String, String)> {
    let text = f
        .lab
        .ctl(&["neigh", "show", "dev", "blue", "--json"])
        .ok()?;
    let rows: Value = serde_json::from_str(&text).ok()?;
    rows.as_array()?.iter().find_map(|r| {
        (r["ip"] == addr).then(|| {
            let s = |k: &str| r[k].as_str().unwrap_or("?").to_string();
            (s("mac"), s("origin"))
        })
    })
}

/// Whether `f`'s BGP table has the type-2 route of `mac` with `addr`.
fn bgp_has_mac_ip(f: &Frr, mac: &str, addr: &str) -> bool {
    let routes = f.vtysh("show bgp l2vpn evpn route").unwrap_or_default();
    let want = format!("[{mac}]:[32]:[{addr}]");
    routes.lines().any(|l| l.contains(&want))
}

/// MAC+IP (type-2 routes with an IP) between tep's neighbour table and
/// the fabric. Out: w1's address, learned by tep from w1's ARP reply, is
/// written on tep's bridge and advertised by h1's zebra; h2's zebra
/// installs it. In: w2's address on h2's bridge (what h2's zebra
/// advertises, as it would an SVI's ARP entry) reaches tep's table as
/// external, and tep answers w1's ARP request for it without sending the
/// request to the fabric. Both withdrawn when they go.
#[test]
fn evpn_mac_ip_with_frr() {
    if !can_run_evpn("evpn_mac_ip_with_frr") {
        return;
    }
    let t0 = Instant::now();
    let mut f = Fabric::build(&[]);
    f.lab.start_tep(&suppressing_blue());
    for i in 1..=3 {
        f.frr(i)
            .wait_established(2, Duration::from_secs(20))
            .unwrap_or_else(|e| panic!("h{i}: {e}"));
    }
    f.announce(&["w1b", "w2b", "w3b"]);
    f.wait(15, "tep learns w2's MAC from BGP", || {
        f.lab.fdb_at("blue", &mac(2)) == Some((vtep(2), "external".into()))
    });
    mac_ip_out(&f);
    mac_ip_in(&f);
    mac_ip_v6(&f);
    eprintln!("evpn_mac_ip_with_frr: {:?}", t0.elapsed());
}

/// IPv6 bindings both ways (tep's bridge has IPv6 on, and no address of
/// its own): a static neighbour of tep's of a local MAC is advertised too,
/// h2's IPv6 binding reaches tep's table.
fn mac_ip_v6(f: &Fabric) {
    let lab = &f.lab;
    let own = lab.must("h1", &["ip", "-6", "addr", "show", "dev", "tepbr100"]);
    assert!(!own.contains("inet6"), "tep's bridge has an address: {own}");
    lab.ctl(&[
        "neigh",
        "add",
        "fd00:100::1",
        "lladdr",
        &mac(1),
        "dev",
        "blue",
    ])
    .unwrap_or_else(|e| panic!("{e}"));
    f.wait(15, "h2's BGP table holds w1's IPv6 MAC+IP", || {
        let routes = f
            .frr(2)
            .vtysh("show bgp l2vpn evpn route")
            .unwrap_or_default();
        routes.contains(&format!("[{}]:[128]:[fd00:100::1]", mac(1)))
    });
    lab.must(
        "h2",
        &["sysctl", "-qw", "net.ipv6.conf.br100.disable_ipv6=0"],
    );
    let add = ["ip", "-6", "neigh", "replace", "fd00:100::2", "lladdr"];
    lab.must(
        "h2",
        &[&add[..], &[&mac(2), "dev", "br100", "nud", "noarp"]].concat(),
    );
    f.wait(15, "tep takes w2's IPv6 MAC+IP from BGP", || {
        tep_neigh(f, "fd00:100::2") == Some((mac(2), "external".into()))
    });
}

/// w1's binding, learned by tep, advertised by h1's zebra.
fn mac_ip_out(f: &Fabric) {
    let (m1, a1) = (mac(1), ip(1));
    // w2 asks for w1: w1's reply teaches tep (suppression snoops it).
    f.lab.ping_ok("w2b", &a1);
    f.wait(10, "tep learns w1's address", || {
        tep_neigh(f, &a1) == Some((m1.clone(), "learned".into()))
    });
    let t = f.wait(15, "h2's BGP table holds w1's MAC+IP", || {
        bgp_has_mac_ip(f.frr(2), &m1, &a1)
    });
    eprintln!("w1's MAC+IP in h2's BGP table {t:?} after tep learned it");
    let on_bridge = f
        .lab
        .must("h1", &["ip", "neigh", "show", "dev", "tepbr100"]);
    assert!(
        on_bridge.contains(&format!("{a1} lladdr {m1} PERMANENT")),
        "{on_bridge}"
    );
    // h2's zebra installs it on its bridge, as it would any remote one.
    let h2 = f.lab.must("h2", &["ip", "neigh", "show", "dev", "br100"]);
    assert!(h2.contains(&a1) && h2.contains("extern_learn"), "{h2}");
    assert_eq!(f.evpn("blue")["local_neighbours"], 1);
    assert!(f.event("blue", "neigh_exported") >= 1);
    // tep forgets it: zebra withdraws it.
    f.lab
        .ctl(&["neigh", "del", &a1, "dev", "blue"])
        .unwrap_or_else(|e| panic!("{e}"));
    f.wait(15, "h2 loses w1's MAC+IP", || {
        !bgp_has_mac_ip(f.frr(2), &m1, &a1)
    });
    assert!(f.event("blue", "neigh_withdrawn") >= 1);
    assert!(
        zebra_has(f.frr(2), 100, &m1, "192.0.2.1"),
        "w1's MAC went with its address"
    );
}

/// w2's binding, advertised by h2, taken by tep and answered for.
fn mac_ip_in(f: &Fabric) {
    let lab = &f.lab;
    let (m2, a2) = (mac(2), ip(2));
    let add = ["ip", "neigh", "replace", &a2, "lladdr", &m2, "dev", "br100"];
    lab.must("h2", &[&add[..], &["nud", "noarp"]].concat());
    let t = f.wait(15, "tep takes w2's MAC+IP from BGP", || {
        tep_neigh(f, &a2) == Some((m2.clone(), "external".into()))
    });
    eprintln!("w2's MAC+IP in tep's table {t:?} after h2's bridge had it");
    let h1 = lab.must("h1", &["ip", "neigh", "show", "dev", "tepbr100"]);
    assert!(h1.contains(&a2) && h1.contains("extern_learn"), "{h1}");
    assert!(f.event("blue", "neigh_imported") >= 1);
    // w1 asks for w2: tep answers; the request stays off the underlay.
    lab.assert_arp_suppressed();
    // h2 forgets it: so does tep.
    lab.must("h2", &["ip", "neigh", "del", &a2, "dev", "br100"]);
    f.wait(15, "tep drops w2's MAC+IP", || tep_neigh(f, &a2).is_none());
    assert!(f.event("blue", "neigh_removed") >= 1);
}
