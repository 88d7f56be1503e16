// Runner of the benchmark page: drives bench/page/ in headless Chromium, runs the
// same sweep on native ONNX Runtime (`readout sweep`) in the same invocation,
// and writes bench/results/logit-cost/<date>-<model>-<backend>.json with the browser /
// native ratios beside the page's own comparisons.
// `--runtime deno` runs the page's own sweep (bench/page/sweep_engine.mjs)
// in Deno instead, whose WebGPU reaches Mesa's lavapipe with shader-f16, so
// q4f16 files run on float16 WebGPU here: written to
// <date>-<model>-<backend>-deno.json, marked emulated when the adapter is a
// CPU's. Only the engine's variants run there (no transformers.js, allowedMass
// or modes sections, which need the page).
//
//   node bench/runners/run.mjs --model smollm2-135m-instruct-q4 --backend wasm [--runtime chromium|deno]
//        [--lengths 1,8,16,32,64,96] [--runs 5] [--warmup 1] [--prefix 256]
//        [--variants stock,trimmed,pruned] [--threads N] [--build single|relaxed|threads] [--plain] [--no-native]
//        [--no-transformers] [--no-mass] [--no-modes] [--out FILE] [--screenshot FILE]
//        [--timeout-s 3600] [--bin target/release/readout] [--wllama /models/gguf/FILE.gguf]
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync } from "node:fs";
import { cpus } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { serve, ROOT } from "../../harness/serve.mjs";
import { launch } from "../../harness/chromium.mjs";
import { denoAvailable, denoEvaluate, DENO_ORT_BASE, fileUrl } from "../../harness/deno.mjs";
import { fitRatio, maxAbsDiff } from "../page/compare.mjs";
import { resultPath, writeResult } from "./result_file.mjs";

const SUFFIX = { stock: "", trimmed: "-trimmed", pruned: "-trimmed-pruned" };

export function parseArgs(argv) {
  const a = [...argv];
  const take = (k, d) => {
    const i = a.indexOf(k);
    return i < 0 ? d : a.splice(i, 2)[1];
  };
  const flag = (k) => {
    const i = a.indexOf(k);
    return i < 0 ? false : (a.splice(i, 1), true);
  };
  const o = {
    model: take("--model", "smollm2-135m-instruct-q4"),
    backend: take("--backend", "wasm"),
    lengths: take("--lengths", "1,8,16,32,64,96"),
    runs: Number(take("--runs", 5)),
    warmup: Number(take("--warmup", 1)),
    prefix: Number(take("--prefix", 256)),
    options: Number(take("--options", 4)),
    variants: take("--variants", "stock,trimmed,pruned"),
    threads: Number(take("--threads", Math.min(cpus().length, 4))),
    // The package build the page loads: threads is the threaded one (wasm
    // atomics; the page server makes every page cross-origin isolated),
    // relaxed the single-thread one with relaxed SIMD's dot product.
    build: take("--build", "single"),
    // The page served without COOP/COEP, as most pages are: not isolated.
    plain: flag("--plain"),
    runtime: take("--runtime", "chromium"),
    out: take("--out", undefined),
    bin: take("--bin", undefined),
    screenshot: take("--screenshot", undefined),
    // A GGUF's URL on the page server: the same sweep through wllama.
    wllama: take("--wllama", undefined),
    timeoutS: Number(take("--timeout-s", 3600)),
    native: !flag("--no-native"),
    transformers: !flag("--no-transformers"),
    mass: !flag("--no-mass"),
    modes: !flag("--no-modes"),
  };
  if (a.length) throw new Error(`unknown arguments: ${a.join(" ")}`);
  if (!["wasm", "webgpu", "cpu"].includes(o.backend)) throw new Error(`--backend: ${o.backend} is not wasm, webgpu or cpu`);
  if (!["single", "relaxed", "threads"].includes(o.build)) throw new Error(`--build: ${o.build} is not single, relaxed or threads`);
  if (o.plain && o.build === "threads") throw new Error("--plain: the threaded build needs a cross-origin isolated page");
  if (!["chromium", "deno"].includes(o.runtime)) throw new Error(`--runtime: ${o.runtime} is not chromium or deno`);
  if (o.runtime === "deno" && o.build !== "single") throw new Error("--runtime deno runs the single build (Deno's workers are not the page's)");
  return o;
}

