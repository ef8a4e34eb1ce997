//! Dropping root: the daemon, once its devices, sockets and routes are
//! set up, becomes an unprivileged user that keeps only the capabilities
//! it still needs (CAP_NET_ADMIN for reloads), or none.
//!
//! A handful of calls (getpwnam_r, setgroups, setresgid, setresuid,
//! prctl, capset) written here against libc rather than through the
//! `caps` crate: the order of the calls is the whole point and it is
//! short, and `caps` would add a dependency (and `thiserror`) for two of
//! them.
//!
//! Credentials are per thread on Linux. glibc's set*id wrappers change
//! every thread of the process, but capabilities are set by the calling
//! thread alone: so [`drop_to`] runs before the process starts any thread
//! that should keep a capability (threads started after inherit the
//! caller's), and threads started before it lose them all.

use crate::sys::cvt;
use std::ffi::CString;
use std::io;

/// A capability kept after [`drop_to`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Capability {
    /// CAP_NET_ADMIN (12): interfaces, routes, SO_RCVBUFFORCE.
    NetAdmin,
}

impl Capability {
    /// The kernel's number for it (linux/capability.h).
    pub fn bit(self) -> u32 {
        match self {
            Capability::NetAdmin => 12,
        }
    }
}

/// A user to run as: its ids from the password database.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Account {
    pub name: String,
    pub uid: u32,
    /// Its primary group.
    pub gid: u32,
}

/// Looks `name` up in the password database (getpwnam_r: /etc/passwd,
/// or whatever NSS is set up with). `Ok(None)`: no such user.
pub fn user(name: &str) -> io::Result<Option<Account>> {
    by_name(name, libc::getpwnam_r, |pw| Account {
        name: name.to_string(),
        uid: pw.pw_uid,
        gid: pw.pw_gid,
    })
}

/// Looks group `name` up (getgrnam_r). `Ok(None)`: no such group.
pub fn group(name: &str) -> io::Result<Option<u32>> {
    by_name(name, libc::getgrnam_r, |gr| gr.gr_gid)
}

/// The getpwnam_r/getgrnam_r dance: a buffer grown on ERANGE (up to
/// 1 MiB, so a broken NSS module cannot make us allocate without end),
/// and `read` applied while the strings the record points to still live.
fn by_name<T, R>(
    name: &str,
    lookup: unsafe extern "C" fn(
        *const libc::c_char,
        *mut T,
        *mut libc::c_char,
        libc::size_t,
        *mut *mut T,
    ) -> libc::c_int,
    read: impl FnOnce(&T) -> R,
) -> io::Result<Option<R>> {
    let c = CString::new(name).map_err(|_| io::ErrorKind::InvalidInput)?;
    let mut buf = vec![0u8; 4096];
    loop {
        // SAFETY: T is libc's passwd or group, plain data; all-zero is a
        // valid value to be overwritten.
        let mut record: T = unsafe { std::mem::zeroed() };
        let mut found: *mut T = std::ptr::null_mut();
        // SAFETY: every pointer is live for the call: `c` NUL-terminated,
        // `buf` of the length passed; the strings the record points to
        // live in buf.
        let r = unsafe {
            lookup(
                c.as_ptr(),
                &mut record,
                buf.as_mut_ptr().cast(),
                buf.len(),
                &mut found,
            )
        };
        if r == libc::ERANGE && buf.len() < 1 << 20 {
            buf.resize(buf.len() * 4, 0);
            continue;
        }
        if r != 0 {
            return Err(io::Error::from_raw_os_error(r));
        }
        return Ok((!found.is_null()).then(|| read(&record)));
    }
}

/// linux/capability.h's `_LINUX_CAPABILITY_VERSION_3`: two 32-bit words
/// per set.
const CAPABILITY_VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// The calling thread's effective capabilities as a 64-bit mask (what
/// /proc/PID/status shows as CapEff).
pub fn effective() -> io::Result<u64> {
    let mut header = CapHeader {
        version: CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: capget writes two CapData for version 3; both are live.
    cvt(unsafe { libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) } as i32)?;
    Ok(u64::from(data[0].effective) | u64::from(data[1].effective) << 32)
}

fn prctl(option: libc::c_int, arg: libc::c_ulong) -> io::Result<()> {
    // SAFETY: the prctl options used here take integers only.
    cvt(unsafe { libc::prctl(option, arg, 0 as libc::c_ulong, 0 as libc::c_ulong, 0) }).map(drop)
}

