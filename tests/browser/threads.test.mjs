// The threaded browser build of our runtime (pkg-diagnostics/threads: wasm
// atomics, shared memory, kernel Web Workers) in a real headless Chromium on
// a cross-origin isolated page, against the single-thread build on the same
// page server: the split work must not change a bit of any decision.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { fixture, harness, ROOT, start, TINY } from "./lib.mjs";

let ctx;
before(async () => {
  ctx = await start({ webgpu: false });
});
after(() => ctx?.close());

/** Loads the tiny model on the cpu backend in a fresh page of `build`, scores `states`. */
async function score(build, states, threads, isolated = true) {
  const log = [];
  const page = await harness(ctx, log, { build, isolated });
  try {
    return await page.evaluate(
      async ({ source, states, threads }) => {
        const { Engine } = window.readout;
        const engine = await Engine.load(source, { backend: "cpu", ...(threads ? { threads } : {}) });
        const decisions = [];
        const t0 = performance.now();
        for (const s of states) {
          const state = await engine.prefill(s);
          for (const d of await state.scoreAll(s.criteria)) decisions.push([`${s.id}/${d.id}`, d.probs.map((p) => p.p)]);
          await state.dispose();
        }
        const ms = performance.now() - t0;
        const info = engine.info();
        await engine.dispose();
        return { decisions, info, ms, isolated: self.crossOriginIsolated };
      },
      { source: `/models/${TINY}/`, states, threads },
    );
  } catch (e) {
    throw new Error(`${e.message}\n${log.join("\n")}`);
  } finally {
    await page.close();
  }
}

test("threaded build: 2 threads on the relaxed-SIMD kernel give the single-thread SIMD128 build's decisions bit for bit, and say how they run", async () => {
  const states = fixture();
  const one = await score("single", states, 2);
  const two = await score("threads", states, 2);
  assert.equal(two.isolated, true);
  assert.match(one.info.runtime, /1 thread\).*single-thread build, 2 asked: this is the single-thread build/);
  assert.match(two.info.runtime, /^readout kernels \(int8 activations, relaxed-simd kernel, 2 threads\).*threaded build, 2 asked: this thread and 1 worker\b/);
  assert.equal(two.info.threads, 2);
  assert.equal(two.decisions.length, 89);
  const single = new Map(one.decisions);
  for (const [key, probs] of two.decisions) assert.deepEqual(probs, single.get(key), key);
  console.log(`# threaded build: 89 criteria identical to the single-thread build; ${two.ms.toFixed(0)} ms at 2 threads, ${one.ms.toFixed(0)} ms at 1`);
});

test("relaxed build on a page that is not cross-origin isolated: one thread on the relaxed-SIMD kernel gives the SIMD128 build's decisions bit for bit", async () => {
  const states = fixture();
  const one = await score("single", states, undefined, false);
  const relaxed = await score("relaxed", states, undefined, false);
  assert.equal(relaxed.isolated, false);
  assert.match(one.info.runtime, /^readout kernels \(int8 activations, simd128 kernel, 1 thread\)/);
  assert.match(relaxed.info.runtime, /^readout kernels \(int8 activations, relaxed-simd kernel, 1 thread\).*single-thread build/);
  assert.equal(relaxed.decisions.length, 89);
  const single = new Map(one.decisions);
  for (const [key, probs] of relaxed.decisions) assert.deepEqual(probs, single.get(key), key);
  console.log(`# relaxed build, page not isolated: 89 criteria identical to the SIMD128 build; ${relaxed.ms.toFixed(0)} ms, SIMD128 ${one.ms.toFixed(0)} ms`);
});

for (const [build, name] of [["threads", "threaded"], ["relaxed", "relaxed"]]) {
  test(`${name} build: the relaxed-SIMD kernel equals the scalar reference inside the browser`, async () => {
    const page = await harness(ctx, [], { build });
    try {
      const r = await page.evaluate(async () => {
        const { kernelSelfTest } = await import("/pkg-diagnostics/readout.js");
        return kernelSelfTest();
      });
      console.log(`# kernel self-test, ${name} build: ${r.kernel}, worst relative difference ${r.worst.toExponential(2)}`);
      assert.equal(r.kernel, "relaxed-simd");
      assert.ok(r.worst <= 1e-5, `worst ${r.worst}`);
      // Attention's scores, four keys at a time in SIMD128 registers, equal one at a time.
      assert.equal(r.attentionDiffers, 0);
    } finally {
      await page.close();
    }
  });
}

