//! The dataplane's rules on tunnels (`tep_dataplane::config::check`), as a
//! config file and a config built in code meet them.

use crate::testing::{err, ok, tunnel, v4, v6};
use crate::Config;
use tep_dataplane::config::{ChecksumMode, IpPrefix, TunnelConfig};
use tep_dataplane::TunnelKind;

#[test]
fn zero_checksum_over_ipv6_needs_opt_in() {
    let six = |extra: &str| {
        tunnel("z", "fou-sit", extra)
            .replace("192.0.2.1", "2001:db8::1")
            .replace("192.0.2.2", "2001:db8::2")
    };
    let e = err(&six("checksum = \"zero\""));
    assert_eq!(e.field, "tunnel[0] \"z\".checksum");
    assert_eq!(
        e.message,
        "\"zero\" over IPv6 needs zero_checksum_tx = true: RFC 6935 and RFC 6936 allow a zero UDP checksum over IPv6 only for tunnels that opt in explicitly (and the peer must accept it, e.g. Linux udp6zerocsumrx); set zero_checksum_tx = true, or use \"full\", \"lco\" or \"offload\""
    );
    let t = &ok(&six("checksum = \"zero\"\nzero_checksum_tx = true")).tunnels[0];
    assert!(t.zero_checksum_tx && t.checksum == ChecksumMode::Zero);
    // IPv4: always legal (RFC 768).
    ok(&tunnel("z", "fou-sit", "checksum = \"zero\""));
}

#[test]
fn remote_checksum_only_vxlan_and_gue() {
    ok(&tunnel(
        "a",
        "vxlan",
        "checksum = \"remote\"\nremote_checksum_rx = true",
    ));
    ok(&tunnel(
        "a",
        "gue",
        "checksum = \"remote\"\nremote_checksum_rx = true",
    ));
    for kind in [
        "geneve", "gtpu", "gre", "fou-ipip", "fou-sit", "fou-gre", "gue-gre",
    ] {
        let e = err(&tunnel("a", kind, "checksum = \"remote\""));
        assert_eq!(e.field, "tunnel[0] \"a\".checksum", "{kind}");
        let e = err(&tunnel("a", kind, "remote_checksum_rx = true"));
        assert_eq!(e.field, "tunnel[0] \"a\".remote_checksum_rx", "{kind}");
        ok(&tunnel("a", kind, "remote_checksum_rx = false"));
    }
    let e = err(&tunnel("a", "gtpu", "checksum = \"remote\""));
    assert_eq!(
        e.to_string(),
        "tunnel[0] \"a\".checksum: \"remote\" (remote checksum offload) exists only for vxlan and gue, not gtpu; use \"full\", \"lco\" or \"offload\""
    );
}

#[test]
fn fou_prefix_families() {
    let e = err(&tunnel(
        "i",
        "fou-ipip",
        "inner_prefixes = [\"10.0.0.0/8\", \"2001:db8::/32\"]",
    ));
    assert_eq!(
        e.to_string(),
        "tunnel[0] \"i\".inner_prefixes[1]: 2001:db8::/32 is IPv6 but fou-ipip carries only IPv4 (fou-ipip: IPv4, fou-sit: IPv6; gue carries both)"
    );
    let e = err(&tunnel("s", "fou-sit", "inner_prefixes = [\"10.0.0.0/8\"]"));
    assert_eq!(e.field, "tunnel[0] \"s\".inner_prefixes[0]");
    ok(&tunnel(
        "s",
        "fou-sit",
        "inner_prefixes = [\"2001:db8::/32\"]",
    ));
    ok(&tunnel(
        "f",
        "fou-gre",
        "inner_prefixes = [\"10.0.0.0/8\", \"2001:db8::/32\"]",
    ));
}

// --- Between tunnels -----------------------------------------------

#[test]
fn duplicate_names() {
    let e = err(&[
        tunnel("a", "gue", ""),
        tunnel("b", "gue", "local_port = 1"),
        tunnel("a", "gue", "local_port = 2"),
    ]
    .concat());
    assert_eq!(
        e.to_string(),
        "tunnel[2].name: \"a\" is already the name of tunnel[0] \"a\"; names must be unique among tunnels and networks"
    );
}

