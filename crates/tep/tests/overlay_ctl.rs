//! The overlay's control verbs against a running daemon: `tep fdb`,
//! `tep peer`, `tep show networks` change and show a network at once,
//! refuse bad input naming the word (in the CLI and in the daemon), and
//! what they added outlives a reload. Root only (CI is root).

use std::io::{Read, Write};
use std::time::Duration;
use tep_testing::netns::{root_or_skip, Daemon, Pair};

fn blue_config(pair: &Pair) -> String {
    format!(
        r#"[host]
control = "{control}"
uplink = "off"

[[network]]
name = "blue"
kind = "vxlan"
vni = 100
local = "{a}"
flood = ["{b}"]
"#,
        control = pair.socket(&pair.a),
        a = Pair::A4,
        b = Pair::B4,
    )
}

/// `tep ARGS --json`, parsed.
fn json(d: &Daemon, args: &[&str]) -> serde_json::Value {
    let mut all = args.to_vec();
    all.push("--json");
    let text = d
        .control(&all)
        .unwrap_or_else(|e| panic!("{args:?}: {e}\n{}", d.log()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{args:?}: {e}: {text}"))
}

fn ok(d: &Daemon, args: &[&str]) {
    if let Err(e) = d.control(args) {
        panic!("{args:?}: {e}\n{}", d.log());
    }
}

fn peers(d: &Daemon) -> Vec<String> {
    let shown = json(d, &["peer", "show", "dev", "blue"]);
    let rows = shown.as_array().expect("an array");
    rows.iter()
        .map(|r| r["dst"].as_str().unwrap().to_string())
        .collect()
}

/// A request line straight to the daemon, past the CLI's own checks.
fn raw(d: &Daemon, line: &str) -> String {
    let mut s = std::os::unix::net::UnixStream::connect(&d.socket).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(format!("{line}\n").as_bytes()).unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    answer
}

/// Needs `[[network]]` parsing and the real FDB (issue 26's other parts).
#[test]
fn verbs_change_a_running_network_and_survive_a_reload() {
    if !root_or_skip("verbs_change_a_running_network_and_survive_a_reload") {
        return;
    }
    let pair = Pair::new();
    let config = blue_config(&pair);
    let d = pair.daemon(&pair.a, &config);
    let mac = "02:00:00:00:00:0b";

    ok(&d, &["fdb", "add", mac, "dst", "192.0.2.3", "dev", "blue"]);
    let fdb = json(&d, &["fdb", "show", "dev", "blue"]);
    let want = serde_json::json!({"network": "blue", "mac": mac, "dst": "192.0.2.3",
        "origin": "static", "local": false});
    let row = fdb
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["mac"] == mac))
        .unwrap_or_else(|| panic!("{mac} not in {fdb}"));
    for (k, v) in want.as_object().unwrap() {
        assert_eq!(&row[k], v, "{k} of {row}");
    }
    let text = d.control(&["fdb", "show"]).unwrap();
    assert!(
        text.contains(&format!("{mac} dst 192.0.2.3 dev blue static")),
        "{text}"
    );
    let e = d
        .control(&["fdb", "add", mac, "dst", "192.0.2.4", "dev", "blue"])
        .unwrap_err();
    assert!(e.contains("already in the FDB"), "{e}");
    ok(
        &d,
        &["fdb", "replace", mac, "dst", "192.0.2.4", "dev", "blue"],
    );
    ok(&d, &["fdb", "del", mac, "dev", "blue"]);
    let fdb = json(&d, &["fdb", "show", "dev", "blue"]);
    assert!(!fdb.to_string().contains(mac), "{fdb}");

    assert_eq!(peers(&d), [Pair::B4]);
    ok(&d, &["peer", "add", "192.0.2.5", "dev", "blue"]);
    ok(&d, &["peer", "add", "192.0.2.6", "dev", "blue"]);
    ok(&d, &["peer", "del", "192.0.2.6", "dev", "blue"]);
    assert_eq!(peers(&d), [Pair::B4, "192.0.2.5"]);

    // Bad input: refused naming the word, by the CLI and by the daemon.
    for (args, want) in [
        (
            &[
                "fdb",
                "add",
                "02:00:00:00:00",
                "dst",
                "192.0.2.3",
                "dev",
                "blue",
            ][..],
            "fdb add: \"02:00:00:00:00\" is not a MAC address",
        ),
        (
            &["peer", "add", "192.0.2.7", "dev", "green"],
            "network \"green\": no network of that name",
        ),
        (
            &["peer", "add", "2001:db8::7", "dev", "blue"],
            "not of network \"blue\"'s address family",
        ),
        (&["fdb", "del", mac, "dev"], "fdb del: missing NET"),
    ] {
        let e = d.control(args).unwrap_err();
        assert!(e.contains(want), "{args:?}: {e}");
    }
    let answer = raw(&d, "fdb add 02:00:00:00:00 dst 192.0.2.3 dev blue");
    assert_eq!(
        answer,
        "error\nfdb add: \"02:00:00:00:00\" is not a MAC address"
    );
    assert!(raw(&d, "peer show dev blue").starts_with("ok\n"));

    let nets = json(&d, &["show", "networks"]);
    let blue = &nets[0];
    assert_eq!(blue["name"], "blue", "{nets}");
    assert_eq!(blue["kind"], "vxlan");
    assert_eq!(blue["vni"], 100);
    assert_eq!(blue["local"], Pair::A4);
    assert_eq!(blue["flood"], serde_json::json!([Pair::B4, "192.0.2.5"]));
    assert!(blue["events"]["learned"].is_u64(), "{blue}");

    // A reload keeps the peer the verb added.
    assert_eq!(d.control(&["reload"]).unwrap().trim(), "reloaded");
    assert_eq!(peers(&d), [Pair::B4, "192.0.2.5"]);
}

/// Without a `[[network]]` every verb says so (runs without issue 26's
/// other parts).
#[test]
fn verbs_say_when_the_config_has_no_network() {
    if !root_or_skip("verbs_say_when_the_config_has_no_network") {
        return;
    }
    let pair = Pair::new();
    let config = format!(
        r#"[host]
tun = "tepl3"
control = "{}"
uplink = "off"

[[tunnel]]
name = "g"
kind = "gue"
local = "{}"
remote = "{}"
inner_prefixes = ["10.9.0.0/24"]
"#,
        pair.socket(&pair.a),
        Pair::A4,
        Pair::B4
    );
    let d = pair.daemon(&pair.a, &config);
    for args in [
        &["fdb", "show"][..],
        &["peer", "add", "192.0.2.9", "dev", "blue"],
        &["route", "show", "--json"],
        &["show", "networks"],
    ] {
        let e = d.control(args).unwrap_err();
        assert!(e.contains("the config has no [[network]]"), "{args:?}: {e}");
    }
    // Malformed is still malformed: the words are checked first.
    let answer = raw(&d, "neigh add 10.0.0.1 lladdr 02:00 dev blue");
    assert_eq!(answer, "error\nneigh add: \"02:00\" is not a MAC address");
}
