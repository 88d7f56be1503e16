//! readout's native engine as a Python extension (`readout._readout`).
//!
//! This layer converts and does not decide: JSON text in (what `json.dumps`
//! makes of the caller's dicts), the engine's own serde output out (the
//! fields the CLI's JSON has), and every refusal as one exception carrying
//! the engine's error info. The Python package (`readout/__init__.py`)
//! turns both into dicts and `ReadoutError`. The GIL is released while the
//! engine loads or computes, so other Python threads run meanwhile.

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

use pyo3::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use readout::core::input::criteria::{check_criterion, check_fields};
use readout::model_dir::{entry_readout, open_model};
use readout::{
    Criterion, ErrorInfo, HostEngine, HostOptions, ReadoutRequest, RuntimeKind, StateId, StateSpec,
};

pyo3::create_exception!(
    _readout,
    NativeError,
    pyo3::exceptions::PyException,
    "A refusal: its argument is JSON {message, code, field, limit}."
);

/// A refusal as the Python side reads it.
#[derive(Serialize)]
struct Refusal {
    message: String,
    #[serde(flatten)]
    info: ErrorInfo,
}

fn refusal(message: impl std::fmt::Display, info: ErrorInfo) -> Refusal {
    Refusal {
        message: message.to_string(),
        info,
    }
}

fn raise(r: Refusal) -> PyErr {
    NativeError::new_err(serde_json::to_string(&r).unwrap_or_else(|e| e.to_string()))
}

fn engine_err(e: readout::EngineError) -> Refusal {
    let info = e.info();
    refusal(e, info)
}

fn invalid(what: &str, e: impl std::fmt::Display) -> Refusal {
    refusal(
        format!("{what}: {e}"),
        ErrorInfo::new("invalid_input").field(what),
    )
}

/// A call's options parsed into the engine's one request type; a field
/// left out is the engine's to decide (`ReadoutRequest::resolve`), as the
/// CLI's flags and the browser's options are.
fn request_from(json: &str) -> Result<ReadoutRequest, Refusal> {
    serde_json::from_str(json).map_err(|e| {
        refusal(
            format!("options: {e}"),
            ErrorInfo::new("invalid_option").field("options"),
        )
    })
}

/// One state from its JSON value: field names checked (a typo is named),
/// then typed, then validated, as the CLI and the browser do.
fn state_from(value: Value) -> Result<StateSpec, Refusal> {
    check_fields(&value).map_err(|e| {
        let info = e.info();
        refusal(e, info)
    })?;
    let state: StateSpec = serde_json::from_value(value).map_err(|e| invalid("state", e))?;
    state.validate().map_err(|e| {
        let info = e.info();
        refusal(e, info)
    })?;
    Ok(state)
}

fn criteria_from(json: &str) -> Result<Vec<Criterion>, Refusal> {
    let value: Value = serde_json::from_str(json).map_err(|e| invalid("criteria", e))?;
    let list = value
        .as_array()
        .ok_or_else(|| invalid("criteria", "must be a list of criteria"))?;
    for (i, c) in list.iter().enumerate() {
        check_criterion(c, &format!("criteria[{i}]")).map_err(|e| {
            let info = e.info();
            refusal(e, info)
        })?;
    }
    serde_json::from_value(value).map_err(|e| invalid("criteria", e))
}

/// One state's outcome in `score_many`: its decisions, or why it was refused.
#[derive(Serialize)]
#[serde(untagged)]
enum Outcome {
    Scored {
        state: String,
        decisions: Vec<readout::Decision>,
    },
    Refused {
        state: Option<String>,
        error: Refusal,
    },
}

#[pyclass(module = "readout._readout", frozen)]
struct NativeEngine {
    engine: Mutex<HostEngine>,
}

