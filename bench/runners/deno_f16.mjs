// The mission's own path measured: a q4f16 model on WebGPU with float16 and
// its KV on the GPU, in Deno on Mesa's lavapipe (harness/deno.mjs). Four
// variants: the stock file in its catalog readout (what users get by
// default: on SmolLM2 cloze with content-free calibration), the stock file
// in letters, and the trimmed and pruned+trimmed files in letters. Per
// variant, on the authored fixture's first states:
// - agreement with native ONNX Runtime on the same file and readout (max and
//   quantiles of |Δp|, argmax changes, each with native's margin);
// - for the stock variants, each engine's distance from the float32
//   computation of the same int4 weights (our runtime, `--precision f32`):
//   which float16 is nearer the exact one, and how far (docs/float16.md);
// - accuracy against the fixture's gold answers, bytes read back and ms per
//   criterion. The logit_cost sweep in Deno is the runner's
//   (`node bench/runners/run.mjs --runtime deno --backend webgpu`).
// Lavapipe is a CPU rasteriser: every time here is emulated ("emulated":
// true), so only the agreement and the bytes carry over to a real GPU.
//   node bench/runners/deno_f16.mjs [--model smollm2-135m-instruct-q4f16]
//       [--states 8] [--no-f32] [--out FILE]
import { flagOption, valueOption } from "../../harness/browser.mjs";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { denoAvailable, denoEvaluate, DENO_ORT_BASE, fileUrl } from "../../harness/deno.mjs";
import { F16_BOUND } from "../../harness/f16_bound.mjs";
import { ROOT } from "../../harness/serve.mjs";
import { resultPath, writeResult } from "./result_file.mjs";

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
const nStates = count("--states", 8);
const withF32 = !flagOption(args, "--no-f32");
const out = resultPath("deno_f16", "deno-webgpu-f16", `deno-webgpu-f16-${model}`, value("--out", undefined));
if (args.length) {
  console.error(`deno_f16: unknown arguments ${args.join(" ")} (--model ID, --states N, --no-f32, --out FILE)`);
  process.exit(2);
}
if (!denoAvailable()) {
  console.error("deno_f16: deno is missing; run bash scripts/setup.sh");
  process.exit(1);
}
const bin = ["target/release/readout", "target/debug/readout"].map((b) => join(ROOT, b)).find(existsSync);
if (!bin) {
  console.error("deno_f16: the native CLI is missing (the reference); cargo build --release --bin readout");
  process.exit(1);
}

// `catalog`: loaded as `models.json#id`, scored with no options, so both
// engines take the entry's readout. Otherwise the readout is named in full
// on both sides, so neither takes a default the other lacks.
const LETTERS = { mode: "letters", calibration: "none", prompt: "plain" };
const VARIANTS = [
  { name: "stock-default", suffix: "", catalog: true, f32: true },
  { name: "stock-letters", suffix: "", readout: LETTERS, f32: true },
  { name: "trimmed", suffix: "-trimmed", readout: LETTERS },
  { name: "pruned", suffix: "-trimmed-pruned", readout: LETTERS },
];
for (const v of VARIANTS) {
  if (!existsSync(join(ROOT, "models", `${model}${v.suffix}`, "model.onnx"))) {
    console.error(`deno_f16: models/${model}${v.suffix} is missing; bash scripts/main.sh builds it`);
    process.exit(1);
  }
}

const fixture = readFileSync(join(ROOT, "tests/fixtures/authored.jsonl"), "utf8").split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
const states = fixture.slice(0, nStates);
const gold = new Map(states.flatMap((s) => s.criteria.map((c) => [`${s.id}/${c.id}`, c.answer])));
mkdirSync(join(ROOT, "target", "bench"), { recursive: true });
const subset = join(ROOT, "target", "bench", `authored-first-${nStates}.jsonl`);
writeFileSync(subset, states.map((s) => JSON.stringify(s)).join("\n") + "\n");

/** The native CLI's decisions on the same states (`readout evaluate`), by state/criterion. */
function native(v, extra = ["--runtime", "ort"], tag = "ort") {
  const id = `${model}${v.suffix}`;
  const file = join(ROOT, "target", "bench", `native-${v.name}-${tag}-${id}.json`);
  const how = v.catalog ? ["--model", `models.json#${id}`] : ["--model", `models/${id}`, "--mode", v.readout.mode, "--calibration", v.readout.calibration, "--prompt", v.readout.prompt];
  const t = performance.now();
  execFileSync(bin, ["evaluate", subset, ...how, ...extra, "--out", file], { cwd: ROOT, stdio: ["ignore", "ignore", "inherit"] });
  console.error(`[deno_f16] ${id} (${v.name}): native ${tag} in ${((performance.now() - t) / 1000).toFixed(0)} s`);
  return new Map(JSON.parse(readFileSync(file, "utf8")).rows.map((r) => [`${r.state}/${r.decision.id}`, r.decision]));
}

