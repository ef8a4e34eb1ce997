//! Advice to the kernel about memory tep allocated.

use std::io;

/// Asks for transparent huge pages over the whole 2 MiB pages inside
/// `addr..addr + len` (`madvise(MADV_HUGEPAGE)`), for a large table read
/// at random (the session tables, the overlay's FDB): with 4 KiB pages
/// each lookup also missed the TLB. The range must be memory the caller
/// owns and has not written yet: the small pages that back it already are
/// dropped first (`MADV_DONTNEED`; it reads as zeros after), since the
/// advice only shapes pages faulted later. An allocator hands out memory
/// it had before (a table made after others were freed), and there the
/// advice alone left the table on small pages: of two identical UPFs of a
/// million sessions in one process, the second's downlink took 8–13 %
/// longer a packet, and 1–3 % once its pages were dropped first
/// (`tep-bench pipeline --sessions 1,1000000`). A kernel with THP `never`
/// or without it refuses; the table works the same, slower.
pub fn advise_huge_pages(addr: usize, len: usize) -> io::Result<()> {
    const HUGE: usize = 2 << 20;
    let start = addr.next_multiple_of(HUGE);
    let end = (addr + len) / HUGE * HUGE;
    if end <= start {
        return Ok(());
    }
    let range = start as *mut libc::c_void;
    // SAFETY: the range lies inside memory the caller owns (an allocation
    // of at least `len` bytes at `addr`, private and anonymous as the
    // allocator's are) and has not written: dropping its pages loses
    // nothing it holds, and MADV_HUGEPAGE changes no content.
    let rc = unsafe {
        libc::madvise(range, end - start, libc::MADV_DONTNEED);
        libc::madvise(range, end - start, libc::MADV_HUGEPAGE)
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_without_a_whole_huge_page_asks_nothing() {
        assert!(advise_huge_pages(4096, 4096).is_ok());
    }

    /// Memory handed out again (written before) is dropped, so that huge
    /// pages can back it: it reads as zeros, and the bytes beside the
    /// whole huge pages are kept.
    #[test]
    fn pages_already_there_are_dropped() {
        let mut v = vec![0xa5u8; 8 << 20];
        let (addr, len) = (v.as_ptr() as usize, v.len());
        let inner = addr.next_multiple_of(2 << 20) - addr;
        match advise_huge_pages(addr, len) {
            Ok(()) => {}
            Err(e) => assert_eq!(e.raw_os_error(), Some(libc::EINVAL), "{e}"),
        }
        assert!(v[inner..inner + (2 << 20)].iter().all(|&b| b == 0));
        if inner > 0 {
            assert!(v[..inner].iter().all(|&b| b == 0xa5), "outside: kept");
        }
        v[inner] = 1;
        assert_eq!(v[inner], 1);
    }

    #[test]
    fn a_large_allocation_takes_the_advice() {
        let v = vec![0u8; 8 << 20];
        // THP "never" or absent: EINVAL; anything else is a bug here.
        match advise_huge_pages(v.as_ptr() as usize, v.len()) {
            Ok(()) => {}
            Err(e) => assert_eq!(e.raw_os_error(), Some(libc::EINVAL), "{e}"),
        }
    }
}
