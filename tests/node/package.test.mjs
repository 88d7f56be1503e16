// The package in Node.js, as a user installs it: pkg/ and its peer
// dependency npm-installed into a scratch folder, a script there importing
// `readout` and `readout/node`, models read from folders on disk. Node has
// no WebGPU: the cpu backend (our kernels in wasm) is held to our native
// runtime as in the browser, and onnxruntime-web's WASM backend to native
// ONNX Runtime.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { compare, fixture, nativeDecisions, OUT, ROOT, TINY } from "../browser/lib.mjs";

test("Node: the installed package loads models from folders on disk, scores on the cpu and WASM backends as the native engine does, and refuses a relative path and a missing folder by code", () => {
  const app = join(OUT, "node-app");
  rmSync(app, { recursive: true, force: true });
  mkdirSync(app, { recursive: true });
  writeFileSync(join(app, "package.json"), JSON.stringify({ name: "scratch", private: true, type: "module" }));
  execFileSync("npm", ["install", "--no-audit", "--no-fund", "--ignore-scripts", "--offline", join(ROOT, "pkg"), join(ROOT, "node_modules/onnxruntime-web")], { cwd: app, stdio: ["ignore", "ignore", "inherit"] });
  const states = fixture().slice(0, 3);
  writeFileSync(join(app, "states.json"), JSON.stringify(states));
  // What the package README shows, then the checks' own calls.
  writeFileSync(
    join(app, "score.mjs"),
    `import init, { Engine } from "readout";
import { initNode } from "readout/node";
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
await initNode(init);
const states = JSON.parse(readFileSync(new URL("./states.json", import.meta.url), "utf8"));
const [models, ortBase] = process.argv.slice(2);
const refused = async (f) => { try { await f(); return "accepted"; } catch (e) { return { code: e.code, field: e.field, message: e.message }; } };
async function scoreAll(source, options) {
  const engine = await Engine.load(source, options);
  const decisions = [];
  for (const s of states) {
    const state = await engine.prefill(s);
    for (const d of await state.scoreAll(s.criteria)) decisions.push([s.id + "/" + d.id, d]);
    await state.dispose();
  }
  const info = engine.info();
  await engine.dispose();
  return { decisions, backend: info.backend, backendReason: info.backendReason, runtime: info.runtime };
}
const relative = await refused(() => Engine.load("models/${TINY}/", { backend: "cpu" }));
const missing = await refused(() => Engine.load(models + "no-such-model/", { backend: "cpu" }));
const cpu = await scoreAll(models + "${TINY}/", {});
const wasm = await scoreAll(models + "${TINY}/", { backend: "wasm", ortBase });
console.log("@@" + JSON.stringify({ relative, missing, cpu, wasm }));
`,
  );
  const out = execFileSync(process.execPath, ["score.mjs", pathToFileURL(join(ROOT, "models")).href + "/", pathToFileURL(join(app, "node_modules/onnxruntime-web/dist")).href + "/"], { cwd: app, encoding: "utf8", stdio: ["ignore", "pipe", "inherit"], timeout: 300_000 });
  const r = JSON.parse(out.split("\n").find((l) => l.startsWith("@@")).slice(2));

  assert.equal(r.relative.code, "url", JSON.stringify(r.relative));
  assert.match(r.relative.message, /must be absolute/);
  assert.equal(r.missing.code, "file_missing", JSON.stringify(r.missing));
  assert.equal(r.missing.field, "graph");
  assert.match(r.missing.message, /no-such-model\/model\.onnx.*404/);

  // auto in Node: no WebGPU, so the cpu backend, and info() says why.
  assert.equal(r.cpu.backend, "cpu");
  assert.match(r.cpu.backendReason, /WebGPU unavailable.*cpu backend/);
  assert.match(r.cpu.runtime, /^readout kernels \(int8 activations, simd128 kernel, 1 thread\)/);
  // The browser's bounds for the same backends (tests/browser/engine.test.mjs).
  const own = compare(new Map(r.cpu.decisions), nativeDecisions(TINY, ["--runtime", "own"]));
  const native = nativeDecisions(TINY);
  const ort = compare(new Map(r.wasm.decisions), native);
  console.log(`# Node ${process.version}: ${r.cpu.decisions.length} criteria; cpu vs native own runtime max |Δp| ${own.worst.toExponential(2)}; wasm vs native ONNX Runtime ${ort.worst.toExponential(2)}`);
  assert.equal(r.cpu.decisions.length, states.reduce((n, s) => n + s.criteria.length, 0));
  assert.deepEqual(own.changed, []);
  assert.ok(own.worst <= 2e-2, `cpu: max |Δp| vs native own ${own.worst}`);
  assert.equal(r.wasm.backend, "wasm");
  assert.deepEqual(ort.changed, []);
  assert.ok(ort.worst <= 1e-3, `wasm: max |Δp| vs native ONNX Runtime ${ort.worst}`);
});
