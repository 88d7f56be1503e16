#!/usr/bin/env python3
"""Why Hugging Face's float16 SmolLM2 computes nothing on WebGPU: the input
of every RMSNorm of its int4 graph (float32 activations), on native ONNX
Runtime's CPU provider, for 16 fixed token ids. Prints the largest |x|
before the final norm and how many norms' mean of squares passes float16's
65,504 (where a float16 Pow/ReduceMean overflows to inf and the normalised
state becomes 0). Writes bench/results/hf-norm-overflow/<date>-hf-norm-overflow-<model>.json.

    .venv-hf/bin/python bench/studies/hf_norm_overflow.py [--dir models/hf-smollm2-135m-instruct]
"""
import argparse
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "runners"))
from result_file import ROOT, result_path, write_result  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--dir", default="models/hf-smollm2-135m-instruct")
a = ap.parse_args()
out = result_path("hf_norm_overflow", "hf-norm-overflow", f"hf-norm-overflow-{os.path.basename(a.dir)}")
m = onnx.load(os.path.join(ROOT, a.dir, "onnx", "model_q4.onnx"))
pows = [n for n in m.graph.node if n.op_type == "Pow"]
names = [n.input[0] for n in pows]
for x in names:
    m.graph.output.append(onnx.helper.make_tensor_value_info(x, onnx.TensorProto.FLOAT, None))
s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
ids = np.array([[1, 2, 3, 28, 40, 50, 60, 70, 80, 90, 100, 110, 120, 130, 140, 150]], dtype=np.int64)
n = ids.shape[1]
feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "position_ids": np.arange(n, dtype=np.int64)[None]}
for i in s.get_inputs():
    if i.name.startswith("past"):
        feeds[i.name] = np.zeros((1, i.shape[1], 0, i.shape[3]), np.float32)
outs = s.run(names, feeds)
mean_sq = [float((o.astype(np.float64) ** 2).mean(-1).max()) for o in outs]
r = {
    "dir": a.dir,
    "norms": len(outs), "final_norm_input_max_abs": float(np.abs(outs[-1]).max()),
    "max_abs_per_norm": [float(np.abs(o).max()) for o in outs],
    "norms_whose_mean_square_passes_float16": sum(1 for v in mean_sq if v > 65504), "float16_max": 65504,
}
write_result(out, "hf-norm-overflow", "bench/studies/hf_norm_overflow.py", r)
print(f"final norm input max |x| {r['final_norm_input_max_abs']:.1f}; {r['norms_whose_mean_square_passes_float16']} of {r['norms']} norms pass 65,504; wrote {out}")
