//! `cargo xtask house`: the shape of the code a newcomer relies on, checked on every
//! crate's `src`:
//! - no file over [`MAX_LINES`] lines;
//! - no circle in the graph of which file names which, nor in that of a crate's
//!   top-level modules (the files and folders under `src`: they read as a stack);
//! - no file below a crate's root names a type the root file defines (a type the
//!   lower files share has a file of its own);
//! - the code map of docs/ARCHITECTURE.md and docs/unsafe.md is true (see
//!   `codemap.rs`).
//!
//! A file names what its code's paths name (`use` trees, types, expressions,
//! patterns), each taken, the way the compiler resolves it, through the `use` items
//! of the modules it passes (`crate::Stats` that lib.rs re-exports from `stats.rs`
//! names `stats.rs`) to the file of the module that defines it; a name a glob `use`
//! brings in counts where it is used. Inline modules count as the file they stand in.
//! Items under `#[cfg(test)]` or `#[cfg(doc)]`, and the files of test modules, are
//! left out; so are
//! paths inside macro calls and attributes. With `HOUSE_EDGES` set in the environment
//! the step prints every edge it finds, and the path behind it, on stderr.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::{self, Visit};

use crate::step::{Outcome, Step, root};

pub(crate) const STEP: Step = Step { name: "house", run };

/// The most lines a file under `crates/*/src` holds.
const MAX_LINES: usize = 900;

/// How many `use` items a path is followed through before the search gives up.
const DEPTH: u8 = 16;

fn run() -> Outcome {
    let crates = root().join("crates");
    let Ok(dirs) = std::fs::read_dir(&crates) else {
        return Outcome::Failed(format!("cannot read {}", crates.display()));
    };
    let mut dirs: Vec<PathBuf> = dirs.filter_map(Result::ok).map(|d| d.path()).collect();
    dirs.sort();
    let mut problems: Vec<String> = dirs
        .iter()
        .map(|dir| dir.join("src"))
        .filter(|src| src.is_dir())
        .flat_map(|src| check(&src))
        .collect();
    problems.extend(crate::codemap::check(&root()));
    if problems.is_empty() {
        Outcome::Passed
    } else {
        Outcome::Failed(problems.join("\n"))
    }
}

/// Every problem of the crate whose sources are under `src`.
fn check(src: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    for file in rust_files(src) {
        let lines = std::fs::read_to_string(&file).map_or(0, |t| t.lines().count());
        if lines > MAX_LINES {
            problems.push(format!(
                "{} has {lines} lines (at most {MAX_LINES})",
                shown(&file)
            ));
        }
    }
    let mut graph: BTreeMap<PathBuf, BTreeSet<PathBuf>> = BTreeMap::new();
    let mut root_types = BTreeSet::new();
    for root_file in roots(src) {
        let tree = match Tree::read(&root_file) {
            Ok(tree) => tree,
            Err(why) => {
                problems.push(why);
                continue;
            }
        };
        for (from, to, path) in tree.edges() {
            if std::env::var_os("HOUSE_EDGES").is_some() {
                eprintln!("{} -> {} ({})", shown(&from), shown(&to), path.join("::"));
            }
            if to == root_file && tree.root_type(&path) {
                root_types.insert(format!(
                    "{} names `{}`, a type {} defines (give it a file of its own)",
                    shown(&from),
                    path.join("::"),
                    shown(&root_file)
                ));
            }
            graph.entry(from).or_default().insert(to);
        }
    }
    problems.extend(root_types);
    for circle in circles(&graph) {
        let names: Vec<String> = circle.iter().map(|f| shown(f)).collect();
        problems.push(format!("a circle of files: {}", names.join(" -> ")));
    }
    for circle in circles(&modules(src, &graph)) {
        let names: Vec<String> = circle.iter().map(|f| shown(f)).collect();
        problems.push(format!("a circle of modules: {}", names.join(" -> ")));
    }
    problems
}

