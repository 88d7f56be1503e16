// Where a cold test command's compile minutes go (issue 61): every cargo
// build the test command runs, in its order, into a build directory and a
// target directory that start empty (a temporary folder; the machine's
// caches are not touched), each timed, with the crates it compiled and which
// of them an earlier build had already compiled (the same crate and version,
// compiled again for another profile, target, mode or flags).
//   node bench/runners/cold_builds.mjs [--out FILE] [--only NAME,...]
// Downloads come from cargo's registry cache as they are: this measures
// compiling, not fetching.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT } from "../../harness/serve.mjs";
import { option } from "../../harness/browser.mjs";
import { resultPath, writeResult } from "./result_file.mjs";

const args = process.argv.slice(2);
const out = resultPath("cold_builds", "cold-builds", "cold-builds", option(args, "--out"));
const only = option(args, "--only")?.split(",");

// The test command's builds (scripts/test.sh and what it runs), in order.
// `threads`: the nightly threaded build's toolchain, flags and build directory.
const BUILDS = [
  ["gates: clippy, native, every target", ["clippy", "--locked", "--all-targets"]],
  ["gates: clippy, python crate", ["clippy", "--locked", "--manifest-path", "python/Cargo.toml"]],
  ["gates: clippy, wasm32", ["clippy", "--locked", "--target", "wasm32-unknown-unknown", "--lib"]],
  ["gates: clippy, wasm32 diagnostics relaxed", ["clippy", "--locked", "--target", "wasm32-unknown-unknown", "--lib", "--features", "diagnostics,relaxed-simd"]],
  ["gates: clippy, wasm32 threads diagnostics", ["clippy", "--locked", "--target", "wasm32-unknown-unknown", "--lib", "--features", "diagnostics"], { threads: true }],
  ["models: the CLI (dev)", ["build", "--locked", "--bin", "readout"]],
  ["rust: cargo test's binaries", ["test", "--locked", "--no-run"]],
  ["python: the wheel's crate (release)", ["build", "--locked", "--release", "--manifest-path", "python/Cargo.toml"]],
  ["package: wasm32 (release)", ["build", "--locked", "--release", "--target", "wasm32-unknown-unknown", "--lib"]],
  ["package: wasm32 threads (release)", ["build", "--locked", "--release", "--target", "wasm32-unknown-unknown", "--lib"], { threads: true }],
  ["package: wasm32 diagnostics (release)", ["build", "--locked", "--release", "--target", "wasm32-unknown-unknown", "--lib", "--features", "diagnostics"]],
  ["package: wasm32 relaxed (release)", ["build", "--locked", "--release", "--target", "wasm32-unknown-unknown", "--lib", "--features", "relaxed-simd"]],
  ["package: wasm32 diagnostics relaxed (release)", ["build", "--locked", "--release", "--target", "wasm32-unknown-unknown", "--lib", "--features", "diagnostics,relaxed-simd"]],
  ["package: wasm32 threads diagnostics (release)", ["build", "--locked", "--release", "--target", "wasm32-unknown-unknown", "--lib", "--features", "diagnostics"], { threads: true }],
];

const scratch = mkdtempSync(join(tmpdir(), "readout-cold-builds-"));
/** Runs one build in bash (so the threaded one sources its flags from the one place), returns seconds and the crates compiled. */
function run(cargoArgs, { threads = false }) {
  const q = (s) => `'${s.replaceAll("'", "'\\''")}'`;
  const script = threads
    ? `source scripts/lib/thread_flags.sh; RUSTFLAGS="$THREAD_FLAGS" CARGO_BUILD_BUILD_DIR=${q(join(scratch, "build-threads"))} exec cargo "+$NIGHTLY" ${cargoArgs.map(q).join(" ")} -Z build-std=panic_abort,std --target-dir ${q(join(scratch, "target-threads"))}`
    : `CARGO_BUILD_BUILD_DIR=${q(join(scratch, "build"))} CARGO_TARGET_DIR=${q(join(scratch, "target"))} exec cargo ${cargoArgs.map(q).join(" ")}`;
  return new Promise((done, fail) => {
    const t0 = performance.now();
    const child = spawn("bash", ["-c", script], { cwd: ROOT, stdio: ["ignore", "ignore", "pipe"] });
    let err = "";
    child.stderr.on("data", (d) => {
      err += d;
      process.stderr.write(d);
    });
    child.on("close", (code) => {
      if (code !== 0) return fail(new Error(`cargo ${cargoArgs.join(" ")}: exit ${code}`));
      const crates = [...err.matchAll(/^\s*(?:Compiling|Checking) (\S+) v(\S+)/gm)].map((m) => `${m[1]}@${m[2]}`);
      done({ seconds: (performance.now() - t0) / 1000, crates });
    });
  });
}

const builds = [];
const seen = new Set();
try {
  for (const [name, cargoArgs, opts = {}] of BUILDS) {
    if (only && !only.some((o) => name.startsWith(o))) continue;
    console.error(`[cold_builds] ${name}: cargo ${cargoArgs.join(" ")}`);
    const r = await run(cargoArgs, opts);
    const again = r.crates.filter((c) => seen.has(c));
    r.crates.forEach((c) => seen.add(c));
    builds.push({ name, command: `cargo ${cargoArgs.join(" ")}${opts.threads ? " (nightly, threads flags, build-std)" : ""}`, seconds: Number(r.seconds.toFixed(1)), compiled: r.crates.length, compiled_before: again.length, crates: r.crates });
    console.error(`[cold_builds] ${name}: ${r.seconds.toFixed(0)} s, ${r.crates.length} crates, ${again.length} of them compiled by an earlier build`);
  }
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
const total = builds.reduce((s, b) => s + b.seconds, 0);
writeResult(out, "cold-builds", "bench/runners/cold_builds.mjs", {
  note: "Empty build and target directories (a temporary folder), cargo's registry cache as it was; builds in the test command's order, one after another on this machine's cores.",
  total_s: Number(total.toFixed(1)),
  builds,
});
console.error(`[cold_builds] ${total.toFixed(0)} s in all; wrote ${out}`);
