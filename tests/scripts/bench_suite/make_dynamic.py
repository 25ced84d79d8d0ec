"""Writes a handful of the fp32 suite's models exported with dynamic axes.

    python make_dynamic.py OUT_DIR [--only NAME,...]

The architectures, seeds and inputs are make_suite.py's; the export names
the dims the model allows to vary (batch, sequence, steps, height, width)
through torch.onnx's `dynamic_axes`, so that the graph computes its shapes
from them (Shape → Gather → Unsqueeze → Concat → Reshape, as exporters
emit). `onnxc info OUT_DIR/<name>/model.onnx` then prints the outputs'
shapes as expressions of those dims. Writes OUT_DIR/<name>/model.onnx and
test_data_set_0 at the suite's sizes, as make_suite.py does. Existing
folders are kept (delete one to remake it).
"""

import argparse
import sys
import zlib
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch
from onnx import numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_suite as suite  # noqa: E402

# name in make_suite.CATALOGUE -> {input name: {axis: dim name}}
DYNAMIC = {
    "bert_small_seq128": {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}},
    "gpt_small_seq64": {"input_ids": {0: "batch", 1: "seq"}},
    "vit_tiny_224": {"image": {0: "batch"}},
    "whisper_tiny_encoder_10s": {"mel": {0: "batch"}},
    "lstm_64_t10": {"x": {0: "steps", 1: "batch"}},
    "gru_64_t10": {"x": {0: "steps", 1: "batch"}},
    "bilstm_256_t100": {"x": {0: "steps", 1: "batch"}},
    "resnet18": {"image": {0: "batch", 2: "height", 3: "width"}},
    "mobilenet_v3_small": {"image": {0: "batch", 2: "height", 3: "width"}},
    "yolo_n_320": {"image": {0: "batch", 2: "height", 3: "width"}},
    "crnn_32x320": {"image": {0: "batch", 3: "width"}},
    "m5_16k": {"wave": {0: "batch", 2: "samples"}},
}


def make(name, out_dir):
    factory, specs = suite.CATALOGUE[name]
    seed = zlib.crc32(name.encode())
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    net = factory()
    suite.calibrate_batchnorms(net, specs, rng)
    net.eval()
    inputs = [suite.make_input(shape, kind, rng) for _, shape, kind in specs]
    folder = out_dir / name
    (folder / "test_data_set_0").mkdir(parents=True, exist_ok=True)
    model_path = folder / "model.onnx"
    with torch.no_grad():
        torch.onnx.export(
            net,
            tuple(torch.from_numpy(x) for x in inputs),
            str(model_path),
            input_names=[n for n, _, _ in specs],
            dynamic_axes=DYNAMIC[name],
            opset_version=17,
            dynamo=False,
        )
    onnx.checker.check_model(str(model_path), full_check=True)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
    outputs = session.run(None, {i.name: x for i, x in zip(session.get_inputs(), inputs)})
    for k, (port, x) in enumerate(zip(session.get_inputs(), inputs)):
        (folder / f"test_data_set_0/input_{k}.pb").write_bytes(numpy_helper.from_array(x, port.name).SerializeToString())
    for k, (port, y) in enumerate(zip(session.get_outputs(), outputs)):
        (folder / f"test_data_set_0/output_{k}.pb").write_bytes(numpy_helper.from_array(y, port.name).SerializeToString())


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--only", help="comma-separated model names")
    args = parser.parse_args()
    names = args.only.split(",") if args.only else list(DYNAMIC)
    for name in names:
        if name not in DYNAMIC:
            sys.exit(f"no model named {name}; the dynamic suite has: {', '.join(DYNAMIC)}")
        if (args.out_dir / name / "test_data_set_0/output_0.pb").exists():
            continue
        print(f"making {name}", flush=True)
        make(name, args.out_dir)


if __name__ == "__main__":
    main()
