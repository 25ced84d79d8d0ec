"""Element-type coverage: which types of each operator's constraints onnxc runs.

    tests/.venv/bin/python tests/scripts/type_coverage.py [ONNXC] [--filter OP] [--markdown]

For every default-domain operator onnxc compiles in a simple single-node form
(the SPECS table below), reads the operator's type constraints from
`onnx.defs.get_schema`, and for each allowed element type among f16, bf16,
f32, f64, the 8- to 64-bit integers and bool builds one small model, computes
its expected output with `onnx.reference.ReferenceEvaluator`, and writes it as
a backend-style case folder (model.onnx, test_data_set_0/input_K.pb,
output_K.pb) in a temporary directory. One `onnxc test` run per tolerance
class then checks them all. Prints a table operator x type (ok, FAIL for
wrong values, no for unsupported, ref when the reference evaluator itself
cannot run the case, blank when the schema does not allow the type),
followed by the reasons of everything that is not ok.

The ONNX reference computes f16/bf16 step by step in the 16-bit type, while
the spec lets an implementation compute them in f32 and round once; their
cases are therefore compared at a tolerance of a few units in the last place
of the type (f16 rtol 4e-3, bf16 rtol 3e-2) instead of the backend's 1e-3.
"""

import argparse
import collections
import pathlib
import re
import subprocess
import sys
import tempfile
import warnings

import ml_dtypes
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

ROOT = pathlib.Path(__file__).resolve().parents[2]
OPSET = onnx.defs.onnx_opset_version()

# Column name, schema type string, TensorProto code, numpy dtype.
TYPES = [
    ("f16", "float16", TensorProto.FLOAT16, np.float16),
    ("bf16", "bfloat16", TensorProto.BFLOAT16, ml_dtypes.bfloat16),
    ("f32", "float", TensorProto.FLOAT, np.float32),
    ("f64", "double", TensorProto.DOUBLE, np.float64),
    ("i8", "int8", TensorProto.INT8, np.int8),
    ("i16", "int16", TensorProto.INT16, np.int16),
    ("i32", "int32", TensorProto.INT32, np.int32),
    ("i64", "int64", TensorProto.INT64, np.int64),
    ("u8", "uint8", TensorProto.UINT8, np.uint8),
    ("u16", "uint16", TensorProto.UINT16, np.uint16),
    ("u32", "uint32", TensorProto.UINT32, np.uint32),
    ("u64", "uint64", TensorProto.UINT64, np.uint64),
    ("bool", "bool", TensorProto.BOOL, np.bool_),
]
BY_SCHEMA = {t[1]: t for t in TYPES}
BY_NAME = {t[0]: t for t in TYPES}

# onnxc test flags per tolerance class (see the module docstring).
TOLERANCE = {"f16": ["--rtol", "4e-3", "--atol", "1e-3"], "bf16": ["--rtol", "3e-2", "--atol", "1e-2"], "": []}


class In:
    """A graph input of the formal parameter's type: random values of `shape`
    in [lo, hi] (floats) or [ilo, ihi] (integers, clipped at 0 for unsigned)."""

    def __init__(self, shape, lo=-1.0, hi=1.0, ilo=-5, ihi=5, const=False):
        self.shape, self.lo, self.hi, self.ilo, self.ihi, self.const = shape, lo, hi, ilo, ihi, const

    def value(self, rng, dtype):
        if dtype == np.bool_:
            return rng.random(self.shape) > 0.5
        if np.issubdtype(dtype, np.integer):
            lo = max(self.ilo, 0) if np.issubdtype(dtype, np.unsignedinteger) else self.ilo
            return rng.integers(lo, max(self.ihi, lo) + 1, size=self.shape).astype(dtype)
        return rng.uniform(self.lo, self.hi, size=self.shape).astype(dtype)


class Fixed:
    """Given values: of their own dtype, or (`typed`) cast to the formal
    parameter's type. An initializer when `const`, else a graph input."""

    def __init__(self, values, typed=False, const=True):
        self.values, self.typed, self.const = np.asarray(values), typed, const

    def value(self, rng, dtype):
        return self.values.astype(dtype) if self.typed else self.values


