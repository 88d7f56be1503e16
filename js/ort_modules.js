// onnxruntime-web ships the WebGPU execution provider and the WASM backend
// as two builds; the WebGPU build's CPU kernels lack GatherBlockQuantized
// (the int4 embedding of the builder's graphs), so each backend imports its
// own build, on first use only. Both are the peer dependency onnxruntime-web,
// found by its bare name (a bundler, or the page's import map). Where that
// name does not resolve (a Worker: import maps do not reach workers), the
// same build is imported from `ortBase`, where the caller serves its dist/.
export async function ortModule(backend, ortBase) {
  try {
    return await (backend === "webgpu" ? import("onnxruntime-web/webgpu") : import("onnxruntime-web"));
  } catch (e) {
    if (!ortBase || !(e instanceof TypeError)) throw e;
    const base = ortBase.endsWith("/") ? ortBase : `${ortBase}/`;
    const file = backend === "webgpu" ? "ort.webgpu.bundle.min.mjs" : "ort.bundle.min.mjs";
    return import(/* @vite-ignore */ new URL(file, new URL(base, globalThis.location?.href)).href);
  }
}
