//! The XDP steering program of gateway mode: loading, attaching, and its maps.
//!
//! `bpf/tep_xdp.c` (built into the checked-in `bpf/tep_xdp.o` by
//! `bpf/build.sh`) holds two programs sharing their maps: `tep_underlay`
//! redirects UDP to one of tep's tunnel endpoints to the underlay role's
//! AF_XDP socket of the receiving queue, `tep_inner` redirects frames bound
//! for a tunnel (an inner MAC, everything not for this host under an L2
//! default tunnel, or IP to an inner prefix) to the inner role's socket.
//! Everything else goes on to the kernel (ARP, ND, the host's own traffic).
//!
//! [`Steering`] loads the object with aya, attaches each program to one
//! interface through a bpf_link (it goes away with the process: a crash
//! leaves no program behind), and offers a typed API over the maps. What aya
//! does not offer is written here: the bpf_link itself (so that detaching
//! is immediate, see `Attachment`), the netlink query of what is attached to
//! an interface (and the removal of a program attached the old way, by
//! netlink), finding and detaching another process's XDP link, and deleting
//! a socket from an XSKMAP.

use std::io;
use std::mem;
use std::net::IpAddr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

use aya::maps::lpm_trie::{Key as LpmKey, LpmTrie};
use aya::maps::{Array, HashMap, MapData, PerCpuArray};
use aya::programs::Xdp;
use aya::{Ebpf, Pod};

use crate::sys::{context, owned};

/// The compiled steering programs (see `bpf/build.sh`).
static OBJECT: &[u8] = aya::include_bytes_aligned!("../bpf/tep_xdp.o");

/// Each role's program name in the object, which is also the name the kernel
/// shows for it (how a stale tep program is recognised).
const PROGRAM_NAMES: [&str; 2] = ["tep_underlay", "tep_inner"];

// if_link.h: XDP attach flags (not in libc).
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
const XDP_FLAGS_HW_MODE: u32 = 1 << 3;
const XDP_FLAGS_REPLACE: u32 = 1 << 4;

/// Entries of each XSKMAP: the highest queue index a socket can serve, + 1.
pub const MAX_QUEUES: u32 = 64;

/// Which of the two interfaces a program, a socket map or counters belong to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The interface toward the other tunnel endpoints: `tep_underlay`,
    /// socket map `xsks_underlay`.
    Underlay,
    /// The interface toward the hosts behind the tunnels: `tep_inner`,
    /// socket map `xsks_inner`.
    Inner,
}

impl Role {
    fn index(self) -> usize {
        match self {
            Role::Underlay => 0,
            Role::Inner => 1,
        }
    }

    /// The program's name, in the object and in the kernel.
    pub fn program_name(self) -> &'static str {
        PROGRAM_NAMES[self.index()]
    }

    fn socket_map(self) -> &'static str {
        match self {
            Role::Underlay => "xsks_underlay",
            Role::Inner => "xsks_inner",
        }
    }
}

/// How to attach: in the driver, in the generic (skb) path, or the driver's
/// where it has XDP support and generic otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Mode {
    /// In the driver (XDP_FLAGS_DRV_MODE); fails where the driver has none.
    Native,
    /// After the skb is built (XDP_FLAGS_SKB_MODE): any device, slower, and
    /// AF_XDP only in copy mode.
    Generic,
    /// No mode flag: the kernel picks native where the driver has it.
    #[default]
    Auto,
}

/// The mode an attached program runs in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttachMode {
    /// In the driver.
    Native,
    /// In the generic path.
    Generic,
    /// Offloaded to the NIC.
    Offload,
}

impl std::fmt::Display for AttachMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            AttachMode::Native => "native",
            AttachMode::Generic => "generic",
            AttachMode::Offload => "offload",
        })
    }
}

/// A program attached to an interface, as the kernel reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttachedProgram {
    /// The kernel's program id.
    pub id: u32,
    /// Its name (up to 15 bytes; empty for programs loaded without one).
    pub name: String,
    /// Where it runs.
    pub mode: AttachMode,
}

/// The steering program's counters for one role, summed over the CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SteeringStats {
    /// Frames handed to the role's AF_XDP socket.
    pub redirected: u64,
    /// Frames left to the kernel because they are not tep's.
    pub passed: u64,
    /// Frames that were tep's but found no socket for their queue, and so
    /// went to the kernel. (A socket whose receive ring is full drops
    /// later: see its `rx_dropped`.)
    pub redirect_failed: u64,
    /// Inner side, networks configured: of the passed, frames with an
    /// 802.1Q VLAN no network has (or an 802.1ad tag).
    pub unknown_vlan: u64,
}

