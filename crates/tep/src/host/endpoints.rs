//! The local UDP endpoints of a config's tunnels: one socket per local
//! address and port, shared by the tunnels on it, with the socket options
//! its first tunnel asks for.

use std::net::SocketAddr;
use tep_config::{ChecksumMode, Config, DontFragment};

/// The local (address, port) pairs the tunnels receive on, and which one
/// each tunnel sends from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Endpoints {
    /// Unique local endpoints, in order of first use.
    pub addrs: Vec<SocketAddr>,
    /// Per tunnel: its endpoint's index.
    pub of_tunnel: Vec<usize>,
    /// Per endpoint: whether it sends zero checksums (any tunnel on it
    /// does; the config allows only one checksum policy per socket to make
    /// sense, so the first tunnel's decides).
    pub zero_tx: Vec<bool>,
    /// Per endpoint: accepts zero checksums over IPv6.
    pub zero_rx: Vec<bool>,
    /// Per endpoint: the source port range of its first tunnel.
    pub source_ports: Vec<(u16, u16)>,
    /// Per endpoint: its first tunnel's outer Don't-Fragment (a socket
    /// sets DF for all it sends; `inherit` cannot be done per packet and
    /// is left to the kernel, which sets it).
    pub dont_fragment: Vec<Option<bool>>,
}

impl Endpoints {
    /// The endpoints of `config`'s tunnels.
    pub fn of(config: &Config) -> Endpoints {
        let mut e = Endpoints::default();
        for t in &config.tunnels {
            let a = SocketAddr::new(t.local, t.local_port);
            let i = match e.addrs.iter().position(|&x| x == a) {
                Some(i) => i,
                None => {
                    e.addrs.push(a);
                    e.zero_tx.push(t.checksum == ChecksumMode::Zero);
                    e.zero_rx.push(false);
                    e.source_ports.push(t.source_ports);
                    e.dont_fragment.push(match t.df {
                        DontFragment::Set => Some(true),
                        DontFragment::Unset => Some(false),
                        DontFragment::Inherit => None,
                    });
                    e.addrs.len() - 1
                }
            };
            e.zero_rx[i] |= t.zero_checksum_rx;
            e.of_tunnel.push(i);
        }
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_shared_by_tunnels_on_one_address_and_port() {
        let c = Config::parse(
            r#"
[[tunnel]]
name = "a"
kind = "vxlan"
local = "10.0.0.1"
remote = "10.0.0.2"
vni = 1
inner_macs = ["02:00:00:00:00:01"]
[[tunnel]]
name = "b"
kind = "vxlan"
local = "10.0.0.1"
remote = "10.0.0.3"
vni = 2
[[tunnel]]
name = "c"
kind = "gue"
local = "10.0.0.1"
remote = "10.0.0.2"
checksum = "zero"
"#,
        )
        .unwrap();
        let e = Endpoints::of(&c);
        assert_eq!(
            e.addrs,
            vec![
                "10.0.0.1:4789".parse::<SocketAddr>().unwrap(),
                "10.0.0.1:6080".parse().unwrap()
            ]
        );
        assert_eq!(e.of_tunnel, vec![0, 0, 1]);
        assert_eq!(e.zero_tx, vec![false, true]);
    }
}
