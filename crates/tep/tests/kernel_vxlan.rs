//! `tep run` against the Linux kernel's own VXLAN device: namespace `a`
//! runs tep (a TAP with 10.9.0.1/24, one VXLAN tunnel, VNI 42, port 4789),
//! namespace `b` runs `ip link add vx0 type vxlan id 42 ...` with
//! 10.9.0.2/24. Per kernel option set, with tep's matching config: ping and
//! a bounded TCP transfer both ways, a tshark capture of the underlay that
//! shows what each side put on the wire, tep's counters and both kernels'
//! checksum error counters. Root only (CI is root); skipped loudly
//! otherwise.
//!
//! What tshark 4.0 shows (the fields read below):
//! - `vxlan.vni` 42 both ways; `vxlan.flags` 0x0800 (I), or 0x0820 with
//!   RCO — the dissector does not name the RCO bit, it counts it in
//!   `vxlan.flags_reserved` (0x0020) — and `vxlan.reserved8`, the raw byte
//!   7, is 17 (start 34 = Ethernet 14 + IPv4 20, TCP) or 145 (0x80 | 17,
//!   UDP) for an inner IPv4 header of 20 bytes, from tep and from the
//!   kernel alike.
//! - `udp.checksum` 0x0000 exactly where configured (`noudpcsum`,
//!   `udp6zerocsumtx`, tep's `zero`), non-zero otherwise. The capture is on
//!   veth, where `CHECKSUM_PARTIAL` is never completed: the senders' outer
//!   checksums (the kernel's, and tep's, which its UDP socket offloads)
//!   hold the pseudo-header sum or a sum over bytes that are not final,
//!   "incorrect" to tshark, and the kernel's inner TCP/UDP checksums
//!   without RCO hold the pseudo-header sum (tep completes those:
//!   `inner_checksum` in src/host/worker.rs). So the capture is asserted
//!   on zero vs non-zero only; that the inner checksums arrive right is
//!   asserted by the receivers' `TcpInCsumErrors` staying 0.
//! - Without RCO the kernel's TSO super-frames cross veth unsegmented
//!   (tshark shows frames of up to 64 KiB); with RCO veth cannot take them
//!   and the kernel segments first. tep's UDP GSO trains show as one
//!   frame, the first datagram's headers visible.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tep_testing::netns::{iperf_directed, ping, root_or_skip, sh, Pair};

/// One kernel option set and tep's matching config.
#[derive(Clone, Copy, Debug)]
struct Case {
    /// Outer IPv6.
    v6: bool,
    /// Options of `ip link add vx0 type vxlan ...`.
    kernel: &'static [&'static str],
    /// tep's `checksum`.
    mode: &'static str,
    /// tep's `host.offloads` (virtio-net headers, UDP GSO/GRO).
    offloads: bool,
}

impl Case {
    fn zero(&self) -> bool {
        self.mode == "zero"
    }

    fn rco(&self) -> bool {
        self.mode == "remote"
    }

    fn label(&self) -> String {
        format!(
            "kernel [{}] / tep {}{} over {}",
            self.kernel.join(" "),
            self.mode,
            if self.offloads { "" } else { " (offloads off)" },
            if self.v6 { "IPv6" } else { "IPv4" }
        )
    }

    /// (tep's underlay address, the kernel's).
    fn addrs(&self) -> (&'static str, &'static str) {
        if self.v6 {
            (Pair::A6, Pair::B6)
        } else {
            (Pair::A4, Pair::B4)
        }
    }

    /// The inner MTU on both sides: the underlay's 1500 minus VXLAN's
    /// overhead (outer IP, UDP, VXLAN, inner Ethernet), as both default to.
    fn mtu(&self) -> u32 {
        if self.v6 {
            1430
        } else {
            1450
        }
    }

    fn tep_config(&self, pair: &Pair) -> String {
        let (local, remote) = self.addrs();
        let zero = if self.v6 && self.zero() {
            "zero_checksum_tx = true\nzero_checksum_rx = true"
        } else {
            ""
        };
        let rco = if self.rco() {
            "remote_checksum_rx = true"
        } else {
            ""
        };
        format!(
            r#"[host]
tap = "tepl2"
tap_addresses = ["10.9.0.1/24"]
mtu = {mtu}
offloads = {offloads}
control = "{control}"

[[tunnel]]
name = "k"
kind = "vxlan"
local = "{local}"
remote = "{remote}"
vni = 42
checksum = "{mode}"
{zero}
{rco}
"#,
            mtu = self.mtu(),
            offloads = self.offloads,
            control = pair.socket(&pair.a),
            mode = self.mode,
        )
    }
}

