//! Native model loading: find a model's files on disk, read them, and build an
//! engine over the native runtime. Accepts this project's `models/<id>/`
//! layout and the onnx-community one (`onnx/model_q4f16.onnx`, ...).
//! Every file a model names, external data included, is confined to the
//! model's root (`confine`) before any runtime opens it.

pub mod confine;

use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::core::input::input_limits;
use crate::core::input::mode::{defaults_from_entry, ReadoutChoice};
use crate::core::model::backend_choice::{cpu_order, fell_back, CpuRuntime};
use crate::core::model::config::ModelConfig;
use crate::core::model::models_json::{Catalog, Entry};
use crate::core::text::tokenizer::TextTokenizer;
use crate::core::CoreError;
use crate::engine::{Engine, EngineError, ModelAssets};
use crate::kernels::Precision;
use crate::runtime::any::AnyRuntime;
use crate::runtime::native::{NativeOptions, NativeRuntime};
use crate::runtime::own::interp::Program;
use crate::runtime::own::{self, OwnOptions};

#[derive(Debug, Clone)]
pub struct ModelDir {
    pub root: PathBuf,
    pub graph: PathBuf,
    pub config: PathBuf,
    pub tokenizer: PathBuf,
    pub slot_map: Option<PathBuf>,
    pub model_id: String,
    /// The model's root, which every file it names must stay inside.
    pub confined: confine::Root,
}

fn file_err(path: &Path, message: impl Into<String>) -> EngineError {
    EngineError::ModelFile {
        file: path.display().to_string(),
        message: message.into(),
    }
}

/// Refuses a side file over its kind's size limit (`input_limits`), from
/// its metadata, before a byte of it is read.
fn check_size(path: &Path) -> Result<(), EngineError> {
    let len = std::fs::metadata(path)
        .map_err(|e| file_err(path, e.to_string()))?
        .len();
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    Ok(input_limits::check_file(&name, len)?)
}

fn require(path: PathBuf) -> Result<PathBuf, EngineError> {
    match std::fs::metadata(&path) {
        Ok(m) if m.is_file() && m.len() > 0 => Ok(path),
        Ok(m) if m.is_file() => Err(file_err(&path, "is empty (truncated?)")),
        Ok(_) => Err(file_err(&path, "is not a file")),
        Err(e) => Err(file_err(&path, format!("missing ({e})"))),
    }
}

impl ModelDir {
    /// `path` is a model directory or a `.onnx` file inside one.
    pub fn open(path: &Path) -> Result<Self, EngineError> {
        let (root, graph) = if path.extension().is_some_and(|e| e == "onnx") {
            let parent = path.parent().unwrap_or(Path::new("."));
            let root = if parent.file_name().is_some_and(|n| n == "onnx") {
                parent.parent().unwrap_or(parent)
            } else {
                parent
            };
            (root.to_path_buf(), require(path.to_path_buf())?)
        } else {
            if !path.is_dir() {
                return Err(file_err(path, "model directory not found"));
            }
            let direct = path.join(crate::core::model::layout::TOP_GRAPH);
            let graph = if direct.exists() {
                require(direct)?
            } else {
                // Every native runtime computes float16 on the CPU.
                crate::core::model::layout::onnx_community_graphs(true)
                    .iter()
                    .map(|n| path.join("onnx").join(n))
                    .find(|p| p.exists())
                    .ok_or_else(|| file_err(&direct, "missing (nor is there onnx/model_*.onnx)"))
                    .and_then(require)?
            };
            (path.to_path_buf(), graph)
        };
        let confined = confine::Root::of(&root)?;
        confined.check("graph", &graph)?;
        let side = |role: &str, p: PathBuf| -> Result<PathBuf, EngineError> {
            confined.check(role, &p)?;
            Ok(p)
        };
        let slot_map = root.join("slot_map.json");
        Ok(Self {
            config: require(side("config.json", root.join("config.json"))?)?,
            tokenizer: require(side("tokenizer.json", root.join("tokenizer.json"))?)?,
            slot_map: slot_map
                .exists()
                .then(|| side("slot_map.json", slot_map))
                .transpose()?,
            confined,
            model_id: root
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            root,
            graph,
        })
    }

