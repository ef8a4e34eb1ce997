//! Advice to the kernel about memory tep allocated.

use std::io;

/// Asks for transparent huge pages over the whole 2 MiB pages inside
/// `addr..addr + len` (`madvise(MADV_HUGEPAGE)`), for a large table read
/// at random (the overlay's FDB): with 4 KiB pages each lookup also missed
/// the TLB. A kernel with THP `never` or without it refuses; the table
/// works the same, slower.
pub fn advise_huge_pages(addr: usize, len: usize) -> io::Result<()> {
    const HUGE: usize = 2 << 20;
    let start = addr.next_multiple_of(HUGE);
    let end = (addr + len) / HUGE * HUGE;
    if end <= start {
        return Ok(());
    }
    // SAFETY: madvise only advises: the range lies inside memory the
    // caller owns (an allocation of at least `len` bytes at `addr`), and
    // MADV_HUGEPAGE changes no content.
    let rc = unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
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
