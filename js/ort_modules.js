// onnxruntime-web ships the WebGPU execution provider and the WASM backend
// as two builds; the WebGPU build's CPU kernels lack GatherBlockQuantized
// (the int4 embedding of the builder's graphs), so each backend imports its
// own build, on first use only. Both are the peer dependency onnxruntime-web.
export function ortModule(backend) {
  return backend === "webgpu" ? import("onnxruntime-web/webgpu") : import("onnxruntime-web");
}
