//! The threaded build's kernel workers (wasm32 with `atomics`): started
//! once per page, before the first cpu-backend engine that wants them, and
//! kept for the page's life (an engine's pool is a count of them, not an
//! owner). `workers.js` spawns each as a module Web Worker that loads this
//! same package with the page's module and memory and calls `__readoutWorker`.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

use super::error::LoadError;
use crate::kernels::workers;
use crate::platform::js::JsFailure;

#[wasm_bindgen(module = "/js/workers.js")]
extern "C" {
    #[wasm_bindgen(js_name = startWorkers, catch)]
    fn start_workers(
        module: &JsValue,
        memory: &JsValue,
        first: u32,
        count: u32,
    ) -> Result<js_sys::Promise, JsValue>;

    /// Terminates kernel worker `index` if this thread spawned it.
    #[wasm_bindgen(js_name = terminateWorker)]
    fn terminate_worker(index: u32) -> bool;
}

/// A worker a stalled job gave up on is terminated at once, before the
/// job's caller returns and frees what the worker's chunk writes.
fn terminate(index: usize) {
    let _ = terminate_worker(index as u32);
}

/// Workers asked for so far (started or starting): a second load while the
/// first's workers start asks only for the rest.
static SPAWNED: AtomicUsize = AtomicUsize::new(0);

/// A kernel worker's entry (workers.js calls it); it never returns.
#[doc(hidden)]
#[wasm_bindgen(js_name = __readoutWorker)]
pub fn worker(index: u32) {
    workers::worker_loop(index as usize)
}

/// A kernel worker's JS calls this after its loop trapped (a panicking
/// chunk), so the job's caller stops waiting for that chunk.
#[doc(hidden)]
#[wasm_bindgen(js_name = __readoutWorkerDied)]
pub fn worker_died() {
    workers::worker_died()
}

/// Makes `threads - 1` workers run, starting the missing ones.
pub async fn ensure(threads: usize) -> Result<(), LoadError> {
    let want = threads.saturating_sub(1);
    let have = SPAWNED.load(SeqCst);
    if want <= have {
        return Ok(());
    }
    SPAWNED.store(want, SeqCst);
    workers::set_hooks(js_sys::Date::now, terminate);
    // On failure the count falls back to the workers that did start, so a
    // later load tries again for the rest instead of trusting this one.
    let failed = |e: JsValue| {
        SPAWNED.store(workers::started(), SeqCst);
        LoadError::Workers {
            asked: threads,
            started: workers::started(),
            failure: JsFailure::from_js(&e),
        }
    };
    let promise = start_workers(
        &wasm_bindgen::module(),
        &wasm_bindgen::memory(),
        have as u32,
        (want - have) as u32,
    )
    .map_err(failed)?;
    JsFuture::from(promise).await.map_err(failed)?;
    // Each worker reports in just before its loop; wait for the count so the
    // engine's pool sees them (a few microseconds at most).
    let t0 = js_sys::Date::now();
    while workers::started() < want {
        if js_sys::Date::now() - t0 > 5_000.0 {
            return Err(failed(JsValue::from_str(
                "a worker reported ready but never entered its loop",
            )));
        }
        std::hint::spin_loop();
    }
    Ok(())
}
