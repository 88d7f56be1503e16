// Runs inside Deno (harness/deno.mjs starts it): loads the package's build
// named in the job, then runs the job's function on its argument and prints
// the result as one JSON line after a marker, so that whatever the engine
// or onnxruntime-web logs cannot be taken for it.
const job = JSON.parse(await new Response(Deno.stdin.readable).text());
const mod = await import(new URL(`../${job.build}/readout.js`, import.meta.url).href);
await mod.default();
globalThis.readout = mod;
try {
  const fn = (0, eval)(`(${job.fn})`);
  const result = await fn(job.arg);
  console.log(`@@result ${JSON.stringify(result ?? null)}`);
} catch (e) {
  const fields = { message: String(e?.message ?? e), code: e?.code, field: e?.field, limit: e?.limit, stack: e?.stack };
  console.log(`@@error ${JSON.stringify(fields)}`);
  Deno.exit(1);
}
