#!/usr/bin/env bash
# The main job, on a fresh machine of this kind: installs everything, builds
# the npm package (pkg/) and the default model (SmolLM2-135M-Instruct: q4f16,
# q4 and fp32, each with its -trimmed and -trimmed-pruned variants, verified
# against the stock graph by the readout CLI), writes models.json, checks the
# bundled example state natively against one uncached forward per criterion,
# then serves the demo page (www/) and prints its URL.
#
#   bash scripts/main.sh              serve the demo on http://127.0.0.1:8000/www/
#   bash scripts/main.sh --headless   drive headless Chromium through the demo on
#                                     examples/state.json and print the decisions,
#                                     then the same state on float16 WebGPU in Deno
#                                     (lavapipe, emulated): the stock q4f16 entry in its
#                                     default readout beside native, then the pruned
#                                     letters path
#   MODEL=<models.json id> bash scripts/main.sh [--headless]
set -euo pipefail
cd "$(dirname "$0")/.."

headless=0
for a in "$@"; do
  case "$a" in
    --headless) headless=1 ;;
    *) echo "main.sh: unknown argument $a (only --headless)" >&2; exit 2 ;;
  esac
done

# Disk this run writes (scripts/setup.sh checks it first): the SmolLM2 models
# and their variants 2 GB, the release build and the package 1 GB, headroom.
built=models/smollm2-135m-instruct-fp32-trimmed-pruned/model.onnx
bash scripts/setup.sh --python --disk-gb "$([ -f "$built" ] && echo 1 || echo 4)"
.venv/bin/python modelgen/build_models.py smollm2
# cargo's build directory in the machine's cache (scripts/lib/cache.sh).
source scripts/lib/cache.sh
export CARGO_BUILD_BUILD_DIR
# A line at least every 30 s while the release build links.
source scripts/lib/heartbeat.sh
heartbeat "[main] cargo build --release" cargo build --locked --release --bin readout
readout=target/release/readout
"$readout" variants models/smollm2-135m-instruct-{q4f16,q4,fp32}
# Surgery on the real int4 heads, once per built model set: prune at 2, 3, 4
# and 20 letters and expose-hidden on SmolLM2 q4 and q4f16, each verified
# against the stock graph within its kernel-derived bound (the CLI prints the
# measured difference and the bound). The test command builds only the tiny
# models, so this is where the real ones are checked.
stamp=models/.surgery-checked-v1
if [ ! -f "$stamp" ]; then
  scratch=$(mktemp -d "${TMPDIR:-/tmp}/readout-surgery-check.XXXXXX")
  trap 'rm -rf "$scratch"' EXIT
  surgery() { # label, readout args...
    local label=$1; shift
    if ! "$readout" "$@" > /dev/null 2> "$scratch/log"; then
      cat "$scratch/log" >&2; echo "[main] $label failed" >&2; exit 1
    fi
    echo "[main] $label: $(grep -o 'max |Δ| [^;]*' "$scratch/log")$(grep -o '; last_hidden · .*' "$scratch/log" || true)" >&2
  }
  for base in smollm2-135m-instruct-q4 smollm2-135m-instruct-q4f16; do
    for letters in AB ABC ABCD ABCDEFGHIJKLMNOPQRST; do
      surgery "prune $base --letters $letters" prune "models/$base" --letters "$letters" -o "$scratch/$base-p$letters"
    done
    surgery "expose-hidden $base" expose-hidden "models/$base" -o "$scratch/h-$base"
  done
  rm -rf "$scratch"
  trap - EXIT
  touch "$stamp"
fi
bash scripts/catalog.sh "$readout"
bash scripts/build_pkg.sh

# The stock graph: its models.json entry names the best measured readout
# (bench/runners/decisions.sh), which the demo serves and the native check repeats.
model="${MODEL:-smollm2-135m-instruct-q4f16}"
readout_flags=$(node -e '
  const m = require("./models.json").models.find((x) => x.id === process.argv[1]);
  const r = m && m.readout;
  if (r) console.log(`--mode ${r.mode} --cloze-score ${r.cloze_score} --calibration ${r.calibration} --prompt ${r.prompt}`);
' "$model")
echo "[main] native check: readout score --model models.json#$model --state examples/state.json $readout_flags --check" >&2
# shellcheck disable=SC2086 # the flags are words
"$readout" score --model "models.json#$model" --state examples/state.json $readout_flags --check >/dev/null

if [ "$headless" = 1 ]; then
  # A browser profile kept between runs, as a user's is between visits: the
  # second main job's demo reads the model's files from the browser's storage.
  node scripts/demo.mjs --headless --model "$model" --profile target/demo-profile
  # Then float16 WebGPU, which Chromium here cannot run (its only adapter,
  # SwiftShader, has no shader-f16), in Deno on Mesa's lavapipe, times
  # marked emulated: the stock entry in its default readout beside the
  # native engine's decisions, then the pruned letters path.
  stock="${model%-trimmed-pruned}"
  stock="${stock%-trimmed}"
  exec node scripts/deno_demo.mjs --model "$stock" --letters-model "$stock-trimmed-pruned" --bin "$readout"
fi
exec node scripts/demo.mjs --model "$model"
