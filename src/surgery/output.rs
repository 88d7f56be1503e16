//! Where a surgery may write, and how it cleans up after itself.
//!
//! A surgery builds its output in a temporary directory `.NAME.tmp-PID`
//! beside `NAME` and renames it into place once verified. Nothing outside
//! that temporary directory is ever removed unless it is a model directory
//! readout itself wrote (it carries [`MARKER`]) and the caller passed
//! `force`; the input, its ancestors, the working directory (and its
//! ancestors) and a filesystem root are refused even then, because a wrong
//! `-o` there would take the user's files with it.

use std::path::{Path, PathBuf};

use super::SurgeryError;

pub use super::refusal::{Refusal, MARKER};

/// Every file readout writes into an output directory. A marked directory
/// holding anything else has been added to by someone, so `--force` still
/// refuses it: replacing it would delete that addition.
const WRITTEN: [&str; 10] = [
    MARKER,
    "model.onnx",
    "model.onnx.data",
    "slot_map.json",
    "head_rows.json",
    "config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "genai_config.json",
    "chat_template.jinja",
];

fn refuse(out: &Path, reason: Refusal) -> SurgeryError {
    SurgeryError::Output {
        path: out.display().to_string(),
        reason,
    }
}

/// `path` made absolute with symbolic links resolved when it exists; else
/// its nearest existing ancestor resolved and the rest appended. Lexical
/// `..` cannot survive: it would make an ancestor look like a new path.
fn resolved(path: &Path) -> Result<PathBuf, SurgeryError> {
    let abs = std::path::absolute(path).map_err(|e| SurgeryError::file(path, e))?;
    let mut existing = abs.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(c) = existing.canonicalize() {
            let mut p = c;
            for r in rest.iter().rev() {
                p.push(r);
            }
            return Ok(p);
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                existing = parent;
            }
            _ => return Ok(abs),
        }
    }
}

