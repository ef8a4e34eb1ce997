//! Host mode's uplink (`host.uplink`): tunnel traffic out as whole frames
//! through a TAP with UDP-tunnel GSO, the kernel forwarding them. Root
//! only (CI is root); skipped loudly otherwise, and when the kernel has no
//! UDP-tunnel GSO for a TAP (Linux 6.17+).

use std::time::Duration;
use tep_testing::netns::{self, ping, root_or_skip, Pair};

fn config(pair: &Pair, ns: &str, side: u8, kind: &str, mode: &str, uplink: &str) -> String {
    config_over(pair, ns, side, (kind, mode, false), uplink)
}

/// `config`, over IPv6 when `v6`.
fn config_over(
    pair: &Pair,
    ns: &str,
    side: u8,
    (kind, mode, v6): (&str, &str, bool),
    uplink: &str,
) -> String {
    let (a, b) = if v6 {
        (Pair::A6, Pair::B6)
    } else {
        (Pair::A4, Pair::B4)
    };
    let (l, r) = if side == 1 { (a, b) } else { (b, a) };
    // RFC 6935/6936: zero checksums over IPv6 only where both ends say so.
    let zero6 = if v6 && mode == "zero" {
        "zero_checksum_tx = true\nzero_checksum_rx = true\n"
    } else {
        ""
    };
    let (device, id) = match kind {
        "vxlan" => (
            format!("tap = \"tepl2\"\ntap_addresses = [\"10.9.0.{side}/24\"]"),
            "vni = 42",
        ),
        "gtpu" => (
            format!("tun = \"tepl3\"\ntun_addresses = [\"10.9.0.{side}/24\"]"),
            "teid = 5\nlocal_teid = 5\ninner_prefixes = [\"10.9.0.0/24\"]",
        ),
        _ => (
            format!("tun = \"tepl3\"\ntun_addresses = [\"10.9.0.{side}/24\"]"),
            "inner_prefixes = [\"10.9.0.0/24\"]",
        ),
    };
    format!(
        "[host]\n{device}\ncontrol = \"{}\"\n{uplink}\n\n[[tunnel]]\nname = \"t\"\nkind = \"{kind}\"\nlocal = \"{l}\"\nremote = \"{r}\"\nchecksum = \"{mode}\"\n{zero6}{id}\n",
        pair.socket(ns)
    )
}

/// Whether this kernel takes UDP-tunnel GSO on a TAP (probed by tep
/// itself: the log says why the uplink is off).
fn kernel_has_it(log: &str) -> bool {
    !log.contains("no UDP-tunnel GSO")
}

/// SHA-256 of `bytes` sent over TCP from a to b's 10.9.0.2, as b got them.
fn transfer(pair: &Pair, bytes: usize) -> (String, String) {
    let server = r#"
import socket, hashlib
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("10.9.0.2", 5401))
s.listen(1)
s.settimeout(15)
c, _ = s.accept()
h = hashlib.sha256()
while True:
    d = c.recv(65536)
    if not d:
        break
    h.update(d)
print(h.hexdigest())
"#;
    let client = format!(
        r#"
import socket, hashlib, os, time
d = os.urandom({bytes})
for i in range(50):
    try:
        c = socket.create_connection(("10.9.0.2", 5401), timeout=15)
        break
    except OSError:
        time.sleep(0.1)
c.sendall(d)
c.close()
print(hashlib.sha256(d).hexdigest())
"#
    );
    std::thread::scope(|s| {
        let rx = s.spawn(|| pair.exec(&pair.b, &["timeout", "20", "python3", "-c", server], false));
        std::thread::sleep(Duration::from_millis(200));
        let tx = pair.exec(&pair.a, &["timeout", "20", "python3", "-c", &client], false);
        let rx = rx.join().unwrap();
        let out = |o: &std::process::Output| String::from_utf8_lossy(&o.stdout).trim().to_string();
        (out(&tx), out(&rx))
    })
}

