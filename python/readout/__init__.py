"""readout's native engine for Python.

A small LLM reads a *state* (an instruction plus evidence) once and keeps its
KV cache; criteria (multiple-choice questions) are then answered against it
from next-token log-probabilities. Decisions are plain dicts with the fields
of the CLI's JSON (``readout score``); a refusal is a ``ReadoutError`` with
the CLI's ``code``, ``field`` and ``limit``, and the engine stays usable
after it. The GIL is released while the engine loads and computes.

    from readout import Engine
    engine = Engine("models/smollm2-135m-instruct-q4")
    with engine.prefill({"id": "s1", "evidence": "The lamp is red.", "criteria": []}) as state:
        decisions = state.score([{"id": "c", "question": "What colour is the lamp?",
                                  "options": [{"id": "red", "description": "Red"},
                                              {"id": "blue", "description": "Blue"}]}])
"""
import glob
import importlib.util
import json
import os


def _onnxruntime_library():
    """The library inside the ``onnxruntime`` package this one depends on,
    found without importing it: where the native engine loads ONNX Runtime
    from unless ``ORT_DYLIB_PATH`` names one (the engine's own search, and
    its error naming every place it looked, come after)."""
    spec = importlib.util.find_spec("onnxruntime")
    for root in (spec.submodule_search_locations or []) if spec else []:
        found = sorted(p for p in glob.glob(os.path.join(root, "capi", "libonnxruntime.so*"))
                       if "providers" not in os.path.basename(p))
        if found:
            return found[-1]
    return None


if not os.environ.get("ORT_DYLIB_PATH"):
    _lib = _onnxruntime_library()
    if _lib:
        os.environ["ORT_DYLIB_PATH"] = _lib

from ._readout import NativeEngine as _NativeEngine  # noqa: E402
from ._readout import NativeError as _NativeError  # noqa: E402
from ._readout import __version__  # noqa: E402
from ._readout import report as _report  # noqa: E402

__all__ = ["Engine", "State", "ReadoutError", "report", "__version__"]


class ReadoutError(Exception):
    """A refusal: ``code`` names it, ``field`` is the input concerned and
    ``limit`` the bound exceeded, where there is one."""

    def __init__(self, message, code, field=None, limit=None):
        super().__init__(message)
        self.code = code
        self.field = field
        self.limit = limit


def _call(f, *args):
    try:
        return f(*args)
    except _NativeError as e:
        r = json.loads(e.args[0])
        raise ReadoutError(r["message"], r["code"], r.get("field"), r.get("limit")) from None


def _options(**given):
    return json.dumps({k: v for k, v in given.items() if v is not None})


def report(rows):
    """``readout evaluate``'s metrics over ``rows`` (dicts: family, gold,
    decision), in their order: ``{report, calibration, scored}``. Rows
    without a gold answer are left out; the calibration is fitted on the
    first half of this order, so rows in the fixture's order give the CLI's
    numbers."""
    return json.loads(_call(_report, json.dumps(list(rows))))


class Engine:
    """A model loaded and proven: ``model`` is a model folder, a graph file
    or ``models.json#<id>``; ``runtime`` is ``"auto"`` (an int4 graph on
    readout's own kernels, ONNX Runtime when they lack an operator or the
    graph is float: the browser's rule), ``"ort"`` (ONNX Runtime) or
    ``"own"``; ``info()["runtime_reason"]`` says which and why;
    ``threads`` defaults to every core.
    Options left out take the model's ``models.json`` defaults, as the CLI's
    flags do (``info()["readout_defaults"]`` says which)."""

    def __init__(self, model, runtime="auto", threads=None):
        self._native = _call(_NativeEngine, str(model), runtime, threads)

    def info(self):
        return json.loads(_call(self._native.info))

    def prefill(self, state, prompt=None, mode=None):
        """Reads ``state`` ({id, instruction?, evidence, criteria?}) once;
        returns a ``State`` whose cache serves every ``score`` call."""
        handle = _call(self._native.prefill, json.dumps(state), _options(prompt=prompt, mode=mode))
        return State(self, handle, state.get("id"))

    def score_many(self, states, mode=None, calibration=None, cloze_score=None, debias=None, prompt=None):
        """Each state prefilled, scored on its own criteria and disposed in
        turn: ``[{state, decisions}]``, with ``{state, error}`` in place of a
        state that was refused (the others go on)."""
        out = json.loads(_call(self._native.score_many, json.dumps(list(states)),
                               _options(mode=mode, calibration=calibration, cloze_score=cloze_score,
                                        debias=debias, prompt=prompt)))
        for r in out:
            if "error" in r:
                e = r["error"]
                r["error"] = {"message": e["message"], "code": e["code"], "field": e.get("field"), "limit": e.get("limit")}
        return out

    def live_states(self):
        return self._native.live_states()


class State:
    """A prefilled state; ``dispose()`` (or leaving a ``with`` block) frees its cache."""

    def __init__(self, engine, handle, state_id):
        self._engine = engine
        self._handle = handle
        self.id = state_id

    def score(self, criteria, mode=None, calibration=None, cloze_score=None, debias=None):
        """Answers each criterion: a list of decisions (dicts: id, answer, probs, margin, ...)."""
        return json.loads(_call(self._engine._native.score, self._handle, json.dumps(list(criteria)),
                                _options(mode=mode, calibration=calibration, cloze_score=cloze_score, debias=debias)))

    def dispose(self):
        if self._handle is not None:
            handle, self._handle = self._handle, None
            _call(self._engine._native.dispose, handle)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.dispose()
        return False
