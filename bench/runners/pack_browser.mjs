// Packed branches in Chromium on the cpu backend (our own kernels in wasm):
// the same states scored with `packBranches: true` and `false` on the same
// page, model and build, in one run; writes JSON with every time and the
// ratios (the native counterpart is bench/runners/own_pack.sh).
//
//   node bench/runners/pack_browser.mjs [--model smollm2-135m-instruct-q4f16]
//        [--states 3] [--out FILE]
//
// Needs the package (bash scripts/build_pkg.sh) and the model under models/.
import { join } from "node:path";
import { serve, ROOT } from "../../harness/serve.mjs";
import { launch } from "../../harness/chromium.mjs";
import { eightCriteriaStates, PACK_GOALS, packRatios } from "./pack_common.mjs";
import { resultPath, writeResult } from "./result_file.mjs";

function parseArgs(argv) {
  const a = [...argv];
  const take = (k, d) => {
    const i = a.indexOf(k);
    return i < 0 ? d : a.splice(i, 2)[1];
  };
  const o = {
    model: take("--model", "smollm2-135m-instruct-q4f16"),
    states: Number(take("--states", 3)),
    out: take("--out", undefined),
  };
  if (a.length) throw new Error(`unknown arguments: ${a.join(" ")}`);
  if (!(o.states >= 1)) throw new Error(`--states: ${o.states} is not a positive number`);
  return o;
}

const CONFIGS = {
  letters: { prefill: {}, score: {} },
  cyclic: { prefill: {}, score: { debias: "cyclic" } },
  cloze: { prefill: { mode: "cloze" }, score: { mode: "cloze" } },
};

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const out = resultPath("pack_browser", "pack-browser", "pack-browser", o.out);
  const states = eightCriteriaStates().slice(0, o.states);
  const server = await serve(0);
  const base = `http://127.0.0.1:${server.address().port}`;
  const browser = await launch({ webgpu: false });
  const runs = {};
  try {
    const page = await browser.newPage();
    const log = [];
    page.on("console", (m) => log.push(m.text()));
    await page.goto(`${base}/pkg/package.json`);
    for (const pack of [false, true]) {
      for (const [name, call] of Object.entries(CONFIGS)) {
        const key = `${name}-${pack ? "on" : "off"}`;
        console.error(`pack_browser: ${key}`);
        runs[key] = await page.evaluate(
          async ({ source, pack, states, call }) => {
            const { default: init, Engine } = await import("/pkg/readout.js");
            await init();
            const engine = await Engine.load(source, { backend: "cpu", packBranches: pack });
            let ms = 0;
            let criteria = 0;
            for (const s of states) {
              const state = await engine.prefill(s, call.prefill);
              const t0 = performance.now();
              const d = await state.scoreAll(s.criteria, call.score);
              ms += performance.now() - t0;
              criteria += d.length;
              await state.dispose();
            }
            const info = engine.info();
            await engine.dispose();
            return { criteria, ms_per_criterion: ms / criteria, runtime: info.runtime, backend: info.backend };
          },
          { source: `/models/${o.model}/`, pack, states, call },
        );
      }
    }
  } finally {
    await browser.close();
    server.close();
  }
  const ratios = packRatios(runs);
  const r = {
    model: o.model,
    states: states.length,
    threads: 1,
    note: "Chromium headless, cpu backend (our kernels, SIMD128, one thread: the threaded wasm build is not made); ms_per_criterion: scoreAll time per criterion (baselines none), prefills excluded; off = one run per branch, on = packed; same page and build, one run",
    goals: PACK_GOALS,
    runs,
    ratios,
  };
  writeResult(out, "pack-browser", "bench/runners/pack_browser.mjs", r);
  for (const [k, v] of Object.entries(ratios)) console.error(`pack_browser: ${k} ${v.toFixed(2)}`);
  console.error(`pack_browser: wrote ${out}`);
}

main().catch((e) => {
  console.error(`pack_browser: ${e.stack ?? e}`);
  process.exit(1);
});
