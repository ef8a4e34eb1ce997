//! `host.user` / `gateway.user`, `.group`, `.capabilities`: the daemon
//! sets up everything that needs root and then becomes an unprivileged
//! user keeping CAP_NET_ADMIN, or nothing.
//!
//! Host mode sets up the devices, addresses, routes, sockets and the
//! control and metrics listeners first. What still works after the drop,
//! and why:
//! - the traffic, `tep show`, `tep trace` and the metrics: every
//!   descriptor was opened before (the control socket keeps its 0600 mode
//!   and root owner; root's `tep show` still connects, the dropped user
//!   never needs to);
//! - a reload: re-reading the config (it must be readable by the user),
//!   binding new tunnels' sockets (ports from 1024 up need no capability;
//!   GTP-U's 2152 and VXLAN's 4789 are above), their buffers past
//!   net.core.rmem_max (SO_RCVBUFFORCE: CAP_NET_ADMIN), routes through
//!   the TUN (rtnetlink: CAP_NET_ADMIN); with `capabilities = "none"` a
//!   reload that changes routes is refused with a message saying why;
//! - at exit the control socket's file is left when the user may not
//!   write its directory (/run is root's): the next start finds nothing
//!   answering on it and replaces it; systemd's RuntimeDirectory removes
//!   it at stop.
//!
//! Gateway mode loads and attaches the XDP programs (CAP_BPF,
//! CAP_PERFMON for the verifier, CAP_NET_ADMIN), opens the AF_XDP and raw
//! sockets (CAP_NET_RAW), binds PFCP and the listeners, then drops
//! before starting any thread. Afterwards:
//! - a reload updates the steering maps through the descriptors tep
//!   holds: since Linux 6.5 only creating maps and loading programs ask
//!   for a capability, and a map update, delete or lookup through a held
//!   descriptor asks none (tried on 6.18 with unprivileged_bpf_disabled=2:
//!   updates, deletes and lookups succeed with no capability, creating a
//!   map fails with EPERM); the workers restart on the sockets they had;
//! - the next-hop resolver looks routes up (no capability) and asks the
//!   kernel to resolve and keep probing next hops (RTM_NEWNEIGH:
//!   CAP_NET_ADMIN, kept by default); with `capabilities = "none"` those
//!   requests fail, and a next hop is learnt when the kernel resolves it
//!   for the first packet tep hands it (the slow path), and a changed MAC
//!   only when the kernel's entry expires;
//! - at exit the programs come off (BPF_LINK_DETACH on tep's own links
//!   needs no capability).

use tep_config::Capabilities;
use tep_sys::privilege::{self, Account, Capability};

/// Who the daemon becomes, resolved at start (before anything is set
/// up, so a misspelt user costs nothing).
#[derive(Clone, Debug)]
pub struct RunAs {
    account: Account,
    gid: u32,
    group: Option<String>,
    capabilities: Capabilities,
    section: &'static str,
}

/// `section.user` and `.group` looked up; `None` when no user is set.
/// Errors name the field: `host.user: no user "x"`.
fn resolve(
    section: &'static str,
    user: Option<&str>,
    group: Option<&str>,
    capabilities: Capabilities,
) -> Result<Option<RunAs>, String> {
    let Some(name) = user else {
        return Ok(None);
    };
    let account = privilege::user(name)
        .map_err(|e| format!("{section}.user: cannot look up {name:?}: {e}"))?
        .ok_or_else(|| format!("{section}.user: no user {name:?}"))?;
    let gid = match group {
        Some(g) => privilege::group(g)
            .map_err(|e| format!("{section}.group: cannot look up {g:?}: {e}"))?
            .ok_or_else(|| format!("{section}.group: no group {g:?}"))?,
        None => account.gid,
    };
    Ok(Some(RunAs {
        account,
        gid,
        group: group.map(str::to_string),
        capabilities,
        section,
    }))
}

/// [`resolve`] for the run mode's section.
pub fn of(s: &super::run::Section<'_>) -> Result<Option<RunAs>, String> {
    resolve(s.name, s.user, s.group, s.capabilities)
}

/// A reload's error, explained by [`RunAs::explain`] when the daemon
/// dropped to a user.
pub fn explain(run_as: Option<&RunAs>, error: String) -> String {
    match run_as {
        Some(r) => r.explain(error),
        None => error,
    }
}

