//! Network-namespace test rig: two namespaces joined by a veth pair, a
//! `tep run` daemon in each, traffic between their tunnel devices.
//!
//! Everything is created under names unique to the test process and the
//! case, bounded in time, and deleted on drop (also when a test fails).
//! Tests need root: without it they say SKIPPED where a person sees it and
//! return, or fail under CI=true (`tep_testing::skip`).
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The tep binary under test.
pub const TEP: &str = env!("CARGO_BIN_EXE_tep");

/// Whether this process may create namespaces; prints why not.
pub fn root_or_skip(test: &str) -> bool {
    // SAFETY-free check: /proc/self/status Uid line.
    let uid = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(str::to_string))
        })
        .unwrap_or_default();
    let have = |c: &str| {
        Command::new("sh")
            .args(["-c", &format!("command -v {c}")])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if uid != "0" {
        tep_testing::skip(format_args!(
            "{test}: needs root for network namespaces (CI runs it as root)"
        ));
        return false;
    }
    for tool in ["ip", "ping", "iperf3"] {
        if !have(tool) {
            tep_testing::skip(format_args!(
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

static CASES: AtomicUsize = AtomicUsize::new(0);

/// Two namespaces `a` and `b` with a veth pair: `a` has 192.0.2.1/24 and
/// 2001:db8::1/64 on `va`, `b` the .2 / ::2 addresses on `vb`.
pub struct Pair {
    pub a: String,
    pub b: String,
    pub dir: PathBuf,
}

impl Pair {
    /// Underlay addresses of each side.
    pub const A4: &'static str = "192.0.2.1";
    pub const B4: &'static str = "192.0.2.2";
    pub const A6: &'static str = "2001:db8::1";
    pub const B6: &'static str = "2001:db8::2";

    pub fn new() -> Pair {
        let n = CASES.fetch_add(1, Ordering::Relaxed);
        let tag = format!("tep{}x{n}", std::process::id());
        let a = format!("{tag}a");
        let b = format!("{tag}b");
        let dir = std::env::temp_dir().join(&tag);
        let _ = std::fs::create_dir_all(&dir);
        let pair = Pair { a, b, dir };
        for ns in [&pair.a, &pair.b] {
            sh(&["ip", "netns", "add", ns], true);
            pair.exec(ns, &["ip", "link", "set", "lo", "up"], true);
            // No duplicate address detection: addresses work at once.
            pair.exec(
                ns,
                &["sysctl", "-qw", "net.ipv6.conf.all.accept_dad=0"],
                false,
            );
            pair.exec(
                ns,
                &["sysctl", "-qw", "net.ipv6.conf.default.accept_dad=0"],
                false,
            );
        }
        sh(
            &[
                "ip", "link", "add", "va", "netns", &pair.a, "type", "veth", "peer", "name", "vb",
                "netns", &pair.b,
            ],
            true,
        );
        for (ns, dev, v4, v6) in [
            (&pair.a, "va", Self::A4, Self::A6),
            (&pair.b, "vb", Self::B4, Self::B6),
        ] {
            pair.exec(
                ns,
                &["ip", "addr", "add", &format!("{v4}/24"), "dev", dev],
                true,
            );
            pair.exec(
                ns,
                &[
                    "ip",
                    "addr",
                    "add",
                    &format!("{v6}/64"),
                    "dev",
                    dev,
                    "nodad",
                ],
                true,
            );
            pair.exec(ns, &["ip", "link", "set", dev, "up"], true);
        }
        pair
    }

    /// Runs `args` inside namespace `ns`.
    pub fn exec(&self, ns: &str, args: &[&str], must: bool) -> Output {
        let mut full = vec!["ip", "netns", "exec", ns];
        full.extend_from_slice(args);
        sh(&full, must)
    }

    /// Starts `tep run` in `ns` with `config` (TOML text); waits until its
    /// control socket answers.
    pub fn daemon(&self, ns: &str, config: &str) -> Daemon {
        spawn_daemon(&self.dir, ns, config)
    }

    /// The control socket path for a daemon in `ns` (use in the config's
    /// host.control).
    pub fn socket(&self, ns: &str) -> String {
        self.dir.join(format!("{ns}.sock")).display().to_string()
    }
}

/// Namespaces a test works in: commands run inside one by name.
pub trait Lab {
    /// Runs `args` inside namespace `ns`.
    fn exec(&self, ns: &str, args: &[&str], must: bool) -> Output;
}

impl Lab for Pair {
    fn exec(&self, ns: &str, args: &[&str], must: bool) -> Output {
        Pair::exec(self, ns, args, must)
    }
}

/// Starts `tep run` in `ns` with `config` (TOML text, written into
/// `dir`); waits until its control socket `dir/<ns>.sock` answers.
pub fn spawn_daemon(dir: &std::path::Path, ns: &str, config: &str) -> Daemon {
    spawn_daemon_env(dir, ns, config, &[])
}

/// [`spawn_daemon`] with environment variables for the daemon.
pub fn spawn_daemon_env(
    dir: &std::path::Path,
    ns: &str,
    config: &str,
    env: &[(&str, &str)],
) -> Daemon {
    let path = dir.join(format!("{ns}.toml"));
    std::fs::write(&path, config).unwrap();
    let log = dir.join(format!("{ns}.log"));
    let child = Command::new("ip")
        .args(["netns", "exec", ns, TEP, "run", "-c"])
        .arg(&path)
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("start tep");
    let socket = dir.join(format!("{ns}.sock"));
    let mut d = Daemon {
        child: Some(child),
        socket,
        log,
        config: path,
    };
    let until = Instant::now() + Duration::from_secs(10);
    while d.control(&["show", "tunnels"]).is_err() {
        if Instant::now() > until || !d.alive() {
            panic!("tep did not come up:\n{}", d.log());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    d
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

impl Drop for Pair {
    fn drop(&mut self) {
        remove_namespaces(&[&self.a, &self.b]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A running `tep run`; SIGTERM on drop.
pub struct Daemon {
    child: Option<Child>,
    pub socket: PathBuf,
    pub log: PathBuf,
    pub config: PathBuf,
}

impl Daemon {
    /// `tep <args> --socket S`: stdout, or the error text.
    pub fn control(&self, args: &[&str]) -> Result<String, String> {
        let out = Command::new(TEP)
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
        dir: &std::path::Path,
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
