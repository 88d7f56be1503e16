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

echo "[test] cargo test" >&2
cargo test --locked -- --test-threads 2
