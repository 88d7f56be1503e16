// What the Firefox tests share: a fresh Firefox running a function in the
// harness page (window.readout, the diagnostics build).
import { launchFirefox } from "../../harness/firefox.mjs";

/**
 * Runs `fn(arg)` in the harness page served at `base`, in a fresh Firefox;
 * `build: "threads"` loads the threaded build, `webgpu` enables WebGPU.
 */
export async function inFirefox(base, fn, arg, { webgpu = false, build = "single" } = {}) {
  const browser = await launchFirefox({ webgpu });
  const log = [];
  try {
    const page = await browser.newPage();
    page.on("console", (m) => log.push(m.text()));
    page.on("pageerror", (e) => log.push(`pageerror: ${e.message}`));
    await page.goto(`${base}/harness/page.html${build === "threads" ? "?build=threads" : ""}`);
    await page.waitForFunction(() => window.harnessReady, { timeout: 120_000 });
    return await page.evaluate(fn, arg);
  } catch (e) {
    e.message += `\n${log.slice(-15).join("\n")}`;
    throw e;
  } finally {
    await browser.close();
  }
}
