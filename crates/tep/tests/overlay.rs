//! Multipoint overlays (issue 26) in host mode, against the Linux kernel's
//! VXLAN bridges, in the lab of `overlay_lab` (its module doc says who is
//! where). Root only (CI is root); skipped loudly otherwise.

mod overlay_lab;

use overlay_lab::*;
use serde_json::json;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[test]
fn three_vteps_with_the_kernel() {
    if !can_run("three_vteps_with_the_kernel") {
        return;
    }
    let t0 = Instant::now();
    let mut lab = Lab::build(&[BLUE], &["m"]);
    lab.start_tep(&network(&BLUE, true, ""));
    for (a, b) in PAIRS {
        lab.ping_ok(&format!("w{a}b"), &ip(b));
        assert_eq!(
            lab.neighbour(&format!("w{a}b"), &ip(b)),
            Some(mac(b)),
            "w{a}b resolved {}",
            ip(b)
        );
    }
    lab.transfer("w1b", "w2b", &ip(2), 2 << 20);
    lab.transfer("w3b", "w1b", &ip(1), 2 << 20);
    lab.transfer("w2b", "w3b", &ip(3), 2 << 20);

    let learned = |i: u8| Some((vtep(i), "learned".to_string()));
    assert_eq!(
        lab.fdb_at("blue", &mac(2)),
        learned(2),
        "{:?}",
        lab.fdb("blue")
    );
    assert_eq!(
        lab.fdb_at("blue", &mac(3)),
        learned(3),
        "{:?}",
        lab.fdb("blue")
    );
    let w1 = lab.fdb_row("blue", &mac(1)).expect("w1's MAC learned");
    assert!(w1["dst"].is_null() && w1["local"] == json!(true), "{w1}");
    for h in ["h2", "h3"] {
        let fdb = lab.must(h, &["bridge", "fdb", "show", "dev", "vx100"]);
        let want = format!("{} dst {}", mac(1), vtep(1));
        assert!(fdb.contains(&want), "{h}'s kernel: no `{want}` in\n{fdb}");
    }
    // A learned entry is not overwritten by `add`.
    let e = lab
        .ctl(&["fdb", "add", &mac(2), "dst", &vtep(3), "dev", "blue"])
        .expect_err("fdb add over a learned entry");
    assert!(e.contains("replace"), "{e}");
    assert_eq!(lab.fdb_at("blue", &mac(2)), learned(2));
    eprintln!("three VTEPs: {:?}", t0.elapsed());

    // Mobility: w2 leaves h2 and comes back, same MAC and address, on h3.
    let moved = lab.counter("blue", "moved");
    lab.must("h2", &["ip", "link", "del", "e100"]);
    lab.workload_in("m", "h3", "m100", &BLUE, 2);
    lab.ping_ok("m", &ip(1));
    assert!(
        lab.until(5, || lab.fdb_at("blue", &mac(2)) == learned(3)),
        "w2's MAC did not follow it to h3: {:?}",
        lab.fdb("blue")
    );
    assert!(lab.counter("blue", "moved") > moved, "no move counted");
    lab.ping_ok("w1b", &ip(2));
    lab.transfer("w1b", "m", &ip(2), 2 << 20);
    eprintln!("mobility: {:?}", t0.elapsed());

    // Ageing: an entry goes once traffic stops.
    lab.start_tep(&network(&BLUE, true, "ageing = 5\n"));
    lab.ping_ok("w1b", &ip(3));
    assert_eq!(lab.fdb_at("blue", &mac(3)), learned(3));
    let quiet = Instant::now();
    assert!(
        lab.until(20, || lab.fdb_row("blue", &mac(3)).is_none()),
        "w3's entry did not age out in 20 s: {:?}",
        lab.fdb("blue")
    );
    let after = quiet.elapsed();
    assert!(
        after >= Duration::from_secs(3),
        "aged after {after:?}, before its 5 s"
    );
    assert!(lab.counter("blue", "aged") >= 1);
    eprintln!("aged after {after:?}; whole test {:?}", t0.elapsed());
}

