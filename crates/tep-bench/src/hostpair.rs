//! Two hosts for the seeds' TCP experiments (001-004): namespaces `a` and
//! `b` joined by one veth pair, a path between them (no tunnel, tep in both,
//! or the kernel's VXLAN in both) and the two measurements the seeds made:
//! a TCP stream (iperf3) and TCP request/response ([`super::pingpong`]), each with the
//! CPU use of each side.
//!
//! A side is a CPU: its processes (iperf3, the ping-pong, the tep daemon) are
//! pinned to it and the veth's receive work is steered to it with RPS, so
//! that the busy time of CPU `a` is what host `a` spent, kernel included.
//! The seeds' hosts were separate machines; this is the nearest a
//! two-CPU machine gets. With a single CPU both sides share it and the
//! per-side figures are the machine's.

use super::pingpong;
use crate::timing::median;
use serde::Serialize;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tep_testing::netns::{Daemon, Namespaces, Pair};

/// The inner (or, without a tunnel, only) addresses of the two sides.
pub const INNER_V4: [&str; 2] = ["10.9.0.1", "10.9.0.2"];
pub const INNER_V6: [&str; 2] = ["fd00:9::1", "fd00:9::2"];
const UNDERLAY_V4: [&str; 2] = [Pair::A4, Pair::B4];
const UNDERLAY_V6: [&str; 2] = [Pair::A6, Pair::B6];
const SIDES: [&str; 2] = ["a", "b"];
const VETH: [&str; 2] = ["va", "vb"];
const IPERF_PORT: &str = "5201";
/// Request/response: the port and the message size (netperf TCP_RR's 1
/// byte would measure the same path; 64 is what sockperf and the host
/// benches use).
const RR_PORT: u16 = 11111;
const RR_SIZE: usize = 64;

/// What carries the packets between the sides.
#[derive(Clone, Debug, PartialEq)]
pub enum Carrier {
    /// No tunnel: the inner addresses sit on the veth.
    Plain,
    /// tep in both namespaces: this kind, this checksum mode.
    Tep {
        kind: &'static str,
        checksum: &'static str,
    },
    /// The kernel's VXLAN device in both, with these `ip link` options.
    KernelVxlan { options: &'static str },
}

/// One way between the sides.
#[derive(Clone, Debug)]
pub struct Path {
    pub carrier: Carrier,
    /// The tunnel runs over IPv6.
    pub underlay_v6: bool,
    /// The traffic inside is IPv6 (SIT-like for FOU/GUE).
    pub inner_v6: bool,
    /// Lines added to tep's `[host]` section.
    pub tep_host: &'static str,
}

impl Path {
    pub fn new(carrier: Carrier) -> Path {
        Path {
            carrier,
            underlay_v6: false,
            inner_v6: false,
            tep_host: "",
        }
    }

    pub fn tep_host(mut self, lines: &'static str) -> Path {
        self.tep_host = lines;
        self
    }

    pub fn v6_underlay(mut self) -> Path {
        self.underlay_v6 = true;
        self
    }

    pub fn v6_inner(mut self) -> Path {
        self.inner_v6 = true;
        self
    }

    /// The address of side `b` the traffic goes to.
    fn destination(&self) -> &'static str {
        if self.inner_v6 {
            INNER_V6[1]
        } else {
            INNER_V4[1]
        }
    }
}

/// A TCP stream's result.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Stream {
    pub gbit_per_s: f64,
    pub retransmits: f64,
    /// Busy time of each side's CPU, percent of that CPU.
    pub cpu_a_pct: f64,
    pub cpu_b_pct: f64,
}

impl Stream {
    /// Percent of a CPU per Gbit/s on side a (sender) and b (receiver).
    pub fn cpu_per_gbit(&self) -> (f64, f64) {
        let g = self.gbit_per_s.max(1e-9);
        (self.cpu_a_pct / g, self.cpu_b_pct / g)
    }
}

