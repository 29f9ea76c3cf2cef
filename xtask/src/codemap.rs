//! The code map's check, part of `cargo xtask house`: every file, type and function
//! that docs/ARCHITECTURE.md and docs/unsafe.md place in a file is there.
//!
//! - **Journeys** (ARCHITECTURE.md): each `path.rs:Item` reference names a file and,
//!   after the colon, a function (`Type::method` or `function`: a `fn` of that name
//!   in the file), a macro (`name!`: its `macro_rules!`) or a type (defined there). A
//!   path under `crates/` in full (`common/src/inner/free.rs`) sets the crate; a
//!   short one (`run.rs`) is the one file of that crate's `src` whose path ends so.
//! - **The code map** (its section of ARCHITECTURE.md): each crate's paragraph,
//!   `**name** (`crates/dir`)`, lists files (`` `x.rs` ``) and folders (`` `x/` ``,
//!   whose parenthesis lists files inside it) each followed by the types it defines:
//!   every file and folder exists, and every type named after one (a backticked
//!   `CamelCase` word) is defined in that file (or folder), or implemented there
//!   when it is a trait (`impl Trait for`).
//! - **docs/unsafe.md**: each contract's row names a trait and the crate and file
//!   that define it.

use std::path::{Path, PathBuf};

/// Every problem of the docs under `root`.
pub(crate) fn check(root: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    let arch = root.join("docs/ARCHITECTURE.md");
    match std::fs::read_to_string(&arch) {
        Ok(text) => {
            problems.extend(journeys(root, &text));
            problems.extend(code_map(root, &text));
        }
        Err(e) => problems.push(format!("cannot read {}: {e}", arch.display())),
    }
    let unsafe_md = root.join("docs/unsafe.md");
    match std::fs::read_to_string(&unsafe_md) {
        Ok(text) => problems.extend(contracts(root, &text)),
        Err(e) => problems.push(format!("cannot read {}: {e}", unsafe_md.display())),
    }
    problems
}

/// The `path.rs:Item` references of the text, each checked.
fn journeys(root: &Path, text: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let mut krate: Option<PathBuf> = None;
    for (n, line) in text.lines().enumerate() {
        for (path, item) in references(line) {
            let at = format!("docs/ARCHITECTURE.md:{}: `{path}:{item}`", n + 1);
            let full = root.join("crates").join(&path);
            let file = if path.contains("/src/") && full.is_file() {
                krate = Some(crate_src(&full));
                full
            } else if path.contains("/src/") {
                problems.push(format!("{at}: no file crates/{path}"));
                continue;
            } else {
                let Some(src) = &krate else {
                    problems.push(format!("{at}: a short path before any full one"));
                    continue;
                };
                match unique_file(src, &path) {
                    Ok(file) => file,
                    Err(why) => {
                        problems.push(format!("{at}: {why}"));
                        continue;
                    }
                }
            };
            let code = std::fs::read_to_string(&file).unwrap_or_default();
            if !names(&code, &item) {
                problems.push(format!("{at}: {} has no {item}", shown(root, &file)));
            }
        }
    }
    problems
}

/// The `src` folder of the crate holding `file`.
fn crate_src(file: &Path) -> PathBuf {
    let mut dir = file.parent().unwrap_or(file).to_path_buf();
    while dir.file_name().is_some_and(|n| n != "src") {
        if !dir.pop() {
            break;
        }
    }
    dir
}

/// The one file under `src` whose path ends with `tail`.
fn unique_file(src: &Path, tail: &str) -> Result<PathBuf, String> {
    let found: Vec<PathBuf> = rust_files(src)
        .into_iter()
        .filter(|f| {
            let s = f.to_string_lossy();
            s.ends_with(&format!("/{tail}"))
        })
        .collect();
    match &found[..] {
        [one] => Ok(one.clone()),
        [] => Err(format!("no {tail} under {}", src.display())),
        _ => Err(format!(
            "{tail} is more than one file under {}",
            src.display()
        )),
    }
}