/// Key of `endpoints` (`struct endpoint_key` in tep_xdp.c).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct EndpointKey {
    family: u8,
    pad: u8,
    port: [u8; 2],
    addr: [u8; 16],
}

/// `struct tep_config` in tep_xdp.c.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct Config {
    own_mac: [u8; 6],
    l2_default: u8,
    networks: u8,
}

/// `NETWORKS_TAGGED` and `NETWORKS_UNTAGGED` of `tep_config.networks`.
const NETWORKS_TAGGED: u8 = 1;
const NETWORKS_UNTAGGED: u8 = 2;
/// Counters per role in `stats` (`STATS_PER_ROLE`).
const STATS_PER_ROLE: u32 = 4;
/// Entries of `inner_vlans`: every 12-bit VLAN ID.
pub const VLAN_IDS: u16 = 4096;

// SAFETY: both are repr(C) structs of byte fields and byte arrays: no
// padding, no pointers, every bit pattern valid.
unsafe impl Pod for EndpointKey {}
// SAFETY: as above.
unsafe impl Pod for Config {}

/// One role's attachment: its bpf_link and where.
///
/// The link is created here rather than by aya so that detaching is
/// BPF_LINK_DETACH on its descriptor: at once, even while someone else holds
/// a reference to the link (bpftool, or another tep looking for stale
/// links), which closing the descriptor alone would not undo.
#[derive(Debug)]
struct Attachment {
    link: OwnedFd,
    ifindex: u32,
    mode: AttachMode,
    detached: bool,
}

impl Attachment {
    fn detach(mut self) -> io::Result<()> {
        self.detached = true;
        // Also when a newer tep detached it already: the kernel then has
        // nothing to do and says so with success.
        bpf::link_detach(self.link.as_fd())
    }
}

impl Drop for Attachment {
    fn drop(&mut self) {
        if !self.detached {
            let _ = bpf::link_detach(self.link.as_fd());
        }
    }
}

/// The loaded steering programs and their maps; attach each role's program
/// to its interface with [`Steering::attach`]. Dropping it detaches both.
pub struct Steering {
    // Declared first so that the links go before the programs they hold.
    attached: [Option<Attachment>; 2],
    endpoints: HashMap<MapData, EndpointKey, u32>,
    inner_macs: HashMap<MapData, [u8; 6], u32>,
    inner_v4: LpmTrie<MapData, [u8; 4], u32>,
    inner_v6: LpmTrie<MapData, [u8; 16], u32>,
    config: Array<MapData, Config>,
    // What `config` holds: set in parts.
    inner: Config,
    inner_vlans: Array<MapData, u32>,
    // Raw: aya's XskMap has no delete and does not lend its descriptor.
    xsks: [MapData; 2],
    stats: PerCpuArray<MapData, u64>,
    ebpf: Ebpf,
}

fn aya_err(what: impl std::fmt::Display, e: impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("{what}: {e}"))
}

/// An error of aya's that may come from a failed syscall: the syscall's
/// error kind kept (so that the caller can tell "not allowed"), its words
/// added (aya's own say "code -1").
fn aya_syscall_err(what: impl std::fmt::Display, e: impl std::error::Error + 'static) -> io::Error {
    let mut source: Option<&(dyn std::error::Error + 'static)> = e.source();
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<io::Error>() {
            return io::Error::new(io.kind(), format!("{what}: {e}: {io}"));
        }
        source = s.source();
    }
    aya_err(what, e)
}

/// Maps a map error to io::Error, keeping the errno of a failed syscall.
fn map_err(what: &str, e: aya::maps::MapError) -> io::Error {
    match e {
        aya::maps::MapError::SyscallError(s) => context(s.io_error, format_args!("{what}")),
        aya::maps::MapError::KeyNotFound => io::Error::new(io::ErrorKind::NotFound, what),
        e => aya_err(what, e),
    }
}

