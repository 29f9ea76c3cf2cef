//! Every file the command writes goes through [`write_file`]: into a temporary file
//! beside the output, renamed over it only once it is whole, so that an error (a full
//! disk, a file-size limit) leaves the output as it was rather than half written.

use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// Writes `path` whole or not at all: `fill` writes the contents into a temporary
/// file in the same directory (`.NAME.PID.tmp`), which is flushed, synced and renamed
/// to `path` when `fill` succeeds, and removed when anything fails. Returns what
/// `fill` returns, or one line naming `path` and the error.
pub(crate) fn write_file<T>(
    path: &Path,
    fill: impl FnOnce(&mut BufWriter<File>) -> io::Result<T>,
) -> Result<T, String> {
    let fail = |e: io::Error| format!("cannot write {}: {e}", path.display());
    let mut temp = Temp {
        path: temp_path(path)?,
        renamed: false,
    };
    // A stale file of a killed run with this process id goes; `create_new` then makes
    // sure the file written is a fresh one, not whatever a link there points to.
    let _ = std::fs::remove_file(&temp.path);
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temp.path)
        .map_err(fail)?;
    let mut out = BufWriter::new(file);
    let value = fill(&mut out).map_err(fail)?;
    let file = out.into_inner().map_err(|e| fail(e.into_error()))?;
    file.sync_all().map_err(fail)?;
    drop(file);
    std::fs::rename(&temp.path, path).map_err(fail)?;
    temp.renamed = true;
    Ok(value)
}

/// A file another program writes for us, whole or not at all: it writes the
/// temporary [`Staged::path`] beside the output, and [`Staged::commit`] renames that
/// over the output; dropped uncommitted, the temporary file goes.
pub(crate) struct Staged {
    temp: Temp,
    output: PathBuf,
}

impl Staged {
    /// A temporary path beside `output` (`.NAME.PID.tmp`), no file there yet.
    pub(crate) fn new(output: &Path) -> Result<Self, String> {
        let path = temp_path(output)?;
        let _ = std::fs::remove_file(&path);
        Ok(Self {
            temp: Temp {
                path,
                renamed: false,
            },
            output: output.to_owned(),
        })
    }

    /// Where the other program writes.
    pub(crate) fn path(&self) -> &Path {
        &self.temp.path
    }

    /// Puts the written file in the output's place.
    pub(crate) fn commit(mut self) -> Result<(), String> {
        std::fs::rename(&self.temp.path, &self.output)
            .map_err(|e| format!("cannot write {}: {e}", self.output.display()))?;
        self.temp.renamed = true;
        Ok(())
    }
}

/// `.NAME.PID.tmp` beside `path`.
fn temp_path(path: &Path) -> Result<PathBuf, String> {
    let name = path
        .file_name()
        .ok_or_else(|| format!("cannot write {}: not a file name", path.display()))?;
    let mut temp_name = OsString::from(".");
    temp_name.push(name);
    temp_name.push(format!(".{}.tmp", std::process::id()));
    Ok(path.with_file_name(temp_name))
}

/// `bytes` as the whole of `path`, by [`write_file`].
pub(crate) fn write_bytes(path: &Path, bytes: &[u8]) -> Result<(), String> {
    write_file(path, |out| out.write_all(bytes))
}

/// A temporary file, removed when dropped unless it was renamed to the output.
struct Temp {
    path: PathBuf,
    renamed: bool,
}

impl Drop for Temp {
    fn drop(&mut self) {
        if !self.renamed {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}
