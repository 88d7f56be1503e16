// The headless browser set-up that the browser tests and the benchmark
// studies share: the COOP/COEP server, Debian's Chromium, and a page with
// the diagnostics build loaded (harness/page.html).
import { serve, ROOT } from "./serve.mjs";
import { launch } from "./chromium.mjs";

export { ROOT };
export const ORT_BASE = "/node_modules/onnxruntime-web/dist/";

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

/**
 * A page with `window.readout` (the diagnostics build) loaded through the
 * import map; `build: "threads"` or `"relaxed"` loads that build; `isolated: false`
 * serves the page without COOP/COEP; `workers: false` serves it isolated
 * with a Content-Security-Policy that forbids Web Workers.
 */
export async function harness(ctx, log = [], { build = "single", isolated = true, workers = true } = {}) {
  const page = await ctx.browser.newPage();
  page.on("console", (m) => log.push(m.text()));
  page.on("pageerror", (e) => log.push(`pageerror: ${e.message}`));
  const query = build === "single" ? "" : `?build=${build}`;
  const prefix = !isolated ? "/plain" : !workers ? "/noworkers" : "";
  await page.goto(`${ctx.base}${prefix}/harness/page.html${query}`);
  await page.waitForFunction(() => window.harnessReady, null, { timeout: 120_000 });
  return page;
}

/**
 * Runs `run(arg)` inside `page` under Chromium's sampling profiler (CDP
 * Profiler domain, one sample every `intervalUs` microseconds, the page's
 * own thread only) and returns `{ result, profile }`.
 */
export async function sampled(page, intervalUs, run, arg) {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send("Profiler.enable");
  await cdp.send("Profiler.setSamplingInterval", { interval: intervalUs });
  await cdp.send("Profiler.start");
  const result = await page.evaluate(run, arg);
  const { profile } = await cdp.send("Profiler.stop");
  return { result, profile };
}

/** Self time in ms per function name from a CDP `Profiler.stop` profile. */
export function selfTimes(profile) {
  const self = {};
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  profile.samples.forEach((id, i) => {
    const n = byId.get(id);
    const name = n.callFrame.functionName || `(${n.callFrame.url.split("/").pop() || "program"})`;
    self[name] = (self[name] ?? 0) + (profile.timeDeltas[i] ?? 0) / 1000;
  });
  return self;
}

/** Removes `--key V` from `args` and returns V (or `fallback`). */
export function option(args, key, fallback) {
  const i = args.indexOf(key);
  return i < 0 ? fallback : args.splice(i, 2)[1];
}

/** `option`, but a flag given with no value stops `prog` naming the flag. */
export function valueOption(args, key, fallback, prog) {
  const v = option(args, key, fallback);
  if (v === undefined || String(v).startsWith("--")) {
    console.error(`${prog}: ${key} needs a value`);
    process.exit(2);
  }
  return v;
}

/** Removes `--key N` from `args` and returns N as a number (or `fallback`). */
export function numberOption(args, key, fallback) {
  const v = option(args, key, undefined);
  return v === undefined ? fallback : Number(v);
}

/** Removes the flag `--key` from `args` and says whether it was there. */
export function flagOption(args, key) {
  const i = args.indexOf(key);
  return i < 0 ? false : (args.splice(i, 1), true);
}
