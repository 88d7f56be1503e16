//! Work splitting. Natively a rayon pool of the runtime's own size (so a
//! benchmark's "2 threads" is 2, whatever the machine); on wasm32 the work
//! runs on the calling thread (the threaded browser build is not made yet).

use super::KernelError;

pub struct Pool {
    threads: usize,
    #[cfg(not(target_arch = "wasm32"))]
    pool: Option<rayon::ThreadPool>,
}

impl Pool {
    /// `threads` ≥ 1; 1 means no pool at all.
    pub fn new(threads: usize) -> Result<Self, KernelError> {
        #[cfg(not(target_arch = "wasm32"))]
        {
            let threads = threads.max(1);
            let pool = if threads > 1 {
                Some(
                    rayon::ThreadPoolBuilder::new()
                        .num_threads(threads)
                        .thread_name(|i| format!("readout-kernels-{i}"))
                        .build()
                        .map_err(|e| KernelError::Threads {
                            threads,
                            reason: e.to_string(),
                        })?,
                )
            } else {
                None
            };
            Ok(Self { threads, pool })
        }
        #[cfg(target_arch = "wasm32")]
        {
            // One thread until the threaded build exists; the caller's count
            // is reported as what it got, not what it asked for.
            let _ = threads;
            Ok(Self { threads: 1 })
        }
    }

    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Calls `f(index, chunk)` for each `chunk`-long piece of `data`, in
    /// parallel where there is a pool. `f` must not depend on the order.
    pub fn chunks_mut<T, F>(&self, data: &mut [T], chunk: usize, f: F)
    where
        T: Send,
        F: Fn(usize, &mut [T]) + Sync + Send,
    {
        let chunk = chunk.max(1);
        #[cfg(not(target_arch = "wasm32"))]
        if let Some(pool) = &self.pool {
            use rayon::prelude::*;
            pool.install(|| {
                data.par_chunks_mut(chunk)
                    .enumerate()
                    .for_each(|(i, c)| f(i, c))
            });
            return;
        }
        for (i, c) in data.chunks_mut(chunk).enumerate() {
            f(i, c);
        }
    }
}