/// The graph of a crate's top-level modules (a file or folder right under `src`,
/// the root files left out): which names which, through any of their files. The
/// modules read as a stack when it has no circle.
fn modules(
    src: &Path,
    files: &BTreeMap<PathBuf, BTreeSet<PathBuf>>,
) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let top = |file: &Path| -> Option<PathBuf> {
        let first = file.strip_prefix(src).ok()?.components().next()?;
        let top = src.join(first);
        let root = top
            .file_name()
            .is_some_and(|n| n == "lib.rs" || n == "main.rs");
        (!root && top != src.join("bin")).then_some(top)
    };
    let mut graph: BTreeMap<PathBuf, BTreeSet<PathBuf>> = BTreeMap::new();
    for (from, tos) in files {
        let Some(a) = top(from) else { continue };
        for to in tos {
            if let Some(b) = top(to)
                && a != b
            {
                graph.entry(a.clone()).or_default().insert(b);
            }
        }
    }
    graph
}

/// The files a crate's targets start from: `lib.rs`, `main.rs` and `bin/*.rs`.
fn roots(src: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = ["lib.rs", "main.rs"]
        .iter()
        .map(|f| src.join(f))
        .filter(|f| f.is_file())
        .collect();
    let bins = src.join("bin");
    if bins.is_dir() {
        out.extend(
            rust_files(&bins)
                .into_iter()
                .filter(|f| f.parent() == Some(&bins)),
        );
    }
    out
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

/// A module path from the crate root (`[]` is the root).
type ModPath = Vec<String>;

/// One module of a crate: where it stands and what it makes visible by name.
#[derive(Default)]
struct Module {
    /// The file it is written in.
    file: PathBuf,
    /// Where the files of its child modules stand.
    dir: PathBuf,
    /// The names it defines: items and child modules.
    defs: BTreeSet<String>,
    /// The types among them (structs, enums, unions, traits, type aliases).
    types: BTreeSet<String>,
    /// Its `use` items: each name brought in, and the path written for it.
    imports: BTreeMap<String, ModPath>,
    /// Its glob `use` items' paths, as written.
    globs: Vec<ModPath>,
    /// Every other path its code writes, as written.
    named: Vec<ModPath>,
}

/// The modules of one crate target, read from its root file down.
struct Tree {
    modules: BTreeMap<ModPath, Module>,
}

impl Tree {
    /// Reads the module tree whose root is `root_file`.
    fn read(root_file: &Path) -> Result<Self, String> {
        let mut tree = Tree {
            modules: BTreeMap::new(),
        };
        let dir = root_file.parent().unwrap_or(Path::new("")).to_path_buf();
        tree.read_file(Vec::new(), root_file, dir)?;
        Ok(tree)
    }

    /// Reads `file` as the module at `path`, whose children's files are in `dir`.
    fn read_file(&mut self, path: ModPath, file: &Path, dir: PathBuf) -> Result<(), String> {
        let text = std::fs::read_to_string(file)
            .map_err(|e| format!("cannot read {}: {e}", shown(file)))?;
        let ast =
            syn::parse_file(&text).map_err(|e| format!("cannot parse {}: {e}", shown(file)))?;
        self.modules.insert(
            path.clone(),
            Module {
                file: file.to_path_buf(),
                dir,
                ..Module::default()
            },
        );
        let mut reader = Reader {
            tree: self,
            at: path,
            error: None,
        };
        for item in &ast.items {
            reader.visit_item(item);
        }
        reader.error.map_or(Ok(()), Err)
    }

    /// Each file-to-file edge: the file that writes a path, the file that defines what
    /// it names, and the path from the crate root.
    fn edges(&self) -> Vec<(PathBuf, PathBuf, ModPath)> {
        let mut out = Vec::new();
        for (at, module) in &self.modules {
            let written = module.imports.values().map(|p| (p, true));
            for (path, used) in written.chain(module.named.iter().map(|p| (p, false))) {
                let Some(full) = self.absolute(at, path, DEPTH) else {
                    continue;
                };
                // Outside a `use`, a path to a module is a local binding that shadows
                // it (`table` in `Self { table }`): no expression or type is a module.
                if !used && self.modules.contains_key(&full) {
                    continue;
                }
                let to = self.file_of(&full);
                if to != module.file {
                    out.push((module.file.clone(), to.to_path_buf(), full));
                }
            }
        }
        out
    }

    /// Whether `path` (from the root) is a type the root file defines.
    fn root_type(&self, path: &[String]) -> bool {
        match (path.first(), self.modules.get(&Vec::new())) {
            (Some(name), Some(root)) => root.types.contains(name),
            _ => false,
        }
    }

    /// The file of the innermost module on `path`.
    fn file_of(&self, path: &[String]) -> &Path {
        (0..=path.len())
            .rev()
            .find_map(|n| self.modules.get(&path[..n]))
            .map_or(Path::new(""), |m| &m.file)
    }

    /// Where `name`, seen from the module `at`, is defined: `at` and the name for
    /// what `at` defines, else where its `use` items take the name from. `None` when
    /// no item of `at` has the name (a local binding, the prelude's, a macro's).
    fn lookup(&self, at: &[String], name: &str, depth: u8) -> Option<Found> {
        let module = self.modules.get(at)?;
        if module.defs.contains(name) {
            let mut path = at.to_vec();
            path.push(name.to_owned());
            return Some(Found::Here(path));
        }
        let depth = depth.checked_sub(1)?;
        if let Some(written) = module.imports.get(name) {
            return Some(
                self.absolute(at, written, depth)
                    .map_or(Found::Outside, Found::Here),
            );
        }
        module.globs.iter().find_map(|written| {
            let from = self.absolute(at, written, depth)?;
            self.lookup(&from, name, depth)
        })
    }

    /// `path`, as written in the module `at`, from the crate root; `None` when it
    /// leads out of the crate or starts with a name no item has.
    fn absolute(&self, at: &[String], path: &[String], depth: u8) -> Option<ModPath> {
        let (first, mut rest) = path.split_first()?;
        let here = match first.as_str() {
            "crate" => Vec::new(),
            "self" => at.to_vec(),
            "super" => {
                let mut here = at.split_last()?.1.to_vec();
                while let Some((next, tail)) = rest.split_first()
                    && next == "super"
                {
                    here.pop()?;
                    rest = tail;
                }
                here
            }
            _ => match self.lookup(at, first, depth)? {
                Found::Here(here) => here,
                Found::Outside => return None,
            },
        };
        self.walk(here, rest, depth)
    }

    /// `rest` followed from the module path `here`, through each module's names; what
    /// follows an item (a variant, an associated name) or a name no item of the
    /// module has is kept as written. `None` when the way leads out of the crate.
    fn walk(&self, mut here: ModPath, rest: &[String], depth: u8) -> Option<ModPath> {
        for (i, name) in rest.iter().enumerate() {
            let found = if self.modules.contains_key(&here) {
                self.lookup(&here, name, depth)
            } else {
                None
            };
            match found {
                Some(Found::Here(next)) => here = next,
                Some(Found::Outside) => return None,
                None => {
                    here.extend_from_slice(&rest[i..]);
                    break;
                }
            }
        }
        Some(here)
    }
}

/// What a name in a module stands for.
enum Found {
    /// An item of this crate, by its path from the root.
    Here(ModPath),
    /// An item another crate defines.
    Outside,
}

/// Reads one file's items into a [`Tree`].
struct Reader<'t> {
    tree: &'t mut Tree,
    /// The module being read.
    at: ModPath,
    /// The first file that could not be read.
    error: Option<String>,
}

