"""The one writer of bench/results for Python (JavaScript's is
result_file.mjs, the Rust benches' bench/native/common): a result of kind K
goes to bench/results/K/<date>-<name>.json, refused before the run when that
name is taken, and starts with the header every result carries: kind,
command, commit, date, machine, emulated. A result is never replaced."""

import datetime
import json
import os
import platform
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TODAY = datetime.date.today().isoformat()


def result_path(prog, kind, name, out=None):
    """`out`, else bench/results/<kind>/<date>-<name>.json; exits naming it if it exists."""
    path = os.path.abspath(out or os.path.join(ROOT, "bench", "results", kind, f"{TODAY}-{name}.json"))
    if os.path.exists(path):
        sys.exit(f"{prog}: {path} exists; pass --out for another name")
    return path


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def header(kind, script, emulated=False):
    """What ran, on which commit and machine, and whether its GPU was emulated."""
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    return {
        "kind": kind,
        "command": " ".join(["python", script, *sys.argv[1:]]),
        "commit": commit,
        "date": TODAY,
        "machine": {"cpus": os.cpu_count(), "model": _cpu_model()},
        "emulated": emulated,
    }


def write_result(path, kind, script, body, emulated=False):
    """`body` under the header, written to `path` and never over a file; returns what it wrote."""
    h = header(kind, script, emulated)
    result = {**h, **body, "kind": h["kind"], "command": h["command"], "commit": h["commit"], "date": h["date"]}
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "x") as f:
        json.dump(result, f, indent=2, ensure_ascii=False)
        f.write("\n")
    return result
