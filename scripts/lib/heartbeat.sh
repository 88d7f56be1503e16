# Sourced by the long scripts: `heartbeat LABEL CMD...` runs CMD and, while it
# runs, prints "LABEL: still running (N s)" to stderr every 30 s, so a step
# that prints nothing for a minute (a link with LTO, wasm-opt) does not look
# hung. CMD's exit status is returned.
heartbeat() {
  local label=$1; shift
  local t0=$SECONDS rc=0
  "$@" &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    local i
    for i in $(seq 1 30); do
      kill -0 "$pid" 2>/dev/null || break 2
      sleep 1
    done
    printf '%s: still running (%d s)\n' "$label" $((SECONDS - t0)) >&2
  done
  wait "$pid" || rc=$?
  return $rc
}
