#!/usr/bin/env python3
"""Make case folders for the integer operators with every input given three
ways: as a graph input, as a constant (initializer), or produced by another
node (DynamicQuantizeLinear for activations and their scale/zero point,
Identity of a constant for weights and zero points).

Usage: make_quant_pattern_cases.py OUT_DIR [--seed N]

Writes OUT_DIR/<case>/ with model.onnx and test_data_set_0/{input_*,output_*}.pb,
the outputs ONNX Runtime's (CPUExecutionProvider, one thread, graph
optimisations off, so each node runs as written). Run them with
`onnxc test OUT_DIR` (also `--via object`, `--portable`).

The families (issue #31):
  matmulinteger   DynamicQuantizeLinear(x) -> MatMulInteger(xq, W, xz, wz),
                  A of rank 2 and 3, W int8 or uint8, constant or a graph
                  input, the zero points absent, constant, graph inputs, or
                  produced (by DynamicQuantizeLinear or an Identity)
  convinteger     the same around ConvInteger (uint8 operands, as ORT has it)
  qlinearmatmul   DynamicQuantizeLinear feeding a, a_scale and a_zero_point
  qlinearconv     the same for QLinearConv, with and without a bias
  quantize_dynamic  ORT's own quantize_dynamic of a small torch Linear model
                  (per tensor and per channel), the graph a user ships

Each output is also the graph output of the integer product, so an error
points at the node. The product's inputs are drawn so that the i32 sums are
far from overflow and DynamicQuantizeLinear's range covers negative values.
"""
from __future__ import annotations

import argparse
import io
import itertools
import os
import shutil
import tempfile

import numpy as np
import onnxruntime as ort

import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 13

NP_TYPE = {TensorProto.UINT8: np.uint8, TensorProto.INT8: np.int8, TensorProto.FLOAT: np.float32,
           TensorProto.INT32: np.int32}


