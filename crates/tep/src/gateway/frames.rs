//! How big a frame gateway mode takes, and what its buffers are for it.
//!
//! The UMEM is in aligned mode, whose chunks are at most a page: a frame
//! lands in one chunk after the kernel's 256 bytes of XDP headroom, so one
//! descriptor holds 3,840 bytes at most. A longer frame (jumbo MTUs)
//! arrives as a chain of descriptors (AF_XDP multi-buffer, XDP_USE_SG),
//! one chunk each. Unaligned mode would not help: a descriptor there is
//! still at most a chunk long, and a chunk at most a page.
//!
//! So a buffer of the pool is as many pages as the largest frame needs,
//! and the kernel gets only its first page on a fill ring: a frame that
//! fits a chunk stays where the kernel wrote it (zero-copy, as at MTU
//! 1500, where a buffer is one page); the later parts of a chain are
//! copied behind the first in its buffer (counted: `xsk_rx_chained`), and
//! a frame longer than a chunk leaves as a chain over its buffer's pages
//! without a copy (`xsk_tx_chained`). The price is memory: at MTU 9000 a
//! buffer is three pages, of which the kernel fills one.

use tep_dataplane::HEADROOM;

/// Bytes per UMEM chunk: a page, the most aligned mode takes.
pub const CHUNK: usize = 4096;

/// The kernel's XDP headroom in front of a received frame
/// (XDP_PACKET_HEADROOM), which is also tep's [`HEADROOM`].
const XDP_HEADROOM: usize = 256;
const _: () = assert!(HEADROOM == XDP_HEADROOM);

/// The longest frame one descriptor holds.
pub const FRAME_ROOM: usize = CHUNK - XDP_HEADROOM;

/// Ethernet header and two VLAN tags: what a frame adds to the MTU.
const L2_OVERHEAD: usize = 14 + 2 * 4;

/// The largest MTU whose frames (two VLAN tags included) fit one
/// descriptor: what gateway mode takes without multi-buffer.
pub const SINGLE_BUFFER_MTU: usize = FRAME_ROOM - L2_OVERHEAD;

/// The largest MTU an interface may have (a veth's, ETH_MAX_MTU): buffers
/// are sized for it at most, 17 pages.
const MAX_MTU: usize = 65535;

/// The pool's buffers for frames up to an MTU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Bytes per buffer, headroom included: a whole number of chunks.
    pub buffer: usize,
    /// Frames may take more than one descriptor: the sockets bind with
    /// XDP_USE_SG.
    pub multi_buffer: bool,
}

impl Layout {
    /// Buffers for frames of `mtu` bytes of payload (the larger of the
    /// two interfaces'), two VLAN tags included.
    pub fn for_mtu(mtu: u32) -> Layout {
        let frame = (mtu as usize).min(MAX_MTU) + L2_OVERHEAD;
        Layout {
            buffer: (HEADROOM + frame).div_ceil(CHUNK) * CHUNK,
            multi_buffer: frame > FRAME_ROOM,
        }
    }

    /// Chunks per buffer.
    pub fn pages(&self) -> usize {
        self.buffer / CHUNK
    }
}

/// What to tell a user whose interface `name` (MTU `mtu`) refused
/// multi-buffer, in attaching the steering program or binding a socket
/// with XDP_USE_SG (`what` and the kernel's `error`).
pub fn no_multi_buffer(field: &str, name: &str, mtu: u32, what: &str, error: &str) -> String {
    format!(
        "{field}: {name} has MTU {mtu}, above the {SINGLE_BUFFER_MTU} that fits one \
         AF_XDP buffer (a {CHUNK}-byte chunk after the kernel's {XDP_HEADROOM}-byte \
         headroom, two VLAN tags allowed), so gateway mode needs XDP multi-buffer there, \
         and {what} failed: {error}. Lower the MTU of {name} (and of the other interface) \
         to {SINGLE_BUFFER_MTU} or less (the driver's own single-buffer limit may be \
         lower: 3506 on a veth), or use a kernel and driver with XDP multi-buffer \
         (Linux 6.6 or later; for zero-copy, a driver that has it)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_grow_with_the_mtu() {
        // MTU 1500: a page, one descriptor per frame, as always.
        assert_eq!(
            Layout::for_mtu(1500),
            Layout {
                buffer: 4096,
                multi_buffer: false
            }
        );
        let edge = Layout::for_mtu(SINGLE_BUFFER_MTU as u32);
        assert_eq!((edge.pages(), edge.multi_buffer), (1, false));
        let past = Layout::for_mtu(SINGLE_BUFFER_MTU as u32 + 1);
        assert_eq!((past.pages(), past.multi_buffer), (2, true));
        // MTU 9000: 9022 bytes of frame behind 256 of headroom.
        let jumbo = Layout::for_mtu(9000);
        assert_eq!((jumbo.pages(), jumbo.multi_buffer), (3, true));
        assert!(jumbo.buffer - HEADROOM >= 9000 + 22);
        // A veth's largest, and beyond: bounded at 17 pages.
        assert_eq!(Layout::for_mtu(65535).pages(), 17);
        assert_eq!(Layout::for_mtu(u32::MAX).pages(), 17);
    }

    #[test]
    fn the_refusal_says_what_to_do() {
        let m = no_multi_buffer(
            "gateway.underlay",
            "tB",
            9000,
            "attaching the steering program",
            "Numerical result out of range (os error 34)",
        );
        for part in [
            "gateway.underlay: tB has MTU 9000",
            "above the 3818 that fits one AF_XDP buffer",
            "attaching the steering program failed: Numerical result out of range",
            "Lower the MTU of tB",
            "to 3818 or less",
            "XDP multi-buffer",
        ] {
            assert!(m.contains(part), "{part:?} not in {m}");
        }
    }
}
