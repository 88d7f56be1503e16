// The package's types, checked by `tsc -p tests/types` in the test command:
// what a TypeScript user writes must compile, and each `@ts-expect-error`
// line must stay an error (a misspelt option, a wrong value, a wrong type).
import init, { Engine, Prefix, State, defaultThreads, limits } from "../../pkg/readout.js";
import * as pkg from "../../pkg/readout.js";
import type { Decision, EngineInfo, Limits, ReadoutError, ScoreOptions } from "../../pkg/readout.js";
import * as threaded from "../../pkg/threads/readout.js";
import * as relaxed from "../../pkg/relaxed/readout.js";
import { bestBuild, relaxedBuild, threadedBuild } from "../../pkg/select.js";
import { fileFetch, initNode } from "../../pkg/node.js";
import * as worker from "../../pkg/worker.js";

export async function usage(): Promise<number> {
  // Either build, one API.
  const build = threadedBuild();
  const why: string = build.why;
  const lib = build.usable ? threaded : pkg;
  await lib.default();
  const either: EngineInfo = (await lib.Engine.load("/m/", { backend: "cpu" })).info();
  // @ts-expect-error: usable is a boolean
  const word: string = build.usable;
  // Three builds, one API: the fastest this page can run.
  const best = bestBuild();
  const three = best.build === "threads" ? threaded : best.build === "relaxed" ? relaxed : pkg;
  await three.default();
  const anyPage: boolean = relaxedBuild().usable;
  // @ts-expect-error: no such build
  const nope: typeof best.build = "simd";
  await init();
  // Node: the build's init handed over, and a fetch that reads file: URLs.
  await initNode(init);
  await initNode(threaded.default, { wasm: new URL("file:///pkg/threads/readout_bg.wasm") });
  const f: typeof fetch = fileFetch();
  // @ts-expect-error: initNode wants the build's init, not a path
  await initNode("/pkg/readout_bg.wasm");
  const l: Limits = limits();
  const most: number = l.maxOptions.cloze + l.maxOptions.letters + l.minOptions + l.letters.length;
  const threads: number = defaultThreads(8, true);
  const engine: Engine = await Engine.load("/models.json#smollm2-135m-instruct-q4f16", {
    backend: "auto",
    threads,
    onProgress: ({ file, loaded, total }) => console.log(file, loaded, total),
  });
  const plain: Engine = await Engine.load("/models/qwen3-tiny-random-q4/");
  const info: EngineInfo = engine.info();
  const state: State = await engine.prefill({ evidence: "The invoice was paid on 3 March." });
  const chat: State = await engine.prefill({ instruction: "Judge.", evidence: "x" }, { prompt: "chat", mode: "cloze" });
  // A shared prefix with a worked example; a state on it, grown by a line.
  const rubric: Prefix = await engine.prefix(
    {
      instruction: "Judge.",
      examples: [{ evidence: "Paid in cash.", criterion: { id: "e", question: "Paid?", options: [{ id: "yes", description: "Yes" }, { id: "no", description: "No" }] }, answer: "yes" }],
    },
    { mode: "cloze" },
  );
  const onRubric: State = await rubric.prefill({ evidence: "The invoice is overdue." });
  await onRubric.extend("A reminder was sent on 4 March.");
  const grown: number = onRubric.tokens + rubric.tokens;
  await onRubric.dispose();
  // Kept across visits: restored from storage, or from bytes the page keeps.
  const kept: Prefix = await engine.prefix({ instruction: "Judge." }, { keep: true });
  const from: "storage" | "prefill" | undefined = kept.storage?.from;
  const saved: Uint8Array = await rubric.save();
  const again: Prefix = await engine.restorePrefix(saved, { instruction: "Judge." }, { mode: "cloze" });
  // @ts-expect-error: keep is a boolean
  await engine.prefix({ instruction: "Judge." }, { keep: "yes" });
  console.log(from, again.tokens);
  await rubric.dispose();
  const criterion = {
    id: "paid",
    question: "Was the invoice paid?",
    options: [
      { id: "yes", description: "Yes" },
      { id: "no", description: "No" },
    ],
  };
  const opts: ScoreOptions = { mode: "cloze", clozeScore: "sum", calibration: "content-free" };
  const one: Decision = await state.score(criterion);
  const all: Decision[] = await state.scoreAll([criterion], opts);
  const p: number = one.probs[0].p + all[0].margin;
  const mass: number = (one.allowedMass ?? 0) + (all[0].orderUnstable ? 1 : 0);
  const ran: "sum" | "mean" = one.readout.clozeScore;
  const template: string = info.chatTemplate.status === "available" ? info.chatTemplate.source : info.chatTemplate.code;
  console.log(ran, info.backendReason, info.modelId, template);
  try {
    await chat.score(criterion, { mode: "letters", debias: "cyclic" });
  } catch (e) {
    const err = e as ReadoutError;
    const why: string = `${err.code} ${err.field ?? ""} ${err.limit ?? ""}`;
    console.log(why);
  }
  await state.dispose();
  await chat.dispose();
  await plain.dispose();
  await engine.dispose();
  return p + mass + grown + info.runLimit + state.tokens + most + l.sweep.suffixLengths.length;
}

