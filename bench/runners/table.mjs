// Markdown tables from the benchmark page's result files, for the README:
// each row names the file its numbers come from.
//   node bench/runners/table.mjs bench/results/logit-cost/<date>-<model>-<backend>.json ...
import { readFileSync } from "node:fs";
import { basename } from "node:path";

const f1 = (x) => (x == null ? "—" : x.toFixed(1));
const f2 = (x) => (x == null ? "—" : x.toFixed(2));

const files = process.argv.slice(2);
if (!files.length) {
  console.error("usage: node bench/runners/table.mjs RESULT.json ...");
  process.exit(2);
}

console.log("| model · backend | variant | " + "n=1 | n=8 | n=16 | n=32 | n=64 | n=96 | fixed ms | ms/token | R² | bytes back (longest) | source |");
console.log("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
for (const file of files) {
  const r = JSON.parse(readFileSync(file, "utf8"));
  const where = `${r.model} · ${r.backend}${r.emulated ? " (emulated)" : ""}`;
  const rows = [...r.variants, ...(r.transformers ? [r.transformers] : []), ...(r.native?.variants ?? []).map((v) => ({ ...v, variant: `native ${v.id.replace(r.model, "stock").replace("stock-trimmed-pruned", "pruned").replace("stock-trimmed", "trimmed")}` }))];
  for (const v of rows) {
    const med = r.lengths.map((n, i) => (n === undefined ? "—" : f1(v.median_ms[i])));
    const pad = [1, 8, 16, 32, 64, 96].map((n) => {
      const i = r.lengths.indexOf(n);
      return i < 0 ? "—" : med[i];
    });
    const bytes = v.bytes_read_back?.at(-1);
    // An emulated GPU's times include shader compiles: no line is fitted to them.
    const fit = r.emulated ? null : v.fit;
    console.log(`| ${where} | ${v.variant} | ${pad.join(" | ")} | ${f1(fit?.fixed_ms)} | ${f2(fit?.per_token_ms)} | ${fit ? fit.r2.toFixed(4) : "—"} | ${bytes == null ? "—" : bytes.toLocaleString("en")} | \`${basename(file)}\` |`);
  }
  if (r.transformers_error) {
    const why = r.transformers_error.replace(/\|/g, "/").replace(/\s+/g, " ").slice(0, 140);
    console.log(`| ${where} | transformers.js | failed: ${why} | ${Array(10).fill("—").join(" | ")} | \`${basename(file)}\` |`);
  }
}

console.log("\n| model · backend | comparison | n=1 | n=8 | n=16 | n=32 | n=64 | n=96 | 45 by fit | max abs Δp | source |");
console.log("|---|---|---|---|---|---|---|---|---|---|---|");
for (const file of files) {
  const r = JSON.parse(readFileSync(file, "utf8"));
  const where = `${r.model} · ${r.backend}${r.emulated ? " (emulated)" : ""}`;
  for (const c of r.ratios) {
    const pad = [1, 8, 16, 32, 64, 96].map((n) => {
      const i = r.lengths.indexOf(n);
      return i < 0 ? "—" : `${f2(c.per_length[i])}×`;
    });
    console.log(`| ${where} | ${c.what} | ${pad.join(" | ")} | ${c.at_45_tokens_by_fit == null || r.emulated ? "—" : f2(c.at_45_tokens_by_fit) + "×"} | ${c.max_abs_dp == null ? "other weights" : c.max_abs_dp.toExponential(1)} | \`${basename(file)}\` |`);
  }
  if (r.allowed_mass) {
    const m = r.allowed_mass;
    console.log(`| ${where} | allowedMass over ${m.width.toLocaleString("en")} float16 logits: JavaScript ${f2(m.javascript.median_ms)} ms / engine (${m.engine_place}) ${f2(m.engine.median_ms)} ms | ${f2(m.javascript_over_engine)}× | ${Array(6).fill("—").join(" | ")} | ${m.abs_diff_allowed_mass.toExponential(1)} | \`${basename(file)}\` |`);
  }
}
