// Firefox ESR (Debian's, headless, over WebDriver BiDi: harness/firefox.mjs).
// The same package and pages as in Chromium, held to the same references:
// the cpu backend to our native runtime, onnxruntime-web's WASM backend to
// native ONNX Runtime, the threaded build to the plain one, and, with
// Firefox's WebGPU enabled (it reaches Mesa's lavapipe, with shader-f16),
// the q4f16 files on float16 WebGPU to native ONNX Runtime on the same files.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { readDecisionTable } from "../../harness/demo_page.mjs";
import { F16_BOUND } from "../../harness/f16_bound.mjs";
import { launchFirefox } from "../../harness/firefox.mjs";
import { serve } from "../../harness/serve.mjs";
import { compare, fixture, nativeDecisions, ORT_BASE, ROOT, TINY } from "../browser/lib.mjs";
import { inFirefox as inFirefoxAt } from "./lib.mjs";

const F16 = "qwen3-tiny-random-q4f16";
let server, base;
before(async () => {
  server = await serve(0);
  base = `http://127.0.0.1:${server.address().port}`;
});
after(() => server.close());

/** Runs `fn(arg)` in the harness page of a fresh Firefox (tests/firefox/lib.mjs). */
const inFirefox = (fn, arg, options) => inFirefoxAt(base, fn, arg, options);

/** In the page: each source loaded with its options, the states scored, the decisions and what info() said. */
async function scoreIn({ runs, states }) {
  const out = {};
  for (const [name, { source, options }] of Object.entries(runs)) {
    const engine = await window.readout.Engine.load(source, options);
    const decisions = [];
    for (const s of states) {
      const state = await engine.prefill(s);
      for (const d of await state.scoreAll(s.criteria)) decisions.push([`${s.id}/${d.id}`, { answer: d.answer, probs: d.probs.map((p) => ({ id: p.id, p: p.p })) }]);
      await state.dispose();
    }
    const i = engine.info();
    out[name] = { decisions, backend: i.backend, reason: i.backendReason, runtime: i.runtime, readout: i.readout, model: i.model };
    await engine.dispose();
  }
  return { ua: navigator.userAgent, isolated: self.crossOriginIsolated, out };
}

test("Firefox: the plain build's cpu backend and onnxruntime-web's WASM backend give the native engine's decisions, auto takes cpu where Firefox gives no WebGPU adapter and says why, and the threaded build equals the plain one", async () => {
  const states = fixture().slice(0, 4);
  const runs = {
    auto: { source: `/models/${TINY}/`, options: { ortBase: ORT_BASE } },
    wasm: { source: `/models/${TINY}/`, options: { backend: "wasm", ortBase: ORT_BASE } },
  };
  const single = await inFirefox(scoreIn, { runs, states });
  const threads = await inFirefox(scoreIn, { runs: { cpu: { source: `/models/${TINY}/`, options: { backend: "cpu", threads: 2 } } }, states }, { build: "threads" });
  assert.match(single.ua, /Firefox\/153/);
  assert.equal(single.isolated, true);
  const { auto, wasm } = single.out;
  assert.equal(auto.backend, "cpu");
  assert.match(auto.reason, /^WebGPU unavailable: .*falling back to the cpu backend/);
  assert.match(auto.runtime, /simd128 kernel, 1 thread/);
  const own = compare(new Map(auto.decisions), nativeDecisions(TINY, ["--runtime", "own"]));
  const ort = compare(new Map(wasm.decisions), nativeDecisions(TINY));
  console.log(`# Firefox: ${auto.decisions.length} criteria; cpu vs native own runtime max |Δp| ${own.worst.toExponential(2)}; wasm vs native ONNX Runtime ${ort.worst.toExponential(2)}; threaded: ${threads.out.cpu.runtime}`);
  assert.deepEqual(own.changed, []);
  assert.ok(own.worst <= 2e-2, `cpu vs native own ${own.worst}`);
  assert.equal(wasm.backend, "wasm");
  assert.deepEqual(ort.changed, []);
  assert.ok(ort.worst <= 1e-3, `wasm vs native ONNX Runtime ${ort.worst}`);
  // Firefox 153 has relaxed SIMD and shared memory: the threaded build runs,
  // and gives the plain build's probabilities bit for bit.
  assert.match(threads.out.cpu.runtime, /^readout kernels \(int8 activations, relaxed-simd kernel, 2 threads\).*threaded build, 2 asked: this thread and 1 worker\b/);
  assert.deepEqual(threads.out.cpu.decisions, auto.decisions);
});

test("Firefox with WebGPU enabled: auto takes float16 WebGPU (shader-f16 on lavapipe), and the stock and pruned q4f16 files read letters as native ONNX Runtime does on the same files", async () => {
  const states = fixture().slice(0, 3);
  const runs = {
    auto: { source: `/models.json#${F16}`, options: { ortBase: ORT_BASE } },
    pruned: { source: `/models/${F16}-trimmed-pruned/`, options: { backend: "webgpu", ortBase: ORT_BASE } },
  };
  const r = await inFirefox(scoreIn, { runs, states }, { webgpu: true });
  for (const [name, id] of [["auto", F16], ["pruned", `${F16}-trimmed-pruned`]]) {
    const o = r.out[name];
    assert.equal(o.backend, "webgpu", `${name}: ${o.reason}`);
    assert.match(o.readout, /WGSL kernel/);
    const { worst, changed } = compare(new Map(o.decisions), nativeDecisions(id, ["--mode", "letters", "--calibration", "none", "--prompt", "plain"]));
    console.log(`# Firefox float16 WebGPU, ${id}: ${o.decisions.length} criteria, max |Δp| vs native ${worst.toExponential(2)} (bound ${F16_BOUND})`);
    assert.deepEqual(changed, []);
    assert.ok(worst <= F16_BOUND, `${id}: max |Δp| ${worst}`);
  }
  assert.match(r.out.auto.reason, /^auto: a WebGPU adapter exists \(an adapter the browser does not name, shader-f16\)$/);
});

test("Firefox: the demo page loads, runs the example and shows the native engine's decisions", async () => {
  const browser = await launchFirefox();
  try {
    const page = await browser.newPage();
    await page.goto(`${base}/www/?model=${TINY}&backend=wasm`);
    const settled = (states) => page.waitForFunction((s) => s.includes(document.getElementById("status").dataset.state), { timeout: 300_000 }, states);
    await settled(["ready", "error"]);
    await page.click("#run");
    await settled(["done", "error"]);
    const shown = await page.evaluate(readDecisionTable);
    assert.equal(shown.error, "");
    assert.equal(shown.backend, "wasm");
    const loaded = shown.info.split(" ")[0];
    const native = JSON.parse(execFileSync(join(ROOT, "target", "debug", "readout"), ["score", "--model", `models.json#${loaded}`, "--state", "examples/state.json", "--threads", "2", "--runtime", "ort"], { cwd: ROOT, encoding: "utf8" })).decisions;
    assert.equal(shown.decisions.length, native.length);
    let worst = 0;
    for (const [i, n] of native.entries()) {
      const d = shown.decisions[i];
      assert.equal(d.error, null, `${d.id}: ${d.error}`);
      assert.equal(d.answer, n.answer, d.id);
      n.probs.forEach((p, j) => (worst = Math.max(worst, Math.abs(p.p - d.probs[j]))));
    }
    console.log(`# Firefox demo page (${loaded}, WASM): ${native.length} criteria, same answers as native, max |Δp| ${worst.toExponential(2)}`);
    assert.ok(worst <= 1e-3, `max |Δp| ${worst}`);
  } finally {
    await browser.close();
  }
});
