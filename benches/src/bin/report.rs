//! Renders `docs/benchmarks.md` and its charts from the last run's stats
//! (`target/criterion` and the JSON files in `target/bench-report`), through
//! `benches/report/template.md`. `cargo xtask bench` measures and then runs this;
//! `cargo xtask bench --render` runs only this.
//!
//! `--out FILE` writes the report to FILE instead, and its charts to `img/` beside
//! it (a preview that leaves `docs/` alone).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use bento_benches::report::{Data, render};

fn main() -> ExitCode {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the benches live in the workspace");
    let args: Vec<String> = std::env::args().skip(1).collect();
    let out: PathBuf = match &args[..] {
        [] => root.join("docs/benchmarks.md"),
        [flag, file] if flag == "--out" => file.into(),
        _ => {
            eprintln!("usage: report [--out FILE]");
            return ExitCode::FAILURE;
        }
    };
    let img = out.parent().unwrap_or(Path::new(".")).join("img");
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or(root.join("target"), Into::into);
    let result = Data::load(&target.join("criterion"), &target.join("bench-report"))
        .and_then(|data| {
            let template = std::fs::read_to_string(root.join("benches/report/template.md"))
                .map_err(|e| format!("benches/report/template.md: {e}"))?;
            std::fs::create_dir_all(&img).map_err(|e| format!("{}: {e}", img.display()))?;
            render(&template, &data, &img)
        })
        .and_then(|text| std::fs::write(&out, text).map_err(|e| format!("{}: {e}", out.display())));
    match result {
        Ok(()) => {
            println!(
                "report: wrote {} and its charts in {}",
                out.display(),
                img.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("report: {e}");
            ExitCode::FAILURE
        }
    }
}
