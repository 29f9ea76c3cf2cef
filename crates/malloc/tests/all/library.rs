//! bento-malloc's library, built once per test run as its README says (release, on
//! its own, `panic = "abort"`) into a target directory of its own. bento-alloc-cli's
//! recording tests read this file too.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The library, built once per test run.
pub(crate) fn library() -> &'static Path {
    static LIBRARY: OnceLock<PathBuf> = OnceLock::new();
    LIBRARY.get_or_init(|| {
        let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bento-malloc");
        let status = Command::new(env!("CARGO"))
            .args(["build", "--release", "-p", "bento-malloc", "--target-dir"])
            .arg(&target)
            .env("CARGO_PROFILE_RELEASE_PANIC", "abort")
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("cargo runs");
        assert!(status.success(), "building bento-malloc failed");
        let so = target.join("release").join("libbento_malloc.so");
        assert!(so.exists(), "{} was not built", so.display());
        so
    })
}