def ints(*v):
    return Fixed(np.array(v, dtype=np.int64))


class Spec:
    """One single-node form of an operator. `vary` names the type parameter
    the columns set (default: input 0's); `fixed` pins other parameters;
    `attrs` may be a function of the varied type's TensorProto code."""

    def __init__(self, op, inputs, attrs=None, vary=None, fixed=None, outputs=1, label=None):
        self.op, self.inputs, self.attrs, self.vary = op, inputs, attrs or {}, vary
        self.fixed, self.outputs, self.label = fixed or {}, outputs, label or op


def unary(op, lo=-1.0, hi=1.0, **kw):
    return Spec(op, [In((2, 3, 4), lo, hi)], **kw)


def binary(op, ilo=-5, ihi=5, lo=-1.0, hi=1.0, **kw):
    return Spec(op, [In((2, 3, 4), lo, hi), In((3, 4), lo, hi, ilo, ihi)], **kw)


def reduce(op, lo=-1.0, hi=1.0):
    return Spec(op, [In((2, 3, 4), lo, hi), ints(1)])


SPECS = [
    *[unary(op) for op in ["Abs", "Neg", "Sign", "Relu", "Ceil", "Floor", "Round", "Erf", "Exp", "Sigmoid"]],
    *[unary(op) for op in ["Cos", "Sin", "Tan", "Atan", "Sinh", "Cosh", "Asinh", "Tanh", "Softplus", "Softsign"]],
    *[unary(op) for op in ["Mish", "Selu", "Celu", "Elu", "ThresholdedRelu", "Shrink", "Swish", "Gelu"]],
    *[unary(op) for op in ["HardSigmoid", "HardSwish", "LeakyRelu", "Identity", "Dropout", "IsNaN", "IsInf"]],
    *[unary(op) for op in ["Not", "BitwiseNot"]],
    unary("Log", 0.1, 2.0),
    unary("Sqrt", 0.1, 2.0),
    unary("Reciprocal", 0.5, 2.0),
    unary("Acosh", 1.1, 3.0),
    *[unary(op, -0.9, 0.9) for op in ["Asin", "Acos", "Atanh"]],
    *[binary(op) for op in ["Add", "Sub", "Mul", "Max", "Min", "Mean", "Sum", "PRelu"]],
    *[binary(op) for op in ["Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual"]],
    *[binary(op) for op in ["And", "Or", "Xor", "BitwiseAnd", "BitwiseOr", "BitwiseXor"]],
    binary("Div", ilo=1, ihi=5, lo=0.5, hi=2.0),
    binary("Mod", ilo=1, ihi=5, lo=0.5, hi=2.0, attrs=lambda t: {"fmod": int(t in FLOAT_CODES)}),
    binary("Pow", ilo=0, ihi=3, lo=0.5, hi=2.0),
    binary("BitShift", ilo=0, ihi=3, attrs={"direction": "LEFT"}),
    Spec("Where", [In((3, 4)), In((3, 4)), In((3, 4))], vary="T"),
    Spec("Clip", [In((3, 4)), In((), -0.5, -0.5, -2, -2), In((), 0.5, 0.5, 2, 2)]),
    Spec("Cast", [In((3, 4))], attrs={"to": TensorProto.FLOAT}, fixed={"T2": "float"}, label="Cast(T->f32)"),
    Spec("Cast", [In((3, 4))], attrs=lambda t: {"to": t}, vary="T2", fixed={"T1": "float"}, label="Cast(f32->T)"),
    Spec("CastLike", [In((3, 4)), In((1,))], fixed={"T2": "float"}, label="CastLike(T->f32)"),
    Spec("CastLike", [In((3, 4)), In((1,))], vary="T2", fixed={"T1": "float"}, label="CastLike(f32->T)"),
    Spec("MatMul", [In((3, 4)), In((4, 5))]),
    Spec("Gemm", [In((3, 4)), In((4, 5)), In((5,))]),
    Spec("Einsum", [In((3, 4)), In((4, 5))], attrs={"equation": "ij,jk->ik"}),
    Spec("Det", [In((2, 3, 3))]),
    Spec("Conv", [In((1, 2, 5, 5)), In((3, 2, 3, 3)), In((3,))]),
    Spec("ConvTranspose", [In((1, 2, 3, 3)), In((2, 3, 3, 3)), In((3,))]),
    Spec("Col2Im", [In((1, 8, 9)), ints(4, 4), ints(2, 2)]),
    Spec(
        "DeformConv",
        [In((1, 2, 4, 4)), In((3, 2, 2, 2)), In((1, 8, 3, 3), -0.7, 0.7), In((3,)), In((1, 4, 3, 3), 0.0, 1.0)],
    ),
    *[Spec(op, [In((1, 2, 5, 5))], attrs={"kernel_shape": [2, 2]}) for op in ["MaxPool", "AveragePool", "LpPool"]],
    *[Spec(op, [In((1, 2, 4, 4))]) for op in ["GlobalMaxPool", "GlobalAveragePool", "GlobalLpPool"]],
    Spec("MaxUnpool", [In((1, 1, 2, 2)), Fixed(np.array([[[[0, 3], [9, 14]]]], dtype=np.int64))],
         attrs={"kernel_shape": [2, 2], "strides": [2, 2]}),
    Spec("RoiAlign", [In((1, 2, 6, 6)), Fixed([[0, 0, 3, 3], [1, 1, 5, 5]], typed=True), ints(0, 0)],
         attrs={"output_height": 2, "output_width": 2}),
    Spec("MaxRoiPool", [In((1, 2, 6, 6)), Fixed([[0, 0, 0, 3, 3], [0, 1, 1, 5, 5]], typed=True)],
         attrs={"pooled_shape": [2, 2]}),
    Spec("BatchNormalization", [In((2, 3, 4, 4)), In((3,)), In((3,)), In((3,)), In((3,), 0.5, 1.5)]),
    Spec("BatchNormalization", [In((2, 3, 4, 4)), In((3,)), In((3,)), In((3,)), In((3,), 0.5, 1.5)],
         attrs={"training_mode": 1}, outputs=3, label="BatchNormalization(training)"),
    Spec("LRN", [In((1, 5, 3, 3))], attrs={"size": 3}),
    Spec("InstanceNormalization", [In((2, 3, 4)), In((3,)), In((3,))]),
    Spec("LayerNormalization", [In((2, 3, 4)), In((4,)), In((4,))]),
    Spec("GroupNormalization", [In((2, 4, 3)), In((4,)), In((4,))], attrs={"num_groups": 2}),
    Spec("RMSNormalization", [In((2, 3, 4)), In((4,))]),
    Spec("MeanVarianceNormalization", [In((2, 3, 4, 4))]),
    Spec("LpNormalization", [In((2, 3, 4))]),
    *[unary(op) for op in ["Softmax", "LogSoftmax", "Hardmax"]],
    *[reduce(op) for op in ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1"]],
    *[reduce(op) for op in ["ReduceL2", "ReduceLogSumExp", "ReduceSumSquare"]],
    reduce("ReduceLogSum", 0.1, 2.0),
    *[Spec(op, [In((2, 3, 4))], attrs={"axis": 1}) for op in ["ArgMax", "ArgMin"]],
    Spec("Reshape", [In((2, 3, 4)), ints(4, 6)]),
    Spec("Flatten", [In((2, 3, 4))]),
    Spec("Squeeze", [In((2, 1, 4)), ints(1)]),
    Spec("Unsqueeze", [In((2, 3)), ints(1)]),
    Spec("Transpose", [In((2, 3, 4))], attrs={"perm": [2, 0, 1]}),
    Spec("Concat", [In((2, 3)), In((1, 3))], attrs={"axis": 0}),
    Spec("Split", [In((4, 3))], attrs={"axis": 0, "num_outputs": 2}, outputs=2),
    Spec("Slice", [In((4, 5)), ints(1), ints(3), ints(0)]),
    Spec("Expand", [In((3, 1)), ints(2, 3, 4)]),
    Spec("Pad", [In((2, 3)), ints(0, 1, 1, 0)]),
    Spec("Shape", [In((2, 3))]),
    Spec("Size", [In((2, 3))]),
    Spec("ConstantOfShape", [ints(2, 3)], vary="T2",
         attrs=lambda t: {"value": helper.make_tensor("value", t, [1], [1])}),
    Spec("Range", [Fixed(0, typed=True), Fixed(5, typed=True), Fixed(1, typed=True)]),
    Spec("Tile", [In((2, 3)), ints(2, 1)]),
    Spec("Gather", [In((4, 3)), Fixed([0, 2, 3], const=False)], fixed={"Tind": "int64"}),
    Spec("GatherElements", [In((3, 3)), Fixed([[0, 1, 2], [2, 0, 1]], const=False)], fixed={"Tind": "int64"}),
    Spec("GatherND", [In((2, 2)), Fixed([[0, 0], [1, 1]], const=False)]),
    Spec("OneHot", [Fixed([0, 2, 1], const=False), Fixed(np.int64(3)), Fixed([0, 1], typed=True)], vary="T3",
         fixed={"T1": "int64", "T2": "int64"}),
    Spec("TopK", [In((3, 4)), ints(2)], outputs=2),
    Spec("ScatterElements", [In((3, 3)), Fixed([[1, 0, 2], [0, 2, 1]], const=False), In((2, 3))],
         fixed={"Tind": "int64"}),
    Spec("ScatterND", [In((4,)), Fixed([[1], [3]], const=False), In((2,))]),
    Spec("TensorScatter", [In((1, 5, 2)), In((1, 2, 2)), Fixed([1], const=False)]),
    Spec("Trilu", [In((3, 3))]),
    Spec("EyeLike", [In((3, 3))], vary="T1", fixed={"T2": None}),
    Spec("CumSum", [In((2, 3)), Fixed(np.int64(1))], fixed={"T2": "int64"}),
    Spec("CumProd", [In((2, 3)), Fixed(np.int64(1))], fixed={"T2": "int64"}),
    Spec("ReverseSequence", [In((4, 2)), Fixed([3, 2], const=False)], attrs={"time_axis": 0, "batch_axis": 1}),
    Spec("SpaceToDepth", [In((1, 2, 4, 4))], attrs={"blocksize": 2}),
    Spec("DepthToSpace", [In((1, 8, 2, 2))], attrs={"blocksize": 2}),
    Spec("CenterCropPad", [In((3, 4)), ints(2, 5)], fixed={"Tind": "int64"}),
    Spec("NegativeLogLikelihoodLoss", [In((2, 3)), Fixed([0, 2], const=False)], fixed={"Tind": "int64"}),
    Spec("SoftmaxCrossEntropyLoss", [In((2, 3)), Fixed([0, 2], const=False)], fixed={"Tind": "int64"}),
    Spec("Resize", [In((1, 1, 2, 2)), None, Fixed(np.array([1, 1, 2, 2], dtype=np.float32))], vary="T1",
         fixed={"T2": "float"}),
    Spec("GridSample", [In((1, 1, 3, 3)), In((1, 2, 2, 2))], vary="T1"),
    Spec("AffineGrid", [In((1, 2, 3)), ints(1, 1, 3, 3)]),
    Spec("RNN", [In((2, 1, 3)), In((1, 4, 3)), In((1, 4, 4))], attrs={"hidden_size": 4}),
    Spec("GRU", [In((2, 1, 3)), In((1, 12, 3)), In((1, 12, 4))], attrs={"hidden_size": 4}),
    Spec("LSTM", [In((2, 1, 3)), In((1, 16, 3)), In((1, 16, 4))], attrs={"hidden_size": 4}),
    Spec("DFT", [In((1, 4, 1))], vary="T1"),
    Spec("STFT", [In((1, 8, 1)), Fixed(np.int64(2)), None, Fixed(np.int64(4))], vary="T1", fixed={"T2": "int64"}),
    *[Spec(op, [Fixed(np.int64(4))], vary="T2", attrs=lambda t: {"output_datatype": t}, fixed={"T1": "int64"})
      for op in ["HannWindow", "HammingWindow", "BlackmanWindow"]],
    Spec("MelWeightMatrix", [Fixed(np.int64(2)), Fixed(np.int64(8)), Fixed(np.int64(8000)),
                             Fixed(np.float32(0)), Fixed(np.float32(4000))],
         vary="T3", attrs=lambda t: {"output_datatype": t}, fixed={"T1": "int64", "T2": "float"}),
    Spec("Attention", [In((1, 2, 3, 4)), In((1, 2, 3, 4)), In((1, 2, 3, 4))], vary="T1"),
    Spec("RotaryEmbedding", [In((1, 2, 3, 4)), In((1, 3, 2)), In((1, 3, 2))]),
    Spec("SwiGLU", [In((2, 4)), In((2, 4))]),
]
FLOAT_CODES = {TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.FLOAT, TensorProto.DOUBLE}


def allowed(schema):
    """Type parameter -> allowed column names (in TYPES order)."""
    out = {}
    for c in schema.type_constraints:
        names = {s[len("tensor(") : -1] for s in c.allowed_type_strs if s.startswith("tensor(")}
        out[c.type_param_str] = [t[0] for t in TYPES if t[1] in names]
    return out


def formal_type(schema, i):
    """The type string (parameter name or tensor(x)) of formal input `i`."""
    f = schema.inputs[min(i, len(schema.inputs) - 1)]
    return f.type_str


def choose(params, vary, col, fixed):
    """Column name for every type parameter: `vary` gets `col`, pinned ones
    their pin, the others the same type when allowed, else f32, else the
    first allowed."""
    chosen = {}
    for p, names in params.items():
        if p == vary:
            chosen[p] = col
        elif p in fixed:
            chosen[p] = None if fixed[p] is None else BY_SCHEMA[fixed[p]][0]
        elif col in names:
            chosen[p] = col
        elif "f32" in names:
            chosen[p] = "f32"
        else:
            chosen[p] = names[0] if names else None
    return chosen


def build(spec, schema, col, seed):
    """(model, input arrays) for one case, or raises."""
    params = allowed(schema)
    vary = spec.vary or formal_type(schema, 0)
    chosen = choose(params, vary, col, spec.fixed)
    rng = np.random.default_rng(seed)
    graph_inputs, initializers, feeds, names = [], [], [], []
    for i, src in enumerate(spec.inputs):
        if src is None:
            names.append("")
            continue
        ts = formal_type(schema, i)
        tcol = chosen.get(ts) if ts in params else BY_SCHEMA.get(ts[len("tensor(") : -1], (None,))[0]
        dtype = BY_NAME[tcol][3] if tcol else np.float32
        arr = np.asarray(src.value(rng, dtype))
        name = f"x{i}"
        names.append(name)
        if src.const:
            initializers.append(numpy_helper.from_array(arr, name))
        else:
            code = helper.np_dtype_to_tensor_dtype(arr.dtype)
            graph_inputs.append(helper.make_tensor_value_info(name, code, arr.shape))
            feeds.append((name, arr))
    code = BY_NAME[col][2]
    attrs = spec.attrs(code) if callable(spec.attrs) else spec.attrs
    outs = [f"y{k}" for k in range(spec.outputs)]
    node = helper.make_node(spec.op, names, outs, **attrs)

    def model(outputs):
        g = helper.make_graph([node], "case", graph_inputs, outputs, initializer=initializers)
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])

    untyped = model([helper.make_empty_tensor_value_info(o) for o in outs])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = [np.asarray(r) for r in ReferenceEvaluator(untyped).run(None, dict(feeds))]
    # The schema's output type, where the reference's numpy promotes
    # (ReduceSumSquare of i32 gives i64 there).
    inferred = onnx.shape_inference.infer_shapes(untyped).graph.output
    for k, o in enumerate(inferred):
        code = o.type.tensor_type.elem_type
        if code:
            results[k] = results[k].astype(helper.tensor_dtype_to_np_dtype(code))
    typed = [
        helper.make_tensor_value_info(o, helper.np_dtype_to_tensor_dtype(r.dtype), r.shape)
        for o, r in zip(outs, results)
    ]
    return model(typed), feeds, results


