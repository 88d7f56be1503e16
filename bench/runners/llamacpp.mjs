// Native llama.cpp in the engines comparison (bench/runners/wllama.mjs): both
// builds (node-llama-cpp's prebuilt binaries, llama-cpp-python compiled with
// GGML_NATIVE=ON) on the same GGUF as wllama, at the same thread count and
// shapes, each in a process of its own while nothing else runs. Medians
// and the least-squares fit are the diagnostics build's (median, linearFit), as for
// ours and wllama.
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import init, { linearFit, median } from "../../pkg-diagnostics/readout.js";
import { initNode } from "../../pkg-diagnostics/node.js";
import { ROOT } from "../../harness/serve.mjs";
import { cost45 } from "../page/compare.mjs";

const DIR = join(ROOT, "target", "bench", "llamacpp");
let ready = false;

/** Installs both builds once (bench/runners/llamacpp_setup.sh, idempotent). */
function setup() {
  if (ready) return;
  execFileSync("bash", [join(ROOT, "bench/runners/llamacpp_setup.sh")], { cwd: ROOT, stdio: ["ignore", "inherit", "inherit"] });
  ready = true;
}

/**
 * Rows for both native llama.cpp builds on `gguf` (a path) at `threads`,
 * after a `prefix`-token past, suffixes of `lengths` ("1,8,32,64").
 */
export async function nativeLlamacpp(gguf, { threads, lengths, runs, prefix = 256, warmup = 1, log = (l) => console.error(l) }) {
  setup();
  await initNode(init);
  const args = [gguf, String(threads), String(prefix), lengths, String(runs), String(warmup)];
  const builds = [
    { build: "node-llama-cpp (prebuilt CPU binaries)", cmd: process.execPath, argv: [join(ROOT, "bench/runners/llamacpp_node.mjs"), ...args] },
    { build: "llama-cpp-python (GGML_NATIVE=ON)", cmd: join(DIR, "venv/bin/python"), argv: [join(ROOT, "bench/runners/llamacpp_py.py"), ...args] },
  ];
  const ns = lengths.split(",").map(Number);
  const rows = builds.map(({ build, cmd, argv }) => {
    log(`[llama.cpp] ${build}, ${threads} thread${threads === 1 ? "" : "s"}`);
    const r = JSON.parse(execFileSync(cmd, argv, { cwd: ROOT, stdio: ["ignore", "pipe", "inherit"], maxBuffer: 1 << 20 }).toString());
    const median_ms = ns.map((n) => median(r.samples_ms[n]));
    const f = linearFit(ns, median_ms);
    const fit = { fixed_ms: f.fixedMs, per_token_ms: f.perTokenMs, r2: f.r2 };
    return {
      label: `native llama.cpp, ${r.engine} ${r.version}`, engine: "llama.cpp", build: r.engine, version: r.version, threads: r.threads,
      median_ms, samples_ms: r.samples_ms, fit, ms_at_45: cost45(fit), one_token_ms: median_ms[0],
      prefill_ms: r.prefill_ms, prefill_tokens: r.prefill_tokens, prefill_tokens_per_s: (r.prefill_tokens / r.prefill_ms) * 1e3,
      load_ms: r.load_ms, computes: r.computes, greedy: r.greedy, system_info: r.system_info.trim(),
    };
  });
  // Two builds of one engine on one file and the same tokens: their greedy
  // picks must agree, or one of them is not computing what it is timed on.
  const [a, b] = rows;
  if (JSON.stringify(a.greedy) !== JSON.stringify(b.greedy)) {
    throw new Error(`the two llama.cpp builds pick different tokens: ${JSON.stringify(a.greedy)} against ${JSON.stringify(b.greedy)}`);
  }
  return rows;
}