impl Steering {
    /// Loads both programs and creates their maps (needs CAP_BPF and
    /// CAP_NET_ADMIN); nothing is attached yet.
    pub fn load() -> io::Result<Steering> {
        let mut ebpf = Ebpf::load(OBJECT).map_err(|e| aya_syscall_err("loading tep_xdp.o", e))?;
        for name in PROGRAM_NAMES {
            let prog: &mut Xdp = ebpf
                .program_mut(name)
                .ok_or_else(|| aya_err(name, "not in tep_xdp.o"))?
                .try_into()
                .map_err(|e| aya_err(name, e))?;
            prog.load()
                .map_err(|e| aya_syscall_err(format_args!("loading {name}"), e))?;
        }
        fn take<M: TryFrom<aya::maps::Map, Error = aya::maps::MapError>>(
            ebpf: &mut Ebpf,
            name: &str,
        ) -> io::Result<M> {
            let map = ebpf
                .take_map(name)
                .ok_or_else(|| aya_err(name, "map not in tep_xdp.o"))?;
            M::try_from(map).map_err(|e| aya_err(name, e))
        }
        Ok(Steering {
            attached: [None, None],
            endpoints: take(&mut ebpf, "endpoints")?,
            inner_macs: take(&mut ebpf, "inner_macs")?,
            inner_v4: take(&mut ebpf, "inner_v4")?,
            inner_v6: take(&mut ebpf, "inner_v6")?,
            config: take(&mut ebpf, "config")?,
            inner: Config::default(),
            inner_vlans: take(&mut ebpf, "inner_vlans")?,
            xsks: [
                xsk_map(&mut ebpf, Role::Underlay)?,
                xsk_map(&mut ebpf, Role::Inner)?,
            ],
            stats: take(&mut ebpf, "stats")?,
            ebpf,
        })
    }

    fn program(&mut self, role: Role) -> &mut Xdp {
        let prog = self
            .ebpf
            .program_mut(role.program_name())
            .expect("checked in load");
        prog.try_into().expect("checked in load")
    }

    /// The kernel's id of `role`'s program.
    pub fn program_id(&mut self, role: Role) -> io::Result<u32> {
        let info = self
            .program(role)
            .info()
            .map_err(|e| aya_err(role.program_name(), e))?;
        Ok(info.id())
    }

