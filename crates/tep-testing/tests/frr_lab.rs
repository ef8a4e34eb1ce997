//! The FRR lab, proved with kernel VTEPs only: three hosts `h1`..`h3` on
//! one underlay (a bridge in namespace `u`, 192.0.2.1/2/3 on their `ul`),
//! each a kernel VXLAN VTEP of VNI 100 (`br100` + `vx100`, port 4789) with
//! zebra + bgpd (iBGP full mesh, EVPN), and a workload `w<i>` behind each
//! (MAC 02:00:00:00:00:0i, 10.100.0.i/24, veth `e100` – `eth0`). Nobody
//! writes an FDB entry: zebra fills them from BGP. IPv6 is off everywhere,
//! so that only the test's pings teach the bridges a MAC. Root and FRR
//! only (CI has both); skipped loudly otherwise.

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};
use tep_testing::frr::{self, kernel_vtep, Frr};
use tep_testing::netns::{self, ping, Namespaces};

const VNI: u32 = 100;

fn vtep(i: u8) -> Ipv4Addr {
    Ipv4Addr::new(192, 0, 2, i)
}

fn mac(i: u8) -> String {
    format!("02:00:00:00:00:{i:02x}")
}

fn workload_ip(i: u8) -> String {
    format!("10.100.0.{i}")
}

/// Hosts 1..=3 but `i`.
fn others(i: u8) -> impl Iterator<Item = u8> {
    (1..=3).filter(move |&j| j != i)
}

/// The lab. Fields drop in order: the daemons stop before their
/// namespaces go, on every exit, a failed assertion included.
struct Fabric {
    frr: Vec<Frr>,
    ns: Namespaces,
}

impl netns::Lab for Fabric {}

impl Fabric {
    fn build() -> Fabric {
        let tag = format!("fl{}x", std::process::id());
        let names = ["u", "h1", "h2", "h3", "w1", "w2", "w3"];
        let ns = Namespaces::new(&tag, &names).unwrap_or_else(|e| panic!("namespaces: {e}"));
        let mut fabric = Fabric {
            frr: Vec::new(),
            ns,
        };
        for name in names {
            fabric.must(
                name,
                &[
                    "sysctl",
                    "-qw",
                    "net.ipv6.conf.all.disable_ipv6=1",
                    "net.ipv6.conf.default.disable_ipv6=1",
                ],
            );
        }
        fabric.must("u", &["ip", "link", "add", "br0", "type", "bridge"]);
        fabric.must("u", &["ip", "link", "set", "br0", "up"]);
        for i in 1..=3 {
            fabric.host(i);
        }
        for i in 1..=3u8 {
            let peers: Vec<Ipv4Addr> = others(i).map(vtep).collect();
            let f = Frr::start(&fabric.h(i), vtep(i), &peers).unwrap_or_else(|e| panic!("{e}"));
            fabric.frr.push(f);
        }
        fabric
    }

    /// The full name of host `i`'s namespace.
    fn h(&self, i: u8) -> String {
        self.ns.ns(&format!("h{i}"))
    }

    fn must(&self, name: &str, args: &[&str]) -> String {
        self.ns
            .run(name, args)
            .unwrap_or_else(|e| panic!("in {name}: {e}"))
    }

    /// Host `i`: its underlay port, its kernel VTEP and its workload.
    fn host(&self, i: u8) {
        let (h, w, p) = (format!("h{i}"), format!("w{i}"), format!("p{i}"));
        self.ns.veth(&h, "ul", "u", &p).unwrap();
        self.must("u", &["ip", "link", "set", &p, "master", "br0", "up"]);
        let addr = format!("{}/24", vtep(i));
        self.must(&h, &["ip", "addr", "add", &addr, "dev", "ul"]);
        self.must(&h, &["ip", "link", "set", "ul", "up"]);
        self.ns.veth(&h, "e100", &w, "eth0").unwrap();
        kernel_vtep(&self.h(i), VNI, IpAddr::V4(vtep(i)), 4789, "e100")
            .unwrap_or_else(|e| panic!("{h}: {e}"));
        // The vxlan device's MTU: no frame is too big for the underlay.
        let m = mac(i);
        self.must(
            &w,
            &["ip", "link", "set", "eth0", "address", &m, "mtu", "1450"],
        );
        let addr = format!("{}/24", workload_ip(i));
        self.must(&w, &["ip", "addr", "add", &addr, "dev", "eth0"]);
        self.must(&w, &["ip", "link", "set", "eth0", "up"]);
    }

    fn frr(&self, i: u8) -> &Frr {
        &self.frr[usize::from(i) - 1]
    }

    /// Pings received from workload `i` to workload `j`, of 3.
    fn ping(&self, i: u8, j: u8) -> u32 {
        ping(self, &self.ns.ns(&format!("w{i}")), &workload_ip(j), 3)
    }

    /// The remote VTEPs of host `i`'s vx100 in the kernel FDB (the flood
    /// entries and the MACs zebra wrote), sorted, deduplicated.
    fn kernel_dsts(&self, i: u8) -> Vec<String> {
        let fdb = self.must(&format!("h{i}"), &["bridge", "fdb", "show", "dev", "vx100"]);
        let mut dsts: Vec<String> = fdb
            .lines()
            .filter_map(|l| {
                let mut words = l.split_whitespace();
                words.find(|&w| w == "dst")?;
                words.next().map(str::to_string)
            })
            .collect();
        dsts.sort();
        dsts.dedup();
        dsts
    }
}

