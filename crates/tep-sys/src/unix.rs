//! Unix-domain sockets that only their owner may use.

use std::io;
use std::os::unix::net::UnixListener;
use std::path::Path;

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
}
