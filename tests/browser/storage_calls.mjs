// What the storage tests run in a page (Chromium and Firefox).

/** Loads `source`, scores the states, and returns the probabilities, info().storage and where each file came from. */
export async function loadAndScore({ source, backend = "cpu", ORT_BASE, STATES, options = {} }) {
  window.sources = new Set();
  const engine = await window.readout.Engine.load(source, { backend, ortBase: ORT_BASE, onProgress: (p) => window.sources.add(p.source), ...options });
  const probs = [];
  for (const s of STATES) {
    const state = await engine.prefill({ evidence: s.evidence });
    for (const d of await state.scoreAll(s.criteria)) probs.push(d.probs.map((p) => p.p));
    await state.dispose();
  }
  const info = engine.info();
  await engine.dispose();
  return { probs, storage: info.storage, sources: info.files.map((f) => f.source), progressSources: [...window.sources].sort() };
}

/** In the page: every file under the engine's folder (names as stored), with sizes. */
export async function rawFiles() {
  const out = [];
  let root;
  try {
    root = await (await navigator.storage.getDirectory()).getDirectoryHandle("readout-files-v1");
  } catch {
    return out;
  }
  for await (const [dname, dir] of root.entries()) {
    for await (const [name, h] of dir.entries()) out.push({ path: `${dname}/${name}`, size: h.kind === "file" ? (await h.getFile()).size : -1 });
  }
  return out;
}
