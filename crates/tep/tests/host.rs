//! `tep run` between two network namespaces: every kind × outer family ×
//! checksum mode carries ping and a bounded TCP transfer, and the daemons'
//! counters match the traffic. Root only (CI is root); skipped loudly
//! otherwise.

use tep_testing::netns::{iperf, ping, root_or_skip, Pair};

/// One tunnel between the namespaces.
#[derive(Clone, Copy, Debug)]
struct Case {
    kind: &'static str,
    /// Extra keys for the kind (GUE variant).
    extra: &'static str,
    v6: bool,
    mode: &'static str,
}

impl Case {
    fn ethernet(&self) -> bool {
        matches!(self.kind, "vxlan" | "geneve")
    }

    /// The inner addresses: IPv6 for FOU-SIT (it carries IPv6 only).
    fn inner(&self, side: u8) -> String {
        if self.kind == "fou-sit" {
            format!("fd09::{side}")
        } else {
            format!("10.9.0.{side}")
        }
    }

    fn config(&self, pair: &Pair, ns: &str, side: u8) -> String {
        let (local, remote) = match (self.v6, side) {
            (false, 1) => (Pair::A4, Pair::B4),
            (false, _) => (Pair::B4, Pair::A4),
            (true, 1) => (Pair::A6, Pair::B6),
            (true, _) => (Pair::B6, Pair::A6),
        };
        let (prefix, len) = if self.kind == "fou-sit" {
            ("fd09::/64", 64)
        } else {
            ("10.9.0.0/24", 24)
        };
        let addr = format!("\"{}/{len}\"", self.inner(side));
        let device = if self.ethernet() {
            format!("tap = \"tepl2\"\ntap_addresses = [{addr}]")
        } else {
            format!("tun = \"tepl3\"\ntun_addresses = [{addr}]")
        };
        let id = match self.kind {
            "vxlan" | "geneve" => "vni = 42".to_string(),
            "gtpu" => {
                let (tx, rx) = if side == 1 { (200, 100) } else { (100, 200) };
                format!("teid = {tx}\nlocal_teid = {rx}\nqfi = 9")
            }
            "gre" | "fou-gre" => "key = 7".to_string(),
            _ => String::new(),
        };
        let routes = if self.ethernet() {
            String::new()
        } else {
            format!("inner_prefixes = [\"{prefix}\"]")
        };
        let zero = if self.v6 && self.mode == "zero" {
            "zero_checksum_tx = true\nzero_checksum_rx = true"
        } else {
            ""
        };
        let rco = if self.mode == "remote" {
            "remote_checksum_rx = true"
        } else {
            ""
        };
        format!(
            r#"[host]
{device}
control = "{control}"

[[tunnel]]
name = "t"
kind = "{kind}"
local = "{local}"
remote = "{remote}"
checksum = "{mode}"
{id}
{routes}
{zero}
{rco}
{extra}
"#,
            control = pair.socket(ns),
            kind = self.kind,
            mode = self.mode,
            extra = self.extra,
        )
    }
}

