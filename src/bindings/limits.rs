//! The limits and defaults the pages need, exported from the crate that
//! enforces them so no page re-declares a number.

use serde::Serialize;
use wasm_bindgen::prelude::*;

use crate::core::eval::logit_cost::{PREFIX_TOKENS, SUFFIX_LENGTHS};
use crate::core::input::criteria::{MAX_CLOZE_OPTIONS, MAX_OPTIONS, MIN_OPTIONS};
use crate::core::input::thread_policy::{self, Host};
use crate::core::text::prompt::LETTERS;

#[wasm_bindgen(typescript_custom_section)]
const LIMITS_TS: &str = r#"
/** What `limits()` returns: the engine's own limits and the benchmark's defaults. */
export interface Limits {
  /** Answer letters, in display order. */
  letters: string;
  minOptions: number;
  /** Most options per criterion, by readout mode. */
  maxOptions: { letters: number; cloze: number };
  /** The benchmark's fixed prefix and suffix lengths (shared with `readout sweep`). */
  sweep: { prefixTokens: number; suffixLengths: number[] };
}
"#;

#[derive(Serialize)]
struct MaxOptions {
    letters: usize,
    cloze: usize,
}

#[derive(Serialize)]
struct Sweep {
    prefix_tokens: usize,
    suffix_lengths: Vec<usize>,
}

#[derive(Serialize)]
struct Limits {
    letters: &'static str,
    min_options: usize,
    max_options: MaxOptions,
    sweep: Sweep,
}

/// The engine's limits and the benchmark's defaults (see `Limits`).
#[wasm_bindgen(unchecked_return_type = "Limits")]
pub fn limits() -> Result<JsValue, JsValue> {
    super::to_js(&Limits {
        letters: LETTERS,
        min_options: MIN_OPTIONS,
        max_options: MaxOptions {
            letters: MAX_OPTIONS,
            cloze: MAX_CLOZE_OPTIONS,
        },
        sweep: Sweep {
            prefix_tokens: PREFIX_TOKENS,
            suffix_lengths: SUFFIX_LENGTHS.to_vec(),
        },
    })
}

/// The WASM backend's (and the threaded build's) thread count for a page
/// with `hardwareConcurrency` cores: the thread policy's page default
/// (`core::input::thread_policy`), every core up to four, one without
/// cross-origin isolation.
#[wasm_bindgen(js_name = defaultThreads)]
pub fn default_threads(
    #[wasm_bindgen(js_name = hardwareConcurrency)] cores: f64,
    #[wasm_bindgen(js_name = crossOriginIsolated)] cross_origin_isolated: bool,
) -> u32 {
    let cores = if cores.is_finite() && cores >= 1.0 {
        cores as usize
    } else {
        0
    };
    thread_policy::default_threads(Host::Page, cores, cross_origin_isolated) as u32
}