/// Becomes user `uid` with group `gid` (and no supplementary groups),
/// keeping only `keep` as permitted and effective capabilities; the
/// inheritable and ambient sets are emptied and the bounding set cut to
/// `keep`, so nothing exec'd later regains more. Needs CAP_SETUID,
/// CAP_SETGID and CAP_SETPCAP (root). Irreversible. Call before starting
/// the threads that should keep `keep` (see the module's note).
pub fn drop_to(uid: u32, gid: u32, keep: &[Capability]) -> io::Result<()> {
    let mask: u64 = keep.iter().map(|c| 1u64 << c.bit()).sum();
    // The bounding set first: dropping from it needs CAP_SETPCAP, gone
    // after the switch. EINVAL past the kernel's last capability.
    for cap in 0..64u32 {
        if mask & (1 << cap) != 0 {
            continue;
        }
        match prctl(libc::PR_CAPBSET_DROP, cap.into()) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => break,
            Err(e) => return Err(crate::sys::context(e, "PR_CAPBSET_DROP")),
        }
    }
    // SAFETY: an empty list; no pointer is read.
    cvt(unsafe { libc::setgroups(0, std::ptr::null()) })
        .map_err(|e| crate::sys::context(e, "setgroups"))?;
    // SAFETY: plain integer arguments.
    cvt(unsafe { libc::setresgid(gid, gid, gid) })
        .map_err(|e| crate::sys::context(e, format_args!("setresgid {gid}")))?;
    // Without KEEPCAPS, leaving uid 0 clears the permitted set.
    prctl(libc::PR_SET_KEEPCAPS, 1).map_err(|e| crate::sys::context(e, "PR_SET_KEEPCAPS"))?;
    // SAFETY: plain integer arguments.
    cvt(unsafe { libc::setresuid(uid, uid, uid) })
        .map_err(|e| crate::sys::context(e, format_args!("setresuid {uid}")))?;
    let _ = prctl(libc::PR_SET_KEEPCAPS, 0);
    let mut header = CapHeader {
        version: CAPABILITY_VERSION_3,
        pid: 0,
    };
    let set = [
        CapData {
            effective: mask as u32,
            permitted: mask as u32,
            inheritable: 0,
        },
        CapData {
            effective: (mask >> 32) as u32,
            permitted: (mask >> 32) as u32,
            inheritable: 0,
        },
    ];
    // SAFETY: capset reads a header and two CapData for version 3.
    cvt(unsafe { libc::syscall(libc::SYS_capset, &mut header, set.as_ptr()) } as i32)
        .map_err(|e| crate::sys::context(e, "capset"))?;
    prctl(
        libc::PR_CAP_AMBIENT,
        libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
    )
    .map_err(|e| crate::sys::context(e, "PR_CAP_AMBIENT_CLEAR_ALL"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn users_and_groups_are_looked_up() {
        let root = user("root").unwrap().expect("root exists");
        assert_eq!((root.uid, root.gid), (0, 0));
        assert_eq!(group("root").unwrap(), Some(0));
        assert_eq!(user("no-such-user-tep").unwrap(), None);
        assert_eq!(group("no-such-group-tep").unwrap(), None);
    }

    #[test]
    fn a_child_drops_to_nobody_with_only_net_admin() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            tep_testing::skip("a_child_drops_to_nobody_with_only_net_admin: needs root");
            return;
        }
        let Some(nobody) = user("nobody").unwrap() else {
            tep_testing::skip("a_child_drops_to_nobody_with_only_net_admin: no user nobody");
            return;
        };
        // In a child: the drop is irreversible and the test harness has
        // threads. fork keeps only the calling thread.
        // SAFETY: the child only makes async-signal-safe-enough calls
        // (raw syscalls, no allocation but the error path) and _exits.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            let code = match drop_to(nobody.uid, nobody.gid, &[Capability::NetAdmin]) {
                Ok(()) => {
                    // SAFETY: plain getters.
                    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
                    // SAFETY: an integer argument; it must fail: root is
                    // not to be had back.
                    let regained = unsafe { libc::setuid(0) } == 0;
                    let ok = uid == nobody.uid
                        && gid == nobody.gid
                        && effective().ok() == Some(1 << 12)
                        && !regained;
                    if ok {
                        0
                    } else {
                        2
                    }
                }
                Err(_) => 1,
            };
            // SAFETY: leaves the forked child without running the parent's
            // destructors.
            unsafe { libc::_exit(code) };
        }
        let mut status = 0;
        // SAFETY: waits for the child just forked.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(libc::WIFEXITED(status), "{status}");
        assert_eq!(libc::WEXITSTATUS(status), 0);
    }
}
