// Where this session's browser benchmarks put their JSON (page_thread,
// kept_files, storage_choice): the path under bench/results, refused before
// the run when it is taken, and the file written with the header every one
// of them carries (command, commit, date, machine). A result is never
// replaced: a second run the same day names its own file (--out).
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { dirname, join, resolve } from "node:path";
import { ROOT } from "../../scripts/serve.mjs";

export const TODAY = new Date().toISOString().slice(0, 10);

/** The result's path (`outArg`, else bench/results/<date>-<name>.json); throws if it exists. */
export function resultPath(prog, name, outArg) {
  const out = resolve(outArg ?? join(ROOT, "bench", "results", `${TODAY}-${name}.json`));
  if (existsSync(out)) throw new Error(`${prog}: ${out} exists; pass --out for another name`);
  return out;
}

/** Writes `body` under the common header (`kind`: { benchmark } or { study }) to `out`, never over a file. */
export function writeResult(out, kind, script, body) {
  let commit = "unknown";
  try {
    commit = execFileSync("git", ["rev-parse", "--short", "HEAD"], { cwd: ROOT, encoding: "utf8" }).trim();
  } catch {}
  const result = {
    ...kind, command: `node ${script} ${process.argv.slice(2).join(" ")}`.trim(), commit, date: TODAY,
    machine: { cpus: cpus().length, cpu: cpus()[0]?.model }, emulated: false, ...body,
  };
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, `${JSON.stringify(result, null, 2)}\n`, { flag: "wx" });
  return result;
}
