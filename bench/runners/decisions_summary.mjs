// Folds `readout evaluate` reports (one per readout combination) into one
// comparison: the metrics the decision goal is stated in, per combination.
// Usage: node bench/runners/decisions_summary.mjs FIXTURE OUT REPORT.json...
//        node bench/runners/decisions_summary.mjs --table SUMMARY.json   (markdown, for docs/)
import { readFileSync } from "node:fs";
import { writeResult } from "./result_file.mjs";
import { basename } from "node:path";

// The program that writes these summaries. Files from before bench/ was
// split into folders record it as `bash bench/decisions.sh`; the table names
// it where it is now.
const COMMAND = "bash bench/runners/decisions.sh";

if (process.argv[2] === "--table") {
  const file = process.argv[3];
  const s = JSON.parse(readFileSync(file, "utf8"));
  const f = (x, d = 3) => (x == null ? "unbounded" : x.toFixed(d));
  const how = s.examples_file ? `EXAMPLES=${s.examples_file} ${COMMAND}` : COMMAND;
  console.log(`${s.model}, ${s.criteria} criteria of \`${s.fixture}\`, ${s.runtime}; source \`bench/results/${s.kind ?? "decisions"}/${basename(file)}\` (\`${how}\`).\n`);
  // Runs with worked examples (spec §14) add the count and the weakest
  // family, which their goal is stated in.
  const ex = s.rows.some((r) => r.examples);
  const head = ex ? "| examples | mode | calibration | prompt | accuracy | mean family bal. acc. | weakest family | ECE | NLL | ms / criterion | max picked/gold | picked A/B/C/D | gold A/B/C/D |" : "| mode | calibration | prompt | accuracy | mean family bal. acc. | ECE | NLL | ms / criterion | max picked/gold | picked A/B/C/D | gold A/B/C/D |";
  console.log(head);
  console.log(head.replace(/[^|]+/g, "---"));
  for (const r of s.rows) {
    const mode = r.mode === "cloze" ? `cloze · ${r.cloze_score}` : "letters";
    const share = (v) => v.slice(0, 4).map((x) => x.toFixed(2)).join(" / ");
    const best = r === s.rows.find((x) => x.mode === s.best.mode && x.cloze_score === s.best.cloze_score && x.calibration === s.best.calibration && x.prompt === s.best.prompt && (x.examples ?? 0) === (s.best.examples ?? 0));
    const b = (t) => (best ? `**${t}**` : t);
    const weakest = Object.entries(r.families).reduce((a, e) => (e[1] < a[1] ? e : a));
    const lead = ex ? `| ${b(r.examples ?? 0)} ` : "";
    const mid = ex ? ` ${weakest[0]} ${f(weakest[1], 2)} |` : "";
    console.log(`${lead}| ${b(mode)} | ${r.calibration} | ${r.prompt} | ${b(f(r.accuracy))} | ${b(f(r.mean_family_balanced_accuracy))} |${mid} ${f(r.ece)} | ${f(r.nll)} | ${f(r.ms_per_criterion, 0)} | ${f(r.max_pick_over_gold, 2)} | ${share(r.picked_by_position)} | ${share(r.gold_by_position)} |`);
  }
  process.exit(0);
}

const [fixture, out, ...reports] = process.argv.slice(2);
const rows = reports
  .map((p) => JSON.parse(readFileSync(p, "utf8")))
  .map((r) => ({
    mode: r.options.mode,
    cloze_score: r.options.mode === "cloze" ? r.options.cloze_score : null,
    calibration: r.options.calibration,
    prompt: r.prompt,
    examples: r.prefix?.examples?.length ?? 0,
    accuracy: r.report.overall.accuracy,
    mean_family_balanced_accuracy: r.report.mean_family_balanced_accuracy,
    ece: r.report.overall.ece,
    nll: r.report.overall.nll,
    ms_per_criterion: r.ms_per_criterion,
    baselines_computed: r.baselines_computed,
    picked_by_position: r.report.positions.picked,
    gold_by_position: r.report.positions.gold,
    max_pick_over_gold: r.report.positions.max_pick_over_gold,
    families: Object.fromEntries(
      Object.entries(r.report.families).map(([f, s]) => [f, s.balanced_accuracy]),
    ),
  }));
const first = JSON.parse(readFileSync(reports[0], "utf8"));
const score = (r) => Math.min(r.accuracy, r.mean_family_balanced_accuracy);
const best = rows.reduce((a, b) => (score(b) > score(a) ? b : a));
writeResult(
  out,
  "decisions",
  "bench/runners/decisions_summary.mjs",
  {
    what: "readout evaluate over every readout combination, one run, one machine",
    // The worked examples' file (decisions.sh's EXAMPLES), when there were any.
    ...(process.env.EXAMPLES ? { examples_file: process.env.EXAMPLES } : {}),
    model: first.model,
    runtime: first.runtime,
    fixture,
    criteria: first.criteria,
    goal: "accuracy and mean family balanced accuracy >= 0.60; max picked/gold <= 2",
    best: { ...best, meets_goal: best.accuracy >= 0.6 && best.mean_family_balanced_accuracy >= 0.6 && best.max_pick_over_gold !== null && best.max_pick_over_gold <= 2 },
    rows,
  },
  { command: COMMAND },
);
