// `readout/worker`: the same engine, run in a dedicated module Worker so the
// page's thread stays free while it computes. The API is the package's, with
// every call a promise (`info()` too). Each `Engine.load` starts its own
// worker (worker_main.js); `dispose()` ends it, and so does `terminate()`.
// This file converts and forwards; every decision is the engine's.

// What the engine keeps is the origin's, the same from the page as from any worker.
export { clearStored, deleteStored, stored } from "./storage.js";

/** One worker and the calls waiting on it. */
class Channel {
  constructor(worker) {
    this.worker = worker;
    this.pending = new Map();
    this.next = 1;
    this.dead = null;
    worker.addEventListener("message", (event) => this.receive(event.data));
    // An error the worker did not catch (a failed import, a trap outside a
    // call) ends it: nothing it was doing will answer.
    worker.addEventListener("error", (event) => {
      event.preventDefault?.();
      this.die(`the worker failed: ${event.message || "an error it did not catch"}`);
    });
    worker.addEventListener("messageerror", () => this.die("a message from the worker could not be read"));
  }

  receive(data) {
    if (data.died) {
      this.die(`the worker trapped: ${data.died.message}`);
      return;
    }
    const p = this.pending.get(data.id);
    if (!p) return;
    if (data.progress) {
      p.onProgress?.(data.progress);
      return;
    }
    this.pending.delete(data.id);
    if (data.ok) p.resolve(data.result);
    else p.reject(toError(data.error));
  }

  /** Posts a request; resolves with the worker's answer. */
  send(message, onProgress) {
    if (this.dead) return Promise.reject(this.dead());
    const id = this.next++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, onProgress });
      this.worker.postMessage({ ...message, id });
    });
  }

  /**
   * Ends the worker; every call waiting on it, and every later one, is
   * rejected with `error()` (by default code `worker_died`, saying why).
   */
  die(why, error = () => diedError(why)) {
    if (this.dead) return;
    this.dead = error;
    this.worker.terminate();
    for (const p of this.pending.values()) p.reject(error());
    this.pending.clear();
  }
}

function toError(data) {
  const e = new Error(data.message);
  e.name = data.name ?? "Error";
  for (const k of ["code", "field", "limit"]) if (data[k] !== undefined) e[k] = data[k];
  if (data.stack) e.workerStack = data.stack;
  return e;
}

// After dispose, calls are refused as the page's own engine refuses them.
const disposedError = () => Object.assign(new Error("engine: disposed (load a new one)"), { code: "engine_disposed", field: "engine" });

function diedError(why) {
  return Object.assign(new Error(`readout worker: ${why} (load a new engine)`), { name: "WorkerDiedError", code: "worker_died", field: "worker" });
}

/** A URL the page means, made absolute: the worker resolves against its own script's URL, not the page's. */
function absolute(url) {
  if (typeof url !== "string" || typeof location === "undefined") return url;
  try {
    return new URL(url, location.href).href;
  } catch {
    return url; // the engine refuses it with its own code
  }
}

/** Calls a method of the object behind `handle` and turns handles in the answer into proxies. */
async function invoke(channel, owner, method, args) {
  const r = await channel.send({ op: "call", handle: owner.handle, method, args });
  if (r.tokens !== undefined) owner._tokens = r.tokens;
  return wrap(channel, r.value);
}

function wrap(channel, value) {
  if (value.kind === "State") return new State(channel, value);
  if (value.kind === "Prefix") return new Prefix(channel, value);
  if (value.kind === "Engine") return new Engine(channel, value);
  return value.data;
}

/** A loaded model in its worker: `Engine.load` as in `readout`, every method a promise. */
export class Engine {
  constructor(channel, { handle, build }) {
    this.channel = channel;
    this.handle = handle;
    /** Which of the package's builds runs in the worker: "single", "relaxed" or "threads". */
    this.build = build;
  }

