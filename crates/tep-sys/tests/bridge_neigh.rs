//! IP neighbours on an EVPN bridge (root only): tep's bindings written and
//! withdrawn as `ip neigh` shows them, the routing daemon's (written here
//! with `ip neigh … extern_learn`, as zebra does) read back through
//! [`BridgeNeighWatch`], dumped and followed. Each test runs in a private
//! namespace (`common::in_netns`); every wait is bounded.

mod common;

use std::net::IpAddr;
use std::process::{Command, Stdio};

use common::{deadline, in_netns, wait_readable};
use tep_sys::netlink::{
    bridge_create, bridge_neigh_del, bridge_neigh_set, link_set_up, BridgeNeigh, BridgeNeighEvent,
    BridgeNeighWatch,
};

const MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// A command line (words split at spaces) that must succeed; its output.
fn run(line: &str) -> String {
    let words: Vec<&str> = line.split_whitespace().collect();
    let out = Command::new(words[0])
        .args(&words[1..])
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("{line}: {e}"));
    assert!(out.status.success(), "`{line}` failed");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Polls `w` until an event satisfies `want` (five seconds at most).
fn wait_for(
    w: &mut BridgeNeighWatch,
    what: &str,
    want: impl Fn(&BridgeNeighEvent) -> bool,
) -> BridgeNeighEvent {
    let end = deadline(5000);
    let mut events = Vec::new();
    loop {
        w.poll(&mut events).unwrap();
        if let Some(e) = events.iter().find(|e| want(e)) {
            return *e;
        }
        events.clear();
        wait_readable(&[w.fd()], end).unwrap_or_else(|| panic!("{what}: not within 5 s"));
    }
}

fn on(ifindex: u32, addr: &str, new: bool) -> impl Fn(&BridgeNeighEvent) -> bool {
    let addr = ip(addr);
    move |e| match e {
        BridgeNeighEvent::New(n) => new && n.ifindex == ifindex && n.ip == addr,
        BridgeNeighEvent::Del(n) => !new && n.ifindex == ifindex && n.ip == addr,
    }
}

#[test]
fn bindings_are_written_dumped_and_followed() {
    if !tep_sys::netns::is_root() {
        tep_testing::skip("bindings_are_written_dumped_and_followed: needs root");
        return;
    }
    if !tep_testing::have("ip") {
        tep_testing::skip("bindings_are_written_dumped_and_followed: no `ip` (iproute2)");
        return;
    }
    in_netns(|| {
        let br = bridge_create("brn100").unwrap();
        link_set_up(br, true).unwrap();
        let mut w = BridgeNeighWatch::new().unwrap();
        // zebra's remote binding, between subscribing and dumping.
        run("ip neigh add 10.0.0.2 lladdr 02:00:00:00:00:02 dev brn100 nud noarp extern_learn");
        let mut dump = Vec::new();
        w.dump(&mut dump).unwrap();
        let zebra = BridgeNeigh {
            ifindex: br,
            ip: ip("10.0.0.2"),
            mac: Some([2, 0, 0, 0, 0, 2]),
            state: libc::NUD_NOARP,
            flags: 0x10,
            proto: None,
        };
        assert!(dump.contains(&zebra), "{zebra:?} not in {dump:?}");
        assert!(zebra.ext_learned() && !zebra.by_tep());
        let ev = wait_for(&mut w, "zebra's entry", on(br, "10.0.0.2", true));
        assert_eq!(ev, BridgeNeighEvent::New(zebra));

        // tep's: permanent, not extern_learn.
        bridge_neigh_set(br, ip("10.0.0.1"), MAC).unwrap();
        bridge_neigh_set(br, ip("10.0.0.1"), MAC).unwrap();
        let shown = run("ip neigh show dev brn100");
        assert!(
            shown.contains("10.0.0.1 lladdr 02:00:00:00:00:01 PERMANENT"),
            "{shown}"
        );
        let BridgeNeighEvent::New(n) = wait_for(&mut w, "tep's entry", on(br, "10.0.0.1", true))
        else {
            unreachable!()
        };
        assert!(n.by_tep(), "{n:?}");
        assert_eq!(n.state, libc::NUD_PERMANENT);
        let mut dump = Vec::new();
        w.dump(&mut dump).unwrap();
        assert!(dump.contains(&n), "{n:?} not in {dump:?}");
        assert!(bridge_neigh_del(br, ip("10.0.0.1")).unwrap());
        assert!(
            !bridge_neigh_del(br, ip("10.0.0.1")).unwrap(),
            "gone already"
        );
        wait_for(&mut w, "tep's entry deleted", on(br, "10.0.0.1", false));

        run("ip neigh del 10.0.0.2 dev brn100");
        wait_for(&mut w, "zebra's entry deleted", on(br, "10.0.0.2", false));
        assert_eq!(w.malformed(), 0);
    });
}
