//! Several data networks in gateway mode (issue 28): `[[pfcp.network]]
//! vlan`, each network an 802.1Q VLAN of the inner interface (`vd`). The
//! data network's side (`vn` in `dn`) has no VLAN devices (no 8021q
//! here): smf.py reads and writes the tagged frames on an AF_PACKET
//! socket, and the kernel there drops them (a VID it has no device for).

use super::*;

/// The MAC of `dev` in `ns`.
fn mac_of(lab: &Lab, ns: &str, dev: &str) -> String {
    let out = lab.exec(ns, &["ip", "-j", "link", "show", dev], true);
    let v: Value = serde_json::from_slice(&out.stdout).expect("ip -j link");
    v[0]["address"].as_str().expect("a MAC").to_string()
}

/// A gateway UPF's config with "internet" on VLAN 10 and "ims" on VLAN
/// 20 (the same UE pool), each network's table ending with `extra`.
fn two_vlan_networks(lab: &Lab, extra: [&str; 2]) -> String {
    format!(
        "[gateway]\nunderlay = \"vu\"\ninner = \"vd\"\ncontrol = \"{}\"\n\n\
         [pfcp]\nlisten = \"{UPF}\"\nnode_id = \"{NODE_ID}\"\nn3 = [\"{UPF}\"]\n\n\
         [[pfcp.network]]\nname = \"internet\"\nvlan = 10\nue_prefixes = [\"10.45.0.0/16\"]\n{}\n\
         [[pfcp.network]]\nname = \"ims\"\nvlan = 20\nue_prefixes = [\"10.45.0.0/16\"]\n{}",
        lab.dir.join(format!("{}.sock", lab.up)).display(),
        extra[0],
        extra[1],
    )
}

/// "internet" on VLAN 10 and "ims" on VLAN 20, a session in each with
/// the same UE address: each uplink leaves tagged with its network's VID,
/// each tagged downlink reaches its own session's TEID (the first uplink
/// packet, before the workers know the next hop, is dropped rather than
/// handed to the kernel, which would send it untagged); a frame of VID 30
/// and an untagged one (no network is untagged) reach no gNB and are
/// counted.
#[test]
fn a_gateway_upf_reaches_data_networks_by_vlan() {
    let test = "a_gateway_upf_reaches_data_networks_by_vlan";
    if !scapy_or_skip(test) {
        return;
    }
    let lab = Lab::new(true);
    let config = two_vlan_networks(&lab, ["", ""]);
    // The next hop of a tagged network is the kernel's neighbour entry,
    // configured: the kernel cannot ARP on a VLAN it has no device for,
    // and tep never hands it a tagged network's packet.
    let dn_mac = mac_of(&lab, &lab.dn, "vn");
    let neigh = [
        "ip",
        "neigh",
        "replace",
        DN,
        "lladdr",
        &dn_mac,
        "dev",
        "vd",
        "nud",
        "permanent",
    ];
    lab.exec(&lab.up, &neigh, true);
    let tep = spawn_daemon(&lab.dir, &lab.up, &config);
    let mut smf = Smf::start(&lab);
    smf.run(&tep, json!({"run": "associate"}));
    let r = smf.run(
        &tep,
        json!({"run": "vlan_networks", "first": 0, "dev": "vn", "upf_mac": mac_of(&lab, &lab.up, "vd")}),
    );
    assert_eq!(
        (r["uplink"].as_u64(), r["downlink"].as_u64()),
        (Some(2), Some(2))
    );
    assert_eq!(pfcp_counter(&tep, "sessions_established"), 2);
    for reason in ["no_session", "wrong_network"] {
        assert_eq!(dropped(&tep, reason), 0, "{reason}: {}", tep.log());
    }
    // The first uplink packet, which met no next hop yet.
    assert_eq!(dropped(&tep, "no_route"), 1);
    // Both strays are tep's (the UE pool steers them) or the steering
    // program's (VID 30): dropped unknown_vlan either way.
    let c = tep.show("counters");
    let kernel = c["kernel"]["inner_unknown_vlan"].as_u64().unwrap_or(0);
    assert_eq!(dropped(&tep, "unknown_vlan") + kernel, 2, "{c}");
}

/// "internet" (VLAN 10) and "ims" (VLAN 20) each with a router of its
/// own (`address`, `gateway`) and no neighbour entry anywhere: tep asks
/// for each router by ARP on its VLAN (the first uplink packet of each
/// network waits, dropped `no_route`), answers for its own address there
/// with the inner interface's MAC, sends each network's uplink to its
/// own router's MAC and ignores a stranger's ARP.
#[test]
fn a_gateway_upf_resolves_each_data_networks_router_by_arp() {
    let test = "a_gateway_upf_resolves_each_data_networks_router_by_arp";
    if !scapy_or_skip(test) {
        return;
    }
    let lab = Lab::new(true);
    let config = two_vlan_networks(
        &lab,
        [
            "address = \"10.60.0.1/24\"\ngateway = \"10.60.0.254\"\n",
            "address = \"10.70.0.1/24\"\ngateway = \"10.70.0.254\"\n",
        ],
    );
    let tep = spawn_daemon(&lab.dir, &lab.up, &config);
    let mut smf = Smf::start(&lab);
    smf.run(&tep, json!({"run": "associate"}));
    let router = |vid: u16, net: &str, mac: &str| json!({"vid": vid, "address": format!("{net}.1"), "gateway": format!("{net}.254"), "mac": mac});
    let upf_mac = mac_of(&lab, &lab.up, "vd");
    let r = smf.run(
        &tep,
        json!({"run": "vlan_routers", "first": 0, "dev": "vn", "upf_mac": upf_mac,
               "routers": [router(10, "10.60.0", "02:00:00:00:0a:fe"), router(20, "10.70.0", "02:00:00:00:14:fe")]}),
    );
    assert_eq!(
        (r["uplink"].as_u64(), r["downlink"].as_u64()),
        (Some(2), Some(2))
    );
    for reason in ["no_session", "wrong_network"] {
        assert_eq!(dropped(&tep, reason), 0, "{reason}: {}", tep.log());
    }
    // Each network's first packet, before its router answered.
    assert_eq!(dropped(&tep, "no_route"), 2);
    let c = tep.show("counters");
    let k = &c["kernel"];
    let n = |name: &str| k[name].as_u64().unwrap_or_else(|| panic!("{name}: {c}"));
    assert_eq!(n("arp_replies_sent"), 2, "{c}");
    assert_eq!(n("arp_learned"), 2, "{c}");
    assert_eq!(n("arp_ignored"), 2, "the strangers' announcements: {c}");
    assert_eq!(n("arp_routers_known"), 2, "{c}");
    // At start (unheard), then one per network for its first packet
    // (a retry each second until answered).
    let requests = n("arp_requests_sent");
    assert!((4..=8).contains(&requests), "{requests}: {c}");
}