/// By default (`"auto"`) tep's super-packets leave through the uplink,
/// whole, in every mode it can carry, over IPv4 and IPv6; the bytes
/// arrive intact, and the sockets send nothing.
#[test]
fn super_packets_leave_whole_through_the_uplink() {
    if !root_or_skip("super_packets_leave_whole_through_the_uplink") {
        return;
    }
    for (kind, mode, v6) in [
        ("gue", "full", false),
        ("gue", "zero", false),
        ("vxlan", "lco", false),
        ("fou-ipip", "zero", false),
        ("gue", "zero", true),
        ("vxlan", "full", true),
    ] {
        let pair = Pair::new();
        let what = format!("{kind} {mode} over IPv{}", if v6 { 6 } else { 4 });
        let config = |ns: &str, side| config_over(&pair, ns, side, (kind, mode, v6), "");
        let da = pair.daemon(&pair.a, &config(&pair.a, 1));
        let _db = pair.daemon(&pair.b, &config(&pair.b, 2));
        if !kernel_has_it(&da.log()) {
            tep_testing::skip(format_args!(
                "super_packets_leave_whole_through_the_uplink: {}",
                da.log()
            ));
            return;
        }
        assert!(
            ping(&pair, &pair.a, "10.9.0.2", 3) >= 2,
            "{what}: {}",
            da.log()
        );
        let (sent, got) = transfer(&pair, 16 << 20);
        assert_eq!(sent, got, "{what}: the digest of what crossed");
        let c = da.show("counters");
        let io = &c["io"];
        assert!(io["uplink_tx_super"].as_u64().unwrap() > 0, "{what}: {c}");
        assert_eq!(io["udp_tx"], 0, "{what}: the sockets sent nothing: {c}");
        assert_eq!(io["drop_send_failed"], 0, "{what}: {c}");
        let tunnels = da.show("tunnels");
        assert!(tunnels["io"]["uplink"].is_string(), "{what}: {tunnels}");
        assert!(
            tunnels["tunnels"][0]["checksum_in_effect"]
                .as_str()
                .is_some_and(|c| c.starts_with(mode)),
            "{what}: {tunnels}"
        );
        assert!(
            tunnels["tunnels"][0]["tx_packets"].as_u64().unwrap() > 1000,
            "{what}: datagrams counted per segment: {tunnels}"
        );
    }
}

/// `"auto"` leaves the uplink off where it cannot serve, and says why:
/// reverse-path filtering on, a GTP-U tunnel. A named uplink refuses such
/// a config, naming the field.
#[test]
fn auto_falls_back_to_the_sockets_and_a_named_uplink_refuses() {
    if !root_or_skip("auto_falls_back_to_the_sockets_and_a_named_uplink_refuses") {
        return;
    }
    let pair = Pair::new();
    pair.exec(
        &pair.a,
        &["sysctl", "-qw", "net.ipv4.conf.all.rp_filter=2"],
        true,
    );
    let da = pair.daemon(&pair.a, &config(&pair, &pair.a, 1, "gue", "full", ""));
    let _db = pair.daemon(&pair.b, &config(&pair, &pair.b, 2, "gue", "full", ""));
    assert!(ping(&pair, &pair.a, "10.9.0.2", 3) >= 2);
    assert!(
        da.log().contains("uplink off") && da.log().contains("rp_filter is 2"),
        "{}",
        da.log()
    );
    let c = da.show("counters");
    assert!(c["io"]["udp_tx"].as_u64().unwrap() > 0, "{c}");
    assert_eq!(c["io"]["uplink_tx"], 0, "{c}");
    drop(da);

    // GTP-U: a length in its header; auto uses the sockets, a name refuses.
    let gtpu = config(&pair, &pair.b, 2, "gtpu", "full", "uplink = \"up9\"");
    let path = pair.dir.join("gtpu.toml");
    std::fs::write(&path, gtpu).unwrap();
    let out = std::process::Command::new(netns::tep())
        .args(["run", "-c"])
        .arg(&path)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("tunnel[0] \"t\".kind") && err.contains("GTP-U"),
        "{err}"
    );
}

/// `uplink_cpus` steers what tep writes into the uplink to those CPUs'
/// backlogs (RPS on its queue): the mask is set, and traffic crosses
/// intact.
#[test]
fn uplink_cpus_steer_the_uplinks_kernel_work() {
    if !root_or_skip("uplink_cpus_steer_the_uplinks_kernel_work") {
        return;
    }
    let pair = Pair::new();
    let da = pair.daemon(
        &pair.a,
        &config(&pair, &pair.a, 1, "gue", "full", "uplink_cpus = [0]"),
    );
    let _db = pair.daemon(&pair.b, &config(&pair, &pair.b, 2, "gue", "full", ""));
    if !kernel_has_it(&da.log()) {
        tep_testing::skip(format_args!(
            "uplink_cpus_steer_the_uplinks_kernel_work: {}",
            da.log()
        ));
        return;
    }
    let out = pair.exec(
        &pair.a,
        &["cat", "/sys/class/net/tepup0/queues/rx-0/rps_cpus"],
        true,
    );
    let mask = String::from_utf8_lossy(&out.stdout).trim().replace(',', "");
    assert_eq!(u64::from_str_radix(&mask, 16), Ok(1), "{mask}");
    assert!(ping(&pair, &pair.a, "10.9.0.2", 3) >= 2, "{}", da.log());
    let (sent, got) = transfer(&pair, 8 << 20);
    assert_eq!(sent, got, "the digest of what crossed");
    assert!(
        da.show("counters")["io"]["uplink_tx_super"]
            .as_u64()
            .unwrap()
            > 0
    );
}
