//! Network-namespace labs, for tep's tests and for `tep-bench`: namespaces
//! with the commands that set them up, the two-host rig most tests use (two
//! namespaces joined by a veth pair), `tep run` daemons in them, and the
//! traffic tools run between them.
//!
//! Everything is created under names unique to the process (and the case),
//! bounded in time, and deleted on drop, also when a test or a bench fails
//! half-way; [`remove_all`] does the same from a signal handler. Tests need
//! root: without it [`root_or_skip`] says SKIPPED where a person sees it, or
//! fails under CI=true ([`crate::skip`]).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The `tep` binary beside `exe`: in its directory, or in the parent of
/// `deps/` for a test binary (cargo puts `target/<profile>/tep` there).
pub fn tep_beside(exe: &Path) -> PathBuf {
    let dir = exe.parent().unwrap_or(Path::new("."));
    let dir = match dir.file_name() {
        Some(n) if n == "deps" => dir.parent().unwrap_or(dir),
        _ => dir,
    };
    dir.join("tep")
}

/// Whether the `tep` beside `exe` (a tep-bench under test) is there; says
/// why not (cargo builds it beside tep-bench when it builds the workspace;
/// `cargo test -p tep-bench` alone does not).
pub fn tep_beside_or_skip(test: &str, exe: &Path) -> bool {
    let tep = tep_beside(exe);
    if !tep.is_file() {
        crate::skip(format_args!(
            "{test}: no tep at {} (cargo build -p tep)",
            tep.display()
        ));
        return false;
    }
    true
}

/// The tep binary the tests run: the one cargo built beside them.
pub fn tep() -> &'static str {
    static TEP: OnceLock<String> = OnceLock::new();
    TEP.get_or_init(|| {
        let exe = std::env::current_exe().expect("the test binary's path");
        tep_beside(&exe).display().to_string()
    })
}

/// Whether this process may create namespaces and has the tools the
/// two-host tests run; says why not.
pub fn root_or_skip(test: &str) -> bool {
    if !crate::is_root() {
        crate::skip(format_args!(
            "{test}: needs root for network namespaces (CI runs it as root)"
        ));
        return false;
    }
    for tool in ["ip", "ping", "iperf3"] {
        if !crate::have(tool) {
            crate::skip(format_args!(
                "{test}: `{tool}` is not installed (.ci/run installs it)"
            ));
            return false;
        }
    }
    true
}

