//! A slot's record: its state, its block and the block's sites.

use super::config::Label;
use super::trace::Trace;

/// A slot's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum State {
    /// Never used: all of it inaccessible.
    Empty,
    /// A block lives in it.
    Live,
    /// Its block was freed: inaccessible, in quarantine until reused.
    Freed,
}

/// A slot's record.
#[derive(Clone, Copy)]
pub(super) struct Slot {
    pub(super) state: State,
    /// The block's address and size.
    pub(super) start: usize,
    pub(super) size: usize,
    pub(super) label: Label,
    pub(super) alloc: Trace,
    pub(super) free: Trace,
}

impl Slot {
    pub(super) const EMPTY: Self = Self {
        state: State::Empty,
        start: 0,
        size: 0,
        label: Label {
            heap: None,
            tag: None,
            owner: 0,
        },
        alloc: Trace::EMPTY,
        free: Trace::EMPTY,
    };
}
