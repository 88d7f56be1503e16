"""The wheel where the repository is not: installed into a fresh venv in a
temporary folder, with a copy of two tiny models and no node_modules or
repository on any path, it loads on its default runtime and scores as the
package built in .venv does, on our runtime (the int4 graph) and on ONNX
Runtime from the `onnxruntime` package it depends on (the float graph).

The wheel is built once per run by `bash scripts/test.sh python`
(scripts/build_wheel.sh; READOUT_WHEEL names it)."""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from readout import Engine

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODELS = ["qwen3-tiny-random-q4", "qwen3-tiny-random-fp32"]

# Runs in the fresh venv, from the temporary folder: one state of the
# fixture on each model with the default runtime.
SCRIPT = """
import json, sys
from readout import Engine
state = json.loads(sys.argv[1])
out = {}
for m in sys.argv[2:]:
    e = Engine(m, threads=2)
    info = e.info()
    with e.prefill(state) as s:
        out[m] = {"runtime": info["runtime"], "reason": info["runtime_reason"], "decisions": s.score(state["criteria"])}
print(json.dumps(out))
"""


def wheel():
    named = os.environ.get("READOUT_WHEEL")
    if named:
        return os.path.abspath(named)
    found = sorted(glob.glob(os.path.join(ROOT, "target", "wheels", "readout-*.whl")))
    if not found:
        raise unittest.SkipTest("no wheel: bash scripts/build_wheel.sh (the test command's python part builds it)")
    return found[-1]


class Wheel(unittest.TestCase):
    def test_the_wheel_in_a_fresh_venv_outside_the_repository_scores_on_both_runtimes(self):
        whl = wheel()
        with open(os.path.join(ROOT, "tests", "fixtures", "authored.jsonl")) as f:
            state = json.loads(f.readline())
        tmp = tempfile.mkdtemp(prefix="readout-wheel-")
        try:
            self.assertFalse(tmp.startswith(ROOT))
            venv = os.path.join(tmp, "venv")
            subprocess.run([sys.executable, "-m", "venv", venv], check=True)
            py = os.path.join(venv, "bin", "python")
            subprocess.run([py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", whl],
                           check=True, cwd=tmp)
            for m in MODELS:
                shutil.copytree(os.path.join(ROOT, "models", m), os.path.join(tmp, m))
            # Nothing of the repository or the build machine's environment.
            env = {"PATH": "/usr/bin:/bin", "HOME": tmp, "LANG": "C.UTF-8"}
            run = subprocess.run([py, "-c", SCRIPT, json.dumps(state), *MODELS], cwd=tmp, env=env,
                                 capture_output=True, text=True)
            self.assertEqual(run.returncode, 0, run.stderr)
            got = json.loads(run.stdout)
            # Without the onnxruntime package the int4 graph still runs on
            # ours, and the float graph is refused naming where it looked.
            subprocess.run([py, "-m", "pip", "uninstall", "--quiet", "--yes", "onnxruntime"], check=True, cwd=tmp)
            bare = subprocess.run([py, "-c", SCRIPT, json.dumps(state), MODELS[0]], cwd=tmp, env=env,
                                  capture_output=True, text=True)
            self.assertEqual(bare.returncode, 0, bare.stderr)
            refused = subprocess.run([py, "-c", SCRIPT, json.dumps(state), MODELS[1]], cwd=tmp, env=env,
                                     capture_output=True, text=True)
            self.assertNotEqual(refused.returncode, 0)
            for said in ("libonnxruntime.so.1 not found", "ORT_DYLIB_PATH (unset)", f"node_modules/onnxruntime-node",
                         f"above {tmp}", "the onnxruntime Python package under", "pip install onnxruntime"):
                self.assertIn(said, refused.stderr)
            self.assertEqual(refused.stderr.count("ONNX Runtime library:"), 1, refused.stderr)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        own, ort = got[MODELS[0]], got[MODELS[1]]
        self.assertIn("readout kernels", own["runtime"])
        self.assertIn("int4 graph runs on readout's own runtime", own["reason"])
        self.assertIn("onnxruntime", ort["runtime"])
        self.assertIn("site-packages/onnxruntime/capi/libonnxruntime.so", ort["runtime"])
        self.assertIn("float graph runs on ONNX Runtime", ort["reason"])
        # The same decisions as the package built in .venv, on the same runtimes.
        for m in MODELS:
            e = Engine(os.path.join(ROOT, "models", m), threads=2)
            with e.prefill(state) as s:
                here = s.score(state["criteria"])
            there = got[m]["decisions"]
            self.assertEqual([d["answer"] for d in there], [d["answer"] for d in here], m)
            for a, b in zip(there, here):
                for p, q in zip(a["probs"], b["probs"]):
                    self.assertLessEqual(abs(p["p"] - q["p"]), 1e-6, m)


if __name__ == "__main__":
    unittest.main()
