// Where the cpu backend's time goes in Chromium: the sampling profiler (CDP
// Profiler domain) over our own kernels in wasm, on one thread (the page's
// own, so every sample is seen), while it scores the criteria of the
// authored states. Self time is summed per function and per part of the
// runtime. The native counterpart is `perf record` on `readout sweep
// --runtime own` (docs/measurements.md).
//
//   node bench/studies/cpu_profile.mjs [--model smollm2-135m-instruct-q4f16]
//        [--build single|threads] [--wasm FILE] [--states 2] [--rounds 3]
//        [--threads 1] [--out FILE]
//
// --build threads (the default): the threaded build (relaxed SIMD) at one
// thread; --build single: the single-thread SIMD128 build. The package's
// copies have lost their names to wasm-opt, so this binds the build as
// cargo last left it (the same code from LLVM, not shrunk by binaryen;
// scripts/build_pkg.sh builds the diagnostics variant last) into
// target/bench/pkg-profile[-threads]/ first. --wasm names another build of
// the same kind to bind instead (two builds profiled in turn: an A/B in
// Chromium). --threads N (threaded build only): the kernels split over the
// page's thread and N - 1 workers; the time per criterion is then the
// 2-thread figure an A/B wants, but the profiler samples the page's thread
// only, so the parts leave out the workers' share.
// --shared-prefix N: instead of criteria, the shared-prefix benchmark's
// first N states (target/shared-prefix-texts.json, from `cargo bench
// --bench shared_prefix`; the model it names unless --model says), each
// prefilled whole and then each built on one shared prefix, profiled as two
// runs: where a state's time goes on each path, in ms a state.
// Needs `bash scripts/build_pkg.sh` run before and the model under models/.
// Writes bench/results/cpu-profile/<date>-cpu-profile-<model>.json unless --out says
// (…-cpu-profile-shared-prefix-<model>.json with --shared-prefix).
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import { serve, ROOT } from "../../harness/serve.mjs";
import { launch } from "../../harness/chromium.mjs";
import { option, sampled, selfTimes } from "../../harness/browser.mjs";
import { eightCriteriaStates } from "../runners/pack_common.mjs";
import { resultPath, writeResult } from "../runners/result_file.mjs";
import { OTHER, PARTS, partOf } from "./profile_parts.mjs";

const TEXTS = join(ROOT, "target/shared-prefix-texts.json");

function parseArgs(argv) {
  const a = [...argv];
  const take = (k, d) => option(a, k, d);
  const o = {
    model: take("--model", undefined),
    sharedPrefix: take("--shared-prefix", undefined),
    states: Number(take("--states", 2)),
    rounds: Number(take("--rounds", 3)),
    build: take("--build", "threads"),
    wasm: take("--wasm", undefined),
    out: take("--out", undefined),
    threads: Number(take("--threads", 1)),
  };
  if (a.length) throw new Error(`unknown arguments: ${a.join(" ")}`);
  if (!["single", "threads"].includes(o.build)) throw new Error(`--build: ${o.build} is not single or threads`);
  if (o.threads > 1 && o.build !== "threads") throw new Error(`--threads ${o.threads} needs --build threads`);
  if (o.sharedPrefix !== undefined) {
    if (!existsSync(TEXTS)) throw new Error(`${TEXTS} is missing: run \`cargo bench --bench shared_prefix\` first`);
    o.texts = JSON.parse(readFileSync(TEXTS, "utf8"));
    o.sharedPrefix = Number(o.sharedPrefix);
    o.model ??= o.texts.model.replace(/\/$/, "").split("/").pop();
  }
  o.model ??= "smollm2-135m-instruct-q4f16";
  for (const k of ["states", "rounds", "threads", ...(o.texts ? ["sharedPrefix"] : [])]) {
    if (!(Number.isInteger(o[k]) && o[k] >= 1)) throw new Error(`--${k}: ${o[k]} is not a positive integer`);
  }
  if (!existsSync(join(ROOT, "models", o.model, "model.onnx"))) throw new Error(`models/${o.model} is not built`);
  return o;
}


