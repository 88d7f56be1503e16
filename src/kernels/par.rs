//! Work splitting. Natively a rayon pool of the runtime's own size (so a
//! benchmark's "2 threads" is 2, whatever the machine). On wasm32 the
//! threaded build (`atomics`) splits over the page's Web Workers
//! (`workers.rs`); the single-thread build runs the work on the caller.

use super::{KernelError, OpError};

pub struct Pool {
    threads: usize,
    /// Why `threads` is what it is (the browser builds report it).
    why: String,
    #[cfg(not(target_arch = "wasm32"))]
    pool: Option<rayon::ThreadPool>,
}

/// How the build can split work, for `engine.info()`.
pub const BUILD: &str = if cfg!(not(target_arch = "wasm32")) {
    "native"
} else if cfg!(target_feature = "atomics") {
    "threaded"
} else {
    "single-thread"
};

impl Pool {
    /// `threads` ≥ 1; 1 means no pool at all.
    pub fn new(threads: usize) -> Result<Self, KernelError> {
        let asked = threads.max(1);
        #[cfg(not(target_arch = "wasm32"))]
        {
            let pool = if asked > 1 {
                Some(
                    rayon::ThreadPoolBuilder::new()
                        .num_threads(asked)
                        .thread_name(|i| format!("readout-kernels-{i}"))
                        .build()
                        .map_err(|e| KernelError::Threads {
                            threads: asked,
                            reason: e.to_string(),
                        })?,
                )
            } else {
                None
            };
            Ok(Self {
                threads: asked,
                why: format!("{asked} asked"),
                pool,
            })
        }
        #[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
        {
            // The bindings start the workers before the runtime loads; a
            // worker that did not start is reported, not waited for.
            let have = super::workers::started() + 1;
            let threads = asked.min(have);
            let workers = |n: usize| format!("{n} worker{}", if n == 1 { "" } else { "s" });
            let why = if threads == asked {
                format!("{asked} asked: this thread and {}", workers(threads - 1))
            } else {
                format!(
                    "{asked} asked, {have} running: only {} started",
                    workers(have - 1)
                )
            };
            Ok(Self { threads, why })
        }
        #[cfg(all(target_arch = "wasm32", not(target_feature = "atomics")))]
        {
            // The caller's count is reported as what it got, not what it
            // asked for.
            let why = if asked == 1 {
                "1 asked".to_string()
            } else {
                format!(
                    "{asked} asked: this is the single-thread build (threads need the \
                     threaded build, on a cross-origin isolated page)"
                )
            };
            Ok(Self { threads: 1, why })
        }
    }

    /// The threads a job runs on now: in the threaded browser build, a
    /// worker that died (a panic) or was lost (it stopped answering) since
    /// the pool was made no longer counts.
    pub fn threads(&self) -> usize {
        self.threads.min(self.live())
    }

    pub fn why(&self) -> String {
        let lost = self.threads - self.threads();
        if lost == 0 {
            return self.why.clone();
        }
        let s = if lost == 1 { "" } else { "s" };
        format!(
            "{}; {lost} kernel worker{s} stopped since (a panic, or no answer within the \
             stall deadline), so {} run",
            self.why,
            self.threads()
        )
    }

    /// This thread and the kernel workers still running.
    fn live(&self) -> usize {
        #[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
        {
            super::workers::started().saturating_sub(super::workers::died()) + 1
        }
        #[cfg(not(all(target_arch = "wasm32", target_feature = "atomics")))]
        {
            self.threads
        }
    }

    /// Whether work of about `macs` multiply-adds is worth splitting.
    /// Natively a split goes through rayon, which wakes its threads and
    /// parks the caller until they are done, some 10 µs a call on this
    /// 2-core host; a 1-row product is shorter than that. With every
    /// product split, a layer's matrices at 1 row took 0.13 ms on 2 threads
    /// against 0.042 on one (`cargo bench --bench q4_matmul -- --threads N
    /// --rows 1,4,8,16,45,256`); at 16 rows they were even, at 45 rows 2
    /// threads won 1.2×. In the browser the caller takes pieces itself and
    /// the workers spin between jobs, and splitting measured faster even
    /// at 1 row, so there it always is.
    pub fn worth_splitting(&self, macs: usize) -> bool {
        cfg!(target_arch = "wasm32") || macs >= Self::NATIVE_SERIAL_BELOW
    }

    /// See `worth_splitting`: about 4 M multiply-adds, a 1536 × 576 matrix
    /// at 5 rows, where splitting stopped losing. A 1-token run of
    /// SmolLM2-135M after a 256-token past went from 12.1 to 9.3 ms at 2
    /// threads (`bench/results/ab-native/2026-12-03-ab-native-serial-below-short.json`).
    const NATIVE_SERIAL_BELOW: usize = 1 << 22;

