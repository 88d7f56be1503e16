/** A `fetch` that reads `file:` URLs from disk (404 for a missing file) and hands every other request to `next`. */
export function fileFetch(next?: typeof fetch): typeof fetch;

/**
 * Makes the package usable in Node: `globalThis.fetch` learns `file:` URLs,
 * then `init` (the build's default export) is given its wasm from disk
 * (`options.wasm`, default the single build's `readout_bg.wasm`).
 */
export function initNode<T>(init: (input: { module_or_path: Uint8Array }) => Promise<T>, options?: { wasm?: URL | string }): Promise<T>;
