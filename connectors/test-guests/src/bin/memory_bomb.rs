//! Grows linear memory until the host refuses, writes to every host page of what it got (so the
//! memory is really committed), then allocates past the cap the way a runaway program would.
//! Under a working cap that allocation fails and the guest aborts (a trap after a refused grow:
//! `resource_limit_exceeded`, limit `memory`). Only if the cap did not hold does it print
//! `{"output": {"grown_pages", "total_pages", "touched_bytes"}}`.

use core::arch::wasm32;
use std::fmt::Write as _;
use std::io::Write as _;

/// One WebAssembly page.
const WASM_PAGE: usize = 64 * 1024;
/// Touch once per typical host page so the host must back every byte.
const HOST_PAGE: usize = 4 * 1024;

fn main() {
    // Once every page is taken the allocator cannot grow: allocate the report buffer and let
    // stdout allocate its own buffer before the bomb goes off.
    let mut report = String::with_capacity(256);
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.flush();

    let first_new_page = wasm32::memory_size(0);
    let mut grown_pages = 0;
    // Big steps first (fast to reach a 1 GiB cap), then single pages to hit the exact limit.
    for step in [256, 16, 1] {
        while wasm32::memory_grow(0, step) != usize::MAX {
            grown_pages += step;
        }
    }
    let start = first_new_page * WASM_PAGE;
    let end = start + grown_pages * WASM_PAGE;
    for address in (start..end).step_by(HOST_PAGE) {
        // SAFETY: `start..end` is memory this module just grew; the allocator has never handed
        // it out (it only uses memory it grows itself), so nothing else aliases it.
        unsafe { core::ptr::write_volatile(address as *mut u8, 0xA5) };
    }
    // stderr is unbuffered: this line needs no allocation and ends up in the crash report.
    eprintln!("memory_bomb: grew {grown_pages} pages and touched {} bytes; allocating past the cap", end - start);

    let mut overflow: Vec<u8> = Vec::with_capacity(16 * WASM_PAGE);
    overflow.push(1);
    std::hint::black_box(&overflow);

    let _ = writeln!(
        report,
        "{{\"output\":{{\"grown_pages\":{grown_pages},\"total_pages\":{},\"touched_bytes\":{}}}}}",
        wasm32::memory_size(0),
        end - start
    );
    let _ = stdout.write_all(report.as_bytes());
    let _ = stdout.flush();
}
