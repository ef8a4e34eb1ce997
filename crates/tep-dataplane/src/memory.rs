//! Large tables read at random (the session tables at a million
//! sessions): their own allocations, aligned to huge pages, with the
//! kernel asked for huge pages before the first write.
//!
//! Why: a table of hundreds of megabytes on 4 KiB pages costs a TLB miss
//! (a page walk) on nearly every random read as well as the cache miss;
//! on 2 MiB pages a million sessions' tables are a few hundred TLB
//! entries. Measured with `tep-bench pipeline --sessions 1000000
//! --families ipv4` (1492 bytes), small → huge pages, ns a packet: burst 1
//! downlink 254–261 → 212–217, uplink 242–248 → 176–180; bursts of 8 about
//! 4 % less. The crate makes no syscalls, so the asking is the owner's: it
//! gives a function once ([`set_huge_page_advice`], `madvise(MADV_HUGEPAGE)`
//! in tep-sys, after dropping the small pages that memory the allocator
//! hands out again already has); without one, tables are the same, on
//! whatever pages the kernel gives.

use core::ptr::NonNull;
use std::alloc::{self, Layout};
use std::sync::OnceLock;

/// A huge page: allocations of at least this size are aligned to it.
pub const HUGE_PAGE: usize = 2 << 20;

static ADVICE: OnceLock<fn(usize, usize)> = OnceLock::new();

/// Sets how to ask the kernel for huge pages over `(address, bytes)`
/// (whole huge pages, aligned, not yet written: the function may drop
/// what backs them, which then reads as zeros), once per process; later
/// calls change nothing. Called by the binaries before they build tables.
pub fn set_huge_page_advice(advise: fn(usize, usize)) {
    let _ = ADVICE.set(advise);
}

/// Asks for huge pages over the whole huge pages inside `addr..addr +
/// len` (memory the caller owns, not yet written), where the owner gave a
/// way to ask ([`set_huge_page_advice`]).
pub(crate) fn advise(addr: usize, len: usize) {
    let start = addr.next_multiple_of(HUGE_PAGE);
    let end = (addr + len) / HUGE_PAGE * HUGE_PAGE;
    if let (Some(advise), true) = (ADVICE.get(), end > start) {
        advise(start, end - start);
    }
}

/// A fixed array of `T` in an allocation of its own, aligned to a huge
/// page where it spans one or more, the kernel asked for huge pages there
/// before the elements are written.
pub(crate) struct Table<T> {
    first: NonNull<T>,
    len: usize,
    layout: Layout,
}

// SAFETY: a Table owns its elements as a Box<[T]> would.
unsafe impl<T: Send> Send for Table<T> {}
// SAFETY: shared access gives only &T, as a Box<[T]>'s does.
unsafe impl<T: Sync> Sync for Table<T> {}

impl<T> Table<T> {
    /// `len` elements, element `i` being `init(i)`.
    pub fn new(len: usize, mut init: impl FnMut(usize) -> T) -> Table<T> {
        let bytes = len
            .checked_mul(core::mem::size_of::<T>())
            .expect("table size");
        let align = if bytes >= HUGE_PAGE {
            HUGE_PAGE
        } else {
            core::mem::align_of::<T>()
        };
        let layout = Layout::from_size_align(bytes.max(1), align.max(core::mem::align_of::<T>()))
            .expect("table layout");
        // SAFETY: the layout's size is not zero.
        let raw = unsafe { alloc::alloc(layout) };
        let Some(raw) = NonNull::new(raw) else {
            alloc::handle_alloc_error(layout)
        };
        if align == HUGE_PAGE {
            advise(raw.as_ptr() as usize, bytes);
        }
        let first = raw.cast::<T>();
        for i in 0..len {
            // SAFETY: `i < len` elements fit the allocation, aligned for T;
            // each is written once, before any is read.
            unsafe { first.as_ptr().add(i).write(init(i)) };
        }
        Table { first, len, layout }
    }
}

