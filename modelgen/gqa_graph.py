"""The smallest graph that shows onnxruntime-web's WebGPU fault on
SwiftShader: one com.microsoft GroupQueryAttention node (4 heads, 2 KV
heads, head dim 16, no rotary), fed q/k/v directly and an empty past.

    .venv/bin/python modelgen/gqa_graph.py target/browser/gqa.onnx
"""
import sys

import onnx
from onnx import TensorProto, helper


def main(out):
    heads, kv_heads, hd = 4, 2, 16
    f = TensorProto.FLOAT
    inputs = [
        helper.make_tensor_value_info("query", f, [1, "S", heads * hd]),
        helper.make_tensor_value_info("key", f, [1, "S", kv_heads * hd]),
        helper.make_tensor_value_info("value", f, [1, "S", kv_heads * hd]),
        helper.make_tensor_value_info("past_key", f, [1, kv_heads, "P", hd]),
        helper.make_tensor_value_info("past_value", f, [1, kv_heads, "P", hd]),
        helper.make_tensor_value_info("seqlens_k", TensorProto.INT32, [1]),
        helper.make_tensor_value_info("total_sequence_length", TensorProto.INT32, []),
    ]
    outputs = [
        helper.make_tensor_value_info("output", f, [1, "S", heads * hd]),
        helper.make_tensor_value_info("present_key", f, [1, kv_heads, "T", hd]),
        helper.make_tensor_value_info("present_value", f, [1, kv_heads, "T", hd]),
    ]
    node = helper.make_node(
        "GroupQueryAttention",
        [i.name for i in inputs],
        [o.name for o in outputs],
        domain="com.microsoft",
        num_heads=heads,
        kv_num_heads=kv_heads,
    )
    graph = helper.make_graph([node], "gqa", inputs, outputs)
    model = helper.make_model(graph, ir_version=10, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    onnx.save(model, out)
    print(f"one GroupQueryAttention node written to {out}", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1])
