// Shared set-up of the browser tests: the browser and harness page
// (harness/browser.mjs, shared with the benchmark studies), the tiny
// model, and native reference decisions.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "../../harness/browser.mjs";

export { harness, numberOption, ORT_BASE, ROOT, start } from "../../harness/browser.mjs";
export const TINY = "qwen3-tiny-random-q4";
export const OUT = join(ROOT, "target", "browser");

function readoutBin() {
  const bin = join(ROOT, "target", "debug", "readout");
  if (!existsSync(bin)) execFileSync("cargo", ["build", "--locked", "--bin", "readout"], { cwd: ROOT, stdio: "inherit" });
  return bin;
}

/** The native engine's decisions on the fixture (readout evaluate), or on `fixturePath`; `model` is a path under models/.
 * ONNX Runtime unless `args` names a runtime: the reference onnxruntime-web's backends are held to. */
export function nativeDecisions(model, args = [], fixturePath = "tests/fixtures/authored.jsonl") {
  if (!args.includes("--runtime")) args = ["--runtime", "ort", ...args];
  mkdirSync(OUT, { recursive: true });
  const tag = fixturePath.split("/").pop().replace(/\.jsonl$/, "");
  const out = join(OUT, `native-${model.replaceAll("/", "_")}-${tag}${args.map((a) => a.replace(/^--/, "-")).join("")}.json`);
  execFileSync(readoutBin(), ["evaluate", fixturePath, "--model", `models/${model}`, "--threads", "2", "--out", out, ...args], { cwd: ROOT, stdio: ["ignore", "ignore", "inherit"] });
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

/**
 * A page of the harness in `context` (a browser context of its own has its
 * own storage, kept across the page's reloads), with its console in `log`.
 */
export async function visit(ctx, context) {
  const page = await context.newPage();
  const log = [];
  page.on("console", (m) => log.push(m.text()));
  page.on("pageerror", (e) => log.push(`pageerror: ${e.message}`));
  await page.goto(`${ctx.base}/harness/page.html`);
  await page.waitForFunction(() => window.harnessReady, null, { timeout: 120_000 });
  return { page, log };
}

/** Reloads a harness page: a later visit, with the same storage. */
export async function revisit(page) {
  await page.reload();
  await page.waitForFunction(() => window.harnessReady, null, { timeout: 120_000 });
}
