//! The one thread policy: how many threads a runtime may be asked for, and
//! how many it gets when nobody asks. The CLI, the bindings and both CPU
//! runtimes decide here; only the core count and whether threads can start
//! at all come from the platform (`crate::platform`).

use crate::core::CoreError;

/// More threads than 4 per core only adds contention, and an unbounded
/// count once started ten thousand threads on a 1.5 s job.
pub const PER_CORE: usize = 4;
/// The most any call may ask for, whatever the core count.
pub const MAX_THREADS: usize = 64;
/// A page's default stops at four: past that the WASM backend's and our
/// pool's threads compete with the page's own work for the same cores.
pub const MAX_PAGE_DEFAULT: usize = 4;

/// Where the threads run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Host {
    /// A native process: every core by default.
    Native,
    /// A browser page: its cores up to four by default.
    Page,
}

/// The default for `cores` cores; 1 where threads cannot start (a page
/// without cross-origin isolation has no SharedArrayBuffer).
pub fn default_threads(host: Host, cores: usize, can_thread: bool) -> usize {
    if !can_thread || cores < 1 {
        return 1;
    }
    match host {
        Host::Native => cores.min(MAX_THREADS),
        Host::Page => cores.min(MAX_PAGE_DEFAULT),
    }
}

/// The most a caller may ask for on `cores` cores.
pub fn max_threads(cores: usize) -> usize {
    (cores.max(1) * PER_CORE).min(MAX_THREADS)
}

/// `given` if it is a whole count from 1 to `max_threads(cores)`; `field`
/// names the option or flag in the refusal.
pub fn check_threads(given: f64, cores: usize, field: &str) -> Result<usize, CoreError> {
    let max = max_threads(cores);
    if given.fract() == 0.0 && given >= 1.0 && given <= max as f64 {
        return Ok(given as usize);
    }
    Err(CoreError::Threads {
        field: field.to_string(),
        given,
        max,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_bounds() {
        assert_eq!(default_threads(Host::Page, 16, true), 4);
        assert_eq!(default_threads(Host::Page, 2, true), 2);
        assert_eq!(default_threads(Host::Page, 16, false), 1);
        assert_eq!(default_threads(Host::Native, 16, true), 16);
        assert_eq!(default_threads(Host::Native, 0, true), 1);
        assert_eq!(max_threads(2), 8);
        assert_eq!(max_threads(100), MAX_THREADS);
        assert_eq!(check_threads(8.0, 2, "threads").unwrap(), 8);
        for bad in [0.0, 9.0, 1.5, -1.0, f64::NAN] {
            let e = check_threads(bad, 2, "threads").unwrap_err();
            let info = e.info();
            assert_eq!(
                (info.code, info.field.as_deref(), info.limit),
                ("invalid_option", Some("threads"), Some(8)),
                "{bad}"
            );
        }
    }
}
