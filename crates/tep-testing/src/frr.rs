//! FRR (zebra + bgpd) as a BGP EVPN peer for tests: one pair of daemons
//! per network namespace, iBGP in AS 65000 with `advertise-all-vni`, and
//! the kernel VXLAN VTEPs zebra learns its VNIs from ([`kernel_vtep`]).
//!
//! The package's service is not used. Each [`Frr`] keeps its configs, pid
//! files, sockets and logs in a directory of its own (owned by `frr:frr`:
//! the daemons drop to that user), so that several tests, or engineers,
//! run side by side; `-N` is not used because it puts files under
//! /etc/frr and /var/run/frr. Daemons are stopped by their pid files on
//! drop, also when starting failed half-way, and what libfrr leaves in
//! `/var/tmp/frr/<daemon>.<n>/` after an unclean exit is removed (`<n>` is
//! the process id before `-d` forks, not the daemon's: the directory is
//! found by the descriptor the daemon holds open on it).
//!
//! What zebra knows is read through vtysh's JSON. The shapes, as FRR 8.4
//! writes them:
//! - `show bgp l2vpn evpn summary json`: `{"peers": {"<ip>": {"state":
//!   "Established", ..}}, ..}`.
//! - `show evpn vni <vni> json`: `{"vni": 100, "vxlanInterface": "vx100",
//!   "vtepIp": "<local>", "numRemoteVteps": ["<ip>", ..], ..}`; the list
//!   really is under `numRemoteVteps` in 8.4 (`show evpn vni json` calls it
//!   `remoteVteps`), and is absent when there is no remote VTEP. A VNI zebra
//!   does not know gives `{}`.
//! - `show evpn mac vni <vni> json`: `{"numMacs": 3, "macs": {"<mac>":
//!   {"type": "local", "intf": "e100", ..} | {"type": "remote",
//!   "remoteVtep": "<ip>", ..}}}`; `{}` for an unknown VNI.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::netns::cmd;

/// Where the Debian package puts the daemons.
pub const DAEMONS: &str = "/usr/lib/frr";

/// The AS of every lab router (iBGP full mesh).
pub const AS: u32 = 65000;

/// How long one vtysh command may take.
const VTYSH_LIMIT: &str = "10";

/// How long a daemon may take to start or to stop.
const DAEMON_LIMIT: Duration = Duration::from_secs(15);

/// What a test that runs FRR lacks, if anything.
pub fn missing() -> Option<String> {
    for d in ["zebra", "bgpd"] {
        if !Path::new(DAEMONS).join(d).is_file() {
            return Some(format!(
                "{DAEMONS}/{d} is not installed (apt-get install frr)"
            ));
        }
    }
    if !crate::have("vtysh") {
        return Some("`vtysh` is not installed (apt-get install frr)".into());
    }
    if crate::netns::id("-u", "frr").is_none() {
        return Some("there is no user `frr` (apt-get install frr makes it)".into());
    }
    None
}

/// The two daemons of a lab router.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Daemon {
    Zebra,
    Bgpd,
}

impl Daemon {
    fn index(self) -> usize {
        self as usize
    }

    fn name(self) -> &'static str {
        match self {
            Daemon::Zebra => "zebra",
            Daemon::Bgpd => "bgpd",
        }
    }
}

/// zebra and bgpd of one namespace, with their files in [`Frr::dir`];
/// both stopped, and the directory removed, on drop. Dropping it after
/// its namespace is removed is fine too: removing a namespace kills what
/// runs in it, and the drop still removes what the daemons left.
#[derive(Debug)]
pub struct Frr {
    ns: String,
    dir: PathBuf,
    /// Each daemon's `/var/tmp/frr/` directory, by [`Daemon::index`].
    run_dirs: [Option<PathBuf>; 2],
}

