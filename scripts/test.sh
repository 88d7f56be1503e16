#!/usr/bin/env bash
# The test suite, on a fresh machine of this kind. With no argument it runs
# every part: this is the README's test command, and what .ci/run calls.
#   bash scripts/test.sh                  every part
#   bash scripts/test.sh rust deno        only these parts (each installs and
#                                         builds what it needs, nothing more)
#   bash scripts/test.sh --list           the parts, one line each
# The parts:
#   gates     cargo fmt, clippy -D warnings (native, wasm32, the threaded
#             wasm32 build), the README's tables, the documents' references
#   rust      cargo test: every native test, tiny models (and Hugging
#             Face's conversion of the tiny weights)
#   python    the Python package (python/, PyO3 + maturin) built into .venv
#             and its tests against the CLI (python/tests/), readout.ray on a
#             local Ray cluster the tests start
#   package   the npm package's six wasm builds, tsc against its types, and
#             the package installed and scoring in Node.js (tests/node/)
#   chromium  the browser tests in headless Chromium (WebGPU via SwiftShader,
#             the WASM backend, our cpu backend, threads)
#   deno      float16 WebGPU in Deno on Mesa's lavapipe
#   firefox   Firefox ESR over WebDriver BiDi: the cpu and WASM backends, the
#             threaded build, float16 WebGPU (lavapipe), the demo page
# Steps a part needs run once per invocation, and show in the timing table
# under their own names: setup (scripts/setup.sh), venvs (its Python venvs,
# made beside the gates when the gates run), models (the tiny models,
# their variants, models.json), fixtures (the browser tests' broken models).
# With several browser parts asked for, Chromium runs beside Deno then Firefox
# (then the Chromium files in CHROMIUM_LATE, so the two lanes end together).
# At the end a table gives each step's minutes, the share of the cores busy
# during it, and the total; the same table is written as JSON to
# target/test-times.json.
set -euo pipefail
cd "$(dirname "$0")/.."

ALL=(gates rust python package chromium deno firefox)
parts=()
for a in "$@"; do
  case "$a" in
    --list) printf '%s\n' "${ALL[@]}"; exit 0 ;;
    gates | rust | python | package | chromium | deno | firefox) parts+=("$a") ;;
    *) echo "test.sh: unknown part '$a' (parts: ${ALL[*]}; --list)" >&2; exit 2 ;;
  esac
