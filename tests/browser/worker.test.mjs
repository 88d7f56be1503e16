// The engine in a Worker (readout/worker) against the same engine called on
// the page, in Chromium: on each backend the same calls give the same
// results bit for bit (decisions, a shared prefix, a grown state, info);
// progress reaches the page; a refusal keeps its code, field and limit and
// leaves the engine usable; a terminated worker rejects what was pending
// with code worker_died, and a new engine then loads and scores.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { fixture, harness, ORT_BASE, start, TINY } from "./lib.mjs";
import { both, terminated } from "./worker_calls.mjs";

const STATES = fixture().slice(0, 2);
const PREFIX = { instruction: "Judge the evidence below, then answer each criterion." };

let ctx;
before(async () => (ctx = await start()));
after(() => ctx?.close());

// WebGPU runs on SwiftShader here (slow, emulated, a shader compile for every new shape):
// one prefill and one scoreAll in letters without calibration.
const CASES = [
  { backend: "cpu", build: "single", n: 2, m: 3 },
  { backend: "cpu", build: "threads", n: 2, m: 3 },
  { backend: "cpu", build: "relaxed", n: 2, m: 3 },
  { backend: "wasm", build: "single", n: 2, m: 3 },
  { backend: "webgpu", build: "single", n: 1, m: 2, so: { mode: "letters", calibration: "none" }, lite: true },
];
for (const c of CASES) {
  test(`${c.backend} (${c.build} build): every call through the worker equals the call on the page, bit for bit; refusals keep code, field and limit`, async () => {
    const log = [];
    const page = await harness(ctx, log);
    try {
      const r = await page.evaluate(both, { source: `/models/${TINY}/`, ORT_BASE, STATES, PREFIX, ...c });
      assert.equal(r.worker.backend, c.backend);
      assert.ok(r.worker.files.length > 0, "progress reached the page");
      assert.ok(r.worker.errors.every((e) => e.code), JSON.stringify(r.worker.errors));
      assert.equal(r.worker.afterDispose.code, "engine_disposed");
      assert.deepEqual(r.worker, r.page);
      console.log(`# ${c.backend} (${c.build}): ${r.worker.decisions.length} results equal; refusals ${r.worker.errors.map((e) => `${e.code}/${e.field}`).join(", ")}`);
    } catch (e) {
      throw new Error(`${e.message}\n${log.slice(-20).join("\n")}`);
    } finally {
      await page.close();
    }
  });
}

test("a build the package does not have is refused by the worker with code invalid_input naming the field, and the worker's engine then loads", async () => {
  const page = await harness(ctx, []);
  try {
    const r = await page.evaluate(async (source) => {
      const { Engine } = await import("/pkg/worker.js");
      const refused = await Engine.load(source, { backend: "cpu", build: "relaxd" }).then(() => null, (e) => ({ code: e.code, field: e.field, message: e.message }));
      const engine = await Engine.load(source, { backend: "cpu", build: "relaxed" });
      const out = { refused, build: engine.build, backend: (await engine.info()).backend };
      await engine.dispose();
      return out;
    }, `/models/${TINY}/`);
    assert.deepEqual(r.refused, { code: "invalid_input", field: "build", message: 'build "relaxd": not one of "auto", "single", "relaxed", "threads"' });
    assert.equal(r.build, "relaxed");
    assert.equal(r.backend, "cpu");
  } finally {
    await page.close();
  }
});

test("a terminated worker rejects its pending call with code worker_died, refuses later calls, and a new engine loads and scores", async () => {
  const log = [];
  const page = await harness(ctx, log);
  try {
    const r = await page.evaluate(terminated, { source: `/models/${TINY}/`, STATES });
    assert.deepEqual(r.codes, Array(3).fill("worker_died:WorkerDiedError"));
    assert.equal(r.alive, false);
    assert.ok(Math.abs(r.sum - 1) < 1e-9);
  } catch (e) {
    throw new Error(`${e.message}\n${log.slice(-20).join("\n")}`);
  } finally {
    await page.close();
  }
});
