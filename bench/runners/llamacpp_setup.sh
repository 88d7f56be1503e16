#!/usr/bin/env bash
# Native llama.cpp for the engines comparison (bench/runners/wllama.mjs), two
# builds, installed under target/bench/llamacpp/ and never by the test
# command (they are benchmark dependencies only):
#   node/   node-llama-cpp 3.21.1 (npm i -E: newer releases may not install
#           here), whose prebuilt CPU binaries pick their variant at run time
#   venv/   llama-cpp-python 0.3.36 compiled from its source with
#           -DGGML_NATIVE=ON (this machine's instruction set but AMX, below;
#           ~5 minutes)
# Idempotent: each part is marked done only after it imports, and a done
# part is not touched again. Prints nothing on stdout.
#   bash bench/runners/llamacpp_setup.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
NODE_LLAMA_CPP=3.21.1
LLAMA_CPP_PYTHON=0.3.36
dir=target/bench/llamacpp
log() { printf '[llamacpp] %s\n' "$*" >&2; }
source scripts/lib/heartbeat.sh
mkdir -p "$dir"

if [ "$(cat "$dir/node/.done" 2>/dev/null)" != "$NODE_LLAMA_CPP" ]; then
  log "node-llama-cpp $NODE_LLAMA_CPP (npm, prebuilt CPU binaries)"
  rm -rf "$dir/node" && mkdir -p "$dir/node"
  echo '{"name":"readout-bench-llamacpp","private":true}' > "$dir/node/package.json"
  # NODE_LLAMA_CPP_SKIP_DOWNLOAD: never compile llama.cpp from source in the
  # postinstall; the prebuilt binaries come as optional dependencies.
  (cd "$dir/node" && NODE_LLAMA_CPP_SKIP_DOWNLOAD=true heartbeat "[llamacpp] npm i" \
    npm i -E --no-audit --no-fund --loglevel=error "node-llama-cpp@$NODE_LLAMA_CPP" >&2)
  (cd "$dir/node" && node -e 'import("node-llama-cpp").then(() => {})') || { log "node-llama-cpp does not import"; exit 1; }
  echo "$NODE_LLAMA_CPP" > "$dir/node/.done"
fi

# GGML_NATIVE without AMX. This CPU has AMX, and this version's AMX kernel
# (ggml_backend_amx_mul_mat) died at its first `ldtilecfg` with a general
# protection fault (dmesg), whether or not the process had asked Linux for
# the tile registers first; node-llama-cpp's newer ggml runs AMX here. GCC's
# explicit -mno-amx-* flags win over -march=native; AVX-512 and VNNI stay.
NO_AMX="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
want="$LLAMA_CPP_PYTHON GGML_NATIVE=ON $NO_AMX"
if [ "$(cat "$dir/venv/.done" 2>/dev/null)" != "$want" ]; then
  log "llama-cpp-python $LLAMA_CPP_PYTHON from source, GGML_NATIVE=ON without AMX (about 5 minutes)"
  rm -rf "$dir/venv"
  python3 -m venv "$dir/venv"
  # --no-cache-dir: pip would otherwise reuse a wheel built with other flags.
  CFLAGS="$NO_AMX" CXXFLAGS="$NO_AMX" CMAKE_ARGS="-DGGML_NATIVE=ON" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
    heartbeat "[llamacpp] pip install" \
    "$dir/venv/bin/pip" install --quiet --no-cache-dir --no-binary llama-cpp-python "llama-cpp-python==$LLAMA_CPP_PYTHON" >&2
  "$dir/venv/bin/python" -c 'import llama_cpp' || { log "llama_cpp does not import"; exit 1; }
  if "$dir/venv/bin/python" -c 'import llama_cpp, sys; sys.exit("AMX_INT8 = 1" not in llama_cpp.llama_print_system_info().decode())'; then
    log "the build still has AMX kernels"; exit 1
  fi
  echo "$want" > "$dir/venv/.done"
fi
