#!/usr/bin/env bash
# Our own runtime against ONNX Runtime natively, in one run, on the same
# files and thread count: the logit_cost sweep (a 256-token prefix, then
# suffixes of each length) on each runtime, then one JSON with both and the
# ratios (own / ONNX Runtime: above 1 means ours is slower).
#
#   bash bench/own_native.sh [THREADS] [OUT_JSON] [MODEL_DIR...]
#
# Defaults: 2 threads, bench/results/<date>-own-native.json, SmolLM2-135M
# q4f16 and q4. Needs the release CLI (`cargo build --release`).
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-2}
out=${2:-bench/results/$(date -u +%F)-own-native.json}
shift $(( $# > 2 ? 2 : $# ))
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(models/smollm2-135m-instruct-q4f16 models/smollm2-135m-instruct-q4)
bin=target/release/readout
[ -x "$bin" ] || { echo "own_native: $bin is missing; run cargo build --release" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for rt in own ort; do
  echo "own_native: sweeping on $rt ($threads threads)" >&2
  "$bin" sweep --runtime "$rt" --threads "$threads" --lengths 1,8,16,32,64 --runs 5 \
    $(printf -- '--model %s ' "${models[@]}") -o "$work/$rt.json"
done
node -e '
const fs = require("fs");
const [own, ort, out, threads] = process.argv.slice(1);
const a = JSON.parse(fs.readFileSync(own)), b = JSON.parse(fs.readFileSync(ort));
const variants = a.variants.map((v, i) => {
  const w = b.variants[i];
  const tps = (x) => a.prefix_tokens / (x.prefill_ms / 1000);
  return {
    id: v.id,
    own: { runtime: v.runtime, fit: v.fit, median_ms: v.median_ms, prefill_ms: v.prefill_ms, prefill_tokens_per_s: tps(v) },
    onnxruntime: { runtime: w.runtime, fit: w.fit, median_ms: w.median_ms, prefill_ms: w.prefill_ms, prefill_tokens_per_s: tps(w) },
    ratio_own_over_onnxruntime: {
      per_token_ms: v.fit.per_token_ms / w.fit.per_token_ms,
      fixed_ms: v.fit.fixed_ms / w.fit.fixed_ms,
      prefill_ms: v.prefill_ms / w.prefill_ms,
      median_ms_by_length: v.median_ms.map((m, j) => m / w.median_ms[j]),
    },
  };
});
const r = { benchmark: "own_native", date: a.date, machine: a.machine, threads: Number(threads),
  prefix_tokens: a.prefix_tokens, lengths: a.lengths, runs: a.runs, variants };
fs.writeFileSync(out, JSON.stringify(r, null, 2) + "\n");
for (const v of variants) console.error(`own_native: ${v.id}: per token ${v.own.fit.per_token_ms.toFixed(2)} ms ours, ${v.onnxruntime.fit.per_token_ms.toFixed(2)} ms ONNX Runtime (x${v.ratio_own_over_onnxruntime.per_token_ms.toFixed(2)}); prefill ${v.own.prefill_tokens_per_s.toFixed(0)} vs ${v.onnxruntime.prefill_tokens_per_s.toFixed(0)} tokens/s`);
' "$work/own.json" "$work/ort.json" "$out" "$threads"
echo "own_native: wrote $out" >&2
