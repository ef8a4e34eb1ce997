//! The kernel's UDP drop counters, from /proc/net/snmp (IPv4) and
//! /proc/net/snmp6 (IPv6).
//!
//! In host mode the socket verifies the outer UDP checksum, so a datagram
//! with a bad one never reaches tep: these counters are the only place such
//! drops, and datagrams lost to a full socket buffer, show.

/// UDP datagrams the kernel dropped before a socket's reader got them,
/// IPv4 and IPv6 summed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UdpDrops {
    /// A bad UDP checksum (`InCsumErrors`, `Udp6InCsumErrors`).
    pub bad_checksum: u64,
    /// The socket's receive buffer was full (`RcvbufErrors`,
    /// `Udp6RcvbufErrors`).
    pub receive_buffer_full: u64,
    /// Receive errors of any kind (`InErrors`, `Udp6InErrors`).
    pub receive_errors: u64,
}

impl UdpDrops {
    /// The counters in the texts of /proc/net/snmp and /proc/net/snmp6. A
    /// counter missing from them (an empty text, another kernel's columns)
    /// counts as 0.
    pub fn parse(snmp: &str, snmp6: &str) -> UdpDrops {
        let mut d = UdpDrops::default();
        // /proc/net/snmp has a `Udp:` header line naming the columns, then
        // a `Udp:` line of values; /proc/net/snmp6 has one `name value`
        // line per counter, the UDP ones prefixed `Udp6`.
        let mut rows = snmp.lines().filter(|l| l.starts_with("Udp: "));
        let v4 = match (rows.next(), rows.next()) {
            (Some(names), Some(values)) => names
                .split_whitespace()
                .zip(values.split_whitespace())
                .collect(),
            _ => Vec::new(),
        };
        let v6 = snmp6.lines().filter_map(|l| {
            let mut w = l.split_whitespace();
            let name = w.next()?.strip_prefix("Udp6")?;
            Some((name, w.next()?))
        });
        for (name, value) in v4.into_iter().chain(v6) {
            let v: u64 = value.parse().unwrap_or(0);
            match name {
                "InCsumErrors" => d.bad_checksum += v,
                "RcvbufErrors" => d.receive_buffer_full += v,
                "InErrors" => d.receive_errors += v,
                _ => {}
            }
        }
        d
    }

    /// Each counter under the name `tep show counters` and the metrics
    /// give it.
    pub fn named(&self) -> [(&'static str, u64); 3] {
        [
            ("udp_bad_checksum", self.bad_checksum),
            ("udp_receive_buffer_full", self.receive_buffer_full),
            ("udp_receive_errors", self.receive_errors),
        ]
    }
}

/// The counters of this process's network namespace. A file that cannot
/// be read (no IPv6, no /proc) counts as zeros: the counters are reported,
/// and a report should not fail for want of one.
pub fn udp_drops() -> UdpDrops {
    let snmp = std::fs::read_to_string("/proc/net/snmp").unwrap_or_default();
    let snmp6 = std::fs::read_to_string("/proc/net/snmp6").unwrap_or_default();
    UdpDrops::parse(&snmp, &snmp6)
}

#[cfg(test)]
mod tests {
    use super::*;

    // A Linux 6.x machine's, as read: no UDP errors (yet).
    const SNMP: &str = include_str!("../tests/data/proc-net-snmp");
    const SNMP6: &str = include_str!("../tests/data/proc-net-snmp6");

    /// `text` (snmp6's shape) with the named counters set.
    fn set6(text: &str, values: &[(&str, u64)]) -> String {
        let mut hit = 0;
        let out = text
            .lines()
            .map(|l| {
                let name = l.split_whitespace().next().unwrap_or("");
                match values.iter().find(|(n, _)| *n == name) {
                    Some((n, v)) => {
                        hit += 1;
                        format!("{n:<32}\t{v}\n")
                    }
                    None => format!("{l}\n"),
                }
            })
            .collect();
        assert_eq!(hit, values.len(), "a counter is not in the text");
        out
    }

    #[test]
    fn no_errors() {
        assert_eq!(UdpDrops::parse(SNMP, SNMP6), UdpDrops::default());
        assert_eq!(UdpDrops::parse("", ""), UdpDrops::default());
    }

    #[test]
    fn ipv4_and_ipv6_summed_without_udplite() {
        let snmp = SNMP
            .replace("Udp: 21 0 0 22 0 0 0 0 0", "Udp: 21 0 5 22 3 0 2 0 0")
            .replace("UdpLite: 0 0 0 0 0 0 0 0 0", "UdpLite: 9 9 9 9 9 9 9 9 9");
        assert_ne!(snmp, SNMP);
        let snmp6 = set6(
            SNMP6,
            &[
                ("Udp6InErrors", 7),
                ("Udp6RcvbufErrors", 1),
                ("Udp6InCsumErrors", 4),
                ("UdpLite6InErrors", 9),
                ("UdpLite6RcvbufErrors", 9),
                ("UdpLite6InCsumErrors", 9),
            ],
        );
        let v4 = UdpDrops {
            bad_checksum: 2,
            receive_buffer_full: 3,
            receive_errors: 5,
        };
        let v6 = UdpDrops {
            bad_checksum: 4,
            receive_buffer_full: 1,
            receive_errors: 7,
        };
        assert_eq!(UdpDrops::parse(&snmp, ""), v4);
        assert_eq!(UdpDrops::parse("", &snmp6), v6);
        assert_eq!(
            UdpDrops::parse(&snmp, &snmp6),
            UdpDrops {
                bad_checksum: 6,
                receive_buffer_full: 4,
                receive_errors: 12,
            }
        );
    }

    #[test]
    fn columns_by_their_header() {
        let snmp = "Udp: InCsumErrors InDatagrams InErrors\nUdp: 1 50 3\n";
        assert_eq!(
            UdpDrops::parse(snmp, ""),
            UdpDrops {
                bad_checksum: 1,
                receive_buffer_full: 0,
                receive_errors: 3,
            }
        );
    }

    #[test]
    fn names() {
        let d = UdpDrops {
            bad_checksum: 1,
            receive_buffer_full: 2,
            receive_errors: 3,
        };
        assert_eq!(
            d.named(),
            [
                ("udp_bad_checksum", 1),
                ("udp_receive_buffer_full", 2),
                ("udp_receive_errors", 3),
            ]
        );
    }
}