/// A TCP request/response result: 64-byte request, 64-byte response, one
/// at a time.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Rr {
    pub transactions_per_s: f64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p95_us: f64,
    pub p99_us: f64,
    pub cpu_a_pct: f64,
    pub cpu_b_pct: f64,
}

/// The two hosts.
pub struct Hosts {
    lab: Namespaces,
    /// The tep binary the daemons run.
    tep: PathBuf,
    /// Side a's CPU and side b's.
    pub cpus: [usize; 2],
}

impl Hosts {
    /// Builds the namespaces and the veth pair (both address families), and
    /// steers each veth end's receive work to its side's CPU.
    pub fn new(tep: PathBuf) -> Result<Hosts, String> {
        for tool in ["iperf3", "taskset"] {
            if !tep_testing::have(tool) {
                return Err(format!(
                    "{tool} is not installed (apt-get install iperf3 util-linux)"
                ));
            }
        }
        let lab = Namespaces::new(&format!("tepseedh{}", std::process::id()), &SIDES)?;
        lab.veth_pair(SIDES[0], SIDES[1])?;
        let n = tep_sys::thread::online_cpus().max(1);
        let cpus = [0, if n > 1 { 1 } else { 0 }];
        for i in 0..2 {
            // `ip netns exec` mounts the namespace's own /sys.
            let rps = format!(
                "echo {:x} > /sys/class/net/{}/queues/rx-0/rps_cpus",
                1u64 << cpus[i],
                VETH[i]
            );
            lab.run(SIDES[i], &["sh", "-c", &rps])?;
        }
        Ok(Hosts { lab, tep, cpus })
    }