    /// Attaches `role`'s program to interface `ifindex` in `mode` and says
    /// which mode took effect.
    ///
    /// A program already on the interface that is one of tep's (by name: a
    /// stale one from an earlier run, attached by netlink or held by a link
    /// of another process) is detached first; anybody else's is left alone
    /// and the call fails with [`io::ErrorKind::ResourceBusy`] naming it.
    /// Attaching a role again moves it (the previous attachment is dropped
    /// first); a role cannot go where the other one is (InvalidInput,
    /// nothing changed).
    pub fn attach(&mut self, role: Role, ifindex: u32, mode: Mode) -> io::Result<AttachMode> {
        let name = role.program_name();
        let other = match role {
            Role::Underlay => Role::Inner,
            Role::Inner => Role::Underlay,
        };
        if self.attachment(other).is_some_and(|(i, _)| i == ifindex) {
            // One program per interface and mode: the two roles need two
            // interfaces (and the other one is ours, not stale).
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "interface {ifindex} already carries {}: one interface per role",
                    other.program_name()
                ),
            ));
        }
        self.detach(role)?;
        for prog in attached(ifindex)? {
            if !PROGRAM_NAMES.contains(&prog.name.as_str()) {
                return Err(io::Error::new(
                    io::ErrorKind::ResourceBusy,
                    format!(
                        "interface {ifindex} already has XDP program {:?} (id {}, {}): \
                         not tep's, so it is left alone",
                        prog.name, prog.id, prog.mode
                    ),
                ));
            }
            remove_stale(ifindex, &prog)?;
        }
        let flags = match mode {
            Mode::Native => XDP_FLAGS_DRV_MODE,
            Mode::Generic => XDP_FLAGS_SKB_MODE,
            Mode::Auto => 0,
        };
        let prog_fd = self
            .program(role)
            .fd()
            .map_err(|e| aya_err(name, e))?
            .as_fd();
        let link = bpf::link_create(prog_fd, ifindex, flags).map_err(|e| {
            context(
                e,
                format_args!("attaching {name} to interface {ifindex} ({mode:?})"),
            )
        })?;
        // By id alone: naming programs needs CAP_SYS_ADMIN
        // (BPF_PROG_GET_FD_BY_ID), which a clean start then does without.
        let prog_id = self.program_id(role)?;
        let mode = attached_ids(ifindex)?
            .into_iter()
            .find(|&(_, id)| id == prog_id)
            .map(|(mode, _)| mode)
            .ok_or_else(|| {
                io::Error::other(format!(
                    "{name} attached to interface {ifindex} but the kernel does not list it"
                ))
            })?;
        self.attached[role.index()] = Some(Attachment {
            link,
            ifindex,
            mode,
            detached: false,
        });
        Ok(mode)
    }

    /// Where `role`'s program is attached: interface index and mode.
    pub fn attachment(&self, role: Role) -> Option<(u32, AttachMode)> {
        self.attached[role.index()]
            .as_ref()
            .map(|a| (a.ifindex, a.mode))
    }

    /// Detaches `role`'s program (nothing when it is not attached).
    pub fn detach(&mut self, role: Role) -> io::Result<()> {
        match self.attached[role.index()].take() {
            Some(a) => a
                .detach()
                .map_err(|e| context(e, format_args!("detaching {}", role.program_name()))),
            None => Ok(()),
        }
    }

    /// Steers UDP to `addr`:`port` (the underlay's tunnel endpoint) to tep.
    pub fn add_endpoint(&mut self, addr: IpAddr, port: u16) -> io::Result<()> {
        self.endpoints
            .insert(endpoint_key(addr, port), 1, 0)
            .map_err(|e| map_err("endpoints: insert", e))
    }

    /// Stops steering `addr`:`port`; NotFound when it was not steered.
    pub fn remove_endpoint(&mut self, addr: IpAddr, port: u16) -> io::Result<()> {
        self.endpoints
            .remove(&endpoint_key(addr, port))
            .map_err(|e| map_err("endpoints: remove", e))
    }

    /// Steers frames to `mac` (a host behind an L2 tunnel) to tep.
    pub fn add_inner_mac(&mut self, mac: [u8; 6]) -> io::Result<()> {
        self.inner_macs
            .insert(mac, 1, 0)
            .map_err(|e| map_err("inner_macs: insert", e))
    }

    /// Stops steering frames to `mac`; NotFound when it was not steered.
    pub fn remove_inner_mac(&mut self, mac: [u8; 6]) -> io::Result<()> {
        self.inner_macs
            .remove(&mac)
            .map_err(|e| map_err("inner_macs: remove", e))
    }

    /// Steers IP packets to `addr`/`prefix_len` (an L3 tunnel's inner
    /// prefix) to tep; the bits past the prefix are ignored.
    pub fn add_inner_prefix(&mut self, addr: IpAddr, prefix_len: u8) -> io::Result<()> {
        match prefix(addr, prefix_len)? {
            Prefix::V4(key) => self.inner_v4.insert(&key, 1, 0),
            Prefix::V6(key) => self.inner_v6.insert(&key, 1, 0),
        }
        .map_err(|e| map_err("inner prefixes: insert", e))
    }

    /// Stops steering `addr`/`prefix_len` (the same prefix as added).
    pub fn remove_inner_prefix(&mut self, addr: IpAddr, prefix_len: u8) -> io::Result<()> {
        match prefix(addr, prefix_len)? {
            Prefix::V4(key) => self.inner_v4.remove(&key),
            Prefix::V6(key) => self.inner_v6.remove(&key),
        }
        .map_err(|e| map_err("inner prefixes: remove", e))
    }

    /// The inner interface's own MAC, and whether an L2 default tunnel takes
    /// every frame not addressed to it (broadcast and multicast included).
    pub fn set_inner_config(&mut self, own_mac: [u8; 6], l2_default: bool) -> io::Result<()> {
        self.write_config(Config {
            own_mac,
            l2_default: u8::from(l2_default),
            ..self.inner
        })
    }

    /// Networks on the inner interface (a trunk port): with `any`, frames
    /// tagged with a VLAN of [`set_inner_vlan`](Self::set_inner_vlan) go
    /// to tep; with `untagged`, so do untagged frames not addressed to
    /// the interface.
    pub fn set_inner_networks(&mut self, any: bool, untagged: bool) -> io::Result<()> {
        let mut networks = 0;
        if any {
            networks |= NETWORKS_TAGGED;
        }
        if untagged {
            networks |= NETWORKS_UNTAGGED;
        }
        self.write_config(Config {
            networks,
            ..self.inner
        })
    }

    fn write_config(&mut self, value: Config) -> io::Result<()> {
        self.config
            .set(0, value, 0)
            .map_err(|e| map_err("config: set", e))?;
        self.inner = value;
        Ok(())
    }

    /// Steers (`on`) or stops steering frames tagged with VLAN `vid` to
    /// tep (a network's VLAN).
    pub fn set_inner_vlan(&mut self, vid: u16, on: bool) -> io::Result<()> {
        if vid >= VLAN_IDS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("VLAN {vid}: past 4095"),
            ));
        }
        self.inner_vlans
            .set(u32::from(vid), u32::from(on), 0)
            .map_err(|e| map_err("inner_vlans: set", e))
    }

    /// Redirects `role`'s frames received on `queue` to the AF_XDP socket
    /// `socket` (bound to that interface and queue). The kernel drops the
    /// entry by itself when the socket closes.
    pub fn register_socket(
        &mut self,
        role: Role,
        queue: u32,
        socket: BorrowedFd<'_>,
    ) -> io::Result<()> {
        let fd: u32 = socket.as_raw_fd() as u32;
        bpf::map_update(self.xsks[role.index()].fd().as_fd(), &queue, &fd)
            .map_err(|e| context(e, format_args!("{}: set {queue}", role.socket_map())))
    }

    /// Stops redirecting `role`'s frames of `queue` (they go to the kernel).
    pub fn unregister_socket(&mut self, role: Role, queue: u32) -> io::Result<()> {
        bpf::map_delete(self.xsks[role.index()].fd().as_fd(), &queue)
            .map_err(|e| context(e, format_args!("{}: delete {queue}", role.socket_map())))
    }

    /// `role`'s counters, summed over the CPUs.
    pub fn stats(&self, role: Role) -> io::Result<SteeringStats> {
        let base = STATS_PER_ROLE * role.index() as u32;
        let sum = |what: u32| -> io::Result<u64> {
            let values = self
                .stats
                .get(&(base + what), 0)
                .map_err(|e| map_err("stats", e))?;
            Ok(values.iter().sum())
        };
        Ok(SteeringStats {
            redirected: sum(0)?,
            passed: sum(1)?,
            redirect_failed: sum(2)?,
            unknown_vlan: sum(3)?,
        })
    }
}

