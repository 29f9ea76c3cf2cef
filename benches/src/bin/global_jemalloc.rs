//! `bento_benches::global`'s mix with jemalloc as the global allocator
//! (`cargo xtask bench-global` runs every `global_*` binary in turn).

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() {
    bento_benches::global::main();
}
