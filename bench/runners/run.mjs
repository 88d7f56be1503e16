// Runner of the benchmark page: drives bench/page/ in headless Chromium, runs the
// same sweep on native ONNX Runtime (`readout sweep`) in the same invocation,
// and writes bench/results/<date>-<model>-<backend>.json with the browser /
// native ratios beside the page's own comparisons.
//
//   node bench/runners/run.mjs --model smollm2-135m-instruct-q4 --backend wasm
//        [--lengths 1,8,16,32,64,96] [--runs 5] [--warmup 1] [--prefix 256]
//        [--variants stock,trimmed,pruned] [--threads N] [--build single|threads] [--no-native]
//        [--no-transformers] [--no-mass] [--no-modes] [--out FILE] [--screenshot FILE]
//        [--timeout-s 3600] [--bin target/release/readout]
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { serve, ROOT } from "../../scripts/serve.mjs";
import { launch } from "../../scripts/chromium.mjs";
import { fitRatio, maxAbsDiff } from "../page/compare.mjs";

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
    // atomics; the page server makes every page cross-origin isolated).
    build: take("--build", "single"),
    out: take("--out", undefined),
    bin: take("--bin", undefined),
    screenshot: take("--screenshot", undefined),
    timeoutS: Number(take("--timeout-s", 3600)),
    native: !flag("--no-native"),
    transformers: !flag("--no-transformers"),
    mass: !flag("--no-mass"),
    modes: !flag("--no-modes"),
  };
  if (a.length) throw new Error(`unknown arguments: ${a.join(" ")}`);
  if (!["wasm", "webgpu", "cpu"].includes(o.backend)) throw new Error(`--backend: ${o.backend} is not wasm, webgpu or cpu`);
  if (!["single", "threads"].includes(o.build)) throw new Error(`--build: ${o.build} is not single or threads`);
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
  execFileSync(readoutBin(o.bin), ["sweep", ...models, "--lengths", o.lengths, "--runs", String(o.runs), "--warmup", String(o.warmup),
    "--prefix", String(o.prefix), "--options", String(o.options), "--threads", String(o.threads), "--out", out], { cwd: ROOT, stdio: ["ignore", "inherit", "inherit"] });
  return JSON.parse(readFileSync(out, "utf8"));
}



export async function runBench(o, log = (l) => console.error(l)) {
  const server = await serve(0);
  const browser = await launch({ webgpu: o.backend === "webgpu" });
  const query = new URLSearchParams({
    model: o.model, backend: o.backend, lengths: o.lengths, runs: o.runs, warmup: o.warmup, prefix: o.prefix,
    options: o.options, variants: o.variants, threads: o.threads, transformers: o.transformers ? "1" : "0", mass: o.mass ? "1" : "0",
    modes: o.modes ? "1" : "0", autorun: "1", build: o.build,
  });
  let result;
  try {
    const page = await browser.newPage({ viewport: { width: 1180, height: 900 } });
    const tail = [];
    page.on("console", (m) => {
      const t = m.text();
      tail.push(t);
      if (t.startsWith("[bench]")) log(t);
    });
    page.on("pageerror", (e) => tail.push(`pageerror: ${e.message}`));
    await page.goto(`http://127.0.0.1:${server.address().port}/bench/page/?${query}`);
    await page.waitForFunction(() => window.benchDone === true, null, { timeout: o.timeoutS * 1000, polling: 1000 });
    const err = await page.evaluate(() => window.benchError);
    if (err) throw new Error(`${err}\n${tail.slice(-15).join("\n")}`);
    result = await page.evaluate(() => window.benchResult);
    if (o.screenshot) {
      mkdirSync(dirname(resolve(o.screenshot)), { recursive: true });
      await page.screenshot({ path: o.screenshot, fullPage: true });
      log(`[bench] screenshot ${o.screenshot}`);
    }
  } finally {
    await browser.close();
    server.close();
  }
  result.runner = "bench/runners/run.mjs";
  if (o.native) {
    log(`[bench] native counterpart: readout sweep on the same ids`);
    const native = nativeSweep(o);
    result.native = native;
    for (const v of result.variants) {
      const n = native.variants.find((x) => x.id === v.id);
      if (!n) continue;
      result.ratios.push({
        what: `${v.variant}: native vs browser ${o.backend}`, faster: "native", slower: `browser ${o.backend}`,
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
  for (const c of r.ratios) console.log(`${c.what}: ${c.per_length.map((x) => x.toFixed(2) + "×").join(" ")}  (45 by fit ${c.at_45_tokens_by_fit?.toFixed(2)}×)  max |Δp| ${c.max_abs_dp.toExponential(1)}`);
  if (r.allowed_mass) console.log(`allowedMass: JavaScript / engine ${r.allowed_mass.javascript_over_engine.toFixed(2)}×, |Δ| ${r.allowed_mass.abs_diff_allowed_mass.toExponential(1)}`);
  if (r.transformers_error) console.log(`transformers.js: ${r.transformers_error}`);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const o = parseArgs(process.argv.slice(2));
  const r = await runBench(o);
  const out = o.out ?? join(ROOT, "bench", "results", `${r.date}-${o.model}-${o.backend}.json`);
  mkdirSync(dirname(resolve(out)), { recursive: true });
  writeFileSync(out, JSON.stringify(r, null, 2) + "\n");
  printSummary(r);
  console.error(`[bench] wrote ${out}`);
}
