#!/usr/bin/env python3
"""Runs the onnxruntime-genai builder on a Gemma 3 checkpoint saved by
transformers 5, whose config nests the rotary settings per layer type:

    "rope_parameters": {"full_attention": {"rope_theta": 1e6, ...},
                        "sliding_attention": {"rope_theta": 1e4, ...}}

The builder's Gemma 3 path reads the transformers 4 form instead: a flat
`rope_parameters` with `rope_type`, `rope_theta` for the global layers and
`rope_local_base_freq` for the sliding ones. Without this it stops with
KeyError 'rope_type'. The config is rewritten in memory only, before the
builder reads it; the arguments are the builder's own.
"""
import runpy
import sys

# The builder imports its classes as the top-level package `builders` (its
# package __init__ puts the models directory on sys.path): patch that one.
import onnxruntime_genai.models  # noqa: F401  (puts `builders` on sys.path)
from builders import base, gemma


def flatten_rope(config):
    rp = getattr(config, "rope_parameters", None)
    if isinstance(rp, dict) and "full_attention" in rp and "sliding_attention" in rp:
        config.rope_local_base_freq = rp["sliding_attention"]["rope_theta"]
        config.rope_theta = rp["full_attention"]["rope_theta"]
        config.rope_parameters = dict(rp["full_attention"])


_make_config_init = base.Model.make_config_init


def make_config_init(self, config):
    # Gemma 4 reads the nested form itself: only Gemma 3 is rewritten.
    if type(self) is gemma.Gemma3Model:
        flatten_rope(config)
    _make_config_init(self, config)


base.Model.make_config_init = make_config_init
sys.argv[0] = "onnxruntime_genai.models.builder"
runpy.run_module("onnxruntime_genai.models.builder", run_name="__main__")
