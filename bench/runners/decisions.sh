#!/usr/bin/env bash
# Every readout combination (mode × cloze score × calibration × prompt) on one
# model over the authored fixture, in one run: each combination's full
# `readout evaluate` report, then one summary JSON comparing them.
#
#   bash bench/runners/decisions.sh [MODEL_DIR] [OUT_JSON]
#
# Defaults: models/smollm2-135m-instruct-q4 and
# bench/results/<date>-decisions-<model>.json. Needs the release CLI
# (`cargo build --release`, done by scripts/main.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
model=${1:-models/smollm2-135m-instruct-q4}
id=$(basename "$model")
out=${2:-bench/results/$(date -u +%F)-decisions-$id.json}
fixture=tests/fixtures/authored.jsonl
bin=target/release/readout
[ -x "$bin" ] || { echo "decisions: $bin is missing; run cargo build --release" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The chat prompt needs the model's own template; a base model (Gemma 3
# 270M) ships none, and the engine refuses `--prompt chat` there.
prompts=(plain)
if [ -f "$model/chat_template.jinja" ] || grep -q '"chat_template"' "$model/tokenizer_config.json" 2>/dev/null; then
  prompts+=(chat)
else
  echo "decisions: $id has no chat template; plain prompt only" >&2
fi
# Extra flags for every evaluate (e.g. READOUT_FLAGS="--runtime own").
read -r -a flags <<<"${READOUT_FLAGS:-}"
combos=()
for prompt in "${prompts[@]}"; do
  for cal in none content-free; do
    combos+=("letters sum $cal $prompt")
    combos+=("cloze sum $cal $prompt")
    combos+=("cloze mean $cal $prompt")
  done
done
i=0
for c in "${combos[@]}"; do
  read -r mode score cal prompt <<<"$c"
  i=$((i + 1))
  echo "decisions: [$i/${#combos[@]}] $mode $score $cal $prompt" >&2
  "$bin" evaluate "$fixture" --model "$model" --mode "$mode" --cloze-score "$score" \
    --calibration "$cal" --prompt "$prompt" ${flags[@]+"${flags[@]}"} --out "$work/$i.json" >"$work/$i.txt"
  tail -3 "$work/$i.txt" >&2
done
# In the order run (1.json .. 12.json), not the shell's lexical order.
node bench/runners/decisions_summary.mjs "$fixture" "$out" $(ls "$work"/*.json | sort -V)
echo "decisions: wrote $out" >&2
