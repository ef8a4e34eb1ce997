//! Small helpers shared by the modules: errno conversion, socket options,
//! `struct ifreq` and the configuration socket its ioctls go through.

use std::io;
use std::mem;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// `-1` becomes the thread's `errno`.
pub(crate) fn cvt(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// `-1` becomes the thread's `errno` (for read/write style calls).
pub(crate) fn cvt_size(ret: libc::ssize_t) -> io::Result<usize> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret as usize)
    }
}

/// The same error kind with `what` in front of the message.
pub(crate) fn context(e: io::Error, what: impl std::fmt::Display) -> io::Error {
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

/// Takes ownership of a descriptor a syscall just returned.
pub(crate) fn owned(fd: libc::c_int) -> io::Result<OwnedFd> {
    let fd = cvt(fd)?;
    // SAFETY: `fd` was just returned by the kernel and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

pub(crate) fn setsockopt_int(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: the option value is a live c_int and its exact size is passed.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const libc::c_int).cast(),
            mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// A datagram socket of `family` whose only use is carrying interface ioctls.
pub(crate) fn config_socket(family: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2) call, no pointers.
    owned(unsafe { libc::socket(family, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })
        .map_err(|e| context(e, "socket for interface configuration"))
}

/// A zeroed `struct ifreq` naming `name`; names must fit IFNAMSIZ with the NUL.
pub(crate) fn ifreq(name: &str) -> io::Result<libc::ifreq> {
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "interface name {name:?}: must be 1..{} bytes without NUL",
                libc::IFNAMSIZ
            ),
        ));
    }
    // SAFETY: ifreq is plain old data (integers, arrays, a pointer in a union):
    // all zero bytes is a valid value.
    let mut ifr: libc::ifreq = unsafe { mem::zeroed() };
    for (dst, &src) in ifr.ifr_name.iter_mut().zip(bytes) {
        *dst = src as libc::c_char;
    }
    Ok(ifr)
}

/// The NUL-terminated name the kernel left in `ifr_name`.
pub(crate) fn ifreq_name(ifr: &libc::ifreq) -> String {
    let bytes: Vec<u8> = ifr
        .ifr_name
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// ioctl(fd, request, &mut ifr).
pub(crate) fn ioctl_ifreq(
    fd: &impl AsRawFd,
    request: libc::Ioctl,
    ifr: &mut libc::ifreq,
) -> io::Result<()> {
    // SAFETY: every request this crate passes here reads and/or writes a
    // `struct ifreq`, and `ifr` is a live, exclusive one.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), request, ifr as *mut libc::ifreq) }).map(drop)
}

/// Retries `f` while it fails with EINTR.
pub(crate) fn retry<T>(mut f: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    loop {
        match f() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}
