"""Writes the quantized benchmark suite from the fp32 one (issue #31).

    python quantize.py FP32_SUITE OUT_DIR [--only NAME,...]

(normally `~/.cache/onnxc-bench/suite` and `~/.cache/onnxc-bench/qsuite`,
with make.sh's venv: ONNX Runtime's own quantization tool, nothing else).
For every model of STATIC and DYNAMIC present in FP32_SUITE writes
OUT_DIR/<name>/ with
  model.onnx                   the quantized model
  test_data_set_0/input_K.pb   the fp32 case's inputs, copied
  test_data_set_0/output_K.pb  ONNX Runtime's outputs of the quantized model
                               with graph optimisations off, i.e. the QDQ
                               reference semantics (float operators between
                               DequantizeLinear and QuantizeLinear), one thread
so that bench_vs_ort.py times it and `onnxc test` checks it, as for the fp32
suite. The two ways users ship int8:
  STATIC   quantize_static, QDQ format, per-channel int8 weights, uint8
           activations, MinMax calibration on the case's input and
           CALIBRATION_RUNS more seeded normal draws of its shape (CNNs and
           the detector)
  DYNAMIC  quantize_dynamic (DynamicQuantizeLinear + MatMulInteger, int8
           weights) for the transformers
Existing folders are kept (delete one to remake it).
"""

import argparse
import shutil
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper
from onnxruntime.quantization import (
    CalibrationDataReader,
    CalibrationMethod,
    QuantFormat,
    QuantType,
    quantize_dynamic,
    quantize_static,
)

STATIC = ["resnet18", "mobilenet_v2", "efficientnet_b0", "regnet_y_400mf", "yolo_n_320"]
DYNAMIC = ["bert_small_seq128", "gpt2_like_seq128", "gpt_small_seq64", "vit_tiny_224"]
CALIBRATION_RUNS = 4
ort.set_default_logger_severity(3)


def case_inputs(case: Path, model: onnx.ModelProto) -> dict:
    """The fp32 case's inputs by the graph's input names, in order."""
    files = sorted((case / "test_data_set_0").glob("input_*.pb"), key=lambda p: int(p.stem.split("_")[1]))
    names = [i.name for i in model.graph.input]
    return {name: numpy_helper.to_array(onnx.load_tensor(str(f))) for name, f in zip(names, files)}


class Calibration(CalibrationDataReader):
    """The case's input, then seeded normal draws of the same shapes."""

    def __init__(self, given: dict, seed: int):
        rng = np.random.default_rng(seed)
        draws = [{k: rng.standard_normal(v.shape).astype(v.dtype) for k, v in given.items()}
                 for _ in range(CALIBRATION_RUNS)]
        self.batches = iter([given, *draws])

    def get_next(self):
        return next(self.batches, None)


def reference(model_path: Path, feeds: dict) -> list:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(str(model_path), opts, providers=["CPUExecutionProvider"])
    return list(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))


def quantize(name: str, src: Path, dst: Path, static: bool):
    fp32 = onnx.load(str(src))
    feeds = case_inputs(src.parent, fp32)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "model.onnx"
        if static:
            quantize_static(
                str(src), str(out), Calibration(feeds, seed=len(name)),
                quant_format=QuantFormat.QDQ, per_channel=True, weight_type=QuantType.QInt8,
                activation_type=QuantType.QUInt8, calibrate_method=CalibrationMethod.MinMax,
            )
        else:
            quantize_dynamic(str(src), str(out), weight_type=QuantType.QInt8)
        outputs = reference(out, feeds)
        data = dst / "test_data_set_0"
        data.mkdir(parents=True)
        shutil.copy(out, dst / "model.onnx")
    for k, (input_name, value) in enumerate(feeds.items()):
        onnx.save_tensor(numpy_helper.from_array(value, input_name), str(data / f"input_{k}.pb"))
    for k, (output_name, value) in enumerate(outputs):
        onnx.save_tensor(numpy_helper.from_array(value, output_name), str(data / f"output_{k}.pb"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("fp32_suite", type=Path)
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--only", help="comma-separated model names")
    args = ap.parse_args()
    only = set(args.only.split(",")) if args.only else None
    for name, static in [(n, True) for n in STATIC] + [(n, False) for n in DYNAMIC]:
        src, dst = args.fp32_suite / name / "model.onnx", args.out_dir / name
        if (only and name not in only) or dst.exists():
            continue
        if not src.is_file():
            print(f"skip {name}: no {src}")
            continue
        print(f"{name}: {'static QDQ' if static else 'dynamic'}", flush=True)
        quantize(name, src, dst, static)


if __name__ == "__main__":
    main()
