// The worker side of `readout/worker` (worker.js spawns it, one per engine).
// It loads the package's own build inside this dedicated module Worker, keeps
// the engine and every object it hands out under a numbered handle, and
// answers the page's calls in the order they came. It converts; it decides
// nothing: the build is the page's choice (or `select.js`'s answer, the
// same one a page without a worker would get), the rest is the engine's.
import { bestBuild } from "./select.js";

/** Objects the page holds by handle: the Engine, its Prefixes and States. */
const objects = new Map();
let nextHandle = 1;
let pkg = null;

/** What crosses back for an object: its handle, its class, its `tokens` now, and a Prefix's `storage`. */
function describe(value) {
  for (const kind of ["Engine", "Prefix", "State"]) {
    if (pkg && value instanceof pkg[kind]) {
      const handle = nextHandle++;
      objects.set(handle, value);
      return { handle, kind, tokens: kind === "Engine" ? undefined : value.tokens, storage: kind === "Prefix" ? value.storage : undefined };
    }
  }
  return undefined;
}

/** An error as plain data: its words, its name and the engine's `code`, `field` and `limit`. */
function errorData(e) {
  if (e === null || typeof e !== "object") return { message: String(e), name: "Error" };
  const out = { message: String(e.message ?? e), name: e.name ?? "Error", stack: e.stack };
  for (const k of ["code", "field", "limit"]) if (e[k] !== undefined) out[k] = e[k];
  return out;
}

// Each build by a literal import, so that a bundler finds and ships all three.
const BUILDS = {
  single: () => import("./readout.js"),
  relaxed: () => import("./relaxed/readout.js"),
  threads: () => import("./threads/readout.js"),
};

async function load({ source, options, build, progress }, id) {
  const chosen = build === "auto" ? bestBuild().build : build;
  if (!Object.hasOwn(BUILDS, chosen)) {
    throw Object.assign(new Error(`build ${JSON.stringify(build)}: not one of "auto", "single", "relaxed", "threads"`), { code: "invalid_input", field: "build" });
  }
  pkg = await BUILDS[chosen]();
  await pkg.default();
  const opts = { ...options };
  // A callback cannot cross; the page asked for progress, so it is posted.
  if (progress) opts.onProgress = (p) => postMessage({ id, progress: p });
  const engine = await pkg.Engine.load(source, opts);
  return { ...describe(engine), build: chosen };
}

async function call({ handle, method, args }) {
  const target = objects.get(handle);
  if (!target) throw Object.assign(new Error(`handle ${handle}: no such object in the worker`), { code: "invalid_input", field: "handle" });
  if (typeof target[method] !== "function") throw Object.assign(new Error(`${method}: not a method here`), { code: "invalid_input", field: "method" });
  const value = await target[method](...args);
  const out = { value: describe(value) ?? { data: value } };
  // A State grows with extend; its count comes back with every answer.
  if ("tokens" in target) out.tokens = target.tokens;
  return out;
}

// The page's calls, answered one at a time in the order they came: the
// engine queues them anyway, and a load must finish before a call on it.
let queue = Promise.resolve();
self.addEventListener("message", (event) => {
  const { id, op } = event.data;
  queue = queue.then(async () => {
    try {
      const result = op === "load" ? await load(event.data, id) : await call(event.data);
      postMessage({ id, ok: true, result });
    } catch (e) {
      postMessage({ id, ok: false, error: errorData(e) });
      // A trap (a panic, or memory that could not grow) leaves the module's
      // state undefined: this worker is done, and the page is told why.
      if (e instanceof WebAssembly.RuntimeError) {
        postMessage({ died: errorData(e) });
        close();
      }
    }
  });
});
