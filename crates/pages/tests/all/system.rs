//! `SystemPages` on Unix: the OS really takes the memory back, and a stray access
//! really faults.

use core::ptr::NonNull;

use bento_align::Alignment;
use bento_pages::{PageSource, SystemPages};

use crate::common::{disjoint, round_trip};

#[test]
fn round_trips() {
    round_trip(&SystemPages::new());
    disjoint(&SystemPages::new());
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

/// How many pages of `[ptr, ptr + len)` are resident, from `mincore`.
fn resident_pages(ptr: NonNull<u8>, len: usize) -> usize {
    let page = SystemPages::new().page_size();
    let mut vec = vec![0u8; len.div_ceil(page)];
    // SAFETY: `ptr` is page-aligned, the range is mapped, `vec` has a byte per page.
    let rc = unsafe { libc::mincore(ptr.as_ptr().cast(), len, vec.as_mut_ptr()) };
    assert_eq!(rc, 0, "mincore failed: {}", std::io::Error::last_os_error());
    vec.iter().filter(|&&b| b & 1 != 0).count()
}

#[test]
fn decommitted_pages_are_not_resident_and_read_zero() {
    let pages = SystemPages::new();
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

/// In a child process (re-running this test binary), write to a decommitted page:
/// the child must die of SIGSEGV.
#[test]
fn a_write_to_a_decommitted_page_faults() {
    const CHILD: &str = "BENTO_PAGES_FAULT_CHILD";
    if std::env::var_os(CHILD).is_some() {
        let pages = SystemPages::new();
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
