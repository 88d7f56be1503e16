//! The crate's layering, read from its sources: no import cycle between the
//! top-level modules or between the core's own groups, no import cycle
//! between files (a parent module and its own children aside), the core does
//! no I/O (no file system, network, process or platform code), and the
//! kernels read no graph (no `onnx_pb`). ARCHITECTURE.md states the rules.

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
    assert!(g["core::text"].contains("core::input"), "{g:?}");
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

/// Every file under `dir`, in its subfolders too, whose name ends in one of
/// `exts`, with its text.
fn files_in(dir: &str, exts: &[&str]) -> Vec<(PathBuf, String)> {
    let mut todo = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join(dir)];
    let mut out = Vec::new();
    while let Some(dir) = todo.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else if exts.iter().any(|x| p.to_string_lossy().ends_with(x)) {
                let text = std::fs::read_to_string(&p).unwrap();
                out.push((p, text));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn benchmarks_use_the_library_not_the_cli_or_the_tests() {
    let benches = files_in("bench/native", &[".rs"]);
    // The reader must see the benches, or an empty list passes.
    assert!(benches.iter().any(|(_, t)| t.contains("readout::host")));
    for (f, text) in &benches {
        assert!(
            !text.contains("readout::cli"),
            "{}: a bench imports the CLI",
            f.display()
        );
    }
    // The page, its runners and the studies: every script under bench/.
    let pages = files_in("bench", &[".js", ".mjs"]);
    assert!(pages.iter().any(|(_, t)| t.contains("harness/browser.mjs")));
    let bench = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench");
    for folder in ["page", "runners", "studies"] {
        assert!(
            pages.iter().any(|(f, _)| f.starts_with(bench.join(folder))),
            "no script read under bench/{folder}"
        );
    }
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

/// The JavaScript and Python import lines of `text`.
fn import_lines(text: &str) -> Vec<&str> {
    text.lines()
        .filter(|l| {
            let t = l.trim_start();
            t.starts_with("import ") || t.starts_with("from ") || t.contains("import(")
        })
        .collect()
}

#[test]
fn scripts_holds_entry_points_that_nothing_imports_and_the_harness_reads_no_bench_or_tests() {
    // scripts/ is entry points (and its sourced shell helpers in lib/):
    // what the tests, benches and demos share lives in harness/, model and
    // fixture builders in modelgen/, studies in bench/studies/.
    let mut code = Vec::new();
    for dir in [
        "bench", "tests", "harness", "scripts", "modelgen", "js", "www",
    ] {
        code.extend(files_in(dir, &[".mjs", ".js", ".py"]));
    }
    assert!(
        code.iter().any(|(_, t)| import_lines(t)
            .iter()
            .any(|l| l.contains("harness/serve.mjs"))),
        "the reader saw no import of the harness"
    );
    let scripts = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts");
    for (f, text) in &code {
        if f.components().any(|c| c.as_os_str() == "node_modules") {
            continue;
        }
        for line in import_lines(text) {
            assert!(
                !(f.starts_with(&scripts) && line.contains("\"./")),
                "{}: an entry point imports a sibling: {line}",
                f.display()
            );
            assert!(
                !line.contains("scripts/"),
                "{}: imports an entry point from scripts/: {line}",
                f.display()
            );
        }
    }
    let harness = files_in("harness", &[".mjs", ".js"]);
    assert!(harness.iter().any(|(f, _)| f.ends_with("serve.mjs")));
    for (f, text) in &harness {
        for line in import_lines(text) {
            for below in ["bench/", "tests/", "scripts/", "modelgen/"] {
                assert!(
                    !line.contains(below),
                    "{}: the harness imports {below}: {line}",
                    f.display()
                );
            }
        }
    }
    let top: Vec<String> = std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".py"))
        .collect();
    assert!(
        top.is_empty(),
        "Python under scripts/ (builders go to modelgen/, studies to bench/studies/): {top:?}"
    );
}

/// One path a file names, whole: `crate::a::{b, c::D as E}` gives `a::b`
/// and `a::c::D` (named `E`). `self` in a group names the group's module.
#[derive(Debug, PartialEq)]
struct Named {
    path: Vec<String>,
    alias: Option<String>,
}