class Graph:
    """A graph under construction: nodes, inputs (with feeds) and constants."""

    def __init__(self, rng: np.random.Generator):
        self.rng, self.nodes, self.inputs, self.inits, self.feeds, self.outputs = rng, [], [], [], {}, []

    def input(self, name: str, value: np.ndarray) -> str:
        dtype = helper.np_dtype_to_tensor_dtype(value.dtype)
        self.inputs.append(helper.make_tensor_value_info(name, dtype, value.shape))
        self.feeds[name] = value
        return name

    def const(self, name: str, value: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(value, name))
        return name

    def given(self, how: str, name: str, value: np.ndarray) -> str:
        """`value` as a graph input, a constant, or an Identity of a constant."""
        if how == "input":
            return self.input(name, value)
        if how == "const":
            return self.const(name, value)
        assert how == "node"
        self.nodes.append(helper.make_node("Identity", [self.const(name + "_c", value)], [name]))
        return name

    def dynamic_quantize(self, x: str) -> tuple[str, str, str]:
        outs = [x + "_q", x + "_scale", x + "_zp"]
        self.nodes.append(helper.make_node("DynamicQuantizeLinear", [x], outs))
        return tuple(outs)

    def node(self, op: str, inputs: list[str], output: str, **attrs) -> str:
        self.nodes.append(helper.make_node(op, inputs, [output], **attrs))
        return output

    def output(self, name: str):
        self.outputs.append(name)

    def model(self, name: str) -> onnx.ModelProto:
        outputs = [onnx.ValueInfoProto(name=o) for o in self.outputs]
        graph = helper.make_graph(self.nodes, name, self.inputs, outputs, self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
        model.ir_version = 8
        # The outputs' types, as shape inference finds them.
        inferred = {v.name: v for v in onnx.shape_inference.infer_shapes(model, strict_mode=True).graph.value_info}
        for o in model.graph.output:
            o.CopyFrom(inferred[o.name])
        return model


def ints(rng, shape, dtype) -> np.ndarray:
    info = np.iinfo(dtype)
    return np.asarray(rng.integers(info.min, info.max, size=shape, endpoint=True), dtype=dtype)


def floats(rng, shape) -> np.ndarray:
    # Mostly positive with a negative tail, so the zero point is not 0.
    return (rng.standard_normal(shape) + 0.7).astype(np.float32)


def activation(g: Graph, how: str, shape) -> tuple[str, str | None]:
    """A u8 activation and its zero point: `dql` runs DynamicQuantizeLinear
    on a float graph input, else a u8 graph input with `how`'s zero point
    (`none` for absent)."""
    if how == "dql":
        q, _, zp = g.dynamic_quantize(g.input("x", floats(g.rng, shape)))
        return q, zp
    q = g.input("xq", ints(g.rng, shape, np.uint8))
    if how == "none":
        return q, None
    return q, g.given(how, "xz", np.array(g.rng.integers(0, 255), dtype=np.uint8))


def weight_zero_point(g: Graph, how: str, dtype, count: int | None) -> str | None:
    """The weight's zero point: absent, 0 as a constant (what
    quantize_dynamic writes), or nonzero given `how` (per tensor, or
    `count` entries per column/channel)."""
    if how == "none":
        return None
    if how == "zero":
        return g.const("wz", np.array(0, dtype=dtype))
    shape = () if count is None else (count,)
    return g.given(how, "wz", np.asarray(ints(g.rng, shape, dtype) // 4, dtype))


def matmul_integer_cases(rng):
    for (a_shape, k, n), x_how, w_type, w_how, wz_how in itertools.product(
        [((4, 16), 16, 8), ((1, 4, 16), 16, 8), ((1, 197, 192), 192, 576)],
        ["dql", "input", "const", "node"],
        [np.int8, np.uint8],
        ["const", "input"],
        ["none", "zero", "const", "input", "node"],
    ):
        g = Graph(rng)
        xq, xz = activation(g, x_how, a_shape)
        w = g.given(w_how, "w", ints(rng, (k, n), w_type))
        wz = weight_zero_point(g, wz_how, w_type, None)
        inputs = [xq, w] + ([xz or "", wz] if wz else [xz] if xz else [])
        g.output(g.node("MatMulInteger", inputs, "y"))
        rank = len(a_shape)
        yield f"matmulinteger_r{rank}_{a_shape[-2]}x{k}x{n}_x_{x_how}_w_{np.dtype(w_type)}_{w_how}_wz_{wz_how}", g


def conv_integer_cases(rng):
    for x_how, w_how, wz_how, (kernel, pads) in itertools.product(
        ["dql", "input", "const"], ["const", "input", "node"], ["none", "zero", "const", "input"],
        [(1, [0, 0, 0, 0]), (3, [1, 1, 1, 1])],
    ):
        g = Graph(rng)
        xq, xz = activation(g, x_how, (1, 5, 7, 6))
        w = g.given(w_how, "w", ints(rng, (6, 5, kernel, kernel), np.uint8))
        wz = weight_zero_point(g, wz_how, np.uint8, None)
        inputs = [xq, w] + ([xz or "", wz] if wz else [xz] if xz else [])
        g.output(g.node("ConvInteger", inputs, "y", pads=pads))
        yield f"convinteger_k{kernel}_x_{x_how}_w_{w_how}_wz_{wz_how}", g


def requantized_inputs(g: Graph, how: str, shape):
    """a, a_scale, a_zero_point of a QLinear operator."""
    if how == "dql":
        return g.dynamic_quantize(g.input("x", floats(g.rng, shape)))
    a = g.input("a", ints(g.rng, shape, np.uint8))
    return a, g.given(how, "a_scale", np.array(0.02, np.float32)), g.given(how, "a_zp", np.array(131, np.uint8))


def qlinear_weight(g: Graph, how: str, w: np.ndarray, channels: int, per_channel: bool):
    shape = (channels,) if per_channel else ()
    scale = (g.rng.uniform(0.002, 0.01, size=shape)).astype(np.float32)
    zp = np.zeros(shape, np.int8) if per_channel else np.array(3, np.int8)
    return g.given(how, "w", w), g.given(how, "w_scale", scale), g.given(how, "w_zp", zp)


def output_quantization(g: Graph, how: str):
    return g.given(how, "y_scale", np.array(0.05, np.float32)), g.given(how, "y_zp", np.array(120, np.uint8))


def qlinear_matmul_cases(rng):
    for a_how, w_how, y_how, per_channel, a_shape in itertools.product(
        ["dql", "input", "const", "node"], ["const", "input", "node"], ["const", "input"], [False, True],
        [(4, 16), (2, 5, 16)],
    ):
        g = Graph(rng)
        a = requantized_inputs(g, a_how, a_shape)
        b = qlinear_weight(g, w_how, ints(rng, (16, 9), np.int8), 9, per_channel)
        g.output(g.node("QLinearMatMul", [*a, *b, *output_quantization(g, y_how)], "y"))
        per = "perchannel" if per_channel else "pertensor"
        yield f"qlinearmatmul_r{len(a_shape)}_a_{a_how}_w_{w_how}_y_{y_how}_{per}", g


def qlinear_conv_cases(rng):
    for x_how, w_how, bias_how, per_channel in itertools.product(
        ["dql", "input", "const", "node"], ["const", "input", "node"], ["none", "const", "input", "node"],
        [False, True],
    ):
        g = Graph(rng)
        x = requantized_inputs(g, x_how, (1, 4, 6, 5))
        w = qlinear_weight(g, w_how, ints(rng, (7, 4, 3, 3), np.int8), 7, per_channel)
        inputs = [*x, *w, *output_quantization(g, "const")]
        if bias_how != "none":
            inputs.append(g.given(bias_how, "bias", rng.integers(-2000, 2000, size=7).astype(np.int32)))
        g.output(g.node("QLinearConv", inputs, "y", pads=[1, 1, 1, 1]))
        per = "perchannel" if per_channel else "pertensor"
        yield f"qlinearconv_x_{x_how}_w_{w_how}_bias_{bias_how}_{per}", g


def quantize_dynamic_cases(rng):
    """ORT's quantize_dynamic of a tiny torch Linear stack, as a user runs it."""
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    torch.manual_seed(int(rng.integers(1 << 31)))
    net = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU(), torch.nn.Linear(8, 24)).eval()
    for shape, per_channel, weight_type in itertools.product(
        [(1, 4, 16), (1, 197, 16)], [False, True], [QuantType.QInt8, QuantType.QUInt8]
    ):
        with tempfile.TemporaryDirectory() as tmp:
            fp32, q = os.path.join(tmp, "fp32.onnx"), os.path.join(tmp, "q.onnx")
            torch.onnx.export(net, torch.randn(*shape), fp32, input_names=["x"], output_names=["y"],
                              opset_version=17, dynamo=False)
            quantize_dynamic(fp32, q, per_channel=per_channel, weight_type=weight_type)
            model = onnx.load(q)
        x = floats(rng, shape)
        per = "perchannel" if per_channel else "pertensor"
        yield f"quantize_dynamic_linear_{shape[1]}_{per}_{weight_type.name.lower()}", model, {"x": x}


def reference(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds), [o.name for o in sess.get_outputs()]


def write_case(out_dir: str, name: str, model: onnx.ModelProto, feeds: dict) -> bool:
    try:
        outputs, names = reference(model, feeds)
    except Exception as e:  # ORT lacks some type pairs (e.g. ConvInteger with int8)
        print(f"skip {name}: ONNX Runtime refuses it ({str(e).splitlines()[0][:120]})")
        return False
    case = os.path.join(out_dir, name)
    shutil.rmtree(case, ignore_errors=True)
    data = os.path.join(case, "test_data_set_0")
    os.makedirs(data)
    onnx.save(model, os.path.join(case, "model.onnx"))
    for i, (k, v) in enumerate(feeds.items()):
        onnx.save_tensor(numpy_helper.from_array(v, k), os.path.join(data, f"input_{i}.pb"))
    for i, (k, v) in enumerate(zip(names, outputs)):
        onnx.save_tensor(numpy_helper.from_array(v, k), os.path.join(data, f"output_{i}.pb"))
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--seed", type=int, default=31)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    written = 0
    for family in [matmul_integer_cases, conv_integer_cases, qlinear_matmul_cases, qlinear_conv_cases]:
        for name, g in family(rng):
            written += write_case(args.out_dir, name, g.model(name), g.feeds)
    for name, model, feeds in quantize_dynamic_cases(rng):
        written += write_case(args.out_dir, name, model, feeds)
    print(f"wrote {written} cases to {args.out_dir}")


if __name__ == "__main__":
    main()
