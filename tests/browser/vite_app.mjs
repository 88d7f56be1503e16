// The Vite app kept in examples/vite-app, built as its users build it: the
// package packed by `npm pack`, the app's own dependencies from its lockfile
// (`npm ci`), the tarball installed beside them, then `npm run build` (which
// copies onnxruntime-web's run-time files into public/ort/ and runs
// `vite build`). The browser tests (Chromium here, Firefox in
// tests/firefox) each build their own copy, so their lanes never share one.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { cpSync, mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { OUT, ROOT, TINY } from "./lib.mjs";

const APP = join(ROOT, "examples", "vite-app");
// What the app's folder holds that a build made, not the app's sources.
const BUILT = new Set(["node_modules", "dist", "public"]);

/** Builds the app into `dir` (a scratch folder this function owns); returns the folder to serve, with the tiny model in it. */
export function buildViteApp(dir) {
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const run = (cmd, args, cwd) => execFileSync(cmd, args, { cwd, stdio: ["ignore", "inherit", "inherit"] });
  run("npm", ["pack", join(ROOT, "pkg"), "--pack-destination", dir, "--silent"], ROOT);
  const tarball = readdirSync(dir).find((f) => /^readout-.*\.tgz$/.test(f));
  if (!tarball) throw new Error(`npm pack left no readout-*.tgz in ${dir}`);
  const app = join(dir, "app");
  cpSync(APP, app, { recursive: true, filter: (src) => !BUILT.has(src.slice(APP.length + 1).split("/")[0]) });
  const npm = ["--no-audit", "--no-fund", "--prefer-offline", "--ignore-scripts"];
  run("npm", ["ci", ...npm], app);
  // As the app's users install it: the packed tarball, not a path into pkg/.
  run("npm", ["install", "--no-save", ...npm, join(dir, tarball)], app);
  run("npm", ["run", "build", "--silent"], app);
  const dist = join(app, "dist");
  cpSync(join(ROOT, "models", TINY), join(dist, "models", TINY), { recursive: true });
  return dist;
}

/** The state and criterion the app scores (examples/vite-app/src/main.js), for the native reference. */
export const APP_STATE = {
  evidence: "The kettle is on the stove and the water is boiling.",
  criteria: [{ id: "boiling", question: "Is the water boiling?", options: [{ id: "yes", description: "Yes" }, { id: "no", description: "No" }] }],
};

/**
 * Where the app runs: isolated, the threaded build on cpu; not isolated
 * (/plain/), the relaxed build (both browsers here have relaxed SIMD) on WASM.
 * Each build is found by Vite through the worker's literal imports.
 */
export const VITE_CASES = [
  { path: "/?backend=cpu", backend: "cpu", build: "threads", runtime: "own" },
  { path: "/plain/?backend=wasm", backend: "wasm", build: "relaxed", runtime: "ort" },
];

/** The native engine's decision on the app's state: `own` is our runtime (the cpu backend's), else ONNX Runtime. */
function nativeAppDecision(runtime) {
  mkdirSync(OUT, { recursive: true });
  const state = join(OUT, "vite-app-state.json");
  writeFileSync(state, JSON.stringify(APP_STATE));
  const args = ["score", "--model", `models/${TINY}`, "--state", state, "--threads", "2", "--runtime", runtime === "own" ? "own" : "ort"];
  return JSON.parse(execFileSync(join(ROOT, "target", "debug", "readout"), args, { cwd: ROOT, encoding: "utf8" })).decisions[0];
}

/** Asserts the app's `window.result` for case `c` against the native engine; returns a line saying what was held. */
export function checkViteResult(r, c, log = []) {
  assert.equal(r.error, undefined, `${c.path}: ${JSON.stringify(r.error)}\n${log.join("\n")}`);
  assert.equal(r.info.backend, c.backend);
  assert.equal(r.build, c.build);
  const native = nativeAppDecision(c.runtime);
  assert.equal(r.decision.answer, native.answer);
  const worst = Math.max(...native.probs.map((p, i) => Math.abs(p.p - r.decision.probs[i].p)));
  // The bounds the other browser tests hold each runtime to: our wasm kernels
  // against our native ones (other SIMD widths), onnxruntime-web against ONNX Runtime.
  const bound = c.runtime === "own" ? 2e-2 : 1e-3;
  assert.ok(worst <= bound, `${c.path}: max |Δp| ${worst} against native (bound ${bound})`);
  return `${c.path}: ${r.decision.answer}, backend ${c.backend}, ${c.build} build in a worker, max |Δp| vs native ${worst.toExponential(1)}`;
}
