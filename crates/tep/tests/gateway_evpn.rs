//! Gateway mode as a VTEP of a BGP EVPN fabric (issue 27): the rig of
//! `gateway_lab` (tep over AF_XDP on `g`, the inner interface a trunk
//! port) with FRR (zebra + bgpd, iBGP full mesh, `advertise-all-vni`) on
//! g, k1 and k2. k1 and k2 are kernel VXLAN VTEPs (`nolearning`, no flood
//! entries: zebra fills their FDBs from BGP); tep's two networks have
//! `control = "evpn"`: blue (VLAN 100, VNI 100) and red (untagged, VNI
//! 200). Nobody writes a flood list or a MAC: tep follows g's kernel FDB
//! and writes the MACs it learns behind the trunk port where g's zebra
//! advertises them.
//!
//! Each network has a workload namespace on each kernel VTEP, and the
//! networks overlap: 10.0.0.2 is k1's in blue and k2's in red, 10.0.0.3
//! the other way round. The hosts are 10.0.0.1 in blue and 10.0.0.11 in
//! red, so that an ARP reply says which network asked. tep runs as
//! nobody (`[gateway] user`, keeping CAP_NET_ADMIN for the bridge FDB).
//! Root, FRR and python3 only; skipped loudly otherwise.

mod gateway_lab;

use gateway_lab::*;
use serde_json::Value;
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};
use tep_testing::frr::{self, Frr};
use tep_testing::netns::{self, root_or_skip, spawn_daemon, Daemon, Lab};

/// A workload: its namespace, the kernel VTEP it is behind (0: k1, 1:
/// k2), its network's VNI, address and MAC.
struct Workload {
    name: &'static str,
    vtep: usize,
    vni: u32,
    addr: &'static str,
    mac: &'static str,
}

const WORKLOADS: [Workload; 4] = [
    Workload {
        name: "wb1",
        vtep: 0,
        vni: 100,
        addr: "10.0.0.2",
        mac: "02:00:00:00:01:01",
    },
    Workload {
        name: "wb2",
        vtep: 1,
        vni: 100,
        addr: "10.0.0.3",
        mac: "02:00:00:00:01:02",
    },
    Workload {
        name: "wr1",
        vtep: 0,
        vni: 200,
        addr: "10.0.0.3",
        mac: "02:00:00:00:02:01",
    },
    Workload {
        name: "wr2",
        vtep: 1,
        vni: 200,
        addr: "10.0.0.2",
        mac: "02:00:00:00:02:02",
    },
];

/// The kernel VTEPs' addresses, by [`Workload::vtep`].
const VTEPS: [&str; 2] = [K1, K2];

/// The tep network of VNI `vni`, its VLAN and the hosts' address in it.
fn network(vni: u32) -> (&'static str, Option<u16>, &'static str) {
    match vni {
        100 => ("blue", Some(100), "10.0.0.1"),
        _ => ("red", None, "10.0.0.11"),
    }
}

/// The rig with the workloads and FRR. Fields drop in order: FRR stops,
/// then the namespaces go.
struct Fabric {
    frr: Vec<Frr>,
    rig: Rig,
}

impl Fabric {
    fn build() -> Fabric {
        let names: Vec<&str> = WORKLOADS.iter().map(|w| w.name).collect();
        let ports: Vec<String> = WORKLOADS.iter().map(|w| format!("p{}", w.vni)).collect();
        let veths: Vec<(&str, &str, &str, &str)> = WORKLOADS
            .iter()
            .zip(&ports)
            .map(|(w, p)| (["k1", "k2"][w.vtep], p.as_str(), w.name, "eth0"))
            .collect();
        let rig = Rig::new("tepe", &names, &veths);
        for (w, port) in WORKLOADS.iter().zip(&ports) {
            rig.workload(w);
            let ns = [&rig.k1, &rig.k2][w.vtep];
            frr::kernel_vtep(ns, w.vni, v4(VTEPS[w.vtep]), 4789, port)
                .unwrap_or_else(|e| panic!("{}: {e}", w.name));
        }
        let routers = [(&rig.gw, GW), (&rig.k1, K1), (&rig.k2, K2)];
        let mut frr = Vec::new();
        for (ns, me) in routers {
            let peers: Vec<Ipv4Addr> = routers
                .iter()
                .filter(|(_, a)| *a != me)
                .map(|(_, a)| a.parse().unwrap())
                .collect();
            frr.push(Frr::start(ns, me.parse().unwrap(), &peers).unwrap_or_else(|e| panic!("{e}")));
        }
        Fabric { frr, rig }
    }

    /// tep in gateway mode on g, as nobody.
    fn gateway(&self) -> Daemon {
        let net = |vni: u32| {
            let (name, vlan, _) = network(vni);
            let vlan = vlan.map_or(String::new(), |v| format!("vlan = {v}\n"));
            format!(
                "[[network]]\nname = \"{name}\"\nkind = \"vxlan\"\nvni = {vni}\n{vlan}local = \"{GW}\"\ncontrol = \"evpn\"\n"
            )
        };
        let config = format!(
            "[gateway]\ninner = \"gi\"\nunderlay = \"gu\"\ncontrol = \"{}\"\nuser = \"nobody\"\n\n[evpn]\nport = 4790\n\n{}\n{}",
            self.rig.control(),
            net(100),
            net(200),
        );
        spawn_daemon(&self.rig.dir, &self.rig.gw, &config)
    }

