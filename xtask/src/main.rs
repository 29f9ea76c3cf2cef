//! bento's task runner. `cargo xtask ci` runs every check CI runs, in order, and stops
//! at the first failure; the other sub-commands run one step each.

mod bench;
mod bench_global;
mod bench_malloc;
mod ci;
mod codemap;
mod doc;
mod fmt;
mod fuzz;
mod fuzz_build;
mod house;
mod lint;
mod loom;
mod miri;
mod msrv;
mod nightly;
mod nostd;
mod prefetch;
mod publish;
mod step;
mod test;
mod windows;

use std::process::ExitCode;

const USAGE: &str = "\
usage: cargo xtask <command>

commands:
  ci       every check CI runs, stopping at the first failure
  fmt      cargo fmt --check
  lint     cargo clippy on every target, warnings denied
  house    no source file over 900 lines, no circle of files within a crate
  test     cargo test --workspace
  doc      cargo doc --workspace --no-deps, warnings denied
  miri [--full]  the Miri crates under cargo +nightly miri test (--full: bento-align
           and bento-pages under Tree Borrows too, the stress under more seeds)
  loom     the loom crates' models under --cfg bento_loom
  nostd    cargo check of the no_std crates for thumbv7em-none-eabihf
  windows  the tests of the crates with Windows code, for x86_64-pc-windows-gnu under Wine
  fuzz-build  cargo check of the fuzz crate (its own workspace)
  nightly  the `nightly` feature's test (core::alloc::Allocator) on the nightly toolchain,
           and the docs as docs.rs builds them, with feature badges
  publish  cargo publish --dry-run of every crate meant for users, and one version of
           each dependency in a user's crate on bento-alloc's defaults
  msrv     the workspace on its declared rust-version (installed with rustup)
  fuzz [--time S]  every cargo-fuzz target for S seconds (default 60; not part of ci)
  bench [--icount | --render | --quick]  every benchmark in one run, then
           docs/benchmarks.md and its charts (--icount: with callgrind counts;
           --render: the last run again; --quick: only build them)
  bench-build  the same as bench --quick (a ci step)
  bench-global [ROUNDS]  one program with each allocator as #[global_allocator], in turn
  bench-malloc [ROUNDS]  real programs with glibc, bento-malloc, mimalloc and jemalloc";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(command) = args.first() else {
        eprintln!("{USAGE}");
        return ExitCode::FAILURE;
    };
    let steps: &[step::Step] = match command.as_str() {
        "ci" => ci::STEPS,
        "fmt" => &[fmt::STEP],
        "lint" => &[lint::STEP],
        "house" => &[house::STEP],
        "test" => &[test::STEP],
        "doc" => &[doc::STEP],
        "miri" => &[miri::STEP],
        "loom" => &[loom::STEP],
        "nostd" => &[nostd::STEP],
        "windows" => &[windows::STEP],
        "fuzz-build" => &[fuzz_build::STEP],
        "publish" => &[publish::STEP],
        "msrv" => &[msrv::STEP],
        "nightly" => &[nightly::STEP],
        "fuzz" => &[fuzz::STEP],
        "bench" => &[bench::STEP],
        "bench-build" => &[bench::QUICK],
        "bench-global" => &[bench_global::STEP],
        "bench-malloc" => &[bench_malloc::STEP],
        "help" | "--help" | "-h" => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        other => {
            eprintln!("xtask: unknown command `{other}`\n\n{USAGE}");
            return ExitCode::FAILURE;
        }
    };
    if command == "ci" {
        prefetch::start();
    }
    let code = step::run_all(command, steps);
    // A failed step ends the run early: an install still going (apt-get) finishes
    // rather than die half done.
    prefetch::wait();
    code
}