fn endpoint_key(addr: IpAddr, port: u16) -> EndpointKey {
    let mut key = EndpointKey {
        family: 0,
        pad: 0,
        port: port.to_be_bytes(),
        addr: [0; 16],
    };
    match addr {
        IpAddr::V4(a) => {
            key.family = 4;
            key.addr[..4].copy_from_slice(&a.octets());
        }
        IpAddr::V6(a) => {
            key.family = 6;
            key.addr = a.octets();
        }
    }
    key
}

enum Prefix {
    V4(LpmKey<[u8; 4]>),
    V6(LpmKey<[u8; 16]>),
}

/// The LPM key of `addr`/`len`, host bits cleared so that adding and
/// removing the same prefix always meet.
fn prefix(addr: IpAddr, len: u8) -> io::Result<Prefix> {
    fn masked<const N: usize>(mut bytes: [u8; N], len: u8) -> [u8; N] {
        for (i, b) in bytes.iter_mut().enumerate() {
            let keep = (usize::from(len).saturating_sub(8 * i)).min(8);
            *b &= !(0xffu8.checked_shr(keep as u32).unwrap_or(0));
        }
        bytes
    }
    let max = if addr.is_ipv4() { 32 } else { 128 };
    if len > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("prefix {addr}/{len}: longer than {max}"),
        ));
    }
    Ok(match addr {
        IpAddr::V4(a) => Prefix::V4(LpmKey::new(len.into(), masked(a.octets(), len))),
        IpAddr::V6(a) => Prefix::V6(LpmKey::new(len.into(), masked(a.octets(), len))),
    })
}

/// The XDP programs attached to interface `ifindex`, one per mode (the
/// kernel allows a generic and a native one at once), with their names.
pub fn attached(ifindex: u32) -> io::Result<Vec<AttachedProgram>> {
    let mut out = Vec::new();
    for (mode, id) in attached_ids(ifindex)? {
        let name = match bpf::prog_name(id) {
            Ok(n) => n,
            // Gone between the two questions (by kind: the error carries
            // context, not the errno).
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                return Err(io::Error::new(
                    e.kind(),
                    format!(
                        "interface {ifindex} already has XDP program id {id} ({mode}): \
                         telling whether it is a stale tep's needs CAP_SYS_ADMIN ({e}); \
                         remove it (`ip link set dev IFACE xdp off`) or start tep with CAP_SYS_ADMIN"
                    ),
                ))
            }
            Err(e) => return Err(e),
        };
        out.push(AttachedProgram { id, name, mode });
    }
    Ok(out)
}

