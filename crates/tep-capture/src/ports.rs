//! Which tunnel a UDP port carries.

use std::collections::BTreeMap;

pub use tep_dataplane::TunnelKind;

/// UDP port → tunnel kind, matched on the destination port, then the source
/// port (a reply from a tunnel port, e.g. a GTP-U Echo Response).
#[derive(Debug, Clone)]
pub struct PortMap {
    map: BTreeMap<u16, Option<TunnelKind>>,
}

impl Default for PortMap {
    /// The usual numbers: 4789 VXLAN, 6081 Geneve, 2152 GTP-U, 4754
    /// GRE-in-UDP, 6080 GUE (as Linux users and Katran use it). FOU has no
    /// header and no usual port, so it is never guessed.
    fn default() -> Self {
        let map = [
            (4789, TunnelKind::Vxlan),
            (6081, TunnelKind::Geneve),
            (2152, TunnelKind::Gtpu),
            (4754, TunnelKind::GreInUdp),
            (6080, TunnelKind::Gue),
        ]
        .into_iter()
        .map(|(p, k)| (p, Some(k)))
        .collect();
        PortMap { map }
    }
}

impl PortMap {
    /// Applies one `PORT=KIND` override (`KIND` may be `none`).
    pub fn apply(&mut self, spec: &str) -> Result<(), String> {
        let (port, kind) = spec
            .split_once('=')
            .ok_or_else(|| format!("--port '{spec}': expected PORT=KIND, e.g. 5555=fou-ipip"))?;
        let port: u16 = port
            .trim()
            .parse()
            .map_err(|_| format!("--port '{spec}': '{port}' is not a UDP port number"))?;
        let kind = match kind.trim() {
            "none" => None,
            k => Some(k.parse().map_err(|e| format!("--port '{spec}': {e}"))?),
        };
        self.map.insert(port, kind);
        Ok(())
    }

    /// The kind for a datagram between these ports, if any.
    pub fn lookup(&self, src_port: u16, dst_port: u16) -> Option<TunnelKind> {
        match self.map.get(&dst_port) {
            Some(k) => *k,
            None => self.map.get(&src_port).copied().flatten(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_overrides() {
        let mut m = PortMap::default();
        assert_eq!(m.lookup(40000, 4789), Some(TunnelKind::Vxlan));
        assert_eq!(m.lookup(2152, 2152), Some(TunnelKind::Gtpu));
        assert_eq!(m.lookup(6081, 33333), Some(TunnelKind::Geneve));
        assert_eq!(m.lookup(5555, 5555), None);
        m.apply("5555=fou-ipip").unwrap();
        m.apply("4789=none").unwrap();
        assert_eq!(m.lookup(1, 5555), Some(TunnelKind::FouIpip));
        assert_eq!(m.lookup(1, 4789), None);
        assert!(m.apply("x=vxlan").unwrap_err().contains("not a UDP port"));
        assert!(m
            .apply("1=bogus")
            .unwrap_err()
            .contains("unknown tunnel kind"));
        assert!(m.apply("1").unwrap_err().contains("PORT=KIND"));
    }
}
