// A gate of the test command: the documents name only what exists. Reads
// README.md, ARCHITECTURE.md, CONTRIBUTING.md, docs/*.md, bench/README.md
// and js/README.md, and fails, listing each one, when a document names
//   - a repository path (a file or folder, in `code` or a link) that is not in
//     the repository: scripts, source files, tests, results files;
//   - a flag of a script or of the readout CLI that the script or the CLI's
//     source does not define (`bash scripts/main.sh --headless`,
//     `readout score --mode cloze`);
//   - and README.md over 150 lines.
// Paths that only exist after a build or a download (pkg/, target/, models/,
// node_modules/, ...) are not checked; neither are URLs, globs and templates.
//   node scripts/check_docs.mjs [FILE.md ...]
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");

const DOCS = process.argv.slice(2).length
  ? process.argv.slice(2)
  : ["README.md", "ARCHITECTURE.md", "CONTRIBUTING.md", "bench/README.md", "js/README.md",
    ...readdirSync(join(ROOT, "docs")).filter((f) => f.endsWith(".md")).map((f) => `docs/${f}`)];

// Written by builds and set-up, never committed: a clean clone lacks them.
const BUILT = /^(pkg|pkg-diagnostics|target|models|node_modules|\.venv|fuzz\/target|fuzz\/artifacts)(\/|$)|^models\.json$/;
const PATHLIKE = /^[A-Za-z0-9_.\-]+(\/[A-Za-z0-9_.\-]*)+$|^[A-Za-z0-9_\-]+\.(rs|mjs|js|ts|sh|py|json|jsonl|md|toml|html|wgsl|txt)$/;
// Top-level names a bare path may start with: anything else (an npm
// package's file, a URL path, a path inside a model folder) is not ours.
const TOP = new Set(readdirSync(ROOT));

function tracked(rel) {
  return existsSync(join(ROOT, rel));
}

// Where a bare file name (no folder) may live: found anywhere in the source
// tree under that name.
const allFiles = [];
(function walk(dir) {
  for (const e of readdirSync(join(ROOT, dir), { withFileTypes: true })) {
    if (e.name.startsWith(".") && e.name !== ".ci" && e.name !== ".cargo") continue;
    const rel = dir ? `${dir}/${e.name}` : e.name;
    if (BUILT.test(rel)) continue;
    if (e.isDirectory()) walk(rel);
    else allFiles.push(rel);
  }
})("");
const byName = new Map();
for (const f of allFiles) {
  const n = f.split("/").pop();
  byName.set(n, (byName.get(n) ?? 0) + 1);
}

// The readout CLI's flags: clap derives `--cloze-score` from `cloze_score`,
// or takes `long = "..."`.
const cliSource = ["src/cli", "src/bin"].flatMap((d) =>
  readdirSync(join(ROOT, d)).map((f) => readFileSync(join(ROOT, d, f), "utf8"))).join("\n");
function cliHasFlag(flag) {
  const name = flag.replace(/^--/, "").replace(/=.*$/, "");
  return cliSource.includes(`"${name}"`) || new RegExp(`\\b${name.replace(/-/g, "_")}\\s*:`).test(cliSource);
}

