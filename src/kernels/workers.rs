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
//!
//! A worker that stops without trapping (terminated, or hung inside a
//! chunk) leaves nothing to catch. So the caller also gives up on a job
//! whose done count has not moved for [`STALL_FLOOR_MS`] plus
//! [`STALL_FACTOR`] times what its own chunks took: each worker announces
//! the job it claims a chunk of before claiming, so the caller knows which
//! workers hold the missing chunks. It marks them lost, has the bindings
//! terminate them, and returns `Ran::Lost`. A terminated worker writes
//! nothing more. A merely hung one is stopped once the page thread yields
//! (Chromium carries a termination out from the page's event loop), so one
//! that woke inside that window could still write the caller's buffers:
//! the deadline, seconds beyond any real chunk, is what makes that moot.
//! The done count carries its job's epoch, so a late chunk of an abandoned
//! job can never count towards the next one. When a job stalls, every chunk
//! has been claimed (the caller claims until none is left), so no worker is
//! between announcing and claiming: only the holders are given up on.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering::SeqCst};

/// The claim word's chunk half while fields are being written.
const CLOSED: u64 = u32::MAX as u64;
/// Spins before a worker sleeps: the gap between two kernel calls of one
/// forward is shorter than a wake-up, so a worker stays hot across it.
const SPINS: u32 = 1 << 16;

/// A job with no chunk finished for this long, beyond [`STALL_FACTOR`] times
/// the caller's own share, has lost a worker: the longest chunk of a real
/// forward (a 256-token prefill's head product on one of 2 threads) is
/// tens of milliseconds here, so this only ever fires on a worker that
/// stopped.
pub const STALL_FLOOR_MS: f64 = 5_000.0;
/// The caller's own chunks are as long as any worker's, so a worker's last
/// chunk that takes this many times their whole time is not coming.
pub const STALL_FACTOR: f64 = 20.0;
/// Workers whose chunks are tracked (the thread policy's ceiling).
const TRACKED: usize = crate::core::input::thread_policy::MAX_THREADS;

static EPOCH: AtomicU32 = AtomicU32::new(0);
static CLAIM: AtomicU64 = AtomicU64::new(CLOSED);
/// `epoch << 32 | chunks done`: a chunk counts only towards its own job.
static DONE: AtomicU64 = AtomicU64::new(0);
/// Per worker, `epoch + 1` of the job it is claiming or running a chunk of
/// (0: none), written before the claim so a stalled job's caller sees it.
static HOLDING: [AtomicU64; TRACKED] = [const { AtomicU64::new(0) }; TRACKED];
/// Workers given up on by a stalled job: they claim nothing more.
static LOST: [AtomicU32; TRACKED] = [const { AtomicU32::new(0) }; TRACKED];
/// What the bindings do with a lost worker (terminate it), as a `fn(usize)`.
static ON_LOST: AtomicUsize = AtomicUsize::new(0);
/// The page's clock in milliseconds, as a `fn() -> f64`, from the bindings
/// (kernels know no platform); without it a job waits with no deadline.
static NOW_MS: AtomicUsize = AtomicUsize::new(0);
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
    /// The epoch of the chunk this thread is running, if any (read by
    /// `worker_died` on a worker whose chunk trapped).
    static IN_CHUNK: std::cell::Cell<Option<u32>> = const { std::cell::Cell::new(None) };
    /// Whether this thread is a kernel worker (not the caller).
    static WORKER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// A chunk runner: `ctx` is the caller's job, `index` the chunk.
pub type Runner = unsafe fn(ctx: usize, index: usize);

/// Workers that reached their loop.
pub fn started() -> usize {
    STARTED.load(SeqCst)
}

/// Workers that reached their loop and later trapped, or were lost to a
/// stalled job.
pub fn died() -> usize {
    DIED.load(SeqCst)
}

/// Gives the pool the page's clock (`now_ms`, milliseconds), which the
/// stall deadline reads, and what is done with a worker a stalled job gave
/// up on (`on_lost`: the bindings terminate it). Set before the first job.
pub fn set_hooks(now_ms: fn() -> f64, on_lost: fn(usize)) {
    NOW_MS.store(now_ms as usize, SeqCst);
    ON_LOST.store(on_lost as usize, SeqCst);
}

/// The page's clock, where the bindings gave one.
fn clock() -> Option<fn() -> f64> {
    let f = NOW_MS.load(SeqCst);
    // SAFETY: NOW_MS only ever holds a `fn() -> f64` (`set_hooks`).
    (f != 0).then(|| unsafe { std::mem::transmute::<usize, fn() -> f64>(f) })
}

