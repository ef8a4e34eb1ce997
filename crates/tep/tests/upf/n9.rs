//! N9 (issue 28): two tep UPFs on one PDU session, each with its own
//! PFCP association from the scapy SMF: an intermediate UPF with an
//! uplink classifier (the lab's `up`, N3 and N9 on 192.0.2.1, host or
//! gateway mode) in front of a PDU Session Anchor (host mode) in a fourth
//! namespace behind the RAN's:
//!
//! ```text
//!   ran (SMF, gNB; routes) --- up (I-UPF 192.0.2.1, N6) --- dn (10.99.0.2)
//!     | vp 192.0.3.1
//!     | vq 192.0.3.2
//!   psa (PSA: N4, N3/N9 192.0.3.2, N6 = TUN; its data network 10.98.0.2
//!        on its loopback)
//! ```
//!
//! N9 G-PDUs leave the I-UPF's N3 address and go through `ran` as a
//! router, so that a gateway I-UPF reaches the PSA on its underlay.

use super::*;

const PSA: &str = "192.0.3.2";
const PSA_GW: &str = "192.0.3.1";
const PSA_DN: &str = "10.98.0.2";
const PSA_NODE_ID: &str = "psa.test";
/// smf.py's `N9_DSCP`: the I-UPF's N9 FAR's Transport Level Marking.
const N9_DSCP: u32 = 46;
/// smf.py's `QFI`: the session's QoS flow, which the PSA's uplink PDR
/// matches.
const QFI: u32 = 9;

/// The G-PDUs that reach the PSA's side of the link (`vq`), captured to
/// a file and decoded from it by tshark once the capture stopped: each
/// one's outer and inner DSCP, container PDU type and QFI, a line a
/// packet. (Decoding live through a pipe lost packets on a loaded
/// machine: tshark stopped before it printed them.)
struct N9Capture {
    child: std::process::Child,
    file: PathBuf,
}

impl N9Capture {
    /// Started in `ns`, writing into `dir`, and capturing (tshark said
    /// so) when it returns.
    fn start(ns: &str, dir: &std::path::Path) -> N9Capture {
        use std::io::BufRead;
        let filter = format!("udp dst port 2152 and dst host {PSA}");
        let file = dir.join("n9.pcapng");
        let path = file.to_str().unwrap();
        let args = [
            "netns", "exec", ns, "tshark", "-n", "-i", "vq", "-f", &filter, "-w", path,
        ];
        let mut child = Command::new("ip")
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("tshark: {e}"));
        let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        while !line.contains("Capturing on") {
            line.clear();
            let n = err.read_line(&mut line).unwrap_or(0);
            assert!(n > 0, "tshark stopped before capturing: {line}");
        }
        N9Capture { child, file }
    }

    /// The file's G-PDUs so far, one "outer dscp,inner dscp,pdu type,qfi"
    /// line each.
    fn decode(&self) -> Vec<String> {
        let out = Command::new("tshark")
            .args(["-n", "-r", self.file.to_str().unwrap()])
            .args([
                "-Y",
                "gtp.message == 0xff",
                "-T",
                "fields",
                "-E",
                "separator=,",
            ])
            .args(["-e", "ip.dsfield.dscp"])
            .args(["-e", "gtp.ext_hdr.pdu_ses_con.pdu_type"])
            .args(["-e", "gtp.ext_hdr.pdu_ses_con.qos_flow_id"])
            .output()
            .unwrap_or_else(|e| panic!("tshark -r: {e}"));
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// Waits until `want` G-PDUs are in the file or 5 s passed, stops the
    /// capture (SIGINT: it writes what it holds) and decodes the file.
    fn lines(mut self, want: usize) -> Vec<String> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while self.decode().len() < want && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-INT", &pid]).status();
        let _ = self.child.wait();
        self.decode()
    }
}

