//! Every error that wraps another prints its own words and leaves the cause to
//! `source()`: a reporter that walks the chain (anyhow, eyre, `main` returning one)
//! shows each cause once.

use core::error::Error;

use bento_alloc::common::CommonError;
use bento_alloc::pages::{Invalid, PageError};
use bento_alloc::primitives::PoolError;
use bento_alloc::space::SpaceError;

/// Each error of the chain from `e` down, as it prints.
fn chain(e: &dyn Error) -> Vec<String> {
    let mut out = vec![e.to_string()];
    let mut next = e.source();
    while let Some(cause) = next {
        out.push(cause.to_string());
        next = cause.source();
    }
    out
}

fn assert_each_cause_once(e: &dyn Error, depth: usize) {
    let links = chain(e);
    assert_eq!(links.len(), depth, "{links:?}");
    for (i, link) in links.iter().enumerate() {
        for cause in &links[i + 1..] {
            assert!(
                !link.contains(cause.as_str()),
                "`{link}` repeats its cause `{cause}`"
            );
        }
    }
}

fn invalid() -> PageError {
    PageError::from(Invalid::ZeroSize)
}

#[test]
fn wrapped_errors_leave_the_cause_to_source() {
    // The page contract's breach is the page error itself (transparent).
    assert_each_cause_once(&invalid(), 1);
    assert_each_cause_once(&PoolError::from(invalid()), 2);
    assert_each_cause_once(&SpaceError::from(invalid()), 2);
    assert_each_cause_once(&CommonError::from(SpaceError::from(invalid())), 3);
    assert_each_cause_once(&CommonError::from(invalid()), 2);
}
