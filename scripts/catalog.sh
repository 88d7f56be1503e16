#!/usr/bin/env bash
# Writes models.json from models/ with the measured readout defaults: the one
# place that names which decisions summaries give them (bench/runners/
# decisions.sh writes them; a new measurement is taken by naming its file
# here). main.sh, test.sh and bench.sh call it.
#   bash scripts/catalog.sh path/to/readout
set -euo pipefail
cd "$(dirname "$0")/.."
"$1" catalog --models models -o models.json \
  --decisions bench/results/decisions/2026-11-30-decisions-smollm2-135m-instruct-q4.json \
  --decisions bench/results/decisions/2026-12-01-decisions-gemma3-270m-q4.json
