// The logit_cost sweep of one variant on this engine, with no page around it:
// the benchmark page imports it (sweeps.js), and so does the runner's Deno
// path (bench/runners/run.mjs --runtime deno), so Chromium, Deno on lavapipe
// and a lent GPU (bench/runners/gpu_check.sh drives the page) measure the
// same loop. `readout` is the package module (Engine, median, linearFit);
// it is passed in because the page and Deno reach it by different URLs.

/** Per length: warm-up, then timed runs of `run(ids)`; `counter()` is read around each timed run for the bytes it read back. */
export async function sweepLoop(readout, cfg, suffixes, label, out, run, counter, log) {
  const { median, linearFit } = readout;
  for (const [i, n] of cfg.lengths.entries()) {
    for (let w = 0; w < cfg.warmup; w++) await run(suffixes[i]);
    const s = [];
    let r, bytes = 0;
    for (let k = 0; k < cfg.runs; k++) {
      const before = counter();
      const t = performance.now();
      r = await run(suffixes[i]);
      s.push(performance.now() - t);
      bytes = counter() - before;
    }
    out.samples_ms[n] = s;
    out.median_ms.push(median(s));
    out.bytes_read_back.push(bytes);
    out.probs.push(r.probs);
    log(`${label}: n=${n} median ${median(s).toFixed(1)} ms, ${bytes} bytes read back`);
  }
  // Results files keep the native sweep's snake_case names.
  const f = linearFit(cfg.lengths, out.median_ms);
  out.fit = f ? { fixed_ms: f.fixedMs, per_token_ms: f.perTokenMs, r2: f.r2 } : null;
}

/**
 * Loads `source` (a model folder's URL) on `cfg.backend` and sweeps it:
 * a `cfg.prefix`-token past, then suffixes of `cfg.lengths`, the first
 * `cfg.options` letters read after each. Returns the variant's record
 * (the ids it ran kept under `ids`, for a caller that reruns them).
 */
export async function sweepEngine(readout, cfg, { id, variant, source, ortBase }, log) {
  log(`${id}: loading on ${cfg.backend}`);
  const t0 = performance.now();
  const engine = await readout.Engine.load(source, { backend: cfg.backend, ortBase, threads: cfg.threads });
  const loadMs = performance.now() - t0;
  const info = engine.info();
  try {
    const { prefix, suffixes } = await engine.sweepIds(cfg.prefix, cfg.lengths);
    const t1 = performance.now();
    const state = await engine.prefillIds(prefix);
    const prefillMs = performance.now() - t1;
    const out = { id, variant, backend: info.backend, backend_reason: info.backendReason, readout: info.readout, runtime: info.runtime, threads: info.threads, run_limit: info.runLimit, load_ms: loadMs, prefill_ms: prefillMs, samples_ms: {}, median_ms: [], bytes_read_back: [], probs: [] };
    await sweepLoop(readout, cfg, suffixes, id, out, (ids) => state.readIds(ids, cfg.options, false), () => engine.bytesReadBack(), log);
    out.letter_columns = info.letters.columns.slice(0, cfg.options);
    out.letter_ids = info.letters.letterIds.slice(0, cfg.options);
    out.ids = { prefix: Array.from(prefix), suffixes: suffixes.map((s) => Array.from(s)) };
    await state.dispose();
    return out;
  } finally {
    await engine.dispose();
  }
}
