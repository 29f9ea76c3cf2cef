//! `SystemPages`: reservations round-trip at any alignment; on Unix the OS really
//! takes the memory back, decommitting keeps the mapping whole, and with traps a stray
//! access really faults.

use core::ptr::NonNull;

use bento_align::Alignment;
use bento_pages::{PageSource, SystemPages};

use crate::common::{disjoint, round_trip};

#[test]
fn round_trips() {
    for pages in [SystemPages::new(), SystemPages::with_traps()] {
        round_trip(&pages);
        disjoint(&pages);
    }
}

#[test]
fn large_alignments() {
    let pages = SystemPages::new();
    for align in [1 << 20, 32 << 20] {
        let a = Alignment::new(align).unwrap();
        let base = pages.reserve(2 << 20, a).unwrap();
        assert_eq!(base.addr().get() % align, 0);
        // SAFETY: the live reservation, never committed.
        unsafe { pages.release(base, 2 << 20) };
    }
}

#[cfg(unix)]
/// How many pages of `[ptr, ptr + len)` are resident, from `mincore`.
fn resident_pages(ptr: NonNull<u8>, len: usize) -> usize {
    let page = SystemPages::new().page_size();
    let mut vec = vec![0u8; len.div_ceil(page)];
    // SAFETY: `ptr` is page-aligned, the range is mapped, `vec` has a byte per page.
    let rc = unsafe { libc::mincore(ptr.as_ptr().cast(), len, vec.as_mut_ptr()) };
    assert_eq!(rc, 0, "mincore failed: {}", std::io::Error::last_os_error());
    vec.iter().filter(|&&b| b & 1 != 0).count()
}

#[cfg(unix)]
#[test]
fn decommitted_pages_are_not_resident_and_read_zero() {
    for pages in [SystemPages::new(), SystemPages::with_traps()] {
        decommitted_pages_leave(pages);
    }
}

#[cfg(unix)]
fn decommitted_pages_leave(pages: SystemPages) {
    let page = pages.page_size();
    let n = 64;
    let base = pages.reserve(n * page, Alignment::MIN).unwrap();
    // SAFETY: ranges of the live reservation, decommitted before release.
    unsafe {
        assert_eq!(
            resident_pages(base, n * page),
            0,
            "a fresh reservation has no memory"
        );
        pages.commit(base, n * page).unwrap();
        base.write_bytes(0x5A, n * page);
        assert_eq!(
            resident_pages(base, n * page),
            n,
            "written pages are resident"
        );
        // Decommit the middle half: exactly those pages leave.
        let mid = base.add(n / 4 * page);
        pages.decommit(mid, n / 2 * page);
        assert_eq!(resident_pages(base, n * page), n / 2);
        assert_eq!(resident_pages(mid, n / 2 * page), 0);
        pages.commit(mid, n / 2 * page).unwrap();
        assert!(
            (0..n / 2 * page).all(|i| mid.add(i).read() == 0),
            "recommitted pages read zero"
        );
        assert_eq!(base.read(), 0x5A, "the pages around keep their contents");
        assert_eq!(base.add(n * page - 1).read(), 0x5A);
        pages.decommit(base, n * page);
        assert_eq!(resident_pages(base, n * page), 0);
        pages.release(base, n * page);
    }
}

#[cfg(unix)]
/// In a child process (re-running this test binary), write to a decommitted page:
/// the child must die of SIGSEGV.
#[test]
fn a_write_to_a_decommitted_page_faults() {
    const CHILD: &str = "BENTO_PAGES_FAULT_CHILD";
    if std::env::var_os(CHILD).is_some() {
        let pages = SystemPages::with_traps();
        let page = pages.page_size();
        let base = pages.reserve(page, Alignment::MIN).unwrap();
        // SAFETY: deliberately not: the page is decommitted (PROT_NONE) and the write
        // must fault before it happens. This runs only in the child process.
        unsafe {
            pages.commit(base, page).unwrap();
            pages.decommit(base, page);
            core::ptr::write_volatile(base.as_ptr(), 1);
        }
        // Reaching here means no fault: exit with a code the parent reports.
        std::process::exit(3);
    }
    use std::os::unix::process::ExitStatusExt;
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "system::a_write_to_a_decommitted_page_faults",
            "--nocapture",
        ])
        .env(CHILD, "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert_eq!(
        status.signal(),
        Some(libc::SIGSEGV),
        "child ended with {status:?}"
    );
}

/// The kernel's mappings that overlap `[lo, hi)`, from `/proc/self/maps`.
#[cfg(target_os = "linux")]
fn mappings_in(lo: usize, hi: usize) -> usize {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    maps.lines()
        .filter(|line| {
            let range = line.split_whitespace().next().unwrap();
            let (a, b) = range.split_once('-').unwrap();
            let a = usize::from_str_radix(a, 16).unwrap();
            let b = usize::from_str_radix(b, 16).unwrap();
            a < hi && lo < b
        })
        .count()
}

/// Decommitting every other page of a reservation leaves one mapping without traps;
/// with traps each protection change splits it (the price of the trap).
#[cfg(target_os = "linux")]
#[test]
fn decommit_keeps_the_mapping_whole() {
    for (pages, whole) in [
        (SystemPages::new(), true),
        (SystemPages::with_traps(), false),
    ] {
        let page = pages.page_size();
        let n = 64;
        let base = pages.reserve(n * page, Alignment::MIN).unwrap();
        let (lo, hi) = (base.addr().get(), base.addr().get() + n * page);
        // SAFETY: ranges of the live reservation, all decommitted before release.
        unsafe {
            pages.commit(base, n * page).unwrap();
            base.write_bytes(1, n * page);
            for k in (0..n).step_by(2) {
                pages.decommit(base.add(k * page), page);
            }
            let maps = mappings_in(lo, hi);
            if whole {
                assert_eq!(maps, 1, "decommit split the mapping");
            } else {
                assert!(maps >= n / 2, "{maps} mappings: the traps did not split it");
            }
            for k in (1..n).step_by(2) {
                pages.decommit(base.add(k * page), page);
            }
            // (Once released, the range may be mapped again at once by another test's
            // thread, so it is not checked afterwards.)
            pages.release(base, n * page);
        }
    }
}
