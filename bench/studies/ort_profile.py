"""Where ONNX Runtime spends a criterion: its own profiler over one
45-token suffix after a 256-token prefix (the sweep's shape), per operator
type, for each model directory given. A study, not a test.

    .venv/bin/python bench/studies/ort_profile.py models/gemma3-270m-q4 models/gemma3-270m-q4f16 \
        [--threads 2] [--runs 5] [--out bench/results/ort-profile/<date>-ort-profile-<name>.json]

ONNX Runtime here is the Python package (1.32, CPU), the same kernels as the
native runtime's 1.30 for MatMulNBits; each suffix run is profiled after
one unprofiled warm-up, and the medians over --runs are reported.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "runners"))
from result_file import result_path, write_result  # noqa: E402

PREFIX, SUFFIX = 256, 45


def feeds_for(sess, config, ids, past):
    kv_heads = config.get("num_key_value_heads", config["num_attention_heads"])
    head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    past_len = 0 if past is None else next(iter(past.values())).shape[2]
    f = {}
    for i in sess.get_inputs():
        if i.name == "input_ids":
            f[i.name] = np.array([ids], dtype=np.int64)
        elif i.name == "attention_mask":
            f[i.name] = np.ones((1, past_len + len(ids)), dtype=np.int64)
        elif i.name == "position_ids":
            f[i.name] = np.arange(past_len, past_len + len(ids), dtype=np.int64)[None]
        elif i.name.startswith("past_key_values."):
            if past is not None:
                f[i.name] = past[i.name.replace("past_key_values", "present")]
            else:
                dt = np.float16 if "float16" in i.type else np.float32
                f[i.name] = np.zeros((1, kv_heads, 0, head_dim), dtype=dt)
    return f


def profile(model_dir, threads, runs):
    config = json.load(open(os.path.join(model_dir, "config.json")))
    prefix = [300 + (i * 7919) % 20000 for i in range(PREFIX)]
    suffix = [300 + ((i + PREFIX) * 7919) % 20000 for i in range(SUFFIX)]
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.enable_profiling = True
    so.profile_file_prefix = os.path.join(tempfile.mkdtemp(), "ort")
    sess = ort.InferenceSession(os.path.join(model_dir, "model.onnx"), so, providers=["CPUExecutionProvider"])
    presents = [o.name for o in sess.get_outputs() if o.name.startswith("present.")]
    past = dict(zip(presents, sess.run(presents, feeds_for(sess, config, prefix, None))))
    wall = []
    for _ in range(runs + 1):
        t = time.perf_counter()
        sess.run(["logits"], feeds_for(sess, config, suffix, past))
        wall.append((time.perf_counter() - t) * 1e3)
    events = json.load(open(sess.end_profiling()))
    model_runs = [e for e in events if e.get("name") == "model_run"]
    # The suffix runs after the warm-up: the last `runs` model_run spans.
    spans = [(e["ts"], e["ts"] + e["dur"]) for e in model_runs[-runs:]]
    per_run = [dict() for _ in spans]
    for e in events:
        if e.get("cat") != "Node" or not e.get("name", "").endswith("_kernel_time"):
            continue
        for k, (a, b) in enumerate(spans):
            if a <= e["ts"] < b:
                op = e["args"].get("op_name", "?")
                per_run[k][op] = per_run[k].get(op, 0.0) + e["dur"] / 1e3
    ops = sorted({op for r in per_run for op in r})
    by_op = {op: statistics.median(r.get(op, 0.0) for r in per_run) for op in ops}
    head = [e for e in events if e.get("cat") == "Node" and e.get("name", "").startswith("/lm_head") and e["name"].endswith("_kernel_time")]
    head_ms = statistics.median(
        sum(e["dur"] for e in head if a <= e["ts"] < b) / 1e3 for a, b in spans
    ) if head else None
    return {
        "model": model_dir,
        "threads": threads,
        "prefix_tokens": PREFIX,
        "suffix_tokens": SUFFIX,
        "runs": runs,
        "median_run_ms": statistics.median(wall[1:]),
        "median_run_ms_profiled_spans": statistics.median((b - a) / 1e3 for a, b in spans),
        "head_ms": head_ms,
        "by_op_ms": dict(sorted(by_op.items(), key=lambda kv: -kv[1])),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="+")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out")
    a = ap.parse_args()
    path = result_path("ort_profile", "ort-profile", "ort-profile-" + os.path.basename(a.models[0].rstrip("/")), a.out)
    results = [profile(m, a.threads, a.runs) for m in a.models]
    for r in results:
        top = ", ".join(f"{op} {ms:.1f}" for op, ms in list(r["by_op_ms"].items())[:6])
        head = "" if r["head_ms"] is None else f"; head {r['head_ms']:.1f} ms"
        print(f"[profile] {r['model']}: {r['median_run_ms']:.1f} ms a criterion{head}; by op (ms): {top}")
    write_result(path, "ort-profile", "bench/studies/ort_profile.py", {"onnxruntime": ort.__version__, "results": results})
    print(f"[profile] wrote {path}")


if __name__ == "__main__":
    main()
