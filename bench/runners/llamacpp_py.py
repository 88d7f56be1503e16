"""The engines sweep on native llama.cpp through llama-cpp-python, compiled
here with GGML_NATIVE=ON (bench/runners/llamacpp_setup.sh, into
target/bench/llamacpp/venv): the same shapes as bench/runners/llamacpp_node.mjs
(a prefix of one-token words prefilled, then per suffix length the suffix
evaluated over the cached prefix, the last row's logits computed and its
greedy token picked, and the suffix dropped again). Prints the same JSON.
    target/bench/llamacpp/venv/bin/python bench/runners/llamacpp_py.py \\
        GGUF THREADS PREFIX LENGTHS RUNS WARMUP
"""

import json
import sys
import time

import llama_cpp
import numpy as np
from llama_cpp import Llama

gguf, threads, prefix, lengths, runs, warmup = sys.argv[1:7]
threads, prefix, runs, warmup = int(threads), int(prefix), int(runs), int(warmup)
lengths = [int(n) for n in lengths.split(",")]

t0 = time.perf_counter()
llm = Llama(
    model_path=gguf,
    n_ctx=1024,
    n_batch=512,
    n_threads=threads,
    n_threads_batch=threads,
    n_gpu_layers=0,
    logits_all=False,
    verbose=False,
)
load_ms = (time.perf_counter() - t0) * 1e3


def one(word):
    t = llm.tokenize(word.encode(), add_bos=False, special=False)
    if len(t) != 1:
        sys.exit(f'"{word}" is {len(t)} tokens in this vocabulary; the sweep needs one-token words')
    return t[0]


def words(first, word, n):
    return [one(first)] + [one(word)] * (n - 1) if n else []


N_VOCAB = llm.n_vocab()


def evaluate(past, tokens):
    # Llama.eval drops the cache past n_tokens first, so this rewinds to
    # `past`; with logits_all=False llama.cpp computes the last row's logits
    # only, which Llama.eval leaves in the context (0.3.x copies them out
    # only with logits_all), so the greedy pick reads them there.
    llm.n_tokens = past
    llm.eval(tokens)
    return int(np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(N_VOCAB,)).argmax())


# A warm-up prefill of other words (their count unchecked, as wllama's).
evaluate(0, llm.tokenize((" pear" * prefix).encode(), add_bos=False)[:prefix])
t1 = time.perf_counter()
greedy = {"prefix": evaluate(0, words("apple", " apple", prefix))}
prefill_ms = (time.perf_counter() - t1) * 1e3
SUFFIX_WORDS = [" the", " of", " and", " to", " in", " is"]
k = 0
samples = {}
for n in lengths:
    s = []
    for r in range(warmup + runs):
        w = SUFFIX_WORDS[k % len(SUFFIX_WORDS)]
        k += 1
        t = time.perf_counter()
        greedy[n] = evaluate(prefix, words(w, w, n))
        ms = (time.perf_counter() - t) * 1e3
        if r >= warmup:
            s.append(ms)
    samples[n] = s
print(
    json.dumps(
        {
            "engine": "llama-cpp-python",
            "version": llama_cpp.__version__,
            "threads": threads,
            "load_ms": load_ms,
            "prefill_ms": prefill_ms,
            "prefill_tokens": prefix,
            "samples_ms": samples,
            "greedy": greedy,
            "system_info": llama_cpp.llama_print_system_info().decode(),
            "computes": f"the suffix over the cached {prefix}-token prefix, the last row's logits and its greedy token",
        }
    )
)
