//! `cargo xtask bench-malloc [ROUNDS]`: real programs timed with glibc's malloc, with
//! bento-malloc in `LD_PRELOAD`, and with mimalloc and jemalloc (Debian's packages,
//! installed with apt-get when missing): a Python script, `sort` and `gzip` of a
//! 50 MB file, `gcc` compiling a generated file, a C++ program heavy in `new` and
//! `delete`, a C loop of 1–5 MiB blocks, a C loop in the shape of glibc's
//! bench-malloc-simple (`simple.c`: batches of one small size allocated, then freed in
//! order), and four threaded C programs in the shape of mimalloc-bench's larson,
//! xmalloc-test, alloc-test and rptest (`larson.c`, `xmalloc.c`, `bursts.c`,
//! `rptest.c`: threads freeing each other's blocks, a producer and a consumer, bursts
//! of short-lived threads, batches of random sizes freed out of order and a share on
//! the next thread). Each program runs ROUNDS times (default
//! 5) under each allocator in turn, the first allocator rotating every round; it
//! prints the wall time (min / median / max) and the peak resident set (median) of
//! each program under each allocator as JSON (`cargo xtask bench` writes it to
//! `target/bench-report/malloc.json` and the report takes the ratios to glibc's):
//! `{"rounds": N, "rows": [{"program": NAME, "allocator": NAME, "median_time_ns": N,
//! "min_time_ns": N, "max_time_ns": N, "peak_rss_bytes": N}…]}`, glibc's rows first
//! within each program. Not part of CI.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::step::{
    Outcome, Step, cargo, print_table, root, rounds_arg, status, succeeds, target_dir,
};

pub(crate) const STEP: Step = Step {
    name: "bench-malloc",
    run,
};

/// The preloaded peers: name, library path, Debian package.
const PEERS: &[(&str, &str, &str)] = &[
    (
        "mimalloc",
        "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2",
        "libmimalloc2.0",
    ),
    (
        "jemalloc",
        "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
        "libjemalloc2",
    ),
];

/// One program: a name and its command line (run in the work directory).
struct Program {
    name: &'static str,
    argv: Vec<String>,
}

fn run() -> Outcome {
    print_table(measure(rounds_arg()))
}

/// Builds the library and the programs, runs each program `rounds` times under each
/// allocator; the stats as JSON.
pub(crate) fn measure(rounds: usize) -> Result<String, String> {
    let target = target_dir().join("bench-malloc");
    // Built on its own, so that no other crate's features reach the library.
    let mut build = cargo();
    build.args(["build", "--release", "-p", "bento-malloc", "--target-dir"]);
    build
        .arg(&target)
        .env("CARGO_PROFILE_RELEASE_PANIC", "abort");
    if let Outcome::Failed(e) = status(build) {
        return Err(e);
    }
    let mut allocators: Vec<(String, Option<PathBuf>)> = vec![
        ("glibc".into(), None),
        (
            "bento".into(),
            Some(target.join("release").join("libbento_malloc.so")),
        ),
    ];
    for (name, lib, package) in PEERS {
        if !Path::new(lib).exists() {
            let mut apt = Command::new("apt-get");
            apt.args(["install", "-y", "-q", package]);
            succeeds(apt);
        }
        if Path::new(lib).exists() {
            allocators.push((name.to_string(), Some(PathBuf::from(lib))));
        } else {
            println!("xtask: {package} could not be installed; {name} left out");
        }
    }
    let work = target.join("work");
    let programs = prepare(&work)?;
    if !Path::new("/usr/bin/time").exists() {
        let mut apt = Command::new("apt-get");
        apt.args(["install", "-y", "-q", "time"]);
        succeeds(apt);
    }
    // times[program][allocator] and rss[program][allocator], one entry a round.
    let mut times = vec![vec![Vec::new(); allocators.len()]; programs.len()];
    let mut rss = vec![vec![Vec::new(); allocators.len()]; programs.len()];
    for round in 0..rounds {
        for (p, program) in programs.iter().enumerate() {
            for k in 0..allocators.len() {
                let a = (k + round) % allocators.len();
                let (name, lib) = &allocators[a];
                match time_one(&work, program, lib.as_deref()) {
                    Ok((secs, kib)) => {
                        println!(
                            "round {round}: {:10} {name:9} {secs:7.3} s {:7} MiB",
                            program.name,
                            kib / 1024
                        );
                        times[p][a].push(secs);
                        rss[p][a].push(kib as f64);
                    }
                    Err(e) => return Err(format!("{} on {name}: {e}", program.name)),
                }
            }
        }
    }
    Ok(stats(&programs, &allocators, &times, &rss, rounds))
}

