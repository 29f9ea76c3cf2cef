//! `bento_benches::global`'s mix with system as the global allocator
//! (`cargo xtask bench-global` runs every `global_*` binary in turn).

// The system allocator (glibc on Linux): no `#[global_allocator]`.

fn main() {
    bento_benches::global::main();
}