test("threaded build: the default is the page's cores up to four, and threads: 1 runs no worker", async () => {
  const states = fixture().slice(0, 1);
  const dflt = await score("threads", states);
  const cores = await (async () => {
    const page = await harness(ctx, [], { build: "threads" });
    try {
      return await page.evaluate(() => Math.min(navigator.hardwareConcurrency, 4));
    } finally {
      await page.close();
    }
  })();
  assert.equal(dflt.info.threads, cores);
  const single = await score("threads", states, 1);
  assert.equal(single.info.threads, 1);
  assert.match(single.info.runtime, /1 thread\).*threaded build, 1 asked: this thread and 0 workers/);
  assert.deepEqual(single.decisions, dflt.decisions);
});

test("threaded build: workers that cannot start (the page's CSP forbids them) are load error `workers` naming the field and limit, and the page then loads on one thread", async () => {
  const states = fixture().slice(0, 1);
  const log = [];
  const page = await harness(ctx, log, { build: "threads", workers: false });
  let r;
  try {
    r = await page.evaluate(async ({ source, s }) => {
      const { Engine } = window.readout;
      let err = null;
      try {
        await Engine.load(source, { backend: "cpu", threads: 2 });
      } catch (e) {
        err = { code: e.code, field: e.field, limit: e.limit, message: e.message };
      }
      // The same call again fails the same way (no worker is counted as
      // started), and one thread needs no worker.
      let again = null;
      try {
        await Engine.load(source, { backend: "cpu", threads: 2 });
      } catch (e) {
        again = e.code;
      }
      const engine = await Engine.load(source, { backend: "cpu", threads: 1 });
      const state = await engine.prefill(s);
      const decisions = [];
      for (const d of await state.scoreAll(s.criteria)) decisions.push([`${s.id}/${d.id}`, d.probs.map((p) => p.p)]);
      await state.dispose();
      const info = engine.info();
      await engine.dispose();
      return { err, again, info, decisions, isolated: self.crossOriginIsolated };
    }, { source: `/models/${TINY}/`, s: states[0] });
  } catch (e) {
    throw new Error(`${e.message}\n${log.join("\n")}`);
  } finally {
    await page.close();
  }
  console.log(`# workers forbidden: ${r.err && r.err.message}`);
  assert.equal(r.isolated, true);
  assert.ok(r.err, "the load with 2 threads succeeded");
  assert.deepEqual({ code: r.err.code, field: r.err.field, limit: r.err.limit }, { code: "workers", field: "threads", limit: 1 });
  assert.match(r.err.message, /threads: 2 asked, 0 started: .*(Content Security Policy|kernel worker 0)/);
  assert.equal(r.again, "workers");
  assert.equal(r.info.threads, 1);
  assert.match(r.info.runtime, /threaded build, 1 asked: this thread and 0 workers/);
  // And it scores as the same build does on a page where workers may run.
  assert.deepEqual(r.decisions, (await score("threads", states, 1)).decisions);
});

/**
 * On a threaded-build page: an engine on `threads` threads, the pool
 * diagnostic `diagnostic` (poolFaultTest or poolHangTest), then the first
 * fixture state scored on that engine. With `ticks`, the hung piece's loop
 * count is read once a second, four times, while the page yields (where the
 * browser carries a worker's termination out).
 */
async function faultThenScore(diagnostic, threads, ticks = false) {
  const states = fixture().slice(0, 1);
  const log = [];
  const page = await harness(ctx, log, { build: "threads" });
  try {
    const r = await page.evaluate(async ({ source, s, diagnostic, threads, ticks }) => {
      const { Engine } = window.readout;
      const diag = await import("/pkg-diagnostics/readout.js");
      const engine = await Engine.load(source, { backend: "cpu", threads });
      const fault = diag[diagnostic]();
      if (ticks) {
        fault.ticks = [];
        for (let i = 0; i < 4; i++) {
          fault.ticks.push(diag.poolHangTicks());
          await new Promise((r) => setTimeout(r, 1000));
        }
      }
      const state = await engine.prefill(s);
      const decisions = [];
      for (const d of await state.scoreAll(s.criteria)) decisions.push([`${s.id}/${d.id}`, d.probs.map((p) => p.p)]);
      await state.dispose();
      const info = engine.info();
      await engine.dispose();
      return { fault, decisions, info };
    }, { source: `/models/${TINY}/`, s: states[0], diagnostic, threads, ticks });
    return { ...r, states };
  } catch (e) {
    throw new Error(`${e.message}\n${log.join("\n")}`);
  } finally {
    await page.close();
  }
}

