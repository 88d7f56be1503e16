"""Broken models for the browser tests.

Default: a model on which no position convention can agree: the tiny q4 graph
with every present.N.key scaled by 1.25, so any run on a cached past attends
with wrong keys while one uncached forward is untouched. The browser tests
load it and expect the load-time proof to refuse it with the measured
differences.

--nan-on WORD: every logit of a run becomes NaN when the run's input_ids
contain WORD's first token (log(1 - seen) * 0), and is untouched otherwise,
so the model passes its load-time proofs and a criterion mentioning WORD
meets non-finite logits (spec §12).

    .venv/bin/python scripts/broken_model.py models/qwen3-tiny-random-q4 target/browser/broken-kv
    .venv/bin/python scripts/broken_model.py --nan-on zebra models/qwen3-tiny-random-q4-trimmed target/browser/nan-on-zebra
"""
import os
import shutil
import sys

import onnx
from onnx import helper, numpy_helper
import numpy as np


def copy_rest(src, dst):
    for f in ("model.onnx.data", "config.json", "tokenizer.json"):
        shutil.copy(os.path.join(src, f), os.path.join(dst, f))


def nan_on(word, src, dst):
    from tokenizers import Tokenizer

    os.makedirs(dst, exist_ok=True)
    token = Tokenizer.from_file(os.path.join(src, "tokenizer.json")).encode(" " + word, add_special_tokens=False).ids[0]
    m = onnx.load(os.path.join(src, "model.onnx"), load_external_data=False)
    g = m.graph
    for name, value, dtype in (("nan_token", token, np.int64), ("nan_one", 1.0, np.float32), ("nan_zero", 0.0, np.float32)):
        g.initializer.append(numpy_helper.from_array(np.array(value, dtype=dtype), name))
    logits_dtype = next(o.type.tensor_type.elem_type for o in g.output if o.name == "logits")
    for node in list(g.node):
        for i, o in enumerate(node.output):
            if o == "logits":
                node.output[i] = "logits.clean"
    g.node.extend([
        helper.make_node("Equal", ["input_ids", "nan_token"], ["nan.hit"]),
        helper.make_node("Cast", ["nan.hit"], ["nan.hitf"], to=onnx.TensorProto.FLOAT),
        helper.make_node("ReduceMax", ["nan.hitf"], ["nan.seen"], keepdims=0),
        helper.make_node("Sub", ["nan_one", "nan.seen"], ["nan.left"]),
        helper.make_node("Log", ["nan.left"], ["nan.log"]),
        helper.make_node("Mul", ["nan.log", "nan_zero"], ["nan.term"]),
        helper.make_node("Cast", ["nan.term"], ["nan.termc"], to=logits_dtype),
        helper.make_node("Add", ["logits.clean", "nan.termc"], ["logits"]),
    ])
    onnx.save(m, os.path.join(dst, "model.onnx"))
    copy_rest(src, dst)
    for f in ("slot_map.json",):
        if os.path.exists(os.path.join(src, f)):
            shutil.copy(os.path.join(src, f), os.path.join(dst, f))
    print(f"model whose logits are NaN when token {token} ({word!r}) is fed, written to {dst}", file=sys.stderr)


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
    copy_rest(src, dst)
    print(f"broken model (present.*.key x 1.25) written to {dst}", file=sys.stderr)


if __name__ == "__main__":
    if sys.argv[1] == "--nan-on":
        nan_on(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        main(sys.argv[1], sys.argv[2])
