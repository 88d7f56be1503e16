// The browser's CPU path against its goals (issue "our own int4 CPU runtime"),
// every figure from this one invocation: the logit_cost sweep and the
// 256-token prefill of
//   - our runtime in Chromium, single-thread build (1 thread),
//   - our runtime in Chromium, threaded build (N threads),
//   - on a page that is not cross-origin isolated, 1 thread: the
//     single-thread build (SIMD128) and the relaxed build (relaxed SIMD's
//     dot product), run in turn twice (ABBA),
//   - onnxruntime-web's WASM backend on the float32 variant (N threads),
//   - native ONNX Runtime on every variant (N threads), and our runtime natively,
// then the goals' ratios. Writes bench/results/threads/<date>-threads-<model>.json.
//
//   node bench/runners/threads.mjs [--model smollm2-135m-instruct] [--threads 2]
//        [--lengths 1,8,32,64] [--runs 3] [--no-ort-web] [--no-plain] [--out FILE]
import { statSync } from "node:fs";
import { join } from "node:path";
import { flagOption, option } from "../../harness/browser.mjs";
import { ROOT } from "../../harness/serve.mjs";
import { cost45, fitRatio, maxAbsDiff, TYPICAL } from "../page/compare.mjs";
import { nativeSweep } from "./native_sweep.mjs";
import { resultPath, writeResult } from "./result_file.mjs";
import { runBench } from "./run.mjs";

const a = process.argv.slice(2);
const take = (k, d) => option(a, k, d);
const flag = (k) => flagOption(a, k);
const base = take("--model", "smollm2-135m-instruct");
const threads = Number(take("--threads", 2));
const lengths = take("--lengths", "1,8,32,64");
const runs = Number(take("--runs", 3));
const ortWeb = !flag("--no-ort-web");
const plain = !flag("--no-plain");
const outArg = take("--out", undefined);
const out = resultPath("threads", "threads", `threads-${base}`, outArg);
if (a.length) throw new Error(`unknown arguments: ${a.join(" ")}`);

const log = (l) => console.error(l);
const common = { lengths, runs, warmup: 1, prefix: 256, options: 4, variants: "stock", native: false, transformers: false, mass: false, modes: false, timeoutS: 3600 };

/** One browser sweep, reduced to what the goals read. */
async function browser(label, o) {
  log(`[threads] ${label}`);
  const r = await runBench({ ...common, ...o });
  const v = r.variants[0];
  return {
    label, model: o.model, backend: o.backend, build: o.build, threads_asked: o.threads, threads: v.threads, runtime: v.runtime, readout: v.readout,
    backend_reason: v.backend_reason, load_ms: v.load_ms, prefill_ms: v.prefill_ms, prefill_tokens_per_s: (256 / v.prefill_ms) * 1e3,
    median_ms: v.median_ms, fit: v.fit, ms_at_45: cost45(v.fit), probs: v.probs, page: r,
  };
}


