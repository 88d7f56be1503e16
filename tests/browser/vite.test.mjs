// The front-end developer's path: examples/vite-app, with the package
// installed from `npm pack`'s tarball and built by `vite build`
// (tests/browser/vite_app.mjs), served as static files, loading the tiny
// model through readout/worker in headless Chromium: the threaded build
// on the cpu backend where the page is cross-origin isolated, the single
// build on onnxruntime-web's WASM backend where it is not. Each decision is
// held to the native engine's on the same state.
import { test } from "node:test";
import { join } from "node:path";
import { serve } from "../../harness/serve.mjs";
import { launch } from "../../harness/chromium.mjs";
import { OUT } from "./lib.mjs";
import { buildViteApp, checkViteResult, VITE_CASES } from "./vite_app.mjs";

test("examples/vite-app, installed from the packed tarball and built by Vite, scores through the worker in Chromium", { timeout: 600_000 }, async () => {
  const dist = buildViteApp(join(OUT, "vite-app"));
  const server = await serve(0, dist);
  const browser = await launch();
  const base = `http://127.0.0.1:${server.address().port}`;
  try {
    for (const c of VITE_CASES) {
      const path = c.path;
      const page = await browser.newPage();
      const log = [];
      page.on("console", (m) => log.push(m.text()));
      page.on("pageerror", (e) => log.push(e.message));
      await page.goto(`${base}${path}`);
      await page.waitForFunction(() => window.result, null, { timeout: 180_000 }).catch((e) => {
        throw new Error(`${e.message}\n${log.join("\n")}`);
      });
      const r = await page.evaluate(() => window.result);
      console.log(`# Vite app in Chromium, ${checkViteResult(r, c, log)}`);
      await page.close();
    }
  } finally {
    await browser.close();
    server.close();
  }
});
