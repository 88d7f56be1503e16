// Debian's Chromium, headless, driven by playwright-core (no browser download).
import { chromium } from "playwright-core";

export const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
const BASE_FLAGS = ["--no-sandbox", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"];

/** `webgpu: false` launches without --enable-unsafe-webgpu, so the page has no WebGPU adapter. */
export function launch({ webgpu = true } = {}) {
  const args = [...BASE_FLAGS, ...(webgpu ? ["--enable-unsafe-webgpu"] : ["--disable-features=WebGPU"])];
  return chromium.launch({ executablePath: CHROMIUM, args, headless: true });
}

/**
 * The same Chromium with a profile kept in `dir` (its storage survives, as a
 * user's does between visits); resolves with a BrowserContext.
 */
export function launchPersistent(dir, { webgpu = true, viewport } = {}) {
  const args = [...BASE_FLAGS, ...(webgpu ? ["--enable-unsafe-webgpu"] : ["--disable-features=WebGPU"])];
  return chromium.launchPersistentContext(dir, { executablePath: CHROMIUM, args, headless: true, viewport });
}
