//! Every file the command writes goes through [`write_file`], or [`Staged`] for a file
//! another program writes, and lands where its path leads:
//! - a regular file, or a path where nothing is yet, is written into a temporary file
//!   beside it and renamed over it only once it is whole, so that an error (a full
//!   disk, a file-size limit) leaves the output as it was rather than half written;
//! - a symbolic link is followed to the file it names (at most [`MAX_LINKS`] links,
//!   each relative one read from its own directory), which is written as above: the
//!   link stays a link, and a link to nothing makes the file it names;
//! - a device (`/dev/null`, a terminal), a FIFO or a socket is opened and written in
//!   place, never created, renamed or replaced: a FIFO waits for its reader, and a
//!   write the device refuses (`/dev/full`) is an error naming the path;
//! - a directory is an error.

use std::ffi::OsString;
use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// The most symbolic links followed from an output to its file, as Linux follows.
const MAX_LINKS: usize = 40;

/// Where an output's bytes go.
#[derive(Debug, PartialEq, Eq)]
enum Dest {
    /// A regular file, or nothing yet, at this path (the output's links followed):
    /// written whole beside it and renamed over it.
    Replace(PathBuf),
    /// Written in place through the output's own path: a device, a FIFO, a socket or
    /// a file reached through a descriptor's link (`/dev/stdout`), appended to
    /// (`truncate` false); or a regular file only the system's own links lead to
    /// (`/proc/self/fd/N` of a deleted file, `truncate` true).
    InPlace { truncate: bool },
}

/// Where the bytes of the output `path` go, or one line naming `path` and why it
/// cannot be written (a directory, a loop of links).
fn resolve(path: &Path) -> Result<Dest, String> {
    let fail = |why: &dyn std::fmt::Display| format!("cannot write {}: {why}", path.display());
    // What the path leads to, every link followed by the system: `/dev/stdout`'s
    // `/proc/self/fd/1` leads to a pipe that no name of its own reaches.
    let file = match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => return Err(fail(&"it is a directory")),
        Ok(m) if !m.is_file() => return Ok(Dest::InPlace { truncate: false }),
        Ok(m) => Some(m),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(fail(&e)),
    };
    // A regular file or nothing: the name at the end of the links, to rename over.
    let mut at = path.to_owned();
    for _ in 0..=MAX_LINKS {
        // A descriptor's link (`/dev/stdout` leads to `/proc/self/fd/1`): the file is
        // one the program was handed open (a shell's `> file` or `>> file`), written
        // through the descriptor's link, appended to, never renamed over.
        if is_descriptor(&at) {
            return Ok(Dest::InPlace { truncate: false });
        }
        let found = match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => {
                let to = std::fs::read_link(&at).map_err(|e| fail(&e))?;
                // A relative link names a file from the link's own directory; an
                // absolute one replaces the whole path.
                at = match at.parent() {
                    Some(dir) => dir.join(to),
                    None => to,
                };
                continue;
            }
            Ok(m) => Some(m),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(fail(&e)),
        };
        return match (file, found) {
            (None, None) => Ok(Dest::Replace(at)),
            (Some(file), Some(found)) if same_file(&file, &found) => Ok(Dest::Replace(at)),
            // The names do not lead where the system's links do (a link of /proc to
            // a deleted file): the file the system reaches, written in place.
            (Some(_), _) => Ok(Dest::InPlace { truncate: true }),
            (None, Some(found)) if found.is_dir() => Err(fail(&"it is a directory")),
            // Made between the two looks: whatever it is now, in place.
            (None, Some(found)) => Ok(Dest::InPlace {
                truncate: found.is_file(),
            }),
        };
    }
    Err(fail(&format_args!(
        "more than {MAX_LINKS} symbolic links lead from it"
    )))
}

/// Whether `path` is a link of the system's to an open descriptor: `/dev/fd/N`, or
/// `/proc/PID/fd/N` (`/proc/self/fd/N`).
fn is_descriptor(path: &Path) -> bool {
    let mut parts = path.components().map(|c| c.as_os_str().to_string_lossy());
    let mut next = || parts.next().unwrap_or_default();
    match (next().as_ref(), next().as_ref(), next().as_ref()) {
        ("/", "dev", "fd") => true,
        ("/", "proc", _) => next() == "fd",
        _ => false,
    }
}

/// Whether two looks at a path found the same file.
fn same_file(a: &Metadata, b: &Metadata) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        (a.dev(), a.ino()) == (b.dev(), b.ino())
    }
    #[cfg(not(unix))]
    {
        a.is_file() == b.is_file()
    }
}

/// `output` for an error, with the file a link led to when that is another path.
fn shown(output: &Path, file: &Path) -> String {
    if output == file {
        output.display().to_string()
    } else {
        format!("{} (a link to {})", output.display(), file.display())
    }
}