/// `text` with `//` comments removed (strings holding `//` lose their
/// tail, which only ever drops a path, never adds one).
fn code_of(text: &str) -> String {
    text.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

fn ident_at(s: &[char], mut i: usize) -> (String, usize) {
    let start = i;
    while i < s.len() && (s[i].is_alphanumeric() || s[i] == '_') {
        i += 1;
    }
    (s[start..i].iter().collect(), i)
}

fn skip_ws(s: &[char], mut i: usize) -> usize {
    while i < s.len() && s[i].is_whitespace() {
        i += 1;
    }
    i
}

/// The path tree that starts at `s[i]`, under `prefix`.
fn tree(s: &[char], i: usize, prefix: &[String], out: &mut Vec<Named>) -> usize {
    let i = skip_ws(s, i);
    if s.get(i) == Some(&'{') {
        let mut j = i + 1;
        loop {
            j = skip_ws(s, j);
            match s.get(j) {
                None => return j,
                Some('}') => return j + 1,
                Some(',') => j += 1,
                _ => {
                    let next = tree(s, j, prefix, out);
                    if next == j {
                        return j;
                    }
                    j = next;
                }
            }
        }
    }
    let (id, j) = ident_at(s, i);
    if id.is_empty() {
        return i;
    }
    let mut path = prefix.to_vec();
    if id != "self" {
        path.push(id);
    }
    if s.get(j) == Some(&':') && s.get(j + 1) == Some(&':') {
        return tree(s, j + 2, &path, out);
    }
    let k = skip_ws(s, j);
    let (word, after) = ident_at(s, k);
    let (alias, end) = if word == "as" {
        let (a, e) = ident_at(s, skip_ws(s, after));
        (Some(a), e)
    } else {
        (None, j)
    };
    out.push(Named { path, alias });
    end
}

/// Every path `code` names through `crate::`, `super::` or `self::`,
/// resolved against the file's own module `me` (`is_mod`: a `mod.rs`).
fn named_paths(code: &str, me: &[String]) -> Vec<Named> {
    let s: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() {
        let starts = |w: &str| s[i..].iter().take(w.len()).copied().eq(w.chars());
        let fresh = i == 0 || !(s[i - 1].is_alphanumeric() || s[i - 1] == '_' || s[i - 1] == ':');
        let base = if !fresh {
            None
        } else if starts("crate::") {
            Some((Vec::new(), 7))
        } else if starts("super::") {
            Some((me[..me.len().saturating_sub(1)].to_vec(), 7))
        } else if starts("self::") {
            Some((me.to_vec(), 6))
        } else {
            None
        };
        match base {
            Some((b, n)) => i = tree(&s, i + n, &b, &mut out).max(i + n),
            None => i += 1,
        }
    }
    out
}

/// The modules of the crate by path, each with its file's text, and what
/// each re-exports (`pub use`): the name it gives → the path it names.
struct Crate {
    files: BTreeMap<Vec<String>, String>,
    reexports: BTreeMap<Vec<String>, BTreeMap<String, Vec<String>>>,
}

fn read_crate() -> Crate {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut paths = Vec::new();
    sources(&src, &mut paths);
    let mut files = BTreeMap::new();
    let mut reexports = BTreeMap::new();
    for p in &paths {
        let me = module_of(&src, p);
        let code = code_of(&std::fs::read_to_string(p).unwrap());
        let mut names = BTreeMap::new();
        for stmt in code.split("pub use ").skip(1) {
            let stmt = stmt.split(';').next().unwrap_or("");
            // A bare `pub use child::X` names a child of this module.
            let rooted = if stmt.starts_with("crate::")
                || stmt.starts_with("super::")
                || stmt.starts_with("self::")
            {
                stmt.to_string()
            } else {
                format!("self::{stmt}")
            };
            for n in named_paths(&rooted, &me) {
                if let Some(name) = n.alias.clone().or_else(|| n.path.last().cloned()) {
                    names.insert(name, n.path);
                }
            }
        }
        reexports.insert(me.clone(), names);
        files.insert(me, code);
    }
    Crate { files, reexports }
}

impl Crate {
    /// The file a path ends in: its longest module prefix, followed through
    /// that module's re-exports when the next segment is one.
    fn resolve(&self, path: &[String], depth: usize) -> Option<Vec<String>> {
        let len = (0..=path.len())
            .rev()
            .find(|&i| self.files.contains_key(&path[..i]))?;
        let module = path[..len].to_vec();
        if depth < 8 {
            if let Some(next) = path.get(len) {
                if let Some(target) = self.reexports[&module].get(next) {
                    if target.as_slice() != path {
                        return self.resolve(target, depth + 1);
                    }
                }
            }
        }
        Some(module)
    }

    /// File → the files it names. A module and its own ancestors are left
    /// out: a parent declares and re-exports its children, and a child
    /// uses its parent's types, by Rust's design.
    fn file_graph(&self) -> BTreeMap<String, BTreeSet<String>> {
        let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (me, code) in &self.files {
            let from = me.join("::");
            let edges = g.entry(from).or_default();
            for n in named_paths(code, me) {
                let Some(to) = self.resolve(&n.path, 0) else {
                    continue;
                };
                if to.starts_with(me) || me.starts_with(&to) {
                    continue;
                }
                edges.insert(to.join("::"));
            }
        }
        g
    }
}

#[test]
fn the_path_reader_expands_groups_and_follows_reexports() {
    let me: Vec<String> = vec!["runtime".into(), "own".into()];
    let got: Vec<String> = named_paths(
        "use crate::kernels::{simd, Pack as P, par::{Pool}};\nuse super::{Branch, Dtype};\nlet x = self::interp::Program::load();",
        &me,
    )
    .into_iter()
    .map(|n| format!("{}{}", n.path.join("::"), n.alias.map(|a| format!(" as {a}")).unwrap_or_default()))
    .collect();
    assert_eq!(
        got,
        [
            "kernels::simd",
            "kernels::Pack as P",
            "kernels::par::Pool",
            "runtime::Branch",
            "runtime::Dtype",
            "runtime::own::interp::Program::load",
        ]
    );
    let c = read_crate();
    // `kernels::Pool` is re-exported from `kernels::par`: the edge goes there.
    let pool: Vec<String> = vec!["kernels".into(), "Pool".into()];
    assert_eq!(
        c.resolve(&pool, 0),
        Some(vec!["kernels".to_string(), "par".into()])
    );
}

#[test]
fn no_import_cycle_between_files() {
    let c = read_crate();
    let g = c.file_graph();
    // The reader must see real edges between sibling files, or an empty
    // graph passes.
    assert!(
        g["kernels::q4"].contains("kernels::simd"),
        "{:?}",
        g["kernels::q4"]
    );
    assert!(
        g["engine::proof"].contains("engine::letter_ids"),
        "{:?}",
        g["engine::proof"]
    );
    if let Some(cycle) = find_cycle(&g) {
        panic!("import cycle between files: {}", cycle.join(" → "));
    }
}

#[test]
fn the_kernels_read_no_graph() {
    let c = read_crate();
    let mut seen = 0;
    for (me, code) in &c.files {
        let in_kernels = me.first().is_some_and(|m| m == "kernels");
        let names_pb = named_paths(code, me)
            .iter()
            .any(|n| n.path.first().is_some_and(|m| m == "onnx_pb"));
        if in_kernels {
            seen += 1;
            assert!(!names_pb, "src/{}: a kernel names onnx_pb", me.join("/"));
        }
    }
    assert!(seen > 5, "the kernels were not read ({seen} files)");
    // The check must be able to fail: the interpreter does read the graph.
    let interp: Vec<String> = ["runtime", "own", "interp", "initializers"]
        .map(String::from)
        .to_vec();
    assert!(named_paths(&c.files[&interp], &interp)
        .iter()
        .any(|n| n.path.first().is_some_and(|m| m == "onnx_pb")));
}

/// The "may import" column of ARCHITECTURE.md's layer table, as data: every
/// top-level module's imports must be among these, so an import sideways
/// (one no cycle would catch) fails here and the table stays true.
const MAY_IMPORT: &[(&str, &[&str])] = &[
    ("core", &[]),
    ("platform", &[]),
    ("onnx_pb", &[]),
    ("host", &[]),
    ("gpu", &[]),
    ("kernels", &["core"]),
    (
        "runtime",
        &["core", "gpu", "kernels", "onnx_pb", "platform"],
    ),
    ("engine", &["core", "runtime"]),
    (
        "model_dir",
        &["core", "engine", "kernels", "onnx_pb", "runtime"],
    ),
    (
        "surgery",
        &["core", "engine", "model_dir", "onnx_pb", "runtime"],
    ),
    (
        "cli",
        &[
            "core",
            "engine",
            "surgery",
            "host",
            "kernels",
            "model_dir",
            "platform",
        ],
    ),
    (
        "bindings",
        &[
            "core", "engine", "gpu", "kernels", "onnx_pb", "platform", "runtime",
        ],
    ),
    ("fuzz", &["core", "runtime", "surgery"]),
    // The binary (`src/bin/readout.rs`) only calls the CLI.
    ("bin", &["cli"]),
];

#[test]
fn each_layer_imports_only_what_the_architecture_allows() {
    let g = graph();
    let top = |u: &str| u.split("::").next().unwrap_or(u).to_string();
    let mut seen = BTreeSet::new();
    for (from, to) in &g {
        let layer = top(from);
        let Some((_, allowed)) = MAY_IMPORT.iter().find(|(l, _)| *l == layer) else {
            panic!("src/{layer}: a layer ARCHITECTURE.md's table does not list");
        };
        for t in to.iter().map(|t| top(t)).filter(|t| *t != layer) {
            assert!(
                allowed.contains(&t.as_str()),
                "{from} imports {t}, which ARCHITECTURE.md's table does not allow for {layer}"
            );
            seen.insert((layer.clone(), t));
        }
    }
    // The check must see the crate's real edges, or an empty graph passes.
    assert!(seen.contains(&("engine".to_string(), "runtime".to_string())));
    assert!(seen.contains(&("runtime".to_string(), "kernels".to_string())));
}

/// Product code never reads benchmark files: what a benchmark measured
/// reaches the product only through a file its caller names (`readout
/// catalog --decisions FILE`). Comments may cite a result; code may not
/// name a path under `bench/`.
#[test]
fn no_source_file_names_a_path_under_bench() {
    let mut found = Vec::new();
    for (path, text) in files_in("src", &[".rs"]) {
        for (i, line) in code_of(&text).lines().enumerate() {
            if line.contains("bench/") {
                found.push(format!("{}:{}: {}", path.display(), i + 1, line.trim()));
            }
        }
    }
    assert!(found.is_empty(), "src/ names bench/:\n{}", found.join("\n"));
}
