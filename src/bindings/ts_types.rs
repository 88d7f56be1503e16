//! The TypeScript declarations of the package's types (the `.d.ts` carries
//! them beside the generated classes).

use wasm_bindgen::prelude::*;

#[wasm_bindgen(typescript_custom_section)]
const TS_TYPES: &'static str = r#"
export type Backend = "auto" | "webgpu" | "wasm" | "cpu";
export interface LoadOptions {
  /** "auto" (default): WebGPU when an adapter exists and the dtype runs there, else "cpu" for an int4 graph,
   *  else (a float graph) the entry's WASM variant.
   *  "cpu": readout's own int4 kernels over the entry's own file, no onnxruntime-web (threads: the readout/threads build). */
  backend?: Backend;
  /** URL prefix where onnxruntime-web's dist/ files (.wasm, .mjs) are served. Nothing else is contacted. */
  ortBase?: string;
  /** Called while files download or are read from storage: file role, bytes so far, bytes in all (0 when unknown), where they come from. */
  onProgress?: (p: { file: string; loaded: number; total: number; source: "network" | "storage" }) => void;
  /** WASM backend threads (needs a cross-origin isolated page). */
  threads?: number;
  /** onnxruntime-web's profiler (see Engine.endProfiling). */
  profiling?: boolean;
  /** WebGPU: "shared" (default) hands the engine's device to onnxruntime-web and reads logits on it;
   *  "onnxruntime" lets onnxruntime-web create its own (logits are then downloaded). */
  device?: "shared" | "onnxruntime";
  /** cpu: run a call's branches (scoreAll's criteria, debias rotations, cloze options) in one
   *  block-causal pass (default true); false runs them one by one, what a benchmark compares against. */
  packBranches?: boolean;
  /** models.json only: let entries name files by absolute http(s) URL (another origin). Default false: every
   *  file URL must be a plain relative path below the catalog's folder, and any other is refused (code outside_root). */
  allowAbsoluteUrls?: boolean;
  /** models.json entries: keep the files in the browser's storage (the origin private file system) and read them
   *  from there on later loads, each checked against its size and sha256 on every read (default true). */
  keepFiles?: boolean;
  /** Ask the browser once for persistent storage when files are kept (default true). */
  persist?: boolean;
  /** A model folder's files: keep them too (default false). A stored copy is used while the server answers 304 to
   *  its ETag (or Last-Modified) and its bytes hash to what was recorded; a server that sends neither keeps nothing. */
  keepFolderFiles?: boolean;
}
export interface StateInput { id?: string; instruction?: string; evidence: string; }
/** A worked example: a criterion answered (`answer`: an option id) over its own evidence. */
export interface ExampleInput { evidence: string; criterion: CriterionInput; answer: string; }
/** A shared prefix: the instruction (the mode's default when absent) and worked examples. */
export interface PrefixInput { instruction?: string; examples?: ExampleInput[]; }
export interface OptionInput { id: string; description: string; }
export interface CriterionInput { id: string; family?: string; question: string; options: OptionInput[]; answer?: string; }
/** Unset fields take the model's default (models.json `readout`; else letters, plain). */
export interface ScoreOptions {
  /** "letters": the option letter's probability (one run, any graph). "cloze": each option's own text (stock graphs). */
  mode?: "letters" | "cloze";
  /** cloze: an option's score is the sum or the mean of its tokens' log-probabilities. */
  clozeScore?: "sum" | "mean";
  /** "content-free": divide out what the model prefers after evidence "N/A" (computed once per criterion, cached). */
  calibration?: "none" | "content-free";
  /** letters: "cyclic" scores every rotation of the options and averages. */
  debias?: "none" | "cyclic";
  allowedMass?: boolean;
}
/** How the state's head is written. `prompt`: "plain" text or the model's own
 *  chat template. `mode`: the readout it will be read with,
 *  which picks the default instruction when the state has none (a letters
 *  head asks for a letter, a cloze head for the answer); default: the model's. */
export interface PrefillOptions { prompt?: "plain" | "chat"; mode?: "letters" | "cloze"; }
/** `engine.prefix`'s options: a prefill's, and `keep`: restore the prefix from
 *  the browser's storage when a copy this engine accepts is there, and store it
 *  after its prefill otherwise (models.json entries only; default false). */
export interface PrefixOptions extends PrefillOptions { keep?: boolean; }
/** `prefix.storage` of a prefix made with `keep: true`. */
export interface PrefixStorage {
  /** "storage": restored, no prefill ran; "prefill": computed here. */
  from: "storage" | "prefill";
  /** Whether a copy is in storage now. */
  kept: boolean;
  /** Why it was not restored or not stored: none stored yet, a stored copy refused (its stale_prefix field), storage unavailable. */
  why: string | null;
  /** The stored copy's bytes (0 when none). */
  bytes: number;
  /** Time to restore it (read, check, import), or to prefill it. */
  ms: number;
  /** Its name in `stored()`'s list, under the model's entry. */
  file: string | null;
}
/** Every refusal is an Error carrying these: branch on `code`, not on the message. */
export interface ReadoutError extends Error {
  /** A stable snake_case name, e.g. "too_many_options", "mode_needs_stock_graph", "unknown_field". */
  code: string;
  /** The input field concerned, e.g. "options", "evidence", "mode". */
  field?: string;
  /** The limit exceeded, e.g. 20 (letters) or 64 (cloze) options. */
  limit?: number;
}
export interface OptionProb { id: string; letter: string; p: number; }
export interface Decision {
  id: string; answer: string; letter: string; probs: OptionProb[]; margin: number;
  allowedMass?: number; orderUnstable?: boolean; ms: number;
  /** What ran: mode, clozeScore, calibration, and the state's prompt. */
  readout: { mode: "letters" | "cloze"; clozeScore: "sum" | "mean"; calibration: "none" | "content-free"; prompt: "plain" | "chat" };
}
/** `engine.info().storage`: model files kept across visits (models.json entries only). */
export interface StorageInfo {
  /** Whether this load could read and write storage; `whyNot` says why not (none here, a quota, keepFiles: false). */
  used: boolean; whyNot: string | null;
  bytesDownloaded: number; bytesFromStorage: number;
  /** Stored files thrown away and downloaded again: the file (its models.json path) and why. */
  refetched: { file: string; why: string }[];
  /** Time spent hashing what storage gave (every stored file is hashed on every read). */
  hashMs: number;
  persistAsked: boolean;
}
export interface EngineInfo {
  modelId: string; runtime: string; backend: "webgpu" | "wasm" | "cpu"; backendReason: string;
  readout: string; runLimit: number; bytesReadBack: number; liveGpuTensors: number;
  /** What a call that does not choose gets, and where that came from: the model's models.json entry, or the rule for a model without one (letters, plain prompt); the CLI applies the same. */
  readoutDefaults: { mode: "letters" | "cloze"; clozeScore: "sum" | "mean"; calibration: "none" | "content-free"; prompt: "plain" | "chat" };
  readoutDefaultsFrom: string;
  /** Each file this load fetched: role, URL, bytes, whether models.json's sha256 was checked, and where it came from. */
  files: { role: string; url: string; bytes: number; sha256Checked: boolean; source: "network" | "storage" }[];
  /** What the browser's storage gave and kept for this load. */
  storage: StorageInfo;
  /** Set once the WebGPU device was lost: every later run is refused; load the engine again. */
  deviceLost?: string | null;
  /** Where `prompt: "chat"` comes from, or the refusal such a call gets. */
  chatTemplate: { status: "available"; source: string } | { status: "unavailable"; code: string; reason: string };
  [key: string]: unknown;
}
"#;
