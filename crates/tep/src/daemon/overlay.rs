//! The overlay's control verbs, worded as `bridge fdb`, `ip neigh` and
//! `ip route` word theirs ("dev" names the network): `fdb`, `peer`,
//! `neigh`, `route` with `show [dev NET] [json]`, `add`, `replace`,
//! `del`, and `show networks [json]`. The CLI parses a line with the same
//! [`parse`] before it connects, so a malformed one is refused alike on
//! both sides. Changes go live at once: the [`Overlay`] publishes them.

use super::liveness::{self, Liveness};
use super::state::State;
use core::fmt;
use serde::Serialize;
use std::net::IpAddr;
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;
use tep_config::{Config, IpPrefix};
use tep_dataplane::config::uses_vni;
use tep_dataplane::overlay::fdb::Origin;
use tep_dataplane::overlay::{fmt_mac, NetworkStats, Overlay, OverlayError};

/// A change a verb makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    FdbAdd,
    FdbReplace,
    FdbDel,
    PeerAdd,
    PeerDel,
    NeighAdd,
    NeighReplace,
    NeighDel,
    RouteAdd,
    RouteReplace,
    RouteDel,
}

/// Every verb that changes a table: table, verb, its words (UPPER: a
/// value; lower: that word itself).
const GRAMMAR: &[(&str, &str, &str, Op)] = &[
    ("fdb", "add", "MAC dst ADDR dev NET", Op::FdbAdd),
    ("fdb", "replace", "MAC dst ADDR dev NET", Op::FdbReplace),
    ("fdb", "del", "MAC dev NET", Op::FdbDel),
    ("peer", "add", "ADDR dev NET", Op::PeerAdd),
    ("peer", "del", "ADDR dev NET", Op::PeerDel),
    ("neigh", "add", "IP lladdr MAC dev NET", Op::NeighAdd),
    (
        "neigh",
        "replace",
        "IP lladdr MAC dev NET",
        Op::NeighReplace,
    ),
    ("neigh", "del", "IP dev NET", Op::NeighDel),
    ("route", "add", "PREFIX via ADDR dev NET", Op::RouteAdd),
    (
        "route",
        "replace",
        "PREFIX via ADDR dev NET",
        Op::RouteReplace,
    ),
    ("route", "del", "PREFIX dev NET", Op::RouteDel),
];

/// The tables the verbs name.
pub const TABLES: [&str; 4] = ["fdb", "peer", "neigh", "route"];

/// A verb's values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Args {
    mac: [u8; 6],
    addr: IpAddr,
    prefix: IpPrefix,
    net: String,
}

/// A parsed request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// `TABLE show [dev NET] [json]`.
    Show {
        table: &'static str,
        dev: Option<String>,
        json: bool,
    },
    /// A change.
    Change(Op, Args),
}

/// Parses `words` (`fdb add 02:00:00:00:00:01 dst 192.0.2.2 dev blue`);
/// the error names the word that is wrong or missing.
pub fn parse(words: &[&str]) -> Result<Request, String> {
    let (table, verb, rest) = match words {
        [t, v, rest @ ..] => (*t, *v, rest),
        [t] => (*t, "", &[][..]),
        [] => ("", "", &[][..]),
    };
    let Some(table) = TABLES.into_iter().find(|&t| t == table) else {
        return Err(format!("unknown table {table:?} ({})", TABLES.join(", ")));
    };
    if verb == "show" {
        return parse_show(table, rest);
    }
    let Some(&(_, verb, pattern, op)) = GRAMMAR.iter().find(|g| g.0 == table && g.1 == verb) else {
        return Err(format!("{table}: unknown verb {verb:?} ({})", usage(table)));
    };
    let what = format!("{table} {verb}");
    let mut args = Args {
        mac: [0; 6],
        addr: IpAddr::from([0, 0, 0, 0]),
        prefix: IpPrefix {
            addr: IpAddr::from([0, 0, 0, 0]),
            len: 0,
        },
        net: String::new(),
    };
    let mut given = rest.iter();
    for slot in pattern.split(' ') {
        let Some(&w) = given.next() else {
            return Err(format!("{what}: missing {slot} ({what} {pattern})"));
        };
        match slot {
            "MAC" => {
                args.mac =
                    parse_mac(w).ok_or_else(|| format!("{what}: {w:?} is not a MAC address"))?
            }
            "ADDR" | "IP" => {
                args.addr = w
                    .parse()
                    .map_err(|_| format!("{what}: {w:?} is not an IP address"))?
            }
            "PREFIX" => args.prefix = w.parse().map_err(|e| format!("{what}: {e}"))?,
            "NET" => args.net = w.to_string(),
            word if w != word => {
                return Err(format!(
                    "{what}: {w:?} where {word:?} goes ({what} {pattern})"
                ))
            }
            _ => {}
        }
    }
    match given.next() {
        Some(w) => Err(format!("{what}: unexpected {w:?} ({what} {pattern})")),
        None => Ok(Request::Change(op, args)),
    }
}

