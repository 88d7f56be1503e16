// Model files kept across visits (src/bindings/kept.rs, js/store.js) in
// Chromium, on the tiny models' models.json entries: a reload's load reads
// no model byte from the network and decides bit for bit as the first; a
// stored file with a byte changed, and one truncated, is noticed, named in
// info() and downloaded again; storage that refuses writes (QuotaExceeded,
// made by the page itself) leaves the load working from the network with
// nothing half-written behind; clearing removes only the engine's files; a
// model folder's files are kept only when asked, and checked by the
// server's ETag and the hash recorded when they were stored.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { cpSync, mkdirSync, rmSync, utimesSync } from "node:fs";
import { join } from "node:path";
import { countSent } from "../../harness/serve.mjs";
import { fixture, ORT_BASE, OUT, revisit, ROOT, start, TINY, visit as visitIn } from "./lib.mjs";
import { loadAndScore, rawFiles } from "./storage_calls.mjs";

const STATES = fixture().slice(0, 2);
let ctx, fetched;
before(async () => {
  ctx = await start();
  // Model bytes the server sent, counted as they are written (so none lands
  // in the next count); one test at a time.
  fetched = countSent(ctx.server, "/models/");
});
after(() => ctx?.close());

/** A page in a browser context of its own (its own storage), and the model bytes the server sent it. */
async function visit(context) {
  fetched.bytes = 0;
  return { ...(await visitIn(ctx, context)), fetched };
}

for (const backend of ["cpu", "wasm"]) {
  test(`${backend}: a reload's load reads every model file from storage (0 bytes from the network) and decides bit for bit as the first`, async () => {
    const context = await ctx.browser.newContext();
    try {
      const source = `/models.json#${TINY}`;
      const v = await visit(context);
      const first = await v.page.evaluate(loadAndScore, { source, backend, ORT_BASE, STATES });
      const firstNet = v.fetched.bytes;
      await revisit(v.page);
      v.fetched.bytes = 0;
      const second = await v.page.evaluate(loadAndScore, { source, backend, ORT_BASE, STATES });
      const total = first.storage.bytesDownloaded;
      assert.ok(total > 0 && first.storage.bytesFromStorage === 0, JSON.stringify(first.storage));
      assert.ok(firstNet >= total, `first load fetched ${firstNet} model bytes, the catalog lists ${total}`);
      assert.equal(first.storage.used, true, first.storage.whyNot);
      assert.deepEqual(second.storage.bytesFromStorage, total);
      assert.equal(second.storage.bytesDownloaded, 0);
      assert.equal(v.fetched.bytes, 0, "the second load fetched model bytes from the network");
      assert.ok(second.sources.every((s) => s === "storage"));
      assert.deepEqual(second.progressSources, ["storage"]);
      assert.deepEqual(second.probs, first.probs);
      console.log(`# ${backend}: first load ${total} bytes downloaded, second ${second.storage.bytesFromStorage} from storage (hashing ${second.storage.hashMs.toFixed(1)} ms), 0 from the network; ${first.probs.length} decisions equal`);
    } finally {
      await context.close();
    }
  });
}