impl<T> Default for Table<T> {
    /// No elements.
    fn default() -> Table<T> {
        Table::new(0, |_| unreachable!("no elements"))
    }
}

impl<T> core::ops::Deref for Table<T> {
    type Target = [T];
    #[inline]
    fn deref(&self) -> &[T] {
        // SAFETY: `len` elements written at `first`, alive with `self`.
        unsafe { core::slice::from_raw_parts(self.first.as_ptr(), self.len) }
    }
}

impl<T> core::ops::DerefMut for Table<T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as for Deref, and `&mut self` is the only access.
        unsafe { core::slice::from_raw_parts_mut(self.first.as_ptr(), self.len) }
    }
}

impl<T> Drop for Table<T> {
    fn drop(&mut self) {
        // SAFETY: the elements are initialized and dropped once; the
        // allocation was made with `layout`.
        unsafe {
            core::ptr::drop_in_place(core::ptr::slice_from_raw_parts_mut(
                self.first.as_ptr(),
                self.len,
            ));
            alloc::dealloc(self.first.as_ptr().cast(), self.layout);
        }
    }
}

impl<T: core::fmt::Debug> core::fmt::Debug for Table<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Table")
            .field("len", &self.len)
            .field("huge", &(self.layout.align() == HUGE_PAGE))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn large_tables_are_aligned_and_small_ones_are_not_padded() {
        let big: Table<u64> = Table::new(HUGE_PAGE / 8 + 5, |i| i as u64);
        assert_eq!(big.as_ptr() as usize % HUGE_PAGE, 0);
        assert_eq!(big.len(), HUGE_PAGE / 8 + 5);
        assert!(big.iter().enumerate().all(|(i, &v)| v == i as u64));
        let small: Table<u32> = Table::new(3, |i| 7 * i as u32);
        assert_eq!(&small[..], &[0, 7, 14]);
        let empty: Table<u64> = Table::new(0, |_| unreachable!());
        assert!(empty.is_empty());
    }

    /// The owner's advice covers a large table's whole huge pages before
    /// it is written; a small table asks for none.
    #[test]
    fn large_tables_ask_for_huge_pages() {
        recorded::install();
        let big: Table<[u8; 64]> = Table::new(3 * HUGE_PAGE / 64 + 1, |_| [1; 64]);
        let small: Table<[u8; 64]> = Table::new(HUGE_PAGE / 64 - 1, |_| [2; 64]);
        let advised = recorded::advised();
        let at = |t: &Table<[u8; 64]>| t.as_ptr() as usize;
        assert!(advised.contains(&(at(&big), 3 * HUGE_PAGE)), "{advised:?}");
        assert!(advised.iter().all(|&(a, _)| a != at(&small)));
        assert!(big.iter().all(|l| l[63] == 1) && small.iter().all(|l| l[0] == 2));
    }

    #[test]
    fn every_element_is_dropped_once() {
        static DROPS: AtomicUsize = AtomicUsize::new(0);
        struct Counted;
        impl Drop for Counted {
            fn drop(&mut self) {
                DROPS.fetch_add(1, Ordering::Relaxed);
            }
        }
        drop(Table::new(10, |_| Counted));
        assert_eq!(DROPS.load(Ordering::Relaxed), 10);
    }
}

/// For tests: advice that records what it was asked, installed once for
/// the test binary (the hook is set once a process).
#[cfg(test)]
pub(crate) mod recorded {
    use std::sync::Mutex;

    static ADVISED: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());

    /// Records from now on (before the tables of a test are made).
    pub(crate) fn install() {
        super::set_huge_page_advice(|a, l| {
            ADVISED
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((a, l))
        });
    }

    /// Every `(address, bytes)` advised since [`install`].
    pub(crate) fn advised() -> Vec<(usize, usize)> {
        ADVISED.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}