async function main() {
  const o = parseArgs(process.argv.slice(2));
  // Refused before anything runs, not after it, so a long profile is never lost
  // to a name already taken.
  const name = o.texts ? `cpu-profile-shared-prefix-${o.model}` : `cpu-profile-${o.model}-${o.build}`;
  const out = resultPath("cpu_profile", "cpu-profile", name, o.out);
  const threads = o.build === "threads";
  const cargoOut = threads ? "target/threads/wasm32-unknown-unknown/release/readout.wasm" : "target/wasm32-unknown-unknown/release/readout.wasm";
  const wasm = o.wasm ? resolve(o.wasm) : join(ROOT, cargoOut);
  if (!existsSync(wasm)) throw new Error(`${wasm} is missing: run bash scripts/build_pkg.sh`);
  const dir = threads ? "target/bench/pkg-profile-threads" : "target/bench/pkg-profile";
  execFileSync("wasm-bindgen", ["--target", "web", "--out-dir", join(ROOT, dir), "--out-name", "readout", wasm], { stdio: "inherit" });
  const module = `/${dir}/readout.js`;
  const kind = threads ? "the threaded build (relaxed SIMD)" : "the single-thread build";
  const build = `${kind}, ${wasm} (${statSync(wasm).mtime.toISOString()}), bound by wasm-bindgen without wasm-opt, ${o.threads} thread${o.threads === 1 ? "" : "s"}`;
  const server = await serve(0);
  const base = `http://127.0.0.1:${server.address().port}`;
  const browser = await launch({ webgpu: false });
  let doc;
  try {
    const page = await browser.newPage();
    await page.goto(`${base}/pkg/package.json`);
    const what = o.texts
      ? `${o.sharedPrefix} states of the shared-prefix benchmark, each prefilled whole (one run) and built on one shared prefix (another run; the prefix's own prefill not counted)`
      : "scoreAll scores each state's criteria (letters, packed)";
    doc = {
      what: `Chromium sampling profiler (0.5 ms) over the cpu backend (our kernels in wasm, ${o.threads} thread${o.threads === 1 ? "" : "s"}; the page's thread sampled) while ${what}; self time in percent of samples`,
      model: o.model,
      build,
      threads: o.threads,
      ...(o.texts ? await sharedPrefixProfile(page, o, module) : await criteriaProfile(page, o, module)),
    };
  } finally {
    await browser.close();
    server.close();
  }
  writeResult(out, "cpu-profile", "bench/studies/cpu_profile.mjs", doc);
  for (const [label, r] of o.texts ? Object.entries(doc.paths) : [["", doc]]) {
    for (const [k, v] of Object.entries(r.parts)) console.error(`cpu_profile: ${label ? `${label}: ` : ""}${v.toFixed(1).padStart(5)} %  ${k}`);
  }
  console.error(o.texts
    ? `cpu_profile: ${Object.entries(doc.paths).map(([k, r]) => `${k} ${r.ms_per_state} ms a state`).join(", ")}; wrote ${out}`
    : `cpu_profile: ${doc.ms_per_criterion} ms per criterion; wrote ${out}`);
}

/** A profile's self time by part, in percent of its samples and in ms,
 * and its 20 heaviest functions. */
function parted(profile) {
  const self = selfTimes(profile);
  const total = Object.values(self).reduce((a, b) => a + b, 0);
  const ms = Object.fromEntries([...PARTS.map(([k]) => [k, 0]), [OTHER, 0]]);
  for (const [name, t] of Object.entries(self)) ms[partOf(name)] += t;
  const pct = (t) => +((t / total) * 100).toFixed(1);
  // Names without their crate hash, so two builds' profiles compare.
  const short = (name) => name.replace(/\[[0-9a-f]{16}\]/g, "");
  return {
    sampled_ms: +total.toFixed(0),
    ms,
    parts: Object.fromEntries(Object.entries(ms).map(([k, v]) => [k, pct(v)])),
    top: Object.entries(self)
      .sort((a, b) => b[1] - a[1])
      .slice(0, 20)
      .map(([k, v]) => [short(k), pct(v)]),
  };
}