impl NativeEngine {
    /// A call that panicked inside the engine leaves the lock poisoned; the
    /// engine's own state is still whole (every call restores it or fails),
    /// so later calls go on.
    fn lock(&self) -> MutexGuard<'_, HostEngine> {
        self.engine.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn runtime_kind(runtime: &str) -> Result<RuntimeKind, Refusal> {
    match runtime {
        "auto" => Ok(RuntimeKind::Auto),
        "ort" => Ok(RuntimeKind::Ort),
        "own" => Ok(RuntimeKind::Own),
        other => Err(refusal(
            format!("runtime {other:?}: \"auto\" (an int4 graph on readout's own kernels, a float graph on ONNX Runtime), \"ort\" (ONNX Runtime) or \"own\" (readout's own kernels)"),
            ErrorInfo::new("invalid_option").field("runtime"),
        )),
    }
}

#[pymethods]
impl NativeEngine {
    /// Loads `model` (a model folder, a graph file, or `models.json#id`)
    /// and runs the load-time proofs.
    #[new]
    #[pyo3(signature = (model, runtime = "auto", threads = None))]
    fn new(py: Python<'_>, model: PathBuf, runtime: &str, threads: Option<f64>) -> PyResult<Self> {
        let mut opts = HostOptions {
            runtime: runtime_kind(runtime).map_err(raise)?,
            ..HostOptions::default()
        };
        if let Some(t) = threads {
            opts.threads = readout::core::input::thread_policy::check_threads(
                t,
                readout::platform::cores(),
                "threads",
            )
            .map_err(|e| {
                let info = e.info();
                raise(refusal(e, info))
            })?;
        }
        let engine = py
            .detach(|| {
                let entry = entry_readout(&model)?;
                open_model(&model, &opts, entry)
            })
            .map_err(|e| raise(engine_err(e)))?;
        Ok(Self {
            engine: Mutex::new(engine),
        })
    }

    /// `engine.info()` with the readout defaults and where they came from,
    /// as JSON.
    fn info(&self) -> PyResult<String> {
        #[derive(Serialize)]
        struct Info {
            #[serde(flatten)]
            engine: readout::EngineInfo,
            readout_defaults: readout::ReadoutChoice,
            readout_defaults_from: String,
        }
        let e = self.lock();
        serde_json::to_string(&Info {
            engine: e.info(),
            readout_defaults: e.readout_defaults(),
            readout_defaults_from: e.readout_defaults_from().to_string(),
        })
        .map_err(|e| raise(invalid("info", e)))
    }

    /// Prefills one state (JSON); returns its handle.
    #[pyo3(signature = (state, options = "{}"))]
    fn prefill(&self, py: Python<'_>, state: &str, options: &str) -> PyResult<u64> {
        let value: Value = serde_json::from_str(state).map_err(|e| raise(invalid("state", e)))?;
        let spec = state_from(value).map_err(raise)?;
        let req = request_from(options).map_err(raise)?;
        py.detach(|| {
            let mut e = self.lock();
            pollster::block_on(e.prefill_with(&spec, &req)).map(|id| id.0)
        })
        .map_err(|e| raise(engine_err(e)))
    }

    /// Scores `criteria` (JSON list) against state `state`; the decisions as JSON.
    #[pyo3(signature = (state, criteria, options = "{}"))]
    fn score(&self, py: Python<'_>, state: u64, criteria: &str, options: &str) -> PyResult<String> {
        let criteria = criteria_from(criteria).map_err(raise)?;
        let req = request_from(options).map_err(raise)?;
        let decisions = py
            .detach(|| {
                let mut e = self.lock();
                pollster::block_on(e.score_all(StateId(state), &criteria, &req))
            })
            .map_err(|e| raise(engine_err(e)))?;
        serde_json::to_string(&decisions).map_err(|e| raise(invalid("decisions", e)))
    }

    /// Frees state `state`'s cache.
    fn dispose(&self, state: u64) -> PyResult<()> {
        self.lock()
            .dispose(StateId(state))
            .map_err(|e| raise(engine_err(e)))
    }

