// The calls the worker tests make in a page (Chromium and Firefox): the
// same calls through readout on the page and through readout/worker, and a
// worker terminated under a pending call. Each runs inside the page.

/**
 * Runs the same calls through `readout` on the page and through
 * `readout/worker`, in one page; returns both transcripts. Runs in the page.
 * `so`: options for every score call; `lite`: only a prefill and a score
 * (emulated WebGPU compiles shaders for every new shape: minutes).
 */
export async function both({ source, backend, build, ORT_BASE, STATES, PREFIX, n, m, so = {}, lite = false }) {
  const direct = await import(build === "threads" ? "/pkg/threads/readout.js" : build === "relaxed" ? "/pkg/relaxed/readout.js" : "/pkg/readout.js");
  await direct.default();
  const worker = await import("/pkg/worker.js");
  // Decisions without their time; everything else must match bit for bit.
  const strip = (d) => (Array.isArray(d) ? d.map(strip) : { ...d, ms: undefined });
  const run = async (lib, sync) => {
    const files = new Set();
    const engine = await lib.Engine.load(source, { backend, ortBase: ORT_BASE, build, onProgress: (p) => files.add(p.file) });
    const info = sync ? engine.info() : await engine.info();
    const out = { backend: info.backend, readout: info.readout, files: [...files].sort(), decisions: [], errors: [] };
    if (lite) {
      const state = await engine.prefill({ evidence: STATES[0].evidence }, { mode: so.mode });
      out.decisions.push(strip(await state.scoreAll(STATES[0].criteria.slice(0, m), so)));
      await state.dispose();
      await engine.dispose();
      out.afterDispose = await engine.prefill({ evidence: "x" }).then(() => "no error", (e) => ({ code: e.code, field: e.field }));
      out.errors.push({ code: "lite" });
      return out;
    }
    for (const s of STATES.slice(0, n)) {
      const state = await engine.prefill({ evidence: s.evidence }, { mode: so.mode });
      out.decisions.push(strip(await state.score(s.criteria[0], so)));
      out.decisions.push(strip(await state.scoreAll(s.criteria.slice(0, m), { calibration: "none", ...so })));
      await state.extend("A later note: the customer asked for a refund.");
      out.decisions.push({ tokens: state.tokens, d: strip(await state.score(s.criteria[0], { mode: "letters", ...so })) });
      await state.dispose();
    }
    const rubric = await engine.prefix(PREFIX, { mode: so.mode });
    const on = await rubric.prefill({ evidence: STATES[0].evidence });
    out.decisions.push({ prefix: rubric.tokens, tokens: on.tokens, d: strip(await on.score(STATES[0].criteria[1], so)) });
    // Refusals: a criterion with one option; a second dispose; each then a score.
    const bad = { ...STATES[0].criteria[0], options: STATES[0].criteria[0].options.slice(0, 1) };
    for (const f of [() => on.score(bad), () => on.dispose().then(() => on.dispose())]) {
      try {
        await f();
        out.errors.push("no error");
      } catch (e) {
        out.errors.push({ message: e.message, code: e.code, field: e.field, limit: e.limit });
      }
      const again = await rubric.prefill({ evidence: STATES[0].evidence });
      out.decisions.push(strip(await again.score(STATES[0].criteria[0], so)));
      await again.dispose();
    }
    await rubric.dispose();
    out.readBack = sync ? engine.bytesReadBack() : await engine.bytesReadBack();
    await engine.dispose();
    try {
      await engine.prefill({ evidence: "x" });
      out.afterDispose = "no error";
    } catch (e) {
      out.afterDispose = { code: e.code, field: e.field };
    }
    return out;
  };
  return { page: await run(direct, true), worker: await run(worker, false), build: build };
}

/** A worker terminated under a pending call: every call rejects with worker_died, then a new engine scores. Runs in the page. */
export async function terminated({ source, STATES }) {
  const { Engine } = await import("/pkg/worker.js");
  const engine = await Engine.load(source, { backend: "cpu" });
  const state = await engine.prefill({ evidence: STATES[0].evidence });
  const pending = state.scoreAll(STATES[0].criteria);
  engine.terminate();
  const codes = [];
  for (const p of [pending, state.score(STATES[0].criteria[0]), engine.info()]) {
    codes.push(await p.then(() => "resolved", (e) => `${e.code}:${e.name}`));
  }
  const fresh = await Engine.load(source, { backend: "cpu" });
  const s2 = await fresh.prefill({ evidence: STATES[0].evidence });
  const d = await s2.score(STATES[0].criteria[0]);
  await fresh.dispose();
  return { codes, alive: engine.alive, answer: d.answer, sum: d.probs.reduce((a, p) => a + p.p, 0) };
}
