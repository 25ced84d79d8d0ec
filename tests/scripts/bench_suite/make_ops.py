"""Writes the per-operator benchmark: one node (or one small pattern) per case.

    python make_ops.py OUT_DIR

Each case of CASES is an operator family at a shape real models give it
(CNN activations [1, 64, 112, 112], transformer activations [1, 128, 768],
attention scores [1, 12, 128, 128] ...), written to OUT_DIR/<name>/ in the
layout make_suite.py uses (model.onnx, test_data_set_0/ with ONNX Runtime's
outputs), so that bench_vs_ort.py prints a ratio per operator family and
`onnxc test` checks each. Patterns are written the way exporters write them
(SiLU as Sigmoid·Mul, GELU as torch exports it, RMS-norm from ReduceMean).
Existing folders are kept.
"""

import argparse
import math
import sys
import zlib
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

F32, I64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
ACT = [1, 64, 112, 112]
SEQ = [1, 128, 768]
SCORES = [1, 12, 128, 128]


class Case:
    """A graph under construction: inputs (with how to fill them), constants, nodes."""

    def __init__(self, opset=18):
        self.opset, self.inputs, self.constants, self.nodes = opset, [], [], []
        self.count = 0

    def input(self, shape, kind="normal", elem=F32):
        name = f"x{len(self.inputs)}"
        self.inputs.append((name, elem, shape, kind))
        return name

    def const(self, array):
        name = f"c{len(self.constants)}"
        self.constants.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def weight(self, shape, fan_in=None):
        std = math.sqrt(2.0 / (fan_in or shape[-1]))
        return self.const((self.rng.standard_normal(shape) * std).astype(np.float32))

    def op(self, op_type, *inputs, outputs=1, **attrs):
        names = [f"t{self.count}_{k}" for k in range(outputs)]
        self.count += 1
        self.nodes.append(helper.make_node(op_type, list(inputs), names, **attrs))
        return names[0] if outputs == 1 else names


def unary(op_type, shape=ACT, kind="normal", **attrs):
    return lambda c: c.op(op_type, c.input(shape, kind), **attrs)


def silu(c):
    x = c.input(ACT)
    return c.op("Mul", x, c.op("Sigmoid", x))


def gelu_erf(c):
    x = c.input([1, 128, 3072])
    y = c.op("Add", c.op("Erf", c.op("Div", x, c.const(np.float32(math.sqrt(2))))), c.const(np.float32(1)))
    return c.op("Mul", c.op("Mul", x, y), c.const(np.float32(0.5)))


def gelu_tanh(c):
    x = c.input([1, 128, 3072])
    cube = c.op("Mul", c.op("Pow", x, c.const(np.float32(3))), c.const(np.float32(0.044715)))
    inner = c.op("Mul", c.op("Add", x, cube), c.const(np.float32(math.sqrt(2 / math.pi))))
    half = c.op("Mul", x, c.const(np.float32(0.5)))
    return c.op("Mul", half, c.op("Add", c.op("Tanh", inner), c.const(np.float32(1))))


def mish(c):
    x = c.input(ACT)
    return c.op("Mul", x, c.op("Tanh", c.op("Softplus", x)))


def layer_norm(c):
    x = c.input(SEQ)
    return c.op("LayerNormalization", x, c.weight([768]), c.weight([768]), axis=-1, epsilon=1e-5)


def rms_norm(c):
    x = c.input(SEQ)
    mean = c.op("ReduceMean", c.op("Pow", x, c.const(np.float32(2))), c.const(np.array([-1])), keepdims=1)
    scale = c.op("Sqrt", c.op("Add", mean, c.const(np.float32(1e-6))))
    return c.op("Mul", c.op("Div", x, scale), c.weight([768]))


def residual_layer_norm(c):
    x, y = c.input(SEQ), c.input(SEQ)
    return c.op("LayerNormalization", c.op("Add", x, y), c.weight([768]), c.weight([768]), axis=-1)


def instance_norm(c):
    return c.op("InstanceNormalization", c.input([1, 64, 128, 128]), c.weight([64]), c.weight([64]))


def group_norm(c):
    c.opset = 21
    return c.op("GroupNormalization", c.input([1, 128, 64, 64]), c.weight([128]), c.weight([128]), num_groups=32)


