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

The models are IR version 3: every initializer is also listed in graph.input,
so the one real input is the graph input that is not an initializer (it is not
always graph.input[0]; the TensorProto name says which one it is).
"""
from __future__ import annotations

import glob
import os
import shutil
import sys

import numpy as np
import onnxruntime as ort

import onnx
from onnx import TensorProto, helper, numpy_helper

DEFAULT_SEED = 20240501


def real_inputs(graph: onnx.GraphProto) -> list[onnx.ValueInfoProto]:
    inits = {t.name for t in graph.initializer}
    return [vi for vi in graph.input if vi.name not in inits]


def make_case(src: str, case_dir: str, seed: int) -> None:
    model = onnx.load(src)
    graph = model.graph
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

    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape, dtype=np.float32)

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3  # the models have unused initializers; ORT warns
    sess = ort.InferenceSession(src, opts, providers=["CPUExecutionProvider"])
    out_name = graph.output[0].name
    (y,) = sess.run([out_name], {vi.name: x})

    os.makedirs(case_dir)
    shutil.copyfile(src, os.path.join(case_dir, "model.onnx"))
    ds = os.path.join(case_dir, "test_data_set_0")
    os.makedirs(ds)
    with open(os.path.join(ds, "input_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(x, vi.name).SerializeToString())
    with open(os.path.join(ds, "output_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(np.asarray(y), out_name).SerializeToString())
    print(
        f"light/{os.path.basename(case_dir)}: input {vi.name} {shape}, "
        f"output {out_name} {list(y.shape)} (min {y.min():.6g}, max {y.max():.6g})"
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
