//! Everyday programs with the library preloaded: each must exit 0 with the output it
//! gives on glibc's malloc.

use std::io::Write;
use std::process::Command;

use crate::{preloaded, run_ok, scratch};

#[test]
fn python_builds_sorts_and_threads() {
    let script = r#"
import threading
d = {i: str(i) * 3 for i in range(200000)}
items = sorted(d.items(), key=lambda kv: kv[1], reverse=True)
words = [w * 2 for _, w in items[:50000]]
words.sort()
out = []
def work(k):
    local = [str(j) * k for j in range(20000)]
    out.append(sum(len(s) for s in local))
ts = [threading.Thread(target=work, args=(k,)) for k in range(1, 5)]
for t in ts: t.start()
for t in ts: t.join()
print(len(d), items[0][0], words[0], sorted(out))
"#;
    let expected = run_ok(Command::new("python3").args(["-c", script])).stdout;
    let o = run_ok(preloaded("python3").args(["-c", script]));
    assert_eq!(o.stdout, expected);
}

#[test]
fn git_makes_a_repository_commits_and_logs() {
    let dir = scratch("git");
    let git = |args: &[&str]| {
        run_ok(
            preloaded("git")
                .args(args)
                .current_dir(&dir)
                .env("GIT_AUTHOR_NAME", "bento")
                .env("GIT_AUTHOR_EMAIL", "bento@example.com")
                .env("GIT_COMMITTER_NAME", "bento")
                .env("GIT_COMMITTER_EMAIL", "bento@example.com")
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("HOME", &dir),
        )
    };
    git(&["init", "-q"]);
    for i in 0..5 {
        std::fs::write(
            dir.join(format!("file{i}.txt")),
            format!("line {i}\n").repeat(1000),
        )
        .unwrap();
        git(&["add", "."]);
        git(&["commit", "-q", "-m", &format!("commit {i}")]);
    }
    let log = git(&["log", "--oneline"]);
    let log = String::from_utf8_lossy(&log.stdout);
    assert_eq!(log.lines().count(), 5, "{log}");
    assert!(log.lines().next().unwrap().ends_with("commit 4"));
}

/// A file of `mb` megabytes of pseudo-random text lines.
fn text_file(path: &std::path::Path, mb: usize) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut rng = bento_trace::Rng::new(0x2545_f491_4f6c_dd1d);
    let mut written = 0;
    while written < mb << 20 {
        let x = rng.next_u64();
        let line = format!("{:016x} {}\n", x, "lorem ipsum ".repeat((x % 7) as usize));
        written += line.len();
        f.write_all(line.as_bytes()).unwrap();
    }
}

#[test]
fn sort_and_gzip_round_trip_a_50_mb_file() {
    let dir = scratch("sort");
    let input = dir.join("input.txt");
    text_file(&input, 50);
    let sorted = run_ok(preloaded("sort").arg(&input).env("LC_ALL", "C")).stdout;
    let expected = run_ok(Command::new("sort").arg(&input).env("LC_ALL", "C")).stdout;
    assert!(sorted == expected, "sort's output differs under bento");
    let gz = dir.join("input.txt.gz");
    let zipped = run_ok(preloaded("gzip").args(["-c", "-6"]).arg(&input)).stdout;
    std::fs::write(&gz, &zipped).unwrap();
    let unzipped = run_ok(preloaded("gunzip").arg("-c").arg(&gz)).stdout;
    assert!(
        unzipped == std::fs::read(&input).unwrap(),
        "gzip round trip"
    );
}

#[test]
fn gcc_compiles_and_the_program_runs() {
    let dir = scratch("gcc");
    let src = dir.join("hello.c");
    std::fs::write(
        &src,
        "#include <stdio.h>\n#include <stdlib.h>\nstruct node { int v; struct node *next; };\n\
         int main(void) { struct node *h = 0; for (int i = 0; i < 1000; i++) { \
         struct node *n = malloc(sizeof *n); n->v = i; n->next = h; h = n; } \
         long s = 0; while (h) { struct node *n = h->next; s += h->v; free(h); h = n; } \
         printf(\"sum %ld\\n\", s); return 0; }\n",
    )
    .unwrap();
    let exe = dir.join("hello");
    run_ok(preloaded("gcc").args(["-O2", "-o"]).arg(&exe).arg(&src));
    let o = run_ok(&mut preloaded(&exe));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "sum 499500\n");
}