function readoutBin(given) {
  if (given) return resolve(ROOT, given);
  const bin = join(ROOT, "target", "release", "readout");
  execFileSync("cargo", ["build", "--locked", "--release", "--bin", "readout"], { cwd: ROOT, stdio: ["ignore", "ignore", "inherit"] });
  return bin;
}

/** The same sweep on native ONNX Runtime, same ids (core::sweep). */
function nativeSweep(o) {
  const out = join(ROOT, "target", "bench", `native-${o.model}.json`);
  mkdirSync(dirname(out), { recursive: true });
  const models = o.variants.split(",").flatMap((v) => ["--model", `models/${o.model}${SUFFIX[v]}`]);
  execFileSync(readoutBin(o.bin), ["sweep", "--runtime", "ort", ...models, "--lengths", o.lengths, "--runs", String(o.runs), "--warmup", String(o.warmup),
    "--prefix", String(o.prefix), "--options", String(o.options), "--threads", String(o.threads), "--out", out], { cwd: ROOT, stdio: ["ignore", "inherit", "inherit"] });
  return JSON.parse(readFileSync(out, "utf8"));
}



// A CPU implementation of WebGPU (Chromium's SwiftShader, or Mesa's lavapipe
// reached through Vulkan): its times are not a GPU's. The page has the same test.
const CPU_ADAPTER = /swiftshader|llvmpipe|lavapipe/i;

/** The page's sweep of each variant, run in Deno (the page's module, not the page). */
async function runDeno(o, log) {
  if (!denoAvailable()) throw new Error("deno is missing; run bash scripts/setup.sh");
  const cfg = {
    backend: o.backend, lengths: o.lengths.split(",").map(Number), runs: o.runs, warmup: o.warmup,
    prefix: o.prefix, options: o.options, threads: 1,
  };
  const variants = o.variants.split(",").map((v) => {
    if (!(v in SUFFIX)) throw new Error(`--variants: ${v} is not stock, trimmed or pruned`);
    return { id: `${o.model}${SUFFIX[v]}`, variant: v, source: fileUrl(`models/${o.model}${SUFFIX[v]}/`) };
  });
  const r = await denoEvaluate(
    async ({ cfg, variants, moduleUrl, ORT_BASE }) => {
      const { sweepEngine } = await import(moduleUrl);
      const log = (l) => console.log(`[progress] ${l}`);
      const adapter = cfg.backend === "webgpu" ? await navigator.gpu?.requestAdapter() : null;
      const out = [];
      for (const v of variants) out.push(await sweepEngine(globalThis.readout, cfg, { ...v, ortBase: ORT_BASE }, log));
      for (const v of out) delete v.ids;
      const a = adapter?.info ?? {};
      return {
        deno: Deno.version.deno,
        adapter: adapter ? { vendor: a.vendor, architecture: a.architecture, device: a.device, description: a.description, features: [...adapter.features].sort() } : null,
        variants: out,
      };
    },
    { cfg, variants, moduleUrl: fileUrl("bench/page/sweep_engine.mjs"), ORT_BASE: DENO_ORT_BASE },
    { timeoutMs: o.timeoutS * 1000, onLine: (l) => l.startsWith("[progress] ") && log(`[bench] ${l.slice(11)}`) },
  );
  const emulated = o.backend === "webgpu" && CPU_ADAPTER.test(JSON.stringify({ ...r.adapter, features: undefined }));
  return {
    benchmark: "logit_cost", runtime: `deno ${r.deno}`, date: new Date().toISOString().slice(0, 10),
    adapter: r.adapter, emulated, shader_f16: r.adapter ? r.adapter.features.includes("shader-f16") : null,
    threads: cfg.threads, build: "single", model: o.model, backend: o.backend, prefix_tokens: cfg.prefix, lengths: cfg.lengths,
    runs: cfg.runs, warmup: cfg.warmup, options: cfg.options, variants: r.variants, ratios: [],
  };
}

