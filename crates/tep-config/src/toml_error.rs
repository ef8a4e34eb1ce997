//! TOML errors: find the field the error's span is in, so that a syntax or
//! type error the TOML reader reports names its field like every other
//! config error.

use serde::Deserialize;
use std::collections::BTreeMap;
use tep_dataplane::config::{network_label, tunnel_label, ConfigError};
use toml::Spanned;

/// The same document with every value kept, and the spans of keys and
/// values, to name the field a deserialization error points at.
type LooseTable = BTreeMap<Spanned<String>, Spanned<toml::Value>>;

/// `tunnel[i] "name"` or `network[i] "name"`.
type Labeller = fn(usize, &str) -> String;

#[derive(Deserialize)]
struct LooseFile {
    dataplane: Option<LooseTable>,
    host: Option<LooseTable>,
    gateway: Option<LooseTable>,
    pfcp: Option<LooseTable>,
    overlay: Option<LooseTable>,
    evpn: Option<LooseTable>,
    tunnel: Option<Vec<LooseTable>>,
    network: Option<Vec<LooseTable>>,
}

/// A [`ConfigError`] for an error of the TOML reader: at the field its span
/// falls in when one does, else at its line.
pub(super) fn toml_error(text: &str, e: &toml::de::Error) -> ConfigError {
    let message = tidy_toml_message(e.message());
    let Some(span) = e.span() else {
        return ConfigError {
            field: "config".to_string(),
            message,
        };
    };
    let start = span.start.min(text.len());
    let line = text.as_bytes()[..start]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1;
    match locate(text, span) {
        Some(field) => ConfigError {
            field,
            message: format!("{message} (line {line})"),
        },
        None => ConfigError {
            field: format!("line {line}"),
            message,
        },
    }
}

/// The key whose key or value span holds `span` in `table`.
fn find_key(table: &LooseTable, span: &core::ops::Range<usize>) -> Option<String> {
    let inside = |r: core::ops::Range<usize>| r.start <= span.start && span.end <= r.end;
    table.iter().find_map(|(k, v)| {
        // A table value's span is its header, not its body: only
        // scalar and array values (and every key) can hold an error.
        let value_holds = !v.get_ref().is_table() && inside(v.span());
        (inside(k.span()) || value_holds).then(|| key_text(k.get_ref()))
    })
}

/// A key as it is written in TOML: bare when it can be, else quoted (an
/// empty key, `"" = 1`, must still name something).
fn key_text(k: &str) -> String {
    let bare = !k.is_empty()
        && k.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if bare {
        k.to_string()
    } else {
        format!("{k:?}")
    }
}

fn locate(text: &str, span: core::ops::Range<usize>) -> Option<String> {
    if let Ok(loose) = toml::from_str::<LooseFile>(text) {
        let sections = [
            ("dataplane", &loose.dataplane),
            ("host", &loose.host),
            ("gateway", &loose.gateway),
            ("pfcp", &loose.pfcp),
            ("overlay", &loose.overlay),
            ("evpn", &loose.evpn),
        ];
        for (section, table) in sections {
            if let Some(key) = table.as_ref().and_then(|t| find_key(t, &span)) {
                return Some(format!("{section}.{key}"));
            }
        }
        let lists: [(&Option<Vec<LooseTable>>, Labeller); 2] = [
            (&loose.tunnel, tunnel_label),
            (&loose.network, network_label),
        ];
        for (list, label) in lists {
            for (i, t) in list.iter().flatten().enumerate() {
                if let Some(key) = find_key(t, &span) {
                    let name = t
                        .iter()
                        .find(|(k, _)| k.get_ref() == "name")
                        .and_then(|(_, v)| v.get_ref().as_str());
                    return Some(format!("{}.{key}", label(i, name.unwrap_or(""))));
                }
            }
        }
    }
    let top: LooseTable = toml::from_str(text).ok()?;
    find_key(&top, &span)
}

