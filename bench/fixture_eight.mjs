// The timing fixture for packed branches: the authored states with 8
// criteria each (a state's own 4 and the next state's 4, ids kept apart),
// so "8 criteria of a state in one pass" is measured on real prompts. Only
// times are read from it: half its criteria ask about other evidence.
//
//   node bench/fixture_eight.mjs OUT.jsonl
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = join(fileURLToPath(import.meta.url), "..", "..");

export function eightCriteriaStates() {
  const states = readFileSync(join(ROOT, "tests/fixtures/authored.jsonl"), "utf8")
    .split("\n")
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l));
  const out = [];
  for (let i = 0; i + 1 < states.length; i += 2) {
    const s = structuredClone(states[i]);
    const more = states[i + 1].criteria.map((c) => ({ ...c, id: `${c.id}-b` }));
    s.criteria = s.criteria.concat(more).slice(0, 8);
    out.push(s);
  }
  return out;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const out = process.argv[2];
  if (!out) throw new Error("usage: node bench/fixture_eight.mjs OUT.jsonl");
  writeFileSync(out, eightCriteriaStates().map((s) => JSON.stringify(s)).join("\n") + "\n");
}
