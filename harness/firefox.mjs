// Debian's Firefox ESR (firefox-esr), headless, driven by puppeteer-core over
// WebDriver BiDi (no browser download). Firefox on Linux exposes
// `navigator.gpu` but gives no adapter by default; `webgpu: true` sets the
// preferences that enable it (the blocklist ignored, WebGPU forced on), and
// its wgpu then reaches Mesa's lavapipe, which has `shader-f16`.
import puppeteer from "puppeteer-core";

export const FIREFOX = process.env.FIREFOX ?? "/usr/bin/firefox-esr";

export const WEBGPU_PREFS = { "dom.webgpu.enabled": true, "gfx.webgpu.ignore-blocklist": true, "gfx.webgpu.force-enabled": true };

export function launchFirefox({ webgpu = false } = {}) {
  return puppeteer.launch({
    browser: "firefox", protocol: "webDriverBiDi", executablePath: FIREFOX, headless: true,
    extraPrefsFirefox: webgpu ? WEBGPU_PREFS : {},
  });
}
