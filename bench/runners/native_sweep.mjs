// The native logit_cost sweep that the browser studies measure beside
// themselves in the same run: `readout sweep` on this checkout's release
// build, reduced to what their ratios read.
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { ROOT } from "../../harness/serve.mjs";
import { cost45 } from "../page/compare.mjs";

/**
 * Sweeps `models` (ids under models/) on `runtime` ("ort" or "own") at
 * `threads` threads after a 256-token past, with 4 options.
 */
export function nativeSweep(runtime, models, { lengths, runs, threads, log = (l) => console.error(l) }) {
  const out = join(ROOT, "target", "bench", `native-sweep-${runtime}.json`);
  mkdirSync(dirname(out), { recursive: true });
  log(`[native] ${runtime}: ${models.join(", ")}`);
  execFileSync("cargo", ["build", "--locked", "--release", "--bin", "readout"], { cwd: ROOT, stdio: ["ignore", "ignore", "inherit"] });
  execFileSync(join(ROOT, "target/release/readout"), ["sweep", "--runtime", runtime, ...models.flatMap((m) => ["--model", `models/${m}`]),
    "--lengths", lengths, "--runs", String(runs), "--warmup", "1", "--prefix", "256", "--options", "4", "--threads", String(threads), "-o", out],
  { cwd: ROOT, stdio: ["ignore", "inherit", "inherit"] });
  return JSON.parse(readFileSync(out, "utf8")).variants.map((v) => ({
    label: `native ${runtime} ${v.id}`, model: v.id, median_ms: v.median_ms, fit: v.fit, ms_at_45: cost45(v.fit),
    prefill_ms: v.prefill_ms, prefill_tokens_per_s: (256 / v.prefill_ms) * 1e3, probs: v.probs,
  }));
}
