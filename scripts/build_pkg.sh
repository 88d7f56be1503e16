#!/usr/bin/env bash
# Builds the npm package into pkg/: the crate for wasm32, wasm-bindgen (the
# CLI version pinned to the crate's in Cargo.lock), wasm-opt when present,
# and package.json with onnxruntime-web as a peer dependency.
#   scripts/build_pkg.sh [--dev]   --dev: debug build (faster to compile)
set -euo pipefail
cd "$(dirname "$0")/.."
profile=release
for a in "$@"; do [ "$a" = "--dev" ] && profile=debug; done
log() { printf '[pkg] %s\n' "$*" >&2; }

# The pinned wasm-bindgen CLI, the rust target, binaryen: all in set-up.
bash scripts/setup.sh

flags=()
[ "$profile" = release ] && flags+=(--release)
log "cargo build --target wasm32-unknown-unknown --lib (${profile})"
cargo build --target wasm32-unknown-unknown --lib "${flags[@]}" >&2
wasm="target/wasm32-unknown-unknown/$profile/readout.wasm"

rm -rf pkg.tmp && mkdir -p pkg.tmp
if command -v wasm-opt >/dev/null && [ "$profile" = release ]; then
  # Before wasm-bindgen: Debian's binaryen 108 run on wasm-bindgen's output
  # breaks its externref table ("WebAssembly.Table.set(): Argument 1 is invalid").
  log "wasm-opt -Oz"
  wasm-opt -Oz --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext \
    --enable-mutable-globals --enable-reference-types --enable-multivalue "$wasm" -o pkg.tmp/opt.wasm
  wasm=pkg.tmp/opt.wasm
fi
wasm-bindgen --target web --out-dir pkg.tmp --out-name readout "$wasm"
rm -f pkg.tmp/opt.wasm
version=$(awk -F'"' '/^version = /{print $2; exit}' Cargo.toml)
cat > pkg.tmp/package.json <<JSON
{
  "name": "readout",
  "version": "$version",
  "description": "Typed readout in the browser: multiple-choice criteria answered from an LLM's next-token logits over a cached state.",
  "license": "MIT OR Apache-2.0",
  "type": "module",
  "main": "readout.js",
  "module": "readout.js",
  "types": "readout.d.ts",
  "files": ["readout.js", "readout.d.ts", "readout_bg.wasm", "readout_bg.wasm.d.ts", "snippets"],
  "sideEffects": false,
  "peerDependencies": { "onnxruntime-web": "1.30.0" }
}
JSON
# The package's README is written for npm users, not the repository's.
cp docs/npm-README.md pkg.tmp/README.md
rm -rf pkg && mv pkg.tmp pkg
raw=$(stat -c %s pkg/readout_bg.wasm)
gz=$(gzip -9 -c pkg/readout_bg.wasm | wc -c)
log "pkg/readout_bg.wasm: $raw bytes raw, $gz gzipped"
