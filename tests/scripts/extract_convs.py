"""Writes each distinct convolution of a model as a one-node model, to time layers.

    tests/.venv/bin/python tests/scripts/extract_convs.py MODEL.onnx OUT_DIR
    tests/.venv/bin/python tests/scripts/bench_vs_ort.py --rounds 3 --iters 40 OUT_DIR/*.onnx

A whole-model ratio against ONNX Runtime says how far onnxc is behind, not
where. This script finds every Conv of MODEL with its inferred input shape,
groups the identical ones (same input shape, weight shape, strides, pads,
dilations, group), and writes each as `Conv + Relu` with random weights and
a bias to OUT_DIR/NN_xCOUNT_CINtoCOUT[gGROUP]_kKsS_H.onnx, COUNT being how many
times the model runs it: a layer's time difference times COUNT is its share
of the model's. Layers are written in order of their share of the model's
multiply-adds. Timed alone, a layer's weights and input stay in the caches
between runs, which they do not inside the model.
"""

import argparse
import collections
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper, shape_inference


def conv_layers(model):
    """(key, count) of the model's distinct convolutions, most multiply-adds first."""
    inferred = shape_inference.infer_shapes(model)
    graph = inferred.graph
    shapes = {}
    for value in list(graph.value_info) + list(graph.input) + list(graph.output):
        shapes[value.name] = [d.dim_value for d in value.type.tensor_type.shape.dim]
    weights = {init.name: list(init.dims) for init in graph.initializer}
    counts = collections.Counter()
    for node in graph.node:
        if node.op_type != "Conv" or node.input[1] not in weights:
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        w = weights[node.input[1]]
        x = shapes.get(node.input[0])
        if len(w) != 4 or not x or len(x) != 4 or 0 in x:
            continue
        key = (
            tuple(x),
            tuple(w),
            tuple(attrs.get("strides", [1, 1])),
            tuple(attrs.get("pads", [0, 0, 0, 0])),
            tuple(attrs.get("dilations", [1, 1])),
            attrs.get("group", 1),
        )
        counts[key] += 1

    def macs(item):
        (x, w, strides, *_), count = item
        return count * np.prod(w) * x[2] * x[3] / (strides[0] * strides[1])

    return sorted(counts.items(), key=macs, reverse=True)


def layer_model(key, rng):
    x, w, strides, pads, dilations, group = key
    out = [x[0], w[0]] + [
        (x[2 + d] + pads[d] + pads[d + 2] - (w[2 + d] - 1) * dilations[d] - 1) // strides[d] + 1 for d in range(2)
    ]
    weight = numpy_helper.from_array((rng.standard_normal(w) * 0.05).astype(np.float32), "W")
    bias = numpy_helper.from_array(rng.standard_normal(w[0]).astype(np.float32), "B")
    conv = helper.make_node(
        "Conv",
        ["x", "W", "B"],
        ["c"],
        strides=list(strides),
        pads=list(pads),
        dilations=list(dilations),
        group=group,
        kernel_shape=list(w[2:]),
    )
    relu = helper.make_node("Relu", ["c"], ["y"])
    graph = helper.make_graph(
        [conv, relu],
        "layer",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)],
        [weight, bias],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", type=Path)
    parser.add_argument("out_dir", type=Path)
    args = parser.parse_args()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for index, (key, count) in enumerate(conv_layers(onnx.load(str(args.model)))):
        x, w, strides = key[0], key[1], key[2]
        grouped = f"g{key[5]}" if key[5] > 1 else ""
        name = f"{index:02d}_x{count}_{w[1] * key[5]}to{w[0]}{grouped}_k{w[2]}s{strides[0]}_{x[2]}.onnx"
        onnx.save(layer_model(key, rng), str(args.out_dir / name))
        print(name)


if __name__ == "__main__":
    main()
