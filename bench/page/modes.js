// Readout modes on the example state: ms per criterion of each, measured in one run.
import { Engine, median } from "/pkg-diagnostics/readout.js";
import { ORT_BASE, log, timed } from "./common.js";

/** ms per criterion of each readout mode on the stock model and the example
 *  state, measured in one run so their ratios compare like with like. The
 *  calibrated runs go cold (every baseline computed) then warm (cached). */
export async function benchModes(cfg) {
  const id = cfg.model;
  const res = await fetch("/examples/state.json");
  if (!res.ok) throw new Error(`readout modes: /examples/state.json answered HTTP ${res.status}`);
  const example = await res.json();
  const engine = await Engine.load(`/models/${id}`, { backend: cfg.backend, ortBase: ORT_BASE, threads: cfg.threads });
  const rows = [];
  try {
    const info = engine.info();
    const state = await engine.prefill(example);
    const modes = [
      ["letters", { mode: "letters" }],
      ["cloze · sum", { mode: "cloze", clozeScore: "sum" }],
      ["cloze · sum · content-free (cold)", { mode: "cloze", calibration: "content-free" }],
      ["cloze · sum · content-free (cached)", { mode: "cloze", calibration: "content-free" }],
      ["letters · content-free (cold)", { mode: "letters", calibration: "content-free" }],
      ["letters · content-free (cached)", { mode: "letters", calibration: "content-free" }],
    ];
    for (const [what, opts] of modes) {
      if (!what.includes("cached")) await state.scoreAll(example.criteria, { mode: opts.mode }); // warm-up, no baseline
      const per = [];
      const bytes0 = engine.bytesReadBack();
      for (let k = 0; k < (what.includes("cold") ? 1 : cfg.runs); k++) {
        const [ms, ds] = await timed(() => state.scoreAll(example.criteria, opts));
        per.push(ms / ds.length);
      }
      // Bytes mapped back to the host per criterion: what the readout costs in transfers.
      const total = engine.bytesReadBack() - bytes0;
      const bytes = total / (per.length * example.criteria.length);
      rows.push({ what, options: opts, runs: per.length, ms_per_criterion: median(per), samples_ms: per, bytes_read_back: total, bytes_per_criterion: bytes });
      log(`modes: ${what}: ${median(per).toFixed(1)} ms per criterion, ${bytes.toFixed(0)} bytes read back per criterion`);
    }
    await state.dispose();
    const letters = rows[0].ms_per_criterion;
    for (const r of rows) r.over_letters = r.ms_per_criterion / letters;
    return { model: id, backend: info.backend, criteria: example.criteria.length, head_tokens: state.tokens, rows };
  } finally {
    await engine.dispose();
  }
}
