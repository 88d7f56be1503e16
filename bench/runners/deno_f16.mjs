// The mission's own path measured: a q4f16 model on WebGPU with float16 and
// its KV on the GPU, in Deno on Mesa's lavapipe (scripts/deno.mjs), for the
// stock, trimmed and pruned+trimmed files. Per variant: agreement with native
// ONNX Runtime on the same file (max |Δp|, argmax changes, on the authored
// fixture's first states), bytes read back per criterion, ms per criterion,
// and the logit_cost sweep (the same ids as the page and `readout sweep`).
// Lavapipe is a CPU rasteriser: every time here is emulated ("emulated":
// true), so only the agreement and the bytes carry over to a real GPU.
//   node bench/runners/deno_f16.mjs [--model smollm2-135m-instruct-q4f16]
//       [--states 4] [--lengths 1,8] [--runs 3] [--out FILE]
import { valueOption } from "../../scripts/browser.mjs";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { denoAvailable, denoEvaluate, DENO_ORT_BASE, fileUrl } from "../../scripts/deno.mjs";
import { F16_BOUND } from "../../scripts/f16_bound.mjs";
import { ROOT } from "../../scripts/serve.mjs";

const args = process.argv.slice(2);
const value = (flag, fallback) => valueOption(args, flag, fallback, "deno_f16");
function count(flag, fallback) {
  const v = value(flag, String(fallback));
  if (!/^[1-9][0-9]*$/.test(v)) {
    console.error(`deno_f16: ${flag} must be a whole number ≥ 1, got ${v}`);
    process.exit(2);
  }
  return Number(v);
}
const model = value("--model", "smollm2-135m-instruct-q4f16");
const nStates = count("--states", 4);
const runs = count("--runs", 3);
const lengths = value("--lengths", "1,8").split(",").map(Number);
const date = new Date().toISOString().slice(0, 10);
const out = value("--out", join(ROOT, "bench", "results", `${date}-deno-webgpu-f16-${model}.json`));
if (args.length || lengths.some((n) => !Number.isInteger(n) || n < 1)) {
  console.error(`deno_f16: unknown arguments or bad --lengths (${args.join(" ")})`);
  process.exit(2);
}
if (!denoAvailable()) {
  console.error("deno_f16: deno is missing; run bash scripts/setup.sh");
  process.exit(1);
}
const VARIANTS = { stock: "", trimmed: "-trimmed", pruned: "-trimmed-pruned" };
for (const v of Object.values(VARIANTS)) {
  if (!existsSync(join(ROOT, "models", `${model}${v}`, "model.onnx"))) {
    console.error(`deno_f16: models/${model}${v} is missing; bash scripts/main.sh builds it`);
    process.exit(1);
  }
}

const fixture = readFileSync(join(ROOT, "tests/fixtures/authored.jsonl"), "utf8").split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
const states = fixture.slice(0, nStates);

/** Native ONNX Runtime's letters decisions on the same file (readout evaluate). */
function native(id) {
  const bin = join(ROOT, "target", "release", "readout");
  const cli = existsSync(bin) ? bin : join(ROOT, "target", "debug", "readout");
  const file = join(ROOT, "target", "bench", `native-${id}.json`);
  mkdirSync(join(ROOT, "target", "bench"), { recursive: true });
  execFileSync(cli, ["evaluate", "tests/fixtures/authored.jsonl", "--model", `models/${id}`, "--mode", "letters", "--out", file], { cwd: ROOT, stdio: ["ignore", "ignore", "inherit"] });
  return new Map(JSON.parse(readFileSync(file, "utf8")).rows.map((r) => [`${r.state}/${r.decision.id}`, r.decision]));
}

