// Shown after the Chromium demo: the example state on WebGPU with float16
// and the KV on the GPU, in Deno on Mesa's lavapipe (harness/deno.mjs).
// First the readout users get by default: the stock q4f16 entry in its
// models.json readout (on SmolLM2, cloze with content-free calibration), each
// decision beside the native engine's on the same file and beside the float32
// computation of the same weights (our runtime's reference), held to the
// deep-model bound.
// Then the pruned letters path, the fastest, for models that answer in
// letters. Lavapipe is a CPU rasteriser, so every time printed is emulated,
// not a GPU's. A line is printed at least every 30 s while Deno works.
//   node scripts/deno_demo.mjs [--model <models.json id>] [--letters-model <id>]
//                              [--state FILE] [--bin PATH] [--timeout-s 1800]
import { valueOption } from "../harness/browser.mjs";
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { denoAvailable, denoEvaluate, DENO_ORT_BASE, fileUrl } from "../harness/deno.mjs";
import { F16_DEEP_BOUND } from "../harness/f16_bound.mjs";
import { ROOT } from "../harness/serve.mjs";

const args = process.argv.slice(2);
const value = (flag, fallback) => valueOption(args, flag, fallback, "deno_demo");
const model = value("--model", "smollm2-135m-instruct-q4f16");
const lettersModel = value("--letters-model", `${model.replace(/-trimmed-pruned$/, "")}-trimmed-pruned`);
const stateFile = value("--state", "examples/state.json");
const bin = value("--bin", ["target/release/readout", "target/debug/readout"].find((b) => existsSync(join(ROOT, b))) ?? "target/release/readout");
const timeoutS = Number(value("--timeout-s", "1800"));
if (!(timeoutS > 0)) {
  console.error("deno_demo: --timeout-s must be a positive number of seconds");
  process.exit(2);
}
if (args.length) {
  console.error(`deno_demo: unknown arguments ${args.join(" ")} (--model ID, --letters-model ID, --state FILE, --bin PATH, --timeout-s N)`);
  process.exit(2);
}
if (!denoAvailable()) {
  console.error("deno_demo: deno is missing; run bash scripts/setup.sh");
  process.exit(1);
}
if (!existsSync(join(ROOT, bin))) {
  console.error(`deno_demo: ${bin} is missing (the native reference); cargo build --release --bin readout`);
  process.exit(1);
}
const state = JSON.parse(readFileSync(join(ROOT, stateFile), "utf8"));
const log = (l) => console.error(`[deno demo] ${l}`);

// The native engine on the same file, in the same defaults (the CLI takes
// the entry's readout when no flag is given, as the browser does).
log(`native reference: ${bin} score --model models.json#${model} --runtime ort --state ${stateFile}`);
const native = JSON.parse(execFileSync(join(ROOT, bin), ["score", "--model", `models.json#${model}`, "--runtime", "ort", "--state", stateFile], { cwd: ROOT, encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] }));
// The float32 computation of the same int4 weights (our runtime's scalar
// reference): on a 30-layer model it, not native ONNX Runtime's float16 on
// the CPU, is what WebGPU's float16 is held to (docs/float16.md).
log(`float32 reference: ${bin} score --model models.json#${model} --runtime own --precision f32 --state ${stateFile}`);
const exact = JSON.parse(execFileSync(join(ROOT, bin), ["score", "--model", `models.json#${model}`, "--runtime", "own", "--precision", "f32", "--state", stateFile], { cwd: ROOT, encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] }));

// A line at least every 30 s: Deno's own progress as it comes, else a
// reminder of what it is still doing.
let last = "starting Deno";
let lastAt = Date.now();
const t0 = Date.now();
const beat = setInterval(() => {
  if (Date.now() - lastAt >= 30_000) {
    log(`still working (${Math.round((Date.now() - t0) / 1000)} s): ${last}`);
    lastAt = Date.now();
  }
}, 5_000);

