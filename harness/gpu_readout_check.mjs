// The GPU readout kernel's self-test, the same in a page (Chromium's
// SwiftShader) and in Deno (Mesa's lavapipe): three rows of random logits
// over Qwen3's vocabulary, in float32 and again as float16 bits, through the
// package's gpuReadoutSelfTest (the kernel against the CPU's readSlots on the
// same rows). `run` is imported where the test runs (a page by URL, Deno by
// file URL), `check` where it is judged.

/** Both pipelines' results: [float32, float16]. */
export async function run(gpuReadoutSelfTest) {
  const V = 151936, rows = 3, cols = [362, 425, 356, 422, 151935, 0];
  let x = 12345;
  const rnd = () => ((x = (x * 1103515245 + 12345) >>> 0) / 2 ** 32) * 16 - 8;
  const f32 = Float32Array.from({ length: rows * V }, rnd);
  const f16bits = new Uint16Array(rows * V);
  const dv = new DataView(new ArrayBuffer(4));
  for (let i = 0; i < f16bits.length; i++) {
    // float32 -> float16 bits (truncating the mantissa; inputs are in range)
    dv.setFloat32(0, f32[i]);
    const b = dv.getUint32(0), s = (b >>> 16) & 0x8000, e = ((b >>> 23) & 0xff) - 127 + 15, m = (b >>> 13) & 0x3ff;
    f16bits[i] = e <= 0 ? s : s | (e << 10) | m;
  }
  return [await gpuReadoutSelfTest(f32, rows, V, cols, false), await gpuReadoutSelfTest(f16bits, rows, V, cols, true)];
}

/** The kernel's logits equal the CPU's bit for bit, its log-sum-exp within 1e-5, on `adapter`; 9 floats read back a row set. */
export function check(assert, results, adapter) {
  assert.equal(results.length, 2);
  for (const o of results) {
    assert.match(o.adapter, adapter);
    o.gpu.logits.forEach((v, i) => assert.equal(v, o.cpu.logits[i]));
    assert.ok(Math.abs(o.gpu.logSumExp - o.cpu.logSumExp) <= 1e-5 * Math.abs(o.cpu.logSumExp), `${o.gpu.logSumExp} vs ${o.cpu.logSumExp}`);
    assert.equal(o.gpu.bytesReadBack, (6 + 3) * 4);
  }
}