  /**
   * Starts a worker and loads `source` in it. Options are `readout`'s, plus
   * `build`: "auto" (default: `readout/select`'s `bestBuild()`, the threaded
   * build where the page can run it, else the relaxed one, else the single),
   * "single", "relaxed" or "threads".
   */
  static async load(source, options = {}) {
    const { onProgress, build = "auto", ...rest } = options ?? {};
    const opts = { ...rest };
    if (opts.ortBase !== undefined) opts.ortBase = absolute(opts.ortBase);
    const worker = new Worker(new URL("./worker_main.js", import.meta.url), { type: "module", name: "readout-engine" });
    const channel = new Channel(worker);
    try {
      const r = await channel.send(
        { op: "load", source: absolute(source), options: opts, build, progress: typeof onProgress === "function" },
        onProgress,
      );
      return new Engine(channel, r);
    } catch (e) {
      // A failed load leaves nothing running.
      channel.die("its load failed");
      throw e;
    }
  }

  prefill(state, options) {
    return invoke(this.channel, this, "prefill", [state, options]);
  }
  prefix(spec, options) {
    return invoke(this.channel, this, "prefix", [spec, options]);
  }
  restorePrefix(bytes, spec, options) {
    return invoke(this.channel, this, "restorePrefix", [bytes, spec, options]);
  }
  info() {
    return invoke(this.channel, this, "info", []);
  }
  liveGpuTensors() {
    return invoke(this.channel, this, "liveGpuTensors", []);
  }
  bytesReadBack() {
    return invoke(this.channel, this, "bytesReadBack", []);
  }
  /** Releases the engine, then ends its worker; later calls are refused with code `engine_disposed`, as `readout`'s are. */
  async dispose() {
    if (this.channel.dead) return;
    try {
      await invoke(this.channel, this, "dispose", []);
    } finally {
      this.channel.die("the engine was disposed", disposedError);
    }
  }
  /** Ends the worker at once, whatever it is doing: pending calls are rejected with code `worker_died`. */
  terminate() {
    this.channel.die("terminated by the page");
  }
  /** Whether the worker still runs. */
  get alive() {
    return !this.channel.dead;
  }
}

/** A shared prefix in the worker. */
export class Prefix {
  constructor(channel, { handle, tokens, storage }) {
    this.channel = channel;
    this.handle = handle;
    this._tokens = tokens;
    this._storage = storage ?? null;
  }
  get tokens() {
    return this._tokens;
  }
  get storage() {
    return this._storage;
  }
  prefill(state) {
    return invoke(this.channel, this, "prefill", [state]);
  }
  save() {
    return invoke(this.channel, this, "save", []);
  }
  dispose() {
    return invoke(this.channel, this, "dispose", []);
  }
}

/** A prefilled state in the worker. `tokens` is brought up to date by every call on it. */
export class State {
  constructor(channel, { handle, tokens }) {
    this.channel = channel;
    this.handle = handle;
    this._tokens = tokens;
  }
  get tokens() {
    return this._tokens;
  }
  extend(text) {
    return invoke(this.channel, this, "extend", [text]);
  }
  score(criterion, options) {
    return invoke(this.channel, this, "score", [criterion, options]);
  }
  scoreAll(criteria, options) {
    return invoke(this.channel, this, "scoreAll", [criteria, options]);
  }
  extract(criteria) {
    return invoke(this.channel, this, "extract", [criteria]);
  }
  dispose() {
    return invoke(this.channel, this, "dispose", []);
  }
}

/** Nothing to start on the page: each engine's worker loads its own build. Kept so `import init, { Engine }` reads the same. */
export default async function init() {}

/** `readout`'s `limits()`, from the single build loaded on the page (small, and loaded once). */
export async function limits() {
  return (await pageBuild()).limits();
}

/** `readout`'s `defaultThreads`, as a promise. */
export async function defaultThreads(hardwareConcurrency, crossOriginIsolated) {
  return (await pageBuild()).defaultThreads(hardwareConcurrency, crossOriginIsolated);
}

let page = null;
function pageBuild() {
  page ??= import("./readout.js").then(async (m) => {
    await m.default();
    return m;
  });
  return page;
}
