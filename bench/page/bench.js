// The benchmark page (spec §11): the logit_cost sweep in the browser, the
// stock / trimmed / pruned+trimmed variants side by side, the same work done
// the way a transformers.js front-end does it, and the allowedMass readout
// against a JavaScript one, all measured in one run. The ids, medians and
// fits come from the package (core::sweep, shared with `readout sweep`).
//
// Query: model=<base id under /models/> backend=wasm|webgpu variants=stock,trimmed,pruned
//   lengths=1,8,16,32,64,96 runs=5 warmup=1 prefix=256 options=4 threads=N
//   transformers=1 mass=1 modes=1 autorun=1 build=single|relaxed|threads (index.html's import map)
//   wllama=<a GGUF's URL> (the same sweep through wllama on that file)
// When done: window.benchResult (the JSON) and window.benchDone = true.
import init from "/pkg-diagnostics/readout.js";
import { $, config, log, q, status } from "./common.js";
import { benchMass } from "./mass.js";
import { benchModes } from "./modes.js";
import { compare, render } from "./report.js";
import { sweepEngine, sweepTransformers, sweepWllama } from "./sweeps.js";
import { WLLAMA_GGUF } from "./wllama.js";


async function adapterInfo() {
  if (!navigator.gpu) return null;
  // Chromium's requestAdapter can answer null while its GPU process is busy
  // (seen once in the test command's Chromium lane, beside Deno and Firefox,
  // while the engine's own request got SwiftShader): asked again before the
  // result records no adapter.
  let a = null;
  for (let tries = 0; tries < 5 && !a; tries++) {
    if (tries) await new Promise((r) => setTimeout(r, 1000));
    a = await navigator.gpu.requestAdapter();
  }
  if (!a) return null;
  const i = a.info ?? {};
  return { vendor: i.vendor, architecture: i.architecture, device: i.device, description: i.description, features: [...a.features].sort() };
}

// A CPU implementation of WebGPU (Chromium's SwiftShader, or Mesa's lavapipe
// reached through Vulkan): its times are not a GPU's.
const CPU_ADAPTER = /swiftshader|llvmpipe|lavapipe/i;

async function runAll(cfg) {
  window.benchDone = false;
  $("error").hidden = true;
  status("running", "running…");
  const adapter = await adapterInfo();
  const emulated = cfg.backend === "webgpu" && CPU_ADAPTER.test(JSON.stringify({ ...adapter, features: undefined }));
  const result = {
    benchmark: "logit_cost", page: "bench/page/", date: new Date().toISOString().slice(0, 10),
    browser: navigator.userAgent, adapter, emulated, shader_f16: adapter ? adapter.features.includes("shader-f16") : null,
    cross_origin_isolated: self.crossOriginIsolated, threads: cfg.threads, build: q.get("build") ?? "single",
    model: cfg.model, backend: cfg.backend, prefix_tokens: cfg.prefix, lengths: cfg.lengths,
    runs: cfg.runs, warmup: cfg.warmup, options: cfg.options, variants: [],
  };
  for (const v of cfg.variants) {
    status("running", `sweeping ${v}…`);
    result.variants.push(await sweepEngine(cfg, v));
  }
  const stock = result.variants.find((v) => v.variant === "stock") ?? result.variants[0];
  if (cfg.transformers) {
    status("running", "the same work through transformers.js…");
    try {
      result.transformers = await sweepTransformers(cfg, stock.ids, stock.letter_ids);
    } catch (e) {
      result.transformers_error = String(e?.message ?? e);
      log(`transformers.js failed: ${result.transformers_error}`);
    }
  }
  if (cfg.wllama) {
    status("running", "the same work through wllama…");
    try {
      result.wllama = await sweepWllama(cfg, cfg.wllama);
    } catch (e) {
      result.wllama_error = String(e?.message ?? e);
      log(`wllama failed: ${result.wllama_error}`);
    }
  }
  for (const v of result.variants) delete v.ids;
  if (cfg.mass) {
    status("running", "allowedMass…");
    result.allowed_mass = await benchMass(cfg);
  }
  if (cfg.modes) {
    status("running", "readout modes…");
    result.modes = await benchModes(cfg);
  }
  result.ratios = compare(cfg, result.variants, result.transformers, result.wllama);
  render(result);
  window.benchResult = result;
  status("done", "done");
  window.benchDone = true;
  return result;
}

async function fillModels() {
  const res = await fetch("/models.json");
  if (!res.ok) throw new Error(`/models.json: HTTP ${res.status}; write it with \`readout catalog --models models -o models.json\` (scripts/bench.sh does)`);
  const catalog = await res.json();
  const bases = catalog.models.filter((m) => !m.trimmed && !m.pruned).map((m) => m.id);
  for (const id of bases) {
    const o = document.createElement("option");
    o.value = o.textContent = id;
    $("model").append(o);
  }
  const cfg = config();
  $("model").value = cfg.model;
  const f = $("form");
  f.backend.value = cfg.backend;
  f.lengths.value = cfg.lengths.join(",");
  f.runs.value = cfg.runs;
  f.transformers.checked = cfg.transformers;
  f.wllama.checked = !!cfg.wllama;
  f.mass.checked = cfg.mass;
  f.modes.checked = cfg.modes;
}

$("form").onsubmit = (ev) => {
  ev.preventDefault();
  const f = $("form");
  const p = new URLSearchParams({
    model: f.model.value, backend: f.backend.value, lengths: f.lengths.value, runs: f.runs.value,
    transformers: f.transformers.checked ? "1" : "0", mass: f.mass.checked ? "1" : "0",
    modes: f.modes.checked ? "1" : "0", autorun: "1",
  });
  if (f.wllama.checked) p.set("wllama", WLLAMA_GGUF);
  location.search = p.toString();
};

// A failure before the run (the package or the catalog) ends an autorun
// with its message too: a runner waiting for benchDone would otherwise
// wait out its whole timeout (an hour for bench/runners/run.mjs).
function showError(e) {
  const message = String(e?.message ?? e);
  $("error").textContent = message;
  $("error").hidden = false;
  return message;
}
let startError;
try {
  await init();
  await fillModels();
} catch (e) {
  startError = e;
  showError(e);
}
window.benchReady = true;
if (q.get("autorun") === "1") {
  try {
    if (startError) throw startError;
    await runAll(config());
  } catch (e) {
    window.benchError = showError(e);
    status("error", "failed");
    window.benchDone = true;
  }
  // A runner without a browser driver (bench/runners/gpu_check.py) takes the outcome
  // by POST, since it cannot read window.benchResult.
  const report = q.get("report");
  if (report) {
    const body = window.benchError ? { error: window.benchError, log: $("log").textContent.split("\n").slice(-30) } : window.benchResult;
    await fetch(report, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
  }
}
