//! Kernel parameters under /proc/sys, as `sysctl` reads and writes them:
//! host mode's uplink sets the per-interface forwarding switches of its
//! own device and checks reverse-path filtering. The network ones belong
//! to the namespace of the process that opens the file.

use crate::sys::context;
use std::io;

/// The file of a name, dotted (`net.ipv4.conf.all.rp_filter`) or already
/// a path (`net/ipv4/conf/eth0.5/forwarding`, for an interface whose name
/// holds a dot).
fn path(name: &str) -> String {
    if name.contains('/') {
        format!("/proc/sys/{name}")
    } else {
        format!("/proc/sys/{}", name.replace('.', "/"))
    }
}

/// The value of `name`, trimmed.
pub fn get(name: &str) -> io::Result<String> {
    std::fs::read_to_string(path(name))
        .map(|s| s.trim().to_string())
        .map_err(|e| context(e, format_args!("sysctl {name}")))
}

/// Sets `name` to `value`.
pub fn set(name: &str, value: &str) -> io::Result<()> {
    std::fs::write(path(name), value).map_err(|e| context(e, format_args!("sysctl {name}={value}")))
}

/// The name of an IPv4 setting of interface `dev`
/// (`net.ipv4.conf.<dev>.<key>`), as a path component even when `dev`
/// holds a dot.
pub fn ipv4_conf(dev: &str, key: &str) -> String {
    format!("net/ipv4/conf/{dev}/{key}")
}

/// The name of an IPv6 setting of interface `dev`
/// (`net.ipv6.conf.<dev>.<key>`).
pub fn ipv6_conf(dev: &str, key: &str) -> String {
    format!("net/ipv6/conf/{dev}/{key}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_known_parameter() {
        let v = get("net.ipv4.conf.all.rp_filter").unwrap();
        assert!(["0", "1", "2"].contains(&v.as_str()), "{v}");
        assert!(get("net.no.such.thing").is_err());
    }
}
