// allowedMass: the engine's readout against a JavaScript one over a float16 row.
import { ReadoutBench, median } from "/pkg-diagnostics/readout.js";
import { MASS_WIDTH, log, timed } from "./common.js";

/** float32 → float16 bits (round to nearest even; finite inputs in range). */
function toHalf(v) {
  const f = new Float32Array([v]);
  const x = new Uint32Array(f.buffer)[0];
  const sign = (x >>> 16) & 0x8000;
  let exp = ((x >>> 23) & 0xff) - 127 + 15;
  let mant = x & 0x7fffff;
  if (exp <= 0) return sign;
  if (exp >= 31) return sign | 0x7c00;
  let h = sign | (exp << 10) | (mant >>> 13);
  const rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest === 0x1000 && (h & 1))) h++;
  return h;
}

/** float16 bits → number. */
function fromHalf(h) {
  const e = (h >>> 10) & 0x1f;
  const m = h & 0x3ff;
  const s = h & 0x8000 ? -1 : 1;
  if (e === 0) return s * m * 2 ** -24;
  if (e === 31) return m ? NaN : s * Infinity;
  return s * (1 + m / 1024) * 2 ** (e - 15);
}

/** The readout as a front-end would write it: two passes over the row, half decode, Math.exp. */
function jsReadout(bits, columns) {
  let max = -Infinity;
  for (let i = 0; i < bits.length; i++) {
    const v = fromHalf(bits[i]);
    if (v > max) max = v;
  }
  let sum = 0;
  for (let i = 0; i < bits.length; i++) sum += Math.exp(fromHalf(bits[i]) - max);
  const lse = max + Math.log(sum);
  const logits = columns.map((c) => fromHalf(bits[c]));
  return { logits, logSumExp: lse, allowedMass: logits.reduce((a, l) => a + Math.exp(l - lse), 0) };
}

export async function benchMass(cfg) {
  // A deterministic row shaped like real logits: mostly small, a few large.
  let seed = 12345;
  const rnd = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32);
  const bits = new Uint16Array(MASS_WIDTH);
  for (let i = 0; i < MASS_WIDTH; i++) bits[i] = toHalf((rnd() + rnd() + rnd() - 1.5) * 6);
  const columns = [32, 33, 34, 35];
  for (const c of columns) bits[c] = toHalf(9 + rnd() * 3);
  const place = cfg.backend === "webgpu" ? "gpu" : "cpu";
  const rb = await ReadoutBench.create(bits, Uint32Array.from(columns), place);
  const reps = Math.max(cfg.runs * 4, 5);
  const sample = async (fn) => {
    await fn();
    const s = [];
    let r;
    for (let k = 0; k < reps; k++) {
      const [ms, res] = await timed(fn);
      s.push(ms);
      r = res;
    }
    return [s, r];
  };
  const [engineMs, e] = await sample(() => rb.run());
  const [jsMs, j] = await sample(async () => jsReadout(bits, columns));
  const out = {
    width: MASS_WIDTH, dtype: "float16", columns, engine_place: place,
    engine: { samples_ms: engineMs, median_ms: median(engineMs), allowed_mass: e.allowedMass, log_sum_exp: e.logSumExp },
    javascript: { samples_ms: jsMs, median_ms: median(jsMs), allowed_mass: j.allowedMass, log_sum_exp: j.logSumExp },
    abs_diff_allowed_mass: Math.abs(e.allowedMass - j.allowedMass),
    abs_diff_log_sum_exp: Math.abs(e.logSumExp - j.logSumExp),
  };
  out.javascript_over_engine = out.javascript.median_ms / out.engine.median_ms;
  log(`allowedMass over ${MASS_WIDTH} float16 logits: engine (${place}) ${out.engine.median_ms.toFixed(2)} ms, JavaScript ${out.javascript.median_ms.toFixed(2)} ms, ` +
    `|Δ allowedMass| ${out.abs_diff_allowed_mass.toExponential(2)}`);
  return out;
}
