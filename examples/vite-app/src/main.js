// The engine in its worker (readout/worker): the page only posts and awaits.
// Query: model=<model folder URL> (default ./models/qwen3-tiny-random-q4/),
// backend=auto|cpu|wasm|webgpu.
import { Engine } from "readout/worker";

const params = new URLSearchParams(location.search);
const model = params.get("model") ?? "./models/qwen3-tiny-random-q4/";
const status = document.getElementById("status");

try {
  const engine = await Engine.load(model, {
    backend: params.get("backend") ?? "auto",
    ortBase: "./ort/",
    onProgress: ({ file, loaded, total }) => (status.textContent = `${file}: ${loaded} of ${total} bytes`),
  });
  const state = await engine.prefill({ evidence: "The kettle is on the stove and the water is boiling." });
  const decision = await state.score({
    id: "boiling",
    question: "Is the water boiling?",
    options: [{ id: "yes", description: "Yes" }, { id: "no", description: "No" }],
  });
  const info = await engine.info();
  status.textContent = `${decision.answer} (backend ${info.backend}, ${engine.build} build, in a worker)`;
  document.getElementById("output").textContent = JSON.stringify(decision, null, 2);
  window.result = { decision, info, build: engine.build, isolated: self.crossOriginIsolated };
} catch (e) {
  status.textContent = `failed: ${e.message}`;
  window.result = { error: { message: e.message, code: e.code, field: e.field } };
}
