//! `cargo xtask ci`: every check, cheapest first.

use crate::step::Step;
use crate::{
    bench, doc, fmt, fuzz_build, house, lint, loom, miri, msrv, nightly, nostd, publish, test,
    windows,
};

pub(crate) const STEPS: &[Step] = &[
    fmt::STEP,
    lint::STEP,
    house::STEP,
    test::STEP,
    doc::STEP,
    publish::STEP,
    msrv::STEP,
    nostd::STEP,
    nightly::STEP,
    windows::STEP,
    fuzz_build::STEP,
    bench::QUICK,
    miri::STEP,
    loom::STEP,
];