fn parse_show(table: &'static str, words: &[&str]) -> Result<Request, String> {
    let (mut dev, mut json) = (None, false);
    let mut given = words.iter();
    while let Some(&w) = given.next() {
        match (w, given.clone().next()) {
            ("json", _) if !json => json = true,
            ("dev", Some(net)) if dev.is_none() => {
                dev = Some(net.to_string());
                given.next();
            }
            ("dev", None) => return Err(format!("{table} show: missing NET after \"dev\"")),
            _ => {
                return Err(format!(
                    "{table} show: unexpected {w:?} ({table} show [dev NET] [json])"
                ))
            }
        }
    }
    Ok(Request::Show { table, dev, json })
}

/// The forms of `table`'s verbs.
pub fn forms(table: &str) -> Vec<String> {
    let mut forms = vec![format!("{table} show [dev NET] [json]")];
    forms.extend(
        GRAMMAR
            .iter()
            .filter(|g| g.0 == table)
            .map(|g| format!("{table} {} {}", g.1, g.2)),
    );
    forms
}

fn usage(table: &str) -> String {
    forms(table).join(" | ")
}

/// `aa:bb:cc:dd:ee:ff` (one or two hex digits an octet).
fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = s.split(':');
    for octet in &mut mac {
        let p = parts.next()?;
        if p.is_empty() || p.len() > 2 || !p.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        *octet = u8::from_str_radix(p, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

/// The overlay in effect, or why there is none.
pub fn current(state: &State) -> Result<Arc<Overlay>, String> {
    state
        .overlay
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
        .ok_or_else(|| "the config has no [[network]]: no FDB, peers, neighbours or routes".into())
}

/// Answers a parsed request: the table shown, or nothing for a change.
pub fn apply(req: &Request, o: &Overlay) -> Result<String, String> {
    match req {
        Request::Show { table, dev, json } => show(o, table, dev.as_deref(), *json),
        Request::Change(op, a) => change(o, *op, a).map(|()| String::new()).map_err(|e| {
            let (t, v) = GRAMMAR
                .iter()
                .find(|g| g.3 == *op)
                .map_or(("", ""), |g| (g.0, g.1));
            format!("{t} {v}: {e}")
        }),
    }
}

fn change(o: &Overlay, op: Op, a: &Args) -> Result<(), OverlayError> {
    let n = a.net.as_str();
    match op {
        Op::FdbAdd | Op::FdbReplace => o.fdb_add(n, a.mac, a.addr, op == Op::FdbReplace),
        Op::FdbDel => o.fdb_del(n, a.mac),
        Op::PeerAdd => o.peer_add(n, a.addr),
        Op::PeerDel => o.peer_del(n, a.addr),
        Op::NeighAdd | Op::NeighReplace => o.neigh_add(n, a.addr, a.mac, op == Op::NeighReplace),
        Op::NeighDel => o.neigh_del(n, a.addr),
        Op::RouteAdd | Op::RouteReplace => o.route_add(n, a.prefix, a.addr, op == Op::RouteReplace),
        Op::RouteDel => o.route_del(n, a.prefix),
    }
}

fn origin(o: Origin) -> &'static str {
    match o {
        Origin::Static => "static",
        Origin::Learned => "learned",
        Origin::External => "external",
    }
}

/// `fdb show`'s row.
#[derive(Clone, Debug, Serialize)]
struct FdbLine {
    network: String,
    mac: String,
    dst: Option<IpAddr>,
    origin: &'static str,
    local: bool,
    age_s: u32,
}

impl fmt::Display for FdbLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.mac)?;
        if let Some(d) = self.dst {
            write!(f, " dst {d}")?;
        }
        write!(f, " dev {}", self.network)?;
        match (self.local, self.origin) {
            (true, "learned") => write!(f, " local age {}s", self.age_s),
            (true, o) => write!(f, " local {o}"),
            (false, "learned") => write!(f, " learned age {}s", self.age_s),
            (false, o) => write!(f, " {o}"),
        }
    }
}

