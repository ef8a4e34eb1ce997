//! The hosts the seed benches build on this machine: network namespaces,
//! the commands that set them up, and tep daemons running in them. All of
//! it goes away when the [`Lab`] is dropped, also when a bench fails
//! half-way.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;
use tep_sys::{Signal, Signals};

/// The labs that exist, for [`clean_up_on_signals`]: (namespaces, dir).
static LIVE: Mutex<Vec<(Vec<String>, PathBuf)>> = Mutex::new(Vec::new());

/// Makes SIGINT and SIGTERM remove every lab (their processes, namespaces
/// and files) before the process exits, as Drop would have: a bench
/// stopped with Ctrl-C leaves nothing behind. Call it before any thread
/// starts (the signals are blocked in every thread and read by one).
pub fn clean_up_on_signals() -> Result<(), String> {
    let signals = Signals::new(&[Signal::Interrupt, Signal::Terminate])
        .map_err(|e| format!("signals: {e}"))?;
    std::thread::spawn(move || loop {
        match signals.read() {
            Ok(Some(_)) => {
                eprintln!(" interrupted: removing the namespaces");
                let live = std::mem::take(&mut *LIVE.lock().unwrap_or_else(|e| e.into_inner()));
                for (names, dir) in live {
                    remove(&names, &dir);
                }
                std::process::exit(130);
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(_) => return,
        }
    });
    Ok(())
}

/// Kills what runs in the namespaces, deletes them and the directory.
fn remove(namespaces: &[String], dir: &Path) {
    for ns in namespaces {
        // Whatever still runs inside would keep the namespace alive.
        if let Ok(out) = Command::new("ip").args(["netns", "pids", ns]).output() {
            for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                let _ = Command::new("kill").args(["-KILL", pid]).status();
            }
        }
        let _ = Command::new("ip").args(["netns", "del", ns]).status();
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// Namespaces `<tag><name>` and a directory for configs and logs.
pub struct Lab {
    tag: String,
    names: Vec<&'static str>,
    pub dir: PathBuf,
}

impl Lab {
    /// Creates one namespace per name (loopback up, no duplicate address
    /// detection), tagged with `prefix` and this process's id so that
    /// several runs, or the tests, may go side by side.
    pub fn new(prefix: &str, names: &[&'static str]) -> Result<Lab, String> {
        if !tep_sys::netns::is_root() {
            return Err("the seed benches build network namespaces: run them as root".into());
        }
        let tag = format!("{prefix}{}", std::process::id());
        let dir = std::env::temp_dir().join(&tag);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut lab = Lab {
            tag,
            names: Vec::new(),
            dir,
        };
        let all: Vec<String> = names.iter().map(|n| lab.ns(n)).collect();
        LIVE.lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((all, lab.dir.clone()));
        for &name in names {
            let ns = lab.ns(name);
            sh(&["ip", "netns", "add", &ns])?;
            lab.names.push(name);
            sh(&["ip", "-n", &ns, "link", "set", "lo", "up"])?;
            sh(&[
                "ip",
                "netns",
                "exec",
                &ns,
                "sysctl",
                "-qw",
                "net.ipv6.conf.all.accept_dad=0",
                "net.ipv6.conf.default.accept_dad=0",
            ])?;
        }
        Ok(lab)
    }

    /// The full name of namespace `name`.
    pub fn ns(&self, name: &str) -> String {
        format!("{}{name}", self.tag)
    }

    /// Runs `args` inside namespace `name`.
    pub fn run(&self, name: &str, args: &[&str]) -> Result<String, String> {
        let ns = self.ns(name);
        let mut all = vec!["ip", "netns", "exec", &ns];
        all.extend_from_slice(args);
        sh_out(&all)
    }

    /// Starts `tep run -c <dir>/<file>.toml` in namespace `name`, on CPU
    /// `cpu` if given; returns once the control socket `socket` exists
    /// (the config names it).
    pub fn start_tep(
        &self,
        name: &str,
        file: &str,
        config: &str,
        cpu: Option<usize>,
    ) -> Result<Daemon, String> {
        let path = self.dir.join(format!("{file}.toml"));
        std::fs::write(&path, config).map_err(|e| format!("{}: {e}", path.display()))?;
        let socket = self.dir.join(format!("{file}.sock"));
        let _ = std::fs::remove_file(&socket);
        let log_path = self.dir.join(format!("{file}.log"));
        let log = std::fs::File::create(&log_path).map_err(|e| e.to_string())?;
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.ns(name)]);
        if let Some(c) = cpu {
            cmd.args(["taskset", "-c", &c.to_string()]);
        }
        let child = cmd
            .arg(&exe)
            .args(["run", "-c"])
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("tep run: {e}"))?;
        let mut daemon = Daemon(child);
        for _ in 0..200 {
            if socket.exists() {
                return Ok(daemon);
            }
            if let Ok(Some(_)) = daemon.0.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        let log = std::fs::read_to_string(&log_path).unwrap_or_default();
        Err(format!("tep ({file}) did not start:\n{log}"))
    }

    /// The control socket path of the daemon started from `file`.
    pub fn socket(&self, file: &str) -> String {
        self.dir.join(format!("{file}.sock")).display().to_string()
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        LIVE.lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(_, d)| d != &self.dir);
        let names: Vec<String> = self.names.iter().map(|n| self.ns(n)).collect();
        remove(&names, &self.dir);
    }
}

/// A tep daemon, stopped (SIGTERM, then waited for) on drop.
pub struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = tep_sys::signal::send(self.0.id(), tep_sys::Signal::Terminate);
        let _ = self.0.wait();
    }
}

/// Runs a command; its standard output, or an error with its standard
/// error when it fails.
pub fn sh_out(args: &[&str]) -> Result<String, String> {
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

/// Runs a command for its effect.
pub fn sh(args: &[&str]) -> Result<(), String> {
    sh_out(args).map(|_| ())
}

/// Whether `tool` is on the PATH.
pub fn have(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
}