def resize(mode, scale, shape=(1, 64, 80, 80), **attrs):
    def build(c):
        scales = c.const(np.array([1, 1, scale, scale], dtype=np.float32))
        return c.op("Resize", c.input(list(shape)), "", scales, mode=mode, **attrs)

    return build


def pad(mode, amount):
    def build(c):
        pads = c.const(np.array([0, 0, amount, amount, 0, 0, amount, amount]))
        return c.op("Pad", c.input([1, 64, 128, 128]), pads, mode=mode)

    return build


def matmul_const_b(c):
    return c.op("MatMul", c.input([1, 128, 768]), c.weight([768, 3072], 768))


def matmul_batched(c):
    return c.op("MatMul", c.input([1, 12, 128, 64]), c.input([1, 12, 64, 128]))


def gemm(c):
    return c.op("Gemm", c.input([1, 1280]), c.weight([1000, 1280]), c.weight([1000]), transB=1)


def recurrent(op_type, gates, hidden=256, steps=50, features=128):
    def build(c):
        w = c.weight([1, gates * hidden, features])
        r = c.weight([1, gates * hidden, hidden])
        b = c.const(np.zeros([1, 2 * gates * hidden], np.float32))
        return c.op(op_type, c.input([steps, 1, features]), w, r, b, hidden_size=hidden, outputs=1)

    return build


def reduce(op_type, shape, axes, keepdims=1):
    return lambda c: c.op(op_type, c.input(shape), c.const(np.array(axes)), keepdims=keepdims)


def transpose(shape, perm):
    return lambda c: c.op("Transpose", c.input(shape), perm=perm)


def concat(c):
    return c.op("Concat", c.input([1, 64, 56, 56]), c.input([1, 64, 56, 56]), axis=1)


def split(c):
    halves = c.op("Split", c.input([1, 128, 56, 56]), c.const(np.array([64, 64])), axis=1, outputs=2)
    return c.op("Add", *halves)


def slice_channels(c):
    starts, ends, axes = (c.const(np.array([v])) for v in (32, 96, 1))
    return c.op("Slice", c.input([1, 128, 56, 56]), starts, ends, axes)


def gather_embedding(c):
    return c.op("Gather", c.weight([30522, 768]), c.input([1, 128], ("ids", 30522), I64))


def where(c):
    return c.op("Where", c.input([1, 1, 128, 128], "bool", BOOL), c.input(SCORES), c.const(np.float32(-1e4)))


def expand(c):
    return c.op("Expand", c.input([1, 1, 128, 128]), c.const(np.array(SCORES)))