/// `neigh show`'s row.
#[derive(Debug, Serialize)]
struct NeighLine {
    network: String,
    ip: IpAddr,
    mac: String,
    origin: &'static str,
    age_s: u32,
}

impl fmt::Display for NeighLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} dev {} lladdr {} {}",
            self.ip, self.network, self.mac, self.origin
        )?;
        match self.origin {
            "learned" => write!(f, " age {}s", self.age_s),
            _ => Ok(()),
        }
    }
}

/// `route show`'s row.
#[derive(Debug, Serialize)]
struct RouteLine {
    network: String,
    prefix: String,
    via: IpAddr,
}

impl fmt::Display for RouteLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} via {} dev {}", self.prefix, self.via, self.network)
    }
}

/// `peer show`'s row: a member of a flood list.
#[derive(Debug, Serialize)]
struct PeerLine {
    network: String,
    dst: IpAddr,
}

impl fmt::Display for PeerLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "dst {} dev {}", self.dst, self.network)
    }
}

/// Rows as text, a line each, or as one JSON array.
fn render<T: Serialize + fmt::Display>(rows: &[T], json: bool) -> String {
    if json {
        return serde_json::to_string(rows).unwrap_or_default() + "\n";
    }
    rows.iter().map(|r| format!("{r}\n")).collect()
}

fn show(o: &Overlay, table: &str, dev: Option<&str>, json: bool) -> Result<String, String> {
    let now = o.now_s();
    let shown = match table {
        "fdb" => o.fdb_rows(dev).map(|rows| {
            let rows: Vec<_> = rows
                .into_iter()
                .map(|r| FdbLine {
                    network: r.network,
                    mac: fmt_mac(r.mac),
                    dst: r.dst,
                    origin: origin(r.origin),
                    local: r.dst.is_none(),
                    age_s: r.age_s,
                })
                .collect();
            render(&rows, json)
        }),
        "neigh" => o.neigh_rows(dev).map(|rows| {
            let rows: Vec<_> = rows
                .into_iter()
                .map(|(network, ip, n)| NeighLine {
                    network,
                    ip,
                    mac: fmt_mac(n.mac),
                    origin: origin(n.origin),
                    age_s: now.wrapping_sub(n.seen_s) & 0x00ff_ffff,
                })
                .collect();
            render(&rows, json)
        }),
        "route" => o.routes(dev).map(|rows| {
            let rows: Vec<_> = rows
                .into_iter()
                .map(|(network, p, via)| RouteLine {
                    network,
                    prefix: p.to_string(),
                    via,
                })
                .collect();
            render(&rows, json)
        }),
        _ => peer_rows(o, dev).map(|rows| render(&rows, json)),
    };
    shown.map_err(|e| format!("{table} show: {e}"))
}

