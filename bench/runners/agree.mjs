// Browser against native on one state: loads a model directory in headless
// Chromium on one backend, scores every criterion of the state, scores the
// same state with the native CLI (ONNX Runtime), and writes the largest
// |Δp| and any changed answer to bench/results/agree/.
//
//   node bench/runners/agree.mjs --model gemma3-270m-q4 [--backend webgpu|wasm|cpu]
//        [--mode letters|cloze] [--state examples/state.json] [--timeout-s 3600]
//
// Long runs print the page's progress (load, prefill, each criterion), so a
// SwiftShader run that takes many minutes is visibly alive.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { harness, ORT_BASE, ROOT, start } from "../../harness/browser.mjs";
import { resultPath, writeResult } from "./result_file.mjs";

function option(args, key, fallback) {
  const i = args.indexOf(key);
  return i < 0 ? fallback : args[i + 1];
}

const args = process.argv.slice(2);
const model = option(args, "--model", null);
if (!model) throw new Error("--model ID (a directory under models/) is required");
const backend = option(args, "--backend", "webgpu");
const mode = option(args, "--mode", "letters");
const statePath = option(args, "--state", "examples/state.json");
const timeout = Number(option(args, "--timeout-s", "3600")) * 1000;
const state = JSON.parse(readFileSync(join(ROOT, statePath), "utf8"));

const bin = join(ROOT, "target", "debug", "readout");
execFileSync("cargo", ["build", "--locked", "--bin", "readout"], { cwd: ROOT, stdio: ["ignore", "ignore", "inherit"] });
// Two native references on the same file: ONNX Runtime (whose CPU int4
// kernels quantise activations to int8), and our runtime with float32
// activations (int4 graphs only), the reference a float GPU kernel should
// meet; the gap between the two is ONNX Runtime's int8 step.
const score = (extra) => {
  const t0 = Date.now();
  const out = JSON.parse(execFileSync(bin, ["--threads", "2", ...extra, "score", "--model", `models/${model}`, "--state", statePath, "--mode", mode], { cwd: ROOT, encoding: "utf8", maxBuffer: 1 << 26 }));
  return { out, s: (Date.now() - t0) / 1000 };
};
const { out: native, s: nativeS } = score(["--runtime", "ort"]);
console.error(`[agree] native ONNX Runtime: ${native.decisions.map((d) => d.answer).join(", ")} in ${nativeS.toFixed(1)} s`);
let ownF32 = null;
try {
  ownF32 = score(["--runtime", "own", "--precision", "f32"]).out;
  console.error(`[agree] native, our runtime in float32: ${ownF32.decisions.map((d) => d.answer).join(", ")}`);
} catch (e) {
  console.error(`[agree] our runtime refused the file (a float graph?): ${String(e.stderr ?? e).trim().split("\n").at(-1)}`);
}
const maxDp = (a, b) => Math.max(...a.flatMap((d, i) => d.probs.map((p, j) => Math.abs(p.p - b[i].probs[j].p))));

const ctx = await start();
const log = [];
try {
  const page = await harness(ctx, log);
  page.on("console", (m) => m.text().startsWith("[agree]") && console.error(m.text()));
  page.setDefaultTimeout(timeout);
  const r = await page.evaluate(
    async ({ model, backend, mode, state, ORT_BASE }) => {
      const { Engine } = window.readout;
      const t = () => performance.now();
      const t0 = t();
      console.log(`[agree] loading ${model} on ${backend}`);
      const e = await Engine.load(`/models/${model}/`, { backend, ortBase: ORT_BASE });
      const loadMs = t() - t0;
      console.log(`[agree] loaded in ${(loadMs / 1000).toFixed(1)} s: ${e.info().backendReason}`);
      const s = await e.prefill(state);
      const decisions = [];
      for (const c of state.criteria) {
        const t1 = t();
        decisions.push(await s.score(c, { mode }));
        console.log(`[agree] ${c.id}: ${decisions.at(-1).answer} in ${((t() - t1) / 1000).toFixed(1)} s`);
      }
      const info = e.info();
      await s.dispose();
      await e.dispose();
      return { decisions, info, loadMs, totalMs: t() - t0 };
    },
    { model, backend, mode, state, ORT_BASE },
  );
  let worst = 0;
  const changed = [];
  r.decisions.forEach((d, i) => {
    const n = native.decisions[i];
    d.probs.forEach((p, j) => (worst = Math.max(worst, Math.abs(p.p - n.probs[j].p))));
    if (d.answer !== n.answer) changed.push(d.id);
  });
  const out = {
    model,
    state: state.id,
    mode,
    backend: r.info.backend,
    backend_reason: r.info.backendReason,
    readout: r.info.readout,
    run_limit: r.info.runLimit,
    load_ms: r.loadMs,
    browser_ms: r.totalMs,
    native_s: nativeS,
    max_abs_dp: worst,
    argmax_changed: changed,
    max_abs_dp_vs_own_f32: ownF32 ? maxDp(r.decisions, ownF32.decisions) : null,
    max_abs_dp_onnxruntime_vs_own_f32: ownF32 ? maxDp(native.decisions, ownF32.decisions) : null,
    answers: { browser: r.decisions.map((d) => d.answer), native: native.decisions.map((d) => d.answer) },
    probs: { browser: r.decisions.map((d) => d.probs.map((p) => p.p)), native: native.decisions.map((d) => d.probs.map((p) => p.p)) },
  };
  const file = resultPath("agree", "agree", `agree-${model}-${r.info.backend}-${mode}`);
  writeResult(file, "agree", "bench/runners/agree.mjs", out, { emulated: r.info.backend === "webgpu" });
  const own = ownF32 ? `; against our float32 runtime ${out.max_abs_dp_vs_own_f32.toExponential(2)} (ONNX Runtime against it ${out.max_abs_dp_onnxruntime_vs_own_f32.toExponential(2)})` : "";
  console.error(`[agree] ${model} on ${r.info.backend}: max |Δp| ${worst.toExponential(2)} against ONNX Runtime, ${changed.length} answers changed${own}; wrote ${file}`);
} catch (e) {
  console.error(log.slice(-20).join("\n"));
  throw e;
} finally {
  await ctx.close();
}
