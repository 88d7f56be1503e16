// Runs the package in Deno, whose WebGPU is wgpu's own: on this project's
// machines it reaches Mesa's lavapipe, a Vulkan driver on the CPU that has
// `shader-f16`, so float16 (q4f16) graphs run on WebGPU here, where
// Chromium's only adapter (SwiftShader) cannot. Times under lavapipe are a
// CPU's emulating a GPU: every result that carries one says `emulated`.
//
// `denoEvaluate(fn, arg)` is the Deno twin of Playwright's `page.evaluate`:
// `fn` runs in Deno with `globalThis.readout` (the package's diagnostics
// build, or `build`) loaded, and its JSON result comes back. Model
// directories and onnxruntime-web's files are read through `file://` URLs
// (`fileUrl`, `DENO_ORT_BASE`).
import { spawn } from "node:child_process";
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { ROOT } from "./serve.mjs";

export const DENO = join(ROOT, "node_modules", ".bin", "deno");

/** The `file://` URL of a path under the repository (a trailing `/` kept). */
export function fileUrl(rel) {
  const href = pathToFileURL(join(ROOT, rel)).href;
  return rel.endsWith("/") && !href.endsWith("/") ? `${href}/` : href;
}

export const DENO_ORT_BASE = fileUrl("node_modules/onnxruntime-web/dist/");

/** Whether Deno is installed (scripts/setup.sh installs it from npm). */
export function denoAvailable() {
  return existsSync(DENO);
}

/**
 * Runs `fn(arg)` in a fresh Deno process with the package loaded; resolves
 * to its result, or rejects with the error it threw (its `code`, `field`
 * and `limit` kept) and the process's last output lines. `onLine` is
 * called with each line the process prints, as it prints it.
 */
export function denoEvaluate(fn, arg, { build = "pkg-diagnostics", timeoutMs = 900_000, log = [], onLine } = {}) {
  // Mesa's Vulkan loader wants a runtime dir for its window-system probing.
  const xdg = process.env.XDG_RUNTIME_DIR || `/tmp/readout-xdg-${process.getuid?.() ?? 0}`;
  mkdirSync(xdg, { recursive: true, mode: 0o700 });
  const args = [
    "run", "--quiet", "--no-prompt", "--no-config",
    `--allow-read=${ROOT}`, "--allow-env",
    `--import-map=${join(ROOT, "harness", "deno_import_map.json")}`,
    join(ROOT, "harness", "deno_harness.mjs"),
  ];
  return new Promise((resolve, reject) => {
    const child = spawn(DENO, args, { cwd: ROOT, env: { ...process.env, XDG_RUNTIME_DIR: xdg, NO_COLOR: "1" } });
    let out = "";
    const lines = [];
    const keep = (chunk) => {
      for (const l of chunk.toString().split("\n")) {
        if (!l.trim() || l.startsWith("@@")) continue;
        lines.push(l);
        onLine?.(l);
      }
      while (lines.length > 40) lines.shift();
    };
    child.stdout.on("data", (c) => { out += c; keep(c); });
    child.stderr.on("data", keep);
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill("SIGKILL");
    }, timeoutMs);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      log.push(...lines);
      const res = out.split("\n").find((l) => l.startsWith("@@result "));
      const err = out.split("\n").find((l) => l.startsWith("@@error "));
      if (res) return resolve(JSON.parse(res.slice(9)));
      const why = timedOut ? `deno was stopped after ${timeoutMs / 1000} s without a result` : `deno exited ${signal ?? code} with no result`;
      const e = new Error(err ? JSON.parse(err.slice(8)).message : `${why}\n${lines.join("\n")}`);
      if (err) Object.assign(e, JSON.parse(err.slice(8)));
      e.denoLog = lines;
      reject(e);
    });
    child.stdin.end(JSON.stringify({ fn: fn.toString(), arg, build }));
  });
}
