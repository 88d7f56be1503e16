#!/usr/bin/env bash
# The Python package as a wheel (abi3, the manylinux tag maturin chooses)
# into target/wheels/, to install where the repository is not: it depends on
# the `onnxruntime` package for ONNX Runtime's library (docs/bulk.md).
#   bash scripts/build_wheel.sh     (needs .venv: bash scripts/setup.sh --python)
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/maturin ] || { echo "build_wheel: .venv/bin/maturin is missing; run bash scripts/setup.sh --python" >&2; exit 1; }
# The wheel kept in the machine's cache by its inputs (scripts/lib/outputs.sh):
# the engine's crate, the Python crate and package but not its tests, and the tools.
source scripts/lib/cache.sh
source scripts/lib/outputs.sh
entry=$(outputs_key wheel "$(rustc -V; .venv/bin/maturin --version; .venv/bin/python -V; echo "RUSTFLAGS=${RUSTFLAGS:-}")" \
  src Cargo.toml Cargo.lock .cargo python ':(exclude)python/tests' scripts/build_wheel.sh scripts/lib/outputs.sh)
# Only our wheel is replaced in target/wheels (other files there are left);
# the cache holds it in a folder of its own, target/wheel-kept.
rm -f target/wheels/readout-*.whl
mkdir -p target/wheels
if outputs_restore "$entry" target/wheel-kept; then
  echo "[wheel] copied from the cache $READOUT_CACHE/$entry (built from the same inputs)" >&2
else
  .venv/bin/maturin build --locked --release -m python/Cargo.toml --out target/wheels >&2
  rm -rf target/wheel-kept && mkdir -p target/wheel-kept && cp target/wheels/readout-*.whl target/wheel-kept/
  outputs_store "$entry" target/wheel-kept
fi
cp target/wheel-kept/readout-*.whl target/wheels/
realpath target/wheels/readout-*.whl
