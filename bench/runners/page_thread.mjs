// How long the page's own thread is blocked while the example state's
// criteria are scored on the cpu backend: the engine called on the page
// (`readout`, `readout/threads`) against the same engine through its worker
// (`readout/worker`), in Chromium and Firefox, for the single-thread and the
// threaded build. A 10 ms timer chain runs on the page during the scoring
// and records its longest gap; a `longtask` PerformanceObserver records the
// long tasks where the browser has one (Chromium; Firefox has none). Each
// criterion's wall time on the page is recorded beside the engine's own
// `ms`, so the worker's overhead per criterion (wall minus the engine's
// time, less the same difference on the page) is measured in the same run.
// The two paths alternate within each round (page first in odd rounds).
// Writes bench/results/page-thread/<date>-page-thread-<model>.json (refused if taken).
//
//   node bench/runners/page_thread.mjs [--model smollm2-135m-instruct-q4f16]
//        [--browsers chromium,firefox] [--builds single,threads] [--rounds 2]
//        [--threads 2] [--out FILE]
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { launch } from "../../harness/chromium.mjs";
import { launchFirefox } from "../../harness/firefox.mjs";
import { option } from "../../harness/browser.mjs";
import { ROOT, serve } from "../../harness/serve.mjs";
import { resultPath, writeResult } from "./result_file.mjs";

const a = process.argv.slice(2);
const model = option(a, "--model", "smollm2-135m-instruct-q4f16");
const browsers = option(a, "--browsers", "chromium,firefox").split(",");
const builds = option(a, "--builds", "single,threads").split(",");
const rounds = Number(option(a, "--rounds", 2));
const threads = Number(option(a, "--threads", 2));
const outArg = option(a, "--out", undefined);
if (a.length) throw new Error(`page_thread: unknown arguments: ${a.join(" ")}`);
const out = resultPath("page_thread", "page-thread", `page-thread-${model}`, outArg);
if (!existsSync(join(ROOT, "models.json"))) throw new Error("page_thread: no models.json (run bash scripts/main.sh first)");
const log = (l) => console.error(`[page-thread] ${l}`);

/** In the page: load, prefill, then score each criterion under the timer chain and the long-task observer. */
async function measure({ path, build, source, threads, state }) {
  const lib = await import(path === "worker" ? "/pkg/worker.js" : build === "threads" ? "/pkg/threads/readout.js" : "/pkg/readout.js");
  await lib.default();
  const engine = await lib.Engine.load(source, { backend: "cpu", threads, build });
  const info = await engine.info();
  const s = await engine.prefill({ instruction: state.instruction, evidence: state.evidence });
  const gaps = [];
  const longTasks = [];
  let observer = null;
  if (PerformanceObserver.supportedEntryTypes?.includes("longtask")) {
    observer = new PerformanceObserver((list) => list.getEntries().forEach((e) => longTasks.push(e.duration)));
    observer.observe({ type: "longtask" });
  }
  let running = true;
  let last = performance.now();
  const tick = () => {
    const now = performance.now();
    gaps.push(now - last);
    last = now;
    if (running) setTimeout(tick, 10);
  };
  setTimeout(tick, 10);
  const criteria = [];
  const t0 = performance.now();
  for (const c of state.criteria) {
    const w0 = performance.now();
    const d = await s.score(c);
    criteria.push({ id: c.id, wall_ms: performance.now() - w0, engine_ms: d.ms, answer: d.answer, probs: d.probs.map((p) => p.p) });
  }
  const total = performance.now() - t0;
  // One more tick after the last criterion, so a gap still open is counted.
  await new Promise((r) => setTimeout(r, 30));
  running = false;
  observer?.disconnect();
  await s.dispose();
  await engine.dispose();
  return {
    longest_gap_ms: Math.max(...gaps), ticks: gaps.length, total_ms: total, criteria,
    long_tasks: observer ? { count: longTasks.length, longest_ms: Math.max(0, ...longTasks), total_ms: longTasks.reduce((x, y) => x + y, 0) } : null,
    runtime: info.runtime, threads: info.threads ?? null, isolated: self.crossOriginIsolated,
  };
}

