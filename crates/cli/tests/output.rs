//! Where `-o` leads: a regular file is replaced whole, a symbolic link's file is
//! written and the link stays, a FIFO and a device are written in place and stay
//! what they are, a directory is an error. The devices written are nodes this test
//! makes in a scratch directory (as root), and `/dev/full` only once those stayed
//! devices.
#![cfg(unix)]

use std::fs::FileType;
use std::os::unix::fs::{FileTypeExt, MetadataExt, symlink};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::thread::JoinHandle;

mod common;

use common::{bento, command, ok, scratch, stderr, stdout, text};

/// What is at `path` itself, a link not followed.
fn kind(path: &Path) -> FileType {
    std::fs::symlink_metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .file_type()
}

/// `bento gen --profile lifo --scale 0.05 -o OUT`: a trace of some 100 KiB.
fn gen_lifo(out: &Path) -> Output {
    bento(&[
        "gen",
        "--profile",
        "lifo",
        "--scale",
        "0.05",
        "-o",
        out.to_str().unwrap(),
    ])
}

/// The bytes [`gen_lifo`] writes, from a regular file in `dir`.
fn lifo_bytes(dir: &Path) -> Vec<u8> {
    let path = dir.join("expected.trace");
    ok(&gen_lifo(&path));
    let bytes = std::fs::read(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    bytes
}

/// Makes a FIFO at `path`.
fn mkfifo(path: &Path) {
    let o = Command::new("mkfifo")
        .arg(path)
        .output()
        .expect("mkfifo runs");
    assert!(o.status.success(), "mkfifo: {}", text(&o));
}

/// Reads the FIFO `path` to its end on a thread of its own (opening it waits for a
/// writer). Join it only after checking the FIFO is still one: a FIFO replaced by a
/// file would leave the thread waiting for ever.
fn read_fifo(path: &Path) -> JoinHandle<Vec<u8>> {
    let path = path.to_owned();
    std::thread::spawn(move || std::fs::read(&path).unwrap())
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// Checks a run failed with one line on stderr holding `what`, and no panic.
fn fails_with_one_line(o: &Output, what: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(1), "{}", text(o));
    assert!(err.contains(what), "stderr does not name `{what}`:\n{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn a_regular_output_is_replaced_whole_by_a_new_file() {
    let dir = scratch("out-regular");
    let expected = lifo_bytes(&dir);
    let trace = dir.join("t.trace");
    // Longer than the trace: a file rewritten in place would keep its tail.
    std::fs::write(&trace, vec![0xaa; expected.len() * 2]).unwrap();
    let before = std::fs::metadata(&trace).unwrap().ino();
    ok(&gen_lifo(&trace));
    assert!(std::fs::read(&trace).unwrap() == expected, "not the trace");
    // A new file renamed over the old one, which readers still holding it keep.
    assert_ne!(std::fs::metadata(&trace).unwrap().ino(), before);
    assert_eq!(names(&dir), ["t.trace"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_link_output_writes_the_file_it_names_and_stays_a_link() {
    let dir = scratch("out-links");
    let expected = lifo_bytes(&dir);
    let sub = dir.join("sub");
    std::fs::create_dir(&sub).unwrap();
    let target = sub.join("target.trace");
    std::fs::write(&target, "old").unwrap();
    // A relative link (read from the link's directory, not the working one) and an
    // absolute link to it.
    symlink("sub/target.trace", dir.join("link.trace")).unwrap();
    symlink(dir.join("link.trace"), dir.join("outer.trace")).unwrap();
    let o = command(&[
        "gen",
        "--profile",
        "lifo",
        "--scale",
        "0.05",
        "-o",
        "../outer.trace",
    ])
    .current_dir(&sub)
    .output()
    .unwrap();
    ok(&o);
    for link in ["link.trace", "outer.trace"] {
        assert!(kind(&dir.join(link)).is_symlink(), "{link} is no link now");
    }
    assert_eq!(
        std::fs::read_link(dir.join("link.trace")).unwrap(),
        PathBuf::from("sub/target.trace")
    );
    assert!(kind(&target).is_file());
    assert!(std::fs::read(&target).unwrap() == expected, "not the trace");
    // A link to nothing yet makes the file it names.
    symlink("sub/new.trace", dir.join("dangling.trace")).unwrap();
    ok(&gen_lifo(&dir.join("dangling.trace")));
    assert!(kind(&dir.join("dangling.trace")).is_symlink());
    assert!(std::fs::read(sub.join("new.trace")).unwrap() == expected);
    // A chart through a link.
    symlink("sub/map.svg", dir.join("map.svg")).unwrap();
    ok(&bento(&[
        "map",
        target.to_str().unwrap(),
        "-o",
        dir.join("map.svg").to_str().unwrap(),
    ]));
    assert!(kind(&dir.join("map.svg")).is_symlink());
    assert!(
        std::fs::read_to_string(sub.join("map.svg"))
            .unwrap()
            .starts_with("<svg")
    );
    // No temporary file left beside a link or its file.
    assert_eq!(
        names(&dir),
        [
            "dangling.trace",
            "link.trace",
            "map.svg",
            "outer.trace",
            "sub"
        ]
    );
    assert_eq!(names(&sub), ["map.svg", "new.trace", "target.trace"]);
    // A loop of links and a directory are errors, and nothing is written.
    symlink("loop-b", dir.join("loop-a")).unwrap();
    symlink("loop-a", dir.join("loop-b")).unwrap();
    fails_with_one_line(
        &gen_lifo(&dir.join("loop-a")),
        &format!("cannot write {}: ", dir.join("loop-a").display()),
    );
    fails_with_one_line(
        &gen_lifo(&sub),
        &format!("cannot write {}: it is a directory", sub.display()),
    );
    assert!(kind(&sub).is_dir());
    assert_eq!(names(&sub), ["map.svg", "new.trace", "target.trace"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_fifo_output_gets_the_whole_trace_and_stays_a_fifo() {
    let dir = scratch("out-fifo");
    let expected = lifo_bytes(&dir);
    let fifo = dir.join("trace.fifo");
    mkfifo(&fifo);
    let reader = read_fifo(&fifo);
    let out = ok(&gen_lifo(&fifo));
    assert!(
        out.starts_with(&format!("wrote {}: ", fifo.display())),
        "{out}"
    );
    assert!(kind(&fifo).is_fifo(), "{} is no FIFO now", fifo.display());
    let got = reader.join().unwrap();
    assert!(
        got == expected,
        "the reader got {} bytes of {}",
        got.len(),
        expected.len()
    );
    // Through a link to it as well.
    symlink("trace.fifo", dir.join("link")).unwrap();
    let reader = read_fifo(&fifo);
    ok(&gen_lifo(&dir.join("link")));
    assert!(kind(&fifo).is_fifo() && kind(&dir.join("link")).is_symlink());
    assert!(reader.join().unwrap() == expected);
    assert_eq!(names(&dir), ["link", "trace.fifo"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn demo_writes_its_trace_into_a_fifo_and_replays_a_copy() {
    let dir = scratch("out-demo-fifo");
    let fifo = dir.join("demo.trace");
    mkfifo(&fifo);
    let reader = read_fifo(&fifo);
    let out = ok(&bento(&[
        "demo",
        "--levels",
        "1",
        "-o",
        dir.to_str().unwrap(),
        "--json",
    ]));
    assert!(kind(&fifo).is_fifo(), "{} is no FIFO now", fifo.display());
    let got = reader.join().unwrap();
    // The session as `gen` writes it: one level (1/24 of the default 24).
    let expected = dir.join("game.trace");
    ok(&bento(&[
        "gen",
        "--profile",
        "game",
        "--scale",
        "0.0417",
        "-o",
        expected.to_str().unwrap(),
    ]));
    assert!(
        got == std::fs::read(&expected).unwrap(),
        "{} bytes",
        got.len()
    );
    // Every allocator replayed the whole session from the copy.
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    let peak = doc["peak_live"].as_u64().unwrap();
    assert!(peak > 0, "{doc}");
    for run in doc["runs"].as_array().unwrap() {
        assert_eq!(run["peak_live"].as_u64(), Some(peak), "{run}");
    }
    assert_eq!(
        names(&dir),
        [
            "demo-heapmap.svg",
            "demo-memory.svg",
            "demo-profile.pb",
            "demo.trace",
            "game.trace"
        ]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Makes the character device `major`, `minor` at `path`; false where this user may
/// not (not root, or a container without the capability).
fn mknod(path: &Path, major: u32, minor: u32) -> bool {
    Command::new("mknod")
        .arg(path)
        .args(["c", &major.to_string(), &minor.to_string()])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Checks `path` is still the character device it was, `rdev` its numbers.
fn still_the_device(path: &Path, rdev: u64) {
    let m = std::fs::symlink_metadata(path).unwrap();
    assert!(
        m.file_type().is_char_device(),
        "{} is no device now",
        path.display()
    );
    assert_eq!(m.rdev(), rdev, "{}", path.display());
}

#[test]
#[cfg(target_os = "linux")]
fn a_device_output_is_written_in_place_and_never_replaced() {
    let dir = scratch("out-devices");
    let (null, full) = (dir.join("null"), dir.join("full"));
    if mknod(&null, 1, 3) && mknod(&full, 1, 7) {
        let rdev = |p: &Path| std::fs::metadata(p).unwrap().rdev();
        let (null_dev, full_dev) = (rdev(&null), rdev(&full));
        let out = ok(&gen_lifo(&null));
        assert!(
            out.starts_with(&format!("wrote {}: ", null.display())),
            "{out}"
        );
        still_the_device(&null, null_dev);
        // A chart, and through a link.
        symlink("null", dir.join("link")).unwrap();
        let trace = dir.join("t.trace");
        ok(&gen_lifo(&trace));
        ok(&bento(&[
            "map",
            trace.to_str().unwrap(),
            "-o",
            dir.join("link").to_str().unwrap(),
        ]));
        still_the_device(&null, null_dev);
        assert!(kind(&dir.join("link")).is_symlink());
        // A device that refuses the write: one line naming it.
        fails_with_one_line(
            &gen_lifo(&full),
            &format!("cannot write {}: No space left on device", full.display()),
        );
        still_the_device(&full, full_dev);
        assert_eq!(names(&dir), ["full", "link", "null", "t.trace"]);
    } else {
        eprintln!("skipping the device nodes of this test's own: mknod needs root");
    }
    // The system's /dev/full, now that the nodes of this test's own stayed devices
    // (without root, /dev cannot be written: nothing there can be replaced).
    let dev_full = Path::new("/dev/full");
    let rdev = std::fs::metadata(dev_full).unwrap().rdev();
    let o = gen_lifo(dev_full);
    fails_with_one_line(&o, "cannot write /dev/full: No space left on device");
    assert!(stdout(&o).is_empty(), "{}", text(&o));
    still_the_device(dev_full, rdev);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `-o /dev/stdout` with stdout a file the shell opened (`>> file`): the trace goes
/// into that file after what it held, and the file is the same file afterwards (not
/// a new one renamed over it, which would leave the shell's descriptor on a file with
/// no name).
#[test]
fn stdout_redirected_to_a_file_is_appended_to_not_replaced() {
    let dir = scratch("stdout-file");
    let expected = lifo_bytes(&dir);
    let out = dir.join("out");
    std::fs::write(&out, b"head\n").unwrap();
    let before = std::fs::metadata(&out).unwrap().ino();
    let handle = std::fs::OpenOptions::new().append(true).open(&out).unwrap();
    let o = command(&[
        "gen",
        "--profile",
        "lifo",
        "--scale",
        "0.05",
        "-o",
        "/dev/stdout",
    ])
    .stdout(handle)
    .output()
    .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        std::fs::metadata(&out).unwrap().ino(),
        before,
        "the same file"
    );
    let got = std::fs::read(&out).unwrap();
    assert!(got.starts_with(b"head\n"), "what it held is kept");
    assert_eq!(
        &got[5..5 + expected.len()],
        &expected[..],
        "then the whole trace"
    );
    let _ = std::fs::remove_dir_all(dir);
}