const q4f16 = `${base}-q4f16`;
const runsOut = [];
runsOut.push(await browser(`browser cpu, single-thread build, 1 thread (${q4f16})`, { model: q4f16, backend: "cpu", build: "single", threads: 1 }));
runsOut.push(await browser(`browser cpu, threaded build, ${threads} threads (${q4f16})`, { model: q4f16, backend: "cpu", build: "threads", threads }));
// A page that is not isolated, as most are: SIMD128 against relaxed SIMD on
// one thread, ABBA so that a drift of the machine falls on both.
const plainRuns = [];
if (plain) {
  for (const build of ["single", "relaxed", "relaxed", "single"]) {
    plainRuns.push(await browser(`browser cpu, page not isolated, ${build} build, 1 thread (${q4f16})`, { model: q4f16, backend: "cpu", build, threads: 1, plain: true }));
  }
}
if (ortWeb) runsOut.push(await browser(`browser onnxruntime-web wasm, ${threads} threads (${base}-fp32)`, { model: `${base}-fp32`, backend: "wasm", build: "single", threads }));
const sweep = { lengths, runs, threads, log };
const ort = nativeSweep("ort", [`${base}-q4f16`, `${base}-q4`, `${base}-fp32`], sweep);
const own = nativeSweep("own", [q4f16], sweep);
const [single, threaded, web] = runsOut;
const fastestNative = ort.reduce((b, v) => (v.fit.per_token_ms < b.fit.per_token_ms ? v : b));
const download = ["model.onnx", "model.onnx.data"].reduce((s, f) => {
  try {
    return s + statSync(join(ROOT, "models", q4f16, f)).size;
  } catch {
    return s;
  }
}, 0);
const goals = {
  per_token_vs_fastest_native: { value: threaded.fit.per_token_ms / fastestNative.fit.per_token_ms, goal: "<= 1.5", fastest_native: fastestNative.model },
  faster_than_ort_web_at_45: web ? { value: fitRatio(web.fit, threaded.fit), goal: ">= 4" } : null,
  prefill_tokens_per_s: { value: threaded.prefill_tokens_per_s, goal: ">= 300" },
  download_mb: { value: download / 1e6, goal: "<= 100", file: q4f16 },
};
const result = {
  model: base, threads, lengths: lengths.split(",").map(Number), runs, typical_tokens: TYPICAL,
  runs_measured: runsOut.map(({ page, ...r }) => r), native: [...ort, ...own], goals,
  threaded_over_single_at_45: fitRatio(single.fit, threaded.fit),
  threaded_over_single_per_token: single.fit.per_token_ms / threaded.fit.per_token_ms,
  max_abs_dp: {
    threaded_vs_single_build: Math.max(...threaded.probs.map((p, i) => maxAbsDiff(p, single.probs[i]))),
    threaded_vs_native_own: Math.max(...threaded.probs.map((p, i) => maxAbsDiff(p, own[0].probs[i]))),
  },
  browser: single.page.browser, cross_origin_isolated: threaded.page.cross_origin_isolated,
};
if (plainRuns.length) {
  // Each build's figures: the mean of its runs.
  const mean = (build, f) => {
    const rs = plainRuns.filter((r) => r.build === build);
    return rs.reduce((s, r) => s + f(r), 0) / rs.length;
  };
  const perToken = (b) => mean(b, (r) => r.fit.per_token_ms);
  const prefill = (b) => mean(b, (r) => r.prefill_tokens_per_s);
  result.page_not_isolated = {
    runs: plainRuns.map(({ page, ...r }) => ({ ...r, cross_origin_isolated: page.cross_origin_isolated })),
    single_per_token_ms: perToken("single"), relaxed_per_token_ms: perToken("relaxed"),
    relaxed_over_single_per_token: perToken("single") / perToken("relaxed"),
    single_prefill_tokens_per_s: prefill("single"), relaxed_prefill_tokens_per_s: prefill("relaxed"),
    relaxed_over_single_prefill: prefill("relaxed") / prefill("single"),
    // Equal bit for bit is the tests' claim; the bench records it too.
    // Every run against the first SIMD128 run.
    max_abs_dp_relaxed_vs_single: Math.max(...plainRuns.flatMap((r) => r.probs.map((p, i) => maxAbsDiff(p, plainRuns[0].probs[i])))),
  };
}
// The header's machine says which host: runs on different hosts differ by more than their noise.
writeResult(out, "threads", "bench/runners/threads.mjs", result);
for (const r of [...result.runs_measured, ...result.native]) {
  console.log(`${r.label}: ${r.fit.fixed_ms.toFixed(1)} ms + ${r.fit.per_token_ms.toFixed(2)} ms/token, ${r.ms_at_45.toFixed(1)} ms at 45, prefill ${r.prefill_tokens_per_s.toFixed(0)} tokens/s`);
}
for (const [k, g] of Object.entries(goals)) if (g) console.log(`${k}: ${g.value.toFixed(2)} (goal ${g.goal})`);
console.log(`threaded over single: ${result.threaded_over_single_at_45.toFixed(2)}× at 45 tokens, ${result.threaded_over_single_per_token.toFixed(2)}× per token; max |Δp| vs single build ${result.max_abs_dp.threaded_vs_single_build.toExponential(1)}`);
if (result.page_not_isolated) {
  const n = result.page_not_isolated;
  console.log(`page not isolated, 1 thread: relaxed ${n.relaxed_per_token_ms.toFixed(2)} ms/token against SIMD128 ${n.single_per_token_ms.toFixed(2)} (${n.relaxed_over_single_per_token.toFixed(2)}×); prefill ${n.relaxed_prefill_tokens_per_s.toFixed(0)} against ${n.single_prefill_tokens_per_s.toFixed(0)} tokens/s; max |Δp| ${n.max_abs_dp_relaxed_vs_single}`);
}
log(`[threads] wrote ${out}`);
