#!/usr/bin/env bash
# The committed benchmark results (spec §11): builds what they need
# and runs the benchmark page through its runner (bench/runners/run.mjs), each run
# with its native counterpart, writing bench/results/logit-cost/<date>-<model>-<backend>.json.
#   bash scripts/bench.sh [which ...]     which: smollm2-fp32-wasm smollm2-wasm
#                                         qwen3-q4f16-wasm qwen3-q4-wasm webgpu-emulated
#                                         qwen3-wasm-fallback gemma3-cpu gemma3-fp32-wasm
set -euo pipefail
cd "$(dirname "$0")/.."

# Disk (checked by scripts/setup.sh first): the Qwen3-0.6B-shape models 9 GB,
# SmolLM2's 2 GB, Gemma 3 270M's 5 GB (with its cuts), builds 1 GB.
built=models/gemma3-270m-fp32-trimmed-pruned/model.onnx
bash scripts/setup.sh --gemma --disk-gb "$([ -f "$built" ] && echo 1 || echo 18)"
.venv/bin/python modelgen/build_models.py smollm2 qwen3-0.6b gemma3
cargo build --locked --release --bin readout
readout=target/release/readout
"$readout" variants models/{smollm2-135m-instruct,qwen3-0.6b-shape,gemma3-270m}-{q4f16,q4,fp32}
bash scripts/catalog.sh "$readout"
bash scripts/build_pkg.sh

which=("$@")
[ ${#which[@]} -gt 0 ] || which=(smollm2-fp32-wasm smollm2-wasm qwen3-q4f16-wasm qwen3-q4-wasm webgpu-emulated qwen3-wasm-fallback gemma3-cpu gemma3-fp32-wasm)
for w in "${which[@]}"; do
  echo "[bench] $w" >&2
  case "$w" in
    smollm2-fp32-wasm) node bench/runners/run.mjs --model smollm2-135m-instruct-fp32 --backend wasm --screenshot docs/bench.png ;;
    smollm2-wasm) node bench/runners/run.mjs --model smollm2-135m-instruct-q4 --backend wasm ;;
    qwen3-q4f16-wasm) node bench/runners/run.mjs --model qwen3-0.6b-shape-q4f16 --backend wasm ;;
    qwen3-q4-wasm) node bench/runners/run.mjs --model qwen3-0.6b-shape-q4 --backend wasm ;;
    # SwiftShader emulates the GPU on the CPU: functional, not a speed claim;
    # fewer lengths and runs so it finishes.
    webgpu-emulated) node bench/runners/run.mjs --model smollm2-135m-instruct-q4 --backend webgpu --lengths 1,8,32 --runs 1 --warmup 0 --no-mass ;;
    # Which dtype the Qwen3 shape's WASM variant loads: fp32 against q4 and q4f16.
    qwen3-wasm-fallback) node bench/runners/wasm_fallback.mjs qwen3-0.6b-shape qwen3-0.6b-shape-fp32 qwen3-0.6b-shape-q4 qwen3-0.6b-shape-q4f16 ;;
    # Gemma 3 270M, whose head outweighs its body: our runtime on the q4f16
    # file, and onnxruntime-web's WASM backend on the float32 variant.
    gemma3-cpu) node bench/runners/run.mjs --model gemma3-270m-q4f16 --backend cpu --no-transformers ;;
    gemma3-fp32-wasm) node bench/runners/run.mjs --model gemma3-270m-fp32 --backend wasm --no-transformers ;;
    *) echo "bench.sh: unknown run $w" >&2; exit 2 ;;
  esac
done
