# Sourced by the scripts: where this machine keeps what a new clone can reuse
# instead of rebuilding it. Every entry is keyed by what it was built from,
# marked complete only after its last step, and safe to delete (the scripts
# rebuild it):
#   venv-<key>/     the Python venv (scripts/setup.sh): the requirements and
#                   the Python version
#   models-<key>/   the tiny test models (modelgen/build_models.py tiny): the
#                   build scripts, the tokenizer and the builder's packages
#   pkg-<key>/      the npm package's wasm builds, wheel-<key>/ the Python
#                   wheel: every file they read and their tools' versions
#                   (scripts/lib/outputs.sh)
#   cargo/<key>/    cargo's build directory (build.build-dir, the compiled
#                   dependencies and intermediates; final artifacts stay in
#                   the clone's target/): the toolchain and Cargo.lock
# Empty every cache (the suite still passes, and rebuilds each):
#   rm -rf ~/.cache/readout; .venv/bin/pip cache purge (or rm -rf ~/.cache/pip);
#   rm -rf ~/.cargo/registry/cache ~/.cargo/registry/src ~/.cargo/registry/index
# shellcheck disable=SC2034
READOUT_CACHE="${READOUT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/readout}"
source "$(dirname "${BASH_SOURCE[0]}")/thread_flags.sh"
_lock=$(sha256sum Cargo.lock | cut -c1-12)
# shellcheck disable=SC2034
CARGO_BUILD_BUILD_DIR="${CARGO_BUILD_BUILD_DIR:-$READOUT_CACHE/cargo/$(rustc -V | awk '{print $2}')-$_lock}"
# The threaded build's nightly and RUSTFLAGS get a build directory of their
# own, so neither build evicts the other's.
# shellcheck disable=SC2034
NIGHTLY_BUILD_DIR="$READOUT_CACHE/cargo/$NIGHTLY-threads-$_lock"
unset _lock
# A build directory is shared by every checkout on the machine, and cargo
# takes the crate as fresh when this checkout's sources are older than the
# artifact there, whichever checkout built it: back in an older checkout
# after a clone had built, a build ran the clone's code (seen: a threaded
# package whose wasm-bindgen looked for the clone's package.json). So each
# build directory names the checkout that last used it, and another one
# marks its own crate changed (its sources' contents are untouched).
_readout_claim() {
  local dir=$1 me
  me=$(pwd -P)
  mkdir -p "$dir"
  if [ "$(cat "$dir/.readout-checkout" 2>/dev/null)" != "$me" ] && [ -f src/lib.rs ]; then
    touch src/lib.rs
    echo "$me" >"$dir/.readout-checkout"
  fi
}
_readout_claim "$CARGO_BUILD_BUILD_DIR"
_readout_claim "$NIGHTLY_BUILD_DIR"
unset -f _readout_claim
