// readout/worker in Firefox ESR: the same calls through the worker and on
// the page give the same results bit for bit (cpu on both builds, WASM);
// a terminated worker rejects with worker_died and a new engine scores;
// and examples/vite-app, installed from the packed tarball and built by
// Vite, scores through the worker (tests/browser/vite_app.mjs).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { launchFirefox } from "../../harness/firefox.mjs";
import { serve } from "../../harness/serve.mjs";
import { fixture, ORT_BASE, ROOT, TINY } from "../browser/lib.mjs";
import { buildViteApp, checkViteResult, VITE_CASES } from "../browser/vite_app.mjs";
import { both, terminated } from "../browser/worker_calls.mjs";
import { inFirefox as inFirefoxAt } from "./lib.mjs";

const STATES = fixture().slice(0, 2);
const PREFIX = { instruction: "Judge the evidence below, then answer each criterion." };
let server, base;
before(async () => {
  server = await serve(0);
  base = `http://127.0.0.1:${server.address().port}`;
});
after(() => server.close());

const inFirefox = (fn, arg) => inFirefoxAt(base, fn, arg);

test("Firefox: every call through readout/worker equals the call on the page, bit for bit (cpu on all three builds, WASM), the relaxed build's decisions are the SIMD128 build's, and a terminated worker rejects with worker_died", async () => {
  const cpu = {};
  for (const c of [
    { backend: "cpu", build: "single", n: 2, m: 3 },
    { backend: "cpu", build: "relaxed", n: 2, m: 3 },
    { backend: "cpu", build: "threads", n: 2, m: 3 },
    { backend: "wasm", build: "single", n: 1, m: 3 },
  ]) {
    const r = await inFirefox(both, { source: `/models/${TINY}/`, ORT_BASE, STATES, PREFIX, ...c });
    assert.equal(r.worker.backend, c.backend);
    assert.ok(r.worker.files.length > 0, "progress reached the page");
    assert.deepEqual(r.worker, r.page);
    if (c.backend === "cpu") cpu[c.build] = r.worker.decisions;
    console.log(`# Firefox ${c.backend} (${c.build}): ${r.worker.decisions.length} results equal through the worker`);
  }
  // Relaxed SIMD's dot product forms the same exact integer sums.
  assert.deepEqual(cpu.relaxed, cpu.single);
  const t = await inFirefox(terminated, { source: `/models/${TINY}/`, STATES });
  assert.deepEqual(t.codes, Array(3).fill("worker_died:WorkerDiedError"));
  assert.ok(Math.abs(t.sum - 1) < 1e-9);
});

test("Firefox: examples/vite-app, installed from the packed tarball and built by Vite, scores through the worker", { timeout: 600_000 }, async () => {
  const dist = buildViteApp(join(ROOT, "target", "firefox", "vite-app"));
  const app = await serve(0, dist);
  const browser = await launchFirefox();
  try {
    for (const c of VITE_CASES) {
      const page = await browser.newPage();
      const log = [];
      page.on("console", (m) => log.push(m.text()));
      page.on("pageerror", (e) => log.push(`pageerror: ${e.message}`));
      await page.goto(`http://127.0.0.1:${app.address().port}${c.path}`);
      await page.waitForFunction(() => window.result, { timeout: 180_000 }).catch((e) => {
        throw new Error(`${e.message}\n${log.join("\n")}`);
      });
      const r = await page.evaluate(() => window.result);
      console.log(`# Vite app in Firefox, ${checkViteResult(r, c, log)}`);
      await page.close();
    }
  } finally {
    await browser.close();
    app.close();
  }
});
