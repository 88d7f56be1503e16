// The threaded build's kernel workers (src/bindings/threads.rs). This file
// has two roles: on the page it spawns workers; in a worker spawned by it
// (named "readout-kernels", so a user's own worker that imports the package
// is left alone) it loads the package on the page's module and shared
// memory and parks in the kernels' loop.
const NAME = "readout-kernels";
const READY = "readout-kernels-ready";

if (typeof WorkerGlobalScope !== "undefined" && globalThis instanceof WorkerGlobalScope && globalThis.name === NAME) {
  globalThis.addEventListener("message", async (event) => {
    const { module, memory, index } = event.data;
    let pkg;
    try {
      // wasm-bindgen puts this file at snippets/<crate>-<hash>/js/, three
      // levels below the package's readout.js. A literal path, so that a
      // bundler resolves it to the module it already bundled.
      pkg = await import("../../../readout.js");
      await pkg.default({ module_or_path: module, memory });
    } catch (e) {
      globalThis.postMessage({ error: String(e && e.message ? e.message : e) });
      return;
    }
    globalThis.postMessage(READY);
    try {
      pkg.__readoutWorker(index);
    } catch (e) {
      // The loop never returns, so this is a trap (a panic in a chunk):
      // count the chunk, so the job's caller stops waiting and reports it.
      pkg.__readoutWorkerDied();
      throw e;
    }
  }, { once: true });
}

// The workers this thread spawned, by index: a job that stalls (a worker
// terminated or hung inside its piece) has the ones it gave up on
// terminated, so none writes the job's data after the job has returned.
const spawned = new Map();

/** Terminates worker `index` if this thread spawned it; says whether it did. */
export function terminateWorker(index) {
  const worker = spawned.get(index);
  if (!worker) return false;
  worker.terminate();
  spawned.delete(index);
  return true;
}

/** Spawns `count` workers with indices from `first`; resolves when all are ready. */
export function startWorkers(module, memory, first, count) {
  const one = (index) =>
    new Promise((resolve, reject) => {
      const worker = new Worker(new URL(import.meta.url), { type: "module", name: NAME });
      spawned.set(index, worker);
      worker.addEventListener("message", (event) => {
        if (event.data === READY) resolve();
        else reject(new Error(`kernel worker ${index}: ${event.data && event.data.error}`));
      }, { once: true });
      worker.addEventListener("error", (event) => reject(new Error(`kernel worker ${index}: ${event.message || "failed to start"}`)), { once: true });
      worker.postMessage({ module, memory, index });
    });
  return Promise.all(Array.from({ length: count }, (_, i) => one(first + i)));
}