impl RunAs {
    /// Becomes the user. Call on the main thread before starting the
    /// threads that should keep CAP_NET_ADMIN (they inherit it).
    pub fn apply(&self) -> Result<(), String> {
        let keep: &[Capability] = match self.capabilities {
            Capabilities::NetAdmin => &[Capability::NetAdmin],
            Capabilities::None => &[],
        };
        privilege::drop_to(self.account.uid, self.gid, keep).map_err(|e| {
            let hint = if e.kind() == std::io::ErrorKind::PermissionDenied {
                " (dropping to a user needs root: CAP_SETUID, CAP_SETGID and CAP_SETPCAP)"
            } else {
                ""
            };
            format!(
                "{}.user: cannot become {:?}: {e}{hint}",
                self.section, self.account.name
            )
        })?;
        tracing::info!(
            user = self.account.name.as_str(),
            uid = self.account.uid,
            gid = self.gid,
            group = self.group.as_deref().unwrap_or("(the user's)"),
            capabilities = self.capabilities.name(),
            "privileges dropped"
        );
        Ok(())
    }

    /// A reload's error with what the drop has to do with it, when the
    /// kernel refused for want of a privilege (EPERM, EACCES).
    pub fn explain(&self, error: String) -> String {
        let refused = error.contains("(os error 1)") || error.contains("(os error 13)");
        if !refused {
            return error;
        }
        let who = format!(
            "tep runs as user {:?} since start ({}.user)",
            self.account.name, self.section
        );
        if error.contains("cannot read the config") {
            return format!("{error} ({who}: the config must be readable by that user)");
        }
        match self.capabilities {
            Capabilities::None => format!(
                "{error} ({who} with no capabilities ({}.capabilities = \"none\"): this needs CAP_NET_ADMIN; restart tep to apply it)",
                self.section
            ),
            Capabilities::NetAdmin => format!(
                "{error} ({who} keeping only CAP_NET_ADMIN: restart tep to apply it)"
            ),
        }
    }

    /// Warns at start when the user cannot read the config that reloads
    /// will read.
    pub fn check_readable(&self, path: &std::path::Path) {
        if let Err(e) = std::fs::File::open(path) {
            tracing::warn!(
                config = %path.display(),
                user = self.account.name.as_str(),
                "reloads will fail: {e}"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tep_config::{Config, HostConfig};

    fn host(text: &str) -> HostConfig {
        Config::parse(&format!("[host]\n{text}\n")).unwrap().host
    }

    fn of_host(h: &HostConfig) -> Result<Option<RunAs>, String> {
        resolve(
            "host",
            h.user.as_deref(),
            h.group.as_deref(),
            h.capabilities,
        )
    }

    #[test]
    fn unknown_users_and_groups_name_the_field() {
        let e = of_host(&host("user = \"no-such-user-tep\"")).unwrap_err();
        assert_eq!(e, "host.user: no user \"no-such-user-tep\"");
        let e = of_host(&host("user = \"root\"\ngroup = \"no-such-group-tep\"")).unwrap_err();
        assert_eq!(e, "host.group: no group \"no-such-group-tep\"");
        assert!(of_host(&host("")).unwrap().is_none());
        let d = of_host(&host("user = \"root\"")).unwrap().unwrap();
        assert_eq!((d.account.uid, d.gid), (0, 0));
    }

    #[test]
    fn refusals_say_what_the_drop_prevents() {
        let d = of_host(&host("user = \"root\"\ncapabilities = \"none\""))
            .unwrap()
            .unwrap();
        let e = d.explain(
            "host.routes: cannot route 10.7.0.0/16 through t: Operation not permitted (os error 1)"
                .into(),
        );
        assert!(e.contains("host.capabilities = \"none\""), "{e}");
        assert!(e.contains("needs CAP_NET_ADMIN"), "{e}");
        let e = d.explain(
            "/etc/tep.toml: cannot read the config: Permission denied (os error 13)".into(),
        );
        assert!(e.contains("readable by that user"), "{e}");
        // Other errors are left as they are.
        let plain = "tunnel[0] \"g\".vni: unknown field".to_string();
        assert_eq!(d.explain(plain.clone()), plain);
    }
}
