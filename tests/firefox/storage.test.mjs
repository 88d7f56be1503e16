// Model files kept across visits in Firefox ESR (the origin private file
// system): after a reload, the second load of a models.json entry reads
// every file from storage, fetches no model byte (counted by the server),
// and decides bit for bit as the first; a stored file with a byte changed
// is noticed, named and downloaded again; a rubric prefix kept on one
// visit is restored after a reload and decides bit for bit as the first
// visit's fresh prefill.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { launchFirefox } from "../../harness/firefox.mjs";
import { countSent, serve } from "../../harness/serve.mjs";
import { fixture, TINY } from "../browser/lib.mjs";
import { loadAndScore } from "../browser/storage_calls.mjs";
import { keptRun, PREFIX } from "../browser/kept_prefix_calls.mjs";

const STATES = fixture().slice(0, 2);
let server, base, sent;
before(async () => {
  server = await serve(0);
  // Model bytes the server sent, counted as they are written.
  sent = countSent(server, "/models/");
  base = `http://127.0.0.1:${server.address().port}`;
});
after(() => server.close());

/** A page in `browser` logging to `log`, and `open()`, which (re)loads the harness: a visit. */
async function harnessPage(browser, log) {
  const page = await browser.newPage();
  page.on("console", (m) => log.push(m.text()));
  const open = async () => {
    await page.goto(`${base}/harness/page.html`);
    await page.waitForFunction(() => window.harnessReady, { timeout: 120_000 });
  };
  return { page, open };
}

test("Firefox: a reload's load reads the model from storage (0 bytes from the network) and decides bit for bit as the first; a changed byte is noticed and healed", async () => {
  const browser = await launchFirefox();
  const log = [];
  try {
    const { page, open } = await harnessPage(browser, log);
    const source = `/models.json#${TINY}`;
    await open();
    const first = await page.evaluate(loadAndScore, { source, STATES });
    assert.equal(first.storage.used, true, first.storage.whyNot);
    await open();
    sent.bytes = 0;
    const second = await page.evaluate(loadAndScore, { source, STATES });
    assert.equal(sent.bytes, 0, "the second load fetched model bytes");
    assert.equal(second.storage.bytesDownloaded, 0);
    assert.equal(second.storage.bytesFromStorage, first.storage.bytesDownloaded);
    assert.deepEqual(second.probs, first.probs);
    const flipped = await page.evaluate(async () => {
      const root = await (await navigator.storage.getDirectory()).getDirectoryHandle("readout-files-v1");
      let big = null;
      for await (const [, dir] of root.entries()) {
        for await (const [name, h] of dir.entries()) {
          const size = (await h.getFile()).size;
          if (!name.endsWith(".meta.json") && (!big || size > big.size)) big = { name, h, size };
        }
      }
      const w = await big.h.createWritable({ keepExistingData: true });
      const b = new Uint8Array(await (await big.h.getFile()).slice(500, 501).arrayBuffer());
      await w.write({ type: "write", position: 500, data: new Uint8Array([b[0] ^ 0xff]) });
      await w.close();
      return decodeURIComponent(big.name);
    });
    const third = await page.evaluate(loadAndScore, { source, STATES });
    assert.deepEqual(third.storage.refetched.map((r) => r.file), [flipped]);
    assert.deepEqual(third.probs, first.probs);
    console.log(`# Firefox: ${second.storage.bytesFromStorage} bytes from storage (hashing ${second.storage.hashMs.toFixed(1)} ms), 0 from the network; ${flipped} altered: ${third.storage.refetched[0].why}`);
  } catch (e) {
    e.message += `\n${log.slice(-15).join("\n")}`;
    throw e;
  } finally {
    await browser.close();
  }
});

test("Firefox: a prefix kept on one visit is restored after a reload without a prefill, and decides bit for bit as the first visit's fresh one", async () => {
  const browser = await launchFirefox();
  const log = [];
  try {
    const { page, open } = await harnessPage(browser, log);
    const args = { source: `/models.json#${TINY}`, backend: "cpu", PREFIX, STATES, n: 2 };
    await open();
    const first = await page.evaluate(keptRun, args);
    await open();
    const second = await page.evaluate(keptRun, args);
    assert.equal(first.storage.from, "prefill", JSON.stringify(first.storage));
    assert.equal(first.storage.kept, true, first.storage.why);
    assert.equal(second.storage.from, "storage", JSON.stringify(second.storage));
    assert.ok(second.probs.length > 0);
    assert.deepEqual(second.probs, first.probs);
    console.log(`# Firefox: ${first.tokens}-token prefix, ${first.storage.bytes} bytes; prefill ${first.storage.ms.toFixed(0)} ms, restore ${second.storage.ms.toFixed(0)} ms; decisions equal`);
  } catch (e) {
    e.message += `\n${log.slice(-15).join("\n")}`;
    throw e;
  } finally {
    await browser.close();
  }
});
