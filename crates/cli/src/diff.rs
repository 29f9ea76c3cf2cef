//! `bento diff OLD NEW`: two heap profiles in pprof's format (bento's dumps, or any
//! uncompressed `profile.proto` with an `inuse_space` value) turned into what grew
//! between them, by stack: "what level 7 left behind".

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;

use bento_pages::ByteSize;

/// A profile read back: the live bytes and blocks under each stack (its function
/// names, leaf first, joined).
#[derive(Debug, Default)]
pub(crate) struct Live {
    by_stack: HashMap<String, (i64, i64)>,
}

/// One growth: a stack and what it gained (negative: lost).
#[derive(Debug, serde::Serialize)]
pub(crate) struct Growth {
    pub(crate) stack: String,
    pub(crate) bytes: i64,
    pub(crate) blocks: i64,
}

/// Reads the protobuf fields of `b`: (number, varint, or bytes).
fn fields(mut b: &[u8]) -> Result<Vec<(u64, Field<'_>)>, String> {
    let mut out = Vec::new();
    while !b.is_empty() {
        let key = varint(&mut b)?;
        let field = match key & 7 {
            0 => Field::Int(varint(&mut b)?),
            1 => Field::Bytes(take(&mut b, 8)?),
            2 => {
                let len = usize::try_from(varint(&mut b)?).map_err(|_| "a length past memory")?;
                Field::Bytes(take(&mut b, len)?)
            }
            5 => Field::Bytes(take(&mut b, 4)?),
            w => {
                return Err(format!(
                    "a field of wire type {w}, which profile.proto has not"
                ));
            }
        };
        out.push((key >> 3, field));
    }
    Ok(out)
}

/// A field's value.
#[derive(Clone, Copy, Debug)]
enum Field<'a> {
    Int(u64),
    Bytes(&'a [u8]),
}

impl<'a> Field<'a> {
    fn int(self) -> Option<u64> {
        match self {
            Self::Int(v) => Some(v),
            Self::Bytes(_) => None,
        }
    }

    fn bytes(self) -> Option<&'a [u8]> {
        match self {
            Self::Bytes(b) => Some(b),
            Self::Int(_) => None,
        }
    }
}

fn take<'a>(b: &mut &'a [u8], n: usize) -> Result<&'a [u8], String> {
    if b.len() < n {
        return Err("the profile ends inside a field".into());
    }
    let (head, rest) = b.split_at(n);
    *b = rest;
    Ok(head)
}

fn varint(b: &mut &[u8]) -> Result<u64, String> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = b.split_first().ok_or("the profile ends inside a number")?;
        *b = rest;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err("a number longer than ten bytes".into())
}

/// The varints of a packed field (or of one unpacked value).
fn packed(f: Field<'_>) -> Result<Vec<u64>, String> {
    match f {
        Field::Int(v) => Ok(vec![v]),
        Field::Bytes(mut b) => {
            let mut out = Vec::new();
            while !b.is_empty() {
                out.push(varint(&mut b)?);
            }
            Ok(out)
        }
    }
}

/// The first field `n` of `m`.
fn first<'a>(m: &[(u64, Field<'a>)], n: u64) -> Option<Field<'a>> {
    m.iter().find(|(f, _)| *f == n).map(|&(_, v)| v)
}

impl Live {
    /// Reads the profile at `path`.
    pub(crate) fn read(path: &Path) -> Result<Self, String> {
        let bytes =
            std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        if bytes.starts_with(&[0x1f, 0x8b]) {
            return Err(format!(
                "{} is gzipped: `gunzip -c` it first (bento writes profiles uncompressed)",
                path.display()
            ));
        }
        Self::parse(&bytes).map_err(|e| format!("{} is no pprof profile: {e}", path.display()))
    }

