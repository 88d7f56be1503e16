#!/usr/bin/env bash
# Our own runtime against ONNX Runtime natively, in one run, on the same
# files and thread count: the logit_cost sweep (a 256-token prefix, then
# suffixes of each length) on each runtime, then one JSON with both and the
# ratios (own / ONNX Runtime: above 1 means ours is slower). On a CPU with
# AVX-512 VNNI ours also runs with its AVX2 kernel (READOUT_KERNEL=avx2), so
# the two kernels compare in the same run too.
#
#   bash bench/runners/own_native.sh [THREADS] [OUT_JSON] [MODEL_DIR...]
#
# Defaults: 2 threads, bench/results/own-native/<date>-own-native.json (refused if taken), SmolLM2-135M
# q4f16 and q4. Needs the release CLI (`cargo build --release`).
set -euo pipefail
cd "$(dirname "$0")/../.."
threads=${1:-2}
command="bash bench/runners/own_native.sh $*"
out=${2:-bench/results/own-native/$(date -u +%F)-own-native.json}
[ ! -e "$out" ] || { echo "own_native: $out exists; name another OUT" >&2; exit 1; }
shift $(( $# > 2 ? 2 : $# ))
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(models/smollm2-135m-instruct-q4f16 models/smollm2-135m-instruct-q4)
bin=target/release/readout
[ -x "$bin" ] || { echo "own_native: $bin is missing; run cargo build --release" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sweep() { # NAME RUNTIME [ENV...]
  local name=$1 rt=$2
  shift 2
  echo "own_native: sweeping $name ($threads threads)" >&2
  env "$@" "$bin" sweep --runtime "$rt" --threads "$threads" --lengths 1,8,16,32,64 --runs 5 \
    $(printf -- '--model %s ' "${models[@]}") -o "$work/$name.json"
}
sweep own own
if grep -q avx512-vnni "$work/own.json"; then sweep own-avx2 own READOUT_KERNEL=avx2; fi
sweep ort ort
node -e '
const fs = require("fs");
const [own, ort, out, threads, avx2, command] = process.argv.slice(1);
const read = (f) => JSON.parse(fs.readFileSync(f));
const a = read(own), b = read(ort), c = fs.existsSync(avx2) ? read(avx2) : null;
const tps = (x) => a.prefix_tokens / (x.prefill_ms / 1000);
const row = (x) => ({ runtime: x.runtime, fit: x.fit, median_ms: x.median_ms, prefill_ms: x.prefill_ms, prefill_tokens_per_s: tps(x) });
const ratio = (v, w) => ({
  per_token_ms: v.fit.per_token_ms / w.fit.per_token_ms,
  fixed_ms: v.fit.fixed_ms / w.fit.fixed_ms,
  prefill_ms: v.prefill_ms / w.prefill_ms,
  median_ms_by_length: v.median_ms.map((m, j) => m / w.median_ms[j]),
});
const variants = a.variants.map((v, i) => {
  const w = b.variants[i];
  const r = { id: v.id, own: row(v), onnxruntime: row(w), ratio_own_over_onnxruntime: ratio(v, w) };
  if (c) {
    r.own_avx2 = row(c.variants[i]);
    r.ratio_own_over_own_avx2 = ratio(v, c.variants[i]);
    r.ratio_own_avx2_over_onnxruntime = ratio(c.variants[i], w);
  }
  return r;
});
const r = { threads: Number(threads), prefix_tokens: a.prefix_tokens, lengths: a.lengths, runs: a.runs, variants };
const lib = require("url").pathToFileURL(require("path").resolve("bench/runners/result_file.mjs"));
import(lib).then(({ writeResult }) => writeResult(out, "own-native", "", r, { command }));
for (const v of variants) {
  const x = (r) => `x${r.per_token_ms.toFixed(2)}`;
  const avx2 = v.own_avx2 ? `, ${v.own_avx2.fit.per_token_ms.toFixed(2)} ms ours on avx2 (ours/avx2 ${x(v.ratio_own_over_own_avx2)})` : "";
  console.error(`own_native: ${v.id}: per token ${v.own.fit.per_token_ms.toFixed(2)} ms ours${avx2}, ${v.onnxruntime.fit.per_token_ms.toFixed(2)} ms ONNX Runtime (ours/ONNX Runtime ${x(v.ratio_own_over_onnxruntime)}); prefill ${v.own.prefill_tokens_per_s.toFixed(0)} vs ${v.onnxruntime.prefill_tokens_per_s.toFixed(0)} tokens/s`);
}
' "$work/own.json" "$work/ort.json" "$out" "$threads" "$work/own-avx2.json" "$command"
echo "own_native: wrote $out" >&2
