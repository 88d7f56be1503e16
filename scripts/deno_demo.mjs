// The mission's own path, shown after the Chromium demo: the example
// state's decisions from a pruned q4f16 file on WebGPU with float16 and the
// KV on the GPU, in Deno on Mesa's lavapipe (scripts/deno.mjs). Lavapipe is
// a CPU rasteriser, so every time printed is emulated, not a GPU's.
//   node scripts/deno_demo.mjs [--model <models.json id>] [--state FILE] [--timeout-s 1800]
import { valueOption } from "./browser.mjs";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { denoAvailable, denoEvaluate, DENO_ORT_BASE, fileUrl } from "./deno.mjs";
import { ROOT } from "./serve.mjs";

const args = process.argv.slice(2);
const value = (flag, fallback) => valueOption(args, flag, fallback, "deno_demo");
const model = value("--model", "smollm2-135m-instruct-q4f16-trimmed-pruned");
const stateFile = value("--state", "examples/state.json");
const timeoutS = Number(value("--timeout-s", "1800"));
if (!(timeoutS > 0)) {
  console.error("deno_demo: --timeout-s must be a positive number of seconds");
  process.exit(2);
}
if (args.length) {
  console.error(`deno_demo: unknown arguments ${args.join(" ")} (--model ID, --state FILE, --timeout-s N)`);
  process.exit(2);
}
if (!denoAvailable()) {
  console.error("deno_demo: deno is missing; run bash scripts/setup.sh");
  process.exit(1);
}
const state = JSON.parse(readFileSync(join(ROOT, stateFile), "utf8"));

try {
  const r = await denoEvaluate(
    async ({ catalog, model, state, ORT_BASE }) => {
      const { Engine } = globalThis.readout;
      const adapter = await navigator.gpu?.requestAdapter();
      const t0 = performance.now();
      const engine = await Engine.load(`${catalog}#${model}`, { backend: "webgpu", ortBase: ORT_BASE });
      const loadMs = performance.now() - t0;
      const s = await engine.prefill(state);
      const decisions = [];
      for (const c of state.criteria) {
        const before = engine.bytesReadBack();
        const d = await s.score(c, { mode: "letters" });
        decisions.push({ id: d.id, answer: d.answer, probs: d.probs.map((p) => p.p), ms: d.ms, bytes: engine.bytesReadBack() - before, gold: c.answer });
      }
      await s.dispose();
      const info = engine.info();
      await engine.dispose();
      const a = adapter?.info ?? {};
      return { adapter: [a.vendor, a.architecture, a.device, a.description].filter(Boolean).join(" / "), f16: adapter?.features.has("shader-f16") ?? false, info, loadMs, decisions };
    },
    { catalog: fileUrl("models.json"), model, state, ORT_BASE: DENO_ORT_BASE },
    { build: "pkg", timeoutMs: timeoutS * 1000 },
  );
  console.log(`\nThe mission's path: ${model} on WebGPU with float16 (Deno, ${r.adapter}, shader-f16 ${r.f16}), letters, KV on the GPU.`);
  console.log(`Emulated: lavapipe runs the GPU's work on this machine's CPU; the times are not a GPU's. Load ${(r.loadMs / 1000).toFixed(1)} s.`);
  for (const d of r.decisions) {
    const mark = d.gold === undefined ? "" : d.answer === d.gold ? "  right" : `  (gold ${d.gold})`;
    console.log(`${d.id.padEnd(12)} ${String(d.answer).padEnd(12)} ${d.probs.map((p) => p.toFixed(3)).join(" ")}  (${d.ms.toFixed(0)} ms emulated, ${d.bytes} bytes read back)${mark}`);
  }
  console.log(`backend ${r.info.backend}: ${r.info.backendReason}; readout ${r.info.readout}`);
} catch (e) {
  console.error(`[deno demo] failed: ${e.message}${e.denoLog ? `\n${e.denoLog.slice(-10).join("\n")}` : ""}`);
  process.exitCode = 1;
}
