// The browser engine in a real headless Chromium (Debian's, driven by
// playwright-core): WebGPU through SwiftShader (no shader-f16, so q4 graphs)
// and the WASM backend, against the native engine on the same fixture.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { compare, fixture, harness, nativeDecisions, ORT_BASE, start, TINY } from "./lib.mjs";

let ctx;
let native;
before(async () => {
  ctx = await start();
  native = nativeDecisions(TINY);
});
after(() => ctx?.close());

/** Loads `source` on `backend` in a fresh page, scores `states`, returns decisions and info. */
async function scoreStates(source, backend, states, extra = {}, call = {}) {
  const log = [];
  const page = await harness(ctx, log);
  try {
    return await page.evaluate(
      async ({ source, backend, states, ORT_BASE, extra, call }) => {
        const { Engine } = window.readout;
        const t0 = performance.now();
        const engine = await Engine.load(source, { backend, ortBase: ORT_BASE, ...extra });
        const loadMs = performance.now() - t0;
        const bytes0 = engine.bytesReadBack(); // after the load-time proofs' reads
        const decisions = [];
        for (const s of states) {
          const state = await engine.prefill(s, call.prefill);
          for (const d of await state.scoreAll(s.criteria, call.score)) decisions.push([`${s.id}/${d.id}`, d]);
          await state.dispose();
        }
        const info = engine.info();
        const live = engine.liveGpuTensors();
        const bytesScoring = engine.bytesReadBack() - bytes0;
        await engine.dispose();
        return { decisions, info, live, loadMs, bytesScoring, scoreMs: performance.now() - t0 - loadMs };
      },
      { source, backend, states, ORT_BASE, extra, call },
    );
  } catch (e) {
    throw new Error(`${e.message}\n${log.slice(-20).join("\n")}`);
  } finally {
    await page.close();
  }
}

test("WASM backend: the tiny model gives the native engine's decisions on the whole fixture", async () => {
  const states = fixture();
  const r = await scoreStates(`/models/${TINY}/`, "wasm", states);
  assert.equal(r.info.backend, "wasm");
  assert.match(r.info.backendReason, /WASM backend was asked for/);
  assert.equal(r.info.crossOriginIsolated, true);
  assert.equal(r.decisions.length, 89);
  const { worst, changed } = compare(new Map(r.decisions), native);
  console.log(`# WASM: 89 criteria, max |Δp| vs native ${worst.toExponential(2)}, load ${r.loadMs.toFixed(0)} ms, scoring ${r.scoreMs.toFixed(0)} ms`);
  assert.deepEqual(changed, []);
  assert.ok(worst <= 1e-3, `max |Δp| ${worst}`);
  assert.equal(r.live, 0);
});

test("cpu backend: the SIMD128 kernels equal the scalar reference inside the browser", async () => {
  const page = await harness(ctx, []);
  try {
    const r = await page.evaluate(async () => {
      const { kernelSelfTest } = await import("/pkg-diagnostics/readout.js");
      return kernelSelfTest();
    });
    console.log(`# kernel self-test in Chromium: ${r.kernel}, worst relative difference ${r.worst.toExponential(2)}`);
    assert.equal(r.kernel, "simd128");
    assert.ok(r.worst <= 1e-5, `worst ${r.worst}`);
    // Attention's scores, four keys at a time in SIMD128 registers, equal one at a time.
    assert.equal(r.attentionDiffers, 0);
  } finally {
    await page.close();
  }
});

test("cpu backend: our own kernels in wasm give the native engine's decisions on our runtime, and ONNX Runtime's within the int8 bound", async () => {
  const states = fixture();
  const r = await scoreStates(`/models/${TINY}/`, "cpu", states);
  assert.equal(r.info.backend, "cpu");
  assert.match(r.info.backendReason, /cpu backend/);
  assert.match(r.info.runtime, /^readout kernels \(int8 activations, simd128 kernel, 1 thread\)/);
  assert.equal(r.decisions.length, 89);
  // The same arithmetic as natively, but SIMD128's float sums are ordered
  // differently from AVX2's (no fused multiply-add), and an activation that
  // moves by a rounding error can land on the other side of an int8 step in
  // the next layer; on this random model the options' probabilities are
  // renormalised from tiny letter masses, which magnifies that. So the bound
  // is the int8 kernels' own against ONNX Runtime (2e-2), no decision may
  // change, and the kernels themselves are held to 1e-5 by the self-test.
  const own = nativeDecisions(TINY, ["--runtime", "own"]);
  const same = compare(new Map(r.decisions), own);
  const ort = compare(new Map(r.decisions), native);
  console.log(`# cpu: 89 criteria, max |Δp| vs native own runtime ${same.worst.toExponential(2)}, vs native ONNX Runtime ${ort.worst.toExponential(2)} (${ort.changed.length} changed), load ${r.loadMs.toFixed(0)} ms, scoring ${r.scoreMs.toFixed(0)} ms`);
  assert.deepEqual(same.changed, []);
  assert.ok(same.worst <= 2e-2, `max |Δp| vs native own ${same.worst}`);
  assert.ok(ort.worst <= 2e-2, `max |Δp| vs ONNX Runtime ${ort.worst}`);
  assert.equal(r.live, 0);
});

