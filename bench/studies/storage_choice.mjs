// Which browser storage keeps the model files (issue "kept across visits"):
// Cache Storage against the origin private file system (OPFS), in Chromium
// and Firefox, on one real model file. Each is written the way the engine
// writes: the file streamed from the network, chunk by chunk as it arrives,
// under a temporary name, then put under its real name (OPFS: `move`; Cache
// Storage has no rename, so a second `put` of the stored response). Then it
// is read back as the engine reads, chunk by chunk, counting bytes. The
// browser's memory is sampled from outside every 25 ms (the resident set of
// every process under this one, from /proc) to give the peak a write adds.
// Writes bench/results/storage-choice/<date>-storage-choice-<file>.json (refused if taken).
//
//   node bench/studies/storage_choice.mjs [--file models/smollm2-135m-instruct-q4f16/model.onnx.data]
//        [--browsers chromium,firefox] [--rounds 2] [--out FILE]
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { option } from "../../harness/browser.mjs";
import { launch } from "../../harness/chromium.mjs";
import { launchFirefox } from "../../harness/firefox.mjs";
import { ROOT, serve } from "../../harness/serve.mjs";
import { resultPath, writeResult } from "../runners/result_file.mjs";

const a = process.argv.slice(2);
const file = option(a, "--file", "models/smollm2-135m-instruct-q4f16/model.onnx.data");
const browsers = option(a, "--browsers", "chromium,firefox").split(",");
const rounds = Number(option(a, "--rounds", 2));
const outArg = option(a, "--out", undefined);
if (a.length) throw new Error(`storage_choice: unknown arguments: ${a.join(" ")}`);
if (!existsSync(join(ROOT, file))) throw new Error(`storage_choice: ${file} is missing (run bash scripts/main.sh first)`);
const tag = file.split("/").slice(-2).join("-").replace(/[^A-Za-z0-9.-]/g, "-");
const out = resultPath("storage_choice", "storage-choice", `storage-choice-${tag}`, outArg);
const log = (l) => console.error(`[storage] ${l}`);

/** Resident bytes of every process below this one (the browser and its children). */
function treeRss() {
  const parent = new Map();
  const rss = new Map();
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      parent.set(Number(d), Number(fields[1]));
      rss.set(Number(d), Number(fields[21]) * 4096);
    } catch {}
  }
  let sum = 0;
  for (const [pid, bytes] of rss) {
    let p = parent.get(pid);
    while (p && p !== process.pid) p = parent.get(p);
    if (p === process.pid) sum += bytes;
  }
  return sum;
}

/** In the page: one write (streamed, temporary name, then the real name) and one read, timed. */
async function once({ url, kind }) {
  const chunks = async function* (body) {
    const reader = body.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      yield value;
    }
  };
  const t0 = performance.now();
  const resp = await fetch(url, { cache: "no-store" });
  let written = 0;
  if (kind === "cache") {
    const cache = await caches.open("storage-study");
    let feed;
    const body = new ReadableStream({ start: (c) => (feed = c) });
    const put = cache.put("/storage-study/file.tmp", new Response(body));
    for await (const c of chunks(resp.body)) {
      written += c.length;
      feed.enqueue(c);
    }
    feed.close();
    await put;
    const tmp = await cache.match("/storage-study/file.tmp");
    await cache.put("/storage-study/file", tmp);
    await cache.delete("/storage-study/file.tmp");
  } else {
    const root = await navigator.storage.getDirectory();
    const handle = await root.getFileHandle("storage-study.tmp", { create: true });
    const w = await handle.createWritable();
    for await (const c of chunks(resp.body)) {
      written += c.length;
      await w.write(c);
    }
    await w.close();
    await handle.move("storage-study");
  }
  const write = performance.now() - t0;
  const t1 = performance.now();
  let read = 0;
  const stored = kind === "cache"
    ? await (await caches.open("storage-study")).match("/storage-study/file")
    : new Response(await (await (await navigator.storage.getDirectory()).getFileHandle("storage-study")).getFile());
  for await (const c of chunks(stored.body)) read += c.length;
  const readMs = performance.now() - t1;
  if (kind === "cache") await caches.delete("storage-study");
  else await (await navigator.storage.getDirectory()).removeEntry("storage-study");
  return { written, read, write_ms: write, read_ms: readMs };
}

/** In the page: the same download kept in memory only (what a load does today), for the reference. */
async function network({ url }) {
  const t0 = performance.now();
  const resp = await fetch(url, { cache: "no-store" });
  const reader = resp.body.getReader();
  let n = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    n += value.length;
  }
  return { bytes: n, ms: performance.now() - t0 };
}

const bytes = statSync(join(ROOT, file)).size;
const server = await serve(0);
const base = `http://127.0.0.1:${server.address().port}`;
const results = [];
try {
  for (const name of browsers) {
    const browser = name === "firefox" ? await launchFirefox() : await launch({ webgpu: false });
    try {
      const page = await browser.newPage();
      await page.goto(`${base}/harness/page.html`);
      const ua = await page.evaluate(() => navigator.userAgent);
      const row = { browser: name, user_agent: ua, network: [], cache: [], opfs: [] };
      for (let r = 0; r < rounds; r++) {
        row.network.push(await page.evaluate(network, { url: `/${file}` }));
        for (const kind of r % 2 === 0 ? ["cache", "opfs"] : ["opfs", "cache"]) {
          await new Promise((res) => setTimeout(res, 500));
          const before = treeRss();
          let peak = before;
          const sampler = setInterval(() => (peak = Math.max(peak, treeRss())), 25);
          try {
            const m = await page.evaluate(once, { url: `/${file}`, kind });
            if (m.written !== bytes || m.read !== bytes) throw new Error(`${kind}: wrote ${m.written}, read ${m.read}, file ${bytes}`);
            row[kind].push({ ...m, peak_added_mb: (peak - before) / 1e6 });
          } finally {
            clearInterval(sampler);
          }
          log(`${name} ${kind}, round ${r + 1}: write ${row[kind].at(-1).write_ms.toFixed(0)} ms, read ${row[kind].at(-1).read_ms.toFixed(0)} ms, peak +${row[kind].at(-1).peak_added_mb.toFixed(0)} MB`);
        }
      }
      const med = (xs) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)];
      row.summary = Object.fromEntries(["cache", "opfs"].map((k) => [k, {
        write_ms: med(row[k].map((m) => m.write_ms)), read_ms: med(row[k].map((m) => m.read_ms)),
        peak_added_mb: Math.max(...row[k].map((m) => m.peak_added_mb)),
      }]));
      row.summary.network_ms = med(row.network.map((m) => m.ms));
      results.push(row);
    } finally {
      await browser.close();
    }
  }
} finally {
  server.close();
}
writeResult(out, "storage-choice", "bench/studies/storage_choice.mjs", { file, bytes, rounds, results });
log(`wrote ${out}`);
for (const r of results) log(`${r.browser}: ${JSON.stringify(r.summary)}`);
