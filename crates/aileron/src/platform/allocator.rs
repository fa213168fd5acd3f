//! The executables' global allocator: mimalloc (docs/decisions/0004-actions-and-runs.md,
//! "Allocator"), called the way its plain `malloc` is fastest.
//!
//! The `mimalloc` crate's allocator passes every request to `mi_malloc_aligned`, even one that
//! asks for no more than a word's alignment. In mimalloc 3 that call takes its fast path only
//! when the free list of the block size's page is not empty at that moment; otherwise it falls to
//! the generic aligned path, which over-allocates (`size + align - 1`, the next size class) unless
//! the block size is a power of two. Most of a run's allocations are small and are freed and made
//! again on one thread, so their page's free list is often momentarily empty: counted with
//! callgrind, 5 of a traced run's 8 span allocations took that path, ~190 instructions each
//! (BENCHMARKS.md, issue 49, 2026-12-04). Every block mimalloc hands out is a whole number of
//! words and starts on a word, so a request whose alignment is at most a word and at most its
//! size is met by any block of its size: plain `mi_malloc`. Anything else still goes the aligned
//! way.

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

use libmimalloc_sys as mi;

pub struct Allocator;

/// What every mimalloc block is aligned to: its block sizes are whole words and a page's first
/// block starts on at least 16 bytes.
const WORD: usize = std::mem::size_of::<usize>();

/// Whether any block of `size` bytes meets `align`: a word at most, and no more than the size
/// (std's own condition for plain `malloc`).
#[inline]
fn plain(size: usize, align: usize) -> bool {
    align <= WORD && align <= size
}

/// `layout`'s block from `plain_call` when any block of its size meets its alignment, else from
/// `aligned_call`: mimalloc's `malloc` or `zalloc` and their aligned forms.
#[inline]
fn allocate(
    layout: Layout,
    plain_call: unsafe extern "C" fn(usize) -> *mut c_void,
    aligned_call: unsafe extern "C" fn(usize, usize) -> *mut c_void,
) -> *mut u8 {
    // SAFETY: mimalloc's allocation calls have no preconditions beyond a power-of-two alignment,
    // which `Layout` guarantees.
    unsafe {
        if plain(layout.size(), layout.align()) {
            plain_call(layout.size()).cast()
        } else {
            aligned_call(layout.size(), layout.align()).cast()
        }
    }
}

// SAFETY: every path returns mimalloc's memory of at least `layout.size()` bytes aligned to
// `layout.align()` (the plain calls only when `plain` says any block is) or null, and frees it
// with `mi_free`, which takes a block from any of these calls.
unsafe impl GlobalAlloc for Allocator {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        allocate(layout, mi::mi_malloc, mi::mi_malloc_aligned)
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        allocate(layout, mi::mi_zalloc, mi::mi_zalloc_aligned)
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` came from this allocator (the caller's contract).
        unsafe { mi::mi_free(ptr.cast::<c_void>()) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from this allocator with `layout` (the caller's contract); the new
        // block meets `layout.align()` as in `alloc`.
        unsafe {
            if plain(new_size, layout.align()) {
                mi::mi_realloc(ptr.cast::<c_void>(), new_size).cast()
            } else {
                mi::mi_realloc_aligned(ptr.cast::<c_void>(), new_size, layout.align()).cast()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every size up to 256 bytes, then sizes past the small classes, and large ones (huge
    /// blocks among them), at every alignment up to 4 KiB: each block is aligned as asked, a
    /// zeroed one reads zero, and a block grown or shrunk keeps its bytes and its alignment. Each
    /// is freed (a block freed with the wrong call would corrupt the heap the later allocations
    /// come from).
    #[test]
    fn blocks_meet_every_alignment_through_allocation_growth_and_shrinking() {
        let large = [49_152, 65_536, 1_000_000, 1 << 20, (1 << 20) + 3, (20 << 20) + 48];
        let sizes = (1..=256).chain((257..=4096).step_by(7)).chain(large);
        for size in sizes {
            for align in (0..=12).map(|shift| 1usize << shift) {
                let layout = Layout::from_size_align(size, align).unwrap();
                // SAFETY: no layout is zero-sized; each block is freed once, with its own layout.
                unsafe {
                    let zeroed = Allocator.alloc_zeroed(layout);
                    assert!(!zeroed.is_null());
                    assert_eq!(zeroed as usize % align, 0, "zeroed: size {size}, align {align}");
                    assert!(std::slice::from_raw_parts(zeroed, size).iter().all(|byte| *byte == 0));
                    Allocator.dealloc(zeroed, layout);

                    for new_size in [size * 2 + 1, size.div_ceil(2)] {
                        let block = Allocator.alloc(layout);
                        assert!(!block.is_null());
                        assert_eq!(block as usize % align, 0, "size {size}, align {align}");
                        std::ptr::write_bytes(block, 0xa5, size);
                        let moved = Allocator.realloc(block, layout, new_size);
                        assert!(!moved.is_null());
                        assert_eq!(moved as usize % align, 0, "size {size} to {new_size}, align {align}");
                        let kept = size.min(new_size);
                        assert!(std::slice::from_raw_parts(moved, kept).iter().all(|byte| *byte == 0xa5));
                        std::ptr::write_bytes(moved, 0x5a, new_size);
                        Allocator.dealloc(moved, Layout::from_size_align(new_size, align).unwrap());
                    }
                }
            }
        }
    }
}