/// The ids of the XDP programs on `ifindex`, one per mode (no privilege
/// needed: rtnetlink says).
fn attached_ids(ifindex: u32) -> io::Result<Vec<(AttachMode, u32)>> {
    let ids = netlink::xdp_prog_ids(ifindex)?;
    Ok([
        (AttachMode::Native, ids.drv),
        (AttachMode::Generic, ids.skb),
        (AttachMode::Offload, ids.hw),
    ]
    .into_iter()
    .filter(|&(_, id)| id != 0)
    .collect())
}

/// Removes tep program `prog` from `ifindex`: held by an XDP link (of
/// another process, or leaked by this one), the link is detached; attached
/// by netlink, it is removed by netlink, only if it is still that program.
fn remove_stale(ifindex: u32, prog: &AttachedProgram) -> io::Result<()> {
    if let Some(link) = bpf::xdp_link_on(ifindex, prog.id)? {
        return bpf::link_detach(link.as_fd()).map_err(|e| {
            context(
                e,
                format_args!("detaching the stale {:?}'s link", prog.name),
            )
        });
    }
    let prog_fd = bpf::prog_fd(prog.id)?;
    let mode_flag = match prog.mode {
        AttachMode::Native => XDP_FLAGS_DRV_MODE,
        AttachMode::Generic => XDP_FLAGS_SKB_MODE,
        AttachMode::Offload => XDP_FLAGS_HW_MODE,
    };
    netlink::xdp_remove(ifindex, prog_fd.as_raw_fd(), mode_flag).map_err(|e| {
        context(
            e,
            format_args!("removing the stale {:?} (id {})", prog.name, prog.id),
        )
    })
}

impl std::fmt::Debug for Steering {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Steering")
            .field("underlay", &self.attachment(Role::Underlay))
            .field("inner", &self.attachment(Role::Inner))
            .finish_non_exhaustive()
    }
}

/// `role`'s XSKMAP, taken out of `ebpf`.
fn xsk_map(ebpf: &mut Ebpf, role: Role) -> io::Result<MapData> {
    match ebpf.take_map(role.socket_map()) {
        Some(aya::maps::Map::XskMap(m)) => Ok(m),
        _ => Err(aya_err(
            role.socket_map(),
            "no XSKMAP of that name in tep_xdp.o",
        )),
    }
}

/// The few bpf(2) commands aya does not expose.
mod bpf {
    use super::*;
    use std::os::fd::OwnedFd;

    const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
    const BPF_MAP_DELETE_ELEM: libc::c_long = 3;
    const BPF_PROG_GET_FD_BY_ID: libc::c_long = 13;
    const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;
    const BPF_LINK_GET_FD_BY_ID: libc::c_long = 30;
    const BPF_LINK_GET_NEXT_ID: libc::c_long = 31;
    const BPF_LINK_DETACH: libc::c_long = 34;
    const BPF_LINK_TYPE_XDP: u32 = 6;