    pub fn assets(&self) -> Result<ModelAssets, EngineError> {
        let read_text = |p: &Path| {
            check_size(p)?;
            std::fs::read_to_string(p).map_err(|e| file_err(p, e.to_string()))
        };
        check_size(&self.tokenizer)?;
        let tokenizer_json =
            std::fs::read(&self.tokenizer).map_err(|e| file_err(&self.tokenizer, e.to_string()))?;
        // A truncated tokenizer.json fails as JSON; name the file, not just the parser.
        serde_json::from_slice::<serde_json::Value>(&tokenizer_json).map_err(|e| {
            file_err(
                &self.tokenizer,
                format!("is not valid JSON (truncated?): {e}"),
            )
        })?;
        let optional = |name: &str| -> Result<Option<String>, EngineError> {
            let p = self.root.join(name);
            if !p.is_file() {
                return Ok(None);
            }
            self.confined.check(name, &p)?;
            read_text(&p).map(Some)
        };
        let config_json = read_text(&self.config)?;
        serde_json::from_str::<serde_json::Value>(&config_json)
            .map_err(|e| file_err(&self.config, format!("is not valid JSON (truncated?): {e}")))?;
        Ok(ModelAssets {
            model_id: self.model_id.clone(),
            config_json,
            tokenizer_json,
            slot_map_json: self.slot_map.as_deref().map(read_text).transpose()?,
            head_rows_json: optional("head_rows.json")?,
            chat_template: optional("chat_template.jinja")?,
            tokenizer_config_json: optional("tokenizer_config.json")?,
        })
    }

    pub fn read_config(&self) -> Result<ModelConfig, EngineError> {
        check_size(&self.config)?;
        let text = std::fs::read_to_string(&self.config)
            .map_err(|e| file_err(&self.config, e.to_string()))?;
        Ok(ModelConfig::parse(&text)?)
    }

    pub fn read_tokenizer(&self) -> Result<TextTokenizer, EngineError> {
        check_size(&self.tokenizer)?;
        let bytes =
            std::fs::read(&self.tokenizer).map_err(|e| file_err(&self.tokenizer, e.to_string()))?;
        Ok(TextTokenizer::from_json(&bytes)?)
    }

    /// Each external-data file the graph names, confined to the root before
    /// a runtime opens any of them: ONNX Runtime follows a symlink out of the
    /// folder only to refuse it, and our runtime would read it.
    pub fn check_external(&self) -> Result<(), EngineError> {
        self.checked_graph().map(drop)
    }

    /// The graph's bytes, once every external-data file it names is found
    /// confined to the model's root (what a load reads anyway).
    fn checked_graph(&self) -> Result<Vec<u8>, EngineError> {
        let bytes = std::fs::read(&self.graph).map_err(|e| file_err(&self.graph, e.to_string()))?;
        let dir = self.graph.parent().unwrap_or(Path::new("."));
        let names = Program::external_locations(&bytes).map_err(|e| match e {
            // A limit keeps its own code, field and limit.
            e @ crate::kernels::KernelError::GraphTooLarge { .. } => {
                EngineError::from(crate::runtime::RuntimeError::from(e))
            }
            e => file_err(&self.graph, format!("is not a readable ONNX graph: {e}")),
        })?;
        for loc in &names {
            self.confined.check_name("external data", dir, loc)?;
        }
        Ok(bytes)
    }

    pub async fn engine(&self, opts: &NativeOptions) -> Result<Engine<NativeRuntime>, EngineError> {
        let assets = self.assets()?;
        let config = ModelConfig::parse(&assets.config_json)?;
        self.check_external()?;
        let runtime = NativeRuntime::load(&self.graph, opts, config.kv_dims())?;
        Engine::new(runtime, assets).await
    }
}

/// Which runtime a native engine runs on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RuntimeKind {
    /// The browser's rule (`backend_choice::cpu_order`): an int4 graph on
    /// our runtime, with ONNX Runtime behind it for a graph whose operators
    /// ours lacks; a float graph on ONNX Runtime.
    #[default]
    Auto,
    /// ONNX Runtime 1.30 (the reference).
    Ort,
    /// Our own interpreter and int4 kernels.
    Own,
}

/// A native engine's runtime and its settings.
#[derive(Debug, Clone)]
pub struct HostOptions {
    pub runtime: RuntimeKind,
    pub threads: usize,
    /// Our runtime's activations (ONNX Runtime ignores it).
    pub precision: Precision,
    /// Our runtime packs a call's branches into one pass (ONNX Runtime
    /// cannot: it runs them one by one either way).
    pub pack: bool,
}

impl Default for HostOptions {
    fn default() -> Self {
        Self {
            runtime: RuntimeKind::Auto,
            threads: NativeOptions::default().intra_threads,
            precision: Precision::Int8,
            pack: true,
        }
    }
}

