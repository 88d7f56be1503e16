// The demo page (www/), driven as a user would: load a model, run the
// bundled example, read the decision table, and check it against the native
// engine's decisions on the same state.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { driveDemo } from "../../harness/demo_page.mjs";
import { OUT, ROOT, TINY } from "./lib.mjs";

function nativeScore(model) {
  const bin = join(ROOT, "target", "debug", "readout");
  const out = execFileSync(bin, ["score", "--model", `models.json#${model}`, "--state", "examples/state.json", "--threads", "2", "--runtime", "ort"], { cwd: ROOT, encoding: "utf8" });
  return JSON.parse(out).decisions;
}

test("the demo page's decision table equals the native engine's decisions", { timeout: 900_000 }, async () => {
  const page = await driveDemo({ model: TINY, backend: "wasm", screenshot: join(OUT, "demo.png"), log: () => {} });
  assert.equal(page.backend, "wasm");
  assert.match(page.badge, /WASM backend was asked for/);
  // The demo runs the engine in readout/worker by default, and says so.
  assert.match(page.info, /in a Web Worker/);
  assert.match(page.summary, /bytes read back from onnxruntime-web/);
  // The explicit WASM backend loads the entry's WASM variant; native scores that same entry.
  const loaded = page.info.split(" ")[0];
  const native = nativeScore(loaded);
  assert.equal(page.decisions.length, native.length);
  let worst = 0;
  for (const [i, n] of native.entries()) {
    const d = page.decisions[i];
    assert.equal(d.id, n.id);
    assert.equal(d.error, null, `criterion ${d.id}: ${d.error}`);
    assert.equal(d.answer, n.answer, `criterion ${d.id}`);
    n.probs.forEach((p, j) => (worst = Math.max(worst, Math.abs(p.p - d.probs[j]))));
    assert.ok(Math.abs(d.margin - n.margin) < 2e-3, `margin of ${d.id}: page ${d.margin}, native ${n.margin}`);
  }
  // The table prints probabilities with 3 decimals in the bars but carries them whole in data-probs.
  assert.ok(worst <= 1e-3, `max |Δp| ${worst}`);
  console.log(`# demo page (${loaded}, WASM) vs native: ${native.length} criteria, same answers, max |Δp| ${worst.toExponential(2)}`);
});