/// toml/serde wording into config wording.
fn tidy_toml_message(m: &str) -> String {
    m.replace("expected a sequence", "expected an array")
        .replace(
            "expected struct RawTunnel",
            "expected a [[tunnel]] or [[network]] table",
        )
        .replace("expected struct RawOverlay", "expected an [overlay] table")
        .replace("expected struct RawEvpn", "expected an [evpn] table")
        .replace("expected struct RawFdbEntry", "expected { mac, dst }")
        .replace("expected struct RawNeighbour", "expected { ip, mac }")
        .replace("expected struct RawRoute", "expected { prefix, dst }")
        .replace(
            "expected struct RawDataplane",
            "expected a [dataplane] table",
        )
        .replace("expected struct RawHost", "expected a [host] table")
        .replace("expected struct RawGateway", "expected a [gateway] table")
        .replace("expected struct RawFile", "expected a table")
}

#[cfg(test)]
mod tests {
    use crate::testing::{err, tunnel};

    #[test]
    fn syntax_errors_name_the_line() {
        let e = err("[dataplane]\nrestart_counter = 1\n[[tunnel]\nname = \"a\"\n");
        assert_eq!(e.field, "line 3");
        assert!(e.message.contains("expected `]`"), "{e}");
        let e = err("[[tunnel]]\nname = \"a\"\nname = \"b\"\n");
        assert_eq!(e.to_string(), "line 3: duplicate key");
    }

    /// Found by the config fuzz target: an empty key named nothing.
    #[test]
    fn keys_that_are_not_bare_are_named_quoted() {
        let e = err("\"\"=0\n");
        assert_eq!(e.field, "\"\"");
        assert!(e.message.starts_with("unknown field ``"), "{e}");
        let e = err("[host]\n\"a b\" = 1\n");
        assert_eq!(e.field, "host.\"a b\"");
        // Inside [pfcp], a value of the wrong type names its field.
        let e = err("[pfcp]\nn3 = [\"192.0.2.1\"]\nue_prefixes = [\"10.45.0.0/16\"]\nmax_sessions = \"many\"\n");
        assert_eq!(e.field, "pfcp.max_sessions");
    }

    #[test]
    fn unknown_top_level_key() {
        let e = err("tunnels = []\n");
        assert_eq!(e.field, "tunnels");
        assert_eq!(
            e.message,
            "unknown field `tunnels`, expected one of `dataplane`, `host`, `gateway`, `pfcp`, `overlay`, `evpn`, `tunnel`, `network` (line 1)"
        );
        let e = err("tunnel = 5\n");
        assert_eq!(
            e.to_string(),
            "tunnel: invalid type: integer `5`, expected an array (line 1)"
        );
    }

    #[test]
    fn unknown_tunnel_field_names_the_key() {
        let text = tunnel("a", "vxlan", "") + &tunnel("b", "vxlan", "vni_typo = 3");
        let e = err(&text);
        assert_eq!(e.field, "tunnel[1] \"b\".vni_typo");
        assert!(
            e.message
                .starts_with("unknown field `vni_typo`, expected one of `name`, `kind`"),
            "{e}"
        );
        assert!(e.message.ends_with("(line 14)"), "{e}");
        // Inline tables too.
        let e = err("tunnel = [{ name = \"x\", colour = \"red\" }]\n");
        assert_eq!(e.field, "tunnel[0] \"x\".colour");
    }

    #[test]
    fn type_errors_name_the_field() {
        let text = tunnel("a", "gtpu", "") + &tunnel("b", "vxlan", "local_port = \"4789\"");
        let e = err(&text);
        assert_eq!(
            e.to_string(),
            "tunnel[1] \"b\".local_port: invalid type: string \"4789\", expected an integer (line 14)"
        );
        let e = err(&tunnel("a", "gtpu", "source_ports = [1, \"x\"]"));
        assert_eq!(e.field, "tunnel[0] \"a\".source_ports");
        let e = err(&tunnel("a", "gtpu", "zero_checksum_tx = 1"));
        assert_eq!(e.field, "tunnel[0] \"a\".zero_checksum_tx");
        assert!(e.message.contains("expected a boolean"), "{e}");
        let e = err(&tunnel("a", "gtpu", "ttl = true"));
        assert_eq!(
            e.to_string(),
            "tunnel[0] \"a\".ttl: invalid type: boolean `true`, expected an integer or \"inherit\" (line 7)"
        );
        // A bad name cannot label the tunnel.
        let e = err("[[tunnel]]\nname = \"a b\"\nkind = 3\n");
        assert_eq!(e.field, "tunnel[0].kind");
    }
}
