# Sourced by scripts/setup.sh, scripts/build_pkg.sh and scripts/test.sh: the
# threaded wasm build's toolchain and RUSTFLAGS, in one place so the clippy
# gate checks what ships.
# The nightly is pinned by date: `-Z build-std` and the wasm threads flags
# are unstable, so a later nightly could change what builds or ships.
# shellcheck disable=SC2034
NIGHTLY=nightly-2026-10-30
# RUSTFLAGS replaces .cargo/config.toml's, so simd128 is repeated; relaxed
# SIMD gives the kernels an integer dot product (every browser with wasm
# threads and cross-origin isolation in Chromium's line has had it since
# 114; the single-thread build is the fallback). Since Rust 1.92 atomics no
# longer imply shared memory, so the linker is asked for it, a 4 GiB maximum
# (wasm32's whole range: the default 1 GiB is smaller than Gemma's buffers)
# and the TLS exports wasm-bindgen's thread start-up needs.
# shellcheck disable=SC2034
THREAD_FLAGS="-C target-feature=+atomics,+bulk-memory,+mutable-globals,+simd128,+relaxed-simd \
-C link-arg=--shared-memory -C link-arg=--max-memory=4294967296 -C link-arg=--import-memory \
-C link-arg=--export=__wasm_init_tls -C link-arg=--export=__tls_size \
-C link-arg=--export=__tls_align -C link-arg=--export=__tls_base"
