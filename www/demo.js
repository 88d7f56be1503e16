// The demo page: pick a model from models.json, paste evidence, write
// criteria, see the decisions. All decisions come from the package; this file
// only moves values between the page and the engine.
//
// Query parameters (for links and the headless driver): model=<models.json id>,
// backend=auto|webgpu|wasm|cpu, autoload=0 to wait for the Load button,
// mode=letters|cloze:sum|cloze:mean, calibration=none|content-free,
// prompt=plain|chat (unset: the model's default from models.json).
// The engine runs in a dedicated Worker (readout/worker), so the page stays
// responsive while it computes; worker=0 calls it on the page's own thread.
// Either way the fastest build the page can run (readout/select's
// bestBuild: the threaded build, our kernels on Web Workers, where the page
// is cross-origin isolated; else the relaxed-SIMD build on one thread where
// the browser has relaxed SIMD; else the single-thread SIMD128 build);
// engine.info().runtime says which.
import { bestBuild } from "/pkg/select.js";

const BUILD = bestBuild();
const IN_WORKER = new URLSearchParams(location.search).get("worker") !== "0";
const BUILD_URL = { threads: "/pkg/threads/readout.js", relaxed: "/pkg/relaxed/readout.js", single: "/pkg/readout.js" };
const { default: init, Engine, defaultThreads, limits } = await import(IN_WORKER ? "/pkg/worker.js" : BUILD_URL[BUILD.build]);
// What the engine keeps across visits (the same origin storage from the page or its worker).
const { stored, clearStored } = await import("/pkg/storage.js");

const ORT_BASE = "/node_modules/onnxruntime-web/dist/";
// The stock graph: its models.json entry names the best measured readout
// (bench/runners/decisions.sh). The pruned graph serves letters, the fastest path
// for a model that can answer in letters: one choice away in the list.
const DEFAULT_MODEL = "smollm2-135m-instruct-q4f16";
// The engine's own limits (letters, option counts), set once the module is loaded.
let LIMITS = null;
// Letters stop at T; cloze reads the options' text and takes more.
const maxOptions = () => LIMITS.maxOptions[currentMode() === "cloze" ? "cloze" : "letters"];

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
let engine = null;
// engine.info() at load (a promise through the worker, so kept here).
let engineInfo = null;
let loading = null;

function show(el, text) {
  el.textContent = text ?? "";
  el.hidden = !text;
}

function mb(bytes) {
  return `${(bytes / 1e6).toFixed(1)} MB`;
}

function setStatus(state, text) {
  const s = $("status");
  s.dataset.state = state;
  s.textContent = text;
}

// ---- criteria editor -------------------------------------------------------

function optionRow(list, opt = { id: "", description: "" }) {
  const row = document.createElement("div");
  row.className = "option";
  row.innerHTML = `<span class="letter"></span><input class="opt-id" placeholder="id"><input class="opt-desc" placeholder="description"><button class="remove-option" title="remove this option">−</button>`;
  row.querySelector(".opt-id").value = opt.id;
  row.querySelector(".opt-desc").value = opt.description;
  row.querySelector(".remove-option").onclick = () => {
    row.remove();
    relabel(list.closest(".criterion"));
  };
  list.append(row);
}

function relabel(card) {
  const rows = [...card.querySelectorAll(".option")];
  rows.forEach((r, i) => (r.querySelector(".letter").textContent = LIMITS.letters[i] ?? String(i + 1)));
  rows.forEach((r) => (r.querySelector(".remove-option").disabled = rows.length <= LIMITS.minOptions));
  card.querySelector(".add-option").disabled = rows.length >= maxOptions();
  card.querySelector(".count").textContent = `${rows.length} options (${LIMITS.minOptions}–${maxOptions()})`;
}

