// bench/results as its writers promise it: every result in the folder of
// its kind with the same header, nothing loose beside the folders, and the
// writers (JavaScript's and Python's) refusing a name already taken rather
// than replacing a result.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { resultPath, writeResult } from "../../bench/runners/result_file.mjs";
import { ROOT } from "../../harness/serve.mjs";

const RESULTS = join(ROOT, "bench", "results");
const HEADER = ["kind", "command", "commit", "date", "machine", "emulated"];

/** What is wrong with one result's header, or null. */
function headerProblem(r, kind) {
  const missing = HEADER.filter((k) => !(k in r));
  if (missing.length) return `no ${missing.join(", ")}`;
  if (HEADER.some((k, i) => Object.keys(r)[i] !== k)) return `the header is not first, in the order ${HEADER.join(", ")}`;
  if (r.kind !== kind) return `kind ${JSON.stringify(r.kind)} in the folder ${kind}`;
  if (typeof r.command !== "string" || !r.command) return "an empty command";
  if (typeof r.commit !== "string" || !r.commit) return "an empty commit";
  if (!/^\d{4}-\d{2}-\d{2}/.test(r.date)) return `date ${JSON.stringify(r.date)}`;
  // An object from the writers; older results describe their machine in words, or say "unrecorded".
  if (!(r.machine && typeof r.machine === "object") && !(typeof r.machine === "string" && r.machine)) return `machine ${JSON.stringify(r.machine)}`;
  if (typeof r.emulated !== "boolean") return `emulated ${JSON.stringify(r.emulated)}`;
  return null;
}

test("every result sits in the folder of its kind and starts with the header", () => {
  const loose = readdirSync(RESULTS).filter((f) => !statSync(join(RESULTS, f)).isDirectory());
  assert.deepEqual(loose, [], "files beside the kind folders");
  const problems = [];
  let count = 0;
  for (const kind of readdirSync(RESULTS)) {
    for (const f of readdirSync(join(RESULTS, kind))) {
      count++;
      let why;
      try {
        why = f.endsWith(".json") ? headerProblem(JSON.parse(readFileSync(join(RESULTS, kind, f), "utf8")), kind) : "not a .json file";
      } catch (e) {
        why = `unreadable: ${e.message}`;
      }
      if (why) problems.push(`${kind}/${f}: ${why}`);
    }
  }
  assert.ok(count > 100, `only ${count} results found`);
  assert.deepEqual(problems, []);
  // The check itself refuses what it should.
  assert.match(headerProblem({ kind: "x" }, "x"), /no command/);
  assert.match(headerProblem({ kind: "y", command: "c", commit: "c", date: "2026-12-07", machine: {}, emulated: false }, "x"), /kind "y"/);
});

test("the writers put a result under its kind with the header, and refuse a name already taken", () => {
  const dir = mkdtempSync(join(tmpdir(), "readout-results-"));
  try {
    const out = join(dir, "k", "one.json");
    const written = writeResult(out, "k", "tests/node/results.test.mjs", { figure: 1.5, kind: "not this" }, { emulated: true });
    const back = JSON.parse(readFileSync(out, "utf8"));
    assert.deepEqual(back, written);
    assert.equal(headerProblem(back, "k"), null);
    assert.equal(back.kind, "k");
    assert.equal(back.emulated, true);
    assert.equal(back.figure, 1.5);
    assert.throws(() => resultPath("test", "k", "x", out), /exists; pass --out/);
    assert.throws(() => writeResult(out, "k", "tests/node/results.test.mjs", { figure: 2 }), /EEXIST/);
    assert.equal(JSON.parse(readFileSync(out, "utf8")).figure, 1.5, "the first result was replaced");
    assert.ok(resultPath("test", "k", "x").startsWith(join(RESULTS, "k")));

    // Python's writer: the same header, the same refusal.
    const py = join(dir, "py", "one.json");
    const script = `
import sys
sys.path.insert(0, ${JSON.stringify(join(ROOT, "bench", "runners"))})
from result_file import result_path, write_result
p = result_path("test", "py", "x", ${JSON.stringify(py)})
write_result(p, "py", "tests/node/results.test.mjs", {"figure": 2.5})
result_path("test", "py", "x", ${JSON.stringify(py)})
`;
    writeFileSync(join(dir, "w.py"), script);
    assert.throws(() => execFileSync("python3", [join(dir, "w.py")], { stdio: "pipe" }), /exists; pass --out/);
    const r = JSON.parse(readFileSync(py, "utf8"));
    assert.equal(headerProblem(r, "py"), null);
    assert.equal(r.figure, 2.5);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