/// Refuses `out` unless it is new, or a model directory readout wrote and
/// `force` is set. `input` is the input model's directory (or graph file).
pub fn check_output(input: &Path, out: &Path, force: bool) -> Result<(), SurgeryError> {
    let meta = match std::fs::symlink_metadata(out) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // A path that does not exist yet can be neither the input, nor an
            // ancestor of it, nor the working directory; it may still be
            // inside the input, which replaces nothing.
            return Ok(());
        }
        Err(e) => return Err(SurgeryError::file(out, e)),
    };
    let target = resolved(out)?;
    if target.parent().is_none() {
        return Err(refuse(out, Refusal::IsRoot));
    }
    let input = resolved(input)?;
    if target == input {
        return Err(refuse(out, Refusal::IsInput));
    }
    if input.starts_with(&target) {
        return Err(refuse(
            out,
            Refusal::ContainsInput {
                input: input.display().to_string(),
            },
        ));
    }
    if let Ok(cwd) = std::env::current_dir().and_then(|c| c.canonicalize()) {
        if cwd.starts_with(&target) {
            return Err(refuse(out, Refusal::ContainsCwd));
        }
    }
    if meta.file_type().is_symlink() {
        return Err(refuse(out, Refusal::Symlink));
    }
    if !meta.is_dir() {
        return Err(refuse(out, Refusal::NotADirectory));
    }
    let marker = out.join(MARKER);
    let command = match std::fs::read_to_string(&marker) {
        Ok(text) => text.lines().next().unwrap_or("").trim().to_string(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(refuse(out, Refusal::NotWrittenByReadout))
        }
        Err(e) => return Err(SurgeryError::file(&marker, e)),
    };
    for entry in std::fs::read_dir(out).map_err(|e| SurgeryError::file(out, e))? {
        let entry = entry.map_err(|e| SurgeryError::file(out, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let plain_file = entry.file_type().map(|t| t.is_file()).unwrap_or(false);
        if !plain_file || !WRITTEN.contains(&name.as_str()) {
            return Err(refuse(out, Refusal::ForeignEntry { entry: name }));
        }
    }
    if !force {
        return Err(refuse(out, Refusal::NeedsForce { command }));
    }
    Ok(())
}

/// Records in `dir` that readout wrote it, and with what command.
pub fn write_marker(dir: &Path, command: &str, input: &Path) -> Result<(), SurgeryError> {
    let path = dir.join(MARKER);
    let text = format!(
        "readout {command}\ninput: {}\nversion: {}\n",
        input.display(),
        env!("CARGO_PKG_VERSION")
    );
    std::fs::write(&path, text).map_err(|e| SurgeryError::file(&path, e))
}

/// A temporary directory removed when dropped unless [`TempDir::keep`] is
/// called, so that every early return and panic unwinding out of a surgery
/// cleans up after it.
pub struct TempDir {
    path: PathBuf,
    armed: bool,
}

impl TempDir {
    /// Creates `.NAME.tmp-PID` beside `out` (its parent is created if needed),
    /// first removing what a killed earlier run into the same place left.
    pub fn beside(out: &Path) -> Result<Self, SurgeryError> {
        let parent = parent_of(out);
        std::fs::create_dir_all(parent).map_err(|e| SurgeryError::file(parent, e))?;
        let name = out_name(out);
        remove_stale(parent, &name);
        let path = parent.join(format!(".{name}.tmp-{}", std::process::id()));
        // Our own PID's directory can only be left by this very process (a
        // surgery run twice in one process, e.g. the test suite).
        if path.exists() {
            std::fs::remove_dir_all(&path).map_err(|e| SurgeryError::file(&path, e))?;
        }
        std::fs::create_dir(&path).map_err(|e| SurgeryError::file(&path, e))?;
        Ok(Self { path, armed: true })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The directory was moved into place: nothing to remove any more.
    pub fn keep(mut self) {
        self.armed = false;
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if self.armed {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

pub(crate) fn parent_of(out: &Path) -> &Path {
    out.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

pub(crate) fn out_name(out: &Path) -> String {
    out.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "out".into())
}

/// Whether process `pid` is alive. Linux only (`/proc`); elsewhere every
/// process counts as alive, so nothing is ever removed on a guess.
fn alive(pid: u32) -> bool {
    if cfg!(target_os = "linux") {
        Path::new("/proc").join(pid.to_string()).exists()
    } else {
        true
    }
}

/// Removes `.NAME.tmp-PID` directories in `parent` whose process is gone,
/// when they hold readout's marker or nothing at all (a run killed before
/// its first write). Anything else is left alone, and so is a `.NAME.old-PID`
/// (a previous output a killed run had moved aside): that one is the user's
/// earlier model, not a half-written one.
fn remove_stale(parent: &Path, name: &str) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    let prefix = format!(".{name}.tmp-");
    for entry in entries.flatten() {
        let file = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = file
            .strip_prefix(prefix.as_str())
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == std::process::id()
            || alive(pid)
            || !entry.file_type().map(|t| t.is_dir()).unwrap_or(false)
        {
            continue;
        }
        let path = entry.path();
        let ours = path.join(MARKER).is_file()
            || std::fs::read_dir(&path)
                .map(|mut d| d.next().is_none())
                .unwrap_or(false);
        if ours {
            let _ = std::fs::remove_dir_all(&path);
        }
    }
}

/// Moves the verified `tmp` to `out`. An existing `out` (already allowed by
/// [`check_output`]) is first renamed aside, and put back if the move fails,
/// so a failure never leaves the user with neither.
pub fn replace(tmp: TempDir, out: &Path) -> Result<(), SurgeryError> {
    let aside = if std::fs::symlink_metadata(out).is_ok() {
        let aside = parent_of(out).join(format!(".{}.old-{}", out_name(out), std::process::id()));
        std::fs::rename(out, &aside).map_err(|e| SurgeryError::file(out, e))?;
        Some(aside)
    } else {
        None
    };
    if let Err(e) = std::fs::rename(tmp.path(), out) {
        if let Some(a) = &aside {
            let _ = std::fs::rename(a, out);
        }
        return Err(SurgeryError::file(out, e));
    }
    tmp.keep();
    if let Some(a) = aside {
        std::fs::remove_dir_all(&a).map_err(|e| SurgeryError::file(&a, e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scratch directory of its own per test, removed at the end.
    struct Scratch(PathBuf);
    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    fn scratch(name: &str) -> Scratch {
        let d = std::env::temp_dir().join(format!("readout-output-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("models/m")).unwrap();
        std::fs::write(d.join("models/m/model.onnx"), b"graph").unwrap();
        Scratch(d)
    }
    fn reason(e: SurgeryError) -> Refusal {
        match e {
            SurgeryError::Output { reason, .. } => reason,
            other => panic!("not an output refusal: {other}"),
        }
    }

    #[test]
    fn new_paths_pass_and_every_dangerous_one_is_refused_even_with_force() {
        let s = scratch("refusals");
        let input = s.0.join("models/m");
        assert!(check_output(&input, &s.0.join("models/new"), false).is_ok());
        assert!(check_output(&input, &s.0.join("deep/er/new"), false).is_ok());
        for force in [false, true] {
            assert_eq!(
                reason(check_output(&input, &input, force).unwrap_err()),
                Refusal::IsInput
            );
            assert!(matches!(
                reason(check_output(&input, &s.0.join("models"), force).unwrap_err()),
                Refusal::ContainsInput { .. }
            ));
            // `..` resolves to the same ancestor.
            let dotted = s.0.join("models/m/..");
            assert!(matches!(
                reason(check_output(&input, &dotted, force).unwrap_err()),
                Refusal::ContainsInput { .. }
            ));
            assert!(matches!(
                reason(check_output(&input, &input.join("model.onnx"), force).unwrap_err()),
                Refusal::NotADirectory
            ));
            assert_eq!(
                reason(check_output(&input, Path::new("/"), force).unwrap_err()),
                Refusal::IsRoot
            );
        }
        // The input given as its graph file: its directory contains it.
        assert!(matches!(
            reason(check_output(&input.join("model.onnx"), &input, true).unwrap_err()),
            Refusal::ContainsInput { .. }
        ));
    }

    #[test]
    fn only_a_marked_directory_of_readouts_files_is_replaced_and_only_with_force() {
        let s = scratch("marker");
        let input = s.0.join("models/m");
        let out = s.0.join("out");
        std::fs::create_dir(&out).unwrap();
        std::fs::write(out.join("notes.txt"), b"mine").unwrap();
        assert_eq!(
            reason(check_output(&input, &out, true).unwrap_err()),
            Refusal::NotWrittenByReadout
        );
        write_marker(&out, "trim", &input).unwrap();
        assert_eq!(
            reason(check_output(&input, &out, true).unwrap_err()),
            Refusal::ForeignEntry {
                entry: "notes.txt".into()
            }
        );
        std::fs::remove_file(out.join("notes.txt")).unwrap();
        std::fs::write(out.join("model.onnx"), b"g").unwrap();
        let e = check_output(&input, &out, false).unwrap_err();
        assert!(
            e.to_string().contains("--force") && e.to_string().contains(&out.display().to_string()),
            "{e}"
        );
        assert!(check_output(&input, &out, true).is_ok());
        #[cfg(unix)]
        {
            let link = s.0.join("link");
            std::os::unix::fs::symlink(&out, &link).unwrap();
            assert_eq!(
                reason(check_output(&input, &link, true).unwrap_err()),
                Refusal::Symlink
            );
        }
    }

    #[test]
    fn the_guard_removes_its_directory_unless_kept_and_stale_ones_of_dead_runs_go() {
        let s = scratch("guard");
        let out = s.0.join("out");
        let path = {
            let t = TempDir::beside(&out).unwrap();
            std::fs::write(t.path().join("x"), b"x").unwrap();
            t.path().to_path_buf()
        };
        assert!(!path.exists(), "dropped guard removes its directory");
        // PIDs above 2^22 (Linux's largest pid_max) belong to no process: a
        // stale marked directory, a stale empty one, and one without the
        // marker that is not readout's.
        let dead_marked = s.0.join(".out.tmp-999999999");
        std::fs::create_dir(&dead_marked).unwrap();
        write_marker(&dead_marked, "trim", &s.0).unwrap();
        let dead_empty = s.0.join(".out.tmp-999999998");
        std::fs::create_dir(&dead_empty).unwrap();
        let foreign = s.0.join(".out.tmp-999999997");
        std::fs::create_dir(&foreign).unwrap();
        std::fs::write(foreign.join("mine"), b"m").unwrap();
        let t = TempDir::beside(&out).unwrap();
        assert!(!dead_marked.exists() && !dead_empty.exists());
        assert!(
            foreign.join("mine").is_file(),
            "a directory readout did not mark is never removed"
        );
        write_marker(t.path(), "trim", &s.0).unwrap();
        replace(t, &out).unwrap();
        assert!(out.join(MARKER).is_file());
        // Replacing puts the new one in place and removes the old.
        let t = TempDir::beside(&out).unwrap();
        std::fs::write(t.path().join("model.onnx"), b"new").unwrap();
        replace(t, &out).unwrap();
        assert_eq!(std::fs::read(out.join("model.onnx")).unwrap(), b"new");
        let left: Vec<String> = std::fs::read_dir(&s.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            !left.iter().any(|n| n.starts_with(".out.old-")
                || n.starts_with(".out.tmp-") && n != ".out.tmp-999999997"),
            "{left:?}"
        );
    }
}
