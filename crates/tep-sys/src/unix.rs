//! Unix-domain sockets that only their owner may use, and who is at the
//! other end of one.

use crate::sys::cvt;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::time::Duration;

/// Listens on `path` with a socket file of mode 0600 from the moment it
/// exists. Binding first and chmod-ing after leaves a window in which the
/// file has the umask's looser mode and anyone may connect; so the bind
/// runs under umask 0177. The umask is process-wide: the caller binds
/// before other threads create files, or accepts that a file created in
/// that instant comes out 0600 too (never looser).
pub fn bind_private(path: &Path) -> io::Result<UnixListener> {
    // SAFETY: umask only swaps the process's file-creation mask.
    let old = unsafe { libc::umask(0o177) };
    let bound = UnixListener::bind(path);
    // SAFETY: as above, restoring the previous mask.
    unsafe { libc::umask(old) };
    bound
}

/// Who connected, as the kernel recorded it at connect(): the effective
/// user and group, and the supplementary groups.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peer {
    pub pid: i32,
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
}

impl Peer {
    /// Whether `gid` is the peer's group or one of its supplementary ones.
    pub fn in_group(&self, gid: u32) -> bool {
        self.gid == gid || self.groups.contains(&gid)
    }
}

/// SO_PEERGROUPS (Linux 4.13), the same number on every architecture
/// tep builds for.
const SO_PEERGROUPS: libc::c_int = 59;

/// The credentials of the process at the other end of `fd` (SO_PEERCRED
/// and SO_PEERGROUPS): the kernel's record, not what the peer claims.
pub fn peer(fd: &impl AsRawFd) -> io::Result<Peer> {
    let fd = fd.as_raw_fd();
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: cred and len describe a writable ucred.
    cvt(unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    })?;
    Ok(Peer {
        pid: cred.pid,
        uid: cred.uid,
        gid: cred.gid,
        groups: peer_groups(fd)?,
    })
}

/// NGROUPS_MAX: the kernel records no more.
const MAX_GROUPS: usize = 65_536;

fn peer_groups(fd: RawFd) -> io::Result<Vec<u32>> {
    let mut groups = vec![0u32; 64];
    loop {
        let mut len = (groups.len() * 4) as libc::socklen_t;
        // SAFETY: groups and len describe a writable buffer of u32s.
        let r = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                SO_PEERGROUPS,
                groups.as_mut_ptr().cast(),
                &mut len,
            )
        };
        match cvt(r) {
            Ok(_) => {
                groups.truncate(len as usize / 4);
                return Ok(groups);
            }
            // ERANGE: len says how much it needs.
            Err(e) if e.raw_os_error() == Some(libc::ERANGE) && groups.len() < MAX_GROUPS => {
                groups.resize((len as usize / 4).clamp(groups.len() + 1, MAX_GROUPS), 0);
            }
            Err(e) => return Err(e),
        }
    }
}

/// Makes accept() on `listener` give up after `timeout` (SO_RCVTIMEO,
/// which Linux applies to accept too), so that the accepting loop comes
/// round at least that often.
pub fn set_accept_timeout(listener: &impl AsRawFd, timeout: Duration) -> io::Result<()> {
    let tv = libc::timeval {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_usec: timeout.subsec_micros() as libc::suseconds_t,
    };
    // SAFETY: tv is a valid timeval of the size given.
    cvt(unsafe {
        libc::setsockopt(
            listener.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    })
    .map(drop)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_socket_file_is_born_0600() {
        let dir = std::env::temp_dir().join(format!("tep-unix-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.sock");
        let _ = std::fs::remove_file(&path);
        let _l = super::bind_private(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{mode:o}");
        // The process's mask is back: a new file gets the usual mode.
        let f = dir.join("plain");
        std::fs::write(&f, b"x").unwrap();
        let plain = std::fs::metadata(&f).unwrap().permissions().mode() & 0o777;
        assert_ne!(plain & 0o044, 0, "umask left at 0177: {plain:o}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_peer_is_who_connected_and_accept_times_out() {
        let dir = std::env::temp_dir().join(format!("tep-peer-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("p.sock");
        let _ = std::fs::remove_file(&path);
        let l = super::bind_private(&path).unwrap();
        super::set_accept_timeout(&l, std::time::Duration::from_millis(50)).unwrap();
        let e = l.accept().unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock, "{e}");
        let _c = std::os::unix::net::UnixStream::connect(&path).unwrap();
        let (s, _) = l.accept().unwrap();
        let p = super::peer(&s).unwrap();
        assert_eq!(p.pid, std::process::id() as i32);
        // SAFETY: plain getters.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        assert_eq!((p.uid, p.gid), (uid, gid));
        assert!(p.in_group(gid));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
