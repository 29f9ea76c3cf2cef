//! `validate`'s check of the block cache: its lists against the chunks' `CACHED`
//! tags, its counts and its bytes.

use core::ptr::{self, NonNull};

use super::{Finder, Rule, SpaceCorruption};
use crate::block_cache;
use crate::chunk::flags::{CACHED, IN_USE};
use crate::chunk::{Kind, MIN_CHUNK, raw};
use crate::engine::Core;
use bento_pages::PageSource;

impl<P: PageSource> Finder<'_, P> {
    /// Checks the block cache's lists: every entry a 16-aligned in-use chunk of at
    /// least its class's size in an ordinary or base segment, tagged `CACHED`, its back
    /// link the entry before it, in no list twice, the counts and bytes as recorded,
    /// and as many entries as the segment walk found chunks tagged `CACHED`
    /// (`walked`), so that the tagged chunks are exactly the listed ones. Each entry's
    /// flag is cleared as it is checked (a second visit finds it clear) and set again
    /// before this returns. A method of the finder it locates entries with, so that
    /// `validate` reaches it with no import of this file.
    ///
    /// # Safety
    ///
    /// As for `check_lists`.
    pub(super) unsafe fn check_cache(
        &self,
        core: &Core,
        walked: usize,
    ) -> Result<(), SpaceCorruption> {
        let mut cleared = (0, 0);
        // SAFETY: the caller's contract.
        let result = unsafe { scan_cache(core, self, walked, &mut cleared) };
        // SAFETY: `cleared` counts the entries whose flag the scan cleared, checked
        // chunks of live segments reached through links it read.
        unsafe { restore_cache(core, cleared) };
        result
    }
}

/// `check_cache`'s scan; `cleared` follows it: the entries of classes before
/// `cleared.0` and the first `cleared.1` of that class had their `CACHED` flag
/// cleared.
///
/// # Safety
///
/// As for `check_lists`.
unsafe fn scan_cache<P: PageSource>(
    core: &Core,
    finder: &Finder<'_, P>,
    walked: usize,
    cleared: &mut (usize, usize),
) -> Result<(), SpaceCorruption> {
    // One reference for the whole scan: under Miri each new one is a tag that
    // every later access to the core must visit.
    let cache = core.cache();
    let mut bytes = 0;
    let mut total = 0;
    let mut next = 0;
    // A `while` with the empty classes skipped by a comparison: Miri interprets every
    // call, and the model tests validate after every few steps.
    while next < block_cache::CLASSES {
        let k = next;
        next += 1;
        *cleared = (k, 0);
        if cache.counts[k] == 0 && cache.heads[k] == NULL {
            continue;
        }
        let entry = |c: NonNull<u8>| SpaceCorruption {
            segment: 0,
            offset: c.addr().get(),
            rule: Rule::CacheEntry { class: k },
        };
        let mut n = 0;
        let mut cur = cache.heads[k];
        let mut prev: *mut u8 = ptr::null_mut();
        while let Some(c) = NonNull::new(cur) {
            // More entries than the cache's bytes allow: a cycle, or a count gone.
            if n >= max_cached(core) {
                return Err(entry(c));
            }
            let Some(seg) = finder.holding(core, c) else {
                return Err(entry(c));
            };
            if seg.kind == Kind::Dedicated as usize || !c.addr().get().is_multiple_of(16) {
                return Err(entry(c));
            }
            // SAFETY: `c` lies in the chunk area of a live segment, at least a minimum
            // chunk before its end fence, so its head and first payload words are
            // readable.
            unsafe {
                let head = raw::head(c);
                if head & IN_USE == 0
                    || head & CACHED == 0
                    || raw::size(head) < block_cache::class_bytes(k)
                    || raw::link(c, 1) != prev
                {
                    return Err(entry(c));
                }
                raw::set_head(c, head & !CACHED);
                prev = c.as_ptr();
                cur = raw::link(c, 0);
            }
            n += 1;
            *cleared = (k, n);
            bytes += block_cache::class_bytes(k);
        }
        let recorded = cache.counts[k] as usize;
        if n != recorded {
            return Err(miscount("count of a class", n, recorded));
        }
        total += n;
    }
    *cleared = (block_cache::CLASSES, 0);
    if bytes != cache.bytes || bytes > cache.limit {
        return Err(miscount("bytes (at most its limit)", bytes, cache.bytes));
    }
    if total != walked {
        return Err(miscount("chunks (as the tags count them)", walked, total));
    }
    Ok(())
}

/// A stat of the whole cache that its lists do not bear out.
fn miscount(name: &'static str, counted: usize, recorded: usize) -> SpaceCorruption {
    SpaceCorruption {
        segment: 0,
        offset: 0,
        rule: Rule::CacheCount {
            name,
            counted,
            recorded,
        },
    }
}

/// A null link or head, as a constant: compared with, not called.
const NULL: *mut u8 = ptr::null_mut();

/// The most chunks the block cache can hold: its byte limit in minimum chunks. A walk
/// of a class that goes further is in a cycle.
fn max_cached(core: &Core) -> usize {
    core.cache().limit / MIN_CHUNK + 1
}

/// Sets again the `CACHED` flags `scan_cache` cleared: every entry of the classes
/// before `cleared.0`, and the first `cleared.1` of that class.
///
/// # Safety
///
/// Those entries are in-use chunks of live segments, their links unchanged since the
/// scan read them.
unsafe fn restore_cache(core: &Core, cleared: (usize, usize)) {
    let cache = core.cache();
    let mut next = 0;
    while next < block_cache::CLASSES.min(cleared.0 + 1) {
        let k = next;
        next += 1;
        let mut cur = cache.heads[k];
        if cur == NULL {
            continue;
        }
        let mut n = 0;
        while let Some(c) = NonNull::new(cur) {
            if k == cleared.0 && n == cleared.1 {
                break;
            }
            // SAFETY: an entry the scan checked and cleared (the caller's contract).
            unsafe {
                raw::set_head(c, raw::head(c) | CACHED);
                cur = raw::link(c, 0);
            }
            n += 1;
        }
    }
}
