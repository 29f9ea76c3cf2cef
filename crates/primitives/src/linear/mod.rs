//! The linear allocators: a bump pointer over a buffer ([`Bump`](bump::Bump)), the
//! LIFO stacks with markers ([`Stack`](stack::Stack), [`DoubleStack`](double::DoubleStack)
//! and their shared header chain in `lifo`), and the same over reserved address space
//! that commits as it grows ([`Arena`](arena::Arena),
//! [`DoubleArena`](double_arena::DoubleArena), [`FrameArena`](frame::FrameArena)).

pub(crate) mod arena;
pub(crate) mod bump;
pub(crate) mod corruption;
pub(crate) mod double;
pub(crate) mod double_arena;
pub(crate) mod frame;
pub(crate) mod lifo;
pub(crate) mod stack;
