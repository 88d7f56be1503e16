#!/usr/bin/env bash
# The main job, on a fresh machine of this kind: installs everything, builds
# every model (tiny, SmolLM2-135M-Instruct q4f16/q4, Qwen3-0.6B-shaped
# q4f16/q4) and their -trimmed and -trimmed-pruned variants (each verified
# against its stock model by the readout CLI), writes models.json, and scores
# the bundled example state on the default model, checked against one
# uncached forward per criterion.
#   MODEL=<id> scripts/main.sh   to score on another models.json entry
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh --python
.venv/bin/python scripts/build_models.py all
cargo build --locked --release --bin readout
readout=target/release/readout

for base in smollm2-135m-instruct-q4f16 smollm2-135m-instruct-q4 smollm2-135m-instruct-fp32 qwen3-0.6b-shape-q4f16 qwen3-0.6b-shape-q4; do
  if [ ! -f "models/$base-trimmed/model.onnx" ]; then
    "$readout" trim "models/$base" -o "models/$base-trimmed" >/dev/null
  fi
  if [ ! -f "models/$base-trimmed-pruned/model.onnx" ]; then
    "$readout" prune "models/$base-trimmed" --letters ABCDEFGHIJKLMNOPQRST -o "models/$base-trimmed-pruned" >/dev/null
  fi
done
"$readout" catalog --models models -o models.json

model="${MODEL:-smollm2-135m-instruct-q4-trimmed-pruned}"
echo "[main] readout score --model models.json#$model --state examples/state.json --check" >&2
"$readout" score --model "models.json#$model" --state examples/state.json --check