    /// Brings `path` up; it is taken down when the returned guard goes.
    pub fn up(&self, path: &Path) -> Result<Up<'_>, String> {
        let mut up = Up {
            hosts: self,
            daemons: Vec::new(),
            plain: false,
            kernel: false,
        };
        match path.carrier {
            Carrier::Plain => {
                up.plain = true;
                for i in 0..2 {
                    for a in self.inner_addresses(i) {
                        self.lab.run(
                            SIDES[i],
                            &["ip", "addr", "add", &a, "dev", VETH[i], "nodad"],
                        )?;
                    }
                }
            }
            Carrier::Tep { kind, checksum } => {
                for (i, side) in SIDES.iter().enumerate() {
                    let file = format!("tep-{side}");
                    let config = self.tep_config(path, kind, checksum, i, &file);
                    up.daemons.push(self.lab.start_tep(
                        &self.tep,
                        side,
                        &file,
                        &config,
                        Some(self.cpus[i]),
                    )?);
                }
            }
            Carrier::KernelVxlan { options } => {
                up.kernel = true;
                let under = if path.underlay_v6 {
                    UNDERLAY_V6
                } else {
                    UNDERLAY_V4
                };
                for i in 0..2 {
                    let mut args = vec![
                        "ip",
                        "link",
                        "add",
                        "vx0",
                        "type",
                        "vxlan",
                        "id",
                        "42",
                        "local",
                        under[i],
                        "remote",
                        under[1 - i],
                        "dstport",
                        "4789",
                        "dev",
                        VETH[i],
                    ];
                    args.extend(options.split_whitespace());
                    self.lab.run(SIDES[i], &args)?;
                    for a in self.inner_addresses(i) {
                        self.lab
                            .run(SIDES[i], &["ip", "addr", "add", &a, "dev", "vx0", "nodad"])?;
                    }
                    self.lab
                        .run(SIDES[i], &["ip", "link", "set", "vx0", "up"])?;
                }
            }
        }
        // The first packets wait for neighbour resolution, not the bench.
        let dst = path.destination();
        let mut ok = false;
        for _ in 0..20 {
            if self
                .lab
                .run("a", &["ping", "-c", "1", "-W", "1", dst])
                .is_ok()
            {
                ok = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        if !ok {
            return Err(format!("no ping through the path to {dst}"));
        }
        Ok(up)
    }

    fn inner_addresses(&self, i: usize) -> [String; 2] {
        [format!("{}/24", INNER_V4[i]), format!("{}/64", INNER_V6[i])]
    }

    fn tep_config(&self, path: &Path, kind: &str, checksum: &str, i: usize, file: &str) -> String {
        let l2 = kind == "vxlan" || kind == "geneve";
        let dev = if l2 { "tap" } else { "tun" };
        let (v4, v6) = (format!("{}/24", INNER_V4[i]), format!("{}/64", INNER_V6[i]));
        let under = if path.underlay_v6 {
            UNDERLAY_V6
        } else {
            UNDERLAY_V4
        };
        let mut c = format!(
            "[host]\n{dev} = \"tepseed0\"\n{dev}_addresses = [\"{v4}\", \"{v6}\"]\n\
             cpus = [{}]\ncontrol = \"{}\"\n{}\n\
             [[tunnel]]\nname = \"seed\"\nkind = \"{kind}\"\nlocal = \"{}\"\nremote = \"{}\"\n\
             checksum = \"{checksum}\"\n",
            self.cpus[i],
            self.lab.socket(file),
            path.tep_host,
            under[i],
            under[1 - i]
        );
        // The inner families a kind carries: FOU's protocol is its port's.
        c += match kind {
            _ if l2 => "vni = 42\n",
            "fou-ipip" => "inner_prefixes = [\"10.9.0.0/24\"]\n",
            "fou-sit" => "inner_prefixes = [\"fd00:9::/64\"]\n",
            _ => "inner_prefixes = [\"10.9.0.0/24\", \"fd00:9::/64\"]\n",
        };
        if checksum == "zero" && path.underlay_v6 {
            // RFC 6935: both ends opt in to zero checksums over IPv6.
            c += "zero_checksum_tx = true\nzero_checksum_rx = true\n";
        }
        if checksum == "remote" {
            c += "remote_checksum_rx = true\n";
        }
        c
    }

    /// A TCP stream from a to b for `seconds`.
    pub fn stream(&self, path: &Path, seconds: f64) -> Result<Stream, String> {
        let dst = path.destination();
        let _server = self.spawn_b(&["iperf3", "-s", "-1", "-B", dst, "-p", IPERF_PORT])?;
        self.wait_listening(IPERF_PORT)?;
        let secs = format!("{seconds}");
        let limit = format!("{}", seconds as u64 + 20);
        let before = cpu_snapshot()?;
        let out = self.in_a(&[
            "timeout", "-k", "2", &limit, "iperf3", "-c", dst, "-p", IPERF_PORT, "-t", &secs, "-J",
        ])?;
        let busy = cpu_busy_since(&before, self.cpus)?;
        let v: serde_json::Value =
            serde_json::from_str(&out).map_err(|e| format!("iperf3 -J: {e}"))?;
        if let Some(e) = v.get("error").and_then(|e| e.as_str()) {
            return Err(format!("iperf3: {e}"));
        }
        let end = &v["end"];
        let bps = end["sum_received"]["bits_per_second"]
            .as_f64()
            .ok_or("iperf3 -J: no end.sum_received")?;
        Ok(Stream {
            gbit_per_s: bps / 1e9,
            retransmits: end["sum_sent"]["retransmits"].as_f64().unwrap_or(0.0),
            cpu_a_pct: busy[0],
            cpu_b_pct: busy[1],
        })
    }

    /// TCP request/response from a to b for `seconds`: 64-byte request
    /// and response ([`super::pingpong`]), the server in b on b's CPU, the
    /// client in a on a's.
    pub fn rr(&self, path: &Path, seconds: f64) -> Result<Rr, String> {
        let dst: std::net::IpAddr = path.destination().parse().map_err(|e| format!("{e}"))?;
        let addr = std::net::SocketAddr::new(dst, RR_PORT);
        let (a, b) = (self.lab.ns("a"), self.lab.ns("b"));
        let stop = std::sync::atomic::AtomicBool::new(false);
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (trips, busy) = std::thread::scope(|s| {
            let stop = &stop;
            let b = &b;
            let server =
                s.spawn(move || pingpong::serve(b, self.cpus[1], addr, RR_SIZE, ready_tx, stop));
            let run = || -> Result<(pingpong::RoundTrips, [f64; 2]), String> {
                ready_rx
                    .recv()
                    .map_err(|_| "the request/response server ended".to_string())?
                    .map_err(|e| format!("request/response server on {addr}: {e}"))?;
                let before = cpu_snapshot()?;
                let trips = s
                    .spawn(|| {
                        pingpong::measure(
                            &a,
                            self.cpus[0],
                            addr,
                            RR_SIZE,
                            Duration::from_millis(300),
                            seconds,
                        )
                    })
                    .join()
                    .map_err(|_| "request/response client panicked".to_string())?
                    .map_err(|e| format!("request/response to {addr}: {e}"))?;
                Ok((trips, cpu_busy_since(&before, self.cpus)?))
            };
            let r = run();
            stop.store(true, std::sync::atomic::Ordering::Release);
            let _ = server.join();
            r
        })?;
        let mut rtts = trips.rtts_us;
        if rtts.is_empty() {
            return Err("no round trip measured".into());
        }
        let n = rtts.len();
        let mean = rtts.iter().sum::<f64>() / n as f64;
        rtts.sort_by(|a, b| a.total_cmp(b));
        let pct = |p: f64| rtts[((p / 100.0) * (n - 1) as f64).round() as usize];
        Ok(Rr {
            transactions_per_s: n as f64 / trips.seconds,
            mean_us: mean,
            p50_us: pct(50.0),
            p90_us: pct(90.0),
            p95_us: pct(95.0),
            p99_us: pct(99.0),
            cpu_a_pct: busy[0],
            cpu_b_pct: busy[1],
        })
    }

    /// Runs `args` in a, pinned to a's CPU; its output.
    fn in_a(&self, args: &[&str]) -> Result<String, String> {
        let cpu = self.cpus[0].to_string();
        let mut all = vec!["taskset", "-c", &cpu];
        all.extend_from_slice(args);
        self.lab.run("a", &all)
    }

    /// Starts a server in b, pinned to b's CPU; killed on drop.
    fn spawn_b(&self, args: &[&str]) -> Result<Server, String> {
        let child = Command::new("ip")
            .args(["netns", "exec", &self.lab.ns("b"), "taskset", "-c"])
            .arg(self.cpus[1].to_string())
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("{}: {e}", args[0]))?;
        Ok(Server(child))
    }