#[test]
fn two_networks_stay_apart() {
    if !can_run("two_networks_stay_apart") {
        return;
    }
    let t0 = Instant::now();
    let mut lab = Lab::build(&[BLUE, RED], &[]);
    lab.start_tep(&(network(&BLUE, true, "") + &network(&RED, true, "")));
    for net in [BLUE, RED] {
        for (a, b) in [(1, 2), (1, 3), (2, 3)] {
            lab.ping_ok(&format!("w{a}{}", net.x), &ip(b));
        }
        assert_eq!(
            lab.fdb_at(net.name, &mac(2)),
            Some((vtep(2), "learned".into()))
        );
    }
    // The same address answers in each network from its own workload
    // only: with red's w2 away, blue still reaches w2, red does not.
    lab.must("w2r", &["ip", "link", "set", "eth0", "down"]);
    lab.ping_ok("w1b", &ip(2));
    assert_eq!(lab.ping("w1r", &ip(2), 2, 2), 0, "red reached blue's w2");
    lab.ping_ok("w1r", &ip(3));
    lab.must("w2r", &["ip", "link", "set", "eth0", "up"]);
    lab.ping_ok("w1r", &ip(2));
    lab.must("w3b", &["ip", "link", "set", "eth0", "down"]);
    assert_eq!(lab.ping("w1b", &ip(3), 2, 2), 0, "blue reached red's w3");
    lab.ping_ok("w1r", &ip(3));
    lab.must("w3b", &["ip", "link", "set", "eth0", "up"]);

    // A broadcast from w1-blue: once at each blue workload, never in red,
    // one copy to each kernel VTEP, nothing back to h1.
    let mark = format!("tep-bcast-{}-w1", std::process::id());
    let watch = ["w2b", "w3b", "w1r", "w2r", "w3r"];
    let sniffers: Vec<Sniffer> = watch
        .iter()
        .map(|w| lab.sniff(w, "eth0", mark.as_bytes()))
        .collect();
    let underlay = lab.sniff("h1", "ul", mark.as_bytes());
    lab.send(
        "w1b",
        json!({"dst": "ff:ff:ff:ff:ff:ff", "src": mac(1), "payload": mark}),
    );
    assert!(
        sniffers[0].seen(10) && sniffers[1].seen(10),
        "w2b/w3b saw no broadcast"
    );
    // What would leak into red or come back has had the time to.
    std::thread::sleep(Duration::from_millis(500));
    for (w, s) in watch.iter().zip(sniffers) {
        let n = s
            .stop()
            .iter()
            .filter(|f| !f.outgoing && holds(&f.bytes, mark.as_bytes()))
            .count();
        let want = usize::from(w.ends_with('b'));
        assert_eq!(n, want, "{w} got w1-blue's broadcast {n} times");
    }
    let copies = vxlan(&underlay.stop());
    let copies: Vec<&Vxlan> = copies
        .iter()
        .filter(|v| holds(&v.inner, mark.as_bytes()))
        .collect();
    let to = |i: u8| {
        copies
            .iter()
            .filter(|v| v.dst == [192, 0, 2, i] && v.src == [192, 0, 2, 1] && v.vni == 100)
            .count()
    };
    assert_eq!((to(2), to(3)), (1, 1), "head-end copies: {copies:?}");
    assert_eq!(copies.len(), 2, "more than the two copies: {copies:?}");

    // A broadcast from w2-blue reaches tep from h2; tep gives it to w1
    // only, never back into the overlay.
    let mark = format!("tep-bcast-{}-w2", std::process::id());
    let w1 = lab.sniff("w1b", "eth0", mark.as_bytes());
    let w1r = lab.sniff("w1r", "eth0", mark.as_bytes());
    let underlay = lab.sniff("h1", "ul", mark.as_bytes());
    lab.send(
        "w2b",
        json!({"dst": "ff:ff:ff:ff:ff:ff", "src": mac(2), "payload": mark}),
    );
    assert!(w1.seen(10), "w1b saw no broadcast from w2b");
    std::thread::sleep(Duration::from_millis(500));
    let count = |frames: Vec<Seen>| {
        frames
            .iter()
            .filter(|f| !f.outgoing && holds(&f.bytes, mark.as_bytes()))
            .count()
    };
    assert_eq!(count(w1.stop()), 1, "w1b");
    assert_eq!(count(w1r.stop()), 0, "w1r");
    let seen = vxlan(&underlay.stop());
    let back: Vec<&Vxlan> = seen
        .iter()
        .filter(|v| holds(&v.inner, mark.as_bytes()) && v.src == [192, 0, 2, 1])
        .collect();
    assert!(
        back.is_empty(),
        "tep flooded a frame from the overlay back: {back:?}"
    );
    eprintln!("two networks: {:?}", t0.elapsed());
}

#[test]
fn arp_suppression() {
    if !can_run("arp_suppression") {
        return;
    }
    let t0 = Instant::now();
    let mut lab = Lab::build(&[BLUE], &[]);
    let extra = format!(
        "neigh_suppress = true\nneighbours = [{{ ip = \"{}\", mac = \"{}\" }}]\n",
        ip(2),
        mac(2)
    );
    lab.start_tep(&network(&BLUE, true, &extra));
    lab.assert_arp_suppressed();
    eprintln!("ARP suppression: {:?}", t0.elapsed());
}