def conv(channels, size, k, stride=1, groups=None, dilation=1, out=None):
    groups = groups or channels
    out = out or channels

    def build(c):
        w = c.weight([out, channels // groups, k, k], channels // groups * k * k)
        pad_ = dilation * (k - 1) // 2
        x = c.input([1, channels, size, size])
        return c.op("Conv", x, w, c.weight([out]), group=groups, strides=[stride] * 2, pads=[pad_] * 4, dilations=[dilation] * 2)

    return build


def conv_transpose(channels, size, k, stride, pad_):
    def build(c):
        w = c.weight([channels, channels // 2, k, k], channels * k * k)
        x = c.input([1, channels, size, size])
        return c.op("ConvTranspose", x, w, strides=[stride] * 2, pads=[pad_] * 4)

    return build


def pool(op_type, k, stride, pad_):
    return lambda c: c.op(op_type, c.input(ACT), kernel_shape=[k, k], strides=[stride] * 2, pads=[pad_] * 4)


CASES = {
    "exp": unary("Exp"),
    "log": unary("Log", kind="positive"),
    "tanh": unary("Tanh"),
    "sigmoid": unary("Sigmoid"),
    "erf": unary("Erf"),
    "softplus": unary("Softplus"),
    "hardswish": unary("HardSwish"),
    "silu_pattern": silu,
    "gelu_erf_pattern": gelu_erf,
    "gelu_tanh_pattern": gelu_tanh,
    "mish_pattern": mish,
    "softmax_scores": unary("Softmax", SCORES, axis=-1),
    "logsoftmax_vocab": unary("LogSoftmax", [1, 64, 8192], axis=-1),
    "layernorm": layer_norm,
    "add_layernorm": residual_layer_norm,
    "rmsnorm_pattern": rms_norm,
    "instancenorm": instance_norm,
    "groupnorm": group_norm,
    "resize_nearest_x2": resize("nearest", 2.0),
    "resize_linear_x2": resize("linear", 2.0),
    "resize_cubic_x2": resize("cubic", 2.0, (1, 32, 64, 64)),
    "resize_linear_x1_5": resize("linear", 1.5),
    "resize_nearest_x0_75": resize("nearest", 0.75),
    "pad_constant": pad("constant", 1),
    "pad_reflect": pad("reflect", 3),
    "pad_edge": pad("edge", 2),
    "matmul_const_b": matmul_const_b,
    "matmul_batched": matmul_batched,
    "gemm": gemm,
    "lstm": recurrent("LSTM", 4),
    "gru": recurrent("GRU", 3),
    "rnn": recurrent("RNN", 1),
    "reducemean_last": reduce("ReduceMean", SEQ, [-1]),
    "reducesum_spatial": reduce("ReduceSum", [1, 256, 56, 56], [2, 3]),
    "reducemax_channels": reduce("ReduceMax", [1, 256, 56, 56], [1]),
    "transpose_heads": transpose([1, 128, 12, 64], [0, 2, 1, 3]),
    "transpose_nhwc": transpose(ACT, [0, 2, 3, 1]),
    "concat": concat,
    "split": split,
    "slice": slice_channels,
    "gather_embedding": gather_embedding,
    "where_mask": where,
    "expand_heads": expand,
    "depthwise_k3_s1": conv(144, 56, 3),
    "depthwise_k3_s2": conv(144, 56, 3, 2),
    "depthwise_k5_s1": conv(240, 28, 5),
    "depthwise_k5_s2": conv(240, 28, 5, 2),
    "depthwise_k7_s1": conv(96, 56, 7),
    "depthwise_k7_s2": conv(96, 56, 7, 2),
    "grouped_conv_g8": conv(256, 28, 3, groups=8),
    "dilated_conv_d2": conv(256, 28, 3, groups=1, dilation=2),
    "conv_transpose_k2_s2": conv_transpose(64, 80, 2, 2, 0),
    "conv_transpose_k4_s2": conv_transpose(128, 32, 4, 2, 1),
    "maxpool_k3_s2": pool("MaxPool", 3, 2, 1),
    "averagepool_k3_s1": pool("AveragePool", 3, 1, 1),
    "globalaveragepool": lambda c: c.op("GlobalAveragePool", c.input([1, 1280, 7, 7])),
}


def fill(shape, kind, elem, rng):
    if kind == "positive":
        return (np.abs(rng.standard_normal(shape)) + 0.1).astype(np.float32)
    if kind == "bool":
        return rng.random(shape) < 0.9
    if isinstance(kind, tuple):
        return rng.integers(0, kind[1], shape, dtype=np.int64)
    return rng.standard_normal(shape).astype(np.float32)


def make(name, out_dir):
    c = Case()
    c.rng = np.random.default_rng(zlib.crc32(name.encode()))
    result = CASES[name](c)
    inputs = [helper.make_tensor_value_info(n, e, s) for n, e, s, _ in c.inputs]
    graph = helper.make_graph(c.nodes, name, inputs, [helper.make_tensor_value_info(result, F32, None)], c.constants)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", c.opset)], ir_version=10)
    values = [fill(s, k, e, c.rng) for _, e, s, k in c.inputs]
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    (output,) = session.run(None, dict(zip((n for n, *_ in c.inputs), values)))
    model.graph.output[0].CopyFrom(helper.make_tensor_value_info(result, F32, list(output.shape)))
    onnx.checker.check_model(model, full_check=True)
    folder = out_dir / name
    (folder / "test_data_set_0").mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(folder / "model.onnx"))
    for k, ((port, *_), x) in enumerate(zip(c.inputs, values)):
        (folder / f"test_data_set_0/input_{k}.pb").write_bytes(numpy_helper.from_array(x, port).SerializeToString())
    (folder / "test_data_set_0/output_0.pb").write_bytes(numpy_helper.from_array(output, result).SerializeToString())


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir", type=Path)
    args = parser.parse_args()
    for name in CASES:
        if not (args.out_dir / name / "test_data_set_0/output_0.pb").exists():
            make(name, args.out_dir)


if __name__ == "__main__":
    sys.exit(main())
