//! `bento_benches::global`'s mix with mimalloc as the global allocator
//! (`cargo xtask bench-global` runs every `global_*` binary in turn).

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    bento_benches::global::main();
}