    fn parse(bytes: &[u8]) -> Result<Self, String> {
        let top = fields(bytes)?;
        let strings: Vec<String> = top
            .iter()
            .filter(|(f, _)| *f == 6)
            .map(|(_, v)| v.bytes().map(|b| String::from_utf8_lossy(b).into_owned()))
            .collect::<Option<_>>()
            .ok_or("a string that is a number")?;
        let string = |i: u64| strings.get(i as usize).cloned().unwrap_or_default();
        // Which values are the live blocks and bytes.
        let types: Vec<String> = top
            .iter()
            .filter(|(f, _)| *f == 1)
            .map(|(_, v)| {
                let t = fields(v.bytes().unwrap_or_default())?;
                Ok(string(first(&t, 1).and_then(Field::int).unwrap_or(0)))
            })
            .collect::<Result<_, String>>()?;
        let space = types
            .iter()
            .position(|t| t == "inuse_space")
            .ok_or("no inuse_space value: not a heap profile")?;
        let objects = types.iter().position(|t| t == "inuse_objects");
        let mut function_names = HashMap::new();
        for (_, v) in top.iter().filter(|(f, _)| *f == 5) {
            let f = fields(v.bytes().unwrap_or_default())?;
            let id = first(&f, 1).and_then(Field::int).unwrap_or(0);
            function_names.insert(id, string(first(&f, 2).and_then(Field::int).unwrap_or(0)));
        }
        let mut locations = HashMap::new();
        for (_, v) in top.iter().filter(|(f, _)| *f == 4) {
            let l = fields(v.bytes().unwrap_or_default())?;
            let id = first(&l, 1).and_then(Field::int).unwrap_or(0);
            // A location's lines, innermost first (inlined frames).
            let mut names = Vec::new();
            for (_, line) in l.iter().filter(|(f, _)| *f == 4) {
                let line = fields(line.bytes().unwrap_or_default())?;
                let function = first(&line, 1).and_then(Field::int).unwrap_or(0);
                names.push(function_names.get(&function).cloned().unwrap_or_default());
            }
            if names.is_empty() {
                let address = first(&l, 3).and_then(Field::int).unwrap_or(0);
                names.push(format!("{address:#x}"));
            }
            locations.insert(id, names.join(" < "));
        }
        let mut live = Live::default();
        for (_, v) in top.iter().filter(|(f, _)| *f == 2) {
            let s = fields(v.bytes().unwrap_or_default())?;
            let mut stack = Vec::new();
            for (_, ids) in s.iter().filter(|(f, _)| *f == 1) {
                for id in packed(*ids)? {
                    stack.push(
                        locations
                            .get(&id)
                            .cloned()
                            .unwrap_or_else(|| format!("#{id}")),
                    );
                }
            }
            let mut values = Vec::new();
            for (_, vals) in s.iter().filter(|(f, _)| *f == 2) {
                values.extend(packed(*vals)?);
            }
            let value = |i: usize| values.get(i).map_or(0, |&v| v as i64);
            let entry = live.by_stack.entry(stack.join(" < ")).or_default();
            entry.0 += value(space);
            entry.1 += objects.map_or(0, value);
        }
        Ok(live)
    }

    /// What grew from `old` to `self`, by stack, the largest growth first (stacks
    /// that shrank last, those that did not change left out).
    pub(crate) fn since(&self, old: &Live) -> Vec<Growth> {
        let mut stacks: Vec<&String> = self.by_stack.keys().chain(old.by_stack.keys()).collect();
        stacks.sort();
        stacks.dedup();
        let mut out: Vec<Growth> = stacks
            .into_iter()
            .filter_map(|stack| {
                let (nb, no) = self.by_stack.get(stack).copied().unwrap_or_default();
                let (ob, oo) = old.by_stack.get(stack).copied().unwrap_or_default();
                (nb != ob || no != oo).then(|| Growth {
                    stack: stack.clone(),
                    bytes: nb - ob,
                    blocks: no - oo,
                })
            })
            .collect();
        out.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.stack.cmp(&b.stack)));
        out
    }
}

/// `bento diff`: the growth from `old` to `new`, the `top` largest changes as a
/// table (or every one as JSON).
pub(crate) fn run(old: &Path, new: &Path, top: usize, json: bool) -> Result<(), String> {
    let growth = Live::read(new)?.since(&Live::read(old)?);
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&growth).map_err(|e| e.to_string())?
        );
        return Ok(());
    }
    print!("{}", table(&growth, top));
    Ok(())
}

/// The table of `growth`'s first `top` rows and the total.
pub(crate) fn table(growth: &[Growth], top: usize) -> String {
    let signed = |v: i64| {
        let size = ByteSize(u128::from(v.unsigned_abs()));
        if v < 0 {
            format!("-{size}")
        } else {
            format!("+{size}")
        }
    };
    let mut t = String::new();
    if growth.is_empty() {
        t.push_str("no change between the two profiles\n");
        return t;
    }
    let _ = writeln!(
        t,
        "{:>12}  {:>8}  stack (leaf first)",
        "live bytes", "blocks"
    );
    for g in growth.iter().take(top) {
        let _ = writeln!(t, "{:>12}  {:>+8}  {}", signed(g.bytes), g.blocks, g.stack);
    }
    if growth.len() > top {
        let _ = writeln!(t, "… {} more stacks", growth.len() - top);
    }
    let total: i64 = growth.iter().map(|g| g.bytes).sum();
    let _ = writeln!(t, "{:>12}  in all", signed(total));
    t
}
