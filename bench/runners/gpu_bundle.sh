#!/usr/bin/env bash
# Packs what bench/runners/gpu_check.sh needs on a machine that has a GPU but reaches
# no package registry: this machine's Chromium (Debian's, as the tests use)
# with the shared libraries it loads, the GL dispatch libraries an NVIDIA
# Vulkan driver expects, the package with its benchmark entry points (pkg-diagnostics/), the model's three variants,
# models.json, and the onnxruntime-web and transformers.js files the
# benchmark page imports. Nothing is built here: run scripts/main.sh (the
# SmolLM2 variants) or scripts/test.sh (the tiny ones) first.
#
# The bundle is one xz-compressed tar cut into parts of at most --part-mb MiB,
# each in its own folder (OUT/p01, OUT/p02, ...) with OUT/manifest.txt (the
# sha256 of each part), because a call to a lent machine carries 64 MiB at
# most: each part travels in a call of its own, and gpu_check.sh puts them
# back together.
#
#   bash bench/runners/gpu_bundle.sh [--model smollm2-135m-instruct-q4f16] [--out target/gpu]
#                            [--part-mb 56] [--xz-level 6|none]
# (`--xz-level none` packs a plain tar: quick, for the tests, and larger.)
set -euo pipefail
cd "$(dirname "$0")/../.."

model=smollm2-135m-instruct-q4f16
out=target/gpu
part_mb=56
level=6
while [ $# -gt 0 ]; do
  case "$1" in
    --model | --out | --part-mb | --xz-level)
      [ $# -ge 2 ] || { echo "gpu_bundle.sh: $1 needs a value" >&2; exit 2; }
      case "$1" in
        --model) model="$2" ;; --out) out="$2" ;; --part-mb) part_mb="$2" ;; --xz-level) level="$2" ;;
      esac
      shift ;;
    *) echo "gpu_bundle.sh: unknown argument $1 (--model, --out, --part-mb, --xz-level)" >&2; exit 2 ;;
  esac
  shift
done
[[ "$part_mb" =~ ^[0-9]+$ ]] && [ "$part_mb" -ge 1 ] || { echo "gpu_bundle.sh: --part-mb must be a whole number of MiB, got $part_mb" >&2; exit 2; }
[[ "$level" =~ ^([0-9]|none)$ ]] || { echo "gpu_bundle.sh: --xz-level must be 0-9 or none, got $level" >&2; exit 2; }

log() { printf '[gpu_bundle] %s\n' "$*" >&2; }
chromium_dir=/usr/lib/chromium
missing=()
for p in "$chromium_dir/chromium" pkg-diagnostics/readout.js pkg-diagnostics/readout_bg.wasm models.json examples/state.json \
  "models/$model/model.onnx" "models/$model-trimmed/model.onnx" "models/$model-trimmed-pruned/model.onnx" \
  node_modules/onnxruntime-web/dist node_modules/@huggingface/transformers/dist/transformers.web.js; do
  [ -e "$p" ] || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "missing (build them first: scripts/main.sh for SmolLM2, scripts/test.sh for the tiny models): ${missing[*]}"
  exit 1
fi

# The output folder is this script's own: refuse one it did not write.
if [ -e "$out" ] && [ ! -f "$out/.readout-gpu-bundle" ]; then
  log "$out exists and is not a bundle this script wrote; choose another --out"
  exit 1
fi
stage=$(mktemp -d "${TMPDIR:-/tmp}/readout-gpu-bundle.XXXXXX")
trap 'rm -rf "$stage"' EXIT

# Chromium: its own folder, less what a headless run never loads (the
# Vulkan validation layer and mock driver, the locales but en-US).
mkdir -p "$stage/chromium" "$stage/lib" "$stage/root/models" "$stage/root/node_modules"
cp -a "$chromium_dir/." "$stage/chromium/"
rm -f "$stage/chromium/libVkLayer_khronos_validation.so" "$stage/chromium/libVkICD_mock_icd.so"
find "$stage/chromium/locales" -type f ! -name 'en-US.pak' -delete

# Its libraries, as this machine resolves them, but the C runtime's own
# (glibc, libgcc, libstdc++): the target's are newer and must stay its own.
ldd "$chromium_dir/chromium" | awk '$3 ~ /^\// {print $3}' \
  | grep -Ev '/(libc|libm|libdl|libpthread|librt|libresolv|libgcc_s|libstdc\+\+)\.so' \
  | while read -r l; do cp -L "$l" "$stage/lib/"; done
