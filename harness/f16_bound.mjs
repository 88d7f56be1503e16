// The float16 agreement bound between two runtimes computing the same q4f16
// graph (docs/float16.md derives it): WebGPU (shader-f16) and native ONNX
// Runtime both round every activation to float16, in different orders, so
// each logit can differ by about one float16 ulp of itself, and a letter's
// probability by at most half the largest logit difference. The tests and
// the Deno benchmark hold every criterion to it.
export const F16_BOUND = 2e-3;

// The bound for a deep model (docs/float16.md, "A deep model"): WebGPU's
// float16 against the float32 computation of the same int4 weights (our
// runtime's `--precision f32` reference), measured on SmolLM2-135M's 30
// layers over the authored fixture's first 8 states, cloze and letters
// (bench/results/deno-webgpu-f16/*-deno-webgpu-f16-smollm2-135m-instruct-q4f16.json): worst
// 3.1e-2 of 64 criteria. 5e-2 keeps that worst case with headroom for
// states not measured; native ONNX Runtime's float16 on the CPU is not the
// reference there, since it drifts further (up to 1.6e-1) from float32.
export const F16_DEEP_BOUND = 5e-2;