const result = { date, runner: "bench/runners/deno_f16.mjs", model, emulated: true, runtime: "deno", bound: F16_BOUND, states: nStates, variants: {} };
for (const [variant, suffix] of Object.entries(VARIANTS)) {
  const id = `${model}${suffix}`;
  console.error(`[deno_f16] ${id}: loading on WebGPU in Deno`);
  const r = await denoEvaluate(
    async ({ source, states, ORT_BASE, lengths, runs }) => {
      const { Engine, median, linearFit } = globalThis.readout;
      const adapter = await navigator.gpu.requestAdapter();
      const t0 = performance.now();
      const engine = await Engine.load(source, { backend: "webgpu", ortBase: ORT_BASE });
      const loadMs = performance.now() - t0;
      const decisions = [];
      let criteria = 0, ms = 0;
      const bytes0 = engine.bytesReadBack();
      for (const s of states) {
        const state = await engine.prefill(s);
        const t = performance.now();
        for (const d of await state.scoreAll(s.criteria, { mode: "letters" })) decisions.push([`${s.id}/${d.id}`, d]);
        ms += performance.now() - t;
        criteria += s.criteria.length;
        await state.dispose();
      }
      const bytesPerCriterion = (engine.bytesReadBack() - bytes0) / criteria;
      // The logit_cost sweep: a fixed prefix, then suffixes of each length.
      const { prefix, suffixes } = await engine.sweepIds(64, lengths);
      const past = await engine.prefillIds(prefix);
      const sweep = [];
      for (const ids of suffixes) {
        const samples = [];
        for (let i = 0; i < runs; i++) {
          const t = performance.now();
          await past.readIds(ids, 4, false);
          samples.push(performance.now() - t);
        }
        sweep.push({ suffix: ids.length, samples_ms: samples, median_ms: median(Float64Array.from(samples)) });
      }
      await past.dispose();
      const info = engine.info();
      await engine.dispose();
      const a = adapter.info;
      let fit = null;
      try {
        fit = linearFit(Float64Array.from(sweep.map((s) => s.suffix)), Float64Array.from(sweep.map((s) => s.median_ms)));
      } catch {
        fit = null;
      }
      return {
        adapter: { vendor: a.vendor, architecture: a.architecture, device: a.device, description: a.description },
        shader_f16: adapter.features.has("shader-f16"),
        info: { backend: info.backend, backendReason: info.backendReason, readout: info.readout, runLimit: info.runLimit },
        loadMs, decisions, criteria, msPerCriterion: ms / criteria, bytesPerCriterion, sweep, fit,
      };
    },
    { source: fileUrl(`models/${id}/`), states, ORT_BASE: DENO_ORT_BASE, lengths, runs },
    { timeoutMs: 3_600_000 },
  );
  const ref = native(id);
  let worst = 0;
  const changed = [];
  for (const [key, d] of r.decisions) {
    const n = ref.get(key);
    if (!n) throw new Error(`native has no decision ${key}`);
    d.probs.forEach((p, i) => (worst = Math.max(worst, Math.abs(p.p - n.probs[i].p))));
    if (d.answer !== n.answer) changed.push(key);
  }
  result.adapter ??= r.adapter;
  result.shader_f16 ??= r.shader_f16;
  result.variants[variant] = {
    id, backend: r.info.backend, backend_reason: r.info.backendReason, readout: r.info.readout, run_limit: r.info.runLimit,
    criteria: r.criteria, max_abs_dp_vs_native: worst, argmax_changed: changed,
    bytes_read_back_per_criterion: r.bytesPerCriterion, ms_per_criterion: r.msPerCriterion, load_ms: r.loadMs,
    sweep: r.sweep, fit: r.fit,
  };
  console.error(`[deno_f16] ${id}: ${r.criteria} criteria, max |Δp| vs native ${worst.toExponential(2)} (bound ${F16_BOUND}), ${changed.length} argmax changed, ${r.bytesPerCriterion} B read back a criterion, ${r.msPerCriterion.toFixed(0)} ms a criterion (emulated)`);
}
mkdirSync(join(ROOT, "bench", "results"), { recursive: true });
writeFileSync(out, JSON.stringify(result, null, 2) + "\n");
console.error(`[deno_f16] wrote ${out}`);
