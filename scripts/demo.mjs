// Serves the demo page (www/) with the COOP/COEP headers the WASM backend's
// threads need, and prints its URL; with --headless, drives Debian's Chromium
// through the page on the bundled example state and prints the decisions.
//
//   node scripts/demo.mjs [--port 8000]
//   node scripts/demo.mjs --headless [--model ID] [--backend auto|webgpu|wasm]
//                         [--screenshot FILE] [--json FILE] [--timeout-s 1200]
//                         [--profile DIR]   (a browser profile kept between runs:
//                                            the second run reads the model from storage)
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { serve } from "../harness/serve.mjs";
import { driveDemo } from "../harness/demo_page.mjs";

async function main() {
  const args = process.argv.slice(2);
  const flag = (k) => {
    const i = args.indexOf(k);
    return i < 0 ? false : (args.splice(i, 1), true);
  };
  const value = (k, d) => {
    const i = args.indexOf(k);
    return i < 0 ? d : args.splice(i, 2)[1];
  };
  const headless = flag("--headless");
  const port = Number(value("--port", headless ? 0 : 8000));
  const model = value("--model", undefined);
  const backend = value("--backend", "auto");
  const screenshot = value("--screenshot", undefined);
  const jsonOut = value("--json", undefined);
  const profile = value("--profile", undefined);
  const timeout = Number(value("--timeout-s", 1200)) * 1000;
  if (args.length) {
    console.error(`demo: unknown arguments ${args.join(" ")}`);
    process.exit(2);
  }

  if (!headless) {
    const server = await serve(port);
    const query = new URLSearchParams({ ...(model ? { model } : {}), backend });
    console.log(`readout demo: http://127.0.0.1:${server.address().port}/www/?${query}`);
    console.log("(Ctrl-C to stop)");
    return;
  }
  try {
    const result = await driveDemo({ model, backend, screenshot, timeout, profile });
    for (const d of result.decisions) {
      const probs = d.probs ? d.probs.map((p) => p.toFixed(3)).join(" ") : d.error;
      console.log(`${d.id.padEnd(12)} ${String(d.answer).padEnd(12)} ${probs}  (${d.ms} ms)`);
    }
    console.log(result.summary);
    if (jsonOut) {
      mkdirSync(dirname(resolve(jsonOut)), { recursive: true });
      writeFileSync(jsonOut, JSON.stringify(result, null, 2) + "\n");
    }
    if (result.decisions.some((d) => d.error)) process.exitCode = 1;
  } catch (e) {
    console.error(`[demo] failed: ${e.message}`);
    process.exitCode = 1;
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) await main();
