//! `readout trim|prune|expose-hidden -o ...` never removes what it did not
//! make: every dangerous output path is refused with nothing on disk
//! changed, a readout-written directory is replaced only with --force, and
//! a run killed mid-way leaves a temporary directory the next run removes.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::*;

fn readout() -> Command {
    Command::new(env!("CARGO_BIN_EXE_readout"))
}

/// The model these tests run surgery on: the tiny q4 model, or the models/
/// id in READOUT_SURGERY_MODEL (any built int4 model works, e.g. SmolLM2 on
/// a machine where only the demo models are built).
fn model_id() -> String {
    std::env::var("READOUT_SURGERY_MODEL").unwrap_or_else(|_| Q4.to_string())
}

/// Every entry under `dir` (relative path → file bytes, or None for a directory).
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Option<Vec<u8>>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Option<Vec<u8>>>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(root).unwrap().to_path_buf();
            if p.is_dir() {
                out.insert(rel, None);
                walk(root, &p, out);
            } else {
                out.insert(rel, Some(std::fs::read(&p).unwrap()));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs `readout <args>` in `cwd` and asserts it fails with every `needle` in its message.
fn refused(cwd: &Path, args: &[&str], needles: &[&str]) {
    let o = readout().current_dir(cwd).args(args).output().unwrap();
    let err = stderr(&o);
    assert!(!o.status.success(), "{args:?} succeeded: {err}");
    for n in needles {
        assert!(err.contains(n), "{args:?}: {n:?} not in {err}");
    }
}

/// A scratch tree: `models/<id>/` (a copy of the model) and `work/notes.txt`.
fn tree(name: &str) -> (TempDir, PathBuf) {
    let base = temp_dir(name);
    let id = model_id();
    let input = base.join("models").join(&id);
    copy_model(&id, &input);
    std::fs::create_dir_all(base.join("work")).unwrap();
    std::fs::write(base.join("work/notes.txt"), b"the user's own notes\n").unwrap();
    (base, input)
}

#[test]
fn every_dangerous_output_is_refused_and_nothing_on_disk_changes() {
    let (base, input) = tree("out-refused");
    let input_s = input.to_str().unwrap();
    let before = snapshot(&base);
    let work = base.join("work");
    let work_s = work.to_str().unwrap();
    let parent = base.join("models");
    let parent_s = parent.to_str().unwrap();
    let file = work.join("notes.txt");
    let file_s = file.to_str().unwrap();
    for cmd in [
        &["trim"][..],
        &["prune", "--letters", "ABCD"],
        &["expose-hidden"],
    ] {
        for force in [false, true] {
            let f: &[&str] = if force { &["--force"] } else { &[] };
            let run = |cwd: &Path, out: &str, needles: &[&str]| {
                let args: Vec<&str> = cmd
                    .iter()
                    .copied()
                    .chain([input_s, "-o", out])
                    .chain(f.iter().copied())
                    .collect();
                refused(cwd, &args, needles);
            };
            // A directory holding a user's file.
            run(&base, work_s, &[work_s, "not written by readout"]);
            // The input's parent, and the input itself.
            run(&base, parent_s, &[parent_s, "contains the input model"]);
            run(&base, input_s, &[input_s, "is the input model"]);
            // The current directory, as `.` and as its absolute path.
            run(&work, ".", &["-o .", "contains the current directory"]);
            run(&work, work_s, &[work_s, "current directory"]);
            // An existing file.
            run(&base, file_s, &[file_s, "not a directory"]);
        }
    }
    assert!(
        snapshot(&base) == before,
        "a refused surgery changed something on disk"
    );
}

#[test]
fn a_readout_written_directory_is_replaced_only_with_force() {
    let (base, input) = tree("out-force");
    let out = base.join("trimmed");
    let trim = |force: bool| {
        let mut c = readout();
        c.args(["--threads", "2", "trim"])
            .arg(&input)
            .arg("-o")
            .arg(&out);
        if force {
            c.arg("--force");
        }
        c.output().unwrap()
    };
    let o = trim(false);
    assert!(o.status.success(), "{}", stderr(&o));
    let marker = std::fs::read_to_string(out.join(".readout-surgery")).unwrap();
    assert!(marker.starts_with("readout trim"), "{marker}");
    let first = snapshot(&out);
    let o = trim(false);
    assert!(
        !o.status.success() && stderr(&o).contains("pass --force"),
        "{}",
        stderr(&o)
    );
    assert!(snapshot(&out) == first);
    // Something the user put there is never deleted, --force or not.
    std::fs::write(out.join("results.csv"), b"a,b\n").unwrap();
    let o = trim(true);
    assert!(
        !o.status.success() && stderr(&o).contains("\"results.csv\""),
        "{}",
        stderr(&o)
    );
    std::fs::remove_file(out.join("results.csv")).unwrap();
    let o = trim(true);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(out.join("model.onnx").is_file() && out.join(".readout-surgery").is_file());
    let left: Vec<String> = std::fs::read_dir(&*base)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !left.iter().any(|n| n.starts_with('.')),
        "temporary directories left: {left:?}"
    );
}