/// Runs a command, returning its output; panics with its stderr when it
/// fails and `must` is set.
pub fn sh(args: &[&str], must: bool) -> Output {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", args[0]));
    if must && !out.status.success() {
        panic!(
            "`{}` failed: {}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    out
}

/// Runs a command; its standard output, or an error with its standard
/// error when it fails.
pub fn cmd(args: &[&str]) -> Result<String, String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{}: {e}", args[0]))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// The namespaces that exist, for [`remove_all`]: (names, directory).
static LIVE: Mutex<Vec<(Vec<String>, PathBuf)>> = Mutex::new(Vec::new());

/// Removes every [`Namespaces`] of this process (their processes,
/// namespaces and files), as their drops would: for a signal handler that
/// then exits.
pub fn remove_all() {
    let live = std::mem::take(&mut *LIVE.lock().unwrap_or_else(|e| e.into_inner()));
    for (names, dir) in live {
        remove_namespaces(&names.iter().collect::<Vec<_>>());
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Namespaces `<tag><name>` and a directory `<tmp>/<tag>` for configs and
/// logs, all removed on drop.
#[derive(Debug)]
pub struct Namespaces {
    tag: String,
    names: Vec<String>,
    pub dir: PathBuf,
}

impl Namespaces {
    /// Creates one namespace per name (loopback up, no duplicate address
    /// detection). `tag` makes the names unique: the caller puts its
    /// process id in it, so that several runs, or the tests, go side by
    /// side.
    pub fn new(tag: &str, names: &[&str]) -> Result<Namespaces, String> {
        if !crate::is_root() {
            return Err("building network namespaces needs root: run as root".into());
        }
        let dir = std::env::temp_dir().join(tag);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut lab = Namespaces {
            tag: tag.to_string(),
            names: Vec::new(),
            dir,
        };
        let all: Vec<String> = names.iter().map(|n| lab.ns(n)).collect();
        LIVE.lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((all, lab.dir.clone()));
        for &name in names {
            let ns = lab.ns(name);
            cmd(&["ip", "netns", "add", &ns])?;
            lab.names.push(name.to_string());
            lab.run(name, &["ip", "link", "set", "lo", "up"])?;
            // No duplicate address detection: addresses work at once.
            lab.run(
                name,
                &[
                    "sysctl",
                    "-qw",
                    "net.ipv6.conf.all.accept_dad=0",
                    "net.ipv6.conf.default.accept_dad=0",
                ],
            )?;
        }
        Ok(lab)
    }

    /// [`Self::new`], then a veth pair per `(a, dev_a, b, dev_b)` (see
    /// [`Self::veth`]).
    pub fn with_veths(
        tag: &str,
        names: &[&str],
        veths: &[(&str, &str, &str, &str)],
    ) -> Result<Namespaces, String> {
        let lab = Namespaces::new(tag, names)?;
        for &(a, dev_a, b, dev_b) in veths {
            lab.veth(a, dev_a, b, dev_b)?;
        }
        Ok(lab)
    }

    /// The full name of namespace `name`.
    pub fn ns(&self, name: &str) -> String {
        format!("{}{name}", self.tag)
    }

    /// Runs `args` inside namespace `name`; its standard output.
    pub fn run(&self, name: &str, args: &[&str]) -> Result<String, String> {
        let ns = self.ns(name);
        let mut all = vec!["ip", "netns", "exec", &ns];
        all.extend_from_slice(args);
        cmd(&all)
    }

    /// A veth pair, `dev_a` in namespace `a` and `dev_b` in `b`, down and
    /// without addresses. The ends are created inside the namespaces
    /// directly.
    pub fn veth(&self, a: &str, dev_a: &str, b: &str, dev_b: &str) -> Result<(), String> {
        let (na, nb) = (self.ns(a), self.ns(b));
        cmd(&[
            "ip", "link", "add", dev_a, "netns", &na, "type", "veth", "peer", "name", dev_b,
            "netns", &nb,
        ])
        .map(drop)
    }

    /// [`Self::veth`] with `queues` transmit and receive queues on each
    /// end: a veth hands a frame to its peer's receive queue of the same
    /// number as the transmit queue the sender's stack picked (by the
    /// flow's hash), so that flows spread over the queues and each stays
    /// on one.
    pub fn veth_queues(
        &self,
        a: &str,
        dev_a: &str,
        b: &str,
        dev_b: &str,
        queues: u32,
    ) -> Result<(), String> {
        let (na, nb) = (self.ns(a), self.ns(b));
        let q = queues.to_string();
        cmd(&[
            "ip",
            "link",
            "add",
            dev_a,
            "netns",
            &na,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
            "type",
            "veth",
            "peer",
            "name",
            dev_b,
            "netns",
            &nb,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
        ])
        .map(drop)
    }

    /// A veth pair `va` (in `a`) – `vb` (in `b`), up, with
    /// [`Pair::A4`]/[`Pair::A6`] on `va` and [`Pair::B4`]/[`Pair::B6`] on
    /// `vb`.
    pub fn veth_pair(&self, a: &str, b: &str) -> Result<(), String> {
        self.veth(a, "va", b, "vb")?;
        for (side, dev, v4, v6) in [(a, "va", Pair::A4, Pair::A6), (b, "vb", Pair::B4, Pair::B6)] {
            self.run(
                side,
                &["ip", "addr", "add", &format!("{v4}/24"), "dev", dev],
            )?;
            let v6 = format!("{v6}/64");
            self.run(side, &["ip", "addr", "add", &v6, "dev", dev, "nodad"])?;
            self.run(side, &["ip", "link", "set", dev, "up"])?;
        }
        Ok(())
    }

    /// Starts `tep run -c <dir>/<file>.toml` in namespace `name`, on CPU
    /// `cpu` if given; returns once the control socket
    /// `<dir>/<file>.sock` (the config names it, see [`Self::socket`])
    /// answers.
    pub fn start_tep(
        &self,
        tep: &Path,
        name: &str,
        file: &str,
        config: &str,
        cpu: Option<usize>,
    ) -> Result<Daemon, String> {
        Daemon::start(tep, &self.ns(name), &self.dir, file, config, cpu, &[])
    }

    /// The control socket path of the daemon started from `file`.
    pub fn socket(&self, file: &str) -> String {
        self.dir.join(format!("{file}.sock")).display().to_string()
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        LIVE.lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(_, d)| d != &self.dir);
        let names: Vec<String> = self.names.iter().map(|n| self.ns(n)).collect();
        remove_namespaces(&names.iter().collect::<Vec<_>>());
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

static CASES: AtomicUsize = AtomicUsize::new(0);

/// Two namespaces `a` and `b` with a veth pair: `a` has 192.0.2.1/24 and
/// 2001:db8::1/64 on `va`, `b` the .2 / ::2 addresses on `vb`.
#[derive(Debug)]
pub struct Pair {
    pub a: String,
    pub b: String,
    pub dir: PathBuf,
    lab: Namespaces,
}

impl Pair {
    /// Underlay addresses of each side.
    pub const A4: &'static str = "192.0.2.1";
    pub const B4: &'static str = "192.0.2.2";
    pub const A6: &'static str = "2001:db8::1";
    pub const B6: &'static str = "2001:db8::2";

    /// The pair of a test case; panics if it cannot be built.
    #[allow(clippy::new_without_default)]
    pub fn new() -> Pair {
        let n = CASES.fetch_add(1, Ordering::Relaxed);
        let tag = format!("tep{}x{n}", std::process::id());
        let lab = Namespaces::new(&tag, &["a", "b"])
            .and_then(|lab| lab.veth_pair("a", "b").map(|()| lab))
            .unwrap_or_else(|e| panic!("two namespaces: {e}"));
        Pair {
            a: lab.ns("a"),
            b: lab.ns("b"),
            dir: lab.dir.clone(),
            lab,
        }
    }

    /// Runs `args` inside namespace `ns`.
    pub fn exec(&self, ns: &str, args: &[&str], must: bool) -> Output {
        Lab::exec(self, ns, args, must)
    }

    /// Starts `tep run` in `ns` with `config` (TOML text); waits until its
    /// control socket answers.
    pub fn daemon(&self, ns: &str, config: &str) -> Daemon {
        spawn_daemon(&self.dir, ns, config)
    }

    /// The control socket path for a daemon in `ns` (use in the config's
    /// host.control).
    pub fn socket(&self, ns: &str) -> String {
        self.lab.socket(ns)
    }
}

/// Namespaces a test works in: commands run inside one by its full name.
pub trait Lab {
    /// Runs `args` inside namespace `ns`; see [`sh`] for `must`.
    fn exec(&self, ns: &str, args: &[&str], must: bool) -> Output {
        let mut full = vec!["ip", "netns", "exec", ns];
        full.extend_from_slice(args);
        sh(&full, must)
    }
}

impl Lab for Pair {}

/// Starts `tep run` in `ns` with `config` (TOML text, written into
/// `dir`); waits until its control socket `dir/<ns>.sock` answers.
pub fn spawn_daemon(dir: &Path, ns: &str, config: &str) -> Daemon {
    spawn_daemon_env(dir, ns, config, &[])
}

/// [`spawn_daemon`] with environment variables for the daemon.
pub fn spawn_daemon_env(dir: &Path, ns: &str, config: &str, env: &[(&str, &str)]) -> Daemon {
    spawn_daemon_under(dir, ns, config, env, &[])
}

/// The capabilities the systemd unit `examples/UNIT` keeps
/// (CapabilityBoundingSet=), as setpriv's `--bounding-set` takes them:
/// `-all,+net_admin,...`.
pub fn unit_bounding_set(unit: &str) -> String {
    let text = std::fs::read_to_string(format!(
        "{}/../../examples/{unit}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let caps = text
        .lines()
        .find_map(|l| l.strip_prefix("CapabilityBoundingSet="))
        .unwrap_or_else(|| panic!("{unit}: no CapabilityBoundingSet"));
    let mut out = "-all".to_string();
    for c in caps.split_whitespace() {
        out += &format!(",+{}", c.trim_start_matches("CAP_").to_lowercase());
    }
    out
}

/// [`spawn_daemon`] with the bounding set of systemd unit `unit` (as
/// systemd gives it: tep starts as root with only those capabilities),
/// through setpriv; None when setpriv is missing.
pub fn spawn_daemon_as_unit(dir: &Path, ns: &str, config: &str, unit: &str) -> Option<Daemon> {
    if !crate::have("setpriv") {
        return None;
    }
    let set = format!("--bounding-set={}", unit_bounding_set(unit));
    Some(spawn_daemon_under(
        dir,
        ns,
        config,
        &[],
        &["setpriv", &set, "--inh-caps=-all"],
    ))
}

/// [`spawn_daemon_env`] through `wrapper` (a command that execs the rest
/// of its arguments: the daemon keeps its process id).
fn spawn_daemon_under(
    dir: &Path,
    ns: &str,
    config: &str,
    env: &[(&str, &str)],
    wrapper: &[&str],
) -> Daemon {
    Daemon::start_under(Path::new(tep()), ns, dir, ns, config, wrapper, env)
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Deletes namespaces and what still runs in them.
pub fn remove_namespaces(names: &[&String]) {
    for ns in names {
        // Kills whatever still runs inside (iperf3 servers).
        let _ = Command::new("ip")
            .args(["netns", "pids", ns])
            .output()
            .map(|o| {
                for pid in String::from_utf8_lossy(&o.stdout).split_whitespace() {
                    let _ = Command::new("kill").args(["-9", pid]).status();
                }
            });
        let _ = Command::new("ip").args(["netns", "del", ns]).status();
    }
}

/// A running `tep run`; SIGTERM on drop.
#[derive(Debug)]
pub struct Daemon {
    child: Option<Child>,
    tep: PathBuf,
    pub socket: PathBuf,
    pub log: PathBuf,
    pub config: PathBuf,
}

impl Daemon {
    /// Starts `tep run -c <dir>/<file>.toml` in namespace `ns` (the full
    /// name) with `config` written there, on CPU `cpu` if given, with
    /// `env` added to its environment; waits (10 s at most) until its
    /// control socket `<dir>/<file>.sock`, which the config names,
    /// answers. Its standard error goes to `<dir>/<file>.log`.
    pub fn start(
        tep: &Path,
        ns: &str,
        dir: &Path,
        file: &str,
        config: &str,
        cpu: Option<usize>,
        env: &[(&str, &str)],
    ) -> Result<Daemon, String> {
        let cpu = cpu.map(|c| c.to_string());
        let wrapper: Vec<&str> = match &cpu {
            Some(c) => vec!["taskset", "-c", c],
            None => vec![],
        };
        Daemon::start_under(tep, ns, dir, file, config, &wrapper, env)
    }

    /// [`Daemon::start`] through `wrapper` (a command that execs the rest
    /// of its arguments, as taskset and setpriv do: the daemon keeps its
    /// process id).
    pub fn start_under(
        tep: &Path,
        ns: &str,
        dir: &Path,
        file: &str,
        config: &str,
        wrapper: &[&str],
        env: &[(&str, &str)],
    ) -> Result<Daemon, String> {
        let path = dir.join(format!("{file}.toml"));
        std::fs::write(&path, config).map_err(|e| format!("{}: {e}", path.display()))?;
        let socket = dir.join(format!("{file}.sock"));
        let _ = std::fs::remove_file(&socket);
        let log = dir.join(format!("{file}.log"));
        let stderr = std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let mut command = Command::new("ip");
        command.args(["netns", "exec", ns]).args(wrapper);
        let child = command
            .arg(tep)
            .args(["run", "-c"])
            .arg(&path)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .map_err(|e| format!("{} run: {e}", tep.display()))?;
        let mut d = Daemon {
            child: Some(child),
            tep: tep.to_path_buf(),
            socket,
            log,
            config: path,
        };
        let until = Instant::now() + Duration::from_secs(10);
        while d.control(&["show", "tunnels"]).is_err() {
            if Instant::now() > until || !d.alive() {
                return Err(format!("tep ({file}) did not come up:\n{}", d.log()));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(d)
    }

    /// `tep <args> --socket S`: stdout, or the error text.
    pub fn control(&self, args: &[&str]) -> Result<String, String> {
        let out = Command::new(&self.tep)
            .args(args)
            .arg("--socket")
            .arg(&self.socket)
            .output()
            .map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    /// `tep show WHAT --json`, parsed.
    pub fn show(&self, what: &str) -> serde_json::Value {
        let text = self
            .control(&["show", what, "--json"])
            .unwrap_or_else(|e| panic!("show {what}: {e}\n{}", self.log()));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("show {what}: {e}: {text}"))
    }

    /// EVPN network `net`'s object in `tep show evpn --json`.
    pub fn evpn(&self, net: &str) -> serde_json::Value {
        let v = self.show("evpn");
        v.as_array()
            .and_then(|a| a.iter().find(|n| n["name"] == net))
            .cloned()
            .unwrap_or_else(|| panic!("no {net} in show evpn: {v}"))
    }

    /// The remote VTEPs EVPN network `net` took from BGP, sorted.
    pub fn evpn_vteps(&self, net: &str) -> Vec<String> {
        let mut v: Vec<String> = self.evpn(net)["vteps"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }

    /// The daemon's process id (`ip netns exec` execs tep in place).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// The daemon's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGTERM and wait (at most 5 s); returns the exit status code.
    pub fn stop(&mut self) -> Option<i32> {
        let mut child = self.child.take()?;
        if let Ok(Some(s)) = child.try_wait() {
            return s.code();
        }
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        let until = Instant::now() + Duration::from_secs(5);
        loop {
            if let Ok(Some(s)) = child.try_wait() {
                return s.code();
            }
            if Instant::now() > until {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL (no chance to clean up) and wait; returns whether it died.
    pub fn kill(&mut self) -> bool {
        let Some(mut child) = self.child.take() else {
            return false;
        };
        let _ = Command::new("kill")
            .args(["-KILL", &child.id().to_string()])
            .status();
        child.wait().is_ok()
    }

    /// Whether the process still runs.
    pub fn alive(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `ping` from `ns` to `dst`: the packets received.
pub fn ping(lab: &impl Lab, ns: &str, dst: &str, count: u32) -> u32 {
    let out = lab.exec(
        ns,
        &[
            "ping",
            "-c",
            &count.to_string(),
            "-i",
            "0.05",
            "-W",
            "1",
            "-w",
            "5",
            dst,
        ],
        false,
    );
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| {
            l.split(", ")
                .find(|p| p.ends_with("received"))
                .and_then(|p| p.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

/// A bounded iperf3 TCP transfer from `a` to the server in `b` at `dst`:
/// bits per second received, or an error with iperf3's words.
pub fn iperf(pair: &Pair, dst: &str, seconds: f64, streams: u32) -> Result<f64, String> {
    iperf_directed(pair, dst, seconds, streams, false)
}

/// [`iperf`], with `reverse` sending from `b` to `a` (`-R`).
pub fn iperf_directed(
    pair: &Pair,
    dst: &str,
    seconds: f64,
    streams: u32,
    reverse: bool,
) -> Result<f64, String> {
    iperf_between(&pair.a, &pair.b, dst, seconds, streams, reverse)
}

/// A bounded iperf3 TCP transfer from namespace `client` to a server in
/// `server` at `dst` (`reverse`: the other way): bits per second received.
pub fn iperf_between(
    client: &str,
    server: &str,
    dst: &str,
    seconds: f64,
    streams: u32,
    reverse: bool,
) -> Result<f64, String> {
    let port = "5201";
    let mut server = Command::new("ip")
        .args([
            "netns", "exec", server, "iperf3", "-s", "-1", "-p", port, "-B", dst,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| e.to_string())?;
    std::thread::sleep(Duration::from_millis(200));
    let out = Command::new("timeout")
        .args([
            &format!("{}", seconds as u64 + 10),
            "ip",
            "netns",
            "exec",
            client,
            "iperf3",
            "-c",
            dst,
            "-p",
            port,
            "-t",
            &seconds.to_string(),
            "-P",
            &streams.to_string(),
            "--connect-timeout",
            "3000",
            "-J",
        ])
        .args(reverse.then_some("-R"))
        .output()
        .map_err(|e| e.to_string())?;
    let _ = server.kill();
    let _ = server.wait();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| {
        format!(
            "iperf3 gave no JSON ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })?;
    if let Some(err) = v.get("error") {
        return Err(err.to_string());
    }
    v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .ok_or_else(|| format!("no result: {v}"))
}

/// A helper script (python3 with scapy: the responder, the SMF) run in a
/// namespace: its config given as a JSON file, commands written to its
/// stdin and JSON lines read from its stdout, its stderr kept in a log.
/// Killed on drop.
#[derive(Debug)]
pub struct Script {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    lines: std::sync::mpsc::Receiver<String>,
    log: PathBuf,
}

impl Script {
    /// Starts `script` in `ns` with `config` written to `dir/<name>.json`
    /// and waits (a minute at most: importing scapy takes seconds on a
    /// loaded machine) for a first line that `ready` accepts.
    pub fn start(
        ns: &str,
        script: &str,
        dir: &Path,
        name: &str,
        config: &serde_json::Value,
        ready: impl Fn(&str) -> bool,
    ) -> Script {
        use std::io::BufRead;
        let path = dir.join(format!("{name}.json"));
        std::fs::write(&path, config.to_string()).unwrap();
        let log = dir.join(format!("{name}.log"));
        let mut child = Command::new("ip")
            .args(["netns", "exec", ns, "/usr/bin/python3", script])
            .arg(&path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap_or_else(|e| panic!("start {script}: {e}"));
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let s = Script {
            stdin: child.stdin.take(),
            child,
            lines,
            log,
        };
        match s.lines.recv_timeout(Duration::from_secs(60)) {
            Ok(l) if ready(&l) => s,
            other => panic!("{name} did not start ({other:?}):\n{}", s.log()),
        }
    }

    /// What it wrote to stderr.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Writes one line to its stdin.
    pub fn send(&mut self, line: &str) {
        use std::io::Write;
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    /// Its next line.
    pub fn recv(&self, timeout: Duration) -> Result<String, std::sync::mpsc::RecvTimeoutError> {
        self.lines.recv_timeout(timeout)
    }

    /// Closes its stdin (it finishes) and waits for its last line.
    pub fn finish(mut self, timeout: Duration) -> Result<String, String> {
        drop(self.stdin.take());
        let line = self
            .lines
            .recv_timeout(timeout)
            .map_err(|e| format!("{e}:\n{}", self.log()))?;
        let _ = self.child.wait();
        Ok(line)
    }
}

impl Drop for Script {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A field of /proc/PID/status (or /proc/PID/task/TID/status).
pub fn status_field(status: &str, key: &str) -> String {
    status
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{key}:")))
        .unwrap_or_else(|| panic!("no {key} in {status}"))
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// Every thread of `pid`: (Uid, Gid, Groups, CapEff, CapPrm) of each.
pub fn thread_credentials(pid: u32) -> Vec<[String; 5]> {
    let mut out = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let s = std::fs::read_to_string(t.unwrap().path().join("status")).unwrap();
        out.push(["Uid", "Gid", "Groups", "CapEff", "CapPrm"].map(|k| status_field(&s, k)));
    }
    out
}

/// `id FLAG USER`: the number, or None when there is no such user.
pub fn id(flag: &str, user: &str) -> Option<u32> {
    let out = std::process::Command::new("id")
        .args([flag, user])
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tep_is_found_beside_a_binary_or_above_a_test_binary() {
        let beside = tep_beside(Path::new("/t/target/release/tep-bench"));
        assert_eq!(beside, Path::new("/t/target/release/tep"));
        let above = tep_beside(Path::new("/t/target/debug/deps/host-0123abcd"));
        assert_eq!(above, Path::new("/t/target/debug/tep"));
    }
}
