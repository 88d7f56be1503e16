// The profile study's parts (bench/studies/profile_parts.mjs) on function
// names as V8's profiler reported them for the threaded build on
// 2026-12-06. The study once filed attention's scoring, which lives in
// kernels::simd::dot4, under the int8 products, and two sessions read the
// wrong shares from it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { OTHER, partOf } from "../../bench/studies/profile_parts.mjs";

const ATTENTION = "attention (scores, softmax, weighted values, rotary)";
const PRODUCTS = "int8 products (quantise, group_rows, columns)";
const ELEMENTWISE = "element-wise, norms, shapes";

test("profile parts: attention's scoring is attention, the int8 kernels and the operators in the pool's closures are their own parts", () => {
  const seen = {
    "readout::kernels::simd::dot4::scores16_simd128": ATTENTION,
    "readout::kernels::simd::dot4::dot4_simd128": ATTENTION,
    "<readout::kernels::attention::Heads>::run": ATTENTION,
    "<readout::kernels::attention::Gqa>::run::{closure#5}::{closure#0}": ATTENTION,
    "readout::kernels::simd::wasm::group_rows": PRODUCTS,
    "readout::kernels::simd::wasm::quantise": PRODUCTS,
    "<readout::kernels::q4::Q4Matrix>::matmul_packed::{closure#0}": PRODUCTS,
    "<readout::kernels::par::Pool>::fill::<readout::runtime::own::interp::ops::unary<readout::runtime::own::interp::ops::sigmoid::{closure#0}>::{closure#0}>": ELEMENTWISE,
    "<readout::kernels::par::Pool>::fill::<readout::runtime::own::interp::ops::rms_norm::{closure#0}>::{closure#0}": ELEMENTWISE,
    "<readout::runtime::own::interp::Program>::exec": "interpreter",
    "__rustc::__rdl_alloc_zeroed": "allocation and copies",
    "<dlmalloc::dlmalloc::Dlmalloc<dlmalloc::sys::System>>::free": "allocation and copies",
    "(program)": OTHER,
  };
  for (const [name, part] of Object.entries(seen)) assert.equal(partOf(name), part, name);
});