/// Runs one case: both daemons up, ping both ways, a TCP transfer, then
/// the counters.
fn run_case(c: Case) {
    let pair = Pair::new();
    let da = pair.daemon(&pair.a, &c.config(&pair, &pair.a, 1));
    let db = pair.daemon(&pair.b, &c.config(&pair, &pair.b, 2));
    let label = format!(
        "{} {} over {}",
        c.kind,
        c.mode,
        if c.v6 { "IPv6" } else { "IPv4" }
    );
    // L2 tunnels resolve the peer with ARP / ND through the tunnel first.
    let got = ping(&pair, &pair.a, &c.inner(2), 5);
    assert!(
        got >= 4,
        "{label}: ping a→b got {got}/5\nA:\n{}\nB:\n{}\n{}",
        da.log(),
        db.log(),
        da.control(&["show", "counters"]).unwrap_or_default()
    );
    assert!(
        ping(&pair, &pair.b, &c.inner(1), 3) >= 3,
        "{label}: ping b→a"
    );
    let bps = iperf(&pair, &c.inner(2), 1.0, 1)
        .unwrap_or_else(|e| panic!("{label}: iperf3: {e}\n{}", da.log()));
    eprintln!("{label}: {:.2} Gbit/s", bps / 1e9);
    assert!(bps > 1e6, "{label}: {bps} bit/s");

    for (d, who) in [(&da, "a"), (&db, "b")] {
        let t = d.show("tunnels");
        let row = &t["tunnels"][0];
        let tx = row["tx_packets"].as_u64().unwrap();
        let rx = row["rx_packets"].as_u64().unwrap();
        // At least the pings and their replies, and the TCP segments.
        assert!(tx >= 8 && rx >= 8, "{label} {who}: tx {tx} rx {rx}: {t}");
        let counters = d.show("counters");
        let drops: Vec<_> = counters["drops"]
            .as_array()
            .unwrap()
            .iter()
            // IPv6 router solicitations and MLD reports from the devices
            // to multicast groups no tunnel routes.
            .filter(|d| d["reason"] != "no_route")
            .collect();
        assert!(drops.is_empty(), "{label} {who}: drops {drops:?}");
        let host = &counters["io"];
        for k in [
            "drop_bad_vnet_header",
            "drop_no_buffer",
            "drop_gso_refused",
            "drop_no_device",
        ] {
            assert_eq!(host[k], 0, "{label} {who}: {k}: {counters}");
        }
    }
    // Each datagram one side sent is a packet the other delivered, unless
    // the kernel lost it on the way (a full socket buffer, the veth).
    // A side that came up first may have sent some (IPv6 multicast on an
    // L2 tunnel) before the other listened: those met a closed port.
    for (from, to, to_ns, dir) in [(&da, &db, &pair.b, "a→b"), (&db, &da, &pair.a, "b→a")] {
        // The last ACKs may still be on their way: a second to settle.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
        loop {
            let tx = from.show("tunnels")["tunnels"][0]["tx_packets"]
                .as_u64()
                .unwrap();
            let got = to.show("counters");
            let rx = to.show("tunnels")["tunnels"][0]["rx_packets"]
                .as_u64()
                .unwrap();
            let lost = got["kernel"]["udp_receive_buffer_full"].as_u64().unwrap()
                + veth_drops(&pair, &pair.a, "va")
                + veth_drops(&pair, &pair.b, "vb")
                + udp_no_ports(&pair, to_ns, c.v6 && c.mode == "zero");
            if rx <= tx && tx - rx <= lost {
                break;
            }
            let why = format!(
                "{label} {dir}: sent {tx} datagrams, delivered {rx}, the kernel (socket buffer, veth, no socket yet) dropped {lost}\nreceiver {got}\nsender {}",
                from.show("counters")
            );
            assert!(std::time::Instant::now() < deadline, "{why}");
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
}

/// Packets the veth `dev` in `ns` dropped (either way): underlay loss,
/// which tep's counters cannot see.
fn veth_drops(pair: &Pair, ns: &str, dev: &str) -> u64 {
    ["rx_dropped", "tx_dropped"]
        .iter()
        .map(|f| {
            let out = pair.exec(
                ns,
                &["cat", &format!("/sys/class/net/{dev}/statistics/{f}")],
                true,
            );
            String::from_utf8_lossy(&out.stdout)
                .trim()
                .parse::<u64>()
                .unwrap_or(0)
        })
        .sum()
}

/// UDP datagrams `ns` received for a port nobody listened on (IPv4 and
/// IPv6).
fn udp_no_ports(pair: &Pair, ns: &str, zero_checksum_v6: bool) -> u64 {
    let read = |file: &str| {
        let out = pair.exec(ns, &["cat", file], true);
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let snmp = read("/proc/net/snmp");
    let mut udp = snmp.lines().filter(|l| l.starts_with("Udp: "));
    let (names, values) = (udp.next().unwrap_or(""), udp.next().unwrap_or(""));
    let v4: u64 = names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(n, _)| *n == "NoPorts")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let snmp6 = read("/proc/net/snmp6");
    let v6_counter = |name: &str| -> u64 {
        snmp6
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    // A zero-checksum IPv6 datagram to a closed port is not counted as
    // NoPorts: net/ipv6/udp.c (__udp6_lib_rcv, no socket found) rejects
    // the zero checksum first and counts Udp6InCsumErrors. Here both
    // sides send zero checksums and nothing else crosses the underlay.
    let v6_closed = if zero_checksum_v6 {
        v6_counter("Udp6InCsumErrors")
    } else {
        0
    };
    v4 + v6_counter("Udp6NoPorts") + v6_closed
}

fn cases(kinds: &[(&'static str, &'static str)]) -> Vec<Case> {
    let mut v = Vec::new();
    for &(kind, extra) in kinds {
        for v6 in [false, true] {
            let mut modes = vec!["zero", "full"];
            if matches!(kind, "vxlan" | "gue") && extra.is_empty() {
                // lco and offload are full's path in host mode (the socket
                // writes the outer checksum): one L2 and one L3 kind show it.
                modes.extend(["remote", "lco", "offload"]);
            }
            for mode in modes {
                v.push(Case {
                    kind,
                    extra,
                    v6,
                    mode,
                });
            }
        }
    }
    v
}

fn run_all(test: &str, kinds: &[(&'static str, &'static str)]) {
    if !root_or_skip(test) {
        return;
    }
    for c in cases(kinds) {
        run_case(c);
    }
}

#[test]
fn vxlan_and_geneve_carry_ping_and_tcp() {
    run_all(
        "vxlan_and_geneve_carry_ping_and_tcp",
        &[("vxlan", ""), ("geneve", "")],
    );
}

#[test]
fn gue_both_variants_carry_ping_and_tcp() {
    run_all(
        "gue_both_variants_carry_ping_and_tcp",
        &[("gue", ""), ("gue", "gue_variant = 1")],
    );
}

#[test]
fn fou_carries_ping_and_tcp() {
    run_all(
        "fou_carries_ping_and_tcp",
        &[("fou-ipip", ""), ("fou-sit", ""), ("fou-gre", "")],
    );
}

#[test]
fn gre_in_udp_and_gtpu_carry_ping_and_tcp() {
    run_all(
        "gre_in_udp_and_gtpu_carry_ping_and_tcp",
        &[("gre", ""), ("gtpu", "")],
    );
}

/// The tunnels' inner prefixes are routed through the TUN by tep
/// (`host.routes`, on by default): a ping to a tunnelled prefix works with
/// no route added by hand, a reload moves the routes with the prefixes,
/// the daemon's exit takes them away, and `routes = false` leaves routing
/// to the administrator.
#[test]
fn inner_prefixes_are_routed_without_a_route_added_by_hand() {
    if !root_or_skip("inner_prefixes_are_routed_without_a_route_added_by_hand") {
        return;
    }
    let pair = Pair::new();
    // /32 and /128 device addresses: no connected route covers the peer.
    let config = |ns: &str, me: u8, local: &str, remote: &str, prefixes: &str, extra: &str| {
        format!(
            "[host]\ntun = \"tepr0\"\ntun_addresses = [\"10.77.{me}.1/32\", \"fd77:{me}::1/128\"]\n\
             control = \"{}\"\n{extra}\n\n[[tunnel]]\nname = \"r\"\nkind = \"gue\"\n\
             local = \"{local}\"\nremote = \"{remote}\"\ninner_prefixes = [{prefixes}]\n",
            pair.socket(ns)
        )
    };
    let route = |ns: &str, prefix: &str| -> String {
        let family = if prefix.contains(':') { "-6" } else { "-4" };
        let out = pair.exec(ns, &["ip", family, "route", "show", prefix], true);
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let mut da = pair.daemon(
        &pair.a,
        &config(
            &pair.a,
            1,
            Pair::A4,
            Pair::B4,
            "\"10.77.2.0/24\", \"fd77:2::/64\"",
            "",
        ),
    );
    let _db = pair.daemon(
        &pair.b,
        &config(
            &pair.b,
            2,
            Pair::B4,
            Pair::A4,
            "\"10.77.1.0/24\", \"fd77:1::/64\"",
            "",
        ),
    );
    assert!(
        route(&pair.a, "10.77.2.0/24").contains("dev tepr0 proto static"),
        "{}",
        da.log()
    );
    assert!(route(&pair.a, "fd77:2::/64").contains("dev tepr0 proto static"));
    assert!(ping(&pair, &pair.a, "10.77.2.1", 3) >= 2, "{}", da.log());
    assert!(ping(&pair, &pair.a, "fd77:2::1", 3) >= 2, "{}", da.log());

    // A reload: one prefix more, the IPv6 one gone.
    std::fs::write(
        &da.config,
        config(
            &pair.a,
            1,
            Pair::A4,
            Pair::B4,
            "\"10.77.2.0/24\", \"10.77.3.0/24\"",
            "",
        ),
    )
    .unwrap();
    assert_eq!(da.control(&["reload"]).unwrap().trim(), "reloaded");
    assert!(route(&pair.a, "10.77.3.0/24").contains("dev tepr0 proto static"));
    assert_eq!(route(&pair.a, "fd77:2::/64"), "");
    assert!(ping(&pair, &pair.a, "10.77.2.1", 3) >= 2, "{}", da.log());

    // Exit takes the routes away.
    assert_eq!(da.stop(), Some(0), "{}", da.log());
    assert_eq!(route(&pair.a, "10.77.2.0/24"), "");

    // routes = false: nothing routed, the ping has nowhere to go.
    let _da = pair.daemon(
        &pair.a,
        &config(
            &pair.a,
            1,
            Pair::A4,
            Pair::B4,
            "\"10.77.2.0/24\"",
            "routes = false",
        ),
    );
    assert_eq!(route(&pair.a, "10.77.2.0/24"), "");
    assert_eq!(ping(&pair, &pair.a, "10.77.2.1", 1), 0);
}
