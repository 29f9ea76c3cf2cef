#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg), doc(auto_cfg(hide(bento_loom))))]
#![no_std]

#[cfg(feature = "alloc")]
extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

mod alloc_api;
mod bytes;
mod cache;
mod callback;
mod error;
#[cfg(feature = "testing")]
mod faulty;
mod fixed;
mod guard;
#[cfg(feature = "alloc")]
mod heap;
mod limited;
pub mod lock;
mod metered;
mod misuse;
mod profile;
mod retention;
mod source;
mod sync;
mod system;

#[doc(hidden)]
pub use crate::alloc_api::resize;
pub use crate::alloc_api::{AllocError, RawAlloc, dangling};
pub use crate::bytes::ByteSize;
pub use crate::cache::{CacheCorruption, CacheStats, CommitCache};
pub use crate::callback::{CallbackPages, CommitFn, DecommitFn, ReleaseFn, ReserveFn};
pub use crate::error::{Invalid, PageError};
#[cfg(feature = "testing")]
pub use crate::faulty::FaultyPages;
pub use crate::fixed::FixedPages;
#[cfg(all(feature = "os", unix, not(bento_loom)))]
pub use crate::guard::GuardPool;
pub use crate::guard::{
    GuardConfig, GuardCorruption, GuardFault, GuardStats, Label, MAX_SLOTS, SLOT_PAGES, Trace,
};
#[cfg(feature = "alloc")]
pub use crate::heap::HeapPages;
pub use crate::limited::{LimitStats, LimitedPages};
pub use crate::metered::{Metered, PageStats};
pub use crate::misuse::{GuardSide, Leaks, Misuse, MisuseHook, panic_on_misuse};
#[cfg(all(feature = "std", any(unix, windows), not(bento_loom)))]
pub use crate::profile::Profiler;
pub use crate::profile::{MAX_SAMPLES, ProfileConfig, ProfileStats};
#[cfg(all(feature = "os", any(unix, windows)))]
pub use crate::retention::os_millis;
pub use crate::retention::{Decay, Phase, Retention};
pub use crate::source::PageSource;
pub(crate) use crate::source::{check_range, check_reserve, check_size, forward_page_source};
#[cfg(all(feature = "os", any(unix, windows)))]
pub use crate::system::SystemPages;