// A regression would hang the page, so the test has a deadline.
test("threaded build: a kernel worker that panics inside its piece fails that job with an error instead of hanging the page, and the engine then scores on", { timeout: 120_000 }, async () => {
  const r = await faultThenScore("poolFaultTest", 2);
  const states = r.states;
  console.log(`# a worker's piece panicked: ${r.fault.broken}`);
  assert.match(r.fault.broken ?? "", /a kernel worker stopped inside its share of this operation/);
  assert.equal(r.fault.second ?? null, null);
  assert.equal(r.fault.done, 64);
  // The engine, whose worker is now dead, scores as the build does on one
  // thread, and says it runs on one.
  assert.deepEqual(r.decisions, (await score("threads", states, 1)).decisions);
  console.log(`# after: ${r.info.runtime}`);
  assert.equal(r.info.threads, 1);
  assert.match(r.info.runtime, /2 asked: this thread and 1 worker; 1 kernel worker stopped since \(a panic, or no answer within the stall deadline\), so 1 run/);
});

// A worker that stops without trapping (terminated, or hung) leaves
// nothing to catch: the caller's stall deadline is all that ends the job.
test("threaded build: a kernel worker that stops answering inside its piece fails that job after the stall deadline, is terminated, and the engine scores on with the rest", { timeout: 120_000 }, async () => {
  const r = await faultThenScore("poolHangTest", 3, true);
  const states = r.states;
  console.log(`# a worker stopped answering: ${r.fault.lost} (${r.fault.lostMs.toFixed(0)} ms)`);
  assert.match(r.fault.lost ?? "", /1 kernel worker stopped answering inside this operation \(\d+ ms without progress; terminated, or hung\)/);
  // The deadline: 5 s floor plus 20x the caller's share (2 s at most here).
  assert.ok(r.fault.lostMs >= 5000 && r.fault.lostMs < 60_000, `${r.fault.lostMs} ms`);
  // Terminated within 3 s of the page yielding: the hung piece's count
  // stops moving (it would loop for 30 s otherwise).
  console.log(`# the hung piece's loop count, a second apart after the job: ${r.fault.ticks.join(", ")}`);
  assert.equal(r.fault.ticks[3], r.fault.ticks[2], `the hung piece kept running: its worker was not terminated (${r.fault.ticks})`);
  assert.equal(r.fault.second ?? null, null);
  assert.equal(r.fault.done, 64);
  // Two of three threads remain, and the engine says so and scores as a
  // 2-thread engine of the same build does.
  console.log(`# after: ${r.info.runtime}`);
  assert.equal(r.info.threads, 2);
  assert.match(r.info.runtime, /3 asked: this thread and 2 workers; 1 kernel worker stopped since \(a panic, or no answer within the stall deadline\), so 2 run/);
  assert.deepEqual(r.decisions, (await score("threads", states, 2)).decisions);
});

test("a page that is not cross-origin isolated: select.js says the threaded build cannot run and why, offers the relaxed build, and the single-thread build runs one thread and says why", async () => {
  const ask = async (isolated) => {
    const page = await harness(ctx, [], { isolated });
    try {
      return await page.evaluate(async (source) => {
        const { threadedBuild, relaxedBuild, bestBuild } = await import("/pkg/select.js");
        const build = threadedBuild();
        const relaxed = relaxedBuild();
        const best = bestBuild();
        let info = null;
        if (!self.crossOriginIsolated) {
          const engine = await window.readout.Engine.load(source, { backend: "cpu", threads: 2 });
          info = engine.info();
          await engine.dispose();
        }
        return { build, relaxed, best, info, isolated: self.crossOriginIsolated };
      }, `/models/${TINY}/`);
    } finally {
      await page.close();
    }
  };
  const yes = await ask(true);
  assert.equal(yes.isolated, true);
  assert.deepEqual(yes.build, { usable: true, why: "cross-origin isolated, with shared memory and relaxed SIMD" });
  assert.deepEqual(yes.best, { build: "threads", why: yes.build.why });
  const no = await ask(false);
  assert.equal(no.isolated, false);
  assert.equal(no.build.usable, false);
  assert.match(no.build.why, /not cross-origin isolated.*Cross-Origin-Opener-Policy/);
  // Any page gets the relaxed build where the browser has relaxed SIMD.
  assert.deepEqual(no.relaxed, { usable: true, why: "relaxed SIMD, on any page" });
  assert.equal(no.best.build, "relaxed");
  assert.match(no.best.why, /^relaxed SIMD, on any page; not threads: the page is not cross-origin isolated/);
  assert.equal(no.info.threads, 1);
  assert.match(no.info.runtime, /single-thread build, 2 asked: this is the single-thread build \(threads need the threaded build, on a cross-origin isolated page\)/);
});

