#!/usr/bin/env python3
"""Make test cases from the onnx wheel's "light" model zoo models.

Usage: make_light_cases.py OUT_DIR [--seed N]     (OUT_DIR is normally tests/data)

For every onnx/backend/test/data/light/light_<name>.onnx in the installed onnx
wheel (ResNet-50, SqueezeNet, VGG-19, DenseNet-121, Inception v1/v2,
ShuffleNet, AlexNet, ZFNet-512) writes OUT_DIR/light/<name>/ with
  model.onnx                      a copy of the wheel's model
  test_data_set_0/input_0.pb      numpy default_rng(seed) standard normal float32
                                  in the graph input's shape, named after it
  test_data_set_0/output_0.pb     ONNX Runtime's result (CPUExecutionProvider,
                                  one thread), named after the graph output

It also writes OUT_DIR/light-random/<name>/ (same layout) from a copy of the
model whose fake weights are made real: the light models carry no weights,
every weight is a ConstantOfShape filling a constant (0.02), so their output
hardly depends on the input. In the copy every ConstantOfShape whose shape is
an initializer becomes a random float32 initializer of that shape (numpy
default_rng seeded per model from --seed and a CRC-32 of the model name),
drawn by how the value is consumed so that activations stay O(1) through the
network (He init):
  Conv / Gemm / MatMul weight (input 1)   normal, std sqrt(2 / fan_in); fan_in
                                          = product of all dims but the output
                                          one (Gemm: dim 0 unless transB; the
                                          shape as consumed, after a Reshape)
  BatchNormalization scale / var          uniform [0.5, 1.5]
  BatchNormalization bias / mean          normal * 0.1
    then the mean and var are calibrated: mean = channel mean of the BN's
    input (on the test input) + draw * channel std, var = channel variance
    * draw; fixed random statistics do not normalize, and through ResNet's
    and ShuffleNet's residual sums the logits grow to 1e4..1e6 (one-hot
    softmax); see calibrate_batchnorms
  multiplier of a Mul (through Unsqueeze/
  Reshape/Identity; DenseNet's and
  Inception v2's per-channel scale)       uniform [0.5, 1.5]
  anything else (biases etc.)             normal * 0.1
The now unused shape initializers are dropped. The input is the same as the
light case's, the output again ONNX Runtime's. Models whose random weights
would exceed RANDOM_MAX_BYTES (VGG-19, AlexNet, ZFNet-512) are skipped with a
note, to keep tests/data small.

The models are IR version 3: every initializer is also listed in graph.input,
so the one real input is the graph input that is not an initializer (it is not
always graph.input[0]; the TensorProto name says which one it is).
"""
from __future__ import annotations

import glob
import os
import shutil
import sys
import zlib

import numpy as np
import onnxruntime as ort

import onnx
from onnx import TensorProto, helper, numpy_helper

DEFAULT_SEED = 20240501
RANDOM_MAX_BYTES = 150 * 1000 * 1000  # skip light-random models with more weights


def real_inputs(graph: onnx.GraphProto) -> list[onnx.ValueInfoProto]:
    inits = {t.name for t in graph.initializer}
    return [vi for vi in graph.input if vi.name not in inits]


def run_ort(model_src: str | bytes, in_name: str, x: np.ndarray, out_name: str) -> np.ndarray:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3  # the models have unused initializers; ORT warns
    sess = ort.InferenceSession(model_src, opts, providers=["CPUExecutionProvider"])
    (y,) = sess.run([out_name], {in_name: x})
    return np.asarray(y)