#[test]
fn tunnels_the_receive_path_cannot_tell_apart() {
    // VXLAN: same VNI.
    let e = err(&[
        tunnel("a", "vxlan", "inner_macs = [\"02:00:00:00:00:01\"]"),
        tunnel("b", "vxlan", ""),
    ]
    .concat());
    assert_eq!(
        e.to_string(),
        "tunnel[1] \"b\".vni: received packets could not be told apart from tunnel[0] \"a\"'s: same local 192.0.2.1 port 4789, remote 192.0.2.2 and vni 1; give one a different identifier, local_port, local or remote"
    );
    // A different VNI, remote, local or port tells them apart.
    let a = tunnel("a", "vxlan", "inner_macs = [\"02:00:00:00:00:01\"]");
    ok(&(a.clone() + &tunnel("b", "vxlan", "").replace("vni = 1", "vni = 2")));
    ok(&(a.clone() + &tunnel("b", "vxlan", "").replace("192.0.2.2", "192.0.2.9")));
    ok(&(a.clone() + &tunnel("b", "vxlan", "").replace("192.0.2.1", "192.0.2.9")));
    ok(&(a.clone() + &tunnel("b", "vxlan", "local_port = 4790")));
    // The remote port does not.
    let e = err(&(a + &tunnel("b", "vxlan", "remote_port = 4790")));
    assert_eq!(e.field, "tunnel[1] \"b\".vni");

    // GTP-U: the local TEID decides, not the TEID sent.
    let e = err(&[
        tunnel("g1", "gtpu", "teid = 5\nlocal_teid = 9").replace("teid = 1\n", ""),
        tunnel("g2", "gtpu", "teid = 6\nlocal_teid = 9").replace("teid = 1\n", ""),
    ]
    .concat());
    assert_eq!(e.field, "tunnel[1] \"g2\".local_teid");
    assert!(e.message.contains("local_teid 0x9"), "{e}");
    ok(&[
        tunnel("g1", "gtpu", "teid = 5").replace("teid = 1\n", ""),
        tunnel("g2", "gtpu", "teid = 5\nlocal_teid = 6").replace("teid = 1\n", ""),
    ]
    .concat());

    // GRE kinds: the key, or both without one.
    let e = err(&[
        tunnel("k1", "gre", "key = 3"),
        tunnel("k2", "gre", "key = 3"),
    ]
    .concat());
    assert_eq!(e.field, "tunnel[1] \"k2\".key");
    let e = err(&[tunnel("k1", "fou-gre", ""), tunnel("k2", "fou-gre", "")].concat());
    assert_eq!(e.field, "tunnel[1] \"k2\".key");
    assert!(e.message.contains("and no key;"), "{e}");
    ok(&[tunnel("k1", "gre", "key = 3"), tunnel("k2", "gre", "")].concat());

    // GUE and FOU have no identifier at all.
    for kind in ["gue", "fou-ipip", "fou-sit"] {
        let e = err(&[tunnel("x", kind, ""), tunnel("y", kind, "")].concat());
        assert_eq!(e.field, "tunnel[1] \"y\".remote", "{kind}");
        assert!(
            e.message
                .ends_with("give one a different local_port, local or remote"),
            "{e}"
        );
    }
}

#[test]
fn one_kind_per_port() {
    let e = err(&[
        tunnel("v", "vxlan", ""),
        tunnel("g", "gue", "local_port = 4789"),
    ]
    .concat());
    assert_eq!(
        e.to_string(),
        "tunnel[1] \"g\".local_port: port 4789 already receives vxlan for tunnel[0] \"v\"; a UDP port carries one tunnel kind, so this gue tunnel needs another local_port"
    );
    // FOU kinds share the default port 5555 but not a kind.
    let e = err(&[
        tunnel("i", "fou-ipip", ""),
        tunnel("s", "fou-sit", "").replace("192.0.2.2", "192.0.2.3"),
    ]
    .concat());
    assert_eq!(e.field, "tunnel[1] \"s\".local_port");
    // Different remote ports are fine.
    ok(&[
        tunnel("v", "vxlan", ""),
        tunnel("g", "gue", "remote_port = 4789"),
    ]
    .concat());
}

