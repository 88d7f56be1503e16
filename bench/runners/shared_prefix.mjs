// Shared prefixes in Chromium (spec §14): the native benchmark's states
// (target/shared-prefix-texts.json, written by `cargo bench --bench
// shared_prefix`), each prefilled whole and built on one shared prefix,
// alternating by state in one page, with the prefix's own prefill counted
// once. The first states' decisions of each pair are compared, so the speed
// is of the same computation.
// Writes bench/results/chromium-shared-prefix/<date>-chromium-shared-prefix-<backend>.json.
//   node bench/runners/shared_prefix.mjs [--backend cpu|wasm] [--states N] [--model ID] [--out FILE]
// --out: where the JSON goes instead (a second run the same day would
// otherwise replace the first's file).
// --model: another build of the same weights (the WASM backend takes the
// fp32 variant: onnxruntime-web's WASM build has no int4 kernel).
import { existsSync, readFileSync } from "node:fs";
import { cpus } from "node:os";
import { join } from "node:path";
import { harness, numberOption, option, ROOT, start, ORT_BASE } from "../../harness/browser.mjs";
import { resultPath, writeResult } from "./result_file.mjs";

const args = process.argv.slice(2);
const backend = option(args, "--backend", "cpu");
const textsPath = join(ROOT, "target/shared-prefix-texts.json");
if (!existsSync(textsPath)) {
  console.error("shared_prefix: target/shared-prefix-texts.json is missing; run `cargo bench --bench shared_prefix` first (it writes the texts both runs measure)");
  process.exit(1);
}
const texts = JSON.parse(readFileSync(textsPath, "utf8"));
const states = numberOption(args, "--states", texts.evidence.length);
const model = option(args, "--model", texts.model.replace(/\/$/, "").split("/").pop());
const outArg = option(args, "--out", undefined);
const out = resultPath("shared_prefix", "chromium-shared-prefix", `chromium-shared-prefix-${backend}`, outArg);
const log = (m) => process.stderr.write(`[shared-prefix] ${m}\n`);
const criterion = { id: "urgent", family: "yes_no", question: "Is this ticket urgent?", options: [{ id: "o0", description: "Yes" }, { id: "o1", description: "No" }] };

const ctx = await start({ webgpu: false });
const pageLog = [];
let r, chromium;
try {
  chromium = await ctx.browser.version();
  // The threaded build on cpu (2 threads, as natively); onnxruntime-web's
  // WASM backend in the single-threaded page otherwise.
  const page = await harness(ctx, pageLog, { build: backend === "cpu" ? "threads" : "single" });
  page.on("console", (m) => m.text().startsWith("[shared-prefix]") && log(m.text().slice(16)));
  r = await page.evaluate(async ({ source, backend, ORT_BASE, instruction, evidence, criterion }) => {
    const { Engine } = window.readout;
    const style = { mode: "letters", prompt: "plain" };
    const engine = await Engine.load(source, backend === "cpu" ? { backend, threads: 2 } : { backend, ortBase: ORT_BASE });
    const w = await engine.prefill({ instruction, evidence: evidence[0] }, style);
    await w.dispose();
    let whole = 0, on = 0, tokens = 0, maxDp = 0;
    let t = performance.now();
    const p = await engine.prefix({ instruction }, style);
    on += performance.now() - t;
    for (let i = 0; i < evidence.length; i++) {
      t = performance.now();
      const a = await engine.prefill({ instruction, evidence: evidence[i] }, style);
      whole += performance.now() - t;
      t = performance.now();
      const b = await p.prefill({ evidence: evidence[i] });
      on += performance.now() - t;
      tokens += a.tokens;
      if (i < 5) {
        const [da, db] = [await a.score(criterion), await b.score(criterion)];
        da.probs.forEach((x, j) => (maxDp = Math.max(maxDp, Math.abs(x.p - db.probs[j].p))));
      }
      await a.dispose();
      await b.dispose();
      if (i % 20 === 19) console.log(`[shared-prefix] ${i + 1} states, whole ${whole.toFixed(0)} ms, on the prefix ${on.toFixed(0)} ms`);
    }
    const prefixTokens = p.tokens;
    await p.dispose();
    const info = engine.info();
    await engine.dispose();
    return { backend: info.backend, whole, on, tokens, prefixTokens, maxDp };
  }, { source: `/models/${model}/`, backend, ORT_BASE, instruction: texts.instruction, evidence: texts.evidence.slice(0, states), criterion });
} catch (e) {
  throw new Error(`${e.message}\n${pageLog.slice(-10).join("\n")}`);
} finally {
  await ctx.close();
}
const speedup = r.whole / r.on;
log(`${r.backend}: ${states} states of ${(r.tokens / states).toFixed(0)} tokens on a ${r.prefixTokens}-token prefix: whole ${r.whole.toFixed(0)} ms, on the prefix ${r.on.toFixed(0)} ms (its own prefill included): ${speedup.toFixed(2)}x; max |Δp| ${r.maxDp.toExponential(1)}`);
writeResult(out, "chromium-shared-prefix", "bench/runners/shared_prefix.mjs", {
  what: "states sharing an instruction, prefilled whole against built on one shared prefix (whose prefill is counted once), alternating by state in one page; goal: ≥ 2.5x",
  model,
  chromium,
  host: { cpu: cpus()[0]?.model, cores: cpus().length },
  results: [{
    runtime: r.backend, states, prefix_tokens: r.prefixTokens, mean_state_tokens: r.tokens / states,
    whole_ms: r.whole, on_prefix_ms: r.on, speedup,
    ideal_speedup: r.tokens / (r.prefixTokens + r.tokens - states * r.prefixTokens),
    max_abs_dp_first_5_states: r.maxDp,
  }],
});
log(`wrote ${out}`);
