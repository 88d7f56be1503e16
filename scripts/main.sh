#!/usr/bin/env bash
# The main job, on a fresh machine of this kind: installs everything, builds
# every model (tiny, SmolLM2-135M-Instruct q4f16/q4, Qwen3-0.6B-shaped
# q4f16/q4), builds the CLI, and scores the bundled example state on the
# default model with the cached-vs-uncached check.
#   MODEL=models/<id> scripts/main.sh   to score on another model
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh --python
.venv/bin/python scripts/build_models.py all
cargo build --locked --release --bin readout

model="${MODEL:-models/smollm2-135m-instruct-q4}"
echo "[main] readout score --model $model --state examples/state.json --check" >&2
target/release/readout score --model "$model" --state examples/state.json --check
