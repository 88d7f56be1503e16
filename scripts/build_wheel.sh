#!/usr/bin/env bash
# The Python package as a wheel (abi3, the manylinux tag maturin chooses)
# into target/wheels/, to install where the repository is not: it depends on
# the `onnxruntime` package for ONNX Runtime's library (docs/bulk.md).
#   bash scripts/build_wheel.sh     (needs .venv: bash scripts/setup.sh --python)
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/maturin ] || { echo "build_wheel: .venv/bin/maturin is missing; run bash scripts/setup.sh --python" >&2; exit 1; }
rm -f target/wheels/readout-*.whl
.venv/bin/maturin build --locked --release -m python/Cargo.toml --out target/wheels >&2
realpath target/wheels/readout-*.whl