/// The kernel's VXLAN device in `b`, towards tep in `a`.
fn kernel_vxlan(pair: &Pair, c: &Case) {
    let (a, b) = c.addrs();
    let mut args = vec![
        "ip", "link", "add", "vx0", "type", "vxlan", "id", "42", "remote", a, "local", b,
        "dstport", "4789",
    ];
    args.extend_from_slice(c.kernel);
    pair.exec(&pair.b, &args, true);
    let mtu = c.mtu().to_string();
    pair.exec(&pair.b, &["ip", "link", "set", "vx0", "mtu", &mtu], true);
    pair.exec(
        &pair.b,
        &["ip", "addr", "add", "10.9.0.2/24", "dev", "vx0"],
        true,
    );
    pair.exec(&pair.b, &["ip", "link", "set", "vx0", "up"], true);
}

/// `nstat -az` counters of namespace `ns`, by name.
fn nstat(pair: &Pair, ns: &str, name: &str) -> u64 {
    let out = pair.exec(ns, &["nstat", "-asz", name], true);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| {
            let mut w = l.split_whitespace();
            (w.next() == Some(name)).then(|| w.next()?.parse().ok())?
        })
        .unwrap_or_else(|| panic!("nstat has no {name}"))
}

/// tshark capturing the underlay in `b` into a file, bounded in time.
struct Capture {
    child: Child,
    file: std::path::PathBuf,
}

