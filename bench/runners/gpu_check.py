#!/usr/bin/env python3
"""The WebGPU check on whatever adapter this machine's Chromium reaches.

Run by bench/runners/gpu_check.sh, which unpacks the bundle and sets the library
paths. This part needs only python3's standard library: a lent GPU machine
has python3 but no node, and node (99 MB) does not fit the 64 MiB that can be
carried to it in one call.

1. Serves ROOT (the pages, pkg-diagnostics/, models/, node_modules/) cross-origin
   isolated, as harness/serve.mjs does, and takes the pages' reports by POST.
2. Opens bench/page/adapter.html: prints the adapter's description and features,
   or why there is none, and stops there if there is none.
3. Opens the benchmark page (bench/page/) on the WebGPU backend with autorun and
   writes its JSON result, plus what this check saw, to --out.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

BASE_FLAGS = [
    "--no-sandbox", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run", "--headless",
]
# Ways to make Chromium's WebGPU take the system's Vulkan driver rather than
# its own SwiftShader, tried in order until one gives an adapter that is not
# a CPU implementation. The first is the set known to reach an NVIDIA GPU
# headless (Vulkan for Dawn and ANGLE, no window-system surface since there is
# no display, the GPU blocklist ignored); the others are fallbacks. On a
# machine without a GPU the first gives no adapter at all (ANGLE lands on a
# CPU Vulkan driver and WebGPU is switched off) and the last gives
# SwiftShader.
FLAG_SETS = [
    ("vulkan+angle", ["--enable-unsafe-webgpu", "--enable-features=Vulkan,VulkanFromANGLE,DefaultANGLEVulkan",
                      "--use-angle=vulkan", "--disable-vulkan-surface", "--ignore-gpu-blocklist"]),
    ("vulkan", ["--enable-unsafe-webgpu", "--enable-features=Vulkan", "--disable-vulkan-surface", "--ignore-gpu-blocklist"]),
    ("default", ["--enable-unsafe-webgpu"]),
]
if os.environ.get("READOUT_GPU_FLAGS"):  # for trying another set by hand
    FLAG_SETS = [("env", os.environ["READOUT_GPU_FLAGS"].split())]
CPU_ADAPTER = re.compile(r"swiftshader|llvmpipe|lavapipe", re.I)


def log(msg):
    print(f"[gpu_check] {msg}", file=sys.stderr, flush=True)


class Reports:
    def __init__(self):
        self.got = {}
        self.cond = threading.Condition()

    def put(self, name, body):
        with self.cond:
            self.got[name] = body
            self.cond.notify_all()

    def wait(self, name, timeout, alive):
        end = time.monotonic() + timeout
        with self.cond:
            while name not in self.got:
                left = end - time.monotonic()
                if left <= 0 or not alive():
                    return None
                self.cond.wait(min(left, 1.0))
            return self.got[name]


def make_server(root, reports):
    class Handler(SimpleHTTPRequestHandler):
        def __init__(self, *a, **k):
            super().__init__(*a, directory=root, **k)

        def end_headers(self):
            self.send_header("Cross-Origin-Opener-Policy", "same-origin")
            self.send_header("Cross-Origin-Embedder-Policy", "require-corp")
            self.send_header("Cross-Origin-Resource-Policy", "same-origin")
            self.send_header("Cache-Control", "no-store")
            super().end_headers()

        def guess_type(self, path):
            if path.endswith((".mjs", ".js")):
                return "text/javascript"
            if path.endswith(".wasm"):
                return "application/wasm"
            return super().guess_type(path)

        def do_POST(self):
            path = urllib.parse.urlparse(self.path).path
            if not path.startswith("/__report/"):
                self.send_error(404)
                return
            n = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(n)
            try:
                data = json.loads(body)
            except ValueError as e:
                data = {"error": f"the page sent a report that is not JSON: {e}"}
            self.send_response(204)
            self.end_headers()
            reports.put(path[len("/__report/"):], data)

        def log_message(self, *a):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class Browser:
    """One headless Chromium on one URL; its console lines are echoed."""

    def __init__(self, chromium, url, flags, echo):
        self.profile = tempfile.mkdtemp(prefix="readout-gpu-profile-")
        args = [chromium, *BASE_FLAGS, *flags, "--enable-logging=stderr", "--v=0",
                f"--user-data-dir={self.profile}", url]
        env = dict(os.environ)
        if os.environ.get("READOUT_CHROMIUM_LIBS"):
            env["LD_LIBRARY_PATH"] = os.environ["READOUT_CHROMIUM_LIBS"] + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
        self.proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, errors="replace")
        self.tail = []
        self.echo = echo
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stderr:
            line = line.rstrip()
            self.tail = (self.tail + [line])[-60:]
            m = re.search(r'CONSOLE\(\d+\)\] "(.*)", source', line) or re.search(r":CONSOLE:\d+\] \"(.*)\"", line)
            if m and self.echo and (m.group(1).startswith("[bench]") or "rror" in m.group(1)):
                print(m.group(1), file=sys.stderr, flush=True)

    def alive(self):
        return self.proc.poll() is None

    def close(self):
        if self.alive():
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)

    def gpu_lines(self):
        keys = re.compile(r"vulkan|webgpu|dawn|gpu|adapter|angle", re.I)
        return [l for l in self.tail if keys.search(l)][-15:]


def open_page(chromium, flags, base, path, query, name, reports, timeout, echo=False):
    q = dict(query, report=f"/__report/{name}")
    url = f"{base}{path}?{urllib.parse.urlencode(q)}"
    b = Browser(chromium, url, flags, echo)
    try:
        got = reports.wait(name, timeout, b.alive)
        return got, b.gpu_lines(), b.tail[-20:], b.alive()
    finally:
        b.close()


def chromium_version(chromium):
    env = dict(os.environ, LD_LIBRARY_PATH=os.environ.get("READOUT_CHROMIUM_LIBS", ""))
    try:
        r = subprocess.run([chromium, "--version"], capture_output=True, text=True, timeout=30, env=env)
        return r.stdout.strip() or f"does not start: {r.stderr.strip()[-300:]}"
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unknown ({e})"


def nvidia_smi():
    if not shutil.which("nvidia-smi"):
        return None
    r = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                       capture_output=True, text=True)
    return r.stdout.strip() or r.stderr.strip()


def summary(result):
    rows = [*result.get("variants", [])]
    if result.get("transformers"):
        rows.append(result["transformers"])
    lengths = result.get("lengths", [])
    print("variant\t" + "\t".join(f"n={n} ms" for n in lengths) + "\tfit at 45\tbytes back/criterion")
    for v in rows:
        fit = v.get("fit") or {}
        at45 = fit.get("fixed_ms", 0) + 45 * fit.get("per_token_ms", 0) if fit else float("nan")
        bytes_back = sorted(set(v.get("bytes_read_back", [])))
        print(f"{v.get('id', v.get('variant'))} ({v.get('variant')})\t" + "\t".join(f"{m:.1f}" for m in v.get("median_ms", []))
              + f"\t{at45:.1f}\t{bytes_back}")
    for c in result.get("ratios", []):
        print(f"{c['what']}: at 45 tokens by fit {c.get('at_45_tokens_by_fit') or float('nan'):.2f}x, max |dp| {c.get('max_abs_dp', float('nan')):.1e}")
    if result.get("transformers_error"):
        print(f"transformers.js: {result['transformers_error']}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", required=True, help="the served tree: bench/, www/, harness/import_map.js, pkg-diagnostics/, models/, models.json, node_modules/")
    ap.add_argument("--chromium", required=True)
    ap.add_argument("--model", default="smollm2-135m-instruct-q4f16")
    ap.add_argument("--variants", default="stock,trimmed,pruned")
    ap.add_argument("--lengths", default="1,16,45,96")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--prefix", type=int, default=256)
    ap.add_argument("--no-transformers", action="store_true")
    ap.add_argument("--no-modes", action="store_true", help="skip the ms per criterion of each readout mode (slow on a CPU adapter)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--timeout-s", type=int, default=360, help="for the benchmark page")
    ap.add_argument("--require-gpu", action="store_true", help="refuse (exit 4) when the adapter is a CPU implementation")
    a = ap.parse_args()

    reports = Reports()
    server = make_server(os.path.abspath(a.root), reports)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    version = chromium_version(a.chromium)
    log(f"{version}; serving {a.root} at {base}")
    smi = nvidia_smi()
    if smi:
        log(f"nvidia-smi: {smi}")

    t0 = time.monotonic()
    probes, chosen = [], None
    for i, (label, flags) in enumerate(FLAG_SETS):
        probe, gpu_lines, tail, alive = open_page(a.chromium, flags, base, "/bench/page/adapter.html", {}, f"adapter{i}", reports, 90)
        if probe is None:
            probe = {"webgpu": False, "reason": "the probe page never reported" + ("" if alive else " (Chromium exited)"), "chromium_tail": tail}
        elif not probe.get("webgpu"):
            probe["chromium_gpu_lines"] = gpu_lines
        probe["flags"] = label
        probes.append(probe)
        if probe.get("webgpu"):
            gpu = not CPU_ADAPTER.search(json.dumps(probe["adapter"]))
            log(f"flags '{label}': adapter {probe['adapter']}" + ("" if gpu else " (a CPU implementation)"))
            if chosen is None or gpu:
                chosen = (label, flags, probe)
            if gpu:
                break
        else:
            log(f"flags '{label}': no adapter: {probe['reason']}")
            for l in probe.get("chromium_gpu_lines", probe.get("chromium_tail", []))[-8:]:
                print("    " + l, file=sys.stderr)
    if chosen is None:
        log("WebGPU is unavailable with every flag set tried (above)")
        return 3
    label, flags, probe = chosen
    ad = probe["adapter"]
    emulated = bool(CPU_ADAPTER.search(json.dumps(ad)))
    f16 = "shader-f16" in probe["features"]
    print(f"adapter: vendor={ad.get('vendor')!r} architecture={ad.get('architecture')!r} device={ad.get('device')!r} description={ad.get('description')!r} (flags '{label}')")
    print(f"features: {', '.join(probe['features'])}")
    print(f"shader-f16: {'yes' if f16 else 'no'}; emulated (CPU implementation): {'yes' if emulated else 'no'}")
    if emulated and a.require_gpu:
        log("the adapter is a CPU implementation and --require-gpu was given")
        return 4
    if a.model.endswith("q4f16") and not f16:
        log(f"{a.model} has float16 activations and this adapter has no shader-f16: nothing to run")
        return 5

    query = {
        "model": a.model, "backend": "webgpu", "variants": a.variants, "lengths": a.lengths, "runs": a.runs,
        "warmup": a.warmup, "prefix": a.prefix, "transformers": "0" if a.no_transformers else "1", "mass": "1",
        "modes": "0" if a.no_modes else "1", "autorun": "1",
    }
    result, _, tail, alive = open_page(a.chromium, flags, base, "/bench/page/", query, "bench", reports, a.timeout_s, echo=True)
    server.shutdown()
    if result is None:
        log(f"the benchmark page did not report within {a.timeout_s} s" + ("" if alive else " (Chromium exited)") + "; Chromium's last lines:")
        for l in tail:
            print("  " + l, file=sys.stderr)
        return 6
    if "error" in result and "variants" not in result:
        # The page's log first, its error last: what a caller's tail shows.
        for l in result.get("log", []):
            print("  " + l, file=sys.stderr)
        log(f"the benchmark page failed: {result['error']}")
        return 6
    result["runner"] = "bench/runners/gpu_check.sh"
    result["emulated"] = emulated
    result["gpu_check"] = {
        "chromium": version, "flags": BASE_FLAGS + flags, "flag_set": label, "probes": probes, "nvidia_smi": smi,
        "wall_s": round(time.monotonic() - t0, 1),
    }
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    log(f"wrote {a.out}")
    summary(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
