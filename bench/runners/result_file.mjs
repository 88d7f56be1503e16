// The one writer of bench/results for JavaScript (Python's is
// result_file.py, the Rust benches' bench/native/common): a result of kind K
// goes to bench/results/K/<date>-<name>.json, refused before the run when
// that name is taken, and starts with the header every result carries:
// kind, command, commit, date, machine, emulated. A result is never
// replaced: a second run the same day names its own file (--out).
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { cpus, totalmem } from "node:os";
import { dirname, join, resolve } from "node:path";
import { ROOT } from "../../harness/serve.mjs";

export const TODAY = new Date().toISOString().slice(0, 10);

/** The folder of a kind's results. */
export const kindDir = (kind) => join(ROOT, "bench", "results", kind);

/** The result's path (`outArg`, else bench/results/<kind>/<date>-<name>.json); throws if it exists. */
export function resultPath(prog, kind, name, outArg) {
  const out = resolve(outArg ?? join(kindDir(kind), `${TODAY}-${name}.json`));
  if (existsSync(out)) throw new Error(`${prog}: ${out} exists; pass --out for another name`);
  return out;
}

/** The header: what ran, on which commit and machine, and whether its GPU was emulated. */
/** `command`: what ran, when a shell script drove this program (decisions.sh). */
export function header(kind, script, { emulated = false, command } = {}) {
  let commit = "unknown";
  try {
    commit = execFileSync("git", ["rev-parse", "--short", "HEAD"], { cwd: ROOT, encoding: "utf8" }).trim();
  } catch {}
  return {
    kind,
    command: command ?? `node ${script} ${process.argv.slice(2).join(" ")}`.trim(),
    commit,
    date: TODAY,
    machine: { cpus: cpus().length, model: cpus()[0]?.model, memory_gb: Math.round(totalmem() / 2 ** 30) },
    emulated,
  };
}

/** Writes `body` under the header to `out`, never over a file; returns what it wrote. */
export function writeResult(out, kind, script, body, options = {}) {
  // The header's place is first; what the run knew better of the machine
  // and the GPU (a page's own report) stays, the rest is the header's.
  const h = header(kind, script, options);
  const result = { ...h, ...body, kind: h.kind, command: h.command, commit: h.commit, date: h.date };
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, `${JSON.stringify(result, null, 2)}\n`, { flag: "wx" });
  return result;
}