function addCriterion(c = { id: "", question: "", options: [{ id: "yes", description: "Yes" }, { id: "no", description: "No" }] }) {
  const card = document.createElement("div");
  card.className = "criterion";
  card.innerHTML = `<div class="head"><input class="crit-id" placeholder="id" style="max-width:120px"><input class="question" placeholder="question"><button class="remove-criterion" title="remove this criterion">✕</button></div>
    <div class="options"></div>
    <div class="row"><button class="add-option">+ option</button><span class="count muted"></span></div>`;
  card.querySelector(".crit-id").value = c.id;
  card.querySelector(".question").value = c.question;
  card.dataset.answer = c.answer ?? "";
  card.dataset.family = c.family ?? "";
  const list = card.querySelector(".options");
  for (const o of c.options) optionRow(list, o);
  card.querySelector(".add-option").onclick = () => {
    optionRow(list);
    relabel(card);
  };
  card.querySelector(".remove-criterion").onclick = () => card.remove();
  $("criteria").append(card);
  relabel(card);
}

function readCriteria() {
  return [...document.querySelectorAll(".criterion")].map((card, i) => ({
    id: card.querySelector(".crit-id").value.trim() || `c${i + 1}`,
    family: card.dataset.family || undefined,
    question: card.querySelector(".question").value,
    answer: card.dataset.answer || undefined,
    options: [...card.querySelectorAll(".option")].map((r, j) => ({
      id: r.querySelector(".opt-id").value.trim() || LIMITS.letters[j] || `o${j + 1}`,
      description: r.querySelector(".opt-desc").value,
    })),
  }));
}

async function loadExample() {
  const ex = await (await fetch("/examples/state.json")).json();
  $("instruction").value = ex.instruction ?? "";
  $("evidence").value = ex.evidence;
  $("criteria").replaceChildren();
  for (const c of ex.criteria) addCriterion(c);
}

// ---- model loading ---------------------------------------------------------

async function fillModels() {
  const catalog = await (await fetch("/models.json")).json();
  const sel = $("model");
  for (const m of catalog.models) {
    const o = document.createElement("option");
    o.value = m.id;
    const size = m.files.reduce((a, f) => a + f.bytes, 0);
    o.textContent = `${m.id} (${mb(size)})`;
    sel.append(o);
  }
  const want = params.get("model") ?? DEFAULT_MODEL;
  if (!catalog.models.some((m) => m.id === want)) throw new Error(`model: ${want} is not in models.json`);
  sel.value = want;
  $("backend").value = params.get("backend") ?? "auto";
  for (const k of ["mode", "calibration", "prompt"]) if (params.get(k)) $(k).value = params.get(k);
}

async function load() {
  const id = $("model").value;
  const backend = $("backend").value;
  $("run").disabled = true;
  show($("load-error"), "");
  $("badge").hidden = true;
  const prev = engine;
  engine = null;
  engineInfo = null;
  if (prev) await prev.dispose();
  const files = new Map();
  const bar = $("progress");
  bar.hidden = false;
  const paint = () => {
    let loaded = 0, total = 0;
    for (const f of files.values()) {
      loaded += f.loaded;
      total += f.total;
    }
    bar.querySelector(".bar").style.width = total ? `${(100 * loaded) / total}%` : "0";
    bar.querySelector(".label").textContent = `${mb(loaded)} of ${total ? mb(total) : "?"}`;
  };
  setStatus("loading", "loading the model and proving its conventions…");
  const t0 = performance.now();
  try {
    const threads = await defaultThreads(navigator.hardwareConcurrency || 1, self.crossOriginIsolated);
    engine = await Engine.load(`/models.json#${id}`, {
      backend,
      ortBase: ORT_BASE,
      threads,
      onProgress: (p) => {
        files.set(p.file, { loaded: p.loaded, total: p.total });
        paint();
      },
    });
    const info = (engineInfo = await engine.info());
    const badge = $("badge");
    const label = { webgpu: "WebGPU", wasm: "WASM", cpu: "CPU" }[info.backend] ?? info.backend;
    badge.textContent = `${label} · ${info.backendReason}`;
    badge.className = `badge ${info.backend}`;
    badge.hidden = false;
    badge.dataset.backend = info.backend;
    const d = info.readoutDefaults;
    // What the engine got, not what was asked (the single-thread build runs one).
    const ran = info.threads ?? threads;
    // What the backend in use does: our kernels compute on cpu; onnxruntime-web
    // computes on webgpu and wasm, and info.readout says how its logits are read.
    const computes = info.backend === "cpu" ? `computed by ${info.readout}` : `logits read by ${info.readout}`;
    const build = IN_WORKER ? engine.build : BUILD.build;
    $("model-info").textContent = `${info.modelId} loaded in ${((performance.now() - t0) / 1000).toFixed(1)} s; ` +
      `default readout ${d.mode}${d.mode === "cloze" ? ` · ${d.clozeScore}` : ""} · ${d.calibration} · ${d.prompt}; ` +
      `${computes}; exact run length ${info.runLimit} tokens; ${ran} thread${ran > 1 ? "s" : ""}; ` +
      `${{ threads: "threaded", relaxed: "relaxed-SIMD single-thread", single: "single-thread" }[build]} build (${BUILD.why}); ` +
      `${IN_WORKER ? "in a Web Worker (the page's thread stays free)" : "on the page's thread"}.`;
    $("model-info").dataset.worker = IN_WORKER ? "1" : "0";
    const st = info.storage;
    $("model-source").textContent = `Model files: ${mb(st.bytesFromStorage)} from storage, ${mb(st.bytesDownloaded)} downloaded` +
      (st.refetched.length ? `; downloaded again: ${st.refetched.map((r) => `${r.file} (${r.why})`).join("; ")}` : "") +
      (st.whyNot ? `; not kept: ${st.whyNot}` : "") + ".";
    $("model-source").dataset.fromStorage = String(st.bytesFromStorage);
    $("model-source").dataset.downloaded = String(st.bytesDownloaded);
    for (const card of document.querySelectorAll(".criterion")) relabel(card);
    $("run").disabled = false;
    setStatus("ready", "ready");
  } catch (e) {
    show($("load-error"), `Loading ${id} failed: ${e.message ?? e}`);
    setStatus("error", "load failed");
  } finally {
    bar.hidden = true;
  }
}

