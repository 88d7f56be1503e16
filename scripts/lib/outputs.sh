# Sourced after scripts/lib/cache.sh by the scripts whose builds take
# minutes and write a few files (the npm package's six wasm builds, the
# Python wheel): those files kept in the machine's cache under a key made of
# the contents of every file the build reads and its tools' versions, so a
# clone whose inputs equal an earlier build's copies its outputs instead of
# compiling again. cargo cannot do this for a new clone: it takes a crate as
# changed when its files are newer than the artifact, and a clone's files
# are all new. An input missing from the key would serve a stale build, so
# each caller names whole folders (src/, js/, .cargo/), not single files.
#   outputs_key NAME TOOLS PATH...   prints NAME-<16 hex>, or nothing where
#                                    there is no git work tree to list inputs
#   outputs_restore ENTRY OUT...     copies OUT... back from the entry;
#                                    fails when it is absent or incomplete
#   outputs_store ENTRY OUT...       keeps OUT... as the entry, whole or not
#                                    at all, and the two newest NAME-* only
outputs_key() {
  local name=$1 tools=$2 sum
  shift 2
  git rev-parse --is-inside-work-tree >/dev/null 2>&1 || return 0
  # Tracked and untracked-not-ignored files: a developer's uncommitted edit
  # changes the key as a commit does. Paths are relative, so every clone of
  # the same tree gets the same key.
  sum=$({
    git ls-files -co --exclude-standard -z -- "$@" | sort -zu | while IFS= read -r -d '' f; do
      [ -f "$f" ] && sha256sum "$f"
    done
    printf '%s\n' "$tools"
  } | sha256sum | cut -c1-16)
  echo "$name-$sum"
}

outputs_restore() {
  local entry=$1 out
  shift
  [ -n "$entry" ] && [ -f "$READOUT_CACHE/$entry/complete" ] || return 1
  for out in "$@"; do
    [ -e "$READOUT_CACHE/$entry/$out" ] || return 1
  done
  for out in "$@"; do
    rm -rf "$out" && mkdir -p "$(dirname "$out")" && cp -a "$READOUT_CACHE/$entry/$out" "$out"
  done
}

outputs_store() {
  local entry=$1 out tmp name old
  shift
  [ -n "$entry" ] || return 0
  mkdir -p "$READOUT_CACHE"
  # A hidden folder until complete: an interrupted store leaves nothing that
  # a later run could take for an entry (nor that the test record lists).
  tmp=$(mktemp -d "$READOUT_CACHE/.$entry.XXXXXX")
  for out in "$@"; do
    mkdir -p "$tmp/$(dirname "$out")" && cp -a "$out" "$tmp/$out"
  done
  touch "$tmp/complete"
  rm -rf "${READOUT_CACHE:?}/$entry" && mv "$tmp" "$READOUT_CACHE/$entry"
  # Only the entries this helper made (a `complete` marker) are pruned.
  name=${entry%-*}
  for old in $(ls -1dt "$READOUT_CACHE/$name"-*/complete 2>/dev/null | tail -n +3); do
    rm -rf "$(dirname "$old")"
  done
}