/** |Δp| per criterion (the largest over its options) between two decision maps, and the changed answers. */
function compare(a, b) {
  const dps = [];
  const changed = [];
  for (const [key, d] of a) {
    const n = b.get(key);
    if (!n) throw new Error(`no decision ${key} to compare with`);
    const p = (x, id) => x.probs.find((q) => q.id === id).p;
    dps.push(Math.max(...d.probs.map((q) => Math.abs(q.p - p(n, q.id)))));
    if (d.answer !== n.answer) changed.push({ criterion: key, answer: d.answer, reference: n.answer, reference_margin: n.margin ?? null });
  }
  const sorted = [...dps].sort((x, y) => x - y);
  const q = (f) => sorted[Math.min(sorted.length - 1, Math.floor(f * sorted.length))];
  return { max_abs_dp: sorted.at(-1), median_abs_dp: q(0.5), p90_abs_dp: q(0.9), argmax_changes: changed.length, changed };
}
const accuracy = (m) => [...m].filter(([key, d]) => d.answer === gold.get(key)).length / m.size;

const result = {
  model, runtime: "deno", bound_tiny_model: F16_BOUND,
  states: nStates, fixture: "tests/fixtures/authored.jsonl (first states)", variants: {},
};
for (const v of VARIANTS) {
  const id = `${model}${v.suffix}`;
  console.error(`[deno_f16] ${id} (${v.name}): loading on WebGPU in Deno`);
  const r = await denoEvaluate(
    async ({ source, states, ORT_BASE, readout }) => {
      const { Engine } = globalThis.readout;
      const adapter = await navigator.gpu.requestAdapter();
      const t0 = performance.now();
      const engine = await Engine.load(source, { backend: "webgpu", ortBase: ORT_BASE });
      const loadMs = performance.now() - t0;
      const decisions = [];
      let criteria = 0, ms = 0;
      const bytes0 = engine.bytesReadBack();
      for (const s of states) {
        console.log(`[progress] ${s.id}`);
        const state = await engine.prefill(s, readout ? { prompt: readout.prompt } : undefined);
        const t = performance.now();
        const opts = readout ? { mode: readout.mode, calibration: readout.calibration } : undefined;
        for (const d of await state.scoreAll(s.criteria, opts)) decisions.push([`${s.id}/${d.id}`, { answer: d.answer, probs: d.probs.map((p) => ({ id: p.id, p: p.p })), readout: d.readout }]);
        ms += performance.now() - t;
        criteria += s.criteria.length;
        await state.dispose();
      }
      const bytesPerCriterion = (engine.bytesReadBack() - bytes0) / criteria;
      const info = engine.info();
      await engine.dispose();
      const a = adapter.info;
      return {
        adapter: { vendor: a.vendor, architecture: a.architecture, device: a.device, description: a.description },
        shader_f16: adapter.features.has("shader-f16"),
        info: { backend: info.backend, backendReason: info.backendReason, runLimit: info.runLimit, defaults: info.readoutDefaults, defaultsFrom: info.readoutDefaultsFrom },
        loadMs, decisions, criteria, msPerCriterion: ms / criteria, bytesPerCriterion,
      };
    },
    { source: v.catalog ? `${fileUrl("models.json")}#${id}` : fileUrl(`models/${id}/`), states, ORT_BASE: DENO_ORT_BASE, readout: v.readout ?? null },
    { timeoutMs: 3_600_000, onLine: (l) => l.startsWith("[progress] ") && console.error(`[deno_f16] ${id} (${v.name}): ${l.slice(11)}`) },
  );
  const web = new Map(r.decisions);
  const ort = native(v);
  const entry = {
    id, backend: r.info.backend, backend_reason: r.info.backendReason, run_limit: r.info.runLimit,
    readout: r.decisions[0][1].readout, defaults: r.info.defaults, defaults_from: r.info.defaultsFrom,
    criteria: r.criteria, accuracy: { webgpu_f16: accuracy(web), native_ort: accuracy(ort) },
    vs_native: compare(web, ort),
    bytes_read_back_per_criterion: r.bytesPerCriterion, ms_per_criterion: r.msPerCriterion, load_ms: r.loadMs,
  };
  if (v.f32 && withF32) {
    // The float32 computation of the same int4 weights: which float16 is nearer it?
    const f32 = native(v, ["--runtime", "own", "--precision", "f32"], "own-f32");
    entry.accuracy.own_f32 = accuracy(f32);
    entry.webgpu_f16_vs_f32 = compare(web, f32);
    entry.native_ort_vs_f32 = compare(ort, f32);
  }
  result.adapter ??= r.adapter;
  result.shader_f16 ??= r.shader_f16;
  result.variants[v.name] = entry;
  const c = entry.vs_native;
  console.error(`[deno_f16] ${id} (${v.name}): ${r.criteria} criteria, |Δp| vs native max ${c.max_abs_dp.toExponential(2)} median ${c.median_abs_dp.toExponential(2)}, ${c.argmax_changes} argmax changed, accuracy ${entry.accuracy.webgpu_f16.toFixed(3)} (native ${entry.accuracy.native_ort.toFixed(3)}), ${r.bytesPerCriterion} B read back and ${r.msPerCriterion.toFixed(0)} ms a criterion (emulated)`);
  if (entry.webgpu_f16_vs_f32) console.error(`[deno_f16]   vs float32 (own --precision f32): webgpu max ${entry.webgpu_f16_vs_f32.max_abs_dp.toExponential(2)}, native max ${entry.native_ort_vs_f32.max_abs_dp.toExponential(2)}`);
}
writeResult(out, "deno-webgpu-f16", "bench/runners/deno_f16.mjs", result, { emulated: true });
console.error(`[deno_f16] wrote ${out}`);
