//! `tep show evpn [json]`: each EVPN network's kernel devices, the VTEPs
//! and MAC counts taken from BGP through them, and what was refused.

use super::NetView;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;

#[derive(Serialize)]
struct Line<'a> {
    name: &'a str,
    vni: u32,
    vxlan: &'a str,
    bridge: &'a str,
    port: &'a str,
    vteps: &'a [IpAddr],
    local_macs: usize,
    local_neighbours: usize,
    events: BTreeMap<&'static str, u64>,
}

impl fmt::Display for Line<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{}: vni {} vxlan {} bridge {} port {}",
            self.name, self.vni, self.vxlan, self.bridge, self.port
        )?;
        let vteps: Vec<String> = self.vteps.iter().map(IpAddr::to_string).collect();
        writeln!(
            f,
            "  vteps {}",
            if vteps.is_empty() {
                "none".to_string()
            } else {
                vteps.join(" ")
            }
        )?;
        write!(
            f,
            "  local_macs {} local_neighbours {}",
            self.local_macs, self.local_neighbours
        )?;
        for (k, v) in &self.events {
            write!(f, " {k} {v}")?;
        }
        Ok(())
    }
}

/// The text (or JSON array) of `tep show evpn`.
pub fn show(views: &[NetView], json: bool) -> String {
    let lines: Vec<Line<'_>> = views
        .iter()
        .map(|v| Line {
            name: &v.name,
            vni: v.vni,
            vxlan: &v.vxlan,
            bridge: &v.bridge,
            port: &v.port,
            vteps: &v.vteps,
            local_macs: v.exported,
            local_neighbours: v.exported_neighbours,
            events: v.counters.rows().collect(),
        })
        .collect();
    if json {
        return serde_json::to_string(&lines).unwrap_or_default() + "\n";
    }
    lines.iter().map(|l| format!("{l}\n")).collect()
}
