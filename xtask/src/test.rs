//! `cargo xtask test`: tier 0, every unit, property, model and doc test; then every
//! allocator crate's, the trace's and the CLI's unit and integration tests once more
//! in a release build, where the debug checks are off and the release-only paths run
//! (the pools keep no count of chunks in use, the stacks' and the space's stats and
//! `validate` take other paths, a free without a layout is probed, arithmetic wraps
//! where it is not checked); and bento-heap's Tracy test with the `tracy` feature.
//!
//! The CLI's release build leaves out its `jemalloc` feature: jemalloc's C build is
//! the longest unit of a release build (about 100 s of a 2-core machine, three CPU
//! minutes), the debug build has already run every test with it, and none of the
//! release-only paths is jemalloc's. The crates build in one call, so that they share
//! their dependencies' builds: `--no-default-features` then reaches every crate named,
//! and each crate's defaults, read from its manifest, are named again (the CLI's but
//! `jemalloc`).
//!
//! Everything builds first; then the debug suite's unit and integration tests run in
//! one lane and its doc tests, the release suite, the examples and the Tracy test in
//! another, at once (see [`two_lanes`]).

use crate::step::{Outcome, Step, cargo, root, status, two_lanes};

pub(crate) const STEP: Step = Step { name: "test", run };

/// The crates whose tests run again in a release build, with their folders.
const RELEASE: &[(&str, &str)] = &[
    ("bento-pages", "pages"),
    ("bento-primitives", "primitives"),
    ("bento-space", "space"),
    ("bento-common", "common"),
    ("bento-heap", "heap"),
    ("bento-trace", "trace"),
    ("bento-alloc-cli", "cli"),
];

/// The default feature the release build leaves out.
const LEFT_OUT: (&str, &str) = ("bento-alloc-cli", "jemalloc");

/// The examples of docs/guide.md (crates/bento/examples).
const EXAMPLES: &[&str] = &[
    "level_loading",
    "frame_memory",
    "particles",
    "subsystem_heaps",
    "global_allocator",
    "hashmap_in_a_space",
    "custom_page_source",
];

fn run() -> Outcome {
    let release = match release_args() {
        Ok(args) => args,
        Err(why) => return Outcome::Failed(why),
    };
    let debug = ["test", "--workspace"].map(String::from).to_vec();
    let tracy = [
        "test",
        "-p",
        "bento-heap",
        "--features",
        "tracy",
        "--test",
        "tracy",
    ]
    .map(String::from)
    .to_vec();
    // Everything builds first, with both cores: the debug and release tests, the
    // examples, the Tracy test.
    for args in [&debug, &release, &tracy] {
        let mut cmd = cargo();
        cmd.args(args).arg("--no-run");
        if let failed @ Outcome::Failed(_) = status(cmd) {
            return failed;
        }
    }
    let mut examples = cargo();
    examples.args(["build", "-q", "-p", "bento-alloc", "--examples"]);
    if let failed @ Outcome::Failed(_) = status(examples) {
        return failed;
    }
    // Then the suites run in two lanes at once: many test binaries hold one long
    // test (a soak, a real program under LD_PRELOAD) and leave the other core idle.
    let command = |args: &[String]| {
        let mut cmd = cargo();
        cmd.args(args);
        cmd
    };
    // The debug suite's doc tests (compiled as they run) go beside the release suite,
    // which is the shorter.
    let mut units = debug.clone();
    units.extend(["--lib", "--bins", "--tests"].map(String::from));
    let mut docs = debug.clone();
    docs.push("--doc".to_owned());
    let lane_a = vec![command(&units)];
    let mut lane_b = vec![command(&docs), command(&release)];
    // The guide's examples, each run to the end (they assert what they show).
    for example in EXAMPLES {
        let mut cmd = cargo();
        cmd.args(["run", "-q", "-p", "bento-alloc", "--example", example]);
        lane_b.push(cmd);
    }
    // The heaps with the Tracy client built in and started.
    lane_b.push(command(&tracy));
    two_lanes("test", lane_a, lane_b)
}

/// The arguments of the release tests: every crate of [`RELEASE`] with its defaults
/// but [`LEFT_OUT`].
fn release_args() -> Result<Vec<String>, String> {
    let mut args: Vec<String> = ["test", "--release", "--tests", "--no-default-features"]
        .map(String::from)
        .to_vec();
    let mut features = Vec::new();
    for (krate, dir) in RELEASE {
        args.extend(["-p".to_owned(), (*krate).to_owned()]);
        features.extend(
            defaults(dir)?
                .into_iter()
                .filter(|f| (*krate, f.as_str()) != LEFT_OUT)
                .map(|f| format!("{krate}/{f}")),
        );
    }
    args.extend(["--features".to_owned(), features.join(",")]);
    Ok(args)
}

/// The `default` features of `crates/<dir>/Cargo.toml`.
fn defaults(dir: &str) -> Result<Vec<String>, String> {
    let path = root().join("crates").join(dir).join("Cargo.toml");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let list = text
        .lines()
        .skip_while(|l| l.trim() != "[features]")
        .find_map(|l| l.trim().strip_prefix("default")?.trim().strip_prefix('='))
        .and_then(|rest| rest.trim().strip_prefix('['))
        .and_then(|rest| rest.split(']').next())
        .ok_or_else(|| format!("{} names no default features on one line", path.display()))?;
    Ok(list
        .split(',')
        .map(|f| f.trim().trim_matches('"'))
        .filter(|f| !f.is_empty())
        .map(str::to_owned)
        .collect())
}