/// The Neighbor Solicitation for `fd00:100::last` on the wire: its
/// reserved word and target address (ICMPv6 type 135's body), which no
/// other frame of the test carries.
fn ns_mark(last: u8) -> Vec<u8> {
    let mut m = vec![0u8; 4];
    m.extend_from_slice(&[0xfd, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, last]);
    m
}

#[test]
fn nd_suppression() {
    if !can_run("nd_suppression") {
        return;
    }
    let t0 = Instant::now();
    let mut lab = Lab::build(&[BLUE], &[]);
    for (w, a) in [("w1b", "fd00:100::1/64"), ("w2b", "fd00:100::2/64")] {
        lab.must(
            w,
            &[
                "sysctl",
                "-qw",
                "net.ipv6.conf.all.disable_ipv6=0",
                "net.ipv6.conf.eth0.disable_ipv6=0",
            ],
        );
        lab.must(w, &["ip", "-6", "addr", "add", a, "dev", "eth0", "nodad"]);
    }
    let extra = format!(
        "neigh_suppress = true\nneighbours = [{{ ip = \"fd00:100::2\", mac = \"{}\" }}]\n",
        mac(2)
    );
    lab.start_tep(&network(&BLUE, true, &extra));
    let suppressed = lab.counter("blue", "suppressed");
    let underlay = lab.sniff("h1", "ul", &ns_mark(9));
    lab.must("w1b", &["ip", "-6", "neigh", "flush", "all"]);
    lab.ping("w1b", "fd00:100::2", 1, 3);
    assert_eq!(
        lab.neighbour("w1b", "fd00:100::2"),
        Some(mac(2)),
        "w1's Neighbor Solicitation for w2 went unanswered\n{}",
        lab.log()
    );
    assert_eq!(lab.ping("w1b", "fd00:100::9", 1, 1), 0);
    assert!(
        underlay.seen(10),
        "the solicitation for ::9 was not flooded"
    );
    let frames = underlay.stop();
    let holds = |f: &Seen, m: &[u8]| f.bytes.windows(m.len()).any(|w| w == m);
    assert!(
        !frames.iter().any(|f| holds(f, &ns_mark(2))),
        "the solicitation for w2 went onto the underlay"
    );
    assert!(frames.iter().any(|f| holds(f, &ns_mark(9))));
    assert!(lab.counter("blue", "suppressed") > suppressed);
    lab.ping_ok("w1b", "fd00:100::2");
    eprintln!("ND suppression: {:?}", t0.elapsed());
}

#[test]
fn mac_flood_stays_bounded() {
    if !can_run("mac_flood_stays_bounded") {
        return;
    }
    let t0 = Instant::now();
    let mut lab = Lab::build(&[BLUE], &[]);
    lab.start_tep(&network(&BLUE, true, "max_macs = 50\n"));
    lab.ping_ok("w1b", &ip(3));
    lab.send(
        "w2b",
        json!({"dst": "ff:ff:ff:ff:ff:ff", "random_src": true, "count": 500, "payload": "flood"}),
    );
    assert!(
        lab.until(10, || lab.counter("blue", "learn_refused") >= 100),
        "refused: {}\n{}",
        lab.counter("blue", "learn_refused"),
        lab.d().show("networks")
    );
    let rows = lab.fdb("blue");
    let learned = rows.iter().filter(|r| r["origin"] == "learned").count();
    assert!(learned <= 50, "{learned} MACs learned, max_macs 50");
    assert!(
        learned >= 25,
        "only {learned} MACs learned: was the flood seen?"
    );
    eprintln!(
        "learned {learned}, refused {}",
        lab.counter("blue", "learn_refused")
    );
    lab.ping_ok("w1b", &ip(3));
    lab.ping_ok("w3b", &ip(1));
    lab.ping_ok("w1b", &ip(2));
    eprintln!("MAC flood: {:?}", t0.elapsed());
}