/// Writes the inputs and builds the programs in `work`.
fn prepare(work: &Path) -> Result<Vec<Program>, String> {
    std::fs::create_dir_all(work).map_err(|e| e.to_string())?;
    let sources = root().join("xtask").join("bench-malloc");
    let text = work.join("input.txt");
    if !text.exists() {
        write_text(&text, 50).map_err(|e| format!("cannot write {}: {e}", text.display()))?;
    }
    let generated = work.join("generated.c");
    write_c(&generated).map_err(|e| e.to_string())?;
    let compile = |compiler: &str, src: &str, out: &str| -> Result<(), String> {
        let ok = Command::new(compiler)
            .args(["-O2", "-fno-builtin", "-o"])
            .arg(work.join(out))
            .arg(sources.join(src))
            .status()
            .map_err(|e| format!("{compiler}: {e}"))?
            .success();
        ok.then_some(()).ok_or(format!("{compiler} {src} failed"))
    };
    compile("g++", "newdelete.cpp", "newdelete")?;
    compile("cc", "bigblocks.c", "bigblocks")?;
    compile("cc", "simple.c", "simple")?;
    for threaded in ["larson", "xmalloc", "bursts", "rptest"] {
        let ok = Command::new("cc")
            .args(["-O2", "-pthread", "-o"])
            .arg(work.join(threaded))
            .arg(sources.join(format!("{threaded}.c")))
            .status()
            .map_err(|e| format!("cc: {e}"))?
            .success();
        ok.then_some(()).ok_or(format!("cc {threaded}.c failed"))?;
    }
    // The interpreter itself, not a launcher script that would be timed too.
    let python = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .map_err(|e| format!("python3: {e}"))?;
    let python = String::from_utf8_lossy(&python.stdout).trim().to_owned();
    let s = |p: &Path| p.to_string_lossy().into_owned();
    Ok(vec![
        Program {
            name: "python3",
            argv: vec![python, s(&sources.join("script.py"))],
        },
        Program {
            name: "sort",
            argv: vec!["sort".into(), "-o".into(), "/dev/null".into(), s(&text)],
        },
        Program {
            name: "gzip",
            argv: vec!["gzip".into(), "-c".into(), "-6".into(), s(&text)],
        },
        Program {
            name: "gcc",
            argv: vec![
                "gcc".into(),
                "-O2".into(),
                "-c".into(),
                "-o".into(),
                "/dev/null".into(),
                s(&generated),
            ],
        },
        Program {
            name: "c++ new",
            argv: vec![s(&work.join("newdelete"))],
        },
        Program {
            name: "big blocks",
            argv: vec![s(&work.join("bigblocks"))],
        },
        Program {
            name: "simple",
            argv: vec![s(&work.join("simple")), "100".into()],
        },
        // Threads as many as the machine's cores (2 here): larson's server threads
        // freeing each other's blocks, xmalloc-test's producer and consumer,
        // alloc-test's bursts of short-lived threads, rptest's batches.
        Program {
            name: "larson",
            argv: vec![
                s(&work.join("larson")),
                "2".into(),
                "40".into(),
                "200000".into(),
            ],
        },
        Program {
            name: "xmalloc",
            argv: vec![s(&work.join("xmalloc")), "1".into(), "4000000".into()],
        },
        Program {
            name: "bursts",
            argv: vec![
                s(&work.join("bursts")),
                "2".into(),
                "200".into(),
                "20000".into(),
            ],
        },
        Program {
            name: "rptest",
            argv: vec![
                s(&work.join("rptest")),
                "2".into(),
                "2000".into(),
                "1000".into(),
                "8".into(),
                "16000".into(),
            ],
        },
    ])
}

