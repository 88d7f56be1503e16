"""Bulk scoring throughput: readout.ray with 1 and 2 actors against the
single-process CLI (`readout evaluate`), on one synthetic corpus, in one run.

    .venv/bin/python bench/runners/ray_bench.py [--states 2000] [--model models/smollm2-135m-instruct-q4]
        [--runtime ort] [--out bench/results/ray/<date>-ray-<model>.json]

The corpus is generated from a fixed seed: short order notes, each with two
criteria drawn from one rubric (the same questions and options throughout,
as a team scoring its corpus with one rubric has), gold answers from the
facts written into the note. Every configuration runs on the machine's 2
CPUs: the CLI on 2 threads; Ray with 1 actor on 2 CPUs, and with 2 actors
on 1 CPU each. Wall times include each configuration's model loads (the CLI
once, each actor once); Ray's own start is timed apart. Decisions are
compared across configurations (answers, largest probability difference)
rather than assumed equal: thread counts differ."""
import argparse
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time

from result_file import ROOT, result_path, write_result

NAMES = ["Alice", "Bruno", "Chen", "Dana", "Emeka", "Farah", "Goran", "Hana"]
CITIES = ["Paris", "Lagos", "Osaka", "Lima", "Oslo", "Cairo"]
STATUS = {"delivered": "Delivered", "delayed": "Delayed", "lost": "Lost in transit"}
PAY = {"card": "Credit card", "cash": "Cash on delivery", "transfer": "Bank transfer"}


def corpus(n, seed=7):
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        name, city = rng.choice(NAMES), rng.choice(CITIES)
        status, pay = rng.choice(list(STATUS)), rng.choice(list(PAY))
        items = rng.randint(1, 9)
        said = {
            "delivered": f"The parcel reached {city} and was signed for.",
            "delayed": f"The parcel is held at the {city} depot until next week.",
            "lost": f"The courier cannot find the parcel bound for {city}.",
        }[status]
        paid = {"card": "paid by credit card", "cash": "to be paid in cash at the door",
                "transfer": "paid by bank transfer"}[pay]
        rows.append({
            "id": f"order-{i:05d}",
            "evidence": f"Order {1000 + i} from {name}: {items} items, {paid}. {said}",
            "criteria": [
                {"id": "status", "family": "status", "question": "What is the state of the delivery?",
                 "options": [{"id": k, "description": v} for k, v in STATUS.items()], "answer": status},
                {"id": "payment", "family": "payment", "question": "How was the order paid?",
                 "options": [{"id": k, "description": v} for k, v in PAY.items()], "answer": pay},
            ],
        })
    return rows


def cli_run(cli, model, runtime, corpus_path, out):
    t = time.perf_counter()
    subprocess.run([cli, "evaluate", "--model", model, "--runtime", runtime, "--threads", "2", "--out", out,
                    corpus_path], check=True, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t
    with open(out) as f:
        r = json.load(f)
    return wall, r


def compare(a, b):
    """Answers agreeing and the largest probability difference between two
    runs' decisions, row by row (both in corpus order)."""
    assert len(a) == len(b), (len(a), len(b))
    agree, dp = 0, 0.0
    for x, y in zip(a, b):
        assert (x["state"], x["decision"]["id"]) == (y["state"], y["decision"]["id"])
        agree += x["decision"]["answer"] == y["decision"]["answer"]
        for p, q in zip(x["decision"]["probs"], y["decision"]["probs"]):
            dp = max(dp, abs(p["p"] - q["p"]))
    return {"answers_agree": agree / len(a), "max_abs_prob_diff": dp}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--states", type=int, default=2000)
    ap.add_argument("--model", default="models/smollm2-135m-instruct-q4")
    ap.add_argument("--runtime", default="ort")
    ap.add_argument("--out")
    a = ap.parse_args()
    import ray

    import readout
    import readout.ray

    cli = os.path.join(ROOT, "target", "release", "readout")
    if not os.path.exists(cli):
        sys.exit(f"{cli}: build it first (cargo build --release)")
    model = os.path.join(ROOT, a.model)
    model_id = os.path.basename(a.model.rstrip("/"))
    out = result_path("ray_bench", "ray", f"ray-{model_id}", a.out)
    tmp = tempfile.mkdtemp(prefix="readout-ray-bench-")
    states = corpus(a.states)
    path = os.path.join(tmp, "corpus.jsonl")
    with open(path, "w") as f:
        f.writelines(json.dumps(s) + "\n" for s in states)
    size = os.path.getsize(path)
    # About 16 blocks: enough for two actors to share, few enough that a
    # block's fixed costs (a file, a task) stay small.
    block_bytes = -(-size // 16)
    print(f"ray_bench: {len(states)} states ({size} bytes) in {tmp}", file=sys.stderr)

    runs = {}
    wall, rep = cli_run(cli, model, a.runtime, path, os.path.join(tmp, "cli.json"))
    runs["cli_2_threads"] = {"wall_seconds": wall, "load_seconds": rep["load_seconds"],
                             "states_per_second": len(states) / wall}
    cli_rows = rep["rows"]
    print(f"ray_bench: CLI {wall:.1f}s", file=sys.stderr)

    t = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray_start = time.perf_counter() - t
    compared = {}
    metrics = {}
    for actors, cpus in ((1, 2), (2, 1)):
        name = f"ray_{actors}_actor{'s' if actors > 1 else ''}_{cpus}_cpu{'s' if cpus > 1 else ''}"
        o = os.path.join(tmp, name)
        t = time.perf_counter()
        s = readout.ray.score(path, o, model=model, runtime=a.runtime, actors=actors, cpus_per_actor=cpus,
                              block_bytes=block_bytes, progress=lambda s: None)
        wall = time.perf_counter() - t
        runs[name] = {"wall_seconds": wall, "load_seconds": s["load_seconds"], "blocks": s["blocks"],
                      "states_per_second": len(states) / wall}
        compared[name] = compare(cli_rows, readout.ray.read(o))
        metrics[name] = readout.ray.evaluate(o)["report"]["overall"]
        print(f"ray_bench: {name} {wall:.1f}s", file=sys.stderr)
    ray.shutdown()
    base = runs["cli_2_threads"]["wall_seconds"]
    for r in runs.values():
        r["speedup_vs_cli"] = base / r["wall_seconds"]
    result = {
        "what": "bulk scoring throughput: readout.ray (1 and 2 actors) vs the single-process CLI, one run",
        "platform": platform.platform(),
        "model": model_id, "runtime": a.runtime, "states": len(states),
        "criteria": sum(len(s["criteria"]) for s in states), "corpus_bytes": size, "block_bytes": block_bytes,
        "readout": {k: rep["options"][k] for k in ("mode", "cloze_score", "calibration")},
        "ray_version": ray.__version__, "ray_start_seconds": ray_start,
        "runs": runs,
        "decisions_vs_cli": compared,
        "cli_overall": rep["report"]["overall"], "ray_overall": metrics,
        "notes": [
            "All configurations share the same 2 CPUs: Ray here can only show its overhead and how the "
            "actors divide one machine; across N machines the actors are independent and throughput "
            "scales with them until the input's storage is the limit.",
            "What does not scale: each actor loads the model and proves it once (load_seconds), and keeps "
            "its own content-free baseline cache, so every actor pays the rubric's baselines once.",
        ],
    }
    write_result(out, "ray", "bench/runners/ray_bench.py", result)
    print(json.dumps({k: {"wall_seconds": round(v["wall_seconds"], 1), "x_cli": round(v["speedup_vs_cli"], 2)}
                      for k, v in runs.items()}))
    print(f"ray_bench: written {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
