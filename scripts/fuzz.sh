#!/usr/bin/env bash
# Fuzzes every cargo-fuzz target for a while: the gated half of fuzzing.
# The test command only replays fuzz/corpus/ (tests/fuzz_corpus.rs, no
# nightly); this finds new inputs. A target that crashes, leaks past the RSS
# limit or hangs leaves its input in fuzz/artifacts/<target>/, and the script
# exits 1 after the others have run.
#
#   bash scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET ...]
#
# Defaults: 120 s for each of the targets in fuzz/Cargo.toml. New corpus
# entries go to target/fuzz-corpus/<target>/ (not the committed seeds); copy
# a finding into fuzz/corpus/<target>/ once it is fixed, so the replay keeps
# it. A summary (executions, findings) is printed and written to
# target/fuzz-summary.json.
set -euo pipefail
cd "$(dirname "$0")/.."

secs="${1:-120}"
shift || true
case "$secs" in '' | *[!0-9]*) echo "usage: scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET ...]" >&2; exit 2 ;; esac
if [ "$#" -gt 0 ]; then
  targets=("$@")
else
  mapfile -t targets < <(sed -n 's/^name = "\(.*\)"$/\1/p' fuzz/Cargo.toml | grep -v '^readout-fuzz$')
fi

# The toolchain and cargo-fuzz, installed once (both idempotent and quick
# when present); cargo-fuzz lives in the project's cache, not ~/.cargo.
rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
tools="$HOME/.cache/readout/cargo-fuzz"
export PATH="$tools/bin:$PATH"
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked --root "$tools"

mkdir -p target
summary=target/fuzz-summary.json
failed=0
rows=()
for t in "${targets[@]}"; do
  [ -d "fuzz/corpus/$t" ] || { echo "fuzz: no target $t (fuzz/corpus/$t missing)" >&2; exit 2; }
  work="target/fuzz-corpus/$t"
  mkdir -p "$work"
  log="target/fuzz-$t.log"
  echo "== $t: $secs s (log $log)"
  before=$( (find "fuzz/artifacts/$t" -type f 2>/dev/null || true) | wc -l)
  # -rss_limit_mb: a browser tab has about this much; an input that needs
  # more is a finding. -timeout: one input longer than 10 s is a hang.
  rc=0
  timeout $((secs + 600)) cargo +nightly fuzz run --fuzz-dir fuzz "$t" "$work" "fuzz/corpus/$t" -- \
    -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 >"$log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  after=$( (find "fuzz/artifacts/$t" -type f 2>/dev/null || true) | wc -l)
  found=$((after - before))
  if [ "$rc" -ne 0 ] || [ "$found" -gt 0 ]; then
    failed=1
    echo "   $t: exit $rc, $found new finding(s) in fuzz/artifacts/$t/"
    grep -m3 -E "panicked|ERROR: libFuzzer|SUMMARY" "$log" | sed 's/^/   /' || true
  fi
  echo "   $t: ${execs:-?} executions in $secs s"
  rows+=("{\"target\":\"$t\",\"seconds\":$secs,\"executions\":${execs:-null},\"exit\":$rc,\"findings\":$found}")
done
(IFS=,; echo "{\"date\":\"$(date -u +%FT%TZ)\",\"commit\":\"$(git rev-parse --short HEAD)\",\"targets\":[${rows[*]}]}") >"$summary"
echo "summary: $summary"
exit "$failed"
