// A static server for the browser pages and tests: the repository root,
// with the headers that make a page cross-origin isolated (COOP/COEP), so
// onnxruntime-web's WASM backend and our threaded build can use threads;
// under /plain/ the same files come without them, and under /noworkers/
// with them and a Content-Security-Policy that forbids Web Workers (the
// test of a threaded build whose workers cannot start). Every file has an
// ETag and a Last-Modified, and a request whose If-None-Match is the file's
// ETag is answered 304 with no body (what a model folder's kept files are
// checked against).
//   node harness/serve.mjs [port]      (prints the URL)
import { createServer } from "node:http";
import { createReadStream, statSync } from "node:fs";
import { extname, join, normalize, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = resolve(fileURLToPath(new URL("..", import.meta.url)));

const TYPES = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript",
  ".mjs": "text/javascript",
  ".json": "application/json",
  ".wasm": "application/wasm",
  ".css": "text/css",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".map": "application/json",
  ".ts": "text/plain",
};

export function serve(port = 0, root = ROOT) {
  const server = createServer((req, res) => {
    let path = decodeURIComponent(new URL(req.url, "http://x").pathname);
    // /plain/...: the same file without COOP/COEP, for the tests of a page
    // that is not cross-origin isolated; /noworkers/...: isolated, but no
    // worker may start.
    const plain = path.startsWith("/plain/");
    const noWorkers = path.startsWith("/noworkers/");
    if (plain) path = path.slice("/plain".length);
    if (noWorkers) path = path.slice("/noworkers".length);
    let file = normalize(join(root, path));
    if (!file.startsWith(root)) {
      res.writeHead(403).end("outside the root");
      return;
    }
    let st;
    try {
      st = statSync(file);
      if (st.isDirectory()) {
        file = join(file, "index.html");
        st = statSync(file);
      }
    } catch {
      res.writeHead(404, { "Content-Type": "text/plain" }).end(`not found: ${path}`);
      return;
    }
    const isolate = plain
      ? {}
      : { "Cross-Origin-Opener-Policy": "same-origin", "Cross-Origin-Embedder-Policy": "require-corp" };
    if (noWorkers) isolate["Content-Security-Policy"] = "worker-src 'none'";
    const etag = `"${st.size.toString(16)}-${Math.floor(st.mtimeMs).toString(16)}"`;
    const validators = { ETag: etag, "Last-Modified": st.mtime.toUTCString() };
    if (req.headers["if-none-match"] === etag) {
      res.writeHead(304, { ...validators, ...isolate, "Cross-Origin-Resource-Policy": "same-origin", "Cache-Control": "no-store" });
      return res.end();
    }
    res.writeHead(200, {
      ...validators,
      "Content-Type": TYPES[extname(file)] ?? "application/octet-stream",
      "Content-Length": st.size,
      ...isolate,
      "Cross-Origin-Resource-Policy": "same-origin",
      "Cache-Control": "no-store",
    });
    if (req.method === "HEAD") return res.end();
    createReadStream(file).pipe(res);
  });
  return new Promise((ok) => server.listen(port, "127.0.0.1", () => ok(server)));
}

/**
 * Counts the body bytes `server` sends for paths under `prefix`, as they are
 * written (so none lands in a later count): returns `{ bytes }`, which the
 * caller may reset.
 */
export function countSent(server, prefix) {
  const count = { bytes: 0 };
  server.on("request", (req, res) => {
    if (!new URL(req.url, "http://x").pathname.startsWith(prefix)) return;
    const write = res.write.bind(res);
    res.write = (chunk, ...rest) => {
      count.bytes += chunk?.length ?? 0;
      return write(chunk, ...rest);
    };
  });
  return count;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const server = await serve(Number(process.argv[2] ?? 8000));
  console.log(`serving ${ROOT} at http://127.0.0.1:${server.address().port}/`);
}