# NSS loads its crypto modules by path at run time (no ldd line shows them).
if [ -d /usr/lib/x86_64-linux-gnu/nss ]; then
  cp -rL /usr/lib/x86_64-linux-gnu/nss "$stage/lib/nss"
  cp -L /usr/lib/x86_64-linux-gnu/nss/*.so "$stage/lib/" 2>/dev/null || true
fi
# The GL dispatch libraries (glvnd): an NVIDIA Vulkan driver links them, and a
# CUDA-only image does not have them.
for l in libGLdispatch.so.0 libGLX.so.0 libEGL.so.1 libOpenGL.so.0 libGL.so.1 libGLESv2.so.2 libvulkan.so.1; do
  f=/usr/lib/x86_64-linux-gnu/$l
  [ -e "$f" ] && cp -L "$f" "$stage/lib/"
done

# What the page serves: the package, the three variants, the catalog, the
# example state, and the onnxruntime-web / transformers.js files (no source maps, no builds
# the page does not import).
cp -rL pkg-diagnostics "$stage/root/pkg-diagnostics"
for v in "" -trimmed -trimmed-pruned; do cp -rL "models/$model$v" "$stage/root/models/"; done
cp models.json "$stage/root/"
# The readout-modes section scores the demo's example state.
mkdir -p "$stage/root/examples"
cp examples/state.json "$stage/root/examples/"
# A trim leaves the weights file byte-identical: such copies become hard
# links, which tar stores once.
declare -A seen=()
while IFS= read -r -d '' f; do
  key="$(stat -c %s "$f")-$(sha256sum "$f" | cut -c1-16)"
  if [ -n "${seen[$key]:-}" ]; then ln -f "${seen[$key]}" "$f"; else seen[$key]="$f"; fi
done < <(find "$stage/root/models" -type f -size +1M -print0 | sort -z)
# The WebGPU builds load the asyncify wasm alone; the WASM backend's jsep
# build (28 MB) is left out, since the check runs WebGPU only.
copy_dist() { # dir
  mkdir -p "$stage/root/$1"
  find "$1" -maxdepth 1 -type f \( -name 'ort.bundle.min.mjs' -o -name 'ort.webgpu.bundle.min.mjs' \
    -o -name 'ort-wasm-simd-threaded.asyncify.*' -o -name 'transformers.web.js' \) -exec cp {} "$stage/root/$1/" \;
}
copy_dist node_modules/onnxruntime-web/dist
copy_dist node_modules/@huggingface/transformers/dist
[ -d node_modules/@huggingface/transformers/node_modules/onnxruntime-web/dist ] \
  && copy_dist node_modules/@huggingface/transformers/node_modules/onnxruntime-web/dist
if [ -d node_modules/@huggingface/transformers/node_modules/onnxruntime-common/dist/esm ]; then
  mkdir -p "$stage/root/node_modules/@huggingface/transformers/node_modules/onnxruntime-common/dist"
  cp -r node_modules/@huggingface/transformers/node_modules/onnxruntime-common/dist/esm \
    "$stage/root/node_modules/@huggingface/transformers/node_modules/onnxruntime-common/dist/"
fi
printf 'model=%s\nmade=%s\nchromium=%s\n' "$model" "$(date -u +%FT%TZ)" "$("$chromium_dir/chromium" --version 2>/dev/null || echo unknown)" > "$stage/BUNDLE"

log "packing $(du -sm "$stage" | cut -f1) MiB (xz preset $level)"
new=$(mktemp -d "${TMPDIR:-/tmp}/readout-gpu-parts.XXXXXX")
trap 'rm -rf "$stage" "$new"' EXIT
# Sorted, so the three variants' weight files lie next to each other, and a
# 256 MiB window, so xz stores the weights they share once (the variants
# differ in the head and the vocabulary, not the body).
compress() { if [ "$level" = none ]; then cat; else xz -T1 "--lzma2=preset=$level,dict=256MiB"; fi; }
tar --sort=name -C "$stage" -cf - . | compress | split -b "${part_mb}M" -d -a 2 - "$new/part-"
n=0
: > "$new/manifest.txt"
for f in "$new"/part-*; do
  n=$((n + 1))
  d=$(printf 'p%02d' "$n")
  mkdir "$new/$d" && mv "$f" "$new/$d/"
  printf '%s %s/%s\n' "$(sha256sum "$new/$d/$(basename "$f")" | cut -d' ' -f1)" "$d" "$(basename "$f")" >> "$new/manifest.txt"
done
for d in "$new"/p*/; do cp "$new/manifest.txt" "$d"; done  # each part carries the list of all
touch "$new/.readout-gpu-bundle"
rm -rf "$out"
mkdir -p "$(dirname "$out")"
mv "$new" "$out"
trap 'rm -rf "$stage"' EXIT
log "$out: $n part(s): $(cd "$out" && du -sm p* | awk '{printf "%s %s MiB; ", $2, $1}')"