pub type HostEngine = Engine<AnyRuntime<NativeRuntime>>;

impl ModelDir {
    /// An engine over the runtime `opts` names, its proofs run; under
    /// `Auto`, the first of the rule's candidates that computes the graph,
    /// and `info().runtime_reason` says which and why.
    pub async fn any_engine(&self, opts: &HostOptions) -> Result<HostEngine, EngineError> {
        let assets = self.assets()?;
        let config = ModelConfig::parse(&assets.config_json)?;
        let dims = config.kv_dims();
        // Read once: confined, and whether it is int4 (what `Auto` decides on);
        // the bytes go before a runtime loads the file itself.
        let int4 = crate::onnx_pb::op_types(&self.checked_graph()?)
            .is_ok_and(|ops| ops.iter().any(|o| o == "MatMulNBits"));
        let candidates: Vec<(CpuRuntime, String)> = match opts.runtime {
            RuntimeKind::Ort => {
                vec![(CpuRuntime::OnnxRuntime, "ONNX Runtime was asked for".into())]
            }
            RuntimeKind::Own => vec![(
                CpuRuntime::Ours,
                "readout's own runtime was asked for".into(),
            )],
            RuntimeKind::Auto => cpu_order(Some(int4))
                .into_iter()
                .map(|(r, _)| {
                    let why = match (r, int4) {
                        (CpuRuntime::Ours, _) => {
                            "auto: an int4 graph runs on readout's own runtime"
                        }
                        (CpuRuntime::OnnxRuntime, true) => {
                            "auto: ONNX Runtime runs what ours does not"
                        }
                        (CpuRuntime::OnnxRuntime, false) => {
                            "auto: a float graph runs on ONNX Runtime"
                        }
                    };
                    (r, why.to_string())
                })
                .collect(),
        };
        let last = candidates.len().saturating_sub(1);
        let mut refused: Option<(String, EngineError)> = None;
        for (i, (which, mut reason)) in candidates.into_iter().enumerate() {
            if let Some((first, e)) = refused.take() {
                reason = fell_back(
                    &first,
                    "readout's own runtime",
                    &e.to_string(),
                    "ONNX Runtime",
                );
            }
            let runtime = match which {
                CpuRuntime::OnnxRuntime => NativeRuntime::load(
                    &self.graph,
                    &NativeOptions {
                        intra_threads: opts.threads,
                    },
                    dims,
                )
                .map(AnyRuntime::Onnx)
                .map_err(EngineError::from),
                CpuRuntime::Ours => own::load_file(
                    &self.graph,
                    &OwnOptions {
                        threads: opts.threads,
                        precision: opts.precision,
                        pack: opts.pack,
                    },
                    dims,
                )
                .map(|r| AnyRuntime::Own(Box::new(r)))
                .map_err(EngineError::from),
            };
            match runtime {
                Err(e) if i < last && e.info().code == "graph_unsupported" => {
                    refused = Some((reason, e));
                }
                r => {
                    let mut engine = Engine::new(r?, assets).await?;
                    engine.set_runtime_reason(reason);
                    return Ok(engine);
                }
            }
        }
        // `cpu_order` and the arms above never give an empty list.
        Err(EngineError::Core(CoreError::BackendUnavailable {
            backend: "auto",
            reason: "the choice gave no runtime to try".into(),
        }))
    }
}

/// Opens a model directory and builds a proven engine over the runtime `opts` names.
pub fn open_host_engine(path: &Path, opts: &HostOptions) -> Result<HostEngine, EngineError> {
    pollster::block_on(ModelDir::open(path)?.any_engine(opts))
}

/// `models.json#<id>` → the entry's directory, every file's size and sha256
/// checked first; anything else is taken as a path.
pub fn resolve(arg: &Path) -> Result<PathBuf, EngineError> {
    let s = arg.to_string_lossy();
    match s.split_once(".json#") {
        Some((catalog, id)) => checked_dir(Path::new(&format!("{catalog}.json")), id),
        None => Ok(arg.to_path_buf()),
    }
}

/// The readout defaults a model's catalog entry names, and where they come
/// from; `None` where no entry names one, and the rule applies (the engine's
/// own default, `core::input::mode::DEFAULTS_BY_RULE`), as in the browser. A
/// `models.json#<id>` argument names its entry; a directory or graph file is
/// looked up in a `models.json` one or two folders above it (the
/// repository's own layout, `models.json` beside `models/<id>/`), matched by
/// the entry's graph file.
pub fn entry_readout(arg: &Path) -> Result<Option<(ReadoutChoice, String)>, EngineError> {
    let s = arg.to_string_lossy();
    let entry = match s.split_once(".json#") {
        Some((catalog, id)) => {
            let path = PathBuf::from(format!("{catalog}.json"));
            Some(read_catalog(&path)?.find(id)?.clone())
        }
        None => entry_listing(arg),
    };
    Ok(entry.and_then(|e| Some((e.readout?, defaults_from_entry(&e.id)))))
}

