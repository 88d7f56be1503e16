// Which of the package's two builds this page can run, decided without
// loading either (scripts/build_pkg.sh ships this file as the package's
// select.js). The threaded build needs three things a page may lack:
// cross-origin isolation (else shared memory cannot be made), shared wasm
// memory, and relaxed SIMD (its kernels use the integer dot product; a
// module with an instruction the browser lacks fails to compile, so it is
// tested here, not at load). Chromium has all three from 114, and so has
// Firefox ESR 153 (tested); Safari ships no relaxed SIMD and gets the
// single-thread build.

// The smallest module using both: one shared page and one function computing
// i32x4.relaxed_dot_i8x16_i7x16_add_s on three zero vectors.
const ZERO = [0xfd, 0x0c, ...new Array(16).fill(0)];
const BODY = [0x00, ...ZERO, ...ZERO, ...ZERO, 0xfd, 0x93, 0x02, 0x0b];
const PROBE = new Uint8Array([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version 1
  0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7b, // type: () -> v128
  0x03, 0x02, 0x01, 0x00, // function 0 of type 0
  0x05, 0x04, 0x01, 0x03, 0x01, 0x01, // memory: shared, 1..1 pages
  0x0a, BODY.length + 2, 0x01, BODY.length, ...BODY, // code
]);

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
  let valid = false;
  try {
    valid = typeof WebAssembly === "object" && WebAssembly.validate(PROBE);
  } catch {
    valid = false;
  }
  if (!valid) {
    return { usable: false, why: "this browser's WebAssembly lacks relaxed SIMD or shared memory" };
  }
  return { usable: true, why: "cross-origin isolated, with shared memory and relaxed SIMD" };
}
