//! What the engine asks of the platform it runs on, in one place: the one
//! clock every layer times with, the machine's core count for the thread
//! policy (`core::input::thread_policy`), and (in the browser) the JS interop
//! helpers.

#[cfg(target_arch = "wasm32")]
pub mod js;

/// Milliseconds since the clock was made: `Instant` natively; in the browser
/// `performance.now()` (sub-millisecond where the page is cross-origin
/// isolated), or `Date.now()` where a global has no `performance`.
#[derive(Debug, Clone)]
pub struct Clock {
    #[cfg(not(target_arch = "wasm32"))]
    origin: std::time::Instant,
    #[cfg(target_arch = "wasm32")]
    origin: f64,
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock {
    pub fn new() -> Self {
        #[cfg(not(target_arch = "wasm32"))]
        {
            Self {
                origin: std::time::Instant::now(),
            }
        }
        #[cfg(target_arch = "wasm32")]
        {
            Self { origin: page_now() }
        }
    }

    pub fn ms(&self) -> f64 {
        #[cfg(not(target_arch = "wasm32"))]
        {
            self.origin.elapsed().as_secs_f64() * 1e3
        }
        #[cfg(target_arch = "wasm32")]
        {
            page_now() - self.origin
        }
    }
}

#[cfg(target_arch = "wasm32")]
fn page_now() -> f64 {
    use wasm_bindgen::JsCast;
    let perf = js::get(&js_sys::global(), "performance");
    js::get(&perf, "now")
        .dyn_into::<js_sys::Function>()
        .ok()
        .and_then(|f| f.call0(&perf).ok())
        .and_then(|v| v.as_f64())
        .unwrap_or_else(js_sys::Date::now)
}

/// The cores this process may use: natively what the OS grants it; in the
/// browser `navigator.hardwareConcurrency` (1 where the global has none).
pub fn cores() -> usize {
    #[cfg(not(target_arch = "wasm32"))]
    {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    }
    #[cfg(target_arch = "wasm32")]
    {
        let n = js::get(
            &js::get(&js_sys::global(), "navigator"),
            "hardwareConcurrency",
        )
        .as_f64()
        .unwrap_or(1.0);
        if n.is_finite() && n >= 1.0 {
            n as usize
        } else {
            1
        }
    }
}

/// Whether this page can share memory with workers (threads): natively
/// always.
pub fn can_thread() -> bool {
    #[cfg(not(target_arch = "wasm32"))]
    {
        true
    }
    #[cfg(target_arch = "wasm32")]
    {
        js::get(&js_sys::global(), "crossOriginIsolated").is_truthy()
    }
}
