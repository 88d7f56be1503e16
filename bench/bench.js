// The benchmark page (spec §11): the logit_cost sweep in the browser, the
// stock / trimmed / pruned+trimmed variants side by side, the same work done
// the way a transformers.js front-end does it, and the allowedMass readout
// against a JavaScript one, all measured in one run. The ids, medians and
// fits come from the package (core::sweep, shared with `readout sweep`).
//
// Query: model=<base id under /models/> backend=wasm|webgpu variants=stock,trimmed,pruned
//   lengths=1,8,16,32,64,96 runs=5 warmup=1 prefix=256 options=4 threads=N
//   transformers=1 mass=1 modes=1 autorun=1
// When done: window.benchResult (the JSON) and window.benchDone = true.
import init, { Engine, ReadoutBench, defaultThreads, limits, linearFit, median } from "/pkg-diagnostics/readout.js";
import { fitRatio, maxAbsDiff } from "./compare.mjs";

const ORT_BASE = "/node_modules/onnxruntime-web/dist/";
const TJS_ORT_BASE = "/node_modules/@huggingface/transformers/node_modules/onnxruntime-web/dist/";
const VARIANTS = { stock: "", trimmed: "-trimmed", pruned: "-trimmed-pruned" };
const COLORS = { stock: "#c2362f", trimmed: "#e0912f", pruned: "#2f6fdf", "transformers.js": "#7b4fb8", native: "#23865a" };
const MASS_WIDTH = 151936;

const $ = (id) => document.getElementById(id);
const q = new URLSearchParams(location.search);
const list = (s) => s.split(",").map((x) => x.trim()).filter(Boolean);

function log(line) {
  console.log(`[bench] ${line}`);
  $("log").textContent += line + "\n";
  $("log").scrollTop = 1e9;
}

function status(state, text) {
  $("status").dataset.state = state;
  $("status").textContent = text;
}

function config() {
  const num = (k, d) => (q.has(k) ? Number(q.get(k)) : d);
  return {
    model: q.get("model") ?? "smollm2-135m-instruct-q4",
    backend: q.get("backend") ?? "wasm",
    variants: list(q.get("variants") ?? "stock,trimmed,pruned"),
    lengths: q.has("lengths") ? list(q.get("lengths")).map(Number) : limits().sweep.suffixLengths,
    runs: num("runs", 5),
    warmup: num("warmup", 1),
    prefix: num("prefix", limits().sweep.prefixTokens),
    options: num("options", 4),
    threads: num("threads", defaultThreads(navigator.hardwareConcurrency || 1, self.crossOriginIsolated)),
    transformers: q.get("transformers") !== "0",
    mass: q.get("mass") !== "0",
    modes: q.get("modes") !== "0",
  };
}

async function timed(fn) {
  const t = performance.now();
  const r = await fn();
  return [performance.now() - t, r];
}

function softmax(xs) {
  const m = Math.max(...xs);
  const e = xs.map((x) => Math.exp(x - m));
  const s = e.reduce((a, b) => a + b, 0);
  return e.map((x) => x / s);
}


/** Per length: warm-up, then timed runs of `run(ids)`; `counter()` is read around each timed run for the bytes it read back. */
async function sweepLoop(cfg, suffixes, label, out, run, counter) {
  for (const [i, n] of cfg.lengths.entries()) {
    for (let w = 0; w < cfg.warmup; w++) await run(suffixes[i]);
    const s = [];
    let r, bytes = 0;
    for (let k = 0; k < cfg.runs; k++) {
      const before = counter();
      const [ms, res] = await timed(() => run(suffixes[i]));
      s.push(ms);
      bytes = counter() - before;
      r = res;
    }
    out.samples_ms[n] = s;
    out.median_ms.push(median(s));
    out.bytes_read_back.push(bytes);
    out.probs.push(r.probs);
    log(`${label}: n=${n} median ${median(s).toFixed(1)} ms, ${bytes} bytes read back`);
  }
  out.fit = linearFit(cfg.lengths, out.median_ms) ?? null;
}

// ---- this engine ------------------------------------------------------------

