#!/usr/bin/env bash
# The machine code Chromium's V8 compiled for one wasm function, with where
# its samples fell. Release Chromium has no disassembler (`--print-wasm-code`
# prints nothing there), but V8's `--perf-prof` writes each compiled
# function's code to a jitdump file; `perf inject --jit` turns those into
# objects `perf annotate` can disassemble. Node's own V8 prints code but
# lowers relaxed SIMD differently (no `vpdpbusd`), so it is not the code the
# page runs.
#
# It runs the int8 product kernel in cache (`node bench/runners/dot_peak.mjs --ab
# WASM,WASM --rounds 1`, the diagnostics KernelBench) under `perf record`,
# then annotates the hottest function whose name contains FUNCTION and
# counts its instructions by kind: what the hot loop spends beside the dot
# products (spills to the stack, scalar address arithmetic, broadcasts).
#
#   bash bench/studies/jit_annotate.sh [FUNCTION] [WASM] [OUT_DIR]
#
# FUNCTION defaults to group_rows_on (the kernel; Rust's inlining puts the
# whole product there), WASM to cargo's threaded diagnostics build as
# scripts/build_pkg.sh leaves it, OUT_DIR to target/jit-annotate.
set -euo pipefail
cd "$(dirname "$0")/../.."
func=${1:-group_rows_on}
wasm=${2:-target/threads/wasm32-unknown-unknown/release/readout.wasm}
out=${3:-target/jit-annotate}
command -v perf >/dev/null || { echo "jit_annotate: perf is not installed (apt-get install linux-perf)" >&2; exit 1; }
[ -f "$wasm" ] || { echo "jit_annotate: $wasm not found: build it (bash scripts/build_pkg.sh) or name one" >&2; exit 1; }
chromium=${CHROMIUM:-/usr/bin/chromium}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/jit" "$out"
# Chromium through a wrapper that adds V8's flags: playwright launches it
# with its own arguments, which are passed on. It starts in the scratch
# folder: --perf-prof also writes V8's logs into the working directory.
cat > "$work/chromium" <<EOF
#!/usr/bin/env bash
cd "$work/jit"
exec "$chromium" --js-flags="--perf-prof --perf-prof-path=$work/jit --no-write-protect-code-memory" "\$@"
EOF
chmod +x "$work/chromium"
echo "jit_annotate: the kernel under perf record ($wasm)" >&2
CHROMIUM="$work/chromium" perf record -k 1 -q -o "$work/perf.data" -- \
  node bench/runners/dot_peak.mjs --no-native --ab "$wasm,$wasm" --rounds 1 --rows 45 \
  --note "jit_annotate run, not a measurement" --out "$work/run.json" >&2
perf inject --jit -i "$work/perf.data" -o "$work/perf.jit.data"
symbol=$(perf report -i "$work/perf.jit.data" --sort sym --stdio 2>/dev/null \
  | { grep -F "$func" || true; } | head -1 | sed -E 's/^.*\[\.\] //; s/[[:space:]]+$//')
[ -n "$symbol" ] || { echo "jit_annotate: no sampled function's name contains '$func'" >&2; exit 1; }
name=$(echo "$func" | tr -c 'A-Za-z0-9_\n' '_')
perf annotate -i "$work/perf.jit.data" --stdio -s "$symbol" 2>/dev/null > "$out/$name.txt"
echo "jit_annotate: $symbol -> $out/$name.txt" >&2
python3 - "$out/$name.txt" <<'PY'
import re, sys
from collections import Counter
seen = {}
for line in open(sys.argv[1]):
    m = re.match(r"\s*([0-9.]+)\s*:\s*([0-9a-f]+):\s*(.*)", line)
    if m and int(m.group(2), 16) not in seen:
        seen[int(m.group(2), 16)] = (float(m.group(1)), m.group(3).strip())
code = sorted(seen.items())
# The hot region: the 256-byte buckets holding 80 % of the samples.
buckets = Counter()
for a, (p, _) in code:
    buckets[a // 256] += p
hot, total = set(), 0.0
for b, p in buckets.most_common():
    if total >= 80:
        break
    hot.add(b)
    total += p
def kind(ins):
    op = ins.split()[1] if ins.startswith("{") else ins.split()[0]
    if op.startswith("vmov") and "%rbp" in ins:
        return "vector spill or fill (stack)"
    if op in ("vpdpbusd", "vpmaddubsw", "vpmaddwd"):
        return "dot product (" + op + ")"
    if op.startswith(("vbroadcast", "vpbroadcast")):
        return "broadcast"
    if op.startswith("v"):
        return "other vector"
    if op in ("lea", "add", "mov", "shl", "sub", "movl", "movq"):
        return "scalar arithmetic and moves"
    return "other scalar (compare, branch)"
count, share = Counter(), Counter()
for a, (p, ins) in code:
    if a // 256 in hot:
        count[kind(ins)] += 1
        share[kind(ins)] += p
n = sum(count.values())
print(f"hot region: {n} instructions, {total:.0f} % of the function's samples")
for k, c in count.most_common():
    print(f"  {c:4d}  {100 * c / n:5.1f} % of instructions  {share[k]:5.1f} % of samples  {k}")
PY