test("select.js tells a WebAssembly without relaxed SIMD from one with it (node's V8, the feature switched off and on)", () => {
  // Chromium has relaxed SIMD, so the other answer is shown on Node's V8
  // (the same engine) with the feature's flag; the page is taken as isolated.
  const ask = (flag) =>
    JSON.parse(
      execFileSync(process.execPath, [flag, "--input-type=module", "-e",
        `globalThis.crossOriginIsolated = true; const s = await import("${ROOT}/pkg/select.js"); console.log(JSON.stringify([s.threadedBuild(), s.relaxedBuild(), s.bestBuild()]));`,
      ], { encoding: "utf8" }),
    );
  const [threads, relaxed, best] = ask("--no-experimental-wasm-relaxed-simd");
  assert.deepEqual(threads, { usable: false, why: "this browser's WebAssembly lacks relaxed SIMD or shared memory" });
  assert.deepEqual(relaxed, { usable: false, why: "this browser's WebAssembly lacks relaxed SIMD" });
  assert.equal(best.build, "single");
  const on = ask("--experimental-wasm-relaxed-simd");
  assert.equal(on[0].usable, true);
  assert.equal(on[1].usable, true);
  assert.equal(on[2].build, "threads");
});

test("threaded build: two engines on one page score side by side as each does alone, 40 states in a row end as the first began, and dispose while a score is pending waits for it", async () => {
  const states = fixture().slice(0, 2);
  const log = [];
  const page = await harness(ctx, log, { build: "threads" });
  try {
    const r = await page.evaluate(
      async ({ source, states }) => {
        const { Engine } = window.readout;
        const run = async (engine, s) => {
          const state = await engine.prefill(s);
          const ds = await state.scoreAll(s.criteria);
          await state.dispose();
          return ds.map((d) => d.probs.map((p) => p.p));
        };
        const a = await Engine.load(source, { backend: "cpu", threads: 2 });
        const alone = [];
        for (const s of states) alone.push(await run(a, s));
        const b = await Engine.load(source, { backend: "cpu", threads: 2 });
        // Both engines' pools at work at once, each call interleaved with the other's.
        const together = await Promise.all(states.flatMap((s) => [run(a, s), run(b, s)]));
        // A long run on one engine: the 40th state as the first.
        let first = null, last = null;
        for (let i = 0; i < 40; i++) {
          const d = await run(a, states[i % states.length]);
          if (i === 0) first = d;
          if (i === 38) last = d;
        }
        // dispose asked while a score is pending: calls are queued, so the
        // score finishes, then the engine goes, and the next call is refused.
        const held = await b.prefill(states[0]);
        const pending = held.scoreAll(states[0].criteria);
        const disposing = b.dispose();
        const [scored, disposed] = await Promise.allSettled([pending, disposing]);
        let after = "accepted";
        try {
          await b.prefill(states[0]);
        } catch (e) {
          after = e.code;
        }
        await a.dispose();
        return {
          alone, together, first, last, after, disposed: disposed.status,
          scored: scored.status === "fulfilled" ? scored.value.map((d) => d.probs.map((p) => p.p)) : scored.reason?.message,
        };
      },
      { source: `/models/${TINY}/`, states },
    );
    states.forEach((_, i) => {
      assert.deepEqual(r.together[2 * i], r.alone[i], `engine A beside B, state ${i}`);
      assert.deepEqual(r.together[2 * i + 1], r.alone[i], `engine B beside A, state ${i}`);
    });
    assert.deepEqual(r.last, r.first, "the 39th run of the same state");
    assert.deepEqual(r.scored, r.alone[0], "the score pending when dispose was asked");
    assert.equal(r.disposed, "fulfilled");
    assert.equal(r.after, "engine_disposed");
  } catch (e) {
    throw new Error(`${e.message}\n${log.slice(-15).join("\n")}`);
  } finally {
    await page.close();
  }
});