async function sweepEngine(cfg, variant) {
  const id = cfg.model + VARIANTS[variant];
  log(`${id}: loading on ${cfg.backend}`);
  const [loadMs, engine] = await timed(() => Engine.load(`/models/${id}`, { backend: cfg.backend, ortBase: ORT_BASE, threads: cfg.threads }));
  const info = engine.info();
  try {
    const { prefix, suffixes } = await engine.sweepIds(cfg.prefix, cfg.lengths);
    const [prefillMs, state] = await timed(() => engine.prefillIds(prefix));
    const out = { id, variant, backend: info.backend, backend_reason: info.backend_reason, readout: info.readout, run_limit: info.run_limit, load_ms: loadMs, prefill_ms: prefillMs, samples_ms: {}, median_ms: [], bytes_read_back: [], probs: [] };
    await sweepLoop(cfg, suffixes, id, out, (ids) => state.readIds(ids, cfg.options, false), () => engine.bytesReadBack());
    out.letter_columns = info.letters.columns.slice(0, cfg.options);
    out.letter_ids = info.letters.letter_ids.slice(0, cfg.options);
    out.ids = { prefix: Array.from(prefix), suffixes: suffixes.map((s) => Array.from(s)) };
    await state.dispose();
    return out;
  } finally {
    await engine.dispose();
  }
}

// ---- readout modes on the example state ---------------------------------------

/** ms per criterion of each readout mode on the stock model and the example
 *  state, measured in one run so their ratios compare like with like. The
 *  calibrated runs go cold (every baseline computed) then warm (cached). */
async function benchModes(cfg) {
  const id = cfg.model;
  const res = await fetch("/examples/state.json");
  if (!res.ok) throw new Error(`readout modes: /examples/state.json answered HTTP ${res.status}`);
  const example = await res.json();
  const engine = await Engine.load(`/models/${id}`, { backend: cfg.backend, ortBase: ORT_BASE, threads: cfg.threads });
  const rows = [];
  try {
    const info = engine.info();
    const state = await engine.prefill(example);
    const modes = [
      ["letters", { mode: "letters" }],
      ["cloze · sum", { mode: "cloze", clozeScore: "sum" }],
      ["cloze · sum · content-free (cold)", { mode: "cloze", calibration: "content-free" }],
      ["cloze · sum · content-free (cached)", { mode: "cloze", calibration: "content-free" }],
      ["letters · content-free (cold)", { mode: "letters", calibration: "content-free" }],
      ["letters · content-free (cached)", { mode: "letters", calibration: "content-free" }],
    ];
    for (const [what, opts] of modes) {
      if (!what.includes("cached")) await state.scoreAll(example.criteria, { mode: opts.mode }); // warm-up, no baseline
      const per = [];
      const bytes0 = engine.bytesReadBack();
      for (let k = 0; k < (what.includes("cold") ? 1 : cfg.runs); k++) {
        const [ms, ds] = await timed(() => state.scoreAll(example.criteria, opts));
        per.push(ms / ds.length);
      }
      // Bytes mapped back to the host per criterion: what the readout costs in transfers.
      const total = engine.bytesReadBack() - bytes0;
      const bytes = total / (per.length * example.criteria.length);
      rows.push({ what, options: opts, runs: per.length, ms_per_criterion: median(per), samples_ms: per, bytes_read_back: total, bytes_per_criterion: bytes });
      log(`modes: ${what}: ${median(per).toFixed(1)} ms per criterion, ${bytes.toFixed(0)} bytes read back per criterion`);
    }
    await state.dispose();
    const letters = rows[0].ms_per_criterion;
    for (const r of rows) r.over_letters = r.ms_per_criterion / letters;
    return { model: id, backend: info.backend, criteria: example.criteria.length, head_tokens: state.tokens, rows };
  } finally {
    await engine.dispose();
  }
}

// ---- the same work, the transformers.js way ----------------------------------

