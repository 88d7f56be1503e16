// What onnxruntime-web's WebGPU backend (Deno, Mesa's lavapipe) returns for
// Hugging Face's float16 SmolLM2 graph, with no engine around it: one run of
// 16 fixed tokens at positions 0.. and one at 1.., the last row's logits
// summed up (dtype, min, max, non-finite count) and their largest
// difference. All zero is the graph computing nothing on that device
// (bench/studies/hf_norm_overflow.py says why). Writes
// bench/results/hf-webgpu-logits/<date>-hf-webgpu-logits-<model>.json.
//   node bench/studies/hf_webgpu_logits.mjs [--dir models/hf-smollm2-135m-instruct]
import { basename } from "node:path";
import { valueOption } from "../../harness/browser.mjs";
import { denoEvaluate, DENO_ORT_BASE, fileUrl } from "../../harness/deno.mjs";
import { resultPath, writeResult } from "../runners/result_file.mjs";

const args = process.argv.slice(2);
const dir = valueOption(args, "--dir", "models/hf-smollm2-135m-instruct", "hf_webgpu_logits");
if (args.length) throw new Error(`unknown arguments: ${args.join(" ")}`);
const out = resultPath("hf_webgpu_logits", "hf-webgpu-logits", `hf-webgpu-logits-${basename(dir)}`);
const r = await denoEvaluate(async ({ model, ORT_BASE }) => {
  const ort = await import(`${ORT_BASE}ort.webgpu.bundle.min.mjs`);
  ort.env.wasm.wasmPaths = ORT_BASE;
  const bytes = new Uint8Array(await (await fetch(model)).arrayBuffer());
  const s = await ort.InferenceSession.create(bytes, { executionProviders: ["webgpu"], graphOptimizationLevel: "all" });
  const names = s.inputNames;
  const meta = s.inputMetadata;
  const ids = [1, 2, 3, 28, 40, 50, 60, 70, 80, 90, 100, 110, 120, 130, 140, 150];
  const n = ids.length;
  const run = async (offset) => {
    const feeds = {};
    for (const m of meta) {
      if (m.name === "input_ids") feeds[m.name] = new ort.Tensor("int64", BigInt64Array.from(ids, BigInt), [1, n]);
      else if (m.name === "attention_mask") feeds[m.name] = new ort.Tensor("int64", new BigInt64Array(n).fill(1n), [1, n]);
      else if (m.name === "position_ids") feeds[m.name] = new ort.Tensor("int64", BigInt64Array.from(ids.map((_, i) => BigInt(i + offset))), [1, n]);
      else if (m.name.startsWith("past_key_values")) feeds[m.name] = new ort.Tensor(m.type, m.type === "float16" ? new Uint16Array(0) : new Float32Array(0), [1, m.shape[1], 0, m.shape[3]]);
    }
    const o = await s.run(feeds, ["logits"]);
    const l = o.logits;
    const data = l.type === "float16" ? Array.from(l.data, (h) => { const s = h >> 15, e = (h >> 10) & 31, f = h & 1023; return (s ? -1 : 1) * (e === 0 ? f / 1024 * 2 ** -14 : e === 31 ? (f ? NaN : Infinity) : (1 + f / 1024) * 2 ** (e - 15)); }) : Array.from(l.data);
    const V = l.dims[2];
    const last = data.slice((n - 1) * V, n * V);
    const fin = last.filter(Number.isFinite);
    return { type: l.type, dims: l.dims, nonFinite: last.length - fin.length, min: Math.min(...fin), max: Math.max(...fin), first: last.slice(0, 5), last };
  };
  const a = await run(0), b = await run(1);
  let diff = 0;
  for (let i = 0; i < a.last.length; i++) diff = Math.max(diff, Math.abs(a.last[i] - b.last[i]));
  delete a.last; delete b.last;
  return { inputs: names.filter((x) => !x.startsWith("past")), a, b, maxLogitDiffOffsetBy1: diff };
}, { model: fileUrl(`${dir}/onnx/model_q4f16.onnx`), ORT_BASE: DENO_ORT_BASE }, { timeoutMs: 600_000 });
writeResult(out, "hf-webgpu-logits", "bench/studies/hf_webgpu_logits.mjs", { file: `${dir}/onnx/model_q4f16.onnx`, ...r }, { emulated: true });
console.log(`positions 0..: logits ${r.a.type} in [${r.a.min}, ${r.a.max}], ${r.a.nonFinite} non-finite; positions 1..: [${r.b.min}, ${r.b.max}]; max difference ${r.maxLogitDiffOffsetBy1}; wrote ${out}`);
