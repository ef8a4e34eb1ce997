//! Open vSwitch's userspace datapath as a test peer: an ovsdb-server and
//! an ovs-vswitchd of the test's own, run inside one of its namespaces,
//! with the database, sockets (the bridges' management sockets too), pid
//! files and logs in a directory of the test's own, so that nothing goes
//! to /var/run/openvswitch and several tests (or engineers) run side by
//! side. The package's service is not used. Both daemons are stopped by
//! their pid files on drop, also when starting them failed half-way.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The database schema the Debian package installs.
pub const SCHEMA: &str = "/usr/share/openvswitch/vswitch.ovsschema";

/// What a test that runs OVS lacks, if anything: a tool or the schema.
pub fn missing() -> Option<String> {
    let tools = [
        "ovsdb-tool",
        "ovsdb-server",
        "ovs-vswitchd",
        "ovs-vsctl",
        "ovs-appctl",
        "ovs-ofctl",
    ];
    if let Some(t) = tools.iter().find(|t| !crate::have(t)) {
        return Some(format!(
            "`{t}` is not installed (apt-get install openvswitch-switch)"
        ));
    }
    (!Path::new(SCHEMA).exists()).then(|| format!("no OVS schema at {SCHEMA}"))
}

/// ovsdb-server and ovs-vswitchd of one test, their files in `dir`.
#[derive(Debug)]
pub struct Ovs {
    pub dir: PathBuf,
}

impl Ovs {
    /// Creates `dir`, a fresh database in it, and starts both daemons in
    /// namespace `ns` (its full name); returns once ovs-vswitchd runs.
    pub fn start(dir: &Path, ns: &str) -> Ovs {
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let ovs = Ovs {
            dir: dir.to_path_buf(),
        };
        let d = ovs.dir.display().to_string();
        ovs.run(&["ovsdb-tool", "create", &format!("{d}/conf.db"), SCHEMA]);
        ovs.run(&[
            "ip",
            "netns",
            "exec",
            ns,
            "ovsdb-server",
            &format!("{d}/conf.db"),
            &format!("--remote=punix:{d}/db.sock"),
            &format!("--pidfile={d}/ovsdb-server.pid"),
            &format!("--unixctl={d}/ovsdb-server.ctl"),
            &format!("--log-file={d}/ovsdb-server.log"),
            "-vconsole:off",
            "--detach",
        ]);
        ovs.vsctl(&["--no-wait", "init"]);
        ovs.run(&[
            "ip",
            "netns",
            "exec",
            ns,
            "ovs-vswitchd",
            &format!("unix:{d}/db.sock"),
            &format!("--pidfile={d}/ovs-vswitchd.pid"),
            &format!("--unixctl={d}/ovs-vswitchd.ctl"),
            &format!("--log-file={d}/ovs-vswitchd.log"),
            "-vconsole:off",
            "--detach",
        ]);
        ovs
    }

    /// Runs an OVS command with every OVS directory set to ours; its
    /// standard output. Panics with its stderr and the log's end when it
    /// fails.
    pub fn run(&self, args: &[&str]) -> String {
        let mut cmd = Command::new(args[0]);
        cmd.args(&args[1..]).stdin(Stdio::null());
        for var in ["OVS_RUNDIR", "OVS_DBDIR", "OVS_LOGDIR", "OVS_SYSCONFDIR"] {
            cmd.env(var, &self.dir);
        }
        let out = cmd.output().unwrap_or_else(|e| panic!("{}: {e}", args[0]));
        assert!(
            out.status.success(),
            "`{}` failed: {}{}\n{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            self.log_tail(40)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `ovs-vsctl ARGS` against our database (10 s at most).
    pub fn vsctl(&self, args: &[&str]) -> String {
        let db = format!("--db=unix:{}/db.sock", self.dir.display());
        let mut full = vec!["ovs-vsctl", &db, "--timeout=10"];
        full.extend_from_slice(args);
        self.run(&full)
    }

    /// `ovs-appctl ARGS` to our ovs-vswitchd.
    pub fn appctl(&self, args: &[&str]) -> String {
        let ctl = format!("{}/ovs-vswitchd.ctl", self.dir.display());
        let mut full = vec!["ovs-appctl", "-t", &ctl];
        full.extend_from_slice(args);
        self.run(&full)
    }

    /// `ovs-ofctl ARGS`: a bridge name finds its management socket in our
    /// directory.
    pub fn ofctl(&self, args: &[&str]) -> String {
        let mut full = vec!["ovs-ofctl"];
        full.extend_from_slice(args);
        self.run(&full)
    }

    /// ovs-vswitchd's log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("ovs-vswitchd.log")).unwrap_or_default()
    }

    /// The last `lines` lines of ovs-vswitchd's log, headed, for failure
    /// messages.
    pub fn log_tail(&self, lines: usize) -> String {
        let log = self.log();
        let all: Vec<&str> = log.lines().collect();
        let from = all.len().saturating_sub(lines);
        format!("ovs-vswitchd.log (end):\n{}", all[from..].join("\n"))
    }

    /// The hit counters of `coverage/show` whose name contains `word`:
    /// (name, total). OVS lists only the counters that were hit.
    pub fn coverage(&self, word: &str) -> Vec<(String, u64)> {
        self.appctl(&["coverage/show"])
            .lines()
            .filter_map(|l| {
                let name = l.split_whitespace().next()?;
                let total = l.rsplit("total:").next()?.trim().parse().ok()?;
                name.contains(word).then(|| (name.to_string(), total))
            })
            .collect()
    }
}

impl Drop for Ovs {
    fn drop(&mut self) {
        // By pid file only: ours, nobody else's. Both told at once (each
        // takes a second or two to take its bridges down), then waited for.
        let pids: Vec<String> = ["ovs-vswitchd", "ovsdb-server"]
            .iter()
            .filter_map(|d| std::fs::read_to_string(self.dir.join(format!("{d}.pid"))).ok())
            .map(|p| p.trim().to_string())
            .filter(|p| p.parse::<u32>().is_ok())
            .collect();
        // A zombie is dead too: whoever adopted the detached daemon reaps it.
        let alive = |pid: &String| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
                s.rsplit(')')
                    .next()
                    .is_some_and(|r| !r.trim_start().starts_with('Z'))
            })
        };
        for pid in &pids {
            let _ = Command::new("kill").args(["-TERM", pid]).status();
        }
        let until = Instant::now() + Duration::from_secs(3);
        while pids.iter().any(alive) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
        for pid in pids.iter().filter(|p| alive(p)) {
            let _ = Command::new("kill").args(["-KILL", pid]).status();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
