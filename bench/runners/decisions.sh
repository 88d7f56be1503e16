#!/usr/bin/env bash
# Every readout combination (mode × cloze score × calibration × prompt) on one
# model over the authored fixture, in one run: each combination's full
# `readout evaluate` report, then one summary JSON comparing them.
#
#   bash bench/runners/decisions.sh [MODEL_DIR] [OUT_JSON]
#   EXAMPLES=bench/fixtures/worked-examples.json bash bench/runners/decisions.sh
#       each combination with 0, 2 and 4 worked examples in a shared prefix
#       (COUNTS="0 2 4"; the file's first k examples), plain prompt only
#       unless PROMPTS says otherwise
#
# Defaults: models/smollm2-135m-instruct-q4 and
# bench/results/decisions/<date>-decisions-<model>.json (refused if taken). Needs the release CLI
# (`cargo build --release`, done by scripts/main.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
model=${1:-models/smollm2-135m-instruct-q4}
id=$(basename "$model")
out=${2:-bench/results/decisions/$(date -u +%F)-decisions-$id.json}
[ ! -e "$out" ] || { echo "decisions: $out exists; name another OUT" >&2; exit 1; }
fixture=tests/fixtures/authored.jsonl
bin=target/release/readout
[ -x "$bin" ] || { echo "decisions: $bin is missing; run cargo build --release" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The chat prompt needs the model's own template; a base model (Gemma 3
# 270M) ships none, and the engine refuses `--prompt chat` there. PROMPTS,
# or a run with worked examples, names the prompts instead.
read -r -a prompts <<<"${PROMPTS:-plain}"
if [ -n "${PROMPTS:-}" ] || [ -n "${EXAMPLES:-}" ]; then
  :
elif [ -f "$model/chat_template.jinja" ] || grep -q '"chat_template"' "$model/tokenizer_config.json" 2>/dev/null; then
  prompts+=(chat)
else
  echo "decisions: $id has no chat template; plain prompt only" >&2
fi
# Extra flags for every evaluate (e.g. READOUT_FLAGS="--runtime own").
read -r -a flags <<<"${READOUT_FLAGS:-}"
# Worked examples: a prefix file per count, the first k of $EXAMPLES (0: no
# prefix, the plain prefill, which a prefix with no examples equals).
read -r -a counts <<<"${EXAMPLES:+${COUNTS:-0 2 4}}"
[ ${#counts[@]} -eq 0 ] && counts=(0)
for k in "${counts[@]}"; do
  [ "$k" = 0 ] && continue
  node -e '
    const [file, k, out] = process.argv.slice(1);
    const ex = JSON.parse(require("fs").readFileSync(file, "utf8")).examples;
    if (ex.length < +k) { console.error(`decisions: ${file} holds ${ex.length} examples, not ${k}`); process.exit(1); }
    require("fs").writeFileSync(out, JSON.stringify({ examples: ex.slice(0, +k) }));
  ' "$EXAMPLES" "$k" "$work/prefix-$k.json"
done
combos=()
for k in "${counts[@]}"; do
  for prompt in "${prompts[@]}"; do
    for cal in none content-free; do
      combos+=("letters sum $cal $prompt $k")
      combos+=("cloze sum $cal $prompt $k")
      combos+=("cloze mean $cal $prompt $k")
    done
  done
done
i=0
for c in "${combos[@]}"; do
  read -r mode score cal prompt k <<<"$c"
  i=$((i + 1))
  echo "decisions: [$i/${#combos[@]}] $mode $score $cal $prompt, $k examples" >&2
  pre=()
  [ "$k" != 0 ] && pre=(--prefix "$work/prefix-$k.json")
  "$bin" evaluate "$fixture" --model "$model" --mode "$mode" --cloze-score "$score" \
    --calibration "$cal" --prompt "$prompt" ${pre[@]+"${pre[@]}"} ${flags[@]+"${flags[@]}"} --out "$work/$i.json" >"$work/$i.txt"
  tail -3 "$work/$i.txt" >&2
done
# In the order run (1.json .. 12.json), not the shell's lexical order.
node bench/runners/decisions_summary.mjs "$fixture" "$out" $(ls "$work"/[0-9]*.json | sort -V)
echo "decisions: wrote $out" >&2