// ---- running ---------------------------------------------------------------

/** The mode the next run uses: the page's choice, else the model's default. */
function currentMode() {
  const m = $("mode").value;
  if (m) return m.split(":")[0];
  return engineInfo?.readoutDefaults?.mode ?? "letters";
}

/** Only what the page chose; the engine fills the rest from the model's default. */
function scoreOptions() {
  const opts = { debias: $("debias").value };
  const [mode, clozeScore] = $("mode").value.split(":");
  if (mode) opts.mode = mode;
  if (clozeScore) opts.clozeScore = clozeScore;
  if ($("calibration").value) opts.calibration = $("calibration").value;
  return opts;
}

function describeReadout(r) {
  const parts = [r.mode === "cloze" ? `cloze (${r.clozeScore} of the option's token log-probabilities)` : "letters"];
  parts.push(r.calibration === "content-free" ? "content-free calibration" : "no calibration");
  parts.push(`${r.prompt} prompt`);
  return `Readout: ${parts.join(" · ")}.`;
}

function probBars(decision) {
  const wrap = document.createElement("div");
  for (const p of decision.probs) {
    const row = document.createElement("div");
    row.className = `pbar${p.id === decision.answer ? " win" : ""}`;
    row.innerHTML = `<span class="name"></span><span class="track"><span class="fill" style="display:block"></span></span><span class="num"></span>`;
    row.querySelector(".name").textContent = `${p.letter}. ${p.id}`;
    row.querySelector(".fill").style.width = `${(100 * p.p).toFixed(1)}%`;
    row.querySelector(".num").textContent = p.p.toFixed(3);
    wrap.append(row);
  }
  return wrap;
}

