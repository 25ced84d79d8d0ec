#!/usr/bin/env python3
"""Write the ONNX backend node test cases, plus the wheel's own model cases.

Usage: make_node_cases.py OUT_DIR      (OUT_DIR is normally tests/data)

Writes
  OUT_DIR/node/<case>/model.onnx
  OUT_DIR/node/<case>/test_data_set_N/input_K.pb, output_K.pb
for every case from onnx.backend.test.case.node.collect_testcases(), and copies
onnx/backend/test/data/{simple,pytorch-converted,pytorch-operator}/<case>/ from
the installed onnx wheel to OUT_DIR/<folder>/<case>/.

Values are serialised by the graph input/output's declared type, the same way
onnx's own data generator does: tensors with numpy_helper.from_array (or as-is
when the case already holds a TensorProto), sequences with from_list, maps
with from_dict, optionals with from_optional; each proto is named after the
graph input/output it feeds.

Every folder is written to a temporary sibling and renamed into place, so an
interrupted run never leaves a half-written folder behind.
"""
from __future__ import annotations

import os
import shutil
import sys
import warnings

import numpy as np

import onnx
from onnx import TensorProto, numpy_helper

SHIPPED_FOLDERS = ("simple", "pytorch-converted", "pytorch-operator")


def serialise(value, value_info: onnx.ValueInfoProto) -> bytes:
    kind = value_info.type.WhichOneof("value")
    name = value_info.name
    if kind == "map_type":
        proto = numpy_helper.from_dict(value, name)
    elif kind == "sequence_type":
        proto = numpy_helper.from_list(value, name)
    elif kind == "optional_type":
        proto = numpy_helper.from_optional(value, name)
    elif kind == "tensor_type":
        if isinstance(value, TensorProto):
            proto = value
        else:
            # numpy scalars (np.float32(1.0)) appear in a few cases
            proto = numpy_helper.from_array(np.asarray(value), name)
    else:
        raise TypeError(f"{name}: unsupported value type {kind!r}")
    return proto.SerializeToString()


def write_case(case, case_dir: str) -> None:
    os.makedirs(case_dir)
    model = case.model
    with open(os.path.join(case_dir, "model.onnx"), "wb") as f:
        f.write(model.SerializeToString())
    graph = model.graph
    for i, (inputs, outputs) in enumerate(case.data_sets):
        ds = os.path.join(case_dir, f"test_data_set_{i}")
        os.makedirs(ds)
        if len(inputs) > len(graph.input) or len(outputs) > len(graph.output):
            raise ValueError(f"{case.name}: more values than graph inputs/outputs")
        for j, value in enumerate(inputs):
            with open(os.path.join(ds, f"input_{j}.pb"), "wb") as f:
                f.write(serialise(value, graph.input[j]))
        for j, value in enumerate(outputs):
            with open(os.path.join(ds, f"output_{j}.pb"), "wb") as f:
                f.write(serialise(value, graph.output[j]))


def replace_dir(tmp: str, final: str) -> None:
    if os.path.exists(final):
        shutil.rmtree(final)
    os.rename(tmp, final)


def fresh_tmp(path: str) -> str:
    tmp = path + ".tmp"
    if os.path.exists(tmp):
        shutil.rmtree(tmp)
    os.makedirs(tmp)
    return tmp


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = os.path.abspath(sys.argv[1])
    os.makedirs(out, exist_ok=True)

    # The case generators compute expected outputs with numpy; some of them
    # overflow or divide by zero on purpose (inf/nan cases).
    warnings.simplefilter("ignore", RuntimeWarning)
    import onnx.backend.test.case.node as node_cases

    cases = node_cases.collect_testcases()
    names = [c.name for c in cases]
    if len(set(names)) != len(names):
        raise SystemExit("duplicate node case names")

    node_dir = os.path.join(out, "node")
    tmp = fresh_tmp(node_dir)
    for case in sorted(cases, key=lambda c: c.name):
        write_case(case, os.path.join(tmp, case.name))
    replace_dir(tmp, node_dir)
    print(f"node: {len(cases)} cases (onnx {onnx.__version__})")

    data_root = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
    for folder in SHIPPED_FOLDERS:
        src = os.path.join(data_root, folder)
        dst = os.path.join(out, folder)
        tmp = dst + ".tmp"
        if os.path.exists(tmp):
            shutil.rmtree(tmp)
        shutil.copytree(src, tmp, ignore=shutil.ignore_patterns("__pycache__"))
        replace_dir(tmp, dst)
        n = sum(
            1
            for d in os.listdir(dst)
            if os.path.isfile(os.path.join(dst, d, "model.onnx"))
        )
        print(f"{folder}: {n} cases (copied from the onnx wheel)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
