//! Finding and loading `libonnxruntime.so.1` once per process.

use std::path::PathBuf;
use std::sync::OnceLock;

use ort::environment::Environment;

use super::RuntimeError;

/// Where onnxruntime-node keeps the Linux x64 library inside node_modules.
const NODE_LIB: &str = "node_modules/onnxruntime-node/bin/napi-v6/linux/x64/libonnxruntime.so.1";

static ENV: OnceLock<Result<Environment, String>> = OnceLock::new();

/// `ORT_DYLIB_PATH`, else `node_modules/...` above the working directory,
/// else above the executable, else the repository this was built from.
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
    let mut starts: Vec<PathBuf> = Vec::new();
    if let Ok(d) = std::env::current_dir() {
        starts.push(d);
    }
    if let Ok(e) = std::env::current_exe() {
        starts.push(e);
    }
    starts.push(PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    for s in &starts {
        for dir in s.ancestors() {
            let cand = dir.join(NODE_LIB);
            if cand.is_file() {
                return Ok(cand);
            }
        }
    }
    Err(RuntimeError::Library(format!(
        "libonnxruntime.so.1 not found: set ORT_DYLIB_PATH or run scripts/setup.sh (it installs {NODE_LIB})"
    )))
}

pub(super) fn environment() -> Result<Environment, RuntimeError> {
    ENV.get_or_init(|| {
        let lib = find_library().map_err(|e| e.to_string())?;
        ort::init_from(&lib)
            .map_err(|e| format!("{}: {e}", lib.display()))?
            .with_name("readout")
            .build()
            .map_err(|e| e.to_string())
    })
    .clone()
    .map_err(RuntimeError::Library)
}
