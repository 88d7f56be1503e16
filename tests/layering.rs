//! The crate's layering, read from its sources: no import cycle between the
//! top-level modules or between the core's own modules, and the core does no
//! I/O (no file system, network, process or platform code).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// `src/a/b.rs` → `["a", "b"]`; `src/a/mod.rs` → `["a"]`; `src/lib.rs` → `[]`.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

/// The unit a module path belongs to: `core::<sub>` inside the core, else
/// the top-level module.
fn unit(path: &[String]) -> Option<String> {
    match path {
        [] => None,
        [core, sub, ..] if core == "core" => Some(format!("core::{sub}")),
        [top, ..] => Some(top.clone()),
    }
}

/// Module paths named in `text` (`crate::a::b`, `super::c`), resolved
/// against the file's own module `me`. Comments are skipped.
fn references(text: &str, me: &[String]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        for (prefix, base) in [
            ("crate::", Vec::new()),
            // The parent of the file's module (`a/b.rs`: a; `a/mod.rs`: the crate).
            ("super::", me[..me.len().saturating_sub(1)].to_vec()),
        ] {
            let mut rest = code;
            while let Some(i) = rest.find(prefix) {
                // `super::super::` or an identifier ending in `crate` are not ours.
                let before = &rest[..i];
                let tail = &rest[i + prefix.len()..];
                rest = tail;
                if before.ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':') {
                    continue;
                }
                let mut path = base.clone();
                for seg in tail.split("::") {
                    let ident: String = seg
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    if ident.is_empty() || ident.chars().next().is_some_and(char::is_uppercase) {
                        break;
                    }
                    path.push(ident.clone());
                    if seg.len() != ident.len() {
                        break;
                    }
                }
                out.push(path);
            }
        }
    }
    out
}

/// A cycle in `graph`, if there is one.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(n.to_string(), 1);
        stack.push(n.to_string());
        for m in g.get(n).into_iter().flatten() {
            match state.get(m.as_str()).copied().unwrap_or(0) {
                1 => {
                    let at = stack.iter().position(|x| x == m).unwrap();
                    let mut c = stack[at..].to_vec();
                    c.push(m.clone());
                    return Some(c);
                }
                0 => {
                    if let Some(c) = visit(m, g, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in graph.keys() {
        if state.get(n.as_str()).copied().unwrap_or(0) == 0 {
            if let Some(c) = visit(n, graph, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

/// The unit graph of the crate's sources.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut known: BTreeSet<Vec<String>> = BTreeSet::new();
    for f in &files {
        let m = module_of(&src, f);
        for i in 1..=m.len() {
            known.insert(m[..i].to_vec());
        }
    }
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        let me = module_of(&src, f);
        let Some(from) = unit(&me) else { continue };
        let text = std::fs::read_to_string(f).unwrap();
        let edges = g.entry(from.clone()).or_default();
        for r in references(&text, &me) {
            // The longest known module prefix of the path.
            let Some(len) = (1..=r.len()).rev().find(|&i| known.contains(&r[..i])) else {
                continue;
            };
            if let Some(to) = unit(&r[..len]) {
                if to != from {
                    edges.insert(to);
                }
            }
        }
    }
    g
}

#[test]
fn the_checker_sees_a_cycle_when_there_is_one() {
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    g.entry("a".into()).or_default().insert("b".into());
    g.entry("b".into()).or_default().insert("c".into());
    assert_eq!(find_cycle(&g), None);
    g.entry("c".into()).or_default().insert("a".into());
    assert_eq!(
        find_cycle(&g),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
    let me: Vec<String> = vec!["core".into(), "prompt".into()];
    let refs = references(
        "use super::fixture::{Criterion, MAX};\nlet x = crate::engine::chunk::extend(); // crate::cli",
        &me,
    );
    assert_eq!(
        refs,
        vec![
            vec!["core".to_string(), "fixture".into()],
            vec!["engine".to_string(), "chunk".into(), "extend".into()],
        ]
    );
}

#[test]
fn no_import_cycle_between_modules() {
    let g = graph();
    // The reader must see the crate's real edges, or an empty graph passes.
    assert!(g["engine"].contains("runtime"), "{g:?}");
    assert!(g["core::prompt"].contains("core::fixture"), "{g:?}");
    if let Some(c) = find_cycle(&g) {
        panic!("import cycle: {}", c.join(" → "));
    }
}

#[test]
fn the_core_does_no_io() {
    let core = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/core");
    let mut files = Vec::new();
    sources(&core, &mut files);
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        // Unit tests (at the end of a file) may read fixtures.
        let text = text.split("#[cfg(test)]").next().unwrap_or("");
        for banned in [
            "std::fs",
            "std::net",
            "std::process",
            "std::env",
            "wasm_bindgen",
            "web_sys",
            "crate::runtime",
            "crate::engine",
        ] {
            for (i, line) in text.lines().enumerate() {
                let code = line.split("//").next().unwrap_or("");
                assert!(
                    !code.contains(banned),
                    "{}:{}: the core names {banned}",
                    f.display(),
                    i + 1
                );
            }
        }
    }
}

/// Every file directly in `dir` whose name ends in one of `exts`, with its text.
fn files_in(dir: &str, exts: &[&str]) -> Vec<(PathBuf, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut out: Vec<(PathBuf, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| exts.iter().any(|x| p.to_string_lossy().ends_with(x)))
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            (p, text)
        })
        .collect();
    out.sort();
    out
}

#[test]
fn benchmarks_use_the_library_not_the_cli_or_the_tests() {
    let benches = files_in("benches", &[".rs"]);
    // The reader must see the benches, or an empty list passes.
    assert!(benches.iter().any(|(_, t)| t.contains("readout::host")));
    for (f, text) in &benches {
        assert!(
            !text.contains("readout::cli"),
            "{}: a bench imports the CLI",
            f.display()
        );
    }
    let pages = files_in("bench", &[".js", ".mjs"]);
    assert!(pages.iter().any(|(_, t)| t.contains("scripts/browser.mjs")));
    for (f, text) in &pages {
        for line in text
            .lines()
            .filter(|l| l.trim_start().starts_with("import"))
        {
            assert!(
                !line.contains("tests/"),
                "{}: a bench script imports the tests: {line}",
                f.display()
            );
        }
    }
}