test("a stored file with one byte changed, and one truncated, is noticed, named in info() and downloaded again; the decisions do not change", async () => {
  const context = await ctx.browser.newContext();
  try {
    const source = `/models.json#${TINY}`;
    const v = await visit(context);
    const first = await v.page.evaluate(loadAndScore, { source, backend: "cpu", ORT_BASE, STATES });
    // The two largest stored files: one gets a byte flipped, the other loses its last 10 bytes.
    const damaged = await v.page.evaluate(async () => {
      const root = await (await navigator.storage.getDirectory()).getDirectoryHandle("readout-files-v1");
      const files = [];
      for await (const [, dir] of root.entries()) {
        for await (const [name, h] of dir.entries()) if (!name.endsWith(".meta.json")) files.push({ name, h, size: (await h.getFile()).size });
      }
      files.sort((x, y) => y.size - x.size);
      const [flip, cut] = files;
      const w1 = await flip.h.createWritable({ keepExistingData: true });
      const b = new Uint8Array(await (await flip.h.getFile()).slice(1000, 1001).arrayBuffer());
      await w1.write({ type: "write", position: 1000, data: new Uint8Array([b[0] ^ 0xff]) });
      await w1.close();
      const w2 = await cut.h.createWritable({ keepExistingData: true });
      await w2.truncate(cut.size - 10);
      await w2.close();
      return [flip.name, cut.name].map(decodeURIComponent);
    });
    v.fetched.bytes = 0;
    const second = await v.page.evaluate(loadAndScore, { source, backend: "cpu", ORT_BASE, STATES });
    const named = second.storage.refetched.map((r) => r.file).sort();
    assert.deepEqual(named, [...damaged].sort(), JSON.stringify(second.storage.refetched));
    const why = Object.fromEntries(second.storage.refetched.map((r) => [r.file, r.why]));
    assert.match(why[damaged[0]], /hash to .*not the recorded/);
    assert.match(why[damaged[1]], /bytes are stored, \d+ recorded/);
    assert.ok(second.storage.bytesDownloaded > 0 && v.fetched.bytes >= second.storage.bytesDownloaded);
    assert.deepEqual(second.probs, first.probs);
    // Healed: the next load reads everything from storage again.
    const third = await v.page.evaluate(loadAndScore, { source, backend: "cpu", ORT_BASE, STATES });
    assert.equal(third.storage.bytesDownloaded, 0);
    assert.deepEqual(third.storage.refetched, []);
    console.log(`# damaged ${damaged.join(", ")}: ${second.storage.refetched.map((r) => `${r.file}: ${r.why}`).join("; ")}`);
  } finally {
    await context.close();
  }
});

test("storage that refuses writes (QuotaExceededError) leaves the load working from the network, says why, and leaves nothing half-written", async () => {
  const context = await ctx.browser.newContext();
  try {
    const source = `/models.json#${TINY}`;
    const v = await visit(context);
    const reference = await v.page.evaluate(loadAndScore, { source, backend: "cpu", ORT_BASE, STATES: STATES.slice(0, 1) });
    await v.page.evaluate(async () => {
      const { clearStored } = await import("/pkg/storage.js");
      await clearStored();
      // The browser's own error, from the write the engine makes.
      FileSystemWritableFileStream.prototype.write = () => Promise.reject(new DOMException("the quota is full", "QuotaExceededError"));
    });
    const r = await v.page.evaluate(loadAndScore, { source, backend: "cpu", ORT_BASE, STATES: STATES.slice(0, 1) });
    assert.equal(r.storage.used, false);
    assert.match(r.storage.whyNot, /QuotaExceededError: the quota is full/);
    assert.equal(r.storage.bytesFromStorage, 0);
    assert.deepEqual(r.probs, reference.probs);
    const left = await v.page.evaluate(rawFiles);
    assert.deepEqual(left, [], `left behind: ${JSON.stringify(left)}`);
    const listed = await v.page.evaluate(async () => (await import("/pkg/storage.js")).stored());
    assert.deepEqual(listed, []);
    console.log(`# quota: ${r.storage.whyNot}`);
  } finally {
    await context.close();
  }
});

test("keepFiles and persist take booleans only; stored() lists what the engine kept; deleteStored(entry) and clearStored() remove only the engine's files", async () => {
  const context = await ctx.browser.newContext();
  try {
    const v = await visit(context);
    const r = await v.page.evaluate(async ({ tiny, ORT_BASE }) => {
      const top = await navigator.storage.getDirectory();
      // Another library's files in the same origin's storage.
      const foreign = await top.getFileHandle("foreign.txt", { create: true });
      const w = await foreign.createWritable();
      await w.write("not the engine's");
      await w.close();
      await (await caches.open("foreign-cache")).put("/foreign", new Response("kept"));
      const { stored, deleteStored, clearStored } = await import("/pkg/storage.js");
      // The two storage options take booleans only; the next load works.
      const refused = [];
      for (const options of [{ keepFiles: "yes" }, { persist: 1 }]) {
        refused.push(await window.readout.Engine.load(`/models.json#${tiny}`, { backend: "cpu", ...options }).then(() => "loaded", (e) => `${e.code}:${e.field}`));
      }
      for (const id of [tiny, `${tiny}-trimmed`]) await (await window.readout.Engine.load(`/models.json#${id}`, { backend: "cpu" })).dispose();
      const all = await stored();
      const deleted = await deleteStored(tiny);
      const after = await stored();
      await clearStored();
      const cleared = await stored();
      return {
        refused,
        entries: [...new Set(all.map((f) => f.entry))].sort(), files: all.length, bytes: all.every((f) => f.bytes > 0 && f.storedAt > 0 && f.sha256),
        deleted, after: [...new Set(after.map((f) => f.entry))], cleared: cleared.length,
        foreign: await (await (await top.getFileHandle("foreign.txt")).getFile()).text(),
        foreignCache: await (await (await caches.open("foreign-cache")).match("/foreign")).text(),
      };
    }, { tiny: TINY, ORT_BASE });
    assert.deepEqual(r.refused, ["invalid_option:keepFiles", "invalid_option:persist"]);
    assert.deepEqual(r.entries, [TINY, `${TINY}-trimmed`].sort());
    assert.ok(r.bytes);
    assert.ok(r.deleted > 0);
    assert.deepEqual(r.after, [`${TINY}-trimmed`]);
    assert.equal(r.cleared, 0);
    assert.equal(r.foreign, "not the engine's");
    assert.equal(r.foreignCache, "kept");
  } finally {
    await context.close();
  }
});

