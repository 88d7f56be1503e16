//! The threaded browser build's worker pool (wasm32 with `atomics`): Web
//! Workers that share this module's memory, each parked in `worker_loop`,
//! and a fork-join `run` the calling thread takes part in.
//!
//! Why not rayon: the browser's main thread may not block
//! (`memory.atomic.wait` traps there), and rayon's `install` blocks the
//! caller. Here the caller works through the chunks itself and then spins
//! until the workers' last chunks are done; only workers sleep.
//!
//! One job at a time, published in atomics: its function and context, the
//! chunk count, and a claim word `epoch << 32 | next chunk`. A worker claims
//! a chunk by compare-and-swap on the whole word, so a worker that read an
//! older job's fields can never claim a chunk of a newer one (the epoch
//! differs), and a job's fields are written only while its word is closed.
//!
//! A worker whose chunk panics traps (the build aborts on panic) and never
//! counts its chunk done; its JS catches the trap and calls `worker_died`,
//! which counts the chunk and marks the job broken, so the caller stops
//! waiting once every other chunk is done and gets `Ran::Broken` (the call
//! fails with an error), rather than spinning on the page's main thread for
//! ever. The dead worker takes no further chunks; the rest carry on.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering::SeqCst};

/// The claim word's chunk half while fields are being written.
const CLOSED: u64 = u32::MAX as u64;
/// Spins before a worker sleeps: the gap between two kernel calls of one
/// forward is shorter than a wake-up, so a worker stays hot across it.
const SPINS: u32 = 1 << 16;

static EPOCH: AtomicU32 = AtomicU32::new(0);
static CLAIM: AtomicU64 = AtomicU64::new(CLOSED);
static DONE: AtomicUsize = AtomicUsize::new(0);
static COUNT: AtomicUsize = AtomicUsize::new(0);
static RUN: AtomicUsize = AtomicUsize::new(0);
static CTX: AtomicUsize = AtomicUsize::new(0);
/// Workers with an index below this take part in the current job.
static LIMIT: AtomicUsize = AtomicUsize::new(0);
static BUSY: AtomicU32 = AtomicU32::new(0);
static STARTED: AtomicUsize = AtomicUsize::new(0);
/// Set when a worker died inside one of the current job's chunks.
static BROKEN: AtomicU32 = AtomicU32::new(0);
/// Workers whose loop trapped: they take no further chunks.
static DIED: AtomicUsize = AtomicUsize::new(0);

std::thread_local! {
    /// Whether this thread is running a claimed chunk (read by
    /// `worker_died` on a worker whose chunk trapped).
    static IN_CHUNK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// Whether this thread is a kernel worker (not the caller).
    static WORKER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// A chunk runner: `ctx` is the caller's job, `index` the chunk.
pub type Runner = unsafe fn(ctx: usize, index: usize);

/// Workers that reached their loop.
pub fn started() -> usize {
    STARTED.load(SeqCst)
}

/// Workers that reached their loop and later trapped.
pub fn died() -> usize {
    DIED.load(SeqCst)
}

/// A worker's whole life: it never returns (the worker is terminated with
/// its page).
pub fn worker_loop(index: usize) -> ! {
    WORKER.with(|w| w.set(true));
    STARTED.fetch_add(1, SeqCst);
    let mut seen = EPOCH.load(SeqCst);
    loop {
        let mut spins = 0;
        let mut now = EPOCH.load(SeqCst);
        while now == seen {
            if spins < SPINS {
                std::hint::spin_loop();
                spins += 1;
            } else {
                // SAFETY: EPOCH is a live, aligned i32-sized atomic in the
                // shared memory; the wait returns when it changes or is
                // notified.
                unsafe {
                    ::core::arch::wasm32::memory_atomic_wait32(
                        EPOCH.as_ptr().cast(),
                        seen as i32,
                        -1,
                    );
                }
            }
            now = EPOCH.load(SeqCst);
        }
        seen = now;
        if index < LIMIT.load(SeqCst) {
            help();
        }
    }
}

/// Whether the calling thread is a kernel worker.
pub fn on_worker() -> bool {
    WORKER.with(|w| w.get())
}

/// Called on a worker whose loop trapped (from its JS, after the trap): if
/// it died inside a chunk, that chunk is counted so the caller stops
/// waiting, and the job is marked broken. Its other state is not touched:
/// after a trap this thread's Rust state is not to be trusted.
pub fn worker_died() {
    DIED.fetch_add(1, SeqCst);
    if IN_CHUNK.with(|c| c.get()) {
        BROKEN.store(1, SeqCst);
        DONE.fetch_add(1, SeqCst);
    }
}

/// Claims and runs chunks of the current job until none is left.
fn help() {
    loop {
        let word = CLAIM.load(SeqCst);
        let next = word & CLOSED;
        if next == CLOSED {
            return;
        }
        // Read after the word: if the job changes before the swap below,
        // the word's epoch changes with it and the swap fails.
        let count = COUNT.load(SeqCst);
        let run = RUN.load(SeqCst);
        let ctx = CTX.load(SeqCst);
        if next as usize >= count {
            return;
        }
        if CLAIM
            .compare_exchange(word, word + 1, SeqCst, SeqCst)
            .is_ok()
        {
            // SAFETY: RUN holds a `Runner` stored by `run` for this epoch,
            // and the job's caller waits for this chunk before returning.
            IN_CHUNK.with(|c| c.set(true));
            unsafe {
                let f: Runner = std::mem::transmute::<usize, Runner>(run);
                f(ctx, next as usize);
            }
            IN_CHUNK.with(|c| c.set(false));
            DONE.fetch_add(1, SeqCst);
        }
    }
}

/// How a job ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ran {
    Done,
    /// Another job is in flight (a chunk that forks again): run serially.
    Busy,
    /// A worker died inside a chunk; every other chunk is done, so nothing
    /// still writes the caller's data, but the result is incomplete.
    Broken,
}

/// Runs chunks `0..count` of `ctx` on this thread and up to `workers`
/// workers; returns when all are done (or accounted for).
///
/// # Safety
/// `runner(ctx, i)` must be sound to call from any thread for each `i` in
/// `0..count`, once each, concurrently.
pub unsafe fn run(count: usize, workers: usize, runner: Runner, ctx: usize) -> Ran {
    if BUSY.swap(1, SeqCst) == 1 {
        return Ran::Busy;
    }
    let epoch = EPOCH.load(SeqCst).wrapping_add(1);
    let base = u64::from(epoch) << 32;
    CLAIM.store(base | CLOSED, SeqCst);
    RUN.store(runner as usize, SeqCst);
    CTX.store(ctx, SeqCst);
    COUNT.store(count, SeqCst);
    LIMIT.store(workers, SeqCst);
    DONE.store(0, SeqCst);
    CLAIM.store(base, SeqCst);
    EPOCH.store(epoch, SeqCst);
    // SAFETY: EPOCH is a live atomic in the shared memory.
    unsafe {
        ::core::arch::wasm32::memory_atomic_notify(EPOCH.as_ptr().cast(), workers as u32);
    }
    help();
    while DONE.load(SeqCst) < count {
        std::hint::spin_loop();
    }
    CLAIM.store(base | CLOSED, SeqCst);
    BUSY.store(0, SeqCst);
    if BROKEN.swap(0, SeqCst) != 0 {
        return Ran::Broken;
    }
    Ran::Done
}