impl Reader<'_> {
    fn module(&mut self) -> &mut Module {
        self.tree
            .modules
            .get_mut(&self.at)
            .expect("a module is made before it is read")
    }

    /// Records a `use` tree below `prefix`.
    fn use_tree(&mut self, prefix: &mut ModPath, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => self.import(prefix, &n.ident, &n.ident),
            syn::UseTree::Rename(r) => self.import(prefix, &r.ident, &r.rename),
            syn::UseTree::Glob(_) => {
                let glob = prefix.clone();
                self.module().globs.push(glob);
            }
            syn::UseTree::Group(g) => {
                for tree in &g.items {
                    self.use_tree(prefix, tree);
                }
            }
        }
    }

    fn import(&mut self, prefix: &ModPath, ident: &syn::Ident, name: &syn::Ident) {
        let mut path = prefix.clone();
        let name = if ident == "self" {
            path.last().cloned().unwrap_or_default()
        } else {
            path.push(ident.to_string());
            name.to_string()
        };
        if name != "_" {
            self.module().imports.insert(name, path);
        }
    }

    /// Records a definition of `ident`, a type when `is_type`.
    fn define(&mut self, ident: &syn::Ident, is_type: bool) {
        let name = ident.to_string();
        let module = self.module();
        if is_type {
            module.types.insert(name.clone());
        }
        module.defs.insert(name);
    }

    /// Reads a child module: inline, or from its file.
    fn child(&mut self, item: &syn::ItemMod) {
        let name = item.ident.to_string();
        self.define(&item.ident, false);
        let mut path = self.at.clone();
        path.push(name.clone());
        let dir = self.module().dir.join(&name);
        if let Some((_, items)) = &item.content {
            let file = self.module().file.clone();
            self.tree.modules.insert(
                path.clone(),
                Module {
                    file,
                    dir,
                    ..Module::default()
                },
            );
            let outer = std::mem::replace(&mut self.at, path);
            for item in items {
                self.visit_item(item);
            }
            self.at = outer;
            return;
        }
        let file = [dir.with_extension("rs"), dir.join("mod.rs")]
            .into_iter()
            .find(|f| f.is_file());
        let result = match file {
            Some(file) => self.tree.read_file(path, &file, dir),
            None => Err(format!(
                "{}: no file for `mod {name}`",
                shown(&self.module().file)
            )),
        };
        if let Err(why) = result {
            self.error.get_or_insert(why);
        }
    }
}