/// The `path.rs:Item` pairs of `line`: a path of word characters and slashes ending
/// in `.rs`, a colon, then an item path (`Type::fn`, `fn`, `macro!`).
fn references(line: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let bytes = line.as_bytes();
    let mut i = 0;
    while let Some(at) = line[i..].find(".rs:") {
        let end = i + at + 3;
        let mut start = end;
        while start > 0 {
            let c = bytes[start - 1];
            if c.is_ascii_alphanumeric() || c == b'_' || c == b'/' || c == b'.' {
                start -= 1;
            } else {
                break;
            }
        }
        let mut stop = end + 1;
        while stop < bytes.len() {
            let c = bytes[stop];
            if c.is_ascii_alphanumeric() || c == b'_' || c == b':' || c == b'!' {
                stop += 1;
            } else {
                break;
            }
        }
        let path = &line[start..end];
        let item = line[end + 1..stop].trim_end_matches(':');
        if !path.is_empty() && !item.is_empty() {
            out.push((path.to_owned(), item.to_owned()));
        }
        i = stop.max(end + 1);
    }
    out
}

/// Whether `code` has what `item` names: the last segment's `fn`, `macro_rules!`,
/// or type.
fn names(code: &str, item: &str) -> bool {
    let last = item.rsplit("::").next().unwrap_or(item);
    if let Some(mac) = last.strip_suffix('!') {
        return has_word_after(code, "macro_rules!", mac);
    }
    if last.starts_with(|c: char| c.is_ascii_uppercase()) {
        return defines(code, last);
    }
    has_word_after(code, "fn", last)
}

/// Whether `code` holds `keyword name` with `name` a whole word.
fn has_word_after(code: &str, keyword: &str, name: &str) -> bool {
    let pattern = format!("{keyword} {name}");
    code.match_indices(&pattern).any(|(at, _)| {
        let before = code[..at].chars().next_back();
        let after = code[at + pattern.len()..].chars().next();
        !before.is_some_and(is_word) && !after.is_some_and(is_word)
    })
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Whether `code` defines type (or trait) `name`, or implements trait `name`.
fn defines(code: &str, name: &str) -> bool {
    ["struct", "enum", "trait", "type", "union", "macro_rules!"]
        .iter()
        .any(|k| has_word_after(code, k, name))
        || code.lines().any(|l| {
            let l = l.trim_start();
            (l.starts_with("impl") || l.starts_with("unsafe impl"))
                && l.split(|c: char| !is_word(c)).any(|w| w == name)
                && l.contains(" for ")
                && l.find(name) < l.find(" for ")
        })
}

/// The code map's section: each crate's paragraph checked.
fn code_map(root: &Path, text: &str) -> Vec<String> {
    let Some(start) = text.find("\n## Code map\n") else {
        return vec!["docs/ARCHITECTURE.md has no `## Code map` section".into()];
    };
    let section = &text[start + 1..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |e| e + 3)];
    let mut problems = Vec::new();
    for paragraph in section.split("\n\n") {
        let Some(dir) = crate_dir(paragraph) else {
            continue;
        };
        let base = root.join("crates").join(&dir);
        if !base.is_dir() {
            problems.push(format!("code map: no folder crates/{dir}"));
            continue;
        }
        problems.extend(paragraph_problems(root, &base, paragraph));
    }
    problems
}

/// The folder of a crate's paragraph: `**name** (`crates/dir`...`.
fn crate_dir(paragraph: &str) -> Option<String> {
    let rest = paragraph.trim_start().strip_prefix("**")?;
    let rest = &rest[rest.find("** (`crates/")? + "** (`crates/".len()..];
    Some(rest[..rest.find('`')?].to_owned())
}

/// A token of a paragraph: a backticked word, or a parenthesis.
enum Token<'a> {
    Code(&'a str),
    Open,
    Close,
}

fn tokens(text: &str) -> Vec<Token<'_>> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find(['`', '(', ')']) {
        match rest.as_bytes()[i] {
            b'`' => {
                let after = &rest[i + 1..];
                let Some(j) = after.find('`') else { break };
                out.push(Token::Code(&after[..j]));
                rest = &after[j + 1..];
            }
            b'(' => {
                out.push(Token::Open);
                rest = &rest[i + 1..];
            }
            _ => {
                out.push(Token::Close);
                rest = &rest[i + 1..];
            }
        }
    }
    out
}

