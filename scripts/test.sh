#!/usr/bin/env bash
# The whole test suite, on a fresh machine of this kind: installs what it
# needs (idempotent), builds the tiny test models, proves the crate still
# compiles for wasm32, and runs every test natively.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh --python
.venv/bin/python scripts/build_models.py tiny

echo "[test] cargo build --target wasm32-unknown-unknown --lib" >&2
cargo build --locked --target wasm32-unknown-unknown --lib

# Mesa's Vulkan loader wants a runtime dir for its window-system probing.
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp/readout-xdg-$(id -u)}"
mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"

echo "[test] cargo test" >&2
cargo test --locked -- --test-threads 2
