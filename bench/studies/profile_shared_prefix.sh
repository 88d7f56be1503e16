#!/usr/bin/env bash
# Where a state's prefill time goes on our runtime, prefilled whole against
# built on a shared prefix (issue: the shared prefix's speedup): perf
# samples by function, grouped, per token of the measured states. Four
# runs of bench/native/shared_prefix.rs --profile, each path with 1 state
# and with 1 + STATES: the first is subtracted from the second, so the
# load, the warm-up and the prefix's own prefill are not counted.
#   bash bench/studies/profile_shared_prefix.sh [STATES] [OUT]
set -euo pipefail
cd "$(dirname "$0")/../.."
states=${1:-16}
out=${2:-bench/results/profile-shared-prefix/$(date -u +%F)-profile-shared-prefix-own.json}
[ ! -e "$out" ] || { echo "profile_shared_prefix: $out exists; name another OUT" >&2; exit 1; }
source scripts/lib/cache.sh
export CARGO_BUILD_BUILD_DIR
bin=$(cargo bench --locked --bench shared_prefix --no-run --message-format=json 2>/dev/null |
  node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{for(const l of s.split("\n")){try{const j=JSON.parse(l);if(j.executable&&j.target.name==="shared_prefix")console.log(j.executable)}catch{}}})')
tmp=$(mktemp -d)
for run in "whole1 1 whole" "whole $((states + 1)) whole" "prefix1 1 prefix" "prefix $((states + 1)) prefix"; do
  set -- $run
  perf record -q -F 499 -o "$tmp/$1.data" -- "$bin" --states "$2" --profile "$3" 2>"$tmp/$1.log" >/dev/null
  perf report -i "$tmp/$1.data" --no-children --sort symbol --stdio -n 2>/dev/null | grep -E '^ +[0-9.]+%' >"$tmp/$1.txt"
done
node - "$tmp" "$states" "$out" <<'JS'
const fs = require("fs");
const [tmp, states, out] = process.argv.slice(2);
const group = (sym) =>
  /group_rows|matmul_packed|quantise|Q4Matrix/.test(sym) ? "int8 products" :
  /attention|dot4/.test(sym) ? "attention" : "other";
const read = (run) => {
  const g = { "int8 products": 0, attention: 0, other: 0 };
  for (const line of fs.readFileSync(`${tmp}/${run}.txt`, "utf8").split("\n")) {
    const m = line.match(/^ +[0-9.]+% +(\d+) +\[.\] (.*)$/) || line.match(/^ +[0-9.]+% +(\d+) +\[k\] (.*)$/);
    if (m) g[group(m[2])] += Number(m[1]);
  }
  const log = fs.readFileSync(`${tmp}/${run}.log`, "utf8");
  const t = log.match(/states of (\d+) tokens, (\d+) ms/);
  return { samples: g, state_tokens: t ? Number(t[1]) : 0, ms: t ? Number(t[2]) : 0 };
};
const whole = read("whole"), prefix = read("prefix"), base = { whole: read("whole1"), prefix: read("prefix1") };
const prefixTokens = 416;
const per = (r, b, tokens) => Object.fromEntries(Object.keys(r.samples).map((k) => [k, (r.samples[k] - b.samples[k]) / 499 * 1e3 / tokens]));
const wholeTokens = states * whole.state_tokens;
const onTokens = states * (prefix.state_tokens - prefixTokens);
const w = per(whole, base.whole, wholeTokens), p = per(prefix, base.prefix, onTokens);
const sum = (x) => Object.values(x).reduce((a, b) => a + b, 0);
const res = {
  what: "CPU ms per token run (both threads' samples, perf at 499 Hz), by group of functions, our runtime, SmolLM2-135M q4, 2 threads: states prefilled whole against the same states' evidence run on the shared prefix's past",
  states: Number(states), whole_state_tokens: whole.state_tokens, evidence_tokens_on_prefix: prefix.state_tokens - prefixTokens,
  wall_ms_per_state: { whole: (whole.ms - base.whole.ms) / states, on_prefix: (prefix.ms - base.prefix.ms) / states },
  cpu_ms_per_token: { whole: w, on_prefix: p },
  share: { whole: Object.fromEntries(Object.entries(w).map(([k, v]) => [k, v / sum(w)])), on_prefix: Object.fromEntries(Object.entries(p).map(([k, v]) => [k, v / sum(p)])) },
  // A state's CPU time whole over on the prefix, as measured, and with
  // attention's share taken out of both (the most a faster attention
  // alone could give, the prefix's own prefill not counted).
  cpu_ratio_whole_over_on_prefix: (whole.state_tokens * sum(w)) / ((prefix.state_tokens - prefixTokens) * sum(p)),
  cpu_ratio_if_attention_were_free: (whole.state_tokens * (sum(w) - w.attention)) / ((prefix.state_tokens - prefixTokens) * (sum(p) - p.attention)),
};
const lib = require("url").pathToFileURL(require("path").resolve("bench/runners/result_file.mjs"));
import(lib).then(({ writeResult }) => writeResult(out, "profile-shared-prefix", "", res, { command: `bash bench/studies/profile_shared_prefix.sh ${states}` }));
console.log(JSON.stringify(res, null, 1));
JS
rm -rf "$tmp"