    fn wait_listening(&self, port: &str) -> Result<(), String> {
        let filter = format!("sport = :{port}");
        for _ in 0..100 {
            if let Ok(out) = self.lab.run("b", &["ss", "-Hltn", &filter]) {
                if !out.trim().is_empty() {
                    return Ok(());
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(format!("nothing listens on TCP port {port} in b"))
    }
}

/// A path that is up; down on drop.
pub struct Up<'h> {
    hosts: &'h Hosts,
    daemons: Vec<Daemon>,
    plain: bool,
    kernel: bool,
}

impl Drop for Up<'_> {
    fn drop(&mut self) {
        self.daemons.clear();
        for i in 0..2 {
            let lab = &self.hosts.lab;
            if self.plain {
                for a in self.hosts.inner_addresses(i) {
                    let _ = lab.run(SIDES[i], &["ip", "addr", "del", &a, "dev", VETH[i]]);
                }
            }
            if self.kernel {
                let _ = lab.run(SIDES[i], &["ip", "link", "del", "vx0"]);
            }
        }
    }
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Per CPU: (busy, total) jiffies from /proc/stat.
fn cpu_snapshot() -> Result<Vec<(u64, u64)>, String> {
    let text = std::fs::read_to_string("/proc/stat").map_err(|e| format!("/proc/stat: {e}"))?;
    Ok(parse_cpu_lines(&text))
}

/// The `cpuN` lines: busy = user + nice + system + irq + softirq + steal,
/// total = busy + idle + iowait.
fn parse_cpu_lines(text: &str) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut f = line.split_whitespace();
        let Some(name) = f.next() else { continue };
        let Some(n) = name
            .strip_prefix("cpu")
            .and_then(|n| n.parse::<usize>().ok())
        else {
            continue;
        };
        let v: Vec<u64> = f.take(8).filter_map(|x| x.parse().ok()).collect();
        if v.len() < 8 {
            continue;
        }
        let busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
        let total = busy + v[3] + v[4];
        if out.len() <= n {
            out.resize(n + 1, (0, 0));
        }
        out[n] = (busy, total);
    }
    out
}