test("a model folder's files are kept only with keepFolderFiles: true; a reload then reads them from storage while the server answers 304, and a file changed on the server or damaged in storage is fetched again", async () => {
  // A copy of the tiny model that this test owns (its files' times are changed below).
  const name = `folder-copy-${process.pid}`;
  const dir = join(OUT, name);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(OUT, { recursive: true });
  cpSync(join(ROOT, "models", TINY), dir, { recursive: true });
  const sent = countSent(ctx.server, `/target/browser/${name}/`);
  const context = await ctx.browser.newContext();
  try {
    const source = `/target/browser/${name}/`;
    const v = await visit(context);
    const run = (options) => v.page.evaluate(loadAndScore, { source, backend: "cpu", ORT_BASE, STATES: STATES.slice(0, 1), options });
    const off = await run({});
    assert.equal(off.storage.used, false);
    assert.match(off.storage.whyNot, /keepFolderFiles: true/);
    sent.bytes = 0;
    const first = await run({ keepFolderFiles: true });
    assert.equal(first.storage.used, true, first.storage.whyNot);
    assert.ok(first.storage.bytesDownloaded > 0 && sent.bytes >= first.storage.bytesDownloaded);
    await revisit(v.page);
    sent.bytes = 0;
    const second = await run({ keepFolderFiles: true });
    assert.equal(sent.bytes, 0, "the reload's load fetched model bytes (the server answers 304 with no body)");
    assert.equal(second.storage.bytesDownloaded, 0);
    assert.equal(second.storage.bytesFromStorage, first.storage.bytesDownloaded);
    assert.ok(second.sources.every((s) => s === "storage"));
    assert.deepEqual(second.probs, off.probs);
    // The server's copy changes (a new modification time, so a new ETag), and a stored file is damaged.
    const later = new Date(Date.now() + 60_000);
    utimesSync(join(dir, "config.json"), later, later);
    const damaged = await v.page.evaluate(async () => {
      const root = await (await navigator.storage.getDirectory()).getDirectoryHandle("readout-files-v1");
      for await (const [dname, d] of root.entries()) {
        if (!decodeURIComponent(dname).startsWith("folder ")) continue;
        let h;
        for await (const [fname, fh] of d.entries()) if (decodeURIComponent(fname) === "tokenizer.json") h = fh;
        const w = await h.createWritable({ keepExistingData: true });
        const b = new Uint8Array(await (await h.getFile()).slice(100, 101).arrayBuffer());
        await w.write({ type: "write", position: 100, data: new Uint8Array([b[0] ^ 0xff]) });
        await w.close();
        return "tokenizer.json";
      }
    });
    const third = await run({ keepFolderFiles: true });
    const why = Object.fromEntries(third.storage.refetched.map((r) => [r.file, r.why]));
    assert.deepEqual(Object.keys(why).sort(), ["config.json", damaged].sort(), JSON.stringify(third.storage.refetched));
    assert.match(why["config.json"], /validators changed \(stored ETag .*, now ETag /);
    assert.match(why[damaged], /hash to .*not the recorded/);
    assert.deepEqual(third.probs, off.probs);
    console.log(`# folder: ${first.storage.bytesDownloaded} bytes kept; reload: ${second.storage.bytesFromStorage} from storage, 0 sent; then ${third.storage.refetched.map((r) => `${r.file}: ${r.why}`).join("; ")}`);
  } finally {
    await context.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
