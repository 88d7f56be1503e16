// Development smoke run: load a model in headless Chromium and score one state.
//   node tests/browser/smoke.mjs <model dir url> <backend>
import { serve } from "./serve.mjs";
import { launch } from "./chromium.mjs";

const [dir = "/models/qwen3-tiny-random-q4/", backend = "wasm"] = process.argv.slice(2);
const server = await serve(0);
const base = `http://127.0.0.1:${server.address().port}`;
const browser = await launch();
const page = await browser.newPage();
page.on("console", (m) => console.log("[page]", m.text()));
page.on("pageerror", (e) => console.log("[pageerror]", e.message));
await page.goto(`${base}/tests/browser/${process.env.HARNESS ?? "harness.html"}`);
await page.waitForFunction(() => window.harnessReady, null, { timeout: 60000 });
const out = await page.evaluate(async ({ dir, backend }) => {
  const t0 = performance.now();
  try {
    const e = await window.readout.Engine.load(dir, { backend, ortBase: "/node_modules/onnxruntime-web/dist/" });
    const t1 = performance.now();
    const s = await e.prefill({ evidence: "The cat sat on the mat. It was a sunny day and the cat was happy." });
    const d = await s.score({ id: "c1", question: "Where did the cat sit?", options: [{ id: "mat", description: "On the mat" }, { id: "roof", description: "On the roof" }] });
    const t2 = performance.now();
    return { info: e.info(), d, load_ms: t1 - t0, score_ms: t2 - t1 };
  } catch (err) {
    return { error: String(err && err.stack || err) };
  }
}, { dir, backend });
console.log(JSON.stringify(out, null, 1).slice(0, 6000));
await browser.close();
server.close();
