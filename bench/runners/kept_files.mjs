// What keeping the model files costs and saves, in Chromium and Firefox:
// one models.json entry loaded on the cpu backend in a fresh profile (every
// file downloaded and written to storage as it arrives), then loaded again
// after a reload (every file read from storage and hashed again). Records
// each load's time, the bytes from the network (counted by the server) and
// from storage, and the time the second load spent hashing: its share of
// the load is what decides whether every read is hashed (the goal: < 5 %).
// Rounds alternate nothing (the order is the point); each round is a fresh
// profile. Writes bench/results/kept-files/<date>-kept-files-<model>.json (refused if taken).
//
//   node bench/runners/kept_files.mjs [--model smollm2-135m-instruct-q4f16]
//        [--browsers chromium,firefox] [--rounds 2] [--out FILE]
import { existsSync } from "node:fs";
import { join } from "node:path";
import { option } from "../../harness/browser.mjs";
import { launch } from "../../harness/chromium.mjs";
import { launchFirefox } from "../../harness/firefox.mjs";
import { countSent, ROOT, serve } from "../../harness/serve.mjs";
import { resultPath, writeResult } from "./result_file.mjs";

const a = process.argv.slice(2);
const model = option(a, "--model", "smollm2-135m-instruct-q4f16");
const browsers = option(a, "--browsers", "chromium,firefox").split(",");
const rounds = Number(option(a, "--rounds", 2));
const outArg = option(a, "--out", undefined);
if (a.length) throw new Error(`kept_files: unknown arguments: ${a.join(" ")}`);
if (!existsSync(join(ROOT, "models.json"))) throw new Error("kept_files: no models.json (run bash scripts/main.sh first)");
const out = resultPath("kept_files", "kept-files", `kept-files-${model}`, outArg);
const log = (l) => console.error(`[kept] ${l}`);

/** In the page: one load on cpu, timed, with what info() says of storage. */
async function loadOnce({ source }) {
  const t0 = performance.now();
  const engine = await window.readout.Engine.load(source, { backend: "cpu", persist: false });
  const ms = performance.now() - t0;
  const info = engine.info();
  await engine.dispose();
  return { load_ms: ms, engine_load_ms: info.loadMs, storage: info.storage };
}

const server = await serve(0);
// Model bytes the server sent, counted as they are written.
const sent = countSent(server, "/models/");
const base = `http://127.0.0.1:${server.address().port}`;
const results = [];
try {
  for (const name of browsers) {
    const row = { browser: name, rounds: [] };
    for (let r = 0; r < rounds; r++) {
      const browser = name === "firefox" ? await launchFirefox() : await launch({ webgpu: false });
      try {
        const page = await browser.newPage();
        const ready = () => page.waitForFunction(() => window.harnessReady, ...(name === "firefox" ? [{ timeout: 120_000 }] : [null, { timeout: 120_000 }]));
        await page.goto(`${base}/harness/page.html`);
        await ready();
        row.user_agent ??= await page.evaluate(() => navigator.userAgent);
        sent.bytes = 0;
        const first = { ...(await page.evaluate(loadOnce, { source: `/models.json#${model}` })), network_bytes: sent.bytes };
        await page.reload();
        await ready();
        sent.bytes = 0;
        const second = { ...(await page.evaluate(loadOnce, { source: `/models.json#${model}` })), network_bytes: sent.bytes };
        row.rounds.push({ first, second, hash_share_of_load: second.storage.hashMs / second.engine_load_ms });
        log(`${name} round ${r + 1}: first ${first.load_ms.toFixed(0)} ms (${first.network_bytes} B from the network), second ${second.load_ms.toFixed(0)} ms (${second.network_bytes} B from the network, ${second.storage.bytesFromStorage} B from storage, hashing ${second.storage.hashMs.toFixed(0)} ms)`);
      } finally {
        await browser.close();
      }
    }
    results.push(row);
  }
} finally {
  server.close();
}
const shares = results.flatMap((r) => r.rounds.map((x) => x.hash_share_of_load));
writeResult(out, "kept-files", "bench/runners/kept_files.mjs", {
  model, backend: "cpu",
  goals: { hash_share_of_load: { value: Math.max(...shares), goal: "< 0.05 (hash every read)" }, second_load_network_bytes: { value: Math.max(...results.flatMap((r) => r.rounds.map((x) => x.second.network_bytes))), goal: "0" } },
  results,
});
log(`wrote ${out}`);
