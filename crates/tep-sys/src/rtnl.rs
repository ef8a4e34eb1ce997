//! rtnetlink by hand for the few link requests tep-sys makes (an
//! interface's gso_max_size, its XDP attributes): a request builder and one
//! round trip. No crate: a handful of structs and one loop.

use std::io;
use std::mem;
use std::os::fd::AsRawFd;

use crate::sys::{cvt, owned, retry};

const NLA_F_NESTED: u16 = 1 << 15;
const NLA_TYPE_MASK: u16 = !(NLA_F_NESTED | (1 << 14));

/// The flag of an attribute that holds attributes.
pub(crate) const NESTED: u16 = NLA_F_NESTED;

/// A link request (RTM_GETLINK, RTM_SETLINK, RTM_NEWLINK) with
/// NLM_F_REQUEST | NLM_F_ACK: header, ifinfomsg, attributes (room for a few).
#[repr(C, align(4))]
pub(crate) struct Request {
    buf: [u8; 128],
    len: usize,
}

impl Request {
    pub(crate) fn new(kind: u16, ifindex: u32) -> Request {
        let flags = (libc::NLM_F_REQUEST | libc::NLM_F_ACK) as u16;
        let mut r = Request {
            buf: [0; 128],
            len: 0,
        };
        let hdr = libc::nlmsghdr {
            nlmsg_len: 0,
            nlmsg_type: kind,
            nlmsg_flags: flags,
            nlmsg_seq: 1,
            nlmsg_pid: 0,
        };
        // SAFETY: nlmsghdr is plain integers; viewing it as bytes is fine.
        r.put(unsafe { as_bytes(&hdr) });
        // SAFETY: ifinfomsg is plain integers; all zeroes is valid.
        let mut ifi: libc::ifinfomsg = unsafe { mem::zeroed() };
        ifi.ifi_family = libc::AF_UNSPEC as u8;
        ifi.ifi_index = ifindex as i32;
        // SAFETY: as above.
        r.put(unsafe { as_bytes(&ifi) });
        r
    }

    fn put(&mut self, bytes: &[u8]) {
        self.buf[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len().next_multiple_of(4);
    }

    /// An attribute header; returns its offset for [`Request::end`].
    pub(crate) fn begin(&mut self, kind: u16) -> usize {
        let at = self.len;
        let [k0, k1] = kind.to_ne_bytes();
        // The length is written by end().
        self.put(&[0, 0, k0, k1]);
        at
    }

    pub(crate) fn end(&mut self, at: usize) {
        let len = (self.len - at) as u16;
        self.buf[at..at + 2].copy_from_slice(&len.to_ne_bytes());
    }

    pub(crate) fn attr_u32(&mut self, kind: u16, v: u32) {
        self.attr_i32(kind, v as i32);
    }

    pub(crate) fn attr_i32(&mut self, kind: u16, v: i32) {
        let at = self.begin(kind);
        self.put(&v.to_ne_bytes());
        self.end(at);
    }

    pub(crate) fn finish(&mut self) -> &[u8] {
        let len = self.len as u32;
        self.buf[..4].copy_from_slice(&len.to_ne_bytes());
        &self.buf[..self.len]
    }
}

/// # Safety
/// `T` has no padding bytes.
unsafe fn as_bytes<T>(v: &T) -> &[u8] {
    // SAFETY: `v` is a live value of `size_of::<T>()` initialised bytes
    // (the caller's promise: no padding).
    unsafe { std::slice::from_raw_parts((v as *const T).cast(), mem::size_of::<T>()) }
}

/// Sends `req` on a new rtnetlink socket and hands each reply message
/// (type, payload) to `each` until the kernel acknowledges or fails.
pub(crate) fn transact(req: &[u8], mut each: impl FnMut(u16, &[u8])) -> io::Result<()> {
    // SAFETY: plain socket(2) call.
    let sock = owned(unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_ROUTE,
        )
    })?;
    // SAFETY: `req` is a live buffer of its length; the kernel is the
    // destination (a null address on a netlink socket).
    cvt(unsafe { libc::send(sock.as_raw_fd(), req.as_ptr().cast(), req.len(), 0) } as i32)?;
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        let n = retry(|| {
            // SAFETY: `buf` is a live, exclusive buffer of its length.
            let n = unsafe { libc::recv(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
            if n < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(n as usize)
            }
        })?;
        let mut at = 0;
        while at + 16 <= n {
            let len = u32::from_ne_bytes(buf[at..at + 4].try_into().unwrap()) as usize;
            let kind = u16::from_ne_bytes(buf[at + 4..at + 6].try_into().unwrap());
            if len < 16 || at + len > n {
                return Err(io::Error::other("netlink: truncated reply"));
            }
            let payload = &buf[at + 16..at + len];
            match kind as i32 {
                libc::NLMSG_ERROR => {
                    let errno = i32::from_ne_bytes(payload[..4].try_into().unwrap());
                    return if errno == 0 {
                        Ok(())
                    } else {
                        Err(io::Error::from_raw_os_error(-errno))
                    };
                }
                libc::NLMSG_DONE => return Ok(()),
                _ => each(kind, payload),
            }
            at += len.next_multiple_of(4);
        }
    }
}

/// Walks the attributes in `bytes`: (type without flags, value).
pub(crate) fn attrs(mut bytes: &[u8], mut each: impl FnMut(u16, &[u8])) {
    while bytes.len() >= 4 {
        let len = u16::from_ne_bytes([bytes[0], bytes[1]]) as usize;
        let kind = u16::from_ne_bytes([bytes[2], bytes[3]]) & NLA_TYPE_MASK;
        if len < 4 || len > bytes.len() {
            return;
        }
        each(kind, &bytes[4..len]);
        bytes = &bytes[len.next_multiple_of(4).min(bytes.len())..];
    }
}
