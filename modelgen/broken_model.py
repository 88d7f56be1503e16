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

    .venv/bin/python modelgen/broken_model.py models/qwen3-tiny-random-q4 target/browser/broken-kv
    .venv/bin/python modelgen/broken_model.py --nan-on zebra models/qwen3-tiny-random-q4-trimmed target/browser/nan-on-zebra

--unsupported: the logits pass through an Erf node, an operator our own
runtime does not compute, so its load refuses the graph by the node's name.

--too-large: one more initializer, unused, declaring 4 GiB of float32 in
model.onnx.data (whose bytes are not there), so our own runtime refuses it
from the declared sizes before it copies a weight.

    .venv/bin/python modelgen/broken_model.py --unsupported models/qwen3-tiny-random-q4 target/browser/unsupported-op
    .venv/bin/python modelgen/broken_model.py --too-large models/qwen3-tiny-random-q4 target/browser/too-large
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


def edited(src, dst, edit, what):
    """dst: src's graph changed in place by edit(model), beside src's other files."""
    os.makedirs(dst, exist_ok=True)
    m = onnx.load(os.path.join(src, "model.onnx"), load_external_data=False)
    edit(m)
    onnx.save(m, os.path.join(dst, "model.onnx"))
    copy_rest(src, dst)
    print(f"{what} written to {dst}", file=sys.stderr)


def unsupported(m):
    for node in m.graph.node:
        for i, o in enumerate(node.output):
            if o == "logits":
                node.output[i] = "logits.before_erf"
    m.graph.node.append(helper.make_node("Erf", ["logits.before_erf"], ["logits"], name="refused.erf"))


def too_large(m):
    t = onnx.TensorProto()
    t.name = "declared_4_gib"
    t.data_type = onnx.TensorProto.FLOAT
    t.dims.extend([1 << 20, 1 << 10])
    t.data_location = onnx.TensorProto.EXTERNAL
    for k, v in (("location", "model.onnx.data"), ("offset", "0"), ("length", str(4 << 30))):
        e = t.external_data.add()
        e.key, e.value = k, v
    m.graph.initializer.append(t)


def broken_keys(m):
    outs = {o.name for o in m.graph.output if o.name.startswith("present.") and o.name.endswith(".key")}
    scale = numpy_helper.from_array(np.array(1.25, dtype=np.float32), "broken_key_scale")
    m.graph.initializer.append(scale)
    for node in list(m.graph.node):
        for i, o in enumerate(node.output):
            if o in outs:
                node.output[i] = o + ".unscaled"
                m.graph.node.append(helper.make_node("Mul", [o + ".unscaled", "broken_key_scale"], [o], name=o + ".broken"))


if __name__ == "__main__":
    if sys.argv[1] == "--nan-on":
        nan_on(sys.argv[2], sys.argv[3], sys.argv[4])
    elif sys.argv[1] == "--unsupported":
        edited(sys.argv[2], sys.argv[3], unsupported, "model whose logits pass through Erf (node refused.erf)")
    elif sys.argv[1] == "--too-large":
        edited(sys.argv[2], sys.argv[3], too_large, "model declaring 4 GiB more of weights")
    else:
        edited(sys.argv[1], sys.argv[2], broken_keys, "broken model (present.*.key x 1.25)")
