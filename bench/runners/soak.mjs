// The soak (issue: hostile files and long runs): 10,000 criteria on one
// state, with memory sampled as they run, and its slope reported.
//   - natively: `readout score` over a state of 10,000 criteria, on ONNX
//     Runtime and on our runtime; the process's RSS read from /proc every
//     100 ms;
//   - in Chromium: the threaded build's `cpu` backend (2 threads), the same
//     10,000 criteria as 100 calls of 100 on one state; after each call the
//     wasm heap (the module's memory), the page's JS heap (CDP), and the RSS
//     of every Chromium process.
// Then 10 MB of evidence, which must be refused in well under a second with
// the heap unchanged. Slopes are least squares over the samples after the
// first 10 % (warm-up), in bytes per criterion, beside the residuals' spread,
// so "no growth beyond noise" is a comparison made in the same run. The
// JS heap is read after a forced collection (CDP).
// Writes bench/results/soak/<date>-soak-<model>.json.
//   node bench/runners/soak.mjs [--model qwen3-tiny-random-q4] [--criteria 10000] [--only native|browser]
import { spawn } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { harness, numberOption, option, ROOT, start } from "../../harness/browser.mjs";
import { resultPath, writeResult } from "./result_file.mjs";

const args = process.argv.slice(2);
const model = option(args, "--model", "qwen3-tiny-random-q4");
const total = numberOption(args, "--criteria", 10_000);
const only = option(args, "--only", "all"); // native | browser | all
const perCall = 100;
const log = (m) => process.stderr.write(`[soak] ${m}\n`);

// One state: the fixture's first, its criteria cycled to `total` (ids made
// unique; the cycle repeats the same work, so memory should stay flat).
const fixture = readFileSync(join(ROOT, "tests/fixtures/authored.jsonl"), "utf8").trim().split("\n").map(JSON.parse);
const base = fixture[0];
const pool = fixture.flatMap((s) => s.criteria);
const criteria = Array.from({ length: total }, (_, i) => ({ ...pool[i % pool.length], id: `c${i}` }));
const state = { ...base, id: "soak", criteria };

/** Least squares y = a + b x over the points after the first 10 %, with the residuals' standard deviation. */
function fit(xs, ys) {
  const from = Math.floor(xs.length / 10);
  const x = xs.slice(from), y = ys.slice(from);
  const n = x.length;
  if (n < 3) return null;
  const mx = x.reduce((a, v) => a + v, 0) / n, my = y.reduce((a, v) => a + v, 0) / n;
  let sxy = 0, sxx = 0;
  for (let i = 0; i < n; i++) { sxy += (x[i] - mx) * (y[i] - my); sxx += (x[i] - mx) ** 2; }
  const b = sxx ? sxy / sxx : 0;
  const res = y.map((v, i) => v - (my + b * (x[i] - mx)));
  const sd = Math.sqrt(res.reduce((a, v) => a + v * v, 0) / Math.max(1, n - 2));
  const span = x[n - 1] - x[0];
  return {
    bytes_per_criterion: b,
    growth_over_run_bytes: b * span,
    residual_sd_bytes: sd,
    within_noise: Math.abs(b * span) <= 2 * sd || Math.abs(b * span) < 4096,
    first_bytes: y[0],
    last_bytes: y[n - 1],
    min_bytes: Math.min(...y),
    max_bytes: Math.max(...y),
    samples: n,
  };
}

function rssOf(pid) {
  try {
    const m = readFileSync(`/proc/${pid}/status`, "utf8").match(/VmRSS:\s+(\d+) kB/);
    return m ? Number(m[1]) * 1024 : null;
  } catch {
    return null;
  }
}

