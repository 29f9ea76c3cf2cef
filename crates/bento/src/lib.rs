#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg), doc(auto_cfg(hide(bento_loom))))]
#![no_std]

pub use bento_align as align;
pub use bento_common as common;
pub use bento_heap as heap;
pub use bento_pages as pages;
pub use bento_primitives as primitives;
pub use bento_space as space;
#[cfg(feature = "std")]
pub use bento_trace as trace;
