//! One tunnel between two documentation addresses, set up the same way for
//! the integration tests and `tep-bench pipeline`, so that both run what the
//! other measures.

use crate::config::{ChecksumMode, IpPrefix, TunnelConfig};
use crate::TunnelKind;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use tep_wire::ethernet::EthernetAddress;

/// Side A's underlay address (RFC 5737 / RFC 3849).
pub const A4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
/// Side B's underlay address.
pub const B4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);
/// Side A's IPv6 underlay address.
pub const A6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
/// Side B's IPv6 underlay address.
pub const B6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);
/// The inner destination MAC the L2 tunnels route.
pub const INNER_DST_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0xbb];
/// The inner IPv4 prefix the L3 tunnels route (10.0.0.0/8).
pub const INNER_PREFIX4: IpPrefix = IpPrefix {
    addr: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 0)),
    len: 8,
};
/// The inner IPv6 prefix the L3 tunnels route (2001:db8:8::/47).
pub const INNER_PREFIX6: IpPrefix = IpPrefix {
    addr: IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 8, 0, 0, 0, 0, 0)),
    len: 47,
};

/// The checksum modes `kind` takes: all but `remote`, which only VXLAN
/// and GUE carry (RCO).
pub fn checksum_modes(kind: TunnelKind) -> Vec<ChecksumMode> {
    ChecksumMode::ALL
        .into_iter()
        .filter(|&m| usable_mode(kind, m) == m)
        .collect()
}

/// `mode` where `kind` takes it, else `full` (`remote` without RCO).
pub fn usable_mode(kind: TunnelKind, mode: ChecksumMode) -> ChecksumMode {
    if mode == ChecksumMode::Remote && !matches!(kind, TunnelKind::Vxlan | TunnelKind::Gue) {
        ChecksumMode::Full
    } else {
        mode
    }
}

/// The two ends of one tunnel of `kind` in checksum `mode`, A → B and
/// B → A, over IPv6 when `v6`: VNI 4242, TEID 0x1000 with QFI 9, GRE key 77;
/// every receive opt-in on (zero checksums, RCO), so that every mode runs.
/// L2 kinds route [`INNER_DST_MAC`]; L3 kinds route [`INNER_PREFIX4`] and
/// [`INNER_PREFIX6`], except FOU-IPIP (IPv4 only) and FOU-SIT (IPv6 only).
pub fn tunnel_pair(
    kind: TunnelKind,
    v6: bool,
    mode: ChecksumMode,
) -> (Vec<TunnelConfig>, Vec<TunnelConfig>) {
    let (a, b) = if v6 {
        (IpAddr::V6(A6), IpAddr::V6(B6))
    } else {
        (IpAddr::V4(A4), IpAddr::V4(B4))
    };
    let end = |local, remote, name: &str| {
        let mut t = TunnelConfig::new(name, kind, local, remote);
        t.checksum = mode;
        t.zero_checksum_tx = true;
        t.zero_checksum_rx = true;
        t.remote_checksum_rx = true;
        match kind {
            TunnelKind::Vxlan | TunnelKind::Geneve => t.vni = 4242,
            TunnelKind::Gtpu => {
                t.teid = 0x1000;
                t.local_teid = 0x1000;
                t.qfi = Some(9);
            }
            TunnelKind::GreInUdp | TunnelKind::FouGre | TunnelKind::GueGre => t.key = Some(77),
            _ => {}
        }
        if kind.carries_ethernet() {
            t.inner_macs = vec![EthernetAddress(INNER_DST_MAC)];
        } else {
            t.inner_prefixes = match kind {
                TunnelKind::FouIpip => vec![INNER_PREFIX4],
                TunnelKind::FouSit => vec![INNER_PREFIX6],
                _ => vec![INNER_PREFIX4, INNER_PREFIX6],
            };
        }
        vec![t]
    };
    (end(a, b, "a-to-b"), end(b, a, "b-to-a"))
}

/// A UPF's config: N3 on side A's address (IPv6 when `v6`), the UE pools
/// [`INNER_PREFIX4`] and [`INNER_PREFIX6`], outer checksums by `mode`.
/// Its N3 tunnel is tunnel 0.
pub fn upf(v6: bool, mode: ChecksumMode) -> Vec<TunnelConfig> {
    let n3 = if v6 { IpAddr::V6(A6) } else { IpAddr::V4(A4) };
    let mut t = TunnelConfig::n3(0, n3);
    t.checksum = mode;
    t.zero_checksum_tx = true;
    t.zero_checksum_rx = true;
    t.inner_prefixes = vec![INNER_PREFIX4, INNER_PREFIX6];
    vec![t]
}

/// Session `i` of a UPF example ([`upf`]): uplink TEID `0x10000 + i`, UE
/// 10.0.0.0 + `i` (or 2001:db8:8:: + `i` when `v6_ue`), downlink to side
/// B's address with TEID `0x20000 + i` and QFI 9, forwarding both ways.
pub fn session(i: u32, v6: bool, v6_ue: bool) -> crate::session::control::SessionSpec {
    use crate::session::{Action, UeKey, UeSource, UplinkKey};
    let gnb = if v6 { IpAddr::V6(B6) } else { IpAddr::V4(B4) };
    let ue = if v6_ue {
        UeKey::V6(u128::from(Ipv6Addr::new(0x2001, 0xdb8, 8, 0, 0, 0, 0, 0)) + u128::from(i))
    } else {
        UeKey::V4(u32::from(Ipv4Addr::new(10, 0, 0, 0)) + i)
    };
    crate::session::control::SessionSpec {
        n3: 0,
        uplink: Action::Forward,
        downlink: Action::Forward,
        peer: Some((gnb, 0x20000 + i)),
        qfi: Some(9),
        uplink_keys: vec![UplinkKey {
            teid: 0x10000 + i,
            qfi: None,
        }],
        downlink_keys: vec![ue],
        network: 0,
        ue: UeSource::of_keys(&[ue]).unwrap_or_default(),
        mbr: Default::default(),
        rules: Default::default(),
    }
}