/// The problems of one crate's paragraph, whose crate lies at `base`.
fn paragraph_problems(root: &Path, base: &Path, paragraph: &str) -> Vec<String> {
    let mut problems = Vec::new();
    // The folders the parentheses open (`cache/` ( ... )), innermost last, each with
    // the files that were current at the parenthesis (current again at its end).
    let mut dirs: Vec<(Option<PathBuf>, Vec<PathBuf>)> = Vec::new();
    let mut last_dir: Option<PathBuf> = None;
    // The files (one, or a folder's) the types that follow are looked for in.
    let mut current: Vec<PathBuf> = Vec::new();
    let mut first = true;
    for token in tokens(paragraph) {
        match token {
            Token::Open => {
                dirs.push((last_dir.clone(), current.clone()));
            }
            Token::Close => {
                if let Some((dir, files)) = dirs.pop() {
                    last_dir = dir;
                    current = files;
                }
            }
            Token::Code(code) if first => {
                // The crate's own folder.
                first = false;
                let _ = code;
            }
            Token::Code(code) => {
                let inside = dirs
                    .iter()
                    .rev()
                    .find_map(|(dir, _)| dir.clone())
                    .unwrap_or_else(|| default_dir(base, code));
                if let Some(paths) = file_token(code) {
                    current.clear();
                    last_dir = None;
                    for p in paths {
                        let full = inside.join(&p);
                        if p.ends_with('/') {
                            if full.is_dir() {
                                current.extend(rust_files(&full));
                                last_dir = Some(full);
                            } else {
                                problems
                                    .push(format!("code map: no folder {}", shown(root, &full)));
                            }
                        } else if full.is_file() {
                            current.push(full);
                        } else {
                            problems.push(format!("code map: no file {}", shown(root, &full)));
                        }
                    }
                } else if let Some(name) = type_token(code) {
                    if current.is_empty() {
                        continue;
                    }
                    let found = current
                        .iter()
                        .any(|f| std::fs::read_to_string(f).is_ok_and(|c| defines(&c, name)));
                    if !found {
                        let files: Vec<String> = current.iter().map(|f| shown(root, f)).collect();
                        problems.push(format!(
                            "code map: `{name}` is not defined in {}",
                            files.join(", ")
                        ));
                    }
                }
            }
        }
    }
    problems
}

/// Where a file token of a crate's paragraph is looked for: its `src`, or the
/// crate's folder itself for `tests/…`, `examples/…` and `src/…`.
fn default_dir(base: &Path, code: &str) -> PathBuf {
    if ["tests/", "examples/", "src/", "benches/"]
        .iter()
        .any(|p| code.starts_with(p))
    {
        base.to_path_buf()
    } else {
        base.join("src")
    }
}

/// The files a token names: `x.rs`, `dir/`, `a/{b,c}.rs`; `None` when it is no file.
fn file_token(code: &str) -> Option<Vec<String>> {
    let plain = |s: &str| {
        s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '/' | '.' | '-'))
    };
    if let (Some(open), Some(close)) = (code.find('{'), code.find('}')) {
        let (head, tail) = (&code[..open], &code[close + 1..]);
        let names: Vec<String> = code[open + 1..close]
            .split(',')
            .map(|n| format!("{head}{n}{tail}"))
            .collect();
        return names
            .iter()
            .all(|n| plain(n) && (n.ends_with(".rs") || n.ends_with('/')))
            .then_some(names);
    }
    (plain(code) && (code.ends_with(".rs") || code.ends_with('/'))).then(|| vec![code.into()])
}

/// The type a token names: a `CamelCase` word (generics dropped), not a path.
fn type_token(code: &str) -> Option<&str> {
    let name = code.split('<').next().unwrap_or(code);
    (name.starts_with(|c: char| c.is_ascii_uppercase())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name.chars().any(|c| c.is_ascii_lowercase()))
    .then_some(name)
}

/// The rows of docs/unsafe.md's contracts table: `` | `Trait` (…) | crate `src/x.rs` | ``.
fn contracts(root: &Path, text: &str) -> Vec<String> {
    let mut problems = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let [_, name, place, ..] = cells[..] else {
            continue;
        };
        let Some(name) = name.strip_prefix('`').and_then(|n| n.split('`').next()) else {
            continue;
        };
        let mut words = place.split_whitespace();
        let (Some(krate), Some(file)) = (words.next(), words.next()) else {
            continue;
        };
        if !krate.starts_with("bento-") {
            continue;
        }
        let at = format!("docs/unsafe.md:{}", n + 1);
        let file = file.trim_matches('`');
        let Some(dir) = crate_folder(root, krate) else {
            problems.push(format!("{at}: no crate {krate}"));
            continue;
        };
        let path = dir.join(file);
        match std::fs::read_to_string(&path) {
            Ok(code) if defines(&code, name) => {}
            Ok(_) => problems.push(format!(
                "{at}: {} does not define `{name}`",
                shown(root, &path)
            )),
            Err(_) => problems.push(format!("{at}: no file {}", shown(root, &path))),
        }
    }
    problems
}