impl Drop for N9Capture {
    fn drop(&mut self) {
        // A test that failed before reading it: no tshark left behind.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The PSA's namespace, joined to the lab's `up`; removed on drop.
struct Psa {
    ns: String,
    dir: PathBuf,
    _namespaces: Namespaces,
}

impl Psa {
    fn new(lab: &Lab) -> Psa {
        let n = CASES.fetch_add(1, Ordering::Relaxed);
        let tag = format!("tepn9{}x{n}", std::process::id());
        let namespaces =
            Namespaces::new(&tag, &["p"]).unwrap_or_else(|e| panic!("the PSA's namespace: {e}"));
        let psa = Psa {
            ns: namespaces.ns("p"),
            dir: namespaces.dir.clone(),
            _namespaces: namespaces,
        };
        let link = [
            "ip", "link", "add", "vp", "netns", &lab.ran, "type", "veth", "peer", "name", "vq",
            "netns", &psa.ns,
        ];
        sh(&link, true);
        let gw = format!("{PSA_GW}/24");
        let me = format!("{PSA}/24");
        let dn = format!("{PSA_DN}/32");
        let steps: [(&str, &[&str]); 11] = [
            (&lab.ran, &["ip", "addr", "add", &gw, "dev", "vp"]),
            (&lab.ran, &["ip", "link", "set", "vp", "up"]),
            (&lab.ran, &["sysctl", "-qw", "net.ipv4.ip_forward=1"]),
            (
                &lab.up,
                &["ip", "route", "add", "192.0.3.0/24", "via", SMF_ADDR],
            ),
            (&psa.ns, &["ip", "addr", "add", &me, "dev", "vq"]),
            (&psa.ns, &["ip", "link", "set", "vq", "up"]),
            (&psa.ns, &["ip", "route", "add", "default", "via", PSA_GW]),
            (&psa.ns, &["ip", "addr", "add", &dn, "dev", "lo"]),
            (&psa.ns, &["sysctl", "-qw", "net.ipv4.conf.all.rp_filter=0"]),
            // What reaches a gateway I-UPF's XDP has its checksums.
            (&psa.ns, &["ethtool", "-K", "vq", "tx", "off"]),
            (&lab.ran, &["ethtool", "-K", "vp", "tx", "off"]),
        ];
        for (ns, args) in steps {
            lab.exec(ns, args, true);
        }
        psa
    }

    /// tep as the PSA, host mode.
    fn tep(&self) -> Daemon {
        let config = format!(
            "[host]\ntun = \"n6\"\ntun_addresses = [\"10.63.0.1/32\"]\ncontrol = \"{}\"\n\n\
             [pfcp]\nlisten = \"{PSA}\"\nnode_id = \"{PSA_NODE_ID}\"\nn3 = [\"{PSA}\"]\n\
             ue_prefixes = [\"10.45.0.0/16\"]\n",
            self.dir.join(format!("{}.sock", self.ns)).display()
        );
        spawn_daemon(&self.dir, &self.ns, &config)
    }
}

/// Uplink from the gNB reaches the PSA's data network through both UPFs
/// (the I-UPF re-encapsulates it to the PSA's F-TEID on N9), and what the
/// ULCL's SDF filter takes (10.99.0.0/24) leaves the I-UPF to its own N6;
/// downlink from the PSA's data network comes back through N9 and the
/// I-UPF to the gNB with the session's TEID and QFI, as does downlink
/// from the local data network. Each datagram exactly once (smf.py).
///
/// The N9 uplink carries a UL PDU Session Container with the session's
/// QFI (the PSA's uplink PDR matches it, so nothing arrives without it)
/// and the I-UPF FAR's DSCP, as tshark decodes them at the PSA.
fn n9(test: &str, gateway: bool) {
    if !scapy_or_skip(test) {
        return;
    }
    if !tep_testing::have("tshark") {
        tep_testing::skip(format_args!("{test}: no tshark (Debian's tshark)"));
        return;
    }
    let lab = Lab::new(gateway);
    let psa = Psa::new(&lab);
    let tep = lab.tep("");
    let psa_tep = psa.tep();
    let extra = json!({
        "psa": PSA,
        "psa_ns": psa.ns,
        "psa_dn": PSA_DN,
        "psa_node_id": PSA_NODE_ID,
        "local_prefix": "10.99.0.0/24",
    });
    let mut smf = Smf::start_with(&lab, extra);
    smf.run(&tep, json!({"run": "associate"}));
    let before = (n3(&tep), n3(&psa_tep));
    const N: u64 = 3;
    let capture = N9Capture::start(&psa.ns, &psa.dir);
    let r = smf.run(&tep, json!({"run": "n9", "index": 0, "count": N}));
    let seen = capture.lines(N as usize);
    // The outer header's DSCP first, then the inner one's; the
    // container's PDU type (1: UL) and QFI last.
    let ours = |l: &String| {
        let f: Vec<_> = l.split(',').collect();
        f.len() == 4 && (f[0], f[2], f[3]) == (&*N9_DSCP.to_string(), "1", &*QFI.to_string())
    };
    // Every G-PDU captured is right, and all N were; that each carries
    // QFI 9 the PSA also shows by delivering them (its uplink PDR matches
    // QFI 9 only).
    assert!(
        seen.len() == N as usize && seen.iter().all(ours),
        "G-PDUs at the PSA: {seen:?}"
    );
    for k in ["n9_uplink", "n9_downlink", "local_uplink", "local_downlink"] {
        assert_eq!(r[k], N, "{k}: {r}");
    }
    let after = (n3(&tep), n3(&psa_tep));
    let delta = |a: &Value, b: &Value, k: &str| b[k].as_u64().unwrap() - a[k].as_u64().unwrap();
    // A tunnel's rx counts what it delivers to N6: at the I-UPF the local
    // branch only (what it takes on N3 for N9, both ways, leaves on N3
    // again); its tx, the N9 uplink and the downlink to the gNB (both
    // branches). The PSA: the N9 uplink in, its downlink out.
    // (Host mode only: a gateway hands frames to the kernel while their
    // next hop resolves, which its tunnel counters see otherwise.)
    if !gateway {
        assert_eq!(delta(&before.0, &after.0, "rx_packets"), N, "{after:?}");
        assert_eq!(delta(&before.0, &after.0, "tx_packets"), 3 * N, "{after:?}");
    }
    assert_eq!(delta(&before.1, &after.1, "rx_packets"), N, "{after:?}");
    assert_eq!(delta(&before.1, &after.1, "tx_packets"), N, "{after:?}");
    for t in [&tep, &psa_tep] {
        assert_eq!(pfcp_counter(t, "sessions_established"), 1);
        assert_eq!(pfcp_counter(t, "sessions_deleted"), 1);
        assert_eq!(dropped(t, "no_pdr_match") + dropped(t, "unknown_teid"), 0);
    }
    assert_eq!(
        psa_tep.show("pfcp")["associations"]
            .as_array()
            .map(Vec::len),
        Some(1)
    );
}

#[test]
fn n9_forwarding_to_a_second_tep_upf() {
    n9("n9_forwarding_to_a_second_tep_upf", false);
}

#[test]
fn a_gateway_upf_forwards_on_n9_to_a_second_tep_upf() {
    n9("a_gateway_upf_forwards_on_n9_to_a_second_tep_upf", true);
}
