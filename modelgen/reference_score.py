#!/usr/bin/env python3
"""An independent reference for the engine, in Python: Hugging Face
`tokenizers` and the PyPI onnxruntime (a different release from the one the
engine loads) score one state by one uncached forward per criterion, with the
prompt contract of spec §3 implemented here again from the spec.

    .venv/bin/python modelgen/reference_score.py MODEL_DIR STATE.json

Prints JSON: [{"id": criterion id, "probs": [p per option]}, ...].
The state must carry its own "instruction" (the engine's default is not
repeated here).
"""
import json
import sys

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

LETTERS = "ABCDEFGHIJKLMNOPQRST"


def prefill_feed(sess, ids, kv_heads, head_dim, dtype=None):
    """The inputs of one uncached forward of `ids` from an empty past: the
    whole prompt is one prefill. The past's dtype is the graph's, unless
    `dtype` says. Inputs other than the builder's are left to the caller."""
    feed = {}
    for inp in sess.get_inputs():
        if inp.name == "input_ids":
            feed[inp.name] = np.array([ids], dtype=np.int64)
        elif inp.name == "attention_mask":
            feed[inp.name] = np.ones((1, len(ids)), dtype=np.int64)
        elif inp.name == "position_ids":
            feed[inp.name] = np.arange(len(ids), dtype=np.int64)[None, :]
        elif inp.name.startswith("past_key_values."):
            dt = dtype or (np.float16 if "float16" in inp.type else np.float32)
            feed[inp.name] = np.zeros((1, kv_heads, 0, head_dim), dtype=dt)
    return feed


def main():
    model_dir, state_path = sys.argv[1], sys.argv[2]
    state = json.load(open(state_path))
    tok = Tokenizer.from_file(f"{model_dir}/tokenizer.json")
    enc = lambda s: tok.encode(s, add_special_tokens=False).ids
    letter_ids = []
    for l in LETTERS:
        ids = enc(" " + l)
        assert len(ids) == 1, (l, ids)
        letter_ids.append(ids[0])
    config = json.load(open(f"{model_dir}/config.json"))
    sess = ort.InferenceSession(f"{model_dir}/model.onnx", providers=["CPUExecutionProvider"])
    head = state["instruction"] + "\n\nEvidence:\n" + state["evidence"] + "\n"
    head_ids = enc(head)
    out = []
    for c in state["criteria"]:
        suffix = "\nCriterion: " + c["question"] + "\nOptions:\n"
        for i, o in enumerate(c["options"]):
            suffix += LETTERS[i] + ". " + o["description"] + "\n"
        suffix += "Answer:"
        ids = head_ids + enc(suffix)
        hd = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
        feed = prefill_feed(sess, ids, config["num_key_value_heads"], hd)
        logits = sess.run(["logits"], feed)[0][0, -1].astype(np.float64)
        sel = logits[letter_ids[: len(c["options"])]]
        p = np.exp(sel - sel.max())
        p /= p.sum()
        out.append({"id": c["id"], "probs": p.tolist()})
    print(json.dumps(out))


if __name__ == "__main__":
    main()
