#!/usr/bin/env bash
# The whole test suite, on a fresh machine of this kind: installs what it
# needs (idempotent), builds the tiny test models, runs every test natively,
# then builds the npm package and runs the browser tests in headless
# Chromium (WebGPU through SwiftShader, and the WASM backend).
set -euo pipefail
cd "$(dirname "$0")/.."

# Disk (checked by scripts/setup.sh first), measured on a clean clone:
# target/ 1.5 GB, the tiny models and their variants 0.2 GB, the tests'
# scratch copies under /tmp; the rest is headroom.
bash scripts/setup.sh --python --disk-gb 4
.venv/bin/python scripts/build_models.py tiny

# Mesa's Vulkan loader wants a runtime dir for its window-system probing.
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp/readout-xdg-$(id -u)}"
mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"

echo "[test] gates: cargo fmt --check, clippy -D warnings (native, wasm32 and the threaded wasm32 build)" >&2
cargo fmt --check
cargo clippy --locked --all-targets -- -D warnings
cargo clippy --locked --target wasm32-unknown-unknown --lib -- -D warnings
cargo clippy --locked --target wasm32-unknown-unknown --lib --features diagnostics -- -D warnings
# The threaded build compiles code (the worker pool) no other gate sees.
source scripts/thread_flags.sh
RUSTFLAGS="$THREAD_FLAGS" cargo "+$NIGHTLY" clippy --locked --target wasm32-unknown-unknown --lib \
  --features diagnostics -Z build-std=panic_abort,std --target-dir target/threads -- -D warnings
node bench/runners/readme.mjs --check

echo "[test] cargo test" >&2
cargo test --locked -- --test-threads 2

echo "[test] the npm package (pkg/), its diagnostics build (pkg-diagnostics/) and the browser tests' models" >&2
bash scripts/build_pkg.sh
echo "[test] the package's types: tsc against tests/types/usage.ts" >&2
node_modules/.bin/tsc -p tests/types
cargo build --locked --bin readout
readout=target/debug/readout
tiny=models/qwen3-tiny-random-q4
# The bench page's tiny run sweeps the fp32 variants (transformers.js cannot
# run GatherBlockQuantized on its WASM backend); the Deno tests run float16
# WebGPU on every cut of the q4f16 file.
"$readout" variants "$tiny" models/qwen3-tiny-random-fp32 models/qwen3-tiny-random-q4f16
"$readout" catalog --models models -o models.json
# Trimmed, so the proof's many shorter-run trials read one row each.
.venv/bin/python scripts/broken_model.py "$tiny-trimmed" target/browser/broken-kv
.venv/bin/python scripts/broken_model.py --nan-on zebra "$tiny-trimmed" target/browser/nan-on-zebra
.venv/bin/python scripts/broken_model.py --unsupported "$tiny" target/browser/unsupported-op
.venv/bin/python scripts/broken_model.py --too-large "$tiny" target/browser/too-large
.venv/bin/python scripts/gqa_graph.py target/browser/gqa.onnx
[ -f target/browser/tiny-hidden/model.onnx ] || "$readout" expose-hidden "$tiny" -o target/browser/tiny-hidden >/dev/null

echo "[test] browser tests (headless Chromium; float16 WebGPU in Deno on lavapipe)" >&2
node --test --test-concurrency=1 tests/browser/
