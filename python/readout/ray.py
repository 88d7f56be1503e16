"""Bulk scoring on Ray Data: states read from JSONL or Parquet, one engine
per actor, decisions written one file per input block.

    import ray, readout.ray
    ray.init()
    readout.ray.score("states.jsonl", "out", model="models/smollm2-135m-instruct-q4")

The output folder holds what this module writes and nothing else:

    plan.json                 the run: inputs (size, mtime), block size, model, readout
    decisions/<block>.jsonl   one row per criterion: source, position, state, family,
                              gold, decision (the CLI's decision JSON); or .parquet
    errors/<block>.jsonl      one row per state refused: source, position, state,
                              code, field, limit, message
    manifest.jsonl            one line per block scored, by every run on this folder:
                              block, node (Ray's node id), pid, counts, seconds

A block is a deterministic slice of one input: the lines that start inside
a byte range of a JSONL file, or one row group of a Parquet file. Its name
comes from the input's name, a digest of its path and the block's number,
so a rerun names every block as the first run did. A block is done when its
decisions file exists: files are written under a temporary name and
renamed, so a worker or job killed mid-way leaves a whole file or none, and
a rerun skips what is done and writes nothing twice. A row that cannot be
scored (malformed JSON, a refused state) goes to the errors output with
the engine's code, field and limit; the block goes on.

Paths are local or on a filesystem every node mounts at the same path; the
``readout`` package (with its ``onnxruntime`` dependency) and the model
folder must be present on every node. Actors are spread over the nodes;
when a node is lost its actors restart where CPUs are free, and the blocks
it had in flight are scored again there (or by a rerun).
"""
import glob
import hashlib
import json
import os
import sys
import time
import uuid

from . import Engine, ReadoutError, _call, report
from ._readout import check_options as _check_options

__all__ = ["plan", "score", "read", "errors", "evaluate", "manifest", "BLOCK_BYTES"]

# A JSONL block's byte range: about a thousand short states, a few seconds
# of work on one core, so a killed worker loses little and the pool stays fed.
BLOCK_BYTES = 1 << 20
_PLAN = "plan.json"
_DECISIONS = "decisions"
_ERRORS = "errors"
_MANIFEST = "manifest.jsonl"
_FORMATS = ("jsonl", "parquet")
_READOUT = ("mode", "calibration", "cloze_score", "debias", "prompt")


def _inputs(inputs):
    """Input files in a fixed order: each path as given, a folder's
    ``*.jsonl`` and ``*.parquet`` files sorted by name."""
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    files = []
    for p in map(os.fspath, inputs):
        if os.path.isdir(p):
            found = sorted(glob.glob(os.path.join(p, "*.jsonl")) + glob.glob(os.path.join(p, "*.parquet")))
            if not found:
                raise ReadoutError(f"{p}: no *.jsonl or *.parquet file in it", "invalid_input", "inputs")
            files += found
        elif os.path.isfile(p):
            files.append(p)
        else:
            raise ReadoutError(f"{p}: no such file or folder", "invalid_input", "inputs")
    if not files:
        raise ReadoutError("no input given", "invalid_input", "inputs")
    return [os.path.abspath(f) for f in files]


def _kind(path):
    if path.endswith(".parquet"):
        return "parquet"
    return "jsonl"


def plan(inputs, block_bytes=BLOCK_BYTES):
    """The blocks a run over ``inputs`` is made of, in input order: dicts
    {name, source, kind, start, end}. Only metadata is read: a JSONL file's
    size, a Parquet file's row groups."""
    if not isinstance(block_bytes, int) or block_bytes < 1:
        raise ReadoutError(f"block_bytes {block_bytes!r}: a positive whole number of bytes",
                           "invalid_option", "block_bytes")
    blocks = []
    for path in _inputs(inputs):
        stem = os.path.splitext(os.path.basename(path))[0]
        tag = f"{stem}-{hashlib.sha256(path.encode()).hexdigest()[:8]}"
        kind = _kind(path)
        if kind == "parquet":
            import pyarrow.parquet as pq

            meta = pq.ParquetFile(path).metadata
            row = 0
            for g in range(meta.num_row_groups):
                n = meta.row_group(g).num_rows
                blocks.append({"name": f"{tag}-{g:06d}", "source": path, "kind": kind, "start": row, "end": row + n,
                               "group": g})
                row += n
        else:
            size = os.path.getsize(path)
            for k, start in enumerate(range(0, max(size, 1), block_bytes)):
                blocks.append({"name": f"{tag}-{k:06d}", "source": path, "kind": kind, "start": start,
                               "end": min(start + block_bytes, size)})
    return blocks