const state = JSON.parse(readFileSync(join(ROOT, "examples", "state.json"), "utf8"));
const server = await serve(0);
const base = `http://127.0.0.1:${server.address().port}`;
const results = [];
try {
  for (const name of browsers) {
    for (const build of builds) {
      const browser = name === "firefox" ? await launchFirefox() : await launch({ webgpu: false });
      try {
        const page = await browser.newPage();
        await page.goto(`${base}/harness/page.html`);
        const runs = { page: [], worker: [] };
        for (let round = 0; round < rounds; round++) {
          for (const path of round % 2 === 0 ? ["page", "worker"] : ["worker", "page"]) {
            log(`${name}, ${build} build, ${path}, round ${round + 1} of ${rounds}`);
            runs[path].push(await page.evaluate(measure, { path, build, source: `/models.json#${model}`, threads: build === "threads" ? threads : 1, state }));
          }
        }
        const ua = await page.evaluate(() => navigator.userAgent);
        const summary = (rs) => {
          const n = rs[0].criteria.length;
          const over = rs.flatMap((r) => r.criteria.map((c) => c.wall_ms - c.engine_ms));
          return {
            longest_gap_ms: Math.max(...rs.map((r) => r.longest_gap_ms)),
            long_tasks_longest_ms: rs[0].long_tasks ? Math.max(...rs.map((r) => r.long_tasks.longest_ms)) : null,
            wall_ms_per_criterion: rs.reduce((x, r) => x + r.total_ms, 0) / (rs.length * n),
            engine_ms_per_criterion: rs.reduce((x, r) => x + r.criteria.reduce((y, c) => y + c.engine_ms, 0), 0) / (rs.length * n),
            wall_minus_engine_ms: over.reduce((x, y) => x + y, 0) / over.length,
          };
        };
        const page_ = summary(runs.page);
        const worker = summary(runs.worker);
        // The worker's own cost per criterion: what its wall time adds beyond the
        // engine's, less what the page's does, as a share of the page's wall time.
        const overhead = (worker.wall_minus_engine_ms - page_.wall_minus_engine_ms) / page_.wall_ms_per_criterion;
        const same = runs.page.every((r, i) => JSON.stringify(r.criteria.map((c) => c.probs)) === JSON.stringify(runs.worker[i].criteria.map((c) => c.probs)));
        results.push({
          browser: name, user_agent: ua, build, threads: runs.worker[0].threads, runtime: runs.worker[0].runtime, isolated: runs.worker[0].isolated,
          page: page_, worker, worker_overhead_share: overhead, wall_ratio_worker_over_page: worker.wall_ms_per_criterion / page_.wall_ms_per_criterion,
          same_probabilities: same, runs,
        });
        log(`${name} ${build}: longest gap page ${page_.longest_gap_ms.toFixed(0)} ms, worker ${worker.longest_gap_ms.toFixed(0)} ms; worker overhead ${(100 * overhead).toFixed(2)} % a criterion`);
      } finally {
        await browser.close();
      }
    }
  }
} finally {
  server.close();
}

const goals = {
  longest_gap_through_worker_ms: { value: Math.max(...results.map((r) => r.worker.longest_gap_ms)), goal: "<= 50" },
  worker_overhead_share: { value: Math.max(...results.map((r) => r.worker_overhead_share)), goal: "<= 0.02" },
};
writeResult(out, "page-thread", "bench/runners/page_thread.mjs", { model, state: "examples/state.json", criteria: state.criteria.length, rounds, goals, results });
log(`wrote ${out}`);
for (const [k, g] of Object.entries(goals)) log(`${k}: ${g.value} (goal ${g.goal})`);
