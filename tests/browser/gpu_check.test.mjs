// The real-GPU check (bench/runners/gpu_bundle.sh + bench/runners/gpu_check.sh), run here the
// only way it can be: on SwiftShader, with the tiny q4 model. The bundle is cut
// into small parts and each part is staged alone, as each call to a lent
// machine carries one; then the check runs from the stage with the bundled
// Chromium and libraries, and its JSON must have the shape a GPU run writes,
// marked emulated. The readout-modes section is skipped here: SwiftShader
// compiles kernels per run length, and cloze makes one run length per option.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { ROOT, TINY, OUT } from "./lib.mjs";

const WORK = join(OUT, "gpu-check");
// The keys a result of bench/runners/gpu_check.sh carries, on a GPU or not.
export const TOP_KEYS = ["adapter", "allowed_mass", "emulated", "gpu_check", "lengths", "model", "backend", "prefix_tokens", "ratios", "runner", "shader_f16", "variants"];
export const VARIANT_KEYS = ["backend", "bytes_read_back", "fit", "id", "median_ms", "probs", "readout", "samples_ms", "variant"];
export const CHECK_KEYS = ["chromium", "flag_set", "flags", "probes", "wall_s"];

function run(args, env = {}) {
  const r = spawnSync("bash", args, { cwd: ROOT, encoding: "utf8", env: { ...process.env, ...env }, timeout: 2_000_000 });
  return { code: r.status, out: r.stdout ?? "", err: r.stderr ?? "" };
}

export function assertShape(r) {
  for (const k of TOP_KEYS) assert.ok(k in r, `result has no "${k}"`);
  for (const k of CHECK_KEYS) assert.ok(k in r.gpu_check, `gpu_check has no "${k}"`);
  assert.equal(r.backend, "webgpu");
  assert.equal(r.runner, "bench/runners/gpu_check.sh");
  assert.deepEqual(r.variants.map((v) => v.variant), ["stock", "trimmed", "pruned"]);
  for (const v of r.variants) {
    for (const k of VARIANT_KEYS) assert.ok(k in v, `${v.id} has no "${k}"`);
    assert.equal(v.backend, "webgpu", `${v.id} ran on ${v.backend}: ${v.backend_reason}`);
    assert.equal(v.median_ms.length, r.lengths.length);
    assert.ok(v.median_ms.every((m) => Number.isFinite(m) && m > 0));
    assert.equal(v.bytes_read_back.length, r.lengths.length);
  }
  assert.ok(r.transformers || r.transformers_error, "transformers.js ran or said why not");
  assert.ok(Array.isArray(r.adapter.features));
  assert.equal(r.shader_f16, r.adapter.features.includes("shader-f16"));
  assert.ok(r.gpu_check.probes.length >= 1 && r.gpu_check.probes.every((p) => typeof p.flags === "string"));
}

test("the GPU check on SwiftShader: bundle in parts, staged one by one, same JSON shape, marked emulated", { timeout: 2_400_000 }, () => {
  rmSync(WORK, { recursive: true, force: true });
  mkdirSync(WORK, { recursive: true });
  const bundle = join(WORK, "bundle");
  const stage = join(WORK, "stage");
  const b = run(["bench/runners/gpu_bundle.sh", "--model", TINY, "--out", bundle, "--part-mb", "160", "--xz-level", "none"]);
  assert.equal(b.code, 0, b.err);
  const parts = readdirSync(bundle).filter((d) => /^p\d\d$/.test(d)).sort();
  assert.ok(parts.length >= 2, `a bundle of ${parts.length} part(s): the test wants several`);
  // A second bundle into the same place replaces this script's own output;
  // a folder it did not write is refused and left as it was.
  const foreign = join(WORK, "foreign");
  mkdirSync(foreign);
  const f = run(["bench/runners/gpu_bundle.sh", "--model", TINY, "--out", foreign, "--xz-level", "none"]);
  assert.equal(f.code, 1);
  assert.match(f.err, /not a bundle this script wrote/);
  assert.deepEqual(readdirSync(foreign), []);

  const env = { READOUT_GPU_STAGE: stage };
  // Before every part has arrived the check refuses and names what is missing.
  for (const [i, p] of parts.entries()) {
    const carry = join(WORK, `carry-${p}`);
    mkdirSync(carry);
    symlinkSync(join(bundle, p), join(carry, p));
    const s = run(["bench/runners/gpu_check.sh", "--stage-only", "--bundle", carry], env);
    assert.equal(s.code, 0, s.err);
    assert.match(s.err, new RegExp(`bundle parts in .*: ${i + 1} of ${parts.length}`));
    if (i === 0) {
      const early = run(["bench/runners/gpu_check.sh", "--bundle", carry, "--out", join(WORK, "early.json")], env);
      assert.equal(early.code, 1);
      assert.match(early.err, /missing: p02/);
    }
  }
  const out = join(WORK, "result.json");
  const empty = join(WORK, "empty");
  mkdirSync(empty);
  const c = run(["bench/runners/gpu_check.sh", "--bundle", empty, "--model", TINY, "--lengths", "1,8", "--runs", "1", "--warmup", "0",
    "--prefix", "24", "--timeout-s", "1500", "--no-modes", "--out", out], env);
  assert.equal(c.code, 0, c.err.slice(-3000));
  // What the page fetches besides the package and models: the modes section's example state.
  assert.ok(existsSync(join(stage, "x", "root", "examples", "state.json")), "the stage serves examples/state.json");
  assert.match(c.out, /^adapter: vendor='google' architecture='swiftshader'/m);
  assert.match(c.out, /^shader-f16: no; emulated \(CPU implementation\): yes$/m);
  const r = JSON.parse(readFileSync(out, "utf8"));
  assertShape(r);
  assert.equal(r.emulated, true);
  assert.equal(r.shader_f16, false);
  assert.equal(r.model, TINY);
  assert.equal(r.adapter.architecture, "swiftshader");
  // The same readout on every variant: the kept letters' probabilities agree.
  const [stock, trimmed, pruned] = r.variants;
  for (const v of [trimmed, pruned]) {
    const d = Math.max(...v.probs.flatMap((p, i) => p.map((x, j) => Math.abs(x - stock.probs[i][j]))));
    assert.ok(d <= 1e-4, `${v.variant} vs stock on SwiftShader: max |Δp| ${d}`);
  }
  // A model with float16 activations is refused on an adapter without shader-f16.
  const f16 = run(["bench/runners/gpu_check.sh", "--bundle", empty, "--model", "smollm2-135m-instruct-q4f16", "--out", join(WORK, "f16.json")], env);
  assert.equal(f16.code, 5, f16.err.slice(-2000));
  assert.match(f16.err, /no shader-f16: nothing to run/);
  assert.ok(!existsSync(join(WORK, "f16.json")));
  console.log(`# gpu check on SwiftShader: ${parts.length} parts, stock ${stock.median_ms.map((m) => m.toFixed(0)).join("/")} ms, ` +
    `bytes read back ${stock.bytes_read_back.join("/")} (stock) ${pruned.bytes_read_back.join("/")} (pruned)`);
  rmSync(stage, { recursive: true, force: true });
  rmSync(bundle, { recursive: true, force: true });
});