impl Frr {
    /// Writes zebra.conf and bgpd.conf (router `router_id`, an iBGP session
    /// to each of `neighbours`, EVPN for every VNI zebra finds) into a new
    /// directory and starts zebra, then bgpd, in namespace `ns` (its full
    /// name). Returns once both have made their vty sockets; the sessions
    /// come up later ([`Self::wait_established`]).
    pub fn start(ns: &str, router_id: Ipv4Addr, neighbours: &[Ipv4Addr]) -> Result<Frr, String> {
        let dir = std::env::temp_dir().join(format!("frr-{ns}"));
        // Not create_dir_all: a second Frr in the namespace is refused,
        // not given the first one's files.
        std::fs::create_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        // From here on a failure drops `frr`, which stops what started.
        let mut frr = Frr {
            ns: ns.to_string(),
            dir,
            run_dirs: [None, None],
        };
        // What zebra learns of VNIs and MACs, from the kernel and from
        // bgpd, in its log: what a failing test needs to say why.
        frr.write_file("zebra.conf", &format!("hostname {ns}\ndebug zebra vxlan\n"))?;
        frr.write_file("bgpd.conf", &bgpd_conf(ns, router_id, neighbours))?;
        frr.give_to_frr()?;
        frr.launch(Daemon::Zebra)?;
        frr.launch(Daemon::Bgpd)?;
        Ok(frr)
    }

    /// The namespace the daemons run in.
    pub fn ns(&self) -> &str {
        &self.ns
    }

