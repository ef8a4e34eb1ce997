//! What the pipeline sends, as an outside dissector reads it: every kind
//! over IPv4 and IPv6, in every checksum mode that leaves a finished packet
//! on the wire, is encapsulated, written to a pcap (LINKTYPE_RAW) and read
//! back by tshark, whose fields must match the tunnel config.
//!
//! tshark 4.0 has no FOU or GUE dissector and cannot "decode as" IP on a
//! UDP port, so a small Lua dissector (written next to the pcap) hands
//! FOU-IPIP (5555) to `ip`, FOU-SIT (5556) to `ipv6` and GUE (6080) past
//! its header to either; FOU-GRE (5557) is decoded as GRE with `-d`.
//! Without Lua in tshark only the outer fields of those kinds are checked,
//! and that part is reported as skipped.
//! Without tshark the test is skipped through `tep_testing::skip` (a
//! failure under CI, which installs it).

mod common;
use common::*;
use std::process::Command;
use tep_dataplane::config::{ChecksumMode, TunnelConfig};
use tep_dataplane::TunnelKind;

// tshark's `*.checksum.status` values (epan/proto.h, proto_checksum_enum_e).
const CSUM_GOOD: &str = "1";
const CSUM_NOT_PRESENT: &str = "3";
const CSUM_ILLEGAL: &str = "4";

const FIELDS: &[&str] = &[
    "frame.number",
    "ip.src",
    "ip.dst",
    "ipv6.src",
    "ipv6.dst",
    "udp.srcport",
    "udp.dstport",
    "udp.checksum",
    "udp.checksum.status",
    "vxlan.vni",
    "geneve.vni",
    "gtp.teid",
    "gtp.ext_hdr.pdu_ses_con.qos_flow_id",
    "gre.key",
    "tcp.checksum.status",
];

const LUA: &str = r#"
local fou = Proto("tepfou", "tep test: FOU / GUE to IP")
local ip = Dissector.get("ip")
local ipv6 = Dissector.get("ipv6")
-- GRE registers no dissector by name, only by IP protocol number.
local gre = DissectorTable.get("ip.proto"):get_dissector(47)
function fou.dissector(tvb, pinfo, tree)
    local port = pinfo.dst_port
    if port == 5555 then
        return ip:call(tvb, pinfo, tree)
    elseif port == 5556 then
        return ipv6:call(tvb, pinfo, tree)
    end
    -- GUE variant 0: ver/C/hlen, protocol, flags, hlen words of fields.
    local hlen = 4 + 4 * tvb(0, 1):bitfield(3, 5)
    local proto = tvb(1, 1):uint()
    local rest = tvb(hlen):tvb()
    if proto == 4 then
        return ip:call(rest, pinfo, tree)
    elseif proto == 41 then
        return ipv6:call(rest, pinfo, tree)
    elseif proto == 47 then
        return gre:call(rest, pinfo, tree)
    end
end
local udp = DissectorTable.get("udp.port")
udp:add(5555, fou)
udp:add(5556, fou)
udp:add(6080, fou)
"#;

/// The FOU port of each FOU kind here: each its own, so tshark can tell
/// them apart.
fn fou_port(kind: TunnelKind) -> Option<u16> {
    match kind {
        TunnelKind::FouIpip => Some(5555),
        TunnelKind::FouSit => Some(5556),
        TunnelKind::FouGre => Some(5557),
        _ => None,
    }
}

struct Case {
    kind: TunnelKind,
    v6: bool,
    mode: ChecksumMode,
    inner_v6: bool,
    config: Vec<TunnelConfig>,
    packet: Vec<u8>,
}

fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    for kind in TunnelKind::ALL {
        for v6 in [false, true] {
            for mode in [
                ChecksumMode::Full,
                ChecksumMode::Lco,
                ChecksumMode::Zero,
                ChecksumMode::Offload,
            ] {
                for inner_v6 in [false, true] {
                    if (kind == TunnelKind::FouIpip && inner_v6)
                        || (kind == TunnelKind::FouSit && !inner_v6)
                    {
                        continue;
                    }
                    let (mut config, _) = pair(kind, v6, mode);
                    let t = &mut config[0];
                    if let Some(p) = fou_port(kind) {
                        t.local_port = p;
                        t.remote_port = p;
                    }
                    match kind {
                        TunnelKind::Vxlan => t.vni = 0x12_3456,
                        TunnelKind::Geneve => t.vni = 0xab_cdef,
                        TunnelKind::Gtpu => {
                            t.teid = 0x8765_4321;
                            t.qfi = Some(37);
                        }
                        TunnelKind::GreInUdp => t.key = Some(0x0102_0304),
                        TunnelKind::FouGre => t.key = Some(99),
                        TunnelKind::GueGre => t.key = Some(0x0a0b_0c0d),
                        _ => {}
                    }
                    let ip = if inner_v6 {
                        udp6(b"seen by tshark", 3000)
                    } else {
                        tcp4(b"seen by tshark", 3000)
                    };
                    let inner = if kind.carries_ethernet() {
                        frame(&ip)
                    } else {
                        ip
                    };
                    // Offload: completed as the NIC would.
                    let packet = encap_one(&config, kind.link(), &inner);
                    out.push(Case {
                        kind,
                        v6,
                        mode,
                        inner_v6,
                        config,
                        packet,
                    });
                }
            }
        }
    }
    out
}

fn tshark_version() -> Option<String> {
    let out = Command::new("tshark").arg("-v").output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A path in the temp dir unique to this process and call.
fn temp_path(ext: &str) -> std::path::PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    std::env::temp_dir().join(format!(
        "tep-dataplane-tshark-{}-{nanos}.{ext}",
        std::process::id()
    ))
}

/// The first occurrence of a field (tshark joins occurrences with ';').
fn first(f: &str) -> &str {
    f.split(';').next().unwrap_or("")
}

fn last(f: &str) -> &str {
    f.split(';').next_back().unwrap_or("")
}

