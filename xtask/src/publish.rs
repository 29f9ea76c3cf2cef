//! `cargo xtask publish`: every crate meant for users packages as crates.io would take
//! it (metadata, README, licence files, versions on every dependency between our
//! crates, in an order that publishes each before the crates that need it). Nothing is
//! uploaded. Then a user's crate that depends on `bento-alloc` with its default
//! features builds one version of each dependency (`cargo tree -d` finds none twice:
//! one allocator-api2, not two).

use crate::step::{Outcome, Step, cargo, root, status, target_dir};

pub(crate) const STEP: Step = Step {
    name: "publish",
    run,
};

fn run() -> Outcome {
    let mut cmd = cargo();
    // `--no-verify`: the packages' own builds are the other steps' work. `--allow-dirty`
    // lets a developer check before committing.
    cmd.args([
        "publish",
        "--workspace",
        "--dry-run",
        "--no-verify",
        "--allow-dirty",
    ]);
    match status(cmd) {
        Outcome::Passed => one_version_each(),
        other => other,
    }
}

/// A user's crate in a scratch directory, depending on `bento-alloc` by path with
/// its default features and resolved from the workspace's lock file: `cargo tree -d`
/// must print nothing.
fn one_version_each() -> Outcome {
    let dir = target_dir().join("tmp").join("user-crate");
    let _ = std::fs::remove_dir_all(&dir);
    let umbrella = root().join("crates").join("bento");
    let manifest = format!(
        "[package]\nname = \"user-crate\"\nversion = \"0.0.0\"\nedition = \"2024\"\n\n\
         [dependencies]\nbento-alloc = {{ path = {:?} }}\n\n[workspace]\n",
        umbrella.display().to_string()
    );
    let made = std::fs::create_dir_all(dir.join("src"))
        .and_then(|()| std::fs::write(dir.join("Cargo.toml"), manifest))
        .and_then(|()| std::fs::write(dir.join("src").join("lib.rs"), ""))
        .and_then(|()| std::fs::copy(root().join("Cargo.lock"), dir.join("Cargo.lock")));
    if let Err(e) = made {
        return Outcome::Failed(format!("{}: {e}", dir.display()));
    }
    let mut tree = cargo();
    tree.current_dir(&dir).args([
        "tree",
        "--duplicates",
        "--edges",
        "normal,build",
        "--offline",
    ]);
    println!("$ cargo tree --duplicates (a user crate on bento-alloc's defaults)");
    match tree.output() {
        Ok(o) if o.status.success() => {
            let dups = String::from_utf8_lossy(&o.stdout);
            if dups.trim().is_empty() {
                Outcome::Passed
            } else {
                Outcome::Failed(format!("a default build compiles crates twice:\n{dups}"))
            }
        }
        Ok(o) => Outcome::Failed(format!(
            "cargo tree failed: {}",
            String::from_utf8_lossy(&o.stderr)
        )),
        Err(e) => Outcome::Failed(format!("cargo tree: {e}")),
    }
}
