// The ceiling a wasm kernel can reach in this browser on this host: how
// many multiply-adds a second Chromium sustains with nothing but the
// densest SIMD128 instructions in a loop (no loads, no unpacking, no
// scaling), on 1 worker and on N workers at once, beside what the
// per-token goal of the issue "our own int4 CPU runtime" needs, measured
// in the same run:
//   - relaxed  `i32x4.relaxed_dot_i8x16_i7x16_add_s`: 16 multiply-adds, the
//              threaded build's int8 product (src/kernels/simd/wasm.rs);
//   - dot_i16  `i32x4.dot_i16x8_s` + `i32x4.add`: 8, the single-thread
//              build's;
//   - madd     `f32x4.relaxed_madd`: 4, float work such as attention.
// Beside them, the int8 product kernel itself (`KernelBench`: one layer of
// SmolLM2's four matrices, in cache) in each build, at 1 and N threads, so
// its share of the instructions' peak is read in the same run. The builds
// are cargo's diagnostics builds as scripts/build_pkg.sh last left them,
// bound by wasm-bindgen into target/bench/dot-peak/ (as bench/studies/cpu_profile.mjs
// does). --ab BEFORE.wasm,AFTER.wasm measures two threaded builds instead,
// alternated --rounds times (the AFTER build first in even rounds), for a
// kernel change.
// The goal: a token in the browser costs at most 1.5× the fastest native
// ONNX Runtime variant. The model body's int4 products alone need
// body multiply-adds ÷ peak; if that exceeds 1.5× native, no kernel built
// from these instructions can meet it. Writes
// bench/results/dot-peak/<date>-dot-peak-<model>.json.
//
//   node bench/runners/dot_peak.mjs [--model smollm2-135m-instruct] [--threads 2]
//        [--calls 15] [--ms 60] [--rows 1,4,45,256] [--lengths 1,8,32,64]
//        [--runs 3] [--no-native] [--ab BEFORE.wasm,AFTER.wasm] [--rounds 3]
//        [--note TEXT] [--zero-points] [--out FILE] [--opt-before ARGS]
//        [--opt-after ARGS]
//        [--attention]
// --attention also times attention alone in each build (`AttentionBench`:
// SmolLM2's heads, the shapes of `cargo bench --bench attention`) beside
// the multiply-and-add peak (`mul_add`), which bounds it: attention keeps
// `dot`'s bits in every build, so it cannot use the fused `madd`.
// --opt-after -Oz (or -O3, ...) runs binaryen's wasm-opt at that level on
// the AFTER build once bound, with the flags scripts/build_pkg.sh gives the
// package's threaded build: so BEFORE,AFTER as the same .wasm measures what
// the package's optimisation does to the kernel. --opt-before does the same
// to the BEFORE build; each takes several of wasm-opt's arguments in one
// value ("-Oz --low-memory-unused"), so two optimisations of one .wasm can
// be compared.
// --note says in the JSON what the builds are (an A/B's files are paths
// that mean nothing later).
import binaryen from "binaryen";
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import { flagOption, numberOption, option, start } from "../../harness/browser.mjs";
import { ROOT } from "../../harness/serve.mjs";
import { nativeSweep } from "./native_sweep.mjs";
import { resultPath, writeResult } from "./result_file.mjs";

