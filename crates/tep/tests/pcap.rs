//! `tep pcap encap|decap` end to end: captures built here go through one
//! end's pipeline and back through the peer's, and come out byte for byte.

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapReader, PcapWriter};
use pcap_file::{DataLink, TsResolution};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;
use tep_csum::Sum;

fn repo_file(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel)
}

/// A fresh directory for one test's files.
fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("pcap-{name}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn tep(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tep"))
        .args(args)
        .output()
        .expect("run tep")
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Runs `tep pcap ... --json` and returns the report, asserting success.
fn pcap_json(args: &[&str]) -> Value {
    let mut all = vec!["pcap"];
    all.extend_from_slice(args);
    all.push("--json");
    let out = tep(&all);
    assert!(
        out.status.success(),
        "tep {all:?}: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

fn write_pcap(path: &Path, link: DataLink, packets: &[(Duration, Vec<u8>)]) {
    let header = PcapHeader {
        datalink: link,
        ts_resolution: TsResolution::NanoSecond,
        snaplen: 262_144,
        ..PcapHeader::default()
    };
    let f = std::fs::File::create(path).unwrap();
    let mut w = PcapWriter::with_header(f, header).unwrap();
    for (ts, p) in packets {
        w.write_packet(&PcapPacket::new(*ts, p.len() as u32, p))
            .unwrap();
    }
}

fn read_pcap(path: &Path) -> (DataLink, Vec<(Duration, Vec<u8>)>) {
    let f = std::fs::File::open(path).unwrap();
    let mut r = PcapReader::new(f).unwrap();
    let link = r.header().datalink;
    let mut v = Vec::new();
    while let Some(p) = r.next_packet() {
        let p = p.unwrap();
        v.push((p.timestamp, p.data.into_owned()));
    }
    (link, v)
}

/// An IPv4 TCP segment with a correct checksum.
fn tcp4(src: [u8; 4], dst: [u8; 4], sport: u16, payload: &[u8]) -> Vec<u8> {
    tcp4_seq(src, dst, sport, (7, 0x4321, 0x18), payload)
}

/// An IPv4 TCP segment with (sequence number, identification, flags).
fn tcp4_seq(
    src: [u8; 4],
    dst: [u8; 4],
    sport: u16,
    (seq, id, flags): (u32, u16, u8),
    payload: &[u8],
) -> Vec<u8> {
    let tcp_len = 20 + payload.len();
    let total = 20 + tcp_len;
    let mut p = vec![0u8; total];
    p[0] = 0x45;
    p[1] = 0x02; // ECT(0)
    p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    p[4..6].copy_from_slice(&id.to_be_bytes());
    p[6] = 0x40;
    p[8] = 64;
    p[9] = 6;
    p[12..16].copy_from_slice(&src);
    p[16..20].copy_from_slice(&dst);
    let c = Sum::of(&p[..20]).checksum();
    p[10..12].copy_from_slice(&c.to_be_bytes());
    let t = &mut p[20..];
    t[0..2].copy_from_slice(&sport.to_be_bytes());
    t[2..4].copy_from_slice(&443u16.to_be_bytes());
    t[4..8].copy_from_slice(&seq.to_be_bytes());
    t[12] = 0x50;
    t[13] = flags;
    t[14..16].copy_from_slice(&1024u16.to_be_bytes());
    t[20..].copy_from_slice(payload);
    let ph = tep_csum::pseudo_header_v4(src, dst, 6, tcp_len as u16);
    let c = ph.add(Sum::of(t)).checksum();
    t[16..18].copy_from_slice(&c.to_be_bytes());
    p
}

/// An IPv6 UDP datagram with a correct checksum.
fn udp6(src: [u8; 16], dst: [u8; 16], sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let udp_len = 8 + payload.len();
    let mut p = vec![0u8; 40 + udp_len];
    p[0] = 0x60;
    p[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
    p[6] = 17;
    p[7] = 64;
    p[8..24].copy_from_slice(&src);
    p[24..40].copy_from_slice(&dst);
    let u = &mut p[40..];
    u[0..2].copy_from_slice(&sport.to_be_bytes());
    u[2..4].copy_from_slice(&dport.to_be_bytes());
    u[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
    u[8..].copy_from_slice(payload);
    let ph = tep_csum::pseudo_header_v6(&src, &dst, 17, udp_len as u32);
    let c = ph.add(Sum::of(u)).udp_checksum();
    u[6..8].copy_from_slice(&c.to_be_bytes());
    p
}

fn v6(last: u16, net: u16) -> [u8; 16] {
    std::net::Ipv6Addr::new(0x2001, 0xdb8, net, 0, 0, 0, 0, last).octets()
}

const INNER_DST_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0xbb];
const INNER_SRC_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0xaa];

fn ether(ty: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = INNER_DST_MAC.to_vec();
    f.extend_from_slice(&INNER_SRC_MAC);
    f.extend_from_slice(&ty.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

fn ether_ip(ip: &[u8]) -> Vec<u8> {
    ether(if ip[0] >> 4 == 6 { 0x86dd } else { 0x0800 }, ip)
}

/// An ARP request frame (not IP: L2 tunnels carry it, L3 ones cannot).
fn arp() -> Vec<u8> {
    let mut a = vec![0, 1, 8, 0, 6, 4, 0, 1];
    a.extend_from_slice(&INNER_SRC_MAC);
    a.extend_from_slice(&[10, 9, 0, 1]);
    a.extend_from_slice(&[0; 6]);
    a.extend_from_slice(&[10, 9, 0, 2]);
    ether(0x0806, &a)
}

fn ts(i: usize) -> Duration {
    // 10 µs apart: vectors close after 1 ms, so 300 packets make several.
    Duration::new(1_700_000_000, 0) + Duration::from_micros(10 * i as u64)
}

fn drop_count(report: &Value, node: &str, reason: &str) -> u64 {
    report["drops"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["node"] == node && d["reason"] == reason)
        .map(|d| d["count"].as_u64().unwrap())
        .sum()
}

const GTPU_A: &str = r#"
[[tunnel]]
name = "gtp-a"
kind = "gtpu"
local = "2001:db8::1"
remote = "2001:db8::2"
teid = 0x1234
local_teid = 0x5678
qfi = 9
inner_prefixes = ["10.9.0.0/16", "2001:db8:9::/48"]
"#;

const GTPU_B: &str = r#"
[[tunnel]]
name = "gtp-b"
kind = "gtpu"
local = "2001:db8::2"
remote = "2001:db8::1"
teid = 0x5678
local_teid = 0x1234
qfi = 9
inner_prefixes = ["10.8.0.0/16"]
"#;

/// GTP-U over IPv6: Ethernet frames in (stripped to IP: the config has no
/// L2 tunnel), raw IP out of the peer, equal to the frames' IP packets.
#[test]
fn gtpu_ipv6_round_trip_through_both_ends() {
    let d = scratch("gtpu6");
    let (ca, cb) = (d.join("a.toml"), d.join("b.toml"));
    std::fs::write(&ca, GTPU_A).unwrap();
    std::fs::write(&cb, GTPU_B).unwrap();
    let mut inner = Vec::new();
    for i in 0..300usize {
        let payload: Vec<u8> = (0..(i * 7) % 1400).map(|b| (b ^ i) as u8).collect();
        inner.push(if i % 3 == 0 {
            udp6(v6(1, 9), v6(2, 9), 1000 + i as u16, 53, &payload)
        } else {
            tcp4([10, 8, 0, 1], [10, 9, 0, 1], 2000 + i as u16, &payload)
        });
    }
    let mut frames: Vec<(Duration, Vec<u8>)> = inner
        .iter()
        .enumerate()
        .map(|(i, p)| (ts(i), ether_ip(p)))
        .collect();
    // Not IP: skipped before the pipeline.
    frames.insert(5, (ts(4), arp()));
    let input = d.join("inner.pcap");
    write_pcap(&input, DataLink::ETHERNET, &frames);

    let outer = d.join("outer.pcap");
    let r = pcap_json(&["encap", "--config", s(&ca), s(&input), s(&outer)]);
    assert_eq!(r["in"], 301);
    assert_eq!(r["out"], 300, "{r}");
    assert_eq!(r["dropped"], 1);
    assert_eq!(drop_count(&r, "pcap-input", "not_ip"), 1);
    assert_eq!(r["counters"]["encap_in"], 300);
    assert_eq!(r["inner_link"], "ip");
    let names: Vec<&str> = r["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"gtpu-encap") && names.contains(&"udp-checksum"));
    let (link, outs) = read_pcap(&outer);
    assert_eq!(link, DataLink::RAW);
    assert_eq!(outs.len(), 300);
    for (i, (t, p)) in outs.iter().enumerate() {
        assert_eq!(*t, ts(i), "the input's time stamp");
        assert_eq!(p[0] >> 4, 6, "outer IPv6");
        assert_eq!(&p[42..44], &2152u16.to_be_bytes(), "to the GTP-U port");
    }

    let back = d.join("back.pcap");
    let r = pcap_json(&["decap", "--config", s(&cb), s(&outer), s(&back)]);
    assert_eq!(
        (r["in"].as_u64(), r["out"].as_u64()),
        (Some(300), Some(300))
    );
    assert_eq!(r["dropped"], 0, "{r}");
    assert_eq!(r["output_link"], "raw");
    let (link, got) = read_pcap(&back);
    assert_eq!(link, DataLink::RAW);
    let got_packets: Vec<&Vec<u8>> = got.iter().map(|(_, p)| p).collect();
    let want: Vec<&Vec<u8>> = inner.iter().collect();
    assert_eq!(got_packets, want, "inner packets byte for byte");
    for ((t, _), (t0, _)) in got.iter().zip(&outs) {
        assert_eq!(t, t0, "time stamps kept");
    }
}

/// `--gro` on decap: the segments of one TCP flow come out as one
/// super-packet, its checksum finished for the capture.
#[test]
fn decap_with_gro_coalesces_a_flow() {
    let d = scratch("gro");
    let (ca, cb) = (d.join("a.toml"), d.join("b.toml"));
    std::fs::write(&ca, GTPU_A).unwrap();
    std::fs::write(&cb, GTPU_B).unwrap();
    let (src, dst) = ([10, 8, 0, 1], [10, 9, 0, 1]);
    let mut stream = Vec::new();
    let segs: Vec<(Duration, Vec<u8>)> = (0..20u32)
        .map(|i| {
            let payload: Vec<u8> = (0..1000u32).map(|b| (b * 7 + i) as u8).collect();
            stream.extend_from_slice(&payload);
            // ACK only: a PSH would end the flow's super-packet (Linux's rule).
            let p = tcp4_seq(
                src,
                dst,
                40000,
                (1000 + 1000 * i, 100 + i as u16, 0x10),
                &payload,
            );
            (ts(i as usize), p)
        })
        .collect();
    let input = d.join("inner.pcap");
    write_pcap(&input, DataLink::RAW, &segs);
    let outer = d.join("outer.pcap");
    let r = pcap_json(&["encap", "--config", s(&ca), s(&input), s(&outer)]);
    assert_eq!(r["out"], 20);
    let back = d.join("back.pcap");
    let r = pcap_json(&["decap", "--gro", "--config", s(&cb), s(&outer), s(&back)]);
    assert_eq!(r["counters"]["coalesced"], 19, "{r}");
    assert_eq!(r["out"], 1);
    let (_, got) = read_pcap(&back);
    assert_eq!(got.len(), 1);
    let (t, p) = &got[0];
    assert_eq!(*t, ts(0), "the head's time stamp");
    assert_eq!(usize::from(u16::from_be_bytes([p[2], p[3]])), p.len());
    assert_eq!(&p[40..], &stream[..], "the payloads in order");
    let seg = &p[20..];
    let ph = tep_csum::pseudo_header_v4(src, dst, 6, seg.len() as u16);
    assert!(ph.add(Sum::of(seg)).verifies(), "checksum finished");
}

fn vxlan_config(local: &str, remote: &str, name: &str) -> String {
    format!(
        r#"
[[tunnel]]
name = "{name}"
kind = "vxlan"
local = "{local}"
remote = "{remote}"
vni = 4242
checksum = "remote"
remote_checksum_rx = true
"#
    )
}

/// VXLAN over IPv4 with checksum = "remote": Ethernet frames (IP and ARP)
/// in, Ethernet frames out of the peer. The inner checksums are complete,
/// so no RCO is sent and the outer checksum is a full one.
#[test]
fn vxlan_ipv4_round_trip_carries_frames_whole() {
    let d = scratch("vxlan4");
    let (ca, cb) = (d.join("a.toml"), d.join("b.toml"));
    std::fs::write(&ca, vxlan_config("192.0.2.1", "192.0.2.2", "vx-a")).unwrap();
    std::fs::write(&cb, vxlan_config("192.0.2.2", "192.0.2.1", "vx-b")).unwrap();
    let mut frames = vec![arp()];
    for i in 0..40usize {
        let payload = vec![i as u8; 100 + 33 * i];
        frames.push(if i % 2 == 0 {
            ether_ip(&tcp4(
                [10, 9, 0, 1],
                [10, 9, 0, 2],
                3000 + i as u16,
                &payload,
            ))
        } else {
            ether_ip(&udp6(v6(1, 9), v6(2, 9), 4000, 4001, &payload))
        });
    }
    let input = d.join("inner.pcap");
    let stamped: Vec<_> = frames
        .iter()
        .enumerate()
        .map(|(i, f)| (ts(i), f.clone()))
        .collect();
    write_pcap(&input, DataLink::ETHERNET, &stamped);
    let outer = d.join("outer.pcap");
    let r = pcap_json(&["encap", "--config", s(&ca), s(&input), s(&outer)]);
    assert_eq!(r["inner_link"], "ethernet");
    assert_eq!(r["out"], 41, "{r}");
    let (_, outs) = read_pcap(&outer);
    for (_, p) in &outs {
        // Outer UDP checksum present and right.
        let udp = &p[20..];
        assert_ne!(&udp[6..8], &[0, 0]);
        let ph = tep_csum::pseudo_header_v4([192, 0, 2, 1], [192, 0, 2, 2], 17, udp.len() as u16);
        assert!(ph.add(Sum::of(udp)).verifies());
    }
    let back = d.join("back.pcap");
    let r = pcap_json(&["decap", "--config", s(&cb), s(&outer), s(&back)]);
    assert_eq!(r["out"], 41, "{r}");
    assert_eq!(r["output_link"], "ethernet");
    let (link, got) = read_pcap(&back);
    assert_eq!(link, DataLink::ETHERNET);
    assert_eq!(got, stamped, "frames and time stamps come back");
}

/// A bad config stops before any packet: exit code 2 and the field named.
#[test]
fn bad_config_exits_2_naming_the_field() {
    let d = scratch("badconfig");
    let cfg = d.join("bad.toml");
    std::fs::write(
        &cfg,
        vxlan_config("192.0.2.1", "192.0.2.2", "vx").replace("4242", "16777216"),
    )
    .unwrap();
    let input = d.join("in.pcap");
    write_pcap(&input, DataLink::RAW, &[]);
    let out = tep(&[
        "pcap",
        "encap",
        "--config",
        s(&cfg),
        s(&input),
        s(&d.join("o")),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("vni"), "{err}");
    assert!(err.contains("\"vx\""), "names the tunnel: {err}");

    // A missing config and an unreadable capture are exit 2 too.
    let out = tep(&[
        "pcap",
        "decap",
        "--config",
        s(&d.join("none.toml")),
        s(&input),
        s(&d.join("o")),
    ]);
    assert_eq!(out.status.code(), Some(2));
    std::fs::write(&cfg, vxlan_config("192.0.2.1", "192.0.2.2", "vx")).unwrap();
    std::fs::write(d.join("junk"), b"not a capture").unwrap();
    let out = tep(&[
        "pcap",
        "decap",
        "--config",
        s(&cfg),
        s(&d.join("junk")),
        s(&d.join("o")),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a pcap"));
}

/// A capture broken half-way names the frame where it breaks, and no
/// half-written OUT is left behind.
#[test]
fn a_corrupt_capture_names_the_frame_and_leaves_no_output() {
    let d = scratch("corrupt");
    let cfg = d.join("vx.toml");
    std::fs::write(&cfg, vxlan_config("192.0.2.1", "192.0.2.2", "vx")).unwrap();
    let input = d.join("cut.pcap");
    write_pcap(
        &input,
        DataLink::ETHERNET,
        &[(
            ts(0),
            ether_ip(&tcp4([10, 9, 0, 1], [10, 9, 0, 2], 1000, b"x")),
        )],
    );
    // A second record header that promises 100 bytes, followed by 10.
    let mut bytes = std::fs::read(&input).unwrap();
    bytes.extend_from_slice(&[0; 8]);
    bytes.extend_from_slice(&100u32.to_le_bytes());
    bytes.extend_from_slice(&100u32.to_le_bytes());
    bytes.extend_from_slice(&[0; 10]);
    std::fs::write(&input, &bytes).unwrap();
    let out_path = d.join("out.pcap");
    let out = tep(&[
        "pcap",
        "encap",
        "--config",
        s(&cfg),
        s(&input),
        s(&out_path),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("corrupt capture: frame 2"), "{err}");
    assert!(!out_path.exists(), "a half-written OUT is left: {err}");
}

/// An output that cannot be written is exit code 1 (not 2: the config and
/// the capture were fine), naming the file: OUT in a directory that does
/// not exist, OUT on a full device (the write fails as the data goes out),
/// --replies where it cannot be created (and then no OUT is left either).
#[test]
fn an_output_that_cannot_be_written_exits_1() {
    let d = scratch("unwritable");
    let cfg = d.join("vx.toml");
    std::fs::write(&cfg, vxlan_config("192.0.2.1", "192.0.2.2", "vx")).unwrap();
    let input = d.join("in.pcap");
    let frames: Vec<(Duration, Vec<u8>)> = (0..50)
        .map(|i| {
            let p = tcp4([10, 9, 0, 1], [10, 9, 0, 2], 1000 + i as u16, &[7; 1200]);
            (ts(i), ether_ip(&p))
        })
        .collect();
    write_pcap(&input, DataLink::ETHERNET, &frames);
    let run = |dir: &str, out: &Path, extra: &[&str]| {
        let mut args = vec!["pcap", dir, "--config", s(&cfg), s(&input), s(out)];
        args.extend_from_slice(extra);
        let o = tep(&args);
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(!err.contains("panicked"), "{err}");
        (o.status.code(), err)
    };
    let missing = d.join("no-such-dir").join("out.pcap");
    let (code, err) = run("encap", &missing, &[]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.starts_with(&format!("tep pcap: {}: ", missing.display())),
        "{err}"
    );
    assert!(err.contains("No such file or directory"), "{err}");

    if Path::new("/dev/full").exists() {
        let (code, err) = run("encap", Path::new("/dev/full"), &[]);
        assert_eq!(code, Some(1), "{err}");
        assert!(err.contains("/dev/full: "), "{err}");
        assert!(err.contains("No space left on device"), "{err}");
        assert!(Path::new("/dev/full").exists(), "tep removed /dev/full");
    }

    let out = d.join("out.pcap");
    let (code, err) = run("decap", &out, &["--replies", s(&missing)]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains(&missing.display().to_string()), "{err}");
    assert!(!out.exists(), "OUT left behind when --replies failed");

    // The same runs with a good OUT succeed: the inputs were fine.
    let (code, err) = run("encap", &out, &[]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(read_pcap(&out).1.len(), frames.len());
}

/// A run that fails after OUT was opened removes a half-written regular
/// file, and never what is not one: OUT may be a device node (a copy of
/// /dev/null made here, when this user may make one), which stays.
#[test]
fn a_failed_run_removes_only_a_regular_output() {
    let d = scratch("devnull");
    let cfg = d.join("vx.toml");
    std::fs::write(&cfg, vxlan_config("192.0.2.1", "192.0.2.2", "vx")).unwrap();
    let input = d.join("cut.pcap");
    write_pcap(
        &input,
        DataLink::ETHERNET,
        &[(
            ts(0),
            ether_ip(&tcp4([10, 9, 0, 1], [10, 9, 0, 2], 1000, b"x")),
        )],
    );
    // Corrupt after the first frame: exit 2 once OUT is open.
    let mut bytes = std::fs::read(&input).unwrap();
    bytes.extend_from_slice(&[0; 8]);
    bytes.extend_from_slice(&100u32.to_le_bytes());
    bytes.extend_from_slice(&100u32.to_le_bytes());
    std::fs::write(&input, &bytes).unwrap();
    let null = d.join("null");
    let made = Command::new("mknod")
        .args([s(&null), "c", "1", "3"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !made {
        tep_testing::skip(format_args!(
            "a_failed_run_removes_only_a_regular_output: cannot make a device node here (needs root)"
        ));
        return;
    }
    let out = tep(&["pcap", "encap", "--config", s(&cfg), s(&input), s(&null)]);
    assert_eq!(out.status.code(), Some(2));
    let kept = std::fs::symlink_metadata(&null).expect("the device node is kept");
    assert!(std::os::unix::fs::FileTypeExt::is_char_device(
        &kept.file_type()
    ));
}

/// A GTP-U Echo Request is answered: the response goes to --replies.
#[test]
fn echo_requests_are_answered_into_the_replies_file() {
    let d = scratch("echo");
    let cb = d.join("b.toml");
    std::fs::write(&cb, GTPU_B).unwrap();
    // GTP-U v1, PT, S: Echo Request, length 4, TEID 0, sequence 7.
    let gtp = [0x32, 1, 0, 4, 0, 0, 0, 0, 0, 7, 0, 0];
    let req = udp6(v6(1, 0), v6(2, 0), 2152, 2152, &gtp);
    let input = d.join("in.pcap");
    write_pcap(&input, DataLink::RAW, &[(ts(0), req.clone()), (ts(1), req)]);
    let replies = d.join("replies.pcap");
    let r = pcap_json(&[
        "decap",
        "--config",
        s(&cb),
        s(&input),
        s(&d.join("out.pcap")),
        "--replies",
        s(&replies),
    ]);
    assert_eq!(r["replies"], 2, "{r}");
    assert_eq!(r["counters"]["answered"], 2);
    let (link, got) = read_pcap(&replies);
    assert_eq!(link, DataLink::RAW);
    assert_eq!(got.len(), 2);
    let (t, p) = &got[0];
    assert_eq!(*t, ts(0));
    assert_eq!(&p[8..24], &v6(2, 0), "from us");
    assert_eq!(&p[24..40], &v6(1, 0), "to the requester");
    assert_eq!(p[49], 2, "Echo Response");
    // Without --replies they are counted, not written.
    let out = tep(&[
        "pcap",
        "decap",
        "--config",
        s(&cb),
        s(&input),
        s(&d.join("o2.pcap")),
    ]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("in 2, out 0, replies 2, dropped 0"), "{text}");
    assert!(text.contains("--replies"), "{text}");
}

/// The kernel's VXLAN captures (both ends of a veth pair, snap length 256,
/// VNI 42 between 10.200.0.1 and 10.200.0.2). Seen as 10.200.0.1:
/// - frames from 10.200.0.1 itself drop as `wrong_peer`;
/// - frames cut by the snap length (1514-byte and GSO-sized ones) drop as
///   `truncated` in ip-input: their IP length runs past the captured bytes;
/// - the rest, from the peer, drop as `bad_checksum`: they were captured on
///   the sending veth, where the kernel left the outer UDP checksum partial
///   (rco capture: only the pseudo-header sum) or computed it by LCO over
///   inner checksums that are themselves still partial (csum capture).
///   The receiving veth never verifies them (CHECKSUM_PARTIAL counts as
///   good); `--trust-checksums` does the same, and then they decapsulate.
#[test]
fn kernel_vxlan_captures_decap_as_the_receiving_veth_would() {
    let d = scratch("kernel");
    let cfg = d.join("vx.toml");
    std::fs::write(
        &cfg,
        r#"
[[tunnel]]
name = "veth-peer"
kind = "vxlan"
local = "10.200.0.1"
remote = "10.200.0.2"
vni = 42
remote_checksum_rx = true
"#,
    )
    .unwrap();
    for (file, cut, ours, theirs) in [
        ("kernel-vxlan-rco.pcap", 21, 13, 16),
        ("kernel-vxlan-csum.pcap", 15, 12, 23),
    ] {
        let input = repo_file(&format!("crates/tep-wire/tests/vectors/{file}"));
        let out = d.join(format!("{file}.out"));
        let r = pcap_json(&["decap", "--config", s(&cfg), s(&input), s(&out)]);
        assert_eq!(r["in"], 50, "{file}");
        assert_eq!(r["snap_cut"], cut, "{file}");
        assert_eq!(drop_count(&r, "ip-input", "truncated"), cut, "{file}: {r}");
        assert_eq!(drop_count(&r, "vxlan-decap", "wrong_peer"), ours, "{file}");
        assert_eq!(
            drop_count(&r, "udp-checksum-verify", "bad_checksum"),
            theirs,
            "{file}"
        );
        assert_eq!(r["out"], 0);

        let r = pcap_json(&[
            "decap",
            "--trust-checksums",
            "--config",
            s(&cfg),
            s(&input),
            s(&out),
        ]);
        assert_eq!(r["out"], theirs, "{file}: {r}");
        assert_eq!(r["output_link"], "ethernet");
        let (_, frames) = read_pcap(&out);
        assert_eq!(frames.len() as u64, theirs);
        // Inner TCP segments: in the rco capture tep completes RCO, so the
        // checksums verify; in the csum capture they stay partial, as the
        // sender's LCO left them (the receiving kernel does not check them
        // either).
        let mut tcp = 0;
        for (_, f) in &frames {
            if f[12..14] != [0x08, 0x00] || f[14 + 9] != 6 {
                continue;
            }
            tcp += 1;
            let ip = &f[14..];
            let seg = &ip[20..usize::from(u16::from_be_bytes([ip[2], ip[3]]))];
            let ph = tep_csum::pseudo_header_v4(
                ip[12..16].try_into().unwrap(),
                ip[16..20].try_into().unwrap(),
                6,
                seg.len() as u16,
            );
            let good = ph.add(Sum::of(seg)).verifies();
            assert_eq!(good, file.contains("rco"), "{file}: inner TCP checksum");
        }
        assert!(tcp > 10, "{file}: {tcp} TCP segments");
    }
}
