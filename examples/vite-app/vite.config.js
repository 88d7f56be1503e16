// The two settings readout needs from Vite (js/README.md, "Bundlers"):
// the engine's worker is an ES module worker that imports its build and
// onnxruntime-web lazily (code splitting), so workers are bundled as ES
// modules; and the page is served cross-origin isolated, so the threaded
// build can run (`vite preview` and `vite dev`; a real host sets the same
// two headers).
const isolated = {
  "Cross-Origin-Opener-Policy": "same-origin",
  "Cross-Origin-Embedder-Policy": "require-corp",
};

export default {
  worker: { format: "es" },
  server: { headers: isolated },
  preview: { headers: isolated },
};