async function criteriaProfile(page, o, module) {
  const states = eightCriteriaStates().slice(0, o.states);
  const runtime = await page.evaluate(
    async ({ source, states, module, threads }) => {
      const { default: init, Engine } = await import(module);
      await init();
      const engine = await Engine.load(source, { backend: "cpu", threads });
      const prefilled = [];
      for (const s of states) prefilled.push([await engine.prefill(s), s.criteria]);
      // One warm call per state before the profiler starts.
      for (const [st, cs] of prefilled) await st.scoreAll(cs);
      window.round = async () => {
        let criteria = 0;
        for (const [st, cs] of prefilled) criteria += (await st.scoreAll(cs)).length;
        return criteria;
      };
      return engine.info().runtime;
    },
    { source: `/models/${o.model}/`, states, module, threads: o.threads },
  );
  const { result: timed, profile } = await sampled(page, 500, async (rounds) => {
    const t = performance.now();
    let criteria = 0;
    for (let i = 0; i < rounds; i++) criteria += await window.round();
    return { ms: performance.now() - t, criteria };
  }, o.rounds);
  const { ms, ...p } = parted(profile);
  return { runtime, states: states.length, rounds: o.rounds, criteria: timed.criteria, ms_per_criterion: +(timed.ms / timed.criteria).toFixed(1), ...p };
}

/** The two paths of the shared-prefix benchmark, each its own profile, so
 * what a state built on the prefix spends beyond its tokens shows by part. */
async function sharedPrefixProfile(page, o, module) {
  const { instruction } = o.texts;
  const evidence = o.texts.evidence.slice(0, o.sharedPrefix);
  const runtime = await page.evaluate(
    async ({ source, module, threads, instruction, evidence }) => {
      const { default: init, Engine } = await import(module);
      await init();
      const engine = await Engine.load(source, { backend: "cpu", threads });
      const style = { mode: "letters", prompt: "plain" };
      const prefix = await engine.prefix({ instruction }, style);
      const build = (path, e) => (path === "whole" ? engine.prefill({ instruction, evidence: e }, style) : prefix.prefill({ evidence: e }));
      // Each path once before the profiler starts.
      for (const path of ["whole", "on_prefix"]) await (await build(path, evidence[0])).dispose();
      window.path = async (path) => {
        const t = performance.now();
        let tokens = 0;
        for (const e of evidence) {
          const st = await build(path, e);
          tokens += st.tokens;
          await st.dispose();
        }
        return { ms: performance.now() - t, tokens };
      };
      window.prefixTokens = prefix.tokens;
      return engine.info().runtime;
    },
    { source: `/models/${o.model}/`, module, threads: o.threads, instruction, evidence },
  );
  const paths = {};
  for (const path of ["whole", "on_prefix"]) {
    const { result, profile } = await sampled(page, 500, (p) => window.path(p), path);
    const { ms, ...p } = parted(profile);
    const n = evidence.length;
    paths[path] = {
      ms_per_state: +(result.ms / n).toFixed(1),
      tokens_per_state: result.tokens / n,
      ms_per_state_by_part: Object.fromEntries(Object.entries(ms).map(([k, v]) => [k, +(v / n).toFixed(1)])),
      ...p,
    };
  }
  const prefixTokens = await page.evaluate(() => window.prefixTokens);
  const ratio = Object.fromEntries(Object.keys(paths.whole.ms_per_state_by_part).map((k) => [k, +(paths.whole.ms_per_state_by_part[k] / paths.on_prefix.ms_per_state_by_part[k]).toFixed(2)]));
  return { runtime, states: evidence.length, prefix_tokens: prefixTokens, paths, whole_over_on_prefix: { state: +(paths.whole.ms_per_state / paths.on_prefix.ms_per_state).toFixed(2), by_part: ratio } };
}

main().catch((e) => {
  console.error(`cpu_profile: ${e.stack ?? e}`);
  process.exit(1);
});