test("WebGPU backend (SwiftShader): the tiny model gives the native engine's decisions", async () => {
  const states = fixture().slice(0, 3);
  const r = await scoreStates(`/models/${TINY}/`, "webgpu", states);
  assert.equal(r.info.backend, "webgpu");
  assert.match(r.info.backendReason, /swiftshader/);
  assert.match(r.info.readout, /WGSL kernel/);
  const { worst, changed } = compare(new Map(r.decisions), native);
  console.log(`# WebGPU: ${r.decisions.length} criteria, max |Δp| vs native ${worst.toExponential(2)}, run limit ${r.info.runLimit}, bytes read back ${r.info.bytesReadBack}, load ${r.loadMs.toFixed(0)} ms, scoring ${r.scoreMs.toFixed(0)} ms`);
  assert.deepEqual(changed, []);
  assert.ok(worst <= 1e-3, `max |Δp| ${worst}`);
  assert.equal(r.live, 0);
});

test("WebGPU: bytes read back per criterion, counted in the runtime, for stock, trimmed and pruned+trimmed graphs", async () => {
  const page = await harness(ctx);
  try {
    const r = await page.evaluate(async ({ tiny, ORT_BASE }) => {
      const { Engine } = window.readout;
      const c = { id: "c", question: "Is the window open?", options: [{ id: "y", description: "Yes" }, { id: "n", description: "No" }, { id: "u", description: "Unknown" }] };
      const out = {};
      for (const v of ["", "-trimmed", "-trimmed-pruned"]) {
        const e = await Engine.load(`/models/${tiny}${v}/`, { backend: "webgpu", ortBase: ORT_BASE });
        const s = await e.prefill({ evidence: "The window in the kitchen was left open overnight." });
        const before = e.bytesReadBack();
        const d = await s.score(c);
        out[v || "stock"] = { bytes: e.bytesReadBack() - before, p: d.probs.map((x) => x.p), readout: e.info().readout };
        await s.dispose();
        await e.dispose();
      }
      return out;
    }, { tiny: TINY, ORT_BASE });
    console.log(`# WebGPU bytes read back per 3-option criterion: stock ${r.stock.bytes}, trimmed ${r["-trimmed"].bytes}, pruned+trimmed ${r["-trimmed-pruned"].bytes}`);
    for (const v of Object.values(r)) {
      assert.equal(v.bytes, (3 + 3) * 4, JSON.stringify(v));
      assert.match(v.readout, /WGSL kernel/);
    }
    // The three graphs give the same decision (trim within 8 ulp, prune exact).
    for (const v of ["-trimmed", "-trimmed-pruned"]) r[v].p.forEach((p, i) => assert.ok(Math.abs(p - r.stock.p[i]) < 1e-5, `${v}: ${p} vs ${r.stock.p[i]}`));
  } finally {
    await page.close();
  }
});

test("cloze with content-free calibration: WASM and WebGPU give the native engine's decisions, plain and chat prompts", async () => {
  // SwiftShader runs WebGPU on the CPU and compiles kernels for every new
  // run length (each option is one): one two-option criterion there.
  const all = fixture();
  const first = all.find((s) => s.criteria.some((c) => c.options.length === 2));
  const one = [{ ...first, criteria: [first.criteria.find((c) => c.options.length === 2)] }];
  const runs = [["plain", "wasm", all], ["plain", "webgpu", one], ["chat", "wasm", all.slice(0, 3)]];
  const natives = {};
  for (const [prompt, backend, states] of runs) {
    natives[prompt] ??= nativeDecisions(TINY, ["--mode", "cloze", "--calibration", "content-free", "--prompt", prompt]);
    const r = await scoreStates(`/models/${TINY}/`, backend, states, {}, {
      prefill: { prompt, mode: "cloze" },
      score: { mode: "cloze", calibration: "content-free" },
    });
    assert.equal(r.info.backend, backend);
    assert.equal(r.decisions.length, states.reduce((n, s) => n + s.criteria.length, 0));
    for (const [, d] of r.decisions) {
      assert.deepEqual(d.readout, { mode: "cloze", clozeScore: "sum", calibration: "content-free", prompt });
    }
    const { worst, changed } = compare(new Map(r.decisions), natives[prompt]);
    console.log(`# cloze ${prompt} ${backend}: ${r.decisions.length} criteria, max |Δp| vs native ${worst.toExponential(2)}, scoring ${r.scoreMs.toFixed(0)} ms`);
    assert.deepEqual(changed, []);
    assert.ok(worst <= 1e-3, `max |Δp| ${worst}`);
    assert.equal(r.live, 0);
    if (backend === "webgpu") {
      // The kernel reduces each option token's row where it lies to its
      // log-probability: 4 bytes per token come back, for the state and its
      // content-free baseline together less than one row of the vocabulary.
      const row = 151936 * 4;
      console.log(`# cloze on WebGPU: ${r.bytesScoring} bytes read back while scoring (one logits row is ${row})`);
      assert.equal(r.bytesScoring % 4, 0, `${r.bytesScoring}`);
      assert.ok(r.bytesScoring > 0 && r.bytesScoring < row, `${r.bytesScoring} bytes`);
    }
  }
});