    /// Calls `f(index, chunk)` for each `chunk`-long piece of `data`, in
    /// parallel where there is a pool (a single piece runs on the caller).
    /// `f` must not depend on the order.
    /// Fails only in the threaded browser build, when a worker died inside
    /// its piece (a panic), leaving `data` incomplete.
    pub fn chunks_mut<T, F>(&self, data: &mut [T], chunk: usize, f: F) -> Result<(), OpError>
    where
        T: Send,
        F: Fn(usize, &mut [T]) + Sync + Send,
    {
        let chunk = chunk.max(1);
        #[cfg(not(target_arch = "wasm32"))]
        if let Some(pool) = self.pool.as_ref().filter(|_| data.len() > chunk) {
            use rayon::prelude::*;
            pool.install(|| {
                data.par_chunks_mut(chunk)
                    .enumerate()
                    .for_each(|(i, c)| f(i, c))
            });
            return Ok(());
        }
        #[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
        if self.threads() > 1 && data.len() > chunk {
            use super::workers::Ran;
            // Worker indices below `self.threads - 1` take part; a dead one
            // among them claims nothing, so the others do its share.
            match shared::chunks_mut(self.threads - 1, data, chunk, &f) {
                Ran::Done => return Ok(()),
                Ran::Broken => return Err(OpError::WorkerDied),
                Ran::Lost { workers, ms } => return Err(OpError::WorkerLost { workers, ms }),
                Ran::Busy => {}
            }
        }
        for (i, c) in data.chunks_mut(chunk).enumerate() {
            f(i, c);
        }
        Ok(())
    }
}

impl Pool {
    /// Below this many values an element-wise operator runs on the caller:
    /// handing a few rows to the pool costs more than computing them.
    pub const SERIAL_BELOW: usize = 16384;

    /// `n` floats made by `f(start, piece)` over pieces of whole `unit`s
    /// (rows), one piece per thread when `n` is large enough to split: the
    /// element-wise operators, serial on the caller, were a sixth of the
    /// caller's time at two threads in Chromium.
    pub fn fill<F>(&self, n: usize, unit: usize, f: F) -> Result<Vec<f32>, OpError>
    where
        F: Fn(usize, &mut [f32]) + Sync + Send,
    {
        let unit = unit.max(1);
        let mut out = vec![0f32; n];
        let chunk = if n < Self::SERIAL_BELOW || self.threads() == 1 {
            n
        } else {
            n.div_ceil(unit).div_ceil(self.threads()) * unit
        };
        self.chunks_mut(&mut out, chunk, |t, piece| f(t * chunk, piece))?;
        Ok(out)
    }
}

/// A buffer that the tasks of one `chunks_mut` call fill in disjoint ranges,
/// beside the slice that call splits (a task writes its share of both).
pub struct Disjoint<'a, T> {
    base: *mut T,
    len: usize,
    _borrow: std::marker::PhantomData<&'a mut [T]>,
}

// SAFETY: tasks take disjoint ranges (the contract of `range`), and the
// pool returns only once every task is done, while the borrow still lives.
unsafe impl<T: Send> Sync for Disjoint<'_, T> {}
unsafe impl<T: Send> Send for Disjoint<'_, T> {}

impl<'a, T> Disjoint<'a, T> {
    pub fn new(data: &'a mut [T]) -> Self {
        Self {
            base: data.as_mut_ptr(),
            len: data.len(),
            _borrow: std::marker::PhantomData,
        }
    }

    /// `start .. end` of the buffer, clamped to its length.
    ///
    /// # Safety
    /// No other task uses any part of `start .. end` while the slice lives.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn range(&self, start: usize, end: usize) -> &mut [T] {
        let end = end.min(self.len);
        let start = start.min(end);
        // SAFETY: inside the buffer, and per the contract no one else's.
        unsafe { std::slice::from_raw_parts_mut(self.base.add(start), end - start) }
    }
}

/// `chunks_mut` over the workers: the job is a pointer to this frame's
/// `Job`, which outlives the call because `workers::run` returns only
/// when every chunk is done.
#[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
mod shared {
    use super::super::workers;

    struct Job<'a, T, F> {
        data: *mut T,
        len: usize,
        chunk: usize,
        f: &'a F,
    }

    /// # Safety
    /// `ctx` points at a live `Job<T, F>`, and each `index` is run once.
    unsafe fn run_chunk<T, F: Fn(usize, &mut [T])>(ctx: usize, index: usize) {
        // SAFETY: per the contract above.
        let job = unsafe { &*(ctx as *const Job<'_, T, F>) };
        let start = index * job.chunk;
        let end = (start + job.chunk).min(job.len);
        // SAFETY: chunks are disjoint ranges of one live `&mut [T]`.
        let piece = unsafe { std::slice::from_raw_parts_mut(job.data.add(start), end - start) };
        (job.f)(index, piece);
    }

    pub fn chunks_mut<T: Send, F: Fn(usize, &mut [T]) + Sync>(
        workers: usize,
        data: &mut [T],
        chunk: usize,
        f: &F,
    ) -> workers::Ran {
        let job = Job {
            data: data.as_mut_ptr(),
            len: data.len(),
            chunk,
            f,
        };
        let count = data.len().div_ceil(chunk);
        // SAFETY: `run_chunk::<T, F>` matches `job`, which lives until
        // `run` returns; T: Send and F: Sync make the cross-thread use sound.
        unsafe {
            workers::run(
                count,
                workers,
                run_chunk::<T, F>,
                &job as *const Job<'_, T, F> as usize,
            )
        }
    }
}
