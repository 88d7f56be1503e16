#!/usr/bin/env bash
# Builds the npm package into pkg/: the crate for wasm32, wasm-bindgen (the
# CLI version pinned to the crate's in Cargo.lock), wasm-opt (Debian's when
# present for the single build; npm's binaryen, required, for the threaded),
# and the package's files from js/ (package.json, with onnxruntime-web as a
# peer dependency; README.md; select.js, node.js and worker.js with their types). Then the same
# crate with the `diagnostics` feature into pkg-diagnostics/: the benchmark
# page and the browser tests load that build (its extra entry points are
# not the product's API). Each gets a threads/ beside it: the threaded
# build (wasm atomics and shared memory, nightly with -Z build-std), which
# only a cross-origin isolated page can instantiate; and a relaxed/: the
# single-thread build with relaxed SIMD's dot product (the `relaxed-simd`
# feature), for browsers that validate relaxed SIMD on any page.
#   scripts/build_pkg.sh [--dev]   --dev: debug builds (faster to compile)
# The tools come from scripts/setup.sh (main.sh and test.sh run it first);
# this script checks for them and says what is missing rather than install.
set -euo pipefail
cd "$(dirname "$0")/.."
profile=release
for a in "$@"; do [ "$a" = "--dev" ] && profile=debug; done
log() { printf '[pkg] %s\n' "$*" >&2; }

want_wb=$(awk '/^name = "wasm-bindgen"$/{getline; gsub(/version = |"/,""); print; exit}' Cargo.lock)
have_wb=$(wasm-bindgen --version 2>/dev/null | awk '{print $2}' || true)
if [ "$have_wb" != "$want_wb" ]; then
  log "wasm-bindgen $want_wb is needed (found: ${have_wb:-none}); run bash scripts/setup.sh"
  exit 1
fi
# NIGHTLY and THREAD_FLAGS: the threaded build's toolchain and RUSTFLAGS
# (shared with setup and the clippy gate).
source scripts/lib/thread_flags.sh
# cargo's build directory in the machine's cache (scripts/lib/cache.sh), shared
# by every clone and by the test command's gates.
source scripts/lib/cache.sh
export CARGO_BUILD_BUILD_DIR
# A line at least every 30 s while a build or wasm-opt runs.
source scripts/lib/heartbeat.sh
if ! rustup component list --toolchain "$NIGHTLY" --installed 2>/dev/null | grep -q "^rust-src"; then
  log "$NIGHTLY with rust-src (for the threaded build) is missing; run bash scripts/setup.sh"
  exit 1
fi
if [ "$profile" = release ] && [ ! -x node_modules/.bin/wasm-opt ]; then
  log "binaryen's wasm-opt from npm (for the threaded build) is missing; run bash scripts/setup.sh"
  exit 1
fi
if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown; then
  log "the wasm32-unknown-unknown target is missing; run bash scripts/setup.sh"
  exit 1
fi
# js/package.json is the package's manifest; its version is the crate's.
crate_version=$(awk -F'"' '/^version = /{print $2; exit}' Cargo.toml)
js_version=$(node -p 'require("./js/package.json").version' 2>/dev/null || true)
if [ "$js_version" != "$crate_version" ]; then
  log "js/package.json has version ${js_version:-none (unreadable)} but Cargo.toml has $crate_version; make them equal"
  exit 1
fi

# binaryen's optimisation, one setting for every build. --low-memory-unused
# lets it fold a constant added to an address into the load's or store's
# offset field (LLVM emits it as an i32.add, which V8 then computes per
# access; an offset it folds into the x64 address). It changes only what
# an address that wraps past 2^32 reaches, which no in-bounds Rust pointer
# does, and the promise it names holds: rustc links the stack first, so
# the lowest kilobyte is the bottom of a 1 MB stack. Measured in the
# threaded build: attention 1.09-1.14x on a prefix and on one token, the
# int8 kernel unchanged (docs/measurements.md, the changes table).
OPT=(-Oz --low-memory-unused)