def write_data_set(case_dir: str, in_name: str, x: np.ndarray, out_name: str, y: np.ndarray) -> None:
    ds = os.path.join(case_dir, "test_data_set_0")
    os.makedirs(ds)
    with open(os.path.join(ds, "input_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(x, in_name).SerializeToString())
    with open(os.path.join(ds, "output_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(y, out_name).SerializeToString())


def real_input(src: str, graph: onnx.GraphProto) -> tuple[onnx.ValueInfoProto, list[int]]:
    inputs = real_inputs(graph)
    if len(inputs) != 1 or len(graph.output) != 1:
        raise SystemExit(f"{src}: expected one input and one output")
    vi = inputs[0]
    tt = vi.type.tensor_type
    if tt.elem_type != TensorProto.FLOAT:
        raise SystemExit(f"{src}: input {vi.name} is not float32")
    shape = [d.dim_value for d in tt.shape.dim]
    if any(not d.HasField("dim_value") for d in tt.shape.dim):
        raise SystemExit(f"{src}: input {vi.name} has a symbolic dim")
    return vi, shape


def make_case(src: str, case_dir: str, seed: int) -> None:
    model = onnx.load(src)
    graph = model.graph
    vi, shape = real_input(src, graph)

    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape, dtype=np.float32)

    out_name = graph.output[0].name
    y = run_ort(src, vi.name, x, out_name)

    os.makedirs(case_dir)
    shutil.copyfile(src, os.path.join(case_dir, "model.onnx"))
    write_data_set(case_dir, vi.name, x, out_name, y)
    print(
        f"light/{os.path.basename(case_dir)}: input {vi.name} {shape}, "
        f"output {out_name} {list(y.shape)} (min {y.min():.6g}, max {y.max():.6g})"
    )


PASS_THROUGH = ("Unsqueeze", "Reshape", "Identity", "Flatten", "Squeeze")


def weight_kind(
    graph: onnx.GraphProto, shapes: dict[str, list[int]], name: str, shape: list[int]
) -> tuple[str, float]:
    """How to draw the random value `name` of `shape`, from its first
    consumer: ("he", std) or ("normal", 0.1) (normal times std) or
    ("uniform", 0) (uniform [0.5, 1.5]). `shapes` has the inferred shapes, for
    values reshaped before use (Inception v1's classifier weight)."""
    for node in graph.node:
        for i, inp in enumerate(node.input):
            if inp != name:
                continue
            op = node.op_type
            if op in PASS_THROUGH and i == 0:
                out = node.output[0]
                return weight_kind(graph, shapes, out, shapes.get(out, shape))
            if op in ("Conv", "Gemm", "MatMul") and i == 1 and len(shape) >= 2:
                if op == "Conv":
                    fan_in = int(np.prod(shape[1:]))  # [M, C/group, k...]
                elif op == "Gemm":
                    trans_b = any(a.name == "transB" and a.i for a in node.attribute)
                    fan_in = shape[1] if trans_b else shape[0]  # B is [N, K] or [K, N]
                else:
                    fan_in = int(np.prod(shape[:-1]))  # [..., K, N]
                return "he", float(np.sqrt(2.0 / fan_in))
            if op == "BatchNormalization" and i in (1, 4):
                return "uniform", 0.0
            if op == "BatchNormalization" and i in (2, 3):
                return "normal", 0.1
            if op == "Mul":
                return "uniform", 0.0
            return "normal", 0.1
    return "normal", 0.1


def inferred_shapes(model: onnx.ModelProto) -> dict[str, list[int]]:
    inferred = onnx.shape_inference.infer_shapes(model)
    shapes = {}
    for vi in inferred.graph.value_info:
        dims = vi.type.tensor_type.shape.dim
        if dims and all(d.HasField("dim_value") for d in dims):
            shapes[vi.name] = [d.dim_value for d in dims]
    return shapes


def calibrate_batchnorms(
    model: onnx.ModelProto, random_names: set[str], in_name: str, x: np.ndarray
) -> int:
    """Makes each BatchNormalization whose mean and var were made random
    normalize for real: fixed random statistics do not (each such BN has a
    gain of about 1.2 and residual sums double), so ResNet-50's logits reach
    1e4 and ShuffleNet's 1e6, and the softmax is one-hot. In graph order, the
    mean becomes the channel mean of the BN's input on `x` plus its random
    draw times the channel std, the var the channel variance times its random
    draw (uniform [0.5, 1.5]). Runs the model once per BN. Changes
    `model` in place; returns the number of BNs calibrated."""
    graph = model.graph
    bns = [
        n
        for n in graph.node
        if n.op_type == "BatchNormalization" and n.input[3] in random_names and n.input[4] in random_names
    ]
    if not bns:
        return 0
    if model.ir_version >= 4:
        raise SystemExit("calibrate_batchnorms expects initializers listed as graph inputs (IR < 4)")
    inits = {t.name: t for t in graph.initializer}
    feeds = {in_name: x}
    for n in bns:
        feeds[n.input[3]] = numpy_helper.to_array(inits[n.input[3]])
        feeds[n.input[4]] = numpy_helper.to_array(inits[n.input[4]])
    # the probe takes the statistics as graph inputs (they are listed there
    # already, IR < 4) rather than initializers: ONNX Runtime would not let
    # them be fed
    probe = onnx.ModelProto.FromString(model.SerializeToString())
    fed = [t for t in probe.graph.initializer if t.name not in feeds]
    del probe.graph.initializer[:]
    probe.graph.initializer.extend(fed)
    outs = list(dict.fromkeys(n.input[0] for n in bns))
    for o in outs:
        if o not in {v.name for v in probe.graph.output}:
            probe.graph.output.append(helper.make_empty_tensor_value_info(o))
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1  # same bits on every machine
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    sess = ort.InferenceSession(probe.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    for n in bns:
        (a,) = sess.run([n.input[0]], feeds)
        a = a.astype(np.float64)
        axes = tuple(i for i in range(a.ndim) if i != 1)
        mean, var = a.mean(axis=axes), a.var(axis=axes)
        std = np.sqrt(var + 1e-5)
        feeds[n.input[3]] = (mean + feeds[n.input[3]] * std).astype(np.float32)
        feeds[n.input[4]] = (var * feeds[n.input[4]]).astype(np.float32)
    for n in bns:
        for name in (n.input[3], n.input[4]):
            inits[name].CopyFrom(numpy_helper.from_array(feeds[name], name))
    return len(bns)


def randomize_weights(model: onnx.ModelProto, rng: np.random.Generator) -> tuple[onnx.ModelProto, int, dict]:
    """A copy of `model` with each ConstantOfShape of a constant shape
    replaced by a random initializer (see the module doc). Returns the copy,
    the number of replaced nodes and a count of the kinds drawn."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    shapes = inferred_shapes(model)
    keep_nodes, new_inits, new_shape = [], {}, {}
    kinds: dict[str, int] = {}
    for node in graph.node:
        if node.op_type != "ConstantOfShape" or node.input[0] not in inits:
            keep_nodes.append(node)
            continue
        value = next((a.t for a in node.attribute if a.name == "value"), None)
        if value is not None and value.data_type != TensorProto.FLOAT:
            keep_nodes.append(node)  # only float weights are made random
            continue
        shape = [int(d) for d in numpy_helper.to_array(inits[node.input[0]])]
        kind, std = weight_kind(graph, shapes, node.output[0], shape)
        if kind == "uniform":
            w = rng.uniform(0.5, 1.5, size=shape).astype(np.float32)
            kinds["uniform[0.5,1.5]"] = kinds.get("uniform[0.5,1.5]", 0) + 1
        else:
            w = (rng.standard_normal(size=shape, dtype=np.float32) * np.float32(std)).astype(np.float32)
            key = "He normal" if kind == "he" else "normal*0.1"
            kinds[key] = kinds.get(key, 0) + 1
        new_inits[node.output[0]] = numpy_helper.from_array(w, node.output[0])
        new_shape[node.output[0]] = node.input[0]
    used = {i for n in keep_nodes for i in n.input}
    dropped = {s for s in new_shape.values() if s not in used and s not in {o.name for o in graph.output}}

    del graph.node[:]
    graph.node.extend(keep_nodes)
    old_inits = [t for t in graph.initializer if t.name not in dropped]
    del graph.initializer[:]
    graph.initializer.extend(old_inits)
    graph.initializer.extend(new_inits.values())
    # IR < 4: every initializer is also a graph input. Each new one takes the
    # place of its shape's input; the inputs of the dropped shapes go.
    if model.ir_version < 4:
        weights_of_shape: dict[str, list[str]] = {}
        for w, shape_name in new_shape.items():
            weights_of_shape.setdefault(shape_name, []).append(w)
        new_inputs = []
        for vi in graph.input:
            for w in weights_of_shape.get(vi.name, []):
                new_inputs.append(
                    helper.make_tensor_value_info(w, TensorProto.FLOAT, list(new_inits[w].dims))
                )
            if vi.name not in dropped:
                new_inputs.append(vi)
        del graph.input[:]
        graph.input.extend(new_inputs)
    return model, len(new_inits), kinds


def make_random_case(src: str, case_dir: str, seed: int, name: str) -> str:
    """Writes the light-random case; returns a one-line summary."""
    model = onnx.load(src)
    graph = model.graph
    vi, shape = real_input(src, graph)
    inits = {t.name: t for t in graph.initializer}
    nbytes = sum(
        int(np.prod(numpy_helper.to_array(inits[n.input[0]]))) * 4
        for n in graph.node
        if n.op_type == "ConstantOfShape" and n.input[0] in inits
    )
    if nbytes > RANDOM_MAX_BYTES:
        return (
            f"light-random/{name}: SKIPPED, its random weights would be {nbytes / 1e6:.0f} MB "
            f"(> {RANDOM_MAX_BYTES / 1e6:.0f} MB)"
        )

    x = np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)  # = the light input
    wrng = np.random.default_rng([seed, zlib.crc32(name.encode())])
    rmodel, nrep, kinds = randomize_weights(model, wrng)
    random_names = {t.name for t in rmodel.graph.initializer} - {t.name for t in graph.initializer}
    ncal = calibrate_batchnorms(rmodel, random_names, vi.name, x)
    onnx.checker.check_model(rmodel)
    data = rmodel.SerializeToString()

    out_name = graph.output[0].name
    y = run_ort(data, vi.name, x, out_name)
    if not np.all(np.isfinite(y)):
        raise SystemExit(f"light-random/{name}: ONNX Runtime's output is not finite")

    os.makedirs(case_dir)
    with open(os.path.join(case_dir, "model.onnx"), "wb") as f:
        f.write(data)
    write_data_set(case_dir, vi.name, x, out_name, y)
    note = ""
    if y.ndim == 2 and graph.node[-1].op_type == "Softmax":
        top = y.max(axis=-1)
        note = f", softmax top-1 p {top.max():.4g}" + (" (SATURATED one-hot)" if top.max() > 0.999 else "")
    kinds_s = ", ".join(f"{v} {k}" for k, v in sorted(kinds.items()))
    if ncal:
        kinds_s += f"; {ncal} BatchNormalization calibrated"
    return (
        f"light-random/{name}: {nrep} ConstantOfShape -> random ({kinds_s}); {len(data) / 1e6:.1f} MB; "
        f"output {out_name} {list(y.shape)} min {y.min():.6g} max {y.max():.6g} std {y.std():.6g}{note}"
    )


def main() -> int:
    args = sys.argv[1:]
    seed = DEFAULT_SEED
    if "--seed" in args:
        i = args.index("--seed")
        seed = int(args[i + 1])
        del args[i : i + 2]
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    out = os.path.join(os.path.abspath(args[0]), "light")
    tmp = out + ".tmp"
    if os.path.exists(tmp):
        shutil.rmtree(tmp)
    os.makedirs(tmp)

    src_dir = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
    models = sorted(glob.glob(os.path.join(src_dir, "light_*.onnx")))
    if not models:
        raise SystemExit(f"no light models in {src_dir}")
    for src in models:
        name = os.path.basename(src)[len("light_") : -len(".onnx")]
        make_case(src, os.path.join(tmp, name), seed)

    if os.path.exists(out):
        shutil.rmtree(out)
    os.rename(tmp, out)
    print(f"light: {len(models)} cases (onnxruntime {ort.__version__}, seed {seed})")

    out = os.path.join(os.path.abspath(args[0]), "light-random")
    tmp = out + ".tmp"
    if os.path.exists(tmp):
        shutil.rmtree(tmp)
    os.makedirs(tmp)
    skipped = []
    for src in models:
        name = os.path.basename(src)[len("light_") : -len(".onnx")]
        line = make_random_case(src, os.path.join(tmp, name), seed, name)
        if "SKIPPED" in line:
            skipped.append(name)
        print(line, flush=True)
    if os.path.exists(out):
        shutil.rmtree(out)
    os.rename(tmp, out)
    print(
        f"light-random: {len(models) - len(skipped)} cases"
        + (f", skipped (too big): {' '.join(skipped)}" if skipped else "")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
