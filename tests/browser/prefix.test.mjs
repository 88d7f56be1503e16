// Shared prefixes and states that grow (spec §14) in Chromium, on every
// backend: a rubric with worked examples prefilled once, the fixture's
// states built on it, against the native engine given the same prefix; a
// prefix without examples and a grown state against the same states
// prefilled whole; the rubric saved and restored (its past through the host
// and back) against itself, bit for bit; and the refusals, each followed
// by a score.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { compare, fixture, harness, nativeDecisions, ORT_BASE, OUT, start, TINY } from "./lib.mjs";

const PREFIX = {
  instruction: "Judge the evidence below, then answer each criterion.",
  examples: [
    {
      evidence: "The invoice of 3 May was paid twice by the same card.",
      criterion: { id: "ex1", question: "Was the customer charged twice?", options: [{ id: "yes", description: "Yes" }, { id: "no", description: "No" }] },
      answer: "yes",
    },
    {
      evidence: "The lamp arrived on time and works as described.",
      criterion: { id: "ex2", question: "How does the customer feel?", options: [{ id: "angry", description: "Angry" }, { id: "happy", description: "Satisfied" }] },
      answer: "happy",
    },
  ],
};
const STATES = fixture().slice(0, 4);
const LINE = "A later note: the customer asked for a refund by email.";

let ctx;
const native = {};
before(async () => {
  ctx = await start();
  // The native reference: the same prefix as the fixture's first line.
  mkdirSync(OUT, { recursive: true });
  const path = join(OUT, "prefix-fixture.jsonl");
  writeFileSync(path, [JSON.stringify({ prefix: PREFIX }), ...STATES.map((s) => JSON.stringify(s))].join("\n") + "\n");
  native.ort = nativeDecisions(TINY, [], path);
  native.own = nativeDecisions(TINY, ["--runtime", "own"], path);
});
after(() => ctx?.close());

