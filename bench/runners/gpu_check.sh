#!/usr/bin/env bash
# The WebGPU check on a real adapter (bench/runners/gpu_check.py does the work): on a
# machine with a GPU and no package registry, from a bundle that
# bench/runners/gpu_bundle.sh made on a machine of this project's kind.
#
#   bash bench/runners/gpu_check.sh --stage-only [--bundle DIR]
#       copy the bundle's parts found under DIR (default target/gpu) into the
#       stage folder, check each against the manifest, and say which are
#       still missing: a bundle larger than one call can carry arrives part
#       by part, one call each.
#   bash bench/runners/gpu_check.sh [--bundle DIR] --out FILE [gpu_check.py options]
#       stage what is there, unpack the bundle once every part has arrived,
#       and run the check: the adapter and its features, then the benchmark
#       page's sweep on the WebGPU backend (stock, trimmed, pruned+trimmed and
#       transformers.js), written to FILE.
#   With no bundle at all, this machine's own Chromium (/usr/bin/chromium)
#   serves the repository itself (pkg-diagnostics/, models/, node_modules/ built here).
#
# READOUT_GPU_STAGE sets the stage folder (default /tmp/readout-gpu).
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
bundle="$repo/target/gpu"
stage_only=0
pass=()
while [ $# -gt 0 ]; do
  case "$1" in
    --bundle) [ $# -ge 2 ] || { echo "gpu_check.sh: --bundle needs a folder" >&2; exit 2; }; bundle="$(realpath -m "$2")"; shift ;;
    --stage-only) stage_only=1 ;;
    *) pass+=("$1") ;;
  esac
  shift
done
stage="${READOUT_GPU_STAGE:-/tmp/readout-gpu}"
log() { printf '[gpu_check] %s\n' "$*" >&2; }
command -v python3 >/dev/null || { log "python3 is needed (the check's server and driver use its standard library alone)"; exit 2; }

mkdir -p "$stage/parts"
# Every part found beside this tree goes to the stage, checked against the
# manifest it travelled with.
shopt -s nullglob
for m in "$bundle"/p*/manifest.txt; do
  cp "$m" "$stage/parts/manifest.txt.new"
  if [ -f "$stage/parts/manifest.txt" ] && ! cmp -s "$m" "$stage/parts/manifest.txt"; then
    log "a part of another bundle arrived: the stage is cleared for the new one"
    rm -rf "$stage/parts" "$stage/x" && mkdir -p "$stage/parts"
    cp "$m" "$stage/parts/manifest.txt.new"
  fi
  mv "$stage/parts/manifest.txt.new" "$stage/parts/manifest.txt"
  d=$(dirname "$m")
  for f in "$d"/part-*; do
    want=$(awk -v n="$(basename "$d")/$(basename "$f")" '$2 == n {print $1}' "$m")
    got=$(sha256sum "$f" | cut -d' ' -f1)
    if [ "$want" != "$got" ]; then log "$f does not match its manifest (sha256 $got, want $want)"; exit 1; fi
    cp "$f" "$stage/parts/$(basename "$f")"
  done
done
shopt -u nullglob

have_bundle=0
if [ -f "$stage/parts/manifest.txt" ]; then
  have_bundle=1
  missing=()
  while read -r sum name; do
    f="$stage/parts/$(basename "$name")"
    if [ ! -f "$f" ] || [ "$(sha256sum "$f" | cut -d' ' -f1)" != "$sum" ]; then missing+=("$name"); fi
  done < "$stage/parts/manifest.txt"
  total=$(wc -l < "$stage/parts/manifest.txt")
  log "bundle parts in $stage: $((total - ${#missing[@]})) of $total${missing:+; missing: ${missing[*]}}"
  [ "$stage_only" = 1 ] && exit 0
  [ ${#missing[@]} -eq 0 ] || { log "not every part has arrived: run --stage-only with each missing part first"; exit 1; }
  key=$(sha256sum "$stage/parts/manifest.txt" | cut -d' ' -f1)
  if [ "$(cat "$stage/x/.unpacked" 2>/dev/null)" != "$key" ]; then
    log "unpacking"
    rm -rf "$stage/x" "$stage/x.new"
    mkdir -p "$stage/x.new"
    cat "$stage/parts"/part-* | python3 -c '
import sys, tarfile
t = tarfile.open(fileobj=sys.stdin.buffer, mode="r|*")
t.extractall(sys.argv[1], **({"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}))' "$stage/x.new"
    echo "$key" > "$stage/x.new/.unpacked"
    mv "$stage/x.new" "$stage/x"
  fi
  cat "$stage/x/BUNDLE" >&2
  root="$stage/x/root"
  ln -sfn "$repo/bench" "$root/bench"
  ln -sfn "$repo/www" "$root/www"
  # The pages' import map is written by this one script.
  mkdir -p "$root/harness"
  ln -sfn "$repo/harness/import_map.js" "$root/harness/import_map.js"
  chromium="$stage/x/chromium/chromium"
  libs="$stage/x/lib:$stage/x/chromium"
elif [ "$stage_only" = 1 ]; then
  log "no bundle parts under $bundle"; exit 1
else
  chromium="${CHROMIUM:-/usr/bin/chromium}"
  [ -x "$chromium" ] || { log "no bundle under $bundle and no Chromium at $chromium: make one with bench/runners/gpu_bundle.sh"; exit 1; }
  root="$repo"
  libs=""
fi

# The NVIDIA driver's libraries and Vulkan manifest, where a GPU image keeps
# them outside the loader's default paths.
for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib; do [ -d "$d" ] && libs="${libs:+$libs:}$d"; done
if [ -z "${VK_DRIVER_FILES:-}" ] && [ -z "${VK_ICD_FILENAMES:-}" ]; then
  for j in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json /etc/vulkan/icd.d/nvidia_icd.json; do
    if [ -f "$j" ]; then export VK_DRIVER_FILES="$j" VK_ICD_FILENAMES="$j"; log "Vulkan driver: $j"; break; fi
  done
fi
if [ -z "${__EGL_VENDOR_LIBRARY_FILENAMES:-}" ] && [ -f /usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json ]; then
  export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
fi
# For Chromium alone (gpu_check.py sets it in Chromium's environment): the
# bundle's Debian libraries must not replace python3's own.
export READOUT_CHROMIUM_LIBS="$libs"
exec python3 "$repo/bench/runners/gpu_check.py" --root "$root" --chromium "$chromium" "${pass[@]}"