    /// bpf(cmd, attr, size_of(attr)): every attr here is a repr(C) prefix
    /// of `union bpf_attr`, which the kernel zero-extends.
    fn bpf<A>(cmd: libc::c_long, attr: &mut A) -> io::Result<libc::c_long> {
        // SAFETY: `attr` is a live, exclusive repr(C) value of the layout
        // the kernel expects for `cmd`, and its exact size is passed; the
        // kernel writes at most that many bytes back.
        let ret = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                cmd,
                (attr as *mut A).cast::<libc::c_void>(),
                mem::size_of::<A>(),
            )
        };
        if ret < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(ret)
        }
    }

    #[repr(C)]
    struct MapElem {
        map_fd: u32,
        pad: u32,
        key: u64,
        value: u64,
        flags: u64,
    }

    /// BPF_MAP_UPDATE_ELEM; `K` and `V` are the map's key and value types.
    pub(super) fn map_update<K, V>(map: BorrowedFd<'_>, key: &K, value: &V) -> io::Result<()> {
        let mut attr = MapElem {
            map_fd: map.as_raw_fd() as u32,
            pad: 0,
            key: (key as *const K) as u64,
            value: (value as *const V) as u64,
            flags: 0,
        };
        bpf(BPF_MAP_UPDATE_ELEM, &mut attr).map(drop)
    }

    /// BPF_MAP_DELETE_ELEM; `K` is the map's key type.
    pub(super) fn map_delete<K>(map: BorrowedFd<'_>, key: &K) -> io::Result<()> {
        let mut attr = MapElem {
            map_fd: map.as_raw_fd() as u32,
            pad: 0,
            key: (key as *const K) as u64,
            value: 0,
            flags: 0,
        };
        bpf(BPF_MAP_DELETE_ELEM, &mut attr).map(drop)
    }

    #[repr(C)]
    struct GetById {
        id: u32,
        next_id: u32,
        open_flags: u32,
    }

    fn fd_by_id(cmd: libc::c_long, id: u32) -> io::Result<OwnedFd> {
        let mut attr = GetById {
            id,
            next_id: 0,
            open_flags: 0,
        };
        owned(bpf(cmd, &mut attr)? as libc::c_int)
    }

    pub(super) fn prog_fd(id: u32) -> io::Result<OwnedFd> {
        fd_by_id(BPF_PROG_GET_FD_BY_ID, id).map_err(|e| context(e, format_args!("program {id}")))
    }

    /// BPF_OBJ_GET_INFO_BY_FD into `info`, a prefix of the kernel's info
    /// struct for that object kind.
    fn info<I>(fd: BorrowedFd<'_>, info: &mut I) -> io::Result<()> {
        #[repr(C)]
        struct Attr {
            bpf_fd: u32,
            info_len: u32,
            info: u64,
        }
        let mut attr = Attr {
            bpf_fd: fd.as_raw_fd() as u32,
            info_len: mem::size_of::<I>() as u32,
            info: (info as *mut I) as u64,
        };
        bpf(BPF_OBJ_GET_INFO_BY_FD, &mut attr).map(drop)
    }

    /// The name of program `id` (struct bpf_prog_info up to `name`).
    pub(super) fn prog_name(id: u32) -> io::Result<String> {
        #[repr(C)]
        struct ProgInfo {
            kind: u32,
            id: u32,
            tag: [u8; 8],
            jited_prog_len: u32,
            xlated_prog_len: u32,
            jited_prog_insns: u64,
            xlated_prog_insns: u64,
            load_time: u64,
            created_by_uid: u32,
            nr_map_ids: u32,
            map_ids: u64,
            name: [u8; 16],
        }
        let fd = prog_fd(id)?;
        // SAFETY: integers and byte arrays: all zeroes is valid.
        let mut pi: ProgInfo = unsafe { mem::zeroed() };
        info(fd.as_fd(), &mut pi).map_err(|e| context(e, format_args!("program {id}: info")))?;
        let len = pi
            .name
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(pi.name.len());
        Ok(String::from_utf8_lossy(&pi.name[..len]).into_owned())
    }

    /// The XDP link on `ifindex` holding program `prog_id`, if any.
    pub(super) fn xdp_link_on(ifindex: u32, prog_id: u32) -> io::Result<Option<OwnedFd>> {
        #[repr(C)]
        struct LinkInfo {
            kind: u32,
            id: u32,
            prog_id: u32,
            pad: u32,
            // The first field of the union for XDP links (8-aligned).
            ifindex: u32,
            rest: [u32; 7],
        }
        let mut next = 0u32;
        loop {
            let mut attr = GetById {
                id: next,
                next_id: 0,
                open_flags: 0,
            };
            match bpf(BPF_LINK_GET_NEXT_ID, &mut attr) {
                Ok(_) => next = attr.next_id,
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
                Err(e) => return Err(context(e, "BPF_LINK_GET_NEXT_ID")),
            }
            let fd = match fd_by_id(BPF_LINK_GET_FD_BY_ID, next) {
                Ok(fd) => fd,
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => continue,
                Err(e) => return Err(context(e, format_args!("link {next}"))),
            };
            // SAFETY: integers only: all zeroes is valid.
            let mut li: LinkInfo = unsafe { mem::zeroed() };
            info(fd.as_fd(), &mut li).map_err(|e| context(e, format_args!("link {next}: info")))?;
            if li.kind == BPF_LINK_TYPE_XDP && li.ifindex == ifindex && li.prog_id == prog_id {
                return Ok(Some(fd));
            }
        }
    }

    /// BPF_LINK_CREATE of an XDP link for `prog` on `ifindex` with mode
    /// `flags` (0: the kernel picks).
    pub(super) fn link_create(
        prog: BorrowedFd<'_>,
        ifindex: u32,
        flags: u32,
    ) -> io::Result<OwnedFd> {
        const BPF_LINK_CREATE: libc::c_long = 28;
        const BPF_XDP: u32 = 37;
        #[repr(C)]
        struct Attr {
            prog_fd: u32,
            target_ifindex: u32,
            attach_type: u32,
            flags: u32,
        }
        let mut attr = Attr {
            prog_fd: prog.as_raw_fd() as u32,
            target_ifindex: ifindex,
            attach_type: BPF_XDP,
            flags,
        };
        owned(bpf(BPF_LINK_CREATE, &mut attr)? as libc::c_int)
    }

    /// BPF_LINK_DETACH: the link stays (its holder's descriptor too) but
    /// no longer attaches anything.
    pub(super) fn link_detach(link: BorrowedFd<'_>) -> io::Result<()> {
        #[repr(C)]
        struct Attr {
            link_fd: u32,
        }
        let mut attr = Attr {
            link_fd: link.as_raw_fd() as u32,
        };
        bpf(BPF_LINK_DETACH, &mut attr).map(drop)
    }
}