/** The process and all its descendants (Chromium's renderers, GPU and utility processes). */
function treeRss(root) {
  let sum = 0;
  const walk = (pid) => {
    sum += rssOf(pid) ?? 0;
    let kids = "";
    try { kids = readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8"); } catch { return; }
    for (const k of kids.trim().split(/\s+/).filter(Boolean)) walk(Number(k));
  };
  walk(root);
  return sum;
}

async function native(runtime) {
  const dir = join(tmpdir(), `readout-soak-${process.pid}`);
  mkdirSync(dir, { recursive: true });
  const file = join(dir, "state.json");
  writeFileSync(file, JSON.stringify(state));
  const bin = join(ROOT, "target/release/readout");
  const t0 = performance.now();
  const child = spawn(bin, ["score", "--model", join(ROOT, "models", model), "--state", file, "--runtime", runtime, "--threads", "2"], { stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  child.stdout.on("data", (d) => (out += d));
  const samples = [];
  const timer = setInterval(() => {
    const r = rssOf(child.pid);
    if (r) samples.push([performance.now() - t0, r]);
  }, 100);
  const code = await new Promise((res) => child.on("close", res));
  clearInterval(timer);
  const wallMs = performance.now() - t0;
  if (code !== 0) throw new Error(`readout score --runtime ${runtime} exited ${code}`);
  const decisions = JSON.parse(out).decisions ?? JSON.parse(out);
  const n = Array.isArray(decisions) ? decisions.length : null;
  // Time is the x axis here (the CLI prints nothing until the end); a
  // criterion's share of it turns the slope into bytes per criterion. The
  // load's climb is cut by taking samples from the peak of the first 20 %.
  const ms = samples.map((s) => s[0]);
  const rss = samples.map((s) => s[1]);
  const perMs = total / wallMs;
  const f = fit(ms.map((t) => t * perMs), rss);
  log(`native ${runtime}: ${n} decisions in ${(wallMs / 1000).toFixed(1)} s, RSS ${(rss.at(-1) / 2 ** 20).toFixed(1)} MiB, slope ${f?.bytes_per_criterion.toFixed(2)} B/criterion`);
  return { runtime, decisions: n, wall_ms: Math.round(wallMs), peak_rss_bytes: Math.max(...rss), rss: f, x: "criteria, from elapsed time at the run's mean rate" };
}

async function browser() {
  const ctx = await start({ webgpu: false });
  const pageLog = [];
  try {
    const page = await harness(ctx, pageLog, { build: "threads" });
    const cdp = await page.context().newCDPSession(page);
    await cdp.send("Performance.enable");
    // Collected first: what is left is what the calls keep, not garbage
    // waiting for a collection that happens when V8 likes.
    const jsHeap = async () => {
      await cdp.send("HeapProfiler.collectGarbage");
      return (await cdp.send("Performance.getMetrics")).metrics.find((m) => m.name === "JSHeapUsedSize").value;
    };
    // Playwright starts Chromium as this process's child: every descendant
    // but this process is Chromium's (the native runs have ended).
    const chromiumRss = () => treeRss(process.pid) - (rssOf(process.pid) ?? 0);
    await page.evaluate(async (source) => {
      window.soakEngine = await window.readout.Engine.load(source, { backend: "cpu", threads: 2 });
    }, `/models/${model}/`);
    const { criteria: _, ...head } = state;
    await page.evaluate(async (head) => {
      window.soakState = await window.soakEngine.prefill({ ...head, criteria: [] });
    }, head);
    // The control: as many page.evaluate calls that score nothing, so what
    // the harness itself keeps per call (DevTools holds each evaluated
    // script) is measured beside what the engine keeps.
    const cx = [], cjs = [];
    for (let at = 0; at < total; at += perCall) {
      await page.evaluate(async (n) => [n].length + window.readout.memory.buffer.byteLength, at);
      cx.push(at + perCall);
      cjs.push(await jsHeap());
    }
    const xs = [], wasm = [], js = [], rss = [];
    const t0 = performance.now();
    for (let at = 0; at < total; at += perCall) {
      const batch = criteria.slice(at, at + perCall);
      const heap = await page.evaluate(async (batch) => {
        const ds = await window.soakState.scoreAll(batch);
        if (ds.length !== batch.length) throw new Error(`${ds.length} decisions for ${batch.length}`);
        return window.readout.memory.buffer.byteLength;
      }, batch);
      xs.push(at + batch.length);
      wasm.push(heap);
      js.push(await jsHeap());
      rss.push(chromiumRss());
      if ((at / perCall) % 10 === 9) log(`chromium cpu threads: ${at + batch.length} criteria, wasm heap ${(heap / 2 ** 20).toFixed(1)} MiB, ${((performance.now() - t0) / 1000).toFixed(0)} s`);
    }
    const scoreMs = performance.now() - t0;
    // 10 MB of evidence: refused by name, its cost timed, the heap read
    // before and after; then the state scores on.
    const big = await page.evaluate(async (head) => {
      const evidence = "The parcel arrived two days late and the box was damaged. ".repeat(10_000_000 / 58);
      const before = window.readout.memory.buffer.byteLength;
      const t = performance.now();
      let code = null, message = null;
      try {
        await window.soakEngine.prefill({ ...head, evidence, criteria: [] });
      } catch (e) {
        code = e.code;
        message = String(e.message).slice(0, 200);
      }
      const ms = performance.now() - t;
      const after = window.readout.memory.buffer.byteLength;
      const again = await window.soakState.scoreAll([{ id: "again", question: "Was the parcel late?", options: [{ id: "yes", description: "Yes" }, { id: "no", description: "No" }] }]);
      return { evidence_bytes: evidence.length, code, message, refused_ms: ms, heap_before: before, heap_after: after, scores_after: again.length === 1 };
    }, head);
    log(`chromium: 10 MB evidence → ${big.code} in ${big.refused_ms.toFixed(0)} ms, heap ${big.heap_before} → ${big.heap_after}`);
    await page.evaluate(async () => { await window.soakState.dispose(); await window.soakEngine.dispose(); });
    const chromium = await ctx.browser.version();
    return {
      backend: "cpu", build: "threads", threads: 2, chromium, calls: xs.length, criteria_per_call: perCall,
      score_ms: Math.round(scoreMs), ms_per_criterion: scoreMs / total,
      wasm_heap: fit(xs, wasm), js_heap: fit(xs, js), js_heap_control: fit(cx, cjs), chromium_rss: fit(xs, rss),
      ten_megabytes: big,
    };
  } catch (e) {
    throw new Error(`${e.message}\n${pageLog.slice(-10).join("\n")}`);
  } finally {
    await ctx.close();
  }
}

const out = resultPath("soak", "soak", `soak-${model}`);
const result = {
  host: { cpu: cpus()[0]?.model, cores: cpus().length, node: process.version },
  model,
  criteria: total,
  note: "slopes are least squares after the first 10 % of samples; within_noise: the fitted growth over the run is within 2 residual SDs (or under 4 kB)",
  native: [],
  browser: null,
};
if (only !== "browser") for (const rt of ["ort", "own"]) result.native.push(await native(rt));
if (only !== "native") result.browser = await browser();
writeResult(out, "soak", "bench/runners/soak.mjs", result);
log(`wrote ${out}`);