/** The benchmark page in headless Chromium, to its end (window.benchResult). */
async function runChromium(o, log) {
  const server = await serve(0);
  const browser = await launch({ webgpu: o.backend === "webgpu" });
  const query = new URLSearchParams({
    model: o.model, backend: o.backend, lengths: o.lengths, runs: o.runs, warmup: o.warmup, prefix: o.prefix,
    options: o.options, variants: o.variants, threads: o.threads, transformers: o.transformers ? "1" : "0", mass: o.mass ? "1" : "0",
    modes: o.modes ? "1" : "0", autorun: "1", build: o.build,
  });
  if (o.wllama) query.set("wllama", o.wllama);
  try {
    const page = await browser.newPage({ viewport: { width: 1180, height: 900 } });
    const tail = [];
    page.on("console", (m) => {
      const t = m.text();
      tail.push(t);
      if (t.startsWith("[bench]")) log(t);
    });
    page.on("pageerror", (e) => tail.push(`pageerror: ${e.message}`));
    await page.goto(`http://127.0.0.1:${server.address().port}${o.plain ? "/plain" : ""}/bench/page/?${query}`);
    await page.waitForFunction(() => window.benchDone === true, null, { timeout: o.timeoutS * 1000, polling: 1000 });
    const err = await page.evaluate(() => window.benchError);
    if (err) throw new Error(`${err}\n${tail.slice(-15).join("\n")}`);
    const result = await page.evaluate(() => window.benchResult);
    if (o.screenshot) {
      mkdirSync(dirname(resolve(o.screenshot)), { recursive: true });
      await page.screenshot({ path: o.screenshot, fullPage: true });
      log(`[bench] screenshot ${o.screenshot}`);
    }
    return result;
  } finally {
    await browser.close();
    server.close();
  }
}

export async function runBench(o, log = (l) => console.error(l)) {
  const result = o.runtime === "deno" ? await runDeno(o, log) : await runChromium(o, log);
  result.runner = "bench/runners/run.mjs";
  if (o.native) {
    log(`[bench] native counterpart: readout sweep on the same ids`);
    const native = nativeSweep(o);
    result.native = native;
    const where = o.runtime === "deno" ? "deno" : "browser";
    for (const v of result.variants) {
      const n = native.variants.find((x) => x.id === v.id);
      if (!n) continue;
      result.ratios.push({
        what: `${v.variant}: native vs ${where} ${o.backend}`, faster: "native", slower: `${where} ${o.backend}`,
        per_length: v.median_ms.map((m, i) => m / n.median_ms[i]),
        at_45_tokens_by_fit: fitRatio(v.fit, n.fit),
        max_abs_dp: Math.max(...v.probs.map((p, i) => maxAbsDiff(p, n.probs[i]))),
        bytes_read_back: { browser: v.bytes_read_back, native: n.bytes_read_back },
      });
    }
  }
  return result;
}

function printSummary(r) {
  const head = ["variant", ...r.lengths.map((n) => `n=${n}`), "fixed", "/token", "R²"];
  console.log(head.join("\t"));
  const rows = [...r.variants, ...(r.transformers ? [r.transformers] : []), ...(r.native?.variants ?? []).map((v) => ({ ...v, variant: `native ${v.id}` }))];
  for (const v of rows) {
    console.log([v.variant, ...v.median_ms.map((m) => m.toFixed(1)), v.fit?.fixed_ms?.toFixed(1), v.fit?.per_token_ms?.toFixed(2), v.fit?.r2?.toFixed(4)].join("\t"));
  }
  for (const c of r.ratios) console.log(`${c.what}: ${c.per_length.map((x) => x.toFixed(2) + "×").join(" ")}  (45 by fit ${c.at_45_tokens_by_fit?.toFixed(2)}×)  max |Δp| ${c.max_abs_dp == null ? "(other weights)" : c.max_abs_dp.toExponential(1)}`);
  if (r.allowed_mass) console.log(`allowedMass: JavaScript / engine ${r.allowed_mass.javascript_over_engine.toFixed(2)}×, |Δ| ${r.allowed_mass.abs_diff_allowed_mass.toExponential(1)}`);
  if (r.transformers_error) console.log(`transformers.js: ${r.transformers_error}`);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const o = parseArgs(process.argv.slice(2));
  const out = resultPath("run", "logit-cost", `${o.model}-${o.backend}${o.runtime === "deno" ? "-deno" : ""}`, o.out);
  const r = await runBench(o);
  writeResult(out, "logit-cost", "bench/runners/run.mjs", r, { emulated: o.backend === "webgpu" });
  printSummary(r);
  console.error(`[bench] wrote ${out}`);
}
