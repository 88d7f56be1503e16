// The engines sweep on native llama.cpp through node-llama-cpp's prebuilt CPU
// binaries (bench/runners/llamacpp_setup.sh installs them under
// target/bench/llamacpp/node): the GGUF loaded, a prefix of one-token words
// prefilled, then per suffix length the suffix evaluated over the cached
// prefix, the last row's logits computed and one greedy token picked, and
// the suffix erased again. Prints `{ engine, version, threads, load_ms,
// prefill_ms, prefill_tokens, samples_ms, greedy, computes }` as JSON on
// stdout (greedy: the token picked after the prefix and after each length's
// last run, which the other build must pick too);
// bench/runners/llamacpp.mjs takes the medians and the fit.
//   node bench/runners/llamacpp_node.mjs GGUF THREADS PREFIX LENGTHS RUNS WARMUP
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [gguf, threadsArg, prefixArg, lengthsArg, runsArg, warmupArg] = process.argv.slice(2);
if (!warmupArg) throw new Error("usage: llamacpp_node.mjs GGUF THREADS PREFIX LENGTHS RUNS WARMUP");
const threads = Number(threadsArg), prefix = Number(prefixArg), runs = Number(runsArg), warmup = Number(warmupArg);
const lengths = lengthsArg.split(",").map(Number);
const dir = join(import.meta.dirname, "..", "..", "target", "bench", "llamacpp", "node", "node_modules", "node-llama-cpp");
const version = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")).version;
const { getLlama } = await import(pathToFileURL(join(dir, "dist", "index.js")).href);

// build "never": the prebuilt binaries or nothing (no compile behind our back).
const llama = await getLlama({ gpu: false, build: "never", logLevel: "error", maxThreads: threads });
const t0 = performance.now();
const model = await llama.loadModel({ modelPath: gguf, gpuLayers: 0 });
const context = await model.createContext({ contextSize: 1024, batchSize: 512, threads: { ideal: threads, min: threads }, sequences: 1 });
const loadMs = performance.now() - t0;
const seq = context.getSequence();
const one = (w) => {
  const t = model.tokenize(w);
  if (t.length !== 1) throw new Error(`"${w}" is ${t.length} tokens in this vocabulary; the sweep needs one-token words`);
  return t[0];
};
const words = (first, word, n) => (n ? [one(first), ...Array(n - 1).fill(one(word))] : []);
// The last token asks for the next one: its row's logits and a greedy pick.
const evaluate = async (tokens) => {
  const items = tokens.map((t, i) => (i === tokens.length - 1 ? [t, { generateNext: { token: true, options: { temperature: 0 } } }] : t));
  const out = await seq.controlledEvaluate(items);
  const next = out.at(-1)?.next?.token;
  if (next == null) throw new Error("node-llama-cpp returned no next token for the last row");
  return next;
};
const reset = async (to) => {
  if (seq.nextTokenIndex > to) await seq.eraseContextTokenRanges([{ start: to, end: seq.nextTokenIndex }]);
  if (seq.nextTokenIndex !== to) throw new Error(`the sequence holds ${seq.nextTokenIndex} tokens, ${to} expected`);
};

// A warm-up prefill of other words (their count unchecked, as wllama's),
// erased, then the measured one.
await evaluate(model.tokenize(" pear".repeat(prefix)).slice(0, prefix));
await reset(0);
const t1 = performance.now();
const greedy = { prefix: await evaluate(words("apple", " apple", prefix)) };
const prefillMs = performance.now() - t1;
const SUFFIX_WORDS = [" the", " of", " and", " to", " in", " is"];
let k = 0;
const samples = {};
for (const n of lengths) {
  const s = [];
  for (let r = 0; r < warmup + runs; r++) {
    const w = SUFFIX_WORDS[k++ % SUFFIX_WORDS.length];
    const t = performance.now();
    greedy[n] = await evaluate(words(w, w, n));
    const ms = performance.now() - t;
    await reset(prefix);
    if (r >= warmup) s.push(ms);
  }
  samples[n] = s;
}
process.stdout.write(JSON.stringify({
  engine: "node-llama-cpp", version, threads, load_ms: loadMs, prefill_ms: prefillMs, prefill_tokens: prefix, samples_ms: samples,
  greedy, system_info: llama.systemInfo, gpu: llama.gpu, cpu_math_cores: llama.cpuMathCores,
  computes: `the suffix over the cached ${prefix}-token prefix, the last row's logits and one greedy token`,
}) + "\n");
await llama.dispose();
