//! The config through the public API only: what `tep` and the lead's
//! pipeline see.

use core::net::IpAddr;
use proptest::prelude::*;
use std::path::Path;
use tep_config::{ChecksumMode, Config, ConfigError, IpPrefix, TunnelConfig};
use tep_dataplane::TunnelKind;

fn example_path() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/tep.toml")
}

#[test]
fn example_loads_and_validates() {
    let c = Config::load(&example_path()).unwrap();
    assert_eq!(c.tunnels.len(), 6);
    let kinds: Vec<_> = c.tunnels.iter().map(|t| t.kind).collect();
    assert_eq!(
        kinds,
        [
            TunnelKind::Vxlan,
            TunnelKind::Geneve,
            TunnelKind::Gtpu,
            TunnelKind::Gue,
            TunnelKind::FouIpip,
            TunnelKind::GreInUdp
        ]
    );
    assert_eq!(c.validate(), Ok(()));
}

/// Every example config in examples/ loads and validates (a new one is
/// covered by being there).
#[test]
fn every_example_loads_and_validates() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut names = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let c = Config::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert_eq!(c.validate(), Ok(()), "{}", path.display());
            names.push(path.file_name().unwrap().to_string_lossy().into_owned());
        }
    }
    names.sort();
    assert_eq!(names, ["overlay.toml", "tep-gateway.toml", "tep.toml"]);
}

#[test]
fn errors_display_field_then_message() {
    let e = Config::parse(
        "[[tunnel]]\nname = \"gtp-a\"\nkind = \"gtpu\"\nlocal = \"2001:db8::1\"\nremote = \"2001:db8::2\"\nteid = 1\nqfi = 64\n",
    )
    .unwrap_err();
    assert_eq!(
        e,
        ConfigError {
            field: "tunnel[0] \"gtp-a\".qfi".to_string(),
            message: "64 is out of range (0..=63)".to_string(),
        }
    );
    assert_eq!(
        e.to_string(),
        "tunnel[0] \"gtp-a\".qfi: 64 is out of range (0..=63)"
    );
    let boxed: Box<dyn std::error::Error> = Box::new(e);
    assert!(boxed.to_string().starts_with("tunnel[0]"));
}

#[test]
fn typed_configs_validate() {
    let l: IpAddr = "192.0.2.1".parse().unwrap();
    let r: IpAddr = "192.0.2.2".parse().unwrap();
    let mut a = TunnelConfig::new("a", TunnelKind::Vxlan, l, r);
    a.vni = 1;
    let mut b = TunnelConfig::new("b", TunnelKind::Gtpu, l, r);
    b.checksum = ChecksumMode::Remote;
    let c = Config {
        tunnels: vec![a, b],
        ..Config::default()
    };
    assert_eq!(c.validate().unwrap_err().field, "tunnel[1] \"b\".checksum");
}

