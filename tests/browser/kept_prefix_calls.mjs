// What the kept-prefix tests run in a page (Chromium and Firefox).

/** A rubric with a worked example. */
export const PREFIX = {
  instruction: "Judge the evidence below, then answer each criterion.",
  examples: [
    {
      evidence: "The invoice of 3 May was paid twice by the same card.",
      criterion: { id: "ex1", question: "Was the customer charged twice?", options: [{ id: "yes", description: "Yes" }, { id: "no", description: "No" }] },
      answer: "yes",
    },
  ],
};

/**
 * Loads `source`, makes the rubric prefix with `keep: true`, scores the
 * first `n` states on it, and returns their probabilities and
 * `prefix.storage`; the engine is disposed after.
 */
export async function keptRun({ source, backend, ORT_BASE, PREFIX, STATES, n }) {
  const engine = await window.readout.Engine.load(source, { backend, ortBase: ORT_BASE });
  const p = await engine.prefix(PREFIX, { keep: true });
  const probs = [];
  for (const s of STATES.slice(0, n)) {
    const st = await p.prefill({ evidence: s.evidence });
    for (const d of await st.scoreAll(s.criteria)) probs.push(d.probs.map((x) => x.p));
    await st.dispose();
  }
  const out = { storage: p.storage, tokens: p.tokens, probs, backend: engine.info().backend };
  await p.dispose();
  out.live = engine.liveGpuTensors();
  await engine.dispose();
  return out;
}

/** In the page: the engine's stored prefix files (not their records), names as stored, with sizes. */
export async function storedPrefixes() {
  const { rawFiles } = await import("/tests/browser/storage_calls.mjs");
  return (await rawFiles()).filter((f) => f.path.split("/").pop().startsWith("prefix-") && !f.path.endsWith(".meta.json"));
}
