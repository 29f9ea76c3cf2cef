//! bento-pages' integration tests: one binary, a module per source.

mod bad_input;
mod cache;
#[cfg(not(miri))]
mod callback;
mod common;
mod decay;
mod fixed;
mod heap;
mod limited;
mod lock;
mod metered;
#[cfg(all(any(unix, windows), not(miri)))]
mod system;