const a = process.argv.slice(2);
const base = option(a, "--model", "smollm2-135m-instruct");
const threads = numberOption(a, "--threads", 2);
const calls = numberOption(a, "--calls", 15);
const callMs = numberOption(a, "--ms", 60);
const rowCounts = option(a, "--rows", "1,4,45,256").split(",").map(Number);
const lengths = option(a, "--lengths", "1,8,32,64");
const runs = numberOption(a, "--runs", 3);
const noNative = flagOption(a, "--no-native");
const ab = option(a, "--ab", undefined)?.split(",");
const rounds = numberOption(a, "--rounds", 3);
const note = option(a, "--note", undefined);
const optBefore = option(a, "--opt-before", undefined);
const optAfter = option(a, "--opt-after", undefined);
const withAttention = flagOption(a, "--attention");
// (name, past, rows): src/kernels/random_attention.rs's SHAPES.
const ATTENTION_SHAPES = [["whole prefill", 0, 634], ["evidence on a prefix", 416, 218], ["one token", 634, 1]];
// The builder's files have no zero points (every one is 8); --zero-points
// gives the layer random ones, as q4_matmul does.
const zeroPoints = flagOption(a, "--zero-points");
const outArg = option(a, "--out", undefined);
const out = resultPath("dot_peak", "dot-peak", `dot-peak-${base}`, outArg);
if (a.length) throw new Error(`unknown arguments: ${a.join(" ")}`);
if (ab && ab.length !== 2) throw new Error("--ab: two .wasm files, BEFORE,AFTER");
for (const [k, v] of Object.entries({ threads, calls, ms: callMs, runs, rounds })) {
  if (!Number.isInteger(v) || v < 1) throw new Error(`--${k} must be a whole number ≥ 1, got ${v}`);
}
if (rowCounts.some((r) => !Number.isInteger(r) || r < 1)) throw new Error("--rows: whole numbers ≥ 1, comma-separated");
const log = (l) => console.error(l);

// Independent accumulators: enough to cover the instruction's latency at
// two a cycle, few enough that they and the two operands stay in x86's 16
// vector registers (V8 allocates xmm0-15). Several counts are tried and the
// best kept, because the lowering's temporaries differ by instruction.
const ACCUMULATORS = [8, 10, 12];
const UNROLL = 2; // rounds over the accumulators per loop iteration

const KINDS = {
  relaxed: { macs: 16, type: "i32", update: (acc) => `(i32x4.relaxed_dot_i8x16_i7x16_add_s (local.get ${acc}) (local.get $b) (local.get ${acc}))` },
  dot_i16: { macs: 8, type: "i32", update: (acc) => `(i32x4.add (local.get ${acc}) (i32x4.dot_i16x8_s (local.get ${acc}) (local.get $b)))` },
  madd: { macs: 4, type: "f32", update: (acc) => `(f32x4.relaxed_madd (local.get ${acc}) (local.get $b) (local.get ${acc}))` },
  // What attention may use: its sums keep `dot`'s bits in every build, so
  // a multiply and a separate add, never fused.
  mul_add: { macs: 4, type: "f32", update: (acc) => `(f32x4.add (local.get ${acc}) (f32x4.mul (local.get ${acc}) (local.get $b)))` },
};

/**
 * One exported function per kind and accumulator count: `(iterations, seed)
 * -> lane 0 of the sum`. Each update multiplies its own accumulator: with a
 * shared or fixed operand, an engine that lowers an instruction to a
 * multiply and a separate add may compute the multiply once (hoisted out of
 * the loop, or shared by every update) and time the add alone, as a first
 * version of this file measured (dot_i16 at more than 4 instructions a
 * cycle).
 */
