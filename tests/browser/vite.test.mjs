// The front-end developer's path: pkg/ installed into a scratch Vite app
// (with onnxruntime-web as its peer dependency), built by Vite, served, and
// scoring in headless Chromium.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { cpSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { serve } from "../../scripts/serve.mjs";
import { launch } from "../../scripts/chromium.mjs";
import { OUT, ROOT, TINY } from "./lib.mjs";

test("pkg/ installed into a scratch Vite app builds and scores", async () => {
  const app = join(OUT, "vite-app");
  rmSync(app, { recursive: true, force: true });
  mkdirSync(join(app, "src"), { recursive: true });
  writeFileSync(join(app, "package.json"), JSON.stringify({ name: "scratch", private: true, type: "module" }));
  writeFileSync(join(app, "index.html"), `<!doctype html><script type="module" src="/src/main.js"></script>`);
  writeFileSync(
    join(app, "src/main.js"),
    `import init, { Engine } from "readout";
await init();
const engine = await Engine.load("./models/${TINY}/", { backend: "wasm", ortBase: "/ort/" });
const state = await engine.prefill({ evidence: "The kettle is on the stove and the water is boiling." });
const d = await state.score({ id: "c", question: "Is the water boiling?", options: [{ id: "yes", description: "Yes" }, { id: "no", description: "No" }] });
window.result = { decision: d, info: engine.info() };
`,
  );
  // Installed the way a developer would: the package directory and the peer
  // dependency from the npm cache this repository already holds.
  execFileSync("npm", ["install", "--no-audit", "--no-fund", "--ignore-scripts", "--offline", join(ROOT, "pkg"), join(ROOT, "node_modules/onnxruntime-web"), join(ROOT, "node_modules/vite")], { cwd: app, stdio: "inherit" });
  execFileSync(join(app, "node_modules/.bin/vite"), ["build", "--logLevel", "warn"], { cwd: app, stdio: "inherit" });
  // The built app, the model and onnxruntime-web's files, served with COOP/COEP.
  const dist = join(app, "dist");
  cpSync(join(ROOT, "models", TINY), join(dist, "models", TINY), { recursive: true });
  cpSync(join(ROOT, "node_modules/onnxruntime-web/dist"), join(dist, "ort"), { recursive: true });
  const server = await serve(0, dist);
  const browser = await launch();
  try {
    const page = await browser.newPage();
    const log = [];
    page.on("console", (m) => log.push(m.text()));
    page.on("pageerror", (e) => log.push(e.message));
    await page.goto(`http://127.0.0.1:${server.address().port}/`);
    await page.waitForFunction(() => window.result, null, { timeout: 180_000 }).catch((e) => {
      throw new Error(`${e.message}\n${log.join("\n")}`);
    });
    const r = await page.evaluate(() => window.result);
    assert.equal(r.info.backend, "wasm");
    assert.equal(r.decision.probs.length, 2);
    assert.ok(Math.abs(r.decision.probs[0].p + r.decision.probs[1].p - 1) < 1e-9);
    console.log(`# Vite app: ${r.decision.answer} p=${r.decision.probs[0].p.toFixed(4)}, backend ${r.info.backend}`);
  } finally {
    await browser.close();
    server.close();
  }
});