/// Whether `attrs` leave an item out of the library's code: `cfg(test)` or
/// `cfg(doc)` (alone or first in an `all`).
fn left_out(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.meta.require_list().is_ok_and(|list| {
                let tokens = list.tokens.to_string();
                ["test", "doc"]
                    .iter()
                    .any(|c| tokens == *c || tokens.starts_with(&format!("all ({c}")))
            })
    })
}

/// The attributes of an item.
fn attrs(item: &syn::Item) -> &[syn::Attribute] {
    use syn::Item;
    match item {
        Item::Const(i) => &i.attrs,
        Item::Enum(i) => &i.attrs,
        Item::ExternCrate(i) => &i.attrs,
        Item::Fn(i) => &i.attrs,
        Item::ForeignMod(i) => &i.attrs,
        Item::Impl(i) => &i.attrs,
        Item::Macro(i) => &i.attrs,
        Item::Mod(i) => &i.attrs,
        Item::Static(i) => &i.attrs,
        Item::Struct(i) => &i.attrs,
        Item::Trait(i) => &i.attrs,
        Item::TraitAlias(i) => &i.attrs,
        Item::Type(i) => &i.attrs,
        Item::Union(i) => &i.attrs,
        Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

impl<'ast> Visit<'ast> for Reader<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        use syn::Item;
        if left_out(attrs(item)) {
            return;
        }
        match item {
            Item::Mod(m) => return self.child(m),
            Item::Use(u) => return self.use_tree(&mut Vec::new(), &u.tree),
            Item::Struct(i) => self.define(&i.ident, true),
            Item::Enum(i) => self.define(&i.ident, true),
            Item::Union(i) => self.define(&i.ident, true),
            Item::Trait(i) => self.define(&i.ident, true),
            Item::Type(i) => self.define(&i.ident, true),
            Item::Fn(i) => self.define(&i.sig.ident, false),
            Item::Const(i) => self.define(&i.ident, false),
            Item::Static(i) => self.define(&i.ident, false),
            _ => {}
        }
        visit::visit_item(self, item);
    }

    fn visit_impl_item(&mut self, item: &'ast syn::ImplItem) {
        let test = match item {
            syn::ImplItem::Fn(f) => left_out(&f.attrs),
            syn::ImplItem::Const(c) => left_out(&c.attrs),
            _ => false,
        };
        if !test {
            visit::visit_impl_item(self, item);
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let written: ModPath = path.segments.iter().map(|s| s.ident.to_string()).collect();
        self.module().named.push(written);
        visit::visit_path(self, path);
    }

    fn visit_attribute(&mut self, _: &'ast syn::Attribute) {}

    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}

    fn visit_macro(&mut self, _: &'ast syn::Macro) {}
}

/// Each circle of files (a strongly connected set of more than one), by Tarjan.
fn circles(graph: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<Vec<PathBuf>> {
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
    let mut walk = Walk {
        graph,
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

#[cfg(test)]
mod tests {
    use super::check;
    use std::path::PathBuf;

    /// A crate's `src` in a fresh temporary folder, with `files` (path, text) in it.
    fn tree(name: &str, files: &[(&str, &str)]) -> PathBuf {
        let src = std::env::temp_dir()
            .join(format!("bento-house-{}-{name}", std::process::id()))
            .join("src");
        let _ = std::fs::remove_dir_all(&src);
        for (path, text) in files {
            let file = src.join(path);
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(file, text).unwrap();
        }
        src
    }

    fn circles(problems: &[String]) -> usize {
        problems.iter().filter(|p| p.contains("a circle")).count()
    }

    #[test]
    fn two_folders_that_name_each_other_are_a_circle_of_modules() {
        let src = tree(
            "folders",
            &[
                ("lib.rs", "mod a;\nmod b;\n"),
                ("a/mod.rs", "mod x;\npub struct A;\n"),
                ("a/x.rs", "use crate::b::B;\nfn f(_: B) {}\n"),
                ("b/mod.rs", "mod y;\npub struct B;\n"),
                ("b/y.rs", "use crate::a::A;\nfn g(_: A) {}\n"),
            ],
        );
        let problems = check(&src);
        assert_eq!(circles(&problems), 1, "{problems:?}");
        assert!(problems.iter().any(|p| p.contains("a circle of modules")));
    }

    #[test]
    fn a_facade_whose_child_reads_it_through_a_glob_is_a_circle() {
        let src = tree(
            "facade",
            &[
                ("lib.rs", "mod a;\npub use a::Marker;\n"),
                (
                    "a/mod.rs",
                    "mod markers;\npub use self::markers::Marker;\npub struct Lifo;\n",
                ),
                ("a/markers.rs", "use super::*;\npub struct Marker(Lifo);\n"),
            ],
        );
        let problems = check(&src);
        assert_eq!(circles(&problems), 1, "{problems:?}");
        assert!(problems[0].contains("a/markers.rs") && problems[0].contains("a/mod.rs"));
    }

    #[test]
    fn re_exports_lead_to_the_defining_file() {
        // `crate::Stats` is lib.rs's re-export of `stats.rs`: `engine.rs` names
        // `stats.rs`, and no circle goes through lib.rs.
        let src = tree(
            "reexport",
            &[
                (
                    "lib.rs",
                    "mod engine;\nmod stats;\npub use engine::Core;\npub use stats::Stats;\n",
                ),
                ("engine.rs", "use crate::Stats;\npub struct Core(Stats);\n"),
                ("stats.rs", "pub struct Stats;\n"),
            ],
        );
        assert_eq!(check(&src), Vec::<String>::new());
    }

    #[test]
    fn a_type_lib_rs_defines_named_below_it_is_reported() {
        let src = tree(
            "libtype",
            &[
                ("lib.rs", "mod a;\npub trait Source {}\n"),
                ("a.rs", "use crate::Source;\npub struct A<S: Source>(S);\n"),
            ],
        );
        let problems = check(&src);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("a.rs names `Source`"), "{problems:?}");
    }

    #[test]
    fn inline_modules_locals_and_tests_make_no_edge() {
        // `super::` in an inline module is its own file; `table` is a local binding
        // that shadows the child module; the test module and `cfg(doc)` imports are
        // left out.
        let src = tree(
            "inline",
            &[
                (
                    "lib.rs",
                    "mod cache;\nmod pages;\npub use pages::inner::Pages;\n\
                     #[cfg(test)]\nmod tests { use crate::cache::Cache; }\n",
                ),
                (
                    "cache/mod.rs",
                    "mod table;\npub struct Cache { table: u8 }\n\
                     impl Cache { fn new(table: u8) -> Self { Self { table } } }\n",
                ),
                (
                    "cache/table.rs",
                    "use super::Cache;\n#[cfg(doc)]\nuse crate::Pages;\nfn f(_: &Cache) {}\n",
                ),
                (
                    "pages.rs",
                    "pub struct Raw;\npub mod inner { use super::Raw; pub struct Pages(Raw); }\n",
                ),
            ],
        );
        assert_eq!(check(&src), Vec::<String>::new());
    }
}