#[test]
fn a_run_killed_mid_way_leaves_a_temp_dir_the_next_run_removes() {
    let (base, input) = tree("out-killed");
    let out = base.join("trimmed");
    let temps = || -> Vec<PathBuf> {
        std::fs::read_dir(&*base)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with(".trimmed.tmp-")
            })
            .collect()
    };
    let mut child = readout()
        .args(["--threads", "2", "trim"])
        .arg(&input)
        .arg("-o")
        .arg(&out)
        .stderr(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while temps().is_empty() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "trim finished before its temporary directory was seen"
        );
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "no temporary directory appeared"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    child.kill().unwrap(); // SIGKILL: no destructor runs.
    child.wait().unwrap();
    let stale = temps();
    assert_eq!(
        stale.len(),
        1,
        "the killed run's temporary directory stays behind"
    );
    assert!(!out.exists());

    let o = readout()
        .args(["--threads", "2", "trim"])
        .arg(&input)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(out.join("model.onnx").is_file());
    assert!(
        temps().is_empty(),
        "the next run removes the killed run's {:?}",
        stale
    );
}

#[test]
fn variants_makes_both_cuts_keeps_them_and_refuses_a_foreign_directory() {
    let (base, input) = tree("variants");
    let [trimmed, pruned] = readout::surgery::variants::variant_paths(&input).unwrap();
    let variants = || {
        readout()
            .args(["--threads", "2", "variants"])
            .arg(&input)
            .output()
            .unwrap()
    };
    let o = variants();
    assert!(o.status.success(), "{}", stderr(&o));
    for (dir, command) in [(&trimmed, "readout trim"), (&pruned, "readout prune")] {
        let marker = std::fs::read_to_string(dir.join(".readout-surgery")).unwrap();
        assert!(marker.starts_with(command), "{}: {marker}", dir.display());
    }
    // Every letter kept: the catalog serves this cut to criteria of up to 20 options.
    let map = std::fs::read_to_string(pruned.join("slot_map.json")).unwrap();
    assert!(map.contains("ABCDEFGHIJKLMNOPQRST"), "{map}");
    assert_eq!(stderr(&o).matches(" written, verified").count(), 2);

    // A second run keeps both, byte for byte.
    let first = snapshot(&base);
    let o = variants();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stderr(&o).matches(" kept ").count(), 2, "{}", stderr(&o));
    assert!(snapshot(&base) == first);

    // A directory the user made at a cut's path is refused and left as it was.
    std::fs::remove_dir_all(&pruned).unwrap();
    std::fs::create_dir_all(&pruned).unwrap();
    std::fs::write(pruned.join("notes.txt"), b"mine\n").unwrap();
    let before = snapshot(&base);
    let o = variants();
    assert!(
        !o.status.success() && stderr(&o).contains("not written by readout"),
        "{}",
        stderr(&o)
    );
    assert!(snapshot(&base) == before);
}
