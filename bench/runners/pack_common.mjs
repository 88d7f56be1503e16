// What the two packed-branch benchmarks (bench/runners/own_pack.sh natively,
// bench/runners/pack_browser.mjs in Chromium) share: the timing fixture and the
// ratios they report.
//
// The fixture: the authored states with 8 criteria each (a state's own 4
// and the next state's 4, ids kept apart), so "8 criteria of a state in one
// pass" is measured on real prompts. Only times are read from it: half its
// criteria ask about other evidence.
//
//   node bench/runners/pack_common.mjs OUT.jsonl     writes the fixture
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = join(fileURLToPath(import.meta.url), "..", "..", "..");

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

/** Packed against serial and cyclic against none, from `runs[name-on|off].ms_per_criterion`. */
export function packRatios(runs) {
  const ms = (k) => runs[k].ms_per_criterion;
  const r = {
    packed_speedup_8_criteria: ms("letters-off") / ms("letters-on"),
    cyclic_over_none_packed: ms("cyclic-on") / ms("letters-on"),
    cyclic_over_none_serial: ms("cyclic-off") / ms("letters-off"),
    cyclic_packed_speedup: ms("cyclic-off") / ms("cyclic-on"),
    cloze_packed_speedup: ms("cloze-off") / ms("cloze-on"),
  };
  if (runs["authored-none-on"]) {
    r.authored_cyclic_over_none_packed = ms("authored-cyclic-on") / ms("authored-none-on");
    r.authored_cyclic_over_none_serial = ms("authored-cyclic-off") / ms("authored-none-off");
  }
  return r;
}

export const PACK_GOALS = { packed_speedup_8_criteria: ">= 3", cyclic_over_none_packed: "<= 1.5" };

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const out = process.argv[2];
  if (!out) throw new Error("usage: node bench/runners/pack_common.mjs OUT.jsonl");
  writeFileSync(out, eightCriteriaStates().map((s) => JSON.stringify(s)).join("\n") + "\n");
}
