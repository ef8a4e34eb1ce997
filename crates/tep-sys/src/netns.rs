//! Network namespaces for tests: a test thread gets a private network stack,
//! so it can create devices and addresses without touching the host and
//! without cleaning up (the namespace dies with the thread).

use std::io;

use crate::sys::{context, cvt};

/// Moves the calling thread (only it) into a new network namespace
/// (unshare(CLONE_NEWNET)) and brings its loopback up. Needs CAP_SYS_ADMIN.
/// Sockets and devices created afterwards by this thread live there.
pub fn unshare_net() -> io::Result<()> {
    // SAFETY: plain syscall, no pointers; CLONE_NEWNET affects only this thread.
    cvt(unsafe { libc::unshare(libc::CLONE_NEWNET) })
        .map_err(|e| context(e, "unshare(CLONE_NEWNET)"))?;
    crate::tun::set_link_up("lo")
}

/// Whether the process runs as root (geteuid() == 0).
pub fn is_root() -> bool {
    // SAFETY: geteuid cannot fail and has no memory effects.
    unsafe { libc::geteuid() == 0 }
}

/// Moves the calling thread (only it) into the named network namespace
/// (`ip netns add NAME`: /run/netns/NAME). Sockets it creates afterwards
/// live there. Needs CAP_SYS_ADMIN.
pub fn enter(name: &str) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let path = format!("/run/netns/{name}");
    let f = std::fs::File::open(&path).map_err(|e| context(e, format_args!("{path}")))?;
    // SAFETY: plain syscall on a descriptor that stays open for the call;
    // CLONE_NEWNET moves only this thread.
    cvt(unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) })
        .map_err(|e| context(e, format_args!("setns {path}")))?;
    Ok(())
}
