// Shared set-up of the browser tests: the COOP/COEP server, Debian's
// Chromium, the harness page, and native reference decisions.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { serve, ROOT } from "../../scripts/serve.mjs";
import { launch } from "../../scripts/chromium.mjs";

export { ROOT };
export const ORT_BASE = "/node_modules/onnxruntime-web/dist/";
export const TINY = "qwen3-tiny-random-q4";
export const OUT = join(ROOT, "target", "browser");

export async function start({ webgpu = true } = {}) {
  const server = await serve(0);
  const base = `http://127.0.0.1:${server.address().port}`;
  const browser = await launch({ webgpu });
  const close = async () => {
    await browser.close();
    server.close();
  };
  return { server, base, browser, close };
}

/** A page with `window.readout` (the package) loaded through the import map. */
export async function harness(ctx, log = []) {
  const page = await ctx.browser.newPage();
  page.on("console", (m) => log.push(m.text()));
  page.on("pageerror", (e) => log.push(`pageerror: ${e.message}`));
  await page.goto(`${ctx.base}/tests/browser/harness.html`);
  await page.waitForFunction(() => window.harnessReady, null, { timeout: 120_000 });
  return page;
}

function readoutBin() {
  const bin = join(ROOT, "target", "debug", "readout");
  if (!existsSync(bin)) execFileSync("cargo", ["build", "--locked", "--bin", "readout"], { cwd: ROOT, stdio: "inherit" });
  return bin;
}

/** The native engine's decisions on the fixture (readout evaluate). */
export function nativeDecisions(model, args = []) {
  mkdirSync(OUT, { recursive: true });
  const out = join(OUT, `native-${model}${args.map((a) => a.replace(/^--/, "-")).join("")}.json`);
  execFileSync(readoutBin(), ["evaluate", "tests/fixtures/authored.jsonl", "--model", `models/${model}`, "--threads", "2", "--out", out, ...args], { cwd: ROOT, stdio: ["ignore", "ignore", "inherit"] });
  const rep = JSON.parse(readFileSync(out, "utf8"));
  return new Map(rep.rows.map((r) => [`${r.state}/${r.decision.id}`, r.decision]));
}

export function fixture() {
  return readFileSync(join(ROOT, "tests/fixtures/authored.jsonl"), "utf8").split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
}

/** max |Δp| and the criteria whose argmax differs, browser vs native. */
export function compare(browser, native) {
  let worst = 0;
  const changed = [];
  for (const [key, d] of browser) {
    const n = native.get(key);
    if (!n) throw new Error(`native has no decision ${key}`);
    d.probs.forEach((p, i) => (worst = Math.max(worst, Math.abs(p.p - n.probs[i].p))));
    if (d.answer !== n.answer) changed.push(key);
  }
  return { worst, changed };
}

/** Removes `--key N` from `args` and returns N as a number (or `fallback`). */
export function numberOption(args, key, fallback) {
  const i = args.indexOf(key);
  return i < 0 ? fallback : Number(args.splice(i, 2)[1]);
}
