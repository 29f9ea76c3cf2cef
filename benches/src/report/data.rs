//! The stats of one run, as read back: criterion's results and the JSON files of
//! the measuring programs, with the look-ups the tables and the targets use.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// One criterion benchmark's result.
#[derive(Debug, Clone, PartialEq)]
pub struct Bench {
    /// `group/function[/parameter]`.
    pub id: String,
    /// The group, as `benchmark_group` named it.
    pub group: String,
    /// The function, with `/parameter` when it has one.
    pub name: String,
    /// The parameter, when the benchmark has one.
    pub param: Option<String>,
    /// Nanoseconds per iteration (criterion's slope estimate, or its mean).
    pub ns: f64,
    /// Elements per iteration, for groups with an element throughput.
    pub elements: Option<u64>,
}

impl Bench {
    /// The function's name without its parameter.
    pub fn function(&self) -> &str {
        self.name.split('/').next().unwrap_or("")
    }
}

/// One callgrind count of an `insns` mode (a row of `icount.json`).
#[derive(Debug, Clone, PartialEq)]
pub struct Icount {
    /// What the loop is.
    pub what: String,
    /// The `--toggle-collect` pattern.
    pub collect: String,
    /// The argument `insns` took (a count of operations, or of frames).
    pub arg: u64,
    /// Operations the loop ran.
    pub n: u64,
    /// Instructions counted in the collected functions.
    pub total: u64,
}

impl Icount {
    /// Instructions per operation.
    pub fn per_op(&self) -> f64 {
        self.total as f64 / self.n as f64
    }
}

/// Every stat of one run.
#[derive(Debug, Default)]
pub struct Data {
    /// Criterion's results by id.
    pub benches: BTreeMap<String, Bench>,
    /// The JSON files of the run by name (`churn.json` → `churn`): the measuring
    /// programs' stats (`{"rows": [ROW…], …}`), `demo` and `meta`.
    pub docs: BTreeMap<String, Value>,
    /// Callgrind counts by `insns` mode, from `icount.json`.
    pub icounts: BTreeMap<String, Icount>,
}

impl Data {
    /// Reads criterion's results under `criterion` and the run's `*.json` files in
    /// `results`.
    ///
    /// # Errors
    ///
    /// A file that cannot be read or parsed, named.
    pub fn load(criterion: &Path, results: &Path) -> Result<Data, String> {
        let mut data = Data::default();
        let mut found = Vec::new();
        find_benchmarks(criterion, &mut found);
        for path in found {
            let bench = read_bench(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            data.benches.insert(bench.id.clone(), bench);
        }
        let entries = std::fs::read_dir(results)
            .map_err(|e| format!("{}: {e} (run `cargo xtask bench` first)", results.display()))?;
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            let Some(stem) = path.file_stem() else {
                continue;
            };
            let doc = read_json(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            data.insert(&stem.to_string_lossy(), doc)?;
        }
        Ok(data)
    }

    /// Adds the JSON file `name` of a run (`icount` is read into
    /// [`icounts`](Data::icounts)).
    ///
    /// # Errors
    ///
    /// An `icount` whose rows are malformed.
    pub fn insert(&mut self, name: &str, doc: Value) -> Result<(), String> {
        if name == "icount" {
            self.icounts = parse_icounts(&doc)?;
        }
        self.docs.insert(name.to_owned(), doc);
        Ok(())
    }

    /// Nanoseconds per iteration of benchmark `id`.
    pub fn time(&self, id: &str) -> Option<f64> {
        self.benches.get(id).map(|b| b.ns)
    }

    /// `time(a) ÷ time(b)`.
    pub fn ratio(&self, a: &str, b: &str) -> Option<f64> {
        Some(self.time(a)? / self.time(b)?)
    }

    /// Elements per second of benchmark `id`.
    pub fn rate(&self, id: &str) -> Option<f64> {
        let b = self.benches.get(id)?;
        Some(b.elements? as f64 * 1e9 / b.ns)
    }

    /// Instructions per operation of `insns` mode `mode`.
    pub fn per_op(&self, mode: &str) -> Option<f64> {
        self.icounts.get(mode).map(Icount::per_op)
    }

    /// The rows of the JSON file `name` (none when the run has no such file).
    pub fn rows(&self, name: &str) -> &[Value] {
        self.docs
            .get(name)
            .and_then(|d| d["rows"].as_array())
            .map_or(&[], Vec::as_slice)
    }

    /// The first row of file `name` whose fields hold every `(field, text)` of `key`.
    pub fn row(&self, name: &str, key: &[(&str, &str)]) -> Option<&Value> {
        self.rows(name)
            .iter()
            .find(|row| key.iter().all(|(f, v)| row[*f].as_str() == Some(*v)))
    }

    /// The number `field` of the row of file `name` that `key` names.
    pub fn stat(&self, name: &str, key: &[(&str, &str)], field: &str) -> Option<f64> {
        self.row(name, key)?[field].as_f64()
    }
}

fn read_json(path: &Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    serde_json::from_str(&text).map_err(|e| e.to_string())
}

fn find_benchmarks(dir: &Path, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n == "new") {
                let file = path.join("benchmark.json");
                if file.exists() {
                    found.push(file);
                }
            } else {
                find_benchmarks(&path, found);
            }
        }
    }
}

/// A benchmark from its `new/benchmark.json` and the `estimates.json` beside it.
fn read_bench(benchmark: &Path) -> Result<Bench, String> {
    let b = read_json(benchmark)?;
    let e = read_json(&benchmark.with_file_name("estimates.json"))?;
    let text = |v: &Value, k: &str| v[k].as_str().map(str::to_owned);
    let id = text(&b, "full_id").ok_or("no full_id")?;
    let group = text(&b, "group_id").ok_or("no group_id")?;
    let function = text(&b, "function_id");
    let param = text(&b, "value_str");
    let name = match (&function, &param) {
        (Some(f), Some(p)) => format!("{f}/{p}"),
        (Some(f), None) => f.clone(),
        (None, Some(p)) => p.clone(),
        (None, None) => return Err("neither function_id nor value_str".into()),
    };
    let ns = ["slope", "mean"]
        .iter()
        .find_map(|k| e[*k]["point_estimate"].as_f64())
        .ok_or("no slope or mean estimate")?;
    let elements = b["throughput"]["Elements"].as_u64();
    Ok(Bench {
        id,
        group,
        name,
        param: function.and(param),
        ns,
        elements,
    })
}

/// `icount.json`'s rows: `{"mode", "what", "collect", "arg", "operations",
/// "instructions"}`.
pub(crate) fn parse_icounts(doc: &Value) -> Result<BTreeMap<String, Icount>, String> {
    let mut out = BTreeMap::new();
    let rows = doc["rows"].as_array().ok_or("icount.json: no rows")?;
    for (i, row) in rows.iter().enumerate() {
        let bad = || format!("icount.json row {}: `{row}`", i + 1);
        let text = |k: &str| row[k].as_str().map(str::to_owned).ok_or_else(bad);
        let number = |k: &str| row[k].as_u64().ok_or_else(bad);
        let n = number("operations")?;
        if n == 0 {
            return Err(bad());
        }
        out.insert(
            text("mode")?,
            Icount {
                what: text("what")?,
                collect: text("collect")?,
                arg: number("arg")?,
                n,
                total: number("instructions")?,
            },
        );
    }
    Ok(out)
}
