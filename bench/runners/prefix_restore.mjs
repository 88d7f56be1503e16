// A kept rubric prefix restored against the same prefix prefilled, in
// Chromium, in one page per backend: SmolLM2's rubric of the shared-prefix
// benchmark (target/shared-prefix-texts.json, written by `cargo bench
// --bench shared_prefix`), prefilled with `engine.prefix`, then restored
// from the bytes `prefix.save()` wrote and from the browser's storage
// (`keep: true`: the stored file read, checked and imported), alternating
// within each round. A state on the restored prefix is scored against one
// on the prefilled prefix: the speed is of the same computation, equal bit
// for bit. WebGPU runs on SwiftShader here (emulated) and is marked so.
// Writes bench/results/prefix-restore/<date>-prefix-restore-<model>.json (refused if taken).
//
//   node bench/runners/prefix_restore.mjs [--model smollm2-135m-instruct-q4]
//        [--backends cpu,webgpu] [--rounds 5] [--out FILE]
// WebGPU takes one round after its warm-up: on SwiftShader a 416-token
// prefill runs for minutes.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { harness, option, ROOT, start, ORT_BASE } from "../../harness/browser.mjs";
import { resultPath, writeResult } from "./result_file.mjs";

const a = process.argv.slice(2);
const model = option(a, "--model", "smollm2-135m-instruct-q4");
const backends = option(a, "--backends", "cpu,webgpu").split(",");
const rounds = Number(option(a, "--rounds", 5));
const outArg = option(a, "--out", undefined);
if (a.length) throw new Error(`prefix_restore: unknown arguments: ${a.join(" ")}`);
const textsPath = join(ROOT, "target/shared-prefix-texts.json");
if (!existsSync(textsPath)) throw new Error("prefix_restore: target/shared-prefix-texts.json is missing; run `cargo bench --bench shared_prefix` first (it writes the rubric)");
const texts = JSON.parse(readFileSync(textsPath, "utf8"));
const out = resultPath("prefix_restore", "prefix-restore", `prefix-restore-${model}`, outArg);
const log = (l) => console.error(`[prefix-restore] ${l}`);
const criterion = { id: "urgent", family: "yes_no", question: "Is this ticket urgent?", options: [{ id: "o0", description: "Yes" }, { id: "o1", description: "No" }] };

/** In the page: `rounds` rounds of prefill, restore from bytes, restore from storage; and one state's decision on each. */
async function measure({ source, backend, ORT_BASE, spec, evidence, criterion, rounds }) {
  const { Engine } = window.readout;
  const engine = await Engine.load(source, backend === "cpu" ? { backend, threads: 2 } : { backend, ortBase: ORT_BASE });
  const info = engine.info();
  // On WebGPU a run whose outputs stay on the GPU resolves once its work is
  // submitted: each timed path ends with a one-token state scored on the
  // prefix, which waits for the prefix's computation (the same small cost on
  // every path). On cpu every call returns with its work done.
  const settle = async (p) => {
    if (backend !== "webgpu") return;
    const s = await p.prefill({ evidence: "Ticket." });
    await s.score(criterion);
    await s.dispose();
  };
  const decide = async (p) => {
    const s = await p.prefill({ evidence });
    const d = await s.score(criterion);
    await s.dispose();
    return d.probs.map((x) => x.p);
  };
  // Warm: shaders, buffers, and the stored copy `keep: true` reads later.
  const warm = await engine.prefix(spec, { keep: true });
  const stored = warm.storage;
  await warm.dispose();
  const r = { prefill_ms: [], restore_bytes_ms: [], restore_storage_ms: [], bytes: 0, tokens: 0, equal: true };
  for (let i = 0; i < rounds; i++) {
    let t = performance.now();
    const p = await engine.prefix(spec);
    await settle(p);
    r.prefill_ms.push(performance.now() - t);
    r.tokens = p.tokens;
    const bytes = await p.save();
    r.bytes = bytes.length;
    t = performance.now();
    const q = await engine.restorePrefix(bytes, spec);
    await settle(q);
    r.restore_bytes_ms.push(performance.now() - t);
    t = performance.now();
    const k = await engine.prefix(spec, { keep: true });
    await settle(k);
    r.restore_storage_ms.push(performance.now() - t);
    if (k.storage.from !== "storage") throw new Error(`round ${i}: the kept prefix came from ${k.storage.from}: ${k.storage.why}`);
    if (i === 0) {
      const [a, b, c] = [await decide(p), await decide(q), await decide(k)];
      r.equal = JSON.stringify(a) === JSON.stringify(b) && JSON.stringify(a) === JSON.stringify(c);
      r.probs = a;
    }
    for (const x of [p, q, k]) await x.dispose();
  }
  r.stored = stored;
  r.backend = info.backend;
  r.runtime = info.runtime;
  await engine.dispose();
  return r;
}

const median = (v) => [...v].sort((x, y) => x - y)[Math.floor(v.length / 2)];
const ctx = await start({ webgpu: backends.includes("webgpu") });
const results = [];
let chromium;
try {
  chromium = await ctx.browser.version();
  for (const backend of backends) {
    const pageLog = [];
    const page = await harness(ctx, pageLog, { build: backend === "cpu" ? "threads" : "single" });
    let r;
    try {
      r = await page.evaluate(measure, {
        source: `/models.json#${model}`, backend, ORT_BASE, spec: { instruction: texts.instruction }, evidence: texts.evidence[0], criterion,
        rounds: backend === "webgpu" ? Math.min(rounds, 1) : rounds,
      });
    } catch (e) {
      throw new Error(`${backend}: ${e.message}\n${pageLog.slice(-10).join("\n")}`);
    } finally {
      await page.close();
    }
    if (!r.equal) throw new Error(`${backend}: a state on the restored prefix decided otherwise than on the prefilled one`);
    const [prefill, bytes, storage] = [median(r.prefill_ms), median(r.restore_bytes_ms), median(r.restore_storage_ms)];
    const row = {
      backend, emulated: backend === "webgpu", prefill_synced: true, runtime: r.runtime, prefix_tokens: r.tokens, stored_bytes: r.bytes,
      prefill_ms: r.prefill_ms, restore_from_bytes_ms: r.restore_bytes_ms, restore_from_storage_ms: r.restore_storage_ms,
      median_prefill_ms: prefill, median_restore_from_bytes_ms: bytes, median_restore_from_storage_ms: storage,
      speedup: prefill / storage, speedup_from_bytes: prefill / bytes, decisions_equal: r.equal,
    };
    results.push(row);
    log(`${backend}${row.emulated ? " (emulated)" : ""}: ${r.tokens}-token prefix, ${(r.bytes / 1e6).toFixed(1)} MB; prefill ${prefill.toFixed(0)} ms, restore from storage ${storage.toFixed(1)} ms (${row.speedup.toFixed(1)}x), from bytes ${bytes.toFixed(1)} ms (${row.speedup_from_bytes.toFixed(1)}x); decisions equal`);
  }
} finally {
  await ctx.close();
}
writeResult(out, "prefix-restore", "bench/runners/prefix_restore.mjs", {
  what: "a kept rubric prefix restored (from prefix.save()'s bytes, and from the browser's storage with keep: true: read, checked, imported) against the same prefix prefilled, alternating in one page per backend; speedup = median prefill ÷ median restore from storage; goal: ≥ 10x on cpu",
  model, chromium, rounds, emulated: backends.includes("webgpu"), results,
});
log(`wrote ${out}`);