// WebGPU runs on SwiftShader here, emulated and slow (170 s for the whole
// case beside Deno): it takes one state each way. WASM is the same
// onnxruntime-web session code on another execution provider, and takes all.
const SHARE = { cpu: 4, wasm: 4, webgpu: 1 };
for (const backend of ["cpu", "wasm", "webgpu"]) {
  test(`${backend}: states on a shared prefix with worked examples give the native engine's decisions; without examples, and grown, they equal the whole prefill; bad calls are refused by name`, async () => {
    const log = [];
    const page = await harness(ctx, log);
    let r;
    try {
      r = await page.evaluate(async ({ source, backend, ORT_BASE, PREFIX, STATES, LINE, n }) => {
        const { Engine } = window.readout;
        const engine = await Engine.load(source, { backend, ortBase: ORT_BASE });
        const probs = (ds) => ds.flatMap((d) => d.probs.map((p) => p.p));
        const out = { backend: engine.info().backend, decisions: [], whole: [], onBare: [], grown: [], grownWhole: [], codes: {} };
        const rubric = await engine.prefix(PREFIX);
        out.prefixTokens = rubric.tokens;
        // Saved and restored (its past through the host and back): the same decisions bit for bit.
        const restored = await engine.restorePrefix(await rubric.save(), PREFIX);
        out.restored = [];
        for (const s of STATES.slice(0, n)) {
          const st = await rubric.prefill({ id: s.id, evidence: s.evidence });
          const ds = await st.scoreAll(s.criteria);
          for (const d of ds) out.decisions.push([`${s.id}/${d.id}`, d]);
          await st.dispose();
          if (out.restored.length < 2) {
            const again = await restored.prefill({ id: s.id, evidence: s.evidence });
            out.restored.push([probs(ds), probs(await again.scoreAll(s.criteria))]);
            await again.dispose();
          }
        }
        await restored.dispose();
        // No examples: the same text as a plain prefill with that instruction.
        const bare = await engine.prefix({ instruction: PREFIX.instruction });
        for (const s of STATES.slice(0, Math.min(n, 2))) {
          const whole = await engine.prefill({ instruction: PREFIX.instruction, evidence: s.evidence });
          const on = await bare.prefill({ evidence: s.evidence });
          out.whole.push(probs(await whole.scoreAll(s.criteria)));
          out.onBare.push(probs(await on.scoreAll(s.criteria)));
          await on.extend(LINE);
          const grownWhole = await engine.prefill({ instruction: PREFIX.instruction, evidence: `${s.evidence}\n${LINE}` });
          out.grown.push([on.tokens, probs(await on.scoreAll(s.criteria))]);
          out.grownWhole.push([grownWhole.tokens, probs(await grownWhole.scoreAll(s.criteria))]);
          await whole.dispose();
          await grownWhole.dispose();
          await on.dispose();
        }
        // Refusals, each followed by a score.
        const code = async (name, f) => {
          try {
            await f();
            out.codes[name] = "accepted";
          } catch (e) {
            out.codes[name] = e.code;
          }
          const st = await bare.prefill({ evidence: "The parcel arrived two days late." });
          out.codes[`${name}:after`] = (await st.score(STATES[0].criteria[0])).probs.length;
          await st.dispose();
        };
        await code("boundary", () => bare.prefill({ evidence: "\n\n\nThe parcel arrived late." }));
        const gone = await bare.prefill({ evidence: "The parcel arrived late." });
        await gone.dispose();
        await code("extendDisposed", () => gone.extend("More."));
        await code("overflow", () => bare.prefill({ evidence: "The parcel arrived late again. ".repeat(200) }));
        const child = await bare.prefill({ evidence: "The parcel arrived late." });
        await code("parentFirst", () => bare.dispose());
        await child.dispose();
        await bare.dispose();
        await rubric.dispose();
        out.live = engine.liveGpuTensors();
        await engine.dispose();
        return out;
      }, { source: `/models/${TINY}/`, backend, ORT_BASE, PREFIX, STATES, LINE, n: SHARE[backend] });
    } catch (e) {
      throw new Error(`${e.message}\n${log.slice(-15).join("\n")}`);
    } finally {
      await page.close();
    }
    assert.equal(r.backend, backend);
    assert.ok(r.prefixTokens > 40, `${r.prefixTokens}`);
    // Against native on the same prefix: ONNX Runtime's bound for WASM and
    // WebGPU; for cpu our runtime natively, within the int8 kernels' bound
    // (engine.test.mjs says why).
    const ref = backend === "cpu" ? native.own : native.ort;
    const { worst, changed } = compare(new Map(r.decisions), ref);
    console.log(`# ${backend}: ${r.decisions.length} criteria on a ${r.prefixTokens}-token prefix with 2 examples, max |Δp| vs native ${worst.toExponential(2)}`);
    assert.equal(r.decisions.length, STATES.slice(0, SHARE[backend]).reduce((a, s) => a + s.criteria.length, 0));
    assert.deepEqual(changed, []);
    assert.ok(worst <= (backend === "cpu" ? 2e-2 : 1e-3), `max |Δp| ${worst}`);
    assert.ok(r.restored.length > 0);
    r.restored.forEach(([fresh, back], i) => assert.deepEqual(back, fresh, `state ${i} on the restored prefix`));
    const diff = (a, b) => Math.max(...a.map((x, i) => Math.abs(x - b[i])));
    r.whole.forEach((w, i) => assert.ok(diff(w, r.onBare[i]) <= 1e-5, `state ${i} on the prefix: ${diff(w, r.onBare[i])}`));
    r.grown.forEach(([t, g], i) => {
      assert.equal(t, r.grownWhole[i][0], "a grown state's tokens");
      assert.ok(diff(g, r.grownWhole[i][1]) <= 1e-5, `state ${i} grown: ${diff(g, r.grownWhole[i][1])}`);
    });
    assert.deepEqual(r.codes, {
      boundary: "token_boundary", "boundary:after": 4,
      extendDisposed: "unknown_state", "extendDisposed:after": 4,
      overflow: "context_overflow", "overflow:after": 4,
      parentFirst: "prefix_in_use", "parentFirst:after": 4,
    });
    assert.equal(r.live, 0);
  });
}
