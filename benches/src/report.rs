//! `docs/benchmarks.md` from one run's stats: criterion's results and the JSON
//! files the measuring programs and callgrind's counts leave in
//! `target/bench-report/`, put into the template `benches/report/template.md`, with
//! the targets checked and the charts drawn. `cargo xtask bench` measures and then
//! runs `--bin report`; the report alone re-renders the last run's stats.
//!
//! Every table is formatted here from the numbers: the programs write stats only
//! (`rows` of named fields, units in the names: `peak_live_bytes`, `p99_ns`), and the
//! targets are judged from those numbers.
//!
//! The template is Markdown in which a line holding only a directive is replaced:
//!
//! | directive | becomes |
//! |---|---|
//! | `{{meta}}` | the machine, the date and the commands of the run (`meta.json`) |
//! | `{{summary}}` | every target, measured and marked met or not, with a count |
//! | `{{criterion GROUP SUBJECT}}` | every benchmark of the group, its time, rate and `SUBJECT ÷ it` |
//! | `{{grid GROUP:SUBJECT…}}` | groups side by side, each cell a time and `SUBJECT ÷ it` |
//! | `{{chart NAME GROUP:SUBJECT…}}` | `docs/img/bench-NAME.svg`, SUBJECT ÷ each peer as bars, and its link |
//! | `{{icount MODE…}}` | callgrind's instructions per operation of each `insns` mode |
//! | `{{icount-grid PREFIX COL,… ROW,…}}` | the same of the modes `PREFIX-COL-ROW`, as a grid |
//! | `{{table NAME}}` | a measuring program's table, from `NAME.json` |
//!
//! A stat missing from the run shows as `—` and its target as not measured.

mod data;
mod fmt;
mod programs;
mod render;
mod targets;

pub use data::{Bench, Data, Icount};
pub use fmt::duration;
pub use render::render;
pub use targets::{Bound, TARGETS, Target, summary_table, verdict};

#[cfg(test)]
mod tests;