#[test]
fn tshark_reads_what_the_pipeline_sends() {
    let Some(version) = tshark_version() else {
        tep_testing::skip(
            "tshark_reads_what_the_pipeline_sends: tshark is not installed (.ci/run installs it)",
        );
        return;
    };
    let lua = version.contains("with Lua");
    if !lua {
        // The rest still runs: only the inner fields of those kinds go
        // unchecked, which must not look like a full pass.
        tep_testing::skip(
            "tshark_reads_what_the_pipeline_sends: tshark without Lua: the FOU/GUE inner \
             fields were not checked",
        );
    }
    let cases = cases();
    let pcap = temp_path("pcap");
    let script = temp_path("lua");
    let packets: Vec<Vec<u8>> = cases.iter().map(|c| c.packet.clone()).collect();
    std::fs::write(&pcap, write_pcap(LINKTYPE_RAW, &packets)).unwrap();
    std::fs::write(&script, LUA).unwrap();
    let mut cmd = Command::new("tshark");
    cmd.arg("-r").arg(&pcap);
    if lua {
        cmd.arg("-X")
            .arg(format!("lua_script:{}", script.display()));
    }
    cmd.args([
        "-d",
        "udp.port==5557,gre",
        "-o",
        "udp.check_checksum:TRUE",
        "-o",
        "tcp.check_checksum:TRUE",
        "-T",
        "fields",
        "-E",
        "separator=,",
        "-E",
        "aggregator=;",
        "-E",
        "occurrence=a",
    ]);
    for f in FIELDS {
        cmd.arg("-e").arg(f);
    }
    let out = cmd.output().expect("tshark runs");
    let _ = std::fs::remove_file(&pcap);
    let _ = std::fs::remove_file(&script);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "tshark failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), cases.len(), "{stdout}");

    for (c, line) in cases.iter().zip(&lines) {
        let what = format!(
            "{} v6={} mode={} inner_v6={}: {line}",
            c.kind, c.v6, c.mode, c.inner_v6
        );
        let cols: Vec<&str> = line.split(',').collect();
        assert_eq!(cols.len(), FIELDS.len(), "{what}");
        let col = |name: &str| cols[FIELDS.iter().position(|f| *f == name).unwrap()];
        let t = &c.config[0];

        // Outer addresses.
        let (src, dst) = if c.v6 {
            (col("ipv6.src"), col("ipv6.dst"))
        } else {
            (col("ip.src"), col("ip.dst"))
        };
        assert_eq!(first(src), t.local.to_string(), "{what}");
        assert_eq!(first(dst), t.remote.to_string(), "{what}");
        // Outer UDP.
        assert_eq!(
            first(col("udp.dstport")),
            t.remote_port.to_string(),
            "{what}"
        );
        let sport: u16 = first(col("udp.srcport")).parse().expect("source port");
        assert!(
            (t.source_ports.0..=t.source_ports.1).contains(&sport),
            "{what}"
        );
        let status = first(col("udp.checksum.status"));
        match c.mode {
            ChecksumMode::Zero => {
                assert_eq!(first(col("udp.checksum")), "0x0000", "{what}");
                // tshark applies RFC 8200's rule to IPv6 (zero is illegal)
                // without RFC 6935's tunnel exception.
                let want = if c.v6 { CSUM_ILLEGAL } else { CSUM_NOT_PRESENT };
                assert_eq!(status, want, "{what}");
            }
            _ => assert_eq!(status, CSUM_GOOD, "{what}"),
        }
        // The tunnel header.
        match c.kind {
            TunnelKind::Vxlan => assert_eq!(col("vxlan.vni"), t.vni.to_string(), "{what}"),
            TunnelKind::Geneve => assert_eq!(col("geneve.vni"), format!("{:#x}", t.vni), "{what}"),
            TunnelKind::Gtpu => {
                assert_eq!(col("gtp.teid"), format!("{:#010x}", t.teid), "{what}");
                assert_eq!(
                    col("gtp.ext_hdr.pdu_ses_con.qos_flow_id"),
                    t.qfi.unwrap().to_string(),
                    "{what}"
                );
            }
            TunnelKind::GreInUdp | TunnelKind::FouGre | TunnelKind::GueGre => {
                assert_eq!(
                    col("gre.key"),
                    format!("{:#010x}", t.key.unwrap()),
                    "{what}"
                )
            }
            _ => {}
        }
        for other in ["vxlan.vni", "geneve.vni", "gtp.teid", "gre.key"] {
            let mine = match c.kind {
                TunnelKind::Vxlan => "vxlan.vni",
                TunnelKind::Geneve => "geneve.vni",
                TunnelKind::Gtpu => "gtp.teid",
                TunnelKind::GreInUdp | TunnelKind::FouGre | TunnelKind::GueGre => "gre.key",
                _ => "",
            };
            if other != mine {
                assert_eq!(col(other), "", "{what}: {other}");
            }
        }
        // The inner packet.
        let dissected_inner = lua
            || !matches!(
                c.kind,
                TunnelKind::FouIpip | TunnelKind::FouSit | TunnelKind::Gue
            );
        if dissected_inner {
            let (inner_dst, want) = if c.inner_v6 {
                (col("ipv6.dst"), "2001:db8:9::2")
            } else {
                (col("ip.dst"), "10.9.0.1")
            };
            let n_dst = inner_dst.split(';').count();
            assert_eq!(n_dst, if c.v6 == c.inner_v6 { 2 } else { 1 }, "{what}");
            assert_eq!(last(inner_dst), want, "{what}");
            if c.inner_v6 {
                let st: Vec<&str> = col("udp.checksum.status").split(';').collect();
                assert_eq!(st.len(), 2, "{what}");
                assert_eq!(st[1], CSUM_GOOD, "{what}: inner UDP checksum");
            } else {
                assert_eq!(col("tcp.checksum.status"), CSUM_GOOD, "{what}: inner TCP");
            }
        }
    }
}
