// The logit_cost sweep of each variant on this engine (sweep_engine.mjs, shared
// with the runner's Deno path), and the same work the transformers.js way.
import * as readout from "/pkg-diagnostics/readout.js";
import { ORT_BASE, TJS_ORT_BASE, VARIANTS, log, softmax, timed } from "./common.js";
import { sweepEngine as sweepOne, sweepLoop } from "./sweep_engine.mjs";
import { sweepWllama as sweepW } from "./wllama.js";

export async function sweepEngine(cfg, variant) {
  const id = cfg.model + VARIANTS[variant];
  return sweepOne(readout, cfg, { id, variant, source: `/models/${id}`, ortBase: ORT_BASE }, log);
}

export async function sweepTransformers(cfg, ids, letterIds) {
  const { AutoModelForCausalLM, Tensor, env } = await import("@huggingface/transformers");
  env.allowRemoteModels = false;
  env.allowLocalModels = true;
  env.localModelPath = "/models/";
  env.useBrowserCache = false;
  env.backends.onnx.wasm.wasmPaths = TJS_ORT_BASE;
  env.backends.onnx.wasm.numThreads = cfg.threads;
  const device = cfg.backend === "webgpu" ? "webgpu" : "wasm";
  log(`transformers.js: loading ${cfg.model} on ${device}`);
  // Our directories hold model.onnx + model.onnx.data; "fp32" only selects the
  // file name (no suffix). Input and KV dtypes come from the graph itself.
  const [loadMs, model] = await timed(() => AutoModelForCausalLM.from_pretrained(cfg.model, {
    device, dtype: "fp32", subfolder: "", model_file_name: "model", local_files_only: true,
    session_options: { externalData: [{ path: "model.onnx.data", data: "model.onnx.data" }] },
  }));
  const i64 = (arr) => new Tensor("int64", BigInt64Array.from(arr, BigInt), [1, arr.length]);
  const ones = (n) => new Tensor("int64", new BigInt64Array(n).fill(1n), [1, n]);
  const toPast = (outputs) => {
    const past = {};
    for (const [k, v] of Object.entries(outputs)) if (k.startsWith("present")) past[k.replace("present", "past_key_values")] = v;
    return past;
  };
  const dispose = (outputs) => {
    for (const [k, v] of Object.entries(outputs)) if (k.startsWith("present") && v.location === "gpu-buffer") v.dispose();
  };
  try {
    const P = ids.prefix.length;
    // transformers.js sizes an empty past from the graph's input shapes and
    // resolves the builder's symbolic `kv_cache_dim` to 0, which
    // GroupQueryAttention refuses; so the empty past is the engine's own,
    // derived from config.json by its parser.
    const shape = readout.emptyPast(JSON.stringify(model.config));
    const empty = {};
    for (const m of model.sessions.model.inputMetadata ?? []) {
      if (!shape.names.includes(m.name)) continue;
      const data = m.type === "float16" ? new Uint16Array(0) : new Float32Array(0);
      empty[m.name] = new Tensor(m.type, data, shape.dims);
    }
    const [prefillMs, pre] = await timed(() => model.forward({ input_ids: i64(ids.prefix), attention_mask: ones(P), past_key_values: empty }));
    const past = toPast(pre);
    const out = { id: cfg.model, variant: "transformers.js", device, empty_past: "the engine's, from config.json (transformers.js resolves the symbolic kv_cache_dim to 0)", load_ms: loadMs, prefill_ms: prefillMs, samples_ms: {}, median_ms: [], bytes_read_back: [], probs: [] };
    // Bytes copied out of onnxruntime-web, counted from the tensors each run returns.
    let copied = 0;
    const one = async (suffix) => {
      const o = await model.forward({ input_ids: i64(suffix), attention_mask: ones(P + suffix.length), past_key_values: past });
      // What a front-end does with the result: the letters at the last row.
      const logits = o.logits;
      const [, S, V] = logits.dims;
      const row = (S - 1) * V;
      const data = logits.data;
      const letters = letterIds.map((c) => Number(data[row + c]));
      copied += data.byteLength + Object.entries(o).filter(([k, v]) => k.startsWith("present") && v.location === "cpu").reduce((a, [, v]) => a + v.data.byteLength, 0);
      out.logits_dtype = logits.type;
      dispose(o);
      return { probs: softmax(letters) };
    };
    await sweepLoop(readout, cfg, ids.suffixes, "transformers.js", out, one, () => copied, log);
    dispose(pre);
    return out;
  } finally {
    await model.dispose();
  }
}

/** wllama on the GGUF at `gguf` (a URL), the same lengths and prefix. */
export async function sweepWllama(cfg, gguf) {
  return sweepW(readout, cfg, gguf, sweepLoop);
}
