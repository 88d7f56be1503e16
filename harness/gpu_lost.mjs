// A GPU device lost under a held state (spec §12), the same in a page
// (Chromium's SwiftShader) and in Deno (Mesa's lavapipe): every later run on
// the engine is refused by name, and a new engine on the same source scores.
// Imported where the test runs (a page by URL, Deno by file URL); the tests
// judge what it returns.

/** What a call gives: "accepted", or the refusal's message and code. */
async function refused(f) {
  try {
    await f();
    return "accepted";
  } catch (err) {
    return { message: err.message, code: err.code };
  }
}

/**
 * Loses `engine`'s device with `held` (a prefilled state) alive, then tries
 * a score on `held` and a new prefill; disposes both and scores `criterion`
 * on a new engine from `source`. Returns the two refusals, the engine's
 * `info().deviceLost`, and the new engine's first probability.
 */
export async function loseDevice({ Engine, engine, held, criterion, source, ORT_BASE }) {
  await engine.loseGpuDevice();
  const lostScore = await refused(() => held.score(criterion));
  const lostPrefill = await refused(() => engine.prefill({ evidence: "The door is shut." }));
  const lost = engine.info().deviceLost;
  await held.dispose();
  await engine.dispose();
  const again = await Engine.load(source, { backend: "webgpu", ortBase: ORT_BASE });
  const p = (await (await again.prefill({ evidence: "Report 0: the door of room 0 is shut." })).score(criterion)).probs[0].p;
  await again.dispose();
  return { lostScore, lostPrefill, lost, again: p };
}