#[test]
fn runtime_changes() {
    if !can_run("runtime_changes") {
        return;
    }
    let t0 = Instant::now();
    let mut lab = Lab::build(&[BLUE], &[]);
    lab.start_tep(&network(&BLUE, false, "learning = false\n"));
    assert_eq!(lab.ping("w1b", &ip(2), 1, 2), 0, "traffic with no peer");
    // Frames from VTEPs the network does not name yet are dropped (and
    // must be taken once the verbs name them).
    for w in ["w2b", "w3b"] {
        lab.send(
            w,
            json!({"dst": "ff:ff:ff:ff:ff:ff", "src": mac(9), "payload": "before"}),
        );
    }
    assert!(
        lab.until(5, || lab.drops("fdb-learn", "wrong_peer") >= 2),
        "frames from unnamed VTEPs: {}",
        lab.ctl(&["show", "counters"]).unwrap_or_else(|e| e)
    );
    for i in [2, 3] {
        lab.ctl(&["peer", "add", &vtep(i), "dev", "blue"])
            .unwrap_or_else(|e| panic!("peer add: {e}"));
        lab.ctl(&["fdb", "add", &mac(i), "dst", &vtep(i), "dev", "blue"])
            .unwrap_or_else(|e| panic!("fdb add: {e}"));
    }
    let peers = lab.ctl(&["peer", "show", "dev", "blue"]).unwrap();
    assert!(
        peers.contains(&vtep(2)) && peers.contains(&vtep(3)),
        "{peers}"
    );
    lab.ping_ok("w1b", &ip(2));
    lab.ping_ok("w1b", &ip(3));
    assert_eq!(
        lab.fdb_at("blue", &mac(2)),
        Some((vtep(2), "static".into()))
    );

    // Edits beside a running transfer lose nothing of it.
    let done = AtomicBool::new(false);
    let rounds = std::thread::scope(|s| {
        let edits = s.spawn(|| {
            let mut rounds = 0;
            let other = "02:00:00:00:aa:01";
            while !done.load(Ordering::Relaxed) {
                for args in [
                    &["fdb", "add", other, "dst", "192.0.2.2", "dev", "blue"][..],
                    &["peer", "add", "192.0.2.9", "dev", "blue"],
                    &["fdb", "del", other, "dev", "blue"],
                    &["peer", "del", "192.0.2.9", "dev", "blue"],
                ] {
                    lab.ctl(args)
                        .unwrap_or_else(|e| panic!("{}: {e}", args.join(" ")));
                }
                rounds += 1;
            }
            rounds
        });
        // 128 pauses of 5 ms: the edits have the time to interleave.
        lab.transfer_paced("w1b", "w3b", &ip(3), 8 << 20, 5);
        lab.transfer_paced("w3b", "w1b", &ip(1), 8 << 20, 5);
        done.store(true, Ordering::Relaxed);
        edits.join().unwrap()
    });
    assert!(
        rounds >= 5,
        "only {rounds} rounds of edits during the transfers"
    );
    eprintln!("{rounds} rounds of edits during the transfers");

    // Bad input is refused, naming what is wrong.
    let refused = |args: &[&str], says: &str| {
        let e = lab
            .ctl(args)
            .expect_err(&format!("`{}` accepted", args.join(" ")));
        assert!(
            e.to_lowercase().contains(&says.to_lowercase()),
            "`{}`: {e} (wanted {says:?})",
            args.join(" ")
        );
    };
    refused(
        &["fdb", "add", &mac(2), "dst", "192.0.2.2", "dev", "nosuch"],
        "nosuch",
    );
    refused(&["peer", "add", "192.0.2.4", "dev", "nosuch"], "nosuch");
    refused(
        &[
            "fdb",
            "add",
            "02:00:00:zz:00:02",
            "dst",
            "192.0.2.2",
            "dev",
            "blue",
        ],
        "02:00:00:zz:00:02",
    );
    refused(
        &["fdb", "add", &mac(2), "dst", &vtep(3), "dev", "blue"],
        "replace",
    );
    refused(
        &[
            "fdb",
            "add",
            "ff:ff:ff:ff:ff:ff",
            "dst",
            "192.0.2.2",
            "dev",
            "blue",
        ],
        "ff:ff:ff:ff:ff:ff",
    );
    refused(&["peer", "add", &vtep(2), "dev", "blue"], "already");
    refused(
        &["fdb", "del", "02:00:00:00:aa:77", "dev", "blue"],
        "02:00:00:00:aa:77",
    );
    assert_eq!(
        lab.fdb_at("blue", &mac(2)),
        Some((vtep(2), "static".into()))
    );
    lab.ctl(&["fdb", "replace", &mac(2), "dst", &vtep(3), "dev", "blue"])
        .unwrap_or_else(|e| panic!("fdb replace: {e}"));
    assert_eq!(
        lab.fdb_at("blue", &mac(2)),
        Some((vtep(3), "static".into()))
    );
    eprintln!("runtime changes: {:?}", t0.elapsed());
}
