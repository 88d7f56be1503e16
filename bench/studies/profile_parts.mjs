// Which part of the runtime a profiled wasm function belongs to, for
// bench/studies/cpu_profile.mjs (and its test, tests/node/profile_parts.test.mjs).

// The parts of the runtime, by the Rust path in a function's name; the
// first that matches takes the function. Attention comes first: its
// scoring lives in kernels::simd::dot4, beside the int8 kernels, and the
// profiles of 2026-12-05 and 12-06 (written before this order) counted it
// as int8 products.
export const PARTS = [
  ["attention (scores, softmax, weighted values, rotary)", /kernels::attention|kernels::exp|kernels::simd::dot4/],
  ["int8 products (quantise, group_rows, columns)", /kernels::simd|kernels::q4|quantis/],
  ["allocation and copies", /dlmalloc|alloc::|memset|memcpy|memmove|__rdl_|__rust_(alloc|dealloc|realloc)|raw_vec/],
  // The interpreter's operators run inside the pool's closures, so
  // `interp::ops` is looked for before the pool itself.
  ["element-wise, norms, shapes", /kernels::ops|interp::ops/],
  ["interpreter", /kernels::program|kernels::tensor|kernels::par|own::interp/],
  ["engine and readout", /readout(\[[0-9a-f]+\])?::(engine|core|runtime|bindings)/],
];

/** What matches no part: JS, idle time, functions without a name. */
export const OTHER = "everything else (JS, idle, unnamed)";

/** The part `name` (a function's name as V8's profiler gives it) falls in. */
export function partOf(name) {
  const part = PARTS.find(([, re]) => re.test(name));
  return part ? part[0] : OTHER;
}
