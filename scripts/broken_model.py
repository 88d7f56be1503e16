"""A model on which no position convention can agree: the tiny q4 graph with
every present.N.key scaled by 1.25, so any run on a cached past attends with
wrong keys while one uncached forward is untouched. The browser tests load it
and expect the load-time proof to refuse it with the measured differences.

    .venv/bin/python scripts/broken_model.py models/qwen3-tiny-random-q4 target/browser/broken-kv
"""
import os
import shutil
import sys

import onnx
from onnx import helper, numpy_helper
import numpy as np


def main(src, dst):
    os.makedirs(dst, exist_ok=True)
    m = onnx.load(os.path.join(src, "model.onnx"), load_external_data=False)
    outs = {o.name for o in m.graph.output if o.name.startswith("present.") and o.name.endswith(".key")}
    scale = numpy_helper.from_array(np.array(1.25, dtype=np.float32), "broken_key_scale")
    m.graph.initializer.append(scale)
    for node in list(m.graph.node):
        for i, o in enumerate(node.output):
            if o in outs:
                node.output[i] = o + ".unscaled"
                m.graph.node.append(helper.make_node("Mul", [o + ".unscaled", "broken_key_scale"], [o], name=o + ".broken"))
    onnx.save(m, os.path.join(dst, "model.onnx"))
    for f in ("model.onnx.data", "config.json", "tokenizer.json"):
        shutil.copy(os.path.join(src, f), os.path.join(dst, f))
    print(f"broken model (present.*.key x 1.25) written to {dst}", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