# build OUT FEATURES single|threads|relaxed: one wasm build into OUT
# (threads and relaxed: into OUT/threads, OUT/relaxed).
build() {
  local out=$1 features=$2 kind=$3
  local flags=()
  # The relaxed build is a feature of the crate, not RUSTFLAGS: the
  # dependencies are the single build's, so only the crate compiles again.
  [ "$kind" = relaxed ] && features="${features:+$features,}relaxed-simd"
  [ "$profile" = release ] && flags+=(--release)
  [ -n "$features" ] && flags+=(--features "$features")
  local dir=target cargo=(cargo)
  if [ "$kind" = threads ]; then
    # Its own target dir: different flags would otherwise rebuild the other's.
    dir=target/threads
    cargo=(cargo "+$NIGHTLY")
    flags+=(-Z build-std=panic_abort,std --target-dir "$dir")
    out="$out/threads"
  elif [ "$kind" = relaxed ]; then
    out="$out/relaxed"
  fi
  log "$out: cargo build --target wasm32-unknown-unknown --lib (${profile}${features:+, features $features}, $kind)"
  if [ "$kind" = threads ]; then
    RUSTFLAGS="$THREAD_FLAGS" CARGO_BUILD_BUILD_DIR="$NIGHTLY_BUILD_DIR" heartbeat "[pkg] $out: cargo build" \
      "${cargo[@]}" build --locked --target wasm32-unknown-unknown --lib "${flags[@]}" >&2
  else
    heartbeat "[pkg] $out: cargo build" "${cargo[@]}" build --locked --target wasm32-unknown-unknown --lib "${flags[@]}" >&2
  fi
  local wasm="$dir/wasm32-unknown-unknown/$profile/readout.wasm"
  local tmp="$out.tmp"
  rm -rf "$tmp" && mkdir -p "$tmp"
  # The threaded and relaxed builds are optimised after wasm-bindgen instead (below).
  if command -v wasm-opt >/dev/null && [ "$profile" = release ] && [ "$kind" = single ]; then
    # Before wasm-bindgen: Debian's binaryen 108 run on wasm-bindgen's output
    # breaks its externref table ("WebAssembly.Table.set(): Argument 1 is invalid").
    log "wasm-opt ${OPT[*]}"
    heartbeat "[pkg] $out: wasm-opt" wasm-opt "${OPT[@]}" --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext \
      --enable-mutable-globals --enable-reference-types --enable-multivalue --enable-simd "$wasm" -o "$tmp/opt.wasm"
    wasm="$tmp/opt.wasm"
  fi
  wasm-bindgen --target web --out-dir "$tmp" --out-name readout "$wasm"
  rm -f "$tmp/opt.wasm"
  if [ "$profile" = release ] && [ "$kind" != single ]; then
    # npm's wasm-opt is one thread for 1.5-2 minutes: it runs beside the
    # next build, and the script waits for it at the end.
    finish "$out" "$tmp" "$kind" &
    pending+=($!)
  else
    finish "$out" "$tmp" "$kind"
  fi
}

