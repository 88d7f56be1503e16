//! What the benchmark programs share: their `--flag value` arguments.
//! A program is a tool run by hand, so a bad value stops it with the flag
//! named rather than falling back to a default the reader did not ask for.

// Each program uses part of this.
#![allow(dead_code)]

/// The program's arguments; flags are taken out as they are read, so what
/// is left at the end is the positional ones.
pub struct Args(Vec<String>);

impl Args {
    /// The command line, without the `--bench` cargo adds.
    pub fn from_env() -> Self {
        Args(
            std::env::args()
                .skip(1)
                .filter(|a| a != "--bench")
                .collect(),
        )
    }

    /// The value after `flag`, taken out with it; `None` when it is absent.
    pub fn text(&mut self, flag: &str) -> Option<String> {
        let i = self.0.iter().position(|a| a == flag)?;
        assert!(i + 1 < self.0.len(), "{flag} needs a value");
        let v = self.0.remove(i + 1);
        self.0.remove(i);
        Some(v)
    }

    /// Whether `flag` (one that takes no value) is given; taken out.
    pub fn flag(&mut self, flag: &str) -> bool {
        let at = self.0.iter().position(|a| a == flag);
        at.map(|i| self.0.remove(i)).is_some()
    }

    /// The whole number after `flag`, or `default` when it is absent.
    pub fn number(&mut self, flag: &str, default: usize) -> usize {
        self.text(flag).map_or(default, |v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{flag} takes a whole number, got {v}"))
        })
    }

    /// The arguments no flag took.
    pub fn rest(self) -> Vec<String> {
        self.0
    }
}

/// A criterion whose options are `descriptions`, with ids `o0`, `o1`, ...
pub fn criterion(
    id: &str,
    family: &str,
    question: String,
    descriptions: &[&str],
) -> readout::Criterion {
    readout::Criterion {
        id: id.into(),
        family: family.into(),
        question,
        options: descriptions
            .iter()
            .enumerate()
            .map(|(i, d)| readout::OptionSpec {
                id: format!("o{i}"),
                description: d.to_string(),
            })
            .collect(),
        answer: None,
    }
}

/// The one writer of bench/results for the Rust benches (JavaScript's is
/// bench/runners/result_file.mjs, Python's result_file.py): a result of
/// kind K goes to bench/results/K/<date>-<name>.json (or `out`), refused
/// before the run when the name is taken.
pub fn result_path(kind: &str, name: &str, out: Option<String>) -> std::path::PathBuf {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let path = out.map(std::path::PathBuf::from).unwrap_or_else(|| {
        root.join("bench/results")
            .join(kind)
            .join(format!("{}-{name}.json", readout::host::today()))
    });
    assert!(
        !path.exists(),
        "{} exists: pass --out for another name",
        path.display()
    );
    path
}

/// Writes `body` under the header every result carries (kind, command,
/// commit, date, machine, emulated: never, natively), pretty with a final
/// newline, never over a file, and says where.
pub fn write_result(kind: &str, path: &std::path::Path, body: serde_json::Value, tag: &str) {
    let commit = std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let mut doc = serde_json::json!({
        "kind": kind,
        "command": format!("cargo bench --bench {tag} -- {}", args.join(" ")).trim().to_string(),
        "commit": commit,
        "date": readout::host::today(),
        "machine": readout::host::machine(),
        "emulated": false,
    });
    if let (Some(h), serde_json::Value::Object(b)) = (doc.as_object_mut(), body) {
        for (k, v) in b {
            h.entry(k).or_insert(v);
        }
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).expect("results folder");
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    std::io::Write::write_all(
        &mut f,
        (serde_json::to_string_pretty(&doc).expect("json") + "\n").as_bytes(),
    )
    .expect("write result");
    eprintln!("[{tag}] wrote {}", path.display());
}