proptest! {
    /// Whatever the text, parsing returns (never panics), and an error
    /// names a field.
    #[test]
    fn parse_never_panics(text in "\\PC{0,200}") {
        if let Err(e) = Config::parse(&text) {
            prop_assert!(!e.field.is_empty());
        }
    }

    /// Text shaped like a config, with values thrown about: an error names
    /// its field first; a success is what the text said.
    #[test]
    fn config_like_text_never_panics(
        keys in proptest::collection::vec(
            prop_oneof![
                Just("name"), Just("kind"), Just("local"), Just("remote"), Just("vni"),
                Just("teid"), Just("qfi"), Just("key"), Just("checksum"), Just("ttl"),
                Just("inner_prefixes"), Just("inner_macs"), Just("source_ports"), Just("bogus"),
            ],
            0..8,
        ),
        values in proptest::collection::vec(
            prop_oneof![
                Just("\"vxlan\"".to_string()), Just("\"gtpu\"".to_string()),
                Just("\"192.0.2.1\"".to_string()), Just("\"2001:db8::1\"".to_string()),
                Just("[\"10.0.0.0/8\"]".to_string()), Just("[\"02:00:00:00:00:01\"]".to_string()),
                Just("[1, 2]".to_string()), Just("\"inherit\"".to_string()),
                any::<i64>().prop_map(|v| v.to_string()),
                "\\PC{0,12}".prop_map(|s| format!("{s:?}")),
            ],
            8,
        ),
    ) {
        let mut text = String::from("[[tunnel]]\n");
        for (k, v) in keys.iter().zip(&values) {
            text.push_str(&format!("{k} = {v}\n"));
        }
        match Config::parse(&text) {
            // An error leads with the field it is about, and the field is
            // the tunnel's (the only table in the text) or the TOML's.
            Err(e) => {
                prop_assert!(!e.field.is_empty());
                prop_assert!(e.to_string().starts_with(&e.field), "{}", e);
            }
            // What parses is one tunnel that validates, named and of the
            // kind the text says.
            Ok(c) => {
                prop_assert_eq!(c.tunnels.len(), 1);
                prop_assert!(c.validate().is_ok());
                let said = |key: &str| {
                    keys.iter().zip(&values).rev().find(|(k, _)| **k == key).map(|(_, v)| v.trim_matches('"').to_string())
                };
                if let Some(kind) = said("kind") {
                    prop_assert_eq!(c.tunnels[0].kind.to_string(), kind);
                }
                if let Some(name) = said("name") {
                    prop_assert_eq!(&c.tunnels[0].name, &name);
                }
            }
        }
    }

    /// The same for a `[[network]]`, with its own keys among the values.
    #[test]
    fn network_like_text_never_panics(
        keys in proptest::collection::vec(
            prop_oneof![
                Just("name"), Just("kind"), Just("local"), Just("remote"), Just("vni"),
                Just("key"), Just("flood"), Just("fdb"), Just("neighbours"), Just("routes"),
                Just("ageing"), Just("max_macs"), Just("device"), Just("vlan"),
                Just("neigh_suppress"), Just("learning"), Just("bogus"),
            ],
            0..10,
        ),
        values in proptest::collection::vec(
            prop_oneof![
                Just("\"vxlan\"".to_string()), Just("\"gue\"".to_string()),
                Just("\"192.0.2.1\"".to_string()), Just("\"2001:db8::1\"".to_string()),
                Just("[\"192.0.2.2\", \"192.0.2.1\"]".to_string()),
                Just("[{ mac = \"02:00:00:00:00:01\", dst = \"192.0.2.2\" }]".to_string()),
                Just("[{ ip = \"10.0.0.1\", mac = \"02:00:00:00:00:01\" }]".to_string()),
                Just("[{ prefix = \"10.0.0.0/8\", dst = \"192.0.2.2\" }]".to_string()),
                Just("true".to_string()),
                any::<i64>().prop_map(|v| v.to_string()),
                "\\PC{0,12}".prop_map(|s| format!("{s:?}")),
            ],
            10,
        ),
    ) {
        let mut text = String::from("[[network]]\n");
        for (k, v) in keys.iter().zip(&values) {
            text.push_str(&format!("{k} = {v}\n"));
        }
        match Config::parse(&text) {
            Err(e) => {
                prop_assert!(!e.field.is_empty());
                prop_assert!(e.to_string().starts_with(&e.field), "{}", e);
            }
            Ok(c) => {
                prop_assert_eq!(c.tunnels.len(), 1);
                prop_assert!(c.tunnels[0].is_network());
                prop_assert!(c.validate().is_ok());
            }
        }
    }

    /// A prefix prints as text that parses back to it.
    #[test]
    fn prefix_round_trip(v4 in any::<u32>(), v6 in any::<u128>(), l4 in 0u8..=32, l6 in 0u8..=128) {
        for (addr, len) in [(IpAddr::V4(v4.into()), l4), (IpAddr::V6(v6.into()), l6)] {
            let p = IpPrefix { addr, len };
            let p = IpPrefix { addr: p.network(), len };
            prop_assert_eq!(p.to_string().parse::<IpPrefix>(), Ok(p));
            if p.network() != addr {
                let with_host_bits = IpPrefix { addr, len }.to_string();
                prop_assert!(with_host_bits.parse::<IpPrefix>().is_err());
            }
        }
    }
}
