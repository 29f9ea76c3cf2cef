//! `cargo xtask house`: the shape of the code a newcomer relies on. No source file of
//! a crate over [`MAX_LINES`] lines, and no circle in the graph of which file of a
//! crate names which (`crate::a::b` paths and `use crate::{…}` lists, comments and
//! test modules left out).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::step::{Outcome, Step, root};

pub(crate) const STEP: Step = Step { name: "house", run };

/// The most lines a file under `crates/*/src` holds.
const MAX_LINES: usize = 900;

fn run() -> Outcome {
    let crates = root().join("crates");
    let mut problems = Vec::new();
    let Ok(dirs) = std::fs::read_dir(&crates) else {
        return Outcome::Failed(format!("cannot read {}", crates.display()));
    };
    let mut dirs: Vec<PathBuf> = dirs.filter_map(Result::ok).map(|d| d.path()).collect();
    dirs.sort();
    for dir in dirs {
        let src = dir.join("src");
        if !src.is_dir() {
            continue;
        }
        let files = rust_files(&src);
        for file in &files {
            let lines = std::fs::read_to_string(file).map_or(0, |t| t.lines().count());
            if lines > MAX_LINES {
                problems.push(format!(
                    "{} has {lines} lines (at most {MAX_LINES})",
                    shown(file)
                ));
            }
        }
        for circle in circles(&src, &files) {
            let names: Vec<String> = circle.iter().map(|f| shown(f)).collect();
            problems.push(format!("a circle of files: {}", names.join(" -> ")));
        }
    }
    if problems.is_empty() {
        Outcome::Passed
    } else {
        Outcome::Failed(problems.join("\n"))
    }
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out.sort();
    out
}

fn shown(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// The file module path `a::b` (or a prefix of it) names under `src`.
fn module_file(src: &Path, path: &[&str]) -> Option<PathBuf> {
    (1..=path.len()).rev().find_map(|n| {
        let base = path[..n].iter().fold(src.to_path_buf(), |p, s| p.join(s));
        let file = base.with_extension("rs");
        let module = base.join("mod.rs");
        [file, module].into_iter().find(|f| f.is_file())
    })
}

/// The code of `text` a reader of imports looks at: no comment lines, nothing after
/// the first `#[cfg(test)]` test module.
fn code(text: &str) -> String {
    let text = text.split("#[cfg(test)]\nmod tests").next().unwrap_or(text);
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The files each file names through `crate::` paths.
fn edges(src: &Path, files: &[PathBuf]) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let mut graph = BTreeMap::new();
    for file in files {
        let text = code(&std::fs::read_to_string(file).unwrap_or_default());
        let mut to = BTreeSet::new();
        let mut add = |path: &str| {
            let parts: Vec<&str> = path
                .split("::")
                .map(str::trim)
                .take_while(|s| s.chars().next().is_some_and(|c| c.is_ascii_lowercase()))
                .collect();
            if let Some(target) = module_file(src, &parts)
                && &target != file
            {
                to.insert(target);
            }
        };
        for (i, _) in text.match_indices("crate::") {
            let rest = &text[i + "crate::".len()..];
            if let Some(list) = rest.strip_prefix('{') {
                // `use crate::{a::B, c};`
                for item in list.split('}').next().unwrap_or("").split(',') {
                    add(item);
                }
            } else {
                let end = rest
                    .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                    .unwrap_or(rest.len());
                add(&rest[..end]);
            }
        }
        graph.insert(file.clone(), to);
    }
    graph
}

/// Each circle of files (a strongly connected set of more than one), by Tarjan.
fn circles(src: &Path, files: &[PathBuf]) -> Vec<Vec<PathBuf>> {
    struct Walk<'g> {
        graph: &'g BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        index: BTreeMap<&'g PathBuf, usize>,
        low: BTreeMap<&'g PathBuf, usize>,
        stack: Vec<&'g PathBuf>,
        found: Vec<Vec<PathBuf>>,
    }
    impl<'g> Walk<'g> {
        fn visit(&mut self, v: &'g PathBuf) {
            let i = self.index.len();
            self.index.insert(v, i);
            self.low.insert(v, i);
            self.stack.push(v);
            for w in self.graph.get(v).into_iter().flatten() {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let lw = self.low[w];
                    let lv = self.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(lw);
                } else if self.stack.contains(&w) {
                    let iw = self.index[w];
                    let lv = self.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(iw);
                }
            }
            if self.low[v] == self.index[v] {
                let mut set = Vec::new();
                while let Some(w) = self.stack.pop() {
                    set.push(w.clone());
                    if w == v {
                        break;
                    }
                }
                if set.len() > 1 {
                    set.sort();
                    self.found.push(set);
                }
            }
        }
    }
    let graph = edges(src, files);
    let mut walk = Walk {
        graph: &graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !walk.index.contains_key(v) {
            walk.visit(v);
        }
    }
    walk.found
}