function wat() {
  const funcs = [];
  for (const [kind, k] of Object.entries(KINDS)) {
    for (const n of ACCUMULATORS) {
      const accs = Array.from({ length: n }, (_, i) => `$acc${i}`);
      // The i7 operand stays within 0..127, as the relaxed dot product
      // needs; the float one is seed − 7, 0 for the seed the workers pass,
      // so the accumulators stay finite and never denormal (which would
      // slow the multiply-add), while the engine cannot know it.
      const init = k.type === "i32" ? "(i8x16.splat (local.get $seed))" : "(f32x4.splat (f32.convert_i32_s (local.get $seed)))";
      const splatB = k.type === "i32"
        ? "(i8x16.splat (i32.and (i32.add (local.get $seed) (i32.const 3)) (i32.const 63)))"
        : "(f32x4.splat (f32.convert_i32_s (i32.sub (local.get $seed) (i32.const 7))))";
      const body = Array.from({ length: UNROLL }, () => accs.map((acc) => `(local.set ${acc} ${k.update(acc)})`).join("\n")).join("\n");
      const add = k.type === "i32" ? "i32x4.add" : "f32x4.add";
      const sum = accs.slice(1).reduce((s, acc) => `(${add} ${s} (local.get ${acc}))`, `(local.get ${accs[0]})`);
      funcs.push(`(func (export "${kind}_${n}") (param $iters i32) (param $seed i32) (result ${k.type})
  (local $b v128) ${accs.map((acc) => `(local ${acc} v128)`).join(" ")}
  (local.set $b ${splatB})
  ${accs.map((acc, i) => `(local.set ${acc} ${k.type === "i32" ? `(i32x4.add ${init} (i32x4.splat (i32.const ${i})))` : `(f32x4.add ${init} (f32x4.splat (f32.const ${i})))`})`).join("\n  ")}
  (loop $l
    ${body}
    (br_if $l (local.tee $iters (i32.sub (local.get $iters) (i32.const 1)))))
  (${k.type}x4.extract_lane 0 ${sum}))`);
    }
  }
  return `(module\n${funcs.join("\n")})`;
}

function assemble() {
  const m = binaryen.parseText(wat());
  m.setFeatures(binaryen.Features.MVP | binaryen.Features.SIMD128 | binaryen.Features.RelaxedSIMD);
  if (!m.validate()) throw new Error("dot_peak: the generated module does not validate");
  const bytes = m.emitBinary();
  m.dispose();
  return bytes;
}

// Runs in each worker: a few short calls so V8 tiers the function up, one
// call sized to `ms`, then `calls` timed calls of that size.
const WORKER = `onmessage = async ({ data: { bytes, name, calls, ms } }) => {
  const { instance } = await WebAssembly.instantiate(bytes);
  const f = instance.exports[name];
  let iters = 100000, t = 0;
  for (let i = 0; i < 4; i++) { const t0 = performance.now(); f(iters, 7); t = performance.now() - t0; }
  iters = Math.max(1000, Math.round(iters * ms / Math.max(t, 0.05)));
  const times = [];
  for (let i = 0; i < calls; i++) { const t0 = performance.now(); f(iters, 7); times.push(performance.now() - t0); }
  postMessage({ iters, times });
};`;

/** In the page: `workers` workers running `name` at once; each one's iterations and call times. */
async function inPage({ bytes, name, workers, calls, ms, src }) {
  const url = URL.createObjectURL(new Blob([src], { type: "text/javascript" }));
  const ws = Array.from({ length: workers }, () => new Worker(url));
  const done = ws.map((w) => new Promise((ok, fail) => {
    w.onmessage = (e) => ok(e.data);
    w.onerror = (e) => fail(new Error(e.message));
  }));
  const u8 = new Uint8Array(bytes);
  ws.forEach((w) => w.postMessage({ bytes: u8, name, calls, ms }));
  const out = await Promise.all(done);
  ws.forEach((w) => w.terminate());
  URL.revokeObjectURL(url);
  return out;
}

/**
 * In a page: one of a build's benches (`KernelBench`: the product kernel;
 * `AttentionBench`: attention alone), made by `create(...args)`. Each of
 * the `calls` samples repeats `run()` for about `ms` (one run of a few rows
 * takes well under a millisecond), after untimed runs for as long.
 */
async function benchInPage({ module, bench, args, calls, ms }) {
  const mod = await import(module);
  await mod.default();
  const k = await mod[bench].create(...args);
  let reps = 1;
  for (let t0 = performance.now(); performance.now() - t0 < ms; reps++) k.run();
  const times = [];
  for (let i = 0; i < calls; i++) {
    const t0 = performance.now();
    for (let r = 0; r < reps; r++) k.run();
    times.push((performance.now() - t0) / reps);
  }
  const out = { macs: k.macs, threads: k.threads, kernel: bench === "KernelBench" ? k.kernel : undefined, reps, times };
  k.free();
  return out;
}