    /// Every state of a JSON list in turn: prefilled, scored on its own
    /// criteria, disposed. A state that is refused (malformed, too long)
    /// gets `{state, error}` in its place and the rest go on.
    #[pyo3(signature = (states, options = "{}"))]
    fn score_many(&self, py: Python<'_>, states: &str, options: &str) -> PyResult<String> {
        let values: Vec<Value> =
            serde_json::from_str(states).map_err(|e| raise(invalid("states", e)))?;
        let req = request_from(options).map_err(raise)?;
        let out = py.detach(|| {
            let mut e = self.lock();
            values
                .into_iter()
                .map(|v| {
                    let id = v.get("id").and_then(Value::as_str).map(str::to_string);
                    let spec = match state_from(v) {
                        Ok(s) => s,
                        Err(error) => return Outcome::Refused { state: id, error },
                    };
                    let scored = pollster::block_on(async {
                        let sid = e.prefill_with(&spec, &req).await?;
                        let d = e.score_all(sid, &spec.criteria, &req).await;
                        e.dispose(sid)?;
                        d
                    });
                    match scored {
                        Ok(decisions) => Outcome::Scored {
                            state: spec.id,
                            decisions,
                        },
                        Err(err) => Outcome::Refused {
                            state: id,
                            error: engine_err(err),
                        },
                    }
                })
                .collect::<Vec<_>>()
        });
        serde_json::to_string(&out).map_err(|e| raise(invalid("decisions", e)))
    }

    /// States alive on this engine (each holds its cache until disposed).
    fn live_states(&self) -> usize {
        self.lock().live_states()
    }
}

/// Readout options (JSON) parsed as every call parses them, with no model:
/// a bulk job refuses a bad value before it starts a worker.
#[pyfunction]
fn check_options(options: &str) -> PyResult<()> {
    request_from(options).map(|_| ()).map_err(raise)
}

/// One row of an evaluation: a decision and the gold answer it is judged
/// against (the rows `readout evaluate` writes, and `readout.ray` too).
#[derive(Deserialize)]
struct Judged {
    family: String,
    gold: Option<String>,
    decision: readout::Decision,
}

/// `readout evaluate`'s metrics over rows (JSON list of {family, gold,
/// decision}) in their given order: `{report, calibration}`. Rows without
/// a gold answer are left out, as the CLI leaves them out; the
/// calibration's first half is the first half of this order, so the same
/// rows in the fixture's order give the CLI's numbers.
#[pyfunction]
fn report(py: Python<'_>, rows: &str) -> PyResult<String> {
    use readout::core::eval::metrics::{calibrate, report, Scored};
    let rows: Vec<Judged> = serde_json::from_str(rows).map_err(|e| raise(invalid("rows", e)))?;
    let mut scored = Vec::with_capacity(rows.len());
    for (i, r) in rows.into_iter().enumerate() {
        let Some(gold) = r.gold else { continue };
        let probs = r.decision.p();
        let Some(at) = r.decision.probs.iter().position(|o| o.id == gold) else {
            return Err(raise(refusal(
                format!(
                    "rows[{i}].gold: {gold:?} is none of decision {:?}'s options",
                    r.decision.id
                ),
                ErrorInfo::new("invalid_input").field(format!("rows[{i}].gold")),
            )));
        };
        scored.push(Scored {
            family: r.family,
            gold: at,
            gold_class: gold,
            probs,
            order_unstable: r.decision.order_unstable.unwrap_or(false),
        });
    }
    #[derive(Serialize)]
    struct Out {
        report: readout::core::eval::metrics::Report,
        calibration: Option<readout::core::eval::metrics::Calibration>,
        scored: usize,
    }
    let out = py.detach(|| Out {
        report: report(&scored),
        calibration: calibrate(&scored),
        scored: scored.len(),
    });
    serde_json::to_string(&out).map_err(|e| raise(invalid("report", e)))
}

#[pymodule]
fn _readout(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NativeEngine>()?;
    m.add_function(wrap_pyfunction!(report, m)?)?;
    m.add_function(wrap_pyfunction!(check_options, m)?)?;
    m.add("NativeError", m.py().get_type::<NativeError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
