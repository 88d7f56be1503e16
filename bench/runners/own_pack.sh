#!/usr/bin/env bash
# One pass for every branch of a state, natively on our own runtime: the
# same fixtures scored with branches packed (`--pack on`) and one run per
# branch (`--pack off`), on the same runtime, files and thread count, in one
# run; then one JSON with every time and the ratios.
#
#   bash bench/runners/own_pack.sh [THREADS] [OUT_JSON] [MODEL_DIR]
#
# Two fixtures:
# - "eight": the authored states with 8 criteria each
#   (bench/runners/pack_common.mjs): what "8 criteria of a state in one pass" is
#   measured on. Only times are read from it.
# - "authored": tests/fixtures/authored.jsonl as it is (4 criteria a state),
#   for the cyclic-debias times the docs quote.
# Defaults: 2 threads, bench/results/own-pack/<date>-own-pack.json (refused if taken), SmolLM2-135M
# q4f16. Needs the release CLI (`cargo build --release`).
set -euo pipefail
cd "$(dirname "$0")/../.."
threads=${1:-2}
command="bash bench/runners/own_pack.sh $*"
out=${2:-bench/results/own-pack/$(date -u +%F)-own-pack.json}
[ ! -e "$out" ] || { echo "own_pack: $out exists; name another OUT" >&2; exit 1; }
model=${3:-models/smollm2-135m-instruct-q4f16}
bin=target/release/readout
[ -x "$bin" ] || { echo "own_pack: $bin is missing; run cargo build --release" >&2; exit 1; }
[ -f "$model/model.onnx" ] || { echo "own_pack: $model is not built (bash scripts/main.sh builds it)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
node bench/runners/pack_common.mjs "$work/eight.jsonl"

run() { # name fixture pack extra-args...
  local name=$1 fixture=$2 pack=$3; shift 3
  echo "own_pack: $name, pack $pack" >&2
  "$bin" evaluate "$fixture" --model "$model" --runtime own --threads "$threads" --pack "$pack" "$@" \
    --out "$work/$name-$pack.json" >/dev/null
}
for pack in off on; do
  run letters "$work/eight.jsonl" "$pack"
  run cyclic "$work/eight.jsonl" "$pack" --debias cyclic
  run cloze "$work/eight.jsonl" "$pack" --mode cloze
  run authored-none tests/fixtures/authored.jsonl "$pack"
  run authored-cyclic tests/fixtures/authored.jsonl "$pack" --debias cyclic
done

node --input-type=module -e '
import fs from "node:fs";
import { PACK_GOALS, packRatios } from "./bench/runners/pack_common.mjs";
import { writeResult } from "./bench/runners/result_file.mjs";
const [work, out, threads, model, command] = process.argv.slice(1);
const names = ["letters", "cyclic", "cloze", "authored-none", "authored-cyclic"];
const runs = {};
for (const n of names) for (const p of ["off", "on"]) {
  const r = JSON.parse(fs.readFileSync(`${work}/${n}-${p}.json`));
  runs[`${n}-${p}`] = { criteria: r.criteria, states: r.states, ms_per_criterion: r.ms_per_criterion, seconds: r.seconds, runtime: r.runtime };
}
const ratios = packRatios(runs);
const r = {
  model, threads: Number(threads),
  note: "ms_per_criterion: scoring time (baselines included, prefills excluded) per criterion, from readout evaluate; off = one run per branch, on = branches packed; same runtime, files and threads, one run",
  goals: PACK_GOALS,
  runs, ratios,
};
writeResult(out, "own-pack", "", r, { command });
for (const [k, v] of Object.entries(ratios)) console.error(`own_pack: ${k} ${v.toFixed(2)}`);
' "$work" "$out" "$threads" "$model" "$command"
echo "own_pack: wrote $out" >&2