const median = (xs) => {
  const s = [...xs].sort((x, y) => x - y);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/** Multiply-adds a second: the median of the later half of the calls (the first ones may run before tier-up). */
function rate(kind, n, { iters, times }) {
  const macs = iters * UNROLL * n * KINDS[kind].macs;
  const later = times.slice(Math.floor(times.length / 2));
  return { iters, times_ms: times, gmacs: macs / (median(later) * 1e6), best_gmacs: macs / (Math.min(...times) * 1e6) };
}

/** The body's int4 products a token: q, k, v, o and the three MLP matrices of every layer. */
function bodyMacs(model) {
  const c = JSON.parse(readFileSync(join(ROOT, "models", model, "config.json"), "utf8"));
  const heads = c.num_attention_heads;
  const headDim = c.head_dim ?? c.hidden_size / heads;
  const q = heads * headDim;
  const kv = (c.num_key_value_heads ?? heads) * headDim;
  const h = c.hidden_size;
  return { macs: c.num_hidden_layers * (2 * h * q + 2 * h * kv + 3 * h * c.intermediate_size), config: { hidden: h, layers: c.num_hidden_layers, q, kv, mlp: c.intermediate_size } };
}

/** Binds a diagnostics build's .wasm with wasm-bindgen where the server reaches it; its module's URL path. */
function bind(wasm, label) {
  if (!existsSync(wasm)) throw new Error(`${wasm} is missing: run bash scripts/build_pkg.sh`);
  const dir = `target/bench/dot-peak/${label}`;
  execFileSync("wasm-bindgen", ["--target", "web", "--out-dir", join(ROOT, dir), "--out-name", "readout", wasm], { stdio: "inherit" });
  const opt = label === "after" ? optAfter : optBefore;
  if (opt) {
    // build_pkg.sh's flags for the threaded build, after wasm-bindgen as there.
    const bound = join(ROOT, dir, "readout_bg.wasm");
    const flags = ["threads", "bulk-memory", "nontrapping-float-to-int", "sign-ext", "mutable-globals", "reference-types", "multivalue", "simd", "relaxed-simd"].map((f) => `--enable-${f}`);
    execFileSync(join(ROOT, "node_modules/.bin/wasm-opt"), [...opt.trim().split(/\s+/), ...flags, bound, "-o", bound], { stdio: "inherit" });
  }
  return { label, wasm, built: statSync(wasm).mtime.toISOString(), module: `/${dir}/readout.js`, ...(opt ? { wasm_opt: opt } : {}) };
}

const q4f16 = `${base}-q4f16`;
const body = bodyMacs(q4f16);
const bytes = [...assemble()];
// [build, kind, thread counts]: the threaded build's product is the relaxed
// dot product, the single build's dot_i16.
const builds = ab
  ? ab.map((w, i) => [bind(resolve(w), i ? "after" : "before"), "threads", [1, threads]])
  : [
    [bind(join(ROOT, "target/threads/wasm32-unknown-unknown/release/readout.wasm"), "threads"), "threads", [1, threads]],
    [bind(join(ROOT, "target/wasm32-unknown-unknown/release/readout.wasm"), "single"), "single", [1]],
  ];
const ctx = await start({ webgpu: false });
const peaks = {};
const kernels = [];
const attention = [];
let browserVersion;
// Any page of the server gives the workers an http origin, cross-origin isolated.
const blank = async () => {
  const p = await ctx.browser.newPage();
  await p.goto(`${ctx.base}/package.json`);
  return p;
};
try {
  browserVersion = ctx.browser.version();
  const page = await blank();
  for (const kind of Object.keys(KINDS)) {
    peaks[kind] = { macs_per_instruction: KINDS[kind].macs, by_workers: {} };
    for (const workers of [1, threads]) {
      const tried = [];
      for (const n of ACCUMULATORS) {
        log(`[dot_peak] ${kind}, ${n} accumulators, ${workers} worker(s)`);
        const out = await page.evaluate(inPage, { bytes, name: `${kind}_${n}`, workers, calls, ms: callMs, src: WORKER });
        const each = out.map((o) => rate(kind, n, o));
        tried.push({ accumulators: n, workers: each, gmacs_total: each.reduce((s, r) => s + r.gmacs, 0) });
      }
      const best = tried.reduce((b, t) => (t.gmacs_total > b.gmacs_total ? t : b));
      peaks[kind].by_workers[workers] = { gmacs: best.gmacs_total, accumulators: best.accumulators, tried };
    }
  }
  await page.close();
  for (let round = 1; round <= (ab ? rounds : 1); round++) {
    // Even rounds run the AFTER build first: with one order every round,
    // drift within a round (the host's load, the second thread's warm-up)
    // favoured the build that ran second. Two identical kernels measured
    // 1.16-1.17x apart on 2 threads that way (2026-12-06).
    for (const [b, kind, counts] of round % 2 ? builds : [...builds].reverse()) {
      // A page per build: its kernel workers live as long as the page.
      const p = await blank();
      for (const t of counts) {
        for (const rows of rowCounts) {
          log(`[dot_peak] kernel, ${b.label} build${ab ? `, round ${round}` : ""}, ${t} thread(s), ${rows} rows`);
          const r = await p.evaluate(benchInPage, { module: b.module, bench: "KernelBench", args: [rows, t, zeroPoints], calls, ms: callMs });
          const later = r.times.slice(Math.floor(r.times.length / 2));
          const gmacs = r.macs / (median(later) * 1e6);
          const peak = peaks[kind === "threads" ? "relaxed" : "dot_i16"].by_workers[r.threads]?.gmacs;
          kernels.push({ build: b.label, round, kernel: r.kernel, threads: r.threads, rows, runs_per_sample: r.reps, times_ms: r.times, gmacs, share_of_instruction_peak: peak ? gmacs / peak : null });
        }
        for (const [shape, past, rows] of withAttention ? ATTENTION_SHAPES : []) {
          log(`[dot_peak] attention, ${b.label} build${ab ? `, round ${round}` : ""}, ${t} thread(s), ${shape}`);
          const r = await p.evaluate(benchInPage, { module: b.module, bench: "AttentionBench", args: [past, rows, t], calls, ms: callMs });
          const ms = median(r.times.slice(Math.floor(r.times.length / 2)));
          const gmacs = r.macs / (ms * 1e6);
          const peak = peaks.mul_add.by_workers[r.threads]?.gmacs;
          attention.push({ build: b.label, round, threads: r.threads, shape, past, rows, runs_per_sample: r.reps, times_ms: r.times, ms_per_layer: ms, gmacs, share_of_mul_add_peak: peak ? gmacs / peak : null });
        }
      }
      await p.close();
    }
  }
} finally {
  await ctx.close();
}

const native = noNative ? [] : nativeSweep("ort", [`${base}-q4f16`, `${base}-q4`, `${base}-fp32`], { lengths, runs, threads, log });
const fastest = native.length ? native.reduce((b, v) => (v.fit.per_token_ms < b.fit.per_token_ms ? v : b)) : null;
const goalMs = fastest ? 1.5 * fastest.fit.per_token_ms : null;
const floors = Object.fromEntries(Object.entries(peaks).filter(([k]) => k !== "madd" && k !== "mul_add").map(([kind, p]) => {
  const g = p.by_workers[threads].gmacs;
  const floorMs = body.macs / (g * 1e6);
  return [kind, { body_products_ms_at_peak: floorMs, share_of_goal: goalMs ? floorMs / goalMs : null }];
}));
// With --ab: per thread count and row count, the median over rounds of each
// build, and after over before.
const abSummary = ab && [...new Set(kernels.map((k) => `${k.threads}|${k.rows}`))].map((key) => {
  const [t, rows] = key.split("|").map(Number);
  const of = (label) => median(kernels.filter((k) => k.build === label && k.threads === t && k.rows === rows).map((k) => k.gmacs));
  const before = of("before"), after = of("after");
  return { threads: t, rows, before_gmacs: before, after_gmacs: after, after_over_before: after / before };
});
const attentionAb = ab && withAttention && [...new Set(attention.map((k) => `${k.threads}|${k.shape}`))].map((key) => {
  const [t, shape] = key.split("|");
  const of = (label) => median(attention.filter((k) => k.build === label && k.threads === Number(t) && k.shape === shape).map((k) => k.ms_per_layer));
  const before = of("before"), after = of("after");
  return { threads: Number(t), shape, before_ms: before, after_ms: after, before_over_after: before / after };
});
const result = {
  note, zero_points: zeroPoints, model: base, threads, calls, call_ms: callMs, unroll: UNROLL,
  browser: browserVersion, body: { multiply_adds_per_token: body.macs, ...body.config },
  builds: builds.map(([b]) => ({ label: b.label, wasm: b.wasm, built: b.built })),
  peaks, kernels, ab: abSummary, attention, attention_ab: attentionAb, native, fastest_native: fastest && { model: fastest.model, per_token_ms: fastest.fit.per_token_ms },
  goal_per_token_ms: goalMs, floors,
};
writeResult(out, "dot-peak", "bench/runners/dot_peak.mjs", result);
for (const [kind, p] of Object.entries(peaks)) {
  const w = Object.entries(p.by_workers).map(([n, r]) => `${n} worker(s) ${r.gmacs.toFixed(1)} G/s (${r.accumulators} acc.)`).join(", ");
  console.log(`${kind} (${p.macs_per_instruction} multiply-adds an instruction): ${w}`);
}
for (const k of kernels) {
  const share = k.share_of_instruction_peak;
  console.log(`kernel ${k.kernel} (${k.build} build${ab ? `, round ${k.round}` : ""}), ${k.threads} thread(s), ${k.rows} rows: ${k.gmacs.toFixed(1)} G/s${share ? `, ${(100 * share).toFixed(0)} % of its instruction's peak` : ""}`);
}
for (const k of attention) {
  const share = k.share_of_mul_add_peak;
  console.log(`attention (${k.build} build${ab ? `, round ${k.round}` : ""}), ${k.threads} thread(s), ${k.shape}: ${k.ms_per_layer.toFixed(2)} ms a layer, ${k.gmacs.toFixed(1)} G/s${share ? `, ${(100 * share).toFixed(0)} % of mul_add's peak` : ""}`);
}
for (const r of attentionAb || []) {
  console.log(`A/B attention ${r.threads} thread(s), ${r.shape}: ${r.before_ms.toFixed(2)} -> ${r.after_ms.toFixed(2)} ms a layer (${r.before_over_after.toFixed(2)}x, medians of ${rounds})`);
}
for (const r of abSummary ?? []) {
  console.log(`A/B ${r.threads} thread(s), ${r.rows} rows: ${r.before_gmacs.toFixed(1)} -> ${r.after_gmacs.toFixed(1)} G/s (${r.after_over_before.toFixed(2)}x, medians of ${rounds})`);
}
console.log(`body: ${(body.macs / 1e6).toFixed(1)} M multiply-adds a token`);
if (fastest) console.log(`fastest native (${fastest.model}): ${fastest.fit.per_token_ms.toFixed(3)} ms/token; goal ≤ ${goalMs.toFixed(3)} ms/token`);
for (const [kind, f] of Object.entries(floors)) {
  console.log(`${kind}: the body's products alone at peak ${f.body_products_ms_at_peak.toFixed(3)} ms/token${f.share_of_goal ? `, ${(100 * f.share_of_goal).toFixed(0)} % of the goal` : ""}`);
}
log(`[dot_peak] wrote ${out}`);