impl Capture {
    /// Starts tshark on `vb` and waits until it captures.
    fn start(pair: &Pair) -> Capture {
        let file = pair.dir.join("underlay.pcap");
        let mut child = Command::new("ip")
            .args(["netns", "exec", &pair.b, "tshark", "-i", "vb", "-s", "256"])
            // A hard bound; stop() ends it as soon as the traffic is done.
            .args(["-a", "duration:40", "-w"])
            .arg(&file)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start tshark");
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut said = Vec::new();
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains("Capturing on") {
                    let _ = tx.send(Ok(()));
                }
                said.push(line);
            }
            let _ = tx.send(Err(said.join("\n")));
        });
        match rx.recv_timeout(Duration::from_secs(15)) {
            Ok(Ok(())) => Capture { child, file },
            Ok(Err(said)) => panic!("tshark did not start: {said}"),
            Err(_) => {
                let _ = child.kill();
                panic!("tshark did not start within 15 s");
            }
        }
    }

    /// Stops the capture (SIGINT: tshark writes out what it has) and reads
    /// the fields of every VXLAN packet.
    fn stop(mut self) -> Vec<Frame> {
        let _ = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
        let until = Instant::now() + Duration::from_secs(10);
        while !matches!(self.child.try_wait(), Ok(Some(_))) {
            if Instant::now() > until {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let file = self.file.display().to_string();
        let out = sh(
            &[
                "tshark",
                "-r",
                &file,
                "-d",
                "udp.port==4789,vxlan",
                "-Y",
                "vxlan",
                "-T",
                "fields",
                "-E",
                "separator=/t",
                "-e",
                "frame.protocols",
                "-e",
                "ip.src",
                "-e",
                "ipv6.src",
                "-e",
                "udp.checksum",
                "-e",
                "vxlan.vni",
                "-e",
                "vxlan.flags",
                "-e",
                "vxlan.reserved8",
                "-e",
                "ip.proto",
                "-e",
                "ip.hdr_len",
            ],
            true,
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(Frame::parse)
            .collect()
    }
}

/// What the capture says about one VXLAN packet.
#[derive(Debug)]
struct Frame {
    /// Outer source address.
    src: String,
    /// Outer UDP checksum.
    udp_checksum: u16,
    vni: u32,
    /// The first two bytes of the VXLAN header.
    flags: u16,
    /// Byte 7 of the VXLAN header.
    byte7: u8,
    /// The inner IPv4 header's length and protocol, if the inner frame
    /// carries IPv4.
    inner_v4: Option<(u8, u8)>,
}

impl Frame {
    fn parse(line: &str) -> Option<Frame> {
        let f: Vec<&str> = line.split('\t').collect();
        let list = |i: usize| -> Vec<&str> {
            f.get(i)
                .map(|s| s.split(',').filter(|x| !x.is_empty()).collect())
                .unwrap_or_default()
        };
        let hex = |s: &str| u32::from_str_radix(s.trim_start_matches("0x"), 16).ok();
        let num = |s: &str| -> Option<u32> {
            if s.starts_with("0x") {
                hex(s)
            } else {
                s.parse().ok()
            }
        };
        // "eth:ethertype:ip:udp:vxlan:eth:ethertype:ip:tcp:data"
        let protocols = f.first()?;
        let outer_v6 = protocols.starts_with("eth:ethertype:ipv6:");
        let src = list(if outer_v6 { 2 } else { 1 }).first()?.to_string();
        // The inner IPv4 header: the first after an outer IPv4 one (an
        // ICMP error quotes more).
        let at = usize::from(!outer_v6);
        let inner_v4 = protocols
            .contains("vxlan:eth:ethertype:ip:")
            .then(|| {
                let proto = num(list(7).get(at)?)? as u8;
                let hl = num(list(8).get(at)?)? as u8;
                Some((hl, proto))
            })
            .flatten();
        Some(Frame {
            src,
            udp_checksum: num(list(3).first()?)? as u16,
            vni: num(list(4).first()?)?,
            flags: num(list(5).first()?)? as u16,
            byte7: num(list(6).first()?)? as u8,
            inner_v4,
        })
    }

    /// The RCO flag (byte 1 = 0x20).
    fn rco(&self) -> bool {
        self.flags & 0x0020 != 0
    }
}

/// Checks the frames one side sent.
fn check_frames(c: &Case, who: &str, frames: &[&Frame]) {
    let label = c.label();
    assert!(
        frames.len() >= 8,
        "{label}: {who} sent {} VXLAN packets: {frames:?}",
        frames.len()
    );
    for f in frames {
        assert_eq!(f.vni, 42, "{label}: {who}: {f:?}");
        assert_eq!(f.flags & 0x0800, 0x0800, "{label}: {who}: no I flag: {f:?}");
        // Zero exactly where configured; partial (non-zero) otherwise.
        assert_eq!(
            f.udp_checksum == 0,
            c.zero(),
            "{label}: {who}: outer checksum {:#06x}: {f:?}",
            f.udp_checksum
        );
        if !f.rco() {
            assert_eq!(f.byte7, 0, "{label}: {who}: byte 7 set without RCO: {f:?}");
            continue;
        }
        assert!(c.rco(), "{label}: {who}: RCO not configured: {f:?}");
        // start = inner Ethernet 14 + inner IP header; TCP or UDP.
        let (hl, proto) = f
            .inner_v4
            .unwrap_or_else(|| panic!("{label}: {who}: RCO on a frame without IPv4: {f:?}"));
        let start = 14 + hl;
        let want = match proto {
            6 => start / 2,
            17 => 0x80 | (start / 2),
            p => panic!("{label}: {who}: RCO for protocol {p}: {f:?}"),
        };
        assert_eq!(f.byte7, want, "{label}: {who}: RCO byte 7: {f:?}");
    }
    if c.rco() {
        // Both TCP (the transfers) and UDP (the datagrams to port 9).
        for proto in [6, 17] {
            assert!(
                frames
                    .iter()
                    .any(|f| f.rco() && f.inner_v4.is_some_and(|(_, p)| p == proto)),
                "{label}: {who} sent no RCO for protocol {proto}: {:?}",
                frames
                    .iter()
                    .filter(|f| f.inner_v4.is_some_and(|(_, p)| p == proto))
                    .collect::<Vec<_>>()
            );
        }
    }
}

fn run_case(c: Case) {
    let label = c.label();
    let pair = Pair::new();
    let (a_addr, b_addr) = c.addrs();
    let da = pair.daemon(&pair.a, &c.tep_config(&pair));
    kernel_vxlan(&pair, &c);
    let capture = Capture::start(&pair);

    // L2: ARP through the tunnel first.
    let got = ping(&pair, &pair.a, "10.9.0.2", 5);
    assert!(
        got >= 4,
        "{label}: ping a→b got {got}/5\n{}\n{}",
        da.log(),
        da.control(&["show", "counters"]).unwrap_or_default()
    );
    let got = ping(&pair, &pair.b, "10.9.0.1", 3);
    assert!(got >= 3, "{label}: ping b→a got {got}/3");
    // A few UDP datagrams each way (to the discard port: nothing listens,
    // the receiver answers port unreachable after verifying the checksum),
    // early in the capture: the tail of a capture stopped by a signal may be
    // lost.
    for (ns, dst) in [(&pair.a, "10.9.0.2"), (&pair.b, "10.9.0.1")] {
        pair.exec(
            ns,
            &[
                "bash",
                "-c",
                &format!("for i in 1 2 3; do echo tep > /dev/udp/{dst}/9; done"),
            ],
            true,
        );
    }
    for reverse in [false, true] {
        let dir = if reverse { "b→a" } else { "a→b" };
        let bps = iperf_directed(&pair, "10.9.0.2", 1.0, 1, reverse).unwrap_or_else(|e| {
            panic!(
                "{label}: iperf3 {dir}: {e}\n{}\n{}",
                da.log(),
                da.control(&["show", "counters"]).unwrap_or_default()
            )
        });
        eprintln!("{label}: TCP {dir}: {:.2} Gbit/s", bps / 1e9);
        // Over 8 Mbit/s: more than a megabyte in the 1 s transfer.
        assert!(bps > 8e6, "{label}: TCP {dir}: {bps} bit/s");
    }
    std::thread::sleep(Duration::from_millis(300));
    let frames = capture.stop();

    let from = |addr: &str| -> Vec<&Frame> { frames.iter().filter(|f| f.src == addr).collect() };
    for (who, addr) in [("tep", a_addr), ("kernel", b_addr)] {
        let v = from(addr);
        let zero = v.iter().filter(|f| f.udp_checksum == 0).count();
        let rco: Vec<_> = v.iter().filter(|f| f.rco()).map(|f| f.byte7).collect();
        let mut bytes7 = rco.clone();
        bytes7.sort_unstable();
        bytes7.dedup();
        eprintln!(
            "{label}: tshark: {who} sent {} VXLAN packets, {zero} with a zero UDP checksum, {} with RCO (byte 7: {bytes7:?})",
            v.len(),
            rco.len()
        );
    }
    check_frames(&c, "tep", &from(a_addr));
    check_frames(&c, "the kernel", &from(b_addr));

    // Inner checksums arrived right: the receivers' stacks verified every
    // one they had to (tep marks what it verified or completed).
    for ns in [&pair.a, &pair.b] {
        for name in ["TcpInCsumErrors", "UdpInCsumErrors", "Udp6InCsumErrors"] {
            assert_eq!(nstat(&pair, ns, name), 0, "{label}: {name} in {ns}");
        }
    }
    // The datagrams to port 9 arrived with good checksums.
    for ns in [&pair.a, &pair.b] {
        assert!(
            nstat(&pair, ns, "UdpNoPorts") >= 3,
            "{label}: UDP datagrams into {ns}"
        );
    }

    let t = da.show("tunnels");
    let row = &t["tunnels"][0];
    let (tx, rx) = (
        row["tx_packets"].as_u64().unwrap(),
        row["rx_packets"].as_u64().unwrap(),
    );
    assert!(tx >= 8 && rx >= 8, "{label}: tx {tx} rx {rx}: {t}");
    let counters = da.show("counters");
    // No drops at all: the L2 default tunnel takes every MAC (broadcast
    // ARP, IPv6 multicast ND/MLD from the TAP included).
    assert_eq!(
        counters["drops"],
        serde_json::json!([]),
        "{label}: {counters}"
    );
    for (k, v) in counters["io"].as_object().unwrap() {
        if k.starts_with("drop_") {
            assert_eq!(v, 0, "{label}: {k}: {counters}");
        }
    }
    for (k, v) in counters["kernel"].as_object().unwrap() {
        assert_eq!(v, 0, "{label}: kernel {k}: {counters}");
    }
}

fn run(test: &str, c: Case) {
    if !root_or_skip(test) {
        return;
    }
    for tool in ["tshark", "nstat", "bash"] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !found {
            tep_testing::skip(format_args!(
                "{test}: `{tool}` is not installed (.ci/run installs it)"
            ));
            return;
        }
    }
    run_case(c);
}

#[test]
fn ipv4_udpcsum() {
    run(
        "ipv4_udpcsum",
        Case {
            v6: false,
            kernel: &["udpcsum"],
            mode: "full",
            offloads: true,
        },
    );
}

#[test]
fn ipv4_noudpcsum() {
    run(
        "ipv4_noudpcsum",
        Case {
            v6: false,
            kernel: &["noudpcsum"],
            mode: "zero",
            offloads: true,
        },
    );
}

#[test]
fn ipv4_remote_checksum_offload() {
    run(
        "ipv4_remote_checksum_offload",
        Case {
            v6: false,
            kernel: &["udpcsum", "remcsumtx", "remcsumrx"],
            mode: "remote",
            offloads: true,
        },
    );
}

#[test]
fn ipv6_zero_checksums() {
    run(
        "ipv6_zero_checksums",
        Case {
            v6: true,
            kernel: &["udp6zerocsumtx", "udp6zerocsumrx"],
            mode: "zero",
            offloads: true,
        },
    );
}

#[test]
fn ipv6_checksummed() {
    run(
        "ipv6_checksummed",
        Case {
            v6: true,
            kernel: &[],
            mode: "full",
            offloads: true,
        },
    );
}

#[test]
fn ipv6_remote_checksum_offload() {
    run(
        "ipv6_remote_checksum_offload",
        Case {
            v6: true,
            kernel: &["remcsumtx", "remcsumrx"],
            mode: "remote",
            offloads: true,
        },
    );
}

/// Without a virtio-net header tep cannot hand a partial checksum on: it
/// completes the ones the kernel left partial itself.
#[test]
fn ipv4_udpcsum_without_offloads() {
    run(
        "ipv4_udpcsum_without_offloads",
        Case {
            v6: false,
            kernel: &["udpcsum"],
            mode: "full",
            offloads: false,
        },
    );
}
