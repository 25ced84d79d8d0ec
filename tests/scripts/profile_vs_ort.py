"""Where onnxc and ONNX Runtime spend a model's time, side by side.

    tests/.venv/bin/python tests/scripts/profile_vs_ort.py [--iters 30] [--top 40] MODEL

MODEL is a .onnx file or a case folder (model.onnx, test_data_set_0/
input_K.pb, as the benchmark suite's folders are). A case folder's inputs
go to both sides, so token ids and masks are valid; a bare model gets
uniform floats in [-1, 1) on the ORT side and onnxc bench's own inputs.

Runs `onnxc bench MODEL --profile` (per-node medians) and then ONNX Runtime
with profiling on (one thread, summing each node's `*_kernel_time` events
over the runs). Node names differ after each side's fusions, so times are
matched by what a node computes: convolutions by weight shape, strides,
group and output plane, every other node by operator. Each row is the sum
over the nodes with that key, in ms per run, and onnxc minus ORT; rows come
largest gap first. The two runs are not interleaved: use the totals for
orientation and bench_vs_ort.py for the ratio.
"""

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

ROOT = Path(__file__).resolve().parents[2]
# "1x64x55x55 <- 1x16x55x55 w 64x16x3x3 s1x1 g1 54.0 GFLOP/s"
CONV_ROW = re.compile(r"(\d+(?:x\d+)*) <- \S+ w (\S+) s(\S+) g(\d+)")


def conv_key(weights, strides, group, plane):
    return f"Conv w{weights} s{strides} g{group} @{plane}"


def onnxc_profile(model, inputs, iters):
    onnxc = ROOT / "target" / "release" / "onnxc"
    text = subprocess.run(
        [str(onnxc), "bench", "--profile", "--iters", str(iters), str(model), *map(str, inputs)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    times = collections.defaultdict(float)
    in_nodes = False
    for line in text.splitlines():
        if line.startswith("per node"):
            in_nodes = True
            continue
        if line.startswith("per operator"):
            break
        fields = line.split()
        if not in_nodes or len(fields) < 5 or fields[0] == "ms":
            continue
        ms, op = float(fields[0]), fields[3]
        conv = CONV_ROW.search(line)
        if op == "Conv" and conv:
            output, weights, strides, group = conv.groups()
            dims = output.split("x")
            # A blocked output `N x C/8 x H x W x 8` pairs with ORT's NCHW(c) one by its plane.
            blocked = len(dims) == 5 and dims[4] == "8" and int(dims[1]) * 8 == int(weights.split("x")[0])
            plane = "x".join(dims[2:4] if blocked else dims[2:])
            times[conv_key(weights, strides, group, plane)] += ms
        else:
            times[op] += ms
    return times, text.splitlines()[-1]


def ort_feeds(session, inputs):
    """The case's inputs by position, or uniform floats in [-1, 1)."""
    if inputs:
        arrays = [numpy_helper.to_array(onnx.load_tensor(str(p))) for p in inputs]
        return {i.name: a for i, a in zip(session.get_inputs(), arrays)}
    rng = np.random.default_rng(0)
    shape = lambda i: [d if isinstance(d, int) else 1 for d in i.shape]
    return {i.name: rng.uniform(-1, 1, shape(i)).astype(np.float32) for i in session.get_inputs()}


def ort_profile(model, inputs, iters):
    with tempfile.TemporaryDirectory() as tmp:
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        options.enable_profiling = True
        options.profile_file_prefix = os.path.join(tmp, "ort")
        optimized = os.path.join(tmp, "optimized.onnx")
        options.optimized_model_filepath = optimized
        session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
        graph = onnx.load(optimized).graph
        dims = {t.name: list(t.dims) for t in graph.initializer}
        nodes = {}
        for n in graph.node:
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
            nodes[n.name] = (n.op_type, attrs, list(n.input))
        feeds = ort_feeds(session, inputs)
        for _ in range(max(2, iters // 10)):
            session.run(None, feeds)
        session.end_profiling()
        # A fresh session, so that warm-up runs are not in the profile.
        session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
        for _ in range(iters + 1):
            session.run(None, feeds)
        events = json.load(open(session.end_profiling()))
    times = collections.defaultdict(float)
    for e in events:
        if e.get("cat") != "Node" or not e["name"].endswith("_kernel_time"):
            continue
        name = e["name"][: -len("_kernel_time")]
        op, attrs, inputs = nodes.get(name, ("?", {}, []))
        key = op
        if "Conv" in op and len(inputs) > 1 and inputs[1] in dims:
            out = e.get("args", {}).get("output_type_shape", [{}])[0]
            shape = next(iter(out.values()), []) if out else []
            plane = "x".join(str(d) for d in shape[2:4])
            strides = "x".join(str(s) for s in attrs.get("strides", [1, 1]))
            key = conv_key("x".join(str(d) for d in dims[inputs[1]]), strides, attrs.get("group", 1), plane)
        times[key] += e["dur"] / 1000
    return {k: v / (iters + 1) for k, v in times.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iters", type=int, default=30)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("model", type=Path)
    args = parser.parse_args()
    model, inputs = args.model, []
    if model.is_dir():
        model, inputs = model / "model.onnx", sorted((model / "test_data_set_0").glob("input_*.pb"))
    ours, summary = onnxc_profile(model, inputs, args.iters)
    theirs = ort_profile(model, inputs, args.iters)
    print(f"onnxc bench: {summary}")
    print(f"sum of nodes: onnxc {sum(ours.values()):.2f} ms, ORT {sum(theirs.values()):.2f} ms")
    print(f"{'onnxc':>8} {'ORT':>8} {'gap':>8}  what")
    keys = sorted(set(ours) | set(theirs), key=lambda k: -(ours.get(k, 0) - theirs.get(k, 0)))
    for k in keys[: args.top]:
        a, b = ours.get(k, 0.0), theirs.get(k, 0.0)
        print(f"{a:8.3f} {b:8.3f} {a - b:+8.3f}  {k}")


if __name__ == "__main__":
    sys.exit(main())