try {
  const r = await denoEvaluate(
    async ({ catalog, model, lettersModel, state, ORT_BASE }) => {
      const { Engine } = globalThis.readout;
      const say = (l) => console.log(`[progress] ${l}`);
      const adapter = await navigator.gpu?.requestAdapter();
      // One entry, scored with the options `options(c)` gives (none: the
      // entry's default readout).
      const run = async (id, options) => {
        say(`${id}: loading and proving on WebGPU (the first runs compile shaders on the CPU)`);
        const t = performance.now();
        const engine = await Engine.load(`${catalog}#${id}`, { backend: "webgpu", ortBase: ORT_BASE });
        const loadMs = performance.now() - t;
        say(`${id}: loaded in ${(loadMs / 1000).toFixed(1)} s; prefilling the state`);
        const s = await engine.prefill(state);
        const decisions = [];
        for (const c of state.criteria) {
          say(`${id}: scoring ${c.id}`);
          const before = engine.bytesReadBack();
          const d = await s.score(c, options);
          decisions.push({ id: d.id, answer: d.answer, probs: d.probs.map((p) => p.p), ms: d.ms, bytes: engine.bytesReadBack() - before, gold: c.answer, readout: d.readout });
        }
        await s.dispose();
        const info = engine.info();
        await engine.dispose();
        return { id, loadMs, decisions, backend: info.backend, backendReason: info.backendReason, readout: info.readout, defaults: info.readoutDefaults, defaultsFrom: info.readoutDefaultsFrom };
      };
      const stock = await run(model, undefined);
      const letters = await run(lettersModel, { mode: "letters" });
      const a = adapter?.info ?? {};
      return { adapter: [a.vendor, a.architecture, a.device, a.description].filter(Boolean).join(" / "), f16: adapter?.features.has("shader-f16") ?? false, stock, letters };
    },
    { catalog: fileUrl("models.json"), model, lettersModel, state, ORT_BASE: DENO_ORT_BASE },
    {
      build: "pkg",
      timeoutMs: timeoutS * 1000,
      onLine: (l) => {
        // Only Deno's progress lines are printed (and reset the clock);
        // onnxruntime-web's own warnings stay in the failure log.
        if (!l.startsWith("[progress] ")) return;
        last = l.slice("[progress] ".length);
        lastAt = Date.now();
        log(last);
      },
    },
  );
  const mark = (d) => (d.gold === undefined ? "" : d.answer === d.gold ? "  right" : `  (gold ${d.gold})`);
  const { stock, letters } = r;
  const how = (x) => `${x.mode}${x.mode === "cloze" ? ` (${x.clozeScore})` : ""}, calibration ${x.calibration}, ${x.prompt} prompt`;
  console.log(`\nThe default readout on float16 WebGPU: ${stock.id}, ${how(stock.defaults)} (${stock.defaultsFrom}).`);
  console.log(`Deno, ${r.adapter}, shader-f16 ${r.f16}; KV on the GPU. Emulated: lavapipe runs the GPU's work on this machine's CPU; the times are not a GPU's. Load ${(stock.loadMs / 1000).toFixed(1)} s.`);
  console.log(`${"criterion".padEnd(12)} ${"webgpu f16".padEnd(14)} ${"native f16".padEnd(14)} ${"float32".padEnd(14)} |Δp| vs f32  vs native`);
  let worst = 0;
  let worstExact = 0;
  let same = 0;
  let sameExact = 0;
  for (const d of stock.decisions) {
    const n = native.decisions.find((x) => x.id === d.id);
    const x = exact.decisions.find((y) => y.id === d.id);
    const np = n.probs.map((p) => p.p);
    const xp = x.probs.map((p) => p.p);
    const dp = Math.max(...d.probs.map((p, i) => Math.abs(p - np[i])));
    const dx = Math.max(...d.probs.map((p, i) => Math.abs(p - xp[i])));
    worst = Math.max(worst, dp);
    worstExact = Math.max(worstExact, dx);
    if (n.answer === d.answer) same++;
    if (x.answer === d.answer) sameExact++;
    const p = (ans, probs, ids) => `${ans} ${probs[ids.indexOf(ans)].toFixed(3)}`;
    const ids = n.probs.map((o) => o.id);
    console.log(`${d.id.padEnd(12)} ${p(d.answer, d.probs, ids).padEnd(14)} ${p(n.answer, np, ids).padEnd(14)} ${p(x.answer, xp, ids).padEnd(14)} ${dx.toExponential(2).padEnd(12)} ${dp.toExponential(2)}  (${d.ms.toFixed(0)} ms emulated, ${d.bytes} bytes read back)${mark(d)}`);
  }
  const within = worstExact <= F16_DEEP_BOUND ? "within" : "OVER";
  console.log(`Against the float32 computation of the same weights: ${sameExact} of ${stock.decisions.length} answers the same, max |Δp| ${worstExact.toExponential(2)}, ${within} the deep-model bound ${F16_DEEP_BOUND} (docs/float16.md).`);
  console.log(`Against native ONNX Runtime's float16 on the CPU: ${same} of ${stock.decisions.length} answers the same, max |Δp| ${worst.toExponential(2)} (it drifts further from float32 than WebGPU does: docs/float16.md).`);
  if (within !== "within") process.exitCode = 1;
  console.log(`backend ${stock.backend}: ${stock.backendReason}; readout ${stock.readout}`);

  console.log(`\nThe path for models that answer in letters: ${letters.id} (pruned head, letters). On SmolLM2-135M letters answer by position, so these are not its answers to trust; a model that reads letters gets them at this cost. Load ${(letters.loadMs / 1000).toFixed(1)} s.`);
  for (const d of letters.decisions) {
    console.log(`${d.id.padEnd(12)} ${String(d.answer).padEnd(12)} ${d.probs.map((p) => p.toFixed(3)).join(" ")}  (${d.ms.toFixed(0)} ms emulated, ${d.bytes} bytes read back)${mark(d)}`);
  }
  console.log(`backend ${letters.backend}: ${letters.backendReason}; readout ${letters.readout}`);
} catch (e) {
  console.error(`[deno demo] failed: ${e.message}${e.denoLog ? `\n${e.denoLog.slice(-10).join("\n")}` : ""}`);
  process.exitCode = 1;
} finally {
  clearInterval(beat);
}
