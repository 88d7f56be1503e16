#!/usr/bin/env bash
# Two builds of our runtime against each other natively, in one run: the
# logit_cost sweep (a 256-token prefix, then suffixes) with each binary in
# turn, ROUNDS times alternated, so both see the same machine. For a change
# that no switch turns off (the attention work): build the earlier commit
# in a worktree with its own target dir and pass its binary as BEFORE.
#
#   [LENGTHS=1,2,4] bash bench/studies/ab_native.sh BEFORE_BIN AFTER_BIN [MODEL_DIR] [ROUNDS] [OUT_JSON]
#
# LENGTHS (default 1,8,16,32,64) are the suffix lengths; short ones show a
# change in what a run costs beside its tokens.
set -euo pipefail
cd "$(dirname "$0")/../.."
before=$1 after=$2
model=${3:-models/smollm2-135m-instruct-q4f16}
rounds=${4:-3}
command="bash bench/studies/ab_native.sh $*"
out=${5:-bench/results/ab-native/$(date -u +%F)-ab-native.json}
[ ! -e "$out" ] || { echo "ab_native: $out exists; name another OUT_JSON" >&2; exit 1; }
lengths=${LENGTHS:-1,8,16,32,64}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for i in $(seq 1 "$rounds"); do
  for side in before after; do
    bin=${!side}
    echo "ab_native: round $i, $side ($bin)" >&2
    "$bin" sweep --runtime own --threads 2 --lengths "$lengths" --runs 5 --model "$model" \
      -o "$work/$side-$i.json" 2>/dev/null
  done
done
node -e '
const fs = require("fs");
const [work, rounds, out, before, after, command] = process.argv.slice(1);
const side = (s) => Array.from({ length: Number(rounds) }, (_, i) => {
  const r = JSON.parse(fs.readFileSync(`${work}/${s}-${i + 1}.json`));
  const v = r.variants[0];
  return { runtime: v.runtime, fit: v.fit, median_ms: v.median_ms, prefill_ms: v.prefill_ms, prefill_tokens_per_s: r.prefix_tokens / (v.prefill_ms / 1000) };
});
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const b = side("before"), a = side("after");
const first = JSON.parse(fs.readFileSync(`${work}/before-1.json`));
const r = {
  threads: 2, prefix_tokens: first.prefix_tokens,
  lengths: first.lengths, model: first.variants[0].id, binaries: { before, after }, before: b, after: a,
  ratio_before_over_after: {
    per_token_ms: median(b.map((x) => x.fit.per_token_ms)) / median(a.map((x) => x.fit.per_token_ms)),
    prefill_tokens_per_s: median(a.map((x) => x.prefill_tokens_per_s)) / median(b.map((x) => x.prefill_tokens_per_s)),
    shortest_run_ms: median(b.map((x) => x.median_ms[0])) / median(a.map((x) => x.median_ms[0])),
  },
};
const lib = require("url").pathToFileURL(require("path").resolve("bench/runners/result_file.mjs"));
import(lib).then(({ writeResult }) => writeResult(out, "ab-native", "", r, { command }));
const f = (xs, k) => xs.map(k).join(", ");
console.error(`ab_native: per token before ${f(b, (x) => x.fit.per_token_ms.toFixed(2))} ms, after ${f(a, (x) => x.fit.per_token_ms.toFixed(2))} ms (median ratio ${r.ratio_before_over_after.per_token_ms.toFixed(2)}x); prefill before ${f(b, (x) => x.prefill_tokens_per_s.toFixed(0))}, after ${f(a, (x) => x.prefill_tokens_per_s.toFixed(0))} tokens/s (${r.ratio_before_over_after.prefill_tokens_per_s.toFixed(2)}x); a ${r.lengths[0]}-token run before ${f(b, (x) => x.median_ms[0].toFixed(2))}, after ${f(a, (x) => x.median_ms[0].toFixed(2))} ms (${r.ratio_before_over_after.shortest_run_ms.toFixed(2)}x)`);
' "$work" "$rounds" "$out" "$before" "$after" "$command"
echo "ab_native: wrote $out" >&2
