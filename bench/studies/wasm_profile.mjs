// Where the WASM backend's time goes: Chromium's sampling profiler (CDP
// Profiler domain) over onnxruntime-web's WASM build while it runs
// `runs` one-token suffix steps on a 64-token past; self time aggregated by
// function (onnxruntime-web's .wasm keeps its function names).
// Writes bench/results/wasm-profile/<date>-wasm-profile-<model>.json.
//   node bench/studies/wasm_profile.mjs <model id under models/> [--runs 5] [--threads 2]
import { harness, numberOption, ORT_BASE, sampled, selfTimes, start } from "../../harness/browser.mjs";
import { resultPath, writeResult } from "../runners/result_file.mjs";

const args = process.argv.slice(2);
const opt = (k, d) => numberOption(args, k, d);
const runs = opt("--runs", 5);
const threads = opt("--threads", 2);
const [dir] = args;
const out = resultPath("wasm_profile", "wasm-profile", `wasm-profile-${dir}`);
const ctx = await start();
const page = await harness(ctx);
await page.evaluate(async ({ dir, threads, ORT_BASE }) => {
  const ort = await import("onnxruntime-web");
  ort.env.wasm.wasmPaths = ORT_BASE;
  ort.env.wasm.numThreads = threads;
  const get = async (f) => new Uint8Array(await (await fetch(`/models/${dir}/${f}`)).arrayBuffer());
  const configText = new TextDecoder().decode(await get("config.json"));
  const s = await ort.InferenceSession.create(await get("model.onnx"), { executionProviders: ["wasm"], externalData: [{ path: "model.onnx.data", data: await get("model.onnx.data") }] });
  // The empty past as the engine derives it from config.json.
  const { emptyPast } = await import("/pkg-diagnostics/readout.js");
  const empty = emptyPast(configText);
  const layers = empty.names.length / 2;
  const kvType = s.inputMetadata.find((m) => m.name === "past_key_values.0.key").type;
  const feeds = (n, past, pastLen) => {
    const f = { input_ids: new ort.Tensor("int64", BigInt64Array.from({ length: n }, (_, i) => BigInt(300 + i * 7)), [1, n]), attention_mask: new ort.Tensor("int64", new BigInt64Array(pastLen + n).fill(1n), [1, pastLen + n]) };
    for (let l = 0; l < layers; l++) for (const kv of ["key", "value"]) f[`past_key_values.${l}.${kv}`] = past ? past[`present.${l}.${kv}`] : new ort.Tensor(kvType, kvType === "float16" ? new Uint16Array(0) : new Float32Array(0), empty.dims);
    return f;
  };
  const names = [];
  for (let l = 0; l < layers; l++) names.push(`present.${l}.key`, `present.${l}.value`);
  const past = await s.run(feeds(64, null, 0), names);
  await s.run(feeds(1, past, 64), ["logits"]);
  window.step = () => s.run(feeds(1, past, 64), ["logits"]);
}, { dir, threads, ORT_BASE });
const { result: ms, profile } = await sampled(page, 200, async (runs) => {
  const t = performance.now();
  for (let i = 0; i < runs; i++) await window.step();
  return (performance.now() - t) / runs;
}, runs);
await ctx.close();
// Self time per function name (main thread only: the workers' share is
// counted in the run time, not in these samples).
const dt = selfTimes(profile);
const total = Object.values(dt).reduce((a, b) => a + b, 0);
const top = Object.entries(dt).sort((a, b) => b[1] - a[1]).slice(0, 12);
const doc = {
  what: "Chromium sampling profiler (main thread) over onnxruntime-web 1.30's WASM backend, one-token steps on a 64-token past; self time per function, percent of samples. The .wasm has no name section, so functions are named by index; compare two models' profiles to attribute them.",
  dir,
  threads,
  runs,
  ms_per_run: +ms.toFixed(1),
  sampled_ms: +total.toFixed(0),
  top: top.map(([k, v]) => [k, +((v / total) * 100).toFixed(1)]),
};
writeResult(out, "wasm-profile", "bench/studies/wasm_profile.mjs", doc);
console.log(JSON.stringify(doc, null, 1));
