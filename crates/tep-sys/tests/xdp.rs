//! Gateway mode's kernel side: the XDP steering program (bpf/tep_xdp.c) and
//! AF_XDP sockets over a UMEM the test owns, on veth pairs in a private
//! network namespace (root only; the namespace, its devices and programs
//! die with the test's thread, also when it fails).
//!
//! Frames are injected on the far end of a veth pair with an AF_PACKET
//! socket and captured there the same way, so that one namespace holds both
//! ends and every byte on the wire is the test's.

mod common;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{deadline, in_netns, ipv4_udp, wait_readable};
use tep_sys::xdp::{attached, AttachMode, Mode, Role, Steering};
use tep_sys::{CopyMode, Desc, Umem, XskOptions, XskSocket};

const BPF_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/bpf");

// ---------------------------------------------------------------------------
// The object and its source.

/// The sections that are the program: instructions, their relocations (map
/// references), the maps' definitions and the license. Debug info is left
/// out: it names the directory clang ran in.
fn program_sections(path: &Path) -> Vec<(String, Vec<u8>)> {
    use object::{Object, ObjectSection};
    let data = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let file = object::File::parse(&*data).unwrap();
    let mut out: Vec<(String, Vec<u8>)> = file
        .sections()
        .filter_map(|s| {
            let name = s.name().ok()?.to_string();
            // tep_xdp.o's programs are multi-buffer (xdp.frags), xdp_pass.o's not.
            let keep = matches!(
                name.as_str(),
                "xdp" | ".relxdp" | "xdp.frags" | ".relxdp.frags" | "license" | ".maps"
            );
            keep.then(|| (name, s.data().unwrap().to_vec()))
        })
        .collect();
    out.sort();
    assert!(
        out.iter()
            .any(|(n, d)| n.starts_with("xdp") && !d.is_empty()),
        "{}: no xdp section",
        path.display()
    );
    out
}

fn clang_version() -> Option<String> {
    let out = Command::new("clang").arg("--version").output().ok()?;
    out.status.success().then(|| {
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()
            .unwrap_or_default()
            .to_string()
    })
}