# finish OUT TMP KIND: the threaded and relaxed builds' wasm-opt, the
# package's files, and TMP moved to OUT.
finish() {
  local out=$1 tmp=$2 kind=$3
  if [ "$profile" = release ] && [ "$kind" != single ]; then
    # binaryen from npm (132): Debian's 108 predates relaxed SIMD's final
    # encoding and writes a module that does not validate (it reads
    # i32x4.relaxed_dot_i8x16_i7x16_add_s as a two-operand instruction of
    # the draft). After wasm-bindgen, because wasm-bindgen 0.2.130 panics
    # on a threaded module optimised before it ("failed to find `0` in
    # function table"), with either binaryen. The relaxed build follows the
    # same path, without threads.
    local threads=(); [ "$kind" = threads ] && threads=(--enable-threads)
    log "wasm-opt ${OPT[*]} (binaryen $(node -p 'require("./node_modules/binaryen/package.json").version'), after wasm-bindgen)"
    heartbeat "[pkg] $out: wasm-opt" node_modules/.bin/wasm-opt "${OPT[@]}" "${threads[@]}" --enable-bulk-memory \
      --enable-nontrapping-float-to-int --enable-sign-ext --enable-mutable-globals \
      --enable-reference-types --enable-multivalue --enable-simd --enable-relaxed-simd \
      "$tmp/readout_bg.wasm" -o "$tmp/readout_bg.opt.wasm"
    mv "$tmp/readout_bg.opt.wasm" "$tmp/readout_bg.wasm"
  fi
  if [ "$kind" = single ]; then
    # The package's manifest (its version checked against Cargo.toml's above).
    cp js/package.json "$tmp/package.json"
    # The package's README is written for npm users, not the repository's.
    cp js/README.md "$tmp/README.md"
    # Which build a page can run, asked before loading either.
    cp js/select.js js/select.d.ts "$tmp/"
    # Node: file: URLs read from disk, and the wasm given to init().
    cp js/node.js js/node.d.ts "$tmp/"
    # The engine in a dedicated Worker (readout/worker): the page's side and the worker's.
    cp js/worker.js js/worker.d.ts js/worker_main.js "$tmp/"
    # What the engine keeps across visits, listed and deleted (readout/storage);
    # the same module the engine imports as a snippet.
    cp js/store.js "$tmp/storage.js"
    cp js/store.d.ts "$tmp/storage.d.ts"
  fi
  # Only the folder this script writes is replaced.
  rm -rf "$out" && mv "$tmp" "$out"
  local raw gz
  raw=$(stat -c %s "$out/readout_bg.wasm")
  gz=$(gzip -9 -c "$out/readout_bg.wasm" | wc -c)
  log "$out/readout_bg.wasm: $raw bytes raw, $gz gzipped"
}

# A single-thread build replaces its OUT whole, so the threaded and relaxed
# ones (into OUT/threads, OUT/relaxed) follow it; their wasm-opt runs go on
# beside each other and the other builds. The relaxed builds come right
# after the single ones, whose dependencies they share.
# Every input of the six builds: the crate, the package's files, cargo's
# config, this script, the threaded build's flags, and the tools' versions
# (not cache.sh or heartbeat.sh: where cargo's intermediates go and the
# progress lines change no output).
source scripts/lib/outputs.sh
entry=""
if [ "$profile" = release ]; then
  entry=$(outputs_key pkg "$(rustc -V; rustc "+$NIGHTLY" -V; wasm-bindgen --version
    wasm-opt --version 2>/dev/null || echo "no Debian wasm-opt"
    node -p 'require("./node_modules/binaryen/package.json").version'
    echo "RUSTFLAGS=${RUSTFLAGS:-} THREAD_FLAGS=$THREAD_FLAGS")" \
    src Cargo.toml Cargo.lock .cargo js scripts/build_pkg.sh scripts/lib/thread_flags.sh scripts/lib/outputs.sh)
fi
if outputs_restore "$entry" pkg pkg-diagnostics; then
  log "pkg, pkg-diagnostics: copied from the cache $READOUT_CACHE/$entry (built from the same inputs)"
  exit 0
fi

pending=()
build pkg "" single
build pkg-diagnostics diagnostics single
build pkg "" relaxed
build pkg-diagnostics diagnostics relaxed
build pkg "" threads
build pkg-diagnostics diagnostics threads
failed=0
for pid in "${pending[@]}"; do wait "$pid" || failed=1; done
[ $failed = 0 ] || { log "a threaded or relaxed build's wasm-opt or packaging failed (above)"; exit 1; }
outputs_store "$entry" pkg pkg-diagnostics