export async function misuse(engine: Engine, state: State): Promise<void> {
  const c = { id: "c", question: "q", options: [{ id: "a", description: "A" }, { id: "b", description: "B" }] };
  // @ts-expect-error: "letter" is not a mode
  await state.score(c, { mode: "letter" });
  // @ts-expect-error: an unknown option
  await state.score(c, { calibrate: true });
  // @ts-expect-error: results are camelCase, as options are
  (await state.score(c)).allowed_mass;
  // @ts-expect-error: evidence is required
  await engine.prefill({ instruction: "x" });
  // @ts-expect-error: an example names its answer
  await engine.prefix({ examples: [{ evidence: "x", criterion: c }] });
  // @ts-expect-error: a state's growth is text
  await state.extend(["x"]);
  // @ts-expect-error: prompt is "plain" or "chat"
  await engine.prefill({ evidence: "x" }, { prompt: "jinja" });
  // @ts-expect-error: a backend by name only
  await Engine.load("/m/", { backend: "cuda" });
  // @ts-expect-error: options are objects with id and description
  await state.score({ id: "c", question: "q", options: ["a", "b"] });
  // The benchmark's and tests' entry points are not the package's API (they
  // live in the diagnostics build, pkg-diagnostics/).
  // @ts-expect-error: diagnostics only
  await engine.sweepIds(256, [1, 8]);
  // @ts-expect-error: diagnostics only
  await engine.prefillIds([1, 2, 3]);
  // @ts-expect-error: diagnostics only
  await engine.loseGpuDevice();
  // @ts-expect-error: diagnostics only
  await engine.endProfiling();
  // @ts-expect-error: diagnostics only
  await state.readIds([1], 2, true);
  // @ts-expect-error: diagnostics only
  await state.runBatched([c]);
  // @ts-expect-error: diagnostics only
  pkg.linearFit([1, 2], [3, 4]);
  // @ts-expect-error: diagnostics only
  pkg.median([1]);
  // @ts-expect-error: diagnostics only
  pkg.emptyPast("{}");
  // @ts-expect-error: diagnostics only
  await pkg.gpuReadoutSelfTest(new Float32Array(4), 1, 4, [0], false);
  // @ts-expect-error: diagnostics only
  await pkg.ReadoutBench.create(new Uint16Array(4), [0], "cpu");
  // @ts-expect-error: diagnostics only
  pkg.kernelSelfTest();
  // @ts-expect-error: diagnostics only
  pkg.poolFaultTest();
}

// readout/worker: the same API in a Worker, every call a promise.
export async function inWorker(): Promise<number> {
  const engine: worker.Engine = await worker.Engine.load("/models.json#smollm2-135m-instruct-q4f16", {
    build: "auto",
    ortBase: "/ort/",
    onProgress: ({ file, loaded, total }) => console.log(file, loaded, total),
  });
  const info: EngineInfo = await engine.info();
  const which: "single" | "relaxed" | "threads" = engine.build;
  const state: worker.State = await engine.prefill({ evidence: "x" }, { prompt: "chat" });
  const c = { id: "c", question: "q", options: [{ id: "a", description: "A" }, { id: "b", description: "B" }] };
  const d: Decision = await state.score(c, { mode: "cloze" });
  const rubric: worker.Prefix = await engine.prefix({ instruction: "Judge." });
  const on: worker.State = await rubric.prefill({ evidence: "y" });
  const bytes: Uint8Array = await rubric.save();
  const back: worker.Prefix = await engine.restorePrefix(bytes, { instruction: "Judge." });
  const whence: "storage" | "prefill" | undefined = (await engine.prefix({ instruction: "Judge." }, { keep: true })).storage?.from;
  console.log(back.tokens, whence);
  const l: Limits = await worker.limits();
  const n: number = await worker.defaultThreads(8, true);
  // @ts-expect-error: a build by name only
  await worker.Engine.load("/m/", { build: "both" });
  // @ts-expect-error: info() is a promise through the worker
  const sync: string = engine.info().backend;
  engine.terminate();
  await engine.dispose();
  console.log(info.backend, which, sync);
  return d.margin + on.tokens + l.minOptions + n;
}
