#![doc = include_str!("../README.md")]
#![no_std]

mod alloc_api;
mod bump;

pub use crate::alloc_api::AllocError;
pub use crate::bump::{AllocFailed, Bump, with_stack_bump};