    /// The directory of configs, pid files, sockets and logs.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `vtysh -c CMD` against this router's daemons: its output, or an
    /// error with its words (an unknown command fails).
    pub fn vtysh(&self, command: &str) -> Result<String, String> {
        let out = Command::new("timeout")
            .arg(VTYSH_LIMIT)
            .arg("vtysh")
            .arg("--vty_socket")
            .arg(&self.dir)
            .args(["-c", command])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("vtysh: {e}"))?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if out.status.success() {
            return Ok(text);
        }
        Err(format!(
            "{}: vtysh -c '{command}' failed ({}): {}{}",
            self.ns,
            out.status,
            text.trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }

    /// `vtysh -c 'CMD json'`, parsed.
    pub fn vtysh_json(&self, command: &str) -> Result<Value, String> {
        let text = self.vtysh(&format!("{command} json"))?;
        serde_json::from_str(&text)
            .map_err(|e| format!("{}: '{command} json' gave no JSON ({e}): {text}", self.ns))
    }

    /// How many EVPN sessions are Established.
    pub fn established(&self) -> Result<usize, String> {
        established(&self.vtysh_json("show bgp l2vpn evpn summary")?)
    }

    /// Waits until exactly `peers` EVPN sessions are Established.
    pub fn wait_established(&self, peers: usize, timeout: Duration) -> Result<(), String> {
        let what = format!("{peers} EVPN sessions Established");
        self.wait_for(&what, timeout, |f| match f.established()? {
            n if n == peers => Ok(()),
            n => Err(format!("{n} Established")),
        })
    }

    /// The remote MACs of `vni` as zebra knows them (type-2 routes it
    /// installed): (MAC, VTEP address), sorted. Empty for a VNI zebra does
    /// not know.
    pub fn evpn_macs(&self, vni: u32) -> Result<Vec<(String, String)>, String> {
        remote_macs(&self.vtysh_json(&format!("show evpn mac vni {vni}"))?)
    }

    /// The local MACs of `vni` that zebra advertises (learned or static
    /// on a bridge port that is not the vxlan device): (MAC, port), sorted.
    pub fn evpn_local_macs(&self, vni: u32) -> Result<Vec<(String, String)>, String> {
        local_macs(&self.vtysh_json(&format!("show evpn mac vni {vni}"))?)
    }

    /// The remote VTEPs of `vni` (type-3 routes), sorted; an error when
    /// zebra does not know the VNI (no bridge with its vxlan device up, or
    /// bgpd has not asked for EVPN yet).
    pub fn evpn_vteps(&self, vni: u32) -> Result<Vec<String>, String> {
        remote_vteps(&self.vtysh_json(&format!("show evpn vni {vni}"))?)
            .ok_or_else(|| format!("{}: zebra does not know VNI {vni}", self.ns))
    }

    /// Polls `probe` (every 100 ms) until it gives Ok, for at most
    /// `timeout`; the error names `what`, the probe's last error (say
    /// there what was seen instead) and the logs.
    pub fn wait_for<T>(
        &self,
        what: &str,
        timeout: Duration,
        mut probe: impl FnMut(&Frr) -> Result<T, String>,
    ) -> Result<T, String> {
        let until = Instant::now() + timeout;
        loop {
            let last = match probe(self) {
                Ok(v) => return Ok(v),
                Err(e) => e,
            };
            if Instant::now() > until {
                return Err(format!(
                    "{}: waited {timeout:?} for {what}; last: {last}\n{}",
                    self.ns,
                    self.log()
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Stops bgpd only (SIGTERM: it closes its sessions with a Cease, as
    /// a router shut down does), as when a VTEP loses BGP; zebra keeps
    /// running and withdraws what bgpd installed.
    pub fn stop_bgpd(&mut self) -> Result<(), String> {
        self.stop(Daemon::Bgpd, "-TERM")
    }

    /// Kills bgpd (SIGKILL: no Cease; the peers see the TCP connection
    /// close).
    pub fn kill_bgpd(&mut self) -> Result<(), String> {
        self.stop(Daemon::Bgpd, "-KILL")
    }

    /// Starts bgpd again after [`Self::stop_bgpd`].
    pub fn start_bgpd(&mut self) -> Result<(), String> {
        if self.pid(Daemon::Bgpd).is_some() {
            return Err(format!("{}: bgpd runs already", self.ns));
        }
        self.launch(Daemon::Bgpd)
    }

    /// The end of zebra's and bgpd's logs (and of what they wrote before
    /// their logs opened), for failure messages.
    pub fn log(&self) -> String {
        let mut out = String::new();
        for file in ["zebra.log", "bgpd.log", "zebra.out", "bgpd.out"] {
            let text = std::fs::read_to_string(self.dir.join(file)).unwrap_or_default();
            if text.is_empty() {
                continue;
            }
            let lines: Vec<&str> = text.lines().collect();
            let from = lines.len().saturating_sub(80);
            out += &format!("== {} {file} (end):\n", self.ns);
            for l in &lines[from..] {
                out += l;
                out.push('\n');
            }
        }
        out
    }

    fn write_file(&self, name: &str, text: &str) -> Result<(), String> {
        let path = self.dir.join(name);
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The directory and everything in it to `frr:frr`: the daemons drop
    /// to that user before they read their configs and make their sockets
    /// (and refuse to run as root: root is not in the vty group).
    fn give_to_frr(&self) -> Result<(), String> {
        let uid = crate::netns::id("-u", "frr").ok_or("no user frr")?;
        let gid = crate::netns::id("-g", "frr").ok_or("no group of user frr")?;
        let entries = std::fs::read_dir(&self.dir).map_err(|e| e.to_string())?;
        for path in entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .chain([self.dir.clone()])
        {
            std::os::unix::fs::chown(&path, Some(uid), Some(gid))
                .map_err(|e| format!("chown {}: {e}", path.display()))?;
        }
        Ok(())
    }

    /// Starts `daemon` (`-d`: it forks and its launcher exits) and waits
    /// until its pid file names a live process and its vty socket exists.
    fn launch(&mut self, daemon: Daemon) -> Result<(), String> {
        let name = daemon.name();
        let vty = self.dir.join(format!("{name}.vty"));
        // Stale ones from an earlier run of the daemon would look ready.
        let _ = std::fs::remove_file(self.dir.join(format!("{name}.pid")));
        let _ = std::fs::remove_file(&vty);
        let until = Instant::now() + DAEMON_LIMIT;
        self.run_launcher(daemon, until)?;
        let pid = loop {
            match self.pid(daemon) {
                Some(pid) if vty.exists() => break pid,
                _ if Instant::now() > until => {
                    return Err(self.failed(&format!("{name} did not come up")));
                }
                _ => std::thread::sleep(Duration::from_millis(20)),
            }
        };
        self.run_dirs[daemon.index()] = run_dir(pid);
        Ok(())
    }

    /// Runs `ip netns exec NS DAEMON -d ...` until it exits (by `until`);
    /// what it writes goes to `<daemon>.out`.
    fn run_launcher(&self, daemon: Daemon, until: Instant) -> Result<(), String> {
        let name = daemon.name();
        let file = |ext: &str| self.dir.join(format!("{name}.{ext}"));
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(file("out"))
            .map_err(|e| format!("{}: {e}", file("out").display()))?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        let mut launcher = Command::new("ip")
            .args(["netns", "exec", &self.ns])
            .arg(Path::new(DAEMONS).join(name))
            .args(["-d", "-P", "0", "-f"])
            .arg(file("conf"))
            .arg("-i")
            .arg(file("pid"))
            .arg("-z")
            .arg(self.dir.join("zserv.api"))
            .arg("--vty_socket")
            .arg(&self.dir)
            .arg("--log")
            .arg(format!("file:{}", file("log").display()))
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("{name}: {e}"))?;
        loop {
            match launcher.try_wait().map_err(|e| e.to_string())? {
                Some(s) if s.success() => return Ok(()),
                Some(s) => return Err(self.failed(&format!("{name} did not start ({s})"))),
                None if Instant::now() > until => {
                    let _ = launcher.kill();
                    let _ = launcher.wait();
                    return Err(self.failed(&format!("{name} hangs starting")));
                }
                None => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }

    /// `what` went wrong in our namespace, with the logs.
    fn failed(&self, what: &str) -> String {
        format!("{}: {what}\n{}", self.ns, self.log())
    }

    /// The process id in `daemon`'s pid file, if the file exists.
    fn pid_file(&self, daemon: Daemon) -> Option<u32> {
        std::fs::read_to_string(self.dir.join(format!("{}.pid", daemon.name())))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// `daemon`'s process id if it runs: the pid file's, and only when
    /// that process is the daemon started from our directory (a pid is
    /// reused once its process is gone).
    fn pid(&self, daemon: Daemon) -> Option<u32> {
        let pid = self.pid_file(daemon)?;
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
        let exe = Path::new(DAEMONS).join(daemon.name());
        let conf = self.dir.join(format!("{}.conf", daemon.name()));
        let ours = args.first() == Some(&exe.as_os_str().as_encoded_bytes())
            && args.contains(&conf.as_os_str().as_encoded_bytes());
        (ours && alive(pid)).then_some(pid)
    }

    /// Sends `signal` to `daemon`, SIGKILL if it still runs after
    /// [`DAEMON_LIMIT`], and removes what it left behind.
    fn stop(&mut self, daemon: Daemon, signal: &str) -> Result<(), String> {
        let name = daemon.name();
        let Some(pid) = self.pid_file(daemon) else {
            return Err(format!("{}: {name} was not started", self.ns));
        };
        let mut result = Ok(());
        if self.pid(daemon).is_some() {
            let _ = Command::new("kill")
                .args([signal, &pid.to_string()])
                .status();
            if !wait_gone(pid, DAEMON_LIMIT) {
                let _ = Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
                wait_gone(pid, Duration::from_secs(2));
                result = Err(format!("{}: {name} ignored {signal}; killed", self.ns));
            }
        }
        // libfrr removes its run directory only on a clean exit.
        if let Some(d) = self.run_dirs[daemon.index()].take().filter(|_| !alive(pid)) {
            let _ = std::fs::remove_dir_all(d);
        }
        let _ = std::fs::remove_file(self.dir.join(format!("{name}.pid")));
        result
    }
}

impl Drop for Frr {
    fn drop(&mut self) {
        for daemon in [Daemon::Bgpd, Daemon::Zebra] {
            let _ = self.stop(daemon, "-TERM");
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The directory under /var/tmp/frr/ that process `pid` holds open:
/// libfrr's run directory of the daemon.
fn run_dir(pid: u32) -> Option<PathBuf> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .ok()?
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .find(|p| p.starts_with("/var/tmp/frr/") && p.is_dir())
}

/// Whether process `pid` exists and is not a zombie (whoever adopted the
/// detached daemon reaps it).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit(')')
            .next()
            .is_some_and(|r| !r.trim_start().starts_with('Z'))
    })
}

/// Waits (at most `limit`) until `pid` has gone; whether it did.
fn wait_gone(pid: u32, limit: Duration) -> bool {
    let until = Instant::now() + limit;
    while alive(pid) {
        if Instant::now() > until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// bgpd.conf of a lab router. Timers are short so that a test sees a lost
/// session within seconds: keepalive 3 s, hold 9 s, a retry of the
/// connection every second, updates sent at once.
fn bgpd_conf(ns: &str, router_id: Ipv4Addr, neighbours: &[Ipv4Addr]) -> String {
    let mut c = format!(
        "hostname {ns}\n\
         router bgp {AS}\n \
         bgp router-id {router_id}\n \
         bgp log-neighbor-changes\n \
         no bgp default ipv4-unicast\n \
         timers bgp 3 9\n \
         neighbor fabric peer-group\n \
         neighbor fabric remote-as {AS}\n \
         neighbor fabric timers connect 1\n \
         neighbor fabric advertisement-interval 0\n"
    );
    for n in neighbours {
        c += &format!(" neighbor {n} peer-group fabric\n");
    }
    c += " address-family l2vpn evpn\n  \
          neighbor fabric activate\n  \
          advertise-all-vni\n \
          exit-address-family\n";
    c
}

/// The Established sessions in `show bgp l2vpn evpn summary json`.
fn established(summary: &Value) -> Result<usize, String> {
    let peers = summary["peers"]
        .as_object()
        .ok_or_else(|| format!("no peers in the EVPN summary: {summary}"))?;
    Ok(peers
        .values()
        .filter(|p| p["state"] == "Established")
        .count())
}

/// The MACs of `show evpn mac vni VNI json` of `kind` ("local" or
/// "remote") with the field `with` (the port or the VTEP), sorted.
fn macs(table: &Value, kind: &str, with: &str) -> Result<Vec<(String, String)>, String> {
    let Some(macs) = table.get("macs") else {
        return Ok(Vec::new());
    };
    let macs = macs
        .as_object()
        .ok_or_else(|| format!("macs is no object: {table}"))?;
    let mut out = Vec::new();
    for (mac, entry) in macs.iter().filter(|(_, e)| e["type"] == kind) {
        let at = entry[with]
            .as_str()
            .ok_or_else(|| format!("{kind} MAC {mac} without {with}: {entry}"))?;
        out.push((mac.clone(), at.to_string()));
    }
    out.sort();
    Ok(out)
}

fn remote_macs(table: &Value) -> Result<Vec<(String, String)>, String> {
    macs(table, "remote", "remoteVtep")
}

fn local_macs(table: &Value) -> Result<Vec<(String, String)>, String> {
    macs(table, "local", "intf")
}

/// The remote VTEPs in `show evpn vni VNI json`, sorted; None for a VNI
/// zebra does not know (`{}`).
fn remote_vteps(vni: &Value) -> Option<Vec<String>> {
    vni.get("vni")?;
    // FRR 8.4 puts the list under "numRemoteVteps"; "remoteVteps" is the
    // name the list of all VNIs uses, and a later FRR may use here.
    let list = ["remoteVteps", "numRemoteVteps"]
        .iter()
        .find_map(|k| vni[k].as_array());
    let mut out: Vec<String> = list
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    out.sort();
    Some(out)
}

/// A kernel VTEP in namespace `ns` (its full name), as zebra wants it:
/// bridge `br<vni>` with vxlan `vx<vni>` (`id vni`, `local`, `dstport`,
/// `nolearning`: zebra fills the FDB from BGP) and `port_dev` (the
/// workload's veth end, already in `ns`) as ports, all up. Frames crossing
/// the bridge are not handed to iptables (a new namespace says they are,
/// where br_netfilter is loaded). The kernel gives the vxlan device an
/// MTU of 1450 over an IPv4 underlay of 1500: the workload's MTU is the
/// caller's to match.
pub fn kernel_vtep(
    ns: &str,
    vni: u32,
    local: IpAddr,
    dstport: u16,
    port_dev: &str,
) -> Result<(), String> {
    for table in ["iptables", "ip6tables", "arptables"] {
        let key = format!("net.bridge.bridge-nf-call-{table}");
        let path = format!("/proc/sys/{}", key.replace('.', "/"));
        if cmd(&["ip", "netns", "exec", ns, "test", "-e", &path]).is_ok() {
            cmd(&[
                "ip",
                "netns",
                "exec",
                ns,
                "sysctl",
                "-qw",
                &format!("{key}=0"),
            ])?;
        }
    }
    let (br, vx) = (format!("br{vni}"), format!("vx{vni}"));
    let (id, local, port) = (vni.to_string(), local.to_string(), dstport.to_string());
    let ip = |args: &[&str]| {
        let mut all = vec!["ip", "-n", ns];
        all.extend_from_slice(args);
        cmd(&all).map(drop)
    };
    ip(&["link", "add", &br, "type", "bridge"])?;
    ip(&[
        "link",
        "add",
        &vx,
        "type",
        "vxlan",
        "id",
        &id,
        "local",
        &local,
        "dstport",
        &port,
        "nolearning",
    ])?;
    ip(&["link", "set", &vx, "master", &br, "up"])?;
    ip(&["link", "set", port_dev, "master", &br, "up"])?;
    ip(&["link", "set", &br, "up"])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_summary_counts_only_established_peers() {
        let s = json!({"peers": {
            "192.0.2.2": {"state": "Established", "pfxRcd": 2},
            "192.0.2.3": {"state": "Active"},
        }});
        assert_eq!(established(&s), Ok(1));
        assert!(established(&json!({})).is_err());
    }

    #[test]
    fn remote_and_local_macs_are_told_apart() {
        let t = json!({"numMacs": 3, "macs": {
            "02:00:00:00:00:03": {"type": "remote", "remoteVtep": "192.0.2.3"},
            "02:00:00:00:00:01": {"type": "local", "intf": "e100"},
            "02:00:00:00:00:02": {"type": "remote", "remoteVtep": "192.0.2.2"},
        }});
        let remote = remote_macs(&t).unwrap();
        assert_eq!(
            remote,
            [
                ("02:00:00:00:00:02".to_string(), "192.0.2.2".to_string()),
                ("02:00:00:00:00:03".into(), "192.0.2.3".into())
            ]
        );
        let local = local_macs(&t).unwrap();
        assert_eq!(local, [("02:00:00:00:00:01".into(), "e100".into())]);
        assert_eq!(remote_macs(&json!({})), Ok(vec![]));
        let odd = json!({"macs": {"02:00:00:00:00:09": {"type": "remote"}}});
        assert!(remote_macs(&odd).is_err());
    }

    #[test]
    fn remote_vteps_are_read_under_either_name() {
        let v84 = json!({"vni": 100, "numRemoteVteps": ["192.0.2.3", "192.0.2.2"]});
        assert_eq!(
            remote_vteps(&v84),
            Some(vec!["192.0.2.2".into(), "192.0.2.3".into()])
        );
        let later = json!({"vni": 100, "remoteVteps": ["192.0.2.2"]});
        assert_eq!(remote_vteps(&later), Some(vec!["192.0.2.2".into()]));
        assert_eq!(remote_vteps(&json!({"vni": 100})), Some(vec![]));
        assert_eq!(remote_vteps(&json!({})), None);
    }

    #[test]
    fn bgpd_conf_peers_with_every_neighbour_for_evpn() {
        let c = bgpd_conf(
            "h1",
            Ipv4Addr::new(192, 0, 2, 1),
            &[Ipv4Addr::new(192, 0, 2, 2), Ipv4Addr::new(192, 0, 2, 3)],
        );
        for line in [
            "router bgp 65000",
            " bgp router-id 192.0.2.1",
            " no bgp default ipv4-unicast",
            " timers bgp 3 9",
            " neighbor 192.0.2.2 peer-group fabric",
            " neighbor 192.0.2.3 peer-group fabric",
            "  neighbor fabric activate",
            "  advertise-all-vni",
        ] {
            assert!(c.lines().any(|l| l == line), "no `{line}` in:\n{c}");
        }
    }
}
