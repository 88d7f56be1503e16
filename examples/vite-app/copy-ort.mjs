// onnxruntime-web loads its .wasm (and its threaded .mjs glue) at run time
// from the URL the engine is given as `ortBase`; no bundler sees those
// loads. So they are copied into public/ort/, which Vite serves and puts in
// the build as they are (js/README.md, "Install and serve").
import { cpSync, mkdirSync, readdirSync } from "node:fs";

const from = new URL("./node_modules/onnxruntime-web/dist/", import.meta.url);
const to = new URL("./public/ort/", import.meta.url);
mkdirSync(to, { recursive: true });
const files = readdirSync(from).filter((f) => /^ort-wasm.*\.(wasm|mjs)$/.test(f));
for (const f of files) cpSync(new URL(f, from), new URL(f, to));
console.log(`copy-ort: ${files.length} files of onnxruntime-web into public/ort/`);
