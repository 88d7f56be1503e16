// Rubric prefixes kept across visits (src/engine/kept_prefixes.rs,
// src/bindings/kept_prefix.rs) in Chromium, on cpu and WASM: a prefix made
// with `keep: true` is prefilled and stored on the first visit, restored
// without a prefill after a reload, and the states built on it decide bit
// for bit as on the first visit's fresh prefill. On cpu, the refusals:
// bytes from another model, backend, engine version or prompt, truncated,
// altered, a damaged stored copy (thrown away and prefilled again), storage
// that refuses writes; a folder of the same files keys the same prefix; the
// engine scores after each.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { fixture, ORT_BASE, revisit, start, TINY, visit } from "./lib.mjs";
import { keptRun, PREFIX, storedPrefixes } from "./kept_prefix_calls.mjs";

const STATES = fixture().slice(0, 2);

let ctx;
before(async () => {
  ctx = await start();
});
after(() => ctx?.close());

// WebGPU's past through the host and back is tested in prefix.test.mjs, in
// one page (two loads on SwiftShader, each compiling every shader, cost 80 s
// here); the storage between visits is the same code on every backend.
const SHARE = { cpu: 2, wasm: 2 };
for (const backend of ["cpu", "wasm"]) {
  test(`${backend}: a prefix kept on one visit is restored after a reload without a prefill, and decides bit for bit as the first visit's fresh one`, async () => {
    const context = await ctx.browser.newContext();
    const v = await visit(ctx, context);
    try {
      const args = { source: `/models.json#${TINY}`, backend, ORT_BASE, PREFIX, STATES, n: SHARE[backend] };
      const first = await v.page.evaluate(keptRun, args);
      await revisit(v.page);
      const second = await v.page.evaluate(keptRun, args);
      assert.equal(first.backend, backend);
      assert.equal(first.storage.from, "prefill", JSON.stringify(first.storage));
      assert.match(first.storage.why, /no stored copy/);
      assert.equal(first.storage.kept, true, first.storage.why);
      assert.equal(second.storage.from, "storage", JSON.stringify(second.storage));
      assert.equal(second.storage.bytes, first.storage.bytes);
      assert.equal(second.tokens, first.tokens);
      assert.ok(second.probs.length > 0);
      assert.deepEqual(second.probs, first.probs);
      assert.equal(second.live, 0);
      const files = await v.page.evaluate(storedPrefixes);
      assert.equal(files.length, 1, JSON.stringify(files));
      console.log(`# ${backend}: ${first.tokens}-token prefix, ${first.storage.bytes} bytes stored; prefill ${first.storage.ms.toFixed(0)} ms, restore ${second.storage.ms.toFixed(0)} ms; ${second.probs.length} decisions equal`);
    } catch (e) {
      throw new Error(`${e.message}\n${v.log.slice(-10).join("\n")}`);
    } finally {
      await context.close();
    }
  });
}

