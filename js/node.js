// Node.js: the same package, with the two things a browser gives that Node
// does not. Node's `fetch` has no `file:` scheme, so models in folders on
// disk are read through `node:fs` (every other URL goes to Node's own
// fetch); and the package's wasm is read from disk, since `init()` would
// fetch it by its `file:` URL. Nothing else changes: the engine, its
// options and its errors are the browser's. Node has no WebGPU, so `auto`
// takes the `cpu` backend and `info().backendReason` says why.
import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";

const FILE_FETCH = Symbol.for("readout.fileFetch");

/**
 * A `fetch` that reads `file:` URLs from disk (404 for a missing file, as a
 * server answers) and hands every other request to `next`.
 */
export function fileFetch(next = globalThis.fetch) {
  const f = async (input, init) => {
    const url = typeof input === "string" ? input : input instanceof URL ? input.href : input?.url;
    if (typeof url !== "string" || !url.startsWith("file:")) return next(input, init);
    try {
      return new Response(await readFile(fileURLToPath(url)), { status: 200 });
    } catch (e) {
      if (e?.code === "ENOENT" || e?.code === "ENOTDIR") return new Response(null, { status: 404, statusText: "Not Found" });
      throw e;
    }
  };
  f[FILE_FETCH] = true;
  return f;
}

/**
 * Makes the package usable in Node: `globalThis.fetch` learns `file:` URLs
 * (once, however often this is called), then `init` (the build's default
 * export) is given its wasm from disk. Pass the `init` of the build you
 * imported: `readout` or `readout/threads`.
 */
export async function initNode(init, { wasm = new URL("./readout_bg.wasm", import.meta.url) } = {}) {
  if (typeof init !== "function") throw new TypeError("initNode(init): pass the build's default export, init");
  if (!globalThis.fetch?.[FILE_FETCH]) globalThis.fetch = fileFetch(globalThis.fetch);
  return init({ module_or_path: await readFile(wasm) });
}
