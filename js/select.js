// Which of the package's three builds this page can run, decided without
// loading any (scripts/build_pkg.sh ships this file as the package's
// select.js). The threaded build needs three things a page may lack:
// cross-origin isolation (else shared memory cannot be made), shared wasm
// memory, and relaxed SIMD (its kernels use the integer dot product; a
// module with an instruction the browser lacks fails to compile, so it is
// tested here, not at load). Chromium has all three from 114, and so has
// Firefox ESR 153 (tested); Safari ships no relaxed SIMD and gets the
// single-thread build. The relaxed build (`readout/relaxed`) is the
// single-thread build with the same dot product: it needs relaxed SIMD only,
// so a page that is not isolated gets the threaded build's kernel on one
// thread.

// The smallest module using both: one shared page and one function computing
// i32x4.relaxed_dot_i8x16_i7x16_add_s on three zero vectors.
const ZERO = [0xfd, 0x0c, ...new Array(16).fill(0)];
const BODY = [0x00, ...ZERO, ...ZERO, ...ZERO, 0xfd, 0x93, 0x02, 0x0b];
// probe(shared): that module, with the shared page or without a memory.
const probe = (shared) => new Uint8Array([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version 1
  0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7b, // type: () -> v128
  0x03, 0x02, 0x01, 0x00, // function 0 of type 0
  ...(shared ? [0x05, 0x04, 0x01, 0x03, 0x01, 0x01] : []), // memory: shared, 1..1 pages
  0x0a, BODY.length + 2, 0x01, BODY.length, ...BODY, // code
]);
const validates = (bytes) => {
  try {
    return typeof WebAssembly === "object" && WebAssembly.validate(bytes);
  } catch {
    return false;
  }
};

/**
 * Whether the threaded build (`readout/threads`) can run on this page, and
 * why: `{ usable, why }`.
 */
export function threadedBuild() {
  if (!globalThis.crossOriginIsolated) {
    return {
      usable: false,
      why: "the page is not cross-origin isolated (it needs the headers Cross-Origin-Opener-Policy: same-origin and Cross-Origin-Embedder-Policy: require-corp)",
    };
  }
  if (!validates(probe(true))) {
    return { usable: false, why: "this browser's WebAssembly lacks relaxed SIMD or shared memory" };
  }
  return { usable: true, why: "cross-origin isolated, with shared memory and relaxed SIMD" };
}

/**
 * Whether the relaxed build (`readout/relaxed`: one thread, relaxed SIMD's
 * dot product) can run on this page, and why: `{ usable, why }`. Any page
 * will do, isolated or not; the browser's WebAssembly must have relaxed SIMD.
 */
export function relaxedBuild() {
  if (!validates(probe(false))) {
    return { usable: false, why: "this browser's WebAssembly lacks relaxed SIMD" };
  }
  return { usable: true, why: "relaxed SIMD, on any page" };
}

/**
 * The fastest build this page can run, and why: `{ build, why }`, where
 * `build` is "threads" (`readout/threads`), "relaxed" (`readout/relaxed`) or
 * "single" (`readout`).
 */
export function bestBuild() {
  const threads = threadedBuild();
  if (threads.usable) return { build: "threads", why: threads.why };
  const relaxed = relaxedBuild();
  if (relaxed.usable) return { build: "relaxed", why: `${relaxed.why}; not threads: ${threads.why}` };
  return { build: "single", why: `not relaxed: ${relaxed.why}; not threads: ${threads.why}` };
}
