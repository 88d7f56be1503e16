// The WASM fallback study (which weight format the WASM variant loads,
// spec §5): onnxruntime-web's WASM backend in headless Chromium,
// cross-origin isolated, for each model given: a prefill of 64 tokens, then
// suffix runs of 1, 8 and 32 tokens on that past (logits fetched), warm-up
// then `rounds` timed runs each, medians. Every
// variant's last-row logits are compared with the first variant's on the
// same ids. Writes bench/results/wasm-fallback/<date>-wasm-fallback-<name>.json.
//   node bench/runners/wasm_fallback.mjs <name> <model dir> [<model dir> ...] [--threads 2] [--rounds 5]
import { harness, numberOption, ORT_BASE, start } from "../../harness/browser.mjs";
import { resultPath, writeResult } from "./result_file.mjs";

const args = process.argv.slice(2);
const opt = (k, d) => numberOption(args, k, d);
const threads = opt("--threads", 2);
const rounds = opt("--rounds", 5);
const [name, ...models] = args;
if (!name || models.length === 0) {
  console.error("usage: node bench/runners/wasm_fallback.mjs <name> <model dir> [...] [--threads N] [--rounds N]");
  process.exit(2);
}
const out = resultPath("wasm_fallback", "wasm-fallback", `wasm-fallback-${name}`);

const ctx = await start();
const results = [];
let reference = null;
try {
  for (const dir of models) {
    const page = await harness(ctx);
    process.stderr.write(`[wasm-fallback] ${dir}: loading\n`);
    const r = await page.evaluate(
      async ({ dir, threads, rounds, ORT_BASE }) => {
        const ort = await import("onnxruntime-web");
        ort.env.wasm.wasmPaths = ORT_BASE;
        ort.env.wasm.numThreads = threads;
        // Streamed into one buffer: Response.arrayBuffer() fails ("Failed to
        // fetch") on the 2.4 GB float32 Qwen3-0.6B data file.
        const get = async (f) => {
          const res = await fetch(`/models/${dir}/${f}`);
          const out = new Uint8Array(Number(res.headers.get("content-length")));
          const reader = res.body.getReader();
          for (let at = 0; ; ) {
            const { done, value } = await reader.read();
            if (done) return out;
            out.set(value, at);
            at += value.length;
          }
        };
        const configText = new TextDecoder().decode(await get("config.json"));
        const t0 = performance.now();
        const s = await ort.InferenceSession.create(await get("model.onnx"), {
          executionProviders: ["wasm"],
          externalData: [{ path: "model.onnx.data", data: await get("model.onnx.data") }],
          graphOptimizationLevel: "all",
        });
        const loadMs = performance.now() - t0;
        // The empty past as the engine derives it from config.json.
        const { emptyPast } = await import("/pkg-diagnostics/readout.js");
        const empty = emptyPast(configText);
        const layers = empty.names.length / 2;
        const kvType = s.inputMetadata.find((m) => m.name === "past_key_values.0.key").type;
        const emptyKv = () => (kvType === "float16" ? new Uint16Array(0) : new Float32Array(0));
        const ids = (n, off) => new ort.Tensor("int64", BigInt64Array.from({ length: n }, (_, i) => BigInt(300 + ((i + off) * 7919) % 20000)), [1, n]);
        const mask = (n) => new ort.Tensor("int64", new BigInt64Array(n).fill(1n), [1, n]);
        const feeds = (n, off, past, pastLen) => {
          const f = { input_ids: ids(n, off), attention_mask: mask(pastLen + n) };
          for (let l = 0; l < layers; l++)
            for (const kv of ["key", "value"]) f[`past_key_values.${l}.${kv}`] = past ? past[`present.${l}.${kv}`] : new ort.Tensor(kvType, emptyKv(), empty.dims);
          return f;
        };
        const presentNames = [];
        for (let l = 0; l < layers; l++) presentNames.push(`present.${l}.key`, `present.${l}.value`);
        let t = performance.now();
        const past = await s.run(feeds(64, 0, null, 0), presentNames);
        const prefillMs = performance.now() - t;
        const out = { dir, loadMs, prefillMs, kvType, sweeps: {}, lastRow: null };
        for (const n of [1, 8, 32]) {
          const samples = [];
          for (let k = 0; k < rounds + 1; k++) {
            t = performance.now();
            const r = await s.run(feeds(n, 64, past, 64), ["logits"]);
            const ms = performance.now() - t;
            if (k > 0) samples.push(ms);
            if (n === 8 && k === 0) {
              const v = await r.logits.getData();
              const V = r.logits.dims[2], rows = r.logits.dims[1];
              out.lastRow = Array.from(v.slice((rows - 1) * V, rows * V), Number);
            }
          }
          samples.sort((a, b) => a - b);
          out.sweeps[n] = { samples, median: samples[Math.floor(samples.length / 2)] };
        }
        await s.release();
        return out;
      },
      { dir, threads, rounds, ORT_BASE },
    );
    await page.close();
    if (!reference) reference = r.lastRow;
    let maxDiff = 0, argRef = 0, argGot = 0;
    r.lastRow.forEach((v, i) => {
      maxDiff = Math.max(maxDiff, Math.abs(v - reference[i]));
      if (v > r.lastRow[argGot]) argGot = i;
      if (reference[i] > reference[argRef]) argRef = i;
    });
    delete r.lastRow;
    r.vsFirst = { maxAbsLogitDiff: maxDiff, sameArgmax: argRef === argGot };
    process.stderr.write(`[wasm-fallback] ${dir}: prefill64 ${r.prefillMs.toFixed(0)} ms, S=1 ${r.sweeps[1].median.toFixed(0)}, S=8 ${r.sweeps[8].median.toFixed(0)}, S=32 ${r.sweeps[32].median.toFixed(0)} ms; vs first: max |Δlogit| ${maxDiff.toExponential(2)}, argmax ${r.vsFirst.sameArgmax ? "same" : "differs"}\n`);
    results.push(r);
  }
} finally {
  await ctx.close();
}
const base = results[0];
const doc = {
  what: "onnxruntime-web 1.30 WASM backend, headless Chromium, cross-origin isolated: 64-token prefill, then suffix runs on that past (logits fetched)",
  browser: "Debian Chromium (headless), playwright-core",
  threads,
  rounds,
  models: results,
  ratios_vs_first: Object.fromEntries(results.map((r) => [r.dir, Object.fromEntries([1, 8, 32].map((n) => [n, +(base.sweeps[n].median / r.sweeps[n].median).toFixed(3)]))])),
};
writeResult(out, "wasm-fallback", "bench/runners/wasm_fallback.mjs", doc);
console.log(out);
