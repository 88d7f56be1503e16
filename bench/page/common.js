// What every part of the benchmark page shares: its constants, the page's
// log and status line, the query, and small measuring helpers.
import { defaultThreads, limits } from "/pkg-diagnostics/readout.js";

export const ORT_BASE = "/node_modules/onnxruntime-web/dist/";
export const TJS_ORT_BASE = "/node_modules/@huggingface/transformers/node_modules/onnxruntime-web/dist/";
export const VARIANTS = { stock: "", trimmed: "-trimmed", pruned: "-trimmed-pruned" };
export const COLORS = { stock: "#c2362f", trimmed: "#e0912f", pruned: "#2f6fdf", "transformers.js": "#7b4fb8", wllama: "#8a6d1f", native: "#23865a" };
export const MASS_WIDTH = 151936;

export const $ = (id) => document.getElementById(id);
export const q = new URLSearchParams(location.search);
export const list = (s) => s.split(",").map((x) => x.trim()).filter(Boolean);

export function log(line) {
  console.log(`[bench] ${line}`);
  $("log").textContent += line + "\n";
  $("log").scrollTop = 1e9;
}

export function status(state, text) {
  $("status").dataset.state = state;
  $("status").textContent = text;
}

export function config() {
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
    wllama: q.get("wllama") || null,
  };
}

export async function timed(fn) {
  const t = performance.now();
  const r = await fn();
  return [performance.now() - t, r];
}

export function softmax(xs) {
  const m = Math.max(...xs);
  const e = xs.map((x) => Math.exp(x - m));
  const s = e.reduce((a, b) => a + b, 0);
  return e.map((x) => x / s);
}