/// Busy percent of each side's CPU since `before`.
fn cpu_busy_since(before: &[(u64, u64)], cpus: [usize; 2]) -> Result<[f64; 2], String> {
    let after = cpu_snapshot()?;
    let pct = |c: usize| -> f64 {
        match (before.get(c), after.get(c)) {
            (Some(b), Some(a)) if a.1 > b.1 => 100.0 * (a.0 - b.0) as f64 / (a.1 - b.1) as f64,
            _ => 0.0,
        }
    };
    Ok([pct(cpus[0]), pct(cpus[1])])
}

/// What to measure through a path.
#[derive(Clone, Debug)]
pub struct Case {
    pub id: String,
    pub path: Path,
    pub stream: bool,
    pub rr: bool,
}

/// A case's medians over the rounds, or why it could not run.
#[derive(Clone, Debug, Serialize)]
pub struct Measured {
    pub id: String,
    pub stream: Option<Stream>,
    /// How far the stream's CPU per Gbit/s moved between rounds, per side
    /// (largest / smallest; 1 for one round): the noise a ratio between
    /// two cases has to be read against.
    pub stream_spread: Option<(f64, f64)>,
    pub rr: Option<Rr>,
    pub rounds: usize,
    pub error: Option<String>,
}

/// How long each measurement runs.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    pub rounds: usize,
    pub stream_seconds: f64,
    pub rr_seconds: f64,
}

impl Timing {
    /// Seconds a run of `cases` takes, about (path setup included).
    pub fn estimate(&self, cases: &[Case]) -> f64 {
        let per: f64 = cases
            .iter()
            .map(|c| {
                1.0 + if c.stream {
                    self.stream_seconds + 0.5
                } else {
                    0.0
                } + if c.rr { self.rr_seconds + 0.6 } else { 0.0 }
            })
            .sum();
        per * self.rounds as f64
    }
}

/// Runs every case `timing.rounds` times, the cases interleaved within a
/// round (so that a noisy moment hits all of them), and keeps the median of
/// each figure. A case that fails in any round reports its error.
pub fn run_cases(
    hosts: &Hosts,
    cases: &[Case],
    timing: Timing,
    mut progress: impl FnMut(&str),
) -> Vec<Measured> {
    let mut streams: Vec<Vec<Stream>> = vec![Vec::new(); cases.len()];
    let mut rrs: Vec<Vec<Rr>> = vec![Vec::new(); cases.len()];
    let mut errors: Vec<Option<String>> = vec![None; cases.len()];
    let started = Instant::now();
    for round in 0..timing.rounds.max(1) {
        for (i, c) in cases.iter().enumerate() {
            if errors[i].is_some() {
                continue;
            }
            progress(&format!(
                "round {}/{} {} ({:.0} s)",
                round + 1,
                timing.rounds,
                c.id,
                started.elapsed().as_secs_f64()
            ));
            let result = hosts.up(&c.path).and_then(|_up| {
                if c.stream {
                    streams[i].push(hosts.stream(&c.path, timing.stream_seconds)?);
                }
                if c.rr {
                    rrs[i].push(hosts.rr(&c.path, timing.rr_seconds)?);
                }
                Ok(())
            });
            if let Err(e) = result {
                errors[i] = Some(e);
            }
        }
    }
    cases
        .iter()
        .enumerate()
        .map(|(i, c)| Measured {
            id: c.id.clone(),
            stream: (c.stream && errors[i].is_none()).then(|| median_stream(&streams[i])),
            stream_spread: (c.stream && errors[i].is_none()).then(|| spread(&streams[i])),
            rr: (c.rr && errors[i].is_none()).then(|| median_rr(&rrs[i])),
            rounds: timing.rounds,
            error: errors[i].clone(),
        })
        .collect()
}