    /// Waits (`secs`) for `what`, panicking with `label`, tep's state and
    /// log and FRR's logs.
    fn wait(&self, gw: &Daemon, secs: u64, label: &str, mut what: impl FnMut() -> bool) {
        let end = Instant::now() + Duration::from_secs(secs);
        while !what() {
            if Instant::now() > end {
                let frr: Vec<String> = self.frr.iter().map(Frr::log).collect();
                panic!(
                    "{label}: not within {secs} s\nshow evpn: {}\ntep:\n{}\nFRR:\n{}",
                    gw.control(&["show", "evpn"]).unwrap_or_else(|e| e),
                    gw.log(),
                    frr.join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// One broadcast from each workload (an ARP request nobody answers),
    /// so that its VTEP's bridge learns it and zebra advertises it.
    fn announce(&self) {
        let pings: Vec<_> = WORKLOADS
            .iter()
            .map(|w| {
                std::process::Command::new("ip")
                    .args(["netns", "exec", &self.rig.lab.ns(w.name)])
                    .args(["ping", "-c", "1", "-w", "1", "10.0.0.99"])
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for mut p in pings {
            let _ = p.wait();
        }
    }
}

impl Rig {
    /// Workload `w`'s address and MAC on its `eth0`, under the kernel
    /// VXLAN device's MTU.
    fn workload(&self, w: &Workload) {
        let ns = self.lab.ns(w.name);
        let set = ["ip", "link", "set", "eth0", "address", w.mac, "mtu", "1450"];
        self.exec(&ns, &set, true);
        let addr = format!("{}/24", w.addr);
        self.exec(&ns, &["ip", "addr", "add", &addr, "dev", "eth0"], true);
        self.exec(&ns, &["ip", "link", "set", "eth0", "up"], true);
    }
}

fn v4(a: &str) -> IpAddr {
    a.parse().unwrap()
}

/// tep's FDB row for `mac` in `net` (`tep fdb show --json`): its
/// destination and origin.
fn fdb_at(gw: &Daemon, net: &str, mac: &str) -> Option<(String, String)> {
    let text = gw
        .control(&["fdb", "show", "dev", net, "--json"])
        .unwrap_or_else(|e| panic!("fdb show: {e}\n{}", gw.log()));
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("fdb show: {e}: {text}"));
    let rows = v.as_array().or_else(|| v["fdb"].as_array())?;
    let r = rows.iter().find(|r| {
        r["mac"]
            .as_str()
            .is_some_and(|m| m.eq_ignore_ascii_case(mac))
    })?;
    let dst = r["dst"].as_str().unwrap_or("local").to_string();
    Some((dst, r["origin"].as_str().unwrap_or("?").to_string()))
}

/// Whether `f`'s zebra has `mac` in `vni` as a remote MAC behind `vtep`.
fn zebra_has(f: &Frr, vni: u32, mac: &str, vtep: &str) -> bool {
    f.evpn_macs(vni)
        .unwrap_or_default()
        .iter()
        .any(|(m, v)| m.eq_ignore_ascii_case(mac) && v == vtep)
}

/// Root, python3 with AF_PACKET, FRR and user nobody; says why not.
fn can_run(test: &str) -> bool {
    if !root_or_skip(test) || !can_run_hosts(test) {
        return false;
    }
    if let Some(what) = frr::missing() {
        tep_testing::skip(format_args!("{test}: {what} (.ci/run installs frr)"));
        return false;
    }
    if netns::id("-u", "nobody").is_none() {
        tep_testing::skip(format_args!("{test}: no user nobody"));
        return false;
    }
    true
}

#[test]
fn gateway_is_an_evpn_vtep() {
    let test = "gateway_evpn gateway_is_an_evpn_vtep";
    if !can_run(test) {
        return;
    }
    let t0 = Instant::now();
    let f = Fabric::build();
    let mut gw = f.gateway();
    dropped_privileges(&gw);
    for (i, r) in f.frr.iter().enumerate() {
        r.wait_established(2, Duration::from_secs(20))
            .unwrap_or_else(|e| panic!("router {i}: {e}\n{}", gw.log()));
    }
    eprintln!("BGP up in {:?}", t0.elapsed());
    f.announce();
    learned_from_bgp(&f, &gw);
    eprintln!("routes in tep in {:?}", t0.elapsed());
    let hosts = f.rig.mac(&f.rig.hosts, "h0");
    through_the_gateway(&f, &gw);
    exported(&f, &gw, &hosts);
    // Stopped, tep takes its kernel devices with it: zebra withdraws the
    // VNIs, and the hosts' MACs with them.
    assert_eq!(gw.stop(), Some(0), "{}", gw.log());
    for dev in ["tepvx100", "tepbr200", "tepmac100"] {
        let out = f.rig.exec(&f.rig.gw, &["ip", "link", "show", dev], false);
        assert!(!out.status.success(), "{dev} left behind");
    }
    f.wait(&gw, 15, "k1 withdraws the hosts' MAC", || {
        !zebra_has(&f.frr[1], 100, &hosts, GW)
    });
    eprintln!("{test}: {:?}", t0.elapsed());
}

/// Every thread of tep runs as nobody with CAP_NET_ADMIN only (the
/// default `capabilities`), the EVPN thread among them.
fn dropped_privileges(gw: &Daemon) {
    assert!(gw.log().contains("privileges dropped"), "{}", gw.log());
    let names: Vec<String> = std::fs::read_dir(format!("/proc/{}/task", gw.pid()))
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|n| n.trim().to_string())
        .collect();
    assert!(names.iter().any(|n| n == "tep-evpn"), "threads: {names:?}");
    let uid = netns::id("-u", "nobody").unwrap();
    for t in netns::thread_credentials(gw.pid()) {
        assert_eq!(t[0], format!("{uid} {uid} {uid} {uid}"), "Uid: {t:?}");
        assert_eq!(t[3], "0000000000001000", "CapEff: {t:?}");
    }
}

/// tep takes both kernel VTEPs as each network's flood list (type-3
/// routes) and each workload as an `external` entry behind its VTEP
/// (type-2), and nothing of one network in the other.
fn learned_from_bgp(f: &Fabric, gw: &Daemon) {
    for vni in [100, 200] {
        let net = network(vni).0;
        f.wait(gw, 15, &format!("tep's flood list of {net}"), || {
            gw.evpn_vteps(net) == [K1, K2]
        });
    }
    for w in &WORKLOADS {
        let net = network(w.vni).0;
        let want = Some((VTEPS[w.vtep].to_string(), "external".to_string()));
        f.wait(gw, 15, &format!("tep learns {} in {net}", w.name), || {
            fdb_at(gw, net, w.mac) == want
        });
        let other = network(if w.vni == 100 { 200 } else { 100 }).0;
        assert_eq!(fdb_at(gw, other, w.mac), None, "{} in {other}", w.name);
    }
}

/// The hosts' frames through the gateway per network (ARP and ping to
/// each workload, the workloads' ARP for the hosts answered), and no
/// frame of one network in the other: an ARP reply names the network
/// that asked by its target address.
fn through_the_gateway(f: &Fabric, gw: &Daemon) {
    let rows: Vec<Row> = WORKLOADS
        .iter()
        .map(|w| {
            let (_, vid, me) = network(w.vni);
            Row {
                vid,
                me,
                wl: w.addr,
            }
        })
        .collect();
    let got = f.rig.hosts(&rows, 300);
    let counters = balanced(gw);
    let context = || {
        format!(
            "hosts: {got}\n{}\n{}\n{}",
            gw.control(&["show", "counters"]).unwrap_or_default(),
            gw.control(&["show", "evpn"]).unwrap_or_default(),
            gw.log()
        )
    };
    for (i, w) in WORKLOADS.iter().enumerate() {
        let row = &got["rows"][i];
        assert_eq!(row["mac"], w.mac, "{}: {}", w.name, context());
        assert_eq!(row["echo"], true, "{} echo: {}", w.name, context());
    }
    let mut want: Vec<Value> = WORKLOADS
        .iter()
        .map(|w| {
            let (_, vid, me) = network(w.vni);
            serde_json::json!([vid, w.addr, me, w.mac])
        })
        .collect();
    let mut replies = got["arp_replies"].as_array().cloned().unwrap_or_default();
    want.sort_by_key(Value::to_string);
    replies.sort_by_key(Value::to_string);
    assert_eq!(replies, want, "ARP replies: {}", context());
    assert_eq!(got["stray"], 0, "{}", context());
    assert!(
        counter(&counters, "kernel", "inner_unknown_vlan") >= 3,
        "{}",
        context()
    );
    assert_eq!(counters["drops_total"], 0, "{}", context());
}

/// The hosts' MAC, learned by tep in both networks, went to g's bridges
/// on tep's ports; g's zebra advertises it, and k1's and k2's zebra have
/// it behind VTEP g in both VNIs.
fn exported(f: &Fabric, gw: &Daemon, hosts: &str) {
    for vni in [100, 200] {
        let net = network(vni).0;
        assert_eq!(
            fdb_at(gw, net, hosts),
            Some(("local".to_string(), "learned".to_string())),
            "the hosts in {net}"
        );
        for (i, k) in ["k1", "k2"].iter().enumerate() {
            f.wait(
                gw,
                15,
                &format!("{k} learns the hosts in VNI {vni}"),
                || zebra_has(&f.frr[i + 1], vni, hosts, GW),
            );
        }
        let port = format!("tepmac{vni}");
        let local = f.frr[0].evpn_local_macs(vni).unwrap();
        assert!(
            local.iter().any(|(m, p)| m == hosts && *p == port),
            "g's zebra does not advertise the hosts from {port}: {local:?}"
        );
        assert!(gw.evpn(net)["local_macs"].as_u64() >= Some(1), "{net}");
    }
}