#[test]
fn one_tunnel_per_prefix() {
    let e = err(&[
        tunnel("a", "gue", "inner_prefixes = [\"10.1.0.0/16\"]"),
        tunnel(
            "b",
            "gtpu",
            "inner_prefixes = [\"10.2.0.0/16\", \"10.1.0.0/16\"]",
        ),
    ]
    .concat());
    assert_eq!(
        e.to_string(),
        "tunnel[1] \"b\".inner_prefixes[1]: 10.1.0.0/16 is already routed into tunnel[0] \"a\"; a prefix may route to one tunnel only"
    );
    // Overlapping is longest-prefix match, not ambiguous.
    ok(&[
        tunnel("a", "gue", "inner_prefixes = [\"10.0.0.0/8\"]"),
        tunnel("b", "gtpu", "inner_prefixes = [\"10.1.0.0/16\"]"),
    ]
    .concat());
    let e = err(&tunnel(
        "a",
        "gue",
        "inner_prefixes = [\"10.1.0.0/16\", \"10.1.0.0/16\"]",
    ));
    assert_eq!(
        e.to_string(),
        "tunnel[0] \"a\".inner_prefixes[1]: 10.1.0.0/16 is listed twice"
    );
}

#[test]
fn one_tunnel_per_mac() {
    let e = err(&[
        tunnel("a", "vxlan", "inner_macs = [\"02:00:00:00:00:01\"]"),
        tunnel("b", "geneve", "inner_macs = [\"02-00-00-00-00-01\"]"),
    ]
    .concat());
    assert_eq!(
        e.to_string(),
        "tunnel[1] \"b\".inner_macs[0]: 02:00:00:00:00:01 is already sent into tunnel[0] \"a\"; a MAC may go to one tunnel only"
    );
    let e = err(&tunnel(
        "a",
        "vxlan",
        "inner_macs = [\"02:00:00:00:00:01\", \"02:00:00:00:00:01\"]",
    ));
    assert_eq!(e.field, "tunnel[0] \"a\".inner_macs[1]");
}

#[test]
fn one_default_l2_tunnel_per_kind() {
    let e = err(&[
        tunnel("a", "vxlan", ""),
        tunnel("b", "vxlan", "").replace("vni = 1", "vni = 2"),
    ]
    .concat());
    assert_eq!(
        e.to_string(),
        "tunnel[1] \"b\".inner_macs: tunnel[0] \"a\" is already the default vxlan tunnel (empty inner_macs); only one per kind may be, so list this tunnel's MACs"
    );
    // One default per kind.
    ok(&[tunnel("a", "vxlan", ""), tunnel("b", "geneve", "")].concat());
    ok(&[
        tunnel("a", "vxlan", ""),
        tunnel("b", "vxlan", "inner_macs = [\"02:00:00:00:00:01\"]").replace("vni = 1", "vni = 2"),
    ]
    .concat());
}

// --- Typed configs built in code -----------------------------------

#[test]
fn validate_typed_configs() {
    let l = v4([192, 0, 2, 1]);
    let r = v4([192, 0, 2, 2]);
    let mut t = TunnelConfig::new("t", TunnelKind::Gue, l, r);
    let good = Config {
        tunnels: vec![t.clone()],
        ..Config::default()
    };
    assert_eq!(good.validate(), Ok(()));
    t.inner_prefixes = vec![IpPrefix {
        addr: v4([10, 1, 2, 3]),
        len: 16,
    }];
    let c = Config {
        tunnels: vec![t.clone()],
        ..Config::default()
    };
    assert_eq!(
        c.validate().unwrap_err().to_string(),
        "tunnel[0] \"t\".inner_prefixes[0]: 10.1.2.3/16 has host bits set; did you mean 10.1.0.0/16?"
    );
    let mut bad = TunnelConfig::new("v", TunnelKind::Vxlan, l, r);
    bad.vni = 1 << 24;
    let c = Config {
        tunnels: vec![bad],
        ..Config::default()
    };
    assert_eq!(c.validate().unwrap_err().field, "tunnel[0] \"v\".vni");
    let mut bad = TunnelConfig::new("g", TunnelKind::Gtpu, l, r);
    bad.key = Some(1);
    let c = Config {
        tunnels: vec![bad],
        ..Config::default()
    };
    assert_eq!(c.validate().unwrap_err().field, "tunnel[0] \"g\".key");
    let mut bad = TunnelConfig::new("z", TunnelKind::Gue, v6("2001:db8::1"), v6("2001:db8::2"));
    bad.checksum = ChecksumMode::Zero;
    let c = Config {
        tunnels: vec![bad],
        ..Config::default()
    };
    assert_eq!(c.validate().unwrap_err().field, "tunnel[0] \"z\".checksum");
    let t = TunnelConfig::new("t", TunnelKind::Gue, l, r);
    let mut t2 = t.clone();
    t2.local_port = 1;
    let two = Config {
        tunnels: vec![t, t2],
        ..Config::default()
    };
    assert_eq!(two.validate().unwrap_err().field, "tunnel[1].name");
}
