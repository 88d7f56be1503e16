// onnxruntime-web's WebGPU fault on SwiftShader, reduced to the smallest
// graph that shows it: one GroupQueryAttention node (modelgen/gqa_graph.py),
// 40 new tokens, random q/k/v, an empty past, against the WASM backend on the
// same inputs. On a device without features (what the engine's wgpu device
// is) it is exact; with the "subgroups" feature (what onnxruntime-web asks
// for when it creates its own device) every row from the 5th on is wrong.
// The first notes on this environment recorded the symptom as "runs of 32 or
// more new tokens" (31 tokens matched the CPU).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { harness, ORT_BASE, start } from "./lib.mjs";

let ctx;
before(async () => (ctx = await start()));
after(() => ctx?.close());

test("SwiftShader: one GroupQueryAttention node is exact without subgroups, wrong from row 5 with them", async () => {
  const page = await harness(ctx);
  try {
    const r = await page.evaluate(async ({ ORT_BASE, n }) => {
      const wasmOrt = await import("onnxruntime-web");
      const gpuOrt = await import("onnxruntime-web/webgpu");
      for (const o of [wasmOrt, gpuOrt]) o.env.wasm.wasmPaths = ORT_BASE;
      const graph = new Uint8Array(await (await fetch("/target/browser/gqa.onnx")).arrayBuffer());
      let x = 7;
      const rnd = (k) => Float32Array.from({ length: k }, () => ((x = (x * 1103515245 + 12345) >>> 0) / 2 ** 32) * 2 - 1);
      const q = rnd(n * 64), k = rnd(n * 32), v = rnd(n * 32);
      const feeds = (ort) => ({
        query: new ort.Tensor("float32", q, [1, n, 64]),
        key: new ort.Tensor("float32", k, [1, n, 32]),
        value: new ort.Tensor("float32", v, [1, n, 32]),
        past_key: new ort.Tensor("float32", new Float32Array(0), [1, 2, 0, 16]),
        past_value: new ort.Tensor("float32", new Float32Array(0), [1, 2, 0, 16]),
        seqlens_k: new ort.Tensor("int32", Int32Array.from([n - 1]), [1]),
        total_sequence_length: new ort.Tensor("int32", Int32Array.from([n]), []),
      });
      const run = async (ort, ep) => {
        const s = await ort.InferenceSession.create(graph, { executionProviders: [ep] });
        const o = await s.run(feeds(ort), ["output"]);
        const d = await o.output.getData();
        await s.release();
        return d;
      };
      const ref = await run(wasmOrt, "wasm");
      const out = {};
      for (const mode of ["none", "subgroups"]) {
        const a = await navigator.gpu.requestAdapter();
        const limits = {};
        for (const key in a.limits) limits[key] = a.limits[key];
        out.adapter = { ...Object.fromEntries(["vendor", "architecture", "subgroupMinSize", "subgroupMaxSize"].map((f) => [f, a.info[f]])), subgroups: a.features.has("subgroups") };
        const dev = await a.requestDevice({ requiredLimits: limits, requiredFeatures: mode === "none" ? [] : ["subgroups"] });
        const got = await run(gpuOrt, { name: "webgpu", device: dev });
        const rows = [];
        for (let r = 0; r < n; r++) {
          let m = 0;
          for (let c = 0; c < 64; c++) m = Math.max(m, Math.abs(got[r * 64 + c] - ref[r * 64 + c]));
          rows.push(m);
        }
        out[mode] = rows;
        dev.destroy();
      }
      return out;
    }, { ORT_BASE, n: 40 });
    const fmt = (v) => v.toExponential(1);
    console.log(`# adapter ${JSON.stringify(r.adapter)}; max |Δ| vs WASM without features ${fmt(Math.max(...r.none))}; with subgroups rows 1-4 ${r.subgroups.slice(0, 4).map(fmt).join(" ")}, rows 5-40 ${fmt(Math.min(...r.subgroups.slice(4)))}..${fmt(Math.max(...r.subgroups.slice(4)))}`);
    assert.ok(Math.max(...r.none) < 1e-5, `no-feature device: ${r.none}`);
    assert.ok(r.adapter.subgroups);
    assert.ok(Math.max(...r.subgroups.slice(0, 4)) < 1e-5, `subgroups, rows 1-4: ${r.subgroups}`);
    // The fault kept as a test: when a Chromium or onnxruntime-web update fixes it, this fails and the notes must change.
    assert.ok(Math.min(...r.subgroups.slice(4)) > 0.05, `subgroups, rows 5+: ${r.subgroups}`);
  } finally {
    await page.close();
  }
});