async function sweepTransformers(cfg, ids, letterIds) {
  const { AutoModelForCausalLM, Tensor, env } = await import("@huggingface/transformers");
  env.allowRemoteModels = false;
  env.allowLocalModels = true;
  env.localModelPath = "/models/";
  env.useBrowserCache = false;
  env.backends.onnx.wasm.wasmPaths = TJS_ORT_BASE;
  env.backends.onnx.wasm.numThreads = cfg.threads;
  const device = cfg.backend === "webgpu" ? "webgpu" : "wasm";
  log(`transformers.js: loading ${cfg.model} on ${device}`);
  // Our directories hold model.onnx + model.onnx.data; "fp32" only selects the
  // file name (no suffix). Input and KV dtypes come from the graph itself.
  const [loadMs, model] = await timed(() => AutoModelForCausalLM.from_pretrained(cfg.model, {
    device, dtype: "fp32", subfolder: "", model_file_name: "model", local_files_only: true,
    session_options: { externalData: [{ path: "model.onnx.data", data: "model.onnx.data" }] },
  }));
  const i64 = (arr) => new Tensor("int64", BigInt64Array.from(arr, BigInt), [1, arr.length]);
  const ones = (n) => new Tensor("int64", new BigInt64Array(n).fill(1n), [1, n]);
  const toPast = (outputs) => {
    const past = {};
    for (const [k, v] of Object.entries(outputs)) if (k.startsWith("present")) past[k.replace("present", "past_key_values")] = v;
    return past;
  };
  const dispose = (outputs) => {
    for (const [k, v] of Object.entries(outputs)) if (k.startsWith("present") && v.location === "gpu-buffer") v.dispose();
  };
  try {
    const P = ids.prefix.length;
    // transformers.js sizes an empty past from the graph's input shapes and
    // resolves the builder's symbolic `kv_cache_dim` to 0, which
    // GroupQueryAttention refuses; so the empty past is built from config.json.
    const c = model.config;
    const headDim = c.head_dim ?? c.hidden_size / c.num_attention_heads;
    const empty = {};
    for (const m of model.sessions.model.inputMetadata ?? []) {
      if (!m.name.startsWith("past_key_values.")) continue;
      const data = m.type === "float16" ? new Uint16Array(0) : new Float32Array(0);
      empty[m.name] = new Tensor(m.type, data, [1, c.num_key_value_heads, 0, headDim]);
    }
    const [prefillMs, pre] = await timed(() => model.forward({ input_ids: i64(ids.prefix), attention_mask: ones(P), past_key_values: empty }));
    const past = toPast(pre);
    const out = { id: cfg.model, variant: "transformers.js", device, empty_past: "built from config.json (transformers.js resolves the symbolic kv_cache_dim to 0)", load_ms: loadMs, prefill_ms: prefillMs, samples_ms: {}, median_ms: [], bytes_read_back: [], probs: [] };
    // Bytes copied out of onnxruntime-web, counted from the tensors each run returns.
    let copied = 0;
    const one = async (suffix) => {
      const o = await model.forward({ input_ids: i64(suffix), attention_mask: ones(P + suffix.length), past_key_values: past });
      // What a front-end does with the result: the letters at the last row.
      const logits = o.logits;
      const [, S, V] = logits.dims;
      const row = (S - 1) * V;
      const data = logits.data;
      const letters = letterIds.map((c) => Number(data[row + c]));
      copied += data.byteLength + Object.entries(o).filter(([k, v]) => k.startsWith("present") && v.location === "cpu").reduce((a, [, v]) => a + v.data.byteLength, 0);
      out.logits_dtype = logits.type;
      dispose(o);
      return { probs: softmax(letters) };
    };
    await sweepLoop(cfg, ids.suffixes, "transformers.js", out, one, () => copied);
    dispose(pre);
    return out;
  } finally {
    await model.dispose();
  }
}

// ---- allowedMass: the engine's readout against a JavaScript one ---------------

/** float32 → float16 bits (round to nearest even; finite inputs in range). */
function toHalf(v) {
  const f = new Float32Array([v]);
  const x = new Uint32Array(f.buffer)[0];
  const sign = (x >>> 16) & 0x8000;
  let exp = ((x >>> 23) & 0xff) - 127 + 15;
  let mant = x & 0x7fffff;
  if (exp <= 0) return sign;
  if (exp >= 31) return sign | 0x7c00;
  let h = sign | (exp << 10) | (mant >>> 13);
  const rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest === 0x1000 && (h & 1))) h++;
  return h;
}

/** float16 bits → number. */
function fromHalf(h) {
  const e = (h >>> 10) & 0x1f;
  const m = h & 0x3ff;
  const s = h & 0x8000 ? -1 : 1;
  if (e === 0) return s * m * 2 ** -24;
  if (e === 31) return m ? NaN : s * Infinity;
  return s * (1 + m / 1024) * 2 ** (e - 15);
}