fn read_catalog(path: &Path) -> Result<Catalog, EngineError> {
    let text = std::fs::read_to_string(path).map_err(|e| file_err(path, e.to_string()))?;
    Catalog::parse(&text).map_err(|e| file_err(path, e.to_string()))
}

/// The entry of a `models.json` near `arg` whose graph lives in `arg` (a
/// directory) or is `arg` (a graph file). A catalog that cannot be read is
/// passed over: it only ever supplies defaults here, never files.
fn entry_listing(arg: &Path) -> Option<Entry> {
    let arg = arg.canonicalize().ok()?;
    let dir = if arg.is_dir() {
        arg.clone()
    } else {
        arg.parent()?.to_path_buf()
    };
    for up in dir.ancestors().skip(1).take(2) {
        let path = up.join("models.json");
        let Ok(cat) = read_catalog(&path) else {
            continue;
        };
        let found = cat.models.into_iter().find(|e| {
            e.file("graph")
                .and_then(|g| up.join(&g.url).canonicalize().ok())
                .is_some_and(|g| g == arg || g.parent() == Some(dir.as_path()))
        });
        if found.is_some() {
            return found;
        }
    }
    None
}

/// A proven engine over `arg` (a directory, a graph file or
/// `models.json#<id>`), serving `entry`'s readout defaults (`entry_readout`)
/// where it names some, the rule's otherwise.
pub fn open_model(
    arg: &Path,
    opts: &HostOptions,
    entry: Option<(ReadoutChoice, String)>,
) -> Result<HostEngine, EngineError> {
    let mut engine = open_host_engine(&resolve(arg)?, opts)?;
    if let Some((defaults, from)) = entry {
        engine.set_readout_defaults(defaults, from)?;
    }
    Ok(engine)
}

/// Opens a model directory and builds a proven engine over it.
pub fn open_engine(
    path: &Path,
    opts: &NativeOptions,
) -> Result<Engine<NativeRuntime>, EngineError> {
    pollster::block_on(ModelDir::open(path)?.engine(opts))
}

/// A file's size and sha256, read in 1 MiB pieces.
pub fn sha256_file(path: &Path) -> Result<(u64, String), std::io::Error> {
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut n = 0u64;
    loop {
        let k = f.read(&mut buf)?;
        if k == 0 {
            break;
        }
        h.update(&buf[..k]);
        n += k as u64;
    }
    Ok((n, h.finalize().iter().map(|b| format!("{b:02x}")).collect()))
}

/// Finds `id` in `catalog_path` and checks every file's size and sha256;
/// returns the model directory.
pub fn checked_dir(catalog_path: &Path, id: &str) -> Result<PathBuf, EngineError> {
    let file_err = |p: &Path, m: String| EngineError::ModelFile {
        file: p.display().to_string(),
        message: m,
    };
    let text =
        std::fs::read_to_string(catalog_path).map_err(|e| file_err(catalog_path, e.to_string()))?;
    let cat = Catalog::parse(&text).map_err(|e| file_err(catalog_path, e.to_string()))?;
    // Every file stays in the catalog's folder: natively there is no other
    // origin to allow, so an absolute URL is refused as `../` is.
    cat.check_urls(false)?;
    let e = cat.find(id)?;
    let base = catalog_path.parent().unwrap_or(Path::new("."));
    let mut graph_dir = None;
    for f in &e.files {
        let p = base.join(&f.url);
        let (bytes, sha) = sha256_file(&p)
            .map_err(|err| file_err(&p, format!("missing or unreadable ({err})")))?;
        if bytes != f.bytes {
            return Err(file_err(
                &p,
                format!("is {bytes} bytes; models.json says {}", f.bytes),
            ));
        }
        if sha != f.sha256 {
            return Err(file_err(
                &p,
                format!("sha256 {sha} differs from models.json's {}", f.sha256),
            ));
        }
        if f.role == "graph" {
            graph_dir = p.parent().map(Path::to_path_buf);
        }
    }
    graph_dir.ok_or_else(|| file_err(catalog_path, format!("entry {id} lists no graph")))
}
