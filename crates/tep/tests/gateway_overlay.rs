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
//! reading tagged frames on an AF_PACKET socket (the rig of
//! `gateway_lab`). Root only; skipped loudly otherwise.

mod gateway_lab;

use gateway_lab::*;
use tep_testing::netns::{root_or_skip, spawn_daemon, Daemon, Lab};

impl Rig {
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

    fn gateway(&self) -> Daemon {
        let net = |name: &str, vni: u16, vlan: &str| {
            format!(
                "[[network]]\nname = \"{name}\"\nkind = \"vxlan\"\nvni = {vni}\n{vlan}\nlocal = \"{GW}\"\nflood = [\"{K1}\", \"{K2}\"]\n"
            )
        };
        let config = format!(
            "[gateway]\ninner = \"gi\"\nunderlay = \"gu\"\ncontrol = \"{}\"\n\n{}\n{}\n{}",
            self.control(),
            net("blue", 100, "vlan = 100"),
            net("red", 200, "vlan = 200"),
            net("green", 50, "")
        );
        spawn_daemon(&self.dir, &self.gw, &config)
    }
}

#[test]
fn vlans_are_networks() {
    if !root_or_skip("gateway_overlay vlans_are_networks") {
        return;
    }
    if !can_run_hosts("gateway_overlay vlans_are_networks") {
        return;
    }
    let r = Rig::new("tepv", &[], &[]);
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
    // The hosts are 10.0.0.1 in blue and red, 10.5.0.1 in green.
    let rows = [
        Row {
            vid: Some(100),
            me: "10.0.0.1",
            wl: "10.0.0.2",
        },
        Row {
            vid: Some(200),
            me: "10.0.0.1",
            wl: "10.0.0.2",
        },
        Row {
            vid: None,
            me: "10.5.0.1",
            wl: "10.5.0.2",
        },
    ];
    let got = r.hosts(&rows, 300);
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
    let rows = &got["rows"];
    assert_eq!(rows[0]["mac"], blue_wl.as_str(), "{}", context());
    assert_eq!(rows[1]["mac"], red_wl.as_str(), "{}", context());
    assert_eq!(rows[0]["echo"], true, "blue echo\n{}", context());
    assert_eq!(rows[1]["echo"], true, "red echo\n{}", context());
    // Untagged frames are green's, and come back untagged.
    assert_eq!(rows[2]["mac"], green_wl.as_str(), "{}", context());
    assert_eq!(rows[2]["echo"], true, "green echo\n{}", context());
    assert_eq!(got["stray"], 0, "{}", context());
    // The frames of VLAN 300 stayed with the kernel, counted.
    assert!(
        counter(&counters, "kernel", "inner_unknown_vlan") >= 3,
        "{}",
        context()
    );
    assert!(counter(&counters, "io", "inner_rx") > 0, "{}", context());
    assert_eq!(counters["drops_total"], 0, "{}", context());
}
