//! Finding and loading `libonnxruntime.so.1` once per process.

use std::path::PathBuf;
use std::sync::OnceLock;

use ort::environment::Environment;

use super::RuntimeError;

/// Where onnxruntime-node keeps the Linux x64 library inside node_modules.
const NODE_LIB: &str = "node_modules/onnxruntime-node/bin/napi-v6/linux/x64/libonnxruntime.so.1";

static ENV: OnceLock<Result<(Environment, PathBuf), String>> = OnceLock::new();

/// One place the library is looked for, and what puts it there.
struct Place {
    what: String,
    found: Option<PathBuf>,
}

/// The entries of `dir` whose file names `keep` accepts, sorted.
fn entries(dir: &std::path::Path, keep: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().is_some_and(|n| keep(&n.to_string_lossy())))
        .collect();
    found.sort();
    found
}

/// An `onnxruntime` Python package's own library under `prefix` (a venv or
/// a Python installation): `lib/python3.*/site-packages/onnxruntime/capi/`.
fn python_package(prefix: &std::path::Path) -> Option<PathBuf> {
    entries(&prefix.join("lib"), |n| n.starts_with("python3"))
        .iter()
        .find_map(|py| {
            entries(&py.join("site-packages/onnxruntime/capi"), |n| {
                n.starts_with("libonnxruntime.so") && !n.contains("providers")
            })
            .pop()
        })
}

/// Where the library is looked for, in order, the same for the CLI and
/// for Python's extension (which sets `ORT_DYLIB_PATH` itself from the
/// `onnxruntime` package it depends on):
/// 1. `ORT_DYLIB_PATH` (the override; a path that is not a file is refused);
/// 2. onnxruntime-node's under a `node_modules/` above the working
///    directory or the executable (`scripts/setup.sh` installs it);
/// 3. the `onnxruntime` Python package of the active venv (`VIRTUAL_ENV`),
///    or of the Python installation the executable belongs to.
///
/// Never the repository it was built from: a binary or wheel copied to
/// another machine must not work here and fail there.
pub fn find_library() -> Result<PathBuf, RuntimeError> {
    if let Ok(p) = std::env::var("ORT_DYLIB_PATH") {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(RuntimeError::Library(format!(
                "ORT_DYLIB_PATH={} is not a file",
                p.display()
            )))
        };
    }
    let mut places = Vec::new();
    let exe = std::env::current_exe().ok();
    let mut starts: Vec<PathBuf> = std::env::current_dir().ok().into_iter().collect();
    starts.extend(exe.clone());
    for s in &starts {
        places.push(Place {
            what: format!("{NODE_LIB} above {}", s.display()),
            found: s
                .ancestors()
                .map(|d| d.join(NODE_LIB))
                .find(|c| c.is_file()),
        });
    }
    let prefixes = std::env::var_os("VIRTUAL_ENV")
        .map(PathBuf::from)
        .into_iter()
        // The executable's installation: <prefix>/bin/<exe>.
        .chain(
            exe.as_deref()
                .and_then(|e| e.parent()?.parent())
                .map(PathBuf::from),
        );
    for prefix in prefixes {
        places.push(Place {
            what: format!("the onnxruntime Python package under {}", prefix.display()),
            found: python_package(&prefix),
        });
    }
    if let Some(p) = places.iter().find_map(|p| p.found.clone()) {
        return Ok(p);
    }
    let looked: Vec<String> = places.into_iter().map(|p| p.what).collect();
    Err(RuntimeError::Library(format!(
        "libonnxruntime.so.1 not found; looked at ORT_DYLIB_PATH (unset), {}. Install it with `pip install onnxruntime` (in the active venv), or `npm i onnxruntime-node@1.30.0 --ignore-scripts` (scripts/setup.sh does), or set ORT_DYLIB_PATH to the library; `--runtime own` needs none",
        looked.join(", ")
    )))
}

/// The process's ONNX Runtime and the library file it was loaded from
/// (what a runtime's description names: the library found may be another
/// release than the 1.30 the browser's onnxruntime-web is built from).
pub(super) fn environment() -> Result<(Environment, PathBuf), RuntimeError> {
    ENV.get_or_init(|| {
        let lib = find_library().map_err(|e| match e {
            // Said once: the cached message is wrapped again below.
            RuntimeError::Library(m) => m,
            e => e.to_string(),
        })?;
        let env = ort::init_from(&lib)
            .map_err(|e| format!("{}: {e}", lib.display()))?
            .with_name("readout")
            .build()
            .map_err(|e| e.to_string())?;
        Ok((env, lib))
    })
    .clone()
    .map_err(RuntimeError::Library)
}