/// The XDP attributes of one interface over rtnetlink (aya does its own
/// XDP netlink privately).
mod netlink {
    use super::*;
    use crate::rtnl::{attrs, transact, Request, NESTED};

    const IFLA_XDP: u16 = 43;
    const IFLA_XDP_FD: u16 = 1;
    const IFLA_XDP_FLAGS: u16 = 3;
    const IFLA_XDP_DRV_PROG_ID: u16 = 5;
    const IFLA_XDP_SKB_PROG_ID: u16 = 6;
    const IFLA_XDP_HW_PROG_ID: u16 = 7;
    const IFLA_XDP_EXPECTED_FD: u16 = 8;

    /// Program ids per mode; 0 where none.
    #[derive(Debug, Default)]
    pub(super) struct XdpIds {
        pub drv: u32,
        pub skb: u32,
        pub hw: u32,
    }

    /// The XDP program ids attached to `ifindex` (RTM_GETLINK).
    pub(super) fn xdp_prog_ids(ifindex: u32) -> io::Result<XdpIds> {
        let mut req = Request::new(libc::RTM_GETLINK, ifindex);
        let mut ids = XdpIds::default();
        let ifi_len = mem::size_of::<libc::ifinfomsg>();
        transact(req.finish(), |kind, payload| {
            if kind != libc::RTM_NEWLINK || payload.len() < ifi_len {
                return;
            }
            attrs(&payload[ifi_len..], |kind, value| {
                if kind != IFLA_XDP {
                    return;
                }
                attrs(value, |kind, value| {
                    let Ok(v) = <[u8; 4]>::try_from(value) else {
                        return;
                    };
                    let id = u32::from_ne_bytes(v);
                    match kind {
                        IFLA_XDP_DRV_PROG_ID => ids.drv = id,
                        IFLA_XDP_SKB_PROG_ID => ids.skb = id,
                        IFLA_XDP_HW_PROG_ID => ids.hw = id,
                        _ => {}
                    }
                });
            });
        })
        .map_err(|e| context(e, format_args!("RTM_GETLINK {ifindex}")))?;
        Ok(ids)
    }

    /// Removes the netlink-attached program `expected` (a descriptor of it)
    /// from `ifindex` in mode `mode_flag`, only if it is still the one there
    /// (XDP_FLAGS_REPLACE).
    pub(super) fn xdp_remove(ifindex: u32, expected: RawFd, mode_flag: u32) -> io::Result<()> {
        let mut req = Request::new(libc::RTM_SETLINK, ifindex);
        let nest = req.begin(IFLA_XDP | NESTED);
        req.attr_i32(IFLA_XDP_FD, -1);
        req.attr_i32(IFLA_XDP_FLAGS, (mode_flag | XDP_FLAGS_REPLACE) as i32);
        req.attr_i32(IFLA_XDP_EXPECTED_FD, expected);
        req.end(nest);
        transact(req.finish(), |_, _| {})
    }
}