test("cpu: a kept prefix from another model, backend, version or prompt, truncated or altered, is refused by field; a damaged stored copy is replaced; storage that refuses only costs the prefill; a folder of the same files restores the entry's prefix; the engine scores after each", async () => {
  const context = await ctx.browser.newContext();
  const v = await visit(ctx, context);
  try {
    const r = await v.page.evaluate(async ({ tiny, ORT_BASE, PREFIX, STATE }) => {
      const { Engine } = window.readout;
      const load = (id, backend = "cpu") => Engine.load(id.startsWith("/") ? id : `/models.json#${id}`, { backend, ortBase: ORT_BASE });
      const engine = await load(tiny);
      const p = await engine.prefix(PREFIX);
      const bytes = await p.save();
      const out = { refused: {}, after: {} };
      // The engine scores after each refusal, on a restored prefix.
      const scores = async (e) => {
        const q = await e.restorePrefix(bytes, PREFIX);
        const st = await q.prefill({ evidence: STATE.evidence });
        const n = (await st.score(STATE.criteria[0])).probs.length;
        await st.dispose();
        await q.dispose();
        return n;
      };
      const refuse = async (name, e, f) => {
        try {
          await f();
          out.refused[name] = "accepted";
        } catch (err) {
          out.refused[name] = `${err.code}:${err.field}`;
          if (err.limit !== undefined) out.refused[`${name}:limit`] = err.limit;
        }
        out.after[name] = e === engine ? await scores(engine) : await e.prefix(PREFIX).then((q) => q.tokens > 0);
      };
      const other = await load(`${tiny}-trimmed`);
      await refuse("model", other, () => other.restorePrefix(bytes, PREFIX));
      await other.dispose();
      // The WASM backend runs the entry's WASM variant: other files, so the
      // model differs before the runtime does (tests/prefixes.rs refuses a
      // runtime on the same files natively).
      const wasm = await load(tiny, "wasm");
      await refuse("wasm", wasm, () => wasm.restorePrefix(bytes, PREFIX));
      await wasm.dispose();
      // Another engine version, written into the header: the same length, so only the version differs.
      const text = new TextDecoder("latin1").decode(bytes);
      const at = text.indexOf('"engine":"') + 10;
      const older = bytes.slice();
      older[at] = older[at] === 57 ? 56 : 57;
      await refuse("engine", engine, () => engine.restorePrefix(older, PREFIX));
      await refuse("prompt", engine, () => engine.restorePrefix(bytes, PREFIX, { prompt: "chat" }));
      await refuse("ids", engine, () => engine.restorePrefix(bytes, { instruction: "Another rubric." }));
      await refuse("truncated", engine, () => engine.restorePrefix(bytes.slice(0, bytes.length - 100), PREFIX));
      out.length = bytes.length;
      const altered = bytes.slice();
      altered[bytes.length - 1000] ^= 1;
      await refuse("altered", engine, () => engine.restorePrefix(altered, PREFIX));
      // Bytes saved, restored without a spec: the same prefix.
      out.bare = (await engine.restorePrefix(bytes)).tokens === p.tokens;
      // A stored copy damaged on disk: refused, removed, prefilled and stored again.
      const kept = await engine.prefix(PREFIX, { keep: true });
      const root = await (await navigator.storage.getDirectory()).getDirectoryHandle("readout-files-v1");
      for await (const [, dir] of root.entries()) {
        for await (const [name, h] of dir.entries()) {
          if (!name.startsWith("prefix-") || name.endsWith(".meta.json")) continue;
          const w = await h.createWritable({ keepExistingData: true });
          const f = await h.getFile();
          const b = new Uint8Array(await f.slice(f.size - 2000, f.size - 1999).arrayBuffer());
          await w.write({ type: "write", position: f.size - 2000, data: new Uint8Array([b[0] ^ 0xff]) });
          await w.close();
        }
      }
      const damaged = await engine.prefix(PREFIX, { keep: true });
      const healed = await engine.prefix(PREFIX, { keep: true });
      out.damaged = [kept.storage.from, damaged.storage.from, damaged.storage.why, healed.storage.from];
      // Storage that refuses writes: the prefix is prefilled, not kept, and nothing is left.
      const { clearStored, stored } = await import("/pkg/storage.js");
      await clearStored();
      const write = FileSystemWritableFileStream.prototype.write;
      FileSystemWritableFileStream.prototype.write = () => Promise.reject(new DOMException("the quota is full", "QuotaExceededError"));
      const quota = await engine.prefix(PREFIX, { keep: true });
      FileSystemWritableFileStream.prototype.write = write;
      out.quota = { from: quota.storage.from, kept: quota.storage.kept, why: quota.storage.why, left: (await stored()).length };
      out.quota.scores = await scores(engine);
      // A folder is keyed by the hashes of the files it served: the same
      // files as the entry's, so the entry's prefix restores there too.
      const folder = await load(`/models/${tiny}/`);
      const fromFolder = await folder.prefix(PREFIX, { keep: true });
      out.folder = { from: fromFolder.storage.from, kept: fromFolder.storage.kept };
      out.folderRestores = (await folder.restorePrefix(bytes, PREFIX)).tokens === p.tokens;
      await folder.dispose();
      await engine.dispose();
      return out;
    }, { tiny: TINY, ORT_BASE, PREFIX, STATE: STATES[0] });
    assert.deepEqual(r.refused, {
      model: "stale_prefix:model",
      wasm: "stale_prefix:model",
      engine: "stale_prefix:engine",
      prompt: "stale_prefix:prompt",
      ids: "stale_prefix:ids",
      truncated: "stale_prefix:bytes",
      "truncated:limit": r.length,
      altered: "stale_prefix:checksum",
    });
    const n = STATES[0].criteria[0].options.length;
    assert.deepEqual(Object.values(r.after), [true, true, n, n, n, n, n]);
    assert.equal(r.bare, true);
    assert.deepEqual(r.damaged.slice(0, 2), ["prefill", "prefill"]);
    assert.match(r.damaged[2], /refused and removed: stale_prefix at checksum/);
    assert.equal(r.damaged[3], "storage");
    assert.equal(r.quota.from, "prefill");
    assert.equal(r.quota.kept, false);
    assert.match(r.quota.why, /QuotaExceededError: the quota is full/);
    assert.equal(r.quota.left, 0);
    assert.equal(r.quota.scores, n);
    assert.deepEqual(r.folder, { from: "prefill", kept: true });
    assert.equal(r.folderRestores, true);
    console.log(`# refusals: ${JSON.stringify(r.refused)}; damaged copy: ${r.damaged[2]}`);
  } catch (e) {
    throw new Error(`${e.message}\n${v.log.slice(-10).join("\n")}`);
  } finally {
    await context.close();
  }
});