/// The folder of the crate called `name` (its manifest's `name`).
fn crate_folder(root: &Path, name: &str) -> Option<PathBuf> {
    let dirs = std::fs::read_dir(root.join("crates")).ok()?;
    dirs.filter_map(Result::ok).map(|d| d.path()).find(|d| {
        std::fs::read_to_string(d.join("Cargo.toml"))
            .is_ok_and(|t| t.lines().any(|l| l.trim() == format!("name = \"{name}\"")))
    })
}

/// The Rust files under `dir`, recursively.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    let mut entries: Vec<PathBuf> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

/// `path` relative to `root`, for messages.
fn shown(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A workspace of one crate, `crates/k` (package `bento-k`), with `files`, and
    /// the two docs.
    fn tree(name: &str, files: &[(&str, &str)], arch: &str, unsafe_md: &str) -> PathBuf {
        let root =
            std::env::temp_dir().join(format!("bento-codemap-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for (path, text) in files {
            let full = root.join("crates/k").join(path);
            std::fs::create_dir_all(full.parent().unwrap()).unwrap();
            std::fs::write(full, text).unwrap();
        }
        std::fs::write(
            root.join("crates/k/Cargo.toml"),
            "[package]\nname = \"bento-k\"\n",
        )
        .unwrap();
        std::fs::create_dir_all(root.join("docs")).unwrap();
        std::fs::write(root.join("docs/ARCHITECTURE.md"), arch).unwrap();
        std::fs::write(root.join("docs/unsafe.md"), unsafe_md).unwrap();
        root
    }

    const FILES: &[(&str, &str)] = &[
        (
            "src/lib.rs",
            "mod map;\nmod front;\npub unsafe trait Source {}\n",
        ),
        (
            "src/map.rs",
            "pub struct RegionMap;\nimpl RegionMap { fn owner(&self) {} }\n",
        ),
        (
            "src/front/mod.rs",
            "pub struct Front;\nimpl Drop for Front { fn drop(&mut self) {} }\n",
        ),
        (
            "src/front/bins.rs",
            "pub struct Bin(u8);\nmacro_rules! bins { () => {} }\n",
        ),
    ];

    const UNSAFE_MD: &str = "| contract | where | what |\n|---|---|---|\n| `Source` (unsafe trait) | bento-k `src/lib.rs` | x |\n";

    fn arch(map: &str, journey: &str) -> String {
        format!(
            "# A\n\n```text\n{journey}\n```\n\n## Code map\n\n{map}\n\n## Invariants\n\n- none\n"
        )
    }

    const MAP: &str = "**bento-k** (`crates/k`): `lib.rs` `Source`; `map.rs` `RegionMap`; `front/` `Front`, `Drop` (`bins.rs` `Bin`).";
    const JOURNEY: &str = "k/src/map.rs:RegionMap::owner   a read\n  bins.rs:bins!";

    #[test]
    fn a_true_map_passes() {
        let root = tree("true", FILES, &arch(MAP, JOURNEY), UNSAFE_MD);
        assert_eq!(check(&root), Vec::<String>::new());
    }

    #[test]
    fn a_type_placed_in_the_wrong_file_fails() {
        let map = MAP.replace("`map.rs` `RegionMap`", "`lib.rs` `RegionMap`");
        let root = tree("wrong-type", FILES, &arch(&map, JOURNEY), UNSAFE_MD);
        let problems = check(&root);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("`RegionMap` is not defined in crates/k/src/lib.rs"));
    }

    #[test]
    fn a_missing_file_fails() {
        let map = MAP.replace("`bins.rs` `Bin`", "`cache.rs` `Bin`");
        let root = tree("no-file", FILES, &arch(&map, JOURNEY), UNSAFE_MD);
        let problems = check(&root);
        assert!(
            problems
                .iter()
                .any(|p| p.contains("no file crates/k/src/front/cache.rs")),
            "{problems:?}"
        );
    }

    #[test]
    fn a_journey_to_a_missing_function_or_file_fails() {
        let journey = JOURNEY
            .replace("owner", "lookup")
            .replace("bins.rs", "tls.rs");
        let root = tree("journey", FILES, &arch(MAP, &journey), UNSAFE_MD);
        let problems = check(&root);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].contains("has no RegionMap::lookup"));
        assert!(problems[1].contains("no tls.rs"));
    }

    #[test]
    fn a_contract_in_the_wrong_file_fails() {
        let md = UNSAFE_MD.replace("src/lib.rs", "src/map.rs");
        let root = tree("contract", FILES, &arch(MAP, JOURNEY), &md);
        let problems = check(&root);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("does not define `Source`"));
    }
}
