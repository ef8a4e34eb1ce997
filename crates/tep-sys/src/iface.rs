//! Questions about the host's interfaces.

use crate::sys::{config_socket, context, ifreq, ioctl_ifreq};
use std::ffi::CStr;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The MTU of interface `name` (SIOCGIFMTU).
pub fn mtu(name: &str) -> io::Result<u32> {
    let sock = config_socket(libc::AF_INET)?;
    let mut ifr = ifreq(name)?;
    ioctl_ifreq(&sock, libc::SIOCGIFMTU, &mut ifr)
        .map_err(|e| context(e, format_args!("SIOCGIFMTU {name}")))?;
    // SAFETY: SIOCGIFMTU filled the mtu member of the union.
    Ok(unsafe { ifr.ifr_ifru.ifru_mtu } as u32)
}

/// Sets the MTU of interface `name` (SIOCSIFMTU).
pub fn set_mtu(name: &str, mtu: u32) -> io::Result<()> {
    let sock = config_socket(libc::AF_INET)?;
    let mut ifr = ifreq(name)?;
    ifr.ifr_ifru.ifru_mtu = libc::c_int::try_from(mtu)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, format!("mtu {mtu}")))?;
    ioctl_ifreq(&sock, libc::SIOCSIFMTU, &mut ifr)
        .map_err(|e| context(e, format_args!("SIOCSIFMTU {name} {mtu}")))
}

/// The interface holding address `addr` and its MTU; None when no
/// interface of this namespace has it (a wildcard address, or one not
/// configured yet).
pub fn holding(addr: IpAddr) -> io::Result<Option<(String, u32)>> {
    let name = all_addresses()?
        .into_iter()
        .find(|(_, a)| *a == addr)
        .map(|(n, _)| n);
    match name {
        Some(n) => {
            let m = mtu(&n)?;
            Ok(Some((n, m)))
        }
        None => Ok(None),
    }
}

/// The IP addresses of interface `name`, in the kernel's order (IPv4
/// first, each family's primary address first).
pub fn addresses(name: &str) -> io::Result<Vec<IpAddr>> {
    Ok(all_addresses()?
        .into_iter()
        .filter(|(n, _)| n == name)
        .map(|(_, a)| a)
        .collect())
}

/// Every (interface, address) pair of this namespace (getifaddrs).
fn all_addresses() -> io::Result<Vec<(String, IpAddr)>> {
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a list head into `list` on success.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return Err(context(io::Error::last_os_error(), "getifaddrs"));
    }
    let mut out = Vec::new();
    let mut at = list;
    while !at.is_null() {
        // SAFETY: `at` is a node of the list getifaddrs returned, not yet
        // freed.
        let ifa = unsafe { &*at };
        at = ifa.ifa_next;
        // SAFETY: a non-null ifa_addr points to a sockaddr of the family
        // it names, sockaddr_in or sockaddr_in6 for the two read here.
        let Some(addr) = (unsafe { address(ifa.ifa_addr) }) else {
            continue;
        };
        if ifa.ifa_name.is_null() {
            continue;
        }
        // SAFETY: ifa_name is a NUL-terminated string of the list.
        let name = unsafe { CStr::from_ptr(ifa.ifa_name) }
            .to_string_lossy()
            .into_owned();
        out.push((name, addr));
    }
    // SAFETY: `list` came from getifaddrs and is freed once; nothing
    // borrowed from it outlives this line (names were copied).
    unsafe { libc::freeifaddrs(list) };
    Ok(out)
}

/// The IP address in a sockaddr of family AF_INET or AF_INET6.
///
/// # Safety
/// `sa` is null or points to a sockaddr whose size matches its family.
unsafe fn address(sa: *const libc::sockaddr) -> Option<IpAddr> {
    if sa.is_null() {
        return None;
    }
    // SAFETY: the caller's contract: a readable sockaddr.
    match i32::from(unsafe { (*sa).sa_family }) {
        libc::AF_INET => {
            // SAFETY: the family says it is a sockaddr_in.
            let v4 = unsafe { &*sa.cast::<libc::sockaddr_in>() };
            Some(IpAddr::V4(Ipv4Addr::from(u32::from_be(v4.sin_addr.s_addr))))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says it is a sockaddr_in6.
            let v6 = unsafe { &*sa.cast::<libc::sockaddr_in6>() };
            Some(IpAddr::V6(Ipv6Addr::from(v6.sin6_addr.s6_addr)))
        }
        _ => None,
    }
}

/// The RPS mask of `cpus`, as /sys/class/net/*/queues/rx-*/rps_cpus takes
/// it: hexadecimal, in comma-separated groups of 32 CPUs, highest first.
pub fn cpu_mask(cpus: &[usize]) -> String {
    let top = cpus.iter().copied().max().unwrap_or(0);
    let mut words = vec![0u32; top / 32 + 1];
    for &c in cpus {
        words[c / 32] |= 1 << (c % 32);
    }
    words
        .iter()
        .rev()
        .map(|w| format!("{w:08x}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Receive packet steering for receive queue `queue` of `name`: the
/// kernel processes what arrives there on `cpus` (through their backlog)
/// instead of the CPU that handed it over. Empty `cpus`: off.
pub fn set_rps_cpus(name: &str, queue: usize, cpus: &[usize]) -> io::Result<()> {
    let path = format!("/sys/class/net/{name}/queues/rx-{queue}/rps_cpus");
    let mask = if cpus.is_empty() {
        "0".to_string()
    } else {
        cpu_mask(cpus)
    };
    std::fs::write(&path, &mask).map_err(|e| context(e, format_args!("{path} = {mask}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_holds_127_0_0_1() {
        let (name, mtu) = holding(IpAddr::V4(Ipv4Addr::LOCALHOST))
            .unwrap()
            .expect("lo has 127.0.0.1");
        assert_eq!(name, "lo");
        assert_eq!(mtu, super::mtu("lo").unwrap());
        assert!(mtu >= 1280, "{mtu}");
        assert_eq!(
            holding(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 213))).unwrap(),
            None
        );
        let lo = addresses("lo").unwrap();
        assert!(lo.contains(&IpAddr::V4(Ipv4Addr::LOCALHOST)), "{lo:?}");
        assert!(addresses("no-such-if").unwrap().is_empty());
    }

    #[test]
    fn rps_masks_in_groups_of_32() {
        assert_eq!(cpu_mask(&[1]), "00000002");
        assert_eq!(cpu_mask(&[0, 3]), "00000009");
        assert_eq!(cpu_mask(&[33, 0]), "00000002,00000001");
    }
}
