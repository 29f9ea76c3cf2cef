#![doc = include_str!("../README.md")]
#![no_std]

mod alloc_api;
mod bump;
mod stack;

pub use crate::alloc_api::AllocError;
pub use crate::bump::{AllocFailed, Bump, with_stack_bump};
pub use crate::stack::{LifoCheck, Marker, MarkerError, Stack, StackReport};
