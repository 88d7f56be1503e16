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

/// Writes a benchmark's result JSON (pretty, with a final newline) and says where.
pub fn write_result(path: &std::path::Path, doc: &serde_json::Value, tag: &str) {
    std::fs::write(
        path,
        serde_json::to_string_pretty(doc).expect("json") + "\n",
    )
    .expect("write result");
    eprintln!("[{tag}] wrote {}", path.display());
}