/// Runs `program` under `/usr/bin/time` with `lib` preloaded; its wall time in
/// seconds and peak resident set in KiB.
fn time_one(work: &Path, program: &Program, lib: Option<&Path>) -> Result<(f64, u64), String> {
    let report = work.join("time.out");
    let mut cmd = Command::new("/usr/bin/time");
    cmd.args(["-f", "%e %M", "-o"])
        .arg(&report)
        .args(&program.argv)
        .current_dir(work)
        .env("LC_ALL", "C")
        .stdout(Stdio::null());
    if let Some(lib) = lib {
        cmd.env("LD_PRELOAD", lib);
    }
    let status = cmd.status().map_err(|e| e.to_string())?;
    if !status.success() {
        return Err(format!("exited with {status}"));
    }
    let text = std::fs::read_to_string(&report).map_err(|e| e.to_string())?;
    let mut fields = text.split_whitespace();
    let secs = fields.next().and_then(|s| s.parse().ok());
    let kib = fields.next().and_then(|s| s.parse().ok());
    secs.zip(kib).ok_or(format!("time printed `{text}`"))
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Seconds as whole nanoseconds.
fn ns(secs: f64) -> u64 {
    (secs * 1e9).round() as u64
}

/// The stats as JSON: one row per program and allocator.
fn stats(
    programs: &[Program],
    allocators: &[(String, Option<PathBuf>)],
    times: &[Vec<Vec<f64>>],
    rss: &[Vec<Vec<f64>>],
    rounds: usize,
) -> String {
    let mut rows = Vec::new();
    for (p, program) in programs.iter().enumerate() {
        for (a, (name, _)) in allocators.iter().enumerate() {
            let t = &times[p][a];
            let min = t.iter().copied().fold(f64::INFINITY, f64::min);
            let max = t.iter().copied().fold(0.0, f64::max);
            rows.push(serde_json::json!({
                "program": program.name,
                "allocator": name,
                "median_time_ns": ns(median(t)),
                "min_time_ns": ns(min),
                "max_time_ns": ns(max),
                "peak_rss_bytes": (median(&rss[p][a]) * 1024.0) as u64,
            }));
        }
    }
    let doc = serde_json::json!({ "rounds": rounds, "rows": rows });
    serde_json::to_string_pretty(&doc).expect("JSON of numbers and names")
}

/// `mb` megabytes of pseudo-random text lines.
fn write_text(path: &Path, mb: usize) -> std::io::Result<()> {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut written = 0;
    while written < mb << 20 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let line = format!("{x:016x} {}\n", "lorem ipsum ".repeat((x % 7) as usize));
        written += line.len();
        f.write_all(line.as_bytes())?;
    }
    f.flush()
}

/// A C file of many small functions, for `gcc` to work on.
fn write_c(path: &Path) -> std::io::Result<()> {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    for i in 0..1500 {
        writeln!(
            f,
            "struct s{i} {{ int a[{n}]; double d; }};\n\
             int f{i}(struct s{i} *s, int k) {{ int t = 0; for (int j = 0; j < {n}; j++) \
             {{ t += s->a[j] * (k ^ j); if (t > {i}) t -= s->a[(j + k) % {n}]; }} \
             return t + (int)s->d; }}",
            n = 4 + i % 13
        )?;
    }
    f.flush()
}
