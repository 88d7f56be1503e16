// The float16 agreement bound between two runtimes computing the same q4f16
// graph (docs/float16.md derives it): WebGPU (shader-f16) and native ONNX
// Runtime both round every activation to float16, in different orders, so
// each logit can differ by about one float16 ulp of itself, and a letter's
// probability by at most half the largest logit difference. The tests and
// the Deno benchmark hold every criterion to it.
export const F16_BOUND = 2e-3;