/// Writes `path` where it leads (see the module's notes): `fill` writes the contents,
/// into a temporary file in the same directory as the file (`.NAME.PID.tmp`) which
/// is flushed, synced and renamed over it when `fill` succeeds and removed when
/// anything fails, or straight into a device or FIFO. Returns what `fill` returns,
/// or one line naming `path` and the error.
pub(crate) fn write_file<T>(
    path: &Path,
    fill: impl FnOnce(&mut BufWriter<File>) -> io::Result<T>,
) -> Result<T, String> {
    match resolve(path)? {
        Dest::Replace(file) => replace(path, &file, fill),
        Dest::InPlace { truncate } => in_place(path, truncate, fill),
    }
}

/// Writes `file` (where the output `path` leads) whole or not at all, by a temporary
/// file beside it.
fn replace<T>(
    path: &Path,
    file: &Path,
    fill: impl FnOnce(&mut BufWriter<File>) -> io::Result<T>,
) -> Result<T, String> {
    let fail = |e: io::Error| format!("cannot write {}: {e}", shown(path, file));
    let mut temp = Temp::new(temp_path(file)?);
    // A stale file of a killed run with this process id goes; `create_new` then makes
    // sure the file written is a fresh one, not whatever a link there points to.
    let _ = std::fs::remove_file(&temp.path);
    let handle = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temp.path)
        .map_err(fail)?;
    let mut out = BufWriter::new(handle);
    let value = fill(&mut out).map_err(fail)?;
    let handle = out.into_inner().map_err(|e| fail(e.into_error()))?;
    handle.sync_all().map_err(fail)?;
    drop(handle);
    std::fs::rename(&temp.path, file).map_err(fail)?;
    temp.renamed = true;
    Ok(value)
}

/// Writes the device, FIFO or socket `path` in place: opened for writing (never
/// created; a FIFO waits for its reader), filled and flushed.
fn in_place<T>(
    path: &Path,
    truncate: bool,
    fill: impl FnOnce(&mut BufWriter<File>) -> io::Result<T>,
) -> Result<T, String> {
    let fail = |e: io::Error| format!("cannot write {}: {e}", path.display());
    // Not truncated, a file is appended to: a device or a FIFO takes the bytes as they
    // come, and a file the program was handed (`>> file`) keeps what it held.
    let handle = OpenOptions::new()
        .write(true)
        .truncate(truncate)
        .append(!truncate)
        .open(path)
        .map_err(fail)?;
    let mut out = BufWriter::new(handle);
    let value = fill(&mut out).map_err(fail)?;
    out.into_inner().map_err(|e| fail(e.into_error()))?;
    Ok(value)
}

/// A file another program writes for us, whole or not at all: it writes the
/// temporary [`Staged::path`] and [`Staged::commit`] puts that in the output's place
/// (see the module's notes). For a regular file (or a new one) the temporary file is
/// beside the file the output leads to and is renamed over it; for a device or FIFO
/// it is in a directory of its own in [`std::env::temp_dir`], and its bytes are
/// copied into the output. Dropped uncommitted, the temporary file goes.
pub(crate) struct Staged {
    temp: Temp,
    output: PathBuf,
    dest: Dest,
}

impl Staged {
    /// A temporary path for `output` (`.NAME.PID.tmp`), no file there yet.
    pub(crate) fn new(output: &Path) -> Result<Self, String> {
        let dest = resolve(output)?;
        let temp = match &dest {
            Dest::Replace(file) => {
                let path = temp_path(file)?;
                let _ = std::fs::remove_file(&path);
                Temp::new(path)
            }
            Dest::InPlace { .. } => Temp::in_own_directory(output)?,
        };
        Ok(Self {
            temp,
            output: output.to_owned(),
            dest,
        })
    }

    /// Where the other program writes.
    pub(crate) fn path(&self) -> &Path {
        &self.temp.path
    }

    /// Puts the written file in the output's place.
    pub(crate) fn commit(self) -> Result<(), String> {
        self.publish().map(drop)
    }

    /// Puts the written file in the output's place, and returns where to read it
    /// from afterwards: the output itself when it is a file, else (a device or FIFO,
    /// which does not give its bytes back) the temporary file, kept until the
    /// [`Written`] is dropped.
    pub(crate) fn publish(mut self) -> Result<Written, String> {
        match &self.dest {
            Dest::Replace(file) => {
                std::fs::rename(&self.temp.path, file)
                    .map_err(|e| format!("cannot write {}: {e}", shown(&self.output, file)))?;
                self.temp.renamed = true;
                Ok(Written {
                    path: self.output,
                    _temp: None,
                })
            }
            &Dest::InPlace { truncate } => {
                let fail = |e: io::Error| format!("cannot write {}: {e}", self.output.display());
                let mut from = File::open(&self.temp.path).map_err(fail)?;
                in_place(&self.output, truncate, |out| io::copy(&mut from, out))?;
                Ok(Written {
                    path: self.temp.path.clone(),
                    _temp: Some(self.temp),
                })
            }
        }
    }
}

/// A fresh directory that only this user may enter, removed with what it holds when
/// dropped: where a child process writes its result, so that no one else can put a
/// link where it writes.
pub(crate) struct PrivateDir {
    path: PathBuf,
}