/** The readout as a front-end would write it: two passes over the row, half decode, Math.exp. */
function jsReadout(bits, columns) {
  let max = -Infinity;
  for (let i = 0; i < bits.length; i++) {
    const v = fromHalf(bits[i]);
    if (v > max) max = v;
  }
  let sum = 0;
  for (let i = 0; i < bits.length; i++) sum += Math.exp(fromHalf(bits[i]) - max);
  const lse = max + Math.log(sum);
  const logits = columns.map((c) => fromHalf(bits[c]));
  return { logits, logSumExp: lse, allowedMass: logits.reduce((a, l) => a + Math.exp(l - lse), 0) };
}

async function benchMass(cfg) {
  // A deterministic row shaped like real logits: mostly small, a few large.
  let seed = 12345;
  const rnd = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32);
  const bits = new Uint16Array(MASS_WIDTH);
  for (let i = 0; i < MASS_WIDTH; i++) bits[i] = toHalf((rnd() + rnd() + rnd() - 1.5) * 6);
  const columns = [32, 33, 34, 35];
  for (const c of columns) bits[c] = toHalf(9 + rnd() * 3);
  const place = cfg.backend === "webgpu" ? "gpu" : "cpu";
  const rb = await ReadoutBench.create(bits, Uint32Array.from(columns), place);
  const reps = Math.max(cfg.runs * 4, 5);
  const sample = async (fn) => {
    await fn();
    const s = [];
    let r;
    for (let k = 0; k < reps; k++) {
      const [ms, res] = await timed(fn);
      s.push(ms);
      r = res;
    }
    return [s, r];
  };
  const [engineMs, e] = await sample(() => rb.run());
  const [jsMs, j] = await sample(async () => jsReadout(bits, columns));
  const out = {
    width: MASS_WIDTH, dtype: "float16", columns, engine_place: place,
    engine: { samples_ms: engineMs, median_ms: median(engineMs), allowed_mass: e.allowedMass, log_sum_exp: e.logSumExp },
    javascript: { samples_ms: jsMs, median_ms: median(jsMs), allowed_mass: j.allowedMass, log_sum_exp: j.logSumExp },
    abs_diff_allowed_mass: Math.abs(e.allowedMass - j.allowedMass),
    abs_diff_log_sum_exp: Math.abs(e.logSumExp - j.logSumExp),
  };
  out.javascript_over_engine = out.javascript.median_ms / out.engine.median_ms;
  log(`allowedMass over ${MASS_WIDTH} float16 logits: engine (${place}) ${out.engine.median_ms.toFixed(2)} ms, JavaScript ${out.javascript.median_ms.toFixed(2)} ms, ` +
    `|Δ allowedMass| ${out.abs_diff_allowed_mass.toExponential(2)}`);
  return out;
}

// ---- comparisons, table, plot ----------------------------------------------

function compare(cfg, variants, tjs) {
  const by = Object.fromEntries(variants.map((v) => [v.variant, v]));
  const ratios = [];
  const base = by.stock;
  for (const v of variants) {
    if (!base || v === base) continue;
    ratios.push({
      what: `${v.variant} vs stock`, faster: v.variant, slower: "stock",
      per_length: base.median_ms.map((m, i) => m / v.median_ms[i]),
      at_45_tokens_by_fit: fitRatio(base.fit, v.fit),
      max_abs_dp: Math.max(...v.probs.map((p, i) => maxAbsDiff(p, base.probs[i]))),
      bytes_read_back: { [v.variant]: v.bytes_read_back, stock: base.bytes_read_back },
    });
  }
  if (tjs) {
    for (const v of variants) {
      ratios.push({
        what: `${v.variant} vs transformers.js`, faster: v.variant, slower: "transformers.js",
        per_length: tjs.median_ms.map((m, i) => m / v.median_ms[i]),
        at_45_tokens_by_fit: fitRatio(tjs.fit, v.fit),
        max_abs_dp: Math.max(...v.probs.map((p, i) => maxAbsDiff(p, tjs.probs[i]))),
        bytes_read_back: { [v.variant]: v.bytes_read_back, "transformers.js": tjs.bytes_read_back },
      });
    }
  }
  return ratios;
}

function fmt(x, d = 1) {
  return x == null || Number.isNaN(x) ? "—" : x.toFixed(d);
}