def _jsonl_rows(block):
    """(position, text) of each line that starts in [start, end): the line
    straddling ``start`` belongs to the block before."""
    with open(block["source"], "rb") as f:
        pos = block["start"]
        if pos > 0:
            f.seek(pos - 1)
            if f.read(1) != b"\n":
                f.readline()
                pos = f.tell()
        while pos < block["end"]:
            line = f.readline()
            if not line:
                break
            if line.strip():
                yield pos, line.decode("utf-8", errors="replace")
            pos += len(line)


def _parquet_rows(block):
    import pyarrow.parquet as pq

    table = pq.ParquetFile(block["source"]).read_row_group(block["group"])
    for i, row in enumerate(table.to_pylist()):
        yield block["start"] + i, row


def _present(v):
    """A Parquet row without its nulls: a struct column gives every row
    every field, null where a row has none, and an absent field is what
    the engine reads as not given."""
    if isinstance(v, dict):
        return {k: _present(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [_present(x) for x in v]
    return v


def _state_of(raw):
    """A state dict from a JSONL line or a Parquet row, or a refusal. A
    Parquet row's ``criteria`` may be nested or JSON text; null columns are
    absent fields."""
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except ValueError as e:
            return None, {"code": "invalid_input", "field": "line", "limit": None, "message": f"not JSON: {e}"}
    else:
        value = _present(raw)
        if isinstance(value.get("criteria"), str):
            try:
                value["criteria"] = json.loads(value["criteria"])
            except ValueError as e:
                return None, {"code": "invalid_input", "field": "criteria", "limit": None,
                              "message": f"criteria: not JSON: {e}"}
    if not isinstance(value, dict):
        return None, {"code": "invalid_input", "field": "state", "limit": None,
                      "message": "a state is a JSON object {id, instruction?, evidence, criteria}"}
    return value, None


def _name(output, sub, block, fmt):
    return os.path.join(output, sub, f"{block['name']}.{fmt}")


def _write_atomic(path, write):
    """``write(tmp)`` then rename: readers see the whole file or none."""
    tmp = f"{path}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _write_text(text):
    def write(path):
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)

    return write


def _write_jsonl(rows):
    def write(path):
        with open(path, "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False))
                f.write("\n")
            f.flush()
            os.fsync(f.fileno())

    return write


# Parquet columns: the JSONL row's fields, the decision as its JSON text
# (its fields vary with the readout), and its id, answer and margin flat
# for queries.
def _write_parquet(rows):
    def write(path):
        import pyarrow as pa
        import pyarrow.parquet as pq

        schema = pa.schema([("source", pa.string()), ("position", pa.int64()), ("state", pa.string()),
                            ("criterion", pa.string()), ("family", pa.string()), ("gold", pa.string()),
                            ("answer", pa.string()), ("margin", pa.float64()), ("decision", pa.string())])
        cols = {n: [] for n in schema.names}
        for r in rows:
            d = r["decision"]
            for n, v in (("source", r["source"]), ("position", r["position"]), ("state", r["state"]),
                         ("criterion", d["id"]), ("family", r["family"]), ("gold", r["gold"]),
                         ("answer", d["answer"]), ("margin", d["margin"]), ("decision", json.dumps(d))):
                cols[n].append(v)
        pq.write_table(pa.table(cols, schema=schema), path)

    return write


class _BlockScorer:
    """One Ray actor: the model loaded once, on as many threads as the
    actor was given CPUs; each call scores whole blocks."""

    def __init__(self, model, runtime, options, output, fmt):
        import ray

        cpus = ray.get_runtime_context().get_assigned_resources().get("CPU", 1)
        self.threads = max(1, int(cpus))
        self.node = ray.get_runtime_context().get_node_id()
        t = time.perf_counter()
        self.engine = Engine(model, runtime=runtime, threads=self.threads)
        self.load_seconds = time.perf_counter() - t
        self.options = options
        self.output = output
        self.fmt = fmt
        self.loaded = False

    def __call__(self, batch):
        return {"summary": [json.dumps(self.block(json.loads(b))) for b in batch["block"]]}

    def block(self, block):
        done = _name(self.output, _DECISIONS, block, self.fmt)
        summary = {"block": block["name"], "node": self.node, "pid": os.getpid(), "threads": self.threads}
        if os.path.exists(done):
            # A retry of a block whose files were written before its
            # result reached the driver.
            return {**summary, "skipped": True}
        t = time.perf_counter()
        rows = _parquet_rows(block) if block["kind"] == "parquet" else _jsonl_rows(block)
        states, where, refused = [], [], []
        for pos, raw in rows:
            value, err = _state_of(raw)
            if err:
                refused.append({"source": block["source"], "position": pos, "state": None, **err})
                continue
            states.append(value)
            where.append(pos)
        decided = []
        for pos, state, out in zip(where, states, self.engine.score_many(states, **self.options)):
            if "error" in out:
                refused.append({"source": block["source"], "position": pos, "state": out.get("state"),
                                **out["error"]})
                continue
            for c, d in zip(state.get("criteria", []), out["decisions"]):
                decided.append({"source": block["source"], "position": pos, "state": out["state"],
                                "family": c.get("family", ""), "gold": c.get("answer"), "decision": d})
        refused.sort(key=lambda r: r["position"])
        if refused:
            _write_atomic(_name(self.output, _ERRORS, block, "jsonl"), _write_jsonl(refused))
        # The decisions file last: its presence says the block is done.
        writer = _write_parquet if self.fmt == "parquet" else _write_jsonl
        _write_atomic(done, writer(decided))
        first = not self.loaded
        self.loaded = True
        return {**summary, "skipped": False, "states": len(states), "decisions": len(decided),
                "errors": len(refused), "seconds": time.perf_counter() - t,
                "load_seconds": self.load_seconds if first else 0.0}


def _stat(path):
    st = os.stat(path)
    return {"path": path, "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _check_output(output, want):
    """Creates the output folder's layout, or checks that the run already
    there is this one: its outputs would otherwise mix two runs."""
    path = os.path.join(output, _PLAN)
    if os.path.exists(path):
        with open(path) as f:
            have = json.load(f)
        for key in want:
            if have.get(key) != want[key]:
                raise ReadoutError(
                    f"{output}: holds a run whose {key} differs ({have.get(key)!r}, now {want[key]!r}); "
                    "give another output folder to start a new run", "plan_mismatch", key)
        return
    if os.path.isdir(output):
        theirs = [n for n in os.listdir(output) if n in (_DECISIONS, _ERRORS)]
        if theirs:
            raise ReadoutError(f"{output}: holds {theirs[0]}/ but no {_PLAN}; not a folder this module wrote",
                               "invalid_input", "output")
    os.makedirs(output, exist_ok=True)
    _write_atomic(path, _write_text(json.dumps(want, indent=2) + "\n"))


def _progress(total, done_before):
    start = time.perf_counter()
    count = [done_before]

    def show(s):
        count[0] += 1
        rate = ""
        if not s.get("skipped"):
            rate = (f" {s['states']} states, {s['errors']} refused, {s['seconds']:.1f}s on pid {s['pid']}"
                    f" (node {s['node'][:8]})")
        print(f"readout.ray: {count[0]}/{total} blocks ({time.perf_counter() - start:.0f}s){rate}",
              file=sys.stderr, flush=True)

    return show


def score(inputs, output, model, *, runtime="auto", actors=None, cpus_per_actor=1, block_bytes=BLOCK_BYTES,
          format="jsonl", progress=None, **readout):
    """Scores every state of ``inputs`` (JSONL or Parquet files, or folders
    of them) on a Ray cluster (``ray.init()`` first; a local one is started
    otherwise) and writes the decisions under ``output``. ``actors`` engines
    (default: the cluster's CPUs / ``cpus_per_actor``), each on
    ``cpus_per_actor`` threads. ``readout`` takes ``mode``, ``calibration``,
    ``cloze_score``, ``debias`` and ``prompt`` as ``Engine.score_many`` does.
    ``progress(summary)`` is called as each block ends (default: a line on
    stderr). Returns the run's summary; a rerun on the same output skips the
    blocks already written."""
    import ray

    if format not in _FORMATS:
        raise ReadoutError(f"format {format!r}: one of {_FORMATS}", "invalid_option", "format")
    unknown = sorted(set(readout) - set(_READOUT))
    if unknown:
        raise ReadoutError(f"{unknown[0]}: not a readout option (those are {', '.join(_READOUT)})",
                           "invalid_option", unknown[0])
    options = {k: v for k, v in readout.items() if v is not None}
    # Refused here, not by every actor's engine once the cluster is busy.
    _call(_check_options, json.dumps(options))
    blocks = plan(inputs, block_bytes)
    output = os.path.abspath(os.fspath(output))
    # Absolute, as actors may run in another working directory.
    model = os.path.abspath(os.fspath(model))
    _check_output(output, {
        "inputs": [_stat(p) for p in dict.fromkeys(b["source"] for b in blocks)],
        "block_bytes": block_bytes, "format": format, "model": model, "runtime": runtime,
        "readout": options, "blocks": [b["name"] for b in blocks],
    })
    for sub in (_DECISIONS, _ERRORS):
        os.makedirs(os.path.join(output, sub), exist_ok=True)
    todo = [b for b in blocks if not os.path.exists(_name(output, _DECISIONS, b, format))]
    summary = {"blocks": len(blocks), "done_before": len(blocks) - len(todo), "scored": 0, "states": 0,
               "decisions": 0, "errors": 0, "skipped_retries": 0, "actors": 0, "load_seconds": [],
               "nodes": {}, "seconds": 0.0}
    t = time.perf_counter()
    if todo:
        if not ray.is_initialized():
            ray.init()
        if actors is None:
            actors = max(1, int(ray.cluster_resources().get("CPU", 1) // cpus_per_actor))
        actors = min(actors, len(todo))
        summary["actors"] = actors
        show = progress or _progress(len(blocks), summary["done_before"])
        ds = ray.data.from_items([{"block": json.dumps(b)} for b in todo], override_num_blocks=len(todo))
        # SPREAD: one engine a node before two on one, so every node's
        # cores and memory bandwidth work; a lost node's actors restart
        # wherever CPUs are free (Ray Data's pool restarts them).
        ds = ds.map_batches(_BlockScorer, batch_size=1, compute=ray.data.ActorPoolStrategy(size=actors),
                            num_cpus=cpus_per_actor, scheduling_strategy="SPREAD",
                            fn_constructor_kwargs={"model": model, "runtime": runtime, "options": options,
                                                   "output": output, "fmt": format})
        # The driver is the manifest's one writer: a line a block, flushed
        # as it ends, so a killed job's manifest names what it had done.
        with open(os.path.join(output, _MANIFEST), "a", encoding="utf-8") as manifest:
            for row in ds.iter_rows():
                s = json.loads(row["summary"])
                if not s["skipped"]:
                    manifest.write(json.dumps({k: s[k] for k in _MANIFEST_FIELDS}) + "\n")
                    manifest.flush()
                show(s)
                _count(summary, s)
    summary["seconds"] = time.perf_counter() - t
    _sweep(output)
    return summary


_MANIFEST_FIELDS = ("block", "node", "pid", "threads", "states", "decisions", "errors", "seconds")


def _count(summary, s):
    if s["skipped"]:
        summary["skipped_retries"] += 1
        return
    summary["scored"] += 1
    summary["nodes"][s["node"]] = summary["nodes"].get(s["node"], 0) + 1
    for k in ("states", "decisions", "errors"):
        summary[k] += s[k]
    if s["load_seconds"]:
        summary["load_seconds"].append(s["load_seconds"])


def manifest(output):
    """The manifest's lines: which node and process scored each block, in
    the order blocks ended, over every run on ``output``. A last line cut
    by a killed driver is left out."""
    path = os.path.join(os.fspath(output), _MANIFEST)
    if not os.path.exists(path):
        return []
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                rows.append(json.loads(line))
            except ValueError:
                break
    return rows


def _sweep(output):
    """Temporary files a killed writer left: ours by name, and no writer of
    this run is alive once the dataset has ended."""
    for sub in (_DECISIONS, _ERRORS):
        for p in glob.glob(os.path.join(output, sub, "*.tmp-*")):
            os.unlink(p)


def _load_plan(output):
    path = os.path.join(os.fspath(output), _PLAN)
    if not os.path.exists(path):
        raise ReadoutError(f"{output}: no {_PLAN}; not a folder readout.ray.score wrote", "invalid_input", "output")
    with open(path) as f:
        return json.load(f)


def _rows(output, sub, fmt, complete):
    output = os.fspath(output)
    p = _load_plan(output)
    fmt = fmt or p["format"]
    missing = [n for n in p["blocks"] if not os.path.exists(os.path.join(output, _DECISIONS, f"{n}.{p['format']}"))]
    if missing and complete:
        raise ReadoutError(f"{output}: {len(missing)} of {len(p['blocks'])} blocks not written yet "
                           f"(first: {missing[0]}); rerun readout.ray.score to finish", "incomplete", "output",
                           len(p["blocks"]))
    rows = []
    for name in p["blocks"]:
        path = os.path.join(output, sub, f"{name}.{fmt}")
        if not os.path.exists(path):
            continue
        if fmt == "parquet":
            import pyarrow.parquet as pq

            for r in pq.read_table(path).to_pylist():
                rows.append({"source": r["source"], "position": r["position"], "state": r["state"],
                             "family": r["family"], "gold": r["gold"], "decision": json.loads(r["decision"])})
        else:
            with open(path, encoding="utf-8") as f:
                rows += [json.loads(line) for line in f if line.strip()]
    return rows


def read(output, complete=True):
    """The decisions under ``output`` in input order (input, position,
    criterion); refuses an unfinished run unless ``complete=False``."""
    return _rows(output, _DECISIONS, None, complete)


def errors(output):
    """The rows refused, in input order."""
    return _rows(output, _ERRORS, "jsonl", False)


def evaluate(output):
    """``readout evaluate``'s metrics over a finished run's decisions in
    input order: the numbers one process gives on the same states."""
    return report(read(output))
