#![doc = include_str!("../README.md")]
#![no_std]

mod alloc_api;
mod arena;
mod bump;
mod double;
mod double_arena;
mod frame;
mod lifo;
mod stack;

pub use crate::alloc_api::AllocError;
pub use crate::arena::{Arena, ArenaConfig, ArenaScope};
pub use crate::bump::{AllocFailed, Bump, with_stack_bump};
pub use crate::double::{DoubleStack, EndMut, StackEnd};
pub use crate::double_arena::DoubleArena;
pub use crate::frame::{Frame, FrameArena, FrameBusy};
pub use crate::lifo::{LifoCheck, Marker, MarkerError, StackReport};
pub use crate::stack::Stack;
