"""The Python package against the CLI on the same model: the same decisions
bit for bit, the same refusals by code, the GIL released while it computes.

Run by `bash scripts/test.sh python` (which builds the wheel into .venv)."""
import json
import os
import subprocess
import tempfile
import threading
import time
import unittest

import readout
from readout import Engine, ReadoutError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY = os.path.join(ROOT, "models", "qwen3-tiny-random-q4")
CLI = os.path.join(ROOT, "target", "debug", "readout")


def fixture(n):
    with open(os.path.join(ROOT, "tests", "fixtures", "authored.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()][:n]


def timeless(decisions):
    """Decisions without their wall-clock `ms`: everything else must be equal."""
    return [{k: v for k, v in d.items() if k != "ms"} for d in decisions]


def cli_score(state, runtime):
    """`readout score` on one state: the CLI's JSON."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(state, f)
    try:
        out = subprocess.run([CLI, "score", "--model", TINY, "--state", f.name, "--runtime", runtime, "--threads", "2"],
                             check=True, capture_output=True, text=True, cwd=ROOT).stdout
        return json.loads(out)
    finally:
        os.unlink(f.name)


class Engines(unittest.TestCase):
    engines = {}

    @classmethod
    def engine(cls, runtime):
        if runtime not in cls.engines:
            cls.engines[runtime] = Engine(TINY, runtime=runtime, threads=2)
        return cls.engines[runtime]


class SameAsTheCli(Engines):
    def test_decisions_equal_the_clis_bit_for_bit_on_both_runtimes(self):
        for runtime in ("ort", "own"):
            engine = self.engine(runtime)
            for s in fixture(2):
                ref = cli_score(s, runtime)
                with engine.prefill(s) as state:
                    got = state.score(s["criteria"])
                self.assertEqual(timeless(got), timeless(ref["decisions"]), f"{runtime} {s['id']}")
            info = engine.info()
            self.assertEqual(info["readout_defaults"], ref["readout_defaults"])
            self.assertEqual(info["readout_defaults_from"], ref["readout_defaults_from"])
            self.assertEqual(engine.live_states(), 0)

    def test_options_given_override_the_defaults_as_the_cli_flags_do(self):
        s = fixture(1)[0]
        with self.engine("ort").prefill(s) as state:
            cloze = state.score(s["criteria"], mode="cloze", calibration="content-free")
            letters = state.score(s["criteria"], mode="letters", calibration="none")
        self.assertTrue(all(d["readout"]["mode"] == "cloze" for d in cloze), cloze[0]["readout"])
        self.assertTrue(all(d["readout"]["mode"] == "letters" for d in letters), letters[0]["readout"])


class ScoreMany(Engines):
    def test_each_state_as_alone_and_a_refused_state_does_not_stop_the_rest(self):
        engine = self.engine("ort")
        states = fixture(3)
        one_option = dict(states[0], id="one-option",
                          criteria=[{"id": "c", "question": "Q?", "options": [{"id": "a", "description": "A"}]}])
        typo = {"id": "typo", "evidnce": "x", "criteria": []}
        out = engine.score_many([states[0], one_option, states[1], typo, states[2]])
        self.assertEqual([r["state"] for r in out], [states[0]["id"], "one-option", states[1]["id"], "typo", states[2]["id"]])
        for r, s in zip([out[0], out[2], out[4]], states):
            with engine.prefill(s) as state:
                self.assertEqual(timeless(r["decisions"]), timeless(state.score(s["criteria"])), s["id"])
        self.assertEqual(out[1]["error"]["code"], "too_few_options")
        self.assertEqual(out[1]["error"]["field"], "options")
        self.assertEqual(out[1]["error"]["limit"], 2)
        self.assertEqual(out[3]["error"]["code"], "unknown_field")
        self.assertIn("evidnce", out[3]["error"]["message"])
        self.assertEqual(engine.live_states(), 0)


class Refusals(Engines):
    def test_each_refusal_names_its_code_and_the_engine_goes_on(self):
        engine = self.engine("ort")
        s = fixture(1)[0]
        state = engine.prefill(s)
        cases = {
            "threads": lambda: Engine(TINY, threads=0),
            "runtime": lambda: Engine(TINY, runtime="gpu"),
            "missing": lambda: Engine(os.path.join(ROOT, "models", "no-such-model")),
            "mode": lambda: state.score(s["criteria"], mode="bogus"),
            "too_many_criteria": lambda: state.score([s["criteria"][0]] * 10_001),
        }
        got = {}
        try:
            for name, f in cases.items():
                with self.assertRaises(ReadoutError, msg=name) as cm:
                    f()
                got[name] = (cm.exception.code, cm.exception.field, cm.exception.limit)
        finally:
            handle = state._handle
            state.dispose()
        # The CLI's --threads refusal: the most this machine allows (4 a core, 64 at most).
        self.assertEqual(got["threads"], ("invalid_option", "threads", min(4 * os.cpu_count(), 64)))
        self.assertEqual(got["runtime"], ("invalid_option", "runtime", None))
        self.assertEqual(got["missing"][0], "model_file")
        self.assertEqual(got["mode"][:2], ("invalid_option", "options"))
        self.assertEqual(got["too_many_criteria"], ("too_large", "criteria", 10_000))
        with self.assertRaises(ReadoutError) as cm:
            readout._call(engine._native.score, handle, json.dumps(s["criteria"]))
        self.assertEqual(cm.exception.code, "unknown_state")
        # After every refusal the engine scores, and holds no state.
        self.assertEqual(engine.live_states(), 0)
        with engine.prefill(s) as again:
            self.assertEqual(len(again.score(s["criteria"])), len(s["criteria"]))


class Threads(Engines):
    def test_the_gil_is_released_while_the_engine_computes(self):
        engine = self.engine("ort")
        states = fixture(3) * 4
        count = [0]
        stop = threading.Event()

        def spin():
            while not stop.is_set():
                count[0] += 1

        t = threading.Thread(target=spin)
        t.start()
        time.sleep(0.05)
        before = count[0]
        t0 = time.perf_counter()
        engine.score_many(states)
        ms = (time.perf_counter() - t0) * 1e3
        during = count[0] - before
        stop.set()
        t.join()
        print(f"\n# a Python thread counted to {during} during {ms:.0f} ms of score_many", flush=True)
        # Held, the GIL would leave the counting thread a few switch
        # intervals at most; released, it counts all along.
        self.assertGreater(during, 200 * ms)


if __name__ == "__main__":
    unittest.main()