const problems = [];
for (const doc of DOCS) {
  const text = readFileSync(join(ROOT, doc), "utf8");
  const docDir = dirname(doc);
  const lines = text.split("\n");
  let fenced = false;
  // In a fenced map (a line that starts with a folder, `src/core/`, and
  // indented lines that name a subfolder, `  spec/`), bare file names are
  // checked inside the folder the line is under.
  let base = null;
  let sub = "";
  lines.forEach((line, i) => {
    const where = `${doc}:${i + 1}`;
    if (/^\s*```/.test(line)) {
      fenced = !fenced;
      base = null;
      sub = "";
      return;
    }
    if (fenced) {
      const top = line.match(/^([A-Za-z0-9_.\-\/]+\/)(\s|$)/);
      const inner = line.match(/^\s+([A-Za-z0-9_.\-]+\/)(\s|$)/);
      if (top && !top[1].startsWith("/") && tracked(top[1])) {
        base = top[1];
        sub = "";
      } else if (inner && base) sub = inner[1];
      else if (/^\S/.test(line)) base = null;
      if (base) {
        for (const m of line.matchAll(/(?<![\w\/.])([A-Za-z0-9_\-]+(?:\/[A-Za-z0-9_\-]+)*\.(rs|wgsl|mjs|js|ts|sh|py|md|html|jsonl))\b/g)) {
          const f = m[1];
          if (!tracked(base + sub + f) && !tracked(base + f) && !tracked(f)) {
            problems.push(`${where}: the map names ${f} under ${base}${sub}, which does not exist`);
          }
        }
      }
    }
    // Code: inline spans, or whole lines inside a fenced block.
    const spans = fenced ? [line] : [...line.matchAll(/`([^`]+)`/g)].map((m) => m[1]);
    const links = fenced ? [] : [...line.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]);
    for (const link of links) {
      if (/^[a-z]+:|^#|^mailto:/.test(link)) continue;
      const target = link.split("#")[0];
      if (!target) continue;
      const rel = relative(ROOT, resolve(ROOT, docDir, target));
      if (BUILT.test(rel)) continue;
      if (!tracked(rel)) problems.push(`${where}: links to ${link}, which does not exist (${rel})`);
    }
    for (const span of spans) checkSpan(span, where, docDir, fenced);
  });
}

function checkSpan(span, where, docDir, fenced) {
  const words = span.split(/[\s=,;()'"]+/).filter(Boolean);
  // The program a flag belongs to: a script path, or the readout CLI.
  let program = null;
  for (let w of words) {
    w = w.replace(/[:.]+$/, "").replace(/^\.\//, "");
    if (/^readout$|target\/(debug|release)\/readout$/.test(w)) program = { cli: true };
    if (w.startsWith("--")) {
      if (!program || !/^--[a-z][a-z0-9-]*$/.test(w.replace(/=.*$/, ""))) continue;
      const flag = w.replace(/=.*$/, "");
      const ok = program.cli ? cliHasFlag(flag) : readFileSync(join(ROOT, program.file), "utf8").includes(flag);
      if (!ok) problems.push(`${where}: ${flag} is not a flag of ${program.cli ? "the readout CLI" : program.file}`);
      continue;
    }
    if (/^[A-Za-z0-9_.\-\/]*\*[A-Za-z0-9_.\-\/*]*$/.test(w) && w.includes("/") && !BUILT.test(w)) {
      // A glob over the repository (`bench/results/deno-webgpu-f16/*-deno-*.json`): something must match it.
      const re = new RegExp(`^${w.replace(/[.+?^${}()|[\]\\]/g, "\\$&").replace(/\*/g, "[^/]*")}$`);
      if (!allFiles.some((f) => re.test(f))) problems.push(`${where}: names ${w}, which matches no file`);
      continue;
    }
    if (!PATHLIKE.test(w) || /[<>{}*$]|\.\.\./.test(w) || /^https?:/.test(w)) continue;
    const clean = w.replace(/\/$/, "");
    if (BUILT.test(clean)) continue;
    if (!clean.includes("/")) {
      // A bare file name: ours if some file in the tree has that name.
      if (!byName.has(clean) && !fenced) {
        if (/\.(rs|mjs|sh|py)$/.test(clean)) problems.push(`${where}: names ${clean}, which no file in the repository is called`);
      }
      continue;
    }
    const top = clean.split("/")[0];
    let rel = null;
    if (TOP.has(top) && tracked(clean)) rel = clean;
    else if (tracked(join(docDir, clean))) rel = join(docDir, clean);
    else if (TOP.has(top) || ["src", "tests", "scripts", "harness", "modelgen", "bench", "docs", "www", "js"].includes(top)) {
      problems.push(`${where}: names ${w}, which does not exist`);
      continue;
    } else if (/^(core|engine|runtime|bindings|kernels|gpu|export|cli|platform|own|web|native|interp|read|text|spec|model|eval)\//.test(clean)) {
      // A path under src/ written without it (ARCHITECTURE's map does this).
      if (!tracked(`src/${clean}`) && !allFiles.some((f) => f.endsWith(`/${clean}`))) {
        problems.push(`${where}: names ${w}, which is not under src/ or anywhere else`);
      }
      continue;
    }
    if (rel && /\.(sh|mjs|py)$/.test(rel) && statSync(join(ROOT, rel)).isFile()) program = { file: rel };
  }
}

// The README is the front door: what it is, the two commands, short
// examples, limits, links; everything else lives in the documents it links.
const README_LINES = 150;
if (!process.argv.slice(2).length) {
  const lines = readFileSync(join(ROOT, "README.md"), "utf8").split("\n").length - 1;
  if (lines > README_LINES) problems.push(`README.md: ${lines} lines, over ${README_LINES}; move the detail to the document it belongs in`);
}

if (problems.length) {
  console.error(`check_docs: ${problems.length} problem(s):`);
  for (const p of problems) console.error(`  ${p}`);
  process.exit(1);
}
console.error(`check_docs: ${DOCS.length} documents, every path and flag they name exists`);
