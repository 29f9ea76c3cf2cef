//! `bento_benches::global`'s mix with common as the global allocator
//! (`cargo xtask bench-global` runs every `global_*` binary in turn).

#[global_allocator]
static GLOBAL: bento_common::CommonAllocator = bento_common::CommonAllocator::new();

fn main() {
    bento_benches::global::main();
}
