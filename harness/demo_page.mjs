// The demo page driven in headless Chromium, for scripts/demo.mjs (the main
// job) and the tests that hold the page to the native engine: what the page
// shows once the example has run, and one run of it.
import { mkdirSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { serve } from "./serve.mjs";
import { launch, launchPersistent } from "./chromium.mjs";

/** The port a kept profile's demo is served on (see driveDemo). */
const PROFILE_PORT = 8719;

/** Runs in the demo page: what it shows once the example has run (the badge, the table). */
export function readDecisionTable() {
  return {
    backend: document.getElementById("badge").dataset.backend,
    badge: document.getElementById("badge").textContent,
    info: document.getElementById("model-info").textContent,
    source: document.getElementById("model-source").textContent,
    fromStorage: Number(document.getElementById("model-source").dataset.fromStorage ?? NaN),
    downloaded: Number(document.getElementById("model-source").dataset.downloaded ?? NaN),
    summary: document.getElementById("summary").textContent,
    error: document.getElementById("state-error").textContent,
    decisions: [...document.querySelectorAll("#decisions tbody tr")].map((tr) => ({
      id: tr.dataset.criterion,
      answer: tr.dataset.answer ?? null,
      probs: tr.dataset.probs ? JSON.parse(tr.dataset.probs) : null,
      margin: Number(tr.querySelector(".margin")?.textContent ?? NaN),
      ms: Number(tr.querySelector(".ms")?.textContent ?? NaN),
      error: tr.dataset.error ? tr.querySelector(".error").textContent : null,
    })),
  };
}

/**
 * Drives the demo page headless: load, run the example, read the decision
 * table. `profile`: a browser profile folder kept between runs (the model
 * files the page stored are read from it on the next run).
 */
export async function driveDemo({ model, backend = "auto", screenshot, timeout = 1_200_000, profile, log = (l) => console.error(l) } = {}) {
  // Storage belongs to an origin, and the port is part of it: a kept profile
  // is only seen again from the same port.
  const server = await serve(profile ? PROFILE_PORT : 0);
  const query = new URLSearchParams({ ...(model ? { model } : {}), backend });
  const url = `http://127.0.0.1:${server.address().port}/www/?${query}`;
  const tail = [];
  const viewport = { width: 1180, height: 900 };
  const browser = profile ? await launchPersistent(profile, { webgpu: true, viewport }) : await launch({ webgpu: true });
  try {
    const page = await browser.newPage(profile ? undefined : { viewport });
    page.on("console", (m) => tail.push(m.text()));
    page.on("pageerror", (e) => tail.push(`pageerror: ${e.message}`));
    log(`[demo] ${url}`);
    await page.goto(url);
    // Loading shows bytes of bytes; echo it so a long download is visible.
    let last = "";
    const tick = setInterval(async () => {
      const t = await page.locator("#progress .label").textContent().catch(() => "");
      const s = await page.locator("#status").textContent().catch(() => "");
      const line = `${s} ${t}`.trim();
      if (line && line !== last) log(`[demo] ${line}`);
      last = line;
    }, 2000);
    try {
      await page.waitForFunction(() => ["ready", "error"].includes(document.getElementById("status").dataset.state), null, { timeout });
      if (await page.locator("#status").getAttribute("data-state") === "error") {
        throw new Error((await page.locator("#load-error").textContent()) || "the page reported an error");
      }
      log(`[demo] ${await page.locator("#badge").textContent()}`);
      log(`[demo] ${await page.locator("#model-info").textContent()}`);
      log(`[demo] ${await page.locator("#model-source").textContent()}`);
      await page.click("#run");
      await page.waitForFunction(() => ["done", "error"].includes(document.getElementById("status").dataset.state), null, { timeout });
    } finally {
      clearInterval(tick);
    }
    const result = await page.evaluate(readDecisionTable);
    if (screenshot) {
      mkdirSync(dirname(resolve(screenshot)), { recursive: true });
      await page.screenshot({ path: screenshot, fullPage: true });
      log(`[demo] screenshot ${screenshot}`);
    }
    if (result.error) throw new Error(result.error);
    return result;
  } catch (e) {
    e.message += `\n${tail.slice(-20).join("\n")}`;
    throw e;
  } finally {
    await browser.close();
    server.close();
  }
}