/// Counts one chunk of job `epoch` done, unless a newer job has started.
fn count_done(epoch: u32) {
    let mut w = DONE.load(SeqCst);
    while (w >> 32) as u32 == epoch {
        match DONE.compare_exchange(w, w + 1, SeqCst, SeqCst) {
            Ok(_) => return,
            Err(now) => w = now,
        }
    }
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
            help(Some(index));
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
    if let Some(epoch) = IN_CHUNK.with(|c| c.get()) {
        if EPOCH.load(SeqCst) == epoch {
            BROKEN.store(1, SeqCst);
        }
        count_done(epoch);
    }
}

/// Claims and runs chunks of the current job until none is left; `worker`
/// is the kernel worker's index (`None` on the caller).
fn help(worker: Option<usize>) {
    let slot = worker.and_then(|i| HOLDING.get(i).zip(LOST.get(i)));
    loop {
        if slot.is_some_and(|(_, lost)| lost.load(SeqCst) != 0) {
            return;
        }
        let word = CLAIM.load(SeqCst);
        let next = word & CLOSED;
        if next == CLOSED {
            return;
        }
        let epoch = (word >> 32) as u32;
        // Read after the word: if the job changes before the swap below,
        // the word's epoch changes with it and the swap fails.
        let count = COUNT.load(SeqCst);
        let run = RUN.load(SeqCst);
        let ctx = CTX.load(SeqCst);
        if next as usize >= count {
            return;
        }
        // Announced before the claim, so a caller giving up on a stalled
        // job cannot miss a chunk this worker is about to hold.
        if let Some((holding, _)) = slot {
            holding.store(u64::from(epoch) + 1, SeqCst);
        }
        if CLAIM
            .compare_exchange(word, word + 1, SeqCst, SeqCst)
            .is_ok()
        {
            // SAFETY: RUN holds a `Runner` stored by `run` for this epoch,
            // and the job's caller waits for this chunk before returning
            // (or, after the stall deadline, gives up on it: module doc).
            IN_CHUNK.with(|c| c.set(Some(epoch)));
            unsafe {
                let f: Runner = std::mem::transmute::<usize, Runner>(run);
                f(ctx, next as usize);
            }
            IN_CHUNK.with(|c| c.set(None));
            count_done(epoch);
        }
        if let Some((holding, _)) = slot {
            holding.store(0, SeqCst);
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
    /// No chunk finished within the stall deadline: the workers holding the
    /// missing ones were marked lost and handed to the bindings to
    /// terminate. `ms` is how long the job waited without progress.
    Lost {
        workers: usize,
        ms: u64,
    },
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
    DONE.store(base, SeqCst);
    CLAIM.store(base, SeqCst);
    EPOCH.store(epoch, SeqCst);
    // SAFETY: EPOCH is a live atomic in the shared memory.
    unsafe {
        ::core::arch::wasm32::memory_atomic_notify(EPOCH.as_ptr().cast(), workers as u32);
    }
    let now = clock();
    let t0 = now.map_or(0.0, |f| f());
    help(None);
    let since_start = |f: fn() -> f64| f() - t0;
    let deadline = STALL_FLOOR_MS + STALL_FACTOR * now.map_or(0.0, since_start);
    let done = || (DONE.load(SeqCst) & u64::from(u32::MAX)) as usize;
    let (mut seen, mut since, mut spins) = (done(), now.map_or(0.0, since_start), 0u32);
    let mut stalled = None;
    while done() < count {
        std::hint::spin_loop();
        spins = spins.wrapping_add(1);
        // The clock is a call out to the page: looked at now and then.
        let Some(f) = now.filter(|_| spins % 1024 == 0) else {
            continue;
        };
        let (t, d) = (since_start(f), done());
        if d != seen {
            (seen, since) = (d, t);
        } else if t - since > deadline {
            stalled = Some((t - since) as u64);
            break;
        }
    }
    CLAIM.store(base | CLOSED, SeqCst);
    if let Some(ms) = stalled {
        let workers = give_up(epoch);
        BROKEN.store(0, SeqCst);
        BUSY.store(0, SeqCst);
        return Ran::Lost { workers, ms };
    }
    BUSY.store(0, SeqCst);
    if BROKEN.swap(0, SeqCst) != 0 {
        return Ran::Broken;
    }
    Ran::Done
}

/// Marks the workers holding a chunk of job `epoch` lost and hands each to
/// the bindings (which terminate it); returns how many there were.
fn give_up(epoch: u32) -> usize {
    let hook = ON_LOST.load(SeqCst);
    let mut n = 0;
    for (i, (holding, lost)) in HOLDING.iter().zip(&LOST).enumerate() {
        if holding.load(SeqCst) == u64::from(epoch) + 1 && lost.swap(1, SeqCst) == 0 {
            n += 1;
            DIED.fetch_add(1, SeqCst);
            if hook != 0 {
                // SAFETY: ON_LOST only ever holds a `fn(usize)` (`on_lost`).
                let f: fn(usize) = unsafe { std::mem::transmute::<usize, fn(usize)>(hook) };
                f(i);
            }
        }
    }
    n
}