function render(result) {
  const { lengths } = result;
  const rows = [...result.variants, ...(result.transformers ? [result.transformers] : [])];
  const t = $("table");
  t.innerHTML = `<thead><tr><th>variant</th>${lengths.map((n) => `<th>n=${n}</th>`).join("")}<th>fixed ms</th><th>ms / token</th><th>R²</th><th>bytes back (n=${lengths.at(-1)})</th></tr></thead>`;
  const body = document.createElement("tbody");
  for (const v of rows) {
    const tr = document.createElement("tr");
    tr.innerHTML = `<td><span class="swatch" style="background:${COLORS[v.variant]}"></span>${v.variant === "transformers.js" ? "transformers.js (stock)" : v.id}</td>` +
      v.median_ms.map((m) => `<td class="num">${fmt(m)}</td>`).join("") +
      `<td class="num">${fmt(v.fit?.fixed_ms)}</td><td class="num">${fmt(v.fit?.per_token_ms, 2)}</td><td class="num">${fmt(v.fit?.r2, 4)}</td><td class="num">${(v.bytes_read_back.at(-1) ?? 0).toLocaleString()}</td>`;
    body.append(tr);
  }
  t.append(body);
  const r = $("ratios");
  r.innerHTML = `<thead><tr><th>comparison (× faster)</th>${lengths.map((n) => `<th>n=${n}</th>`).join("")}<th>45 by fit</th><th>max |Δp|</th></tr></thead>`;
  const rb = document.createElement("tbody");
  for (const c of result.ratios) {
    const tr = document.createElement("tr");
    tr.innerHTML = `<td>${c.what}</td>${c.per_length.map((x) => `<td class="num">${fmt(x, 2)}×</td>`).join("")}<td class="num">${fmt(c.at_45_tokens_by_fit, 2)}×</td><td class="num">${c.max_abs_dp.toExponential(1)}</td>`;
    rb.append(tr);
  }
  if (result.allowed_mass) {
    const m = result.allowed_mass;
    const tr = document.createElement("tr");
    tr.innerHTML = `<td>allowedMass over ${m.width.toLocaleString()} float16 logits: engine (${m.engine_place}) ${fmt(m.engine.median_ms, 2)} ms vs JavaScript ${fmt(m.javascript.median_ms, 2)} ms</td>` +
      `<td class="num" colspan="${lengths.length + 1}">${fmt(m.javascript_over_engine, 2)}×</td><td class="num">${m.abs_diff_allowed_mass.toExponential(1)}</td>`;
    rb.append(tr);
  }
  r.append(rb);
  const md = $("modes");
  md.replaceChildren();
  if (result.modes) {
    md.innerHTML = `<thead><tr><th>readout on ${result.modes.model}, example state (${result.modes.criteria} criteria)</th><th>ms / criterion</th><th>× letters</th><th>bytes read back / criterion</th></tr></thead>`;
    const mb = document.createElement("tbody");
    for (const m of result.modes.rows) {
      const tr = document.createElement("tr");
      tr.innerHTML = `<td>${m.what}</td><td class="num">${fmt(m.ms_per_criterion)}</td><td class="num">${fmt(m.over_letters, 2)}×</td><td class="num">${m.bytes_per_criterion === undefined ? "" : Math.round(m.bytes_per_criterion).toLocaleString()}</td>`;
      mb.append(tr);
    }
    md.append(mb);
  }
  $("plot").innerHTML = plot(result, rows);
  const blob = new Blob([JSON.stringify(result, null, 2)], { type: "application/json" });
  $("download").href = URL.createObjectURL(blob);
  $("download").download = `${result.date}-${result.model}-${result.backend}.json`;
  $("results").hidden = false;
}