def write_case(folder, model, feeds, results):
    data = folder / "test_data_set_0"
    data.mkdir(parents=True)
    onnx.save(model, folder / "model.onnx")
    for k, (name, arr) in enumerate(feeds):
        (data / f"input_{k}.pb").write_bytes(numpy_helper.from_array(arr, name).SerializeToString())
    for k, (out, arr) in enumerate(zip(model.graph.output, results)):
        (data / f"output_{k}.pb").write_bytes(numpy_helper.from_array(arr, out.name).SerializeToString())


def run_onnxc(onnxc, folder, flags):
    out = subprocess.run([onnxc, "test", str(folder), *flags], capture_output=True, text=True).stdout
    verdicts = {}
    for line in out.splitlines():
        m = re.match(r"^(PASS|FAIL) ([^:]+)(?::\s*(.*))?$", line)
        if m:
            verdicts[m.group(2)] = None if m.group(1) == "PASS" else (m.group(3) or "")
    return verdicts


def short_reason(reason):
    """An onnxc failure reason without the case path; 'FAIL' or 'no'."""
    reason = re.sub(r"^\S*model\.onnx: ", "", reason)
    wrong = re.match(r"^output \d+:", reason) is not None
    return ("FAIL" if wrong else "no"), reason


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("onnxc", nargs="?", default=str(ROOT / "target" / "release" / "onnxc"))
    ap.add_argument("--filter", default="", help="only specs whose label contains this")
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    args = ap.parse_args()
    cells = collections.OrderedDict()
    reasons = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        pending = collections.defaultdict(dict)  # tolerance class -> case name -> (label, col)
        for n, spec in enumerate(s for s in SPECS if args.filter in s.label):
            row = cells.setdefault(spec.label, {})
            try:
                schema = onnx.defs.get_schema(spec.op, OPSET)
            except onnx.defs.SchemaError:
                continue
            params = allowed(schema)
            vary = spec.vary or formal_type(schema, 0)
            for col in params.get(vary, []):
                try:
                    model, feeds, results = build(spec, schema, col, seed=n)
                except Exception as e:  # the reference cannot run this case
                    row[col] = "ref"
                    reasons.append((spec.label, col, "reference: " + str(e).splitlines()[0][:150]))
                    continue
                tol = col if col in TOLERANCE else ""
                name = f"{re.sub(r'[^A-Za-z0-9]', '_', spec.label)}__{col}"
                write_case(tmp / (tol or "exact") / name, model, feeds, results)
                pending[tol][name] = (spec.label, col)
        for tol, cases in pending.items():
            verdicts = run_onnxc(args.onnxc, tmp / (tol or "exact"), TOLERANCE[tol])
            for name, (label, col) in cases.items():
                reason = verdicts.get(name, "no verdict")
                if reason is None:
                    cells[label][col] = "ok"
                else:
                    code, text = short_reason(reason)
                    cells[label][col] = code
                    reasons.append((label, col, text))
    print_table(cells, args.markdown)
    print()
    for label, col, text in reasons:
        print(f"- {label} {col}: {text[:200]}")


def print_table(cells, markdown):
    cols = [t[0] for t in TYPES]
    width = max(len(k) for k in cells)
    if markdown:
        print("| op | " + " | ".join(cols) + " |")
        print("|---|" + "---|" * len(cols))
        for label, row in cells.items():
            print(f"| {label} | " + " | ".join(row.get(c, "") for c in cols) + " |")
    else:
        print(" " * width + "  " + " ".join(f"{c:>4}" for c in cols))
        for label, row in cells.items():
            print(f"{label:<{width}}  " + " ".join(f"{row.get(c, ''):>4}" for c in cols))
    counts = collections.Counter(v for row in cells.values() for v in row.values())
    print(f"\n{counts['ok']} ok, {counts['FAIL']} wrong, {counts['no']} unsupported, {counts['ref']} reference-only")


if __name__ == "__main__":
    sys.exit(main())