fn peer_rows(o: &Overlay, dev: Option<&str>) -> Result<Vec<PeerLine>, OverlayError> {
    let names: Vec<&str> = match dev {
        Some(d) => vec![d],
        None => o.networks().iter().map(|n| n.name.as_str()).collect(),
    };
    let mut rows = Vec::new();
    for name in names {
        for dst in o.peers(name)? {
            let network = name.to_string();
            rows.push(PeerLine { network, dst });
        }
    }
    Ok(rows)
}

/// A network's event counters by name (`show networks`, and the
/// metrics' `event` label).
pub fn events(s: &NetworkStats) -> [(&'static str, u64); 9] {
    [
        ("learned", s.learned),
        ("aged", s.aged),
        ("moved", s.moved),
        ("learn_refused", s.learn_refused),
        ("move_refused", s.move_refused),
        ("flooded", s.flooded),
        ("flood_copies", s.flood_copies),
        ("suppressed", s.suppressed),
        ("neigh_learned", s.neigh_learned),
    ]
}

/// `show networks`' row.
#[derive(Debug, Serialize)]
struct NetworkLine {
    name: String,
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    vni: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    key: Option<u32>,
    local: IpAddr,
    port: u16,
    /// Host mode's TAP or TUN.
    #[serde(skip_serializing_if = "Option::is_none")]
    device: Option<String>,
    /// Gateway mode's VLAN on the inner interface (None: untagged).
    #[serde(skip_serializing_if = "Option::is_none")]
    vlan: Option<u16>,
    learning: bool,
    ageing_s: u32,
    max_macs: u32,
    neigh_suppress: bool,
    flood: Vec<IpAddr>,
    fdb_entries: u64,
    neighbours: u64,
    #[serde(serialize_with = "as_map")]
    events: [(&'static str, u64); 9],
}

/// Named counters as one object, in their order.
fn as_map<S: serde::Serializer>(pairs: &[(&'static str, u64); 9], s: S) -> Result<S::Ok, S::Error> {
    s.collect_map(pairs.iter().copied())
}

impl fmt::Display for NetworkLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let on = |b: bool| if b { "on" } else { "off" };
        let id = match (self.vni, self.key) {
            (Some(v), _) => format!(" vni {v}"),
            (None, Some(k)) => format!(" key {k}"),
            _ => String::new(),
        };
        writeln!(
            f,
            "{}: {}{id} local {} port {}",
            self.name, self.kind, self.local, self.port
        )?;
        match (&self.device, self.vlan) {
            (Some(d), _) => write!(f, "  device {d}")?,
            (None, Some(v)) => write!(f, "  vlan {v}")?,
            (None, None) => write!(f, "  untagged")?,
        }
        writeln!(
            f,
            ", learning {}, ageing {}s, max_macs {}, neigh_suppress {}",
            on(self.learning),
            self.ageing_s,
            self.max_macs,
            on(self.neigh_suppress)
        )?;
        let flood: Vec<String> = self.flood.iter().map(IpAddr::to_string).collect();
        writeln!(
            f,
            "  flood {}",
            if flood.is_empty() {
                "none".into()
            } else {
                flood.join(" ")
            }
        )?;
        write!(
            f,
            "  fdb_entries {} neighbours {}",
            self.fdb_entries, self.neighbours
        )?;
        for (k, v) in &self.events {
            write!(f, " {k} {v}")?;
        }
        Ok(())
    }
}

/// `show networks [json]`: each network's settings, flood list, table
/// sizes and counters.
pub fn show_networks(o: &Overlay, config: &Config, json: bool) -> String {
    let all = o.stats();
    let rows: Vec<NetworkLine> = o
        .networks()
        .iter()
        .enumerate()
        .filter_map(|(i, n)| {
            let t = config.tunnels.get(n.tunnel as usize)?;
            let s = t.network.as_deref()?;
            let stats = all.get(i).copied().unwrap_or_default();
            Some(NetworkLine {
                name: n.name.clone(),
                kind: t.kind.name(),
                vni: uses_vni(t.kind).then_some(t.vni),
                key: t.key,
                local: t.local,
                port: t.local_port,
                device: config
                    .gateway
                    .is_none()
                    .then(|| s.device.clone().unwrap_or_else(|| default_device(&n.name))),
                vlan: s.vlan.filter(|_| config.gateway.is_some()),
                learning: n.learning,
                ageing_s: n.ageing_s,
                max_macs: n.max_macs,
                neigh_suppress: n.neigh_suppress,
                flood: o.peers(&n.name).unwrap_or_default(),
                fdb_entries: stats.entries,
                neighbours: stats.neighbours,
                events: events(&stats),
            })
        })
        .collect();
    render(&rows, json)
}

/// A network's device when the config names none: `tep-<name>`, cut to
/// the 15 bytes of an interface name.
fn default_device(name: &str) -> String {
    let mut d = format!("tep-{name}");
    let mut end = d.len().min(15);
    while !d.is_char_boundary(end) {
        end -= 1;
    }
    d.truncate(end);
    d
}

/// The thread that ages out learned entries once a second, whichever
/// overlay is in effect; stopped (and joined) when dropped.
#[derive(Debug)]
pub struct Sweeper {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<Result<(), String>>>,
}

/// How often learned entries are aged out.
const SWEEP_EVERY: Duration = Duration::from_secs(1);

impl Sweeper {
    /// Starts the thread over `state`'s overlay.
    pub fn start(state: Arc<State>, watch: &Liveness) -> Result<Sweeper, String> {
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = liveness::spawn(watch, "overlay-sweep", 10 * SWEEP_EVERY, move |beat| {
            while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(SWEEP_EVERY) {
                beat.beat();
                let overlay = state
                    .overlay
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone();
                if let Some(o) = overlay {
                    o.sweep();
                }
            }
            Ok(())
        })
        .map_err(|e| format!("cannot start the overlay's ageing thread: {e}"))?;
        Ok(Sweeper {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for Sweeper {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<&str> {
        line.split_whitespace().collect()
    }

    fn err(line: &str) -> String {
        parse(&words(line)).unwrap_err()
    }

    #[test]
    fn every_verb_parses() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let mac = [2, 0, 0, 0, 0, 0xb];
        for (line, op) in [
            (
                "fdb add 02:00:00:00:00:0b dst 192.0.2.2 dev blue",
                Op::FdbAdd,
            ),
            (
                "fdb replace 2:0:0:0:0:B dst 192.0.2.2 dev blue",
                Op::FdbReplace,
            ),
            ("fdb del 02:00:00:00:00:0b dev blue", Op::FdbDel),
            ("peer add 192.0.2.2 dev blue", Op::PeerAdd),
            ("peer del 192.0.2.2 dev blue", Op::PeerDel),
            (
                "neigh add 192.0.2.2 lladdr 02:00:00:00:00:0b dev blue",
                Op::NeighAdd,
            ),
            (
                "neigh replace 192.0.2.2 lladdr 02:00:00:00:00:0b dev blue",
                Op::NeighReplace,
            ),
            ("neigh del 192.0.2.2 dev blue", Op::NeighDel),
            ("route add 10.1.0.0/16 via 192.0.2.2 dev blue", Op::RouteAdd),
            (
                "route replace 10.1.0.0/16 via 192.0.2.2 dev blue",
                Op::RouteReplace,
            ),
            ("route del 10.1.0.0/16 dev blue", Op::RouteDel),
        ] {
            let Ok(Request::Change(got, a)) = parse(&words(line)) else {
                panic!("{line}: {:?}", parse(&words(line)));
            };
            assert_eq!(got, op, "{line}");
            assert_eq!(a.net, "blue");
            let (t, v, pattern, _) = GRAMMAR.iter().find(|g| g.3 == op).unwrap();
            assert!(line.starts_with(&format!("{t} {v} ")));
            if pattern.contains("MAC") {
                assert_eq!(a.mac, mac, "{line}");
            }
            if pattern.contains("ADDR") || pattern.starts_with("IP") {
                assert_eq!(a.addr, ip("192.0.2.2"), "{line}");
            }
            if pattern.contains("PREFIX") {
                assert_eq!(a.prefix.to_string(), "10.1.0.0/16");
            }
        }
        for (line, table, dev, json) in [
            ("fdb show", "fdb", None, false),
            ("peer show json", "peer", None, true),
            ("neigh show dev blue", "neigh", Some("blue"), false),
            ("route show json dev red", "route", Some("red"), true),
            ("fdb show dev blue json", "fdb", Some("blue"), true),
        ] {
            let want = Request::Show {
                table,
                dev: dev.map(String::from),
                json,
            };
            assert_eq!(parse(&words(line)), Ok(want), "{line}");
        }
    }

    #[test]
    fn every_malformed_word_is_named() {
        for (line, want) in [
            ("", "unknown table \"\""),
            ("bridge show", "unknown table \"bridge\""),
            ("fdb", "fdb: unknown verb \"\""),
            (
                "fdb append",
                "fdb: unknown verb \"append\" (fdb show [dev NET] [json] | fdb add",
            ),
            (
                "peer replace 192.0.2.2 dev blue",
                "peer: unknown verb \"replace\"",
            ),
            (
                "fdb add 02:00:00:00:00 dst 192.0.2.2 dev blue",
                "fdb add: \"02:00:00:00:00\" is not a MAC address",
            ),
            (
                "fdb add 02:00:00:00:00:00:01 dst 192.0.2.2 dev blue",
                "\"02:00:00:00:00:00:01\" is not a MAC address",
            ),
            (
                "fdb add 02:00:00:00:00:0g dst 192.0.2.2 dev blue",
                "\"02:00:00:00:00:0g\" is not a MAC",
            ),
            (
                "fdb add 02:00:00:00:00:+1 dst 192.0.2.2 dev blue",
                "\"02:00:00:00:00:+1\" is not a MAC",
            ),
            (
                "fdb add 02:00:00:00:00:001 dst 192.0.2.2 dev blue",
                "\"02:00:00:00:00:001\" is not a MAC",
            ),
            (
                "fdb add 02:00:00:00:00:01 dst 192.0.2.300 dev blue",
                "fdb add: \"192.0.2.300\" is not an IP address",
            ),
            (
                "fdb add 02:00:00:00:00:01 via 192.0.2.2 dev blue",
                "fdb add: \"via\" where \"dst\" goes (fdb add MAC dst ADDR dev NET)",
            ),
            (
                "fdb add 02:00:00:00:00:01 dst 192.0.2.2",
                "fdb add: missing dev (fdb add MAC dst ADDR dev NET)",
            ),
            (
                "fdb add 02:00:00:00:00:01 dst 192.0.2.2 dev",
                "fdb add: missing NET",
            ),
            ("fdb add", "fdb add: missing MAC"),
            (
                "fdb del 02:00:00:00:00:01 dev blue now",
                "fdb del: unexpected \"now\" (fdb del MAC dev NET)",
            ),
            (
                "peer add blue dev blue",
                "peer add: \"blue\" is not an IP address",
            ),
            (
                "peer del 192.0.2.2 net blue",
                "peer del: \"net\" where \"dev\" goes",
            ),
            (
                "neigh add 10.0.0.1 lladdr 02:00:00:00:01 dev blue",
                "neigh add: \"02:00:00:00:01\" is not a MAC address",
            ),
            (
                "neigh replace 10.0.0.1 02:00:00:00:00:01 dev blue",
                "neigh replace: \"02:00:00:00:00:01\" where \"lladdr\" goes",
            ),
            (
                "neigh del 10.0.0 dev blue",
                "neigh del: \"10.0.0\" is not an IP address",
            ),
            (
                "route add 10.1.2.3/16 via 192.0.2.2 dev red",
                "route add: 10.1.2.3/16 has host bits set; did you mean 10.1.0.0/16?",
            ),
            (
                "route add 10.1.0.0/33 via 192.0.2.2 dev red",
                "route add: \"10.1.0.0/33\": the prefix length 33 is too long",
            ),
            (
                "route replace x/8 via 192.0.2.2 dev red",
                "route replace: \"x/8\" is not an IP prefix",
            ),
            ("route del 10.1.0.0/16", "route del: missing dev"),
            ("fdb show dev", "fdb show: missing NET after \"dev\""),
            ("fdb show json json", "fdb show: unexpected \"json\""),
            ("route show dev a dev b", "route show: unexpected \"dev\""),
            (
                "neigh show all",
                "neigh show: unexpected \"all\" (neigh show [dev NET] [json])",
            ),
            (
                "fdb add \u{1b}[2J dst 192.0.2.2 dev blue",
                "\"\\u{1b}[2J\" is not a MAC address",
            ),
        ] {
            let e = err(line);
            assert!(e.contains(want), "{line:?}: {e}");
        }
    }

    #[test]
    fn rows_render_as_bridge_and_ip_print_them_and_as_json() {
        let remote = FdbLine {
            network: "blue".into(),
            mac: "02:00:00:00:00:02".into(),
            dst: Some("192.0.2.2".parse().unwrap()),
            origin: "learned",
            local: false,
            age_s: 12,
        };
        let local = FdbLine {
            dst: None,
            local: true,
            ..remote.clone()
        };
        let pinned = FdbLine {
            origin: "static",
            ..remote.clone()
        };
        assert_eq!(
            render(&[remote, local.clone(), pinned], false),
            "02:00:00:00:00:02 dst 192.0.2.2 dev blue learned age 12s\n\
             02:00:00:00:00:02 dev blue local age 12s\n\
             02:00:00:00:00:02 dst 192.0.2.2 dev blue static\n"
        );
        let json: serde_json::Value = serde_json::from_str(&render(&[local], true)).unwrap();
        assert_eq!(
            json,
            serde_json::json!([{"network": "blue", "mac": "02:00:00:00:00:02", "dst": null,
                "origin": "learned", "local": true, "age_s": 12}])
        );
        let n = NeighLine {
            network: "blue".into(),
            ip: "10.0.0.5".parse().unwrap(),
            mac: "02:00:00:00:00:05".into(),
            origin: "learned",
            age_s: 7,
        };
        let want = "10.0.0.5 dev blue lladdr 02:00:00:00:00:05 learned age 7s\n";
        assert_eq!(render(&[n], false), want);
        let r = RouteLine {
            network: "red".into(),
            prefix: "10.1.0.0/16".into(),
            via: "192.0.2.2".parse().unwrap(),
        };
        assert_eq!(render(&[r], false), "10.1.0.0/16 via 192.0.2.2 dev red\n");
        let p = PeerLine {
            network: "blue".into(),
            dst: "2001:db8::2".parse().unwrap(),
        };
        let want = "[{\"network\":\"blue\",\"dst\":\"2001:db8::2\"}]\n";
        assert_eq!(render(&[p], true), want);
        assert_eq!(render::<PeerLine>(&[], true), "[]\n");
        assert_eq!(render::<PeerLine>(&[], false), "");
    }

    /// Needs the real FDB and neighbour tables.
    #[test]
    fn verbs_change_the_overlay_and_show_what_they_did() {
        use tep_dataplane::config::{NetworkSettings, TunnelConfig};
        use tep_dataplane::TunnelKind;
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let l2 = NetworkSettings::default();
        let tunnels = [
            TunnelConfig::network("blue", TunnelKind::Vxlan, ip("192.0.2.1"), l2.clone()),
            TunnelConfig::network("red", TunnelKind::Gue, ip("192.0.2.1"), l2),
        ];
        let o = Overlay::new(&tunnels, 64, 16).unwrap();
        let run = |line: &str| parse(&words(line)).and_then(|r| apply(&r, &o));
        for line in [
            "fdb add 02:00:00:00:00:02 dst 192.0.2.2 dev blue",
            "fdb replace 02:00:00:00:00:02 dst 192.0.2.3 dev blue",
            "fdb add 02:00:00:00:00:04 dst 192.0.2.4 dev blue",
            "fdb del 02:00:00:00:00:04 dev blue",
            "peer add 192.0.2.5 dev blue",
            "peer add 192.0.2.6 dev red",
            "neigh add 10.0.0.7 lladdr 02:00:00:00:00:07 dev blue",
            "route add 10.8.0.0/16 via 192.0.2.8 dev red",
        ] {
            assert_eq!(run(line), Ok(String::new()), "{line}");
        }
        let fdb = run("fdb show dev blue").unwrap();
        assert_eq!(fdb, "02:00:00:00:00:02 dst 192.0.2.3 dev blue static\n");
        assert_eq!(
            run("peer show").unwrap(),
            "dst 192.0.2.5 dev blue\ndst 192.0.2.6 dev red\n"
        );
        let neigh = run("neigh show json").unwrap();
        let neigh: serde_json::Value = serde_json::from_str(&neigh).unwrap();
        assert_eq!(neigh[0]["ip"], "10.0.0.7");
        assert_eq!(neigh[0]["origin"], "static");
        assert_eq!(
            run("route show dev red").unwrap(),
            "10.8.0.0/16 via 192.0.2.8 dev red\n"
        );
        for (line, want) in [
            (
                "fdb add 02:00:00:00:00:02 dst 192.0.2.2 dev blue",
                "fdb add: network \"blue\": 02:00:00:00:00:02 is already in the FDB",
            ),
            (
                "fdb add 03:00:00:00:00:02 dst 192.0.2.2 dev blue",
                "fdb add: 03:00:00:00:00:02 is not a unicast MAC",
            ),
            (
                "fdb add 02:00:00:00:00:09 dst 2001:db8::2 dev blue",
                "fdb add: VTEP 2001:db8::2: not of network \"blue\"'s address family",
            ),
            (
                "fdb del 02:00:00:00:00:09 dev green",
                "fdb del: network \"green\": no network of that name",
            ),
            (
                "fdb add 02:00:00:00:00:09 dst 192.0.2.2 dev red",
                "fdb add: network \"red\": an L3 network has routes",
            ),
            (
                "peer del 192.0.2.9 dev blue",
                "peer del: network \"blue\": 192.0.2.9 is not in the flood list",
            ),
            (
                "route del 10.9.0.0/16 dev red",
                "route del: network \"red\": no route to 10.9.0.0/16",
            ),
            (
                "fdb show dev green",
                "fdb show: network \"green\": no network of that name",
            ),
            ("peer show dev green", "peer show: network \"green\""),
        ] {
            let e = run(line).unwrap_err();
            assert!(e.starts_with(want), "{line}: {e}");
        }
        let config = Config {
            tunnels: tunnels.to_vec(),
            ..Config::default()
        };
        let shown: serde_json::Value =
            serde_json::from_str(&show_networks(&o, &config, true)).unwrap();
        assert_eq!(shown[0]["name"], "blue");
        assert_eq!(shown[0]["kind"], "vxlan");
        assert_eq!(shown[0]["vni"], 0);
        assert_eq!(shown[0]["device"], "tep-blue");
        assert_eq!(shown[0]["flood"], serde_json::json!(["192.0.2.5"]));
        assert_eq!(shown[0]["fdb_entries"], 1);
        assert_eq!(shown[0]["neighbours"], 1);
        assert_eq!(shown[0]["events"]["learned"], 0);
        assert!(shown[1].get("vni").is_none());
        let text = show_networks(&o, &config, false);
        assert!(text.starts_with("blue: vxlan vni 0 local 192.0.2.1 port 4789\n  device tep-blue, learning on, ageing 300s, max_macs 16384, neigh_suppress off\n  flood 192.0.2.5\n  fdb_entries 1 neighbours 1 learned 0 aged 0"), "{text}");
    }

    #[test]
    fn a_default_device_name_fits_an_interface_name() {
        assert_eq!(default_device("blue"), "tep-blue");
        assert_eq!(default_device("a-very-long-network"), "tep-a-very-long");
        assert_eq!(default_device("ééééééééé"), "tep-ééééé");
    }
}