done
[ ${#parts[@]} -eq 0 ] && parts=("${ALL[@]}")
wants() { local p; for p in "${parts[@]}"; do [ "$p" = "$1" ] && return 0; done; return 1; }

# The machine's caches (scripts/lib/cache.sh): the venv, the tiny models, and
# cargo's build directory, which every clone on this machine shares.
source scripts/lib/cache.sh
export READOUT_CACHE CARGO_BUILD_BUILD_DIR
# What the caches held when the run began, entry by entry (the venvs, the
# tiny models, each cargo build directory): the record says, per entry the
# run ended with, whether it was there (hit) or made by this run (built),
# and its label follows: warm when nothing was built, cold when every entry
# was, partial otherwise. The clone's own target/ is always this run's.
# A build directory that holds only cache.sh's checkout marker (sourcing
# cache.sh makes it, as scripts/setup.sh does) is not yet a cache.
cache_entries() {
  local d
  {
    ls -1 "$READOUT_CACHE" 2>/dev/null | grep -vx cargo
    for d in "$READOUT_CACHE"/cargo/*/; do
      if [ -d "$d" ] && [ -n "$(ls -A "$d" | grep -vx .readout-checkout || true)" ]; then echo "cargo/$(basename "$d")"; fi
    done
  } | sort | tr '\n' ' '
}
caches_before=$(cache_entries)

# Mesa's Vulkan loader wants a runtime dir for its window-system probing.
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp/readout-xdg-$(id -u)}"
mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"

mkdir -p target
t_begin=$(date +%s)
names=()
secs=()
results=()
cpus=()
# record NAME SECONDS RESULT [CPU]: CPU is the share of the machine's
# cores busy during the step (from /proc/stat; 1 = every core all along),
# the profile that says whether running steps side by side could help.
record() { names+=("$1"); secs+=("$2"); results+=("$3"); cpus+=("${4:-}"); }
# "busy total" clock ticks of all cores since boot.
cpu_ticks() { awk '/^cpu /{t=0; for (i=2; i<=NF; i++) t+=$i; print t-$5-$6, t; exit}' /proc/stat 2>/dev/null || echo "0 0"; }
# cpu_share "BUSY0 TOTAL0": the busy share since that reading, 2 decimals.
cpu_share() {
  local b0 t0 b1 t1; read -r b0 t0 <<< "$1"; read -r b1 t1 < <(cpu_ticks)
  awk -v b=$((b1 - b0)) -v t=$((t1 - t0)) 'BEGIN{ if (t > 0) printf "%.2f", b/t; }'
}

# The timing table, printed and written as JSON, however the run ends.
report() {
  local rc=$? i rows=()
  # A run that stops before the venvs beside the gates were waited for
  # stops them (their process group).
  if [ -n "${venvs_pid:-}" ]; then kill -- "-$venvs_pid" 2>/dev/null || true; fi
  local total=$(( $(date +%s) - t_begin ))
  local verdict; verdict=$([ $rc = 0 ] && echo passed || echo "failed (exit $rc)")
  {
    printf '\n[test] %-10s %8s %5s  %s\n' step minutes cpu result
    for i in "${!names[@]}"; do
      printf '[test] %-10s %8s %5s  %s\n' "${names[$i]}" "$(awk -v s="${secs[$i]}" 'BEGIN{printf "%.1f", s/60}')" "${cpus[$i]}" "${results[$i]}"
      rows+=("${names[$i]}" "${secs[$i]}" "${results[$i]}" "${cpus[$i]}")
    done
    printf '[test] %-10s %8s  %s\n' total "$(awk -v s="$total" 'BEGIN{printf "%.1f", s/60}')" "$verdict"
  } >&2
  if node -e '
    const [commit, parts, before, after, finished, total, rc, ...rows] = process.argv.slice(1);
    const had = new Set(before.split(" ").filter(Boolean));
    const cache = Object.fromEntries(after.split(" ").filter(Boolean).map((e) => [e, had.has(e) ? "hit" : "built"]));
    const built = Object.values(cache).filter((v) => v === "built").length;
    const caches = built === 0 ? "warm" : built === Object.keys(cache).length ? "cold" : "partial";
    const steps = [];
    for (let i = 0; i < rows.length; i += 4) {
      steps.push({ name: rows[i], seconds: Number(rows[i + 1]), result: rows[i + 2], ...(rows[i + 3] ? { cpu: Number(rows[i + 3]) } : {}) });
    }
    // The results header (bench/runners/result_file.mjs), so the record
    // can be kept under bench/results/test-suite/ as it is.
    const lib = require("url").pathToFileURL(require("path").resolve("bench/runners/result_file.mjs"));
    import(lib).then(({ header }) => {
      const out = { ...header("test-suite", "", { command: `bash scripts/test.sh ${parts}` }), commit, parts: parts.split(" "), caches, cache, finished,
        steps, total_s: Number(total), passed: rc === "0", cpus: require("os").cpus().length };
      require("fs").writeFileSync("target/test-times.json", JSON.stringify(out, null, 2) + "\n");
    });
  ' "$(git rev-parse HEAD 2>/dev/null || echo unknown)" "${parts[*]}" "$caches_before" "$(cache_entries)" "$(date -u +%FT%TZ)" "$total" "$rc" "${rows[@]}"; then
    echo "[test] the same table as JSON: target/test-times.json" >&2
  fi
}
trap report EXIT

# step NAME CMD...: runs CMD, timed, under NAME in the table. CMD runs in a
# subshell with errexit on and outside any condition: a function run as
# `if f` or `f || x` ignores set -e, so a failing command inside it would not
# stop it and only its last command's status would count. For the same
# reason step itself is never called as a condition.
step() {
  local name=$1 rc t0 c0; shift
  t0=$(date +%s) c0=$(cpu_ticks)
  echo "[test] $name" >&2
  set +e
  (set -e; "$@")
  rc=$?
  set -e
  if [ $rc = 0 ]; then
    record "$name" $(( $(date +%s) - t0 )) ok "$(cpu_share "$c0")"
  else
    record "$name" $(( $(date +%s) - t0 )) "failed (exit $rc)" "$(cpu_share "$c0")"
    return $rc
  fi
}

# The prerequisite steps, each run once however many parts need it.
done_setup=0 done_models=0 done_pkg=0 done_fixtures=0
need_setup() {
  [ $done_setup = 1 ] && return; done_setup=1
  # Disk (checked by scripts/setup.sh first): target/ 1.5 GB, the tiny
  # models and their variants 0.2 GB, the tests' scratch copies under /tmp;
  # with the rust part, the Hugging Face venv 5.8 GB more (its own torch).
  # --hf: the venv of Hugging Face's export path, for the tiny conversion
  # the models step runs for the rust part (tests/hf_layout.rs).
  local hf=() gb=4; wants rust && hf=(--hf) gb=10
  # Every part but the gates runs Python first (the models step, or the python part).
  if wants gates && printf '%s\n' "${parts[@]}" | grep -qvx gates; then
    # The venvs (pip: one core busy of two, and the network) are made beside
    # the gates (the compiler: both cores), and waited for before the first
    # step that runs Python (need_venvs). Their own process group, so a run
    # that stops early stops them too (a venv left unfinished is removed and
    # made again by the next call).
    step setup bash scripts/setup.sh --python "${hf[@]}" --disk-gb "$gb" --defer-venvs
    venvs_t0=$(date +%s) venvs_c0=$(cpu_ticks)
    echo "[test] venvs, beside the gates" >&2
    # It writes when it ended ("epoch busy total") for its row in the table.
    rm -f target/.venvs.end
    setsid bash -c "$(declare -f cpu_ticks)"'
      bash scripts/setup.sh --python "$@" 2>&1 | sed -u "s/^/[venvs] /"; rc=${PIPESTATUS[0]}
      echo "$(date +%s) $(cpu_ticks)" > target/.venvs.end; exit "$rc"' venvs "${hf[@]}" &
    venvs_pid=$!
  else
    step setup bash scripts/setup.sh --python "${hf[@]}" --disk-gb "$gb"
  fi
}
# need_venvs: the venvs started beside the gates, waited for and timed.
venvs_pid=""
need_venvs() {
  need_setup
  [ -n "$venvs_pid" ] || return 0
  local pid=$venvs_pid rc=0 t1 b1 n1 b0 n0 c=""; venvs_pid=""
  wait "$pid" || rc=$?
  # Its own seconds and share of the cores, from its start to its end.
  t1=$(date +%s) b1="" n1=""
  [ -f target/.venvs.end ] && read -r t1 b1 n1 < target/.venvs.end
  rm -f target/.venvs.end
  read -r b0 n0 <<< "$venvs_c0"
  if [ -n "$n1" ] && [ "$n1" -gt "$n0" ]; then
    c=$(awk -v b=$((b1 - b0)) -v t=$((n1 - n0)) 'BEGIN{printf "%.2f", b/t}')
  fi
  if [ $rc = 0 ]; then record venvs $((t1 - venvs_t0)) ok "$c"
  else record venvs $((t1 - venvs_t0)) "failed (exit $rc)" "$c"; return $rc; fi
}
need_models() {
  [ $done_models = 1 ] && return; done_models=1
  need_venvs
  step models models_step
}
models_step() {
  .venv/bin/python modelgen/build_models.py tiny
  # Hugging Face's own conversion (Optimum, the MatMulNBits quantiser,
  # float16) of the same tiny weights, in the onnx-community layout.
  if wants rust; then .venv-hf/bin/python modelgen/hf_onnx.py --tiny; fi
  cargo build --locked --bin readout
  local readout=target/debug/readout tiny=models/qwen3-tiny-random-q4
  # The bench page's tiny run sweeps the fp32 variants (transformers.js cannot
  # run GatherBlockQuantized on its WASM backend); the Deno tests run float16
  # WebGPU on every cut of the q4f16 file.
  "$readout" variants "$tiny" models/qwen3-tiny-random-fp32 models/qwen3-tiny-random-q4f16
  bash scripts/catalog.sh "$readout"
}
need_pkg() {
  [ $done_pkg = 1 ] && return; done_pkg=1
  need_setup
  step package package_step
}
package_step() {
  bash scripts/build_pkg.sh
  echo "[test] the package's types: tsc against tests/types/usage.ts" >&2
  node_modules/.bin/tsc -p tests/types
}
need_fixtures() {
  [ $done_fixtures = 1 ] && return; done_fixtures=1
  need_models
  step fixtures fixtures_step
}
fixtures_step() {
  local readout=target/debug/readout tiny=models/qwen3-tiny-random-q4
  # Trimmed, so the proof's many shorter-run trials read one row each.
  .venv/bin/python modelgen/broken_model.py "$tiny-trimmed" target/browser/broken-kv
  .venv/bin/python modelgen/broken_model.py --nan-on zebra "$tiny-trimmed" target/browser/nan-on-zebra
  .venv/bin/python modelgen/broken_model.py --unsupported "$tiny" target/browser/unsupported-op
  .venv/bin/python modelgen/broken_model.py --too-large "$tiny" target/browser/too-large
  .venv/bin/python modelgen/gqa_graph.py target/browser/gqa.onnx
  [ -f target/browser/tiny-hidden/model.onnx ] || "$readout" expose-hidden "$tiny" -o target/browser/tiny-hidden >/dev/null
}

# lint_wasm stable|threads [CARGO ARG...]: clippy's lints, warnings as
# errors, on a release wasm32 build of the crate with the package's flags.
# clippy-driver lints the crate and compiles it (a rustc with lints added);
# the dependencies compile with plain rustc into the package's units. The
# crate alone is built at opt-level 0, which gives it a unit of its own:
# cargo's fingerprint leaves the wrapper out, so a plain build of the same
# unit would otherwise count as linted. Its files go to target/lint*, so no
# package build's wasm is overwritten.
lint_wasm() {
  local kind=$1; shift
  local args=(build --locked --release --target wasm32-unknown-unknown --lib
    --config 'profile.release.package.readout.opt-level=0')
  # The toolchains of scripts/build_pkg.sh: the default one, and for the
  # threaded build the pinned nightly (NIGHTLY, THREAD_FLAGS: cache.sh
  # sources thread_flags.sh). CLIPPY_ARGS is how `cargo clippy` hands
  # clippy-driver the arguments after its `--` (joined by that separator).
  local cargo=(cargo) env=(CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings")
  if [ "$kind" = threads ]; then
    cargo=(cargo "+$NIGHTLY")
    env+=(RUSTC_WORKSPACE_WRAPPER="$(rustup which --toolchain "$NIGHTLY" clippy-driver)"
      RUSTFLAGS="$THREAD_FLAGS" CARGO_BUILD_BUILD_DIR="$NIGHTLY_BUILD_DIR")
    args+=(-Z build-std=panic_abort,std --target-dir target/lint-threads)
  else
    env+=(RUSTC_WORKSPACE_WRAPPER="$(rustup which clippy-driver)")
    args+=(--target-dir target/lint)
  fi
  echo "[test] clippy, wasm32 $kind build${1:+, $*}: warnings are errors" >&2
  env "${env[@]}" "${cargo[@]}" "${args[@]}" "$@"
}

gates_step() {
  cargo fmt --check
  cargo fmt --check --manifest-path python/Cargo.toml
  cargo clippy --locked --all-targets -- -D warnings
  cargo clippy --locked --manifest-path python/Cargo.toml -- -D warnings
  # The wasm32 lints: the package's three builds (scripts/build_pkg.sh) with
  # its own toolchains, flags and release profile, built through
  # clippy-driver as `cargo clippy` runs it. A check build compiles every
  # dependency a second time, in a form no build can use (3.7 min of the
  # cold gates at 715000f); these build them once for the package too, and
  # after the main job find them built. See lint_wasm.
  # The single build with the diagnostics entry points (a superset of the
  # product's code) and the plain SIMD128 kernel. One stable build only:
  # a cdylib's files have no hash in their names, so two feature sets in
  # one build directory would overwrite each other and compile again on
  # every run.
  lint_wasm stable --features diagnostics
  # The threaded build: the worker pool no other build compiles, and the
  # relaxed-SIMD kernel (the relaxed single build's, there by target feature).
  lint_wasm threads --features diagnostics
  node bench/runners/readme.mjs --check
  node scripts/check_docs.mjs
}

rust_step() {
  cargo test --locked -- --test-threads 2
}

# The Python package: maturin builds the extension (release, the engine's
# own code) and installs it into .venv; its tests compare it with the CLI.
python_step() {
  # One build: the wheel, installed into .venv for the tests, and installed
  # again by test_wheel.py into a fresh venv where the repository is not.
  READOUT_WHEEL=$(bash scripts/build_wheel.sh | tail -1)
  export READOUT_WHEEL
  .venv/bin/pip install --quiet --disable-pip-version-check --force-reinstall --no-deps "$READOUT_WHEEL"
  .venv/bin/python -m unittest discover -s python/tests -v
}

# The package in Node.js (no browser): installed into a scratch folder, scoring on disk's models.
node_step() {
  node --test --test-concurrency=1 tests/node/*.test.mjs
}

# The browser tests, one node --test run per browser.
chromium_files() { ls tests/browser/*.test.mjs | grep -v '/deno\.test\.mjs$'; }
# In two lanes these Chromium files run in the second, after Deno and
# Firefox, so that the lanes end together (at 9a93c30 the Chromium lane
# took 21.6 min, Deno then Firefox 15.6, and gpu_check 2.6 of Chromium's).
CHROMIUM_LATE=(tests/browser/gpu_check.test.mjs)
# chromium_step [FILE...]: the files given, or every Chromium file.
chromium_step() {
  local files=("$@")
  [ ${#files[@]} -gt 0 ] || mapfile -t files < <(chromium_files)
  node --test --test-concurrency=1 "${files[@]}"
}
deno_step() {
  node --test --test-concurrency=1 tests/browser/deno.test.mjs
}
firefox_step() {
  node --test --test-concurrency=1 tests/firefox/*.test.mjs
}

if wants gates; then
  need_setup
  step gates gates_step
fi
if wants rust; then
  need_models
  step rust rust_step
fi
if wants python; then
  need_models
  step python python_step
fi
if wants package; then
  need_pkg
  need_models
  step node node_step
fi
if wants chromium || wants deno; then
  need_pkg
  need_fixtures
fi
if wants firefox; then
  need_pkg
  need_models
fi
# The browser parts asked for. Two or more run in two lanes side by side:
# Chromium in one, Deno then Firefox (then CHROMIUM_LATE) in the other. Each
# lane keeps about one core busy (SwiftShader, lavapipe), so the two fill
# both cores (0.99-1.00 busy at 1bccc48). Each part's lines carry its name;
# every part is waited for, and any one's failure fails the run.
browser=()
for p in chromium deno firefox; do if wants "$p"; then browser+=("$p"); fi; done
# run_part NAME TAG [ARG...]: NAME's step with ARGs, its lines prefixed with
# NAME, "seconds exit cpu" in target/.TAG.time.
run_part() {
  local p=$1 tag=$2 t0 c0 rc=0; shift 2
  t0=$(date +%s) c0=$(cpu_ticks)
  # (Each step is one command, so `|| rc=$?` loses no failure inside it.)
  ( set -o pipefail; "${p}_step" "$@" 2>&1 | sed -u "s/^/[$p] /" ) || rc=$?
  echo "$(( $(date +%s) - t0 )) $rc $(cpu_share "$c0")" > "target/.$tag.time"
  return $rc
}
if [ ${#browser[@]} -gt 1 ]; then
  lane_a=(); lane_b=()
  for p in "${browser[@]}"; do
    if [ "$p" = chromium ]; then lane_a+=("$p"); else lane_b+=("$p"); fi
  done
  if [ ${#lane_a[@]} -eq 0 ]; then lane_a=("${lane_b[0]}"); lane_b=("${lane_b[@]:1}"); fi
  early=() late=()
  if wants chromium; then
    mapfile -t early < <(chromium_files | grep -vxF -f <(printf '%s\n' "${CHROMIUM_LATE[@]}"))
    late=("${CHROMIUM_LATE[@]}")
  fi
  then_late=""; [ ${#late[@]} -gt 0 ] && then_late=" then chromium ${late[*]}"
  echo "[test] ${lane_a[*]} beside ${lane_b[*]}$then_late" >&2
  # lane PART...: each part in turn (Chromium here without its late files).
  lane() {
    local rc=0 p
    for p in "$@"; do
      if [ "$p" = chromium ]; then run_part chromium chromium "${early[@]}" || rc=1
      else run_part "$p" "$p" || rc=1; fi
    done
    return $rc
  }
  ( lane "${lane_a[@]}" ) &
  pid_a=$!
  ( rc=0; lane "${lane_b[@]}" || rc=1
    if [ ${#late[@]} -gt 0 ]; then run_part chromium chromium-late "${late[@]}" || rc=1; fi
    exit $rc ) &
  pid_b=$!
  rc_a=0; wait $pid_a || rc_a=$?
  rc_b=0; wait $pid_b || rc_b=$?
  for p in "${browser[@]}"; do
    s=0 r="never ran" c=""
    [ -f "target/.$p.time" ] && read -r s r c < "target/.$p.time"
    if [ "$p" = chromium ] && [ -f target/.chromium-late.time ]; then
      # Chromium's seconds are both its runs'; its share, the first's.
      read -r s2 r2 _ < target/.chromium-late.time
      s=$((s + s2)); [ "$r" = 0 ] && r=$r2
      rm -f target/.chromium-late.time
    fi
    record "$p" "$s" "$([ "$r" = 0 ] && echo ok || echo "failed (exit $r)")" "$c"
    rm -f "target/.$p.time"
  done
  [ $rc_a = 0 ] && [ $rc_b = 0 ]
else
  for p in "${browser[@]}"; do step "$p" "${p}_step"; done
fi
