//! Renders `docs/benchmarks.md` and its charts from the last run's figures
//! (`target/criterion` and `target/bench-report`), through
//! `benches/report/template.md`. `cargo xtask bench` measures and then runs this;
//! `cargo xtask bench --render` runs only this.

use std::path::Path;
use std::process::ExitCode;

use bento_benches::report::{Data, render};

fn main() -> ExitCode {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the benches live in the workspace");
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or(root.join("target"), Into::into);
    let result = Data::load(&target.join("criterion"), &target.join("bench-report"))
        .and_then(|data| {
            let template = std::fs::read_to_string(root.join("benches/report/template.md"))
                .map_err(|e| format!("benches/report/template.md: {e}"))?;
            render(&template, &data, &root.join("docs/img"))
        })
        .and_then(|text| {
            std::fs::write(root.join("docs/benchmarks.md"), text)
                .map_err(|e| format!("docs/benchmarks.md: {e}"))
        });
    match result {
        Ok(()) => {
            println!("report: wrote docs/benchmarks.md and its charts in docs/img");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("report: {e}");
            ExitCode::FAILURE
        }
    }
}