impl PrivateDir {
    /// A new directory in `parent`, named for this process and the moment; an error
    /// when it cannot be made (or the name is taken).
    pub(crate) fn new(parent: &Path) -> Result<Self, String> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let path = parent.join(format!(".bento-{}-{nanos}", std::process::id()));
        let mut builder = std::fs::DirBuilder::new();
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder
            .create(&path)
            .map_err(|e| format!("cannot make {}: {e}", path.display()))?;
        Ok(Self { path })
    }

    /// `name` inside the directory.
    pub(crate) fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// A file [`Staged::publish`] wrote: where to read it back.
pub(crate) struct Written {
    path: PathBuf,
    /// The copy read back when the output keeps no bytes, removed on drop.
    _temp: Option<Temp>,
}

impl Written {
    /// The path that reads as the file written.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

/// `.NAME.PID.tmp` beside `path`.
fn temp_path(path: &Path) -> Result<PathBuf, String> {
    Ok(path.with_file_name(temp_name(path)?))
}

/// `.NAME.PID.tmp`, `NAME` the last part of `path`.
fn temp_name(path: &Path) -> Result<OsString, String> {
    let name = path
        .file_name()
        .ok_or_else(|| format!("cannot write {}: not a file name", path.display()))?;
    let mut temp_name = OsString::from(".");
    temp_name.push(name);
    temp_name.push(format!(".{}.tmp", std::process::id()));
    Ok(temp_name)
}

/// `bytes` as the whole of `path`, by [`write_file`].
pub(crate) fn write_bytes(path: &Path, bytes: &[u8]) -> Result<(), String> {
    write_file(path, |out| out.write_all(bytes))
}

/// A temporary file, removed when dropped unless it was renamed to the output, with
/// the directory made for it, if any.
struct Temp {
    path: PathBuf,
    /// A directory of its own, removed after the file.
    dir: Option<PathBuf>,
    renamed: bool,
}

impl Temp {
    fn new(path: PathBuf) -> Self {
        Self {
            path,
            dir: None,
            renamed: false,
        }
    }

    /// `.NAME.PID.tmp` for `output` in a fresh directory of the temporary directory
    /// that only this user may enter (so that no one else can put a link where the
    /// other program writes).
    fn in_own_directory(output: &Path) -> Result<Self, String> {
        let name = temp_name(output)?;
        let mut dir_name = OsString::from(".bento");
        dir_name.push(&name);
        let dir = std::env::temp_dir().join(dir_name);
        // A stale directory of a killed run with this process id goes.
        let _ = std::fs::remove_dir_all(&dir);
        let mut builder = std::fs::DirBuilder::new();
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(&dir).map_err(|e| {
            format!(
                "cannot write {}: cannot make {}: {e}",
                output.display(),
                dir.display()
            )
        })?;
        Ok(Self {
            path: dir.join(name),
            dir: Some(dir),
            renamed: false,
        })
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        if !self.renamed {
            let _ = std::fs::remove_file(&self.path);
        }
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "bento-alloc-cli-output-{}-{name}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn links_lead_to_the_file_they_name_and_specials_are_written_in_place() {
        use std::os::unix::fs::symlink;
        let dir = scratch("resolve");
        let file = dir.join("file");
        std::fs::write(&file, "old").unwrap();
        assert_eq!(resolve(&file), Ok(Dest::Replace(file.clone())));
        // A relative link, through another link; a link to nothing yet.
        symlink("file", dir.join("one")).unwrap();
        symlink(dir.join("one"), dir.join("two")).unwrap();
        assert_eq!(resolve(&dir.join("two")), Ok(Dest::Replace(file.clone())));
        symlink("new", dir.join("dangling")).unwrap();
        assert_eq!(
            resolve(&dir.join("dangling")),
            Ok(Dest::Replace(dir.join("new")))
        );
        assert_eq!(
            resolve(&dir.join("absent")),
            Ok(Dest::Replace(dir.join("absent")))
        );
        assert_eq!(
            resolve(Path::new("/dev/null")),
            Ok(Dest::InPlace { truncate: false })
        );
        // A descriptor's link to a regular file: appended to where it is.
        let handed = std::fs::File::create(dir.join("handed")).unwrap();
        let fd = std::os::fd::AsRawFd::as_raw_fd(&handed);
        for link in [format!("/proc/self/fd/{fd}"), format!("/dev/fd/{fd}")] {
            assert_eq!(
                resolve(Path::new(&link)),
                Ok(Dest::InPlace { truncate: false })
            );
        }
        assert!(is_descriptor(Path::new("/proc/123/fd/4")));
        assert!(!is_descriptor(Path::new("/proc/123/maps")));
        assert!(!is_descriptor(&dir.join("fd")));
        drop(handed);
        let err = resolve(&dir).unwrap_err();
        assert!(err.ends_with("it is a directory"), "{err}");
        symlink("loop-b", dir.join("loop-a")).unwrap();
        symlink("loop-a", dir.join("loop-b")).unwrap();
        let err = resolve(&dir.join("loop-a")).unwrap_err();
        assert!(err.starts_with("cannot write "), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