/// Rebuilds the objects with build.sh into a temporary directory and checks
/// that the checked-in ones are what the source gives: the same
/// instructions, relocations, maps and license when the clang is the one
/// that built them; only that it builds (and, as root, loads) with another.
#[test]
fn xdp_object_matches_source() {
    let Some(version) = clang_version() else {
        // Under CI=true the skip is a failure (.ci/run installs clang).
        tep_testing::skip(format_args!("xdp_object_matches_source: clang is not installed (.ci/run installs it); the checked-in bpf/tep_xdp.o was NOT compared with bpf/tep_xdp.c"));
        return;
    };
    let dir = std::env::temp_dir().join(format!("tep-xdp-build-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = Command::new("bash")
        .arg(Path::new(BPF_DIR).join("build.sh"))
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "build.sh failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let recorded = std::fs::read_to_string(Path::new(BPF_DIR).join("tep_xdp.clang-version"))
        .unwrap()
        .trim()
        .to_string();
    let rebuilt = std::fs::read_to_string(dir.join("tep_xdp.clang-version"))
        .unwrap()
        .trim()
        .to_string();
    assert_eq!(rebuilt, version);
    for obj in ["tep_xdp.o", "xdp_pass.o"] {
        let fresh = program_sections(&dir.join(obj));
        if version == recorded {
            let checked_in = program_sections(&Path::new(BPF_DIR).join(obj));
            assert_eq!(
                fresh.iter().map(|(n, _)| n).collect::<Vec<_>>(),
                checked_in.iter().map(|(n, _)| n).collect::<Vec<_>>(),
                "{obj}: sections"
            );
            for ((name, a), (_, b)) in fresh.iter().zip(&checked_in) {
                assert!(
                    a == b,
                    "{obj}: section {name} differs from the rebuild: run crates/tep-sys/bpf/build.sh and commit the result"
                );
            }
        }
    }
    if version == recorded {
        eprintln!("xdp_object_matches_source: {version}: the checked-in objects match the source");
    } else {
        eprintln!(
            "NOTE xdp_object_matches_source: this clang ({version}) is not the one that built the \
             checked-in objects ({recorded}): checked only that the source builds{}",
            if tep_sys::netns::is_root() {
                " and loads"
            } else {
                " (not root: not loaded)"
            }
        );
        if tep_sys::netns::is_root() {
            let data = std::fs::read(dir.join("tep_xdp.o")).unwrap();
            let mut ebpf = aya::Ebpf::load(&data).expect("the rebuilt object loads");
            for name in ["tep_underlay", "tep_inner"] {
                let p: &mut aya::programs::Xdp =
                    ebpf.program_mut(name).unwrap().try_into().unwrap();
                p.load().unwrap_or_else(|e| panic!("rebuilt {name}: {e}"));
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------------------
// The rig: veth pairs, AF_PACKET, a UMEM.

/// Runs `body` in a private network namespace when root (and `ip` is
/// there); otherwise says loudly that `test` was skipped.
fn as_root(test: &str, body: impl FnOnce() + Send + 'static) {
    if root_or_skip(test) {
        in_netns(body);
    }
}

fn root_or_skip(test: &str) -> bool {
    if !tep_sys::netns::is_root() {
        tep_testing::skip(format_args!("{test}: needs root (CI runs it as root)"));
        return false;
    }
    if Command::new("ip").arg("-V").output().is_err() {
        tep_testing::skip(format_args!(
            "{test}: `ip` is not installed (.ci/run installs iproute2)"
        ));
        return false;
    }
    true
}

/// Attaches section `sec` of `obj` to tepa in generic mode the old way,
/// over netlink as `ip` does, `more` naming the program if need be.
fn attach_with_ip(obj: &str, sec: &str, more: &[&str]) {
    let mut args = vec![
        "link",
        "set",
        "dev",
        "tepa",
        "xdpgeneric",
        "obj",
        obj,
        "sec",
        sec,
    ];
    args.extend_from_slice(more);
    ip(&args);
}

fn ip(args: &[&str]) -> String {
    let out = Command::new("ip").args(args).output().expect("ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn ifindex(name: &str) -> u32 {
    let c = std::ffi::CString::new(name).unwrap();
    // SAFETY: a NUL-terminated name; no other memory is touched.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    assert_ne!(i, 0, "no interface {name}");
    i
}

/// A veth pair `near` (where tep's program and sockets sit) – `far` (where
/// the test injects and captures), with the given MACs, both up. Run inside
/// the test's namespace (commands inherit the thread's namespace).
fn veth(near: &str, far: &str, near_mac: [u8; 6], far_mac: [u8; 6]) -> (u32, u32) {
    ip(&[
        "link",
        "add",
        near,
        "address",
        &mac_str(near_mac),
        "type",
        "veth",
        "peer",
        "name",
        far,
        "address",
        &mac_str(far_mac),
    ]);
    for dev in [near, far] {
        // No router solicitations or other noise of the host's own on the
        // wire the test reads.
        let _ = Command::new("sysctl")
            .args(["-qw", &format!("net.ipv6.conf.{dev}.disable_ipv6=1")])
            .output();
        ip(&["link", "set", dev, "up"]);
    }
    (ifindex(near), ifindex(far))
}

fn mac_str(m: [u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// An AF_PACKET socket on interface `ifindex` seeing every frame.
fn packet_socket(ifindex: u32) -> OwnedFd {
    let proto = (libc::ETH_P_ALL as u16).to_be();
    // SAFETY: plain socket(2) call.
    let fd = unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            proto.into(),
        )
    };
    assert!(fd >= 0, "AF_PACKET: {}", std::io::Error::last_os_error());
    // SAFETY: fd was just returned and nothing else owns it.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: sockaddr_ll is plain integers; all zeroes is valid.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = proto;
    sll.sll_ifindex = ifindex as i32;
    // SAFETY: a live sockaddr_ll of the size passed.
    let r = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sll as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as u32,
        )
    };
    assert_eq!(r, 0, "bind AF_PACKET: {}", std::io::Error::last_os_error());
    fd
}

fn inject(sock: &OwnedFd, frame: &[u8]) {
    // SAFETY: `frame` is a live buffer of its length.
    let n = unsafe { libc::send(sock.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
    assert_eq!(
        n,
        frame.len() as isize,
        "inject: {}",
        std::io::Error::last_os_error()
    );
}

/// Frames read from an AF_PACKET socket until `wanted` accepts one, or None
/// at the deadline. Outgoing frames (PACKET_OUTGOING: the test's own
/// injections) are skipped.
fn capture(sock: &OwnedFd, ms: u64, wanted: impl Fn(&[u8]) -> bool) -> Option<Vec<u8>> {
    let end = deadline(ms);
    let mut buf = vec![0u8; 4096];
    loop {
        wait_readable(&[sock.as_raw_fd()], end)?;
        // SAFETY: sockaddr_ll is plain integers; all zeroes is valid.
        let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::sockaddr_ll>() as u32;
        // SAFETY: `buf` and `from` are live and exclusive, their sizes passed.
        let n = unsafe {
            libc::recvfrom(
                sock.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                0,
                (&mut from as *mut libc::sockaddr_ll).cast(),
                &mut len,
            )
        };
        if n < 0 {
            continue;
        }
        if from.sll_pkttype == libc::PACKET_OUTGOING {
            continue;
        }
        let frame = &buf[..n as usize];
        if wanted(frame) {
            return Some(frame.to_vec());
        }
    }
}

/// Page-aligned anonymous memory for a UMEM, unmapped on drop (declared
/// before the sockets that use it, so it outlives them).
struct Region {
    ptr: *mut u8,
    len: usize,
}

impl Region {
    fn new(len: usize) -> Region {
        // SAFETY: a new private anonymous mapping; no existing memory is
        // affected.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        Region { ptr: p.cast(), len }
    }

    fn umem(&self) -> Umem {
        // SAFETY: the mapping is readable and writable and outlives every
        // socket of the test (declared before them); the test reads a
        // frame only after recv and writes one only before send.
        unsafe { Umem::register(self.ptr, self.len, CHUNK as u32) }.unwrap()
    }

    fn frame(&self, d: &Desc) -> &[u8] {
        assert!(d.addr as usize + d.len as usize <= self.len);
        // SAFETY: inside the mapping (checked above); the kernel handed the
        // frame over (recv) and does not write it until it is filled again.
        unsafe { std::slice::from_raw_parts(self.ptr.add(d.addr as usize), d.len as usize) }
    }

    fn write(&self, addr: u64, bytes: &[u8]) {
        assert!(addr as usize + bytes.len() <= self.len);
        // SAFETY: inside the mapping; the chunk is not on any ring.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.ptr.add(addr as usize), bytes.len())
        };
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: the mapping made in new(), unmapped once.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

const CHUNK: u64 = 2048;
/// tep's headroom in front of every received frame.
const HEADROOM: u64 = 256;
const CHUNKS: u64 = 1024;

/// Fill addresses: chunks `from..to`, each `HEADROOM` in.
fn fill_addrs(from: u64, to: u64) -> Vec<u64> {
    (from..to).map(|c| c * CHUNK + HEADROOM).collect()
}

/// What every steering test starts from: a veth pair `tepa` (tep's side)
/// – `tepb` (the test's), the steering program's `role` on `tepa` in
/// `mode`, an AF_XDP socket on its queue 0 registered for the role with
/// `filled` chunks on its fill ring, and an AF_PACKET socket on `tepb`.
struct Rig {
    // Field order is drop order: the socket before the memory it uses.
    xsk: XskSocket,
    s: Steering,
    far: OwnedFd,
    took: AttachMode,
    region: Region,
}

fn rig(role: Role, mode: Mode, filled: u64) -> Rig {
    let (va, vb) = veth("tepa", "tepb", NEAR_MAC, FAR_MAC);
    let far = packet_socket(vb);
    let region = Region::new((CHUNKS * CHUNK) as usize);
    let mut s = Steering::load().unwrap();
    let took = s.attach(role, va, mode).unwrap();
    let mut xsk = XskSocket::new(&region.umem(), va, 0, &XskOptions::default()).unwrap();
    assert_eq!(xsk.fill(&fill_addrs(0, filled)), filled as usize);
    s.register_socket(role, 0, std::os::fd::AsFd::as_fd(&xsk))
        .unwrap();
    Rig {
        xsk,
        s,
        far,
        took,
        region,
    }
}

/// Waits for frames on `xsk` (polling, waking the kernel when asked) until
/// `n` arrived or the deadline; returns them.
fn recv_frames(xsk: &mut XskSocket, n: usize, ms: u64) -> Vec<Desc> {
    let end = deadline(ms);
    let mut got = Vec::new();
    let mut descs = [Desc::default(); 64];
    while got.len() < n {
        let k = xsk.recv(&mut descs);
        got.extend_from_slice(&descs[..k]);
        if k > 0 {
            continue;
        }
        if xsk.fill_needs_wakeup() {
            xsk.wake_rx().unwrap();
        }
        if wait_readable(&[xsk.as_raw_fd()], end).is_none() {
            break;
        }
    }
    got
}

/// Sends `d` (holding `frame`) on `xsk`, sees it arrive on the AF_PACKET
/// socket `at`, and gets its address back on the completion ring.
fn transmit(xsk: &mut XskSocket, d: Desc, at: &OwnedFd, frame: &[u8]) {
    assert_eq!(xsk.send(&[d]), 1);
    xsk.kick().unwrap();
    let seen = capture(at, 2000, |f| f == frame);
    assert!(seen.is_some(), "the transmitted frame reached the peer");
    let mut done = [0u64; 4];
    let end = deadline(1000);
    let mut n = 0;
    while n == 0 && Instant::now() < end {
        n = xsk.complete(&mut done);
        if n == 0 {
            xsk.kick().unwrap();
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    assert_eq!(&done[..n], &[d.addr], "completion returns the sent address");
}

/// Nothing arrives on `xsk` for `ms`.
fn assert_quiet(xsk: &mut XskSocket, ms: u64, what: &str) {
    let got = recv_frames(xsk, 1, ms);
    assert!(got.is_empty(), "{what}: a frame reached the AF_XDP socket");
}

// ---------------------------------------------------------------------------
// Frames.

const NEAR_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
const FAR_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
const NEAR4: [u8; 4] = [10, 77, 0, 1];
const FAR4: [u8; 4] = [10, 77, 0, 2];

/// An untagged frame from the far end to the near one.
fn from_far(ethertype: u16, payload: &[u8]) -> Vec<u8> {
    eth(NEAR_MAC, FAR_MAC, &[], ethertype, payload)
}

fn eth(dst: [u8; 6], src: [u8; 6], tags: &[(u16, u16)], ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    for &(tpid, vid) in tags {
        f.extend_from_slice(&tpid.to_be_bytes());
        f.extend_from_slice(&vid.to_be_bytes());
    }
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// IPv6 + optional hop-by-hop header (8 bytes of padding options) + UDP.
/// The UDP checksum is left 0: only the XDP program reads these.
fn udp6(dst: Ipv6Addr, dport: u16, hop_by_hop: bool, payload: &[u8]) -> Vec<u8> {
    let src: Ipv6Addr = "fd77::2".parse().unwrap();
    let ext = if hop_by_hop { 8 } else { 0 };
    let mut p = vec![0u8; 40 + ext + 8 + payload.len()];
    p[0] = 0x60;
    p[4..6].copy_from_slice(&((ext + 8 + payload.len()) as u16).to_be_bytes());
    p[6] = if hop_by_hop { 0 } else { 17 };
    p[7] = 64;
    p[8..24].copy_from_slice(&src.octets());
    p[24..40].copy_from_slice(&dst.octets());
    if hop_by_hop {
        // Next header UDP, length 0 (8 bytes), then PadN over 6 bytes.
        p[40] = 17;
        p[41] = 0;
        p[42] = 1;
        p[43] = 4;
    }
    let u = 40 + ext;
    p[u..u + 2].copy_from_slice(&4000u16.to_be_bytes());
    p[u + 2..u + 4].copy_from_slice(&dport.to_be_bytes());
    p[u + 4..u + 6].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    p[u + 8..].copy_from_slice(payload);
    p
}

fn arp_request(sender_mac: [u8; 6], sender: [u8; 4], target: [u8; 4]) -> Vec<u8> {
    let mut p = vec![0, 1, 8, 0, 6, 4, 0, 1];
    p.extend_from_slice(&sender_mac);
    p.extend_from_slice(&sender);
    p.extend_from_slice(&[0; 6]);
    p.extend_from_slice(&target);
    eth([0xff; 6], sender_mac, &[], 0x0806, &p)
}

// ---------------------------------------------------------------------------
// Attaching.

fn tep_programs_on(ifindex: u32) -> Vec<(String, AttachMode)> {
    attached(ifindex)
        .unwrap()
        .into_iter()
        .map(|p| (p.name, p.mode))
        .collect()
}

#[test]
fn xdp_attach_modes_replace_refuse_detach() {
    as_root("xdp_attach_modes_replace_refuse_detach", || {
        let (va, vb) = veth("tepa", "tepb", NEAR_MAC, FAR_MAC);
        let mut s = Steering::load().unwrap();
        let id = s.program_id(Role::Underlay).unwrap();

        for (mode, want) in [
            (Mode::Native, AttachMode::Native),
            (Mode::Generic, AttachMode::Generic),
            (Mode::Auto, AttachMode::Native), // veth has native XDP
        ] {
            assert_eq!(
                s.attach(Role::Underlay, va, mode).unwrap(),
                want,
                "{mode:?}"
            );
            assert_eq!(s.attachment(Role::Underlay), Some((va, want)));
            let on = attached(va).unwrap();
            assert_eq!(on.len(), 1, "{on:?}");
            assert_eq!(
                (on[0].id, on[0].name.as_str(), on[0].mode),
                (id, "tep_underlay", want)
            );
            s.detach(Role::Underlay).unwrap();
            assert!(
                attached(va).unwrap().is_empty(),
                "{mode:?}: detach left a program"
            );
            assert_eq!(s.attachment(Role::Underlay), None);
        }
        eprintln!("veth: native and generic XDP both attach; Auto picks native");

        // Copy or zero-copy on a veth: forced copy binds; what forced
        // zero-copy does is the driver's (veth has no zero-copy AF_XDP:
        // the kernel refuses), printed rather than asserted.
        let region = Region::new((64 * CHUNK) as usize);
        s.attach(Role::Underlay, va, Mode::Native).unwrap();
        for copy in [CopyMode::ZeroCopy, CopyMode::Copy] {
            let opts = XskOptions {
                copy,
                ..XskOptions::default()
            };
            match XskSocket::new(&region.umem(), va, 0, &opts) {
                Ok(x) => eprintln!("veth, {copy:?}: bound, zero-copy {}", x.zero_copy()),
                Err(e) => {
                    assert_ne!(copy, CopyMode::Copy, "{e}");
                    eprintln!("veth, {copy:?}: {e}");
                }
            }
        }
        // The kernel frees a closed socket's hold on its queue later (in a
        // work item): binding the queue again can find it busy for a while.
        let start = Instant::now();
        let mut busy = 0;
        let again = loop {
            match XskSocket::new(&region.umem(), va, 0, &XskOptions::default()) {
                Ok(x) => break x,
                Err(e)
                    if e.kind() == std::io::ErrorKind::ResourceBusy
                        && start.elapsed() < Duration::from_secs(2) =>
                {
                    busy += 1;
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(e) => panic!("binding the queue again: {e}"),
            }
        };
        eprintln!(
            "veth: the queue could be bound again {:?} after the socket closed ({busy} EBUSY), Auto chose {}",
            start.elapsed(),
            if again.zero_copy() { "zero-copy" } else { "copy" }
        );
        assert!(!again.zero_copy());
        drop(again);
        s.detach(Role::Underlay).unwrap();
        drop(region);

        // Both roles at once, on the two ends.
        s.attach(Role::Underlay, va, Mode::Auto).unwrap();
        s.attach(Role::Inner, vb, Mode::Generic).unwrap();
        let e = s.attach(Role::Inner, va, Mode::Auto).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{e}");
        assert_eq!(tep_programs_on(va).len(), 1, "the underlay stays");
        assert_eq!(
            tep_programs_on(vb),
            vec![("tep_inner".into(), AttachMode::Generic)]
        );

        // A tep program held by another owner's link (another process, or a
        // leaked Steering) is replaced: its link is detached, ours attached.
        let mut other = Steering::load().unwrap();
        let other_id = other.program_id(Role::Underlay).unwrap();
        assert_eq!(
            other.attach(Role::Underlay, va, Mode::Native).unwrap(),
            AttachMode::Native
        );
        let on = attached(va).unwrap();
        assert_eq!(on.len(), 1);
        assert_eq!(on[0].id, other_id);
        drop(s); // its link was detached already; dropping it changes nothing
        assert_eq!(attached(va).unwrap()[0].id, other_id);
        assert!(
            attached(vb).unwrap().is_empty(),
            "dropping detaches the inner role too"
        );
        drop(other);
        assert!(attached(va).unwrap().is_empty());

        // A stale tep program attached the old way (netlink, as `ip` does)
        // is replaced too.
        let obj = format!("{BPF_DIR}/tep_xdp.o");
        attach_with_ip(&obj, "xdp.frags", &["program", "tep_underlay"]);
        let stale = attached(va).unwrap();
        assert_eq!(stale.len(), 1);
        assert_eq!(stale[0].name, "tep_underlay");
        let mut s = Steering::load().unwrap();
        let id = s.program_id(Role::Underlay).unwrap();
        assert_ne!(stale[0].id, id);
        assert_eq!(
            s.attach(Role::Underlay, va, Mode::Generic).unwrap(),
            AttachMode::Generic
        );
        let on = attached(va).unwrap();
        assert_eq!(on.len(), 1, "{on:?}");
        assert_eq!(on[0].id, id);
        s.detach(Role::Underlay).unwrap();

        // Somebody else's program is refused, by name and id, and left alone.
        let pass = format!("{BPF_DIR}/xdp_pass.o");
        attach_with_ip(&pass, "xdp", &[]);
        let theirs = attached(va).unwrap();
        assert_eq!(theirs.len(), 1);
        assert_eq!(theirs[0].name, "not_tep_pass");
        let e = s.attach(Role::Underlay, va, Mode::Auto).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::ResourceBusy, "{e}");
        let msg = e.to_string();
        eprintln!("refused: {msg}");
        assert!(
            msg.contains("not_tep_pass") && msg.contains(&format!("id {}", theirs[0].id)),
            "{msg}"
        );
        assert_eq!(attached(va).unwrap(), theirs, "their program stays");
        ip(&["link", "set", "dev", "tepa", "xdpgeneric", "off"]);

        // Gone: nothing left for `ip` to show either.
        drop(s);
        let shown = ip(&["-d", "link", "show", "tepa"]);
        assert!(!shown.contains("prog/xdp"), "{shown}");
    });
}

// ---------------------------------------------------------------------------
// Steering into AF_XDP sockets.

/// The underlay role in `mode`: endpoints (IPv4, IPv6 behind a hop-by-hop
/// header, IPv4 behind a VLAN tag and behind two) arrive on the socket
/// byte for byte; other UDP, ARP and ping reach the kernel; a frame sent on
/// the socket arrives at the peer.
fn underlay(mode: Mode) {
    let mut r = rig(Role::Underlay, mode, 512);
    let Rig {
        xsk,
        s,
        far,
        region,
        took,
        ..
    } = &mut r;
    ip(&["addr", "add", "10.77.0.1/24", "dev", "tepa"]);
    // The kernel's replies go to the far end without ARP.
    ip(&[
        "neigh",
        "add",
        "10.77.0.2",
        "lladdr",
        &mac_str(FAR_MAC),
        "dev",
        "tepa",
        "nud",
        "permanent",
    ]);
    eprintln!(
        "underlay on veth, asked {mode:?}: XDP {took}, AF_XDP {}",
        if xsk.zero_copy() { "zero-copy" } else { "copy" }
    );
    let v6: Ipv6Addr = "fd77::1".parse().unwrap();
    s.add_endpoint(IpAddr::V4(Ipv4Addr::from(NEAR4)), 4789)
        .unwrap();
    s.add_endpoint(IpAddr::V6(v6), 6081).unwrap();

    // Endpoints: each frame arrives whole, at a filled address.
    let tunnel = [
        from_far(
            0x0800,
            &ipv4_udp(FAR4, NEAR4, 1000, 4789, b"vxlan over ipv4"),
        ),
        from_far(0x86dd, &udp6(v6, 6081, false, b"geneve over ipv6")),
        from_far(0x86dd, &udp6(v6, 6081, true, b"behind hop-by-hop")),
        eth(
            NEAR_MAC,
            FAR_MAC,
            &[(0x8100, 100)],
            0x0800,
            &ipv4_udp(FAR4, NEAR4, 1000, 4789, b"one tag"),
        ),
        eth(
            NEAR_MAC,
            FAR_MAC,
            &[(0x88a8, 7), (0x8100, 100)],
            0x0800,
            &ipv4_udp(FAR4, NEAR4, 1, 4789, b"q-in-q"),
        ),
    ];
    for f in &tunnel {
        inject(far, f);
    }
    let got = recv_frames(xsk, tunnel.len(), 2000);
    assert_eq!(
        got.len(),
        tunnel.len(),
        "{mode:?}: tunnel frames on the socket"
    );
    for (d, f) in got.iter().zip(&tunnel) {
        assert_eq!(
            d.addr % CHUNK,
            HEADROOM,
            "the frame starts after tep's headroom"
        );
        assert_eq!(region.frame(d), &f[..]);
    }

    // Not an endpoint: another port, another address's family, a fragment.
    let kernel_udp = UdpSocket::bind("10.77.0.1:5555").unwrap();
    kernel_udp
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    inject(
        far,
        &from_far(0x0800, &ipv4_udp(FAR4, NEAR4, 1000, 5555, b"for the host")),
    );
    let mut buf = [0u8; 64];
    let (n, from) = kernel_udp
        .recv_from(&mut buf)
        .expect("other UDP reaches the kernel");
    assert_eq!(&buf[..n], b"for the host");
    assert_eq!(from.ip(), IpAddr::V4(Ipv4Addr::from(FAR4)));
    let mut frag = ipv4_udp(FAR4, NEAR4, 1000, 4789, b"first fragment");
    frag[6] |= 0x20; // more fragments
    frag[10..12].copy_from_slice(&[0, 0]);
    let c = common::checksum(&frag[..20]);
    frag[10..12].copy_from_slice(&c.to_be_bytes());
    inject(far, &from_far(0x0800, &frag));
    assert_quiet(xsk, 300, "an IPv4 fragment");

    // ARP and ping still work: the kernel answers.
    inject(far, &arp_request(FAR_MAC, FAR4, NEAR4));
    let reply = capture(far, 2000, |f| {
        f.len() >= 42 && f[12..14] == [8, 6] && f[20..22] == [0, 2]
    });
    let reply = reply.expect("the kernel answers ARP while steering is on");
    assert_eq!(&reply[22..28], &NEAR_MAC);
    let ping = common::icmp_echo_request(FAR4, NEAR4, 0x7e9, 1, b"tep xdp ping");
    inject(far, &from_far(0x0800, &ping));
    capture(far, 2000, |f| {
        f.len() > 14 && common::is_echo_reply(&f[14..], FAR4, NEAR4, 0x7e9, 1, b"tep xdp ping")
    })
    .expect("ping answered while steering is on");

    let st = s.stats(Role::Underlay).unwrap();
    eprintln!("{mode:?} stats: {st:?}");
    assert_eq!(st.redirected, tunnel.len() as u64);
    assert!(st.passed >= 4, "{st:?}"); // UDP, fragment, ARP, ping at least
    assert_eq!(st.redirect_failed, 0);

    // Transmit: a frame written into a chunk and sent by descriptor
    // arrives at the peer as written; its chunk comes back on completion.
    let out = eth(
        FAR_MAC,
        NEAR_MAC,
        &[],
        0x0800,
        &ipv4_udp(NEAR4, FAR4, 4789, 7777, b"sent by tep"),
    );
    let addr = 600 * CHUNK + HEADROOM;
    region.write(addr, &out);
    let sent = Desc {
        addr,
        len: out.len() as u32,
        options: 0,
    };
    transmit(xsk, sent, far, &out);

    // Removing the endpoint hands its traffic back to the kernel.
    s.remove_endpoint(IpAddr::V4(Ipv4Addr::from(NEAR4)), 4789)
        .unwrap();
    assert!(s
        .remove_endpoint(IpAddr::V4(Ipv4Addr::from(NEAR4)), 4789)
        .is_err());
    inject(far, &tunnel[0]);
    assert_quiet(xsk, 300, "a removed endpoint");
    let stats = xsk.statistics().unwrap();
    assert_eq!(
        stats.rx_invalid_descs + stats.tx_invalid_descs,
        0,
        "{stats:?}"
    );
}

#[test]
fn xsk_underlay_native() {
    as_root("xsk_underlay_native", || underlay(Mode::Native));
}

#[test]
fn xsk_underlay_generic() {
    as_root("xsk_underlay_generic", || underlay(Mode::Generic));
}

#[test]
fn xsk_inner_prefixes_macs_l2_default() {
    as_root("xsk_inner_prefixes_macs_l2_default", || {
        let mut r = rig(Role::Inner, Mode::Auto, 512);
        let Rig {
            xsk,
            s,
            far,
            region,
            ..
        } = &mut r;
        s.set_inner_config(NEAR_MAC, false).unwrap();
        // Host bits past the prefix are ignored.
        s.add_inner_prefix(IpAddr::V4(Ipv4Addr::new(198, 51, 100, 77)), 24)
            .unwrap();
        s.add_inner_prefix("2001:db8:77::".parse().unwrap(), 48)
            .unwrap();
        assert!(s
            .add_inner_prefix(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 33)
            .is_err());

        let to = |dst: [u8; 4]| from_far(0x0800, &ipv4_udp(FAR4, dst, 1, 2, b"inner"));
        let hit4 = to([198, 51, 100, 9]);
        let hit4_tagged = eth(
            NEAR_MAC,
            FAR_MAC,
            &[(0x8100, 5)],
            0x0800,
            &ipv4_udp(FAR4, [198, 51, 100, 200], 1, 2, b"x"),
        );
        let hit6 = from_far(
            0x86dd,
            &udp6("2001:db8:77:1::5".parse().unwrap(), 9, false, b"v6"),
        );
        for f in [&hit4, &hit4_tagged, &hit6] {
            inject(far, f);
        }
        let got = recv_frames(xsk, 3, 2000);
        assert_eq!(got.len(), 3, "prefix hits redirected");
        for (d, f) in got.iter().zip([&hit4, &hit4_tagged, &hit6]) {
            assert_eq!(region.frame(d), &f[..]);
        }
        // Misses go to the kernel.
        inject(far, &to([198, 51, 101, 9]));
        inject(
            far,
            &from_far(
                0x86dd,
                &udp6("2001:db8:78::5".parse().unwrap(), 9, false, b"v6"),
            ),
        );
        assert_quiet(xsk, 300, "a prefix miss");
        let st = s.stats(Role::Inner).unwrap();
        assert_eq!((st.redirected, st.passed), (3, 2), "{st:?}");
        s.remove_inner_prefix(IpAddr::V4(Ipv4Addr::new(198, 51, 100, 0)), 24)
            .unwrap();
        inject(far, &hit4);
        assert_quiet(xsk, 300, "a removed prefix");

        // A MAC behind an L2 tunnel, whatever the payload.
        let behind = [0x02, 0xaa, 0, 0, 0, 0x33];
        s.add_inner_mac(behind).unwrap();
        let l2 = eth(behind, FAR_MAC, &[], 0x0806, &[0u8; 28]);
        inject(far, &l2);
        let got = recv_frames(xsk, 1, 2000);
        assert_eq!(got.len(), 1, "MAC hit redirected");
        assert_eq!(region.frame(&got[0]), &l2[..]);
        s.remove_inner_mac(behind).unwrap();
        inject(far, &l2);
        assert_quiet(xsk, 300, "a removed MAC");

        // L2 default: everything not for this interface's MAC, broadcast
        // included; frames to its own MAC still go to the kernel.
        s.set_inner_config(NEAR_MAC, true).unwrap();
        let other = eth(
            [0x02, 0xbb, 0, 0, 0, 1],
            FAR_MAC,
            &[],
            0x0800,
            &ipv4_udp(FAR4, [192, 0, 2, 1], 1, 2, b"?"),
        );
        let bcast = arp_request(FAR_MAC, FAR4, [192, 0, 2, 1]);
        inject(far, &other);
        inject(far, &bcast);
        let got = recv_frames(xsk, 2, 2000);
        assert_eq!(got.len(), 2, "L2 default takes other MACs and broadcast");
        assert_eq!(region.frame(&got[0]), &other[..]);
        assert_eq!(region.frame(&got[1]), &bcast[..]);
        inject(far, &to([192, 0, 2, 1]));
        assert_quiet(xsk, 300, "a frame to the interface's own MAC");
        s.set_inner_config(NEAR_MAC, false).unwrap();
        inject(far, &other);
        assert_quiet(xsk, 300, "L2 default off");
    });
}

/// Networks on a trunk port: a network's VLAN to tep (whatever the
/// MAC); a VLAN no network has to the kernel, counted; untagged (and
/// priority-tagged) frames to tep only with an untagged network, and not
/// those for the interface's own MAC.
#[test]
fn xsk_inner_network_vlans() {
    as_root("xsk_inner_network_vlans", || {
        let mut r = rig(Role::Inner, Mode::Auto, 512);
        let Rig {
            xsk,
            s,
            far,
            region,
            ..
        } = &mut r;
        s.set_inner_config(NEAR_MAC, false).unwrap();
        s.set_inner_networks(true, false).unwrap();
        s.set_inner_vlan(100, true).unwrap();
        assert!(s.set_inner_vlan(4096, true).is_err());
        let bcast = [0xff; 6];
        let tagged = |dst, tci| eth(dst, FAR_MAC, &[(0x8100, tci)], 0x0806, &[0u8; 28]);
        let untagged = |dst| eth(dst, FAR_MAC, &[], 0x0806, &[0u8; 28]);
        let blue = [tagged(bcast, 100), tagged(NEAR_MAC, 0x6000 | 100)];
        for f in &blue {
            inject(far, f);
        }
        let got = recv_frames(xsk, 2, 2000);
        assert_eq!(got.len(), 2, "VLAN 100's frames redirected");
        for (d, f) in got.iter().zip(&blue) {
            assert_eq!(region.frame(d), &f[..]);
        }
        inject(far, &tagged(bcast, 300));
        inject(far, &untagged(bcast));
        assert_quiet(
            xsk,
            300,
            "VLAN 300, or untagged without an untagged network",
        );
        let st = s.stats(Role::Inner).unwrap();
        assert_eq!(
            (st.redirected, st.passed, st.unknown_vlan),
            (2, 2, 1),
            "{st:?}"
        );

        s.set_inner_networks(true, true).unwrap();
        let plain = [untagged(bcast), tagged(bcast, 0)];
        for f in &plain {
            inject(far, f);
        }
        let got = recv_frames(xsk, 2, 2000);
        assert_eq!(got.len(), 2, "untagged and priority-tagged redirected");
        inject(far, &untagged(NEAR_MAC));
        assert_quiet(xsk, 300, "an untagged frame for the interface");

        s.set_inner_vlan(100, false).unwrap();
        inject(far, &blue[0]);
        assert_quiet(xsk, 300, "a VLAN no longer a network's");
        s.set_inner_networks(false, false).unwrap();
        inject(far, &plain[0]);
        assert_quiet(xsk, 300, "networks off");
        let st = s.stats(Role::Inner).unwrap();
        assert_eq!((st.redirected, st.unknown_vlan), (4, 2), "{st:?}");
    });
}

#[test]
fn xsk_shared_umem_forwards_by_descriptor() {
    as_root("xsk_shared_umem_forwards_by_descriptor", || {
        // Underlay tepa–tepb, inner tepc–tepd; tep's sockets on tepa and
        // tepc share one UMEM.
        let (va, vb) = veth("tepa", "tepb", NEAR_MAC, FAR_MAC);
        let (vc, vd) = veth("tepc", "tepd", [0x02, 0, 0, 0, 1, 1], [0x02, 0, 0, 0, 1, 2]);
        let region = Region::new((CHUNKS * CHUNK) as usize);
        let mut s = Steering::load().unwrap();
        s.attach(Role::Underlay, va, Mode::Auto).unwrap();
        s.attach(Role::Inner, vc, Mode::Auto).unwrap();
        let opts = XskOptions::default();
        let mut under = XskSocket::new(&region.umem(), va, 0, &opts).unwrap();
        let mut inner = XskSocket::shared(&under, vc, 0, &opts).unwrap();
        assert!(
            XskSocket::shared(&under, va, 0, &opts).is_err(),
            "same interface and queue"
        );
        // Each socket's fill ring gets its own half of the chunks.
        assert_eq!(under.fill(&fill_addrs(0, 256)), 256);
        assert_eq!(inner.fill(&fill_addrs(256, 512)), 256);
        s.register_socket(Role::Underlay, 0, std::os::fd::AsFd::as_fd(&under))
            .unwrap();
        s.register_socket(Role::Inner, 0, std::os::fd::AsFd::as_fd(&inner))
            .unwrap();
        s.add_endpoint(IpAddr::V4(Ipv4Addr::from(NEAR4)), 2152)
            .unwrap();

        let from_b = packet_socket(vb);
        let at_d = packet_socket(vd);
        let frame = from_far(0x0800, &ipv4_udp(FAR4, NEAR4, 2152, 2152, b"one copy only"));
        inject(&from_b, &frame);
        let got = recv_frames(&mut under, 1, 2000);
        assert_eq!(got.len(), 1);
        let d = got[0];
        assert!(
            d.addr < 256 * CHUNK,
            "received into a chunk of the underlay's fill ring"
        );
        // Out of the other interface by descriptor: the same bytes in the
        // same chunk, nothing copied by tep.
        transmit(&mut inner, d, &at_d, &frame);
    });
}

#[test]
fn xsk_statistics_count_an_empty_fill_ring() {
    as_root("xsk_statistics_count_an_empty_fill_ring", || {
        // Nothing on the fill ring.
        let mut r = rig(Role::Underlay, Mode::Auto, 0);
        let Rig { xsk, s, far, .. } = &mut r;
        s.add_endpoint(IpAddr::V4(Ipv4Addr::from(NEAR4)), 4789)
            .unwrap();
        let before = xsk.statistics().unwrap();
        assert_eq!(before, Default::default());
        // Nothing on the fill ring: every redirected frame is dropped.
        let frame = from_far(0x0800, &ipv4_udp(FAR4, NEAR4, 1, 4789, b"no room"));
        for _ in 0..5 {
            inject(far, &frame);
        }
        let end = deadline(2000);
        let mut after = xsk.statistics().unwrap();
        while after.rx_fill_ring_empty_descs + after.rx_dropped < 5 && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(10));
            after = xsk.statistics().unwrap();
        }
        eprintln!(
            "with an empty fill ring: {after:?}, fill needs wakeup: {}",
            xsk.fill_needs_wakeup()
        );
        assert!(
            after.rx_fill_ring_empty_descs >= 5 || after.rx_dropped >= 5,
            "{after:?}"
        );
        assert_eq!(s.stats(Role::Underlay).unwrap().redirected, 5);
        // Once filled, frames arrive again.
        assert_eq!(xsk.fill(&fill_addrs(0, 64)), 64);
        if xsk.fill_needs_wakeup() {
            xsk.wake_rx().unwrap();
        }
        inject(far, &frame);
        assert_eq!(recv_frames(xsk, 1, 2000).len(), 1);
        // Unregistered, the program finds no socket and passes the frame.
        s.unregister_socket(Role::Underlay, 0).unwrap();
        inject(far, &frame);
        assert_quiet(xsk, 300, "an unregistered queue");
        assert_eq!(s.stats(Role::Underlay).unwrap().redirect_failed, 1);
    });
}

// ---------------------------------------------------------------------------
// Multi-buffer: headers past the first buffer.

/// IPv6 whose extension headers (hop-by-hop, then destination options, of
/// `ext` bytes each, Pad1 padding) put UDP to `dport` behind them.
fn udp6_behind(dst: Ipv6Addr, dport: u16, ext: usize, payload: &[u8]) -> Vec<u8> {
    let mut p = vec![0u8; 40 + 2 * ext + 8 + payload.len()];
    p[0] = 0x60;
    p[4..6].copy_from_slice(&((2 * ext + 8 + payload.len()) as u16).to_be_bytes());
    p[6] = 0; // hop-by-hop
    p[7] = 64;
    p[8..24].copy_from_slice(&"fd77::2".parse::<Ipv6Addr>().unwrap().octets());
    p[24..40].copy_from_slice(&dst.octets());
    let units = (ext / 8 - 1) as u8;
    p[40] = 60; // destination options
    p[41] = units;
    p[40 + ext] = 17;
    p[40 + ext + 1] = units;
    let u = 40 + 2 * ext;
    p[u..u + 2].copy_from_slice(&4000u16.to_be_bytes());
    p[u + 2..u + 4].copy_from_slice(&dport.to_be_bytes());
    p[u + 4..u + 6].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    p[u + 8..].copy_from_slice(payload);
    p
}

/// BPF_PROG_TEST_RUN of program `id` on `frame`, once: its verdict. A frame
/// longer than the first buffer the kernel makes (a page less its head-
/// and tailroom) is handed over multi-buffer, the rest in fragments.
fn test_run(id: u32, frame: &[u8]) -> u32 {
    #[repr(C)]
    #[derive(Default)]
    struct GetFd {
        id: u32,
        next_id: u32,
        open_flags: u32,
    }
    #[repr(C)]
    #[derive(Default)]
    struct TestRun {
        prog_fd: u32,
        retval: u32,
        data_size_in: u32,
        data_size_out: u32,
        data_in: u64,
        data_out: u64,
        repeat: u32,
        duration: u32,
    }
    let bpf = |cmd: libc::c_long, attr: *mut libc::c_void, size: usize| {
        // SAFETY: `attr` points at a live repr(C) prefix of union bpf_attr
        // of `size` bytes, which the kernel zero-extends.
        let r = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr, size) };
        assert!(r >= 0, "bpf({cmd}): {}", std::io::Error::last_os_error());
        r
    };
    let mut get = GetFd {
        id,
        ..GetFd::default()
    };
    // BPF_PROG_GET_FD_BY_ID
    let fd = bpf(
        13,
        (&mut get as *mut GetFd).cast(),
        std::mem::size_of::<GetFd>(),
    );
    // SAFETY: the kernel just returned this descriptor, owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    let mut run = TestRun {
        prog_fd: fd.as_raw_fd() as u32,
        data_size_in: frame.len() as u32,
        data_in: frame.as_ptr() as u64,
        ..TestRun::default()
    };
    // BPF_PROG_TEST_RUN
    bpf(
        10,
        (&mut run as *mut TestRun).cast(),
        std::mem::size_of::<TestRun>(),
    );
    run.retval
}

/// The underlay program finds UDP to a tunnel endpoint behind 4 KiB of
/// IPv6 extension headers, past the first buffer of a multi-buffer frame
/// (bpf_xdp_load_bytes), as it does in the first buffer: it redirects it
/// (to no socket here, so the frame goes to the kernel, counted as a
/// failed redirect), and passes UDP to another port.
#[test]
fn headers_past_the_first_buffer_are_read_from_the_fragments() {
    as_root(
        "headers_past_the_first_buffer_are_read_from_the_fragments",
        || {
            const XDP_PASS: u32 = 2;
            let mut s = Steering::load().unwrap();
            let id = s.program_id(Role::Underlay).unwrap();
            let ep: Ipv6Addr = "2001:db8::1".parse().unwrap();
            s.add_endpoint(IpAddr::V6(ep), 4789).unwrap();
            let payload = [0x5a; 1200];
            let mut seen = s.stats(Role::Underlay).unwrap();
            for (ext, port, tep_s) in [(8, 4789, true), (2048, 4789, true), (2048, 4790, false)] {
                let frame = from_far(0x86dd, &udp6_behind(ep, port, ext, &payload));
                assert_eq!(test_run(id, &frame), XDP_PASS);
                let now = s.stats(Role::Underlay).unwrap();
                let what = format!(
                    "{} bytes, UDP at {}, port {port}",
                    frame.len(),
                    14 + 40 + 2 * ext
                );
                assert_eq!(
                    now.redirect_failed - seen.redirect_failed,
                    u64::from(tep_s),
                    "{what}"
                );
                assert_eq!(now.passed - seen.passed, u64::from(!tep_s), "{what}");
                seen = now;
            }
        },
    );
}