/** Points (medians) and fitted lines per variant; log-free, linear axes. */
function plot(result, rows) {
  const W = 900, H = 420, L = 64, R = 210, T = 30, B = 46;
  const xmax = Math.max(...result.lengths);
  const ymax = Math.max(...rows.flatMap((v) => v.median_ms)) * 1.08 || 1;
  const X = (n) => L + ((W - L - R) * n) / xmax;
  const Y = (ms) => H - B - ((H - T - B) * ms) / ymax;
  const step = 10 ** Math.floor(Math.log10(ymax / 4));
  const tick = [1, 2, 5, 10].map((k) => k * step).find((s) => ymax / s <= 6) ?? step * 10;
  let svg = `<svg viewBox="0 0 ${W} ${H}" xmlns="http://www.w3.org/2000/svg" font-family="system-ui, sans-serif" font-size="12">`;
  svg += `<text x="${L}" y="18" font-size="13" font-weight="600">${result.model} · ${result.backend}${result.emulated ? " (emulated: SwiftShader)" : ""} · prefix ${result.prefix_tokens} tokens</text>`;
  for (let y = 0; y <= ymax; y += tick) svg += `<line x1="${L}" x2="${W - R}" y1="${Y(y)}" y2="${Y(y)}" stroke="#e5e8ec"/><text x="${L - 6}" y="${Y(y) + 4}" text-anchor="end" fill="#66707c">${y.toFixed(0)}</text>`;
  for (const n of result.lengths) svg += `<text x="${X(n)}" y="${H - B + 16}" text-anchor="middle" fill="#66707c">${n}</text>`;
  svg += `<text x="${(L + W - R) / 2}" y="${H - 8}" text-anchor="middle">suffix tokens</text>`;
  svg += `<text transform="translate(16 ${(T + H - B) / 2}) rotate(-90)" text-anchor="middle">median ms</text>`;
  svg += `<clipPath id="area"><rect x="${L}" y="${T}" width="${W - L - R}" height="${H - T - B}"/></clipPath>`;
  svg += `<line x1="${L}" x2="${L}" y1="${T}" y2="${H - B}" stroke="#99a"/><line x1="${L}" x2="${W - R}" y1="${H - B}" y2="${H - B}" stroke="#99a"/>`;
  rows.forEach((v, k) => {
    const c = COLORS[v.variant] ?? "#333";
    if (v.fit) svg += `<line x1="${X(0)}" y1="${Y(v.fit.fixed_ms)}" x2="${X(xmax)}" y2="${Y(v.fit.fixed_ms + v.fit.per_token_ms * xmax)}" stroke="${c}" stroke-width="1.5" stroke-dasharray="5 4" clip-path="url(#area)"/>`;
    v.median_ms.forEach((m, i) => (svg += `<circle cx="${X(result.lengths[i])}" cy="${Y(m)}" r="4" fill="${c}"/>`));
    const label = v.fit ? `${v.fit.fixed_ms.toFixed(1)} + ${v.fit.per_token_ms.toFixed(2)}·n, R² ${v.fit.r2.toFixed(3)}` : "";
    svg += `<circle cx="${W - R + 14}" cy="${T + 10 + k * 36}" r="5" fill="${c}"/><text x="${W - R + 24}" y="${T + 14 + k * 36}">${v.variant}</text>`;
    svg += `<text x="${W - R + 24}" y="${T + 28 + k * 36}" fill="#66707c" font-size="11">${label}</text>`;
  });
  return svg + "</svg>";
}

// ---- run -------------------------------------------------------------------

async function adapterInfo() {
  if (!navigator.gpu) return null;
  const a = await navigator.gpu.requestAdapter();
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
    benchmark: "logit_cost", page: "bench/", date: new Date().toISOString().slice(0, 10),
    browser: navigator.userAgent, adapter, emulated, shader_f16: adapter ? adapter.features.includes("shader-f16") : null,
    cross_origin_isolated: self.crossOriginIsolated, threads: cfg.threads,
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
  for (const v of result.variants) delete v.ids;
  if (cfg.mass) {
    status("running", "allowedMass…");
    result.allowed_mass = await benchMass(cfg);
  }
  if (cfg.modes) {
    status("running", "readout modes…");
    result.modes = await benchModes(cfg);
  }
  result.ratios = compare(cfg, result.variants, result.transformers);
  render(result);
  window.benchResult = result;
  status("done", "done");
  window.benchDone = true;
  return result;
}

async function fillModels() {
  const catalog = await (await fetch("/models.json")).json();
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
  location.search = p.toString();
};

await init();
await fillModels();
window.benchReady = true;
if (q.get("autorun") === "1") {
  try {
    await runAll(config());
  } catch (e) {
    window.benchError = String(e?.message ?? e);
    $("error").textContent = window.benchError;
    $("error").hidden = false;
    status("error", "failed");
    window.benchDone = true;
  }
  // A runner without a browser driver (bench/gpu_check.py) takes the outcome
  // by POST, since it cannot read window.benchResult.
  const report = q.get("report");
  if (report) {
    const body = window.benchError ? { error: window.benchError, log: $("log").textContent.split("\n").slice(-30) } : window.benchResult;
    await fetch(report, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
  }
}