function decisionRow(c, d) {
  const tr = document.createElement("tr");
  tr.dataset.criterion = c.id;
  tr.innerHTML = `<td class="q"></td><td class="probs"></td><td class="answer"></td><td class="num margin"></td><td class="num mass"></td><td class="num ms"></td>`;
  tr.querySelector(".q").textContent = c.question || c.id;
  tr.dataset.answer = d.answer;
  tr.dataset.probs = JSON.stringify(d.probs.map((p) => p.p));
  tr.querySelector(".probs").append(probBars(d));
  const ans = tr.querySelector(".answer");
  ans.textContent = d.answer;
  if (c.answer) {
    const m = document.createElement("span");
    m.className = `mark ${c.answer === d.answer ? "right" : "wrong"}`;
    m.textContent = c.answer === d.answer ? "✓ expected" : `✗ expected ${c.answer}`;
    ans.append(m);
  }
  if (d.orderUnstable) {
    const m = document.createElement("span");
    m.className = "mark unstable";
    m.title = "the argmax changed with the order of the options";
    m.textContent = "order-unstable";
    ans.append(m);
  }
  tr.querySelector(".margin").textContent = d.margin.toFixed(3);
  tr.querySelector(".mass").textContent = d.allowedMass == null ? "—" : (d.allowedMass < 0.001 ? d.allowedMass.toExponential(1) : d.allowedMass.toFixed(3));
  tr.querySelector(".ms").textContent = d.ms.toFixed(0);
  return tr;
}

function errorRow(c, e) {
  const tr = document.createElement("tr");
  tr.dataset.criterion = c.id;
  tr.dataset.error = "1";
  tr.innerHTML = `<td class="q"></td><td colspan="5" class="error"></td>`;
  tr.querySelector(".q").textContent = c.question || c.id;
  tr.querySelector(".error").textContent = e.message ?? String(e);
  return tr;
}

async function run() {
  if (!engine) return;
  $("run").disabled = true;
  show($("state-error"), "");
  const body = $("decisions").querySelector("tbody");
  body.replaceChildren();
  $("results-section").hidden = false;
  $("summary").textContent = "";
  const criteria = readCriteria();
  const opts = scoreOptions();
  const prompt = $("prompt").value || undefined;
  $("ran").textContent = "";
  let state;
  try {
    setStatus("running", "reading the evidence…");
    const t0 = performance.now();
    const instruction = $("instruction").value.trim();
    // The head is written for the mode it will be read in (its default instruction differs).
    state = await engine.prefill({ instruction: instruction || undefined, evidence: $("evidence").value }, { prompt, mode: opts.mode });
    const prefillMs = performance.now() - t0;
    let done = 0;
    let total = 0;
    for (const c of criteria) {
      setStatus("running", `criterion ${done + 1} of ${criteria.length}…`);
      try {
        const d = await state.score(c, opts);
        body.append(decisionRow(c, d));
        $("ran").textContent = describeReadout(d.readout);
        $("ran").dataset.readout = JSON.stringify(d.readout);
        total += d.ms;
      } catch (e) {
        body.append(errorRow(c, e));
      }
      done++;
    }
    // Bytes read back are onnxruntime-web's tensors copied out; the cpu backend has none to copy.
    const readBack = engineInfo.backend === "cpu" ? "" : ` ${(await engine.bytesReadBack()).toLocaleString()} bytes read back from onnxruntime-web since load.`;
    $("summary").textContent = `Evidence: ${state.tokens} tokens, read once in ${prefillMs.toFixed(0)} ms. ` +
      `${criteria.length} criteria in ${total.toFixed(0)} ms (${(total / Math.max(criteria.length, 1)).toFixed(0)} ms each).${readBack}`;
    setStatus("done", "done");
  } catch (e) {
    show($("state-error"), e.message ?? String(e));
    setStatus("error", "the evidence was refused");
  } finally {
    if (state) await state.dispose();
    $("run").disabled = false;
  }
}

// ---- start -----------------------------------------------------------------

$("add-criterion").onclick = () => addCriterion();
$("example").onclick = () => loadExample();
$("load").onclick = () => (loading = load());
$("run").onclick = () => run();
$("mode").onchange = () => document.querySelectorAll(".criterion").forEach(relabel);
$("clear-stored").onclick = async () => {
  const files = await stored();
  const bytes = files.reduce((n, f) => n + f.bytes, 0);
  await clearStored();
  $("model-source").textContent = `Cleared ${files.length} stored files (${mb(bytes)}); the next load downloads them again.`;
};

try {
  await init();
  LIMITS = await limits();
  await fillModels();
  await loadExample();
  if (params.get("autoload") !== "0") {
    loading = load();
    await loading;
  }
} catch (e) {
  show($("load-error"), e.message ?? String(e));
  setStatus("error", "start-up failed");
}