/// What host `i` should know of the hosts in `hosts` (and of nobody
/// else): their VTEPs, their workloads' MACs, and kernel FDB entries
/// towards them.
fn knows(fabric: &Fabric, i: u8, hosts: &[u8], timeout: Duration) {
    let vteps: Vec<String> = hosts.iter().map(|&j| vtep(j).to_string()).collect();
    let macs: Vec<(String, String)> = hosts
        .iter()
        .map(|&j| (mac(j), vtep(j).to_string()))
        .collect();
    let what = format!("h{i} to know exactly hosts {hosts:?}");
    fabric
        .frr(i)
        .wait_for(&what, timeout, |f| {
            let (v, m, k) = (f.evpn_vteps(VNI)?, f.evpn_macs(VNI)?, fabric.kernel_dsts(i));
            if v == vteps && m == macs && k == vteps {
                Ok(())
            } else {
                Err(format!("VTEPs {v:?}, MACs {m:?}, kernel FDB towards {k:?}"))
            }
        })
        .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn three_kernel_vteps_with_frr_learn_each_other_and_forget_a_lost_peer() {
    let test = "frr_lab";
    if !netns::root_or_skip(test) {
        return;
    }
    if let Some(m) = frr::missing() {
        tep_testing::skip(format_args!("{test}: {m}"));
        return;
    }
    let t0 = Instant::now();
    let mut fabric = Fabric::build();
    let built = t0.elapsed();
    for i in 1..=3 {
        fabric
            .frr(i)
            .wait_established(2, Duration::from_secs(20))
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let up = t0.elapsed();
    // Type-3 first: the flood entries carry the pings' ARP requests.
    for i in 1..=3 {
        let vteps: Vec<String> = others(i).map(|j| vtep(j).to_string()).collect();
        let what = "the other VTEPs";
        fabric
            .frr(i)
            .wait_for(what, Duration::from_secs(10), |f| {
                let v = f.evpn_vteps(VNI)?;
                (v == vteps).then_some(()).ok_or(format!("VTEPs {v:?}"))
            })
            .unwrap_or_else(|e| panic!("{e}"));
    }
    for i in 1..=3 {
        let j = i % 3 + 1;
        assert!(fabric.ping(i, j) > 0, "w{i} -> w{j}: no answer");
    }
    for i in 1..=3 {
        let local = fabric.frr(i).evpn_local_macs(VNI).unwrap();
        assert_eq!(local, [(mac(i), "e100".to_string())], "h{i}'s local MACs");
        knows(
            &fabric,
            i,
            &others(i).collect::<Vec<_>>(),
            Duration::from_secs(10),
        );
    }
    let learned = t0.elapsed();
    for i in 1..=3 {
        for j in others(i) {
            assert_eq!(fabric.ping(i, j), 3, "w{i} -> w{j}");
        }
    }

    // h3 loses BGP: the others withdraw its VTEP and MAC within the hold
    // time (a stopped bgpd says Cease at once; 9 s is the worst case).
    fabric.frr[2].stop_bgpd().unwrap();
    let lost = Instant::now();
    knows(&fabric, 1, &[2], Duration::from_secs(12));
    knows(&fabric, 2, &[1], Duration::from_secs(12));
    let withdrawn = lost.elapsed();
    assert_eq!(
        fabric.ping(1, 3),
        0,
        "w1 still reaches w3 without h3's routes"
    );
    fabric
        .frr(1)
        .wait_established(1, Duration::from_secs(1))
        .unwrap();

    fabric.frr[2].start_bgpd().unwrap();
    let back = Instant::now();
    for i in 1..=3 {
        fabric
            .frr(i)
            .wait_established(2, Duration::from_secs(20))
            .unwrap_or_else(|e| panic!("{e}"));
        knows(
            &fabric,
            i,
            &others(i).collect::<Vec<_>>(),
            Duration::from_secs(15),
        );
    }
    let restored = back.elapsed();
    assert_eq!(fabric.ping(1, 3), 3, "w1 -> w3 after h3's BGP came back");
    assert_eq!(fabric.ping(3, 2), 3, "w3 -> w2 after h3's BGP came back");
    eprintln!(
        "frr_lab: built {built:?}, sessions up {up:?}, MACs learned {learned:?}, \
         h3 withdrawn in {withdrawn:?}, restored in {restored:?}, all {:?}",
        t0.elapsed()
    );
}

#[test]
fn frr_in_a_namespace_that_is_not_there_fails_and_leaves_nothing() {
    let test = "frr_lab (no namespace)";
    if !netns::root_or_skip(test) {
        return;
    }
    if let Some(m) = frr::missing() {
        tep_testing::skip(format_args!("{test}: {m}"));
        return;
    }
    let ns = format!("fl{}none", std::process::id());
    let err = Frr::start(&ns, vtep(1), &[vtep(2)]).unwrap_err();
    assert!(err.contains("zebra did not start"), "{err}");
    let dir = std::env::temp_dir().join(format!("frr-{ns}"));
    assert!(!dir.exists(), "{} left behind", dir.display());
}