fn med<T>(v: &[T], f: impl Fn(&T) -> f64) -> f64 {
    let mut xs: Vec<f64> = v.iter().map(f).collect();
    if xs.is_empty() {
        return 0.0;
    }
    median(&mut xs)
}

/// Per side, the largest CPU per Gbit/s of the rounds over the smallest.
fn spread(v: &[Stream]) -> (f64, f64) {
    let side = |f: fn(&Stream) -> f64| {
        let (lo, hi) = v
            .iter()
            .map(f)
            .fold((f64::MAX, 0.0f64), |(lo, hi), x| (lo.min(x), hi.max(x)));
        if lo > 0.0 && lo.is_finite() {
            hi / lo
        } else {
            1.0
        }
    };
    (side(|s| s.cpu_per_gbit().0), side(|s| s.cpu_per_gbit().1))
}

fn median_stream(v: &[Stream]) -> Stream {
    Stream {
        gbit_per_s: med(v, |s| s.gbit_per_s),
        retransmits: med(v, |s| s.retransmits),
        cpu_a_pct: med(v, |s| s.cpu_a_pct),
        cpu_b_pct: med(v, |s| s.cpu_b_pct),
    }
}

fn median_rr(v: &[Rr]) -> Rr {
    Rr {
        transactions_per_s: med(v, |r| r.transactions_per_s),
        mean_us: med(v, |r| r.mean_us),
        p50_us: med(v, |r| r.p50_us),
        p90_us: med(v, |r| r.p90_us),
        p95_us: med(v, |r| r.p95_us),
        p99_us: med(v, |r| r.p99_us),
        cpu_a_pct: med(v, |r| r.cpu_a_pct),
        cpu_b_pct: med(v, |r| r.cpu_b_pct),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lines_give_busy_and_total_per_cpu() {
        let text = "cpu  10 0 10 100 0 0 0 0 0 0\n\
                    cpu0 1 2 3 100 5 6 7 8 0 0\n\
                    cpu1 10 0 0 50 0 0 0 0 0 0\n\
                    intr 5\n";
        let v = parse_cpu_lines(text);
        assert_eq!(v, vec![(1 + 2 + 3 + 6 + 7 + 8, 27 + 105), (10, 60)]);
    }

    #[test]
    fn medians_are_per_figure() {
        let s = |g, c| Stream {
            gbit_per_s: g,
            retransmits: 0.0,
            cpu_a_pct: c,
            cpu_b_pct: c,
        };
        let m = median_stream(&[s(1.0, 90.0), s(3.0, 10.0), s(2.0, 50.0)]);
        assert_eq!((m.gbit_per_s, m.cpu_a_pct), (2.0, 50.0));
        assert_eq!(m.cpu_per_gbit(), (25.0, 25.0));
        // 90 %/Gbit against 10/3: 27x.
        let (a, b) = spread(&[s(1.0, 90.0), s(3.0, 10.0), s(2.0, 50.0)]);
        assert!((a - 27.0).abs() < 1e-9 && a == b);
        assert_eq!(spread(&[s(2.0, 50.0)]), (1.0, 1.0));
    }
}
